/* SPDX-License-Identifier: MIT */
/*
 * Region decoding: rf_image_load decodes only the rows and columns of a
 * JPEG that the crop needs; its output must equal the whole decode's
 * (full_decode = 1) byte for byte, over many random crops, both
 * transforms, DCT scaling on and off, on JPEGs of every chroma
 * subsampling, greyscale, CMYK and progressive, of sizes that are not whole
 * MCUs.  Skips (77) where the build has no region decoding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include <ringfeed/ringfeed.h>

#include "decode/image.h"

static int failures;

/* Detail at every scale (noise, edges, gradients), so that any pixel that
 * differs at a region's edge changes the output. */
static unsigned char *
make_jpeg(unsigned long *len, int w, int h, int samp, int pf, int flags)
{
	tjhandle tj = tjInitCompress();
	int ps = tjPixelSize[pf];
	unsigned char *pix = malloc((size_t)w * h * ps), *jpeg = NULL;
	unsigned r = 12345;

	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *p = pix + (size_t)ps * ((size_t)y * w + x);
			r = r * 1103515245u + 12345u;
			for (int c = 0; c < ps; c++) {
				int v = (x * (c + 1) * 255 / w + y * (3 - c) * 97 / h) & 255;
				if (((x / 7) ^ (y / 5) ^ c) & 1)
					v = 255 - v;
				p[c] = (unsigned char)((v + (int)((r >> (8 * c + 3)) & 31)) & 255);
			}
		}
	*len = 0;
	if (tjCompress2(tj, pix, w, 0, h, pf, &jpeg, len, samp, 85, flags) < 0) {
		printf("tjCompress2: %s\n", tjGetErrorStr2(tj));
		exit(1);
	}
	tjDestroy(tj);
	free(pix);
	return jpeg;
}

static void
compare(const char *name, const unsigned char *jpeg, unsigned long len, rf_image_transform *t,
	int n, rf_image_scratch *a, rf_image_scratch *b)
{
	size_t bytes = (size_t)t->out_w * t->out_h * 3;
	unsigned char *o1 = malloc(bytes), *o2 = malloc(bytes);

	for (int i = 0; i < n && failures < 20; i++) {
		rf_image_info ia, ib;
		t->full_decode = 0;
		int ra = rf_image_load(jpeg, len, t, 7, (uint64_t)i / 50, (uint64_t)i, o1, &ia, a);
		t->full_decode = 1;
		int rb = rf_image_load(jpeg, len, t, 7, (uint64_t)i / 50, (uint64_t)i, o2, &ib, b);
		if (ra != 0 || rb != 0) {
			printf("FAIL %s #%d: load %d (%s) / %d (%s)\n", name, i, ra, a->msg, rb, b->msg);
			failures++;
			continue;
		}
		if (memcmp(o1, o2, bytes) != 0) {
			size_t k = 0;
			while (o1[k] == o2[k])
				k++;
			printf("FAIL %s #%d: crop %u,%u %ux%u scale %u/%u: region decode differs at "
			       "output byte %zu (%d vs %d)\n", name, i, ia.crop.x, ia.crop.y,
			       ia.crop.w, ia.crop.h, ia.scale_num, ia.scale_den, k, o1[k], o2[k]);
			failures++;
		}
	}
	free(o1);
	free(o2);
}

int
main(void)
{
	static const struct {
		const char *name;
		int w, h, samp, pf, flags;
	} imgs[] = {
		{"420", 333, 251, TJSAMP_420, TJPF_RGB, 0},
		{"422", 301, 402, TJSAMP_422, TJPF_RGB, 0},
		{"444", 290, 217, TJSAMP_444, TJPF_RGB, 0},
		{"440", 257, 319, TJSAMP_440, TJPF_RGB, 0},
		{"411", 350, 200, TJSAMP_411, TJPF_RGB, 0},
		{"gray", 280, 300, TJSAMP_GRAY, TJPF_GRAY, 0},
		{"cmyk", 240, 230, TJSAMP_420, TJPF_CMYK, 0},
		{"420-progressive", 333, 251, TJSAMP_420, TJPF_RGB, TJFLAG_PROGRESSIVE},
		{"420-large", 1000, 750, TJSAMP_420, TJPF_RGB, 0},
	};
	rf_image_scratch a, b;
	rf_image_transform t;
	char name[96];

	if (!rf_image_region_decoding()) {
		printf("built without libjpeg's API: no region decoding; skipping\n");
		return 77;
	}
	rf_image_scratch_init(&a);
	rf_image_scratch_init(&b);
	for (size_t m = 0; m < sizeof imgs / sizeof imgs[0]; m++) {
		unsigned long len;
		unsigned char *jpeg = make_jpeg(&len, imgs[m].w, imgs[m].h, imgs[m].samp, imgs[m].pf,
						imgs[m].flags);
		static const uint32_t outs[] = {224, 64, 17};
		for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++)
			for (int dct = 0; dct < 2; dct++) {
				rf_image_transform_train(&t, outs[o], outs[o]);
				t.dct_scale = dct;
				snprintf(name, sizeof name, "%s train %u dct %d", imgs[m].name, outs[o],
					 dct);
				compare(name, jpeg, len, &t, 60, &a, &b);
				rf_image_transform_eval(&t, outs[o], outs[o] * 3 / 2, outs[o] * 2);
				t.dct_scale = dct;
				snprintf(name, sizeof name, "%s eval %u dct %d", imgs[m].name, outs[o], dct);
				compare(name, jpeg, len, &t, 1, &a, &b);
			}
		tjFree(jpeg);
	}
	rf_image_scratch_fini(&a);
	rf_image_scratch_fini(&b);
	if (failures) {
		printf("%d failures\n", failures);
		return 1;
	}
	printf("ok: region decodes equal whole decodes\n");
	return 0;
}
