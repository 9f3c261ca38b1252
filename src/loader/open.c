/* SPDX-License-Identifier: MIT */
/*
 * Opening a loader (config defaults, device, reader engine or maps, device
 * buffers, threads) and tearing it down.
 */
#include "loader/internal.h"
#include "io/http.h"

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
	cfg->pinned_bytes = 0; /* the process's default budget */
	cfg->pinning = RF_PINNING_RING;
	cfg->io_depth = 0; /* the library's choice: 32 (settings.c) */
	cfg->direct = -1;
	cfg->decode_threads = 0; /* auto: see decode_threads_auto (settings.c) */
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
			rf_memplan_fmt_size(a, sizeof a, ld->layout.bytes * ld->resolved.depth);
			rf_memplan_fmt_size(bb, sizeof bb, ld->layout.bytes);
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
	icfg.cache_dir = ld->cfg.cache_dir;
	icfg.cache_bytes = ld->cfg.cache_bytes;
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
		/* The cache key's version: the shard's size and, in format 3, its
		 * pack id, so that a dataset repacked into shards of the same
		 * sizes never reads the old pack's entries. */
		uint64_t ver[2] = {rf_dataset_shard_bytes(ld->ds, i), 0};
		rf_shard_info si;
		if (rf_dataset_shard_info(ld->ds, i, &si) == 0)
			ver[1] = si.pack_id;
		rf_io_cache_file(ld->io, ld->files[i],
				 ver[1] ? XXH3_64bits(ver, sizeof ver) : ver[0]);
	}
	/* Full shuffling from memory copies from maps of the shards (the
	 * reads are its fallback, should they fail to map). */
	snprintf(ld->stats.io_engine, sizeof(ld->stats.io_engine), "%s",
		 ld->full.mem ? "mmap" : rf_io_engine(ld->io));
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

/* Map mode (rf_config.map): every shard mapped whole by the mmap engine
 * (src/io/mmap.c), read-only, shared with the page cache; no reader engine. */
