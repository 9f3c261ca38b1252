/* SPDX-License-Identifier: MIT */
/* Between array.c (3.9's stable ABI) and buffer.c (the buffer protocol,
 * used on 3.11 and later only): declarations that need neither's view of
 * Python.h beyond PyObject. */
#ifndef RFPY_BUFFER_H
#define RFPY_BUFFER_H

/* What an Array exports: its memory, read-only, C-contiguous. */
struct rfpy_export {
	void *buf;
	Py_ssize_t len, itemsize;
	const char *format;      /* struct-module format of one item */
	int ndim;
	Py_ssize_t *shape, *strides;
};

/* Fill *e for Array self and take a reference to it (the view's): 0, or -1
 * with BufferError (device memory, bf16, a writable view asked for). */
int rfpy_array_export(PyObject *self, int writable, struct rfpy_export *e);

/* The function of Array's Py_bf_getbuffer slot (the slot's pfunc). */
void *rfpy_array_getbuffer_slot(void);

#endif
