/* SPDX-License-Identifier: MIT */
/*
 * Description: the loader's data path done correctly raises no hazard in
 * the emulator.  A pinned ring of slots (mmap + cudaHostRegister), two
 * device buffers (double buffering), a copy stream and a consumer stream:
 * each batch is staged in a slot only after that slot's previous copy
 * completed, copied only after the consumer released the device buffer
 * (stream waits on the release event), and consumed by a "training step"
 * host function that waits on the ready event and checks every byte.  Run
 * with a slow link and heavy jitter so that any missing order would show.
 * Asserts: no hazard, every batch intact, the counters (bytes, peaks, no
 * pageable copies), and nothing live after the close.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "emu-test.h"

#define SLOTS 3
#define DEPTH 2
#define BATCHES 40
#define BATCH (64 << 10)

struct step {
	const unsigned char *buf;
	int batch;
	pthread_mutex_t *lock;
	int *bad;
	int *done;
};

static unsigned char
pattern(int batch, size_t i)
{
	return (unsigned char)(batch * 31 + i * 7 + (i >> 9));
}

static void
train_step(void *p)
{
	struct step *st = p;
	int bad = 0;

	for (size_t i = 0; i < BATCH; i++)
		if (st->buf[i] != pattern(st->batch, i))
			bad++;
	pthread_mutex_lock(st->lock);
	*st->bad += bad != 0;
	(*st->done)++;
	pthread_mutex_unlock(st->lock);
}

int
main(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct step steps[BATCHES];
	static int bad, done;
	cudaStream_t copy_s, cons_s;
	cudaEvent_t slot_free[SLOTS], ready[DEPTH], released[DEPTH];
	unsigned char *ring, *dbuf[DEPTH];
	struct rfemu_counters c0, c;

	/* 64 KiB at 50 MB/s: about 1.3 ms a copy, jittered up to 4x. */
	SET("RINGFEED_EMU_BW", "50M");
	SET("RINGFEED_EMU_JITTER", "3");
	rfemu_reset_counters();
	c0 = counters();

	ring = mmap(NULL, SLOTS * BATCH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ring != MAP_FAILED);
	OK(cudaHostRegister(ring, SLOTS * BATCH, cudaHostRegisterDefault));
	OK(cudaStreamCreateWithFlags(&copy_s, cudaStreamNonBlocking));
	OK(cudaStreamCreateWithFlags(&cons_s, cudaStreamNonBlocking));
	for (int i = 0; i < SLOTS; i++)
		OK(cudaEventCreateWithFlags(&slot_free[i], cudaEventDisableTiming));
	for (int i = 0; i < DEPTH; i++) {
		OK(cudaMalloc((void **)&dbuf[i], BATCH));
		OK(cudaEventCreateWithFlags(&ready[i], cudaEventDisableTiming));
		OK(cudaEventCreateWithFlags(&released[i], cudaEventDisableTiming));
	}

	for (int b = 0; b < BATCHES; b++) {
		unsigned char *slot = ring + (size_t)(b % SLOTS) * BATCH;
		int d = b % DEPTH;

		/* The slot's previous copy must be done before it is refilled
		 * (an event never recorded is complete). */
		OK(cudaEventSynchronize(slot_free[b % SLOTS]));
		for (size_t i = 0; i < BATCH; i++)
			slot[i] = pattern(b, i);
		/* The device buffer must be released by the consumer. */
		OK(cudaStreamWaitEvent(copy_s, released[d], 0));
		OK(cudaMemcpyAsync(dbuf[d], slot, BATCH, cudaMemcpyHostToDevice, copy_s));
		OK(cudaEventRecord(slot_free[b % SLOTS], copy_s));
		OK(cudaEventRecord(ready[d], copy_s));

		/* The training program: wait for ready, step, release.  The
		 * step reads the batch as a kernel would, through the
		 * emulator's view of the device buffer. */
		steps[b] = (struct step){ rfemu_device_view(dbuf[d], BATCH), b, &lock, &bad, &done };
		OK(cudaStreamWaitEvent(cons_s, ready[d], 0));
		CHECK(rfemu_host_func_reads(cons_s, dbuf[d], BATCH) == 0);
		OK(cudaLaunchHostFunc(cons_s, train_step, &steps[b]));
		OK(cudaEventRecord(released[d], cons_s));
	}
	OK(cudaStreamSynchronize(cons_s));
	OK(cudaStreamSynchronize(copy_s));

	pthread_mutex_lock(&lock);
	CHECK(done == BATCHES);
	CHECK(bad == 0);
	pthread_mutex_unlock(&lock);

	c = counters();
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "clean pipeline");
	CHECK(c.hazards_total == 0);
	CHECK(c.copies - c0.copies == BATCHES);
	CHECK(c.bytes_h2d - c0.bytes_h2d == (uint64_t)BATCHES * BATCH);
	CHECK(c.pageable_copies == 0);
	CHECK(c.host_funcs - c0.host_funcs == BATCHES);
	CHECK(c.peak_device_bytes == (uint64_t)DEPTH * BATCH);
	CHECK(c.peak_registered_bytes == (uint64_t)SLOTS * BATCH);
	CHECK(c.api_errors == 0);

	/* The close: everything released, in an order that is always safe. */
	OK(cudaHostUnregister(ring));
	for (int i = 0; i < DEPTH; i++) {
		OK(cudaFree(dbuf[i]));
		OK(cudaEventDestroy(ready[i]));
		OK(cudaEventDestroy(released[i]));
	}
	for (int i = 0; i < SLOTS; i++)
		OK(cudaEventDestroy(slot_free[i]));
	OK(cudaStreamDestroy(copy_s));
	OK(cudaStreamDestroy(cons_s));
	munmap(ring, SLOTS * BATCH);

	c = counters();
	CHECK(c.hazards_total == 0);
	CHECK(c.live_allocations == 0 && c.device_bytes == 0);
	CHECK(c.live_registered_ranges == 0 && c.registered_bytes == 0);
	CHECK(c.live_host_allocs == 0 && c.live_streams == 0 && c.live_events == 0);
	CHECK(c.worker_threads == 0 && c.pending_ops == 0);
	return 0;
}
