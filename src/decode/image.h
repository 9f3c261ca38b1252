/* SPDX-License-Identifier: MIT */
/*
 * Image decoding and augmentation for one sample: JPEG (TurboJPEG) and PNG
 * (libspng) bytes in, a uint8 [out_h, out_w, 3] RGB array out.
 *
 * Meant to be called by a decode worker per sample, into the batch: the
 * output is the caller's (out_h x out_w x 3 bytes, no alignment needed) and
 * so is the scratch (one rf_image_scratch per worker).  The scratch's buffers
 * grow to the largest image seen and are then reused, so a worker allocates
 * nothing per JPEG in steady state; PNG decoding makes libspng's few small
 * allocations per image (its context and zlib state), which libspng cannot
 * reuse.  Memory is bounded by rf_image_scratch.max_pixels (an image with
 * more pixels after any DCT-domain scaling is refused, -E2BIG).
 *
 * What the pixels are (the contract the tests check against PIL):
 *  - RGB whatever the input: grayscale is replicated, alpha is dropped (not
 *    composited: PIL's convert("RGB")), a palette is expanded (its
 *    transparency ignored), 16-bit samples keep their high byte, CMYK and
 *    YCCK JPEGs are taken as Adobe (inverted) CMYK, as Photoshop and PIL
 *    write them, and converted as PIL does: R = C' x K' / 255 with C', K'
 *    the stored (inverted) values, rounded as PIL's MULDIV255.
 *  - EXIF orientation is NOT applied: pixels come in stored order, as PIL's
 *    Image.open and torchvision's ImageFolder give them (a dataset whose
 *    photos rely on the tag should be packed after PIL.ImageOps.exif_transpose).
 *    Training pipelines compared against torchvision then see the same pixels.
 *  - PNG decodes exactly as PIL does.  JPEG is decoded by libjpeg-turbo with
 *    its defaults (accurate integer IDCT, smooth upsampling), the settings
 *    PIL uses, so a full-size decode matches PIL's within 1 per channel
 *    (0 when both use the same libjpeg-turbo build), tests/decode.
 *  - Resizing is PIL's bilinear resampling with antialias (the triangle
 *    filter widened by the downscale factor, fixed point, 22 fractional
 *    bits), reproduced operation for operation: without DCT-domain scaling
 *    the output of both transforms equals torchvision's on a PIL image
 *    (RandomResizedCrop / Resize + CenterCrop, bilinear, antialias) given
 *    the same crop box.
 *  - DCT-domain scaling (JPEG only, dct_scale = 1): when the region to
 *    resize is at least twice the output size, the JPEG is decoded at the
 *    smallest of libjpeg-turbo's factors (1/8 .. 7/8) that keeps the region
 *    at least the output size, and the resampler does the rest.  Faster by
 *    up to the factor squared, and close to (not equal to) a full decode:
 *    see the tolerance in tests/decode/test_image.c.
 *  - Region decoding (JPEG, where built with libjpeg-turbo's libjpeg API):
 *    only the rows and columns the crop's resampling reads are decoded,
 *    plus one MCU of margin so that chroma upsampling at the region's edges
 *    sees the same neighbours as in a whole decode: the pixels equal a
 *    whole decode's (tests/decode/test_image_crop.c).  Decoding stops after
 *    the last row needed, so corrupt entropy data below it goes unnoticed
 *    (a file cut short is still refused: it lacks its end marker).
 *
 * Random draws are a pure function of (seed, epoch, index): the same sample
 * in the same epoch gets the same crop and flip whatever the rank, worker,
 * batch or resume point (index is the global sample index in the dataset).
 *
 * Errors: negative codes from <ringfeed/ringfeed.h> with a message in
 * scratch->msg that names the problem (the caller adds shard, sample and
 * source name): RF_EFORMAT (not JPEG or PNG, or an unsupported kind),
 * RF_ETRUNCATED (the data ends early), RF_ECORRUPT (damaged data), -E2BIG
 * (above max_pixels), RF_EUSAGE (a bad transform), -ENOMEM.
 *
 * Threads: functions are reentrant; a scratch is used by one thread at a time.
 */
#ifndef RF_DECODE_IMAGE_H
#define RF_DECODE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

enum rf_image_format {
	RF_IMAGE_UNKNOWN = 0,
	RF_IMAGE_JPEG = 1,
	RF_IMAGE_PNG = 2,
};

enum rf_image_mode {
	/* Evaluation: resize the shorter side to `resize` (the longer one
	 * keeping the aspect ratio, truncated as torchvision does), then take
	 * the centred out_w x out_h crop. */
	RF_IMAGE_CENTER = 0,
	/* Training: torchvision's RandomResizedCrop (area fraction in
	 * [scale_min, scale_max], log-uniform aspect ratio in [ratio_min,
	 * ratio_max], 10 attempts then the centred fallback) resized to
	 * out_w x out_h, then a horizontal flip with probability flip_p. */
	RF_IMAGE_RANDOM_CROP = 1,
};

typedef struct rf_image_transform {
	enum rf_image_mode mode;
	uint32_t out_w, out_h;   /* output size, 1 .. 65535 */
	uint32_t resize;         /* CENTER: the shorter side before the crop,
	                            >= out_w and out_h (torchvision's 256 for 224) */
	double scale_min, scale_max; /* RANDOM_CROP: 0 < min <= max <= 1 (0.08, 1) */
	double ratio_min, ratio_max; /* RANDOM_CROP: 0 < min <= max (3/4, 4/3) */
	double flip_p;           /* RANDOM_CROP: 0 .. 1 (0.5) */
	int dct_scale;           /* 1 (default): JPEG DCT-domain downscaling */
	int full_decode;         /* 1: decode whole JPEGs even where the crop is
	                            known (0, the default, decodes only the rows and
	                            columns the crop needs, with the same pixels) */
} rf_image_transform;

