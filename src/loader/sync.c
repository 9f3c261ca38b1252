/* SPDX-License-Identifier: MIT */
/*
 * The hand-offs under the loader's one mutex: deferred wake-ups, the
 * staged FIFO, fail and end markers, read slot counts and references;
 * clocks and thread CPU accounting.
 */
#include "loader/internal.h"

uint64_t
rf_ld_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
rf_ld_thread_cpu_ns(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &cid) || clock_gettime(cid, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called by a loader thread just before it returns. */
void
rf_ld_thread_exit_account(rf_loader *ld, unsigned cpu_index)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		atomic_fetch_add_explicit(&ld->stats.cpu_done_ns,
					  (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
					  memory_order_relaxed);
	pthread_mutex_lock(&ld->mu);
	ld->stats.cpu[cpu_index].live = 0;
	pthread_mutex_unlock(&ld->mu);
}

/* ------------------------------------------------------- queue helpers */

void
rf_ld_note_max(unsigned *mx, unsigned v)
{
	if (v > *mx)
		*mx = v;
}

/* Append to the staged FIFO (mu held).  Its capacity is n_stage + 2: at
 * most n_stage batches (one per staging slot) plus the end and error
 * markers. */
/*
 * Wake-ups on the per-batch paths are signalled after mu is dropped: a
 * thread woken while the signaller still holds mu runs only to block on mu
 * again, two more context switches per batch on a machine with few cores.
 * Between wake_defer = 1 and rf_ld_unlock_wake, rf_ld_wake_locked notes the wake-up;
 * elsewhere it signals at once.  mu must stay held from wake_defer = 1 to
 * rf_ld_unlock_wake (no wait, no unlock between), so that only that thread defers.
 * The waiters re-check their condition under mu, so a signal after the
 * unlock is never lost.
 */
static void
signal_cvs(rf_loader *ld, unsigned which)
{
	if (which & WAKE_CONS)
		pthread_cond_signal(&ld->cons_cv);
	if (which & WAKE_STAGE)
		pthread_cond_signal(&ld->stage_cv);
	if (which & WAKE_COPY)
		pthread_cond_signal(&ld->copy_cv);
}

void
rf_ld_wake_locked(rf_loader *ld, unsigned which)
{
	if (ld->wake_defer)
		ld->wake_due |= which;
	else
		signal_cvs(ld, which);
}

void
rf_ld_unlock_wake(rf_loader *ld)
{
	unsigned due = ld->wake_due;
	ld->wake_due = 0;
	ld->wake_defer = 0;
	pthread_mutex_unlock(&ld->mu);
	signal_cvs(ld, due);
}

void
rf_ld_sq_push_locked(rf_loader *ld, const struct staged *s)
{
	ld->sq[(ld->sq_head + ld->sq_len) % ld->sq_cap] = *s;
	ld->sq_len++;
	rf_ld_note_max(&ld->stats.max_staged, ld->sq_len);
	/* In zero-copy a batch waits for a free buffer, which a release in
	 * the consumer's thread (or the copy thread's reclaim, already woken
	 * for it) hands it: only markers are the copy thread's.  A wake-up per
	 * batch was a third of the context switches of a pass in place. */
	if (!ld->mem.in_place || s->kind != SK_BATCH)
		rf_ld_wake_locked(ld, WAKE_COPY);
}


/* Stop the pipeline on an error (mu held).  The first error wins; it is
 * queued behind the batches already staged, so the consumer receives every
 * batch before the failing point and then the error. */
void
rf_ld_fail_locked(rf_loader *ld, int code, const char *msg)
{
	if (ld->failed || ld->stop)
		return;
	ld->failed = 1;
	ld->fail_code = code;
	snprintf(ld->fail_msg, sizeof(ld->fail_msg), "%s", msg);
	struct staged m = {.kind = SK_ERROR};
	rf_ld_sq_push_locked(ld, &m);
	pthread_cond_broadcast(&ld->reader_cv);
	pthread_cond_broadcast(&ld->work_cv);
	pthread_cond_broadcast(&ld->stage_cv);
	pthread_cond_broadcast(&ld->cons_cv);
	rf_ld_turns_wake_all_locked(ld);
}

/* The end of the stream, once the last step has been gathered (mu held). */
void
rf_ld_maybe_end_locked(rf_loader *ld)
{
	/* After the batches still filling (the parallel fill, gather.c). */
	if (ld->plan_done && !ld->end_pushed && !ld->failed && ld->next_gather == ld->total_steps &&
	    ld->gather.fq_len == 0) {
		ld->end_pushed = 1;
		struct staged m = {.kind = SK_END};
		rf_ld_sq_push_locked(ld, &m);
	}
}

/* Staged batches that hold a staging place of the ring (mu held): all
 * but those in place, which inplace_stage bounds apart. */
unsigned
rf_ld_copied_held(const rf_loader *ld)
{
	return ld->stage_held - ld->inplace_held;
}

/* Ring slots in use (mu held): reads and staged batches, or in map mode,
 * where a read holds no ring slot, the staged batches alone (but those in
 * place, which hold none either). */
unsigned
rf_ld_ring_used(const rf_loader *ld)
{
	return ld->map.on ? rf_ld_copied_held(ld) : ld->read_held + ld->stage_held;
}

/* The count's part of giving a read slot back (mu held).  In map mode the
 * slot is a number in map.free; a number that is not a read's, or one
 * already free, is ignored (as the ring ignores such a release): it must
 * never go to two reads. */
static void
release_read_slot_locked(rf_loader *ld, unsigned slot)
{
	if (ld->map.on) {
		if (slot < ld->mem.n_ring || slot >= ld->mem.nslots || ld->map.free_is[slot])
			return;
		ld->map.free_is[slot] = 1;
		ld->map.free[ld->map.free_n++] = slot;
	}
	ld->read_held--;
	pthread_cond_signal(&ld->reader_cv);
}

static void
release_read_slot(rf_loader *ld, unsigned slot)
{
	/* Back to the ring first, then the count: the reader takes a slot only
	 * when the count allows, so the ring always has one for it. */
	if (!ld->map.on)
		rf_ring_release(ld->ring, slot);
	pthread_mutex_lock(&ld->mu);
	release_read_slot_locked(ld, slot);
	pthread_mutex_unlock(&ld->mu);
}

/* rf_ld_read_slot_unref with mu held, for the consumer's release of a
 * batch that lies in a read slot or a map: one critical section instead of
 * three (the ring's own lock nests inside mu, as nowhere the other way). */
void
rf_ld_read_slot_unref_locked(rf_loader *ld, unsigned slot)
{
	if (--ld->slot_refs[slot] > 0)
		return;
	if (!ld->map.on)
		rf_ring_release(ld->ring, slot);
	release_read_slot_locked(ld, slot);
}

/* Drop one reference to a read slot (the worker's own, or a direct batch's
 * once its copy completed); the last one returns the slot. */
void
rf_ld_read_slot_unref(rf_loader *ld, unsigned slot)
{
	pthread_mutex_lock(&ld->mu);
	unsigned left = --ld->slot_refs[slot];
	pthread_mutex_unlock(&ld->mu);
	if (left == 0)
		release_read_slot(ld, slot);
}

/* Where a read slot's chunk bytes are: the slot itself, or the chunk in
 * its shard's map (map mode). */
const uint8_t *
rf_ld_read_slot_bytes(const rf_loader *ld, unsigned slot)
{
	return ld->map.on ? ld->map.rbase[slot] : (const uint8_t *)rf_ring_slot(ld->ring, slot);
}
