/* SPDX-License-Identifier: MIT */
/*
 * Description: the emulator's streams behave like a GPU's: work is
 * asynchronous (a host function on stream A runs while a long copy on
 * stream B is still in flight; cudaMemcpyAsync from pinned memory returns
 * before its copy ends), ordered within a stream (FIFO), ordered across
 * streams only by events (cudaStreamWaitEvent really waits), the legacy
 * default stream synchronizes with blocking streams and not with
 * non-blocking ones, events report completion and elapsed time, and a
 * stream destroyed with work pending finishes that work.
 */
#include <stdint.h>

#include "emu-test.h"

/* Exported for programs built with CUDA_API_PER_THREAD_DEFAULT_STREAM. */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);

static void
raise_flag(void *p)
{
	flag_set(p, 1);
}

/* A long copy on B; a host function on A runs (and is seen to run) while
 * it is still in flight. */
static void
test_async(void)
{
	static struct flag ran = FLAG_INIT;
	struct rfemu_counters c0, c;
	cudaStream_t a, b;
	cudaEvent_t done_b;
	const size_t n = 256 << 10;
	char *pin, *dev;

	OK(cudaStreamCreate(&a));
	OK(cudaStreamCreate(&b));
	OK(cudaEventCreate(&done_b));
	OK(cudaMallocHost((void **)&pin, n));
	OK(cudaMalloc((void **)&dev, n));
	memset(pin, 0x5a, n);

	/* 256 KiB at 1 MB/s: a quarter of a second. */
	SET("RINGFEED_EMU_BW", "1M");
	SET("RINGFEED_EMU_JITTER", "0");
	c0 = counters();
	OK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, b));
	OK(cudaEventRecord(done_b, b));
	/* The call returned with the copy still queued or running. */
	EXPECT(cudaStreamQuery(b), cudaErrorNotReady);
	EXPECT(cudaGetLastError(), cudaSuccess);	/* not-ready is no error */
	OK(cudaLaunchHostFunc(a, raise_flag, &ran));
	CHECK(flag_wait(&ran, 1));
	/* A's host function has run; B's copy has not finished. */
	EXPECT(cudaEventQuery(done_b), cudaErrorNotReady);
	c = counters();
	CHECK(c.copies == c0.copies);
	OK(cudaEventSynchronize(done_b));
	OK(cudaEventQuery(done_b));
	OK(cudaStreamQuery(b));
	c = counters();
	CHECK(c.copies == c0.copies + 1);
	SET("RINGFEED_EMU_BW", "12G");
	SET("RINGFEED_EMU_JITTER", "0.1");

	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	OK(cudaEventDestroy(done_b));
	OK(cudaStreamDestroy(a));
	OK(cudaStreamDestroy(b));
}

/* FIFO: host functions and copies on one stream run in enqueue order; a
 * host function reading a device buffer sees the copy enqueued before it. */
#define FIFO_N 40

struct fifo_log {
	pthread_mutex_t lock;
	int order[FIFO_N];
	int seen[FIFO_N];
	int next;
	const unsigned char *dev;
};

struct fifo_item {
	struct fifo_log *log;
	int i;
};

static void
fifo_step(void *p)
{
	struct fifo_item *it = p;

	pthread_mutex_lock(&it->log->lock);
	it->log->order[it->log->next++] = it->i;
	/* The "training step" reads device memory as a kernel would: through
	 * the emulator's view of it (the device pointer itself faults). */
	it->log->seen[it->i] = it->log->dev[0];
	pthread_mutex_unlock(&it->log->lock);
}

