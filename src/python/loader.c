/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.Loader: the streaming loader as a Python iterable of batches,
 * each a dict {field: Array}, where an Array speaks DLPack.
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
#include "module.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef RFPY_HAVE_LOADER

/* ------------------------------------------------------------- core */

struct core {
	rf_loader *ld;
	uint32_t held;           /* batches taken and not yet released (stash included) */
	int retired;             /* the Loader let go: close when held reaches 0 */
	const rf_batch *stash;   /* first batch of the next epoch, taken early */
	DLDevice device;
	int have_epoch0;         /* c_epoch0 is known */
	uint64_t c_epoch0;       /* rf_batch.epoch of the first batch taken */
	uint64_t epoch0;         /* the Python epoch that c_epoch0 stands for */
	uint64_t wait_ns;        /* waiting in rf_batch_wait for host batches (the
	                            library counts only its next calls as stall) */
	/* Made once rather than per batch or per conversion: */
	PyObject *dev_tuple;     /* __dlpack_device__'s (type, id) */
	PyObject *names;         /* the batches' field names (interned str), a tuple
	                            made from the first batch: one C loader's
	                            fields never change */
	unsigned forks;          /* rfpy_forks() at open: another count means a
	                            child of fork(), where the C loader's threads
	                            are not */
	long pid;                /* the process that opened it */
};

/* In a child of fork(): the C loader is the parent's.  Batches are dropped
 * without going back to it and closing frees nothing (rf_loader_close in
 * a child touches nothing the parent's threads use). */
static int
core_forked(const struct core *c)
{
	return c->forks != rfpy_forks();
}

static PyObject *
raise_forked(const struct core *c)
{
	char msg[640];

	snprintf(msg, sizeof(msg),
		 "this ringfeed.Loader was opened in process %ld and is used in process %ld, "
		 "a child of fork() (a DataLoader worker, say), where its threads are not: open "
		 "the Loader in each process that reads it; with DataLoader(num_workers=N), "
		 "inside the IterableDataset's __iter__, each worker reading its own share "
		 "(docs/python.md, \"Processes and DataLoader workers\")",
		 c->pid, (long)getpid());
	return rfpy_raise(RF_EFORK, NULL, msg);
}

static void
core_close_now(struct core *c)
{
	rf_loader *ld = c->ld;

	c->ld = NULL;
	Py_CLEAR(c->dev_tuple);
	Py_CLEAR(c->names);
	/* Joins the loader's threads: never with the GIL held (they do not
	 * take it, but the program's other threads should run meanwhile). */
	Py_BEGIN_ALLOW_THREADS
	rf_loader_close(&ld);
	Py_END_ALLOW_THREADS
	PyMem_Free(c);
}

/* Hand batch b back to c's loader on `stream`. */
static void
core_release(struct core *c, const rf_batch *b, void *stream)
{
	int rc = core_forked(c) ? 0 : rf_loader_release(c->ld, b, stream);

	if (rc < 0) {
		/* Called from a deallocator: nowhere to raise to. */
		rfpy_raise(rc, "releasing a batch", rf_loader_errmsg(c->ld));
		PyErr_WriteUnraisable(NULL);
	}
	c->held--;
	if (c->retired && c->held == 0)
		core_close_now(c);
}

static void
core_retire(struct core *c)
{
	if (!c)
		return;
	c->retired = 1;
	if (c->stash) {
		const rf_batch *b = c->stash;
		c->stash = NULL;
		core_release(c, b, NULL); /* may close and free c */
		return;
	}
	if (c->held == 0)
		core_close_now(c);
}

/* ------------------------------------------------------------ batch */

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

static void
batch_dealloc(BatchObject *self)
{
	void *stream = self->stream;

	/* The per-thread default stream of the thread that gave it: dropped
	 * on another thread, stream 2 would name that thread's stream.  The
	 * legacy default stream orders after the work of every blocking
	 * stream, the giver's per-thread stream included. */
	if (stream == RFPY_STREAM_PER_THREAD && PyThread_get_thread_ident() != self->stream_thread)
		stream = RFPY_STREAM_LEGACY;
	if (self->core && self->b)
		core_release(self->core, self->b, stream);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject BatchType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringfeed._Batch",
	.tp_basicsize = sizeof(BatchObject),
	.tp_dealloc = (destructor)batch_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One batch held from the loader (internal).",
};

/* ------------------------------------------------------------ array */

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

static PyTypeObject ArrayType;

static void
array_dealloc(ArrayObject *self)
{
	Py_XDECREF(self->batch);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static ArrayObject *
array_new(BatchObject *batch, void *data, enum rf_dtype dtype, int ndim, const int64_t *shape)
{
	ArrayObject *a = PyObject_New(ArrayObject, &ArrayType);

	if (!a)
		return NULL;
	a->batch = (BatchObject *)Py_NewRef(batch);
	a->data = data;
	a->dtype = dtype;
	a->ndim = ndim;
	memcpy(a->shape, shape, (size_t)ndim * sizeof(*shape));
	Py_ssize_t stride = (Py_ssize_t)rf_dtype_size(dtype);
	for (int d = ndim - 1; d >= 0; d--) {
		a->bshape[d] = (Py_ssize_t)shape[d];
		a->bstrides[d] = stride;
		stride *= (Py_ssize_t)shape[d];
	}
	return a;
}

static uint64_t
array_nbytes(const ArrayObject *a)
{
	uint64_t n = rf_dtype_size(a->dtype);

	for (int d = 0; d < a->ndim; d++)
		n *= (uint64_t)a->shape[d];
	return n;
}

static void
dl_deleter(DLManagedTensor *m)
{
	/* The consumer may call this on any thread, with or without the GIL.
	 * After the interpreter is gone there is nothing left to release. */
	if (Py_IsInitialized()) {
		PyGILState_STATE g = PyGILState_Ensure();
		Py_XDECREF((PyObject *)m->manager_ctx);
		PyGILState_Release(g);
	}
	free(m);
}

static void
capsule_destructor(PyObject *cap)
{
	/* A consumer renames the capsule when it takes ownership; then the
	 * deleter is its business. */
	if (PyCapsule_IsValid(cap, "used_dltensor"))
		return;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
	if (m)
		m->deleter(m);
	else
		PyErr_WriteUnraisable(cap);
	PyErr_Restore(type, value, tb);
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)'s
 * keywords, parsed by hand: the vectorcall convention spares the tuple and
 * dict of the generic parser on a call made for every field of every
 * batch. */
static int
dlpack_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **vals)
{
	static const char *const names[] = {"stream", "max_version", "dl_device", "copy"};
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

	if (nargs > 0) {
		PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
		return -1;
	}
	for (Py_ssize_t k = 0; k < nkw; k++) {
		PyObject *key = PyTuple_GET_ITEM(kwnames, k);
		size_t i = 0;
		while (i < 4 && PyUnicode_CompareWithASCIIString(key, names[i]) != 0)
			i++;
		if (i == 4) {
			PyErr_Format(PyExc_TypeError,
				     "__dlpack__() got an unexpected keyword argument %R", key);
			return -1;
		}
		vals[i] = args[k];
	}
	return 0;
}

