/* SPDX-License-Identifier: MIT */
/*
 * S3 addressing, credentials and ListObjectsV2 parsing (s3.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/s3.h"

static char *
env_dup(const char *a, const char *b)
{
	const char *v = getenv(a);
	if ((!v || !*v) && b)
		v = getenv(b);
	return v && *v ? strdup(v) : NULL;
}

static char *
trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* The profile's keys from an INI file, filling only what is still NULL.
 * `config` files name their sections "profile NAME" (but "default"). */
static void
read_ini(const char *path, const char *profile, int config, struct rf_s3 *s)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char want[256];
	if (config && strcmp(profile, "default") != 0)
		snprintf(want, sizeof want, "profile %s", profile);
	else
		snprintf(want, sizeof want, "%s", profile);
	char line[1024];
	int in = 0;
	while (fgets(line, sizeof line, f)) {
		char *l = trim(line);
		if (*l == '#' || *l == ';' || !*l)
			continue;
		if (*l == '[') {
			char *e = strchr(l, ']');
			if (e)
				*e = '\0';
			in = strcmp(trim(l + 1), want) == 0;
			continue;
		}
		char *eq = strchr(l, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		char *k = trim(l), *v = trim(eq + 1);
		char **slot = NULL;
		if (strcmp(k, "aws_access_key_id") == 0)
			slot = &s->access;
		else if (strcmp(k, "aws_secret_access_key") == 0)
			slot = &s->secret;
		else if (strcmp(k, "aws_session_token") == 0)
			slot = &s->token;
		else if (strcmp(k, "region") == 0)
			slot = &s->region;
		if (slot && !*slot && *v)
			*slot = strdup(v);
	}
	fclose(f);
}

