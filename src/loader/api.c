/* SPDX-License-Identifier: MIT */
/*
 * The consumer's side of the public loader API: next, release, batch
 * access, position save/load, rewind, errmsg, stats, close; fork() checks.
 */
#include "loader/internal.h"

/* ------------------------------------------------------- fork() */

/* fork() copies a loader into the child without its threads, and with its
 * mutex, condition variables and io_uring as they were at that instant
 * (the ring shared with the parent), so a child that waits on it waits
 * forever.  Every public entry point compares the fork count now with the
 * one at open, and a child gets RF_EFORK at once, touching nothing the
 * parent's threads use.  The count is bumped by a pthread_atfork handler:
 * a load and a compare, no system call on the consumer's fast path. */
static atomic_uint fork_count;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void
fork_child(void)
{
	atomic_fetch_add_explicit(&fork_count, 1, memory_order_relaxed);
}

static void
fork_watch(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

/* Note the process and fork count a loader is opened in. */
void
rf_ld_fork_note(rf_loader *ld)
{
	pthread_once(&fork_once, fork_watch);
	ld->owner_pid = getpid();
	ld->owner_forks = atomic_load_explicit(&fork_count, memory_order_relaxed);
}

static int
forked(const rf_loader *ld)
{
	return atomic_load_explicit(&fork_count, memory_order_relaxed) != ld->owner_forks;
}

RF_API int
rf_loader_forked(const rf_loader *ld)
{
	return ld ? forked(ld) : 0;
}

RF_API unsigned
rf_fork_generation(void)
{
	pthread_once(&fork_once, fork_watch);
	return atomic_load_explicit(&fork_count, memory_order_relaxed);
}

/* RF_EFORK with its message when ld is used in a child of the process
 * that opened it, else 0. */
static int
fork_check(rf_loader *ld)
{
	if (!forked(ld))
		return 0;
	return rf_fail(&ld->diag, RF_EFORK,
		       "loader: opened in process %ld and used in process %ld, a child of fork(): "
		       "a loader's threads do not survive fork(); open the loader in each process "
		       "that reads (in each DataLoader worker: open it in the dataset's __iter__)",
		       (long)ld->owner_pid, (long)getpid());
}

/* RF_EUSAGE when rf_loader_stop stopped ld: release, errmsg, stats,
 * state_save and close remain (next ends the stream, loader_next). */
static int
stopped_check(rf_loader *ld, const char *what)
{
	if (!ld->stopped)
		return 0;
	return rf_fail(&ld->diag, RF_EUSAGE, "loader: %s after the loader was stopped "
		       "(rf_loader_stop): open a new loader", what);
}

RF_API void
rf_loader_close(rf_loader **ldp)
{
	if (!ldp || !*ldp)
		return;
	/* In a child of fork(): the threads to stop are the parent's, the
	 * mutex may have been held at the fork, the io_uring and the device
	 * are shared with the parent, so nothing is stopped, freed or closed.
	 * The memory is the child's copy of the parent's and goes with the
	 * child (at exit or exec). */
	if (!forked(*ldp)) {
		/* The full thread's checks for the consumer (full.c) outlive
		 * that thread: freed once every thread has stopped. */
		rf_ld_pipeline_stop(*ldp);
		uint64_t *cw = (*ldp)->full.cw;
		rf_ld_loader_free(*ldp);
		free(cw);
	}
	*ldp = NULL;
}

RF_API void
rf_loader_stop(rf_loader *ld)
{
	if (!ld || forked(ld))
		return;
	ld->stopped = 1;
	rf_ld_pipeline_stop(ld);
	/* The copy stream (a thread of its own on the host backend): the
	 * threads that used it are gone, the batches held do not need it. */
	if (ld->dev && ld->copy.stream) {
		ld->dev->ops->stream_sync(ld->dev, ld->copy.stream);
		ld->dev->ops->stream_destroy(ld->dev, ld->copy.stream);
		ld->copy.stream = NULL;
	}
	/* The reader's threads and connections; the ring it read into stays. */
	rf_io_close(&ld->io);
}

/* ------------------------------------------------------------ consumer */

static int
loader_next(rf_loader *ld, const rf_batch **out, uint64_t wait_ns)
{
	if (!ld || !out)
		return -EINVAL;
	*out = NULL;
	if (forked(ld))
		return fork_check(ld);
	pthread_mutex_lock(&ld->mu);
	if (ld->stopped) {
		/* A stop ends the stream: no batch comes after it (batches
		 * made ready before it included), and a caller's loop ends
		 * as at the last batch.  An error that had stopped the
		 * stream first is still that error. */
		int rc = ld->full.cons_rc ? ld->full.cons_rc : ld->delivery.final_code;
		if (rc)
			snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", ld->delivery.final_msg);
		else if (ld->failed && ld->fail_code) {
			rc = ld->fail_code; /* not yet reached the consumer */
			snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", ld->fail_msg);
		}
		pthread_mutex_unlock(&ld->mu);
		return rc;
	}
	if (ld->delivery.held >= ld->resolved.depth) {
		unsigned held = ld->delivery.held;
		pthread_mutex_unlock(&ld->mu);
		return rf_fail(&ld->diag, RF_EHELD,
			       "loader: the consumer holds %u batches, all of depth %u device "
			       "buffers: release one (rf_loader_release) before asking for the next, "
			       "or open with a larger depth", held, ld->resolved.depth);
	}
	/* The ready path takes the lock and nothing else: no clock read, no
	 * system call.  Time is measured only when there is something to wait
	 * for. */
	uint64_t t0 = 0;
	int rc = 0, timed_out = 0;
	struct timespec deadline;
	if (ld->full.cons_rc) {
		/* A batch failed its checks here: none after it goes out. */
		rc = ld->full.cons_rc;
		snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", ld->delivery.final_msg);
		pthread_mutex_unlock(&ld->mu);
		return rc;
	}
	rf_ld_zc_promote_locked(ld);
	int have_deadline = 0;
	while (ld->delivery.rq_len == 0) {
		if (ld->delivery.final_code) {
			rc = ld->delivery.final_code;
			snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", ld->delivery.final_msg);
			break;
		}
		if (ld->delivery.eos)
			break;
		if (!wait_ns || timed_out) {
			/* A batch of the consumer's own, parked when a wait
			 * for its turn ran out of time (full.c), staged now
			 * when its turn has come. */
			if (ld->full.fm && rf_ld_full_help_locked(ld, 0, NULL) > 0)
				continue;
			rc = -EAGAIN;
			break;
		}
		if (wait_ns != UINT64_MAX && !have_deadline) {
			uint64_t now = rf_ld_now_ns();
			uint64_t end = now + (wait_ns < UINT64_MAX - now ? wait_ns : UINT64_MAX - now);
			deadline.tv_sec = (time_t)(end / 1000000000u);
			deadline.tv_nsec = (long)(end % 1000000000u);
			have_deadline = 1;
		}
		/* No batch ready: from here the consumer is held up, waiting
		 * or filling a batch itself (stall_ns counts both). */
		if (!t0)
			t0 = rf_ld_now_ns();
		/* Full shuffling from memory: fill the next batch here
		 * rather than wait for one (full.c), within the time given. */
		if (ld->full.fm) {
			int h = rf_ld_full_help_locked(ld, 1, have_deadline ? &deadline : NULL);
			if (h < 0)
				timed_out = 1;
			if (h)
				continue;
		}
		if (wait_ns == UINT64_MAX)
			pthread_cond_wait(&ld->cons_cv, &ld->mu);
		else if (pthread_cond_timedwait(&ld->cons_cv, &ld->mu, &deadline) == ETIMEDOUT)
			timed_out = 1;
	}
	if (t0)
		ld->stats.stall_ns += rf_ld_now_ns() - t0;
	if (ld->delivery.rq_len == 0) {
		pthread_mutex_unlock(&ld->mu);
		return rc;
	}
	struct dbuf *b = &ld->delivery.dbufs[ld->delivery.rq[ld->delivery.rq_head]];
	ld->delivery.rq_head = (ld->delivery.rq_head + 1) % ld->resolved.depth;
	ld->delivery.rq_len--;
	if (b->zc_src && b->src.check) {
		/* Full shuffling left this batch's checks to the consumer's
		 * thread (full.c, full_main_mem).  Out of the ready queue and
		 * not held, nobody else touches the buffer meanwhile. */
		pthread_mutex_unlock(&ld->mu);
		char msg[RF_ERRMSG_MAX];
		int vr = rf_ld_full_check_lent(ld, b, msg, sizeof(msg));
		pthread_mutex_lock(&ld->mu);
		ld->full.cw_busy &= ~(1u << (b->src.check - 1));
		b->src.check = 0;
		if (vr < 0) {
			ld->full.cons_rc = vr;
			rf_ld_fail_locked(ld, vr, msg);
			if (!ld->delivery.final_code) {
				ld->delivery.final_code = vr;
				snprintf(ld->delivery.final_msg, sizeof(ld->delivery.final_msg), "%s",
					 msg);
			}
			snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", msg);
			b->state = DB_FREE;
			rf_ld_zc_recycle_locked(ld, b, 1);
			rf_ld_unlock_wake(ld);
			return vr;
		}
	}
	b->state = DB_HELD;
	ld->delivery.held++;
	rf_ld_note_max(&ld->stats.max_held, ld->delivery.held);
	ld->delivery.epoch = b->pub.epoch;
	ld->delivery.done = b->plan_done;
	ld->delivery.part = b->plan_part;
	ld->stats.batches++;
	ld->stats.samples += b->pub.samples;
	ld->stats.bytes_delivered += b->pub.bytes;
	if (b->subst) {
		atomic_fetch_add_explicit(&ld->stats.samples_substituted, b->subst,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&ld->stats.chunks_skipped, b->subst_chunks,
					  memory_order_relaxed);
	}
	pthread_mutex_unlock(&ld->mu);
	*out = &b->pub;
	return 0;
}

RF_API int
rf_loader_next(rf_loader *ld, const rf_batch **batch)
{
	return loader_next(ld, batch, UINT64_MAX);
}

RF_API int
rf_loader_next_timeout(rf_loader *ld, const rf_batch **batch, uint64_t timeout_ns)
{
	return loader_next(ld, batch, timeout_ns);
}

RF_API int
rf_loader_try_next(rf_loader *ld, const rf_batch **batch)
{
	return loader_next(ld, batch, 0);
}

/* The dbuf of a batch, checked to be one of ld's. */
static struct dbuf *
batch_dbuf(rf_loader *ld, const rf_batch *batch)
{
	if (!ld || !batch || !ld->delivery.dbufs)
		return NULL;
	/* Compare addresses as integers: a pointer into the middle of a
	 * dbuf (or into another object) must not become an index. */
	uintptr_t p = (uintptr_t)(const void *)batch, base = (uintptr_t)ld->delivery.dbufs;
	if (p < base || p - base >= (uintptr_t)ld->resolved.depth * sizeof(struct dbuf) ||
	    (p - base) % sizeof(struct dbuf) != 0)
		return NULL;
	return &ld->delivery.dbufs[(p - base) / sizeof(struct dbuf)];
}

RF_API int
rf_batch_wait(const rf_batch *batch, void *stream)
{
	if (!batch)
		return -EINVAL;
	const struct dbuf *cb = (const struct dbuf *)(const void *)batch;
	rf_loader *ld = cb->ld;
	struct dbuf *b = batch_dbuf(ld, batch);
	if (!b)
		return -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	pthread_mutex_lock(&ld->mu);
	int held = b->state == DB_HELD;
	pthread_mutex_unlock(&ld->mu);
	if (!held)
		return rf_fail(&ld->diag, -EINVAL, "loader: rf_batch_wait on a batch not held");
	int rc = ld->dev->ops->stream_wait_event(ld->dev, stream, b->copy_event);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: waiting for a batch failed: %s",
			       ld->dev_diag.msg);
	return 0;
}

