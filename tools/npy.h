/* SPDX-License-Identifier: MIT */
/*
 * The .npy file format (numpy.lib.format), versions 1.0, 2.0 and 3.0:
 * a strict parser of the header and a writer of headers that match what
 * numpy.save writes, so an exported file is byte for byte numpy's own.
 */
#ifndef RF_CLI_NPY_H
#define RF_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

#include <ringfeed/ringfeed.h>

#define RF_NPY_MAX_DIMS 32

/* Longest header accepted: numpy itself refuses to read headers over
 * 10000 bytes unless told otherwise; a larger one is hostile or broken. */
#define RF_NPY_MAX_HEADER 65536

typedef struct rf_npy {
	int major, minor;          /* format version */
	char descr[32];            /* the dtype string as found, e.g. "<f4" */
	enum rf_dtype dtype;       /* element type; RF_DTYPE_BYTES for |S and |V */
	uint64_t itemsize;         /* bytes of one numpy element */
	int ndim;
	uint64_t shape[RF_NPY_MAX_DIMS];
	uint64_t data_offset;      /* where the array data starts in the file */
	uint64_t data_bytes;       /* product(shape) * itemsize */
} rf_npy;

/* Parse the header at the start of `buf` (`len` bytes available, which may
 * be the whole file or just its first RF_NPY_MAX_HEADER bytes).  Checks the
 * magic, the version, the header length, the dict (keys descr,
 * fortran_order, shape, nothing else), refuses Fortran order, object,
 * structured, big-endian and other unsupported dtypes, and computes the data
 * size without overflow.  Does not check the file size (the caller compares
 * data_offset + data_bytes with it).  Returns 0, or RF_ENPY with a message in
 * err (capacity errcap), or RF_ETRUNCATED when buf ends inside the header. */
int rf_npy_parse(rf_npy *out, const void *buf, size_t len, char *err, size_t errcap);

/* The numpy descr for a ringfeed dtype: "|u1", "<f4", ...; bf16 (which
 * numpy lacks) as "<u2" (its bits); bytes as NULL (the caller writes "|S<n>"). */
const char *rf_npy_descr(enum rf_dtype dtype);

/* Build a version 1.0 header exactly as numpy.save does for a C-order array
 * of `descr` and `shape` (ndim entries): the dict with keys sorted, spare
 * spaces for growing the first axis, padded with spaces and a newline to a
 * multiple of 64 bytes.  Writes into buf (capacity cap) and returns the
 * header's length, or -ENOSPC / -E2BIG (the header does not fit version 1.0). */
long rf_npy_header(char *buf, size_t cap, const char *descr, int ndim, const uint64_t *shape);

#endif
