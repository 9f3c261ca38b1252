/* SPDX-License-Identifier: MIT */
/*
 * The remote reader (http.h): ranged GETs with libcurl's multi interface.
 *
 * Each request slot owns one easy handle, reused for every attempt of every
 * read it carries; connections live in the multi handle's pool, so they are
 * kept alive across reads (and multiplexed with HTTP/2).  A body is written
 * straight into the caller's buffer by write_body, which refuses a byte
 * beyond what was asked: the buffer belongs to the caller and the bytes
 * after it to someone else.
 *
 * A read's life: queued (PENDING) -> handed to curl (ACTIVE) -> either
 * complete (its one entry in ready[]) or, after a transient fault, waiting
 * for its backoff (BACKOFF) and back to PENDING for the missing part only.
 * A slot goes back to the free stack when its read completes, so a read can
 * be reported once and only once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/http.h"
#include "io/s3.h"
#include "xxh.h"

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
rf_http_expand(rf_http *h, const char *path, int (*add)(void *arg, const char *url), void *arg)
{
	(void)h, (void)path, (void)add, (void)arg;
	return -ENOTSUP;
}

#else /* RF_HAVE_CURL */

#include <curl/curl.h>
#include <pthread.h>

#define RF_HTTP_MAX_DEPTH 1024
#define RF_HTTP_ERRBODY 2048        /* bytes of an error body kept */
#define RF_HTTP_BACKOFF_CAP_MS 10000
#define RF_HTTP_SMALL_MAX (64u << 20) /* largest manifest or listing page */

enum { SLOT_FREE, SLOT_PENDING, SLOT_ACTIVE, SLOT_BACKOFF };

struct rf_http_file {
	char *name;      /* as added */
	char *url;       /* as requested */
	int s3;          /* sign with SigV4 */
	uint64_t size;   /* UINT64_MAX until a response says it */
};

struct rf_http_req {
	CURL *easy;
	struct curl_slist *hdrs;
	int state;
	uint64_t tag;
	int file;
	int suffix;          /* a tail read whose offset is not known yet */
	uint64_t offset;     /* of the whole read */
	char *buf;
	size_t len;          /* asked */
	size_t done;         /* bytes in the buffer, for good */
	size_t attempt_from; /* done when this attempt started */
	unsigned fails;      /* consecutive failed attempts without progress */
	int64_t due_ns;      /* BACKOFF: when to try again */
	int64_t last_ns;     /* last byte (or start) of this attempt */
	unsigned stall_ms;   /* the handle's stall limit, for on_progress */
	/* This attempt's response. */
	long status;
	int have_range;
	uint64_t r_first, r_last, r_total; /* Content-Range; r_total UINT64_MAX: "*" */
	int too_long, bad_range, no_range, stalled;
	char err[RF_HTTP_ERRBODY];
	size_t errlen;
	char reason[64];     /* the status line's reason phrase ("Not Found") */
	char range[64];
	char label[96];
};

struct rf_http {
	rf_diag *diag;
	unsigned qd, retries, backoff_ms, stall_ms, connect_ms;
	char *ca_bundle;
	CURLM *multi;
	struct rf_s3 s3;
	int s3_ok;
	struct rf_http_file *files;
	unsigned nfiles, files_cap;
	struct rf_http_req *reqs;
	unsigned *free_stack;
	unsigned nfree;
	rf_io_done *ready;
	unsigned ready_head, ready_count;
	unsigned outstanding;
	unsigned nactive;
	uint64_t rng;
};

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

static int64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned
env_uint(const char *name, unsigned def)
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
	h->diag = diag;
	h->qd = cfg->queue_depth ? cfg->queue_depth : 32;
	if (h->qd > RF_HTTP_MAX_DEPTH)
		h->qd = RF_HTTP_MAX_DEPTH;
	h->retries = env_uint("RINGFEED_HTTP_RETRIES", cfg->retries);
	h->backoff_ms = env_uint("RINGFEED_HTTP_BACKOFF_MS", cfg->backoff_ms ? cfg->backoff_ms : 100);
	h->stall_ms = env_uint("RINGFEED_HTTP_STALL_MS", cfg->stall_ms ? cfg->stall_ms : 30000);
	h->connect_ms = env_uint("RINGFEED_HTTP_CONNECT_MS", cfg->connect_ms ? cfg->connect_ms : 10000);
	const char *ca = cfg->ca_bundle;
	if (!ca || !*ca)
		ca = getenv("RINGFEED_CA_BUNDLE");
	if (!ca || !*ca)
		ca = getenv("CURL_CA_BUNDLE");
	if (!ca || !*ca)
		ca = getenv("AWS_CA_BUNDLE");
	if (ca && *ca && !(h->ca_bundle = strdup(ca)))
		goto nomem;
	h->rng = (uint64_t)now_ns() ^ (uint64_t)(uintptr_t)h;
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
	free(h);
}

