/* SPDX-License-Identifier: MIT */
/*
 * Description: the order depends only on its documented inputs.  Two ranks
 * of one job whose other settings differ (pinned_bytes, depth,
 * decode_threads, map against read calls, O_DIRECT against buffered) get
 * disjoint shares that together cover the epoch, in every shuffle mode,
 * with the default window, and report the same order id and window.  A
 * window the pinned ring cannot hold fails at open with RF_EMEMPLAN naming W
 * and the pinned bytes it needs, and those bytes are enough.  The order id
 * changes with the seed, the window, the batch size, the world size and
 * drop_last, and not with the rank or the epoch.  A window that holds
 * chunks (RINGFEED_WINDOW_HOLD=1) over buffered reads uses them where they
 * lie in maps of the shards (io engine "mmap"), with the same samples in
 * the same order as O_DIRECT read calls, and a flipped byte still fails the
 * stream with RF_ECHECKSUM.  Ranks may differ in the engine (from memory,
 * test_window_mem.c, or holding chunks).
 */
#include "lt.h"

static char dir[256];

/* Everything but the order's inputs: what differs between two ranks. */
struct knobs {
	uint64_t pinned;
	uint32_t depth, threads;
	int map, direct;
	const char *what;
};

static int
open_loader(rf_loader **ld, enum rf_shuffle mode, uint32_t window, uint64_t seed, int32_t rank,
	    int32_t world, uint32_t batch, int drop_last, uint64_t epoch, const struct knobs *k)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "w.rfs");
	cfg.batch_size = batch;
	cfg.drop_last = drop_last;
	cfg.epochs = 1;
	cfg.epoch = epoch;
	cfg.shuffle = mode;
	cfg.window = window;
	cfg.seed = seed;
	cfg.rank = rank;
	cfg.world = world;
	cfg.pinned_bytes = k->pinned;
	cfg.depth = k->depth;
	cfg.decode_threads = k->threads;
	cfg.map = k->map;
	cfg.direct = k->direct;
	return rf_loader_open(ld, &cfg);
}

static rf_stats
stats_of(rf_loader *ld)
{
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	return st;
}

/* One epoch of rank `rank`: marks hit[] (each sample once across ranks). */
static void
stream_share(enum rf_shuffle mode, int32_t rank, const struct knobs *k, uint8_t *hit, uint64_t n,
	     uint64_t *order_id, uint32_t *window)
{
	rf_loader *ld;
	int rc = open_loader(&ld, mode, 0, 7, rank, 2, 16, 1, 0, k);
	if (rc < 0) {
		fprintf(stderr, "mode %d, %s: open: %s\n", (int)mode, k->what,
			rf_loader_last_open_error());
		LT_CHECK(rc == 0);
		return;
	}
	rf_stats st = stats_of(ld);
	*order_id = st.order_id;
	*window = st.window;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(g < n);
			if (g < n) {
				if (hit[g])
					LT_CHECK(!"a sample delivered twice");
				hit[g]++;
			}
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	rf_loader_close(&ld);
}

static void
test_ranks(uint64_t n)
{
	/* Rank 0 runs `base`, rank 1 one of the others.  240 KiB holds the
	 * window of every chunk (40 of about 3.5 KiB) with a few slots to
	 * spare; an order sized from the budget would have been narrower. */
	static const struct knobs base = {240 << 10, 2, 1, 0, 0, "base"};
	static const struct knobs other[] = {
		{4 << 20, 2, 1, 0, 0, "pinned_bytes"},
		{240 << 10, 6, 1, 0, 0, "depth"},
		{240 << 10, 2, 3, 0, 0, "decode_threads"},
		{240 << 10, 2, 1, 1, 0, "map"},
		{240 << 10, 2, 1, 0, 1, "direct"},
		{4 << 20, 8, 2, 1, 0, "all of them"},
	};
	static const enum rf_shuffle modes[] = {RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS,
						RF_SHUFFLE_WINDOW, RF_SHUFFLE_FULL};
	uint8_t *hit = malloc(n);
	for (size_t m = 0; m < 4; m++) {
		for (size_t o = 0; o < sizeof other / sizeof other[0]; o++) {
			if (modes[m] == RF_SHUFFLE_FULL && other[o].map)
				continue; /* full mode reads samples, never maps */
			memset(hit, 0, n);
			uint64_t id0 = 0, id1 = 1;
			uint32_t w0 = 0, w1 = 1;
			stream_share(modes[m], 0, &base, hit, n, &id0, &w0);
			stream_share(modes[m], 1, &other[o], hit, n, &id1, &w1);
			uint64_t missing = 0;
			for (uint64_t g = 0; g < n; g++)
				missing += hit[g] == 0;
			if (missing)
				fprintf(stderr, "mode %d, ranks differing in %s: %llu samples never "
					"delivered\n", (int)modes[m], other[o].what,
					(unsigned long long)missing);
			LT_CHECK(missing == 0);
			LT_CHECK(id0 == id1 && id0 != 0);
			LT_CHECK(w0 == w1);
			LT_CHECK((modes[m] == RF_SHUFFLE_WINDOW) == (w0 != 0));
		}
	}
	free(hit);
}

