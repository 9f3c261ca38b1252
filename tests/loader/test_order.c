/* SPDX-License-Identifier: MIT */
/*
 * Description: the order of delivered samples follows the plan.  For file
 * order, chunk and window shuffling, one rank and three, keeping and
 * dropping the tail, over three epochs: every delivered batch holds exactly
 * the samples rf_plan_batch names for it (each row identified by its own
 * bytes, and every field checked), epochs differ when shuffled, the same
 * seed gives the same order and another seed another; the ranks' samples are
 * disjoint (but for the pad that ends a kept tail on some ranks), the ranks
 * get the same number of batches, and together they cover the epoch.  A window wider than the dataset is the window of every
 * chunk (full shuffling has its own test, test_full.c).
 * Resume (file order, chunk and window shuffling): a position saved after m
 * batches (at the start, mid-epoch, at and after an epoch boundary)
 * restores, through rf_config.resume and through rf_loader_state_load after
 * open, exactly the batches that came next; a corrupt blob is refused with
 * RF_ESTATE and the stream goes on where it was.
 */
#include "lt.h"
#include "plan/plan.h"

static char dir[256];

struct run {
	uint64_t *samples; /* delivered samples, in order, all epochs */
	uint64_t n, batches;
};

static uint32_t window = 4;
static int use_map; /* LT_MAP=1: chunks read through memory maps (rf_config.map) */

static int
stream(const char *pattern, enum rf_shuffle mode, uint64_t seed, int32_t rank, int32_t world,
       uint32_t batch, int drop_last, uint32_t epochs, struct run *out, rf_plan *check)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, pattern);
	cfg.batch_size = batch;
	cfg.drop_last = drop_last;
	cfg.epochs = epochs;
	cfg.shuffle = mode;
	cfg.window = window;
	cfg.seed = seed;
	cfg.rank = rank;
	cfg.world = world;
	cfg.map = use_map;
	cfg.pinned_bytes = 256 << 10;
	cfg.decode_threads = 3;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return rc;
	}
	memset(out, 0, sizeof(*out));
	out->samples = malloc(sizeof(uint64_t) * 100000);
	rf_plan_item items[512];
	uint64_t k = 0, epoch = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		if (b->epoch != epoch) {
			epoch = b->epoch;
			k = 0;
			if (check)
				LT_CHECK(rf_plan_set_epoch(check, epoch) == 0);
		}
		uint32_t n = 0;
		if (check) {
			LT_CHECK(rf_plan_batch(check, k, items, 512, &n) == 0);
			LT_CHECK(n == b->samples);
			LT_CHECK(n == 0 || b->first_sample == items[0].pos);
		}
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(lt_row_ok(b, i, g));
			if (check && i < n)
				LT_CHECK(g == items[i].sample);
			out->samples[out->n++] = g;
		}
		k++;
		out->batches++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	rf_loader_close(&ld);
	return rc;
}

/* Batches as (first sample) sequences: the samples of each batch, with a
 * batch boundary marker. */
struct seq {
	uint64_t v[40000];
	size_t n;
};

static void
take(rf_loader *ld, size_t batches, struct seq *out)
{
	const rf_batch *b;
	for (size_t k = 0; k < batches; k++) {
		int rc = rf_loader_next(ld, &b);
		LT_CHECK(rc == 0);
		if (rc || !b)
			return;
		for (uint32_t i = 0; i < b->samples; i++)
			out->v[out->n++] = lt_row_sample(b, i);
		out->v[out->n++] = UINT64_MAX - b->epoch;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
}

static enum rf_shuffle resume_mode = RF_SHUFFLE_CHUNKS;

static rf_loader *
open_for_resume(const void *blob, size_t len)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "o-*.rfs");
	cfg.batch_size = 17;
	cfg.epochs = 0;
	cfg.shuffle = resume_mode;
	cfg.window = window;
	cfg.seed = 5;
	cfg.rank = 0;
	cfg.world = 1;
	cfg.map = use_map;
	cfg.pinned_bytes = 256 << 10;
	cfg.resume = blob;
	cfg.resume_len = len;
	rf_loader *ld = NULL;
	if (rf_loader_open(&ld, &cfg) < 0)
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
	return ld;
}

