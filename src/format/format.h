/* SPDX-License-Identifier: MIT */
/*
 * The .rfs shard format inside the library: constants of docs/format.md,
 * chunk decoding and validation, and access to an open dataset's parsed
 * index for the streaming loader (which reads chunks itself with io_uring).
 *
 * Threads: every function here that takes an rf_diag writes only to it and
 * to its own arguments; none keeps shared state.  The rf_dataset accessors
 * only read what rf_dataset_open built and never change afterwards, so any
 * number of threads may call them at once, as long as nobody calls
 * rf_dataset_read/verify_chunk/close on the same handle concurrently (those
 * use the handle's one-chunk cache and message buffer).
 */
#ifndef RF_FORMAT_H
#define RF_FORMAT_H

#include <stdint.h>
#include <zstd.h>

#include "common.h"
#include "ringfeed/dataset.h"

/* The format is little-endian and raw chunk sections are handed out as
 * in-place arrays (u64 offsets, fixed values), which is only correct on a
 * little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ringfeed needs a little-endian host");

/* ------------------------------------------------------------ constants */

#define RF_FMT_MAGIC "\x89RFS\r\n\x1a\n" /* 8 bytes, no NUL counted */
#define RF_FMT_MAGIC_LEN 8
#define RF_FMT_VERSION 3          /* the version a writer writes by default */
#define RF_FMT_VERSION_MIN 1      /* the oldest version a reader reads */
#define RF_FMT_ALIGN 4096          /* chunk, index and header-end alignment */
#define RF_FMT_SECTION_ALIGN 64    /* raw chunk section alignment */

#define RF_FMT_HEADER_FIXED 32     /* magic .. reserved, before the field records */
#define RF_FMT_PACK_ID_AT 24       /* version 3: the header's u64 pack id (reserved
                                      and 0 in versions 1 and 2) */
#define RF_FMT_FIELD_SIZE 128      /* one field record */
/* header_size: bytes [0, end of header_xxh3) for nfields fields */
#define RF_FMT_HEADER_SIZE(nfields) (RF_FMT_HEADER_FIXED + RF_FMT_FIELD_SIZE * (uint64_t)(nfields) + 8)
#define RF_FMT_INDEX_ENTRY_SIZE 64
#define RF_FMT_FOOTER_SIZE 64

#define RF_FMT_VAR_NONE 255        /* var_dim byte of a fixed field */

#define RF_FMT_MAX_ITEM (UINT64_C(1) << 40)
#define RF_FMT_MAX_RAW (UINT64_C(1) << 32)
#define RF_FMT_MAX_CHUNKS (UINT64_C(1) << 32)

/* Version 2: the per-sample checksum table of a chunk of n samples of a
 * schema of nfields fields (docs/format.md "Per-sample checksums") starts at
 * the first multiple of 64 past the chunk's stored bytes and holds n x
 * nfields u64, entry i x nfields + k the XXH3-64 of sample i's value of field
 * k.  Its place follows from the index entry alone, so a reader of one sample
 * finds the sample's row without reading anything else. */
static inline uint64_t
rf_fmt_sums_offset(uint64_t chunk_offset, uint64_t stored_bytes)
{
	return chunk_offset + ((stored_bytes + 63) & ~(uint64_t)63);
}

/* Bytes of that table: at most 2^32 x 64 x 8, no overflow. */
static inline uint64_t
rf_fmt_sums_bytes(uint32_t samples, uint32_t nfields)
{
	return (uint64_t)samples * nfields * 8;
}

/* Smallest valid shard: a header page and a footer. */
#define RF_FMT_MIN_FILE (RF_FMT_ALIGN + RF_FMT_FOOTER_SIZE)

/* ------------------------------------------------------- chunk sections */

/* One field's part of a decoded raw chunk of n samples.  Pointers point into
 * the raw buffer given to rf_chunk_layout and live as long as it does. */
