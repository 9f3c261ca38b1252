/* SPDX-License-Identifier: MIT */
/*
 * The writer's chunk jobs.
 *
 * Samples accumulate column by column in a chunk job (one growable buffer per
 * field, plus an offsets array for variable fields).  When the job's raw size
 * reaches chunk_bytes it is sealed: stored raw, its sections are written with
 * one pwritev straight from the column buffers (no assembly copy); with zstd,
 * the columns are fed to one streaming frame, by the writing thread or, with
 * threads > 1, by a small pool.  Jobs form a ring of 2 x threads: chunk s lives
 * in jobs[s % njobs] and is written in sequence order by the thread that adds
 * samples, so at most njobs chunks are held in memory.
 *
 * Format 2 and up: each chunk's per-sample checksum table (an XXH3-64
 * per sample and field) is computed with the chunk's checksum, from the same
 * column buffers, and written after the stored bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "xxh.h"
#include <zstd.h>

#include "format/format.h"
#include "format/writer_impl.h"

const uint8_t rf_wr_zeros[RF_FMT_ALIGN] = {0};

/* Raw size of a job holding n samples whose variable columns hold the given
 * byte counts (extra[k] added to column k's current length). */
uint64_t
rf_wr_job_raw_size(const rf_writer *w, const struct wjob *j, uint64_t n, const uint64_t *extra)
{
	uint64_t var[RF_MAX_FIELDS], out;
	for (uint32_t k = 0; k < w->schema.nfields; k++)
		var[k] = j->col[k].len + (extra ? extra[k] : 0);
	if (rf_chunk_raw_size(&w->schema, n, var, &out) < 0)
		return UINT64_MAX;
	return out;
}

/* The iovecs of a job's raw form; returns their count. */
static int
job_pieces(const rf_writer *w, const struct wjob *j, struct iovec *iov)
{
	int c = 0;
	uint64_t pos = 0;
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		const struct wcol *col = &j->col[k];
		uint64_t pad = rf_chunk_section_align(pos) - pos;
		if (pad)
			iov[c++] = (struct iovec){(void *)(uintptr_t)rf_wr_zeros, (size_t)pad};
		pos += pad;
		if (w->schema.fields[k].var_dim >= 0) {
			size_t ob = (size_t)(j->n + 1) * 8;
			iov[c++] = (struct iovec){col->off, ob};
			pos += ob;
			pad = rf_chunk_section_align(pos) - pos;
			if (pad)
				iov[c++] = (struct iovec){(void *)(uintptr_t)rf_wr_zeros, (size_t)pad};
			pos += pad;
		}
		if (col->len)
			iov[c++] = (struct iovec){col->buf, (size_t)col->len};
		pos += col->len;
	}
	return c;
}

static void job_compress(const rf_writer *w, struct wjob *j, ZSTD_CCtx *cctx,
			 const struct iovec *iov, int cnt);

/* Format 2: the checksum of every value of the job, sample-major (the row of
 * sample i is entries [i x nfields, (i + 1) x nfields)), so a reader of one
 * sample gets all its checksums with one small read.  The values are hashed
 * exactly as they lie in the raw form: a fixed field's item bytes, a
 * variable field's data bytes between its two offsets (XXH3-64 of nothing
 * for an empty value). */
static int
job_sums(const rf_writer *w, struct wjob *j)
{
	uint32_t nf = w->schema.nfields;
	uint64_t need = j->n * nf;
	if (need > j->sums_cap) {
		uint64_t *p = need > SIZE_MAX / 8 ? NULL : realloc(j->sums, (size_t)need * 8);
		if (!p) {
			j->rc = -ENOMEM;
			snprintf(j->msg, sizeof j->msg, "out of memory for %llu sample checksums",
				 (unsigned long long)need);
			return j->rc;
		}
		j->sums = p;
		j->sums_cap = need;
	}
	for (uint32_t k = 0; k < nf; k++) {
		const struct wcol *col = &j->col[k];
		if (w->schema.fields[k].var_dim < 0) {
			uint64_t item = w->item[k];
			for (uint64_t i = 0; i < j->n; i++)
				j->sums[i * nf + k] = XXH3_64bits(col->buf + i * item, (size_t)item);
		} else {
			for (uint64_t i = 0; i < j->n; i++)
				j->sums[i * nf + k] = XXH3_64bits(col->buf + col->off[i],
								  (size_t)(col->off[i + 1] - col->off[i]));
		}
	}
	/* Little-endian host (format.h): the array is the table's bytes. */
	j->sums_xxh3 = XXH3_64bits(j->sums, (size_t)need * 8);
	return 0;
}

