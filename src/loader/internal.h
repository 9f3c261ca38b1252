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
 * that reads each sample into its place in a staging slot (rf_ld_full_main).
 *
 * Memory: the ring's slots are split between reads (n_read) and staging
 * (n_stage) by counting (in map mode a read holds a number from map.free, not
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
#ifndef RF_LOADER_INTERNAL_H
#define RF_LOADER_INTERNAL_H

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
#include "format/format.h"
#include "io/io.h"
#include "io/mmap.h"
#include "loader/memplan.h"
#include "plan/plan.h"
#include "ring/ring.h"
#include "xxh.h"

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
 * (rf_ld_gather_step_window); full mode reads samples one by one and has its own
 * thread in place of the reader and the decode workers (rf_ld_full_main).
 */
struct lstep {
	uint64_t chunk;     /* dataset-wide chunk number */
	uint64_t entry;     /* its read-sequence entry in its epoch */
	uint64_t epoch;
	uint32_t source;    /* a mixture's source (mix.c), else 0 */
	/* Images: a bit per sample of the chunk, set for those this rank
	 * takes from this read (image.c, at the read's issue), or NULL: all. */
	const uint64_t *taken;
};

/* ----------------------------------------------------------- structures */

enum step_state { ST_EMPTY = 0, ST_READING, ST_READ, ST_TAKEN };

struct wstep {              /* a step in the pipeline window */
	struct lstep s;
	uint64_t seq;
	unsigned slot;
	enum step_state state;
	int64_t res;        /* read result: bytes or -errno */
};

enum staged_kind { SK_BATCH = 0, SK_END, SK_ERROR };

struct staged {             /* a batch in its staging slot, or a marker */
	enum staged_kind kind;
	int direct;         /* the bytes are in a read slot, at src_off: no gather */
	int inplace;        /* direct, in the map: each part at at[part] (inplace.c) */
	unsigned slot;      /* staging slot, or the read slot when direct */
	uint64_t src_off;
	uint32_t n;
	uint64_t index, epoch, first;
	uint64_t plan_done;  /* plan batches of its epoch complete with it */
	uint32_t plan_part;  /* samples of the next plan batch in it and the
	                        batches before it (closed early), else 0 */
	uint64_t copy_bytes, payload;
	union {
		uint64_t used[RF_MAX_FIELDS];     /* variable parts: bytes used */
		const uint8_t *at[RF_MAX_FIELDS]; /* inplace (fixed parts only):
		                                     each part's rows in the map */
	};
	/* on_error skip: substitute samples in it, and the skipped chunks
	 * whose first substitute of the epoch it holds (rf_stats counts them
	 * when the batch is delivered) */
	uint32_t subst, subst_chunks;
	/* Full shuffling, host delivery: 1 + the entry of full.cw holding the
	 * checksums its samples are checked against in rf_loader_next, on
	 * the consumer's thread (rf_ld_full_check_lent); 0: checked already. */
	unsigned check;
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
	enum dbuf_state state;
	rf_batch_field *fields;
	int64_t *host_off;  /* nvar x (B + 1) */
	uint64_t plan_done; /* of the batch it holds (see struct staged) */
	uint32_t plan_part;
	uint32_t subst, subst_chunks; /* (see struct staged) */
	/* Zero-copy (host device): the batch is its ring slot, given back
	 * when the consumer has released it (see rf_ld_zc_recycle_locked). */
	int zc_src;         /* holds src's slot */
	struct staged src;
};

struct wentry {             /* a decoded chunk held for window shuffling */
	int used;
	rf_chunk_sections sec;
	rf_chunk_ctx ctx;
	int slot;           /* its read slot (uncompressed), or -1 */
	uint8_t *raw;       /* its raw buffer (compressed), or NULL */
	const uint8_t *sums; /* window.sums: its per-sample checksum table in
	                        the map; NULL for substitutes */
};

struct worker {
	struct rf_loader *ld;
	pthread_t thread;
	int started;
	rf_decoder dec;
	rf_copy_sink sink;  /* its copies of a turn (the parallel fill) */
	/* The parallel fill from a map (gather.c): the chunk's checksum is
	 * checked with its copies, slice by slice while the bytes are in
	 * cache, after the turn.  fill_bad: the check failed, the copies
	 * noted are not made and their batches never staged. */
	struct {
		int on;
		const uint8_t *src;
		uint64_t len, xxh3;
		rf_chunk_ctx ctx;
	} verify_later;
	int fill_bad;
	int turn_passed;    /* its step's turn went on before its copies */
	/* The window's parallel fill: read slots of chunks let go in its turn,
	 * whose bytes its noted copies still read; returned after them. */
	unsigned *unref;
	uint32_t nunref, unref_cap;
	XXH3_state_t *xxh;  /* for those checks, made at the first */
	rf_diag diag;
	struct rf_ld_image_worker *img; /* rf_config.images (image.c), else NULL */
};

/* One read chunk on its way through the chunk path (a decode worker's). */
struct chunk_job {
	const rf_chunk_info *info;
	unsigned slot;          /* its read slot */
	uint64_t chunk;         /* dataset-wide chunk number */
	uint64_t epoch;         /* of the read */
	int64_t res;            /* the read's result: bytes or -errno */
	const uint64_t *taken;  /* struct lstep's */
	rf_chunk_ctx ctx;       /* file, chunk and offset, for messages */
	rf_chunk_sections sec;  /* set by the decode step */
};

/* A step of the chunk path: runs in a decode worker, in parallel with the
 * others, before the chunk's turn to gather.  0, or an error with its
 * message on the worker's diag. */
typedef int (*rf_ld_chunk_step)(rf_loader *ld, struct worker *w, struct chunk_job *job);
#define RF_LD_CHUNK_STEPS_MAX 4

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
	/* What the ring took of the process's default pinned budget
	 * (pinned_bytes 0), returned at free; the fork generation it was
	 * taken in. */
	uint64_t default_pinned;
	unsigned default_pinned_gen;

	rf_dataset *ds;
	const rf_schema *schema;
	const rf_chunk_info *chunks;
	uint64_t nchunks;
	int compressed;     /* some chunk is stored compressed (decoded into a
	                       raw buffer, never gathered where it was read) */
	int *files;         /* per shard: the io handle */
	size_t nshards;

	rf_batch_layout layout;
	uint32_t nvar;
	rf_device *dev;
	rf_ring *ring;
	rf_io *io;

	/* The settings in force: cfg's, with defaults filled in, clamps applied
	 * and the choices made at open (or by a resume) resolved.  cfg stays as
	 * the user gave it (but for the pointers, which are not kept). */
	struct {
		uint32_t depth;          /* device buffers */
		uint32_t io_depth;       /* reads in flight asked for */
		uint32_t decode_threads; /* workers (0 in full mode: none run) */
		int direct;              /* 1: O_DIRECT, 0: buffered */
		enum rf_shuffle shuffle; /* the config's, or the resume blob's */
		uint32_t window;         /* W in force (window shuffling), else 0 */
		uint64_t seed, epoch;    /* of the order in force */
		uint32_t rank, world;    /* of the plan */
		const char *rank_source; /* where rank and world came from */
	} resolved;

	/* The memory plan (memplan.c): set at open, read-only after. */
	struct rf_memplan mem;

	pthread_mutex_t mu;
	pthread_cond_t reader_cv, work_cv, stage_cv, copy_cv, cons_cv;
	int sync_init;

	/* --- under mu --- */
	int stop;
	int stopped;        /* rf_loader_stop: threads joined, reader closed, for good */
	int failed;          /* the pipeline stopped on an error */
	int fail_code;
	char fail_msg[RF_ERRMSG_MAX];

	int plan_empty;
	int plan_done;
	uint64_t total_steps;
	int end_pushed;

	/* The pipeline window: steps from the reader to the gather. */
	struct wstep *win;
	unsigned nwin;
	uint64_t next_seq, next_dispatch, next_gather;
	unsigned read_held, stage_held;
	unsigned inplace_held; /* of stage_held: batches in place, no ring slot */

	struct staged *sq;   /* staged FIFO; its first sq_issued are being copied */
	unsigned sq_cap, sq_head, sq_len, sq_issued;
	int copy_failed;
	int copy_lost;       /* a batch's copy failed: the later ones are dropped */

	unsigned *slot_refs; /* read slots: the worker's hold + direct batches */
	int wake_defer;      /* wake_locked notes wake-ups in wake_due instead
	                        of signalling; unlock_wake signals them (mu) */
	unsigned wake_due;   /* WAKE_* bits */

	rf_plan *splan;      /* the consumer's, for rf_loader_state_save */
	struct rf_ld_mix *mix; /* rf_config.sources (mix.c), else NULL */
	/* The order in force (rf_stats.order_id, .window), set with the plan
	 * and again by a resume. */
	uint64_t order_id;
	uint32_t order_window;
	rf_diag plan_diag;

	/* The reader thread (reader.c). */
	struct {
		pthread_t thread;
		int started;
		rf_plan *plan;       /* its cursor (read sequence) */
		uint64_t epoch, entry, nreads, epoch_last;
		unsigned inflight;   /* reads in flight (mu) */
	} reader;

	/* The gather (gather.c): owned by the worker whose turn it is. */
	struct {
		rf_plan *plan;       /* its cursor (items) */
		rf_plan_item *items; /* the plan batch being gathered */
		uint32_t n, i;
		uint64_t epoch, done;
		uint32_t skip;       /* samples of the first plan batch after a
		                        resume that were handed out before the save */
		rf_assembly asmb;
		int cur_slot;
		uint64_t cur_first, cur_epoch, batch_counter;
		int direct_ok;       /* one fixed field: batches inside a raw chunk
		                        are copied straight from the read slot;
		                        or inplace_ok */
		int inplace_ok;      /* batches inside a raw chunk go out where they
		                        lie in the map (inplace.c) */
		unsigned inplace_stage; /* the most batches in place staged or
		                           lent at once (a chunk's batches, 2,
		                           and depth) */
		uint32_t cur_subst, cur_subst_chunks; /* the open batch's (struct staged) */
		/*
		 * The parallel fill (gather.c, `defer`, chosen at open): at its
		 * turn a worker only places its items (offsets, sizes) and notes
		 * the bulk copies in its own sink; it passes the turn on, then
		 * makes them, so the workers copy their chunks' bytes into the
		 * staging slots at the same time.  pending counts, per ring
		 * slot, the workers whose copies into it are still to be made;
		 * a closed batch waits in fq (in order, with the direct batches
		 * behind it) until its slot has none, and is staged from there
		 * by whoever made the last copy.  writers: per ring slot, a bit
		 * per worker (index % 64) that copied into it.  All under mu
		 * but sink and sink_counted, the turn holder's.
		 */
		int defer;
		rf_copy_sink *sink;     /* the turn holder's, while it holds it */
		unsigned sink_worker;
		int sink_counted;       /* the sink's current tag is in pending */
		unsigned *pending;
		uint64_t *writers;
		struct staged *fq;
		unsigned fq_cap, fq_head, fq_len;
		unsigned fill_waiting;  /* workers waiting on fill_cv */
		pthread_cond_t fill_cv;
		/* A worker waits for its turn on turn_cv[seq % nworkers]: the
		 * steps taken are a run of at most nworkers, so one waiter per
		 * variable, woken alone when the turn before passes. */
		pthread_cond_t *turn_cv;
		unsigned nturn_cv;
		int fill_cv_init;
	} gather;

	/* Window shuffling (window.c): decoded chunks kept after their turn
	 * until the items' keep_from passes them (gather only). */
	struct {
		int on;
		struct wentry *tab;  /* indexed by read entry % cap */
		uint32_t cap;
		uint64_t lo, hi;     /* entries [lo, hi) may be held */
		uint8_t **pool;      /* spare raw buffers for compressed chunks */
		uint32_t pool_n, pool_cap;
		uint64_t raw_cap;
		int epoch_done;      /* the epoch's items are all gathered */
		int sums;            /* each gathered sample checked against its
		                        row of the per-sample checksums (from the
		                        batch), instead of each chunk's XXH3 as it
		                        is read (rf_ld_window_choose_sums) */
	} window;

	/* Full shuffling (full.c): samples read one by one.  Set at open or by
	 * a resume; the full thread starts from next of reader.epoch. */
	struct {
		int on;
		uint64_t next;       /* the next plan batch of reader.epoch to read */
		int sums;            /* check every sample against its format 2 checksums */
		int mem;             /* copy samples from the mapped shards (resident data) */
		int window;          /* the order is a window plan's: window
		                        shuffling from memory (window.c) */
		/* Checks left to the consumer (full_main_mem): per entry, B
		 * rows of the loaded parts' checksums and the sample; cw_busy
		 * the entries in use (mu); cons_rc sticks once one failed. */
		uint64_t *cw;
		uint32_t cw_busy;
		int cons_rc;
		/* From memory: the batches being claimed, shared with the
		 * consumer's thread while the full thread runs (mu). */
		struct rf_full_mem *fm;
	} full;

	/* rf_config.on_error = skip (worker.c): the zero bytes substitute
	 * samples point at (enough for the largest chunk), and the distinct
	 * chunks skipped so far (a bit per dataset chunk), counted at their
	 * turn (the turn holder); the chunks whose substitutes went into a
	 * batch of gathered_epoch (a bit per dataset chunk; the gather's). */
	struct {
		int on;
		uint32_t limit;
		uint8_t *zeros;
		uint8_t *seen;
		uint64_t skipped;
		uint8_t *gathered;
		uint64_t gathered_epoch;
	} skip;

	/* rf_config.images (image.c): the fields decoded by the image step. */
	struct rf_ld_images *image;

	/* The decode workers (worker.c) and the chunk path they run. */
	struct worker *workers;
	unsigned nworkers;
	rf_ld_chunk_step chunk_steps[RF_LD_CHUNK_STEPS_MAX];
	unsigned nchunk_steps;

	/* The copy thread (copy.c). */
	struct {
		pthread_t thread;
		int started;
		void *stream;
		unsigned *pin_refs;  /* transient pinning of read slots */
	} copy;

	/* Delivery (deliver.c, api.c): device buffers and the ready queue. */
	struct {
		struct dbuf *dbufs;
		unsigned *rq;        /* ready FIFO of dbuf indices */
		unsigned rq_head, rq_len;
		int eos;             /* the copy thread passed the end marker */
		int final_code;      /* the copy thread passed an error marker */
		char final_msg[RF_ERRMSG_MAX];
		unsigned held;
		unsigned lent;       /* in place: staging places held by buffers */
		uint64_t epoch, done; /* position after the last batch handed out */
		uint32_t part;       /* ... and samples of the next plan batch handed out */
	} delivery;

	/* rf_config.map: every shard mapped whole by the mmap engine.  A read
	 * slot then holds no bytes: the reader faults its chunk in and
	 * rbase[slot] points at the chunk in the map (the slot still counts, so
	 * the pipeline stays bounded the same way). */
	struct {
		int on;
		rf_io_map *m;
		const uint8_t **rbase;
		unsigned *free, free_n;
		unsigned char *free_is; /* nslots: 1 while the number is in free */
	} map;

	/* Statistics (rf_loader_stats). */
	struct {
		struct timespec t_open;
		_Atomic uint64_t bytes_read, read_ns, decode_ns, copy_ns, chunks;
		uint64_t bytes_delivered, batches, samples, stall_ns; /* consumer */
		unsigned max_inflight, max_slots, max_staged, max_ready, max_held;
		uint64_t device_bytes;
		char io_engine[32];
		int io_direct;
		struct tcpu cpu[3 + RF_DECODE_THREADS_MAX];
		unsigned ncpu;
		_Atomic uint64_t cpu_done_ns;
		/* on_error skip, counted at delivery (struct staged) */
		_Atomic uint64_t chunks_skipped, samples_substituted;
		_Atomic uint64_t images_decoded;
		/* The gather's copies into staging slots: bytes, those made by
		 * a worker after passing its turn (parallel fill), and batches
		 * whose copies more than one worker made (mu). */
		_Atomic uint64_t fill_bytes, fill_bytes_parallel;
		_Atomic uint64_t fill_checked; /* chunks checked with their copies (map) */
		uint64_t fill_batches_multi;
	} stats;
};

