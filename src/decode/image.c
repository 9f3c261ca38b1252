/* SPDX-License-Identifier: MIT */
/* Image decoding (TurboJPEG, libspng) and the load of one sample, decode
 * then transform (image_transform.c); the contract is in image.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>
#include <turbojpeg.h>
#if RF_HAVE_JPEG_REGION
#include <setjmp.h>
#include <jpeglib.h>
#endif

#include <ringfeed/ringfeed.h>

#include "decode/image.h"
#include "decode/image_impl.h"

/* ------------------------------------------------------------- helpers */

int
rf_img_fail(rf_image_scratch *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->msg, sizeof s->msg, fmt, ap);
	va_end(ap);
	return code;
}

/* Grow one of the scratch's buffers to `need` bytes.  Buffers only grow,
 * to exactly what the largest image needs (rf_image_scratch_bound): a
 * worker's steady state allocates nothing. */
int
rf_img_grow(void **buf, size_t *cap, size_t need)
{
	void *p;

	if (need <= *cap)
		return 0;
	p = realloc(*buf, need);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = need;
	return 0;
}

static void rf_img_jd_free(rf_image_scratch *s);

void
rf_image_scratch_init(rf_image_scratch *s)
{
	memset(s, 0, sizeof *s);
}

void
rf_image_scratch_fini(rf_image_scratch *s)
{
	if (s->tj)
		tjDestroy(s->tj);
	rf_img_jd_free(s);
	free(s->pix);
	free(s->tmp);
	free(s->coef);
	memset(s, 0, sizeof *s);
}

/* Bytes of the resampler's buffers for an output of ow x oh from any
 * region of at most RF_IMAGE_MAX_SIDE pixels a side (rf_img_resample()). */
static size_t
resample_bound(uint32_t ow, uint32_t oh)
{
	size_t kx = 2 * (((size_t)RF_IMAGE_MAX_SIDE + ow - 1) / ow) + 1;
	size_t ky = 2 * (((size_t)RF_IMAGE_MAX_SIDE + oh - 1) / oh) + 1;
	size_t kmax = kx > ky ? kx : ky;
	size_t coef = kmax * sizeof(double) + ((size_t)ow * kx + (size_t)oh * ky) * 4 +
		      2 * ((size_t)ow + oh) * sizeof(int) + 16;
	size_t rows = (((size_t)RF_IMAGE_MAX_SIDE * ow * 3 + 63) & ~(size_t)63) + (size_t)ow * 12;
	return coef + rows;
}

size_t
rf_image_scratch_bound(const rf_image_transform *t, uint64_t max_pix)
{
	if (!max_pix)
		max_pix = RF_IMAGE_MAX_PIXELS;
	return (size_t)max_pix * 4 + resample_bound(t->out_w, t->out_h);
}

size_t
rf_image_scratch_bytes(const rf_image_scratch *s)
{
	return s->pix_cap + s->tmp_cap + s->coef_cap;
}

static uint64_t
max_pixels(const rf_image_scratch *s)
{
	return s->max_pixels ? s->max_pixels : RF_IMAGE_MAX_PIXELS;
}

/* ------------------------------------------------------------- formats */

enum rf_image_format
rf_image_sniff(const void *data, size_t len)
{
	const uint8_t *p = data;
	static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

	if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
		return RF_IMAGE_JPEG;
	if (len >= 8 && memcmp(p, png_sig, 8) == 0)
		return RF_IMAGE_PNG;
	return RF_IMAGE_UNKNOWN;
}

static int
unknown_format(const void *data, size_t len, rf_image_scratch *s)
{
	const uint8_t *p = data;

	if (len == 0)
		return rf_img_fail(s, RF_ETRUNCATED, "empty image (0 bytes)");
	if ((len < 3 && p[0] == 0xff) || (len < 8 && p[0] == 0x89))
		return rf_img_fail(s, RF_ETRUNCATED, "truncated image: %zu bytes, too short for "
				"a JPEG or PNG signature", len);
	if (len >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0))
		return rf_img_fail(s, RF_EFORMAT, "unsupported image format GIF (JPEG and PNG "
				"are supported)");
	if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
		return rf_img_fail(s, RF_EFORMAT, "unsupported image format WebP (JPEG and PNG "
				"are supported)");
	if (len >= 2 && p[0] == 'B' && p[1] == 'M')
		return rf_img_fail(s, RF_EFORMAT, "unsupported image format BMP (JPEG and PNG "
				"are supported)");
	return rf_img_fail(s, RF_EFORMAT, "not a JPEG or PNG image (first bytes %02x %02x %02x %02x)",
			p[0], len > 1 ? p[1] : 0, len > 2 ? p[2] : 0, len > 3 ? p[3] : 0);
}

