/* SPDX-License-Identifier: MIT */
/*
 * remote-read --xxh3 FILE: print the XXH3-64 of FILE (up to 1 MiB).
 *
 * remote-read URL LOCAL [READS [DEPTH [MAXLEN [SEED]]]]: drive the remote
 * reader the way the loader drives the local one (DEPTH reads in flight,
 * completions in any order) over random ranges of URL, some crossing or
 * past its end, plus a tail read, and compare every completion with the
 * same range of the LOCAL copy.
 *
 * Exit 0: every read completed exactly once with exactly the local bytes
 * (and nothing written past what it returned).  Exit 3: a read failed with
 * an error (printed; the test decides whether that was expected).  Exit 1:
 * wrong data, a read reported twice or never, a write past the buffer: what
 * must never happen.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/http.h"
#include "xxh.h"

#define GUARD 64

struct rd {
	uint64_t off;
	size_t len;
	uint8_t *buf;
	int done;
	int tail;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int
main(int argc, char **argv)
{
	if (!rf_http_available()) {
		printf("built without libcurl: skipping\n");
		return 77;
	}
	if (argc == 3 && strcmp(argv[1], "--xxh3") == 0) {
		/* The tests' checksum tool: XXH3-64 of a file, as hex. */
		FILE *x = fopen(argv[2], "rb");
		static uint8_t b[1 << 20];
		size_t n = x ? fread(b, 1, sizeof b, x) : 0;
		if (!x)
			return 2;
		fclose(x);
		printf("%016llx\n", (unsigned long long)XXH3_64bits(b, n));
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: remote-read URL LOCAL [READS [DEPTH [MAXLEN [SEED]]]]\n");
		return 2;
	}
	unsigned nreads = argc > 3 ? (unsigned)atoi(argv[3]) : 200;
	unsigned depth = argc > 4 ? (unsigned)atoi(argv[4]) : 16;
	size_t maxlen = argc > 5 ? (size_t)atol(argv[5]) : 65536;
	if (argc > 6)
		rng ^= (uint64_t)atoll(argv[6]) * 0x9E3779B97F4A7C15ull;
	FILE *f = fopen(argv[2], "rb");
	if (!f) {
		perror(argv[2]);
		return 2;
	}
	struct stat st;
	fstat(fileno(f), &st);
	size_t size = (size_t)st.st_size;
	uint8_t *local = malloc(size + 1);
	if (!local || fread(local, 1, size, f) != size) {
		fprintf(stderr, "cannot read %s\n", argv[2]);
		return 2;
	}
	fclose(f);

	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	d.errors_quiet = 1;
	rf_http_config cfg;
	rf_http_config_init(&cfg);
	cfg.queue_depth = depth;
	rf_http *h;
	if (rf_http_open(&h, &cfg, &d) < 0) {
		fprintf(stderr, "error: %s\n", d.msg);
		return 3;
	}
	int file;
	if (rf_http_add_file(h, argv[1], &file) < 0) {
		fprintf(stderr, "error: %s\n", d.msg);
		return 3;
	}
	struct rd *rs = calloc(nreads + 1, sizeof *rs);
	for (unsigned i = 0; i < nreads; i++) {
		struct rd *r = &rs[i];
		r->len = 1 + (size_t)(next() % maxlen);
		/* Mostly inside, some across the end, a few past it. */
		uint64_t span = size + size / 16 + 1;
		r->off = next() % span;
		r->buf = malloc(r->len + GUARD);
		memset(r->buf, 0xA5, r->len + GUARD);
	}
	/* The last one: a tail read larger than nothing, smaller than all. */
	rs[nreads].tail = 1;
	rs[nreads].len = size > 100 ? size / 3 : 10;
	rs[nreads].buf = malloc(rs[nreads].len + GUARD);
	memset(rs[nreads].buf, 0xA5, rs[nreads].len + GUARD);
	unsigned total = nreads + 1, issued = 0, completed = 0;
	int bad = 0, failed = 0;
	rf_io_done done[64];
	while (completed < total) {
		while (issued < total) {
			struct rd *r = &rs[issued];
			int rc = r->tail ? rf_http_read_tail(h, file, r->buf, r->len, issued)
					 : rf_http_read(h, file, r->off, r->buf, r->len, issued);
			if (rc == -EAGAIN)
				break;
			if (rc < 0) {
				fprintf(stderr, "read %u refused: %s\n", issued, d.msg);
				return 1;
			}
			issued++;
		}
		int n = rf_http_wait(h, done, 64, 1);
		if (n < 0) {
			fprintf(stderr, "wait: %s\n", d.msg);
			return 1;
		}
		if (n == 0) {
			fprintf(stderr, "wait returned nothing with %u reads outstanding\n",
				rf_http_inflight(h));
			return 1;
		}
		for (int k = 0; k < n; k++) {
			uint64_t t = done[k].tag;
			if (t >= total) {
				fprintf(stderr, "unknown tag %llu\n", (unsigned long long)t);
				return 1;
			}
			struct rd *r = &rs[t];
			if (r->done++) {
				fprintf(stderr, "read %llu completed twice\n", (unsigned long long)t);
				return 1;
			}
			completed++;
			int64_t res = done[k].res;
			if (res < 0) {
				if (!failed)
					fprintf(stderr, "error: %s\n", d.msg);
				failed++;
				continue;
			}
			uint64_t off = r->off;
			size_t want;
			if (r->tail) {
				want = r->len < size ? r->len : size;
				off = size - want;
			} else {
				want = off >= size ? 0 : (size - off < r->len ? size - off : r->len);
			}
			if ((size_t)res != want) {
				fprintf(stderr, "read %llu (%zu at %llu): %lld bytes, expected %zu\n",
					(unsigned long long)t, r->len, (unsigned long long)off,
					(long long)res, want);
				bad++;
				continue;
			}
			if (want && memcmp(r->buf, local + off, want) != 0) {
				fprintf(stderr, "read %llu (%zu at %llu): bytes differ\n",
					(unsigned long long)t, r->len, (unsigned long long)off);
				bad++;
			}
			for (size_t g = want; g < r->len + GUARD; g++)
				if (r->buf[g] != 0xA5) {
					fprintf(stderr, "read %llu: byte %zu written past the %zu returned\n",
						(unsigned long long)t, g, want);
					bad++;
					break;
				}
		}
	}
	uint64_t fsize;
	if (!failed && (rf_http_file_size(h, file, &fsize) < 0 || fsize != size)) {
		fprintf(stderr, "file size not learned or wrong\n");
		bad++;
	}
	rf_http_close(&h);
	for (unsigned i = 0; i < total; i++)
		free(rs[i].buf);
	free(rs);
	free(local);
	if (bad)
		return 1;
	if (failed) {
		fprintf(stderr, "%d of %u reads failed\n", failed, total);
		return 3;
	}
	printf("ok: %u reads\n", total);
	return 0;
}
