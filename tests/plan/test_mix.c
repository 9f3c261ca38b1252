/* SPDX-License-Identifier: MIT */
/* The mixture order (src/plan/mix.h): proportions at every position and in
 * every window of 100 batches, determinism, rank slices, each source's own
 * epochs, resume, elastic world, weights, schemas and the state blob, over a
 * table of mixtures. */
#include <errno.h>
#include <math.h>

#include "plan_test.h"
#include "plan/mix.h"

#define MAXS 8
#define GOLDEN_HASH 0xf63f2b0a4a6de66full
#define GOLDEN_ID 0x384e83465f89818full

struct src_def {
	const char *name;
	double weight;
	uint64_t nchunks;
	uint32_t chunk;   /* samples a chunk (the last one chunk_last when not 0) */
	uint32_t chunk_last;
	enum rf_plan_mode mode;
	uint32_t window;
};

struct mix_case {
	const char *name;
	uint32_t world, batch;
	enum rf_plan_tail tail;
	uint64_t epoch_samples; /* 0: default */
	size_t nsrc;
	struct src_def src[MAXS];
};

static const struct mix_case cases[] = {
	{"0.7/0.2/0.1 w4 b8", 4, 8, RF_PLAN_DROP, 0, 3,
	 {{"web", 0.7, 40, 100, 37, RF_PLAN_WINDOW, 8},
	  {"code", 0.2, 7, 13, 0, RF_PLAN_CHUNKS, 1},
	  {"math", 0.1, 300, 1, 0, RF_PLAN_FULL, 1}}},
	{"1/1000 w2 b16 keep", 2, 16, RF_PLAN_KEEP, 20000, 2,
	 {{"rare", 1, 3, 5, 0, RF_PLAN_WINDOW, 2},
	  {"bulk", 1000, 10, 4096, 11, RF_PLAN_NONE, 1}}},
	{"tiny+huge w8 b4", 8, 4, RF_PLAN_DROP, 0, 2,
	 {{"tiny", 0.5, 1, 3, 0, RF_PLAN_FULL, 1},
	  {"huge", 0.5, 2, 30000, 7, RF_PLAN_CHUNKS, 1}}},
	{"four uneven w3 b5 keep", 3, 5, RF_PLAN_KEEP, 0, 4,
	 {{"a", 3, 9, 7, 2, RF_PLAN_WINDOW, 4},
	  {"b", 1.5, 5, 1, 0, RF_PLAN_NONE, 1},
	  {"c", 0.25, 2, 50, 0, RF_PLAN_FULL, 1},
	  {"d", 0.001, 4, 9, 0, RF_PLAN_CHUNKS, 1}}},
	{"zero weight w2 b7", 2, 7, RF_PLAN_DROP, 3000, 3,
	 {{"on", 2, 11, 17, 0, RF_PLAN_WINDOW, 3},
	  {"off", 0, 0, 0, 0, RF_PLAN_NONE, 1},
	  {"also", 1, 6, 5, 0, RF_PLAN_CHUNKS, 1}}},
	{"seven equal w1 b32", 1, 32, RF_PLAN_DROP, 10000, 7,
	 {{"s0", 1, 3, 10, 0, RF_PLAN_NONE, 1}, {"s1", 1, 4, 20, 0, RF_PLAN_FULL, 1},
	  {"s2", 1, 5, 30, 0, RF_PLAN_CHUNKS, 1}, {"s3", 1, 6, 40, 0, RF_PLAN_WINDOW, 2},
	  {"s4", 1, 7, 50, 0, RF_PLAN_NONE, 1}, {"s5", 1, 8, 60, 0, RF_PLAN_FULL, 1},
	  {"s6", 1, 9, 70, 0, RF_PLAN_CHUNKS, 1}}},
	{"one source w4 b3", 4, 3, RF_PLAN_KEEP, 0, 1,
	 {{"only", 0.3, 5, 11, 0, RF_PLAN_WINDOW, 2}}},
};
#define NMIX (sizeof cases / sizeof cases[0])

struct built {
	uint32_t *counts[MAXS];
	rf_mix_source src[MAXS];
};

static void
build_sources(const struct mix_case *c, struct built *b)
{
	for (size_t s = 0; s < c->nsrc; s++) {
		const struct src_def *sd = &c->src[s];
		b->counts[s] = calloc(sd->nchunks + 1, sizeof(uint32_t));
		for (uint64_t k = 0; k < sd->nchunks; k++)
			b->counts[s][k] = (k + 1 == sd->nchunks && sd->chunk_last) ? sd->chunk_last
										 : sd->chunk;
		rf_mix_source *m = &b->src[s];
		memset(m, 0, sizeof *m);
		m->name = sd->name;
		m->weight = sd->weight;
		m->counts = b->counts[s];
		m->nchunks = sd->nchunks;
		m->fingerprint = 0xABCD0000u + s;
		m->mode = sd->mode;
		m->window = sd->window;
	}
}

static void
built_free(const struct mix_case *c, struct built *b)
{
	for (size_t s = 0; s < c->nsrc; s++)
		free(b->counts[s]);
}

static void
case_mix_params(const struct mix_case *c, uint32_t rank, uint32_t world, uint32_t batch,
		rf_mix_params *mp)
{
	rf_mix_params_init(mp);
	mp->seed = 0x5EED0002;
	mp->epoch = 2;
	mp->epoch_samples = c->epoch_samples;
	mp->rank = rank;
	mp->world = world;
	mp->batch = batch;
	mp->tail = c->tail;
}

static rf_mix *
make_mix(const rf_mix_params *mp, const struct built *b, size_t n)
{
	rf_mix *m = NULL;
	int rc = rf_mix_create(&m, mp, b->src, n, NULL);
	if (rc < 0) {
		fprintf(stderr, "rf_mix_create: %s\n", rf_strerror(rc));
		exit(1);
	}
	return m;
}

/* Every item of one rank from the cursor on: `limit` batches at most. */
struct mrun {
	rf_mix_item *items;
	uint64_t n, cap, batches;
};

