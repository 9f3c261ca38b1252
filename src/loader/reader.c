/* SPDX-License-Identifier: MIT */
/*
 * The reader thread: the plan's read sequence into read slots, through
 * the I/O engine or the shard maps.
 */
#include "loader/internal.h"

/* ---------------------------------------------------------- the reader */

/* Map mode's read: fault chunk `c` in through the mmap engine and point
 * read slot `slot` at it (rf_io_map_range). */
static int64_t
map_chunk(rf_loader *ld, const rf_chunk_info *c, unsigned slot)
{
	return rf_io_map_range(ld->map.m, c->shard, c->offset, c->stored_bytes,
			       &ld->map.rbase[slot]);
}

/* The next read (mu held), or 0 after the last epoch. */
static int
reader_next_step(rf_loader *ld, struct lstep *st)
{
	if (ld->mix)
		return rf_ld_mix_next_read(ld, st);
	if (ld->plan_empty)
		return 0;
	while (ld->reader.entry >= ld->reader.nreads) {
		if (ld->reader.epoch_last && ld->reader.epoch + 1 >= ld->reader.epoch_last)
			return 0;
		int rc = rf_plan_set_epoch(ld->reader.plan, ld->reader.epoch + 1);
		if (rc < 0)
			return rc;
		ld->reader.epoch++;
		ld->reader.entry = 0;
		ld->reader.nreads = rf_plan_reads(ld->reader.plan);
	}
	uint64_t chunk;
	int rc = rf_plan_read_chunk(ld->reader.plan, ld->reader.entry, &chunk);
	if (rc < 0 || chunk >= ld->nchunks)
		return rc < 0 ? rc : -ERANGE;
	st->chunk = chunk;
	st->entry = ld->reader.entry++;
	st->epoch = ld->reader.epoch;
	return 1;
}

/* Wait for at least one read to complete (the caller holds no lock),
 * counting the time in read_ns. */
int
rf_ld_reads_wait(rf_loader *ld, rf_io_done *done, unsigned cap)
{
	uint64_t t0 = rf_ld_now_ns();
	int n = rf_io_wait(ld->io, done, cap, 1);
	atomic_fetch_add_explicit(&ld->stats.read_ns, rf_ld_now_ns() - t0, memory_order_relaxed);
	return n;
}

void *
rf_ld_reader_main(void *arg)
{
	rf_loader *ld = arg;
	rf_io_done done[RF_LD_REAP_MAX];

	pthread_mutex_lock(&ld->mu);
	for (;;) {
		if (ld->stop || ld->failed)
			break;
		while (!ld->plan_done && ld->read_held < ld->mem.n_read && ld->reader.inflight < ld->mem.qd &&
		       ld->next_seq - ld->next_gather < ld->nwin) {
			struct lstep st;
			int prc = reader_next_step(ld, &st);
			if (prc < 0) {
				char msg[RF_ERRMSG_MAX + 64];
				snprintf(msg, sizeof(msg), "loader: the plan of epoch %" PRIu64 " failed: %s",
					 ld->reader.epoch + 1, rf_strerror(prc));
				rf_ld_fail_locked(ld, prc, msg);
				break;
			}
			if (prc == 0) {
				ld->plan_done = 1;
				ld->total_steps = ld->next_seq;
				rf_ld_maybe_end_locked(ld);
				break;
			}
			unsigned slot = 0;
			int rc = 0;
			if (!ld->map.on)
				rc = rf_ring_acquire_kind(ld->ring, RF_RING_READ, &slot, 0);
			else if (ld->map.free_n > 0)
				ld->map.free_is[slot = ld->map.free[--ld->map.free_n]] = 0;
			else
				rc = -EPROTO;
			if (rc < 0) {
				/* Cannot happen while the counts hold; a stop is the
				 * only other cause. */
				if (!ld->stop)
					rf_ld_fail_locked(ld, rc, "loader: no free ring slot for a read");
				break;
			}
			ld->read_held++;
			rf_ld_note_max(&ld->stats.max_slots, rf_ld_ring_used(ld));
			uint64_t seq = ld->next_seq++;
			struct wstep *w = &ld->win[seq % ld->nwin];
			rf_ld_image_take(ld, &st, seq);
			w->s = st;
			w->seq = seq;
			w->slot = slot;
			w->state = ST_READING;
			w->res = 0;
			const rf_chunk_info *c = &ld->chunks[st.chunk];
			uint64_t span = RF_ALIGN_UP(c->stored_bytes, RF_FMT_ALIGN);
			/* The io queue belongs to this thread; only the window
			 * bookkeeping needs the lock. */
			pthread_mutex_unlock(&ld->mu);
			int64_t mres = 0;
			if (ld->map.on) {
				uint64_t t0 = rf_ld_now_ns();
				mres = map_chunk(ld, c, slot);
				atomic_fetch_add_explicit(&ld->stats.read_ns, rf_ld_now_ns() - t0,
							  memory_order_relaxed);
				if (mres > 0)
					atomic_fetch_add_explicit(&ld->stats.bytes_read, (uint64_t)mres,
								  memory_order_relaxed);
				rc = 0;
			} else {
				rc = rf_io_read(ld->io, ld->files[c->shard], c->offset,
						rf_ring_slot(ld->ring, slot), span, seq);
			}
			pthread_mutex_lock(&ld->mu);
			if (rc < 0 || ld->map.on) {
				w->state = ST_READ;
				w->res = rc < 0 ? rc : mres;
				/* One step ready: one idle worker (turns have their
				 * own wake-ups). */
				pthread_cond_signal(&ld->work_cv);
			} else {
				ld->reader.inflight++;
				rf_ld_note_max(&ld->stats.max_inflight, ld->reader.inflight);
			}
		}
		if (ld->stop || ld->failed)
			break;
		if (ld->reader.inflight == 0) {
			if (ld->plan_done)
				break;
			pthread_cond_wait(&ld->reader_cv, &ld->mu);
			continue;
		}
		pthread_mutex_unlock(&ld->mu);
		int n = rf_ld_reads_wait(ld, done, RF_LD_REAP_MAX);
		pthread_mutex_lock(&ld->mu);
		if (n < 0) {
			char msg[RF_ERRMSG_MAX + 64];
			snprintf(msg, sizeof(msg), "loader: waiting for reads failed: %s (%s)",
				 rf_strerror(n), ld->io_diag.msg);
			rf_ld_fail_locked(ld, n, msg);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct wstep *w = &ld->win[done[i].tag % ld->nwin];
			w->state = ST_READ;
			w->res = done[i].res;
			ld->reader.inflight--;
			if (done[i].res > 0)
				atomic_fetch_add_explicit(&ld->stats.bytes_read, (uint64_t)done[i].res,
							  memory_order_relaxed);
		}
		if (n == 1)
			pthread_cond_signal(&ld->work_cv);
		else if (n > 1)
			pthread_cond_broadcast(&ld->work_cv);
	}
	pthread_mutex_unlock(&ld->mu);

	/* Reads still in flight land in ring memory: wait for them before the
	 * ring can be unmapped. */
	while (ld->io && rf_io_inflight(ld->io) > 0) {
		if (rf_io_wait(ld->io, done, RF_LD_REAP_MAX, 1) < 0)
			break;
	}
	rf_ld_thread_exit_account(ld, 0);
	return NULL;
}
