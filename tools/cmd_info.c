/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed info`: what a dataset holds.
 *
 * --json prints one object with these keys (a program may rely on them):
 *   "version"       ringfeed library version string
 *   "shards"        number of shard files
 *   "shard_paths"   [path, ...] in dataset order
 *   "samples"       number of samples
 *   "chunks"        number of chunks
 *   "codec"         "none", "zstd", or "mixed" (chunks disagree)
 *   "raw_bytes"     sum of the chunks' decoded sizes
 *   "stored_bytes"  sum of the chunks' stored sizes (padding excluded)
 *   "file_bytes"    sum of the shard files' sizes
 *   "ratio"         raw_bytes / stored_bytes (1.0 when nothing is stored)
 *   "fields"        [{"name", "dtype", "shape": [d0, ...] with null for the
 *                    variable dimension, "var_dim": -1 or its index,
 *                    "item_bytes": bytes of a value (fixed) or of one step
 *                    along the variable dimension}, ...]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <ringfeed/dataset.h>

#include "cmd.h"
#include "images.h"
#include "util.h"

#define INFO_USAGE "ringfeed info [--json] [-q|-v] PATH..."

typedef struct info_totals {
	uint64_t raw, stored, files;
	unsigned codecs; /* bit per codec seen */
} info_totals;

static void
info_help(void)
{
	printf("usage: %s\n\n", INFO_USAGE);
	printf("Show a dataset's schema (variable dimensions as '?'), samples, chunks,\n"
	       "shards, codec, raw and stored sizes and the compression ratio.  Each PATH\n"
	       "is a shard, a pack's manifest (BASE.rfm) or name (BASE.rfs), a directory\n"
	       "holding one pack, or a glob; all together form one dataset.\n"
	       "\n"
	       "Options:\n"
	       "      --json      print one JSON object with the keys: version, shards,\n"
	       "                  shard_paths, samples, chunks, codec (none|zstd|mixed),\n"
	       "                  raw_bytes, stored_bytes, file_bytes, ratio, fields (each\n"
	       "                  {name, dtype, shape (null for the variable dimension),\n"
	       "                  var_dim, item_bytes})\n"
	       "  -q, --quiet     fewer messages\n"
	       "  -v, --verbose   list every shard\n"
	       "  -h, --help      this help\n"
	       "\n"
	       "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

static const char *
codec_name(unsigned codecs)
{
	if (codecs == 0 || codecs == 1u << RF_CODEC_NONE)
		return "none";
	if (codecs == 1u << RF_CODEC_ZSTD)
		return "zstd";
	return "mixed";
}

static void
shape_text(char *buf, size_t cap, const rf_field *f)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, cap - n, "[");
	for (uint32_t d = 0; d < f->rank && n < cap; d++) {
		if ((int32_t)d == f->var_dim)
			n += (size_t)snprintf(buf + n, cap - n, "%s?", d ? ", " : "");
		else
			n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, d ? ", " : "",
					      f->shape[d]);
	}
	if (n < cap)
		snprintf(buf + n, cap - n, "]");
}

static void
print_json(rf_dataset *ds, const info_totals *t)
{
	const rf_schema *s = rf_dataset_schema(ds);
	size_t nshards = rf_dataset_shards(ds);

	printf("{\"version\": ");
	rf_cli_json_str(stdout, rf_version_string());
	printf(", \"shards\": %zu, \"shard_paths\": [", nshards);
	for (size_t i = 0; i < nshards; i++) {
		printf("%s", i ? ", " : "");
		rf_cli_json_str(stdout, rf_dataset_shard_path(ds, i));
	}
	printf("], \"samples\": %" PRIu64 ", \"chunks\": %" PRIu64 ", \"codec\": \"%s\"",
	       rf_dataset_samples(ds), rf_dataset_chunks(ds), codec_name(t->codecs));
	printf(", \"raw_bytes\": %" PRIu64 ", \"stored_bytes\": %" PRIu64
	       ", \"file_bytes\": %" PRIu64 ", \"ratio\": %.6g",
	       t->raw, t->stored, t->files, t->stored ? (double)t->raw / (double)t->stored : 1.0);
	printf(", \"fields\": [");
	for (uint32_t i = 0; i < s->nfields; i++) {
		const rf_field *f = &s->fields[i];
		printf("%s{\"name\": ", i ? ", " : "");
		rf_cli_json_str(stdout, f->name);
		printf(", \"dtype\": \"%s\", \"shape\": [", rf_dtype_name(f->dtype));
		for (uint32_t d = 0; d < f->rank; d++) {
			if ((int32_t)d == f->var_dim)
				printf("%snull", d ? ", " : "");
			else
				printf("%s%" PRIu64, d ? ", " : "", f->shape[d]);
		}
		printf("], \"var_dim\": %d, \"item_bytes\": %" PRIu64 "}", (int)f->var_dim,
		       rf_field_item_bytes(f));
	}
	printf("]");
	rf_classes_print(ds, 1);
	printf("}\n");
}

static void
print_text(rf_dataset *ds, const info_totals *t)
{
	const rf_schema *s = rf_dataset_schema(ds);
	size_t nshards = rf_dataset_shards(ds);
	char a[24], shape[256];
	size_t wname = 4;

	if (nshards == 1 || rf_cli_verbosity >= 2) {
		for (size_t i = 0; i < nshards; i++)
			printf("shard %-7zu %s\n", i, rf_dataset_shard_path(ds, i));
	} else {
		printf("paths:        %s ... %s\n", rf_dataset_shard_path(ds, 0),
		       rf_dataset_shard_path(ds, nshards - 1));
	}
	printf("shards:       %zu\n", nshards);
	printf("samples:      %" PRIu64 "\n", rf_dataset_samples(ds));
	printf("chunks:       %" PRIu64 "\n", rf_dataset_chunks(ds));
	printf("codec:        %s\n", codec_name(t->codecs));
	printf("raw bytes:    %" PRIu64 " (%s)\n", t->raw, rf_cli_fmt_bytes(a, sizeof a, (double)t->raw));
	printf("stored bytes: %" PRIu64 " (%s)\n", t->stored,
	       rf_cli_fmt_bytes(a, sizeof a, (double)t->stored));
	printf("file bytes:   %" PRIu64 " (%s)\n", t->files,
	       rf_cli_fmt_bytes(a, sizeof a, (double)t->files));
	printf("ratio:        %.3f\n", t->stored ? (double)t->raw / (double)t->stored : 1.0);
	printf("fields:       %u\n", s->nfields);
	for (uint32_t i = 0; i < s->nfields; i++)
		if (strlen(s->fields[i].name) > wname)
			wname = strlen(s->fields[i].name);
	for (uint32_t i = 0; i < s->nfields; i++) {
		const rf_field *f = &s->fields[i];
		shape_text(shape, sizeof shape, f);
		printf("  %-*s  %-5s  %s%s\n", (int)wname, f->name, rf_dtype_name(f->dtype), shape,
		       f->var_dim >= 0 ? "  (variable)" : "");
	}
	rf_classes_print(ds, 0);
}

int
rf_cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'J'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	rf_dataset *ds = NULL;
	info_totals t = {0};
	int json = 0, c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'J': json = 1; break;
		case 'q': rf_cli_verbosity = 0; break;
		case 'v': rf_cli_verbosity++; break;
		case 'h': info_help(); return RF_CLI_OK;
		default: return rf_cli_bad_option(INFO_USAGE, c, argc, argv);
		}
	}
	if (optind >= argc)
		return rf_cli_usage_error(INFO_USAGE, "missing PATH");
	if (rf_cli_open_dataset(&ds, argv + optind, (size_t)(argc - optind), 1) < 0)
		return RF_CLI_FAIL;
	for (uint64_t k = 0, n = rf_dataset_chunks(ds); k < n; k++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, k, &ci) < 0)
			break;
		t.raw += ci.raw_bytes;
		t.stored += ci.stored_bytes;
		if ((unsigned)ci.codec < 8)
			t.codecs |= 1u << ci.codec;
	}
	for (size_t i = 0, n = rf_dataset_shards(ds); i < n; i++)
		t.files += rf_dataset_shard_bytes(ds, i);
	if (json)
		print_json(ds, &t);
	else
		print_text(ds, &t);
	rf_dataset_close(&ds);
	if (fflush(stdout) != 0) {
		rf_cli_error("writing to stdout failed");
		return RF_CLI_FAIL;
	}
	return RF_CLI_OK;
}
