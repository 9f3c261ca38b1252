/* SPDX-License-Identifier: MIT */
/* The crop/resize/flip transforms of one sample: their parameters, the crop
 * each draws, and the resampler; the contract is in image.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RF_IMG_X86 1
#else
#define RF_IMG_X86 0
#endif

#include <ringfeed/ringfeed.h>

#include "decode/image.h"
#include "decode/image_impl.h"

/* ---------------------------------------------------------- transforms */

void
rf_image_transform_train(rf_image_transform *t, uint32_t out_w, uint32_t out_h)
{
	memset(t, 0, sizeof *t);
	t->mode = RF_IMAGE_RANDOM_CROP;
	t->out_w = out_w;
	t->out_h = out_h;
	t->scale_min = 0.08;
	t->scale_max = 1.0;
	t->ratio_min = 3.0 / 4.0;
	t->ratio_max = 4.0 / 3.0;
	t->flip_p = 0.5;
	t->dct_scale = 1;
}

void
rf_image_transform_eval(rf_image_transform *t, uint32_t out_w, uint32_t out_h, uint32_t resize)
{
	memset(t, 0, sizeof *t);
	t->mode = RF_IMAGE_CENTER;
	t->out_w = out_w;
	t->out_h = out_h;
	t->resize = resize;
	t->dct_scale = 1;
}

int
rf_image_transform_check(const rf_image_transform *t, char *msg, size_t cap)
{
	const char *why = NULL;

	if (t->out_w < 1 || t->out_h < 1 || t->out_w > 65535 || t->out_h > 65535)
		why = "the output size must be 1..65535 in each dimension";
	else if (t->mode == RF_IMAGE_CENTER) {
		if (t->resize < t->out_w || t->resize < t->out_h)
			why = "resize (the shorter side before the centre crop) must be at "
			      "least the output's width and height";
		else if (t->resize > 65535)
			why = "resize must be at most 65535";
	} else if (t->mode == RF_IMAGE_RANDOM_CROP) {
		if (!(t->scale_min > 0 && t->scale_min <= t->scale_max && t->scale_max <= 1))
			why = "the crop's area fraction must satisfy 0 < scale_min <= scale_max <= 1";
		else if (!(t->ratio_min > 0 && t->ratio_min <= t->ratio_max && isfinite(t->ratio_max)))
			why = "the crop's aspect ratio must satisfy 0 < ratio_min <= ratio_max";
		else if (!(t->flip_p >= 0 && t->flip_p <= 1))
			why = "the flip probability (flip_p; rf_image_field.flip) must be in 0..1";
	} else {
		why = "unknown transform mode";
	}
	if (!why)
		return 0;
	if (msg && cap)
		snprintf(msg, cap, "%s", why);
	return RF_EUSAGE;
}

/* The random draws: draw k of sample (seed, epoch, index) is a hash of the
 * four, so any draw of any sample is computed without a generator's state
 * (SplitMix64's finaliser; keyed by chaining it). */
static uint64_t
mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull

typedef struct draws {
	uint64_t key;
	uint64_t k;
} draws;

static void
draws_init(draws *r, uint64_t seed, uint64_t epoch, uint64_t index)
{
	uint64_t h = mix64(seed + GOLDEN);
	h = mix64(h ^ (epoch + 2 * GOLDEN));
	h = mix64(h ^ (index + 3 * GOLDEN));
	r->key = h;
	r->k = 0;
}

