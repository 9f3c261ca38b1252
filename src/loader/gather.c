/* SPDX-License-Identifier: MIT */
/*
 * The gather: plan items into batches in staging slots, and direct
 * batches copied from a raw read slot.
 */
#include "loader/internal.h"

#include <assert.h>

/* ------------------------------------------------------ the parallel fill */

/* The turn holder's sink holds copies into the batch its tag names: count
 * this worker once in that slot's pending (mu held). */
static void
count_sink_locked(rf_loader *ld)
{
	rf_copy_sink *s = ld->gather.sink;
	if (!s || ld->gather.sink_counted || s->tag < 0 || s->n == 0 ||
	    s->ops[s->n - 1].tag != s->tag)
		return;
	ld->gather.pending[s->tag]++;
	ld->gather.writers[s->tag] |= 1ull << (ld->gather.sink_worker % 64);
	ld->gather.sink_counted = 1;
}

/* Stage the closed batches at the head of fq whose copies are all made, in
 * order (mu held, wake-ups deferred by the caller).  After an error or a
 * stop nothing more is staged: the reset frees what is left. */
static void
fill_drain_locked(rf_loader *ld)
{
	while (ld->gather.fq_len > 0 && !ld->failed && !ld->stop) {
		struct staged s = ld->gather.fq[ld->gather.fq_head];
		if (!s.direct && ld->gather.pending[s.slot] > 0)
			break;
		ld->gather.fq_head = (ld->gather.fq_head + 1) % ld->gather.fq_cap;
		ld->gather.fq_len--;
		if (!s.direct) {
			uint64_t wr = ld->gather.writers[s.slot];
			if (wr & (wr - 1))
				ld->stats.fill_batches_multi++;
			ld->gather.writers[s.slot] = 0;
		}
		rf_ld_stage_batch_locked(ld, &s);
	}
	if (ld->gather.fill_waiting)
		pthread_cond_broadcast(&ld->gather.fill_cv);
	rf_ld_maybe_end_locked(ld);
}

/* Queue a closed batch behind those still filling, stage what is ready,
 * drop mu and wake. */
static void
fill_queue_unlock(rf_loader *ld, const struct staged *s)
{
	ld->gather.fq[(ld->gather.fq_head + ld->gather.fq_len) % ld->gather.fq_cap] = *s;
	ld->gather.fq_len++;
	ld->wake_defer = 1;
	fill_drain_locked(ld);
	rf_ld_unlock_wake(ld);
}

/* Slices of a chunk checked and copied while in cache (a core's L2 holds
 * several), and the most copies scanned per slice: past that the chunk is
 * checked whole first, then copied. */
#define FILL_SLICE ((uint64_t)256 << 10)
#define FILL_FUSE_OPS_MAX 512

static void
copy_ops(const rf_copy_sink *s)
{
	for (size_t i = 0; i < s->n; i++)
		memcpy(s->ops[i].dst, s->ops[i].src, s->ops[i].len);
}

/*
 * The copies of worker w's chunk, checked against its XXH3-64 as they go
 * (verify_later): a slice of the chunk is hashed, then the parts of the
 * copies that come from it are made while it is in cache, so the chunk's
 * bytes come from memory once.  Copies of bytes outside the chunk, or too
 * many to scan per slice, are made after a check of the whole chunk.  A
 * mismatch is the chunk's error (the message of a check before the turn)
 * and marks w->fill_bad: its batches are never staged.
 */
