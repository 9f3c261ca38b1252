/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend.  cudart is loaded with dlopen at open time, so one build
 * runs with or without CUDA and shares the runtime a training program has
 * already loaded (dlopen of a loaded soname returns the same handle, hence
 * the same primary contexts, streams and allocator).  The toolkit's
 * cuda_runtime_api.h types every entry point; the name given to dlsym is the
 * header's own spelling after macro expansion, because the headers may map a
 * name to a versioned symbol (cudaGetDeviceProperties -> _v2 in CUDA 12, the
 * _ptsz variants under per-thread default streams).
 *
 * The library is opened RTLD_NODELETE: unloading cudart while the process
 * runs is unsafe (its exit handlers and driver threads stay behind), and the
 * training program may share it.  Our reference is still dropped at close.
 *
 * The current device is per thread in CUDA.  Calls that act on "the current
 * device" (allocation, registration, stream and event creation, memory info)
 * switch to ours and back, so the training program's thread keeps its own
 * device.  Copies, records, queries and waits act on the stream or event
 * given and need no switch.
 *
 * Thread rules: cudart is thread-safe; the backend's own bookkeeping (what it
 * created, freed at close) is under one mutex, as are its writes to the diag.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <cuda_runtime_api.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "device/device.h"

#define RF_XSTR_(x) #x
#define RF_XSTR(x) RF_XSTR_(x)

/* Entry points: name, required (1) or optional (0). */
#define RF_CUDA_FUNCS(X)                                                                         \
	X(cudaGetErrorName, 1)                                                                   \
	X(cudaGetErrorString, 1)                                                                 \
	X(cudaGetDeviceCount, 1)                                                                 \
	X(cudaGetDevice, 1)                                                                      \
	X(cudaSetDevice, 1)                                                                      \
	X(cudaMalloc, 1)                                                                         \
	X(cudaFree, 1)                                                                           \
	X(cudaHostRegister, 1)                                                                   \
	X(cudaHostUnregister, 1)                                                                 \
	X(cudaStreamCreateWithFlags, 1)                                                          \
	X(cudaStreamDestroy, 1)                                                                  \
	X(cudaEventCreateWithFlags, 1)                                                           \
	X(cudaEventDestroy, 1)                                                                   \
	X(cudaMemcpyAsync, 1)                                                                    \
	X(cudaMemcpy, 1)                                                                         \
	X(cudaEventRecord, 1)                                                                    \
	X(cudaEventQuery, 1)                                                                     \
	X(cudaEventSynchronize, 1)                                                               \
	X(cudaStreamWaitEvent, 1)                                                                \
	X(cudaStreamSynchronize, 1)                                                              \
	X(cudaMemGetInfo, 1)                                                                     \
	X(cudaGetLastError, 0)                                                                   \
	X(cudaRuntimeGetVersion, 0)                                                              \
	X(cudaGetDeviceProperties, 0)

struct cuda_api {
#define RF_CUDA_FIELD(name, req) __typeof__(&name) p_##name;
	RF_CUDA_FUNCS(RF_CUDA_FIELD)
#undef RF_CUDA_FIELD
};

struct ptr_set {
	void **p;
	unsigned n, cap;
};

struct cuda_dev {
	rf_device base;
	void *lib;
	int opened;   /* open succeeded: close has objects to free */
	struct cuda_api api;
	pthread_mutex_t lock;
	struct ptr_set allocs, regs, streams, events;
};

static struct cuda_dev *
cd_of(rf_device *dev)
{
	return (struct cuda_dev *)dev;
}

static int
set_add(struct ptr_set *s, void *p)
{
	if (s->n == s->cap) {
		unsigned nc = s->cap ? s->cap * 2 : 16;
		void **np = realloc(s->p, nc * sizeof *np);
		if (!np)
			return -ENOMEM;
		s->p = np;
		s->cap = nc;
	}
	s->p[s->n++] = p;
	return 0;
}

static int
set_del(struct ptr_set *s, void *p)
{
	for (unsigned i = 0; i < s->n; i++) {
		if (s->p[i] == p) {
			s->p[i] = s->p[--s->n];
			return 0;
		}
	}
	return -1;
}

