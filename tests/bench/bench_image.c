/* SPDX-License-Identifier: MIT */
/*
 * Images per second on one core (this thread): the image module's decode +
 * transform against libjpeg-turbo's plain decode of the same files, the
 * limit a decode step can approach.
 *
 *   bench_image [--seconds S] [--size N] [--case NAME] FILE...
 *
 * --case NAME runs that case alone (for a profiler: perf record -g).
 *
 * Each case loops over the files (read into memory first) for S seconds
 * (default 3) and prints images per CPU-second of this thread and that
 * rate as a share of the plain decode's:
 *   tj-decode      tjDecompress2 to RGB at full size (the limit)
 *   train          rf_image_load, random-resized-crop + flip to N x N
 *                  (N = 224), DCT-domain scaling on (the default)
 *   train-nodct    the same with DCT scaling off
 *   train-full     DCT scaling on, but the whole JPEG decoded each time
 *                  (full_decode: no region decoding)
 *   eval           resize the shorter side to N x 8/7, centre crop N x N
 * Make JPEGs to run it on with tests/bench/make-images.py.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turbojpeg.h>

#include "decode/image.h"

typedef struct blob {
	unsigned char *p;
	size_t len;
} blob;

/* This thread's CPU time: the figure is images per CPU-second of one core,
 * which a machine shared with other work does not distort as much as wall
 * time (the wall rate is printed too). */
static double
cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
slurp(const char *path, blob *b)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		if (f)
			fclose(f);
		return -1;
	}
	b->p = malloc((size_t)n + 1);
	b->len = (size_t)n;
	if (!b->p || fread(b->p, 1, b->len, f) != b->len) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

int
main(int argc, char **argv)
{
	double seconds = 3.0;
	uint32_t size = 224;
	int first = 1;
	blob *files;
	size_t nfiles = 0, maxpix = 0;
	double base = 0;
	const char *only = NULL; /* --case NAME: that case alone (for a profiler) */

	while (first < argc && strncmp(argv[first], "--", 2) == 0) {
		if (!strcmp(argv[first], "--seconds") && first + 1 < argc)
			seconds = atof(argv[first + 1]);
		else if (!strcmp(argv[first], "--size") && first + 1 < argc)
			size = (uint32_t)atoi(argv[first + 1]);
		else if (!strcmp(argv[first], "--case") && first + 1 < argc)
			only = argv[first + 1];
		else {
			fprintf(stderr, "usage: bench_image [--seconds S] [--size N] [--case NAME] FILE...\n");
			return 2;
		}
		first += 2;
	}
	if (first >= argc || size < 1) {
		fprintf(stderr, "usage: bench_image [--seconds S] [--size N] [--case NAME] FILE...\n");
		return 2;
	}
	files = calloc((size_t)(argc - first), sizeof *files);
	rf_image_scratch s;
	rf_image_scratch_init(&s);
	for (int i = first; i < argc; i++) {
		rf_image_info info;
		if (slurp(argv[i], &files[nfiles]) < 0) {
			fprintf(stderr, "%s: cannot read\n", argv[i]);
			return 1;
		}
		if (rf_image_probe(files[nfiles].p, files[nfiles].len, &info, &s) < 0 ||
		    info.format != RF_IMAGE_JPEG) {
			fprintf(stderr, "%s: not a JPEG (%s)\n", argv[i], s.msg);
			return 1;
		}
		if ((size_t)info.width * info.height > maxpix)
			maxpix = (size_t)info.width * info.height;
		nfiles++;
	}
	unsigned char *rgb = malloc(maxpix * 4);
	unsigned char *out = malloc((size_t)size * size * 3);
	tjhandle tj = tjInitDecompress();
	const char *names[] = {"tj-decode", "train", "train-nodct", "train-full", "eval"};
	printf("%zu JPEG files, %.1f s per case, output %ux%u, one thread\n", nfiles, seconds,
	       size, size);
	for (int c = 0; c < 5; c++) {
		if (only && strcmp(only, names[c]))
			continue;
		rf_image_transform t;
		uint64_t n = 0;
		double t0 = now(), c0 = cpu_now(), el;
		if (c == 4)
			rf_image_transform_eval(&t, size, size, size * 8 / 7);
		else
			rf_image_transform_train(&t, size, size);
		t.dct_scale = c != 2;
		t.full_decode = c == 3;
		do {
			for (size_t i = 0; i < nfiles; i++, n++) {
				const blob *b = &files[i];
				int rc;
				if (c == 0) {
					int w, h, sub, cs;
					rc = tjDecompressHeader3(tj, b->p, (unsigned long)b->len, &w, &h,
								 &sub, &cs);
					if (rc == 0)
						rc = tjDecompress2(tj, b->p, (unsigned long)b->len, rgb, w,
								   0, h, TJPF_RGB, 0);
				} else {
					rc = rf_image_load(b->p, b->len, &t, 1, 0, n, out, NULL, &s);
				}
				if (rc < 0) {
					fprintf(stderr, "%s: failed: %s\n", names[c],
						c ? s.msg : tjGetErrorStr2(tj));
					return 1;
				}
			}
			el = now() - t0;
		} while (el < seconds);
		double rate = (double)n / (cpu_now() - c0);
		if (c == 0 || base == 0)
			base = rate;
		printf("%-12s %9.1f images/CPU-s  %7.3f ms/image  %5.2fx the plain decode  "
		       "(wall %.1f images/s)\n", names[c], rate, 1e3 / rate, rate / base,
		       (double)n / el);
	}
	tjDestroy(tj);
	rf_image_scratch_fini(&s);
	for (size_t i = 0; i < nfiles; i++)
		free(files[i].p);
	free(files);
	free(rgb);
	free(out);
	return 0;
}
