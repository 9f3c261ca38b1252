/* SPDX-License-Identifier: MIT */
/*
 * The options both `ringfeed pack` front ends take: cmd_pack_args.c
 * (NAME=FILE.npy, --raw, --llmc) and pack_images.c (--images, --tar).
 *
 *   -o OUT  --zstd LEVEL  --chunk-bytes SIZE  --shard-bytes SIZE
 *   -j THREADS  --shuffle SEED  -q  -v  (and -h, which each answers itself)
 *
 * A front end's getopt_long table starts with PACK_SHARED_LONGOPTS and goes
 * on with its own options, numbered from PACK_OPT_OWN; its short options
 * are PACK_SHARED_SHORTOPTS plus its own.  It hands every option to
 * pack_shared_option first and handles what that leaves.
 */
#ifndef RF_CLI_PACK_OPTS_H
#define RF_CLI_PACK_OPTS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include <ringfeed/dataset.h>

/* The settings the shared options give, kept apart from rf_writer_config. */
typedef struct pack_shared {
	const char *out;      /* -o */
	int zstd_level;       /* --zstd: 0 stores chunks raw */
	uint64_t chunk_bytes; /* --chunk-bytes: 0 = the writer's default */
	uint64_t shard_bytes; /* --shard-bytes: 0 = one file */
	unsigned threads;     /* -j: 1 by default */
	int shuffle;          /* --shuffle given */
	uint64_t seed;        /* --shuffle SEED */
} pack_shared;

/* getopt_long values of the shared long options without a short form. */
enum {
	PACK_OPT_ZSTD = 256,
	PACK_OPT_CHUNK,
	PACK_OPT_SHARD,
	PACK_OPT_SHUFFLE,
	PACK_OPT_OWN, /* a front end's own options are numbered from here */
};

/* The getopt short options of the shared ones, after a leading ':'. */
#define PACK_SHARED_SHORTOPTS "o:j:qvh"

/* The first entries of a front end's getopt_long table. */
#define PACK_SHARED_LONGOPTS                                     \
	{"output", required_argument, NULL, 'o'},                \
	{"zstd", required_argument, NULL, PACK_OPT_ZSTD},        \
	{"chunk-bytes", required_argument, NULL, PACK_OPT_CHUNK}, \
	{"shard-bytes", required_argument, NULL, PACK_OPT_SHARD}, \
	{"threads", required_argument, NULL, 'j'},               \
	{"shuffle", required_argument, NULL, PACK_OPT_SHUFFLE},  \
	{"quiet", no_argument, NULL, 'q'},                       \
	{"verbose", no_argument, NULL, 'v'},                     \
	{"help", no_argument, NULL, 'h'}

/* pack_shared_option: c is not a shared option (nor -h: the caller's). */
#define PACK_NOT_SHARED (-1)

/* The defaults: everything 0 but one thread. */
void pack_shared_init(pack_shared *s);

/* Take option c (getopt_long's value) with its argument arg into *s (-q
 * and -v set rf_cli_verbosity): 0, PACK_NOT_SHARED, or the exit status of
 * a usage error, printed with `usage`. */
int pack_shared_option(pack_shared *s, int c, const char *arg, const char *usage);

/* *cfg from rf_writer_config_init with the shared settings applied. */
void pack_shared_writer_config(const pack_shared *s, rf_writer_config *cfg);

/* The help of the shared options, -h, SIZE and the exit status. */
void pack_shared_help(FILE *f);

#endif
