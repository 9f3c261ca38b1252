/* SPDX-License-Identifier: MIT */
/*
 * Description: the loader's error paths.  A corrupt chunk in the middle of
 * the stream (raw and zstd) and an injected read error (EIO) each deliver
 * every batch before the bad chunk, then an error naming the shard and the
 * chunk, sticky, with no hang; closing in the middle of an epoch with
 * batches held, staged and in flight is clean; holding more than depth
 * batches gives RF_EHELD; try_next answers -EAGAIN or a batch; an empty
 * dataset ends at once; device auto picks cuda or host; bad
 * settings and a pinned budget too small fail at open with the memory
 * plan's message; a dataset of more shards than the open-file soft limit
 * allows opens by raising that limit, and fails with a message naming the
 * limit when the hard limit is too low; with world > 1 a batch that a
 * variable field's region would close early is RF_EMEMPLAN, with one rank
 * it closes early.  Argument "cuda": the same on the cudart emulator (slow
 * link), plus a device too small for the buffers (RF_EMEMPLAN), and zero
 * hazards and nothing left allocated at the end.
 */
#include <inttypes.h>
#include <sys/resource.h>

#include "config.h"
#include "lt.h"
#include "lt_gpu.h"
#include "../cuda-emulator/emulator.h"
#include "format/format.h"
#include "common.h"

static struct rfemu_api emu;
static int use_cuda;
static char dir[256];
static int use_map; /* LT_MAP=1: chunks read through memory maps (rf_config.map) */

static void
base_config(rf_config *cfg, const char **paths, const char *pattern)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, pattern);
	paths[0] = path;
	rf_config_init(cfg);
	cfg->paths = paths;
	cfg->npaths = 1;
	cfg->batch_size = 16;
	cfg->pinned_bytes = 256 << 10;
	cfg->device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg->map = use_map;
	cfg->log = lt_log;
}

/* Stream until the end or an error; returns the code and the samples
 * delivered (all checked). */
static int
drain(rf_loader *ld, uint64_t *samples)
{
	const rf_batch *b;
	int rc;
	*samples = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->first_sample == *samples);
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		LT_CHECK(lt_check_batch_any(b, b->first_sample) == 0);
		*samples += b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	return rc;
}

/* Flip one byte in the stored bytes of dataset chunk `chunk`. */
static void
corrupt_chunk(const char *pattern, uint64_t chunk, uint64_t *first_sample, char *shard,
	      size_t cap, uint64_t *file_offset, char *where, size_t wcap)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, pattern);
	const char *paths[] = {path};
	rf_dataset *ds;
	if (rf_dataset_open(&ds, paths, 1, NULL) < 0) {
		fprintf(stderr, "open: %s\n", rf_dataset_last_open_error());
		exit(1);
	}
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, chunk, &ci) == 0);
	*first_sample = ci.first_sample;
	*file_offset = ci.offset;
	snprintf(shard, cap, "%s", rf_dataset_shard_path(ds, ci.shard));
	/* What the message must say: the shard and the chunk's number in it. */
	rf_chunk_ctx ctx;
	LT_CHECK(rf_dataset_chunk_ctx(ds, chunk, &ctx) == 0);
	snprintf(where, wcap, "%s: chunk %llu at offset %llu", strrchr(shard, '/') + 1,
		 (unsigned long long)ctx.chunk, (unsigned long long)ctx.offset);
	FILE *f = fopen(shard, "r+b");
	LT_CHECK(f != NULL);
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	int c = fgetc(f);
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
	rf_dataset_close(&ds);
}

/* threads: decode workers (0: the library's choice); several fill the
 * batches together, and from a map check each chunk with its copies. */
static void
test_corrupt(const char *name, int zstd, unsigned threads)
{
	LT_CHECK(lt_pack(dir, name, 2000, zstd, 4096, 30000, 1) == 0);
	char pattern[64], shard[4096];
	snprintf(pattern, sizeof(pattern), "%s*.rfs", name);
	uint64_t first, off;
	char where[256];
	corrupt_chunk(pattern, 9, &first, shard, sizeof(shard), &off, where, sizeof(where));

	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, pattern);
	cfg.decode_threads = threads;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc)
		return;
	uint64_t got;
	rc = drain(ld, &got);
	LT_CHECK(rc == RF_ECHECKSUM);
	/* Every whole batch before the bad chunk arrived. */
	LT_CHECK(got == first / 16 * 16);
	const char *msg = rf_loader_errmsg(ld);
	fprintf(stderr, "corrupt %s: %s\n", name, msg);
	LT_CHECK(strstr(msg, where) != NULL);
	const rf_batch *b;
	LT_CHECK(rf_loader_next(ld, &b) == RF_ECHECKSUM && b == NULL);
	rf_loader_close(&ld);
	(void)off;
}