static void
test_resume(uint64_t n)
{
	static struct seq ref, got;
	uint64_t per_epoch = (n + 16) / 17;
	const size_t total = 3 * per_epoch;
	ref.n = 0;
	rf_loader *ld = open_for_resume(NULL, 0);
	LT_CHECK(ld != NULL);
	if (!ld)
		return;
	take(ld, total, &ref);
	rf_loader_close(&ld);

	size_t ms[] = {0, 1, 7, per_epoch - 1, per_epoch, per_epoch + 3};
	for (size_t t = 0; t < sizeof(ms) / sizeof(ms[0]); t++) {
		size_t m = ms[t];
		uint8_t blob[RF_STATE_MAX];
		size_t len = 0;
		got.n = 0;
		ld = open_for_resume(NULL, 0);
		take(ld, m, &got);
		size_t skip = got.n;
		LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
		LT_CHECK(len > 0 && len <= RF_STATE_MAX);
		size_t small = 0;
		LT_CHECK(rf_loader_state_save(ld, blob, 4, &small) == -ENOSPC && small == len);
		rf_loader_close(&ld);

		/* Through the config: nothing read twice. */
		got.n = 0;
		ld = open_for_resume(blob, len);
		LT_CHECK(ld != NULL);
		if (!ld)
			continue;
		take(ld, total - m, &got);
		LT_CHECK(got.n == ref.n - skip);
		LT_CHECK(memcmp(got.v, ref.v + skip, got.n * 8) == 0);
		rf_loader_close(&ld);

		/* Through rf_loader_state_load after open (and some batches taken and
		 * released first). */
		got.n = 0;
		ld = open_for_resume(NULL, 0);
		struct seq *junk = malloc(sizeof(*junk));
		junk->n = 0;
		take(ld, 3, junk);
		free(junk);
		LT_CHECK(rf_loader_state_load(ld, blob, len) == 0);
		take(ld, total - m, &got);
		LT_CHECK(got.n == ref.n - skip);
		LT_CHECK(memcmp(got.v, ref.v + skip, got.n * 8) == 0);
		rf_loader_close(&ld);
		if (lt_failures)
			fprintf(stderr, "resume after %zu batches failed\n", m);
	}

	/* A corrupt blob: refused, and the stream goes on where it was. */
	uint8_t bad[RF_STATE_MAX];
	size_t len = 0;
	ld = open_for_resume(NULL, 0);
	got.n = 0;
	take(ld, 2, &got);
	LT_CHECK(rf_loader_state_save(ld, bad, sizeof(bad), &len) == 0);
	bad[len / 2] ^= 1;
	LT_CHECK(rf_loader_state_load(ld, bad, len) == RF_ESTATE);
	LT_CHECK(strstr(rf_loader_errmsg(ld), "resume") != NULL);
	take(ld, 5, &got);
	LT_CHECK(memcmp(got.v, ref.v, got.n * 8) == 0);
	const rf_batch *held;
	LT_CHECK(rf_loader_next(ld, &held) == 0 && held);
	LT_CHECK(rf_loader_state_load(ld, bad, len) == -EBUSY);
	LT_CHECK(rf_loader_release(ld, held, NULL) == 0);
	rf_loader_close(&ld);
	LT_CHECK(open_for_resume(bad, len) == NULL);
}

