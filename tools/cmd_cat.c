/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed cat`: stream a dataset through the loader and write one field of
 * every delivered sample to stdout, in delivered order: raw little-endian
 * bytes (--raw, the default) or one line per sample with the values
 * separated by spaces (--text).  Every batch is read back from where the
 * loader delivered it (with --device cuda, a device-to-host copy), so the
 * output shows what actually arrived.  The last partial batch is kept.
 *
 * The order options (--shuffle, --seed, --epoch, --window, --rank, --world)
 * are the loader's; --batches N --state-out FILE stops after N batches and
 * saves the position, and --state-in FILE continues from a saved one, so
 * that the outputs of the pieces, concatenated, equal one uninterrupted run
 * (each piece given the same --epoch: the loader's epochs count from it).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringfeed/ringfeed.h>

#include "cmd.h"
#include "image_opts.h"
#include "util.h"
#include "mix_args.h"

#define CAT_USAGE                                                                         \
	"ringfeed cat PATH... --field NAME [--raw | --text] [--tokens] [--batch B] "      \
	"[--device host|cuda|auto] [--pinned SIZE] [--depth D] [--pin ring|transient] "    \
	"[--shuffle none|chunks|window|full] [--seed S] [--epoch E] [--window W] "         \
	"[--rank R] [--world W] [--batches N] [--state-out FILE] [--state-in FILE] "       \
	"[--on-error raise|skip] [--mix] [--epoch-samples N] [--cache-dir DIR] [--cache-bytes SIZE] " RF_IMAGE_USAGE

static void
cat_help(void)
{
	printf("usage: %s\n\n", CAT_USAGE);
	printf("Stream the dataset through the loader and write field NAME of every\n"
	       "delivered sample to stdout, in delivered order.  Each batch is copied\n"
	       "back from where it was delivered (the GPU with --device cuda).\n"
	       "\n"
	       "Options:\n"
	       "      --field NAME     the field to write\n"
	       "      --raw            the values' bytes, little-endian, back to back (default)\n"
	       "      --text           one line per sample, values separated by spaces\n"
	       "      --tokens         the int32 token layout of a GPT-style step: field\n"
	       "                       'tokens' of T + 1 tokens (pack --llmc) delivered as\n"
	       "                       'inputs' and 'targets' of T int32 tokens; NAME is\n"
	       "                       inputs or targets\n"
	       "      --batch B        samples per batch (default 256); the last partial\n"
	       "                       batch is kept\n"
	       "      --device D       host, cuda or auto (default auto)\n"
	       "      --pinned SIZE    page-locked host budget, K/M/G suffixes (default 256M)\n"
	       "      --depth D        device buffers in flight (default 2, at most 64)\n"
	       "      --pin MODE       ring (register once) or transient (per batch)\n"
	       "      --shuffle MODE   none (file order, default), chunks, window or full\n"
	       "      --seed S         key of the shuffled order (default 0)\n"
	       "      --epoch E        the epoch whose order is streamed (default 0)\n"
	       "      --window W       decoded chunks for --shuffle window (default: the\n"
	       "                       dataset's, 128 MiB of its chunks; at most 1024)\n"
	       "      --rank R         this share of every global batch (default 0)\n"
	       "      --world W        shares of a global batch of W x B samples (default 1)\n"
	       "      --batches N      stop after N batches\n"
	       "      --state-out FILE at the end (after --batches N, or of the epoch), save\n"
	       "                       the position to FILE (written whole or not at all)\n"
	       "      --state-in FILE  continue from a position saved with --state-out; its\n"
	       "                       shuffle and seed replace the options above; give the\n"
	       "                       --epoch of the run that saved it (cat streams that\n"
	       "                       one epoch; a position in another is refused)\n"
	       "      --on-error P     a chunk that fails its checksum, decompression or\n"
	       "                       read: raise (stop, default) or skip (its samples\n"
	       "                       come out as zeros, logged; at most 16 chunks)\n"
	       "      --mix            each PATH is [NAME=]PATH:WEIGHT, a source of a mixture\n"
	       "                       drawn at the weights' proportions (0: left out)\n"
	       "      --epoch-samples N  a mixture epoch's samples (default: the sources'\n"
	       "                       samples together)\n"
	       RF_IMAGE_HELP
	       "      --cache-dir DIR  keep the chunks of a remote dataset in DIR, so a\n"
	       "                       later run reads them locally (docs/remote.md)\n"
	       "      --cache-bytes SIZE  the cache's cap, K/M/G suffixes (0 or default: 10G)\n"
	       "  -q, --quiet          no summary\n"
	       "  -v, --verbose        the loader's messages and a summary\n"
	       "  -h, --help           this help\n"
	       "\n"
	       "Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n");
}

/* --on-error: raise or skip (rf_config.on_error). */
static int
parse_on_error(const char *s, enum rf_on_error *out)
{
	if (!strcmp(s, "raise"))
		*out = RF_ON_ERROR_RAISE;
	else if (!strcmp(s, "skip"))
		*out = RF_ON_ERROR_SKIP;
	else
		return -EINVAL;
	return 0;
}

static void
cat_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	/* Errors come back as return values and are printed once from
	 * rf_loader_errmsg; the log shows them only with -vv. */
	if (level == RF_LOG_ERROR && rf_cli_verbosity < 3)
		return;
	if ((level <= RF_LOG_WARN && rf_cli_verbosity >= 1) ||
	    (level <= RF_LOG_INFO && rf_cli_verbosity >= 2) || rf_cli_verbosity >= 3)
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
}

/* Whether the dataset of cfg has a field `name`: 1 also when it cannot be
 * opened (that is not a usage error). */
static int
has_field(const rf_config *cfg, const char *name)
{
	rf_dataset_config dcfg;
	rf_dataset_config_init(&dcfg);
	dcfg.verify = 0;
	dcfg.log = cat_log;
	rf_dataset *ds;
	if (rf_dataset_open(&ds, cfg->paths, cfg->npaths, &dcfg) < 0)
		return 1;
	int found = rf_schema_find(rf_dataset_schema(ds), name) >= 0;
	rf_dataset_close(&ds);
	return found;
}

/* IEEE half and bfloat16 to float, for --text (bit manipulation, no libm). */
static float
half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	if (e == 0 && m == 0) {
		u = sign;
	} else if (e == 0) {
		/* Subnormal: m x 2^-24; normalise to 1.f x 2^(e - 127). */
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		u = sign | (e << 23) | ((m & 0x3ff) << 13);
	} else if (e == 31) {
		u = sign | 0x7f800000u | (m << 13);
	} else {
		u = sign | ((e + 112) << 23) | (m << 13);
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float
bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* One value of `dtype` at p, as text. */
static void
put_value(FILE *out, enum rf_dtype dtype, const unsigned char *p)
{
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		int64_t i64;
		float f32;
		double f64;
	} v;
	memcpy(&v, p, rf_dtype_size(dtype));
	switch (dtype) {
	case RF_DTYPE_U8:
	case RF_DTYPE_BYTES: fprintf(out, "%u", v.u8); break;
	case RF_DTYPE_I8: fprintf(out, "%d", v.i8); break;
	case RF_DTYPE_U16: fprintf(out, "%u", v.u16); break;
	case RF_DTYPE_I16: fprintf(out, "%d", v.i16); break;
	case RF_DTYPE_U32: fprintf(out, "%" PRIu32, v.u32); break;
	case RF_DTYPE_I32: fprintf(out, "%" PRId32, v.i32); break;
	case RF_DTYPE_U64: fprintf(out, "%" PRIu64, v.u64); break;
	case RF_DTYPE_I64: fprintf(out, "%" PRId64, v.i64); break;
	case RF_DTYPE_F16: fprintf(out, "%.9g", (double)half_to_float(v.u16)); break;
	case RF_DTYPE_BF16: fprintf(out, "%.9g", (double)bf16_to_float(v.u16)); break;
	case RF_DTYPE_F32: fprintf(out, "%.9g", (double)v.f32); break;
	case RF_DTYPE_F64: fprintf(out, "%.17g", v.f64); break;
	default: break;
	}
}

/* Write sample i of field f (whose data is at host) to out. */
static void
put_sample(FILE *out, const rf_batch_field *f, const unsigned char *host, uint32_t i, int text,
	   uint64_t value_bytes)
{
	const unsigned char *p;
	uint64_t len;
	if (f->host_offsets) {
		p = host + f->host_offsets[i];
		len = (uint64_t)(f->host_offsets[i + 1] - f->host_offsets[i]);
	} else {
		p = host + (uint64_t)i * value_bytes;
		len = value_bytes;
	}
	if (!text) {
		fwrite(p, 1, len, out);
		return;
	}
	size_t es = rf_dtype_size(f->dtype);
	for (uint64_t k = 0; k < len; k += es) {
		if (k)
			fputc(' ', out);
		put_value(out, f->dtype, p + k);
	}
	fputc('\n', out);
}

/* The saved position: FILE holds one blob from rf_loader_state_save. */
static int
read_state(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		rf_cli_error("--state-in %s: %s", path, strerror(errno));
		return -1;
	}
	size_t n = fread(buf, 1, cap, f);
	int err = ferror(f) ? errno : 0;
	int bad = err || fgetc(f) != EOF;
	fclose(f);
	if (bad || n == 0) {
		rf_cli_error("--state-in %s: not a saved position (%s)", path,
			     err ? strerror(err) : n == 0 ? "empty" : "longer than a position");
		return -1;
	}
	*len = n;
	return 0;
}

/* Write the blob to a temporary name beside FILE, then rename it over FILE:
 * a crash leaves the old position or the new one, never half of one. */
static int
write_state(const char *path, const uint8_t *buf, size_t len)
{
	size_t pl = strlen(path);
	char *tmp = malloc(pl + 32);
	if (!tmp) {
		rf_cli_error("--state-out: out of memory");
		return -1;
	}
	snprintf(tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int ok = fd >= 0;
	size_t off = 0;
	while (ok && off < len) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		ok = w > 0;
		if (ok)
			off += (size_t)w;
	}
	ok = ok && fsync(fd) == 0;
	int err = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = 0;
		err = errno;
	}
	if (ok && rename(tmp, path) != 0) {
		ok = 0;
		err = errno;
	}
	if (!ok) {
		rf_cli_error("--state-out %s: %s", path, strerror(err));
		unlink(tmp);
	}
	free(tmp);
	return ok ? 0 : -1;
}

int
rf_cmd_cat(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"field", required_argument, NULL, 'f'},
		{"raw", no_argument, NULL, 'r'},
		{"text", no_argument, NULL, 't'},
		{"tokens", no_argument, NULL, 'T'},
		{"batch", required_argument, NULL, 'b'},
		{"device", required_argument, NULL, 'd'},
		{"pinned", required_argument, NULL, 'p'},
		{"depth", required_argument, NULL, 'D'},
		{"pin", required_argument, NULL, 'P'},
		{"shuffle", required_argument, NULL, 'S'},
		{"seed", required_argument, NULL, 's'},
		{"epoch", required_argument, NULL, 'e'},
		{"window", required_argument, NULL, 'w'},
		{"rank", required_argument, NULL, 'R'},
		{"world", required_argument, NULL, 'W'},
		{"batches", required_argument, NULL, 'n'},
		{"state-out", required_argument, NULL, 'o'},
		{"state-in", required_argument, NULL, 'i'},
		{"on-error", required_argument, NULL, 'E'},
		{"mix", no_argument, NULL, 'M'},
		{"epoch-samples", required_argument, NULL, 'N'},
		{"cache-dir", required_argument, NULL, 'C'},
		{"cache-bytes", required_argument, NULL, 'B'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		RF_IMAGE_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	const char *field = NULL, *state_out = NULL, *state_in = NULL;
	int text = 0, c, rc, mix = 0;
	rf_source src[RF_SOURCES_MAX];
	const char *src_paths[RF_SOURCES_MAX];
	uint64_t v, max_batches = 0;
	int64_t rank = 0, world = 1;
	uint8_t blob[RF_STATE_MAX];
	size_t blob_len = 0;
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.batch_size = 256;
	struct rf_image_opts img;
	rf_image_opts_init(&img);

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': field = optarg; break;
		case 'r': text = 0; break;
		case 't': text = 1; break;
		case 'T': cfg.tokens = RF_TOKENS_INPUTS_TARGETS; break;
		case 'C': cfg.cache_dir = optarg; break;
		case 'B':
			if (rf_cli_parse_size(optarg, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--cache-bytes: '%s' is not a "
							  "size (e.g. 20G)", optarg);
			cfg.cache_bytes = v;
			break;
		case 'b':
			if (rf_cli_parse_uint(optarg, 1, UINT32_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--batch: '%s' is not a number "
							  "in 1..%u", optarg, UINT32_MAX);
			cfg.batch_size = (uint32_t)v;
			break;
		case 'd':
			if (rf_device_parse(optarg, &cfg.device) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--device: '%s' is not host, "
							  "cuda or auto", optarg);
			break;
		case 'p':
			if (rf_cli_parse_size(optarg, &v) < 0 || v == 0)
				return rf_cli_usage_error(CAT_USAGE, "--pinned: '%s' is not a size "
							  "(e.g. 64M)", optarg);
			cfg.pinned_bytes = v;
			break;
		case 'D':
			if (rf_cli_parse_uint(optarg, 1, RF_DEPTH_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--depth: '%s' is not a number "
							  "in 1..%d", optarg, RF_DEPTH_MAX);
			cfg.depth = (uint32_t)v;
			break;
		case 'P':
			if (rf_pinning_parse(optarg, &cfg.pinning) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--pin: '%s' is not ring or "
							  "transient", optarg);
			break;
		case 'E':
			if (parse_on_error(optarg, &cfg.on_error) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--on-error: '%s' is not raise "
							  "or skip", optarg);
			break;
		case 'S':
			if (rf_shuffle_parse(optarg, &cfg.shuffle) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--shuffle: '%s' is not none, "
							  "chunks, window or full", optarg);
			break;
		case 's':
			if (rf_cli_parse_uint(optarg, 0, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--seed: '%s' is not a number",
							  optarg);
			cfg.seed = v;
			break;
		case 'e':
			if (rf_cli_parse_uint(optarg, 0, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--epoch: '%s' is not a number",
							  optarg);
			cfg.epoch = v;
			break;
		case 'w':
			if (rf_cli_parse_uint(optarg, 1, RF_WINDOW_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--window: '%s' is not a number "
							  "in 1..%d", optarg, RF_WINDOW_MAX);
			cfg.window = (uint32_t)v;
			break;
		case 'R':
			if (rf_cli_parse_uint(optarg, 0, RF_WORLD_MAX - 1, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--rank: '%s' is not a number "
							  "in 0..%d", optarg, RF_WORLD_MAX - 1);
			rank = (int64_t)v;
			break;
		case 'W':
			if (rf_cli_parse_uint(optarg, 1, RF_WORLD_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--world: '%s' is not a number "
							  "in 1..%d", optarg, RF_WORLD_MAX);
			world = (int64_t)v;
			break;
		case 'n':
			if (rf_cli_parse_uint(optarg, 1, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--batches: '%s' is not a number "
							  ">= 1", optarg);
			max_batches = v;
			break;
		case 'M': mix = 1; break;
		case 'N':
			if (rf_cli_parse_uint(optarg, 1, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(CAT_USAGE, "--epoch-samples: '%s' is not a "
							  "whole number >= 1 (a mixture epoch's "
							  "samples)", optarg);
			cfg.epoch_samples = v;
			break;
		case 'o': state_out = optarg; break;
		case 'i': state_in = optarg; break;
		case 'q': rf_cli_verbosity = 0; break;
		case 'v': rf_cli_verbosity++; break;
		case 'h': cat_help(); return RF_CLI_OK;
		default:
			rc = rf_image_opts_parse(&img, c, optarg, CAT_USAGE);
			if (rc < 0)
				return RF_CLI_USAGE;
			if (rc == 0)
				return rf_cli_bad_option(CAT_USAGE, c, argc, argv);
			break;
		}
	}
	if (optind >= argc)
		return rf_cli_usage_error(CAT_USAGE, "missing PATH");
	if (!field)
		return rf_cli_usage_error(CAT_USAGE, "missing --field NAME");
	/* The library's rule for the pair, so cat refuses what the loader
	 * would, with the loader's words. */
	char why[256];
	if (rf_rank_resolve((int32_t)rank, (int32_t)world, NULL, NULL, NULL, why, sizeof why) < 0)
		return rf_cli_usage_error(CAT_USAGE, "--rank %" PRId64 " --world %" PRId64 ": %s",
					  rank, world, why);
	if (state_in && read_state(state_in, blob, sizeof(blob), &blob_len) < 0)
		return RF_CLI_FAIL;

	/* --tokens: the loaded field is 'tokens', delivered as two. */
	int part = 0;
	if (cfg.tokens == RF_TOKENS_INPUTS_TARGETS) {
		if (strcmp(field, "inputs") && strcmp(field, "targets"))
			return rf_cli_usage_error(CAT_USAGE, "--tokens: --field is inputs or "
						  "targets, not '%s'", field);
		part = !strcmp(field, "targets");
		field = "tokens";
	}
	const char *fields[] = {field};
	if (mix) {
		/* Each PATH is [NAME=]PATH:WEIGHT, a source of the mixture. */
		rc = rf_cli_parse_mix(argv + optind, (size_t)(argc - optind), src, src_paths,
				      CAT_USAGE);
		if (rc)
			return rc;
		cfg.sources = src;
		cfg.nsources = (size_t)(argc - optind);
	} else {
		cfg.paths = (const char *const *)(argv + optind);
		cfg.npaths = (size_t)(argc - optind);
	}
	cfg.fields = fields;
	cfg.nfields = 1;
	cfg.drop_last = 0;
	/* --image-*: the field is decoded (its name must be --field's). */
	if (img.on && strcmp(img.field, "image") == 0)
		snprintf(img.field, sizeof img.field, "%s", field);
	if (rf_image_opts_apply(&img, &cfg, CAT_USAGE) < 0)
		return RF_CLI_USAGE;
	/* Every sample (or the share asked for), whatever launcher
	 * environment cat runs in. */
	cfg.rank = (int32_t)rank;
	cfg.world = (int32_t)world;
	if (state_in) {
		cfg.resume = blob;
		cfg.resume_len = blob_len;
	}
	cfg.log = cat_log;

	rf_loader *ld;
	rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		rf_cli_error("%s", *rf_loader_last_open_error() ? rf_loader_last_open_error()
								: rf_strerror(rc));
		if (!mix)
			rf_cli_mix_hint(rc, cfg.paths, cfg.npaths);
		/* A --field the dataset lacks is bad usage (the message
		 * lists the fields there are). */
		return rc == RF_EUSAGE && !has_field(&cfg, field) ? RF_CLI_USAGE : RF_CLI_FAIL;
	}

	/* A reader that goes away (`| head`) ends the output, not with an
	 * error: EPIPE from the write instead of a SIGPIPE death. */
	signal(SIGPIPE, SIG_IGN);
	rf_cli_signals_install();
	static char obuf[1 << 20];
	setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));

	int status = RF_CLI_OK;
	unsigned char *host = NULL;
	uint64_t host_cap = 0, samples = 0, batches = 0;
	double t0 = rf_cli_now();
	for (;;) {
		if (max_batches && batches >= max_batches)
			break;
		if (rf_cli_interrupted()) {
			status = 128 + rf_cli_interrupted();
			break;
		}
		const rf_batch *b;
		rc = rf_loader_next(ld, &b);
		if (rc < 0) {
			fflush(stdout);
			rf_cli_error("%s", rf_loader_errmsg(ld));
			status = RF_CLI_FAIL;
			break;
		}
		if (!b)
			break;
		const rf_batch_field *f = &b->fields[part];
		if (f->bytes > host_cap) {
			free(host);
			host_cap = f->bytes;
			host = malloc(host_cap);
			if (!host) {
				rf_cli_error("out of memory for a batch of %" PRIu64 " bytes", host_cap);
				rf_loader_release(ld, b, NULL);
				status = RF_CLI_FAIL;
				break;
			}
		}
		rc = rf_batch_field_read(b, (uint32_t)part, host, host_cap);
		if (rc < 0) {
			rf_cli_error("%s", rf_loader_errmsg(ld));
			rf_loader_release(ld, b, NULL);
			status = RF_CLI_FAIL;
			break;
		}
		uint64_t value_bytes = f->host_offsets || !b->samples ? 0 : f->bytes / b->samples;
		for (uint32_t i = 0; i < b->samples; i++)
			put_sample(stdout, f, host, i, text, value_bytes);
		samples += b->samples;
		batches++;
		rf_loader_release(ld, b, NULL);
		if (ferror(stdout))
			break;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno != EPIPE) {
			rf_cli_error("writing to stdout: %s", strerror(errno));
			status = RF_CLI_FAIL;
		} else if (state_out) {
			/* The reader went away: the batches it did not get must
			 * not count as consumed in a saved position. */
			rf_cli_error("stdout was closed before the end: the position is not saved "
				     "to %s", state_out);
			status = RF_CLI_FAIL;
		}
	}
	if (status == RF_CLI_OK && state_out) {
		size_t len = 0;
		rc = rf_loader_state_save(ld, blob, sizeof(blob), &len);
		if (rc < 0) {
			rf_cli_error("saving the position: %s", rf_loader_errmsg(ld));
			status = RF_CLI_FAIL;
		} else if (write_state(state_out, blob, len) < 0) {
			status = RF_CLI_FAIL;
		}
	}
	if (status == RF_CLI_OK && rf_cli_verbosity >= 2) {
		rf_stats st = {.size = sizeof(st)};
		rf_loader_stats(ld, &st);
		double secs = rf_cli_now() - t0;
		char a[32];
		rf_cli_fmt_bytes(a, sizeof a, (double)st.bytes_read);
		rf_cli_note(2, "%" PRIu64 " samples in %" PRIu64 " batches, %s read in %.3f s on %s "
			    "(%s), consumer stalled %.0f%% of the time", samples, batches, a, secs,
			    st.device, st.io_engine, 100.0 * st.stall_share);
		if (cfg.nimages)
			rf_cli_note(2, "%" PRIu64 " images decoded", st.images_decoded);
	}
	if (status == RF_CLI_OK && cfg.on_error == RF_ON_ERROR_SKIP) {
		rf_stats st = {.size = sizeof(st)};
		if (rf_loader_stats(ld, &st) == 0 && st.chunks_skipped)
			rf_cli_note(1, "--on-error skip: %" PRIu64 " chunks skipped, %" PRIu64
				    " samples written as zeros", st.chunks_skipped,
				    st.samples_substituted);
	}
	free(host);
	rf_loader_close(&ld);
	return status;
}