static PyObject *
array_dlpack(ArrayObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *vals[4] = {Py_None, Py_None, Py_None, Py_None};
	BatchObject *batch = self->batch;
	DLDevice dev = batch->core->device;

	if (dlpack_args(args, nargs, kwnames, vals) < 0)
		return NULL;
	PyObject *stream = vals[0], *dl_device = vals[2], *copy = vals[3];
	if (dl_device != Py_None) {
		int dt, di;
		if (!PyTuple_Check(dl_device)) {
			PyErr_Format(PyExc_TypeError, "dl_device must be a (device_type, "
				     "device_id) tuple, not %.100s", Py_TYPE(dl_device)->tp_name);
			return NULL;
		}
		if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &dt, &di))
			return NULL;
		if (dt != (int)dev.device_type || di != (int)dev.device_id) {
			PyErr_Format(PyExc_BufferError,
				     "the array is on device (%d, %d); exporting to (%d, %d) would "
				     "need a copy", (int)dev.device_type, (int)dev.device_id, dt, di);
			return NULL;
		}
	}
	if (copy == Py_True) {
		PyErr_SetString(PyExc_BufferError, "ringfeed arrays are exported without a copy; "
				"copy=True is not supported (copy the consumer's tensor instead)");
		return NULL;
	}
	if (dev.device_type == kDLCUDA) {
		/* DLPack: None is the legacy default stream (1), -1 asks for no
		 * synchronisation, 0 is ambiguous and disallowed. */
		long long s = 1;
		if (stream != Py_None) {
			s = PyLong_AsLongLong(stream);
			if (s == -1 && PyErr_Occurred())
				return NULL;
			if (s == 0 || s < -1) {
				PyErr_Format(PyExc_ValueError, "invalid CUDA stream %lld for __dlpack__", s);
				return NULL;
			}
		}
		if (s != -1) {
			void *st = (void *)(uintptr_t)s;
			int rc = rf_batch_wait(batch->b, st);
			if (rc < 0)
				return rfpy_raise(rc, "waiting for a batch", rf_loader_errmsg(batch->core->ld));
			batch->stream = st;
			batch->stream_thread = PyThread_get_thread_ident();
		}
	} else if (stream != Py_None) {
		long long s = PyLong_AsLongLong(stream);
		if (s == -1 && PyErr_Occurred())
			return NULL;
		if (s != -1) {
			PyErr_SetString(PyExc_ValueError,
					"stream must be None for an array on the CPU");
			return NULL;
		}
	}

	size_t n = (size_t)(self->ndim ? self->ndim : 1);
	DLManagedTensor *m = malloc(sizeof(*m) + n * sizeof(int64_t));
	if (!m)
		return PyErr_NoMemory();
	memset(m, 0, sizeof(*m));
	int64_t *shape = (int64_t *)(void *)(m + 1);
	memcpy(shape, self->shape, (size_t)self->ndim * sizeof(int64_t));
	m->dl_tensor.data = self->data;
	m->dl_tensor.device = dev;
	m->dl_tensor.ndim = self->ndim;
	m->dl_tensor.dtype = rfpy_dl_dtype(self->dtype);
	m->dl_tensor.shape = shape;
	m->dl_tensor.strides = NULL;
	m->dl_tensor.byte_offset = 0;
	m->manager_ctx = Py_NewRef(self);
	m->deleter = dl_deleter;
	PyObject *cap = PyCapsule_New(m, "dltensor", capsule_destructor);
	if (!cap) {
		Py_DECREF(self);
		free(m);
	}
	return cap;
}

static PyObject *
array_dlpack_device(ArrayObject *self, PyObject *unused)
{
	return Py_NewRef(self->batch->core->dev_tuple);
}

static PyObject *
array_shape(ArrayObject *self, void *unused)
{
	PyObject *t = PyTuple_New(self->ndim);

	if (!t)
		return NULL;
	for (int d = 0; d < self->ndim; d++) {
		PyObject *o = PyLong_FromLongLong(self->shape[d]);
		if (!o) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, d, o);
	}
	return t;
}

static PyObject *
array_dtype(ArrayObject *self, void *unused)
{
	return PyUnicode_FromString(rf_dtype_name(self->dtype));
}

static PyObject *
array_device(ArrayObject *self, void *unused)
{
	DLDevice d = self->batch->core->device;

	if (d.device_type == kDLCUDA)
		return PyUnicode_FromFormat("cuda:%d", (int)d.device_id);
	return PyUnicode_FromString("cpu");
}

static PyObject *
array_nbytes_get(ArrayObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(array_nbytes(self));
}

static PyObject *
array_ndim(ArrayObject *self, void *unused)
{
	return PyLong_FromLong(self->ndim);
}

static PyObject *
array_ptr(ArrayObject *self, void *unused)
{
	return PyLong_FromVoidPtr(self->data);
}

static PyObject *
array_repr(ArrayObject *self)
{
	PyObject *shape = array_shape(self, NULL), *dev = array_device(self, NULL), *r = NULL;

	if (shape && dev)
		r = PyUnicode_FromFormat("ringfeed.Array(shape=%R, dtype=%s, device=%U)", shape,
					 rf_dtype_name(self->dtype), dev);
	Py_XDECREF(shape);
	Py_XDECREF(dev);
	return r;
}

static int
array_getbuffer(ArrayObject *self, Py_buffer *view, int flags)
{
	const char *fmt = rfpy_buffer_format(self->dtype);

	if (self->batch->core->device.device_type != kDLCPU) {
		PyErr_SetString(PyExc_BufferError,
				"the array is in device memory: use torch.from_dlpack or cupy.from_dlpack");
		return -1;
	}
	if (!fmt) {
		PyErr_SetString(PyExc_BufferError,
				"bf16 has no buffer-protocol format: use torch.from_dlpack");
		return -1;
	}
	if (flags & PyBUF_WRITABLE) {
		PyErr_SetString(PyExc_BufferError, "ringfeed arrays are read-only");
		return -1;
	}
	view->obj = Py_NewRef(self);
	view->buf = self->data;
	view->len = (Py_ssize_t)array_nbytes(self);
	view->readonly = 1;
	view->itemsize = (Py_ssize_t)rf_dtype_size(self->dtype);
	view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
	view->ndim = self->ndim;
	view->shape = (flags & PyBUF_ND) ? self->bshape : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->bstrides : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	return 0;
}

/* numpy.asarray tries the buffer protocol first and, when it fails (device
 * memory, bf16), falls back to __array__ and else to a 0-d object array: a
 * silent wrong value.  So __array__ raises TypeError saying why; on the host
 * it returns the buffer's array (no copy), which is what numpy made of it
 * already. */
static PyObject *
array_array(ArrayObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"dtype", "copy", NULL};
	PyObject *dtype = Py_None, *copy = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", kwlist, &dtype, &copy))
		return NULL;
	if (self->batch->core->device.device_type != kDLCPU) {
		PyErr_Format(PyExc_TypeError,
			     "the array is in device memory (cuda:%d): NumPy cannot read it; use "
			     "torch.from_dlpack(a) (or cupy.from_dlpack), and .cpu().numpy() for a "
			     "host copy, or a Loader with device=\"cpu\"",
			     (int)self->batch->core->device.device_id);
		return NULL;
	}
	PyObject *mv = PyMemoryView_FromObject((PyObject *)self);
	if (!mv) {
		if (PyErr_ExceptionMatches(PyExc_BufferError)) {
			PyObject *type, *value, *tb;
			PyErr_Fetch(&type, &value, &tb);
			PyObject *m = value ? PyObject_Str(value) : NULL;
			Py_XDECREF(type);
			Py_XDECREF(value);
			Py_XDECREF(tb);
			if (m) {
				PyErr_Format(PyExc_TypeError, "NumPy cannot read this array: %U", m);
				Py_DECREF(m);
			}
		}
		return NULL;
	}
	PyObject *np = PyImport_ImportModule("numpy");
	PyObject *r = NULL;
	if (np) {
		r = dtype == Py_None ? PyObject_CallMethod(np, "asarray", "O", mv)
				     : PyObject_CallMethod(np, "asarray", "OO", mv, dtype);
		Py_DECREF(np);
	}
	Py_DECREF(mv);
	if (r && copy != Py_None && PyObject_IsTrue(copy) == 1)
		Py_SETREF(r, PyObject_CallMethod(r, "copy", NULL));
	return r;
}

static PyBufferProcs array_as_buffer = {
	.bf_getbuffer = (getbufferproc)array_getbuffer,
};

