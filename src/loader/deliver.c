/* SPDX-License-Identifier: MIT */
/*
 * Delivery: describing a batch for the consumer, handing staged batches
 * on, and the host device's in-place delivery (a batch lent in its ring
 * slot, or one that lies where it is in a shard's map: inplace.c).
 */
#include "loader/internal.h"

/* ------------------------------------------------------- the copy stage */

static void
fill_batch(rf_loader *ld, struct dbuf *b, const struct staged *s)
{
	const rf_batch_layout *l = &ld->layout;
	uint8_t *base = b->dptr;
	uint32_t v = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		const rf_batch_part *p = &l->part[i];
		const rf_field *f = &ld->schema->fields[p->field];
		rf_batch_field *bf = &b->fields[i];
		bf->name = f->name;
		bf->dtype = f->dtype;
		bf->ndim = 1 + f->rank;
		bf->shape[0] = s->n;
		for (uint32_t k = 0; k < f->rank; k++)
			bf->shape[1 + k] = (int64_t)f->shape[k];
		bf->var_dim = f->var_dim;
		if (p->kind == RF_PART_IMAGE) {
			/* rf_config.images: uint8 [n, H, W, C] (image.c). */
			rf_ld_image_describe(ld, i, bf);
		} else if (p->kind != RF_PART_COPY) {
			/* rf_config.tokens: int32 [n, T] from [n, T + 1]. */
			bf->name = p->kind == RF_PART_INPUTS ? "inputs" : "targets";
			bf->dtype = RF_DTYPE_I32;
			bf->shape[1] = (int64_t)(p->value_bytes / 4);
		}
		if (p->var) {
			bf->shape[1 + f->var_dim] = 0;
			bf->data = base + p->data_off;
			bf->bytes = s->used[i];
			bf->offsets = (int64_t *)(void *)(base + p->off);
			bf->host_offsets = b->host_off + (uint64_t)v * (l->batch + 1);
			v++;
		} else {
			bf->data = base + p->off;
			bf->bytes = (uint64_t)s->n * p->value_bytes;
			bf->offsets = NULL;
			bf->host_offsets = NULL;
		}
	}
	b->plan_done = s->plan_done;
	b->plan_part = s->plan_part;
	b->subst = s->subst;
	b->subst_chunks = s->subst_chunks;
	b->pub.index = s->index;
	b->pub.epoch = s->epoch;
	b->pub.first_sample = s->first;
	b->pub.samples = s->n;
	b->pub.nfields = l->nparts;
	b->pub.fields = b->fields;
	b->pub.data = b->dptr;
	b->pub.bytes = s->payload;
	b->pub.ready_event = b->copy_event;
	b->pub.flags = 0;
	if (s->inplace) {
		/* Each field where it lies in the map (inplace.c): apart, and
		 * read-only.  No variable field: nothing is written beside it. */
		for (uint32_t i = 0; i < l->nparts; i++)
			b->fields[i].data = (void *)(uintptr_t)s->at[i];
		b->pub.flags = RF_BATCH_READONLY;
	}
}

/* Describe a batch whose bytes are in place in b->dptr.  The offsets go to
 * host memory too, for the consumer: the slot is read after the copy, so
 * nothing races with it. */
void
rf_ld_describe_batch(rf_loader *ld, struct dbuf *b, const struct staged *s)
{
	const uint8_t *src = (const uint8_t *)rf_ring_slot(ld->ring, s->slot) + s->src_off;
	const rf_batch_layout *l = &ld->layout;
	uint32_t v = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		if (!l->part[i].var)
			continue;
		memcpy(b->host_off + (uint64_t)v * (l->batch + 1), src + l->part[i].off,
		       ((uint64_t)s->n + 1) * 8);
		v++;
	}
	fill_batch(ld, b, s);
}

/* The staging slot of a batch goes back to the ring; a direct batch drops
 * its reference to the read slot instead. */
void
rf_ld_staged_done(rf_loader *ld, const struct staged *s)
{
	if (s->direct)
		rf_ld_read_slot_unref(ld, s->slot);
	else
		rf_ring_release(ld->ring, s->slot);
}

/* Wake the producers of staged batches (gather, full reads) once enough
 * staging places are free (mu held).  Not at every batch: they then fill
 * several places in one go, one wake-up for several batches.  Every place
 * still taken belongs to a batch on its way or to a device buffer the
 * consumer will release, so the count always gets there.  In zero-copy, up
 * to depth places belong to device buffers: the mark is half of the rest. */
void
rf_ld_stage_freed_locked(rf_loader *ld)
{
	unsigned spare = ld->mem.n_stage - (ld->mem.in_place ? ld->resolved.depth : 0);
	unsigned mark = ld->mem.n_stage - (spare / 2 > 0 ? spare / 2 : 1);
	if (rf_ld_copied_held(ld) <= mark ||
	    (ld->gather.inplace_stage && ld->inplace_held <= ld->gather.inplace_stage / 2))
		rf_ld_wake_locked(ld, WAKE_STAGE);
}

/* Zero-copy: give a released batch's slot back to the ring (mu held, the
 * consumer's work recorded at release is done).  Drops mu meanwhile.  With
 * defer, the wake-ups from here on wait for the caller's rf_ld_unlock_wake. */