void
rf_http_set_diag(rf_http *h, rf_diag *diag)
{
	if (h)
		h->diag = diag;
}

static int
s3_setup(rf_http *h)
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
static int
resolve(rf_http *h, const char *name, char **url, int *s3)
{
	*url = NULL;
	*s3 = 0;
	if (strncmp(name, "s3://", 5) != 0) {
		if (!(*url = strdup(name)))
			return rf_fail(h->diag, -ENOMEM, "http: out of memory");
		return 0;
	}
	int rc = s3_setup(h);
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
	int rc = resolve(h, name, &f->url, &f->s3);
	if (rc < 0)
		return rc;
	if (!(f->name = strdup(name))) {
		free(f->url);
		return rf_fail(h->diag, -ENOMEM, "http: out of memory");
	}
	*file = (int)h->nfiles++;
	return 0;
}

/* ------------------------------------------------------------ callbacks */

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct rf_http_req *r = arg;
	size_t len = size * n;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* A new response (after a 100 Continue or a redirect):
		 * forget the last one's headers. */
		r->have_range = 0;
		/* "HTTP/1.1 404 Not Found": keep the phrase for messages
		 * (HTTP/2 has none). */
		const char *sp = memchr(p, ' ', len);
		sp = sp ? memchr(sp + 1, ' ', len - (size_t)(sp + 1 - p)) : NULL;
		size_t m = 0;
		if (sp) {
			sp++;
			while (sp + m < p + len && m < sizeof r->reason - 1 && sp[m] != '\r' &&
			       sp[m] != '\n')
				m++;
			memcpy(r->reason, sp, m);
		}
		r->reason[m] = '\0';
		return len;
	}
	if (len > 14 && strncasecmp(p, "content-range:", 14) == 0) {
		char tmp[128];
		size_t m = len - 14 < sizeof tmp - 1 ? len - 14 : sizeof tmp - 1;
		memcpy(tmp, p + 14, m);
		tmp[m] = '\0';
		unsigned long long a, b, t;
		char star;
		if (sscanf(tmp, " bytes %llu-%llu/%llu", &a, &b, &t) == 3 && a <= b) {
			r->r_first = a;
			r->r_last = b;
			r->r_total = t;
			r->have_range = 1;
		} else if (sscanf(tmp, " bytes %llu-%llu/%c", &a, &b, &star) == 3 && star == '*' &&
			   a <= b) {
			r->r_first = a;
			r->r_last = b;
			r->r_total = UINT64_MAX;
			r->have_range = 1;
		} else if (sscanf(tmp, " bytes */%llu", &t) == 1) {
			/* 416's form: the size alone. */
			r->r_first = r->r_last = UINT64_MAX;
			r->r_total = t;
			r->have_range = 2;
		}
	}
	return len;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct rf_http_req *r = arg;
	size_t len = size * n;
	if (r->status == 0)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	r->last_ns = now_ns();
	if (r->status != 200 && r->status != 206) {
		/* An error body: keep its start for the message. */
		size_t room = sizeof r->err - 1 - r->errlen;
		size_t m = len < room ? len : room;
		memcpy(r->err + r->errlen, p, m);
		r->errlen += m;
		r->err[r->errlen] = '\0';
		return len;
	}
	if (r->status == 206) {
		if (r->have_range != 1) {
			r->bad_range = 1;
			return 0;
		}
		if (r->suffix) {
			/* A tail read's first bytes say where it lies: from
			 * here on it is an ordinary range, so a retry asks for
			 * the missing part at its place. */
			if (r->r_total == UINT64_MAX) {
				r->bad_range = 1;
				return 0;
			}
			r->offset = r->r_first;
			if (r->r_total - r->r_first < r->len)
				r->len = (size_t)(r->r_total - r->r_first);
			r->suffix = 0;
		}
		if (r->r_first != r->offset + r->attempt_from) {
			r->bad_range = 1;
			return 0;
		}
		/* More than the Content-Range announced is as wrong as more
		 * than asked, even where the buffer has room (a read across
		 * the end of the object). */
		uint64_t rlen = r->r_last - r->r_first + 1, got = r->done - r->attempt_from;
		if (len > rlen - got) {
			r->too_long = 1;
			return 0;
		}
	} else if (r->offset + r->attempt_from != 0 || r->suffix) {
		/* 200 to a range request not from 0: the whole object is
		 * coming, and none of it where we asked. */
		r->no_range = 1;
		return 0;
	}
	if (len > r->len - r->done) {
		/* 200 and more than asked: the server ignores Range. */
		if (r->status == 200)
			r->no_range = 1;
		else
			r->too_long = 1;
		return 0;
	}
	memcpy(r->buf + r->done, p, len);
	r->done += len;
	return len;
}

