/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.open (random access to a dataset, samples as NumPy arrays) and
 * ringfeed.pack (write a dataset from in-memory arrays).
 *
 * Input arrays are read through the buffer protocol, so the extension needs
 * no NumPy headers; NumPy is imported at run time only to build the arrays
 * ds[i] returns.
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

/* --------------------------------------------------------------- pack */

struct pack_col {
	PyObject *name;          /* borrowed from the dict */
	int var;                 /* a list of per-sample arrays */
	Py_buffer view;          /* fixed field */
	int have_view;
	Py_buffer *items;        /* var field: one view per sample */
	Py_ssize_t nitems;
	uint64_t value_bytes;    /* fixed field: bytes of one sample's value */
};

/* The dtype of a buffer from its struct-module format and item size. */
static int
dtype_of_format(const Py_buffer *v, enum rf_dtype *out)
{
	const char *f = v->format ? v->format : "B";

	if (*f == '>' || *f == '!') {
		PyErr_SetString(PyExc_TypeError,
				"big-endian arrays are not supported: convert with .astype('<...')");
		return -1;
	}
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (!f[0] || f[1]) {
		PyErr_Format(PyExc_TypeError, "unsupported array format '%s'", v->format);
		return -1;
	}
	Py_ssize_t sz = v->itemsize;
	switch (*f) {
	case 'b': case 'h': case 'i': case 'l': case 'q':
		*out = sz == 1 ? RF_DTYPE_I8 : sz == 2 ? RF_DTYPE_I16 : sz == 4 ? RF_DTYPE_I32
		     : RF_DTYPE_I64;
		break;
	case 'B': case 'H': case 'I': case 'L': case 'Q': case '?': case 'c':
		*out = sz == 1 ? RF_DTYPE_U8 : sz == 2 ? RF_DTYPE_U16 : sz == 4 ? RF_DTYPE_U32
		     : RF_DTYPE_U64;
		break;
	case 'e':
		*out = RF_DTYPE_F16;
		break;
	case 'f':
		*out = RF_DTYPE_F32;
		break;
	case 'd':
		*out = RF_DTYPE_F64;
		break;
	default:
		PyErr_Format(PyExc_TypeError, "unsupported array format '%s'", v->format);
		return -1;
	}
	if (rf_dtype_size(*out) != (size_t)sz) {
		PyErr_Format(PyExc_TypeError, "unsupported item size %zd for format '%s'",
			     sz, v->format);
		return -1;
	}
	return 0;
}

/* The dtype: the override's name when given (its size must match the
 * buffer's items), else the buffer's own. */
static int
column_dtype(PyObject *name, const Py_buffer *v, PyObject *override, enum rf_dtype *out)
{
	if (!override)
		return dtype_of_format(v, out);
	const char *s = PyUnicode_AsUTF8AndSize(override, NULL);
	if (!s)
		return -1;
	if (rf_dtype_parse(s, out) < 0) {
		PyErr_Format(PyExc_ValueError, "field %R: unknown dtype '%s'", name, s);
		return -1;
	}
	if (rf_dtype_size(*out) != (size_t)v->itemsize) {
		PyErr_Format(PyExc_ValueError,
			     "field %R: dtype %s has %zu-byte items, the array %zd-byte items",
			     name, s, rf_dtype_size(*out), v->itemsize);
		return -1;
	}
	return 0;
}

static void
pack_cols_free(struct pack_col *cols, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (cols[i].have_view)
			PyBuffer_Release(&cols[i].view);
		for (Py_ssize_t k = 0; k < cols[i].nitems; k++)
			PyBuffer_Release(&cols[i].items[k]);
		PyMem_Free(cols[i].items);
	}
	PyMem_Free(cols);
}

/* Collects the last error message a writer logs: a failed rf_writer_open
 * has no handle to ask. */
struct pack_log {
	char msg[512];
};