int
rf_s3_init(struct rf_s3 *s, rf_diag *d)
{
	memset(s, 0, sizeof *s);
	s->access = env_dup("AWS_ACCESS_KEY_ID", NULL);
	s->secret = env_dup("AWS_SECRET_ACCESS_KEY", NULL);
	if (!s->access || !s->secret) {
		/* Keys come as a pair: one from the environment and the other
		 * from a file would sign with a mismatched key. */
		free(s->access);
		free(s->secret);
		s->access = s->secret = NULL;
	} else {
		s->token = env_dup("AWS_SESSION_TOKEN", NULL);
	}
	s->region = env_dup("AWS_REGION", "AWS_DEFAULT_REGION");
	const char *profile = getenv("AWS_PROFILE");
	if (!profile || !*profile)
		profile = "default";
	const char *home = getenv("HOME");
	char path[4096];
	const char *cred = getenv("AWS_SHARED_CREDENTIALS_FILE");
	if (!s->access) {
		if (cred && *cred) {
			read_ini(cred, profile, 0, s);
		} else if (home) {
			snprintf(path, sizeof path, "%s/.aws/credentials", home);
			read_ini(path, profile, 0, s);
		}
		if (!s->access || !s->secret) {
			free(s->access);
			free(s->secret);
			free(s->token);
			s->access = s->secret = s->token = NULL;
		}
	}
	if (!s->region) {
		const char *conf = getenv("AWS_CONFIG_FILE");
		struct rf_s3 tmp;
		memset(&tmp, 0, sizeof tmp);
		if (conf && *conf) {
			read_ini(conf, profile, 1, &tmp);
		} else if (home) {
			snprintf(path, sizeof path, "%s/.aws/config", home);
			read_ini(path, profile, 1, &tmp);
		}
		s->region = tmp.region;
		free(tmp.access);
		free(tmp.secret);
		free(tmp.token);
	}
	if (!s->region)
		s->region = strdup("us-east-1");
	s->endpoint = env_dup("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
	if (s->endpoint) {
		size_t n = strlen(s->endpoint);
		while (n && s->endpoint[n - 1] == '/')
			s->endpoint[--n] = '\0';
	}
	if (!s->region)
		return rf_fail(d, -ENOMEM, "s3: out of memory");
	snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", s->region);
	if (s->access) {
		size_t n = strlen(s->access) + strlen(s->secret) + 2;
		if (!(s->userpwd = malloc(n)))
			return rf_fail(d, -ENOMEM, "s3: out of memory");
		snprintf(s->userpwd, n, "%s:%s", s->access, s->secret);
	}
	return 0;
}

void
rf_s3_free(struct rf_s3 *s)
{
	free(s->access);
	free(s->secret);
	free(s->token);
	free(s->region);
	free(s->endpoint);
	if (s->userpwd) {
		/* The secret should not outlive its use in freed memory. */
		memset(s->userpwd, 0, strlen(s->userpwd));
		free(s->userpwd);
	}
	memset(s, 0, sizeof *s);
}

int
rf_s3_split(const char *url, char **bucket, char **key, rf_diag *d)
{
	*bucket = *key = NULL;
	if (strncmp(url, "s3://", 5) != 0)
		return rf_fail(d, RF_EUSAGE, "%s: not an s3:// URL", url);
	const char *b = url + 5, *slash = strchr(b, '/');
	size_t bl = slash ? (size_t)(slash - b) : strlen(b);
	if (bl == 0)
		return rf_fail(d, RF_EUSAGE, "%s: no bucket in the URL (s3://BUCKET/KEY)", url);
	*bucket = strndup(b, bl);
	*key = strdup(slash ? slash + 1 : "");
	if (!*bucket || !*key) {
		free(*bucket);
		free(*key);
		*bucket = *key = NULL;
		return rf_fail(d, -ENOMEM, "s3: out of memory");
	}
	return 0;
}

char *
rf_url_encode(const char *str, int keep_slash)
{
	size_t n = strlen(str);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
			*o++ = (char)c;
		} else {
			static const char hex[] = "0123456789ABCDEF";
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

char *
rf_s3_url(const struct rf_s3 *s, const char *bucket, const char *key, const char *query)
{
	char *ek = key ? rf_url_encode(key, 1) : NULL;
	if (key && !ek)
		return NULL;
	char *out = NULL;
	int r;
	/* A custom endpoint (MinIO, moto, Ceph...) is addressed path style:
	 * bucket names there need not be valid host names. */
	if (s->endpoint)
		r = asprintf(&out, "%s/%s/%s%s%s", s->endpoint, bucket, ek ? ek : "", query ? "?" : "",
			     query ? query : "");
	else
		r = asprintf(&out, "https://%s.s3.%s.amazonaws.com/%s%s%s", bucket, s->region,
			     ek ? ek : "", query ? "?" : "", query ? query : "");
	free(ek);
	return r < 0 ? NULL : out;
}

/* Decode the five predefined XML entities and numeric ones (ASCII only)
 * in place. */
static void
xml_unescape(char *s)
{
	char *o = s;
	while (*s) {
		if (*s != '&') {
			*o++ = *s++;
			continue;
		}
		static const struct {
			const char *name;
			char c;
		} ent[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
		size_t i;
		for (i = 0; i < sizeof ent / sizeof ent[0]; i++) {
			size_t n = strlen(ent[i].name);
			if (strncmp(s, ent[i].name, n) == 0) {
				*o++ = ent[i].c;
				s += n;
				break;
			}
		}
		if (i < sizeof ent / sizeof ent[0])
			continue;
		if (s[1] == '#') {
			char *end;
			long v = s[2] == 'x' ? strtol(s + 3, &end, 16) : strtol(s + 2, &end, 10);
			if (*end == ';' && v > 0 && v < 128) {
				*o++ = (char)v;
				s = end + 1;
				continue;
			}
		}
		*o++ = *s++;
	}
	*o = '\0';
}

/* The next <tag>text</tag> at or after *pos (bounded by end); malloc'd. */
static char *
next_elem(const char **pos, const char *end, const char *tag)
{
	char open[64], close[64];
	snprintf(open, sizeof open, "<%s>", tag);
	snprintf(close, sizeof close, "</%s>", tag);
	size_t ol = strlen(open), cl = strlen(close);
	for (const char *p = *pos; p + ol <= end; p++) {
		if (memcmp(p, open, ol) != 0)
			continue;
		const char *t = p + ol;
		for (const char *q = t; q + cl <= end; q++) {
			if (memcmp(q, close, cl) == 0) {
				char *v = strndup(t, (size_t)(q - t));
				if (v)
					xml_unescape(v);
				*pos = q + cl;
				return v;
			}
		}
		return NULL;
	}
	return NULL;
}

char *
rf_xml_text(const char *xml, size_t len, const char *tag)
{
	const char *p = xml;
	return next_elem(&p, xml + len, tag);
}

int
rf_s3_parse_list(const char *xml, size_t len, int (*key)(void *arg, const char *k), void *arg,
		 int *truncated, char **next)
{
	*truncated = 0;
	*next = NULL;
	const char *end = xml + len;
	const char *root = NULL;
	for (const char *p = xml; p + 18 <= end; p++)
		if (memcmp(p, "<ListBucketResult", 17) == 0) {
			root = p;
			break;
		}
	if (!root)
		return RF_EFORMAT;
	/* Keys are inside <Contents> elements; CommonPrefixes hold <Prefix>
	 * only, so the first <Key> after each <Contents> is an object. */
	const char *p = root;
	for (;;) {
		const char *c = NULL;
		for (const char *q = p; q + 10 <= end; q++)
			if (memcmp(q, "<Contents>", 10) == 0) {
				c = q + 10;
				break;
			}
		if (!c)
			break;
		p = c;
		char *k = next_elem(&p, end, "Key");
		if (!k)
			return RF_EFORMAT;
		int rc = key(arg, k);
		free(k);
		if (rc < 0)
			return rc;
	}
	p = root;
	char *t = next_elem(&p, end, "IsTruncated");
	*truncated = t && strcmp(t, "true") == 0;
	free(t);
	if (*truncated) {
		p = root;
		*next = next_elem(&p, end, "NextContinuationToken");
		if (!*next)
			return RF_EFORMAT;
	}
	return 0;
}