static int
copy_checked(struct worker *w, const rf_copy_sink *s)
{
	const uint8_t *base = w->verify_later.src;
	const uint64_t n = w->verify_later.len;
	if (!w->xxh)
		w->xxh = XXH3_createState();
	int fuse = s->n <= FILL_FUSE_OPS_MAX && w->xxh;
	for (size_t i = 0; fuse && i < s->n; i++)
		fuse = s->ops[i].src >= base && s->ops[i].len <= n &&
		       (uint64_t)(s->ops[i].src - base) <= n - s->ops[i].len;
	uint64_t h;
	if (fuse) {
		XXH3_state_t *st = w->xxh;
		XXH3_64bits_reset(st);
		for (uint64_t off = 0; off < n; off += FILL_SLICE) {
			uint64_t e = n - off < FILL_SLICE ? n : off + FILL_SLICE;
			const uint8_t *lo = base + off, *hi = base + e;
			XXH3_64bits_update(st, lo, e - off);
			for (size_t i = 0; i < s->n; i++) {
				const rf_copy_op *op = &s->ops[i];
				const uint8_t *a = op->src > lo ? op->src : lo;
				const uint8_t *b = op->src + op->len < hi ? op->src + op->len : hi;
				if (a < b)
					memcpy(op->dst + (a - op->src), a, (size_t)(b - a));
			}
		}
		h = XXH3_64bits_digest(st);
	} else {
		h = XXH3_64bits(base, n);
	}
	if (h != w->verify_later.xxh3) {
		const rf_chunk_ctx *c = &w->verify_later.ctx;
		w->fill_bad = 1;
		return rf_fail(&w->diag, RF_ECHECKSUM,
			       "%s: chunk %llu at offset %llu: checksum mismatch over %llu stored "
			       "bytes (XXH3 %016llx, index says %016llx)",
			       c->path ? c->path : "?", (unsigned long long)c->chunk,
			       (unsigned long long)c->offset, (unsigned long long)n,
			       (unsigned long long)h, (unsigned long long)w->verify_later.xxh3);
	}
	if (!fuse)
		copy_ops(s);
	atomic_fetch_add_explicit(&w->ld->stats.fill_checked, 1, memory_order_relaxed);
	return 0;
}

/* Make worker w's noted copies (checked, when its chunk waits for its
 * check).  0, or the check's error. */
static int
fill_copy(rf_loader *ld, struct worker *w, int parallel)
{
	rf_copy_sink *s = &w->sink;
	int rc = 0;
	if (w->verify_later.on) {
		w->verify_later.on = 0;
		rc = copy_checked(w, s);
	} else {
		copy_ops(s);
	}
	if (rc == 0) {
		atomic_fetch_add_explicit(&ld->stats.fill_bytes, s->bytes, memory_order_relaxed);
		if (parallel)
			atomic_fetch_add_explicit(&ld->stats.fill_bytes_parallel, s->bytes,
						  memory_order_relaxed);
	}
	return rc;
}

/* The copies of a sink are made: drop its counts (each run of one tag was
 * counted once) and stage what that completed (takes mu). */
static void
fill_release(rf_loader *ld, rf_copy_sink *sink)
{
	pthread_mutex_lock(&ld->mu);
	for (size_t i = 0; i < sink->n; i++)
		if (i == 0 || sink->ops[i].tag != sink->ops[i - 1].tag)
			ld->gather.pending[sink->ops[i].tag]--;
	sink->n = 0;
	sink->bytes = 0;
	ld->wake_defer = 1;
	fill_drain_locked(ld);
	rf_ld_unlock_wake(ld);
}

/*
 * The turn holder is about to wait for a staging place (mu held): the
 * places may all be taken by batches waiting for its own noted copies,
 * which it makes only after its turn.  Make them now (every batch they go
 * to was counted when it closed), so the wait always ends.
 */
static int
fill_flush_if_full_locked(rf_loader *ld)
{
	rf_copy_sink *s = ld->gather.sink;
	if (!s || s->n == 0 || rf_ld_copied_held(ld) < ld->mem.n_stage)
		return 0;
	struct worker *w = &ld->workers[ld->gather.sink_worker];
	count_sink_locked(ld);
	pthread_mutex_unlock(&ld->mu);
	int rc = fill_copy(ld, w, 0);
	if (rc == 0)
		fill_release(ld, s);
	pthread_mutex_lock(&ld->mu);
	ld->gather.sink_counted = 0;
	return rc;
}

