/* SPDX-License-Identifier: MIT */
/*
 * A JPEG's end is where its markers say, not the end of the file: a JPEG
 * followed by other data (a phone's "motion photo" appends an MP4; padding
 * of zeros longer than 4 KiB) is checked, probed and decoded as the JPEG
 * alone, in baseline and progressive coding, while a JPEG cut short is
 * still refused as truncated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include <ringfeed/ringfeed.h>

#include "decode/image.h"

#include "rf_test.h"

static unsigned char *
make_jpeg(unsigned long *len, int w, int h, int flags)
{
	tjhandle tj = tjInitCompress();
	unsigned char *rgb = malloc((size_t)w * h * 3), *jpeg = NULL;

	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *p = rgb + 3 * ((size_t)y * w + x);
			p[0] = (unsigned char)(x * 255 / w);
			p[1] = (unsigned char)(y * 255 / h);
			p[2] = (unsigned char)((x * 7 + y * 13) & 255);
		}
	*len = 0;
	if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, len, TJSAMP_420, 90, flags) < 0) {
		printf("tjCompress2: %s\n", tjGetErrorStr2(tj));
		exit(1);
	}
	tjDestroy(tj);
	free(rgb);
	return jpeg;
}

/* The JPEG, then `extra` bytes: zeros, or a video-like tail (an MP4 box
 * header, then bytes that hold FF and FF D8, but no FF D9, near its end). */
static unsigned char *
with_tail(const unsigned char *jpeg, unsigned long len, size_t extra, int video)
{
	unsigned char *p = calloc(1, len + extra);

	memcpy(p, jpeg, len);
	if (video && extra >= 12) {
		static const unsigned char box[12] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p',
						      'm', 'p', '4', '2'};
		memcpy(p + len, box, sizeof box);
		for (size_t i = sizeof box; i < extra; i++)
			p[len + i] = (unsigned char)((i * 2654435761u) >> 13);
		for (size_t i = sizeof box; i + 1 < extra; i++)
			if (p[len + i] == 0xff && p[len + i + 1] == 0xd9)
				p[len + i + 1] = 0xd8;
	}
	return p;
}

static void
try_one(const char *what, const unsigned char *jpeg, unsigned long jlen, const uint8_t *want,
	rf_image_scratch *s)
{
	static const size_t extras[] = {1, 4095, 5000, 300000};
	size_t n = 300 * 200 * 3;
	uint8_t *got = malloc(n);
	rf_image_info info;

	for (int video = 0; video < 2; video++)
		for (size_t k = 0; k < sizeof extras / sizeof *extras; k++) {
			unsigned char *p = with_tail(jpeg, jlen, extras[k], video);
			size_t len = jlen + extras[k];
			int rc = rf_image_check(p, len, 0, &info, s);
			CHECK_CONT_MSG(rc == 0, "%s + %zu bytes of %s: header check: %d (%s)", what,
			      extras[k], video ? "video" : "zeros", rc, s->msg);
			rc = rf_image_check(p, len, 1, &info, s);
			CHECK_CONT_MSG(rc == 0, "%s + %zu bytes of %s: full check: %d (%s)", what,
			      extras[k], video ? "video" : "zeros", rc, s->msg);
			rc = rf_image_decode(p, len, got, n, &info, s);
			CHECK_CONT_MSG(rc == 0 && memcmp(got, want, n) == 0,
			      "%s + %zu bytes of %s: decode: %d (%s)", what, extras[k],
			      video ? "video" : "zeros", rc, s->msg);
			rf_image_transform t;
			rf_image_transform_eval(&t, 64, 64, 73);
			uint8_t o1[64 * 64 * 3], o2[64 * 64 * 3];
			rc = rf_image_load(jpeg, jlen, &t, 0, 0, 0, o1, NULL, s);
			rc |= rf_image_load(p, len, &t, 0, 0, 0, o2, NULL, s);
			CHECK_CONT_MSG(rc == 0 && memcmp(o1, o2, sizeof o1) == 0,
			      "%s + %zu bytes of %s: load: %d (%s)", what, extras[k],
			      video ? "video" : "zeros", rc, s->msg);
			free(p);
		}

	/* Cut short, with and without data after the cut: refused. */
	size_t cuts[] = {jlen / 2, jlen - 2, jlen - 1};
	for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
		int rc = rf_image_check(jpeg, cuts[k], 0, &info, s);
		CHECK_CONT_MSG(rc == RF_ETRUNCATED, "%s cut to %zu of %lu bytes: header check: %d (%s)",
		      what, cuts[k], jlen, rc, s->msg);
		unsigned char *p = calloc(1, cuts[k] + 5000);
		memcpy(p, jpeg, cuts[k]);
		rc = rf_image_check(p, cuts[k] + 5000, 0, &info, s);
		CHECK_CONT_MSG(rc != 0, "%s cut to %zu bytes then 5000 zeros: header check accepted", what,
		      cuts[k]);
		free(p);
	}
	free(got);
}

int
main(void)
{
	rf_image_scratch s;
	rf_image_info info;
	size_t n = 300 * 200 * 3;
	uint8_t *want = malloc(n);
	static const int flags[2] = {0, TJFLAG_PROGRESSIVE};
	static const char *names[2] = {"baseline JPEG", "progressive JPEG"};

	rf_image_scratch_init(&s);
	for (int f = 0; f < 2; f++) {
		unsigned long jlen;
		unsigned char *jpeg = make_jpeg(&jlen, 300, 200, flags[f]);
		int rc = rf_image_decode(jpeg, jlen, want, n, &info, &s);
		CHECK_CONT_MSG(rc == 0, "%s: decode: %d (%s)", names[f], rc, s.msg);
		try_one(names[f], jpeg, jlen, want, &s);
		tjFree(jpeg);
	}
	rf_image_scratch_fini(&s);
	free(want);
	if (rf_test_failures)
		printf("%d failures\n", rf_test_failures);
	else
		printf("ok\n");
	return rf_test_failures ? 1 : 0;
}
