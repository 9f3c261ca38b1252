/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator: streams, events, copies and host functions.
 *
 * Each stream is a FIFO of operations executed by its own worker thread.
 * An operation may carry dependencies, "(stream t, ticket k): wait until t
 * has finished its k-th operation"; cudaStreamWaitEvent and the legacy
 * default stream's implicit synchronization are nothing but such
 * dependencies, so cross-stream order exists only where a GPU has it.
 *
 * Hazards between streams are found when an operation starts: an
 * operation Y on another stream that was enqueued earlier and has not
 * finished is unordered with the starting operation X (had anything
 * ordered X after Y, X's stream would have waited for Y), so a conflicting
 * access to the same device bytes is a race on a GPU.  Operations enqueued
 * later are checked when they start, against X if X is still running.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "emu.h"

/* --- streams -------------------------------------------------------------- */

static pthread_key_t pts_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;
static _Thread_local struct emu_stream *tls_pts;

static void *worker_main(void *arg);
static void event_unref(struct emu_event *ev);

void
emu_stream_unref(struct emu_stream *s)
{
	if (--s->refs > 0)
		return;
	for (struct emu_stream **pp = &g.streams; *pp; pp = &(*pp)->next_all) {
		if (*pp == s) {
			*pp = s->next_all;
			break;
		}
	}
	free(s->tags);
	free(s);
}

/* Creates a stream and its worker; g.lock held.  Refs: one for the
 * handle, one for the worker until it is joined. */
static struct emu_stream *
stream_new(int device, unsigned flags, bool implicit)
{
	struct emu_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = ++g.next_id;
	s->device = device;
	s->flags = flags;
	s->implicit = implicit;
	s->blocking = !(flags & cudaStreamNonBlocking);
	s->refs = 2;
	s->rng = (g.cfg.seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)s->id << 17);
	if (!s->rng)
		s->rng = 1;
	if (pthread_create(&s->thread, NULL, worker_main, s)) {
		free(s);
		return NULL;
	}
	s->next_all = g.streams;
	g.streams = s;
	return s;
}

static void
pts_destroy(void *p)
{
	struct emu_stream *s = p;

	/* The per-thread default stream dies with its thread; its worker
	 * drains what is left and is joined later. */
	EMU_LOCK();
	s->destroyed = true;
	emu_stream_unref(s);
	pthread_cond_broadcast(&g.cond);
	EMU_UNLOCK();
}

static void
pts_key_init(void)
{
	pthread_key_create(&pts_key, pts_destroy);
}

/* The stream a handle names, g.lock held: the legacy default stream for 0
 * and cudaStreamLegacy, this thread's default stream for
 * cudaStreamPerThread, else a live stream created by cudaStreamCreate*. */
struct emu_stream *
emu_resolve_stream(cudaStream_t h, cudaError_t *err)
{
	int dev = emu_tls_device;
	struct emu_stream *s;

	*err = cudaSuccess;
	if (h == NULL || h == cudaStreamLegacy) {
		if (!g.legacy[dev]) {
			s = stream_new(dev, 0, true);
			if (!s) {
				*err = cudaErrorMemoryAllocation;
				return NULL;
			}
			s->legacy = true;
			s->blocking = false;
			g.legacy[dev] = s;
		}
		return g.legacy[dev];
	}
	if (h == cudaStreamPerThread) {
		if (!tls_pts || tls_pts->destroyed) {
			pthread_once(&pts_once, pts_key_init);
			s = stream_new(dev, 0, true);
			if (!s) {
				*err = cudaErrorMemoryAllocation;
				return NULL;
			}
			tls_pts = s;
			pthread_setspecific(pts_key, s);
		}
		return tls_pts;
	}
	/* Compared as addresses, never dereferenced: a stale handle is found
	 * out, not followed. */
	for (s = g.streams; s; s = s->next_all)
		if ((cudaStream_t)s == h && !s->destroyed && !s->implicit)
			return s;
	emu_hazard(RFEMU_HAZARD_BAD_HANDLE, "stream %p was destroyed or never created", (void *)h);
	*err = cudaErrorInvalidResourceHandle;
	return NULL;
}

uint64_t
emu_worker_threads(void)
{
	uint64_t n = 0;

	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		if (!s->exited)
			n++;
	return n;
}

uint64_t
emu_pending_ops(void)
{
	uint64_t n = 0;

	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		n += s->enqueued - s->done;
	return n;
}

