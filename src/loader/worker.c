/* SPDX-License-Identifier: MIT */
/*
 * The decode workers: the chunk path (a list of steps chosen at open:
 * the read's result, verify and decompress) in parallel, then the gather
 * in plan order, one turn per read.
 */
#include "loader/internal.h"

/* The read's result: an error, or fewer bytes than the chunk has. */
static int
step_read_result(rf_loader *ld, struct worker *w, struct chunk_job *job)
{
	(void)ld;
	const rf_chunk_ctx *ctx = &job->ctx;
	if (job->res < 0)
		return rf_fail(&w->diag, (int)job->res,
			       "%s: chunk %" PRIu64 " at offset %" PRIu64 ": read failed: %s",
			       ctx->path, ctx->chunk, ctx->offset, rf_strerror((int)job->res));
	if ((uint64_t)job->res < job->info->stored_bytes)
		return rf_fail(&w->diag, RF_ETRUNCATED,
			       "%s: chunk %" PRIu64 " at offset %" PRIu64 ": read %" PRId64
			       " of its %" PRIu64 " bytes: the file is truncated",
			       ctx->path, ctx->chunk, ctx->offset, job->res, job->info->stored_bytes);
	return 0;
}

/* Verify (unless verify = 0), decompress and validate: the chunk's
 * sections, in the read slot (uncompressed) or the worker's raw buffer. */
static int
step_decode(rf_loader *ld, struct worker *w, struct chunk_job *job)
{
	return rf_decoder_chunk(&w->dec, ld->schema, job->info, rf_ld_read_slot_bytes(ld, job->slot),
				ld->cfg.verify, &job->sec, &job->ctx, &w->diag);
}

/* The chunk path, chosen once at open: the steps each read chunk goes
 * through in a decode worker, in order, before its turn to gather.  A
 * later step (image decoding, say) is one more entry. */
void
rf_ld_chunk_steps_init(rf_loader *ld)
{
	ld->nchunk_steps = 0;
	ld->chunk_steps[ld->nchunk_steps++] = step_read_result;
	ld->chunk_steps[ld->nchunk_steps++] = step_decode;
}

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
		struct chunk_job job = {.info = info, .slot = step.slot, .res = step.res};
		rf_dataset_chunk_ctx(ld->ds, step.s.chunk, &job.ctx);
		int rc = 0, slot_held = 1;
		for (unsigned i = 0; rc == 0 && i < ld->nchunk_steps; i++)
			rc = ld->chunk_steps[i](ld, w, &job);
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
			rc = rf_ld_gather_step_window(ld, &step.s, &job.sec, &job.ctx, w, slot_held, step.slot,
						      &w->diag);
		else if (rc == 0)
			rc = rf_ld_gather_step(ld, &step.s, &job.sec, &job.ctx,
					       ld->gather.direct_ok && slot_held,
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
