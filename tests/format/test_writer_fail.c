/* SPDX-License-Identifier: MIT */
/*
 * Description: the writer leaves nothing on disk unless it closes cleanly:
 * an aborted writer (one shard or several) removes its temporary files; a
 * writer that hits a write error (file size limit, like a full disk) reports
 * the code and a message naming the file, stays failed, and close removes
 * everything; an existing file is replaced only by a successful close.  Bad
 * arguments are refused with RF_EUSAGE/RF_ESCHEMA and leave the writer usable.
 */
#include <signal.h>
#include <sys/resource.h>

#include "fmt_test.h"

static int log_calls;
static char log_last[512];

static void
logger(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	log_calls++;
	snprintf(log_last, sizeof log_last, "%s", msg);
}

static rf_schema
schema(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "v", RF_DTYPE_U8, 1, (uint64_t[]){1000}, -1), 0);
	CHECK_RC(rf_schema_add(&s, "t", RF_DTYPE_U32, 1, (uint64_t[]){0}, 0), 0);
	return s;
}

static int
add_some(rf_writer *w, uint64_t n)
{
	static uint8_t v[1000];
	static uint32_t t[7] = {1, 2, 3, 4, 5, 6, 7};
	for (uint64_t i = 0; i < n; i++) {
		rf_value vals[2] = {{v, sizeof v}, {t, (i % 8) * 4 > 28 ? 28 : (i % 8) * 4}};
		int rc = rf_writer_add(w, vals);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void
aborted(const char *dir, uint64_t shard_bytes, int zstd, unsigned threads)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = 8192;
	cfg.shard_bytes = shard_bytes;
	cfg.zstd_level = zstd;
	cfg.threads = threads;
	char *p = t_path(dir, "ab.rfs");
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, p, &s, &cfg), 0);
	CHECK_RC(add_some(w, 300), 0);
	CHECK(t_count_entries(dir) >= (shard_bytes ? 2 : 1));
	rf_writer_abort(&w);
	CHECK(w == NULL);
	CHECK(t_count_entries(dir) == 0);
	rf_writer_abort(&w); /* NULL is a no-op */
	CHECK_RC(rf_writer_close(&w), 0);
	free(p);
}

static void
failing(const char *dir, int zstd, unsigned threads, int use_close)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = 8192;
	cfg.zstd_level = zstd;
	cfg.threads = threads;
	cfg.shard_bytes = 64 * 1024;
	cfg.log = logger;
	char *p = t_path(dir, "fail.rfs");
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, p, &s, &cfg), 0);

	/* A file size limit makes write() fail with EFBIG, as a full disk
	 * makes it fail with ENOSPC: the same path through the writer. */
	struct rlimit old, lim;
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim = old;
	lim.rlim_cur = 40 * 1024;
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	log_calls = 0;
	int rc = add_some(w, 2000);
	rc = rc < 0 ? rc : rf_writer_close(&w);
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK_RC(rc, -EFBIG);
	CHECK(log_calls >= 1 && strstr(log_last, ".tmp."));
	if (!w)
		CHECK(strstr(rf_writer_last_error(), ".tmp."));
	if (w) {
		CHECK(strstr(rf_writer_errmsg(w), dir) && strstr(rf_writer_errmsg(w), ".tmp."));
		/* It stays failed. */
		CHECK_RC(add_some(w, 1), -EFBIG);
		if (use_close) {
			CHECK_RC(rf_writer_close(&w), -EFBIG);
			CHECK(strstr(rf_writer_last_error(), dir));
		} else {
			rf_writer_abort(&w);
		}
	}
	CHECK(w == NULL);
	CHECK(t_count_entries(dir) == 0);
	free(p);
}

static void
replace_only_on_close(const char *dir)
{
	rf_schema s = schema();
	char *p = t_path(dir, "keep.rfs");
	CHECK_RC(t_write(p, &s, 5, NULL, 0), 0);
	size_t l0;
	uint8_t *before = t_slurp(p, &l0);
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, p, &s, NULL), 0);
	CHECK_RC(add_some(w, 50), 0);
	/* The data goes to PATH.tmp.PID meanwhile. */
	char tmpname[64];
	snprintf(tmpname, sizeof tmpname, "keep.rfs.tmp.%ld", (long)getpid());
	char *tp = t_path(dir, tmpname);
	CHECK(access(tp, F_OK) == 0);
	rf_writer_abort(&w);
	CHECK(access(tp, F_OK) != 0);
	size_t l1;
	uint8_t *after = t_slurp(p, &l1);
	CHECK(l0 == l1 && memcmp(before, after, l0) == 0);
	free(after);
	CHECK_RC(rf_writer_open(&w, p, &s, NULL), 0);
	CHECK_RC(add_some(w, 50), 0);
	CHECK_RC(rf_writer_close(&w), 0);
	after = t_slurp(p, &l1);
	CHECK(l1 != l0);
	CHECK(access(tp, F_OK) != 0);
	free(after);
	free(before);
	unlink(p);
	char *mp = t_path(dir, "keep.rfm");
	unlink(mp);
	free(mp);
	free(tp);
	free(p);
}

