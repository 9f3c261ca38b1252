/* SPDX-License-Identifier: MIT */
/*
 * ringfeed.open: random access to a dataset, samples as NumPy arrays (NumPy
 * is imported at run time only to build them: the extension needs no NumPy
 * headers).  ringfeed.pack is in pack.c.
 */
#include "module.h"

#include <errno.h>
#include <string.h>

/* ------------------------------------------------------------ Dataset */

/* A decoded chunk's values: per field one read-only bytes object and, over
 * it, a fixed field's array [samples, *shape] (ds[i] a row of it, a view)
 * or a variable field's list of each sample's array.  Read-only, as views
 * are shared by every ds[i] of the chunk: writing to one is an error, not
 * a change to what the next ds[i] returns. */
struct cslot {
	uint64_t chunk;          /* UINT64_MAX: empty */
	uint64_t first, n;       /* its samples */
	uint64_t used;           /* the tick of its last use (least recent goes) */
	PyObject *bufs[RF_MAX_FIELDS];
	PyObject *cols[RF_MAX_FIELDS];
};

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
	/* Decoded chunks, as NumPy arrays: ds[i] on a cached chunk reads
	 * nothing and calls no library function (struct cslot). */
	rf_schema schema;        /* a copy: the handle may be closed meanwhile */
	PyObject *names[RF_MAX_FIELDS]; /* the fields' names, interned */
	uint64_t samples;
	uint64_t nchunks;
	uint64_t *firsts;        /* each chunk's first sample, then `samples` */
	struct cslot *slots;
	uint32_t nslots;
	uint32_t *slot_of;       /* per chunk: its slot + 1, or 0 */
	uint64_t last_chunk;     /* chunk_of's last answer (< nchunks) */
	uint64_t tick;
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
slot_clear(DatasetObject *self, struct cslot *s)
{
	if (s->chunk != UINT64_MAX)
		self->slot_of[s->chunk] = 0;
	s->chunk = UINT64_MAX;
	for (uint32_t f = 0; f < RF_MAX_FIELDS; f++) {
		Py_CLEAR(s->bufs[f]);
		Py_CLEAR(s->cols[f]);
	}
}

static void
dataset_dealloc(DatasetObject *self)
{
	for (uint32_t i = 0; self->slots && i < self->nslots; i++)
		slot_clear(self, &self->slots[i]);
	for (uint32_t f = 0; f < RF_MAX_FIELDS; f++)
		Py_CLEAR(self->names[f]);
	PyMem_Free(self->slots);
	PyMem_Free(self->slot_of);
	PyMem_Free(self->firsts);
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

/* The chunk holding sample i (< samples): the last one found when it
 * holds i (sequential reads stay in one chunk for many calls), else by
 * binary search. */
static uint64_t
chunk_of(DatasetObject *self, uint64_t i)
{
	uint64_t lo = self->last_chunk, hi;

	if (self->firsts[lo] <= i && i < self->firsts[lo + 1])
		return lo;
	lo = 0;
	hi = self->nchunks;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (self->firsts[mid] <= i)
			lo = mid;
		else
			hi = mid;
	}
	self->last_chunk = lo;
	return lo;
}

/* Read every value of chunk c's samples [first, first + n) (lock held, the
 * GIL not): a fixed field into its bytes object fixed[f] (made with the
 * GIL), a variable one into var[f] (malloc) with each sample's end in
 * ends[f].  Returns 0, or the code and the message in msg. */
static int
read_chunk(DatasetObject *self, uint64_t first, uint64_t n, char **fixed, char **var,
	   uint64_t **ends, char *msg, size_t cap)
{
	const rf_schema *s = &self->schema;
	int rc = 0;

	for (uint32_t f = 0; f < s->nfields && rc == 0; f++) {
		const rf_field *fd = &s->fields[f];
		if (fd->var_dim < 0) {
			uint64_t ib = rf_field_item_bytes(fd);
			for (uint64_t k = 0; k < n && rc == 0; k++) {
				size_t got = 0;
				rc = rf_dataset_read(self->ds, first + k, f, fixed[f] + k * ib, ib, &got);
				if (rc == 0 && got != ib)
					rc = RF_ECORRUPT;
			}
			continue;
		}
		uint64_t total = 0;
		if (!(ends[f] = malloc((n ? n : 1) * sizeof(uint64_t))))
			return -ENOMEM;
		for (uint64_t k = 0; k < n && rc == 0; k++) {
			size_t len = 0;
			char probe[1];
			rc = rf_dataset_read(self->ds, first + k, f, probe, 0, &len);
			if (rc == -ENOSPC)
				rc = 0;
			total += len;
			ends[f][k] = total;
		}
		if (rc == 0 && !(var[f] = malloc(total ? total : 1)))
			return -ENOMEM;
		for (uint64_t k = 0; k < n && rc == 0; k++) {
			uint64_t start = k ? ends[f][k - 1] : 0;
			size_t got = 0;
			rc = rf_dataset_read(self->ds, first + k, f, var[f] + start,
					     ends[f][k] - start, &got);
			if (rc == 0 && got != ends[f][k] - start)
				rc = RF_ECORRUPT;
		}
	}
	if (rc < 0)
		snprintf(msg, cap, "%s", rf_dataset_errmsg(self->ds));
	return rc;
}

