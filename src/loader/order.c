/* SPDX-License-Identifier: MIT */
/*
 * The order: the plan cursors, the dataset fingerprint and resume.
 */
#include <string.h>

#include "loader/internal.h"

/* The order in force, for the stats: its id and window. */
static void
order_note(rf_loader *ld)
{
	const rf_plan_params *op = rf_plan_params_get(ld->gather.plan);
	ld->order_id = rf_plan_order_id(op, ld->nchunks);
	ld->order_window = op->mode == RF_PLAN_WINDOW ? op->window : 0;
}

/* The config's shuffle for a plan mode. */
enum rf_shuffle
rf_ld_shuffle_of_mode(enum rf_plan_mode m)
{
	return m == RF_PLAN_CHUNKS   ? RF_SHUFFLE_CHUNKS
	       : m == RF_PLAN_WINDOW ? RF_SHUFFLE_WINDOW
	       : m == RF_PLAN_FULL   ? RF_SHUFFLE_FULL : RF_SHUFFLE_NONE;
}

/*
 * Position the plan cursors at a saved position (mu not needed: no pipeline
 * thread runs).  The blob's order (seed, epoch, mode) replaces the
 * config's; both cursors start at the batch after the saved position.  The
 * end stays where the config put it (epoch_last, from rf_config.epoch +
 * epochs): the blob only positions, so a run that resumes streams the same
 * epochs in total as one that does not, and a position outside those
 * epochs is refused rather than streamed.  On failure the plans are unchanged
 * (rf_plan_state_load checks everything before it changes anything, and the
 * gather's plan is loaded first).
 */
int
rf_ld_plan_seek_blob(rf_loader *ld, const void *blob, size_t len)
{
	rf_config *cfg = &ld->cfg;
	if (ld->mix)
		return rf_ld_mix_seek_blob(ld, blob, len);
	int rc = rf_plan_state_load(ld->gather.plan, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s%s", strncmp(ld->plan_diag.msg, "resume", 6) ? "resume: " : "", ld->plan_diag.msg);
	const rf_plan_params *lp = rf_plan_params_get(ld->gather.plan);
	if ((lp->mode == RF_PLAN_FULL) != (ld->full.on && !ld->full.window) ||
	    (lp->mode == RF_PLAN_WINDOW) != (ld->window.on || ld->full.window))
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the saved shuffle mode %s "
			       "cannot continue in this loader (open it with that shuffle mode)",
			       rf_plan_mode_name(lp->mode));
	/* From memory too, where nothing is held: the same config and blob
	 * open alike whether the data is hot or not. */
	if ((ld->window.on || ld->full.window) && lp->window > ld->resolved.window)
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the position was saved with "
			       "a window of %u chunks, this loader holds %u: open it with window = "
			       "%u (and pinned_bytes for it)", lp->window, ld->resolved.window, lp->window);
	if (cfg->epochs && (lp->epoch < ld->reader.epoch_last - cfg->epochs ||
			    lp->epoch >= ld->reader.epoch_last))
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the position lies in epoch %"
			       PRIu64 ", outside this loader's epochs %" PRIu64 "..%" PRIu64 " (epoch + "
			       "epochs - 1, counted from rf_config.epoch whether or not the run "
			       "resumes): open with the epoch and epochs of the run that saved it",
			       lp->epoch, ld->reader.epoch_last - cfg->epochs, ld->reader.epoch_last - 1);
	rc = rf_plan_state_load(ld->reader.plan, blob, len);
	if (rc == 0)
		rc = rf_plan_state_load(ld->splan, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s%s", strncmp(ld->plan_diag.msg, "resume", 6) ? "resume: " : "", ld->plan_diag.msg);
	ld->resolved.shuffle = rf_ld_shuffle_of_mode(lp->mode);
	ld->resolved.seed = lp->seed;
	ld->resolved.epoch = lp->epoch;
	uint64_t start = rf_plan_tell(ld->gather.plan);
	ld->reader.epoch = ld->gather.epoch = ld->delivery.epoch = lp->epoch;
	ld->gather.done = ld->delivery.done = start;
	ld->gather.skip = ld->delivery.part = rf_plan_state_part(ld->gather.plan);
	ld->gather.n = ld->gather.i = 0;
	ld->reader.nreads = rf_plan_reads(ld->reader.plan);
	ld->reader.entry = 0;
	rf_ld_image_reads_reset(ld);
	ld->full.next = start;
	if (ld->full.on) {
		/* Full mode has no read sequence: the batch is the position. */
	} else if (start >= rf_plan_batches(ld->reader.plan)) {
		ld->reader.entry = ld->reader.nreads; /* the saved epoch is complete */
	} else if (start > 0) {
		/* Reads below the first item's keep_from are never needed again
		 * this epoch (in none and chunks modes it is the item's read). */
		uint32_t n = 0;
		rc = rf_plan_batch(ld->reader.plan, start, ld->gather.items, cfg->batch_size, &n);
		if (rc < 0 || n == 0)
			return rf_fail(&ld->diag, rc < 0 ? rc : RF_ESTATE, "loader: resume: batch %"
				       PRIu64 " of the plan is missing", start);
		ld->reader.entry = ld->gather.items[0].keep_from;
	}
	order_note(ld);
	rf_log(&ld->diag, RF_LOG_INFO, "resume: epoch %" PRIu64 ", batch %" PRIu64 " (read %" PRIu64
	       ")", lp->epoch, start, ld->reader.entry);
	return 0;
}

