/* SPDX-License-Identifier: MIT */
/*
 * The ringfeed Python module: ringfeed.Loader (the streaming loader,
 * batches as DLPack arrays), ringfeed.open and ringfeed.pack (datasets for
 * small jobs and inspection), ringfeed.Error.
 */
#include "module.h"

#include <limits.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

PyObject *rfpy_Error;
PyObject *rfpy_Warning;

/* fork() copies the module's objects into the child; a loader's threads
 * stay in the parent.  The library counts the forks (rf_fork_generation):
 * an object compares the count with the one it was made under (a load, no
 * system call). */
unsigned
rfpy_forks(void)
{
	return rf_fork_generation();
}

/* sys.hexversion of the running interpreter, read at import: the module is
 * built for the stable ABI of 3.9 and uses what later versions add only
 * when it runs on them. */
unsigned long rfpy_hexversion;

/* The library's error codes by their names, the module's constants. */
static const struct { const char *name; int code; } codes[] = {
	{"EFORMAT", RF_EFORMAT}, {"ECORRUPT", RF_ECORRUPT},
	{"ECHECKSUM", RF_ECHECKSUM}, {"ESCHEMA", RF_ESCHEMA},
	{"ETRUNCATED", RF_ETRUNCATED}, {"ECODEC", RF_ECODEC},
	{"ENODEVICE", RF_ENODEVICE}, {"ECUDA", RF_ECUDA},
	{"EMEMPLAN", RF_EMEMPLAN}, {"EHELD", RF_EHELD},
	{"ESTATE", RF_ESTATE}, {"ENPY", RF_ENPY}, {"EUSAGE", RF_EUSAGE},
	{"EFORK", RF_EFORK},
};

/* Error.name: the symbolic name of a code, "EHELD" beside ringfeed.EHELD,
 * or for a negated errno value Python's (errno.errorcode: "ENOENT").  A new
 * reference, NULL with an exception. */
static PyObject *
code_name(int code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].code == code)
			return PyUnicode_FromString(codes[i].name);
	PyObject *errno_mod = PyImport_ImportModule("errno");
	PyObject *table = errno_mod ? PyObject_GetAttrString(errno_mod, "errorcode") : NULL;
	PyObject *key = table ? PyLong_FromLong(-(long)code) : NULL;
	PyObject *name = key ? PyObject_GetItem(table, key) : NULL;
	Py_XDECREF(key);
	Py_XDECREF(table);
	Py_XDECREF(errno_mod);
	if (name && PyUnicode_Check(name))
		return name;
	Py_XDECREF(name);
	PyErr_Clear();
	return PyUnicode_FromFormat("E%d", -code);
}

PyObject *
rfpy_raise(int code, const char *what, const char *detail)
{
	PyObject *msg, *exc;
	const char *name = rf_strerror(code);

	if (!detail || !*detail)
		detail = name;
	/* The library's messages start with their own prefix ("loader: "):
	 * not "Loader: loader: ...". */
	size_t wl = what ? strlen(what) : 0;
	if (what && !strncasecmp(detail, what, wl) && detail[wl] == ':')
		what = NULL;
	if (what)
		msg = PyUnicode_FromFormat("%s: %s", what, detail);
	else
		msg = PyUnicode_FromString(detail);
	if (!msg)
		return NULL;
	/* The library's advice names the C field; in Python it is the
	 * device argument. */
	if (strstr(detail, "set device_index")) {
		PyObject *from = PyUnicode_FromString("set device_index");
		PyObject *to = PyUnicode_FromString("pass device=\"cuda:N\"");
		PyObject *r = from && to ? PyUnicode_Replace(msg, from, to, -1) : NULL;
		Py_XDECREF(from);
		Py_XDECREF(to);
		Py_DECREF(msg);
		if (!r)
			return NULL;
		msg = r;
	}
	exc = PyObject_CallFunctionObjArgs(rfpy_Error, msg, NULL);
	Py_DECREF(msg);
	if (!exc)
		return NULL;
	PyObject *pcode = PyLong_FromLong(code);
	PyObject *pname = code_name(code);
	PyObject *pdesc = PyUnicode_FromString(name);
	if (pcode && pname && pdesc && PyObject_SetAttrString(exc, "code", pcode) == 0 &&
	    PyObject_SetAttrString(exc, "name", pname) == 0 &&
	    PyObject_SetAttrString(exc, "description", pdesc) == 0)
		PyErr_SetObject(rfpy_Error, exc);
	Py_XDECREF(pcode);
	Py_XDECREF(pname);
	Py_XDECREF(pdesc);
	Py_DECREF(exc);
	return NULL;
}