static int
on_progress(void *arg, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
	(void)dlt, (void)dln, (void)ult, (void)uln;
	struct rf_http_req *r = arg;
	if (now_ns() - r->last_ns > (int64_t)r->stall_ms * 1000000) {
		r->stalled = 1;
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------- requests */

static int
start(rf_http *h, unsigned idx)
{
	struct rf_http_req *r = &h->reqs[idx];
	const struct rf_http_file *f = &h->files[r->file];
	CURL *e = r->easy;
	curl_easy_reset(e);
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	r->status = 0;
	r->have_range = 0;
	r->too_long = r->bad_range = r->no_range = r->stalled = 0;
	r->errlen = 0;
	r->err[0] = '\0';
	r->reason[0] = '\0';
	r->attempt_from = r->done;
	r->last_ns = now_ns();
	r->stall_ms = h->stall_ms;
	if (r->suffix)
		snprintf(r->range, sizeof r->range, "-%zu", r->len);
	else
		snprintf(r->range, sizeof r->range, "%" PRIu64 "-%" PRIu64, r->offset + r->done,
			 r->offset + r->len - 1);
	curl_easy_setopt(e, CURLOPT_URL, f->url);
	curl_easy_setopt(e, CURLOPT_RANGE, r->range);
	curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, (void *)r);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->connect_ms);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	/* The body is a byte range of a file: a server's compression would
	 * make the ranges mean something else. */
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "ringfeed");
	if (h->ca_bundle)
		curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_bundle);
	if (f->s3) {
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, h->s3.sigv4);
		curl_easy_setopt(e, CURLOPT_USERPWD, h->s3.userpwd);
		r->hdrs = curl_slist_append(r->hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
		if (h->s3.token) {
			char *t = NULL;
			if (asprintf(&t, "x-amz-security-token: %s", h->s3.token) >= 0) {
				struct curl_slist *l = curl_slist_append(r->hdrs, t);
				if (l)
					r->hdrs = l;
				free(t);
			}
		}
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	}
	CURLMcode mc = curl_multi_add_handle(h->multi, e);
	if (mc != CURLM_OK)
		return rf_fail(h->diag, -EIO, "http: cannot start a request: %s",
			       curl_multi_strerror(mc));
	r->state = SLOT_ACTIVE;
	h->nactive++;
	return 0;
}

static void
complete(rf_http *h, unsigned idx, int64_t res)
{
	struct rf_http_req *r = &h->reqs[idx];
	rf_io_done *d = &h->ready[(h->ready_head + h->ready_count) % h->qd];
	d->tag = r->tag;
	d->res = res;
	h->ready_count++;
	r->state = SLOT_FREE;
	h->free_stack[h->nfree++] = idx;
}

static int
queue(rf_http *h, int file, int suffix, uint64_t offset, void *buf, size_t len, uint64_t tag)
{
	if (RF_UNLIKELY(file < 0 || (unsigned)file >= h->nfiles))
		return rf_fail(h->diag, -EBADF, "http: read of unknown file handle %d", file);
	if (RF_UNLIKELY(!buf || len == 0))
		return rf_fail(h->diag, -EINVAL, "http: empty read of %s", h->files[file].name);
	if (RF_UNLIKELY(offset > UINT64_MAX - len))
		return rf_fail(h->diag, -EINVAL, "http: read of %s: offset %" PRIu64 " + %zu overflows",
			       h->files[file].name, offset, len);
	if (h->outstanding >= h->qd)
		return -EAGAIN;
	unsigned idx = h->free_stack[--h->nfree];
	struct rf_http_req *r = &h->reqs[idx];
	r->tag = tag;
	r->file = file;
	r->suffix = suffix;
	r->offset = offset;
	r->buf = buf;
	r->len = len;
	r->done = 0;
	r->fails = 0;
	r->state = SLOT_PENDING;
	h->outstanding++;
	return 0;
}

int
rf_http_read(rf_http *h, int file, uint64_t offset, void *buf, size_t len, uint64_t tag)
{
	return queue(h, file, 0, offset, buf, len, tag);
}

int
rf_http_read_tail(rf_http *h, int file, void *buf, size_t len, uint64_t tag)
{
	return queue(h, file, 1, 0, buf, len, tag);
}