/* The NumPy array of `len` bytes of field fd at `offset` of buf (a bytes
 * object: the array is read-only); lead > 0 puts a first dimension of
 * `lead` rows in front of the field's shape. */
static PyObject *
values_array(PyObject *buf, const rf_field *fd, uint64_t offset, uint64_t len, Py_ssize_t lead)
{
	PyObject *frombuffer = get_frombuffer();
	uint64_t isz = rf_dtype_size(fd->dtype);

	if (!frombuffer)
		return NULL;
	PyObject *arr = PyObject_CallFunction(frombuffer, "OsLL", buf, rfpy_numpy_dtype(fd->dtype),
					      (long long)(len / (isz ? isz : 1)), (long long)offset);
	if (!arr)
		return NULL;
	PyObject *shape = value_shape(fd, lead ? rf_field_item_bytes(fd) : len);
	if (shape && lead) {
		PyObject *l = Py_BuildValue("(n)", lead);
		PyObject *full = l ? PySequence_Concat(l, shape) : NULL;
		Py_XDECREF(l);
		Py_DECREF(shape);
		shape = full;
	}
	PyObject *out = shape ? PyObject_CallMethod(arr, "reshape", "(O)", shape) : NULL;
	Py_XDECREF(shape);
	Py_DECREF(arr);
	return out;
}

/* The cached slot of chunk c, decoded now if it is not there; NULL with an
 * exception.  May let other threads run (while reading), which may use or
 * evict other slots. */
static struct cslot *
cache_get(DatasetObject *self, uint64_t c)
{
	if (self->slot_of[c]) {
		struct cslot *s = &self->slots[self->slot_of[c] - 1];
		s->used = ++self->tick;
		return s;
	}
	const rf_schema *sc = &self->schema;
	uint64_t first = self->firsts[c], n = self->firsts[c + 1] - first;
	PyObject *bufs[RF_MAX_FIELDS] = {NULL};
	char *fixed[RF_MAX_FIELDS] = {NULL}, *var[RF_MAX_FIELDS] = {NULL};
	uint64_t *ends[RF_MAX_FIELDS] = {NULL};
	struct cslot *s = NULL;
	char msg[512];
	int rc = 0;

	for (uint32_t f = 0; f < sc->nfields; f++) {
		if (sc->fields[f].var_dim >= 0)
			continue;
		uint64_t bytes = n * rf_field_item_bytes(&sc->fields[f]);
		if (bytes > PY_SSIZE_T_MAX) {
			PyErr_NoMemory();
			goto out;
		}
		if (!(bufs[f] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes)))
			goto out;
		fixed[f] = PyBytes_AsString(bufs[f]);
	}
	if (dataset_lock(self) < 0)
		goto out;
	if (!self->ds) { /* closed by another thread meanwhile */
		PyThread_release_lock(self->lock);
		dataset_check(self);
		goto out;
	}
	/* Reading, checking and decompressing a chunk take a while: other
	 * threads run meanwhile (the lock keeps this dataset to this one). */
	Py_BEGIN_ALLOW_THREADS
	rc = read_chunk(self, first, n, fixed, var, ends, msg, sizeof(msg));
	Py_END_ALLOW_THREADS
	PyThread_release_lock(self->lock);
	if (rc == -ENOMEM) {
		PyErr_NoMemory();
		goto out;
	}
	if (rc < 0) {
		rfpy_raise(rc, "read", msg);
		goto out;
	}
	/* Another thread may have cached it meanwhile. */
	if (self->slot_of[c]) {
		s = &self->slots[self->slot_of[c] - 1];
		s->used = ++self->tick;
		goto out;
	}
	PyObject *cols[RF_MAX_FIELDS] = {NULL};
	int ok = 1;
	for (uint32_t f = 0; f < sc->nfields && ok; f++) {
		const rf_field *fd = &sc->fields[f];
		if (fd->var_dim < 0) {
			cols[f] = values_array(bufs[f], fd, 0, (uint64_t)PyBytes_Size(bufs[f]),
					       (Py_ssize_t)n);
			ok = cols[f] != NULL;
			continue;
		}
		uint64_t total = n ? ends[f][n - 1] : 0;
		bufs[f] = PyBytes_FromStringAndSize(var[f], (Py_ssize_t)total);
		cols[f] = bufs[f] ? PyList_New((Py_ssize_t)n) : NULL;
		ok = cols[f] != NULL;
		for (uint64_t k = 0; k < n && ok; k++) {
			uint64_t start = k ? ends[f][k - 1] : 0;
			PyObject *v = values_array(bufs[f], fd, start, ends[f][k] - start, 0);
			ok = v != NULL;
			if (v)
				(void)PyList_SetItem(cols[f], (Py_ssize_t)k, v);
		}
	}
	if (!ok) {
		for (uint32_t f = 0; f < RF_MAX_FIELDS; f++)
			Py_XDECREF(cols[f]);
		goto out;
	}
	/* The empty slot or the least recently used. */
	s = &self->slots[0];
	for (uint32_t i = 1; i < self->nslots && s->chunk != UINT64_MAX; i++)
		if (self->slots[i].chunk == UINT64_MAX || self->slots[i].used < s->used)
			s = &self->slots[i];
	slot_clear(self, s);
	s->chunk = c;
	s->first = first;
	s->n = n;
	s->used = ++self->tick;
	for (uint32_t f = 0; f < RF_MAX_FIELDS; f++) {
		s->bufs[f] = bufs[f];
		s->cols[f] = cols[f];
		bufs[f] = NULL;
	}
	self->slot_of[c] = (uint32_t)(s - self->slots) + 1;
