/* SPDX-License-Identifier: MIT */
/*
 * Description: write datasets and read every value back: every dtype, shapes
 * of rank 0..8, variable-length fields (zero-length values included), 0 and 1
 * samples, raw and zstd chunks, a compression pool (threads = 2), several
 * shards (shard_bytes) opened as files, a directory and a glob, and
 * rf_writer_add and rf_writer_add_columns giving byte-identical files.
 */
#include <glob.h>

#include "fmt_test.h"

struct config {
	const char *name;
	int zstd;
	unsigned threads;
	uint64_t chunk_bytes;
	uint64_t block; /* 0: rf_writer_add */
};

static const struct config configs[] = {
	{"raw-add", 0, 1, 4096, 0},
	{"raw-columns", 0, 1, 4096, 7},
	{"zstd-add", 3, 1, 3000, 0},
	{"zstd-columns-pool", 3, 2, 2000, 50},
	{"raw-default-chunk", 0, 1, 0, 1000},
};

static rf_schema
schema_all_dtypes(void)
{
	rf_schema s = {0};
	for (int dt = RF_DTYPE_U8; dt <= RF_DTYPE_BYTES; dt++) {
		char name[16];
		snprintf(name, sizeof name, "f_%s", rf_dtype_name((enum rf_dtype)dt));
		uint64_t shape[2] = {3, (uint64_t)dt};
		CHECK_RC(rf_schema_add(&s, name, (enum rf_dtype)dt, (uint32_t)(dt % 3), shape, -1), 0);
	}
	return s;
}

static rf_schema
schema_ranks(void)
{
	rf_schema s = {0};
	uint64_t shape[RF_MAX_RANK] = {2, 1, 3, 1, 2, 1, 1, 2};
	for (uint32_t r = 0; r <= RF_MAX_RANK; r++) {
		char name[16];
		snprintf(name, sizeof name, "rank%u", r);
		CHECK_RC(rf_schema_add(&s, name, RF_DTYPE_F32, r, shape, -1), 0);
	}
	/* Variable dimension at the front, the middle and the end of rank 8. */
	CHECK_RC(rf_schema_add(&s, "var8a", RF_DTYPE_U16, 8, shape, 0), 0);
	CHECK_RC(rf_schema_add(&s, "var8b", RF_DTYPE_BF16, 8, shape, 4), 0);
	CHECK_RC(rf_schema_add(&s, "var8c", RF_DTYPE_F16, 8, shape, 7), 0);
	return s;
}

static rf_schema
schema_var(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "tokens", RF_DTYPE_U16, 1, (uint64_t[]){0}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "label", RF_DTYPE_I64, 0, NULL, -1), 0);
	CHECK_RC(rf_schema_add(&s, "blob", RF_DTYPE_BYTES, 1, (uint64_t[]){0}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "pairs", RF_DTYPE_I32, 2, (uint64_t[]){0, 3}, 0), 0);
	return s;
}

static void
open_check(const char *path, const rf_schema *s, uint64_t n, int zstd)
{
	rf_dataset *ds;
	const char *paths[] = {path};
	rf_dataset_config dc;
	rf_dataset_config_init(&dc);
	int rc = rf_dataset_open(&ds, paths, 1, &dc);
	if (rc < 0)
		fprintf(stderr, "open %s: %s\n", path, rf_dataset_last_open_error());
	CHECK_RC(rc, 0);
	CHECK(rf_dataset_shards(ds) == 1);
	CHECK(strcmp(rf_dataset_shard_path(ds, 0), path) == 0);
	CHECK(rf_dataset_shard_path(ds, 1) == NULL);
	t_check_dataset(ds, s, n);
	/* The codec asked for is the codec used (the data compresses). */
	for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++) {
		rf_chunk_info ci;
		CHECK_RC(rf_dataset_chunk_info(ds, c, &ci), 0);
		CHECK(ci.codec == (zstd ? RF_CODEC_ZSTD : RF_CODEC_NONE));
	}
	rf_dataset_close(&ds);
	CHECK(ds == NULL);
}

/* Data zstd cannot shrink is stored raw even when zstd is asked for. */
static void
incompressible(const char *dir)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "r", RF_DTYPE_U64, 1, (uint64_t[]){64}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = 1;
	cfg.chunk_bytes = 8192;
	cfg.no_fsync = 1;
	char *p = t_path(dir, "random.rfs");
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, p, &s, &cfg), 0);
	uint64_t v[64];
	for (uint64_t i = 0; i < 100; i++) {
		for (int k = 0; k < 64; k++)
			v[k] = t_mix(i * 64 + (uint64_t)k);
		CHECK_RC(rf_writer_add(w, (rf_value[]){{v, sizeof v}}), 0);
	}
	CHECK_RC(rf_writer_close(&w), 0);
	rf_dataset *ds;
	const char *paths[] = {p};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++) {
		rf_chunk_info ci;
		CHECK_RC(rf_dataset_chunk_info(ds, c, &ci), 0);
		CHECK(ci.codec == RF_CODEC_NONE);
		CHECK_RC(rf_dataset_verify_chunk(ds, c), 0);
	}
	uint64_t got[64];
	size_t len;
	CHECK_RC(rf_dataset_read(ds, 99, 0, got, sizeof got, &len), 0);
	CHECK(len == sizeof got && got[5] == t_mix(99 * 64 + 5));
	rf_dataset_close(&ds);
	unlink(p);
	free(p);
}

