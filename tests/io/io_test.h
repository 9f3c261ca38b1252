/* SPDX-License-Identifier: MIT */
/* Shared helpers of the io tests (checks come from rf_test.h): files
 * with contents derived from their offsets, a captured log, and a driver
 * that reads a file through rf_io and checks every byte. */
#ifndef RF_IO_TEST_H
#define RF_IO_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"
#include "rf_test.h"

/* The byte at file offset `off`: a hash, so a read landing at the wrong
 * offset or the wrong place in memory cannot match by accident. */
static inline uint8_t
t_byte(uint64_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull ^ seed;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> (8 * (off & 7)));
}

static inline void
t_write_file(const char *path, uint64_t size, uint64_t seed)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	static uint8_t buf[1 << 16];
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = t_byte(seed, off + i);
		CHECK(write(fd, buf, n) == (ssize_t)n);
		off += n;
	}
	CHECK(close(fd) == 0);
}

/* A path for a test file in `dir` (the test's working directory, a real
 * file system, when dir is NULL); the caller frees it. */
static inline char *
t_path(const char *dir, const char *name)
{
	char *p;
	CHECK(asprintf(&p, "%s/rf-io-%d-%s", dir ? dir : ".", (int)getpid(), name) > 0);
	return p;
}

/* Whether `path` can be opened with O_DIRECT here. */
static inline int
t_direct_ok(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* Log capture. */
struct t_log {
	char text[16384];
	size_t len;
	int warns, errors;
};

static inline void
t_log_fn(void *user, enum rf_log_level level, const char *msg)
{
	struct t_log *l = user;
	if (level == RF_LOG_WARN)
		l->warns++;
	if (level == RF_LOG_ERROR)
		l->errors++;
	int n = snprintf(l->text + l->len, sizeof l->text - l->len, "[%d] %s\n", (int)level, msg);
	if (n > 0 && (size_t)n < sizeof l->text - l->len)
		l->len += (size_t)n;
	if (getenv("T_VERBOSE"))
		fprintf(stderr, "log[%d]: %s\n", (int)level, msg);
}

static inline void *
t_map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

/* Read all of `file` (`size` bytes, contents from `seed`) with reads of
 * varying aligned lengths, keeping up to the queue depth in flight, into
 * `nslots` slots of `slot_bytes` of `mem`; check each result and every byte.
 * The last read asks for an aligned length past end of file.  Returns the
 * number of reads. */
static inline unsigned
t_read_all(rf_io *io, int file, uint64_t size, uint64_t seed, char *mem, size_t slot_bytes,
	   unsigned nslots, unsigned qd)
{
	struct {
		uint64_t off;
		size_t len;
	} *slot = calloc(nslots, sizeof *slot);
	unsigned *free_slots = calloc(nslots, sizeof *free_slots);
	rf_io_done *done = calloc(qd, sizeof *done);
	CHECK(slot && free_slots && done);
	unsigned nfree = nslots;
	for (unsigned i = 0; i < nslots; i++)
		free_slots[i] = i;
	uint64_t next = 0;
	unsigned reads = 0, inflight = 0, i = 0;
	while (next < size || inflight) {
		while (next < size && nfree && inflight < qd) {
			size_t len = 4096 * (size_t)(1 + (i++ * 5) % (slot_bytes / 4096));
			unsigned s = free_slots[--nfree];
			slot[s].off = next;
			slot[s].len = len;
			memset(mem + (size_t)s * slot_bytes, 0xEE, len);
			CHECK_RC(rf_io_read(io, file, next, mem + (size_t)s * slot_bytes, len, s), 0);
			next += len;
			inflight++;
			reads++;
		}
		CHECK(rf_io_inflight(io) == inflight);
		int n = rf_io_wait(io, done, qd, 1);
		CHECK(n >= 1);
		for (int k = 0; k < n; k++) {
			unsigned s = (unsigned)done[k].tag;
			CHECK(s < nslots);
			uint64_t want = size - slot[s].off < slot[s].len ? size - slot[s].off : slot[s].len;
			if (done[k].res != (int64_t)want) {
				fprintf(stderr, "read at %" PRIu64 " len %zu: res %" PRId64 ", want %" PRIu64 "\n",
					slot[s].off, slot[s].len, done[k].res, want);
				exit(1);
			}
			const uint8_t *p = (const uint8_t *)mem + (size_t)s * slot_bytes;
			for (uint64_t b = 0; b < want; b++) {
				if (p[b] != t_byte(seed, slot[s].off + b)) {
					fprintf(stderr, "byte %" PRIu64 " of the file is wrong\n", slot[s].off + b);
					exit(1);
				}
			}
			free_slots[nfree++] = s;
			inflight--;
		}
	}
	CHECK(rf_io_inflight(io) == 0);
	free(slot);
	free(free_slots);
	free(done);
	return reads;
}

#endif
