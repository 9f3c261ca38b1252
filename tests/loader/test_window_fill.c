/* SPDX-License-Identifier: MIT */
/*
 * Description: the window's parallel fill.  Over O_DIRECT reads with
 * several decode workers, a turn notes its copies from the chunks the
 * window holds and makes them after the turn has passed on, while a later
 * turn may let go of those chunks: their read slots must not be read
 * again before the copies are made.  Streams a dataset of many small
 * chunks, a small window and a small pinned budget (slots come back and
 * are read into at once), three epochs, with one worker and with two and
 * four, and checks that every row holds its sample's values, that the
 * order is the same whatever the workers, that copies were made after the
 * turn (the loader's counters) and every delivered byte copied once; and
 * that a flipped byte in one chunk still ends the stream with
 * RF_ECHECKSUM, every batch before it whole.
 */
#include "lt.h"

#include "loader/internal.h"

#define N 6000
#define EPOCHS 3

static char dir[256];

struct run {
	uint64_t *order;   /* sample of each row, in delivery order */
	size_t rows;
	uint64_t parallel, filled;
	int rc;
	int direct;
};

static void
stream(uint32_t threads, uint32_t window, struct run *r)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, "wf.rfs");
	cfg.batch_size = 32;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = window;
	cfg.seed = 11;
	cfg.epochs = EPOCHS;
	cfg.direct = 1;
	cfg.decode_threads = threads;
	cfg.pinned_bytes = 256 << 10;
	cfg.fields = (const char *[]){"x", "y", "img"};
	cfg.nfields = 3;
	memset(r, 0, sizeof(*r));
	r->order = calloc((size_t)N * EPOCHS, sizeof(*r->order));
	rf_loader *ld = lt_open(&cfg);
	if (!ld || !r->order)
		return;
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	r->direct = st.io_direct;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			if (!lt_row_ok(b, i, g)) {
				fprintf(stderr, "threads %u window %u: row %zu (sample %llu) "
					"holds another sample's values\n", threads, window,
					r->rows, (unsigned long long)g);
				LT_CHECK(!"a row with wrong values");
			}
			if (r->rows < (size_t)N * EPOCHS)
				r->order[r->rows++] = g;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	r->rc = rc;
	rf_loader_stop(ld); /* the threads joined: the counters are final */
	r->parallel = atomic_load(&ld->stats.fill_bytes_parallel);
	r->filled = atomic_load(&ld->stats.fill_bytes);
	rf_loader_close(&ld);
}

static void
test_stream(uint32_t window)
{
	struct run one, many;
	stream(1, window, &one);
	LT_CHECK(one.rc == 0 && one.rows == (size_t)N * EPOCHS);
	LT_CHECK(one.parallel == 0);
	for (uint32_t t = 2; t <= 4; t += 2) {
		stream(t, window, &many);
		LT_CHECK(many.rc == 0 && many.rows == one.rows);
		LT_CHECK(memcmp(many.order, one.order, one.rows * sizeof(*one.order)) == 0);
		/* Copies after the turn, each delivered byte once (x 6, y 8,
		 * img 20 bytes a sample). */
		LT_CHECK(many.parallel > 0);
		LT_CHECK(many.filled == (uint64_t)many.rows * (6 + 8 + 20));
		fprintf(stderr, "window %u, %u workers: %zu rows, %llu of %llu bytes copied "
			"after the turn\n", window, t, many.rows,
			(unsigned long long)many.parallel, (unsigned long long)many.filled);
		free(many.order);
	}
	free(one.order);
}

/* A flipped byte in a chunk of the middle: the stream ends with
 * RF_ECHECKSUM, and every row before it holds its sample's values. */
static void
test_flip(void)
{
	const char *paths[] = {NULL};
	char path[512];
	snprintf(path, sizeof path, "%s/wf.rfs", dir);
	paths[0] = path;
	rf_dataset *ds;
	LT_CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, rf_dataset_chunks(ds) / 2, &ci) == 0);
	rf_dataset_close(&ds);
	lt_flip_byte(dir, "wf.rfs", ci.offset + ci.stored_bytes / 2, 0x10);
	struct run r;
	stream(2, 4, &r);
	LT_CHECK(r.rc == RF_ECHECKSUM);
	LT_CHECK(r.rows < (size_t)N);
	free(r.order);
	lt_flip_byte(dir, "wf.rfs", ci.offset + ci.stored_bytes / 2, 0x10);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("wfill"));
	/* ~100 samples of 34 bytes a chunk: 60 chunks of about 3.5 KiB. */
	LT_CHECK(lt_pack(dir, "wf", N, 0, 3500, 0, 0) == 0);
	struct run probe;
	stream(2, 4, &probe);
	free(probe.order);
	if (lt_failures == 0 && !probe.direct) {
		fprintf(stderr, "no O_DIRECT reads here: skipped\n");
		lt_rmtree(dir);
		return 77;
	}
	/* A copy from a slot read into again shows only when the threads
	 * meet so: a few rounds. */
	for (int round = 0; round < 4; round++)
		test_stream(4);
	test_stream(0);
	test_flip();
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
