/* SPDX-License-Identifier: MIT */
/*
 * Description: the resume blob's checksum is what stands between a damaged
 * blob and a silently different order.  Its seed, epoch and position are
 * taken from the blob as they are (a blob carries its own order), so only
 * the checksum can tell a flipped bit there from a real position.  Through
 * the public API (chunks shuffle, seed 3, a position mid-epoch 1): the
 * intact blob resumes the exact rest of the stream, by rf_config.resume and
 * by rf_loader_state_load; a byte changed in the seed, the epoch or the
 * position (to another batch boundary) is refused with RF_ESTATE both ways,
 * and after a refused load the stream goes on where it was; the same
 * changes with the checksum recomputed are accepted and give another
 * stream, so the refusal above is the checksum's alone.
 */
#include <xxhash.h>

#include "lt.h"

#define B 8
#define MAXS 4096

/* A check whose failure makes the rest meaningless. */
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static char dir[256];

static int
open_loader(rf_loader **ld, const void *resume, size_t len)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "d.rfs");
	cfg.batch_size = B;
	cfg.drop_last = 1;
	cfg.epochs = 3;
	cfg.shuffle = RF_SHUFFLE_CHUNKS;
	cfg.seed = 3;
	cfg.pinned_bytes = 1 << 20;
	cfg.resume = resume;
	cfg.resume_len = len;
	return rf_loader_open(ld, &cfg);
}

/* Up to `batches` batches (UINT64_MAX: to the end) into s; returns the
 * samples taken. */
static uint64_t
take(rf_loader *ld, uint64_t batches, uint64_t *s)
{
	uint64_t n = 0;
	const rf_batch *b;
	for (uint64_t k = 0; k < batches; k++) {
		int rc = rf_loader_next(ld, &b);
		if (rc != 0) {
			fprintf(stderr, "next: %d (%s): %s\n", rc, rf_strerror(rc), rf_loader_errmsg(ld));
			exit(1);
		}
		if (!b)
			break;
		LT_CHECK(lt_failures || b->samples == B);
		for (uint32_t i = 0; i < b->samples && n < MAXS; i++)
			s[n++] = lt_row_sample(b, i);
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	return n;
}

static uint64_t rest[MAXS], nrest, got[MAXS];

/* The stream s begins with the rest of the reference (a resumed loader's
 * `epochs` may count from the saved epoch: it may go on beyond). */
static int
same_as_rest(const uint64_t *s, uint64_t n)
{
	return n >= nrest && memcmp(s, rest, nrest * sizeof(*s)) == 0;
}

/* A copy of blob with the u64 at `at` set to v; with fix, the checksum at
 * 88 recomputed. */
static void
tamper(const uint8_t *blob, uint8_t *out, size_t len, size_t at, uint64_t v, int fix)
{
	memcpy(out, blob, len);
	for (int i = 0; i < 8; i++)
		out[at + i] = (uint8_t)(v >> (8 * i));
	if (fix) {
		uint64_t h = XXH3_64bits(out, 88);
		for (int i = 0; i < 8; i++)
			out[88 + i] = (uint8_t)(h >> (8 * i));
	}
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("rblob"));
	if (lt_pack(dir, "d", 600, 0, 512, 0, 0) < 0)
		return 1;

	/* The reference: 75 batches an epoch; save after epoch 0 and 5
	 * batches of epoch 1. */
	rf_loader *ld;
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	CHECK(open_loader(&ld, NULL, 0) == 0);
	take(ld, 600 / B + 5, got);
	CHECK(rf_loader_state_save(ld, blob, sizeof blob, &len) == 0);
	CHECK(len == 96);
	nrest = take(ld, UINT64_MAX, rest);
	CHECK(nrest == 600 - 5 * B + 600);
	rf_loader_close(&ld);

	/* The intact blob, both ways. */
	CHECK(open_loader(&ld, blob, len) == 0);
	LT_CHECK(same_as_rest(got, take(ld, UINT64_MAX, got)));
	rf_loader_close(&ld);
	CHECK(open_loader(&ld, NULL, 0) == 0);
	CHECK(rf_loader_state_load(ld, blob, len) == 0);
	LT_CHECK(same_as_rest(got, take(ld, UINT64_MAX, got)));
	rf_loader_close(&ld);

	struct {
		const char *what;
		size_t at;
		uint64_t value;
	} changes[] = {
		{"seed", 24, 3 ^ 0x100},
		{"epoch", 32, 2},
		{"position", 40, 9 * B}, /* another batch boundary */
	};
	for (size_t c = 0; c < sizeof changes / sizeof changes[0]; c++) {
		uint8_t bad[RF_STATE_MAX];
		uint64_t old = 0;
		for (int i = 0; i < 8; i++)
			old |= (uint64_t)blob[changes[c].at + i] << (8 * i);
		CHECK(old != changes[c].value);

		/* Checksum as saved: refused, both ways. */
		tamper(blob, bad, len, changes[c].at, changes[c].value, 0);
		int rc = open_loader(&ld, bad, len);
		if (rc != RF_ESTATE) {
			fprintf(stderr, "%s changed: open with it as resume gave %d (%s), expected "
				"RF_ESTATE\n", changes[c].what, rc, rf_strerror(rc));
			lt_failures++;
			if (rc == 0)
				rf_loader_close(&ld);
		}
		CHECK(open_loader(&ld, NULL, 0) == 0);
		uint64_t first[B];
		take(ld, 1, first);
		rc = rf_loader_state_load(ld, bad, len);
		if (rc != RF_ESTATE) {
			fprintf(stderr, "%s changed: rf_loader_state_load gave %d (%s), expected "
				"RF_ESTATE\n", changes[c].what, rc, rf_strerror(rc));
			lt_failures++;
		} else {
			/* Refused: the stream goes on after the batch taken. */
			rf_loader *ref;
			uint64_t want[B * 2];
			CHECK(open_loader(&ref, NULL, 0) == 0);
			take(ref, 2, want);
			rf_loader_close(&ref);
			uint64_t next[B];
			take(ld, 1, next);
			LT_CHECK(memcmp(first, want, sizeof first) == 0);
			LT_CHECK(memcmp(next, want + B, sizeof next) == 0);
		}
		rf_loader_close(&ld);

		/* Checksum recomputed: a well-formed blob of another position
		 * or order, accepted; its stream is not the saved one's. */
		tamper(blob, bad, len, changes[c].at, changes[c].value, 1);
		rc = open_loader(&ld, bad, len);
		if (rc != 0) {
			fprintf(stderr, "%s changed, checksum recomputed: open gave %d (%s): %s\n",
				changes[c].what, rc, rf_strerror(rc), rf_loader_last_open_error());
			lt_failures++;
			continue;
		}
		LT_CHECK(!same_as_rest(got, take(ld, UINT64_MAX, got)));
		rf_loader_close(&ld);
	}

	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