static void
mrun_append(struct mrun *r, rf_mix *m, uint64_t limit)
{
	uint32_t cap = rf_mix_params_get(m)->batch;
	rf_mix_item *buf = malloc(cap * sizeof *buf);
	for (uint64_t k = 0; k < limit; k++) {
		uint32_t n = 0;
		if (rf_mix_next_batch(m, buf, cap, &n) < 0) {
			fprintf(stderr, "rf_mix_next_batch: %s\n", rf_mix_errmsg(m));
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
		r->batches++;
	}
	free(buf);
}

static int
mitems_equal(const rf_mix_item *a, const rf_mix_item *b)
{
	return a->source == b->source && a->source_epoch == b->source_epoch && a->pos == b->pos &&
	       a->flags == b->flags && items_equal(&a->item, &b->item);
}

static int
mruns_equal(const struct mrun *a, const struct mrun *b)
{
	if (a->n != b->n || a->batches != b->batches)
		return 0;
	for (uint64_t i = 0; i < a->n; i++)
		if (!mitems_equal(&a->items[i], &b->items[i]))
			return 0;
	return 1;
}

static size_t
included(const struct mix_case *c)
{
	size_t k = 0;
	for (size_t s = 0; s < c->nsrc; s++)
		k += c->src[s].weight > 0;
	return k;
}

/* |C_s(n) - p_s n| <= D_s at every position of two epochs, D_s < 1 with up
 * to 4 sources, and the shares match the weights given. */
static void
test_bound(const struct mix_case *c)
{
	struct built b;
	build_sources(c, &b);
	rf_mix_params mp;
	case_mix_params(c, 0, c->world, c->batch, &mp);
	rf_mix *m = make_mix(&mp, &b, c->nsrc);
	double wsum = 0;
	for (size_t s = 0; s < c->nsrc; s++)
		wsum += c->src[s].weight;
	uint64_t E = rf_mix_epoch_samples(m);
	uint64_t lim = 2 * E < 400000 ? 2 * E : 400000;
	double worst[MAXS] = {0};
	uint64_t prev[MAXS] = {0};
	for (uint64_t n = 0; n <= lim; n++) {
		uint64_t tot = 0;
		for (size_t s = 0; s < c->nsrc; s++) {
			uint64_t C = rf_mix_drawn(m, s, n);
			double dev = fabs((double)C - rf_mix_share(m, s) * (double)n);
			double devw = fabs((double)C - c->src[s].weight / wsum * (double)n);
			if (dev > worst[s])
				worst[s] = dev;
			CHECK_CONT_MSG(dev <= rf_mix_bound(m, s) + 1e-9, "%s: source %zu at %llu: %llu, %.6f off "
			      "(bound %.6f)", c->name, s, (unsigned long long)n, (unsigned long long)C,
			      dev, rf_mix_bound(m, s));
			CHECK_CONT_MSG(devw <= rf_mix_bound(m, s) + 1e-6, "%s: source %zu at %llu: %.6f off the "
			      "weights given", c->name, s, (unsigned long long)n, devw);
			CHECK_CONT_MSG(C == prev[s] || C == prev[s] + 1 || n == 0, "%s: source %zu steps by %lld",
			      c->name, s, (long long)(C - prev[s]));
			prev[s] = C;
			tot += C;
			if (c->src[s].weight == 0)
				CHECK_CONT_MSG(C == 0, "%s: excluded source %zu drawn", c->name, s);
		}
		CHECK_CONT_MSG(tot == n, "%s: %llu drawn of %llu", c->name, (unsigned long long)tot,
		      (unsigned long long)n);
		/* rf_mix_at agrees with the counts. */
		if (n < lim) {
			uint32_t src;
			uint64_t idx;
			rf_mix_at(m, n, &src, &idx);
			CHECK_CONT_MSG(rf_mix_drawn(m, src, n) == idx && rf_mix_drawn(m, src, n + 1) == idx + 1,
			      "%s: rf_mix_at(%llu) = source %u #%llu", c->name, (unsigned long long)n,
			      src, (unsigned long long)idx);
		}
	}
	for (size_t s = 0; s < c->nsrc; s++) {
		printf("%-24s %-5s share %.6f bound %.4f worst %.4f\n", c->name, c->src[s].name,
		       rf_mix_share(m, s), rf_mix_bound(m, s), worst[s]);
		if (included(c) <= 4 && c->src[s].weight > 0)
			CHECK_CONT_MSG(rf_mix_bound(m, s) < 1, "%s: bound %.4f >= 1 with %zu sources", c->name,
			      rf_mix_bound(m, s), included(c));
		CHECK_CONT_MSG(rf_mix_bound(m, s) < 1.5, "%s: bound %.4f", c->name, rf_mix_bound(m, s));
	}
	rf_mix_destroy(&m);
	built_free(c, &b);
}

/* The delivered batches of every rank over two epochs: ranks disjoint and
 * complete in each global batch, every item the sample its source's own
 * order puts at its draw, every source epoch a permutation of the source,
 * and every window of 100 global batches within 2 D_s of the proportion. */
static void
test_stream(const struct mix_case *c)
{
	struct built b;
	build_sources(c, &b);
	rf_mix *m[64];
	rf_mix_params mp;
	for (uint32_t r = 0; r < c->world; r++) {
		case_mix_params(c, r, c->world, c->batch, &mp);
		m[r] = make_mix(&mp, &b, c->nsrc);
	}
	uint64_t G = (uint64_t)c->world * c->batch;
	uint64_t nb = rf_mix_batches(m[0]);
	/* Reference orders: one plan per source, as mix.h defines them. */
	rf_plan *ref[MAXS] = {0};
	for (size_t s = 0; s < c->nsrc; s++) {
		if (c->src[s].weight == 0)
			continue;
		rf_plan_params pp;
		rf_plan_params_init(&pp);
		pp.seed = rf_mix_source_seed(0x5EED0002, s);
		pp.fingerprint = b.src[s].fingerprint;
		pp.mode = c->src[s].mode;
		pp.window = c->src[s].window;
		ref[s] = make_plan(&pp, b.counts[s], c->src[s].nchunks);
	}
	/* Seen counts per (source, source epoch, sample) for the permutation
	 * check: a source epoch wholly drawn from within the stream. */
	uint64_t *seen[MAXS] = {0};
	uint64_t N[MAXS] = {0};
	for (size_t s = 0; s < c->nsrc; s++) {
		N[s] = ref[s] ? rf_plan_samples(ref[s]) : 0;
		seen[s] = calloc(N[s] + 1, sizeof(uint64_t));
	}
	uint64_t *counts = calloc(2 * nb * MAXS + 1, sizeof(uint64_t)); /* per global batch */
	rf_mix_item *buf = malloc(c->batch * sizeof *buf);
	uint8_t *hit = malloc(G);
	/* Per rank and source: the source epoch, keep_from and the running
	 * maximum of read along the rank's items, for the window rule. */
	struct rstate {
		uint64_t epoch, keep, maxread;
		int any;
	} rs[64][MAXS];
	memset(rs, 0, sizeof rs);
	/* Each rank's last real item: what a kept tail's pad repeats. */
	rf_mix_item last[64];
	memset(last, 0, sizeof last);
	uint64_t nbat = 0;
	for (uint64_t e = 2; e < 4; e++) {
		for (uint32_t r = 0; r < c->world; r++)
			CHECK_CONT_MSG(rf_mix_set_epoch(m[r], e) == 0, "set_epoch");
		for (uint64_t k = 0; k < nb; k++, nbat++) {
			uint64_t start = rf_mix_position(m[0], k), end = rf_mix_position(m[0], k + 1);
			uint64_t E = rf_mix_epoch_samples(m[0]);
			CHECK_CONT_MSG(start == e * E + (k < E / G ? k * G : (E / G) * G), "%s: position of "
			      "batch %llu", c->name, (unsigned long long)k);
			memset(hit, 0, G);
			/* A kept tail ends the epoch: no draw is left out. */
			if (k == nb - 1 && c->tail == RF_PLAN_KEEP)
				CHECK_CONT_MSG(end == (e + 1) * E, "%s: epoch %llu ends at %llu, not %llu",
				      c->name, (unsigned long long)e, (unsigned long long)end,
				      (unsigned long long)((e + 1) * E));
			for (uint32_t r = 0; r < c->world; r++) {
				uint32_t n = 0;
				CHECK_CONT_MSG(rf_mix_batch(m[r], k, buf, c->batch, &n) == 0, "batch");
				CHECK_CONT_MSG(n == rf_mix_batch_size(m[r], k) && n > 0, "%s: batch size %u",
				      c->name, n);
				/* A rank's slice is a run of positions: within 2 D_s
				 * of p_s x its size too. */
				uint32_t per[MAXS] = {0}, real = 0;
				for (uint32_t i = 0; i < n; i++) {
					if (buf[i].item.flags & RF_PLAN_ITEM_PAD)
						continue;
					per[buf[i].source < MAXS ? buf[i].source : 0]++;
					real++;
				}
				/* A kept tail gives each rank ceil(rem / world) items,
				 * the ranks past the first rem % world a pad. */
				uint64_t rem = (e + 1) * E - start, w = c->world;
				if (k >= E / G && c->tail == RF_PLAN_KEEP)
					CHECK_CONT_MSG(n == (rem + w - 1) / w &&
						      real == rem / w + (r < rem % w), "%s: rank %u tail "
						      "of %u with %u real, %llu in all", c->name, r, n, real,
						      (unsigned long long)rem);
				for (size_t s = 0; s < c->nsrc; s++)
					CHECK_CONT_MSG(fabs(per[s] - rf_mix_share(m[r], s) * real) <=
						      2 * rf_mix_bound(m[r], s) + 1e-9,
					      "%s: rank %u batch %llu: %u of source %zu", c->name, r,
					      (unsigned long long)k, per[s], s);
				for (uint32_t i = 0; i < n; i++) {
					const rf_mix_item *it = &buf[i];
					if (it->item.flags & RF_PLAN_ITEM_PAD) {
						CHECK_CONT_MSG(i == n - 1 && it->flags == 0 &&
							      it->source == last[r].source &&
							      it->item.sample == last[r].item.sample &&
							      it->pos == last[r].pos, "%s: rank %u: pad at %u "
							      "is not a repeat of the rank's last item", c->name,
							      r, i);
						continue;
					}
					last[r] = *it;
					CHECK_CONT_MSG(it->pos >= start && it->pos < end, "%s: pos %llu outside "
					      "[%llu, %llu)", c->name, (unsigned long long)it->pos,
					      (unsigned long long)start, (unsigned long long)end);
					if (it->pos < start || it->pos >= end)
						continue;
					CHECK_CONT_MSG(!hit[it->pos - start], "%s: position %llu twice", c->name,
					      (unsigned long long)it->pos);
					hit[it->pos - start] = 1;
					uint32_t s = it->source;
					CHECK_CONT_MSG(s < c->nsrc && c->src[s].weight > 0, "%s: source %u", c->name, s);
					if (s >= c->nsrc || !ref[s])
						continue;
					uint64_t j = rf_mix_drawn(m[r], s, it->pos);
					CHECK_CONT_MSG(it->source_epoch == j / N[s], "%s: source epoch", c->name);
					if (rf_plan_params_get(ref[s])->epoch != j / N[s])
						rf_plan_set_epoch(ref[s], j / N[s]);
					/* The reference through the plan's own API. */
					rf_plan_item want;
					memset(&want, 0, sizeof want);
					want.pos = j % N[s];
					CHECK_CONT_MSG(rf_plan_global(ref[s], want.pos, &want.sample) == 0 &&
					      rf_plan_locate(ref[s], want.sample, &want.chunk,
							     &want.offset) == 0, "ref");
					CHECK_CONT_MSG(items_equal(&want, &it->item), "%s: pos %llu: source %u draw "
					      "%llu: sample %llu, its order has %llu", c->name,
					      (unsigned long long)it->pos, s, (unsigned long long)j,
					      (unsigned long long)it->item.sample,
					      (unsigned long long)want.sample);
					CHECK_CONT_MSG(((it->flags & RF_MIX_ITEM_FIRST) != 0) == (j % N[s] == 0),
					      "%s: first flag", c->name);
					seen[s][it->item.sample]++;
					/* The plan's read rule holds per source along a
					 * rank's items (mix.h, reader wiring). */
					if (c->src[s].mode != RF_PLAN_FULL) {
						struct rstate *q = &rs[r][s];
						uint64_t Wp = c->src[s].mode == RF_PLAN_WINDOW
								      ? rf_plan_window_in_force(c->src[s].window, c->src[s].nchunks)
								      : 1;
						if (!q->any || q->epoch != it->source_epoch) {
							CHECK_CONT_MSG(!q->any || it->source_epoch > q->epoch,
							      "%s: source epochs go back", c->name);
							q->any = 1;
							q->epoch = it->source_epoch;
							q->keep = it->item.keep_from;
							q->maxread = it->item.read;
						}
						CHECK_CONT_MSG(it->item.keep_from >= q->keep, "%s: keep_from "
						      "decreases", c->name);
						q->keep = it->item.keep_from;
						if (it->item.read > q->maxread)
							q->maxread = it->item.read;
						CHECK_CONT_MSG(it->item.read >= it->item.keep_from &&
						      q->maxread <= q->keep + Wp - 1, "%s: rank %u source "
						      "%u: read %llu, keep_from %llu, W %llu", c->name, r, s,
						      (unsigned long long)it->item.read,
						      (unsigned long long)it->item.keep_from,
						      (unsigned long long)Wp);
					}
					counts[nbat * MAXS + s]++;
				}
			}
			for (uint64_t p = 0; p < end - start; p++)
				CHECK_CONT_MSG(hit[p], "%s: epoch %llu batch %llu: position %llu not delivered",
				      c->name, (unsigned long long)e, (unsigned long long)k,
				      (unsigned long long)p);
		}
	}
	/* Every window of (up to) 100 batches of one epoch, full batches. */
	uint64_t nfull = rf_mix_epoch_samples(m[0]) / G;
	uint64_t win = nfull < 100 ? nfull : 100;
	for (uint64_t e = 0; e < 2 && win > 0; e++) {
		for (uint64_t k0 = 0; k0 + win <= nfull; k0++) {
			for (size_t s = 0; s < c->nsrc; s++) {
				uint64_t cnt = 0;
				for (uint64_t k = k0; k < k0 + win; k++)
					cnt += counts[(e * nb + k) * MAXS + s];
				double dev = fabs((double)cnt - rf_mix_share(m[0], s) * (double)(win * G));
				CHECK_CONT_MSG(dev <= 2 * rf_mix_bound(m[0], s) + 1e-9, "%s: window at %llu: "
				      "source %zu %llu samples, %.3f off (bound %.3f)", c->name,
				      (unsigned long long)k0, s, (unsigned long long)cnt, dev,
				      2 * rf_mix_bound(m[0], s));
				if (included(c) <= 4)
					CHECK_CONT_MSG(dev < 2, "%s: window %.3f off", c->name, dev);
			}
		}
	}
	/* Source epochs wholly inside the two mixture epochs (drop and keep
	 * tails skip positions, so only full ones): each sample once.  The
	 * counts hold whole epochs when a source's draws span them; check the
	 * totals are multiples plus partials bounded. */
	for (size_t s = 0; s < c->nsrc; s++) {
		if (!ref[s])
			continue;
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint64_t i = 0; i < N[s]; i++) {
			lo = seen[s][i] < lo ? seen[s][i] : lo;
			hi = seen[s][i] > hi ? seen[s][i] : hi;
		}
		/* Draws are runs of consecutive source positions (two, split by
		 * the epoch gap and the dropped tails), so counts differ by at
		 * most the runs' partial epochs: 2 per run. */
		CHECK_CONT_MSG(hi - lo <= 4, "%s: source %zu samples seen %llu..%llu times", c->name, s,
		      (unsigned long long)lo, (unsigned long long)hi);
	}
	for (size_t s = 0; s < c->nsrc; s++) {
		free(seen[s]);
		rf_plan_destroy(&ref[s]);
	}
	free(counts);
	free(buf);
	free(hit);
	for (uint32_t r = 0; r < c->world; r++)
		rf_mix_destroy(&m[r]);
	built_free(c, &b);
}

