/* SPDX-License-Identifier: MIT */
/*
 * The remote reader's reads (http.h): ranged GETs with libcurl's multi interface.
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

#include "io/http_impl.h"

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
	r->last_ns = rf_http_now_ns();
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
	if (rf_http_now_ns() - r->last_ns > (int64_t)r->stall_ms * 1000000) {
		r->stalled = 1;
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------- requests */

void
rf_http_easy_common(rf_http *h, CURL *e, const struct rf_http_file *f, struct curl_slist **hdrs)
{
	curl_easy_setopt(e, CURLOPT_URL, f->url);
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
	/* Receive in pieces of 256 KiB rather than libcurl's 16 KiB: a
	 * fraction of the recv calls and callbacks per chunk (about a fifth
	 * less CPU per GB read over loopback, docs/remote.md); 8 MiB of heap
	 * at io_depth 32. */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, RF_HTTP_RECV_BUFFER);
	if (h->ca_bundle)
		curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_bundle);
	if (f->s3) {
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, h->s3.sigv4);
		curl_easy_setopt(e, CURLOPT_USERPWD, h->s3.userpwd);
		*hdrs = curl_slist_append(*hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
		if (h->s3.token) {
			char *t = NULL;
			if (asprintf(&t, "x-amz-security-token: %s", h->s3.token) >= 0) {
				struct curl_slist *l = curl_slist_append(*hdrs, t);
				if (l)
					*hdrs = l;
				free(t);
			}
		}
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, *hdrs);
	}
}

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
	r->last_ns = rf_http_now_ns();
	r->stall_ms = h->stall_ms;
	if (r->suffix)
		snprintf(r->range, sizeof r->range, "-%zu", r->len);
	else
		snprintf(r->range, sizeof r->range, "%" PRIu64 "-%" PRIu64, r->offset + r->done,
			 r->offset + r->len - 1);
	curl_easy_setopt(e, CURLOPT_RANGE, r->range);
	curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, (void *)r);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)r);
	rf_http_easy_common(h, e, f, &r->hdrs);
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
	if (res < 0) {
		/* Every failure of a read is reported through rf_fail just
		 * before it completes: keep that message for its owner. */
		pthread_mutex_lock(&h->fail_mu);
		struct rf_http_fail *fl = &h->fails[h->nfails_seen++ % RF_HTTP_FAILS];
		fl->file = r->file;
		fl->offset = r->offset;
		snprintf(fl->msg, sizeof fl->msg, "%s", h->diag->msg);
		pthread_mutex_unlock(&h->fail_mu);
	}
	if (r->cache && res == (int64_t)r->len) {
		const struct rf_http_file *f = &h->files[r->file];
		rf_cache_put(h->cache, f->name, f->version, r->offset, r->buf, r->len);
	}
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
	const struct rf_http_file *f = &h->files[file];
	int cache = f->cached && !suffix && len >= RF_CACHE_MIN_READ;
	if (cache && rf_cache_get(h->cache, f->name, f->version, offset, buf, len)) {
		/* A hit: complete now, without a slot. */
		rf_io_done *d = &h->ready[(h->ready_head + h->ready_count) % h->qd];
		d->tag = tag;
		d->res = (int64_t)len;
		h->ready_count++;
		h->outstanding++;
		return 0;
	}
	unsigned idx = h->free_stack[--h->nfree];
	struct rf_http_req *r = &h->reqs[idx];
	r->tag = tag;
	r->file = file;
	r->suffix = suffix;
	r->cache = cache;
	r->offset = offset;
	r->buf = buf;
	r->len = len;
	r->done = 0;
	r->fails = 0;
	r->state = SLOT_PENDING;
	h->outstanding++;
	return 0;
}

struct now_buf {
	char *p;
	size_t cap, got;
};

static size_t
now_body(char *p, size_t size, size_t n, void *arg)
{
	struct now_buf *b = arg;
	size_t len = size * n;
	if (len > b->cap - b->got)
		return 0; /* more than asked: fail the transfer */
	memcpy(b->p + b->got, p, len);
	b->got += len;
	return len;
}

int64_t
rf_http_read_now(rf_http *h, int file, uint64_t offset, void *buf, size_t len)
{
	if (!h || file < 0 || (unsigned)file >= h->nfiles || !len)
		return -EINVAL;
	CURL *e = curl_easy_init();
	if (!e)
		return -ENOMEM;
	struct curl_slist *hdrs = NULL;
	struct now_buf b = {buf, len, 0};
	char range[64];
	snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, offset, offset + len - 1);
	rf_http_easy_common(h, e, &h->files[file], &hdrs);
	curl_easy_setopt(e, CURLOPT_RANGE, range);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, now_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)&b);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)(h->stall_ms + 999) / 1000);
	CURLcode rc = curl_easy_perform(e);
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(e);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK || status != 206)
		return rc == CURLE_OK ? rf_http_status_errno(status) : -EIO;
	return (int64_t)b.got;
}

int
rf_http_read_error(rf_http *h, int file, uint64_t offset, char *buf, size_t cap)
{
	int found = 0;
	pthread_mutex_lock(&h->fail_mu);
	for (unsigned i = 0; i < RF_HTTP_FAILS && !found; i++) {
		const struct rf_http_fail *fl = &h->fails[(h->nfails_seen - 1 - i) % RF_HTTP_FAILS];
		if (i < h->nfails_seen && fl->file == file && fl->offset == offset) {
			snprintf(buf, cap, "%s", fl->msg);
			found = 1;
		}
	}
	pthread_mutex_unlock(&h->fail_mu);
	return found;
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
				now = rf_http_now_ns();
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

int
rf_http_transient(CURLcode rc)
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
void
rf_http_describe_body(const struct rf_http_req *r, char *out, size_t cap)
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

int
rf_http_status_errno(long status)
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
	r->due_ns = rf_http_now_ns() + (int64_t)ms * 1000000;
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
		if (rf_http_transient(rc)) {
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
	rf_http_describe_body(r, body, sizeof body);
	if (status == 429 || status >= 500) {
		snprintf(why, sizeof why, "HTTP %ld%s", status, body);
		schedule_retry(h, idx, why);
		return;
	}
	/* A missing NAME.rfs is most often a sharded pack's name: its files
	 * are NAME-00000.rfs... and the manifest NAME.rfm. */
	const char *name = h->files[r->file].name;
	size_t nl = strcspn(name, "?#");
	char hint[RF_ERRMSG_MAX / 2] = "";
	if ((status == 404 || status == 410) && nl > 4 && memcmp(name + nl - 4, ".rfs", 4) == 0)
		snprintf(hint, sizeof hint, " (if a sharded pack was written as %.*s, its shards "
			 "are %.*s-00000.rfs...: open its manifest %.*s.rfm)", (int)nl, name,
			 (int)(nl - 4), name, (int)(nl - 4), name);
	rf_fail(h->diag, rf_http_status_errno(status), "GET %s (%s): HTTP %ld%s%s",
		file_label(h, r), range_label(r), status, body, hint);
	complete(h, idx, rf_http_status_errno(status));
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
		int64_t now = rf_http_now_ns(), next = INT64_MAX;
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
rf_http_pread(rf_http *h, int file, void *buf, size_t len, uint64_t offset, size_t *got)
{
	if (got)
		*got = 0;
	int rc = rf_http_read(h, file, offset, buf, len, 0);
	if (rc < 0)
		return rc == -EAGAIN ? rf_fail(h->diag, -EBUSY, "http: reads are outstanding") : rc;
	rf_io_done d = {0};
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
