/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the loader tests: a deterministic dataset (every value is a
 * function of the sample index), packed with the public writer API, and a
 * checker that compares a delivered batch, byte for byte, with what was
 * packed.
 *
 * Fields: "x" u16[3] fixed, "y" i64 scalar, "tok" i32 variable [*] (0..6
 * values, some samples empty), "img" u8[4][5] fixed.  Datasets without the
 * variable field leave "tok" out.
 */
#ifndef RF_LOADER_TEST_H
#define RF_LOADER_TEST_H

#include <errno.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

/* The sanitizers, for tests that fork: a child of a threaded parent may
 * not start threads under ThreadSanitizer. */
#if defined(__SANITIZE_THREAD__)
#define RF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RF_TSAN 1
#endif
#endif
#ifndef RF_TSAN
#define RF_TSAN 0
#endif
/* AddressSanitizer's allocator (GCC 12's libasan) takes no lock across
 * fork(): a child that allocates while a parent thread held it waits
 * forever (seen in a DataLoader worker under ASan).  Under it, the child
 * checks the refusals, which allocate nothing, and opens no loader. */
#if defined(__SANITIZE_ADDRESS__)
#define RF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RF_ASAN 1
#endif
#endif
#ifndef RF_ASAN
#define RF_ASAN 0
#endif

#include "plan/plan.h"

#define LT_SKIP 77

static int lt_failures __attribute__((unused));
#define LT_CHECK(c)                                                                       \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			lt_failures++;                                                    \
		}                                                                         \
	} while (0)

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t
lt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* XOR the byte at offset `at` of file dir/name with `mask` (a corruption
 * the checksums must catch). */
static inline void
lt_flip_byte(const char *dir, const char *name, uint64_t at, int mask)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r+b");
	LT_CHECK(f != NULL);
	if (!f)
		return;
	fseek(f, (long)at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, (long)at, SEEK_SET);
	fputc(c ^ mask, f);
	fclose(f);
}

/* The value of field `name` for sample g into buf (at least 64 bytes);
 * returns its length. */
static inline size_t
lt_value(const char *name, uint64_t g, uint8_t *buf)
{
	if (!strcmp(name, "x")) {
		for (int j = 0; j < 3; j++) {
			uint16_t v = (uint16_t)(g * 7 + (uint64_t)j);
			memcpy(buf + 2 * j, &v, 2);
		}
		return 6;
	}
	if (!strcmp(name, "y")) {
		int64_t v = (int64_t)(g * 1000003u) - 5;
		memcpy(buf, &v, 8);
		return 8;
	}
	if (!strcmp(name, "tok")) {
		size_t n = (size_t)((g * 2654435761u) >> 7) % 7;
		for (size_t j = 0; j < n; j++) {
			int32_t v = (int32_t)(g * 31 + j);
			memcpy(buf + 4 * j, &v, 4);
		}
		return 4 * n;
	}
	/* img */
	for (int j = 0; j < 20; j++)
		buf[j] = (uint8_t)(g * 13 + (uint64_t)j * 3);
	return 20;
}

/* The format version lt_pack writes (rf_writer_config.format_version):
 * 0, the latest, unless a test asks for an older one. */
static uint32_t lt_pack_format __attribute__((unused));

/* Pack n samples into dir/name.rfs (or name-NNNNN.rfs shards when
 * shard_bytes is set).  Returns 0 or the writer's error. */
static inline int
lt_pack(const char *dir, const char *name, uint64_t n, int zstd, uint64_t chunk_bytes,
	uint64_t shard_bytes, int with_var)
{
	rf_schema s;
	memset(&s, 0, sizeof(s));
	int rc = rf_schema_add(&s, "x", RF_DTYPE_U16, 1, (uint64_t[]){3}, -1);
	if (!rc)
		rc = rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1);
	if (!rc && with_var)
		rc = rf_schema_add(&s, "tok", RF_DTYPE_I32, 1, (uint64_t[]){0}, 0);
	if (!rc)
		rc = rf_schema_add(&s, "img", RF_DTYPE_U8, 2, (uint64_t[]){4, 5}, -1);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = zstd ? 3 : 0;
	cfg.chunk_bytes = chunk_bytes;
	cfg.shard_bytes = shard_bytes;
	cfg.no_fsync = 1;
	cfg.format_version = lt_pack_format;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.rfs", dir, name);
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	uint8_t bufs[4][64];
	for (uint64_t g = 0; g < n; g++) {
		rf_value v[4];
		for (uint32_t f = 0; f < s.nfields; f++) {
			v[f].data = bufs[f];
			v[f].len = lt_value(s.fields[f].name, g, bufs[f]);
		}
		if ((rc = rf_writer_add(w, v)) < 0) {
			fprintf(stderr, "writer: %s\n", rf_writer_errmsg(w));
			rf_writer_abort(&w);
			return rc;
		}
	}
	return rf_writer_close(&w);
}

