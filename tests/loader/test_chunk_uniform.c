/* SPDX-License-Identifier: MIT */
/*
 * Description: chunk shuffling is uniform, seen from what the loader
 * delivers (not from the plan's functions).  A dataset of C = 4 chunks
 * (3..5 accepted, should the writer cut differently) is streamed with
 * shuffle chunks over 100 seeds x 24 epochs; the chunk order of each epoch
 * is read off the delivered samples (the chunk of each sample, in order of
 * first appearance).  Chi-square tests, at a level that makes the fixed
 * seeds' outcome safe (3.2e-5 each): every one of the C! orders equally
 * often, and every chunk equally often at every place.  A shuffle that
 * can only make cycles (Sattolo's), that never moves the first chunks, or
 * that reuses one order across epochs or seeds fails.
 */
#include <math.h>

#include "lt.h"

#define SEEDS 100
#define EPOCHS 24
#define MAXC 5

static char dir[256];

/* Chi-square critical value (Wilson-Hilferty) at z = 4 (about 3.2e-5). */
static double
chi2_crit(double df)
{
	double t = 2.0 / (9.0 * df);
	return df * pow(1.0 - t + 4.0 * sqrt(t), 3.0);
}

static int
chi2_ok(const char *what, const uint64_t *counts, size_t k, uint64_t total)
{
	double e = (double)total / (double)k, x = 0;
	for (size_t i = 0; i < k; i++)
		x += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
	double crit = chi2_crit((double)(k - 1));
	printf("  %-32s chi2 = %8.1f (df %zu, critical %.1f)\n", what, x, k - 1, crit);
	return x < crit;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("cuni"));
	uint64_t n = 40;
	if (lt_pack(dir, "d", n, 0, 450, 0, 0) < 0)
		return 1;
	rf_dataset *ds;
	if (lt_dataset_open(&ds, dir, "d.rfs") < 0)
		return 1;
	uint64_t C = rf_dataset_chunks(ds);
	uint32_t chunk_of[64];
	for (uint64_t c = 0; c < C && C <= MAXC; c++) {
		rf_chunk_info ci;
		rf_dataset_chunk_info(ds, c, &ci);
		for (uint64_t s = ci.first_sample; s < ci.first_sample + ci.samples; s++)
			chunk_of[s] = (uint32_t)c;
	}
	rf_dataset_close(&ds);
	if (C < 3 || C > MAXC) {
		fprintf(stderr, "%llu chunks: expected 3..%d\n", (unsigned long long)C, MAXC);
		return 1;
	}
	uint64_t fact = 1;
	for (uint64_t i = 2; i <= C; i++)
		fact *= i;
	uint64_t *orders = calloc(fact, sizeof(*orders));
	uint64_t place[MAXC][MAXC] = {{0}};

	for (uint64_t seed = 0; seed < SEEDS; seed++) {
		struct lt_paths lp;
		rf_config cfg;
		lt_config(&cfg, &lp, dir, "d.rfs");
		cfg.batch_size = (uint32_t)n;
		cfg.epochs = EPOCHS;
		cfg.shuffle = RF_SHUFFLE_CHUNKS;
		cfg.seed = seed * 7919 + 1;
		cfg.pinned_bytes = 1 << 20;
		cfg.decode_threads = 1;
		rf_loader *ld;
		if (rf_loader_open(&ld, &cfg) < 0) {
			fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
			return 1;
		}
		const rf_batch *b;
		int rc;
		uint64_t epochs = 0;
		while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
			/* One batch is one epoch: the chunks in delivery order. */
			uint32_t ord[MAXC], no = 0, seen = 0;
			LT_CHECK(b->samples == n);
			for (uint32_t i = 0; i < b->samples; i++) {
				uint64_t g = lt_row_sample(b, i);
				if (g >= n) {
					lt_failures++;
					break;
				}
				uint32_t c = chunk_of[g];
				if (!(seen & (1u << c))) {
					seen |= 1u << c;
					ord[no++] = c;
				}
			}
			LT_CHECK(no == C);
			/* Lehmer code of the order: its index among the C! orders. */
			uint64_t idx = 0;
			for (uint32_t i = 0; i < no; i++) {
				uint32_t smaller = 0;
				for (uint32_t j = i + 1; j < no; j++)
					smaller += ord[j] < ord[i];
				idx = idx * (C - i) + smaller;
				place[ord[i]][i]++;
			}
			if (no == C)
				orders[idx]++;
			LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
			epochs++;
		}
		LT_CHECK(rc == 0 && epochs == EPOCHS);
		rf_loader_close(&ld);
	}
	uint64_t total = SEEDS * EPOCHS;
	printf("%llu chunks, %llu epochs:\n", (unsigned long long)C, (unsigned long long)total);
	if (!chi2_ok("every order", orders, fact, total))
		lt_failures++;
	for (uint64_t c = 0; c < C; c++) {
		char what[64];
		snprintf(what, sizeof what, "places of chunk %llu", (unsigned long long)c);
		if (!chi2_ok(what, place[c], C, total))
			lt_failures++;
	}
	free(orders);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
