/* SPDX-License-Identifier: MIT */
/*
 * ringfeed datasets: the .rfs shard writer (packing) and the random-access
 * reader.  The byte layout of a shard is specified in docs/format.md.
 *
 * A dataset is one or more shards with the same schema.  Samples are numbered
 * from 0 across the shards in the order the shards were opened (a directory or
 * a glob contributes its .rfs files sorted by name).
 *
 * Writing:
 *
 *     rf_schema schema = {0};
 *     rf_schema_add(&schema, "image", RF_DTYPE_U8, 3, (uint64_t[]){28, 28, 1}, -1);
 *     rf_schema_add(&schema, "label", RF_DTYPE_I64, 0, NULL, -1);
 *     rf_writer_config cfg;
 *     rf_writer_config_init(&cfg);
 *     cfg.zstd_level = 3;
 *     rf_writer *w;
 *     int rc = rf_writer_open(&w, "train.rfs", &schema, &cfg);
 *     for (each sample) {
 *         rf_value v[2] = {{img, 784}, {&label, 8}};
 *         if ((rc = rf_writer_add(w, v)) < 0) break;
 *     }
 *     if (rc < 0) rf_writer_abort(&w);          // nothing is left on disk
 *     else rc = rf_writer_close(&w);            // footer, fsync, rename
 *
 * Reading:
 *
 *     rf_dataset *ds;
 *     const char *paths[] = {"data/"};
 *     if (rf_dataset_open(&ds, paths, 1, NULL) < 0) ...  // message via log / errmsg
 *     uint64_t n = rf_dataset_samples(ds);
 *     size_t len;
 *     rc = rf_dataset_read(ds, 17, 0, buf, sizeof buf, &len);
 *     rf_dataset_close(&ds);
 *
 * Threads: a writer or a dataset handle may be used by one thread at a time.
 * Different handles are independent.
 */
#ifndef RINGFEED_DATASET_H
#define RINGFEED_DATASET_H

#include "ringfeed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- schema */

#define RF_MAX_RANK 8      /* dimensions of a field's shape */
#define RF_MAX_FIELDS 64   /* fields of a schema */
#define RF_NAME_MAX 56     /* bytes of a field name, terminating NUL included */

/* One field: every sample has one value of it.  A fixed field's value is an
 * array of `shape` (rank 0 = a scalar).  A variable field has exactly one
 * variable dimension, var_dim, whose shape entry is 0; its values differ in
 * length along that dimension. */
typedef struct rf_field {
	char name[RF_NAME_MAX];   /* 1..55 bytes of [A-Za-z0-9_.-], NUL-terminated */
	enum rf_dtype dtype;
	uint32_t rank;            /* 0..RF_MAX_RANK */
	int32_t var_dim;          /* -1 for a fixed field, else 0..rank-1 */
	uint64_t shape[RF_MAX_RANK];
} rf_field;

typedef struct rf_schema {
	uint32_t nfields;
	rf_field fields[RF_MAX_FIELDS];
} rf_schema;

/* Append a field.  `shape` has `rank` entries (may be NULL when rank is 0);
 * var_dim is -1 or the index of the variable dimension (its shape entry is
 * ignored and stored as 0).  Returns 0, or RF_ESCHEMA for a bad or duplicate
 * name, a bad dtype, rank, var_dim, a zero fixed dimension, too many fields,
 * or a value size beyond 2^40 bytes. */
RF_API int rf_schema_add(rf_schema *schema, const char *name, enum rf_dtype dtype,
			 uint32_t rank, const uint64_t *shape, int32_t var_dim);

/* Check a whole schema (as rf_schema_add checks one field).  Returns 0 or
 * RF_ESCHEMA. */
RF_API int rf_schema_validate(const rf_schema *schema);

/* Index of the field named `name`, or -1. */
RF_API int rf_schema_find(const rf_schema *schema, const char *name);

/* Bytes of one value of a fixed field; for a variable field, bytes of one
 * step along its variable dimension (the value's length is a multiple). */
RF_API uint64_t rf_field_item_bytes(const rf_field *field);

/* ----------------------------------------------------------------- writer */

enum rf_codec {
	RF_CODEC_NONE = 0,
	RF_CODEC_ZSTD = 1,
};

