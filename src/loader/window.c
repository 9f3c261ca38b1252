/* SPDX-License-Identifier: MIT */
/*
 * Window shuffling: decoded chunks held after their turn.
 */
#include "loader/internal.h"

/* Let go of held entry `we` (gather only): its read slot, or its raw
 * buffer back to the pool the window and the mixture sources share. */
void
rf_ld_window_entry_release(rf_loader *ld, struct wentry *we)
{
	if (!we->used)
		return;
	if (we->slot >= 0 && ld->gather.sink && !ld->mix)
		rf_ld_fill_unref_later(ld, (unsigned)we->slot);
	else if (we->slot >= 0)
		rf_ld_read_slot_unref(ld, (unsigned)we->slot);
	if (we->raw) {
		if (ld->window.pool_n < ld->window.pool_cap)
			ld->window.pool[ld->window.pool_n++] = we->raw;
		else
			free(we->raw);
	}
	memset(we, 0, sizeof(*we));
	we->slot = -1;
}

void
rf_ld_window_drop_below(rf_loader *ld, uint64_t keep_from)
{
	while (ld->window.lo < ld->window.hi && ld->window.lo < keep_from)
		rf_ld_window_entry_release(ld, &ld->window.tab[ld->window.lo++ % ld->window.cap]);
	if (ld->window.lo < keep_from && ld->window.lo == ld->window.hi)
		ld->window.lo = ld->window.hi = keep_from;
}

/*
 * Fill held entry `we` with a chunk's sections (window shuffling and each
 * source of a mixture hold chunks this way).  An uncompressed chunk stays in
 * its read slot (a reference); a compressed one's raw buffer becomes the
 * entry's, and the worker takes a spare from the pool; a skipped chunk's
 * substitutes point at the zero buffer, owned by nobody.  `what` names the
 * caller in the out-of-memory message.  0 or an error.
 */
int
rf_ld_window_entry_fill(rf_loader *ld, struct wentry *we, const rf_chunk_sections *sec,
			const rf_chunk_ctx *ctx, struct worker *w, int in_slot,
			unsigned read_slot, const char *what, rf_diag *d)
{
	we->used = 1;
	we->sec = *sec;
	we->ctx = *ctx;
	we->slot = -1;
	we->raw = NULL;
	we->sums = NULL;
	if (rf_ld_skip_is_substitute(ld, sec))
		return 0;
	if (in_slot) {
		pthread_mutex_lock(&ld->mu);
		ld->slot_refs[read_slot]++;
		pthread_mutex_unlock(&ld->mu);
		we->slot = (int)read_slot;
		return 0;
	}
	uint8_t *spare = ld->window.pool_n ? ld->window.pool[--ld->window.pool_n]
					   : aligned_alloc(64, RF_ALIGN_UP(ld->window.raw_cap, 64));
	if (!spare)
		return rf_fail(d, -ENOMEM, "loader: %s: out of memory for a chunk of %" PRIu64
			       " bytes", what, ld->window.raw_cap);
	we->raw = w->dec.raw;
	w->dec.raw = spare;
	return 0;
}

/*
 * Window mode: a chunk is kept after its turn, because later items may
 * still draw from it; items are gathered, in order, as far as the chunks
 * held allow (up to the first item that needs a later read).  The plan
 * bounds the reads an item can need to keep_from + W - 1, so at most W
 * chunks are held, and the memory plan leaves the reader slots beyond them.
 * An uncompressed chunk stays in its read slot (a reference); a compressed
 * one's raw buffer is taken from the worker, which gets a spare one.
 *
 * Hold this step's chunk.  Returns 1 when the items may use it, 0 when no
 * item of the epoch needs it any more, or an error.
 */
