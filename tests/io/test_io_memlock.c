/* SPDX-License-Identifier: MIT */
/*
 * Description: with RLIMIT_MEMLOCK below the size of the read region (and
 * without CAP_IPC_LOCK, which this test drops if it has it), the io_uring
 * engine does not register the region: it logs why, with the numbers and how
 * to raise the limit, reports "io_uring-unregistered", and reads correctly
 * into the same memory.
 */
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "io_test.h"

static void
drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	CHECK(syscall(SYS_capget, &hdr, data) == 0);
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	CHECK(syscall(SYS_capset, &hdr, data) == 0);
}

int
main(void)
{
	const rlim_t limit = 64 * 1024;
	struct rlimit rl;
	CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < limit) {
		printf("hard RLIMIT_MEMLOCK below 64 KiB already\n");
	} else {
		rl.rlim_cur = limit;
		CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	}
	drop_cap_ipc_lock();

	const uint64_t size = 2 * 1024 * 1024 + 4096 * 3 + 10;
	char *path = t_path(NULL, "memlock.bin");
	t_write_file(path, size, 31);

	struct t_log log = {0};
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, &log);
	const size_t slot_bytes = 64 * 1024;
	const unsigned nslots = 16; /* 1 MiB: far above the limit */
	char *mem = t_map(slot_bytes * nslots);
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.queue_depth = 16;
	cfg.engine = 1;
	cfg.region = mem;
	cfg.region_bytes = slot_bytes * nslots;
	rf_io *io = NULL;
	int ret = rf_io_open(&io, &cfg, &diag);
	if (ret < 0) {
		printf("io_uring unavailable: %s\n", diag.msg);
		unlink(path);
		return T_SKIP;
	}
	printf("%s", log.text);
	CHECK(strcmp(rf_io_engine(io), "io_uring-unregistered") == 0);
	CHECK(log.warns == 1);
	CHECK(strstr(log.text, "RLIMIT_MEMLOCK") != NULL);
	CHECK(strstr(log.text, "1048576") != NULL); /* the region's size */
	CHECK(strstr(log.text, "65536") != NULL);   /* the limit */
	CHECK(strstr(log.text, "ulimit -l") != NULL);
	int file = -1;
	CHECK_RC(rf_io_add_file(io, path, &file), 0);
	t_read_all(io, file, size, 31, mem, slot_bytes, nslots, 16);
	CHECK(log.errors == 0);
	rf_io_close(&io);
	munmap(mem, slot_bytes * nslots);
	unlink(path);
	free(path);
	return 0;
}
