/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.pack: write a dataset from in-memory arrays, read through
 * NumPy's __array_interface__ (no NumPy headers needed; the buffer
 * protocol's C side is not in CPython 3.9's stable ABI).
 */
#include "module.h"

#include <errno.h>
#include <string.h>

/* An input array's memory, C-contiguous, as NumPy describes it. */
struct view {
	PyObject *obj;           /* the array (a reference): keeps buf alive */
	const void *buf;
	Py_ssize_t len, itemsize;
	int ndim;
	Py_ssize_t shape[RF_MAX_RANK + 2];
	char format[16];         /* the struct-module format of an item */
};

static void
view_release(struct view *v)
{
	Py_CLEAR(v->obj);
}

struct pack_col {
	PyObject *name;          /* borrowed from the dict */
	int var;                 /* a list of per-sample arrays */
	struct view view;        /* fixed field */
	int have_view;
	struct view *items;      /* var field: one view per sample */
	Py_ssize_t nitems;
	uint64_t value_bytes;    /* fixed field: bytes of one sample's value */
};

/* What a field can hold, for the messages refusing what it cannot. */
#define PACK_DTYPES "numbers (int8 ... int64, uint8 ... uint64, float16/32/64; bool is stored " \
	"as u8 0/1) or raw bytes"

/* An array format the module cannot pack: a TypeError naming the field,
 * what fields hold and, for strings and objects, how to store text. */
static int
unsupported_format(PyObject *name, const char *format)
{
	if (strpbrk(format, "wsOpU"))
		PyErr_Format(PyExc_TypeError,
			     "field %R: an array of strings or Python objects (format '%s') "
			     "cannot be packed: fields hold " PACK_DTYPES "; store text as a "
			     "variable-length bytes field: ([numpy.frombuffer(s.encode(), "
			     "numpy.uint8) for s in texts], \"bytes\")", name, format);
	else
		PyErr_Format(PyExc_TypeError,
			     "field %R: unsupported array format '%s': fields hold " PACK_DTYPES,
			     name, format);
	return -1;
}

/* The dtype of a buffer from its struct-module format and item size. */
static int
dtype_of_format(PyObject *name, const struct view *v, enum rf_dtype *out)
{
	const char *f = v->format;

	if (*f == '>' || *f == '!') {
		PyErr_Format(PyExc_TypeError,
			     "field %R: big-endian arrays are not supported: convert with "
			     ".astype('<...')", name);
		return -1;
	}
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (!f[0] || f[1])
		return unsupported_format(name, v->format);
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
		return unsupported_format(name, v->format);
	}
	if (rf_dtype_size(*out) != (size_t)sz) {
		PyErr_Format(PyExc_TypeError, "field %R: unsupported item size %zd for format '%s'",
			     name, sz, v->format);
		return -1;
	}
	return 0;
}

/* The dtype: the override's name when given (its size must match the
 * buffer's items), else the buffer's own. */
