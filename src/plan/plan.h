/* SPDX-License-Identifier: MIT */
/*
 * The plan: the order in which one rank receives the samples of one epoch.
 *
 * Everything here is a pure function of (chunk sample counts, seed, epoch,
 * rank, world, mode, window, batch size, tail policy); nothing reads files.
 * The loader builds one rf_plan per epoch from rf_dataset_chunk_info's sample
 * counts and asks it for batches of sample indices and for the chunks to read.
 *
 * Memory: O(chunks) for the tables (at most 36 bytes a chunk), never
 * O(samples).  Time: O(chunks) to set up an epoch; a batch is computed on
 * demand in O(log chunks + B): one binary search to find its place, then O(1)
 * a sample (keyed permutations, a bucket table for the chunk of a sample).
 *
 * ---------------------------------------------------------------- the order
 *
 * 1. The epoch's GLOBAL order is a permutation P of [0, N), N = the sum of the
 *    chunk sample counts:
 *    - RF_PLAN_NONE:   file order, P(p) = p.
 *    - RF_PLAN_CHUNKS: the chunks in a uniformly random order (Fisher-Yates
 *      keyed by seed and epoch); the samples of a chunk in file order.
 *    - RF_PLAN_WINDOW: chunks in the same random order as RF_PLAN_CHUNKS
 *      (places 0..C-1), read into a window of Wp = min(W, C) decoded
 *      chunks that is full before the first draw: segment k (k = 0 ..
 *      C - Wp) draws from the Wp places k..k+Wp-1, place k leaves the window
 *      at its end and place k + Wp enters for the next.  Each place's samples,
 *      in a keyed order of their own, are cut into Wp parts (sizes S/Wp, the
 *      first S % Wp one longer) for the Wp segments it is resident in; the
 *      parts of the segments before the first (the window filling) go to
 *      segment 0 and those after the last (the window draining) to the last
 *      one.  Each segment is a uniformly random (keyed) order of its parts.
 *      So every batch draws from all Wp resident chunks, evenly in the steady
 *      state (1/Wp of each a segment), the first and last segments with
 *      linearly graded shares (the oldest chunk most); at most Wp decoded
 *      chunks are ever needed, one chunk is read per segment (no burst but
 *      the first fill), and with W >= C there is one segment: a uniform
 *      permutation of the epoch, of RF_PLAN_FULL's quality (W = 1: each
 *      chunk shuffled alone).  Any W >= C gives the same order.
 *    - RF_PLAN_FULL: a uniformly random permutation of all samples: a keyed
 *      8-round Feistel network on the smallest power of two >= N (>= 256),
 *      alternating unbalanced halves, round function the splitmix64 mixer of
 *      (half ^ round key), round keys from (seed, epoch, round); values >= N
 *      are walked again (cycle walking, fewer than 2 steps on average when N
 *      >= 256); a key bit swaps the outputs 0 and 1, since a Feistel network
 *      alone yields only even permutations.  O(1) memory.
 *
 * 2. Sharding.  G = world x batch samples make a GLOBAL batch; global batch k
 *    is positions [kG, (k+1)G) of the global order and rank r takes the slice
 *    [kG + rB, kG + rB + B) of it, B the per-rank batch size.  Every rank gets
 *    the same number of batches.  With nfull = N / G and rem = N % G, the tail
 *    policy decides the last, partial global batch:
 *    - RF_PLAN_DROP (default): no tail batch.  The dropped samples are exactly
 *      P(p) for p in [nfull*G, N): the last rem samples of the global order
 *      (in RF_PLAN_NONE, the last rem samples of the dataset).
 *    - RF_PLAN_PAD: one more batch of B for every rank; rank r's slice of the
 *      tail is [base + rB, base + rB + B) (base = nfull*G) and its positions
 *      >= N are pads: each repeats the rank's own last real sample (the one
 *      before it in the rank's order), or P(N - 1) when the rank has no real
 *      sample in the epoch.  Pads carry RF_PLAN_ITEM_PAD.  Nothing is dropped.
 *      (Repeating a sample the rank has just used keeps its chunk resident, so
 *      padding never breaks the window bound.)
 *    - RF_PLAN_KEEP: when rem > 0, one more, smaller batch of s = ceil(rem /
 *      world) samples for every rank.  With q = rem / world and m = rem %
 *      world, rank r's real samples are the q + (r < m) positions from base +
 *      rq + min(r, m): the first m ranks take q + 1, the others q and one pad
 *      (RF_PLAN_ITEM_PAD, the same repeat as RF_PLAN_PAD's), so every rank's
 *      tail batch has s samples, at most one of them a pad, world - m pads
 *      in all when m > 0.  Nothing is dropped; with world = 1 or m = 0 there
 *      is no pad (world = 1: the usual "keep the last partial batch").
 *      rf_config's drop_last = 1 maps to RF_PLAN_DROP, drop_last = 0 to
 *      RF_PLAN_KEEP.
 *
 * 3. Resume.  A position is the number of global positions consumed: k*G after
 *    k batches (the tail batch ends the epoch).  The state blob (below) holds
 *    it with everything that defines the order; loading it seeks in O(log
 *    chunks) after the epoch's O(chunks) set-up, which every epoch start pays
 *    anyway: nothing is replayed, in any mode (the window mode's segments and
 *    groups are located by binary search over O(chunks) prefix sums, and the
 *    keyed permutations are stateless).  The blob names no rank: every rank
 *    saves the same blob after the same batch, and any rank's blob restores
 *    all of them.  Elastic: a blob saved with world w x batch b loads into a
 *    plan with world w' x batch b' when w x b = w' x b'; the remaining global
 *    batches are then split w' ways, so the ranks of the new job together
 *    receive exactly the samples of the full global batches the old job had
 *    not consumed; a last, partial global batch (tail KEEP) is shared out w'
 *    ways, padded as above for w'.
 *
 * ---------------------------------------------------------- I/O planning
 *
 * For RF_PLAN_NONE, _CHUNKS and _WINDOW a rank reads whole chunks, in the
 * order of its READ SEQUENCE: rf_plan_reads() entries, rf_plan_read_chunk(j)
 * the dataset chunk of entry j.  Every delivered item names the entry its
 * sample comes from (item.read) and item.keep_from: decoded chunks of entries
 * < keep_from will never be needed again this epoch.  keep_from never
 * decreases along a rank's items, and the running maximum of item.read is at
 * most keep_from + Wp - 1 (Wp = 1 for none and chunks), so a loader that reads
 * entries in sequence, no further than needed, and drops what keep_from allows
 * holds at most W decoded chunks (entries below keep_from need not be read at
 * all: a rank can skip them).  In window mode segment k needs the entries of
 * places k..k+Wp-1 (keep_from is the first of them): a loader with room for
 * Wp + 1 decoded chunks reads the next segment's chunk while the current
 * segment is delivered.
 *
 * Reads across ranks: global batches are cut into rank slices of B samples,
 * so in none, chunks and window modes a chunk of S samples is read by up to
 * min(world, S / B + 2) ranks (every rank, in window mode); a job with many
 * ranks and chunks much larger than B reads the dataset up to `world` times
 * over.  Full mode reads only the rank's own samples.  Smaller chunks, or
 * full mode on uncompressed shards, avoid the extra reads.  In none and
 * chunks modes a rank's read sequence skips the chunks none of its samples
 * come from; in window mode it holds every non-empty chunk (each global batch
 * draws from the whole window).  RF_PLAN_FULL reads samples one by one
 * (item.chunk and item.offset locate each): item.read and item.keep_from are
 * RF_PLAN_NO_READ and the read sequence is empty.
 *
 * --------------------------------------------------------- randomness
 *
 * RF_PLAN_FULL passes chi-square tests (as a family, at the 0.001 level) on
 * the position of single samples and on which sample follows which (N = 64
 * and 50, 20000 seeds), on all 120 orders of 5 samples and 720 of 6, and on
 * the first two samples of 17 (tests/plan/test_plan_random.c).
 * RF_PLAN_WINDOW: label mixing, measured through the loader on a dataset of
 * 10 classes packed in label order (tests/loader/test_mix.c): the mean
 * total-variation distance between a batch's label histogram and the uniform
 * one is that of RF_PLAN_FULL when the window holds every chunk, and close to
 * it for a window of a fraction of them (the test prints both).
 *
 * Default window: rf_plan_default_window() is a function of the dataset
 * alone (never of memory, depth, device or CPUs, which differ between the
 * ranks of a job): W = RF_PLAN_WINDOW_BYTES (128 MiB) / the average raw
 * chunk bytes, clamped to [2, 1024]: 32 chunks of the writer's default 4 MiB,
 * 128 of 1 MiB.  An uncompressed chunk stays in its pinned read slot while in
 * the window, so W + 2 read slots come out of the pinned budget: about 136
 * MiB of the default 256 MiB for typical chunks.  With large chunks (large
 * samples: the writer puts 128 of them in a chunk of up to 20 MiB, one in a
 * chunk when it is larger) W is also at most what the default budget
 * (RF_PINNED_DEFAULT) holds in read slots of the dataset's largest chunk
 * beside RF_PLAN_WINDOW_STAGE_SLOTS staging slots, but never below 2: 5
 * chunks of 20 MiB, 2 of 30 MiB; chunks up to 18 MiB keep the first rule.
 * The largest chunk is the dataset's too, the same on every rank.  A loader
 * whose ring cannot hold the W in force reports RF_EMEMPLAN (it never draws
 * another order).
 *
 * Fingerprint: any 64-bit value that changes when the dataset does; the
 * loader can take XXH3-64 over every chunk's (samples, raw bytes, XXH3-64)
 * from rf_dataset_chunk_info, which names the content without reading it.
 *
 * Cost (bench_plan, one core of a shared 2-vCPU AMD EPYC VM): rf_perm_fill
 * about 60 M samples/s for N = 10^8; whole batches with chunk lookup about
 * 10 M samples/s in full mode, over 100 M/s in none and chunks.  Window mode:
 * 12 M/s with chunks of 4096 samples and W = 32 (the earlier window order of
 * overlapping groups: 14 M/s), 3 M/s with chunks of 64 samples and W = 128,
 * where nearly every sample comes from another chunk, whose keyed order is
 * set up for it (few samples a chunk means large samples: a plan cost per
 * sample that is small beside their bytes).
 *
 * Threads: an rf_plan may be read (rf_plan_batch, rf_plan_global, rf_plan_*
 * getters) by many threads at once; rf_plan_next_batch, rf_plan_seek,
 * rf_plan_set_epoch and rf_plan_state_load modify it and need exclusive use.
 *
 * Use by the loader (one plan per rank, re-keyed each epoch):
 *
 *     uint32_t *counts = ...;              // rf_chunk_info.samples, chunk by chunk
 *     rf_plan_params pp;
 *     rf_plan_params_init(&pp);
 *     pp.seed = cfg.seed; pp.mode = RF_PLAN_WINDOW; pp.batch = cfg.batch_size;
 *     pp.window = cfg.window ? cfg.window : rf_plan_default_window(avg_raw_chunk_bytes,
 *                                                                   max_chunk_slot);
 *     pp.fingerprint = fp;
 *     rc = rf_plan_resolve_rank(cfg.rank, cfg.world, NULL, NULL, &pp.rank,
 *                               &pp.world, &source, &diag);   // log `source`
 *     rc = rf_plan_create(&plan, &pp, counts, nchunks, &diag);
 *     rf_plan_item items[B];
 *     for (uint64_t epoch = 0; epoch < epochs; epoch++) {
 *         if (epoch > 0) rf_plan_set_epoch(plan, epoch);
 *         // I/O thread: read rf_plan_read_chunk(plan, j) for j = 0, 1, ...
 *         // as far as the items ask (item.read), no further than
 *         // keep_from + W - 1 ahead; free decoded chunks below keep_from.
 *         for (uint64_t k = 0; k < rf_plan_batches(plan); k++) {
 *             uint32_t n;
 *             rf_plan_batch(plan, k, items, B, &n);  // any thread, any order
 *             for (uint32_t i = 0; i < n; i++)       // copy items[i].offset of
 *                 gather(items[i].chunk, items[i].offset);  // items[i].chunk
 *         }
 *     }
 *     rf_plan_destroy(&plan);
 *
 * ------------------------------------- proposed public API (ringfeed.h)
 *
 * The loader can expose the plan's resume state as follows (copy into the
 * loader section of include/ringfeed/ringfeed.h):
 *
 *     // Bytes enough for any state blob of this library version.
 *     #define RF_STATE_MAX 128
 *
 *     // Write the loader's position into buf (capacity cap bytes): the
 *     // dataset's fingerprint, seed, epoch, shuffle mode, window, batch
 *     // size, world size and the number of global samples consumed by the
 *     // batches rf_loader_next has returned so far (batches still in
 *     // flight in the pipeline are not counted), with a magic, a version and
 *     // an XXH3-64 checksum.  *len is set to the blob's length.  Call it
 *     // between rf_loader_next calls, on every rank after the same batch
 *     // (the blob does not depend on the rank, so saving it on rank 0 alone
 *     // is enough).  The blob is a few dozen bytes, little-endian, and
 *     // portable between machines.
 *     // Returns 0; -ENOSPC when cap is too small (*len still set);
 *     // -EINVAL for NULL arguments.
 *     RF_API int rf_state_save(const rf_loader *loader, void *buf, size_t cap,
 *                              size_t *len);
 *
 *     // Restore a position saved by rf_state_save: the next rf_loader_next
 *     // returns exactly the batch that would have followed the last batch
 *     // returned before the save.  The blob's seed, epoch, mode, window
 *     // and tail policy replace the loader's configured ones (a resumed job
 *     // continues the saved order).  The world size may differ from the
 *     // one at save when world x batch (the global batch) is the same: the
 *     // ranks of the new job then share the samples not yet consumed.
 *     // Call it after rf_loader_open and before the first rf_loader_next
 *     // (or after draining: it discards batches in flight).  Takes O(chunks)
 *     // time and reads no sample.
 *     // Returns 0; RF_ESTATE for a blob that is corrupt (magic, version,
 *     // size, checksum) or belongs to another dataset (fingerprint, sample
 *     // or chunk count) or another global batch size; the message says
 *     // which field differs and the two values.
 *     RF_API int rf_state_load(rf_loader *loader, const void *buf, size_t len);
 *
 * and the settings that choose the plan (in rf_config, taken from its
 * reserved bytes):
 *
 *     enum rf_shuffle { RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS, RF_SHUFFLE_WINDOW,
 *                       RF_SHUFFLE_FULL };      // = enum rf_plan_mode
 *     enum rf_shuffle shuffle;  // default RF_SHUFFLE_NONE (file order)
 *     uint64_t seed;            // default 0; with the epoch, fixes the order
 *     uint32_t window;          // W for RF_SHUFFLE_WINDOW; 0 (default):
 *                               // rf_plan_default_window(pinned_bytes, ...)
 *     int32_t rank, world;      // -1 (default): rf_plan_resolve_rank, whose
 *                               // source the loader logs at open
 *     int pad_last;             // 1: pad the last batch (RF_PLAN_PAD) for
 *                               // evaluation that must see every sample
 *
 * Typical use in a training loop:
 *
 *     uint8_t st[RF_STATE_MAX]; size_t n;
 *     if (step % 1000 == 0 && rf_state_save(loader, st, sizeof st, &n) == 0)
 *         write_checkpoint(model, st, n);
 *     ...
 *     if (have_checkpoint && (rc = rf_state_load(loader, st, n)) < 0)
 *         fprintf(stderr, "resume: %s\n", rf_loader_errmsg(loader));
 */
