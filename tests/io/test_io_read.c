/* SPDX-License-Identifier: MIT */
/*
 * Description: the reader on both engines (io_uring, pread), with O_DIRECT and
 * buffered files, at queue depths 1, 8 and 64, into a registered region and
 * into memory outside it: every read completes with the right length (the
 * last one is an aligned read past an unaligned end of file) and every byte
 * matches the file.  Also: RINGFEED_IO forces the engine, and a file opened
 * with O_DIRECT reports rf_io_direct() = 1.  With the test hook
 * RINGFEED_IO_MAX_PIECE=4096 every read goes out in 4 KiB pieces, which runs
 * the resubmission path of short reads on every read.  Where the process may
 * lock the region (CAP_IPC_LOCK or no RLIMIT_MEMLOCK), io_uring registers it.
 * 300 files in one reader (more than io_uring's first registered-file table
 * holds): each reads back right, interleaved.
 */
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "io_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#ifdef T_ASAN
#include <sanitizer/asan_interface.h>

/* Under ASan, memory an io_uring read is landing in is poisoned until the
 * read completes. */
static void
check_poison(const char *path)
{
	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.engine = 1;
	rf_io *io = NULL;
	if (rf_io_open(&io, &cfg, &diag) != 0)
		return;
	char *mem = t_map(65536);
	int f;
	CHECK_RC(rf_io_add_file(io, path, &f), 0);
	CHECK(!__asan_address_is_poisoned(mem + 4096));
	CHECK_RC(rf_io_read(io, f, 0, mem, 65536, 1), 0);
	CHECK(__asan_address_is_poisoned(mem + 4096));
	rf_io_done d;
	CHECK(rf_io_wait(io, &d, 1, 1) == 1 && d.res == 65536);
	CHECK(!__asan_address_is_poisoned(mem + 4096));
	rf_io_close(&io);
	munmap(mem, 65536);
	printf("ASan: buffers in flight are poisoned\n");
}
#endif

static int
may_register(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &hdr, data) == 0 &&
	    ((data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1))
		return 1;
	struct rlimit rl;
	return getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY;
}

static const char *
expected_engine(int engine)
{
	return engine == 2 ? "pread" : "io_uring";
}

static int
run(const char *path, uint64_t size, int engine, int direct, unsigned qd, int use_region)
{
	struct t_log log = {0};
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, &log);
	const size_t slot_bytes = 64 * 1024;
	unsigned nslots = qd + 2;
	char *mem = t_map(slot_bytes * nslots);

	rf_io_config cfg;
	rf_io_config_init(&cfg);
	CHECK(cfg.queue_depth == 32 && cfg.direct == 1 && cfg.engine == 0);
	cfg.queue_depth = qd;
	cfg.direct = direct;
	cfg.engine = engine;
	if (use_region) {
		cfg.region = mem;
		cfg.region_bytes = slot_bytes * nslots;
	}
	rf_io *io = NULL;
	int ret = rf_io_open(&io, &cfg, &diag);
	if (ret < 0 && engine == 1 && (ret == -ENOSYS || ret == -EPERM)) {
		printf("io_uring unavailable here (%s): skipping its configurations\n", diag.msg);
		munmap(mem, slot_bytes * nslots);
		return T_SKIP;
	}
	CHECK_RC(ret, 0);
	CHECK(strncmp(rf_io_engine(io), expected_engine(engine), strlen(expected_engine(engine))) == 0);
	if (engine == 1 && use_region && may_register())
		CHECK(strcmp(rf_io_engine(io), "io_uring") == 0);
	int file = -1;
	CHECK_RC(rf_io_add_file(io, path, &file), 0);
	CHECK(file == 0);
	if (direct && t_direct_ok(path))
		CHECK(rf_io_direct(io) == 1);
	if (!direct)
		CHECK(rf_io_direct(io) == 0);
	unsigned reads = t_read_all(io, file, size, 7, mem, slot_bytes, nslots, qd);
	/* Read it again: request slots and the ready ring wrap around. */
	reads += t_read_all(io, file, size, 7, mem, slot_bytes, nslots, qd);
	printf("engine=%s direct=%d qd=%u region=%d: %u reads ok\n", rf_io_engine(io), direct, qd,
	       use_region, reads);
	CHECK(log.errors == 0);
	rf_io_close(&io);
	CHECK(io == NULL);
	rf_io_close(&io); /* NULL is a no-op */
	munmap(mem, slot_bytes * nslots);
	return 0;
}

