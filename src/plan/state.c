/* SPDX-License-Identifier: MIT */
/*
 * The resume state blob (layout in plan.h).  Fixed size, little-endian, every
 * field checked on load; the XXH3-64 covers everything before it, so a flipped
 * bit anywhere is refused rather than resuming at a wrong place.
 */
#include <errno.h>
#include <string.h>
#include "xxh.h"

#include "plan/plan_impl.h"

static const char state_magic[8] = {'R', 'F', 'S', 'T', 'A', 'T', 'E', '\0'};

enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 8,
	OFF_SIZE = 12,
	OFF_FINGERPRINT = 16,
	OFF_SEED = 24,
	OFF_EPOCH = 32,
	OFF_POSITION = 40,
	OFF_SAMPLES = 48,
	OFF_CHUNKS = 56,
	OFF_MODE = 64,
	OFF_WINDOW = 68,
	OFF_BATCH = 72,
	OFF_WORLD = 76,
	OFF_TAIL = 80,
	OFF_PART = 84,
	OFF_XXH3 = 88,
};

int
rf_plan_state_save(const rf_plan *plan, void *buf, size_t cap, size_t *len)
{
	return rf_plan_state_save_at(plan, plan->pp.epoch, plan->cursor, buf, cap, len);
}

int
rf_plan_state_save_at(const rf_plan *plan, uint64_t epoch, uint64_t batches, void *buf, size_t cap,
		      size_t *len)
{
	return rf_plan_state_save_part(plan, epoch, batches, 0, buf, cap, len);
}

uint32_t
rf_plan_state_part(const rf_plan *plan)
{
	return plan->part;
}

int
rf_plan_state_save_part(const rf_plan *plan, uint64_t epoch, uint64_t batches, uint32_t part,
			void *buf, size_t cap, size_t *len)
{
	*len = RF_PLAN_STATE_SIZE;
	if (cap < RF_PLAN_STATE_SIZE)
		return -ENOSPC;
	/* The geometry, hence the position of a batch count, is the same in
	 * every epoch. */
	if (batches > plan->ep.geom.nbatches || (part && (batches == plan->ep.geom.nbatches ||
							  part >= plan->pp.batch)))
		return -ERANGE;
	uint8_t *b = buf;
	const rf_plan_params *pp = &plan->pp;
	memset(b, 0, RF_PLAN_STATE_SIZE);
	memcpy(b + OFF_MAGIC, state_magic, sizeof state_magic);
	rf_put_le32(b + OFF_VERSION, RF_PLAN_STATE_VERSION);
	rf_put_le32(b + OFF_SIZE, RF_PLAN_STATE_SIZE);
	rf_put_le64(b + OFF_FINGERPRINT, pp->fingerprint);
	rf_put_le64(b + OFF_SEED, pp->seed);
	rf_put_le64(b + OFF_EPOCH, epoch);
	rf_put_le64(b + OFF_POSITION, rf_plan_consumed(plan, batches));
	rf_put_le64(b + OFF_SAMPLES, plan->n);
	rf_put_le64(b + OFF_CHUNKS, plan->nchunks);
	rf_put_le32(b + OFF_MODE, (uint32_t)pp->mode);
	rf_put_le32(b + OFF_WINDOW, pp->window);
	rf_put_le32(b + OFF_BATCH, pp->batch);
	rf_put_le32(b + OFF_WORLD, pp->world);
	rf_put_le32(b + OFF_TAIL, (uint32_t)pp->tail);
	rf_put_le32(b + OFF_PART, part);
	rf_put_le64(b + OFF_XXH3, XXH3_64bits(b, OFF_XXH3));
	return 0;
}

/* The blob is whole: magic, version, size and checksum.  0, or RF_ESTATE
 * with the reason in d (when d is not NULL). */
static int
blob_whole(const uint8_t *b, size_t len, rf_diag *d)
{
#define REFUSE(...) (d ? rf_fail(d, RF_ESTATE, __VA_ARGS__) : RF_ESTATE)
	if (!b || len < OFF_SIZE + 4)
		return REFUSE("resume state: %zu bytes, too short for a state blob", len);
	if (memcmp(b + OFF_MAGIC, state_magic, sizeof state_magic) != 0)
		return REFUSE("resume state: bad magic (not a ringfeed state blob)");
	uint32_t version = rf_le32(b + OFF_VERSION);
	if (version != RF_PLAN_STATE_VERSION && version != 1)
		return REFUSE("resume state: version %u, this library reads versions 1 and %u", version,
			      RF_PLAN_STATE_VERSION);
	uint32_t size = rf_le32(b + OFF_SIZE);
	if (size != RF_PLAN_STATE_SIZE || len != size)
		return REFUSE("resume state: %zu bytes given, blob says %u, version %u has %u", len,
			      size, version, RF_PLAN_STATE_SIZE);
	uint64_t sum = XXH3_64bits(b, OFF_XXH3), stored = rf_le64(b + OFF_XXH3);
	if (sum != stored)
		return REFUSE("resume state: checksum mismatch (stored %016llx, computed %016llx): "
			      "the blob is corrupt", (unsigned long long)stored,
			      (unsigned long long)sum);
	return 0;
#undef REFUSE
}

