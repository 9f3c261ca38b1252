/* SPDX-License-Identifier: MIT */
/*
 * The host backend: "device" memory is host memory and each stream is a
 * worker thread running a FIFO of ops (copy, event record, wait for an
 * event), which gives CUDA's ordering rules without a GPU: work on one
 * stream runs in order, streams run concurrently, a stream can wait for an
 * event recorded on another, and host calls return before the work runs.
 *
 * Events follow cudaEvent semantics: each record bumps a generation; the
 * event is complete when the newest record has been reached
 * (completed >= recorded), so re-recording makes it pending again and a query
 * reflects the latest record only.  A wait captures the generation current
 * when it is enqueued.  An event never recorded counts as complete.
 *
 * Locking: one mutex per backend guards every queue, every event and the
 * bookkeeping; copies run outside it.  Workers sleep on their stream's
 * condvar; anything waiting for progress (event sync, stream sync, a stream
 * waiting on an event) sleeps on the backend's `progress` condvar.  It is
 * broadcast only when something a waiter can be waiting for happened (an
 * event completed, a stream went idle) and only when someone waits: waking
 * the loader's copy thread after the copy and again after the record that
 * follows it cost a context switch per batch for nothing.
 *
 * Inline streams (rf_device_host_stream_inline): a stream that is idle (empty
 * queue, worker not running anything, not held) runs a copy of at most
 * RF_DEVICE_HOST_INLINE_MAX bytes in the caller's thread and completes a
 * record at once, saving the hand-off to the worker and back.  Whenever anything is queued or running the op queues as on any
 * other stream, so FIFO order holds; `inline_busy` keeps the worker (and other
 * callers) off the stream while an inline copy runs outside the lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/host.h"

enum op_kind { OP_COPY, OP_RECORD, OP_WAIT };

struct host_event;

struct host_op {
	enum op_kind kind;
	void *dst;
	const void *src;
	size_t bytes;
	struct host_event *ev;
	uint64_t gen;
	struct host_op *next;
};

struct host_event {
	uint64_t recorded;   /* generation of the newest record */
	uint64_t completed;  /* newest generation reached */
	unsigned refs;       /* ops in queues that point here */
	int destroyed;       /* freed when the last op lets go */
	struct host_event *next, *prev;
};

struct host_stream {
	struct host_dev *hd;
	pthread_t thread;
	pthread_cond_t cv;
	struct host_op *head, *tail;
	int hold, stop;
	atomic_int inline_on; /* set by rf_device_host_stream_inline */
	int inline_busy;      /* a caller is running an inline copy */
	struct host_stream *next, *prev;
};

struct host_block {
	void *p;
	size_t bytes;
};

struct host_dev {
	rf_device base;
	pthread_mutex_t lock;
	pthread_cond_t progress;
	int closing;  /* close: waits are skipped so every worker can drain */
	struct host_stream *streams;
	struct host_event *events;
	struct host_block *allocs, *regs;
	unsigned nallocs, cap_allocs, nregs, cap_regs;
	unsigned nstreams, nevents;
	unsigned waiting;     /* threads asleep on `progress` */
	unsigned long long copies, inline_copies;
};

static const struct rf_device_ops host_ops;

static struct host_dev *
hd_of(rf_device *dev)
{
	return (struct host_dev *)dev;
}

/* rf_fail writes the owner's diag, which other threads may also write:
 * called with the backend lock held so at least this backend's messages do
 * not interleave. */
#define HOST_FAIL(hd, code, ...) rf_fail((hd)->base.diag, (code), __VA_ARGS__)

/* An allocation of the backend's own failed: say so, so that the caller's
 * "...: %s" of the diag names the cause (and not a message left there by
 * an earlier attempt, such as a CUDA probe before falling back to host). */
static int
host_nomem(struct host_dev *hd, const char *what)
{
	pthread_mutex_lock(&hd->lock);
	int ret = HOST_FAIL(hd, -ENOMEM, "host: out of memory for %s", what);
	pthread_mutex_unlock(&hd->lock);
	return ret;
}

/* Lock held.  Sleep until progress is announced (or spuriously). */
static void
progress_wait(struct host_dev *hd)
{
	hd->waiting++;
	pthread_cond_wait(&hd->progress, &hd->lock);
	hd->waiting--;
}

/* Lock held.  An event completed or a stream went idle. */
static void
progress_wake(struct host_dev *hd)
{
	if (hd->waiting)
		pthread_cond_broadcast(&hd->progress);
}

