/* SPDX-License-Identifier: MIT */
/*
 * The epoch order: chunk order, window segments, rank slices and the read
 * sequence.  plan.h describes the order; this file holds the why of the
 * tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_impl.h"

/* Tags that keep the keys of the different uses apart. */
enum {
	TAG_CHUNKS = 1,
	TAG_FULL = 2,
	TAG_SEGMENT = 3,
	TAG_GROUP = 4,  /* unused since state version 2 (the earlier window order) */
	TAG_PLACE = 5,
};

static uint64_t
plan_key(uint64_t seed, uint64_t epoch, uint64_t tag, uint64_t idx)
{
	uint64_t h = rf_plan_mix64(seed ^ 0x243F6A8885A308D3ull);
	h = rf_plan_mix64(h ^ (epoch + 0x9E3779B97F4A7C15ull));
	h = rf_plan_mix64(h ^ (tag * 0xD1B54A32D192ED03ull));
	return rf_plan_mix64(h ^ (idx + 0x9E3779B97F4A7C15ull));
}

/* The modes are the public shuffle modes, value for value, so they share
 * the library's one table of names (src/names.c). */
_Static_assert(RF_PLAN_NONE == (int)RF_SHUFFLE_NONE && RF_PLAN_CHUNKS == (int)RF_SHUFFLE_CHUNKS &&
		       RF_PLAN_WINDOW == (int)RF_SHUFFLE_WINDOW && RF_PLAN_FULL == (int)RF_SHUFFLE_FULL,
	       "plan modes and rf_shuffle differ");

static const char *const tail_names[] = {"drop", "pad", "keep"};

const char *
rf_plan_mode_name(enum rf_plan_mode mode)
{
	return rf_shuffle_name((enum rf_shuffle)mode);
}

int
rf_plan_mode_parse(const char *name, enum rf_plan_mode *out)
{
	enum rf_shuffle s;
	if (rf_shuffle_parse(name, &s) < 0)
		return RF_EUSAGE;
	*out = (enum rf_plan_mode)s;
	return 0;
}

const char *
rf_plan_tail_name(enum rf_plan_tail tail)
{
	return (unsigned)tail < 3 ? tail_names[tail] : NULL;
}

int
rf_plan_tail_parse(const char *name, enum rf_plan_tail *out)
{
	for (unsigned i = 0; i < 3; i++) {
		if (strcmp(name, tail_names[i]) == 0) {
			*out = (enum rf_plan_tail)i;
			return 0;
		}
	}
	return RF_EUSAGE;
}

uint32_t
rf_plan_default_window(uint64_t avg_chunk_raw_bytes, uint64_t max_chunk_slot_bytes)
{
	uint64_t w = avg_chunk_raw_bytes ? RF_PLAN_WINDOW_BYTES / avg_chunk_raw_bytes
					 : RF_PLAN_WINDOW_MAX;
	if (w > RF_PLAN_WINDOW_MAX)
		w = RF_PLAN_WINDOW_MAX;
	/* What the default budget holds in slots of the largest chunk, less
	 * the two read slots beside the window and the staging ones: a
	 * property of the dataset (never of a rank's budget). */
	if (max_chunk_slot_bytes) {
		uint64_t slots = RF_PINNED_DEFAULT / max_chunk_slot_bytes;
		uint64_t fit = slots > 2 + RF_PLAN_WINDOW_STAGE_SLOTS
				       ? slots - 2 - RF_PLAN_WINDOW_STAGE_SLOTS : 0;
		if (w > fit)
			w = fit;
	}
	if (w < RF_PLAN_WINDOW_MIN)
		w = RF_PLAN_WINDOW_MIN;
	return (uint32_t)w;
}

uint32_t
rf_plan_window_in_force(uint32_t window, uint64_t nchunks)
{
	return nchunks && window > nchunks ? (uint32_t)nchunks : window;
}

