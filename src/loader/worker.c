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
	const rf_chunk_ctx *ctx = &job->ctx;
	char why[RF_ERRMSG_MAX];
	if (job->res < 0 && !ld->map.on &&
	    rf_io_read_error(ld->io, ld->files[job->info->shard], job->info->offset, why,
			     sizeof why))
		return rf_fail(&w->diag, (int)job->res,
			       "%s: chunk %" PRIu64 " at offset %" PRIu64 ": read failed: %s",
			       ctx->path, ctx->chunk, ctx->offset, why);
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
	const uint8_t *stored = rf_ld_read_slot_bytes(ld, job->slot);
	/* window.sums: the gather checks each sample instead (window.c). */
	int verify = ld->cfg.verify && !ld->window.sums;
	/* An uncompressed chunk in a map, with the parallel fill: its bytes
	 * are read once, by the copies into the batches after the turn, and
	 * checked there as they pass (gather.c); no batch holding them is
	 * staged before the check.  Its layout is validated here, as with
	 * verify = 0, which is safe on any bytes. */
	int later = verify && ld->gather.defer && ld->map.on && !ld->skip.on &&
		    !ld->image && job->info->codec == RF_CODEC_NONE;
	int rc = rf_decoder_chunk(&w->dec, ld->schema, job->info, stored,
				  later ? 0 : verify, &job->sec, &job->ctx, &w->diag);
	if (rc == 0 && later) {
		w->verify_later.on = 1;
		w->verify_later.src = stored;
		w->verify_later.len = job->info->stored_bytes;
		w->verify_later.xxh3 = job->info->xxh3;
		w->verify_later.ctx = job->ctx;
	}
	return rc;
}

/*
 * rf_config.on_error = skip.  A chunk whose path failed gives, at its turn,
 * substitute samples: sections of the bad chunk's sample count that all
 * point at one buffer of zeros (a fixed field's values all 0, a variable
 * field's offsets all 0, so every value is empty).  The gather takes them
 * like any chunk's, so each sample of the bad chunk the order places keeps
 * its place, and nothing but the chunk decides what replaces it.  The
 * buffer is allocated at open, for the largest chunk.
 */
int
rf_ld_skip_setup(rf_loader *ld)
{
	ld->skip.on = ld->cfg.on_error == RF_ON_ERROR_SKIP;
	if (!ld->skip.on)
		return 0;
	ld->skip.limit = ld->cfg.skip_limit ? ld->cfg.skip_limit : RF_SKIP_LIMIT_DEFAULT;
	uint64_t nmax = 0, item = 8;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		if (ld->chunks[c].samples > nmax)
			nmax = ld->chunks[c].samples;
	for (uint32_t f = 0; f < ld->schema->nfields; f++) {
		const rf_field *fd = &ld->schema->fields[f];
		uint64_t b = rf_field_item_bytes(fd);
		if (fd->var_dim < 0 && b > item)
			item = b;
	}
	/* Decoded image fields are fixed in the batch (image.c). */
	if (rf_ld_image_item_bytes(ld) > item)
		item = rf_ld_image_item_bytes(ld);
	/* Fixed values of the largest chunk, or its n + 1 offsets. */
	if (nmax + 1 > UINT64_MAX / item)
		return rf_fail(&ld->diag, RF_ECORRUPT, "loader: on_error skip: chunks of %" PRIu64
			       " samples of %" PRIu64 " bytes overflow", nmax, item);
	uint64_t bytes = RF_ALIGN_UP((nmax + 1) * item, 64);
	ld->skip.zeros = aligned_alloc(64, bytes);
	if (!ld->skip.zeros)
		return rf_fail(&ld->diag, -ENOMEM, "loader: on_error skip: out of memory for %"
			       PRIu64 " bytes of substitute samples", bytes);
	memset(ld->skip.zeros, 0, bytes);
	ld->skip.seen = calloc(ld->nchunks / 8 + 1, 1);
	ld->skip.gathered = calloc(ld->nchunks / 8 + 1, 1);
	if (!ld->skip.seen || !ld->skip.gathered)
		return rf_fail(&ld->diag, -ENOMEM, "loader: on_error skip: out of memory");
	ld->skip.gathered_epoch = UINT64_MAX;
	return 0;
}

/* `added` substitutes of dataset chunk `chunk` went into the open batch
 * (the turn holder): they count with the batch, and so does the chunk when
 * no batch of this epoch had any of its substitutes before.  Batches are
 * delivered in the order they are gathered, so rf_stats counts each at the
 * delivery of its first substitute of the epoch. */
