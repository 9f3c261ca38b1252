/* SPDX-License-Identifier: MIT */
/*
 * The local cache of remote chunks (rf_config.cache_dir, cache_bytes): the
 * bytes of a ranged read of a URL kept in a file of their own, so that a
 * later read of the same range (the next epoch, another rank on the node)
 * is served from local disk.
 *
 * An entry is one file named after its key: the XXH3-64 of the URL
 * without its query (a presigned URL's signature changes, its object does
 * not), the object's version (given by the owner: its size and pack id), the offset and
 * the length.  Reads shorter than RF_CACHE_MIN_READ (single samples of the
 * full shuffle) are not cached: a file each would cost more than it saves.  It starts with a 64-byte header (magic, the key, the XXH3-64 of
 * the payload) followed by the payload.  An entry is written whole to a
 * temporary file and renamed into place, so a reader sees it complete or
 * not at all; it is checked (header and XXH3-64) every time it is reused,
 * and one that fails is deleted and reported as a miss: the caller fetches
 * the bytes again, a corrupted file is never delivered.
 *
 * Size: the payloads and headers of the entries never add up to more than
 * `cap` bytes.  Every insertion, in every process using the directory,
 * runs under an exclusive flock(2) of DIR/.lock, which guards the running
 * total in DIR/.usage; when an entry would not fit, the directory is
 * scanned and the least recently used entries (oldest mtime; a hit
 * refreshes it) are deleted until it does, down to 7/8 of the cap so that
 * scans are rare.  Readers take no lock: an entry deleted while it is read
 * stays readable through its open descriptor.  Leftover temporary files
 * (a process killed mid-write) are deleted by the next scan.
 *
 * Thread rules: one thread per handle (the reader's).
 */
#ifndef RF_IO_CACHE_H
#define RF_IO_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct rf_cache rf_cache;

#define RF_CACHE_HEADER 64
#define RF_CACHE_MIN_READ 4096

/* Open (creating it if needed) the cache directory `dir` of at most `cap`
 * bytes.  A directory that cannot be made or written is an error naming
 * it. */
int rf_cache_open(rf_cache **out, const char *dir, uint64_t cap, rf_diag *diag);
void rf_cache_close(rf_cache **c);
/* Where later messages go (the owner's diag moved). */
void rf_cache_set_diag(rf_cache *c, rf_diag *diag);

/* Fill buf with the len bytes at `offset` of `url` (version `version`)
 * when the cache holds them and they pass their check: 1; else 0 (a
 * failed entry is deleted and counted in `dropped`). */
int rf_cache_get(rf_cache *c, const char *url, uint64_t version, uint64_t offset, void *buf,
		 size_t len);

/* Keep the len bytes at `offset` of `url`.  Best effort: a full disk or
 * an entry larger than the cap is skipped (logged once), never an error
 * of the read. */
void rf_cache_put(rf_cache *c, const char *url, uint64_t version, uint64_t offset,
		  const void *buf, size_t len);

/* Delete the entry of the len bytes at `offset` of `url`, if there is
 * one: its bytes passed the cache's own check but failed the owner's (a
 * chunk corrupted in transit before it was stored), so that the next read
 * fetches them again.  Safe from any thread (an unlink by name). */
void rf_cache_drop(rf_cache *c, const char *url, uint64_t version, uint64_t offset, size_t len);

struct rf_cache_stats {
	uint64_t hits, misses, dropped, stored, evicted;
};
void rf_cache_stats(const rf_cache *c, struct rf_cache_stats *out);

/* Bytes of the entries now in `dir` (payloads and headers), for tests and
 * tools; -errno when it cannot be read. */
int64_t rf_cache_dir_bytes(const char *dir);

#endif
