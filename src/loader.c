/* SPDX-License-Identifier: MIT */
/*
 * The streaming loader: wires the reader (io_uring), the pinned ring, the
 * decode workers and the device backend into one pipeline, and implements the
 * public loader API of <ringfeed/ringfeed.h>.
 *
 *   reader thread   the plan's read sequence -> chunk reads into ring slots
 *                   (read slots)
 *   decode workers  take completed reads in plan order, verify + decompress +
 *                   validate in parallel, then, in plan order (a turn per
 *                   read), gather the plan's items from the chunk into the
 *                   current batch in a staging slot; a batch that is already
 *                   contiguous in a raw read slot (one fixed field) is not
 *                   gathered but copied from there; window shuffling keeps
 *                   decoded chunks after their turn
 *   copy thread     one async copy per staged batch into a free device
 *                   buffer, issued ahead in order, then its completion
 *                   event; the slot goes back to the ring when that event
 *                   fires; the batch becomes ready
 *   consumer        rf_loader_next / release
 *
 * Full shuffling replaces the reader and the decode workers with one thread
 * that reads each sample into its place in a staging slot (full_main).
 *
 * Memory: the ring's slots are split between reads (n_read) and staging
 * (n_stage) by counting (in map mode a read holds a number from mfree, not
 * a ring slot, and the ring is the staging slots alone), so neither side
 * can starve the other: every slot a
 * stage may wait for is held by a later stage that always makes progress
 * (reads complete, gathers run in order, copies complete once a device buffer
 * is free, and a device buffer is free unless the consumer holds all of them,
 * in which case rf_loader_next returns RF_EHELD instead of waiting).
 *
 * Locking: one mutex (ld->mu) guards every piece of shared pipeline state;
 * work on data (reads, decode, gather, copies) runs outside it.  The gather
 * state (assembly, current staging slot) belongs to the worker whose turn it
 * is (next_gather == its step), handed over through ld->mu.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "decode/decode.h"
#include "device/device.h"
#include "device/host.h"
#include "format/format.h"
#include "io/io.h"
#include "plan/plan.h"
#include "ring/ring.h"
#include "xxh.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* ------------------------------------------------------------------ plan */

/*
 * The order of work comes from the plan (src/plan): a pure function of the
 * dataset's chunk sample counts, seed, epoch, rank, world, mode and tail
 * policy.  Two cursors walk it: the reader walks the read sequence (a step
 * per chunk read: "read entry j of epoch e, dataset chunk c"), and the gather
 * walks the items (the samples of each batch, in order, each naming the read
 * entry it comes from).  In the modes supported here (none, chunks) items
 * use read entries in non-decreasing order, so a step's turn gathers exactly
 * the items that name it.  Window mode holds several decoded chunks at once
 * (gather_step_window); full mode reads samples one by one and has its own
 * thread in place of the reader and the decode workers (full_main).
 */
struct lstep {
	uint64_t chunk;     /* dataset-wide chunk number */
	uint64_t entry;     /* its read-sequence entry in its epoch */
	uint64_t epoch;
};

/* ----------------------------------------------------------- structures */

enum step_state { ST_EMPTY = 0, ST_READING, ST_READ, ST_TAKEN };

struct wstep {              /* a step in the pipeline window */
	struct lstep s;
	uint64_t seq;
	unsigned slot;
	int state;
	int64_t res;        /* read result: bytes or -errno */
};

enum staged_kind { SK_BATCH = 0, SK_END, SK_ERROR };

struct staged {             /* a batch in its staging slot, or a marker */
	int kind;
	int direct;         /* the bytes are in a read slot, at src_off: no gather */
	unsigned slot;      /* staging slot, or the read slot when direct */
	uint64_t src_off;
	uint32_t n;
	uint64_t index, epoch, first;
	uint64_t plan_done;  /* plan batches of its epoch complete with it */
	uint32_t plan_part;  /* samples of the next plan batch in it and the
	                        batches before it (closed early), else 0 */
	uint64_t copy_bytes, payload;
	uint64_t used[RF_MAX_FIELDS];
	/* copy stage */
	int dbuf;           /* device buffer it is copied into */
	int err;            /* the issue failed */
	uint64_t t_issue;
};

enum dbuf_state { DB_FREE = 0, DB_COPYING, DB_READY, DB_HELD, DB_RELEASING, DB_RELEASED };

struct dbuf {               /* one device buffer and the batch it holds */
	rf_batch pub;       /* first: rf_batch_wait recovers the dbuf from it */
	struct rf_loader *ld;
	void *dptr;
	void *copy_event;   /* the batch's ready event */
	void *rel_event;    /* recorded by rf_loader_release */
	int state;
	rf_batch_field *fields;
	int64_t *host_off;  /* nvar x (B + 1) */
	uint64_t plan_done; /* of the batch it holds (see struct staged) */
	uint32_t plan_part;
	/* Zero-copy (host device): the batch is its ring slot, given back
	 * when the consumer has released it (see zc_recycle). */
	int zc_src;         /* holds src's slot */
	struct staged src;
};

struct wentry {             /* a decoded chunk held for window shuffling */
	int used;
	rf_chunk_sections sec;
	rf_chunk_ctx ctx;
	int slot;           /* its read slot (uncompressed), or -1 */
	uint8_t *raw;       /* its raw buffer (compressed), or NULL */
};

struct worker {
	struct rf_loader *ld;
	pthread_t thread;
	int started;
	rf_decoder dec;
	rf_diag diag;
};

struct tcpu {               /* CPU time of a loader thread */
	pthread_t thread;
	int live;
};

struct rf_loader {
	rf_config cfg;
	rf_diag diag;       /* the consumer's messages (errmsg) */
	rf_diag io_diag, dev_diag, ring_diag, copy_diag;
	/* The process that opened the loader, and the fork count then: a
	 * child of fork() has the loader's memory but none of its threads. */
	pid_t owner_pid;
	unsigned owner_forks;

	rf_dataset *ds;
	const rf_schema *schema;
	const rf_chunk_info *chunks;
	uint64_t nchunks;
	int *files;         /* per shard: the io handle */
	size_t nshards;

	rf_batch_layout layout;
	uint32_t nvar;
	rf_device *dev;
	rf_ring *ring;
	rf_io *io;
	void *copy_stream;
	struct dbuf *dbufs;
	uint32_t depth;

	uint64_t slot_bytes;
	unsigned nslots, n_read, n_stage;
	/* The ring's slots: all of nslots, but in map mode only the staging
	 * ones, of ring_slot_bytes each (a batch): a read there holds no bytes,
	 * and its slot number (n_stage and up) comes from mfree instead. */
	unsigned n_ring;
	uint64_t ring_slot_bytes;
	unsigned *mfree, mfree_n;
	unsigned char *mfree_is; /* nslots: 1 while the number is in mfree */
	unsigned qd;

	pthread_mutex_t mu;
	pthread_cond_t reader_cv, work_cv, stage_cv, copy_cv, cons_cv;
	int sync_init;

	/* --- under mu --- */
	int stop;
	int failed;          /* the pipeline stopped on an error */
	int fail_code;
	char fail_msg[RF_ERRMSG_MAX];

	rf_plan *rplan;      /* the reader's cursor (read sequence) */
	uint64_t r_epoch, r_entry, r_nreads, epoch_last;
	int plan_empty;
	int plan_done;
	uint64_t total_steps;
	int end_pushed;

	struct wstep *win;
	unsigned nwin;
	uint64_t next_seq, next_dispatch, next_gather;
	unsigned read_held, stage_held, inflight;

	struct staged *sq;   /* staged FIFO; its first sq_issued are being copied */
	unsigned sq_cap, sq_head, sq_len, sq_issued;
	int copy_failed;
	int copy_lost;       /* a batch's copy failed: the later ones are dropped */

	unsigned *rq;        /* ready FIFO of dbuf indices */
	unsigned rq_head, rq_len;
	int eos;             /* the copy thread passed the end marker */
	int final_code;      /* the copy thread passed an error marker */
	char final_msg[RF_ERRMSG_MAX];
	unsigned held;

	unsigned *slot_refs; /* read slots: the worker's hold + direct batches */
	unsigned *pin_refs;  /* transient pinning of read slots (copy thread) */
	int zero_copy;       /* host device: a batch is handed out in its ring
	                        slot, no copy (see plan_memory) */
	unsigned zc_held;    /* staging places held by device buffers */
	int wake_defer;      /* wake_locked notes wake-ups in wake_due instead
	                        of signalling; unlock_wake signals them (mu) */
	unsigned wake_due;   /* WAKE_* bits */
	int direct_ok;       /* one fixed field: batches inside a raw chunk are
	                        copied straight from the read slot */

	/* gather state: owned by the worker whose turn it is */
	rf_plan *gplan;      /* the gather's cursor (items) */
	rf_plan_item *items; /* the plan batch being gathered */
	uint32_t g_n, g_i;
	uint64_t g_epoch, g_done;
	uint32_t rank, world; /* of the plan, for messages */
	rf_plan *splan;      /* the consumer's, for rf_loader_state_save */
	/* Window shuffling: decoded chunks kept after their turn until the
	 * items' keep_from passes them (gather only). */
	int window_mode;
	uint32_t window;     /* W in force (memory plan) */
	/* The order in force (rf_stats.order_id, .window), set with the plan
	 * and again by a resume. */
	uint64_t order_id;
	uint32_t order_window;
	struct wentry *wtab; /* indexed by read entry % wcap */
	uint32_t wcap;
	uint64_t wlo, whi;   /* entries [wlo, whi) may be held */
	uint8_t **wpool;     /* spare raw buffers for compressed chunks */
	uint32_t wpool_n, wpool_cap;
	uint64_t raw_cap;
	int w_epoch_done;    /* the epoch's items are all gathered */
	uint64_t deliv_epoch, deliv_done; /* position after the last batch handed out */
	uint32_t deliv_part;  /* ... and samples of the next plan batch handed out */
	uint32_t g_skip;      /* gather: samples of the first plan batch after a
	                         resume that were handed out before the save */
	/* Full shuffling: samples read one by one (see full_main).  Set at
	 * open or by a resume; the full thread starts from f_next of r_epoch. */
	int full_mode;
	uint64_t f_next;      /* the next plan batch of r_epoch to read */
	uint64_t f_bspan;     /* bounce bytes per read in flight; 0: no bounce */
	int f_sums;           /* check every sample against its format 2 checksums */
	unsigned f_nbounce;   /* ring slots set aside for bounce areas */
	rf_diag plan_diag;
	rf_assembly asmb;
	int cur_slot;
	uint64_t cur_first, cur_epoch, batch_counter;

	/* threads */
	pthread_t reader, copier;
	int reader_started, copier_started;
	struct worker *workers;
	unsigned nworkers;
	struct tcpu cpu[3 + 64];
	unsigned ncpu;
	_Atomic uint64_t cpu_done_ns;

	/* stats */
	struct timespec t_open;
	_Atomic uint64_t st_bytes_read, st_read_ns, st_decode_ns, st_copy_ns, st_chunks;
	uint64_t st_bytes_delivered, st_batches, st_samples, st_stall_ns; /* consumer */
	unsigned mx_inflight, mx_slots, mx_staged, mx_ready, mx_held;
	uint64_t device_bytes;
	char io_engine[32];
	int io_direct;

	/* rf_config.map: every shard mapped whole, read-only.  A read slot then
	 * holds no bytes: the reader faults its chunk in and rbase[slot] points
	 * at the chunk in the map (the slot still counts, so the pipeline stays
	 * bounded the same way). */
	int map_mode;
	int map_populate;    /* MADV_POPULATE_READ works (else MADV_WILLNEED) */
	size_t page;
	uint8_t **maps;
	uint64_t *map_len;
	const uint8_t **rbase;
	unsigned char *mvec; /* mincore's answer for the largest chunk */
	size_t mvec_len;
};

static _Thread_local char open_error[RF_ERRMSG_MAX];

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

