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
 * gives, each read where it lies in the mapped inputs (feed_shuffled).
 *
 * The inputs are mapped (mmap) and handed to rf_writer_add_columns in blocks
 * of a few MiB (two chunks), so packing raw data costs one copy into the
 * writer's chunk plus the write: the writer's threads do any compression.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringfeed/dataset.h>

#include "cmd.h"
#include "images.h"
#include "llmc.h"
#include "npy.h"
#include "util.h"

/* Bytes handed to the writer per call: two chunks, within [1, 16] MiB.
 * Large enough that the per-call cost vanishes (4-16 MiB runs at memcpy
 * speed), small enough to poll for Ctrl-C and redraw progress often even at
 * slow zstd levels, and to keep the de-interleave buffers (raw records, llm.c
 * windows) small. */
#define PACK_BLOCK_MIN (1u << 20)
#define PACK_BLOCK_MAX (16u << 20)

#define PACK_USAGE                                                                          \
	"ringfeed pack -o OUT.rfs [--zstd LEVEL] [--chunk-bytes SIZE] [--shard-bytes SIZE]\n" \
	"                     [--shuffle SEED] [-j THREADS] [-q|-v] (NAME=FILE.npy... | --raw FILE --field "  \
	"NAME:DTYPE[D0,...]... |\n"                                                           \
	"                     --llmc GLOB --seq-len T | --images DIR | --tar GLOB)"

enum pack_mode { MODE_NONE, MODE_NPY, MODE_RAW, MODE_LLMC };

/* Tool settings, kept apart from the library's rf_writer_config. */
typedef struct pack_opts {
	const char *out;
	int zstd_level;
	uint64_t chunk_bytes;      /* 0 = the writer's default */
	uint64_t shard_bytes;
	unsigned threads;
	enum pack_mode mode;
	char **inputs;             /* NAME=FILE.npy, or --raw files */
	size_t ninputs;
	rf_cli_field_spec *specs;  /* --field */
	size_t nspecs;
	const char *llmc_glob;
	uint64_t seq_len;
	int shuffle;               /* --shuffle given */
	uint64_t seed;
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

static int
parse_args(pack_opts *o, int argc, char **argv)
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
	const char *out = j->opt.out;
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

/* --------------------------------------------------------------- inputs */

static int
map_input(input_file *f, const char *path)
{
	struct stat st;
	int fd;

	f->path = path;
	/* O_NONBLOCK: a pipe is refused below instead of blocking the open. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		rf_cli_error("%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rf_cli_error("%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
		close(fd);
		return -1;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->map_len = (size_t)st.st_size;
	if (f->map_len) {
		void *m = mmap(NULL, f->map_len, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			rf_cli_error("%s: mmap: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		/* Read ahead aggressively; pages behind are not needed again. */
		madvise(m, f->map_len, MADV_SEQUENTIAL);
		f->map = m;
	}
	close(fd);
	return 0;
}

static void
unmap_inputs(pack_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].map)
			munmap((void *)j->files[i].map, j->files[i].map_len);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* About to read data[from, to) of an input, `ahead` more bytes to follow.
 * Three hints, all best effort (errors, e.g. from an older kernel, are
 * ignored):
 *  - MADV_WILLNEED on the next `ahead` bytes starts their reads now, in
 *    large requests, so the disk works while this block is copied and
 *    written (page faults alone read a small readahead window at a time,
 *    synchronously, which left a cold-cache pack at a third of cp's speed);
 *  - MADV_POPULATE_READ maps this block in one call instead of a fault
 *    every few pages;
 *  - MADV_DONTNEED drops the pages already consumed from this process (they
 *    stay in the page cache), so the resident size stays at a few blocks
 *    however large the input. */
static void
input_window(input_file *f, uint64_t from, uint64_t to, uint64_t ahead)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t base = (size_t)(f->data - f->map);
	size_t start, end, want;

	if (!f->map || page <= 0)
		return;
	start = (base + (size_t)from) & ~((size_t)page - 1);
	end = base + (size_t)to;
	if (end > f->map_len)
		end = f->map_len;
	want = end + (size_t)ahead;
	if (want > f->map_len)
		want = f->map_len;
	if (f->advised < start)
		f->advised = start;
	if (want > f->advised) {
		/* madvise wants a page-aligned start. */
		size_t a = f->advised & ~((size_t)page - 1);
		madvise((void *)(f->map + a), want - a, MADV_WILLNEED);
		f->advised = want;
	}
	if (end > start)
		madvise((void *)(f->map + start), end - start, MADV_POPULATE_READ);
	if (start > f->released) {
		madvise((void *)(f->map + f->released), start - f->released, MADV_DONTNEED);
		f->released = start;
	}
}

