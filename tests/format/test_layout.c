/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_chunk_layout and rf_chunk_decode on hand-built raw chunks,
 * as the loader's decode threads call them: section offsets (64-aligned, an
 * empty variable section last), every offsets rule with a power-of-two and a
 * non-power-of-two item size, raw sizes too small or too large, n = 0, a
 * misaligned buffer, and the decode errors (checksum, codec, buffer size,
 * missing context), each naming the file, chunk and offset given.
 */
#include <xxhash.h>

#include "fmt_test.h"

/* Schema: a (u8[5], fixed), v (i32[?][3]: item 12, variable), w (u16[?]:
 * item 2, variable). */
static rf_schema
schema(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "a", RF_DTYPE_U8, 1, (uint64_t[]){5}, -1), 0);
	CHECK_RC(rf_schema_add(&s, "v", RF_DTYPE_I32, 2, (uint64_t[]){0, 3}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "w", RF_DTYPE_U16, 1, (uint64_t[]){0}, 0), 0);
	return s;
}

static _Alignas(64) uint8_t raw[8192];
static const rf_chunk_ctx ctx = {"some/shard.rfs", 7, 12288};

/* n = 3; v holds 0, 2 and 1 items (36 bytes), w holds 0 items (empty). */
static uint64_t
build(void)
{
	memset(raw, 0, sizeof raw);
	/* a: 15 bytes at 0 */
	for (int i = 0; i < 15; i++)
		raw[i] = (uint8_t)i;
	/* v offsets at 64: 0, 0, 24, 36; data at 128 */
	rf_put_le64(raw + 64, 0);
	rf_put_le64(raw + 72, 0);
	rf_put_le64(raw + 80, 24);
	rf_put_le64(raw + 88, 36);
	for (int i = 0; i < 36; i++)
		raw[128 + i] = (uint8_t)(100 + i);
	/* w offsets at 192 (128 + 36 -> 164 -> 192): 0, 0, 0, 0; data at 256,
	 * empty: raw_size 256. */
	return 256;
}

static int
layout(const rf_schema *s, uint32_t n, const uint8_t *p, uint64_t size, rf_chunk_sections *sec,
       rf_diag *d)
{
	int rc = rf_chunk_layout(s, n, p, size, sec, &ctx, d);
	if (rc < 0 && rc != -EINVAL)
		CHECK(strstr(d->msg, "some/shard.rfs: chunk 7 at offset 12288"));
	return rc;
}