int
rf_ld_window_hold(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		  const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
		  rf_diag *d)
{
	int rc;
	if (st->epoch != ld->gather.epoch) {
		rc = rf_ld_gather_enter_epoch(ld, st->epoch, d);
		if (rc < 0)
			return rc;
		rf_ld_window_drop_below(ld, UINT64_MAX);
		ld->window.lo = ld->window.hi = 0;
		ld->window.epoch_done = 0;
	}
	if (ld->window.epoch_done)
		return 0; /* a read no item of this epoch needs any more */
	/* Hold this chunk, unless the items have already moved past it. */
	if (st->entry < ld->window.lo)
		return 0;
	if (ld->window.hi == ld->window.lo)
		ld->window.lo = ld->window.hi = st->entry;
	if (st->entry != ld->window.hi || ld->window.hi - ld->window.lo >= ld->window.cap)
		return rf_fail(d, -EPROTO, "loader: window: read %" PRIu64 " arrived out of order "
			       "(holding %" PRIu64 "..%" PRIu64 ")", st->entry, ld->window.lo,
			       ld->window.hi);
	rc = rf_ld_window_entry_fill(ld, &ld->window.tab[st->entry % ld->window.cap], sec, ctx,
				     w, in_slot, read_slot, "window", d);
	if (rc < 0)
		return rc;
	struct wentry *we = &ld->window.tab[st->entry % ld->window.cap];
	if (ld->window.sums && we->slot >= 0)
		we->sums = rf_ld_read_slot_bytes(ld, read_slot) +
			   RF_ALIGN_UP(ld->chunks[st->chunk].stored_bytes, 64);
	ld->window.hi++;
	return 1;
}

/* The held chunk plan item `it` draws from, for the item loop: 1 with its
 * sections and context, 0 when it needs a later read (what no item needs
 * any more goes now, which keeps at most W chunks held), or an error. */
int
rf_ld_window_source(rf_loader *ld, const rf_plan_item *it, const rf_chunk_sections **sec,
		    const rf_chunk_ctx **ctx, rf_diag *d)
{
	if (it->read >= ld->window.hi) {
		rf_ld_window_drop_below(ld, it->keep_from);
		return 0;
	}
	if (it->read < ld->window.lo)
		return rf_fail(d, -EPROTO, "loader: window: an item needs read %" PRIu64
			       " which was let go (holding %" PRIu64 "..%" PRIu64 ")", it->read,
			       ld->window.lo, ld->window.hi);
	const struct wentry *src = &ld->window.tab[it->read % ld->window.cap];
	*sec = &src->sec;
	*ctx = &src->ctx;
	return 1;
}

/*
 * Window shuffling holds W decoded chunks: uncompressed ones in their read
 * slots (so the reader must keep slots beyond them: W <= read slots - 2,
 * which the memory plan has checked), compressed ones in raw buffers of
 * ordinary memory.  W, the window in force, was set by the memory plan.
 */
int
rf_ld_window_setup(rf_loader *ld, uint32_t *window)
{
	uint32_t w = ld->resolved.window;
	ld->window.on = 1;
	ld->window.cap = w + 2;
	ld->window.tab = calloc(ld->window.cap, sizeof(*ld->window.tab));
	ld->window.pool_cap = w + ld->nworkers + 1;
	ld->window.pool = calloc(ld->window.pool_cap, sizeof(*ld->window.pool));
	if (!ld->window.tab || !ld->window.pool)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint32_t i = 0; i < ld->window.cap; i++)
		ld->window.tab[i].slot = -1;
	ld->window.raw_cap = rf_dataset_max_raw_bytes(ld->ds);
	*window = w;
	return 0;
}

/*
 * Window shuffling from memory: a dataset read through the page cache
 * (buffered reads, asked for or chosen at open because it fits) is read
 * through maps of the shards, as map = 1 would: each chunk is used where it
 * lies in the page cache instead of copied into a read slot by a read call
 * (that copy was a sixth of a hot window run's CPU), and checked there as a
 * read chunk is.  Only local shards and chunks without an image step; the
 * rest keep read calls.  After choose_direct, before the memory plan.
 */
void
rf_ld_window_choose_map(rf_loader *ld)
{
	if (ld->resolved.shuffle != RF_SHUFFLE_WINDOW || ld->map.on || ld->resolved.direct ||
	    ld->image || rf_ld_has_remote(ld))
		return;
	ld->map.on = 1;
	rf_log(&ld->diag, RF_LOG_INFO, "shuffle window: chunks used where they lie in maps of "
	       "the shards (the dataset is read through the page cache)");
}

