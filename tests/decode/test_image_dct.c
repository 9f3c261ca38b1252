/* SPDX-License-Identifier: MIT */
/*
 * DCT-domain scaling stays close to a full decode: only the documented
 * factors (1/2, 1/4, 1/8) are used, and the mean difference from the exact
 * (full decode) eval output of a detailed 300 x 200 JPEG stays small.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include <ringfeed/ringfeed.h>

#include "decode/image.h"

#include "rf_test.h"

/* Fine detail (stripes and rings of a few pixels) over smooth colours,
 * as a photograph has. */
static unsigned char *
make_jpeg(unsigned long *len, int w, int h)
{
	tjhandle tj = tjInitCompress();
	unsigned char *rgb = malloc((size_t)w * h * 3), *jpeg = NULL;

	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *p = rgb + 3 * ((size_t)y * w + x);
			double r = sqrt((double)(x - 150) * (x - 150) + (double)(y - 90) * (y - 90));
			double d = 60.0 * sin(r * 0.4) + 40.0 * sin(x * 0.5) * cos(y * 0.3);
			int v[3] = {(int)(x * 180 / w + d), (int)(y * 180 / h + 40 - d),
				    (int)(120 + d * 0.8)};
			for (int c = 0; c < 3; c++)
				p[c] = (unsigned char)(v[c] < 0 ? 0 : v[c] > 255 ? 255 : v[c]);
		}
	*len = 0;
	if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, len, TJSAMP_420, 92, 0) < 0) {
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
	static const uint32_t sizes[] = {64, 48, 32, 100};
	rf_image_scratch s;
	unsigned long jlen;
	unsigned char *jpeg = make_jpeg(&jlen, 300, 200);

	rf_image_scratch_init(&s);
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		uint32_t n = sizes[k];
		size_t bytes = (size_t)n * n * 3;
		uint8_t *exact = malloc(bytes), *scaled = malloc(bytes);
		rf_image_transform t;
		rf_image_info info;

		rf_image_transform_eval(&t, n, n, (uint32_t)lround(n * 8.0 / 7.0));
		t.dct_scale = 0;
		int rc = rf_image_load(jpeg, jlen, &t, 0, 0, 0, exact, &info, &s);
		CHECK_CONT_MSG(rc == 0, "eval %u, full decode: %d (%s)", n, rc, s.msg);
		t.dct_scale = 1;
		rc = rf_image_load(jpeg, jlen, &t, 0, 0, 0, scaled, &info, &s);
		CHECK_CONT_MSG(rc == 0, "eval %u, DCT scaling: %d (%s)", n, rc, s.msg);
		CHECK_CONT_MSG(info.scale_num == 1 && (info.scale_den == 1 || info.scale_den == 2 ||
					      info.scale_den == 4 || info.scale_den == 8),
		      "eval %u: decoded at %u/%u, not 1/2, 1/4 or 1/8", n, info.scale_num,
		      info.scale_den);
		double sum = 0;
		for (size_t i = 0; i < bytes; i++)
			sum += abs((int)exact[i] - (int)scaled[i]);
		double mean = sum / (double)bytes;
		printf("eval %u: scale %u/%u, mean difference %.2f levels\n", n, info.scale_num,
		       info.scale_den, mean);
		CHECK_CONT_MSG(mean <= 3.0, "eval %u at %u/%u: mean difference %.2f levels from a full "
		      "decode (at most 3)", n, info.scale_num, info.scale_den, mean);
		free(exact);
		free(scaled);
	}
	rf_image_scratch_fini(&s);
	tjFree(jpeg);
	if (rf_test_failures)
		printf("%d failures\n", rf_test_failures);
	else
		printf("ok\n");
	return rf_test_failures ? 1 : 0;
}
