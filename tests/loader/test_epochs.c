/* SPDX-License-Identifier: MIT */
/*
 * Description: `epochs` means the same total whether or not a run resumes,
 * and rf_loader_rewind.  For file order and chunk, window and full
 * shuffling, a run of epochs 2..4 (epoch 2, epochs 3) saved after m batches
 * and resumed with the same settings (through rf_config.resume and through
 * rf_loader_state_load) delivers, concatenated, exactly the batches of the
 * uninterrupted run, for m at the start, inside the first and the second
 * epoch, at an epoch boundary and at the very end; a position outside the
 * run's epochs is RF_ESTATE.  rf_loader_rewind(ld, e) restarts epoch e (the
 * rest of the run follows, the end unchanged), also after the end of the
 * stream; it refuses an epoch outside the run (RF_EUSAGE) and a call with a
 * batch held (-EBUSY).  rf_strerror tells RF_EUSAGE from -EINVAL.
 */
#include <strings.h>

#include "lt.h"

static char dir[256];
static enum rf_shuffle mode;

#define EPOCH0 2
#define EPOCHS 3
#define BATCH 8
#define N 203 /* 26 batches an epoch, the last of 3 samples */

/* Each batch as its samples, then a marker naming its epoch. */
struct seq {
	uint64_t v[4 * (N + N / BATCH + 2)];
	size_t n;
};

static rf_loader *
open_run(uint64_t epoch, uint32_t epochs, const void *blob, size_t len)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "e-*.rfs");
	cfg.batch_size = BATCH;
	cfg.epoch = epoch;
	cfg.epochs = epochs;
	cfg.shuffle = mode;
	cfg.seed = 11;
	cfg.window = mode == RF_SHUFFLE_WINDOW ? 4 : 0;
	cfg.rank = 0;
	cfg.world = 1;
	cfg.pinned_bytes = 256 << 10;
	cfg.resume = blob;
	cfg.resume_len = len;
	rf_loader *ld = NULL;
	if (rf_loader_open(&ld, &cfg) < 0)
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
	return ld;
}

