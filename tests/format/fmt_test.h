/* SPDX-License-Identifier: MIT */
/* Shared helpers of the format tests: temporary directories, deterministic
 * sample contents, writing a dataset, and checks that report where they
 * failed. */
#ifndef RF_FMT_TEST_H
#define RF_FMT_TEST_H

#define _FILE_OFFSET_BITS 64
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xxh.h"

#include "format/format.h"
#include "rf_test.h"

/* Under the prefix the format tests have always used; removed by t_rmtree. */
static inline char *
t_tmpdir(void)
{
	return rf_test_tmpdir("rffmt");
}

static inline void
t_rmtree(const char *dir)
{
	rf_test_rmtree(dir);
}

static inline char *
t_path(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		exit(1);
	return p;
}

/* Number of entries in a directory (".", ".." excluded). */
static inline int
t_count_entries(const char *dir)
{
	char *cmd;
	int n = 0;
	if (asprintf(&cmd, "ls -A '%s' | wc -l", dir) < 0)
		exit(1);
	FILE *f = popen(cmd, "r");
	if (!f || fscanf(f, "%d", &n) != 1)
		n = -1;
	if (f)
		pclose(f);
	free(cmd);
	return n;
}

static inline uint64_t
t_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Deterministic bytes of value (sample, field). */
static inline void
t_fill(uint8_t *p, uint64_t len, uint64_t sample, uint32_t field)
{
	uint64_t seed = t_mix(sample * 131 + field + 1);
	for (uint64_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			seed = t_mix(seed + i);
		/* 4 bits of entropy a byte: zstd shrinks it, so zstd
		 * chunks really are zstd (incompressible ones are stored raw). */
		p[i] = (uint8_t)((seed >> (8 * (i % 8))) & 0x0F) + (uint8_t)(field * 16);
	}
}

/* Length of value (sample, field): the item size for a fixed field, 0..4
 * items (zero-length values included) for a variable one. */
static inline uint64_t
t_len(const rf_schema *s, uint64_t sample, uint32_t field)
{
	const rf_field *f = &s->fields[field];
	uint64_t item = rf_field_item_bytes(f);
	if (f->var_dim < 0)
		return item;
	return item * (t_mix(sample * 7 + field) % 5);
}

/* Write n samples with rf_writer_add (or, when block > 0, rf_writer_add_columns
 * in blocks of `block` samples). */
static inline int
t_write(const char *path, const rf_schema *s, uint64_t n, const rf_writer_config *cfg,
	uint64_t block)
{
	rf_writer *w;
	int rc = rf_writer_open(&w, path, s, cfg);
	if (rc < 0) {
		fprintf(stderr, "rf_writer_open %s: %s\n", path, rf_strerror(rc));
		return rc;
	}
	if (block == 0) {
		for (uint64_t i = 0; i < n && rc == 0; i++) {
			rf_value v[RF_MAX_FIELDS];
			uint8_t *bufs[RF_MAX_FIELDS];
			for (uint32_t k = 0; k < s->nfields; k++) {
				uint64_t len = t_len(s, i, k);
				bufs[k] = malloc(len ? len : 1);
				t_fill(bufs[k], len, i, k);
				v[k].data = bufs[k];
				v[k].len = len;
			}
			rc = rf_writer_add(w, v);
			for (uint32_t k = 0; k < s->nfields; k++)
				free(bufs[k]);
		}
	} else {
		for (uint64_t i = 0; i < n && rc == 0; i += block) {
			uint64_t m = n - i < block ? n - i : block;
			rf_column c[RF_MAX_FIELDS];
			uint8_t *bufs[RF_MAX_FIELDS];
			int64_t *offs[RF_MAX_FIELDS];
			for (uint32_t k = 0; k < s->nfields; k++) {
				/* A non-zero first offset, as the API allows. */
				offs[k] = malloc((m + 1) * sizeof(int64_t));
				offs[k][0] = 24;
				for (uint64_t j = 0; j < m; j++)
					offs[k][j + 1] = offs[k][j] + (int64_t)t_len(s, i + j, k);
				bufs[k] = malloc((size_t)offs[k][m] + 1);
				for (uint64_t j = 0; j < m; j++)
					t_fill(bufs[k] + offs[k][j], t_len(s, i + j, k), i + j, k);
				c[k].data = s->fields[k].var_dim < 0 ? bufs[k] + 24 : bufs[k];
				c[k].offsets = s->fields[k].var_dim < 0 ? NULL : offs[k];
			}
			rc = rf_writer_add_columns(w, m, c);
			for (uint32_t k = 0; k < s->nfields; k++) {
				free(bufs[k]);
				free(offs[k]);
			}
		}
	}
	if (rc < 0) {
		fprintf(stderr, "writing %s: %s: %s\n", path, rf_strerror(rc), rf_writer_errmsg(w));
		rf_writer_abort(&w);
		return rc;
	}
	CHECK(rf_writer_samples(w) == n);
	rc = rf_writer_close(&w);
	CHECK(w == NULL);
	return rc;
}

