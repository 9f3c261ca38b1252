/* SPDX-License-Identifier: MIT */
/*
 * Reads and verification of an open dataset (reader_impl.h): the accessors,
 * rf_dataset_read with its one-chunk cache, and the per-sample checksums
 * (rf_dataset_verify_chunk, rf_dataset_read_sums).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "xxh.h"
#include <zstd.h>

#include "format/reader_impl.h"

/* ------------------------------------------------------------- queries */

RF_API const rf_schema *
rf_dataset_schema(const rf_dataset *ds)
{
	return &ds->schema;
}

RF_API uint64_t
rf_dataset_samples(const rf_dataset *ds)
{
	return ds->nsamples;
}

RF_API uint64_t
rf_dataset_chunks(const rf_dataset *ds)
{
	return ds->nchunks;
}

RF_API size_t
rf_dataset_shards(const rf_dataset *ds)
{
	return ds->nshards;
}

RF_API const char *
rf_dataset_shard_path(const rf_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i].path : NULL;
}

RF_API uint64_t
rf_dataset_shard_bytes(const rf_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i].file_size : 0;
}

RF_API int
rf_dataset_chunk_info(const rf_dataset *ds, uint64_t chunk, rf_chunk_info *out)
{
	if (!ds || !out)
		return -EINVAL;
	if (chunk >= ds->nchunks)
		return -ERANGE;
	*out = ds->chunks[chunk];
	return 0;
}

RF_API int
rf_dataset_find_chunk(const rf_dataset *ds, uint64_t index, uint64_t *chunk)
{
	if (!ds || !chunk)
		return -EINVAL;
	if (index >= ds->nsamples)
		return -ERANGE;
	/* The last chunk whose first sample is <= index. */
	uint64_t lo = 0, hi = ds->nchunks;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ds->chunks[mid].first_sample <= index)
			lo = mid;
		else
			hi = mid;
	}
	*chunk = lo;
	return 0;
}

const rf_chunk_info *
rf_dataset_chunk_table(const rf_dataset *ds)
{
	return ds->chunks;
}

int
rf_dataset_chunk_ctx(const rf_dataset *ds, uint64_t chunk, rf_chunk_ctx *ctx)
{
	if (chunk >= ds->nchunks)
		return -ERANGE;
	const rf_chunk_info *ci = &ds->chunks[chunk];
	const struct shard *sh = &ds->shards[ci->shard];
	ctx->path = sh->path;
	ctx->chunk = chunk - sh->first_chunk;
	ctx->offset = ci->offset;
	return 0;
}

int
rf_dataset_shard_info(const rf_dataset *ds, size_t i, rf_shard_info *out)
{
	if (i >= ds->nshards)
		return -ERANGE;
	const struct shard *sh = &ds->shards[i];
	out->path = sh->path;
	out->fd = sh->fd;
	out->file_size = sh->file_size;
	out->header_end = sh->header_end;
	out->index_offset = sh->index_offset;
	out->first_chunk = sh->first_chunk;
	out->nchunks = sh->nchunks;
	out->first_sample = sh->first_sample;
	out->nsamples = sh->nsamples;
	out->version = sh->version;
	out->pack_id = sh->pack_id;
	return 0;
}

uint64_t
rf_dataset_max_raw_bytes(const rf_dataset *ds)
{
	return ds->max_raw;
}

uint64_t
rf_dataset_max_stored_span(const rf_dataset *ds)
{
	return ds->max_span;
}

/* ------------------------------------------------------------- reading */

static int
ensure(rf_dataset *ds, uint8_t **buf, uint64_t *cap, uint64_t need)
{
	if (*cap >= need)
		return 0;
	free(*buf);
	*cap = 0;
	/* 64-byte aligned: sections are 64-aligned from the chunk start. */
	uint64_t sz = RF_ALIGN_UP(need, 64);
	*buf = sz > SIZE_MAX ? NULL : aligned_alloc(64, (size_t)sz);
	if (!*buf)
		return rf_fail(&ds->diag, -ENOMEM, "out of memory for a %llu-byte chunk buffer",
			       (unsigned long long)need);
	*cap = sz;
	return 0;
}

