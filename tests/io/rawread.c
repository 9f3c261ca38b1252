/* SPDX-License-Identifier: MIT */
/*
 * rawread: the raw io_uring baseline.  Reads the given files sequentially
 * with O_DIRECT at a given block size and queue depth, into registered
 * buffers with registered files, and prints the throughput (decimal GB/s)
 * and the CPU time per GB.  The loader's throughput is compared with this.
 *
 * With -r it reads every whole block of the files once, in a random order
 * (a uniform shuffle over all files' blocks): the baseline for full
 * shuffling, which reads one sample at a time.
 *
 *   rawread [-b BLOCK] [-q DEPTH] [-B] [-U] [-r] FILE...
 *     -b BLOCK   read size, K/M/G suffixes (default 1M)
 *     -q DEPTH   reads in flight (default 32)
 *     -B         buffered (no O_DIRECT)
 *     -U         plain buffers (no io_uring buffer registration)
 *     -r         random order of whole blocks (the tail under a block is not read)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static uint64_t
parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

struct file {
	int fd;
	uint64_t size, next;
};

int
main(int argc, char **argv)
{
	uint64_t block = 1 << 20;
	unsigned depth = 32;
	int buffered = 0, unregistered = 0, random_order = 0, opt;
	while ((opt = getopt(argc, argv, "b:q:BUr")) != -1) {
		switch (opt) {
		case 'b': block = parse_size(optarg); break;
		case 'q': depth = (unsigned)atoi(optarg); break;
		case 'B': buffered = 1; break;
		case 'U': unregistered = 1; break;
		case 'r': random_order = 1; break;
		default:
			fprintf(stderr, "usage: rawread [-b BLOCK] [-q DEPTH] [-B] [-U] [-r] FILE...\n");
			return 2;
		}
	}
	if (optind >= argc || !block || block % 4096 || block > (1u << 30) || !depth || depth > 4096) {
		fprintf(stderr, "usage: rawread [-b BLOCK] [-q DEPTH] [-B] [-U] [-r] FILE...\n"
				"  BLOCK a multiple of 4096 up to 1G, DEPTH 1..4096\n");
		return 2;
	}
	unsigned nfiles = (unsigned)(argc - optind);
	struct file *files = calloc(nfiles, sizeof *files);
	int *fds = calloc(nfiles, sizeof *fds);
	uint64_t total = 0;
	for (unsigned i = 0; i < nfiles; i++) {
		const char *path = argv[optind + (int)i];
		files[i].fd = open(path, O_RDONLY | (buffered ? 0 : O_DIRECT));
		struct stat st;
		if (files[i].fd < 0 || fstat(files[i].fd, &st) != 0) {
			fprintf(stderr, "rawread: %s: %s\n", path, strerror(errno));
			return 1;
		}
		files[i].size = (uint64_t)st.st_size;
		fds[i] = files[i].fd;
		total += files[i].size;
	}

	struct io_uring ring;
	int ret = io_uring_queue_init(depth, &ring, 0);
	if (ret < 0) {
		fprintf(stderr, "rawread: io_uring_queue_init: %s\n", strerror(-ret));
		return 1;
	}
	size_t bytes = (size_t)block * depth;
	char *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "rawread: mmap %zu bytes: %s\n", bytes, strerror(errno));
		return 1;
	}
	struct iovec *iov = calloc(depth, sizeof *iov);
	for (unsigned i = 0; i < depth; i++) {
		iov[i].iov_base = mem + (size_t)i * block;
		iov[i].iov_len = block;
	}
	int fixed = 0;
	if (!unregistered) {
		ret = io_uring_register_buffers(&ring, iov, depth);
		if (ret < 0)
			fprintf(stderr, "rawread: buffers not registered (%s)\n", strerror(-ret));
		else
			fixed = 1;
	}
	int fixed_files = io_uring_register_files(&ring, fds, nfiles) == 0;

	/* Random order: every whole block of every file, (file << 40 | block),
	 * shuffled by Fisher-Yates with a fixed xorshift generator. */
	uint64_t *order = NULL, norder = 0, next_order = 0;
	if (random_order) {
		for (unsigned i = 0; i < nfiles; i++)
			norder += files[i].size / block;
		order = malloc((norder ? norder : 1) * sizeof *order);
		if (!order) {
			fprintf(stderr, "rawread: out of memory for %llu blocks\n",
				(unsigned long long)norder);
			return 1;
		}
		uint64_t k = 0;
		total = 0;
		for (unsigned i = 0; i < nfiles; i++)
			for (uint64_t j = 0; j < files[i].size / block; j++)
				order[k++] = (uint64_t)i << 40 | j;
		total = norder * block;
		uint64_t x = 0x9E3779B97F4A7C15ull;
		for (uint64_t i = norder; i > 1; i--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			uint64_t j = x % i, t = order[i - 1];
			order[i - 1] = order[j];
			order[j] = t;
		}
	}

	/* Slot i holds (file, offset) of the read in flight into buffer i. */
	unsigned *slot_file = calloc(depth, sizeof *slot_file);
	unsigned *free_bufs = calloc(depth, sizeof *free_bufs);
	unsigned nfree = depth, cur = 0, inflight = 0;
	for (unsigned i = 0; i < depth; i++)
		free_bufs[i] = i;
	uint64_t got = 0;
	double t0 = now(), c0 = cpu_seconds();
	for (;;) {
		while (nfree && random_order && next_order < norder) {
			unsigned fi = (unsigned)(order[next_order] >> 40);
			uint64_t off = (order[next_order] & ((1ull << 40) - 1)) * block;
			next_order++;
			unsigned b = free_bufs[--nfree];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			int fd = fixed_files ? (int)fi : files[fi].fd;
			if (fixed)
				io_uring_prep_read_fixed(sqe, fd, iov[b].iov_base, (unsigned)block, off, (int)b);
			else
				io_uring_prep_read(sqe, fd, iov[b].iov_base, (unsigned)block, off);
			if (fixed_files)
				sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_sqe_set_data64(sqe, b);
			slot_file[b] = fi;
			inflight++;
		}
		while (nfree && !random_order && cur < nfiles) {
			struct file *f = &files[cur];
			if (f->next >= f->size) {
				cur++;
				continue;
			}
			unsigned b = free_bufs[--nfree];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			int fd = fixed_files ? (int)cur : f->fd;
			if (fixed)
				io_uring_prep_read_fixed(sqe, fd, iov[b].iov_base, (unsigned)block, f->next, (int)b);
			else
				io_uring_prep_read(sqe, fd, iov[b].iov_base, (unsigned)block, f->next);
			if (fixed_files)
				sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_sqe_set_data64(sqe, b);
			slot_file[b] = cur;
			f->next += block;
			inflight++;
		}
		if (!inflight)
			break;
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR) {
			fprintf(stderr, "rawread: io_uring_enter: %s\n", strerror(-ret));
			return 1;
		}
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			n++;
			if (cqe->res < 0) {
				fprintf(stderr, "rawread: read of file %u: %s\n",
					slot_file[cqe->user_data], strerror(-cqe->res));
				return 1;
			}
			got += (uint64_t)cqe->res;
			free_bufs[nfree++] = (unsigned)cqe->user_data;
			inflight--;
		}
		io_uring_cq_advance(&ring, n);
	}
	double secs = now() - t0, cpu = cpu_seconds() - c0;
	if (got != total)
		fprintf(stderr, "rawread: read %llu bytes of %llu (short reads are not resubmitted)\n",
			(unsigned long long)got, (unsigned long long)total);
	printf("%llu bytes in %.3f s: %.3f GB/s (%s%s%s, block %llu, depth %u, %s buffers), "
	       "%.3f CPU-s/GB\n",
	       (unsigned long long)got, secs, (double)got / secs / 1e9,
	       random_order ? "random, " : "", buffered ? "buffered" : "O_DIRECT",
	       fixed_files ? ", registered files" : "", (unsigned long long)block, depth,
	       fixed ? "registered" : "plain", got ? cpu / ((double)got / 1e9) : 0.0);
	io_uring_queue_exit(&ring);
	munmap(mem, bytes);
	free(order);
	return 0;
}
