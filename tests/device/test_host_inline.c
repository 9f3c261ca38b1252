/* SPDX-License-Identifier: MIT */
/*
 * Description: the host backend's inline streams.  An idle inline stream
 * copies in the caller before copy_h2d_async returns and completes a record
 * at once; anything queued (a held stream, a pending stream_wait_event on an
 * event of another stream) makes later ops queue behind it, so FIFO order and
 * event generations hold with mixed queued and inline ops, and the stream goes
 * back to inline once idle; copies above RF_DEVICE_HOST_INLINE_MAX always
 * queue.  Turning the mode off restores async copies; a
 * non-host device or a NULL stream is refused.  A threaded round (one thread
 * issuing chains of dependent copies while another holds and releases the
 * stream and a third syncs it) checks the order under races, for TSan.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/host.h"
#include "rf_test.h"

#define N 4096
#define CHAIN 48
#define ROUNDS 2000

static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8) + 1);
}

static unsigned long long
count_inline(rf_device *dev)
{
	struct rf_device_host_counts c;
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	return c.inline_copies;
}

static unsigned long long
count_queued(rf_device *dev)
{
	struct rf_device_host_counts c;
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	return c.copies;
}

/* The threaded round: shared between the issuing thread and the others. */
struct race {
	rf_device *dev;
	void *s;
	atomic_int done;
};

