/* SPDX-License-Identifier: MIT */
/*
 * Description: streams packed datasets (raw and zstd, fixed and variable
 * fields, one and several shards) through the loader with batch sizes that
 * do and do not divide the dataset, keeping and dropping the last partial
 * batch, over a table of pipeline settings (decode threads, depth, pin
 * mode, a small pinned budget, a small variable-field region), and checks
 * that exactly the packed bytes arrive, in order.
 *
 * Argument "host": the host backend; the consumer reads each batch after
 * rf_batch_wait(b, NULL).  Argument "cuda": the CUDA backend on the cudart
 * emulator (RINGFEED_CUDART; a slow link with jitter set by the test's
 * environment): the consumer's "training step" is a host function on its
 * own stream that checks the batch, declared to the emulator as a reader of
 * the batch's device memory, then released on that stream.  Afterwards the
 * emulator must report zero hazards and nothing left allocated, registered
 * or created.
 */
#include "config.h"
#include "lt.h"
#include "lt_gpu.h"
#include "../cuda-emulator/emulator.h"

struct dataset {
	const char *name;
	uint64_t n;
	int zstd;
	uint64_t chunk_bytes, shard_bytes;
	int with_var;
};

static const struct dataset datasets[] = {
	{"fixed-raw", 1000, 0, 4096, 0, 0},
	{"var-zstd-shards", 1500, 1, 8192, 20000, 1},
	{"var-raw-shards", 777, 0, 4096, 12288, 1},
	{"fixed-zstd-shards", 999, 1, 2048, 16384, 0},
};

struct setting {
	uint32_t batch;
	int drop_last;
	uint32_t threads;
	uint32_t depth;
	enum rf_pinning pin;
	uint64_t pinned;
	uint64_t var_bytes;
	const char *fields; /* comma-separated, NULL = all */
};

static const struct setting settings[] = {
	{32, 0, 2, 2, RF_PINNING_RING, 1 << 20, 0, NULL},
	{50, 1, 1, 2, RF_PINNING_RING, 1 << 20, 0, NULL},
	{7, 1, 3, 3, RF_PINNING_TRANSIENT, 64 << 10, 0, NULL},
	{1, 0, 2, 1, RF_PINNING_RING, 32 << 10, 0, "img,y"},
	{333, 0, 2, 2, RF_PINNING_TRANSIENT, 8 << 20, 0, NULL},
	{32, 0, 2, 2, RF_PINNING_RING, 1 << 20, 64, NULL}, /* variable region closes batches early */
	/* One fixed field: batches inside a raw chunk go straight from the
	 * read slot; those across chunks are gathered. */
	{16, 0, 2, 2, RF_PINNING_RING, 256 << 10, 0, "img"},
	{61, 0, 3, 3, RF_PINNING_TRANSIENT, 1 << 20, 0, "x"},
	{5, 1, 1, 2, RF_PINNING_RING, 64 << 10, 0, "y"},
	/* decode_threads 0: the library chooses (1..8). */
	{40, 0, 0, 2, RF_PINNING_RING, 1 << 20, 0, NULL},
};

static struct rfemu_api emu;
static int use_cuda;
/* "gpu" (the gpu suite, lt_gpu.h): batches checked after copying them back. */
static int use_gpu;
static int use_map; /* LT_MAP=1: chunks read through memory maps (rf_config.map) */
static void *stream;
static _Atomic uint64_t host_bad, host_batches;

struct step_ctx {
	rf_batch b;
	rf_batch_field f[16];
	uint64_t first;
};

/* The consumer's "training step", run by the emulator on the consumer's
 * stream after the batch's ready event.  It reads the batch as a kernel
 * would: the batch as it was handed out (taken before its release), its
 * pointers turned into the emulator's view of device memory, which the host
 * cannot dereference itself. */
static void
check_on_stream(void *arg)
{
	struct step_ctx *c = arg;
	atomic_fetch_add(&host_bad, lt_check_batch(&c->b, c->first));
	atomic_fetch_add(&host_batches, 1);
	free(c);
}

