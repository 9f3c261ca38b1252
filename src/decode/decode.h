/* SPDX-License-Identifier: MIT */
/*
 * The decode stage of the loader: turning a chunk's stored bytes into its
 * validated sections (checksum, zstd; see format.h), and assembling samples
 * from such sections into the batch layout that is copied to the device.
 *
 * Batch layout.  All selected fields of one batch live in one buffer (a
 * pinned staging slot on the host, a device buffer on the device, with the
 * same layout), each part starting at a multiple of RF_BATCH_ALIGN:
 *  - a fixed field: B x value bytes, the [B, *shape] array;
 *  - a variable field: an int64 offsets array of B + 1 entries, then, in its
 *    own part, a data region of a fixed capacity (the values back to back).
 * One contiguous buffer means one copy per batch; the alignment is what
 * device kernels and vectorised loads expect.
 *
 * Token parts (rf_batch_layout_init_tokens): a fixed field of T + 1 tokens
 * per sample is laid out as two int32 [B, T] parts, the inputs (tokens
 * [0, T)) and the targets (tokens [1, T + 1)), widened from u16 or u32 in
 * the gather, so the one copy carries what a GPT-style step reads.
 *
 * Threads: a layout is immutable once built; an assembly is used by one
 * thread at a time (the loader hands the assembly over in plan order).
 */
#ifndef RF_DECODE_H
#define RF_DECODE_H

#include <stdint.h>
#include <zstd.h>

#include "common.h"
#include "format/format.h"

#define RF_BATCH_ALIGN 256

enum rf_part_kind {
	RF_PART_COPY = 0,      /* the field's values as stored */
	RF_PART_INPUTS,        /* int32 tokens [0, T) of each sample */
	RF_PART_TARGETS,       /* int32 tokens [1, T + 1) of each sample */
	RF_PART_IMAGE,         /* a bytes field of encoded images, delivered
	                          decoded: fixed uint8 values of value_bytes
	                          (the loader's image step puts them in a
	                          fixed section in the field's place) */
};

typedef struct rf_batch_part {
	uint32_t field;        /* index in the dataset's schema */
	int var;               /* 1 for a variable-size field */
	enum rf_part_kind kind;
	uint64_t src_bytes;    /* token parts: bytes of one stored value (T + 1 tokens) */
	enum rf_dtype src_dtype; /* token parts: the stored token type */
	uint64_t value_bytes;  /* fixed: bytes of one value; variable: of one item */
	uint64_t off;          /* fixed: the values; variable: the int64 offsets */
	uint64_t data_off;     /* variable: the data region */
	uint64_t cap;          /* fixed: B x value_bytes; variable: data capacity */
} rf_batch_part;

typedef struct rf_batch_layout {
	uint32_t batch;        /* B */
	uint32_t nparts;
	rf_batch_part part[RF_MAX_FIELDS];
	uint64_t bytes;        /* the whole buffer, a multiple of RF_BATCH_ALIGN */
} rf_batch_layout;

/* Value bytes of a fixed field, or item bytes of a variable one (the
 * product of the dtype size and the fixed dimensions), or 0 on overflow or
 * for an unknown dtype. */
uint64_t rf_decode_item_bytes(const rf_field *f);

/*
 * Lay out a batch of `batch` samples of the fields sel[0..nsel) of `schema`
 * (in that order).  var_cap is the data capacity of each variable field
 * (rounded up to RF_BATCH_ALIGN here).  Returns 0, or RF_EMEMPLAN (message in
 * d) when a size overflows 64 bits, or -EINVAL for an empty selection or
 * batch 0.
 */
int rf_batch_layout_init(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel,
			 uint32_t nsel, uint32_t batch, uint64_t var_cap, rf_diag *d);

/* A field the token layout takes as 'tokens': fixed, one dimension of
 * T + 1 >= 2 tokens of a type that widens to int32 (u16, u32, i32). */
int rf_token_field_ok(const rf_field *f);

/*
 * The same with the selected field sel[tok] split into two token parts, in
 * its place: RF_PART_INPUTS then RF_PART_TARGETS, each int32 [B, T].  The
 * field must be fixed, of one dimension T + 1 >= 2, u16, u32 or i32
 * (checked by the caller, who names the field; -EINVAL here).
 */
int rf_batch_layout_init_tokens(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel,
				uint32_t nsel, uint32_t tok, uint32_t batch, uint64_t var_cap,
				rf_diag *d);

