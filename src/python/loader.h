/* SPDX-License-Identifier: MIT */
/*
 * Internal declarations of the module's streaming loader: the Loader type
 * (loader.c, loader_open.c, loader_state.c), its core and held batches
 * (core.c) and the arrays of a batch (array.c).  A batch is a dict
 * {field: Array}, where an Array speaks DLPack.
 *
 * Ownership, the part that must not go wrong:
 *  - A C loader and what Python holds of it live in a `struct core`.  A
 *    BatchObject stands for one batch taken from the core's loader; every
 *    Array of the batch holds a reference to it, and every DLPack capsule or
 *    consumer tensor holds a reference to its Array (manager_ctx).  So the
 *    batch object dies, and the batch goes back to the loader with
 *    rf_loader_release, only when the last array made from it is gone: the
 *    dict, our Array objects, and every torch/numpy/cupy tensor built from
 *    them.  It is released on the stream last given to __dlpack__, so the
 *    buffer is refilled only after the consumer's queued work on it.
 *  - The core outlives the Loader object while batches are alive: closing or
 *    collecting a Loader (or restarting it at another epoch) retires its
 *    core, and a retired core closes its C loader when its last batch is
 *    released.  Memory a consumer still uses is never freed under it.
 *  - Everything here runs with the GIL held, except the waits and closes
 *    (which touch only the C loader).  A DLPack deleter may be called on
 *    any thread: it takes the GIL first.
 */
#ifndef RFPY_LOADER_H
#define RFPY_LOADER_H

#include "module.h"

struct core {
	rf_loader *ld;
	uint32_t held;           /* batches taken and not yet released (stash included) */
	int retired;             /* the Loader let go: close when held reaches 0 */
	int stopping;            /* rfpy_core_retire is in rf_loader_stop, without
	                            the GIL: a last release meanwhile leaves the
	                            close to it */
	const rf_batch *stash;   /* first batch of the next epoch, taken early; or
	                            one whose next() a signal interrupted */
	PyObject *kept;          /* a batch's dict made, then a signal came:
	                            the next next() returns it (GIL) */
	DLDevice device;
	int have_epoch0;         /* c_epoch0 is known */
	uint64_t c_epoch0;       /* rf_batch.epoch of the first batch taken */
	uint64_t epoch0;         /* the Python epoch that c_epoch0 stands for */
	uint64_t wait_ns;        /* waiting in rf_batch_wait for host batches (the
	                            library counts only its next calls as stall) */
	uint64_t in_place;       /* batches taken read-only where they lie in the
	                            shards' maps (RF_BATCH_READONLY) */
	/* Made once rather than per batch or per conversion: */
	PyObject *dev_tuple;     /* __dlpack_device__'s (type, id) */
	PyObject *names;         /* the batches' field names (interned str), a tuple
	                            made from the first batch: one C loader's
	                            fields never change */
	long pid;                /* the process that opened it */
};


typedef struct {
	PyObject_HEAD
	struct core *core;
	const rf_batch *b;
	void *stream;            /* the stream to release on: the consumer's last */
	unsigned long stream_thread; /* who gave stream 2 (cudaStreamPerThread) */
} BatchObject;

/* DLPack's stream numbers that name CUDA's default streams. */
#define RFPY_STREAM_LEGACY ((void *)(uintptr_t)1)
#define RFPY_STREAM_PER_THREAD ((void *)(uintptr_t)2)


typedef struct {
	PyObject_HEAD
	BatchObject *batch;
	void *data;
	enum rf_dtype dtype;
	int ndim;
	int64_t shape[RF_BATCH_MAX_DIMS];
	Py_ssize_t bshape[RF_BATCH_MAX_DIMS];   /* for the buffer protocol */
	Py_ssize_t bstrides[RF_BATCH_MAX_DIMS];
} ArrayObject;

/* Device buffers the C loader has beyond the `depth` batches the consumer
 * may hold (see rfpy_loader_open_core). */
#define RFPY_SPARE_BUFFERS 1

