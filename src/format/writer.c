/* SPDX-License-Identifier: MIT */
/*
 * The shard writer: one forward pass per shard (header, chunks, index,
 * footer) into PATH.tmp.PID, renamed to PATH only at rf_writer_close.
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
 *
 * A pack is committed by its manifest (manifest.h): format 3 (the default)
 * puts a pack id in every shard's header, a checksum of the whole pack's
 * content (so the same input packs to the same bytes, and two different
 * packs to the same output differ), patched into each shard's header and
 * footer once the last shard is written; rf_writer_close writes the
 * manifest naming the shards and that id, renames it into place, and only
 * then renames the shards.  Before the manifest's rename a reader sees the
 * old dataset; after it the new one (a shard not renamed yet is read from its
 * temporary name, which the manifest gives); a reader of mixed shards without
 * a manifest fails naming them.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "xxh.h"
#include <zstd.h>

#include "format/format.h"
#include "format/manifest.h"

#define DEFAULT_CHUNK_BYTES (UINT64_C(4) << 20)
#define MAX_THREADS 256
/* iovecs of one chunk: per field up to pad, offsets, pad, data. */
#define MAX_PIECES (4 * RF_MAX_FIELDS + 1)

static const uint8_t zeros[RF_FMT_ALIGN];

struct wcol {
	uint8_t *buf;          /* fixed values, or variable data */
	uint64_t len, cap;
	uint64_t *off;         /* variable: n + 1 offsets, off[0] = 0 */
	uint64_t off_cap;      /* entries */
};

enum job_state { JOB_FREE, JOB_FILLING, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct wjob {
	enum job_state state;
	uint64_t seq;
	uint64_t n;
	struct wcol *col;
	uint64_t raw_size;
	int codec;
	uint8_t *out;          /* zstd frame */
	size_t out_cap, out_len;
	uint64_t xxh3;
	uint64_t *sums;        /* format 2: n x nfields value checksums */
	uint64_t sums_cap;     /* entries */
	uint64_t sums_xxh3;    /* of the sums table's bytes */
	int rc;
	char msg[256];
};

struct wshard {
	char *final;
	char *tmp;
	uint64_t size, samples, footer_xxh3; /* for the manifest, once finished */
	uint64_t index_offset, nchunks, index_xxh3; /* to rewrite its footer */
};

struct rf_writer {
	rf_diag diag;
	rf_schema schema;
	rf_writer_config cfg;
	uint32_t version;      /* format version written */
	uint64_t pack_id;      /* format 3: in every shard's header, set at close */
	char *path;
	int sharded;
	uint64_t item[RF_MAX_FIELDS];
	int has_var;
	uint64_t fixed_sample_bytes; /* sum of fixed fields' item sizes */

	struct wshard *shards;
	size_t nshards, shards_cap;
	int fd;                /* current shard's temporary file, or -1 */
	uint64_t pos;          /* its write position (4096-aligned between chunks) */
	uint64_t header_end;
	uint8_t *header;       /* header page(s), zero padded */
	uint64_t header_xxh3;
	uint8_t *index;        /* current shard's index entries */
	uint64_t nchunks, index_cap;
	uint64_t shard_samples;

	uint64_t samples, bytes;
	int rc;                /* sticky failure */

	struct wjob *jobs;
	unsigned njobs;
	uint64_t next_seq;     /* sequence number of the job being filled */
	uint64_t write_seq;    /* next sequence number to write */
	int filling;           /* jobs[next_seq % njobs] is being filled */
	ZSTD_CCtx *cctx;       /* for compression on the adding thread */

	pthread_t *threads;
	unsigned nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	int stop;
};

/* The message of this thread's last failed rf_writer_open or rf_writer_close,
 * whose handles are gone by the time a caller could ask them. */
static _Thread_local char last_error[RF_ERRMSG_MAX];

RF_API const char *
rf_writer_last_error(void)
{
	return last_error;
}

static int
keep_error(const rf_diag *d, int rc)
{
	snprintf(last_error, sizeof last_error, "%s", d->msg);
	return rc;
}

RF_API void
rf_writer_config_init(rf_writer_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->zstd_level = 0;
	cfg->chunk_bytes = DEFAULT_CHUNK_BYTES;
	cfg->shard_bytes = 0;
	cfg->threads = 1;
}

RF_API const char *
rf_writer_errmsg(const rf_writer *w)
{
	return w ? w->diag.msg : "";
}

RF_API uint64_t
rf_writer_samples(const rf_writer *w)
{
	return w ? w->samples : 0;
}

RF_API uint64_t
rf_writer_bytes(const rf_writer *w)
{
	return w ? w->bytes : 0;
}

/* ------------------------------------------------------------- file I/O */

static int
write_iov(rf_writer *w, struct iovec *iov, int cnt, uint64_t total)
{
	uint64_t done = 0;
	while (done < total) {
		while (cnt > 0 && iov->iov_len == 0) {
			iov++;
			cnt--;
		}
		ssize_t r = pwritev(w->fd, iov, cnt > IOV_MAX ? IOV_MAX : cnt, (off_t)w->pos);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			return rf_fail(&w->diag, -e, "%s: write of %llu bytes at offset %llu: %s",
				       w->shards[w->nshards - 1].tmp,
				       (unsigned long long)(total - done), (unsigned long long)w->pos,
				       rf_strerror(-e));
		}
		if (r == 0)
			return rf_fail(&w->diag, -EIO, "%s: write at offset %llu made no progress",
				       w->shards[w->nshards - 1].tmp, (unsigned long long)w->pos);
		done += (uint64_t)r;
		w->pos += (uint64_t)r;
		w->bytes += (uint64_t)r;
		size_t left = (size_t)r;
		while (cnt > 0 && left >= iov->iov_len) {
			left -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + left;
			iov->iov_len -= left;
		}
	}
	return 0;
}