void
rfpy_log(void *user, enum rf_log_level level, const char *msg)
{
	/* Called from the library's threads, without the GIL: plain stdio
	 * only.  Errors are not printed, they come back as exceptions. */
	static int verbose = -1;

	if (verbose < 0) {
		const char *e = getenv("RINGFEED_LOG");
		verbose = e && *e;
	}
	if (verbose || level == RF_LOG_WARN)
		fprintf(stderr, "ringfeed: %s\n", msg);
}

static int
path_to_bytes(PyObject *item, PyObject *list)
{
	PyObject *b = NULL;

	if (!PyUnicode_FSConverter(item, &b))
		return -1;
	int rc = PyList_Append(list, b);
	Py_DECREF(b);
	return rc;
}

int
rfpy_u64(PyObject *obj, void *out)
{
	PyObject *i = PyNumber_Index(obj); /* int, numpy integers, ... */
	if (!i)
		return 0;
	unsigned long long v = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return 0;
	*(unsigned long long *)out = v;
	return 1;
}

/* An integer argument (anything with __index__) as a new int reference, or
 * NULL with a TypeError that names it. */
static PyObject *
arg_index(PyObject *obj, const char *name)
{
	PyObject *i = PyNumber_Index(obj);

	if (!i && PyErr_ExceptionMatches(PyExc_TypeError)) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s must be an integer, not %.100s", name,
			     rfpy_type_name(obj));
	}
	return i;
}

int
rfpy_arg_u64(PyObject *obj, const char *name, unsigned long long *out)
{
	PyObject *i = arg_index(obj, name);

	if (!i)
		return -1;
	unsigned long long v = PyLong_AsUnsignedLongLong(i);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_OverflowError, "%s must be in [0, 2**64), not %R", name, i);
		}
		Py_DECREF(i);
		return -1;
	}
	Py_DECREF(i);
	*out = v;
	return 0;
}

int
rfpy_arg_int(PyObject *obj, const char *name, long long lo, long long hi, long long *out)
{
	PyObject *i = arg_index(obj, name);

	if (!i)
		return -1;
	int overflow = 0;
	long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
	if (v == -1 && PyErr_Occurred()) {
		Py_DECREF(i);
		return -1;
	}
	if (overflow || v < lo || v > hi) {
		PyErr_Format(overflow ? PyExc_OverflowError : PyExc_ValueError,
			     "%s must be in [%lld, %lld], not %R", name, lo, hi, i);
		Py_DECREF(i);
		return -1;
	}
	Py_DECREF(i);
	*out = v;
	return 0;
}

int
rfpy_paths(PyObject *arg, PyObject **out_list, const char ***out_paths, size_t *n)
{
	PyObject *list = PyList_New(0);

	if (!list)
		return -1;
	if (PyUnicode_Check(arg) || PyBytes_Check(arg) || PyObject_HasAttrString(arg, "__fspath__")) {
		if (path_to_bytes(arg, list) < 0)
			goto fail;
	} else {
		PyObject *it = PyObject_GetIter(arg);
		PyObject *item;

		if (!it) {
			PyErr_SetString(PyExc_TypeError,
					"paths must be a path or a sequence of paths");
			goto fail;
		}
		while ((item = PyIter_Next(it))) {
			int rc = path_to_bytes(item, list);
			Py_DECREF(item);
			if (rc < 0) {
				Py_DECREF(it);
				goto fail;
			}
		}
		Py_DECREF(it);
		if (PyErr_Occurred())
			goto fail;
	}
	Py_ssize_t count = PyList_Size(list);
	if (count == 0) {
		PyErr_SetString(PyExc_ValueError, "no dataset paths given");
		goto fail;
	}
	const char **paths = PyMem_Calloc((size_t)count + 1, sizeof(*paths));
	if (!paths) {
		PyErr_NoMemory();
		goto fail;
	}
	for (Py_ssize_t i = 0; i < count; i++)
		paths[i] = PyBytes_AsString(PyList_GetItem(list, i));
	*out_list = list;
	*out_paths = paths;
	*n = (size_t)count;
	return 0;
fail:
	Py_DECREF(list);
	return -1;
}

DLDataType
rfpy_dl_dtype(enum rf_dtype dt)
{
	DLDataType t = {.code = kDLUInt, .bits = 8, .lanes = 1};

	switch (dt) {
	case RF_DTYPE_I8: case RF_DTYPE_I16: case RF_DTYPE_I32: case RF_DTYPE_I64:
		t.code = kDLInt;
		break;
	case RF_DTYPE_F16: case RF_DTYPE_F32: case RF_DTYPE_F64:
		t.code = kDLFloat;
		break;
	case RF_DTYPE_BF16:
		t.code = kDLBfloat;
		break;
	default:
		t.code = kDLUInt;
		break;
	}
	t.bits = (uint8_t)(rf_dtype_size(dt) * 8);
	return t;
}