static PyMethodDef array_methods[] = {
	{"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_FASTCALL | METH_KEYWORDS,
	 "__dlpack__(*, stream=None) -> PyCapsule\n\n"
	 "Export without a copy.  For a CUDA array the consumer's stream (an integer\n"
	 "cudaStream_t; None or 1 the legacy default stream, 2 the per-thread one)\n"
	 "is made to wait for the batch's copy, without blocking the host; the batch\n"
	 "goes back to the loader on that stream once every array of it is released."},
	{"__array__", (PyCFunction)(void (*)(void))array_array, METH_VARARGS | METH_KEYWORDS,
	 "__array__($self, /, dtype=None, copy=None)\n--\n\n"
	 "numpy.asarray(a): the array itself on the host (no copy); TypeError for\n"
	 "device memory or bf16, which NumPy cannot read."},
	{"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS,
	 "(device_type, device_id): (1, 0) for the CPU, (2, N) for CUDA device N."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
	{"shape", (getter)array_shape, NULL, "The shape, batch dimension first.", NULL},
	{"dtype", (getter)array_dtype, NULL, "The element type's ringfeed name (\"f32\", \"bf16\", ...).", NULL},
	{"device", (getter)array_device, NULL, "\"cpu\" or \"cuda:N\".", NULL},
	{"nbytes", (getter)array_nbytes_get, NULL, "Bytes of data.", NULL},
	{"ndim", (getter)array_ndim, NULL, "Number of dimensions.", NULL},
	{"data_ptr", (getter)array_ptr, NULL, "Address of the first element.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ArrayType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringfeed.Array",
	.tp_basicsize = sizeof(ArrayObject),
	.tp_dealloc = (destructor)array_dealloc,
	.tp_repr = (reprfunc)array_repr,
	.tp_as_buffer = &array_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A field of a batch in the loader's buffer, exported without a copy through\n"
		  "DLPack (torch.from_dlpack, numpy.from_dlpack, cupy.from_dlpack) and, on the\n"
		  "CPU, the buffer protocol (read-only).  The batch's buffer returns to the\n"
		  "loader when every array of the batch, and every tensor made from one, is gone.",
	.tp_methods = array_methods,
	.tp_getset = array_getset,
};

/* ----------------------------------------------------------- loader */

enum { SHUFFLE_NONE, SHUFFLE_CHUNKS, SHUFFLE_WINDOW, SHUFFLE_FULL };

/* Device buffers the C loader has beyond the `depth` batches the consumer
 * may hold (see loader_open_core). */
#define RFPY_SPARE_BUFFERS 1
/* The C loader's most device buffers (rf_loader_open refuses more). */
#define RFPY_MAX_BUFFERS 64
static const char *const shuffle_names[] = {"none", "chunks", "window", "full"};

typedef struct {
	PyObject_HEAD
	struct core *core;       /* NULL when closed */
	int busy;                /* a call runs without the GIL */
	int closed;
	rf_config cfg;
	PyObject *keep;          /* bytes objects owning the strings in cfg */
	const char **paths;
	const char **fields;
	uint64_t samples;        /* in the dataset */
	uint64_t nbatches;       /* per epoch, this rank */
	int shuffle;
	uint64_t seed;
	uint32_t rank, world;
	uint64_t epoch;          /* the epoch being (or about to be) iterated */
	uint64_t in_epoch;       /* batches yielded in it */
	int fresh;               /* nothing yielded since the epoch's start or a restore */
	uint64_t gen;            /* pass counter: an older iterator stops */
} LoaderObject;

typedef struct {
	PyObject_HEAD
	LoaderObject *loader;
	uint64_t gen;
} IterObject;

static PyTypeObject IterType;

static void
loader_free_config(LoaderObject *self)
{
	PyMem_Free(self->paths);
	PyMem_Free(self->fields);
	self->paths = NULL;
	self->fields = NULL;
	Py_CLEAR(self->keep);
}

static void
loader_dealloc(LoaderObject *self)
{
	struct core *old = self->core;
	self->core = NULL;
	core_retire(old);
	loader_free_config(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Open a C loader at epoch `epoch` into a new core; with a position blob
 * (resume, of len bytes) from rf_loader_state_save, at that position. */
static int
loader_open_core(LoaderObject *self, uint64_t epoch, const void *resume, size_t len)
{
	struct core *c = PyMem_Calloc(1, sizeof(*c));
	rf_loader *ld = NULL;
	rf_config cfg = self->cfg;
	char msg[1024];
	int rc;

	if (!c) {
		PyErr_NoMemory();
		return -1;
	}
	cfg.epoch = epoch;
	cfg.resume = resume;
	cfg.resume_len = len;
	/* One device buffer more than the consumer may hold (loader_take
	 * enforces `depth`): a `for` loop still holds the previous batch, in
	 * its variable, while it asks for the next one, so with exactly depth
	 * buffers one of them would sit idle at every step and the copy of the
	 * next batch would wait for the consumer.  The spare keeps depth
	 * buffers refilling while the loop body runs. */
	cfg.depth = self->cfg.depth + RFPY_SPARE_BUFFERS;
	self->busy = 1;
	Py_BEGIN_ALLOW_THREADS
	rc = rf_loader_open(&ld, &cfg);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", rf_loader_last_open_error());
	Py_END_ALLOW_THREADS
	self->busy = 0;
	if (rc < 0) {
		PyMem_Free(c);
		if (rc == RF_EMEMPLAN) {
			/* The library's figures count the spare buffer. */
			size_t n = strlen(msg);
			snprintf(msg + n, sizeof(msg) - n,
				 " (the Python loader opens depth + %d = %u device buffers: "
				 "depth=%u batches held plus one being refilled)",
				 RFPY_SPARE_BUFFERS, cfg.depth, self->cfg.depth);
		}
		if (rc == RF_EUSAGE && strstr(msg, "shuffle") && strstr(msg, "not supported")) {
			PyErr_Format(PyExc_ValueError,
				     "shuffle mode \"%s\" is not supported by this build (%s)",
				     shuffle_names[self->shuffle], msg);
			return -1;
		}
		rfpy_raise(rc, "Loader", msg);
		return -1;
	}
	c->ld = ld;
	c->forks = rfpy_forks();
	c->pid = (long)getpid();
	c->epoch0 = epoch;
	c->device.device_type = kDLCPU;
	c->device.device_id = 0;
	rf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (rf_loader_stats(ld, &st) == 0 && st.device_ordinal >= 0) {
		c->device.device_type = kDLCUDA;
		c->device.device_id = st.device_ordinal;
		/* The device chosen at the first open (the launcher's local
		 * rank, the thread's current device) stays the loader's for
		 * every later epoch, whatever thread opens it. */
		if (self->cfg.device_index < 0)
			self->cfg.device_index = st.device_ordinal;
	}
	c->dev_tuple = Py_BuildValue("(ii)", (int)c->device.device_type, (int)c->device.device_id);
	if (!c->dev_tuple) {
		core_close_now(c);
		return -1;
	}
	/* Swap before retiring: retiring may close the old loader without
	 * the GIL, and no other thread may reach it through self meanwhile. */
	struct core *old = self->core;
	self->core = c;
	core_retire(old);
	self->epoch = epoch;
	self->in_epoch = 0;
	self->fresh = 1;
	self->gen++;
	return 0;
}

static int
loader_usable(LoaderObject *self)
{
	if (self->closed || !self->core) {
		PyErr_SetString(PyExc_ValueError, "the loader is closed");
		return -1;
	}
	/* Before busy: a thread of the parent may have been waiting in it at
	 * the fork. */
	if (core_forked(self->core)) {
		raise_forked(self->core);
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"the loader is in use by another thread (one consumer thread at a time)");
		return -1;
	}
	return 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The next batch of the C loader: returns its code; 1 when a signal handler
 * raised (KeyboardInterrupt), with the exception set.  Waits without the GIL
 * in slices of 20 ms (rf_loader_next_timeout), so Ctrl-C is seen within
 * about 20 ms; the wait itself is the loader's condition wait, so a batch
 * that becomes ready wakes the consumer at once and the wait burns no CPU
 * the loader's threads need. */
static int
wait_next(LoaderObject *self, const rf_batch **out)
{
	struct core *c = self->core;
	int rc = rf_loader_try_next(c->ld, out);

	if (rc != -EAGAIN)
		return rc;
	uint64_t gen = self->gen;
	for (;;) {
		/* The library counts this wait as stall time. */
		self->busy = 1;
		Py_BEGIN_ALLOW_THREADS
		rc = rf_loader_next_timeout(c->ld, out, 20000000u);
		Py_END_ALLOW_THREADS
		self->busy = 0;
		if (rc != -EAGAIN)
			break;
		/* Not busy meanwhile: a handler may use the loader (save
		 * state_dict() on SIGTERM, say).  One that closed or reopened
		 * it ends this wait, whose C loader may be gone. */
		if (PyErr_CheckSignals() < 0)
			return 1;
		if (self->closed || self->core != c || self->gen != gen) {
			PyErr_SetString(PyExc_RuntimeError,
					"the loader was closed or reopened (by a signal handler) "
					"while waiting for its next batch");
			return 1;
		}
	}
	return rc;
}

static PyObject *
raise_held(LoaderObject *self)
{
	char msg[512];

	snprintf(msg, sizeof(msg),
		 "%u batches are held, the most depth=%u allows: they, or arrays and tensors "
		 "made from them, are still alive. Drop them (del batch, and the tensors from "
		 "torch.from_dlpack) before asking for the next batch, copy what you keep "
		 "(tensor.clone()), or raise Loader(depth=...)",
		 self->core->held, self->cfg.depth);
	return rfpy_raise(RF_EHELD, NULL, msg);
}

/* The field names of c's batches, from its first batch b. */
static int
core_make_names(struct core *c, const rf_batch *b)
{
	PyObject *t = PyTuple_New((Py_ssize_t)b->nfields);

	if (!t)
		return -1;
	for (uint32_t i = 0; i < b->nfields; i++) {
		PyObject *name = PyUnicode_InternFromString(b->fields[i].name);
		if (!name) {
			Py_DECREF(t);
			return -1;
		}
		PyTuple_SET_ITEM(t, (Py_ssize_t)i, name);
	}
	c->names = t;
	return 0;
}

/* The dict of one batch. */
static PyObject *
make_batch_dict(LoaderObject *self, const rf_batch *b)
{
	BatchObject *bo = PyObject_New(BatchObject, &BatchType);

	if (!bo) {
		core_release(self->core, b, NULL);
		return NULL;
	}
	bo->core = self->core;
	bo->b = b;
	bo->stream = NULL;
	if (bo->core->device.device_type == kDLCUDA)
		bo->stream = (void *)(uintptr_t)1; /* the legacy default stream */
	if (!bo->core->names && core_make_names(bo->core, b) < 0)
		goto fail;
	PyObject *d = PyDict_New();
	if (!d)
		goto fail;
	for (uint32_t i = 0; i < b->nfields; i++) {
		const rf_batch_field *f = &b->fields[i];
		PyObject *v;
		if (!f->offsets) {
			v = (PyObject *)array_new(bo, f->data, f->dtype, (int)f->ndim, f->shape);
		} else {
			int64_t oshape[1] = {(int64_t)b->samples + 1};
			int64_t dshape[RF_BATCH_MAX_DIMS];
			int dndim;
			uint64_t item = rf_dtype_size(f->dtype);
			/* The values back to back: along the variable dimension
			 * when it is the first one ([total, *rest]), else flat. */
			if (f->var_dim == 0) {
				uint64_t row = item;
				for (uint32_t k = 2; k < f->ndim; k++)
					row *= (uint64_t)f->shape[k];
				dndim = (int)f->ndim - 1;
				dshape[0] = (int64_t)(row ? f->bytes / row : 0);
				for (uint32_t k = 2; k < f->ndim; k++)
					dshape[k - 1] = f->shape[k];
			} else {
				dndim = 1;
				dshape[0] = (int64_t)(item ? f->bytes / item : 0);
			}
			PyObject *off = (PyObject *)array_new(bo, f->offsets, RF_DTYPE_I64, 1, oshape);
			PyObject *dat = (PyObject *)array_new(bo, f->data, f->dtype, dndim, dshape);
			v = off && dat ? PyTuple_Pack(2, off, dat) : NULL;
			Py_XDECREF(off);
			Py_XDECREF(dat);
		}
		if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(bo->core->names, i), v) < 0) {
			Py_XDECREF(v);
			Py_DECREF(d);
			goto fail;
		}
		Py_DECREF(v);
	}
	Py_DECREF(bo);
	return d;
fail:
	Py_DECREF(bo);
	return NULL;
}

/* Take the next batch of the current epoch: a new reference to its dict,
 * or NULL with StopIteration (end of the epoch) or an exception set. */
static PyObject *
loader_take(LoaderObject *self)
{
	const rf_batch *b;
	int rc;

	if (loader_usable(self) < 0)
		return NULL;
	if (self->nbatches == 0) {
		PyErr_SetNone(PyExc_StopIteration);
		return NULL;
	}
	struct core *c = self->core;
	if (c->stash) {
		b = c->stash;
		c->stash = NULL;
	} else {
		if (c->held >= self->cfg.depth)
			return raise_held(self);
		rc = wait_next(self, &b);
		if (rc == 1)
			return NULL;
		if (rc == RF_EHELD)
			return raise_held(self);
		if (rc < 0)
			return rfpy_raise(rc, NULL, rf_loader_errmsg(c->ld));
		if (!b) {
			PyErr_SetNone(PyExc_StopIteration);
			return NULL;
		}
		c->held++;
		if (!c->have_epoch0) {
			c->have_epoch0 = 1;
			c->c_epoch0 = b->epoch;
		}
		uint64_t ep = c->epoch0 + (b->epoch - c->c_epoch0);
		if (ep != self->epoch) {
			/* The first batch of the next epoch ends this one; keep
			 * it for the next pass. */
			c->stash = b;
			self->epoch = ep;
			self->in_epoch = 0;
			self->fresh = 1;
			PyErr_SetNone(PyExc_StopIteration);
			return NULL;
		}
	}
	if (c->device.device_type == kDLCPU) {
		/* Host memory: make sure the bytes are in place before anyone
		 * reads them through the buffer protocol or a CPU tensor. */
		double t0 = now_s();
		self->busy = 1;
		Py_BEGIN_ALLOW_THREADS
		rc = rf_batch_wait(b, NULL);
		Py_END_ALLOW_THREADS
		self->busy = 0;
		c->wait_ns += (uint64_t)((now_s() - t0) * 1e9);
		if (rc < 0) {
			core_release(c, b, NULL);
			return rfpy_raise(rc, NULL, rf_loader_errmsg(c->ld));
		}
	}
	self->in_epoch++;
	self->fresh = 0;
	return make_batch_dict(self, b);
}

/* Batches per epoch for this rank, as the plan counts them: global batches
 * of world x B samples, each rank a slice of B; the last partial global
 * batch dropped, or kept as an equal smaller batch on every rank. */
static uint64_t
plan_batches(uint64_t n, uint64_t batch, uint64_t world, int drop_last)
{
	uint64_t g = batch * world;
	uint64_t full = g ? n / g : 0;

	if (!drop_last && g && (n % g) / world > 0)
		full++;
	return full;
}

static int
parse_device(PyObject *arg, rf_config *cfg)
{
	PyObject *s = PyObject_Str(arg);
	const char *d;

	if (!s)
		return -1;
	d = PyUnicode_AsUTF8(s);
	if (!d) {
		Py_DECREF(s);
		return -1;
	}
	int ok = 1;
	if (!strcmp(d, "auto")) {
		cfg->device = RF_DEVICE_AUTO;
	} else if (!strcmp(d, "cpu") || !strcmp(d, "host")) {
		cfg->device = RF_DEVICE_HOST;
	} else if (!strncmp(d, "cuda", 4)) {
		cfg->device = RF_DEVICE_CUDA;
		if (d[4] == ':') {
			char *end;
			long idx = strtol(d + 5, &end, 10);
			ok = *end == 0 && end != d + 5 && idx >= 0 && idx < 1024;
			cfg->device_index = (int)idx;
		} else {
			ok = d[4] == 0;
		}
	} else {
		ok = 0;
	}
	if (!ok)
		PyErr_Format(PyExc_ValueError,
			     "device must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", not %R", arg);
	Py_DECREF(s);
	return ok ? 0 : -1;
}

/* A launcher variable as a plain decimal number <= 2^24, or -1 (unset) or -2
 * (malformed). */
static long
env_number(const char *name)
{
	const char *v = getenv(name);
	char *end;

	if (!v)
		return -1;
	if (*v < '0' || *v > '9')
		return -2;
	long n = strtol(v, &end, 10);
	return *end || n > (1L << 24) ? -2 : n;
}

/* The rank and world the library will use: the configured values, an unset
 * one from the first launcher environment that sets both of its variables
 * (as rf_config.rank/world document), else rank 0 of 1.  The library checks
 * the same values at open and reports a bad variable. */
static int
resolve_rank(long long rank, long long world, uint32_t *r, uint32_t *w)
{
	static const char *const vars[][2] = {
		{"RANK", "WORLD_SIZE"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
	};
	long er = -1, ew = -1;

	if (rank < 0 || world < 0) {
		for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
			if (getenv(vars[i][0]) && getenv(vars[i][1])) {
				er = env_number(vars[i][0]);
				ew = env_number(vars[i][1]);
				break;
			}
		}
	}
	if (rank < 0)
		rank = er >= 0 ? er : 0;
	if (world < 0)
		world = ew >= 1 ? ew : 1;
	*r = (uint32_t)rank;
	*w = (uint32_t)world;
	return 0;
}

/* The shuffle argument: a mode's name, or a bool (True: "window", the mode
 * for training; False: "none").  The mode's index, or -1 with an
 * exception. */
static int
parse_shuffle(PyObject *arg)
{
	if (!arg)
		return SHUFFLE_NONE;
	if (PyBool_Check(arg))
		return arg == Py_True ? SHUFFLE_WINDOW : SHUFFLE_NONE;
	if (!PyUnicode_Check(arg)) {
		PyErr_Format(PyExc_TypeError, "shuffle must be a str or a bool, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return -1;
	}
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, shuffle_names[i]))
			return i;
	PyErr_Format(PyExc_ValueError, "shuffle must be \"none\", \"chunks\", \"window\", "
		     "\"full\", True (\"window\") or False (\"none\"), not %R", arg);
	return -1;
}

static int
loader_init(LoaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"paths", "batch_size", "fields", "shuffle", "seed", "epoch",
				 "rank", "world", "device", "depth", "pinned_bytes", "drop_last",
				 "window", "pinning", "io_depth", "direct", "decode_threads",
				 "verify", "var_bytes", "map", "tokens", NULL};
	PyObject *paths_arg, *fields_arg = Py_None, *rank_arg = Py_None, *world_arg = Py_None,
		 *device_arg = NULL, *batch_arg, *shuffle_arg = NULL, *seed_arg = NULL,
		 *epoch_arg = NULL, *depth_arg = NULL, *pinned_arg = NULL, *window_arg = NULL,
		 *pinning_arg = NULL, *io_depth_arg = NULL, *threads_arg = NULL,
		 *var_bytes_arg = NULL, *tokens_arg = NULL;
	const char *pinning = "ring", *tokens = "stored";
	unsigned long long seed = 0, epoch = 0, pinned_bytes = 0, var_bytes = 0;
	long long batch_size = 0, depth = 2, window = 0, io_depth = 0, decode_threads = 0;
	int drop_last = 1, direct = -1, verify = 1, map = 0;
	PyObject *direct_arg = Py_None;
	size_t npaths;

	/* Every argument converted here, so that a TypeError or OverflowError
	 * names it (PyArg's formats name a keyword argument by its position). */
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOOOOOOpOOOOOpOpO:Loader",
					 kwlist, &paths_arg, &batch_arg, &fields_arg, &shuffle_arg,
					 &seed_arg, &epoch_arg, &rank_arg, &world_arg,
					 &device_arg, &depth_arg, &pinned_arg, &drop_last,
					 &window_arg, &pinning_arg, &io_depth_arg, &direct_arg,
					 &threads_arg, &verify, &var_bytes_arg, &map, &tokens_arg))
		return -1;
	const struct { PyObject *arg; const char *name; long long *v, lo, hi; } ints[] = {
		{batch_arg, "batch_size", &batch_size, 1, 1LL << 30},
		{depth_arg, "depth", &depth, 1, RFPY_MAX_BUFFERS - RFPY_SPARE_BUFFERS},
		{window_arg, "window", &window, 0, 1 << 20},
		{io_depth_arg, "io_depth", &io_depth, 0, 1 << 16},
		{threads_arg, "decode_threads", &decode_threads, 0, 1 << 10},
	};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (ints[i].arg && rfpy_arg_int(ints[i].arg, ints[i].name, ints[i].lo, ints[i].hi,
						ints[i].v) < 0)
			return -1;
	const struct { PyObject *arg; const char *name; unsigned long long *v; } u64s[] = {
		{seed_arg, "seed", &seed}, {epoch_arg, "epoch", &epoch},
		{pinned_arg, "pinned_bytes", &pinned_bytes}, {var_bytes_arg, "var_bytes", &var_bytes},
	};
	for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++)
		if (u64s[i].arg && rfpy_arg_u64(u64s[i].arg, u64s[i].name, u64s[i].v) < 0)
			return -1;
	const struct { PyObject *arg; const char *name; const char **v; } strs[] = {
		{pinning_arg, "pinning", &pinning}, {tokens_arg, "tokens", &tokens},
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (!strs[i].arg)
			continue;
		if (!PyUnicode_Check(strs[i].arg)) {
			PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", strs[i].name,
				     Py_TYPE(strs[i].arg)->tp_name);
			return -1;
		}
		if (!(*strs[i].v = PyUnicode_AsUTF8(strs[i].arg)))
			return -1;
	}
	int shuffle = parse_shuffle(shuffle_arg);
	if (shuffle < 0)
		return -1;
	/* None: let the library choose (O_DIRECT unless the dataset fits in
	 * a quarter of the available memory). */
	if (direct_arg != Py_None) {
		direct = PyObject_IsTrue(direct_arg);
		if (direct < 0)
			return -1;
	}
	if (self->busy && !(self->core && core_forked(self->core))) {
		PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
		return -1;
	}
	/* A second __init__ starts over. */
	struct core *old = self->core;
	self->core = NULL;
	core_retire(old);
	loader_free_config(self);
	self->closed = 0;

	rf_config *cfg = &self->cfg;
	rf_config_init(cfg);
	cfg->batch_size = (uint32_t)batch_size;
	cfg->depth = (uint32_t)depth;
	cfg->drop_last = drop_last;
	cfg->epochs = 0; /* epochs are Python passes: the stream runs until closed */
	cfg->direct = direct;
	cfg->verify = verify;
	cfg->map = map;
	if (!strcmp(tokens, "inputs_targets")) {
		cfg->tokens = RF_TOKENS_INPUTS_TARGETS;
	} else if (strcmp(tokens, "stored")) {
		PyErr_Format(PyExc_ValueError, "tokens must be \"stored\" or \"inputs_targets\", "
			     "not \"%s\"", tokens);
		return -1;
	}
	cfg->var_bytes = var_bytes;
	if (pinned_bytes) {
		/* The ring takes what the memory plan needs, up to pinned_bytes:
		 * a budget beyond the machine's memory would be taken at face
		 * value by the plan (and a window sized from it), silently. */
		long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
		unsigned long long phys = pages > 0 && psize > 0 ?
			(unsigned long long)pages * (unsigned long long)psize : 0;
		if (phys && pinned_bytes > phys) {
			PyErr_Format(PyExc_ValueError,
				     "pinned_bytes %llu is more than this machine's physical memory "
				     "(%llu bytes): page-locked memory cannot be paged out; give at "
				     "most a fraction of it (the default is 256 MiB)",
				     pinned_bytes, phys);
			return -1;
		}
		cfg->pinned_bytes = pinned_bytes;
	}
	if (io_depth)
		cfg->io_depth = (uint32_t)io_depth;
	if (decode_threads)
		cfg->decode_threads = (uint32_t)decode_threads;
	cfg->log = rfpy_log;
	if (!strcmp(pinning, "ring")) {
		cfg->pinning = RF_PINNING_RING;
	} else if (!strcmp(pinning, "transient")) {
		cfg->pinning = RF_PINNING_TRANSIENT;
	} else {
		PyErr_Format(PyExc_ValueError, "pinning must be \"ring\" or \"transient\", not \"%s\"",
			     pinning);
		return -1;
	}
	if (device_arg && parse_device(device_arg, cfg) < 0)
		return -1;

	self->shuffle = shuffle;
	static const enum rf_shuffle modes[] = {RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS,
						RF_SHUFFLE_WINDOW, RF_SHUFFLE_FULL};
	cfg->shuffle = modes[self->shuffle];
	self->seed = seed;
	cfg->seed = seed;
	cfg->window = (uint32_t)window;
	long long rank = -1, world = -1;
	if (rank_arg != Py_None && rfpy_arg_int(rank_arg, "rank", 0, (1 << 24) - 1, &rank) < 0)
		return -1;
	if (world_arg != Py_None && rfpy_arg_int(world_arg, "world", 1, 1 << 24, &world) < 0)
		return -1;
	if (rank >= 0 && world >= 1 && rank >= world) {
		PyErr_SetString(PyExc_ValueError, "need 0 <= rank < world <= 2**24");
		return -1;
	}
	cfg->rank = (int32_t)rank;
	cfg->world = (int32_t)world;
	/* The library resolves an unset rank or world from the launcher's
	 * environment; len() and the resume check need the same world. */
	uint32_t r, w;
	if (resolve_rank(rank, world, &r, &w) < 0)
		return -1;
	self->rank = r;
	self->world = w;

	/* The strings the config points to, kept for reopening. */
	if (rfpy_paths(paths_arg, &self->keep, &self->paths, &npaths) < 0)
		return -1;
	cfg->paths = self->paths;
	cfg->npaths = npaths;
	if (fields_arg != Py_None) {
		if (PyUnicode_Check(fields_arg)) {
			PyErr_SetString(PyExc_TypeError, "fields must be a sequence of names");
			return -1;
		}
		PyObject *seq = PySequence_Fast(fields_arg, "fields must be a sequence of names");
		if (!seq)
			return -1;
		Py_ssize_t nf = PySequence_Fast_GET_SIZE(seq);
		self->fields = PyMem_Calloc((size_t)nf + 1, sizeof(char *));
		if (!self->fields) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			return -1;
		}
		for (Py_ssize_t i = 0; i < nf; i++) {
			PyObject *name = PySequence_Fast_GET_ITEM(seq, i);
			PyObject *b = PyUnicode_Check(name) ? PyUnicode_AsUTF8String(name) : NULL;
			if (!b || PyList_Append(self->keep, b) < 0) {
				Py_XDECREF(b);
				Py_DECREF(seq);
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_TypeError, "field names must be str");
				return -1;
			}
			self->fields[i] = PyBytes_AS_STRING(b);
			Py_DECREF(b);
		}
		Py_DECREF(seq);
		cfg->fields = self->fields;
		cfg->nfields = (size_t)nf;
	}

	/* The sample count, for len(). */
	rf_dataset *ds = NULL;
	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.log = rfpy_log;
	int rc;
	char msg[1024];
	Py_BEGIN_ALLOW_THREADS
	rc = rf_dataset_open(&ds, cfg->paths, cfg->npaths, &dcfg);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", rf_dataset_last_open_error());
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		rfpy_raise(rc, "Loader", msg);
		return -1;
	}
	self->samples = rf_dataset_samples(ds);
	rf_dataset_close(&ds);
	self->nbatches = plan_batches(self->samples, (uint64_t)batch_size, self->world, drop_last);
	/* A loader with nothing to deliver is a mistake, not a training loop
	 * that should run no step in silence. */
	if (self->nbatches == 0) {
		PyErr_Format(PyExc_ValueError,
			     "no batch to deliver: %llu samples, batch_size %lld x world %u%s "
			     "leave this rank no batch per epoch; lower batch_size%s",
			     (unsigned long long)self->samples, batch_size, self->world,
			     drop_last ? " with drop_last=True" : "",
			     drop_last ? " or pass drop_last=False" : "");
		return -1;
	}
	return loader_open_core(self, epoch, NULL, 0);
}