static void
run_schema(const char *dir, const char *sname, const rf_schema *s)
{
	static const uint64_t counts[] = {0, 1, 2, 300};
	for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
		const struct config *cf = &configs[c];
		for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
			rf_writer_config cfg;
			rf_writer_config_init(&cfg);
			cfg.zstd_level = cf->zstd;
			cfg.threads = cf->threads;
			if (cf->chunk_bytes)
				cfg.chunk_bytes = cf->chunk_bytes;
			cfg.no_fsync = 1;
			char name[128];
			snprintf(name, sizeof name, "%s-%s-%llu.rfs", sname, cf->name,
				 (unsigned long long)counts[k]);
			char *path = t_path(dir, name);
			CHECK_RC(t_write(path, s, counts[k], &cfg, cf->block), 0);
			open_check(path, s, counts[k], cf->zstd);
			free(path);
		}
	}
}

/* add and add_columns (in odd block sizes) produce the same bytes. */
static void
identical_files(const char *dir, const rf_schema *s, int zstd, unsigned threads)
{
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = zstd;
	cfg.threads = threads;
	cfg.chunk_bytes = 5000;
	cfg.no_fsync = 1;
	char *a = t_path(dir, "same-a.rfs"), *b = t_path(dir, "same-b.rfs"),
	     *c = t_path(dir, "same-c.rfs");
	CHECK_RC(t_write(a, s, 500, &cfg, 0), 0);
	CHECK_RC(t_write(b, s, 500, &cfg, 13), 0);
	CHECK_RC(t_write(c, s, 500, &cfg, 500), 0);
	size_t la, lb, lc;
	uint8_t *pa = t_slurp(a, &la), *pb = t_slurp(b, &lb), *pc = t_slurp(c, &lc);
	CHECK(la == lb && la == lc);
	CHECK(memcmp(pa, pb, la) == 0 && memcmp(pa, pc, la) == 0);
	free(pa);
	free(pb);
	free(pc);
	unlink(a);
	unlink(b);
	unlink(c);
	free(a);
	free(b);
	free(c);
}

