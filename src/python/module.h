/* SPDX-License-Identifier: MIT */
/* Declarations shared by the parts of the ringfeed Python extension. */
#ifndef RFPY_MODULE_H
#define RFPY_MODULE_H

#define PY_SSIZE_T_CLEAN
/* The stable ABI of CPython 3.9: one build of the module serves every
 * CPython from 3.9 on (abi3).  What later versions add to it (the buffer
 * protocol, 3.11) is used only when the module runs on them
 * (rfpy_hexversion); buffer.c alone is compiled for 3.11's, and its code
 * runs only there.  RFPY_FULL_API builds against the full API instead. */
#if !defined(Py_LIMITED_API) && !defined(RFPY_FULL_API)
#define Py_LIMITED_API 0x03090000
#endif
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CPython 3.10's type flags, which 3.9's headers lack: the module gives
 * them to 3.10 and later only (rfpy_add_type). */
#ifndef Py_TPFLAGS_DISALLOW_INSTANTIATION
#define Py_TPFLAGS_DISALLOW_INSTANTIATION (1UL << 7)
#endif
#ifndef Py_TPFLAGS_IMMUTABLETYPE
#define Py_TPFLAGS_IMMUTABLETYPE (1UL << 8)
#endif

/* Built with the headers of CPython 3.9 (pip install under 3.9): names of
 * the stable ABI its headers leave out.  Py_NewRef as 3.10's headers
 * define it for the limited API before 3.10 (an increment); PyMem_Calloc
 * is in the stable ABI since 3.7; the buffer slot's number is fixed. */
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
rfpy_new_ref(PyObject *o)
{
	Py_INCREF(o);
	return o;
}
#define Py_NewRef(o) rfpy_new_ref((PyObject *)(o))
PyAPI_FUNC(void *) PyMem_Calloc(size_t nelem, size_t elsize);
#endif
#ifndef Py_bf_getbuffer
#define Py_bf_getbuffer 1
#endif

/* A function in a type's slot table (PyType_Slot.pfunc is a void *). */
#define RFPY_FN(f) (__extension__ (void *)(f))

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#include "dlpack.h"

/* ringfeed.Error, a RuntimeError subclass with .code (the library's negative
 * code), .name (its symbolic name: "EHELD", "ENOENT") and .description
 * (rf_strerror of it). */
extern PyObject *rfpy_Error;
/* ringfeed.RingfeedWarning, a RuntimeWarning subclass: a setting the module
 * took or changed by itself that the user may not expect. */
extern PyObject *rfpy_Warning;

/* Raise ringfeed.Error for `code` with the library's message `detail` (may
 * be NULL or empty: the code's name is used).  Returns NULL. */
PyObject *rfpy_raise(int code, const char *what, const char *detail);

/* Log callback handed to the library: warnings go to stderr (errors become
 * exceptions instead); with RINGFEED_LOG set, every message it lets through. */
void rfpy_log(void *user, enum rf_log_level level, const char *msg);

/* Collect the paths argument (a str, bytes, os.PathLike, or a sequence of
 * them) into a NULL-terminated array of C strings.  On success returns 0 and
 * *out_list (a new reference to a list of bytes objects that own the
 * strings: keep it alive while the array is used) and *out_paths (free with
 * PyMem_Free).  On failure sets an exception and returns -1. */
int rfpy_paths(PyObject *arg, PyObject **out_list, const char ***out_paths, size_t *n);

/* A PyArg "O&" converter into an unsigned long long: an integer (anything
 * with __index__) in [0, 2^64), else OverflowError (a negative value or one
 * too large) or TypeError, where the "K" format would wrap it silently. */
int rfpy_u64(PyObject *obj, void *out);

/* Integer arguments, named in their errors: an integer (anything with
 * __index__), else TypeError "NAME must be an integer, not T".  rfpy_arg_u64:
 * in [0, 2^64), else OverflowError; rfpy_arg_int: in [lo, hi], else
 * OverflowError (beyond a long long) or ValueError.  0, or -1 with the
 * exception set. */
int rfpy_arg_u64(PyObject *obj, const char *name, unsigned long long *out);
int rfpy_arg_int(PyObject *obj, const char *name, long long lo, long long hi, long long *out);

/* The name of obj's type, for messages ("list", "ndarray"): valid until
 * the next call; the GIL is held. */
const char *rfpy_type_name(PyObject *obj);

/* Make a type from its spec and add it to the module under its short name
 * (add_name 0: not added); NULL with an exception. */
PyTypeObject *rfpy_add_type(PyObject *module, PyType_Spec *spec, int add_name);

/* Free a heap type's instance and drop its reference to the type. */
void rfpy_free(PyObject *self);

/* sys.hexversion of the running interpreter (0x030B0000 for 3.11.0). */
extern unsigned long rfpy_hexversion;

/* str's UTF-8 copied into buf (cut to cap - 1 bytes): buf, or NULL with an
 * exception. */
const char *rfpy_utf8(PyObject *str, char *buf, size_t cap);

/* Add value to the module under name, the module taking its own reference:
 * 0, or -1 with an exception. */
int rfpy_add_ref(PyObject *module, const char *name, PyObject *value);

/* Forks of this process and its ancestors since the module was loaded: an
 * object made under another count is in a child of fork(). */
unsigned rfpy_forks(void);

/* The DLPack type of a dtype (bytes as uint8, bf16 as kDLBfloat 16). */
DLDataType rfpy_dl_dtype(enum rf_dtype dt);
/* The NumPy dtype string of a dtype ("<f4"; bf16 as "<u2", its bits; bytes
 * as "|u1"); the buffer-protocol format character ("f", "e", ...; NULL for
 * bf16, which has none). */
const char *rfpy_numpy_dtype(enum rf_dtype dt);
const char *rfpy_buffer_format(enum rf_dtype dt);

/* Parts of the module. */
int rfpy_dataset_init(PyObject *module);
int rfpy_loader_init(PyObject *module);
PyObject *rfpy_open(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *rfpy_pack(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
