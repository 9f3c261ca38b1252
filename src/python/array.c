/* SPDX-License-Identifier: MIT */
/* ringfeed.Array: one field of a held batch, exported without a copy
 * through DLPack, the buffer protocol (CPython 3.11 and later),
 * __array_interface__ and __array__. */
#include "loader.h"
#include "buffer.h"

#include <string.h>

/* ------------------------------------------------------------ array */

static void
array_dealloc(ArrayObject *self)
{
	Py_XDECREF((PyObject *)self->batch);
	rfpy_free((PyObject *)self);
}

ArrayObject *
rfpy_array_new(BatchObject *batch, void *data, enum rf_dtype dtype, int ndim, const int64_t *shape)
{
	ArrayObject *a = PyObject_New(ArrayObject, rfpy_ArrayType);

	if (!a)
		return NULL;
	a->batch = (BatchObject *)Py_NewRef((PyObject *)batch);
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
dl_deleter_versioned(DLManagedTensorVersioned *m)
{
	if (m->manager_ctx && Py_IsInitialized()) {
		PyGILState_STATE g = PyGILState_Ensure();
		Py_XDECREF((PyObject *)m->manager_ctx);
		PyGILState_Release(g);
	}
	free(m);
}

/* A capsule's destructor: a consumer renames the capsule (`used`) when it
 * takes ownership, and then the deleter is its business; otherwise the
 * tensor named `name` (legacy or versioned) is deleted here. */
static void
capsule_free(PyObject *cap, const char *used, const char *name, int versioned)
{
	if (PyCapsule_IsValid(cap, used))
		return;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	void *m = PyCapsule_GetPointer(cap, name);
	if (m && versioned)
		((DLManagedTensorVersioned *)m)->deleter(m);
	else if (m)
		((DLManagedTensor *)m)->deleter(m);
	else
		PyErr_WriteUnraisable(cap);
	PyErr_Restore(type, value, tb);
}

static void
capsule_destructor_versioned(PyObject *cap)
{
	capsule_free(cap, "used_dltensor_versioned", "dltensor_versioned", 1);
}

static void
capsule_destructor(PyObject *cap)
{
	capsule_free(cap, "used_dltensor", "dltensor", 0);
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)'s
 * keywords, parsed by hand: the vectorcall convention spares the tuple and
 * dict of the generic parser on a call made for every field of every
 * batch. */
static int
dlpack_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **vals)
{
	static const char *const names[] = {"stream", "max_version", "dl_device", "copy"};
	Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;

	if (nargs > 0) {
		PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
		return -1;
	}
	for (Py_ssize_t k = 0; k < nkw; k++) {
		PyObject *key = PyTuple_GetItem(kwnames, k);
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

static int
array_readonly(const ArrayObject *self)
{
	return (self->batch->b->flags & RF_BATCH_READONLY) != 0;
}

/* Whether max_version (None or a (major, minor) tuple) admits DLPack 1.0:
 * 1, 0, or -1 with an exception. */
static int
wants_versioned(PyObject *max_version)
{
	if (max_version == Py_None)
		return 0;
	int major, minor;
	if (!PyTuple_Check(max_version) ||
	    !PyArg_ParseTuple(max_version, "ii:max_version", &major, &minor)) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_TypeError, "max_version must be a (major, minor) tuple, "
				     "not %.100s", rfpy_type_name(max_version));
		return -1;
	}
	return major >= 1;
}

/*
 * __dlpack__ of a read-only array: a field of a batch handed out in place
 * (RF_BATCH_READONLY), in a read-only map of the dataset's file, where a
 * write faults.  A consumer that speaks DLPack 1.0 and asks for no copy
 * (copy=False) gets the memory itself with the read-only flag; every other
 * consumer gets a copy of its own (flagged as one in DLPack 1.0), since a
 * legacy capsule cannot say read-only and PyTorch, which has no read-only
 * tensors, would write into it; copy=False without DLPack 1.0 is refused.
 * numpy.asarray reads the memory itself (read-only, no copy).
 */
