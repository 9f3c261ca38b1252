/* SPDX-License-Identifier: MIT */
/*
 * Description: the backends declare their capabilities.  The host backend
 * has host memory (batches may be handed out in place) and offers inline
 * streams through its ops (an idle stream then copies in the caller); the
 * CUDA backend, under the cudart emulator when RINGFEED_CUDART names it,
 * declares neither.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/host.h"
#include "rf_test.h"

int
main(void)
{
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	rf_device *dev = NULL;
	CHECK_RC_MSG(rf_device_open_host(&dev, &d), 0, d.msg);
	CHECK(rf_device_has(dev, RF_DEVICE_CAP_HOST_MEMORY));
	CHECK(rf_device_has(dev, 0));
	CHECK(dev->ops->stream_set_inline != NULL);
	void *s = NULL, *ev = NULL, *dst = NULL;
	CHECK_RC(dev->ops->stream_create(dev, &s), 0);
	CHECK_RC(dev->ops->event_create(dev, &ev), 0);
	CHECK_RC(dev->ops->alloc(dev, 4096, &dst), 0);
	CHECK_RC(dev->ops->stream_set_inline(dev, s, 1), 0);
	uint8_t src[4096];
	memset(src, 0x5a, sizeof src);
	struct rf_device_host_counts c0, c1;
	CHECK_RC(rf_device_host_counts(dev, &c0), 0);
	CHECK_RC(dev->ops->copy_h2d_async(dev, dst, src, sizeof src, s), 0);
	CHECK_RC(dev->ops->event_record(dev, ev, s), 0);
	CHECK_RC(dev->ops->event_sync(dev, ev), 0);
	CHECK_RC(rf_device_host_counts(dev, &c1), 0);
	CHECK(c1.inline_copies == c0.inline_copies + 1);
	CHECK(memcmp(dst, src, sizeof src) == 0);
	CHECK_RC(dev->ops->free(dev, dst), 0);
	CHECK_RC(dev->ops->event_destroy(dev, ev), 0);
	CHECK_RC(dev->ops->stream_destroy(dev, s), 0);
	rf_device_close(&dev);

	const char *cudart = getenv("RINGFEED_CUDART");
	if (cudart && *cudart) {
		CHECK_RC_MSG(rf_device_open_cuda(&dev, 0, &d), 0, d.msg);
		CHECK(!rf_device_has(dev, RF_DEVICE_CAP_HOST_MEMORY));
		CHECK(dev->ops->stream_set_inline == NULL);
		rf_device_close(&dev);
	}
	return 0;
}
