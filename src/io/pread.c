/* SPDX-License-Identifier: MIT */
/*
 * The pread engine, for when io_uring cannot be set up (old kernel, a
 * container's seccomp profile, kernel.io_uring_disabled) or is turned off
 * (RINGFEED_IO=pread, engine 2).  A few worker threads each run one pread(2)
 * piece at a time; the reader thread keeps the whole completion path (short
 * reads, retries, error messages), exactly as for io_uring, so both engines
 * behave the same.  Requests reach the workers through a mutex/condvar queue
 * and come back through another.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io_impl.h"

#define RF_IO_PREAD_THREADS 4

static void *
worker(void *arg)
{
	rf_io *io = arg;
	pthread_mutex_lock(&io->lock);
	for (;;) {
		while (!io->work_count && !io->stop)
			pthread_cond_wait(&io->work_cv, &io->lock);
		if (!io->work_count)
			break;
		unsigned idx = io->work[io->work_head];
		io->work_head = (io->work_head + 1) % io->qd;
		io->work_count--;
		pthread_mutex_unlock(&io->lock);

		/* The request's fields were written before it was queued
		 * under the lock, and nobody else touches them until it is
		 * back on the done queue. */
		struct rf_io_req *r = &io->reqs[idx];
		ssize_t got = pread(r->fd, r->buf + r->done, r->piece, (off_t)(r->offset + r->done));
		int64_t res = got < 0 ? -(int64_t)errno : (int64_t)got;
		if (res > 0 && rf_io_hits_fail(io, r, r->piece))
			res = -EIO;
		r->res = res;

		pthread_mutex_lock(&io->lock);
		io->fin[(io->fin_head + io->fin_count) % io->qd] = idx;
		io->fin_count++;
		pthread_cond_signal(&io->done_cv);
	}
	pthread_mutex_unlock(&io->lock);
	return NULL;
}

int
rf_io_pread_setup(rf_io *io)
{
	io->kind = RF_IO_PREAD;
	io->ops = &rf_io_pread_ops;
	io->engine = "pread";
	io->pending = calloc(io->qd, sizeof *io->pending);
	io->work = calloc(io->qd, sizeof *io->work);
	io->fin = calloc(io->qd, sizeof *io->fin);
	unsigned n = io->qd < RF_IO_PREAD_THREADS ? io->qd : RF_IO_PREAD_THREADS;
	io->threads = calloc(n, sizeof *io->threads);
	if (!io->pending || !io->work || !io->fin || !io->threads)
		return rf_fail(io->diag, -ENOMEM, "io: out of memory");
	if (pthread_mutex_init(&io->lock, NULL) != 0)
		return rf_fail(io->diag, -ENOMEM, "io: pthread_mutex_init failed");
	pthread_cond_init(&io->work_cv, NULL);
	pthread_cond_init(&io->done_cv, NULL);
	io->lock_ok = 1;
	for (unsigned i = 0; i < n; i++) {
		int err = pthread_create(&io->threads[i], NULL, worker, io);
		if (err) {
			if (i == 0)
				return rf_fail(io->diag, -err, "io: cannot start pread threads: %s",
					       rf_strerror(-err));
			break; /* fewer workers still work */
		}
		io->nthreads++;
	}
	return 0;
}

void
rf_io_pread_queue(rf_io *io, unsigned idx)
{
	struct rf_io_req *r = &io->reqs[idx];
	size_t n = r->len - r->done;
	r->piece = n > io->max_piece ? io->max_piece : n;
	io->pending[io->npending++] = idx;
}

int
rf_io_pread_submit(rf_io *io)
{
	if (!io->npending)
		return 0;
	pthread_mutex_lock(&io->lock);
	for (unsigned i = 0; i < io->npending; i++) {
		io->work[(io->work_head + io->work_count) % io->qd] = io->pending[i];
		io->work_count++;
	}
	if (io->npending == 1)
		pthread_cond_signal(&io->work_cv);
	else
		pthread_cond_broadcast(&io->work_cv);
	pthread_mutex_unlock(&io->lock);
	io->npending = 0;
	return 0;
}

int
rf_io_pread_reap(rf_io *io, unsigned min)
{
	unsigned batch[64];
	rf_io_pread_submit(io);
	for (;;) {
		unsigned got = 0;
		pthread_mutex_lock(&io->lock);
		/* Slots in use (nfree < qd) are all with the workers here:
		 * pending ones were just submitted. */
		while (!io->fin_count && io->ready_count < min && io->nfree < io->qd)
			pthread_cond_wait(&io->done_cv, &io->lock);
		while (io->fin_count && got < 64) {
			batch[got++] = io->fin[io->fin_head];
			io->fin_head = (io->fin_head + 1) % io->qd;
			io->fin_count--;
		}
		pthread_mutex_unlock(&io->lock);
		for (unsigned i = 0; i < got; i++) {
			unsigned idx = batch[i];
			if (rf_io_finish_piece(io, idx, io->reqs[idx].res))
				rf_io_pread_queue(io, idx);
		}
		rf_io_pread_submit(io);
		if (got == 64)
			continue; /* more may be waiting */
		if (io->ready_count >= min || io->nfree == io->qd)
			return 0;
	}
}

void
rf_io_pread_teardown(rf_io *io)
{
	if (io->lock_ok) {
		/* Let every read in flight land before the memory goes. */
		if (io->nthreads)
			while (io->nfree < io->qd)
				rf_io_pread_reap(io, io->ready_count + 1);
		pthread_mutex_lock(&io->lock);
		io->stop = 1;
		pthread_cond_broadcast(&io->work_cv);
		pthread_mutex_unlock(&io->lock);
		for (unsigned i = 0; i < io->nthreads; i++)
			pthread_join(io->threads[i], NULL);
		pthread_cond_destroy(&io->work_cv);
		pthread_cond_destroy(&io->done_cv);
		pthread_mutex_destroy(&io->lock);
		io->lock_ok = 0;
	}
	free(io->threads);
	free(io->pending);
	free(io->work);
	free(io->fin);
}

const struct rf_io_ops rf_io_pread_ops = {
	.kernel_writes = 0,
	.teardown = rf_io_pread_teardown,
	.queue = rf_io_pread_queue,
	.submit = rf_io_pread_submit,
	.reap = rf_io_pread_reap,
};