static int
run(const char *dir, const struct dataset *ds, const struct setting *st)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s*.rfs", dir, ds->name);
	const char *paths[] = {path};
	const char *fields[8];
	char fbuf[64];
	size_t nf = 0;
	if (st->fields) {
		snprintf(fbuf, sizeof(fbuf), "%s", st->fields);
		for (char *t = strtok(fbuf, ","); t; t = strtok(NULL, ","))
			fields[nf++] = t;
	}

	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.fields = st->fields ? fields : NULL;
	cfg.nfields = nf;
	cfg.batch_size = st->batch;
	cfg.drop_last = st->drop_last;
	cfg.decode_threads = st->threads;
	cfg.depth = st->depth;
	cfg.pinning = st->pin;
	cfg.pinned_bytes = st->pinned;
	cfg.var_bytes = st->var_bytes;
	cfg.device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg.map = use_map;
	cfg.log = lt_log;

	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s B=%u: open: %s: %s\n", ds->name, st->batch, rf_strerror(rc),
			rf_loader_last_open_error());
		return 1;
	}
	uint64_t next_first = 0, batches = 0, bad = 0, early = 0;
	atomic_store(&host_bad, 0);
	atomic_store(&host_batches, 0);
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->index == batches);
		LT_CHECK(b->first_sample == next_first);
		if (b->first_sample != next_first)
			fprintf(stderr, "batch %llu: first sample %llu, expected %llu (%u samples)\n",
				(unsigned long long)b->index, (unsigned long long)b->first_sample,
				(unsigned long long)next_first, b->samples);
		LT_CHECK(b->epoch == 0);
		LT_CHECK(b->samples >= 1 && b->samples <= st->batch);
		if (b->samples < st->batch && b->first_sample + b->samples < ds->n)
			early++;
		LT_CHECK(b->nfields == (st->fields ? nf : (ds->with_var ? 4u : 3u)));
		/* The batch is the loader's again once released: read it before. */
		next_first += b->samples;
		batches++;
		if (use_gpu) {
			bad += lt_check_batch_any(b, b->first_sample);
			LT_CHECK(rf_loader_release(ld, b, lt_gpu_stream) == 0);
		} else if (use_cuda) {
			LT_CHECK(rf_batch_wait(b, stream) == 0);
			for (uint32_t f = 0; f < b->nfields; f++) {
				const rf_batch_field *bf = &b->fields[f];
				if (bf->bytes)
					LT_CHECK(emu.host_func_reads(stream, bf->data, bf->bytes) == 0);
				if (bf->offsets)
					LT_CHECK(emu.host_func_reads(stream, bf->offsets,
								     (b->samples + 1) * 8) == 0);
			}
			struct step_ctx *c = calloc(1, sizeof(*c));
			LT_CHECK(c != NULL && b->nfields <= 16);
			c->b = *b;
			c->b.fields = c->f;
			for (uint32_t f = 0; f < b->nfields && f < 16; f++) {
				const rf_batch_field *bf = &b->fields[f];
				c->f[f] = *bf;
				if (bf->bytes)
					c->f[f].data = emu.device_view(bf->data, bf->bytes);
				if (bf->offsets)
					c->f[f].offsets = emu.device_view(bf->offsets,
									  (b->samples + 1) * 8);
				LT_CHECK(c->f[f].data != NULL);
				LT_CHECK(!bf->offsets || c->f[f].offsets != NULL);
			}
			c->first = b->first_sample;
			LT_CHECK(emu.launch_host_func(stream, check_on_stream, c) == 0);
			LT_CHECK(rf_loader_release(ld, b, stream) == 0);
		} else {
			LT_CHECK(rf_batch_wait(b, NULL) == 0);
			bad += lt_check_batch(b, b->first_sample);
			LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		}
	}
	if (rc < 0)
		fprintf(stderr, "%s B=%u: next: %s: %s\n", ds->name, st->batch, rf_strerror(rc),
			rf_loader_errmsg(ld));
	LT_CHECK(rc == 0);
	/* The end is sticky. */
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b == NULL);
	uint64_t want = st->drop_last && !(st->var_bytes && ds->with_var)
				? ds->n / st->batch * st->batch : ds->n;
	if (st->drop_last && st->var_bytes && ds->with_var)
		LT_CHECK(next_first <= ds->n);
	else
		LT_CHECK(next_first == want);
	if (st->var_bytes && ds->with_var)
		LT_CHECK(early > 0); /* the small region did close batches early */
	else
		LT_CHECK(early == 0);
	if (use_cuda && !use_gpu) {
		LT_CHECK(emu.stream_synchronize(stream) == 0);
		bad += atomic_load(&host_bad);
		LT_CHECK(atomic_load(&host_batches) == batches);
	}
	if (bad)
		fprintf(stderr, "%s B=%u: %llu values differ\n", ds->name, st->batch,
			(unsigned long long)bad);
	LT_CHECK(bad == 0);

	rf_stats s = {.size = sizeof(s)};
	LT_CHECK(rf_loader_stats(ld, &s) == 0);
	LT_CHECK(s.batches == batches);
	LT_CHECK(s.samples == next_first);
	LT_CHECK(s.pinned_peak <= st->pinned);
	/* The host device hands batches out in their ring slots (no device
	 * buffers) unless told to copy or the ring is too small to lend depth
	 * slots: every setting here with 1 MiB or more has room. */
	int host_copy = RF_TEST_HOOKS && getenv("RINGFEED_HOST_COPY") &&
			!strcmp(getenv("RINGFEED_HOST_COPY"), "1");
	if (use_cuda || host_copy)
		LT_CHECK(!s.in_place);
	else if (st->pinned >= 1 << 20)
		LT_CHECK(s.in_place);
	LT_CHECK(s.device_peak == (s.in_place ? 0 : (uint64_t)st->depth * s.batch_bytes));
	LT_CHECK(s.held == 0 && s.held_max <= st->depth);
	LT_CHECK(s.io_engine[0] != 0);
	if (st->threads)
		LT_CHECK(s.decode_threads == st->threads);
	else
		LT_CHECK(s.decode_threads >= 1 && s.decode_threads <= 8);
	LT_CHECK((strcmp(s.io_engine, "mmap") == 0) == use_map);
	LT_CHECK(!use_map || !s.io_direct);
	/* Maps: the ring holds batches only, never a chunk's bytes. */
	LT_CHECK(!use_map || s.slot_bytes == (s.batch_bytes + 4095) / 4096 * 4096);
	/* Staging slots are a batch each, read slots (slot_bytes) a chunk. */
	LT_CHECK(s.stage_slot_bytes == (s.batch_bytes + 4095) / 4096 * 4096);
	LT_CHECK(s.pinned_peak <= (uint64_t)s.slots_total *
				  (s.slot_bytes > s.stage_slot_bytes ? s.slot_bytes : s.stage_slot_bytes));
	LT_CHECK(s.slots_used_max <= s.slots_total);
	LT_CHECK(!use_map || s.reads_inflight_max == 0);
	rf_loader_close(&ld);
	LT_CHECK(ld == NULL);
	return 0;
}