static tjhandle
tj_handle(rf_image_scratch *s)
{
	if (!s->tj)
		s->tj = tjInitDecompress();
	return s->tj;
}

/* The data holds an end marker (a JPEG's EOI, FF D9, see jpeg_ends(); a
 * PNG's IEND chunk, in its last 4 KiB): data past it (a camera's trailer,
 * padding) is tolerated, as decoders do, but a file without one was cut
 * short (libjpeg would pad it with grey and only warn). */
#define END_WINDOW 4096

static int
ends_with_marker(const uint8_t *p, size_t len, const uint8_t *m, size_t mlen)
{
	size_t stop = len > END_WINDOW ? len - END_WINDOW : 0;

	for (size_t i = len; i >= mlen && i - mlen >= stop; i--)
		if (memcmp(p + i - mlen, m, mlen) == 0)
			return 1;
	return 0;
}

/* A JPEG's end is found by walking its markers (jpeg_scan.c): data after
 * it may be of any length (a phone's "motion photo" appends a video). */
static int
jpeg_ends(const uint8_t *p, size_t len)
{
	return rf_jpeg_scan_end(p, len) != 0;
}

static int
jpeg_error_code(const char *m, const uint8_t *p, size_t len)
{
	if (!jpeg_ends(p, len) || strstr(m, "Premature end"))
		return RF_ETRUNCATED;
	if (strstr(m, "Unsupported"))
		return RF_EFORMAT;
	return RF_ECORRUPT;
}

/* A failed call can leave the handle's libjpeg state unusable (the next
 * header then reads as 0 x 0): it is made anew on next use.  Errors are
 * rare, so the cost does not matter. */
static void
tj_reset(rf_image_scratch *s)
{
	if (s->tj)
		tjDestroy(s->tj);
	s->tj = NULL;
}

static int
jpeg_error(rf_image_scratch *s, tjhandle tj, const uint8_t *p, size_t len, const char *what)
{
	char m[200];
	int rc;

	snprintf(m, sizeof m, "%s", tjGetErrorStr2(tj) ? tjGetErrorStr2(tj) : "?");
	tj_reset(s);
	rc = jpeg_error_code(m, p, len);
	if (rc == RF_ETRUNCATED)
		return rf_img_fail(s, rc, "truncated JPEG (%zu bytes, no end marker): %s", len, m);
	if (rc == RF_EFORMAT)
		return rf_img_fail(s, rc, "unsupported JPEG: %s", m);
	return rf_img_fail(s, rc, "corrupt JPEG (%s): %s", what, m);
}

/*
 * The frame size from the SOF segment, found by walking the markers from
 * SOI.  TurboJPEG's header call cannot be trusted alone: on data that ends
 * before its frame header, libjpeg suspends without an error and the
 * handle reports the previous image's size.  0, RF_ETRUNCATED (the data
 * ends first) or RF_ECORRUPT (no frame header before the scan).
 */
static int
jpeg_sof(const uint8_t *p, size_t len, uint32_t *w, uint32_t *h)
{
	size_t i = 2;

	while (i + 4 <= len) {
		uint8_t m = p[i + 1];
		if (p[i] != 0xff)
			return RF_ECORRUPT;
		if (m == 0xff) { /* fill byte */
			i++;
			continue;
		}
		if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) {
			i += 2;
			continue;
		}
		if (m == 0xd9 || m == 0xda)
			return RF_ECORRUPT;
		size_t seg = ((size_t)p[i + 2] << 8) | p[i + 3];
		if (seg < 2)
			return RF_ECORRUPT;
		if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
			if (i + 9 > len)
				return RF_ETRUNCATED;
			if (seg < 8)
				return RF_ECORRUPT;
			*h = ((uint32_t)p[i + 5] << 8) | p[i + 6];
			*w = ((uint32_t)p[i + 7] << 8) | p[i + 8];
			return 0;
		}
		i += 2 + seg;
	}
	return RF_ETRUNCATED;
}

