/* SPDX-License-Identifier: MIT */
/*
 * The mixture order (mix.h describes it): a stateless apportionment of the
 * stream positions to the sources by a binary tree of rounded splits, each
 * source's draws mapped onto its own plans' epochs, and the state blob.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xxh.h"

#include "plan/mix.h"

__extension__ typedef unsigned __int128 rf_u128;

/* Positions of the stream stay below this: 2 M L of a split fits 128 bits
 * with room, and e E + E cannot overflow. */
#define MIX_POS_MAX (UINT64_C(1) << 62)
#define MIX_DEPTH_MAX 9 /* ceil(log2 RF_MIX_SOURCES_MAX) + 1 */
#define MIX_NAME_MAX 48
#define MIX_LABEL (MIX_NAME_MAX + 48) /* "source 'NAME' (INDEX)" */

struct mix_node {
	uint64_t L, Q;        /* the left child's share and the node's */
	int32_t left, right;  /* child nodes, -1 at a leaf */
	int32_t source;       /* the leaf's source, -1 inside */
};

struct mix_src {
	char label[MIX_LABEL]; /* "source 'web' (0)" for messages */
	uint64_t q;           /* integer weight; 0: excluded */
	uint64_t n;           /* samples */
	uint64_t nchunks;
	uint32_t *counts;     /* [nchunks] (included sources), to re-key plans */
	uint64_t fingerprint;
	enum rf_plan_mode mode;
	uint32_t window;
	rf_plan *plan;        /* its own order, set to source epoch plan_epoch */
	double share, bound;
	uint32_t depth;       /* nodes from the root to the leaf's parent */
	int32_t path[MIX_DEPTH_MAX];   /* those nodes, root first */
	uint8_t goleft[MIX_DEPTH_MAX]; /* and which way the path goes there */
	/* rf_mix_batch: this source's run in the slice being made */
	uint64_t run_first;
	uint32_t run_off, run_len;
};

struct rf_mix {
	rf_mix_params mp;
	rf_diag own_diag;
	rf_diag *diag;
	size_t S;
	struct mix_src *src;
	struct mix_node *node;
	int32_t root;
	uint64_t E;
	/* geometry of an epoch, as the plan's */
	uint64_t G, nfull, base, nbatches, tail_s;
	uint64_t cursor;
	/* scratch for one batch */
	rf_plan_item *tmp;
	uint32_t *ssrc;
	uint64_t *sidx;
};

void
rf_mix_params_init(rf_mix_params *p)
{
	memset(p, 0, sizeof *p);
	p->world = 1;
	p->batch = 1;
	p->tail = RF_PLAN_DROP;
}

uint64_t
rf_mix_source_seed(uint64_t seed, size_t s)
{
	/* A keyed function of the mixture's seed and the source's index, so
	 * that two sources packed from the same files still draw different
	 * orders. */
	uint64_t h = rf_plan_mix64(seed ^ 0x6D69787475726573ull); /* "mixtures" */
	return rf_plan_mix64(h ^ ((uint64_t)s + 1) * 0x9E3779B97F4A7C15ull);
}

static void
label_of(char *buf, size_t cap, const char *name, size_t i)
{
	if (name && name[0])
		snprintf(buf, cap, "source '%.*s' (%zu)", MIX_NAME_MAX, name, i);
	else
		snprintf(buf, cap, "source %zu", i);
}

int
rf_mix_weights_check(const rf_mix_source *src, size_t n, rf_diag *d)
{
	if (n == 0 || n > RF_MIX_SOURCES_MAX)
		return rf_fail(d, RF_EUSAGE, "mixture: %zu sources (1 to %d)", n, RF_MIX_SOURCES_MAX);
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		char lab[MIX_LABEL];
		double w = src[i].weight;
		label_of(lab, sizeof lab, src[i].name, i);
		if (isnan(w))
			return rf_fail(d, RF_EUSAGE, "mixture: %s: weight is NaN", lab);
		if (isinf(w))
			return rf_fail(d, RF_EUSAGE, "mixture: %s: weight is infinite", lab);
		if (w < 0)
			return rf_fail(d, RF_EUSAGE, "mixture: %s: weight %g is negative", lab, w);
		any |= w > 0;
	}
	if (!any)
		return rf_fail(d, RF_EUSAGE, "mixture: every weight is 0: at least one source needs "
			       "a positive weight");
	return 0;
}