/* Uniform in [0, 1), 53 bits. */
static double
draw_unit(draws *r)
{
	uint64_t x = mix64(r->key + ++r->k * GOLDEN);
	return (double)(x >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n >= 1 (n < 2^32 here: bias below 2^-21). */
static uint32_t
draw_below(draws *r, uint32_t n)
{
	uint32_t v = (uint32_t)(draw_unit(r) * n);
	return v < n ? v : n - 1;
}

/* Python's round(): halves to even (the default rounding mode). */
long
rf_img_py_round(double x)
{
	return lrint(x);
}

/* torchvision's Resize(int) output size: the shorter side becomes `size`,
 * the longer one int(size * long / short). */
void
rf_img_eval_size(uint32_t w, uint32_t h, uint32_t size, uint32_t *nw, uint32_t *nh)
{
	if (w <= h) {
		*nw = size;
		*nh = (uint32_t)((double)size * h / w);
	} else {
		*nh = size;
		*nw = (uint32_t)((double)size * w / h);
	}
	if (*nw < 1)
		*nw = 1;
	if (*nh < 1)
		*nh = 1;
}

void
rf_image_crop_for(const rf_image_transform *t, uint32_t width, uint32_t height, uint64_t seed,
		  uint64_t epoch, uint64_t index, rf_image_crop *c)
{
	memset(c, 0, sizeof *c);
	if (t->mode == RF_IMAGE_CENTER) {
		uint32_t nw, nh;
		rf_img_eval_size(width, height, t->resize, &nw, &nh);
		uint32_t left = (uint32_t)rf_img_py_round((nw - (double)t->out_w) / 2.0);
		uint32_t top = (uint32_t)rf_img_py_round((nh - (double)t->out_h) / 2.0);
		c->x = (uint32_t)((double)left * width / nw);
		c->y = (uint32_t)((double)top * height / nh);
		c->w = (uint32_t)ceil((double)t->out_w * width / nw);
		c->h = (uint32_t)ceil((double)t->out_h * height / nh);
		if (c->w > width - c->x)
			c->w = width - c->x;
		if (c->h > height - c->y)
			c->h = height - c->y;
		return;
	}

	/* torchvision.transforms.RandomResizedCrop.get_params, draw for draw. */
	draws r;
	double area = (double)width * height;
	double lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);

	draws_init(&r, seed, epoch, index);
	for (int attempt = 0; attempt < 10; attempt++) {
		double target = area * (t->scale_min + (t->scale_max - t->scale_min) * draw_unit(&r));
		double aspect = exp(lr0 + (lr1 - lr0) * draw_unit(&r));
		long w = rf_img_py_round(sqrt(target * aspect));
		long h = rf_img_py_round(sqrt(target / aspect));
		if (w > 0 && w <= (long)width && h > 0 && h <= (long)height) {
			c->y = draw_below(&r, (uint32_t)(height - h + 1));
			c->x = draw_below(&r, (uint32_t)(width - w + 1));
			c->w = (uint32_t)w;
			c->h = (uint32_t)h;
			goto flip;
		}
	}
	/* The fallback: the centred crop of the closest allowed ratio. */
	{
		double in_ratio = (double)width / height;
		long w, h;
		if (in_ratio < t->ratio_min) {
			w = width;
			h = rf_img_py_round(w / t->ratio_min);
		} else if (in_ratio > t->ratio_max) {
			h = height;
			w = rf_img_py_round(h * t->ratio_max);
		} else {
			w = width;
			h = height;
		}
		if (w < 1)
			w = 1;
		if (h < 1)
			h = 1;
		if (w > (long)width)
			w = width;
		if (h > (long)height)
			h = height;
		c->w = (uint32_t)w;
		c->h = (uint32_t)h;
		c->y = (uint32_t)((height - h) / 2);
		c->x = (uint32_t)((width - w) / 2);
	}
flip:
	/* The flip draw always comes after the crop's, at a fixed position
	 * (draw 64), so that the crop's attempts do not shift it. */
	r.k = 63;
	c->flip = t->flip_p > 0 && draw_unit(&r) < t->flip_p;
}

/* ----------------------------------------------------------- resampler */

/*
 * PIL's ImagingResample with the bilinear filter (libImaging/Resample.c),
 * operation for operation: coefficients in double, normalised, rounded to
 * 22 fractional bits; a horizontal pass over the rows the vertical pass
 * needs, then the vertical pass; each sum starts at half an LSB and is
 * clamped to 0..255.
 *
 * Generalised in two ways that keep its arithmetic: the input is a region
 * (rx, ry, rw, rh) of a larger image (PIL's crop: taps are clamped to the
 * region, as they are to a cropped image), and only outputs
 * [first, first + count) of a resize to `vsize` are computed (the centre
 * crop of a resize, without the rest of it).
 */
#define PRECISION_BITS (32 - 8 - 2)
#define RF_IMG_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((size_t)(a) - 1))

typedef struct axis {
	int ksize;
	int *bounds;     /* count x (min, n) */
	int32_t *k;      /* count x ksize */
} axis;

static double
tri(double x)
{
	if (x < 0.0)
		x = -x;
	return x < 1.0 ? 1.0 - x : 0.0;
}

static int
axis_ksize(float in0, float in1, uint32_t vsize)
{
	double scale = (double)(in1 - in0) / vsize;
	double fs = scale < 1.0 ? 1.0 : scale;
	return (int)ceil(1.0 * fs) * 2 + 1;
}

/* ksize doubles of room in dk. */
static void
axis_coeffs(axis *a, int in_size, float in0, float in1, uint32_t vsize, uint32_t first,
	    uint32_t count, double *dk)
{
	double scale = (double)(in1 - in0) / vsize;
	double fs = scale < 1.0 ? 1.0 : scale;
	double support = 1.0 * fs;
	double ss = 1.0 / fs;

	for (uint32_t i = 0; i < count; i++) {
		uint32_t xx = first + i;
		double center = in0 + (xx + 0.5) * scale;
		double ww = 0.0;
		int xmin = (int)(center - support + 0.5);
		int xmax = (int)(center + support + 0.5);
		int x;

		if (xmin < 0)
			xmin = 0;
		if (xmax > in_size)
			xmax = in_size;
		xmax -= xmin;
		if (xmax < 0)
			xmax = 0;
		for (x = 0; x < xmax; x++) {
			double w = tri((x + xmin - center + 0.5) * ss);
			dk[x] = w;
			ww += w;
		}
		int32_t *k = &a->k[(size_t)i * a->ksize];
		for (x = 0; x < xmax; x++) {
			double v = ww != 0.0 ? dk[x] / ww : dk[x];
			k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
				     : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
		}
		for (; x < a->ksize; x++)
			k[x] = 0;
		a->bounds[2 * i] = xmin;
		a->bounds[2 * i + 1] = xmax;
	}
}

static void
tap_range(int in_size, double center, double support, int *lo, int *hi)
{
	int xmin = (int)(center - support + 0.5);
	int xmax = (int)(center + support + 0.5);

	if (xmin < 0)
		xmin = 0;
	if (xmax > in_size)
		xmax = in_size;
	*lo = xmin;
	*hi = xmax;
}

void
rf_img_axis_span(int in_size, float in0, float in1, uint32_t vsize, uint32_t first,
		 uint32_t count, uint32_t *lo, uint32_t *hi)
{
	double scale = (double)(in1 - in0) / vsize;
	double fs = scale < 1.0 ? 1.0 : scale;
	int a0, a1, b0, b1;

	/* The same centres as axis_coeffs(); the first output's taps start
	 * lowest and the last one's end highest. */
	tap_range(in_size, in0 + (first + 0.5) * scale, fs, &a0, &a1);
	tap_range(in_size, in0 + (first + count - 1 + 0.5) * scale, fs, &b0, &b1);
	*lo = (uint32_t)(a0 < b0 ? a0 : b0);
	*hi = (uint32_t)(a1 > b1 ? a1 : b1);
	if (*hi <= *lo)
		*hi = *lo + 1 <= (uint32_t)in_size ? *lo + 1 : (uint32_t)in_size;
}

static inline uint8_t
clip8(int32_t in)
{
	if (in >= (1 << PRECISION_BITS << 8))
		return 255;
	if (in <= 0)
		return 0;
	return (uint8_t)(in >> PRECISION_BITS);
}

/* The vertical pass: for each output row, every tap adds a whole row into
 * 32-bit sums (contiguous, so the compiler vectorises it; GCC's -O2 does
 * not before version 12, and only cheaply after), the same sums as PIL's
 * per-pixel loop in the same order.  Written once as a macro and compiled
 * twice, plain and for AVX2 (8 lanes of 32-bit products), picked at run
 * time as the horizontal pass is: no ifunc, whose resolver runs before a
 * sanitizer's runtime is up. */
#define VPASS_BODY                                                                   \
	for (uint32_t yy = 0; yy < oh; yy++) {                                            \
		int ymin = ay->bounds[2 * yy] - y_first, yn = ay->bounds[2 * yy + 1];      \
		const int32_t *k = &ay->k[(size_t)yy * ay->ksize];                          \
		uint8_t *restrict o = out + (size_t)yy * n;                                 \
		for (size_t x = 0; x < n; x++)                                              \
			acc[x] = 1 << (PRECISION_BITS - 1);                                 \
		for (int y = 0; y < yn; y++) {                                              \
			const uint8_t *restrict row = tmp + (size_t)(ymin + y) * n;         \
			int32_t ky = k[y];                                                  \
			for (size_t x = 0; x < n; x++)                                      \
				acc[x] += row[x] * ky;                                      \
		}                                                                           \
		for (size_t x = 0; x < n; x++) {                                            \
			int32_t v = acc[x] >> PRECISION_BITS;                               \
			o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);                    \
		}                                                                           \
	}

