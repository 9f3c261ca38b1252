/* SPDX-License-Identifier: MIT */
/*
 * Description: the cudart emulator's device, error and memory functions
 * behave as cudart documents them: device count and properties, per-thread
 * last error, the VRAM budget (cudaMalloc refused past it, cudaMemGetInfo
 * consistent), pinned allocations and registration rules (overlaps
 * refused), copy validation, pageable copies synchronous and counted, and
 * the counters returning to zero once everything is released.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "emu-test.h"

static void
test_devices(void)
{
	struct cudaDeviceProp prop;
	int n = -1, dev = -1, v = 0;

	OK(cudaGetDeviceCount(&n));
	CHECK(n == 1);
	OK(cudaGetDevice(&dev));
	CHECK(dev == 0);
	OK(cudaGetDeviceProperties(&prop, 0));
	CHECK(prop.name[0] != '\0');
	CHECK(prop.totalGlobalMem == (size_t)16 << 30);	/* the default: a T4 */
	CHECK(prop.major == 7 && prop.minor == 5);
	OK(cudaDriverGetVersion(&v));
	CHECK(v >= CUDART_VERSION);
	OK(cudaRuntimeGetVersion(&v));
	CHECK(v == CUDART_VERSION);

	/* Errors: returned, remembered per thread, cleared by GetLastError. */
	EXPECT(cudaSetDevice(1), cudaErrorInvalidDevice);
	EXPECT(cudaGetDeviceProperties(&prop, 3), cudaErrorInvalidDevice);
	EXPECT(cudaPeekAtLastError(), cudaErrorInvalidDevice);
	EXPECT(cudaPeekAtLastError(), cudaErrorInvalidDevice);
	EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
	EXPECT(cudaGetLastError(), cudaSuccess);
	CHECK(!strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation"));
	CHECK(!strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory"));
	CHECK(!strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess"));
	CHECK(!strcmp(cudaGetErrorName((cudaError_t)12345), "unrecognized error code"));

	/* Several devices: each has its own budget; the current device is
	 * per thread. */
	SET("RINGFEED_EMU_DEVICES", "2");
	SET("RINGFEED_EMU_VRAM", "1M");
	{
		void *a, *b, *c;
		size_t fr, tot;

		OK(cudaGetDeviceCount(&n));
		CHECK(n == 2);
		OK(cudaMalloc(&a, 1 << 20));
		EXPECT(cudaMalloc(&c, 256), cudaErrorMemoryAllocation);
		OK(cudaSetDevice(1));
		OK(cudaMemGetInfo(&fr, &tot));
		CHECK(fr == 1 << 20 && tot == 1 << 20);
		OK(cudaMalloc(&b, 1 << 20));
		OK(cudaFree(a));	/* any device's memory may be freed */
		OK(cudaFree(b));
		OK(cudaSetDevice(0));
	}
	SET("RINGFEED_EMU_DEVICES", "0");
	EXPECT(cudaGetDeviceCount(&n), cudaErrorNoDevice);
	CHECK(n == 0);
	SET("RINGFEED_EMU_DEVICES", "1");
	SET("RINGFEED_EMU_DRIVER_VERSION", "0");
	OK(cudaDriverGetVersion(&v));
	CHECK(v == 0);
	EXPECT(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
	{
		void *p;

		EXPECT(cudaMalloc(&p, 16), cudaErrorInsufficientDriver);
	}
	SET("RINGFEED_EMU_DRIVER_VERSION", "13000");
	CHECK(rfemu_set_option("RINGFEED_EMU_VRAM", "lots") != 0);
	CHECK(rfemu_set_option("RINGFEED_EMU_NOPE", "1") != 0);
	(void)cudaGetLastError();
}

static void
test_device_memory(void)
{
	struct rfemu_counters c;
	size_t fr, tot;
	void *a, *b, *z = (void *)1;

	rfemu_reset_counters();	/* peaks restart from what is live: nothing */
	SET("RINGFEED_EMU_VRAM", "1M");
	OK(cudaMemGetInfo(&fr, &tot));
	CHECK(tot == 1 << 20 && fr == tot);
	OK(cudaMalloc(&a, 512 << 10));
	CHECK(((uintptr_t)a & 255) == 0);
	OK(cudaMemGetInfo(&fr, &tot));
	CHECK(fr == 512 << 10);
	EXPECT(cudaMalloc(&b, 600 << 10), cudaErrorMemoryAllocation);
	EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
	OK(cudaMalloc(&b, 100 << 10));
	OK(cudaMalloc(&z, 0));
	CHECK(z == NULL);
	OK(cudaFree(NULL));
	EXPECT(cudaFree((char *)a + 256), cudaErrorInvalidValue);
	{
		int local;

		EXPECT(cudaFree(&local), cudaErrorInvalidValue);
	}
	c = counters();
	CHECK(c.live_allocations == 2);
	CHECK(c.device_bytes == (512 << 10) + (100 << 10) + 0);
	CHECK(c.peak_device_bytes == c.device_bytes);
	OK(cudaFree(a));
	OK(cudaFree(b));
	c = counters();
	CHECK(c.live_allocations == 0 && c.device_bytes == 0);
	CHECK(c.peak_device_bytes == (512 << 10) + (100 << 10));

	/* The context's share, when asked for, comes off the free memory. */
	SET("RINGFEED_EMU_RESERVED", "256K");
	OK(cudaMemGetInfo(&fr, &tot));
	CHECK(tot == 1 << 20 && fr == 768 << 10);
	EXPECT(cudaMalloc(&a, 800 << 10), cudaErrorMemoryAllocation);
	SET("RINGFEED_EMU_RESERVED", "0");
	SET("RINGFEED_EMU_VRAM", "16G");
	(void)cudaGetLastError();
}

static void
test_pinned(void)
{
	struct rfemu_counters c;
	const size_t len = 64 << 10;
	char *h, *m;
	void *p;

	OK(cudaMallocHost(&p, 8192));
	OK(cudaHostAlloc((void **)&h, 4096, cudaHostAllocPortable | cudaHostAllocMapped));
	EXPECT(cudaHostAlloc(&p, 16, 0x100), cudaErrorInvalidValue);
	c = counters();
	CHECK(c.live_host_allocs == 2 && c.host_alloc_bytes == 8192 + 4096);
	/* Memory cudaHostAlloc pinned is already page-locked. */
	EXPECT(cudaHostRegister(h, 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
	EXPECT(cudaFreeHost(h + 1), cudaErrorInvalidValue);
	OK(cudaFreeHost(h));
	OK(cudaFreeHost(p));
	OK(cudaFreeHost(NULL));

	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	OK(cudaHostRegister(m, len / 2, cudaHostRegisterDefault));
	/* Overlaps, from either side or inside, are refused; the range next
	 * to it is not. */
	EXPECT(cudaHostRegister(m, len / 2, 0), cudaErrorHostMemoryAlreadyRegistered);
	EXPECT(cudaHostRegister(m + 4096, 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
	EXPECT(cudaHostRegister(m + len / 2 - 4096, 8192, 0), cudaErrorHostMemoryAlreadyRegistered);
	OK(cudaHostRegister(m + len / 2, len / 2, cudaHostRegisterPortable));
	EXPECT(cudaHostRegister(m, 0, 0), cudaErrorInvalidValue);
	EXPECT(cudaHostRegister(NULL, 4096, 0), cudaErrorInvalidValue);
	c = counters();
	CHECK(c.registered_bytes == len && c.live_registered_ranges == 2);
	CHECK(c.peak_registered_bytes >= len);
	EXPECT(cudaHostUnregister(m + 4096), cudaErrorHostMemoryNotRegistered);
	OK(cudaHostUnregister(m));
	OK(cudaHostUnregister(m + len / 2));
	EXPECT(cudaHostUnregister(m), cudaErrorHostMemoryNotRegistered);

	/* A pinned budget, for hosts where page-locked memory is scarce. */
	SET("RINGFEED_EMU_PINNED_LIMIT", "32K");
	EXPECT(cudaHostRegister(m, len, 0), cudaErrorMemoryAllocation);
	OK(cudaHostRegister(m, 32 << 10, 0));
	EXPECT(cudaMallocHost(&p, 4096), cudaErrorMemoryAllocation);
	OK(cudaHostUnregister(m));
	SET("RINGFEED_EMU_PINNED_LIMIT", "0");
	c = counters();
	CHECK(c.registered_bytes == 0 && c.live_registered_ranges == 0);
	CHECK(c.peak_pinned_bytes >= len);
	munmap(m, len);
	(void)cudaGetLastError();
}

static void
test_copies(void)
{
	struct rfemu_counters c0, c;
	cudaStream_t s;
	const size_t n = 4096;
	char *pin, *host, *d1, *d2;

	OK(cudaStreamCreate(&s));
	OK(cudaMalloc((void **)&d1, n));
	OK(cudaMalloc((void **)&d2, n));
	OK(cudaMallocHost((void **)&pin, n));
	host = malloc(n);
	CHECK(host);
	for (size_t i = 0; i < n; i++)
		pin[i] = (char)(i * 7);

	/* Validation: the pointers decide which side is the device. */
	EXPECT(cudaMemcpy(host, pin, n, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	EXPECT(cudaMemcpy(d1, pin, n, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
	EXPECT(cudaMemcpy(d1 + 1, pin, n, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	EXPECT(cudaMemcpy(d1, pin, n, (enum cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
	EXPECT(cudaMemcpy(NULL, pin, n, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	OK(cudaMemcpy(d1, pin, 0, cudaMemcpyHostToDevice));

	c0 = counters();
	OK(cudaMemcpy(d1, pin, n, cudaMemcpyHostToDevice));
	OK(cudaMemcpy(d2, d1, n, cudaMemcpyDeviceToDevice));
	OK(cudaDeviceSynchronize());	/* device-to-device cudaMemcpy is async */
	memset(host, 0, n);
	OK(cudaMemcpy(host, d2, n, cudaMemcpyDefault));
	CHECK(!memcmp(host, pin, n));
	c = counters();
	CHECK(c.copies - c0.copies == 3);
	CHECK(c.bytes_h2d - c0.bytes_h2d == n && c.bytes_d2d - c0.bytes_d2d == n);
	CHECK(c.bytes_d2h - c0.bytes_d2h == n);
	CHECK(c.pageable_copies - c0.pageable_copies == 1);	/* host is pageable */
	CHECK(c.pageable_h2d == c0.pageable_h2d);

	/* An async copy from pageable memory is synchronous and counted: it
	 * has finished when the call returns, even on a slow link. */
	SET("RINGFEED_EMU_BW", "10M");
	c0 = counters();
	for (size_t i = 0; i < n; i++)
		host[i] = (char)(i * 3);
	OK(cudaMemcpyAsync(d1, host, n, cudaMemcpyHostToDevice, s));
	EXPECT(cudaStreamQuery(s), cudaSuccess);
	c = counters();
	CHECK(c.pageable_h2d - c0.pageable_h2d == 1);
	CHECK(c.copies - c0.copies == 1);
	/* From pinned memory it is not counted. */
	OK(cudaMemcpyAsync(d1, pin, n, cudaMemcpyHostToDevice, s));
	OK(cudaStreamSynchronize(s));
	c = counters();
	CHECK(c.pageable_h2d - c0.pageable_h2d == 1);
	/* Straddling the end of pinned memory makes a copy pageable. */
	{
		char *reg = mmap(NULL, 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(reg != MAP_FAILED);
		OK(cudaHostRegister(reg, n, 0));
		OK(cudaMemcpyAsync(d1, reg + n / 2, n, cudaMemcpyHostToDevice, s));
		c = counters();
		CHECK(c.pageable_h2d - c0.pageable_h2d == 2);
		OK(cudaStreamSynchronize(s));
		OK(cudaHostUnregister(reg));
		munmap(reg, 2 * n);
	}
	SET("RINGFEED_EMU_BW", "12G");

	OK(cudaFree(d1));
	OK(cudaFree(d2));
	OK(cudaFreeHost(pin));
	OK(cudaStreamDestroy(s));
	free(host);
	(void)cudaGetLastError();
}

int
main(void)
{
	struct rfemu_counters c;

	test_devices();
	test_device_memory();
	test_pinned();
	test_copies();

	c = counters();
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "api");
	CHECK(c.live_allocations == 0 && c.live_host_allocs == 0);
	CHECK(c.live_registered_ranges == 0 && c.registered_bytes == 0);
	CHECK(c.live_streams == 0 && c.live_events == 0 && c.pending_ops == 0);
	CHECK(c.api_errors > 0);
	return 0;
}
