/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack`: convert inputs into .rfs shards through rf_writer.
 *
 * Three kinds of input, one per invocation:
 *   NAME=FILE.npy ...         one .npy per field, first axis = samples
 *   --raw FILE --field SPEC   fixed-size little-endian records
 *   --llmc GLOB --seq-len T   llm.c token shards, samples of T+1 tokens
 *
 * With --shuffle SEED the samples are written in the order rf_pack_order
 * gives, each read where it lies in the mapped inputs (cmd_pack_input.c).
 *
 * The inputs are mapped (mmap) and handed to rf_writer_add_columns in blocks
 * of a few MiB (two chunks), so packing raw data costs one copy into the
 * writer's chunk plus the write: the writer's threads do any compression.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringfeed/dataset.h>

#include "cmd.h"
#include "cmd_pack_impl.h"
#include "images.h"

/* Bytes handed to the writer per call: two chunks, within [1, 16] MiB.
 * Large enough that the per-call cost vanishes (4-16 MiB runs at memcpy
 * speed), small enough to poll for Ctrl-C and redraw progress often even at
 * slow zstd levels, and to keep the de-interleave buffers (raw records, llm.c
 * windows) small. */
#define PACK_BLOCK_MIN (1u << 20)
#define PACK_BLOCK_MAX (16u << 20)

/* ------------------------------------------------------------------ log */

/* The writer's log callback runs on its threads too: errors are kept (the
 * failing call's message is printed once, by the caller), warnings printed,
 * info/debug with -v/-vv. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_last_error[512];

static void
pack_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	pthread_mutex_lock(&log_lock);
	if (level == RF_LOG_ERROR)
		snprintf(log_last_error, sizeof log_last_error, "%s", msg);
	else if ((level == RF_LOG_WARN && rf_cli_verbosity >= 1) ||
		 (level == RF_LOG_INFO && rf_cli_verbosity >= 2) || rf_cli_verbosity >= 3)
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
	pthread_mutex_unlock(&log_lock);
}

/* 1 when path names the same file as one of the inputs (which the pack
 * would replace). */
static int
is_input(const struct pack_job *j, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return 0;
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].dev == st.st_dev &&
		    j->files[i].ino == st.st_ino)
			return 1;
	return 0;
}

/* Shard i's name for output `out` ("OUT.rfs" gives "OUT-00000.rfs", ...,
 * as <ringfeed/dataset.h> names them): 0, or -1 when it does not fit. */
static int
shard_name(char *name, size_t cap, const char *out, unsigned i)
{
	size_t len = strlen(out);
	int base = (int)(len >= 4 && strcmp(out + len - 4, ".rfs") == 0 ? len - 4 : len);
	int n = snprintf(name, cap, "%.*s-%05u.rfs", base, out, i);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The output, or one of its shards, is an input: refuse before writing. */
static int
check_output(const struct pack_job *j)
{
	const char *out = j->opt.sh.out;
	char name[4096];

	if (is_input(j, out)) {
		rf_cli_error("-o %s is one of the inputs: packing would replace it", out);
		return -1;
	}
	for (unsigned i = 0; i < 100000; i++) {
		if (shard_name(name, sizeof name, out, i) < 0 || access(name, F_OK) < 0)
			break;
		if (is_input(j, name)) {
			rf_cli_error("%s, a shard name of -o %s, is one of the inputs: packing would "
				     "replace or remove it", name, out);
			return -1;
		}
	}
	return 0;
}

/* The bytes of what a closed writer left at `out`: the file, or its shards. */
static uint64_t
written_bytes(const char *out, int sharded)
{
	struct stat st;
	uint64_t sum = 0;

	if (!sharded)
		return stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
	for (unsigned i = 0; i < 100000; i++) {
		char name[4096];
		if (shard_name(name, sizeof name, out, i) < 0 || stat(name, &st) < 0)
			break;
		sum += (uint64_t)st.st_size;
	}
	return sum;
}

/* ------------------------------------------------------------------ main */

int
rf_cmd_pack(int argc, char **argv)
{
	pack_job job;
	pack_job *j = &job;
	rf_writer_config cfg;
	int rc, status = RF_CLI_FAIL;
	double t0;
	char a[24], b[24], c[24];

	if (rf_pack_images_wanted(argc, argv))
		return rf_cmd_pack_images(argc, argv);
	memset(j, 0, sizeof *j);
	j->opt.inputs = calloc((size_t)argc, sizeof *j->opt.inputs);
	j->opt.specs = calloc((size_t)argc, sizeof *j->opt.specs);
	if (!j->opt.inputs || !j->opt.specs) {
		rf_cli_error("out of memory");
		goto out;
	}
	if ((rc = pack_parse_args(&j->opt, argc, argv)) != 0) {
		status = rc < 0 ? RF_CLI_OK : rc; /* -1: --help was printed */
		goto out;
	}
	if (j->opt.mode != MODE_LLMC) {
		j->files = calloc(j->opt.ninputs, sizeof *j->files);
		if (!j->files) {
			rf_cli_error("out of memory");
			goto out;
		}
	}
	switch (j->opt.mode) {
	case MODE_NPY: rc = pack_open_npy(j); break;
	case MODE_RAW: rc = pack_open_raw(j); break;
	case MODE_LLMC: rc = pack_open_llmc(j); break;
	default: rc = -1; break;
	}
	if (rc < 0)
		goto out;
	if (check_output(j) < 0) {
		status = RF_CLI_USAGE;
		goto out;
	}

	pack_shared_writer_config(&j->opt.sh, &cfg);
	cfg.log = pack_log;
	j->block_bytes = cfg.chunk_bytes ? 2 * cfg.chunk_bytes : PACK_BLOCK_MAX;
	if (j->block_bytes < PACK_BLOCK_MIN)
		j->block_bytes = PACK_BLOCK_MIN;
	if (j->block_bytes > PACK_BLOCK_MAX)
		j->block_bytes = PACK_BLOCK_MAX;
	log_last_error[0] = 0;
	rf_cli_signals_install();
	t0 = rf_cli_now();
	if ((rc = rf_writer_open(&j->w, j->opt.sh.out, &j->schema, &cfg)) < 0) {
		/* The library's message names the file; without one, we do. */
		if (log_last_error[0])
			rf_cli_error("%s", log_last_error);
		else
			rf_cli_error("%s: %s", j->opt.sh.out, rf_strerror(rc));
		goto out;
	}
	rf_cli_progress_start(&j->progress, "packing", j->in_bytes);
	switch (j->opt.sh.shuffle ? MODE_NONE : j->opt.mode) {
	case MODE_NONE: rc = pack_feed_shuffled(j); break; /* --shuffle: every kind */
	case MODE_NPY: rc = pack_feed_npy(j); break;
	case MODE_RAW: rc = pack_feed_raw(j); break;
	default: rc = pack_feed_llmc(j); break;
	}
	if (rc != 0) {
		rf_writer_abort(&j->w);
		if (rc > 0) {
			rf_cli_error("interrupted; nothing written");
			status = 128 + rf_cli_interrupted();
		}
		goto out;
	}
	rf_cli_progress_update(&j->progress, j->in_bytes);
	{
		uint64_t samples = rf_writer_samples(j->w);
		rf_cli_progress_finish(&j->progress);
		log_last_error[0] = 0;
		if ((rc = rf_writer_close(&j->w)) < 0) {
			if (log_last_error[0])
				rf_cli_error("%s", log_last_error);
			else
				rf_cli_error("%s: %s", j->opt.sh.out, rf_strerror(rc));
			goto out;
		}
		double el = rf_cli_now() - t0;
		uint64_t stored = written_bytes(j->opt.sh.out, j->opt.sh.shard_bytes != 0);
		rf_cli_note(1, "%" PRIu64 " samples, %s in, %s stored, %.1f s (%s/s) -> %s%s", samples,
			    rf_cli_fmt_bytes(a, sizeof a, (double)j->in_bytes),
			    rf_cli_fmt_bytes(b, sizeof b, (double)stored), el,
			    rf_cli_fmt_bytes(c, sizeof c, el > 0 ? (double)j->in_bytes / el : 0),
			    j->opt.sh.out, j->opt.sh.shard_bytes ? " (sharded)" : "");
	}
	status = RF_CLI_OK;
out:
	if (j->w)
		rf_writer_abort(&j->w);
	pack_unmap_inputs(j);
	if (j->opt.mode == MODE_LLMC)
		for (size_t i = 0; i < j->nfiles; i++)
			free((char *)j->files[i].path);
	for (size_t k = 0; k < sizeof j->fbuf / sizeof j->fbuf[0]; k++)
		free(j->fbuf[k]);
	free(j->buf);
	free(j->files);
	free(j->opt.inputs);
	free(j->opt.specs);
	return status;
}