#if defined(__GNUC__) && !defined(__clang__)
#define RF_VECTORIZE __attribute__((optimize("tree-vectorize")))
#else
#define RF_VECTORIZE
#endif

static void RF_VECTORIZE
vpass_plain(uint8_t *out, const uint8_t *tmp, int32_t *restrict acc, size_t n, uint32_t oh,
	    const axis *ay, int y_first)
{
	VPASS_BODY
}

#if RF_IMG_X86
static void RF_VECTORIZE __attribute__((target("avx2")))
vpass_avx2(uint8_t *out, const uint8_t *tmp, int32_t *restrict acc, size_t n, uint32_t oh,
	   const axis *ay, int y_first)
{
	VPASS_BODY
}
#endif

int rf_img_simd_max = 2;

/* One output pixel of the horizontal pass. */
static inline void
hpass_px(const uint8_t *p, const int32_t *k, int n, uint8_t *o)
{
	int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
	for (int x = 0; x < n; x++) {
		s0 += p[3 * x] * k[x];
		s1 += p[3 * x + 1] * k[x];
		s2 += p[3 * x + 2] * k[x];
	}
	o[0] = clip8(s0);
	o[1] = clip8(s1);
	o[2] = clip8(s2);
}

/* Where output pixel xx of a row goes: xx, or its mirror when flipping
 * (the flip is done here, on the horizontal pass's rows: the vertical pass
 * works column by column, so its results are the same, mirrored). */