RF_API int
rf_batch_field_read(const rf_batch *batch, uint32_t field, void *dst, uint64_t cap)
{
	if (!batch)
		return -EINVAL;
	const struct dbuf *cb = (const struct dbuf *)(const void *)batch;
	rf_loader *ld = cb->ld;
	struct dbuf *b = batch_dbuf(ld, batch);
	if (!b)
		return -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	if (field >= batch->nfields)
		return rf_fail(&ld->diag, -EINVAL, "loader: reading field %u of a batch of %u "
			       "fields", field, batch->nfields);
	pthread_mutex_lock(&ld->mu);
	int held = b->state == DB_HELD;
	pthread_mutex_unlock(&ld->mu);
	if (!held)
		return rf_fail(&ld->diag, -EINVAL, "loader: reading a batch not held");
	const rf_batch_field *f = &batch->fields[field];
	if (cap < f->bytes)
		return rf_fail(&ld->diag, -ENOSPC, "loader: field %s of batch %" PRIu64 " has %"
			       PRIu64 " bytes, more than the %" PRIu64 " given", f->name,
			       batch->index, f->bytes, cap);
	if (f->bytes == 0)
		return 0;
	const struct rf_device_ops *ops = ld->dev->ops;
	int rc = ops->event_sync(ld->dev, b->copy_event);
	if (rc == 0)
		rc = ops->copy_d2h(ld->dev, dst, f->data, f->bytes);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: reading field %s of batch %" PRIu64
			       " back failed: %s", f->name, batch->index, ld->dev_diag.msg);
	return 0;
}

