/* SPDX-License-Identifier: MIT */
/*
 * The random-access reader: rf_dataset_open validates every shard's footer,
 * header and index (docs/format.md, "What a reader checks") and builds one
 * dataset-wide chunk table; rf_dataset_read decodes chunks with pread on a
 * buffered descriptor, keeping the last one.  The streaming loader reads
 * chunks itself and uses only the table (format.h).
 *
 * Nothing is allocated from a size read in a file before that size has been
 * bounded by the file's real size (index) or the format's limits (chunks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "format/reader_impl.h"

static _Thread_local char last_open_error[RF_ERRMSG_MAX];

RF_API const char *
rf_dataset_last_open_error(void)
{
	return last_open_error;
}

RF_API void
rf_dataset_config_init(rf_dataset_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->verify = 1;
}

RF_API const char *
rf_dataset_errmsg(const rf_dataset *ds)
{
	return ds ? ds->diag.msg : "";
}

/* ------------------------------------------------------------- paths */

RF_API int
rf_dataset_open(rf_dataset **out, const char *const *paths, size_t npaths,
		const rf_dataset_config *cfg)
{
	rf_diag d;
	/* No logger until the config is known to be one (its size checked). */
	rf_diag_init(&d, NULL, NULL);
	last_open_error[0] = '\0';
	int rc;
	rf_dataset *ds = NULL;
	struct pathlist pl = {0};
	rf_http *http = NULL;
	if (!out) {
		rc = rf_fail(&d, -EINVAL, "rf_dataset_open: out is NULL");
		goto fail;
	}
	*out = NULL;
	if (cfg) {
		if ((rc = RF_CONFIG_SIZE_CHECK(&d, "rf_dataset_open", cfg, "rf_dataset_config_init")) < 0)
			goto fail;
		d.log = cfg->log;
		d.log_user = cfg->log_user;
	}
	if (!paths || npaths == 0) {
		rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: no path given");
		goto fail;
	}
	for (size_t i = 0; i < npaths; i++) {
		if (!paths[i]) {
			rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: path %zu is NULL", i);
			goto fail;
		}
		if (rf_is_url(paths[i])) {
			if ((!http && (rc = rf_http_open(&http, NULL, &d)) < 0) ||
			    (rc = rf_http_expand(http, paths[i], rf_rd_pl_add_url, &pl)) < 0)
				goto fail;
			continue;
		}
		if ((rc = rf_rd_expand(&pl, paths[i], &d)) < 0)
			goto fail;
	}
	if (pl.n > UINT32_MAX) {
		rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: %zu shards, at most 2^32 - 1", pl.n);
		goto fail;
	}
	ds = calloc(1, sizeof *ds);
	if (!ds || !(ds->shards = calloc(pl.n, sizeof *ds->shards))) {
		rc = rf_fail(&d, -ENOMEM, "rf_dataset_open: out of memory");
		goto fail;
	}
	ds->cached = UINT64_MAX;
	ds->verify = cfg ? cfg->verify != 0 : 1;
	ds->http = http;
	http = NULL;
	for (size_t i = 0; i < pl.n; i++) {
		ds->shards[i].fd = -1;
		ds->shards[i].hfile = -1;
		ds->shards[i].path = pl.v[i];
		pl.v[i] = NULL;
	}
	ds->nshards = pl.n;
	for (size_t i = 0; ds->http && i < ds->nshards; i++) {
		struct shard *sh = &ds->shards[i];
		if (rf_is_url(sh->path)) {
			sh->http = ds->http;
			if ((rc = rf_http_add_file(ds->http, sh->path, &sh->hfile)) < 0)
				goto fail;
		}
	}

	if ((rc = rf_fd_reserve(ds->nshards, "rf_dataset_open", &d)) < 0)
		goto fail;
	uint64_t cap = 0;
	for (size_t i = 0, fetched = 0; i < ds->nshards; i++) {
		struct shard *sh = &ds->shards[i];
		uint64_t before = ds->nchunks;
		if (ds->http && i == fetched) {
			fetched = ds->nshards - i < RF_REMOTE_WINDOW ? ds->nshards : i + RF_REMOTE_WINDOW;
			if ((rc = rf_rd_remote_prefetch(ds, i, fetched, &d)) < 0)
				goto fail;
		}
		rc = rf_rd_shard_load(sh, &ds->schema, i > 0, &ds->chunks, &ds->nchunks, &cap,
				      (uint32_t)i, &d);
		if (rc == -ENOENT && pl.ex[i].final) {
			/* Renamed by its writer since the manifest was read. */
			if (sh->fd >= 0)
				close(sh->fd);
			sh->fd = -1;
			free(sh->path);
			sh->path = pl.ex[i].final;
			pl.ex[i].final = NULL;
			rc = rf_rd_shard_load(sh, &ds->schema, i > 0, &ds->chunks, &ds->nchunks, &cap,
					      (uint32_t)i, &d);
		}
		/* Later reads are chunks and index entries: ranged GETs. */
		free(sh->head);
		free(sh->tail);
		sh->head = sh->tail = NULL;
		sh->head_len = sh->tail_len = 0;
		if (rc < 0)
			goto fail;
		sh->first_chunk = before;
		sh->first_sample = ds->nsamples;
		if (rf_add_u64(ds->nsamples, sh->nsamples, &ds->nsamples) < 0) {
			rc = rf_fail(&d, RF_ECORRUPT, "%s: the dataset holds more than 2^64 samples",
				     sh->path);
			goto fail;
		}
		for (uint64_t c = before; c < ds->nchunks; c++) {
			rf_chunk_info *ci = &ds->chunks[c];
			ci->first_sample += sh->first_sample;
			if (ci->raw_bytes > ds->max_raw)
				ds->max_raw = ci->raw_bytes;
			uint64_t span = RF_ALIGN_UP(ci->stored_bytes, RF_FMT_ALIGN);
			if (span > ds->max_span)
				ds->max_span = span;
		}
	}
	if ((rc = rf_rd_check_packs(ds, &pl, &d)) < 0)
		goto fail;
	ds->diag = d;
	ds->diag.msg[0] = '\0';
	if (ds->http)
		rf_http_set_diag(ds->http, &ds->diag);
	rf_rd_pl_free(&pl);
	*out = ds;
	return 0;
fail:
	snprintf(last_open_error, sizeof last_open_error, "%s", d.msg);
	rf_rd_pl_free(&pl);
	rf_http_close(&http);
	rf_dataset_close(&ds);
	return rc;
}

void
rf_dataset_close_files(rf_dataset *ds)
{
	for (size_t i = 0; i < ds->nshards; i++) {
		if (ds->shards[i].fd >= 0)
			close(ds->shards[i].fd);
		ds->shards[i].fd = -1;
	}
}

RF_API void
rf_dataset_close(rf_dataset **pds)
{
	if (!pds || !*pds)
		return;
	rf_dataset *ds = *pds;
	*pds = NULL;
	if (ds->shards)
		rf_dataset_close_files(ds);
	rf_http_close(&ds->http);
	for (size_t i = 0; ds->shards && i < ds->nshards; i++) {
		free(ds->shards[i].path);
		free(ds->shards[i].head);
		free(ds->shards[i].tail);
	}
	free(ds->shards);
	free(ds->chunks);
	free(ds->stored);
	free(ds->raw);
	ZSTD_freeDCtx(ds->dctx);
	free(ds);
}