/* Two mixtures built apart give the same stream; another seed another. */
static void
test_determinism(const struct mix_case *c)
{
	struct built b;
	build_sources(c, &b);
	rf_mix_params mp;
	case_mix_params(c, c->world - 1, c->world, c->batch, &mp);
	rf_mix *a = make_mix(&mp, &b, c->nsrc), *z = make_mix(&mp, &b, c->nsrc);
	struct mrun ra = {0}, rz = {0};
	mrun_append(&ra, a, UINT64_MAX);
	mrun_append(&rz, z, UINT64_MAX);
	CHECK_CONT_MSG(ra.n > 0 && mruns_equal(&ra, &rz), "%s: two builds differ", c->name);
	CHECK_CONT_MSG(rf_mix_order_id(a) == rf_mix_order_id(z), "%s: order ids", c->name);
	/* The order id names the order but not the rank. */
	rf_mix_params mp0 = mp;
	mp0.rank = 0;
	rf_mix *r0 = make_mix(&mp0, &b, c->nsrc);
	CHECK_CONT_MSG(rf_mix_order_id(r0) == rf_mix_order_id(a), "%s: order id depends on the rank",
	      c->name);
	rf_mix_params mps = mp;
	mps.seed++;
	rf_mix *s1 = make_mix(&mps, &b, c->nsrc);
	CHECK_CONT_MSG(rf_mix_order_id(s1) != rf_mix_order_id(a), "%s: seed not in the order id", c->name);
	struct built b2;
	build_sources(c, &b2);
	b2.src[0].fingerprint ^= 1;
	rf_mix *f1 = make_mix(&mp, &b2, c->nsrc);
	CHECK_CONT_MSG(rf_mix_order_id(f1) != rf_mix_order_id(a), "%s: fingerprint not in the order id",
	      c->name);
	if (c->nsrc > 1) {
		b2.src[0].fingerprint ^= 1;
		b2.src[1].weight *= 1.5;
		rf_mix *w1 = make_mix(&mp, &b2, c->nsrc);
		CHECK_CONT_MSG((rf_mix_order_id(w1) != rf_mix_order_id(a)) == (c->src[1].weight > 0),
		      "%s: weight and the order id", c->name);
		rf_mix_destroy(&w1);
	}
	built_free(c, &b2);
	free(ra.items);
	free(rz.items);
	rf_mix_destroy(&a);
	rf_mix_destroy(&z);
	rf_mix_destroy(&r0);
	rf_mix_destroy(&s1);
	rf_mix_destroy(&f1);
	built_free(c, &b);
}

