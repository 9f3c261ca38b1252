/* SPDX-License-Identifier: MIT */
/*
 * Description: the memory plan as a pure function, over a table of inputs:
 * budgets (too small, enough, capped), devices (copy into device buffers,
 * in-place host delivery, dropped when too small to lend depth slots, a
 * device without the free memory), modes (chunk reads, window, map,
 * full with and without bounce areas) and decoded images (the workers'
 * chunk buffers, within RF_IMAGE_DECODE_BYTES_MAX); the slot size and counts, queue
 * depth and device bytes of each plan, and the numbers each refusal names.
 * The plan of the same inputs is the same every time, and a refusal leaves
 * the output untouched.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loader/memplan.h"

#define MIB (1ull << 20)

struct row {
	const char *what;
	/* inputs: one fixed field of V bytes per sample, B per batch */
	uint32_t B;
	uint64_t V;
	uint64_t span, nchunks, pinned;
	uint32_t depth, io_depth, window;
	int full, map, direct, sums, host;
	int free_known;
	uint64_t dev_free;
	/* expected */
	int rc;
	const char *msg[3]; /* in the refusal's message */
	uint64_t stage, read;
	unsigned nslots, n_read, n_stage, n_ring;
	uint64_t ring_bytes;
	unsigned qd;
	int in_place;
	uint64_t bspan;
	unsigned nbounce;
	uint64_t dev_bytes;
};

/* B = 32 x 784 bytes: a batch of 25088 bytes (98 x 256), a staging slot of
 * 28672 bytes; 1 MiB chunks, read slots of 1 MiB. */
