/* SPDX-License-Identifier: MIT */
/*
 * Description: the resume state blob is refused with RF_ESTATE and a message
 * when it is corrupt (any single bit flipped, truncated, extended, bad magic,
 * version or size, even with a recomputed checksum), from another dataset
 * (fingerprint, sample or chunk count), for another global batch, or at a
 * position that is not a batch boundary; a refused load leaves the plan as it
 * was; a short buffer on save gives -ENOSPC with the needed length.
 */
#include <errno.h>
#include <xxhash.h>

#include "plan_test.h"

static const uint32_t counts[] = {7, 3, 11, 1, 5, 9, 2, 13, 6, 4, 4, 8};
#define NCH (sizeof counts / sizeof counts[0])

static rf_plan *
plan_with(uint64_t fingerprint, uint32_t world, uint32_t batch, const uint32_t *cnt, uint64_t nch)
{
	rf_plan_params pp;
	rf_plan_params_init(&pp);
	pp.seed = 42;
	pp.epoch = 5;
	pp.fingerprint = fingerprint;
	pp.world = world;
	pp.batch = batch;
	pp.window = 4;
	pp.mode = RF_PLAN_WINDOW;
	return make_plan(&pp, cnt, nch);
}

static void
reseal(uint8_t *b)
{
	rf_put_le64(b + 88, XXH3_64bits(b, 88));
}

/* The load must fail with RF_ESTATE, leave a message, and leave the plan's
 * cursor and order as they were. */
static void
expect_refused(rf_plan *p, const uint8_t *blob, size_t len, const char *what)
{
	uint64_t cursor = rf_plan_tell(p);
	rf_plan_params before = *rf_plan_params_get(p);
	int rc = rf_plan_state_load(p, blob, len);
	CHECK_CONT_MSG(rc == RF_ESTATE, "%s: load gave %d (%s)", what, rc, rf_strerror(rc));
	CHECK_CONT_MSG(rf_plan_errmsg(p)[0] != '\0', "%s: no message", what);
	CHECK_CONT_MSG(rf_plan_tell(p) == cursor, "%s: cursor moved", what);
	CHECK_CONT_MSG(memcmp(&before, rf_plan_params_get(p), sizeof before) == 0, "%s: params changed", what);
	if (getenv("PLAN_TEST_VERBOSE"))
		printf("%s: %s\n", what, rf_plan_errmsg(p));
}

