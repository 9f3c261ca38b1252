/* SPDX-License-Identifier: MIT */
/*
 * Opening a loader (config defaults, device, reader engine or maps, device
 * buffers, threads) and tearing it down.
 */
#include "loader/internal.h"

static _Thread_local char open_error[RF_ERRMSG_MAX];

/* ------------------------------------------------------- config, open */

RF_API void
rf_config_init(rf_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->batch_size = 32;
	cfg->drop_last = 0;
	cfg->epochs = 1;
	cfg->device = RF_DEVICE_AUTO;
	cfg->device_index = RF_DEVICE_INDEX_AUTO;
	cfg->depth = 2;
	cfg->pinned_bytes = 256ull << 20;
	cfg->pinning = RF_PINNING_RING;
	cfg->io_depth = 32;
	cfg->direct = -1;
	cfg->decode_threads = 0; /* auto: see rf_ld_decode_threads_auto */
	cfg->verify = 1;
	cfg->var_bytes = 0;
	cfg->shuffle = RF_SHUFFLE_NONE;
	cfg->rank = -1;
	cfg->world = -1;
}

RF_API const char *
rf_loader_last_open_error(void)
{
	return open_error;
}

static int
open_device(rf_loader *ld)
{
	rf_diag *d = &ld->dev_diag;
	int rc;
	/* The backend's failure is passed on through ld->diag, which logs
	 * it: logged once, not once per diag. */
	d->errors_quiet = 1;
	switch (ld->cfg.device) {
	case RF_DEVICE_HOST:
		rc = rf_device_open_host(&ld->dev, d);
		break;
	case RF_DEVICE_CUDA:
		rc = rf_device_open_cuda(&ld->dev, ld->cfg.device_index, d);
		break;
	case RF_DEVICE_AUTO:
		/* A probe: no runtime or no device is an answer here, not an
		 * error, so it is logged once below at info level.  A usage
		 * error (a malformed LOCAL_RANK, a bad index) is not an
		 * answer: host would hide it (an index the runtime does not
		 * have is one); nor is the failure of a runtime named by
		 * RINGFEED_CUDART.  An index with no runtime or no device at
		 * all is the probe's answer: host. */
		rc = rf_device_open_cuda(&ld->dev, ld->cfg.device_index, d);
		const char *cudart = getenv("RINGFEED_CUDART");
		int chosen = cudart && *cudart;
		if (rc < 0 && rc != RF_EUSAGE && !chosen) {
			rf_log(&ld->diag, RF_LOG_INFO, "device auto: no CUDA device (%s); using host",
			       d->msg);
			rc = rf_device_open_host(&ld->dev, d);
		}
		break;
	default:
		d->errors_quiet = 0;
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: device %d is not auto, host or cuda",
			       (int)ld->cfg.device);
	}
	d->errors_quiet = 0;
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", d->msg);
	if (ld->dev->why[0])
		rf_log(&ld->diag, RF_LOG_INFO, "device: %s; cuda:%d (%s)", ld->dev->desc,
		       ld->dev->index, ld->dev->why);
	else
		rf_log(&ld->diag, RF_LOG_INFO, "device: %s", ld->dev->desc);
	return 0;
}

