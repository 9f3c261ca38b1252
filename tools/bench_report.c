/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed bench` results: derived figures, the table and the JSON object.
 * The JSON keys are a documented interface (docs/bench.md): add keys, never
 * rename or drop one.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_report.h"
#include "util.h"

/* A name of the library's vocabulary, or "?" for a value it has none for. */
static const char *
or_unknown(const char *name)
{
	return name ? name : "?";
}

void
bench_dataset_info(const rf_dataset *ds, bench_dataset *info)
{
	const rf_schema *schema = rf_dataset_schema(ds);

	memset(info, 0, sizeof *info);
	info->shards = rf_dataset_shards(ds);
	info->samples = rf_dataset_samples(ds);
	info->chunks = rf_dataset_chunks(ds);
	for (uint64_t c = 0; c < info->chunks; c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) < 0)
			continue;
		info->stored_bytes += ci.stored_bytes;
		info->raw_bytes += ci.raw_bytes;
		info->zstd_chunks += ci.codec == RF_CODEC_ZSTD;
	}
	for (uint32_t f = 0; f < schema->nfields; f++)
		if (schema->fields[f].var_dim < 0)
			info->value_bytes += rf_field_item_bytes(&schema->fields[f]);
}

static double
per_sample(uint64_t bytes, uint64_t samples)
{
	return samples ? (double)bytes / (double)samples : 0;
}

static void
set_limit(bench_result *res, int k, const char *key, const char *label, const bench_rate *r,
	  double threads, double bytes_per_sample, bool applies)
{
	bench_limit *l = &res->limits[k];

	l->key = key;
	l->label = label;
	l->note = r->note;
	l->measured = r->ok && r->seconds > 0;
	l->applies = l->measured && applies;
	if (!l->measured)
		return;
	l->bytes = r->bytes;
	l->seconds = r->seconds;
	l->per_thread_gb_per_s = r->bytes / r->seconds / 1e9;
	l->gb_per_s = l->per_thread_gb_per_s * threads;
	l->bytes_per_sample = bytes_per_sample;
	if (bytes_per_sample > 0)
		l->samples_per_s = l->gb_per_s * 1e9 / bytes_per_sample;
	if (l->samples_per_s > 0)
		l->loader_ratio = res->samples_per_s / l->samples_per_s;
}

void
bench_compute(const bench_opts *o, bench_result *res)
{
	const rf_stats *st = &res->stats;
	double secs = res->seconds > 0 ? res->seconds : 1e-9;
	double delivered_per_sample, threads;

	res->samples_per_s = (double)res->samples / secs;
	res->batches_per_s = (double)res->batches / secs;
	res->gb_per_s = (double)st->bytes_delivered / secs / 1e9;
	res->read_gb_per_s = (double)st->bytes_read / secs / 1e9;
	res->cpu_s_per_gb = st->bytes_delivered
				    ? ((double)st->thread_cpu_ns / 1e9) / ((double)st->bytes_delivered / 1e9)
				    : 0;
	/* Stall over the consumer loop's time, not the loader's lifetime: the
	 * open (allocation, page-locking) is reported apart. */
	res->stall_share = (double)st->stall_ns / (secs * 1e9);
	if (res->stall_share > 1)
		res->stall_share = 1;
	res->per_batch_us = res->batches ? secs * 1e6 / (double)res->batches : 0;
	res->cpu_us_per_batch = res->batches ? (double)st->thread_cpu_ns / 1e3 / (double)res->batches
					     : 0;
	res->process_cpu_s_per_gb = st->bytes_delivered
					    ? res->process_cpu_s / ((double)st->bytes_delivered / 1e9)
					    : 0;
	res->process_cpu_us_per_batch = res->batches ? res->process_cpu_s * 1e6 / (double)res->batches
						     : 0;
	res->loader_cpu_share = res->process_cpu_s > 0 ? res->loader_run_cpu_s / res->process_cpu_s
						       : 0;
	if (res->loader_cpu_share > 1)
		res->loader_cpu_share = 1;

	delivered_per_sample = st->samples ? per_sample(st->bytes_delivered, st->samples)
					   : (double)res->info.value_bytes;
	threads = o->decode_threads ? o->decode_threads : 1;

	/* Read through maps (--map; window and full shuffling map the shards
	 * by themselves when reads are buffered) with every page resident at
	 * the start and no --cold: the run copies from memory, and the read
	 * calls the storage limits time are not what it does.  They are still
	 * measured and shown, not applied. */
	bool maps = o->map || (!o->direct && (o->shuffle == RF_SHUFFLE_WINDOW ||
					       o->shuffle == RF_SHUFFLE_FULL));
	bool from_memory = maps && !o->cold && !res->remote && res->cache.pages > 0 &&
			   res->cache.resident == res->cache.pages;
	/* A remote dataset's storage is the server: same key (scripts read
	 * it), its own label. */
	set_limit(res, BENCH_LIMIT_SEQUENTIAL, "storage_sequential",
		  res->remote ? "remote, ranged GETs" : "storage, sequential", &res->sequential, 1,
		  per_sample(res->info.stored_bytes, res->info.samples), !from_memory);
	/* A random read moves one sample's values: its rate is in samples. */
	set_limit(res, BENCH_LIMIT_RANDOM, "storage_random", "storage, random", &res->random, 1,
		  (double)res->info.value_bytes, !from_memory);
	set_limit(res, BENCH_LIMIT_ZSTD, "zstd", "zstd decompression", &res->zstd, threads,
		  per_sample(res->info.raw_bytes, res->info.samples), true);
	/* The loader's decode workers copy into the batches together (but in
	 * window shuffling and mixtures, where the copies stay in each
	 * chunk's turn): memcpy on that many threads at once is the limit
	 * then, one thread's otherwise. */
	bool copies_parallel = st->decode_threads > 1 && o->shuffle != RF_SHUFFLE_WINDOW &&
			       o->shuffle != RF_SHUFFLE_FULL && !res->mixture &&
			       res->memcpy_parallel.ok;
	set_limit(res, BENCH_LIMIT_MEMCPY, "memcpy", "memcpy", &res->memcpy, 1,
		  delivered_per_sample, !copies_parallel);
	set_limit(res, BENCH_LIMIT_MEMCPY_PARALLEL, "memcpy_parallel", "memcpy, decode threads",
		  &res->memcpy_parallel, 1, delivered_per_sample, copies_parallel);
	set_limit(res, BENCH_LIMIT_H2D, "host_to_device", "host-to-device copy", &res->h2d, 1,
		  delivered_per_sample, res->device_is_cuda);
	/* Images: decode + transform on each decode thread, in images. */
	set_limit(res, BENCH_LIMIT_DECODE, "image_decode", "image decode + transform",
		  &res->images, threads,
		  res->images.ops > 0 ? res->images.bytes / res->images.ops : 0, o->image != NULL);
	if (res->limits[BENCH_LIMIT_RANDOM].measured && res->random.seconds > 0) {
		/* Count samples, not bytes: a sample is several aligned reads. */
		bench_limit *l = &res->limits[BENCH_LIMIT_RANDOM];
		l->samples_per_s = res->random.ops / res->random.seconds;
		l->loader_ratio = l->samples_per_s > 0 ? res->samples_per_s / l->samples_per_s : 0;
	}

	res->binding = -1;
	/* Interrupted, the limits are partly measured or not at all: none
	 * of them is reported as the binding one. */
	for (int k = 0; k < BENCH_NLIMITS && !res->interrupted; k++) {
		const bench_limit *l = &res->limits[k];
		if (!l->applies || l->samples_per_s <= 0)
			continue;
		if (res->binding < 0 || l->samples_per_s < res->limits[res->binding].samples_per_s)
			res->binding = k;
	}
	res->efficiency = res->binding >= 0 ? res->limits[res->binding].loader_ratio : 0;
	if (!res->batches)
		res->efficiency = 0;
}

/* ----------------------------------------------------------------- table */

static const char *
fmt_bytes(char *buf, size_t cap, double b)
{
	return rf_cli_fmt_bytes(buf, cap, b);
}

static const char *
fmt_count(char *buf, size_t cap, double v)
{
	if (v >= 1e9)
		snprintf(buf, cap, "%.2f G", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, cap, "%.2f M", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, cap, "%.1f k", v / 1e3);
	else
		snprintf(buf, cap, "%.1f", v);
	return buf;
}

/* --cold with reads through the page cache (buffered, maps) over several
 * epochs: the later ones were served from the cache the first one filled. */
static bool
cold_first_epoch_only(const bench_opts *o, const bench_result *res)
{
	return o->cold && !res->stats.io_direct && res->epochs > 1;
}

void
bench_print_table(FILE *f, const bench_opts *o, const bench_result *res)
{
	const rf_stats *st = &res->stats;
	char a[32], b[32], c[32];

	fprintf(f, "ringfeed %s bench%s\n", rf_version_string(),
		res->interrupted ? " (interrupted)" : "");
	fprintf(f, "machine: %ld CPUs, load average %.2f %.2f %.2f before the run\n", res->cpus,
		res->loadavg[0], res->loadavg[1], res->loadavg[2]);
	fprintf(f, "dataset: %zu shard%s, %" PRIu64 " samples, %" PRIu64 " chunks (%" PRIu64
		   " zstd), %s stored, %s raw\n",
		res->info.shards, res->info.shards == 1 ? "" : "s", res->info.samples,
		res->info.chunks, res->info.zstd_chunks, fmt_bytes(a, sizeof a, (double)res->info.stored_bytes),
		fmt_bytes(b, sizeof b, (double)res->info.raw_bytes));
	char qd[16] = "the library's";
	if (o->io_depth)
		snprintf(qd, sizeof qd, "%" PRIu32, o->io_depth);
	fprintf(f, "config: batch %" PRIu32 ", shuffle %s, depth %" PRIu32 ", pinned %s (%s), "
		   "io depth %s, %" PRIu32 " decode threads, %s%s, step %.0f us%s\n",
		o->batch, or_unknown(rf_shuffle_name(o->shuffle)), o->depth,
		fmt_bytes(a, sizeof a, (double)o->pinned),
		or_unknown(rf_pinning_name(o->pinning)), qd,
		o->decode_threads, o->direct ? "O_DIRECT" : o->map ? "buffered, mapped" : "buffered",
		o->verify ? "" : ", no verify", o->step_us, o->touch ? ", touch" : "");
	if (res->remote)
		fprintf(f, "page cache: - (remote shards: read from the server%s)\n",
			res->stats.io_engine[0] && strchr(res->stats.io_engine, '+') ? " and disk" : "");
	else
		fprintf(f, "page cache: %s%.1f%% of %" PRIu64 " pages resident at start%s%s\n",
			o->cold ? (res->cache.dropped ? "dropped, " : "drop FAILED, ") : "warm, ",
			res->cache.pages ? 100.0 * (double)res->cache.resident / (double)res->cache.pages
					 : 0,
			res->cache.pages, res->cache.note[0] ? ": " : "", res->cache.note);
	fprintf(f, "\n");
	fprintf(f, "loader\n");
	fprintf(f, "  %-26s %.2f s, %" PRIu64 " epoch%s, %" PRIu64 " batches (open %.3f s)\n", "run",
		res->seconds, res->epochs, res->epochs == 1 ? "" : "s", res->batches,
		res->open_seconds);
	fprintf(f, "  %-26s %s  (%.1f us per batch)\n", "batches/s",
		fmt_count(a, sizeof a, res->batches_per_s), res->per_batch_us);
	fprintf(f, "  %-26s %s\n", "samples/s", fmt_count(a, sizeof a, res->samples_per_s));
	fprintf(f, "  %-26s %.3f GB/s delivered, %.3f GB/s read\n", "bytes", res->gb_per_s,
		res->read_gb_per_s);
	fprintf(f, "  %-26s %.3f s/GB (loader threads, %.2f s in all)\n", "CPU per GB",
		res->cpu_s_per_gb, (double)st->thread_cpu_ns / 1e9);
	fprintf(f, "  %-26s %.3f s/GB, %.1f us per batch (whole process, %.2f s; loader threads "
		"%.0f%%)\n", "process CPU", res->process_cpu_s_per_gb, res->process_cpu_us_per_batch,
		res->process_cpu_s, 100.0 * res->loader_cpu_share);
	fprintf(f, "  %-26s %.2f%%\n", "consumer stall", 100.0 * res->stall_share);
	if (res->loader_runq_s >= 0)
		fprintf(f, "  %-26s %.2f s loader threads, %.2f s consumer\n", "waiting for a CPU",
			res->loader_runq_s, res->consumer_runq_s);
	fprintf(f, "  %-26s %.1f per batch\n", "context switches",
		res->batches ? res->context_switches / (double)res->batches : 0);
	fprintf(f, "  %-26s %s pinned, %s device\n", "high-water",
		fmt_bytes(a, sizeof a, (double)st->pinned_peak),
		fmt_bytes(b, sizeof b, (double)st->device_peak));
	fprintf(f, "  %-26s %s\n", "peak RSS", fmt_bytes(c, sizeof c, (double)res->peak_rss));
	fprintf(f, "  %-26s %s%s, device %s\n", "I/O engine", st->io_engine[0] ? st->io_engine : "?",
		st->io_direct ? " (O_DIRECT)" : " (buffered)", st->device[0] ? st->device : "?");
	if (st->inplace)
		fprintf(f, "  %-26s %" PRIu64 " of %" PRIu64 " batches (%.0f%%), read-only in the maps\n",
			"in place", res->batches_in_place, res->batches,
			res->batches ? 100.0 * (double)res->batches_in_place / (double)res->batches : 0.0);
	if (cold_first_epoch_only(o, res))
		fprintf(f, "  note: reads went through the page cache, so only the first of the %" PRIu64
			   " epochs was cold (--epochs 1 measures a cold pass)\n",
			res->epochs);
	fprintf(f, "\n");
	fprintf(f, "  %-22s %9s %12s %8s  %s\n", "limit", "GB/s", "samples/s", "loader/", "note");
	for (int k = 0; k < BENCH_NLIMITS; k++) {
		const bench_limit *l = &res->limits[k];
		if (!l->key)
			continue;
		if (!l->measured) {
			if (l->note && l->note[0])
				fprintf(f, "  %-22s %9s %12s %8s  %s\n", l->label, "-", "-", "-", l->note);
			continue;
		}
		char thr[48] = "";
		if (k == BENCH_LIMIT_ZSTD)
			snprintf(thr, sizeof thr, " (%.3f GB/s x %" PRIu32 " threads)",
				 l->per_thread_gb_per_s, o->decode_threads);
		fprintf(f, "  %-22s %9.3f %12s %8.2f  %s%s%s%s\n", l->label, l->gb_per_s,
			fmt_count(a, sizeof a, l->samples_per_s), l->loader_ratio,
			k == res->binding ? "[binding] " : "", l->applies ? "" : "[not applicable] ",
			l->note ? l->note : "", thr);
	}
	fprintf(f, "\n");
	if (res->binding >= 0 && res->batches && !res->interrupted)
		fprintf(f, "efficiency: %.2f (loader / %s)\n", res->efficiency,
			res->limits[res->binding].label);
	else
		fprintf(f, "efficiency: - (%s)\n",
			res->interrupted ? "interrupted" : !res->batches ? "no batch delivered"
							 : "no limit measured");
	const bench_limit *rl = &res->limits[BENCH_LIMIT_SEQUENTIAL];
	if (res->remote && rl->measured && res->batches && !res->interrupted)
		fprintf(f, "remote efficiency: %.2f (loader / raw ranged GETs of the same chunks "
			"at io_depth %" PRIu32 ")\n", rl->loader_ratio, o->io_depth ? o->io_depth : 32);
}

/* ------------------------------------------------------------------ JSON */

static void
json_num(FILE *f, const char *key, double v, bool comma)
{
	fprintf(f, "\"%s\": ", key);
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
	if (comma)
		fputs(", ", f);
}

static void
json_u64(FILE *f, const char *key, uint64_t v, bool comma)
{
	fprintf(f, "\"%s\": %" PRIu64 "%s", key, v, comma ? ", " : "");
}

static void
json_str(FILE *f, const char *key, const char *v, bool comma)
{
	fprintf(f, "\"%s\": ", key);
	if (v)
		rf_cli_json_str(f, v);
	else
		fputs("null", f);
	if (comma)
		fputs(", ", f);
}

static void
json_bool(FILE *f, const char *key, bool v, bool comma)
{
	fprintf(f, "\"%s\": %s%s", key, v ? "true" : "false", comma ? ", " : "");
}

void
bench_print_json(FILE *f, const bench_opts *o, const bench_result *res)
{
	const rf_stats *st = &res->stats;

	fputs("{", f);
	json_str(f, "ringfeed_version", rf_version_string(), true);
	json_bool(f, "interrupted", res->interrupted, true);
	json_bool(f, "failed", res->failed, true);
	fputs("\"machine\": {", f);
	fprintf(f, "\"cpus\": %ld, \"loadavg\": [%.2f, %.2f, %.2f]", res->cpus, res->loadavg[0],
		res->loadavg[1], res->loadavg[2]);
	fputs("}, ", f);

	fputs("\"dataset\": {\"paths\": [", f);
	for (size_t i = 0; i < o->npaths; i++) {
		if (i)
			fputs(", ", f);
		rf_cli_json_str(f, o->paths[i]);
	}
	fputs("], ", f);
	json_u64(f, "shards", res->info.shards, true);
	json_u64(f, "samples", res->info.samples, true);
	json_u64(f, "chunks", res->info.chunks, true);
	json_u64(f, "zstd_chunks", res->info.zstd_chunks, true);
	json_u64(f, "stored_bytes", res->info.stored_bytes, true);
	json_u64(f, "raw_bytes", res->info.raw_bytes, true);
	json_u64(f, "value_bytes_per_sample", res->info.value_bytes, false);
	fputs("}, ", f);

	fputs("\"config\": {", f);
	json_u64(f, "batch", o->batch, true);
	json_str(f, "shuffle", or_unknown(rf_shuffle_name(o->shuffle)), true);
	json_u64(f, "seed", o->seed, true);
	json_str(f, "device", or_unknown(rf_device_name(o->device)), true);
	json_u64(f, "pinned_bytes", o->pinned, true);
	json_u64(f, "depth", o->depth, true);
	json_str(f, "pin", or_unknown(rf_pinning_name(o->pinning)), true);
	json_u64(f, "io_depth", o->io_depth, true);
	json_u64(f, "decode_threads", o->decode_threads, true);
	json_bool(f, "direct", o->direct, true);
	json_bool(f, "map", o->map, true);
	json_bool(f, "inplace", o->inplace, true);
	json_bool(f, "verify", o->verify, true);
	json_bool(f, "touch", o->touch, true);
	json_num(f, "seconds", o->seconds, true);
	json_u64(f, "epochs", o->epochs, true);
	json_bool(f, "cold", o->cold, true);
	json_num(f, "step_us", o->step_us, true);
	if (o->image) {
		const rf_image_field *im = o->image;
		fputs("\"image\": {", f);
		json_str(f, "field", im->field, true);
		json_u64(f, "height", im->height, true);
		json_u64(f, "width", im->width, true);
		json_u64(f, "channels", im->channels, true);
		json_str(f, "transform", im->transform == RF_IMAGE_TRAIN ? "train" : "eval", true);
		json_u64(f, "resize", im->resize, true);
		json_num(f, "scale_min", im->scale_min, true);
		json_num(f, "scale_max", im->scale_max, true);
		json_num(f, "ratio_min", im->ratio_min, true);
		json_num(f, "ratio_max", im->ratio_max, true);
		json_num(f, "flip", im->flip, true);
		json_bool(f, "dct", im->dct_scale != 0, false);
		fputs("}", f);
	} else {
		fputs("\"image\": null", f);
	}
	fputs("}, ", f);

	fputs("\"cache\": {", f);
	json_bool(f, "cold", o->cold, true);
	json_bool(f, "dropped", o->cold && res->cache.dropped, true);
	json_u64(f, "pages", res->cache.pages, true);
	json_u64(f, "resident_pages", res->cache.resident, true);
	json_num(f, "resident_fraction",
		 res->cache.pages ? (double)res->cache.resident / (double)res->cache.pages : 0, true);
	json_str(f, "note", res->cache.note[0] ? res->cache.note : NULL, true);
	json_bool(f, "cold_first_epoch_only", cold_first_epoch_only(o, res), false);
	fputs("}, ", f);

	fputs("\"loader\": {", f);
	json_num(f, "open_seconds", res->open_seconds, true);
	json_num(f, "seconds", res->seconds, true);
	json_u64(f, "epochs", res->epochs, true);
	json_u64(f, "batches", res->batches, true);
	json_u64(f, "samples", res->samples, true);
	json_num(f, "batches_per_s", res->batches_per_s, true);
	json_num(f, "samples_per_s", res->samples_per_s, true);
	json_num(f, "per_batch_us", res->per_batch_us, true);
	json_num(f, "gb_per_s", res->gb_per_s, true);
	json_num(f, "read_gb_per_s", res->read_gb_per_s, true);
	json_u64(f, "bytes_delivered", st->bytes_delivered, true);
	json_u64(f, "bytes_read", st->bytes_read, true);
	json_num(f, "thread_cpu_s", (double)st->thread_cpu_ns / 1e9, true);
	json_num(f, "cpu_s_per_gb", res->cpu_s_per_gb, true);
	json_num(f, "cpu_us_per_batch", res->cpu_us_per_batch, true);
	json_num(f, "process_cpu_s", res->process_cpu_s, true);
	json_num(f, "process_cpu_s_per_gb", res->process_cpu_s_per_gb, true);
	json_num(f, "process_cpu_us_per_batch", res->process_cpu_us_per_batch, true);
	json_num(f, "loader_cpu_share", res->loader_cpu_share, true);
	json_num(f, "stall_share", res->stall_share, true);
	json_num(f, "stall_s", (double)st->stall_ns / 1e9, true);
	json_num(f, "loader_runqueue_s", res->loader_runq_s, true);
	json_num(f, "consumer_runqueue_s", res->consumer_runq_s, true);
	json_num(f, "context_switches_per_batch",
		 res->batches ? res->context_switches / (double)res->batches : 0, true);
	json_num(f, "read_s", (double)st->read_ns / 1e9, true);
	json_num(f, "decode_s", (double)st->decode_ns / 1e9, true);
	json_num(f, "copy_s", (double)st->copy_ns / 1e9, true);
	json_u64(f, "pinned_peak", st->pinned_peak, true);
	json_u64(f, "device_peak", st->device_peak, true);
	json_u64(f, "slot_bytes", st->slot_bytes, true);
	json_u64(f, "stage_slot_bytes", st->stage_slot_bytes, true);
	json_u64(f, "slots_total", st->slots_total, true);
	json_u64(f, "slots_used_max", st->slots_used_max, true);
	json_u64(f, "reads_inflight_max", st->reads_inflight_max, true);
	json_u64(f, "ready_max", st->ready_max, true);
	json_u64(f, "batch_bytes", st->batch_bytes, true);
	json_u64(f, "peak_rss", res->peak_rss, true);
	json_str(f, "io_engine", st->io_engine, true);
	json_bool(f, "io_direct", st->io_direct != 0, true);
	json_str(f, "device", st->device, true);
	json_u64(f, "batches_in_place", res->batches_in_place, true);
	json_u64(f, "checksum", res->checksum, false);
	fputs("}, ", f);

	fputs("\"limits\": {", f);
	bool first = true;
	for (int k = 0; k < BENCH_NLIMITS; k++) {
		const bench_limit *l = &res->limits[k];
		if (!l->key)
			continue;
		if (!first)
			fputs(", ", f);
		first = false;
		fprintf(f, "\"%s\": {", l->key);
		json_bool(f, "measured", l->measured, true);
		json_bool(f, "applies", l->applies, true);
		json_num(f, "gb_per_s", l->gb_per_s, true);
		json_num(f, "per_thread_gb_per_s", l->per_thread_gb_per_s, true);
		json_num(f, "bytes_per_sample", l->bytes_per_sample, true);
		json_num(f, "samples_per_s", l->samples_per_s, true);
		json_num(f, "loader_ratio", l->loader_ratio, true);
		json_num(f, "bytes", l->bytes, true);
		json_num(f, "seconds", l->seconds, true);
		json_str(f, "note", l->note && l->note[0] ? l->note : NULL, false);
		fputs("}", f);
	}
	fputs("}, ", f);
	json_str(f, "binding_limit", res->binding >= 0 ? res->limits[res->binding].key : NULL, true);
	json_num(f, "efficiency", res->efficiency, true);
	/* The loader over raw ranged GETs (remote datasets), else null. */
	const bench_limit *rl = &res->limits[BENCH_LIMIT_SEQUENTIAL];
	if (res->remote && rl->measured && res->batches && !res->interrupted)
		json_num(f, "remote_efficiency", rl->loader_ratio, false);
	else
		json_str(f, "remote_efficiency", NULL, false);
	fputs("}\n", f);
}
