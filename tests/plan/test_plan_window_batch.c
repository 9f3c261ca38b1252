/* SPDX-License-Identifier: MIT */
/*
 * Window mode draws a batch's items together (the segment's order and the
 * places' orders computed several at a time): the items must be exactly
 * those of drawing one position at a time, and the order must stay the one
 * it has always been (hashes of whole epochs, taken from the item-by-item
 * drawing).  Cases: places above the table of keyed orders (W > 32), chunks
 * of one sample and empty ones, large chunks (many items a place a batch).
 */
#include "plan_test.h"

struct wcase {
	const char *name;
	uint64_t nchunks;
	uint32_t window;
	uint32_t kind; /* chunk sizes: 0 large, 1 mixed with ones and zeros, 2 small */
	uint64_t golden;
};

static const struct wcase wcases[] = {
	{"large W2", 40, 2, 0, 0x7698b845fe475206ull},
	{"large W8", 40, 8, 0, 0x4613d3d3bdffd2ceull},
	{"large W32", 40, 32, 0, 0x567538df64f38ed8ull},
	{"large W40", 40, 40, 0, 0x67ddfc37f1673798ull},
	{"mixed W33", 300, 33, 1, 0x169f9c2d754b7533ull},
	{"mixed W100", 300, 100, 1, 0x5086774e9e96d901ull},
	{"small W64", 500, 64, 2, 0xb150ff1d757ac3d2ull},
	{"small W1024", 1500, 1024, 2, 0xe868ff87265860feull},
};

static uint32_t
chunk_size(uint32_t kind, uint64_t i)
{
	switch (kind) {
	case 0: return 4000 + (uint32_t)((i * 7919) % 997);
	case 1: return i % 5 == 0 ? 1 : i % 7 == 0 ? 0 : (uint32_t)((i * 37) % 61 + 2);
	default: return (uint32_t)(i % 9 + 1);
	}
}

/* rf_perm_map_each against rf_perm_at: permutations of every size class
 * (cycle walking, the smallest domain), any count of inputs around the
 * lanes' width. */
static void
test_map_each(void)
{
	enum { P = 7, M = 67 };
	static const uint64_t sizes[P] = {2, 3, 200, 257, 1000, 65537, 3000000017ull};
	rf_perm perms[P];
	for (int i = 0; i < P; i++)
		rf_perm_init(&perms[i], sizes[i], 0xABCDull * (uint64_t)(i + 1));
	const rf_perm *ps[M];
	uint64_t in[M], out[M];
	uint64_t x = 12345;
	for (uint32_t count = 0; count <= M; count++) {
		for (uint32_t i = 0; i < count; i++) {
			x = rf_plan_mix64(x + i);
			ps[i] = &perms[x % P];
			in[i] = (x >> 20) % ps[i]->n;
		}
		rf_perm_map_each(ps, in, count, out);
		for (uint32_t i = 0; i < count; i++)
			CHECK_CONT_MSG(out[i] == rf_perm_at(ps[i], in[i]), "map_each: count %u, input %u",
				       count, i);
	}
}

int
main(int argc, char **argv)
{
	test_map_each();
	int print = argc > 1; /* print the hashes instead of checking them */
	for (size_t ci = 0; ci < sizeof wcases / sizeof wcases[0]; ci++) {
		const struct wcase *c = &wcases[ci];
		uint32_t *counts = malloc(c->nchunks * sizeof *counts);
		for (uint64_t i = 0; i < c->nchunks; i++)
			counts[i] = chunk_size(c->kind, i);
		rf_plan_params pp;
		rf_plan_params_init(&pp);
		pp.seed = 0x5EED0002;
		pp.epoch = 5;
		pp.fingerprint = 0xF1F2F3F4F5F6F7F8ull;
		pp.rank = 0;
		pp.world = 1;
		pp.batch = 256;
		pp.window = c->window;
		pp.mode = RF_PLAN_WINDOW;
		pp.tail = RF_PLAN_KEEP;
		rf_plan *p = make_plan(&pp, counts, c->nchunks);
		uint64_t N = rf_plan_samples(p);
		rf_plan_item *all = malloc(N * sizeof *all);
		CHECK_CONT_MSG(rf_plan_items(p, 0, (uint32_t)N, all) == 0, "%s: rf_plan_items", c->name);
		uint64_t h = 0xcbf29ce484222325ull;
		for (uint64_t i = 0; i < N; i++) {
			uint64_t s = 0;
			CHECK_CONT_MSG(rf_plan_global(p, i, &s) == 0, "%s: rf_plan_global", c->name);
			if (s != all[i].sample) {
				CHECK_CONT_MSG(0, "%s: position %llu: %llu drawn alone, %llu in a batch",
					       c->name, (unsigned long long)i, (unsigned long long)s,
					       (unsigned long long)all[i].sample);
				break;
			}
			h = (h ^ s) * 0x100000001b3ull;
		}
		/* Batches at odd starts and lengths: the same items. */
		for (uint64_t first = 0; first < N; first += 97) {
			rf_plan_item got[300];
			uint32_t m = (uint32_t)(N - first < 300 ? N - first : 300);
			CHECK_CONT_MSG(rf_plan_items(p, first, m, got) == 0, "%s: items", c->name);
			for (uint32_t i = 0; i < m; i++)
				if (got[i].sample != all[first + i].sample || got[i].chunk != all[first + i].chunk ||
				    got[i].offset != all[first + i].offset || got[i].read != all[first + i].read ||
				    got[i].keep_from != all[first + i].keep_from || got[i].pos != first + i) {
					CHECK_CONT_MSG(0, "%s: item %llu differs from %llu on", c->name,
						       (unsigned long long)(first + i), (unsigned long long)first);
					break;
				}
		}
		if (print)
			printf("%s: 0x%016llxull\n", c->name, (unsigned long long)h);
		else
			CHECK_CONT_MSG(h == c->golden, "%s: order hash 0x%016llx, expected 0x%016llx",
				       c->name, (unsigned long long)h, (unsigned long long)c->golden);
		free(all);
		free(counts);
		rf_plan_destroy(&p);
	}
	return rf_test_status("test_plan_window_batch");
}