/* The errors that mean "no usable GPU here" rather than "a call failed". */
static int
is_no_device(cudaError_t e)
{
	switch ((int)e) {
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorCallRequiresNewerDriver:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemNotReady:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
	case cudaErrorInitializationError:
	case cudaErrorInvalidDevice:
		return 1;
	default:
		return 0;
	}
}

static int
cu_fail(struct cuda_dev *cd, int code, cudaError_t e, const char *call)
{
	const char *name = cd->api.p_cudaGetErrorName(e);
	const char *str = cd->api.p_cudaGetErrorString(e);
	/* Clear the thread's last error so a later, unrelated
	 * cudaGetLastError in the training program does not see ours. */
	if (cd->api.p_cudaGetLastError)
		cd->api.p_cudaGetLastError();
	pthread_mutex_lock(&cd->lock);
	int ret = rf_fail(cd->base.diag, code, "cuda:%d: %s failed: %s (%s)", cd->base.index, call,
			  name ? name : "?", str ? str : "?");
	pthread_mutex_unlock(&cd->lock);
	return ret;
}

#define CU_CHECK(cd, call, expr)                                                                 \
	do {                                                                                     \
		cudaError_t e_ = (expr);                                                         \
		if (RF_UNLIKELY(e_ != cudaSuccess))                                              \
			return cu_fail((cd), RF_ECUDA, e_, (call));                              \
	} while (0)

/* Make our device current on this thread; *prev is what to restore. */
static int
cu_enter(struct cuda_dev *cd, int *prev)
{
	if (cd->api.p_cudaGetDevice(prev) != cudaSuccess)
		*prev = -1;
	if (*prev != cd->base.index) {
		cudaError_t e = cd->api.p_cudaSetDevice(cd->base.index);
		if (e != cudaSuccess)
			return cu_fail(cd, RF_ECUDA, e, "cudaSetDevice");
	}
	return 0;
}

static void
cu_leave(struct cuda_dev *cd, int prev)
{
	if (prev >= 0 && prev != cd->base.index)
		cd->api.p_cudaSetDevice(prev);
}

static int
track(struct cuda_dev *cd, struct ptr_set *s, void *p)
{
	pthread_mutex_lock(&cd->lock);
	int ret = set_add(s, p);
	pthread_mutex_unlock(&cd->lock);
	return ret;
}

static int
untrack(struct cuda_dev *cd, struct ptr_set *s, void *p)
{
	pthread_mutex_lock(&cd->lock);
	int ret = set_del(s, p);
	pthread_mutex_unlock(&cd->lock);
	return ret;
}

static int
cuda_alloc(rf_device *dev, size_t bytes, void **dptr)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	void *p = NULL;
	cudaError_t e = cd->api.p_cudaMalloc(&p, bytes);
	cu_leave(cd, prev);
	if (e != cudaSuccess) {
		char call[64];
		snprintf(call, sizeof call, "cudaMalloc(%zu bytes)", bytes);
		return cu_fail(cd, e == cudaErrorMemoryAllocation ? -ENOMEM : RF_ECUDA, e, call);
	}
	if (track(cd, &cd->allocs, p) < 0) {
		cd->api.p_cudaFree(p);
		return -ENOMEM;
	}
	*dptr = p;
	return 0;
}

static int
cuda_free(rf_device *dev, void *dptr)
{
	struct cuda_dev *cd = cd_of(dev);
	if (!dptr)
		return 0;
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	cudaError_t e = cd->api.p_cudaFree(dptr);
	cu_leave(cd, prev);
	/* Still ours when the free was refused: close tries again. */
	CU_CHECK(cd, "cudaFree", e);
	untrack(cd, &cd->allocs, dptr);
	return 0;
}

static int
cuda_host_register(rf_device *dev, void *p, size_t bytes)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	/* Portable: the pages stay usable by every device's context. */
	cudaError_t e = cd->api.p_cudaHostRegister(p, bytes, cudaHostRegisterPortable);
	cu_leave(cd, prev);
	if (e != cudaSuccess) {
		char call[80];
		snprintf(call, sizeof call, "cudaHostRegister(%zu bytes)", bytes);
		return cu_fail(cd, RF_ECUDA, e, call);
	}
	if (track(cd, &cd->regs, p) < 0) {
		cd->api.p_cudaHostUnregister(p);
		return -ENOMEM;
	}
	return 0;
}

