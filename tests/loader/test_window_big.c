/* SPDX-License-Identifier: MIT */
/*
 * Description: window shuffling with the default window over large
 * samples packed with the writer's default chunks (1 MiB samples, 20 a
 * chunk; 30 MiB samples, one a chunk) opens on the default pinned budget
 * (pinned_bytes 0, the Python loader's depth 3 and the C default depth 2)
 * and on an explicit 256 MiB (ringfeed bench's), reads with O_DIRECT
 * (where the window holds its chunks in read slots), and delivers every
 * sample once per epoch, for two epochs.  The default W is the dataset's
 * alone: the same whatever the budget.  A batch that makes the slots too
 * large for the window fails at open naming the pinned_bytes, batch_size
 * and window that would hold it.
 */
#include <inttypes.h>

#include "lt.h"

#define MIB (1ull << 20)

static char dir[256];

static void
fill_byte(uint64_t g, uint8_t *v, uint64_t len)
{
	memset(v, (int)(g * 7 + 1) & 0xff, len);
}

/* n samples: x u8 [value] and y i64 = g, in the writer's default chunks. */
static int
pack(const char *name, uint64_t value, uint64_t n)
{
	return lt_pack_u8(dir, name, "x", value, 1, n, 0, fill_byte);
}

/* Two epochs of dataset `name` (n samples of `value` bytes) shuffled by
 * the default window: every sample once per epoch, with its own bytes,
 * and the W in force `w`. */
static void
epochs(const char *name, uint64_t value, uint64_t n, uint32_t batch, uint32_t depth,
       uint64_t pinned, uint32_t w)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, name);
	cfg.batch_size = batch;
	cfg.depth = depth;
	cfg.pinned_bytes = pinned;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = 0;
	cfg.direct = 1;
	cfg.epochs = 2;
	cfg.seed = 7;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s batch %u depth %u pinned %" PRIu64 ": open: %s\n", name, batch,
			depth, pinned, rf_loader_last_open_error());
		lt_failures++;
		return;
	}
	rf_stats st = {.size = sizeof(st)};
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	if (st.window != w) {
		fprintf(stderr, "%s: W %u, expected %u\n", name, st.window, w);
		lt_failures++;
	}
	LT_CHECK(st.io_direct == 1);
	LT_CHECK(st.pinned_bytes <= (pinned ? pinned : RF_PINNED_DEFAULT));
	uint32_t *seen = calloc(2 * n, sizeof(*seen));
	int64_t *y = malloc(batch * sizeof(*y));
	const rf_batch *b;
	uint64_t orderly = 0, got = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->epoch < 2 && b->nfields == 2);
		if (b->epoch >= 2 || rf_batch_field_read(b, 1, y, batch * sizeof(*y)) != 0) {
			lt_failures++;
			rf_loader_release(ld, b, NULL);
			break;
		}
		const uint8_t *xs = b->fields[0].data;
		for (uint32_t i = 0; i < b->samples; i++, got++) {
			if (y[i] < 0 || (uint64_t)y[i] >= n) {
				lt_failures++;
				continue;
			}
			seen[b->epoch * n + (uint64_t)y[i]]++;
			orderly += (uint64_t)y[i] == got % n;
			/* The sample's own bytes, first, middle and last. */
			int c = (int)((uint64_t)y[i] * 7 + 1) & 0xff;
			const uint8_t *s = xs + (uint64_t)i * value;
			LT_CHECK(s[0] == c && s[value / 2] == c && s[value - 1] == c);
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	for (uint64_t e = 0; e < 2; e++)
		for (uint64_t g = 0; g < n; g++)
			if (seen[e * n + g] != 1) {
				fprintf(stderr, "%s epoch %" PRIu64 ": sample %" PRIu64 " delivered %u "
					"times\n", name, e, g, seen[e * n + g]);
				lt_failures++;
			}
	LT_CHECK(orderly < got); /* shuffled */
	free(seen);
	free(y);
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("window-big"));
	/* 1 MiB samples: 7 chunks of 20 (the default W before: 6, whose 8
	 * read slots and 5 staging ones outgrew 256 MiB); 30 MiB samples: 5
	 * chunks of one (W was 4: 6 reads and the staging in 8 slots). */
	const uint64_t v1 = MIB, n1 = 140, v30 = 30 * MIB, n30 = 5;
	if (pack("m1.rfs", v1, n1) || pack("m30.rfs", v30, n30)) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, "m1.rfs") == 0 && rf_dataset_chunks(ds) == 7);
	rf_dataset_close(&ds);
	for (int p = 0; p < 2; p++) {
		uint64_t pinned = p ? 256 * MIB : 0;
		for (uint32_t depth = 2; depth <= 3; depth++) {
			epochs("m1.rfs", v1, n1, 8, depth, pinned, 5);
			epochs("m1.rfs", v1, n1, 20, depth, pinned, 5);
			epochs("m30.rfs", v30, n30, 1, depth, pinned, 2);
		}
	}

	/* Batches larger than the chunks: read slots stay a chunk's size, so
	 * batches of two 30 MiB samples open with the default budget (4 read
	 * slots of 30 MiB and a staging slot of 60 MiB); batches of five do not,
	 * and the refusal names what to set. */
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "m30.rfs");
	cfg.log = NULL;
	cfg.batch_size = 2;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.direct = 1;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc == 0)
		rf_loader_close(&ld);
	cfg.batch_size = 5;
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EMEMPLAN);
	const char *msg = rf_loader_last_open_error();
	LT_CHECK(strstr(msg, "W = 2 chunks needs W + 2 = 4 read slots of 30.00 MiB (the largest "
			     "chunk read) and a staging slot of 150.00 MiB") != NULL);
	LT_CHECK(strstr(msg, "raise pinned_bytes to 283136000") != NULL);
	LT_CHECK(strstr(msg, "or lower batch_size to 4 or less, or set window to 1 on every rank") != NULL);
	if (lt_failures)
		fprintf(stderr, "%s\n", msg);
	/* And what it names opens. */
	cfg.window = 1;
	rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc == 0)
		rf_loader_close(&ld);

	lt_rmtree(dir);
	if (lt_failures) {
		fprintf(stderr, "test_window_big: %d failure(s)\n", lt_failures);
		return 1;
	}
	printf("test_window_big: ok\n");
	return 0;
}