/* The two plan cursors (reader and gather) over the same order. */
int
rf_ld_open_plan(rf_loader *ld)
{
	rf_config *cfg = &ld->cfg;
	int rc;
	if (ld->mix)
		return rf_ld_mix_open_order(ld);

	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.mode = ld->resolved.shuffle == RF_SHUFFLE_CHUNKS   ? RF_PLAN_CHUNKS
		  : ld->resolved.shuffle == RF_SHUFFLE_WINDOW ? RF_PLAN_WINDOW
		  : ld->resolved.shuffle == RF_SHUFFLE_FULL   ? RF_PLAN_FULL : RF_PLAN_NONE;
	pp.seed = ld->resolved.seed;
	pp.epoch = ld->resolved.epoch;
	pp.batch = cfg->batch_size;
	pp.window = 1;
	if (ld->full.window) {
		pp.window = ld->resolved.window; /* no chunk held: the order's W */
	} else if (ld->resolved.shuffle == RF_SHUFFLE_WINDOW) {
		rc = rf_ld_window_setup(ld, &pp.window);
		if (rc < 0)
			return rc;
	}
	pp.tail = cfg->drop_last ? RF_PLAN_DROP : RF_PLAN_KEEP;
	/* The fingerprint names the content without reading it: every chunk's
	 * sample count, raw size and checksum. */
	uint64_t fp = rf_plan_mix64(ld->nchunks);
	for (uint64_t c = 0; c < ld->nchunks; c++)
		fp = rf_plan_mix64(fp ^ rf_plan_mix64(ld->chunks[c].xxh3 + ld->chunks[c].samples +
						      (ld->chunks[c].raw_bytes << 20)));
	pp.fingerprint = fp;
	/* Checked and resolved with the other settings (config_check). */
	pp.rank = ld->resolved.rank;
	pp.world = ld->resolved.world;

	uint64_t n = rf_dataset_samples(ld->ds);
	if (n == 0 || ld->nchunks == 0) {
		ld->plan_empty = 1;
		return 0;
	}
	uint32_t *counts = malloc(ld->nchunks * sizeof(*counts));
	if (!counts)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint64_t c = 0; c < ld->nchunks; c++)
		counts[c] = ld->chunks[c].samples;
	rc = rf_plan_create(&ld->reader.plan, &pp, counts, ld->nchunks, &ld->plan_diag);
	if (rc == 0)
		rc = rf_plan_create(&ld->gather.plan, &pp, counts, ld->nchunks, &ld->plan_diag);
	if (rc == 0)
		rc = rf_plan_create(&ld->splan, &pp, counts, ld->nchunks, &ld->plan_diag);
	free(counts);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->plan_diag.msg);
	ld->gather.items = calloc(cfg->batch_size, sizeof(*ld->gather.items));
	if (!ld->gather.items)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for %u plan items",
			       cfg->batch_size);
	ld->reader.epoch = ld->gather.epoch = ld->delivery.epoch = ld->resolved.epoch;
	ld->reader.nreads = rf_plan_reads(ld->reader.plan);
	/* From the config, not the order in force: a resume never moves the
	 * end. */
	ld->reader.epoch_last = cfg->epochs ? cfg->epoch + cfg->epochs : 0;
	if (cfg->resume) {
		rc = rf_ld_plan_seek_blob(ld, cfg->resume, cfg->resume_len);
		if (rc < 0)
			return rc;
	}
	/* Every epoch has the same number of batches: none means nothing to
	 * stream, ever (not an endless loop over empty epochs). */
	ld->plan_empty = rf_plan_batches(ld->reader.plan) == 0;
	/* After a resume the blob's order is the one in force. */
	const rf_plan_params *op = rf_plan_params_get(ld->gather.plan);
	order_note(ld);
	char wdesc[48] = "";
	if (op->mode == RF_PLAN_WINDOW)
		snprintf(wdesc, sizeof wdesc, ", window W = %u chunks", op->window);
	rf_log(&ld->diag, RF_LOG_INFO, "plan: shuffle %s%s, seed %" PRIu64 ", rank %u of %u (%s), "
	       "%" PRIu64 " batches of %u per epoch, order id %016" PRIx64,
	       rf_shuffle_name(ld->resolved.shuffle), wdesc, ld->resolved.seed, pp.rank, pp.world, ld->resolved.rank_source,
	       rf_plan_batches(ld->reader.plan),
	       cfg->batch_size, ld->order_id);
	/* A batch larger than the data (with drop_last) streams nothing: a
	 * training loop that silently does no step. */
	if (ld->plan_empty && rf_dataset_samples(ld->ds) > 0)
		rf_log(&ld->diag, RF_LOG_WARN, "plan: an epoch has no batch for rank %u: %" PRIu64
		       " samples, batch_size %u x world %u%s; the stream is empty",
		       pp.rank, rf_dataset_samples(ld->ds), cfg->batch_size, pp.world,
		       cfg->drop_last ? " with drop_last (the partial batch is dropped)" : "");
	return 0;
}
