/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_dataset_read and rf_dataset_verify_chunk survive a
 * transient read error: a read of a chosen chunk that fails with EIO its
 * first few times (pread intercepted by defining it here) is asked again
 * with backoff, logged as a warning, and the values read are the ones
 * written; an error that outlasts the retries fails the read, and says so.
 */
#include <sys/syscall.h>

#include "fmt_test.h"

static uint64_t fail_off = UINT64_MAX; /* a read covering it fails */
static int fail_left;                  /* this many more times */
static int failed;

ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	if (fail_left > 0 && (uint64_t)off <= fail_off && fail_off - (uint64_t)off < n) {
		fail_left--;
		failed++;
		errno = EIO;
		return -1;
	}
	return syscall(SYS_pread64, fd, buf, n, off);
}

struct logbuf {
	int warns;
	char last[1024];
};

static void
logger(void *user, enum rf_log_level level, const char *msg)
{
	struct logbuf *l = user;
	if (level == RF_LOG_WARN)
		l->warns++;
	snprintf(l->last, sizeof l->last, "%s", msg);
}

int
main(void)
{
	char *dir = t_tmpdir();
	char *p = t_path(dir, "r.rfs");
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U32, 1, (uint64_t[]){256}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 8192;
	CHECK_RC(t_write(p, &s, 100, &cfg, 0), 0);
	uint32_t want[256];
	size_t len;
	struct logbuf lb = {0};
	rf_dataset_config dc;
	rf_dataset_config_init(&dc);
	dc.log = logger;
	dc.log_user = &lb;
	const char *paths[] = {p};
	rf_dataset *ds;
	CHECK_RC(rf_dataset_open(&ds, paths, 1, &dc), 0);
	rf_chunk_info ci;
	CHECK_RC(rf_dataset_chunk_info(ds, 2, &ci), 0);
	uint64_t sample = ci.first_sample + 1;
	/* Transient: three failures, then the data. */
	fail_off = ci.offset + 100;
	fail_left = 3;
	uint32_t got[256];
	CHECK_RC(rf_dataset_read(ds, sample, 0, got, sizeof got, &len), 0);
	CHECK(failed == 3 && lb.warns == 3 && strstr(lb.last, "retry 3 of 5") != NULL);
	t_fill((uint8_t *)want, sizeof want, sample, 0);
	CHECK(len == sizeof got && memcmp(got, want, sizeof got) == 0);
	fail_left = 2;
	CHECK_RC(rf_dataset_verify_chunk(ds, 2), 0);
	/* Lasting: the read fails, naming the shard. */
	fail_left = 1000;
	CHECK_RC(rf_dataset_verify_chunk(ds, 2), -EIO);
	CHECK(strstr(rf_dataset_errmsg(ds), "r.rfs") != NULL);
	CHECK(strstr(rf_dataset_errmsg(ds), "after retries") != NULL);
	fail_left = 0;
	rf_dataset_close(&ds);
	t_rmtree(dir);
	free(p);
	free(dir);
	return 0;
}
