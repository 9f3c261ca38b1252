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

#define PACK_USAGE                                                                          \
	"ringfeed pack -o OUT.rfs [--zstd LEVEL] [--chunk-bytes SIZE] [--shard-bytes SIZE]\n" \
	"                     [--shuffle SEED] [-j THREADS] [-q|-v] (NAME=FILE.npy... | --raw FILE --field "  \
	"NAME:DTYPE[D0,...]... |\n"                                                           \
	"                     --llmc GLOB --seq-len T | --images DIR | --tar GLOB)"

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
		"\n"
		"Options:\n"
		"  -o, --output OUT.rfs   output path; with --shard-bytes, the base of\n"
		"                         OUT-00000.rfs, OUT-00001.rfs, ...  The output\n"
		"                         replaces an earlier pack to OUT whole: its shards\n"
		"                         that the new one does not overwrite are removed\n"
		"      --zstd LEVEL       compress chunks with zstd 1..22 (0: store raw, default)\n"
		"      --chunk-bytes SIZE target raw bytes per chunk (default 4M)\n"
		"      --shard-bytes SIZE start a new shard when one would exceed SIZE\n"
		"      --shuffle SEED     write the samples in a random order, a permutation\n"
		"                         of all of them keyed by SEED (0..2^64-1; the same\n"
		"                         SEED and inputs give the same bytes).  Use it when\n"
		"                         the inputs are sorted (by class, as an image-folder\n"
		"                         walk gives; by source or length): the loader's\n"
		"                         chunks and window shuffles permute whole chunks and\n"
		"                         mix samples only within a window (W chunks, about\n"
		"                         128 MiB by default), so a sorted dataset much larger\n"
		"                         than the window still gives batches of few classes\n"
		"                         (one within the window is permuted uniformly by the\n"
		"                         window shuffle); shuffle full mixes at any order but\n"
		"                         reads sample by sample.\n"
		"                         Not needed for llm.c shards of shuffled documents.\n"
		"                         Cost: each sample is read where it lies in the\n"
		"                         mapped inputs, in random order; no copy of the\n"
		"                         dataset is made, but the input pages read stay\n"
		"                         mapped (RSS, reclaimable page cache).  Inputs\n"
		"                         that fit in half the RAM are read ahead whole\n"
		"                         into the page cache first; larger ones are read\n"
		"                         at the disk's random-read speed (fine on an SSD,\n"
		"                         slow on a spinning disk or a network file system).\n"
		"  -j, --threads N        compression threads (default 1)\n"
		"  -q, --quiet            no progress and no summary\n"
		"  -v, --verbose          more messages (repeat for debug)\n"
		"  -h, --help             this help\n"
		"\n"
		"SIZE takes a suffix K, M, G, T (or KiB, MB, ...: all powers of 1024).\n"
		"Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n\n");
	rf_pack_images_help(stdout);
}

/* ------------------------------------------------------------- options */

enum {
	OPT_ZSTD = 256,
	OPT_CHUNK,
	OPT_SHARD,
	OPT_RAW,
	OPT_FIELD,
	OPT_LLMC,
	OPT_SEQ,
	OPT_SHUFFLE,
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
		{"output", required_argument, NULL, 'o'},
		{"zstd", required_argument, NULL, OPT_ZSTD},
		{"chunk-bytes", required_argument, NULL, OPT_CHUNK},
		{"shard-bytes", required_argument, NULL, OPT_SHARD},
		{"threads", required_argument, NULL, 'j'},
		{"raw", required_argument, NULL, OPT_RAW},
		{"field", required_argument, NULL, OPT_FIELD},
		{"llmc", required_argument, NULL, OPT_LLMC},
		{"seq-len", required_argument, NULL, OPT_SEQ},
		{"shuffle", required_argument, NULL, OPT_SHUFFLE},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, rc;
	char err[256];

	o->threads = 1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:j:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case OPT_ZSTD:
			if (rf_cli_parse_uint(optarg, 0, 22, &v) < 0)
				return rf_cli_usage_error(PACK_USAGE,
							  "--zstd: '%s' is not a level in 0..22",
							  optarg);
			o->zstd_level = (int)v;
			break;
		case OPT_CHUNK:
		case OPT_SHARD:
			if ((rc = rf_cli_parse_size(optarg, &v)) < 0 || v == 0)
				return rf_cli_usage_error(
					PACK_USAGE, "%s: '%s' is not a size%s",
					c == OPT_CHUNK ? "--chunk-bytes" : "--shard-bytes", optarg,
					rc == -ERANGE ? " (too large)" : " such as 4096, 64K, 4M, 1G");
			if (c == OPT_CHUNK && v > (1ull << 32))
				return rf_cli_usage_error(PACK_USAGE, "--chunk-bytes: '%s' is more "
							  "than 4G, the most a chunk holds", optarg);
			if (c == OPT_CHUNK)
				o->chunk_bytes = v;
			else
				o->shard_bytes = v;
			break;
		case 'j':
			if (rf_cli_parse_uint(optarg, 1, 256, &v) < 0)
				return rf_cli_usage_error(PACK_USAGE,
							  "-j: '%s' is not a thread count in 1..256",
							  optarg);
			o->threads = (unsigned)v;
			break;
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
		case OPT_SHUFFLE:
			if (rf_cli_parse_uint(optarg, 0, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(PACK_USAGE,
							  "--shuffle: '%s' is not a seed in "
							  "0..18446744073709551615", optarg);
			o->shuffle = 1;
			o->seed = v;
			break;
		case 'q':
			rf_cli_verbosity = 0;
			break;
		case 'v':
			rf_cli_verbosity = rf_cli_verbosity < 1 ? 2 : rf_cli_verbosity + 1;
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
	if (!o->out || !*o->out)
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
