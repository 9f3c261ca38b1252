/* SPDX-License-Identifier: MIT */
/*
 * Writes the built-in demo dataset: an MNIST-shaped pair of .npy files,
 * DIR/images.npy (u8, [N, 28, 28]) and DIR/labels.npy (i64, [N]), with
 * deterministic contents (image i is a blurred digit-like stroke pattern
 * whose label is i % 10), so that the demo and the tests can pack it.
 *
 * usage: demo_data DIR [N]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
write_npy(const char *path, const char *descr, const char *shape, const void *data, size_t bytes)
{
	char header[128];
	int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
			 descr, shape);
	if (n < 0 || (size_t)n >= sizeof header - 12)
		return -1;
	/* magic(6) + version(2) + len(2) + header, padded with spaces to a
	 * multiple of 64 and ended by a newline, as numpy writes it. */
	size_t total = 10 + (size_t)n + 1;
	size_t padded = (total + 63) / 64 * 64;
	memset(header + n, ' ', padded - total);
	header[n + (int)(padded - total)] = '\n';
	uint16_t hlen = (uint16_t)(padded - 10);
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int ok = fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 &&
		 fputc(hlen & 0xff, f) != EOF && fputc(hlen >> 8, f) != EOF &&
		 fwrite(header, 1, padded - 10, f) == padded - 10 &&
		 fwrite(data, 1, bytes, f) == bytes;
	if (fclose(f) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

int
main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: demo_data DIR [N]\n");
		return 2;
	}
	char *end;
	unsigned long n = argc == 3 ? strtoul(argv[2], &end, 10) : 10000;
	if (argc == 3 && (*end || n == 0 || n > 10000000)) {
		fprintf(stderr, "demo_data: bad sample count '%s'\n", argv[2]);
		return 2;
	}
	uint8_t *img = malloc(n * 784);
	int64_t *lab = malloc(n * sizeof *lab);
	if (!img || !lab) {
		fprintf(stderr, "demo_data: out of memory\n");
		return 1;
	}
	uint64_t seed = 1;
	for (unsigned long i = 0; i < n; i++) {
		lab[i] = (int64_t)(i % 10);
		uint8_t *p = img + i * 784;
		for (int y = 0; y < 28; y++)
			for (int x = 0; x < 28; x++) {
				/* a ring whose radius depends on the label, with a
				 * per-sample offset so no two images are equal */
				int dx = x - 14 - (int)(i % 3), dy = y - 14 - (int)(i / 3 % 3);
				int r2 = dx * dx + dy * dy, want = (int)(4 + lab[i]) * (int)(4 + lab[i]);
				int d = abs(r2 - want);
				/* low-amplitude pseudo-random noise, so the data compresses
				 * about as well as real scans do */
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				unsigned long noise = (unsigned long)(seed >> 59);
				p[y * 28 + x] = (uint8_t)(d < 40 ? (unsigned long)(255 - d * 6) : noise);
			}
	}
	char path[4096], shape[64];
	snprintf(shape, sizeof shape, "(%lu, 28, 28)", n);
	snprintf(path, sizeof path, "%s/images.npy", argv[1]);
	if (write_npy(path, "|u1", shape, img, n * 784) < 0) {
		fprintf(stderr, "demo_data: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	snprintf(shape, sizeof shape, "(%lu,)", n);
	snprintf(path, sizeof path, "%s/labels.npy", argv[1]);
	if (write_npy(path, "<i8", shape, lab, n * sizeof *lab) < 0) {
		fprintf(stderr, "demo_data: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	printf("wrote %lu samples to %s/images.npy and %s/labels.npy\n", n, argv[1], argv[1]);
	free(img);
	free(lab);
	return 0;
}
