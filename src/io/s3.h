/* SPDX-License-Identifier: MIT */
/*
 * S3 addressing, credentials and listing for the remote reader (http.h):
 * turning s3://bucket/key into the URL to request and the SigV4 settings,
 * and parsing ListObjectsV2 pages.  No I/O here but reading the shared
 * credentials file.
 */
#ifndef RF_IO_S3_H
#define RF_IO_S3_H

#include <stddef.h>

#include "common.h"

struct rf_s3 {
	char *access;      /* NULL: requests go unsigned */
	char *secret;
	char *token;       /* session token or NULL */
	char *region;
	char *endpoint;    /* AWS_ENDPOINT_URL(_S3) without a trailing '/', or NULL */
	char sigv4[128];   /* CURLOPT_AWS_SIGV4's "aws:amz:REGION:s3" */
	char *userpwd;     /* "ACCESS:SECRET" */
};

/* Read the environment and the shared credentials file.  Never fails for
 * missing credentials (unsigned requests); -ENOMEM only. */
int rf_s3_init(struct rf_s3 *s, rf_diag *d);
void rf_s3_free(struct rf_s3 *s);

/* Split s3://bucket/key: *bucket and *key are malloc'd (key may be "").
 * RF_EUSAGE for a URL with no bucket. */
int rf_s3_split(const char *url, char **bucket, char **key, rf_diag *d);

/* The https URL of an object or, with key NULL, of the bucket itself
 * (for listing; `query` appended after '?' when not NULL).  malloc'd. */
char *rf_s3_url(const struct rf_s3 *s, const char *bucket, const char *key, const char *query);

/* Percent-encode everything but RFC 3986's unreserved characters (and '/'
 * when keep_slash), as SigV4's canonical form wants.  malloc'd. */
char *rf_url_encode(const char *str, int keep_slash);

/* One ListObjectsV2 response: calls key(arg, KEY) for each <Key> (entities
 * decoded), sets *truncated and *next (malloc'd continuation token, or
 * NULL).  RF_EFORMAT when it is not a ListBucketResult. */
int rf_s3_parse_list(const char *xml, size_t len, int (*key)(void *arg, const char *k), void *arg,
		     int *truncated, char **next);

/* The text of the first <tag>...</tag> of an XML error body (malloc'd, or
 * NULL): S3's <Code> and <Message>. */
char *rf_xml_text(const char *xml, size_t len, const char *tag);

#endif
