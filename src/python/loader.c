/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.Loader: the streaming loader as a Python iterable of batches,
 * each a dict {field: Array}: iteration, the batches' dicts, stats and
 * the type.  Opening is in loader_open.c, resuming in loader_state.c, the
 * batches' arrays in array.c and their ownership in core.c (loader.h).
 */
#include "loader.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ----------------------------------------------------------- loader */

static PyTypeObject *IterType;

static void
loader_dealloc(LoaderObject *self)
{
	struct core *old = self->core;
	self->core = NULL;
	rfpy_core_retire(old);
	rfpy_loader_free_config(self);
	rfpy_free((PyObject *)self);
}

int
rfpy_loader_usable(LoaderObject *self)
{
	if (self->closed || !self->core) {
		PyErr_SetString(PyExc_ValueError, "the loader is closed");
		return -1;
	}
	/* Before busy: a thread of the parent may have been waiting in it at
	 * the fork. */
	if (rfpy_core_forked(self->core)) {
		rfpy_raise_forked(self->core);
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"the loader is in use by another thread (one consumer thread at a time)");
		return -1;
	}
	return 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* close() from another thread while this one waited for a batch
 * (loader_close): between two slices of the wait, this thread leaves the
 * loader closed, the batch just taken (b, or NULL; counted in held or not)
 * kept with the others, and hands it to the closer, which stops it (or
 * stops it itself when the closer gave up waiting).  Returns 1 with
 * RuntimeError set, as when a signal handler closes the loader meanwhile. */
static int
close_requested(LoaderObject *self, const rf_batch *b, int counted)
{
	struct core *c = self->core;

	if (b && !c->stash) {
		c->held += !counted;
		c->stash = b; /* held; the retirement returns it */
	} else if (b) {
		rf_loader_release(c->ld, b, NULL);
		c->held -= counted;
	}
	self->core = NULL;
	self->closed = 1;
	if (self->close_req == 1)
		self->close_core = c;
	else
		rfpy_core_retire(c);
	self->close_req = 0;
	PyErr_SetString(PyExc_RuntimeError, "the loader was closed (by another thread) while "
			"waiting for its next batch");
	return 1;
}

/* The next batch of the C loader: returns its code; 1 when a signal handler
 * raised (KeyboardInterrupt) or another thread closed the loader, with the
 * exception set.  Waits without the GIL
 * in slices of 20 ms (rf_loader_next_timeout), so Ctrl-C is seen within
 * about 20 ms; the wait itself is the loader's condition wait, so a batch
 * that becomes ready wakes the consumer at once and the wait burns no CPU
 * the loader's threads need. */
static int
wait_next(LoaderObject *self, const rf_batch **out)
{
	struct core *c = self->core;
	int rc = rf_loader_try_next(c->ld, out);

	if (rc != -EAGAIN)
		return rc;
	uint64_t gen = self->gen;
	for (;;) {
		/* The library counts this wait as stall time. */
		self->busy = self->waiting = 1;
		Py_BEGIN_ALLOW_THREADS
		rc = rf_loader_next_timeout(c->ld, out, 20000000u);
		Py_END_ALLOW_THREADS
		self->busy = self->waiting = 0;
		if (self->close_req)
			return close_requested(self, rc == 0 ? *out : NULL, 0);
		if (rc != -EAGAIN)
			break;
		/* Not busy meanwhile: a handler may use the loader (save
		 * state_dict() on SIGTERM, say).  One that closed or reopened
		 * it ends this wait, whose C loader may be gone. */
		if (PyErr_CheckSignals() < 0)
			return 1;
		if (self->closed || self->core != c || self->gen != gen) {
			PyErr_SetString(PyExc_RuntimeError,
					"the loader was closed or reopened (by a signal handler) "
					"while waiting for its next batch");
			return 1;
		}
	}
	return rc;
}

int
rfpy_wait_next(LoaderObject *self, const rf_batch **out)
{
	int rc = wait_next(self, out);

	/* stats()["batches_in_place"]: the library counts batches, not these. */
	if (rc == 0 && *out && ((*out)->flags & RF_BATCH_READONLY))
		self->core->in_place++;
	return rc;
}