typedef struct rf_writer_config {
	uint32_t size;           /* sizeof(rf_writer_config), set by init */
	int zstd_level;          /* 0 = store chunks raw (default); 1..22 = zstd */
	uint64_t chunk_bytes;    /* target raw bytes per chunk, at most 2^32: a
	                            chunk closes with the sample that brings it
	                            to this size.  0 (the default): 4 MiB, but
	                            with fixed-size fields only, 128 samples'
	                            bytes when that is more, at most 20 MiB
	                            (150 KiB samples: 128 a chunk, not 27), so
	                            that a chunk holds whole batches: only those
	                            go out in place or straight from a read */
	uint64_t shard_bytes;    /* 0 = one shard (default); else start a new shard
	                            when a shard would exceed this, naming shards
	                            BASE-00000.rfs, BASE-00001.rfs, ... */
	unsigned threads;        /* compression threads; default 1 (0 = 1).  With
	                            zstd and threads > 1, chunks are compressed
	                            by a pool and written in order; about
	                            2 x threads chunks are held in memory */
	int no_fsync;            /* 1: skip the fsync before the rename: faster, for
	                            data that can be written again, since after a
	                            crash a shard may be incomplete; 0 (default):
	                            the shard is on disk before it has its name */
	rf_log_fn log;
	void *log_user;
	uint32_t format_version; /* 0 = the latest, 3 (default): version 2
	                            plus a pack id and shard count in every
	                            shard and a manifest BASE.rfm written last,
	                            so a pack replaces the previous one at once
	                            (rf_writer_close).  2: every chunk
	                            carries an XXH3-64 of each sample's value of
	                            each field, which shuffle full checks on
	                            every sample it reads; no pack id and no
	                            manifest, for readers older than format 3.
	                            1 = the version-1
	                            layout without them, for readers older than
	                            format 2 (shuffle full with verify on
	                            refuses it).  Else RF_EUSAGE.
	                            docs/format.md specifies all three */
	uint8_t reserved[60];    /* zero; room to grow */
} rf_writer_config;

RF_API void rf_writer_config_init(rf_writer_config *cfg);

typedef struct rf_writer rf_writer;

/* Open a writer.  `path` is the final name (with shard_bytes set, the base:
 * "out.rfs" gives "out-00000.rfs", ...).  Data goes to a temporary name in the
 * same directory ("PATH.tmp.PID") and is renamed over PATH only by
 * rf_writer_close, so a crash or a full disk never leaves a file that looks
 * complete.  The schema is copied.  `cfg` may be NULL for defaults.  Returns
 * 0 and *out; -EINVAL for out NULL; RF_EUSAGE for a bad setting (an empty
 * path, a config whose size or reserved bytes are wrong: see the
 * conventions in <ringfeed/ringfeed.h>, a level, chunk size, thread count or
 * format version out of range); RF_ESCHEMA for an invalid schema; a negated
 * errno of the file system.  On error *out is NULL, nothing is left on disk,
 * and the message goes to cfg->log (once the config's size is known to be
 * right) and to the open error, rf_writer_last_error(). */
RF_API int rf_writer_open(rf_writer **out, const char *path, const rf_schema *schema,
			  const rf_writer_config *cfg);

/* One field value: `data` points to `len` bytes.  For a fixed field len must
 * equal the field's value size; for a variable field it must be a multiple of
 * rf_field_item_bytes(). */
typedef struct rf_value {
	const void *data;
	uint64_t len;
} rf_value;

/* Add one sample: values[i] is field i's value.  The bytes are copied before
 * return.  Returns 0, -EINVAL for w NULL, RF_EUSAGE for a wrong length or
 * values NULL, or an I/O or codec error (after which the writer can only be
 * aborted). */
RF_API int rf_writer_add(rf_writer *w, const rf_value *values);

/* A block of n samples for one field.  Fixed field: `data` holds n values
 * back to back.  Variable field: `offsets` holds n+1 non-decreasing byte
 * offsets into `data`, offsets[0] may be non-zero. */
typedef struct rf_column {
	const void *data;
	const int64_t *offsets; /* variable fields only */
} rf_column;

