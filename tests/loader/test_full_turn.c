/* SPDX-License-Identifier: MIT */
/*
 * Description: full shuffling from memory, the consumer's thread filling a
 * batch while the full thread is slow to fill the one before it
 * (RINGFEED_FULL_FILL_DELAY_MS): rf_loader_next_timeout returns -EAGAIN
 * within its timeout instead of waiting for that batch's turn, as the
 * Python module's Ctrl-C check needs; the batch it filled is kept and
 * handed out in its turn by a later call (next, _timeout, or try_next
 * alone), so every epoch is delivered in rf_plan_batch's order, each
 * sample once; and the loader closes cleanly with such a batch kept.
 */
#include "lt.h"
#include "plan/plan.h"

static char dir[256];

static rf_loader *
open_full(uint32_t batch, uint64_t epochs, const char *delay_ms)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, "h.rfs");
	cfg.shuffle = RF_SHUFFLE_FULL;
	cfg.seed = 9;
	cfg.batch_size = batch;
	cfg.epochs = epochs;
	cfg.map = 1;
	cfg.verify = 1;
	cfg.pinned_bytes = 1 << 20;
	/* The full thread and the consumer's alone. */
	setenv("RINGFEED_FULL_FILLERS", "0", 1);
	setenv("RINGFEED_FULL_FILL_DELAY_MS", delay_ms, 1);
	/* Read by the full thread as it starts: left set. */
	return lt_open(&cfg);
}

/* b is batch k of the plan's epoch e: its first sample and every row. */
static void
check_planned(rf_plan *plan, const rf_batch *b, uint64_t *epoch, uint64_t *k)
{
	rf_plan_item items[64];
	if (b->epoch != *epoch) {
		*epoch = b->epoch;
		*k = 0;
		LT_CHECK(rf_plan_set_epoch(plan, *epoch) == 0);
	}
	uint32_t m = 0;
	LT_CHECK(rf_plan_batch(plan, (*k)++, items, 64, &m) == 0);
	LT_CHECK(m == b->samples && b->first_sample == items[0].pos);
	for (uint32_t i = 0; i < b->samples && i < m; i++) {
		LT_CHECK(lt_row_sample(b, i) == items[i].sample);
		LT_CHECK(lt_row_ok(b, i, items[i].sample));
	}
}

/* A full thread that takes a second a batch: each call returns within
 * its 20 ms (and the fill of one small batch), not after that second. */
static void
test_prompt(uint64_t N, uint32_t B)
{
	rf_plan *plan = lt_make_plan(dir, "h.rfs", RF_PLAN_FULL, 9, 0, 1, B, 1, 0);
	rf_loader *ld = open_full(B, 1, "1000");
	if (!plan || !ld)
		return;
	uint64_t epoch = UINT64_MAX, k = 0, longest = 0, again = 0, t_end;
	uint64_t t_start = lt_now_ns();
	const rf_batch *b = NULL;
	/* A few batches, for as long as it takes (the full thread's each
	 * a second). */
	for (int got = 0; got < 4 && lt_now_ns() - t_start < 20000000000ull;) {
		uint64_t t0 = lt_now_ns();
		int rc = rf_loader_next_timeout(ld, &b, 20000000u);
		uint64_t dt = lt_now_ns() - t0;
		longest = dt > longest ? dt : longest;
		if (rc == -EAGAIN) {
			again++;
			continue;
		}
		LT_CHECK(rc == 0 && b);
		if (rc < 0 || !b)
			break;
		check_planned(plan, b, &epoch, &k);
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		got++;
	}
	fprintf(stderr, "prompt: %llu batches, %llu timeouts, the longest call %.1f ms\n",
		(unsigned long long)k, (unsigned long long)again, (double)longest / 1e6);
	LT_CHECK(k == 4);
	LT_CHECK(again > 0);
	/* 20 ms asked; a busy machine may add some, not the full thread's
	 * second. */
	LT_CHECK(longest < 500000000u);
	/* Closed with the consumer's batch most likely kept for its turn. */
	t_end = lt_now_ns();
	rf_loader_close(&ld);
	fprintf(stderr, "prompt: closed in %.1f ms\n", (double)(lt_now_ns() - t_end) / 1e6);
	rf_plan_destroy(&plan);
	(void)N;
}

/* Every batch of two epochs in the plan's order, each sample once an
 * epoch, with calls of every kind: next_timeout (short), try_next, next. */
static void
test_order(uint64_t N, uint32_t B, int try_only)
{
	rf_plan *plan = lt_make_plan(dir, "h.rfs", RF_PLAN_FULL, 9, 0, 1, B, 1, 0);
	rf_loader *ld = open_full(B, 2, "15");
	if (!plan || !ld)
		return;
	uint8_t *seen = calloc(2 * N, 1);
	uint64_t epoch = UINT64_MAX, k = 0, again = 0, batches = 0, n = 0;
	uint64_t t_start = lt_now_ns();
	const rf_batch *b = NULL;
	int rc = 0, parked = 0;
	for (unsigned call = 0; lt_now_ns() - t_start < 60000000000ull; call++) {
		if (try_only && parked) {
			/* Only try_next from here: the batch kept must go
			 * out in its turn without a waiting call. */
			rc = rf_loader_try_next(ld, &b);
			if (rc == -EAGAIN)
				usleep(1000);
		} else if (call % 5 == 4) {
			rc = rf_loader_next(ld, &b);
		} else if (call % 5 == 3) {
			rc = rf_loader_try_next(ld, &b);
		} else {
			rc = rf_loader_next_timeout(ld, &b, 2000000u);
			if (rc == -EAGAIN) {
				again++;
				parked = 1;
			}
		}
		if (rc == -EAGAIN)
			continue;
		if (rc < 0 || !b)
			break;
		check_planned(plan, b, &epoch, &k);
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			if (g < N && b->epoch < 2) {
				LT_CHECK(!seen[b->epoch * N + g]);
				seen[b->epoch * N + g] = 1;
			}
		}
		n += b->samples;
		batches++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	fprintf(stderr, "order%s: %llu batches, %llu samples, %llu timeouts\n",
		try_only ? " (try_next after a timeout)" : "", (unsigned long long)batches,
		(unsigned long long)n, (unsigned long long)again);
	LT_CHECK(rc == 0 && !b);
	LT_CHECK(n == 2 * N);
	LT_CHECK(again > 0);
	rf_loader_close(&ld);
	rf_plan_destroy(&plan);
	free(seen);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("full-turn"));
	const uint64_t N = 480;
	LT_CHECK(lt_pack(dir, "h", N, 0, 4096, 0, 0) == 0);
	test_prompt(N, 16);
	test_order(N, 16, 0);
	test_order(N, 16, 1);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