/* Add a field with a message that says what is wrong. */
static int
add_field(pack_job *j, const char *name, const char *from, enum rf_dtype dtype, uint32_t rank,
	  const uint64_t *shape)
{
	size_t nlen = strlen(name);

	if (nlen == 0 || nlen >= RF_NAME_MAX || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						      "abcdefghijklmnopqrstuvwxyz0123456789_.-") != nlen) {
		rf_cli_error("%s: invalid field name '%s' (1-%d characters of A-Z a-z 0-9 _ . -)",
			     from, name, RF_NAME_MAX - 1);
		return -1;
	}
	if (rf_schema_find(&j->schema, name) >= 0) {
		rf_cli_error("%s: field '%s' given twice", from, name);
		return -1;
	}
	if (rank > RF_MAX_RANK) {
		rf_cli_error("%s: field '%s' has %u dimensions per sample (at most %d)", from, name,
			     rank, RF_MAX_RANK);
		return -1;
	}
	for (uint32_t i = 0; i < rank; i++)
		if (shape[i] == 0) {
			rf_cli_error("%s: field '%s' has a zero-length dimension", from, name);
			return -1;
		}
	if (rf_schema_add(&j->schema, name, dtype, rank, shape, -1) < 0) {
		rf_cli_error("%s: field '%s' is not valid (a value of over 2^40 bytes?)", from, name);
		return -1;
	}
	return 0;
}

static int
open_npy(pack_job *j)
{
	for (size_t i = 0; i < j->opt.ninputs; i++) {
		input_file *f = &j->files[i];
		char *spec = j->opt.inputs[i];
		char *eq = strchr(spec, '=');
		char err[256];
		rf_npy npy;
		uint64_t shape[RF_NPY_MAX_DIMS + 1];
		uint32_t rank;
		int rc;

		*eq = 0; /* spec is now NAME, eq + 1 the path */
		j->nfiles++;
		if (map_input(f, eq + 1) < 0)
			return -1;
		rc = rf_npy_parse(&npy, f->map, f->map_len, err, sizeof err);
		if (rc < 0) {
			rf_cli_error("%s: %s", f->path, err);
			return -1;
		}
		/* data_offset <= map_len (the parser saw the whole header);
		 * data_bytes may be anything a hostile header says. */
		if (npy.data_bytes > f->map_len - npy.data_offset) {
			rf_cli_error("%s: truncated: the header declares %" PRIu64
				     " bytes of data, the file holds %" PRIu64,
				     f->path, npy.data_bytes, (uint64_t)f->map_len - npy.data_offset);
			return -1;
		}
		if (npy.data_bytes < f->map_len - npy.data_offset) {
			rf_cli_error("%s: %" PRIu64 " unexpected bytes after the array data", f->path,
				     (uint64_t)f->map_len - npy.data_offset - npy.data_bytes);
			return -1;
		}
		if (npy.ndim == 0) {
			rf_cli_error("%s: a 0-d array has no samples axis", f->path);
			return -1;
		}
		f->data = f->map + npy.data_offset;
		f->data_bytes = npy.data_bytes;
		f->samples = npy.shape[0];
		if (i > 0 && f->samples != j->files[0].samples) {
			rf_cli_error("%s: %" PRIu64 " samples, but %s has %" PRIu64
				     " (the first axes must agree)",
				     f->path, f->samples, j->files[0].path, j->files[0].samples);
			return -1;
		}
		rank = (uint32_t)(npy.ndim - 1);
		memcpy(shape, npy.shape + 1, sizeof shape[0] * rank);
		/* Fixed-size byte strings become a trailing dimension of bytes. */
		if (npy.dtype == RF_DTYPE_BYTES)
			shape[rank++] = npy.itemsize;
		if (add_field(j, spec, f->path, npy.dtype, rank, shape) < 0)
			return -1;
		f->item_bytes = rf_field_item_bytes(&j->schema.fields[j->schema.nfields - 1]);
		j->in_bytes += f->data_bytes;
		rf_cli_note(2, "%s: field '%s' %s, %" PRIu64 " samples of %" PRIu64 " bytes", f->path,
			    spec, npy.descr, f->samples, f->item_bytes);
	}
	j->samples = j->files[0].samples;
	return 0;
}

