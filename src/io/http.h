/* SPDX-License-Identifier: MIT */
/*
 * The remote reader: the operations of io.h for URLs.  A "file" is an
 * http://, https:// or s3:// URL; a read is a ranged GET whose body lands
 * straight in the caller's buffer.  libcurl's multi interface keeps up to
 * queue_depth requests in flight over a pool of kept-alive connections
 * (HTTP/2 multiplexed where an https server offers it).
 *
 * s3://bucket/key is requested from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL
 * (path style: ENDPOINT/bucket/key) when set, else from
 * https://bucket.s3.REGION.amazonaws.com/key, signed with SigV4 (libcurl's
 * CURLOPT_AWS_SIGV4) when credentials are found: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, else the profile AWS_PROFILE
 * (default "default") of the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials).  The region is
 * AWS_REGION, AWS_DEFAULT_REGION, the profile's region in that file, or
 * us-east-1.  Without credentials, requests go unsigned (public buckets).
 *
 * Faults: a connection refused or reset, a stalled transfer, HTTP 5xx and
 * 429, and a body shorter or longer than asked are retried after an
 * exponential backoff with jitter, at most `retries` times in a row without
 * progress; a retry asks only for the bytes still missing (a body longer
 * than asked is discarded whole).  403, 404, 400 and other 4xx fail at
 * once, the message naming the URL, the byte range, the status and the
 * server's error code.  Every read completes exactly once: with all its
 * bytes, with fewer when the object ends first (as a local read at end of
 * file), or with an error.
 *
 * The environment, read at rf_http_open (overriding the config):
 *  - RINGFEED_HTTP_RETRIES=n, RINGFEED_HTTP_BACKOFF_MS=ms,
 *    RINGFEED_HTTP_STALL_MS=ms (no byte for this long fails the attempt),
 *    RINGFEED_HTTP_CONNECT_MS=ms;
 *  - RINGFEED_CA_BUNDLE (else CURL_CA_BUNDLE, AWS_CA_BUNDLE): a PEM file of
 *    the certificate authorities to trust, for private endpoints.
 *
 * Thread rules: as io.h, one thread submits and waits.
 */
#ifndef RF_IO_HTTP_H
#define RF_IO_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "io/io.h"

typedef struct rf_http rf_http;

typedef struct rf_http_config {
	unsigned queue_depth;        /* requests in flight at most; default 32 */
	unsigned retries;            /* retries without progress; default 6 */
	unsigned backoff_ms;         /* first retry delay, doubling; default 100 */
	unsigned stall_ms;           /* no byte in this long: retry; default 30000 */
	unsigned connect_ms;         /* connect timeout; default 10000 */
	const char *ca_bundle;       /* PEM file of trusted CAs, NULL: system's */
	const char *cache_dir;       /* local cache of ranges read (cache.h); NULL: none */
	uint64_t cache_bytes;        /* its cap; 0 with a cache_dir: 10 GiB */
} rf_http_config;

#define RF_HTTP_CACHE_DEFAULT (10ull << 30)

/* Whether `path` is a URL this reader takes (http://, https://, s3://). */
int rf_is_url(const char *path);

/* 1 when libcurl was built in; 0 when every URL fails with -ENOTSUP. */
int rf_http_available(void);

void rf_http_config_init(rf_http_config *cfg);
int rf_http_open(rf_http **out, const rf_http_config *cfg, rf_diag *diag);
void rf_http_close(rf_http **h);

/* Where later messages go (the owner's diag moved). */
void rf_http_set_diag(rf_http *h, rf_diag *diag);

/* Register a URL; *file is its handle for reads.  Nothing is requested. */
int rf_http_add_file(rf_http *h, const char *url, int *file);

/* Queue a ranged GET of [offset, offset+len) of `file` into buf (no
 * alignment needed).  -EAGAIN when queue_depth reads are outstanding. */
int rf_http_read(rf_http *h, int file, uint64_t offset, void *buf, size_t len, uint64_t tag);