/* Joins the workers of destroyed streams that have drained (an empty
 * queue: the worker is leaving or gone); g.lock not held.  Joining happens
 * outside the lock, and `joining` keeps two reapers off the same thread. */
void
emu_reap(void)
{
	for (;;) {
		struct emu_stream *s;

		EMU_LOCK();
		for (s = g.streams; s; s = s->next_all)
			if (s->destroyed && !s->head && !s->joining)
				break;
		if (s)
			s->joining = true;
		EMU_UNLOCK();
		if (!s)
			return;
		pthread_join(s->thread, NULL);
		EMU_LOCK();
		emu_stream_unref(s);
		EMU_UNLOCK();
	}
}

/* --- operations ---------------------------------------------------------- */

struct emu_op *
emu_op_new(enum emu_op_kind kind)
{
	struct emu_op *op = calloc(1, sizeof(*op));

	if (op)
		op->kind = kind;
	return op;
}

static void
op_free(struct emu_op *op)
{
	for (size_t i = 0; i < op->ndeps; i++)
		emu_stream_unref(op->deps[i].s);
	free(op->deps);
	free(op->reads);
	free(op);
}

static int
op_add_dep(struct emu_op *op, struct emu_stream *t, uint64_t ticket)
{
	struct emu_dep *d = realloc(op->deps, (op->ndeps + 1) * sizeof(*d));

	if (!d)
		return -ENOMEM;
	op->deps = d;
	d[op->ndeps].s = t;
	d[op->ndeps].ticket = ticket;
	op->ndeps++;
	t->refs++;
	return 0;
}

static bool
op_deps_ready(const struct emu_op *op)
{
	for (size_t i = 0; i < op->ndeps; i++)
		if (op->deps[i].s->done < op->deps[i].ticket)
			return false;
	return true;
}

/*
 * Appends op to s, g.lock held, adding the legacy default stream's implicit
 * dependencies: work on the legacy stream waits for all earlier work on the
 * device's blocking streams, and work on a blocking stream waits for all
 * earlier work on the legacy stream (non-blocking streams skip both).
 * With `wait`, returns once op has finished, with s's sticky error.
 * Frees op on failure.
 */
cudaError_t
emu_enqueue(struct emu_stream *s, struct emu_op *op, bool wait)
{
	uint64_t ticket;
	int ret = 0;

	if (s->legacy) {
		for (struct emu_stream *t = g.streams; t && !ret; t = t->next_all)
			if (t != s && t->device == s->device && t->blocking && t->enqueued > t->done)
				ret = op_add_dep(op, t, t->enqueued);
	} else if (s->blocking) {
		struct emu_stream *l = g.legacy[s->device];

		if (l && l->enqueued > l->done)
			ret = op_add_dep(op, l, l->enqueued);
	}
	if (ret) {
		op_free(op);
		return cudaErrorMemoryAllocation;
	}
	op->seq = ++g.seq;
	op->ticket = ticket = ++s->enqueued;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_broadcast(&g.cond);
	if (!wait)
		return cudaSuccess;
	cudaError_t e;

	uint64_t since = emu_now_ns();

	s->refs++;
	while (s->done < ticket)
		emu_host_wait(since, "a synchronous copy");
	e = s->sticky;
	emu_stream_unref(s);
	return e;
}

static bool
op_touches_device(const struct emu_op *op, struct emu_range r)
{
	if (op->has_write && emu_overlap(op->write, r))
		return true;
	for (size_t i = 0; i < op->nreads; i++)
		if (emu_overlap(op->reads[i], r))
			return true;
	return false;
}

/* Whether pending work (enqueued, not finished) uses device bytes r. */
bool
emu_pending_device(struct emu_range r)
{
	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		for (struct emu_op *op = s->head; op; op = op->next)
			if (op_touches_device(op, r))
				return true;
	return false;
}

/* Whether a pending copy reads or writes host bytes r. */
bool
emu_pending_host(struct emu_range r)
{
	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		for (struct emu_op *op = s->head; op; op = op->next)
			if (op->has_host && emu_overlap(op->host, r))
				return true;
	return false;
}

static const char *
op_name(const struct emu_op *op)
{
	static const char *const dirs[] = { "copy host-to-host", "copy host-to-device",
		"copy device-to-host", "copy device-to-device" };

	switch (op->kind) {
	case EMU_OP_COPY: return dirs[op->dir];
	case EMU_OP_HOSTFN: return "host function";
	case EMU_OP_RECORD: return "event record";
	case EMU_OP_NOP: return "wait";
	}
	return "?";
}