typedef struct rf_chunk_section {
	/* Fixed field: n x item_bytes values, back to back.
	 * Variable field: the data bytes; value i is
	 * data[offsets[i] .. offsets[i+1]). */
	const uint8_t *data;
	/* Variable field: n + 1 u64 offsets, offsets[0] == 0, non-decreasing,
	 * each a multiple of item_bytes, offsets[n] == data_bytes.
	 * NULL for a fixed field. */
	const uint64_t *offsets;
	uint64_t data_bytes;   /* bytes at data (fixed: n x item_bytes) */
	uint64_t item_bytes;   /* rf_field_item_bytes() of the field */
} rf_chunk_section;

typedef struct rf_chunk_sections {
	uint32_t samples;      /* n */
	uint32_t nfields;
	rf_chunk_section field[RF_MAX_FIELDS];
} rf_chunk_sections;

/* Where a chunk lives, for error messages: "PATH: chunk K at offset O: ...".
 * `chunk` is the chunk's index entry number within its shard. */
typedef struct rf_chunk_ctx {
	const char *path;
	uint64_t chunk;
	uint64_t offset;
} rf_chunk_ctx;

/* Byte offset of the section that follows `pos` bytes of raw chunk (rounds
 * up to RF_FMT_SECTION_ALIGN; cannot overflow for pos < 2^63). */
static inline uint64_t
rf_chunk_section_align(uint64_t pos)
{
	return RF_ALIGN_UP(pos, RF_FMT_SECTION_ALIGN);
}

/*
 * Validate a decoded raw chunk of `n` samples of `schema` completely and
 * describe its sections in *out.
 *
 * Checks, before returning any pointer: n >= 1; every section's start and
 * size computed without overflow and inside raw_size; every variable field's
 * offsets array (offsets[0] == 0, non-decreasing, each a multiple of the item
 * size, offsets[n] inside raw_size); and that the last section ends exactly at
 * raw_size.  Padding bytes between sections are not inspected.
 *
 * Cost: O(nfields) for fixed fields (no per-sample work); O(n) per variable
 * field (one pass over its offsets).
 *
 * `raw` must be 8-byte aligned (the offsets arrays are read in place; every
 * section starts at a multiple of 64 from raw).  `schema` must be valid
 * (rf_schema_validate), as every schema of an open dataset is.
 *
 * Thread-safe: touches only its arguments.  `d` receives the message.
 * Returns 0, RF_ECORRUPT (message: "PATH: chunk K at offset O: field NAME:
 * ..."), or -EINVAL for a misaligned raw pointer.
 */
int rf_chunk_layout(const rf_schema *schema, uint32_t n, const uint8_t *raw, uint64_t raw_size,
		    rf_chunk_sections *out, const rf_chunk_ctx *ctx, rf_diag *d);

/*
 * Turn a chunk's stored bytes into its raw form.
 *
 * `stored` holds info->stored_bytes bytes (the padding after them need not
 * be present).  When `verify` is set, their XXH3-64 is compared with
 * info->xxh3 first (RF_ECHECKSUM on mismatch).  Then:
 *  - codec none: no copy; *raw_out = stored (stored_bytes == raw_bytes was
 *    checked at open);
 *  - codec zstd: the frame is decompressed into `raw_buf` (capacity raw_cap
 *    >= info->raw_bytes, else -ENOSPC) with `dctx`, and *raw_out = raw_buf.
 *    The frame must decode to exactly info->raw_bytes bytes (RF_ECODEC
 *    otherwise, or when zstd reports an error).  dctx belongs to the calling
 *    thread (one per thread); it may be NULL only for codec none.
 *
 * This does not check the section layout: follow with rf_chunk_layout() (or
 * use rf_chunk_open() for both).
 *
 * Thread-safe: touches only its arguments.  Messages name ctx->path, the
 * chunk and its file offset.  Returns 0, RF_ECHECKSUM, RF_ECODEC, RF_ECORRUPT
 * (unknown codec), -ENOSPC or -EINVAL (dctx NULL for zstd).
 */
int rf_chunk_decode(const rf_chunk_info *info, const void *stored, void *raw_buf, uint64_t raw_cap,
		    ZSTD_DCtx *dctx, int verify, const uint8_t **raw_out, const rf_chunk_ctx *ctx,
		    rf_diag *d);

/* rf_chunk_decode() then rf_chunk_layout() with info->samples and
 * info->raw_bytes.  For codec none, `stored` must be 8-byte aligned. */
