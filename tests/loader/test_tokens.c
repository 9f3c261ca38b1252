/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_config.tokens = RF_TOKENS_INPUTS_TARGETS on llm.c token
 * shards packed by `ringfeed pack --llmc` (u16 version 1 and u32 version 7
 * shards, raw and zstd, one shard too short for a sample): every batch holds
 * two int32 fields "inputs" and "targets" of shape [n, T], and in file order
 * every row equals what this test builds from the .bin files read directly
 * (rows of T + 1 tokens every T tokens, each shard cut on its own, widened
 * to int32); with chunks and window shuffles every batch equals the stored
 * u16/u32 rows of a loader without the option, widened and split; the
 * batch is sized from the int32 layout; and the open refuses what the
 * layout cannot serve (no field "tokens", a float one, a field named
 * "inputs" besides, shuffle full) with RF_EUSAGE.  `ringfeed cat --tokens`
 * writes the same inputs and targets.
 *
 * Arguments: "host" or "cuda" (the CUDA backend on the cudart emulator:
 * batches are read by a host function on the consumer's stream, declared
 * as a reader of the device memory), then the path of the `ringfeed` tool.
 */
#include "lt.h"
#include "lt_gpu.h"
#include "../cuda-emulator/emulator.h"

#define T 16

static struct rfemu_api emu;
static int use_cuda;
static void *stream;
static const char *tool;

/* A token stream: rows are built from it as llm.c's loader does. */
struct stream {
	uint32_t *tok;   /* widened to u32 */
	uint64_t n;
};

/* The rows the test expects, in file order: int32 [rows][2][T]. */
struct rows {
	int32_t *v;
	uint64_t n;
};

static uint32_t
token(int wide, unsigned shard, uint64_t i)
{
	uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(shard + 7) * 0xBF58476D1CE4E5B9ull;
	h ^= h >> 29;
	/* u16: the whole range (above 32767 too); u32: the whole range,
	 * above INT32_MAX too (delivered as the same bits). */
	return wide ? (uint32_t)(h >> 17) : (uint32_t)(h >> 48);
}

static int
write_bin(const char *path, int wide, unsigned shard, uint64_t ntok)
{
	int32_t header[256];
	memset(header, 0, sizeof(header));
	header[0] = wide ? 20240801 : 20240520;
	header[1] = wide ? 7 : 1;
	header[2] = (int32_t)ntok;
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(header, sizeof(header), 1, f);
	for (uint64_t i = 0; i < ntok; i++) {
		uint32_t v = token(wide, shard, i);
		uint16_t h = (uint16_t)v;
		fwrite(wide ? (void *)&v : (void *)&h, wide ? 4 : 2, 1, f);
	}
	return fclose(f);
}

/* The independent reader: each .bin file parsed from its bytes, cut into
 * rows of T + 1 tokens every T tokens, inputs [0, T) and targets [1, T + 1)
 * widened to int32. */
static void
read_bins(const char *const *paths, size_t n, struct rows *out)
{
	out->v = NULL;
	out->n = 0;
	for (size_t k = 0; k < n; k++) {
		FILE *f = fopen(paths[k], "rb");
		int32_t header[256];
		if (!f || fread(header, sizeof(header), 1, f) != 1) {
			fprintf(stderr, "%s: cannot read\n", paths[k]);
			exit(1);
		}
		int wide = header[0] == 20240801;
		uint64_t ntok = (uint64_t)header[2], tb = wide ? 4 : 2;
		uint8_t *buf = malloc(ntok * tb + 1);
		if (fread(buf, tb, ntok, f) != ntok)
			exit(1);
		fclose(f);
		uint64_t rows = ntok >= T + 1 ? (ntok - 1) / T : 0;
		out->v = realloc(out->v, (out->n + rows) * 2 * T * sizeof(int32_t));
		for (uint64_t r = 0; r < rows; r++) {
			int32_t *dst = out->v + (out->n + r) * 2 * T;
			for (int t = 0; t <= T; t++) {
				uint64_t i = r * T + (uint64_t)t;
				int32_t v;
				if (wide) {
					uint32_t u;
					memcpy(&u, buf + 4 * i, 4);
					v = (int32_t)u;
				} else {
					uint16_t u;
					memcpy(&u, buf + 2 * i, 2);
					v = (int32_t)u;
				}
				if (t < T)
					dst[t] = v;     /* inputs */
				if (t > 0)
					dst[T + t - 1] = v; /* targets */
			}
		}
		out->n += rows;
		free(buf);
	}
}

