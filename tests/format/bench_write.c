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
#define ROUNDS 5

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

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

	printf("ringfeed %s, %llu MiB, %d rounds (min and median wall s, median cpu s)\n",
	       rf_version_string(), (unsigned long long)mib, ROUNDS);
	/* Rounds interleave the methods so that a busy moment of the machine
	 * hits them alike; min and median are reported. */
	static const char *names[] = {"cp", "pack mmap", "pack read"};
	for (int sync_ = 0; sync_ <= 1; sync_++) {
		double wall[3][ROUNDS], cput[3][ROUNDS];
		for (int r = 0; r < ROUNDS; r++) {
			if (sync_)
				snprintf(cmd, sizeof cmd, "cp '%s' '%s' && sync -f '%s'", src, cpdst, cpdst);
			else
				snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, cpdst);
			settle();
			double c0 = cpu(RUSAGE_CHILDREN);
			wall[0][r] = run_cmd(cmd);
			cput[0][r] = cpu(RUSAGE_CHILDREN) - c0;
			unlink(cpdst);
			for (int m = 1; m <= 2; m++) {
				settle();
				c0 = cpu(RUSAGE_SELF);
				wall[m][r] = pack(src, dst, bytes, m == 1, 0, 1, sync_);
				cput[m][r] = cpu(RUSAGE_SELF) - c0;
				unlink(dst);
			}
		}
		for (int m = 0; m < 3; m++) {
			qsort(wall[m], ROUNDS, sizeof(double), cmp_double);
			qsort(cput[m], ROUNDS, sizeof(double), cmp_double);
		}
		for (int m = 0; m < 3; m++)
			printf("%s %-9s: min %.3f s (%4.0f MiB/s, %3.0f%% of cp)  median %.3f s "
			       "(%3.0f%% of cp)  cpu %.3f s\n",
			       sync_ ? "fsync   " : "no fsync", names[m], wall[m][0], mib / wall[m][0],
			       100 * wall[0][0] / wall[m][0], wall[m][ROUNDS / 2],
			       100 * wall[0][ROUNDS / 2] / wall[m][ROUNDS / 2], cput[m][ROUNDS / 2]);
		fflush(stdout);
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