int
main(void)
{
	rf_schema s = schema();
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	rf_chunk_sections sec;
	uint64_t size = build(), computed;
	uint64_t var[3] = {0, 36, 0};
	CHECK_RC(rf_chunk_raw_size(&s, 3, var, &computed), 0);
	CHECK(computed == size);

	CHECK_RC(layout(&s, 3, raw, size, &sec, &d), 0);
	CHECK(sec.samples == 3 && sec.nfields == 3);
	CHECK(sec.field[0].data == raw && sec.field[0].offsets == NULL &&
	      sec.field[0].data_bytes == 15 && sec.field[0].item_bytes == 5);
	CHECK((const uint8_t *)sec.field[1].offsets == raw + 64 && sec.field[1].data == raw + 128 &&
	      sec.field[1].data_bytes == 36 && sec.field[1].item_bytes == 12);
	CHECK((const uint8_t *)sec.field[2].offsets == raw + 192 && sec.field[2].data == raw + 256 &&
	      sec.field[2].data_bytes == 0);

	/* Sizes: one byte short or long, and far off. */
	CHECK_RC(layout(&s, 3, raw, size - 1, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 3, raw, size + 1, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 3, raw, 10, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 3, raw, UINT64_MAX, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 4, raw, size, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, UINT32_MAX, raw, size, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 0, raw, size, &sec, &d), RF_ECORRUPT);
	CHECK_RC(layout(&s, 3, raw + 4, size, &sec, &d), -EINVAL);

	/* The offsets rules, item 12 (division) and item 2 (mask). */
	struct {
		uint64_t at, val;
	} bad[] = {
		{64, 12},            /* v offsets[0] != 0 */
		{72, 12},            /* v: 0, 12, 24, 36 is valid (checked below) */
		{80, 6},             /* v: not a multiple of 12 */
		{80, 0xFFFFFFFFFFFFFFF0ULL}, /* v: huge, then decreasing */
		{88, 132},           /* v: data past the raw size */
		{88, 12},            /* v: decreasing (24 -> 12) */
		{200, 2},            /* w offsets[1] > offsets[2] */
		{216, 1},            /* w: odd */
		{216, 2},            /* w: data past raw_size */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		build();
		rf_put_le64(raw + bad[i].at, bad[i].val);
		int rc = layout(&s, 3, raw, size, &sec, &d);
		if (bad[i].at == 72) {
			/* offsets 0, 12, 24, 36 is valid: the data split moves. */
			CHECK_RC(rc, 0);
			continue;
		}
		if (rc != RF_ECORRUPT) {
			fprintf(stderr, "case %zu: %d (%s)\n", i, rc, d.msg);
			return 1;
		}
		CHECK(strstr(d.msg, "field "));
	}

	/* Decoding. */
	build();
	rf_chunk_info ci = {0};
	ci.stored_bytes = ci.raw_bytes = size;
	ci.samples = 3;
	ci.codec = RF_CODEC_NONE;
	ci.xxh3 = XXH3_64bits(raw, size);
	ci.offset = ctx.offset;
	const uint8_t *out;
	CHECK_RC(rf_chunk_decode(&ci, raw, NULL, 0, NULL, 1, &out, &ctx, &d), 0);
	CHECK(out == raw);
	CHECK_RC(rf_chunk_open(&s, &ci, raw, NULL, 0, NULL, 1, &sec, &ctx, &d), 0);
	ci.xxh3 ^= 1;
	CHECK_RC(rf_chunk_decode(&ci, raw, NULL, 0, NULL, 1, &out, &ctx, &d), RF_ECHECKSUM);
	CHECK(strstr(d.msg, "some/shard.rfs: chunk 7 at offset 12288"));
	CHECK_RC(rf_chunk_decode(&ci, raw, NULL, 0, NULL, 0, &out, &ctx, &d), 0);
	ci.codec = (enum rf_codec)9;
	CHECK_RC(rf_chunk_decode(&ci, raw, NULL, 0, NULL, 0, &out, &ctx, &d), RF_ECORRUPT);

	/* zstd: a real frame of the raw chunk. */
	uint8_t frame[1024], dst[512];
	size_t fl = ZSTD_compress(frame, sizeof frame, raw, size, 3);
	CHECK(!ZSTD_isError(fl));
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	ci.codec = RF_CODEC_ZSTD;
	ci.stored_bytes = fl;
	ci.xxh3 = XXH3_64bits(frame, fl);
	_Alignas(64) uint8_t rbuf[512];
	CHECK_RC(rf_chunk_open(&s, &ci, frame, rbuf, sizeof rbuf, dctx, 1, &sec, &ctx, &d), 0);
	CHECK(memcmp(rbuf, raw, size) == 0 && sec.field[1].data == rbuf + 128);
	CHECK_RC(rf_chunk_decode(&ci, frame, rbuf, size - 1, dctx, 1, &out, &ctx, &d), -ENOSPC);
	CHECK_RC(rf_chunk_decode(&ci, frame, rbuf, sizeof rbuf, NULL, 1, &out, &ctx, &d), -EINVAL);
	/* A frame followed by a stray byte, and two frames. */
	memcpy(frame + fl, frame, fl);
	ci.stored_bytes = fl + 1;
	ci.xxh3 = XXH3_64bits(frame, fl + 1);
	CHECK_RC(rf_chunk_decode(&ci, frame, dst, sizeof dst, dctx, 1, &out, &ctx, &d), RF_ECODEC);
	ci.stored_bytes = 2 * fl;
	ci.xxh3 = XXH3_64bits(frame, 2 * fl);
	CHECK_RC(rf_chunk_decode(&ci, frame, dst, sizeof dst, dctx, 1, &out, &ctx, &d), RF_ECODEC);
	/* Garbage that is not a frame. */
	ci.stored_bytes = 64;
	ci.xxh3 = XXH3_64bits(raw, 64);
	CHECK_RC(rf_chunk_decode(&ci, raw, dst, sizeof dst, dctx, 1, &out, &ctx, &d), RF_ECODEC);
	CHECK(strstr(d.msg, "some/shard.rfs: chunk 7 at offset 12288"));
	ZSTD_freeDCtx(dctx);
	return 0;
}