out:
	for (uint32_t f = 0; f < RF_MAX_FIELDS; f++) {
		Py_XDECREF(bufs[f]);
		free(var[f]);
		free(ends[f]);
	}
	return s;
}

/* Sample index i (negative: from the end) as an index below samples; -1
 * with IndexError. */
static int
sample_index(DatasetObject *self, Py_ssize_t i, uint64_t *out)
{
	Py_ssize_t given = i;
	if (i < 0)
		i += (Py_ssize_t)self->samples;
	if (i < 0 || (uint64_t)i >= self->samples) {
		if (!self->samples) {
			PyErr_Format(PyExc_IndexError, "sample index %zd: the dataset has no samples",
				     given);
			return -1;
		}
		PyErr_Format(PyExc_IndexError,
			     "sample index %zd out of range for a dataset of %llu samples "
			     "(valid: -%llu .. %llu)", given, (unsigned long long)self->samples,
			     (unsigned long long)self->samples,
			     (unsigned long long)(self->samples - 1));
		return -1;
	}
	*out = (uint64_t)i;
	return 0;
}

static PyObject *
dataset_item(DatasetObject *self, Py_ssize_t i)
{
	uint64_t idx;

	if (dataset_check(self) < 0 || sample_index(self, i, &idx) < 0)
		return NULL;
	struct cslot *s = cache_get(self, chunk_of(self, idx));
	if (!s)
		return NULL;
	Py_ssize_t j = (Py_ssize_t)(idx - s->first);
	PyObject *cols[RF_MAX_FIELDS] = {NULL};
	uint32_t nf = self->schema.nfields;
	/* Held: a row's view may run code (a collection) that evicts the slot. */
	for (uint32_t f = 0; f < nf; f++)
		cols[f] = Py_NewRef(s->cols[f]);
	PyObject *d = PyDict_New();
	for (uint32_t f = 0; f < nf && d; f++) {
		PyObject *v;
		if (self->schema.fields[f].var_dim >= 0) {
			v = PyList_GetItem(cols[f], j);
			Py_XINCREF(v);
		} else if (self->schema.fields[f].rank > 0) {
			v = PySequence_GetItem(cols[f], j);
		} else {
			/* (j, ...): a 0-d array, where a[j] would be a scalar. */
			PyObject *jo = PyLong_FromSsize_t(j);
			PyObject *key = jo ? PyTuple_Pack(2, jo, Py_Ellipsis) : NULL;
			v = key ? PyObject_GetItem(cols[f], key) : NULL;
			Py_XDECREF(key);
			Py_XDECREF(jo);
		}
		if (!v || PyDict_SetItem(d, self->names[f], v) < 0)
			Py_CLEAR(d);
		Py_XDECREF(v);
	}
	for (uint32_t f = 0; f < nf; f++)
		Py_DECREF(cols[f]);
	return d;
}