static PyObject *
raise_held(LoaderObject *self)
{
	char msg[512];

	snprintf(msg, sizeof(msg),
		 "%u batches are held, the most depth=%u allows: they, or arrays and tensors "
		 "made from them, are still alive. Drop them (del batch, and the tensors from "
		 "torch.from_dlpack) before asking for the next batch, copy what you keep "
		 "(tensor.clone()), or raise Loader(depth=...)",
		 self->core->held, self->cfg.depth);
	return rfpy_raise(RF_EHELD, NULL, msg);
}

/* The field names of c's batches, from its first batch b. */
static int
core_make_names(struct core *c, const rf_batch *b)
{
	PyObject *t = PyTuple_New((Py_ssize_t)b->nfields);

	if (!t)
		return -1;
	for (uint32_t i = 0; i < b->nfields; i++) {
		PyObject *name = PyUnicode_InternFromString(b->fields[i].name);
		if (!name) {
			Py_DECREF(t);
			return -1;
		}
		(void)PyTuple_SetItem(t, (Py_ssize_t)i, name);
	}
	c->names = t;
	return 0;
}

/* The dict of one batch. */
static PyObject *
make_batch_dict(LoaderObject *self, const rf_batch *b)
{
	BatchObject *bo = PyObject_New(BatchObject, rfpy_BatchType);

	if (!bo) {
		rfpy_core_release(self->core, b, NULL);
		return NULL;
	}
	bo->core = self->core;
	bo->b = b;
	bo->stream = NULL;
	if (bo->core->device.device_type == kDLCUDA)
		bo->stream = (void *)(uintptr_t)1; /* the legacy default stream */
	if (!bo->core->names && core_make_names(bo->core, b) < 0)
		goto fail;
	PyObject *d = PyDict_New();
	if (!d)
		goto fail;
	for (uint32_t i = 0; i < b->nfields; i++) {
		const rf_batch_field *f = &b->fields[i];
		PyObject *v;
		if (!f->offsets) {
			v = (PyObject *)rfpy_array_new(bo, f->data, f->dtype, (int)f->ndim, f->shape);
		} else {
			int64_t oshape[1] = {(int64_t)b->samples + 1};
			int64_t dshape[RF_BATCH_MAX_DIMS];
			int dndim;
			uint64_t item = rf_dtype_size(f->dtype);
			/* The values back to back: along the variable dimension
			 * when it is the first one ([total, *rest]), else flat. */
			if (f->var_dim == 0) {
				uint64_t row = item;
				for (uint32_t k = 2; k < f->ndim; k++)
					row *= (uint64_t)f->shape[k];
				dndim = (int)f->ndim - 1;
				dshape[0] = (int64_t)(row ? f->bytes / row : 0);
				for (uint32_t k = 2; k < f->ndim; k++)
					dshape[k - 1] = f->shape[k];
			} else {
				dndim = 1;
				dshape[0] = (int64_t)(item ? f->bytes / item : 0);
			}
			PyObject *off = (PyObject *)rfpy_array_new(bo, f->offsets, RF_DTYPE_I64, 1, oshape);
			PyObject *dat = (PyObject *)rfpy_array_new(bo, f->data, f->dtype, dndim, dshape);
			if (off && dat && self->to_tensor) {
				PyObject *o = PyObject_CallFunctionObjArgs(self->to_tensor, off, NULL);
				Py_DECREF(off);
				off = o;
				o = off ? PyObject_CallFunctionObjArgs(self->to_tensor, dat, NULL) : NULL;
				Py_DECREF(dat);
				dat = o;
			}
			v = off && dat ? PyTuple_Pack(2, off, dat) : NULL;
			Py_XDECREF(off);
			Py_XDECREF(dat);
		}
		if (v && !f->offsets && self->to_tensor) {
			PyObject *o = PyObject_CallFunctionObjArgs(self->to_tensor, v, NULL);
			Py_DECREF(v);
			v = o;
		}
		if (!v || PyDict_SetItem(d, PyTuple_GetItem(bo->core->names, i), v) < 0) {
			Py_XDECREF(v);
			Py_DECREF(d);
			goto fail;
		}
		Py_DECREF(v);
	}
	Py_DECREF(bo);
	return d;
fail:
	Py_DECREF(bo);
	return NULL;
}

/* Take the next batch of the current epoch: a new reference to its dict,
 * or NULL with StopIteration (end of the epoch) or an exception set. */