static int
alloc_device_buffers(rf_loader *ld)
{
	const struct rf_device_ops *ops = ld->dev->ops;
	int rc = ops->stream_create(ld->dev, &ld->copy.stream);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: creating the copy stream failed: %s",
			       ld->dev_diag.msg);
	/* Where the backend offers it (host): an idle copy stream copies in
	 * this thread instead of handing each small batch to a worker and
	 * back. */
	if (ops->stream_set_inline)
		(void)ops->stream_set_inline(ld->dev, ld->copy.stream, 1);
	ld->delivery.dbufs = calloc(ld->resolved.depth, sizeof(*ld->delivery.dbufs));
	ld->delivery.rq = calloc(ld->resolved.depth, sizeof(*ld->delivery.rq));
	if (!ld->delivery.dbufs || !ld->delivery.rq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint32_t i = 0; i < ld->resolved.depth; i++) {
		struct dbuf *b = &ld->delivery.dbufs[i];
		b->ld = ld;
		b->fields = calloc(ld->layout.nparts, sizeof(*b->fields));
		if (ld->nvar)
			b->host_off = calloc((uint64_t)ld->nvar * (ld->layout.batch + 1), 8);
		if (!b->fields || (ld->nvar && !b->host_off))
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
		rc = ld->mem.in_place ? 0 : ops->alloc(ld->dev, ld->layout.bytes, &b->dptr);
		if (rc < 0) {
			b->dptr = NULL;
			char a[32], bb[32];
			rf_ld_fmt_size(a, sizeof a, ld->layout.bytes * ld->resolved.depth);
			rf_ld_fmt_size(bb, sizeof bb, ld->layout.bytes);
			return rf_fail(&ld->diag, RF_EMEMPLAN,
				       "memory plan: allocating device buffer %u of %u (%s each, %s "
				       "in all for batch_size %u) failed on %s: %s; lower batch_size "
				       "or depth", i + 1, ld->resolved.depth, bb, a, ld->cfg.batch_size,
				       ld->dev->desc, ld->dev_diag.msg);
		}
		if (!ld->mem.in_place)
			ld->stats.device_bytes += ld->layout.bytes;
		rc = ops->event_create(ld->dev, &b->copy_event);
		if (rc == 0)
			rc = ops->event_create(ld->dev, &b->rel_event);
		if (rc < 0)
			return rf_fail(&ld->diag, rc, "loader: creating events failed: %s",
				       ld->dev_diag.msg);
	}
	return 0;
}

int
rf_ld_start_threads(rf_loader *ld)
{
	int rc;
	ld->stats.ncpu = 2 + ld->nworkers;
	for (unsigned i = 0; i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		rc = pthread_create(&w->thread, NULL, rf_ld_worker_main, w);
		if (rc)
			return rf_fail(&ld->diag, -rc, "loader: cannot start a decode thread");
		w->started = 1;
		pthread_mutex_lock(&ld->mu);
		ld->stats.cpu[2 + i].thread = w->thread;
		ld->stats.cpu[2 + i].live = 1;
		pthread_mutex_unlock(&ld->mu);
	}
	rc = pthread_create(&ld->copy.thread, NULL, rf_ld_copy_main, ld);
	if (rc)
		return rf_fail(&ld->diag, -rc, "loader: cannot start the copy thread");
	ld->copy.started = 1;
	pthread_mutex_lock(&ld->mu);
	ld->stats.cpu[1].thread = ld->copy.thread;
	ld->stats.cpu[1].live = 1;
	pthread_mutex_unlock(&ld->mu);
	rc = pthread_create(&ld->reader.thread, NULL, ld->full.on ? rf_ld_full_main : rf_ld_reader_main, ld);
	if (rc)
		return rf_fail(&ld->diag, -rc, "loader: cannot start the reader thread");
	ld->reader.started = 1;
	pthread_mutex_lock(&ld->mu);
	ld->stats.cpu[0].thread = ld->reader.thread;
	ld->stats.cpu[0].live = 1;
	pthread_mutex_unlock(&ld->mu);
	return 0;
}

/* The reader's engine over the pinned ring, and every shard added to it. */
static int
open_io(rf_loader *ld)
{
	rf_io_config icfg;
	rf_io_config_init(&icfg);
	icfg.queue_depth = ld->mem.qd;
	icfg.direct = ld->resolved.direct;
	/* Registered with io_uring, the ring's pages are locked for as long
	 * as the loader lives: not with transient pinning, whose point is to
	 * lock only the slots being copied. */
	if (ld->cfg.pinning != RF_PINNING_TRANSIENT) {
		icfg.region = rf_ring_base(ld->ring);
		icfg.region_bytes = rf_ring_bytes(ld->ring);
	}
	int rc = rf_io_open(&ld->io, &icfg, &ld->io_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->io_diag.msg);
	ld->files = calloc(ld->nshards ? ld->nshards : 1, sizeof(*ld->files));
	if (!ld->files)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	if ((rc = rf_fd_reserve(ld->nshards, "loader", &ld->diag)) < 0)
		return rc;
	for (size_t i = 0; i < ld->nshards; i++) {
		rc = rf_io_add_file(ld->io, rf_dataset_shard_path(ld->ds, i), &ld->files[i]);
		if (rc < 0)
			return rf_fail(&ld->diag, rc, "%s", ld->io_diag.msg);
	}
	snprintf(ld->stats.io_engine, sizeof(ld->stats.io_engine), "%s", rf_io_engine(ld->io));
	ld->stats.io_direct = rf_io_direct(ld->io);
	return 0;
}

