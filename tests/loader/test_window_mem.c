/* SPDX-License-Identifier: MIT */
/*
 * Description: window shuffling from memory.  Over data read through the
 * page cache (map, or buffered), a window over fixed, uncompressed fields
 * with per-sample checksums is served like shuffle full from memory (io
 * engine "mmap", no decode thread) in the window plan's order: every batch
 * of two epochs holds the same samples, in the same order and with the same
 * bytes, as the window that holds chunks (RINGFEED_WINDOW_HOLD=1) and as
 * O_DIRECT reads, for two ranks, batch sizes that do and do not divide the
 * share, drop_last on and off, and the default and an explicit W.  A
 * position saved by either resumes in the other to the same remaining
 * stream.  A flipped value byte ends the stream with RF_ECHECKSUM, never
 * delivered.  Compressed chunks, a variable field loaded, format 1 shards
 * with verify on, and O_DIRECT keep the window that holds chunks.
 */
#include "lt.h"
#include "format/format.h"

#include <inttypes.h>

static char dir[256];

#define N 3000

struct run {
	uint32_t batch, window, rank, world;
	int drop_last, direct, hold, epochs;
};

static int
open_run(rf_loader **ld, const char *name, const struct run *r, const void *resume,
	 size_t resume_len)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, name);
	cfg.batch_size = r->batch;
	cfg.epochs = (uint32_t)r->epochs;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = r->window;
	cfg.seed = 29;
	cfg.rank = (int32_t)r->rank;
	cfg.world = (int32_t)r->world;
	cfg.drop_last = r->drop_last;
	cfg.direct = r->direct;
	cfg.resume = resume;
	cfg.resume_len = resume_len;
	if (r->hold)
		setenv("RINGFEED_WINDOW_HOLD", "1", 1);
	int rc = rf_loader_open(ld, &cfg);
	unsetenv("RINGFEED_WINDOW_HOLD");
	return rc;
}

/* The engine a loader runs: 1 from memory (mmap, no decode thread). */
static int
from_memory(rf_loader *ld)
{
	rf_stats st = {.size = sizeof(st)};
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	return strcmp(st.io_engine, "mmap") == 0 && st.decode_threads == 0;
}

/* The stream: each row's sample, every row checked; stops after `stop`
 * batches (saving the position into blob) when stop > 0.  *err: the
 * stream's end code. */
static uint64_t *
stream(rf_loader *ld, uint64_t cap, uint64_t *got, uint64_t stop, uint8_t *blob, size_t *len,
       int *err)
{
	uint64_t *s = calloc(cap, sizeof(*s)), batches = 0;
	const rf_batch *b;
	int rc;
	*got = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(g < N && lt_row_ok(b, i, g));
			if (*got < cap)
				s[(*got)++] = g;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		if (stop && ++batches == stop) {
			LT_CHECK(rf_loader_state_save(ld, blob, RF_STATE_MAX, len) == 0);
			break;
		}
	}
	*err = rc;
	return s;
}

static void
same_as_hold(const char *name, struct run r)
{
	uint64_t *s[3], n[3];
	int err[3];
	for (int k = 0; k < 3; k++) {
		struct run q = r;
		q.hold = k == 1;
		q.direct = k == 2;
		rf_loader *ld = NULL;
		LT_CHECK(open_run(&ld, name, &q, NULL, 0) == 0);
		if (!ld)
			return;
		LT_CHECK(from_memory(ld) == (k == 0));
		s[k] = stream(ld, 2 * N, &n[k], 0, NULL, NULL, &err[k]);
		LT_CHECK(err[k] == 0);
		rf_loader_close(&ld);
	}
	LT_CHECK(n[0] == n[1] && n[0] == n[2] && n[0] > 0);
	LT_CHECK(memcmp(s[0], s[1], n[0] * sizeof(uint64_t)) == 0);
	LT_CHECK(memcmp(s[0], s[2], n[0] * sizeof(uint64_t)) == 0);
	printf("B %u, W %u, rank %u of %u, drop_last %d: %" PRIu64 " samples, same order\n",
	       r.batch, r.window, r.rank, r.world, r.drop_last, n[0]);
	for (int k = 0; k < 3; k++)
		free(s[k]);
}

/* Saved by one engine after 7 batches, resumed by the other: the rest of
 * the stream is the uninterrupted one's. */
