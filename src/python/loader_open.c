/* SPDX-License-Identifier: MIT */
/* Opening a ringfeed.Loader: its arguments (device, rank and world,
 * shuffle), the batches an epoch has, and the C loader's open. */
#include "loader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
rfpy_loader_free_config(LoaderObject *self)
{
	PyMem_Free(self->paths);
	PyMem_Free(self->fields);
	PyMem_Free(self->sources);
	self->sources = NULL;
	self->paths = NULL;
	self->fields = NULL;
	Py_CLEAR(self->keep);
	Py_CLEAR(self->to_tensor);
}

int
rfpy_loader_open_core(LoaderObject *self, uint64_t epoch, const void *resume, size_t len)
{
	struct core *c = PyMem_Calloc(1, sizeof(*c));
	rf_loader *ld = NULL;
	rf_config cfg = self->cfg;
	char msg[2048];
	int rc;

	if (!c) {
		PyErr_NoMemory();
		return -1;
	}
	cfg.epoch = epoch;
	cfg.resume = resume;
	cfg.resume_len = len;
	/* One device buffer more than the consumer may hold (loader_take
	 * enforces `depth`): a `for` loop still holds the previous batch, in
	 * its variable, while it asks for the next one, so with exactly depth
	 * buffers one of them would sit idle at every step and the copy of the
	 * next batch would wait for the consumer.  The spare keeps depth
	 * buffers refilling while the loop body runs. */
	cfg.depth = self->cfg.depth + RFPY_SPARE_BUFFERS;
	self->busy = 1;
	Py_BEGIN_ALLOW_THREADS
	rc = rf_loader_open(&ld, &cfg);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", rf_loader_last_open_error());
	Py_END_ALLOW_THREADS
	self->busy = 0;
	if (rc < 0) {
		PyMem_Free(c);
		if (rc == RF_EMEMPLAN && strstr(msg, "depth")) {
			/* The library's figures count the spare buffer (said where
			 * the message speaks of depth, not of the pinned slots). */
			size_t n = strlen(msg);
			snprintf(msg + n, sizeof(msg) - n,
				 " (the Python loader opens depth + %d = %u device buffers: "
				 "depth=%u batches held plus one being refilled)",
				 RFPY_SPARE_BUFFERS, cfg.depth, self->cfg.depth);
		}
		if (rc == RF_EUSAGE && strstr(msg, "shuffle") && strstr(msg, "not supported") &&
		    !cfg.nsources) {
			PyErr_Format(PyExc_ValueError,
				     "shuffle mode \"%s\" is not supported by this build (%s)",
				     rf_shuffle_name(self->shuffle), msg);
			return -1;
		}
		rfpy_raise(rc, "Loader", msg);
		return -1;
	}
	c->ld = ld;
	c->pid = (long)getpid();
	c->epoch0 = epoch;
	c->device.device_type = kDLCPU;
	c->device.device_id = 0;
	rf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (rf_loader_stats(ld, &st) == 0 && st.device_ordinal >= 0) {
		c->device.device_type = kDLCUDA;
		c->device.device_id = st.device_ordinal;
		/* The device chosen at the first open (the launcher's local
		 * rank, the thread's current device) stays the loader's for
		 * every later epoch, whatever thread opens it. */
		if (self->cfg.device_index < 0)
			self->cfg.device_index = st.device_ordinal;
	}
	c->dev_tuple = Py_BuildValue("(ii)", (int)c->device.device_type, (int)c->device.device_id);
	if (!c->dev_tuple) {
		rfpy_core_close_now(c);
		return -1;
	}
	/* Swap before retiring: retiring may close the old loader without
	 * the GIL, and no other thread may reach it through self meanwhile. */
	struct core *old = self->core;
	self->core = c;
	rfpy_core_retire(old);
	self->epoch = epoch;
	self->in_epoch = 0;
	self->fresh = 1;
	self->gen++;
	return 0;
}