/* Encode a sealed job: checksum, and for zstd the frame.  Runs on any thread;
 * touches only the job and the given context. */
static void
job_encode(const rf_writer *w, struct wjob *j, ZSTD_CCtx *cctx)
{
	struct iovec iov[MAX_PIECES];
	int cnt = job_pieces(w, j, iov);
	j->rc = 0;
	if (w->version >= 2 && job_sums(w, j) < 0)
		return;
	if (j->codec == RF_CODEC_ZSTD) {
		job_compress(w, j, cctx, iov, cnt);
		/* Data that zstd cannot shrink is stored raw: reading it then
		 * costs no decompression. */
		if (j->rc < 0)
			return;
		if (j->out_len < j->raw_size) {
			j->xxh3 = XXH3_64bits(j->out, j->out_len);
			return;
		}
		j->codec = RF_CODEC_NONE;
	}
	{
		/* Heap state: its layout is private to the installed libxxhash. */
		XXH3_state_t *st = XXH3_createState();
		if (!st) {
			j->rc = -ENOMEM;
			snprintf(j->msg, sizeof j->msg, "out of memory for a checksum state");
			return;
		}
		XXH3_64bits_reset(st);
		for (int i = 0; i < cnt; i++)
			XXH3_64bits_update(st, iov[i].iov_base, iov[i].iov_len);
		j->xxh3 = XXH3_64bits_digest(st);
		XXH3_freeState(st);
	}
}

static void
job_compress(const rf_writer *w, struct wjob *j, ZSTD_CCtx *cctx, const struct iovec *iov, int cnt)
{
	(void)w;
	size_t bound = ZSTD_compressBound((size_t)j->raw_size);
	if (j->out_cap < bound) {
		free(j->out);
		j->out = malloc(bound);
		j->out_cap = j->out ? bound : 0;
		if (!j->out) {
			j->rc = -ENOMEM;
			snprintf(j->msg, sizeof j->msg, "out of memory for a %zu-byte zstd buffer", bound);
			return;
		}
	}
	size_t r = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setPledgedSrcSize(cctx, j->raw_size);
	ZSTD_outBuffer ob = {j->out, j->out_cap, 0};
	for (int i = 0; i < cnt && !ZSTD_isError(r); i++) {
		ZSTD_inBuffer ib = {iov[i].iov_base, iov[i].iov_len, 0};
		while (ib.pos < ib.size && !ZSTD_isError(r))
			r = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_continue);
	}
	if (!ZSTD_isError(r)) {
		ZSTD_inBuffer ib = {NULL, 0, 0};
		do
			r = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end);
		while (r != 0 && !ZSTD_isError(r) && ob.pos < ob.size);
		if (r != 0 && !ZSTD_isError(r)) {
			j->rc = RF_ECODEC;
			snprintf(j->msg, sizeof j->msg, "zstd frame exceeds its bound");
			return;
		}
	}
	if (ZSTD_isError(r)) {
		j->rc = RF_ECODEC;
		snprintf(j->msg, sizeof j->msg, "zstd: %s", ZSTD_getErrorName(r));
		return;
	}
	j->out_len = ob.pos;
}

ZSTD_CCtx *
rf_wr_make_cctx(int level)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	if (!c)
		return NULL;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1))) {
		ZSTD_freeCCtx(c);
		return NULL;
	}
	return c;
}