static void
resume_across(const char *name, int saver_holds)
{
	struct run r = {.batch = 24, .window = 0, .rank = 0, .world = 1, .epochs = 2};
	rf_loader *ld = NULL;
	uint64_t nall, npart, nrest;
	int err;
	LT_CHECK(open_run(&ld, name, &r, NULL, 0) == 0);
	if (!ld)
		return;
	uint64_t *all = stream(ld, 2 * N, &nall, 0, NULL, NULL, &err);
	rf_loader_close(&ld);
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	struct run a = r, b = r;
	a.hold = saver_holds;
	b.hold = !saver_holds;
	LT_CHECK(open_run(&ld, name, &a, NULL, 0) == 0);
	if (!ld)
		return;
	uint64_t *part = stream(ld, 2 * N, &npart, 7, blob, &len, &err);
	rf_loader_close(&ld);
	LT_CHECK(open_run(&ld, name, &b, blob, len) == 0);
	if (!ld)
		return;
	LT_CHECK(from_memory(ld) == saver_holds);
	uint64_t *rest = stream(ld, 2 * N, &nrest, 0, NULL, NULL, &err);
	LT_CHECK(err == 0);
	rf_loader_close(&ld);
	LT_CHECK(npart == 7 * 24 && npart + nrest == nall);
	LT_CHECK(memcmp(all, part, npart * sizeof(uint64_t)) == 0);
	LT_CHECK(memcmp(all + npart, rest, nrest * sizeof(uint64_t)) == 0);
	free(all);
	free(part);
	free(rest);
}

/* A byte of sample 1234's "img" value flipped: the stream ends with
 * RF_ECHECKSUM naming it, and no delivered row holds a wrong value. */
static void
flipped(void)
{
	LT_CHECK(lt_pack(dir, "flip", N, 0, 4096, 0, 0) == 0);
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, "flip.rfs") == 0);
	uint64_t c = 0;
	LT_CHECK(rf_dataset_find_chunk(ds, 1234, &c) == 0);
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, c, &ci) == 0);
	rf_dataset_close(&ds);
	/* Sections: x u16[3] (6 bytes a sample), y i64, img u8[20], each
	 * 64-aligned; sample 1234 is row (1234 - first) of its chunk. */
	uint64_t row = 1234 - ci.first_sample;
	uint64_t off = RF_ALIGN_UP(6 * ci.samples, 64) + RF_ALIGN_UP(8 * ci.samples, 64) +
		       row * 20 + 3;
	lt_flip_byte(dir, "flip.rfs", ci.offset + off, 0x10);
	struct run r = {.batch = 16, .world = 1, .epochs = 1};
	rf_loader *ld = NULL;
	LT_CHECK(open_run(&ld, "flip.rfs", &r, NULL, 0) == 0);
	if (!ld)
		return;
	LT_CHECK(from_memory(ld));
	uint64_t n;
	int err;
	uint64_t *s = stream(ld, N, &n, 0, NULL, NULL, &err);
	LT_CHECK(err == RF_ECHECKSUM);
	fprintf(stderr, "flipped: %s\n", rf_loader_errmsg(ld));
	LT_CHECK(strstr(rf_loader_errmsg(ld), "sample 1234") != NULL);
	for (uint64_t i = 0; i < n; i++)
		LT_CHECK(s[i] != 1234);
	rf_loader_close(&ld);
	free(s);
}

/* Loaders that keep the window holding chunks. */
static void
not_from_memory(void)
{
	struct run r = {.batch = 16, .world = 1, .epochs = 1};
	rf_loader *ld = NULL;
	/* zstd chunks */
	LT_CHECK(lt_pack(dir, "z", 500, 1, 4096, 0, 0) == 0);
	LT_CHECK(open_run(&ld, "z.rfs", &r, NULL, 0) == 0);
	if (ld)
		LT_CHECK(!from_memory(ld));
	rf_loader_close(&ld);
	/* a variable field, loaded */
	LT_CHECK(lt_pack(dir, "v", 500, 0, 4096, 0, 1) == 0);
	LT_CHECK(open_run(&ld, "v.rfs", &r, NULL, 0) == 0);
	if (ld)
		LT_CHECK(!from_memory(ld));
	rf_loader_close(&ld);
	/* format 1: no per-sample checksums */
	lt_pack_format = 1;
	LT_CHECK(lt_pack(dir, "f1", 500, 0, 4096, 0, 0) == 0);
	lt_pack_format = 0;
	LT_CHECK(open_run(&ld, "f1.rfs", &r, NULL, 0) == 0);
	if (ld)
		LT_CHECK(!from_memory(ld));
	rf_loader_close(&ld);
	/* O_DIRECT */
	r.direct = 1;
	LT_CHECK(open_run(&ld, "w.rfs", &r, NULL, 0) == 0);
	if (ld)
		LT_CHECK(!from_memory(ld));
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("window-mem"));
	/* 3000 samples in chunks of about 4 KiB (about 100 of them). */
	LT_CHECK(lt_pack(dir, "w", N, 0, 4096, 0, 0) == 0);
	const struct run runs[] = {
		{.batch = 16, .window = 0, .rank = 0, .world = 1, .drop_last = 1, .epochs = 2},
		{.batch = 7, .window = 6, .rank = 1, .world = 2, .drop_last = 0, .epochs = 2},
		{.batch = 32, .window = 3, .rank = 0, .world = 2, .drop_last = 1, .epochs = 2},
		{.batch = 100, .window = 0, .rank = 2, .world = 3, .drop_last = 0, .epochs = 1},
	};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
		same_as_hold("w.rfs", runs[i]);
	resume_across("w.rfs", 0);
	resume_across("w.rfs", 1);
	flipped();
	not_from_memory();
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