uint64_t
rf_plan_order_id(const rf_plan_params *pp, uint64_t nchunks)
{
	/* What does not change the order is left out: the seed in file
	 * order, the window outside window mode; W beyond the chunk count
	 * is the window of every chunk. */
	uint64_t seed = pp->mode == RF_PLAN_NONE ? 0 : pp->seed;
	uint64_t window = pp->mode == RF_PLAN_WINDOW ? rf_plan_window_in_force(pp->window, nchunks) : 0;
	uint64_t v[] = {pp->fingerprint, (uint64_t)pp->mode, seed, window, pp->batch, pp->world,
			(uint64_t)pp->tail};
	uint64_t h = 0x6F72646572206964ull; /* "order id" */
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		h = rf_plan_mix64(h ^ rf_plan_mix64(v[i] + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull));
	return h;
}

void
rf_plan_params_init(rf_plan_params *p)
{
	memset(p, 0, sizeof *p);
	p->world = 1;
	p->batch = 1;
	p->window = 16;
	p->mode = RF_PLAN_WINDOW;
	p->tail = RF_PLAN_DROP;
}

uint64_t
rf_plan_epoch_batches(uint64_t n, uint32_t world, uint32_t batch, enum rf_plan_tail tail)
{
	uint64_t G = (uint64_t)world * batch;
	uint64_t rem = n % G;
	uint64_t nbatches = n / G;
	if (tail == RF_PLAN_PAD && rem > 0)
		nbatches++;
	else if (tail == RF_PLAN_KEEP && rem > 0)
		nbatches++;
	return nbatches;
}

static void
geom_compute(struct rf_plan_geom *g, uint64_t n, const rf_plan_params *pp)
{
	g->G = (uint64_t)pp->world * pp->batch;
	g->nfull = n / g->G;
	g->base = g->nfull * g->G;
	g->nbatches = rf_plan_epoch_batches(n, pp->world, pp->batch, pp->tail);
	g->tail_s = 0;
	if (pp->tail == RF_PLAN_KEEP && g->nbatches > g->nfull)
		g->tail_s = (n - g->base + pp->world - 1) / pp->world;
}

/* RF_PLAN_KEEP: rank r's real samples in the tail batch, the positions
 * [*lo, *lo + return): rem / world of them, one more for the first
 * rem % world ranks; the rest of its tail_s are pads. */
static uint64_t
keep_slice(const struct rf_plan_geom *g, uint64_t n, uint32_t world, uint32_t rank, uint64_t *lo)
{
	uint64_t rem = n - g->base, q = rem / world, m = rem % world;
	*lo = g->base + rank * q + (rank < m ? rank : m);
	return q + (rank < m);
}

/* Index i of the sorted array a[0..len) with a[i] <= x < a[i+1]: the last
 * entry not above x.  Requires a[0] <= x < a[len - 1]. */