int
main(void)
{
	rf_plan *p = plan_with(0x1234, 2, 3, counts, NCH);
	rf_plan_item items[3];
	uint32_t n;
	rf_plan_next_batch(p, items, 3, &n);
	rf_plan_next_batch(p, items, 3, &n);
	uint8_t good[RF_PLAN_STATE_SIZE], b[RF_PLAN_STATE_SIZE + 16];
	size_t len = 0;
	CHECK_CONT_MSG(rf_plan_state_save(p, good, 10, &len) == -ENOSPC && len == RF_PLAN_STATE_SIZE,
	      "short buffer: len %zu", len);
	CHECK_CONT_MSG(rf_plan_state_save(p, good, sizeof good, &len) == 0 && len == RF_PLAN_STATE_SIZE, "save");
	CHECK_CONT_MSG(memcmp(good, "RFSTATE", 8) == 0, "magic");

	/* The target: another plan of the same dataset, moved somewhere. */
	rf_plan *t = plan_with(0x1234, 2, 3, counts, NCH);
	rf_plan_next_batch(t, items, 3, &n);
	CHECK_CONT_MSG(rf_plan_state_load(t, good, len) == 0, "good blob refused: %s", rf_plan_errmsg(t));
	CHECK_CONT_MSG(rf_plan_tell(t) == 2, "cursor %llu after load", (unsigned long long)rf_plan_tell(t));
	rf_plan_seek(t, 1);

	/* Every single bit flipped. */
	char what[64];
	for (size_t i = 0; i < RF_PLAN_STATE_SIZE * 8; i++) {
		memcpy(b, good, sizeof good);
		b[i / 8] ^= (uint8_t)(1u << (i % 8));
		snprintf(what, sizeof what, "bit %zu flipped", i);
		expect_refused(t, b, RF_PLAN_STATE_SIZE, what);
	}
	/* Every length but the right one. */
	memcpy(b, good, sizeof good);
	memset(b + sizeof good, 0, 16);
	for (size_t l = 0; l < sizeof b; l++) {
		if (l == RF_PLAN_STATE_SIZE)
			continue;
		snprintf(what, sizeof what, "length %zu", l);
		expect_refused(t, b, l, what);
	}
	expect_refused(t, NULL, 0, "NULL blob");

	/* Fields changed with a recomputed checksum: only the checks of the
	 * fields themselves stand in the way. */
	struct {
		size_t off;
		int width;
		uint64_t value;
		const char *what;
	} edits[] = {
		{8, 4, 3, "version 3"},
		{8, 4, 1, "version 1 in window mode (another window order)"},
		{12, 4, 104, "size 104"},
		{16, 8, 0x1235, "foreign fingerprint"},
		{48, 8, 77, "other sample count"},
		{56, 8, 13, "other chunk count"},
		{64, 4, 4, "mode 4"},
		{68, 4, 0, "window 0"},
		{72, 4, 0, "batch 0"},
		{72, 4, 2, "other global batch"},
		{76, 4, 0, "world 0"},
		{80, 4, 3, "tail 3"},
		{84, 4, 1, "reserved set"},
		{40, 8, 7, "position off a batch boundary"},
		{40, 8, 1000, "position past the end"},
	};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		memcpy(b, good, sizeof good);
		if (edits[i].width == 4)
			rf_put_le32(b + edits[i].off, (uint32_t)edits[i].value);
		else
			rf_put_le64(b + edits[i].off, edits[i].value);
		reseal(b);
		expect_refused(t, b, RF_PLAN_STATE_SIZE, edits[i].what);
	}
	/* Version 1 (the same layout) of a mode whose order did not change
	 * still loads. */
	memcpy(b, good, sizeof good);
	rf_put_le32(b + 8, 1);
	rf_put_le32(b + 64, RF_PLAN_CHUNKS);
	reseal(b);
	CHECK_CONT_MSG(rf_plan_state_load(t, b, RF_PLAN_STATE_SIZE) == 0, "version 1, chunks: %s",
	      rf_plan_errmsg(t));
	/* The resealed original still loads (the edits were what failed). */
	memcpy(b, good, sizeof good);
	reseal(b);
	CHECK_CONT_MSG(rf_plan_state_load(t, b, RF_PLAN_STATE_SIZE) == 0, "resealed original refused");

	/* Another dataset: other fingerprint; same fingerprint but other
	 * counts (a caller that passes 0 as fingerprint is still protected). */
	rf_plan *f = plan_with(0x9999, 2, 3, counts, NCH);
	expect_refused(f, good, len, "plan of another fingerprint");
	uint32_t other[NCH];
	memcpy(other, counts, sizeof other);
	other[3]++;
	rf_plan *o = plan_with(0x1234, 2, 3, other, NCH);
	expect_refused(o, good, len, "plan of other chunk sizes");
	/* Another global batch: 2 x 3 saved, 4 x 3 here; 3 x 2 is fine. */
	rf_plan *w = plan_with(0x1234, 4, 3, counts, NCH);
	expect_refused(w, good, len, "plan with another global batch");
	rf_plan *e = plan_with(0x1234, 3, 2, counts, NCH);
	CHECK_CONT_MSG(rf_plan_state_load(e, good, len) == 0, "elastic 2x3 -> 3x2 refused: %s", rf_plan_errmsg(e));
	CHECK_CONT_MSG(rf_plan_tell(e) == 2, "elastic cursor %llu", (unsigned long long)rf_plan_tell(e));

	/* save_at: a position in an earlier epoch, whatever the cursor. */
	uint8_t at[RF_PLAN_STATE_SIZE];
	CHECK_CONT_MSG(rf_plan_state_save_at(p, 4, 3, at, sizeof at, &len) == 0, "save_at");
	CHECK_CONT_MSG(rf_plan_state_save_at(p, 4, rf_plan_batches(p) + 1, at, sizeof at, &len) == -ERANGE,
	      "save_at past the end accepted");
	rf_plan_state_save_at(p, 4, 3, at, sizeof at, &len);
	rf_plan *a = plan_with(0x1234, 2, 3, counts, NCH);
	CHECK_CONT_MSG(rf_plan_state_load(a, at, len) == 0 && rf_plan_params_get(a)->epoch == 4 &&
	      rf_plan_tell(a) == 3, "save_at blob: epoch %llu batch %llu",
	      (unsigned long long)rf_plan_params_get(a)->epoch, (unsigned long long)rf_plan_tell(a));
	rf_plan *ref = plan_with(0x1234, 2, 3, counts, NCH);
	rf_plan_set_epoch(ref, 4);
	rf_plan_seek(ref, 3);
	rf_plan_item x[3], y[3];
	uint32_t nx, ny;
	for (int i = 0; i < 3; i++) {
		rf_plan_next_batch(a, x, 3, &nx);
		rf_plan_next_batch(ref, y, 3, &ny);
		CHECK_CONT_MSG(nx == ny && nx > 0 && memcmp(x, y, nx * sizeof *x) == 0, "save_at resumes elsewhere");
	}
	rf_plan_destroy(&a);
	rf_plan_destroy(&ref);

	rf_plan_destroy(&p);
	rf_plan_destroy(&t);
	rf_plan_destroy(&f);
	rf_plan_destroy(&o);
	rf_plan_destroy(&w);
	rf_plan_destroy(&e);
	CHECK_CONT_MSG(p == NULL, "destroy clears the handle");
	return test_result("test_plan_state");
}
