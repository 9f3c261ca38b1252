/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.open: random access to a dataset, samples as NumPy arrays (NumPy
 * is imported at run time only to build them: the extension needs no NumPy
 * headers).  ringfeed.pack is in pack.c.
 */
#include "module.h"

#include <errno.h>
#include <string.h>

/* ------------------------------------------------------------ Dataset */

typedef struct {
	PyObject_HEAD
	rf_dataset *ds;
	/* Held around reads, which run without the GIL, and close: a dataset
	 * handle serves one thread at a time. */
	PyThread_type_lock lock;
	/* rfpy_forks() when the lock was last known sound.  A dataset has no
	 * threads, so a child of fork() may go on using it, unless another
	 * thread of the parent held the lock at the fork: that read was cut
	 * off halfway (torn), and the lock will never be released. */
	unsigned forks;
	int torn;
} DatasetObject;

static PyObject *numpy_frombuffer;

static PyObject *
get_frombuffer(void)
{
	if (!numpy_frombuffer) {
		PyObject *np = PyImport_ImportModule("numpy");
		if (!np)
			return NULL;
		numpy_frombuffer = PyObject_GetAttrString(np, "frombuffer");
		Py_DECREF(np);
	}
	return numpy_frombuffer;
}

static void
dataset_dealloc(DatasetObject *self)
{
	rf_dataset_close(&self->ds);
	if (self->lock && !self->torn)
		PyThread_free_lock(self->lock);
	rfpy_free((PyObject *)self);
}

static const char torn_msg[] =
	"this dataset was being read by another thread when the process forked: that read "
	"stopped halfway in this child process; open the dataset again here (ringfeed.open "
	"in each DataLoader worker, in worker_init_fn or the Dataset's first __getitem__)";

/* Take the dataset's lock; other threads run while this one waits.  0, or
 * -1 with RuntimeError in a child of fork() whose parent was reading. */
static int
dataset_lock(DatasetObject *self)
{
	if (self->forks != rfpy_forks() && !self->torn) {
		/* A child of fork(): this thread is the only one that came
		 * through it, so a held lock was a parent thread's, mid-read.
		 * The handle, copied halfway through an update, is left as it
		 * is (not freed, not closed). */
		if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
			self->torn = 1;
			self->ds = NULL;
		} else {
			PyThread_release_lock(self->lock);
			self->forks = rfpy_forks();
		}
	}
	if (self->torn) {
		PyErr_SetString(PyExc_RuntimeError, torn_msg);
		return -1;
	}
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	return 0;
}

static int
dataset_check(DatasetObject *self)
{
	if (self->torn) {
		PyErr_SetString(PyExc_RuntimeError, torn_msg);
		return -1;
	}
	if (!self->ds) {
		PyErr_SetString(PyExc_ValueError, "the dataset is closed");
		return -1;
	}
	return 0;
}

static Py_ssize_t
dataset_len(DatasetObject *self)
{
	if (dataset_check(self) < 0)
		return -1;
	uint64_t n = rf_dataset_samples(self->ds);
	if (n > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "too many samples for len()");
		return -1;
	}
	return (Py_ssize_t)n;
}

/* The shape tuple of field f for a value of `len` bytes. */
static PyObject *
value_shape(const rf_field *f, size_t len)
{
	PyObject *t = PyTuple_New(f->rank);

	if (!t)
		return NULL;
	for (uint32_t d = 0; d < f->rank; d++) {
		uint64_t v = f->shape[d];
		if ((int32_t)d == f->var_dim) {
			uint64_t step = rf_field_item_bytes(f);
			v = step ? len / step : 0;
		}
		PyObject *o = PyLong_FromUnsignedLongLong(v);
		if (!o) {
			Py_DECREF(t);
			return NULL;
		}
		(void)PyTuple_SetItem(t, d, o);
	}
	return t;
}

/* The bytes of field fi of sample `index` into a new bytearray, *out (lock
 * held).  Nothing here runs Python code (no collection, no __del__ that could
 * want the lock).  Returns 0, or the code and the message in msg. */
