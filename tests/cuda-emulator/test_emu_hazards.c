/* SPDX-License-Identifier: MIT */
/*
 * Description: every check of the cudart emulator fires.  Each case commits
 * one hazard on purpose (a copy source modified before the copy ran, an
 * unregister / cudaFreeHost / cudaFree of memory pending work uses, a
 * device buffer overwritten while a reader is pending, a reader started
 * before its data was ready, two unordered writes, a cudart call from a
 * host function, a stale handle) and asserts the call's or the stream's
 * error code and that exactly that hazard was counted; then it does the
 * same thing correctly and asserts no further hazard.  Gates (host
 * functions holding a stream) decide when queued work runs, so each hazard
 * is committed deterministically and without a real data race.
 * The exit-time leak check is in test-emu-exit.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "emu-test.h"

#define N 4096

static cudaStream_t s1, s2;
static unsigned char *pin, *dev;

/* Asserts that exactly `n` hazards of `kind` and none of another kind
 * happened since the last reset, then acknowledges them. */
static void
expect_hazard(int kind, uint64_t n, const char *where)
{
	struct rfemu_counters c = counters();

	check_only_hazard(&c, kind, where);
	if (kind < RFEMU_HAZARD_COUNT && c.hazards[kind] != n) {
		fprintf(stderr, "%s: %llu %s hazards, expected %llu\n", where,
			(unsigned long long)c.hazards[kind], rfemu_hazard_name(kind),
			(unsigned long long)n);
		exit(1);
	}
	rfemu_reset_counters();
}

/* Fresh streams per case: an execution-time hazard leaves its stream's
 * error sticky, as on a GPU. */
static void
streams_new(void)
{
	OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
}

static void
streams_end(void)
{
	OK(cudaStreamDestroy(s1));
	OK(cudaStreamDestroy(s2));
	(void)cudaGetLastError();
}

static void
case_source_modified(void)
{
	struct gate gate = GATE_INIT;

	streams_new();
	memset(pin, 1, N);
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	pin[100] = 2;	/* the slot is reused while its copy is pending */
	gate_open(&gate);
	EXPECT(cudaStreamSynchronize(s1), cudaErrorIllegalState);
	/* Sticky on the stream, like an asynchronous GPU error. */
	EXPECT(cudaStreamQuery(s1), cudaErrorIllegalState);
	EXPECT(cudaDeviceSynchronize(), cudaErrorIllegalState);
	expect_hazard(RFEMU_HAZARD_SOURCE_MODIFIED, 1, "source_modified");
	streams_end();

	/* Correctly: modify only after the copy's completion. */
	streams_new();
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaStreamSynchronize(s1));
	pin[100] = 3;
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaStreamSynchronize(s1));
	{
		unsigned char back = 0;

		OK(cudaMemcpy(&back, dev + 100, 1, cudaMemcpyDeviceToHost));
		CHECK(back == 3);
	}
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "source_modified, done right");
	streams_end();
}

static void
case_unregister_pending(void)
{
	struct gate g1 = GATE_INIT, g2 = GATE_INIT;
	struct rfemu_counters c;
	unsigned char *m;

	streams_new();
	m = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	OK(cudaHostRegister(m, N, 0));
	OK(cudaLaunchHostFunc(s1, gate_wait, &g1));
	OK(cudaMemcpyAsync(dev, m, N, cudaMemcpyHostToDevice, s1));
	EXPECT(cudaHostUnregister(m), cudaErrorIllegalState);
	c = counters();
	CHECK(c.registered_bytes == N);	/* refused: still registered */
	gate_open(&g1);
	OK(cudaStreamSynchronize(s1));

	/* A pending device-to-host copy into the range counts too. */
	OK(cudaLaunchHostFunc(s2, gate_wait, &g2));
	OK(cudaMemcpyAsync(m, dev, N, cudaMemcpyDeviceToHost, s2));
	EXPECT(cudaHostUnregister(m), cudaErrorIllegalState);
	gate_open(&g2);
	OK(cudaStreamSynchronize(s2));
	expect_hazard(RFEMU_HAZARD_UNREGISTER_PENDING, 2, "unregister_pending");

	/* Correctly: unregister after the copies completed. */
	OK(cudaHostUnregister(m));
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "unregister, done right");
	munmap(m, N);
	streams_end();
}

