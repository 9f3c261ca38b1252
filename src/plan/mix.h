/* SPDX-License-Identifier: MIT */
/*
 * The mixture order: one stream of samples drawn from several sources at
 * chosen proportions, cut into global batches and rank slices as the plan
 * (plan.h) cuts one dataset.  Everything here is a pure function of (the
 * sources' chunk sample counts, fingerprints, weights and shuffle settings,
 * seed, epoch, rank, world, batch, tail policy, epoch length); nothing reads
 * files.
 *
 * ------------------------------------------------------------ the stream
 *
 * 1. Weights.  Each source has a weight w_s: finite and >= 0; NaN, infinite
 *    or negative weights are errors, and so is a set whose weights are all
 *    0.  A weight of 0 excludes the source (it is never drawn, and its
 *    sample count may be 0), so a configuration can switch a source off
 *    without being rewritten; its schema is still checked.  An included
 *    source (w_s > 0) with no samples is an error.  The weights are made
 *    exact integers: q_s = round(2^40 x w_s / max w) (at least 1 for w_s >
 *    0), and p_s = q_s / sum q is the share drawn.  Each q_s is within 1
 *    of 2^40 w_s / max w and sum q >= 2^40, so |p_s - w_s / sum w| <=
 *    (S + 1) 2^-40: over the first n positions the weights as given are off
 *    by at most n (S + 1) 2^-40 more samples (under one for n < 2.7 x 10^11
 *    with 3 sources).
 *
 * 2. Composition.  The mixture is an endless stream of positions n = 0, 1,
 *    2, ...; C_s(n) is the number of the first n positions that come from
 *    source s.  The included sources are the leaves of a balanced binary
 *    tree (in source order, the left half of each node one larger when odd);
 *    a node of share Q (the sum of its leaves' q) holding M of the first n
 *    positions gives its left child (share L)
 *        left(M) = floor(M x L / Q + 1/2)     (exact integer arithmetic)
 *    of them and its right child M - left(M).  So, for every n:
 *    - sum_s C_s(n) = n, and each C_s(n) is non-decreasing in n with steps
 *      of 0 or 1 (left(M + 1) - left(M) is 0 or 1 because L <= Q): every
 *      position belongs to exactly one source, found by walking down the
 *      tree in O(depth), and the positions of a source are consumed in
 *      order;
 *    - the error e = C_s(n) - p_s n satisfies, at a child of a node,
 *      |e_child| <= (L / Q) |e_node| + 1/2, and e = 0 at the root, so
 *          |C_s(n) - p_s n| <= D_s = 1/2 x sum over the nodes a on the path
 *                                   from the leaf s up to (not including)
 *                                   the root of p_s / p_a,
 *      (rf_mix_bound), where every term but the leaf's own (1/2) is below
 *      1/2.  With at most 4 included sources the tree has depth <= 2 and
 *      D_s <= 1/2 + p_s / (2 p_parent) < 1: fewer than one sample off the
 *      exact proportion at every position, hence at every batch boundary.
 *      With S sources D_s <= ceil(log2 S) / 2 (< 1.5 up to 8 sources, < 2
 *      up to 16); a lone source is the stream (D = 0).
 *    - any run of consecutive positions (a window of batches, a rank's
 *      slice) holds p_s x its length +- 2 D_s samples of source s: fewer
 *      than 2 samples off with up to 4 sources, whatever its length (100
 *      batches of 256: 25,600 samples, 0.7/0.2/0.1 give 17,920 / 5,120 /
 *      2,560, each within 2).
 *    A stateless rule was chosen over a sequential one (smooth weighted
 *    round robin, the Balinski-Young quota method, which keeps every source
 *    within 1 for any S) because it needs no replay: any position, batch,
 *    rank or epoch is computed directly, so seek, resume and rewind cost
 *    O(depth) and a state blob cannot disagree with the stream.
 *
 * 3. Each source cycles through its own epochs.  The j-th sample drawn from
 *    source s (j = C_s(n) for the position n that draws it) is position
 *    j mod N_s of the source's own epoch j / N_s (N_s its samples), in the
 *    order of a plan (plan.h) of that source with rank 0 of world 1, batch
 *    1, its own mode and window, and seed rf_mix_source_seed(seed, s): every
 *    source epoch is a whole permutation of the source (nothing dropped), a
 *    small source repeats (each pass in a fresh order) and a large one is
 *    only partly seen in a mixture epoch, continuing where it left off in
 *    the next.  Sources' epochs are independent of each other and of the
 *    mixture's.
 *
 * 4. Mixture epochs.  An epoch is E = epoch_samples positions of the stream
 *    (epoch e: [e E, (e + 1) E)).  Default E: the sum of the included
 *    sources' samples.  That is one pass over every source when the weights
 *    are proportional to the sources' sizes (the unweighted concatenation),
 *    the amount of data a user would have packed into a pre-mixed copy, and
 *    it does not change with the weights, so trying other proportions keeps
 *    the epoch length (and a schedule in epochs) the same.  Rejected: one
 *    pass of the source that runs out first (min N_s / p_s: an upsampled
 *    small source makes epochs tiny) and of the one that runs out last (max
 *    N_s / p_s: a large source given a small weight makes them huge).
 *    Within an epoch, batches are cut exactly as the plan cuts an epoch of E
 *    samples (plan.h, "Sharding"): global batch k is [e E + k G, e E + (k +
 *    1) G), G = world x batch, rank r takes [.. + r B, .. + r B + B); tails
 *    RF_PLAN_DROP and RF_PLAN_KEEP as there (RF_PLAN_PAD is refused): a kept
 *    tail gives every rank ceil(rem / world) draws, the first rem % world
 *    ranks one more real draw than the others, whose last item is a pad
 *    (RF_PLAN_ITEM_PAD in item.flags, RF_MIX_ITEM_FIRST cleared) repeating
 *    the rank's draw before it (the epoch's last draw for a rank with none).
 *    The positions of a dropped tail are skipped: their samples are not
 *    delivered and the sources move past them, so the next epoch starts at e
 *    E + E whatever the world size.
 *
 * 5. Resume.  A position is (epoch, global batches consumed); the blob
 *    (below) records it, the stream position it stands for, and every
 *    source's epoch and position in that epoch (checked against the stream
 *    on load).  Loading seeks in O(S x depth), plus the sources' plans'
 *    set-up when the blob's seed is not the mixture's: nothing is replayed.
 *    Elastic: a blob loads into a mixture with another world when world x
 *    batch is the same, as for the plan; the stream itself does not depend
 *    on the world or batch at all, only its cut into batches.
 *
 * Cost: O(depth) a sample to find its source (two 128-bit divisions a
 * level), then one run of each source's plan per batch: rf_mix_batch gives
 * about 40 M samples/s for 3 sources in chunks mode, B = 256 (bench_plan,
 * one core of a shared 2-vCPU VM), against 180 M/s for one plan; a source's
 * epoch change costs its plan's O(chunks) set-up.
 *
 * Threads: rf_mix_batch and the cursor calls move the sources' plans to the
 * epochs they need and use scratch memory in the handle: one thread at a
 * time.  Getters and rf_mix_drawn / rf_mix_position may be called from any
 * thread while no batch is being made.
 *
 * Use by the loader (see docs/design.md, "Mixtures"):
 *
 *     rf_mix_source src[3];            // counts, fingerprint, weight, mode
 *     rf_mix_params mp;
 *     rf_mix_params_init(&mp);
 *     mp.seed = cfg.seed; mp.batch = cfg.batch_size; mp.world = world; ...
 *     rc = rf_mix_create(&mix, &mp, src, 3, &diag);
 *     rf_mix_item items[B];
 *     while (rf_mix_next_batch(mix, items, B, &n) == 0 && n > 0)
 *         for (i = 0; i < n; i++)      // source items[i].source, its chunk
 *             gather(items[i].source, items[i].item.chunk, items[i].item.offset);
 */