static int
forked(const rf_loader *ld)
{
	return atomic_load_explicit(&fork_count, memory_order_relaxed) != ld->owner_forks;
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

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
thread_cpu_ns(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &cid) || clock_gettime(cid, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called by a loader thread just before it returns. */
static void
thread_exit_account(rf_loader *ld, unsigned cpu_index)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		atomic_fetch_add_explicit(&ld->cpu_done_ns,
					  (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
					  memory_order_relaxed);
	pthread_mutex_lock(&ld->mu);
	ld->cpu[cpu_index].live = 0;
	pthread_mutex_unlock(&ld->mu);
}

static void
fmt_size(char *buf, size_t cap, uint64_t b)
{
	if (b >= (1ull << 30))
		snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
	else if (b >= (1ull << 20))
		snprintf(buf, cap, "%.2f MiB", (double)b / (double)(1ull << 20));
	else if (b >= (1ull << 10))
		snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
	else
		snprintf(buf, cap, "%" PRIu64 " B", b);
}

/* ------------------------------------------------------- queue helpers */

static void
note_max(unsigned *mx, unsigned v)
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
 * Between wake_defer = 1 and unlock_wake, wake_locked notes the wake-up;
 * elsewhere it signals at once.  mu must stay held from wake_defer = 1 to
 * unlock_wake (no wait, no unlock between), so that only that thread defers.
 * The waiters re-check their condition under mu, so a signal after the
 * unlock is never lost.
 */
enum { WAKE_CONS = 1u << 0, WAKE_STAGE = 1u << 1, WAKE_COPY = 1u << 2 };

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

static void
wake_locked(rf_loader *ld, unsigned which)
{
	if (ld->wake_defer)
		ld->wake_due |= which;
	else
		signal_cvs(ld, which);
}

static void
unlock_wake(rf_loader *ld)
{
	unsigned due = ld->wake_due;
	ld->wake_due = 0;
	ld->wake_defer = 0;
	pthread_mutex_unlock(&ld->mu);
	signal_cvs(ld, due);
}

static void
sq_push_locked(rf_loader *ld, const struct staged *s)
{
	ld->sq[(ld->sq_head + ld->sq_len) % ld->sq_cap] = *s;
	ld->sq_len++;
	note_max(&ld->mx_staged, ld->sq_len);
	wake_locked(ld, WAKE_COPY);
}

static void stage_batch_locked(rf_loader *ld, const struct staged *s);
static void stage_batch_unlock(rf_loader *ld, const struct staged *s);

/* Stop the pipeline on an error (mu held).  The first error wins; it is
 * queued behind the batches already staged, so the consumer receives every
 * batch before the failing point and then the error. */
static void
fail_locked(rf_loader *ld, int code, const char *msg)
{
	if (ld->failed || ld->stop)
		return;
	ld->failed = 1;
	ld->fail_code = code;
	snprintf(ld->fail_msg, sizeof(ld->fail_msg), "%s", msg);
	struct staged m = {.kind = SK_ERROR};
	sq_push_locked(ld, &m);
	pthread_cond_broadcast(&ld->reader_cv);
	pthread_cond_broadcast(&ld->work_cv);
	pthread_cond_broadcast(&ld->stage_cv);
	pthread_cond_broadcast(&ld->cons_cv);
}

/* The end of the stream, once the last step has been gathered (mu held). */
static void
maybe_end_locked(rf_loader *ld)
{
	if (ld->plan_done && !ld->end_pushed && !ld->failed && ld->next_gather == ld->total_steps) {
		ld->end_pushed = 1;
		struct staged m = {.kind = SK_END};
		sq_push_locked(ld, &m);
	}
}

/* Ring slots in use (mu held): reads and staged batches, or in map mode,
 * where a read holds no ring slot, the staged batches alone. */
static unsigned
ring_used(const rf_loader *ld)
{
	return ld->map_mode ? ld->stage_held : ld->read_held + ld->stage_held;
}

static void
release_read_slot(rf_loader *ld, unsigned slot)
{
	/* Back to the ring first, then the count: the reader takes a slot only
	 * when the count allows, so the ring always has one for it. */
	if (!ld->map_mode)
		rf_ring_release(ld->ring, slot);
	pthread_mutex_lock(&ld->mu);
	if (ld->map_mode) {
		/* A number that is not a read's, or one already free, is
		 * ignored (as the ring ignores such a release): it must never
		 * go to two reads. */
		if (slot < ld->n_ring || slot >= ld->nslots || ld->mfree_is[slot]) {
			pthread_mutex_unlock(&ld->mu);
			return;
		}
		ld->mfree_is[slot] = 1;
		ld->mfree[ld->mfree_n++] = slot;
	}
	ld->read_held--;
	pthread_cond_signal(&ld->reader_cv);
	pthread_mutex_unlock(&ld->mu);
}

/* Drop one reference to a read slot (the worker's own, or a direct batch's
 * once its copy completed); the last one returns the slot. */
static void
read_slot_unref(rf_loader *ld, unsigned slot)
{
	pthread_mutex_lock(&ld->mu);
	unsigned left = --ld->slot_refs[slot];
	pthread_mutex_unlock(&ld->mu);
	if (left == 0)
		release_read_slot(ld, slot);
}

/* Where a read slot's chunk bytes are: the slot itself, or the chunk in
 * its shard's map (map mode). */
static const uint8_t *
read_slot_bytes(const rf_loader *ld, unsigned slot)
{
	return ld->map_mode ? ld->rbase[slot] : (const uint8_t *)rf_ring_slot(ld->ring, slot);
}

/* ---------------------------------------------------------- the reader */

/* 1 when every page of mincore's vector is resident. */
static int
all_resident(const unsigned char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(v[i] & 1))
			return 0;
	return 1;
}

/*
 * Map mode's read: fault chunk `c` in (MADV_POPULATE_READ reads what is not
 * in the page cache and maps it, here in the reader, ahead of the worker)
 * and point read slot `slot` at it.  Returns the bytes there, short when
 * the shard ends early, or a negative errno: a page that cannot be read
 * (I/O error, the file shrank) is EFAULT from the kernel, reported as EIO
 * here instead of the SIGBUS the worker would get touching it.  Kernels
 * before 5.14 lack the advice: MADV_WILLNEED starts the reads instead, and
 * the worker faults the pages in.
 */
static int64_t
map_chunk(rf_loader *ld, const rf_chunk_info *c, unsigned slot)
{
	uint64_t len = ld->map_len[c->shard];
	uint64_t n = c->offset < len ? len - c->offset : 0;
	if (n > c->stored_bytes)
		n = c->stored_bytes;
	/* A shard shorter than its index: point at its end (n = 0). */
	uint8_t *p = ld->maps[c->shard] + (c->offset < len ? c->offset : len);
	ld->rbase[slot] = p;
	if (n == 0)
		return 0;
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(ld->page - 1);
	size_t span = (size_t)((uintptr_t)p + n - lo);
	/* Every page already in the page cache (a warm dataset, a later
	 * epoch): nothing to read, and faulting in pages that are mapped
	 * already costs more than this check. */
	size_t np = (span + ld->page - 1) / ld->page;
	if (np <= ld->mvec_len && mincore((void *)lo, span, ld->mvec) == 0 &&
	    all_resident(ld->mvec, np))
		return (int64_t)n;
	for (;;) {
		int adv = ld->map_populate ? MADV_POPULATE_READ : MADV_WILLNEED;
		if (madvise((void *)lo, span, adv) == 0)
			return (int64_t)n;
		int e = errno;
		if (e == EINTR || e == EAGAIN)
			continue;
		if (e == EINVAL && ld->map_populate) {
			ld->map_populate = 0;
			rf_log(&ld->diag, RF_LOG_WARN, "map: MADV_POPULATE_READ is not supported "
			       "(kernel before 5.14): pages are faulted in by the decode workers");
			continue;
		}
		return e == EFAULT ? -EIO : -e;
	}
}

/* The next read (mu held), or 0 after the last epoch. */
static int
reader_next_step(rf_loader *ld, struct lstep *st)
{
	if (ld->plan_empty)
		return 0;
	while (ld->r_entry >= ld->r_nreads) {
		if (ld->epoch_last && ld->r_epoch + 1 >= ld->epoch_last)
			return 0;
		int rc = rf_plan_set_epoch(ld->rplan, ld->r_epoch + 1);
		if (rc < 0)
			return rc;
		ld->r_epoch++;
		ld->r_entry = 0;
		ld->r_nreads = rf_plan_reads(ld->rplan);
	}
	uint64_t chunk;
	int rc = rf_plan_read_chunk(ld->rplan, ld->r_entry, &chunk);
	if (rc < 0 || chunk >= ld->nchunks)
		return rc < 0 ? rc : -ERANGE;
	st->chunk = chunk;
	st->entry = ld->r_entry++;
	st->epoch = ld->r_epoch;
	return 1;
}

/* Wait for at least one read to complete (the caller holds no lock),
 * counting the time in read_ns. */
static int
reads_wait(rf_loader *ld, rf_io_done *done, unsigned cap)
{
	uint64_t t0 = now_ns();
	int n = rf_io_wait(ld->io, done, cap, 1);
	atomic_fetch_add_explicit(&ld->st_read_ns, now_ns() - t0, memory_order_relaxed);
	return n;
}

static void *
reader_main(void *arg)
{
	rf_loader *ld = arg;
	rf_io_done done[64];

	pthread_mutex_lock(&ld->mu);
	for (;;) {
		if (ld->stop || ld->failed)
			break;
		while (!ld->plan_done && ld->read_held < ld->n_read && ld->inflight < ld->qd &&
		       ld->next_seq - ld->next_gather < ld->nwin) {
			struct lstep st;
			int prc = reader_next_step(ld, &st);
			if (prc < 0) {
				char msg[RF_ERRMSG_MAX + 64];
				snprintf(msg, sizeof(msg), "loader: the plan of epoch %" PRIu64 " failed: %s",
					 ld->r_epoch + 1, rf_strerror(prc));
				fail_locked(ld, prc, msg);
				break;
			}
			if (prc == 0) {
				ld->plan_done = 1;
				ld->total_steps = ld->next_seq;
				maybe_end_locked(ld);
				break;
			}
			unsigned slot = 0;
			int rc = 0;
			if (!ld->map_mode)
				rc = rf_ring_acquire(ld->ring, &slot, 0);
			else if (ld->mfree_n > 0)
				ld->mfree_is[slot = ld->mfree[--ld->mfree_n]] = 0;
			else
				rc = -EPROTO;
			if (rc < 0) {
				/* Cannot happen while the counts hold; a stop is the
				 * only other cause. */
				if (!ld->stop)
					fail_locked(ld, rc, "loader: no free ring slot for a read");
				break;
			}
			ld->read_held++;
			note_max(&ld->mx_slots, ring_used(ld));
			uint64_t seq = ld->next_seq++;
			struct wstep *w = &ld->win[seq % ld->nwin];
			w->s = st;
			w->seq = seq;
			w->slot = slot;
			w->state = ST_READING;
			w->res = 0;
			const rf_chunk_info *c = &ld->chunks[st.chunk];
			uint64_t span = RF_ALIGN_UP(c->stored_bytes, 4096);
			/* The io queue belongs to this thread; only the window
			 * bookkeeping needs the lock. */
			pthread_mutex_unlock(&ld->mu);
			int64_t mres = 0;
			if (ld->map_mode) {
				uint64_t t0 = now_ns();
				mres = map_chunk(ld, c, slot);
				atomic_fetch_add_explicit(&ld->st_read_ns, now_ns() - t0,
							  memory_order_relaxed);
				if (mres > 0)
					atomic_fetch_add_explicit(&ld->st_bytes_read, (uint64_t)mres,
								  memory_order_relaxed);
				rc = 0;
			} else {
				rc = rf_io_read(ld->io, ld->files[c->shard], c->offset,
						rf_ring_slot(ld->ring, slot), span, seq);
			}
			pthread_mutex_lock(&ld->mu);
			if (rc < 0 || ld->map_mode) {
				w->state = ST_READ;
				w->res = rc < 0 ? rc : mres;
				pthread_cond_broadcast(&ld->work_cv);
			} else {
				ld->inflight++;
				note_max(&ld->mx_inflight, ld->inflight);
			}
		}
		if (ld->stop || ld->failed)
			break;
		if (ld->inflight == 0) {
			if (ld->plan_done)
				break;
			pthread_cond_wait(&ld->reader_cv, &ld->mu);
			continue;
		}
		pthread_mutex_unlock(&ld->mu);
		int n = reads_wait(ld, done, 64);
		pthread_mutex_lock(&ld->mu);
		if (n < 0) {
			char msg[RF_ERRMSG_MAX + 64];
			snprintf(msg, sizeof(msg), "loader: waiting for reads failed: %s (%s)",
				 rf_strerror(n), ld->io_diag.msg);
			fail_locked(ld, n, msg);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct wstep *w = &ld->win[done[i].tag % ld->nwin];
			w->state = ST_READ;
			w->res = done[i].res;
			ld->inflight--;
			if (done[i].res > 0)
				atomic_fetch_add_explicit(&ld->st_bytes_read, (uint64_t)done[i].res,
							  memory_order_relaxed);
		}
		if (n > 0)
			pthread_cond_broadcast(&ld->work_cv);
	}
	pthread_mutex_unlock(&ld->mu);

	/* Reads still in flight land in ring memory: wait for them before the
	 * ring can be unmapped. */
	while (ld->io && rf_io_inflight(ld->io) > 0) {
		if (rf_io_wait(ld->io, done, 64, 1) < 0)
			break;
	}
	thread_exit_account(ld, 0);
	return NULL;
}

/* ------------------------------------------------------------ the gather */

/* Take a staging slot for a new batch (the turn holder only).  Returns 0 or
 * -ECANCELED when the pipeline stops. */
static int
gather_open_batch(rf_loader *ld, uint64_t epoch, uint64_t first)
{
	pthread_mutex_lock(&ld->mu);
	while (!ld->stop && !ld->failed && ld->stage_held >= ld->n_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	unsigned slot;
	int rc = rf_ring_acquire(ld->ring, &slot, 0);
	if (rc == 0) {
		ld->stage_held++;
		note_max(&ld->mx_slots, ring_used(ld));
	}
	pthread_mutex_unlock(&ld->mu);
	if (rc < 0)
		return rc;
	ld->cur_slot = (int)slot;
	ld->cur_epoch = epoch;
	ld->cur_first = first;
	rf_assembly_begin(&ld->asmb, &ld->layout, rf_ring_slot(ld->ring, slot));
	return 0;
}

static void
gather_drop_batch(rf_loader *ld)
{
	if (ld->cur_slot < 0)
		return;
	rf_ring_release(ld->ring, (unsigned)ld->cur_slot);
	ld->cur_slot = -1;
	pthread_mutex_lock(&ld->mu);
	ld->stage_held--;
	pthread_cond_signal(&ld->stage_cv);
	pthread_mutex_unlock(&ld->mu);
}

static void
gather_push_batch(rf_loader *ld)
{
	struct staged s = {.kind = SK_BATCH};
	s.slot = (unsigned)ld->cur_slot;
	s.n = ld->asmb.n;
	s.epoch = ld->cur_epoch;
	s.first = ld->cur_first;
	s.plan_done = ld->g_done;
	/* Closed early: the rest of the plan batch comes in the next one. */
	s.plan_part = ld->g_i < ld->g_n ? ld->g_i : 0;
	s.copy_bytes = rf_assembly_bytes(&ld->asmb);
	s.payload = rf_assembly_payload(&ld->asmb);
	memcpy(s.used, ld->asmb.used, sizeof(s.used));
	pthread_mutex_lock(&ld->mu);
	if (ld->failed || ld->stop) {
		pthread_mutex_unlock(&ld->mu);
		gather_drop_batch(ld);
		return;
	}
	s.index = ld->batch_counter++;
	stage_batch_unlock(ld, &s);
	ld->cur_slot = -1;
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
	s.plan_done = ++ld->g_done; /* a direct batch is a whole plan batch */
	s.copy_bytes = (uint64_t)k * p->value_bytes;
	s.payload = s.copy_bytes;
	pthread_mutex_lock(&ld->mu);
	while (!ld->stop && !ld->failed && ld->stage_held >= ld->n_stage)
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	if (ld->stop || ld->failed) {
		pthread_mutex_unlock(&ld->mu);
		return -ECANCELED;
	}
	ld->stage_held++;
	ld->slot_refs[slot]++;
	s.index = ld->batch_counter++;
	stage_batch_unlock(ld, &s);
	return 0;
}

/* A variable field's region is full before its plan batch is.  With one
 * rank the batch closes early and the rest of the plan batch makes the next
 * one; with several, that would give this rank one batch more than the
 * others, which then wait for it at the epoch's end (a distributed job
 * hangs), so it is an error that says what to set. */
static int
early_close_error(rf_loader *ld, rf_diag *d, uint32_t part, uint64_t need)
{
	const rf_batch_part *p = &ld->layout.part[part];
	return rf_fail(d, RF_EMEMPLAN,
		       "rank %u of %u: batch %" PRIu64 " of epoch %" PRIu64 " needs more than the %"
		       PRIu64 " bytes a batch has for field %s (at least %" PRIu64 "); closing it "
		       "early would give this rank one batch more than the other ranks: raise "
		       "var_bytes (twice that need leaves room)",
		       ld->rank, ld->world, ld->g_done, ld->g_epoch, p->cap,
		       ld->schema->fields[p->field].name, need);
}

/* Move the gather to `epoch` (the turn holder only): the previous epoch's
 * items are used up once a read of the next one has its turn. */
static int
gather_enter_epoch(rf_loader *ld, uint64_t epoch, rf_diag *d)
{
	int rc = rf_plan_set_epoch(ld->gplan, epoch);
	if (rc < 0)
		return rf_fail(d, rc, "loader: the plan of epoch %" PRIu64 " failed: %s", epoch,
			       rf_plan_errmsg(ld->gplan));
	ld->g_epoch = epoch;
	ld->g_n = ld->g_i = 0;
	ld->g_done = 0;
	return 0;
}

/* Take the plan's next batch of items into ld->items; *n = 0 at the end of
 * the epoch. */
static int
gather_refill(rf_loader *ld, uint32_t *n, rf_diag *d)
{
	*n = 0;
	int rc = rf_plan_next_batch(ld->gplan, ld->items, ld->layout.batch, n);
	if (rc < 0)
		return rf_fail(d, rc, "loader: the plan's next batch failed: %s",
			       rf_plan_errmsg(ld->gplan));
	ld->g_n = *n;
	ld->g_i = 0;
	if (ld->g_skip && *n) {
		/* The first batch after a resume inside a plan batch: its
		 * first g_skip samples were handed out before the save. */
		if (ld->g_skip >= *n)
			return rf_fail(d, RF_ESTATE, "loader: resume: %u samples into a batch "
				       "of %u", ld->g_skip, *n);
		ld->g_i = ld->g_skip;
		ld->g_skip = 0;
	}
	return 0;
}

/* Gather the plan items that come from this step's chunk into batches, in
 * order (the turn holder only).  A plan batch whose items all lie in this
 * chunk, back to back, goes direct when the layout allows. */
static int
gather_step(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
	    const rf_chunk_ctx *ctx, int direct, unsigned read_slot, rf_diag *d)
{
	int rc;
	if (st->epoch != ld->g_epoch) {
		/* Every item of the previous epoch named one of its reads, all
		 * gathered before this one: its items are used up. */
		rc = gather_enter_epoch(ld, st->epoch, d);
		if (rc < 0)
			return rc;
	}
	for (;;) {
		if (ld->g_i >= ld->g_n) {
			uint32_t n;
			rc = gather_refill(ld, &n, d);
			if (rc < 0)
				return rc;
			if (n == 0)
				return 0; /* this epoch's batches are all out */
		}
		const rf_plan_item *it = &ld->items[ld->g_i];
		if (it->read != st->entry)
			return 0; /* the next item comes from a later read */
		/* A run: items of this read at consecutive offsets. */
		uint32_t r = 1;
		while (ld->g_i + r < ld->g_n && it[r].read == st->entry &&
		       it[r].offset == it->offset + r)
			r++;
		if (it->offset + (uint64_t)r > sec->samples)
			return rf_fail(d, RF_ECORRUPT, "%s: chunk %" PRIu64 " has %u samples, the plan "
				       "asks for sample %u", ctx->path, ctx->chunk, sec->samples,
				       it->offset + r - 1);
		if (direct && ld->cur_slot < 0 && ld->g_i == 0 && r == ld->g_n &&
		    (!ld->zero_copy ||
		     (uintptr_t)(sec->field[ld->layout.part[0].field].data +
				 (uint64_t)it->offset * ld->layout.part[0].value_bytes) %
				     RF_BATCH_ALIGN == 0)) {
			/* Zero-copy hands the batch out where it lies: only
			 * where that keeps the promised alignment. */
			rc = push_direct(ld, st->epoch, sec, read_slot, it->offset, r, it->pos);
			if (rc < 0)
				return rc;
			ld->g_i += r;
			continue;
		}
		if (ld->cur_slot < 0) {
			rc = gather_open_batch(ld, st->epoch, it->pos);
			if (rc < 0)
				return rc;
		}
		uint32_t added = 0, part = 0;
		uint64_t need = 0;
		rc = rf_assembly_add(&ld->asmb, sec, it->offset, it->offset + r, &added, &need, &part);
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
			return rf_fail(d, rc, "loader: assembling chunk %" PRIu64 " failed",
				       st->chunk);
		ld->g_i += added;
		/* The plan batch is complete, or a variable field's region is
		 * full: close this batch (early, in the second case; the rest of
		 * the plan batch starts the next one). */
		if (added == 0 && ld->world > 1)
			return early_close_error(ld, d, part, need);
		if (ld->g_i >= ld->g_n || added == 0) {
			if (ld->g_i >= ld->g_n)
				ld->g_done++;
			gather_push_batch(ld);
		}
	}
}

/* ------------------------------------------------------ window shuffling */

static void read_slot_unref(rf_loader *ld, unsigned slot);

/* Let go of held chunk `e` (gather only). */
static void
window_drop(rf_loader *ld, uint64_t e)
{
	struct wentry *we = &ld->wtab[e % ld->wcap];
	if (!we->used)
		return;
	if (we->slot >= 0)
		read_slot_unref(ld, (unsigned)we->slot);
	if (we->raw) {
		if (ld->wpool_n < ld->wpool_cap)
			ld->wpool[ld->wpool_n++] = we->raw;
		else
			free(we->raw);
	}
	memset(we, 0, sizeof(*we));
	we->slot = -1;
}

static void
window_drop_below(rf_loader *ld, uint64_t keep_from)
{
	while (ld->wlo < ld->whi && ld->wlo < keep_from)
		window_drop(ld, ld->wlo++);
	if (ld->wlo < keep_from && ld->wlo == ld->whi)
		ld->wlo = ld->whi = keep_from;
}

/*
 * Window mode: a chunk is kept after its turn, because later items may
 * still draw from it; items are gathered, in order, as far as the chunks
 * held allow (up to the first item that needs a later read).  The plan
 * bounds the reads an item can need to keep_from + W - 1, so at most W
 * chunks are held, and the memory plan leaves the reader slots beyond them.
 * An uncompressed chunk stays in its read slot (a reference); a compressed
 * one's raw buffer is taken from the worker, which gets a spare one.
 */
static int
gather_step_window(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		   const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
		   rf_diag *d)
{
	int rc;
	if (st->epoch != ld->g_epoch) {
		rc = gather_enter_epoch(ld, st->epoch, d);
		if (rc < 0)
			return rc;
		window_drop_below(ld, UINT64_MAX);
		ld->wlo = ld->whi = 0;
		ld->w_epoch_done = 0;
	}
	if (ld->w_epoch_done)
		return 0; /* a read no item of this epoch needs any more */
	/* Hold this chunk, unless the items have already moved past it. */
	if (st->entry < ld->wlo)
		return 0;
	if (ld->whi == ld->wlo)
		ld->wlo = ld->whi = st->entry;
	if (st->entry != ld->whi || ld->whi - ld->wlo >= ld->wcap)
		return rf_fail(d, -EPROTO, "loader: window: read %" PRIu64 " arrived out of order "
			       "(holding %" PRIu64 "..%" PRIu64 ")", st->entry, ld->wlo, ld->whi);
	struct wentry *we = &ld->wtab[st->entry % ld->wcap];
	we->used = 1;
	we->sec = *sec;
	we->ctx = *ctx;
	we->slot = -1;
	we->raw = NULL;
	if (in_slot) {
		pthread_mutex_lock(&ld->mu);
		ld->slot_refs[read_slot]++;
		pthread_mutex_unlock(&ld->mu);
		we->slot = (int)read_slot;
	} else {
		/* The sections point into the worker's raw buffer: it becomes
		 * the entry's, and the worker takes a spare. */
		uint8_t *spare = ld->wpool_n ? ld->wpool[--ld->wpool_n]
					     : aligned_alloc(64, RF_ALIGN_UP(ld->raw_cap, 64));
		if (!spare)
			return rf_fail(d, -ENOMEM, "loader: window: out of memory for a chunk of %"
				       PRIu64 " bytes", ld->raw_cap);
		we->raw = w->dec.raw;
		w->dec.raw = spare;
	}
	ld->whi++;

	for (;;) {
		if (ld->g_i >= ld->g_n) {
			uint32_t n;
			rc = gather_refill(ld, &n, d);
			if (rc < 0)
				return rc;
			if (n == 0) {
				window_drop_below(ld, UINT64_MAX);
				ld->w_epoch_done = 1;
				return 0;
			}
		}
		const rf_plan_item *it = &ld->items[ld->g_i];
		if (it->read >= ld->whi) {
			/* Needs a later read: the next turn.  What it no longer
			 * needs goes now, which keeps at most W chunks held. */
			window_drop_below(ld, it->keep_from);
			return 0;
		}
		if (it->read < ld->wlo)
			return rf_fail(d, -EPROTO, "loader: window: an item needs read %" PRIu64
				       " which was let go (holding %" PRIu64 "..%" PRIu64 ")", it->read,
				       ld->wlo, ld->whi);
		const struct wentry *src = &ld->wtab[it->read % ld->wcap];
		uint32_t r = 1;
		while (ld->g_i + r < ld->g_n && it[r].read == it->read && it[r].offset == it->offset + r)
			r++;
		if (it->offset + (uint64_t)r > src->sec.samples)
			return rf_fail(d, RF_ECORRUPT, "%s: chunk %" PRIu64 " has %u samples, the plan "
				       "asks for sample %u", src->ctx.path, src->ctx.chunk,
				       src->sec.samples, it->offset + r - 1);
		if (ld->cur_slot < 0) {
			rc = gather_open_batch(ld, st->epoch, it->pos);
			if (rc < 0)
				return rc;
		}
		uint32_t added = 0, part = 0;
		uint64_t need = 0;
		rc = rf_assembly_add(&ld->asmb, &src->sec, it->offset, it->offset + r, &added, &need,
				     &part);
		if (rc == -E2BIG) {
			const rf_batch_part *p = &ld->layout.part[part];
			return rf_fail(d, RF_EMEMPLAN,
				       "%s: chunk %" PRIu64 ": sample %" PRIu64 " has %" PRIu64
				       " bytes of field %s, more than the %" PRIu64 " bytes a batch "
				       "holds for it: set var_bytes to at least %" PRIu64,
				       src->ctx.path, src->ctx.chunk, it->sample, need,
				       ld->schema->fields[p->field].name, p->cap,
				       RF_ALIGN_UP(need, RF_BATCH_ALIGN));
		}
		if (rc < 0)
			return rf_fail(d, rc, "loader: assembling failed");
		uint64_t keep_from = it[added ? added - 1 : 0].keep_from;
		ld->g_i += added;
		if (added == 0 && ld->world > 1)
			return early_close_error(ld, d, part, need);
		if (ld->g_i >= ld->g_n || added == 0) {
			if (ld->g_i >= ld->g_n)
				ld->g_done++;
			gather_push_batch(ld);
		}
		if (added)
			window_drop_below(ld, keep_from);
	}
}

/* -------------------------------------------------------- decode workers */

static void *
worker_main(void *arg)
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

		uint64_t t0 = now_ns();
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
			rc = rf_decoder_chunk(&w->dec, ld->schema, info, read_slot_bytes(ld, step.slot),
					      ld->cfg.verify, &sec, &ctx, &w->diag);
		}
		/* A compressed chunk was decoded into the worker's own buffer:
		 * its read slot can go back at once. */
		if (rc < 0 || info->codec != RF_CODEC_NONE) {
			read_slot_unref(ld, step.slot);
			slot_held = 0;
		}
		uint64_t t1 = now_ns();

		pthread_mutex_lock(&ld->mu);
		while (!ld->stop && !ld->failed && ld->next_gather != seq)
			pthread_cond_wait(&ld->work_cv, &ld->mu);
		if (ld->stop || ld->failed) {
			pthread_mutex_unlock(&ld->mu);
			if (slot_held)
				read_slot_unref(ld, step.slot);
			pthread_mutex_lock(&ld->mu);
			break;
		}
		pthread_mutex_unlock(&ld->mu);

		uint64_t t2 = now_ns();
		if (rc == 0 && ld->window_mode)
			rc = gather_step_window(ld, &step.s, &sec, &ctx, w, slot_held, step.slot,
						&w->diag);
		else if (rc == 0)
			rc = gather_step(ld, &step.s, &sec, &ctx, ld->direct_ok && slot_held,
					 step.slot, &w->diag);
		if (slot_held)
			read_slot_unref(ld, step.slot);
		if (rc < 0 && rc != -ECANCELED)
			gather_drop_batch(ld);
		atomic_fetch_add_explicit(&ld->st_decode_ns, (t1 - t0) + (now_ns() - t2),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&ld->st_chunks, 1, memory_order_relaxed);

		pthread_mutex_lock(&ld->mu);
		if (rc < 0 && rc != -ECANCELED)
			fail_locked(ld, rc, w->diag.msg);
		if (rc == 0) {
			ld->next_gather++;
			maybe_end_locked(ld);
		}
		pthread_cond_broadcast(&ld->work_cv);
		pthread_cond_signal(&ld->reader_cv);
		if (rc < 0)
			break;
	}
	pthread_mutex_unlock(&ld->mu);
	thread_exit_account(ld, cpu_index);
	return NULL;
}