/* For the report: what each stream still has to do, and what its next
 * operation waits for.  g.lock held. */
void
emu_describe_streams(FILE *f)
{
	for (struct emu_stream *s = g.streams; s; s = s->next_all) {
		const struct emu_op *op = s->head;

		if (!op)
			continue;
		fprintf(f, "  stream #%u%s%s: %llu pending, next: %s", s->id,
			s->legacy ? " (legacy default)" : s->implicit ? " (per-thread default)" : "",
			s->destroyed ? " (destroyed)" : "",
			(unsigned long long)(s->enqueued - s->done), op_name(op));
		for (size_t i = 0; i < op->ndeps; i++)
			if (op->deps[i].s->done < op->deps[i].ticket)
				fprintf(f, ", waiting for stream #%u to finish its operation %llu (it has finished %llu)",
					op->deps[i].s->id, (unsigned long long)op->deps[i].ticket,
					(unsigned long long)op->deps[i].s->done);
		fprintf(f, "\n");
	}
}

/* The checks when op starts on s; g.lock held.  Returns whether a hazard
 * was found (the stream's error is then set). */
static bool
check_conflicts(struct emu_stream *s, struct emu_op *x)
{
	bool found = false;

	if (!x->has_write && !x->nreads)
		return false;
	for (struct emu_stream *t = g.streams; t; t = t->next_all) {
		if (t == s)
			continue;
		/* A queue is in enqueue order: stop at the first later op. */
		for (struct emu_op *y = t->head; y && y->seq < x->seq; y = y->next) {
			enum rfemu_hazard kind = RFEMU_HAZARD_COUNT;
			struct emu_range at = { 0, 0 };

			if (x->has_write && y->has_write && emu_overlap(x->write, y->write)) {
				kind = RFEMU_HAZARD_WRITE_WRITE;
				at = x->write;
			}
			for (size_t i = 0; i < y->nreads && x->has_write; i++) {
				if (emu_overlap(x->write, y->reads[i])) {
					kind = RFEMU_HAZARD_OVERWRITE_IN_USE;
					at = x->write;
				}
			}
			for (size_t i = 0; i < x->nreads && y->has_write; i++) {
				if (emu_overlap(x->reads[i], y->write)) {
					kind = RFEMU_HAZARD_READ_BEFORE_READY;
					at = x->reads[i];
				}
			}
			if (kind == RFEMU_HAZARD_COUNT)
				continue;
			if (kind == RFEMU_HAZARD_OVERWRITE_IN_USE)
				emu_hazard(kind, "%s on stream #%u writes device bytes %p+%zu while a %s enqueued earlier on stream #%u that reads them has not finished (no event orders them)",
					op_name(x), s->id, (void *)at.lo, (size_t)(at.hi - at.lo), op_name(y), t->id);
			else if (kind == RFEMU_HAZARD_READ_BEFORE_READY)
				emu_hazard(kind, "%s on stream #%u reads device bytes %p+%zu while a %s enqueued earlier on stream #%u that writes them has not finished (no event orders them)",
					op_name(x), s->id, (void *)at.lo, (size_t)(at.hi - at.lo), op_name(y), t->id);
			else
				emu_hazard(kind, "%s on stream #%u writes device bytes %p+%zu while a %s enqueued earlier on stream #%u writes them too (no event orders them)",
					op_name(x), s->id, (void *)at.lo, (size_t)(at.hi - at.lo), op_name(y), t->id);
			found = true;
		}
	}
	if (found)
		s->sticky = cudaErrorIllegalState;
	return found;
}

static uint64_t
rng_next(struct emu_stream *s)
{
	/* xorshift64: per stream, so the jitter is reproducible per seed. */
	uint64_t x = s->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	s->rng = x;
	return x;
}

/* Runs a copy; g.lock held on entry and exit, released while the copy
 * takes its simulated time and moves the bytes. */
