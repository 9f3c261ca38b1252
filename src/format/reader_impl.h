/* SPDX-License-Identifier: MIT */
/*
 * Inside the dataset reader: the handle and its shards, shared by
 *   reader.c        the public API: errors, config, open, close
 *   reader_path.c   path resolution: directories, globs, manifests, remote
 *                   expansion, and the one-pack rule on the loaded shards
 *   reader_shard.c  opening one shard: remote heads and tails, footer,
 *                   header, index and schema checks
 *   reader_read.c   reads and verification: rf_dataset_read, the chunk
 *                   checksums, rf_dataset_read_sums and the accessors
 */
#ifndef RF_READER_IMPL_H
#define RF_READER_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "format/format.h"
#include "io/http.h"

struct shard {
	char *path;
	int fd;
	/* A remote shard (a URL): its handle in the dataset's rf_http, -1 for
	 * a local file; and the head and tail fetched together at open, which
	 * serve the footer, header and (usually) index reads. */
	int hfile;
	rf_http *http;
	uint8_t *head, *tail;
	size_t head_len, tail_len;
	uint64_t file_size;
	uint64_t header_end;
	uint64_t index_offset;
	uint64_t nchunks;
	uint64_t nsamples;
	uint64_t first_chunk;
	uint64_t first_sample;
	uint32_t version;
	uint64_t pack_id;      /* version 3, else 0 */
	uint32_t pack_shards;  /* version 3: shards in its pack, else 0 */
	uint64_t footer_xxh3;
};

struct rf_dataset {
	rf_diag diag;
	int verify;
	rf_schema schema;
	struct shard *shards;
	size_t nshards;
	rf_chunk_info *chunks;
	uint64_t nchunks;
	uint64_t nsamples;
	uint64_t max_raw, max_span;

	/* One-chunk cache for rf_dataset_read. */
	uint64_t cached;       /* chunk number, UINT64_MAX for none */
	uint8_t *stored;
	uint64_t stored_cap;
	uint8_t *raw;
	uint64_t raw_cap;
	ZSTD_DCtx *dctx;
	rf_chunk_sections sec;

	rf_http *http;         /* remote shards' reader, NULL when all are local */
};

/* What a manifest says of one of its shards, checked once it is loaded. */
struct expect {
	char *manifest;        /* the manifest's path; NULL: not from a manifest */
	char *final;           /* the shard's own name when v is its temporary
	                          name (a committed pack not yet renamed) */
	uint64_t pack, size, samples, footer_xxh3;
	int listed;            /* from a directory listing or a glob */
};

struct pathlist {
	char **v;
	struct expect *ex;     /* parallel to v */
	size_t n, cap;
};

/* Shards whose ends are fetched together: bounds the memory of an open
 * (76 KiB a shard) whatever the number of shards. */
#define RF_REMOTE_WINDOW 64

/* reader_path.c */
int rf_rd_expand(struct pathlist *pl, const char *p, rf_diag *d);
/* rf_http_expand's callback: a shard URL, with what a manifest says of it. */
int rf_rd_pl_add_url(void *arg, const char *url, const struct rf_http_expect *hx);
void rf_rd_pl_free(struct pathlist *pl);
int rf_rd_check_packs(rf_dataset *ds, const struct pathlist *pl, rf_diag *d);

/* reader_shard.c */
int rf_rd_remote_prefetch(rf_dataset *ds, size_t from, size_t to, rf_diag *d);
int rf_rd_pread_full(int fd, void *buf, uint64_t len, uint64_t off, const char *path,
		     const char *what, rf_diag *d);
int rf_rd_shard_read(struct shard *sh, void *buf, uint64_t len, uint64_t off, const char *what,
		     rf_diag *d);
int rf_rd_shard_load(struct shard *sh, rf_schema *schema, int have_schema, rf_chunk_info **chunks,
		     uint64_t *nchunks, uint64_t *chunks_cap, uint32_t shard_no, rf_diag *d);

#endif