/* Take up to `batches` batches (SIZE_MAX: to the end); returns how many. */
static size_t
take(rf_loader *ld, size_t batches, struct seq *out)
{
	const rf_batch *b;
	size_t k = 0;
	for (; k < batches; k++) {
		int rc = rf_loader_next(ld, &b);
		LT_CHECK(rc == 0);
		if (rc || !b)
			break;
		int64_t y[BATCH];
		LT_CHECK(rf_batch_field_read(b, 1, y, sizeof(y)) == 0);
		for (uint32_t i = 0; i < b->samples; i++)
			out->v[out->n++] = (uint64_t)((y[i] + 5) / 1000003);
		out->v[out->n++] = UINT64_MAX - b->epoch;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	return k;
}

static int
same(const struct seq *a, size_t from, const struct seq *b)
{
	return a->n - from == b->n && memcmp(a->v + from, b->v, b->n * 8) == 0;
}

static void
test_mode(void)
{
	static struct seq ref, got, head;
	const size_t per_epoch = (N + BATCH - 1) / BATCH;
	ref.n = 0;
	rf_loader *ld = open_run(EPOCH0, EPOCHS, NULL, 0);
	LT_CHECK(ld != NULL);
	if (!ld)
		return;
	LT_CHECK(take(ld, SIZE_MAX, &ref) == EPOCHS * per_epoch);
	rf_loader_close(&ld);

	const size_t ms[] = {0, 5, per_epoch - 1, per_epoch, per_epoch + 9,
			     EPOCHS * per_epoch - 1, EPOCHS * per_epoch};
	for (size_t t = 0; t < sizeof(ms) / sizeof(ms[0]); t++) {
		int failures = lt_failures;
		uint8_t blob[RF_STATE_MAX];
		size_t len = 0;
		head.n = 0;
		ld = open_run(EPOCH0, EPOCHS, NULL, 0);
		LT_CHECK(take(ld, ms[t], &head) == ms[t]);
		LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
		rf_loader_close(&ld);

		/* The same settings, resumed at open: the rest of the run, and
		 * not a batch more. */
		got.n = 0;
		ld = open_run(EPOCH0, EPOCHS, blob, len);
		LT_CHECK(ld != NULL);
		if (!ld)
			continue;
		take(ld, SIZE_MAX, &got);
		LT_CHECK(same(&ref, head.n, &got));
		rf_loader_close(&ld);

		/* The same through rf_loader_state_load. */
		got.n = 0;
		ld = open_run(EPOCH0, EPOCHS, NULL, 0);
		LT_CHECK(rf_loader_state_load(ld, blob, len) == 0);
		take(ld, SIZE_MAX, &got);
		LT_CHECK(same(&ref, head.n, &got));
		rf_loader_close(&ld);

		/* A run whose epochs do not hold the position refuses it. */
		if (ms[t] > per_epoch) {
			LT_CHECK(open_run(EPOCH0, 1, blob, len) == NULL);
			LT_CHECK(strstr(rf_loader_last_open_error(), "outside") != NULL);
			ld = open_run(EPOCH0, 1, NULL, 0);
			LT_CHECK(rf_loader_state_load(ld, blob, len) == RF_ESTATE);
			rf_loader_close(&ld);
		}
		LT_CHECK(open_run(EPOCH0 + 3, 1, blob, len) == NULL);
		if (lt_failures > failures)
			fprintf(stderr, "mode %d: resume after %zu batches failed\n", (int)mode,
				ms[t]);
	}

	/* Rewind: after the end, to the first epoch: the whole run again. */
	ld = open_run(EPOCH0, EPOCHS, NULL, 0);
	got.n = 0;
	take(ld, SIZE_MAX, &got);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0) == 0);
	got.n = 0;
	take(ld, SIZE_MAX, &got);
	LT_CHECK(same(&ref, 0, &got));
	/* Mid-epoch, back to the start of the epoch it is in, and to a
	 * later one. */
	LT_CHECK(rf_loader_rewind(ld, EPOCH0 + 1) == 0);
	head.n = 0;
	take(ld, 7, &head);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0 + 1) == 0);
	got.n = 0;
	take(ld, SIZE_MAX, &got);
	size_t from = 0;
	for (size_t k = 0; k < per_epoch; from++)
		if (ref.v[from] > UINT64_MAX - 1000)
			k++;
	LT_CHECK(same(&ref, from, &got));
	/* Holding a batch; outside the run. */
	LT_CHECK(rf_loader_rewind(ld, EPOCH0) == 0);
	const rf_batch *b;
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0) == -EBUSY);
	LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0 - 1) == RF_EUSAGE);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0 + EPOCHS) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "epochs 2..4") != NULL);
	LT_CHECK(rf_loader_rewind(NULL, 0) == -EINVAL);
	rf_loader_close(&ld);

	/* A resumed loader rewinds in the blob's order. */
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	ld = open_run(EPOCH0, EPOCHS, NULL, 0);
	take(ld, per_epoch + 2, &head);
	LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
	rf_loader_close(&ld);
	ld = open_run(EPOCH0, EPOCHS, blob, len);
	LT_CHECK(rf_loader_rewind(ld, EPOCH0) == 0);
	got.n = 0;
	take(ld, SIZE_MAX, &got);
	LT_CHECK(same(&ref, 0, &got));
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("epochs"));
	if (lt_pack(dir, "e", N, 0, 1024, 4096, 0) < 0) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	static const enum rf_shuffle modes[] = {RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS,
						RF_SHUFFLE_WINDOW, RF_SHUFFLE_FULL};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		mode = modes[i];
		test_mode();
	}
	/* Two usage mistakes must not read as one another. */
	LT_CHECK(strcasecmp(rf_strerror(RF_EUSAGE), rf_strerror(-EINVAL)) != 0);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