static void
exec_copy(struct emu_stream *s, struct emu_op *op)
{
	uint64_t now = emu_now_ns(), start = now, dur = 0, end, sum = 0;
	double bw;

	bw = op->dir == EMU_D2D ? g.cfg.d2d_bw : op->dir == EMU_H2H ? 0 : g.cfg.bw;
	if (bw > 0)
		dur = (uint64_t)((double)op->n / bw * 1e9);
	if (op->dir != EMU_H2H)
		dur += g.cfg.latency_ns;
	if (g.cfg.jitter_ns)
		dur += rng_next(s) % (g.cfg.jitter_ns + 1);
	else if (g.cfg.jitter > 0)
		dur += (uint64_t)((double)dur * g.cfg.jitter * (double)(rng_next(s) >> 11) / 9007199254740992.0);
	/* One copy engine per direction, as on a T4: copies in the same
	 * direction on different streams take turns, they do not overlap. */
	if (op->dir == EMU_H2D || op->dir == EMU_D2H) {
		int e = op->dir == EMU_H2D ? 0 : 1;

		if (g.engine_free_ns[e] > start)
			start = g.engine_free_ns[e];
		g.engine_free_ns[e] = start + dur;
	}
	end = start + dur;
	EMU_UNLOCK();

	if (end > now) {
		struct timespec ts = {
			.tv_sec = (time_t)(end / 1000000000u),
			.tv_nsec = (long)(end % 1000000000u),
		};

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	/* The bytes move at the end of the copy's time, so the whole window
	 * from enqueue to completion is one in which changing the source is
	 * caught.  The check hashes what actually arrived. */
	memmove(op->dst_mem, op->src_mem, op->n);
	if (op->check_sum)
		sum = XXH3_64bits(op->dst_mem, op->n);

	EMU_LOCK();
	if (op->check_sum && sum != op->sum) {
		emu_hazard(RFEMU_HAZARD_SOURCE_MODIFIED,
			"%s of %zu bytes from %p on stream #%u: the source changed between cudaMemcpyAsync and the copy",
			op_name(op), op->n, op->src, s->id);
		s->sticky = cudaErrorIllegalState;
	}
	g.c.copies++;
	g.c.bytes_copied += op->n;
	if (op->dir == EMU_H2D)
		g.c.bytes_h2d += op->n;
	else if (op->dir == EMU_D2H)
		g.c.bytes_d2h += op->n;
	else if (op->dir == EMU_D2D)
		g.c.bytes_d2d += op->n;
}

static void *
worker_main(void *arg)
{
	struct emu_stream *s = arg;

	EMU_LOCK();
	for (;;) {
		struct emu_op *op;

		while (!s->head && !s->destroyed)
			pthread_cond_wait(&g.cond, &g.lock);
		if (!s->head)
			break;
		op = s->head;
		while (!op_deps_ready(op))
			pthread_cond_wait(&g.cond, &g.lock);
		check_conflicts(s, op);

		switch (op->kind) {
		case EMU_OP_COPY:
			exec_copy(s, op);
			break;
		case EMU_OP_HOSTFN:
			EMU_UNLOCK();
			emu_tls_in_host_func = true;
			op->fn(op->arg);
			emu_tls_in_host_func = false;
			EMU_LOCK();
			g.c.host_funcs++;
			break;
		case EMU_OP_RECORD: {
			struct emu_event *ev = op->ev;

			/* Only the latest record of an event sets its time. */
			if (ev->gen == op->gen) {
				ev->time_ns = emu_now_ns();
				ev->err = s->sticky;
			}
			event_unref(ev);
			break;
		}
		case EMU_OP_NOP:
			break;
		}
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->done = op->ticket;
		op_free(op);
		pthread_cond_broadcast(&g.cond);
	}
	s->exited = true;
	pthread_cond_broadcast(&g.cond);
	EMU_UNLOCK();
	return NULL;
}

/* --- stream API ---------------------------------------------------------- */

EMU_EXPORT cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	struct emu_stream *s;

	EMU_ENTER();
	if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
		return emu_ret(cudaErrorInvalidValue);
	emu_reap();
	EMU_LOCK();
	s = stream_new(emu_tls_device, flags, false);
	EMU_UNLOCK();
	if (!s)
		return emu_ret(cudaErrorMemoryAllocation);
	*pStream = (cudaStream_t)s;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaStreamCreate(cudaStream_t *pStream)
{
	return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

EMU_EXPORT cudaError_t
cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	/* Priorities change nothing the loader can observe here. */
	return cudaStreamCreateWithFlags(pStream, flags);
}

EMU_EXPORT cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
	struct emu_stream *s;
	cudaError_t e;

	EMU_ENTER();
	EMU_LOCK();
	if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
		EMU_UNLOCK();
		return emu_ret(cudaErrorInvalidResourceHandle);
	}
	s = emu_resolve_stream(stream, &e);
	if (!s) {
		EMU_UNLOCK();
		return emu_ret(e);
	}
	/* cudart returns at once and lets pending work finish; so does the
	 * emulator (pending copies keep their ranges "in use").  An idle
	 * stream's worker is joined now, so a clean close leaves no thread
	 * behind; a busy one's later, once drained.  The handle's reference
	 * goes; the worker's keeps the stream until the join. */
	s->destroyed = true;
	emu_stream_unref(s);
	pthread_cond_broadcast(&g.cond);
	EMU_UNLOCK();
	emu_reap();
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaStreamSynchronize(cudaStream_t stream)
{
	struct emu_stream *s;
	cudaError_t e;
	uint64_t target, since;

	EMU_ENTER();
	EMU_LOCK();
	s = emu_resolve_stream(stream, &e);
	if (!s) {
		EMU_UNLOCK();
		return emu_ret(e);
	}
	if (s->legacy) {
		/* Synchronizing the legacy stream waits for the blocking
		 * streams' earlier work too: a barrier op carries those
		 * dependencies. */
		struct emu_op *op = emu_op_new(EMU_OP_NOP);

		if (!op) {
			EMU_UNLOCK();
			return emu_ret(cudaErrorMemoryAllocation);
		}
		e = emu_enqueue(s, op, false);
		if (e != cudaSuccess) {
			EMU_UNLOCK();
			return emu_ret(e);
		}
	}
	target = s->enqueued;
	s->refs++;
	since = emu_now_ns();
	while (s->done < target)
		emu_host_wait(since, "cudaStreamSynchronize");
	e = s->sticky;
	emu_stream_unref(s);
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaStreamQuery(cudaStream_t stream)
{
	struct emu_stream *s;
	cudaError_t e;

	EMU_ENTER();
	EMU_LOCK();
	s = emu_resolve_stream(stream, &e);
	if (s)
		e = s->done < s->enqueued ? cudaErrorNotReady : s->sticky;
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaDeviceSynchronize(void)
{
	int dev = emu_tls_device;
	cudaError_t e = cudaSuccess;
	bool again = true;

	EMU_ENTER();
	EMU_LOCK();
	/* Wait until every stream of the device has finished what it had
	 * when this call began; streams are rescanned after each wake, so a
	 * stream freed meanwhile is never touched. */
	{
		size_t n = 0, i = 0;
		struct emu_stream **ss;
		uint64_t *tk;

		for (struct emu_stream *s = g.streams; s; s = s->next_all)
			n++;
		ss = calloc(n ? n : 1, sizeof(*ss));
		tk = calloc(n ? n : 1, sizeof(*tk));
		if (!ss || !tk) {
			EMU_UNLOCK();
			free(ss);
			free(tk);
			return emu_ret(cudaErrorMemoryAllocation);
		}
		for (struct emu_stream *s = g.streams; s; s = s->next_all) {
			if (s->device != dev)
				continue;
			s->refs++;
			ss[i] = s;
			tk[i++] = s->enqueued;
		}
		uint64_t since = emu_now_ns();

		while (again) {
			again = false;
			for (size_t j = 0; j < i; j++)
				if (ss[j]->done < tk[j])
					again = true;
			if (again)
				emu_host_wait(since, "cudaDeviceSynchronize");
		}
		for (size_t j = 0; j < i; j++) {
			/* Errors are sticky per stream here (a GPU makes them
			 * context-wide): those of streams still alive count. */
			if (!ss[j]->destroyed && ss[j]->sticky != cudaSuccess && e == cudaSuccess)
				e = ss[j]->sticky;
			emu_stream_unref(ss[j]);
		}
		free(ss);
		free(tk);
	}
	EMU_UNLOCK();
	emu_reap();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	struct emu_stream *s;
	struct emu_op *op;
	cudaError_t e;

	EMU_ENTER();
	if (!fn)
		return emu_ret(cudaErrorInvalidValue);
	op = emu_op_new(EMU_OP_HOSTFN);
	if (!op)
		return emu_ret(cudaErrorMemoryAllocation);
	op->fn = fn;
	op->arg = userData;
	EMU_LOCK();
	s = emu_resolve_stream(stream, &e);
	if (!s) {
		EMU_UNLOCK();
		free(op);
		return emu_ret(e);
	}
	/* The ranges declared by rfemu_host_func_reads() go with this
	 * function: they are what it reads, until it returns. */
	op->reads = s->tags;
	op->nreads = s->ntags;
	s->tags = NULL;
	s->ntags = s->cap_tags = 0;
	e = emu_enqueue(s, op, false);
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT int
rfemu_host_func_reads(void *stream, const void *dev_ptr, size_t len)
{
	struct emu_stream *s;
	cudaError_t e;
	bool partial;

	emu_init_once();
	if (!dev_ptr || !len)
		return cudaErrorInvalidValue;
	EMU_LOCK();
	s = emu_resolve_stream((cudaStream_t)stream, &e);
	if (s && !emu_find_block(g.dev_allocs, dev_ptr, len, &partial))
		e = cudaErrorInvalidValue;
	if (e == cudaSuccess && s->ntags == s->cap_tags) {
		size_t cap = s->cap_tags ? 2 * s->cap_tags : 4;
		struct emu_range *t = realloc(s->tags, cap * sizeof(*t));

		if (t) {
			s->tags = t;
			s->cap_tags = cap;
		} else {
			e = cudaErrorMemoryAllocation;
		}
	}
	if (e == cudaSuccess) {
		s->tags[s->ntags].lo = (uintptr_t)dev_ptr;
		s->tags[s->ntags].hi = (uintptr_t)dev_ptr + len;
		s->ntags++;
	}
	EMU_UNLOCK();
	return e;
}

/* --- events -------------------------------------------------------------- */

static struct emu_event *
resolve_event(cudaEvent_t h, cudaError_t *err)
{
	for (struct emu_event *e = g.events; e; e = e->next_all) {
		if ((cudaEvent_t)e == h && !e->destroyed) {
			*err = cudaSuccess;
			return e;
		}
	}
	emu_hazard(RFEMU_HAZARD_BAD_HANDLE, "event %p was destroyed or never created", (void *)h);
	*err = cudaErrorInvalidResourceHandle;
	return NULL;
}

static void
event_unref(struct emu_event *ev)
{
	if (--ev->refs > 0)
		return;
	for (struct emu_event **pp = &g.events; *pp; pp = &(*pp)->next_all) {
		if (*pp == ev) {
			*pp = ev->next_all;
			break;
		}
	}
	if (ev->s)
		emu_stream_unref(ev->s);
	free(ev);
}

EMU_EXPORT cudaError_t
cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct emu_event *ev;

	EMU_ENTER();
	if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming |
			cudaEventInterprocess)))
		return emu_ret(cudaErrorInvalidValue);
	if (flags & cudaEventInterprocess)
		return emu_ret(cudaErrorNotSupported);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return emu_ret(cudaErrorMemoryAllocation);
	ev->flags = flags;
	ev->refs = 1;
	EMU_LOCK();
	ev->id = ++g.next_id;
	ev->next_all = g.events;
	g.events = ev;
	EMU_UNLOCK();
	*event = (cudaEvent_t)ev;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

