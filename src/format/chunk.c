/* SPDX-License-Identifier: MIT */
/* Chunks: the raw columnar layout (docs/format.md, "Chunks"), its complete
 * validation, and decoding of stored bytes (checksum, zstd).  Everything here
 * is a pure function of its arguments so the loader's decode threads can call
 * it concurrently. */
#include <errno.h>
#include <string.h>
#include "xxh.h"
#include <zstd.h>

#include "format/format.h"

#define CTX_FMT "%s: chunk %llu at offset %llu: "
#define CTX_ARGS(c) ((c) && (c)->path ? (c)->path : "?"), \
	(unsigned long long)((c) ? (c)->chunk : 0), (unsigned long long)((c) ? (c)->offset : 0)

int
rf_chunk_raw_size(const rf_schema *schema, uint64_t n, const uint64_t *var_bytes, uint64_t *out)
{
	uint64_t pos = 0;
	for (uint32_t k = 0; k < schema->nfields; k++) {
		const rf_field *f = &schema->fields[k];
		uint64_t item = rf_field_item_bytes(f), bytes;
		if (pos > UINT64_MAX - RF_FMT_SECTION_ALIGN)
			return -EOVERFLOW;
		pos = rf_chunk_section_align(pos);
		if (f->var_dim < 0) {
			if (rf_mul_u64(n, item, &bytes) < 0 || rf_add_u64(pos, bytes, &pos) < 0)
				return -EOVERFLOW;
			continue;
		}
		if (rf_add_u64(n, 1, &bytes) < 0 || rf_mul_u64(bytes, 8, &bytes) < 0 ||
		    rf_add_u64(pos, bytes, &pos) < 0 || pos > UINT64_MAX - RF_FMT_SECTION_ALIGN)
			return -EOVERFLOW;
		pos = rf_chunk_section_align(pos);
		if (rf_add_u64(pos, var_bytes ? var_bytes[k] : 0, &pos) < 0)
			return -EOVERFLOW;
	}
	*out = pos;
	return 0;
}

/* Check one variable field's offsets: offsets[0] == 0, non-decreasing, each
 * a multiple of item (so every step is), offsets[n] <= limit.  Returns the
 * index of the first bad entry, or n + 1 when all are good. */
static uint64_t
check_offsets(const uint64_t *off, uint64_t n, uint64_t item, uint64_t limit)
{
	if (off[0] != 0)
		return 0;
	uint64_t prev = 0;
	if ((item & (item - 1)) == 0) {
		/* The common case (item 1, 2, 4 ...): a mask instead of a division
		 * per sample. */
		uint64_t mask = item - 1, bad = 0;
		for (uint64_t i = 1; i <= n; i++) {
			uint64_t o = off[i];
			bad |= (o < prev) | ((o & mask) != 0);
			if (RF_UNLIKELY(bad))
				return i;
			prev = o;
		}
	} else {
		for (uint64_t i = 1; i <= n; i++) {
			uint64_t o = off[i];
			if (o < prev || o % item != 0)
				return i;
			prev = o;
		}
	}
	return prev <= limit ? n + 1 : n;
}

int
rf_chunk_layout(const rf_schema *schema, uint32_t n, const uint8_t *raw, uint64_t raw_size,
		rf_chunk_sections *out, const rf_chunk_ctx *ctx, rf_diag *d)
{
	if ((uintptr_t)raw % 8 != 0)
		return rf_fail(d, -EINVAL, CTX_FMT "raw buffer is not 8-byte aligned", CTX_ARGS(ctx));
	if (n == 0)
		return rf_fail(d, RF_ECORRUPT, CTX_FMT "holds no sample", CTX_ARGS(ctx));
	out->samples = n;
	out->nfields = schema->nfields;
	uint64_t pos = 0;
	for (uint32_t k = 0; k < schema->nfields; k++) {
		const rf_field *f = &schema->fields[k];
		rf_chunk_section *s = &out->field[k];
		uint64_t item = rf_field_item_bytes(f);
		s->item_bytes = item;
		/* pos <= raw_size here; raw_size is at most 2^32 in a valid index,
		 * but guard anyway so the alignment cannot wrap. */
		if (pos > UINT64_MAX - RF_FMT_SECTION_ALIGN || rf_chunk_section_align(pos) > raw_size)
			return rf_fail(d, RF_ECORRUPT,
				       CTX_FMT "field %s: section starts past the raw size %llu",
				       CTX_ARGS(ctx), f->name, (unsigned long long)raw_size);
		pos = rf_chunk_section_align(pos);
		if (f->var_dim < 0) {
			uint64_t bytes;
			if (rf_mul_u64(n, item, &bytes) < 0 || bytes > raw_size - pos)
				return rf_fail(d, RF_ECORRUPT,
					       CTX_FMT "field %s: %u values of %llu bytes at raw offset %llu "
					       "do not fit in raw size %llu",
					       CTX_ARGS(ctx), f->name, n, (unsigned long long)item,
					       (unsigned long long)pos, (unsigned long long)raw_size);
			s->data = raw + pos;
			s->offsets = NULL;
			s->data_bytes = bytes;
			pos += bytes;
			continue;
		}
		uint64_t obytes = ((uint64_t)n + 1) * 8;
		if (obytes > raw_size - pos)
			return rf_fail(d, RF_ECORRUPT,
				       CTX_FMT "field %s: %u offsets at raw offset %llu do not fit in "
				       "raw size %llu",
				       CTX_ARGS(ctx), f->name, n + 1, (unsigned long long)pos,
				       (unsigned long long)raw_size);
		const uint64_t *off = (const uint64_t *)(const void *)(raw + pos);
		uint64_t dstart = rf_chunk_section_align(pos + obytes);
		if (pos + obytes > UINT64_MAX - RF_FMT_SECTION_ALIGN || dstart > raw_size)
			return rf_fail(d, RF_ECORRUPT,
				       CTX_FMT "field %s: data section at raw offset %llu starts past "
				       "raw size %llu",
				       CTX_ARGS(ctx), f->name, (unsigned long long)dstart,
				       (unsigned long long)raw_size);
		uint64_t bad = check_offsets(off, n, item, raw_size - dstart);
		if (bad <= n) {
			uint64_t prev = bad ? off[bad - 1] : 0;
			const char *why = bad == 0 ? "offsets[0] is not 0"
					  : off[bad] < prev ? "offsets decrease"
					  : off[bad] % item ? "offset is not a multiple of the item size"
					  : "data runs past the raw size";
			return rf_fail(d, RF_ECORRUPT,
				       CTX_FMT "field %s: offsets[%llu] = %llu at raw offset %llu: %s",
				       CTX_ARGS(ctx), f->name, (unsigned long long)bad,
				       (unsigned long long)off[bad],
				       (unsigned long long)(pos + 8 * bad), why);
		}
		s->offsets = off;
		s->data = raw + dstart;
		s->data_bytes = off[n];
		pos = dstart + off[n];
	}
	if (pos != raw_size)
		return rf_fail(d, RF_ECORRUPT,
			       CTX_FMT "sections end at raw offset %llu but the raw size is %llu",
			       CTX_ARGS(ctx), (unsigned long long)pos, (unsigned long long)raw_size);
	return 0;
}