static void
bad_arguments(const char *dir)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.log = logger;
	rf_writer *w = (rf_writer *)1;
	char *missing = t_path(dir, "no/such/dir/x.rfs");
	log_calls = 0;
	CHECK_RC(rf_writer_open(&w, missing, &s, &cfg), -ENOENT);
	CHECK(w == NULL && log_calls == 1 && strstr(log_last, "no/such/dir"));
	CHECK(strcmp(rf_writer_last_error(), log_last) == 0);
	char *p = t_path(dir, "args.rfs");
	rf_writer_config bad = cfg;
	bad.zstd_level = 23;
	CHECK_RC(rf_writer_open(&w, p, &s, &bad), RF_EUSAGE);
	bad = cfg;
	bad.zstd_level = -1;
	CHECK_RC(rf_writer_open(&w, p, &s, &bad), RF_EUSAGE);
	bad = cfg;
	bad.size = 8;
	CHECK_RC(rf_writer_open(&w, p, &s, &bad), RF_EUSAGE);
	bad = cfg;
	bad.reserved[3] = 1;
	CHECK_RC(rf_writer_open(&w, p, &s, &bad), RF_EUSAGE);
	bad = cfg;
	bad.chunk_bytes = (1ULL << 32) + 1;
	CHECK_RC(rf_writer_open(&w, p, &s, &bad), RF_EUSAGE);
	rf_schema empty = {0};
	CHECK_RC(rf_writer_open(&w, p, &empty, &cfg), RF_ESCHEMA);
	CHECK(t_count_entries(dir) == 0);

	/* Wrong value sizes and offsets leave the writer usable. */
	CHECK_RC(rf_writer_open(&w, p, &s, &cfg), 0);
	uint8_t v[1001] = {0};
	uint32_t t[4] = {0};
	CHECK_RC(rf_writer_add(w, (rf_value[]){{v, 999}, {t, 8}}), RF_EUSAGE);
	CHECK(strstr(rf_writer_errmsg(w), "field v"));
	CHECK_RC(rf_writer_add(w, (rf_value[]){{v, 1000}, {t, 6}}), RF_EUSAGE);
	CHECK_RC(rf_writer_add(w, (rf_value[]){{NULL, 1000}, {t, 8}}), RF_EUSAGE);
	int64_t offs[4] = {0, 8, 4, 12};
	rf_column cols[2] = {{v, NULL}, {t, offs}};
	uint8_t vv[3000] = {0};
	cols[0].data = vv;
	CHECK_RC(rf_writer_add_columns(w, 3, cols), RF_EUSAGE);
	cols[1].offsets = NULL;
	CHECK_RC(rf_writer_add_columns(w, 3, cols), RF_EUSAGE);
	int64_t neg[2] = {-4, 0};
	cols[1].offsets = neg;
	CHECK_RC(rf_writer_add_columns(w, 1, cols), RF_EUSAGE);
	CHECK(rf_writer_samples(w) == 0);
	CHECK_RC(rf_writer_add(w, (rf_value[]){{v, 1000}, {t, 8}}), 0);
	CHECK_RC(rf_writer_add_columns(w, 0, NULL), 0);
	CHECK(rf_writer_samples(w) == 1);
	CHECK_RC(rf_writer_close(&w), 0);
	rf_dataset *ds;
	const char *paths[] = {p};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	CHECK(rf_dataset_samples(ds) == 1);
	rf_dataset_close(&ds);
	unlink(p);

	/* A sample that cannot fit in a 2^32-byte chunk: refused before any
	 * byte of it is read, and the writer stays usable. */
	rf_schema big = {0};
	CHECK_RC(rf_schema_add(&big, "huge", RF_DTYPE_U8, 1, (uint64_t[]){(1ULL << 32) + 1}, -1), 0);
	CHECK_RC(rf_writer_open(&w, p, &big, &cfg), 0);
	CHECK_RC(rf_writer_add(w, (rf_value[]){{v, (1ULL << 32) + 1}}), RF_EUSAGE);
	CHECK(strstr(rf_writer_errmsg(w), "2^32"));
	CHECK_RC(rf_writer_close(&w), 0);
	unlink(p);
	free(p);
	free(missing);
}

int
main(void)
{
	signal(SIGXFSZ, SIG_IGN);
	char *dir = t_tmpdir();
	aborted(dir, 0, 0, 1);
	aborted(dir, 20000, 0, 1);
	aborted(dir, 20000, 3, 2);
	aborted(dir, 0, 3, 2);
	failing(dir, 0, 1, 1);
	failing(dir, 0, 1, 0);
	failing(dir, 1, 2, 1);
	failing(dir, 1, 1, 0);
	replace_only_on_close(dir);
	bad_arguments(dir);
	t_rmtree(dir);
	free(dir);
	return 0;
}