/* Save after k batches, load into a fresh mixture (configured with another
 * seed and epoch, which the blob replaces): the rest of the epoch and the
 * next one equal the uninterrupted stream.  Then the elastic case: a world
 * with the same global batch continues the same global sequence. */
static void
test_resume(const struct mix_case *c)
{
	struct built b;
	build_sources(c, &b);
	rf_mix_params mp;
	uint32_t r = c->world / 2;
	case_mix_params(c, r, c->world, c->batch, &mp);
	rf_mix *m = make_mix(&mp, &b, c->nsrc);
	uint64_t nb = rf_mix_batches(m);
	uint64_t ks[] = {0, 1, 2, nb / 3, nb / 2, nb > 0 ? nb - 1 : 0, nb};
	uint8_t blob[RF_MIX_STATE_SIZE(MAXS)];
	for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
		uint64_t k = ks[t] <= nb ? ks[t] : nb;
		rf_mix *full = make_mix(&mp, &b, c->nsrc);
		struct mrun whole = {0}, head = {0}, tail = {0};
		mrun_append(&whole, full, UINT64_MAX);
		rf_mix_set_epoch(full, mp.epoch + 1);
		mrun_append(&whole, full, UINT64_MAX);
		rf_mix *a = make_mix(&mp, &b, c->nsrc);
		mrun_append(&head, a, k);
		size_t len = 0;
		CHECK_CONT_MSG(rf_mix_state_save(a, blob, sizeof blob, &len) == 0 &&
		      len == RF_MIX_STATE_SIZE(c->nsrc), "%s: save", c->name);
		rf_mix_params other = mp;
		other.seed = 77;
		other.epoch = 9;
		rf_mix *z = make_mix(&other, &b, c->nsrc);
		int rc = rf_mix_state_load(z, blob, len);
		CHECK_CONT_MSG(rc == 0, "%s: load after %llu: %s", c->name, (unsigned long long)k,
		      rf_mix_errmsg(z));
		CHECK_CONT_MSG(rf_mix_tell(z) == k, "%s: cursor %llu, want %llu", c->name,
		      (unsigned long long)rf_mix_tell(z), (unsigned long long)k);
		CHECK_CONT_MSG(rf_mix_order_id(z) == rf_mix_order_id(a), "%s: order id after load", c->name);
		mrun_append(&tail, z, UINT64_MAX);
		rf_mix_set_epoch(z, rf_mix_params_get(z)->epoch + 1);
		mrun_append(&tail, z, UINT64_MAX);
		CHECK_CONT_MSG(head.n + tail.n == whole.n, "%s: resumed at %llu: %llu + %llu items, want %llu",
		      c->name, (unsigned long long)k, (unsigned long long)head.n,
		      (unsigned long long)tail.n, (unsigned long long)whole.n);
		for (uint64_t i = 0; i < whole.n && head.n + tail.n == whole.n; i++) {
			const rf_mix_item *got = i < head.n ? &head.items[i] : &tail.items[i - head.n];
			if (!mitems_equal(got, &whole.items[i])) {
				CHECK_CONT_MSG(0, "%s: resumed at %llu: item %llu differs", c->name,
				      (unsigned long long)k, (unsigned long long)i);
				break;
			}
		}
		/* The source counters agree with the blob's position. */
		for (size_t s = 0; s < c->nsrc; s++) {
			uint64_t drawn, done, in;
			CHECK_CONT_MSG(rf_mix_source_progress(z, s, mp.epoch, k, &drawn, &done, &in) == 0,
			      "progress");
			CHECK_CONT_MSG(drawn == rf_mix_drawn(z, s, rf_mix_position(a, k)), "%s: progress",
			      c->name);
		}
		free(whole.items);
		free(head.items);
		free(tail.items);
		rf_mix_destroy(&full);
		rf_mix_destroy(&a);
		rf_mix_destroy(&z);
	}

	/* Positions saved by rf_mix_state_save_at at pseudo-random batches of
	 * either epoch: the rest equals the uninterrupted stream. */
	rf_mix *full = make_mix(&mp, &b, c->nsrc);
	struct mrun whole = {0};
	mrun_append(&whole, full, UINT64_MAX);
	uint64_t per_epoch = whole.n;
	rf_mix_set_epoch(full, mp.epoch + 1);
	mrun_append(&whole, full, UINT64_MAX);
	uint64_t x = 12345;
	for (int t = 0; t < 8; t++) {
		x = rf_plan_mix64(x);
		uint64_t e = mp.epoch + (uint64_t)(t & 1), k = x % (nb + 1);
		uint64_t skip = (e - mp.epoch) * per_epoch;
		for (uint64_t q = 0; q < k; q++)
			skip += rf_mix_batch_size(full, q);
		size_t len = 0;
		CHECK_CONT_MSG(rf_mix_state_save_at(full, e, k, blob, sizeof blob, &len) == 0, "save_at");
		rf_mix *z = make_mix(&mp, &b, c->nsrc);
		CHECK_CONT_MSG(rf_mix_state_load(z, blob, len) == 0, "%s: load: %s", c->name, rf_mix_errmsg(z));
		struct mrun tail = {0};
		mrun_append(&tail, z, UINT64_MAX);
		if (e == mp.epoch) {
			rf_mix_set_epoch(z, e + 1);
			mrun_append(&tail, z, UINT64_MAX);
		}
		CHECK_CONT_MSG(skip + tail.n == whole.n, "%s: at epoch %llu batch %llu: %llu + %llu items",
		      c->name, (unsigned long long)e, (unsigned long long)k,
		      (unsigned long long)skip, (unsigned long long)tail.n);
		for (uint64_t i = 0; i < tail.n && skip + tail.n == whole.n; i++) {
			if (!mitems_equal(&tail.items[i], &whole.items[skip + i])) {
				CHECK_CONT_MSG(0, "%s: at epoch %llu batch %llu: item %llu differs", c->name,
				      (unsigned long long)e, (unsigned long long)k,
				      (unsigned long long)i);
				break;
			}
		}
		free(tail.items);
		rf_mix_destroy(&z);
	}
	free(whole.items);
	rf_mix_destroy(&full);

	/* Elastic: save with world x batch, resume with world' x batch' of the
	 * same product; every position of the remaining full global batches is
	 * delivered once, with the same item. */
	uint64_t G = (uint64_t)c->world * c->batch;
	uint32_t worlds[] = {1, 2, 4, 8, 16, 32};
	uint64_t k = nb / 2;
	rf_mix *a = make_mix(&mp, &b, c->nsrc);
	CHECK_CONT_MSG(rf_mix_seek(a, k) == 0, "seek");
	size_t len = 0;
	CHECK_CONT_MSG(rf_mix_state_save(a, blob, sizeof blob, &len) == 0, "save");
	uint64_t from = rf_mix_position(a, k);
	uint64_t to = mp.epoch * rf_mix_epoch_samples(a) + (rf_mix_epoch_samples(a) / G) * G;
	rf_mix *orig[64];
	for (uint32_t r2 = 0; r2 < c->world; r2++) {
		rf_mix_params po;
		case_mix_params(c, r2, c->world, c->batch, &po);
		orig[r2] = make_mix(&po, &b, c->nsrc);
	}
	for (size_t t = 0; t < sizeof worlds / sizeof worlds[0]; t++) {
		uint32_t w2 = worlds[t];
		if (G % w2 != 0 || w2 == c->world)
			continue;
		uint8_t *hit = calloc(to - from + 1, 1);
		for (uint32_t r2 = 0; r2 < w2; r2++) {
			rf_mix_params p2;
			case_mix_params(c, r2, w2, (uint32_t)(G / w2), &p2);
			rf_mix *z = make_mix(&p2, &b, c->nsrc);
			CHECK_CONT_MSG(rf_mix_state_load(z, blob, len) == 0, "%s: elastic load into world %u: %s",
			      c->name, w2, rf_mix_errmsg(z));
			struct mrun rest = {0};
			mrun_append(&rest, z, UINT64_MAX);
			for (uint64_t i = 0; i < rest.n; i++) {
				const rf_mix_item *it = &rest.items[i];
				if (it->pos < from || it->pos >= to)
					continue; /* the tail, shared out anew */
				CHECK_CONT_MSG(!hit[it->pos - from], "%s: world %u: position twice", c->name, w2);
				hit[it->pos - from] = 1;
				/* Same item as the saved world's stream: rank
				 * (pos % G) / B of it. */
				uint64_t off = it->pos - mp.epoch * rf_mix_epoch_samples(a);
				uint64_t gk = off / G;
				uint32_t orank = (uint32_t)((off % G) / c->batch);
				rf_mix_item ob[64];
				uint32_t on = 0;
				rf_mix_batch(orig[orank], gk, ob, 64, &on);
				uint32_t oi = (uint32_t)(off % c->batch);
				CHECK_CONT_MSG(oi < on && mitems_equal(&ob[oi], it), "%s: world %u: item at %llu "
				      "differs", c->name, w2, (unsigned long long)it->pos);
			}
			free(rest.items);
			rf_mix_destroy(&z);
		}
		for (uint64_t p = 0; p < to - from; p++)
			CHECK_CONT_MSG(hit[p], "%s: world %u: position %llu lost", c->name, w2,
			      (unsigned long long)(from + p));
		free(hit);
	}
	for (uint32_t r2 = 0; r2 < c->world; r2++)
		rf_mix_destroy(&orig[r2]);
	/* Another global batch is refused, naming it. */
	rf_mix_params pg;
	case_mix_params(c, 0, c->world, c->batch + 1, &pg);
	rf_mix *g = make_mix(&pg, &b, c->nsrc);
	CHECK_CONT_MSG(rf_mix_state_load(g, blob, len) == RF_ESTATE &&
	      strstr(rf_mix_errmsg(g), "world x batch"), "%s: other G: %s", c->name,
	      rf_mix_errmsg(g));
	rf_mix_destroy(&g);
	rf_mix_destroy(&a);
	rf_mix_destroy(&m);
	built_free(c, &b);
}

