/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.Array's buffer protocol, for CPython 3.11 and later, where it is
 * part of the stable ABI.  The module is built for 3.9's stable ABI, which
 * lacks the Py_buffer struct: this file alone sees it (the full API's
 * headers, whose layout of Py_buffer every version since 3.3 shares) and
 * calls no Python function, so it adds nothing to what the module imports.
 * The slot is given to the type only on 3.11 and later (array.c).
 */
#undef Py_LIMITED_API
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffer.h"

static int
array_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
	struct rfpy_export e;

	/* rfpy_array_export checks the device, dtype and flags, raises
	 * BufferError, and takes the reference view->obj holds. */
	if (rfpy_array_export(self, (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE, &e) < 0)
		return -1;
	view->obj = self;
	view->buf = e.buf;
	view->len = e.len;
	view->readonly = 1;
	view->itemsize = e.itemsize;
	view->format = (flags & PyBUF_FORMAT) ? (char *)e.format : NULL;
	view->ndim = e.ndim;
	view->shape = (flags & PyBUF_ND) ? e.shape : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? e.strides : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	return 0;
}

void *
rfpy_array_getbuffer_slot(void)
{
	return __extension__ (void *)array_getbuffer;
}