#ifndef RF_PLAN_H
#define RF_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

enum rf_plan_mode {
	RF_PLAN_NONE = 0,
	RF_PLAN_CHUNKS = 1,
	RF_PLAN_WINDOW = 2,
	RF_PLAN_FULL = 3,
};

enum rf_plan_tail {
	RF_PLAN_DROP = 0, /* drop the last partial global batch (default) */
	RF_PLAN_PAD = 1,  /* pad it to a full batch by repeats */
	RF_PLAN_KEEP = 2, /* keep it as a smaller batch, equal on every rank
	                     (at most one pad a rank) */
};

/* Mode and tail policy names ("none", "chunks", "window", "full"; "drop",
 * "pad", "keep"), for logs and command lines.  NULL / RF_EUSAGE when unknown. */
const char *rf_plan_mode_name(enum rf_plan_mode mode);
int rf_plan_mode_parse(const char *name, enum rf_plan_mode *out);
const char *rf_plan_tail_name(enum rf_plan_tail tail);
int rf_plan_tail_parse(const char *name, enum rf_plan_tail *out);

#define RF_PLAN_WINDOW_MIN 2
#define RF_PLAN_WINDOW_MAX 1024

/* The default window W for the dataset's average raw (decoded) chunk size
 * and its largest chunk's read slot (stored span rounded up to 4096; 0: no
 * bound from it), as described above.  An average of 0 gives
 * RF_PLAN_WINDOW_MAX (or the slot bound).  Always in [RF_PLAN_WINDOW_MIN,
 * RF_PLAN_WINDOW_MAX]. */