static int
write_buf(rf_writer *w, const void *buf, uint64_t len)
{
	struct iovec iov = {(void *)(uintptr_t)buf, (size_t)len};
	return write_iov(w, &iov, 1, len);
}

static char *
str_printf(const char *fmt, ...) RF_PRINTF(1, 2);

static char *
str_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}

/* Start a new shard: its temporary file and header. */
static int
shard_open(rf_writer *w)
{
	if (w->nshards == w->shards_cap) {
		size_t cap = w->shards_cap ? 2 * w->shards_cap : 4;
		struct wshard *s = realloc(w->shards, cap * sizeof *s);
		if (!s)
			return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
		w->shards = s;
		w->shards_cap = cap;
	}
	struct wshard *s = &w->shards[w->nshards];
	/* Five digits: a reader sorts names by byte, and out-100000.rfs would
	 * sort before out-10001.rfs. */
	if (w->sharded && w->nshards > 99999)
		return rf_fail(&w->diag, RF_EUSAGE, "%s: more than 100000 shards: raise the "
			       "shard size", w->path);
	if (w->sharded) {
		size_t len = strlen(w->path);
		int base = (int)(len >= 4 && strcmp(w->path + len - 4, ".rfs") == 0 ? len - 4 : len);
		s->final = str_printf("%.*s-%05zu.rfs", base, w->path, w->nshards);
	} else {
		s->final = strdup(w->path);
	}
	s->tmp = s->final ? str_printf("%s.tmp.%ld", s->final, (long)getpid()) : NULL;
	if (!s->final || !s->tmp) {
		free(s->final);
		free(s->tmp);
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	}
	w->fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (w->fd < 0) {
		int e = errno;
		int rc = rf_fail(&w->diag, -e, "%s: cannot create: %s", s->tmp, rf_strerror(-e));
		free(s->final);
		free(s->tmp);
		return rc;
	}
	w->nshards++;
	w->pos = 0;
	w->nchunks = 0;
	w->shard_samples = 0;
	return write_buf(w, w->header, w->header_end);
}

/* Write the index and footer of the current shard, fsync and close it. */
static int
shard_finish(rf_writer *w)
{
	uint64_t isize = w->nchunks * RF_FMT_INDEX_ENTRY_SIZE;
	uint8_t *buf = w->index;
	/* The index buffer keeps room for the footer after the entries. */
	uint8_t *f = buf + isize;
	memset(f, 0, RF_FMT_FOOTER_SIZE);
	rf_put_le64(f + 0, w->pos);
	rf_put_le64(f + 8, w->nchunks);
	rf_put_le64(f + 16, w->shard_samples);
	rf_put_le64(f + 24, XXH3_64bits(buf, isize));
	rf_put_le64(f + 32, w->header_xxh3);
	rf_put_le32(f + 40, w->version);
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
	memcpy(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN);
	int rc = write_buf(w, buf, isize + RF_FMT_FOOTER_SIZE);
	if (rc < 0)
		return rc;
	struct wshard *sh = &w->shards[w->nshards - 1];
	sh->size = w->pos;
	sh->samples = w->shard_samples;
	sh->footer_xxh3 = rf_le64(f + 48);
	sh->index_offset = rf_le64(f + 0);
	sh->nchunks = w->nchunks;
	sh->index_xxh3 = rf_le64(f + 24);
	/* Format 3: synced once its pack id is in (seal_pack). */
	if (w->version < 3 && !w->cfg.no_fsync && fsync(w->fd) < 0) {
		int e = errno;
		return rf_fail(&w->diag, -e, "%s: fsync: %s", w->shards[w->nshards - 1].tmp,
			       rf_strerror(-e));
	}
	int fd = w->fd;
	w->fd = -1;
	if (close(fd) < 0) {
		int e = errno;
		return rf_fail(&w->diag, -e, "%s: close: %s", w->shards[w->nshards - 1].tmp,
			       rf_strerror(-e));
	}
	return 0;
}

/* ------------------------------------------------------------ chunk jobs */

/* Raw size of a job holding n samples whose variable columns hold the given
 * byte counts (extra[k] added to column k's current length). */