/* Window shuffling over O_DIRECT reads, decode_threads left to the
 * library: two workers where two CPUs may run them (one checks the next
 * chunk while the other gathers), and the caller's count kept. */
static void
test_window_workers(void)
{
	static const struct knobs knob[] = {
		{240 << 10, 2, 0, 0, 1, "default"},
		{240 << 10, 2, 1, 0, 1, "one asked for"},
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	for (size_t i = 0; i < 2; i++) {
		rf_loader *ld;
		int rc = open_loader(&ld, RF_SHUFFLE_WINDOW, 0, 7, 0, 1, 16, 1, 0, &knob[i]);
		LT_CHECK(rc == 0);
		if (rc < 0)
			continue;
		rf_stats st = stats_of(ld);
		if (strcmp(st.io_engine, "io_uring") == 0 && st.io_direct) {
			if (knob[i].threads)
				LT_CHECK(st.decode_threads == knob[i].threads);
			else if (ncpu >= 2)
				LT_CHECK(st.decode_threads >= 2);
		}
		rf_loader_close(&ld);
	}
}

static void
test_memplan(void)
{
	/* The default window of this dataset is every chunk (40): 42 read
	 * slots.  64 KiB cannot hold it: refused, naming W and the bytes. */
	struct knobs k = {64 << 10, 2, 1, 0, 0, "small"};
	rf_loader *ld = NULL;
	int rc = open_loader(&ld, RF_SHUFFLE_WINDOW, 0, 1, 0, 1, 16, 1, 0, &k);
	LT_CHECK(rc == RF_EMEMPLAN);
	const char *msg = rf_loader_last_open_error();
	fprintf(stderr, "refused: %s\n", msg);
	LT_CHECK(strstr(msg, "W = 40") != NULL);
	const char *at = strstr(msg, "raise pinned_bytes to ");
	LT_CHECK(at != NULL);
	if (rc == 0)
		rf_loader_close(&ld);
	if (!at)
		return;
	uint64_t need = strtoull(at + strlen("raise pinned_bytes to "), NULL, 10);
	LT_CHECK(need > k.pinned);
	/* The bytes named are enough, for the same window. */
	k.pinned = need;
	rc = open_loader(&ld, RF_SHUFFLE_WINDOW, 0, 1, 0, 1, 16, 1, 0, &k);
	LT_CHECK(rc == 0);
	if (rc == 0) {
		LT_CHECK(stats_of(ld).window == 40);
		rf_loader_close(&ld);
	}
	/* An explicit window too. */
	k.pinned = 64 << 10;
	rc = open_loader(&ld, RF_SHUFFLE_WINDOW, 30, 1, 0, 1, 16, 1, 0, &k);
	LT_CHECK(rc == RF_EMEMPLAN);
	LT_CHECK(strstr(rf_loader_last_open_error(), "W = 30") != NULL);
	if (rc == 0)
		rf_loader_close(&ld);
}

static uint64_t
order_id(enum rf_shuffle mode, uint32_t window, uint64_t seed, int32_t rank, int32_t world,
	 uint32_t batch, int drop_last, uint64_t epoch, uint32_t *w)
{
	struct knobs k = {1 << 20, 2, 1, 0, 0, "id"};
	rf_loader *ld;
	int rc = open_loader(&ld, mode, window, seed, rank, world, batch, drop_last, epoch, &k);
	LT_CHECK(rc == 0);
	if (rc < 0)
		return 0;
	rf_stats st = stats_of(ld);
	if (w)
		*w = st.window;
	rf_loader_close(&ld);
	return st.order_id;
}

static void
test_order_id(void)
{
	for (int m = 0; m < 4; m++) {
		enum rf_shuffle mode = (enum rf_shuffle)m;
		uint32_t w = 0;
		uint64_t id = order_id(mode, 8, 5, 0, 2, 16, 1, 0, &w);
		LT_CHECK(id != 0);
		LT_CHECK(w == (mode == RF_SHUFFLE_WINDOW ? 8u : 0u));
		/* Not the rank, not the first epoch: the same on every rank. */
		LT_CHECK(order_id(mode, 8, 5, 1, 2, 16, 1, 0, NULL) == id);
		LT_CHECK(order_id(mode, 8, 5, 1, 2, 16, 1, 3, NULL) == id);
		LT_CHECK(order_id(mode, 8, 5, 0, 2, 17, 1, 0, NULL) != id);
		LT_CHECK(order_id(mode, 8, 5, 0, 1, 16, 1, 0, NULL) != id);
		LT_CHECK(order_id(mode, 8, 5, 0, 2, 16, 0, 0, NULL) != id);
		if (mode != RF_SHUFFLE_NONE) /* file order has no seed */
			LT_CHECK(order_id(mode, 8, 6, 0, 2, 16, 1, 0, NULL) != id);
		if (mode == RF_SHUFFLE_WINDOW) {
			LT_CHECK(order_id(mode, 9, 5, 0, 2, 16, 1, 0, NULL) != id);
			/* A window wider than the dataset is every chunk. */
			LT_CHECK(order_id(mode, 40, 5, 0, 2, 16, 1, 0, NULL) ==
				 order_id(mode, 1000, 5, 0, 2, 16, 1, 0, &w));
			LT_CHECK(w == 40);
		} else {
			LT_CHECK(order_id(mode, 9, 5, 0, 2, 16, 1, 0, NULL) == id);
		}
	}
	LT_CHECK(order_id(RF_SHUFFLE_CHUNKS, 8, 5, 0, 2, 16, 1, 0, NULL) !=
		 order_id(RF_SHUFFLE_WINDOW, 8, 5, 0, 2, 16, 1, 0, NULL));
}

/* One epoch of window shuffling, one rank: the samples in order, and the
 * io engine; the first error in *err. */
static uint64_t *
window_stream(const char *name, int direct, uint64_t n, char *engine, size_t cap, int *err)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, name);
	cfg.batch_size = 16;
	cfg.epochs = 1;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = 5;
	cfg.seed = 11;
	cfg.direct = direct;
	rf_loader *ld;
	*err = rf_loader_open(&ld, &cfg);
	if (*err < 0)
		return NULL;
	rf_stats st = stats_of(ld);
	snprintf(engine, cap, "%s", st.io_engine);
	uint64_t *order = calloc(n, sizeof *order), got = 0;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples && got < n; i++)
			order[got++] = lt_row_sample(b, i);
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	*err = rc;
	if (rc == 0)
		LT_CHECK(got == n);
	rf_loader_close(&ld);
	return order;
}