/*
 * The window holds chunks past their turn and gathers from several: its
 * copies may leave the turn only where every chunk stays in its read slot
 * as read (uncompressed, no map, no image step) and nothing is checked in
 * the batch in the turn (window.sums) or substituted (on_error skip).  A
 * chunk let go in a turn then keeps its slot until that turn's copies are
 * made (rf_ld_fill_unref_later).
 */
static int
window_fill_ok(const rf_loader *ld)
{
	return ld->window.on && !ld->mix && !ld->map.on && !ld->image && !ld->window.sums &&
	       !ld->skip.on && !ld->compressed;
}

/* Mixtures hold chunks past their turn and gather from several: they keep
 * the copies in the turn, as one worker does; so does the window, but
 * where window_fill_ok.  So do batches in place: they are staged in the
 * turn, and a copied batch before them, staged later by its last copier,
 * would be handed out after them. */
static void
fill_choose(rf_loader *ld)
{
	ld->gather.defer = ld->nworkers > 1 && (!ld->window.on || window_fill_ok(ld)) &&
			   !ld->mix && ld->gather.fq && !ld->gather.inplace_ok;
}

/*
 * The window's parallel fill: a turn's noted copies read chunks it let go
 * of (rf_ld_window_entry_release) and chunks still held when it ends,
 * which a later turn may let go of while these copies are made.  So the
 * slots of the first are returned only after the copies (fill_unref_now),
 * and the second get a reference more at the turn's end (fill_pin_locked),
 * dropped then too.  A turn lets go of at most the chunks held at its start
 * and the one it holds (window.cap + 1) and ends holding at most
 * window.cap; past that (never) the stream fails rather than return a slot
 * too early.
 */
void
rf_ld_fill_unref_later(rf_loader *ld, unsigned slot)
{
	struct worker *w = &ld->workers[ld->gather.sink_worker];
	if (w->nunref < w->unref_cap) {
		w->unref[w->nunref++] = slot;
		return;
	}
	pthread_mutex_lock(&ld->mu);
	rf_ld_fail_locked(ld, -EOVERFLOW, "loader: window: more chunks let go in one turn "
			  "than the window holds");
	pthread_mutex_unlock(&ld->mu);
}

/* The end of worker w's turn (mu held): the chunks the window holds stay
 * in their slots until w's noted copies are made. */
static void
fill_pin_locked(rf_loader *ld, struct worker *w)
{
	if (!ld->window.on || w->sink.n == 0)
		return;
	for (uint64_t e = ld->window.lo; e < ld->window.hi; e++) {
		const struct wentry *we = &ld->window.tab[e % ld->window.cap];
		if (!we->used || we->slot < 0)
			continue;
		if (w->nunref == w->unref_cap) {
			rf_ld_fail_locked(ld, -EOVERFLOW, "loader: window: more chunks held "
					  "than the window's");
			return;
		}
		ld->slot_refs[we->slot]++;
		w->unref[w->nunref++] = (unsigned)we->slot;
	}
}

/* The copies of worker w's turn are made: its window's slots go back. */
static void
fill_unref_now(rf_loader *ld, struct worker *w)
{
	for (uint32_t i = 0; i < w->nunref; i++)
		rf_ld_read_slot_unref(ld, w->unref[i]);
	w->nunref = 0;
}