static int
column_dtype(PyObject *name, const struct view *v, PyObject *override, enum rf_dtype *out)
{
	if (!override)
		return dtype_of_format(name, v, out);
	char sbuf[64];
	const char *s = rfpy_utf8(override, sbuf, sizeof(sbuf));
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
			view_release(&cols[i].view);
		for (Py_ssize_t k = 0; k < cols[i].nitems; k++)
			view_release(&cols[i].items[k]);
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

/* A torch.Tensor (an object without the buffer protocol that has .detach,
 * .cpu and .numpy) as a host NumPy array, which is what a PyTorch user has
 * to pack: a new reference.  A bf16 tensor, which NumPy cannot hold, comes
 * as its 16-bit pattern with *bf16 = 1.  Anything else: a new reference to
 * value itself.  NULL with an exception. */
static PyObject *
host_array(PyObject *value, int *bf16)
{
	*bf16 = 0;
	if (PyObject_HasAttrString(value, "__array_interface__") ||
	    !PyObject_HasAttrString(value, "detach") ||
	    !PyObject_HasAttrString(value, "cpu") || !PyObject_HasAttrString(value, "numpy")) {
		Py_INCREF(value);
		return value;
	}
	PyObject *t = PyObject_CallMethod(value, "detach", NULL);
	PyObject *u = t ? PyObject_CallMethod(t, "cpu", NULL) : NULL;
	Py_XDECREF(t);
	t = u ? PyObject_CallMethod(u, "contiguous", NULL) : NULL;
	Py_XDECREF(u);
	if (!t)
		return NULL;
	PyObject *dtype = PyObject_GetAttrString(t, "dtype");
	PyObject *dname = dtype ? PyObject_Str(dtype) : NULL;
	char dnbuf[64];
	const char *dn = dname ? rfpy_utf8(dname, dnbuf, sizeof(dnbuf)) : NULL;
	if (dn && !strcmp(dn, "torch.bfloat16")) {
		PyObject *torch = PyImport_ImportModule("torch");
		PyObject *i16 = torch ? PyObject_GetAttrString(torch, "int16") : NULL;
		u = i16 ? PyObject_CallMethod(t, "view", "O", i16) : NULL;
		Py_XDECREF(i16);
		Py_XDECREF(torch);
		Py_DECREF(t);
		t = u;
		*bf16 = 1;
	}
	Py_XDECREF(dname);
	Py_XDECREF(dtype);
	if (!t || PyErr_Occurred()) {
		Py_XDECREF(t);
		return NULL;
	}
	u = PyObject_CallMethod(t, "numpy", NULL);
	Py_DECREF(t);
	return u;
}

/* The struct-module format of NumPy's typestr ("<f4": byte order, kind,
 * item size) into f (16 bytes): "f", ">f" for a big-endian one, "?" for
 * bool, "w" for str, "O" for objects, "Zf" for complex; NULL for any
 * other kind. */
static const char *
typestr_format(const char *ts, char *f)
{
	static const char ints[] = "bhiq", uints[] = "BHIQ", floats[] = "efd";
	char order = ts[0], kind = ts[0] ? ts[1] : 0;
	long size = kind ? strtol(ts + 2, NULL, 10) : 0;
	int lg = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : size == 8 ? 3 : -1;
	char c;

	switch (kind) {
	case 'b': c = '?'; break;
	case 'i': c = lg >= 0 ? ints[lg] : 'i'; break;
	case 'u': c = lg >= 0 ? uints[lg] : 'I'; break;
	case 'f': c = lg >= 1 ? floats[lg - 1] : 'g'; break;
	case 'U': c = 'w'; break;
	case 'S': c = 's'; break;
	case 'O': c = 'O'; break;
	case 'c': /* complex: Zf, Zd */
		snprintf(f, 16, "Z%c", size == 8 ? 'f' : 'd');
		return f;
	default: return NULL; /* datetimes, records: the typestr itself */
	}
	snprintf(f, 16, "%s%c", order == '>' && size > 1 ? ">" : "", c);
	return f;
}

/* view from NumPy's __array_interface__ of arr (a dict: shape, typestr,
 * data as (address, read-only), strides None when C-contiguous): 0; 1 when
 * it is not C-contiguous; -1 with an exception. */
static int
interface_view(PyObject *arr, struct view *view)
{
	PyObject *ai = PyObject_GetAttrString(arr, "__array_interface__");
	int rc = -1;

	if (!ai)
		return -1;
	PyObject *shape = PyDict_Check(ai) ? PyDict_GetItemString(ai, "shape") : NULL;
	PyObject *ts = PyDict_Check(ai) ? PyDict_GetItemString(ai, "typestr") : NULL;
	PyObject *data = PyDict_Check(ai) ? PyDict_GetItemString(ai, "data") : NULL;
	PyObject *strides = PyDict_Check(ai) ? PyDict_GetItemString(ai, "strides") : NULL;
	char tsb[32];
	if (!shape || !PyTuple_Check(shape) || !ts || !PyUnicode_Check(ts) || !data ||
	    !PyTuple_Check(data) || PyTuple_Size(data) < 1 || !rfpy_utf8(ts, tsb, sizeof(tsb))) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "a malformed __array_interface__ on %.100s",
			     rfpy_type_name(arr));
		goto out;
	}
	Py_ssize_t nd = PyTuple_Size(shape);
	if (nd > RF_MAX_RANK + 1) {
		PyErr_Format(PyExc_ValueError, "an array of %zd dimensions: at most %d", nd,
			     RF_MAX_RANK + 1);
		goto out;
	}
	if (!typestr_format(tsb, view->format))
		snprintf(view->format, sizeof(view->format), "%.15s", tsb);
	view->itemsize = (Py_ssize_t)strtol(tsb + (tsb[0] ? 2 : 0), NULL, 10);
	view->ndim = (int)nd;
	view->len = view->itemsize;
	for (Py_ssize_t d = 0; d < nd; d++) {
		view->shape[d] = PyLong_AsSsize_t(PyTuple_GetItem(shape, d));
		if (view->shape[d] < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "a negative dimension");
			goto out;
		}
		view->len *= view->shape[d];
	}
	/* Strides given: C-contiguous all the same when they are the C ones
	 * (or the array is empty). */
	if (strides && strides != Py_None) {
		Py_ssize_t want = view->itemsize;
		int contiguous = PyTuple_Check(strides) && PyTuple_Size(strides) == nd;
		for (Py_ssize_t d = nd - 1; contiguous && d >= 0; d--) {
			Py_ssize_t st = PyLong_AsSsize_t(PyTuple_GetItem(strides, d));
			if (st == -1 && PyErr_Occurred())
				goto out;
			contiguous = view->shape[d] == 1 || st == want;
			want *= view->shape[d];
		}
		if (!contiguous && view->len > 0) {
			rc = 1;
			goto out;
		}
	}
	view->buf = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
	if (!view->buf && PyErr_Occurred())
		goto out;
	view->obj = arr;
	Py_INCREF(arr);
	rc = 0;