static PyObject *
loader_iter(LoaderObject *self)
{
	if (loader_usable(self) < 0)
		return NULL;
	/* A pass abandoned midway (break, an exception) is not continued:
	 * like a DataLoader, a new pass starts the epoch over. */
	if (!self->fresh && loader_open_core(self, self->epoch, NULL, 0) < 0)
		return NULL;
	IterObject *it = PyObject_New(IterObject, &IterType);
	if (!it)
		return NULL;
	it->loader = (LoaderObject *)Py_NewRef(self);
	it->gen = ++self->gen;
	return (PyObject *)it;
}

static Py_ssize_t
loader_len(LoaderObject *self)
{
	if (self->nbatches > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "too many batches for len()");
		return -1;
	}
	return (Py_ssize_t)self->nbatches;
}

static PyObject *
loader_close(LoaderObject *self, PyObject *unused)
{
	/* In a child of fork(), busy is the parent's thread's. */
	if (self->busy && !(self->core && core_forked(self->core))) {
		PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
		return NULL;
	}
	struct core *old = self->core;
	self->core = NULL;
	self->closed = 1;
	core_retire(old);
	Py_RETURN_NONE;
}

static PyObject *
loader_enter(LoaderObject *self, PyObject *unused)
{
	if (loader_usable(self) < 0)
		return NULL;
	return Py_NewRef(self);
}