/* {field: values} of samples idx[0..m): a fixed field's values as one new
 * (writable) array [m, *shape], a variable field's as a list. */
static PyObject *
take_samples(DatasetObject *self, const uint64_t *idx, size_t m)
{
	const rf_schema *sc = &self->schema;
	PyObject *outs[RF_MAX_FIELDS] = {NULL};
	PyObject *d = NULL;

	for (uint32_t f = 0; f < sc->nfields; f++) {
		const rf_field *fd = &sc->fields[f];
		outs[f] = fd->var_dim >= 0 ? PyList_New((Py_ssize_t)m)
			: PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(m * rf_field_item_bytes(fd)));
		if (!outs[f])
			goto out;
	}
	for (size_t k = 0; k < m; k++) {
		if (dataset_check(self) < 0)
			goto out;
		struct cslot *s = cache_get(self, chunk_of(self, idx[k]));
		if (!s)
			goto out;
		uint64_t j = idx[k] - s->first;
		for (uint32_t f = 0; f < sc->nfields; f++) {
			const rf_field *fd = &sc->fields[f];
			if (fd->var_dim >= 0) {
				PyObject *v = PyList_GetItem(s->cols[f], (Py_ssize_t)j);
				Py_XINCREF(v);
				(void)PyList_SetItem(outs[f], (Py_ssize_t)k, v);
			} else {
				uint64_t ib = rf_field_item_bytes(fd);
				memcpy(PyByteArray_AsString(outs[f]) + k * ib,
				       PyBytes_AsString(s->bufs[f]) + j * ib, ib);
			}
		}
	}
	if (!(d = PyDict_New()))
		goto out;
	for (uint32_t f = 0; f < sc->nfields; f++) {
		const rf_field *fd = &sc->fields[f];
		PyObject *v = Py_NewRef(outs[f]);
		if (fd->var_dim < 0 && m > 0) {
			Py_DECREF(v);
			v = values_array(outs[f], fd, 0, (uint64_t)PyByteArray_Size(outs[f]),
					 (Py_ssize_t)m);
		} else if (fd->var_dim < 0) {
			/* Nothing taken: an empty [0, *shape]. */
			PyObject *np = PyImport_ImportModule("numpy");
			PyObject *shape = value_shape(fd, rf_field_item_bytes(fd));
			PyObject *l = Py_BuildValue("(n)", (Py_ssize_t)0);
			PyObject *full = shape && l ? PySequence_Concat(l, shape) : NULL;
			Py_DECREF(v);
			v = np && full ? PyObject_CallMethod(np, "empty", "Os", full,
							     rfpy_numpy_dtype(fd->dtype)) : NULL;
			Py_XDECREF(np);
			Py_XDECREF(shape);
			Py_XDECREF(l);
			Py_XDECREF(full);
		}
		if (!v || PyDict_SetItem(d, self->names[f], v) < 0) {
			Py_XDECREF(v);
			Py_CLEAR(d);
			goto out;
		}
		Py_DECREF(v);
	}
out:
	for (uint32_t f = 0; f < RF_MAX_FIELDS; f++)
		Py_XDECREF(outs[f]);
	return d;
}

static PyObject *
dataset_take(DatasetObject *self, PyObject *indices)
{
	if (dataset_check(self) < 0)
		return NULL;
	PyObject *it = PyObject_GetIter(indices);
	if (!it)
		return NULL;
	size_t m = 0, cap = 64;
	uint64_t *idx = PyMem_Malloc(cap * sizeof(uint64_t));
	PyObject *item, *r = NULL;
	if (!idx) {
		Py_DECREF(it);
		return PyErr_NoMemory();
	}
	while ((item = PyIter_Next(it))) {
		Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
		Py_DECREF(item);
		if ((i == -1 && PyErr_Occurred()) || sample_index(self, i, &idx[m]) < 0)
			goto out;
		if (++m == cap) {
			uint64_t *n2 = PyMem_Realloc(idx, 2 * cap * sizeof(uint64_t));
			if (!n2) {
				PyErr_NoMemory();
				goto out;
			}
			idx = n2;
			cap *= 2;
		}
	}
	if (!PyErr_Occurred())
		r = take_samples(self, idx, m);
out:
	Py_DECREF(it);
	PyMem_Free(idx);
	return r;
}