static void
test_eio(void)
{
	if (!RF_TEST_HOOKS)
		return; /* RINGFEED_IO_FAIL_AT needs -Dtest_hooks */
	LT_CHECK(lt_pack(dir, "eio", 3000, 0, 4096, 0, 0) == 0);
	char shard[4096];
	uint64_t first, off;
	char where[256];
	/* Corrupt nothing: only locate chunk 20 (flip the byte twice). */
	corrupt_chunk("eio.rfs", 20, &first, shard, sizeof(shard), &off, where, sizeof(where));
	corrupt_chunk("eio.rfs", 20, &first, shard, sizeof(shard), &off, where, sizeof(where));
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)off + 100);
	setenv("RINGFEED_IO_FAIL_AT", v, 1);
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "eio.rfs");
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	unsetenv("RINGFEED_IO_FAIL_AT");
	LT_CHECK(rc == 0);
	if (rc)
		return;
	uint64_t got;
	rc = drain(ld, &got);
	LT_CHECK(rc == -EIO);
	LT_CHECK(got == first / 16 * 16);
	const char *msg = rf_loader_errmsg(ld);
	fprintf(stderr, "eio: %s\n", msg);
	LT_CHECK(strstr(msg, where) != NULL);
	rf_loader_close(&ld);
}

static void
test_close_midway(void)
{
	LT_CHECK(lt_pack(dir, "mid", 5000, 1, 4096, 0, 1) == 0);
	for (int hold = 0; hold <= 2; hold++) {
		const char *paths[1];
		rf_config cfg;
		base_config(&cfg, paths, "mid.rfs");
		cfg.decode_threads = 3;
		cfg.pinning = hold == 1 ? RF_PINNING_TRANSIENT : RF_PINNING_RING;
		rf_loader *ld;
		LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
		const rf_batch *b[2];
		for (int i = 0; i < hold; i++)
			LT_CHECK(rf_loader_next(ld, &b[i]) == 0 && b[i]);
		if (hold == 2) {
			const rf_batch *x;
			LT_CHECK(rf_loader_next(ld, &x) == RF_EHELD);
			LT_CHECK(strstr(rf_loader_errmsg(ld), "depth") != NULL);
			LT_CHECK(rf_loader_try_next(ld, &x) == RF_EHELD);
			LT_CHECK(rf_loader_release(ld, b[1], NULL) == 0);
			LT_CHECK(rf_loader_release(ld, b[1], NULL) == -EINVAL);
			LT_CHECK(rf_loader_next(ld, &x) == 0 && x);
		}
		/* Close with batches held, staged and copies in flight. */
		rf_loader_close(&ld);
		LT_CHECK(ld == NULL);
	}
	rf_loader_close(NULL);
}

static void
test_try_next(void)
{
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "mid.rfs");
	rf_loader *ld;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	uint64_t samples = 0, again = 0;
	for (;;) {
		const rf_batch *b;
		int rc = rf_loader_try_next(ld, &b);
		if (rc == -EAGAIN) {
			again++;
			usleep(100);
			continue;
		}
		LT_CHECK(rc == 0);
		if (rc || !b)
			break;
		LT_CHECK(b->first_sample == samples);
		LT_CHECK(lt_check_batch_any(b, samples) == 0);
		samples += b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(samples == 5000);
	rf_stats s = {.size = sizeof(s)};
	LT_CHECK(rf_loader_stats(ld, &s) == 0);
	LT_CHECK(s.samples == 5000 && s.batches == (5000 + 15) / 16);
	rf_loader_close(&ld);
}

