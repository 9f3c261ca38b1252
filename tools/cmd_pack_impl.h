/* SPDX-License-Identifier: MIT */
/*
 * Inside `ringfeed pack` (NAME=FILE.npy, --raw, --llmc), shared by
 *   cmd_pack.c        the run: the output checks, the writer, progress,
 *                     the summary
 *   cmd_pack_args.c   the help text and the options (those shared with
 *                     the image inputs: pack_opts.c)
 *   cmd_pack_input.c  the inputs: mapping them, the schema they give, and
 *                     feeding their samples to the writer, in order or
 *                     shuffled
 * The image inputs (--images, --tar) are pack_images.c's.
 */
#ifndef RF_CLI_CMD_PACK_IMPL_H
#define RF_CLI_CMD_PACK_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ringfeed/dataset.h>

#include "llmc.h"
#include "pack_opts.h"
#include "util.h"

enum pack_mode { MODE_NONE, MODE_NPY, MODE_RAW, MODE_LLMC };

/* Tool settings, kept apart from the library's rf_writer_config. */
typedef struct pack_opts {
	pack_shared sh;            /* -o, --zstd, ... (pack_opts.h) */
	enum pack_mode mode;
	char **inputs;             /* NAME=FILE.npy, or --raw files */
	size_t ninputs;
	rf_cli_field_spec *specs;  /* --field */
	size_t nspecs;
	const char *llmc_glob;
	uint64_t seq_len;
} pack_opts;

/* One mapped input file. */
typedef struct input_file {
	const char *path;
	const unsigned char *map;  /* the whole file, or NULL when empty */
	size_t map_len;
	const unsigned char *data; /* the array data / records / tokens */
	uint64_t data_bytes;
	uint64_t samples;
	uint64_t item_bytes;       /* npy: bytes of one sample of this field */
	rf_llmc llmc;
	uint64_t tail;             /* llm.c: tokens dropped at the end */
	size_t released;           /* bytes of the mapping given back so far */
	size_t advised;            /* bytes of the mapping read ahead so far */
	dev_t dev;                 /* the file's identity, to tell it from the output */
	ino_t ino;
} input_file;

typedef struct pack_job {
	pack_opts opt;
	rf_schema schema;
	input_file *files;
	size_t nfiles;
	uint64_t samples;          /* total samples to write */
	uint64_t in_bytes;         /* total input bytes, for progress */
	uint64_t done_bytes;
	uint64_t block_bytes;      /* bytes per rf_writer_add_columns call */
	unsigned char *buf;        /* de-interleave / window buffer */
	unsigned char *fbuf[RF_MAX_FIELDS];
	rf_writer *w;
	rf_cli_progress progress;
} pack_job;

/* cmd_pack_args.c */
/* Parse the options into *o: 0, -1 after --help, else the exit status of a
 * usage error (printed). */
int pack_parse_args(pack_opts *o, int argc, char **argv);

/* cmd_pack_input.c */
/* Map the inputs of one mode and build j->schema: 0, or -1 after printing
 * why. */
int pack_open_npy(pack_job *j);
int pack_open_raw(pack_job *j);
int pack_open_llmc(pack_job *j);
/* Feed every sample to j->w, in order or in rf_pack_order's: 0, 1 when
 * interrupted (Ctrl-C), or -1 after printing why. */
int pack_feed_npy(pack_job *j);
int pack_feed_raw(pack_job *j);
int pack_feed_llmc(pack_job *j);
int pack_feed_shuffled(pack_job *j);
void pack_unmap_inputs(pack_job *j);

#endif