static void
case_freehost_pending(void)
{
	struct gate gate = GATE_INIT;
	unsigned char *h;

	streams_new();
	OK(cudaMallocHost((void **)&h, N));
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, h, N, cudaMemcpyHostToDevice, s1));
	EXPECT(cudaFreeHost(h), cudaErrorIllegalState);
	gate_open(&gate);
	OK(cudaStreamSynchronize(s1));
	expect_hazard(RFEMU_HAZARD_FREEHOST_PENDING, 1, "freehost_pending");
	OK(cudaFreeHost(h));
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "freehost, done right");
	streams_end();
}

static void
nop_reader(void *p)
{
	(void)p;
}

static void
case_free_pending(void)
{
	struct gate g1 = GATE_INIT, g2 = GATE_INIT;
	struct rfemu_counters c;
	unsigned char *d;

	streams_new();
	OK(cudaMalloc((void **)&d, N));
	/* A pending copy into the buffer. */
	OK(cudaLaunchHostFunc(s1, gate_wait, &g1));
	OK(cudaMemcpyAsync(d, pin, N, cudaMemcpyHostToDevice, s1));
	EXPECT(cudaFree(d), cudaErrorIllegalState);
	c = counters();
	CHECK(c.live_allocations == 2);	/* refused: still allocated */
	gate_open(&g1);
	OK(cudaStreamSynchronize(s1));
	/* A pending host function declared to read it. */
	OK(cudaLaunchHostFunc(s2, gate_wait, &g2));
	CHECK(rfemu_host_func_reads(s2, d + 16, 32) == 0);
	OK(cudaLaunchHostFunc(s2, nop_reader, NULL));
	EXPECT(cudaFree(d), cudaErrorIllegalState);
	gate_open(&g2);
	OK(cudaStreamSynchronize(s2));
	expect_hazard(RFEMU_HAZARD_FREE_PENDING, 2, "free_pending");
	OK(cudaFree(d));
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "free, done right");
	streams_end();
}

/* The training step: reads the batch buffer, as a kernel would (through
 * the emulator's view: the device pointer itself faults on the host). */
struct step {
	const unsigned char *dev;
	unsigned sum;
};

static void
step_fn(void *p)
{
	struct step *st = p;

	st->sum = 0;
	for (size_t i = 0; i < N; i++)
		st->sum += st->dev[i];
}

static void
case_overwrite_in_use(void)
{
	struct gate gate = GATE_INIT;
	struct step st = { .dev = rfemu_device_view(dev, N) };
	cudaEvent_t released;

	/* s1 plays the consumer: its step (held by the gate) reads `dev`;
	 * s2 refills `dev` without waiting for the release event. */
	streams_new();
	OK(cudaEventCreateWithFlags(&released, cudaEventDisableTiming));
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	CHECK(rfemu_host_func_reads(s1, dev, N) == 0);
	OK(cudaLaunchHostFunc(s1, step_fn, &st));
	OK(cudaEventRecord(released, s1));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s2));
	EXPECT(cudaStreamSynchronize(s2), cudaErrorIllegalState);
	gate_open(&gate);
	OK(cudaStreamSynchronize(s1));
	expect_hazard(RFEMU_HAZARD_OVERWRITE_IN_USE, 1, "overwrite_in_use");
	streams_end();

	/* Correctly: the refill waits for the release event. */
	streams_new();
	gate.open = false;
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	CHECK(rfemu_host_func_reads(s1, dev, N) == 0);
	OK(cudaLaunchHostFunc(s1, step_fn, &st));
	OK(cudaEventRecord(released, s1));
	OK(cudaStreamWaitEvent(s2, released, 0));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s2));
	gate_open(&gate);
	OK(cudaStreamSynchronize(s2));
	OK(cudaStreamSynchronize(s1));
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "overwrite, done right");
	OK(cudaEventDestroy(released));
	streams_end();
}