static int
parse_device(PyObject *arg, rf_config *cfg)
{
	PyObject *s = PyObject_Str(arg);
	const char *d;
	char dbuf[128];

	if (!s)
		return -1;
	d = rfpy_utf8(s, dbuf, sizeof(dbuf));
	if (!d) {
		Py_DECREF(s);
		return -1;
	}
	int ok = 1;
	enum rf_device_kind kind;
	/* The library's names ("auto", "host", "cuda"), plus Python's "cpu"
	 * (torch's word for host) and "cuda:N" (torch's device strings). */
	if (!strcmp(d, "cpu")) {
		cfg->device = RF_DEVICE_HOST;
	} else if (!strncmp(d, "cuda:", 5)) {
		char *end;
		long idx = strtol(d + 5, &end, 10);
		ok = *end == 0 && end != d + 5 && d[5] >= '0' && d[5] <= '9' && idx < 1024;
		cfg->device = RF_DEVICE_CUDA;
		cfg->device_index = (int)idx;
	} else if (rf_device_parse(d, &kind) == 0) {
		cfg->device = kind;
	} else {
		ok = 0;
	}
	if (!ok)
		PyErr_Format(PyExc_ValueError,
			     "device must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", not %R", arg);
	Py_DECREF(s);
	return ok ? 0 : -1;
}

/* The shuffle argument: a mode's name, or a bool (True: "window", the mode
 * for training; False: "none").  0 and *out, or -1 with an exception. */
static int
parse_shuffle(PyObject *arg, enum rf_shuffle *out)
{
	*out = RF_SHUFFLE_NONE;
	if (!arg)
		return 0;
	if (PyBool_Check(arg)) {
		*out = arg == Py_True ? RF_SHUFFLE_WINDOW : RF_SHUFFLE_NONE;
		return 0;
	}
	if (!PyUnicode_Check(arg)) {
		PyErr_Format(PyExc_TypeError, "shuffle must be a str or a bool, not %.100s",
			     rfpy_type_name(arg));
		return -1;
	}
	char nbuf[64];
	const char *name = rfpy_utf8(arg, nbuf, sizeof(nbuf));
	if (!name)
		return -1;
	if (rf_shuffle_parse(name, out) == 0)
		return 0;
	PyErr_Format(PyExc_ValueError, "shuffle must be \"none\", \"chunks\", \"window\", "
		     "\"full\", True (\"window\") or False (\"none\"), not %R", arg);
	return -1;
}

/* True when module `mod` is imported and its `fn`() returns true (a job's
 * communication set up); never imports anything. */
static int
module_says(const char *mod, const char *fn)
{
	PyObject *mods = PyImport_GetModuleDict(); /* borrowed */
	PyObject *m = mods ? PyDict_GetItemString(mods, mod) : NULL; /* borrowed */
	if (!m)
		return 0;
	PyObject *r = PyObject_CallMethod(m, fn, NULL);
	int yes = r ? PyObject_IsTrue(r) > 0 : 0;
	Py_XDECREF(r);
	PyErr_Clear();
	return yes;
}

/* A world above 1 taken from a batch system's variables (Slurm, Open MPI,
 * PMI) rather than the arguments reads 1/world of the data, and those
 * variables are inherited by whatever the job starts: a notebook kernel in
 * a Slurm allocation is rank 0 of SLURM_NTASKS without knowing it.  Warn
 * then, unless the process is visibly part of a distributed job
 * (torch.distributed or mpi4py's MPI initialised).  RANK/WORLD_SIZE are
 * set by torchrun and its kind for the one process they start: no
 * warning.  0, or -1 when the warning was made an error. */
static int
warn_batch_system_rank(LoaderObject *self)
{
	const char *src = self->rank_source;
	if (self->world <= 1 || !src)
		return 0;
	if (!strstr(src, "SLURM_") && !strstr(src, "OMPI_") && !strstr(src, "PMI_"))
		return 0;
	if (module_says("torch.distributed", "is_initialized") ||
	    module_says("mpi4py.MPI", "Is_initialized"))
		return 0;
	return PyErr_WarnFormat(rfpy_Warning, 1,
				"this Loader reads 1/%u of the dataset: rank %u of world %u came "
				"from %s in the environment (inherited from a batch system or "
				"mpirun?); pass rank=0, world=1 to read all of it, or rank= and "
				"world= to confirm the split",
				self->world, self->rank, self->world,
				strncmp(src, "config+", 7) ? src : src + 7);
}

PyObject *
rfpy_rank_source(const char *src)
{
	/* The library's "config" is what the Python caller passed. */
	if (!src)
		src = "default";
	if (!strcmp(src, "config"))
		return PyUnicode_FromString("arguments");
	if (!strncmp(src, "config+", 7))
		return PyUnicode_FromFormat("arguments+%s", src + 7);
	return PyUnicode_FromString(src);
}

/* torch.cuda.is_available(): 1 or 0, -1 with an exception.  A CPU-only
 * PyTorch (what `pip install torch` often gets) says 0 on a machine whose
 * CUDA devices the library itself can use. */
static int
torch_has_cuda(void)
{
	PyObject *cuda = PyImport_ImportModule("torch.cuda");
	if (!cuda)
		return -1;
	PyObject *r = PyObject_CallMethod(cuda, "is_available", NULL);
	Py_DECREF(cuda);
	if (!r)
		return -1;
	int yes = PyObject_IsTrue(r);
	Py_DECREF(r);
	return yes;
}

/* The torch dtype a ringfeed dtype becomes through torch.from_dlpack. */
static const char *
torch_dtype_name(enum rf_dtype dt)
{
	switch (dt) {
	case RF_DTYPE_U8: case RF_DTYPE_BYTES: return "uint8";
	case RF_DTYPE_I8: return "int8";
	case RF_DTYPE_U16: return "uint16";
	case RF_DTYPE_I16: return "int16";
	case RF_DTYPE_U32: return "uint32";
	case RF_DTYPE_I32: return "int32";
	case RF_DTYPE_U64: return "uint64";
	case RF_DTYPE_I64: return "int64";
	case RF_DTYPE_F16: return "float16";
	case RF_DTYPE_BF16: return "bfloat16";
	case RF_DTYPE_F32: return "float32";
	case RF_DTYPE_F64: return "float64";
	}
	return NULL;
}

/* tensors="torch": every field delivered must have a dtype in the
 * installed PyTorch (1.13 has no uint16, uint32 or uint64), or the first
 * batch fails in torch.from_dlpack with "Unsupported kUInt bits 16",
 * naming no field.  Checked against the torch module itself (torch.uint16
 * exists from 2.3 on) rather than a list of versions.  0, or -1 with a
 * ValueError naming the field. */
static int
check_torch_dtypes(const LoaderObject *self, const rf_schema *schema)
{
	PyObject *torch = PyImport_ImportModule("torch");
	if (!torch)
		return -1;
	int rc = 0;
	for (uint32_t i = 0; i < schema->nfields && rc == 0; i++) {
		const rf_field *f = &schema->fields[i];
		if (self->cfg.fields) {
			size_t k;
			for (k = 0; k < self->cfg.nfields; k++)
				if (!strcmp(self->cfg.fields[k], f->name))
					break;
			if (k == self->cfg.nfields)
				continue;
		}
		/* Delivered as int32 inputs and targets. */
		if (self->cfg.tokens == RF_TOKENS_INPUTS_TARGETS && !strcmp(f->name, "tokens"))
			continue;
		const char *tname = torch_dtype_name(f->dtype);
		if (!tname || PyObject_HasAttrString(torch, tname))
			continue;
		PyObject *ver = PyObject_GetAttrString(torch, "__version__");
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError,
			     "field '%s' is %s, which this PyTorch (%S) cannot hold (it has no "
			     "torch.%s): leave the field out with fields=, or pass tensors=\"dlpack\" "
			     "and read it with numpy.asarray or numpy.from_dlpack",
			     f->name, rf_dtype_name(f->dtype), ver ? ver : Py_None, tname);
		Py_XDECREF(ver);
		rc = -1;
	}
	Py_DECREF(torch);
	return rc;
}