static void
test_bad_open(void)
{
	const char *paths[1];
	rf_config cfg;
	rf_loader *ld = (rf_loader *)&cfg;
	base_config(&cfg, paths, "mid.rfs");
	const char *nope[] = {"nope"};
	cfg.fields = nope;
	cfg.nfields = 1;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);
	LT_CHECK(strstr(rf_loader_last_open_error(), "nope") != NULL);

	base_config(&cfg, paths, "mid.rfs");
	cfg.batch_size = 0;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE);

	/* A count without its array is a mistake, not the default. */
	base_config(&cfg, paths, "mid.rfs");
	cfg.nfields = 3;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);
	LT_CHECK(strstr(rf_loader_last_open_error(), "nfields is 3") != NULL);
	base_config(&cfg, paths, "mid.rfs");
	cfg.resume_len = 5;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);
	LT_CHECK(strstr(rf_loader_last_open_error(), "resume_len is 5") != NULL);
	base_config(&cfg, paths, "mid.rfs");
	cfg.paths = NULL;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);
	LT_CHECK(strstr(rf_loader_last_open_error(), "paths NULL") != NULL);

	/* depth 0 is the default, 2; above 64 is refused. */
	base_config(&cfg, paths, "mid.rfs");
	cfg.depth = 0;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	if (ld) {
		const rf_batch *b1 = NULL, *b2 = NULL, *b3 = NULL;
		LT_CHECK(rf_loader_next(ld, &b1) == 0 && b1);
		LT_CHECK(rf_loader_next(ld, &b2) == 0 && b2);
		LT_CHECK(rf_loader_next(ld, &b3) == RF_EHELD && !b3); /* both held */
		rf_loader_close(&ld);
	}
	base_config(&cfg, paths, "mid.rfs");
	cfg.depth = 65;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);

	base_config(&cfg, paths, "does-not-exist.rfs");
	LT_CHECK(rf_loader_open(&ld, &cfg) < 0 && ld == NULL);

	/* Maps read through the page cache: O_DIRECT asked for too is a
	 * contradiction, said so. */
	base_config(&cfg, paths, "mid.rfs");
	cfg.map = 1;
	cfg.direct = 1;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && ld == NULL);
	LT_CHECK(strstr(rf_loader_last_open_error(), "map") != NULL);

	/* A pinned budget that holds fewer than two slots. */
	base_config(&cfg, paths, "mid.rfs");
	cfg.pinned_bytes = 8192;
	cfg.batch_size = 4096;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EMEMPLAN && ld == NULL);
	fprintf(stderr, "small pinned: %s\n", rf_loader_last_open_error());
	LT_CHECK(strstr(rf_loader_last_open_error(), "pinned_bytes") != NULL);

	if (use_cuda && !lt_gpu_on) {
		/* A device too small for depth x batch bytes: the plan says so
		 * before anything is allocated, and whatever was set up is
		 * released. */
		LT_CHECK(emu.set_option("RINGFEED_EMU_VRAM", "64K") == 0);
		base_config(&cfg, paths, "mid.rfs");
		cfg.batch_size = 4096;
		cfg.pinned_bytes = 8 << 20;
		LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EMEMPLAN && ld == NULL);
		fprintf(stderr, "small device: %s\n", rf_loader_last_open_error());
		LT_CHECK(strstr(rf_loader_last_open_error(), "memory plan") != NULL);
		LT_CHECK(strstr(rf_loader_last_open_error(), "batch_size") != NULL);
		LT_CHECK(emu.set_option("RINGFEED_EMU_VRAM", "16G") == 0);
	}
}

/* An empty dataset ends at once; device auto picks cuda when the runtime
 * (here the emulator) has a device, else host, and says which. */