int
rf_ld_fill_setup(rf_loader *ld)
{
	unsigned n = ld->nworkers ? ld->nworkers : 1;
	ld->gather.turn_cv = calloc(n, sizeof(*ld->gather.turn_cv));
	ld->gather.pending = calloc(ld->mem.nslots, sizeof(*ld->gather.pending));
	ld->gather.writers = calloc(ld->mem.nslots, sizeof(*ld->gather.writers));
	ld->gather.fq_cap = ld->mem.n_stage + 1;
	ld->gather.fq = calloc(ld->gather.fq_cap, sizeof(*ld->gather.fq));
	if (!ld->gather.turn_cv || !ld->gather.pending || !ld->gather.writers || !ld->gather.fq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (; ld->gather.nturn_cv < n; ld->gather.nturn_cv++)
		pthread_cond_init(&ld->gather.turn_cv[ld->gather.nturn_cv], NULL);
	pthread_cond_init(&ld->gather.fill_cv, NULL);
	ld->gather.fill_cv_init = 1;
	fill_choose(ld);
	for (unsigned i = 0; ld->gather.defer && ld->window.on && i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		w->unref_cap = 2 * ld->window.cap + 1;
		w->unref = calloc(w->unref_cap, sizeof(*w->unref));
		if (!w->unref)
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	}
	return 0;
}

void
rf_ld_fill_reset(rf_loader *ld)
{
	ld->gather.fq_head = ld->gather.fq_len = 0;
	ld->gather.fill_waiting = 0;
	ld->gather.sink = NULL;
	if (ld->gather.pending)
		memset(ld->gather.pending, 0, ld->mem.nslots * sizeof(*ld->gather.pending));
	if (ld->gather.writers)
		memset(ld->gather.writers, 0, ld->mem.nslots * sizeof(*ld->gather.writers));
	/* The slots' references were reset with them. */
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		ld->workers[i].sink.n = ld->workers[i].nunref = 0;
	fill_choose(ld);
}

void
rf_ld_fill_free(rf_loader *ld)
{
	for (unsigned i = 0; i < ld->gather.nturn_cv; i++)
		pthread_cond_destroy(&ld->gather.turn_cv[i]);
	if (ld->gather.fill_cv_init)
		pthread_cond_destroy(&ld->gather.fill_cv);
	ld->gather.nturn_cv = 0;
	ld->gather.fill_cv_init = 0;
	free(ld->gather.turn_cv);
	free(ld->gather.pending);
	free(ld->gather.writers);
	free(ld->gather.fq);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++) {
		rf_copy_sink_free(&ld->workers[i].sink);
		XXH3_freeState(ld->workers[i].xxh);
		ld->workers[i].xxh = NULL;
		free(ld->workers[i].unref);
		ld->workers[i].unref = NULL;
		ld->workers[i].unref_cap = ld->workers[i].nunref = 0;
	}
}

/* Wake every worker waiting for its turn or for the fill (mu held): the
 * pipeline stops or failed. */
void
rf_ld_turns_wake_all_locked(rf_loader *ld)
{
	for (unsigned i = 0; i < ld->gather.nturn_cv; i++)
		pthread_cond_broadcast(&ld->gather.turn_cv[i]);
	if (ld->gather.fill_cv_init)
		pthread_cond_broadcast(&ld->gather.fill_cv);
}

void
rf_ld_turn_wait_locked(rf_loader *ld, uint64_t seq)
{
	pthread_cond_t *cv = &ld->gather.turn_cv[seq % ld->gather.nturn_cv];
	while (!ld->stop && !ld->failed && ld->next_gather != seq)
		pthread_cond_wait(cv, &ld->mu);
}

/* Step seq's turn is over (next_gather moved past it): wake the next. */
void
rf_ld_turn_pass_locked(rf_loader *ld, uint64_t seq)
{
	pthread_cond_signal(&ld->gather.turn_cv[(seq + 1) % ld->gather.nturn_cv]);
}

/* At the start of worker w's turn: its copies go to its sink. */
void
rf_ld_fill_turn_begin(rf_loader *ld, struct worker *w)
{
	if (!ld->gather.defer)
		return;
	rf_copy_sink *s = &w->sink;
	s->n = 0;
	s->bytes = 0;
	s->tag = ld->gather.cur_slot;
	ld->gather.sink = s;
	ld->gather.sink_worker = (unsigned)(w - ld->workers);
	ld->gather.sink_counted = 0;
	ld->gather.asmb.sink = s;
}