static int
read_field_bytes(DatasetObject *self, uint64_t index, uint32_t fi, const rf_field *f,
		 PyObject **out, char *msg, size_t cap)
{
	size_t len = 0, got = 0;
	char probe[1];
	int rc = 0;

	*out = NULL;
	if (f->var_dim < 0) {
		len = rf_field_item_bytes(f);
	} else {
		Py_BEGIN_ALLOW_THREADS
		rc = rf_dataset_read(self->ds, index, fi, probe, 0, &len);
		Py_END_ALLOW_THREADS
		if (rc < 0 && rc != -ENOSPC)
			goto fail;
	}
	if (len > PY_SSIZE_T_MAX)
		len = PY_SSIZE_T_MAX; /* fails below, as a short read */
	PyObject *buf = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)len);
	if (!buf)
		return -ENOMEM;
	char *dst = len ? PyByteArray_AsString(buf) : probe;
	/* Reading, checking and decompressing a chunk take a while: other
	 * threads run meanwhile (the lock keeps this dataset to this one). */
	Py_BEGIN_ALLOW_THREADS
	rc = rf_dataset_read(self->ds, index, fi, dst, len, &got);
	Py_END_ALLOW_THREADS
	if (rc < 0 || got != len) {
		Py_DECREF(buf); /* a bytearray: frees memory, runs no code */
		rc = rc < 0 ? rc : RF_ECORRUPT;
		goto fail;
	}
	*out = buf;
	return 0;
fail:
	snprintf(msg, cap, "%s", rf_dataset_errmsg(self->ds));
	return rc;
}

/* The NumPy array of field f from its bytes. */
static PyObject *
field_array(PyObject *buf, const rf_field *f)
{
	PyObject *frombuffer = get_frombuffer();
	if (!frombuffer)
		return NULL;
	PyObject *arr = PyObject_CallFunction(frombuffer, "Os", buf, rfpy_numpy_dtype(f->dtype));
	if (!arr)
		return NULL;
	PyObject *shape = value_shape(f, (size_t)PyByteArray_Size(buf));
	if (!shape) {
		Py_DECREF(arr);
		return NULL;
	}
	PyObject *reshape = PyUnicode_FromString("reshape");
	PyObject *out = reshape ? PyObject_CallMethodObjArgs(arr, reshape, shape, NULL) : NULL;
	Py_XDECREF(reshape);
	Py_DECREF(shape);
	Py_DECREF(arr);
	return out;
}

static PyObject *
dataset_item(DatasetObject *self, Py_ssize_t i)
{
	if (dataset_check(self) < 0)
		return NULL;
	uint64_t n = rf_dataset_samples(self->ds);
	if (i < 0)
		i += (Py_ssize_t)n;
	if (i < 0 || (uint64_t)i >= n) {
		PyErr_SetString(PyExc_IndexError, "sample index out of range");
		return NULL;
	}
	/* The schema is copied: another thread may close the dataset once
	 * the lock is dropped. */
	rf_schema s;
	PyObject *bufs[RF_MAX_FIELDS] = {NULL};
	char msg[512];
	int rc = 0;

	if (dataset_lock(self) < 0)
		return NULL;
	if (!self->ds) { /* closed by another thread meanwhile */
		PyThread_release_lock(self->lock);
		dataset_check(self);
		return NULL;
	}
	s = *rf_dataset_schema(self->ds);
	for (uint32_t fi = 0; fi < s.nfields && rc == 0; fi++)
		rc = read_field_bytes(self, (uint64_t)i, fi, &s.fields[fi], &bufs[fi], msg, sizeof(msg));
	PyThread_release_lock(self->lock);

	PyObject *d = NULL;
	if (rc == -ENOMEM && PyErr_Occurred())
		goto out;
	if (rc < 0) {
		rfpy_raise(rc, "read", msg);
		goto out;
	}
	if (!(d = PyDict_New()))
		goto out;
	for (uint32_t fi = 0; fi < s.nfields; fi++) {
		PyObject *v = field_array(bufs[fi], &s.fields[fi]);
		if (!v || PyDict_SetItemString(d, s.fields[fi].name, v) < 0) {
			Py_XDECREF(v);
			Py_CLEAR(d);
			goto out;
		}
		Py_DECREF(v);
	}
out:
	for (uint32_t fi = 0; fi < RF_MAX_FIELDS; fi++)
		Py_XDECREF(bufs[fi]);
	return d;
}