/* ------------------------------------------------------- the copy stage */

static void
fill_batch(rf_loader *ld, struct dbuf *b, const struct staged *s)
{
	const rf_batch_layout *l = &ld->layout;
	uint8_t *base = b->dptr;
	uint32_t v = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		const rf_batch_part *p = &l->part[i];
		const rf_field *f = &ld->schema->fields[p->field];
		rf_batch_field *bf = &b->fields[i];
		bf->name = f->name;
		bf->dtype = f->dtype;
		bf->ndim = 1 + f->rank;
		bf->shape[0] = s->n;
		for (uint32_t k = 0; k < f->rank; k++)
			bf->shape[1 + k] = (int64_t)f->shape[k];
		bf->var_dim = f->var_dim;
		if (p->kind != RF_PART_COPY) {
			/* rf_config.tokens: int32 [n, T] from [n, T + 1]. */
			bf->name = p->kind == RF_PART_INPUTS ? "inputs" : "targets";
			bf->dtype = RF_DTYPE_I32;
			bf->shape[1] = (int64_t)(p->value_bytes / 4);
		}
		if (p->var) {
			bf->shape[1 + f->var_dim] = 0;
			bf->data = base + p->data_off;
			bf->bytes = s->used[i];
			bf->offsets = (int64_t *)(void *)(base + p->off);
			bf->host_offsets = b->host_off + (uint64_t)v * (l->batch + 1);
			v++;
		} else {
			bf->data = base + p->off;
			bf->bytes = (uint64_t)s->n * p->value_bytes;
			bf->offsets = NULL;
			bf->host_offsets = NULL;
		}
	}
	b->plan_done = s->plan_done;
	b->plan_part = s->plan_part;
	b->pub.index = s->index;
	b->pub.epoch = s->epoch;
	b->pub.first_sample = s->first;
	b->pub.samples = s->n;
	b->pub.nfields = l->nparts;
	b->pub.fields = b->fields;
	b->pub.data = b->dptr;
	b->pub.bytes = s->payload;
	b->pub.ready_event = b->copy_event;
}

/* Describe a batch whose bytes are in place in b->dptr.  The offsets go to
 * host memory too, for the consumer: the slot is read after the copy, so
 * nothing races with it. */
static void
describe_batch(rf_loader *ld, struct dbuf *b, const struct staged *s)
{
	const uint8_t *src = (const uint8_t *)rf_ring_slot(ld->ring, s->slot) + s->src_off;
	const rf_batch_layout *l = &ld->layout;
	uint32_t v = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		if (!l->part[i].var)
			continue;
		memcpy(b->host_off + (uint64_t)v * (l->batch + 1), src + l->part[i].off,
		       ((uint64_t)s->n + 1) * 8);
		v++;
	}
	fill_batch(ld, b, s);
}

/*
 * Transient pinning.  A staging slot holds one batch: it is pinned for that
 * batch's copy alone.  A read slot can hold several direct batches whose
 * copies are in flight together: it is pinned whole on the first and
 * unpinned when the last has completed (pin_refs counts them; copy thread
 * only).
 */
