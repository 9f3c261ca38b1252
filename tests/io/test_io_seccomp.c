/* SPDX-License-Identifier: MIT */
/*
 * Description: io_uring blocked the way a container's seccomp profile blocks
 * it (io_uring_setup fails with EPERM, then ENOSYS).  In auto mode the reader
 * falls back to the pread engine, logs why once, and reads correctly; with
 * io_uring forced (engine 1) the open fails with the error and a message.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "io_test.h"

#if defined(__x86_64__)
#define T_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define T_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef T_AUDIT_ARCH
static int
block_io_uring(int err)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, T_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = {.len = sizeof prog / sizeof prog[0], .filter = prog};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog);
}

static void
check_blocked(const char *path, uint64_t size, int err)
{
	struct t_log log = {0};
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, &log);
	const size_t slot_bytes = 64 * 1024;
	const unsigned nslots = 8;
	char *mem = t_map(slot_bytes * nslots);
	rf_io_config cfg;
	rf_io_config_init(&cfg);
	cfg.queue_depth = 8;
	cfg.region = mem;
	cfg.region_bytes = slot_bytes * nslots;

	/* Forced: a clear failure. */
	cfg.engine = 1;
	rf_io *io = NULL;
	CHECK_RC(rf_io_open(&io, &cfg, &diag), -err);
	CHECK(io == NULL);
	CHECK(strstr(diag.msg, "io_uring_queue_init") != NULL);
	printf("forced: %s\n", diag.msg);

	/* Auto: the pread engine, said once. */
	log = (struct t_log){0};
	cfg.engine = 0;
	CHECK_RC(rf_io_open(&io, &cfg, &diag), 0);
	CHECK(strcmp(rf_io_engine(io), "pread") == 0);
	CHECK(log.warns == 1 && strstr(log.text, "io_uring is unavailable") != NULL);
	printf("auto: %s", log.text);
	int file = -1;
	CHECK_RC(rf_io_add_file(io, path, &file), 0);
	t_read_all(io, file, size, 41, mem, slot_bytes, nslots, 8);
	CHECK(log.warns == 1 && log.errors == 0);
	rf_io_close(&io);
	munmap(mem, slot_bytes * nslots);
}
#endif

int
main(void)
{
#ifndef T_AUDIT_ARCH
	printf("no seccomp filter for this architecture in the test\n");
	return T_SKIP;
#else
	const uint64_t size = 1024 * 1024 + 4096 + 1;
	char *path = t_path(NULL, "seccomp.bin");
	t_write_file(path, size, 41);
	if (block_io_uring(EPERM) != 0) {
		printf("cannot install a seccomp filter: %s\n", strerror(errno));
		unlink(path);
		return T_SKIP;
	}
	check_blocked(path, size, EPERM);
	/* A second filter: the kernel applies the one with the highest
	 * precedence, and for two ERRNO actions the later one wins. */
	CHECK(block_io_uring(ENOSYS) == 0);
	check_blocked(path, size, ENOSYS);
	unlink(path);
	free(path);
	return 0;
#endif
}
