/* SPDX-License-Identifier: MIT */
/*
 * The image module's contract in C, on a JPEG and a PNG made here
 * (TurboJPEG; a stored-deflate PNG): the transform checks, the pixel limit
 * applied after DCT-domain scaling, determinism of rf_image_load over
 * scratches, the centre mode's independence from the seed, the errors'
 * codes, and that a warmed scratch stops growing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include <ringfeed/ringfeed.h>

#include "decode/image.h"

#include "rf_test.h"

/* A 300 x 200 JPEG of smooth colours. */
static unsigned char *
make_jpeg(unsigned long *len, int w, int h)
{
	tjhandle tj = tjInitCompress();
	unsigned char *rgb = malloc((size_t)w * h * 3), *jpeg = NULL;

	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *p = rgb + 3 * ((size_t)y * w + x);
			p[0] = (unsigned char)(x * 255 / w);
			p[1] = (unsigned char)(y * 255 / h);
			p[2] = (unsigned char)((x + y) & 255);
		}
	*len = 0;
	if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, len, TJSAMP_420, 90, 0) < 0) {
		printf("tjCompress2: %s\n", tjGetErrorStr2(tj));
		exit(1);
	}
	tjDestroy(tj);
	free(rgb);
	return jpeg;
}

int
main(void)
{
	rf_image_transform t;
	rf_image_scratch a, b;
	rf_image_info info;
	char msg[256];
	unsigned long jlen;
	unsigned char *jpeg = make_jpeg(&jlen, 300, 200);
	uint8_t o1[64 * 64 * 3], o2[64 * 64 * 3];
	int rc;

	rf_image_scratch_init(&a);
	rf_image_scratch_init(&b);

	/* Transform checks. */
	rf_image_transform_eval(&t, 224, 224, 200);
	CHECK_CONT_MSG(rf_image_transform_check(&t, msg, sizeof msg) == RF_EUSAGE, "resize < out accepted");
	rf_image_transform_train(&t, 224, 224);
	CHECK_CONT_MSG(rf_image_transform_check(&t, msg, sizeof msg) == 0, "default train refused: %s", msg);
	t.scale_min = 0;
	CHECK_CONT_MSG(rf_image_transform_check(&t, msg, sizeof msg) == RF_EUSAGE, "scale_min 0 accepted");
	rf_image_transform_train(&t, 224, 224);
	t.flip_p = 1.5;
	CHECK_CONT_MSG(rf_image_transform_check(&t, msg, sizeof msg) == RF_EUSAGE, "flip_p 1.5 accepted");
	rf_image_transform_train(&t, 0, 224);
	CHECK_CONT_MSG(rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, NULL, &a) == RF_EUSAGE,
	      "output width 0 accepted");

	/* Probe. */
	CHECK_CONT_MSG(rf_image_probe(jpeg, jlen, &info, &a) == 0 && info.format == RF_IMAGE_JPEG &&
	      info.width == 300 && info.height == 200 && info.channels == 3, "probe");

	/* The pixel limit counts the decoded (scaled) image: a 16 x 16 centre
	 * crop decodes at 1/8 (38 x 25 pixels), within a limit of 1000; a full
	 * decode (60000 pixels) is refused. */
	a.max_pixels = 1000;
	rf_image_transform_eval(&t, 16, 16, 16);
	rc = rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, &info, &a);
	CHECK_CONT_MSG(rc == 0 && info.scale_num == 1 && info.scale_den == 8,
	      "scaled decode under the limit: rc %d (%s), scale %u/%u", rc, a.msg, info.scale_num,
	      info.scale_den);
	t.dct_scale = 0;
	rc = rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, &info, &a);
	CHECK_CONT_MSG(rc == -E2BIG && strstr(a.msg, "limit"), "full decode over the limit: rc %d (%s)", rc,
	      a.msg);
	a.max_pixels = 0;

	/* Determinism: two scratches, any order of samples. */
	rf_image_transform_train(&t, 64, 64);
	for (uint64_t i = 0; i < 50; i++) {
		rc = rf_image_load(jpeg, jlen, &t, 7, 3, i, o1, NULL, &a);
		CHECK_CONT_MSG(rc == 0, "load %d: %s", (int)i, a.msg);
		rc = rf_image_load(jpeg, jlen, &t, 7, 3, 49 - i, o2, NULL, &b);
		rc |= rf_image_load(jpeg, jlen, &t, 7, 3, i, o2, NULL, &b);
		CHECK_CONT_MSG(rc == 0 && memcmp(o1, o2, sizeof o1) == 0, "sample %d differs between runs",
		      (int)i);
	}
	/* Another epoch or seed: other crops. */
	int same = 0;
	for (uint64_t i = 0; i < 20; i++) {
		rf_image_load(jpeg, jlen, &t, 7, 3, i, o1, NULL, &a);
		rf_image_load(jpeg, jlen, &t, 7, 4, i, o2, NULL, &a);
		same += memcmp(o1, o2, sizeof o1) == 0;
	}
	CHECK_CONT_MSG(same < 3, "%d of 20 samples identical across epochs", same);
	/* The centre mode draws nothing. */
	rf_image_transform_eval(&t, 64, 64, 72);
	rf_image_load(jpeg, jlen, &t, 1, 2, 3, o1, NULL, &a);
	rf_image_load(jpeg, jlen, &t, 9, 8, 7, o2, NULL, &a);
	CHECK_CONT_MSG(memcmp(o1, o2, sizeof o1) == 0, "centre crop depends on seed, epoch or index");

	/* A warmed scratch stops growing: without DCT scaling the largest
	 * crop of this image is the whole of it (with it, a small crop can
	 * need a larger decode than a large one), after which buffers stay
	 * where they are. */
	rf_image_transform_train(&t, 64, 64);
	t.scale_min = t.scale_max = 1.0;
	t.ratio_min = t.ratio_max = 1.5;
	t.dct_scale = 0;
	rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, &info, &a);
	CHECK_CONT_MSG(info.crop.w == 300 && info.crop.h == 200, "full crop: %ux%u", info.crop.w,
	      info.crop.h);
	size_t held = rf_image_scratch_bytes(&a);
	void *pix = a.pix, *tmp = a.tmp, *coef = a.coef;
	rf_image_transform_train(&t, 64, 64);
	t.dct_scale = 0;
	for (uint64_t i = 0; i < 200; i++)
		rf_image_load(jpeg, jlen, &t, 11, 0, i, o1, NULL, &a);
	CHECK_CONT_MSG(rf_image_scratch_bytes(&a) == held && a.pix == pix && a.tmp == tmp && a.coef == coef,
	      "the scratch grew after warming up (%zu -> %zu bytes)", held,
	      rf_image_scratch_bytes(&a));
	CHECK_CONT_MSG(held <= rf_image_scratch_bound(&t, 0), "scratch %zu over its bound %zu", held,
	      rf_image_scratch_bound(&t, 0));

	/* Errors: codes and messages. */
	CHECK_CONT_MSG(rf_image_load(jpeg, jlen / 2, &t, 0, 0, 0, o1, NULL, &a) == RF_ETRUNCATED &&
	      strstr(a.msg, "truncated"), "half a JPEG: %s", a.msg);
	CHECK_CONT_MSG(rf_image_load("GIF89a......", 12, &t, 0, 0, 0, o1, NULL, &a) == RF_EFORMAT &&
	      strstr(a.msg, "GIF"), "GIF: %s", a.msg);
	/* ...and the scratch still works afterwards. */
	CHECK_CONT_MSG(rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, NULL, &a) == 0, "after errors: %s", a.msg);

	rf_image_scratch_fini(&a);
	rf_image_scratch_fini(&b);
	tjFree(jpeg);
	if (rf_test_failures) {
		printf("%d failure(s)\n", rf_test_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
