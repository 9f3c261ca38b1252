/* SPDX-License-Identifier: MIT */
/*
 * Opening one shard of a dataset (reader_impl.h): the heads and tails of
 * remote shards, then the footer, header, index and schema checks.
 *
 * Nothing is allocated from a size read in a file before that size has been
 * bounded by the file's real size (index) or the format's limits (chunks).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"
#include <zstd.h>

#include "format/reader_impl.h"

/* A zstd block holds at most 128 KiB and takes at least 4 bytes (3 of header,
 * 1 of RLE payload), so one stored byte never decodes to more than 32 KiB:
 * a bound that rejects absurd raw sizes before a buffer is allocated. */
#define ZSTD_MAX_EXPANSION 32768

/* ------------------------------------------------------------- remote */

/* Bytes fetched from each remote shard's two ends at open: the tail holds
 * the footer and, for a shard of up to ~1000 chunks, the whole index; the
 * head the largest header (3 pages). */
#define RF_REMOTE_TAIL (64 * 1024)
#define RF_REMOTE_HEAD (3 * RF_FMT_ALIGN)

/* Fetch the head and tail of remote shards [from, to) at once, as many
 * requests in flight as the reader allows: opening a dataset of many shards
 * costs a few round trips per window, not a few per shard. */
int
rf_rd_remote_prefetch(rf_dataset *ds, size_t from, size_t to, rf_diag *d)
{
	rf_http *h = ds->http;
	for (size_t i = from; i < to; i++) {
		struct shard *sh = &ds->shards[i];
		if (sh->hfile >= 0 && (!(sh->head = malloc(RF_REMOTE_HEAD)) ||
				       !(sh->tail = malloc(RF_REMOTE_TAIL))))
			return rf_fail(d, -ENOMEM, "rf_dataset_open: out of memory");
	}
	rf_io_done done[64];
	size_t next = 2 * from;
	for (;;) {
		int rc = 0;
		while (next < 2 * to) {
			struct shard *sh = &ds->shards[next / 2];
			if (sh->hfile < 0) {
				next++;
				continue;
			}
			rc = next % 2 ? rf_http_read(h, sh->hfile, 0, sh->head, RF_REMOTE_HEAD, next)
				      : rf_http_read_tail(h, sh->hfile, sh->tail, RF_REMOTE_TAIL, next);
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				return rc;
			next++;
		}
		if (!rf_http_inflight(h))
			return 0;
		int n = rf_http_wait(h, done, 64, 1);
		if (n < 0)
			return n;
		for (int k = 0; k < n; k++) {
			struct shard *sh = &ds->shards[done[k].tag / 2];
			if (done[k].res < 0)
				return (int)done[k].res; /* the message names URL and status */
			if (done[k].tag % 2) {
				sh->head_len = (size_t)done[k].res;
			} else {
				sh->tail_len = (size_t)done[k].res;
				uint64_t size = 0;
				/* An empty object answers 416 and may not say
				 * its size: 0 it is. */
				if (rf_http_file_size(h, sh->hfile, &size) < 0)
					size = sh->tail_len;
				sh->file_size = size;
			}
		}
	}
}

/* ------------------------------------------------------------- validation */

/* Transient read errors (what NFS, Lustre and FUSE return for a moment):
 * asked again this many times, 1, 4, 16 ... ms apart, as the loader's
 * reader does (src/io). */
#define READ_RETRIES 5

int
rf_rd_pread_full(int fd, void *buf, uint64_t len, uint64_t off, const char *path,
		 const char *what, rf_diag *d)
{
	uint8_t *p = buf;
	uint64_t done = 0;
	unsigned retries = 0;
	while (done < len) {
		ssize_t r = pread(fd, p + done, len - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			if ((e == EIO || e == EAGAIN || e == ETIMEDOUT) && retries < READ_RETRIES) {
				unsigned us = 1000u << (2 * retries++);
				rf_log(d, RF_LOG_WARN, "%s: read of %s at offset %llu: %s; retry %u of %d "
				       "in %u ms", path, what, (unsigned long long)(off + done),
				       rf_strerror(-e), retries, READ_RETRIES, us / 1000);
				usleep(us);
				continue;
			}
			return rf_fail(d, -e, "%s: read of %s (%llu bytes at offset %llu): %s%s", path,
				       what, (unsigned long long)len, (unsigned long long)off,
				       rf_strerror(-e), retries ? " (after retries)" : "");
		}
		if (r == 0)
			return rf_fail(d, RF_ETRUNCATED,
				       "%s: file ends at %llu, inside %s (%llu bytes at offset %llu)",
				       path, (unsigned long long)(off + done), what,
				       (unsigned long long)len, (unsigned long long)off);
		done += (uint64_t)r;
	}
	return 0;
}