static int
pin_for_copy(rf_loader *ld, const struct staged *s)
{
	if (ld->cfg.pinning != RF_PINNING_TRANSIENT)
		return 0;
	if (s->direct && ld->pin_refs[s->slot]++ > 0)
		return 0;
	int rc = rf_ring_pin(ld->ring, s->slot,
			     s->direct ? ld->slot_bytes : s->src_off + s->copy_bytes);
	if (rc < 0) {
		if (s->direct)
			ld->pin_refs[s->slot]--;
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
	if (s->direct && --ld->pin_refs[s->slot] > 0)
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
	s->t_issue = now_ns();
	rc = ops->copy_h2d_async(ld->dev, b->dptr, src, s->copy_bytes, ld->copy_stream);
	if (rc == 0)
		rc = ops->event_record(ld->dev, b->copy_event, ld->copy_stream);
	if (rc < 0) {
		ops->stream_sync(ld->dev, ld->copy_stream); /* nothing may still read src */
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
	atomic_fetch_add_explicit(&ld->st_copy_ns, now_ns() - s->t_issue, memory_order_relaxed);
	if (rc < 0) {
		ops->stream_sync(ld->dev, ld->copy_stream);
		rf_fail(&ld->copy_diag, rc, "loader: copying batch %" PRIu64 " to the device failed: %s",
			s->index, ld->dev_diag.msg);
	}
	int urc = unpin_after_copy(ld, s);
	if (rc == 0)
		rc = urc;
	if (rc == 0)
		describe_batch(ld, b, s);
	return rc;
}

/* The staging slot of a batch goes back to the ring; a direct batch drops
 * its reference to the read slot instead. */
static void
staged_done(rf_loader *ld, const struct staged *s)
{
	if (s->direct)
		read_slot_unref(ld, s->slot);
	else
		rf_ring_release(ld->ring, s->slot);
}

/* Wake the producers of staged batches (gather, full reads) once enough
 * staging places are free (mu held).  Not at every batch: they then fill
 * several places in one go, one wake-up for several batches.  Every place
 * still taken belongs to a batch on its way or to a device buffer the
 * consumer will release, so the count always gets there.  In zero-copy, up
 * to depth places belong to device buffers: the mark is half of the rest. */
static void
stage_freed_locked(rf_loader *ld)
{
	unsigned spare = ld->n_stage - (ld->zero_copy ? ld->depth : 0);
	unsigned mark = ld->n_stage - (spare / 2 > 0 ? spare / 2 : 1);
	if (ld->stage_held <= mark)
		wake_locked(ld, WAKE_STAGE);
}

/* Zero-copy: give a released batch's slot back to the ring (mu held, the
 * consumer's work recorded at release is done).  Drops mu meanwhile.  With
 * defer, the wake-ups from here on wait for the caller's unlock_wake. */
static void
zc_recycle_locked(rf_loader *ld, struct dbuf *b, int defer)
{
	struct staged src = b->src;
	b->zc_src = 0;
	pthread_mutex_unlock(&ld->mu);
	staged_done(ld, &src);
	pthread_mutex_lock(&ld->mu);
	ld->wake_defer = defer;
	ld->stage_held--;
	ld->zc_held--;
	stage_freed_locked(ld);
}

/*
 * Hand a staged batch on (mu held).  Zero-copy has nothing to copy: when no
 * batch or marker is ahead of it and a device buffer is free, the batch is
 * ready at once, without a trip through the copy thread (a wake-up and a
 * context switch per batch saved).  Otherwise it queues for the copy thread.
 */
static int
zc_ready_locked(rf_loader *ld, const struct staged *s)
{
	for (uint32_t i = 0; i < ld->depth; i++) {
		struct dbuf *b = &ld->dbufs[i];
		if (b->state != DB_FREE)
			continue;
		b->dptr = (uint8_t *)rf_ring_slot(ld->ring, s->slot) + s->src_off;
		describe_batch(ld, b, s);
		b->zc_src = 1;
		b->src = *s;
		ld->zc_held++;
		b->state = DB_READY;
		ld->rq[(ld->rq_head + ld->rq_len) % ld->depth] = i;
		ld->rq_len++;
		note_max(&ld->mx_ready, ld->rq_len);
		wake_locked(ld, WAKE_CONS);
		return 1;
	}
	return 0;
}

static void
stage_batch_locked(rf_loader *ld, const struct staged *s)
{
	if (ld->zero_copy && ld->sq_len == 0 && !ld->copy_failed && zc_ready_locked(ld, s))
		return;
	sq_push_locked(ld, s);
}

/* stage_batch_locked, then drop mu and wake whom it made ready. */
static void
stage_batch_unlock(rf_loader *ld, const struct staged *s)
{
	ld->wake_defer = 1;
	stage_batch_locked(ld, s);
	unlock_wake(ld);
}

/* Zero-copy: staged batches waiting for a free buffer become ready as soon
 * as one is free, in the consumer's thread (release, next), so the batch
 * after a released one does not wait for the copy thread to wake up.  Only
 * batches at the head of the queue, none being issued by the copy thread;
 * markers stay the copy thread's. */
static void
zc_promote_locked(rf_loader *ld)
{
	while (ld->zero_copy && ld->sq_len > 0 && ld->sq_issued == 0 && !ld->copy_failed &&
	       ld->sq[ld->sq_head].kind == SK_BATCH && zc_ready_locked(ld, &ld->sq[ld->sq_head])) {
		ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
		ld->sq_len--;
	}
}

/* Zero copy, the copy thread's part (mu held, dropped while waiting): wait
 * for the stream work recorded when each released buffer was released,
 * give its slot back and free it, then hand staged batches to free
 * buffers.  Returns 1 when it freed a buffer. */
static int
zc_reclaim_locked(rf_loader *ld)
{
	int freed = 0;
	for (uint32_t i = 0; i < ld->depth; i++) {
		struct dbuf *b = &ld->dbufs[i];
		if (b->state != DB_RELEASED)
			continue;
		/* Only this thread moves a buffer out of DB_RELEASED. */
		pthread_mutex_unlock(&ld->mu);
		int rc = ld->dev->ops->event_sync(ld->dev, b->rel_event);
		pthread_mutex_lock(&ld->mu);
		if (rc < 0) {
			/* Never reuse memory the consumer's work may still
			 * read: the buffer and its slot stay out of use until a
			 * reset, and the stream ends with the error. */
			rf_fail(&ld->copy_diag, rc, "loader: waiting for a released batch failed: %s",
				ld->dev_diag.msg);
			b->state = DB_COPYING;
			b->zc_src = 0;
			ld->copy_failed = 1;
			fail_locked(ld, rc, ld->copy_diag.msg);
			if (!ld->final_code) {
				ld->final_code = rc;
				snprintf(ld->final_msg, sizeof(ld->final_msg), "%s", ld->copy_diag.msg);
			}
			pthread_cond_broadcast(&ld->cons_cv);
			continue;
		}
		b->state = DB_FREE;
		if (b->zc_src)
			zc_recycle_locked(ld, b, 0);
		freed = 1;
	}
	zc_promote_locked(ld);
	return freed;
}

/* A free device buffer (mu held): free first, else one the consumer has
 * released (its event may still be pending); -1 when none. */
static int
pick_dbuf_locked(rf_loader *ld)
{
	for (uint32_t i = 0; i < ld->depth; i++)
		if (ld->dbufs[i].state == DB_FREE)
			return (int)i;
	for (uint32_t i = 0; i < ld->depth; i++)
		if (ld->dbufs[i].state == DB_RELEASED)
			return (int)i;
	return -1;
}

/*
 * The copy stage.  Staged batches are issued in order onto the copy stream
 * as soon as a device buffer is free, so the copy engine goes from one batch
 * to the next without waiting for this thread; completions are taken in the
 * same order.  The staged queue's first `sq_issued` entries are the copies in
 * flight.  Issuing comes first: keeping the stream fed matters more than
 * noticing a completion a little earlier.
 */
static void *
copy_main(void *arg)
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
		if (ld->zero_copy && zc_reclaim_locked(ld))
			continue;
		/* A marker reaches the consumer once every batch before it is
		 * ready. */
		if (ld->sq_len > 0 && ld->sq_issued == 0 && ld->sq[ld->sq_head].kind != SK_BATCH) {
			struct staged m = ld->sq[ld->sq_head];
			ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
			ld->sq_len--;
			if (m.kind == SK_END) {
				ld->eos = 1;
			} else if (!ld->final_code) {
				ld->final_code = ld->fail_code ? ld->fail_code : -EIO;
				memcpy(ld->final_msg, ld->fail_msg, sizeof(ld->final_msg));
			}
			pthread_cond_broadcast(&ld->cons_cv);
			continue;
		}
		if (!ld->zero_copy && ld->sq_issued < ld->sq_len && !ld->copy_failed) {
			struct staged *it = &ld->sq[(ld->sq_head + ld->sq_issued) % ld->sq_cap];
			int pick = it->kind == SK_BATCH ? pick_dbuf_locked(ld) : -1;
			if (pick >= 0) {
				struct dbuf *b = &ld->dbufs[pick];
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
					 * overwritten. */
					rc = ops->event_sync(ld->dev, b->rel_event);
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
			struct dbuf *b = &ld->dbufs[s.dbuf];
			pthread_mutex_unlock(&ld->mu);
			int rc = s.err ? s.err : copy_complete(ld, b, &s);
			staged_done(ld, &s);
			pthread_mutex_lock(&ld->mu);
			ld->sq_head = (ld->sq_head + 1) % ld->sq_cap;
			ld->sq_len--;
			ld->sq_issued--;
			ld->stage_held--;
			stage_freed_locked(ld);
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
				fail_locked(ld, rc, ld->copy_diag.msg);
				if (!ld->final_code) {
					ld->final_code = rc;
					snprintf(ld->final_msg, sizeof(ld->final_msg), "%s",
						 ld->copy_diag.msg);
				}
				pthread_cond_broadcast(&ld->cons_cv);
				continue;
			}
			b->state = DB_READY;
			ld->rq[(ld->rq_head + ld->rq_len) % ld->depth] = (unsigned)s.dbuf;
			ld->rq_len++;
			note_max(&ld->mx_ready, ld->rq_len);
			pthread_cond_signal(&ld->cons_cv);
			continue;
		}
		pthread_cond_wait(&ld->copy_cv, &ld->mu);
	}
	/* Stopping: copies still in flight are waited for, so no slot is
	 * unmapped or unpinned under a pending DMA. */
	while (ld->sq_issued > 0) {
		struct staged s = ld->sq[ld->sq_head];
		struct dbuf *b = &ld->dbufs[s.dbuf];
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
	thread_exit_account(ld, 1);
	return NULL;
}

/* ------------------------------------------------------ full shuffling */

/*
 * Full shuffling reads every sample on its own: the plan's items name the
 * chunk and the index in it, and a fixed field's value i lies at
 *   chunk offset + section offset + i x value bytes,
 * the section offsets following from the chunk's sample count and the schema
 * alone when no variable field comes before (docs/format.md "Chunks"; the
 * open checks that every chunk's raw size agrees).  One thread does it all:
 * it takes a staging slot per plan batch, queues one read per sample and
 * field straight to the sample's place in the batch, keeps up to io_depth
 * reads in flight across consecutive batches, and stages the batches in plan
 * order as their reads complete.  No decode worker runs.
 *
 * O_DIRECT wants the file offset, length and buffer 4096-aligned.  A value
 * that satisfies that (4 KiB multiples in the first field: the common case
 * of large fixed samples) is read straight into place; any other is read as
 * its covering aligned range into the slot's bounce area (past the batch)
 * and copied into place when it completes.  With buffered reads (direct = 0,
 * or a file system that refuses O_DIRECT) every value goes straight into
 * place.
 *
 * Checksums: a chunk's XXH3 covers the whole chunk, which full mode never
 * reads.  With verify on, each sample's row of its chunk's per-sample
 * checksum table (format 2, docs/format.md) is read with one more read
 * beside its values, and every loaded value is hashed and compared before
 * its batch is staged; shards without the table are refused at open.  Also
 * checked: structure (every chunk uncompressed with the raw size its sample
 * count implies, every item inside its chunk, every read complete).
 */

struct fread_rec {          /* one read in flight */
	uint32_t fb;            /* its batch (index in the full thread's queue) */
	uint32_t next_free;
	uint8_t *dst;           /* the value's place in the batch */
	uint8_t *area;          /* its bounce area (f_bspan bytes), or NULL */
	const uint8_t *bounce;  /* where the value lands, when bounced; else NULL */
	uint64_t len;           /* bytes asked of the reader */
	uint64_t vlen;          /* bytes of the value */
	uint64_t off;           /* file offset of the read */
	uint64_t chunk, sample;
	uint32_t cpage;         /* the checksum page it fills, or UINT32_MAX */
};

/*
 * Checksum rows are small (8 bytes a field) and many share a 4 KiB page of
 * their table: reading each with its own read cost a third more reads per
 * sample than the values alone (0.6x the samples/s for 784-byte samples).
 * The full thread keeps the table pages it has read in an 8-way set
 * associative cache of at most FULL_SUMS_CACHE bytes, 4 entries per table
 * page of the dataset when it can: once the tables of a dataset up to that
 * size have been read (about 16 bytes a sample for two fields: 2 million
 * samples), rows cost a copy.  A row not in it reads its whole page into the
 * cache when an entry of its set has no read in flight, else the row alone.
 * Fixed size: it does not grow with the dataset.  (2 ways thrashed: with 4
 * entries a page, a few sets still drew 3 or 4 pages of a 200k-sample
 * dataset, and re-read them on most of their rows.)
 */
#define FULL_SUMS_CACHE (32u << 20)
#define FULL_SUMS_WAYS 8u

struct sums_cache {
	uint8_t *page;          /* npages x 4096, 4096-aligned (O_DIRECT reads) */
	uint64_t *tag;          /* file page number + 1 (0: empty) */
	uint32_t *shard;
	uint8_t *pending;       /* a read into the page is in flight */
	uint8_t *last;          /* per set: the way to fill next when all hold pages */
	uint32_t mask;          /* npages - 1 */
};

/* The first entry of the page's set (FULL_SUMS_WAYS entries from it). */
static uint32_t
sums_cache_set(const struct sums_cache *c, uint32_t shard, uint64_t fpage)
{
	/* splitmix64's finalizer: table pages come in runs at regular
	 * strides, which a plain multiply maps onto few sets. */
	uint64_t h = fpage ^ ((uint64_t)shard << 40);
	h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
	h ^= h >> 31;
	return (uint32_t)h & c->mask & ~(FULL_SUMS_WAYS - 1);
}

struct fbatch {             /* a plan batch being read */
	unsigned slot;
	uint32_t n;
	uint32_t left;          /* reads not completed */
	int issued;             /* every read queued */
	uint64_t epoch, k, first;
};

/* Byte offset of schema field `field`'s section in the raw form of a chunk
 * of n samples; every field up to it is fixed (checked at open). */
static uint64_t
full_section_off(const rf_schema *schema, uint64_t n, uint32_t field)
{
	uint64_t off = 0;
	for (uint32_t j = 0; j < field; j++) {
		off = RF_ALIGN_UP(off, 64);
		off += n * rf_decode_item_bytes(&schema->fields[j]);
	}
	return RF_ALIGN_UP(off, 64);
}

/* The open's checks for full shuffling: the loaded fields readable without
 * reading a chunk, every chunk uncompressed and of the expected size. */
static int
full_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	const rf_schema *sc = ld->schema;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nsel; i++)
		if (sel[i] > last)
			last = sel[i];
	for (uint32_t j = 0; j <= last; j++) {
		const rf_field *f = &sc->fields[j];
		if (f->var_dim < 0)
			continue;
		int loaded = 0;
		for (uint32_t i = 0; i < nsel; i++)
			loaded |= sel[i] == j;
		if (loaded)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle full reads each sample "
				       "on its own and supports fixed-size fields only: field '%s' has "
				       "a variable size; use shuffle window", f->name);
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle full cannot locate the "
			       "fields after variable-size field '%s' without reading whole chunks: "
			       "load only fields before it (rf_config.fields) or use shuffle window",
			       f->name);
	}
	int has_var = 0;
	for (uint32_t j = 0; j < sc->nfields; j++)
		has_var |= sc->fields[j].var_dim >= 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		rf_chunk_ctx ctx;
		rf_dataset_chunk_ctx(ld->ds, c, &ctx);
		if (ci->codec != RF_CODEC_NONE)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle full reads samples one by "
				       "one and needs uncompressed shards, but %s chunk %" PRIu64 " is "
				       "compressed: use shuffle window, or pack the dataset without "
				       "compression", ctx.path, ctx.chunk);
		/* With variable fields (after the loaded ones) the schema gives
		 * only the least raw size. */
		uint64_t want = 0;
		if (rf_chunk_raw_size(sc, ci->samples, NULL, &want) < 0 ||
		    (has_var ? want > ci->raw_bytes : want != ci->raw_bytes) ||
		    ci->stored_bytes != ci->raw_bytes)
			return rf_fail(&ld->diag, RF_ECORRUPT, "%s: chunk %" PRIu64 " at offset %" PRIu64
				       ": %" PRIu64 " raw bytes for %u samples, the schema implies %"
				       PRIu64, ctx.path, ctx.chunk, ctx.offset, ci->raw_bytes,
				       ci->samples, want);
	}
	/* Samples are read one by one, so chunk checksums cannot be checked:
	 * with verify on, each sample is checked against its own checksums,
	 * which only format 2 shards hold.  Refused rather than read
	 * unchecked: verify on promises checked bytes. */
	ld->f_sums = ld->cfg.verify != 0;
	for (size_t i = 0; ld->f_sums && i < rf_dataset_shards(ld->ds); i++) {
		rf_shard_info si;
		rf_dataset_shard_info(ld->ds, i, &si);
		if (si.version < 2)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle full checks every sample "
				       "against its own checksums, which %s (format version %u) does not "
				       "hold: repack the dataset with this version's `ringfeed pack` "
				       "(e.g. ringfeed pack -o OUT.rfs FIELD=FILE.npy ...; format 2 "
				       "writes them by default), or read it unchecked with verify = 0 "
				       "(Python verify=False, ringfeed bench --no-verify)", si.path, si.version);
	}
	return 0;
}

/* Stage a batch whose reads are all in (mu held). */
static void
full_push_locked(rf_loader *ld, const struct fbatch *fb)
{
	rf_assembly a;
	rf_assembly_begin(&a, &ld->layout, rf_ring_slot(ld->ring, fb->slot));
	a.n = fb->n;
	struct staged s = {.kind = SK_BATCH};
	s.slot = fb->slot;
	s.n = fb->n;
	s.epoch = fb->epoch;
	s.first = fb->first;
	s.plan_done = fb->k + 1;
	s.copy_bytes = rf_assembly_bytes(&a);
	s.payload = rf_assembly_payload(&a);
	s.index = ld->batch_counter++;
	stage_batch_locked(ld, &s);
}

/* Check every loaded value of a batch whose reads are all in against the
 * checksum rows read beside them (rows[i] of nfields entries for row i).
 * Runs on the full thread without the mutex: the slot is still its own. */
static int
full_verify(rf_loader *ld, const struct fbatch *fb, const uint64_t *rows, const uint64_t *smp,
	    char *msg, size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t nf = ld->schema->nfields;
	const uint8_t *slotp = rf_ring_slot(ld->ring, fb->slot);
	for (uint32_t i = 0; i < fb->n; i++) {
		const uint8_t *row = (const uint8_t *)(rows + (uint64_t)i * nf);
		for (uint32_t q = 0; q < l->nparts; q++) {
			const rf_batch_part *p = &l->part[q];
			uint64_t h = XXH3_64bits(slotp + p->off + (uint64_t)i * p->value_bytes,
						 (size_t)p->value_bytes);
			uint64_t want = rf_le64(row + 8 * (uint64_t)p->field);
			if (h == want)
				continue;
			uint64_t c = 0;
			rf_chunk_ctx ctx = {0};
			rf_dataset_find_chunk(ld->ds, smp[i], &c);
			rf_dataset_chunk_ctx(ld->ds, c, &ctx);
			snprintf(msg, cap, "%s: chunk %" PRIu64 " at offset %" PRIu64 ": sample %" PRIu64
				 " of the chunk (sample %" PRIu64 " of the dataset), field %s: checksum "
				 "mismatch: its %" PRIu64 " bytes hash to %016" PRIx64 ", the shard "
				 "records %016" PRIx64, ctx.path, ctx.chunk, ctx.offset,
				 smp[i] - ld->chunks[c].first_sample, smp[i],
				 ld->schema->fields[p->field].name, p->value_bytes, h, want);
			return RF_ECHECKSUM;
		}
	}
	return 0;
}

