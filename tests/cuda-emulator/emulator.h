/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator's test interface.
 *
 * libcudart-emulator.so exports the part of the CUDA runtime API that the
 * CUDA backend calls (see README.md) plus the rfemu_* functions below.  A
 * test points the backend at it with RINGFEED_CUDART=/path/to/the/library,
 * runs the loader, and then reads the emulator's counters from the same
 * library instance the backend loaded: rfemu_api_load() opens
 * RINGFEED_CUDART with RTLD_NOLOAD first (the instance already in the
 * process), else loads it.  The library is linked with -z nodelete, so its
 * state survives a dlclose by the backend and the counters stay readable
 * after rf_loader_close().
 *
 * This header needs neither the CUDA headers nor the emulator at build time:
 * streams and events are `void *` (cudaStream_t and cudaEvent_t are
 * pointers), error codes are `int` (cudaError_t values; 0 is cudaSuccess).
 *
 * Threading: every rfemu_* function may be called from any thread,
 * including from a host function running on a stream (cudart functions may
 * not be: that is the api_in_host_func hazard).
 */
#ifndef RFEMU_EMULATOR_H
#define RFEMU_EMULATOR_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Hazards: what a real GPU would punish silently.  Each one increments its
 * counter, prints one line on stderr and, under RINGFEED_EMU_STRICT=1,
 * aborts the process.
 */
enum rfemu_hazard {
	/* A copy's host source changed between cudaMemcpyAsync and the copy's
	 * execution (checksum at enqueue vs. the bytes the copy moved).  The
	 * copy's stream reports cudaErrorIllegalState (sticky). */
	RFEMU_HAZARD_SOURCE_MODIFIED = 0,
	/* cudaHostUnregister of a range a pending copy reads or writes: the
	 * call fails with cudaErrorIllegalState and the range stays
	 * registered. */
	RFEMU_HAZARD_UNREGISTER_PENDING,
	/* cudaFreeHost of memory a pending copy uses: refused the same way. */
	RFEMU_HAZARD_FREEHOST_PENDING,
	/* cudaFree of a device buffer that pending work (a copy, or a host
	 * function tagged with rfemu_host_func_reads) uses: refused the same
	 * way. */
	RFEMU_HAZARD_FREE_PENDING,
	/* A device range was written while an earlier-enqueued reader of it on
	 * another stream (a host function tagged with rfemu_host_func_reads,
	 * or a copy out of it) had not finished: nothing ordered the write
	 * after the read.  The writer's stream reports cudaErrorIllegalState. */
	RFEMU_HAZARD_OVERWRITE_IN_USE,
	/* A reader of a device range started while an earlier-enqueued write
	 * to it on another stream had not finished (the consumer did not wait
	 * for the ready event).  The reader's stream reports the error. */
	RFEMU_HAZARD_READ_BEFORE_READY,
	/* Two writes to the same device range on different streams with no
	 * order between them. */
	RFEMU_HAZARD_WRITE_WRITE,
	/* A cudart function was called from a host function (CUDA forbids it);
	 * the call fails with cudaErrorNotPermitted. */
	RFEMU_HAZARD_API_IN_HOST_FUNC,
	/* A stream or event handle that was destroyed or never created; the
	 * call fails with cudaErrorInvalidResourceHandle. */
	RFEMU_HAZARD_BAD_HANDLE,
	/* Counted at process exit: device allocations, pinned allocations,
	 * registered ranges, streams or events still alive. */
	RFEMU_HAZARD_LEAK_AT_EXIT,
	RFEMU_HAZARD_COUNT
};

/*
 * Counters since the process started or since rfemu_reset_counters().
 * Totals and peaks are reset by it; live_* and *_bytes describe the present
 * state and are never reset.
 */
struct rfemu_counters {
	uint32_t size;			/* sizeof(struct rfemu_counters), set by the emulator */
	uint32_t version;		/* RFEMU_COUNTERS_VERSION */

	uint64_t copies;		/* copies executed, all directions */
	uint64_t bytes_copied;		/* bytes moved by them */
	uint64_t bytes_h2d;
	uint64_t bytes_d2h;
	uint64_t bytes_d2d;
	uint64_t pageable_copies;	/* copies with a pageable host side (ran synchronously) */
	uint64_t pageable_h2d;		/* of which host-to-device */
	uint64_t host_funcs;		/* host functions run */

	uint64_t hazards[RFEMU_HAZARD_COUNT];
	uint64_t hazards_total;