RF_API int
rf_loader_release(rf_loader *ld, const rf_batch *batch, void *stream)
{
	struct dbuf *b = batch_dbuf(ld, batch);
	if (!b)
		return ld ? rf_fail(&ld->diag, -EINVAL, "loader: releasing %s, not a batch of "
				    "this loader", batch ? "a pointer" : "NULL") : -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	/* Claim the batch in the same critical section that checks it:
	 * two threads releasing it at once must not both pass (held would
	 * be decremented twice and wrap). */
	pthread_mutex_lock(&ld->mu);
	int held = b->state == DB_HELD;
	if (held)
		b->state = DB_RELEASING;
	pthread_mutex_unlock(&ld->mu);
	if (!held)
		/* Not held: its contents may be being refilled, so the message
		 * reads nothing from it. */
		return rf_fail(&ld->diag, -EINVAL, "loader: releasing a batch the consumer does "
			       "not hold (released twice?)");
	/* Record before the state changes: the copy thread looks at the event
	 * only once it sees DB_RELEASED. */
	int rc = ld->dev->ops->event_record(ld->dev, b->rel_event, stream);
	if (rc < 0) {
		/* Without an event, be safe: wait for the stream itself. */
		int src = ld->dev->ops->stream_sync(ld->dev, stream);
		rf_fail(&ld->diag, rc, "loader: recording the release of batch %" PRIu64
			" failed: %s", batch->index, ld->dev_diag.msg);
		if (src == 0)
			rf_log(&ld->diag, RF_LOG_WARN, "loader: released batch %" PRIu64 " after "
			       "waiting for its stream instead", batch->index);
		if (src < 0) {
			pthread_mutex_lock(&ld->mu);
			b->state = DB_HELD; /* still the consumer's */
			pthread_mutex_unlock(&ld->mu);
			return rc;
		}
	}
	/* Zero-copy: when the consumer's work is done already (always, for
	 * host work on no stream), the slot goes back now, without a trip
	 * through the copy thread. */
	int done = rc < 0 || (ld->mem.in_place && ld->dev->ops->event_query(ld->dev, b->rel_event) == 0);
	pthread_mutex_lock(&ld->mu);
	b->state = done ? DB_FREE : DB_RELEASED;
	ld->delivery.held--;
	if (b->zc_src && done)
		rf_ld_zc_recycle_locked(ld, b, 1);
	ld->wake_defer = 1;
	rf_ld_zc_promote_locked(ld);
	/* The copy thread has something to do only when the release is still
	 * pending or a marker heads the staged queue (the batches waiting for
	 * a buffer were just promoted, as far as buffers were free). */
	if (!ld->mem.in_place || !done ||
	    (ld->sq_len > 0 && ld->sq[ld->sq_head].kind != SK_BATCH))
		rf_ld_wake_locked(ld, WAKE_COPY);
	rf_ld_unlock_wake(ld);
	/* Released, if only after a wait for the stream: the batch is gone
	 * either way, and a caller must not release it again. */
	return 0;
}