/* Map mode: every read slot number (n_stage and up, past the ring's own)
 * free, the lowest taken first. */
static void
map_slots_reset(rf_loader *ld)
{
	if (!ld->map.on)
		return;
	ld->map.free_n = 0;
	memset(ld->map.free_is, 0, ld->mem.nslots);
	for (unsigned i = ld->mem.nslots; i-- > ld->mem.n_ring;) {
		ld->map.free_is[i] = 1;
		ld->map.free[ld->map.free_n++] = i;
	}
}

/* Map mode (rf_config.map): every shard mapped whole, read-only, shared
 * with the page cache; no reader engine. */
static int
open_maps(rf_loader *ld)
{
	long pg = sysconf(_SC_PAGESIZE);
	ld->map.page = pg > 0 ? (size_t)pg : 4096;
	ld->map.populate = 1;
	size_t n = ld->nshards ? ld->nshards : 1;
	ld->map.base = calloc(n, sizeof(*ld->map.base));
	ld->map.len = calloc(n, sizeof(*ld->map.len));
	ld->map.rbase = calloc(ld->mem.nslots, sizeof(*ld->map.rbase));
	ld->map.free = calloc(ld->mem.nslots, sizeof(*ld->map.free));
	ld->map.free_is = calloc(ld->mem.nslots, 1);
	ld->map.mvec_len = (size_t)(rf_dataset_max_stored_span(ld->ds) / ld->map.page) + 2;
	ld->map.mvec = malloc(ld->map.mvec_len);
	if (!ld->map.base || !ld->map.len || !ld->map.rbase || !ld->map.free || !ld->map.free_is || !ld->map.mvec)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	map_slots_reset(ld);
	for (size_t i = 0; i < ld->nshards; i++) {
		const char *path = rf_dataset_shard_path(ld->ds, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = -errno;
			return rf_fail(&ld->diag, e, "%s: cannot open: %s", path, rf_strerror(e));
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			int e = -errno;
			close(fd);
			return rf_fail(&ld->diag, e, "%s: cannot map: %s", path, rf_strerror(e));
		}
		if (st.st_size <= 0) {
			close(fd);
			return rf_fail(&ld->diag, RF_ETRUNCATED, "%s: cannot map: the file is empty",
				       path);
		}
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		int e = m == MAP_FAILED ? -errno : 0;
		close(fd);
		if (e)
			return rf_fail(&ld->diag, e, "%s: cannot map %" PRId64 " bytes: %s", path,
				       (int64_t)st.st_size, rf_strerror(e));
		ld->map.base[i] = m;
		ld->map.len[i] = (uint64_t)st.st_size;
	}
	snprintf(ld->stats.io_engine, sizeof(ld->stats.io_engine), "mmap");
	ld->stats.io_direct = 0;
	return 0;
}

/*
 * Every check of the user's settings that needs no dataset, before
 * anything is opened, allocated, page-locked or started; the settings that
 * need the dataset (fields, tokens, full shuffling's needs, the resume blob,
 * the memory plan) are checked right after it is opened, still before the
 * ring is page-locked (loader_open).  The config is never changed: what is
 * resolved from it goes to ld->resolved.
 */