#define RF_PLAN_WINDOW_BYTES (UINT64_C(128) << 20)
/* Staging slots a window loader on the default budget keeps beside W + 2
 * read slots: depth + 2 for the Python loader's default depth (3 device
 * buffers), the staging share the memory plan wants (loader/memplan.c). */
#define RF_PLAN_WINDOW_STAGE_SLOTS 5u
uint32_t rf_plan_default_window(uint64_t avg_chunk_raw_bytes, uint64_t max_chunk_slot_bytes);
/* The window in force for W over a dataset of nchunks chunks: min(W,
 * nchunks) (W itself when nchunks is 0).  A plan refuses one above
 * RF_PLAN_WINDOW_MAX (RF_EUSAGE). */
uint32_t rf_plan_window_in_force(uint32_t window, uint64_t nchunks);

typedef struct rf_plan_params {
	uint64_t seed;
	uint64_t epoch;
	uint64_t fingerprint;   /* of the dataset, chosen by the caller; stored in the state */
	uint32_t rank;          /* 0 <= rank < world */
	uint32_t world;         /* >= 1 */
	uint32_t batch;         /* samples per batch per rank, >= 1 */
	uint32_t window;        /* W, decoded chunks, for RF_PLAN_WINDOW; >= 1 */
	enum rf_plan_mode mode;
	enum rf_plan_tail tail;
} rf_plan_params;

