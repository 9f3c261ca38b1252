/* SPDX-License-Identifier: MIT */
/*
 * The remote limit of `ringfeed bench` (rf_dataset_remote_limit in
 * <ringfeed/dataset.h>): raw ranged GETs of the dataset's remote chunks
 * with libcurl's multi interface, the reader's request options
 * (rf_http_easy_common) and nothing else: no retries, no checksums, no
 * ring.  What the loader streams from a server is compared with this.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/dataset.h>

#include "io/http.h"

static int
note(char *msg, size_t cap, int rc, const char *fmt, ...)
{
	if (msg && cap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, cap, fmt, ap);
		va_end(ap);
	}
	return rc;
}

#ifndef RF_HAVE_CURL

int
rf_dataset_remote_limit(const rf_dataset *ds, uint32_t depth, double min_seconds, double *bytes,
			double *seconds, uint64_t *requests, char *msg, size_t msg_cap)
{
	(void)ds, (void)depth, (void)min_seconds;
	*bytes = *seconds = 0;
	*requests = 0;
	return note(msg, msg_cap, -ENOTSUP, "built without libcurl");
}

#else

#include "io/http_impl.h"

struct raw_slot {
	CURL *e;
	struct curl_slist *hdrs;
	char *buf;
	size_t cap, got, want;
	uint64_t chunk;
	int busy;
};

static size_t
raw_body(char *p, size_t size, size_t n, void *arg)
{
	struct raw_slot *s = arg;
	size_t len = size * n;
	size_t room = s->got < s->cap ? s->cap - s->got : 0;
	memcpy(s->buf + s->got, p, len < room ? len : room);
	s->got += len;
	return len;
}

/* The next remote chunk after *c (wrapping), or UINT64_MAX when none. */
static uint64_t
next_remote(const rf_dataset *ds, const char *is_remote, uint64_t n, uint64_t *c,
	    rf_chunk_info *ci)
{
	for (uint64_t k = 0; k < n; k++) {
		uint64_t i = (*c + k) % n;
		if (rf_dataset_chunk_info(ds, i, ci) == 0 && is_remote[ci->shard] &&
		    ci->stored_bytes) {
			*c = i + 1;
			return i;
		}
	}
	return UINT64_MAX;
}