static uint64_t
job_raw_size(const rf_writer *w, const struct wjob *j, uint64_t n, const uint64_t *extra)
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
			iov[c++] = (struct iovec){(void *)(uintptr_t)zeros, (size_t)pad};
		pos += pad;
		if (w->schema.fields[k].var_dim >= 0) {
			size_t ob = (size_t)(j->n + 1) * 8;
			iov[c++] = (struct iovec){col->off, ob};
			pos += ob;
			pad = rf_chunk_section_align(pos) - pos;
			if (pad)
				iov[c++] = (struct iovec){(void *)(uintptr_t)zeros, (size_t)pad};
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

static ZSTD_CCtx *
make_cctx(int level)
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

static void *
worker_main(void *arg)
{
	rf_writer *w = arg;
	ZSTD_CCtx *cctx = make_cctx(w->cfg.zstd_level);
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
 * new shard first when this one would grow past shard_bytes). */
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
			int rc = shard_finish(w);
			if (rc == 0)
				rc = shard_open(w);
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
		iov[cnt++] = (struct iovec){(void *)(uintptr_t)zeros, (size_t)(sums_at - stored)};
	if (sums_len)
		iov[cnt++] = (struct iovec){j->sums, (size_t)sums_len};
	if (span > sums_at + sums_len)
		iov[cnt++] = (struct iovec){(void *)(uintptr_t)zeros,
					    (size_t)(span - sums_at - sums_len)};
	int rc = write_iov(w, iov, cnt, span);
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
static int
drain_one(rf_writer *w)
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
static int
cur_job(rf_writer *w, struct wjob **out)
{
	while (w->write_seq + w->njobs <= w->next_seq) {
		int rc = drain_one(w);
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
static int
seal(rf_writer *w)
{
	struct wjob *j = &w->jobs[w->next_seq % w->njobs];
	/* Once sealed, the slot may still hold an older job in flight until
	 * cur_job() has made room: only a slot being filled is ours. */
	if (!w->filling || j->n == 0)
		return 0;
	w->filling = 0;
	j->raw_size = job_raw_size(w, j, j->n, NULL);
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
		int rc = drain_one(w);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int
grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
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

/* ------------------------------------------------------------ open/close */

static void
writer_free(rf_writer *w)
{
	if (w->nthreads) {
		pthread_mutex_lock(&w->mu);
		w->stop = 1;
		pthread_cond_broadcast(&w->cv_work);
		pthread_mutex_unlock(&w->mu);
		for (unsigned i = 0; i < w->nthreads; i++)
			pthread_join(w->threads[i], NULL);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv_work);
		pthread_cond_destroy(&w->cv_done);
	}
	free(w->threads);
	if (w->fd >= 0)
		close(w->fd);
	for (size_t i = 0; i < w->nshards; i++) {
		free(w->shards[i].final);
		free(w->shards[i].tmp);
	}
	free(w->shards);
	for (unsigned i = 0; w->jobs && i < w->njobs; i++) {
		struct wjob *j = &w->jobs[i];
		for (uint32_t k = 0; j->col && k < w->schema.nfields; k++) {
			free(j->col[k].buf);
			free(j->col[k].off);
		}
		free(j->col);
		free(j->out);
		free(j->sums);
	}
	free(w->jobs);
	ZSTD_freeCCtx(w->cctx);
	free(w->index);
	free(w->header);
	free(w->path);
	free(w);
}

static void
remove_temps(rf_writer *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	for (size_t i = 0; i < w->nshards; i++)
		unlink(w->shards[i].tmp);
}

/* Whether no process `pid` runs on this machine (EPERM: one runs, owned by
 * someone else). */
static int
pid_gone(long pid)
{
	return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* The pid of NAME.tmp.PID when `name` is a temporary file that a writer to
 * this output makes (a shard's, or the manifest's), else 0.  `base` is the
 * output's file name without ".rfs", `file` the output's file name. */
static long
temp_pid(const char *name, const char *file, const char *base)
{
	const char *t = strstr(name, ".tmp.");
	if (!t)
		return 0;
	while (strstr(t + 1, ".tmp."))
		t = strstr(t + 1, ".tmp.");
	const char *digits = t + 5;
	if (!*digits || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 9)
		return 0;
	size_t stem = (size_t)(t - name), bl = strlen(base);
	int ours = (stem == strlen(file) && strncmp(name, file, stem) == 0) ||
		   (stem == bl + 4 && strncmp(name, base, bl) == 0 &&
		    strncmp(name + bl, RF_MANIFEST_EXT, 4) == 0) ||
		   (stem == bl + 10 && strncmp(name, base, bl) == 0 && name[bl] == '-' &&
		    strspn(name + bl + 1, "0123456789") == 5 && strncmp(name + bl + 6, ".rfs", 4) == 0);
	return ours ? strtol(digits, NULL, 10) : 0;
}

/*
 * Clean up after an earlier writer to this output that was killed.
 *
 * A writer killed after its manifest's rename but before renaming all its
 * shards left a committed pack whose remaining shards are still at their
 * temporary names (so did one of this process whose rename failed): finish
 * its renames, so the output is whole again before
 * this writer replaces it (readers read the same pack either way).  Then
 * remove the temporary files of writers that no longer run, except those a
 * committed manifest still needs (a rename that failed again).
 */
static void
recover_output(rf_writer *w)
{
	char *mpath = rf_manifest_path_for(w->path);
	char *copy = strdup(w->path);
	if (!mpath || !copy)
		goto out;
	uint64_t committed = 0;
	rf_manifest m;
	rf_diag quiet;
	rf_diag_init(&quiet, NULL, NULL);
	quiet.errors_quiet = 1;
	if (access(mpath, F_OK) == 0 && rf_manifest_read(mpath, &m, &quiet) == 0) {
		committed = m.pack_id;
		/* This process: a writer whose close failed after the commit
		 * (its rename failed). */
		int gone = m.writer_pid == (long)getpid() || pid_gone(m.writer_pid);
		for (size_t i = 0; gone && i < m.nshards; i++) {
			char *tmp = rf_manifest_tmp_path(mpath, m.shards[i].name, m.writer_pid);
			char *fin = rf_manifest_shard_path(mpath, m.shards[i].name);
			uint64_t id;
			if (tmp && fin && rf_shard_peek_pack(tmp, &id) && id == m.pack_id) {
				if (rename(tmp, fin) == 0)
					rf_log(&w->diag, RF_LOG_INFO, "%s: renamed to %s, finishing the "
					       "pack its manifest %s names", tmp, fin, mpath);
				else
					rf_log(&w->diag, RF_LOG_WARN, "%s: cannot rename to %s: %s", tmp,
					       fin, rf_strerror(-errno));
			}
			free(tmp);
			free(fin);
		}
		rf_manifest_free(&m);
	}
	/* dirname and basename of the output path */
	char *slash = strrchr(copy, '/');
	const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
	const char *file = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	size_t fl = strlen(file);
	char base[NAME_MAX + 1];
	snprintf(base, sizeof base, "%.*s", (int)(fl >= 4 && strcmp(file + fl - 4, ".rfs") == 0 ?
						   fl - 4 : fl), file);
	DIR *dp = opendir(dir);
	struct dirent *de;
	while (dp && (de = readdir(dp))) {
		long pid = temp_pid(de->d_name, file, base);
		if (!pid || !pid_gone(pid))
			continue;
		char *p = str_printf("%s/%s", dir, de->d_name);
		uint64_t id;
		if (p && !(committed && rf_shard_peek_pack(p, &id) && id == committed)) {
			if (unlink(p) == 0)
				rf_log(&w->diag, RF_LOG_INFO, "%s: removed, left by a write to %s that "
				       "was killed (process %ld is gone)", p, w->path, pid);
			else
				rf_log(&w->diag, RF_LOG_WARN, "%s: left by a killed write to %s, cannot "
				       "remove it: %s", p, w->path, rf_strerror(-errno));
		}
		free(p);
	}
	if (dp)
		closedir(dp);
out:
	free(mpath);
	free(copy);
}

static int
writer_open(rf_writer **out, const char *path, const rf_schema *schema,
	    const rf_writer_config *cfg, rf_diag *d)
{
	if (!out)
		return rf_fail(d, -EINVAL, "rf_writer_open: out is NULL");
	*out = NULL;
	rf_writer_config def;
	if (!cfg) {
		rf_writer_config_init(&def);
		cfg = &def;
	}
	if (RF_CONFIG_SIZE_CHECK(d, "rf_writer_open", cfg, "rf_writer_config_init") < 0)
		return RF_EUSAGE;
	/* The config is one: its logger may be used from here on. */
	d->log = cfg->log;
	d->log_user = cfg->log_user;
	if (!path || !*path)
		return rf_fail(d, RF_EUSAGE, "rf_writer_open: empty path");
	if (cfg->format_version > RF_FMT_VERSION)
		return rf_fail(d, RF_EUSAGE, "%s: format version %u, this library writes "
			       "versions %d..%d (0 = the latest)", path, cfg->format_version,
			       RF_FMT_VERSION_MIN, RF_FMT_VERSION);
	if (cfg->zstd_level < 0 || cfg->zstd_level > ZSTD_maxCLevel())
		return rf_fail(d, RF_EUSAGE, "%s: zstd level %d outside 0..%d", path,
			       cfg->zstd_level, ZSTD_maxCLevel());
	if (cfg->chunk_bytes > RF_FMT_MAX_RAW)
		return rf_fail(d, RF_EUSAGE, "%s: chunk_bytes %llu exceeds 2^32", path,
			       (unsigned long long)cfg->chunk_bytes);
	if (cfg->threads > MAX_THREADS)
		return rf_fail(d, RF_EUSAGE, "%s: %u threads, at most %d", path, cfg->threads,
			       MAX_THREADS);
	if (!schema || rf_schema_validate(schema) < 0)
		return rf_fail(d, RF_ESCHEMA, "%s: invalid schema", path);

	rf_writer *w = calloc(1, sizeof *w);
	if (!w)
		return rf_fail(d, -ENOMEM, "%s: out of memory", path);
	w->diag = *d;
	w->fd = -1;
	w->schema = *schema;
	w->cfg = *cfg;
	if (w->cfg.chunk_bytes == 0)
		w->cfg.chunk_bytes = DEFAULT_CHUNK_BYTES;
	if (w->cfg.threads == 0)
		w->cfg.threads = 1;
	w->version = cfg->format_version ? cfg->format_version : RF_FMT_VERSION;
	w->sharded = cfg->shard_bytes != 0;
	w->path = strdup(path);
	for (uint32_t k = 0; k < schema->nfields; k++) {
		w->item[k] = rf_field_item_bytes(&schema->fields[k]);
		if (schema->fields[k].var_dim >= 0)
			w->has_var = 1;
		else
			w->fixed_sample_bytes += w->item[k]; /* <= 64 x 2^40 */
	}
	uint64_t hsize = RF_FMT_HEADER_SIZE(schema->nfields);
	w->header_end = RF_ALIGN_UP(hsize, RF_FMT_ALIGN);
	w->header = calloc(1, w->header_end);
	int zstd = cfg->zstd_level > 0;
	unsigned want = zstd && w->cfg.threads > 1 ? w->cfg.threads : 0;
	w->njobs = want ? 2 * want : 1;
	w->jobs = calloc(w->njobs, sizeof *w->jobs);
	int rc = -ENOMEM;
	w->index_cap = RF_FMT_ALIGN;
	w->index = malloc(w->index_cap);
	if (!w->path || !w->header || !w->jobs || !w->index)
		goto fail_nomem;
	for (unsigned i = 0; i < w->njobs; i++) {
		w->jobs[i].col = calloc(schema->nfields, sizeof(struct wcol));
		if (!w->jobs[i].col)
			goto fail_nomem;
		for (uint32_t k = 0; k < schema->nfields; k++) {
			if (schema->fields[k].var_dim < 0)
				continue;
			if (grow((void **)&w->jobs[i].col[k].off, &w->jobs[i].col[k].off_cap, 1024, 8) < 0)
				goto fail_nomem;
			w->jobs[i].col[k].off[0] = 0;
		}
	}
	w->header_xxh3 = rf_fmt_encode_header(schema, w->version, w->header);
	recover_output(w);
	if (want) {
		w->threads = calloc(want, sizeof *w->threads);
		if (!w->threads)
			goto fail_nomem;
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv_work, NULL);
		pthread_cond_init(&w->cv_done, NULL);
		unsigned started = 0;
		for (; started < want; started++)
			if (pthread_create(&w->threads[started], NULL, worker_main, w) != 0)
				break;
		w->nthreads = started;
		if (started == 0) {
			/* Without a single worker, encode on this thread. */
			pthread_mutex_destroy(&w->mu);
			pthread_cond_destroy(&w->cv_work);
			pthread_cond_destroy(&w->cv_done);
		}
	}
	if (zstd && !w->nthreads && !(w->cctx = make_cctx(cfg->zstd_level)))
		goto fail_nomem;
	rc = shard_open(w);
	if (rc < 0) {
		snprintf(d->msg, sizeof d->msg, "%s", w->diag.msg);
		remove_temps(w);
		writer_free(w);
		return rc;
	}
	*out = w;
	return 0;
fail_nomem:
	rc = rf_fail(d, -ENOMEM, "%s: out of memory", path);
	writer_free(w);
	return rc;
}

RF_API int
rf_writer_open(rf_writer **out, const char *path, const rf_schema *schema,
	       const rf_writer_config *cfg)
{
	rf_diag d;
	/* No logger until writer_open has checked the config's size. */
	rf_diag_init(&d, NULL, NULL);
	last_error[0] = '\0';
	int rc = writer_open(out, path, schema, cfg, &d);
	return rc < 0 ? keep_error(&d, rc) : 0;
}

/* ------------------------------------------------------------ adding */

/* Check a block of n samples before any of it is taken, so a bad call leaves
 * the writer as it was. */
static int
check_columns(rf_writer *w, uint64_t n, const rf_column *cols)
{
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		const rf_field *f = &w->schema.fields[k];
		uint64_t item = w->item[k];
		if (f->var_dim < 0) {
			uint64_t bytes;
			if (rf_mul_u64(n, item, &bytes) < 0 || bytes > SIZE_MAX)
				return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: %llu values are too "
					       "many bytes", w->path, f->name, (unsigned long long)n);
			if (!cols[k].data)
				return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: no data", w->path,
					       f->name);
			continue;
		}
		const int64_t *o = cols[k].offsets;
		if (!o)
			return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: a variable field needs "
				       "offsets", w->path, f->name);
		if (o[0] < 0)
			return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: offsets[0] is negative",
				       w->path, f->name);
		for (uint64_t i = 0; i < n; i++) {
			if (o[i + 1] < o[i] || (uint64_t)(o[i + 1] - o[i]) % item != 0)
				return rf_fail(&w->diag, RF_EUSAGE,
					       "%s: field %s: value %llu has %lld bytes, not a "
					       "non-negative multiple of %llu",
					       w->path, f->name, (unsigned long long)i,
					       (long long)(o[i + 1] - o[i]), (unsigned long long)item);
		}
		if (o[n] != o[0] && !cols[k].data)
			return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: no data", w->path,
				       f->name);
	}
	/* Every sample must fit in a chunk on its own. */
	uint64_t var[RF_MAX_FIELDS] = {0}, raw;
	for (uint64_t i = 0; i < (w->has_var ? n : 1); i++) {
		for (uint32_t k = 0; w->has_var && k < w->schema.nfields; k++)
			if (w->schema.fields[k].var_dim >= 0)
				var[k] = (uint64_t)(cols[k].offsets[i + 1] - cols[k].offsets[i]);
		if (rf_chunk_raw_size(&w->schema, 1, var, &raw) < 0 || raw > RF_FMT_MAX_RAW)
			return rf_fail(&w->diag, RF_EUSAGE,
				       "%s: sample %llu alone exceeds the 2^32-byte chunk limit",
				       w->path, (unsigned long long)(w->samples + i));
	}
	return 0;
}

