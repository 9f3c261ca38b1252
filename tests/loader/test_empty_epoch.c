/* SPDX-License-Identifier: MIT */
/*
 * Description: a loader whose epochs have no batch for its rank (batch_size
 * above the samples with drop_last, or a global batch larger than the data
 * with drop_last) opens, streams nothing, and says so in a warning at open
 * naming the samples, the batch size and the world; a loader with batches
 * logs no such warning.  With the tail kept every rank has a batch, even in
 * a world larger than the data (the ranks past it repeat the last sample).
 */
#include "lt.h"

#define N 50

static char warn[1024];
static int nwarn;

static void
capture(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if (level <= RF_LOG_WARN) {
		nwarn++;
		snprintf(warn, sizeof(warn), "%s", msg);
	}
}

/* Open, count the stream's batches; returns them, or -1. */
static int
run(const char *dir, uint32_t batch, int drop_last, int32_t rank, int32_t world)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/d.rfs", dir);
	const char *paths[] = {path};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = batch;
	cfg.drop_last = drop_last;
	cfg.rank = rank;
	cfg.world = world;
	cfg.device = RF_DEVICE_HOST;
	cfg.pinned_bytes = 1 << 20;
	cfg.log = capture;
	nwarn = 0;
	warn[0] = 0;
	rf_loader *ld = NULL;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return -1;
	}
	int n = 0;
	const rf_batch *b;
	while (rf_loader_next(ld, &b) == 0 && b) {
		n++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	rf_loader_close(&ld);
	return n;
}

static void
expect_warning(const char *what, const char *samples, const char *batch, const char *world)
{
	LT_CHECK(nwarn == 1);
	LT_CHECK(strstr(warn, samples) && strstr(warn, batch) && strstr(warn, world));
	if (nwarn != 1 || !strstr(warn, batch))
		fprintf(stderr, "%s: %d warnings, last \"%s\"\n", what, nwarn, warn);
}

int
main(void)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("empty-epoch"));
	if (lt_pack(dir, "d", N, 0, 1024, 0, 0) < 0) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	/* A batch above the data, the tail dropped. */
	LT_CHECK(run(dir, 64, 1, 0, 1) == 0);
	expect_warning("batch 64", "50 samples", "batch_size 64", "world 1");
	/* Enough for one batch on one rank, none on each of two. */
	LT_CHECK(run(dir, 32, 1, 1, 2) == 0);
	expect_warning("world 2", "50 samples", "batch_size 32", "world 2");
	/* A world above the samples: nothing with the tail dropped, one batch
	 * on every rank with it kept (rank 60 has a pad, not an empty
	 * epoch). */
	LT_CHECK(run(dir, 1, 1, 3, 64) == 0);
	expect_warning("world 64", "50 samples", "batch_size 1", "world 64");
	LT_CHECK(run(dir, 1, 0, 3, 64) == 1);
	LT_CHECK(nwarn == 0);
	LT_CHECK(run(dir, 1, 0, 60, 64) == 1);
	LT_CHECK(nwarn == 0);
	/* Batches: no warning. */
	LT_CHECK(run(dir, 64, 0, 0, 1) == 1);
	LT_CHECK(nwarn == 0);
	LT_CHECK(run(dir, 16, 1, 0, 1) == 3);
	LT_CHECK(nwarn == 0);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