int rf_chunk_open(const rf_schema *schema, const rf_chunk_info *info, const void *stored,
		  void *raw_buf, uint64_t raw_cap, ZSTD_DCtx *dctx, int verify,
		  rf_chunk_sections *out, const rf_chunk_ctx *ctx, rf_diag *d);

/* Bytes of the raw form of a chunk of n samples whose variable fields hold
 * var_bytes[i] data bytes (indexed by field; ignored for fixed fields; may be
 * NULL when there is none).  Returns 0 and *out, or -EOVERFLOW.  The writer
 * and tests use it to plan buffers. */
int rf_chunk_raw_size(const rf_schema *schema, uint64_t n, const uint64_t *var_bytes,
		      uint64_t *out);

/* ----------------------------------------------- an open dataset's index */

/* The dataset's chunk table: rf_dataset_chunks(ds) entries, dataset-wide
 * order (shard by shard, file order within a shard); the same values as
 * rf_dataset_chunk_info().  Valid until rf_dataset_close.  Its first_sample
 * fields are dataset-wide and increasing, so it can be binary-searched. */
const rf_chunk_info *rf_dataset_chunk_table(const rf_dataset *ds);

/* Fill *ctx for dataset chunk `chunk` (path, chunk number in its shard,
 * file offset).  Returns 0 or -ERANGE.  ctx->path lives as long as ds. */
int rf_dataset_chunk_ctx(const rf_dataset *ds, uint64_t chunk, rf_chunk_ctx *ctx);

/* Per-shard facts, for i < rf_dataset_shards(ds). */
typedef struct rf_shard_info {
	const char *path;      /* as opened; owned by the dataset */
	int fd;                /* O_RDONLY|O_CLOEXEC buffered fd, owned by the
	                          dataset: use pread only (no seek), never close.
	                          Open the path again for O_DIRECT.  -1 after
	                          rf_dataset_close_files. */
	uint64_t file_size;
	uint64_t header_end;   /* header size rounded up to 4096: first chunk offset */
	uint64_t index_offset;
	uint64_t first_chunk;  /* dataset-wide number of its chunk 0 */
	uint64_t nchunks;
	uint64_t first_sample; /* dataset-wide index of its sample 0 */
	uint64_t nsamples;
	uint32_t version;      /* format version: 2 and up hold per-sample
	                          checksums (rf_fmt_sums_offset) */
	uint64_t pack_id;      /* version 3: the pack the shard belongs to; 0 for
	                          versions 1 and 2 */
} rf_shard_info;

/* Close every shard's descriptor, for an owner that reads the shards
 * through descriptors of its own (the loader): a dataset of N shards then
 * holds none instead of N.  A later rf_dataset_read or verify opens the
 * shard it needs again.  Not thread-safe against readers of the dataset. */
void rf_dataset_close_files(rf_dataset *ds);

/* Returns 0 or -ERANGE. */
int rf_dataset_shard_info(const rf_dataset *ds, size_t i, rf_shard_info *out);
/* A chunk's per-sample checksum table, read whole through the caller's
 * descriptor of its shard and checked against the index (reader_read.c). */
int rf_dataset_read_sums(const rf_dataset *ds, int fd, uint64_t chunk, void *out, rf_diag *d);

/* Largest raw_bytes and largest round_up(stored_bytes, 4096) over all chunks
 * (0 for an empty dataset): buffer sizes that fit any chunk. */
uint64_t rf_dataset_max_raw_bytes(const rf_dataset *ds);
uint64_t rf_dataset_max_stored_span(const rf_dataset *ds);

/* ------------------------------------------------------ schema encoding */

/* Encode a (valid) schema as a header of RF_FMT_HEADER_SIZE(nfields) bytes
 * of format `version` (RF_FMT_VERSION_MIN..RF_FMT_VERSION) into buf (the
 * writer).  Returns the header's XXH3-64. */
uint64_t rf_fmt_encode_header(const rf_schema *schema, uint32_t version, uint8_t *buf);

/* Decode and check one 128-byte field record (k is its number, for the
 * message).  Returns 0 or RF_ECORRUPT with the message in d. */
int rf_fmt_decode_field(const uint8_t *rec, uint32_t k, rf_field *out, const char *path,
			rf_diag *d);

#endif