static int
open_raw(pack_job *j)
{
	uint64_t record = 0;

	for (size_t i = 0; i < j->opt.nspecs; i++) {
		const rf_cli_field_spec *s = &j->opt.specs[i];
		if (add_field(j, s->name, "--field", s->dtype, s->rank, s->shape) < 0)
			return -1;
		record += rf_field_item_bytes(&j->schema.fields[i]);
	}
	for (size_t i = 0; i < j->opt.ninputs; i++) {
		input_file *f = &j->files[i];
		j->nfiles++;
		if (map_input(f, j->opt.inputs[i]) < 0)
			return -1;
		if (f->map_len % record) {
			rf_cli_error("%s: size %zu is not a multiple of the record size %" PRIu64
				     " (%zu trailing bytes)",
				     f->path, f->map_len, record, (size_t)(f->map_len % record));
			return -1;
		}
		f->data = f->map;
		f->data_bytes = f->map_len;
		f->samples = f->map_len / record;
		f->item_bytes = record;
		j->samples += f->samples;
		j->in_bytes += f->data_bytes;
	}
	return 0;
}

static int
open_llmc(pack_job *j)
{
	glob_t g;
	int rc;
	uint64_t tail = 0, tail_shards = 0;
	uint64_t shape[1];

	rc = glob(j->opt.llmc_glob, GLOB_ERR, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		rf_cli_error("--llmc: no file matches '%s'", j->opt.llmc_glob);
		return -1;
	}
	if (rc != 0) {
		rf_cli_error("--llmc: cannot expand '%s': %s", j->opt.llmc_glob,
			     rc == GLOB_NOSPACE ? "out of memory" : strerror(errno));
		return -1;
	}
	/* glob() sorts its matches: the shards go in name order. */
	j->files = calloc(g.gl_pathc, sizeof *j->files);
	if (!j->files) {
		globfree(&g);
		rf_cli_error("out of memory");
		return -1;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		input_file *f = &j->files[i];
		char err[256];
		char *path = strdup(g.gl_pathv[i]);

		if (!path) {
			rf_cli_error("out of memory");
			goto fail;
		}
		j->nfiles++;
		if (map_input(f, path) < 0)
			goto fail;
		rc = rf_llmc_parse(&f->llmc, f->map, f->map_len, f->map_len, err, sizeof err);
		if (rc < 0) {
			rf_cli_error("%s: %s", f->path, err);
			goto fail;
		}
		if (i > 0 && f->llmc.dtype != j->files[0].llmc.dtype) {
			rf_cli_error("%s: %s tokens, but %s has %s tokens", f->path,
				     rf_dtype_name(f->llmc.dtype), j->files[0].path,
				     rf_dtype_name(j->files[0].llmc.dtype));
			goto fail;
		}
		f->data = f->map + RF_LLMC_HEADER_BYTES;
		f->data_bytes = f->llmc.ntokens * f->llmc.token_bytes;
		f->samples = rf_llmc_windows(f->llmc.ntokens, j->opt.seq_len, &f->tail);
		f->item_bytes = (j->opt.seq_len + 1) * f->llmc.token_bytes;
		j->samples += f->samples;
		j->in_bytes += f->data_bytes;
		if (f->tail) {
			tail += f->tail;
			tail_shards++;
			rf_cli_note(2, "%s: %" PRIu64 " tokens, %" PRIu64 " samples, last %" PRIu64
				    " tokens dropped",
				    f->path, f->llmc.ntokens, f->samples, f->tail);
		}
	}
	globfree(&g);
	shape[0] = j->opt.seq_len + 1;
	if (add_field(j, "tokens", j->opt.llmc_glob, j->files[0].llmc.dtype, 1, shape) < 0)
		return -1;
	if (tail)
		rf_cli_note(1, "%" PRIu64 " tokens at the ends of %" PRIu64
			    " shard(s) do not fill a sample of %" PRIu64 " tokens and are dropped",
			    tail, tail_shards, j->opt.seq_len + 1);
	return 0;
fail:
	globfree(&g);
	return -1;
}

/* ----------------------------------------------------------------- feed */

