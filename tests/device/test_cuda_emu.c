/* SPDX-License-Identifier: MIT */
/*
 * Description: the CUDA backend against the cudart emulator (RINGFEED_CUDART).
 * A pinned ring registered once (ring mode) and per slot (transient mode),
 * device buffers, async host-to-device copies on a stream, event query and
 * sync, a second stream waiting on the first stream's event, and a check of
 * what arrived; then: no hazard, no pageable copy, no failed call, and after
 * rf_device_close nothing left alive in the emulator (allocations,
 * registrations, streams, events), also when the backend is closed with
 * objects still open.  A "training program" that loaded the same runtime
 * first keeps using it after the backend is closed.  Failures: no device or
 * no driver gives RF_ENODEVICE with cudart's error name and text, a device
 * index out of range RF_EUSAGE, an allocation beyond VRAM -ENOMEM naming
 * cudaMalloc and cudaErrorMemoryAllocation, a ring the host cannot
 * page-lock a failed open with the numbers and cudart's error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "emulator.h"
#include "rf_gpu.h"
#include "ring/ring.h"
#include "rf_test.h"

/* Every backend call here reports into `diag`: print its message too. */
#undef CHECK_RC
#define CHECK_RC(expr, want) CHECK_RC_MSG(expr, want, diag.msg)

#define SLOT ((size_t)1 << 20)

static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed * 17 + (i >> 9));
}

static void
counters(struct rfemu_api *emu, struct rfemu_counters *c)
{
	memset(c, 0, sizeof *c);
	CHECK(emu->get_counters(c, sizeof *c) == 0);
}

static void
check_clean(struct rfemu_api *emu, const char *when)
{
	struct rfemu_counters c;
	counters(emu, &c);
	if (c.hazards_total || c.live_allocations || c.live_registered_ranges || c.live_streams ||
	    c.live_events || c.api_errors || c.pageable_h2d) {
		fprintf(stderr, "%s: hazards %llu, live allocations %llu, registrations %llu, "
				"streams %llu, events %llu, api errors %llu, pageable h2d %llu\n",
			when, (unsigned long long)c.hazards_total, (unsigned long long)c.live_allocations,
			(unsigned long long)c.live_registered_ranges, (unsigned long long)c.live_streams,
			(unsigned long long)c.live_events, (unsigned long long)c.api_errors,
			(unsigned long long)c.pageable_h2d);
		emu->report();
		exit(1);
	}
}

static void
round_trip(rf_device *dev, rf_ring *ring, int transient, rf_diag *diagp)
{
	rf_diag diag = *diagp; /* for CHECK_RC's message */
	const struct rf_device_ops *o = dev->ops;
	void *s1, *s2, *e1, *e2, *d0, *d1;
	CHECK_RC(o->stream_create(dev, &s1), 0);
	CHECK_RC(o->stream_create(dev, &s2), 0);
	CHECK_RC(o->event_create(dev, &e1), 0);
	CHECK_RC(o->event_create(dev, &e2), 0);
	CHECK_RC(o->alloc(dev, SLOT, &d0), 0);
	CHECK_RC(o->alloc(dev, SLOT, &d1), 0);

	uint8_t *h0 = rf_ring_slot(ring, 0), *h1 = rf_ring_slot(ring, 1);
	fill(h0, SLOT, 1);
	fill(h1, SLOT, 2);
	if (transient) {
		CHECK_RC(rf_ring_pin(ring, 0, SLOT), 0);
		CHECK_RC(rf_ring_pin(ring, 1, SLOT), 0);
		CHECK(rf_ring_pinned_bytes(ring) == 2 * SLOT);
	}
	/* Never recorded: complete. */
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d0, h0, SLOT, s1), 0);
	CHECK_RC(o->event_record(dev, e1, s1), 0);
	int q = o->event_query(dev, e1);
	CHECK(q == 0 || q == -EAGAIN);
	/* s2 copies only after s1's copy is complete. */
	CHECK_RC(o->stream_wait_event(dev, s2, e1), 0);
	CHECK_RC(o->copy_h2d_async(dev, d1, h1, SLOT, s2), 0);
	CHECK_RC(o->event_record(dev, e2, s2), 0);
	CHECK_RC(o->event_sync(dev, e2), 0);
	CHECK_RC(o->event_query(dev, e2), 0);
	CHECK_RC(o->event_query(dev, e1), 0);
	CHECK_RC(o->stream_sync(dev, s1), 0);

	uint8_t *out = malloc(SLOT);
	CHECK(out);
	CHECK_RC(o->copy_d2h(dev, out, d0, SLOT), 0);
	CHECK(memcmp(out, h0, SLOT) == 0);
	CHECK_RC(o->copy_d2h(dev, out, d1, SLOT), 0);
	CHECK(memcmp(out, h1, SLOT) == 0);
	free(out);

	if (transient) {
		CHECK_RC(rf_ring_unpin(ring, 0), 0);
		CHECK_RC(rf_ring_unpin(ring, 1), 0);
		CHECK(rf_ring_pinned_bytes(ring) == 0);
		CHECK(rf_ring_pinned_peak(ring) == 2 * SLOT);
	}
	CHECK_RC(o->free(dev, d0), 0);
	CHECK_RC(o->free(dev, d1), 0);
	CHECK_RC(o->event_destroy(dev, e1), 0);
	CHECK_RC(o->event_destroy(dev, e2), 0);
	CHECK_RC(o->stream_destroy(dev, s1), 0);
	CHECK_RC(o->stream_destroy(dev, s2), 0);
}