int
rf_http_submit(rf_http *h)
{
	int64_t now = 0;
	for (unsigned i = 0; i < h->qd; i++) {
		struct rf_http_req *r = &h->reqs[i];
		if (r->state == SLOT_BACKOFF) {
			if (!now)
				now = now_ns();
			if (r->due_ns <= now)
				r->state = SLOT_PENDING;
		}
		if (r->state == SLOT_PENDING) {
			int rc = start(h, i);
			if (rc < 0)
				return rc;
		}
	}
	int running;
	curl_multi_perform(h->multi, &running);
	return 0;
}

static int
transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
		return 1;
	default:
		return 0;
	}
}

static const char *
file_label(const rf_http *h, const struct rf_http_req *r)
{
	return h->files[r->file].name;
}

/* "bytes A-B", or for a tail read "the last N bytes", for messages. */
static const char *
range_label(struct rf_http_req *r)
{
	if (r->range[0] == '-')
		snprintf(r->label, sizeof r->label, "the last %s bytes", r->range + 1);
	else
		snprintf(r->label, sizeof r->label, "bytes %s", r->range);
	return r->label;
}

/* The server's error code and message from an error body (S3's XML), or
 * its first line. */
static void
describe_body(const struct rf_http_req *r, char *out, size_t cap)
{
	out[0] = '\0';
	if (!r->errlen) {
		if (r->reason[0])
			snprintf(out, cap, " %s", r->reason);
		return;
	}
	char *code = rf_xml_text(r->err, r->errlen, "Code");
	char *msg = rf_xml_text(r->err, r->errlen, "Message");
	if (code)
		snprintf(out, cap, " %s%s%s", code, msg ? ": " : "", msg ? msg : "");
	free(code);
	free(msg);
	if (out[0])
		return;
	/* Not XML: the first line, if it is text. */
	size_t n = 0;
	while (n < r->errlen && n < 160 && r->err[n] != '\n' && r->err[n] != '\r' &&
	       (unsigned char)r->err[n] >= 32 && r->err[n] != '<')
		n++;
	if (n)
		snprintf(out, cap, " (%.*s)", (int)n, r->err);
	else if (r->reason[0])
		snprintf(out, cap, " %s", r->reason);
}

static int
status_errno(long status)
{
	switch (status) {
	case 404:
	case 410:
		return -ENOENT;
	case 401:
	case 403:
		return -EACCES;
	default:
		return -EIO;
	}
}

static void
schedule_retry(rf_http *h, unsigned idx, const char *why)
{
	struct rf_http_req *r = &h->reqs[idx];
	if (r->done > r->attempt_from)
		r->fails = 0; /* progress: a new run of attempts */
	r->fails++;
	if (r->fails > h->retries) {
		rf_fail(h->diag, -EIO, "GET %s (%s): %s; gave up after %u attempts", file_label(h, r),
			range_label(r), why, r->fails);
		complete(h, idx, -EIO);
		return;
	}
	rf_log(h->diag, RF_LOG_DEBUG, "GET %s: %s; retrying (%u of %u)", file_label(h, r), why,
	       r->fails, h->retries);
	/* Exponential backoff with full jitter: many readers failing at
	 * once (a server restart) do not come back at the same instant. */
	uint64_t cap = (uint64_t)h->backoff_ms << (r->fails - 1 < 16 ? r->fails - 1 : 16);
	if (cap > RF_HTTP_BACKOFF_CAP_MS)
		cap = RF_HTTP_BACKOFF_CAP_MS;
	h->rng ^= h->rng << 13;
	h->rng ^= h->rng >> 7;
	h->rng ^= h->rng << 17;
	uint64_t ms = cap / 2 + (cap ? h->rng % (cap / 2 + 1) : 0);
	r->due_ns = now_ns() + (int64_t)ms * 1000000;
	r->state = SLOT_BACKOFF;
}