/* Lock held.  Whether an op may run in the caller's thread now: never while
 * anything is queued or running on the stream, or while it is held. */
static int
can_inline(const struct host_stream *s)
{
	return !s->head && !s->inline_busy && !s->hold;
}

static void
event_unref(struct host_dev *hd, struct host_event *ev)
{
	if (--ev->refs == 0 && ev->destroyed)
		free(ev);
	(void)hd;
}

static void *
stream_worker(void *arg)
{
	struct host_stream *s = arg;
	struct host_dev *hd = s->hd;
	pthread_mutex_lock(&hd->lock);
	for (;;) {
		while ((!s->head || s->hold || s->inline_busy) && !s->stop)
			pthread_cond_wait(&s->cv, &hd->lock);
		if (!s->head)
			break;
		struct host_op *op = s->head;
		int wake = 0;
		switch (op->kind) {
		case OP_COPY:
			pthread_mutex_unlock(&hd->lock);
			memcpy(op->dst, op->src, op->bytes);
			pthread_mutex_lock(&hd->lock);
			hd->copies++;
			break;
		case OP_RECORD:
			if (op->ev->completed < op->gen)
				op->ev->completed = op->gen;
			wake = 1;
			break;
		case OP_WAIT:
			while (op->ev->completed < op->gen && !hd->closing)
				progress_wait(hd);
			break;
		}
		/* The op leaves the queue only once done, so an empty queue
		 * means the stream is idle (stream_sync). */
		s->head = op->next;
		if (!s->head) {
			s->tail = NULL;
			wake = 1; /* idle: stream_sync */
		}
		if (op->ev)
			event_unref(hd, op->ev);
		free(op);
		if (wake)
			progress_wake(hd);
	}
	pthread_mutex_unlock(&hd->lock);
	return NULL;
}

static int
enqueue(struct host_dev *hd, struct host_stream *s, struct host_op *op)
{
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_signal(&s->cv);
	return 0;
}

static int
track(struct host_block **arr, unsigned *n, unsigned *cap, void *p, size_t bytes)
{
	if (*n == *cap) {
		unsigned nc = *cap ? *cap * 2 : 16;
		struct host_block *na = realloc(*arr, nc * sizeof *na);
		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	(*arr)[*n].p = p;
	(*arr)[*n].bytes = bytes;
	(*n)++;
	return 0;
}

static int
untrack(struct host_block *arr, unsigned *n, void *p)
{
	for (unsigned i = 0; i < *n; i++) {
		if (arr[i].p == p) {
			arr[i] = arr[--(*n)];
			return 0;
		}
	}
	return -EINVAL;
}

static int
host_alloc(rf_device *dev, size_t bytes, void **dptr)
{
	struct host_dev *hd = hd_of(dev);
	void *p = NULL;
	/* 256-byte alignment: what cudaMalloc guarantees, and what batch
	 * layouts assume. */
	if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) {
		pthread_mutex_lock(&hd->lock);
		int ret = HOST_FAIL(hd, -ENOMEM, "host: cannot allocate %zu bytes of device memory", bytes);
		pthread_mutex_unlock(&hd->lock);
		return ret;
	}
	pthread_mutex_lock(&hd->lock);
	int ret = track(&hd->allocs, &hd->nallocs, &hd->cap_allocs, p, bytes);
	if (ret < 0)
		ret = HOST_FAIL(hd, ret, "host: out of memory for the allocation table");
	pthread_mutex_unlock(&hd->lock);
	if (ret < 0) {
		free(p);
		return ret;
	}
	*dptr = p;
	return 0;
}

static int
host_free(rf_device *dev, void *dptr)
{
	struct host_dev *hd = hd_of(dev);
	if (!dptr)
		return 0;
	pthread_mutex_lock(&hd->lock);
	int ret = untrack(hd->allocs, &hd->nallocs, dptr);
	if (ret < 0)
		ret = HOST_FAIL(hd, -EINVAL, "host: free of %p, which alloc did not return", dptr);
	pthread_mutex_unlock(&hd->lock);
	if (ret == 0)
		free(dptr);
	return ret;
}

