/* SPDX-License-Identifier: MIT */
/*
 * Inside the shard writer: the handle and its chunk jobs, shared by
 *   writer.c        the public API: config, open, adding samples, close
 *   writer_shard.c  one shard's temporary file: writes, header, index, footer
 *   writer_chunk.c  chunk jobs: filling, sealing, checksums, zstd workers,
 *                   writing each as the next chunk
 *   writer_pack.c   the pack commit: pack id, manifest, leftovers of
 *                   earlier writes and of killed writers
 *
 * Threads: only the thread that adds samples touches the handle; the zstd
 * workers (writer_chunk.c) touch only the jobs they run, and job states
 * under `mu`.
 */
#ifndef RF_WRITER_IMPL_H
#define RF_WRITER_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <zstd.h>

#include "format/format.h"

#define DEFAULT_CHUNK_BYTES (UINT64_C(4) << 20)
/*
 * chunk_bytes 0 (the default): chunks of DEFAULT_CHUNK_BYTES, but of
 * fixed-size samples at least AUTO_CHUNK_SAMPLES when that stays within
 * AUTO_CHUNK_MAX_BYTES.  A batch can go out in place, or be copied from
 * its read slot, only when one chunk holds it: 4 MiB holds 27 samples of
 * 150 KiB, fewer than a batch of 32, so none did.  The cap keeps the
 * default window (128 MiB of chunks, at least 4) and its read slots
 * within the default pinned_bytes (256 MiB).
 */
#define AUTO_CHUNK_SAMPLES 128
#define AUTO_CHUNK_MAX_BYTES (UINT64_C(20) << 20)
#define MAX_THREADS 256
/* iovecs of one chunk: per field up to pad, offsets, pad, data. */
#define MAX_PIECES (4 * RF_MAX_FIELDS + 1)

/* Padding's source: zero bytes, one alignment's worth. */
extern const uint8_t rf_wr_zeros[RF_FMT_ALIGN];

struct wcol {
	uint8_t *buf;          /* fixed values, or variable data */
	uint64_t len, cap;
	uint64_t *off;         /* variable: n + 1 offsets, off[0] = 0 */
	uint64_t off_cap;      /* entries */
};

enum job_state { JOB_FREE, JOB_FILLING, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct wjob {
	enum job_state state;
	uint64_t seq;
	uint64_t n;
	struct wcol *col;
	uint64_t raw_size;
	int codec;
	uint8_t *out;          /* zstd frame */
	size_t out_cap, out_len;
	uint64_t xxh3;
	uint64_t *sums;        /* format 2: n x nfields value checksums */
	uint64_t sums_cap;     /* entries */
	uint64_t sums_xxh3;    /* of the sums table's bytes */
	int rc;
	char msg[256];
};

struct wshard {
	char *final;
	char *tmp;
	uint64_t size, samples, footer_xxh3; /* for the manifest, once finished */
	uint64_t index_offset, nchunks, index_xxh3; /* to rewrite its footer */
};

struct rf_writer {
	rf_diag diag;
	rf_schema schema;
	rf_writer_config cfg;
	uint32_t version;      /* format version written */
	uint64_t pack_id;      /* format 3: in every shard's header, set at close */
	char *path;
	int sharded;
	uint64_t item[RF_MAX_FIELDS];
	int has_var;
	uint64_t fixed_sample_bytes; /* sum of fixed fields' item sizes */
	uint64_t target;       /* raw bytes a chunk closes at (cfg.chunk_bytes,
	                          or chosen: AUTO_CHUNK_SAMPLES) */

	struct wshard *shards;
	size_t nshards, shards_cap;
	int fd;                /* current shard's temporary file, or -1 */
	uint64_t pos;          /* its write position (4096-aligned between chunks) */
	uint64_t header_end;
	uint8_t *header;       /* header page(s), zero padded */
	uint64_t header_xxh3;
	uint8_t *index;        /* current shard's index entries */
	uint64_t nchunks, index_cap;
	uint64_t shard_samples;

	uint64_t samples, bytes;
	int rc;                /* sticky failure */

	struct wjob *jobs;
	unsigned njobs;
	uint64_t next_seq;     /* sequence number of the job being filled */
	uint64_t write_seq;    /* next sequence number to write */
	int filling;           /* jobs[next_seq % njobs] is being filled */
	ZSTD_CCtx *cctx;       /* for compression on the adding thread */

	pthread_t *threads;
	unsigned nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	int stop;
};

/* writer_shard.c */
int rf_wr_write_iov(rf_writer *w, struct iovec *iov, int cnt, uint64_t total);
char *rf_wr_str_printf(const char *fmt, ...) RF_PRINTF(1, 2);
int rf_wr_shard_open(rf_writer *w);
int rf_wr_shard_finish(rf_writer *w);

/* writer_chunk.c */
uint64_t rf_wr_job_raw_size(const rf_writer *w, const struct wjob *j, uint64_t n,
			    const uint64_t *extra);
ZSTD_CCtx *rf_wr_make_cctx(int level);
void *rf_wr_worker_main(void *arg);
int rf_wr_drain_one(rf_writer *w);
int rf_wr_cur_job(rf_writer *w, struct wjob **out);
int rf_wr_seal(rf_writer *w);
int rf_wr_grow(void **p, uint64_t *cap, uint64_t need, size_t elem);

/* writer_pack.c */
void rf_wr_recover_output(rf_writer *w);
int rf_wr_fsync_dir(rf_writer *w, const char *file);
void rf_wr_remove_leftovers(rf_writer *w);
int rf_wr_seal_pack(rf_writer *w);
int rf_wr_commit_manifest(rf_writer *w, int *committed);

#endif