/* Blobs that must be refused, each with a message naming what differs. */
static void
test_blob_refused(void)
{
	const struct mix_case *c = &cases[0];
	struct built b;
	build_sources(c, &b);
	rf_mix_params mp;
	case_mix_params(c, 0, c->world, c->batch, &mp);
	rf_mix *m = make_mix(&mp, &b, c->nsrc);
	rf_mix_seek(m, 5);
	uint8_t blob[RF_MIX_STATE_SIZE(MAXS)], bad[RF_MIX_STATE_SIZE(MAXS)];
	size_t len;
	CHECK_CONT_MSG(rf_mix_state_save(m, blob, 10, &len) == -ENOSPC && len == RF_MIX_STATE_SIZE(3),
	      "-ENOSPC");
	CHECK_CONT_MSG(rf_mix_state_save(m, blob, sizeof blob, &len) == 0, "save");
	CHECK_CONT_MSG(rf_mix_state_save_at(m, 2, rf_mix_batches(m) + 1, blob, sizeof blob, &len) == -ERANGE,
	      "past the end");
	CHECK_CONT_MSG(rf_mix_state_save(m, blob, sizeof blob, &len) == 0, "save");
	/* Every single flipped byte. */
	for (size_t i = 0; i < len; i++) {
		memcpy(bad, blob, len);
		bad[i] ^= 0x10;
		rf_mix *z = make_mix(&mp, &b, c->nsrc);
		CHECK_CONT_MSG(rf_mix_state_load(z, bad, len) == RF_ESTATE, "byte %zu flipped: accepted", i);
		CHECK_CONT_MSG(rf_mix_tell(z) == 0, "a refused blob moved the cursor");
		rf_mix_destroy(&z);
	}
	CHECK_CONT_MSG(rf_mix_state_load(m, blob, len - 1) == RF_ESTATE, "short");
	/* Other weights: the source is named. */
	struct built b2;
	build_sources(c, &b2);
	b2.src[2].weight = 0.2;
	rf_mix *w = make_mix(&mp, &b2, c->nsrc);
	CHECK_CONT_MSG(rf_mix_state_load(w, blob, len) == RF_ESTATE && strstr(rf_mix_errmsg(w), "'math'") &&
	      strstr(rf_mix_errmsg(w), "weight"), "weights: %s", rf_mix_errmsg(w));
	rf_mix_destroy(&w);
	b2.src[2].weight = 0.1;
	b2.src[1].fingerprint = 99;
	rf_mix *f = make_mix(&mp, &b2, c->nsrc);
	CHECK_CONT_MSG(rf_mix_state_load(f, blob, len) == RF_ESTATE && strstr(rf_mix_errmsg(f), "'code'"),
	      "fingerprint: %s", rf_mix_errmsg(f));
	rf_mix_destroy(&f);
	b2.src[1].fingerprint = b.src[1].fingerprint;
	b2.src[0].mode = RF_PLAN_CHUNKS;
	rf_mix *o = make_mix(&mp, &b2, c->nsrc);
	CHECK_CONT_MSG(rf_mix_state_load(o, blob, len) == RF_ESTATE && strstr(rf_mix_errmsg(o), "'web'") &&
	      strstr(rf_mix_errmsg(o), "shuffle"), "mode: %s", rf_mix_errmsg(o));
	rf_mix_destroy(&o);
	built_free(c, &b2);
	/* Another epoch length. */
	rf_mix_params pe = mp;
	pe.epoch_samples = 1234;
	rf_mix *e = make_mix(&pe, &b, c->nsrc);
	CHECK_CONT_MSG(rf_mix_state_load(e, blob, len) == RF_ESTATE && strstr(rf_mix_errmsg(e), "epochs of"),
	      "E: %s", rf_mix_errmsg(e));
	rf_mix_destroy(&e);
	/* Fewer sources. */
	rf_mix *s2 = make_mix(&mp, &b, 2);
	CHECK_CONT_MSG(rf_mix_state_load(s2, blob, len) == RF_ESTATE, "sources");
	rf_mix_destroy(&s2);
	rf_mix_destroy(&m);
	built_free(c, &b);
}