static void
test_fifo(void)
{
	static struct fifo_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	static struct fifo_item items[FIFO_N];
	struct rfemu_counters c;
	cudaStream_t s;
	unsigned char *pin, *dev;

	SET("RINGFEED_EMU_JITTER", "2");	/* copies of very uneven length */
	SET("RINGFEED_EMU_BW", "200M");
	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMallocHost((void **)&pin, FIFO_N * 4096));
	OK(cudaMalloc((void **)&dev, 4096));
	log.dev = rfemu_device_view(dev, 4096);
	CHECK(log.dev != NULL);
	for (int i = 0; i < FIFO_N; i++) {
		memset(pin + (size_t)i * 4096, i + 1, 4096);
		items[i].log = &log;
		items[i].i = i;
		/* Odd steps copy first: the step must see its own copy. */
		if (i % 2)
			OK(cudaMemcpyAsync(dev, pin + (size_t)i * 4096, 4096, cudaMemcpyHostToDevice, s));
		CHECK(rfemu_host_func_reads(s, dev, 4096) == 0);
		OK(cudaLaunchHostFunc(s, fifo_step, &items[i]));
	}
	OK(cudaStreamSynchronize(s));
	pthread_mutex_lock(&log.lock);
	CHECK(log.next == FIFO_N);
	for (int i = 0; i < FIFO_N; i++) {
		CHECK(log.order[i] == i);
		if (i % 2)
			CHECK(log.seen[i] == i + 1);
		else if (i > 0)
			CHECK(log.seen[i] == i);	/* the previous step's copy */
	}
	pthread_mutex_unlock(&log.lock);
	c = counters();
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "fifo");
	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	OK(cudaStreamDestroy(s));
	SET("RINGFEED_EMU_JITTER", "0.1");
	SET("RINGFEED_EMU_BW", "12G");
}

/* cudaStreamWaitEvent: A waits for an event recorded after a copy on B; B
 * is held by a gate, so A's reader cannot run until the test opens it, and
 * then sees the copied bytes. */
struct reader {
	const unsigned char *dev;
	struct flag ran;
	int value;
};

static void
read_first_byte(void *p)
{
	struct reader *r = p;

	r->value = r->dev[0];
	flag_set(&r->ran, 1);
}

static void
test_wait_event(void)
{
	static struct gate gate = GATE_INIT;
	static struct reader rd = { .ran = FLAG_INIT };
	struct rfemu_counters c;
	cudaStream_t a, b;
	cudaEvent_t ready;
	unsigned char *pin, *dev;

	OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
	OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
	OK(cudaMallocHost((void **)&pin, 4096));
	OK(cudaMalloc((void **)&dev, 4096));
	memset(pin, 7, 4096);
	rd.dev = rfemu_device_view(dev, 4096);
	CHECK(rd.dev != NULL);

	OK(cudaLaunchHostFunc(b, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, 4096, cudaMemcpyHostToDevice, b));
	OK(cudaEventRecord(ready, b));
	OK(cudaStreamWaitEvent(a, ready, 0));
	CHECK(rfemu_host_func_reads(a, dev, 4096) == 0);
	OK(cudaLaunchHostFunc(a, read_first_byte, &rd));

	/* Re-recording the event now does not release A: the wait holds on
	 * to the record it saw. */
	OK(cudaEventRecord(ready, a));
	sleep_ms(100);
	CHECK(flag_get(&rd.ran) == 0);
	EXPECT(cudaStreamQuery(a), cudaErrorNotReady);
	EXPECT(cudaEventQuery(ready), cudaErrorNotReady);
	gate_open(&gate);
	OK(cudaStreamSynchronize(a));
	CHECK(flag_get(&rd.ran) == 1);
	CHECK(rd.value == 7);
	OK(cudaEventQuery(ready));
	c = counters();
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "wait-event");

	/* Waiting on an event never recorded is a no-op. */
	{
		cudaEvent_t never;

		OK(cudaEventCreate(&never));
		OK(cudaEventQuery(never));
		OK(cudaStreamWaitEvent(a, never, 0));
		OK(cudaStreamSynchronize(a));
		OK(cudaEventSynchronize(never));
		OK(cudaEventDestroy(never));
	}
	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	OK(cudaEventDestroy(ready));
	OK(cudaStreamDestroy(a));
	OK(cudaStreamDestroy(b));
}

/* The legacy default stream: synchronous cudaMemcpy waits for earlier work
 * on blocking streams, not on non-blocking ones. */
struct opener {
	struct gate *gate;
	struct flag opened;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	long delay_ms;
};