static int
cuda_host_unregister(rf_device *dev, void *p)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaHostUnregister", cd->api.p_cudaHostUnregister(p));
	untrack(cd, &cd->regs, p);
	return 0;
}

static int
cuda_stream_create(rf_device *dev, void **stream)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	cudaStream_t s = NULL;
	/* Non-blocking: our copies must not serialise with the training
	 * program's legacy default stream, nor it with them. */
	cudaError_t e = cd->api.p_cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cu_leave(cd, prev);
	CU_CHECK(cd, "cudaStreamCreateWithFlags", e);
	if (track(cd, &cd->streams, s) < 0) {
		cd->api.p_cudaStreamDestroy(s);
		return -ENOMEM;
	}
	*stream = s;
	return 0;
}

static int
cuda_stream_destroy(rf_device *dev, void *stream)
{
	struct cuda_dev *cd = cd_of(dev);
	if (!stream)
		return 0;
	/* Tracked until it is gone: one that fails to go is retried at
	 * close rather than leaked. */
	cudaError_t e = cd->api.p_cudaStreamDestroy(stream);
	if (e == cudaSuccess)
		untrack(cd, &cd->streams, stream);
	CU_CHECK(cd, "cudaStreamDestroy", e);
	return 0;
}

static int
cuda_event_create(rf_device *dev, void **event)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	cudaEvent_t ev = NULL;
	/* No timing: the cheapest event, and the one stream waits expect. */
	cudaError_t e = cd->api.p_cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	cu_leave(cd, prev);
	CU_CHECK(cd, "cudaEventCreateWithFlags", e);
	if (track(cd, &cd->events, ev) < 0) {
		cd->api.p_cudaEventDestroy(ev);
		return -ENOMEM;
	}
	*event = ev;
	return 0;
}

static int
cuda_event_destroy(rf_device *dev, void *event)
{
	struct cuda_dev *cd = cd_of(dev);
	if (!event)
		return 0;
	/* Tracked until it is gone: one that fails to go is retried at
	 * close rather than leaked. */
	cudaError_t e = cd->api.p_cudaEventDestroy(event);
	if (e == cudaSuccess)
		untrack(cd, &cd->events, event);
	CU_CHECK(cd, "cudaEventDestroy", e);
	return 0;
}

static int
cuda_copy_h2d_async(rf_device *dev, void *dst, const void *src, size_t bytes, void *stream)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaMemcpyAsync(HostToDevice)",
		 cd->api.p_cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
	return 0;
}

static int
cuda_copy_d2h(rf_device *dev, void *dst, const void *src, size_t bytes)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	cudaError_t e = cd->api.p_cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
	cu_leave(cd, prev);
	CU_CHECK(cd, "cudaMemcpy(DeviceToHost)", e);
	return 0;
}

static int
cuda_event_record(rf_device *dev, void *event, void *stream)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaEventRecord", cd->api.p_cudaEventRecord(event, stream));
	return 0;
}

static int
cuda_event_query(rf_device *dev, void *event)
{
	struct cuda_dev *cd = cd_of(dev);
	cudaError_t e = cd->api.p_cudaEventQuery(event);
	if (e == cudaErrorNotReady)
		return -EAGAIN;
	CU_CHECK(cd, "cudaEventQuery", e);
	return 0;
}

static int
cuda_event_sync(rf_device *dev, void *event)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaEventSynchronize", cd->api.p_cudaEventSynchronize(event));
	return 0;
}

static int
cuda_stream_wait_event(rf_device *dev, void *stream, void *event)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaStreamWaitEvent", cd->api.p_cudaStreamWaitEvent(stream, event, 0));
	return 0;
}

static int
cuda_stream_sync(rf_device *dev, void *stream)
{
	struct cuda_dev *cd = cd_of(dev);
	CU_CHECK(cd, "cudaStreamSynchronize", cd->api.p_cudaStreamSynchronize(stream));
	return 0;
}

static int
cuda_mem_info(rf_device *dev, size_t *free_bytes, size_t *total_bytes)
{
	struct cuda_dev *cd = cd_of(dev);
	int prev, ret = cu_enter(cd, &prev);
	if (ret < 0)
		return ret;
	cudaError_t e = cd->api.p_cudaMemGetInfo(free_bytes, total_bytes);
	cu_leave(cd, prev);
	CU_CHECK(cd, "cudaMemGetInfo", e);
	return 0;
}

