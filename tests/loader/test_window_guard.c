/* SPDX-License-Identifier: MIT */
/*
 * Description: the window gather refuses to hold more chunks than it has
 * room for.  White-box: the plan's batches are replaced, at link time
 * (-Wl,--wrap=rf_plan_next_batch), by a stub plan's, over the real plan's
 * read sequence (zstd chunks, window W = 4, batches of 2):
 *  - "lag": batch k takes a sample of read k and one of read 0, and every
 *    item says reads from 0 on are still needed (keep_from 0), so the
 *    window can never let go and grows by a chunk a read.  The loader must
 *    stop with -EPROTO once its table is full, after delivering only right
 *    batches: never put a chunk over one it still holds (the samples of
 *    read 0 would then come from another chunk).
 *  - "slide": the same shape, keep_from k - W + 1: a well-behaved plan
 *    holding W chunks, delivered whole and right (the control, so that the
 *    first case's -EPROTO is the guard's and not the stub's).
 * No timing: the windowed reads wait for the gather, whatever the speeds.
 */
#include "lt.h"

#define W 4
#define B 2

int __real_rf_plan_next_batch(rf_plan *plan, rf_plan_item *items, uint32_t cap, uint32_t *n);
int __wrap_rf_plan_next_batch(rf_plan *plan, rf_plan_item *items, uint32_t cap, uint32_t *n);

static char dir[256];
static int g_lag;                /* 1: keep_from stays 0 */
static rf_chunk_info *g_chunks;  /* the dataset's chunks */
static uint64_t g_expect[4096][B]; /* the samples the stub put in batch k */
static uint64_t g_batches;       /* batches the stub made */

/* Item i of batch k from read j, sample `off` (modulo the chunk's count). */
static void
stub_item(rf_plan *plan, rf_plan_item *it, uint64_t k, uint32_t i, uint64_t j, uint64_t off,
	  uint64_t keep_from)
{
	uint64_t chunk = 0;
	if (rf_plan_read_chunk(plan, j, &chunk) < 0) {
		fprintf(stderr, "stub: read %llu has no chunk\n", (unsigned long long)j);
		exit(1);
	}
	const rf_chunk_info *ci = &g_chunks[chunk];
	memset(it, 0, sizeof(*it));
	it->offset = (uint32_t)(off % ci->samples);
	it->sample = ci->first_sample + it->offset;
	it->pos = k * B + i;
	it->chunk = chunk;
	it->read = j;
	it->keep_from = keep_from;
	g_expect[k][i] = it->sample;
}

int
__wrap_rf_plan_next_batch(rf_plan *plan, rf_plan_item *items, uint32_t cap, uint32_t *n)
{
	uint64_t k = rf_plan_tell(plan);
	int rc = __real_rf_plan_next_batch(plan, items, cap, n);
	if (rc < 0 || *n == 0)
		return rc;
	if (*n != B || cap < B || k >= sizeof(g_expect) / sizeof(g_expect[0])) {
		fprintf(stderr, "stub: batch %llu of %u samples (cap %u)\n", (unsigned long long)k,
			*n, cap);
		exit(1);
	}
	uint64_t reads = rf_plan_reads(plan);
	uint64_t j = k < reads ? k : reads - 1;
	/* Items must not need a read before the ones they name: j >= lo. */
	uint64_t lo = g_lag ? 0 : (j + 1 >= W ? j + 1 - W : 0);
	/* The new read's sample first, then the oldest one's: a table entry
	 * reused too early is read right after the reuse. */
	stub_item(plan, &items[0], k, 0, j, k + 1, lo);
	stub_item(plan, &items[1], k, 1, lo, k, lo);
	if (k + 1 > g_batches)
		g_batches = k + 1;
	return 0;
}

/* Stream the dataset through the stub plan; returns the final code (0 at
 * the end of the data) and the batches delivered. */
static int
stream(int lag, uint64_t *delivered)
{
	g_lag = lag;
	g_batches = 0;
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "d.rfs");
	cfg.batch_size = B;
	cfg.drop_last = 1;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = W;
	cfg.seed = 11;
	cfg.pinned_bytes = 8 << 20;
	cfg.decode_threads = 2;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		exit(1);
	}
	const rf_batch *b;
	uint64_t k = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->samples == B && b->epoch == 0 && b->first_sample == k * B);
		for (uint32_t i = 0; i < b->samples && i < B; i++) {
			uint64_t g = lt_row_sample(b, i);
			if (g != g_expect[k][i]) {
				fprintf(stderr, "%s: batch %llu row %u holds sample %llu, the plan put "
					"%llu there\n", lag ? "lag" : "slide", (unsigned long long)k, i,
					(unsigned long long)g, (unsigned long long)g_expect[k][i]);
				lt_failures++;
			}
		}
		for (uint32_t i = 0; i < b->samples; i++)
			LT_CHECK(lt_row_ok(b, i, lt_row_sample(b, i)));
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		k++;
	}
	if (rc < 0 && rc != -EPROTO)
		fprintf(stderr, "%s: stream stopped with %d (%s): %s\n", lag ? "lag" : "slide", rc,
			rf_strerror(rc), rf_loader_errmsg(ld));
	rf_loader_close(&ld);
	*delivered = k;
	return rc;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("wguard"));
	/* Small zstd chunks: many reads; compressed, so the window holds
	 * its chunks in raw buffers and the reader never waits for a slot. */
	if (lt_pack(dir, "d", 480, 1, 256, 0, 0) < 0)
		return 1;
	rf_dataset *ds;
	if (lt_dataset_open(&ds, dir, "d.rfs") < 0)
		return 1;
	uint64_t nc = rf_dataset_chunks(ds);
	g_chunks = calloc(nc, sizeof(*g_chunks));
	for (uint64_t c = 0; c < nc; c++) {
		LT_CHECK(rf_dataset_chunk_info(ds, c, &g_chunks[c]) == 0);
		LT_CHECK(g_chunks[c].codec == RF_CODEC_ZSTD);
	}
	rf_dataset_close(&ds);
	/* Enough reads that a lagging window overflows any table of a few
	 * times W entries. */
	LT_CHECK(nc >= 8 * W);
	printf("%llu chunks\n", (unsigned long long)nc);

	uint64_t n;
	int rc = stream(0, &n);
	LT_CHECK(rc == 0);
	LT_CHECK(n == g_batches && n == 480 / B);

	rc = stream(1, &n);
	if (rc != -EPROTO) {
		fprintf(stderr, "lag: the stream ended with %d (%s) after %llu batches, expected "
			"-EPROTO (a window holding more chunks than it has room for)\n", rc,
			rf_strerror(rc), (unsigned long long)n);
		lt_failures++;
	}
	/* It stopped while the stub's reads were still arriving. */
	LT_CHECK(n < nc);
	printf("lag: -EPROTO after %llu batches\n", (unsigned long long)n);

	free(g_chunks);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
