/* SPDX-License-Identifier: MIT */
/*
 * The device backend interface: the few operations the loader needs from a
 * GPU runtime.  Two backends implement it:
 *  - host: "device" memory is host memory, async copies run on a copy thread
 *    per stream (FIFO), events are completion flags.  Always built.
 *  - cuda: the CUDA runtime (cudart) loaded with dlopen at open time
 *    (RINGFEED_CUDART, else a libcudart.so.13 or .12 already in the process,
 *    else the first of libcudart.so.13, libcudart.so.12 that starts).
 *
 * Streams and events are opaque pointers owned by the backend (for cuda they
 * are cudaStream_t / cudaEvent_t).  A NULL stream means the backend's default
 * stream (for host: synchronous, in the calling thread).
 *
 * Every function returns 0 or a negative code (RF_ECUDA with the CUDA error
 * name in the diag message, RF_ENODEVICE, -ENOMEM, ...).  Thread rules: a
 * backend may be called from several threads at once (the loader's copy
 * thread and the consumer thread); each implementation documents its locking.
 */
#ifndef RF_DEVICE_H
#define RF_DEVICE_H

#include <stddef.h>

#include "common.h"

typedef struct rf_device rf_device;

/* What a backend can do, declared in its ops (rf_device_ops.caps), so the
 * loader chooses by capability and never by the backend's name. */
enum {
	/* Device memory is host memory the consumer can read: a batch may be
	 * handed out in place, in the ring slot it was assembled in, with no
	 * copy into a device buffer. */
	RF_DEVICE_CAP_HOST_MEMORY = 1u << 0,
};

struct rf_device_ops {
	const char *name; /* "host" or "cuda": for messages */
	unsigned caps;    /* RF_DEVICE_CAP_* */
	int (*alloc)(rf_device *dev, size_t bytes, void **dptr);
	int (*free)(rf_device *dev, void *dptr);
	/* Page-lock [p, p+bytes) for async copies (cudaHostRegister). */
	int (*host_register)(rf_device *dev, void *p, size_t bytes);
	int (*host_unregister)(rf_device *dev, void *p);
	int (*stream_create)(rf_device *dev, void **stream);
	int (*stream_destroy)(rf_device *dev, void *stream);
	int (*event_create)(rf_device *dev, void **event);
	int (*event_destroy)(rf_device *dev, void *event);
	/* Enqueue a host-to-device copy on `stream`; src must stay untouched
	 * until an event recorded after it has fired. */
	int (*copy_h2d_async)(rf_device *dev, void *dst, const void *src, size_t bytes, void *stream);
	/* Blocking device-to-host copy (used to check what arrived). */
	int (*copy_d2h)(rf_device *dev, void *dst, const void *src, size_t bytes);
	int (*event_record)(rf_device *dev, void *event, void *stream);
	/* 0 when the event's work is complete, -EAGAIN while pending. */
	int (*event_query)(rf_device *dev, void *event);
	int (*event_sync)(rf_device *dev, void *event);
	/* Make `stream` wait for `event` without blocking the host. */
	int (*stream_wait_event)(rf_device *dev, void *stream, void *event);
	int (*stream_sync)(rf_device *dev, void *stream);
	int (*mem_info)(rf_device *dev, size_t *free_bytes, size_t *total_bytes);
	void (*close)(rf_device *dev);
	/* Optional (NULL: not offered).  on = 1: an idle `stream` may run small
	 * copies in the caller's thread instead of handing them to a worker
	 * (host: rf_device_host_stream_inline); order and events behave as
	 * before. */
	int (*stream_set_inline)(rf_device *dev, void *stream, int on);
};

/* Common part of every backend instance; implementations embed it first. */
struct rf_device {
	const struct rf_device_ops *ops;
	rf_diag *diag;        /* the owner's diag: messages land on the loader */
	int index;            /* device ordinal (cuda); -1 for host */
	char desc[128];       /* e.g. "cuda:0 NVIDIA H100 (cudart 13000)" or "host" */
	char why[64];         /* how the ordinal was chosen (cuda), e.g.
	                         "LOCAL_RANK=1 of 2 devices"; "" for host */
};

/* 1 when the backend declares every capability in `caps`. */
static inline int
rf_device_has(const rf_device *dev, unsigned caps)
{
	return (dev->ops->caps & caps) == caps;
}

/* Open the host backend.  Always succeeds unless out of memory. */
int rf_device_open_host(rf_device **out, rf_diag *diag);

/* Open the CUDA backend on device `index`: dlopen cudart (RINGFEED_CUDART,
 * libcudart.so.13, libcudart.so.12), resolve the symbols, cudaSetDevice.
 * index -1 chooses the ordinal: the launcher's local rank modulo the device
 * count (rf_device_local_rank), else the calling thread's current device
 * (cudaGetDevice), else 0; base.why says which.  RF_ENODEVICE with a
 * message when there is no runtime or no device; RF_EUSAGE for an index
 * below -1 or a malformed launcher variable. */
int rf_device_open_cuda(rf_device **out, int index, rf_diag *diag);

/* The launcher's local rank: the first of LOCAL_RANK (torchrun),
 * OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID that is set.
 * Returns 1 with *rank and *var (the variable's name), 0 when none is set,
 * or RF_EUSAGE with a message when the first one set is not a plain decimal
 * number in 0..2^24. */
int rf_device_local_rank(rf_diag *diag, unsigned *rank, const char **var);

/* Close and free; NULL is a no-op; clears *dev. */
void rf_device_close(rf_device **dev);

#endif