#define S28 28672ull
static const struct row rows[] = {
	/* 4 staging slots, 63 reads; the bytes left (less than a read slot)
	 * give 12 more staging slots (RF_MEMPLAN_STAGE_DEEP in all). */
	{"cuda, 64 MiB, 100 chunks of 1 MiB", 32, 784, MIB, 100, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 79, 63, 16, 79, 63 * MIB + 16 * S28, 32, 0, 0, 0, 2 * 25088},
	{"host: in place, no device buffers", 32, 784, MIB, 100, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 1, 1, 8ull << 30,
	 0, {0}, S28, MIB, 81, 63, 18, 81, 63 * MIB + 18 * S28, 32, 1, 0, 0, 0},
	/* 10 chunks: reads up to io_depth + 2 (the next epoch's chunks). */
	{"reads capped at io_depth (32) + 2", 32, 784, MIB, 10, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 50, 34, 16, 50, 34 * MIB + 16 * S28, 32, 0, 0, 0, 2 * 25088},
	{"reads capped at the chunks (40) + 2", 32, 784, MIB, 40, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 58, 42, 16, 58, 42 * MIB + 16 * S28, 32, 0, 0, 0, 2 * 25088},
	/* One read slot and 4 staging: too few to lend depth 8 and one more. */
	{"host, ring too small to lend depth 8: copies", 32, 784, MIB, 100, MIB + 4 * S28, 8, 32,
	 0, 0, 0, 1, 0, 1, 1, 8ull << 30,
	 0, {0}, S28, MIB, 5, 1, 4, 5, MIB + 4 * S28, 1, 0, 0, 0, 8 * 25088},
	{"host, 4 MiB: staging lends depth 8", 32, 784, MIB, 100, 4 * MIB, 8, 32, 0,
	 0, 0, 1, 0, 1, 1, 8ull << 30,
	 0, {0}, S28, MIB, 27, 3, 24, 27, 3 * MIB + 24 * S28, 3, 1, 0, 0, 0},
	{"slots capped at 4096", 32, 784, MIB, 100000, 8192 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 0, 0,
	 0, {0}, S28, MIB, 4096, 4080, 16, 4096, 4080 * MIB + 16 * S28, 32, 0, 0, 0, 2 * 25088},
	{"pinned_bytes below a read and a staging slot", 32, 784, MIB, 100, MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 RF_EMEMPLAN, {"pinned_bytes 1.00 MiB cannot hold a read slot of 1.00 MiB (the largest "
		       "chunk read) and a staging slot of 28.0 KiB",
		       "24.5 KiB for batch_size 32", "raise pinned_bytes to at least 1077248 (1.03 "
		       "MiB) or repack the dataset in smaller chunks"}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"window W = 20 in 16 MiB", 32, 784, MIB, 100, 16 * MIB, 2, 32, 20,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 RF_EMEMPLAN, {"W = 20 chunks needs W + 2 = 22 read slots of 1.00 MiB (the largest chunk "
		       "read) and a staging slot of 28.0 KiB (a batch, 24.5 KiB for batch_size 32)",
		       "holds 15 read slots beside a staging one: raise pinned_bytes to 23097344 "
		       "(22.03 MiB; 23183360 (22.11 MiB) for 4 staging slots, full speed)",
		       "set window to a value from 1 to 13 on every rank"}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"window W = 13 in 16 MiB: small batches fit beside", 32, 784, MIB, 100, 16 * MIB, 2, 32,
	 13, 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 31, 15, 16, 31, 15 * MIB + 16 * S28, 15, 0, 0, 0, 2 * 25088},
	/* The window's reads come first: the staging share gives way (B =
	 * 1024: batches of 802816 bytes). */
	{"window W = 13 in 16 MiB: one staging slot", 1024, 784, MIB, 100, 16 * MIB, 2, 32, 13,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, 802816, MIB, 16, 15, 1, 16, 15 * MIB + 802816, 15, 0, 0, 0, 2 * 802816},
	{"window W = 11 in 16 MiB: three staging slots", 1024, 784, MIB, 100, 16 * MIB, 2, 32, 11,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, 802816, MIB, 16, 13, 3, 16, 13 * MIB + 3 * 802816, 13, 0, 0, 0, 2 * 802816},
	/* Batches larger than chunks: read slots stay a chunk's size. */
	{"window W = 2, batches larger than chunks", 32, 784, 4096, 100, 4 * S28, 2, 32, 2,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, 4096, 16, 14, 2, 16, 14 * 4096 + 2 * S28, 14, 0, 0, 0, 2 * 25088},
	{"window W = 2: the staging slot does not fit", 32, 784, 4096, 100, 4 * 4096 + 20000, 2,
	 32, 2, 0, 0, 1, 0, 0, 1, 8ull << 30,
	 RF_EMEMPLAN, {"W + 2 = 4 read slots of 4.0 KiB (the largest chunk read) and a staging "
		       "slot of 28.0 KiB (a batch, 24.5 KiB for batch_size 32)",
		       "raise pinned_bytes to 45056", "lower batch_size to 20 or less"},
	 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"window W = 20 in 32 MiB", 32, 784, MIB, 100, 32 * MIB, 2, 32, 20,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 47, 31, 16, 47, 31 * MIB + 16 * S28, 31, 0, 0, 0, 2 * 25088},
	/* 20 MiB chunks, batches of 32 x 150 KiB (4915200 bytes), W = 6 in
	 * 256 MiB: 11 reads (5 past the window and the one beside it) and 7
	 * staging; slots of one size (the chunk's) gave 8 and 4. */
	{"window, chunks 4x the batch", 32, 153600, 20 * MIB, 100, 256 * MIB, 2, 32, 6,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 0, {0}, 4915200, 20 * MIB, 18, 11, 7, 18, 11 * 20 * MIB + 7 * 4915200ull, 11, 0, 0, 0,
	 2 * 4915200},
	{"device without the free memory", 32, 784, MIB, 100, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 40000,
	 RF_EMEMPLAN, {"device buffers need 49.0 KiB (depth 2 x batch 24.5 KiB for batch_size 32)",
		       "test-device has only 39.1 KiB free", "lower batch_size or depth"}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"device free memory unknown: not checked", 32, 784, MIB, 100, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 0, 40000,
	 0, {0}, S28, MIB, 79, 63, 16, 79, 63 * MIB + 16 * S28, 32, 0, 0, 0, 2 * 25088},
	{"map: the ring is the staging slots, a batch each", 32, 784, MIB, 100, 64 * MIB, 2, 32,
	 0, 0, 1, 0, 0, 0, 1, 8ull << 30,
	 0, {0}, S28, MIB, 79, 63, 16, 16, 16 * S28, 32, 0, 0, 0, 2 * 25088},
	{"full, O_DIRECT, checksums: bounce areas", 32, 784, MIB, 100, MIB, 2, 32, 0,
	 1, 0, 1, 1, 0, 1, 8ull << 30,
	 0, {0}, S28, 0, 36, 0, 25, 36, 36 * S28, 32, 0, 8192, 11, 2 * 25088},
	{"full, buffered: no bounce", 32, 784, MIB, 100, MIB, 2, 32, 0,
	 1, 0, 0, 1, 0, 1, 8ull << 30,
	 0, {0}, S28, 0, 36, 0, 36, 36, 36 * S28, 32, 0, 0, 0, 2 * 25088},
	{"full, two slots: no room for bounce areas", 32, 784, MIB, 100, 2 * S28, 2, 32, 0,
	 1, 0, 1, 1, 0, 1, 8ull << 30,
	 RF_EMEMPLAN, {"pinned_bytes 57344 holds 2 slots of 28672 bytes",
		       "shuffle full with O_DIRECT reads needs at least 3",
		       "raise pinned_bytes to at least 86016"}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"a batch too large to size", 32, 0, MIB, 100, 64 * MIB, 2, 32, 0,
	 0, 0, 1, 0, 0, 1, 8ull << 30,
	 RF_EMEMPLAN, {"a batch of 32 samples is too large: lower batch_size", 0, 0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

static int failures;

#define EXPECT(c, r)                                                                     \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "%s: check failed: %s\n", (r)->what, #c);       \
			failures++;                                                      \
		}                                                                        \
	} while (0)

static void
layout_of(const struct row *r, rf_batch_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->batch = r->B;
	l->nparts = 1;
	l->part[0].field = 0;
	l->part[0].kind = RF_PART_COPY;
	l->part[0].value_bytes = r->V;
	l->part[0].cap = r->V * r->B;
	l->bytes = RF_ALIGN_UP(r->V * r->B, RF_BATCH_ALIGN);
	if (r->V == 0) /* a batch whose slot size overflows */
		l->bytes = UINT64_MAX - (RF_BATCH_ALIGN - 1);
}

static int
same(const struct rf_memplan *a, const struct rf_memplan *b)
{
	return a->stage_bytes == b->stage_bytes && a->read_bytes == b->read_bytes &&
	       a->nslots == b->nslots && a->n_read == b->n_read && a->n_stage == b->n_stage &&
	       a->n_ring == b->n_ring && a->ring_bytes == b->ring_bytes && a->qd == b->qd &&
	       a->in_place == b->in_place && a->bspan == b->bspan && a->nbounce == b->nbounce &&
	       a->dev_bytes == b->dev_bytes && a->decode_bytes == b->decode_bytes;
}

static void
run(const struct row *r)
{
	rf_batch_layout l;
	layout_of(r, &l);
	struct rf_memplan_in in = {
		.layout = &l,
		.nfields = 1,
		.max_span = r->span,
		.nchunks = r->nchunks,
		.pinned_bytes = r->pinned,
		.batch_size = r->B,
		.depth = r->depth,
		.io_depth = r->io_depth,
		.window = r->window,
		.full = r->full,
		.map = r->map,
		.direct = r->direct,
		.sums = r->sums,
		.host_memory = r->host,
		.dev_free_known = r->free_known,
		.dev_free = r->dev_free,
		.dev_desc = "test-device",
	};
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	struct rf_memplan mp, again;
	memset(&mp, 0xa5, sizeof mp);
	struct rf_memplan untouched = mp;
	int before = failures;
	int rc = rf_memplan_compute(&in, &mp, &d);
	EXPECT(rc == r->rc, r);
	if (rc != r->rc)
		fprintf(stderr, "%s: rc %d (%s)\n", r->what, rc, d.msg);
	if (r->rc) {
		EXPECT(same(&mp, &untouched), r);
		for (int i = 0; i < 3 && r->msg[i]; i++) {
			EXPECT(strstr(d.msg, r->msg[i]) != NULL, r);
			if (!strstr(d.msg, r->msg[i]))
				fprintf(stderr, "%s: \"%s\" not in \"%s\"\n", r->what, r->msg[i], d.msg);
		}
		return;
	}
	EXPECT(mp.stage_bytes == r->stage, r);
	EXPECT(mp.read_bytes == r->read, r);
	EXPECT(mp.nslots == r->nslots, r);
	EXPECT(mp.n_read == r->n_read, r);
	EXPECT(mp.n_stage == r->n_stage, r);
	EXPECT(mp.n_ring == r->n_ring, r);
	EXPECT(mp.ring_bytes == r->ring_bytes, r);
	EXPECT(mp.qd == r->qd, r);
	EXPECT(mp.in_place == r->in_place, r);
	EXPECT(mp.bspan == r->bspan, r);
	EXPECT(mp.nbounce == r->nbounce, r);
	EXPECT(mp.dev_bytes == r->dev_bytes, r);
	/* Invariants of every plan. */
	EXPECT(mp.ring_bytes <= r->pinned, r);
	EXPECT(mp.n_stage * mp.stage_bytes + mp.n_read * mp.read_bytes <= r->pinned, r);
	EXPECT(r->full || mp.n_read >= (r->window ? r->window + 2 : 1), r);
	EXPECT(mp.nslots <= RF_MEMPLAN_SLOTS_MAX, r);
	EXPECT(r->full ? mp.n_read == 0 : mp.n_read + mp.n_stage == mp.nslots, r);
	EXPECT(!mp.in_place || mp.n_stage >= r->depth + 1, r);
	if (failures != before)
		fprintf(stderr, "%s: stage %" PRIu64 " read %" PRIu64 " nslots %u read %u stage %u "
			"ring %u, %" PRIu64 " bytes qd %u in_place %d bspan %" PRIu64 " nbounce %u "
			"dev %" PRIu64 "\n", r->what, mp.stage_bytes, mp.read_bytes, mp.nslots,
			mp.n_read, mp.n_stage, mp.n_ring, mp.ring_bytes, mp.qd, mp.in_place, mp.bspan,
			mp.nbounce, mp.dev_bytes);
	/* Pure: the same inputs, the same plan. */
	memset(&again, 0, sizeof again);
	EXPECT(rf_memplan_compute(&in, &again, &d) == 0, r);
	EXPECT(same(&mp, &again), r);
}

/* Decoded images (rf_config.images): the decode workers' chunk buffers,
 * over the inputs of rows[0]; the ring's plan is unchanged by them. */
static const struct irow {
	const char *what;
	uint32_t workers;
	uint64_t wbytes;
	int rc;
	uint64_t decode_bytes;
	const char *msg[3];
} irows[] = {
	{"images: 4 workers x a chunk of 64 decoded 224x224x3", 4, 64 * 150528, 0,
	 4 * 64 * 150528, {0}},
	{"images: 16 workers x 256 MiB, exactly the limit", 16, 256 * MIB, 0, 4096 * MIB, {0}},
	{"images: 16 workers x 300 MiB", 16, 300 * MIB, RF_EMEMPLAN, 0,
	 {"16 decode workers x 300.00 MiB of decoded images", "is more than 4.00 GiB",
	  "pack the images in smaller chunks (`ringfeed pack --chunk-bytes`)"}},
	{"images: a product that overflows", 1u << 20, UINT64_MAX / 2, RF_EMEMPLAN, 0,
	 {"more than 4.00 GiB", 0, 0}},
};

static void
run_images(const struct irow *r)
{
	rf_batch_layout l;
	layout_of(&rows[0], &l);
	struct rf_memplan_in in = {.layout = &l, .nfields = 1, .max_span = MIB, .nchunks = 100,
				   .pinned_bytes = 64 * MIB, .batch_size = 32, .depth = 2,
				   .io_depth = 32, .direct = 1, .dev_desc = "test-device",
				   .workers = r->workers, .worker_bytes = r->wbytes,
				   .worker_scratch = 263 * MIB};
	struct rf_memplan_in plain = in; /* the same workers, no images */
	plain.worker_bytes = plain.worker_scratch = 0;
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	struct rf_memplan mp, base;
	memset(&mp, 0xa5, sizeof mp);
	struct rf_memplan untouched = mp;
	int rc = rf_memplan_compute(&in, &mp, &d);
	if (rc != r->rc) {
		fprintf(stderr, "%s: rc %d (%s)\n", r->what, rc, d.msg);
		failures++;
		return;
	}
	if (rc) {
		if (!same(&mp, &untouched))
			failures++;
		for (int i = 0; i < 3 && r->msg[i]; i++)
			if (!strstr(d.msg, r->msg[i])) {
				fprintf(stderr, "%s: \"%s\" not in \"%s\"\n", r->what, r->msg[i], d.msg);
				failures++;
			}
		return;
	}
	if (mp.decode_bytes != r->decode_bytes) {
		fprintf(stderr, "%s: decode_bytes %" PRIu64 "\n", r->what, mp.decode_bytes);
		failures++;
	}
	if (rf_memplan_compute(&plain, &base, &d) != 0 || base.nslots != mp.nslots ||
	    base.ring_bytes != mp.ring_bytes || base.n_stage != mp.n_stage ||
	    base.decode_bytes != 0) {
		fprintf(stderr, "%s: the ring's plan changed\n", r->what);
		failures++;
	}
	char line[512], want[256];
	rf_memplan_describe(&in, &mp, line, sizeof line);
	char a[32];
	rf_memplan_fmt_size(a, sizeof a, r->decode_bytes);
	snprintf(want, sizeof want, "; decode %s = %u workers x %" PRIu64 " bytes of decoded "
		 "images, and a decoder scratch each that grows as images need, to at most "
		 "263.00 MiB", a, r->workers, r->wbytes);
	if (!strstr(line, want)) {
		fprintf(stderr, "%s: describe \"%s\"\n   lacks \"%s\"\n", r->what, line, want);
		failures++;
	}
}

int
main(void)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(&rows[i]);
	for (size_t i = 0; i < sizeof(irows) / sizeof(irows[0]); i++)
		run_images(&irows[i]);

	/* The process's default budget (lean): only the slots the loader runs
	 * at full speed with, whatever the budget: reads in flight (io_depth,
	 * at most the chunks past the window), W and the two beside it, and
	 * depth + 2 staged batches plus depth lent in place. */
	{
		rf_batch_layout ll;
		layout_of(&rows[0], &ll);
		static const struct {
			uint64_t nchunks;
			uint32_t window;
			unsigned n_read, n_stage;
		} lean[] = {{100, 0, 34, 6}, {10, 0, 12, 6}, {10, 8, 12, 6}, {8, 8, 11, 6}};
		for (size_t i = 0; i < sizeof(lean) / sizeof(lean[0]); i++)
			for (uint64_t budget = 64 * MIB; budget <= 256 * MIB; budget *= 4) {
				struct rf_memplan_in li = {
					.layout = &ll, .nfields = 1, .max_span = MIB,
					.nchunks = lean[i].nchunks, .pinned_bytes = budget,
					.lean = 1, .batch_size = 32, .depth = 2, .io_depth = 32,
					.window = lean[i].window, .direct = 1, .host_memory = 1,
					.dev_desc = "test-device"};
				rf_diag ld;
				rf_diag_init(&ld, NULL, NULL);
				struct rf_memplan lp;
				int ok = rf_memplan_compute(&li, &lp, &ld) == 0 &&
					 lp.n_read == lean[i].n_read && lp.n_stage == lean[i].n_stage &&
					 lp.in_place && lp.n_read >= lean[i].window + 2;
				if (!ok) {
					fprintf(stderr, "lean %zu (%" PRIu64 " MiB): read %u stage %u (%s)\n",
						i, budget >> 20, lp.n_read, lp.n_stage, ld.msg);
					failures++;
				}
			}
	}

	/* Full shuffling on the default budget: four batches being read or
	 * filled, depth + 2 staged, depth lent in place (buffered: no bounce
	 * areas), whatever the budget beyond them. */
	{
		rf_batch_layout fl;
		layout_of(&rows[0], &fl);
		struct rf_memplan_in fi = {.layout = &fl, .nfields = 1, .max_span = MIB,
					   .nchunks = 100, .pinned_bytes = 64 * MIB, .lean = 1,
					   .batch_size = 32, .depth = 2, .io_depth = 32, .full = 1,
					   .host_memory = 1, .dev_desc = "test-device"};
		rf_diag fd;
		rf_diag_init(&fd, NULL, NULL);
		struct rf_memplan fp;
		if (rf_memplan_compute(&fi, &fp, &fd) != 0 || fp.nslots != 10 || fp.n_stage != 10 ||
		    !fp.in_place) {
			fprintf(stderr, "full, lean: nslots %u stage %u (%s)\n", fp.nslots, fp.n_stage,
				fd.msg);
			failures++;
		}
	}

	/* A window shuffled from memory is planned as full is, and its
	 * refusal names it and the exact budget that opens. */
	{
		rf_batch_layout wl;
		layout_of(&rows[0], &wl);
		struct rf_memplan_in wi = {.layout = &wl, .nfields = 1, .max_span = MIB,
					   .nchunks = 100, .pinned_bytes = 40000, .batch_size = 32,
					   .depth = 2, .io_depth = 32, .full = 1, .full_window = 1,
					   .dev_desc = "test-device"};
		rf_diag wd;
		rf_diag_init(&wd, NULL, NULL);
		struct rf_memplan wp;
		if (rf_memplan_compute(&wi, &wp, &wd) != RF_EMEMPLAN ||
		    !strstr(wd.msg, "window shuffling from memory needs at least 2: raise "
				    "pinned_bytes to at least 57344 (56.0 KiB)")) {
			fprintf(stderr, "window from memory: %s\n", wd.msg);
			failures++;
		}
		wi.pinned_bytes = 57344;
		if (rf_memplan_compute(&wi, &wp, &wd) != 0) {
			fprintf(stderr, "window from memory, 57344: %s\n", wd.msg);
			failures++;
		}
	}

	/* The log line of the first plan. */
	rf_batch_layout l;
	layout_of(&rows[0], &l);
	struct rf_memplan_in in = {.layout = &l, .nfields = 1, .max_span = MIB, .nchunks = 100,
				   .pinned_bytes = 64 * MIB, .batch_size = 32, .depth = 2,
				   .io_depth = 32, .direct = 1, .dev_desc = "test-device"};
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	struct rf_memplan mp;
	char line[512];
	if (rf_memplan_compute(&in, &mp, &d) == 0) {
		rf_memplan_describe(&in, &mp, line, sizeof line);
		const char *want = "memory plan: pinned 63.44 MiB = 63 read slots of 1048576 bytes "
				   "and 16 staging slots of 28672 bytes; device 49.0 KiB = 2 x 25088 "
				   "bytes";
		if (strcmp(line, want)) {
			fprintf(stderr, "describe: \"%s\"\n   want \"%s\"\n", line, want);
			failures++;
		}
	} else {
		failures++;
	}
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