/* Read every value of every sample back and compare; also decode every
 * chunk through the internal chunk API the loader uses. */
static inline void
t_check_dataset(rf_dataset *ds, const rf_schema *s, uint64_t n)
{
	CHECK(rf_dataset_samples(ds) == n);
	const rf_schema *rs = rf_dataset_schema(ds);
	CHECK(rs->nfields == s->nfields);
	for (uint32_t k = 0; k < s->nfields; k++) {
		CHECK(strcmp(rs->fields[k].name, s->fields[k].name) == 0);
		CHECK(rs->fields[k].dtype == s->fields[k].dtype);
		CHECK(rs->fields[k].rank == s->fields[k].rank);
		CHECK(rs->fields[k].var_dim == s->fields[k].var_dim);
		CHECK(memcmp(rs->fields[k].shape, s->fields[k].shape, sizeof s->fields[k].shape) == 0);
	}
	uint8_t *buf = malloc(1 << 20), *want = malloc(1 << 20);
	for (uint64_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < s->nfields; k++) {
			size_t len = 0;
			CHECK_RC(rf_dataset_read(ds, i, k, buf, 1 << 20, &len), 0);
			CHECK(len == t_len(s, i, k));
			t_fill(want, len, i, k);
			CHECK(memcmp(buf, want, len) == 0);
		}
	}
	size_t len;
	CHECK_RC(rf_dataset_read(ds, n, 0, buf, 1 << 20, &len), -ERANGE);
	CHECK_RC(rf_dataset_read(ds, 0, s->nfields, buf, 1 << 20, &len), -ERANGE);

	/* The chunk table, chunk by chunk, as the loader sees it. */
	const rf_chunk_info *tab = rf_dataset_chunk_table(ds);
	uint64_t nch = rf_dataset_chunks(ds), next = 0;
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	uint64_t *sums = NULL;
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	for (uint64_t c = 0; c < nch; c++) {
		rf_chunk_info ci;
		CHECK_RC(rf_dataset_chunk_info(ds, c, &ci), 0);
		CHECK(memcmp(&ci, &tab[c], sizeof ci) == 0);
		CHECK(ci.first_sample == next);
		CHECK(ci.offset % RF_FMT_ALIGN == 0);
		next += ci.samples;
		uint64_t found;
		CHECK_RC(rf_dataset_find_chunk(ds, ci.first_sample, &found), 0);
		CHECK(found == c);
		CHECK_RC(rf_dataset_find_chunk(ds, ci.first_sample + ci.samples - 1, &found), 0);
		CHECK(found == c);
		CHECK_RC(rf_dataset_verify_chunk(ds, c), 0);
		rf_shard_info si;
		CHECK_RC(rf_dataset_shard_info(ds, ci.shard, &si), 0);
		CHECK(c >= si.first_chunk && c < si.first_chunk + si.nchunks);
		CHECK(ci.offset >= si.header_end && ci.offset + ci.stored_bytes <= si.index_offset);
		uint64_t span = RF_ALIGN_UP(ci.stored_bytes, RF_FMT_ALIGN);
		CHECK(span <= rf_dataset_max_stored_span(ds));
		CHECK(ci.raw_bytes <= rf_dataset_max_raw_bytes(ds));
		uint8_t *stored = aligned_alloc(4096, span);
		uint8_t *raw = aligned_alloc(64, RF_ALIGN_UP(ci.raw_bytes, 64));
		CHECK(pread(si.fd, stored, span, (off_t)ci.offset) == (ssize_t)span);
		if (si.version < 2) {
			CHECK(rf_test_all_zero(stored + ci.stored_bytes, span - ci.stored_bytes));
		} else {
			/* Zeros up to the per-sample checksum table, the table,
			 * zeros to the next 4096 (read here apart). */
			uint64_t at = rf_fmt_sums_offset(0, ci.stored_bytes);
			uint64_t tb = rf_fmt_sums_bytes(ci.samples, s->nfields);
			uint64_t ext = RF_ALIGN_UP(at + tb, RF_FMT_ALIGN);
			CHECK(ci.offset + ext <= si.index_offset);
			uint8_t *tail = malloc(ext - ci.stored_bytes);
			CHECK(pread(si.fd, tail, ext - ci.stored_bytes,
				    (off_t)(ci.offset + ci.stored_bytes)) ==
			      (ssize_t)(ext - ci.stored_bytes));
			CHECK(rf_test_all_zero(tail, at - ci.stored_bytes));
			CHECK(rf_test_all_zero(tail + at - ci.stored_bytes + tb,
					       ext - at - tb));
			sums = realloc(sums, tb ? tb : 1);
			memcpy(sums, tail + at - ci.stored_bytes, tb);
			free(tail);
		}
		rf_chunk_ctx ctx;
		CHECK_RC(rf_dataset_chunk_ctx(ds, c, &ctx), 0);
		CHECK(ctx.chunk == c - si.first_chunk && ctx.offset == ci.offset);
		rf_chunk_sections sec;
		CHECK_RC(rf_chunk_open(rs, &ci, stored, raw, ci.raw_bytes, dctx, 1, &sec, &ctx, &d), 0);
		CHECK(sec.samples == ci.samples && sec.nfields == s->nfields);
		for (uint32_t j = 0; j < ci.samples; j++) {
			uint64_t smp = ci.first_sample + j;
			for (uint32_t k = 0; k < s->nfields; k++) {
				const rf_chunk_section *sc = &sec.field[k];
				uint64_t l = t_len(s, smp, k);
				const uint8_t *p = sc->offsets ? sc->data + sc->offsets[j]
							       : sc->data + j * sc->item_bytes;
				if (sc->offsets)
					CHECK(sc->offsets[j + 1] - sc->offsets[j] == l);
				t_fill(want, l, smp, k);
				CHECK(memcmp(p, want, l) == 0);
				if (si.version >= 2)
					CHECK(sums[(uint64_t)j * s->nfields + k] ==
					      XXH3_64bits(want, l));
			}
		}
		free(stored);
		free(raw);
	}
	free(sums);
	CHECK(next == n);
	CHECK_RC(rf_dataset_chunk_info(ds, nch, &(rf_chunk_info){0}), -ERANGE);
	CHECK_RC(rf_dataset_verify_chunk(ds, nch), -ERANGE);
	uint64_t found;
	CHECK_RC(rf_dataset_find_chunk(ds, n, &found), -ERANGE);
	ZSTD_freeDCtx(dctx);
	free(buf);
	free(want);
}

static inline uint8_t *
t_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	CHECK(f);
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)sz + 1);
	CHECK(fread(p, 1, (size_t)sz, f) == (size_t)sz);
	fclose(f);
	*len = (size_t)sz;
	return p;
}

static inline void
t_spit(const char *path, const void *p, size_t len)
{
	/* Unlink first: ext4 flushes a file truncated and rewritten in place
	 * (auto_da_alloc), which would make thousands of rewrites slow. */
	unlink(path);
	FILE *f = fopen(path, "wb");
	CHECK(f);
	CHECK(fwrite(p, 1, len, f) == len);
	CHECK(fclose(f) == 0);
}

#endif
