/* SPDX-License-Identifier: MIT */
/*
 * Description: packing speed, not a test.  `bench_write DIR [MiB] [zstd-level threads]`
 * writes a source file of MiB (default 1024) bytes in DIR, then times, with
 * the source hot in the page cache:
 *   cp SRC DST                                   (coreutils)
 *   rf_writer_add_columns from an mmap of SRC    (one f32[1024] field)
 *   rf_writer_add_columns from read() blocks     (as a tool reading .npy)
 * each without and with fsync (cp + sync -f), and removes what it wrote.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "fmt_test.h"

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define SAMPLE_BYTES 4096

/* CPU seconds (user + sys) of this process, or of its waited-for
 * children: on a busy machine a steadier measure of the work than wall time. */
static double
cpu(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double
pack(const char *src, const char *dst, uint64_t bytes, int use_mmap, int level, unsigned threads,
     int do_fsync)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_F32, 1, (uint64_t[]){SAMPLE_BYTES / 4}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = level;
	cfg.threads = threads;
	cfg.no_fsync = !do_fsync;
	double t0 = now();
	int fd = open(src, O_RDONLY);
	CHECK(fd >= 0);
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, dst, &s, &cfg), 0);
	const uint64_t block = 64ULL << 20;
	uint64_t n = bytes / SAMPLE_BYTES;
	if (use_mmap) {
		uint8_t *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(p != MAP_FAILED);
		madvise(p, bytes, MADV_SEQUENTIAL);
		for (uint64_t i = 0; i < n; i += block / SAMPLE_BYTES) {
			uint64_t m = n - i < block / SAMPLE_BYTES ? n - i : block / SAMPLE_BYTES;
			rf_column c = {p + i * SAMPLE_BYTES, NULL};
			CHECK_RC(rf_writer_add_columns(w, m, &c), 0);
		}
		munmap(p, bytes);
	} else {
		uint8_t *buf = malloc(block);
		for (uint64_t i = 0; i < n; i += block / SAMPLE_BYTES) {
			uint64_t m = n - i < block / SAMPLE_BYTES ? n - i : block / SAMPLE_BYTES;
			CHECK(pread(fd, buf, m * SAMPLE_BYTES, (off_t)(i * SAMPLE_BYTES)) ==
			      (ssize_t)(m * SAMPLE_BYTES));
			rf_column c = {buf, NULL};
			CHECK_RC(rf_writer_add_columns(w, m, &c), 0);
		}
		free(buf);
	}
	CHECK_RC(rf_writer_close(&w), 0);
	close(fd);
	return now() - t0;
}

/* Flush earlier runs' dirty pages so they do not slow the next run. */
static void
settle(void)
{
	sync();
}

static double
run_cmd(const char *cmd)
{
	double t0 = now();
	CHECK(system(cmd) == 0);
	return now() - t0;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_write DIR [MiB] [zstd-level threads]\n");
		return 2;
	}
	const char *dir = argv[1];
	uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
	int level = argc > 3 ? atoi(argv[3]) : -1;
	unsigned threads = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	uint64_t bytes = mib << 20;
	char *src = t_path(dir, "bench-src.bin"), *dst = t_path(dir, "bench-dst.rfs"),
	     *cpdst = t_path(dir, "bench-cp.bin");

	/* Source: float32-like data, moderately compressible. */
	int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	float *blk = malloc(1 << 20);
	for (uint64_t off = 0; off < bytes; off += 1 << 20) {
		for (size_t i = 0; i < (1 << 20) / sizeof(float); i++)
			blk[i] = (float)(t_mix(off + i) % 1000) / 8.0f;
		CHECK(write(fd, blk, 1 << 20) == 1 << 20);
	}
	free(blk);
	fsync(fd);
	close(fd);
	/* Warm the cache. */
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "cat '%s' > /dev/null", src);
	run_cmd(cmd);

	printf("ringfeed %s, %llu MiB\n", rf_version_string(), (unsigned long long)mib);
	for (int rep = 0; rep < 3; rep++) {
		for (int sync_ = 0; sync_ <= 1; sync_++) {
			if (sync_)
				snprintf(cmd, sizeof cmd, "cp '%s' '%s' && sync -f '%s'", src, cpdst, cpdst);
			else
				snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, cpdst);
			settle();
			double c0 = cpu(RUSAGE_CHILDREN);
			double tcp = run_cmd(cmd);
			double ccp = cpu(RUSAGE_CHILDREN) - c0;
			unlink(cpdst);
			settle();
			c0 = cpu(RUSAGE_SELF);
			double tm = pack(src, dst, bytes, 1, 0, 1, sync_);
			double cm = cpu(RUSAGE_SELF) - c0;
			unlink(dst);
			settle();
			c0 = cpu(RUSAGE_SELF);
			double tr = pack(src, dst, bytes, 0, 0, 1, sync_);
			double cr = cpu(RUSAGE_SELF) - c0;
			unlink(dst);
			printf("%s: cp %.3f s wall %.3f s cpu (%.0f MiB/s) | pack mmap %.3f s wall "
			       "%.3f s cpu (%.0f%% of cp) | pack read %.3f s wall %.3f s cpu (%.0f%% of cp)\n",
			       sync_ ? "with fsync" : "no fsync  ", tcp, ccp, mib / tcp, tm, cm,
			       100 * tcp / tm, tr, cr, 100 * tcp / tr);
			fflush(stdout);
		}
	}
	if (level > 0) {
		settle();
		double tz = pack(src, dst, bytes, 1, level, threads, 0);
		printf("zstd %d, %u threads: %.3f s (%.0f MiB/s)\n", level, threads, tz, mib / tz);
		unlink(dst);
	}
	unlink(src);
	free(src);
	free(dst);
	free(cpdst);
	return 0;
}
