/* SPDX-License-Identifier: MIT */
/*
 * Description: reads in flight.  With io_depth left at rf_config_init's
 * default (0, the library's choice), whole chunks are read 32 at a time, or
 * as many as the read slots allow, through the page cache (direct = -1
 * choosing buffered reads for a small dataset, or direct = 0) and with
 * O_DIRECT alike: rf_stats.reads_inflight_max.  An io_depth the caller sets
 * is kept, and every row of two epochs comes in the same order either way,
 * in file and chunk order.
 */
#include "lt.h"

static char dir[256];

/* Two epochs: every row checked and its sample kept in out (at most
 * cap); the count.  *inflight: rf_stats.reads_inflight_max. */
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
	rf_stats st;
	size_t n = lt_stream_rows(&cfg, out, cap, &st);
	*inflight = st.reads_inflight_max;
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
	for (size_t o = 0; o < 2; o++)
		for (int direct = -1; direct <= 1; direct++) {
			uint32_t qa = 0, qm = 0;
			size_t na = stream(orders[o], direct, 0, a, 2 * N, &qa);
			/* An io_depth asked for is kept: the same rows. */
			size_t nm = stream(orders[o], direct, 3, m, 2 * N, &qm);
			LT_CHECK(na == 2 * N && qa > 8);
			LT_CHECK(nm == na && !memcmp(a, m, 8 * na) && qm == 3);
			if (qa <= 8 || qm != 3 || nm != na || memcmp(a, m, 8 * na))
				fprintf(stderr, "shuffle %d, direct %d: %zu rows, %u in flight by "
					"default, %zu rows, %u at io_depth 3\n", (int)orders[o], direct,
					na, qa, nm, qm);
		}
	free(a);
	free(m);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