/* Defaults: seed 0, epoch 0, rank 0 of 1, batch 1, mode RF_PLAN_WINDOW with
 * W = 16, RF_PLAN_DROP. */
void rf_plan_params_init(rf_plan_params *p);

/* The order id: a 64-bit hash of every input of the epochs' order but the
 * rank and the epoch (fingerprint, mode, seed, window in force, batch,
 * world, tail), so that the ranks of one job can check that they agree.
 * The seed is left out in RF_PLAN_NONE and W outside RF_PLAN_WINDOW, since
 * they change nothing there. */
uint64_t rf_plan_order_id(const rf_plan_params *params, uint64_t nchunks);

typedef struct rf_plan rf_plan;

/* Build the plan for params->epoch from the sample counts of the dataset's
 * chunks (counts[c] for chunk c, dataset order; zero counts allowed).  The
 * counts are copied.  `d` receives error messages and, when not NULL, must
 * outlive the plan (the plan keeps using it).  With NULL the plan uses its
 * own, read with rf_plan_errmsg; the message of a failed create is then lost.
 * Returns 0; RF_EUSAGE for a bad parameter (rank >= world, batch 0, window 0,
 * unknown mode or tail, more than UINT32_MAX chunks, world x batch or the
 * sample count overflowing 64 bits); -ENOMEM. */
