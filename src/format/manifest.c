/* SPDX-License-Identifier: MIT */
/*
 * The pack manifest (manifest.h, docs/format.md "Manifest"): a line-based
 * text file, parsed strictly so that a torn or edited manifest is refused
 * rather than half-read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"

#include "format/format.h"
#include "format/manifest.h"

#define MAGIC_LINE "ringfeed-manifest 1\n"

void
rf_manifest_free(rf_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nshards; i++)
		free(m->shards[i].name);
	free(m->shards);
	memset(m, 0, sizeof *m);
}

/* A cursor over the text, one line at a time. */
struct cur {
	const char *p, *end;
	uint64_t line;
};

static int
name_ok(const char *s, size_t n)
{
	if (n == 0 || n > RF_MANIFEST_NAME_MAX || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c == '/' || c == 0x7f)
			return 0;
	}
	return 1;
}

/* Next token of the line: up to a space or the newline.  *last is set when
 * the token ends the line. */
static int
token(struct cur *c, const char **tok, size_t *len, int *last)
{
	const char *s = c->p;
	while (c->p < c->end && *c->p != ' ' && *c->p != '\n')
		c->p++;
	if (c->p == c->end || c->p == s)
		return -1;
	*tok = s;
	*len = (size_t)(c->p - s);
	*last = *c->p == '\n';
	c->p++;
	return 0;
}

static int
parse_u64(const char *s, size_t n, int base, uint64_t *out)
{
	if (n == 0 || n > 20 || (base == 16 && n != 16) || (base == 10 && n > 1 && s[0] == '0'))
		return -1;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		int dgt;
		if (s[i] >= '0' && s[i] <= '9')
			dgt = s[i] - '0';
		else if (base == 16 && s[i] >= 'a' && s[i] <= 'f')
			dgt = s[i] - 'a' + 10;
		else
			return -1;
		if (v > (UINT64_MAX - (uint64_t)dgt) / (uint64_t)base)
			return -1;
		v = v * (uint64_t)base + (uint64_t)dgt;
	}
	*out = v;
	return 0;
}

/* A line "KEY VALUE\n" with a number VALUE. */
static int
keyed(struct cur *c, const char *key, int base, uint64_t *out)
{
	const char *t;
	size_t n;
	int last;
	c->line++;
	if (token(c, &t, &n, &last) < 0 || last || n != strlen(key) || memcmp(t, key, n) != 0)
		return -1;
	if (token(c, &t, &n, &last) < 0 || !last)
		return -1;
	return parse_u64(t, n, base, out);
}

int
rf_manifest_parse(const char *text, size_t len, rf_manifest *out, const char *what, rf_diag *d)
{
	memset(out, 0, sizeof *out);
	size_t ml = strlen(MAGIC_LINE);
	if (len < 18 || memcmp(text, "ringfeed-manifest ", 18) != 0)
		return rf_fail(d, RF_EFORMAT, "%s: not a ringfeed manifest (no \"ringfeed-manifest\" "
			       "line)", what);
	if (len < ml || memcmp(text, MAGIC_LINE, ml) != 0)
		return rf_fail(d, RF_EFORMAT, "%s: manifest version is not 1", what);
	struct cur c = {text + ml, text + len, 1};
	uint64_t pack, pid, count;
	if (keyed(&c, "pack", 16, &pack) < 0 || pack == 0)
		goto bad;
	if (keyed(&c, "writer_pid", 10, &pid) < 0 || pid == 0 || pid > INT32_MAX)
		goto bad;
	if (keyed(&c, "shards", 10, &count) < 0 || count == 0 || count > RF_MANIFEST_MAX_SHARDS)
		goto bad;
	out->pack_id = pack;
	out->writer_pid = (long)pid;
	out->shards = calloc((size_t)count, sizeof *out->shards);
	if (!out->shards)
		return rf_fail(d, -ENOMEM, "%s: out of memory for %" PRIu64 " manifest entries", what,
			       count);
	for (uint64_t i = 0; i < count; i++) {
		rf_manifest_shard *s = &out->shards[i];
		const char *t;
		size_t n;
		int last;
		c.line++;
		if (token(&c, &t, &n, &last) < 0 || last || n != 5 || memcmp(t, "shard", 5) != 0)
			goto bad;
		if (token(&c, &t, &n, &last) < 0 || last || parse_u64(t, n, 10, &s->size) < 0)
			goto bad;
		if (token(&c, &t, &n, &last) < 0 || last || parse_u64(t, n, 10, &s->samples) < 0)
			goto bad;
		if (token(&c, &t, &n, &last) < 0 || last || parse_u64(t, n, 16, &s->footer_xxh3) < 0)
			goto bad;
		if (token(&c, &t, &n, &last) < 0 || !last || !name_ok(t, n))
			goto bad;
		if (!(s->name = strndup(t, n))) {
			rf_manifest_free(out);
			return rf_fail(d, -ENOMEM, "%s: out of memory", what);
		}
		out->nshards++;
		for (size_t j = 0; j < i; j++)
			if (strcmp(out->shards[j].name, s->name) == 0)
				goto bad;
	}
	size_t body = (size_t)(c.p - text);
	uint64_t sum;
	if (keyed(&c, "xxh3", 16, &sum) < 0)
		goto bad;
	if (c.p != c.end) {
		c.line++;
		goto bad;
	}
	if (XXH3_64bits(text, body) != sum) {
		rf_manifest_free(out);
		return rf_fail(d, RF_ECORRUPT, "%s: manifest checksum mismatch (the file was changed "
			       "or torn)", what);
	}
	return 0;
bad:
	rf_manifest_free(out);
	return rf_fail(d, RF_ECORRUPT, "%s: manifest line %" PRIu64 ": malformed (docs/format.md, "
		       "\"Manifest\")", what, c.line);
}

