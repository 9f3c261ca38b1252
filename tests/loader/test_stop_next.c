/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_loader_next after rf_loader_stop is the end of the
 * stream (0 with the batch NULL, on every later call, from next, try_next
 * and next_timeout alike, batches made ready before the stop included), in
 * file order and in full shuffling from memory; after a stream that had
 * failed (a checksum), the stop keeps that error.  A batch held across the
 * stop is intact and released; state_save still works, state_load and
 * rewind are RF_EUSAGE naming the stop; close after all of it is clean.
 */
#include "lt.h"

static char dir[256];

static rf_loader *
open_one(const char *name, enum rf_shuffle shuffle, int map)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, name);
	cfg.shuffle = shuffle;
	cfg.seed = 3;
	cfg.batch_size = 16;
	cfg.depth = 4;
	cfg.map = map;
	cfg.verify = 1;
	cfg.pinned_bytes = 1 << 20;
	return lt_open(&cfg);
}

/* Every way of asking for a batch says the stream has ended, with code. */
static void
check_ended(rf_loader *ld, int code)
{
	for (int i = 0; i < 2; i++) {
		const rf_batch *b = (const rf_batch *)1;
		LT_CHECK(rf_loader_next(ld, &b) == code && !b);
		b = (const rf_batch *)1;
		LT_CHECK(rf_loader_try_next(ld, &b) == code && !b);
		b = (const rf_batch *)1;
		LT_CHECK(rf_loader_next_timeout(ld, &b, 1000000u) == code && !b);
		b = (const rf_batch *)1;
		LT_CHECK(rf_loader_next_timeout(ld, &b, 0) == code && !b);
	}
}

static void
test_stop(enum rf_shuffle shuffle, int map)
{
	rf_loader *ld = open_one("d.rfs", shuffle, map);
	if (!ld)
		return;
	const rf_batch *b = NULL;
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
	uint64_t first = b ? b->first_sample : 0;
	/* Batches ready behind it when the stop comes. */
	usleep(100000);
	uint8_t st[RF_STATE_MAX];
	size_t len = 0;
	LT_CHECK(rf_loader_state_save(ld, st, sizeof(st), &len) == 0);
	rf_loader_stop(ld);
	check_ended(ld, 0);
	if (b && shuffle == RF_SHUFFLE_NONE)
		LT_CHECK(lt_check_batch(b, first) == 0);
	size_t len2 = 0;
	uint8_t st2[RF_STATE_MAX];
	LT_CHECK(rf_loader_state_save(ld, st2, sizeof(st2), &len2) == 0);
	LT_CHECK(len2 == len && memcmp(st, st2, len) == 0);
	if (b)
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	LT_CHECK(rf_loader_state_load(ld, st, len) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "rf_loader_stop") != NULL);
	LT_CHECK(rf_loader_rewind(ld, 0) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "stopped") != NULL);
	check_ended(ld, 0);
	rf_stats s = {.size = sizeof(rf_stats)};
	LT_CHECK(rf_loader_stats(ld, &s) == 0 && s.batches == 1 && s.held == 0);
	rf_loader_stop(ld); /* a no-op the second time */
	check_ended(ld, 0);
	rf_loader_close(&ld);
}

/* A stream stopped by a checksum: the stop keeps the error. */
static void
test_stop_after_error(void)
{
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, "bad.rfs") == 0);
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, 2, &ci) == 0);
	rf_dataset_close(&ds);
	lt_flip_byte(dir, "bad.rfs", ci.offset + 10, 0x40);
	rf_loader *ld = open_one("bad.rfs", RF_SHUFFLE_NONE, 0);
	if (!ld)
		return;
	const rf_batch *b = NULL;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b)
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	LT_CHECK(rc == RF_ECHECKSUM);
	rf_loader_stop(ld);
	check_ended(ld, RF_ECHECKSUM);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "chunk 2") != NULL);
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("stop-next"));
	LT_CHECK(lt_pack(dir, "d", 3000, 0, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "bad", 3000, 0, 4096, 0, 0) == 0);
	test_stop(RF_SHUFFLE_NONE, 0);
	test_stop(RF_SHUFFLE_NONE, 1);
	test_stop(RF_SHUFFLE_CHUNKS, 0);
	test_stop(RF_SHUFFLE_WINDOW, 0);
	test_stop(RF_SHUFFLE_FULL, 1);
	test_stop_after_error();
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
