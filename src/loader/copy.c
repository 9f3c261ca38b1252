/* SPDX-License-Identifier: MIT */
/*
 * The copy stage: transient pinning and the copy thread, one async copy
 * per staged batch into a device buffer.
 */
#include "loader/internal.h"

/*
 * Transient pinning.  A staging slot holds one batch: it is pinned for that
 * batch's copy alone.  A read slot can hold several direct batches whose
 * copies are in flight together: it is pinned whole on the first and
 * unpinned when the last has completed (copy.pin_refs counts them; copy thread
 * only).
 */
static int
pin_for_copy(rf_loader *ld, const struct staged *s)
{
	if (ld->cfg.pinning != RF_PINNING_TRANSIENT)
		return 0;
	if (s->direct && ld->copy.pin_refs[s->slot]++ > 0)
		return 0;
	int rc = rf_ring_pin(ld->ring, s->slot,
			     s->direct ? rf_ring_slot_bytes(ld->ring, s->slot) : s->src_off + s->copy_bytes);
	if (rc < 0) {
		if (s->direct)
			ld->copy.pin_refs[s->slot]--;
		return rf_fail(&ld->copy_diag, rc, "loader: pinning slot %u (%" PRIu64 " bytes) "
			       "failed: %s", s->slot, s->copy_bytes,
			       *ld->ring_diag.msg ? ld->ring_diag.msg : ld->dev_diag.msg);
	}
	return 0;
}

static int
unpin_after_copy(rf_loader *ld, const struct staged *s)
{
	if (ld->cfg.pinning != RF_PINNING_TRANSIENT)
		return 0;
	if (s->direct && --ld->copy.pin_refs[s->slot] > 0)
		return 0;
	int rc = rf_ring_unpin(ld->ring, s->slot);
	if (rc < 0)
		return rf_fail(&ld->copy_diag, rc, "loader: unpinning slot %u failed: %s", s->slot,
			       *ld->ring_diag.msg ? ld->ring_diag.msg : ld->dev_diag.msg);
	return 0;
}

/* Enqueue one staged batch's copy into device buffer `b` and record its
 * event; does not wait.  On failure nothing is left reading the source. */
static int
copy_issue(rf_loader *ld, struct dbuf *b, struct staged *s)
{
	const struct rf_device_ops *ops = ld->dev->ops;
	uint8_t *src = (uint8_t *)rf_ring_slot(ld->ring, s->slot) + s->src_off;
	int rc = pin_for_copy(ld, s);
	if (rc < 0)
		return rc;
	s->t_issue = rf_ld_now_ns();
	rc = ops->copy_h2d_async(ld->dev, b->dptr, src, s->copy_bytes, ld->copy.stream);
	if (rc == 0)
		rc = ops->event_record(ld->dev, b->copy_event, ld->copy.stream);
	if (rc < 0) {
		ops->stream_sync(ld->dev, ld->copy.stream); /* nothing may still read src */
		rf_fail(&ld->copy_diag, rc, "loader: copying batch %" PRIu64 " to the device failed: %s",
			s->index, ld->dev_diag.msg);
		unpin_after_copy(ld, s);
	}
	return rc;
}

/* Wait for an issued copy to complete, then unpin (transient) and describe
 * the batch.  The caller returns the slot. */
static int
copy_complete(rf_loader *ld, struct dbuf *b, const struct staged *s)
{
	const struct rf_device_ops *ops = ld->dev->ops;
	int rc = ops->event_sync(ld->dev, b->copy_event);
	atomic_fetch_add_explicit(&ld->stats.copy_ns, rf_ld_now_ns() - s->t_issue, memory_order_relaxed);
	if (rc < 0) {
		ops->stream_sync(ld->dev, ld->copy.stream);
		rf_fail(&ld->copy_diag, rc, "loader: copying batch %" PRIu64 " to the device failed: %s",
			s->index, ld->dev_diag.msg);
	}
	int urc = unpin_after_copy(ld, s);
	if (rc == 0)
		rc = urc;
	if (rc == 0)
		rf_ld_describe_batch(ld, b, s);
	return rc;
}

/*
 * The copy stage.  Staged batches are issued in order onto the copy stream
 * as soon as a device buffer is free, so the copy engine goes from one batch
 * to the next without waiting for this thread; completions are taken in the
 * same order.  The staged queue's first `sq_issued` entries are the copies in
 * flight.  Issuing comes first: keeping the stream fed matters more than
 * noticing a completion a little earlier.
 */