/* Completions taken from the reader engine at a time (reader, full). */
#define RF_LD_REAP_MAX 64

/* Wake-ups deferred to unlock_wake (sync.c). */
enum { WAKE_CONS = 1u << 0, WAKE_STAGE = 1u << 1, WAKE_COPY = 1u << 2 };

/* api.c */
void rf_ld_fork_note(rf_loader *ld);

/* full.c */
int rf_ld_full_help_locked(rf_loader *ld, int wait, const struct timespec *deadline);
int rf_ld_full_check_lent(rf_loader *ld, const struct dbuf *b, char *msg, size_t cap);

/* open.c */
int rf_ld_start_threads(rf_loader *ld);
void rf_ld_pipeline_stop(rf_loader *ld);
void rf_ld_pipeline_reset(rf_loader *ld);
void rf_ld_loader_free(rf_loader *ld);

/* settings.c */
int rf_ld_config_check(rf_loader *ld);
int rf_ld_resolve_settings(rf_loader *ld);
int rf_ld_select_fields(rf_loader *ld, uint32_t *sel, uint32_t *nselp);
int rf_ld_plan_memory(rf_loader *ld, const uint32_t *sel, uint32_t nsel);
/* Give back what ld took of the process's default pinned budget. */
void rf_ld_default_pinned_return(rf_loader *ld);

