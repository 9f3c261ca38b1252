/* SPDX-License-Identifier: MIT */
/*
 * Description: the emulator loads the way the CUDA backend loads cudart:
 * dlopen(RINGFEED_CUDART) and dlsym by name.  Every emulated function is
 * found under its plain name (and the _v2 names of CUDA 12 headers, and the
 * _ptsz/_ptds names of per-thread default stream builds), the
 * functions it does not emulate and its internals are absent, a copy runs
 * through the looked-up pointers, and emulator.h's rfemu_api_load() finds
 * the same instance (its counters saw the copy), also after the first
 * handle is closed (the library is never unloaded).
 */
#include <dlfcn.h>
#include <stdint.h>

#include "emu-test.h"

static const char *const emulated[] = {
	"cudaGetDeviceCount", "cudaSetDevice", "cudaGetDevice", "cudaGetDeviceProperties",
	"cudaGetDeviceProperties_v2", "cudaMemGetInfo", "cudaDriverGetVersion",
	"cudaRuntimeGetVersion", "cudaGetErrorString", "cudaGetErrorName", "cudaGetLastError",
	"cudaPeekAtLastError", "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost",
	"cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister", "cudaStreamCreate",
	"cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cudaStreamDestroy",
	"cudaStreamSynchronize", "cudaStreamQuery", "cudaStreamWaitEvent", "cudaEventCreate",
	"cudaEventCreateWithFlags", "cudaEventDestroy", "cudaEventRecord",
	"cudaEventRecordWithFlags", "cudaEventQuery", "cudaEventSynchronize",
	"cudaEventElapsedTime", "cudaEventElapsedTime_v2", "cudaLaunchHostFunc",
	"cudaDeviceSynchronize", "cudaMemcpy", "cudaMemcpyAsync",
	"cudaMemcpy_ptds", "cudaMemcpyAsync_ptsz", "cudaStreamSynchronize_ptsz",
	"cudaStreamQuery_ptsz", "cudaStreamWaitEvent_ptsz", "cudaEventRecord_ptsz",
	"cudaEventRecordWithFlags_ptsz", "cudaLaunchHostFunc_ptsz",
	"rfemu_get_counters", "rfemu_reset_counters", "rfemu_host_func_reads",
	"rfemu_set_option", "rfemu_hazard_name", "rfemu_report",
};

static const char *const absent[] = {
	"cudaMallocManaged", "cudaLaunchKernel", "cudaMemset", "cudaMemsetAsync_ptsz",
	"cudaGetDriverEntryPoint", "cudaDeviceReset",
	"emu_enqueue", "emu_hazard", "emu_reap", "g",
};

/* POSIX: a dlsym result may be converted to a function pointer. */
#define LOOKUP(h, name, fp) do { \
		void *p_ = dlsym(h, name); \
		CHECK(p_ != NULL); \
		memcpy(&(fp), &p_, sizeof(p_)); \
	} while (0)

int
main(void)
{
	cudaError_t (*malloc_fn)(void **, size_t);
	cudaError_t (*mallochost_fn)(void **, size_t);
	cudaError_t (*memcpy_fn)(void *, const void *, size_t, enum cudaMemcpyKind);
	cudaError_t (*free_fn)(void *);
	const char *path = getenv("RINGFEED_CUDART");
	struct rfemu_counters c;
	struct rfemu_api api;
	void *h, *d, *pin;

	if (!path) {
		fprintf(stderr, "RINGFEED_CUDART is not set\n");
		return 1;
	}
	/* Not loaded yet: rfemu_counters_read finds nothing to read... */
	h = dlopen(path, RTLD_NOLOAD | RTLD_NOW);
	CHECK(h == NULL);

	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(emulated) / sizeof(emulated[0]); i++) {
		if (!dlsym(h, emulated[i])) {
			fprintf(stderr, "missing export %s\n", emulated[i]);
			return 1;
		}
	}
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
		if (dlsym(h, absent[i])) {
			fprintf(stderr, "unexpected export %s\n", absent[i]);
			return 1;
		}
	}

	LOOKUP(h, "cudaMalloc", malloc_fn);
	LOOKUP(h, "cudaMallocHost", mallochost_fn);
	LOOKUP(h, "cudaMemcpy", memcpy_fn);
	LOOKUP(h, "cudaFree", free_fn);
	CHECK(malloc_fn(&d, 4096) == cudaSuccess);
	CHECK(mallochost_fn(&pin, 4096) == cudaSuccess);
	memset(pin, 3, 4096);
	CHECK(memcpy_fn(d, pin, 4096, cudaMemcpyHostToDevice) == cudaSuccess);

	/* ...now it is: the helper reaches the backend's instance. */
	CHECK(rfemu_api_load(&api, NULL) == 0);
	CHECK(api.get_counters(&c, sizeof(c)) == 0);
	CHECK(c.size == sizeof(c) && c.version == RFEMU_COUNTERS_VERSION);
	CHECK(c.copies == 1 && c.bytes_h2d == 4096);
	CHECK(c.live_allocations == 1 && c.live_host_allocs == 1);
	CHECK(!strcmp(api.hazard_name(RFEMU_HAZARD_OVERWRITE_IN_USE), "overwrite_in_use"));

	/* The backend closes its handle: the state stays (-z nodelete). */
	CHECK(free_fn(d) == cudaSuccess);
	dlclose(h);
	CHECK(rfemu_counters_read(&c) == 0);
	CHECK(c.copies == 1 && c.live_allocations == 0 && c.live_host_allocs == 1);
	{
		cudaError_t (*freehost_fn)(void *);

		LOOKUP(api.handle, "cudaFreeHost", freehost_fn);
		CHECK(freehost_fn(pin) == cudaSuccess);
	}
	CHECK(rfemu_counters_read(&c) == 0);
	CHECK(c.live_host_allocs == 0 && c.hazards_total == 0);
	return 0;
}