/*
 * At the end of worker w's turn of step seq, whose gather returned rc:
 * count its copies into the batch still open, pass the turn on (rc 0),
 * then make the copies outside the turn, in parallel with the other
 * workers', and stage the batches they completed.  On an error the batches
 * before this step are staged before the caller reports it, so the
 * consumer gets every batch before the failing point, then the error.
 * Returns rc.
 */
int
rf_ld_fill_turn_end(rf_loader *ld, struct worker *w, uint64_t seq, int rc)
{
	if (!ld->gather.defer)
		return rc;
	rf_copy_sink *s = &w->sink;
	pthread_mutex_lock(&ld->mu);
	count_sink_locked(ld);
	fill_pin_locked(ld, w);
	ld->gather.sink = NULL;
	ld->gather.asmb.sink = NULL;
	w->turn_passed = rc == 0;
	if (rc == 0) {
		ld->next_gather++;
		rf_ld_turn_pass_locked(ld, seq);
		pthread_cond_signal(&ld->reader_cv);
	}
	pthread_mutex_unlock(&ld->mu);
	if (!w->fill_bad) {
		int crc = fill_copy(ld, w, 1);
		if (rc == 0)
			rc = crc;
	}
	/* The first batch this step's copies went to (or, with none, the
	 * open one): the batches before it are the stream before the error. */
	int first = s->n ? s->ops[0].tag : -1;
	if (!w->fill_bad)
		fill_release(ld, s);
	fill_unref_now(ld, w);
	if (rc < 0 && rc != -ECANCELED) {
		/* Staged in order up to this step's first batch, which never is
		 * when its chunk failed the check (its count stays); then the
		 * caller reports the error behind them. */
		pthread_mutex_lock(&ld->mu);
		for (;;) {
			if (ld->stop || ld->failed)
				break;
			if (w->fill_bad) {
				if (ld->gather.fq_len == 0 ||
				    (!ld->gather.fq[ld->gather.fq_head].direct &&
				     (int)ld->gather.fq[ld->gather.fq_head].slot == first))
					break;
			} else if (ld->gather.fq_len == 0 &&
				   (ld->gather.cur_slot < 0 ||
				    ld->gather.pending[ld->gather.cur_slot] == 0)) {
				break;
			}
			ld->gather.fill_waiting++;
			pthread_cond_wait(&ld->gather.fill_cv, &ld->mu);
			ld->gather.fill_waiting--;
		}
		pthread_mutex_unlock(&ld->mu);
		s->n = 0;
		s->bytes = 0;
	}
	return rc;
}

/* ------------------------------------------------------------ the gather */

/* Take a staging slot for a new batch (the turn holder only).  Returns 0 or
 * -ECANCELED when the pipeline stops. */