/* order.c */
enum rf_shuffle rf_ld_shuffle_of_mode(enum rf_plan_mode m);
int rf_ld_plan_seek_blob(rf_loader *ld, const void *blob, size_t len);
int rf_ld_open_plan(rf_loader *ld);

/* sync.c */
uint64_t rf_ld_now_ns(void);
uint64_t rf_ld_thread_cpu_ns(pthread_t t);
void rf_ld_thread_exit_account(rf_loader *ld, unsigned cpu_index);
void rf_ld_note_max(unsigned *mx, unsigned v);
void rf_ld_wake_locked(rf_loader *ld, unsigned which);
void rf_ld_unlock_wake(rf_loader *ld);
void rf_ld_sq_push_locked(rf_loader *ld, const struct staged *s);
void rf_ld_fail_locked(rf_loader *ld, int code, const char *msg);
void rf_ld_fill_unref_later(rf_loader *ld, unsigned slot);
void rf_ld_maybe_end_locked(rf_loader *ld);
unsigned rf_ld_copied_held(const rf_loader *ld);
unsigned rf_ld_ring_used(const rf_loader *ld);
void rf_ld_read_slot_unref(rf_loader *ld, unsigned slot);
void rf_ld_read_slot_unref_locked(rf_loader *ld, unsigned slot);
const uint8_t *rf_ld_read_slot_bytes(const rf_loader *ld, unsigned slot);