static void *
full_main(void *arg)
{
	rf_loader *ld = arg;
	const rf_batch_layout *l = &ld->layout;
	const uint32_t B = l->batch, np = l->nparts;
	/* Reads per sample: its values, then its checksum row when checked. */
	const uint32_t npr = np + (ld->f_sums ? 1 : 0), nf = ld->schema->nfields;
	const unsigned nfb = ld->n_stage;
	rf_io_done done[64];
	char msg[RF_ERRMSG_MAX + 128];
	int err = 0;

	struct fbatch *fq = calloc(nfb, sizeof(*fq));
	struct fread_rec *rec = calloc(ld->qd, sizeof(*rec));
	rf_plan_item *items = calloc(B, sizeof(*items));
	/* Per queued batch: B checksum rows and the samples they belong to. */
	uint64_t *fsum = ld->f_sums ? calloc((size_t)nfb * B * nf, 8) : NULL;
	uint64_t *fsmp = ld->f_sums ? calloc((size_t)nfb * B, 8) : NULL;
	/* Four entries for every table page of the dataset (fewer
	 * collisions), at most FULL_SUMS_CACHE. */
	struct sums_cache sc = {0};
	if (ld->f_sums) {
		uint64_t want = rf_dataset_samples(ld->ds) / (4096 / (8 * nf) ? 4096 / (8 * nf) : 1) +
				2 * ld->nchunks + 1;
		uint32_t np2 = 16;
		while (np2 < FULL_SUMS_CACHE / 4096 && np2 < 4 * want)
			np2 *= 2;
		sc.mask = np2 - 1;
		sc.page = aligned_alloc(4096, (size_t)np2 * 4096);
		sc.tag = calloc(np2, sizeof(*sc.tag));
		sc.shard = calloc(np2, sizeof(*sc.shard));
		sc.pending = calloc(np2, 1);
		sc.last = calloc(np2 / FULL_SUMS_WAYS, 1);
	}
	unsigned bslots[64];
	unsigned nb = 0;

	pthread_mutex_lock(&ld->mu);
	if (!fq || !rec || !items ||
	    (ld->f_sums && (!fsum || !fsmp || !sc.page || !sc.tag || !sc.shard || !sc.pending ||
				  !sc.last))) {
		fail_locked(ld, -ENOMEM, "loader: out of memory for the full shuffle's reads");
		goto out;
	}
	/* The bounce slots: outside the staging count, held while this
	 * thread runs. */
	for (; nb < ld->f_nbounce && nb < 64; nb++) {
		int rc = rf_ring_acquire(ld->ring, &bslots[nb], 0);
		if (rc < 0) {
			fail_locked(ld, rc, "loader: no free ring slot for the bounce areas");
			goto out;
		}
	}
	if (ld->f_bspan) {
		uint64_t per = ld->slot_bytes / ld->f_bspan;
		for (uint32_t i = 0; i < ld->qd; i++)
			rec[i].area = (uint8_t *)rf_ring_slot(ld->ring, bslots[i / per]) +
				      (i % per) * ld->f_bspan;
	}
	uint32_t free_rec = 0;
	for (uint32_t i = 0; i < ld->qd; i++)
		rec[i].next_free = i + 1 < ld->qd ? i + 1 : UINT32_MAX;
	unsigned fq_head = 0, fq_len = 0;
	int opened = 0;        /* fq's last batch is still being queued */
	uint32_t it_i = 0, it_p = 0, it_n = 0;
	uint64_t epoch = ld->r_epoch, k = ld->f_next;
	int done_all = ld->plan_empty;
	unsigned inflight = 0;

	for (;;) {
		if (ld->stop || ld->failed)
			break;
		/* Queue reads while the queue depth allows. */
		while (!done_all && inflight < ld->qd) {
			if (!opened) {
				if (k >= rf_plan_batches(ld->rplan)) {
					if (ld->epoch_last && epoch + 1 >= ld->epoch_last) {
						done_all = 1;
						break;
					}
					int rc = rf_plan_set_epoch(ld->rplan, epoch + 1);
					if (rc < 0) {
						snprintf(msg, sizeof(msg), "loader: the plan of epoch %"
							 PRIu64 " failed: %s", epoch + 1, rf_strerror(rc));
						fail_locked(ld, rc, msg);
						goto out;
					}
					epoch++;
					k = 0;
					continue;
				}
				if (ld->stage_held >= ld->n_stage || fq_len >= nfb)
					break;
				uint32_t n = 0;
				int rc = rf_plan_batch(ld->rplan, k, items, B, &n);
				if (rc < 0 || n == 0) {
					snprintf(msg, sizeof(msg), "loader: batch %" PRIu64 " of epoch %"
						 PRIu64 " is missing from the plan", k, epoch);
					fail_locked(ld, rc < 0 ? rc : -EPROTO, msg);
					goto out;
				}
				unsigned slot;
				rc = rf_ring_acquire(ld->ring, &slot, 0);
				if (rc < 0) {
					if (!ld->stop)
						fail_locked(ld, rc, "loader: no free ring slot for a batch");
					goto out;
				}
				ld->stage_held++;
				note_max(&ld->mx_slots, ld->stage_held);
				struct fbatch *fb = &fq[(fq_head + fq_len) % nfb];
				fq_len++;
				*fb = (struct fbatch){.slot = slot, .n = n, .epoch = epoch, .k = k,
						      .first = items[0].pos};
				opened = 1;
				it_i = it_p = 0;
				it_n = n;
			}
			unsigned fbi = (fq_head + fq_len - 1) % nfb;
			struct fbatch *fb = &fq[fbi];
			const rf_plan_item *it = &items[it_i];
			const rf_batch_part *p = it_p < np ? &l->part[it_p] : NULL;
			if (it->chunk >= ld->nchunks || it->offset >= ld->chunks[it->chunk].samples) {
				snprintf(msg, sizeof(msg), "loader: the plan names sample %u of chunk %"
					 PRIu64 ", which does not exist", it->offset, it->chunk);
				fail_locked(ld, -EPROTO, msg);
				goto out;
			}
			const rf_chunk_info *ci = &ld->chunks[it->chunk];
			uint64_t vb, off;
			uint8_t *dst;
			uint32_t cpage = UINT32_MAX;
			if (p) {
				vb = p->value_bytes;
				off = ci->offset + full_section_off(ld->schema, ci->samples, p->field) +
				      (uint64_t)it->offset * vb;
				uint8_t *slotp = rf_ring_slot(ld->ring, fb->slot);
				dst = slotp + p->off + (uint64_t)it_i * vb;
			} else {
				/* The sample's row of the checksum table. */
				uint64_t row = (uint64_t)fbi * B + it_i;
				vb = 8 * (uint64_t)nf;
				off = rf_fmt_sums_offset(ci->offset, ci->stored_bytes) +
				      (uint64_t)it->offset * vb;
				dst = (uint8_t *)(fsum + row * nf);
				fsmp[row] = it->sample;
				uint64_t fpage = off / 4096;
				if ((off + vb - 1) / 4096 == fpage) {
					uint32_t set = sums_cache_set(&sc, ci->shard, fpage), cs = set;
					int have = 0;
					for (uint32_t w = 0; w < FULL_SUMS_WAYS && !have; w++) {
						cs = set + w;
						have = sc.tag[cs] == fpage + 1 && sc.shard[cs] == ci->shard;
					}
					if (have && !sc.pending[cs]) {
						/* In the cache: no read. */
						memcpy(dst, sc.page + (size_t)cs * 4096 + off % 4096, vb);
						it_p = 0;
						if (++it_i == it_n) {
							fb->issued = 1;
							opened = 0;
							k++;
						}
						continue;
					}
					/* Not there: into an entry of its set with no read
					 * in flight, an empty one first, else round robin. */
					if (!have) {
						uint32_t e = UINT32_MAX;
						for (uint32_t w = 0; w < FULL_SUMS_WAYS && e == UINT32_MAX; w++)
							if (!sc.tag[set + w])
								e = set + w;
						for (uint32_t w = 0; w < FULL_SUMS_WAYS && e == UINT32_MAX; w++) {
							uint32_t x = set + (sc.last[set / FULL_SUMS_WAYS] + w) %
									   FULL_SUMS_WAYS;
							if (!sc.pending[x])
								e = x;
						}
						if (e != UINT32_MAX) {
							cpage = e;
							sc.last[set / FULL_SUMS_WAYS] =
								(uint8_t)((e - set + 1) % FULL_SUMS_WAYS);
						}
					}
				}
			}
			struct fread_rec *r = &rec[free_rec];
			uint32_t ri = free_rec;
			free_rec = r->next_free;
			r->fb = fbi;
			r->dst = dst;
			r->chunk = it->chunk;
			r->sample = it->sample;
			uint8_t *target = dst;
			uint64_t roff = off, rlen = vb;
			r->bounce = NULL;
			/* Per file: some shards may refuse O_DIRECT (tmpfs)
			 * while others take it. */
			if (rf_io_file_direct(ld->io, ld->files[ci->shard]) &&
			    ((off | vb | (uintptr_t)dst) & 4095)) {
				roff = off & ~4095ull;
				rlen = RF_ALIGN_UP(off + vb, 4096) - roff;
				target = r->area;
				r->bounce = target + (off - roff);
			}
			r->cpage = cpage;
			if (cpage != UINT32_MAX) {
				/* Read the row's whole page into the cache. */
				sc.pending[cpage] = 1;
				sc.tag[cpage] = off / 4096 + 1;
				sc.shard[cpage] = ci->shard;
				roff = off & ~4095ull;
				rlen = 4096;
				target = sc.page + (size_t)cpage * 4096;
				r->bounce = target + (off - roff);
			}
			r->off = roff;
			r->len = rlen;
			r->vlen = vb;
			if (++it_p == npr) {
				it_p = 0;
				if (++it_i == it_n) {
					fb->issued = 1;
					opened = 0;
					k++;
				}
			}
			fb->left++;
			int shard = ld->files[ci->shard];
			pthread_mutex_unlock(&ld->mu);
			int rc = rf_io_read(ld->io, shard, roff, target, rlen, ri);
			pthread_mutex_lock(&ld->mu);
			if (rc < 0) {
				snprintf(msg, sizeof(msg), "loader: queueing a read of sample %" PRIu64
					 " failed: %s (%s)", r->sample, rf_strerror(rc), ld->io_diag.msg);
				fail_locked(ld, rc, msg);
				goto out;
			}
			inflight++;
			ld->inflight = inflight;
			note_max(&ld->mx_inflight, inflight);
		}
		/* Stage the batches whose reads are all in, in plan order. */
		int unlocked = 0;
		while (fq_len > 0 && fq[fq_head].issued && fq[fq_head].left == 0) {
			if (ld->f_sums) {
				unlocked = 1;
				pthread_mutex_unlock(&ld->mu);
				int vr = full_verify(ld, &fq[fq_head], fsum + (size_t)fq_head * B * nf,
						     fsmp + (size_t)fq_head * B, msg, sizeof(msg));
				pthread_mutex_lock(&ld->mu);
				if (vr < 0) {
					fail_locked(ld, vr, msg);
					goto out;
				}
			}
			full_push_locked(ld, &fq[fq_head]);
			fq_head = (fq_head + 1) % nfb;
			fq_len--;
		}
		if (done_all && fq_len == 0 && !opened) {
			ld->plan_done = 1;
			if (!ld->end_pushed) {
				ld->end_pushed = 1;
				struct staged m = {.kind = SK_END};
				sq_push_locked(ld, &m);
			}
			break;
		}
		if (inflight == 0) {
			/* Nothing to wait for but a staging slot.  A stop or a
			 * slot freed while the checks above ran without the
			 * mutex signalled nobody: look again before waiting. */
			if (unlocked)
				continue;
			pthread_cond_wait(&ld->stage_cv, &ld->mu);
			continue;
		}
		pthread_mutex_unlock(&ld->mu);
		int n = reads_wait(ld, done, 64);
		uint64_t bytes = 0;
		for (int i = 0; i < n && !err; i++) {
			struct fread_rec *r = &rec[done[i].tag];
			if (done[i].res < 0 || (uint64_t)done[i].res < r->len) {
				rf_chunk_ctx ctx;
				rf_dataset_chunk_ctx(ld->ds, r->chunk, &ctx);
				err = done[i].res < 0 ? (int)done[i].res : RF_ETRUNCATED;
				snprintf(msg, sizeof(msg), "%s: chunk %" PRIu64 " at offset %" PRIu64
					 ": reading sample %" PRIu64 " (%" PRIu64 " bytes at file offset %"
					 PRIu64 ") %s%s", ctx.path, ctx.chunk, ctx.offset, r->sample,
					 r->len, r->off, done[i].res < 0 ? "failed: " : "came up short: "
					 "the file is truncated", done[i].res < 0 ?
					 rf_strerror((int)done[i].res) : "");
				break;
			}
			if (r->bounce)
				memcpy(r->dst, r->bounce, r->vlen);
			if (r->cpage != UINT32_MAX)
				sc.pending[r->cpage] = 0;
			bytes += (uint64_t)done[i].res;
		}
		atomic_fetch_add_explicit(&ld->st_bytes_read, bytes, memory_order_relaxed);
		pthread_mutex_lock(&ld->mu);
		if (n < 0) {
			snprintf(msg, sizeof(msg), "loader: waiting for reads failed: %s (%s)",
				 rf_strerror(n), ld->io_diag.msg);
			fail_locked(ld, n, msg);
			break;
		}
		if (err) {
			fail_locked(ld, err, msg);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct fread_rec *r = &rec[done[i].tag];
			fq[r->fb].left--;
			r->next_free = free_rec;
			free_rec = (uint32_t)done[i].tag;
			inflight--;
		}
		ld->inflight = inflight;
	}
out:
	pthread_mutex_unlock(&ld->mu);
	/* Reads still in flight land in ring memory: wait for them before the
	 * ring can be unmapped. */
	while (rf_io_inflight(ld->io) > 0) {
		if (rf_io_wait(ld->io, done, 64, 1) < 0)
			break;
	}
	for (unsigned i = 0; i < nb; i++)
		rf_ring_release(ld->ring, bslots[i]);
	free(fq);
	free(rec);
	free(items);
	free(fsum);
	free(fsmp);
	free(sc.page);
	free(sc.tag);
	free(sc.shard);
	free(sc.pending);
	free(sc.last);
	thread_exit_account(ld, 0);
	return NULL;
}

/* ------------------------------------------------------- config, open */

RF_API void
rf_config_init(rf_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->batch_size = 32;
	cfg->drop_last = 0;
	cfg->epochs = 1;
	cfg->device = RF_DEVICE_AUTO;
	cfg->device_index = RF_DEVICE_INDEX_AUTO;
	cfg->depth = 2;
	cfg->pinned_bytes = 256ull << 20;
	cfg->pinning = RF_PINNING_RING;
	cfg->io_depth = 32;
	cfg->direct = -1;
	cfg->decode_threads = 0; /* auto: see decode_threads_auto */
	cfg->verify = 1;
	cfg->var_bytes = 0;
	cfg->shuffle = RF_SHUFFLE_NONE;
	cfg->rank = -1;
	cfg->world = -1;
}

RF_API const char *
rf_loader_last_open_error(void)
{
	return open_error;
}

static void loader_free(rf_loader *ld);

/* The default capacity of a variable field's region per batch: twice B
 * times the largest per-sample average of any chunk, so a batch of typical
 * samples fits with room for variance (the raw chunk bytes bound every
 * field's bytes in it). */
static int
default_var_bytes(rf_loader *ld, uint64_t *out)
{
	uint64_t per = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		uint64_t a = (ci->raw_bytes + ci->samples - 1) / ci->samples;
		if (a > per)
			per = a;
	}
	uint64_t v;
	if (rf_mul_u64(per, 2ull * ld->cfg.batch_size, &v))
		return -1;
	if (v < 4096)
		v = 4096;
	*out = RF_ALIGN_UP(v, RF_BATCH_ALIGN);
	return 0;
}

static int
open_device(rf_loader *ld)
{
	rf_diag *d = &ld->dev_diag;
	int rc;
	/* The backend's failure is passed on through ld->diag, which logs
	 * it: logged once, not once per diag. */
	d->errors_quiet = 1;
	switch (ld->cfg.device) {
	case RF_DEVICE_HOST:
		rc = rf_device_open_host(&ld->dev, d);
		break;
	case RF_DEVICE_CUDA:
		rc = rf_device_open_cuda(&ld->dev, ld->cfg.device_index, d);
		break;
	case RF_DEVICE_AUTO:
		/* A probe: no runtime or no device is an answer here, not an
		 * error, so it is logged once below at info level.  A usage
		 * error (a malformed LOCAL_RANK, a bad index) is not an
		 * answer: host would hide it (an index the runtime does not
		 * have is one); nor is the failure of a runtime named by
		 * RINGFEED_CUDART.  An index with no runtime or no device at
		 * all is the probe's answer: host. */
		rc = rf_device_open_cuda(&ld->dev, ld->cfg.device_index, d);
		const char *cudart = getenv("RINGFEED_CUDART");
		int chosen = cudart && *cudart;
		if (rc < 0 && rc != RF_EUSAGE && !chosen) {
			rf_log(&ld->diag, RF_LOG_INFO, "device auto: no CUDA device (%s); using host",
			       d->msg);
			rc = rf_device_open_host(&ld->dev, d);
		}
		break;
	default:
		d->errors_quiet = 0;
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: device %d is not auto, host or cuda",
			       (int)ld->cfg.device);
	}
	d->errors_quiet = 0;
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", d->msg);
	if (ld->dev->why[0])
		rf_log(&ld->diag, RF_LOG_INFO, "device: %s; cuda:%d (%s)", ld->dev->desc,
		       ld->dev->index, ld->dev->why);
	else
		rf_log(&ld->diag, RF_LOG_INFO, "device: %s", ld->dev->desc);
	return 0;
}

/* Bytes the kernel reports as available for new work (MemAvailable), or 0
 * when /proc/meminfo cannot be read. */
static uint64_t
mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[256];
	unsigned long long kib = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

/*
 * direct = -1 (the default) chooses per open: O_DIRECT unless the dataset's
 * stored bytes are at most a quarter of the memory available now.  A
 * dataset that large would push the training program's own memory out of
 * the page cache, and every epoch would evict what the next one needs
 * first; a small one stays cached after the first epoch, and reading it
 * from the cache beats reading the disk every epoch.
 */
static void
choose_direct(rf_loader *ld)
{
	if (ld->cfg.direct >= 0)
		return;
	uint64_t stored = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		stored += ld->chunks[c].stored_bytes;
	uint64_t avail = mem_available();
	ld->cfg.direct = !(avail && stored <= avail / 4);
	char a[32], b[32];
	fmt_size(a, sizeof a, stored);
	fmt_size(b, sizeof b, avail);
	rf_log(&ld->diag, RF_LOG_INFO, "reads: %s (dataset %s, memory available %s)",
	       ld->cfg.direct ? "O_DIRECT" : "buffered, the dataset fits in the page cache", a, b);
}

/* Staged batches wanted when the ring has room (see plan_memory). */
#define RF_STAGE_DEEP 16

/* rf_config.tokens: *tok is the selected field to split into int32 inputs
 * and targets (UINT32_MAX: none), after the checks the header lists. */
static int
tokens_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel, uint32_t *tok)
{
	const rf_config *cfg = &ld->cfg;
	const char *ds = rf_dataset_shard_path(ld->ds, 0);
	*tok = UINT32_MAX;
	if (cfg->tokens == RF_TOKENS_STORED)
		return 0;
	if (cfg->tokens != RF_TOKENS_INPUTS_TARGETS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: tokens = %d is not a token layout",
			       (int)cfg->tokens);
	if (ld->full_mode)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout is "
			       "not available with shuffle full, which reads values straight into "
			       "the batch: use shuffle window");
	for (uint32_t i = 0; i < nsel; i++) {
		const char *name = ld->schema->fields[sel[i]].name;
		if (!strcmp(name, "tokens"))
			*tok = i;
		else if (!strcmp(name, "inputs") || !strcmp(name, "targets"))
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout "
				       "names two fields 'inputs' and 'targets', but %s has a field '%s' "
				       "too: leave it out (rf_config.fields)", ds, name);
	}
	if (*tok == UINT32_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "a loaded field named 'tokens' (as `ringfeed pack --llmc` writes); %s "
			       "has none%s", ds, nsel < ld->schema->nfields ? " among the fields loaded" : "");
	const rf_field *f = &ld->schema->fields[sel[*tok]];
	if (!rf_token_field_ok(f))
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "field 'tokens' of %s to hold T + 1 >= 2 tokens of u16, u32 or i32 per "
			       "sample (one fixed dimension); it is %s of %u dimension(s)%s", ds,
			       rf_dtype_name(f->dtype), f->rank, f->var_dim >= 0 ? ", variable" : "");
	if (nsel >= RF_MAX_FIELDS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout makes "
			       "one field two: load at most %d fields", RF_MAX_FIELDS - 1);
	return 0;
}

/* Decide the batch layout, slot size and counts, and check them against the
 * pinned budget and the device's free memory. */