#define HOUT(o, xx, ow, flip) ((o) + 3 * (size_t)((flip) ? (ow) - 1 - (xx) : (xx)))

/* Row `row` of src; the region's pixel x is src's pixel x + shift; src's
 * rows have safe + 1 pixels. */
static void
hpass_scalar(const uint8_t *row, uint8_t *o, const axis *ax, uint32_t ow, int shift, int safe,
	     int flip)
{
	(void)safe;
	for (uint32_t xx = 0; xx < ow; xx++)
		hpass_px(row + (size_t)(ax->bounds[2 * xx] + shift) * 3,
			 &ax->k[(size_t)xx * ax->ksize], ax->bounds[2 * xx + 1],
			 HOUT(o, xx, ow, flip));
}

#if RF_IMG_X86
/* The same sums with a pixel's three channels in one vector (integer sums:
 * the order does not change them).  Taps that end at src's last pixel
 * take the scalar path (the 4-byte load would pass the buffer's end). */
static void __attribute__((target("sse4.1")))
hpass_sse41(const uint8_t *row, uint8_t *o, const axis *ax, uint32_t ow, int shift, int safe,
	    int flip)
{
	const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));

	for (uint32_t xx = 0; xx < ow; xx++) {
		int xmin = ax->bounds[2 * xx] + shift, xn = ax->bounds[2 * xx + 1];
		const int32_t *k = &ax->k[(size_t)xx * ax->ksize];
		const uint8_t *p = row + (size_t)xmin * 3;
		uint8_t *d = HOUT(o, xx, ow, flip);
		if (xmin + xn > safe) {
			hpass_px(p, k, xn, d);
			continue;
		}
		__m128i acc = half;
		for (int x = 0; x < xn; x++) {
			uint32_t v;
			memcpy(&v, p + 3 * x, 4);
			__m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)v));
			acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[x])));
		}
		acc = _mm_srai_epi32(acc, PRECISION_BITS);
		acc = _mm_packs_epi32(acc, acc);
		acc = _mm_packus_epi16(acc, acc);
		uint32_t r = (uint32_t)_mm_cvtsi128_si32(acc);
		d[0] = (uint8_t)r;
		d[1] = (uint8_t)(r >> 8);
		d[2] = (uint8_t)(r >> 16);
	}
}

