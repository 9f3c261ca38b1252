/* SPDX-License-Identifier: MIT */
/*
 * Description: reads in flight.  With io_depth left at 0, whole chunks read
 * through the page cache (direct = -1 choosing buffered reads for a small
 * dataset, or direct = 0) go two at a time, the kernel reading ahead of
 * them (rf_stats.reads_inflight_max 2, said in the memory plan's log
 * line), in file and chunk order; every row of two epochs still comes, in
 * the same order as with an io_depth of 8 asked for, which is kept (more
 * than 2 in flight).  O_DIRECT reads keep the default's 32.
 */
#include "lt.h"

static char dir[256];

/* Two epochs of dataset `name`: every row checked and its sample kept in
 * out (at most cap); the count.  *inflight: rf_stats.reads_inflight_max. */
static size_t
stream(enum rf_shuffle shuffle, int direct, uint32_t io_depth, uint64_t *out, size_t cap,
       uint32_t *inflight)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, "raw.rfs");
	cfg.shuffle = shuffle;
	cfg.seed = 5;
	cfg.batch_size = 16;
	cfg.epochs = 2;
	cfg.direct = direct;
	if (io_depth) /* else rf_config_init's: the library's choice */
		cfg.io_depth = io_depth;
	cfg.log = lt_log_keep;
	lt_logged[0] = 0;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc)
		return 0;
	size_t n = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(lt_row_ok(b, i, g));
			if (n < cap)
				out[n++] = g;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	rf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	*inflight = st.reads_inflight_max;
	rf_loader_close(&ld);
	return n;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("read-cap"));
	const uint64_t N = 2000;
	/* Chunks of 2 KiB: about 60 of them, more than 8 read slots. */
	LT_CHECK(lt_pack(dir, "raw", N, 0, 2048, 0, 0) == 0);
	/* The library's choice of maps stays off (the suites pin it too). */
	setenv("RINGFEED_SEQ_MAP", "0", 1);
	uint64_t *a = calloc(2 * N + 1, 8), *m = calloc(2 * N + 1, 8);
	const enum rf_shuffle orders[] = {RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS};
	for (size_t o = 0; o < 2; o++) {
		uint32_t qa = 0, qm = 0;
		for (int direct = -1; direct <= 0; direct++) {
			size_t na = stream(orders[o], direct, 0, a, 2 * N, &qa);
			LT_CHECK(na == 2 * N && qa == 2);
			LT_CHECK(strstr(lt_logged, "; 2 reads in flight (the page cache reads ahead of "
						   "them)") != NULL);
			/* An io_depth asked for is kept: the same rows. */
			size_t nm = stream(orders[o], direct, 8, m, 2 * N, &qm);
			LT_CHECK(nm == na && !memcmp(a, m, 8 * na) && qm > 2 && qm <= 8);
			LT_CHECK(!strstr(lt_logged, "reads in flight (the page cache"));
			if (qa != 2 || qm <= 2 || nm != na || memcmp(a, m, 8 * na))
				fprintf(stderr, "shuffle %d, direct %d: %zu rows, %u in flight by "
					"default, %zu rows, %u at io_depth 8\n", (int)orders[o], direct,
					na, qa, nm, qm);
		}
		/* O_DIRECT (or its fallback, buffered where the file system
		 * refuses it): not capped. */
		size_t nd = stream(orders[o], 1, 0, m, 2 * N, &qm);
		LT_CHECK(nd == 2 * N && qm > 2);
		LT_CHECK(!strstr(lt_logged, "reads in flight (the page cache"));
	}
	free(a);
	free(m);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