/* ---- mixtures: Loader([ringfeed.Source(path, weight=, name=), ...]) ----
 * 1 when `arg` is a non-empty list or tuple of objects with .path and
 * .weight (cfg->sources set, *samples the included sources' samples: a
 * mixture epoch), 0 when it is not, -1 with an exception.  The weights are
 * checked by the library at open (a negative or NaN weight names its
 * source). */
static int
sources_arg(LoaderObject *self, PyObject *arg, uint64_t *samples)
{
	if (!(PyList_Check(arg) || PyTuple_Check(arg)) || PySequence_Size(arg) == 0)
		return 0;
	Py_ssize_t n = PySequence_Size(arg);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_GetItem(arg, i);
		int is = it && PyObject_HasAttrString(it, "weight") && PyObject_HasAttrString(it, "path");
		Py_XDECREF(it);
		if (!is) {
			if (i == 0)
				return 0; /* plain paths */
			PyErr_Format(PyExc_TypeError, "paths: item %zd is not a ringfeed.Source (give "
				     "either paths or sources, not both)", i);
			return -1;
		}
	}
	if (n > RF_SOURCES_MAX) {
		PyErr_Format(PyExc_ValueError, "%zd sources, at most %d", n, RF_SOURCES_MAX);
		return -1;
	}
	if (!self->keep && !(self->keep = PyList_New(0)))
		return -1;
	self->sources = PyMem_Calloc((size_t)n, sizeof(*self->sources));
	if (!self->sources) {
		PyErr_NoMemory();
		return -1;
	}
	*samples = 0;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_GetItem(arg, i);
		PyObject *p = it ? PyObject_GetAttrString(it, "path") : NULL;
		PyObject *w = it ? PyObject_GetAttrString(it, "weight") : NULL;
		PyObject *nm = it ? PyObject_GetAttrString(it, "name") : NULL;
		PyObject *pb = NULL, *nb = NULL;
		double wv = w ? PyFloat_AsDouble(w) : -1;
		int ok = p && w && !(wv == -1 && PyErr_Occurred()) && PyUnicode_FSConverter(p, &pb) &&
			 PyList_Append(self->keep, pb) == 0;
		if (ok && nm && nm != Py_None) {
			nb = PyUnicode_Check(nm) ? PyUnicode_AsUTF8String(nm) : NULL;
			ok = nb && PyList_Append(self->keep, nb) == 0;
			if (!nb && !PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "Source.name must be a str or None");
		}
		if (ok) {
			self->sources[i].path = PyBytes_AsString(pb);
			self->sources[i].weight = wv;
			self->sources[i].name = nb ? PyBytes_AsString(nb) : NULL;
		}
		Py_XDECREF(pb);
		Py_XDECREF(nb);
		Py_XDECREF(it);
		Py_XDECREF(p);
		Py_XDECREF(w);
		Py_XDECREF(nm);
		if (!ok) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_TypeError, "source %zd: bad path or weight", i);
			return -1;
		}
		/* Its samples (for len()) and, for tensors="torch", dtypes. */
		rf_dataset *ds = NULL;
		rf_dataset_config dcfg;
		rf_dataset_config_init(&dcfg);
		dcfg.log = rfpy_log;
		const char *sp = self->sources[i].path;
		int rc;
		char msg[2048];
		Py_BEGIN_ALLOW_THREADS
		rc = rf_dataset_open(&ds, &sp, 1, &dcfg);
		if (rc < 0)
			snprintf(msg, sizeof(msg), "source '%s' (%zd): %s",
				 self->sources[i].name ? self->sources[i].name : sp, i,
				 rf_dataset_last_open_error());
		Py_END_ALLOW_THREADS
		if (rc < 0) {
			rfpy_raise(rc, "Loader", msg);
			return -1;
		}
		if (wv > 0)
			*samples += rf_dataset_samples(ds);
		rc = i == 0 && self->to_tensor ? check_torch_dtypes(self, rf_dataset_schema(ds)) : 0;
		rf_dataset_close(&ds);
		if (rc < 0)
			return -1;
	}
	self->cfg.sources = self->sources;
	self->cfg.nsources = (size_t)n;
	return 1;
}

