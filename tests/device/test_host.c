/* SPDX-License-Identifier: MIT */
/*
 * Description: the host device backend.  Async copies run on the stream's
 * worker, after the call returns (a held stream leaves the destination
 * untouched and its event pending); ops on a stream run in FIFO order (a
 * chain of dependent copies); events follow CUDA's rules (never recorded =
 * complete, re-recording makes pending again, the newest record decides);
 * a stream waiting on an event recorded on another stream does not start its
 * next copy before that event; the NULL stream is synchronous; alloc/free and
 * register/unregister are tracked, and close frees what is left.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/host.h"
#include "rf_test.h"

#define N 4096

static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

int
main(void)
{
	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = NULL;
	CHECK_RC(rf_device_open_host(&dev, &diag), 0);
	CHECK(rf_device_is_host(dev));
	CHECK(strcmp(dev->ops->name, "host") == 0);
	const struct rf_device_ops *o = dev->ops;

	void *s1, *s2, *e1, *e2;
	CHECK_RC(o->stream_create(dev, &s1), 0);
	CHECK_RC(o->stream_create(dev, &s2), 0);
	CHECK_RC(o->event_create(dev, &e1), 0);
	CHECK_RC(o->event_create(dev, &e2), 0);
	uint8_t *d[6];
	for (int i = 0; i < 6; i++) {
		CHECK_RC(o->alloc(dev, N, (void **)&d[i]), 0);
		CHECK((uintptr_t)d[i] % 256 == 0);
		memset(d[i], 0, N);
	}
	static uint8_t src[N], src2[N], out[N];
	fill(src, N, 1);
	fill(src2, N, 2);
	CHECK_RC(o->host_register(dev, src, N), 0);
	CHECK_RC(o->host_register(dev, src + 100, 10), -EEXIST);

	/* Never recorded: complete. */
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->event_sync(dev, e1), 0);

	/* Async: held stream, the copy has not run when the call returns. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[0], src, N, s1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK(d[0][0] == 0 && d[0][N - 1] == 0);
	struct rf_device_host_counts c;
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	CHECK(c.copies == 0);

	/* Stream 2 waits for e1, then copies what stream 1 produced. */
	CHECK_RC(o->stream_wait_event(dev, s2, e1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[1], d[0], N, s2), 0);
	CHECK_RC(o->event_record(dev, e2, s2), 0);
	CHECK_RC(o->event_query(dev, e2), -EAGAIN);
	CHECK(d[1][0] == 0);

	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->event_sync(dev, e2), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->event_query(dev, e2), 0);
	CHECK_RC(o->copy_d2h(dev, out, d[1], N), 0);
	CHECK(memcmp(out, src, N) == 0);
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	CHECK(c.copies == 2);

	/* FIFO: a chain of copies, each reading the previous destination, plus
	 * overwrites of one buffer where only the last must survive. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[2], src2, N, s1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[3], d[2], N, s1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[4], d[3], N, s1), 0);
	for (unsigned k = 0; k < 50; k++)
		CHECK_RC(o->copy_h2d_async(dev, d[5], k % 2 ? src : src2, N, s1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK(memcmp(d[4], src2, N) == 0);
	CHECK(memcmp(d[5], src, N) == 0); /* k = 49 is odd: src */

	/* Re-recording: pending again; the newest record decides. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->event_query(dev, e1), -EAGAIN);
	CHECK_RC(o->event_record(dev, e1, s2), 0); /* s2 runs free */
	CHECK_RC(o->event_sync(dev, e1), 0);
	CHECK_RC(o->event_query(dev, e1), 0); /* although s1's record is pending */
	/* A wait enqueued now captures the current (complete) record. */
	CHECK_RC(o->stream_wait_event(dev, s2, e1), 0);
	CHECK_RC(o->event_record(dev, e2, s2), 0);
	CHECK_RC(o->event_sync(dev, e2), 0);
	/* Record e1 on the held s1 again; s2 waits for it. */
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->stream_wait_event(dev, s2, e1), 0);
	CHECK_RC(o->event_record(dev, e2, s2), 0);
	CHECK_RC(o->event_query(dev, e2), -EAGAIN);
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->event_sync(dev, e2), 0);
	CHECK_RC(o->event_query(dev, e1), 0);

	/* NULL stream: synchronous in the caller. */
	memset(d[0], 0, N);
	CHECK_RC(o->copy_h2d_async(dev, d[0], src2, N, NULL), 0);
	CHECK(memcmp(d[0], src2, N) == 0);
	CHECK_RC(o->event_record(dev, e1, NULL), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->stream_wait_event(dev, NULL, e1), 0);
	CHECK_RC(o->stream_sync(dev, NULL), 0);

	size_t fr = 0, tot = 0;
	CHECK_RC(o->mem_info(dev, &fr, &tot), 0);
	CHECK(tot > 0 && fr <= tot);

	/* Bookkeeping. */
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	CHECK(c.allocs == 6 && c.alloc_bytes == 6 * N);
	CHECK(c.registrations == 1 && c.registered_bytes == N);
	CHECK(c.streams == 2 && c.events == 2);
	CHECK_RC(o->host_unregister(dev, src), 0);
	CHECK_RC(o->host_unregister(dev, src), -EINVAL);
	CHECK_RC(o->free(dev, d[0]), 0);
	CHECK_RC(o->free(dev, src), -EINVAL);
	CHECK_RC(o->free(dev, NULL), 0);

	/* Destroying an event a queued wait still names is safe. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	CHECK_RC(o->stream_wait_event(dev, s2, e1), 0);
	CHECK_RC(o->event_destroy(dev, e1), 0);
	CHECK_RC(rf_device_host_hold(dev, s1, 0), 0);
	CHECK_RC(o->stream_sync(dev, s2), 0);
	CHECK_RC(o->stream_destroy(dev, s2), 0);
	CHECK_RC(rf_device_host_counts(dev, &c), 0);
	CHECK(c.streams == 1 && c.events == 1 && c.allocs == 5);

	/* Close frees the stream, the event and the allocations left, even
	 * with work queued behind a hold. */
	CHECK_RC(rf_device_host_hold(dev, s1, 1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d[1], src, N, s1), 0);
	rf_device_close(&dev);
	CHECK(dev == NULL);
	rf_device_close(&dev);
	return 0;
}