static void
cuda_close(rf_device *dev)
{
	struct cuda_dev *cd = cd_of(dev);
	if (cd->opened) {
		/* Quietly: a failure here must not replace the message of
		 * the error that led to this close. */
		int prev;
		if (cd->api.p_cudaGetDevice(&prev) != cudaSuccess)
			prev = -1;
		if (prev != cd->base.index)
			cd->api.p_cudaSetDevice(cd->base.index);
		/* Work still queued may read registered memory or write
		 * device memory: finish it before taking those away. */
		for (unsigned i = 0; i < cd->streams.n; i++)
			cd->api.p_cudaStreamSynchronize(cd->streams.p[i]);
		for (unsigned i = 0; i < cd->streams.n; i++)
			cd->api.p_cudaStreamDestroy(cd->streams.p[i]);
		for (unsigned i = 0; i < cd->events.n; i++)
			cd->api.p_cudaEventDestroy(cd->events.p[i]);
		for (unsigned i = 0; i < cd->regs.n; i++)
			cd->api.p_cudaHostUnregister(cd->regs.p[i]);
		for (unsigned i = 0; i < cd->allocs.n; i++)
			cd->api.p_cudaFree(cd->allocs.p[i]);
		if (cd->api.p_cudaGetLastError)
			cd->api.p_cudaGetLastError();
		cu_leave(cd, prev);
	}
	if (cd->lib)
		dlclose(cd->lib);
	free(cd->streams.p);
	free(cd->events.p);
	free(cd->regs.p);
	free(cd->allocs.p);
	pthread_mutex_destroy(&cd->lock);
	free(cd);
}

static const struct rf_device_ops cuda_ops = {
	.name = "cuda",
	.caps = 0,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.copy_h2d_async = cuda_copy_h2d_async,
	.copy_d2h = cuda_copy_d2h,
	.event_record = cuda_event_record,
	.event_query = cuda_event_query,
	.event_sync = cuda_event_sync,
	.stream_wait_event = cuda_stream_wait_event,
	.stream_sync = cuda_stream_sync,
	.mem_info = cuda_mem_info,
	.close = cuda_close,
};

static void *
resolve(void *lib, const char *expanded, const char *plain)
{
	void *p = dlsym(lib, expanded);
	if (!p && strcmp(expanded, plain) != 0)
		p = dlsym(lib, plain);
	return p;
}

/* The runtimes tried when RINGFEED_CUDART is unset, newest first: a
 * libcudart.so.13 needs a CUDA 13 driver, and on an older one the .so.12 of
 * the same machine still starts.  (A test build may replace the list.) */
#ifndef RF_CUDART_NAMES
#define RF_CUDART_NAMES "libcudart.so.13", "libcudart.so.12"
#endif

/* Resolve the entry points of an opened runtime and count its devices:
 * what "starts" means for a candidate.  0, or a negative code with the
 * message in cd->base.diag. */