void *
rf_ld_copy_main(void *arg)
{
	rf_loader *ld = arg;
	const struct rf_device_ops *ops = ld->dev->ops;

	pthread_mutex_lock(&ld->mu);
	for (;;) {
		if (ld->stop)
			break;
		/* Zero copy has nothing to issue: a released buffer whose
		 * stream work was still pending at release (rf_loader_release
		 * handles the others) gives its slot back once that work is
		 * done, and free buffers take the staged batches. */
		if (ld->mem.in_place && rf_ld_zc_reclaim_locked(ld))
			continue;
		/* A marker reaches the consumer once every batch before it is
		 * ready. */
		if (ld->sq_len > 0 && ld->sq_issued == 0 && ld->sq[ld->sq_head].kind != SK_BATCH) {
			struct staged m = ld->sq[ld->sq_head];
			ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
			ld->sq_len--;
			if (m.kind == SK_END) {
				ld->delivery.eos = 1;
			} else if (!ld->delivery.final_code) {
				ld->delivery.final_code = ld->fail_code ? ld->fail_code : -EIO;
				memcpy(ld->delivery.final_msg, ld->fail_msg, sizeof(ld->delivery.final_msg));
			}
			pthread_cond_broadcast(&ld->cons_cv);
			continue;
		}
		if (!ld->mem.in_place && ld->sq_issued < ld->sq_len && !ld->copy_failed) {
			struct staged *it = &ld->sq[(ld->sq_head + ld->sq_issued) % ld->sq_cap];
			int pick = it->kind == SK_BATCH ? rf_ld_pick_dbuf_locked(ld) : -1;
			if (pick >= 0) {
				struct dbuf *b = &ld->delivery.dbufs[pick];
				int was_released = b->state == DB_RELEASED;
				b->state = DB_COPYING;
				it->dbuf = pick;
				ld->sq_issued++;
				struct staged s = *it;
				pthread_mutex_unlock(&ld->mu);
				int rc = 0;
				if (was_released) {
					/* Invariant 2: the consumer's work recorded at
					 * release is done before the buffer is
					 * overwritten: the copy stream waits for it,
					 * not this thread.  Waiting here would hold
					 * back the completion of copies already issued
					 * (a batch ready, not handed out) until the
					 * consumer's stream had drained: a gap in that
					 * stream at every batch. */
					rc = ops->stream_wait_event(ld->dev, ld->copy.stream, b->rel_event);
					if (rc < 0)
						rf_fail(&ld->copy_diag, rc, "loader: waiting for a released "
							"batch failed: %s", ld->dev_diag.msg);
				}
				if (rc == 0)
					rc = copy_issue(ld, b, &s);
				pthread_mutex_lock(&ld->mu);
				/* The entry has not moved: only this thread pops. */
				it->t_issue = s.t_issue;
				it->err = rc;
				if (rc < 0)
					ld->copy_failed = 1; /* issue nothing after it */
				continue;
			}
		}
		if (ld->sq_issued > 0) {
			struct staged s = ld->sq[ld->sq_head];
			struct dbuf *b = &ld->delivery.dbufs[s.dbuf];
			pthread_mutex_unlock(&ld->mu);
			int rc = s.err ? s.err : copy_complete(ld, b, &s);
			rf_ld_staged_done(ld, &s);
			pthread_mutex_lock(&ld->mu);
			ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
			ld->sq_len--;
			ld->sq_issued--;
			ld->stage_held--;
			rf_ld_stage_freed_locked(ld);
			if (rc == 0 && ld->copy_lost) {
				/* Issued before an earlier batch's copy failed to
				 * complete: it comes after the error, so it is
				 * dropped, never handed out in that batch's place. */
				b->state = DB_FREE;
				continue;
			}
			if (rc < 0) {
				b->state = DB_FREE;
				ld->copy_failed = 1; /* issue nothing more */
				ld->copy_lost = 1;   /* and drop what was issued after it */
				rf_ld_fail_locked(ld, rc, ld->copy_diag.msg);
				if (!ld->delivery.final_code) {
					ld->delivery.final_code = rc;
					snprintf(ld->delivery.final_msg, sizeof(ld->delivery.final_msg), "%s",
						 ld->copy_diag.msg);
				}
				pthread_cond_broadcast(&ld->cons_cv);
				continue;
			}
			b->state = DB_READY;
			unsigned at = (ld->delivery.rq_head + ld->delivery.rq_len) % ld->resolved.depth;
			ld->delivery.rq[at] = (unsigned)s.dbuf;
			ld->delivery.rq_len++;
			rf_ld_note_max(&ld->stats.max_ready, ld->delivery.rq_len);
			pthread_cond_signal(&ld->cons_cv);
			continue;
		}
		pthread_cond_wait(&ld->copy_cv, &ld->mu);
	}
	/* Stopping: copies still in flight are waited for, so no slot is
	 * unmapped or unpinned under a pending DMA. */
	while (ld->sq_issued > 0) {
		struct staged s = ld->sq[ld->sq_head];
		struct dbuf *b = &ld->delivery.dbufs[s.dbuf];
		pthread_mutex_unlock(&ld->mu);
		if (!s.err) {
			ops->event_sync(ld->dev, b->copy_event);
			unpin_after_copy(ld, &s);
		}
		pthread_mutex_lock(&ld->mu);
		b->state = DB_FREE;
		ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
		ld->sq_len--;
		ld->sq_issued--;
	}
	pthread_mutex_unlock(&ld->mu);
	rf_ld_thread_exit_account(ld, 1);
	return NULL;
}