static int
config_check(rf_loader *ld)
{
	const rf_config *cfg = &ld->cfg;
	if (cfg->npaths == 0 || !cfg->paths)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: no dataset paths given (paths %s, "
			       "npaths %zu)", cfg->paths ? "set" : "NULL", cfg->npaths);
	/* A count without its array is a mistake, not "the default". */
	if (!cfg->fields && cfg->nfields)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: nfields is %zu but fields is NULL "
			       "(NULL with nfields 0 loads every field)", cfg->nfields);
	if (!cfg->resume && cfg->resume_len)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: resume_len is %zu but resume is NULL",
			       cfg->resume_len);
	if (cfg->batch_size == 0)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: batch_size must be at least 1");
	if (cfg->depth > RF_DEPTH_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: depth %u is more than %d", cfg->depth,
			       RF_DEPTH_MAX);
	if (cfg->pinning != RF_PINNING_RING && cfg->pinning != RF_PINNING_TRANSIENT)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: pinning %d is not ring or transient",
			       (int)cfg->pinning);
	if (cfg->epochs && cfg->epoch > UINT64_MAX - cfg->epochs)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: epoch %" PRIu64 " + epochs %u "
			       "overflows the epoch counter", cfg->epoch, cfg->epochs);
	if (cfg->device != RF_DEVICE_AUTO && cfg->device != RF_DEVICE_HOST &&
	    cfg->device != RF_DEVICE_CUDA)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: device %d is not auto, host or cuda",
			       (int)cfg->device);
	if (cfg->tokens != RF_TOKENS_STORED && cfg->tokens != RF_TOKENS_INPUTS_TARGETS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: tokens = %d is not a token layout",
			       (int)cfg->tokens);

	/* A saved position continues in its own order: its shuffle mode (and
	 * window, unless one is set) shape the loader, so they are taken
	 * before it is laid out.  A blob that is not whole is refused when it
	 * is loaded, with the reason. */
	ld->resolved.shuffle = cfg->shuffle;
	enum rf_plan_mode rmode;
	uint32_t rwin;
	if (cfg->resume && rf_plan_state_peek(cfg->resume, cfg->resume_len, &rmode, &rwin) == 0)
		ld->resolved.shuffle = rf_ld_shuffle_of_mode(rmode);
	if ((unsigned)ld->resolved.shuffle > RF_SHUFFLE_FULL)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle %d is not none, chunks, window "
			       "or full", (int)ld->resolved.shuffle);
	int full = ld->resolved.shuffle == RF_SHUFFLE_FULL;
	if (cfg->map && cfg->direct == 1)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: map = 1 reads through the page "
			       "cache: it cannot be combined with direct = 1");
	if (full && cfg->tokens == RF_TOKENS_INPUTS_TARGETS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout is "
			       "not available with shuffle full, which reads values straight into "
			       "the batch: use shuffle window");

	rf_diag_init(&ld->plan_diag, cfg->log, cfg->log_user);
	ld->plan_diag.errors_quiet = 1; /* each failure is passed on through ld->diag */
	ld->resolved.rank_source = "";
	int rc = rf_plan_resolve_rank(cfg->rank, cfg->world, NULL, NULL, &ld->resolved.rank,
				      &ld->resolved.world, &ld->resolved.rank_source,
				      &ld->plan_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->plan_diag.msg);

	ld->resolved.depth = cfg->depth ? cfg->depth : 2;
	ld->resolved.io_depth = cfg->io_depth == 0 ? 32 : cfg->io_depth;
	if (ld->resolved.io_depth > RF_IO_DEPTH_MAX) /* what a ring is allocated for at open */
		ld->resolved.io_depth = RF_IO_DEPTH_MAX;
	ld->resolved.decode_threads = cfg->decode_threads > RF_DECODE_THREADS_MAX
					      ? RF_DECODE_THREADS_MAX : cfg->decode_threads;
	ld->resolved.seed = cfg->seed;
	ld->resolved.epoch = cfg->epoch;
	ld->full.on = full;
	ld->map.on = cfg->map && !full;
	ld->resolved.direct = ld->map.on ? 0 : cfg->direct;
	return 0;
}

/* The settings that depend on the dataset: W, the read mode, the decode
 * threads. */
static int
resolve_settings(rf_loader *ld)
{
	const rf_config *cfg = &ld->cfg;
	if (ld->resolved.shuffle == RF_SHUFFLE_WINDOW) {
		/* The window is part of the order: a function of the dataset
		 * (and of rf_config.window, or the resume blob's) alone, which
		 * the ring must hold; never sized from the budget, which may
		 * differ between ranks. */
		uint32_t want = cfg->window;
		enum rf_plan_mode rmode;
		uint32_t rwin;
		if (want == 0 && cfg->resume &&
		    rf_plan_state_peek(cfg->resume, cfg->resume_len, &rmode, &rwin) == 0 &&
		    rmode == RF_PLAN_WINDOW)
			want = rwin;
		uint64_t raw = 0;
		for (uint64_t ci = 0; ci < ld->nchunks; ci++)
			raw += ld->chunks[ci].raw_bytes;
		uint32_t w = want ? want
				  : rf_plan_default_window(ld->nchunks ? raw / ld->nchunks : 0);
		uint32_t wnd = rf_plan_window_in_force(w, ld->nchunks);
		if (wnd > RF_PLAN_WINDOW_MAX)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: window %u: at most %u chunks",
				       want, RF_PLAN_WINDOW_MAX);
		ld->resolved.window = wnd;
	}
	rf_ld_choose_direct(ld);
	/* Decode workers: a raw buffer each only when some chunk is compressed. */
	int need_raw = 0;
	for (uint64_t c = 0; c < ld->nchunks && !need_raw; c++)
		need_raw = ld->chunks[c].codec != RF_CODEC_NONE;
	if (ld->resolved.decode_threads == 0)
		ld->resolved.decode_threads = rf_ld_decode_threads_auto(need_raw);
	ld->nworkers = ld->full.on ? 0 : ld->resolved.decode_threads; /* full: nothing to decode */
	return 0;
}

