/* SPDX-License-Identifier: MIT */
/*
 * Description: full shuffling from memory (a resident dataset read through
 * maps), where the consumer's thread fills batches itself when none is
 * ready.  With every batch left to the consumer's thread
 * (RINGFEED_FULL_LEAD=0), with none (RINGFEED_FULL_NO_HELP=1), with both
 * threads filling (the default, the consumer taking batches as fast as it
 * can) and with three more filler threads (RINGFEED_FULL_FILLERS=3), three epochs (and sixty epochs of seven batches, the plan moving
 * on while both threads fill) are delivered in exactly the order
 * rf_plan_batch names,
 * every row holding its sample's values, and the runs are bit-identical; the
 * log says how many batches the consumer's thread filled (all of them, none,
 * and some).  A position saved after k batches resumes to the same stream.
 * A byte flipped in one sample's value stops the stream with RF_ECHECKSUM
 * naming the shard, chunk, sample and field, no batch holding the sample
 * delivered, whichever thread filled its batch.  Samples over 16 KiB are
 * filled on the consumer's thread too: two epochs of 20011-byte samples,
 * every batch filled there, each epoch a permutation, every byte right,
 * and the fills counted as the consumer's stall time.
 */
#include "lt.h"
#include "format/format.h"
#include "plan/plan.h"

static char dir[256];
static uint64_t hot_epochs = 3;

/* M_FILLERS: three more threads filling beside the full thread and the
 * consumer's (as on a machine with eight cores). */
enum mode { M_CONSUMER, M_THREAD, M_BOTH, M_FILLERS, NMODES };

static void
set_mode(enum mode m)
{
	unsetenv("RINGFEED_FULL_LEAD");
	unsetenv("RINGFEED_FULL_NO_HELP");
	setenv("RINGFEED_FULL_FILLERS", m == M_FILLERS ? "3" : "0", 1);
	if (m == M_CONSUMER)
		setenv("RINGFEED_FULL_LEAD", "0", 1);
	else if (m == M_THREAD)
		setenv("RINGFEED_FULL_NO_HELP", "1", 1);
}

static rf_loader *
open_hot(const char *name, enum mode m, uint32_t batch, const void *resume, size_t resume_len)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, name);
	cfg.shuffle = RF_SHUFFLE_FULL;
	cfg.seed = 5;
	cfg.batch_size = batch;
	cfg.epochs = hot_epochs;
	cfg.map = 1;
	cfg.verify = 1;
	cfg.pinned_bytes = 1 << 20;
	cfg.log = lt_log_keep;
	cfg.resume = resume;
	cfg.resume_len = resume_len;
	lt_logged[0] = 0;
	set_mode(m);
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	return rc == 0 ? ld : NULL;
}

/* Take up to max batches (all when 0): each checked against the plan's
 * batch (epoch, index in the epoch from *k) and its rows against their
 * samples; the samples appended to out. */
static size_t
take(rf_loader *ld, rf_plan *plan, size_t max, uint64_t *out, size_t *n, uint64_t *epoch,
     uint64_t *k)
{
	rf_plan_item items[64];
	const rf_batch *b;
	size_t got = 0;
	int rc;
	while ((max == 0 || got < max) && (rc = rf_loader_next(ld, &b)) == 0 && b) {
		if (b->epoch != *epoch) {
			*epoch = b->epoch;
			*k = 0;
			LT_CHECK(rf_plan_set_epoch(plan, *epoch) == 0);
		}
		uint32_t m = 0;
		LT_CHECK(rf_plan_batch(plan, (*k)++, items, 64, &m) == 0);
		LT_CHECK(m == b->samples && b->first_sample == items[0].pos);
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			LT_CHECK(i >= m || g == items[i].sample);
			LT_CHECK(lt_row_ok(b, i, g));
			out[(*n)++] = g;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		got++;
	}
	if (max == 0)
		LT_CHECK(rc == 0);
	return got;
}

/* The count the loader logs at the end: batches the consumer's thread
 * filled, of all; -1 when not logged. */
static int64_t
helped(uint64_t *of)
{
	const char *at = strstr(lt_logged, "shuffle full from memory: ");
	unsigned long long a, b;
	if (!at || sscanf(at, "shuffle full from memory: %llu of %llu", &a, &b) != 2)
		return -1;
	*of = b;
	return (int64_t)a;
}