/* Two output pixels a step in 8 lanes: the taps of the one with fewer are
 * padded with zero coefficients (the axis's rows are ksize long, zeros
 * past n). */
static void __attribute__((target("avx2")))
hpass_avx2(const uint8_t *row, uint8_t *o, const axis *ax, uint32_t ow, int shift, int safe,
	   int flip)
{
	const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	uint32_t xx = 0;

	for (; xx + 1 < ow; xx += 2) {
		int xa = ax->bounds[2 * xx] + shift, na = ax->bounds[2 * xx + 1];
		int xb = ax->bounds[2 * xx + 2] + shift, nb = ax->bounds[2 * xx + 3];
		int n = na > nb ? na : nb;
		const int32_t *ka = &ax->k[(size_t)xx * ax->ksize], *kb = ka + ax->ksize;
		const uint8_t *pa = row + (size_t)xa * 3, *pb = row + (size_t)xb * 3;
		uint8_t *da = HOUT(o, xx, ow, flip), *db = HOUT(o, xx + 1, ow, flip);
		if (xa + n > safe || xb + n > safe) {
			hpass_px(pa, ka, na, da);
			hpass_px(pb, kb, nb, db);
			continue;
		}
		__m256i acc = half;
		for (int x = 0; x < n; x++) {
			uint32_t va, vb;
			memcpy(&va, pa + 3 * x, 4);
			memcpy(&vb, pb + 3 * x, 4);
			__m128i v = _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)va),
						       _mm_cvtsi32_si128((int)vb));
			__m256i kk = _mm256_set_m128i(_mm_set1_epi32(kb[x]), _mm_set1_epi32(ka[x]));
			acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), kk));
		}
		acc = _mm256_srai_epi32(acc, PRECISION_BITS);
		acc = _mm256_packs_epi32(acc, acc);
		acc = _mm256_packus_epi16(acc, acc);
		uint32_t ra = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(acc));
		uint32_t rb = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(acc, 1));
		da[0] = (uint8_t)ra;
		da[1] = (uint8_t)(ra >> 8);
		da[2] = (uint8_t)(ra >> 16);
		db[0] = (uint8_t)rb;
		db[1] = (uint8_t)(rb >> 8);
		db[2] = (uint8_t)(rb >> 16);
	}
	for (; xx < ow; xx++)
		hpass_px(row + (size_t)(ax->bounds[2 * xx] + shift) * 3,
			 &ax->k[(size_t)xx * ax->ksize], ax->bounds[2 * xx + 1],
			 HOUT(o, xx, ow, flip));
}
#endif

static void
hpass(const uint8_t *row, uint8_t *o, const axis *ax, uint32_t ow, int shift, int safe, int flip)
{
#if RF_IMG_X86
	if (rf_img_simd_max >= 2 && __builtin_cpu_supports("avx2")) {
		hpass_avx2(row, o, ax, ow, shift, safe, flip);
		return;
	}
	if (rf_img_simd_max >= 1 && __builtin_cpu_supports("sse4.1")) {
		hpass_sse41(row, o, ax, ow, shift, safe, flip);
		return;
	}
#endif
	hpass_scalar(row, o, ax, ow, shift, safe, flip);
}