int
rf_chunk_decode(const rf_chunk_info *info, const void *stored, void *raw_buf, uint64_t raw_cap,
		ZSTD_DCtx *dctx, int verify, const uint8_t **raw_out, const rf_chunk_ctx *ctx,
		rf_diag *d)
{
	if (verify) {
		uint64_t h = XXH3_64bits(stored, info->stored_bytes);
		if (h != info->xxh3)
			return rf_fail(d, RF_ECHECKSUM,
				       CTX_FMT "checksum mismatch over %llu stored bytes "
				       "(XXH3 %016llx, index says %016llx)",
				       CTX_ARGS(ctx), (unsigned long long)info->stored_bytes,
				       (unsigned long long)h, (unsigned long long)info->xxh3);
	}
	switch (info->codec) {
	case RF_CODEC_NONE:
		if (info->stored_bytes != info->raw_bytes)
			return rf_fail(d, RF_ECORRUPT,
				       CTX_FMT "raw chunk stores %llu bytes but its raw size is %llu",
				       CTX_ARGS(ctx), (unsigned long long)info->stored_bytes,
				       (unsigned long long)info->raw_bytes);
		*raw_out = stored;
		return 0;
	case RF_CODEC_ZSTD:
		break;
	default:
		return rf_fail(d, RF_ECORRUPT, CTX_FMT "unknown codec %d", CTX_ARGS(ctx),
			       (int)info->codec);
	}
	if (!dctx)
		return rf_fail(d, -EINVAL, CTX_FMT "no zstd context given", CTX_ARGS(ctx));
	if (raw_cap < info->raw_bytes)
		return rf_fail(d, -ENOSPC, CTX_FMT "decode buffer of %llu bytes is smaller than the "
			       "raw size %llu", CTX_ARGS(ctx), (unsigned long long)raw_cap,
			       (unsigned long long)info->raw_bytes);
	/* Exactly one frame: trailing bytes (a second frame, garbage) would be
	 * bytes the checksum vouches for but nobody reads. */
	size_t fsz = ZSTD_findFrameCompressedSize(stored, info->stored_bytes);
	if (ZSTD_isError(fsz))
		return rf_fail(d, RF_ECODEC, CTX_FMT "not a zstd frame: %s", CTX_ARGS(ctx),
			       ZSTD_getErrorName(fsz));
	if (fsz != info->stored_bytes)
		return rf_fail(d, RF_ECODEC,
			       CTX_FMT "the zstd frame is %zu bytes but %llu bytes are stored",
			       CTX_ARGS(ctx), fsz, (unsigned long long)info->stored_bytes);
	size_t r = ZSTD_decompressDCtx(dctx, raw_buf, (size_t)info->raw_bytes, stored,
				       (size_t)info->stored_bytes);
	if (ZSTD_isError(r))
		return rf_fail(d, RF_ECODEC, CTX_FMT "zstd: %s (raw size %llu)", CTX_ARGS(ctx),
			       ZSTD_getErrorName(r), (unsigned long long)info->raw_bytes);
	if (r != info->raw_bytes)
		return rf_fail(d, RF_ECODEC, CTX_FMT "decoded to %zu bytes, the index says %llu",
			       CTX_ARGS(ctx), r, (unsigned long long)info->raw_bytes);
	*raw_out = raw_buf;
	return 0;
}

int
rf_chunk_open(const rf_schema *schema, const rf_chunk_info *info, const void *stored,
	      void *raw_buf, uint64_t raw_cap, ZSTD_DCtx *dctx, int verify, rf_chunk_sections *out,
	      const rf_chunk_ctx *ctx, rf_diag *d)
{
	const uint8_t *raw;
	int rc = rf_chunk_decode(info, stored, raw_buf, raw_cap, dctx, verify, &raw, ctx, d);
	if (rc < 0)
		return rc;
	return rf_chunk_layout(schema, info->samples, raw, info->raw_bytes, out, ctx, d);
}
