/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack`: the inputs (NAME=FILE.npy, --raw, --llmc) mapped, read
 * ahead and given back as they are consumed, and their samples fed to the
 * writer in blocks, in order or, with --shuffle, in rf_pack_order's.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringfeed/dataset.h>

#include "cmd_pack_impl.h"
#include "npy.h"

/* --------------------------------------------------------------- inputs */

static int
map_input(input_file *f, const char *path)
{
	struct stat st;
	int fd;

	f->path = path;
	/* O_NONBLOCK: a pipe is refused below instead of blocking the open. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		rf_cli_error("%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rf_cli_error("%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
		close(fd);
		return -1;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->map_len = (size_t)st.st_size;
	if (f->map_len) {
		void *m = mmap(NULL, f->map_len, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			rf_cli_error("%s: mmap: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		/* Read ahead aggressively; pages behind are not needed again. */
		madvise(m, f->map_len, MADV_SEQUENTIAL);
		f->map = m;
	}
	close(fd);
	return 0;
}

void
pack_unmap_inputs(pack_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].map)
			munmap((void *)j->files[i].map, j->files[i].map_len);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* About to read data[from, to) of an input, `ahead` more bytes to follow.
 * Three hints, all best effort (errors, e.g. from an older kernel, are
 * ignored):
 *  - MADV_WILLNEED on the next `ahead` bytes starts their reads now, in
 *    large requests, so the disk works while this block is copied and
 *    written (page faults alone read a small readahead window at a time,
 *    synchronously, which left a cold-cache pack at a third of cp's speed);
 *  - MADV_POPULATE_READ maps this block in one call instead of a fault
 *    every few pages;
 *  - MADV_DONTNEED drops the pages already consumed from this process (they
 *    stay in the page cache), so the resident size stays at a few blocks
 *    however large the input. */
static void
input_window(input_file *f, uint64_t from, uint64_t to, uint64_t ahead)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t base = (size_t)(f->data - f->map);
	size_t start, end, want;

	if (!f->map || page <= 0)
		return;
	start = (base + (size_t)from) & ~((size_t)page - 1);
	end = base + (size_t)to;
	if (end > f->map_len)
		end = f->map_len;
	want = end + (size_t)ahead;
	if (want > f->map_len)
		want = f->map_len;
	if (f->advised < start)
		f->advised = start;
	if (want > f->advised) {
		/* madvise wants a page-aligned start. */
		size_t a = f->advised & ~((size_t)page - 1);
		madvise((void *)(f->map + a), want - a, MADV_WILLNEED);
		f->advised = want;
	}
	if (end > start)
		madvise((void *)(f->map + start), end - start, MADV_POPULATE_READ);
	if (start > f->released) {
		madvise((void *)(f->map + f->released), start - f->released, MADV_DONTNEED);
		f->released = start;
	}
}

/* Add a field with a message that says what is wrong. */
static int
add_field(pack_job *j, const char *name, const char *from, enum rf_dtype dtype, uint32_t rank,
	  const uint64_t *shape)
{
	size_t nlen = strlen(name);

	if (nlen == 0 || nlen >= RF_NAME_MAX || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						      "abcdefghijklmnopqrstuvwxyz0123456789_.-") != nlen) {
		rf_cli_error("%s: invalid field name '%s' (1-%d characters of A-Z a-z 0-9 _ . -)",
			     from, name, RF_NAME_MAX - 1);
		return -1;
	}
	if (rf_schema_find(&j->schema, name) >= 0) {
		rf_cli_error("%s: field '%s' given twice", from, name);
		return -1;
	}
	if (rank > RF_MAX_RANK) {
		rf_cli_error("%s: field '%s' has %u dimensions per sample (at most %d)", from, name,
			     rank, RF_MAX_RANK);
		return -1;
	}
	for (uint32_t i = 0; i < rank; i++)
		if (shape[i] == 0) {
			rf_cli_error("%s: field '%s' has a zero-length dimension", from, name);
			return -1;
		}
	if (rf_schema_add(&j->schema, name, dtype, rank, shape, -1) < 0) {
		rf_cli_error("%s: field '%s' is not valid (a value of over 2^40 bytes?)", from, name);
		return -1;
	}
	return 0;
}

int
pack_open_npy(pack_job *j)
{
	for (size_t i = 0; i < j->opt.ninputs; i++) {
		input_file *f = &j->files[i];
		char *spec = j->opt.inputs[i];
		char *eq = strchr(spec, '=');
		char err[256];
		rf_npy npy;
		uint64_t shape[RF_NPY_MAX_DIMS + 1];
		uint32_t rank;
		int rc;

		*eq = 0; /* spec is now NAME, eq + 1 the path */
		j->nfiles++;
		if (map_input(f, eq + 1) < 0)
			return -1;
		rc = rf_npy_parse(&npy, f->map, f->map_len, err, sizeof err);
		if (rc < 0) {
			rf_cli_error("%s: %s", f->path, err);
			return -1;
		}
		/* data_offset <= map_len (the parser saw the whole header);
		 * data_bytes may be anything a hostile header says. */
		if (npy.data_bytes > f->map_len - npy.data_offset) {
			rf_cli_error("%s: truncated: the header declares %" PRIu64
				     " bytes of data, the file holds %" PRIu64,
				     f->path, npy.data_bytes, (uint64_t)f->map_len - npy.data_offset);
			return -1;
		}
		if (npy.data_bytes < f->map_len - npy.data_offset) {
			rf_cli_error("%s: %" PRIu64 " unexpected bytes after the array data", f->path,
				     (uint64_t)f->map_len - npy.data_offset - npy.data_bytes);
			return -1;
		}
		if (npy.ndim == 0) {
			rf_cli_error("%s: a 0-d array has no samples axis", f->path);
			return -1;
		}
		f->data = f->map + npy.data_offset;
		f->data_bytes = npy.data_bytes;
		f->samples = npy.shape[0];
		if (i > 0 && f->samples != j->files[0].samples) {
			rf_cli_error("%s: %" PRIu64 " samples, but %s has %" PRIu64
				     " (the first axes must agree)",
				     f->path, f->samples, j->files[0].path, j->files[0].samples);
			return -1;
		}
		rank = (uint32_t)(npy.ndim - 1);
		memcpy(shape, npy.shape + 1, sizeof shape[0] * rank);
		/* Fixed-size byte strings become a trailing dimension of bytes. */
		if (npy.dtype == RF_DTYPE_BYTES)
			shape[rank++] = npy.itemsize;
		if (add_field(j, spec, f->path, npy.dtype, rank, shape) < 0)
			return -1;
		f->item_bytes = rf_field_item_bytes(&j->schema.fields[j->schema.nfields - 1]);
		j->in_bytes += f->data_bytes;
		rf_cli_note(2, "%s: field '%s' %s, %" PRIu64 " samples of %" PRIu64 " bytes", f->path,
			    spec, npy.descr, f->samples, f->item_bytes);
	}
	j->samples = j->files[0].samples;
	return 0;
}

int
pack_open_raw(pack_job *j)
{
	uint64_t record = 0;

	for (size_t i = 0; i < j->opt.nspecs; i++) {
		const rf_cli_field_spec *s = &j->opt.specs[i];
		if (add_field(j, s->name, "--field", s->dtype, s->rank, s->shape) < 0)
			return -1;
		record += rf_field_item_bytes(&j->schema.fields[i]);
	}
	for (size_t i = 0; i < j->opt.ninputs; i++) {
		input_file *f = &j->files[i];
		j->nfiles++;
		if (map_input(f, j->opt.inputs[i]) < 0)
			return -1;
		if (f->map_len % record) {
			rf_cli_error("%s: size %zu is not a multiple of the record size %" PRIu64
				     " (%zu trailing bytes)",
				     f->path, f->map_len, record, (size_t)(f->map_len % record));
			return -1;
		}
		f->data = f->map;
		f->data_bytes = f->map_len;
		f->samples = f->map_len / record;
		f->item_bytes = record;
		j->samples += f->samples;
		j->in_bytes += f->data_bytes;
	}
	return 0;
}

int
pack_open_llmc(pack_job *j)
{
	glob_t g;
	int rc;
	uint64_t tail = 0, tail_shards = 0;
	uint64_t shape[1];

	rc = glob(j->opt.llmc_glob, GLOB_ERR, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		rf_cli_error("--llmc: no file matches '%s'", j->opt.llmc_glob);
		return -1;
	}
	if (rc != 0) {
		rf_cli_error("--llmc: cannot expand '%s': %s", j->opt.llmc_glob,
			     rc == GLOB_NOSPACE ? "out of memory" : strerror(errno));
		return -1;
	}
	/* glob() sorts its matches: the shards go in name order. */
	j->files = calloc(g.gl_pathc, sizeof *j->files);
	if (!j->files) {
		globfree(&g);
		rf_cli_error("out of memory");
		return -1;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		input_file *f = &j->files[i];
		char err[256];
		char *path = strdup(g.gl_pathv[i]);

		if (!path) {
			rf_cli_error("out of memory");
			goto fail;
		}
		j->nfiles++;
		if (map_input(f, path) < 0)
			goto fail;
		rc = rf_llmc_parse(&f->llmc, f->map, f->map_len, f->map_len, err, sizeof err);
		if (rc < 0) {
			rf_cli_error("%s: %s", f->path, err);
			goto fail;
		}
		if (i > 0 && f->llmc.dtype != j->files[0].llmc.dtype) {
			rf_cli_error("%s: %s tokens, but %s has %s tokens", f->path,
				     rf_dtype_name(f->llmc.dtype), j->files[0].path,
				     rf_dtype_name(j->files[0].llmc.dtype));
			goto fail;
		}
		f->data = f->map + RF_LLMC_HEADER_BYTES;
		f->data_bytes = f->llmc.ntokens * f->llmc.token_bytes;
		f->samples = rf_llmc_windows(f->llmc.ntokens, j->opt.seq_len, &f->tail);
		f->item_bytes = (j->opt.seq_len + 1) * f->llmc.token_bytes;
		j->samples += f->samples;
		j->in_bytes += f->data_bytes;
		if (f->tail) {
			tail += f->tail;
			tail_shards++;
			rf_cli_note(2, "%s: %" PRIu64 " tokens, %" PRIu64 " samples, last %" PRIu64
				    " tokens dropped",
				    f->path, f->llmc.ntokens, f->samples, f->tail);
		}
	}
	globfree(&g);
	shape[0] = j->opt.seq_len + 1;
	if (add_field(j, "tokens", j->opt.llmc_glob, j->files[0].llmc.dtype, 1, shape) < 0)
		return -1;
	if (tail)
		rf_cli_note(1, "%" PRIu64 " tokens at the ends of %" PRIu64
			    " shard(s) do not fill a sample of %" PRIu64 " tokens and are dropped",
			    tail, tail_shards, j->opt.seq_len + 1);
	return 0;
fail:
	globfree(&g);
	return -1;
}

/* ----------------------------------------------------------------- feed */

static int
writer_failed(pack_job *j, int rc)
{
	const char *msg = rf_writer_errmsg(j->w);

	rf_cli_progress_finish(&j->progress);
	rf_cli_error("%s", msg && *msg ? msg : rf_strerror(rc));
	return -1;
}

/* Stop between blocks on Ctrl-C: the writer is aborted by the caller, so
 * nothing is left on disk. */
static int
check_interrupt(pack_job *j)
{
	if (!rf_cli_interrupted())
		return 0;
	rf_cli_progress_finish(&j->progress);
	return 1;
}

int
pack_feed_npy(pack_job *j)
{
	uint64_t rec = 0;
	uint64_t per;
	rf_column cols[RF_MAX_FIELDS];

	for (size_t i = 0; i < j->nfiles; i++)
		rec += j->files[i].item_bytes;
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	for (uint64_t s = 0; s < j->samples; s += per) {
		uint64_t n = j->samples - s < per ? j->samples - s : per;
		int rc;

		if (check_interrupt(j))
			return 1;
		for (size_t i = 0; i < j->nfiles; i++) {
			input_file *f = &j->files[i];
			input_window(f, s * f->item_bytes, (s + n) * f->item_bytes, 2 * n * f->item_bytes);
			cols[i].data = f->data + s * f->item_bytes;
			cols[i].offsets = NULL;
		}
		if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0)
			return writer_failed(j, rc);
		j->done_bytes += n * rec;
		rf_cli_progress_update(&j->progress, j->done_bytes);
	}
	return 0;
}

int
pack_feed_raw(pack_job *j)
{
	uint32_t nf = j->schema.nfields;
	uint64_t item[RF_MAX_FIELDS];
	uint64_t rec = 0, per;
	rf_column cols[RF_MAX_FIELDS];

	for (uint32_t k = 0; k < nf; k++) {
		item[k] = rf_field_item_bytes(&j->schema.fields[k]);
		rec += item[k];
	}
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	if (nf > 1) {
		/* Records interleave the fields; the writer takes columns, so
		 * each block is split into one buffer per field. */
		for (uint32_t k = 0; k < nf; k++) {
			if (!(j->fbuf[k] = malloc(per * item[k]))) {
				rf_cli_error("out of memory");
				return -1;
			}
		}
	}
	for (size_t fi = 0; fi < j->nfiles; fi++) {
		input_file *f = &j->files[fi];
		for (uint64_t s = 0; s < f->samples; s += per) {
			uint64_t n = f->samples - s < per ? f->samples - s : per;
			const unsigned char *src = f->data + s * rec;
			int rc;

			if (check_interrupt(j))
				return 1;
			input_window(f, s * rec, (s + n) * rec, 2 * n * rec);
			if (nf == 1) {
				cols[0].data = src;
				cols[0].offsets = NULL;
			} else {
				for (uint64_t r = 0; r < n; r++) {
					for (uint32_t k = 0; k < nf; k++) {
						memcpy(j->fbuf[k] + r * item[k], src, item[k]);
						src += item[k];
					}
				}
				for (uint32_t k = 0; k < nf; k++) {
					cols[k].data = j->fbuf[k];
					cols[k].offsets = NULL;
				}
			}
			if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0)
				return writer_failed(j, rc);
			j->done_bytes += n * rec;
			rf_cli_progress_update(&j->progress, j->done_bytes);
		}
	}
	return 0;
}

int
pack_feed_llmc(pack_job *j)
{
	uint64_t t = j->opt.seq_len;
	uint64_t item = j->files[0].item_bytes;
	uint32_t tb = j->files[0].llmc.token_bytes;
	uint64_t per = item >= j->block_bytes ? 1 : j->block_bytes / item;
	rf_column col = {NULL, NULL};

	/* Consecutive samples share one token (sample i's last target is
	 * sample i+1's first input), so windows are copied out, not pointed to. */
	if (!(j->buf = malloc(per * item))) {
		rf_cli_error("out of memory");
		return -1;
	}
	col.data = j->buf;
	for (size_t fi = 0; fi < j->nfiles; fi++) {
		input_file *f = &j->files[fi];
		for (uint64_t s = 0; s < f->samples; s += per) {
			uint64_t n = f->samples - s < per ? f->samples - s : per;
			int rc;

			if (check_interrupt(j))
				return 1;
			input_window(f, s * t * tb, ((s + n) * t + 1) * tb, 2 * n * t * tb);
			for (uint64_t r = 0; r < n; r++)
				memcpy(j->buf + r * item, f->data + (s + r) * t * tb, item);
			if ((rc = rf_writer_add_columns(j->w, n, &col)) < 0)
				return writer_failed(j, rc);
			j->done_bytes += n * t * tb;
			rf_cli_progress_update(&j->progress, j->done_bytes);
		}
		j->done_bytes += f->data_bytes - f->samples * t * tb;
	}
	return 0;
}

/* ------------------------------------------------------------- shuffled */

/* Advice for reading the inputs in a random order, in place of map_input's
 * MADV_SEQUENTIAL.  Inputs that fit in half the RAM are read ahead whole
 * (one sequential pass over the disk, after which every random read is a
 * page-cache hit); larger ones get MADV_RANDOM, so that a fault reads its
 * own pages rather than a readahead window of neighbours that are needed
 * much later, if ever, and would only push other pages out. */
static void
shuffle_advise(pack_job *j)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
	uint64_t total = 0;
	int whole;

	for (size_t i = 0; i < j->nfiles; i++)
		total += j->files[i].map_len;
	whole = total <= ram / 2;
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].map)
			madvise((void *)j->files[i].map, j->files[i].map_len,
				whole ? MADV_WILLNEED : MADV_RANDOM);
	rf_cli_note(2, "--shuffle: %s of input %s", whole ? "reading ahead" : "random reads",
		    whole ? "(it fits in half the RAM)" : "(more than half the RAM)");
}

/* The file holding sample *idx of the concatenated inputs (--raw, --llmc),
 * *idx becoming its index there.  first[i]: the samples before file i,
 * first[nfiles]: all of them, *idx below that. */
static const input_file *
locate(const pack_job *j, const uint64_t *first, uint64_t *idx)
{
	size_t lo = 0, hi = j->nfiles;

	/* first[lo] <= *idx, and hi == nfiles or first[hi] > *idx: the last
	 * such lo holds the sample (an empty file has first[i] == first[i+1]
	 * and is never the last). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (first[mid] <= *idx)
			lo = mid;
		else
			hi = mid;
	}
	*idx -= first[lo];
	return &j->files[lo];
}

/* Every kind of input in the order of rf_pack_order: each block of output
 * positions asks for its input samples and copies each from where it lies
 * (mapped .npy columns, raw records, llm.c windows) into one buffer per
 * field.  Memory: those buffers (a block) and the block's indices; the
 * permutation itself is computed, never stored. */
int
pack_feed_shuffled(pack_job *j)
{
	uint32_t nf = j->schema.nfields;
	uint64_t item[RF_MAX_FIELDS], fo[RF_MAX_FIELDS];
	uint64_t rec = 0, per, in_rec;
	uint64_t *first = NULL, *idx = NULL;
	rf_column cols[RF_MAX_FIELDS];
	int ret = -1;

	for (uint32_t k = 0; k < nf; k++) {
		item[k] = rf_field_item_bytes(&j->schema.fields[k]);
		fo[k] = rec;
		rec += item[k];
	}
	/* Input bytes a sample accounts for, for progress: an llm.c sample
	 * shares its last token with the next one. */
	in_rec = j->opt.mode == MODE_LLMC ? j->opt.seq_len * j->files[0].llmc.token_bytes : rec;
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	if (per > j->samples && j->samples > 0)
		per = j->samples;
	idx = malloc(per * sizeof *idx);
	first = malloc((j->nfiles + 1) * sizeof *first);
	if (!idx || !first)
		goto oom;
	for (uint32_t k = 0; k < nf; k++)
		if (!(j->fbuf[k] = malloc(per * item[k])))
			goto oom;
	first[0] = 0;
	for (size_t i = 0; i < j->nfiles; i++)
		first[i + 1] = first[i] + (j->opt.mode == MODE_NPY ? 0 : j->files[i].samples);
	shuffle_advise(j);
	for (uint64_t s = 0; s < j->samples; s += per) {
		uint64_t n = j->samples - s < per ? j->samples - s : per;
		int rc;

		if (check_interrupt(j)) {
			ret = 1;
			goto out;
		}
		if ((rc = rf_pack_order(j->samples, j->opt.sh.seed, s, n, idx)) < 0) {
			rf_cli_error("--shuffle: %s", rf_strerror(rc));
			goto out;
		}
		for (uint64_t r = 0; r < n; r++) {
			uint64_t x = idx[r];
			if (j->opt.mode == MODE_NPY) {
				/* One file per field, all of the same samples. */
				for (uint32_t k = 0; k < nf; k++)
					memcpy(j->fbuf[k] + r * item[k], j->files[k].data + x * item[k],
					       item[k]);
				continue;
			}
			const input_file *f = locate(j, first, &x);
			const unsigned char *src = j->opt.mode == MODE_LLMC
				? f->data + x * j->opt.seq_len * f->llmc.token_bytes
				: f->data + x * rec;
			for (uint32_t k = 0; k < nf; k++)
				memcpy(j->fbuf[k] + r * item[k], src + fo[k], item[k]);
		}
		for (uint32_t k = 0; k < nf; k++) {
			cols[k].data = j->fbuf[k];
			cols[k].offsets = NULL;
		}
		if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0) {
			ret = writer_failed(j, rc);
			goto out;
		}
		j->done_bytes += n * in_rec;
		rf_cli_progress_update(&j->progress, j->done_bytes);
	}
	ret = 0;
	goto out;
oom:
	rf_cli_error("out of memory");
out:
	free(idx);
	free(first);
	return ret;
}
