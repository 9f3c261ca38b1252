/* SPDX-License-Identifier: MIT */
/*
 * The cache of remote reads (src/io/cache.h) on its own: a stored range
 * comes back byte for byte; another version, offset or length is a miss;
 * the least recently used entry (a hit refreshes it) is the one evicted
 * when the cap is reached, and the entries never exceed the cap; an entry
 * whose bytes or header were damaged is deleted and reported as a miss,
 * never returned; a presigned URL's query does not change the key; reads
 * larger than the cap are not kept.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/cache.h"

static int failures;

#define CHECK(c, ...)                                  \
	do {                                           \
		if (!(c)) {                            \
			printf("FAIL line %d: ", __LINE__); \
			printf(__VA_ARGS__);           \
			printf("\n");                  \
			failures++;                    \
		}                                      \
	} while (0)

enum { LEN = 8192 };

static void
fill(unsigned char *b, int seed)
{
	for (int i = 0; i < LEN; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7);
}

static void
pause_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000};
	nanosleep(&ts, NULL);
}

int
main(void)
{
	char dir[] = "/tmp/rf-cache-test-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char sub[128];
	snprintf(sub, sizeof sub, "%s/a/b", dir);
	rf_diag d;
	memset(&d, 0, sizeof d);
	rf_cache *c = NULL;
	uint64_t entry = RF_CACHE_HEADER + LEN;
	int rc = rf_cache_open(&c, sub, 3 * entry, &d);
	CHECK(rc == 0 && c, "open %s: %d %s", sub, rc, d.msg);
	if (!c)
		return 1;
	static unsigned char in[4][LEN], out[LEN];
	const char *u = "https://h/ds/d-00000.rfs";
	for (int k = 0; k < 4; k++)
		fill(in[k], k + 1);
	/* A, B, C stored; a hit, byte for byte. */
	for (int k = 0; k < 3; k++) {
		rf_cache_put(c, u, 1000, (uint64_t)k * LEN, in[k], LEN);
		pause_ms(20);
	}
	CHECK(rf_cache_dir_bytes(sub) == (int64_t)(3 * entry), "3 entries: %lld bytes",
	      (long long)rf_cache_dir_bytes(sub));
	memset(out, 0, sizeof out);
	CHECK(rf_cache_get(c, u, 1000, LEN, out, LEN) == 1 && !memcmp(out, in[1], LEN), "hit B");
	/* Another version, offset, length, URL: misses. */
	CHECK(!rf_cache_get(c, u, 1001, LEN, out, LEN), "other version");
	CHECK(!rf_cache_get(c, u, 1000, LEN + 1, out, LEN), "other offset");
	CHECK(!rf_cache_get(c, u, 1000, LEN, out, LEN - 1), "other length");
	CHECK(!rf_cache_get(c, "https://h/ds/d-00001.rfs", 1000, LEN, out, LEN), "other URL");
	/* The query is not part of the key. */
	CHECK(rf_cache_get(c, "https://h/ds/d-00000.rfs?X-Amz-Signature=ab", 1000, LEN, out, LEN) == 1,
	      "a query changed the key");
	/* Refresh A; then D evicts the least recently used: C (B was hit
	 * after C was stored). */
	pause_ms(20);
	CHECK(rf_cache_get(c, u, 1000, 0, out, LEN) == 1, "hit A");
	pause_ms(20);
	rf_cache_put(c, u, 1000, 3 * LEN, in[3], LEN);
	CHECK(rf_cache_dir_bytes(sub) <= (int64_t)(3 * entry), "above the cap: %lld",
	      (long long)rf_cache_dir_bytes(sub));
	CHECK(rf_cache_get(c, u, 1000, 3 * LEN, out, LEN) == 1 && !memcmp(out, in[3], LEN), "hit D");
	CHECK(rf_cache_get(c, u, 1000, 0, out, LEN) == 1 && !memcmp(out, in[0], LEN),
	      "A (recently used) was evicted");
	CHECK(!rf_cache_get(c, u, 1000, 2 * LEN, out, LEN), "C (least recently used) was kept");
	/* Damage D's bytes: a miss, and the file is gone. */
	struct rf_cache_stats st0, st1;
	rf_cache_stats(c, &st0);
	char name[512];
	snprintf(name, sizeof name, "%s/", sub);
	int64_t before = rf_cache_dir_bytes(sub);
	{
		char cmd[700];
		snprintf(cmd, sizeof cmd, "for f in %s/*.rfc; do printf 'x' | dd of=\"$f\" bs=1 "
			 "seek=%d conv=notrunc status=none; done", sub, RF_CACHE_HEADER + 100);
		CHECK(system(cmd) == 0, "damaging the entries");
	}
	memset(out, 0, sizeof out);
	CHECK(!rf_cache_get(c, u, 1000, 3 * LEN, out, LEN), "a damaged entry was returned");
	rf_cache_stats(c, &st1);
	CHECK(st1.dropped == st0.dropped + 1, "dropped %llu -> %llu",
	      (unsigned long long)st0.dropped, (unsigned long long)st1.dropped);
	CHECK(rf_cache_dir_bytes(sub) == before - (int64_t)entry, "the damaged entry stayed");
	/* Larger than the cap: not kept. */
	static unsigned char big[4 * LEN];
	rf_cache_put(c, u, 1000, 1 << 20, big, sizeof big);
	CHECK(!rf_cache_get(c, u, 1000, 1 << 20, big, sizeof big), "an entry above the cap");
	rf_cache_close(&c);
	/* A directory that cannot be made. */
	char bad[160];
	snprintf(bad, sizeof bad, "%s/a/b/.lock/x", dir);
	rc = rf_cache_open(&c, bad, 1 << 20, &d);
	CHECK(rc < 0 && !c && strstr(d.msg, bad), "bad dir: %d %s", rc, d.msg);
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("could not remove %s\n", dir);
	if (failures) {
		printf("%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