int
rfpy_loader_init_args(LoaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"paths", "batch_size", "fields", "shuffle", "seed", "epoch",
				 "rank", "world", "device", "depth", "pinned_bytes", "drop_last",
				 "window", "pinning", "io_depth", "direct", "decode_threads",
				 "verify", "var_bytes", "map", "tokens", "tensors", "on_error",
				 "skip_limit", "cache_dir", "cache_bytes", "inplace", NULL};
	PyObject *paths_arg, *fields_arg = Py_None, *rank_arg = Py_None, *world_arg = Py_None,
		 *device_arg = NULL, *batch_arg, *shuffle_arg = NULL, *seed_arg = NULL,
		 *epoch_arg = NULL, *depth_arg = NULL, *pinned_arg = NULL, *window_arg = NULL,
		 *pinning_arg = NULL, *io_depth_arg = NULL, *threads_arg = NULL,
		 *var_bytes_arg = NULL, *tokens_arg = NULL, *tensors_arg = NULL,
		 *on_error_arg = NULL, *skip_limit_arg = NULL, *cache_dir_arg = Py_None,
		 *cache_bytes_arg = NULL;
	const char *pinning = "ring", *tokens = "stored", *tensors = "dlpack", *on_error = "raise";
	unsigned long long seed = 0, epoch = 0, pinned_bytes = 0, var_bytes = 0;
	long long batch_size = 0, depth = 2, window = 0, io_depth = 0, decode_threads = 0;
	long long skip_limit = 0;
	int drop_last = 1, direct = -1, verify = 1, map = 0, inplace = 0;
	PyObject *direct_arg = Py_None;
	size_t npaths;

	/* images= (loader_images.c): taken out before the others are parsed. */
	PyObject *images_arg, *kw_rest;
	if (rfpy_images_split(kwargs, &images_arg, &kw_rest) < 0)
		return -1;
	if (kw_rest)
		kwargs = kw_rest; /* released at the end of the call, by the block below */
	PyObject *kw_hold = kw_rest;
	/* Every argument converted here, so that a TypeError or OverflowError
	 * names it (PyArg's formats name a keyword argument by its position). */
	int parsed = PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOOOOOOpOOOOOpOpOOOOOOp:Loader",
					 kwlist, &paths_arg, &batch_arg, &fields_arg, &shuffle_arg,
					 &seed_arg, &epoch_arg, &rank_arg, &world_arg,
					 &device_arg, &depth_arg, &pinned_arg, &drop_last,
					 &window_arg, &pinning_arg, &io_depth_arg, &direct_arg,
					 &threads_arg, &verify, &var_bytes_arg, &map, &tokens_arg,
					 &tensors_arg, &on_error_arg, &skip_limit_arg,
					 &cache_dir_arg, &cache_bytes_arg, &inplace);
	Py_XDECREF(kw_hold);
	if (!parsed)
		return -1;
	const struct { PyObject *arg; const char *name; long long *v, lo, hi; } ints[] = {
		{batch_arg, "batch_size", &batch_size, 1, 1LL << 30},
		{depth_arg, "depth", &depth, 1, RF_DEPTH_MAX - RFPY_SPARE_BUFFERS},
		{window_arg, "window", &window, 0, RF_WINDOW_MAX},
		{io_depth_arg, "io_depth", &io_depth, 0, RF_IO_DEPTH_MAX},
		{threads_arg, "decode_threads", &decode_threads, 0, RF_DECODE_THREADS_MAX},
		{skip_limit_arg, "skip_limit", &skip_limit, 0, UINT32_MAX},
	};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (ints[i].arg && rfpy_arg_int(ints[i].arg, ints[i].name, ints[i].lo, ints[i].hi,
						ints[i].v) < 0)
			return -1;
	const struct { PyObject *arg; const char *name; unsigned long long *v; } u64s[] = {
		{seed_arg, "seed", &seed}, {epoch_arg, "epoch", &epoch},
		{pinned_arg, "pinned_bytes", &pinned_bytes}, {var_bytes_arg, "var_bytes", &var_bytes},
	};
	for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++)
		if (u64s[i].arg && rfpy_arg_u64(u64s[i].arg, u64s[i].name, u64s[i].v) < 0)
			return -1;
	char sbuf[4][64];
	const struct { PyObject *arg; const char *name; const char **v; } strs[] = {
		{pinning_arg, "pinning", &pinning}, {tokens_arg, "tokens", &tokens},
		{tensors_arg, "tensors", &tensors}, {on_error_arg, "on_error", &on_error},
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (!strs[i].arg)
			continue;
		if (!PyUnicode_Check(strs[i].arg)) {
			PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", strs[i].name,
				     rfpy_type_name(strs[i].arg));
			return -1;
		}
		if (!(*strs[i].v = rfpy_utf8(strs[i].arg, sbuf[i], sizeof(sbuf[i]))))
			return -1;
	}
	enum rf_shuffle shuffle;
	if (parse_shuffle(shuffle_arg, &shuffle) < 0)
		return -1;
	/* None: let the library choose (O_DIRECT unless the dataset fits in
	 * a quarter of the available memory). */
	if (direct_arg != Py_None) {
		direct = PyObject_IsTrue(direct_arg);
		if (direct < 0)
			return -1;
	}
	if (self->busy && !(self->core && rfpy_core_forked(self->core))) {
		PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
		return -1;
	}
	/* A second __init__ starts over. */
	struct core *old = self->core;
	self->core = NULL;
	rfpy_core_retire(old);
	rfpy_loader_free_config(self);
	self->closed = 0;

	rf_config *cfg = &self->cfg;
	rf_config_init(cfg);
	cfg->batch_size = (uint32_t)batch_size;
	cfg->depth = (uint32_t)depth;
	cfg->drop_last = drop_last;
	cfg->epochs = 0; /* epochs are Python passes: the stream runs until closed */
	cfg->direct = direct;
	cfg->verify = verify;
	cfg->map = map;
	cfg->skip_limit = (uint32_t)skip_limit;
	if (!strcmp(on_error, "skip")) {
		cfg->on_error = RF_ON_ERROR_SKIP;
	} else if (strcmp(on_error, "raise")) {
		PyErr_Format(PyExc_ValueError, "on_error must be \"raise\" or \"skip\", not \"%s\"",
			     on_error);
		return -1;
	}
	if (!strcmp(tokens, "inputs_targets")) {
		cfg->tokens = RF_TOKENS_INPUTS_TARGETS;
	} else if (strcmp(tokens, "stored")) {
		PyErr_Format(PyExc_ValueError, "tokens must be \"stored\" or \"inputs_targets\", "
			     "not \"%s\"", tokens);
		return -1;
	}
	/* Batches of torch tensors: torch.from_dlpack on each array (no
	 * copy; on the consumer's current stream for CUDA). */
	if (!strcmp(tensors, "torch")) {
		PyObject *torch = PyImport_ImportModule("torch");
		if (!torch) {
			if (PyErr_ExceptionMatches(PyExc_ImportError)) {
				PyErr_Clear();
				PyErr_SetString(PyExc_ImportError, "tensors=\"torch\" needs PyTorch "
						"(pip install torch), which is not installed");
			}
			return -1;
		}
		self->to_tensor = PyObject_GetAttrString(torch, "from_dlpack");
		Py_DECREF(torch);
		if (!self->to_tensor)
			return -1;
	} else if (strcmp(tensors, "dlpack")) {
		PyErr_Format(PyExc_ValueError, "tensors must be \"dlpack\" or \"torch\", "
			     "not \"%s\"", tensors);
		return -1;
	}
	/* Batches in place are read-only, and PyTorch has no read-only
	 * tensors (a write would fault in the map): torch tensors are always
	 * of batches copied by the loader's workers. */
	cfg->inplace = inplace && !self->to_tensor ? RF_INPLACE_ON : RF_INPLACE_OFF;
	cfg->var_bytes = var_bytes;
	if (pinned_bytes) {
		/* The ring takes what the memory plan needs, up to pinned_bytes:
		 * a budget beyond the machine's memory would be taken at face
		 * value by the plan (and a window sized from it), silently. */
		long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
		unsigned long long phys = pages > 0 && psize > 0 ?
			(unsigned long long)pages * (unsigned long long)psize : 0;
		if (phys && pinned_bytes > phys) {
			PyErr_Format(PyExc_ValueError,
				     "pinned_bytes %llu is more than this machine's physical memory "
				     "(%llu bytes): page-locked memory cannot be paged out; give at "
				     "most a fraction of it (the default is at most 256 MiB)",
				     pinned_bytes, phys);
			return -1;
		}
		cfg->pinned_bytes = pinned_bytes;
	}
	if (io_depth)
		cfg->io_depth = (uint32_t)io_depth;
	if (decode_threads)
		cfg->decode_threads = (uint32_t)decode_threads;
	cfg->log = rfpy_log;
	if (rf_pinning_parse(pinning, &cfg->pinning) < 0) {
		PyErr_Format(PyExc_ValueError, "pinning must be \"ring\" or \"transient\", not \"%s\"",
			     pinning);
		return -1;
	}
	if (device_arg && parse_device(device_arg, cfg) < 0)
		return -1;
	/* torch.from_dlpack of a CUDA array fails at the first batch, with
	 * torch's "Torch not compiled with CUDA enabled", when PyTorch has no
	 * CUDA: an explicit CUDA device is refused here, by name.  ("auto" is
	 * checked once the library has chosen, below.) */
	int torch_cuda = -2; /* not asked yet */
	if (self->to_tensor && cfg->device == RF_DEVICE_CUDA) {
		if ((torch_cuda = torch_has_cuda()) < 0)
			return -1;
		if (!torch_cuda) {
			PyErr_SetString(PyExc_ValueError,
					"tensors=\"torch\" with a CUDA device, but this PyTorch cannot "
					"use CUDA (torch.cuda.is_available() is False: a CPU-only "
					"build, or no driver it can use): pass device=\"cpu\", or "
					"install a CUDA build of PyTorch");
			return -1;
		}
	}

	self->shuffle = shuffle;
	cfg->shuffle = shuffle;
	self->seed = seed;
	cfg->seed = seed;
	cfg->window = (uint32_t)window;
	long long rank = -1, world = -1;
	if (rank_arg != Py_None && rfpy_arg_int(rank_arg, "rank", 0, RF_WORLD_MAX - 1, &rank) < 0)
		return -1;
	if (world_arg != Py_None && rfpy_arg_int(world_arg, "world", 1, RF_WORLD_MAX, &world) < 0)
		return -1;
	if (rank >= 0 && world >= 1 && rank >= world) {
		PyErr_Format(PyExc_ValueError, "rank=%lld, world=%lld: need 0 <= rank < world",
			     rank, world);
		return -1;
	}
	cfg->rank = (int32_t)rank;
	cfg->world = (int32_t)world;
	/* The rank and world the library will use (an unset one from the
	 * launcher's environment): len() and the resume check need the same
	 * world.  What the library would refuse at open (a malformed RANK, a
	 * launcher's rank >= its world) is refused here, before the dataset
	 * is opened, as the library's error. */
	uint32_t r, w;
	char rmsg[512];
	const char *rsrc = "default";
	int rrc = rf_rank_resolve(cfg->rank, cfg->world, &r, &w, &rsrc, rmsg, sizeof(rmsg));
	if (rrc < 0) {
		rfpy_raise(rrc, "Loader", rmsg);
		return -1;
	}
	self->rank = r;
	self->world = w;
	self->rank_source = rsrc;

	/* The strings the config points to, kept for reopening. */
	int mix = 0;
	uint64_t mix_samples = 0;
	if ((mix = sources_arg(self, paths_arg, &mix_samples)) < 0)
		return -1;
	if (!mix) {
		if (rfpy_paths(paths_arg, &self->keep, &self->paths, &npaths) < 0)
			return -1;
		cfg->paths = self->paths;
		cfg->npaths = npaths;
	}
	if (fields_arg != Py_None) {
		if (PyUnicode_Check(fields_arg)) {
			PyErr_SetString(PyExc_TypeError, "fields must be a sequence of names");
			return -1;
		}
		PyObject *seq = PySequence_Fast(fields_arg, "fields must be a sequence of names");
		if (!seq)
			return -1;
		Py_ssize_t nf = PySequence_Size(seq);
		self->fields = PyMem_Calloc((size_t)nf + 1, sizeof(char *));
		if (!self->fields) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			return -1;
		}
		for (Py_ssize_t i = 0; i < nf; i++) {
			PyObject *name = PySequence_GetItem(seq, i);
			PyObject *b = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8String(name) : NULL;
			Py_XDECREF(name);
			if (!b || PyList_Append(self->keep, b) < 0) {
				Py_XDECREF(b);
				Py_DECREF(seq);
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_TypeError, "field names must be str");
				return -1;
			}
			self->fields[i] = PyBytes_AsString(b);
			Py_DECREF(b);
		}
		Py_DECREF(seq);
		cfg->fields = self->fields;
		cfg->nfields = (size_t)nf;
	}
	/* images= (rf_config.images), kept in self->keep. */
	if (images_arg && rfpy_images_config(images_arg, self->keep, cfg) < 0)
		return -1;

	/* The sample count, for len(). */
	rf_dataset *ds = NULL;
	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.log = rfpy_log;
	int rc = 0;
	char msg[2048];
	if (mix)
		goto counted;
	Py_BEGIN_ALLOW_THREADS
	rc = rf_dataset_open(&ds, cfg->paths, cfg->npaths, &dcfg);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", rf_dataset_last_open_error());
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		rfpy_raise(rc, "Loader", msg);
		return -1;
	}
	self->samples = rf_dataset_samples(ds);
	if (self->to_tensor && check_torch_dtypes(self, rf_dataset_schema(ds)) < 0) {
		rf_dataset_close(&ds);
		return -1;
	}
	rf_dataset_close(&ds);
