/* SPDX-License-Identifier: MIT */
/*
 * Description: the reader's error paths on both engines.  A read that fails
 * (a directory read as a file: EISDIR; an I/O error injected at a chosen file
 * offset with the test-only RINGFEED_IO_FAIL_AT hook) completes with -errno
 * in its own result and leaves a message naming the file and the offset,
 * while the other reads still complete with correct data.  Misaligned
 * O_DIRECT reads, unknown file handles and missing files are refused with a
 * message; a full queue answers -EAGAIN.  A transient I/O error (the hook
 * with RINGFEED_IO_FAIL_TIMES) is retried with backoff, counted, logged as a
 * warning, and the data read is the file's; one that outlasts the retries
 * fails the read.
 */
#include "io_test.h"

static rf_io *
open_io(int engine, unsigned qd, int direct, rf_diag *diag, int *skip)
{
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.queue_depth = qd;
	cfg.engine = engine;
	cfg.direct = direct;
	rf_io *io = NULL;
	int ret = rf_io_open(&io, &cfg, diag);
	if (ret < 0 && engine == 1) {
		*skip = 1;
		return NULL;
	}
	CHECK_RC(ret, 0);
	return io;
}

/* Read the whole file in 64 KiB blocks with the fail hook at `fail_at`
 * failing `times` times (0: always); returns the blocks that failed and
 * checks the others' bytes. */
static unsigned
read_with_fault(int engine, const char *path, char *buf, uint64_t size, const char *times,
		uint64_t *retries, struct t_log *log)
{
	const size_t block = 64 * 1024;
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, log);
	setenv("RINGFEED_IO_FAIL_AT", "196708", 1);
	setenv("RINGFEED_IO_FAIL_TIMES", times, 1);
	int skip = 0;
	rf_io *io = open_io(engine, 8, 1, &diag, &skip);
	unsetenv("RINGFEED_IO_FAIL_AT");
	unsetenv("RINGFEED_IO_FAIL_TIMES");
	if (skip)
		return UINT32_MAX;
	int file = -1;
	CHECK_RC(rf_io_add_file(io, path, &file), 0);
	memset(buf, 0, size);
	unsigned nblocks = (unsigned)(size / block), issued = 0, got = 0, failed = 0;
	rf_io_done d[16];
	while (got < nblocks) {
		while (issued < nblocks && rf_io_inflight(io) < 8) {
			CHECK_RC(rf_io_read(io, file, (uint64_t)issued * block,
					    buf + (size_t)issued * block, block, issued), 0);
			issued++;
		}
		int n = rf_io_wait(io, d, 16, 1);
		CHECK(n >= 1);
		for (int k = 0; k < n; k++, got++) {
			if (d[k].res < 0) {
				CHECK(d[k].tag == 3 && d[k].res == -EIO);
				failed++;
				continue;
			}
			CHECK(d[k].res == (int64_t)block);
			const uint8_t *p = (const uint8_t *)buf + d[k].tag * block;
			for (size_t i = 0; i < block; i++)
				CHECK(p[i] == t_byte(21, d[k].tag * block + i));
		}
	}
	*retries = rf_io_retries(io);
	rf_io_close(&io);
	return failed;
}