void
rf_ld_zc_recycle_locked(rf_loader *ld, struct dbuf *b, int defer)
{
	struct staged src = b->src;
	b->zc_src = 0;
	if (src.direct) {
		/* A read slot's or the map's: its reference goes under mu. */
		rf_ld_read_slot_unref_locked(ld, src.slot);
	} else {
		pthread_mutex_unlock(&ld->mu);
		rf_ld_staged_done(ld, &src);
		pthread_mutex_lock(&ld->mu);
	}
	ld->wake_defer = defer;
	ld->stage_held--;
	if (src.inplace)
		ld->inplace_held--;
	ld->delivery.lent--;
	rf_ld_stage_freed_locked(ld);
}

/*
 * Hand a staged batch on (mu held).  Zero-copy has nothing to copy: when no
 * batch or marker is ahead of it and a device buffer is free, the batch is
 * ready at once, without a trip through the copy thread (a wake-up and a
 * context switch per batch saved).  Otherwise it queues for the copy thread.
 */
static int
zc_ready_locked(rf_loader *ld, const struct staged *s)
{
	for (uint32_t i = 0; i < ld->resolved.depth; i++) {
		struct dbuf *b = &ld->delivery.dbufs[i];
		if (b->state != DB_FREE)
			continue;
		if (s->inplace) {
			/* The map's bytes: the first field's, read-only. */
			b->dptr = (void *)(uintptr_t)s->at[0];
			fill_batch(ld, b, s);
		} else {
			b->dptr = (uint8_t *)rf_ring_slot(ld->ring, s->slot) + s->src_off;
			rf_ld_describe_batch(ld, b, s);
		}
		b->zc_src = 1;
		b->src = *s;
		ld->delivery.lent++;
		b->state = DB_READY;
		ld->delivery.rq[(ld->delivery.rq_head + ld->delivery.rq_len) % ld->resolved.depth] = i;
		ld->delivery.rq_len++;
		rf_ld_note_max(&ld->stats.max_ready, ld->delivery.rq_len);
		rf_ld_wake_locked(ld, WAKE_CONS);
		return 1;
	}
	return 0;
}

void
rf_ld_stage_batch_locked(rf_loader *ld, const struct staged *s)
{
	if (ld->mem.in_place && ld->sq_len == 0 && !ld->copy_failed && zc_ready_locked(ld, s))
		return;
	rf_ld_sq_push_locked(ld, s);
}

/* rf_ld_stage_batch_locked, then drop mu and wake whom it made ready. */
void
rf_ld_stage_batch_unlock(rf_loader *ld, const struct staged *s)
{
	ld->wake_defer = 1;
	rf_ld_stage_batch_locked(ld, s);
	rf_ld_unlock_wake(ld);
}

/* Zero-copy: staged batches waiting for a free buffer become ready as soon
 * as one is free, in the consumer's thread (release, next), so the batch
 * after a released one does not wait for the copy thread to wake up.  Only
 * batches at the head of the queue, none being issued by the copy thread;
 * markers stay the copy thread's. */
void
rf_ld_zc_promote_locked(rf_loader *ld)
{
	while (ld->mem.in_place && ld->sq_len > 0 && ld->sq_issued == 0 && !ld->copy_failed &&
	       ld->sq[ld->sq_head].kind == SK_BATCH && zc_ready_locked(ld, &ld->sq[ld->sq_head])) {
		ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
		ld->sq_len--;
	}
}

/* Zero copy, the copy thread's part (mu held, dropped while waiting): wait
 * for the stream work recorded when each released buffer was released,
 * give its slot back and free it, then hand staged batches to free
 * buffers.  Returns 1 when it freed a buffer. */
int
rf_ld_zc_reclaim_locked(rf_loader *ld)
{
	int freed = 0;
	for (uint32_t i = 0; i < ld->resolved.depth; i++) {
		struct dbuf *b = &ld->delivery.dbufs[i];
		if (b->state != DB_RELEASED)
			continue;
		/* Only this thread moves a buffer out of DB_RELEASED. */
		pthread_mutex_unlock(&ld->mu);
		int rc = ld->dev->ops->event_sync(ld->dev, b->rel_event);
		pthread_mutex_lock(&ld->mu);
		if (rc < 0) {
			/* Never reuse memory the consumer's work may still
			 * read: the buffer and its slot stay out of use until a
			 * reset, and the stream ends with the error. */
			rf_fail(&ld->copy_diag, rc, "loader: waiting for a released batch failed: %s",
				ld->dev_diag.msg);
			b->state = DB_COPYING;
			b->zc_src = 0;
			ld->copy_failed = 1;
			rf_ld_fail_locked(ld, rc, ld->copy_diag.msg);
			if (!ld->delivery.final_code) {
				ld->delivery.final_code = rc;
				snprintf(ld->delivery.final_msg, sizeof(ld->delivery.final_msg), "%s",
					 ld->copy_diag.msg);
			}
			pthread_cond_broadcast(&ld->cons_cv);
			continue;
		}
		b->state = DB_FREE;
		if (b->zc_src)
			rf_ld_zc_recycle_locked(ld, b, 0);
		freed = 1;
	}
	rf_ld_zc_promote_locked(ld);
	return freed;
}

/* A free device buffer (mu held): free first, else one the consumer has
 * released (its event may still be pending); -1 when none. */
int
rf_ld_pick_dbuf_locked(rf_loader *ld)
{
	for (uint32_t i = 0; i < ld->resolved.depth; i++)
		if (ld->delivery.dbufs[i].state == DB_FREE)
			return (int)i;
	for (uint32_t i = 0; i < ld->resolved.depth; i++)
		if (ld->delivery.dbufs[i].state == DB_RELEASED)
			return (int)i;
	return -1;
}