counted:
	if (mix)
		self->samples = mix_samples;
	if (rf_epoch_batches(self->samples, (uint32_t)batch_size, self->rank, self->world,
			     drop_last, &self->nbatches) < 0) {
		PyErr_SetString(PyExc_ValueError, "batch_size, rank or world out of range");
		return -1;
	}
	/* A mixture without a positive weight: the library says what is wrong
	 * with the weights (every weight 0, a negative one) when it opens. */
	int weighted = !mix;
	for (size_t i = 0; mix && i < cfg->nsources; i++)
		weighted |= cfg->sources[i].weight > 0;
	/* A loader with nothing to deliver is a mistake, not a training loop
	 * that should run no step in silence. */
	if (self->nbatches == 0 && weighted) {
		PyErr_Format(PyExc_ValueError,
			     "no batch to deliver: %llu samples, batch_size %lld x world %u%s "
			     "leave this rank no batch per epoch; lower batch_size%s",
			     (unsigned long long)self->samples, batch_size, self->world,
			     drop_last ? " with drop_last=True" : "",
			     drop_last ? " or pass drop_last=False" : "");
		return -1;
	}
	if (cfg->world < 0 && warn_batch_system_rank(self) < 0)
		return -1;
	/* cache_dir= (str or os.PathLike), cache_bytes=: a local cache of a
	 * remote dataset's chunks (docs/remote.md "Cache"). */
	if (cache_dir_arg != Py_None) {
		PyObject *b = NULL;
		if (!PyUnicode_FSConverter(cache_dir_arg, &b))
			return -1;
		if (PyList_Append(self->keep, b) < 0) {
			Py_DECREF(b);
			return -1;
		}
		cfg->cache_dir = PyBytes_AsString(b);
		Py_DECREF(b);
	}
	if (cache_bytes_arg) {
		unsigned long long cb;
		if (rfpy_arg_u64(cache_bytes_arg, "cache_bytes", &cb) < 0)
			return -1;
		cfg->cache_bytes = cb;
	}
	if (rfpy_loader_open_core(self, epoch, NULL, 0) < 0)
		return -1;
	/* device="auto" chose a CUDA device that this PyTorch cannot use:
	 * deliver on the host instead, and say so. */
	if (self->to_tensor && self->core->device.device_type == kDLCUDA && torch_cuda == -2) {
		if ((torch_cuda = torch_has_cuda()) < 0)
			return -1;
		if (!torch_cuda) {
			if (PyErr_WarnFormat(rfpy_Warning, 1,
					     "device=\"auto\" found CUDA device %d, but this PyTorch "
					     "cannot use CUDA (torch.cuda.is_available() is False): "
					     "tensors=\"torch\" batches are delivered on the host "
					     "(device=\"cpu\" says so without this warning)",
					     (int)self->core->device.device_id) < 0)
				return -1;
			cfg->device = RF_DEVICE_HOST;
			cfg->device_index = -1;
			return rfpy_loader_open_core(self, epoch, NULL, 0);
		}
	}
	return 0;
}