static int
load_chunk(rf_dataset *ds, uint64_t chunk, int verify)
{
	if (ds->cached == chunk && !verify)
		return 0;
	ds->cached = UINT64_MAX;
	const rf_chunk_info *ci = &ds->chunks[chunk];
	rf_chunk_ctx ctx;
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	int rc = ensure(ds, &ds->stored, &ds->stored_cap, ci->stored_bytes);
	if (rc < 0)
		return rc;
	struct shard *sh = &ds->shards[ci->shard];
	if (sh->hfile < 0 && sh->fd < 0 && (sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC)) < 0) {
		int e = -errno;
		return rf_fail(&ds->diag, e, "%s: cannot open: %s", sh->path, rf_strerror(e));
	}
	rc = rf_rd_shard_read(sh, ds->stored, ci->stored_bytes, ci->offset, "a chunk", &ds->diag);
	if (rc < 0) {
		/* The index was checked against the file size at open: a short
		 * read now means the file shrank underneath us. */
		return rc == RF_ETRUNCATED ? rf_fail(&ds->diag, -EIO, "%s: chunk %llu at offset "
						     "%llu: file shrank since it was opened",
						     ctx.path, (unsigned long long)ctx.chunk,
						     (unsigned long long)ctx.offset)
					   : rc;
	}
	if (ci->codec == RF_CODEC_ZSTD) {
		if ((rc = ensure(ds, &ds->raw, &ds->raw_cap, ci->raw_bytes)) < 0)
			return rc;
		if (!ds->dctx && !(ds->dctx = ZSTD_createDCtx()))
			return rf_fail(&ds->diag, -ENOMEM, "out of memory for a zstd context");
	}
	rc = rf_chunk_open(&ds->schema, ci, ds->stored, ds->raw, ds->raw_cap, ds->dctx, verify,
			   &ds->sec, &ctx, &ds->diag);
	if (rc < 0)
		return rc;
	ds->cached = chunk;
	return 0;
}

RF_API int
rf_dataset_read(rf_dataset *ds, uint64_t index, uint32_t field, void *buf, size_t cap,
		size_t *len)
{
	if (!ds || !len)
		return -EINVAL;
	if (index >= ds->nsamples || field >= ds->schema.nfields)
		return rf_fail(&ds->diag, -ERANGE, "sample %llu field %u: out of range (%llu "
			       "samples, %u fields)", (unsigned long long)index, field,
			       (unsigned long long)ds->nsamples, ds->schema.nfields);
	uint64_t chunk;
	rf_dataset_find_chunk(ds, index, &chunk);
	int rc = load_chunk(ds, chunk, ds->verify && ds->cached != chunk);
	if (rc < 0)
		return rc;
	uint64_t i = index - ds->chunks[chunk].first_sample;
	const rf_chunk_section *s = &ds->sec.field[field];
	const uint8_t *src;
	uint64_t n;
	if (s->offsets) {
		src = s->data + s->offsets[i];
		n = s->offsets[i + 1] - s->offsets[i];
	} else {
		src = s->data + i * s->item_bytes;
		n = s->item_bytes;
	}
	if (len)
		*len = (size_t)n;
	if (n > cap)
		return rf_fail(&ds->diag, -ENOSPC, "sample %llu field %s: %llu bytes, buffer holds "
			       "%zu", (unsigned long long)index, ds->schema.fields[field].name,
			       (unsigned long long)n, cap);
	if (n)
		memcpy(buf, src, (size_t)n);
	return 0;
}

/* Format 2: check a loaded chunk's per-sample checksum table, against the
 * index entry's checksum of the table and against every value of the chunk.
 * The table is read in pieces, so a chunk of many small samples needs no
 * buffer of its size. */
