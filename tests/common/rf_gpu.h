/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime as a test of the `gpu` suite sees it: loaded with dlopen
 * the way the CUDA backend loads it (RINGFEED_CUDART, else libcudart.so.13,
 * then .so.12), a few cudart functions by name, and whether the library is
 * the cudart emulator (it exports rfemu_get_counters) rather than a GPU's
 * runtime.  Header only: no CUDA headers needed.
 *
 * A gpu-suite test touches device memory only through the runtime (copies
 * back to the host), never by dereferencing a device pointer, and reads no
 * emulator counter: it passes on a GPU and, as a check of the test itself,
 * under the emulator.
 */
#ifndef RF_GPU_H
#define RF_GPU_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cudaMemcpyKind values of cuda_runtime_api.h. */
#define RF_GPU_H2D 1
#define RF_GPU_D2H 2

struct rf_gpu {
	void *handle;
	char path[4096];	/* the file the runtime was loaded from */
	int emulated;		/* the cudart emulator, not a GPU */
	int devices;		/* cudaGetDeviceCount */
	int (*get_device_count)(int *count);
	int (*mem_get_info)(size_t *free_bytes, size_t *total);
	int (*stream_create)(void **stream);
	int (*stream_destroy)(void *stream);
	int (*stream_synchronize)(void *stream);
	int (*memcpy_async)(void *dst, const void *src, size_t n, int kind, void *stream);
	int (*memcpy_sync)(void *dst, const void *src, size_t n, int kind);
	const char *(*error_name)(int err);
};

/*
 * Loads the runtime and counts its devices.  Returns the device count (> 0),
 * or 0 with the reason in `why` (no runtime, a symbol missing, no device, no
 * driver): the caller skips.
 */
static inline int
rf_gpu_load(struct rf_gpu *g, char *why, size_t whysz)
{
	static const char *const names[] = {"libcudart.so.13", "libcudart.so.12"};
	const char *env = getenv("RINGFEED_CUDART");
	void *h = NULL;

	memset(g, 0, sizeof(*g));
	if (env && *env) {
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(why, whysz, "RINGFEED_CUDART=%.400s cannot be loaded: %.500s", env, dlerror());
			return 0;
		}
	} else {
		for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
			h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(why, whysz, "no CUDA runtime: neither libcudart.so.13 nor "
					     "libcudart.so.12 can be loaded and RINGFEED_CUDART is unset");
			return 0;
		}
	}
	g->handle = h;
#define RF_GPU_SYM_(field, name) do { \
		void *p_ = dlsym(h, name); \
		if (!p_) { \
			snprintf(why, whysz, "the CUDA runtime has no %s", name); \
			return 0; \
		} \
		memcpy(&g->field, &p_, sizeof(p_)); \
	} while (0)
	RF_GPU_SYM_(get_device_count, "cudaGetDeviceCount");
	RF_GPU_SYM_(mem_get_info, "cudaMemGetInfo");
	RF_GPU_SYM_(stream_create, "cudaStreamCreate");
	RF_GPU_SYM_(stream_destroy, "cudaStreamDestroy");
	RF_GPU_SYM_(stream_synchronize, "cudaStreamSynchronize");
	RF_GPU_SYM_(memcpy_async, "cudaMemcpyAsync");
	RF_GPU_SYM_(memcpy_sync, "cudaMemcpy");
	RF_GPU_SYM_(error_name, "cudaGetErrorName");
#undef RF_GPU_SYM_
	g->emulated = dlsym(h, "rfemu_get_counters") != NULL;
	Dl_info info;
	void *sym;
	memcpy(&sym, &g->get_device_count, sizeof(sym));
	if (dladdr(sym, &info) && info.dli_fname)
		snprintf(g->path, sizeof(g->path), "%s", info.dli_fname);
	else
		snprintf(g->path, sizeof(g->path), "%s", env && *env ? env : "libcudart.so");
	int n = 0, err = g->get_device_count(&n);
	if (err) {
		snprintf(why, whysz, "cudaGetDeviceCount: %.60s (%.900s)", g->error_name(err), g->path);
		return 0;
	}
	if (n <= 0) {
		snprintf(why, whysz, "cudaGetDeviceCount: no device (%.900s)", g->path);
		return 0;
	}
	g->devices = n;
	return n;
}

#endif /* RF_GPU_H */