/*
 * Window shuffling from memory: when every chunk the window would hold lies
 * in a map already (rf_ld_window_choose_map), holding chunks buys nothing,
 * and the window's gather (one thread, in its turn, drawing each sample from
 * W chunks far beyond the caches) ran at half of shuffle full's rate from
 * the same maps.  The batches are then made as full shuffling makes them
 * from memory (full.c: each sample copied from the maps and checked against
 * its row of the per-sample checksums; the full thread and the consumer's
 * own thread fill batches), in the window plan's order: the same batches,
 * in the same order, as the window's gather would give, and W, part of the
 * order, unchanged.  For what full shuffling reads without a chunk: the
 * loaded fields fixed and located by the schema, every chunk stored
 * uncompressed, and per-sample checksums (format 2) when verify is on;
 * fields delivered as stored (no tokens split), and no images, mixtures or
 * on_error skip.  The rest keeps the window.
 * RINGFEED_WINDOW_HOLD=1 keeps the window (tests compare the two).  After
 * rf_ld_window_choose_map, before the order.
 */
void
rf_ld_window_choose_mem(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	const char *e = getenv("RINGFEED_WINDOW_HOLD");
	if (ld->resolved.shuffle != RF_SHUFFLE_WINDOW || !ld->map.on || ld->mix || ld->image ||
	    ld->cfg.tokens != RF_TOKENS_STORED || ld->cfg.on_error == RF_ON_ERROR_SKIP ||
	    (e && strcmp(e, "1") == 0))
		return;
	if (rf_ld_full_refusal(ld, sel, nsel, NULL, 0) < 0)
		return; /* what full shuffling could not read */
	ld->full.on = 1;
	ld->full.mem = 1;
	ld->full.window = 1;
	ld->map.on = 0; /* the full thread maps the shards itself */
	rf_log(&ld->diag, RF_LOG_INFO, "shuffle window from memory: the window's order, each "
	       "sample copied from the mapped shards and checked against its own checksums");
}

/*
 * Window shuffling from maps, checked sample by sample: with verify on, a
 * chunk's XXH3 is one more pass over every byte the window holds, read from
 * memory a second time, since the gather draws the chunk's samples long
 * after it was checked.  When every shard holds per-sample checksums
 * (format 2 and up) and every part of the batch is a fixed field copied as
 * stored, the gather instead hashes each sample's values in the batch right
 * after copying them, while they are in the cache, and compares them with
 * the sample's row of its chunk's table (in the map beside the chunk).
 * Every delivered byte is checked, once per delivery, before its batch is
 * staged; a chunk's structure is still checked as it is read.  The rest
 * keeps the chunk checksums.  After the memory plan (it needs the layout),
 * before the workers start.
 *
 * Only for samples of at least WINDOW_SUMS_MIN_BYTES: a hash call and a row
 * fetched per sample cost more than the chunk's share of a pass over its
 * bytes for small ones (loader CPU a sample, perf, 3 alternating pairs
 * each: 784 + 8 bytes +37 %; 4,096 + 8 bytes -15 %; 150 KiB + 8 bytes
 * -22 %).
 */
#define WINDOW_SUMS_MIN_BYTES 4096u

void
rf_ld_window_choose_sums(rf_loader *ld)
{
	ld->window.sums = 0;
	if (!ld->window.on || ld->mix || !ld->map.on || !ld->cfg.verify || ld->image ||
	    ld->skip.on)
		return; /* (on_error skip decides per chunk, as it is read) */
	uint64_t bytes = 0;
	for (uint32_t q = 0; q < ld->layout.nparts; q++) {
		const rf_batch_part *p = &ld->layout.part[q];
		if (p->kind != RF_PART_COPY || p->var)
			return;
		bytes += p->value_bytes;
	}
	if (bytes < WINDOW_SUMS_MIN_BYTES)
		return;
	for (size_t i = 0; i < rf_dataset_shards(ld->ds); i++) {
		rf_shard_info si;
		if (rf_dataset_shard_info(ld->ds, i, &si) < 0 || si.version < 2)
			return;
	}
	/* Every chunk stored as is, its table inside its shard's file. */
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		rf_shard_info si;
		if (ci->codec != RF_CODEC_NONE || rf_dataset_shard_info(ld->ds, ci->shard, &si) < 0 ||
		    rf_fmt_sums_offset(ci->offset, ci->stored_bytes) +
				    rf_fmt_sums_bytes(ci->samples, ld->schema->nfields) >
			    si.file_size)
			return;
	}
	ld->window.sums = 1;
	rf_log(&ld->diag, RF_LOG_INFO, "shuffle window: each sample checked against its "
	       "per-sample checksums as it is gathered (not each chunk as it is read)");
}
