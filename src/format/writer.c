/* SPDX-License-Identifier: MIT */
/*
 * The shard writer: one forward pass per shard (header, chunks, index,
 * footer) into PATH.tmp.PID, renamed to PATH only at rf_writer_close.
 *
 * This file is the public API: the config, open, adding samples (checked
 * whole before any is taken, then cut into chunk jobs), abort and close.
 * The parts it drives are listed in writer_impl.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "format/format.h"
#include "format/writer_impl.h"

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
	cfg->chunk_bytes = 0; /* chosen by the samples' size (writer_impl.h) */
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
	w->target = w->cfg.chunk_bytes;
	if (w->target == 0) {
		w->target = DEFAULT_CHUNK_BYTES;
		if (!w->has_var && w->fixed_sample_bytes > DEFAULT_CHUNK_BYTES / AUTO_CHUNK_SAMPLES)
			w->target = w->fixed_sample_bytes > AUTO_CHUNK_MAX_BYTES / AUTO_CHUNK_SAMPLES
					    ? AUTO_CHUNK_MAX_BYTES
					    : w->fixed_sample_bytes * AUTO_CHUNK_SAMPLES;
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
			if (rf_wr_grow((void **)&w->jobs[i].col[k].off, &w->jobs[i].col[k].off_cap, 1024, 8) < 0)
				goto fail_nomem;
			w->jobs[i].col[k].off[0] = 0;
		}
	}
	w->header_xxh3 = rf_fmt_encode_header(schema, w->version, w->header);
	rf_wr_recover_output(w);
	if (want) {
		w->threads = calloc(want, sizeof *w->threads);
		if (!w->threads)
			goto fail_nomem;
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv_work, NULL);
		pthread_cond_init(&w->cv_done, NULL);
		unsigned started = 0;
		for (; started < want; started++)
			if (pthread_create(&w->threads[started], NULL, rf_wr_worker_main, w) != 0)
				break;
		w->nthreads = started;
		if (started == 0) {
			/* Without a single worker, encode on this thread. */
			pthread_mutex_destroy(&w->mu);
			pthread_cond_destroy(&w->cv_work);
			pthread_cond_destroy(&w->cv_done);
		}
	}
	if (zstd && !w->nthreads && !(w->cctx = rf_wr_make_cctx(cfg->zstd_level)))
		goto fail_nomem;
	rc = rf_wr_shard_open(w);
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
			if (rf_wr_grow((void **)&c->off, &c->off_cap, j->n + m + 1, 8) < 0)
				return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
			uint64_t *dst = c->off + j->n + 1;
			uint64_t base = c->len - (uint64_t)o[i];
			for (uint64_t s = 0; s < m; s++)
				dst[s] = base + (uint64_t)o[i + s + 1];
			src = (const uint8_t *)cols[k].data + o[i];
			bytes = (uint64_t)(o[i + m] - o[i]);
		}
		if (rf_wr_grow((void **)&c->buf, &c->cap, c->len + bytes, 1) < 0)
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
		if (rc == 0 && rf_wr_grow((void **)&c->off, &c->off_cap, m + 1, 8) < 0)
			rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
		if (rc == 0)
			for (uint64_t s = 0; s <= m; s++)
				c->off[s] = (uint64_t)(o[i + s] - o[i]);
		c->buf = (uint8_t *)(uintptr_t)cols[k].data + o[i];
		c->len = (uint64_t)(o[i + m] - o[i]);
	}
	j->n = m;
	if (rc == 0)
		rc = rf_wr_seal(w);
	/* rf_wr_seal() wrote the job and reset it; give the buffers back. */
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
	uint64_t target = w->target;
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
		while (m > 1 && rf_wr_job_raw_size(w, j, j->n + m - 1, NULL) >= target)
			m--;
		while (m < avail && rf_wr_job_raw_size(w, j, j->n + m, NULL) < target)
			m++;
		while (m > 0 && rf_wr_job_raw_size(w, j, j->n + m, NULL) > RF_FMT_MAX_RAW)
			m--;
		if (m == 0 && j->n == 0)
			*too_big = 1;
		if (m == 0 || rf_wr_job_raw_size(w, j, j->n + m, NULL) >= target || m == room)
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
		uint64_t raw = rf_wr_job_raw_size(w, j, j->n + m + 1, extra);
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
		if ((rc = rf_wr_cur_job(w, &j)) < 0)
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
		if (full && (rc = rf_wr_seal(w)) < 0)
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
		cols[k].data = values[k].data ? values[k].data : rf_wr_zeros;
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
		rc = rf_wr_seal(w);
	while (rc == 0 && w->write_seq < w->next_seq)
		rc = rf_wr_drain_one(w);
	if (rc == 0)
		rc = rf_wr_shard_finish(w);
	/* Every shard is complete and synced before the manifest's rename,
	 * which commits the pack: a crash before it leaves the old dataset,
	 * after it the new one (readers take a shard not yet renamed from its
	 * temporary name, which the manifest gives). */
	int committed = 0;
	if (rc == 0)
		rc = rf_wr_seal_pack(w);
	if (rc == 0)
		rc = rf_wr_commit_manifest(w, &committed);
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
		rf_wr_remove_leftovers(w);
	if (rc == 0 && !w->cfg.no_fsync)
		rc = rf_wr_fsync_dir(w, w->shards[0].final);
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
