/* SPDX-License-Identifier: MIT */
/*
 * The reader: whole reads of file ranges into caller buffers, asynchronous,
 * many in flight.  Engines, chosen at open and reported by rf_io_engine():
 *  - "io_uring": liburing, O_DIRECT by default, the pinned region as
 *    registered buffers (READ_FIXED) and registered files, batched submits;
 *  - "io_uring-unregistered": the same when buffer registration is refused
 *    (RLIMIT_MEMLOCK), plain READ into the same memory;
 *  - "pread": a small pool of threads doing pread(2), when io_uring cannot
 *    be set up (old kernel, seccomp, kernel.io_uring_disabled).
 *  - "http": every file is a URL (io_remote.c); "io_uring+http" (or
 *    "pread+http") when local files and URLs are mixed.
 * O_DIRECT refused by a file system (tmpfs, some FUSE) falls back to
 * buffered reads for that file.  Each fallback is logged once (RF_LOG_WARN)
 * and visible through rf_io_engine() / rf_io_direct().
 *
 * A read completes only when all `len` bytes are in (short reads are
 * resubmitted for the rest; -EAGAIN/-EINTR retried) or on error.  Reading
 * past end of file completes with the bytes up to EOF (res < len).
 * Transient errors (-EIO, -EAGAIN after many immediate retries, -ETIMEDOUT:
 * what NFS, Lustre and FUSE return for a moment) are retried up to 5 times
 * per read with backoff (1, 4, 16, 64, 256 ms, waited on the reaping thread),
 * each retry logged (RF_LOG_WARN) and counted (rf_io_retries), before the
 * read completes with the error.
 *
 * Thread rules: submit and wait from one thread (the loader's reader
 * thread); the pread engine's workers are internal.
 *
 * The environment, read at rf_io_open:
 *  - RINGFEED_IO=pread|uring|auto overrides cfg->engine (pread forces the
 *    fallback engine; uring fails the open if io_uring cannot be set up).
 * Test-only hooks (never set them in production):
 *  - RINGFEED_IO_FAIL_AT=offset: the piece of a read that covers this file
 *    offset (of any file) completes with -EIO, on both engines (every
 *    retry too);
 *  - RINGFEED_IO_FAIL_TIMES=n (with FAIL_AT): only the first n reads of
 *    that piece fail (a transient error: n <= 5 are retried away);
 *  - RINGFEED_IO_REFUSE_DIRECT=1: rf_io_add_file behaves as if the file
 *    system refused O_DIRECT (EINVAL), so the buffered fallback runs; any
 *    other string: only for the files whose path contains it;
 *  - RINGFEED_IO_MAX_PIECE=bytes: each request asks the kernel for at most
 *    this many bytes (rounded down to 4096), so reads complete in pieces
 *    through the short-read resubmission path.
 *
 * Large regions: the kernel registers at most 1 GiB per buffer, so a region
 * is registered as consecutive 1 GiB buffers (index = offset >> 30) and a
 * read crossing a boundary goes out in two pieces.
 */
#ifndef RF_IO_H
#define RF_IO_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct rf_io rf_io;

typedef struct rf_io_config {
	unsigned queue_depth;  /* reads in flight at most; default 32 */
	int direct;            /* 1: O_DIRECT (default); 0: buffered */
	int engine;            /* 0 auto, 1 force io_uring, 2 force pread */
	void *region;          /* memory reads land in (registered once); may be NULL */
	size_t region_bytes;
	const char *cache_dir; /* URL files: local cache of their reads (cache.h); NULL: none */
	uint64_t cache_bytes;  /* its cap; 0: 10 GiB */
} rf_io_config;

void rf_io_config_init(rf_io_config *cfg);

int rf_io_open(rf_io **out, const rf_io_config *cfg, rf_diag *diag);
void rf_io_close(rf_io **io);

/* Open `path` read-only and register it; *file is its handle for reads.
 * An http://, https:// or s3:// URL is read by the remote reader (http.h,
 * io_remote.c): its reads are ranged GETs, never O_DIRECT, counted against
 * queue_depth with the local ones and returned by rf_io_wait like them. */
int rf_io_add_file(rf_io *io, const char *path, int *file);

/* A URL file's reads go through the cache (when the reader has one) under
 * the object's `version` (anything that changes when the object does: the
 * loader gives the shard's size mixed with its format 3 pack id):
 * rf_http_cache_file.  Nothing for a local file. */
void rf_io_cache_file(rf_io *io, int file, uint64_t version);

/* A URL file's read [offset, offset+len) returned bytes that failed the
 * owner's check: delete its cache entry, if any (rf_http_cache_drop), so
 * that the next read of it goes to the server.  Nothing for a local file.
 * Any thread. */
void rf_io_cache_drop(rf_io *io, int file, uint64_t offset, size_t len);

/* Why the read of `file` at `offset` failed, in the reader's words, when
 * it has more to say than its errno (a URL file: the URL, byte range, HTTP
 * status or curl error, attempts): 1 and buf filled, else 0.  Any thread. */
int rf_io_read_error(rf_io *io, int file, uint64_t offset, char *buf, size_t cap);

/* Read [offset, offset+len) of a URL file again, now, from the server
 * (rf_http_read_now), for a read whose bytes failed the owner's check:
 * the bytes read or -errno; -ENOTSUP for a local file.  Any thread. */
int64_t rf_io_reread(rf_io *io, int file, uint64_t offset, void *buf, size_t len);

/* Queue a read of [offset, offset+len) of `file` into buf.  With O_DIRECT,
 * buf, offset and len must be 4096-aligned.  -EAGAIN when queue_depth reads
 * are already in flight (wait for completions first).  The request is handed
 * to the kernel by the next rf_io_submit or rf_io_wait. */
int rf_io_read(rf_io *io, int file, uint64_t offset, void *buf, size_t len, uint64_t tag);

/* Submit queued reads. */
int rf_io_submit(rf_io *io);

typedef struct rf_io_done {
	uint64_t tag;
	int64_t res;           /* bytes read (== len unless EOF), or -errno */
} rf_io_done;

/* Submit what is queued, then wait until at least `min` reads have completed
 * (0: do not block) and return up to `max` of them in done[]; returns the
 * count or a negative error.  An error of one read is reported in its res
 * (the message naming file and offset is left on the diag), not as the
 * return value. */
int rf_io_wait(rf_io *io, rf_io_done *done, unsigned max, unsigned min);

/* Reads queued or in flight. */
unsigned rf_io_inflight(const rf_io *io);

/* Retries of transient errors so far (all reads).  Any thread. */
uint64_t rf_io_retries(const rf_io *io);

const char *rf_io_engine(const rf_io *io);
/* 1 when every file so far is read with O_DIRECT. */
int rf_io_direct(const rf_io *io);
/* 1 when file `file` (from rf_io_add_file) is read with O_DIRECT: its reads
 * need 4096-aligned buffers, offsets and lengths. */
int rf_io_file_direct(const rf_io *io, int file);

#endif