static PyObject *
loader_take(LoaderObject *self)
{
	const rf_batch *b;
	int rc;

	if (rfpy_loader_usable(self) < 0)
		return NULL;
	if (self->nbatches == 0) {
		PyErr_SetNone(PyExc_StopIteration);
		return NULL;
	}
	struct core *c = self->core;
	if (c->kept) {
		PyObject *d = c->kept;
		c->kept = NULL;
		self->in_epoch++;
		self->fresh = 0;
		return d;
	}
	if (c->stash) {
		b = c->stash;
		c->stash = NULL;
	} else {
		if (c->held >= self->cfg.depth)
			return raise_held(self);
		rc = rfpy_wait_next(self, &b);
		if (rc == 1)
			return NULL;
		if (rc == RF_EHELD)
			return raise_held(self);
		if (rc < 0)
			return rfpy_raise(rc, NULL, rf_loader_errmsg(c->ld));
		if (!b) {
			PyErr_SetNone(PyExc_StopIteration);
			return NULL;
		}
		c->held++;
		if (!c->have_epoch0) {
			c->have_epoch0 = 1;
			c->c_epoch0 = b->epoch;
		}
		uint64_t ep = c->epoch0 + (b->epoch - c->c_epoch0);
		if (ep != self->epoch) {
			/* The first batch of the next epoch ends this one; keep
			 * it for the next pass. */
			c->stash = b;
			self->epoch = ep;
			self->in_epoch = 0;
			self->fresh = 1;
			PyErr_SetNone(PyExc_StopIteration);
			return NULL;
		}
	}
	if (c->device.device_type == kDLCPU) {
		/* Host memory: make sure the bytes are in place before anyone
		 * reads them through the buffer protocol or a CPU tensor. */
		double t0 = now_s();
		self->busy = self->waiting = 1;
		Py_BEGIN_ALLOW_THREADS
		rc = rf_batch_wait(b, NULL);
		Py_END_ALLOW_THREADS
		self->busy = self->waiting = 0;
		c->wait_ns += (uint64_t)((now_s() - t0) * 1e9);
		if (self->close_req) {
			close_requested(self, b, 1);
			return NULL;
		}
		if (rc < 0) {
			rfpy_core_release(c, b, NULL);
			return rfpy_raise(rc, NULL, rf_loader_errmsg(c->ld));
		}
	}
	/* A signal that came during the waits above (Ctrl-C in the last slice
	 * of a wait) would raise as this call returns, and the batch returned
	 * would be lost to the caller: raise now and keep the batch for the
	 * next call, which hands it out in its turn. */
	if (PyErr_CheckSignals() < 0) {
		c->stash = b;
		return NULL;
	}
	PyObject *d = make_batch_dict(self, b);
	if (!d)
		return NULL;
	/* And one that came while the dict was made: keep the dict. */
	if (PyErr_CheckSignals() < 0) {
		c->kept = d;
		return NULL;
	}
	self->in_epoch++;
	self->fresh = 0;
	return d;
}

static PyObject *
loader_iter(LoaderObject *self)
{
	if (rfpy_loader_usable(self) < 0)
		return NULL;
	/* A pass abandoned midway (break, an exception) is not continued:
	 * like a DataLoader, a new pass starts the epoch over. */
	if (!self->fresh && rfpy_loader_open_core(self, self->epoch, NULL, 0) < 0)
		return NULL;
	IterObject *it = PyObject_New(IterObject, IterType);
	if (!it)
		return NULL;
	it->loader = (LoaderObject *)Py_NewRef((PyObject *)self);
	it->gen = ++self->gen;
	return (PyObject *)it;
}

static Py_ssize_t
loader_len(LoaderObject *self)
{
	if (self->nbatches > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "too many batches for len()");
		return -1;
	}
	return (Py_ssize_t)self->nbatches;
}

/* loader[i]: no such thing, said so that a DataLoader given the Loader
 * itself (a map-style dataset to it, indexed in its workers) explains what
 * to do instead. */
static PyObject *
loader_getitem(LoaderObject *self, PyObject *key)
{
	(void)self;
	(void)key;
	PyErr_SetString(PyExc_TypeError,
			"ringfeed.Loader is iterated, not indexed: it yields whole batches. "
			"Iterate it directly; a torch DataLoader must not be given it as its "
			"dataset. With DataLoader workers, open a Loader in each worker (an "
			"IterableDataset taking its share by rank and world: docs/python.md, "
			"\"Processes and DataLoader workers\")");
	return NULL;
}

