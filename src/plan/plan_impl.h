/* SPDX-License-Identifier: MIT */
/* The plan's private layout, shared by plan.c and state.c. */
#ifndef RF_PLAN_IMPL_H
#define RF_PLAN_IMPL_H

#include "plan/plan.h"

/* Where the batches of an epoch lie in the global order (see plan.h). */
struct rf_plan_geom {
	uint64_t G;        /* world x batch */
	uint64_t nfull;    /* full global batches */
	uint64_t base;     /* nfull x G: start of the tail */
	uint64_t nbatches; /* per rank, tail included */
	uint64_t tail_s;   /* RF_PLAN_KEEP: samples per rank in the tail batch */
};

/* The tables of one epoch: all O(chunks), built by epoch_build. */
struct rf_plan_epoch {
	uint32_t *perm;     /* [C] dataset chunk at each place of the chunk order */
	uint64_t *pstart;   /* [C+1] first global position of each place */
	uint32_t *readidx;  /* [C] read-sequence entry of each place, or UINT32_MAX */
	uint32_t *reads;    /* [nreads] dataset chunks in read order */
	uint64_t nreads;
	/* window mode (see plan.h): segment k draws from places k..k+Wp-1 */
	uint64_t nseg;       /* segments: C - Wp + 1 */
	uint64_t *segstart;  /* [nseg + 1] first global position of segment k */
	uint32_t *firstread; /* [C + 1] read entry of the first non-empty place >= j */
	uint32_t Wp;         /* the window in force: min(W, C) */
	rf_perm full;       /* full mode */
	struct rf_plan_geom geom;
};

struct rf_plan {
	rf_plan_params pp;
	rf_diag own_diag;
	rf_diag *diag;
	uint64_t nchunks;
	uint64_t n;
	uint64_t *start;    /* [C+1] first dataset sample of each chunk */
	/* Chunk lookup: bucket[b] is the chunk holding sample b << bshift. */
	uint32_t *bucket;
	uint64_t nbuckets;
	unsigned bshift;
	struct rf_plan_epoch ep;
	uint64_t cursor;
	uint32_t part;       /* of the last loaded state blob */
};

/* Build the epoch tables for pp (n, start, nchunks from plan) into *ep. */
int rf_plan_epoch_build(const rf_plan *plan, const rf_plan_params *pp, struct rf_plan_epoch *ep);
void rf_plan_epoch_free(struct rf_plan_epoch *ep);
/* Global positions consumed after k batches. */
uint64_t rf_plan_consumed(const rf_plan *plan, uint64_t k);

#endif