static void
test_weights(void)
{
	static const uint32_t cnt[] = {4, 4};
	rf_mix_source s[3];
	memset(s, 0, sizeof s);
	const char *names[] = {"web", "code", NULL};
	for (int i = 0; i < 3; i++) {
		s[i].name = names[i];
		s[i].weight = 1;
		s[i].counts = cnt;
		s[i].nchunks = 2;
		s[i].mode = RF_PLAN_CHUNKS;
		s[i].window = 1;
	}
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	struct {
		int idx;
		double w;
		const char *want;
	} bad[] = {
		{1, -0.5, "source 'code' (1): weight -0.5 is negative"},
		{1, NAN, "source 'code' (1): weight is NaN"},
		{2, INFINITY, "source 2: weight is infinite"},
		{0, -INFINITY, "source 'web' (0): weight is infinite"},
		{2, -1e-300, "source 2: weight -1e-300 is negative"},
	};
	for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
		rf_mix_source x[3];
		memcpy(x, s, sizeof x);
		x[bad[t].idx].weight = bad[t].w;
		CHECK_CONT_MSG(rf_mix_weights_check(x, 3, &d) == RF_EUSAGE && strstr(d.msg, bad[t].want),
		      "weight %g: %s", bad[t].w, d.msg);
		rf_mix *m = NULL;
		rf_mix_params mp;
		rf_mix_params_init(&mp);
		CHECK_CONT_MSG(rf_mix_create(&m, &mp, x, 3, &d) == RF_EUSAGE && !m && strstr(d.msg, bad[t].want),
		      "create with weight %g: %s", bad[t].w, d.msg);
	}
	rf_mix_source z[3];
	memcpy(z, s, sizeof z);
	z[0].weight = z[1].weight = z[2].weight = 0;
	CHECK_CONT_MSG(rf_mix_weights_check(z, 3, &d) == RF_EUSAGE && strstr(d.msg, "every weight is 0"),
	      "all zero: %s", d.msg);
	CHECK_CONT_MSG(rf_mix_weights_check(z, 0, &d) == RF_EUSAGE, "no sources");
	/* Zero excludes: a source with no samples is fine then, not when
	 * drawn from. */
	z[0].weight = 1;
	z[1].nchunks = 0;
	z[1].counts = NULL;
	rf_mix_params mp;
	rf_mix_params_init(&mp);
	rf_mix *m = NULL;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, z, 3, &d) == 0, "excluded empty source: %s", d.msg);
	CHECK_CONT_MSG(rf_mix_share(m, 0) == 1 && rf_mix_share(m, 1) == 0, "shares");
	CHECK_CONT_MSG(rf_mix_epoch_samples(m) == 8, "E = the included sources' samples: %llu",
	      (unsigned long long)rf_mix_epoch_samples(m));
	rf_mix_destroy(&m);
	z[1].weight = 2;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, z, 3, &d) == RF_EUSAGE && strstr(d.msg, "'code' (1)") &&
	      strstr(d.msg, "no samples"), "empty source: %s", d.msg);
	/* A source's bad plan setting is named too. */
	memcpy(z, s, sizeof z);
	z[1].mode = RF_PLAN_WINDOW;
	z[1].window = 0;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, z, 3, &d) == RF_EUSAGE && strstr(d.msg, "'code' (1)"),
	      "window 0: %s", d.msg);
	mp.tail = RF_PLAN_PAD;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, s, 3, &d) == RF_EUSAGE, "pad refused");
	rf_mix_params_init(&mp);
	mp.rank = 2;
	mp.world = 2;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, s, 3, &d) == RF_EUSAGE, "rank >= world");
	rf_mix_params_init(&mp);
	mp.epoch = UINT64_C(1) << 61;
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, s, 3, &d) == RF_EUSAGE, "epoch beyond 2^62 positions");
	/* Weights far apart still draw the small one. */
	memcpy(z, s, sizeof z);
	z[0].weight = 1e-13;
	z[1].weight = 1;
	z[2].weight = 0;
	rf_mix_params_init(&mp);
	CHECK_CONT_MSG(rf_mix_create(&m, &mp, z, 3, &d) == 0, "tiny weight");
	CHECK_CONT_MSG(rf_mix_share(m, 0) > 0, "a positive weight is never rounded to 0");
	rf_mix_destroy(&m);
}