static PyObject *
loader_close(LoaderObject *self, PyObject *unused)
{
	/* In a child of fork(), busy is the parent's thread's. */
	if (self->busy && !(self->core && rfpy_core_forked(self->core))) {
		/* Another thread waits for a batch without the GIL: it leaves
		 * the wait after its slice (20 ms at most), its next() raising
		 * RuntimeError, and hands the loader over (close_requested);
		 * this stops it and returns. */
		if (self->waiting) {
			self->close_req = 1;
			while (self->close_req) {
				Py_BEGIN_ALLOW_THREADS
				usleep(1000);
				Py_END_ALLOW_THREADS
				/* Handed over meanwhile: stop it first (a signal
				 * raises after this returns). */
				if (self->close_req && PyErr_CheckSignals() < 0) {
					self->close_req = 2; /* it stops the loader itself */
					return NULL;
				}
			}
			struct core *c = self->close_core;
			self->close_core = NULL;
			rfpy_core_retire(c);
			Py_RETURN_NONE;
		}
		PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
		return NULL;
	}
	struct core *old = self->core;
	self->core = NULL;
	self->closed = 1;
	rfpy_core_retire(old);
	Py_RETURN_NONE;
}

static PyObject *
loader_enter(LoaderObject *self, PyObject *unused)
{
	if (rfpy_loader_usable(self) < 0)
		return NULL;
	return Py_NewRef((PyObject *)self);
}