static void
test_window_maps(uint64_t n)
{
	char e_buf[32], e_dir[32];
	int rc_buf, rc_dir;
	uint64_t *o_buf = window_stream("w.rfs", 0, n, e_buf, sizeof e_buf, &rc_buf);
	uint64_t *o_dir = window_stream("w.rfs", 1, n, e_dir, sizeof e_dir, &rc_dir);
	LT_CHECK(rc_buf == 0 && rc_dir == 0);
	if (rc_buf == 0)
		LT_CHECK(strcmp(e_buf, "mmap") == 0);
	if (rc_dir == 0)
		LT_CHECK(strcmp(e_dir, "mmap") != 0);
	if (o_buf && o_dir)
		LT_CHECK(memcmp(o_buf, o_dir, n * sizeof *o_buf) == 0);
	free(o_buf);
	free(o_dir);

	/* A flipped byte in a chunk the window holds in the map. */
	LT_CHECK(lt_pack(dir, "flip", n, 0, 3500, 0, 0) == 0);
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, "flip.rfs") == 0);
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, 17, &ci) == 0);
	char shard[4096];
	snprintf(shard, sizeof shard, "%s", rf_dataset_shard_path(ds, ci.shard));
	rf_dataset_close(&ds);
	FILE *f = fopen(shard, "r+b");
	LT_CHECK(f != NULL);
	if (!f)
		return;
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	int c = fgetc(f);
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
	int rc;
	uint64_t *o = window_stream("flip.rfs", 0, n, e_buf, sizeof e_buf, &rc);
	LT_CHECK(rc == RF_ECHECKSUM);
	LT_CHECK(strcmp(e_buf, "mmap") == 0);
	free(o);
}

int
main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("window"));
	/* 4000 samples of 34 bytes in chunks of about 3.5 KiB (40 of them),
	 * uncompressed, fixed fields (full mode reads them too); 4000 is 125
	 * global batches of 2 x 16. */
	const uint64_t n = 4000;
	LT_CHECK(lt_pack(dir, "w", n, 0, 3500, 0, 0) == 0);
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, "w.rfs") == 0);
	LT_CHECK(rf_dataset_chunks(ds) == 40);
	rf_dataset_close(&ds);

	test_ranks(n);
	test_window_workers();
	/* The window that holds chunks (test_window_mem.c: from memory,
	 * where nothing is held). */
	setenv("RINGFEED_WINDOW_HOLD", "1", 1);
	test_memplan();
	test_order_id();
	test_window_maps(n);

	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