/* A transfer ended: decide between complete, retry and fail. */
static void
finished(rf_http *h, unsigned idx, CURLcode rc)
{
	struct rf_http_req *r = &h->reqs[idx];
	struct rf_http_file *f = &h->files[r->file];
	curl_multi_remove_handle(h->multi, r->easy);
	h->nactive--;
	r->state = SLOT_PENDING; /* until decided below */
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	char why[512];

	if (r->have_range == 1 && r->r_total != UINT64_MAX)
		f->size = r->r_total;
	else if (r->have_range == 2)
		f->size = r->r_total;

	if (r->too_long) {
		/* Whatever came is suspect: the server is not sending what
		 * the range asked for. */
		r->done = r->attempt_from;
		schedule_retry(h, idx, "the body is longer than the range asked for");
		return;
	}
	if (r->bad_range) {
		r->done = r->attempt_from;
		schedule_retry(h, idx, "the response's Content-Range is not the range asked for");
		return;
	}
	if (r->no_range) {
		rf_fail(h->diag, -EIO, "GET %s (%s): the server answered 200 with the whole "
			"object: it does not serve byte ranges", file_label(h, r), range_label(r));
		complete(h, idx, -EIO);
		return;
	}
	if (r->stalled) {
		snprintf(why, sizeof why, "no data for %u ms", h->stall_ms);
		schedule_retry(h, idx, why);
		return;
	}
	if (rc != CURLE_OK) {
		snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
		if (transient(rc)) {
			schedule_retry(h, idx, why);
			return;
		}
		rf_fail(h->diag, -EIO, "GET %s (%s): %s", file_label(h, r), range_label(r), why);
		complete(h, idx, -EIO);
		return;
	}
	if (status == 206 || status == 200) {
		if (status == 200 && r->offset + r->attempt_from == 0)
			f->size = r->done; /* the whole object came */
		if (r->done >= r->len) {
			complete(h, idx, (int64_t)r->len);
			return;
		}
		uint64_t end = r->offset + r->done;
		if (f->size != UINT64_MAX && end >= f->size) {
			/* The object ends inside the read: as at end of file. */
			complete(h, idx, (int64_t)r->done);
			return;
		}
		snprintf(why, sizeof why, "the body ended after %zu of %zu bytes",
			 r->done - r->attempt_from, r->len - r->attempt_from);
		schedule_retry(h, idx, why);
		return;
	}
	if (status == 416) {
		/* The range starts at or past the end: end of file. */
		complete(h, idx, (int64_t)r->done);
		return;
	}
	char body[400];
	describe_body(r, body, sizeof body);
	if (status == 429 || status >= 500) {
		snprintf(why, sizeof why, "HTTP %ld%s", status, body);
		schedule_retry(h, idx, why);
		return;
	}
	rf_fail(h->diag, status_errno(status), "GET %s (%s): HTTP %ld%s", file_label(h, r),
		range_label(r), status, body);
	complete(h, idx, status_errno(status));
}

static void
drain(rf_http *h)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(h->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct rf_http_req *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (!r)
			continue;
		finished(h, (unsigned)(r - h->reqs), m->data.result);
	}
}

int
rf_http_wait(rf_http *h, rf_io_done *done, unsigned max, unsigned min)
{
	if (min > h->outstanding)
		min = h->outstanding;
	for (;;) {
		int rc = rf_http_submit(h);
		if (rc < 0)
			return rc;
		drain(h);
		if (h->ready_count >= min || h->ready_count >= h->outstanding)
			break;
		/* Sleep until curl has work or the next backoff ends. */
		int64_t now = now_ns(), next = INT64_MAX;
		int pending = 0;
		for (unsigned i = 0; i < h->qd; i++) {
			if (h->reqs[i].state == SLOT_BACKOFF && h->reqs[i].due_ns < next)
				next = h->reqs[i].due_ns;
			pending |= h->reqs[i].state == SLOT_PENDING;
		}
		if (pending)
			continue;
		int ms = 1000;
		if (next != INT64_MAX) {
			int64_t d = (next - now) / 1000000 + 1;
			ms = d < 0 ? 0 : d < ms ? (int)d : ms;
		}
		if (h->nactive)
			curl_multi_poll(h->multi, NULL, 0, ms, NULL);
		else if (ms > 0) {
			struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
			nanosleep(&ts, NULL);
		}
	}
	unsigned n = 0;
	while (n < max && h->ready_count) {
		done[n++] = h->ready[h->ready_head];
		h->ready_head = (h->ready_head + 1) % h->qd;
		h->ready_count--;
	}
	h->outstanding -= n;
	return (int)n;
}