static int
jpeg_probe(const uint8_t *p, size_t len, rf_image_info *info, int *cs, rf_image_scratch *s)
{
	tjhandle tj = tj_handle(s);
	int w, h, sub, colorspace;

	if (!tj)
		return rf_img_fail(s, -ENOMEM, "cannot set up a TurboJPEG decoder");
	uint32_t fw = 0, fh = 0;
	int rc;

	if (len > ULONG_MAX)
		return rf_img_fail(s, RF_EFORMAT, "JPEG too large");
	if ((rc = jpeg_sof(p, len, &fw, &fh)) == RF_ETRUNCATED)
		return rf_img_fail(s, rc, "truncated JPEG (%zu bytes): the data ends before the "
				"frame header", len);
	if (rc < 0)
		return rf_img_fail(s, rc, "corrupt JPEG: no frame header before the image data");
	if (tjDecompressHeader3(tj, p, (unsigned long)len, &w, &h, &sub, &colorspace) < 0)
		return jpeg_error(s, tj, p, len, "header");
	if (w <= 0 || h <= 0 || (uint32_t)w != fw || (uint32_t)h != fh) {
		tj_reset(s);
		if (!jpeg_ends(p, len))
			return rf_img_fail(s, RF_ETRUNCATED, "truncated JPEG (%zu bytes): the data "
					"ends in the header", len);
		return rf_img_fail(s, RF_ECORRUPT, "corrupt JPEG: frame size %u x %u", fw, fh);
	}
	info->format = RF_IMAGE_JPEG;
	info->width = (uint32_t)w;
	info->height = (uint32_t)h;
	info->bit_depth = 8;
	info->cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
	info->channels = info->cmyk ? 4 : colorspace == TJCS_GRAY ? 1 : 3;
	*cs = colorspace;
	return 0;
}

/* Adobe (inverted) CMYK to RGB as PIL's cmyk2rgb does, in place (4 bytes
 * per pixel in, 3 out, front to back). */
static void
cmyk_to_rgb(uint8_t *p, size_t npix)
{
	for (size_t i = 0; i < npix; i++) {
		int nk = p[4 * i + 3];
		for (int c = 0; c < 3; c++) {
			int v = 255 - p[4 * i + c];
			int tmp = v * nk + 128;
			int r = nk - (((tmp >> 8) + tmp) >> 8);
			p[3 * i + c] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
		}
	}
}

/* Decode the JPEG at scale num/den into s->pix as packed RGB. */
static int
jpeg_decode(const uint8_t *p, size_t len, const rf_image_info *info, int num, int den,
	    uint32_t *ow, uint32_t *oh, rf_image_scratch *s)
{
	tjhandle tj = tj_handle(s);
	tjscalingfactor f = {num, den};
	uint32_t w = (uint32_t)TJSCALED((int)info->width, f);
	uint32_t h = (uint32_t)TJSCALED((int)info->height, f);
	int bpp = info->cmyk ? 4 : 3;
	size_t need = (size_t)w * h * (size_t)bpp;

	if ((uint64_t)w * h > max_pixels(s))
		return rf_img_fail(s, -E2BIG, "image of %u x %u pixels is larger than the limit "
				"of %llu pixels", w, h, (unsigned long long)max_pixels(s));
	if (rf_img_grow((void **)&s->pix, &s->pix_cap, need) < 0)
		return rf_img_fail(s, -ENOMEM, "out of memory for a %u x %u image", w, h);
	int rc = tjDecompress2(tj, p, (unsigned long)len, s->pix, (int)w, (int)w * bpp, (int)h,
			       info->cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_LIMITSCANS);
	if (rc < 0) {
		/* A warning leaves a complete image: accept it, as PIL does,
		 * unless the data ran out (libjpeg then pads with grey). */
		const char *m = tjGetErrorStr2(tj);
		if (tjGetErrorCode(tj) != TJERR_WARNING || !jpeg_ends(p, len) ||
		    (m && strstr(m, "Premature end")))
			return jpeg_error(s, tj, p, len, "data");
	}
	if (info->cmyk)
		cmyk_to_rgb(s->pix, (size_t)w * h);
	*ow = w;
	*oh = h;
	return 0;
}

