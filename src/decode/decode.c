/* SPDX-License-Identifier: MIT */
/* A decode worker's chunk decoding: checksum, zstd, section validation. */
#include <errno.h>
#include <stdlib.h>

#include "decode/decode.h"

int
rf_decoder_init(rf_decoder *dec, uint64_t raw_cap, int need_raw)
{
	dec->dctx = NULL;
	dec->raw = NULL;
	dec->raw_cap = 0;
	if (!need_raw)
		return 0;
	dec->dctx = ZSTD_createDCtx();
	if (!dec->dctx)
		return -ENOMEM;
	/* 64-byte alignment: sections are 64-aligned from the start of the raw
	 * form and the offsets arrays are read in place. */
	size_t cap = RF_ALIGN_UP(raw_cap ? raw_cap : 1, 64);
	dec->raw = aligned_alloc(64, cap);
	if (!dec->raw) {
		rf_decoder_fini(dec);
		return -ENOMEM;
	}
	dec->raw_cap = raw_cap;
	return 0;
}

void
rf_decoder_fini(rf_decoder *dec)
{
	ZSTD_freeDCtx(dec->dctx);
	free(dec->raw);
	dec->dctx = NULL;
	dec->raw = NULL;
	dec->raw_cap = 0;
}

int
rf_decoder_chunk(rf_decoder *dec, const rf_schema *schema, const rf_chunk_info *info,
		 const void *stored, int verify, rf_chunk_sections *out, const rf_chunk_ctx *ctx,
		 rf_diag *d)
{
	return rf_chunk_open(schema, info, stored, dec->raw, dec->raw_cap, dec->dctx, verify, out,
			     ctx, d);
}