static void
case_read_before_ready(void)
{
	struct gate gate = GATE_INIT;
	struct step st = { .dev = rfemu_device_view(dev, N) };
	cudaEvent_t ready;

	/* s1 is the copy stream (held), s2 the consumer, which does not wait
	 * for the ready event before its step reads the buffer. */
	streams_new();
	OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaEventRecord(ready, s1));
	CHECK(rfemu_host_func_reads(s2, dev, N) == 0);
	OK(cudaLaunchHostFunc(s2, step_fn, &st));
	EXPECT(cudaStreamSynchronize(s2), cudaErrorIllegalState);
	gate_open(&gate);
	OK(cudaStreamSynchronize(s1));
	expect_hazard(RFEMU_HAZARD_READ_BEFORE_READY, 1, "read_before_ready");
	streams_end();

	/* Correctly: the consumer waits for the ready event. */
	streams_new();
	gate.open = false;
	memset(pin, 9, N);
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaEventRecord(ready, s1));
	OK(cudaStreamWaitEvent(s2, ready, 0));
	CHECK(rfemu_host_func_reads(s2, dev, N) == 0);
	OK(cudaLaunchHostFunc(s2, step_fn, &st));
	gate_open(&gate);
	OK(cudaStreamSynchronize(s2));
	CHECK(st.sum == 9u * N);
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "read, done right");
	OK(cudaEventDestroy(ready));
	streams_end();
}

static void
case_write_write(void)
{
	struct gate gate = GATE_INIT;
	cudaEvent_t first;

	streams_new();
	OK(cudaEventCreateWithFlags(&first, cudaEventDisableTiming));
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaEventRecord(first, s1));
	/* Overlapping, not identical, bytes. */
	OK(cudaMemcpyAsync(dev + N / 2, pin, N / 2, cudaMemcpyHostToDevice, s2));
	EXPECT(cudaStreamSynchronize(s2), cudaErrorIllegalState);
	gate_open(&gate);
	OK(cudaStreamSynchronize(s1));
	expect_hazard(RFEMU_HAZARD_WRITE_WRITE, 1, "write_write");
	streams_end();

	/* Correctly: the second write is ordered after the first. */
	streams_new();
	gate.open = false;
	OK(cudaLaunchHostFunc(s1, gate_wait, &gate));
	OK(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s1));
	OK(cudaEventRecord(first, s1));
	OK(cudaStreamWaitEvent(s2, first, 0));
	OK(cudaMemcpyAsync(dev + N / 2, pin, N / 2, cudaMemcpyHostToDevice, s2));
	gate_open(&gate);
	OK(cudaStreamSynchronize(s2));
	expect_hazard(RFEMU_HAZARD_COUNT, 0, "write_write, done right");
	OK(cudaEventDestroy(first));
	streams_end();
}

static void
call_cuda(void *p)
{
	int dev_id;

	*(cudaError_t *)p = cudaGetDevice(&dev_id);
}

static void
case_api_in_host_func(void)
{
	cudaError_t got = cudaSuccess;

	streams_new();
	OK(cudaLaunchHostFunc(s1, call_cuda, &got));
	OK(cudaStreamSynchronize(s1));
	CHECK(got == cudaErrorNotPermitted);
	expect_hazard(RFEMU_HAZARD_API_IN_HOST_FUNC, 1, "api_in_host_func");
	streams_end();
}

static void
case_bad_handle(void)
{
	cudaStream_t s;
	cudaEvent_t e;

	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&e));
	OK(cudaStreamDestroy(s));
	OK(cudaEventDestroy(e));
	EXPECT(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
	EXPECT(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
	EXPECT(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
	EXPECT(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s), cudaErrorInvalidResourceHandle);
	expect_hazard(RFEMU_HAZARD_BAD_HANDLE, 4, "bad_handle");
	(void)cudaGetLastError();
}

int
main(void)
{
	struct rfemu_counters c;

	OK(cudaMallocHost((void **)&pin, N));
	OK(cudaMalloc((void **)&dev, N));
	memset(pin, 1, N);

	case_source_modified();
	case_unregister_pending();
	case_freehost_pending();
	case_free_pending();
	case_overwrite_in_use();
	case_read_before_ready();
	case_write_write();
	case_api_in_host_func();
	case_bad_handle();

	OK(cudaFree(dev));
	OK(cudaFreeHost(pin));
	c = counters();
	CHECK(c.hazards_total == 0);
	CHECK(c.live_allocations == 0 && c.live_host_allocs == 0 && c.live_registered_ranges == 0);
	CHECK(c.live_streams == 0 && c.live_events == 0 && c.pending_ops == 0);
	return 0;
}