static void
test_empty_and_auto(void)
{
	LT_CHECK(lt_pack(dir, "empty", 0, 0, 4096, 0, 1) == 0);
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "empty.rfs");
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc == 0) {
		const rf_batch *b = (const rf_batch *)&cfg;
		LT_CHECK(rf_loader_next(ld, &b) == 0 && b == NULL);
		LT_CHECK(rf_loader_try_next(ld, &b) == 0 && b == NULL);
		rf_loader_close(&ld);
	}

	base_config(&cfg, paths, "mid.rfs");
	cfg.device = RF_DEVICE_AUTO;
	char *saved = getenv("RINGFEED_CUDART") ? strdup(getenv("RINGFEED_CUDART")) : NULL;
	if (!use_cuda) {
		/* A RINGFEED_CUDART that does not load is an error with auto
		 * too (it was asked for); with nothing asked for, auto opens
		 * whatever the machine has. */
		setenv("RINGFEED_CUDART", "/nonexistent/libcudart.so", 1);
		LT_CHECK(rf_loader_open(&ld, &cfg) == RF_ENODEVICE && !ld);
		LT_CHECK(strstr(rf_loader_last_open_error(), "/nonexistent/libcudart.so") != NULL);
		unsetenv("RINGFEED_CUDART");
	}
	rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc == 0) {
		rf_stats s = {.size = sizeof(s)};
		LT_CHECK(rf_loader_stats(ld, &s) == 0);
		if (use_cuda)
			LT_CHECK(strncmp(s.device, "cuda", 4) == 0);
		uint64_t got;
		LT_CHECK(drain(ld, &got) == 0 && got == 5000);
		rf_loader_close(&ld);
	}
	if (saved)
		setenv("RINGFEED_CUDART", saved, 1);
	else
		unsetenv("RINGFEED_CUDART");
	free(saved);
}

/* Misuse answered with a code and a message: an epoch counter that would
 * overflow, a field read into too small a buffer, releasing NULL, and a
 * position saved with a larger window than the loader holds. */
static void
test_misuse_messages(void)
{
	LT_CHECK(lt_pack(dir, "mis", 640, 0, 1024, 0, 0) == 0); /* more chunks than W */
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "mis.rfs");
	rf_loader *ld = NULL;
	cfg.epoch = UINT64_MAX;
	cfg.epochs = 1;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_last_open_error(), "overflows") != NULL);

	base_config(&cfg, paths, "mis.rfs");
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = 8;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	if (!ld)
		return;
	const rf_batch *b;
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
	uint8_t small[8];
	LT_CHECK(rf_batch_field_read(b, 0, small, sizeof(small)) == -ENOSPC);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "more than the 8 given") != NULL);
	LT_CHECK(rf_batch_field_read(b, 99, small, sizeof(small)) == -EINVAL);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "field 99") != NULL);
	LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	LT_CHECK(rf_loader_release(ld, NULL, NULL) == -EINVAL);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "NULL") != NULL);
	for (int i = 0; i < 5 && rf_loader_next(ld, &b) == 0 && b; i++)
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
	rf_loader_close(&ld);
	cfg.window = 2;
	cfg.resume = blob;
	cfg.resume_len = len;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_ESTATE);
	LT_CHECK(strstr(rf_loader_last_open_error(), "window of 8") != NULL);
	cfg.window = 8;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	rf_loader_close(&ld);
}

/* A refused rf_loader_state_load leaves the stream where it was, its end
 * included (epochs = 2 stays two epochs). */
static void
test_refused_load(void)
{
	LT_CHECK(lt_pack(dir, "two", 320, 0, 4096, 0, 0) == 0);
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "two.rfs");
	cfg.epochs = 2; /* 2 x 20 batches of 16 */
	rf_loader *ld;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	if (!ld)
		return;
	const rf_batch *b;
	uint64_t n = 0, next = 0;
	for (; n < 15 && rf_loader_next(ld, &b) == 0 && b; n++) {
		next = b->first_sample + b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	uint8_t junk[RF_STATE_MAX];
	memset(junk, 0x5a, sizeof(junk));
	LT_CHECK(rf_loader_state_load(ld, junk, 96) == RF_ESTATE);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "magic") != NULL);
	int first = 1;
	while (rf_loader_next(ld, &b) == 0 && b) {
		if (first)
			LT_CHECK(b->first_sample == next);
		first = 0;
		n++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	if (n != 40)
		fprintf(stderr, "refused load: %" PRIu64 " batches in all, not 40\n", n);
	LT_CHECK(n == 40);
	rf_loader_close(&ld);
}

/* Save ld's position and open a loader from it with `world` ranks: with one
 * its first batch starts at sample `want`; with more the blob is refused
 * (RF_ESTATE), as a position inside a batch of one rank.  1 when so. */