/* The fields, by name or all: their schema indices into sel. */
static int
select_fields(rf_loader *ld, uint32_t *sel, uint32_t *nselp)
{
	const rf_config *cfg = &ld->cfg;
	uint32_t nsel = 0;
	if (cfg->fields) {
		if (cfg->nfields == 0 || cfg->nfields > RF_MAX_FIELDS)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: %zu fields selected (1..%d)",
				       cfg->nfields, RF_MAX_FIELDS);
		for (size_t i = 0; i < cfg->nfields; i++) {
			int k = cfg->fields[i] ? rf_schema_find(ld->schema, cfg->fields[i]) : -1;
			if (k < 0) {
				/* The names there are, so a typo shows at once. */
				char have[256];
				size_t o = 0;
				have[0] = 0;
				for (uint32_t f = 0; f < ld->schema->nfields; f++) {
					int w = snprintf(have + o, sizeof(have) - o, "%s%s",
							 f ? ", " : "", ld->schema->fields[f].name);
					if (w < 0 || (size_t)w >= sizeof(have) - o) {
						snprintf(have + (o < sizeof(have) - 6 ? o : sizeof(have) - 6),
							 6, ", ...");
						break;
					}
					o += (size_t)w;
				}
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: no field named '%s' in %s; "
					       "its fields are: %s",
					       cfg->fields[i] ? cfg->fields[i] : "(null)",
					       rf_dataset_shard_path(ld->ds, 0), have);
			}
			for (uint32_t j = 0; j < nsel; j++)
				if (sel[j] == (uint32_t)k)
					return rf_fail(&ld->diag, RF_EUSAGE,
						       "loader: field '%s' selected twice", cfg->fields[i]);
			sel[nsel++] = (uint32_t)k;
		}
	} else {
		for (uint32_t i = 0; i < ld->schema->nfields; i++)
			sel[nsel++] = i;
	}
	for (uint32_t i = 0; i < nsel; i++)
		ld->nvar += ld->schema->fields[sel[i]].var_dim >= 0;
	*nselp = nsel;
	return 0;
}

/*
 * Open in three parts: the settings (config_check, then what needs the
 * dataset: fields, W, full shuffling's needs, the order and the resume
 * blob); then the memory plan against the device; then the resources (the
 * ring is page-locked, the reader engine, device buffers, threads).  A
 * setting the loader refuses is refused before any memory is page-locked.
 */
