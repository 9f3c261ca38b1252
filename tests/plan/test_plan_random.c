/* SPDX-License-Identifier: MIT */
/*
 * Description: the shuffles are as random as documented.  full: over 20000
 * seeds (deterministic, so the test is not flaky), chi-square tests (the
 * family of them at the 0.001 level) on the position of single samples (N = 64, and N = 50, which
 * needs cycle walking), on which sample follows a given one, over epochs
 * instead of seeds, on all 120 orders of N = 5 and 720 of N = 6, and on the
 * joint law of the first two samples of N = 17.  chunks: the place
 * of a chunk in the chunk order.  window: prints how far samples move (mean
 * |new position - old position| / N against file order, and against the
 * shuffled chunk sequence in chunks) for several W and checks that mixing
 * grows with W and stays within the window.
 */
#include <math.h>

#include "plan_test.h"

#define SEEDS 20000

/* Chi-square critical value (Wilson-Hilferty) at significance 3.3e-5 per
 * test: about 30 tests run, so the whole family is at 0.001 (Bonferroni). */
static double
chi2_crit(double df)
{
	const double z = 3.99;
	double t = 2.0 / (9.0 * df);
	return df * pow(1.0 - t + z * sqrt(t), 3.0);
}

static double
chi2_uniform(const uint64_t *counts, size_t k, uint64_t total)
{
	double e = (double)total / (double)k, x = 0;
	for (size_t i = 0; i < k; i++)
		x += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
	return x;
}

static void
check_chi2(const char *what, const uint64_t *counts, size_t k, uint64_t total)
{
	double x = chi2_uniform(counts, k, total), crit = chi2_crit((double)(k - 1));
	printf("  %-44s chi2 = %8.1f (df %zu, critical %.1f)\n", what, x, k - 1, crit);
	CHECK_CONT_MSG(x < crit, "%s: chi2 %.1f >= %.1f", what, x, crit);
}

static rf_plan *
full_plan(uint32_t n, uint64_t seed, uint64_t epoch, const uint32_t *counts, uint64_t nch)
{
	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.mode = RF_PLAN_FULL;
	pp.seed = seed;
	pp.epoch = epoch;
	(void)n;
	return make_plan(&pp, counts, nch);
}

static void
full_positions(uint32_t n, int vary_epoch)
{
	uint32_t counts[3] = {n / 3, n / 3, n - 2 * (n / 3)};
	uint64_t *pos = calloc((size_t)n * n, sizeof *pos);   /* [sample][position] */
	uint64_t *succ = calloc((size_t)n * n, sizeof *succ); /* [sample][next or n-1 = last] */
	uint64_t *order = malloc(n * sizeof *order);
	for (uint64_t s = 0; s < SEEDS; s++) {
		rf_plan *p = vary_epoch ? full_plan(n, 77, s, counts, 3) : full_plan(n, s * 7919 + 1, 0, counts, 3);
		for (uint32_t i = 0; i < n; i++) {
			rf_plan_global(p, i, &order[i]);
			pos[order[i] * n + i]++;
		}
		for (uint32_t i = 0; i < n; i++) {
			/* Successor categories: the n-1 other samples, renumbered
			 * to skip the sample itself, plus "last" as n - 1. */
			uint64_t a = order[i];
			uint64_t cat = n - 1;
			if (i + 1 < n)
				cat = order[i + 1] < a ? order[i + 1] : order[i + 1] - 1;
			succ[a * n + cat]++;
		}
		rf_plan_destroy(&p);
	}
	const uint32_t probe[] = {0, 1, n / 2, n - 1};
	char what[96];
	for (size_t j = 0; j < 4; j++) {
		snprintf(what, sizeof what, "full N=%u %s: position of sample %u", n,
			 vary_epoch ? "epochs" : "seeds", probe[j]);
		check_chi2(what, pos + (size_t)probe[j] * n, n, SEEDS);
		snprintf(what, sizeof what, "full N=%u %s: successor of sample %u", n,
			 vary_epoch ? "epochs" : "seeds", probe[j]);
		check_chi2(what, succ + (size_t)probe[j] * n, n, SEEDS);
	}
	free(pos);
	free(succ);
	free(order);
}

/* All n! orders of n samples should be equally likely.  A Feistel network
 * on its own gives only even permutations of its domain, and one with tiny
 * halves a biased subset; neither may show through. */
static void
full_small_perms(uint32_t n, uint64_t per_cell)
{
	uint32_t counts[1] = {n};
	uint64_t fact = 1;
	for (uint32_t i = 2; i <= n; i++)
		fact *= i;
	uint64_t *hist = calloc(fact, sizeof *hist);
	const uint64_t trials = fact * per_cell;
	for (uint64_t s = 0; s < trials; s++) {
		rf_plan *p = full_plan(n, s, 1, counts, 1);
		uint64_t o[8];
		for (uint32_t i = 0; i < n; i++)
			rf_plan_global(p, i, &o[i]);
		/* Lehmer code of the permutation. */
		uint64_t code = 0;
		for (uint32_t i = 0; i < n; i++) {
			unsigned smaller = 0;
			for (uint32_t j = i + 1; j < n; j++)
				smaller += o[j] < o[i];
			code = code * (n - i) + smaller;
		}
		hist[code]++;
		rf_plan_destroy(&p);
	}
	char what[96];
	snprintf(what, sizeof what, "full N=%u: all %llu permutations", n, (unsigned long long)fact);
	check_chi2(what, hist, fact, trials);
	free(hist);
}