EMU_EXPORT cudaError_t
cudaEventDestroy(cudaEvent_t event)
{
	struct emu_event *ev;
	cudaError_t e;

	EMU_ENTER();
	EMU_LOCK();
	ev = resolve_event(event, &e);
	if (ev) {
		/* A pending record keeps the memory until it has run. */
		ev->destroyed = true;
		event_unref(ev);
	}
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	struct emu_event *ev;
	struct emu_stream *s;
	struct emu_op *op;
	cudaError_t e;

	EMU_ENTER();
	op = emu_op_new(EMU_OP_RECORD);
	if (!op)
		return emu_ret(cudaErrorMemoryAllocation);
	EMU_LOCK();
	ev = resolve_event(event, &e);
	s = ev ? emu_resolve_stream(stream, &e) : NULL;
	if (!s) {
		EMU_UNLOCK();
		free(op);
		return emu_ret(e);
	}
	op->ev = ev;
	op->gen = ++ev->gen;
	ev->refs++;
	e = emu_enqueue(s, op, false);
	if (e != cudaSuccess) {
		ev->refs--;
		EMU_UNLOCK();
		return emu_ret(e);
	}
	/* From now on, waits and queries refer to this record. */
	s->refs++;
	if (ev->s)
		emu_stream_unref(ev->s);
	ev->s = s;
	ev->ticket = s->enqueued;
	ev->recorded = true;
	ev->time_ns = 0;
	ev->err = cudaSuccess;
	EMU_UNLOCK();
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	if (flags & ~(unsigned)cudaEventRecordExternal)
		return emu_ret(cudaErrorInvalidValue);
	return cudaEventRecord(event, stream);
}