static int
start_runtime(struct cuda_dev *cd, const char *where, int *count)
{
	/* dlsym hands back void *; the table's types come from the header. */
#define RF_CUDA_RESOLVE(name, req)                                                               \
	do {                                                                                     \
		void *sym_ = resolve(cd->lib, RF_XSTR(name), #name);                             \
		if (!sym_ && !strcmp(#name, "cudaGetDeviceProperties"))                          \
			sym_ = dlsym(cd->lib, "cudaGetDeviceProperties_v2");                     \
		if (!sym_ && (req))                                                              \
			return rf_fail(cd->base.diag, RF_ENODEVICE,                              \
				       "%s does not export %s: not a usable CUDA runtime",       \
				       where, RF_XSTR(name));                                    \
		memcpy(&cd->api.p_##name, &sym_, sizeof sym_);                                   \
	} while (0);
	RF_CUDA_FUNCS(RF_CUDA_RESOLVE)
#undef RF_CUDA_RESOLVE

	*count = 0;
	cudaError_t e = cd->api.p_cudaGetDeviceCount(count);
	if (e != cudaSuccess) {
		const char *name = cd->api.p_cudaGetErrorName(e);
		const char *str = cd->api.p_cudaGetErrorString(e);
		if (cd->api.p_cudaGetLastError)
			cd->api.p_cudaGetLastError();
		return rf_fail(cd->base.diag, is_no_device(e) ? RF_ENODEVICE : RF_ECUDA,
			       "%s: cudaGetDeviceCount failed: %s (%s)", where,
			       name ? name : "?", str ? str : "?");
	}
	return 0;
}

/* Load the first runtime that starts: RINGFEED_CUDART alone when set (an
 * explicit choice is not second-guessed with the system's); else one of
 * RF_CUDART_NAMES the process has loaded already (the training program's
 * own, so both share one runtime), else the first of them that loads and
 * starts.  A failed candidate's reason goes into the final message, and
 * nothing is logged but that message, once, by the caller.  Returns 0 with
 * cd->lib, *count and `where`, or a negative code with the message in
 * `diag`. */
static int
load_runtime(struct cuda_dev *cd, rf_diag *diag, char *where, size_t wsz, int *count)
{
	static const char *const names[] = {RF_CUDART_NAMES};
	const size_t nnames = sizeof names / sizeof names[0];
	const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
	const char *env = getenv("RINGFEED_CUDART");
	const int by_env = env && *env;
	rf_diag probe;
	rf_diag_init(&probe, NULL, NULL);
	char errs[RF_ERRMSG_MAX] = "";
	size_t used = 0;
	int code = RF_ENODEVICE;
	unsigned tried = 0; /* bit i: names[i] was already in the process */

	cd->base.diag = &probe;
	for (int pass = by_env ? 1 : 0; pass < 2; pass++) {
		for (size_t i = 0; i < (by_env ? 1 : nnames); i++) {
			const char *name = by_env ? env : names[i];
			if (pass == 1 && (tried >> i & 1))
				continue;
			void *h = dlopen(name, flags | (pass == 0 ? RTLD_NOLOAD : 0));
			const char *why = NULL;
			if (!h) {
				if (pass == 0)
					continue;
				why = dlerror();
				snprintf(probe.msg, sizeof probe.msg, "%s",
					 why ? why : "dlopen failed");
			} else {
				tried |= 1u << i;
				cd->lib = h;
				int rc = start_runtime(cd, name, count);
				if (rc == 0) {
					cd->base.diag = diag;
					snprintf(where, wsz, "%s", name);
					return 0;
				}
				if (rc != RF_ENODEVICE)
					code = rc;
				dlclose(h);
				cd->lib = NULL;
				memset(&cd->api, 0, sizeof cd->api);
			}
			int n = snprintf(errs + used, sizeof errs - used, "%s%s", used ? "; " : "",
					 probe.msg);
			if (n > 0 && (size_t)n < sizeof errs - used)
				used += (size_t)n;
		}
	}
	cd->base.diag = diag;
	if (by_env)
		return rf_fail(diag, code, "cuda: cannot start the CUDA runtime RINGFEED_CUDART=%s: %s",
			       env, errs);
	return rf_fail(diag, code,
		       "cuda: no CUDA runtime starts (install the CUDA runtime, or set "
		       "RINGFEED_CUDART to the path of a libcudart.so): %s",
		       errs);
}

/* index -1: the launcher's local rank modulo the count, else the calling
 * thread's current device, else 0; with the reason in cd->base.why. */
static int
pick_index(struct cuda_dev *cd, int count, int *index)
{
	unsigned lr;
	const char *var;
	int rc = rf_device_local_rank(cd->base.diag, &lr, &var);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		*index = (int)(lr % (unsigned)count);
		snprintf(cd->base.why, sizeof cd->base.why, "%s=%u of %d device%s", var, lr, count,
			 count == 1 ? "" : "s");
		return 0;
	}
	/* What cudaSetDevice (torch.cuda.set_device) made current on this
	 * thread; a thread that set none reports 0. */
	int cur = -1;
	if (cd->api.p_cudaGetDevice(&cur) == cudaSuccess && cur >= 0 && cur < count) {
		*index = cur;
		snprintf(cd->base.why, sizeof cd->base.why, "the calling thread's current device");
		return 0;
	}
	if (cd->api.p_cudaGetLastError)
		cd->api.p_cudaGetLastError();
	*index = 0;
	snprintf(cd->base.why, sizeof cd->base.why, "default");
	return 0;
}

static int
main_has_interp(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_INTERP)
			*(int *)data = 1;
	return 1; /* the main program comes first: it alone is asked */
}

/* A program without a program interpreter (gcc -static, -static-pie) has
 * no dynamic loader of its own: glibc's dlopen from it cannot set up the
 * thread-local storage of the libraries it loads, which libcudart uses,
 * and the process crashes in the runtime's first call. */
static int
statically_linked(void)
{
	int interp = 0;
	dl_iterate_phdr(main_has_interp, &interp);
	return !interp;
}

int
rf_device_open_cuda(rf_device **out, int index, rf_diag *diag)
{
	*out = NULL;
	if (index < -1)
		return rf_fail(diag, RF_EUSAGE,
			       "cuda: device index %d: must be a device ordinal (0, 1, ...) or -1 "
			       "(chosen at open)",
			       index);
	if (statically_linked())
		return rf_fail(diag, RF_ENODEVICE,
			       "cuda: this program is statically linked (-static), and the CUDA "
			       "runtime cannot be loaded into it (glibc's dlopen from a static "
			       "program does not support its thread-local storage): link the "
			       "program dynamically for the cuda device; the host device works");
	struct cuda_dev *cd = calloc(1, sizeof *cd);
	if (!cd)
		return rf_fail(diag, -ENOMEM, "cuda: out of memory");
	pthread_mutex_init(&cd->lock, NULL);
	cd->base.ops = &cuda_ops;
	cd->base.diag = diag;
	cd->base.index = index;

	char where[256];
	int count = 0;
	int ret = load_runtime(cd, diag, where, sizeof where, &count);
	if (ret < 0) {
		cuda_close(&cd->base);
		return ret;
	}
	if (count == 0) {
		rf_fail(diag, RF_ENODEVICE, "cuda: %s reports no CUDA device", where);
		cuda_close(&cd->base);
		return RF_ENODEVICE;
	}
	if (index < 0) {
		ret = pick_index(cd, count, &index);
		if (ret < 0) {
			cuda_close(&cd->base);
			return ret;
		}
		cd->base.index = index;
	} else {
		snprintf(cd->base.why, sizeof cd->base.why, "device_index");
	}
	if (index >= count) {
		/* A setting out of range, not an absent device: RF_EUSAGE, so
		 * that RF_DEVICE_AUTO does not hide it behind host. */
		rf_fail(diag, RF_EUSAGE, "cuda: device %d requested, but %s sees %d device%s", index,
			where, count, count == 1 ? "" : "s");
		cuda_close(&cd->base);
		return RF_EUSAGE;
	}
	/* Creates the device's primary context now, not in the first copy. */
	int prev;
	if (cd->api.p_cudaGetDevice(&prev) != cudaSuccess)
		prev = -1;
	cudaError_t e = cd->api.p_cudaSetDevice(index);
	if (e != cudaSuccess) {
		ret = cu_fail(cd, is_no_device(e) ? RF_ENODEVICE : RF_ECUDA, e, "cudaSetDevice");
		cuda_close(&cd->base);
		return ret;
	}

	char name[96] = "";
	if (cd->api.p_cudaGetDeviceProperties) {
		/* The struct grew across CUDA versions and the loaded runtime
		 * may be older or newer than the header: give it room, read
		 * only `name`, the first member in every version. */
		union {
			struct cudaDeviceProp prop;
			char pad[16384];
		} *u = calloc(1, sizeof *u);
		if (u && cd->api.p_cudaGetDeviceProperties(&u->prop, index) == cudaSuccess)
			snprintf(name, sizeof name, " %.*s", (int)sizeof name - 2, u->prop.name);
		free(u);
	}
	int rtver = 0;
	if (cd->api.p_cudaRuntimeGetVersion)
		cd->api.p_cudaRuntimeGetVersion(&rtver);
	cu_leave(cd, prev);
	if (cd->api.p_cudaGetLastError)
		cd->api.p_cudaGetLastError();
	/* Which runtime file, so a user sees a .so.12 fallback. */
	const char *base = strrchr(where, '/');
	char desc[sizeof name + sizeof where + 64];
	snprintf(desc, sizeof desc, "cuda:%d%s (%s, cudart %d)", index, name,
		 base ? base + 1 : where, rtver);
	/* A description: cut short when long. */
	memcpy(cd->base.desc, desc, sizeof cd->base.desc - 1);
	cd->base.desc[sizeof cd->base.desc - 1] = 0;
	cd->opened = 1;
	*out = &cd->base;
	return 0;
}