static void
many_files(int engine)
{
	enum { NF = 300 };
	struct t_log log = {0};
	rf_diag diag;
	setenv("RINGFEED_LOG", "debug", 1);
	rf_diag_init(&diag, t_log_fn, &log);
	unsetenv("RINGFEED_LOG");
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.queue_depth = 16;
	cfg.engine = engine;
	const size_t slot = 8192;
	char *mem = t_map(slot * 16);
	cfg.region = mem;
	cfg.region_bytes = slot * 16;
	rf_io *io = NULL;
	CHECK_RC(rf_io_open(&io, &cfg, &diag), 0);
	char *paths[NF];
	for (int i = 0; i < NF; i++) {
		char name[32];
		snprintf(name, sizeof name, "many-%d.bin", i);
		paths[i] = t_path(NULL, name);
		t_write_file(paths[i], 4096 + (uint64_t)i * 7, 1000 + (uint64_t)i);
	}
	/* Files are added while reads of earlier ones are in flight (the
	 * file table grows under them); slot k of the region holds the read
	 * of a file i with i % 16 == k. */
	rf_io_done d[16];
	int done = 0, busy[16] = {0};
	for (int i = 0; i < NF || done < NF;) {
		if (i < NF && !busy[i % 16]) {
			busy[i % 16] = 1;
			int f = -1;
			CHECK_RC(rf_io_add_file(io, paths[i], &f), 0);
			CHECK(f == i);
			CHECK_RC(rf_io_read(io, f, 0, mem + (size_t)(i % 16) * slot, slot, (uint64_t)i), 0);
			i++;
			continue;
		}
		int r = rf_io_wait(io, d, 1, 1);
		CHECK(r == 1);
		int k = (int)d[0].tag;
		CHECK(k < i && busy[k % 16]);
		busy[k % 16] = 0;
		CHECK(d[0].res == 4096 + (int64_t)k * 7);
		const uint8_t *p = (const uint8_t *)mem + (size_t)(k % 16) * slot;
		for (int64_t b = 0; b < d[0].res; b++)
			CHECK(p[b] == t_byte(1000 + (uint64_t)k, (uint64_t)b));
		done++;
	}
	CHECK(log.errors == 0);
	/* The registered-file table grew instead of being given up. */
	CHECK(strstr(log.text, "registered files disabled") == NULL);
	printf("engine %s: %d files ok\n", rf_io_engine(io), NF);
	rf_io_close(&io);
	for (int i = 0; i < NF; i++) {
		unlink(paths[i]);
		free(paths[i]);
	}
	munmap(mem, slot * 16);
}

int
main(void)
{
	/* Unaligned end: the last read comes back short. */
	const uint64_t size = 3 * 1024 * 1024 + 12345;
	char *path = t_path(NULL, "read.bin");
	t_write_file(path, size, 7);

	static const unsigned depths[] = {1, 8, 64};
	int uring_skipped = 0;
	for (int engine = 1; engine <= 2; engine++) {
		for (int direct = 1; direct >= 0; direct--) {
			for (unsigned d = 0; d < 3; d++) {
				if (engine == 1 && uring_skipped)
					continue;
				int r = run(path, size, engine, direct, depths[d], 1);
				if (r == T_SKIP)
					uring_skipped = 1;
			}
		}
		if (engine == 1 && uring_skipped)
			continue;
		/* Memory outside any registered region. */
		run(path, size, engine, 1, 8, 0);
		/* Every read in 4 KiB pieces: resubmission for the rest. */
		if (RF_TEST_HOOKS) {
			setenv("RINGFEED_IO_MAX_PIECE", "4096", 1);
			run(path, size, engine, 1, 8, 1);
			run(path, size, engine, 0, 64, 1);
			unsetenv("RINGFEED_IO_MAX_PIECE");
		}
	}

#ifdef T_ASAN
	if (!uring_skipped)
		check_poison(path);
#endif
	if (!uring_skipped)
		many_files(1);
	many_files(2);

	/* The environment overrides the config. */
	struct t_log log = {0};
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, &log);
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.engine = 1;
	setenv("RINGFEED_IO", "pread", 1);
	rf_io *io = NULL;
	CHECK_RC(rf_io_open(&io, &cfg, &diag), 0);
	CHECK(strcmp(rf_io_engine(io), "pread") == 0);
	rf_io_close(&io);
	if (!uring_skipped) {
		cfg.engine = 2;
		setenv("RINGFEED_IO", "uring", 1);
		CHECK_RC(rf_io_open(&io, &cfg, &diag), 0);
		CHECK(strncmp(rf_io_engine(io), "io_uring", 8) == 0);
		rf_io_close(&io);
	}
	unsetenv("RINGFEED_IO");

	/* A bad engine number is a usage error. */
	cfg.engine = 3;
	CHECK_RC(rf_io_open(&io, &cfg, &diag), RF_EUSAGE);
	CHECK(io == NULL);

	unlink(path);
	free(path);
	return 0;
}
