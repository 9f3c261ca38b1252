/* SPDX-License-Identifier: MIT */
/*
 * Description: micro-benchmark of the plan (built, not run as a test):
 * generation rate of the full-mode permutation (rf_perm_at) in samples/s on
 * one core, and of whole batches of items (rf_plan_batch: permutation, chunk
 * lookup, read entries) in each mode, and of a mixture's batches
 * (rf_mix_batch: 3 sources, 0.7/0.2/0.1, chunks mode).  Each measurement repeats until at
 * least `min_seconds` (default 1) of CPU time have passed; rates are per
 * core (thread CPU time).
 *
 *   bench_plan [min_seconds] [samples]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "plan/mix.h"
#include "plan/plan.h"

/* CPU time of this thread: the rate per core, whatever else the machine
 * runs. */
static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	double min_s = argc > 1 ? atof(argv[1]) : 1.0;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000007ull; /* odd: cycle walking */
	if (n < (1u << 23))
		n = 1u << 23;
	printf("ringfeed %s plan benchmark, N = %llu samples\n", rf_version_string(),
	       (unsigned long long)n);

	/* The keyed permutation alone. */
	rf_perm p;
	rf_perm_init(&p, n, 12345);
	uint64_t sink = 0, done = 0;
	double t0 = now(), t;
	do {
		uint64_t base = done % (n - (1u << 22));
		for (uint64_t i = 0; i < (1u << 22); i++)
			sink += rf_perm_at(&p, base + i);
		done += 1u << 22;
		t = now() - t0;
	} while (t < min_s);
	printf("full permutation (rf_perm_at):   %8.1f M samples/s\n", (double)done / t / 1e6);
	uint64_t *buf = malloc(4096 * sizeof *buf);
	done = 0;
	t0 = now();
	do {
		uint64_t base = done % (n - 4096);
		rf_perm_fill(&p, base, 4096, buf);
		sink += buf[4095];
		done += 4096;
		t = now() - t0;
	} while (t < min_s);
	printf("full permutation (rf_perm_fill): %8.1f M samples/s\n", (double)done / t / 1e6);
	free(buf);

	/* Whole batches, with the chunk lookup: 64-sample chunks. */
	uint64_t nch = n / 64;
	uint32_t *counts = malloc(nch * sizeof *counts);
	for (uint64_t c = 0; c < nch; c++)
		counts[c] = 64;
	enum { B = 256 };
	rf_plan_item *items = malloc(B * sizeof *items);
	for (int m = RF_PLAN_NONE; m <= RF_PLAN_FULL; m++) {
		rf_plan_params pp;
		rf_plan_params_init(&pp);
		pp.mode = (enum rf_plan_mode)m;
		pp.batch = B;
		pp.window = 128;
		rf_plan *plan;
		t0 = now();
		if (rf_plan_create(&plan, &pp, counts, nch, NULL) < 0)
			return 1;
		double setup = now() - t0;
		done = 0;
		t0 = now();
		uint64_t k = 0, nb = rf_plan_batches(plan);
		do {
			uint32_t got;
			rf_plan_batch(plan, k, items, B, &got);
			sink += items[got - 1].sample;
			done += got;
			k = (k + 1) % nb;
			t = now() - t0;
		} while (t < min_s || done < B * 1000);
		printf("batches, mode %-7s (rf_plan_batch): %8.1f M samples/s (epoch set-up %.3f s for %llu chunks)\n",
		       rf_plan_mode_name((enum rf_plan_mode)m), (double)done / t / 1e6, setup,
		       (unsigned long long)nch);
		rf_plan_destroy(&plan);
	}
	free(items);

	/* A mixture of three sources (a tenth of the counts each), chunks
	 * mode, so that the mixture's own work shows. */
	rf_mix_source src[3];
	const double w[3] = {0.7, 0.2, 0.1};
	for (int i = 0; i < 3; i++) {
		src[i] = (rf_mix_source){.name = NULL, .weight = w[i], .counts = counts,
					 .nchunks = nch / 10 + (uint64_t)i, .mode = RF_PLAN_CHUNKS,
					 .window = 1};
	}
	rf_mix_params mp;
	rf_mix_params_init(&mp);
	mp.batch = B;
	rf_mix *mix;
	if (rf_mix_create(&mix, &mp, src, 3, NULL) < 0)
		return 1;
	rf_mix_item *mitems = malloc(B * sizeof *mitems);
	done = 0;
	t0 = now();
	uint64_t k = 0, nb = rf_mix_batches(mix);
	do {
		uint32_t got;
		rf_mix_batch(mix, k, mitems, B, &got);
		sink += mitems[got - 1].item.sample;
		done += got;
		k = (k + 1) % nb;
		t = now() - t0;
	} while (t < min_s || done < B * 1000);
	printf("mixture of 3, chunks (rf_mix_batch):  %8.1f M samples/s\n", (double)done / t / 1e6);
	free(mitems);
	rf_mix_destroy(&mix);
	free(counts);
	return sink == 42 ? 2 : 0;
}