int rf_plan_create(rf_plan **out, const rf_plan_params *params, const uint32_t *counts,
		   uint64_t nchunks, rf_diag *d);
/* Free a plan; accepts NULL and a pointer to NULL; clears *plan. */
void rf_plan_destroy(rf_plan **plan);
/* The last error message on the plan ("" when none). */
const char *rf_plan_errmsg(const rf_plan *plan);

/* Switch to another epoch and rewind to its first batch: O(chunks).
 * Returns 0 or -ENOMEM (the plan is then unusable until a call succeeds). */
int rf_plan_set_epoch(rf_plan *plan, uint64_t epoch);

/* Batches every rank receives in an epoch of n samples, B = batch per rank,
 * under `tail` (point 2 above): what rf_plan_batches returns for such a
 * plan, without building one.  world and batch >= 1. */
uint64_t rf_plan_epoch_batches(uint64_t n, uint32_t world, uint32_t batch, enum rf_plan_tail tail);

/* The parameters in force (after a state load they come from the blob). */
const rf_plan_params *rf_plan_params_get(const rf_plan *plan);
uint64_t rf_plan_samples(const rf_plan *plan);   /* N */
/* Batches every rank receives this epoch (the same on every rank). */
uint64_t rf_plan_batches(const rf_plan *plan);
/* Samples of batch k for this rank (B, or smaller for a RF_PLAN_KEEP tail);
 * 0 past the end. */
