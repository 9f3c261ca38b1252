/* SPDX-License-Identifier: MIT */
/*
 * Description: reads in flight.  With io_depth left at 0 (rf_config_init's
 * default), whole chunks read through the page cache (direct = -1 choosing
 * buffered reads for a small dataset, or direct = 0) go as many at a time
 * as keep 16 MiB of the kernel's readahead coming: 2 in file order from a
 * device that reads 8 MiB ahead (RINGFEED_READAHEAD_KB sets it here), 8
 * with 1 MiB, 32 (no cap) with 128 KiB or when the readahead is unknown,
 * and 32 in chunk order when chunks are far smaller than the readahead
 * (a chunk's read brings only its own bytes).  rf_stats.reads_inflight_max
 * and the memory plan's log line say so.  Every row of two epochs comes,
 * in the same order as with an io_depth of 8 asked for, which is kept.
 * O_DIRECT reads are never capped.
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
	cfg.log = lt_log_keep;
	lt_logged[0] = 0;
	rf_stats st;
	size_t n = lt_stream_rows(&cfg, out, cap, &st);
	*inflight = st.reads_inflight_max;
	return n;
}

static const char *capped = "reads in flight (the page cache reads ahead of them)";

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
	const struct {
		enum rf_shuffle shuffle;
		const char *ra_kb; /* NULL: unknown (no block device) */
		uint32_t want;     /* reads in flight at most by default */
	} cases[] = {
		{RF_SHUFFLE_NONE, "8192", 2},   {RF_SHUFFLE_NONE, "1024", 8},
		{RF_SHUFFLE_NONE, "128", 32},   {RF_SHUFFLE_NONE, "0", 32},
		{RF_SHUFFLE_CHUNKS, "8192", 32},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		setenv("RINGFEED_READAHEAD_KB", cases[k].ra_kb, 1);
		uint32_t qa = 0, qm = 0;
		for (int direct = -1; direct <= 0; direct++) {
			size_t na = stream(cases[k].shuffle, direct, 0, a, 2 * N, &qa);
			/* 32 asked: as many as the read slots allow. */
			int ok = cases[k].want < 32 ? qa == cases[k].want : qa > 8;
			LT_CHECK(na == 2 * N && ok);
			LT_CHECK((strstr(lt_logged, capped) != NULL) == (cases[k].want < 32));
			/* An io_depth asked for is kept: the same rows. */
			size_t nm = stream(cases[k].shuffle, direct, 3, m, 2 * N, &qm);
			LT_CHECK(nm == na && !memcmp(a, m, 8 * na) && qm == 3);
			LT_CHECK(!strstr(lt_logged, capped));
			if (!ok || qm != 3 || nm != na || memcmp(a, m, 8 * na))
				fprintf(stderr, "shuffle %d, readahead %s KiB, direct %d: %zu rows, %u in "
					"flight by default, %zu rows, %u at io_depth 3\n",
					(int)cases[k].shuffle, cases[k].ra_kb, direct, na, qa, nm, qm);
		}
	}
	/* O_DIRECT (or its fallback, buffered where the file system refuses
	 * it): not capped. */
	setenv("RINGFEED_READAHEAD_KB", "8192", 1);
	uint32_t qd = 0;
	size_t nd = stream(RF_SHUFFLE_NONE, 1, 0, m, 2 * N, &qd);
	LT_CHECK(nd == 2 * N && qd > 8);
	LT_CHECK(!strstr(lt_logged, capped));
	free(a);
	free(m);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