/* rf_rd_pread_full for a shard wherever it is: a remote one's reads come from
 * the head or tail fetched at open when they lie inside, else as a ranged
 * GET. */
int
rf_rd_shard_read(struct shard *sh, void *buf, uint64_t len, uint64_t off, const char *what,
		 rf_diag *d)
{
	if (sh->hfile < 0)
		return rf_rd_pread_full(sh->fd, buf, len, off, sh->path, what, d);
	if (off + len <= sh->head_len) {
		memcpy(buf, sh->head + off, (size_t)len);
		return 0;
	}
	if (sh->tail_len && off >= sh->file_size - sh->tail_len && off + len <= sh->file_size) {
		memcpy(buf, sh->tail + (off - (sh->file_size - sh->tail_len)), (size_t)len);
		return 0;
	}
	if (len > SIZE_MAX)
		return rf_fail(d, -ENOMEM, "%s: a %llu-byte read", sh->path, (unsigned long long)len);
	rf_http_set_diag(sh->http, d);
	size_t got = 0;
	int rc = rf_http_pread(sh->http, sh->hfile, buf, (size_t)len, off, &got);
	if (rc == RF_ETRUNCATED)
		return rf_fail(d, RF_ETRUNCATED,
			       "%s: file ends at %llu, inside %s (%llu bytes at offset %llu)", sh->path,
			       (unsigned long long)(off + got), what, (unsigned long long)len,
			       (unsigned long long)off);
	return rc; /* the message, naming the URL and the range, is on d */
}

static int
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Open and check one shard; appends its chunks to *chunks (grown here).
 * On success, sh holds the open fd. */