static int
png_error(rf_image_scratch *s, int err, const char *what, size_t len)
{
	if (err == SPNG_EOF || err == SPNG_IO_EOF)
		return rf_img_fail(s, RF_ETRUNCATED, "truncated PNG (%zu bytes): the data ends in "
				"the %s", len, what);
	if (err == SPNG_ESIGNATURE)
		return rf_img_fail(s, RF_EFORMAT, "not a PNG: %s", spng_strerror(err));
	if (err == SPNG_EUSER_WIDTH || err == SPNG_EUSER_HEIGHT)
		return rf_img_fail(s, -E2BIG, "PNG larger than %u pixels on a side", RF_IMAGE_MAX_SIDE);
	if (err == SPNG_EMEM)
		return rf_img_fail(s, -ENOMEM, "out of memory decoding a PNG");
	return rf_img_fail(s, RF_ECORRUPT, "corrupt PNG (%s): %s", what, spng_strerror(err));
}

static int
png_open(spng_ctx **out, const uint8_t *p, size_t len, rf_image_info *info,
	 rf_image_scratch *s)
{
	spng_ctx *ctx = spng_ctx_new(0);
	struct spng_ihdr ih;
	int err;

	*out = NULL;
	if (!ctx)
		return rf_img_fail(s, -ENOMEM, "cannot set up a PNG decoder");
	/* Ancillary chunks are not needed: bound what a hostile file can make
	 * libspng hold. */
	spng_set_chunk_limits(ctx, 1u << 26, 1u << 26);
	spng_set_image_limits(ctx, RF_IMAGE_MAX_SIDE, RF_IMAGE_MAX_SIDE);
	if ((err = spng_set_png_buffer(ctx, p, len)) != 0 || (err = spng_get_ihdr(ctx, &ih)) != 0) {
		spng_ctx_free(ctx);
		return png_error(s, err, "header", len);
	}
	info->format = RF_IMAGE_PNG;
	info->width = ih.width;
	info->height = ih.height;
	info->bit_depth = ih.bit_depth == 16 ? 16 : 8;
	info->cmyk = 0;
	switch (ih.color_type) {
	case SPNG_COLOR_TYPE_GRAYSCALE: info->channels = 1; break;
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: info->channels = 2; break;
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: info->channels = 4; break;
	default: info->channels = 3; break; /* truecolor, palette */
	}
	*out = ctx;
	return 0;
}

static int
png_decode(const uint8_t *p, size_t len, rf_image_info *info, rf_image_scratch *s)
{
	spng_ctx *ctx;
	size_t need;
	int err, rc;

	if ((rc = png_open(&ctx, p, len, info, s)) < 0)
		return rc;
	if ((uint64_t)info->width * info->height > max_pixels(s)) {
		spng_ctx_free(ctx);
		return rf_img_fail(s, -E2BIG, "image of %u x %u pixels is larger than the limit "
				"of %llu pixels", info->width, info->height,
				(unsigned long long)max_pixels(s));
	}
	if ((err = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &need)) != 0) {
		spng_ctx_free(ctx);
		return png_error(s, err, "header", len);
	}
	if (rf_img_grow((void **)&s->pix, &s->pix_cap, need) < 0) {
		spng_ctx_free(ctx);
		return rf_img_fail(s, -ENOMEM, "out of memory for a %u x %u image", info->width,
				info->height);
	}
	err = spng_decode_image(ctx, s->pix, need, SPNG_FMT_RGB8, 0);
	spng_ctx_free(ctx);
	if (err != 0)
		return png_error(s, err, "image data", len);
	return 0;
}

int
rf_image_probe(const void *data, size_t len, rf_image_info *info, rf_image_scratch *s)
{
	rf_image_info tmp;
	int cs;

	if (!info)
		info = &tmp;
	memset(info, 0, sizeof *info);
	info->scale_num = info->scale_den = 1;
	switch (rf_image_sniff(data, len)) {
	case RF_IMAGE_JPEG:
		return jpeg_probe(data, len, info, &cs, s);
	case RF_IMAGE_PNG: {
		spng_ctx *ctx;
		int rc = png_open(&ctx, data, len, info, s);
		spng_ctx_free(ctx);
		return rc;
	}
	default:
		return unknown_format(data, len, s);
	}
}

/* Decode at scale num/den into s->pix; *w, *h its size. */
static int
decode_into_scratch(const void *data, size_t len, rf_image_info *info, int num, int den,
		    uint32_t *w, uint32_t *h, rf_image_scratch *s)
{
	if (info->format == RF_IMAGE_JPEG)
		return jpeg_decode(data, len, info, num, den, w, h, s);
	*w = info->width;
	*h = info->height;
	return png_decode(data, len, info, s);
}