	uint64_t device_bytes;		/* cudaMalloc bytes live now */
	uint64_t peak_device_bytes;
	uint64_t live_allocations;	/* cudaMalloc allocations live now */
	uint64_t registered_bytes;	/* cudaHostRegister bytes live now */
	uint64_t peak_registered_bytes;
	uint64_t live_registered_ranges;
	uint64_t host_alloc_bytes;	/* cudaMallocHost/cudaHostAlloc bytes live now */
	uint64_t peak_host_alloc_bytes;
	uint64_t live_host_allocs;
	uint64_t peak_pinned_bytes;	/* registered + host-allocated, at its highest */

	uint64_t live_streams;		/* created and not destroyed (implicit streams excluded) */
	uint64_t live_events;
	uint64_t worker_threads;	/* stream worker threads alive, implicit streams included */
	uint64_t pending_ops;		/* operations enqueued and not finished */
	uint64_t api_errors;		/* cudart calls that returned an error other than cudaErrorNotReady */
};

#define RFEMU_COUNTERS_VERSION 1

/*
 * Exported by libcudart-emulator.so (look them up with dlsym, or link the
 * library):
 *
 * int rfemu_get_counters(struct rfemu_counters *out, size_t size);
 *	Fills the first `size` bytes of *out (callers pass sizeof(*out), so an
 *	older caller reads a newer emulator).  Returns 0, or -EINVAL.
 *
 * void rfemu_reset_counters(void);
 *	Zeroes totals and hazard counts; peaks restart from the live values.
 *	A test that commits hazards on purpose calls it once it has checked
 *	them, so the exit check (RINGFEED_EMU_EXIT_STATUS) does not fail it.
 *
 * int rfemu_host_func_reads(void *stream, const void *dev_ptr, size_t len);
 *	Declares that the next host function launched on `stream`
 *	(cudaLaunchHostFunc) reads [dev_ptr, dev_ptr + len) of device memory;
 *	call it once per range, any number of times, before the launch.  Tests
 *	model a training step as such a host function; the emulator then
 *	checks writes to those bytes against it (OVERWRITE_IN_USE) and it
 *	against pending writes (READ_BEFORE_READY), and cudaFree refuses the
 *	buffer while it is pending.  Returns 0, or a cudaError_t:
 *	cudaErrorInvalidValue when the range is not inside one device
 *	allocation, cudaErrorInvalidResourceHandle for a bad stream.
 *
 * int rfemu_set_option(const char *name, const char *value);
 *	Changes one RINGFEED_EMU_* setting at run time (same names and syntax
 *	as the environment, e.g. ("RINGFEED_EMU_BW", "1M")); it applies to
 *	work enqueued afterwards.  Returns 0, or -EINVAL.
 *
 * const char *rfemu_hazard_name(int kind);
 *	"source_modified", "unregister_pending", ...; "unknown" out of range.
 *
 * void rfemu_report(void);
 *	Prints the counters and every live object to stderr (what the exit
 *	report prints).
 *
 * int rfemu_pointer_device(const void *p);
 *	The device (ordinal) of the device allocation that holds p, or -1
 *	when p is in none: which GPU a batch was delivered to.
 *
 * void *rfemu_device_view(const void *dev_ptr, size_t len);
 *	Where the bytes [dev_ptr, dev_ptr + len) of one device allocation
 *	live in host memory, or NULL when the range is not inside one.  Device
 *	pointers themselves fault when the host dereferences them (SIGSEGV,
 *	as on a GPU); this is a kernel's view of device memory, for a host
 *	function that models one (a training step) and must not call cudart.
 *	Valid until the allocation is freed.  A test that can copy the bytes
 *	back (cudaMemcpy) should: that is what it must do on a GPU.
 */

/* For programs that link the library (its own tests); others look the
 * functions up with dlsym, through rfemu_api_load(). */
int rfemu_get_counters(struct rfemu_counters *out, size_t size);
void rfemu_reset_counters(void);
int rfemu_host_func_reads(void *stream, const void *dev_ptr, size_t len);
int rfemu_set_option(const char *name, const char *value);
const char *rfemu_hazard_name(int kind);
void rfemu_report(void);
int rfemu_pointer_device(const void *p);
void *rfemu_device_view(const void *dev_ptr, size_t len);

typedef int (*rfemu_get_counters_fn)(struct rfemu_counters *out, size_t size);
typedef void (*rfemu_reset_counters_fn)(void);
typedef int (*rfemu_host_func_reads_fn)(void *stream, const void *dev_ptr, size_t len);
typedef int (*rfemu_set_option_fn)(const char *name, const char *value);
typedef const char *(*rfemu_hazard_name_fn)(int kind);
typedef void (*rfemu_report_fn)(void);
typedef int (*rfemu_pointer_device_fn)(const void *p);
typedef void *(*rfemu_device_view_fn)(const void *dev_ptr, size_t len);