/* Add n samples at once, cols[i] for field i: the fast path for packing
 * column-oriented inputs such as .npy files.  Same errors as rf_writer_add.
 * A bad block (offsets that decrease or are not multiples of the item size,
 * a sample too large for a 2^32-byte chunk) is refused whole with RF_EUSAGE
 * before any of it is taken, and the writer stays usable.  Raw chunks that
 * a block fills completely are written straight from `data` (no copy). */
RF_API int rf_writer_add_columns(rf_writer *w, uint64_t n, const rf_column *cols);

/* Samples added so far, and bytes written to the shard files so far (all
 * shards; headers, padding, index and footers included). */
RF_API uint64_t rf_writer_samples(const rf_writer *w);
RF_API uint64_t rf_writer_bytes(const rf_writer *w);

/* Finish: flush the last chunk, write the index and the footer, fsync, and
 * rename each shard to its final name.
 *
 * Format 3 (the default) commits the pack at once: the pack id (a checksum of
 * the pack's content) goes into every shard, then the manifest BASE.rfm
 * (BASE: path without ".rfs"; shard names, sizes, sample counts, pack id) is
 * written to a temporary name, synced and renamed into place, and only then
 * are the shards renamed.  A write stopped at any instant (killed, a failed
 * rename, a crash) leaves readers of the directory or the manifest either
 * the earlier dataset whole or the new one whole: before the manifest's
 * rename nothing of the new pack is visible; after it, shards not renamed
 * yet are read from their temporary names.  A rename that fails after the
 * commit is reported (the new pack stays readable) and the temporary files
 * it needs are kept; the next writer to the same path finishes the renames
 * and removes the "*.tmp.PID" files of earlier writers whose process no
 * longer runs on this machine.  Formats 1 and 2 have no pack id: they remove
 * an earlier manifest and rename shards one by one, as before.
 *
 * The new dataset then replaces all
 * of an earlier write to the same path: shards of it that the new one does
 * not overwrite (BASE-NNNNN.rfs above the new count, or PATH itself against
 * numbered shards and the other way round) are removed, so that a loader
 * given the directory never reads a leftover as part of this dataset.  Only
 * files that start with a shard's magic are removed, each logged (info); one
 * that cannot be removed is logged as a warning and does not fail the close.
 * On failure before the commit, the temporary files are removed and nothing
 * else is touched.
 * The writer is freed and *w cleared either way.  NULL is a no-op. */
RF_API int rf_writer_close(rf_writer **w);

/* Discard everything written: temporary files removed, writer freed, *w
 * cleared.  NULL is a no-op. */
RF_API void rf_writer_abort(rf_writer **w);

/* The message of the writer's last failure ("" when none).  Owned by the
 * writer, valid until the next call on it. */
RF_API const char *rf_writer_errmsg(const rf_writer *w);

/* The message of the calling thread's last failed rf_writer_open or
 * rf_writer_close ("" when none), whose handle is gone by then: thread-local,
 * valid until that thread's next rf_writer_open or rf_writer_close. */
RF_API const char *rf_writer_last_error(void);

/*
 * The order of a shuffled pack (packing with a shuffle seed, as this
 * project's packers do): out[i] = the input sample written at
 * position first + i of a dataset of n samples packed with `seed`, for
 * i < count.  A keyed permutation of [0, n) (a Feistel network with cycle
 * walking, uniform over the orders), computed in O(1) memory: packing never
 * holds a table of n entries.  Any program may call it to map a packed sample
 * back to its input (the same n, seed and version give the same order; the
 * order is part of the format's contract and does not change between
 * versions).  Returns 0, or -EINVAL when first + count exceeds n.
 */
RF_API int rf_pack_order(uint64_t n, uint64_t seed, uint64_t first, uint64_t count,
			 uint64_t *out);

/* ----------------------------------------------------------------- reader */

typedef struct rf_dataset rf_dataset;

typedef struct rf_dataset_config {
	uint32_t size;       /* sizeof(rf_dataset_config), set by init */
	int verify;          /* check chunk checksums on read; default 1 */
	rf_log_fn log;
	void *log_user;
	uint8_t reserved[64];
} rf_dataset_config;