static int
resume_starts_at(const rf_config *cfg0, rf_loader *ld, uint64_t want, int32_t world)
{
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	if (rf_loader_state_save(ld, blob, sizeof(blob), &len) != 0)
		return 0;
	rf_config cfg = *cfg0;
	cfg.resume = blob;
	cfg.resume_len = len;
	cfg.world = world;
	cfg.batch_size = cfg0->batch_size / (uint32_t)world;
	rf_loader *r;
	int rc = rf_loader_open(&r, &cfg);
	if (world > 1) {
		if (rc == 0)
			rf_loader_close(&r);
		return rc == RF_ESTATE && strstr(rf_loader_last_open_error(), "one rank") != NULL;
	}
	if (rc != 0) {
		fprintf(stderr, "resume at %" PRIu64 ": %s\n", want, rf_loader_last_open_error());
		return 0;
	}
	const rf_batch *b;
	int ok = rf_loader_next(r, &b) == 0 && b && b->first_sample == want &&
		 rf_batch_wait(b, NULL) == 0 && lt_check_batch_any(b, b->first_sample) == 0;
	if (!ok)
		fprintf(stderr, "resume at %" PRIu64 ": first batch starts at %" PRIu64 "\n", want,
			b ? b->first_sample : UINT64_MAX);
	if (b)
		rf_loader_release(r, b, NULL);
	rf_loader_close(&r);
	return ok;
}

/* With world > 1 a batch that a variable field's region would close early
 * is an error (it would give the rank one batch more than the others); with
 * one rank the same batch closes early and the stream goes on, and a position saved
 * after such a batch resumes at the sample after it. */
static void
test_early_close_ranks(void)
{
	LT_CHECK(lt_pack(dir, "var", 2000, 0, 4096, 0, 1) == 0);
	for (int world = 1; world <= 2; world++) {
		const char *paths[1];
		rf_config cfg;
		base_config(&cfg, paths, "var.rfs");
		cfg.rank = 0;
		cfg.world = world;
		cfg.batch_size = 32;
		cfg.var_bytes = 64; /* rounded up to 256: 32 values average 384 */
		rf_loader *ld;
		int rc = rf_loader_open(&ld, &cfg);
		LT_CHECK(rc == 0);
		if (rc) {
			fprintf(stderr, "early close: %s\n", rf_loader_last_open_error());
			continue;
		}
		const rf_batch *b;
		uint64_t samples = 0, batches = 0, partial_saves = 0;
		while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
			LT_CHECK(rf_batch_wait(b, NULL) == 0);
			LT_CHECK(lt_check_batch_any(b, b->first_sample) == 0);
			samples += b->samples;
			batches++;
			uint64_t next = b->first_sample + b->samples;
			int partial = next % 32 != 0 && next < 2000;
			LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
			/* A position saved after a batch closed early resumes at
			 * the sample after it: none twice, none lost. */
			if (partial && partial_saves < 6) {
				partial_saves++;
				LT_CHECK(resume_starts_at(&cfg, ld, next, 1));
				LT_CHECK(resume_starts_at(&cfg, ld, next, 2)); /* refused */
			}
		}
		if (world == 1)
			LT_CHECK(partial_saves == 6);
		if (world == 1) {
			LT_CHECK(rc == 0 && samples == 2000);
			LT_CHECK(batches > (2000 + 31) / 32); /* some closed early */
		} else {
			const char *msg = rf_loader_errmsg(ld);
			fprintf(stderr, "early close, world 2: %s\n", msg);
			LT_CHECK(rc == RF_EMEMPLAN);
			LT_CHECK(strstr(msg, "rank 0 of 2") != NULL);
			LT_CHECK(strstr(msg, "field tok") != NULL);
			LT_CHECK(strstr(msg, "var_bytes") != NULL);
		}
		rf_loader_close(&ld);
	}
}

/* Each shard keeps descriptors open (the index's and the reader's): a
 * dataset of many shards under a low soft limit must still stream whole. */
