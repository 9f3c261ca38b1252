/* SPDX-License-Identifier: MIT */
/*
 * Batches handed out in place (rf_config.inplace): on the host device, a
 * batch whose samples lie consecutive in one uncompressed chunk of a mapped
 * shard is its fields' rows where they are in the map, with no copy.
 *
 * A chunk is columnar (docs/format.md): each field's values of the chunk
 * are one contiguous section, so rows [i, i + k) of every fixed field are
 * already the [k, *shape] array the consumer wants.  The batch is a
 * pointer per field into the chunk's bytes in the map.
 *
 * Why it is safe:
 *  - Verified bytes.  Such a batch is made at its chunk's turn to gather,
 *    after the decode worker has checked the whole chunk's XXH3-64 (once
 *    per read of the chunk: each epoch reads it again, and checks it
 *    again), so no batch of a chunk that fails is ever staged.
 *  - Read-only.  The maps are PROT_READ and shared with the page cache: a
 *    write faults rather than changing the file's cached pages, so the
 *    batch says so (RF_BATCH_READONLY) and the Python module exports it
 *    read-only; nothing in the loader writes into a delivered batch (the
 *    batch has no variable field, whose host offsets would be the only
 *    thing written next to it).
 *  - Lifetime.  The batch holds a reference to its chunk's read slot (a
 *    direct batch: rf_ld_staged_done drops it when the batch is released),
 *    which keeps the reader from running further ahead than with copies,
 *    and the maps stay until the loader is freed.
 *  - Memory.  It takes a place in the staging count like any batch, so the
 *    staged queue and the slots lent to the consumer stay bounded as
 *    before; it uses none of the ring's bytes.
 */
#include "loader/internal.h"

/* The most staged batches in place beyond n_stage (a chunk's worth). */
#define INPLACE_STAGE_MORE 256u

/* The fields the batch delivers are all fixed and as stored. */
static int
layout_as_stored(const rf_loader *ld)
{
	for (uint32_t i = 0; i < ld->layout.nparts; i++) {
		const rf_batch_part *p = &ld->layout.part[i];
		if (p->kind != RF_PART_COPY || p->var)
			return 0;
	}
	return ld->layout.nparts > 0;
}

/* Settings that allow batches in place whatever the device and I/O. */
static int
inplace_settings(const rf_loader *ld)
{
	return ld->cfg.inplace == RF_INPLACE_ON && !ld->full.on && !ld->mix &&
	       !ld->image && ld->cfg.tokens == RF_TOKENS_STORED &&
	       (ld->resolved.shuffle == RF_SHUFFLE_NONE || ld->resolved.shuffle == RF_SHUFFLE_CHUNKS);
}

/* Whether batches may go out in place (after the memory plan, which says
 * whether the ring lends its slots). */
void
rf_ld_inplace_setup(rf_loader *ld)
{
	int raw = 0; /* some chunk is stored uncompressed */
	for (uint64_t c = 0; c < ld->nchunks && !raw; c++)
		raw = ld->chunks[c].codec == RF_CODEC_NONE;
	ld->gather.inplace_ok = ld->map.on && ld->mem.in_place && inplace_settings(ld) &&
				layout_as_stored(ld) && raw;
	/*
	 * A batch in place holds no staging memory, only a reference to its
	 * chunk's read slot, so batches in place are counted apart from the
	 * copied ones (which n_stage bounds, a ring slot each), up to a
	 * chunk's batches: the worker stages all of a chunk's batches at its
	 * turn and checks the next chunk while the consumer takes them (besides
	 * the depth of them the consumer may hold), where
	 * it otherwise stopped at n_stage and left the consumer waiting for a
	 * whole chunk's XXH3 at every chunk (784-byte samples, 4 MiB chunks:
	 * 21 batches of 256 a chunk, 18 staging places).
	 */
	uint64_t most = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		if (ld->chunks[c].samples > most)
			most = ld->chunks[c].samples;
	uint64_t per = most / (ld->cfg.batch_size ? ld->cfg.batch_size : 1) + 2;
	if (per > INPLACE_STAGE_MORE)
		per = INPLACE_STAGE_MORE;
	/* The count includes the batches lent to the consumer, up to depth of
	 * them, which only it gives back: beyond those, a chunk's batches. */
	per += ld->resolved.depth;
	ld->gather.inplace_stage = ld->gather.inplace_ok ? (unsigned)per : 0;
}

/*
 * The plan batch of k samples at rows [i, i + k) of this step's chunk
 * (sec, in read slot `slot`, uncompressed and checked), handed out in
 * place (the turn holder only).  Returns 0 when staged, 1 when a field's
 * rows are not aligned to its element type (the caller gathers it; the
 * format's 64-byte sections and whole rows make that a guard only), or
 * -ECANCELED when the pipeline stops.
 */
int
rf_ld_inplace_push(rf_loader *ld, uint64_t epoch, const rf_chunk_sections *sec, unsigned slot,
		   uint32_t i, uint32_t k, uint64_t pos)
{
	struct staged s = {.kind = SK_BATCH, .direct = 1, .inplace = 1};
	uint64_t bytes = 0;
	for (uint32_t f = 0; f < ld->layout.nparts; f++) {
		const rf_batch_part *p = &ld->layout.part[f];
		const uint8_t *at = sec->field[p->field].data + (uint64_t)i * p->value_bytes;
		if ((uintptr_t)at % rf_dtype_size(ld->schema->fields[p->field].dtype))
			return 1;
		s.at[f] = at;
		bytes += (uint64_t)k * p->value_bytes;
	}
	s.slot = slot;
	s.n = k;
	s.epoch = epoch;
	s.first = pos;
	s.plan_done = ++ld->gather.done; /* a whole plan batch */
	s.copy_bytes = bytes;
	s.payload = bytes;
	pthread_mutex_lock(&ld->mu);
	while (!ld->stop && !ld->failed && ld->inplace_held >= ld->gather.inplace_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	ld->stage_held++;
	ld->inplace_held++;
	ld->slot_refs[slot]++;
	s.index = ld->gather.batch_counter++;
	rf_ld_stage_batch_unlock(ld, &s);
	return 0;
}