void *
rf_wr_worker_main(void *arg)
{
	rf_writer *w = arg;
	ZSTD_CCtx *cctx = rf_wr_make_cctx(w->cfg.zstd_level);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		/* Stop is set by close (after every job was written) or by
		 * abort (whose queued jobs nobody wants). */
		if (w->stop)
			break;
		struct wjob *j = NULL;
		for (unsigned i = 0; i < w->njobs; i++) {
			struct wjob *c = &w->jobs[i];
			if (c->state == JOB_QUEUED && (!j || c->seq < j->seq))
				j = c;
		}
		if (!j) {
			pthread_cond_wait(&w->cv_work, &w->mu);
			continue;
		}
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&w->mu);
		if (cctx) {
			job_encode(w, j, cctx);
		} else {
			j->rc = -ENOMEM;
			snprintf(j->msg, sizeof j->msg, "cannot create a zstd context");
		}
		pthread_mutex_lock(&w->mu);
		j->state = JOB_DONE;
		pthread_cond_broadcast(&w->cv_done);
	}
	pthread_mutex_unlock(&w->mu);
	ZSTD_freeCCtx(cctx);
	return NULL;
}

/* Write an encoded job as the next chunk of the current shard (starting a
 * new shard first when this one would rf_wr_grow past shard_bytes). */
static int
job_write(rf_writer *w, struct wjob *j)
{
	if (j->rc < 0)
		return rf_fail(&w->diag, j->rc, "%s: chunk %llu: %s", w->shards[w->nshards - 1].tmp,
			       (unsigned long long)w->nchunks, j->msg);
	uint64_t stored = j->codec == RF_CODEC_NONE ? j->raw_size : j->out_len;
	/* Format 2: the sums table at the first multiple of 64 past the
	 * stored bytes, inside the chunk's 4096-aligned extent. */
	uint64_t sums_at = w->version >= 2 ? rf_fmt_sums_offset(0, stored) : stored;
	uint64_t sums_len = w->version >= 2 ? rf_fmt_sums_bytes((uint32_t)j->n, w->schema.nfields) : 0;
	uint64_t span = RF_ALIGN_UP(sums_at + sums_len, RF_FMT_ALIGN);
	if (w->cfg.shard_bytes && w->nchunks > 0) {
		uint64_t end = w->pos + span + (w->nchunks + 1) * RF_FMT_INDEX_ENTRY_SIZE +
			       RF_FMT_FOOTER_SIZE;
		if (end > w->cfg.shard_bytes) {
			int rc = rf_wr_shard_finish(w);
			if (rc == 0)
				rc = rf_wr_shard_open(w);
			if (rc < 0)
				return rc;
		}
	}
	if (w->nchunks >= RF_FMT_MAX_CHUNKS)
		return rf_fail(&w->diag, RF_EUSAGE, "%s: more than 2^32 chunks in one shard",
			       w->shards[w->nshards - 1].tmp);
	/* Room for this entry and the footer that follows the index. */
	uint64_t need = (w->nchunks + 1) * RF_FMT_INDEX_ENTRY_SIZE + RF_FMT_FOOTER_SIZE;
	if (need > w->index_cap) {
		uint64_t cap = w->index_cap * 2 > need ? w->index_cap * 2 : need + 4096;
		uint8_t *p = realloc(w->index, cap);
		if (!p)
			return rf_fail(&w->diag, -ENOMEM, "%s: out of memory for the index", w->path);
		w->index = p;
		w->index_cap = cap;
	}
	uint64_t offset = w->pos;
	struct iovec iov[MAX_PIECES + 3];
	int cnt;
	if (j->codec == RF_CODEC_NONE) {
		cnt = job_pieces(w, j, iov);
	} else {
		iov[0] = (struct iovec){j->out, j->out_len};
		cnt = 1;
	}
	if (sums_at > stored)
		iov[cnt++] = (struct iovec){(void *)(uintptr_t)rf_wr_zeros, (size_t)(sums_at - stored)};
	if (sums_len)
		iov[cnt++] = (struct iovec){j->sums, (size_t)sums_len};
	if (span > sums_at + sums_len)
		iov[cnt++] = (struct iovec){(void *)(uintptr_t)rf_wr_zeros,
					    (size_t)(span - sums_at - sums_len)};
	int rc = rf_wr_write_iov(w, iov, cnt, span);
	if (rc < 0)
		return rc;
	uint8_t *e = w->index + w->nchunks * RF_FMT_INDEX_ENTRY_SIZE;
	memset(e, 0, RF_FMT_INDEX_ENTRY_SIZE);
	rf_put_le64(e + 0, offset);
	rf_put_le64(e + 8, stored);
	rf_put_le64(e + 16, j->raw_size);
	rf_put_le64(e + 24, w->shard_samples);
	rf_put_le32(e + 32, (uint32_t)j->n);
	e[36] = (uint8_t)j->codec;
	rf_put_le64(e + 40, j->xxh3);
	if (w->version >= 2)
		rf_put_le64(e + 48, j->sums_xxh3);
	w->nchunks++;
	w->shard_samples += j->n;
	return 0;
}

