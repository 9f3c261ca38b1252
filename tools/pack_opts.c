/* SPDX-License-Identifier: MIT */
/*
 * The options both `ringfeed pack` front ends take (pack_opts.h): parsing,
 * their help, and the writer settings they give.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "pack_opts.h"
#include "util.h"

void
pack_shared_init(pack_shared *s)
{
	*s = (pack_shared){.threads = 1};
}

static int
parse_size(const char *opt, const char *arg, const char *usage, uint64_t *v)
{
	int rc = rf_cli_parse_size(arg, v);

	if (rc < 0 || *v == 0)
		return rf_cli_usage_error(usage, "%s: '%s' is not a size%s", opt, arg,
					  rc == -ERANGE ? " (too large)"
							: " such as 4096, 64K, 4M, 1G");
	return 0;
}

int
pack_shared_option(pack_shared *s, int c, const char *arg, const char *usage)
{
	uint64_t v;
	int rc;

	switch (c) {
	case 'o':
		s->out = arg;
		return 0;
	case PACK_OPT_ZSTD:
		if (rf_cli_parse_uint(arg, 0, 22, &v) < 0)
			return rf_cli_usage_error(usage, "--zstd: '%s' is not a level in 0..22",
						  arg);
		s->zstd_level = (int)v;
		return 0;
	case PACK_OPT_CHUNK:
		if ((rc = parse_size("--chunk-bytes", arg, usage, &v)) != 0)
			return rc;
		if (v > (1ull << 32))
			return rf_cli_usage_error(usage, "--chunk-bytes: '%s' is more than 4G, the "
						  "most a chunk holds", arg);
		s->chunk_bytes = v;
		return 0;
	case PACK_OPT_SHARD:
		if ((rc = parse_size("--shard-bytes", arg, usage, &v)) != 0)
			return rc;
		s->shard_bytes = v;
		return 0;
	case 'j':
		if (rf_cli_parse_uint(arg, 1, 256, &v) < 0)
			return rf_cli_usage_error(usage, "-j: '%s' is not a thread count in 1..256",
						  arg);
		s->threads = (unsigned)v;
		return 0;
	case PACK_OPT_SHUFFLE:
		if (rf_cli_parse_uint(arg, 0, UINT64_MAX, &v) < 0)
			return rf_cli_usage_error(usage, "--shuffle: '%s' is not a seed in "
						  "0..18446744073709551615", arg);
		s->shuffle = 1;
		s->seed = v;
		return 0;
	case 'q':
		rf_cli_verbosity = 0;
		return 0;
	case 'v':
		rf_cli_verbosity = rf_cli_verbosity < 1 ? 2 : rf_cli_verbosity + 1;
		return 0;
	default:
		return PACK_NOT_SHARED;
	}
}

void
pack_shared_writer_config(const pack_shared *s, rf_writer_config *cfg)
{
	rf_writer_config_init(cfg);
	cfg->zstd_level = s->zstd_level;
	if (s->chunk_bytes)
		cfg->chunk_bytes = s->chunk_bytes;
	cfg->shard_bytes = s->shard_bytes;
	cfg->threads = s->threads;
}

void
pack_shared_help(FILE *f)
{
	fprintf(f,
		"Options:\n"
		"  -o, --output OUT.rfs   output path; with --shard-bytes, the base of\n"
		"                         OUT-00000.rfs, OUT-00001.rfs, ...  The output\n"
		"                         replaces an earlier pack to OUT whole: its shards\n"
		"                         that the new one does not overwrite are removed\n"
		"      --zstd LEVEL       compress chunks with zstd 1..22 (0: store raw, default)\n"
		"      --chunk-bytes SIZE target raw bytes per chunk, at most 4G (default 4M,\n"
		"                         or for fixed-size samples 128 of them up to 20M,\n"
		"                         so that a chunk holds whole batches)\n"
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
		"                         Cost (.npy, --raw, --llmc): each sample is read\n"
		"                         where it lies in the mapped inputs, in random\n"
		"                         order; no copy of the dataset is made, but the\n"
		"                         input pages read stay mapped (RSS, reclaimable\n"
		"                         page cache).  Inputs that fit in half the RAM\n"
		"                         are read ahead whole into the page cache first;\n"
		"                         larger ones are read at the disk's random-read\n"
		"                         speed (fine on an SSD, slow on a spinning disk\n"
		"                         or a network file system).\n"
		"  -j, --threads N        compression threads (default 1)\n"
		"  -q, --quiet            no progress and no summary\n"
		"  -v, --verbose          more messages (repeat for debug)\n"
		"  -h, --help             this help\n"
		"\n"
		"SIZE takes a suffix K, M, G, T (or KiB, MB, ...: all powers of 1024).\n"
		"Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n\n");
}