#ifndef RF_MIX_H
#define RF_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "ringfeed/dataset.h"
#include "plan/plan.h"

#define RF_MIX_SOURCES_MAX 256

/* One source of a mixture. */
typedef struct rf_mix_source {
	const char *name;          /* for messages; NULL: "source <index>" */
	double weight;             /* finite, >= 0; 0 excludes the source */
	const uint32_t *counts;    /* sample counts of its chunks (copied) */
	uint64_t nchunks;
	uint64_t fingerprint;      /* of its dataset (plan.h, "Fingerprint") */
	enum rf_plan_mode mode;    /* its own shuffle */
	uint32_t window;           /* W for RF_PLAN_WINDOW (>= 1) */
} rf_mix_source;

typedef struct rf_mix_params {
	uint64_t seed;
	uint64_t epoch;            /* the mixture epoch to start at */
	uint64_t epoch_samples;    /* E; 0: the included sources' samples */
	uint32_t rank, world;      /* 0 <= rank < world */
	uint32_t batch;            /* samples per batch per rank, >= 1 */
	enum rf_plan_tail tail;    /* RF_PLAN_DROP or RF_PLAN_KEEP */
} rf_mix_params;

/* Defaults: seed 0, epoch 0, epoch_samples 0, rank 0 of 1, batch 1,
 * RF_PLAN_DROP. */