/* Writes sample g's value of len bytes (lt_pack_u8). */
typedef void lt_fill_fn(uint64_t g, uint8_t *v, uint64_t len);

/* Pack n samples into dir/file: a u8 field `field` of `value` bytes that
 * fill writes and, with `label`, an i64 field "y" holding the sample's
 * number; uncompressed chunks of chunk_bytes (0: the writer's choice).
 * Returns 0 or the writer's error. */
static inline int
lt_pack_u8(const char *dir, const char *file, const char *field, uint64_t value, int label,
	   uint64_t n, uint64_t chunk_bytes, lt_fill_fn *fill)
{
	rf_schema s;
	memset(&s, 0, sizeof(s));
	int rc = rf_schema_add(&s, field, RF_DTYPE_U8, 1, (uint64_t[]){value}, -1);
	if (!rc && label)
		rc = rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = chunk_bytes;
	cfg.no_fsync = 1;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	uint8_t *v = malloc(value ? value : 1);
	if (!v) {
		rf_writer_abort(&w);
		return -ENOMEM;
	}
	for (uint64_t g = 0; g < n && rc >= 0; g++) {
		int64_t y = (int64_t)g;
		fill(g, v, value);
		rc = rf_writer_add(w, (rf_value[]){{v, value}, {&y, sizeof(y)}});
	}
	free(v);
	if (rc < 0) {
		rf_writer_abort(&w);
		return rc;
	}
	return rf_writer_close(&w);
}

/* Compare a batch whose memory is readable by the host (host backend, or a
 * copy back: lt_gpu.h) with samples [first, first + samples).  Device
 * pointers, the emulator's too, fault on the host.  Returns the number of
 * mismatching values. */
static inline uint64_t
lt_check_batch(const rf_batch *b, uint64_t first)
{
	uint64_t bad = 0;
	uint8_t want[64];
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		const uint8_t *data = bf->data;
		if (bf->shape[0] != (int64_t)b->samples)
			bad++;
		/* 256-byte aligned; to its element for a batch in place in
		 * the map (rf_config.inplace). */
		if ((uintptr_t)data % ((b->flags & RF_BATCH_READONLY) ? rf_dtype_size(bf->dtype) : 256))
			bad++;
		if (bf->offsets) {
			const int64_t *o = bf->offsets;
			if (o[0] != 0 || (uint64_t)o[b->samples] != bf->bytes)
				bad++;
			for (uint32_t i = 0; i < b->samples; i++) {
				size_t len = lt_value(bf->name, first + i, want);
				if (o[i + 1] - o[i] != (int64_t)len ||
				    memcmp(data + o[i], want, len) != 0)
					bad++;
			}
		} else {
			size_t vb = lt_value(bf->name, 0, want);
			if (bf->bytes != vb * b->samples)
				bad++;
			for (uint32_t i = 0; i < b->samples; i++) {
				lt_value(bf->name, first + i, want);
				if (memcmp(data + (uint64_t)i * vb, want, vb) != 0)
					bad++;
			}
		}
	}
	return bad;
}

/* The sample row i of a batch holds, read off its "y" value (g * 1000003 -
 * 5); UINT64_MAX when the batch has no "y".  Reads host-readable memory. */
static inline uint64_t
lt_row_sample(const rf_batch *b, uint32_t i)
{
	for (uint32_t f = 0; f < b->nfields; f++)
		if (!strcmp(b->fields[f].name, "y")) {
			int64_t y;
			memcpy(&y, (const uint8_t *)b->fields[f].data + 8 * i, 8);
			return (uint64_t)((y + 5) / 1000003);
		}
	return UINT64_MAX;
}

/* Whether every field of row i of a batch holds sample g's value (variable
 * fields by their offsets). */
static inline int
lt_row_ok(const rf_batch *b, uint32_t i, uint64_t g)
{
	uint8_t want[64];
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		const uint8_t *data = bf->data;
		size_t len = lt_value(bf->name, g, want);
		if (bf->offsets) {
			if ((size_t)(bf->offsets[i + 1] - bf->offsets[i]) != len ||
			    memcmp(data + bf->offsets[i], want, len))
				return 0;
		} else if (memcmp(data + (uint64_t)i * len, want, len)) {
			return 0;
		}
	}
	return 1;
}