static bool
event_done(const struct emu_event *ev)
{
	/* An event never recorded counts as complete, as in cudart. */
	return !ev->recorded || ev->s->done >= ev->ticket;
}

EMU_EXPORT cudaError_t
cudaEventQuery(cudaEvent_t event)
{
	struct emu_event *ev;
	cudaError_t e;

	EMU_ENTER();
	EMU_LOCK();
	ev = resolve_event(event, &e);
	if (ev)
		e = event_done(ev) ? ev->err : cudaErrorNotReady;
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaEventSynchronize(cudaEvent_t event)
{
	struct emu_event *ev;
	cudaError_t e;

	EMU_ENTER();
	EMU_LOCK();
	ev = resolve_event(event, &e);
	if (ev) {
		uint64_t since = emu_now_ns();

		ev->refs++;
		while (!event_done(ev))
			emu_host_wait(since, "cudaEventSynchronize");
		e = ev->err;
		event_unref(ev);
	}
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	struct emu_event *a, *b;
	cudaError_t e;

	EMU_ENTER();
	if (!ms)
		return emu_ret(cudaErrorInvalidValue);
	EMU_LOCK();
	a = resolve_event(start, &e);
	b = a ? resolve_event(end, &e) : NULL;
	if (b) {
		if (!a->recorded || !b->recorded ||
		    (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming))
			e = cudaErrorInvalidResourceHandle;
		else if (!event_done(a) || !event_done(b))
			e = cudaErrorNotReady;
		else
			*ms = (float)(((double)b->time_ns - (double)a->time_ns) / 1e6);
	}
	EMU_UNLOCK();
	return emu_ret(e);
}

/* CUDA 12.8 added cudaEventElapsedTime_v2 (same contract). */
EMU_EXPORT cudaError_t cudaEventElapsedTime_v2(float *ms, cudaEvent_t start, cudaEvent_t end)
	__attribute__((alias("cudaEventElapsedTime")));

EMU_EXPORT cudaError_t
cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	struct emu_event *ev;
	struct emu_stream *s;
	struct emu_op *op;
	cudaError_t e;

	EMU_ENTER();
	if (flags & ~(unsigned)cudaEventWaitExternal)
		return emu_ret(cudaErrorInvalidValue);
	op = emu_op_new(EMU_OP_NOP);
	if (!op)
		return emu_ret(cudaErrorMemoryAllocation);
	EMU_LOCK();
	s = emu_resolve_stream(stream, &e);
	ev = s ? resolve_event(event, &e) : NULL;
	if (!ev) {
		EMU_UNLOCK();
		free(op);
		return emu_ret(e);
	}
	/* The wait is on the record the event has now; a later record of the
	 * same event does not move it (cudart's semantics).  Waiting on an
	 * event never recorded is a no-op. */
	if (ev->recorded && op_add_dep(op, ev->s, ev->ticket)) {
		EMU_UNLOCK();
		free(op);
		return emu_ret(cudaErrorMemoryAllocation);
	}
	e = emu_enqueue(s, op, false);
	EMU_UNLOCK();
	return emu_ret(e);
}

