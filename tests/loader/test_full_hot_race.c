/* SPDX-License-Identifier: MIT */
/*
 * Description: full and window shuffling from memory with both the loader's
 * thread and the consumer's thread filling batches, many loaders of many
 * short epochs, the consumer taking and releasing batches as fast as it
 * can.  Every epoch must deliver each sample once, and the stream must never
 * stop: a watchdog fails the test when no batch arrives for 10 seconds (a
 * thread left waiting for its turn to stage a batch that was staged).  With
 * LT_RACE_TIMEOUT_US, the consumer asks with that timeout (and try_next),
 * again and again, leaving the waits for its batches' turns.
 */
#include "lt.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static char dir[256];
static atomic_uint_fast64_t progress;
static atomic_int done;
static const char *_Atomic current = "";

static void *
watchdog(void *arg)
{
	(void)arg;
	uint64_t last = UINT64_MAX;
	int still = 0;
	while (!atomic_load(&done)) {
		uint64_t p = atomic_load(&progress);
		still = p == last ? still + 1 : 0;
		last = p;
		if (still >= 100) {
			fprintf(stderr, "FAIL: no batch for 10 s after %llu batches: the loader "
				"hangs (%s)\n", (unsigned long long)p, atomic_load(&current));
			if (getenv("LT_RACE_TRAP")) /* under gdb: stop to show the threads */
				raise(SIGTRAP);
			lt_rmtree(dir);
			_exit(1);
		}
		usleep(100000);
	}
	return NULL;
}

/* Threads that take the CPUs now and then, so that the loader's threads
 * are preempted at any point (as on a busy machine). */
static void *
hog(void *arg)
{
	(void)arg;
	volatile uint64_t x = 0;
	while (!atomic_load(&done)) {
		for (int i = 0; i < 200000; i++)
			x += (uint64_t)i;
		usleep(50);
	}
	return NULL;
}

/* The next batch; with LT_RACE_TIMEOUT_US set, by rf_loader_next_timeout
 * with that timeout (and every third try rf_loader_try_next), again while
 * -EAGAIN: the consumer's thread leaves its batch's turn-wait at any point
 * and comes back to it (full.c). */
static int
next(rf_loader *ld, const rf_batch **b)
{
	static long us = -1;
	if (us < 0)
		us = getenv("LT_RACE_TIMEOUT_US") ? atol(getenv("LT_RACE_TIMEOUT_US")) : 0;
	if (!us)
		return rf_loader_next(ld, b);
	for (unsigned i = 0;; i++) {
		int rc = i % 3 == 2 ? rf_loader_try_next(ld, b)
				    : rf_loader_next_timeout(ld, b, (uint64_t)us * 1000u);
		if (rc != -EAGAIN)
			return rc;
	}
}

/* hold: batches kept alive (a FIFO) while the next ones are taken. */
static void
run(enum rf_shuffle mode, uint64_t N, uint32_t B, uint64_t E, uint64_t seed, uint32_t hold)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, "r.rfs");
	cfg.shuffle = mode;
	cfg.seed = seed;
	cfg.batch_size = B;
	cfg.epochs = E;
	cfg.map = 1;
	cfg.verify = 1;
	cfg.drop_last = 0;
	cfg.pinned_bytes = 1 << 20;
	cfg.depth = hold + 1;
	const rf_batch *fifo[16];
	uint32_t nf = 0;
	static char what[96];
	snprintf(what, sizeof(what), "shuffle %s, batch %u, %u held",
		 mode == RF_SHUFFLE_FULL ? "full" : "window", B, hold);
	atomic_store(&current, what);
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc)
		return;
	uint8_t *seen = calloc(N, 1);
	uint64_t epoch = 0, got = 0;
	const rf_batch *b;
	while ((rc = next(ld, &b)) == 0 && b) {
		if (b->epoch != epoch) {
			LT_CHECK(got == N);
			memset(seen, 0, N);
			got = 0;
			epoch = b->epoch;
		}
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(g < N && !seen[g]);
			if (g < N)
				seen[g] = 1;
			got++;
		}
		atomic_fetch_add(&progress, 1);
		fifo[nf++] = b;
		if (nf >= hold) {
			LT_CHECK(rf_loader_release(ld, fifo[0], NULL) == 0);
			memmove(fifo, fifo + 1, --nf * sizeof(*fifo));
		}
	}
	while (nf)
		LT_CHECK(rf_loader_release(ld, fifo[--nf], NULL) == 0);
	LT_CHECK(rc == 0 && got == N && epoch == E - 1);
	rf_loader_close(&ld);
	free(seen);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("full-hot-race"));
	const uint64_t N = 1000;
	LT_CHECK(lt_pack(dir, "r", N, 0, 4096, 0, 0) == 0);
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	pthread_t hogs[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&hogs[i], NULL, hog, NULL);
	uint64_t t0 = lt_now_ns();
	unsigned rounds = 0;
	for (uint64_t s = 0; lt_now_ns() - t0 < 15000000000ull && !lt_failures; s++, rounds++) {
		uint32_t B = 8 + (uint32_t)(s % 5) * 14, hold = 1 + (uint32_t)(s % 7);
		if (getenv("LT_RACE_HOLD")) /* one setting only, to find where it hangs */
			hold = (uint32_t)atoi(getenv("LT_RACE_HOLD"));
		run(RF_SHUFFLE_FULL, N, B, 20, s, hold);
		run(RF_SHUFFLE_WINDOW, N, B, 20, s, hold);
	}
	atomic_store(&done, 1);
	pthread_join(wd, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(hogs[i], NULL);
	fprintf(stderr, "%u rounds of 2 loaders x 20 epochs\n", rounds);
	lt_rmtree(dir);
	return lt_failures ? 1 : 0;
}