/* Append samples [i, i + m) of cols to job j. */
static int
append(rf_writer *w, struct wjob *j, const rf_column *cols, uint64_t i, uint64_t m)
{
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		struct wcol *c = &j->col[k];
		const uint8_t *src;
		uint64_t bytes;
		if (w->schema.fields[k].var_dim < 0) {
			src = (const uint8_t *)cols[k].data + i * w->item[k];
			bytes = m * w->item[k];
		} else {
			const int64_t *o = cols[k].offsets;
			if (grow((void **)&c->off, &c->off_cap, j->n + m + 1, 8) < 0)
				return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
			uint64_t *dst = c->off + j->n + 1;
			uint64_t base = c->len - (uint64_t)o[i];
			for (uint64_t s = 0; s < m; s++)
				dst[s] = base + (uint64_t)o[i + s + 1];
			src = (const uint8_t *)cols[k].data + o[i];
			bytes = (uint64_t)(o[i + m] - o[i]);
		}
		if (grow((void **)&c->buf, &c->cap, c->len + bytes, 1) < 0)
			return rf_fail(&w->diag, -ENOMEM, "%s: out of memory for a %llu-byte chunk",
				       w->path, (unsigned long long)(c->len + bytes));
		if (bytes)
			memcpy(c->buf + c->len, src, bytes);
		c->len += bytes;
	}
	j->n += m;
	return 0;
}

