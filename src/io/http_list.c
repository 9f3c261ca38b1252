/* SPDX-License-Identifier: MIT */
/*
 * The remote reader's expansion of a path to shards (rf_http_expand): a
 * shard's URL as itself, an s3:// prefix by listing it, anything else as a
 * shard list or a pack manifest fetched whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "format/manifest.h"
#include "io/http_impl.h"
#include "xxh.h"

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
			retry = rf_http_transient(rc);
		} else {
			struct rf_http_req tmp;
			tmp.reason[0] = '\0';
			tmp.errlen = m.n < sizeof tmp.err - 1 ? m.n : sizeof tmp.err - 1;
			if (tmp.errlen)
				memcpy(tmp.err, m.p, tmp.errlen);
			tmp.err[tmp.errlen] = '\0';
			char desc[400];
			rf_http_describe_body(&tmp, desc, sizeof desc);
			snprintf(why, sizeof why, "HTTP %ld%s", status, desc);
			retry = status == 429 || status >= 500;
		}
		free(m.p);
		if (!retry || attempt >= h->retries) {
			ret = rf_fail(h->diag, rc != CURLE_OK ? -EIO : rf_http_status_errno(status),
				      "GET %s: %s%s", label, why,
				      retry ? "; gave up after " : "");
			if (retry) {
				size_t l = strlen(h->diag->msg);
				snprintf(h->diag->msg + l, sizeof h->diag->msg - l, "%u attempts",
					 attempt + 1);
			}
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
s3_list(rf_http *h, const char *path, rf_http_add_fn add, void *arg)
{
	int rc = rf_http_s3_setup(h);
	if (rc < 0)
		return rc;
	char *bucket, *prefix;
	if ((rc = rf_s3_split(path, &bucket, &prefix, h->diag)) < 0)
		return rc;
	struct keylist kl = {0};
	char *token = NULL;
	char *ep = rf_url_encode(prefix, 0);
	unsigned max_keys = 0;
#if RF_TEST_HOOKS
	/* Test hook (-Dtest_hooks): small pages, so a test's few shards take
	 * several. */
	max_keys = rf_http_env_uint("RINGFEED_S3_MAX_KEYS", 0);
#endif
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
			else if ((rc = add(arg, u, NULL)) < 0)
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
 * "Manifest"), parsed and checked by the format library's parser (version,
 * syntax, count, closing checksum); its shards, in its order, each with what
 * the manifest records of it: the reader compares those with the shard
 * (pack id, size, samples, footer) as for a local pack, so shards of two
 * packs are never read as one. */
static int
pack_manifest(rf_http *h, const char *path, char *body, size_t len, rf_http_add_fn add, void *arg)
{
	rf_manifest m;
	int rc = rf_manifest_parse(body, len, &m, path, h->diag);
	if (rc < 0)
		return rc;
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	for (size_t i = 0; i < m.nshards && rc == 0; i++) {
		const rf_manifest_shard *s = &m.shards[i];
		if (!names_shard(s->name)) {
			rc = rf_fail(h->diag, RF_ECORRUPT, "%s: manifest shard \"%.80s\" is not a "
				     ".rfs file", path, s->name);
			break;
		}
		char *u = NULL;
		if (asprintf(&u, "%.*s%s", (int)dirlen, path, s->name) < 0) {
			rc = rf_fail(h->diag, -ENOMEM, "http: out of memory");
			break;
		}
		struct rf_http_expect ex = {path, m.pack_id, s->size, s->samples, s->footer_xxh3};
		if ((rc = add(arg, u, &ex)) < 0)
			rf_fail(h->diag, rc, "http: out of memory");
		free(u);
	}
	rf_manifest_free(&m);
	return rc;
}

static int
manifest(rf_http *h, const char *path, rf_http_add_fn add, void *arg)
{
	char *url;
	int s3, rc = rf_http_resolve(h, path, &url, &s3);
	if (rc < 0)
		return rc;
	char *body;
	size_t len;
	rc = get_small(h, path, url, s3, &body, &len);
	free(url);
	size_t plen = strcspn(path, "?#");
	int dir = plen && path[plen - 1] == '/';
	/* A last component without an extension ("http://host/ds"): most
	 * likely a directory too (a server redirects it to ds/). */
	const char *last = path + plen;
	while (last > path && last[-1] != '/')
		last--;
	int bare = !dir && !memchr(last, '.', (size_t)(path + plen - last)) &&
		   (size_t)(last - path) > strlen("http://x/") - 1;
	if (rc < 0 && (dir || bare)) {
		/* A directory URL: the server's listing, if any, is no list. */
		char was[RF_ERRMSG_MAX];
		snprintf(was, sizeof was, "%s", h->diag->msg);
		return rf_fail(h->diag, rc, "%s (a web server's directory is not listed: name the "
			       "pack's manifest, %.*s%sBASE.rfm as ringfeed pack wrote it, or a shard "
			       "list)", was, (int)plen, path, dir ? "" : "/");
	}
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
		if ((rc = add(arg, u, NULL)) < 0)
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
rf_http_expand(rf_http *h, const char *path, rf_http_add_fn add, void *arg)
{
	if (names_shard(path)) {
		int rc = add(arg, path, NULL);
		return rc < 0 ? rf_fail(h->diag, rc, "http: out of memory") : 0;
	}
	if (strncmp(path, "s3://", 5) == 0 && (ends_with(path, "/") || !strchr(path + 5, '/')))
		return s3_list(h, path, add, arg);
	return manifest(h, path, add, arg);
}