static int
host_register(rf_device *dev, void *p, size_t bytes)
{
	struct host_dev *hd = hd_of(dev);
	int ret = 0;
	pthread_mutex_lock(&hd->lock);
	/* cudaHostRegister refuses a range overlapping a registered one. */
	for (unsigned i = 0; i < hd->nregs; i++) {
		char *a = hd->regs[i].p, *b = p;
		if (b < a + hd->regs[i].bytes && a < b + bytes) {
			ret = HOST_FAIL(hd, -EEXIST, "host: register of %zu bytes at %p overlaps a registered range",
					bytes, p);
			break;
		}
	}
	if (ret == 0 && (ret = track(&hd->regs, &hd->nregs, &hd->cap_regs, p, bytes)) < 0)
		ret = HOST_FAIL(hd, ret, "host: out of memory for the registration table");
	pthread_mutex_unlock(&hd->lock);
	return ret;
}

static int
host_unregister(rf_device *dev, void *p)
{
	struct host_dev *hd = hd_of(dev);
	pthread_mutex_lock(&hd->lock);
	int ret = untrack(hd->regs, &hd->nregs, p);
	if (ret < 0)
		ret = HOST_FAIL(hd, -EINVAL, "host: unregister of %p, which is not registered", p);
	pthread_mutex_unlock(&hd->lock);
	return ret;
}

static int
host_stream_create(rf_device *dev, void **stream)
{
	struct host_dev *hd = hd_of(dev);
	struct host_stream *s = calloc(1, sizeof *s);
	if (!s)
		return host_nomem(hd, "a stream");
	s->hd = hd;
	atomic_init(&s->inline_on, 0);
	pthread_cond_init(&s->cv, NULL);
	int err = pthread_create(&s->thread, NULL, stream_worker, s);
	if (err) {
		pthread_cond_destroy(&s->cv);
		free(s);
		pthread_mutex_lock(&hd->lock);
		int ret = HOST_FAIL(hd, -err, "host: cannot start a stream thread: %s", rf_strerror(-err));
		pthread_mutex_unlock(&hd->lock);
		return ret;
	}
	pthread_mutex_lock(&hd->lock);
	s->next = hd->streams;
	if (hd->streams)
		hd->streams->prev = s;
	hd->streams = s;
	hd->nstreams++;
	pthread_mutex_unlock(&hd->lock);
	*stream = s;
	return 0;
}

/* Called with the lock held; returns with it held, the stream freed. */
static void
stream_stop(struct host_dev *hd, struct host_stream *s)
{
	/* Like cudaStreamDestroy, queued work still runs. */
	s->hold = 0;
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&hd->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&hd->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		hd->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	hd->nstreams--;
	pthread_cond_destroy(&s->cv);
	free(s);
}