/* --- copies -------------------------------------------------------------- */

static void
note_pageable_once(void)
{
	if (!g.pageable_noted) {
		g.pageable_noted = true;
		fprintf(stderr, "cudart-emulator: note: a copy with a pageable host side ran synchronously (counted in pageable_copies)\n");
	}
}

static cudaError_t
do_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t stream, bool sync_api)
{
	struct emu_block *db, *sb;
	struct emu_stream *s;
	struct emu_op *op;
	bool dpart, spart, pinned = true, wait;
	enum emu_dir dir;
	cudaError_t e;

	if (!dst || !src)
		return cudaErrorInvalidValue;
	op = emu_op_new(EMU_OP_COPY);
	if (!op)
		return cudaErrorMemoryAllocation;
	EMU_LOCK();
	s = emu_resolve_stream(stream, &e);
	if (!s)
		goto fail;
	if (count == 0) {
		EMU_UNLOCK();
		free(op);
		return cudaSuccess;
	}
	/* Unified addressing: which side is device memory is known from the
	 * pointers; a kind that contradicts them, or a range that runs past
	 * the end of an allocation, is refused here rather than faulting on
	 * the device later. */
	db = emu_find_block(g.dev_allocs, dst, count, &dpart);
	sb = emu_find_block(g.dev_allocs, src, count, &spart);
	e = cudaErrorInvalidValue;
	if (dpart || spart)
		goto fail;
	/* A device address in no live allocation (freed, or never one) is
	 * not host memory either: refused, as cudart refuses it. */
	if ((!db && emu_in_device_space(dst, count)) || (!sb && emu_in_device_space(src, count)))
		goto fail;
	switch (kind) {
	case cudaMemcpyHostToHost: if (db || sb) goto fail; break;
	case cudaMemcpyHostToDevice: if (!db || sb) goto fail; break;
	case cudaMemcpyDeviceToHost: if (db || !sb) goto fail; break;
	case cudaMemcpyDeviceToDevice: if (!db || !sb) goto fail; break;
	case cudaMemcpyDefault: break;
	default:
		e = cudaErrorInvalidMemcpyDirection;
		goto fail;
	}
	dir = db ? (sb ? EMU_D2D : EMU_H2D) : (sb ? EMU_D2H : EMU_H2H);

	op->dst = dst;
	op->src = src;
	op->dst_mem = db ? emu_dev_mem(db, dst) : dst;
	op->src_mem = sb ? emu_dev_mem(sb, src) : src;
	op->n = count;
	op->dir = dir;
	if (sb) {
		op->reads = malloc(sizeof(*op->reads));
		if (!op->reads) {
			e = cudaErrorMemoryAllocation;
			goto fail;
		}
		op->reads[0].lo = (uintptr_t)src;
		op->reads[0].hi = (uintptr_t)src + count;
		op->nreads = 1;
	}
	if (db) {
		op->write.lo = (uintptr_t)dst;
		op->write.hi = (uintptr_t)dst + count;
		op->has_write = true;
	}
	if (dir == EMU_H2D || dir == EMU_H2H) {
		op->host.lo = (uintptr_t)src;
		op->host.hi = (uintptr_t)src + count;
		op->has_host = true;
		op->check_sum = true;
		op->sum = XXH3_64bits(src, count);
	} else if (dir == EMU_D2H) {
		op->host.lo = (uintptr_t)dst;
		op->host.hi = (uintptr_t)dst + count;
		op->has_host = true;
	}
	if (dir == EMU_H2D)
		pinned = emu_host_is_pinned(src, count);
	else if (dir == EMU_D2H)
		pinned = emu_host_is_pinned(dst, count);

	/* cudart: cudaMemcpy returns when the copy is done, except
	 * device-to-device; cudaMemcpyAsync with a pageable host side returns
	 * only once the pageable memory has been consumed (staged), i.e. it
	 * is synchronous for the caller; host-to-host runs on the CPU. */
	wait = sync_api ? dir != EMU_D2D : (!pinned || dir == EMU_H2H);
	if (!pinned) {
		g.c.pageable_copies++;
		if (dir == EMU_H2D)
			g.c.pageable_h2d++;
		note_pageable_once();
	}
	e = emu_enqueue(s, op, wait);
	EMU_UNLOCK();
	return e;
fail:
	EMU_UNLOCK();
	free(op->reads);
	free(op);
	return e;
}