/*
 * The emulator's functions plus the cudart functions a test needs to play
 * the training program (a consumer stream, events, host functions), typed
 * without the CUDA headers.  Filled by rfemu_api_load().
 */
struct rfemu_api {
	void *handle;
	rfemu_get_counters_fn get_counters;
	rfemu_reset_counters_fn reset_counters;
	rfemu_host_func_reads_fn host_func_reads;
	rfemu_set_option_fn set_option;
	rfemu_hazard_name_fn hazard_name;
	rfemu_report_fn report;
	rfemu_pointer_device_fn pointer_device;
	rfemu_device_view_fn device_view;

	int (*stream_create)(void **stream);
	int (*stream_destroy)(void *stream);
	int (*stream_synchronize)(void *stream);
	int (*stream_wait_event)(void *stream, void *event, unsigned int flags);
	int (*event_create)(void **event);
	int (*event_destroy)(void *event);
	int (*event_record)(void *event, void *stream);
	int (*event_synchronize)(void *event);
	int (*launch_host_func)(void *stream, void (*fn)(void *), void *user_data);
	int (*device_synchronize)(void);
	int (*set_device)(int device);
	int (*get_device)(int *device);
	int (*get_device_count)(int *count);
};

/*
 * Loads the emulator named by RINGFEED_CUDART (or `path` when not NULL):
 * the instance already in the process when there is one (RTLD_NOLOAD),
 * else a fresh load.  Returns 0 and fills *api, or -1 when the variable is
 * unset or the library or one of its symbols is missing (a test then skips
 * or fails, as it sees fit).  The handle is never closed.
 */
static inline int
rfemu_api_load(struct rfemu_api *api, const char *path)
{
	void *h;

	memset(api, 0, sizeof(*api));
	if (!path)
		path = getenv("RINGFEED_CUDART");
	if (!path || !*path)
		return -1;
	h = dlopen(path, RTLD_NOLOAD | RTLD_NOW);
	if (!h)
		h = dlopen(path, RTLD_NOW);
	if (!h)
		return -1;
	api->handle = h;
	/* POSIX lets a void * from dlsym be converted to a function pointer;
	 * the memcpy form keeps -Wpedantic quiet about it. */
#define RFEMU_SYM_(field, name) do { \
		void *p_ = dlsym(h, name); \
		if (!p_) \
			return -1; \
		memcpy(&api->field, &p_, sizeof(p_)); \
	} while (0)
	RFEMU_SYM_(get_counters, "rfemu_get_counters");
	RFEMU_SYM_(reset_counters, "rfemu_reset_counters");
	RFEMU_SYM_(host_func_reads, "rfemu_host_func_reads");
	RFEMU_SYM_(set_option, "rfemu_set_option");
	RFEMU_SYM_(hazard_name, "rfemu_hazard_name");
	RFEMU_SYM_(report, "rfemu_report");
	RFEMU_SYM_(pointer_device, "rfemu_pointer_device");
	RFEMU_SYM_(device_view, "rfemu_device_view");
	RFEMU_SYM_(stream_create, "cudaStreamCreate");
	RFEMU_SYM_(stream_destroy, "cudaStreamDestroy");
	RFEMU_SYM_(stream_synchronize, "cudaStreamSynchronize");
	RFEMU_SYM_(stream_wait_event, "cudaStreamWaitEvent");
	RFEMU_SYM_(event_create, "cudaEventCreate");
	RFEMU_SYM_(event_destroy, "cudaEventDestroy");
	RFEMU_SYM_(event_record, "cudaEventRecord");
	RFEMU_SYM_(event_synchronize, "cudaEventSynchronize");
	RFEMU_SYM_(launch_host_func, "cudaLaunchHostFunc");
	RFEMU_SYM_(device_synchronize, "cudaDeviceSynchronize");
	RFEMU_SYM_(set_device, "cudaSetDevice");
	RFEMU_SYM_(get_device, "cudaGetDevice");
	RFEMU_SYM_(get_device_count, "cudaGetDeviceCount");
#undef RFEMU_SYM_
	return 0;
}

/* One call: the counters of the loaded emulator; -1 when it is not loaded. */
static inline int
rfemu_counters_read(struct rfemu_counters *out)
{
	struct rfemu_api api;

	if (rfemu_api_load(&api, NULL) != 0)
		return -1;
	return api.get_counters(out, sizeof(*out)) == 0 ? 0 : -1;
}

#ifdef __cplusplus
}
#endif

#endif /* RFEMU_EMULATOR_H */