uint32_t rf_plan_batch_size(const rf_plan *plan, uint64_t k);
/* Samples of the global order that no rank receives this epoch (see above). */
uint64_t rf_plan_dropped(const rf_plan *plan);

/* The global order itself: *sample = P(pos) for pos < N.  Returns 0 or
 * -ERANGE. */
int rf_plan_global(const rf_plan *plan, uint64_t pos, uint64_t *sample);

/* The chunk holding a dataset sample and its index in the chunk.  Returns 0
 * or -ERANGE. */
int rf_plan_locate(const rf_plan *plan, uint64_t sample, uint64_t *chunk, uint32_t *offset);

#define RF_PLAN_NO_READ UINT64_MAX
#define RF_PLAN_ITEM_PAD 1u   /* a repeat added by RF_PLAN_PAD or RF_PLAN_KEEP */

/* One sample as delivered to this rank. */
typedef struct rf_plan_item {
	uint64_t sample;    /* dataset-wide sample index */
	uint64_t pos;       /* its position in the epoch's global order */
	uint64_t chunk;     /* dataset chunk holding it */
	uint64_t read;      /* read-sequence entry of that chunk; RF_PLAN_NO_READ in full mode */
	uint64_t keep_from; /* entries below this are no longer needed; RF_PLAN_NO_READ in full mode */
	uint32_t offset;    /* index of the sample within its chunk */
	uint32_t flags;     /* RF_PLAN_ITEM_PAD */
} rf_plan_item;

/* Batch k of this rank: items[0..*n) in delivery order, *n =
 * rf_plan_batch_size(k) (0 past the end).  Does not move the cursor.
 * Returns 0; -ENOSPC when cap < the batch size (*n is set to it). */
int rf_plan_batch(const rf_plan *plan, uint64_t k, rf_plan_item *items, uint32_t cap,
		  uint32_t *n);

/* The items of the consecutive global positions [first, first + count), all
 * below N (a mixture draws runs of a source's order): as in a batch, but
 * with no pads.  Returns 0 or -ERANGE. */
int rf_plan_items(const rf_plan *plan, uint64_t first, uint32_t count, rf_plan_item *items);

/* The cursor: the next batch to deliver.  rf_plan_next_batch fills the batch
 * at the cursor and advances it; at the end of the epoch it sets *n = 0 and
 * returns 0.  rf_plan_seek moves the cursor to batch k (<= rf_plan_batches:
 * else -ERANGE); rf_plan_tell returns it. */
