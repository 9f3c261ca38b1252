/* SPDX-License-Identifier: MIT */
/*
 * The limits `ringfeed bench` compares the loader with, measured on the
 * dataset's own files in the same run: raw io_uring O_DIRECT reads (whole
 * chunks at the loader's queue depth, or single samples at random for the
 * `full` shuffle), zstd decompression of the dataset's own chunks on one
 * thread, memcpy bandwidth on one thread, and pinned host-to-device copy
 * bandwidth through the CUDA runtime (loaded with dlopen, as the library
 * does).  Also the page cache helpers behind --cold.
 *
 * These use liburing, libzstd and the public reader API directly: the tool
 * links the public library only, so nothing here reaches into src/.
 */
#ifndef RF_CLI_BENCH_LIMITS_H
#define RF_CLI_BENCH_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ringfeed/dataset.h>

/* One measurement.  `ok` false means it could not run here; `note` says
 * why (or how it ran: "buffered: O_DIRECT refused by the file system"). */
typedef struct bench_rate {
	bool ok;
	double bytes;       /* bytes processed in the timed part */
	double seconds;     /* timed part: CLOCK_MONOTONIC for I/O and copies to
	                       the device; the thread's CPU time for the CPU-bound
	                       zstd and memcpy (other load does not lower them) */
	double wall_seconds; /* CPU-timed limits: the wall time of the same part */
	double ops;         /* reads or calls in the timed part */
	char note[160];
} bench_rate;

static inline double
bench_rate_gbps(const bench_rate *r)
{
	return r->ok && r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0;
}

/* Sequential reads of every chunk's stored bytes (rounded up to 4096, as the
 * loader reads them into its slots), in dataset order, `depth` reads in
 * flight, O_DIRECT (buffered when `direct` is false or the file system
 * refuses it).  Passes over the dataset repeat until `min_seconds` have
 * passed, the last pass possibly cut short; `one_pass` stops after the
 * first (a buffered read of a cold dataset: a second pass would come from
 * the page cache).  Returns 0, or a negative errno with r->note set. */
int bench_raw_sequential(const rf_dataset *ds, unsigned depth, bool direct,
			 double min_seconds, bool one_pass, bench_rate *r);

/* Random reads for the `full` shuffle: for each of a stream of uniformly
 * random samples, one read per fixed-size field of the 4096-aligned range
 * that holds the sample's value, `depth` reads in flight, O_DIRECT.  Only
 * for uncompressed chunks (the loader reads compressed chunks whole).
 * r->ops counts samples; r->bytes the bytes of the samples' values (not the
 * aligned ranges), so samples per second is ops / seconds. */
int bench_raw_random(const rf_dataset *ds, unsigned depth, bool direct, double min_seconds,
		     uint64_t seed, bench_rate *r);

/* zstd decompression on one thread of up to `max_chunks` of the dataset's
 * zstd chunks, spread over the dataset, read with pread and decompressed with
 * ZSTD_decompressDCtx over and over for `min_seconds`.  r->bytes counts raw
 * (decompressed) bytes.  r->ok is false when the dataset has no zstd chunk. */
int bench_zstd(const rf_dataset *ds, unsigned max_chunks, double min_seconds, bench_rate *r);

/* memcpy between two `bytes`-sized buffers on one thread for min_seconds. */
int bench_memcpy(size_t bytes, double min_seconds, bench_rate *r);

/* memcpy on `threads` threads at once, each between its own two buffers
 * (64 MiB, less with many threads), for min_seconds of wall time: what the
 * loader's decode workers can copy together.  r->bytes counts every
 * thread's bytes and r->seconds is wall time, so the rate is the sum. */
int bench_memcpy_parallel(unsigned threads, double min_seconds, bench_rate *r);

/* Pinned host to device copies of `bytes` at a time on device `index`
 * through the CUDA runtime (RINGFEED_CUDART, libcudart.so.13, .12), for
 * min_seconds.  r->ok false with a note when there is no runtime or device. */
int bench_h2d(int index, size_t bytes, double min_seconds, bench_rate *r);

/* ---------------------------------------------------------- page cache */

typedef struct bench_cache {
	uint64_t pages;      /* pages of the dataset's shards */
	uint64_t resident;   /* of them in the page cache */
	bool dropped;        /* every shard's pages were asked out */
	char note[160];      /* why a drop failed, or why residency is unknown */
} bench_cache;

/* With `drop`, ask the kernel to evict every shard's pages
 * (posix_fadvise POSIX_FADV_DONTNEED), then, in every case, count the pages
 * still resident with mincore over an mmap of each shard. */
void bench_cache_check(const rf_dataset *ds, bool drop, bench_cache *c);

/* Monotonic time in seconds (CLOCK_MONOTONIC). */
double bench_now(void);

#endif