int
rf_img_resample(const resample_job *j, uint8_t *out, rf_image_scratch *s)
{
	axis ax, ay;
	size_t need;
	uint8_t *cbuf;

	ax.ksize = axis_ksize(j->box[0], j->box[2], j->vw);
	ay.ksize = axis_ksize(j->box[1], j->box[3], j->vh);
	int kmax = ax.ksize > ay.ksize ? ax.ksize : ay.ksize;
	size_t kx = (size_t)j->ow * ax.ksize, ky = (size_t)j->oh * ay.ksize;
	need = (kx + ky) * sizeof(int32_t) + 2 * ((size_t)j->ow + j->oh) * sizeof(int) +
	       (size_t)kmax * sizeof(double) + 16;
	if (rf_img_grow(&s->coef, &s->coef_cap, need) < 0)
		return rf_img_fail(s, -ENOMEM, "out of memory for %zu bytes of resampling "
			       "coefficients", need);
	cbuf = s->coef;
	double *dk = (double *)(void *)cbuf;
	ax.k = (int32_t *)(void *)(cbuf + (size_t)kmax * sizeof(double));
	ay.k = ax.k + kx;
	ax.bounds = (int *)(void *)(ay.k + ky);
	ay.bounds = ax.bounds + 2 * (size_t)j->ow;
	axis_coeffs(&ax, (int)j->rw, j->box[0], j->box[2], j->vw, j->fx, j->ow, dk);
	axis_coeffs(&ay, (int)j->rh, j->box[1], j->box[3], j->vh, j->fy, j->oh, dk);

	/* The source rows the vertical pass reads. */
	int y_first = ay.bounds[0];
	int y_last = ay.bounds[2 * (j->oh - 1)] + ay.bounds[2 * (j->oh - 1) + 1];
	if (y_last <= y_first)
		y_last = y_first + 1;
	size_t nrows = (size_t)(y_last - y_first);
	size_t tstride = (size_t)j->ow * 3;
	size_t acc_off = RF_IMG_ALIGN_UP(nrows * tstride, 64);
	need = acc_off + tstride * sizeof(int32_t);
	if (rf_img_grow((void **)&s->tmp, &s->tmp_cap, need) < 0)
		return rf_img_fail(s, -ENOMEM, "out of memory for %zu bytes of resampling rows",
				need);

	/* Horizontal pass: rows [y_first, y_last) of the region.  4-byte
	 * loads of a pixel are safe before the last pixel of src's rows. */
	int safe = (int)(j->stride / 3) - 1;
	int shift = (int)j->rx - (int)j->ox;
	for (size_t yy = 0; yy < nrows; yy++) {
		/* src holds the image from (ox, oy): the region's pixels the
		 * taps read are inside it. */
		const uint8_t *row = j->src + (j->ry + y_first + yy - j->oy) * j->stride;
		hpass(row, s->tmp + yy * tstride, &ax, j->ow, shift, safe, j->flip);
	}
	/* Vertical pass, into the output (its rows mirrored already when
	 * flipping). */
	int32_t *acc = (int32_t *)(void *)(s->tmp + acc_off);
#if RF_IMG_X86
	if (rf_img_simd_max >= 2 && __builtin_cpu_supports("avx2")) {
		vpass_avx2(out, s->tmp, acc, tstride, j->oh, &ay, y_first);
		return 0;
	}
#endif
	vpass_plain(out, s->tmp, acc, tstride, j->oh, &ay, y_first);
	return 0;
}

int
rf_image_resize(const uint8_t *src, uint32_t src_w, uint32_t src_h, const float box[4],
		uint8_t *out, uint32_t out_w, uint32_t out_h, int flip, rf_image_scratch *s)
{
	resample_job j;

	if (!src_w || !src_h || !out_w || !out_h || !(box[0] >= 0) || !(box[1] >= 0) ||
	    !(box[2] > box[0]) || !(box[3] > box[1]) || box[2] > (float)src_w ||
	    box[3] > (float)src_h)
		return rf_img_fail(s, RF_EUSAGE, "bad resize: box or size out of range");
	memset(&j, 0, sizeof j);
	j.src = src;
	j.stride = (size_t)src_w * 3;
	j.rw = src_w;
	j.rh = src_h;
	memcpy(j.box, box, sizeof j.box);
	j.vw = j.ow = out_w;
	j.vh = j.oh = out_h;
	j.flip = flip;
	return rf_img_resample(&j, out, s);
}