void
rf_ld_skip_gathered(rf_loader *ld, uint64_t chunk, uint32_t added)
{
	uint8_t *bits = ld->skip.gathered;
	if (ld->skip.gathered_epoch != ld->gather.cur_epoch) {
		memset(bits, 0, ld->nchunks / 8 + 1);
		ld->skip.gathered_epoch = ld->gather.cur_epoch;
	}
	ld->gather.cur_subst += added;
	if (!((bits[chunk / 8] >> (chunk % 8)) & 1)) {
		bits[chunk / 8] |= (uint8_t)(1u << (chunk % 8));
		ld->gather.cur_subst_chunks++;
	}
}

/* Sections of substitute samples (see rf_ld_skip_setup) hold no bytes of
 * their own: their data is the zero buffer. */
int
rf_ld_skip_is_substitute(const rf_loader *ld, const rf_chunk_sections *sec)
{
	return ld->skip.zeros && sec->nfields && sec->field[0].data == ld->skip.zeros;
}

static void
skip_sections(rf_loader *ld, const rf_chunk_info *info, rf_chunk_sections *sec)
{
	memset(sec, 0, sizeof(*sec));
	sec->samples = info->samples;
	sec->nfields = ld->schema->nfields;
	for (uint32_t f = 0; f < sec->nfields; f++) {
		const rf_field *fd = &ld->schema->fields[f];
		rf_chunk_section *s = &sec->field[f];
		s->item_bytes = rf_field_item_bytes(fd);
		s->data = ld->skip.zeros;
		if (fd->var_dim >= 0) {
			s->offsets = (const uint64_t *)(const void *)ld->skip.zeros;
			s->data_bytes = 0;
		} else {
			s->data_bytes = (uint64_t)info->samples * s->item_bytes;
		}
	}
	rf_ld_image_skip_sections(ld, sec);
}

/* At a failed chunk's turn (the turn holder): skip it, unless it would be
 * one distinct chunk more than the limit (a chunk skipped in an earlier
 * epoch is skipped again without counting anew, so a long run is not ended
 * by one bad chunk read every epoch).  0 with substitute sections, or the
 * chunk's error. */
static int
skip_chunk(rf_loader *ld, struct worker *w, struct chunk_job *job, int rc)
{
	char why[RF_ERRMSG_MAX];
	snprintf(why, sizeof(why), "%s", w->diag.msg);
	uint64_t c = job->chunk;
	int seen = (ld->skip.seen[c / 8] >> (c % 8)) & 1;
	if (!seen && ld->skip.skipped >= ld->skip.limit)
		return rf_fail(&w->diag, rc, "%s (on_error skip: %" PRIu64 " chunks skipped "
			       "already, skip_limit %u)", why, ld->skip.skipped, ld->skip.limit);
	if (!seen) {
		ld->skip.seen[c / 8] |= (uint8_t)(1u << (c % 8));
		ld->skip.skipped++;
	}
	rf_log(&ld->diag, RF_LOG_WARN, "on_error skip: shard %s chunk %" PRIu64 " at offset %"
	       PRIu64 " skipped (%" PRIu64 " of at most %u), its %u samples are zero "
	       "substitutes: %s", job->ctx.path, job->ctx.chunk, job->ctx.offset,
	       ld->skip.skipped, ld->skip.limit, job->info->samples, why);
	skip_sections(ld, job->info, &job->sec);
	return 0;
}

/* The chunk path, chosen once at open: the steps each read chunk goes
 * through in a decode worker, in order, before its turn to gather: the
 * read's result, the chunk's decoding and, with rf_config.images, the
 * images' (image.c). */