int
rf_image_decode(const void *data, size_t len, uint8_t *rgb, size_t cap, rf_image_info *info,
		rf_image_scratch *s)
{
	rf_image_info tmp;
	uint32_t w, h;
	int rc;

	if (!info)
		info = &tmp;
	if ((rc = rf_image_probe(data, len, info, s)) < 0)
		return rc;
	size_t need = (size_t)info->width * info->height * 3;
	if (need > cap)
		return rf_img_fail(s, -ENOSPC, "a %u x %u image needs %zu bytes, the buffer has %zu",
				info->width, info->height, need, cap);
	if ((rc = decode_into_scratch(data, len, info, 1, 1, &w, &h, s)) < 0)
		return rc;
	memcpy(rgb, s->pix, need);
	return 0;
}

int
rf_image_check(const void *data, size_t len, int full, rf_image_info *info, rf_image_scratch *s)
{
	static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
	rf_image_info tmp;
	const uint8_t *p = data;
	uint32_t w, h;
	int rc;

	if (!info)
		info = &tmp;
	if ((rc = rf_image_probe(data, len, info, s)) < 0)
		return rc;
	if (!full) {
		if (info->format == RF_IMAGE_JPEG && !jpeg_ends(p, len))
			return rf_img_fail(s, RF_ETRUNCATED, "truncated JPEG (%zu bytes, no end "
					"marker)", len);
		if (info->format == RF_IMAGE_PNG && !ends_with_marker(p, len, iend, sizeof iend))
			return rf_img_fail(s, RF_ETRUNCATED, "truncated PNG (%zu bytes, it does not "
					"end with an IEND chunk)", len);
		return 0;
	}
	if (info->format == RF_IMAGE_JPEG)
		return jpeg_decode(p, len, info, 1, 8, &w, &h, s);
	return png_decode(p, len, info, s);
}

/* ------------------------------------------------------ region decodes */

#if RF_HAVE_JPEG_REGION
/* libjpeg's API, for what TurboJPEG's lacks: decoding some of the rows and
 * columns (jpeg_crop_scanline, jpeg_skip_scanlines, stopping early).  The
 * settings are TurboJPEG's (accurate IDCT, smooth upsampling, at most 500
 * progressive scans), so the pixels are the same. */
typedef struct jd_err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	int warned;
	char msg[JMSG_LENGTH_MAX];
} jd_err;

typedef struct jd_state {
	struct jpeg_decompress_struct d;
	jd_err err;
	struct jpeg_progress_mgr prog;
} jd_state;