const char *
rfpy_numpy_dtype(enum rf_dtype dt)
{
	switch (dt) {
	case RF_DTYPE_U8: return "|u1";
	case RF_DTYPE_I8: return "|i1";
	case RF_DTYPE_U16: return "<u2";
	case RF_DTYPE_I16: return "<i2";
	case RF_DTYPE_U32: return "<u4";
	case RF_DTYPE_I32: return "<i4";
	case RF_DTYPE_U64: return "<u8";
	case RF_DTYPE_I64: return "<i8";
	case RF_DTYPE_F16: return "<f2";
	case RF_DTYPE_BF16: return "<u2";
	case RF_DTYPE_F32: return "<f4";
	case RF_DTYPE_F64: return "<f8";
	case RF_DTYPE_BYTES: return "|u1";
	}
	return "|u1";
}

const char *
rfpy_buffer_format(enum rf_dtype dt)
{
	/* Standard sizes ("<" prefix): the buffer protocol's native formats
	 * would tie 'l' to the platform's long. */
	switch (dt) {
	case RF_DTYPE_U8: return "B";
	case RF_DTYPE_I8: return "b";
	case RF_DTYPE_U16: return "<H";
	case RF_DTYPE_I16: return "<h";
	case RF_DTYPE_U32: return "<I";
	case RF_DTYPE_I32: return "<i";
	case RF_DTYPE_U64: return "<Q";
	case RF_DTYPE_I64: return "<q";
	case RF_DTYPE_F16: return "<e";
	case RF_DTYPE_BF16: return NULL;
	case RF_DTYPE_F32: return "<f";
	case RF_DTYPE_F64: return "<d";
	case RF_DTYPE_BYTES: return "B";
	}
	return NULL;
}

const char *
rfpy_type_name(PyObject *obj)
{
	static char buf[128];
	/* __name__ rather than PyType_GetName, which CPython 3.10 lacks. */
	PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
	const char *s = name ? rfpy_utf8(name, buf, sizeof(buf)) : NULL;

	if (!s)
		snprintf(buf, sizeof(buf), "?");
	if (!s)
		PyErr_Clear();
	Py_XDECREF(name);
	return buf;
}

const char *
rfpy_utf8(PyObject *str, char *buf, size_t cap)
{
	/* PyUnicode_AsUTF8AndSize, which lends the str's own UTF-8, is not
	 * in the stable ABI of 3.9: the bytes are copied out. */
	PyObject *b = PyUnicode_AsUTF8String(str);
	char *p;
	Py_ssize_t n;

	if (!b)
		return NULL;
	if (PyBytes_AsStringAndSize(b, &p, &n) < 0) {
		Py_DECREF(b);
		return NULL;
	}
	if ((size_t)n >= cap)
		n = (Py_ssize_t)cap - 1;
	memcpy(buf, p, (size_t)n);
	buf[n] = 0;
	Py_DECREF(b);
	return buf;
}

int
rfpy_add_ref(PyObject *module, const char *name, PyObject *value)
{
	/* PyModule_AddObject takes the reference only when it succeeds
	 * (PyModule_AddObjectRef, which never takes it, is 3.10's). */
	Py_INCREF(value);
	if (PyModule_AddObject(module, name, value) < 0) {
		Py_DECREF(value);
		return -1;
	}
	return 0;
}

/* Py_TPFLAGS_DISALLOW_INSTANTIATION and Py_TPFLAGS_IMMUTABLETYPE are
 * CPython 3.10's: 3.9 ignores them, and would make instances of a type
 * meant to come only from the module (a zeroed Array, whose first use
 * would crash).  There the type gets a __new__ that refuses, as 3.10's
 * flag does. */

static PyObject *
refuse_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
	PyObject *mod = PyObject_GetAttrString((PyObject *)type, "__module__");
	PyObject *name = mod ? PyObject_GetAttrString((PyObject *)type, "__name__") : NULL;

	if (name)
		PyErr_Format(PyExc_TypeError, "cannot create '%U.%U' instances", mod, name);
	Py_XDECREF(mod);
	Py_XDECREF(name);
	return NULL;
}

/* CPython 3.9 drops a type's docstring signature ("Loader(paths, ...)\n--\n\n")
 * where 3.10 keeps it as __text_signature__: the "(paths, ...)" part is kept
 * as _text_signature, from which the package's __init__.py makes the
 * type's __signature__ (for inspect.signature and help()). */
