/* SPDX-License-Identifier: MIT */
/*
 * The reader's private state, shared by io.c (files, requests, the common
 * completion path) and the two engines (uring.c, pread.c).
 */
#ifndef RF_IO_IMPL_H
#define RF_IO_IMPL_H

#include <liburing.h>
#include <pthread.h>
#include <stdint.h>

#include "io/io.h"

enum rf_io_kind {
	RF_IO_URING = 1,
	RF_IO_PREAD = 2,
};

/* Largest piece one read request asks the kernel for.  A request's length is
 * 32 bits and the kernel caps a read at about 2 GiB anyway; larger reads go
 * out as successive pieces, like a short read. */
#define RF_IO_MAX_PIECE ((size_t)1 << 30)

/* The kernel refuses a registered buffer larger than 1 GiB (io_uring's
 * io_buffer_validate), so a larger region is registered as 1 GiB iovecs and a
 * read is split where it crosses one's end. */
#define RF_IO_BUF_SHIFT 30

struct rf_io_file {
	int fd;
	int direct;  /* opened with O_DIRECT */
	int fixed;   /* index in io_uring's registered file table, or -1 */
	char *path;
	int remote;  /* a URL: 1 + its handle in io->http (io_remote.c); 0 local */
};

struct rf_io_req {
	uint64_t tag;
	uint64_t offset;  /* file offset of the whole read */
	char *buf;
	size_t len;
	size_t done;      /* bytes in so far */
	size_t piece;     /* length asked for by the request in flight */
	int file;
	int fd;           /* the file's descriptor: pread workers never look at
			   * io->files, which rf_io_add_file may reallocate */
	int64_t res;      /* pread engine: result of the finished request */
	unsigned again;   /* consecutive -EAGAIN/-EINTR retries */
	unsigned retries; /* transient errors retried with backoff (io.c) */
};

/*
 * An engine: the parts of reading that differ, behind one table.  io.c owns
 * files, request slots, the completion path (rf_io_finish_piece) and the
 * caller's API; an engine queues requests, submits them and reaps their
 * completions into rf_io_finish_piece.  Its setup function (chosen at
 * rf_io_open) sets io->ops and io->engine, the name it reports, once it
 * works.  A new engine is one file: a setup function and a table.
 */
struct rf_io_ops {
	/* The kernel writes the buffers (not a system call ASan intercepts):
	 * they are poisoned while a read is in flight (RF_IO_POISON). */
	int kernel_writes;
	void (*teardown)(rf_io *io); /* waits for reads in flight */
	/* Optional: a file was added at `index` (register it). */
	int (*add_file)(rf_io *io, struct rf_io_file *f, unsigned index);
	void (*queue)(rf_io *io, unsigned idx);
	int (*submit)(rf_io *io);
	/* Wait until at least `min` requests have completed. */
	int (*reap)(rf_io *io, unsigned min);
};

extern const struct rf_io_ops rf_io_uring_ops;
extern const struct rf_io_ops rf_io_pread_ops;

struct rf_io {
	rf_diag *diag;
	const struct rf_io_ops *ops; /* the engine in use (set by its setup) */
	enum rf_io_kind kind;
	const char *engine;
	unsigned qd;
	int want_direct;
	void *region;
	size_t region_bytes;

	struct rf_io_file *files;
	unsigned nfiles, files_cap;
	int warned_buffered;   /* the O_DIRECT fallback was logged */

	/* Request slots: at most qd, reused from a free stack. */
	struct rf_io_req *reqs;
	unsigned *free_stack;
	unsigned nfree;
	/* Completed reads not yet handed to the caller (a ring of qd). */
	rf_io_done *ready;
	unsigned ready_head, ready_count;
	/* Reads given by rf_io_read and not yet returned by rf_io_wait. */
	unsigned outstanding;

	/* Largest piece per request: RF_IO_MAX_PIECE, or smaller through the
	 * test hook RINGFEED_IO_MAX_PIECE (forces the resubmission path). */
	size_t max_piece;
	/* Reads asked again after a transient error (rf_io_retries). */
	uint64_t retries;
	/* Test hooks (RINGFEED_IO_FAIL_AT, RINGFEED_IO_FAIL_TIMES,
	 * RINGFEED_IO_REFUSE_DIRECT). */
	uint64_t fail_at;
	uint64_t fail_times;   /* 0: fail_at fails every time; n + 1: the first n
	                          times (1: spent) */
	int refuse_direct;
	const char *refuse_match; /* refuse only paths containing it (NULL: all) */