RF_API int
rf_loader_state_save(rf_loader *ld, void *buf, size_t cap, size_t *len)
{
	if (!ld || !len)
		return -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	if (ld->mix) {
		pthread_mutex_lock(&ld->mu);
		uint64_t me = ld->delivery.epoch, md = ld->delivery.done;
		pthread_mutex_unlock(&ld->mu);
		int mrc = rf_ld_mix_state_save(ld, me, md, buf, cap, len);
		if (mrc < 0)
			return rf_fail(&ld->diag, mrc, "loader: saving the position (mixture epoch %"
				       PRIu64 ", batch %" PRIu64 ") failed: %s", me, md,
				       rf_strerror(mrc));
		return 0;
	}
	if (!ld->splan) {
		*len = RF_PLAN_STATE_SIZE;
		return rf_fail(&ld->diag, -EINVAL, "loader: an empty dataset has no position to save");
	}
	pthread_mutex_lock(&ld->mu);
	uint64_t epoch = ld->delivery.epoch, done = ld->delivery.done;
	uint32_t part = ld->delivery.part;
	pthread_mutex_unlock(&ld->mu);
	int rc = rf_plan_state_save_part(ld->splan, epoch, done, part, buf, cap, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: saving the position (epoch %" PRIu64 ", batch %"
			       PRIu64 ") failed: %s", epoch, done, rf_strerror(rc));
	return 0;
}

RF_API int
rf_loader_state_load(rf_loader *ld, const void *buf, size_t len)
{
	if (!ld)
		return -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	if (!buf)
		return rf_fail(&ld->diag, -EINVAL, "loader: loading a position from NULL");
	if (ld->stopped)
		return stopped_check(ld, "loading a position");
	if (!ld->gather.plan && !ld->mix)
		return rf_fail(&ld->diag, RF_ESTATE, "loader: an empty dataset has no position to load");
	pthread_mutex_lock(&ld->mu);
	unsigned held = ld->delivery.held;
	pthread_mutex_unlock(&ld->mu);
	if (held)
		return rf_fail(&ld->diag, -EBUSY, "loader: release the %u batches held before loading a "
			       "position", held);
	/* Where the stream stands, to come back to if the blob is refused. */
	uint8_t here[RF_STATE_MAX];
	size_t here_len = 0;
	int rc = ld->mix ? rf_ld_mix_state_save(ld, ld->delivery.epoch, ld->delivery.done, here,
						sizeof(here), &here_len)
			 : rf_plan_state_save_part(ld->splan, ld->delivery.epoch, ld->delivery.done,
						   ld->delivery.part, here, sizeof(here), &here_len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: saving the current position failed");
	/* A refused blob leaves the stream as it was (the end never moves). */
	uint64_t epoch_was = ld->resolved.epoch;
	rf_ld_pipeline_stop(ld);
	rf_ld_pipeline_reset(ld);
	ld->full.cons_rc = 0; /* and no batch left to check (full.c) */
	ld->full.cw_busy = 0;
	/* rf_batch.index counts batches handed out: the ones read ahead and
	 * dropped here were not. */
	ld->gather.batch_counter = ld->stats.batches;
	rc = rf_ld_plan_seek_blob(ld, buf, len);
	if (rc < 0) {
		char msg[RF_ERRMSG_MAX];
		snprintf(msg, sizeof(msg), "%s", ld->diag.msg);
		rf_ld_plan_seek_blob(ld, here, here_len);
		ld->resolved.epoch = epoch_was;
		snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", msg);
	}
	int src = rf_ld_start_threads(ld);
	return rc < 0 ? rc : src;
}

RF_API int
rf_loader_rewind(rf_loader *ld, uint64_t epoch)
{
	if (!ld)
		return -EINVAL;
	if (ld->stopped && !forked(ld))
		return stopped_check(ld, "rewinding");
	if (ld->cfg.epochs && (epoch < ld->reader.epoch_last - ld->cfg.epochs ||
			       epoch >= ld->reader.epoch_last))
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: rewind to epoch %" PRIu64 ": this "
			       "loader streams epochs %" PRIu64 "..%" PRIu64 " (rf_config.epoch + "
			       "epochs - 1)", epoch, ld->reader.epoch_last - ld->cfg.epochs,
			       ld->reader.epoch_last - 1);
	if (!ld->splan && !ld->mix)
		return 0; /* an empty dataset: no epoch has a batch */
	/* The start of an epoch is a position like any saved one: going
	 * through the blob reuses the checked way to restart the pipeline. */
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	int rc = ld->mix ? rf_ld_mix_state_save(ld, epoch, 0, blob, sizeof(blob), &len)
			 : rf_plan_state_save_at(ld->splan, epoch, 0, blob, sizeof(blob), &len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: rewind to epoch %" PRIu64 " failed: %s",
			       epoch, rf_strerror(rc));
	return rf_loader_state_load(ld, blob, len);
}

RF_API size_t
rf_loader_state_size(const rf_loader *ld)
{
	if (!ld)
		return 0;
	return ld->mix ? rf_ld_mix_state_size(ld) : RF_PLAN_STATE_SIZE;
}

RF_API int
rf_loader_source_stats(rf_loader *ld, size_t i, rf_source_stats *st)
{
	if (!ld || !st)
		return -EINVAL;
	if (forked(ld))
		return fork_check(ld);
	int rc = rf_ld_mix_source_stats(ld, i, st);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "rf_loader_source_stats: source %zu: %s", i,
			       ld->mix ? "out of range" : "the loader has no sources");
	return 0;
}