void rf_mix_params_init(rf_mix_params *p);

/* Check the weights of n sources (point 1 above), with no other input:
 * 0, or RF_EUSAGE with a message naming the source ("mixture: source
 * 'code' (1): weight -0.5 is negative") on d; also for n = 0 or above
 * RF_MIX_SOURCES_MAX. */
int rf_mix_weights_check(const rf_mix_source *src, size_t n, rf_diag *d);

/* Check that the fields a loader would load exist in every source with the
 * same dtype, rank, variable dimension and fixed dimensions (the length of
 * a variable dimension may differ, being per sample).  `fields` names them
 * (nfields of them); NULL loads the first source's fields, each of which
 * every other source must have (fields only some sources have are not
 * loaded, so they are allowed).  names[i] names source i in messages (NULL,
 * or a NULL entry: "source <i>").  Returns 0, or RF_ESCHEMA with a message
 * naming the source and the field on d, e.g. "mixture: source 'code' (1):
 * field 'tokens' is i64 [2049], source 'web' (0) has i32 [2049]". */
int rf_mix_schemas_check(const rf_schema *const *schemas, const char *const *names, size_t n,
			 const char *const *fields, size_t nfields, rf_diag *d);

typedef struct rf_mix rf_mix;

/* Build the mixture.  The sources (and their counts) are copied.  `d` as
 * for rf_plan_create.  Returns 0; RF_EUSAGE for bad weights (as
 * rf_mix_weights_check), an included source with no samples or a bad plan
 * setting (the source named), rank >= world, batch 0, RF_PLAN_PAD, an
 * epoch's positions beyond 2^62; -ENOMEM. */
int rf_mix_create(rf_mix **out, const rf_mix_params *params, const rf_mix_source *src,
		  size_t nsources, rf_diag *d);
void rf_mix_destroy(rf_mix **mix);
const char *rf_mix_errmsg(const rf_mix *mix);

/* The parameters in force (after a state load, the blob's seed, epoch and
 * tail). */
const rf_mix_params *rf_mix_params_get(const rf_mix *mix);
size_t rf_mix_sources(const rf_mix *mix);
/* E, the positions of an epoch (epoch_samples or its default). */
uint64_t rf_mix_epoch_samples(const rf_mix *mix);
/* p_s (0 for an excluded source) and the bound D_s of point 2. */
double rf_mix_share(const rf_mix *mix, size_t s);
double rf_mix_bound(const rf_mix *mix, size_t s);
/* The seed of source s's own plans. */
uint64_t rf_mix_source_seed(uint64_t seed, size_t s);

/* C_s(n): samples of source s among the first n positions of the stream
 * (0 for s out of range or excluded). */
uint64_t rf_mix_drawn(const rf_mix *mix, size_t s, uint64_t n);
/* The source of stream position n and its draw index j (C_s(n)). */
void rf_mix_at(const rf_mix *mix, uint64_t n, uint32_t *source, uint64_t *index);

/* The order id: a hash of every input of the order but the rank and the
 * epoch: per source its fingerprint, samples, chunks, q_s, mode (and W in
 * window mode), and seed, E, batch, world, tail; equal on every rank of a
 * job. */
uint64_t rf_mix_order_id(const rf_mix *mix);

/* Batches every rank receives each epoch, and the size of batch k (B, the
 * tail's size, 0 past the end). */
uint64_t rf_mix_batches(const rf_mix *mix);
uint32_t rf_mix_batch_size(const rf_mix *mix, uint64_t k);
/* The stream position of the first sample of global batch k of the
 * current epoch (k <= rf_mix_batches: the end of what the epoch
 * delivers). */
uint64_t rf_mix_position(const rf_mix *mix, uint64_t k);

