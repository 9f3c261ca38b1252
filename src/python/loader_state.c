/* SPDX-License-Identifier: MIT */
/* ringfeed.Loader's state_dict() and load_state_dict(): resuming a pass. */
#include "loader.h"

#include <string.h>

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

PyObject *
rfpy_loader_state_dict(LoaderObject *self, PyObject *unused)
{
	if (rfpy_loader_usable(self) < 0)
		return NULL;
	long long window = loader_window(self);
	if (window < 0)
		return NULL;
	PyObject *blob = Py_NewRef(Py_None);
	/* A batch kept by an interrupted next() (loader_take) was handed out
	 * by the library but not yet to the caller: the library's position is
	 * one batch past the caller's.  Without a blob, a load skips the
	 * batches the caller had (in_epoch) instead. */
	if (self->in_epoch > 0 && !self->core->stash && !self->core->kept) {
		unsigned char buf[RF_STATE_MAX];
		size_t len = 0;
		int rc = rf_loader_state_save(self->core->ld, buf, sizeof(buf), &len);
		if (rc < 0) {
			Py_DECREF(blob);
			return rfpy_raise(rc, "state_dict", rf_loader_errmsg(self->core->ld));
		}
		Py_DECREF(blob);
		blob = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)len);
		if (!blob)
			return NULL;
	}
	return Py_BuildValue("{s:i,s:K,s:K,s:K,s:I,s:I,s:s,s:K,s:L,s:O,s:N}", "version", 1,
			     "epoch", (unsigned long long)self->epoch,
			     "batch", (unsigned long long)self->in_epoch,
			     "samples", (unsigned long long)self->samples,
			     "batch_size", self->cfg.batch_size, "world", self->world,
			     "shuffle", rf_shuffle_name(self->shuffle),
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

PyObject *
rfpy_loader_load_state_dict(LoaderObject *self, PyObject *state)
{
	uint64_t version, epoch, batch, samples, bsize, world, seed;

	if (rfpy_loader_usable(self) < 0)
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
	char msbuf[32];
	const char *ms = mode && PyUnicode_Check(mode) ? rfpy_utf8(mode, msbuf, sizeof(msbuf))
						       : NULL;
	if (!ms) {
		PyErr_Clear();
		PyErr_SetString(PyExc_ValueError, "state: missing \"shuffle\"");
		return NULL;
	}
	if (samples != self->samples || bsize * world != (uint64_t)self->cfg.batch_size * self->world ||
	    strcmp(ms, rf_shuffle_name(self->shuffle)) || seed != self->seed) {
		PyErr_Format(PyExc_ValueError,
			     "state: saved for another dataset or order (samples %llu, batch %llu x "
			     "world %llu, shuffle %s, seed %llu); this loader has samples %llu, "
			     "batch %u x world %u, shuffle %s, seed %llu",
			     (unsigned long long)samples, (unsigned long long)bsize,
			     (unsigned long long)world, ms, (unsigned long long)seed,
			     (unsigned long long)self->samples, self->cfg.batch_size, self->world,
			     rf_shuffle_name(self->shuffle), (unsigned long long)self->seed);
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
	/* Saved after an epoch's last batch, before its pass ended (a loop
	 * that counts steps): the rest of that epoch is empty, so the stream
	 * goes on at the next epoch's start, and loader.epoch must say so.
	 * Resumed from the blob, the first batch would be the next epoch's
	 * under the saved epoch's number, every later pass one epoch ahead of
	 * loader.epoch. */
	if (batch == self->nbatches && batch > 0) {
		if (epoch == UINT64_MAX) {
			PyErr_SetString(PyExc_ValueError, "state: epoch out of range");
			return NULL;
		}
		epoch++;
		batch = 0;
	}
	PyObject *blob = PyDict_GetItemString(state, "blob");
	if (batch > 0 && blob && PyBytes_Check(blob)) {
		/* The library's position: O(1), nothing skipped is read. */
		if (rfpy_loader_open_core(self, epoch, PyBytes_AsString(blob),
				     (size_t)PyBytes_Size(blob)) < 0)
			return NULL;
		self->in_epoch = batch;
		self->fresh = 1;
		Py_RETURN_NONE;
	}
	if (rfpy_loader_open_core(self, epoch, NULL, 0) < 0)
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
		int rc = rfpy_wait_next(self, &b);
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
		rfpy_core_release(self->core, b, NULL);
	}
	self->in_epoch = batch;
	self->fresh = 1;
	Py_RETURN_NONE;
}
