/* SPDX-License-Identifier: MIT */
/*
 * A pack's manifest (docs/format.md, "Manifest"): the small text file
 * BASE.rfm that a writer renames into place after every shard of a pack is
 * complete, naming the pack id and each shard (name, size, samples, footer
 * checksum).  It is the pack's commit point: a reader given the manifest, or
 * a directory holding one, reads exactly the shards it lists, and only those
 * of its pack.  It also lets a reader that cannot list a directory (HTTP)
 * find the shards.
 *
 * Threads: these functions touch only their arguments.
 */
#ifndef RF_MANIFEST_H
#define RF_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define RF_MANIFEST_EXT ".rfm"
#define RF_MANIFEST_MAX_BYTES (UINT64_C(64) << 20) /* 100000 shards of < 300 bytes each */
#define RF_MANIFEST_MAX_SHARDS 100000
#define RF_MANIFEST_NAME_MAX 255

typedef struct rf_manifest_shard {
	char *name;            /* file name in the manifest's directory: no '/',
	                          no whitespace or control byte, not "." or ".." */
	uint64_t size;         /* file size in bytes */
	uint64_t samples;      /* the footer's nsamples */
	uint64_t footer_xxh3;  /* the footer's footer_xxh3 (bytes 48..56) */
} rf_manifest_shard;

typedef struct rf_manifest {
	uint64_t pack_id;      /* nonzero; the header's pack id of every shard */
	long writer_pid;       /* the writing process: until it has renamed
	                          shard NAME into place, the shard is at
	                          NAME.tmp.PID (see rf_manifest_tmp_name) */
	size_t nshards;
	rf_manifest_shard *shards;
} rf_manifest;

/* Parse a manifest's bytes (not NUL-terminated; `what` names it in
 * messages, e.g. its path or URL).  Checks the first line, every line's
 * syntax, the shard count and the closing checksum line.  Returns 0 and
 * fills *out (free with rf_manifest_free), RF_EFORMAT (not a manifest, or a
 * version other than 1), RF_ECORRUPT (bad syntax, count or checksum) or
 * -ENOMEM.  The message is in d. */
int rf_manifest_parse(const char *text, size_t len, rf_manifest *out, const char *what,
		      rf_diag *d);

/* Read and parse the file at path.  Also -errno for a failed open or read,
 * RF_ECORRUPT for a file over RF_MANIFEST_MAX_BYTES. */
int rf_manifest_read(const char *path, rf_manifest *out, rf_diag *d);

/* The manifest's text (malloc'd, NUL-terminated, *len bytes without the
 * NUL), or NULL when out of memory. */
char *rf_manifest_format(const rf_manifest *m, size_t *len);

void rf_manifest_free(rf_manifest *m);

/* The manifest path of a writer's output path: BASE.rfm where BASE is path
 * without a trailing ".rfs".  malloc'd, NULL when out of memory. */
char *rf_manifest_path_for(const char *path);

/* DIR/NAME (dir is the manifest's directory) and DIR/NAME.tmp.PID; malloc'd. */
char *rf_manifest_shard_path(const char *manifest_path, const char *name);
char *rf_manifest_tmp_path(const char *manifest_path, const char *name, long pid);

/* A shard's pack id without a full check: its header's version and, for
 * version 3 and up, the u64 at offset 24.  Returns 1 and *pack_id (0 for
 * versions 1 and 2), or 0 when the file cannot be read or does not start
 * like a shard. */
int rf_shard_peek_pack(const char *path, uint64_t *pack_id);

#endif