static int
verify_sums(rf_dataset *ds, uint64_t chunk)
{
	const rf_chunk_info *ci = &ds->chunks[chunk];
	struct shard *sh = &ds->shards[ci->shard];
	rf_chunk_ctx ctx = {0};
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	uint32_t nf = ds->schema.nfields;
	/* The table's own checksum is in the index entry, which the dataset
	 * does not keep in memory (8 bytes a chunk is all it would cost, but
	 * only this check needs it). */
	uint8_t e[RF_FMT_INDEX_ENTRY_SIZE];
	int rc = rf_rd_shard_read(sh, e, sizeof e, sh->index_offset + ctx.chunk * sizeof e,
				  "an index entry", &ds->diag);
	if (rc < 0)
		return rc;
	uint64_t at = rf_fmt_sums_offset(ci->offset, ci->stored_bytes);
	uint64_t total = rf_fmt_sums_bytes(ci->samples, nf);
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		return rf_fail(&ds->diag, -ENOMEM, "out of memory for a checksum state");
	XXH3_64bits_reset(st);
	uint64_t buf[4096];
	uint64_t bad_i = UINT64_MAX, got = 0, want = 0;
	uint32_t bad_k = 0;
	for (uint64_t done = 0; done < total && rc == 0;) {
		uint64_t len = total - done < sizeof buf ? total - done : sizeof buf;
		if ((rc = rf_rd_shard_read(sh, buf, len, at + done, "a per-sample checksum table",
					   &ds->diag)) < 0)
			break;
		XXH3_64bits_update(st, buf, (size_t)len);
		for (uint64_t x = 0; x < len / 8 && bad_i == UINT64_MAX; x++) {
			uint64_t entry = done / 8 + x, i = entry / nf;
			uint32_t k = (uint32_t)(entry % nf);
			const rf_chunk_section *sec = &ds->sec.field[k];
			uint64_t h = sec->offsets
				? XXH3_64bits(sec->data + sec->offsets[i],
					      (size_t)(sec->offsets[i + 1] - sec->offsets[i]))
				: XXH3_64bits(sec->data + i * sec->item_bytes, (size_t)sec->item_bytes);
			if (h != rf_le64((const uint8_t *)&buf[x])) {
				bad_i = i;
				bad_k = k;
				got = h;
				want = rf_le64((const uint8_t *)&buf[x]);
			}
		}
		done += len;
	}
	uint64_t tx = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	if (rc < 0)
		return rc == RF_ETRUNCATED ? rf_fail(&ds->diag, -EIO, "%s: chunk %llu at offset %llu: "
						     "file shrank since it was opened", ctx.path,
						     (unsigned long long)ctx.chunk,
						     (unsigned long long)ctx.offset)
					   : rc;
	if (tx != rf_le64(e + 48))
		return rf_fail(&ds->diag, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: the per-sample "
			       "checksum table (%llu bytes at offset %llu) does not match its XXH3-64 "
			       "in the index", ctx.path, (unsigned long long)ctx.chunk,
			       (unsigned long long)ctx.offset, (unsigned long long)total,
			       (unsigned long long)at);
	if (bad_i != UINT64_MAX)
		return rf_fail(&ds->diag, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: sample %llu "
			       "of the chunk (sample %llu of the shard), field %s: checksum mismatch "
			       "(value %016llx, recorded %016llx)", ctx.path,
			       (unsigned long long)ctx.chunk, (unsigned long long)ctx.offset,
			       (unsigned long long)bad_i,
			       (unsigned long long)(ci->first_sample - sh->first_sample + bad_i),
			       ds->schema.fields[bad_k].name, (unsigned long long)got,
			       (unsigned long long)want);
	return 0;
}

/* Format 2: read chunk `chunk`'s per-sample checksum table whole into out
 * (rf_fmt_sums_bytes bytes) through fd, a descriptor of its shard the
 * caller opened, and check it against the index entry's checksum of the
 * table.  Touches nothing of ds but what open set, so a thread of its own
 * may call it; messages go to d.  RF_ECHECKSUM when the table does not
 * match. */
int
rf_dataset_read_sums(const rf_dataset *ds, int fd, uint64_t chunk, void *out, rf_diag *d)
{
	const rf_chunk_info *ci = &ds->chunks[chunk];
	const struct shard *sh = &ds->shards[ci->shard];
	rf_chunk_ctx ctx = {0};
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	uint8_t e[RF_FMT_INDEX_ENTRY_SIZE];
	int rc = rf_rd_pread_full(fd, e, sizeof e, sh->index_offset + ctx.chunk * sizeof e,
				  ctx.path, "an index entry", d);
	uint64_t at = rf_fmt_sums_offset(ci->offset, ci->stored_bytes);
	uint64_t total = rf_fmt_sums_bytes(ci->samples, ds->schema.nfields);
	if (rc == 0)
		rc = rf_rd_pread_full(fd, out, total, at, ctx.path, "a per-sample checksum table", d);
	if (rc < 0)
		return rc;
	if (XXH3_64bits(out, (size_t)total) != rf_le64(e + 48))
		return rf_fail(d, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: the per-sample "
			       "checksum table (%llu bytes at offset %llu) does not match its XXH3-64 "
			       "in the index", ctx.path, (unsigned long long)ctx.chunk,
			       (unsigned long long)ctx.offset, (unsigned long long)total,
			       (unsigned long long)at);
	return 0;
}

RF_API int
rf_dataset_verify_chunk(rf_dataset *ds, uint64_t chunk)
{
	if (!ds)
		return -EINVAL;
	if (chunk >= ds->nchunks)
		return rf_fail(&ds->diag, -ERANGE, "chunk %llu: out of range (%llu chunks)",
			       (unsigned long long)chunk, (unsigned long long)ds->nchunks);
	int rc = load_chunk(ds, chunk, 1);
	if (rc == 0 && ds->shards[ds->chunks[chunk].shard].version >= 2)
		rc = verify_sums(ds, chunk);
	return rc;
}
