/* SPDX-License-Identifier: MIT */
/*
 * The remote reader (http.h): the handle, its settings and the files added
 * to it.  Without libcurl every call fails with -ENOTSUP and a URL with a
 * message; with it, reads are in http_transfer.c and the expansion of a
 * path to shards in http_list.c (http_impl.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/http.h"
#include "io/cache.h"
#include "io/s3.h"

int
rf_is_url(const char *path)
{
	return path && (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
			strncmp(path, "s3://", 5) == 0);
}

void
rf_http_config_init(rf_http_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->queue_depth = 32;
	cfg->retries = 6;
	cfg->backoff_ms = 100;
	cfg->stall_ms = 30000;
	cfg->connect_ms = 10000;
}

#ifndef RF_HAVE_CURL

int
rf_http_available(void)
{
	return 0;
}

int
rf_http_open(rf_http **out, const rf_http_config *cfg, rf_diag *diag)
{
	(void)cfg;
	*out = NULL;
	return rf_fail(diag, -ENOTSUP, "remote paths need libcurl: this ringfeed was built without it "
		       "(install libcurl4-openssl-dev and rebuild)");
}

void
rf_http_close(rf_http **h)
{
	if (h)
		*h = NULL;
}

void
rf_http_set_diag(rf_http *h, rf_diag *diag)
{
	(void)h, (void)diag;
}

int
rf_http_add_file(rf_http *h, const char *url, int *file)
{
	(void)h, (void)url, (void)file;
	return -ENOTSUP;
}

int
rf_http_read(rf_http *h, int file, uint64_t offset, void *buf, size_t len, uint64_t tag)
{
	(void)h, (void)file, (void)offset, (void)buf, (void)len, (void)tag;
	return -ENOTSUP;
}

int
rf_http_read_tail(rf_http *h, int file, void *buf, size_t len, uint64_t tag)
{
	(void)h, (void)file, (void)buf, (void)len, (void)tag;
	return -ENOTSUP;
}

void
rf_http_cache_file(rf_http *h, int file, uint64_t version)
{
	(void)h, (void)file, (void)version;
}

void
rf_http_cache_drop(rf_http *h, int file, uint64_t offset, size_t len)
{
	(void)h, (void)file, (void)offset, (void)len;
}

int
rf_http_read_error(rf_http *h, int file, uint64_t offset, char *buf, size_t cap)
{
	(void)h, (void)file, (void)offset, (void)buf, (void)cap;
	return 0;
}

int64_t
rf_http_read_now(rf_http *h, int file, uint64_t offset, void *buf, size_t len)
{
	(void)h, (void)file, (void)offset, (void)buf, (void)len;
	return -ENOTSUP;
}

void
rf_http_cache_stats(const rf_http *h, struct rf_cache_stats *out)
{
	(void)h;
	memset(out, 0, sizeof *out);
}

int
rf_http_submit(rf_http *h)
{
	(void)h;
	return -ENOTSUP;
}

int
rf_http_wait(rf_http *h, rf_io_done *done, unsigned max, unsigned min)
{
	(void)h, (void)done, (void)max, (void)min;
	return -ENOTSUP;
}

unsigned
rf_http_inflight(const rf_http *h)
{
	(void)h;
	return 0;
}

int
rf_http_file_size(const rf_http *h, int file, uint64_t *size)
{
	(void)h, (void)file, (void)size;
	return -ENOTSUP;
}

const char *
rf_http_file_name(const rf_http *h, int file)
{
	(void)h, (void)file;
	return "";
}

int
rf_http_pread(rf_http *h, int file, void *buf, size_t len, uint64_t offset, size_t *got)
{
	(void)h, (void)file, (void)buf, (void)len, (void)offset, (void)got;
	return -ENOTSUP;
}

int
rf_http_expand(rf_http *h, const char *path, rf_http_add_fn add, void *arg)
{
	(void)h, (void)path, (void)add, (void)arg;
	return -ENOTSUP;
}

#else /* RF_HAVE_CURL */

#include <pthread.h>

#include "io/http_impl.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int
rf_http_available(void)
{
	return 1;
}