static void *
holder(void *arg)
{
	struct race *r = arg;
	unsigned k = 0;
	while (!atomic_load(&r->done)) {
		CHECK_RC(rf_device_host_hold(r->dev, r->s, (int)(++k % 2)), 0);
		/* Long enough for the issuing thread to queue a few links. */
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
	CHECK_RC(rf_device_host_hold(r->dev, r->s, 0), 0);
	return NULL;
}

static void *
syncer(void *arg)
{
	struct race *r = arg;
	while (!atomic_load(&r->done)) {
		/* The holder may hold the stream at any time: sync only
		 * returns once the holder lets go, which it does every other
		 * turn. */
		CHECK_RC(r->dev->ops->stream_sync(r->dev, r->s), 0);
		sched_yield();
	}
	return NULL;
}

int
main(void)
{
	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = NULL;
	CHECK_RC(rf_device_open_host(&dev, &diag), 0);
	const struct rf_device_ops *o = dev->ops;

	void *s1, *s2, *e1, *e2;
	CHECK_RC(o->stream_create(dev, &s1), 0);
	CHECK_RC(o->stream_create(dev, &s2), 0);
	CHECK_RC(o->event_create(dev, &e1), 0);
	CHECK_RC(o->event_create(dev, &e2), 0);

	/* Refused: NULL stream, NULL or non-host device. */
	CHECK_RC(rf_device_host_stream_inline(dev, NULL, 1), -EINVAL);
	CHECK_RC(rf_device_host_stream_inline(NULL, s1, 1), -EINVAL);
	static const struct rf_device_ops fake_ops = {.name = "fake"};
	struct rf_device fake = {.ops = &fake_ops};
	CHECK_RC(rf_device_host_stream_inline(&fake, s1, 1), -EINVAL);

	uint8_t *d[CHAIN];
	for (int i = 0; i < CHAIN; i++) {
		CHECK_RC(o->alloc(dev, N, (void **)&d[i]), 0);
		memset(d[i], 0, N);
	}
	static uint8_t src[N], src2[N];
	fill(src, N, 1);
	fill(src2, N, 2);

	/* Not inline (the default): the copy waits for the worker. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[0], src, N, s1), 0);
	CHECK(rf_test_all_zero(d[0], N));
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	CHECK(memcmp(d[0], src, N) == 0);
	CHECK(count_inline(dev) == 0 && count_queued(dev) == 1);

	/* Inline and idle: done on return, the record complete at once. */
	CHECK_RC(rf_device_host_stream_inline(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[1], src2, N, s1), 0);
	CHECK(memcmp(d[1], src2, N) == 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->event_sync(dev, e1), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	CHECK(count_inline(dev) == 1 && count_queued(dev) == 1);

	/* Held while inline: the stream is not idle, ops queue.  A chain of
	 * dependent copies is issued partly held (queued) and, after the
	 * release, continues; each link reads the previous one, so a link run
	 * early would copy zeros. */
	for (int i = 0; i < CHAIN; i++)
		memset(d[i], 0, N);
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[0], src, N, s1), 0);
	for (int i = 1; i < CHAIN / 2; i++)
		CHECK_RC(o->copy_h2d_async(dev, d[i], d[i - 1], N, s1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0); /* queued: pending */
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK(rf_test_all_zero(d[0], N) && rf_test_all_zero(d[CHAIN / 2 - 1], N));
	CHECK(count_inline(dev) == 1);
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	for (int i = CHAIN / 2; i < CHAIN; i++)
		CHECK_RC(o->copy_h2d_async(dev, d[i], d[i - 1], N, s1), 0);
	CHECK_RC(o->event_record(dev, e2, s1), 0);
	CHECK_RC(o->event_sync(dev, e2), 0);
	CHECK_RC(o->event_query(dev, e1), 0); /* recorded before e2 on s1 */
	for (int i = 0; i < CHAIN; i++)
		CHECK(memcmp(d[i], src, N) == 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);

	/* Generations: an inline record completes, a queued re-record makes
	 * the event pending again, an inline one after it (once idle)
	 * completes it. */
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK_RC(o->event_record(dev, e1, s1), 0); /* still queued */
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->event_sync(dev, e1), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), 0);

	/* A wait for an event pending on another stream queues on the inline
	 * stream, and everything after it queues until it is satisfied. */
	unsigned long long in0 = count_inline(dev);
	memset(d[0], 0, N);
	memset(d[1], 0, N);
	CHECK_RC(rf_device_host_hold(dev, s2, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[0], src2, N, s2), 0);
	CHECK_RC(o->event_record(dev, e2, s2), 0);
	CHECK_RC(o->stream_wait_event(dev, s1, e2), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[1], d[0], N, s1), 0);
	CHECK(rf_test_all_zero(d[1], N)); /* not run inline */
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK(count_inline(dev) == in0);
	CHECK_RC(rf_device_host_hold(dev, s2, 0), 0);
	CHECK_RC(o->event_sync(dev, e1), 0);
	CHECK(memcmp(d[1], src2, N) == 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	/* Satisfied and drained: inline again.  A wait on a complete event
	 * queues nothing. */
	CHECK_RC(o->stream_wait_event(dev, s1, e2), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[2], src2, N, s1), 0);
	CHECK(memcmp(d[2], src2, N) == 0);
	CHECK(count_inline(dev) == in0 + 1);

	/* Larger than RF_DEVICE_HOST_INLINE_MAX: queued even when idle; the
	 * small copy after it reads its destination, so it must wait for it
	 * whether it runs inline or queued. */
	{
		size_t big = RF_DEVICE_HOST_INLINE_MAX + 4096;
		uint8_t *hb = malloc(big), *db, *db2;
		CHECK(hb != NULL);
		fill(hb, big, 3);
		CHECK_RC(o->alloc(dev, big, (void **)&db), 0);
		CHECK_RC(o->alloc(dev, N, (void **)&db2), 0);
		memset(db, 0, big);
		unsigned long long q1 = count_queued(dev), i1 = count_inline(dev);
		CHECK_RC(o->copy_h2d_async(dev, db, hb, big, s1), 0);
		CHECK_RC(o->copy_h2d_async(dev, db2, db + big - N, N, s1), 0);
		CHECK_RC(o->stream_sync(dev, s1), 0);
		CHECK(memcmp(db, hb, big) == 0);
		CHECK(memcmp(db2, hb + big - N, N) == 0);
		CHECK(count_queued(dev) >= q1 + 1 && count_queued(dev) + count_inline(dev) == q1 + i1 + 2);
		in0 = count_inline(dev);
		CHECK_RC(o->free(dev, db), 0);
		CHECK_RC(o->free(dev, db2), 0);
		free(hb);
	}

	/* Off again: async as before. */
	CHECK_RC(rf_device_host_stream_inline(dev, s1, 0), 0);
	memset(d[3], 0, N);
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[3], src, N, s1), 0);
	CHECK(rf_test_all_zero(d[3], N));
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	CHECK(memcmp(d[3], src, N) == 0);
	CHECK(count_inline(dev) == in0);

	/* Threaded: chains of dependent copies while another thread holds
	 * and releases the stream and a third syncs it, so links go inline
	 * and queued in every mix.  Each round starts from zeroed buffers and
	 * ends with every link equal to the round's source. */
	CHECK_RC(rf_device_host_stream_inline(dev, s1, 1), 0);
	struct race r = {.dev = dev, .s = s1};
	pthread_t th, ts;
	CHECK(pthread_create(&th, NULL, holder, &r) == 0);
	CHECK(pthread_create(&ts, NULL, syncer, &r) == 0);
	unsigned long long q0 = count_queued(dev), i0 = count_inline(dev);
	/* Rounds go on until both kinds were seen (a few on an idle machine;
	 * the cap only bounds a machine that never runs the holder). */
	unsigned round;
	for (round = 0; round < ROUNDS || (count_queued(dev) == q0 && round < 50 * ROUNDS); round++) {
		const uint8_t *from = round % 2 ? src : src2;
		CHECK_RC(o->copy_h2d_async(dev, d[0], from, N, s1), 0);
		for (int i = 1; i < CHAIN; i++) {
			CHECK_RC(o->copy_h2d_async(dev, d[i], d[i - 1], N, s1), 0);
			if (i % 8 == 0)
				CHECK_RC(o->event_record(dev, e1, s1), 0);
		}
		CHECK_RC(o->event_record(dev, e2, s1), 0);
		CHECK_RC(o->event_sync(dev, e2), 0);
		CHECK_RC(o->event_query(dev, e1), 0);
		for (int i = 0; i < CHAIN; i++)
			CHECK(memcmp(d[i], from, N) == 0);
		for (int i = 0; i < CHAIN; i++)
			memset(d[i], 0, N);
	}
	atomic_store(&r.done, 1);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK(pthread_join(ts, NULL) == 0);
	unsigned long long q = count_queued(dev) - q0, in = count_inline(dev) - i0;
	CHECK(q + in == (unsigned long long)round * CHAIN);
	CHECK(q > 0 && in > 0);
	fprintf(stderr, "threaded: %llu copies inline, %llu queued\n", in, q);

	CHECK_RC(o->event_destroy(dev, e1), 0);
	CHECK_RC(o->event_destroy(dev, e2), 0);
	CHECK_RC(o->stream_destroy(dev, s1), 0);
	CHECK_RC(o->stream_destroy(dev, s2), 0);
	for (int i = 0; i < CHAIN; i++)
		CHECK_RC(o->free(dev, d[i]), 0);
	struct rf_device_host_counts c;
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	CHECK(c.streams == 0 && c.events == 0 && c.allocs == 0);
	rf_device_close(&dev);
	return 0;
}