/* What the consumer saw: the rows in delivery order. */
struct seen {
	int32_t *v;
	uint64_t cap, n;
	_Atomic uint64_t bad;
};

struct step {
	const rf_batch *b;
	rf_batch view; /* cuda: the batch as the emulator's device view shows it */
	rf_batch_field f[4];
	struct seen *s;
	uint64_t at;
};

/* The "training step": checks the descriptors and copies the rows out. */
static void
take_batch(void *arg)
{
	struct step *st = arg;
	const rf_batch *b = st->b;
	uint64_t bad = 0;
	if (b->nfields != 2) {
		atomic_fetch_add(&st->s->bad, 1);
		free(st);
		return;
	}
	for (int k = 0; k < 2; k++) {
		const rf_batch_field *f = &b->fields[k];
		bad += strcmp(f->name, k ? "targets" : "inputs") != 0;
		bad += f->dtype != RF_DTYPE_I32 || f->ndim != 2 || f->var_dim != -1;
		bad += f->shape[0] != b->samples || f->shape[1] != T;
		bad += f->bytes != (uint64_t)b->samples * T * 4 || f->offsets != NULL;
		bad += (uintptr_t)f->data % 256 != 0;
		if (!bad && st->at + b->samples <= st->s->cap)
			for (uint32_t r = 0; r < b->samples; r++)
				memcpy(st->s->v + (st->at + r) * 2 * T + (uint64_t)k * T,
				       (const int32_t *)f->data + (uint64_t)r * T, T * 4);
	}
	if (st->at + b->samples > st->s->cap)
		bad++;
	atomic_fetch_add(&st->s->bad, bad);
	free(st);
}

struct setting {
	const char *pattern;
	uint32_t batch;
	int drop_last;
	enum rf_shuffle shuffle;
	uint32_t threads;
	enum rf_pinning pin;
	uint64_t pinned;
	int map;
};

static rf_config
config(const char *dir, const struct setting *st, const char **path_out, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", dir, st->pattern);
	*path_out = buf;
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = path_out;
	cfg.npaths = 1;
	cfg.batch_size = st->batch;
	cfg.drop_last = st->drop_last;
	cfg.shuffle = st->shuffle;
	cfg.seed = 11;
	cfg.decode_threads = st->threads;
	cfg.pinning = st->pin;
	cfg.pinned_bytes = st->pinned;
	cfg.map = st->map;
	cfg.log = lt_log;
	return cfg;
}

/* The rows a loader without the option delivers with the same settings
 * (host device), widened and split by this test. */
static int
stored_rows(const char *dir, const struct setting *st, struct rows *out)
{
	char buf[512];
	const char *path;
	rf_config cfg = config(dir, st, &path, buf, sizeof(buf));
	cfg.device = RF_DEVICE_HOST;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0)
		return -1;
	out->v = NULL;
	out->n = 0;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		rf_batch_wait(b, NULL);
		const rf_batch_field *f = &b->fields[0];
		int wide = f->dtype != RF_DTYPE_U16;
		out->v = realloc(out->v, (out->n + b->samples) * 2 * T * sizeof(int32_t));
		for (uint32_t r = 0; r < b->samples; r++)
			for (int t = 0; t <= T; t++) {
				int32_t v;
				if (wide) {
					uint32_t u;
					memcpy(&u, (const uint8_t *)f->data + ((uint64_t)r * (T + 1) + t) * 4, 4);
					v = (int32_t)u;
				} else {
					uint16_t u;
					memcpy(&u, (const uint8_t *)f->data + ((uint64_t)r * (T + 1) + t) * 2, 2);
					v = u;
				}
				int32_t *dst = out->v + (out->n + r) * 2 * T;
				if (t < T)
					dst[t] = v;
				if (t > 0)
					dst[T + t - 1] = v;
			}
		out->n += b->samples;
		rf_loader_release(ld, b, NULL);
	}
	rf_loader_close(&ld);
	return rc;
}