static PyObject *
dataset_subscript(DatasetObject *self, PyObject *key)
{
	Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);

	if (i == -1 && PyErr_Occurred())
		return NULL;
	return dataset_item(self, i);
}

static PyObject *
dataset_schema(DatasetObject *self, void *unused)
{
	if (dataset_check(self) < 0)
		return NULL;
	const rf_schema *s = rf_dataset_schema(self->ds);
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	for (uint32_t fi = 0; fi < s->nfields; fi++) {
		const rf_field *f = &s->fields[fi];
		PyObject *shape = PyTuple_New(f->rank);
		if (!shape)
			goto fail;
		for (uint32_t k = 0; k < f->rank; k++) {
			PyObject *o = (int32_t)k == f->var_dim ? Py_NewRef(Py_None)
				: PyLong_FromUnsignedLongLong(f->shape[k]);
			if (!o) {
				Py_DECREF(shape);
				goto fail;
			}
			(void)PyTuple_SetItem(shape, k, o);
		}
		PyObject *fd = Py_BuildValue("{s:s,s:N,s:O}", "dtype", rf_dtype_name(f->dtype),
					     "shape", shape, "variable", f->var_dim >= 0 ? Py_True : Py_False);
		if (!fd || PyDict_SetItemString(d, f->name, fd) < 0) {
			Py_XDECREF(fd);
			goto fail;
		}
		Py_DECREF(fd);
	}
	return d;
fail:
	Py_DECREF(d);
	return NULL;
}

static PyObject *
dataset_shards(DatasetObject *self, void *unused)
{
	if (dataset_check(self) < 0)
		return NULL;
	size_t n = rf_dataset_shards(self->ds);
	PyObject *l = PyList_New((Py_ssize_t)n);
	if (!l)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *p = rf_dataset_shard_path(self->ds, i);
		PyObject *o = PyUnicode_DecodeFSDefault(p ? p : "");
		if (!o) {
			Py_DECREF(l);
			return NULL;
		}
		(void)PyList_SetItem(l, (Py_ssize_t)i, o);
	}
	return l;
}