static int
keep_text_signature(PyObject *t, const PyType_Spec *spec)
{
	const char *doc = NULL, *dot = strrchr(spec->name, '.');
	const char *name = dot ? dot + 1 : spec->name;

	for (const PyType_Slot *sl = spec->slots; sl->slot; sl++)
		if (sl->slot == Py_tp_doc)
			doc = sl->pfunc;
	size_t n = strlen(name);
	const char *end = doc ? strstr(doc, ")\n--\n\n") : NULL;
	if (!end || strncmp(doc, name, n) != 0 || doc[n] != '(')
		return 0;
	PyObject *sig = PyUnicode_FromStringAndSize(doc + n, end + 1 - (doc + n));
	if (!sig)
		return -1;
	int rc = PyObject_SetAttrString(t, "_text_signature", sig);
	Py_DECREF(sig);
	return rc;
}

PyTypeObject *
rfpy_add_type(PyObject *module, PyType_Spec *spec, int add_name)
{
	const char *dot = strrchr(spec->name, '.');
	PyType_Spec s39 = *spec;

	if (rfpy_hexversion < 0x030A0000) {
		s39.flags &= ~(unsigned)(Py_TPFLAGS_DISALLOW_INSTANTIATION |
					 Py_TPFLAGS_IMMUTABLETYPE);
		if (spec->flags & Py_TPFLAGS_DISALLOW_INSTANTIATION) {
			/* The slots with Py_tp_new added (the copy lives as
			 * long as the type: for the process's life). */
			size_t n = 0;
			while (spec->slots[n].slot)
				n++;
			PyType_Slot *slots = PyMem_Calloc(n + 2, sizeof(*slots));
			if (!slots) {
				PyErr_NoMemory();
				return NULL;
			}
			memcpy(slots, spec->slots, n * sizeof(*slots));
			slots[n].slot = Py_tp_new;
			slots[n].pfunc = RFPY_FN(refuse_new);
			s39.slots = slots;
		}
	}
	/* PyType_FromSpec rather than PyType_FromModuleAndSpec (3.10's): no
	 * method looks for its module through its type. */
	PyObject *t = PyType_FromSpec(&s39);
	if (!t)
		return NULL;
	if (rfpy_hexversion < 0x030A0000 && keep_text_signature(t, spec) < 0) {
		Py_DECREF(t);
		return NULL;
	}
	if (add_name && rfpy_add_ref(module, dot ? dot + 1 : spec->name, t) < 0) {
		Py_DECREF(t);
		return NULL;
	}
	/* The module holds it (and the interpreter, for the process's life:
	 * the module's types are never unloaded). */
	return (PyTypeObject *)t;
}

void
rfpy_free(PyObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	/* The types are not GC-tracked: their instances come from
	 * PyObject_New. */
	PyObject_Free(self);
	Py_DECREF(tp);
}

static PyObject *
rfpy_version(PyObject *self, PyObject *unused)
{
	return PyUnicode_FromString(rf_version_string());
}

static PyObject *
rfpy_strerror(PyObject *self, PyObject *arg)
{
	long code = PyLong_AsLong(arg);

	if (code == -1 && PyErr_Occurred())
		return NULL;
	if (code < INT_MIN || code > INT_MAX) {
		PyErr_Format(PyExc_OverflowError, "error code %ld is out of range", code);
		return NULL;
	}
	return PyUnicode_FromString(rf_strerror((int)code));
}