static int
writer_failed(pack_job *j, int rc)
{
	const char *msg = rf_writer_errmsg(j->w);

	rf_cli_progress_finish(&j->progress);
	rf_cli_error("%s", msg && *msg ? msg : rf_strerror(rc));
	return -1;
}

/* Stop between blocks on Ctrl-C: the writer is aborted by the caller, so
 * nothing is left on disk. */
static int
check_interrupt(pack_job *j)
{
	if (!rf_cli_interrupted())
		return 0;
	rf_cli_progress_finish(&j->progress);
	return 1;
}

static int
feed_npy(pack_job *j)
{
	uint64_t rec = 0;
	uint64_t per;
	rf_column cols[RF_MAX_FIELDS];

	for (size_t i = 0; i < j->nfiles; i++)
		rec += j->files[i].item_bytes;
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	for (uint64_t s = 0; s < j->samples; s += per) {
		uint64_t n = j->samples - s < per ? j->samples - s : per;
		int rc;

		if (check_interrupt(j))
			return 1;
		for (size_t i = 0; i < j->nfiles; i++) {
			input_file *f = &j->files[i];
			input_window(f, s * f->item_bytes, (s + n) * f->item_bytes, 2 * n * f->item_bytes);
			cols[i].data = f->data + s * f->item_bytes;
			cols[i].offsets = NULL;
		}
		if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0)
			return writer_failed(j, rc);
		j->done_bytes += n * rec;
		rf_cli_progress_update(&j->progress, j->done_bytes);
	}
	return 0;
}

static int
feed_raw(pack_job *j)
{
	uint32_t nf = j->schema.nfields;
	uint64_t item[RF_MAX_FIELDS];
	uint64_t rec = 0, per;
	rf_column cols[RF_MAX_FIELDS];

	for (uint32_t k = 0; k < nf; k++) {
		item[k] = rf_field_item_bytes(&j->schema.fields[k]);
		rec += item[k];
	}
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	if (nf > 1) {
		/* Records interleave the fields; the writer takes columns, so
		 * each block is split into one buffer per field. */
		for (uint32_t k = 0; k < nf; k++) {
			if (!(j->fbuf[k] = malloc(per * item[k]))) {
				rf_cli_error("out of memory");
				return -1;
			}
		}
	}
	for (size_t fi = 0; fi < j->nfiles; fi++) {
		input_file *f = &j->files[fi];
		for (uint64_t s = 0; s < f->samples; s += per) {
			uint64_t n = f->samples - s < per ? f->samples - s : per;
			const unsigned char *src = f->data + s * rec;
			int rc;

			if (check_interrupt(j))
				return 1;
			input_window(f, s * rec, (s + n) * rec, 2 * n * rec);
			if (nf == 1) {
				cols[0].data = src;
				cols[0].offsets = NULL;
			} else {
				for (uint64_t r = 0; r < n; r++) {
					for (uint32_t k = 0; k < nf; k++) {
						memcpy(j->fbuf[k] + r * item[k], src, item[k]);
						src += item[k];
					}
				}
				for (uint32_t k = 0; k < nf; k++) {
					cols[k].data = j->fbuf[k];
					cols[k].offsets = NULL;
				}
			}
			if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0)
				return writer_failed(j, rc);
			j->done_bytes += n * rec;
			rf_cli_progress_update(&j->progress, j->done_bytes);
		}
	}
	return 0;
}

static int
feed_llmc(pack_job *j)
{
	uint64_t t = j->opt.seq_len;
	uint64_t item = j->files[0].item_bytes;
	uint32_t tb = j->files[0].llmc.token_bytes;
	uint64_t per = item >= j->block_bytes ? 1 : j->block_bytes / item;
	rf_column col = {NULL, NULL};

	/* Consecutive samples share one token (sample i's last target is
	 * sample i+1's first input), so windows are copied out, not pointed to. */
	if (!(j->buf = malloc(per * item))) {
		rf_cli_error("out of memory");
		return -1;
	}
	col.data = j->buf;
	for (size_t fi = 0; fi < j->nfiles; fi++) {
		input_file *f = &j->files[fi];
		for (uint64_t s = 0; s < f->samples; s += per) {
			uint64_t n = f->samples - s < per ? f->samples - s : per;
			int rc;

			if (check_interrupt(j))
				return 1;
			input_window(f, s * t * tb, ((s + n) * t + 1) * tb, 2 * n * t * tb);
			for (uint64_t r = 0; r < n; r++)
				memcpy(j->buf + r * item, f->data + (s + r) * t * tb, item);
			if ((rc = rf_writer_add_columns(j->w, n, &col)) < 0)
				return writer_failed(j, rc);
			j->done_bytes += n * t * tb;
			rf_cli_progress_update(&j->progress, j->done_bytes);
		}
		j->done_bytes += f->data_bytes - f->samples * t * tb;
	}
	return 0;
}