/* Write samples [i, i + m) of cols as one raw chunk without copying them:
 * the (empty) job borrows the caller's memory for its sections while it is
 * sealed, checksummed and written, which all happen before this returns
 * because raw chunks are never handed to the pool.  Only variable fields'
 * offsets are copied, rebased to 0. */
static int
write_direct(rf_writer *w, struct wjob *j, const rf_column *cols, uint64_t i, uint64_t m)
{
	uint8_t *own[RF_MAX_FIELDS];
	uint64_t own_cap[RF_MAX_FIELDS];
	int rc = 0;
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		struct wcol *c = &j->col[k];
		own[k] = c->buf;
		own_cap[k] = c->cap;
		if (w->schema.fields[k].var_dim < 0) {
			c->buf = (uint8_t *)(uintptr_t)cols[k].data + i * w->item[k];
			c->len = m * w->item[k];
			continue;
		}
		const int64_t *o = cols[k].offsets;
		if (rc == 0 && grow((void **)&c->off, &c->off_cap, m + 1, 8) < 0)
			rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
		if (rc == 0)
			for (uint64_t s = 0; s <= m; s++)
				c->off[s] = (uint64_t)(o[i + s] - o[i]);
		c->buf = (uint8_t *)(uintptr_t)cols[k].data + o[i];
		c->len = (uint64_t)(o[i + m] - o[i]);
	}
	j->n = m;
	if (rc == 0)
		rc = seal(w);
	/* seal() wrote the job and reset it; give the buffers back. */
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		j->col[k].buf = own[k];
		j->col[k].cap = own_cap[k];
		j->col[k].len = 0;
		if (j->col[k].off)
			j->col[k].off[0] = 0;
	}
	j->n = 0;
	return rc;
}