static void
multi_shard(const char *dir, const rf_schema *s, int zstd)
{
	char *sub = t_path(dir, zstd ? "shards-z" : "shards");
	CHECK(mkdir(sub, 0777) == 0);
	char *base = t_path(sub, "part.rfs");
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = zstd;
	cfg.chunk_bytes = 2048;
	cfg.shard_bytes = 5 * 4096;
	cfg.threads = 2;
	cfg.no_fsync = 1;
	const uint64_t n = 700;
	CHECK_RC(t_write(base, s, n, &cfg, 64), 0);
	/* Nothing but the final names and the manifest. */
	int entries = t_count_entries(sub) - 1;
	char *man = t_path(sub, "part.rfm");
	CHECK(access(man, F_OK) == 0);
	free(man);
	CHECK(entries >= 3);
	char *first = t_path(sub, "part-00000.rfs");
	struct stat st;
	CHECK(stat(first, &st) == 0);
	/* Every shard but the last stays within shard_bytes. */
	for (int i = 0; i < entries; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "part-%05d.rfs", i);
		char *p = t_path(sub, nm);
		CHECK(stat(p, &st) == 0);
		CHECK((uint64_t)st.st_size <= cfg.shard_bytes);
		free(p);
	}

	rf_dataset *ds;
	const char *by_dir[] = {sub};
	CHECK_RC(rf_dataset_open(&ds, by_dir, 1, NULL), 0);
	CHECK(rf_dataset_shards(ds) == (size_t)entries);
	CHECK(strstr(rf_dataset_shard_path(ds, 0), "part-00000.rfs"));
	t_check_dataset(ds, s, n);
	rf_dataset_close(&ds);

	char *pattern = t_path(sub, "part-*.rfs");
	const char *by_glob[] = {pattern};
	CHECK_RC(rf_dataset_open(&ds, by_glob, 1, NULL), 0);
	CHECK(rf_dataset_shards(ds) == (size_t)entries);
	t_check_dataset(ds, s, n);
	rf_dataset_close(&ds);

	/* Explicit files in order. */
	glob_t g;
	CHECK(glob(pattern, 0, NULL, &g) == 0);
	CHECK(g.gl_pathc == (size_t)entries);
	CHECK_RC(rf_dataset_open(&ds, (const char *const *)g.gl_pathv, g.gl_pathc, NULL), 0);
	t_check_dataset(ds, s, n);
	rf_dataset_close(&ds);
	/* The same shard twice is a valid (if odd) dataset of twice the samples. */
	const char *twice[] = {g.gl_pathv[0], g.gl_pathv[0]};
	CHECK_RC(rf_dataset_open(&ds, twice, 2, NULL), 0);
	CHECK(rf_dataset_shards(ds) == 2);
	rf_dataset_close(&ds);
	globfree(&g);

	/* Nothing matched. */
	char *none = t_path(sub, "nothing-*.rfs");
	const char *by_none[] = {none};
	CHECK_RC(rf_dataset_open(&ds, by_none, 1, NULL), -ENOENT);
	CHECK(strstr(rf_dataset_last_open_error(), none));
	CHECK(ds == NULL);
	char *missing = t_path(sub, "missing.rfs");
	const char *by_missing[] = {missing};
	CHECK_RC(rf_dataset_open(&ds, by_missing, 1, NULL), -ENOENT);
	CHECK(strstr(rf_dataset_last_open_error(), missing));

	/* A shard of another schema is refused. */
	rf_schema other = {0};
	CHECK_RC(rf_schema_add(&other, "x", RF_DTYPE_U8, 0, NULL, -1), 0);
	char *odd = t_path(sub, "zz-other.rfs");
	cfg.shard_bytes = 0;
	CHECK_RC(t_write(odd, &other, 3, &cfg, 0), 0);
	char *oddm = t_path(sub, "part.rfm");
	const char *both[] = {oddm, odd};
	CHECK_RC(rf_dataset_open(&ds, both, 2, NULL), RF_ESCHEMA);
	CHECK(strstr(rf_dataset_last_open_error(), odd));
	/* The directory now holds two packs: not one dataset. */
	CHECK_RC(rf_dataset_open(&ds, by_dir, 1, NULL), RF_EUSAGE);
	CHECK(strstr(rf_dataset_last_open_error(), "zz-other.rfm"));
	free(oddm);

	t_rmtree(sub);
	free(odd);
	free(none);
	free(missing);
	free(pattern);
	free(first);
	free(base);
	free(sub);
}

static void
empty_dataset(const char *dir)
{
	rf_schema s = schema_var();
	char *p = t_path(dir, "empty.rfs");
	CHECK_RC(t_write(p, &s, 0, NULL, 0), 0);
	struct stat st;
	CHECK(stat(p, &st) == 0);
	CHECK(st.st_size == RF_FMT_ALIGN + RF_FMT_FOOTER_SIZE);
	rf_dataset *ds;
	const char *paths[] = {p};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	CHECK(rf_dataset_samples(ds) == 0 && rf_dataset_chunks(ds) == 0);
	CHECK(rf_dataset_max_raw_bytes(ds) == 0);
	uint8_t b[8];
	size_t len;
	CHECK_RC(rf_dataset_read(ds, 0, 0, b, sizeof b, &len), -ERANGE);
	rf_dataset_close(&ds);
	rf_dataset_close(&ds); /* NULL is a no-op */
	free(p);
}

static void
small_buffer(const char *dir)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "v", RF_DTYPE_U32, 1, (uint64_t[]){16}, -1), 0);
	char *p = t_path(dir, "small.rfs");
	CHECK_RC(t_write(p, &s, 10, NULL, 0), 0);
	rf_dataset *ds;
	const char *paths[] = {p};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	uint8_t b[64];
	size_t len = 0;
	CHECK_RC(rf_dataset_read(ds, 3, 0, b, 10, &len), -ENOSPC);
	CHECK(len == 64);
	CHECK(strstr(rf_dataset_errmsg(ds), "buffer"));
	CHECK_RC(rf_dataset_read(ds, 3, 0, b, sizeof b, &len), 0);
	rf_dataset_close(&ds);
	free(p);
}

int
main(void)
{
	char *dir = t_tmpdir();
	rf_schema a = schema_all_dtypes(), r = schema_ranks(), v = schema_var();
	run_schema(dir, "dtypes", &a);
	run_schema(dir, "ranks", &r);
	run_schema(dir, "var", &v);
	identical_files(dir, &v, 0, 1);
	identical_files(dir, &v, 5, 1);
	identical_files(dir, &v, 5, 2);
	identical_files(dir, &a, 0, 1);
	multi_shard(dir, &v, 0);
	multi_shard(dir, &a, 3);
	empty_dataset(dir);
	small_buffer(dir);
	incompressible(dir);
	t_rmtree(dir);
	free(dir);
	return 0;
}