int
rf_rd_shard_load(struct shard *sh, rf_schema *schema, int have_schema, rf_chunk_info **chunks,
		 uint64_t *nchunks, uint64_t *chunks_cap, uint32_t shard_no, rf_diag *d)
{
	const char *path = sh->path;
	uint64_t size = sh->file_size; /* a remote shard's, known from its tail */
	if (sh->hfile < 0) {
		/* O_NONBLOCK: a pipe named as a shard must fail below, not
		 * block the open until a writer comes.  Cleared once it is a
		 * regular file. */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return rf_fail(d, -errno, "%s: cannot open: %s", path, rf_strerror(-errno));
		sh->fd = fd;
		struct stat st;
		if (fstat(fd, &st) < 0)
			return rf_fail(d, -errno, "%s: fstat: %s", path, rf_strerror(-errno));
		if (!S_ISREG(st.st_mode))
			return rf_fail(d, RF_EFORMAT, "%s: not a regular file", path);
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return rf_fail(d, -errno, "%s: fcntl: %s", path, rf_strerror(-errno));
		size = (uint64_t)st.st_size;
		sh->file_size = size;
	}

	/* 1. The footer.  A file whose start is a shard header but whose end
	 * is not a footer was cut short (or never finished). */
	uint8_t head[RF_FMT_MAGIC_LEN];
	int head_ok = size >= RF_FMT_MAGIC_LEN &&
		      rf_rd_shard_read(sh, head, sizeof head, 0, "header magic", d) == 0 &&
		      memcmp(head, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) == 0;
	uint8_t f[RF_FMT_FOOTER_SIZE];
	int foot_ok = 0;
	if (size >= RF_FMT_FOOTER_SIZE) {
		int rc = rf_rd_shard_read(sh, f, sizeof f, size - RF_FMT_FOOTER_SIZE, "footer", d);
		if (rc < 0)
			return rc;
		foot_ok = memcmp(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) == 0;
	}
	if (!head_ok && !foot_ok)
		return rf_fail(d, RF_EFORMAT, "%s: not a ringfeed shard (no magic at the start or "
			       "the end)", path);
	if (size < RF_FMT_MIN_FILE || !foot_ok) {
		if (!head_ok)
			return rf_fail(d, RF_EFORMAT, "%s: header at offset 0: bad magic", path);
		return rf_fail(d, RF_ETRUNCATED, "%s: footer at offset %llu: no footer magic; the "
			       "file (%llu bytes) is truncated or was never finished", path,
			       (unsigned long long)(size >= RF_FMT_FOOTER_SIZE ? size - RF_FMT_FOOTER_SIZE : 0),
			       (unsigned long long)size);
	}
	uint64_t foff = size - RF_FMT_FOOTER_SIZE;
	uint32_t fver = rf_le32(f + 40);
	if (fver < RF_FMT_VERSION_MIN || fver > RF_FMT_VERSION)
		return rf_fail(d, RF_EFORMAT, "%s: footer at offset %llu: format version %u, this "
			       "library reads versions %d..%d", path, (unsigned long long)(foff + 40),
			       fver, RF_FMT_VERSION_MIN, RF_FMT_VERSION);
	if (XXH3_64bits(f, 48) != rf_le64(f + 48))
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: checksum mismatch", path,
			       (unsigned long long)foff);
	/* Version 3: the pack's shard count; older versions reserve it. */
	if (fver < 3 ? rf_le32(f + 44) != 0 : rf_le32(f + 44) == 0)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %s", path,
			       (unsigned long long)(foff + 44),
			       fver < 3 ? "reserved bytes are not 0" : "a pack of 0 shards");
	sh->pack_shards = rf_le32(f + 44);
	uint64_t index_offset = rf_le64(f + 0), nch = rf_le64(f + 8), nsamples = rf_le64(f + 16);
	if (nch > RF_FMT_MAX_CHUNKS)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %llu chunks, more than 2^32",
			       path, (unsigned long long)(foff + 8), (unsigned long long)nch);
	if (index_offset % RF_FMT_ALIGN != 0 || index_offset < RF_FMT_ALIGN ||
	    index_offset > foff || (foff - index_offset) / RF_FMT_INDEX_ENTRY_SIZE != nch ||
	    (foff - index_offset) % RF_FMT_INDEX_ENTRY_SIZE != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: index offset %llu and %llu "
			       "chunks disagree with the file size %llu", path,
			       (unsigned long long)foff, (unsigned long long)index_offset,
			       (unsigned long long)nch, (unsigned long long)size);
	sh->index_offset = index_offset;
	sh->nchunks = nch;
	sh->nsamples = nsamples;

	/* 2. The header: the fixed part from its first page, then all its
	 * pages (at most 3) once header_size is known to be sane. */
	uint8_t page[RF_FMT_ALIGN];
	int rc = rf_rd_shard_read(sh, page, sizeof page, 0, "header", d);
	if (rc < 0)
		return rc;
	if (memcmp(page, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) != 0)
		return rf_fail(d, RF_EFORMAT, "%s: header at offset 0: bad magic", path);
	uint32_t hver = rf_le32(page + 8), hsize = rf_le32(page + 12), flags = rf_le32(page + 16),
		 nfields = rf_le32(page + 20);
	if (hver < RF_FMT_VERSION_MIN || hver > RF_FMT_VERSION)
		return rf_fail(d, RF_EFORMAT, "%s: header at offset 8: format version %u, this "
			       "library reads versions %d..%d", path, hver, RF_FMT_VERSION_MIN,
			       RF_FMT_VERSION);
	if (hver != fver)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 8: format version %u, the "
			       "footer says %u", path, hver, fver);
	sh->version = hver;
	if (flags != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 16: unknown flags 0x%x", path,
			       flags);
	if (nfields == 0 || nfields > RF_MAX_FIELDS)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 20: %u fields, expected 1..%d",
			       path, nfields, RF_MAX_FIELDS);
	if (hsize != RF_FMT_HEADER_SIZE(nfields))
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 12: header size %u, expected "
			       "%llu for %u fields", path, hsize,
			       (unsigned long long)RF_FMT_HEADER_SIZE(nfields), nfields);
	/* Version 3: the pack id; older versions reserve the bytes. */
	if (hver < 3 && rf_le64(page + RF_FMT_PACK_ID_AT) != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 24: reserved bytes are not 0",
			       path);
	sh->pack_id = hver >= 3 ? rf_le64(page + RF_FMT_PACK_ID_AT) : 0;
	sh->footer_xxh3 = rf_le64(f + 48);
	uint64_t hend = RF_ALIGN_UP(hsize, RF_FMT_ALIGN);
	if (hend > index_offset)
		return rf_fail(d, RF_ECORRUPT, "%s: header (%u bytes) runs past the index at offset "
			       "%llu", path, hsize, (unsigned long long)index_offset);
	sh->header_end = hend;
	uint8_t hbuf[RF_FMT_ALIGN * 3];
	_Static_assert(RF_ALIGN_UP(RF_FMT_HEADER_SIZE(RF_MAX_FIELDS), RF_FMT_ALIGN) <= sizeof hbuf,
		       "header buffer too small");
	memcpy(hbuf, page, sizeof page);
	if (hend > sizeof page &&
	    (rc = rf_rd_shard_read(sh, hbuf + sizeof page, hend - sizeof page, sizeof page,
				   "header", d)) < 0)
		return rc;
	uint64_t hx = rf_le64(hbuf + hsize - 8);
	if (XXH3_64bits(hbuf, hsize - 8) != hx)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset %u: checksum mismatch", path,
			       hsize - 8);
	if (hx != rf_le64(f + 32))
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: header checksum copy "
			       "differs from the header's", path, (unsigned long long)(foff + 32));
	if (!all_zero(hbuf + hsize, hend - hsize))
		return rf_fail(d, RF_ECORRUPT, "%s: header padding at offset %u is not zero", path,
			       hsize);
	rf_schema s;
	memset(&s, 0, sizeof s);
	s.nfields = nfields;
	for (uint32_t k = 0; k < nfields; k++) {
		if ((rc = rf_fmt_decode_field(hbuf + RF_FMT_HEADER_FIXED + k * RF_FMT_FIELD_SIZE, k,
					      &s.fields[k], path, d)) < 0)
			return rc;
		for (uint32_t j = 0; j < k; j++)
			if (strcmp(s.fields[j].name, s.fields[k].name) == 0)
				return rf_fail(d, RF_ECORRUPT, "%s: header field %u: duplicate name %s",
					       path, k, s.fields[k].name);
	}
	if (!have_schema) {
		*schema = s;
	} else {
		if (schema->nfields != s.nfields)
			return rf_fail(d, RF_ESCHEMA, "%s: %u fields, the first shard has %u", path,
				       s.nfields, schema->nfields);
		for (uint32_t k = 0; k < nfields; k++) {
			const rf_field *a = &schema->fields[k], *b = &s.fields[k];
			if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->rank != b->rank ||
			    a->var_dim != b->var_dim || memcmp(a->shape, b->shape, sizeof a->shape))
				return rf_fail(d, RF_ESCHEMA, "%s: field %u (%s) differs from the first "
					       "shard's field %u (%s)", path, k, b->name, k, a->name);
		}
	}

	/* 3. The index: its size is exactly bounded by the file size now. */
	uint64_t isize = nch * RF_FMT_INDEX_ENTRY_SIZE;
	uint8_t *idx = malloc(isize ? isize : 1);
	if (!idx)
		return rf_fail(d, -ENOMEM, "%s: out of memory for a %llu-byte index", path,
			       (unsigned long long)isize);
	if ((rc = rf_rd_shard_read(sh, idx, isize, index_offset, "index", d)) < 0)
		goto out;
	if (XXH3_64bits(idx, isize) != rf_le64(f + 24)) {
		rc = rf_fail(d, RF_ECORRUPT, "%s: index at offset %llu: checksum mismatch", path,
			     (unsigned long long)index_offset);
		goto out;
	}
	if (nch > *chunks_cap - *nchunks) {
		uint64_t cap = *chunks_cap ? *chunks_cap : 64;
		while (cap - *nchunks < nch)
			cap *= 2;
		rf_chunk_info *c = cap > SIZE_MAX / sizeof *c ? NULL : realloc(*chunks, cap * sizeof *c);
		if (!c) {
			rc = rf_fail(d, -ENOMEM, "%s: out of memory for %llu chunks", path,
				     (unsigned long long)nch);
			goto out;
		}
		*chunks = c;
		*chunks_cap = cap;
	}
	uint64_t min_raw, sum = 0, prev_end = hend;
	int fixed_only = 1;
	for (uint32_t k = 0; k < nfields; k++)
		fixed_only &= s.fields[k].var_dim < 0;
	for (uint64_t i = 0; i < nch; i++) {
		const uint8_t *e = idx + i * RF_FMT_INDEX_ENTRY_SIZE;
		unsigned long long eoff = index_offset + i * RF_FMT_INDEX_ENTRY_SIZE;
		uint64_t off = rf_le64(e), stored = rf_le64(e + 8), raw = rf_le64(e + 16),
			 first = rf_le64(e + 24);
		uint32_t n = rf_le32(e + 32);
		uint8_t codec = e[36];
		/* Version 2: the per-sample checksum table follows the stored
		 * bytes and ends the chunk's extent.  Bounded (n < 2^32, 64
		 * fields) so nothing overflows once off and stored are inside
		 * the file. */
		uint64_t end = stored;
		if (hver >= 2 && off < index_offset && stored <= index_offset - off)
			end = rf_fmt_sums_offset(0, stored) + rf_fmt_sums_bytes(n, nfields);
		const char *bad = NULL;
		if (off % RF_FMT_ALIGN != 0)
			bad = "offset is not 4096-aligned";
		else if (off < prev_end)
			bad = i ? "overlaps the previous chunk" : "overlaps the header";
		else if (off >= index_offset || stored == 0 || stored > index_offset - off)
			bad = "stored bytes are empty or run into the index";
		else if (end > index_offset - off)
			bad = "the per-sample checksum table runs into the index";
		else if (raw == 0 || raw > RF_FMT_MAX_RAW)
			bad = "raw size outside 1..2^32";
		else if (first != sum)
			bad = "first sample does not follow the previous chunk";
		else if (n == 0)
			bad = "holds no sample";
		else if (codec > RF_CODEC_ZSTD)
			bad = "unknown codec";
		else if (codec == RF_CODEC_NONE && stored != raw)
			bad = "a raw chunk whose stored size differs from its raw size";
		/* raw > stored x 32768, without the product (raw >= 1 here) */
		else if (codec == RF_CODEC_ZSTD && (raw - 1) / ZSTD_MAX_EXPANSION >= stored)
			bad = "raw size beyond what zstd can expand its stored bytes to";
		else if (!all_zero(e + 37, 3) || !all_zero(e + (hver >= 2 ? 56 : 48),
							   hver >= 2 ? 8 : 16))
			bad = "reserved bytes are not 0";
		else if (rf_chunk_raw_size(&s, n, NULL, &min_raw) < 0 || min_raw > raw ||
			 (fixed_only && min_raw != raw))
			bad = "raw size disagrees with its sample count and the schema";
		if (bad) {
			rc = rf_fail(d, RF_ECORRUPT, "%s: index entry %llu at offset %llu: %s", path,
				     (unsigned long long)i, eoff, bad);
			goto out;
		}
		sum += n; /* nch <= 2^32 entries of < 2^32: no overflow */
		prev_end = RF_ALIGN_UP(off + end, RF_FMT_ALIGN);
		rf_chunk_info *ci = &(*chunks)[*nchunks + i];
		ci->shard = shard_no;
		ci->offset = off;
		ci->stored_bytes = stored;
		ci->raw_bytes = raw;
		ci->first_sample = first; /* made dataset-wide by the caller */
		ci->samples = n;
		ci->codec = (enum rf_codec)codec;
		ci->xxh3 = rf_le64(e + 40);
	}
	if (sum != nsamples) {
		rc = rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %llu samples, the index "
			     "holds %llu", path, (unsigned long long)(foff + 16),
			     (unsigned long long)nsamples, (unsigned long long)sum);
		goto out;
	}
	*nchunks += nch;
	rc = 0;
out:
	free(idx);
	return rc;
}