/* reader.c */
int rf_ld_reads_wait(rf_loader *ld, rf_io_done *done, unsigned cap);
void *rf_ld_reader_main(void *arg);

/* worker.c */
void rf_ld_chunk_steps_init(rf_loader *ld);
int rf_ld_skip_setup(rf_loader *ld);
int rf_ld_skip_is_substitute(const rf_loader *ld, const rf_chunk_sections *sec);
void rf_ld_skip_gathered(rf_loader *ld, uint64_t chunk, uint32_t added);
void *rf_ld_worker_main(void *arg);

/* image.c */
struct rf_batch_field;
int rf_ld_image_setup(rf_loader *ld, const uint32_t *sel, uint32_t nsel);
int rf_ld_image_layout(rf_loader *ld);
uint64_t rf_ld_image_worker_bytes(const rf_loader *ld);
uint64_t rf_ld_image_scratch_bound(const rf_loader *ld);
int rf_ld_image_worker_init(rf_loader *ld, struct worker *w);
void rf_ld_image_worker_fini(struct worker *w);
int rf_ld_image_step(rf_loader *ld, struct worker *w, struct chunk_job *job);
/* The samples this rank takes of each read (image.c): buffers for the
 * window (after ld->nwin is set), a reset when the reader's plan moves
 * (resume, rewind), the set of read `seq` filled into st->taken as the
 * reader issues it (mu held), and the gather's check that a run of
 * samples [off, off + n) of a read is in its set (debug builds). */