static void
pack_log_fn(void *user, enum rf_log_level level, const char *msg)
{
	struct pack_log *pl = user;

	if (level == RF_LOG_ERROR)
		snprintf(pl->msg, sizeof(pl->msg), "%s", msg);
	else
		rfpy_log(NULL, level, msg);
}

static int
add_fixed(struct pack_col *c, rf_schema *schema, PyObject *value, PyObject *override,
	  Py_ssize_t *nsamples)
{
	if (PyObject_GetBuffer(value, &c->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError,
			     "field %R: expected a C-contiguous array (buffer protocol), "
			     "a (array, dtype) pair or a list of arrays; got %.100s "
			     "(numpy.ascontiguousarray makes a contiguous copy)",
			     c->name, rfpy_type_name(value));
		return -1;
	}
	c->have_view = 1;
	enum rf_dtype dt;
	if (column_dtype(c->name, &c->view, override, &dt) < 0)
		return -1;
	if (c->view.ndim < 1 || c->view.ndim - 1 > RF_MAX_RANK) {
		PyErr_Format(PyExc_ValueError,
			     "field %R: the array needs 1 to %d dimensions (samples first), has %d",
			     c->name, RF_MAX_RANK + 1, c->view.ndim);
		return -1;
	}
	uint64_t shape[RF_MAX_RANK];
	c->value_bytes = (uint64_t)c->view.itemsize;
	for (int d = 1; d < c->view.ndim; d++) {
		shape[d - 1] = (uint64_t)c->view.shape[d];
		c->value_bytes *= shape[d - 1];
	}
	if (*nsamples < 0)
		*nsamples = c->view.shape[0];
	else if (*nsamples != c->view.shape[0]) {
		PyErr_Format(PyExc_ValueError, "field %R has %zd samples, an earlier field %zd",
			     c->name, c->view.shape[0], *nsamples);
		return -1;
	}
	const char *name = PyUnicode_AsUTF8AndSize(c->name, NULL);
	if (!name)
		return -1;
	if (rf_schema_add(schema, name, dt, (uint32_t)(c->view.ndim - 1), shape, -1) < 0) {
		PyErr_Format(PyExc_ValueError,
			     "field %R: not a valid field (name of 1-55 [A-Za-z0-9_.-], unique; "
			     "no zero dimension; at most %d fields)", c->name, RF_MAX_FIELDS);
		return -1;
	}
	return 0;
}

static int
add_var(struct pack_col *c, rf_schema *schema, PyObject *list, PyObject *override,
	Py_ssize_t *nsamples)
{
	Py_ssize_t n = PyList_Size(list);
	enum rf_dtype dt = RF_DTYPE_U8;
	uint64_t shape[RF_MAX_RANK] = {0};
	int ndim = -1;

	c->var = 1;
	c->items = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
	if (!c->items) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_buffer *v = &c->items[i];
		if (PyObject_GetBuffer(PyList_GetItem(list, i), v,
				       PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "field %R, sample %zd: expected a C-contiguous array",
				     c->name, i);
			return -1;
		}
		c->nitems++;
		enum rf_dtype idt;
		if (column_dtype(c->name, v, override, &idt) < 0)
			return -1;
		int nd = v->ndim < 1 ? 1 : v->ndim;
		if (i == 0) {
			dt = idt;
			ndim = nd;
			if (ndim > RF_MAX_RANK) {
				PyErr_Format(PyExc_ValueError,
					     "field %R: at most %d dimensions per sample",
					     c->name, RF_MAX_RANK);
				return -1;
			}
			for (int d = 1; d < ndim; d++)
				shape[d] = (uint64_t)v->shape[d];
		} else {
			int same = idt == dt && nd == ndim;
			for (int d = 1; same && d < ndim; d++)
				same = (uint64_t)v->shape[d] == shape[d];
			if (!same) {
				PyErr_Format(PyExc_ValueError,
					     "field %R, sample %zd: dtype or trailing shape differs "
					     "from sample 0 (only the first dimension may vary)",
					     c->name, i);
				return -1;
			}
		}
	}
	if (n == 0)
		ndim = 1;
	if (*nsamples < 0)
		*nsamples = n;
	else if (*nsamples != n) {
		PyErr_Format(PyExc_ValueError, "field %R has %zd samples, an earlier field %zd",
			     c->name, n, *nsamples);
		return -1;
	}
	const char *name = PyUnicode_AsUTF8AndSize(c->name, NULL);
	if (!name)
		return -1;
	if (rf_schema_add(schema, name, dt, (uint32_t)ndim, shape, 0) < 0) {
		PyErr_Format(PyExc_ValueError,
			     "field %R: not a valid field (name of 1-55 [A-Za-z0-9_.-], unique; "
			     "no zero dimension; at most %d fields)", c->name, RF_MAX_FIELDS);
		return -1;
	}
	return 0;
}