static int
plan_memory(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	rf_config *cfg = &ld->cfg;
	char a[32], b[32], c[32];
	uint64_t var_cap = cfg->var_bytes;
	int has_var = 0;
	for (uint32_t i = 0; i < nsel; i++)
		has_var |= ld->schema->fields[sel[i]].var_dim >= 0;
	if (has_var && var_cap == 0 && default_var_bytes(ld, &var_cap) < 0)
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: the variable-size region of "
			       "a batch overflows: lower batch_size or set var_bytes");
	/* The batch is sized from its delivered layout: with token parts,
	 * int32 inputs and targets rather than the stored tokens. */
	uint32_t tok;
	int rc = tokens_check(ld, sel, nsel, &tok);
	if (rc < 0)
		return rc;
	rc = tok < nsel ? rf_batch_layout_init_tokens(&ld->layout, ld->schema, sel, nsel, tok,
						      cfg->batch_size, var_cap, &ld->diag)
			: rf_batch_layout_init(&ld->layout, ld->schema, sel, nsel, cfg->batch_size,
					       var_cap, &ld->diag);
	if (rc < 0)
		return rc;
	uint64_t bb = ld->layout.bytes;
	uint64_t span = rf_dataset_max_stored_span(ld->ds);
	/* The window is part of the order: a function of the dataset (and
	 * of rf_config.window) alone, which the ring must hold; never sized
	 * from the budget, which may differ between ranks. */
	uint32_t wnd = 0;
	if (cfg->shuffle == RF_SHUFFLE_WINDOW) {
		uint64_t raw = 0;
		for (uint64_t ci = 0; ci < ld->nchunks; ci++)
			raw += ld->chunks[ci].raw_bytes;
		uint32_t w = cfg->window ? cfg->window
					 : rf_plan_default_window(ld->nchunks ? raw / ld->nchunks : 0);
		wnd = rf_plan_window_in_force(w, ld->nchunks);
		if (wnd > RF_PLAN_WINDOW_MAX)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: window %u: at most %u chunks",
				       cfg->window, RF_PLAN_WINDOW_MAX);
		ld->window = wnd;
	}
	uint64_t slot = RF_ALIGN_UP(bb > span ? bb : span, 4096);
	if (ld->full_mode) {
		/* No chunk is read whole: a slot is a batch.  Values O_DIRECT
		 * cannot read in place need a bounce area per read in flight,
		 * the largest value's aligned covering range, carved from
		 * slots set aside (see full_main). */
		const rf_batch_part *p0 = &ld->layout.part[0];
		int in_place = ld->layout.nparts == 1 && p0->field == 0 && p0->off == 0 &&
			       p0->value_bytes % 4096 == 0;
		ld->f_bspan = 0;
		if (cfg->direct && !in_place)
			for (uint32_t i = 0; i < ld->layout.nparts; i++) {
				uint64_t bs = RF_ALIGN_UP(ld->layout.part[i].value_bytes, 4096) + 4096;
				if (bs > ld->f_bspan)
					ld->f_bspan = bs;
			}
		/* A sample's checksum row is never 4096-aligned: bounced. */
		uint64_t row = RF_ALIGN_UP(8 * (uint64_t)ld->schema->nfields, 4096) + 4096;
		if (cfg->direct && ld->f_sums && row > ld->f_bspan)
			ld->f_bspan = row;
		slot = RF_ALIGN_UP(bb > ld->f_bspan ? bb : ld->f_bspan, 4096);
		span = 0;
	}
	if (slot < bb || slot == 0)
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: a batch of %u samples is too "
			       "large: lower batch_size", cfg->batch_size);
	uint64_t nslots = cfg->pinned_bytes / slot;
	ld->slot_bytes = slot;
	if (nslots < 2) {
		fmt_size(a, sizeof a, cfg->pinned_bytes);
		fmt_size(b, sizeof b, bb);
		fmt_size(c, sizeof c, span);
		char need[32];
		fmt_size(need, sizeof need, 2 * slot);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: pinned_bytes %s holds %" PRIu64 " slot(s) of %" PRIu64
			       " bytes (the larger of a batch, %s for batch_size %u, and the largest "
			       "chunk read, %s); the loader needs at least 2 (one read, one staged "
			       "batch): raise pinned_bytes to at least %s or lower batch_size",
			       a, nslots, slot, b, cfg->batch_size, c, need);
	}
	if (nslots > 4096)
		nslots = 4096; /* more slots only add bookkeeping */
	/* Host device: a batch is handed out in the slot it was assembled (or
	 * read) in, with no copy into a separate buffer; the slot goes back
	 * when the batch is released.  Up to depth slots are then the
	 * consumer's, on top of what the pipeline needs.  RINGFEED_HOST_COPY=1
	 * copies instead, as the cuda path does (to compare the two). */
	const char *hc = getenv("RINGFEED_HOST_COPY");
	ld->zero_copy = strcmp(ld->dev->ops->name, "host") == 0 && !(hc && strcmp(hc, "1") == 0);
	unsigned zdepth = ld->zero_copy ? ld->depth : 0;
	if (!ld->full_mode) {
		/* A read slot holds one chunk: more read slots than the dataset
		 * has chunks (plus the staging side and a window) would be
		 * page-locked for nothing, and locking them costs time at open
		 * (about 1 s per GiB). */
		uint64_t useful = ld->nchunks + RF_STAGE_DEEP + ld->depth + zdepth + 2 + wnd;
		if (nslots > useful)
			nslots = useful;
	}
	ld->nslots = (unsigned)nslots;
	/* Staging: enough for the copy stage to stay busy (depth + 2 batches,
	 * at least 4 so the gather wakes for several at a time) but never more
	 * than half of the ring: reads keep the disk busy. */
	unsigned want = ld->depth + 2 > 4 ? ld->depth + 2 : 4;
	unsigned st = ld->nslots / 2;
	if (st > want)
		st = want;
	if (st < 1)
		st = 1;
	/*
	 * More staged batches absorb a pipeline thread that waits for a core
	 * longer than a few training steps (with 100 us steps on 2 cores, 4
	 * staged batches left the consumer waiting 1.2 % of the time, 16 left
	 * it 0.3 %).  They come only from read slots the dataset cannot use
	 * (more than its chunks): taking reads it can use cost half of the
	 * O_DIRECT read rate with a 64 MiB ring.  The host device's slots lent
	 * to the consumer (zero copy) are staging slots too, added the same
	 * way; without spare reads they come out of the staging share, which
	 * must then hold depth of them and one more.
	 */
	unsigned reads = ld->nslots - st;
	uint64_t need = ld->nchunks + 2 + wnd;
	unsigned spare = reads > need ? (unsigned)(reads - need) : 0;
	unsigned more = (RF_STAGE_DEEP > want ? RF_STAGE_DEEP - want : 0) + zdepth;
	st += spare < more ? spare : more;
	if (ld->zero_copy && st < ld->depth + 1)
		ld->zero_copy = 0; /* too small to lend depth slots: copy */
	ld->n_stage = st;
	ld->n_read = ld->nslots - st;
	if (wnd && ld->n_read < (uint64_t)wnd + 2) {
		/* W chunks held, one read into and one decoded beside them (see
		 * window_setup): W + 2 read slots besides the staging ones. */
		uint64_t slots = (uint64_t)wnd + 2 + want, need_bytes;
		if (rf_mul_u64(slots, slot, &need_bytes))
			need_bytes = UINT64_MAX;
		fmt_size(a, sizeof a, cfg->pinned_bytes);
		fmt_size(b, sizeof b, need_bytes);
		fmt_size(c, sizeof c, slot);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: window shuffling with a window of W = %u chunks needs "
			       "%u read slots of %s besides %u staging ones, pinned_bytes %" PRIu64
			       " (%s); pinned_bytes %" PRIu64 " (%s) gives %u: raise pinned_bytes to "
			       "%" PRIu64 " or set a smaller window (the same on every rank: W is "
			       "part of the order)", wnd, wnd + 2, c, want, need_bytes, b,
			       cfg->pinned_bytes, a, ld->n_read, need_bytes);
	}
	if (ld->full_mode) {
		/* Every slot holds a batch (being read or staged), but those set
		 * aside for bounce areas; the queue depth shrinks when the ring
		 * cannot hold bounce areas for all of it and 2 batches. */
		ld->qd = cfg->io_depth;
		ld->f_nbounce = 0;
		if (ld->f_bspan) {
			uint64_t per = slot / ld->f_bspan;
			uint64_t most = (uint64_t)(ld->nslots - 2 < 64 ? ld->nslots - 2 : 64) * per;
			if (ld->qd > most)
				ld->qd = (unsigned)most;
			if (ld->qd == 0)
				return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: pinned_bytes %" PRIu64
					       " holds %u slots of %" PRIu64 " bytes: shuffle full needs "
					       "at least 3: raise pinned_bytes", cfg->pinned_bytes,
					       ld->nslots, slot);
			ld->f_nbounce = (unsigned)((ld->qd + per - 1) / per);
		}
		ld->n_stage = ld->nslots - ld->f_nbounce;
		ld->n_read = 0;
		if (ld->zero_copy && ld->n_stage < ld->depth + 1)
			ld->zero_copy = 0;
	}
	/*
	 * Map mode: a read is a chunk faulted in where it lies in its shard's
	 * map, so the ring holds only the staging slots, each the size of a
	 * batch.  The reads still count as chunk-sized slots of the budget:
	 * they bound how far ahead the reader faults chunks in, as far as read
	 * calls would have read ahead, so a map never runs further ahead of the
	 * consumer (and evicts more of the page cache) than pinned_bytes would
	 * allow.
	 */
	ld->n_ring = ld->map_mode ? ld->n_stage : ld->nslots;
	ld->ring_slot_bytes = ld->map_mode ? RF_ALIGN_UP(bb, 4096) : slot;

	uint64_t dev_bytes = 0;
	if (!ld->zero_copy && rf_mul_u64(bb, ld->depth, &dev_bytes))
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: depth x batch bytes overflows");
	size_t fr = 0, tot = 0;
	rc = ld->dev->ops->mem_info(ld->dev, &fr, &tot);
	if (rc == 0 && dev_bytes > fr) {
		fmt_size(a, sizeof a, dev_bytes);
		fmt_size(b, sizeof b, bb);
		fmt_size(c, sizeof c, fr);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: device buffers need %s (depth %u x batch %s for "
			       "batch_size %u) but %s has only %s free: lower batch_size or depth",
			       a, ld->depth, b, cfg->batch_size, ld->dev->desc, c);
	}
	fmt_size(a, sizeof a, (uint64_t)ld->n_ring * ld->ring_slot_bytes);
	fmt_size(b, sizeof b, dev_bytes);
	if (ld->map_mode)
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u staging slots of %" PRIu64 " bytes%s; up to %u "
		       "chunks faulted in ahead in the shard maps; device %s = %u x %" PRIu64
		       " bytes", a, ld->n_ring, ld->ring_slot_bytes,
		       ld->zero_copy ? " (up to depth of them hold batches handed out)" : "",
		       ld->n_read, b, ld->zero_copy ? 0 : ld->depth, bb);
	else if (ld->zero_copy)
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging, "
		       "of which up to %u hold batches handed out: host delivery without a copy)",
		       a, ld->nslots, slot, ld->n_read, ld->n_stage, ld->depth);
	else
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging); "
		       "device %s = %u x %" PRIu64 " bytes", a, ld->nslots, slot, ld->n_read,
		       ld->n_stage, b, ld->depth, bb);
	return 0;
}

static int
alloc_device_buffers(rf_loader *ld)
{
	const struct rf_device_ops *ops = ld->dev->ops;
	int rc = ops->stream_create(ld->dev, &ld->copy_stream);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: creating the copy stream failed: %s",
			       ld->dev_diag.msg);
	/* Host backend: an idle copy stream copies in this thread instead of
	 * handing each small batch to its worker and back (a no-op for cuda). */
	(void)rf_device_host_stream_inline(ld->dev, ld->copy_stream, 1);
	ld->dbufs = calloc(ld->depth, sizeof(*ld->dbufs));
	ld->rq = calloc(ld->depth, sizeof(*ld->rq));
	if (!ld->dbufs || !ld->rq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint32_t i = 0; i < ld->depth; i++) {
		struct dbuf *b = &ld->dbufs[i];
		b->ld = ld;
		b->fields = calloc(ld->layout.nparts, sizeof(*b->fields));
		if (ld->nvar)
			b->host_off = calloc((uint64_t)ld->nvar * (ld->layout.batch + 1), 8);
		if (!b->fields || (ld->nvar && !b->host_off))
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
		rc = ld->zero_copy ? 0 : ops->alloc(ld->dev, ld->layout.bytes, &b->dptr);
		if (rc < 0) {
			b->dptr = NULL;
			char a[32], bb[32];
			fmt_size(a, sizeof a, ld->layout.bytes * ld->depth);
			fmt_size(bb, sizeof bb, ld->layout.bytes);
			return rf_fail(&ld->diag, RF_EMEMPLAN,
				       "memory plan: allocating device buffer %u of %u (%s each, %s "
				       "in all for batch_size %u) failed on %s: %s; lower batch_size "
				       "or depth", i + 1, ld->depth, bb, a, ld->cfg.batch_size,
				       ld->dev->desc, ld->dev_diag.msg);
		}
		if (!ld->zero_copy)
			ld->device_bytes += ld->layout.bytes;
		rc = ops->event_create(ld->dev, &b->copy_event);
		if (rc == 0)
			rc = ops->event_create(ld->dev, &b->rel_event);
		if (rc < 0)
			return rf_fail(&ld->diag, rc, "loader: creating events failed: %s",
				       ld->dev_diag.msg);
	}
	return 0;
}

static int
start_threads(rf_loader *ld)
{
	int rc;
	ld->ncpu = 2 + ld->nworkers;
	for (unsigned i = 0; i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		rc = pthread_create(&w->thread, NULL, worker_main, w);
		if (rc)
			return rf_fail(&ld->diag, -rc, "loader: cannot start a decode thread");
		w->started = 1;
		pthread_mutex_lock(&ld->mu);
		ld->cpu[2 + i].thread = w->thread;
		ld->cpu[2 + i].live = 1;
		pthread_mutex_unlock(&ld->mu);
	}
	rc = pthread_create(&ld->copier, NULL, copy_main, ld);
	if (rc)
		return rf_fail(&ld->diag, -rc, "loader: cannot start the copy thread");
	ld->copier_started = 1;
	pthread_mutex_lock(&ld->mu);
	ld->cpu[1].thread = ld->copier;
	ld->cpu[1].live = 1;
	pthread_mutex_unlock(&ld->mu);
	rc = pthread_create(&ld->reader, NULL, ld->full_mode ? full_main : reader_main, ld);
	if (rc)
		return rf_fail(&ld->diag, -rc, "loader: cannot start the reader thread");
	ld->reader_started = 1;
	pthread_mutex_lock(&ld->mu);
	ld->cpu[0].thread = ld->reader;
	ld->cpu[0].live = 1;
	pthread_mutex_unlock(&ld->mu);
	return 0;
}

/* The order in force, for the stats: its id and window. */
static void
order_note(rf_loader *ld)
{
	const rf_plan_params *op = rf_plan_params_get(ld->gplan);
	ld->order_id = rf_plan_order_id(op, ld->nchunks);
	ld->order_window = op->mode == RF_PLAN_WINDOW ? op->window : 0;
}

/* The config's shuffle for a plan mode. */
static enum rf_shuffle
shuffle_of_mode(enum rf_plan_mode m)
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
static int
plan_seek_blob(rf_loader *ld, const void *blob, size_t len)
{
	rf_config *cfg = &ld->cfg;
	int rc = rf_plan_state_load(ld->gplan, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: resume: %s", ld->plan_diag.msg);
	const rf_plan_params *lp = rf_plan_params_get(ld->gplan);
	if ((lp->mode == RF_PLAN_FULL) != ld->full_mode ||
	    (lp->mode == RF_PLAN_WINDOW) != ld->window_mode)
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the saved shuffle mode %s "
			       "cannot continue in this loader (open it with that shuffle mode)",
			       rf_plan_mode_name(lp->mode));
	if (ld->window_mode && lp->window > ld->window)
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the position was saved with "
			       "a window of %u chunks, this loader holds %u: open it with window = "
			       "%u (and pinned_bytes for it)", lp->window, ld->window, lp->window);
	if (cfg->epochs && (lp->epoch < ld->epoch_last - cfg->epochs || lp->epoch >= ld->epoch_last))
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the position lies in epoch %"
			       PRIu64 ", outside this loader's epochs %" PRIu64 "..%" PRIu64 " (epoch + "
			       "epochs - 1, counted from rf_config.epoch whether or not the run "
			       "resumes): open with the epoch and epochs of the run that saved it",
			       lp->epoch, ld->epoch_last - cfg->epochs, ld->epoch_last - 1);
	rc = rf_plan_state_load(ld->rplan, blob, len);
	if (rc == 0)
		rc = rf_plan_state_load(ld->splan, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: resume: %s", ld->plan_diag.msg);
	cfg->shuffle = shuffle_of_mode(lp->mode);
	cfg->seed = lp->seed;
	cfg->epoch = lp->epoch;
	uint64_t start = rf_plan_tell(ld->gplan);
	ld->r_epoch = ld->g_epoch = ld->deliv_epoch = lp->epoch;
	ld->g_done = ld->deliv_done = start;
	ld->g_skip = ld->deliv_part = rf_plan_state_part(ld->gplan);
	ld->g_n = ld->g_i = 0;
	ld->r_nreads = rf_plan_reads(ld->rplan);
	ld->r_entry = 0;
	ld->f_next = start;
	if (ld->full_mode) {
		/* Full mode has no read sequence: the batch is the position. */
	} else if (start >= rf_plan_batches(ld->rplan)) {
		ld->r_entry = ld->r_nreads; /* the saved epoch is complete */
	} else if (start > 0) {
		/* Reads below the first item's keep_from are never needed again
		 * this epoch (in none and chunks modes it is the item's read). */
		uint32_t n = 0;
		rc = rf_plan_batch(ld->rplan, start, ld->items, cfg->batch_size, &n);
		if (rc < 0 || n == 0)
			return rf_fail(&ld->diag, rc < 0 ? rc : RF_ESTATE, "loader: resume: batch %"
				       PRIu64 " of the plan is missing", start);
		ld->r_entry = ld->items[0].keep_from;
	}
	order_note(ld);
	rf_log(&ld->diag, RF_LOG_INFO, "resume: epoch %" PRIu64 ", batch %" PRIu64 " (read %" PRIu64
	       ")", lp->epoch, start, ld->r_entry);
	return 0;
}