static void
jd_error_exit(j_common_ptr c)
{
	jd_err *e = (jd_err *)(void *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

static void
jd_emit(j_common_ptr c, int level)
{
	jd_err *e = (jd_err *)(void *)c->err;
	if (level < 0 && !e->warned) {
		(*c->err->format_message)(c, e->msg);
		e->warned = 1;
	}
}

static void
jd_progress(j_common_ptr c)
{
	j_decompress_ptr d = (j_decompress_ptr)c;
	jd_err *e = (jd_err *)(void *)c->err;
	if (d->is_decompressor && d->input_scan_number > 500) {
		snprintf(e->msg, sizeof e->msg, "Progressive JPEG image has more than 500 scans");
		longjmp(e->jb, 1);
	}
}

static void
rf_img_jd_free(rf_image_scratch *s)
{
	jd_state *j = s->jd;
	if (j) {
		jpeg_destroy_decompress(&j->d);
		free(j);
	}
	s->jd = NULL;
}

static jd_state *
jd_handle(rf_image_scratch *s)
{
	jd_state *j = s->jd;
	if (j)
		return j;
	j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->d.err = jpeg_std_error(&j->err.pub);
	j->err.pub.error_exit = jd_error_exit;
	j->err.pub.emit_message = jd_emit;
	if (setjmp(j->err.jb)) {
		free(j);
		return NULL;
	}
	jpeg_create_decompress(&j->d);
	j->prog.progress_monitor = jd_progress;
	j->d.progress = &j->prog;
	s->jd = j;
	return j;
}

static int
jd_fail(rf_image_scratch *s, jd_state *j, const uint8_t *p, size_t len)
{
	char m[JMSG_LENGTH_MAX];
	int rc;

	snprintf(m, sizeof m, "%s", j->err.msg);
	/* As after a TurboJPEG failure: the state is made anew next time. */
	rf_img_jd_free(s);
	rc = jpeg_error_code(m, p, len);
	if (rc == RF_ETRUNCATED)
		return rf_img_fail(s, rc, "truncated JPEG (%zu bytes, no end marker): %s", len, m);
	if (rc == RF_EFORMAT)
		return rf_img_fail(s, rc, "unsupported JPEG: %s", m);
	return rf_img_fail(s, rc, "corrupt JPEG (data): %s", m);
}

/*
 * Decode the part of the JPEG, scaled by num/den, that holds the pixels
 * [x0, x1) x [y0, y1) of the scaled image into s->pix as packed RGB: the
 * part decoded is *dx, *dy (its first pixel) and *dw x *dh.  One iMCU of
 * margin on each side (where the image has it) keeps the upsampled chroma
 * at the box's edges equal to a whole decode's.
 */
static int __attribute__((noinline))
jpeg_region_run(jd_state *j, const uint8_t *p, size_t len, const rf_image_info *info, int num,
		int den, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1, uint32_t *dx,
		uint32_t *dy, uint32_t *dw, uint32_t *dh, rf_image_scratch *s)
{
	int bpp = info->cmyk ? 4 : 3;
	struct jpeg_decompress_struct *d = &j->d;
	jpeg_mem_src(d, p, (unsigned long)len);
	jpeg_read_header(d, TRUE);
	d->scale_num = (unsigned int)num;
	d->scale_denom = (unsigned int)den;
	d->out_color_space = info->cmyk ? JCS_CMYK : JCS_EXT_RGB;
	d->dct_method = JDCT_ISLOW;
	d->do_fancy_upsampling = TRUE;
	jpeg_calc_output_dimensions(d);
	uint32_t sw = d->output_width, sh = d->output_height;
	if ((uint64_t)sw * sh > max_pixels(s)) {
		jpeg_abort_decompress(d);
		return rf_img_fail(s, -E2BIG, "image of %u x %u pixels is larger than the limit "
				"of %llu pixels", sw, sh, (unsigned long long)max_pixels(s));
	}
	if (x1 > sw)
		x1 = sw;
	if (y1 > sh)
		y1 = sh;
	jpeg_start_decompress(d);
#if JPEG_LIB_VERSION >= 70
	uint32_t mcu_w = (uint32_t)(d->max_h_samp_factor * d->min_DCT_h_scaled_size);
	uint32_t mcu_h = (uint32_t)(d->max_v_samp_factor * d->min_DCT_v_scaled_size);
#else
	uint32_t mcu_w = (uint32_t)(d->max_h_samp_factor * d->min_DCT_scaled_size);
	uint32_t mcu_h = (uint32_t)(d->max_v_samp_factor * d->min_DCT_scaled_size);
#endif
	JDIMENSION cx = x0 > mcu_w ? x0 - mcu_w : 0;
	JDIMENSION cend = x1 + mcu_w < sw ? x1 + mcu_w : sw;
	JDIMENSION cw = cend - cx;
	if (cx > 0 || cw < sw)
		jpeg_crop_scanline(d, &cx, &cw); /* widens to whole iMCUs */
	uint32_t ys = y0 > mcu_h ? y0 - mcu_h : 0;
	uint32_t ye = y1 + mcu_h < sh ? y1 + mcu_h : sh;
	size_t stride = (size_t)cw * (size_t)bpp;
	if (rf_img_grow((void **)&s->pix, &s->pix_cap, stride * (ye - ys)) < 0) {
		jpeg_abort_decompress(d);
		return rf_img_fail(s, -ENOMEM, "out of memory for a %u x %u region", (unsigned)cw,
				ye - ys);
	}
	if (ys > 0 && jpeg_skip_scanlines(d, ys) != ys) {
		jpeg_abort_decompress(d);
		return rf_img_fail(s, RF_ECORRUPT, "corrupt JPEG (data): cannot skip to row %u",
				ys);
	}
	while (d->output_scanline < ye) {
		JSAMPROW rows[16];
		uint32_t n = ye - d->output_scanline;
		if (n > 16)
			n = 16;
		for (uint32_t i = 0; i < n; i++)
			rows[i] = s->pix + (size_t)(d->output_scanline - ys + i) * stride;
		if (jpeg_read_scanlines(d, rows, n) == 0)
			break; /* suspended: the data ran out */
	}
	int whole = d->output_scanline == sh;
	if (d->output_scanline < ye) {
		jpeg_abort_decompress(d);
		return rf_img_fail(s, RF_ETRUNCATED, "truncated JPEG (%zu bytes): the data ends "
				"before row %u", len, ye);
	}
	if (whole)
		jpeg_finish_decompress(d);
	else
		jpeg_abort_decompress(d);
	/* A warning leaves a complete image: accepted, as PIL does, unless
	 * the data ran out (libjpeg then pads with grey). */
	if (j->err.warned && strstr(j->err.msg, "Premature end")) {
		char m[JMSG_LENGTH_MAX];
		snprintf(m, sizeof m, "%s", j->err.msg);
		return rf_img_fail(s, RF_ETRUNCATED, "truncated JPEG (%zu bytes): %s", len, m);
	}
	if (info->cmyk) {
		for (uint32_t y = 0; y < ye - ys; y++)
			cmyk_to_rgb(s->pix + (size_t)y * stride, cw);
		/* rows shrink from 4 to 3 bytes a pixel: pack them */
		for (uint32_t y = 1; y < ye - ys; y++)
			memmove(s->pix + (size_t)y * cw * 3, s->pix + (size_t)y * stride,
				(size_t)cw * 3);
	}
	*dx = cx;
	*dy = ys;
	*dw = cw;
	*dh = ye - ys;
	return 0;
}

/* jpeg_region_run() under libjpeg's error handler. */
static int
jpeg_decode_region(const uint8_t *p, size_t len, const rf_image_info *info, int num, int den,
		   uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1, uint32_t *dx,
		   uint32_t *dy, uint32_t *dw, uint32_t *dh, rf_image_scratch *s)
{
	jd_state *j = jd_handle(s);

	if (!j)
		return rf_img_fail(s, -ENOMEM, "cannot set up a libjpeg decoder");
	if (!jpeg_ends(p, len))
		return rf_img_fail(s, RF_ETRUNCATED, "truncated JPEG (%zu bytes, no end marker)",
				len);
	j->err.warned = 0;
	j->err.msg[0] = 0;
	if (setjmp(j->err.jb))
		return jd_fail(s, s->jd, p, len);
	return jpeg_region_run(j, p, len, info, num, den, x0, y0, x1, y1, dx, dy, dw, dh, s);
}
#else
static void
rf_img_jd_free(rf_image_scratch *s)
{
	(void)s;
}
#endif

int
rf_image_region_decoding(void)
{
	return RF_HAVE_JPEG_REGION;
}

/* The smallest of 1/2, 1/4 and 1/8 that keeps a region of rw x rh source
 * pixels at least need_w x need_h; 1/1 when none.  libjpeg-turbo's other
 * factors (3/8, 5/8, ...) resample inside the IDCT and blur visibly more
 * than the resize they replace. */
static void
pick_scale(uint32_t rw, uint32_t rh, uint32_t need_w, uint32_t need_h, int *num, int *den)
{
	int n;
	tjscalingfactor *f = tjGetScalingFactors(&n);
	double best = 1.0;

	*num = *den = 1;
	for (int i = 0; f && i < n; i++) {
		double v = (double)f[i].num / f[i].denom;
		if (f[i].num != 1 || (f[i].denom != 2 && f[i].denom != 4 && f[i].denom != 8) ||
		    v >= best)
			continue;
		if ((double)rw * v >= need_w && (double)rh * v >= need_h) {
			best = v;
			*num = f[i].num;
			*den = f[i].denom;
		}
	}
}

int
rf_image_load(const void *data, size_t len, const rf_image_transform *t, uint64_t seed,
	      uint64_t epoch, uint64_t index, uint8_t *out, rf_image_info *info,
	      rf_image_scratch *s)
{
	rf_image_info tmp;
	resample_job j;
	uint32_t sw, sh, nw = 0, nh = 0;
	int num = 1, den = 1, rc;

	if (!info)
		info = &tmp;
	if ((rc = rf_image_transform_check(t, s->msg, sizeof s->msg)) < 0)
		return rc;
	if ((rc = rf_image_probe(data, len, info, s)) < 0)
		return rc;
	rf_image_crop_for(t, info->width, info->height, seed, epoch, index, &info->crop);
	if (t->mode == RF_IMAGE_CENTER)
		rf_img_eval_size(info->width, info->height, t->resize, &nw, &nh);
	if (t->dct_scale && info->format == RF_IMAGE_JPEG) {
		if (t->mode == RF_IMAGE_CENTER)
			pick_scale(info->width, info->height, nw, nh, &num, &den);
		else
			pick_scale(info->crop.w, info->crop.h, t->out_w, t->out_h, &num, &den);
	}
	info->scale_num = (uint32_t)num;
	info->scale_den = (uint32_t)den;
	int region = 0;
#if RF_HAVE_JPEG_REGION
	region = info->format == RF_IMAGE_JPEG && !t->full_decode;
#endif
	if (region) {
		tjscalingfactor f = {num, den};
		sw = (uint32_t)TJSCALED((int)info->width, f);
		sh = (uint32_t)TJSCALED((int)info->height, f);
	} else if ((rc = decode_into_scratch(data, len, info, num, den, &sw, &sh, s)) < 0) {
		return rc;
	}

	memset(&j, 0, sizeof j);
	j.src = s->pix;
	j.stride = (size_t)sw * 3;
	j.ow = t->out_w;
	j.oh = t->out_h;
	if (t->mode == RF_IMAGE_CENTER) {
		/* Resize(resize) then CenterCrop(out): the crop's outputs of the
		 * whole resize. */
		j.rw = sw;
		j.rh = sh;
		j.box[2] = (float)sw;
		j.box[3] = (float)sh;
		j.vw = nw;
		j.vh = nh;
		j.fx = (uint32_t)rf_img_py_round((nw - (double)t->out_w) / 2.0);
		j.fy = (uint32_t)rf_img_py_round((nh - (double)t->out_h) / 2.0);
	} else {
		const rf_image_crop *c = &info->crop;
		j.vw = t->out_w;
		j.vh = t->out_h;
		j.flip = c->flip;
		if (sw == info->width && sh == info->height) {
			/* crop then resize, as torchvision does it */
			j.rx = c->x;
			j.ry = c->y;
			j.rw = c->w;
			j.rh = c->h;
			j.box[2] = (float)c->w;
			j.box[3] = (float)c->h;
		} else {
			/* The crop in the scaled image's pixels: the whole pixels
			 * it touches as the region, the exact box inside it. */
			double fx = (double)sw / info->width, fy = (double)sh / info->height;
			double x0 = c->x * fx, x1 = (c->x + c->w) * fx;
			double y0 = c->y * fy, y1 = (c->y + c->h) * fy;
			j.rx = (uint32_t)floor(x0);
			j.ry = (uint32_t)floor(y0);
			uint32_t ex = (uint32_t)ceil(x1), ey = (uint32_t)ceil(y1);
			if (ex > sw)
				ex = sw;
			if (ey > sh)
				ey = sh;
			j.rw = ex > j.rx ? ex - j.rx : 1;
			j.rh = ey > j.ry ? ey - j.ry : 1;
			j.box[0] = (float)(x0 - j.rx);
			j.box[1] = (float)(y0 - j.ry);
			j.box[2] = (float)(x1 - j.rx);
			j.box[3] = (float)(y1 - j.ry);
			if (j.box[2] > (float)j.rw)
				j.box[2] = (float)j.rw;
			if (j.box[3] > (float)j.rh)
				j.box[3] = (float)j.rh;
		}
	}
#if RF_HAVE_JPEG_REGION
	if (region) {
		/* Decode only the pixels the resampler reads. */
		uint32_t x0, x1, y0, y1, dx, dy, dw, dh;
		rf_img_axis_span((int)j.rw, j.box[0], j.box[2], j.vw, j.fx, j.ow, &x0, &x1);
		rf_img_axis_span((int)j.rh, j.box[1], j.box[3], j.vh, j.fy, j.oh, &y0, &y1);
		if ((rc = jpeg_decode_region(data, len, info, num, den, j.rx + x0, j.ry + y0,
					     j.rx + x1, j.ry + y1, &dx, &dy, &dw, &dh, s)) < 0)
			return rc;
		j.src = s->pix;
		j.stride = (size_t)dw * 3;
		j.ox = dx;
		j.oy = dy;
		(void)dh;
	}
#endif
	return rf_img_resample(&j, out, s);
}