int
main(void)
{
	RF_TEST_REQUIRE_HOOKS("injected read errors (RINGFEED_IO_FAIL_AT)");
	const uint64_t size = 1024 * 1024;
	const size_t block = 64 * 1024;
	const uint64_t fail_at = 3 * block + 100;
	char *path = t_path(NULL, "err.bin");
	t_write_file(path, size, 21);
	char *dir = t_path(NULL, "dir");
	CHECK(mkdir(dir, 0755) == 0);
	char *buf = t_map(size);
	char want[64];
	snprintf(want, sizeof want, "offset %llu", (unsigned long long)(3 * block));

	int tested = 0;
	for (int engine = 1; engine <= 2; engine++) {
		struct t_log log = {0};
		rf_diag diag;
		rf_diag_init(&diag, t_log_fn, &log);
		int skip = 0;

		/* A directory opens, but reading it fails. */
		rf_io *io = open_io(engine, 4, 0, &diag, &skip);
		if (skip) {
			printf("io_uring unavailable: %s\n", diag.msg);
			continue;
		}
		int fd_dir = -1;
		CHECK_RC(rf_io_add_file(io, dir, &fd_dir), 0);
		CHECK_RC(rf_io_read(io, fd_dir, 0, buf, 4096, 5), 0);
		rf_io_done d[16];
		CHECK(rf_io_wait(io, d, 16, 1) == 1);
		CHECK(d[0].tag == 5 && d[0].res == -EISDIR);
		CHECK(strstr(diag.msg, dir) != NULL);
		CHECK(strstr(diag.msg, "offset 0") != NULL);
		CHECK(log.errors == 1);

		/* Unknown handle, missing file, empty read. */
		CHECK_RC(rf_io_read(io, 7, 0, buf, 4096, 0), -EBADF);
		int f = -1;
		CHECK_RC(rf_io_add_file(io, "/nonexistent/rf-io-missing", &f), -ENOENT);
		CHECK(strstr(diag.msg, "/nonexistent/rf-io-missing") != NULL);
		CHECK_RC(rf_io_read(io, fd_dir, 0, buf, 0, 0), -EINVAL);
		rf_io_close(&io);

		/* Injected EIO in the 4th block of a direct read of the file. */
		setenv("RINGFEED_IO_FAIL_AT", "196708", 1); /* 3 * 65536 + 100 */
		CHECK(fail_at == 196708);
		log = (struct t_log){0};
		io = open_io(engine, 8, 1, &diag, &skip);
		unsetenv("RINGFEED_IO_FAIL_AT");
		int file = -1;
		CHECK_RC(rf_io_add_file(io, path, &file), 0);
		memset(buf, 0, size);
		unsigned nblocks = (unsigned)(size / block);
		unsigned issued = 0, got = 0, failed = 0;
		while (got < nblocks) {
			while (issued < nblocks && rf_io_inflight(io) < 8) {
				CHECK_RC(rf_io_read(io, file, (uint64_t)issued * block, buf + (size_t)issued * block,
						    block, issued),
					 0);
				issued++;
			}
			int n = rf_io_wait(io, d, 16, 1);
			CHECK(n >= 1);
			for (int k = 0; k < n; k++, got++) {
				if (d[k].tag == 3) {
					CHECK(d[k].res == -EIO);
					failed++;
					continue;
				}
				CHECK(d[k].res == (int64_t)block);
				const uint8_t *p = (const uint8_t *)buf + d[k].tag * block;
				for (size_t i = 0; i < block; i++)
					CHECK(p[i] == t_byte(21, d[k].tag * block + i));
			}
		}
		CHECK(failed == 1);
		CHECK(log.errors == 1);
		CHECK(strstr(diag.msg, path) != NULL);
		CHECK(strstr(diag.msg, want) != NULL);
		printf("%s: %s\n", rf_io_engine(io), diag.msg);

		/* O_DIRECT needs aligned buffer, offset and length. */
		if (rf_io_direct(io)) {
			CHECK_RC(rf_io_read(io, file, 100, buf, 4096, 0), -EINVAL);
			CHECK_RC(rf_io_read(io, file, 0, buf + 1, 4096, 0), -EINVAL);
			CHECK_RC(rf_io_read(io, file, 0, buf, 4000, 0), -EINVAL);
			CHECK(strstr(diag.msg, "aligned") != NULL);
		}

		/* A full queue is back-pressure, not an error. */
		for (unsigned i = 0; i < 8; i++)
			CHECK_RC(rf_io_read(io, file, (uint64_t)i * block, buf + (size_t)i * block, block, i), 0);
		CHECK_RC(rf_io_read(io, file, 0, buf, block, 8), -EAGAIN);
		CHECK(rf_io_inflight(io) == 8);
		/* min 0: whatever is done, without blocking. */
		int n = rf_io_wait(io, d, 16, 0);
		CHECK(n >= 0 && n <= 8);
		/* Closing with reads in flight waits for them. */
		rf_io_close(&io);

		/* A transient error: retried, counted, the data intact. */
		uint64_t retries = 0;
		log = (struct t_log){0};
		CHECK(read_with_fault(engine, path, buf, size, "3", &retries, &log) == 0);
		CHECK(retries == 3 && log.warns == 3 && log.errors == 0);
		CHECK(strstr(log.text, "retry 1 of 5") != NULL && strstr(log.text, path) != NULL);
		/* One that outlasts the retries fails the read, and says so. */
		log = (struct t_log){0};
		CHECK(read_with_fault(engine, path, buf, size, "6", &retries, &log) == 1);
		CHECK(retries == 5 && log.errors == 1);
		CHECK(strstr(log.text, "after retries") != NULL);
		tested++;
	}
	CHECK(tested >= 1);
	rmdir(dir);
	unlink(path);
	free(dir);
	free(path);
	munmap(buf, size);
	return 0;
}