/* "i32 [*, 3]": a field's type for messages (* a variable dimension). */
static void
field_desc(const rf_field *f, char *buf, size_t cap)
{
	const char *dt = rf_dtype_name(f->dtype);
	size_t len = (size_t)snprintf(buf, cap, "%s [", dt ? dt : "?");
	for (uint32_t k = 0; k < f->rank && k < RF_MAX_RANK && len < cap; k++) {
		if ((int32_t)k == f->var_dim)
			len += (size_t)snprintf(buf + len, cap - len, "%s*", k ? ", " : "");
		else
			len += (size_t)snprintf(buf + len, cap - len, "%s%llu", k ? ", " : "",
						(unsigned long long)f->shape[k]);
	}
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

static int
fields_match(const rf_field *a, const rf_field *b)
{
	if (a->dtype != b->dtype || a->rank != b->rank || a->var_dim != b->var_dim)
		return 0;
	for (uint32_t k = 0; k < a->rank && k < RF_MAX_RANK; k++)
		if ((int32_t)k != a->var_dim && a->shape[k] != b->shape[k])
			return 0;
	return 1;
}

int
rf_mix_schemas_check(const rf_schema *const *schemas, const char *const *names, size_t n,
		     const char *const *fields, size_t nfields, rf_diag *d)
{
	if (n == 0)
		return rf_fail(d, RF_EUSAGE, "mixture: no sources");
	if (!fields && nfields)
		return rf_fail(d, RF_EUSAGE, "mixture: %zu field names but no list", nfields);
	const rf_schema *ref = schemas[0];
	size_t count = fields ? nfields : ref->nfields;
	char lab0[MIX_LABEL];
	label_of(lab0, sizeof lab0, names ? names[0] : NULL, 0);
	for (size_t f = 0; f < count; f++) {
		const char *fname = fields ? fields[f] : ref->fields[f].name;
		int r = rf_schema_find(ref, fname);
		if (r < 0)
			return rf_fail(d, RF_ESCHEMA, "mixture: %s has no field '%s'", lab0, fname);
		const rf_field *rf = &ref->fields[r];
		for (size_t i = 1; i < n; i++) {
			char lab[MIX_LABEL];
			label_of(lab, sizeof lab, names ? names[i] : NULL, i);
			int k = rf_schema_find(schemas[i], fname);
			if (k < 0)
				return rf_fail(d, RF_ESCHEMA, "mixture: %s has no field '%s', which %s "
					       "has", lab, fname, lab0);
			const rf_field *of = &schemas[i]->fields[k];
			if (!fields_match(rf, of)) {
				char da[96], db[96];
				field_desc(of, da, sizeof da);
				field_desc(rf, db, sizeof db);
				return rf_fail(d, RF_ESCHEMA, "mixture: %s: field '%s' is %s, %s has %s "
					       "(every source needs the same dtype and shape; only a "
					       "variable dimension may differ per sample)", lab, fname,
					       da, lab0, db);
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------- the tree */

/* Of the first m positions of a node, those of its left child. */
static inline uint64_t
split_left(const struct mix_node *nd, uint64_t m)
{
	return (uint64_t)(((rf_u128)2 * m * nd->L + nd->Q) / ((rf_u128)2 * nd->Q));
}

/* A balanced tree over the included sources inc[lo, hi); returns its node. */
static int32_t
tree_build(rf_mix *mix, const uint32_t *inc, uint32_t lo, uint32_t hi, int32_t *next)
{
	int32_t id = (*next)++;
	struct mix_node *nd = &mix->node[id];
	if (hi - lo == 1) {
		nd->left = nd->right = -1;
		nd->source = (int32_t)inc[lo];
		nd->Q = mix->src[inc[lo]].q;
		nd->L = 0;
		return id;
	}
	uint32_t mid = lo + (hi - lo + 1) / 2;
	nd->source = -1;
	nd->left = tree_build(mix, inc, lo, mid, next);
	nd->right = tree_build(mix, inc, mid, hi, next);
	nd->L = mix->node[nd->left].Q;
	nd->Q = nd->L + mix->node[nd->right].Q;
	return id;
}

/* Record every leaf's path from the root. */
static void
tree_paths(rf_mix *mix, int32_t id, int32_t *path, uint8_t *goleft, uint32_t depth)
{
	const struct mix_node *nd = &mix->node[id];
	if (nd->source >= 0) {
		struct mix_src *s = &mix->src[nd->source];
		s->depth = depth;
		memcpy(s->path, path, depth * sizeof *path);
		memcpy(s->goleft, goleft, depth);
		return;
	}
	path[depth] = id;
	goleft[depth] = 1;
	tree_paths(mix, nd->left, path, goleft, depth + 1);
	goleft[depth] = 0;
	tree_paths(mix, nd->right, path, goleft, depth + 1);
}

uint64_t
rf_mix_drawn(const rf_mix *mix, size_t s, uint64_t n)
{
	if (s >= mix->S || mix->src[s].q == 0)
		return 0;
	const struct mix_src *sr = &mix->src[s];
	uint64_t m = n;
	for (uint32_t i = 0; i < sr->depth; i++) {
		uint64_t l = split_left(&mix->node[sr->path[i]], m);
		m = sr->goleft[i] ? l : m - l;
	}
	return m;
}

void
rf_mix_at(const rf_mix *mix, uint64_t n, uint32_t *source, uint64_t *index)
{
	const struct mix_node *nd = &mix->node[mix->root];
	uint64_t m = n;
	while (nd->source < 0) {
		/* Position m of this node is its left child's when the left
		 * count steps there. */
		uint64_t l0 = split_left(nd, m), l1 = split_left(nd, m + 1);
		if (l1 > l0) {
			m = l0;
			nd = &mix->node[nd->left];
		} else {
			m -= l0;
			nd = &mix->node[nd->right];
		}
	}
	*source = (uint32_t)nd->source;
	*index = m;
}

/* ------------------------------------------------------------ creation */

static void
geom_compute(rf_mix *mix)
{
	const rf_mix_params *mp = &mix->mp;
	mix->G = (uint64_t)mp->world * mp->batch;
	mix->nfull = mix->E / mix->G;
	mix->base = mix->nfull * mix->G;
	mix->nbatches = mix->nfull;
	mix->tail_s = 0;
	if (mp->tail == RF_PLAN_KEEP && mix->E > mix->base) {
		mix->tail_s = (mix->E - mix->base + mp->world - 1) / mp->world;
		mix->nbatches++;
	}
}

/* The kept tail: this rank's real draws, from *first (the plan's rule:
 * rem / world a rank, one more for the first rem % world ranks). */
static uint32_t
keep_slice(const rf_mix *mix, uint64_t *first)
{
	uint64_t rem = mix->E - mix->base, w = mix->mp.world, r = mix->mp.rank;
	uint64_t q = rem / w, m = rem % w;
	*first = mix->base + r * q + (r < m ? r : m);
	return (uint32_t)(q + (r < m));
}

static int
epoch_ok(const rf_mix *mix, uint64_t epoch)
{
	return epoch < MIX_POS_MAX / mix->E;
}

int
rf_mix_create(rf_mix **out, const rf_mix_params *mp, const rf_mix_source *src, size_t S,
	      rf_diag *d)
{
	*out = NULL;
	rf_mix *mix = calloc(1, sizeof *mix);
	if (!mix)
		return -ENOMEM;
	rf_diag_init(&mix->own_diag, NULL, NULL);
	mix->diag = d ? d : &mix->own_diag;
	rf_diag *dg = mix->diag;
	int rc;
	if ((rc = rf_mix_weights_check(src, S, dg)) < 0)
		goto fail;
	if (mp->world == 0 || mp->rank >= mp->world || mp->batch == 0) {
		rc = rf_fail(dg, RF_EUSAGE, "mixture: rank %u of world %u, batch %u (rank < world, "
			     "batch >= 1)", mp->rank, mp->world, mp->batch);
		goto fail;
	}
	if (mp->tail != RF_PLAN_DROP && mp->tail != RF_PLAN_KEEP) {
		rc = rf_fail(dg, RF_EUSAGE, "mixture: tail policy %d (drop or keep; a mixture is "
			     "not padded)", (int)mp->tail);
		goto fail;
	}
	mix->mp = *mp;
	mix->S = S;
	mix->src = calloc(S, sizeof *mix->src);
	mix->node = calloc(2 * S, sizeof *mix->node);
	uint32_t *inc = calloc(S, sizeof *inc);
	if (!mix->src || !mix->node || !inc) {
		free(inc);
		rc = -ENOMEM;
		goto fail;
	}
	double wmax = 0;
	for (size_t i = 0; i < S; i++)
		wmax = src[i].weight > wmax ? src[i].weight : wmax;
	uint32_t ninc = 0;
	uint64_t total = 0, qsum = 0;
	for (size_t i = 0; i < S; i++) {
		struct mix_src *s = &mix->src[i];
		label_of(s->label, sizeof s->label, src[i].name, i);
		s->fingerprint = src[i].fingerprint;
		s->mode = src[i].mode;
		s->window = src[i].window;
		s->nchunks = src[i].nchunks;
		if (src[i].weight > 0) {
			/* w / wmax <= 1: q <= 2^40, and sum q < 2^49. */
			double q = nearbyint(ldexp(src[i].weight / wmax, 40));
			s->q = q < 1 ? 1 : (uint64_t)q;
			inc[ninc++] = (uint32_t)i;
			qsum += s->q;
		}
		rf_plan_params pp;
		rf_plan_params_init(&pp);
		pp.seed = rf_mix_source_seed(mp->seed, i);
		pp.fingerprint = src[i].fingerprint;
		pp.mode = src[i].mode;
		pp.window = src[i].window;
		if (s->q == 0)
			continue;
		/* The plan reports into the mixture's diag; the message is then
		 * given the source's name. */
		rc = rf_plan_create(&s->plan, &pp, src[i].counts, src[i].nchunks, dg);
		if (rc < 0) {
			char msg[RF_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", dg->msg);
			rc = rf_fail(dg, rc, "mixture: %s: %s", s->label, msg);
			free(inc);
			goto fail;
		}
		s->counts = malloc((src[i].nchunks + 1) * sizeof *s->counts);
		if (!s->counts) {
			free(inc);
			rc = -ENOMEM;
			goto fail;
		}
		if (src[i].nchunks)
			memcpy(s->counts, src[i].counts, src[i].nchunks * sizeof *s->counts);
		s->n = rf_plan_samples(s->plan);
		if (s->n == 0) {
			rc = rf_fail(dg, RF_EUSAGE, "mixture: %s has weight %g but no samples",
				     s->label, src[i].weight);
			free(inc);
			goto fail;
		}
		total += s->n;
	}
	/* Excluded sources keep their sample count for the blob, from the
	 * counts when given. */
	for (size_t i = 0; i < S; i++) {
		if (mix->src[i].q == 0 && src[i].counts)
			for (uint64_t c = 0; c < src[i].nchunks; c++)
				mix->src[i].n += src[i].counts[c];
	}
	int32_t next = 0;
	mix->root = tree_build(mix, inc, 0, ninc, &next);
	free(inc);
	int32_t path[MIX_DEPTH_MAX];
	uint8_t goleft[MIX_DEPTH_MAX];
	tree_paths(mix, mix->root, path, goleft, 0);
	for (size_t i = 0; i < S; i++) {
		struct mix_src *s = &mix->src[i];
		if (!s->q)
			continue;
		s->share = (double)s->q / (double)qsum;
		/* D_s = 1/2 sum over the leaf and its ancestors below the root
		 * of p_s / p_a (mix.h). */
		s->bound = s->depth ? 0.5 : 0; /* a lone source is the stream */
		for (uint32_t k = 1; k < s->depth; k++)
			s->bound += 0.5 * (double)s->q / (double)mix->node[s->path[k]].Q;
	}
	mix->E = mp->epoch_samples ? mp->epoch_samples : total;
	if (mix->E >= MIX_POS_MAX || !epoch_ok(mix, mp->epoch) ||
	    rf_mul_u64(mp->world, mp->batch, &mix->G) < 0) {
		rc = rf_fail(dg, RF_EUSAGE, "mixture: epoch %llu of %llu samples lies beyond 2^62 "
			     "positions", (unsigned long long)mp->epoch, (unsigned long long)mix->E);
		goto fail;
	}
	geom_compute(mix);
	mix->tmp = malloc((size_t)mp->batch * sizeof *mix->tmp);
	mix->ssrc = malloc((size_t)mp->batch * sizeof *mix->ssrc);
	mix->sidx = malloc((size_t)mp->batch * sizeof *mix->sidx);
	if (!mix->tmp || !mix->ssrc || !mix->sidx) {
		rc = -ENOMEM;
		goto fail;
	}
	*out = mix;
	return 0;
fail:
	rf_mix_destroy(&mix);
	return rc;
}

void
rf_mix_destroy(rf_mix **pmix)
{
	if (!pmix || !*pmix)
		return;
	rf_mix *mix = *pmix;
	for (size_t i = 0; mix->src && i < mix->S; i++) {
		rf_plan_destroy(&mix->src[i].plan);
		free(mix->src[i].counts);
	}
	free(mix->src);
	free(mix->node);
	free(mix->tmp);
	free(mix->ssrc);
	free(mix->sidx);
	free(mix);
	*pmix = NULL;
}

const char *
rf_mix_errmsg(const rf_mix *mix)
{
	return mix->diag->msg;
}

const rf_mix_params *
rf_mix_params_get(const rf_mix *mix)
{
	return &mix->mp;
}

size_t
rf_mix_sources(const rf_mix *mix)
{
	return mix->S;
}

uint64_t
rf_mix_epoch_samples(const rf_mix *mix)
{
	return mix->E;
}

double
rf_mix_share(const rf_mix *mix, size_t s)
{
	return s < mix->S ? mix->src[s].share : 0;
}

double
rf_mix_bound(const rf_mix *mix, size_t s)
{
	return s < mix->S ? mix->src[s].bound : 0;
}

uint64_t
rf_mix_order_id(const rf_mix *mix)
{
	const rf_mix_params *mp = &mix->mp;
	uint64_t h = 0x6D6978206F726472ull; /* "mix ordr" */
	uint64_t i = 0;
#define MIX_HASH(v) (h = rf_plan_mix64(h ^ rf_plan_mix64((uint64_t)(v) + ++i * 0x9E3779B97F4A7C15ull)))
	MIX_HASH(mix->S);
	MIX_HASH(mp->seed);
	MIX_HASH(mix->E);
	MIX_HASH(mp->batch);
	MIX_HASH(mp->world);
	MIX_HASH(mp->tail);
	for (size_t s = 0; s < mix->S; s++) {
		const struct mix_src *sr = &mix->src[s];
		MIX_HASH(sr->q);
		if (!sr->q)
			continue; /* an excluded source changes nothing */
		MIX_HASH(sr->fingerprint);
		MIX_HASH(sr->n);
		MIX_HASH(sr->nchunks);
		MIX_HASH(sr->mode);
		MIX_HASH(sr->mode == RF_PLAN_WINDOW ? rf_plan_window_in_force(sr->window, sr->nchunks) : 0);
	}
#undef MIX_HASH
	return h;
}

uint64_t
rf_mix_batches(const rf_mix *mix)
{
	return mix->nbatches;
}

uint32_t
rf_mix_batch_size(const rf_mix *mix, uint64_t k)
{
	if (k >= mix->nbatches)
		return 0;
	return k < mix->nfull ? mix->mp.batch : (uint32_t)mix->tail_s;
}

/* Stream samples consumed by the first k global batches of an epoch. */
static uint64_t
consumed(const rf_mix *mix, uint64_t k)
{
	if (k <= mix->nfull)
		return k * mix->G;
	return mix->E; /* the kept tail delivers the rest */
}

uint64_t
rf_mix_position(const rf_mix *mix, uint64_t k)
{
	return mix->mp.epoch * mix->E + consumed(mix, k < mix->nbatches ? k : mix->nbatches);
}

int
rf_mix_set_epoch(rf_mix *mix, uint64_t epoch)
{
	if (!epoch_ok(mix, epoch))
		return -ERANGE;
	mix->mp.epoch = epoch;
	mix->cursor = 0;
	return 0;
}

const rf_plan *
rf_mix_source_plan(rf_mix *mix, size_t s, uint64_t e)
{
	if (s >= mix->S || !mix->src[s].plan)
		return NULL;
	rf_plan *p = mix->src[s].plan;
	if (rf_plan_params_get(p)->epoch != e && rf_plan_set_epoch(p, e) < 0)
		return NULL;
	return p;
}

int
rf_mix_batch(rf_mix *mix, uint64_t k, rf_mix_item *items, uint32_t cap, uint32_t *n)
{
	uint32_t bs = rf_mix_batch_size(mix, k);
	*n = bs;
	if (bs > cap)
		return -ENOSPC;
	if (bs == 0)
		return 0;
	const rf_mix_params *mp = &mix->mp;
	uint64_t a = mp->epoch * mix->E, first = k * mix->G + (uint64_t)mp->rank * mp->batch;
	uint32_t real = bs;
	if (k >= mix->nfull)
		real = keep_slice(mix, &first);
	uint32_t pad_from = real;
	if (real == 0) {
		/* A rank with no draw in the kept tail repeats its last one:
		 * of the previous global batch, or the epoch's last draw. */
		first = mix->nfull > 0 ? (mix->nfull - 1) * mix->G + (uint64_t)mp->rank * mp->batch +
						 mp->batch - 1
				       : mix->E - 1;
		real = 1;
		pad_from = 0;
	}
	a += first;
	/* Which source each position draws from, then each source's run of
	 * its own order (consecutive draws) in one piece per source epoch. */
	for (size_t s = 0; s < mix->S; s++)
		mix->src[s].run_len = 0;
	for (uint32_t i = 0; i < real; i++) {
		rf_mix_at(mix, a + i, &mix->ssrc[i], &mix->sidx[i]);
		struct mix_src *sr = &mix->src[mix->ssrc[i]];
		if (sr->run_len++ == 0)
			sr->run_first = mix->sidx[i];
	}
	uint32_t off = 0;
	for (size_t s = 0; s < mix->S; s++) {
		struct mix_src *sr = &mix->src[s];
		sr->run_off = off;
		for (uint32_t done = 0; done < sr->run_len;) {
			uint64_t j = sr->run_first + done;
			uint64_t e = j / sr->n, p = j % sr->n;
			uint32_t len = sr->run_len - done;
			if (len > sr->n - p)
				len = (uint32_t)(sr->n - p);
			const rf_plan *plan = rf_mix_source_plan(mix, s, e);
			if (!plan)
				return rf_fail(mix->diag, -ENOMEM, "mixture: %s: out of memory for "
					       "epoch %llu's tables", sr->label, (unsigned long long)e);
			rf_plan_items(plan, p, len, mix->tmp + off + done);
			done += len;
		}
		off += sr->run_len;
	}
	for (uint32_t i = 0; i < real; i++) {
		const struct mix_src *sr = &mix->src[mix->ssrc[i]];
		rf_mix_item *it = &items[i];
		uint64_t j = mix->sidx[i];
		it->source = mix->ssrc[i];
		it->source_epoch = j / sr->n;
		it->flags = j % sr->n == 0 ? RF_MIX_ITEM_FIRST : 0;
		it->pos = a + i;
		it->item = mix->tmp[sr->run_off + (j - sr->run_first)];
	}
	/* Pads: the kept tail's, each a repeat of the draw before it. */
	for (uint32_t i = pad_from; i < bs; i++) {
		if (i > 0)
			items[i] = items[i - 1];
		items[i].flags = 0;
		items[i].item.flags |= RF_PLAN_ITEM_PAD;
	}
	return 0;
}

int
rf_mix_next_batch(rf_mix *mix, rf_mix_item *items, uint32_t cap, uint32_t *n)
{
	int rc = rf_mix_batch(mix, mix->cursor, items, cap, n);
	if (rc == -ENOSPC)
		return rf_fail(mix->diag, rc, "mixture: a batch of %u samples does not fit in %u "
			       "items", *n, cap);
	if (rc < 0)
		return rc;
	if (*n > 0)
		mix->cursor++;
	return 0;
}

int
rf_mix_seek(rf_mix *mix, uint64_t k)
{
	if (k > mix->nbatches)
		return -ERANGE;
	mix->cursor = k;
	return 0;
}

uint64_t
rf_mix_tell(const rf_mix *mix)
{
	return mix->cursor;
}

int
rf_mix_source_progress(const rf_mix *mix, size_t s, uint64_t epoch, uint64_t batches,
		       uint64_t *drawn, uint64_t *epochs_done, uint64_t *in_epoch)
{
	if (s >= mix->S || batches > mix->nbatches || !epoch_ok(mix, epoch))
		return -ERANGE;
	const struct mix_src *sr = &mix->src[s];
	uint64_t j = rf_mix_drawn(mix, s, epoch * mix->E + consumed(mix, batches));
	*drawn = j;
	*epochs_done = sr->n ? j / sr->n : 0;
	*in_epoch = sr->n ? j % sr->n : 0;
	return 0;
}

/* ------------------------------------------------------------ state blob */

static const char mix_magic[8] = {'R', 'F', 'M', 'I', 'X', 'S', 'T', '\0'};

enum {
	MOFF_MAGIC = 0,
	MOFF_VERSION = 8,
	MOFF_SIZE = 12,
	MOFF_ORDER = 16,
	MOFF_SEED = 24,
	MOFF_EPOCH = 32,
	MOFF_POSITION = 40,
	MOFF_E = 48,
	MOFF_BATCH = 56,
	MOFF_WORLD = 60,
	MOFF_TAIL = 64,
	MOFF_NSRC = 68,
	MOFF_ZERO = 72,
	MOFF_SOURCES = 80,
	/* per source */
	SOFF_FINGERPRINT = 0,
	SOFF_SAMPLES = 8,
	SOFF_Q = 16,
	SOFF_EPOCH = 24,
	SOFF_POS = 32,
	SOFF_MODE = 40,
	SOFF_WINDOW = 44,
	SRC_BYTES = 48,
};

int
rf_mix_state_save(const rf_mix *mix, void *buf, size_t cap, size_t *len)
{
	return rf_mix_state_save_at(mix, mix->mp.epoch, mix->cursor, buf, cap, len);
}

int
rf_mix_state_save_at(const rf_mix *mix, uint64_t epoch, uint64_t batches, void *buf, size_t cap,
		     size_t *len)
{
	size_t size = RF_MIX_STATE_SIZE(mix->S);
	*len = size;
	if (cap < size)
		return -ENOSPC;
	if (batches > mix->nbatches || !epoch_ok(mix, epoch))
		return -ERANGE;
	uint8_t *b = buf;
	memset(b, 0, size);
	uint64_t position = epoch * mix->E + consumed(mix, batches);
	memcpy(b + MOFF_MAGIC, mix_magic, sizeof mix_magic);
	rf_put_le32(b + MOFF_VERSION, RF_MIX_STATE_VERSION);
	rf_put_le32(b + MOFF_SIZE, (uint32_t)size);
	rf_put_le64(b + MOFF_ORDER, rf_mix_order_id(mix));
	rf_put_le64(b + MOFF_SEED, mix->mp.seed);
	rf_put_le64(b + MOFF_EPOCH, epoch);
	rf_put_le64(b + MOFF_POSITION, position);
	rf_put_le64(b + MOFF_E, mix->E);
	rf_put_le32(b + MOFF_BATCH, mix->mp.batch);
	rf_put_le32(b + MOFF_WORLD, mix->mp.world);
	rf_put_le32(b + MOFF_TAIL, (uint32_t)mix->mp.tail);
	rf_put_le32(b + MOFF_NSRC, (uint32_t)mix->S);
	for (size_t s = 0; s < mix->S; s++) {
		const struct mix_src *sr = &mix->src[s];
		uint8_t *p = b + MOFF_SOURCES + s * SRC_BYTES;
		uint64_t j = rf_mix_drawn(mix, s, position);
		rf_put_le64(p + SOFF_FINGERPRINT, sr->fingerprint);
		rf_put_le64(p + SOFF_SAMPLES, sr->n);
		rf_put_le64(p + SOFF_Q, sr->q);
		rf_put_le64(p + SOFF_EPOCH, sr->q ? j / sr->n : 0);
		rf_put_le64(p + SOFF_POS, sr->q ? j % sr->n : 0);
		rf_put_le32(p + SOFF_MODE, (uint32_t)sr->mode);
		rf_put_le32(p + SOFF_WINDOW, sr->window);
	}
	rf_put_le64(b + size - 8, XXH3_64bits(b, size - 8));
	return 0;
}

int
rf_mix_state_load(rf_mix *mix, const void *buf, size_t len)
{
	rf_diag *d = mix->diag;
	const uint8_t *b = buf;
	if (!b || len < MOFF_SOURCES + 8)
		return rf_fail(d, RF_ESTATE, "mixture state: %zu bytes, too short for a mixture "
			       "state blob", len);
	if (memcmp(b + MOFF_MAGIC, mix_magic, sizeof mix_magic) != 0)
		return rf_fail(d, RF_ESTATE, "mixture state: bad magic (not a ringfeed mixture "
			       "state blob)");
	uint32_t version = rf_le32(b + MOFF_VERSION);
	if (version != RF_MIX_STATE_VERSION)
		return rf_fail(d, RF_ESTATE, "mixture state: version %u, this library reads %u",
			       version, RF_MIX_STATE_VERSION);
	uint32_t nsrc = rf_le32(b + MOFF_NSRC), size = rf_le32(b + MOFF_SIZE);
	if (nsrc > RF_MIX_SOURCES_MAX || size != RF_MIX_STATE_SIZE(nsrc) || len != size)
		return rf_fail(d, RF_ESTATE, "mixture state: %zu bytes given, blob says %u for %u "
			       "sources", len, size, nsrc);
	uint64_t sum = XXH3_64bits(b, size - 8), stored = rf_le64(b + size - 8);
	if (sum != stored)
		return rf_fail(d, RF_ESTATE, "mixture state: checksum mismatch (stored %016llx, "
			       "computed %016llx): the blob is corrupt", (unsigned long long)stored,
			       (unsigned long long)sum);
	if (nsrc != mix->S)
		return rf_fail(d, RF_ESTATE, "mixture state: saved for %u sources, this mixture "
			       "has %zu", nsrc, mix->S);
	for (size_t s = 0; s < mix->S; s++) {
		const struct mix_src *sr = &mix->src[s];
		const uint8_t *p = b + MOFF_SOURCES + s * SRC_BYTES;
		uint64_t fp = rf_le64(p + SOFF_FINGERPRINT), n = rf_le64(p + SOFF_SAMPLES);
		uint64_t q = rf_le64(p + SOFF_Q);
		uint32_t mode = rf_le32(p + SOFF_MODE), window = rf_le32(p + SOFF_WINDOW);
		if (q != sr->q)
			return rf_fail(d, RF_ESTATE, "mixture state: %s: saved with weight %.9g of "
				       "the largest, now %.9g: the weights changed", sr->label,
				       ldexp((double)q, -40), ldexp((double)sr->q, -40));
		if (!sr->q)
			continue;
		if (fp != sr->fingerprint || n != sr->n)
			return rf_fail(d, RF_ESTATE, "mixture state: %s: saved for dataset %016llx "
				       "of %llu samples, this one is %016llx of %llu", sr->label,
				       (unsigned long long)fp, (unsigned long long)n,
				       (unsigned long long)sr->fingerprint, (unsigned long long)sr->n);
		int same_window = mode != RF_PLAN_WINDOW ||
				  rf_plan_window_in_force(window, sr->nchunks) ==
					  rf_plan_window_in_force(sr->window, sr->nchunks);
		if (mode != (uint32_t)sr->mode || !same_window)
			return rf_fail(d, RF_ESTATE, "mixture state: %s: saved with shuffle %u "
				       "window %u, now %u window %u", sr->label, mode, window,
				       (unsigned)sr->mode, sr->window);
	}
	uint64_t E = rf_le64(b + MOFF_E);
	if (E != mix->E)
		return rf_fail(d, RF_ESTATE, "mixture state: saved with epochs of %llu samples, "
			       "now %llu", (unsigned long long)E, (unsigned long long)mix->E);
	uint32_t batch = rf_le32(b + MOFF_BATCH), world = rf_le32(b + MOFF_WORLD);
	uint32_t tail = rf_le32(b + MOFF_TAIL);
	if (batch == 0 || world == 0 || (tail != RF_PLAN_DROP && tail != RF_PLAN_KEEP) ||
	    rf_le64(b + MOFF_ZERO) != 0)
		return rf_fail(d, RF_ESTATE, "mixture state: a field is out of range (batch %u, "
			       "world %u, tail %u)", batch, world, tail);
	uint64_t G = (uint64_t)batch * world;
	if (G != mix->G)
		return rf_fail(d, RF_ESTATE, "mixture state: global batch %u x %u = %llu at save, "
			       "now %u x %u = %llu: a resumed job needs the same world x batch",
			       world, batch, (unsigned long long)G, mix->mp.world, mix->mp.batch,
			       (unsigned long long)mix->G);
	rf_mix next = *mix;
	next.mp.seed = rf_le64(b + MOFF_SEED);
	next.mp.epoch = rf_le64(b + MOFF_EPOCH);
	next.mp.tail = (enum rf_plan_tail)tail;
	if (!epoch_ok(&next, next.mp.epoch))
		return rf_fail(d, RF_ESTATE, "mixture state: epoch %llu is out of range",
			       (unsigned long long)next.mp.epoch);
	geom_compute(&next);
	uint64_t position = rf_le64(b + MOFF_POSITION);
	uint64_t start = next.mp.epoch * E;
	/* A boundary of the saved job's batches: k G, or past the last full
	 * global batch (its tail ended the epoch). */
	if (position < start || position - start > E ||
	    ((position - start) % G != 0 && position - start <= next.base))
		return rf_fail(d, RF_ESTATE, "mixture state: position %llu is not a batch boundary "
			       "of epoch %llu (%llu samples from %llu, global batches of %llu)",
			       (unsigned long long)position, (unsigned long long)next.mp.epoch,
			       (unsigned long long)E, (unsigned long long)start,
			       (unsigned long long)G);
	uint64_t o = position - start;
	next.cursor = o <= next.base ? o / G : next.nbatches;
	/* Every source's recorded place must be where the stream puts it. */
	for (size_t s = 0; s < mix->S; s++) {
		const struct mix_src *sr = &mix->src[s];
		const uint8_t *p = b + MOFF_SOURCES + s * SRC_BYTES;
		uint64_t se = rf_le64(p + SOFF_EPOCH), sp = rf_le64(p + SOFF_POS);
		uint64_t want = rf_mix_drawn(&next, s, position);
		uint64_t we = sr->q ? want / sr->n : 0, wp = sr->q ? want % sr->n : 0;
		if (se != we || sp != wp)
			return rf_fail(d, RF_ESTATE, "mixture state: %s: recorded at its epoch %llu "
				       "sample %llu, but the mixture's position %llu draws it to "
				       "epoch %llu sample %llu", sr->label, (unsigned long long)se,
				       (unsigned long long)sp, (unsigned long long)position,
				       (unsigned long long)we, (unsigned long long)wp);
	}
	/* The seed keys the sources' plans: build them anew, all or none. */
	if (next.mp.seed != mix->mp.seed) {
		rf_plan **np = calloc(mix->S, sizeof *np);
		int rc = np ? 0 : -ENOMEM;
		for (size_t s = 0; rc == 0 && s < mix->S; s++) {
			const struct mix_src *sr = &mix->src[s];
			if (!sr->plan)
				continue;
			rf_plan_params pp = *rf_plan_params_get(sr->plan);
			pp.seed = rf_mix_source_seed(next.mp.seed, s);
			pp.epoch = 0;
			rc = rf_plan_create(&np[s], &pp, sr->counts, sr->nchunks, d);
		}
		if (rc < 0) {
			for (size_t s = 0; np && s < mix->S; s++)
				rf_plan_destroy(&np[s]);
			free(np);
			return rf_fail(d, rc, "mixture state: out of memory for the sources' plans");
		}
		for (size_t s = 0; s < mix->S; s++) {
			if (!np[s])
				continue;
			rf_plan_destroy(&mix->src[s].plan);
			next.src[s].plan = np[s];
		}
		free(np);
	}
	*mix = next;
	return 0;
}