static PyObject *
dataset_chunks(DatasetObject *self, void *unused)
{
	if (dataset_check(self) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(rf_dataset_chunks(self->ds));
}

static PyObject *
dataset_chunk_info(DatasetObject *self, PyObject *arg)
{
	rf_chunk_info ci;
	unsigned long long c;

	if (rfpy_arg_u64(arg, "chunk_info's chunk", &c) < 0)
		return NULL;
	if (dataset_check(self) < 0)
		return NULL;
	if (rf_dataset_chunk_info(self->ds, c, &ci) < 0) {
		PyErr_SetString(PyExc_IndexError, "chunk index out of range");
		return NULL;
	}
	return Py_BuildValue("{s:I,s:K,s:K,s:K,s:K,s:I,s:s,s:K}", "shard", ci.shard,
			     "offset", (unsigned long long)ci.offset,
			     "stored_bytes", (unsigned long long)ci.stored_bytes,
			     "raw_bytes", (unsigned long long)ci.raw_bytes,
			     "first_sample", (unsigned long long)ci.first_sample,
			     "samples", ci.samples, "codec", ci.codec == RF_CODEC_ZSTD ? "zstd" : "none",
			     "xxh3", (unsigned long long)ci.xxh3);
}

static void
dataset_close_locked(DatasetObject *self)
{
	if (dataset_lock(self) < 0) {
		PyErr_Clear(); /* torn in a child of fork(): nothing to close */
		return;
	}
	rf_dataset_close(&self->ds);
	PyThread_release_lock(self->lock);
}

static PyObject *
dataset_close(DatasetObject *self, PyObject *unused)
{
	dataset_close_locked(self);
	Py_RETURN_NONE;
}

static PyObject *
dataset_enter(DatasetObject *self, PyObject *unused)
{
	if (dataset_check(self) < 0)
		return NULL;
	return Py_NewRef((PyObject *)self);
}

static PyObject *
dataset_exit(DatasetObject *self, PyObject *args)
{
	dataset_close_locked(self);
	Py_RETURN_FALSE;
}

static PyMethodDef dataset_methods[] = {
	{"close", (PyCFunction)dataset_close, METH_NOARGS, "Close the dataset's files."},
	{"chunk_info", (PyCFunction)dataset_chunk_info, METH_O,
	 "chunk_info(c) -> dict: shard, offset, stored_bytes, raw_bytes, first_sample,\n"
	 "samples, codec and xxh3 of chunk c (numbered across shards)."},
	{"__enter__", (PyCFunction)dataset_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)dataset_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef dataset_getset[] = {
	{"schema", (getter)dataset_schema, NULL,
	 "{name: {'dtype': 'f32', 'shape': (28, 28), 'variable': False}} in schema order;\n"
	 "a variable dimension's entry is None.", NULL},
	{"shards", (getter)dataset_shards, NULL, "The shard files, in sample order.", NULL},
	{"chunks", (getter)dataset_chunks, NULL, "The number of chunks.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot dataset_slots[] = {
	{Py_tp_dealloc, RFPY_FN(dataset_dealloc)},
	{Py_tp_doc, (void *)"A dataset opened for random access by ringfeed.open(): len(ds) samples,\n"
	 "ds[i] a dict {field: numpy array} (bf16 values as uint16 bits)."},
	{Py_tp_methods, dataset_methods},
	{Py_tp_getset, dataset_getset},
	{Py_mp_length, RFPY_FN(dataset_len)},
	{Py_mp_subscript, RFPY_FN(dataset_subscript)},
	{Py_sq_length, RFPY_FN(dataset_len)},
	{Py_sq_item, RFPY_FN(dataset_item)},
	{0, NULL},
};

static PyType_Spec dataset_spec = {
	.name = "ringfeed.Dataset",
	.basicsize = sizeof(DatasetObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = dataset_slots,
};

static PyTypeObject *DatasetType;

PyObject *
rfpy_open(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"paths", "verify", NULL};
	PyObject *arg, *keep = NULL;
	int verify = 1;
	const char **paths = NULL;
	size_t n;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:open", kwlist, &arg, &verify))
		return NULL;
	if (rfpy_paths(arg, &keep, &paths, &n) < 0)
		return NULL;
	rf_dataset_config cfg;
	rf_dataset_config_init(&cfg);
	cfg.verify = verify;
	cfg.log = rfpy_log;
	rf_dataset *ds = NULL;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = rf_dataset_open(&ds, paths, n, &cfg);
	Py_END_ALLOW_THREADS
	PyMem_Free(paths);
	Py_DECREF(keep);
	if (rc < 0)
		return rfpy_raise(rc, "open", rf_dataset_last_open_error());
	DatasetObject *obj = PyObject_New(DatasetObject, DatasetType);
	if (!obj) {
		rf_dataset_close(&ds);
		return NULL;
	}
	obj->ds = ds;
	obj->forks = rfpy_forks();
	obj->torn = 0;
	obj->lock = PyThread_allocate_lock();
	if (!obj->lock) {
		Py_DECREF(obj);
		return PyErr_NoMemory();
	}
	return (PyObject *)obj;
}

int
rfpy_dataset_init(PyObject *module)
{
	DatasetType = rfpy_add_type(module, &dataset_spec, 1);
	return DatasetType ? 0 : -1;
}