/*
 * Make part `part` of a built layout an image part (RF_PART_IMAGE): fixed,
 * value_bytes per sample (height x width x channels), and lay the parts
 * out again.  The part must be a variable field's copy part (-EINVAL
 * otherwise); RF_EMEMPLAN (message in d) when a size overflows 64 bits.
 */
int rf_batch_layout_set_image(rf_batch_layout *l, uint32_t part, uint64_t value_bytes,
			      rf_diag *d);

/* A copy noted for later: len bytes from src to dst, into the batch
 * buffer tagged `tag` (the caller's name for it). */
typedef struct rf_copy_op {
	uint8_t *dst;
	const uint8_t *src;
	uint64_t len;
	int tag;
} rf_copy_op;

/* Where an assembly notes its bulk copies instead of making them (see
 * rf_assembly.sink): the caller runs them later, in another thread if it
 * likes, while the sources stay valid.  Grows as needed; a copy that finds
 * no room is made at once. */
typedef struct rf_copy_sink {
	rf_copy_op *ops;
	size_t n, cap;
	int tag;               /* given to the ops noted from now on */
	uint64_t bytes;        /* of the ops noted */
} rf_copy_sink;

/* Make (and forget) the noted copies; returns their bytes. */
uint64_t rf_copy_sink_run(rf_copy_sink *s);
void rf_copy_sink_free(rf_copy_sink *s);

/* One batch being filled. */
typedef struct rf_assembly {
	const rf_batch_layout *layout;
	uint8_t *base;         /* the buffer (layout->bytes) */
	uint32_t n;            /* samples so far */
	uint64_t used[RF_MAX_FIELDS]; /* variable parts: data bytes so far */
	/* NULL: values and data are copied in rf_assembly_add.  Else their
	 * copies are noted here (offsets and widened tokens are still written
	 * at once), and the batch's bytes are in place once they ran. */
	rf_copy_sink *sink;
} rf_assembly;

/* Start an empty batch in `base` (layout->bytes, 8-byte aligned), with
 * no sink. */
void rf_assembly_begin(rf_assembly *a, const rf_batch_layout *l, void *base);

/*
 * Append samples [lo, hi) of a chunk whose sections were validated by
 * rf_chunk_layout (so every offset is in bounds).  Appends as many as fit:
 * up to B samples in all, and no more than the data capacity of any
 * variable field.  *added is the number appended.  When a variable field's
 * room stops the batch before sample lo, *part is that part's number and
 * *need the capacity that would have held sample lo too (what the batch
 * holds of it plus lo's bytes).  Returns 0; or -E2BIG when the batch is empty
 * and sample lo alone overflows a variable field's capacity (*added = 0,
 * *need and *part as above); or -EINVAL for a bad range.
 */
int rf_assembly_add(rf_assembly *a, const rf_chunk_sections *sec, uint32_t lo, uint32_t hi,
		    uint32_t *added, uint64_t *need, uint32_t *part);

static inline int
rf_assembly_full(const rf_assembly *a)
{
	return a->n >= a->layout->batch;
}

/* Bytes from the start of the buffer to the end of the last byte in use:
 * what one copy must move. */
uint64_t rf_assembly_bytes(const rf_assembly *a);

/* Bytes of the parts' contents (values, offsets and data in use), the
 * batch's payload. */
uint64_t rf_assembly_payload(const rf_assembly *a);

/* A decode worker's private state: one zstd context and one buffer for the
 * raw form of a compressed chunk. */
typedef struct rf_decoder {
	ZSTD_DCtx *dctx;
	uint8_t *raw;
	uint64_t raw_cap;
} rf_decoder;

/* raw_cap: the largest raw chunk (rf_dataset_max_raw_bytes); no buffer is
 * allocated when need_raw is 0 (every chunk stored uncompressed). */
int rf_decoder_init(rf_decoder *dec, uint64_t raw_cap, int need_raw);
void rf_decoder_fini(rf_decoder *dec);

/* Verify (when asked), decompress (zstd) and validate one chunk.  For codec
 * none the sections point into `stored` (no copy); for zstd into dec->raw.
 * Errors as rf_chunk_open(). */
int rf_decoder_chunk(rf_decoder *dec, const rf_schema *schema, const rf_chunk_info *info,
		     const void *stored, int verify, rf_chunk_sections *out,
		     const rf_chunk_ctx *ctx, rf_diag *d);

#endif