EMU_EXPORT cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t stream)
{
	EMU_ENTER();
	return emu_ret(do_copy(dst, src, count, kind, stream, false));
}

EMU_EXPORT cudaError_t
cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	EMU_ENTER();
	return emu_ret(do_copy(dst, src, count, kind, NULL, true));
}

/*
 * The per-thread default stream entry points: a program compiled with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (nvcc --default-stream per-thread)
 * calls these names, and the null stream then means cudaStreamPerThread.
 */
static cudaStream_t
ptsz(cudaStream_t s)
{
	return s ? s : cudaStreamPerThread;
}

EMU_EXPORT cudaError_t
cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	EMU_ENTER();
	return emu_ret(do_copy(dst, src, count, kind, cudaStreamPerThread, true));
}

EMU_EXPORT cudaError_t
cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	cudaStream_t stream)
{
	return cudaMemcpyAsync(dst, src, count, kind, ptsz(stream));
}

EMU_EXPORT cudaError_t
cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	return cudaStreamSynchronize(ptsz(stream));
}

EMU_EXPORT cudaError_t
cudaStreamQuery_ptsz(cudaStream_t stream)
{
	return cudaStreamQuery(ptsz(stream));
}

EMU_EXPORT cudaError_t
cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	return cudaStreamWaitEvent(ptsz(stream), event, flags);
}

EMU_EXPORT cudaError_t
cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	return cudaEventRecord(event, ptsz(stream));
}

EMU_EXPORT cudaError_t
cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	return cudaEventRecordWithFlags(event, ptsz(stream), flags);
}

EMU_EXPORT cudaError_t
cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	return cudaLaunchHostFunc(ptsz(stream), fn, userData);
}