/* How many samples from i (< n) go into job j now: at least one when j is
 * empty, 0 when j must be sealed first.  Stops at the sample that brings the
 * raw size to chunk_bytes, and before one that would pass 2^32. */
static uint64_t
take(rf_writer *w, const struct wjob *j, uint64_t n, const rf_column *cols, uint64_t i,
     int *full, int *too_big)
{
	uint64_t target = w->cfg.chunk_bytes;
	uint64_t room = UINT32_MAX - j->n;
	uint64_t avail = n - i < room ? n - i : room;
	*full = 0;
	*too_big = 0;
	if (!w->has_var) {
		/* Fixed fields only: raw(n) is n x sample bytes plus at most 63
		 * bytes of padding per field, so the first guess is off by at
		 * most a few samples. */
		uint64_t per = w->fixed_sample_bytes;
		uint64_t want = target / per + 1;
		want = want > j->n ? want - j->n : 1;
		uint64_t m = want < avail ? want : avail;
		while (m > 1 && job_raw_size(w, j, j->n + m - 1, NULL) >= target)
			m--;
		while (m < avail && job_raw_size(w, j, j->n + m, NULL) < target)
			m++;
		while (m > 0 && job_raw_size(w, j, j->n + m, NULL) > RF_FMT_MAX_RAW)
			m--;
		if (m == 0 && j->n == 0)
			*too_big = 1;
		if (m == 0 || job_raw_size(w, j, j->n + m, NULL) >= target || m == room)
			*full = 1;
		return m;
	}
	uint64_t extra[RF_MAX_FIELDS] = {0};
	uint64_t m = 0;
	while (m < avail) {
		for (uint32_t k = 0; k < w->schema.nfields; k++)
			if (w->schema.fields[k].var_dim >= 0)
				extra[k] += (uint64_t)(cols[k].offsets[i + m + 1] -
						       cols[k].offsets[i + m]);
		uint64_t raw = job_raw_size(w, j, j->n + m + 1, extra);
		if (raw > RF_FMT_MAX_RAW) {
			if (j->n + m == 0)
				*too_big = 1;
			*full = 1;
			return m;
		}
		m++;
		if (raw >= target) {
			*full = 1;
			return m;
		}
	}
	if (j->n + m == UINT32_MAX)
		*full = 1;
	return m;
}

RF_API int
rf_writer_add_columns(rf_writer *w, uint64_t n, const rf_column *cols)
{
	if (!w)
		return -EINVAL;
	if (w->rc < 0)
		return w->rc;
	if (n == 0)
		return 0;
	if (!cols)
		return rf_fail(&w->diag, RF_EUSAGE, "%s: no columns", w->path);
	int rc = check_columns(w, n, cols);
	if (rc < 0)
		return rc;
	uint64_t i = 0;
	while (i < n) {
		struct wjob *j;
		if ((rc = cur_job(w, &j)) < 0)
			break;
		int full, too_big;
		uint64_t m = take(w, j, n, cols, i, &full, &too_big);
		if (too_big) {
			/* Only the first sample of a call can be the culprit
			 * without earlier ones having been taken; report it all
			 * the same, the writer stays usable. */
			return rf_fail(&w->diag, RF_EUSAGE,
				       "%s: sample %llu alone exceeds the 2^32-byte chunk limit",
				       w->path, (unsigned long long)(w->samples + i));
		}
		if (full && m > 0 && j->n == 0 && !w->nthreads && w->cfg.zstd_level == 0) {
			/* A whole raw chunk out of this call: write it straight
			 * from the caller's memory. */
			rc = write_direct(w, j, cols, i, m);
			i += m;
			w->samples += m;
			if (rc < 0)
				break;
			continue;
		}
		if (m && (rc = append(w, j, cols, i, m)) < 0)
			break;
		i += m;
		w->samples += m;
		if (full && (rc = seal(w)) < 0)
			break;
	}
	if (rc < 0)
		w->rc = rc;
	return rc;
}

RF_API int
rf_writer_add(rf_writer *w, const rf_value *values)
{
	if (!w)
		return -EINVAL;
	if (w->rc < 0)
		return w->rc;
	if (!values)
		return rf_fail(&w->diag, RF_EUSAGE, "%s: no values", w->path);
	rf_column cols[RF_MAX_FIELDS];
	int64_t offs[RF_MAX_FIELDS][2];
	for (uint32_t k = 0; k < w->schema.nfields; k++) {
		const rf_field *f = &w->schema.fields[k];
		uint64_t len = values[k].len;
		if (f->var_dim < 0 ? len != w->item[k] : len % w->item[k] != 0 || len > INT64_MAX)
			return rf_fail(&w->diag, RF_EUSAGE,
				       "%s: field %s: value of %llu bytes, expected %s%llu", w->path,
				       f->name, (unsigned long long)len,
				       f->var_dim < 0 ? "" : "a multiple of ",
				       (unsigned long long)w->item[k]);
		if (len && !values[k].data)
			return rf_fail(&w->diag, RF_EUSAGE, "%s: field %s: no data", w->path,
				       f->name);
		offs[k][0] = 0;
		offs[k][1] = (int64_t)len;
		cols[k].data = values[k].data ? values[k].data : zeros;
		cols[k].offsets = f->var_dim < 0 ? NULL : offs[k];
	}
	return rf_writer_add_columns(w, 1, cols);
}