static uint64_t
find_le(const uint64_t *a, uint64_t len, uint64_t x)
{
	uint64_t lo = 0, hi = len - 1; /* a[lo] <= x < a[hi] */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (a[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Whether rank pp->rank receives a real sample (one that is not a pad) at a
 * global position in [a, b).  [a, b) is shorter than G where it overlaps the
 * full batches, or else certainly hits a slice. */
static int
rank_touches(const rf_plan *plan, const rf_plan_params *pp, const struct rf_plan_geom *g,
	     uint64_t a, uint64_t b)
{
	uint64_t B = pp->batch, off = (uint64_t)pp->rank * B;
	uint64_t full_end = g->base;
	if (a < full_end) {
		uint64_t e = b < full_end ? b : full_end;
		if (e - a >= g->G)
			return 1;
		for (uint64_t k = a / g->G; k <= a / g->G + 1 && k < g->nfull; k++) {
			uint64_t lo = k * g->G + off, hi = lo + B;
			if (lo < e && a < hi)
				return 1;
		}
	}
	if (g->nbatches > g->nfull) {
		uint64_t lo, hi;
		if (pp->tail == RF_PLAN_PAD) {
			lo = g->base + off;
			hi = lo + B < plan->n ? lo + B : plan->n;
		} else {
			hi = keep_slice(g, plan->n, pp->world, pp->rank, &lo);
			hi += lo;
		}
		/* A rank with no real sample at all pads with P(N - 1). */
		if (g->nfull == 0 && lo >= hi && a <= plan->n - 1 && plan->n - 1 < b)
			return 1;
		if (lo < hi && lo < b && a < hi)
			return 1;
	}
	return 0;
}

void
rf_plan_epoch_free(struct rf_plan_epoch *ep)
{
	free(ep->perm);
	free(ep->pstart);
	free(ep->readidx);
	free(ep->reads);
	free(ep->segstart);
	free(ep->firstread);
	memset(ep, 0, sizeof *ep);
}

/* An unbiased draw in [0, bound) from a splitmix64 stream: values below
 * 2^64 mod bound are rejected so that every residue is equally likely. */
static uint64_t
rng_below(uint64_t *state, uint64_t bound)
{
	uint64_t threshold = (0 - bound) % bound;
	for (;;) {
		*state += 0x9E3779B97F4A7C15ull;
		uint64_t x = rf_plan_mix64(*state);
		if (x >= threshold)
			return x % bound;
	}
}

int
rf_plan_epoch_build(const rf_plan *plan, const rf_plan_params *pp, struct rf_plan_epoch *ep)
{
	uint64_t C = plan->nchunks;
	memset(ep, 0, sizeof *ep);
	geom_compute(&ep->geom, plan->n, pp);
	if (pp->mode == RF_PLAN_FULL) {
		rf_perm_init(&ep->full, plan->n, plan_key(pp->seed, pp->epoch, TAG_FULL, 0));
		return 0;
	}
	/* +1 keeps the allocations non-empty when C = 0. */
	ep->perm = malloc((C + 1) * sizeof *ep->perm);
	ep->pstart = malloc((C + 1) * sizeof *ep->pstart);
	ep->readidx = malloc((C + 1) * sizeof *ep->readidx);
	ep->reads = malloc((C + 1) * sizeof *ep->reads);
	if (!ep->perm || !ep->pstart || !ep->readidx || !ep->reads)
		goto nomem;
	for (uint64_t c = 0; c < C; c++)
		ep->perm[c] = (uint32_t)c;
	if (pp->mode != RF_PLAN_NONE) {
		uint64_t st = plan_key(pp->seed, pp->epoch, TAG_CHUNKS, 0);
		for (uint64_t i = C; i > 1; i--) {
			uint64_t j = rng_below(&st, i);
			uint32_t t = ep->perm[i - 1];
			ep->perm[i - 1] = ep->perm[j];
			ep->perm[j] = t;
		}
	}
	ep->pstart[0] = 0;
	for (uint64_t j = 0; j < C; j++) {
		uint32_t c = ep->perm[j];
		ep->pstart[j + 1] = ep->pstart[j] + (plan->start[c + 1] - plan->start[c]);
	}
	/* The read sequence.  Window mode reads every non-empty chunk: the
	 * window's samples are spread over every global batch of its segments,
	 * hence over every rank.  The other modes read only the chunks this
	 * rank takes a sample from. */
	for (uint64_t j = 0; j < C; j++) {
		uint64_t a = ep->pstart[j], b = ep->pstart[j + 1];
		int need = a < b && (pp->mode == RF_PLAN_WINDOW || rank_touches(plan, pp, &ep->geom, a, b));
		if (need) {
			ep->readidx[j] = (uint32_t)ep->nreads;
			ep->reads[ep->nreads++] = ep->perm[j];
		} else {
			ep->readidx[j] = UINT32_MAX;
		}
	}
	if (pp->mode != RF_PLAN_WINDOW)
		return 0;

	/* Window: segment k draws from the places k..k+Wp-1 (plan.h).  Place
	 * j's samples, in its keyed order, are cut into Wp parts, the first
	 * S % Wp of them one sample longer; part i belongs to virtual segment
	 * v = j - Wp + 1 + i, clamped into the real ones [0, C - Wp].  The
	 * segment lengths come from the virtual ones (index t = v + Wp - 1),
	 * each the S / Wp of every place it spans plus one for each place
	 * whose part there is a longer one: O(C + Wp), with a running count
	 * of those places (+1 at t = j, -1 at t = j + S % Wp). */
	uint64_t Wp = C == 0 ? 1 : (pp->window < C ? pp->window : C);
	uint64_t nseg = C == 0 ? 1 : C - Wp + 1;
	ep->Wp = (uint32_t)Wp;
	ep->nseg = nseg;
	ep->segstart = calloc(nseg + 1, sizeof *ep->segstart);
	ep->firstread = malloc((C + 1) * sizeof *ep->firstread);
	uint64_t *qpre = malloc((C + 1) * sizeof *qpre);
	int32_t *longer = calloc(C + Wp + 1, sizeof *longer);
	if (!ep->segstart || !ep->firstread || !qpre || !longer) {
		free(qpre);
		free(longer);
		goto nomem;
	}
	qpre[0] = 0;
	uint32_t nonempty = 0;
	for (uint64_t j = 0; j < C; j++) {
		uint64_t S = ep->pstart[j + 1] - ep->pstart[j];
		qpre[j + 1] = qpre[j] + S / Wp;
		if (S % Wp) {
			longer[j]++;
			longer[j + S % Wp]--;
		}
		ep->firstread[j] = nonempty;
		nonempty += S > 0;
	}
	ep->firstread[C] = nonempty;
	int64_t nlonger = 0;
	for (uint64_t t = 0; C > 0 && t + 1 < C + Wp; t++) {
		nlonger += longer[t];
		uint64_t lo = t >= Wp - 1 ? t - (Wp - 1) : 0, hi = t < C - 1 ? t : C - 1;
		uint64_t len = qpre[hi + 1] - qpre[lo] + (uint64_t)nlonger;
		uint64_t k = t >= Wp - 1 ? t - (Wp - 1) : 0;
		if (k > nseg - 1)
			k = nseg - 1;
		ep->segstart[k + 1] += len;
	}
	for (uint64_t k = 0; k < nseg; k++)
		ep->segstart[k + 1] += ep->segstart[k]; /* ends at N */
	free(qpre);
	free(longer);
	return 0;
nomem:
	rf_plan_epoch_free(ep);
	return -ENOMEM;
}

int
rf_plan_create(rf_plan **out, const rf_plan_params *pp, const uint32_t *counts, uint64_t nchunks,
	       rf_diag *d)
{
	*out = NULL;
	rf_plan *plan = calloc(1, sizeof *plan);
	if (!plan)
		return -ENOMEM;
	rf_diag_init(&plan->own_diag, NULL, NULL);
	plan->diag = d ? d : &plan->own_diag;
	rf_diag *dg = plan->diag;
	int rc;
	if (pp->world == 0 || pp->rank >= pp->world) {
		rc = rf_fail(dg, RF_EUSAGE, "plan: rank %u is not in a world of %u", pp->rank, pp->world);
		goto fail;
	}
	if (pp->batch == 0 || pp->window == 0) {
		rc = rf_fail(dg, RF_EUSAGE, "plan: batch size (%u) and window (%u) must be >= 1",
			     pp->batch, pp->window);
		goto fail;
	}
	if (pp->mode == RF_PLAN_WINDOW && rf_plan_window_in_force(pp->window, nchunks) > RF_PLAN_WINDOW_MAX) {
		rc = rf_fail(dg, RF_EUSAGE, "plan: a window of %u chunks (at most %u)", pp->window,
			     RF_PLAN_WINDOW_MAX);
		goto fail;
	}
	if ((unsigned)pp->mode > RF_PLAN_FULL || (unsigned)pp->tail > RF_PLAN_KEEP) {
		rc = rf_fail(dg, RF_EUSAGE, "plan: unknown shuffle mode %d or tail policy %d",
			     (int)pp->mode, (int)pp->tail);
		goto fail;
	}
	if (nchunks >= UINT32_MAX || (nchunks > 0 && !counts)) {
		rc = rf_fail(dg, RF_EUSAGE, "plan: %llu chunks (at most %u, with counts)",
			     (unsigned long long)nchunks, UINT32_MAX - 1);
		goto fail;
	}
	plan->pp = *pp;
	plan->nchunks = nchunks;
	plan->start = malloc((nchunks + 1) * sizeof *plan->start);
	if (!plan->start) {
		rc = -ENOMEM;
		goto fail;
	}
	plan->start[0] = 0;
	for (uint64_t c = 0; c < nchunks; c++)
		plan->start[c + 1] = plan->start[c] + counts[c]; /* < 2^32 * 2^32: no overflow */
	plan->n = plan->start[nchunks];
	/* Buckets of 2^bshift samples, between C and 2C of them (+1). */
	while (plan->n > 0 && ((plan->n - 1) >> plan->bshift) + 1 > 2 * nchunks)
		plan->bshift++;
	plan->nbuckets = plan->n > 0 ? ((plan->n - 1) >> plan->bshift) + 1 : 0;
	plan->bucket = malloc((plan->nbuckets + 1) * sizeof *plan->bucket);
	if (!plan->bucket) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint64_t b = 0, c = 0; b < plan->nbuckets; b++) {
		while (plan->start[c + 1] <= b << plan->bshift)
			c++;
		plan->bucket[b] = (uint32_t)c;
	}
	if ((rc = rf_plan_epoch_build(plan, pp, &plan->ep)) < 0) {
		rf_fail(dg, rc, "plan: out of memory for the tables of %llu chunks",
			(unsigned long long)nchunks);
		goto fail;
	}
	*out = plan;
	return 0;
fail:
	free(plan->bucket);
	free(plan->start);
	free(plan);
	return rc;
}

void
rf_plan_destroy(rf_plan **pplan)
{
	if (!pplan || !*pplan)
		return;
	rf_plan *plan = *pplan;
	rf_plan_epoch_free(&plan->ep);
	free(plan->bucket);
	free(plan->start);
	free(plan);
	*pplan = NULL;
}

const char *
rf_plan_errmsg(const rf_plan *plan)
{
	return plan->diag->msg;
}

int
rf_plan_set_epoch(rf_plan *plan, uint64_t epoch)
{
	rf_plan_params pp = plan->pp;
	pp.epoch = epoch;
	struct rf_plan_epoch ep;
	int rc = rf_plan_epoch_build(plan, &pp, &ep);
	if (rc < 0)
		return rf_fail(plan->diag, rc, "plan: out of memory for epoch %llu",
			       (unsigned long long)epoch);
	rf_plan_epoch_free(&plan->ep);
	plan->ep = ep;
	plan->pp = pp;
	plan->cursor = 0;
	return 0;
}

const rf_plan_params *
rf_plan_params_get(const rf_plan *plan)
{
	return &plan->pp;
}

uint64_t
rf_plan_samples(const rf_plan *plan)
{
	return plan->n;
}

uint64_t
rf_plan_batches(const rf_plan *plan)
{
	return plan->ep.geom.nbatches;
}

uint32_t
rf_plan_batch_size(const rf_plan *plan, uint64_t k)
{
	const struct rf_plan_geom *g = &plan->ep.geom;
	if (k >= g->nbatches)
		return 0;
	if (k == g->nfull && plan->pp.tail == RF_PLAN_KEEP)
		return (uint32_t)g->tail_s;
	return plan->pp.batch;
}

uint64_t
rf_plan_dropped(const rf_plan *plan)
{
	const struct rf_plan_geom *g = &plan->ep.geom;
	uint64_t rem = plan->n - g->base;
	switch (plan->pp.tail) {
	case RF_PLAN_PAD: return 0;
	case RF_PLAN_KEEP: return 0;
	default: return rem;
	}
}

uint64_t
rf_plan_consumed(const rf_plan *plan, uint64_t k)
{
	const struct rf_plan_geom *g = &plan->ep.geom;
	if (k <= g->nfull)
		return k * g->G;
	return plan->n; /* the tail batch (pad or keep) delivers the rest */
}

/* The chunk holding dataset sample s < N: the bucket table narrows the
 * search to the chunks that overlap one bucket (usually one or two), so a
 * lookup costs about two cache misses instead of log2(chunks). */
static uint64_t
chunk_of(const rf_plan *plan, uint64_t s)
{
	uint64_t b = s >> plan->bshift;
	uint64_t lo = plan->bucket[b];
	uint64_t hi = b + 1 < plan->nbuckets ? plan->bucket[b + 1] : plan->nchunks - 1;
	return lo + find_le(plan->start + lo, hi - lo + 2, s);
}

int
rf_plan_locate(const rf_plan *plan, uint64_t sample, uint64_t *chunk, uint32_t *offset)
{
	if (sample >= plan->n)
		return -ERANGE;
	uint64_t c = chunk_of(plan, sample);
	*chunk = c;
	*offset = (uint32_t)(sample - plan->start[c]);
	return 0;
}

#define WSEG_RHO 128

/* Window mode: what is constant within a segment, computed once per
 * segment rather than per sample: each of its Wp places' share, as a range
 * of that place's keyed order, and the running total of the shares. */
struct wseg {
	uint64_t k;                 /* segment */
	uint64_t begin, end;        /* its global positions */
	rf_perm tau;                /* order within the segment */
	uint64_t keep_from;
	uint32_t nplaces;           /* Wp: places k .. k + Wp - 1 */
	uint64_t cpre[RF_PLAN_WINDOW_MAX + 1]; /* samples of the places before each */
	uint32_t from[RF_PLAN_WINDOW_MAX];     /* first index of its share in the place's order */
	/* The places' keyed orders, as set up (direct-mapped by place): a
	 * set-up costs about as much as the rest of an item. */
	uint32_t rho_of[WSEG_RHO];
	rf_perm rho[WSEG_RHO];
};

/* Samples of the first i parts of a place of S samples cut into Wp. */
static uint64_t
part_start(uint64_t S, uint64_t Wp, uint64_t i)
{
	uint64_t r = S % Wp;
	return i * (S / Wp) + (i < r ? i : r);
}

static void
wseg_init(const rf_plan *plan, uint64_t pos, struct wseg *w)
{
	const struct rf_plan_epoch *ep = &plan->ep;
	const rf_plan_params *pp = &plan->pp;
	uint64_t Wp = ep->Wp, last = ep->nseg - 1;
	uint64_t k = find_le(ep->segstart, ep->nseg + 1, pos);
	w->k = k;
	w->begin = ep->segstart[k];
	w->end = ep->segstart[k + 1];
	rf_perm_init(&w->tau, w->end - w->begin, plan_key(pp->seed, pp->epoch, TAG_SEGMENT, k));
	w->nplaces = (uint32_t)Wp;
	w->cpre[0] = 0;
	for (uint64_t i = 0; i < Wp; i++) {
		/* Place j = k + i holds parts [lo, hi) in this segment: those
		 * of virtual segments <= 0 in the first, >= last in the last. */
		uint64_t j = k + i;
		uint64_t S = ep->pstart[j + 1] - ep->pstart[j];
		uint64_t lo = k == 0 ? 0 : Wp - 1 - i;
		uint64_t hi = k == last ? Wp : Wp - i;
		uint64_t a = part_start(S, Wp, lo);
		w->from[i] = (uint32_t)a;
		w->cpre[i + 1] = w->cpre[i] + part_start(S, Wp, hi) - a;
	}
	w->keep_from = ep->firstread[k];
	for (int c = 0; c < WSEG_RHO; c++)
		w->rho_of[c] = UINT32_MAX;
}

/* Place i's keyed order, set up in the direct-mapped table if it is not. */
static const rf_perm *
wseg_rho(const rf_plan *plan, struct wseg *w, uint64_t i)
{
	const struct rf_plan_epoch *ep = &plan->ep;
	rf_perm *rho = &w->rho[i % WSEG_RHO];
	if (w->rho_of[i % WSEG_RHO] != (uint32_t)i) {
		uint64_t j = w->k + i;
		w->rho_of[i % WSEG_RHO] = (uint32_t)i;
		rf_perm_init(rho, ep->pstart[j + 1] - ep->pstart[j],
			     plan_key(plan->pp.seed, plan->pp.epoch, TAG_PLACE, j));
	}
	return rho;
}

#define WBATCH 256

/*
 * Items for the positions [pos, pos + m) of segment w (m <= WBATCH): the
 * segment's order for all of them at once (rf_perm_fill's lanes), then each
 * one's place, then the places' orders with a lane per item
 * (rf_perm_map_each).  The same values as drawing item by item: the order
 * is the plan's, only the work is grouped.  The items waiting for their
 * places' orders point into the direct-mapped table of keyed orders: before
 * an item's place takes a slot that a waiting item's place holds, the
 * waiting items are computed.
 */
static void
window_items(const rf_plan *plan, struct wseg *w, uint64_t pos, uint32_t m, rf_plan_item *items)
{
	const struct rf_plan_epoch *ep = &plan->ep;
	uint64_t v[WBATCH], in[WBATCH], out[WBATCH];
	const rf_perm *ps[WBATCH];
	uint32_t at[WBATCH], place[WBATCH];
	rf_perm_fill(&w->tau, pos - w->begin, m, v);
	uint32_t held = 0; /* items waiting for their places' orders */
	uint64_t hi[WSEG_RHO / 64] = {0}; /* table slots of waiting items' places */
	for (uint32_t t = 0; t <= m; t++) {
		uint64_t i = 0, u = 0;
		unsigned slot = 0;
		int flush = t == m;
		if (t < m) {
			/* Which place, then which of its samples in the place's
			 * keyed order. */
			i = find_le(w->cpre, (uint64_t)w->nplaces + 1, v[t]);
			u = w->from[i] + (v[t] - w->cpre[i]);
			place[t] = (uint32_t)i;
			slot = (unsigned)(i % WSEG_RHO);
			/* A held item's order still sits in this slot. */
			flush = (hi[slot / 64] >> (slot % 64) & 1u) && w->rho_of[slot] != (uint32_t)i;
		}
		if (flush && held) {
			rf_perm_map_each(ps, in, held, out);
			for (uint32_t h = 0; h < held; h++)
				items[at[h]].offset = (uint32_t)out[h];
			held = 0;
			memset(hi, 0, sizeof hi);
		}
		if (t == m)
			break;
		const rf_perm *rho = wseg_rho(plan, w, i);
		if (rho->n <= 1) {
			items[t].offset = (uint32_t)u; /* rf_perm_at's identity */
			continue;
		}
		ps[held] = rho;
		in[held] = u;
		at[held++] = t;
		hi[slot / 64] |= UINT64_C(1) << (slot % 64);
	}
	for (uint32_t t = 0; t < m; t++) {
		uint64_t j = w->k + place[t];
		uint32_t c = ep->perm[j];
		rf_plan_item *it = &items[t];
		it->pos = pos + t;
		it->flags = 0;
		it->chunk = c;
		it->sample = plan->start[c] + it->offset;
		it->read = ep->readidx[j];
		it->keep_from = w->keep_from;
	}
}

/* Items for the consecutive global positions [first, first + count), all
 * below N.  Consecutive positions share a chunk (none, chunks) or a segment
 * (window), so each mode finds its place once and walks on from there. */
static void
fill_items(const rf_plan *plan, uint64_t first, uint32_t count, rf_plan_item *items)
{
	const struct rf_plan_epoch *ep = &plan->ep;
	if (count == 0)
		return;
	switch (plan->pp.mode) {
	case RF_PLAN_FULL:
		for (uint32_t i = 0; i < count;) {
			uint64_t buf[256];
			uint32_t m = count - i < 256 ? count - i : 256;
			rf_perm_fill(&ep->full, first + i, m, buf);
			for (uint32_t j = 0; j < m; j++)
				items[i + j].sample = buf[j];
			i += m;
		}
		for (uint32_t i = 0; i < count; i++) {
			rf_plan_item *it = &items[i];
			uint64_t c = chunk_of(plan, it->sample);
			it->pos = first + i;
			it->flags = 0;
			it->chunk = c;
			it->offset = (uint32_t)(it->sample - plan->start[c]);
			it->read = RF_PLAN_NO_READ;
			it->keep_from = RF_PLAN_NO_READ;
		}
		return;
	case RF_PLAN_WINDOW: {
		struct wseg w;
		wseg_init(plan, first, &w);
		for (uint32_t i = 0; i < count;) {
			if (first + i >= w.end)
				wseg_init(plan, first + i, &w);
			uint64_t left = w.end - (first + i);
			uint32_t m = count - i < WBATCH ? count - i : WBATCH;
			if (left < m)
				m = (uint32_t)left;
			window_items(plan, &w, first + i, m, &items[i]);
			i += m;
		}
		return;
	}
	default: {
		uint64_t j = find_le(ep->pstart, plan->nchunks + 1, first);
		for (uint32_t i = 0; i < count; i++) {
			uint64_t pos = first + i;
			while (pos >= ep->pstart[j + 1])
				j++;
			rf_plan_item *it = &items[i];
			uint32_t c = ep->perm[j];
			uint64_t off = pos - ep->pstart[j];
			it->pos = pos;
			it->flags = 0;
			it->chunk = c;
			it->offset = (uint32_t)off;
			it->sample = plan->start[c] + off;
			it->read = ep->readidx[j];
			it->keep_from = it->read;
		}
		return;
	}
	}
}

int
rf_plan_global(const rf_plan *plan, uint64_t pos, uint64_t *sample)
{
	if (pos >= plan->n)
		return -ERANGE;
	rf_plan_item it;
	fill_items(plan, pos, 1, &it);
	*sample = it.sample;
	return 0;
}

int
rf_plan_items(const rf_plan *plan, uint64_t first, uint32_t count, rf_plan_item *items)
{
	if (first > plan->n || count > plan->n - first)
		return -ERANGE;
	fill_items(plan, first, count, items);
	return 0;
}

int
rf_plan_batch(const rf_plan *plan, uint64_t k, rf_plan_item *items, uint32_t cap, uint32_t *n)
{
	const struct rf_plan_geom *g = &plan->ep.geom;
	const rf_plan_params *pp = &plan->pp;
	uint32_t bs = rf_plan_batch_size(plan, k);
	*n = bs;
	if (bs > cap)
		return -ENOSPC;
	if (bs == 0)
		return 0;
	uint64_t first;
	uint32_t real;
	if (k < g->nfull) {
		first = k * g->G + (uint64_t)pp->rank * pp->batch;
		real = bs;
	} else if (pp->tail == RF_PLAN_KEEP) {
		real = (uint32_t)keep_slice(g, plan->n, pp->world, pp->rank, &first);
	} else {
		first = g->base + (uint64_t)pp->rank * pp->batch;
		real = first >= plan->n ? 0 : (plan->n - first < bs ? (uint32_t)(plan->n - first) : bs);
	}
	fill_items(plan, first, real, items);
	/* Pads (the tail of RF_PLAN_PAD, and of RF_PLAN_KEEP on the ranks past
	 * the first rem % world): each repeats the rank's own last real
	 * sample: the item before it when the rank has one in this batch, or
	 * its last sample of the previous global batch, or P(N - 1) when it has
	 * none at all. */
	for (uint32_t i = real; i < bs; i++) {
		if (i > 0) {
			items[i] = items[i - 1];
		} else {
			uint64_t q = g->nfull > 0 ? (g->nfull - 1) * g->G + (uint64_t)pp->rank * pp->batch + pp->batch - 1
						  : plan->n - 1;
			fill_items(plan, q, 1, &items[i]);
		}
		items[i].flags = RF_PLAN_ITEM_PAD;
	}
	return 0;
}

int
rf_plan_next_batch(rf_plan *plan, rf_plan_item *items, uint32_t cap, uint32_t *n)
{
	int rc = rf_plan_batch(plan, plan->cursor, items, cap, n);
	if (rc < 0)
		return rf_fail(plan->diag, rc, "plan: a batch of %u samples does not fit in %u items",
			       *n, cap);
	if (*n > 0)
		plan->cursor++;
	return 0;
}

int
rf_plan_seek(rf_plan *plan, uint64_t k)
{
	if (k > plan->ep.geom.nbatches)
		return -ERANGE;
	plan->cursor = k;
	return 0;
}

uint64_t
rf_plan_tell(const rf_plan *plan)
{
	return plan->cursor;
}

uint64_t
rf_plan_reads(const rf_plan *plan)
{
	return plan->ep.nreads;
}

int
rf_plan_read_chunk(const rf_plan *plan, uint64_t j, uint64_t *chunk)
{
	if (j >= plan->ep.nreads)
		return -ERANGE;
	*chunk = plan->ep.reads[j];
	return 0;
}