/* rf_loader_open on cfg, a failed check (with the open error) when it
 * fails: the loader, or NULL. */
static inline rf_loader *
lt_open(const rf_config *cfg)
{
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, cfg);
	LT_CHECK(rc == 0);
	if (rc < 0)
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
	return rc == 0 ? ld : NULL;
}

/* Open a loader on cfg and take every batch to the end: each row checked
 * (lt_row_ok) and its sample kept in out (at most cap), each batch released;
 * *st (when not NULL) gets rf_loader_stats before the close.  Returns the
 * rows seen, 0 when the loader does not open (a failed check either way). */
static inline size_t
lt_stream_rows(const rf_config *cfg, uint64_t *out, size_t cap, rf_stats *st)
{
	if (st) {
		memset(st, 0, sizeof(*st));
		st->size = sizeof(*st);
	}
	rf_loader *ld = lt_open(cfg);
	if (!ld)
		return 0;
	size_t n = 0;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(lt_row_ok(b, i, g));
			if (n < cap)
				out[n++] = g;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	if (st)
		LT_CHECK(rf_loader_stats(ld, st) == 0);
	rf_loader_close(&ld);
	return n;
}

static int
lt_rm_cb(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

static inline void
lt_rmtree(const char *dir)
{
	nftw(dir, lt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory for a test's datasets, in the build tree (a real file
 * system, so O_DIRECT works; /tmp may be tmpfs). */
static inline char *
lt_tmpdir(const char *tag)
{
	static char dir[256];
	snprintf(dir, sizeof(dir), "lt-%s-XXXXXX", tag);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	return dir;
}

/* Loader log messages go to stderr, so a failing test shows them. */
static inline void
lt_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if (level <= RF_LOG_WARN || getenv("LT_VERBOSE"))
		fprintf(stderr, "[ringfeed %d] %s\n", (int)level, msg);
}

/* The messages lt_log_keep kept (and passed on to lt_log) since the test
 * last cleared them (lt_logged[0] = 0), one "LEVEL message" a line. */
static char lt_logged[16384] __attribute__((unused));

static inline void
lt_log_keep(void *user, enum rf_log_level level, const char *msg)
{
	size_t n = strlen(lt_logged);
	snprintf(lt_logged + n, sizeof(lt_logged) - n, "%d %s\n", (int)level, msg);
	lt_log(user, level, msg);
}

/* rf_dataset_open on the one dataset dir/name (a shard pattern too). */
static inline int
lt_dataset_open(rf_dataset **ds, const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	const char *paths[] = {path};
	return rf_dataset_open(ds, paths, 1, NULL);
}

/* The path a config made by lt_config points at. */
struct lt_paths {
	char path[512];
	const char *paths[1];
};

/* rf_config_init, then the one dataset dir/name (p holds its path and must
 * outlive the config's use), the host backend, and logging to lt_log. */
static inline void
lt_config(rf_config *cfg, struct lt_paths *p, const char *dir, const char *name)
{
	snprintf(p->path, sizeof(p->path), "%s/%s", dir, name);
	p->paths[0] = p->path;
	rf_config_init(cfg);
	cfg->paths = p->paths;
	cfg->npaths = 1;
	cfg->device = RF_DEVICE_HOST;
	cfg->log = lt_log;
}

/* The plan rf_plan_create makes for dataset dir/pattern (its chunks' sample
 * counts, read from the dataset), with the given parameters; NULL when the
 * dataset does not open.  The caller destroys it. */
static inline rf_plan *
lt_make_plan(const char *dir, const char *pattern, enum rf_plan_mode mode, uint64_t seed,
	     uint32_t rank, uint32_t world, uint32_t batch, uint32_t window, int drop_last)
{
	rf_dataset *ds;
	if (lt_dataset_open(&ds, dir, pattern) < 0)
		return NULL;
	uint64_t nc = rf_dataset_chunks(ds);
	uint32_t *counts = malloc(nc * sizeof(*counts));
	for (uint64_t c = 0; c < nc; c++) {
		rf_chunk_info ci;
		rf_dataset_chunk_info(ds, c, &ci);
		counts[c] = ci.samples;
	}
	rf_dataset_close(&ds);
	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.mode = mode;
	pp.seed = seed;
	pp.rank = rank;
	pp.world = world;
	pp.batch = batch;
	pp.window = window;
	pp.tail = drop_last ? RF_PLAN_DROP : RF_PLAN_KEEP;
	rf_plan *plan = NULL;
	rf_plan_create(&plan, &pp, counts, nc, NULL);
	free(counts);
	return plan;
}

#endif