static int
loader_open(rf_loader *ld)
{
	rf_config *cfg = &ld->cfg;
	int rc = config_check(ld);
	if (rc < 0)
		return rc;

	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.verify = cfg->verify;
	dcfg.log = cfg->log;
	dcfg.log_user = cfg->log_user;
	rc = rf_dataset_open(&ld->ds, cfg->paths, cfg->npaths, &dcfg);
	if (rc < 0) {
		snprintf(ld->diag.msg, sizeof(ld->diag.msg), "%s", rf_dataset_last_open_error());
		return rc;
	}
	ld->schema = rf_dataset_schema(ld->ds);
	ld->chunks = rf_dataset_chunk_table(ld->ds);
	ld->nchunks = rf_dataset_chunks(ld->ds);
	ld->nshards = rf_dataset_shards(ld->ds);
	/* The loader reads through the reader's descriptors or maps, never
	 * through the index's: one descriptor per shard, not two. */
	rf_dataset_close_files(ld->ds);

	uint32_t sel[RF_MAX_FIELDS], nsel = 0;
	rc = select_fields(ld, sel, &nsel);
	if (rc < 0)
		return rc;
	/* The strings and arrays are the caller's: keep no pointer to them. */
	cfg->paths = NULL;
	cfg->fields = NULL;
	rc = resolve_settings(ld);
	if (rc < 0)
		return rc;
	if (ld->full.on) {
		rc = rf_ld_full_check(ld, sel, nsel);
		if (rc < 0)
			return rc;
	}
	/* The order (and a resume blob's checks): before the device. */
	ld->gather.cur_slot = -1;
	rc = rf_ld_open_plan(ld);
	if (rc < 0)
		return rc;

	rc = open_device(ld);
	if (rc < 0)
		return rc;
	rc = rf_ld_plan_memory(ld, sel, nsel);
	if (rc < 0)
		return rc;

	rc = rf_ring_open(&ld->ring, ld->mem.ring_slot_bytes, ld->mem.n_ring, ld->dev,
			  cfg->pinning == RF_PINNING_TRANSIENT ? RF_PIN_TRANSIENT : RF_PIN_RING,
			  &ld->ring_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc == -ENOMEM ? RF_EMEMPLAN : rc, "%s", ld->ring_diag.msg);

	if (!ld->full.on) /* full mode: set by the memory plan */
		ld->mem.qd = ld->resolved.io_depth < ld->mem.n_read ? ld->resolved.io_depth
								    : ld->mem.n_read;
	rc = ld->map.on ? open_maps(ld) : open_io(ld);
	if (rc < 0)
		return rc;

	rc = alloc_device_buffers(ld);
	if (rc < 0)
		return rc;

	int need_raw = 0;
	for (uint64_t c = 0; c < ld->nchunks && !need_raw; c++)
		need_raw = ld->chunks[c].codec != RF_CODEC_NONE;
	ld->workers = calloc(ld->nworkers ? ld->nworkers : 1, sizeof(*ld->workers));
	if (!ld->workers)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (unsigned i = 0; i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		w->ld = ld;
		rf_diag_init(&w->diag, cfg->log, cfg->log_user);
		if (rf_decoder_init(&w->dec, rf_dataset_max_raw_bytes(ld->ds), need_raw) < 0)
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for decode buffers");
	}

	/* The pipeline window and the queues. */
	ld->nwin = ld->mem.n_read + ld->nworkers + 1;
	ld->win = calloc(ld->nwin, sizeof(*ld->win));
	ld->slot_refs = calloc(ld->mem.nslots, sizeof(*ld->slot_refs));
	ld->copy.pin_refs = calloc(ld->mem.nslots, sizeof(*ld->copy.pin_refs));
	if (!ld->slot_refs || !ld->copy.pin_refs)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	/* Not from a map: a batch handed out in place must be writable memory,
	 * and a device copy wants pinned memory. */
	ld->gather.direct_ok = ld->layout.nparts == 1 && !ld->layout.part[0].var &&
			       ld->layout.part[0].off == 0 && !ld->map.on;
	ld->sq_cap = ld->mem.n_stage + 2;
	ld->sq = calloc(ld->sq_cap, sizeof(*ld->sq));
	if (!ld->win || !ld->sq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->gather.cur_slot = -1;

	return rf_ld_start_threads(ld);
}

RF_API int
rf_loader_open(rf_loader **out, const rf_config *cfg)
{
	open_error[0] = 0;
	if (!out)
		return -EINVAL;
	*out = NULL;
	/* The size is the only way to tell an initialised config from stack
	 * garbage, and a garbage size says nothing about how many bytes the
	 * caller owns: accept only the sizes a released header has had (this
	 * one: fields added later come out of `reserved`, so the size never
	 * grows) and read nothing before that is known. */
	if (!cfg) {
		snprintf(open_error, sizeof(open_error), "loader: config is NULL");
		return RF_EUSAGE;
	}
	if (cfg->size != sizeof(rf_config)) {
		snprintf(open_error, sizeof(open_error),
			 "loader: config size %" PRIu32 ", expected %zu (call rf_config_init)",
			 cfg->size, sizeof(rf_config));
		return RF_EUSAGE;
	}
	for (size_t i = 0; i < sizeof(cfg->reserved); i++) {
		/* A setting from a newer header, which this library would
		 * otherwise ignore in silence. */
		if (cfg->reserved[i]) {
			snprintf(open_error, sizeof(open_error),
				 "loader: config has settings this library (%s) does not know "
				 "(reserved bytes are not 0)", rf_version_string());
			return RF_EUSAGE;
		}
	}
	rf_loader *ld = calloc(1, sizeof(*ld));
	if (!ld)
		return -ENOMEM;
	memcpy(&ld->cfg, cfg, sizeof(rf_config));
	ld->cfg.size = sizeof(rf_config);
	rf_diag_init(&ld->diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->io_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->dev_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->ring_diag, cfg->log, cfg->log_user);
	rf_diag_init(&ld->copy_diag, cfg->log, cfg->log_user);
	clock_gettime(CLOCK_MONOTONIC, &ld->stats.t_open);
	ld->gather.cur_slot = -1;
	rf_ld_fork_note(ld);

	if (pthread_mutex_init(&ld->mu, NULL)) {
		free(ld);
		return -ENOMEM;
	}
	pthread_cond_init(&ld->reader_cv, NULL);
	pthread_cond_init(&ld->work_cv, NULL);
	pthread_cond_init(&ld->stage_cv, NULL);
	pthread_cond_init(&ld->copy_cv, NULL);
	{
		/* The consumer's timed wait (rf_loader_next_timeout) measures
		 * on the monotonic clock: a wall-clock step must not stretch it. */
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ld->cons_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	ld->sync_init = 1;

	int rc = loader_open(ld);
	if (rc < 0) {
		snprintf(open_error, sizeof(open_error), "%s", ld->diag.msg);
		rf_ld_loader_free(ld);
		return rc;
	}
	*out = ld;
	return 0;
}

/* ------------------------------------------------------------- teardown */

/* Stop the pipeline threads and wait for them: reads and copies in flight
 * are waited for by the threads themselves before they return. */
void
rf_ld_pipeline_stop(rf_loader *ld)
{
	if (ld->sync_init) {
		pthread_mutex_lock(&ld->mu);
		ld->stop = 1;
		pthread_cond_broadcast(&ld->reader_cv);
		pthread_cond_broadcast(&ld->work_cv);
		pthread_cond_broadcast(&ld->stage_cv);
		pthread_cond_broadcast(&ld->copy_cv);
		pthread_cond_broadcast(&ld->cons_cv);
		pthread_mutex_unlock(&ld->mu);
	}
	if (ld->reader.started)
		pthread_join(ld->reader.thread, NULL);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		if (ld->workers[i].started)
			pthread_join(ld->workers[i].thread, NULL);
	if (ld->copy.started)
		pthread_join(ld->copy.thread, NULL);
	ld->reader.started = ld->copy.started = 0;
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		ld->workers[i].started = 0;
}

/* Back to an empty pipeline (threads stopped, the consumer holds nothing):
 * every slot free, no batch staged or ready, no error.  Device buffers a
 * consumer released keep their state: the copy stage waits for their
 * events before reuse. */
void
rf_ld_pipeline_reset(rf_loader *ld)
{
	/* Zero-copy: slots lent to released batches come back with the rest
	 * below, once the consumer's work on them is done. */
	for (uint32_t i = 0; ld->mem.in_place && i < ld->resolved.depth; i++) {
		struct dbuf *b = &ld->delivery.dbufs[i];
		if (b->state == DB_RELEASED &&
		    ld->dev->ops->event_sync(ld->dev, b->rel_event) == 0)
			b->state = DB_FREE;
		b->zc_src = 0;
	}
	ld->delivery.lent = 0;
	if (ld->window.on) {
		/* Raw buffers back to the pool; slot references are reset below. */
		for (uint32_t i = 0; i < ld->window.cap; i++)
			ld->window.tab[i].slot = -1;
		rf_ld_window_drop_below(ld, UINT64_MAX);
		ld->window.lo = ld->window.hi = 0;
		ld->window.epoch_done = 0;
	}
	for (unsigned i = 0; i < ld->mem.n_ring; i++)
		rf_ring_release(ld->ring, i); /* already free: ignored */
	map_slots_reset(ld);
	memset(ld->slot_refs, 0, ld->mem.nslots * sizeof(*ld->slot_refs));
	memset(ld->copy.pin_refs, 0, ld->mem.nslots * sizeof(*ld->copy.pin_refs));
	memset(ld->win, 0, ld->nwin * sizeof(*ld->win));
	for (uint32_t i = 0; i < ld->resolved.depth; i++)
		if (ld->delivery.dbufs[i].state != DB_RELEASED)
			ld->delivery.dbufs[i].state = DB_FREE;
	ld->stop = ld->failed = ld->fail_code = 0;
	ld->fail_msg[0] = 0;
	ld->plan_done = ld->end_pushed = 0;
	ld->total_steps = 0;
	ld->next_seq = ld->next_dispatch = ld->next_gather = 0;
	ld->read_held = ld->stage_held = ld->reader.inflight = 0;
	ld->sq_head = ld->sq_len = ld->sq_issued = 0;
	ld->copy_failed = 0;
	ld->copy_lost = 0;
	ld->delivery.rq_head = ld->delivery.rq_len = 0;
	ld->delivery.eos = ld->delivery.final_code = 0;
	ld->delivery.final_msg[0] = 0;
	ld->gather.cur_slot = -1;
}

void
rf_ld_loader_free(rf_loader *ld)
{
	rf_ld_pipeline_stop(ld);

	if (ld->dev) {
		const struct rf_device_ops *ops = ld->dev->ops;
		/* Nothing may still read or write a device buffer when it is
		 * freed: released batches' events, then the copy stream. */
		for (uint32_t i = 0; ld->delivery.dbufs && i < ld->resolved.depth; i++)
			if (ld->delivery.dbufs[i].state == DB_RELEASED && ld->delivery.dbufs[i].rel_event)
				ops->event_sync(ld->dev, ld->delivery.dbufs[i].rel_event);
		if (ld->copy.stream)
			ops->stream_sync(ld->dev, ld->copy.stream);
		for (uint32_t i = 0; ld->delivery.dbufs && i < ld->resolved.depth; i++) {
			struct dbuf *b = &ld->delivery.dbufs[i];
			if (b->copy_event)
				ops->event_destroy(ld->dev, b->copy_event);
			if (b->rel_event)
				ops->event_destroy(ld->dev, b->rel_event);
			if (b->dptr && !ld->mem.in_place) /* else it points into the ring */
				ops->free(ld->dev, b->dptr);
			free(b->fields);
			free(b->host_off);
		}
		if (ld->copy.stream)
			ops->stream_destroy(ld->dev, ld->copy.stream);
	}
	free(ld->delivery.dbufs);
	free(ld->delivery.rq);
	rf_io_close(&ld->io);
	for (size_t i = 0; ld->map.base && i < ld->nshards; i++)
		if (ld->map.base[i])
			munmap(ld->map.base[i], (size_t)ld->map.len[i]);
	free(ld->map.base);
	free(ld->map.len);
	free(ld->map.rbase);
	free(ld->map.free);
	free(ld->map.free_is);
	free(ld->map.mvec);
	rf_ring_close(&ld->ring);
	rf_device_close(&ld->dev);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++)
		rf_decoder_fini(&ld->workers[i].dec);
	free(ld->workers);
	rf_plan_destroy(&ld->reader.plan);
	rf_plan_destroy(&ld->gather.plan);
	rf_plan_destroy(&ld->splan);
	for (uint32_t i = 0; ld->window.tab && i < ld->window.cap; i++)
		free(ld->window.tab[i].raw);
	for (uint32_t i = 0; ld->window.pool && i < ld->window.pool_n; i++)
		free(ld->window.pool[i]);
	free(ld->window.tab);
	free(ld->window.pool);
	free(ld->gather.items);
	free(ld->win);
	free(ld->slot_refs);
	free(ld->copy.pin_refs);
	free(ld->sq);
	free(ld->files);
	rf_dataset_close(&ld->ds);
	if (ld->sync_init) {
		pthread_cond_destroy(&ld->reader_cv);
		pthread_cond_destroy(&ld->work_cv);
		pthread_cond_destroy(&ld->stage_cv);
		pthread_cond_destroy(&ld->copy_cv);
		pthread_cond_destroy(&ld->cons_cv);
		pthread_mutex_destroy(&ld->mu);
	}
	free(ld);
}