int
rf_dataset_remote_limit(const rf_dataset *ds, uint32_t depth, double min_seconds, double *bytes,
			double *seconds, uint64_t *requests, char *msg, size_t msg_cap)
{
	*bytes = *seconds = 0;
	*requests = 0;
	if (!ds)
		return note(msg, msg_cap, -EINVAL, "no dataset");
	size_t nshards = rf_dataset_shards(ds);
	uint64_t nchunks = rf_dataset_chunks(ds);
	char *is_remote = calloc(nshards ? nshards : 1, 1);
	int *hfile = calloc(nshards ? nshards : 1, sizeof *hfile);
	if (!is_remote || !hfile) {
		free(is_remote);
		free(hfile);
		return note(msg, msg_cap, -ENOMEM, "out of memory");
	}
	if (!depth)
		depth = 32;
	if (depth > RF_HTTP_MAX_DEPTH)
		depth = RF_HTTP_MAX_DEPTH;
	rf_diag diag;
	memset(&diag, 0, sizeof diag);
	rf_http_config cfg;
	rf_http_config_init(&cfg);
	cfg.queue_depth = depth;
	rf_http *h = NULL;
	CURLM *multi = NULL;
	struct raw_slot *slots = NULL;
	int rc = rf_http_open(&h, &cfg, &diag);
	size_t nremote = 0;
	uint64_t biggest = 0;
	for (size_t i = 0; rc == 0 && i < nshards; i++) {
		const char *p = rf_dataset_shard_path(ds, i);
		if (!rf_is_url(p))
			continue;
		is_remote[i] = 1;
		nremote++;
		rc = rf_http_add_file(h, p, &hfile[i]);
	}
	if (rc < 0) {
		rc = note(msg, msg_cap, rc, "%s", diag.msg);
		goto out;
	}
	if (!nremote) {
		rc = note(msg, msg_cap, -ENOTSUP, "no shard is remote");
		goto out;
	}
	for (uint64_t c = 0; c < nchunks; c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) == 0 && is_remote[ci.shard] &&
		    ci.stored_bytes > biggest)
			biggest = ci.stored_bytes;
	}
	slots = calloc(depth, sizeof *slots);
	multi = curl_multi_init();
	if (!slots || !multi) {
		rc = note(msg, msg_cap, -ENOMEM, "out of memory");
		goto out;
	}
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)depth);
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	for (unsigned i = 0; i < depth; i++) {
		slots[i].cap = (size_t)biggest;
		if (!(slots[i].e = curl_easy_init()) || !(slots[i].buf = malloc(slots[i].cap))) {
			rc = note(msg, msg_cap, -ENOMEM, "out of memory");
			goto out;
		}
	}
	uint64_t cursor = 0, done = 0;
	double moved = 0;
	int64_t t0 = rf_http_now_ns(), tlast = t0;
	int64_t stop = t0 + (int64_t)(min_seconds * 1e9);
	unsigned busy = 0;
	for (;;) {
		int64_t now = rf_http_now_ns();
		for (unsigned i = 0; now < stop && i < depth; i++) {
			struct raw_slot *s = &slots[i];
			if (s->busy)
				continue;
			rf_chunk_info ci;
			uint64_t c = next_remote(ds, is_remote, nchunks, &cursor, &ci);
			if (c == UINT64_MAX)
				break;
			char range[64];
			snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, ci.offset,
				 ci.offset + ci.stored_bytes - 1);
			curl_easy_reset(s->e);
			curl_slist_free_all(s->hdrs);
			s->hdrs = NULL;
			rf_http_easy_common(h, s->e, &h->files[hfile[ci.shard]], &s->hdrs);
			curl_easy_setopt(s->e, CURLOPT_RANGE, range);
			curl_easy_setopt(s->e, CURLOPT_WRITEFUNCTION, raw_body);
			curl_easy_setopt(s->e, CURLOPT_WRITEDATA, (void *)s);
			curl_easy_setopt(s->e, CURLOPT_PRIVATE, (void *)s);
			s->got = 0;
			s->want = (size_t)ci.stored_bytes;
			s->chunk = c;
			if (curl_multi_add_handle(multi, s->e) != CURLM_OK) {
				rc = note(msg, msg_cap, -EIO, "cannot start a request");
				goto out;
			}
			s->busy = 1;
			busy++;
		}
		if (!busy)
			break;
		int running;
		curl_multi_perform(multi, &running);
		CURLMsg *m;
		int left, freed = 0;
		while ((m = curl_multi_info_read(multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			struct raw_slot *s = NULL;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			long status = 0;
			curl_easy_getinfo(s->e, CURLINFO_RESPONSE_CODE, &status);
			curl_multi_remove_handle(multi, s->e);
			s->busy = 0;
			busy--;
			freed++;
			if (m->data.result != CURLE_OK || (status != 206 && status != 200) ||
			    s->got != s->want) {
				rf_chunk_info ci;
				rf_dataset_chunk_info(ds, s->chunk, &ci);
				rc = note(msg, msg_cap, -EIO, "GET %s (chunk %" PRIu64 ", %zu bytes): %s, "
					  "HTTP %ld, %zu bytes came", rf_dataset_shard_path(ds, ci.shard),
					  s->chunk, s->want, curl_easy_strerror(m->data.result), status,
					  s->got);
				goto out;
			}
			moved += (double)s->got;
			done++;
			tlast = rf_http_now_ns();
		}
		/* A slot freed is refilled at once: waiting for the other
		 * transfers' next event first would leave it idle for up to a
		 * round trip, and the measurement below io_depth in flight. */
		if (busy && !freed)
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
	*bytes = moved;
	*seconds = (double)(tlast - t0) * 1e-9;
	*requests = done;
out:
	for (unsigned i = 0; slots && i < depth; i++) {
		if (slots[i].busy)
			curl_multi_remove_handle(multi, slots[i].e);
		if (slots[i].e)
			curl_easy_cleanup(slots[i].e);
		curl_slist_free_all(slots[i].hdrs);
		free(slots[i].buf);
	}
	if (multi)
		curl_multi_cleanup(multi);
	free(slots);
	rf_http_close(&h);
	free(is_remote);
	free(hfile);
	return rc;
}

#endif /* RF_HAVE_CURL */
