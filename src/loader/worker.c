/* SPDX-License-Identifier: MIT */
/*
 * The decode workers: verify and decompress in parallel, then gather in
 * plan order, one turn per read.
 */
#include "loader/internal.h"

/* -------------------------------------------------------- decode workers */

void *
rf_ld_worker_main(void *arg)
{
	struct worker *w = arg;
	rf_loader *ld = w->ld;
	unsigned cpu_index = (unsigned)(w - ld->workers) + 2;

	pthread_mutex_lock(&ld->mu);
	for (;;) {
		while (!ld->stop && !ld->failed &&
		       !(ld->next_dispatch < ld->next_seq &&
			 ld->win[ld->next_dispatch % ld->nwin].state == ST_READ))
			pthread_cond_wait(&ld->work_cv, &ld->mu);
		if (ld->stop || ld->failed)
			break;
		/* Steps are taken strictly in plan order, so the workers always
		 * hold a contiguous run of steps and the one whose turn comes
		 * next is being worked on: no worker can wait for a turn that
		 * nobody will take. */
		uint64_t seq = ld->next_dispatch++;
		struct wstep *ws = &ld->win[seq % ld->nwin];
		ws->state = ST_TAKEN;
		struct wstep step = *ws;
		ld->slot_refs[step.slot] = 1;
		pthread_mutex_unlock(&ld->mu);

		uint64_t t0 = rf_ld_now_ns();
		const rf_chunk_info *info = &ld->chunks[step.s.chunk];
		rf_chunk_ctx ctx;
		rf_dataset_chunk_ctx(ld->ds, step.s.chunk, &ctx);
		rf_chunk_sections sec;
		int rc, slot_held = 1;
		if (step.res < 0) {
			rc = rf_fail(&w->diag, (int)step.res,
				     "%s: chunk %" PRIu64 " at offset %" PRIu64 ": read failed: %s",
				     ctx.path, ctx.chunk, ctx.offset, rf_strerror((int)step.res));
		} else if ((uint64_t)step.res < info->stored_bytes) {
			rc = rf_fail(&w->diag, RF_ETRUNCATED,
				     "%s: chunk %" PRIu64 " at offset %" PRIu64 ": read %" PRId64
				     " of its %" PRIu64 " bytes: the file is truncated",
				     ctx.path, ctx.chunk, ctx.offset, step.res, info->stored_bytes);
		} else {
			rc = rf_decoder_chunk(&w->dec, ld->schema, info, rf_ld_read_slot_bytes(ld, step.slot),
					      ld->cfg.verify, &sec, &ctx, &w->diag);
		}
		/* A compressed chunk was decoded into the worker's own buffer:
		 * its read slot can go back at once. */
		if (rc < 0 || info->codec != RF_CODEC_NONE) {
			rf_ld_read_slot_unref(ld, step.slot);
			slot_held = 0;
		}
		uint64_t t1 = rf_ld_now_ns();

		pthread_mutex_lock(&ld->mu);
		while (!ld->stop && !ld->failed && ld->next_gather != seq)
			pthread_cond_wait(&ld->work_cv, &ld->mu);
		if (ld->stop || ld->failed) {
			pthread_mutex_unlock(&ld->mu);
			if (slot_held)
				rf_ld_read_slot_unref(ld, step.slot);
			pthread_mutex_lock(&ld->mu);
			break;
		}
		pthread_mutex_unlock(&ld->mu);

		uint64_t t2 = rf_ld_now_ns();
		if (rc == 0 && ld->window.on)
			rc = rf_ld_gather_step_window(ld, &step.s, &sec, &ctx, w, slot_held, step.slot,
						      &w->diag);
		else if (rc == 0)
			rc = rf_ld_gather_step(ld, &step.s, &sec, &ctx, ld->gather.direct_ok && slot_held,
					       step.slot, &w->diag);
		if (slot_held)
			rf_ld_read_slot_unref(ld, step.slot);
		if (rc < 0 && rc != -ECANCELED)
			rf_ld_gather_drop_batch(ld);
		atomic_fetch_add_explicit(&ld->stats.decode_ns, (t1 - t0) + (rf_ld_now_ns() - t2),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&ld->stats.chunks, 1, memory_order_relaxed);

		pthread_mutex_lock(&ld->mu);
		if (rc < 0 && rc != -ECANCELED)
			rf_ld_fail_locked(ld, rc, w->diag.msg);
		if (rc == 0) {
			ld->next_gather++;
			rf_ld_maybe_end_locked(ld);
		}
		pthread_cond_broadcast(&ld->work_cv);
		pthread_cond_signal(&ld->reader_cv);
		if (rc < 0)
			break;
	}
	pthread_mutex_unlock(&ld->mu);
	rf_ld_thread_exit_account(ld, cpu_index);
	return NULL;
}
