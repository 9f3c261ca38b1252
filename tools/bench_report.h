/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed bench`: the settings, the results, and their two renderings (a
 * table for people, one JSON object for programs; docs/bench.md is the
 * schema).  Tool settings only: the library's rf_config is filled from these
 * in cmd_bench.c.
 */
#ifndef RF_CLI_BENCH_REPORT_H
#define RF_CLI_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#include "bench_limits.h"

typedef struct bench_opts {
	char **paths;
	size_t npaths;
	uint32_t batch;
	enum rf_shuffle shuffle;
	uint32_t window;         /* --window: W for shuffle window, 0 the default */
	uint64_t seed;
	enum rf_device_kind device;
	uint64_t pinned;
	uint32_t depth;
	enum rf_pinning pinning;
	double seconds;          /* minimum run time (unless epochs) */
	uint32_t epochs;         /* 0: repeat until `seconds` */
	bool cold;
	bool json;
	double step_us;
	uint32_t io_depth;
	uint32_t decode_threads;
	bool direct;
	bool map;
	bool inplace;            /* --in-place: rf_config.inplace on */
	bool verify;
	bool touch;
	const char *timings;     /* --timings FILE, or NULL */
	const rf_image_field *image; /* --image-*: the field decoded, or NULL */
} bench_opts;

/* What the dataset's index says, before anything is read. */
typedef struct bench_dataset {
	size_t shards;
	uint64_t samples;
	uint64_t chunks;
	uint64_t zstd_chunks;
	uint64_t stored_bytes;   /* sum of the chunks' stored bytes */
	uint64_t raw_bytes;      /* sum of the chunks' decoded bytes */
	uint64_t value_bytes;    /* bytes of one sample's fixed fields */
} bench_dataset;

void bench_dataset_info(const rf_dataset *ds, bench_dataset *info);

enum {
	BENCH_LIMIT_SEQUENTIAL,
	BENCH_LIMIT_RANDOM,
	BENCH_LIMIT_ZSTD,
	BENCH_LIMIT_MEMCPY,
	BENCH_LIMIT_H2D,
	BENCH_LIMIT_DECODE,      /* --image-*: image decode and transform */
	BENCH_LIMIT_MEMCPY_PARALLEL, /* memcpy on the loader's decode threads at once */
	BENCH_NLIMITS,
};

/* One limit as reported: its own byte rate and the sample rate it allows. */
typedef struct bench_limit {
	const char *key;         /* JSON key */
	const char *label;       /* table label */
	bool measured;
	bool applies;            /* counts for the binding limit */
	double gb_per_s;         /* of the bytes it moves (zstd: all decode threads) */
	double per_thread_gb_per_s; /* zstd, memcpy: one thread; else = gb_per_s */
	double bytes_per_sample; /* the bytes it moves per sample */
	double samples_per_s;
	double loader_ratio;     /* loader samples/s over this limit's */
	double bytes;            /* bytes the measurement moved (one thread's) */
	double seconds;          /* and the time it took (CPU time for zstd, memcpy) */
	const char *note;
} bench_limit;

typedef struct bench_result {
	long cpus;               /* online CPUs */
	double loadavg[3];       /* /proc/loadavg before the run; -1 unknown */
	bench_dataset info;
	bench_cache cache;
	/* the loader run */
	double open_seconds;
	double seconds;          /* first rf_loader_next to the end of the loop */
	uint64_t batches;
	uint64_t samples;
	uint64_t batches_in_place; /* handed out in the map, read-only (RF_BATCH_READONLY) */
	uint64_t epochs;         /* epochs begun */
	uint64_t peak_rss;       /* bytes, ru_maxrss right after the run */
	uint64_t checksum;       /* --touch: sum of the bytes read */
	double loader_runq_s;    /* loader threads runnable but waiting for a CPU; <0 unknown */
	double consumer_runq_s;  /* the same for the consumer thread */
	double context_switches; /* of every thread of the process during the run */
	double process_cpu_s;    /* user + system CPU of the whole process during the
	                            run (getrusage): consumer and loader threads */
	double loader_run_cpu_s; /* the loader threads' CPU during the run (thread_cpu_ns
	                            at the end less at the start) */
	bool device_is_cuda;
	bool remote;             /* a shard is a URL: the storage row is the remote
	                            limit, raw ranged GETs (rf_dataset_remote_limit) */
	bool interrupted;
	bool failed;
	bool mixture;            /* --mix */
	rf_stats stats;
	/* the limits, raw */
	bench_rate sequential, random, zstd, memcpy, h2d;
	bench_rate memcpy_parallel; /* bytes of all threads, wall time */
	bench_rate images;       /* bytes: encoded images; ops: images decoded */
	/* derived by bench_compute */
	double samples_per_s, batches_per_s, gb_per_s, read_gb_per_s;
	double cpu_s_per_gb, stall_share, per_batch_us;
	double cpu_us_per_batch;         /* loader threads, as cpu_s_per_gb */
	double process_cpu_s_per_gb, process_cpu_us_per_batch;
	double loader_cpu_share;         /* loader_run_cpu_s / process_cpu_s; 0 unknown */
	bench_limit limits[BENCH_NLIMITS];
	int binding;             /* index into limits, or -1 */
	double efficiency;       /* loader samples/s over the binding limit's; 0 if none */
} bench_result;

void bench_compute(const bench_opts *o, bench_result *res);
void bench_print_table(FILE *f, const bench_opts *o, const bench_result *res);
void bench_print_json(FILE *f, const bench_opts *o, const bench_result *res);

#endif