typedef struct {
	PyObject_HEAD
	struct core *core;       /* NULL when closed */
	int busy;                /* a call runs without the GIL */
	int waiting;             /* ... and it is next()'s wait for a batch */
	int close_req;           /* close() from another thread during that wait:
	                            1 while it waits for the waiting thread to
	                            leave (wait_next), 2 when it gave up */
	struct core *close_core; /* what the waiting thread left: the closer's to
	                            retire */
	int closed;
	rf_config cfg;
	PyObject *keep;          /* bytes objects owning the strings in cfg */
	const char **paths;
	const char **fields;
	uint64_t samples;        /* in the dataset */
	uint64_t nbatches;       /* per epoch, this rank */
	enum rf_shuffle shuffle;
	uint64_t seed;
	uint32_t rank, world;
	const char *rank_source; /* rf_rank_resolve's source (a static string) */
	uint64_t epoch;          /* the epoch being (or about to be) iterated */
	uint64_t in_epoch;       /* batches yielded in it */
	int fresh;               /* nothing yielded since the epoch's start or a restore */
	uint64_t gen;            /* pass counter: an older iterator stops */
	PyObject *to_tensor;     /* tensors="torch": torch.from_dlpack; NULL: Arrays */
	rf_source *sources;      /* a mixture (ringfeed.Source list), else NULL */
} LoaderObject;

typedef struct {
	PyObject_HEAD
	LoaderObject *loader;
	uint64_t gen;
} IterObject;

/* The types, made at the module's init from their specs (heap types). */
extern PyType_Spec rfpy_batch_spec, rfpy_array_spec;
extern PyTypeObject *rfpy_BatchType, *rfpy_ArrayType;
/* rfpy_array_spec as the running CPython takes it (array.c). */
PyType_Spec *rfpy_array_spec_pick(void);

/* core.c */
/* In a child of fork(): the C loader is the parent's (rf_loader_forked). */
int rfpy_core_forked(const struct core *c);
/* Raise ringfeed.Error EFORK for a core used in a child of fork(). */
PyObject *rfpy_raise_forked(const struct core *c);
/* Close c's C loader (without the GIL) and free c. */
void rfpy_core_close_now(struct core *c);
/* Hand batch b back to c's loader on `stream`; a retired core closes with
 * its last batch. */
void rfpy_core_release(struct core *c, const rf_batch *b, void *stream);
/* The Loader lets go of c (NULL: nothing): closed now or with its last
 * held batch. */
void rfpy_core_retire(struct core *c);

/* array.c */
/* A new Array over `data` of batch (a new reference to it), NULL with an
 * exception. */
ArrayObject *rfpy_array_new(BatchObject *batch, void *data, enum rf_dtype dtype, int ndim,
			    const int64_t *shape);

/* loader_open.c */
void rfpy_loader_free_config(LoaderObject *self);
/* Open a C loader at epoch `epoch` into a new core; with a position blob
 * (resume, of len bytes) from rf_loader_state_save, at that position. */
int rfpy_loader_open_core(LoaderObject *self, uint64_t epoch, const void *resume, size_t len);
int rfpy_loader_init_args(LoaderObject *self, PyObject *args, PyObject *kwargs);
/* loader_images.c: Loader(images=...).  split: *images (borrowed from
 * kwargs, NULL when absent or None) and *rest, a new copy of kwargs
 * without it (NULL when absent); config: the entries into cfg->images,
 * their memory kept in keep. */
int rfpy_images_split(PyObject *kwargs, PyObject **images, PyObject **rest);
int rfpy_images_config(PyObject *images, PyObject *keep, rf_config *cfg);
/* Where the rank and world came from, as Python shows it (rf_rank_resolve's
 * source with "config" spelled "arguments"). */
PyObject *rfpy_rank_source(const char *src);

/* loader.c */
/* 0, or -1 with an exception: the loader is closed, busy or forked. */
int rfpy_loader_usable(LoaderObject *self);
/* Wait for the loader's next batch into *out (NULL at the epoch's end). */
int rfpy_wait_next(LoaderObject *self, const rf_batch **out);

/* loader_state.c */
PyObject *rfpy_loader_state_dict(LoaderObject *self, PyObject *unused);
PyObject *rfpy_loader_load_state_dict(LoaderObject *self, PyObject *state);

#endif