RF_API void rf_dataset_config_init(rf_dataset_config *cfg);

/* Open a dataset from `npaths` entries, each a shard file, a manifest
 * (BASE.rfm: the shards of the pack it names, in its order), BASE.rfs of a
 * sharded pack (no such file, but BASE.rfm exists: that manifest, so a pack
 * opens by the name it was written to), a directory (its *.rfs regular files
 * whose names do not start with a dot, sorted by byte value; where it holds
 * a manifest, the pack's shards are those its manifest lists, and a file
 * named like one of that pack's, BASE.rfs or BASE-NNNNN.rfs, that the
 * manifest does not list is not read, with a warning to cfg->log) or a glob
 * pattern (its matches that are regular files, sorted); a shard named
 * directly that is not a regular file (a pipe, say) is RF_EFORMAT, never a
 * blocking open.  The entries are read as one dataset, in order.
 *
 * A directory must hold exactly one pack, or only shards without a pack id
 * (formats 1 and 2, read whole): one holding two manifests (train.rfs and
 * test.rfs packed side by side), format-3 shards of two BASEs, or a pack
 * beside shards without a pack id is RF_EUSAGE, the message naming the packs
 * and how to pick one (DIR/BASE.rfm or DIR/BASE.rfs) or to read several as
 * one (list them, or a glob).
 *
 * Packs (format 3, docs/format.md "Packs and manifests"): the shards a
 * manifest lists must hold its pack id, size, sample count and footer; a
 * listed shard that its writer had not renamed yet when it stopped is read
 * from its temporary name.  Without a manifest, shards named BASE-NNNNN.rfs
 * of one BASE must hold one pack id, and when a directory or a glob found
 * them, all of that pack's shards.  Otherwise RF_ECORRUPT, the message naming
 * every shard concerned: the output of an interrupted write, or shards of
 * two packs mixed by hand, is never read as one dataset.  Each shard's
 * footer, header and index are read and validated; the data chunks are not
 * read.  `cfg` may be NULL for defaults.  Returns 0 and *out, or RF_EFORMAT,
 * RF_ECORRUPT, RF_ETRUNCATED (docs/format.md says which when), RF_ESCHEMA
 * (shards disagree), -ENOENT (nothing matched), -EINVAL (out NULL),
 * RF_EUSAGE (no path, a NULL path, a directory of several packs, or a
 * config whose size or reserved bytes
 * are wrong: see the conventions in <ringfeed/ringfeed.h>), or another
 * negated errno; each shard
 * keeps one read-only descriptor open until rf_dataset_close (the open-file
 * soft limit is raised for them when needed, as rf_loader_open describes;
 * -EMFILE when the hard limit is too low).  *out is NULL on error and the
 * message, naming the file and what is wrong, goes to cfg->log (once the
 * config's size is known to be right) and to the open error,
 * rf_dataset_last_open_error(). */
RF_API int rf_dataset_open(rf_dataset **out, const char *const *paths, size_t npaths,
			   const rf_dataset_config *cfg);
/* Remote paths, in rf_dataset_open and everywhere a path is taken (when
 * built with libcurl; -ENOTSUP otherwise): an http://, https:// or s3:// URL
 * whose path ends in .rfs is a shard; s3://bucket/prefix/ is every .rfs
 * object under the prefix (listed, sorted by byte value); any other URL is
 * a shard list (a text file, one shard URL or name relative to it per
 * line).  Every remote shard's head and tail are fetched concurrently;
 * later reads are ranged GETs, retried on transient faults.  A 404 is
 * -ENOENT, a 403 -EACCES, other failures -EIO, the message naming the URL,
 * the HTTP status and the server's error code.  Settings come from the
 * environment: docs/remote.md. */

/* The remote limit that `ringfeed bench` compares the loader with: raw
 * ranged GETs of the stored bytes of the dataset's remote chunks, in
 * dataset order (passes repeated until min_seconds have passed), `depth`
 * in flight over the same kept-alive connections and with the same
 * request options as the loader's reader, each body copied into a buffer
 * and nothing checked, retried or decoded.  *bytes and *seconds are the
 * bytes of the completed requests and the time from the first request to
 * the last completion; *requests counts them.  Returns 0; -ENOTSUP when no
 * shard is remote (or built without libcurl), -EIO when a request fails
 * (msg, when not NULL, gets the reason: URL, range, status). */
