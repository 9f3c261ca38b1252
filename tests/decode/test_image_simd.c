/* SPDX-License-Identifier: MIT */
/*
 * The resampler's horizontal pass in AVX2, SSE4.1 and plain C gives the
 * same bytes: random images, boxes (whole, inside, touching the right and
 * bottom edges, where the vector loads stop short), output sizes (down and
 * up) and flips.  A level the CPU lacks falls back to a narrower one, so
 * the comparison still holds there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

#include "decode/image.h"
#include "decode/image_impl.h"

static unsigned rnd = 2463534242u;

static unsigned
next(void)
{
	rnd ^= rnd << 13;
	rnd ^= rnd >> 17;
	rnd ^= rnd << 5;
	return rnd;
}

int
main(void)
{
	rf_image_scratch s;
	int failures = 0;

	rf_image_scratch_init(&s);
	for (int it = 0; it < 400 && failures < 10; it++) {
		uint32_t w = 1 + next() % 300, h = 1 + next() % 200;
		uint32_t ow = 1 + next() % 240, oh = 1 + next() % 240;
		uint8_t *src = malloc((size_t)w * h * 3);
		for (size_t i = 0; i < (size_t)w * h * 3; i++)
			src[i] = (uint8_t)next();
		float box[4];
		box[0] = (float)(next() % w) * (it % 3 == 0 ? 0.0f : 0.5f);
		box[1] = (float)(next() % h) * (it % 3 == 0 ? 0.0f : 0.5f);
		box[2] = it % 2 ? (float)w : box[0] + (float)(1 + next() % (uint32_t)(w - box[0]));
		box[3] = it % 2 ? (float)h : box[1] + (float)(1 + next() % (uint32_t)(h - box[1]));
		if (box[2] > (float)w)
			box[2] = (float)w;
		if (box[3] > (float)h)
			box[3] = (float)h;
		int flip = (int)(next() & 1);
		uint8_t *out[3];
		for (int lv = 0; lv < 3; lv++) {
			out[lv] = malloc((size_t)ow * oh * 3);
			rf_img_simd_max = lv;
			int rc = rf_image_resize(src, w, h, box, out[lv], ow, oh, flip, &s);
			if (rc != 0) {
				printf("FAIL #%d: resize %ux%u box %g,%g,%g,%g to %ux%u: %s\n", it, w, h,
				       box[0], box[1], box[2], box[3], ow, oh, s.msg);
				failures++;
			}
		}
		for (int lv = 1; lv < 3; lv++)
			if (memcmp(out[0], out[lv], (size_t)ow * oh * 3) != 0) {
				printf("FAIL #%d: level %d differs from plain C: %ux%u box %g,%g,%g,%g "
				       "to %ux%u\n", it, lv, w, h, box[0], box[1], box[2], box[3], ow, oh);
				failures++;
			}
		for (int lv = 0; lv < 3; lv++)
			free(out[lv]);
		free(src);
	}
	rf_img_simd_max = 2;
	rf_image_scratch_fini(&s);
	if (failures)
		return 1;
	printf("ok: AVX2, SSE4.1 and plain C resampling agree\n");
	return 0;
}