RF_API const char *
rf_loader_errmsg(const rf_loader *ld)
{
	return ld ? ld->diag.msg : "";
}

RF_API int
rf_loader_stats(rf_loader *ld, rf_stats *st)
{
	if (!ld || !st)
		return -EINVAL;
	/* As for rf_config: a size no header has had is an uninitialised
	 * struct, whose real extent is unknown, so nothing is written. */
	if (st->size != sizeof(rf_stats))
		return rf_fail(&ld->diag, RF_EUSAGE, "rf_loader_stats: stats size %" PRIu32
			       ", expected %zu (set .size = sizeof(rf_stats))", st->size,
			       sizeof(rf_stats));
	if (forked(ld))
		return fork_check(ld);
	rf_stats s;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.bytes_read = atomic_load_explicit(&ld->stats.bytes_read, memory_order_relaxed);
	s.read_ns = atomic_load_explicit(&ld->stats.read_ns, memory_order_relaxed);
	s.decode_ns = atomic_load_explicit(&ld->stats.decode_ns, memory_order_relaxed);
	s.copy_ns = atomic_load_explicit(&ld->stats.copy_ns, memory_order_relaxed);
	s.chunks = atomic_load_explicit(&ld->stats.chunks, memory_order_relaxed);
	s.chunks_skipped = atomic_load_explicit(&ld->stats.chunks_skipped, memory_order_relaxed);
	s.samples_substituted = atomic_load_explicit(&ld->stats.samples_substituted,
						     memory_order_relaxed);
	s.images_decoded = atomic_load_explicit(&ld->stats.images_decoded, memory_order_relaxed);
	uint64_t open_ns = (uint64_t)ld->stats.t_open.tv_sec * 1000000000u + (uint64_t)ld->stats.t_open.tv_nsec;
	s.wall_ns = rf_ld_now_ns() - open_ns;

	pthread_mutex_lock(&ld->mu);
	s.bytes_delivered = ld->stats.bytes_delivered;
	s.batches = ld->stats.batches;
	s.samples = ld->stats.samples;
	s.stall_ns = ld->stats.stall_ns;
	s.reads_inflight = ld->reader.inflight;
	s.reads_inflight_max = ld->stats.max_inflight;
	s.slots_used = rf_ld_ring_used(ld);
	s.slots_used_max = ld->stats.max_slots;
	s.slots_total = ld->mem.n_ring;
	s.staged = ld->sq_len;
	s.staged_max = ld->stats.max_staged;
	s.ready = ld->delivery.rq_len;
	s.ready_max = ld->stats.max_ready;
	s.held = ld->delivery.held;
	s.held_max = ld->stats.max_held;
	/* The full thread names its engine once it has mapped the shards. */
	snprintf(s.io_engine, sizeof(s.io_engine), "%s", ld->stats.io_engine);
	s.io_direct = ld->stats.io_direct;
	/* A thread marked live cannot finish exiting while mu is held (it
	 * takes mu to clear the mark), so its clock is valid here. */
	uint64_t cpu = atomic_load_explicit(&ld->stats.cpu_done_ns, memory_order_relaxed);
	for (unsigned i = 0; i < ld->stats.ncpu; i++)
		if (ld->stats.cpu[i].live)
			cpu += rf_ld_thread_cpu_ns(ld->stats.cpu[i].thread);
	pthread_mutex_unlock(&ld->mu);
	s.thread_cpu_ns = cpu;
	s.stall_share = s.wall_ns ? (double)s.stall_ns / (double)s.wall_ns : 0.0;
	s.slot_bytes = ld->mem.n_read && !ld->map.on ? ld->mem.read_bytes : ld->mem.stage_bytes;
	s.stage_slot_bytes = ld->mem.stage_bytes;
	s.batch_bytes = ld->layout.bytes;
	s.pinned_bytes = rf_ring_pinned_bytes(ld->ring);
	s.pinned_peak = rf_ring_pinned_peak(ld->ring);
	s.device_bytes = ld->stats.device_bytes;
	s.device_peak = ld->stats.device_bytes;
	s.in_place = ld->mem.in_place;
	s.inplace = (uint32_t)ld->gather.inplace_ok;
	s.decode_threads = ld->nworkers;
	s.window = ld->order_window;
	s.order_id = ld->order_id;
	s.read_retries = ld->io ? rf_io_retries(ld->io) : 0;
	snprintf(s.device, sizeof(s.device), "%s", ld->dev->desc);
	s.device_ordinal = ld->dev->index;

	memcpy(st, &s, sizeof(s));
	return 0;
}
