/* SPDX-License-Identifier: MIT */
/*
 * The "mmap" engine (rf_config.map): every file mapped whole, read-only,
 * shared with the page cache.  A read does not copy: it faults a range in
 * (MADV_POPULATE_READ in the caller's thread, skipped when mincore says every
 * page is resident already) and gives a pointer into the map, so the bytes
 * are read where they lie.  It has its own calls rather than rf_io's, whose
 * reads land in the caller's buffers.
 *
 * A mapped file that shrinks, or whose disk fails, after its pages were
 * faulted in raises SIGBUS when touched, which a library cannot turn into an
 * error: rf_io_map_range turns the common cases (a short file, a page that
 * cannot be read at that time) into errors of the range.
 *
 * Thread rules: rf_io_map_range from one thread at a time; the pointers it
 * gives may be read from any thread until rf_io_map_close.
 */
#ifndef RF_IO_MMAP_H
#define RF_IO_MMAP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct rf_io_map rf_io_map;

/* A map of up to nfiles files whose ranges are at most max_span bytes;
 * messages (errors, the fallback below) go to diag. */
int rf_io_map_open(rf_io_map **out, size_t nfiles, uint64_t max_span, rf_diag *diag);

/* Map `path` whole as file `index` (< nfiles).  RF_ETRUNCATED for an empty
 * file; the message names the file. */
int rf_io_map_add(rf_io_map *m, size_t index, const char *path);

/* Fault [offset, offset + len) of file `index` in and set *p to it (to the
 * file's end when the file is shorter).  Returns the bytes there (short
 * when the file ends early), or a negative errno: a page that cannot be read
 * is -EIO.  Kernels before 5.14 lack MADV_POPULATE_READ: MADV_WILLNEED
 * starts the reads instead (logged once), and the reader of the bytes faults
 * them in. */
int64_t rf_io_map_range(rf_io_map *m, size_t index, uint64_t offset, uint64_t len,
			const uint8_t **p);

/* Unmap everything and free; NULL is a no-op; clears *m. */
void rf_io_map_close(rf_io_map **m);

#endif