static PyObject *
loader_exit(LoaderObject *self, PyObject *args)
{
	PyObject *r = loader_close(self, NULL);

	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *
loader_set_epoch(LoaderObject *self, PyObject *arg)
{
	unsigned long long e;

	if (rfpy_arg_u64(arg, "epoch", &e) < 0)
		return NULL;
	if (rfpy_loader_usable(self) < 0)
		return NULL;
	if (e == self->epoch && self->fresh)
		Py_RETURN_NONE;
	/* File order is the same in every epoch: at an epoch's start only
	 * the number changes (not after a restore within an epoch). */
	if (self->fresh && self->in_epoch == 0 && self->shuffle == RF_SHUFFLE_NONE) {
		uint64_t delta = e - self->epoch;
		self->epoch = e;
		self->core->epoch0 += delta;
		Py_RETURN_NONE;
	}
	if (rfpy_loader_open_core(self, e, NULL, 0) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
u64(uint64_t v)
{
	return PyLong_FromUnsignedLongLong(v);
}

static PyObject *
loader_stats(LoaderObject *self, PyObject *unused)
{
	rf_stats st;

	if (rfpy_loader_usable(self) < 0)
		return NULL;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	int rc = rf_loader_stats(self->core->ld, &st);
	if (rc < 0)
		return rfpy_raise(rc, "stats", rf_loader_errmsg(self->core->ld));
	/* The consumer also waits in rf_batch_wait, which the library does
	 * not count as stall time: add it. */
	st.stall_ns += self->core->wait_ns;
	st.stall_share = st.wall_ns ? (double)st.stall_ns / (double)st.wall_ns : 0.0;
	PyObject *d = Py_BuildValue(
		"{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:d,s:N,"
		"s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
		"s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:s,s:O,s:s,s:O,s:O,s:N,s:I,s:I,s:I,s:I,s:I,s:N,s:N,s:N,"
		"s:N,s:N,s:I,s:N}",
		"bytes_read", u64(st.bytes_read), "bytes_delivered", u64(st.bytes_delivered),
		"batches", u64(st.batches), "samples", u64(st.samples), "chunks", u64(st.chunks),
		"wall_ns", u64(st.wall_ns), "read_ns", u64(st.read_ns),
		"decode_ns", u64(st.decode_ns), "copy_ns", u64(st.copy_ns),
		"stall_ns", u64(st.stall_ns), "stall_share", st.stall_share,
		"thread_cpu_ns", u64(st.thread_cpu_ns),
		"reads_inflight", st.reads_inflight, "reads_inflight_max", st.reads_inflight_max,
		"slots_used", st.slots_used, "slots_used_max", st.slots_used_max,
		"slots_total", st.slots_total, "staged", st.staged, "staged_max", st.staged_max,
		"ready", st.ready, "ready_max", st.ready_max, "held", st.held,
		"held_max", st.held_max,
		"slot_bytes", u64(st.slot_bytes), "stage_slot_bytes", u64(st.stage_slot_bytes),
		"batch_bytes", u64(st.batch_bytes),
		"pinned_bytes", u64(st.pinned_bytes), "pinned_peak", u64(st.pinned_peak),
		"device_bytes", u64(st.device_bytes), "device_peak", u64(st.device_peak),
		"io_engine", st.io_engine, "io_direct", st.io_direct ? Py_True : Py_False,
		"device", st.device, "in_place", st.in_place ? Py_True : Py_False,
		"inplace", st.inplace ? Py_True : Py_False,
		/* Of `batches`: those handed out read-only in the maps,
		 * counted here from the batches' flags. */
		"batches_in_place", u64(self->core->in_place),
		/* The library's device buffers: depth for the consumer and
		 * the spare (device_bytes is buffers x batch_bytes when
		 * batches are copied to the device). */
		"depth", self->cfg.depth, "buffers", self->cfg.depth + RFPY_SPARE_BUFFERS,
		"decode_threads", st.decode_threads,
		/* This process's share (rf_rank_resolve at creation). */
		"rank", self->rank, "world", self->world,
		"rank_source", rfpy_rank_source(self->rank_source),
		"read_retries", u64(st.read_retries), "chunks_skipped", u64(st.chunks_skipped),
		"samples_substituted", u64(st.samples_substituted),
		"images_decoded", u64(st.images_decoded), "window", st.window,
		"order_id", u64(st.order_id));
	/* A mixture: "sources", a list of per-source dicts. */
	if (d && self->sources) {
		PyObject *l = PyList_New(0);
		for (size_t i = 0; l && i < self->cfg.nsources; i++) {
			rf_source_stats ss;
			if (rf_loader_source_stats(self->core->ld, i, &ss) < 0)
				break;
			PyObject *e = Py_BuildValue("{s:s,s:d,s:d,s:N,s:N,s:N}", "name", ss.name,
						    "weight", ss.weight, "share", ss.share,
						    "samples", u64(ss.samples), "epochs",
						    u64(ss.epochs), "in_epoch", u64(ss.in_epoch));
			if (!e || PyList_Append(l, e) < 0)
				Py_CLEAR(l);
			Py_XDECREF(e);
		}
		if (!l || PyDict_SetItemString(d, "sources", l) < 0)
			Py_CLEAR(d);
		Py_XDECREF(l);
	}
	return d;
}


static PyObject *
loader_get_epoch(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->epoch);
}

static PyObject *
loader_get_device(LoaderObject *self, void *unused)
{
	if (!self->core)
		Py_RETURN_NONE;
	if (self->core->device.device_type == kDLCUDA)
		return PyUnicode_FromFormat("cuda:%d", (int)self->core->device.device_id);
	return PyUnicode_FromString("cpu");
}

static PyObject *
loader_get_samples(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->samples);
}

static PyObject *
loader_get_batch_size(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->cfg.batch_size);
}

static PyObject *
loader_get_depth(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->cfg.depth);
}

static PyObject *
loader_get_held(LoaderObject *self, void *unused)
{
	/* The consumer's batches: the stash is the loader's own. */
	if (!self->core)
		return PyLong_FromLong(0);
	return PyLong_FromUnsignedLong(self->core->held - (self->core->stash ? 1 : 0) -
				       (self->core->kept ? 1 : 0));
}

static PyObject *
loader_get_order_id(LoaderObject *self, void *unused)
{
	rf_stats st;

	if (self->closed || !self->core) {
		PyErr_SetString(PyExc_ValueError, "the loader is closed");
		return NULL;
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	int rc = rf_loader_stats(self->core->ld, &st);
	if (rc < 0)
		return rfpy_raise(rc, "order_id", rf_loader_errmsg(self->core->ld));
	return PyLong_FromUnsignedLongLong(st.order_id);
}

static PyObject *
loader_get_rank(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->rank);
}

static PyObject *
loader_get_world(LoaderObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->world);
}

static PyObject *
loader_get_rank_source(LoaderObject *self, void *unused)
{
	return rfpy_rank_source(self->rank_source);
}