unsigned
rf_http_inflight(const rf_http *h)
{
	return h->outstanding;
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

int
rf_http_pread(rf_http *h, int file, void *buf, size_t len, uint64_t offset, size_t *got)
{
	if (got)
		*got = 0;
	int rc = rf_http_read(h, file, offset, buf, len, 0);
	if (rc < 0)
		return rc == -EAGAIN ? rf_fail(h->diag, -EBUSY, "http: reads are outstanding") : rc;
	rf_io_done d;
	rc = rf_http_wait(h, &d, 1, 1);
	if (rc < 0)
		return rc;
	if (d.res < 0)
		return (int)d.res;
	if (got)
		*got = (size_t)d.res;
	if ((size_t)d.res < len)
		return rf_fail(h->diag, RF_ETRUNCATED, "%s: ends at %" PRIu64 ", inside the %zu bytes "
			       "at offset %" PRIu64, h->files[file].name, offset + (uint64_t)d.res,
			       len, offset);
	return 0;
}

/* ------------------------------------------------- small whole objects */

struct membuf {
	char *p;
	size_t n, cap;
	int over;
};

static size_t
on_mem(char *p, size_t size, size_t n, void *arg)
{
	struct membuf *m = arg;
	size_t len = size * n;
	if (m->n + len + 1 > m->cap) {
		size_t cap = m->cap ? m->cap : 65536;
		while (cap < m->n + len + 1)
			cap *= 2;
		if (cap > RF_HTTP_SMALL_MAX) {
			m->over = 1;
			return 0;
		}
		char *q = realloc(m->p, cap);
		if (!q)
			return 0;
		m->p = q;
		m->cap = cap;
	}
	memcpy(m->p + m->n, p, len);
	m->n += len;
	m->p[m->n] = '\0';
	return len;
}

/* GET a whole small object (a manifest, a listing page), retried as a
 * read.  *body is malloc'd and NUL-terminated. */
static int
get_small(rf_http *h, const char *label, const char *url, int s3, char **body, size_t *len)
{
	*body = NULL;
	*len = 0;
	CURL *e = curl_easy_init();
	if (!e)
		return rf_fail(h->diag, -ENOMEM, "http: out of memory");
	struct curl_slist *hdrs = NULL;
	int ret = 0;
	for (unsigned attempt = 0;; attempt++) {
		struct membuf m = {0};
		curl_easy_reset(e);
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_mem);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)&m);
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->connect_ms);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)(h->stall_ms + 999) / 1000);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
		curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(e, CURLOPT_USERAGENT, "ringfeed");
		if (h->ca_bundle)
			curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_bundle);
		if (s3) {
			curl_easy_setopt(e, CURLOPT_AWS_SIGV4, h->s3.sigv4);
			curl_easy_setopt(e, CURLOPT_USERPWD, h->s3.userpwd);
			if (!hdrs) {
				hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
				if (hdrs && h->s3.token) {
					char *t = NULL;
					if (asprintf(&t, "x-amz-security-token: %s", h->s3.token) >= 0) {
						curl_slist_append(hdrs, t);
						free(t);
					}
				}
			}
			curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
		}
		CURLcode rc = curl_easy_perform(e);
		long status = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		char why[512];
		int retry = 0;
		if (rc == CURLE_OK && status == 200) {
			if (!m.p && !(m.p = calloc(1, 1))) {
				ret = rf_fail(h->diag, -ENOMEM, "http: out of memory");
				break;
			}
			*body = m.p;
			*len = m.n;
			break;
		}
		if (m.over) {
			free(m.p);
			ret = rf_fail(h->diag, RF_EFORMAT, "GET %s: larger than %u MiB, not a manifest",
				      label, RF_HTTP_SMALL_MAX >> 20);
			break;
		}
		if (rc != CURLE_OK) {
			snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
			retry = transient(rc);
		} else {
			struct rf_http_req tmp;
			tmp.reason[0] = '\0';
			tmp.errlen = m.n < sizeof tmp.err - 1 ? m.n : sizeof tmp.err - 1;
			if (tmp.errlen)
				memcpy(tmp.err, m.p, tmp.errlen);
			tmp.err[tmp.errlen] = '\0';
			char desc[400];
			describe_body(&tmp, desc, sizeof desc);
			snprintf(why, sizeof why, "HTTP %ld%s", status, desc);
			retry = status == 429 || status >= 500;
		}
		free(m.p);
		if (!retry || attempt >= h->retries) {
			ret = rf_fail(h->diag, rc != CURLE_OK ? -EIO : status_errno(status),
				      "GET %s: %s%s", label, why,
				      retry ? "; gave up after retries" : "");
			break;
		}
		uint64_t cap = (uint64_t)h->backoff_ms << (attempt < 16 ? attempt : 16);
		if (cap > RF_HTTP_BACKOFF_CAP_MS)
			cap = RF_HTTP_BACKOFF_CAP_MS;
		struct timespec ts = {(time_t)(cap / 1000), (long)(cap % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(e);
	return ret;
}

/* ------------------------------------------------------------ expansion */

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

struct keylist {
	char **v;
	size_t n, cap;
	const char *prefix;
};

static int
key_add(void *arg, const char *k)
{
	struct keylist *kl = arg;
	if (!ends_with(k, ".rfs"))
		return 0;
	/* Like a directory: shards whose name starts with '.' are not
	 * part of the dataset (a writer's temporary files). */
	const char *base = strrchr(k, '/');
	base = base ? base + 1 : k;
	if (base[0] == '.')
		return 0;
	if (kl->n == kl->cap) {
		size_t cap = kl->cap ? 2 * kl->cap : 64;
		char **v = realloc(kl->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		kl->v = v;
		kl->cap = cap;
	}
	if (!(kl->v[kl->n] = strdup(k)))
		return -ENOMEM;
	kl->n++;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
s3_list(rf_http *h, const char *path, int (*add)(void *arg, const char *url), void *arg)
{
	int rc = s3_setup(h);
	if (rc < 0)
		return rc;
	char *bucket, *prefix;
	if ((rc = rf_s3_split(path, &bucket, &prefix, h->diag)) < 0)
		return rc;
	struct keylist kl = {0};
	char *token = NULL;
	char *ep = rf_url_encode(prefix, 0);
	/* Test hook: small pages, so a test's few shards take several. */
	unsigned max_keys = env_uint("RINGFEED_S3_MAX_KEYS", 0);
	char mk[32] = "";
	if (max_keys)
		snprintf(mk, sizeof mk, "&max-keys=%u", max_keys);
	for (int page = 0; rc == 0; page++) {
		char *et = token ? rf_url_encode(token, 0) : NULL;
		char *query = NULL;
		/* The parameters in SigV4's canonical (sorted) order. */
		if (!ep || (token && !et) ||
		    asprintf(&query, "%s%s%slist-type=2%s&prefix=%s", token ? "continuation-token=" : "",
			     token ? et : "", token ? "&" : "", mk, ep) < 0) {
			free(et);
			rc = rf_fail(h->diag, -ENOMEM, "s3: out of memory");
			break;
		}
		free(et);
		char *url = rf_s3_url(&h->s3, bucket, NULL, query);
		free(query);
		if (!url) {
			rc = rf_fail(h->diag, -ENOMEM, "s3: out of memory");
			break;
		}
		char *body;
		size_t len;
		rc = get_small(h, path, url, h->s3.access != NULL, &body, &len);
		free(url);
		if (rc < 0)
			break;
		int truncated;
		char *next;
		rc = rf_s3_parse_list(body, len, key_add, &kl, &truncated, &next);
		free(body);
		if (rc == -ENOMEM) {
			rc = rf_fail(h->diag, rc, "s3: out of memory");
			break;
		}
		if (rc < 0) {
			rc = rf_fail(h->diag, RF_EFORMAT, "%s: the listing (page %d) is not an S3 "
				     "ListObjectsV2 response", path, page + 1);
			break;
		}
		free(token);
		token = next;
		if (!truncated)
			break;
	}
	free(token);
	free(ep);
	if (rc == 0 && kl.n == 0)
		rc = rf_fail(h->diag, -ENOENT, "%s: no .rfs objects under this prefix", path);
	if (rc == 0) {
		/* Byte order, as a local directory: the same sample numbers
		 * wherever the shards are. */
		qsort(kl.v, kl.n, sizeof *kl.v, cmp_str);
		for (size_t i = 0; i < kl.n && rc == 0; i++) {
			char *u = NULL;
			if (asprintf(&u, "s3://%s/%s", bucket, kl.v[i]) < 0)
				rc = rf_fail(h->diag, -ENOMEM, "s3: out of memory");
			else if ((rc = add(arg, u)) < 0)
				rf_fail(h->diag, rc, "s3: out of memory");
			free(u);
		}
	}
	for (size_t i = 0; i < kl.n; i++)
		free(kl.v[i]);
	free(kl.v);
	free(bucket);
	free(prefix);
	return rc;
}

/* A URL names a shard when its path (before any ?query, as in a presigned
 * URL) ends in .rfs. */
static int
names_shard(const char *url)
{
	size_t n = strcspn(url, "?#");
	return n >= 4 && memcmp(url + n - 4, ".rfs", 4) == 0;
}

/* The manifest `ringfeed pack` writes last (BASE.rfm, docs/format.md
 * "Manifest"): version 1, its closing XXH3 line checked, its `shard` lines'
 * names taken in order.  The pack id and each shard's size and footer
 * checksum it records are not compared here: the format library's parser
 * does that for local packs. */
static int
pack_manifest(rf_http *h, const char *path, char *body, size_t len,
	      int (*add)(void *arg, const char *url), void *arg)
{
	if (len < 20 || memcmp(body, "ringfeed-manifest 1\n", 20) != 0)
		return rf_fail(h->diag, RF_EFORMAT, "%s: a pack manifest of a version other than 1",
			       path);
	/* The last line: "xxh3 HEX\n", over every byte before it. */
	size_t end = len;
	if (end && body[end - 1] == '\n')
		end--;
	size_t ls = end;
	while (ls && body[ls - 1] != '\n')
		ls--;
	unsigned long long want;
	char tail[64];
	size_t tl = end - ls < sizeof tail - 1 ? end - ls : sizeof tail - 1;
	memcpy(tail, body + ls, tl);
	tail[tl] = '\0';
	if (sscanf(tail, "xxh3 %16llx", &want) != 1 || XXH3_64bits(body, ls) != want)
		return rf_fail(h->diag, RF_ECORRUPT, "%s: the manifest's checksum line is missing or "
			       "does not match its text", path);
	body[ls] = '\0';
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	unsigned long long want_n = 0;
	size_t count = 0;
	int rc = 0;
	char *save = NULL;
	for (char *line = strtok_r(body, "\n", &save); line && rc == 0;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "shards %llu", &want_n) == 1)
			continue;
		if (strncmp(line, "shard ", 6) != 0)
			continue;
		const char *name = line;
		for (int k = 0; k < 4 && name; k++) {
			name = strchr(name, ' ');
			if (name)
				name++;
		}
		if (!name || !*name || strchr(name, '/') || !names_shard(name)) {
			rc = rf_fail(h->diag, RF_ECORRUPT, "%s: manifest line \"%.80s\" names no shard",
				     path, line);
			break;
		}
		char *u = NULL;
		if (asprintf(&u, "%.*s%s", (int)dirlen, path, name) < 0) {
			rc = rf_fail(h->diag, -ENOMEM, "http: out of memory");
			break;
		}
		if ((rc = add(arg, u)) < 0)
			rf_fail(h->diag, rc, "http: out of memory");
		free(u);
		count++;
	}
	if (rc == 0 && (count == 0 || count != want_n))
		rc = rf_fail(h->diag, RF_ECORRUPT, "%s: the manifest lists %zu shards, its count says "
			     "%llu", path, count, want_n);
	return rc;
}

static int
manifest(rf_http *h, const char *path, int (*add)(void *arg, const char *url), void *arg)
{
	char *url;
	int s3, rc = resolve(h, path, &url, &s3);
	if (rc < 0)
		return rc;
	char *body;
	size_t len;
	rc = get_small(h, path, url, s3, &body, &len);
	free(url);
	if (rc < 0)
		return rc;
	if (memchr(body, '\0', len) || (len >= 8 && memcmp(body, "\x89RFS", 4) == 0)) {
		free(body);
		return rf_fail(h->diag, RF_EFORMAT, "%s: not a shard list (binary content); a shard's "
			       "URL ends in .rfs", path);
	}
	if (len >= 18 && memcmp(body, "ringfeed-manifest ", 18) == 0) {
		rc = pack_manifest(h, path, body, len, add, arg);
		free(body);
		return rc;
	}
	/* Names resolve against the manifest's directory. */
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	size_t count = 0;
	char *save = NULL;
	for (char *line = strtok_r(body, "\r\n", &save); line && rc == 0;
	     line = strtok_r(NULL, "\r\n", &save)) {
		while (*line == ' ' || *line == '\t')
			line++;
		size_t n = strlen(line);
		while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		if (!n || line[0] == '#')
			continue;
		if (!names_shard(line)) {
			rc = rf_fail(h->diag, RF_EFORMAT, "%s: line \"%.80s\" does not name a .rfs shard: "
				     "not a shard list", path, line);
			break;
		}
		char *u = NULL;
		if (rf_is_url(line))
			u = strdup(line);
		else if (asprintf(&u, "%.*s%s", (int)dirlen, path, line) < 0)
			u = NULL;
		if (!u) {
			rc = rf_fail(h->diag, -ENOMEM, "http: out of memory");
			break;
		}
		if ((rc = add(arg, u)) < 0)
			rf_fail(h->diag, rc, "http: out of memory");
		free(u);
		count++;
	}
	free(body);
	if (rc == 0 && count == 0)
		rc = rf_fail(h->diag, -ENOENT, "%s: the shard list names no shard", path);
	return rc;
}

int
rf_http_expand(rf_http *h, const char *path, int (*add)(void *arg, const char *url), void *arg)
{
	if (names_shard(path)) {
		int rc = add(arg, path);
		return rc < 0 ? rf_fail(h->diag, rc, "http: out of memory") : 0;
	}
	if (strncmp(path, "s3://", 5) == 0 && (ends_with(path, "/") || !strchr(path + 5, '/')))
		return s3_list(h, path, add, arg);
	return manifest(h, path, add, arg);
}

#endif /* RF_HAVE_CURL */