RF_API int rf_dataset_remote_limit(const rf_dataset *ds, uint32_t depth, double min_seconds,
				   double *bytes, double *seconds, uint64_t *requests, char *msg,
				   size_t msg_cap);

/* The message of the calling thread's last failed rf_dataset_open ("" when
 * none): thread-local, valid until that thread's next open. */
RF_API const char *rf_dataset_last_open_error(void);

RF_API void rf_dataset_close(rf_dataset **ds);

RF_API const rf_schema *rf_dataset_schema(const rf_dataset *ds);
RF_API uint64_t rf_dataset_samples(const rf_dataset *ds);
RF_API uint64_t rf_dataset_chunks(const rf_dataset *ds);
RF_API size_t rf_dataset_shards(const rf_dataset *ds);
/* Path of shard i as opened, or NULL past the end.  Owned by the dataset. */
RF_API const char *rf_dataset_shard_path(const rf_dataset *ds, size_t i);
/* Size in bytes of shard i (local or remote), or 0 past the end. */
RF_API uint64_t rf_dataset_shard_bytes(const rf_dataset *ds, size_t i);

/* A chunk as described by its shard's index (validated at open). */
typedef struct rf_chunk_info {
	uint32_t shard;          /* index of the shard holding it */
	uint64_t offset;         /* file offset of the stored bytes, 4096-aligned */
	uint64_t stored_bytes;   /* bytes on disk (before padding to 4096) */
	uint64_t raw_bytes;      /* bytes after decoding */
	uint64_t first_sample;   /* dataset-wide index of its first sample */
	uint32_t samples;
	enum rf_codec codec;
	uint64_t xxh3;           /* XXH3-64 of the stored bytes */
} rf_chunk_info;

/* Chunks are numbered dataset-wide, shard by shard.  Returns 0, -ERANGE, or
 * -EINVAL for ds or out NULL. */
RF_API int rf_dataset_chunk_info(const rf_dataset *ds, uint64_t chunk, rf_chunk_info *out);

/* The chunk holding sample `index`, by binary search.  Returns 0, -ERANGE, or
 * -EINVAL for ds or chunk NULL. */
RF_API int rf_dataset_find_chunk(const rf_dataset *ds, uint64_t index, uint64_t *chunk);

/* Copy field `field` of sample `index` into buf (capacity cap bytes) and set
 * *len to its length.  Returns 0; -EINVAL for ds or len NULL; -ERANGE for a
 * bad index or field; -ENOSPC
 * when cap is too small (*len still set); RF_ECHECKSUM, RF_ECORRUPT, RF_ECODEC
 * or -EIO when the chunk holding it is bad (the message names shard, chunk and
 * byte offset).  The last decoded chunk is cached, so reading samples in order
 * decodes each chunk once.  A read that fails with EIO, EAGAIN or ETIMEDOUT
 * (a network or parallel file system's passing trouble) is asked again up
 * to 5 times, 1, 4, 16, 64 and 256 ms apart, each retry logged at
 * RF_LOG_WARN, before it fails (as are the reads of rf_dataset_open and
 * rf_dataset_verify_chunk). */
RF_API int rf_dataset_read(rf_dataset *ds, uint64_t index, uint32_t field, void *buf,
			   size_t cap, size_t *len);

/* Read, checksum (even when the dataset was opened with verify = 0) and
 * fully decode chunk `chunk`, validating every offset in it; in a format 2
 * shard, also its per-sample checksum table (against the table's checksum in
 * the index, then every value of the chunk against its entry).  Returns 0,
 * -ERANGE, -EINVAL for ds NULL, or the error rf_dataset_read would give;
 * RF_ECHECKSUM also when the table or a value does not match (the message
 * names the shard, the chunk, and the sample and field of a value). */
RF_API int rf_dataset_verify_chunk(rf_dataset *ds, uint64_t chunk);

/* The message of the dataset's last failure ("" when none). */
RF_API const char *rf_dataset_errmsg(const rf_dataset *ds);

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_DATASET_H */