/* Opens the gate after delay_ms, unless told to stop first. */
static void *
opener_main(void *p)
{
	struct opener *o = p;
	struct timespec dl;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += o->delay_ms / 1000;
	dl.tv_nsec += (o->delay_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&o->lock);
	while (!o->stop && pthread_cond_timedwait(&o->cond, &o->lock, &dl) == 0)
		;
	stop = o->stop;
	pthread_mutex_unlock(&o->lock);
	if (!stop) {
		flag_set(&o->opened, 1);
		gate_open(o->gate);
	}
	return NULL;
}

static void
opener_stop(struct opener *o)
{
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

static void
test_legacy_stream(void)
{
	static struct gate g1 = GATE_INIT, g2 = GATE_INIT;
	static struct opener o1 = { .opened = FLAG_INIT, .lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER };
	static struct opener o2 = { .opened = FLAG_INIT, .lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER };
	cudaStream_t blk, nb;
	pthread_t th;
	char *pin, *dev;

	OK(cudaStreamCreate(&blk));
	OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
	OK(cudaMallocHost((void **)&pin, 4096));
	OK(cudaMalloc((void **)&dev, 4096));

	/* Blocking stream held: cudaMemcpy returns only after the gate. */
	OK(cudaLaunchHostFunc(blk, gate_wait, &g1));
	o1.gate = &g1;
	o1.delay_ms = 100;
	CHECK(pthread_create(&th, NULL, opener_main, &o1) == 0);
	OK(cudaMemcpy(dev, pin, 4096, cudaMemcpyHostToDevice));
	CHECK(flag_get(&o1.opened) == 1);
	pthread_join(th, NULL);

	/* Non-blocking stream held: cudaMemcpy does not wait for it (were it
	 * to, the opener would free it only after 10 s, and `opened` would
	 * read 1). */
	OK(cudaLaunchHostFunc(nb, gate_wait, &g2));
	o2.gate = &g2;
	o2.delay_ms = 10000;
	CHECK(pthread_create(&th, NULL, opener_main, &o2) == 0);
	OK(cudaMemcpy(dev, pin, 4096, cudaMemcpyHostToDevice));
	OK(cudaStreamSynchronize(NULL));
	OK(cudaStreamSynchronize(cudaStreamLegacy));
	CHECK(flag_get(&o2.opened) == 0);
	EXPECT(cudaStreamQuery(nb), cudaErrorNotReady);
	gate_open(&g2);
	OK(cudaStreamSynchronize(nb));
	opener_stop(&o2);
	pthread_join(th, NULL);

	/* The other way round: work on a blocking stream waits for earlier
	 * work on the legacy stream; work on a non-blocking one does not. */
	{
		static struct gate g3 = GATE_INIT;
		static struct flag on_blk = FLAG_INIT, on_nb = FLAG_INIT;

		OK(cudaLaunchHostFunc(NULL, gate_wait, &g3));
		OK(cudaLaunchHostFunc(blk, raise_flag, &on_blk));
		OK(cudaLaunchHostFunc(nb, raise_flag, &on_nb));
		CHECK(flag_wait(&on_nb, 1));
		sleep_ms(100);
		CHECK(flag_get(&on_blk) == 0);
		EXPECT(cudaStreamQuery(blk), cudaErrorNotReady);
		gate_open(&g3);
		OK(cudaStreamSynchronize(blk));
		CHECK(flag_get(&on_blk) == 1);
	}

	/* The per-thread default stream works as a stream of its own, and
	 * the _ptsz/_ptds entry points take the null stream to mean it. */
	OK(cudaMemcpyAsync(dev, pin, 4096, cudaMemcpyHostToDevice, cudaStreamPerThread));
	OK(cudaStreamSynchronize(cudaStreamPerThread));
	{
		static struct gate g4 = GATE_INIT;

		OK(cudaLaunchHostFunc_ptsz(NULL, gate_wait, &g4));
		EXPECT(cudaStreamQuery_ptsz(NULL), cudaErrorNotReady);
		EXPECT(cudaStreamQuery(cudaStreamPerThread), cudaErrorNotReady);
		OK(cudaStreamQuery(NULL));	/* the legacy stream is idle */
		gate_open(&g4);
		OK(cudaStreamSynchronize_ptsz(NULL));
		OK(cudaMemcpy_ptds(dev, pin, 4096, cudaMemcpyHostToDevice));
		OK(cudaStreamQuery(cudaStreamPerThread));
	}

	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	OK(cudaStreamDestroy(blk));
	OK(cudaStreamDestroy(nb));
	EXPECT(cudaStreamDestroy(NULL), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
}

/* Events: timing follows the simulated copy time; the documented errors. */
static void
test_events(void)
{
	static struct gate gate = GATE_INIT;
	cudaStream_t s;
	cudaEvent_t e0, e1, nt;
	float ms = -1;
	char *pin, *dev;
	const size_t n = 1 << 20;

	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&e0));
	OK(cudaEventCreateWithFlags(&e1, cudaEventBlockingSync));
	OK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
	EXPECT(cudaEventCreateWithFlags(&nt, 0x80), cudaErrorInvalidValue);
	OK(cudaMallocHost((void **)&pin, n));
	OK(cudaMalloc((void **)&dev, n));

	EXPECT(cudaEventElapsedTime(&ms, e0, e1), cudaErrorInvalidResourceHandle);	/* never recorded */
	SET("RINGFEED_EMU_BW", "100M");	/* 1 MiB: at least 10 ms */
	OK(cudaLaunchHostFunc(s, gate_wait, &gate));
	OK(cudaEventRecord(e0, s));
	OK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, s));
	OK(cudaEventRecord(e1, s));
	OK(cudaEventRecord(nt, s));
	EXPECT(cudaEventElapsedTime(&ms, e0, e1), cudaErrorNotReady);
	gate_open(&gate);
	OK(cudaEventSynchronize(e1));
	OK(cudaEventElapsedTime(&ms, e0, e1));
	/* A bound the emulator guarantees (it sleeps out the copy's time),
	 * not a measurement of the machine. */
	CHECK(ms >= 10.0f);
	EXPECT(cudaEventElapsedTime(&ms, e0, nt), cudaErrorInvalidResourceHandle);
	SET("RINGFEED_EMU_BW", "12G");

	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	OK(cudaEventDestroy(e0));
	OK(cudaEventDestroy(e1));
	OK(cudaEventDestroy(nt));
	OK(cudaStreamDestroy(s));
	(void)cudaGetLastError();
}

