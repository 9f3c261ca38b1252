/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_epoch_batches is the batch count the loader delivers: over
 * a table of sample counts, batch sizes, world sizes and both drop_last
 * settings it equals the plan's own count (rf_plan_batches of a plan built
 * for those settings, on every rank), and, for a dataset on disk, the
 * batches rf_loader_next hands out on every rank; bad arguments are
 * RF_EUSAGE.
 */
#include <stdlib.h>
#include <string.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#include "plan/plan.h"
#include "rf_test.h"

static uint64_t
plan_count(uint64_t n, uint32_t batch, uint32_t rank, uint32_t world, int drop_last)
{
	/* Chunks of 7 samples (the count does not depend on them). */
	uint64_t nchunks = (n + 6) / 7;
	uint32_t *counts = calloc(nchunks ? nchunks : 1, sizeof *counts);
	CHECK(counts);
	for (uint64_t c = 0; c < nchunks; c++)
		counts[c] = (uint32_t)(n - c * 7 < 7 ? n - c * 7 : 7);
	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.mode = RF_PLAN_NONE;
	pp.batch = batch;
	pp.rank = rank;
	pp.world = world;
	pp.tail = drop_last ? RF_PLAN_DROP : RF_PLAN_KEEP;
	rf_plan *plan;
	CHECK_RC(rf_plan_create(&plan, &pp, counts, nchunks, NULL), 0);
	uint64_t k = rf_plan_batches(plan);
	/* The count is what the cursor really walks through. */
	rf_plan_item *items = calloc(batch, sizeof *items);
	uint64_t walked = 0;
	uint32_t got;
	while (rf_plan_next_batch(plan, items, batch, &got) == 0 && got)
		walked++;
	CHECK(walked == k);
	free(items);
	rf_plan_destroy(&plan);
	free(counts);
	return k;
}

static void
against_plan(void)
{
	static const uint64_t ns[] = {0, 1, 2, 5, 6, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 1023};
	static const uint32_t batches[] = {1, 2, 3, 8, 32, 100};
	static const uint32_t worlds[] = {1, 2, 3, 4, 7, 8};
	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
			for (size_t c = 0; c < sizeof worlds / sizeof worlds[0]; c++)
				for (int drop = 0; drop <= 1; drop++)
					for (uint32_t r = 0; r < worlds[c]; r++) {
						uint64_t got = 12345;
						CHECK_RC(rf_epoch_batches(ns[a], batches[b], r,
									  worlds[c], drop, &got),
							 0);
						uint64_t want = plan_count(ns[a], batches[b], r,
									   worlds[c], drop);
						if (got != want) {
							fprintf(stderr, "n %llu B %u rank %u world %u "
								"drop_last %d: %llu, plan %llu\n",
								(unsigned long long)ns[a], batches[b],
								r, worlds[c], drop,
								(unsigned long long)got,
								(unsigned long long)want);
							exit(1);
						}
					}
}

/* The loader on a dataset of n samples: batches delivered on one rank. */
static uint64_t
loader_count(const char *path, uint32_t batch, int32_t rank, int32_t world, int drop_last)
{
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {path};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = batch;
	cfg.rank = rank;
	cfg.world = world;
	cfg.drop_last = drop_last;
	cfg.device = RF_DEVICE_HOST;
	cfg.pinned_bytes = 8 << 20;
	cfg.decode_threads = 1;
	cfg.direct = 0;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		exit(1);
	}
	uint64_t k = 0;
	for (;;) {
		const rf_batch *b;
		CHECK_RC(rf_loader_next(ld, &b), 0);
		if (!b)
			break;
		k++;
		CHECK_RC(rf_loader_release(ld, b, NULL), 0);
	}
	rf_loader_close(&ld);
	return k;
}

static void
against_loader(void)
{
	char *dir = rf_test_tmpdir("rfapi");
	char path[4096];
	snprintf(path, sizeof path, "%s/d.rfs", dir);
	rf_schema s;
	memset(&s, 0, sizeof s);
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U32, 0, NULL, -1), 0);
	rf_writer_config wc;
	rf_writer_config_init(&wc);
	wc.no_fsync = 1;
	wc.chunk_bytes = 64;
	rf_writer *w;
	const uint64_t n = 103;
	CHECK_RC(rf_writer_open(&w, path, &s, &wc), 0);
	for (uint32_t i = 0; i < n; i++) {
		rf_value v = {&i, sizeof i};
		CHECK_RC(rf_writer_add(w, &v), 0);
	}
	CHECK_RC(rf_writer_close(&w), 0);

	static const struct {
		uint32_t batch, world;
	} cases[] = {{10, 1}, {10, 2}, {8, 3}, {4, 5}, {103, 1}, {104, 1}, {30, 4}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int drop = 0; drop <= 1; drop++)
			for (uint32_t r = 0; r < cases[i].world; r++) {
				uint64_t want;
				CHECK_RC(rf_epoch_batches(n, cases[i].batch, r, cases[i].world, drop,
							  &want),
					 0);
				uint64_t got = loader_count(path, cases[i].batch, (int32_t)r,
							    (int32_t)cases[i].world, drop);
				if (got != want) {
					fprintf(stderr, "B %u rank %u world %u drop_last %d: loader "
						"%llu, rf_epoch_batches %llu\n", cases[i].batch, r,
						cases[i].world, drop, (unsigned long long)got,
						(unsigned long long)want);
					exit(1);
				}
			}
	rf_test_rmtree(dir);
	free(dir);
}

int
main(void)
{
	uint64_t k = 7;
	CHECK_RC(rf_epoch_batches(10, 0, 0, 1, 0, &k), RF_EUSAGE);
	CHECK_RC(rf_epoch_batches(10, 1, 0, 0, 0, &k), RF_EUSAGE);
	CHECK_RC(rf_epoch_batches(10, 1, 2, 2, 0, &k), RF_EUSAGE);
	CHECK_RC(rf_epoch_batches(10, 1, 0, 1, 0, NULL), RF_EUSAGE);
	CHECK(k == 7);
	/* No overflow at the extremes. */
	CHECK_RC(rf_epoch_batches(UINT64_MAX, UINT32_MAX, 0, UINT32_MAX, 0, &k), 0);
	CHECK(k == UINT64_MAX / ((uint64_t)UINT32_MAX * UINT32_MAX) + 1);
	against_plan();
	against_loader();
	return 0;
}