/* Job states are read by the pool under the mutex; change them likewise. */
static void
set_state(rf_writer *w, struct wjob *j, enum job_state st)
{
	if (!w->nthreads) {
		j->state = st;
		return;
	}
	pthread_mutex_lock(&w->mu);
	j->state = st;
	if (st == JOB_QUEUED)
		pthread_cond_signal(&w->cv_work);
	pthread_mutex_unlock(&w->mu);
}

static void
job_reset(rf_writer *w, struct wjob *j)
{
	j->n = 0;
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		j->col[k].len = 0;
		if (j->col[k].off)
			j->col[k].off[0] = 0;
	}
	set_state(w, j, JOB_FREE);
}

/* Write the oldest sealed job, waiting for its encoding if a pool runs it. */
int
rf_wr_drain_one(rf_writer *w)
{
	struct wjob *j = &w->jobs[w->write_seq % w->njobs];
	if (w->nthreads) {
		pthread_mutex_lock(&w->mu);
		while (j->state != JOB_DONE)
			pthread_cond_wait(&w->cv_done, &w->mu);
		pthread_mutex_unlock(&w->mu);
	}
	int rc = job_write(w, j);
	job_reset(w, j);
	w->write_seq++;
	return rc;
}

/* The job being filled, after making sure its slot has been written. */
int
rf_wr_cur_job(rf_writer *w, struct wjob **out)
{
	while (w->write_seq + w->njobs <= w->next_seq) {
		int rc = rf_wr_drain_one(w);
		if (rc < 0)
			return rc;
	}
	struct wjob *j = &w->jobs[w->next_seq % w->njobs];
	if (!w->filling) {
		set_state(w, j, JOB_FILLING);
		w->filling = 1;
	}
	*out = j;
	return 0;
}

/* Seal the job being filled and hand it on. */
int
rf_wr_seal(rf_writer *w)
{
	struct wjob *j = &w->jobs[w->next_seq % w->njobs];
	/* Once sealed, the slot may still hold an older job in flight until
	 * rf_wr_cur_job() has made room: only a slot being filled is ours. */
	if (!w->filling || j->n == 0)
		return 0;
	w->filling = 0;
	j->raw_size = rf_wr_job_raw_size(w, j, j->n, NULL);
	j->codec = w->cfg.zstd_level > 0 ? RF_CODEC_ZSTD : RF_CODEC_NONE;
	j->seq = w->next_seq++;
	if (w->nthreads) {
		set_state(w, j, JOB_QUEUED);
		return 0;
	}
	/* No pool: encode here and write at once, so one job is ever held. */
	job_encode(w, j, w->cctx);
	j->state = JOB_DONE;
	while (w->write_seq < w->next_seq) {
		int rc = rf_wr_drain_one(w);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int
rf_wr_grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint64_t c = *cap ? *cap : 4096 / elem;
	while (c < need)
		c = c > UINT64_MAX / 2 ? need : c * 2;
	if (c > SIZE_MAX / elem)
		return -ENOMEM;
	void *q = realloc(*p, (size_t)(c * elem));
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}