/*
 * Window shuffling holds W decoded chunks: uncompressed ones in their read
 * slots (so the reader must keep slots beyond them: W <= read slots - 2,
 * which the memory plan has checked), compressed ones in raw buffers of
 * ordinary memory.  W, the window in force, was set by the memory plan.
 */
static int
window_setup(rf_loader *ld, uint32_t *window)
{
	uint32_t w = ld->window;
	ld->window_mode = 1;
	ld->wcap = w + 2;
	ld->wtab = calloc(ld->wcap, sizeof(*ld->wtab));
	ld->wpool_cap = w + ld->nworkers + 1;
	ld->wpool = calloc(ld->wpool_cap, sizeof(*ld->wpool));
	if (!ld->wtab || !ld->wpool)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint32_t i = 0; i < ld->wcap; i++)
		ld->wtab[i].slot = -1;
	ld->raw_cap = rf_dataset_max_raw_bytes(ld->ds);
	*window = w;
	return 0;
}

/* The two plan cursors (reader and gather) over the same order. */
static int
open_plan(rf_loader *ld)
{
	rf_config *cfg = &ld->cfg;
	int rc;
	static const char *const modes[] = {"none", "chunks", "window", "full"};
	if ((unsigned)cfg->shuffle > RF_SHUFFLE_FULL)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle %d is not none, chunks, window "
			       "or full", (int)cfg->shuffle);

	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.mode = cfg->shuffle == RF_SHUFFLE_CHUNKS   ? RF_PLAN_CHUNKS
		  : cfg->shuffle == RF_SHUFFLE_WINDOW ? RF_PLAN_WINDOW
		  : cfg->shuffle == RF_SHUFFLE_FULL   ? RF_PLAN_FULL : RF_PLAN_NONE;
	pp.seed = cfg->seed;
	pp.epoch = cfg->epoch;
	pp.batch = cfg->batch_size;
	pp.window = 1;
	if (cfg->shuffle == RF_SHUFFLE_WINDOW) {
		rc = window_setup(ld, &pp.window);
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
	const char *source = "";
	rf_diag_init(&ld->plan_diag, cfg->log, cfg->log_user);
	ld->plan_diag.errors_quiet = 1; /* each failure is passed on through ld->diag */
	rc = rf_plan_resolve_rank(cfg->rank, cfg->world, NULL, NULL, &pp.rank, &pp.world,
				      &source, &ld->plan_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->plan_diag.msg);
	ld->rank = pp.rank;
	ld->world = pp.world;

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
	rc = rf_plan_create(&ld->rplan, &pp, counts, ld->nchunks, &ld->plan_diag);
	if (rc == 0)
		rc = rf_plan_create(&ld->gplan, &pp, counts, ld->nchunks, &ld->plan_diag);
	if (rc == 0)
		rc = rf_plan_create(&ld->splan, &pp, counts, ld->nchunks, &ld->plan_diag);
	free(counts);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->plan_diag.msg);
	ld->items = calloc(cfg->batch_size, sizeof(*ld->items));
	if (!ld->items)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for %u plan items",
			       cfg->batch_size);
	ld->r_epoch = ld->g_epoch = ld->deliv_epoch = cfg->epoch;
	ld->r_nreads = rf_plan_reads(ld->rplan);
	/* Set before a resume replaces cfg->epoch: the end is the config's. */
	ld->epoch_last = cfg->epochs ? cfg->epoch + cfg->epochs : 0;
	if (cfg->resume) {
		rc = plan_seek_blob(ld, cfg->resume, cfg->resume_len);
		if (rc < 0)
			return rc;
	}
	/* Every epoch has the same number of batches: none means nothing to
	 * stream, ever (not an endless loop over empty epochs). */
	ld->plan_empty = rf_plan_batches(ld->rplan) == 0;
	/* After a resume the blob's order is the one in force. */
	const rf_plan_params *op = rf_plan_params_get(ld->gplan);
	order_note(ld);
	char wdesc[48] = "";
	if (op->mode == RF_PLAN_WINDOW)
		snprintf(wdesc, sizeof wdesc, ", window W = %u chunks", op->window);
	rf_log(&ld->diag, RF_LOG_INFO, "plan: shuffle %s%s, seed %" PRIu64 ", rank %u of %u (%s), "
	       "%" PRIu64 " batches of %u per epoch, order id %016" PRIx64, modes[cfg->shuffle],
	       wdesc, cfg->seed, pp.rank, pp.world, source, rf_plan_batches(ld->rplan),
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

/* decode_threads = 0: a worker per CPU for compressed data (up to 8);
 * uncompressed chunks need only checksums and gathers, memory-bound work
 * where a second worker pays only from 4 CPUs (below, it takes the core the
 * consumer needs). */
static uint32_t
decode_threads_auto(int compressed)
{
	cpu_set_t set;
	long n = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	if (compressed)
		return n > 8 ? 8 : (uint32_t)n;
	return n >= 4 ? 2 : 1;
}

/* The reader's engine over the pinned ring, and every shard added to it. */
static int
open_io(rf_loader *ld)
{
	rf_io_config icfg;
	rf_io_config_init(&icfg);
	icfg.queue_depth = ld->qd;
	icfg.direct = ld->cfg.direct;
	/* Registered with io_uring, the ring's pages are locked for as long
	 * as the loader lives: not with transient pinning, whose point is to
	 * lock only the slots being copied. */
	if (ld->cfg.pinning != RF_PINNING_TRANSIENT) {
		icfg.region = rf_ring_base(ld->ring);
		icfg.region_bytes = rf_ring_bytes(ld->ring);
	}
	int rc = rf_io_open(&ld->io, &icfg, &ld->io_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->io_diag.msg);
	ld->files = calloc(ld->nshards ? ld->nshards : 1, sizeof(*ld->files));
	if (!ld->files)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	if ((rc = rf_fd_reserve(ld->nshards, "loader", &ld->diag)) < 0)
		return rc;
	for (size_t i = 0; i < ld->nshards; i++) {
		rc = rf_io_add_file(ld->io, rf_dataset_shard_path(ld->ds, i), &ld->files[i]);
		if (rc < 0)
			return rf_fail(&ld->diag, rc, "%s", ld->io_diag.msg);
	}
	snprintf(ld->io_engine, sizeof(ld->io_engine), "%s", rf_io_engine(ld->io));
	ld->io_direct = rf_io_direct(ld->io);
	return 0;
}

/* Map mode: every read slot number (n_stage and up, past the ring's own)
 * free, the lowest taken first. */
static void
map_slots_reset(rf_loader *ld)
{
	if (!ld->map_mode)
		return;
	ld->mfree_n = 0;
	memset(ld->mfree_is, 0, ld->nslots);
	for (unsigned i = ld->nslots; i-- > ld->n_ring;) {
		ld->mfree_is[i] = 1;
		ld->mfree[ld->mfree_n++] = i;
	}
}

/* Map mode (rf_config.map): every shard mapped whole, read-only, shared
 * with the page cache; no reader engine. */
static int
open_maps(rf_loader *ld)
{
	long pg = sysconf(_SC_PAGESIZE);
	ld->page = pg > 0 ? (size_t)pg : 4096;
	ld->map_populate = 1;
	size_t n = ld->nshards ? ld->nshards : 1;
	ld->maps = calloc(n, sizeof(*ld->maps));
	ld->map_len = calloc(n, sizeof(*ld->map_len));
	ld->rbase = calloc(ld->nslots, sizeof(*ld->rbase));
	ld->mfree = calloc(ld->nslots, sizeof(*ld->mfree));
	ld->mfree_is = calloc(ld->nslots, 1);
	ld->mvec_len = (size_t)(rf_dataset_max_stored_span(ld->ds) / ld->page) + 2;
	ld->mvec = malloc(ld->mvec_len);
	if (!ld->maps || !ld->map_len || !ld->rbase || !ld->mfree || !ld->mfree_is || !ld->mvec)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	map_slots_reset(ld);
	for (size_t i = 0; i < ld->nshards; i++) {
		const char *path = rf_dataset_shard_path(ld->ds, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = -errno;
			return rf_fail(&ld->diag, e, "%s: cannot open: %s", path, rf_strerror(e));
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			int e = -errno;
			close(fd);
			return rf_fail(&ld->diag, e, "%s: cannot map: %s", path, rf_strerror(e));
		}
		if (st.st_size <= 0) {
			close(fd);
			return rf_fail(&ld->diag, RF_ETRUNCATED, "%s: cannot map: the file is empty",
				       path);
		}
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		int e = m == MAP_FAILED ? -errno : 0;
		close(fd);
		if (e)
			return rf_fail(&ld->diag, e, "%s: cannot map %" PRId64 " bytes: %s", path,
				       (int64_t)st.st_size, rf_strerror(e));
		ld->maps[i] = m;
		ld->map_len[i] = (uint64_t)st.st_size;
	}
	snprintf(ld->io_engine, sizeof(ld->io_engine), "mmap");
	ld->io_direct = 0;
	return 0;
}

static int
loader_open(rf_loader *ld, const rf_config *ucfg)
{
	rf_config *cfg = &ld->cfg;
	int rc;

	if (cfg->npaths == 0 || !cfg->paths)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: no dataset paths given (paths %s, "
			       "npaths %zu)", cfg->paths ? "set" : "NULL", cfg->npaths);
	/* A count without its array is a mistake, not "the default". */
	if (!cfg->fields && cfg->nfields)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: nfields is %zu but fields is NULL "
			       "(NULL with nfields 0 loads every field)", cfg->nfields);
	if (!cfg->resume && cfg->resume_len)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: resume_len is %zu but resume is NULL",
			       cfg->resume_len);
	if (cfg->batch_size == 0)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: batch_size must be at least 1");
	if (cfg->depth == 0)
		cfg->depth = 2;
	if (cfg->depth > 64)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: depth %u is more than 64", cfg->depth);
	if (cfg->pinning != RF_PINNING_RING && cfg->pinning != RF_PINNING_TRANSIENT)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: pinning %d is not ring or transient",
			       (int)cfg->pinning);
	if (cfg->decode_threads > 64)
		cfg->decode_threads = 64;
	if (cfg->io_depth == 0)
		cfg->io_depth = 32;
	if (cfg->io_depth > RF_IO_DEPTH_MAX) /* what a ring is allocated for at open */
		cfg->io_depth = RF_IO_DEPTH_MAX;
	if (cfg->epochs && cfg->epoch > UINT64_MAX - cfg->epochs)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: epoch %" PRIu64 " + epochs %u "
			       "overflows the epoch counter", cfg->epoch, cfg->epochs);
	ld->depth = cfg->depth;

	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.verify = cfg->verify;
	dcfg.log = cfg->log;
	dcfg.log_user = cfg->log_user;
	rc = rf_dataset_open(&ld->ds, cfg->paths, cfg->npaths, &dcfg);
	if (rc < 0) {
		snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", rf_dataset_last_open_error());
		return rc;
	}
	ld->schema = rf_dataset_schema(ld->ds);
	ld->chunks = rf_dataset_chunk_table(ld->ds);
	ld->nchunks = rf_dataset_chunks(ld->ds);
	ld->nshards = rf_dataset_shards(ld->ds);
	/* The loader reads through the reader's descriptors or maps, never
	 * through the index's: one descriptor per shard, not two. */
	rf_dataset_close_files(ld->ds);

	/* The fields, by name or all. */
	uint32_t sel[RF_MAX_FIELDS], nsel = 0;
	if (ucfg->fields) {
		if (cfg->nfields == 0 || cfg->nfields > RF_MAX_FIELDS)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: %zu fields selected (1..%d)",
				       cfg->nfields, RF_MAX_FIELDS);
		for (size_t i = 0; i < cfg->nfields; i++) {
			int k = cfg->fields[i] ? rf_schema_find(ld->schema, cfg->fields[i]) : -1;
			if (k < 0) {
				/* The names there are, so a typo shows at once. */
				char have[256];
				size_t o = 0;
				have[0] = 0;
				for (uint32_t f = 0; f < ld->schema->nfields; f++) {
					int w = snprintf(have + o, sizeof(have) - o, "%s%s",
							 f ? ", " : "", ld->schema->fields[f].name);
					if (w < 0 || (size_t)w >= sizeof(have) - o) {
						snprintf(have + (o < sizeof(have) - 6 ? o : sizeof(have) - 6),
							 6, ", ...");
						break;
					}
					o += (size_t)w;
				}
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: no field named '%s' in %s; "
					       "its fields are: %s",
					       cfg->fields[i] ? cfg->fields[i] : "(null)",
					       rf_dataset_shard_path(ld->ds, 0), have);
			}
			for (uint32_t j = 0; j < nsel; j++)
				if (sel[j] == (uint32_t)k)
					return rf_fail(&ld->diag, RF_EUSAGE,
						       "loader: field '%s' selected twice", cfg->fields[i]);
			sel[nsel++] = (uint32_t)k;
		}
	} else {
		for (uint32_t i = 0; i < ld->schema->nfields; i++)
			sel[nsel++] = i;
	}
	/* The strings and arrays are the caller's: keep no pointer to them. */
	cfg->paths = NULL;
	cfg->fields = NULL;
	for (uint32_t i = 0; i < nsel; i++)
		ld->nvar += ld->schema->fields[sel[i]].var_dim >= 0;
	if (cfg->map && cfg->direct == 1)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: map = 1 reads through the page "
			       "cache: it cannot be combined with direct = 1");
	/* A saved position continues in its own order: its shuffle mode (and
	 * window, unless one is set) shape the loader, so they are taken
	 * before it is laid out.  A blob that is not whole is refused when it
	 * is loaded, with the reason. */
	enum rf_plan_mode rmode;
	uint32_t rwin;
	if (cfg->resume && rf_plan_state_peek(cfg->resume, cfg->resume_len, &rmode, &rwin) == 0) {
		cfg->shuffle = shuffle_of_mode(rmode);
		if (rmode == RF_PLAN_WINDOW && cfg->window == 0)
			cfg->window = rwin;
	}
	ld->full_mode = cfg->shuffle == RF_SHUFFLE_FULL;
	ld->map_mode = cfg->map && !ld->full_mode;
	if (ld->map_mode)
		cfg->direct = 0;
	choose_direct(ld);
	if (ld->full_mode) {
		rc = full_check(ld, sel, nsel);
		if (rc < 0)
			return rc;
	}

	rc = open_device(ld);
	if (rc < 0)
		return rc;
	rc = plan_memory(ld, sel, nsel);
	if (rc < 0)
		return rc;

	rc = rf_ring_open(&ld->ring, ld->ring_slot_bytes, ld->n_ring, ld->dev,
			  cfg->pinning == RF_PINNING_TRANSIENT ? RF_PIN_TRANSIENT : RF_PIN_RING,
			  &ld->ring_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc == -ENOMEM ? RF_EMEMPLAN : rc, "%s", ld->ring_diag.msg);

	if (!ld->full_mode) /* full mode: set by the memory plan */
		ld->qd = cfg->io_depth < ld->n_read ? cfg->io_depth : ld->n_read;
	rc = ld->map_mode ? open_maps(ld) : open_io(ld);
	if (rc < 0)
		return rc;

	rc = alloc_device_buffers(ld);

	if (rc < 0)
		return rc;

	/* Decode workers: a raw buffer each only when some chunk is compressed. */
	int need_raw = 0;
	for (uint64_t c = 0; c < ld->nchunks && !need_raw; c++)
		need_raw = ld->chunks[c].codec != RF_CODEC_NONE;
	if (cfg->decode_threads == 0)
		cfg->decode_threads = decode_threads_auto(need_raw);
	ld->nworkers = ld->full_mode ? 0 : cfg->decode_threads; /* full: nothing to decode */
	ld->workers = calloc(ld->nworkers ? ld->nworkers : 1, sizeof(*ld->workers));
	if (!ld->workers)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (unsigned i = 0; i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		w->ld = ld;
		rf_diag_init(&w->diag, cfg->log, cfg->log_user);
		if (rf_decoder_init(&w->dec, rf_dataset_max_raw_bytes(ld->ds), need_raw) < 0)
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for decode buffers");
	}

	/* The pipeline window and the queues. */
	ld->nwin = ld->n_read + ld->nworkers + 1;
	ld->win = calloc(ld->nwin, sizeof(*ld->win));
	ld->slot_refs = calloc(ld->nslots, sizeof(*ld->slot_refs));
	ld->pin_refs = calloc(ld->nslots, sizeof(*ld->pin_refs));
	if (!ld->slot_refs || !ld->pin_refs)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	/* Not from a map: a batch handed out in place must be writable memory,
	 * and a device copy wants pinned memory. */
	ld->direct_ok = ld->layout.nparts == 1 && !ld->layout.part[0].var &&
			ld->layout.part[0].off == 0 && !ld->map_mode;
	ld->sq_cap = ld->n_stage + 2;
	ld->sq = calloc(ld->sq_cap, sizeof(*ld->sq));
	if (!ld->win || !ld->sq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->cur_slot = -1;

	rc = open_plan(ld);
	if (rc < 0)
		return rc;

	return start_threads(ld);
}

