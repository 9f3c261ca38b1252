/* SPDX-License-Identifier: MIT */
/*
 * Inside the image module (image.h), shared by
 *   image.c            the scratch, decoding (TurboJPEG, libspng) and
 *                      rf_image_load, which joins decode and transform
 *   image_transform.c  the transforms' parameters and crops, and the
 *                      resampler (PIL's bilinear resize)
 *
 * Threads: everything works on the caller's scratch, one per thread.
 */
#ifndef RF_IMAGE_IMPL_H
#define RF_IMAGE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "decode/image.h"

/* One resample: a region of a decoded image to (part of) an output. */
typedef struct resample_job {
	const uint8_t *src;     /* RGB, packed rows */
	size_t stride;          /* bytes per source row */
	uint32_t ox, oy;        /* the image position of src's first pixel (a
	                           decoded part of the image; 0, 0 for all of it) */
	uint32_t rx, ry, rw, rh; /* the region taken as the image */
	float box[4];           /* in the region's pixels */
	uint32_t vw, vh;        /* the size of the whole resize */
	uint32_t fx, fy;        /* first output column and row */
	uint32_t ow, oh;        /* outputs computed */
	int flip;
} resample_job;

/* image.c */
/* Set the scratch's message; returns `code`. */
int rf_img_fail(rf_image_scratch *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Grow one of the scratch's buffers to at least `need` bytes: 0 or -ENOMEM. */
int rf_img_grow(void **buf, size_t *cap, size_t need);

/* jpeg_scan.c */
/* The offset just past a JPEG's end marker (EOI), found by walking its
 * markers and scans from SOI; 0 when the data ends first or is no JPEG.
 * Data after the EOI is not looked at. */
size_t rf_jpeg_scan_end(const uint8_t *p, size_t len);

/* image_transform.c */
/* Python's round(). */
long rf_img_py_round(double x);
/* torchvision's Resize(int) output size. */
void rf_img_eval_size(uint32_t w, uint32_t h, uint32_t size, uint32_t *nw, uint32_t *nh);
/* The source pixels [*lo, *hi) of an axis of in_size pixels that outputs
 * [first, first + count) of a resize of the box [in0, in1) to vsize read. */
void rf_img_axis_span(int in_size, float in0, float in1, uint32_t vsize, uint32_t first,
		      uint32_t count, uint32_t *lo, uint32_t *hi);
/* The widest code the horizontal pass may use where the CPU has it: 2
 * AVX2, 1 SSE4.1, 0 plain C (all give the same bytes; tests compare them).
 * Set before any thread resamples. */
extern int rf_img_simd_max;
/* Run one resample into out (RGB, j->ow x j->oh). */
int rf_img_resample(const resample_job *j, uint8_t *out, rf_image_scratch *s);

#endif