static void
test_schemas(void)
{
	rf_schema a, b, c;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	memset(&c, 0, sizeof c);
	uint64_t tok[] = {2049}, img[] = {0, 3}, var1[] = {0};
	rf_schema_add(&a, "tokens", RF_DTYPE_I32, 1, tok, -1);
	CHECK_CONT_MSG(rf_schema_add(&a, "text", RF_DTYPE_BYTES, 1, var1, 0) == 0, "add");
	rf_schema_add(&a, "img", RF_DTYPE_U8, 2, img, 0);
	rf_schema_add(&b, "img", RF_DTYPE_U8, 2, img, 0);
	rf_schema_add(&b, "tokens", RF_DTYPE_I32, 1, tok, -1);
	CHECK_CONT_MSG(rf_schema_add(&b, "text", RF_DTYPE_BYTES, 1, var1, 0) == 0, "add");
	rf_schema_add(&b, "extra", RF_DTYPE_F32, 0, NULL, -1);
	const rf_schema *ss[3] = {&a, &b, &c};
	const char *names[] = {"web", "code", "math"};
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	CHECK_CONT_MSG(rf_mix_schemas_check(ss, names, 2, NULL, 0, &d) == 0, "same fields, other order "
	      "and an extra one: %s", d.msg);
	/* The extra field is only in the second source: loading it fails. */
	const char *want_extra[] = {"tokens", "extra"};
	CHECK_CONT_MSG(rf_mix_schemas_check(ss, names, 2, want_extra, 2, &d) == RF_ESCHEMA &&
	      strstr(d.msg, "source 'web' (0) has no field 'extra'"), "extra: %s", d.msg);
	/* A differing dtype, named with both. */
	uint64_t tok2[] = {2049};
	rf_schema_add(&c, "tokens", RF_DTYPE_I64, 1, tok2, -1);
	CHECK_CONT_MSG(rf_schema_add(&c, "text", RF_DTYPE_BYTES, 1, var1, 0) == 0, "add");
	const char *want_tok[] = {"tokens"};
	CHECK_CONT_MSG(rf_mix_schemas_check(ss, names, 3, want_tok, 1, &d) == RF_ESCHEMA &&
	      strstr(d.msg, "source 'math' (2): field 'tokens' is i64 [2049], source 'web' (0) has "
			    "i32 [2049]"), "dtype: %s", d.msg);
	/* A missing field. */
	rf_schema g;
	memset(&g, 0, sizeof g);
	rf_schema_add(&g, "tokens", RF_DTYPE_I32, 1, tok, -1);
	CHECK_CONT_MSG(rf_schema_add(&g, "text", RF_DTYPE_BYTES, 1, var1, 0) == 0, "add");
	const rf_schema *sg[2] = {&a, &g};
	CHECK_CONT_MSG(rf_mix_schemas_check(sg, NULL, 2, NULL, 0, &d) == RF_ESCHEMA &&
	      strstr(d.msg, "source 1 has no field 'img', which source 0 has"), "missing: %s", d.msg);
	/* Loading only the fields both have is fine. */
	const char *both[] = {"text", "tokens"};
	CHECK_CONT_MSG(rf_mix_schemas_check(sg, NULL, 2, both, 2, &d) == 0, "subset: %s", d.msg);
	/* Another fixed dimension. */
	rf_schema e;
	memset(&e, 0, sizeof e);
	uint64_t img4[] = {0, 4};
	rf_schema_add(&e, "img", RF_DTYPE_U8, 2, img4, 0);
	const rf_schema *se[2] = {&a, &e};
	const char *want_img[] = {"img"};
	CHECK_CONT_MSG(rf_mix_schemas_check(se, names, 2, want_img, 1, &d) == RF_ESCHEMA &&
	      strstr(d.msg, "'code' (1): field 'img' is u8 [*, 4], source 'web' (0) has u8 [*, 3]"),
	      "shape: %s", d.msg);
	/* Variable where the other is fixed. */
	rf_schema f;
	memset(&f, 0, sizeof f);
	uint64_t img5[] = {7, 3};
	rf_schema_add(&f, "img", RF_DTYPE_U8, 2, img5, -1);
	const rf_schema *sf[2] = {&a, &f};
	CHECK_CONT_MSG(rf_mix_schemas_check(sf, names, 2, want_img, 1, &d) == RF_ESCHEMA &&
	      strstr(d.msg, "u8 [7, 3]"), "var vs fixed: %s", d.msg);
}