/* 1 when this build decodes JPEG regions (libjpeg-turbo's libjpeg API;
 * rf_image_transform.full_decode), else 0. */
int rf_image_region_decoding(void);

/* torchvision's defaults: RandomResizedCrop(out) + RandomHorizontalFlip(), and
 * Resize(resize) + CenterCrop(out). */
void rf_image_transform_train(rf_image_transform *t, uint32_t out_w, uint32_t out_h);
void rf_image_transform_eval(rf_image_transform *t, uint32_t out_w, uint32_t out_h,
			     uint32_t resize);

/* 0, or RF_EUSAGE with the reason in msg. */
int rf_image_transform_check(const rf_image_transform *t, char *msg, size_t cap);

/* A region of the source image (in its stored pixels) and a flip. */
typedef struct rf_image_crop {
	uint32_t x, y, w, h;
	int flip;
} rf_image_crop;

/* The crop and flip of one sample of a width x height image: a pure
 * function of its arguments (RF_IMAGE_CENTER: the region the centre crop
 * covers, for information; no random draw). */
void rf_image_crop_for(const rf_image_transform *t, uint32_t width, uint32_t height,
		       uint64_t seed, uint64_t epoch, uint64_t index, rf_image_crop *c);

/* A decode worker's private state.  Zero it, or call rf_image_scratch_init. */
typedef struct rf_image_scratch {
	void *tj;                /* TurboJPEG handle, made on first use */
	void *jd;                /* libjpeg decompressor (region decodes), ditto */
	uint8_t *pix;            /* decoded image */
	size_t pix_cap;
	uint8_t *tmp;            /* horizontal pass */
	size_t tmp_cap;
	void *coef;              /* resampling coefficients and bounds */
	size_t coef_cap;
	uint64_t max_pixels;     /* 0 = RF_IMAGE_MAX_PIXELS */
	char msg[256];           /* the last error */
} rf_image_scratch;

/* Images larger than this (after DCT scaling) are refused by default:
 * 8192 x 8192, 256 MiB of decoded CMYK in the worst case. */
#define RF_IMAGE_MAX_PIXELS (1ull << 26)

/* The longest side of an image accepted (JPEG's own limit is 65500). */
#define RF_IMAGE_MAX_SIDE 65535u

/* The most memory a scratch grows to with transform t (rf_image_load) and
 * max_pixels (0 = the default), libjpeg's and libspng's own working memory
 * aside: for a memory plan of decode_threads x this.  And what a scratch
 * holds now. */
size_t rf_image_scratch_bound(const rf_image_transform *t, uint64_t max_pixels);
size_t rf_image_scratch_bytes(const rf_image_scratch *s);

void rf_image_scratch_init(rf_image_scratch *s);
void rf_image_scratch_fini(rf_image_scratch *s);

typedef struct rf_image_info {
	enum rf_image_format format;
	uint32_t width, height;  /* as stored */
	uint32_t channels;       /* of the input: 1 gray, 2 gray+alpha, 3, 4 (RGBA or CMYK) */
	uint32_t bit_depth;      /* 8 or 16 (PNG), 8 for JPEG */
	int cmyk;                /* JPEG in CMYK or YCCK */
	uint32_t scale_num, scale_den; /* the DCT scaling used (1/1 when none) */
	rf_image_crop crop;      /* what the transform took */
} rf_image_info;

/* The format from the first bytes (no decoding). */
enum rf_image_format rf_image_sniff(const void *data, size_t len);

/* Parse the headers only: format, size, channels.  0 or an error. */
int rf_image_probe(const void *data, size_t len, rf_image_info *info, rf_image_scratch *s);

/* Check an image without keeping its pixels, as packing does: the headers
 * and that the data ends where the format says (a JPEG's end marker, a PNG's
 * IEND chunk) when full is 0; a whole decode (a JPEG at 1/8 scale, which
 * still reads all its data) when full is 1.  0 or an error. */
int rf_image_check(const void *data, size_t len, int full, rf_image_info *info,
		   rf_image_scratch *s);

/* Decode at full size into rgb (info->width x info->height x 3 bytes, at
 * most `cap`; -ENOSPC with the size needed in the message otherwise).  For
 * tests and tools; the pipeline uses rf_image_load. */
int rf_image_decode(const void *data, size_t len, uint8_t *rgb, size_t cap,
		    rf_image_info *info, rf_image_scratch *s);

/*
 * Decode one sample and transform it into out (t->out_h x t->out_w x 3).
 * seed/epoch/index key the random draws (ignored by RF_IMAGE_CENTER).  info
 * may be NULL.  Returns 0 or an error (above); out is undefined on error.
 */
int rf_image_load(const void *data, size_t len, const rf_image_transform *t, uint64_t seed,
		  uint64_t epoch, uint64_t index, uint8_t *out, rf_image_info *info,
		  rf_image_scratch *s);

/* The resampler on its own (PIL's bilinear with antialias): resize the
 * region box = (x0, y0, x1, y1) (fractional, in pixels of the
 * src_w x src_h RGB image) to out_w x out_h, mirroring it when flip.  As
 * PIL's Image.resize(size, BILINEAR, box).  0, RF_EUSAGE or -ENOMEM. */
int rf_image_resize(const uint8_t *src, uint32_t src_w, uint32_t src_h, const float box[4],
		    uint8_t *out, uint32_t out_w, uint32_t out_h, int flip, rf_image_scratch *s);

#endif