int rf_ld_image_reads_init(rf_loader *ld);
void rf_ld_image_reads_reset(rf_loader *ld);
void rf_ld_image_take(rf_loader *ld, struct lstep *st, uint64_t seq);
int rf_ld_image_taken(const struct lstep *st, uint32_t off, uint32_t n);
void rf_ld_image_skip_sections(const rf_loader *ld, rf_chunk_sections *sec);
uint64_t rf_ld_image_item_bytes(const rf_loader *ld);
void rf_ld_image_describe(const rf_loader *ld, uint32_t part, struct rf_batch_field *bf);
void rf_ld_image_free(rf_loader *ld);

/* gather.c */
int rf_ld_gather_open_batch(rf_loader *ld, uint64_t epoch, uint64_t first);
void rf_ld_gather_drop_batch(rf_loader *ld);
void rf_ld_gather_push_batch(rf_loader *ld);
int rf_ld_early_close_error(rf_loader *ld, rf_diag *d, uint32_t part, uint64_t need);
int rf_ld_gather_enter_epoch(rf_loader *ld, uint64_t epoch, rf_diag *d);
int rf_ld_gather_refill(rf_loader *ld, uint32_t *n, rf_diag *d);
int rf_ld_gather_step(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		      const rf_chunk_ctx *ctx, int direct, unsigned read_slot, rf_diag *d);
int rf_ld_gather_step_window(rf_loader *ld, const struct lstep *st,
			     const rf_chunk_sections *sec, const rf_chunk_ctx *ctx, struct worker *w,
			     int in_slot, unsigned read_slot, rf_diag *d);