static PyObject *
array_dlpack_readonly(ArrayObject *self, PyObject *max_version, PyObject *copy)
{
	int versioned = wants_versioned(max_version);
	if (versioned < 0)
		return NULL;
	int share = copy == Py_False;
	if (share && !versioned) {
		PyErr_SetString(PyExc_BufferError,
				"this array is read-only (its batch lies in place in a read-only "
				"map of the dataset's file) and a DLPack consumer before 1.0 cannot be "
				"told so: export with copy=None (a copy), read it with numpy.asarray "
				"(no copy, read-only), or open the Loader with inplace=False");
		return NULL;
	}
	size_t n = (size_t)(self->ndim ? self->ndim : 1);
	uint64_t nbytes = share ? 0 : array_nbytes(self);
	size_t head = versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
	/* One block: the struct, the shape, then the copy, 256-byte aligned
	 * as DLPack wants a tensor's data. */
	size_t at = (head + n * sizeof(int64_t) + 255) & ~(size_t)255;
	size_t total = (at + (size_t)nbytes + 255) & ~(size_t)255;
	uint8_t *blk = aligned_alloc(256, total);
	if (!blk)
		return PyErr_NoMemory();
	memset(blk, 0, head);
	int64_t *shape = (int64_t *)(void *)(blk + head);
	memcpy(shape, self->shape, (size_t)self->ndim * sizeof(int64_t));
	DLTensor t = {
		.data = share ? self->data : blk + at,
		.device = self->batch->core->device,
		.ndim = self->ndim,
		.dtype = rfpy_dl_dtype(self->dtype),
		.shape = shape,
		.strides = NULL,
		.byte_offset = 0,
	};
	if (nbytes)
		memcpy(blk + at, self->data, (size_t)nbytes);
	PyObject *cap;
	if (versioned) {
		DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)(void *)blk;
		m->version.major = 1;
		m->version.minor = 0;
		m->dl_tensor = t;
		/* Shared: the Array (and so the batch) lives as long as the
		 * consumer's tensor.  Copied: nothing to hold. */
		m->manager_ctx = share ? Py_NewRef((PyObject *)self) : NULL;
		m->flags = share ? RFPY_DLPACK_FLAG_READ_ONLY : RFPY_DLPACK_FLAG_IS_COPIED;
		m->deleter = dl_deleter_versioned;
		cap = PyCapsule_New(m, "dltensor_versioned", capsule_destructor_versioned);
		if (!cap) {
			Py_XDECREF((PyObject *)m->manager_ctx);
			free(blk);
		}
	} else {
		DLManagedTensor *m = (DLManagedTensor *)(void *)blk;
		m->dl_tensor = t;
		m->manager_ctx = NULL;
		m->deleter = dl_deleter;
		cap = PyCapsule_New(m, "dltensor", capsule_destructor);
		if (!cap)
			free(blk);
	}
	return cap;
}

static PyObject *
array_dlpack_vals(ArrayObject *self, PyObject *const *vals)
{
	BatchObject *batch = self->batch;
	DLDevice dev = batch->core->device;
	PyObject *stream = vals[0], *dl_device = vals[2], *copy = vals[3];
	if (dl_device != Py_None) {
		int dt, di;
		if (!PyTuple_Check(dl_device)) {
			PyErr_Format(PyExc_TypeError, "dl_device must be a (device_type, "
				     "device_id) tuple, not %.100s", rfpy_type_name(dl_device));
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
	if (dev.device_type == kDLCPU && array_readonly(self)) {
		if (stream != Py_None) {
			long long s = PyLong_AsLongLong(stream);
			if (s == -1 && PyErr_Occurred())
				return NULL;
			if (s != -1) {
				PyErr_SetString(PyExc_ValueError,
						"stream must be None for an array on the CPU");
				return NULL;
			}
		}
		return array_dlpack_readonly(self, vals[1], copy);
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
	m->manager_ctx = Py_NewRef((PyObject *)self);
	m->deleter = dl_deleter;
	PyObject *cap = PyCapsule_New(m, "dltensor", capsule_destructor);
	if (!cap) {
		Py_DECREF(self);
		free(m);
	}
	return cap;
}

static PyObject *
array_dlpack(ArrayObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *vals[4] = {Py_None, Py_None, Py_None, Py_None};

	if (dlpack_args(args, nargs, kwnames, vals) < 0)
		return NULL;
	return array_dlpack_vals(self, vals);
}

/* The same for CPython 3.9, whose stable ABI has no METH_FASTCALL. */
static PyObject *
array_dlpack_kw(ArrayObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
	PyObject *vals[4] = {Py_None, Py_None, Py_None, Py_None};

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &vals[0],
					 &vals[1], &vals[2], &vals[3]))
		return NULL;
	return array_dlpack_vals(self, vals);
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
		(void)PyTuple_SetItem(t, d, o);
	}
	return t;
}