static PyObject *
dataset_subscript(DatasetObject *self, PyObject *key)
{
	if (PySlice_Check(key)) {
		Py_ssize_t start, stop, step;
		if (dataset_check(self) < 0 || PySlice_Unpack(key, &start, &stop, &step) < 0)
			return NULL;
		Py_ssize_t m = PySlice_AdjustIndices((Py_ssize_t)self->samples, &start, &stop, step);
		uint64_t *idx = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(uint64_t));
		if (!idx)
			return PyErr_NoMemory();
		for (Py_ssize_t k = 0; k < m; k++)
			idx[k] = (uint64_t)(start + k * step);
		PyObject *r = take_samples(self, idx, (size_t)m);
		PyMem_Free(idx);
		return r;
	}
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
		PyErr_Format(PyExc_IndexError, "chunk index %llu out of range for a dataset of "
			     "%llu chunks", c, (unsigned long long)rf_dataset_chunks(self->ds));
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
	/* The cached chunks go too (arrays handed out keep their own). */
	for (uint32_t i = 0; self->slots && i < self->nslots; i++)
		slot_clear(self, &self->slots[i]);
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
	{"take", (PyCFunction)dataset_take, METH_O,
	 "take($self, indices, /)\n--\n\n"
	 "The samples at `indices` (any iterable of ints, a NumPy array of them\n"
	 "included; negative ones count from the end), in that order, as one dict:\n"
	 "a fixed field's values stacked into a new array [len(indices), *shape], a\n"
	 "variable field's as a list of arrays.  ds[a:b:c] is ds.take(range(a, b, c))."},
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
	 "ds[i] a dict {field: numpy array} (bf16 values as uint16 bits), read-only\n"
	 "views of a cached decoded chunk (.copy() one to change it); ds[a:b] and\n"
	 "ds.take(indices) a dict of the samples' values stacked."},
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
	static char *kwlist[] = {"paths", "verify", "cache_bytes", NULL};
	PyObject *arg, *keep = NULL, *cache_arg = NULL;
	int verify = 1;
	const char **paths = NULL;
	size_t n;
	unsigned long long cache_bytes = 256ull << 20;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pO:open", kwlist, &arg, &verify,
					 &cache_arg))
		return NULL;
	if (cache_arg && rfpy_arg_u64(cache_arg, "cache_bytes", &cache_bytes) < 0)
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
	memset((char *)obj + sizeof(PyObject), 0, sizeof(*obj) - sizeof(PyObject));
	obj->ds = ds;
	obj->forks = rfpy_forks();
	obj->torn = 0;
	obj->lock = PyThread_allocate_lock();
	if (!obj->lock) {
		Py_DECREF(obj);
		return PyErr_NoMemory();
	}
	/* The chunk cache: as many decoded chunks as cache_bytes holds of the
	 * largest, at least one. */
	obj->schema = *rf_dataset_schema(ds);
	obj->samples = rf_dataset_samples(ds);
	obj->nchunks = rf_dataset_chunks(ds);
	obj->firsts = PyMem_Calloc((size_t)obj->nchunks + 1, sizeof(uint64_t));
	obj->slot_of = PyMem_Calloc((size_t)obj->nchunks + 1, sizeof(uint32_t));
	if (!obj->firsts || !obj->slot_of) {
		Py_DECREF(obj);
		return PyErr_NoMemory();
	}
	uint64_t max_raw = 1;
	for (uint64_t c = 0; c < obj->nchunks; c++) {
		rf_chunk_info ci;
		if ((rc = rf_dataset_chunk_info(ds, c, &ci)) < 0) {
			Py_DECREF(obj);
			return rfpy_raise(rc, "open", rf_dataset_errmsg(ds));
		}
		obj->firsts[c] = ci.first_sample;
		if (ci.raw_bytes > max_raw)
			max_raw = ci.raw_bytes;
	}
	obj->firsts[obj->nchunks] = obj->samples;
	uint64_t nslots = cache_bytes / max_raw;
	if (nslots > obj->nchunks)
		nslots = obj->nchunks;
	if (nslots > 65536)
		nslots = 65536;
	obj->nslots = nslots ? (uint32_t)nslots : 1;
	if (!(obj->slots = PyMem_Calloc(obj->nslots, sizeof(struct cslot)))) {
		Py_DECREF(obj);
		return PyErr_NoMemory();
	}
	for (uint32_t i = 0; i < obj->nslots; i++)
		obj->slots[i].chunk = UINT64_MAX;
	for (uint32_t f = 0; f < obj->schema.nfields; f++)
		if (!(obj->names[f] = PyUnicode_InternFromString(obj->schema.fields[f].name))) {
			Py_DECREF(obj);
			return NULL;
		}
	return (PyObject *)obj;
}

int
rfpy_dataset_init(PyObject *module)
{
	DatasetType = rfpy_add_type(module, &dataset_spec, 1);
	return DatasetType ? 0 : -1;
}