#define RF_MIX_ITEM_FIRST 2u /* the first sample of a source epoch */

/* One sample as delivered. */
typedef struct rf_mix_item {
	uint32_t source;        /* index into the sources of rf_mix_create */
	uint32_t flags;         /* RF_MIX_ITEM_FIRST */
	uint64_t source_epoch;  /* the source's own epoch */
	uint64_t pos;           /* stream position */
	rf_plan_item item;      /* in the source: sample, chunk, offset; pos is
	                           in the source epoch's order, read and
	                           keep_from refer to that epoch's read
	                           sequence (rf_mix_source_plan) */
} rf_mix_item;

/* Switch to another mixture epoch (cursor at its first batch).  0; -ERANGE
 * when its positions would pass 2^62. */
int rf_mix_set_epoch(rf_mix *mix, uint64_t epoch);

/* Batch k of the current epoch for this rank, items in stream order.
 * Returns 0 (*n = 0 past the end); -ENOSPC when cap is too small (*n set);
 * -ENOMEM. */
int rf_mix_batch(rf_mix *mix, uint64_t k, rf_mix_item *items, uint32_t cap, uint32_t *n);
/* The cursor, as for the plan. */
int rf_mix_next_batch(rf_mix *mix, rf_mix_item *items, uint32_t cap, uint32_t *n);
int rf_mix_seek(rf_mix *mix, uint64_t k);
uint64_t rf_mix_tell(const rf_mix *mix);

/* Source s's plan set to source epoch e (its read sequence for an I/O
 * stage), valid until the next call that moves it; NULL for s out of
 * range, an excluded source, or -ENOMEM.  One thread at a time. */
const rf_plan *rf_mix_source_plan(rf_mix *mix, size_t s, uint64_t e);

/* Per source counters after `batches` batches of epoch `epoch`: samples
 * drawn from it since the stream's start (delivered or in a dropped tail),
 * its epochs completed and the position in the current one.  0, or -ERANGE
 * (s out of range, batches > rf_mix_batches). */
int rf_mix_source_progress(const rf_mix *mix, size_t s, uint64_t epoch, uint64_t batches,
			   uint64_t *drawn, uint64_t *epochs_done, uint64_t *in_epoch);

/* ------------------------------------------------------------ state blob */

/* Layout (little-endian), RF_MIX_STATE_SIZE(S) bytes:
 *   0  magic "RFMIXST\0"   8 u32 version (1)   12 u32 size
 *   16 u64 order id at save (for the log; not compared, since it holds the
 *          world size, which may change)
 *   24 u64 seed   32 u64 epoch
 *   40 u64 stream position: samples of the stream consumed (delivered or
 *          dropped), e E + the epoch's samples consumed
 *   48 u64 epoch_samples E   56 u32 batch   60 u32 world
 *   64 u32 tail   68 u32 S (sources)   72 u64 zero
 *   80 per source, 48 bytes: u64 fingerprint, u64 samples, u64 q_s,
 *      u64 source epoch, u64 position in it (0 and 0 when excluded),
 *      u32 mode, u32 window
 *   80 + 48 S: u64 XXH3-64 of the bytes before it */
#define RF_MIX_STATE_VERSION 1
#define RF_MIX_STATE_SIZE(nsources) (88 + 48 * (size_t)(nsources))

/* Save the position after `batches` batches of `epoch` (the cursor's:
 * rf_mix_state_save).  Returns 0; -ENOSPC when cap is too small (*len
 * set); -ERANGE when batches > rf_mix_batches. */
int rf_mix_state_save(const rf_mix *mix, void *buf, size_t cap, size_t *len);
int rf_mix_state_save_at(const rf_mix *mix, uint64_t epoch, uint64_t batches, void *buf,
			 size_t cap, size_t *len);

/* Restore a position: the blob's seed, epoch and tail replace the
 * mixture's, its rank, world and batch stay, the cursor moves to the batch
 * after the saved position.  Returns 0; RF_ESTATE (message naming the
 * field, and the source for a source's field) for a corrupt blob, another
 * set of sources (count, fingerprint, samples, weight, mode, window),
 * another E or global batch (world x batch), a position that is not a
 * batch boundary, or source positions that disagree with the stream;
 * -ENOMEM.  On failure the mixture is unchanged. */
int rf_mix_state_load(rf_mix *mix, const void *buf, size_t len);

#endif