int
main(void)
{
	use_map = getenv("LT_MAP") && !strcmp(getenv("LT_MAP"), "1");
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("order"));
	const uint64_t N = 1234;
	LT_CHECK(lt_pack(dir, "o", N, 1, 2048, 16384, 1) == 0);
	LT_CHECK(lt_pack(dir, "f", N, 0, 4096, 0, 0) == 0);

	const char *patterns[] = {"o-*.rfs", "f.rfs"};
	for (int pi = 0; pi < 2; pi++) {
		for (int mode = 0; mode < 3; mode++) {
			for (int world = 1; world <= 3; world += 2) {
				for (int drop = 0; drop < 2; drop++) {
					uint32_t B = 17;
					uint64_t seen_batches = UINT64_MAX;
					uint8_t *hit = calloc(N * 3, 1);
					for (int rank = 0; rank < world; rank++) {
						static const enum rf_plan_mode pm[] = {
							RF_PLAN_NONE, RF_PLAN_CHUNKS, RF_PLAN_WINDOW};
						static const enum rf_shuffle sm[] = {
							RF_SHUFFLE_NONE, RF_SHUFFLE_CHUNKS, RF_SHUFFLE_WINDOW};
						rf_plan *plan = lt_make_plan(
							dir, patterns[pi], pm[mode], 42, (uint32_t)rank,
							(uint32_t)world, B,
							pm[mode] == RF_PLAN_WINDOW ? window : 1, drop);
						LT_CHECK(plan != NULL);
						struct run r;
						LT_CHECK(stream(patterns[pi], sm[mode], 42, rank, world, B,
								drop, 3, &r, plan) == 0);
						rf_plan_destroy(&plan);
						if (seen_batches == UINT64_MAX)
							seen_batches = r.batches;
						LT_CHECK(r.batches == seen_batches);
						/* Per epoch: no sample twice across ranks, but
						 * for the pad that ends a kept tail on the
						 * ranks past the first rem % world: a repeat of
						 * the rank's sample before it. */
						uint64_t per_epoch = r.n / 3;
						uint64_t G = (uint64_t)B * (uint64_t)world;
						int pad = !drop && (N % G) % (uint64_t)world != 0 &&
							  (uint64_t)rank >= (N % G) % (uint64_t)world;
						for (uint64_t i = 0; i < r.n; i++) {
							uint64_t e = i / per_epoch;
							if (pad && i % per_epoch == per_epoch - 1) {
								LT_CHECK(r.samples[i] == r.samples[i - 1]);
								continue;
							}
							LT_CHECK(hit[e * N + r.samples[i]] == 0);
							hit[e * N + r.samples[i]] = 1;
						}
						if (mode >= 1 && world == 1) {
							/* Epochs differ when shuffled. */
							LT_CHECK(memcmp(r.samples, r.samples + per_epoch,
									per_epoch * 8) != 0);
						}
						free(r.samples);
					}
					/* Together the ranks cover every sample, except the
					 * tail that drop_last leaves out. */
					uint64_t covered = 0;
					for (uint64_t i = 0; i < N; i++)
						covered += hit[i];
					uint64_t G = (uint64_t)B * (uint64_t)world;
					if (!drop)
						LT_CHECK(covered == N);
					else
						LT_CHECK(covered >= N / G * G && covered <= N);
					free(hit);
				}
			}
		}
	}

	/* The same seed, the same order; another seed, another. */
	struct run a, b, c;
	LT_CHECK(stream("o-*.rfs", RF_SHUFFLE_CHUNKS, 7, 0, 1, 32, 0, 1, &a, NULL) == 0);
	LT_CHECK(stream("o-*.rfs", RF_SHUFFLE_CHUNKS, 7, 0, 1, 32, 0, 1, &b, NULL) == 0);
	LT_CHECK(stream("o-*.rfs", RF_SHUFFLE_CHUNKS, 8, 0, 1, 32, 0, 1, &c, NULL) == 0);
	LT_CHECK(a.n == N && b.n == N && c.n == N);
	LT_CHECK(memcmp(a.samples, b.samples, N * 8) == 0);
	LT_CHECK(memcmp(a.samples, c.samples, N * 8) != 0);
	free(a.samples);
	free(b.samples);
	free(c.samples);

	test_resume(N);
	resume_mode = RF_SHUFFLE_WINDOW;
	test_resume(N);
	resume_mode = RF_SHUFFLE_NONE;
	test_resume(N);

	/* Refusals at open. */
	struct run x;
	/* A window wider than the dataset is the window of every chunk, which
	 * this budget holds (a window it cannot hold: test_window.c). */
	window = 100000;
	LT_CHECK(stream("f.rfs", RF_SHUFFLE_WINDOW, 1, 0, 1, 8, 0, 1, &x, NULL) == 0);
	free(x.samples);
	window = 4;
	LT_CHECK(stream("f.rfs", RF_SHUFFLE_NONE, 1, 3, 2, 8, 0, 1, &x, NULL) == RF_EUSAGE);

	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