int
rf_manifest_read(const char *path, rf_manifest *out, rf_diag *d)
{
	memset(out, 0, sizeof *out);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return rf_fail(d, -errno, "%s: cannot open: %s", path, rf_strerror(-errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rf_fail(d, RF_EFORMAT, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > RF_MANIFEST_MAX_BYTES) {
		close(fd);
		return rf_fail(d, RF_ECORRUPT, "%s: a manifest of %lld bytes, more than any writer "
			       "makes", path, (long long)st.st_size);
	}
	size_t len = (size_t)st.st_size;
	char *buf = malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		return rf_fail(d, -ENOMEM, "%s: out of memory for a %zu-byte manifest", path, len);
	}
	size_t done = 0;
	while (done < len) {
		ssize_t r = pread(fd, buf + done, len - done, (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			free(buf);
			close(fd);
			return rf_fail(d, r < 0 ? -e : RF_ETRUNCATED, "%s: read: %s", path,
				       r < 0 ? rf_strerror(-e) : "the file shrank while read");
		}
		done += (size_t)r;
	}
	close(fd);
	int rc = rf_manifest_parse(buf, len, out, path, d);
	free(buf);
	return rc;
}

static int
append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) RF_PRINTF(4, 5);

static int
append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -1;
		if (*buf && (size_t)n < *cap - *len) {
			*len += (size_t)n;
			return 0;
		}
		size_t ncap = (*cap ? *cap * 2 : 4096) + (size_t)n;
		char *b = realloc(*buf, ncap);
		if (!b)
			return -1;
		*buf = b;
		*cap = ncap;
	}
}

char *
rf_manifest_format(const rf_manifest *m, size_t *outlen)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = append(&buf, &len, &cap, "%spack %016" PRIx64 "\nwriter_pid %ld\nshards %zu\n",
			MAGIC_LINE, m->pack_id, m->writer_pid, m->nshards);
	for (size_t i = 0; rc == 0 && i < m->nshards; i++) {
		const rf_manifest_shard *s = &m->shards[i];
		rc = append(&buf, &len, &cap, "shard %" PRIu64 " %" PRIu64 " %016" PRIx64 " %s\n",
			    s->size, s->samples, s->footer_xxh3, s->name);
	}
	if (rc == 0)
		rc = append(&buf, &len, &cap, "xxh3 %016" PRIx64 "\n", XXH3_64bits(buf, len));
	if (rc < 0) {
		free(buf);
		return NULL;
	}
	*outlen = len;
	return buf;
}

char *
rf_manifest_path_for(const char *path)
{
	size_t len = strlen(path);
	if (len >= 4 && strcmp(path + len - 4, ".rfs") == 0)
		len -= 4;
	char *s = malloc(len + sizeof RF_MANIFEST_EXT);
	if (!s)
		return NULL;
	memcpy(s, path, len);
	memcpy(s + len, RF_MANIFEST_EXT, sizeof RF_MANIFEST_EXT);
	return s;
}

char *
rf_manifest_tmp_path(const char *manifest_path, const char *name, long pid)
{
	const char *slash = strrchr(manifest_path, '/');
	int dl = slash ? (int)(slash - manifest_path + 1) : 0;
	char *s = NULL;
	int r = pid > 0 ? asprintf(&s, "%.*s%s.tmp.%ld", dl, manifest_path, name, pid)
			: asprintf(&s, "%.*s%s", dl, manifest_path, name);
	return r < 0 ? NULL : s;
}

char *
rf_manifest_shard_path(const char *manifest_path, const char *name)
{
	return rf_manifest_tmp_path(manifest_path, name, 0);
}

int
rf_shard_peek_pack(const char *path, uint64_t *pack_id)
{
	uint8_t h[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, h, sizeof h, 0) : -1;
	close(fd);
	if (n != (ssize_t)sizeof h || memcmp(h, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) != 0)
		return 0;
	*pack_id = rf_le32(h + 8) >= 3 ? rf_le64(h + 24) : 0;
	return 1;
}