int
rf_ld_gather_open_batch(rf_loader *ld, uint64_t epoch, uint64_t first)
{
	pthread_mutex_lock(&ld->mu);
	int frc = fill_flush_if_full_locked(ld);
	if (frc < 0) {
		pthread_mutex_unlock(&ld->mu);
		return frc;
	}
	while (!ld->stop && !ld->failed && rf_ld_copied_held(ld) >= ld->mem.n_stage)
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
	if (ld->gather.sink) {
		ld->gather.asmb.sink = ld->gather.sink;
		ld->gather.sink->tag = (int)slot;
		ld->gather.sink_counted = 0;
	}
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
	if (ld->gather.defer)
		count_sink_locked(ld);
	if (ld->failed || ld->stop) {
		pthread_mutex_unlock(&ld->mu);
		rf_ld_gather_drop_batch(ld);
		return;
	}
	s.index = ld->gather.batch_counter++;
	if (ld->gather.defer) {
		fill_queue_unlock(ld, &s);
	} else {
		rf_ld_stage_batch_unlock(ld, &s);
	}
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
	int frc = fill_flush_if_full_locked(ld);
	if (frc < 0) {
		pthread_mutex_unlock(&ld->mu);
		return frc;
	}
	while (!ld->stop && !ld->failed && rf_ld_copied_held(ld) >= ld->mem.n_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	ld->stage_held++;
	ld->slot_refs[slot]++;
	s.index = ld->gather.batch_counter++;
	if (ld->gather.defer)
		fill_queue_unlock(ld, &s); /* behind the batches still filling */
	else
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
 * window.sums (rf_ld_window_choose_sums): the `added` samples just copied
 * into the open batch from plan items it[0..added), consecutive samples of
 * one held chunk, checked against their rows of the chunk's per-sample
 * checksums while their bytes are in the cache.  0, or RF_ECHECKSUM naming
 * the sample and the field.
 */
/*
 * A value that does not match its row of the chunk's per-sample table: the
 * row may be the damaged part.  The chunk's XXH3-64 over all its stored
 * bytes settles it: when it holds, every value is as packed, the table is
 * what is damaged, and the chunk's later samples go unchecked by rows (the
 * whole hash covered them).  Returns 1 then, 0 when the values are bad.
 */
static int
window_table_damaged(rf_loader *ld, const rf_plan_item *it, const rf_chunk_ctx *ctx)
{
	struct wentry *we = &ld->window.tab[it->read % ld->window.cap];
	uint64_t c = 0;
	if (we->slot < 0 || rf_dataset_find_chunk(ld->ds, it->sample, &c) < 0)
		return 0;
	const rf_chunk_info *ci = &ld->chunks[c];
	if (XXH3_64bits(rf_ld_read_slot_bytes(ld, we->slot), (size_t)ci->stored_bytes) != ci->xxh3)
		return 0;
	rf_log(&ld->diag, RF_LOG_WARN, "%s: chunk %" PRIu64 " at offset %" PRIu64 ": its "
	       "per-sample checksum table is damaged (its values match the chunk's XXH3-64); "
	       "the chunk was checked whole instead (ringfeed verify %s)", ctx->path, ctx->chunk,
	       ctx->offset, ctx->path);
	we->sums = NULL;
	return 1;
}

static int
window_check(rf_loader *ld, const rf_plan_item *it, const rf_chunk_ctx *ctx, uint32_t added,
	     rf_diag *d)
{
	const uint8_t *tab = ld->window.tab[it->read % ld->window.cap].sums;
	if (!tab)
		return 0; /* substitutes (on_error skip) */
	const rf_batch_layout *l = &ld->layout;
	const uint32_t nf = ld->schema->nfields, n0 = ld->gather.asmb.n - added;
	const uint8_t *base = ld->gather.asmb.base;
	for (uint32_t j = 0; j < added; j++) {
		const uint8_t *row = tab + (uint64_t)(it->offset + j) * nf * 8;
		for (uint32_t q = 0; q < l->nparts; q++) {
			const rf_batch_part *p = &l->part[q];
			uint64_t h = XXH3_64bits(base + p->off + (uint64_t)(n0 + j) * p->value_bytes,
						 (size_t)p->value_bytes);
			uint64_t want = rf_le64(row + 8 * (uint64_t)p->field);
			if (h != want && window_table_damaged(ld, it, ctx))
				return 0; /* the chunk's whole hash vouches for it */
			if (h != want)
				return rf_fail(d, RF_ECHECKSUM,
					       "%s: chunk %" PRIu64 " at offset %" PRIu64 ": sample %"
					       PRIu64 " (%u of the chunk), field %s: checksum mismatch "
					       "over its %" PRIu64 " bytes (XXH3 %016" PRIx64 ", the "
					       "chunk's per-sample checksums say %016" PRIx64 ")",
					       ctx->path, ctx->chunk, ctx->offset, it[j].sample,
					       it->offset + j, ld->schema->fields[p->field].name,
					       p->value_bytes, h, want);
		}
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
		if (added && ld->window.sums) {
			rc = window_check(ld, it, ctx, added, d);
			if (rc < 0)
				return rc;
		}
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