out:
	Py_DECREF(ai);
	return rc;
}

/* The memory of `value` (an array, or a tensor through host_array) into
 * *view; a bf16 tensor sets *bf16.  0, or -1 with a TypeError naming the
 * field (and the sample of a variable field: sample >= 0). */
static int
get_view(PyObject *name, Py_ssize_t sample, PyObject *value, struct view *view, int *bf16)
{
	PyObject *arr = host_array(value, bf16);
	if (!arr)
		return -1;
	/* Another object with the buffer protocol (bytes, array.array, a
	 * memoryview) through numpy.asarray, which shares its memory. */
	if (!PyObject_HasAttrString(arr, "__array_interface__")) {
		PyObject *mv = PyMemoryView_FromObject(arr);
		PyObject *np = mv ? PyImport_ImportModule("numpy") : NULL;
		PyObject *a = np ? PyObject_CallMethod(np, "asarray", "O", mv) : NULL;
		Py_XDECREF(np);
		Py_XDECREF(mv);
		Py_DECREF(arr);
		if (!a) {
			char where[64] = "";
			if (sample >= 0)
				snprintf(where, sizeof(where), ", sample %zd", sample);
			if (mv && PyErr_ExceptionMatches(PyExc_ImportError)) {
				PyErr_Clear();
				PyErr_Format(PyExc_ImportError,
					     "field %R%s: ringfeed.pack reads a %.100s through NumPy, "
					     "which is not installed (pip install numpy)",
					     name, where, rfpy_type_name(value));
				return -1;
			}
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "field %R%s: expected an array (a NumPy array, a torch "
				     "tensor or another object with the buffer protocol), an "
				     "(array, dtype) pair or a list of arrays; got %.100s "
				     "(numpy.asarray converts a sequence)",
				     name, where, rfpy_type_name(value));
			return -1;
		}
		arr = a;
	}
	int rc = interface_view(arr, view);
	if (rc > 0) {
		char where[64] = "";
		if (sample >= 0)
			snprintf(where, sizeof(where), ", sample %zd", sample);
		PyErr_Format(PyExc_TypeError,
			     "field %R%s: the array is not C-contiguous "
			     "(numpy.ascontiguousarray makes a contiguous copy)", name, where);
		rc = -1;
	}
	/* The view holds its own reference to the array. */
	Py_DECREF(arr);
	return rc;
}

static int
add_fixed(struct pack_col *c, rf_schema *schema, PyObject *value, PyObject *override,
	  Py_ssize_t *nsamples)
{
	int bf16;
	if (get_view(c->name, -1, value, &c->view, &bf16) < 0)
		return -1;
	c->have_view = 1;
	enum rf_dtype dt;
	if (bf16 && !override)
		dt = RF_DTYPE_BF16;
	else if (column_dtype(c->name, &c->view, override, &dt) < 0)
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
	char nbuf[256];
	const char *name = rfpy_utf8(c->name, nbuf, sizeof(nbuf));
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
	c->items = PyMem_Calloc(n ? (size_t)n : 1, sizeof(struct view));
	if (!c->items) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		struct view *v = &c->items[i];
		int bf16;
		if (get_view(c->name, i, PyList_GetItem(list, i), v, &bf16) < 0)
			return -1;
		c->nitems++;
		enum rf_dtype idt;
		if (bf16 && !override)
			idt = RF_DTYPE_BF16;
		else if (column_dtype(c->name, v, override, &idt) < 0)
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
	char nbuf[256];
	const char *name = rfpy_utf8(c->name, nbuf, sizeof(nbuf));
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