int
main(int argc, char **argv)
{
	use_gpu = argc > 1 && !strcmp(argv[1], "gpu");
	use_cuda = use_gpu || (argc > 1 && !strcmp(argv[1], "cuda"));
	use_map = getenv("LT_MAP") && !strcmp(getenv("LT_MAP"), "1");
	if (use_gpu) {
		int rc = lt_gpu_init();
		if (rc)
			return rc;
	} else if (use_cuda) {
		if (rfemu_api_load(&emu, NULL) != 0) {
			fprintf(stderr, "RINGFEED_CUDART is not the cudart emulator: skipped\n");
			return LT_SKIP;
		}
		if (emu.stream_create(&stream) != 0)
			return 1;
	}
	char *dir = lt_tmpdir(use_gpu ? "stream-gpu" : use_cuda ? "stream-cuda" : "stream-host");
	for (size_t i = 0; i < sizeof(datasets) / sizeof(datasets[0]); i++) {
		const struct dataset *d = &datasets[i];
		int rc = lt_pack(dir, d->name, d->n, d->zstd, d->chunk_bytes, d->shard_bytes,
				 d->with_var);
		if (rc < 0) {
			fprintf(stderr, "pack %s: %s\n", d->name, rf_strerror(rc));
			lt_rmtree(dir);
			return 1;
		}
	}
	for (size_t i = 0; i < sizeof(datasets) / sizeof(datasets[0]); i++)
		for (size_t j = 0; j < sizeof(settings) / sizeof(settings[0]); j++) {
			const struct setting *s = &settings[j];
			if (s->fields && datasets[i].with_var == 0 && strstr(s->fields, "tok"))
				continue;
			int before = lt_failures;
			if (run(dir, &datasets[i], s))
				lt_failures++;
			if (lt_failures != before)
				fprintf(stderr, "FAILED: dataset %s, setting %zu\n", datasets[i].name, j);
		}
	lt_rmtree(dir);

	lt_gpu_fini();
	if (use_cuda && !use_gpu) {
		LT_CHECK(emu.stream_destroy(stream) == 0);
		struct rfemu_counters c;
		memset(&c, 0, sizeof(c));
		LT_CHECK(emu.get_counters(&c, sizeof(c)) == 0);
		if (c.hazards_total) {
			for (int k = 0; k < RFEMU_HAZARD_COUNT; k++)
				if (c.hazards[k])
					fprintf(stderr, "hazard %s: %llu\n", emu.hazard_name(k),
						(unsigned long long)c.hazards[k]);
		}
		LT_CHECK(c.hazards_total == 0);
		LT_CHECK(c.device_bytes == 0 && c.live_allocations == 0);
		LT_CHECK(c.registered_bytes == 0 && c.live_registered_ranges == 0);
		LT_CHECK(c.live_streams == 0 && c.live_events == 0);
		LT_CHECK(c.pageable_h2d == 0);
		LT_CHECK(c.bytes_h2d > 0);
	}
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