void
rf_ld_chunk_steps_init(rf_loader *ld)
{
	ld->nchunk_steps = 0;
	ld->chunk_steps[ld->nchunk_steps++] = step_read_result;
	ld->chunk_steps[ld->nchunk_steps++] = step_decode;
	if (ld->image)
		ld->chunk_steps[ld->nchunk_steps++] = rf_ld_image_step;
	/* A chunk that is skipped is logged as a warning at its turn; one
	 * past the limit is logged as the stream's error. */
	for (unsigned i = 0; ld->skip.on && i < ld->nworkers; i++)
		ld->workers[i].diag.errors_quiet = 1;
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
		struct chunk_job job = {.info = info, .slot = step.slot, .res = step.res,
					.chunk = step.s.chunk, .epoch = step.s.epoch,
					.taken = step.s.taken};
		rf_dataset_chunk_ctx(ld->ds, step.s.chunk, &job.ctx);
		int rc = 0, slot_held = 1;
		w->verify_later.on = 0;
		w->fill_bad = 0;
		w->turn_passed = 0;
		for (unsigned i = 0; rc == 0 && i < ld->nchunk_steps; i++)
			rc = ld->chunk_steps[i](ld, w, &job);
		/* Bytes that were read whole but fail the chunk's check may have
		 * come from a URL's cache entry stored before the check (a chunk
		 * corrupted in transit): delete it, so that no later read is
		 * served those bytes again. */
		if ((rc == RF_ECHECKSUM || rc == RF_ECORRUPT) && job.res > 0 && !ld->map.on) {
			size_t span = RF_ALIGN_UP(info->stored_bytes, RF_FMT_ALIGN);
			rf_io_cache_drop(ld->io, ld->files[info->shard], info->offset, span);
			/* A URL's chunk is read again from the server, once: a
			 * corruption in transit (or in an old cache entry) is
			 * not the file's. */
			int64_t again = rf_io_reread(ld->io, ld->files[info->shard], info->offset,
						     (void *)rf_ld_read_slot_bytes(ld, step.slot), span);
			if (again >= (int64_t)info->stored_bytes) {
				rf_log(&w->diag, RF_LOG_WARN, "%s: read again from the server, once",
				       w->diag.msg);
				job.res = again;
				rc = 0;
				for (unsigned i = 0; rc == 0 && i < ld->nchunk_steps; i++)
					rc = ld->chunk_steps[i](ld, w, &job);
			}
		}
		if (rc < 0 && ld->mix)
			rf_ld_mix_name_error(ld, step.s.source, &w->diag);
		/* A compressed chunk was decoded into the worker's own buffer:
		 * its read slot can go back at once. */
		if (rc < 0 || info->codec != RF_CODEC_NONE) {
			rf_ld_read_slot_unref(ld, step.slot);
			slot_held = 0;
		}
		uint64_t t1 = rf_ld_now_ns();

		pthread_mutex_lock(&ld->mu);
		rf_ld_turn_wait_locked(ld, seq);
		if (ld->stop || ld->failed) {
			pthread_mutex_unlock(&ld->mu);
			if (slot_held)
				rf_ld_read_slot_unref(ld, step.slot);
			pthread_mutex_lock(&ld->mu);
			break;
		}
		pthread_mutex_unlock(&ld->mu);

		uint64_t t2 = rf_ld_now_ns();
		rf_ld_fill_turn_begin(ld, w);
		if (rc < 0 && ld->skip.on)
			rc = skip_chunk(ld, w, &job, rc);
		if (rc == 0 && ld->window.on)
			rc = rf_ld_gather_step_window(ld, &step.s, &job.sec, &job.ctx, w, slot_held, step.slot,
						      &w->diag);
		else if (rc == 0)
			rc = rf_ld_gather_step(ld, &step.s, &job.sec, &job.ctx,
					       ld->gather.direct_ok && slot_held,
					       step.slot, &w->diag);
		/* The parallel fill: the turn passes on here, then the copies
		 * (the slot stays held until they are made). */
		rc = rf_ld_fill_turn_end(ld, w, seq, rc);
		if (slot_held)
			rf_ld_read_slot_unref(ld, step.slot);
		/* The open batch is the turn holder's: after a check that failed
		 * past the turn, it is no longer this worker's. */
		if (rc < 0 && rc != -ECANCELED && !w->turn_passed)
			rf_ld_gather_drop_batch(ld);
		atomic_fetch_add_explicit(&ld->stats.decode_ns, (t1 - t0) + (rf_ld_now_ns() - t2),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&ld->stats.chunks, 1, memory_order_relaxed);

		if (rc < 0 && rc != -ECANCELED && w->diag.errors_quiet)
			rf_log(&w->diag, RF_LOG_ERROR, "%s", w->diag.msg);
		pthread_mutex_lock(&ld->mu);
		if (rc < 0 && rc != -ECANCELED)
			rf_ld_fail_locked(ld, rc, w->diag.msg);
		if (rc == 0 && !ld->gather.defer) {
			ld->next_gather++;
			rf_ld_maybe_end_locked(ld);
			rf_ld_turn_pass_locked(ld, seq);
		}
		pthread_cond_signal(&ld->reader_cv);
		if (rc < 0)
			break;
	}
	pthread_mutex_unlock(&ld->mu);
	rf_ld_thread_exit_account(ld, cpu_index);
	return NULL;
}