static int
open_maps(rf_loader *ld)
{
	ld->map.rbase = calloc(ld->mem.nslots, sizeof(*ld->map.rbase));
	ld->map.free = calloc(ld->mem.nslots, sizeof(*ld->map.free));
	ld->map.free_is = calloc(ld->mem.nslots, 1);
	if (!ld->map.rbase || !ld->map.free || !ld->map.free_is)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	map_slots_reset(ld);
	int rc = rf_io_map_open(&ld->map.m, ld->nshards, rf_dataset_max_stored_span(ld->ds),
				&ld->diag);
	for (size_t i = 0; rc == 0 && i < ld->nshards; i++) {
		const char *p = rf_dataset_shard_path(ld->ds, i);
		if (rf_is_url(p))
			rc = rf_fail(&ld->diag, RF_EUSAGE, "map needs local files: shard %zu is the URL "
				     "%s; read it without map (map = 0, bench without --map), or "
				     "copy the dataset to a local disk", i, p);
		else
			rc = rf_io_map_add(ld->map.m, i, p);
	}
	if (rc < 0)
		return rc;
	snprintf(ld->stats.io_engine, sizeof(ld->stats.io_engine), "mmap");
	ld->stats.io_direct = 0;
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
	int rc = rf_ld_config_check(ld);
	if (rc < 0)
		return rc;

	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.verify = cfg->verify;
	dcfg.log = cfg->log;
	dcfg.log_user = cfg->log_user;
	if (cfg->nsources) {
		rc = rf_ld_mix_open(ld, &dcfg);
		cfg->sources = NULL; /* the caller's: copied */
		if (rc < 0)
			return rc;
	} else if ((rc = rf_dataset_open(&ld->ds, cfg->paths, cfg->npaths, &dcfg)) < 0) {
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
	rc = rf_ld_select_fields(ld, sel, &nsel);
	if (rc < 0)
		return rc;
	rc = rf_ld_image_setup(ld, sel, nsel);
	if (rc < 0)
		return rc;
	/* The strings and arrays are the caller's: keep no pointer to them. */
	cfg->paths = NULL;
	cfg->fields = NULL;
	rc = rf_ld_resolve_settings(ld);
	if (rc < 0)
		return rc;
	rf_ld_window_choose_mem(ld, sel, nsel);
	if (ld->full.on)
		ld->nworkers = 0;
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
	rf_ld_inplace_setup(ld);

	struct rf_ring_shape shape = {
		.slot_bytes = {ld->mem.stage_bytes, ld->mem.read_bytes},
		.nslots = {ld->mem.n_stage + ld->mem.nbounce, ld->map.on ? 0 : ld->mem.n_read},
	};
	rc = rf_ring_open_shape(&ld->ring, &shape, ld->dev,
				cfg->pinning == RF_PINNING_TRANSIENT ? RF_PIN_TRANSIENT : RF_PIN_RING,
				&ld->ring_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc == -ENOMEM ? RF_EMEMPLAN : rc, "%s", ld->ring_diag.msg);

	rc = ld->map.on ? open_maps(ld) : open_io(ld);
	if (rc < 0)
		return rc;

	rc = alloc_device_buffers(ld);
	if (rc < 0)
		return rc;

	ld->workers = calloc(ld->nworkers ? ld->nworkers : 1, sizeof(*ld->workers));
	if (!ld->workers)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (unsigned i = 0; i < ld->nworkers; i++) {
		struct worker *w = &ld->workers[i];
		w->ld = ld;
		rf_diag_init(&w->diag, cfg->log, cfg->log_user);
		if (rf_decoder_init(&w->dec, rf_dataset_max_raw_bytes(ld->ds), ld->compressed) < 0)
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for decode buffers");
		if (rf_ld_image_worker_init(ld, w) < 0)
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory for image buffers");
	}

	rf_ld_window_choose_sums(ld);
	rf_ld_chunk_steps_init(ld);

	/* The pipeline window and the queues. */
	ld->nwin = ld->mem.n_read + ld->nworkers + 1;
	ld->win = calloc(ld->nwin, sizeof(*ld->win));
	if (rf_ld_image_reads_init(ld) < 0)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->slot_refs = calloc(ld->mem.nslots, sizeof(*ld->slot_refs));
	ld->copy.pin_refs = calloc(ld->mem.nslots, sizeof(*ld->copy.pin_refs));
	if (!ld->slot_refs || !ld->copy.pin_refs)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	/* A direct batch of one field from a read slot: not from a map, where
	 * a device copy would want pinned memory and a batch lent as it is
	 * writable memory; from a map, batches go out read-only instead, on the
	 * host device (inplace.c). */
	ld->gather.direct_ok = (ld->layout.nparts == 1 && !ld->layout.part[0].var &&
				ld->layout.part[0].off == 0 && !ld->map.on && !ld->image) ||
			       ld->gather.inplace_ok;
	ld->sq_cap = ld->mem.n_stage + ld->gather.inplace_stage + 2;
	ld->sq = calloc(ld->sq_cap, sizeof(*ld->sq));
	if (!ld->win || !ld->sq)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->gather.cur_slot = -1;
	rc = rf_ld_fill_setup(ld);
	if (rc < 0)
		return rc;

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
	rf_diag d0;
	rf_diag_init(&d0, NULL, NULL);
	if (RF_CONFIG_SIZE_CHECK(&d0, "loader", cfg, "rf_config_init") < 0) {
		snprintf(open_error, sizeof(open_error), "%s", d0.msg);
		return RF_EUSAGE;
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

	/* mu is held for short spells by two to four threads on a few cores:
	 * a short spin before sleeping spares most of the futex sleeps and
	 * wake-ups that cost the most on a virtual machine. */
	pthread_mutexattr_t mua;
	pthread_mutexattr_init(&mua);
	pthread_mutexattr_settype(&mua, PTHREAD_MUTEX_ADAPTIVE_NP);
	if (pthread_mutex_init(&ld->mu, &mua)) {
		pthread_mutexattr_destroy(&mua);
		free(ld);
		return -ENOMEM;
	}
	pthread_mutexattr_destroy(&mua);
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
		rf_ld_turns_wake_all_locked(ld);
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
	if (ld->mix)
		rf_ld_mix_reset(ld);
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
	ld->read_held = ld->stage_held = ld->inplace_held = ld->reader.inflight = 0;
	ld->sq_head = ld->sq_len = ld->sq_issued = 0;
	ld->copy_failed = 0;
	ld->copy_lost = 0;
	ld->delivery.rq_head = ld->delivery.rq_len = 0;
	ld->delivery.eos = ld->delivery.final_code = 0;
	ld->delivery.final_msg[0] = 0;
	ld->gather.cur_slot = -1;
	rf_ld_fill_reset(ld);
	ld->skip.gathered_epoch = UINT64_MAX; /* batches read ahead are dropped */
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
	rf_io_map_close(&ld->map.m);
	free(ld->map.rbase);
	free(ld->map.free);
	free(ld->map.free_is);
	rf_ring_close(&ld->ring);
	rf_ld_default_pinned_return(ld);
	rf_device_close(&ld->dev);
	for (unsigned i = 0; ld->workers && i < ld->nworkers; i++) {
		rf_decoder_fini(&ld->workers[i].dec);
		rf_ld_image_worker_fini(&ld->workers[i]);
	}
	rf_ld_image_free(ld);
	rf_ld_fill_free(ld);
	free(ld->workers);
	rf_plan_destroy(&ld->reader.plan);
	rf_plan_destroy(&ld->gather.plan);
	rf_plan_destroy(&ld->splan);
	rf_ld_mix_free(ld);
	for (uint32_t i = 0; ld->window.tab && i < ld->window.cap; i++)
		free(ld->window.tab[i].raw);
	for (uint32_t i = 0; ld->window.pool && i < ld->window.pool_n; i++)
		free(ld->window.pool[i]);
	free(ld->window.tab);
	free(ld->window.pool);
	free(ld->skip.zeros);
	free(ld->skip.seen);
	free(ld->skip.gathered);
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
