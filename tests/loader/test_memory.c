/* SPDX-License-Identifier: MIT */
/*
 * Description: bounded memory.  Streams a dataset more than 16 times larger
 * than pinned_bytes, in both pin modes: the page-locked peak stays within
 * pinned_bytes, device memory is depth x batch bytes exactly, and the
 * process's resident memory while streaming does not grow with the dataset
 * (a dataset 4 times larger peaks at the same RSS, within a small slack),
 * nor with the number of epochs; after close no thread, file descriptor
 * or registered byte is left.
 * Argument "cuda": the CUDA backend on the cudart emulator, whose own
 * counters (registered/pinned and device peaks) are checked.
 */
#include <dirent.h>

#include "lt.h"
#include "lt_gpu.h"

#define PINNED (512u << 10)

/* AddressSanitizer keeps freed memory in quarantine and ThreadSanitizer
 * keeps shadow state, so resident memory there measures the sanitizer, not
 * the loader: the RSS (and thread count) checks are made in normal builds
 * only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_CHECK 0
#endif
#endif
#ifndef RSS_CHECK
#define RSS_CHECK 1
#endif

static struct rfemu_api emu;
static int use_cuda;
static char dir[256];

static uint64_t
rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, rss = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Entries in a /proc/self directory: open files, threads. */
static int
count_dir(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Stream the dataset `epochs` times; returns the peak RSS seen while
 * streaming. */
static uint64_t
stream(const char *name, uint64_t n, enum rf_pinning pin, uint32_t epochs)
{
	int fds0 = count_dir("/proc/self/fd"), threads0 = count_dir("/proc/self/task");
	char file[64];
	snprintf(file, sizeof(file), "%s.rfs", name);
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, file);
	cfg.batch_size = 256;
	cfg.pinned_bytes = PINNED;
	cfg.pinning = pin;
	cfg.epochs = epochs;
	cfg.device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	if (use_cuda && !lt_gpu_on)
		emu.reset_counters();
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 0;
	}
	uint64_t peak = 0, samples = 0, bad = 0, k = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		if (b->first_sample != samples % n || b->epoch != samples / n)
			bad++;
		if (k++ % 8 == 0)
			bad += lt_check_batch_any(b, b->first_sample);
		samples += b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		uint64_t r = rss_bytes();
		if (r > peak)
			peak = r;
	}
	LT_CHECK(rc == 0);
	LT_CHECK(samples == n * epochs);
	LT_CHECK(bad == 0);
	rf_stats s = {.size = sizeof(s)};
	LT_CHECK(rf_loader_stats(ld, &s) == 0);
	LT_CHECK(s.bytes_read >= (uint64_t)16 * PINNED * epochs || n < 400000);
	LT_CHECK(s.pinned_peak <= PINNED);
	/* Host: in place, the batches are ring slots and the pinned peak
	 * above covers them; cuda: two device buffers. */
	LT_CHECK(s.in_place == !use_cuda);
	LT_CHECK(s.device_peak == (s.in_place ? 0 : 2 * s.batch_bytes));
	fprintf(stderr, "%s %s: %llu bytes read, pinned peak %llu of %u, device %llu, "
		"rss peak %.1f MiB, engine %s\n", name, pin == RF_PINNING_RING ? "ring" : "transient",
		(unsigned long long)s.bytes_read, (unsigned long long)s.pinned_peak, PINNED,
		(unsigned long long)s.device_peak, (double)peak / (1 << 20), s.io_engine);
	if (use_cuda && !lt_gpu_on) {
		struct rfemu_counters c;
		memset(&c, 0, sizeof(c));
		LT_CHECK(emu.get_counters(&c, sizeof(c)) == 0);
		LT_CHECK(c.peak_pinned_bytes <= PINNED);
		LT_CHECK(c.peak_device_bytes == 2 * s.batch_bytes);
		LT_CHECK(c.pageable_h2d == 0);
		LT_CHECK(c.hazards_total == 0);
		if (pin == RF_PINNING_TRANSIENT)
			LT_CHECK(c.peak_registered_bytes < PINNED);
	}
	rf_loader_close(&ld);
	LT_CHECK(count_dir("/proc/self/fd") == fds0);
	/* The emulator keeps its default stream's thread; ThreadSanitizer
	 * starts a thread of its own on first use.  io_uring's own workers
	 * (iou-wrk, for reads the kernel finished in a worker) exit on their
	 * own after the ring is gone, within a moment on a busy machine. */
	if (!use_cuda && RSS_CHECK) {
		for (int i = 0; i < 200 && count_dir("/proc/self/task") != threads0; i++)
			usleep(10000);
		LT_CHECK(count_dir("/proc/self/task") == threads0);
	}
	if (use_cuda && !lt_gpu_on) {
		struct rfemu_counters c;
		memset(&c, 0, sizeof(c));
		LT_CHECK(emu.get_counters(&c, sizeof(c)) == 0);
		LT_CHECK(c.device_bytes == 0 && c.registered_bytes == 0);
	}
	return peak;
}

int
main(int argc, char **argv)
{
	int rc = lt_backend(argc, argv, &emu, &use_cuda);
	if (rc)
		return rc;
	snprintf(dir, sizeof(dir), "%s",
		 lt_tmpdir(lt_gpu_on ? "memory-gpu" : use_cuda ? "memory-cuda" : "memory-host"));
	/* 34 bytes a sample: 480000 samples are over 16 MiB, 32 x pinned. */
	const uint64_t small = 120000, big = 480000;
	LT_CHECK(lt_pack(dir, "small", small, 0, 64 << 10, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "big", big, 0, 64 << 10, 0, 0) == 0);
	for (int pin = 0; pin < 2; pin++) {
		enum rf_pinning p = pin ? RF_PINNING_TRANSIENT : RF_PINNING_RING;
		uint64_t rs = stream("small", small, p, 1);
		uint64_t rb = stream("big", big, p, 1);
		uint64_t re = stream("small", small, p, 4);
		/* The big run may not hold more than a few MiB more than the small
		 * one (allocator noise), never the 4x more data it streamed. */
		if (RSS_CHECK) {
			LT_CHECK(rb <= rs + (4u << 20));
			LT_CHECK(re <= rs + (4u << 20));
		}
	}
	lt_rmtree(dir);
	lt_gpu_fini();
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
