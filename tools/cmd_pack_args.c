/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack`: the help text and the options, parsed into the tool's
 * settings (pack_opts), kept apart from the library's rf_writer_config.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/dataset.h>

#include "cmd_pack_impl.h"
#include "images.h"
#include "pack_opts.h"

#define PACK_USAGE                                                                     \
	"ringfeed pack -o OUT.rfs [--zstd LEVEL] [--chunk-bytes SIZE] [--shard-bytes SIZE]\n" \
	"                     [--shuffle SEED] [-j THREADS] [-q|-v]\n"                           \
	"                     (NAME=FILE.npy... | --raw FILE --field NAME:DTYPE[D0,...]... |\n"  \
	"                      --llmc GLOB --seq-len T | --images DIR | --tar GLOB)"

/* ------------------------------------------------------------------ help */

static void
pack_help(void)
{
	printf("usage: %s\n\n", PACK_USAGE);
	printf(
		"Pack inputs into a ringfeed dataset.  The output appears only when complete\n"
		"(written to a temporary name, then renamed); Ctrl-C leaves nothing behind.\n"
		"\n"
		"Inputs (one kind per run):\n"
		"  NAME=FILE.npy ...      one .npy per field; the first axis counts samples and\n"
		"                         must agree across files.  C-order, little-endian\n"
		"                         u1 i1 u2 i2 u4 i4 u8 i8 f2 f4 f8; b1 is stored as u8;\n"
		"                         S<n>/V<n> as bytes with a last dimension of n.\n"
		"  --raw FILE             fixed-size little-endian records (repeatable: files\n"
		"                         are concatenated); each record is the --field values\n"
		"                         in order; the file size must be a multiple of it.\n"
		"  --field NAME:DTYPE[D0,D1,...]\n"
		"                         a field of the raw record (scalar without [...]);\n"
		"                         DTYPE: u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64\n"
		"                         bytes.\n"
		"  --llmc GLOB            llm.c token shards (magic 20240520 v1 u16 tokens, or\n"
		"                         20240801 v7 u32 tokens), in sorted order.\n"
		"  --seq-len T            with --llmc: each sample is one field 'tokens' of T+1\n"
		"                         tokens taken every T tokens (inputs [0,T), targets\n"
		"                         [1,T+1)).  Each shard is cut on its own: samples never\n"
		"                         straddle shards, and a shard's last tokens that do not\n"
		"                         fill a sample are dropped (and reported).\n"
		"\n");
	pack_shared_help(stdout);
	rf_pack_images_help(stdout);
}

/* ------------------------------------------------------------- options */

enum {
	OPT_RAW = PACK_OPT_OWN,
	OPT_FIELD,
	OPT_LLMC,
	OPT_SEQ,
};

static int
set_mode(pack_opts *o, enum pack_mode m)
{
	static const char *const names[] = {"", "NAME=FILE.npy", "--raw", "--llmc"};

	if (o->mode != MODE_NONE && o->mode != m)
		return rf_cli_usage_error(PACK_USAGE, "cannot mix %s and %s inputs", names[o->mode],
					  names[m]);
	o->mode = m;
	return 0;
}

int
pack_parse_args(pack_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		PACK_SHARED_LONGOPTS,
		{"raw", required_argument, NULL, OPT_RAW},
		{"field", required_argument, NULL, OPT_FIELD},
		{"llmc", required_argument, NULL, OPT_LLMC},
		{"seq-len", required_argument, NULL, OPT_SEQ},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, rc;
	char err[256];

	pack_shared_init(&o->sh);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":" PACK_SHARED_SHORTOPTS, longopts, NULL)) != -1) {
		if ((rc = pack_shared_option(&o->sh, c, optarg, PACK_USAGE)) != PACK_NOT_SHARED) {
			if (rc != 0)
				return rc;
			continue;
		}
		switch (c) {
		case OPT_RAW:
			if ((rc = set_mode(o, MODE_RAW)) != 0)
				return rc;
			o->inputs[o->ninputs++] = optarg;
			break;
		case OPT_FIELD:
			if (rf_cli_parse_field_spec(optarg, &o->specs[o->nspecs], err, sizeof err) < 0)
				return rf_cli_usage_error(PACK_USAGE, "--field: %s", err);
			o->nspecs++;
			break;
		case OPT_LLMC:
			if ((rc = set_mode(o, MODE_LLMC)) != 0)
				return rc;
			if (o->llmc_glob)
				return rf_cli_usage_error(PACK_USAGE,
							  "--llmc given twice (one glob, quoted)");
			o->llmc_glob = optarg;
			break;
		case OPT_SEQ:
			/* T + 1 u32 tokens must fit a chunk (2^32 bytes). */
			if (rf_cli_parse_uint(optarg, 1, (1ull << 30) - 2, &v) < 0)
				return rf_cli_usage_error(PACK_USAGE,
							  "--seq-len: '%s' is not a length in 1..1073741822",
							  optarg);
			o->seq_len = v;
			break;
		case 'h':
			pack_help();
			return -1;
		default:
			return rf_cli_bad_option(PACK_USAGE, c, argc, argv);
		}
	}
	for (int i = optind; i < argc; i++) {
		if ((rc = set_mode(o, MODE_NPY)) != 0)
			return rc;
		if (!strchr(argv[i], '=') || argv[i][0] == '=')
			return rf_cli_usage_error(PACK_USAGE, "input '%s' is not NAME=FILE.npy",
						  argv[i]);
		o->inputs[o->ninputs++] = argv[i];
	}
	if (!o->sh.out || !*o->sh.out)
		return rf_cli_usage_error(PACK_USAGE, "missing -o OUT.rfs");
	if (o->mode == MODE_NONE)
		return rf_cli_usage_error(PACK_USAGE, "no input given");
	if (o->mode == MODE_RAW && o->nspecs == 0)
		return rf_cli_usage_error(PACK_USAGE, "--raw needs at least one --field");
	if (o->mode != MODE_RAW && o->nspecs)
		return rf_cli_usage_error(PACK_USAGE, "--field applies to --raw only");
	if (o->mode == MODE_LLMC && o->seq_len == 0)
		return rf_cli_usage_error(PACK_USAGE, "--llmc needs --seq-len T");
	if (o->mode != MODE_LLMC && o->seq_len)
		return rf_cli_usage_error(PACK_USAGE, "--seq-len applies to --llmc only");
	if (o->mode == MODE_NPY && o->ninputs > RF_MAX_FIELDS)
		return rf_cli_usage_error(PACK_USAGE, "more than %d fields", RF_MAX_FIELDS);
	if (o->nspecs > RF_MAX_FIELDS)
		return rf_cli_usage_error(PACK_USAGE, "more than %d fields", RF_MAX_FIELDS);
	return 0;
}