PyObject *
rfpy_pack(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"path", "columns", "zstd", "chunk_bytes", "shard_bytes",
				 "shuffle", NULL};
	PyObject *path_bytes = NULL, *path_arg, *columns, *shuffle = Py_None, *zstd_arg = NULL,
		 *chunk_arg = NULL, *shard_arg = NULL;
	unsigned long long seed = 0;
	uint64_t *order = NULL;
	int zstd = 0;
	long long level = 0;
	unsigned long long chunk_bytes = 0, shard_bytes = 0;
	struct pack_col *cols = NULL;
	size_t ncols = 0;
	rf_schema schema;
	Py_ssize_t nsamples = -1;
	PyObject *ret = NULL;

	/* Converted here, so that a TypeError or OverflowError names the
	 * argument (PyArg's formats name it by its position). */
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOO:pack", kwlist, &path_arg,
					 &columns, &zstd_arg, &chunk_arg, &shard_arg, &shuffle))
		return NULL;
	if (!PyUnicode_FSConverter(path_arg, &path_bytes)) {
		if (PyErr_ExceptionMatches(PyExc_TypeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "path must be a str, bytes or os.PathLike, "
				     "not %.100s", rfpy_type_name(path_arg));
		}
		return NULL;
	}
	if (!PyDict_Check(columns)) {
		PyErr_Format(PyExc_TypeError, "columns must be a dict of name: array, not %.100s",
			     rfpy_type_name(columns));
		goto out;
	}
	if ((zstd_arg && rfpy_arg_int(zstd_arg, "zstd", 0, 22, &level) < 0) ||
	    (chunk_arg && rfpy_arg_u64(chunk_arg, "chunk_bytes", &chunk_bytes) < 0) ||
	    (shard_arg && rfpy_arg_u64(shard_arg, "shard_bytes", &shard_bytes) < 0))
		goto out;
	zstd = (int)level;
	/* shuffle: None, or a seed (an int; True is refused rather than read
	 * as seed 1).  Out of range is an OverflowError naming the argument,
	 * as for every other integer argument. */
	if (shuffle != Py_None && PyBool_Check(shuffle)) {
		PyErr_SetString(PyExc_TypeError, "shuffle takes a seed: an int in 0..2**64-1, or None");
		goto out;
	}
	if (shuffle != Py_None && rfpy_arg_u64(shuffle, "shuffle", &seed) < 0)
		goto out;
	memset(&schema, 0, sizeof(schema));
	Py_ssize_t nd = PyDict_Size(columns);
	if (nd == 0 || nd > RF_MAX_FIELDS) {
		PyErr_Format(PyExc_ValueError, "pack needs 1 to %d fields, got %zd",
			     RF_MAX_FIELDS, nd);
		goto out;
	}
	if (zstd < 0 || zstd > 22) {
		PyErr_SetString(PyExc_ValueError, "zstd must be 0 (no compression) to 22");
		goto out;
	}
	cols = PyMem_Calloc((size_t)nd, sizeof(*cols));
	if (!cols) {
		PyErr_NoMemory();
		goto out;
	}
	PyObject *key, *value;
	Py_ssize_t pos = 0;
	while (PyDict_Next(columns, &pos, &key, &value)) {
		struct pack_col *c = &cols[ncols++];
		PyObject *override = NULL;
		if (!PyUnicode_Check(key)) {
			PyErr_SetString(PyExc_TypeError, "field names must be str");
			goto out;
		}
		c->name = key;
		if (PyTuple_Check(value)) {
			if (PyTuple_Size(value) != 2 || !PyUnicode_Check(PyTuple_GetItem(value, 1))) {
				PyErr_Format(PyExc_TypeError,
					     "field %R: a tuple must be (array, dtype name)", key);
				goto out;
			}
			override = PyTuple_GetItem(value, 1);
			value = PyTuple_GetItem(value, 0);
		}
		int rc = PyList_Check(value) ? add_var(c, &schema, value, override, &nsamples)
			: add_fixed(c, &schema, value, override, &nsamples);
		if (rc < 0)
			goto out;
	}

	/* The order is computed a block at a time, never held whole. */
	enum { ORDER_BLOCK = 4096 };
	if (shuffle != Py_None) {
		order = PyMem_Malloc(ORDER_BLOCK * sizeof(*order));
		if (!order) {
			PyErr_NoMemory();
			goto out;
		}
	}

	struct pack_log plog = {{0}};
	rf_writer_config wcfg;
	rf_writer_config_init(&wcfg);
	wcfg.zstd_level = zstd;
	if (chunk_bytes)
		wcfg.chunk_bytes = chunk_bytes;
	wcfg.shard_bytes = shard_bytes;
	wcfg.log = pack_log_fn;
	wcfg.log_user = &plog;

	rf_writer *w = NULL;
	int rc;
	char msg[512] = "";
	rf_value values[RF_MAX_FIELDS];
	/* The views pin every input buffer, so the writer may run without the
	 * GIL. */
	Py_BEGIN_ALLOW_THREADS
	rc = rf_writer_open(&w, PyBytes_AsString(path_bytes), &schema, &wcfg);
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "%s", plog.msg);
	} else {
		for (Py_ssize_t o = 0; o < nsamples && rc >= 0; o++) {
			if (order && o % ORDER_BLOCK == 0)
				rf_pack_order((uint64_t)nsamples, seed, (uint64_t)o,
					      (uint64_t)(nsamples - o < ORDER_BLOCK ? nsamples - o
										 : ORDER_BLOCK),
					      order);
			Py_ssize_t i = order ? (Py_ssize_t)order[o % ORDER_BLOCK] : o;
			for (size_t k = 0; k < ncols; k++) {
				const struct pack_col *c = &cols[k];
				if (c->var) {
					values[k].data = c->items[i].buf;
					values[k].len = (uint64_t)c->items[i].len;
				} else {
					values[k].data = (const char *)c->view.buf +
						(uint64_t)i * c->value_bytes;
					values[k].len = c->value_bytes;
				}
			}
			rc = rf_writer_add(w, values);
		}
		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s", rf_writer_errmsg(w));
			rf_writer_abort(&w);
		} else {
			rc = rf_writer_close(&w);
			if (rc < 0)
				snprintf(msg, sizeof(msg), "%s", plog.msg);
		}
	}
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		rfpy_raise(rc, "pack", msg);
		goto out;
	}
	ret = PyLong_FromSsize_t(nsamples);
out:
	PyMem_Free(order);
	if (cols)
		pack_cols_free(cols, ncols);
	Py_XDECREF(path_bytes);
	return ret;
}

int
rfpy_dataset_init(PyObject *module)
{
	DatasetType = rfpy_add_type(module, &dataset_spec, 1);
	return DatasetType ? 0 : -1;
}
