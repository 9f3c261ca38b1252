/* SPDX-License-Identifier: MIT */
/*
 * Inside the remote reader (http.h, built with libcurl), shared by
 *   http.c           the handle: open, close, settings, the files added
 *                    and the URL each is requested at
 *   http_transfer.c  ranged reads: the request slots, curl's callbacks,
 *                    retries with backoff, completions and the wait
 *   http_list.c      expanding a path to shards: small whole objects
 *                    (manifests, listing pages), S3 listings, shard lists
 *
 * Threads: a handle is used by one thread at a time; curl's callbacks run
 * inside curl_multi_perform on that thread.
 */
#ifndef RF_HTTP_IMPL_H
#define RF_HTTP_IMPL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "io/http.h"
#include "io/cache.h"
#include "io/s3.h"

#define RF_HTTP_MAX_DEPTH 1024
#define RF_HTTP_ERRBODY 2048        /* bytes of an error body kept */
#define RF_HTTP_BACKOFF_CAP_MS 10000
#define RF_HTTP_RECV_BUFFER (256L << 10) /* libcurl's receive buffer per request */
#define RF_HTTP_SMALL_MAX (64u << 20) /* largest manifest or listing page */
#define RF_HTTP_FAILS 16              /* failed reads whose messages are kept */

enum { SLOT_FREE, SLOT_PENDING, SLOT_ACTIVE, SLOT_BACKOFF };

struct rf_http_file {
	char *name;      /* as added */
	char *url;       /* as requested */
	int s3;          /* sign with SigV4 */
	uint64_t size;   /* UINT64_MAX until a response says it */
	int cached;      /* reads go through h->cache (rf_http_cache_file) */
	uint64_t version;
};

struct rf_http_req {
	CURL *easy;
	struct curl_slist *hdrs;
	int state;
	uint64_t tag;
	int file;
	int suffix;          /* a tail read whose offset is not known yet */
	int cache;           /* store the bytes in h->cache once complete */
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
	rf_cache *cache;     /* NULL: none */
	/* The messages of the last reads that failed, for their owner's own
	 * message (rf_http_read_error, from any thread). */
	pthread_mutex_t fail_mu;
	struct rf_http_fail {
		int file;
		uint64_t offset;
		char msg[RF_ERRMSG_MAX];
	} fails[RF_HTTP_FAILS];
	unsigned nfails_seen;
};

/* http.c */
int64_t rf_http_now_ns(void);
/* An unsigned setting from the environment, `def` when unset or invalid. */
unsigned rf_http_env_uint(const char *name, unsigned def);
/* Reads the S3 credentials and endpoint the first time an s3:// path needs them. */
int rf_http_s3_setup(rf_http *h);
/* The URL to request for `name` (malloc'd), and whether to sign it. */
int rf_http_resolve(rf_http *h, const char *name, char **url, int *s3);

/* http_transfer.c */
/* The options every request of `f` is made with, the reader's and the
 * bench's raw GETs alike (rf_dataset_remote_limit): URL, timeouts,
 * protocols, HTTP/2, CA bundle, SigV4 (its headers added to *hdrs, freed by
 * the caller). */
void rf_http_easy_common(rf_http *h, CURL *e, const struct rf_http_file *f,
			 struct curl_slist **hdrs);
/* Whether a curl error is worth another attempt. */
int rf_http_transient(CURLcode rc);
/* The server's error code and message from r's error body, for messages. */
void rf_http_describe_body(const struct rf_http_req *r, char *out, size_t cap);
/* The negative errno an HTTP error status is reported as. */
int rf_http_status_errno(long status);

#endif