static void
test_order(const char *name, uint64_t N, uint32_t B, uint64_t E)
{
	uint64_t *v[NMODES];
	hot_epochs = E;
	size_t n[NMODES] = {0};
	uint64_t batches[NMODES] = {0};
	int64_t h[NMODES];
	for (int m = 0; m < NMODES; m++) {
		v[m] = calloc(E * N + 1, sizeof(uint64_t));
		rf_plan *plan = lt_make_plan(dir, name, RF_PLAN_FULL, 5, 0, 1, B, 1, 0);
		rf_loader *ld = open_hot(name, (enum mode)m, B, NULL, 0);
		LT_CHECK(plan && ld);
		if (!plan || !ld)
			return;
		LT_CHECK(strstr(lt_logged, "samples copied from the mapped shards"));
		uint64_t epoch = UINT64_MAX, k = 0;
		batches[m] = take(ld, plan, 0, v[m], &n[m], &epoch, &k);
		rf_loader_close(&ld);
		rf_plan_destroy(&plan);
		uint64_t of = 0;
		h[m] = helped(&of);
		LT_CHECK(h[m] >= 0 && of == batches[m]);
		LT_CHECK(strstr(lt_logged, m == M_FILLERS ? "; 3 more threads filling"
						       : "; 0 more threads filling"));
	}
	for (int m = 1; m < NMODES; m++)
		LT_CHECK(n[m] == E * N && !memcmp(v[0], v[m], 8 * n[0]));
	LT_CHECK(h[M_CONSUMER] == (int64_t)batches[M_CONSUMER]);
	LT_CHECK(h[M_THREAD] == 0);
	/* Both: a consumer that only takes batches outruns the full thread
	 * (not guaranteed on a busy machine, so only reported). */
	if (h[M_BOTH] <= 0)
		fprintf(stderr, "note: the consumer's thread filled none of %llu batches\n",
			(unsigned long long)batches[M_BOTH]);
	for (int m = 0; m < NMODES; m++)
		free(v[m]);
	hot_epochs = 3;
}

/* A position saved after k batches continues the stream exactly. */
static void
test_resume(const char *name, uint64_t N, uint32_t B)
{
	uint64_t *all = calloc(3 * N + 1, 8), *two = calloc(3 * N + 1, 8);
	size_t na = 0, nt = 0;
	rf_plan *plan = lt_make_plan(dir, name, RF_PLAN_FULL, 5, 0, 1, B, 1, 0);
	uint64_t epoch = UINT64_MAX, k = 0;
	rf_loader *ld = open_hot(name, M_CONSUMER, B, NULL, 0);
	if (!plan || !ld)
		return;
	take(ld, plan, 0, all, &na, &epoch, &k);
	rf_loader_close(&ld);
	const size_t ks[] = {1, 7, (size_t)(N / B) + 3};
	for (size_t t = 0; t < sizeof(ks) / sizeof(ks[0]); t++) {
		for (int m = 0; m < NMODES; m++) {
			nt = 0;
			epoch = UINT64_MAX;
			ld = open_hot(name, (enum mode)m, B, NULL, 0);
			if (!ld)
				return;
			take(ld, plan, ks[t], two, &nt, &epoch, &k);
			static uint8_t blob[1 << 16];
			size_t len = 0;
			LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
			rf_loader_close(&ld);
			ld = open_hot(name, (enum mode)((m + 1) % NMODES), B, blob, len);
			if (!ld)
				return;
			take(ld, plan, 0, two, &nt, &epoch, &k);
			rf_loader_close(&ld);
			LT_CHECK(nt == na && !memcmp(all, two, 8 * na));
		}
	}
	rf_plan_destroy(&plan);
	free(all);
	free(two);
}

/* A flipped byte in sample G's img: RF_ECHECKSUM with its place, the
 * batches before it delivered, none holding it. */