static PyObject *
loader_repr(LoaderObject *self)
{
	if (self->closed || !self->core)
		return PyUnicode_FromString("<ringfeed.Loader (closed)>");
	PyObject *dev = loader_get_device(self, NULL);
	PyObject *src = dev ? rfpy_rank_source(self->rank_source) : NULL;
	PyObject *r = src ? PyUnicode_FromFormat(
		"<ringfeed.Loader samples=%llu batch_size=%u batches=%llu epoch=%llu "
		"device=%U depth=%u held=%u rank=%u world=%u rank_source=%R>",
		(unsigned long long)self->samples,
		self->cfg.batch_size, (unsigned long long)self->nbatches,
		(unsigned long long)self->epoch, dev, self->cfg.depth,
		self->core->held - (self->core->stash ? 1u : 0u) - (self->core->kept ? 1u : 0u),
		self->rank, self->world,
		src) : NULL;
	Py_XDECREF(src);
	Py_XDECREF(dev);
	return r;
}

static PyMethodDef loader_methods[] = {
	{"close", (PyCFunction)loader_close, METH_NOARGS,
	 "close($self, /)\n--\n\n"
	 "Stop the loader.  Its threads stop now; its buffers are freed now, or, when\n"
	 "arrays of some batches are still alive, as soon as the last of them is\n"
	 "released (those arrays stay valid until then).\n"
	 "From another thread while the consumer waits in next() for a batch: that\n"
	 "wait ends within about 20 ms with RuntimeError, and close() returns once the\n"
	 "loader is closed."},
	{"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
	 "set_epoch($self, epoch, /)\n--\n\n"
	 "The next pass iterates epoch `epoch` (the order depends on it when\n"
	 "shuffling).  Passes advance the epoch by themselves; call it to jump.\n"
	 "A pass running meanwhile ends: its next step raises RuntimeError."},
	{"stats", (PyCFunction)loader_stats, METH_NOARGS,
	 "stats($self, /)\n--\n\n"
	 "The loader's counters (rf_stats) as a dict, plus `depth` (the batches that\n"
	 "may be held), `buffers` (the library's device buffers: depth + 1) and\n"
	 "`batches_in_place` (batches handed out read-only in the maps)."},
	{"state_dict", (PyCFunction)rfpy_loader_state_dict, METH_NOARGS,
	 "state_dict($self, /)\n--\n\n"
	 "The position after the last batch yielded, as a small dict to checkpoint."},
	{"load_state_dict", (PyCFunction)rfpy_loader_load_state_dict, METH_O,
	 "load_state_dict($self, state, /)\n--\n\n"
	 "Restore a position from state_dict(): the next pass continues with the batch\n"
	 "that would have followed."},
	{"__enter__", (PyCFunction)loader_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)loader_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
	{"epoch", (getter)loader_get_epoch, NULL, "The epoch the next (or current) pass iterates.", NULL},
	{"device", (getter)loader_get_device, NULL, "Where batches are: \"cpu\" or \"cuda:N\".", NULL},
	{"samples", (getter)loader_get_samples, NULL, "Samples in the dataset.", NULL},
	{"batch_size", (getter)loader_get_batch_size, NULL, "Samples per batch.", NULL},
	{"depth", (getter)loader_get_depth, NULL,
	 "Batches that may be held at once (the loader has one device buffer more).", NULL},
	{"held", (getter)loader_get_held, NULL, "Batches of the current pass held now (by arrays or\n"
	 "tensors).  A batch kept from an abandoned pass is not counted: it keeps\n"
	 "that pass's pipeline (pinned ring, threads) alive until it is dropped.", NULL},
	{"order_id", (getter)loader_get_order_id, NULL,
	 "A 64-bit hash of every input of the order (dataset, shuffle, seed, window,\n"
	 "batch_size, world, drop_last; not the rank or the epoch): equal on every\n"
	 "rank of a job that agrees on the order (rf_stats.order_id).", NULL},
	{"rank", (getter)loader_get_rank, NULL,
	 "This process's rank: it reads its share of each global batch.", NULL},
	{"world", (getter)loader_get_world, NULL,
	 "Processes sharing each epoch (world x batch_size samples a global batch).", NULL},
	{"rank_source", (getter)loader_get_rank_source, NULL,
	 "Where rank and world came from: \"arguments\", \"default\" (0 of 1), a\n"
	 "launcher's variables (\"RANK/WORLD_SIZE\", \"SLURM_PROCID/SLURM_NTASKS\",\n"
	 "\"OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE\", \"PMI_RANK/PMI_SIZE\"), or\n"
	 "\"arguments+...\" when one came from each.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

/* The help text, made at import from two literals (C compilers need not
 * take one literal this long). */
static char loader_doc[8192];

static const char loader_doc_head[] =
	"Loader(paths, batch_size, *, fields=None, shuffle='none', seed=0, epoch=0,\n"
	"       rank=None, world=None, device='auto', depth=2, pinned_bytes=0,\n"
	"       drop_last=True, window=0, pinning='ring', io_depth=0, direct=None,\n"
	"       decode_threads=0, verify=True, var_bytes=0, map=False, tokens='stored',\n"
	"       tensors='dlpack', on_error='raise', skip_limit=0, cache_dir=None,\n"
	"       cache_bytes=0, images=None, inplace=False)\n"
	"--\n\n"
	"Stream a dataset in batches.  Each pass (for batch in loader) yields one\n"
	"epoch's len(loader) batches, then advances the epoch; each batch is a dict\n"
	"{field: Array}, a variable-length field an (offsets, data) pair.  Arrays speak\n"
	"DLPack: torch.from_dlpack(batch[\"x\"]) is a tensor on the loader's device with\n"
	"no copy.\n\n";

static const char loader_doc_args[] =
	"Arguments (the order of each epoch depends only on paths, shuffle, seed,\n"
	"window, batch_size, world and drop_last: keep them equal on every rank):\n"
	"  paths           a .rfs shard, a directory of shards, a glob, a list, or\n"
	"                  a list of ringfeed.Source (a mixture).\n"
	"  batch_size      samples per batch on this rank.\n"
	"  fields          names of the fields to load (None: all, schema order).\n"
	"  shuffle         'none' (file order), 'chunks' (chunk order shuffled),\n"
	"                  'window' (samples drawn from a window of decoded chunks:\n"
	"                  the mode for training), 'full' (any sample, read one by\n"
	"                  one); True is 'window', False 'none'.\n"
	"  seed            key of the shuffled orders (an int, 0 .. 2**64-1).\n"
	"  epoch           the first pass's epoch (each epoch has its own order).\n"
	"  rank, world     this process's share of each global batch of\n"
	"                  world x batch_size samples; None: from the launcher's\n"
	"                  environment (RANK/WORLD_SIZE, ...), else 0 of 1;\n"
	"                  loader.rank, .world and .rank_source say which (a\n"
	"                  Slurm/MPI world warns unless torch.distributed or\n"
	"                  mpi4py is initialised).\n"
	"  device          'auto' (a CUDA device when there is one, else host),\n"
	"                  'cpu', 'cuda' or 'cuda:N' (or a torch.device).\n"
	"  depth           batches that may be alive at once (one more raises\n"
	"                  ringfeed.Error EHELD); the loader keeps depth + 1 buffers.\n"
	"  pinned_bytes    page-locked host budget; 0: up to 256 MiB of the\n"
	"                  512 MiB the process's Loaders left at 0 share.\n"
	"  drop_last       drop an epoch's last, partial batch (default True).  A\n"
	"                  loader with no batch per epoch raises ValueError.\n"
	"                  False: every sample, a few ranks repeating one.\n"
	"  window          decoded chunks in the 'window' shuffle; 0: the dataset's\n"
	"                  default (about 128 MiB of chunks, 2 to 1024).\n"
	"  pinning         'ring' (a pinned ring, the default) or 'transient'.\n"
	"  io_depth        reads in flight; 0: the library's choice (32).\n"
	"  direct          O_DIRECT reads: True, False, or None to let the library\n"
	"                  choose (cached reads when the dataset fits in memory).\n"
	"  decode_threads  decode workers; 0: chosen from the CPUs and codec.\n"
	"  verify          check chunk checksums as they are read (default True).\n"
	"  on_error        'raise', or 'skip': a bad chunk's samples as zeros.\n"
	"  skip_limit      chunks skipped before raising; 0: 16.\n"
	"  var_bytes       a variable field's bytes per batch; 0: from the dataset.\n"
	"  map             read through memory maps (SIGBUS if a shard shrinks).\n"
	"  tokens          'stored', or 'inputs_targets': a field \"tokens\" of T + 1\n"
	"                  tokens (ringfeed pack --llmc) delivered as int32 \"inputs\"\n"
	"                  and \"targets\" of shape [B, T].\n"
	"  tensors         'dlpack' (batches of ringfeed.Array), or 'torch': torch\n"
	"                  tensors (torch.from_dlpack of each, no copy); with a\n"
	"                  PyTorch without CUDA, 'auto' delivers on the host (a\n"
	"                  warning) and 'cuda' raises ValueError.\n"
	"  cache_dir       a directory keeping a remote dataset's chunks for later\n"
	"                  epochs and runs; cache_bytes its cap (0: 10 GiB).\n"
	"  images          {field: size or {options}}: encoded JPEG/PNG images\n"
	"                  decoded and transformed in the pipeline (docs/python.md).\n"
	"  inplace         True, with map=True on the CPU: batches in a read-only\n"
	"                  map of the file, no copy (Array.readonly); a write via\n"
	"                  torch.from_numpy kills the process.  False (default)\n"
	"                  copies every batch.\n\n"
	"A batch's buffer is reused once every array and tensor made from it is\n"
	"gone (docs/python.md).  state_dict()/load_state_dict() resume\n"
	"mid-epoch.  A Loader belongs to the process that opened it: in a child of\n"
	"fork() (a DataLoader worker) it raises ringfeed.Error EFORK; open one in\n"
	"each worker.";

static PyType_Slot loader_slots[] = {
	{Py_tp_dealloc, RFPY_FN(loader_dealloc)},
	{Py_tp_repr, RFPY_FN(loader_repr)},
	{Py_tp_doc, RFPY_FN(loader_doc)},
	{Py_tp_methods, loader_methods},
	{Py_tp_getset, loader_getset},
	{Py_sq_length, RFPY_FN(loader_len)},
	{Py_mp_subscript, RFPY_FN(loader_getitem)},
	{Py_tp_iter, RFPY_FN(loader_iter)},
	{Py_tp_init, RFPY_FN(rfpy_loader_init_args)},
	{Py_tp_new, RFPY_FN(PyType_GenericNew)},
	{0, NULL},
};

static PyType_Spec loader_spec = {
	.name = "ringfeed.Loader",
	.basicsize = sizeof(LoaderObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
	.slots = loader_slots,
};

static void
iter_dealloc(IterObject *self)
{
	Py_XDECREF((PyObject *)self->loader);
	rfpy_free((PyObject *)self);
}

static PyObject *
iter_next(IterObject *self)
{
	LoaderObject *ld = self->loader;

	/* Finished: stays finished. */
	if (self->gen == 0)
		return NULL;
	/* A newer pass, set_epoch or a restore ended this one midway: say so,
	 * rather than end a training loop early in silence. */
	if (self->gen != ld->gen) {
		self->gen = 0;
		PyErr_SetString(PyExc_RuntimeError,
				"this pass over the loader was ended by set_epoch(), "
				"load_state_dict() or a newer pass; start a new pass "
				"(for batch in loader) to go on");
		return NULL;
	}
	PyObject *d = loader_take(ld);
	if (!d && PyErr_ExceptionMatches(PyExc_StopIteration)) {
		PyErr_Clear();
		/* Stay stopped: the next epoch belongs to the next pass. */
		self->gen = 0;
	}
	return d;
}

static PyType_Slot iter_slots[] = {
	{Py_tp_dealloc, RFPY_FN(iter_dealloc)},
	{Py_tp_iter, RFPY_FN(PyObject_SelfIter)},
	{Py_tp_iternext, RFPY_FN(iter_next)},
	{0, NULL},
};

static PyType_Spec iter_spec = {
	.name = "ringfeed._LoaderIter",
	.basicsize = sizeof(IterObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = iter_slots,
};

int
rfpy_loader_init(PyObject *module)
{
	snprintf(loader_doc, sizeof loader_doc, "%s%s", loader_doc_head, loader_doc_args);
	if (!(rfpy_BatchType = rfpy_add_type(module, &rfpy_batch_spec, 0)) ||
	    !(rfpy_ArrayType = rfpy_add_type(module, rfpy_array_spec_pick(), 1)) ||
	    !rfpy_add_type(module, &loader_spec, 1) ||
	    !(IterType = rfpy_add_type(module, &iter_spec, 0)))
		return -1;
	return 0;
}