/*
 * `gpu` (the gpu suite): the same backend on whatever runtime is loaded, a
 * GPU's included, with no emulator counter or option: round trips in ring
 * and transient mode checked by copying back, a trainer's stream that
 * outlives the backend, a close with objects open, an allocation beyond the
 * device's memory refused with -ENOMEM, an index out of range refused.
 */
static int
gpu_main(void)
{
	struct rf_gpu g;
	char why[1024] = "";
	if (rf_gpu_load(&g, why, sizeof(why)) <= 0) {
		printf("skipped: %s\n", why);
		return 77;
	}
	printf("runtime %s%s, %d device(s)\n", g.path, g.emulated ? " (emulator)" : "",
	       g.devices);
	void *trainer_stream = NULL;
	CHECK(g.stream_create(&trainer_stream) == 0);

	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = NULL;
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	printf("%s\n", dev->desc);
	CHECK(strncmp(dev->desc, "cuda:0", 6) == 0);
	size_t fr = 0, tot = 0;
	CHECK_RC(dev->ops->mem_info(dev, &fr, &tot), 0);
	CHECK(tot > 0 && fr <= tot);

	rf_ring *ring = NULL;
	CHECK_RC(rf_ring_open(&ring, SLOT, 2, dev, RF_PIN_RING, &diag), 0);
	round_trip(dev, ring, 0, &diag);
	rf_ring_close(&ring);
	CHECK_RC(rf_ring_open(&ring, SLOT, 2, dev, RF_PIN_TRANSIENT, &diag), 0);
	round_trip(dev, ring, 1, &diag);
	rf_ring_close(&ring);
	rf_device_close(&dev);
	CHECK(dev == NULL);
	/* The trainer's stream still works after the backend closed. */
	CHECK(g.stream_synchronize(trainer_stream) == 0);

	/* Close with everything still open. */
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	uint8_t *host = aligned_alloc(4096, SLOT);
	CHECK(host);
	fill(host, SLOT, 3);
	void *s, *e, *d;
	CHECK_RC(dev->ops->host_register(dev, host, SLOT), 0);
	CHECK_RC(dev->ops->stream_create(dev, &s), 0);
	CHECK_RC(dev->ops->event_create(dev, &e), 0);
	CHECK_RC(dev->ops->alloc(dev, SLOT, &d), 0);
	CHECK_RC(dev->ops->copy_h2d_async(dev, d, host, SLOT, s), 0);
	CHECK_RC(dev->ops->event_record(dev, e, s), 0);
	rf_device_close(&dev);
	free(host);

	/* More than the device has. */
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	CHECK_RC(dev->ops->alloc(dev, tot + ((size_t)1 << 30), &d), -ENOMEM);
	printf("%s\n", diag.msg);
	CHECK(strstr(diag.msg, "cudaMalloc") && strstr(diag.msg, "cudaErrorMemoryAllocation"));
	rf_device_close(&dev);
	/* An index past the device count. */
	CHECK_RC(rf_device_open_cuda(&dev, g.devices + 5, &diag), RF_EUSAGE);
	printf("%s\n", diag.msg);
	CHECK(dev == NULL);

	CHECK(g.stream_synchronize(trainer_stream) == 0);
	CHECK(g.stream_destroy(trainer_stream) == 0);
	printf("ok\n");
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "gpu"))
		return gpu_main();
	struct rfemu_api emu;
	if (rfemu_api_load(&emu, NULL) != 0) {
		printf("RINGFEED_CUDART does not name the emulator\n");
		return 77;
	}
	/* The "training program" has the runtime loaded and a stream of its
	 * own before the backend opens. */
	void *trainer_stream = NULL;
	CHECK(emu.stream_create(&trainer_stream) == 0);

	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = NULL;
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	printf("%s\n", dev->desc);
	CHECK(strncmp(dev->desc, "cuda:0", 6) == 0);
	CHECK(strcmp(dev->ops->name, "cuda") == 0);
	size_t fr = 0, tot = 0;
	CHECK_RC(dev->ops->mem_info(dev, &fr, &tot), 0);
	CHECK(tot > 0 && fr <= tot);

	/* Ring mode: one registration of the whole region. */
	rf_ring *ring = NULL;
	CHECK_RC(rf_ring_open(&ring, SLOT, 2, dev, RF_PIN_RING, &diag), 0);
	struct rfemu_counters c;
	counters(&emu, &c);
	CHECK(c.live_registered_ranges == 1 && c.registered_bytes == 2 * SLOT);
	round_trip(dev, ring, 0, &diag);
	rf_ring_close(&ring);

	/* Transient mode: per-slot registration around each copy. */
	CHECK_RC(rf_ring_open(&ring, SLOT, 2, dev, RF_PIN_TRANSIENT, &diag), 0);
	counters(&emu, &c);
	CHECK(c.live_registered_ranges == 0);
	round_trip(dev, ring, 1, &diag);
	rf_ring_close(&ring);

	counters(&emu, &c);
	CHECK(c.bytes_h2d >= 4 * SLOT);
	rf_device_close(&dev);
	CHECK(dev == NULL);

	/* The trainer's stream was never ours to touch. */
	counters(&emu, &c);
	CHECK(c.live_streams == 1);
	CHECK(emu.stream_synchronize(trainer_stream) == 0);
	CHECK(emu.stream_destroy(trainer_stream) == 0);
	check_clean(&emu, "after close");

	/* Close with everything still open, as on a careless error path: the
	 * backend waits for the copy, then frees it all. */
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	uint8_t *host = aligned_alloc(4096, SLOT);
	CHECK(host);
	fill(host, SLOT, 3);
	void *s, *e, *d;
	CHECK_RC(dev->ops->host_register(dev, host, SLOT), 0);
	CHECK_RC(dev->ops->stream_create(dev, &s), 0);
	CHECK_RC(dev->ops->event_create(dev, &e), 0);
	CHECK_RC(dev->ops->alloc(dev, SLOT, &d), 0);
	CHECK_RC(dev->ops->copy_h2d_async(dev, d, host, SLOT, s), 0);
	CHECK_RC(dev->ops->event_record(dev, e, s), 0);
	counters(&emu, &c);
	CHECK(c.live_allocations == 1 && c.live_registered_ranges == 1 && c.live_streams == 1 &&
	      c.live_events == 1);
	rf_device_close(&dev);
	check_clean(&emu, "after close with objects open");
	free(host);

	/* Out of device memory. */
	CHECK(emu.set_option("RINGFEED_EMU_VRAM", "64M") == 0);
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), 0);
	CHECK_RC(dev->ops->alloc(dev, (size_t)1 << 30, &d), -ENOMEM);
	printf("%s\n", diag.msg);
	CHECK(strstr(diag.msg, "cudaMalloc") && strstr(diag.msg, "cudaErrorMemoryAllocation"));

	/* Page-locked memory scarce: the ring says how much it wanted. */
	CHECK(emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "1M") == 0);
	CHECK(rf_ring_open(&ring, SLOT, 4, dev, RF_PIN_RING, &diag) == RF_ECUDA);
	printf("%s\n", diag.msg);
	CHECK(ring == NULL && strstr(diag.msg, "4194304") && strstr(diag.msg, "cudaHostRegister"));
	/* Transient mode fits a slot at a time, and refuses a second one. */
	CHECK_RC(rf_ring_open(&ring, SLOT, 4, dev, RF_PIN_TRANSIENT, &diag), 0);
	CHECK_RC(rf_ring_pin(ring, 0, SLOT), 0);
	CHECK(rf_ring_pin(ring, 1, SLOT) == RF_ECUDA);
	CHECK(rf_ring_pinned_bytes(ring) == SLOT);
	CHECK_RC(rf_ring_unpin(ring, 0), 0);
	CHECK_RC(rf_ring_pin(ring, 1, SLOT), 0);
	rf_ring_close(&ring); /* drops slot 1's pin */
	CHECK(emu.set_option("RINGFEED_EMU_PINNED_LIMIT", "0") == 0);
	counters(&emu, &c);
	CHECK(c.live_registered_ranges == 0);
	rf_device_close(&dev);

	/* Device index out of range: a setting, RF_EUSAGE (auto does not hide it). */
	CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "2") == 0);
	CHECK_RC(rf_device_open_cuda(&dev, 7, &diag), RF_EUSAGE);
	printf("%s\n", diag.msg);
	CHECK(dev == NULL && strstr(diag.msg, "device 7") && strstr(diag.msg, "2 devices"));

	/* No device, then no driver. */
	CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "0") == 0);
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), RF_ENODEVICE);
	printf("%s\n", diag.msg);
	CHECK(dev == NULL && strstr(diag.msg, "cudaErrorNoDevice"));
	CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "1") == 0);
	CHECK(emu.set_option("RINGFEED_EMU_DRIVER_VERSION", "0") == 0);
	CHECK_RC(rf_device_open_cuda(&dev, 0, &diag), RF_ENODEVICE);
	printf("%s\n", diag.msg);
	CHECK(dev == NULL && strstr(diag.msg, "cudaErrorInsufficientDriver"));
	CHECK(emu.set_option("RINGFEED_EMU_DRIVER_VERSION", "13000") == 0);
	/* Those failures were on purpose. */
	emu.reset_counters();
	check_clean(&emu, "at the end");
	return 0;
}