static void
test_many_shards(void)
{
	LT_CHECK(lt_pack(dir, "many", 3000, 0, 4096, 4096, 0) == 0);
	rf_dataset *ds;
	char pat[4096];
	snprintf(pat, sizeof(pat), "%s/many-*.rfs", dir);
	const char *p0 = pat;
	LT_CHECK(rf_dataset_open(&ds, &p0, 1, NULL) == 0);
	size_t shards = ds ? rf_dataset_shards(ds) : 0;
	LT_CHECK(shards >= 20);
	/* With its descriptors closed, the dataset opens a shard again when
	 * it reads from it. */
	if (ds) {
		rf_dataset_close_files(ds);
		uint8_t buf[64], want[64];
		size_t len = 0;
		uint64_t g = 2999;
		LT_CHECK(rf_dataset_read(ds, g, 1, buf, sizeof(buf), &len) == 0);
		LT_CHECK(len == lt_value("y", g, want) && memcmp(buf, want, len) == 0);
		LT_CHECK(rf_dataset_verify_chunk(ds, 0) == 0);
	}
	rf_dataset_close(&ds);

	struct rlimit saved, rl;
	LT_CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0);
	uint64_t have = rf_fds_open();
	if (have == 0 || saved.rlim_cur == RLIM_INFINITY || saved.rlim_cur < have + shards) {
		fprintf(stderr, "many shards: /proc/self/fd or the limit is unusable: skipped\n");
		return;
	}
	/* Room for half the shards' descriptors only. */
	rl = saved;
	rl.rlim_cur = have + shards / 2;
	LT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	const char *paths[1];
	rf_config cfg;
	base_config(&cfg, paths, "many-*.rfs");
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc == 0) {
		/* One descriptor a shard (the reader's), not two, plus the
		 * loader's few of its own (io_uring, wake-ups). */
		uint64_t during = rf_fds_open();
		fprintf(stderr, "many shards: %" PRIu64 " descriptors open for %zu shards\n",
			during - have, shards);
		LT_CHECK(during <= have + shards + 16);
		uint64_t samples;
		LT_CHECK(drain(ld, &samples) == 0);
		LT_CHECK(samples == 3000);
		rf_loader_close(&ld);
	} else {
		fprintf(stderr, "many shards: %s\n", rf_loader_last_open_error());
		rf_loader_close(&ld);
	}
	struct rlimit now;
	LT_CHECK(getrlimit(RLIMIT_NOFILE, &now) == 0);
	LT_CHECK(now.rlim_cur >= have + shards);

	/* A hard limit too low: a clear error at open, nothing left open. */
	rl.rlim_cur = rl.rlim_max = have + shards / 2;
	LT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == -EMFILE && ld == NULL);
	LT_CHECK(rf_fds_open() == have);
	const char *msg = rf_loader_last_open_error();
	fprintf(stderr, "many shards, hard limit: %s\n", msg);
	LT_CHECK(strstr(msg, "hard open-file limit") != NULL);
	/* Raising the hard limit again needs CAP_SYS_RESOURCE; without it the
	 * rest of the test needs few descriptors. */
	if (setrlimit(RLIMIT_NOFILE, &saved) < 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int
main(int argc, char **argv)
{
	use_cuda = argc > 1 && (!strcmp(argv[1], "cuda") || !strcmp(argv[1], "gpu"));
	lt_on_device = use_cuda;
	use_map = getenv("LT_MAP") && !strcmp(getenv("LT_MAP"), "1");
	if (argc > 1 && !strcmp(argv[1], "gpu")) {
		int rc = lt_gpu_init();
		if (rc)
			return rc;
	} else if (use_cuda && rfemu_api_load(&emu, NULL) != 0) {
		fprintf(stderr, "RINGFEED_CUDART is not the cudart emulator: skipped\n");
		return LT_SKIP;
	}
	snprintf(dir, sizeof(dir), "%s",
		 lt_tmpdir(lt_gpu_on ? "errors-gpu" : use_cuda ? "errors-cuda" : "errors-host"));
	test_corrupt("bad-raw", 0, 0);
	test_corrupt("bad-zstd", 1, 0);
	test_corrupt("bad-raw3", 0, 3);
	test_corrupt("bad-zstd3", 1, 3);
	if (!use_map) /* the injection hook is the reader's; maps read nothing */
		test_eio();
	test_close_midway();
	test_try_next();
	test_empty_and_auto();
	test_bad_open();
	test_early_close_ranks();
	test_refused_load();
	test_misuse_messages();
	test_many_shards(); /* last: it may leave the hard open-file limit lowered */
	lt_rmtree(dir);
	lt_gpu_fini();
	if (use_cuda && !lt_gpu_on) {
		lt_emu_clean(&emu, 1);
	}
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
