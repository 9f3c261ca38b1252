/* SPDX-License-Identifier: MIT */
/*
 * Description: rank slicing by the documented rule, checked without the
 * plan's own functions.  The global order of an epoch is what one rank
 * with batches of G = world x B samples receives; rank r of `world` then
 * gets, as its batch k, the slice [rB, rB + B) of global batch k, for every
 * full global batch; with drop_last = 0 the last, partial global batch of
 * rem samples gives every rank one more batch of ceil(rem / world): with
 * q = rem / world and m = rem % world, rank r takes the q + (r < m)
 * samples from rq + min(r, m), and a rank with q samples repeats its last
 * one, so that every sample of the epoch is delivered exactly once apart
 * from those world - m repeats; with drop_last = 1 nothing more.  Every
 * delivered row is checked, every field; batch.first_sample is the slice's
 * position.  File order, chunk, window and full shuffling; worlds 2, 3, 4
 * and 7; B = 4 and 5; N = 251 samples in small chunks, so ranks skip
 * chunks.
 */
#include "lt.h"

#define N 251
#define MAXB 256

static char dir[256];

struct stream {
	uint64_t nb;
	uint32_t size[MAXB];
	uint64_t first[MAXB];
	uint64_t s[MAXB][64];
};

static void
stream(enum rf_shuffle mode, uint32_t rank, uint32_t world, uint32_t batch, int drop_last,
       struct stream *out)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "d.rfs");
	cfg.batch_size = batch;
	cfg.drop_last = drop_last;
	cfg.shuffle = mode;
	cfg.seed = 21;
	cfg.epoch = 4;
	cfg.rank = (int32_t)rank;
	cfg.world = (int32_t)world;
	cfg.pinned_bytes = 1 << 20;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open (rank %u of %u, B %u): %s\n", rank, world, batch,
			rf_loader_last_open_error());
		exit(1);
	}
	memset(out, 0, sizeof(*out));
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		if (out->nb >= MAXB || b->samples > 64) {
			fprintf(stderr, "too many batches or samples\n");
			exit(1);
		}
		out->size[out->nb] = b->samples;
		out->first[out->nb] = b->first_sample;
		for (uint32_t i = 0; i < b->samples; i++) {
			out->s[out->nb][i] = lt_row_sample(b, i);
			LT_CHECK(lt_row_ok(b, i, out->s[out->nb][i]));
		}
		out->nb++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	if (rc < 0) {
		fprintf(stderr, "rank %u of %u: %d (%s): %s\n", rank, world, rc, rf_strerror(rc),
			rf_loader_errmsg(ld));
		exit(1);
	}
	rf_loader_close(&ld);
}

static struct stream glob, mine;

static void
check_world(enum rf_shuffle mode, uint32_t world, uint32_t B, int drop_last)
{
	uint32_t G = world * B;
	uint64_t nfull = N / G, rem = N % G, q = rem / world, m = rem % world;
	uint64_t s = q + (m > 0);
	/* The global order: one rank, batches of G, the tail kept. */
	stream(mode, 0, 1, G, 0, &glob);
	LT_CHECK(glob.nb == nfull + (rem > 0));
	static uint32_t times[N];
	memset(times, 0, sizeof(times));
	for (uint32_t r = 0; r < world; r++) {
		stream(mode, r, world, B, drop_last, &mine);
		uint64_t want_nb = nfull + (!drop_last && rem > 0);
		int bad = mine.nb != want_nb;
		for (uint64_t k = 0; k < mine.nb && k < want_nb && !bad; k++) {
			uint64_t size = k < nfull ? B : s, real = k < nfull ? B : q + (r < m);
			uint64_t off = k < nfull ? (uint64_t)r * B : r * q + (r < m ? r : m);
			bad |= mine.size[k] != size;
			if (real > 0)
				bad |= mine.first[k] != k * G + off;
			for (uint64_t i = 0; i < real && !bad; i++) {
				bad |= mine.s[k][i] != glob.s[k][off + i];
				times[mine.s[k][i]]++;
			}
			/* The pad repeats the rank's last real sample. */
			for (uint64_t i = real; i < size && !bad; i++)
				bad |= mine.s[k][i] != (i > 0 ? mine.s[k][i - 1] : mine.s[k - 1][B - 1]);
		}
		if (bad) {
			fprintf(stderr, "shuffle %d, rank %u of %u, B %u, drop_last %d: %llu batches "
				"(want %llu), not the rank's slices of the global batches\n", (int)mode,
				r, world, B, drop_last, (unsigned long long)mine.nb,
				(unsigned long long)want_nb);
			lt_failures++;
		}
	}
	/* The ranks together: every sample once, or none past the full global
	 * batches with drop_last. */
	for (uint64_t i = 0; i < N; i++) {
		uint32_t want = 1;
		if (drop_last) {
			/* The samples the global order puts in its tail. */
			for (uint64_t j = 0; j < rem && want; j++)
				want = glob.s[nfull][j] != i;
		}
		if (times[i] != want) {
			fprintf(stderr, "shuffle %d, world %u, B %u, drop_last %d: sample %llu "
				"delivered %u times, want %u\n", (int)mode, world, B, drop_last,
				(unsigned long long)i, times[i], want);
			lt_failures++;
			break;
		}
	}
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("ranks"));
	if (lt_pack(dir, "d", N, 0, 300, 0, 0) < 0)
		return 1;
	enum rf_shuffle modes[] = {RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS, RF_SHUFFLE_WINDOW,
				   RF_SHUFFLE_FULL};
	uint32_t worlds[] = {2, 3, 4, 7};
	for (size_t m = 0; m < 4; m++)
		for (size_t w = 0; w < 4; w++)
			for (uint32_t B = 4; B <= 5; B++)
				for (int drop = 0; drop <= 1; drop++)
					check_world(modes[m], worlds[w], B, drop);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