int64_t
rf_http_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

unsigned
rf_http_env_uint(const char *name, unsigned def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > 1000000000ul)
		return def;
	return (unsigned)v;
}

int
rf_http_open(rf_http **out, const rf_http_config *cfg, rf_diag *diag)
{
	*out = NULL;
	rf_http_config def;
	if (!cfg) {
		rf_http_config_init(&def);
		cfg = &def;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return rf_fail(diag, -EIO, "http: curl_global_init failed: %s",
			       curl_easy_strerror(curl_init_rc));
	rf_http *h = calloc(1, sizeof *h);
	if (!h)
		return rf_fail(diag, -ENOMEM, "http: out of memory");
	pthread_mutex_init(&h->fail_mu, NULL);
	h->diag = diag;
	h->qd = cfg->queue_depth ? cfg->queue_depth : 32;
	if (h->qd > RF_HTTP_MAX_DEPTH)
		h->qd = RF_HTTP_MAX_DEPTH;
	h->retries = rf_http_env_uint("RINGFEED_HTTP_RETRIES", cfg->retries);
	h->backoff_ms = rf_http_env_uint("RINGFEED_HTTP_BACKOFF_MS", cfg->backoff_ms ? cfg->backoff_ms : 100);
	h->stall_ms = rf_http_env_uint("RINGFEED_HTTP_STALL_MS", cfg->stall_ms ? cfg->stall_ms : 30000);
	h->connect_ms = rf_http_env_uint("RINGFEED_HTTP_CONNECT_MS", cfg->connect_ms ? cfg->connect_ms : 10000);
	const char *ca = cfg->ca_bundle;
	if (!ca || !*ca)
		ca = getenv("RINGFEED_CA_BUNDLE");
	if (!ca || !*ca)
		ca = getenv("CURL_CA_BUNDLE");
	if (!ca || !*ca)
		ca = getenv("AWS_CA_BUNDLE");
	if (ca && *ca && !(h->ca_bundle = strdup(ca)))
		goto nomem;
	if (cfg->cache_dir && *cfg->cache_dir) {
		int rc = rf_cache_open(&h->cache, cfg->cache_dir,
				       cfg->cache_bytes ? cfg->cache_bytes : RF_HTTP_CACHE_DEFAULT, diag);
		if (rc < 0) {
			rf_http_close(&h);
			return rc;
		}
	}
	h->rng = (uint64_t)rf_http_now_ns() ^ (uint64_t)(uintptr_t)h;
	h->reqs = calloc(h->qd, sizeof *h->reqs);
	h->free_stack = calloc(h->qd, sizeof *h->free_stack);
	h->ready = calloc(h->qd, sizeof *h->ready);
	if (!h->reqs || !h->free_stack || !h->ready)
		goto nomem;
	for (unsigned i = 0; i < h->qd; i++) {
		h->free_stack[i] = h->qd - 1 - i;
		if (!(h->reqs[i].easy = curl_easy_init()))
			goto nomem;
	}
	h->nfree = h->qd;
	if (!(h->multi = curl_multi_init()))
		goto nomem;
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->qd);
	curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	*out = h;
	return 0;
nomem:
	rf_http_close(&h);
	return rf_fail(diag, -ENOMEM, "http: out of memory");
}

void
rf_http_close(rf_http **hp)
{
	if (!hp || !*hp)
		return;
	rf_http *h = *hp;
	*hp = NULL;
	for (unsigned i = 0; h->reqs && i < h->qd; i++) {
		struct rf_http_req *r = &h->reqs[i];
		/* Removing a transfer stops it: no write lands in the caller's
		 * memory after this returns. */
		if (r->state == SLOT_ACTIVE)
			curl_multi_remove_handle(h->multi, r->easy);
		if (r->easy)
			curl_easy_cleanup(r->easy);
		curl_slist_free_all(r->hdrs);
	}
	if (h->multi)
		curl_multi_cleanup(h->multi);
	for (unsigned i = 0; i < h->nfiles; i++) {
		free(h->files[i].name);
		free(h->files[i].url);
	}
	if (h->s3_ok)
		rf_s3_free(&h->s3);
	free(h->files);
	free(h->reqs);
	free(h->free_stack);
	free(h->ready);
	free(h->ca_bundle);
	rf_cache_close(&h->cache);
	pthread_mutex_destroy(&h->fail_mu);
	free(h);
}