	/* io_uring engine. */
	struct io_uring ring;
	int ring_ok;
	int bufs_registered;
	unsigned nbufs;
	int files_registered;
	unsigned fixed_cap;
	unsigned to_submit;    /* SQEs prepared and not yet submitted */
	unsigned in_kernel;    /* requests submitted and not completed */

	/* pread engine: pending requests are handed to the pool by submit;
	 * workers push finished requests on the done queue. */
	pthread_t *threads;
	unsigned nthreads;
	pthread_mutex_t lock;
	pthread_cond_t work_cv, done_cv;
	int lock_ok;
	int stop;
	unsigned *pending;     /* reader thread only, no lock */
	unsigned npending;
	unsigned *work;        /* ring of qd, under lock */
	unsigned work_head, work_count;
	unsigned *fin;         /* ring of qd, under lock */
	unsigned fin_head, fin_count;
	unsigned busy;         /* requests handed to the pool, not yet reaped */

	/* URL files (io_remote.c): the remote reader, made at the first one,
	 * and its reads among `outstanding`. */
	struct rf_http *http;
	unsigned remote_out;
	char *cache_dir;       /* copied from the config, for the remote reader */
	uint64_t cache_bytes;
	char engine_name[64];  /* rf_io_engine() once a URL file is added */
};

/* Common completion path (io.c): a request finished with `res` for its last
 * piece; decides between done, EOF, error and resubmission.  Returns 1 when
 * the request must be issued again for the rest. */
int rf_io_finish_piece(rf_io *io, unsigned idx, int64_t res);

/* io_uring engine (uring.c). */
int rf_io_uring_setup(rf_io *io, int forced);
void rf_io_uring_teardown(rf_io *io);
int rf_io_uring_add_file(rf_io *io, struct rf_io_file *f, unsigned index);
void rf_io_uring_queue(rf_io *io, unsigned idx);
int rf_io_uring_submit(rf_io *io);
int rf_io_uring_reap(rf_io *io, unsigned min);

/* pread engine (pread.c). */
int rf_io_pread_setup(rf_io *io);
void rf_io_pread_teardown(rf_io *io);
void rf_io_pread_queue(rf_io *io, unsigned idx);
int rf_io_pread_submit(rf_io *io);
int rf_io_pread_reap(rf_io *io, unsigned min);

/* URL files (io_remote.c), called from io.c's one hook per operation. */
int rf_io_remote_add(rf_io *io, const char *path, int *file);
/* The next entry of io->files, grown if need be and zeroed; the caller fills
 * it and counts it (io->nfiles++). */
int rf_io_file_slot(rf_io *io, struct rf_io_file **out);
int rf_io_remote_read(rf_io *io, const struct rf_io_file *f, uint64_t offset, void *buf,
		      size_t len, uint64_t tag);
int rf_io_remote_submit(rf_io *io);
int rf_io_remote_wait(rf_io *io, rf_io_done *done, unsigned max, unsigned min);
void rf_io_remote_close(rf_io *io);
const char *rf_io_remote_engine(rf_io *io);

/* AddressSanitizer does not see the kernel's writes: under it, memory a
 * read is landing in is poisoned from submission to completion, so code that
 * touches a buffer with a read still in flight (invariant 2) is reported.
 * Only for io_uring: the pread engine's pread(2) is itself checked by ASan's
 * interceptor, which would flag the legitimate write. */
#if defined(__SANITIZE_ADDRESS__)
#define RF_IO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RF_IO_ASAN 1
#endif
#endif
#ifdef RF_IO_ASAN
#include <sanitizer/asan_interface.h>
#define RF_IO_POISON(p, n) __asan_poison_memory_region((p), (n))
#define RF_IO_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define RF_IO_POISON(p, n) ((void)(p), (void)(n))
#define RF_IO_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Whether a piece of a request covers the RINGFEED_IO_FAIL_AT offset (with
 * RINGFEED_IO_FAIL_TIMES=n, only its first n reads: a transient error).
 * Called from pread workers too: the count is atomic. */
static inline int
rf_io_hits_fail(rf_io *io, const struct rf_io_req *r, size_t piece)
{
	uint64_t at = r->offset + r->done;
	if (io->fail_at == UINT64_MAX || io->fail_at < at || io->fail_at - at >= piece)
		return 0;
	if (!io->fail_times)
		return 1;
	uint64_t left = __atomic_load_n(&io->fail_times, __ATOMIC_RELAXED);
	while (left > 1 && !__atomic_compare_exchange_n(&io->fail_times, &left, left - 1, 0,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return left > 1;
}

#endif