RF_API int
rf_loader_open(rf_loader **out, const rf_config *cfg)
{
	open_error[0] = 0;
	if (!out)
		return -EINVAL;
	*out = NULL;
	/* The size is the only way to tell an initialised config from stack
	 * garbage, and a garbage size says nothing about how many bytes the
	 * caller owns: accept only the sizes a released header has had (this
	 * one: fields added later come out of `reserved`, so the size never
	 * grows) and read nothing before that is known. */
	if (!cfg) {
		snprintf(open_error, sizeof(open_error), "loader: config is NULL");
		return RF_EUSAGE;
	}
	if (cfg->size != sizeof(rf_config)) {
		snprintf(open_error, sizeof(open_error),
			 "loader: config size %" PRIu32 ", expected %zu (call rf_config_init)",
			 cfg->size, sizeof(rf_config));
		return RF_EUSAGE;
	}
	for (size_t i = 0; i < sizeof(cfg->reserved); i++) {
		/* A setting from a newer header, which this library would
		 * otherwise ignore in silence. */
		if (cfg->reserved[i]) {
			snprintf(open_error, sizeof(open_error),
				 "loader: config has settings this library (%s) does not know "
				 "(reserved bytes are not 0)", rf_version_string());
			return RF_EUSAGE;
		}
	}
	rf_loader *ld = calloc(1, sizeof(*ld));
	if (!ld)
		return -ENOMEM;
	memcpy(&ld->cfg, cfg, sizeof(rf_config));
	ld->cfg.size = sizeof(rf_config);
	rf_diag_init(&ld->diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->io_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->dev_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->ring_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->copy_diag, cfg->log, cfg->log_user);
	clock_gettime(CLOCK_MONOTONIC, &ld->t_open);
	ld->cur_slot = -1;
	pthread_once(&fork_once, fork_watch);
	ld->owner_pid = getpid();
	ld->owner_forks = atomic_load_explicit(&fork_count, memory_order_relaxed);

	if (pthread_mutex_init(&ld->mu, NULL)) {
		free(ld);
		return -ENOMEM;
	}
	pthread_cond_init(&ld->reader_cv, NULL);
	pthread_cond_init(&ld->work_cv, NULL);
	pthread_cond_init(&ld->stage_cv, NULL);
	pthread_cond_init(&ld->copy_cv, NULL);
	{
		/* The consumer's timed wait (rf_loader_next_timeout) measures
		 * on the monotonic clock: a wall-clock step must not stretch it. */
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ld->cons_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	ld->sync_init = 1;

	int rc = loader_open(ld, cfg);
	if (rc < 0) {
		snprintf(open_error, sizeof(open_error), "%s", ld->diag.msg);
		loader_free(ld);
		return rc;
	}
	*out = ld;
	return 0;
}

/* ------------------------------------------------------------- teardown */

/* Stop the pipeline threads and wait for them: reads and copies in flight
 * are waited for by the threads themselves before they return. */
static void
pipeline_stop(rf_loader *ld)
{
	if (ld->sync_init) {
		pthread_mutex_lock(&ld->mu);
		ld->stop = 1;
		pthread_cond_broadcast(&ld->reader_cv);
		pthread_cond_broadcast(&ld->work_cv);
		pthread_cond_broadcast(&ld->stage_cv);
		pthread_cond_broadcast(&ld->copy_cv);
		pthread_cond_broadcast(&ld->cons_cv);
		pthread_mutex_unlock(&ld->mu);
	}
	if (ld->reader_started)
		pthread_join(ld->reader, NULL);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		if (ld->workers[i].started)
			pthread_join(ld->workers[i].thread, NULL);
	if (ld->copier_started)
		pthread_join(ld->copier, NULL);
	ld->reader_started = ld->copier_started = 0;
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		ld->workers[i].started = 0;
}

/* Back to an empty pipeline (threads stopped, the consumer holds nothing):
 * every slot free, no batch staged or ready, no error.  Device buffers a
 * consumer released keep their state: the copy stage waits for their
 * events before reuse. */
static void
pipeline_reset(rf_loader *ld)
{
	/* Zero-copy: slots lent to released batches come back with the rest
	 * below, once the consumer's work on them is done. */
	for (uint32_t i = 0; ld->zero_copy && i < ld->depth; i++) {
		struct dbuf *b = &ld->dbufs[i];
		if (b->state == DB_RELEASED &&
		    ld->dev->ops->event_sync(ld->dev, b->rel_event) == 0)
			b->state = DB_FREE;
		b->zc_src = 0;
	}
	ld->zc_held = 0;
	if (ld->window_mode) {
		/* Raw buffers back to the pool; slot references are reset below. */
		for (uint32_t i = 0; i < ld->wcap; i++)
			ld->wtab[i].slot = -1;
		window_drop_below(ld, UINT64_MAX);
		ld->wlo = ld->whi = 0;
		ld->w_epoch_done = 0;
	}
	for (unsigned i = 0; i < ld->n_ring; i++)
		rf_ring_release(ld->ring, i); /* already free: ignored */
	map_slots_reset(ld);
	memset(ld->slot_refs, 0, ld->nslots * sizeof(*ld->slot_refs));
	memset(ld->pin_refs, 0, ld->nslots * sizeof(*ld->pin_refs));
	memset(ld->win, 0, ld->nwin * sizeof(*ld->win));
	for (uint32_t i = 0; i < ld->depth; i++)
		if (ld->dbufs[i].state != DB_RELEASED)
			ld->dbufs[i].state = DB_FREE;
	ld->stop = ld->failed = ld->fail_code = 0;
	ld->fail_msg[0] = 0;
	ld->plan_done = ld->end_pushed = 0;
	ld->total_steps = 0;
	ld->next_seq = ld->next_dispatch = ld->next_gather = 0;
	ld->read_held = ld->stage_held = ld->inflight = 0;
	ld->sq_head = ld->sq_len = ld->sq_issued = 0;
	ld->copy_failed = 0;
	ld->copy_lost = 0;
	ld->rq_head = ld->rq_len = 0;
	ld->eos = ld->final_code = 0;
	ld->final_msg[0] = 0;
	ld->cur_slot = -1;
}

static void
loader_free(rf_loader *ld)
{
	pipeline_stop(ld);

	if (ld->dev) {
		const struct rf_device_ops *ops = ld->dev->ops;
		/* Nothing may still read or write a device buffer when it is
		 * freed: released batches' events, then the copy stream. */
		for (uint32_t i = 0; ld->dbufs && i < ld->depth; i++)
			if (ld->dbufs[i].state == DB_RELEASED && ld->dbufs[i].rel_event)
				ops->event_sync(ld->dev, ld->dbufs[i].rel_event);
		if (ld->copy_stream)
			ops->stream_sync(ld->dev, ld->copy_stream);
		for (uint32_t i = 0; ld->dbufs && i < ld->depth; i++) {
			struct dbuf *b = &ld->dbufs[i];
			if (b->copy_event)
				ops->event_destroy(ld->dev, b->copy_event);
			if (b->rel_event)
				ops->event_destroy(ld->dev, b->rel_event);
			if (b->dptr && !ld->zero_copy) /* else it points into the ring */
				ops->free(ld->dev, b->dptr);
			free(b->fields);
			free(b->host_off);
		}
		if (ld->copy_stream)
			ops->stream_destroy(ld->dev, ld->copy_stream);
	}
	free(ld->dbufs);
	free(ld->rq);
	rf_io_close(&ld->io);
	for (size_t i = 0; ld->maps && i < ld->nshards; i++)
		if (ld->maps[i])
			munmap(ld->maps[i], (size_t)ld->map_len[i]);
	free(ld->maps);
	free(ld->map_len);
	free(ld->rbase);
	free(ld->mfree);
	free(ld->mfree_is);
	free(ld->mvec);
	rf_ring_close(&ld->ring);
	rf_device_close(&ld->dev);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		rf_decoder_fini(&ld->workers[i].dec);
	free(ld->workers);
	rf_plan_destroy(&ld->rplan);
	rf_plan_destroy(&ld->gplan);
	rf_plan_destroy(&ld->splan);
	for (uint32_t i = 0; ld->wtab && i < ld->wcap; i++)
		free(ld->wtab[i].raw);
	for (uint32_t i = 0; ld->wpool && i < ld->wpool_n; i++)
		free(ld->wpool[i]);
	free(ld->wtab);
	free(ld->wpool);
	free(ld->items);
	free(ld->win);
	free(ld->slot_refs);
	free(ld->pin_refs);
	free(ld->sq);
	free(ld->files);
	rf_dataset_close(&ld->ds);
	if (ld->sync_init) {
		pthread_cond_destroy(&ld->reader_cv);
		pthread_cond_destroy(&ld->work_cv);
		pthread_cond_destroy(&ld->stage_cv);
		pthread_cond_destroy(&ld->copy_cv);
		pthread_cond_destroy(&ld->cons_cv);
		pthread_mutex_destroy(&ld->mu);
	}
	free(ld);
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
	if (!forked(*ldp))
		loader_free(*ldp);
	*ldp = NULL;
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
	if (ld->held >= ld->depth) {
		unsigned held = ld->held;
		pthread_mutex_unlock(&ld->mu);
		return rf_fail(&ld->diag, RF_EHELD,
			       "loader: the consumer holds %u batches, all of depth %u device "
			       "buffers: release one (rf_loader_release) before asking for the next, "
			       "or open with a larger depth", held, ld->depth);
	}
	/* The ready path takes the lock and nothing else: no clock read, no
	 * system call.  Time is measured only when there is something to wait
	 * for. */
	uint64_t t0 = 0;
	int rc = 0, timed_out = 0;
	struct timespec deadline;
	zc_promote_locked(ld);
	while (ld->rq_len == 0) {
		if (ld->final_code) {
			rc = ld->final_code;
			snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", ld->final_msg);
			break;
		}
		if (ld->eos)
			break;
		if (!wait_ns || timed_out) {
			rc = -EAGAIN;
			break;
		}
		if (!t0) {
			t0 = now_ns();
			uint64_t end = t0 + (wait_ns < UINT64_MAX - t0 ? wait_ns : UINT64_MAX - t0);
			deadline.tv_sec = (time_t)(end / 1000000000u);
			deadline.tv_nsec = (long)(end % 1000000000u);
		}
		if (wait_ns == UINT64_MAX)
			pthread_cond_wait(&ld->cons_cv, &ld->mu);
		else if (pthread_cond_timedwait(&ld->cons_cv, &ld->mu, &deadline) == ETIMEDOUT)
			timed_out = 1;
	}
	if (t0)
		ld->st_stall_ns += now_ns() - t0;
	if (ld->rq_len == 0) {
		pthread_mutex_unlock(&ld->mu);
		return rc;
	}
	struct dbuf *b = &ld->dbufs[ld->rq[ld->rq_head]];
	ld->rq_head = (ld->rq_head + 1) % ld->depth;
	ld->rq_len--;
	b->state = DB_HELD;
	ld->held++;
	note_max(&ld->mx_held, ld->held);
	ld->deliv_epoch = b->pub.epoch;
	ld->deliv_done = b->plan_done;
	ld->deliv_part = b->plan_part;
	ld->st_batches++;
	ld->st_samples += b->pub.samples;
	ld->st_bytes_delivered += b->pub.bytes;
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
	if (!ld || !batch || !ld->dbufs)
		return NULL;
	/* Compare addresses as integers: a pointer into the middle of a
	 * dbuf (or into another object) must not become an index. */
	uintptr_t p = (uintptr_t)(const void *)batch, base = (uintptr_t)ld->dbufs;
	if (p < base || p - base >= (uintptr_t)ld->depth * sizeof(struct dbuf) ||
	    (p - base) % sizeof(struct dbuf) != 0)
		return NULL;
	return &ld->dbufs[(p - base) / sizeof(struct dbuf)];
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
	int done = rc < 0 || (ld->zero_copy && ld->dev->ops->event_query(ld->dev, b->rel_event) == 0);
	pthread_mutex_lock(&ld->mu);
	b->state = done ? DB_FREE : DB_RELEASED;
	ld->held--;
	if (b->zc_src && done)
		zc_recycle_locked(ld, b, 1);
	ld->wake_defer = 1;
	zc_promote_locked(ld);
	/* The copy thread has something to do with a freed buffer only when
	 * batches wait for one or its release is still pending. */
	if (!ld->zero_copy || !done || ld->sq_len > 0)
		wake_locked(ld, WAKE_COPY);
	unlock_wake(ld);
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
	if (!ld->splan) {
		*len = RF_PLAN_STATE_SIZE;
		return rf_fail(&ld->diag, -EINVAL, "loader: an empty dataset has no position to save");
	}
	pthread_mutex_lock(&ld->mu);
	uint64_t epoch = ld->deliv_epoch, done = ld->deliv_done;
	uint32_t part = ld->deliv_part;
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
	if (!ld->gplan)
		return rf_fail(&ld->diag, RF_ESTATE, "loader: an empty dataset has no position to load");
	pthread_mutex_lock(&ld->mu);
	unsigned held = ld->held;
	pthread_mutex_unlock(&ld->mu);
	if (held)
		return rf_fail(&ld->diag, -EBUSY, "loader: release the %u batches held before loading a "
			       "position", held);
	/* Where the stream stands, to come back to if the blob is refused. */
	uint8_t here[RF_PLAN_STATE_SIZE];
	size_t here_len = 0;
	int rc = rf_plan_state_save_part(ld->splan, ld->deliv_epoch, ld->deliv_done,
					 ld->deliv_part, here, sizeof(here), &here_len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: saving the current position failed");
	/* A refused blob leaves the stream as it was (the end never moves). */
	uint64_t cfg_epoch = ld->cfg.epoch;
	pipeline_stop(ld);
	pipeline_reset(ld);
	/* rf_batch.index counts batches handed out: the ones read ahead and
	 * dropped here were not. */
	ld->batch_counter = ld->st_batches;
	rc = plan_seek_blob(ld, buf, len);
	if (rc < 0) {
		char msg[RF_ERRMSG_MAX];
		snprintf(msg, sizeof(msg), "%s", ld->diag.msg);
		plan_seek_blob(ld, here, here_len);
		ld->cfg.epoch = cfg_epoch;
		snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", msg);
	}
	int src = start_threads(ld);
	return rc < 0 ? rc : src;
}

RF_API int
rf_loader_rewind(rf_loader *ld, uint64_t epoch)
{
	if (!ld)
		return -EINVAL;
	if (ld->cfg.epochs && (epoch < ld->epoch_last - ld->cfg.epochs || epoch >= ld->epoch_last))
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: rewind to epoch %" PRIu64 ": this "
			       "loader streams epochs %" PRIu64 "..%" PRIu64 " (rf_config.epoch + "
			       "epochs - 1)", epoch, ld->epoch_last - ld->cfg.epochs,
			       ld->epoch_last - 1);
	if (!ld->splan)
		return 0; /* an empty dataset: no epoch has a batch */
	/* The start of an epoch is a position like any saved one: going
	 * through the blob reuses the checked way to restart the pipeline. */
	uint8_t blob[RF_PLAN_STATE_SIZE];
	size_t len = 0;
	int rc = rf_plan_state_save_at(ld->splan, epoch, 0, blob, sizeof(blob), &len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: rewind to epoch %" PRIu64 " failed: %s",
			       epoch, rf_strerror(rc));
	return rf_loader_state_load(ld, blob, len);
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
	s.bytes_read = atomic_load_explicit(&ld->st_bytes_read, memory_order_relaxed);
	s.read_ns = atomic_load_explicit(&ld->st_read_ns, memory_order_relaxed);
	s.decode_ns = atomic_load_explicit(&ld->st_decode_ns, memory_order_relaxed);
	s.copy_ns = atomic_load_explicit(&ld->st_copy_ns, memory_order_relaxed);
	s.chunks = atomic_load_explicit(&ld->st_chunks, memory_order_relaxed);
	uint64_t open_ns = (uint64_t)ld->t_open.tv_sec * 1000000000u + (uint64_t)ld->t_open.tv_nsec;
	s.wall_ns = now_ns() - open_ns;

	pthread_mutex_lock(&ld->mu);
	s.bytes_delivered = ld->st_bytes_delivered;
	s.batches = ld->st_batches;
	s.samples = ld->st_samples;
	s.stall_ns = ld->st_stall_ns;
	s.reads_inflight = ld->inflight;
	s.reads_inflight_max = ld->mx_inflight;
	s.slots_used = ring_used(ld);
	s.slots_used_max = ld->mx_slots;
	s.slots_total = ld->n_ring;
	s.staged = ld->sq_len;
	s.staged_max = ld->mx_staged;
	s.ready = ld->rq_len;
	s.ready_max = ld->mx_ready;
	s.held = ld->held;
	s.held_max = ld->mx_held;
	/* A thread marked live cannot finish exiting while mu is held (it
	 * takes mu to clear the mark), so its clock is valid here. */
	uint64_t cpu = atomic_load_explicit(&ld->cpu_done_ns, memory_order_relaxed);
	for (unsigned i = 0; i < ld->ncpu; i++)
		if (ld->cpu[i].live)
			cpu += thread_cpu_ns(ld->cpu[i].thread);
	pthread_mutex_unlock(&ld->mu);
	s.thread_cpu_ns = cpu;
	s.stall_share = s.wall_ns ? (double)s.stall_ns / (double)s.wall_ns : 0.0;
	s.slot_bytes = ld->ring_slot_bytes;
	s.batch_bytes = ld->layout.bytes;
	s.pinned_bytes = rf_ring_pinned_bytes(ld->ring);
	s.pinned_peak = rf_ring_pinned_peak(ld->ring);
	s.device_bytes = ld->device_bytes;
	s.device_peak = ld->device_bytes;
	s.in_place = ld->zero_copy;
	s.decode_threads = ld->nworkers;
	s.window = ld->order_window;
	s.order_id = ld->order_id;
	snprintf(s.io_engine, sizeof(s.io_engine), "%s", ld->io_engine);
	s.io_direct = ld->io_direct;
	snprintf(s.device, sizeof(s.device), "%s", ld->dev->desc);
	s.device_ordinal = ld->dev->index;

	memcpy(st, &s, sizeof(s));
	return 0;
}
