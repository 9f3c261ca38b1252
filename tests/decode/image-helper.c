/* SPDX-License-Identifier: MIT */
/*
 * The image module (src/decode/image.h) driven from the command line, for
 * tests/decode/test_image.py, which compares its output with PIL's:
 *
 *   image-helper decode FILE OUT.rgb
 *   image-helper load FILE OUT.rgb center|train OW OH RESIZE DCT SEED EPOCH INDEX
 *   image-helper resize FILE OUT.rgb X0 Y0 X1 Y1 OW OH     (PNG in, PIL's box resize)
 *   image-helper crops W H SEED EPOCH FIRST N [SCALE_MIN SCALE_MAX RATIO_MIN RATIO_MAX]
 *   image-helper seq OUTDIR FILE...   (one scratch for all: decode each to
 *                                      OUTDIR/I.rgb and a 64x48 train load to
 *                                      OUTDIR/I.load; a line per file)
 *
 * Prints "ok W H ..." (decode: the image's size, channels, bit depth;
 * load: the crop x y w h flip and the DCT scale num/den) or "error CODE
 * MESSAGE", exit 0 either way; exit 2 on bad usage or I/O errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/image.h"

static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

static int
spit(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;
	if (f && fclose(f) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

int
main(int argc, char **argv)
{
	rf_image_scratch s;
	rf_image_info info;
	size_t len = 0;
	uint8_t *data, *out;
	int rc;

	if (argc >= 7 && strcmp(argv[1], "crops") == 0) {
		rf_image_transform t;
		rf_image_crop c;
		uint32_t w = (uint32_t)strtoul(argv[2], NULL, 10), h = (uint32_t)strtoul(argv[3], NULL, 10);
		uint64_t seed = strtoull(argv[4], NULL, 10), epoch = strtoull(argv[5], NULL, 10);
		uint64_t first = strtoull(argv[6], NULL, 10), n = strtoull(argv[7], NULL, 10);
		rf_image_transform_train(&t, 224, 224);
		if (argc >= 12) {
			t.scale_min = atof(argv[8]);
			t.scale_max = atof(argv[9]);
			t.ratio_min = atof(argv[10]);
			t.ratio_max = atof(argv[11]);
		}
		for (uint64_t i = first; i < first + n; i++) {
			rf_image_crop_for(&t, w, h, seed, epoch, i, &c);
			printf("%u %u %u %u %d\n", c.x, c.y, c.w, c.h, c.flip);
		}
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "seq") == 0) {
		/* One worker's scratch over many images, good and bad mixed:
		 * each must give what it gives alone. */
		rf_image_transform t;
		char path[4096];
		rf_image_scratch_init(&s);
		rf_image_transform_train(&t, 64, 48);
		out = malloc(64 * 48 * 3);
		for (int i = 3; i < argc; i++) {
			uint8_t *rgb = NULL;
			if (!(data = slurp(argv[i], &len)))
				return 2;
			rc = rf_image_probe(data, len, &info, &s);
			size_t need = rc == 0 ? (size_t)info.width * info.height * 3 : 0;
			if (rc == 0 && !(rgb = malloc(need)))
				return 2;
			if (rc == 0)
				rc = rf_image_decode(data, len, rgb, need, &info, &s);
			if (rc == 0) {
				snprintf(path, sizeof path, "%s/%d.rgb", argv[2], i - 3);
				if (spit(path, rgb, need) < 0)
					return 2;
				rc = rf_image_load(data, len, &t, 1, 2, (uint64_t)i, out, &info, &s);
				snprintf(path, sizeof path, "%s/%d.load", argv[2], i - 3);
				if (rc == 0 && spit(path, out, 64 * 48 * 3) < 0)
					return 2;
			}
			if (rc == 0)
				printf("ok %u %u\n", info.width, info.height);
			else
				printf("error %d\n", rc);
			free(rgb);
			free(data);
		}
		/* The scratch never grows past its documented bound. */
		printf("scratch %zu %zu\n", rf_image_scratch_bytes(&s),
		       rf_image_scratch_bound(&t, 0));
		free(out);
		rf_image_scratch_fini(&s);
		return 0;
	}
	if (argc < 4)
		goto usage;
	if (!(data = slurp(argv[2], &len))) {
		fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	rf_image_scratch_init(&s);
	if (strcmp(argv[1], "decode") == 0) {
		rc = rf_image_probe(data, len, &info, &s);
		size_t need = rc == 0 ? (size_t)info.width * info.height * 3 : 0;
		out = malloc(need ? need : 1);
		if (rc == 0)
			rc = rf_image_decode(data, len, out, need, &info, &s);
		if (rc == 0) {
			printf("ok %u %u %u %u %d\n", info.width, info.height, info.channels,
			       info.bit_depth, info.cmyk);
			if (spit(argv[3], out, need) < 0)
				return 2;
		}
	} else if (strcmp(argv[1], "load") == 0 && argc == 12) {
		rf_image_transform t;
		uint32_t ow = (uint32_t)strtoul(argv[5], NULL, 10), oh = (uint32_t)strtoul(argv[6], NULL, 10);
		if (strcmp(argv[4], "center") == 0)
			rf_image_transform_eval(&t, ow, oh, (uint32_t)strtoul(argv[7], NULL, 10));
		else
			rf_image_transform_train(&t, ow, oh);
		t.dct_scale = atoi(argv[8]);
		out = malloc((size_t)ow * oh * 3);
		rc = rf_image_load(data, len, &t, strtoull(argv[9], NULL, 10),
				   strtoull(argv[10], NULL, 10), strtoull(argv[11], NULL, 10), out,
				   &info, &s);
		if (rc == 0) {
			printf("ok %u %u %u %u %d %u %u\n", info.crop.x, info.crop.y, info.crop.w,
			       info.crop.h, info.crop.flip, info.scale_num, info.scale_den);
			if (spit(argv[3], out, (size_t)ow * oh * 3) < 0)
				return 2;
		}
	} else if (strcmp(argv[1], "resize") == 0 && argc == 10) {
		float box[4];
		uint32_t ow = (uint32_t)strtoul(argv[8], NULL, 10), oh = (uint32_t)strtoul(argv[9], NULL, 10);
		for (int i = 0; i < 4; i++)
			box[i] = strtof(argv[4 + i], NULL);
		rc = rf_image_probe(data, len, &info, &s);
		size_t need = rc == 0 ? (size_t)info.width * info.height * 3 : 0;
		uint8_t *src = malloc(need ? need : 1);
		out = malloc((size_t)ow * oh * 3);
		if (rc == 0)
			rc = rf_image_decode(data, len, src, need, &info, &s);
		if (rc == 0)
			rc = rf_image_resize(src, info.width, info.height, box, out, ow, oh, 0, &s);
		if (rc == 0) {
			printf("ok\n");
			if (spit(argv[3], out, (size_t)ow * oh * 3) < 0)
				return 2;
		}
		free(src);
	} else {
		goto usage;
	}
	if (rc < 0)
		printf("error %d %s\n", rc, s.msg);
	free(out);
	free(data);
	rf_image_scratch_fini(&s);
	return 0;
usage:
	fprintf(stderr, "usage: see the comment at the top of image-helper.c\n");
	return 2;
}