static PyMethodDef rfpy_methods[] = {
	{"open", (PyCFunction)(void (*)(void))rfpy_open, METH_VARARGS | METH_KEYWORDS,
	 "open(paths, verify=True, cache_bytes=268435456)\n--\n\n"
	 "Open a dataset (a shard, a directory of shards, a glob, or a list of them)\n"
	 "for random access: len(ds), ds[i] -> {name: numpy array}, ds[a:b] and\n"
	 "ds.take(indices) -> {name: stacked values}, ds.schema.  verify checks each\n"
	 "chunk's checksum when it is read.  Decoded chunks are kept, up to\n"
	 "cache_bytes (256 MiB; at least one chunk), the least recently used going\n"
	 "first: ds[i] of a kept chunk reads nothing.  A map-style Dataset for\n"
	 "torch's DataLoader opens one per worker, each with its own cache."},
	{"pack", (PyCFunction)(void (*)(void))rfpy_pack, METH_VARARGS | METH_KEYWORDS,
	 "pack(path, columns, zstd=0, chunk_bytes=0, shard_bytes=0, shuffle=None)\n--\n\n"
	 "Write a dataset from {name: array} (first dimension = samples; any object\n"
	 "with the buffer protocol, such as a NumPy array), {name: (array, dtype)} to\n"
	 "name the dtype (\"bf16\" from uint16 bits, \"bytes\"), or {name: [array, ...]}\n"
	 "for a variable-length field (one array per sample, varying along axis 0).\n"
	 "A torch tensor is packed as its values (detached, on the host; bf16 kept\n"
	 "bf16); a bool array is stored as u8 0/1 (read back as uint8); arrays of\n"
	 "strings or objects are refused (store text as a bytes field).\n"
	 "path is a .rfs file (or, with shard_bytes, the shards' base name); zstd is\n"
	 "a zstd level (0: stored uncompressed); chunk_bytes the chunk size (0: the\n"
	 "default, 4 MiB, or 128 fixed-size samples up to 20 MiB); shard_bytes splits the output into shards of about that\n"
	 "size (0: one file).  shuffle=SEED writes the samples in a permuted order\n"
	 "keyed by SEED (the order of `ringfeed pack --shuffle SEED`): use it when\n"
	 "the arrays are sorted (by class, source or length) and the dataset is much\n"
	 "larger than the loader's window (W chunks, by default about 128 MiB of\n"
	 "them): the chunks and window shuffles then give batches of few classes.  A\n"
	 "dataset within the window is permuted uniformly by the window shuffle.\n"
	 "The default shuffle=None keeps the arrays' order.\n"
	 "Returns the number of samples written."},
	{"version", rfpy_version, METH_NOARGS, "version()\n--\n\nThe library's version string."},
	{"strerror", rfpy_strerror, METH_O,
	 "strerror(code, /)\n--\n\nThe name of a library error code."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef rfpy_moduledef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "ringfeed._ringfeed",
	.m_doc = "Stream training datasets from disk into GPU memory with bounded memory.\n\n"
		 "Loader(paths, batch_size, ...) iterates over batches: dicts of arrays that\n"
		 "speak DLPack (torch.from_dlpack, numpy.from_dlpack, cupy.from_dlpack).\n"
		 "open() and pack() read and write datasets for small jobs.",
	.m_size = -1,
	.m_methods = rfpy_methods,
};

/* The extension is ringfeed._ringfeed; the package's __init__.py exports
 * its names as ringfeed.*. */
PyMODINIT_FUNC PyInit__ringfeed(void);

PyMODINIT_FUNC
PyInit__ringfeed(void)
{
	PyObject *m = PyModule_Create(&rfpy_moduledef);

	if (!m)
		return NULL;
	PyObject *hex = PySys_GetObject("hexversion"); /* borrowed */
	rfpy_hexversion = hex ? PyLong_AsUnsignedLong(hex) : 0;
	if (PyErr_Occurred())
		goto fail;
	/* The fork count starts with the module: a Dataset made before any
	 * Loader is opened compares against it. */
	(void)rf_fork_generation();
	rfpy_Error = PyErr_NewExceptionWithDoc("ringfeed.Error",
		"A failure reported by the ringfeed library.  .code is the library's\n"
		"negative error code (a negated errno value or one of the RF_E* codes),\n"
		".name its symbolic name (\"EHELD\", as ringfeed.EHELD; \"ENOENT\" for\n"
		"an errno value), .description what the code means (ringfeed.strerror);\n"
		"the message, str(e), names the file, chunk and offset.",
		PyExc_RuntimeError, NULL);
	if (!rfpy_Error || rfpy_add_ref(m, "Error", rfpy_Error) < 0)
		goto fail;
	rfpy_Warning = PyErr_NewExceptionWithDoc("ringfeed.RingfeedWarning",
		"A setting the Loader took from the environment, or changed by itself,\n"
		"that a program may not expect (a rank and world from a batch system's\n"
		"variables, a fallback to the host).  A RuntimeWarning: shown once per\n"
		"place by default; warnings.filterwarnings silences it.",
		PyExc_RuntimeWarning, NULL);
	if (!rfpy_Warning || rfpy_add_ref(m, "RingfeedWarning", rfpy_Warning) < 0)
		goto fail;
	if (PyModule_AddStringConstant(m, "__version__", rf_version_string()) < 0)
		goto fail;
	/* The library's error codes, for comparing with Error.code. */
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (PyModule_AddIntConstant(m, codes[i].name, codes[i].code) < 0)
			goto fail;
	if (rfpy_dataset_init(m) < 0 || rfpy_loader_init(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