RF_API void
rf_writer_abort(rf_writer **pw)
{
	if (!pw || !*pw)
		return;
	rf_writer *w = *pw;
	*pw = NULL;
	remove_temps(w);
	writer_free(w);
}

static int
fsync_dir(rf_writer *w, const char *file)
{
	char *copy = strdup(file);
	if (!copy)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", file);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (fd >= 0) {
		if (fsync(fd) < 0 && errno != EINVAL)
			rc = rf_fail(&w->diag, -errno, "%s: fsync of its directory: %s", file,
				     rf_strerror(-errno));
		close(fd);
	}
	free(copy);
	return rc;
}

/* 1 when `path` is a file that starts with a shard's magic. */
static int
is_shard(const char *path)
{
	char head[RF_FMT_MAGIC_LEN];
	/* O_NONBLOCK: a pipe by that name must not block the open. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	ssize_t n = read(fd, head, sizeof head);
	close(fd);
	return n == (ssize_t)sizeof head && memcmp(head, RF_FMT_MAGIC, sizeof head) == 0;
}

/* Remove one leftover if it is a shard; returns 1 when the name was taken
 * (removed or not), 0 when there is nothing by that name. */
static int
remove_leftover(rf_writer *w, const char *path)
{
	if (access(path, F_OK) < 0)
		return 0;
	if (!is_shard(path))
		return 1;
	if (unlink(path) < 0) {
		int e = errno;
		rf_log(&w->diag, RF_LOG_WARN, "%s: a shard of an earlier write to %s could not be "
		       "removed (%s): a loader given its directory or a glob reads it too",
		       path, w->path, rf_strerror(-e));
	} else {
		rf_log(&w->diag, RF_LOG_INFO, "%s: removed, a shard of an earlier write to %s",
		       path, w->path);
	}
	return 1;
}

/*
 * The output replaces what an earlier write to the same path left, all of
 * it: a dataset once written in more shards (BASE-00007.rfs ...) or in the
 * other layout (PATH alone against BASE-NNNNN.rfs) would otherwise leave
 * shards that a loader given the directory reads as part of this dataset,
 * samples nobody asked for.  Only files that start with a shard's magic are
 * removed; numbered names are probed upwards until one is missing.
 */
static void
remove_leftovers(rf_writer *w)
{
	size_t len = strlen(w->path);
	int base = (int)(len >= 4 && strcmp(w->path + len - 4, ".rfs") == 0 ? len - 4 : len);
	if (w->sharded)
		remove_leftover(w, w->path);
	for (size_t i = w->sharded ? w->nshards : 0;; i++) {
		char *name = str_printf("%.*s-%05zu.rfs", base, w->path, i);
		int taken = name ? remove_leftover(w, name) : 0;
		free(name);
		if (!taken)
			break;
	}
}

static int
pwrite_all(rf_writer *w, int fd, const void *buf, size_t len, uint64_t off, const char *path)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			return rf_fail(&w->diag, -e, "%s: write at offset %llu: %s", path,
				       (unsigned long long)(off + done), rf_strerror(-e));
		}
		done += (size_t)r;
	}
	return 0;
}

/*
 * Format 3: the pack id is the XXH3-64 of the header (with a zero id) and of
 * every shard's size, sample count and index checksum (which covers every
 * chunk's checksum): the same content gives the same id, different content a
 * different one.  Written into every finished shard's header and footer (the
 * footer holds the header's checksum, and the pack's shard count), then each
 * shard is synced.
 */
