/* SPDX-License-Identifier: MIT */
/*
 * The gather: plan items into batches in staging slots, and direct
 * batches copied from a raw read slot.
 */
#include "loader/internal.h"

#include <assert.h>

/* ------------------------------------------------------------ the gather */

/* Take a staging slot for a new batch (the turn holder only).  Returns 0 or
 * -ECANCELED when the pipeline stops. */
int
rf_ld_gather_open_batch(rf_loader *ld, uint64_t epoch, uint64_t first)
{
	pthread_mutex_lock(&ld->mu);
	while (!ld->stop && !ld->failed && ld->stage_held >= ld->mem.n_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	unsigned slot;
	int rc = rf_ring_acquire(ld->ring, &slot, 0);
	if (rc == 0) {
		ld->stage_held++;
		rf_ld_note_max(&ld->stats.max_slots, rf_ld_ring_used(ld));
	}
	pthread_mutex_unlock(&ld->mu);
	if (rc < 0)
		return rc;
	ld->gather.cur_slot = (int)slot;
	ld->gather.cur_epoch = epoch;
	ld->gather.cur_first = first;
	ld->gather.cur_subst = ld->gather.cur_subst_chunks = 0;
	rf_assembly_begin(&ld->gather.asmb, &ld->layout, rf_ring_slot(ld->ring, slot));
	return 0;
}

void
rf_ld_gather_drop_batch(rf_loader *ld)
{
	if (ld->gather.cur_slot < 0)
		return;
	rf_ring_release(ld->ring, (unsigned)ld->gather.cur_slot);
	ld->gather.cur_slot = -1;
	pthread_mutex_lock(&ld->mu);
	ld->stage_held--;
	pthread_cond_signal(&ld->stage_cv);
	pthread_mutex_unlock(&ld->mu);
}

void
rf_ld_gather_push_batch(rf_loader *ld)
{
	struct staged s = {.kind = SK_BATCH};
	s.slot = (unsigned)ld->gather.cur_slot;
	s.n = ld->gather.asmb.n;
	s.epoch = ld->gather.cur_epoch;
	s.first = ld->gather.cur_first;
	s.plan_done = ld->gather.done;
	/* Closed early: the rest of the plan batch comes in the next one. */
	s.plan_part = ld->gather.i < ld->gather.n ? ld->gather.i : 0;
	s.copy_bytes = rf_assembly_bytes(&ld->gather.asmb);
	s.payload = rf_assembly_payload(&ld->gather.asmb);
	memcpy(s.used, ld->gather.asmb.used, sizeof(s.used));
	s.subst = ld->gather.cur_subst;
	s.subst_chunks = ld->gather.cur_subst_chunks;
	pthread_mutex_lock(&ld->mu);
	if (ld->failed || ld->stop) {
		pthread_mutex_unlock(&ld->mu);
		rf_ld_gather_drop_batch(ld);
		return;
	}
	s.index = ld->gather.batch_counter++;
	rf_ld_stage_batch_unlock(ld, &s);
	ld->gather.cur_slot = -1;
}

/*
 * A batch that lies inside one raw chunk of a single fixed field is already
 * laid out in the read slot exactly as the device wants it ([k, *shape],
 * contiguous): it is copied from there, with no gather.  The read slot stays
 * held until that copy has completed (a reference per batch).  It takes a
 * place in the staging count like a gathered batch, so the staged queue and
 * the copy stage stay bounded the same way.
 */
static int
push_direct(rf_loader *ld, uint64_t epoch, const rf_chunk_sections *sec, unsigned slot,
	    uint32_t i, uint32_t k, uint64_t pos)
{
	const rf_batch_part *p = &ld->layout.part[0];
	const uint8_t *base = rf_ring_slot(ld->ring, slot);
	struct staged s = {.kind = SK_BATCH, .direct = 1};
	s.slot = slot;
	s.src_off = (uint64_t)(sec->field[p->field].data - base) + (uint64_t)i * p->value_bytes;
	s.n = k;
	s.epoch = epoch;
	s.first = pos;
	s.plan_done = ++ld->gather.done; /* a direct batch is a whole plan batch */
	s.copy_bytes = (uint64_t)k * p->value_bytes;
	s.payload = s.copy_bytes;
	pthread_mutex_lock(&ld->mu);
	while (!ld->stop && !ld->failed && ld->stage_held >= ld->mem.n_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	ld->stage_held++;
	ld->slot_refs[slot]++;
	s.index = ld->gather.batch_counter++;
	rf_ld_stage_batch_unlock(ld, &s);
	return 0;
}

/* A variable field's region is full before its plan batch is.  With one
 * rank the batch closes early and the rest of the plan batch makes the next
 * one; with several, that would give this rank one batch more than the
 * others, which then wait for it at the epoch's end (a distributed job
 * hangs), so it is an error that says what to set. */
int
rf_ld_early_close_error(rf_loader *ld, rf_diag *d, uint32_t part, uint64_t need)
{
	const rf_batch_part *p = &ld->layout.part[part];
	return rf_fail(d, RF_EMEMPLAN,
		       "rank %u of %u: batch %" PRIu64 " of epoch %" PRIu64 " needs more than the %"
		       PRIu64 " bytes a batch has for field %s (at least %" PRIu64 "); closing it "
		       "early would give this rank one batch more than the other ranks: raise "
		       "var_bytes (twice that need leaves room)",
		       ld->resolved.rank, ld->resolved.world, ld->gather.done, ld->gather.epoch, p->cap,
		       ld->schema->fields[p->field].name, need);
}

/* Move the gather to `epoch` (the turn holder only): the previous epoch's
 * items are used up once a read of the next one has its turn. */
int
rf_ld_gather_enter_epoch(rf_loader *ld, uint64_t epoch, rf_diag *d)
{
	int rc = rf_plan_set_epoch(ld->gather.plan, epoch);
	if (rc < 0)
		return rf_fail(d, rc, "loader: the plan of epoch %" PRIu64 " failed: %s", epoch,
			       rf_plan_errmsg(ld->gather.plan));
	ld->gather.epoch = epoch;
	ld->gather.n = ld->gather.i = 0;
	ld->gather.done = 0;
	return 0;
}

/* Take the plan's next batch of items into ld->gather.items; *n = 0 at the end of
 * the epoch. */
int
rf_ld_gather_refill(rf_loader *ld, uint32_t *n, rf_diag *d)
{
	*n = 0;
	int rc = rf_plan_next_batch(ld->gather.plan, ld->gather.items, ld->layout.batch, n);
	if (rc < 0)
		return rf_fail(d, rc, "loader: the plan's next batch failed: %s",
			       rf_plan_errmsg(ld->gather.plan));
	ld->gather.n = *n;
	ld->gather.i = 0;
	if (ld->gather.skip && *n) {
		/* The first batch after a resume inside a plan batch: its
		 * first gather.skip samples were handed out before the save. */
		if (ld->gather.skip >= *n)
			return rf_fail(d, RF_ESTATE, "loader: resume: %u samples into a batch "
				       "of %u", ld->gather.skip, *n);
		ld->gather.i = ld->gather.skip;
		ld->gather.skip = 0;
	}
	return 0;
}

/*
 * The one item loop, shared by the plain gather and the window's (the turn
 * holder only): the plan's items, in order, as far as the chunks at hand
 * allow.  Without a window the chunk at hand is this step's (sec, ctx);
 * with one, the chunks held (rf_ld_window_source).  A run of consecutive
 * samples of one chunk is added at once; a plan batch whose items all lie
 * back to back in this step's raw chunk goes direct when `direct` allows.
 * Returns 0 when the next item needs a later read, 1 at the end of the
 * epoch's items, or an error.
 */
static int
gather_items(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *cur_sec,
	     const rf_chunk_ctx *cur_ctx, int direct, unsigned read_slot, rf_diag *d)
{
	int rc;
	for (;;) {
		if (ld->gather.i >= ld->gather.n) {
			uint32_t n;
			rc = rf_ld_gather_refill(ld, &n, d);
			if (rc < 0)
				return rc;
			if (n == 0)
				return 1; /* this epoch's batches are all out */
		}
		const rf_plan_item *it = &ld->gather.items[ld->gather.i];
		const rf_chunk_sections *sec = cur_sec;
		const rf_chunk_ctx *ctx = cur_ctx;
		if (ld->window.on) {
			rc = rf_ld_window_source(ld, it, &sec, &ctx, d);
			if (rc <= 0)
				return rc;
		} else if (it->read != st->entry) {
			return 0; /* the next item comes from a later read */
		}
		/* A run: items of this read at consecutive offsets. */
		uint32_t r = 1;
		while (ld->gather.i + r < ld->gather.n && it[r].read == it->read &&
		       it[r].offset == it->offset + r)
			r++;
		if (it->offset + (uint64_t)r > sec->samples)
			return rf_fail(d, RF_ECORRUPT, "%s: chunk %" PRIu64 " has %u samples, the plan "
				       "asks for sample %u", ctx->path, ctx->chunk, sec->samples,
				       it->offset + r - 1);
		assert(rf_ld_image_taken(st, it->offset, r));
		int whole = direct && ld->gather.cur_slot < 0 && ld->gather.i == 0 &&
			    r == ld->gather.n;
		if (whole && ld->gather.inplace_ok) {
			/* Where it lies in the map, unless a field is not
			 * aligned there (inplace.c); then gathered. */
			rc = rf_ld_inplace_push(ld, st->epoch, sec, read_slot, it->offset, r, it->pos);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				ld->gather.i += r;
				continue;
			}
		} else if (whole &&
		    (!ld->mem.in_place ||
		     (uintptr_t)(sec->field[ld->layout.part[0].field].data +
				 (uint64_t)it->offset * ld->layout.part[0].value_bytes) %
				     RF_BATCH_ALIGN == 0)) {
			/* In-place delivery hands the batch out where it lies:
			 * only where that keeps the promised alignment. */
			rc = push_direct(ld, st->epoch, sec, read_slot, it->offset, r, it->pos);
			if (rc < 0)
				return rc;
			ld->gather.i += r;
			continue;
		}
		if (ld->gather.cur_slot < 0) {
			rc = rf_ld_gather_open_batch(ld, st->epoch, it->pos);
			if (rc < 0)
				return rc;
		}
		uint32_t added = 0, part = 0;
		uint64_t need = 0;
		rc = rf_assembly_add(&ld->gather.asmb, sec, it->offset, it->offset + r, &added, &need,
				     &part);
		if (rc == -E2BIG) {
			const rf_batch_part *p = &ld->layout.part[part];
			return rf_fail(d, RF_EMEMPLAN,
				       "%s: chunk %" PRIu64 " at offset %" PRIu64 ": sample %" PRIu64
				       " has %" PRIu64 " bytes of field %s, more than the %" PRIu64
				       " bytes a batch holds for it: set var_bytes to at least %" PRIu64,
				       ctx->path, ctx->chunk, ctx->offset, it->sample, need,
				       ld->schema->fields[p->field].name, p->cap,
				       RF_ALIGN_UP(need, RF_BATCH_ALIGN));
		}
		if (rc < 0)
			return rf_fail(d, rc, "loader: assembling chunk %" PRIu64 " failed", ctx->chunk);
		if (added && rf_ld_skip_is_substitute(ld, sec))
			rf_ld_skip_gathered(ld, it->chunk, added);
		/* What the window may let go of once these items are in. */
		uint64_t keep_from = it[added ? added - 1 : 0].keep_from;
		ld->gather.i += added;
		/* The plan batch is complete, or a variable field's region is
		 * full: close this batch (early, in the second case; the rest of
		 * the plan batch starts the next one). */
		if (added == 0 && ld->resolved.world > 1)
			return rf_ld_early_close_error(ld, d, part, need);
		if (ld->gather.i >= ld->gather.n || added == 0) {
			if (ld->gather.i >= ld->gather.n)
				ld->gather.done++;
			rf_ld_gather_push_batch(ld);
		}
		if (ld->window.on && added)
			rf_ld_window_drop_below(ld, keep_from);
	}
}

/* Gather the plan items that come from this step's chunk into batches, in
 * order (the turn holder only). */
int
rf_ld_gather_step(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		  const rf_chunk_ctx *ctx, int direct, unsigned read_slot, rf_diag *d)
{
	if (st->epoch != ld->gather.epoch) {
		/* Every item of the previous epoch named one of its reads, all
		 * gathered before this one: its items are used up. */
		int rc = rf_ld_gather_enter_epoch(ld, st->epoch, d);
		if (rc < 0)
			return rc;
	}
	int rc = gather_items(ld, st, sec, ctx, direct, read_slot, d);
	return rc < 0 ? rc : 0;
}

/* Window shuffling: hold this step's chunk (rf_ld_window_hold), then the
 * same item loop over the chunks held. */
int
rf_ld_gather_step_window(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
			 const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
			 rf_diag *d)
{
	if (ld->mix)
		return rf_ld_mix_gather_step(ld, st, sec, ctx, w, in_slot, read_slot, d);
	int rc = rf_ld_window_hold(ld, st, sec, ctx, w, in_slot, read_slot, d);
	if (rc <= 0)
		return rc;
	rc = gather_items(ld, st, NULL, NULL, 0, read_slot, d);
	if (rc == 1) {
		rf_ld_window_drop_below(ld, UINT64_MAX);
		ld->window.epoch_done = 1;
		return 0;
	}
	return rc;
}