static PyObject *
loader_exit(LoaderObject *self, PyObject *args)
{
	PyObject *r = loader_close(self, NULL);

	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *
loader_set_epoch(LoaderObject *self, PyObject *arg)
{
	unsigned long long e;

	if (rfpy_arg_u64(arg, "epoch", &e) < 0)
		return NULL;
	if (loader_usable(self) < 0)
		return NULL;
	if (e == self->epoch && self->fresh)
		Py_RETURN_NONE;
	/* File order is the same in every epoch: at an epoch's start only
	 * the number changes (not after a restore within an epoch). */
	if (self->fresh && self->in_epoch == 0 && self->shuffle == SHUFFLE_NONE) {
		uint64_t delta = e - self->epoch;
		self->epoch = e;
		self->core->epoch0 += delta;
		Py_RETURN_NONE;
	}
	if (loader_open_core(self, e, NULL, 0) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
u64(uint64_t v)
{
	return PyLong_FromUnsignedLongLong(v);
}

static PyObject *
loader_stats(LoaderObject *self, PyObject *unused)
{
	rf_stats st;

	if (loader_usable(self) < 0)
		return NULL;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	int rc = rf_loader_stats(self->core->ld, &st);
	if (rc < 0)
		return rfpy_raise(rc, "stats", rf_loader_errmsg(self->core->ld));
	/* The consumer also waits in rf_batch_wait, which the library does
	 * not count as stall time: add it. */
	st.stall_ns += self->core->wait_ns;
	st.stall_share = st.wall_ns ? (double)st.stall_ns / (double)st.wall_ns : 0.0;
	return Py_BuildValue(
		"{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:d,s:N,"
		"s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
		"s:N,s:N,s:N,s:N,s:N,s:N,s:s,s:O,s:s,s:O,s:I,s:I,s:I}",
		"bytes_read", u64(st.bytes_read), "bytes_delivered", u64(st.bytes_delivered),
		"batches", u64(st.batches), "samples", u64(st.samples), "chunks", u64(st.chunks),
		"wall_ns", u64(st.wall_ns), "read_ns", u64(st.read_ns),
		"decode_ns", u64(st.decode_ns), "copy_ns", u64(st.copy_ns),
		"stall_ns", u64(st.stall_ns), "stall_share", st.stall_share,
		"thread_cpu_ns", u64(st.thread_cpu_ns),
		"reads_inflight", st.reads_inflight, "reads_inflight_max", st.reads_inflight_max,
		"slots_used", st.slots_used, "slots_used_max", st.slots_used_max,
		"slots_total", st.slots_total, "staged", st.staged, "staged_max", st.staged_max,
		"ready", st.ready, "ready_max", st.ready_max, "held", st.held,
		"held_max", st.held_max,
		"slot_bytes", u64(st.slot_bytes), "batch_bytes", u64(st.batch_bytes),
		"pinned_bytes", u64(st.pinned_bytes), "pinned_peak", u64(st.pinned_peak),
		"device_bytes", u64(st.device_bytes), "device_peak", u64(st.device_peak),
		"io_engine", st.io_engine, "io_direct", st.io_direct ? Py_True : Py_False,
		"device", st.device, "in_place", st.in_place ? Py_True : Py_False,
		/* The library's device buffers: depth for the consumer and
		 * the spare (device_bytes is buffers x batch_bytes when
		 * batches are copied to the device). */
		"depth", self->cfg.depth, "buffers", self->cfg.depth + RFPY_SPARE_BUFFERS,
		"decode_threads", st.decode_threads);
}

/*
 * Resume.  The state is a dict: where the stream stands (epoch, batches
 * yielded in it) and what defines the order (samples, batch size, world,
 * shuffle, seed), plus the library's own blob when it has one.  A state at
 * an epoch's start needs no blob: the loader reopens at that epoch.
 */
/* The window shuffle's W in force (rf_stats.window: the one set, or the
 * dataset's default), 0 in the other modes; -1 with an exception. */
static long long
loader_window(LoaderObject *self)
{
	rf_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	int rc = rf_loader_stats(self->core->ld, &st);
	if (rc < 0) {
		rfpy_raise(rc, "window", rf_loader_errmsg(self->core->ld));
		return -1;
	}
	return st.window;
}

static PyObject *
loader_state_dict(LoaderObject *self, PyObject *unused)
{
	if (loader_usable(self) < 0)
		return NULL;
	long long window = loader_window(self);
	if (window < 0)
		return NULL;
	PyObject *blob = Py_NewRef(Py_None);
	if (self->in_epoch > 0) {
		unsigned char buf[RF_STATE_MAX];
		size_t len = 0;
		int rc = rf_loader_state_save(self->core->ld, buf, sizeof(buf), &len);
		if (rc < 0) {
			Py_DECREF(blob);
			return rfpy_raise(rc, "state_dict", rf_loader_errmsg(self->core->ld));
		}
		Py_SETREF(blob, PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)len));
		if (!blob)
			return NULL;
	}
	return Py_BuildValue("{s:i,s:K,s:K,s:K,s:I,s:I,s:s,s:K,s:L,s:O,s:N}", "version", 1,
			     "epoch", (unsigned long long)self->epoch,
			     "batch", (unsigned long long)self->in_epoch,
			     "samples", (unsigned long long)self->samples,
			     "batch_size", self->cfg.batch_size, "world", self->world,
			     "shuffle", shuffle_names[self->shuffle],
			     "seed", (unsigned long long)self->seed, "window", window,
			     "drop_last", self->cfg.drop_last ? Py_True : Py_False, "blob", blob);
}

static int
state_get_u64(PyObject *d, const char *key, uint64_t *out)
{
	PyObject *v = PyDict_GetItemString(d, key);

	if (!v) {
		PyErr_Format(PyExc_ValueError, "state: missing \"%s\"", key);
		return -1;
	}
	unsigned long long x = PyLong_AsUnsignedLongLong(v);
	if (x == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	*out = x;
	return 0;
}

static PyObject *
loader_load_state_dict(LoaderObject *self, PyObject *state)
{
	uint64_t version, epoch, batch, samples, bsize, world, seed;

	if (loader_usable(self) < 0)
		return NULL;
	if (!PyDict_Check(state)) {
		PyErr_SetString(PyExc_TypeError, "state must be a dict from state_dict()");
		return NULL;
	}
	if (state_get_u64(state, "version", &version) < 0 || state_get_u64(state, "epoch", &epoch) < 0 ||
	    state_get_u64(state, "batch", &batch) < 0 ||
	    state_get_u64(state, "samples", &samples) < 0 ||
	    state_get_u64(state, "batch_size", &bsize) < 0 ||
	    state_get_u64(state, "world", &world) < 0 || state_get_u64(state, "seed", &seed) < 0)
		return NULL;
	if (version != 1) {
		PyErr_Format(PyExc_ValueError, "state: version %llu is not supported",
			     (unsigned long long)version);
		return NULL;
	}
	PyObject *mode = PyDict_GetItemString(state, "shuffle");
	const char *ms = mode ? PyUnicode_AsUTF8(mode) : NULL;
	if (!ms) {
		PyErr_Clear();
		PyErr_SetString(PyExc_ValueError, "state: missing \"shuffle\"");
		return NULL;
	}
	if (samples != self->samples || bsize * world != (uint64_t)self->cfg.batch_size * self->world ||
	    strcmp(ms, shuffle_names[self->shuffle]) || seed != self->seed) {
		PyErr_Format(PyExc_ValueError,
			     "state: saved for another dataset or order (samples %llu, batch %llu x "
			     "world %llu, shuffle %s, seed %llu); this loader has samples %llu, "
			     "batch %u x world %u, shuffle %s, seed %llu",
			     (unsigned long long)samples, (unsigned long long)bsize,
			     (unsigned long long)world, ms, (unsigned long long)seed,
			     (unsigned long long)self->samples, self->cfg.batch_size, self->world,
			     shuffle_names[self->shuffle], (unsigned long long)self->seed);
		return NULL;
	}
	/* The rest of the order: the window in force (set, or the dataset's
	 * default) and drop_last.  The library would take a blob's window
	 * and drop_last over the loader's, leaving len() and order_id
	 * describing another order than the passes.  States saved before
	 * these keys existed have them missing and are not checked here. */
	PyObject *sw = PyDict_GetItemString(state, "window");
	if (sw) {
		unsigned long long w = PyLong_AsUnsignedLongLong(sw);
		if (w == (unsigned long long)-1 && PyErr_Occurred())
			return NULL;
		long long have = loader_window(self);
		if (have < 0)
			return NULL;
		if (w != (unsigned long long)have) {
			PyErr_Format(PyExc_ValueError,
				     "state: saved with window %llu, this loader's window is %lld "
				     "(window is part of the order: give the loader window=%llu)",
				     w, have, w);
			return NULL;
		}
	}
	PyObject *sd = PyDict_GetItemString(state, "drop_last");
	if (sd) {
		int d = PyObject_IsTrue(sd);
		if (d < 0)
			return NULL;
		if (d != !!self->cfg.drop_last) {
			PyErr_Format(PyExc_ValueError,
				     "state: saved with drop_last=%s, this loader has drop_last=%s "
				     "(drop_last is part of the order)", d ? "True" : "False",
				     self->cfg.drop_last ? "True" : "False");
			return NULL;
		}
	}
	if (batch > self->nbatches) {
		PyErr_SetString(PyExc_ValueError, "state: batch position past the end of the epoch");
		return NULL;
	}
	PyObject *blob = PyDict_GetItemString(state, "blob");
	if (batch > 0 && blob && PyBytes_Check(blob)) {
		/* The library's position: O(1), nothing skipped is read. */
		if (loader_open_core(self, epoch, PyBytes_AS_STRING(blob),
				     (size_t)PyBytes_GET_SIZE(blob)) < 0)
			return NULL;
		self->in_epoch = batch;
		self->fresh = 1;
		Py_RETURN_NONE;
	}
	if (loader_open_core(self, epoch, NULL, 0) < 0)
		return NULL;
	if (batch == 0)
		Py_RETURN_NONE;
	/* No position blob from the library: skip the batches already used
	 * (they are read, not delivered).  Stopped midway (Ctrl-C, an error),
	 * the loader is left to start the epoch over at the next pass, never
	 * to go on from wherever the skip stopped. */
	self->fresh = 0;
	for (uint64_t k = 0; k < batch; k++) {
		const rf_batch *b;
		if (PyErr_CheckSignals() < 0)
			return NULL;
		int rc = wait_next(self, &b);
		if (rc == 1)
			return NULL;
		if (rc < 0)
			return rfpy_raise(rc, "load_state_dict", rf_loader_errmsg(self->core->ld));
		if (!b)
			break;
		self->core->held++;
		if (!self->core->have_epoch0) {
			self->core->have_epoch0 = 1;
			self->core->c_epoch0 = b->epoch;
		}
		core_release(self->core, b, NULL);
	}
	self->in_epoch = batch;
	self->fresh = 1;
	Py_RETURN_NONE;
}

static PyObject *
loader_get_epoch(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->epoch);
}

static PyObject *
loader_get_device(LoaderObject *self, void *unused)
{
	if (!self->core)
		Py_RETURN_NONE;
	if (self->core->device.device_type == kDLCUDA)
		return PyUnicode_FromFormat("cuda:%d", (int)self->core->device.device_id);
	return PyUnicode_FromString("cpu");
}

static PyObject *
loader_get_samples(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->samples);
}