int
rf_plan_state_peek(const void *buf, size_t len, enum rf_plan_mode *mode, uint32_t *window)
{
	const uint8_t *b = buf;
	if (blob_whole(b, len, NULL) < 0 || rf_le32(b + OFF_MODE) > RF_PLAN_FULL)
		return RF_ESTATE;
	*mode = (enum rf_plan_mode)rf_le32(b + OFF_MODE);
	*window = rf_le32(b + OFF_WINDOW);
	return 0;
}

int
rf_plan_state_load(rf_plan *plan, const void *buf, size_t len)
{
	rf_diag *d = plan->diag;
	const uint8_t *b = buf;
	int rc = blob_whole(b, len, d);
	if (rc < 0)
		return rc;

	rf_plan_params pp = plan->pp;
	uint64_t fingerprint = rf_le64(b + OFF_FINGERPRINT);
	uint64_t samples = rf_le64(b + OFF_SAMPLES), chunks = rf_le64(b + OFF_CHUNKS);
	if (fingerprint != pp.fingerprint)
		return rf_fail(d, RF_ESTATE, "resume state: saved for dataset fingerprint %016llx, "
			       "this dataset's is %016llx", (unsigned long long)fingerprint,
			       (unsigned long long)pp.fingerprint);
	if (samples != plan->n || chunks != plan->nchunks)
		return rf_fail(d, RF_ESTATE, "resume state: saved for %llu samples in %llu chunks, "
			       "this dataset has %llu in %llu", (unsigned long long)samples,
			       (unsigned long long)chunks, (unsigned long long)plan->n,
			       (unsigned long long)plan->nchunks);
	uint32_t mode = rf_le32(b + OFF_MODE), window = rf_le32(b + OFF_WINDOW);
	uint32_t batch = rf_le32(b + OFF_BATCH), world = rf_le32(b + OFF_WORLD);
	uint32_t tail = rf_le32(b + OFF_TAIL), part = rf_le32(b + OFF_PART);
	/* Version 1 differs only in the window order, which is not the one
	 * this library draws: such a position cannot be continued exactly. */
	if (mode == RF_PLAN_WINDOW && rf_le32(b + OFF_VERSION) == 1)
		return rf_fail(d, RF_ESTATE, "resume state: a window shuffle position saved by an "
			       "earlier ringfeed (state version 1), whose window order this version "
			       "does not draw: it cannot resume exactly; restart the epoch (or "
			       "resume with the ringfeed that saved it)");
	if (mode == RF_PLAN_WINDOW && rf_plan_window_in_force(window, plan->nchunks) > RF_PLAN_WINDOW_MAX)
		return rf_fail(d, RF_ESTATE, "resume state: a window of %u chunks (at most %u)",
			       window, RF_PLAN_WINDOW_MAX);
	if (mode > RF_PLAN_FULL || tail > RF_PLAN_KEEP || window == 0 || batch == 0 || world == 0 ||
	    part >= batch || (part && (world != 1 || mode == RF_PLAN_FULL)))
		return rf_fail(d, RF_ESTATE, "resume state: a field is out of range (mode %u, tail %u, "
			       "window %u, batch %u, world %u, part %u)", mode, tail, window, batch,
			       world, part);
	/* Within a batch, only where it was saved: one rank, the same batch. */
	if (part && pp.world != 1)
		return rf_fail(d, RF_ESTATE, "resume state: saved %u samples into a batch closed "
			       "early (by a full variable-size region) with one rank; it resumes "
			       "with one rank only, not %u", part, pp.world);
	uint64_t G = (uint64_t)world * batch, myG = (uint64_t)pp.world * pp.batch;
	if (G != myG)
		return rf_fail(d, RF_ESTATE, "resume state: global batch %u x %u = %llu at save, "
			       "now %u x %u = %llu: a resumed job needs the same world x batch",
			       world, batch, (unsigned long long)G, pp.world, pp.batch,
			       (unsigned long long)myG);
	pp.seed = rf_le64(b + OFF_SEED);
	pp.epoch = rf_le64(b + OFF_EPOCH);
	pp.mode = (enum rf_plan_mode)mode;
	pp.window = window;
	pp.tail = (enum rf_plan_tail)tail;

	/* The position must be a batch boundary of the saved job: k x G, or
	 * past the last full global batch (the tail batch ended the epoch;
	 * where exactly it ended depends on the world size at save). */
	uint64_t position = rf_le64(b + OFF_POSITION);
	uint64_t nfull = plan->n / G;
	if (position > plan->n || (position % G != 0 && position <= nfull * G))
		return rf_fail(d, RF_ESTATE, "resume state: position %llu is not a batch boundary "
			       "of %llu samples in global batches of %llu",
			       (unsigned long long)position, (unsigned long long)plan->n,
			       (unsigned long long)G);

	struct rf_plan_epoch ep;
	rc = rf_plan_epoch_build(plan, &pp, &ep);
	if (rc < 0)
		return rf_fail(d, rc, "resume state: out of memory for the epoch's tables");
	uint64_t cursor = position <= nfull * G ? position / G : ep.geom.nbatches;
	if (part && cursor >= ep.geom.nbatches) {
		rf_plan_epoch_free(&ep);
		return rf_fail(d, RF_ESTATE, "resume state: %u samples into a batch past the "
			       "epoch's end", part);
	}
	rf_plan_epoch_free(&plan->ep);
	plan->ep = ep;
	plan->pp = pp;
	plan->cursor = cursor;
	plan->part = part;
	return 0;
}