static int
host_stream_destroy(rf_device *dev, void *stream)
{
	struct host_dev *hd = hd_of(dev);
	if (!stream)
		return 0;
	pthread_mutex_lock(&hd->lock);
	stream_stop(hd, stream);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_event_create(rf_device *dev, void **event)
{
	struct host_dev *hd = hd_of(dev);
	struct host_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return host_nomem(hd, "an event");
	pthread_mutex_lock(&hd->lock);
	ev->next = hd->events;
	if (hd->events)
		hd->events->prev = ev;
	hd->events = ev;
	hd->nevents++;
	pthread_mutex_unlock(&hd->lock);
	*event = ev;
	return 0;
}

static void
event_unlink(struct host_dev *hd, struct host_event *ev)
{
	if (ev->prev)
		ev->prev->next = ev->next;
	else
		hd->events = ev->next;
	if (ev->next)
		ev->next->prev = ev->prev;
	hd->nevents--;
	/* Like cudaEventDestroy: ops still queued keep it alive. */
	ev->destroyed = 1;
	if (ev->refs == 0)
		free(ev);
}

static int
host_event_destroy(rf_device *dev, void *event)
{
	struct host_dev *hd = hd_of(dev);
	if (!event)
		return 0;
	pthread_mutex_lock(&hd->lock);
	event_unlink(hd, event);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_copy_h2d_async(rf_device *dev, void *dst, const void *src, size_t bytes, void *stream)
{
	struct host_dev *hd = hd_of(dev);
	if (!bytes)
		return 0;
	if (!stream) {
		memcpy(dst, src, bytes);
		return 0;
	}
	struct host_stream *s = stream;
	/* Large copies go to the worker even on an inline stream: their
	 * hand-off costs little next to the copy, and running them here would
	 * keep the caller (the loader's copy thread) from handing over a batch
	 * already copied while it copies the next one. */
	if (bytes <= RF_DEVICE_HOST_INLINE_MAX &&
	    atomic_load_explicit(&s->inline_on, memory_order_relaxed)) {
		pthread_mutex_lock(&hd->lock);
		if (can_inline(s)) {
			s->inline_busy = 1;
			pthread_mutex_unlock(&hd->lock);
			memcpy(dst, src, bytes);
			pthread_mutex_lock(&hd->lock);
			s->inline_busy = 0;
			hd->inline_copies++;
			/* Ops queued meanwhile (by other threads) may now run. */
			if (s->head)
				pthread_cond_signal(&s->cv);
			else
				progress_wake(hd); /* idle again: stream_sync */
			pthread_mutex_unlock(&hd->lock);
			return 0;
		}
		pthread_mutex_unlock(&hd->lock);
		/* Busy: queue behind what is there (queuing is always right,
		 * so the stream may have gone idle in between). */
	}
	struct host_op *op = calloc(1, sizeof *op);
	if (!op)
		return host_nomem(hd, "a copy");
	op->kind = OP_COPY;
	op->dst = dst;
	op->src = src;
	op->bytes = bytes;
	pthread_mutex_lock(&hd->lock);
	enqueue(hd, stream, op);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_copy_d2h(rf_device *dev, void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memcpy(dst, src, bytes);
	return 0;
}

/* Block until `ev` has completed generation `gen` or the device closes
 * (hd->lock held). */
static void
wait_gen_locked(struct host_dev *hd, const struct host_event *ev, uint64_t gen)
{
	while (ev->completed < gen && !hd->closing)
		progress_wait(hd);
}

/* Queue an event op (record or wait) of generation `gen` on `stream`
 * (hd->lock held); the op keeps the event alive until it has run. */
static void
enqueue_event_op(struct host_dev *hd, void *stream, struct host_op *op, enum op_kind kind,
		 struct host_event *ev, uint64_t gen)
{
	op->kind = kind;
	op->ev = ev;
	op->gen = gen;
	ev->refs++;
	enqueue(hd, stream, op);
}

static int
host_event_record(rf_device *dev, void *event, void *stream)
{
	struct host_dev *hd = hd_of(dev);
	struct host_event *ev = event;
	struct host_stream *s = stream;
	struct host_op *op = NULL;
	if (s && atomic_load_explicit(&s->inline_on, memory_order_relaxed)) {
		/* An idle inline stream has done everything queued before this
		 * record: it completes now. */
		pthread_mutex_lock(&hd->lock);
		if (can_inline(s)) {
			ev->completed = ++ev->recorded;
			progress_wake(hd);
			pthread_mutex_unlock(&hd->lock);
			return 0;
		}
		pthread_mutex_unlock(&hd->lock);
	}
	if (stream && !(op = calloc(1, sizeof *op)))
		return host_nomem(hd, "a stream operation");
	pthread_mutex_lock(&hd->lock);
	uint64_t gen = ++ev->recorded;
	if (!stream) {
		ev->completed = gen;
		progress_wake(hd);
	} else {
		enqueue_event_op(hd, stream, op, OP_RECORD, ev, gen);
	}
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_event_query(rf_device *dev, void *event)
{
	struct host_dev *hd = hd_of(dev);
	struct host_event *ev = event;
	pthread_mutex_lock(&hd->lock);
	int ret = ev->completed >= ev->recorded ? 0 : -EAGAIN;
	pthread_mutex_unlock(&hd->lock);
	return ret;
}

static int
host_event_sync(rf_device *dev, void *event)
{
	struct host_dev *hd = hd_of(dev);
	struct host_event *ev = event;
	pthread_mutex_lock(&hd->lock);
	wait_gen_locked(hd, ev, ev->recorded);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_stream_wait_event(rf_device *dev, void *stream, void *event)
{
	struct host_dev *hd = hd_of(dev);
	struct host_event *ev = event;
	struct host_op *op = NULL;
	if (stream && !(op = calloc(1, sizeof *op)))
		return host_nomem(hd, "a stream operation");
	pthread_mutex_lock(&hd->lock);
	uint64_t gen = ev->recorded;
	if (ev->completed >= gen) {
		free(op); /* nothing to wait for */
	} else if (!stream) {
		/* The synchronous stream is the caller: it blocks. */
		wait_gen_locked(hd, ev, gen);
	} else {
		enqueue_event_op(hd, stream, op, OP_WAIT, ev, gen);
	}
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_stream_sync(rf_device *dev, void *stream)
{
	struct host_dev *hd = hd_of(dev);
	struct host_stream *s = stream;
	if (!s)
		return 0; /* the NULL stream's work ran in its callers */
	pthread_mutex_lock(&hd->lock);
	while ((s->head || s->inline_busy) && !hd->closing)
		progress_wait(hd);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int
host_mem_info(rf_device *dev, size_t *free_bytes, size_t *total_bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	long avail = sysconf(_SC_AVPHYS_PAGES);
	long total = sysconf(_SC_PHYS_PAGES);
	if (page <= 0 || avail < 0 || total <= 0)
		return -ENOSYS;
	*free_bytes = (size_t)avail * (size_t)page;
	*total_bytes = (size_t)total * (size_t)page;
	return 0;
}

static void
host_close(rf_device *dev)
{
	struct host_dev *hd = hd_of(dev);
	pthread_mutex_lock(&hd->lock);
	/* Queued copies still run (their memory is still ours), but waits
	 * for events that will never fire are dropped. */
	hd->closing = 1;
	progress_wake(hd);
	while (hd->streams)
		stream_stop(hd, hd->streams);
	while (hd->events)
		event_unlink(hd, hd->events);
	pthread_mutex_unlock(&hd->lock);
	for (unsigned i = 0; i < hd->nallocs; i++)
		free(hd->allocs[i].p);
	free(hd->allocs);
	free(hd->regs);
	pthread_cond_destroy(&hd->progress);
	pthread_mutex_destroy(&hd->lock);
	free(hd);
}

static int
host_stream_set_inline(rf_device *dev, void *stream, int on)
{
	return rf_device_host_stream_inline(dev, stream, on);
}

static const struct rf_device_ops host_ops = {
	.name = "host",
	.caps = RF_DEVICE_CAP_HOST_MEMORY,
	.alloc = host_alloc,
	.free = host_free,
	.host_register = host_register,
	.host_unregister = host_unregister,
	.stream_create = host_stream_create,
	.stream_destroy = host_stream_destroy,
	.event_create = host_event_create,
	.event_destroy = host_event_destroy,
	.copy_h2d_async = host_copy_h2d_async,
	.copy_d2h = host_copy_d2h,
	.event_record = host_event_record,
	.event_query = host_event_query,
	.event_sync = host_event_sync,
	.stream_wait_event = host_stream_wait_event,
	.stream_sync = host_stream_sync,
	.mem_info = host_mem_info,
	.close = host_close,
	.stream_set_inline = host_stream_set_inline,
};

int
rf_device_open_host(rf_device **out, rf_diag *diag)
{
	*out = NULL;
	struct host_dev *hd = calloc(1, sizeof *hd);
	if (!hd)
		return rf_fail(diag, -ENOMEM, "host: out of memory");
	hd->base.ops = &host_ops;
	hd->base.diag = diag;
	hd->base.index = -1; /* no CUDA ordinal: rf_stats.device_ordinal */
	strcpy(hd->base.desc, "host");
	pthread_mutex_init(&hd->lock, NULL);
	pthread_cond_init(&hd->progress, NULL);
	/* Opened: what an earlier attempt left in the diag (a failed CUDA
	 * probe of RF_DEVICE_AUTO) is no failure of this device. */
	diag->msg[0] = '\0';
	*out = &hd->base;
	return 0;
}

int
rf_device_is_host(const rf_device *dev)
{
	return dev && dev->ops == &host_ops;
}

int
rf_device_host_counts(rf_device *dev, struct rf_device_host_counts *c)
{
	if (!rf_device_is_host(dev))
		return -EINVAL;
	struct host_dev *hd = hd_of(dev);
	memset(c, 0, sizeof *c);
	pthread_mutex_lock(&hd->lock);
	c->allocs = hd->nallocs;
	for (unsigned i = 0; i < hd->nallocs; i++)
		c->alloc_bytes += hd->allocs[i].bytes;
	c->registrations = hd->nregs;
	for (unsigned i = 0; i < hd->nregs; i++)
		c->registered_bytes += hd->regs[i].bytes;
	c->streams = hd->nstreams;
	c->events = hd->nevents;
	c->copies = hd->copies;
	c->inline_copies = hd->inline_copies;
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

int
rf_device_host_hold(rf_device *dev, void *stream, int hold)
{
	if (!rf_device_is_host(dev) || !stream)
		return -EINVAL;
	struct host_dev *hd = hd_of(dev);
	struct host_stream *s = stream;
	pthread_mutex_lock(&hd->lock);
	s->hold = hold != 0;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

int
rf_device_host_stream_inline(rf_device *dev, void *stream, int on)
{
	if (!rf_device_is_host(dev) || !stream)
		return -EINVAL;
	struct host_stream *s = stream;
	atomic_store_explicit(&s->inline_on, on != 0, memory_order_relaxed);
	return 0;
}