int rf_plan_next_batch(rf_plan *plan, rf_plan_item *items, uint32_t cap, uint32_t *n);
int rf_plan_seek(rf_plan *plan, uint64_t k);
uint64_t rf_plan_tell(const rf_plan *plan);

/* The read sequence (see above): its length and entry j's dataset chunk
 * (-ERANGE past the end). */
uint64_t rf_plan_reads(const rf_plan *plan);
int rf_plan_read_chunk(const rf_plan *plan, uint64_t j, uint64_t *chunk);

/* ------------------------------------------------------------ state blob */

/* Layout (little-endian), RF_PLAN_STATE_SIZE bytes:
 *   0  magic "RFSTATE\0"       8  u32 version (2)    12 u32 size (96)
 *   16 u64 fingerprint         24 u64 seed           32 u64 epoch
 *   40 u64 position (global samples consumed)
 *   48 u64 samples N           56 u64 chunks
 *   64 u32 mode   68 u32 window   72 u32 batch   76 u32 world
 *   80 u32 tail   84 u32 part: samples of the next batch already handed out
 *                  (a batch closed early by a full variable-size region;
 *                  0 otherwise, and always with world > 1 or full mode)
 *   88 u64 XXH3-64 of bytes [0, 88) */
#define RF_PLAN_STATE_SIZE 96
#define RF_PLAN_STATE_VERSION 2
/* Version 1 had the same layout; its window order (overlapping groups of
 * W/2 chunks) is no longer drawn, so rf_plan_state_load refuses a version 1
 * blob in window mode (RF_ESTATE) and loads one of the other modes, whose
 * orders are unchanged. */

/* Serialise the cursor's position.  Returns 0; -ENOSPC when cap <
 * RF_PLAN_STATE_SIZE (*len still set). */
int rf_plan_state_save(const rf_plan *plan, void *buf, size_t cap, size_t *len);

/* The same for the position after `batches` batches of `epoch` (the plan's
 * other parameters): for a loader whose readers run ahead of delivery (they
 * use rf_plan_batch, not the cursor) and which saves what it has delivered,
 * possibly in the epoch before the one its plan is now set to.  Returns 0;
 * -ENOSPC as above; -ERANGE when batches > rf_plan_batches. */
int rf_plan_state_save_at(const rf_plan *plan, uint64_t epoch, uint64_t batches, void *buf,
			  size_t cap, size_t *len);
/* The same, with `part` samples of batch `batches` handed out already (its
 * first pieces, closed early); -ERANGE also when part >= the batch size. */
int rf_plan_state_save_part(const rf_plan *plan, uint64_t epoch, uint64_t batches, uint32_t part,
			    void *buf, size_t cap, size_t *len);
/* The shuffle mode and window of a blob that is whole (magic, version, size,
 * checksum), without a plan: 0, or RF_ESTATE (nothing set).  The rest is
 * checked when it is loaded. */
int rf_plan_state_peek(const void *buf, size_t len, enum rf_plan_mode *mode, uint32_t *window);

/* After rf_plan_state_load: the `part` of the loaded blob (0 for one saved
 * at a batch boundary), the samples of the cursor's batch to skip. */
uint32_t rf_plan_state_part(const rf_plan *plan);

/* Restore a position: the blob's seed, epoch, mode, window and tail replace
 * the plan's, the plan's rank, world and batch stay, and the cursor moves to
 * the batch after the saved position.  Returns 0; RF_ESTATE (message on the
 * plan's diag) for a short or corrupt blob (magic, version, size, checksum,
 * a field out of range), a blob of another dataset (fingerprint, samples,
 * chunks), a different global batch (world x batch) or a position that is not
 * on a global batch boundary; -ENOMEM.  On failure the plan is unchanged. */
int rf_plan_state_load(rf_plan *plan, const void *buf, size_t len);

/* ------------------------------------------------------- rank and world */

/* A getenv-like lookup (tests pass their own). */
typedef const char *(*rf_plan_getenv_fn)(void *user, const char *name);