/* The joint law of the first two samples of N = 17: 272 equally likely
 * pairs. */
static void
full_pairs(void)
{
	uint32_t counts[2] = {9, 8};
	uint64_t hist[17 * 17] = {0}, packed[17 * 16];
	for (uint64_t s = 0; s < SEEDS; s++) {
		rf_plan *p = full_plan(17, s + 1000000, 2, counts, 2);
		uint64_t a, b;
		rf_plan_global(p, 0, &a);
		rf_plan_global(p, 1, &b);
		hist[a * 17 + b]++;
		rf_plan_destroy(&p);
	}
	size_t k = 0;
	for (size_t a = 0; a < 17; a++)
		for (size_t b = 0; b < 17; b++)
			if (a != b)
				packed[k++] = hist[a * 17 + b];
	check_chi2("full N=17: (first, second) pairs", packed, k, SEEDS);
}

static void
chunk_order(void)
{
	uint32_t counts[16];
	for (int i = 0; i < 16; i++)
		counts[i] = 3;
	uint64_t first[16] = {0}, place_of_5[16] = {0};
	for (uint64_t s = 0; s < SEEDS; s++) {
		rf_plan_params pp;
		rf_plan_params_init(&pp);
		pp.mode = RF_PLAN_CHUNKS;
		pp.seed = s;
		rf_plan *p = make_plan(&pp, counts, 16);
		for (uint64_t j = 0; j < 16; j++) {
			uint64_t smp, ch;
			uint32_t off;
			rf_plan_global(p, j * 3, &smp);
			rf_plan_locate(p, smp, &ch, &off);
			if (j == 0)
				first[ch]++;
			if (ch == 5)
				place_of_5[j]++;
		}
		rf_plan_destroy(&p);
	}
	check_chi2("chunks: first chunk", first, 16, SEEDS);
	check_chi2("chunks: place of chunk 5", place_of_5, 16, SEEDS);
}

/* Window displacement, returned in chunks against the chunk sequence. */
static double
window_mix(uint32_t W, double *file_disp)
{
	enum { C = 512, S = 64 };
	static uint32_t counts[C];
	for (int i = 0; i < C; i++)
		counts[i] = S;
	uint64_t N = (uint64_t)C * S;
	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.seed = 99;
	pp.mode = RF_PLAN_CHUNKS;
	rf_plan *ch = make_plan(&pp, counts, C);
	pp.mode = RF_PLAN_WINDOW;
	pp.window = W;
	rf_plan *wp = make_plan(&pp, counts, C);
	uint64_t *stream = malloc(N * sizeof *stream); /* sample -> place in the chunk sequence */
	for (uint64_t i = 0; i < N; i++) {
		uint64_t s;
		rf_plan_global(ch, i, &s);
		stream[s] = i;
	}
	double local = 0, file = 0, maxlocal = 0;
	for (uint64_t i = 0; i < N; i++) {
		uint64_t s;
		rf_plan_global(wp, i, &s);
		double d = fabs((double)i - (double)stream[s]);
		local += d;
		if (d > maxlocal)
			maxlocal = d;
		file += fabs((double)i - (double)s);
	}
	local /= (double)N * S;
	*file_disp = file / (double)N / (double)N;
	/* A sample never leaves its window: at most about W chunks away. */
	CHECK_CONT_MSG(maxlocal / S <= (double)(W < 2 ? 1 : W) + 1, "window %u: a sample moved %.1f chunks", W,
	      maxlocal / S);
	free(stream);
	rf_plan_destroy(&ch);
	rf_plan_destroy(&wp);
	return local;
}

int
main(void)
{
	printf("full mode:\n");
	full_positions(64, 0);
	full_positions(50, 0);
	full_positions(64, 1);
	full_small_perms(5, 500);
	full_small_perms(6, 60);
	full_pairs();
	printf("chunks mode:\n");
	chunk_order();
	printf("window mode (512 chunks of 64 samples): mean displacement\n");
	static const uint32_t ws[] = {1, 2, 4, 8, 16, 32, 128};
	double prev = -1;
	for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
		double file;
		double local = window_mix(ws[i], &file);
		printf("  W = %3u: %.3f of N against file order, %.2f chunks against the chunk sequence\n",
		       ws[i], file, local);
		CHECK_CONT_MSG(local > prev, "W = %u mixes no more than the W before", ws[i]);
		CHECK_CONT_MSG(file > 0.25 && file < 0.42, "W = %u: file displacement %.3f", ws[i], file);
		/* (Wider windows lose some to the filling and draining at
		 * the epoch's ends, a larger part of 512 chunks.) */
		if (ws[i] >= 2 && ws[i] <= 32)
			CHECK_CONT_MSG(local >= 0.2 * ws[i], "W = %u: only %.2f chunks of mixing", ws[i], local);
		prev = local;
	}
	return test_result("test_plan_random");
}