static void
run(const char *dir, const struct setting *st, const struct rows *want)
{
	char buf[512];
	const char *path;
	rf_config cfg = config(dir, st, &path, buf, sizeof(buf));
	cfg.device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg.tokens = RF_TOKENS_INPUTS_TARGETS;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s B=%u: open: %s: %s\n", st->pattern, st->batch, rf_strerror(rc),
			rf_loader_last_open_error());
		lt_failures++;
		return;
	}
	struct seen seen = {.cap = want->n};
	seen.v = calloc(want->n ? want->n * 2 * T : 1, sizeof(int32_t));
	const rf_batch *b;
	uint64_t got = 0, batches = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->samples >= 1 && b->samples <= st->batch);
		LT_CHECK(!st->drop_last || b->samples == st->batch);
		struct step *s = malloc(sizeof(*s));
		s->b = b;
		s->s = &seen;
		s->at = got;
		got += b->samples;
		batches++;
		if (use_cuda) {
			LT_CHECK(rf_batch_wait(b, stream) == 0);
			/* The step reads the batch as a kernel would: as it was
			 * handed out, through the emulator's view of device
			 * memory (the host cannot dereference device pointers). */
			s->view = *b;
			s->view.fields = s->f;
			LT_CHECK(b->nfields <= 4);
			for (uint32_t f = 0; f < b->nfields && f < 4; f++) {
				s->f[f] = b->fields[f];
				s->f[f].data = emu.device_view(b->fields[f].data, b->fields[f].bytes);
				LT_CHECK(s->f[f].data != NULL);
			}
			s->b = &s->view;
			for (uint32_t f = 0; f < b->nfields; f++)
				LT_CHECK(emu.host_func_reads(stream, b->fields[f].data,
							     b->fields[f].bytes) == 0);
			LT_CHECK(emu.launch_host_func(stream, take_batch, s) == 0);
			LT_CHECK(rf_loader_release(ld, b, stream) == 0);
		} else {
			LT_CHECK(rf_batch_wait(b, NULL) == 0);
			take_batch(s);
			LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		}
	}
	if (rc < 0)
		fprintf(stderr, "next: %s: %s\n", rf_strerror(rc), rf_loader_errmsg(ld));
	LT_CHECK(rc == 0);
	if (use_cuda)
		LT_CHECK(emu.stream_synchronize(stream) == 0);
	LT_CHECK(atomic_load(&seen.bad) == 0);
	uint64_t n_want = st->drop_last ? want->n / st->batch * st->batch : want->n;
	LT_CHECK(got == n_want);
	uint64_t diff = 0;
	for (uint64_t r = 0; r < got && r < want->n; r++)
		if (memcmp(seen.v + r * 2 * T, want->v + r * 2 * T, 2 * T * 4)) {
			if (!diff)
				fprintf(stderr, "%s B=%u shuffle %d: row %llu differs\n", st->pattern,
					st->batch, (int)st->shuffle, (unsigned long long)r);
			diff++;
		}
	LT_CHECK(diff == 0);

	/* The memory plan sizes a batch from the int32 layout. */
	rf_stats s = {.size = sizeof(s)};
	LT_CHECK(rf_loader_stats(ld, &s) == 0);
	uint64_t part = ((uint64_t)st->batch * T * 4 + 255) / 256 * 256;
	LT_CHECK(s.batch_bytes == 2 * part);
	LT_CHECK(s.batches == batches);
	if (use_cuda)
		LT_CHECK(s.device_peak == (uint64_t)cfg.depth * s.batch_bytes);
	rf_loader_close(&ld);
	free(seen.v);
}

/* A small dataset of one field for the refusals. */
static void
pack_one(const char *dir, const char *name, const char *field, enum rf_dtype dt, uint64_t dim)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rf_schema sc;
	memset(&sc, 0, sizeof(sc));
	rf_schema_add(&sc, field, dt, 1, (uint64_t[]){dim}, -1);
	if (strcmp(field, "tokens"))
		rf_schema_add(&sc, "tokens", RF_DTYPE_U16, 1, (uint64_t[]){T + 1}, -1);
	rf_writer_config wc;
	rf_writer_config_init(&wc);
	wc.no_fsync = 1;
	rf_writer *w;
	uint8_t zero[1024] = {0};
	if (rf_writer_open(&w, path, &sc, &wc) < 0)
		exit(1);
	rf_value v[2] = {{zero, rf_field_item_bytes(&sc.fields[0])},
			 {zero, sc.nfields > 1 ? rf_field_item_bytes(&sc.fields[1]) : 0}};
	for (int i = 0; i < 40; i++)
		if (rf_writer_add(w, v) < 0)
			exit(1);
	if (rf_writer_close(&w) < 0)
		exit(1);
}

