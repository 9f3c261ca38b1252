/* SPDX-License-Identifier: MIT */
/*
 * Description: files on tmpfs (/dev/shm) read with O_DIRECT requested, on
 * both engines.  Where the file system refuses O_DIRECT (tmpfs before Linux
 * 6.6) the refusal is real; where it accepts it, RINGFEED_IO_REFUSE_DIRECT
 * makes the reader see the same EINVAL.  Either way the reader falls back to
 * buffered reads for those files, logs it exactly once, reports
 * rf_io_direct() = 0, and every byte read is right.
 */
#include "io_test.h"

int
main(void)
{
	struct stat st;
	if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode) || access("/dev/shm", W_OK) != 0) {
		printf("no writable /dev/shm\n");
		return T_SKIP;
	}
	const uint64_t size = 1024 * 1024 + 777;
	char *a = t_path("/dev/shm", "a.bin");
	char *b = t_path("/dev/shm", "b.bin");
	t_write_file(a, size, 11);
	t_write_file(b, size, 12);
	if (t_direct_ok(a)) {
		RF_TEST_REQUIRE_HOOKS("the simulated O_DIRECT refusal");
		printf("this tmpfs accepts O_DIRECT: simulating the refusal\n");
		setenv("RINGFEED_IO_REFUSE_DIRECT", "1", 1);
	} else {
		printf("this tmpfs refuses O_DIRECT\n");
	}

	int ran = 0;
	for (int engine = 1; engine <= 2; engine++) {
		struct t_log log = {0};
		rf_diag diag;
		rf_diag_init(&diag, t_log_fn, &log);
		const size_t slot_bytes = 64 * 1024;
		const unsigned nslots = 10;
		char *mem = t_map(slot_bytes * nslots);
		rf_io_config cfg;
		rf_io_config_init(&cfg);
		cfg.queue_depth = 8;
		cfg.engine = engine;
		cfg.region = mem;
		cfg.region_bytes = slot_bytes * nslots;
		rf_io *io = NULL;
		int ret = rf_io_open(&io, &cfg, &diag);
		if (ret < 0 && engine == 1) {
			printf("io_uring unavailable: %s\n", diag.msg);
			munmap(mem, slot_bytes * nslots);
			continue;
		}
		CHECK_RC(ret, 0);
		int fa = -1, fb = -1;
		CHECK_RC(rf_io_add_file(io, a, &fa), 0);
		CHECK_RC(rf_io_add_file(io, b, &fb), 0);
		CHECK(fa == 0 && fb == 1);
		CHECK(rf_io_direct(io) == 0);
		/* Logged once, naming the file and O_DIRECT. */
		CHECK(log.warns == 1);
		CHECK(strstr(log.text, "O_DIRECT") != NULL);
		CHECK(strstr(log.text, a) != NULL);
		/* Buffered files take unaligned reads too. */
		t_read_all(io, fa, size, 11, mem, slot_bytes, nslots, 8);
		t_read_all(io, fb, size, 12, mem, slot_bytes, nslots, 8);
		rf_io_done d;
		CHECK_RC(rf_io_read(io, fb, 5, mem + 3, 1000, 99), 0);
		CHECK(rf_io_wait(io, &d, 1, 1) == 1);
		CHECK(d.tag == 99 && d.res == 1000);
		for (int i = 0; i < 1000; i++)
			CHECK((uint8_t)mem[3 + i] == t_byte(12, 5 + (uint64_t)i));
		CHECK(log.warns == 1 && log.errors == 0);
		printf("engine %s: fallback logged once, data correct\n", rf_io_engine(io));
		rf_io_close(&io);
		munmap(mem, slot_bytes * nslots);
		ran++;
	}
	unlink(a);
	unlink(b);
	free(a);
	free(b);
	CHECK(ran >= 1);
	return 0;
}