void
rf_http_set_diag(rf_http *h, rf_diag *diag)
{
	if (h) {
		h->diag = diag;
		rf_cache_set_diag(h->cache, diag);
	}
}

int
rf_http_s3_setup(rf_http *h)
{
	if (h->s3_ok)
		return 0;
	int rc = rf_s3_init(&h->s3, h->diag);
	if (rc < 0) {
		rf_s3_free(&h->s3);
		return rc;
	}
	h->s3_ok = 1;
	return 0;
}

/* The URL to request for `name`, and whether to sign it. */
int
rf_http_resolve(rf_http *h, const char *name, char **url, int *s3)
{
	*url = NULL;
	*s3 = 0;
	if (strncmp(name, "s3://", 5) != 0) {
		if (!(*url = strdup(name)))
			return rf_fail(h->diag, -ENOMEM, "http: out of memory");
		return 0;
	}
	int rc = rf_http_s3_setup(h);
	if (rc < 0)
		return rc;
	char *bucket, *key;
	if ((rc = rf_s3_split(name, &bucket, &key, h->diag)) < 0)
		return rc;
	*url = rf_s3_url(&h->s3, bucket, key, NULL);
	free(bucket);
	free(key);
	if (!*url)
		return rf_fail(h->diag, -ENOMEM, "http: out of memory");
	*s3 = h->s3.access != NULL;
	return 0;
}

int
rf_http_add_file(rf_http *h, const char *name, int *file)
{
	if (!rf_is_url(name))
		return rf_fail(h->diag, RF_EUSAGE, "%s: not an http://, https:// or s3:// URL", name);
	if (h->nfiles == h->files_cap) {
		unsigned cap = h->files_cap ? h->files_cap * 2 : 16;
		struct rf_http_file *nf = realloc(h->files, cap * sizeof *nf);
		if (!nf)
			return rf_fail(h->diag, -ENOMEM, "http: out of memory");
		h->files = nf;
		h->files_cap = cap;
	}
	struct rf_http_file *f = &h->files[h->nfiles];
	memset(f, 0, sizeof *f);
	f->size = UINT64_MAX;
	int rc = rf_http_resolve(h, name, &f->url, &f->s3);
	if (rc < 0)
		return rc;
	if (!(f->name = strdup(name))) {
		free(f->url);
		return rf_fail(h->diag, -ENOMEM, "http: out of memory");
	}
	*file = (int)h->nfiles++;
	return 0;
}

void
rf_http_cache_file(rf_http *h, int file, uint64_t version)
{
	if (h && h->cache && file >= 0 && (unsigned)file < h->nfiles) {
		h->files[file].cached = 1;
		h->files[file].version = version;
	}
}

void
rf_http_cache_drop(rf_http *h, int file, uint64_t offset, size_t len)
{
	if (h && h->cache && file >= 0 && (unsigned)file < h->nfiles && h->files[file].cached &&
	    len >= RF_CACHE_MIN_READ)
		rf_cache_drop(h->cache, h->files[file].name, h->files[file].version, offset, len);
}

void
rf_http_cache_stats(const rf_http *h, struct rf_cache_stats *out)
{
	rf_cache_stats(h ? h->cache : NULL, out);
}

int
rf_http_file_size(const rf_http *h, int file, uint64_t *size)
{
	if (file < 0 || (unsigned)file >= h->nfiles)
		return -EBADF;
	if (h->files[file].size == UINT64_MAX)
		return -ENODATA;
	*size = h->files[file].size;
	return 0;
}

const char *
rf_http_file_name(const rf_http *h, int file)
{
	return file >= 0 && (unsigned)file < h->nfiles ? h->files[file].name : "";
}

#endif /* RF_HAVE_CURL */