static void
refuse(const char *dir, const char *name, const char *field, enum rf_shuffle shuffle,
       const char *words)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	const char *paths[] = {path};
	const char *fields[] = {field};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.fields = field ? fields : NULL;
	cfg.nfields = field ? 1 : 0;
	cfg.shuffle = shuffle;
	cfg.device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg.tokens = RF_TOKENS_INPUTS_TARGETS;
	/* Full shuffling with verify may need per-sample checksums first:
	 * off, so that the refusal tested is the layout's. */
	cfg.verify = 0;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == RF_EUSAGE && ld == NULL);
	if (rc != RF_EUSAGE || !strstr(rf_loader_last_open_error(), words))
		fprintf(stderr, "%s: %d, '%s' (want '%s')\n", name, rc, rf_loader_last_open_error(),
			words);
	LT_CHECK(strstr(rf_loader_last_open_error(), words) != NULL);
	if (ld)
		rf_loader_close(&ld);
}

int
main(int argc, char **argv)
{
	use_cuda = argc > 1 && !strcmp(argv[1], "cuda");
	tool = argc > 2 ? argv[2] : NULL;
	if (!tool) {
		fprintf(stderr, "usage: %s host|cuda PATH/TO/ringfeed\n", argv[0]);
		return 1;
	}
	if (use_cuda) {
		if (rfemu_api_load(&emu, NULL) != 0) {
			fprintf(stderr, "RINGFEED_CUDART is not the cudart emulator: skipped\n");
			return LT_SKIP;
		}
		if (emu.stream_create(&stream) != 0)
			return 1;
	}
	char *dir = lt_tmpdir(use_cuda ? "tokens-cuda" : "tokens-host");
	/* u16 shards: one too short for a sample (no rows), one whose last
	 * tokens do not fill one; u32 shards. */
	static const uint64_t n16[] = {1000, 12, 513};
	static const uint64_t n32[] = {700, 301};
	char p16[3][512], p32[2][512];
	const char *l16[3], *l32[2];
	for (unsigned i = 0; i < 3; i++) {
		snprintf(p16[i], sizeof(p16[i]), "%s/v1_%u.bin", dir, i);
		l16[i] = p16[i];
		if (write_bin(p16[i], 0, i, n16[i]))
			return 1;
	}
	for (unsigned i = 0; i < 2; i++) {
		snprintf(p32[i], sizeof(p32[i]), "%s/v7_%u.bin", dir, i);
		l32[i] = p32[i];
		if (write_bin(p32[i], 1, 10 + i, n32[i]))
			return 1;
	}
	char cmd[4096];
	int fails = 0;
	snprintf(cmd, sizeof(cmd), "'%s' pack -q --chunk-bytes 1K --llmc '%s/v1_*.bin' --seq-len %d "
		 "-o '%s/u16.rfs'", tool, dir, T, dir);
	fails += system(cmd) != 0;
	snprintf(cmd, sizeof(cmd), "'%s' pack -q --chunk-bytes 2K --zstd 1 --llmc '%s/v1_*.bin' "
		 "--seq-len %d -o '%s/u16z.rfs'", tool, dir, T, dir);
	fails += system(cmd) != 0;
	snprintf(cmd, sizeof(cmd), "'%s' pack -q --chunk-bytes 1K --shard-bytes 12K --llmc "
		 "'%s/v7_*.bin' --seq-len %d -o '%s/u32.rfs'", tool, dir, T, dir);
	fails += system(cmd) != 0;
	if (fails) {
		fprintf(stderr, "ringfeed pack failed\n");
		lt_rmtree(dir);
		return 1;
	}
	struct rows want16, want32;
	read_bins(l16, 3, &want16);
	read_bins(l32, 2, &want32);
	LT_CHECK(want16.n == 62 + 0 + 32 && want32.n == 43 + 18);

	static const struct setting file_order[] = {
		{"u16.rfs", 8, 0, RF_SHUFFLE_NONE, 2, RF_PINNING_RING, 1 << 20, 0},
		{"u16.rfs", 7, 1, RF_SHUFFLE_NONE, 1, RF_PINNING_TRANSIENT, 256 << 10, 0},
		{"u16z.rfs", 13, 0, RF_SHUFFLE_NONE, 3, RF_PINNING_RING, 1 << 20, 0},
		{"u16.rfs", 1, 0, RF_SHUFFLE_NONE, 1, RF_PINNING_RING, 1 << 20, 1},
		{"u32*.rfs", 9, 0, RF_SHUFFLE_NONE, 2, RF_PINNING_RING, 1 << 20, 0},
		{"u32*.rfs", 64, 0, RF_SHUFFLE_NONE, 2, RF_PINNING_RING, 1 << 20, 1},
	};
	for (size_t i = 0; i < sizeof(file_order) / sizeof(file_order[0]); i++) {
		const struct setting *st = &file_order[i];
		int before = lt_failures;
		run(dir, st, st->pattern[1] == '1' ? &want16 : &want32);
		if (lt_failures != before)
			fprintf(stderr, "FAILED: file order, setting %zu\n", i);
	}
	/* `ringfeed cat --tokens` writes the same rows. */
	for (int k = 0; k < 2 && !use_cuda; k++) {
		snprintf(cmd, sizeof(cmd), "'%s' cat -q '%s/u16z.rfs' --tokens --field %s --raw "
			 "--batch 5 --device host", tool, dir, k ? "targets" : "inputs");
		FILE *p = popen(cmd, "r");
		int32_t row[T];
		uint64_t r = 0, bad = 0;
		while (p && fread(row, sizeof(row), 1, p) == 1) {
			bad += r >= want16.n ||
			       memcmp(row, want16.v + r * 2 * T + (uint64_t)k * T, sizeof(row));
			r++;
		}
		LT_CHECK(p && pclose(p) == 0);
		LT_CHECK(r == want16.n && bad == 0);
	}

	static const struct setting shuffled[] = {
		{"u16.rfs", 8, 0, RF_SHUFFLE_WINDOW, 2, RF_PINNING_RING, 1 << 20, 0},
		{"u16z.rfs", 5, 1, RF_SHUFFLE_CHUNKS, 1, RF_PINNING_RING, 1 << 20, 0},
		{"u32*.rfs", 16, 0, RF_SHUFFLE_WINDOW, 2, RF_PINNING_RING, 1 << 20, 1},
	};
	for (size_t i = 0; i < sizeof(shuffled) / sizeof(shuffled[0]); i++) {
		const struct setting *st = &shuffled[i];
		struct rows stored;
		int before = lt_failures;
		if (stored_rows(dir, st, &stored) < 0) {
			fprintf(stderr, "stored rows of setting %zu failed\n", i);
			lt_failures++;
			continue;
		}
		LT_CHECK(st->drop_last || stored.n == (st->pattern[1] == '1' ? want16.n : want32.n));
		run(dir, st, &stored);
		free(stored.v);
		if (lt_failures != before)
			fprintf(stderr, "FAILED: shuffled, setting %zu\n", i);
	}

	pack_one(dir, "x.rfs", "x", RF_DTYPE_U16, T + 1);
	pack_one(dir, "f.rfs", "tokens", RF_DTYPE_F32, T + 1);
	pack_one(dir, "one.rfs", "tokens", RF_DTYPE_U16, 1);
	pack_one(dir, "inputs.rfs", "inputs", RF_DTYPE_I32, T);
	refuse(dir, "x.rfs", "x", RF_SHUFFLE_NONE, "none among the fields loaded");
	refuse(dir, "f.rfs", NULL, RF_SHUFFLE_NONE, "f32");
	refuse(dir, "one.rfs", NULL, RF_SHUFFLE_NONE, "T + 1 >= 2");
	refuse(dir, "inputs.rfs", NULL, RF_SHUFFLE_NONE, "'inputs'");
	refuse(dir, "u16.rfs", NULL, RF_SHUFFLE_FULL, "shuffle full");
	lt_rmtree(dir);
	free(want16.v);
	free(want32.v);

	if (use_cuda) {
		LT_CHECK(emu.stream_destroy(stream) == 0);
		lt_emu_clean(&emu, 1);
	}
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