/* gather.c: the parallel fill */
int rf_ld_fill_setup(rf_loader *ld);
void rf_ld_fill_reset(rf_loader *ld);
void rf_ld_fill_free(rf_loader *ld);
void rf_ld_turns_wake_all_locked(rf_loader *ld);
void rf_ld_turn_wait_locked(rf_loader *ld, uint64_t seq);
void rf_ld_turn_pass_locked(rf_loader *ld, uint64_t seq);
void rf_ld_fill_turn_begin(rf_loader *ld, struct worker *w);
int rf_ld_fill_turn_end(rf_loader *ld, struct worker *w, uint64_t seq, int rc);

/* window.c */
void rf_ld_window_drop_below(rf_loader *ld, uint64_t keep_from);
void rf_ld_window_entry_release(rf_loader *ld, struct wentry *we);
int rf_ld_window_entry_fill(rf_loader *ld, struct wentry *we, const rf_chunk_sections *sec,
			    const rf_chunk_ctx *ctx, struct worker *w, int in_slot,
			    unsigned read_slot, const char *what, rf_diag *d);
int rf_ld_window_hold(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		      const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
		      rf_diag *d);
int rf_ld_window_source(rf_loader *ld, const rf_plan_item *it, const rf_chunk_sections **sec,
			const rf_chunk_ctx **ctx, rf_diag *d);
void rf_ld_window_choose_sums(rf_loader *ld);
int rf_ld_window_setup(rf_loader *ld, uint32_t *window);
/* 1 when a shard of the dataset is remote (a URL): nothing to map. */
int rf_ld_has_remote(const rf_loader *ld);
void rf_ld_window_choose_map(rf_loader *ld);
void rf_ld_window_choose_mem(rf_loader *ld, const uint32_t *sel, uint32_t nsel);

/* full.c */
int rf_ld_full_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel);
int rf_ld_full_refusal(const rf_loader *ld, const uint32_t *sel, uint32_t nsel, char *msg,
		       size_t cap);
void *rf_ld_full_main(void *arg);

/* deliver.c */
void rf_ld_describe_batch(rf_loader *ld, struct dbuf *b, const struct staged *s);
void rf_ld_staged_done(rf_loader *ld, const struct staged *s);
void rf_ld_stage_freed_locked(rf_loader *ld);
void rf_ld_zc_recycle_locked(rf_loader *ld, struct dbuf *b, int defer);
void rf_ld_stage_batch_locked(rf_loader *ld, const struct staged *s);
void rf_ld_stage_batch_unlock(rf_loader *ld, const struct staged *s);
void rf_ld_zc_promote_locked(rf_loader *ld);
int rf_ld_zc_reclaim_locked(rf_loader *ld);
int rf_ld_pick_dbuf_locked(rf_loader *ld);

/* copy.c */
void *rf_ld_copy_main(void *arg);

/* inplace.c: batches handed out where they lie in the maps (rf_config.inplace). */
void rf_ld_inplace_setup(rf_loader *ld);
int rf_ld_inplace_push(rf_loader *ld, uint64_t epoch, const rf_chunk_sections *sec, unsigned slot,
		       uint32_t i, uint32_t k, uint64_t pos);

/* mix.c: rf_config.sources (the loader's side of src/plan/mix.h) */
int rf_ld_mix_config_check(rf_loader *ld);
int rf_ld_mix_open(rf_loader *ld, const rf_dataset_config *dcfg);
void rf_ld_mix_free(rf_loader *ld);
uint32_t rf_ld_mix_held_max(rf_loader *ld);
int rf_ld_mix_open_order(rf_loader *ld);
int rf_ld_mix_seek_blob(rf_loader *ld, const void *blob, size_t len);
size_t rf_ld_mix_state_size(const rf_loader *ld);
int rf_ld_mix_state_save(rf_loader *ld, uint64_t epoch, uint64_t done, void *buf, size_t cap,
			 size_t *len);
int rf_ld_mix_source_stats(rf_loader *ld, size_t i, rf_source_stats *st);
int rf_ld_mix_next_read(rf_loader *ld, struct lstep *st);
void rf_ld_mix_reset(rf_loader *ld);
int rf_ld_mix_gather_step(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
			  const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
			  rf_diag *d);
int rf_ld_mix_window_setup(rf_loader *ld);
void rf_ld_mix_name_error(rf_loader *ld, uint32_t source, rf_diag *d);
void rf_ld_mix_memplan_note(rf_loader *ld, uint32_t held);

#endif
