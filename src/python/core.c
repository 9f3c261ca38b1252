/* SPDX-License-Identifier: MIT */
/* The core of a Python Loader (the C loader and what Python holds of it)
 * and its held batches; the ownership rules are in loader.h. */
#include "loader.h"

#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- core */

/* In a child of fork(): the C loader is the parent's.  Batches are dropped
 * without going back to it and closing frees nothing (rf_loader_close in
 * a child touches nothing the parent's threads use). */
int
rfpy_core_forked(const struct core *c)
{
	return rf_loader_forked(c->ld);
}

PyObject *
rfpy_raise_forked(const struct core *c)
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

void
rfpy_core_close_now(struct core *c)
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
void
rfpy_core_release(struct core *c, const rf_batch *b, void *stream)
{
	int rc = rfpy_core_forked(c) ? 0 : rf_loader_release(c->ld, b, stream);

	if (rc < 0) {
		/* Called from a deallocator: nowhere to raise to. */
		rfpy_raise(rc, "releasing a batch", rf_loader_errmsg(c->ld));
		PyErr_WriteUnraisable(NULL);
	}
	c->held--;
	if (c->retired && c->held == 0 && !c->stopping)
		rfpy_core_close_now(c);
}

void
rfpy_core_retire(struct core *c)
{
	if (!c)
		return;
	if (c->kept) {
		/* Its batch goes back (held drops) before c is retired. */
		PyObject *k = c->kept;
		c->kept = NULL;
		Py_DECREF(k);
	}
	c->retired = 1;
	if (c->stash) {
		const rf_batch *b = c->stash;
		int last = c->held <= 1;
		c->stash = NULL;
		rfpy_core_release(c, b, NULL); /* closes and frees c when last */
		if (last)
			return;
	}
	if (c->held == 0) {
		rfpy_core_close_now(c);
		return;
	}
	/* Batches still held keep the memory until they are released; the
	 * threads stop now, so that none runs (or reads) after close() and
	 * none is left inside a library at interpreter exit. */
	if (!rfpy_core_forked(c)) {
		rf_loader *ld = c->ld;
		c->stopping = 1;
		Py_BEGIN_ALLOW_THREADS
		rf_loader_stop(ld);
		Py_END_ALLOW_THREADS
		c->stopping = 0;
		/* Another thread may have dropped the last batch meanwhile (a
		 * loader closed by one thread while another iterates). */
		if (c->held == 0)
			rfpy_core_close_now(c);
	}
}

/* ------------------------------------------------------------ batch */

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
		rfpy_core_release(self->core, self->b, stream);
	rfpy_free((PyObject *)self);
}

static PyType_Slot batch_slots[] = {
	{Py_tp_dealloc, RFPY_FN(batch_dealloc)},
	{Py_tp_doc, (void *)"One batch held from the loader (internal)."},
	{0, NULL},
};

PyType_Spec rfpy_batch_spec = {
	.name = "ringfeed._Batch",
	.basicsize = sizeof(BatchObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = batch_slots,
};

PyTypeObject *rfpy_BatchType;
