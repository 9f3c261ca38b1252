/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack --tar GLOB`: WebDataset-style tar files read with
 * libarchive, members grouped into samples by key, each extension a field.
 * Built only with libarchive.
 */
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "pack_images_impl.h"

/* ----------------------------------------------------------- tar files */

typedef struct tar_job {
	ipack *p;
	const char *path;
	size_t first, count;   /* its items */
	char *err;             /* a failure of the whole file */
} tar_job;

/* Split a member's path into key and extension (WebDataset: the extension
 * starts at the first dot of the file name).  Returns the key length. */
static size_t
split_key(const char *path, const char **ext)
{
	const char *base = strrchr(path, '/');
	const char *dot;

	base = base ? base + 1 : path;
	dot = strchr(base, '.');
	if (!dot) {
		*ext = "";
		return strlen(path);
	}
	*ext = dot + 1;
	return (size_t)(dot - path);
}

enum member_kind { M_IMAGE, M_CLS, M_TXT, M_JSON, M_OTHER };

static enum member_kind
member_kind(const char *ext)
{
	if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg") || !strcasecmp(ext, "png"))
		return M_IMAGE;
	if (!strcasecmp(ext, "cls"))
		return M_CLS;
	if (!strcasecmp(ext, "txt"))
		return M_TXT;
	if (!strcasecmp(ext, "json"))
		return M_JSON;
	return M_OTHER;
}

static struct archive *
tar_open(const char *path)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rf_cli_error("%s: %s", path, archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* One pass over the member names: the samples (keys) and which fields
 * appear, so the schema and the items exist before any data is read. */
static int
tar_scan(ipack *p, const char *path, size_t *others)
{
	struct archive *a = tar_open(path);
	struct archive_entry *e;
	char *last = NULL;
	size_t lastlen = 0;
	item *cur = NULL;
	int r, ret = 0;

	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *ext;
		if (archive_entry_filetype(e) != AE_IFREG || !name)
			continue;
		size_t klen = split_key(name, &ext);
		enum member_kind k = member_kind(ext);
		if (k == M_OTHER) {
			(*others)++;
			continue;
		}
		if (!cur || klen != lastlen || memcmp(last, name, klen) != 0) {
			free(last);
			if (!(last = strndup(name, klen)) || !(cur = ipack_new_item(p)) ||
			    !(cur->name = ipack_xasprintf("%s:%s", path, last))) {
				ret = ipack_oom();
				break;
			}
			lastlen = klen;
		}
		p->has_txt |= k == M_TXT;
		p->has_json |= k == M_JSON;
		p->has_label |= k == M_CLS;
	}
	if (ret == 0 && r != ARCHIVE_EOF) {
		rf_cli_error("%s: %s", path, archive_error_string(a));
		ret = -1;
	}
	free(last);
	archive_read_free(a);
	return ret;
}

static uint8_t *
member_data(struct archive *a, struct archive_entry *e, size_t *len)
{
	la_int64_t size = archive_entry_size(e);
	uint8_t *buf;
	size_t got = 0;

	if (size < 0 || (uint64_t)size > (1ull << 32))
		return NULL;
	if (!(buf = malloc(size ? (size_t)size : 1)))
		return NULL;
	while (got < (size_t)size) {
		la_ssize_t n = archive_read_data(a, buf + got, (size_t)size - got);
		if (n <= 0) {
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	*len = got;
	return buf;
}

/* Read one tar's members into its items (the same walk as tar_scan). */
static void *
tar_read(void *arg)
{
	tar_job *t = arg;
	ipack *p = t->p;
	struct archive *a;
	struct archive_entry *e;
	size_t idx = t->first - 1, seen = 0;
	char *last = NULL;
	size_t lastlen = 0;
	int r;

	if (!(a = archive_read_new())) {
		t->err = strdup("out of memory");
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_filename(a, t->path, 1 << 16) != ARCHIVE_OK) {
		t->err = ipack_xasprintf("%s", archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *ext;
		if (archive_entry_filetype(e) != AE_IFREG || !name)
			continue;
		size_t klen = split_key(name, &ext);
		enum member_kind k = member_kind(ext);
		if (k == M_OTHER)
			continue;
		if (!seen || klen != lastlen || memcmp(last, name, klen) != 0) {
			free(last);
			last = strndup(name, klen);
			lastlen = klen;
			idx++;
			seen++;
			if (!last || idx >= t->first + t->count) {
				t->err = strdup("the tar file changed while packing");
				goto out;
			}
		}
		item *it = &p->items[idx];
		size_t len = 0;
		uint8_t *d = member_data(a, e, &len);
		if (!d) {
			if (!it->err)
				it->err = ipack_xasprintf("cannot read member %s: %s", name,
						    archive_error_string(a) ? archive_error_string(a)
									    : "too large or short");
			continue;
		}
		switch (k) {
		case M_IMAGE:
			if (it->data && !it->err)
				it->err = ipack_xasprintf("two images in one sample (%s)", name);
			free(it->data);
			it->data = d;
			it->len = len;
			break;
		case M_CLS: {
			char txt[32];
			char *end;
			size_t m = len < sizeof txt - 1 ? len : sizeof txt - 1;
			memcpy(txt, d, m);
			txt[m] = 0;
			errno = 0;
			long long v = strtoll(txt, &end, 10);
			while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
				end++;
			if (errno || end == txt || *end || len >= sizeof txt) {
				if (!it->err)
					it->err = ipack_xasprintf("%s: not an integer class", name);
			} else {
				it->label = v;
				it->has_label = 1;
			}
			free(d);
			break;
		}
		case M_TXT:
			free(it->txt);
			it->txt = d;
			it->txt_len = len;
			break;
		default:
			free(it->json);
			it->json = d;
			it->json_len = len;
			break;
		}
	}
	if (r != ARCHIVE_EOF)
		t->err = ipack_xasprintf("%s", archive_error_string(a));
out:
	free(last);
	archive_read_free(a);
	return NULL;
}

static int
read_tars(ipack *p, tar_job *jobs, size_t njobs)
{
	pthread_t th[256];
	int ret = 0;

	for (size_t i = 0; i < njobs; i += p->sh.threads) {
		size_t n = njobs - i < p->sh.threads ? njobs - i : p->sh.threads, started = 0;
		int ok[256];
		for (size_t k = 0; k < n; k++)
			ok[k] = pthread_create(&th[k], NULL, tar_read, &jobs[i + k]) == 0;
		for (size_t k = 0; k < n; k++) {
			if (ok[k]) {
				pthread_join(th[k], NULL);
				started++;
			} else {
				tar_read(&jobs[i + k]);
			}
		}
		for (size_t k = 0; k < n; k++) {
			if (jobs[i + k].err) {
				rf_cli_error("%s: %s", jobs[i + k].path, jobs[i + k].err);
				ret = -1;
			}
		}
		if (ret < 0)
			break;
	}
	return ret;
}

/* The tar files and their samples (names only: no data is read yet). */
int
ipack_scan_tars(ipack *p)
{
	size_t others = 0;
	int rc = glob(p->tar_glob, GLOB_ERR, NULL, &p->tars);

	if (rc == GLOB_NOMATCH) {
		rf_cli_error("--tar: no file matches '%s'", p->tar_glob);
		return -1;
	}
	if (rc != 0) {
		rf_cli_error("--tar: cannot expand '%s'", p->tar_glob);
		return -1;
	}
	if (!(p->jobs = calloc(p->tars.gl_pathc, sizeof *p->jobs)))
		return ipack_oom();
	p->njobs = p->tars.gl_pathc;
	for (size_t i = 0; i < p->njobs; i++) {
		p->jobs[i].p = p;
		p->jobs[i].path = p->tars.gl_pathv[i];
		p->jobs[i].first = p->nitems;
		if (tar_scan(p, p->jobs[i].path, &others) < 0)
			return -1;
		p->jobs[i].count = p->nitems - p->jobs[i].first;
	}
	if (others)
		rf_cli_note(1, "%zu tar member(s) with extensions other than jpg, jpeg, png, cls, "
			    "txt and json are left out", others);
	if (p->nitems == 0) {
		rf_cli_error("--tar %s: no samples", p->tar_glob);
		return -1;
	}
	rf_cli_note(2, "%zu samples in %zu tar file(s)", p->nitems, p->njobs);
	return 0;
}

/* Memory: with --shuffle every tar is read first (any sample may come
 * next); without, THREADS tars at a time. */
int
ipack_pack_tars(ipack *p)
{
	if (p->sh.shuffle) {
		if (read_tars(p, p->jobs, p->njobs) < 0)
			return -1;
		return ipack_pack_items(p, 0, p->nitems);
	}
	for (size_t i = 0; i < p->njobs; i += p->sh.threads) {
		size_t n = p->njobs - i < p->sh.threads ? p->njobs - i : p->sh.threads;
		int rc;
		if (read_tars(p, p->jobs + i, n) < 0)
			return -1;
		size_t lo = p->jobs[i].first;
		size_t hi = p->jobs[i + n - 1].first + p->jobs[i + n - 1].count;
		if ((rc = ipack_pack_items(p, lo, hi)) != 0)
			return rc;
	}
	return 0;
}