/* len(): the first dimension (the batch's samples), as NumPy and torch
 * give it. */
static Py_ssize_t
array_len(ArrayObject *self)
{
	if (self->ndim == 0) {
		PyErr_SetString(PyExc_TypeError, "len() of a 0-d ringfeed.Array");
		return -1;
	}
	return (Py_ssize_t)self->shape[0];
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
array_readonly_get(ArrayObject *self, void *unused)
{
	return PyBool_FromLong(array_readonly(self));
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

/* Why NumPy and the buffer protocol cannot have the array: NULL when they
 * can. */
static const char *
host_refusal(const ArrayObject *self)
{
	if (self->batch->core->device.device_type != kDLCPU)
		return "the array is in device memory: use torch.from_dlpack or cupy.from_dlpack";
	if (!rfpy_buffer_format(self->dtype))
		return "bf16 has no buffer-protocol format: use torch.from_dlpack";
	return NULL;
}

int
rfpy_array_export(PyObject *obj, int writable, struct rfpy_export *e)
{
	ArrayObject *self = (ArrayObject *)obj;
	const char *why = host_refusal(self);

	if (why) {
		PyErr_SetString(PyExc_BufferError, why);
		return -1;
	}
	if (writable) {
		PyErr_SetString(PyExc_BufferError, "ringfeed arrays are read-only");
		return -1;
	}
	Py_INCREF(obj);
	e->buf = self->data;
	e->len = (Py_ssize_t)array_nbytes(self);
	e->itemsize = (Py_ssize_t)rf_dtype_size(self->dtype);
	e->format = rfpy_buffer_format(self->dtype);
	e->ndim = self->ndim;
	e->shape = self->bshape;
	e->strides = self->bstrides;
	return 0;
}

/* NumPy's array interface (version 3), the way NumPy takes a host array
 * without a copy where the buffer protocol is not in the stable ABI
 * (CPython 3.9 and 3.10); NumPy keeps a reference to the Array.  Device
 * memory and bf16 have none: AttributeError, after which NumPy asks
 * __array__, which says why. */
static PyObject *
array_interface(ArrayObject *self, void *unused)
{
	const char *why = host_refusal(self);

	if (why) {
		PyErr_SetString(PyExc_AttributeError, why);
		return NULL;
	}
	PyObject *shape = array_shape(self, NULL);
	if (!shape)
		return NULL;
	PyObject *r = Py_BuildValue("{s:N,s:s,s:(N,O),s:O,s:i}", "shape", shape, "typestr",
				    rfpy_numpy_dtype(self->dtype), "data",
				    PyLong_FromVoidPtr(self->data), Py_True, "strides", Py_None,
				    "version", 3);
	return r;
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
	const char *why = host_refusal(self);
	if (why) {
		PyErr_Format(PyExc_TypeError, "NumPy cannot read this array: %s", why);
		return NULL;
	}
	/* numpy.asarray of the array itself takes the buffer protocol (3.11
	 * and later) or __array_interface__: no copy, and no call back here. */
	PyObject *np = PyImport_ImportModule("numpy");
	PyObject *r = NULL;
	if (np) {
		r = dtype == Py_None ? PyObject_CallMethod(np, "asarray", "O", (PyObject *)self)
				     : PyObject_CallMethod(np, "asarray", "OO", (PyObject *)self,
							   dtype);
		Py_DECREF(np);
	}
	if (r && copy != Py_None && PyObject_IsTrue(copy) == 1) {
		PyObject *c = PyObject_CallMethod(r, "copy", NULL);
		Py_DECREF(r);
		r = c;
	}
	return r;
}

/* METH_FASTCALL: in the stable ABI from 3.10 on; the method table with it
 * is used on 3.11 and later only (rfpy_array_spec_pick). */
#define RFPY_METH_FASTCALL 0x0080

#define DLPACK_DOC \
	"__dlpack__(*, stream=None) -> PyCapsule\n\n" \
	"Export without a copy.  For a CUDA array the consumer's stream (an integer\n" \
	"cudaStream_t; None or 1 the legacy default stream, 2 the per-thread one)\n" \
	"is made to wait for the batch's copy, without blocking the host; the batch\n" \
	"goes back to the loader on that stream once every array of it is released."

#define ARRAY_METHODS \
	{"__array__", (PyCFunction)(void (*)(void))array_array, METH_VARARGS | METH_KEYWORDS, \
	 "__array__($self, /, dtype=None, copy=None)\n--\n\n" \
	 "numpy.asarray(a): the array itself on the host (no copy); TypeError for\n" \
	 "device memory or bf16, which NumPy cannot read."}, \
	{"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, \
	 "(device_type, device_id): (1, 0) for the CPU, (2, N) for CUDA device N."}, \
	{NULL, NULL, 0, NULL}

static PyMethodDef array_methods[] = {
	{"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack,
	 RFPY_METH_FASTCALL | METH_KEYWORDS, DLPACK_DOC},
	ARRAY_METHODS,
};

static PyMethodDef array_methods_39[] = {
	{"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack_kw, METH_VARARGS | METH_KEYWORDS,
	 DLPACK_DOC},
	ARRAY_METHODS,
};

static PyGetSetDef array_getset[] = {
	{"shape", (getter)array_shape, NULL, "The shape, batch dimension first.", NULL},
	{"dtype", (getter)array_dtype, NULL, "The element type's ringfeed name (\"f32\", \"bf16\", ...).", NULL},
	{"device", (getter)array_device, NULL, "\"cpu\" or \"cuda:N\".", NULL},
	{"nbytes", (getter)array_nbytes_get, NULL, "Bytes of data.", NULL},
	{"ndim", (getter)array_ndim, NULL, "Number of dimensions.", NULL},
	{"data_ptr", (getter)array_ptr, NULL, "Address of the first element.", NULL},
	{"readonly", (getter)array_readonly_get, NULL,
	 "True when the batch lies in place in a read-only map of the dataset's file\n"
	 "(Loader(inplace=True), the default): NumPy sees it read-only, and DLPack\n"
	 "consumers get a copy unless they speak DLPack 1.0 and pass copy=False.", NULL},
	{"__array_interface__", (getter)array_interface, NULL,
	 "NumPy's array interface (host arrays other than bf16).", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static const char array_doc[] =
	"A field of a batch in the loader's buffer, exported without a copy through\n"
	"DLPack (torch.from_dlpack, numpy.from_dlpack, cupy.from_dlpack) and, on the\n"
	"CPU, the buffer protocol (read-only; CPython 3.11 and later) and NumPy's\n"
	"__array_interface__.  The batch's buffer returns to the loader when every\n"
	"array of the batch, and every tensor made from one, is gone.";

/* CPython 3.11 and later: the buffer protocol (its slot filled in by
 * rfpy_array_spec_pick) and the METH_FASTCALL __dlpack__. */
static PyType_Slot array_slots[] = {
	{Py_tp_dealloc, RFPY_FN(array_dealloc)},
	{Py_tp_repr, RFPY_FN(array_repr)},
	{Py_tp_methods, array_methods},
	{Py_mp_length, RFPY_FN(array_len)},
	{Py_tp_getset, array_getset},
	{Py_tp_doc, (void *)array_doc},
	{Py_bf_getbuffer, NULL},
	{0, NULL},
};

/* CPython 3.9 and 3.10: no buffer protocol in their stable ABI (NumPy takes
 * __array_interface__), __dlpack__ with the classic calling convention. */
static PyType_Slot array_slots_39[] = {
	{Py_tp_dealloc, RFPY_FN(array_dealloc)},
	{Py_tp_repr, RFPY_FN(array_repr)},
	{Py_tp_methods, array_methods_39},
	{Py_mp_length, RFPY_FN(array_len)},
	{Py_tp_getset, array_getset},
	{Py_tp_doc, (void *)array_doc},
	{0, NULL},
};

PyType_Spec rfpy_array_spec = {
	.name = "ringfeed.Array",
	.basicsize = sizeof(ArrayObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = array_slots,
};

PyType_Spec *
rfpy_array_spec_pick(void)
{
	if (rfpy_hexversion >= 0x030B0000) {
		for (PyType_Slot *sl = array_slots; sl->slot; sl++)
			if (sl->slot == Py_bf_getbuffer)
				sl->pfunc = rfpy_array_getbuffer_slot();
		rfpy_array_spec.slots = array_slots;
	} else {
		rfpy_array_spec.slots = array_slots_39;
	}
	return &rfpy_array_spec;
}

PyTypeObject *rfpy_ArrayType;