/* ------------------------------------------------------------- shuffled */

/* Advice for reading the inputs in a random order, in place of map_input's
 * MADV_SEQUENTIAL.  Inputs that fit in half the RAM are read ahead whole
 * (one sequential pass over the disk, after which every random read is a
 * page-cache hit); larger ones get MADV_RANDOM, so that a fault reads its
 * own pages rather than a readahead window of neighbours that are needed
 * much later, if ever, and would only push other pages out. */
static void
shuffle_advise(pack_job *j)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
	uint64_t total = 0;
	int whole;

	for (size_t i = 0; i < j->nfiles; i++)
		total += j->files[i].map_len;
	whole = total <= ram / 2;
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].map)
			madvise((void *)j->files[i].map, j->files[i].map_len,
				whole ? MADV_WILLNEED : MADV_RANDOM);
	rf_cli_note(2, "--shuffle: %s of input %s", whole ? "reading ahead" : "random reads",
		    whole ? "(it fits in half the RAM)" : "(more than half the RAM)");
}

/* The file holding sample *idx of the concatenated inputs (--raw, --llmc),
 * *idx becoming its index there.  first[i]: the samples before file i,
 * first[nfiles]: all of them, *idx below that. */
static const input_file *
locate(const pack_job *j, const uint64_t *first, uint64_t *idx)
{
	size_t lo = 0, hi = j->nfiles;

	/* first[lo] <= *idx, and hi == nfiles or first[hi] > *idx: the last
	 * such lo holds the sample (an empty file has first[i] == first[i+1]
	 * and is never the last). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (first[mid] <= *idx)
			lo = mid;
		else
			hi = mid;
	}
	*idx -= first[lo];
	return &j->files[lo];
}

/* Every kind of input in the order of rf_pack_order: each block of output
 * positions asks for its input samples and copies each from where it lies
 * (mapped .npy columns, raw records, llm.c windows) into one buffer per
 * field.  Memory: those buffers (a block) and the block's indices; the
 * permutation itself is computed, never stored. */
static int
feed_shuffled(pack_job *j)
{
	uint32_t nf = j->schema.nfields;
	uint64_t item[RF_MAX_FIELDS], fo[RF_MAX_FIELDS];
	uint64_t rec = 0, per, in_rec;
	uint64_t *first = NULL, *idx = NULL;
	rf_column cols[RF_MAX_FIELDS];
	int ret = -1;

	for (uint32_t k = 0; k < nf; k++) {
		item[k] = rf_field_item_bytes(&j->schema.fields[k]);
		fo[k] = rec;
		rec += item[k];
	}
	/* Input bytes a sample accounts for, for progress: an llm.c sample
	 * shares its last token with the next one. */
	in_rec = j->opt.mode == MODE_LLMC ? j->opt.seq_len * j->files[0].llmc.token_bytes : rec;
	per = rec >= j->block_bytes ? 1 : j->block_bytes / rec;
	if (per > j->samples && j->samples > 0)
		per = j->samples;
	idx = malloc(per * sizeof *idx);
	first = malloc((j->nfiles + 1) * sizeof *first);
	if (!idx || !first)
		goto oom;
	for (uint32_t k = 0; k < nf; k++)
		if (!(j->fbuf[k] = malloc(per * item[k])))
			goto oom;
	first[0] = 0;
	for (size_t i = 0; i < j->nfiles; i++)
		first[i + 1] = first[i] + (j->opt.mode == MODE_NPY ? 0 : j->files[i].samples);
	shuffle_advise(j);
	for (uint64_t s = 0; s < j->samples; s += per) {
		uint64_t n = j->samples - s < per ? j->samples - s : per;
		int rc;

		if (check_interrupt(j)) {
			ret = 1;
			goto out;
		}
		if ((rc = rf_pack_order(j->samples, j->opt.seed, s, n, idx)) < 0) {
			rf_cli_error("--shuffle: %s", rf_strerror(rc));
			goto out;
		}
		for (uint64_t r = 0; r < n; r++) {
			uint64_t x = idx[r];
			if (j->opt.mode == MODE_NPY) {
				/* One file per field, all of the same samples. */
				for (uint32_t k = 0; k < nf; k++)
					memcpy(j->fbuf[k] + r * item[k], j->files[k].data + x * item[k],
					       item[k]);
				continue;
			}
			const input_file *f = locate(j, first, &x);
			const unsigned char *src = j->opt.mode == MODE_LLMC
				? f->data + x * j->opt.seq_len * f->llmc.token_bytes
				: f->data + x * rec;
			for (uint32_t k = 0; k < nf; k++)
				memcpy(j->fbuf[k] + r * item[k], src + fo[k], item[k]);
		}
		for (uint32_t k = 0; k < nf; k++) {
			cols[k].data = j->fbuf[k];
			cols[k].offsets = NULL;
		}
		if ((rc = rf_writer_add_columns(j->w, n, cols)) < 0) {
			ret = writer_failed(j, rc);
			goto out;
		}
		j->done_bytes += n * in_rec;
		rf_cli_progress_update(&j->progress, j->done_bytes);
	}
	ret = 0;
	goto out;
oom:
	rf_cli_error("out of memory");
out:
	free(idx);
	free(first);
	return ret;
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
	if ((rc = parse_args(&j->opt, argc, argv)) != 0) {
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
	case MODE_NPY: rc = open_npy(j); break;
	case MODE_RAW: rc = open_raw(j); break;
	case MODE_LLMC: rc = open_llmc(j); break;
	default: rc = -1; break;
	}
	if (rc < 0)
		goto out;
	if (check_output(j) < 0) {
		status = RF_CLI_USAGE;
		goto out;
	}

	rf_writer_config_init(&cfg);
	cfg.zstd_level = j->opt.zstd_level;
	if (j->opt.chunk_bytes)
		cfg.chunk_bytes = j->opt.chunk_bytes;
	cfg.shard_bytes = j->opt.shard_bytes;
	cfg.threads = j->opt.threads;
	cfg.log = pack_log;
	j->block_bytes = 2 * cfg.chunk_bytes;
	if (j->block_bytes < PACK_BLOCK_MIN)
		j->block_bytes = PACK_BLOCK_MIN;
	if (j->block_bytes > PACK_BLOCK_MAX)
		j->block_bytes = PACK_BLOCK_MAX;
	log_last_error[0] = 0;
	rf_cli_signals_install();
	t0 = rf_cli_now();
	if ((rc = rf_writer_open(&j->w, j->opt.out, &j->schema, &cfg)) < 0) {
		/* The library's message names the file; without one, we do. */
		if (log_last_error[0])
			rf_cli_error("%s", log_last_error);
		else
			rf_cli_error("%s: %s", j->opt.out, rf_strerror(rc));
		goto out;
	}
	rf_cli_progress_start(&j->progress, "packing", j->in_bytes);
	switch (j->opt.shuffle ? MODE_NONE : j->opt.mode) {
	case MODE_NONE: rc = feed_shuffled(j); break; /* --shuffle: every kind */
	case MODE_NPY: rc = feed_npy(j); break;
	case MODE_RAW: rc = feed_raw(j); break;
	default: rc = feed_llmc(j); break;
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
				rf_cli_error("%s: %s", j->opt.out, rf_strerror(rc));
			goto out;
		}
		double el = rf_cli_now() - t0;
		uint64_t stored = written_bytes(j->opt.out, j->opt.shard_bytes != 0);
		rf_cli_note(1, "%" PRIu64 " samples, %s in, %s stored, %.1f s (%s/s) -> %s%s", samples,
			    rf_cli_fmt_bytes(a, sizeof a, (double)j->in_bytes),
			    rf_cli_fmt_bytes(b, sizeof b, (double)stored), el,
			    rf_cli_fmt_bytes(c, sizeof c, el > 0 ? (double)j->in_bytes / el : 0),
			    j->opt.out, j->opt.shard_bytes ? " (sharded)" : "");
	}
	status = RF_CLI_OK;
out:
	if (j->w)
		rf_writer_abort(&j->w);
	unmap_inputs(j);
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
