/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed bench`: stream a dataset through the loader for a minimum time,
 * then measure, on the same files in the same run, the limits the loader
 * cannot beat (raw io_uring reads, zstd decompression, memcpy, host-to-device
 * copies) and report the loader's rate against the smallest of them.
 *
 * Limits and the loader are compared in samples per second: each limit's
 * byte rate is divided by the bytes per sample it moves (stored bytes for
 * storage, raw bytes for decompression, delivered bytes for copies), so a
 * compressed dataset and its padding are accounted for fairly.  docs/bench.md
 * describes every figure and the JSON schema.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#include "bench_limits.h"
#include "bench_report.h"
#include "cmd.h"
#include "image_opts.h"
#include "util.h"
#include "mix_args.h"
#ifdef RF_HAVE_IMAGES
#include "decode/image.h"
#endif

#define BENCH_USAGE                                                                           \
	"ringfeed bench [--batch B] [--shuffle MODE] [--device host|cuda|auto] [--pinned SIZE]\n" \
	"                      [--depth D] [--pin ring|transient] [--seconds S] [--epochs N]\n"  \
	"                      [--cold] [--json] [--step-us U] [--io-depth Q] "                  \
	"[--decode-threads T]\n"                                                                 \
	"                      [--buffered] [--map] [--in-place] [--no-verify] [--touch] [--seed N]\n" \
	"                      [--window W]\n"                                                     \
	"                      [--timings FILE] [--on-error raise|skip] [--mix] [--cache-dir DIR]\n" \
	"                      [--cache-bytes SIZE] [--fields A,B,..] [--var-bytes SIZE]\n"       \
	"                      [-q|-v] " RF_IMAGE_USAGE " PATH..."

/* --on-error (rf_config.on_error): kept here rather than in bench_opts,
 * which the report shares. */
static enum rf_on_error bench_on_error = RF_ON_ERROR_RAISE;
/* --mix: each PATH is [NAME=]PATH:WEIGHT, a source (rf_config.sources);
 * the storage half and the limits read the sources' paths together. */
static int bench_mix;
static rf_source bench_src[RF_SOURCES_MAX];
static const char *bench_src_paths[RF_SOURCES_MAX];
/* --image-*: a field of encoded images decoded in the pipeline. */
static struct rf_image_opts bench_img;
/* --cache-dir, --cache-bytes (rf_config.cache_dir, cache_bytes): the same. */
static const char *bench_cache_dir;
static uint64_t bench_cache_bytes;
/* --fields, --var-bytes (rf_config.fields, var_bytes). */
#define BENCH_FIELDS_MAX 64
static char bench_fields_buf[1024];
static const char *bench_fields[BENCH_FIELDS_MAX];
static size_t bench_nfields;
static uint64_t bench_var_bytes;

/* Progress redraws per second at most. */
#define PROGRESS_HZ 6.0

static void
bench_help(void)
{
	printf("usage: %s\n\n", BENCH_USAGE);
	printf("Measure the loader on a dataset, and the limits it is held to, measured on the\n"
	       "same files in the same run: raw io_uring reads as the loader issues them,\n"
	       "zstd decompression of the dataset's own chunks, memcpy and (on a GPU) pinned\n"
	       "host-to-device copies.  Efficiency is the loader's rate over the smallest\n"
	       "applicable limit.  See docs/bench.md for every figure.\n"
	       "\n"
	       "Options:\n"
	       "  --batch B           samples per batch (default 256)\n"
	       "  --shuffle MODE      none, chunks, window or full (default none)\n"
	       "  --seed N            key of the shuffled order (default 0)\n"
	       "  --window W          decoded chunks for --shuffle window (default: the\n"
	       "                      dataset's, 128 MiB of its chunks; at most 1024)\n");
	printf("  --device KIND       host, cuda or auto (default auto)\n"
	       "  --pinned SIZE       page-locked host budget, K/M/G suffixes (default 256M)\n"
	       "  --depth D           device buffers in flight (default 2, at most 64)\n"
	       "  --pin MODE          ring (page-lock once) or transient (per batch)\n"
	       "  --seconds S         minimum run time; epochs repeat until it is reached\n"
	       "                      (default 5)\n"
	       "  --epochs N          run exactly N epochs instead of a minimum time\n"
	       "  --cold              drop the dataset's pages from the page cache first\n"
	       "  --step-us U         simulate a training step of U microseconds per batch\n"
	       "  --io-depth Q        reads in flight (default: the library's choice, 32; at\n"
	       "                      most 4096)\n"
	       "  --decode-threads T  decode workers, at most 64 (default: the library's\n"
	       "                      choice from the CPUs and the dataset's codec)\n"
	       "  --buffered          read through the page cache instead of O_DIRECT\n"
	       "  --map               read chunks through a memory map of each shard\n"
	       "                      (rf_config.map; implies --buffered)\n"
	       "  --in-place          with --map on the host: batches in place, read-only\n"
	       "  --no-verify         skip the checksums (chunks; samples in shuffle full)\n"
	       "  --touch             read every byte of each batch on the consumer (host)\n"
	       "  --on-error P        a chunk that fails its checksum, decompression or read:\n"
	       "                      raise (stop, default) or skip (zero samples in its\n"
	       "                      place, logged; at most 16 chunks)\n"
	       "  --mix               each PATH is [NAME=]PATH:WEIGHT, a source of a mixture\n"
	       "                      drawn at the weights' proportions\n"
	       "  --cache-dir DIR     keep a remote dataset's chunks in DIR (rf_config.cache_dir):\n"
	       "                      epochs after the first read them locally\n"
	       "  --cache-bytes SIZE  the cache's cap, K/M/G suffixes (0 or default: 10G)\n"
	       "  --fields A,B,..     load only these fields (default all; an image pack's\n"
	       "                      image,label leaves its names out)\n"
	       "  --var-bytes SIZE    a variable field's share of a batch (default: twice\n"
	       "                      the batch times the largest average sample)\n"
	       "  --timings FILE      write one line per batch: index, epoch, samples, time\n"
	       "                      since the start and wait in rf_loader_next (us)\n"
	       RF_IMAGE_HELP
	       "  --json              one JSON object on stdout instead of the table\n"
	       "  -q, --quiet         no progress line, no library messages\n"
	       "  -v, --verbose       the library's informational messages (the memory plan)\n"
	       "  -h, --help          this help\n"
	       "\n"
	       "Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted (the\n"
	       "summary is still printed).\n");
}

/* --------------------------------------------------------------- logging */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* Warnings are printed; errors only with -v, because a failure is printed
 * once from rf_loader_last_open_error / rf_loader_errmsg, and an error logged
 * on the way to a successful open (device auto falling back to the host) is
 * not the user's problem. */
static void
bench_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if ((level == RF_LOG_WARN && rf_cli_verbosity >= 1) ||
	    (level == RF_LOG_ERROR && rf_cli_verbosity >= 2) ||
	    (level == RF_LOG_INFO && rf_cli_verbosity >= 2) || rf_cli_verbosity >= 3) {
		pthread_mutex_lock(&log_lock);
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
		pthread_mutex_unlock(&log_lock);
	}
}

/* ----------------------------------------------------------- options */

static int
parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int
parse_args(bench_opts *o, int argc, char **argv, bool *help)
{
	enum {
		OPT_BATCH = 256, OPT_SHUFFLE, OPT_DEVICE, OPT_PINNED, OPT_DEPTH, OPT_PIN,
		OPT_SECONDS, OPT_EPOCHS, OPT_COLD, OPT_JSON, OPT_STEP, OPT_IODEPTH,
		OPT_THREADS, OPT_BUFFERED, OPT_MAP, OPT_INPLACE, OPT_NOVERIFY, OPT_TOUCH, OPT_SEED, OPT_WINDOW, OPT_TIMINGS,
		OPT_ON_ERROR, OPT_MIX, OPT_CACHE_DIR, OPT_CACHE_BYTES, OPT_FIELDS, OPT_VAR_BYTES,
	};
	static const struct option longopts[] = {
		{"batch", required_argument, NULL, OPT_BATCH},
		{"shuffle", required_argument, NULL, OPT_SHUFFLE},
		{"device", required_argument, NULL, OPT_DEVICE},
		{"pinned", required_argument, NULL, OPT_PINNED},
		{"depth", required_argument, NULL, OPT_DEPTH},
		{"pin", required_argument, NULL, OPT_PIN},
		{"seconds", required_argument, NULL, OPT_SECONDS},
		{"epochs", required_argument, NULL, OPT_EPOCHS},
		{"cold", no_argument, NULL, OPT_COLD},
		{"json", no_argument, NULL, OPT_JSON},
		{"step-us", required_argument, NULL, OPT_STEP},
		{"io-depth", required_argument, NULL, OPT_IODEPTH},
		{"decode-threads", required_argument, NULL, OPT_THREADS},
		{"buffered", no_argument, NULL, OPT_BUFFERED},
		{"map", no_argument, NULL, OPT_MAP},
		{"in-place", no_argument, NULL, OPT_INPLACE},
		{"no-verify", no_argument, NULL, OPT_NOVERIFY},
		{"touch", no_argument, NULL, OPT_TOUCH},
		{"seed", required_argument, NULL, OPT_SEED},
		{"window", required_argument, NULL, OPT_WINDOW},
		{"timings", required_argument, NULL, OPT_TIMINGS},
		{"on-error", required_argument, NULL, OPT_ON_ERROR},
		{"mix", no_argument, NULL, OPT_MIX},
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"cache-bytes", required_argument, NULL, OPT_CACHE_BYTES},
		{"fields", required_argument, NULL, OPT_FIELDS},
		{"var-bytes", required_argument, NULL, OPT_VAR_BYTES},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		RF_IMAGE_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	rf_image_opts_init(&bench_img);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BATCH:
			if (rf_cli_parse_uint(optarg, 1, UINT32_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --batch '%s'", optarg);
			o->batch = (uint32_t)v;
			break;
		case OPT_SHUFFLE:
			if (rf_shuffle_parse(optarg, &o->shuffle) < 0)
				return rf_cli_usage_error(BENCH_USAGE,
							  "bad --shuffle '%s' (none, chunks, window, full)",
							  optarg);
			break;
		case OPT_DEVICE:
			if (rf_device_parse(optarg, &o->device) < 0)
				return rf_cli_usage_error(BENCH_USAGE,
							  "bad --device '%s' (host, cuda, auto)", optarg);
			break;
		case OPT_PINNED:
			if (rf_cli_parse_size(optarg, &o->pinned) < 0 || !o->pinned)
				return rf_cli_usage_error(BENCH_USAGE, "bad --pinned '%s'", optarg);
			break;
		case OPT_DEPTH:
			if (rf_cli_parse_uint(optarg, 1, RF_DEPTH_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --depth '%s' (1..%d)", optarg,
							  RF_DEPTH_MAX);
			o->depth = (uint32_t)v;
			break;
		case OPT_PIN:
			if (rf_pinning_parse(optarg, &o->pinning) < 0)
				return rf_cli_usage_error(BENCH_USAGE,
							  "bad --pin '%s' (ring, transient)", optarg);
			break;
		case OPT_SECONDS:
			if (parse_double(optarg, 0, 1e6, &o->seconds) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --seconds '%s'", optarg);
			break;
		case OPT_EPOCHS:
			if (rf_cli_parse_uint(optarg, 1, UINT32_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --epochs '%s'", optarg);
			o->epochs = (uint32_t)v;
			break;
		case OPT_COLD: o->cold = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_STEP:
			if (parse_double(optarg, 0, 1e9, &o->step_us) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --step-us '%s'", optarg);
			break;
		case OPT_IODEPTH:
			if (rf_cli_parse_uint(optarg, 1, RF_IO_DEPTH_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --io-depth '%s' (1..%d)", optarg,
							  RF_IO_DEPTH_MAX);
			o->io_depth = (uint32_t)v;
			break;
		case OPT_THREADS:
			if (rf_cli_parse_uint(optarg, 1, RF_DECODE_THREADS_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --decode-threads '%s' (1..%d)",
							  optarg, RF_DECODE_THREADS_MAX);
			o->decode_threads = (uint32_t)v;
			break;
		case OPT_BUFFERED: o->direct = false; break;
		case OPT_MAP: o->map = true; o->direct = false; break;
		case OPT_INPLACE: o->inplace = true; break;
		case OPT_NOVERIFY: o->verify = false; break;
		case OPT_TOUCH: o->touch = true; break;
		case OPT_TIMINGS: o->timings = optarg; break;
		case OPT_CACHE_DIR:
			bench_cache_dir = optarg;
			break;
		case OPT_FIELDS: {
			snprintf(bench_fields_buf, sizeof bench_fields_buf, "%s", optarg);
			bench_nfields = 0;
			for (char *sv = NULL, *t = strtok_r(bench_fields_buf, ",", &sv); t;
			     t = strtok_r(NULL, ",", &sv)) {
				if (bench_nfields == BENCH_FIELDS_MAX)
					return rf_cli_usage_error(BENCH_USAGE, "--fields: at most %d "
								  "fields", BENCH_FIELDS_MAX);
				bench_fields[bench_nfields++] = t;
			}
			if (!bench_nfields || strlen(optarg) >= sizeof bench_fields_buf)
				return rf_cli_usage_error(BENCH_USAGE, "bad --fields '%s' (field "
							  "names, comma-separated)", optarg);
			break;
		}
		case OPT_VAR_BYTES:
			if (rf_cli_parse_size(optarg, &bench_var_bytes) < 0 || !bench_var_bytes)
				return rf_cli_usage_error(BENCH_USAGE, "bad --var-bytes '%s' (a size, "
							  "e.g. 1M)", optarg);
			break;
		case OPT_CACHE_BYTES:
			if (rf_cli_parse_size(optarg, &bench_cache_bytes) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --cache-bytes '%s' (a size, "
							  "e.g. 20G)", optarg);
			break;
		case OPT_ON_ERROR:
			if (!strcmp(optarg, "raise"))
				bench_on_error = RF_ON_ERROR_RAISE;
			else if (!strcmp(optarg, "skip"))
				bench_on_error = RF_ON_ERROR_SKIP;
			else
				return rf_cli_usage_error(BENCH_USAGE, "bad --on-error '%s' (raise, "
							  "skip)", optarg);
			break;
		case OPT_SEED:
			if (rf_cli_parse_uint(optarg, 0, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --seed '%s'", optarg);
			o->seed = v;
			break;
		case OPT_WINDOW:
			if (rf_cli_parse_uint(optarg, 1, RF_WINDOW_MAX, &v) < 0)
				return rf_cli_usage_error(BENCH_USAGE, "bad --window '%s' (1..%d)", optarg,
							  RF_WINDOW_MAX);
			o->window = (uint32_t)v;
			break;
		case 'q': rf_cli_verbosity = 0; break;
		case 'v': rf_cli_verbosity++; break;
		case OPT_MIX: bench_mix = 1; break;
		case 'h': *help = true; return RF_CLI_OK;
		default: {
			int r = rf_image_opts_parse(&bench_img, c, optarg, BENCH_USAGE);
			if (r < 0)
				return RF_CLI_USAGE;
			if (r == 0)
				return rf_cli_bad_option(BENCH_USAGE, c, argc, argv);
			break;
		}
		}
	}
	if (optind >= argc)
		return rf_cli_usage_error(BENCH_USAGE, "missing PATH");
	if (o->inplace && !o->map)
		return rf_cli_usage_error(BENCH_USAGE, "--in-place hands batches out where they lie "
					  "in the shards' maps: add --map");
	o->paths = argv + optind;
	o->npaths = (size_t)(argc - optind);
	if (bench_mix) {
		int mrc = rf_cli_parse_mix(argv + optind, o->npaths, bench_src, bench_src_paths,
					   BENCH_USAGE);
		if (mrc)
			return mrc;
		o->paths = (char **)bench_src_paths;
	}
	return RF_CLI_OK;
}

/* ------------------------------------------------------------ the run */

/* Wait until `until` (monotonic seconds): sleep for most of it, spin the
 * last stretch, so a short simulated step is not stretched by timer slack
 * and a long one does not burn a core the loader's threads need (a GPU step
 * leaves the host's cores free too). */
static void
wait_until(double until)
{
	const double spin = 60e-6;
	double now = bench_now();

	if (until - now > spin) {
		double t = until - spin;
		struct timespec ts = {.tv_sec = (time_t)t,
				      .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
		       !rf_cli_interrupted())
			;
	}
	while (bench_now() < until && !rf_cli_interrupted())
		;
}

typedef struct progress_line {
	bool enabled;
	double last;
	int width;
} progress_line;

static void
progress_draw(progress_line *p, const bench_result *res, double elapsed, uint64_t epoch,
	      rf_loader *ld, bool force)
{
	double now = bench_now();
	rf_stats st = {.size = sizeof st};
	char line[160];
	int n;

	if (!p->enabled || (!force && now - p->last < 1.0 / PROGRESS_HZ))
		return;
	p->last = now;
	if (rf_loader_stats(ld, &st) < 0)
		return;
	n = snprintf(line, sizeof line,
		     "bench: %.1f s  epoch %" PRIu64 "  %" PRIu64 " batches  %.0f samples/s  "
		     "%.2f GB/s  stall %.1f%%",
		     elapsed, epoch, res->batches, elapsed > 0 ? (double)res->samples / elapsed : 0,
		     elapsed > 0 ? (double)st.bytes_delivered / elapsed / 1e9 : 0,
		     elapsed > 0 ? 100.0 * (double)st.stall_ns / (elapsed * 1e9) : 0);
	if (n < 0)
		return;
	fprintf(stderr, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
	p->width = n;
}

static void
progress_clear(progress_line *p)
{
	if (p->enabled && p->width)
		fprintf(stderr, "\r%*s\r", p->width, "");
	p->width = 0;
}

/* The sum of the 64-bit words of n bytes (a last partial word byte by
 * byte): every byte is loaded, as in the peer comparison's touch (numpy's
 * uint64 sum over the same bytes), with as little work per byte, so the
 * consumer's cost is the same on both sides.  Four independent sums of two
 * words each (SSE2, which every x86-64 has; other targets split the
 * vectors into words): a loop of scalar sums ran at 8.5 GB/s over a
 * dataset in the page cache where numpy's sum runs at 11.6-12, and that
 * charged this side's consumer 1.4x the peers' for the same bytes. */
typedef uint64_t rf_words2 __attribute__((vector_size(16)));

static uint64_t
word_sum(const unsigned char *p, uint64_t n)
{
	rf_words2 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, w;
	uint64_t i = 0, x, sum;

	for (; n - i >= 64; i += 64) {
		memcpy(&w, p + i, 16);
		s0 += w;
		memcpy(&w, p + i + 16, 16);
		s1 += w;
		memcpy(&w, p + i + 32, 16);
		s2 += w;
		memcpy(&w, p + i + 48, 16);
		s3 += w;
	}
	s0 += s1 + s2 + s3;
	sum = s0[0] + s0[1];
	for (; n - i >= 8; i += 8) {
		memcpy(&x, p + i, 8);
		sum += x;
	}
	for (; i < n; i++)
		sum += p[i];
	return sum;
}

/* Read every byte of a host-memory batch (--touch), as a consumer that uses
 * the data would, so a comparison with loaders that hand out lazy views
 * (memory maps) charges both sides for bringing the bytes in.  Only the
 * bytes of the samples count, never the padding between fields. */
static uint64_t
touch_batch(const rf_batch *b)
{
	uint64_t sum = 0;

	for (uint32_t f = 0; f < b->nfields; f++)
		sum += word_sum(b->fields[f].data, b->fields[f].bytes);
	return sum;
}

/* Run-queue waiting of the process's threads (/proc/self/task/N/schedstat,
 * second field: nanoseconds runnable but not running): the consumer (this
 * thread) apart from all the others, which are the loader's.  On a busy
 * machine the loader's threads wait for a core; that time is in no rf_stats
 * counter, and it explains a low rate that CPU time per GB does not. */
static void
sched_wait(double *mine, double *others)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	*mine = *others = -1;
	if (!d)
		return;
	*mine = *others = 0;
	while ((e = readdir(d))) {
		char path[300];
		unsigned long long run, wait;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
			if (atoi(e->d_name) == self)
				*mine += (double)wait * 1e-9;
			else
				*others += (double)wait * 1e-9;
		}
		fclose(f);
	}
	closedir(d);
}

/* User and system CPU seconds in a getrusage report. */
static double
rusage_cpu_s(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec * 1e-6 +
	       (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec * 1e-6;
}

static int
run_loader(const bench_opts *o, bench_result *res)
{
	rf_config cfg;
	rf_loader *ld = NULL;
	progress_line pl = {.enabled = rf_cli_verbosity >= 1 && isatty(STDERR_FILENO)};
	double t0, topen, step = o->step_us * 1e-6, elapsed = 0;
	uint64_t last_epoch = 0;
	double runq_mine0, runq_others0, csw0 = 0, cpu0 = 0, ldcpu0 = 0;
	FILE *timings = NULL;
	rf_stats st = {.size = sizeof st};
	struct rusage ru;
	int rc;

	rf_config_init(&cfg);
	cfg.paths = (const char *const *)o->paths;
	cfg.npaths = o->npaths;
	if (bench_mix) {
		cfg.sources = bench_src;
		cfg.nsources = o->npaths;
		cfg.paths = NULL;
		cfg.npaths = 0;
	}
	cfg.batch_size = o->batch;
	cfg.drop_last = 0;
	cfg.epochs = o->epochs;          /* 0: until closed, stopped by time */
	cfg.device = o->device;
	cfg.depth = o->depth;
	cfg.pinned_bytes = o->pinned;
	cfg.pinning = o->pinning;
	cfg.io_depth = o->io_depth;
	cfg.direct = o->direct;
	cfg.map = o->map;
	cfg.inplace = o->inplace ? RF_INPLACE_ON : RF_INPLACE_OFF;
	cfg.decode_threads = o->decode_threads;
	cfg.verify = o->verify;
	cfg.log = bench_log;
	cfg.shuffle = o->shuffle;
	cfg.seed = o->seed;
	cfg.window = o->window;
	cfg.on_error = bench_on_error;
	if (rf_image_opts_apply(&bench_img, &cfg, BENCH_USAGE) < 0)
		return RF_CLI_USAGE;
	cfg.cache_dir = bench_cache_dir;
	cfg.cache_bytes = bench_cache_bytes;
	if (bench_nfields) {
		cfg.fields = bench_fields;
		cfg.nfields = bench_nfields;
	}
	if (bench_var_bytes)
		cfg.var_bytes = bench_var_bytes;
	/* One process reading the whole dataset, whatever launcher variables
	 * (RANK, WORLD_SIZE, ...) the environment holds. */
	cfg.rank = 0;
	cfg.world = 1;

	if (o->timings) {
		if (!(timings = fopen(o->timings, "w"))) {
			rf_cli_error("%s: %s", o->timings, strerror(errno));
			return -errno;
		}
		fprintf(timings, "# batch epoch samples start_us wait_us\n");
	}
	topen = bench_now();
	rc = rf_loader_open(&ld, &cfg);
	res->open_seconds = bench_now() - topen;
	if (rc < 0) {
		const char *msg = rf_loader_last_open_error();
		rf_cli_error("%s", msg && *msg ? msg : rf_strerror(rc));
		if (!bench_mix)
			rf_cli_mix_hint(rc, cfg.paths, cfg.npaths);
		if (timings)
			fclose(timings);
		return rc;
	}
	if (rf_loader_stats(ld, &st) == 0)
		res->device_is_cuda = st.device_ordinal >= 0; /* -1: the host device */

	sched_wait(&runq_mine0, &runq_others0);
	if (rf_loader_stats(ld, &st) == 0)
		ldcpu0 = (double)st.thread_cpu_ns / 1e9;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		csw0 = (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
		cpu0 = rusage_cpu_s(&ru);
	}
	t0 = bench_now();
	for (;;) {
		const rf_batch *b;
		if (rf_cli_interrupted()) {
			res->interrupted = true;
			break;
		}
		elapsed = bench_now() - t0;
		if (!o->epochs && elapsed >= o->seconds)
			break;
		double tn = bench_now();
		if ((rc = rf_loader_next(ld, &b)) < 0) {
			progress_clear(&pl);
			rf_cli_error("%s", *rf_loader_errmsg(ld) ? rf_loader_errmsg(ld) : rf_strerror(rc));
			break;
		}
		if (!b)
			break;
		if (timings)
			fprintf(timings, "%" PRIu64 " %" PRIu64 " %" PRIu32 " %.1f %.1f\n", b->index,
				b->epoch, b->samples, (tn - t0) * 1e6, (bench_now() - tn) * 1e6);
		if (step > 0)
			wait_until(bench_now() + step);
		if (o->touch && !res->device_is_cuda)
			res->checksum += touch_batch(b);
		res->batches++;
		res->samples += b->samples;
		if (b->flags & RF_BATCH_READONLY)
			res->batches_in_place++;
		last_epoch = b->epoch;
		if ((rc = rf_loader_release(ld, b, NULL)) < 0) {
			progress_clear(&pl);
			rf_cli_error("release: %s", rf_strerror(rc));
			break;
		}
		progress_draw(&pl, res, bench_now() - t0, last_epoch, ld, false);
	}
	res->seconds = bench_now() - t0;
	res->epochs = res->batches ? last_epoch + 1 : 0;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		res->context_switches = (double)ru.ru_nvcsw + (double)ru.ru_nivcsw - csw0;
		res->process_cpu_s = rusage_cpu_s(&ru) - cpu0;
	}
	sched_wait(&res->consumer_runq_s, &res->loader_runq_s);
	res->consumer_runq_s -= runq_mine0;
	res->loader_runq_s -= runq_others0;
	progress_clear(&pl);
	if (rf_loader_stats(ld, &st) == 0) {
		res->stats = st;
		res->loader_run_cpu_s = (double)st.thread_cpu_ns / 1e9 - ldcpu0;
	}
	if (st.chunks_skipped)
		rf_cli_note(1, "--on-error skip: %" PRIu64 " chunks skipped, %" PRIu64
			    " samples delivered as zeros", st.chunks_skipped, st.samples_substituted);
	rf_loader_close(&ld);
	if (timings && fclose(timings) != 0) {
		rf_cli_error("%s: %s", o->timings, strerror(errno));
		rc = rc < 0 ? rc : -EIO;
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		res->peak_rss = (uint64_t)ru.ru_maxrss * 1024u;
	return rc < 0 ? rc : 0;
}

/* How long each limit is measured: a fifth of the loader's run, between
 * 50 ms (enough for many reads) and 1 s. */
static double
limit_seconds(const bench_opts *o)
{
	double s = 0.2 * (o->epochs ? 1.0 : o->seconds);
	return s < 0.05 ? 0.05 : s > 1.0 ? 1.0 : s;
}

/* Add one half of a storage measurement to the other. */
static void
rate_merge(bench_rate *sum, const bench_rate *half)
{
	if (!half->ok) {
		if (!sum->ok)
			*sum = *half;
		return;
	}
	if (!sum->ok) {
		*sum = *half;
		return;
	}
	sum->bytes += half->bytes;
	sum->seconds += half->seconds;
	sum->ops += half->ops;
}

/* The storage limit is measured in two halves, one just before the loader
 * runs and one just after, and the halves are pooled: virtual disks and
 * cloud volumes deliver bursts and then throttle, so a measurement taken
 * only before (or only after) the loader would favour one side. */
static void
run_storage_half(const bench_opts *o, rf_dataset *ds, bench_result *res)
{
	double secs = o->epochs ? 0.5 : o->seconds / 4;
	unsigned depth = o->io_depth ? o->io_depth : 32;
	bench_rate r;

	secs = secs < 0.05 ? 0.05 : secs > 2.0 ? 2.0 : secs;
	if (res->remote) {
		/* The remote limit: raw ranged GETs of the same chunks at the
		 * same concurrency. */
		double b = 0, t = 0;
		uint64_t n = 0;
		char why[128] = "";
		memset(&r, 0, sizeof r);
		int rc = rf_dataset_remote_limit(ds, depth, secs, &b, &t, &n, why, sizeof why);
		r.ok = rc == 0 && t > 0;
		r.bytes = b;
		r.seconds = t;
		r.ops = (double)n;
		snprintf(r.note, sizeof r.note, "%s", rc == 0 ? "raw ranged GETs, no checks" : why);
		if (rc == 0 && o->shuffle == RF_SHUFFLE_FULL)
			snprintf(r.note, sizeof r.note, "raw ranged GETs of whole chunks (full reads "
				 "samples)");
		rate_merge(&res->sequential, &r);
		return;
	}
	/* Cold: start from a dropped cache.  Buffered reads fill the cache as
	 * they go, so a second pass over a dataset the cache holds would be a
	 * warm read: they read each chunk once at most. */
	if (o->cold) {
		bench_cache c;
		bench_cache_check(ds, true, &c);
	}
	if (o->shuffle == RF_SHUFFLE_FULL) {
		bench_raw_random(ds, depth, o->direct, secs, 0x5eed + (uint64_t)res->random.ops, &r);
		rate_merge(&res->random, &r);
	} else {
		bench_raw_sequential(ds, depth, o->direct, secs, o->cold && !o->direct, &r);
		rate_merge(&res->sequential, &r);
	}
}

#ifdef RF_HAVE_IMAGES
static double
cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif

/* The image decode limit: up to 64 images spread over the dataset, read
 * first, then decoded and transformed as the loader's workers do (the
 * same options), on this thread for `secs` of CPU time; the rate is
 * scaled by the decode threads as zstd's is.  bytes: the encoded images'
 * bytes; ops: images. */
static void
bench_images(const bench_opts *o, rf_dataset *ds, double secs, bench_rate *r)
{
	memset(r, 0, sizeof *r);
#ifdef RF_HAVE_IMAGES
	const rf_image_field *im = o->image;
	int fi = rf_schema_find(rf_dataset_schema(ds), im->field ? im->field : "image");
	uint64_t n = rf_dataset_samples(ds), k = n < 64 ? n : 64;
	void *img[64] = {0};
	size_t len[64] = {0};
	rf_image_transform t;
	rf_image_scratch s;
	uint8_t *out = NULL;

	if (fi < 0 || !k) {
		snprintf(r->note, sizeof r->note, "no field '%s' or no samples",
			 im->field ? im->field : "image");
		return;
	}
	if (im->transform == RF_IMAGE_TRAIN) {
		rf_image_transform_train(&t, im->width, im->height);
		t.scale_min = im->scale_min;
		t.scale_max = im->scale_max;
		t.ratio_min = im->ratio_min;
		t.ratio_max = im->ratio_max;
		t.flip_p = im->flip;
	} else {
		uint32_t side = im->height > im->width ? im->height : im->width;
		rf_image_transform_eval(&t, im->width, im->height,
					im->resize ? im->resize : (uint32_t)lround(side * 8.0 / 7.0));
	}
	t.dct_scale = im->dct_scale;
	rf_image_scratch_init(&s);
	out = malloc((size_t)im->width * im->height * 3);
	for (uint64_t i = 0; out && i < k; i++) {
		uint64_t idx = i * n / k;
		size_t got = 0;
		if (rf_dataset_read(ds, idx, (uint32_t)fi, NULL, 0, &got) != -ENOSPC && got == 0)
			continue;
		if (!(img[i] = malloc(got ? got : 1)) ||
		    rf_dataset_read(ds, idx, (uint32_t)fi, img[i], got, &len[i]) < 0)
			len[i] = 0;
	}
	double t0 = cpu_now(), w0 = bench_now(), now = t0;
	uint64_t it = 0, bad = 0;
	while (out && now - t0 < secs && !rf_cli_interrupted()) {
		uint64_t i = it % k;
		it++;
		if (!len[i])
			continue;
		if (rf_image_load(img[i], len[i], &t, 1, 0, it, out, NULL, &s) < 0) {
			bad++;
			if (bad > k)
				break;
			continue;
		}
		r->bytes += (double)len[i];
		r->ops += 1;
		now = cpu_now();
	}
	r->seconds = cpu_now() - t0;
	r->wall_seconds = bench_now() - w0;
	r->ok = r->ops > 0 && r->seconds > 0;
	if (r->ok)
		snprintf(r->note, sizeof r->note, "field '%s', %.0f decodes on one thread, CPU "
			 "time", im->field ? im->field : "image", r->ops);
	else
		snprintf(r->note, sizeof r->note, "no image of field '%s' decoded: %.100s",
			 im->field ? im->field : "image", s.msg);
	for (uint64_t i = 0; i < k; i++)
		free(img[i]);
	free(out);
	rf_image_scratch_fini(&s);
#else
	(void)o;
	(void)ds;
	(void)secs;
	snprintf(r->note, sizeof r->note, "built without image support");
#endif
}

static void
run_limits(const bench_opts *o, rf_dataset *ds, bench_result *res)
{
	double secs = limit_seconds(o);
	bool is_cuda = res->device_is_cuda;

	/* Cold: run_storage_half drops the cache the loader just filled, so
	 * the raw reads see what the loader saw. */
	run_storage_half(o, ds, res);
	if (res->info.zstd_chunks)
		bench_zstd(ds, 8, secs, &res->zstd);
	bench_memcpy((size_t)64 << 20, secs, &res->memcpy);
	/* As many threads as the loader's decode workers, which make the
	 * copies into the batches together. */
	res->mixture = bench_mix;
	bench_memcpy_parallel(res->stats.decode_threads, secs, &res->memcpy_parallel);
	if (o->image)
		bench_images(o, ds, secs, &res->images);
	if (is_cuda) {
		/* One batch per copy, as the loader copies. */
		uint64_t bytes = res->stats.batch_bytes ? res->stats.batch_bytes : (8u << 20);
		/* On the loader's device (a launcher's local rank may
		 * have put it on another than 0). */
		int ord = res->stats.device_ordinal >= 0 ? res->stats.device_ordinal : 0;
		bench_h2d(ord, (size_t)bytes, secs, &res->h2d);
	} else {
		snprintf(res->h2d.note, sizeof res->h2d.note, "device is %s: not measured",
			 res->stats.device[0] ? res->stats.device : "host");
	}
}

int
rf_cmd_bench(int argc, char **argv)
{
	bench_opts o = {
		.batch = 256,
		.shuffle = RF_SHUFFLE_NONE,
		.device = RF_DEVICE_AUTO,
		.pinned = 256u << 20,
		.depth = 2,
		.pinning = RF_PINNING_RING,
		.seconds = 5,
		.io_depth = 0, /* the library chooses */
		.decode_threads = 0, /* the library chooses */
		.direct = true,
		.verify = true,
	};
	bench_result res;
	rf_dataset *ds = NULL;
	bool help = false;
	int rc;

	if ((rc = parse_args(&o, argc, argv, &help)) != RF_CLI_OK)
		return rc;
	if (help) {
		bench_help();
		return RF_CLI_OK;
	}
	if (bench_img.on) {
		/* For the decode limit and the JSON config: the field and the
		 * eval resize the loader would take by default. */
		const rf_image_field *im = &bench_img.f;
		uint32_t side = im->height > im->width ? im->height : im->width;
		bench_img.f.field = bench_img.field;
		if (im->transform == RF_IMAGE_EVAL && !im->resize && side)
			bench_img.f.resize = (uint32_t)lround(side * 8.0 / 7.0);
		o.image = &bench_img.f;
	}
	memset(&res, 0, sizeof res);
	res.stats.size = sizeof res.stats;
	res.cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* Other work on the machine skews every figure: say how busy it was. */
	if (getloadavg(res.loadavg, 3) != 3)
		res.loadavg[0] = res.loadavg[1] = res.loadavg[2] = -1;
	if (rf_cli_open_dataset(&ds, o.paths, o.npaths, 0) < 0)
		return RF_CLI_FAIL;
	bench_dataset_info(ds, &res.info);
	for (size_t i = 0; i < rf_dataset_shards(ds); i++) {
		const char *p = rf_dataset_shard_path(ds, i);
		if (!strncmp(p, "http://", 7) || !strncmp(p, "https://", 8) || !strncmp(p, "s3://", 5))
			res.remote = true;
	}
	/* Precise short sleeps for --step-us: the default 50 us timer slack
	 * would stretch every simulated step. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	rf_cli_signals_install();

	run_storage_half(&o, ds, &res);
	if (!res.remote)
		bench_cache_check(ds, o.cold, &res.cache);
	rc = run_loader(&o, &res);
	if (!o.decode_threads) /* reported, and the zstd limit, as the loader ran */
		o.decode_threads = res.stats.decode_threads;
	if (rc < 0 && !res.batches) {
		rf_dataset_close(&ds);
		return RF_CLI_FAIL;
	}
	res.failed = rc < 0;
	if (!res.interrupted)
		run_limits(&o, ds, &res);
	if (rf_cli_interrupted()) /* also while the limits were measured */
		res.interrupted = true;
	bench_compute(&o, &res);
	if (o.json)
		bench_print_json(stdout, &o, &res);
	else
		bench_print_table(stdout, &o, &res);
	fflush(stdout);
	rf_dataset_close(&ds);
	if (res.interrupted)
		return 128 + rf_cli_interrupted();
	return res.failed ? RF_CLI_FAIL : RF_CLI_OK;
}