static PyObject *
loader_get_batch_size(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->cfg.batch_size);
}

static PyObject *
loader_get_depth(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->cfg.depth);
}

static PyObject *
loader_get_held(LoaderObject *self, void *unused)
{
	/* The consumer's batches: the stash is the loader's own. */
	if (!self->core)
		return PyLong_FromLong(0);
	return PyLong_FromUnsignedLong(self->core->held - (self->core->stash ? 1 : 0));
}

static PyObject *
loader_get_order_id(LoaderObject *self, void *unused)
{
	rf_stats st;

	if (self->closed || !self->core) {
		PyErr_SetString(PyExc_ValueError, "the loader is closed");
		return NULL;
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	int rc = rf_loader_stats(self->core->ld, &st);
	if (rc < 0)
		return rfpy_raise(rc, "order_id", rf_loader_errmsg(self->core->ld));
	return PyLong_FromUnsignedLongLong(st.order_id);
}

static PyObject *
loader_repr(LoaderObject *self)
{
	if (self->closed || !self->core)
		return PyUnicode_FromString("<ringfeed.Loader (closed)>");
	PyObject *dev = loader_get_device(self, NULL);
	PyObject *r = dev ? PyUnicode_FromFormat(
		"<ringfeed.Loader samples=%llu batch_size=%u batches=%llu epoch=%llu "
		"device=%U depth=%u held=%u>", (unsigned long long)self->samples,
		self->cfg.batch_size, (unsigned long long)self->nbatches,
		(unsigned long long)self->epoch, dev, self->cfg.depth,
		self->core->held - (self->core->stash ? 1u : 0u)) : NULL;
	Py_XDECREF(dev);
	return r;
}

static PyMethodDef loader_methods[] = {
	{"close", (PyCFunction)loader_close, METH_NOARGS,
	 "close($self, /)\n--\n\n"
	 "Stop the loader.  Its threads and buffers are freed now, or, when arrays of\n"
	 "some batches are still alive, as soon as the last of them is released."},
	{"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
	 "set_epoch($self, epoch, /)\n--\n\n"
	 "The next pass iterates epoch `epoch` (the order depends on it when\n"
	 "shuffling).  Passes advance the epoch by themselves; call it to jump.\n"
	 "A pass running meanwhile ends: its next step raises RuntimeError."},
	{"stats", (PyCFunction)loader_stats, METH_NOARGS,
	 "stats($self, /)\n--\n\n"
	 "The loader's counters (rf_stats) as a dict, plus `depth` (the batches that\n"
	 "may be held) and `buffers` (the library's device buffers: depth + 1)."},
	{"state_dict", (PyCFunction)loader_state_dict, METH_NOARGS,
	 "state_dict($self, /)\n--\n\n"
	 "The position after the last batch yielded, as a small dict to checkpoint."},
	{"load_state_dict", (PyCFunction)loader_load_state_dict, METH_O,
	 "load_state_dict($self, state, /)\n--\n\n"
	 "Restore a position from state_dict(): the next pass continues with the batch\n"
	 "that would have followed."},
	{"__enter__", (PyCFunction)loader_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)loader_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
	{"epoch", (getter)loader_get_epoch, NULL, "The epoch the next (or current) pass iterates.", NULL},
	{"device", (getter)loader_get_device, NULL, "Where batches are: \"cpu\" or \"cuda:N\".", NULL},
	{"samples", (getter)loader_get_samples, NULL, "Samples in the dataset.", NULL},
	{"batch_size", (getter)loader_get_batch_size, NULL, "Samples per batch.", NULL},
	{"depth", (getter)loader_get_depth, NULL,
	 "Batches that may be held at once (the loader has one device buffer more).", NULL},
	{"held", (getter)loader_get_held, NULL, "Batches of the current pass held now (by arrays or\n"
	 "tensors).  A batch kept from an abandoned pass is not counted: it keeps\n"
	 "that pass's pipeline (pinned ring, threads) alive until it is dropped.", NULL},
	{"order_id", (getter)loader_get_order_id, NULL,
	 "A 64-bit hash of every input of the order (dataset, shuffle, seed, window,\n"
	 "batch_size, world, drop_last; not the rank or the epoch): equal on every\n"
	 "rank of a job that agrees on the order (rf_stats.order_id).", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods loader_sequence = {
	.sq_length = (lenfunc)loader_len,
};

static PyTypeObject LoaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringfeed.Loader",
	.tp_basicsize = sizeof(LoaderObject),
	.tp_dealloc = (destructor)loader_dealloc,
	.tp_repr = (reprfunc)loader_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"Loader(paths, batch_size, *, fields=None, shuffle='none', seed=0, epoch=0,\n"
	"       rank=None, world=None, device='auto', depth=2, pinned_bytes=0,\n"
	"       drop_last=True, window=0, pinning='ring', io_depth=0, direct=None,\n"
	"       decode_threads=0, verify=True, var_bytes=0, map=False, tokens='stored')\n"
	"--\n\n"
	"Stream a dataset in batches.  Each pass (for batch in loader) yields one\n"
	"epoch's len(loader) batches, then advances the epoch; each batch is a dict\n"
	"{field: Array}, a variable-length field an (offsets, data) pair.  Arrays speak\n"
	"DLPack: torch.from_dlpack(batch[\"x\"]) is a tensor on the loader's device with\n"
	"no copy.\n\n"
	"Arguments (the order of each epoch depends only on paths, shuffle, seed,\n"
	"window, batch_size, world and drop_last: keep them equal on every rank):\n"
	"  paths           a .rfs shard, a directory of shards, a glob, or a list.\n"
	"  batch_size      samples per batch on this rank.\n"
	"  fields          names of the fields to load (None: all, schema order).\n"
	"  shuffle         'none' (file order), 'chunks' (chunk order shuffled),\n"
	"                  'window' (samples drawn from a window of decoded chunks:\n"
	"                  the mode for training), 'full' (any sample, read one by\n"
	"                  one); True is 'window', False 'none'.\n"
	"  seed            key of the shuffled orders (an int, 0 .. 2**64-1).\n"
	"  epoch           the first pass's epoch (each epoch has its own order).\n"
	"  rank, world     this process's share of each global batch of\n"
	"                  world x batch_size samples; None: from the launcher's\n"
	"                  environment (RANK/WORLD_SIZE, ...), else 0 of 1.\n"
	"  device          'auto' (a CUDA device when there is one, else host),\n"
	"                  'cpu', 'cuda' or 'cuda:N' (or a torch.device).\n"
	"  depth           batches that may be alive at once (one more raises\n"
	"                  ringfeed.Error EHELD); the loader keeps depth + 1 buffers.\n"
	"  pinned_bytes    page-locked host memory budget; 0: the default, 256 MiB.\n"
	"  drop_last       drop an epoch's last, partial batch (default True).  A\n"
	"                  loader with no batch per epoch raises ValueError.\n"
	"  window          decoded chunks in the 'window' shuffle; 0: the dataset's\n"
	"                  default (about 128 MiB of chunks, 2 to 1024).\n"
	"  pinning         'ring' (a pinned ring, the default) or 'transient'.\n"
	"  io_depth        reads in flight; 0: the library's default (32).\n"
	"  direct          O_DIRECT reads: True, False, or None to let the library\n"
	"                  choose (cached reads when the dataset fits in memory).\n"
	"  decode_threads  decode workers; 0: chosen from the CPUs and codec.\n"
	"  verify          check chunk checksums as they are read (default True).\n"
	"  var_bytes       a variable field's bytes per batch; 0: from the dataset.\n"
	"  map             read chunks through memory maps (a shard truncated while\n"
	"                  read ends the process with SIGBUS).\n"
	"  tokens          'stored', or 'inputs_targets': a field \"tokens\" of T + 1\n"
	"                  tokens (ringfeed pack --llmc) delivered as int32 \"inputs\"\n"
	"                  and \"targets\" of shape [B, T].\n\n"
	"A batch's buffer is reused once every array and tensor made from it is\n"
	"gone.  The loader keeps depth + 1 device buffers of the batch size: a for\n"
	"loop still holds its previous batch while it asks for the next, and the\n"
	"spare buffer is refilled meanwhile.  state_dict()/load_state_dict() resume\n"
	"mid-epoch.  A Loader belongs to the process that opened it: in a child of\n"
	"fork() (a DataLoader worker) it raises ringfeed.Error EFORK; open one in\n"
	"each worker.",
	.tp_methods = loader_methods,
	.tp_getset = loader_getset,
	.tp_as_sequence = &loader_sequence,
	.tp_iter = (getiterfunc)loader_iter,
	.tp_init = (initproc)loader_init,
	.tp_new = PyType_GenericNew,
};

static void
iter_dealloc(IterObject *self)
{
	Py_XDECREF(self->loader);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
iter_next(IterObject *self)
{
	LoaderObject *ld = self->loader;

	/* Finished: stays finished. */
	if (self->gen == 0)
		return NULL;
	/* A newer pass, set_epoch or a restore ended this one midway: say so,
	 * rather than end a training loop early in silence. */
	if (self->gen != ld->gen) {
		self->gen = 0;
		PyErr_SetString(PyExc_RuntimeError,
				"this pass over the loader was ended by set_epoch(), "
				"load_state_dict() or a newer pass; start a new pass "
				"(for batch in loader) to go on");
		return NULL;
	}
	PyObject *d = loader_take(ld);
	if (!d && PyErr_ExceptionMatches(PyExc_StopIteration)) {
		PyErr_Clear();
		/* Stay stopped: the next epoch belongs to the next pass. */
		self->gen = 0;
	}
	return d;
}

static PyTypeObject IterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ringfeed._LoaderIter",
	.tp_basicsize = sizeof(IterObject),
	.tp_dealloc = (destructor)iter_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)iter_next,
};

int
rfpy_loader_init(PyObject *module)
{
	if (PyType_Ready(&BatchType) < 0 || PyType_Ready(&ArrayType) < 0 ||
	    PyType_Ready(&LoaderType) < 0 || PyType_Ready(&IterType) < 0)
		return -1;
	if (PyModule_AddObjectRef(module, "Loader", (PyObject *)&LoaderType) < 0 ||
	    PyModule_AddObjectRef(module, "Array", (PyObject *)&ArrayType) < 0)
		return -1;
	return 0;
}

#else /* !RFPY_HAVE_LOADER */

int
rfpy_loader_init(PyObject *module)
{
	/* Built against a library without the streaming loader. */
	return 0;
}

#endif