/* cudaStreamDestroy returns at once; the pending work still runs;
 * cudaDeviceSynchronize waits for it; the worker is then gone. */
static void
test_destroy_pending(void)
{
	static struct gate gate = GATE_INIT;
	static struct flag ran = FLAG_INIT;
	struct rfemu_counters c;
	cudaStream_t s;
	cudaEvent_t ev;

	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&ev));
	OK(cudaLaunchHostFunc(s, gate_wait, &gate));
	OK(cudaLaunchHostFunc(s, raise_flag, &ran));
	OK(cudaEventRecord(ev, s));
	OK(cudaStreamDestroy(s));
	/* An event whose record is pending may be destroyed too. */
	OK(cudaEventDestroy(ev));
	c = counters();
	CHECK(c.live_streams == 0 && c.live_events == 0);
	CHECK(c.pending_ops == 3);
	CHECK(flag_get(&ran) == 0);
	gate_open(&gate);
	OK(cudaDeviceSynchronize());
	CHECK(flag_get(&ran) == 1);
	c = counters();
	CHECK(c.pending_ops == 0);
}

int
main(void)
{
	struct rfemu_counters c;
	uint64_t implicit_threads;

	test_async();
	test_fifo();
	test_wait_event();
	test_events();
	test_destroy_pending();
	c = counters();
	/* Destroyed streams leave no worker thread behind. */
	CHECK(c.worker_threads == 0);
	test_legacy_stream();
	c = counters();
	/* Only the implicit streams' workers remain (legacy, per-thread). */
	implicit_threads = c.worker_threads;
	CHECK(implicit_threads == 2);
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "streams");
	CHECK(c.live_allocations == 0 && c.live_host_allocs == 0 && c.live_streams == 0);
	CHECK(c.live_events == 0 && c.pending_ops == 0);
	return 0;
}