/* Resolve this process's rank and world size.  cfg_rank / cfg_world are the
 * configured values or -1 for unset; an unset one is taken from the first of
 * these launcher environments whose two variables are both set:
 *   RANK / WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
 *   (Open MPI), PMI_RANK / PMI_SIZE (MPICH, Intel MPI), SLURM_PROCID /
 *   SLURM_NTASKS (Slurm srun);
 * when none is set, rank 0 of world 1.  *source is a static string for the
 * log: "config", "default", or the variables' names, e.g. "RANK/WORLD_SIZE"
 * ("config+RANK/WORLD_SIZE" when one value came from each, "config+default"
 * when one was configured and no launcher set the other).  Returns 0 or
 * RF_EUSAGE with a message on d: a configured value below -1, a variable that
 * is not a plain decimal number or too large (> 2^24), world 0, rank >= world.
 * getenv may be NULL (the process environment). */
int rf_plan_resolve_rank(int64_t cfg_rank, int64_t cfg_world, rf_plan_getenv_fn getenv_fn,
			 void *user, uint32_t *rank, uint32_t *world, const char **source,
			 rf_diag *d);

/* ------------------------------------------------ the keyed permutation */

/* A keyed bijection on [0, n) in O(1) memory (the RF_PLAN_FULL order; also
 * used inside window segments).  Exposed for tests and benchmarks. */
#define RF_PERM_ROUNDS 8
typedef struct rf_perm {
	uint64_t n;
	uint64_t umask[2];    /* mask of the unchanged (low) half, per round parity */
	unsigned shift[2];    /* bits of the unchanged half, per round parity */
	unsigned fshift[2];   /* 64 - bits of the changed half */
	unsigned rot[2];      /* bits of the changed half */
	uint64_t swap01;      /* 1: outputs 0 and 1 trade places (parity) */
	uint64_t key[RF_PERM_ROUNDS];
} rf_perm;

void rf_perm_init(rf_perm *p, uint64_t n, uint64_t key);

/* The splitmix64 finalizer: the round function, and the hash behind every
 * key the plan derives. */
static inline uint64_t
rf_plan_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The round function: the splitmix64 finalizer of (half ^ key) without its
 * last xorshift, which leaves the top 31 bits alone: only the top bits are
 * used (a half has at most 32), so it would cost two operations a round and
 * change nothing below 2^62 samples. */
static inline uint64_t
rf_perm_f(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	return (z ^ (z >> 27)) * 0x94D049BB133111EBull;
}

/* One pass of the rounds over x < 2^bits. */
static inline uint64_t
rf_perm_rounds(const rf_perm *p, uint64_t x)
{
#pragma GCC unroll 8
	for (int r = 0; r < RF_PERM_ROUNDS; r++) {
		int t = r & 1;
		uint64_t lo = x & p->umask[t];
		uint64_t hi = x >> p->shift[t];
		hi ^= rf_perm_f(lo ^ p->key[r]) >> p->fshift[t];
		x = (lo << p->rot[t]) | hi;
	}
	return x;
}

/* The image of i < n. */
static inline uint64_t
rf_perm_at(const rf_perm *p, uint64_t i)
{
	if (p->n <= 1)
		return i;
	uint64_t x = i;
	do
		x = rf_perm_rounds(p, x);
	while (x >= p->n);
	return x < 2 ? x ^ p->swap01 : x;
}

/* out[i] = rf_perm_at(p, first + i) for i < count, computed 8 values at a
 * time so that the rounds of independent values overlap in the CPU (one
 * value's rounds are a chain of dependent multiplies). */
void rf_perm_fill(const rf_perm *p, uint64_t first, uint32_t count, uint64_t *out);

/* out[i] = rf_perm_at(ps[i], in[i]) for i < count, with rf_perm_fill's
 * lanes (in[i] < ps[i]->n, every ps[i]->n >= 2). */
void rf_perm_map_each(const rf_perm *const *ps, const uint64_t *in, uint32_t count,
		      uint64_t *out);

#endif