/* With a cache_dir: reads of `file` go through the cache, under the
 * object's `version` (its size, or anything that changes when the object
 * does), so that an object replaced by another is never served from the
 * cache.  Files without a version are not cached (tail reads never are).
 * A hit completes at the next wait without a request. */
void rf_http_cache_file(rf_http *h, int file, uint64_t version);

/* Delete the cache entry of the read [offset, offset+len) of `file`, if
 * any (rf_cache_drop): its bytes failed the owner's check.  May be called
 * from another thread than the handle's (files are fixed once added). */
void rf_http_cache_drop(rf_http *h, int file, uint64_t offset, size_t len);

/* The message of the failed read of `file` at `offset` (the URL, byte
 * range, HTTP status and server code or curl error, attempts), if it is
 * among the last few failures: 1 and buf filled, else 0.  Any thread. */
int rf_http_read_error(rf_http *h, int file, uint64_t offset, char *buf, size_t cap);

/* Read [offset, offset+len) of `file` into buf now, with one ranged GET
 * of its own (not through the cache, not counted in the queue): for an
 * owner whose check of a read's bytes failed, once.  Returns the bytes
 * read (fewer at the object's end) or -errno.  Any thread. */
int64_t rf_http_read_now(rf_http *h, int file, uint64_t offset, void *buf, size_t len);

/* The cache's counters (all zero without a cache). */
struct rf_cache_stats;
void rf_http_cache_stats(const rf_http *h, struct rf_cache_stats *out);

/* Queue a GET of the last `len` bytes of `file` (a suffix range): it
 * completes with min(len, size) bytes, and the object's size is known from
 * then on (rf_http_file_size).  The bytes are those of [size - res, size). */
int rf_http_read_tail(rf_http *h, int file, void *buf, size_t len, uint64_t tag);

/* Start queued requests. */
int rf_http_submit(rf_http *h);

/* As rf_io_wait: submit, wait until `min` reads completed, hand back up to
 * `max`.  A read's error is its res (the message on the diag). */
int rf_http_wait(rf_http *h, rf_io_done *done, unsigned max, unsigned min);

unsigned rf_http_inflight(const rf_http *h);

/* The object's size once a response said it; -ENODATA before. */
int rf_http_file_size(const rf_http *h, int file, uint64_t *size);

/* The URL a file is requested from (s3:// resolved) and the name it was
 * added under. */
const char *rf_http_file_name(const rf_http *h, int file);

/* Blocking read of exactly len bytes at offset: 0, RF_ETRUNCATED when the
 * object ends first (*got, when not NULL, says how many came), or an error.
 * Only when no other read is outstanding. */
int rf_http_pread(rf_http *h, int file, void *buf, size_t len, uint64_t offset, size_t *got);

/* What a pack manifest records of one of its shards, for the reader to
 * compare with the shard (as it does for a local pack). */
struct rf_http_expect {
	const char *manifest;  /* the manifest's URL */
	uint64_t pack, size, samples, footer_xxh3;
};
/* Receives each shard URL of an expansion, with what a manifest says of it
 * (NULL when it did not come from a manifest); 0 or a negative error. */
typedef int (*rf_http_add_fn)(void *arg, const char *url, const struct rf_http_expect *ex);

/* Expand a remote dataset path into shard URLs, appended by add():
 *  - s3://bucket/prefix/ (ends in '/', or names no .rfs key): the .rfs keys
 *    under the prefix, listed with ListObjectsV2 (every page), in byte
 *    order;
 *  - a URL whose path ends in .rfs (a query may follow, as in a presigned
 *    URL): itself;
 *  - a pack manifest (text starting "ringfeed-manifest 1", docs/format.md):
 *    its shards, parsed and checked by the format library's parser, each
 *    added with what the manifest says of it (pack id, size, samples,
 *    footer checksum);
 *  - any other http(s):// or s3:// URL: a manifest, a text file listing
 *    the shards one a line (blank lines and lines starting with '#'
 *    skipped), each a URL or a name relative to the manifest's directory.
 * Returns 0 or a negative error with the message on the diag. */
int rf_http_expand(rf_http *h, const char *path, rf_http_add_fn add, void *arg);

#endif