/* The order is part of the format of a run: a change to it (the tree, the
 * rounding, the keys) breaks every saved position and must be deliberate.
 * A hash of the first batches of the first case on rank 1. */
static void
test_golden(void)
{
	const struct mix_case *c = &cases[0];
	struct built b;
	build_sources(c, &b);
	rf_mix_params mp;
	case_mix_params(c, 1, c->world, c->batch, &mp);
	rf_mix *m = make_mix(&mp, &b, c->nsrc);
	struct mrun r = {0};
	mrun_append(&r, m, 40);
	uint64_t h = 0;
	for (uint64_t i = 0; i < r.n; i++)
		h = rf_plan_mix64(h ^ (r.items[i].source * 0x100000001ull + r.items[i].item.sample +
				       (r.items[i].source_epoch << 40)));
	printf("golden: %u items, hash %016llx, order id %016llx\n", (unsigned)r.n,
	       (unsigned long long)h, (unsigned long long)rf_mix_order_id(m));
	CHECK_CONT_MSG(h == GOLDEN_HASH, "the order changed: hash %016llx", (unsigned long long)h);
	CHECK_CONT_MSG(rf_mix_order_id(m) == GOLDEN_ID, "the order id changed: %016llx",
	      (unsigned long long)rf_mix_order_id(m));
	/* rf_plan_items stays inside the epoch. */
	const rf_plan *p = rf_mix_source_plan(m, 1, 0);
	rf_plan_item it[4];
	CHECK_CONT_MSG(p && rf_plan_items(p, rf_plan_samples(p) - 1, 2, it) == -ERANGE &&
	      rf_plan_items(p, rf_plan_samples(p) - 1, 1, it) == 0, "rf_plan_items range");
	CHECK_CONT_MSG(rf_mix_source_plan(m, 9, 0) == NULL, "source out of range");
	free(r.items);
	rf_mix_destroy(&m);
	built_free(c, &b);
}

int
main(void)
{
	for (size_t i = 0; i < NMIX; i++) {
		test_bound(&cases[i]);
		test_stream(&cases[i]);
		test_determinism(&cases[i]);
		test_resume(&cases[i]);
	}
	test_golden();
	test_blob_refused();
	test_weights();
	test_schemas();
	return test_result("test_mix");
}