static int
seal_pack(rf_writer *w)
{
	if (w->version < 3)
		return 0;
	uint64_t hsize = RF_FMT_HEADER_SIZE(w->schema.nfields);
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, w->header, (size_t)hsize);
	for (size_t i = 0; i < w->nshards; i++) {
		const struct wshard *s = &w->shards[i];
		uint8_t rec[24];
		rf_put_le64(rec, s->size);
		rf_put_le64(rec + 8, s->samples);
		rf_put_le64(rec + 16, s->index_xxh3);
		XXH3_64bits_update(st, rec, sizeof rec);
	}
	w->pack_id = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	if (w->pack_id == 0)
		w->pack_id = 1; /* 0 means "no pack id" */
	rf_put_le64(w->header + RF_FMT_PACK_ID_AT, w->pack_id);
	w->header_xxh3 = XXH3_64bits(w->header, (size_t)hsize - 8);
	rf_put_le64(w->header + hsize - 8, w->header_xxh3);
	for (size_t i = 0; i < w->nshards; i++) {
		struct wshard *s = &w->shards[i];
		uint8_t f[RF_FMT_FOOTER_SIZE] = {0};
		rf_put_le64(f + 0, s->index_offset);
		rf_put_le64(f + 8, s->nchunks);
		rf_put_le64(f + 16, s->samples);
		rf_put_le64(f + 24, s->index_xxh3);
		rf_put_le64(f + 32, w->header_xxh3);
		rf_put_le32(f + 40, w->version);
		rf_put_le32(f + 44, (uint32_t)w->nshards); /* <= 100000 */
		rf_put_le64(f + 48, XXH3_64bits(f, 48));
		memcpy(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN);
		s->footer_xxh3 = rf_le64(f + 48);
		int fd = open(s->tmp, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return rf_fail(&w->diag, -errno, "%s: cannot open: %s", s->tmp,
				       rf_strerror(-errno));
		int rc = pwrite_all(w, fd, w->header, (size_t)hsize, 0, s->tmp);
		if (rc == 0)
			rc = pwrite_all(w, fd, f, sizeof f, s->size - RF_FMT_FOOTER_SIZE, s->tmp);
		if (rc == 0 && !w->cfg.no_fsync && fsync(fd) < 0)
			rc = rf_fail(&w->diag, -errno, "%s: fsync: %s", s->tmp, rf_strerror(-errno));
		if (close(fd) < 0 && rc == 0)
			rc = rf_fail(&w->diag, -errno, "%s: close: %s", s->tmp, rf_strerror(-errno));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Format 3: write the manifest (manifest.h) to a temporary name, sync it and
 * rename it into place: the commit.  *committed is set once the rename is
 * done.  Older formats have no pack id to check a manifest against, so an
 * earlier pack's manifest is removed instead (a reader then lists the
 * directory, as before manifests).
 */
static int
commit_manifest(rf_writer *w, int *committed)
{
	char *mpath = rf_manifest_path_for(w->path);
	if (!mpath)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	int rc = 0;
	if (w->version < 3) {
		if (unlink(mpath) < 0 && errno != ENOENT)
			rc = rf_fail(&w->diag, -errno, "%s: cannot remove the manifest of an earlier "
				     "pack: %s", mpath, rf_strerror(-errno));
		free(mpath);
		return rc;
	}
	rf_manifest m = {w->pack_id, (long)getpid(), w->nshards, NULL};
	char *tmp = str_printf("%s.tmp.%ld", mpath, (long)getpid());
	char *text = NULL;
	size_t len = 0;
	int fd = -1;
	m.shards = calloc(w->nshards, sizeof *m.shards);
	if (!tmp || !m.shards) {
		rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", mpath);
		goto out;
	}
	for (size_t i = 0; i < w->nshards; i++) {
		const struct wshard *s = &w->shards[i];
		const char *slash = strrchr(s->final, '/');
		m.shards[i].name = (char *)(uintptr_t)(slash ? slash + 1 : s->final);
		m.shards[i].size = s->size;
		m.shards[i].samples = s->samples;
		m.shards[i].footer_xxh3 = s->footer_xxh3;
	}
	if (!(text = rf_manifest_format(&m, &len))) {
		rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", mpath);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: cannot create: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	for (size_t done = 0; done < len;) {
		ssize_t r = write(fd, text + done, len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			rc = rf_fail(&w->diag, -e, "%s: write: %s", tmp, rf_strerror(-e));
			goto out;
		}
		done += (size_t)r;
	}
	if (!w->cfg.no_fsync && fsync(fd) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: fsync: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	int cfd = fd;
	fd = -1;
	if (close(cfd) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: close: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	if (rename(tmp, mpath) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: rename to %s: %s (the earlier dataset is "
			     "unchanged)", tmp, mpath, rf_strerror(-errno));
		goto out;
	}
	*committed = 1;
	/* The commit must be on disk before any shard's rename is. */
	if (!w->cfg.no_fsync)
		rc = fsync_dir(w, mpath);
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && !*committed && tmp)
		unlink(tmp);
	free(text);
	free(m.shards);
	free(tmp);
	free(mpath);
	return rc;
}

RF_API int
rf_writer_close(rf_writer **pw)
{
	if (!pw || !*pw)
		return 0;
	rf_writer *w = *pw;
	*pw = NULL;
	last_error[0] = '\0';
	int rc = w->rc;
	if (rc == 0)
		rc = seal(w);
	while (rc == 0 && w->write_seq < w->next_seq)
		rc = drain_one(w);
	if (rc == 0)
		rc = shard_finish(w);
	/* Every shard is complete and synced before the manifest's rename,
	 * which commits the pack: a crash before it leaves the old dataset,
	 * after it the new one (readers take a shard not yet renamed from its
	 * temporary name, which the manifest gives). */
	int committed = 0;
	if (rc == 0)
		rc = seal_pack(w);
	if (rc == 0)
		rc = commit_manifest(w, &committed);
	size_t renamed = 0;
	for (; rc == 0 && renamed < w->nshards; renamed++) {
		struct wshard *s = &w->shards[renamed];
		if (rename(s->tmp, s->final) < 0) {
			int e = errno;
			if (committed)
				rc = rf_fail(&w->diag, -e, "%s: rename to %s: %s; the new pack is "
					     "complete (its manifest names it) and readers of the "
					     "manifest read this shard at its temporary name until the "
					     "next write to %s renames it", s->tmp, s->final,
					     rf_strerror(-e), w->path);
			else
				rc = rf_fail(&w->diag, -e, "%s: rename to %s: %s", s->tmp, s->final,
					     rf_strerror(-e));
			break;
		}
	}
	if (rc == 0)
		remove_leftovers(w);
	if (rc == 0 && !w->cfg.no_fsync)
		rc = fsync_dir(w, w->shards[0].final);
	if (rc < 0) {
		if (w->fd >= 0) {
			close(w->fd);
			w->fd = -1;
		}
		/* A committed pack's shards not renamed yet are the dataset. */
		for (size_t i = renamed; !committed && i < w->nshards; i++)
			unlink(w->shards[i].tmp);
		keep_error(&w->diag, rc);
	}
	writer_free(w);
	return rc;
}
