/* SPDX-License-Identifier: MIT */
/* Shared helpers of the plan tests: the table of configurations and a way to
 * run a whole epoch of one rank. */
#ifndef RF_PLAN_TEST_H
#define RF_PLAN_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "rf_test.h"

#define PT_UNUSED __attribute__((unused))

/* Chunk sample counts: small odd sizes, empty chunks, chunks of one sample,
 * an empty dataset and a dataset smaller than one global batch. */
PT_UNUSED static const uint32_t cnt_odd[] = {7, 3, 11, 1, 5, 9, 2, 13, 6};
PT_UNUSED static const uint32_t cnt_zero[] = {5, 0, 3, 0, 0, 8, 1, 0};
PT_UNUSED static const uint32_t cnt_ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
PT_UNUSED static const uint32_t cnt_tiny[] = {3};
PT_UNUSED static const uint32_t cnt_two[] = {1, 1};
PT_UNUSED static const uint32_t cnt_allzero[] = {0, 0, 0};
PT_UNUSED static uint32_t cnt_mid[37];
PT_UNUSED static uint32_t cnt_big[101];

struct plan_case {
	const char *name;
	const uint32_t *counts;
	uint64_t nchunks;
	uint32_t world, batch, window;
};

PT_UNUSED static const struct plan_case plan_cases[] = {
	{"empty w4 b3", cnt_odd, 0, 4, 3, 4},
	{"empty chunks w2 b2", cnt_allzero, 3, 2, 2, 2},
	{"odd w1 b1", cnt_odd, 9, 1, 1, 2},
	{"odd w1 b5", cnt_odd, 9, 1, 5, 3},
	{"odd w4 b3", cnt_odd, 9, 4, 3, 2},
	{"odd w3 b4", cnt_odd, 9, 3, 4, 1},
	{"zero w4 b2", cnt_zero, 8, 4, 2, 4},
	{"zero w2 b3", cnt_zero, 8, 2, 3, 1},
	{"ones w4 b1", cnt_ones, 13, 4, 1, 2},
	{"ones w4 b3 W5", cnt_ones, 13, 4, 3, 5},
	{"tiny w4 b2 (N < G)", cnt_tiny, 1, 4, 2, 2},
	{"two w4 b1 (N < world)", cnt_two, 2, 4, 1, 4},
	{"mid w4 b7", cnt_mid, 37, 4, 7, 6},
	{"mid w4 b4 W1", cnt_mid, 37, 4, 4, 1},
	{"mid w1 b16", cnt_mid, 37, 1, 16, 8},
	{"big w4 b16", cnt_big, 101, 4, 16, 8},
	{"big w4 b5 W3", cnt_big, 101, 4, 5, 3},
};
#define NCASES (sizeof plan_cases / sizeof plan_cases[0])

PT_UNUSED static void
plan_cases_init(void)
{
	for (unsigned i = 0; i < 37; i++)
		cnt_mid[i] = (i * 7) % 13 + 1;
	for (unsigned i = 0; i < 101; i++)
		cnt_big[i] = 50 + (i * 37) % 23;
	cnt_big[50] = 0;
	cnt_big[51] = 1;
}

PT_UNUSED static const enum rf_plan_mode all_modes[] = {RF_PLAN_NONE, RF_PLAN_CHUNKS, RF_PLAN_WINDOW,
					      RF_PLAN_FULL};
PT_UNUSED static const enum rf_plan_tail all_tails[] = {RF_PLAN_DROP, RF_PLAN_PAD, RF_PLAN_KEEP};

PT_UNUSED static void
case_params(const struct plan_case *c, enum rf_plan_mode mode, enum rf_plan_tail tail,
	    uint32_t rank, rf_plan_params *pp)
{
	rf_plan_params_init(pp);
	pp->seed = 0x5EED0001;
	pp->epoch = 3;
	pp->fingerprint = 0xF1F2F3F4F5F6F7F8ull;
	pp->rank = rank;
	pp->world = c->world;
	pp->batch = c->batch;
	pp->window = c->window;
	pp->mode = mode;
	pp->tail = tail;
}

PT_UNUSED static rf_plan *
make_plan(const rf_plan_params *pp, const uint32_t *counts, uint64_t nchunks)
{
	rf_plan *p = NULL;
	int rc = rf_plan_create(&p, pp, counts, nchunks, NULL);
	if (rc < 0) {
		fprintf(stderr, "rf_plan_create: %s (%s)\n", rf_strerror(rc),
			p ? rf_plan_errmsg(p) : "");
		exit(1);
	}
	return p;
}

/* Every item one rank receives in an epoch, in order, from the cursor on. */
struct run {
	rf_plan_item *items;
	uint64_t n, cap;
	uint64_t batches;
	uint32_t *sizes; /* per batch */
};

PT_UNUSED static void
run_free(struct run *r)
{
	free(r->items);
	free(r->sizes);
	memset(r, 0, sizeof *r);
}

/* Append batches from the plan's cursor on: all of them, or `limit`. */
PT_UNUSED static void
run_append(struct run *r, rf_plan *p, uint64_t limit)
{
	uint32_t cap = rf_plan_params_get(p)->batch;
	rf_plan_item *buf = malloc(cap * sizeof *buf);
	for (uint64_t b = 0; b < limit; b++) {
		uint32_t n = 0;
		int rc = rf_plan_next_batch(p, buf, cap, &n);
		if (rc < 0) {
			fprintf(stderr, "rf_plan_next_batch: %s\n", rf_strerror(rc));
			exit(1);
		}
		if (n == 0)
			break;
		if (r->n + n > r->cap) {
			r->cap = (r->n + n) * 2;
			r->items = realloc(r->items, r->cap * sizeof *r->items);
		}
		memcpy(r->items + r->n, buf, n * sizeof *buf);
		r->n += n;
		r->sizes = realloc(r->sizes, (r->batches + 1) * sizeof *r->sizes);
		r->sizes[r->batches++] = n;
	}
	free(buf);
}

PT_UNUSED static int
items_equal(const rf_plan_item *a, const rf_plan_item *b)
{
	return a->sample == b->sample && a->pos == b->pos && a->chunk == b->chunk &&
	       a->offset == b->offset && a->flags == b->flags;
}

PT_UNUSED static int
runs_equal(const struct run *a, const struct run *b)
{
	if (a->n != b->n || a->batches != b->batches)
		return 0;
	for (uint64_t i = 0; i < a->n; i++)
		if (!items_equal(&a->items[i], &b->items[i]))
			return 0;
	for (uint64_t i = 0; i < a->batches; i++)
		if (a->sizes[i] != b->sizes[i])
			return 0;
	return 1;
}

PT_UNUSED static int
test_result(const char *name)
{
	if (rf_test_status(name))
		return 1;
	printf("%s: ok\n", name);
	return 0;
}

#endif