static void
test_flip(enum mode m)
{
	const uint64_t N = 700, G = 333;
	char tag[8], name[16];
	snprintf(tag, sizeof(tag), "c%d", (int)m);
	snprintf(name, sizeof(name), "%s.rfs", tag);
	LT_CHECK(lt_pack(dir, tag, N, 0, 4096, 0, 0) == 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	const char *paths[] = {path};
	rf_dataset *ds;
	LT_CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
	uint64_t chunk = 0;
	rf_chunk_info ci;
	rf_dataset_find_chunk(ds, G, &chunk);
	rf_dataset_chunk_info(ds, chunk, &ci);
	rf_dataset_close(&ds);
	uint64_t n = ci.samples, in_chunk = G - ci.first_sample;
	/* Fields x u16[3], y i64, img u8[4][5]: 64-aligned sections. */
	uint64_t img = RF_ALIGN_UP(RF_ALIGN_UP(n * 6, 64) + n * 8, 64);
	lt_flip_byte(dir, name, ci.offset + img + in_chunk * 20 + 11, 0x20);
	char want[160];
	snprintf(want, sizeof(want), ": chunk %llu at offset %llu: sample %llu of the chunk "
		 "(sample %llu of the dataset), field img: checksum mismatch",
		 (unsigned long long)chunk, (unsigned long long)ci.offset,
		 (unsigned long long)in_chunk, (unsigned long long)G);
	rf_loader *ld = open_hot(name, m, 16, NULL, 0);
	if (!ld)
		return;
	const rf_batch *b;
	int rc;
	size_t rows = 0, bad = 0, wrong = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = lt_row_sample(b, i);
			bad += g == G;
			wrong += !lt_row_ok(b, i, g);
			rows++;
		}
		rf_loader_release(ld, b, NULL);
	}
	LT_CHECK(rc == RF_ECHECKSUM);
	LT_CHECK(bad == 0 && wrong == 0 && rows < N);
	const char *msg = rf_loader_errmsg(ld);
	LT_CHECK(strstr(msg, name) && strstr(msg, want));
	if (!strstr(msg, want))
		fprintf(stderr, "message: %s\n(want %s)\n", msg, want);
	LT_CHECK(rf_loader_next(ld, &b) == RF_ECHECKSUM);
	rf_loader_close(&ld);
	/* The log's count: the batch that failed is no batch filled. */
	uint64_t of = 0;
	int64_t h = helped(&of);
	LT_CHECK(h >= 0 && (uint64_t)h <= of);
	if (m == M_CONSUMER)
		LT_CHECK((uint64_t)h == of);
}

/* Samples of LARGE bytes (over 16 KiB: the consumer's thread once filled
 * only smaller ones), each its own number in its first 8 bytes and a
 * pattern of it after. */
#define LARGE 20011u

static void
fill_large(uint64_t g, uint8_t *v, uint64_t len)
{
	memcpy(v, &g, 8);
	for (uint32_t i = 8; i < len; i++)
		v[i] = (uint8_t)(g * 131 + i * 7);
}

/* Every batch filled on the consumer's thread, two epochs: each a
 * permutation of the samples, every byte its sample's, and the log's
 * count all of the batches. */
static void
test_large(const char *name, uint64_t N, uint32_t B)
{
	hot_epochs = 2;
	rf_loader *ld = open_hot(name, M_CONSUMER, B, NULL, 0);
	if (!ld)
		return;
	uint8_t *seen = calloc(2 * N, 1);
	uint64_t batches = 0, rows = 0, wrong = 0;
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		const uint8_t *px = b->fields[0].data;
		for (uint32_t i = 0; i < b->samples; i++, rows++) {
			const uint8_t *x = px + (uint64_t)i * LARGE;
			uint64_t g;
			memcpy(&g, x, 8);
			if (g >= N || b->epoch >= 2 || seen[b->epoch * N + g]++) {
				wrong++;
				continue;
			}
			for (uint32_t k = 8; k < LARGE; k++)
				wrong += x[k] != (uint8_t)(g * 131 + k * 7);
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		batches++;
	}
	LT_CHECK(rc == 0);
	/* The consumer was held up for its fills: stall_ns counts them
	 * (their CPU time is in thread_cpu_ns, with the loader's threads'). */
	rf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	LT_CHECK(st.stall_ns >= st.thread_cpu_ns / 2 && st.stall_share > 0);
	if (st.stall_ns < st.thread_cpu_ns / 2)
		fprintf(stderr, "stall_ns %llu, thread_cpu_ns %llu\n",
			(unsigned long long)st.stall_ns, (unsigned long long)st.thread_cpu_ns);
	rf_loader_close(&ld);
	LT_CHECK(rows == 2 * N && wrong == 0);
	uint64_t of = 0;
	LT_CHECK(helped(&of) == (int64_t)batches && of == batches);
	free(seen);
	hot_epochs = 3;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("full-hot"));
	const uint64_t N = 1500;
	LT_CHECK(lt_pack(dir, "h", N, 0, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "s", N, 0, 2048, 16384, 0) == 0);
	test_order("h.rfs", N, 16, 3);
	test_order("s-*.rfs", N, 7, 3);
	/* Many epochs of a few batches: the plan moves to the next epoch only
	 * once both threads' batches of this one are drawn and staged. */
	LT_CHECK(lt_pack(dir, "e", 100, 0, 4096, 0, 0) == 0);
	test_order("e.rfs", 100, 16, 60);
	test_resume("h.rfs", N, 16);
	LT_CHECK(lt_pack_u8(dir, "big.rfs", "px", LARGE, 0, 300, 256 << 10, fill_large) == 0);
	test_large("big.rfs", 300, 7);
	test_flip(M_CONSUMER);
	test_flip(M_THREAD);
	test_flip(M_BOTH);
	test_flip(M_FILLERS);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
