/* SPDX-License-Identifier: MIT */
/*
 * Description: full shuffling through the loader.  Every epoch delivers a
 * permutation of the dataset (sorted samples == all samples, every field of
 * every row checked against its sample), exactly the order rf_plan_batch
 * names; epochs differ; the same seed gives the same order and another seed
 * another; 4 ranks get disjoint samples and the same number of batches;
 * resuming after every k batches (through rf_config.resume and through
 * rf_loader_state_load) reproduces the uninterrupted run; a position saved
 * by 4 ranks continues on 2 with exactly the samples not yet consumed;
 * values read in place and through the O_DIRECT bounce area; a zstd dataset
 * and a loaded variable-size field are refused with RF_EUSAGE and a message
 * that suggests window shuffling, while the fixed fields before a variable
 * one load.  Checksums: a byte flipped in one sample's value stops the stream
 * with RF_ECHECKSUM naming shard, chunk, sample and field, no batch holding
 * it delivered, and so does a byte flipped in its row of checksums (verify off delivers it; chunk modes catch it by the chunk
 * checksum); the same from memory when the checks run on the consumer's
 * thread (the first batch's); a format 1 shard (no per-sample checksums) is refused with
 * verify on, with a message that says how to repack, reads with verify off,
 * and still reads in every other mode.  Argument "cuda": the same on the
 * cudart emulator, with its hazard counters checked at the end.
 */
#include "lt.h"
#include "lt_gpu.h"
#include "format/format.h"
#include "plan/plan.h"

static char dir[256];
static int use_cuda;
static struct rfemu_api emu;

/* The sample a row holds, from "y" (g * 1000003 - 5) or from "w" (below).
 * b's fields are in host memory (host_rows), as for row_ok. */
static uint64_t
row_sample(const rf_batch *b, uint32_t i)
{
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		if (!strcmp(bf->name, "y")) {
			int64_t y;
			memcpy(&y, (const uint8_t *)bf->data + 8 * i, 8);
			return (uint64_t)((y + 5) / 1000003);
		}
		if (!strcmp(bf->name, "w")) {
			uint64_t g;
			memcpy(&g, (const uint8_t *)bf->data + (uint64_t)i * 4096, 8);
			return g;
		}
	}
	return UINT64_MAX;
}

/* Every field of row i holds sample g's values. */
static int
row_ok(const rf_batch *b, uint32_t i, uint64_t g)
{
	uint8_t want[64];
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		const uint8_t *data = bf->data;
		if (bf->offsets)
			return 0;
		if (!strcmp(bf->name, "w")) {
			const uint8_t *row = data + (uint64_t)i * 4096;
			for (uint32_t j = 8; j < 4096; j += 509)
				if (row[j] != (uint8_t)(g * 7 + j))
					return 0;
			continue;
		}
		size_t len = lt_value(bf->name, g, want);
		if (memcmp(data + (uint64_t)i * len, want, len))
			return 0;
	}
	return 1;
}

/* A dataset of one 4 KiB field "w" (u8[4096]): values O_DIRECT reads in
 * place.  The first 8 bytes hold the sample index. */
static void
fill_wide(uint64_t g, uint8_t *v, uint64_t len)
{
	for (uint32_t j = 0; j < len; j++)
		v[j] = (uint8_t)(g * 7 + j);
	memcpy(v, &g, 8);
}

static int
pack_wide(const char *name, uint64_t n)
{
	char file[256];
	snprintf(file, sizeof(file), "%s.rfs", name);
	return lt_pack_u8(dir, file, "w", 4096, 0, n, 5 * 4096, fill_wide);
}

struct opts {
	const char *pattern;
	uint64_t seed;
	int32_t rank, world;
	uint32_t batch;
	int drop_last;
	uint32_t epochs;
	const void *resume;
	size_t resume_len;
	const char *const *fields;
	size_t nfields;
	int no_verify;
	int mode;               /* RF_SHUFFLE_x + 1; 0: full */
	int direct;             /* 1: O_DIRECT, 2: buffered; 0: LT_DIRECT's choice */
	int map;
};

static int last_open_rc;

static rf_loader *
open_full(const struct opts *o)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, o->pattern);
	const char *paths[] = {path};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.fields = o->fields;
	cfg.nfields = o->nfields;
	cfg.batch_size = o->batch;
	cfg.drop_last = o->drop_last;
	cfg.epochs = o->epochs;
	cfg.shuffle = o->mode ? (enum rf_shuffle)(o->mode - 1) : RF_SHUFFLE_FULL;
	cfg.verify = !o->no_verify;
	cfg.seed = o->seed;
	cfg.rank = o->rank;
	cfg.world = o->world;
	cfg.device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg.pinned_bytes = 1 << 20;
	cfg.io_depth = 16;
	cfg.direct = getenv("LT_DIRECT") ? 1 : -1; /* small data: buffered by itself */
	if (o->direct)
		cfg.direct = o->direct == 1;
	cfg.map = o->map;
	lt_logged[0] = 0;
	cfg.log = lt_log_keep;
	cfg.resume = o->resume;
	cfg.resume_len = o->resume_len;
	rf_loader *ld = NULL;
	if ((last_open_rc = rf_loader_open(&ld, &cfg)) < 0)
		return NULL;
	return ld;
}

/* Samples of up to `max` batches (all when max is 0), a marker after each
 * batch; returns the batches taken. */
struct seq {
	uint64_t *v;
	size_t n, batches;
};

/* The batch whose rows the checks read: b itself on the host backend; in
 * device memory (cuda, gpu) a copy on the host, which the caller frees with
 * lt_host_batch_free when the result is not b.  Device memory is never read
 * from the host: on a GPU (and under the emulator) that faults. */
static const rf_batch *
host_rows(const rf_batch *b, struct lt_host_batch *hb)
{
	if (!lt_on_device)
		return b;
	lt_gpu_to_host(b, hb);
	LT_CHECK(hb->bad == 0);
	return &hb->b;
}

static size_t
take(rf_loader *ld, size_t max, struct seq *out, rf_plan *check)
{
	const rf_batch *b;
	rf_plan_item items[64];
	uint64_t epoch = UINT64_MAX, k = 0;
	size_t got = 0;
	while (max == 0 || got < max) {
		int rc = rf_loader_next(ld, &b);
		LT_CHECK(rc == 0);
		if (rc || !b)
			break;
		struct lt_host_batch hb;
		const rf_batch *rb = host_rows(b, &hb);
		if (check) {
			if (b->epoch != epoch) {
				epoch = b->epoch;
				k = 0;
				LT_CHECK(rf_plan_set_epoch(check, epoch) == 0);
			}
			uint32_t n = 0;
			LT_CHECK(rf_plan_batch(check, k++, items, 64, &n) == 0);
			LT_CHECK(n == b->samples && b->first_sample == items[0].pos);
			for (uint32_t i = 0; i < n && i < b->samples; i++)
				LT_CHECK(row_sample(rb, i) == items[i].sample);
		}
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = row_sample(rb, i);
			LT_CHECK(row_ok(rb, i, g));
			out->v[out->n++] = g;
		}
		out->v[out->n++] = UINT64_MAX - b->epoch;
		if (rb != b)
			lt_host_batch_free(&hb);
		LT_CHECK(rf_loader_release(ld, b, lt_gpu_on ? lt_gpu_stream : NULL) == 0);
		got++;
		out->batches++;
	}
	return got;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Split a run into epochs: the samples between markers of one epoch. */
static size_t
epoch_samples(const struct seq *s, uint64_t epoch, uint64_t *out)
{
	size_t m = 0, start = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i] >= UINT64_MAX - 1000) {
			if (UINT64_MAX - s->v[i] == epoch)
				for (size_t j = start; j < i; j++)
					out[m++] = s->v[j];
			start = i + 1;
		}
	}
	return m;
}

/* The samples of one epoch (markers dropped), sorted, equal 0..N-1. */
static int
is_permutation(const uint64_t *v, size_t n, uint64_t epoch, uint64_t N)
{
	struct seq q = {.v = (uint64_t *)v, .n = n};
	uint64_t *s = malloc((n + 1) * sizeof(*s));
	size_t m = epoch_samples(&q, epoch, s);
	int ok = m == N;
	qsort(s, m, 8, cmp_u64);
	for (size_t i = 0; ok && i < m; i++)
		ok = s[i] == i;
	free(s);
	return ok;
}

static void
test_order(const char *pattern, uint64_t N, uint32_t B)
{
	struct seq a = {.v = malloc(8 * (4 * N + 4 * N / B + 16))};
	struct seq b = {.v = malloc(8 * (4 * N + 4 * N / B + 16))};
	struct seq c = {.v = malloc(8 * (4 * N + 4 * N / B + 16))};
	rf_plan *plan = lt_make_plan(dir, pattern, RF_PLAN_FULL, 11, 0, 1, B, 1, 0);
	LT_CHECK(plan != NULL);
	struct opts o = {.pattern = pattern, .seed = 11, .rank = 0, .world = 1, .batch = B,
			 .epochs = 3};
	rf_loader *ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		take(ld, 0, &a, plan);
		rf_loader_close(&ld);
	}
	rf_plan_destroy(&plan);
	for (uint64_t e = 0; e < 3; e++)
		LT_CHECK(is_permutation(a.v, a.n, e, N));
	uint64_t *e0 = malloc(8 * N), *e1 = malloc(8 * N);
	LT_CHECK(epoch_samples(&a, 0, e0) == N && epoch_samples(&a, 1, e1) == N);
	LT_CHECK(memcmp(e0, e1, 8 * N) != 0);
	/* Not file order either. */
	size_t inorder = 0;
	for (uint64_t i = 0; i < N; i++)
		inorder += e0[i] == i;
	LT_CHECK(inorder < N / 4);

	/* Same seed, same order; another seed, another. */
	o.epochs = 1;
	ld = open_full(&o);
	if (ld) {
		take(ld, 0, &b, NULL);
		rf_loader_close(&ld);
	}
	o.seed = 12;
	ld = open_full(&o);
	if (ld) {
		take(ld, 0, &c, NULL);
		rf_loader_close(&ld);
	}
	LT_CHECK(b.n > N && memcmp(a.v, b.v, b.n * 8) == 0);
	LT_CHECK(c.n == b.n && memcmp(c.v, b.v, b.n * 8) != 0);
	LT_CHECK(is_permutation(c.v, c.n, 0, N));
	free(e0);
	free(e1);
	free(a.v);
	free(b.v);
	free(c.v);
}

static void
test_ranks(const char *pattern, uint64_t N)
{
	const uint32_t B = 9, W = 4;
	uint8_t *hit = calloc(2 * N, 1);
	size_t batches = SIZE_MAX;
	for (uint32_t r = 0; r < W; r++) {
		struct seq s = {.v = malloc(8 * (2 * N + 2 * N / B + 16))};
		rf_plan *plan = lt_make_plan(dir, pattern, RF_PLAN_FULL, 3, r, W, B, 1, 1);
		struct opts o = {.pattern = pattern, .seed = 3, .rank = (int32_t)r, .world = (int32_t)W,
				 .batch = B, .drop_last = 1, .epochs = 2};
		rf_loader *ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (ld) {
			take(ld, 0, &s, plan);
			rf_loader_close(&ld);
		}
		rf_plan_destroy(&plan);
		if (batches == SIZE_MAX)
			batches = s.batches;
		LT_CHECK(s.batches == batches);
		uint64_t *ep = malloc(8 * N);
		for (uint64_t e = 0; e < 2; e++) {
			size_t m = epoch_samples(&s, e, ep);
			LT_CHECK(m == (size_t)(N / (B * W)) * B);
			for (size_t i = 0; i < m; i++) {
				LT_CHECK(ep[i] < N && hit[e * N + ep[i]] == 0);
				if (ep[i] < N)
					hit[e * N + ep[i]] = 1;
			}
		}
		free(ep);
		free(s.v);
	}
	uint64_t covered = 0;
	for (uint64_t i = 0; i < N; i++)
		covered += hit[i];
	LT_CHECK(covered == N / (B * W) * (B * W));
	free(hit);
}

/* Resume after every k batches, each leg in a new loader, equals the
 * uninterrupted run. */
static void
test_resume(const char *pattern, uint64_t N)
{
	const uint32_t B = 13;
	size_t cap = 8 * (3 * N + 3 * N / B + 64);
	struct seq ref = {.v = malloc(cap)}, got = {.v = malloc(cap)};
	struct opts o = {.pattern = pattern, .seed = 5, .rank = 0, .world = 1, .batch = B,
			 .epochs = 2};
	rf_loader *ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (!ld)
		return;
	take(ld, 0, &ref, NULL);
	rf_loader_close(&ld);
	size_t total = ref.batches;
	size_t ks[] = {1, 4, total / 2 + 1};
	for (size_t t = 0; t < 3; t++) {
		size_t k = ks[t];
		got.n = got.batches = 0;
		uint8_t blob[RF_STATE_MAX];
		size_t len = 0;
		int have = 0;
		while (got.batches < total) {
			o.resume = have ? blob : NULL;
			o.resume_len = have ? len : 0;
			ld = open_full(&o);
			LT_CHECK(ld != NULL);
			if (!ld)
				break;
			/* `epochs` counts from the saved epoch: stop where the
			 * reference stopped. */
			size_t n = take(ld, k < total - got.batches ? k : total - got.batches, &got,
					NULL);
			LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
			have = 1;
			rf_loader_close(&ld);
			if (n == 0)
				break;
		}
		if (got.n != ref.n || memcmp(got.v, ref.v, ref.n * 8) != 0) {
			fprintf(stderr, "%s: resume every %zu batches: %zu values, want %zu\n",
				pattern, k, got.n, ref.n);
			lt_failures++;
		}
	}
	/* rf_loader_state_load in a running loader. */
	o.resume = NULL;
	o.resume_len = 0;
	ld = open_full(&o);
	got.n = got.batches = 0;
	take(ld, 5, &got, NULL);
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0, skip = got.n;
	LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
	take(ld, 3, &got, NULL);
	LT_CHECK(rf_loader_state_load(ld, blob, len) == 0);
	got.n = skip;
	take(ld, total - 5, &got, NULL);
	LT_CHECK(got.n == ref.n && memcmp(got.v, ref.v, ref.n * 8) == 0);
	rf_loader_close(&ld);
	free(ref.v);
	free(got.v);
}

/* 4 ranks x 8 save after m batches; 2 ranks x 16 continue: together they get
 * exactly the samples the 4 ranks would have had next. */
static void
test_elastic(const char *pattern, uint64_t N)
{
	const size_t m = 5;
	size_t cap = 8 * (N + N / 8 + 64);
	uint8_t *want = calloc(N, 1), *have = calloc(N, 1);
	uint8_t blob[RF_STATE_MAX];
	size_t len = 0;
	for (int32_t r = 0; r < 4; r++) {
		struct seq s = {.v = malloc(cap)};
		struct opts o = {.pattern = pattern, .seed = 9, .rank = r, .world = 4, .batch = 8,
				 .drop_last = 1, .epochs = 1};
		rf_loader *ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			return;
		take(ld, m, &s, NULL);
		if (r == 0)
			LT_CHECK(rf_loader_state_save(ld, blob, sizeof(blob), &len) == 0);
		size_t before = s.n;
		take(ld, 0, &s, NULL);
		for (size_t i = before; i < s.n; i++)
			if (s.v[i] < N)
				want[s.v[i]]++;
		rf_loader_close(&ld);
		free(s.v);
	}
	for (int32_t r = 0; r < 2; r++) {
		struct seq s = {.v = malloc(cap)};
		struct opts o = {.pattern = pattern, .seed = 1, .rank = r, .world = 2, .batch = 16,
				 .drop_last = 1, .epochs = 1, .resume = blob, .resume_len = len};
		rf_loader *ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			return;
		take(ld, 0, &s, NULL);
		for (size_t i = 0; i < s.n; i++)
			if (s.v[i] < N)
				have[s.v[i]]++;
		rf_loader_close(&ld);
		free(s.v);
	}
	uint64_t nwant = 0;
	for (uint64_t i = 0; i < N; i++)
		nwant += want[i];
	LT_CHECK(nwant > 0 && memcmp(want, have, N) == 0);
	free(want);
	free(have);
}

static void
test_refused(void)
{
	struct opts o = {.pattern = "z.rfs", .seed = 1, .rank = 0, .world = 1, .batch = 8,
			 .epochs = 1};
	rf_loader *ld = open_full(&o);
	LT_CHECK(ld == NULL);
	const char *msg = rf_loader_last_open_error();
	LT_CHECK(strstr(msg, "compressed") && strstr(msg, "window"));
	o.pattern = "v.rfs";
	ld = open_full(&o);
	LT_CHECK(ld == NULL);
	msg = rf_loader_last_open_error();
	LT_CHECK(strstr(msg, "'tok'") && strstr(msg, "window"));
	/* "img" comes after the variable field "tok": refused, naming it. */
	const char *after[] = {"y", "img"};
	o.fields = after;
	o.nfields = 2;
	ld = open_full(&o);
	LT_CHECK(ld == NULL && strstr(rf_loader_last_open_error(), "'tok'"));
	/* The fixed fields before it: fine. */
	const char *before[] = {"y", "x"};
	o.fields = before;
	ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		struct seq s = {.v = malloc(8 * 2000)};
		take(ld, 0, &s, NULL);
		LT_CHECK(is_permutation(s.v, s.n, 0, 1000 / 8 * 8 + (1000 % 8 ? 1000 % 8 : 0)));
		free(s.v);
		rf_loader_close(&ld);
	}
}

/* Where sample g's "img" value lies in dir/name (fields x u16[3], y i64,
 * img u8[4][5], all fixed: sections at 64-aligned offsets). */
static uint64_t
img_offset(const char *name, uint64_t g, uint64_t *chunk, uint64_t *in_chunk)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	const char *paths[] = {path};
	rf_dataset *ds;
	if (rf_dataset_open(&ds, paths, 1, NULL) < 0)
		return 0;
	rf_chunk_info ci;
	rf_dataset_find_chunk(ds, g, chunk);
	rf_dataset_chunk_info(ds, *chunk, &ci);
	rf_dataset_close(&ds);
	uint64_t n = ci.samples;
	uint64_t img = RF_ALIGN_UP(RF_ALIGN_UP(n * 6, 64) + n * 8, 64);
	*in_chunk = g - ci.first_sample;
	return ci.offset + img + *in_chunk * 20;
}

/* Read a whole epoch; returns the stream's end code (0, or the error of
 * rf_loader_next), counting delivered rows holding sample `bad` and rows
 * whose values are wrong. */
static int
drain(rf_loader *ld, uint64_t bad, size_t *bad_rows, size_t *wrong_rows, size_t *rows)
{
	const rf_batch *b;
	int rc;
	*bad_rows = *wrong_rows = *rows = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		struct lt_host_batch hb;
		const rf_batch *rb = host_rows(b, &hb);
		for (uint32_t i = 0; i < b->samples; i++) {
			uint64_t g = row_sample(rb, i);
			*bad_rows += g == bad;
			*wrong_rows += !row_ok(rb, i, g);
			++*rows;
		}
		if (rb != b)
			lt_host_batch_free(&hb);
		rf_loader_release(ld, b, NULL);
	}
	return rc;
}

static void
test_flip(void)
{
	const uint64_t N = 500, G = 321;
	LT_CHECK(lt_pack(dir, "c", N, 0, 4096, 0, 0) == 0);
	uint64_t chunk = 0, in_chunk = 0;
	uint64_t at = img_offset("c.rfs", G, &chunk, &in_chunk);
	LT_CHECK(at > 0 && chunk > 0);
	lt_flip_byte(dir, "c.rfs", at + 7, 0x20);
	char want_chunk[64], want_sample[96];
	snprintf(want_chunk, sizeof(want_chunk), ": chunk %llu at offset ",
		 (unsigned long long)chunk);
	snprintf(want_sample, sizeof(want_sample), "sample %llu of the chunk (sample %llu of the "
		 "dataset), field img", (unsigned long long)in_chunk, (unsigned long long)G);
	size_t bad, wrong, rows;
	/* Full mode, verify on: the stream stops at the bad sample. */
	struct opts o = {.pattern = "c.rfs", .seed = 5, .rank = 0, .world = 1, .batch = 8,
			 .epochs = 1};
	rf_loader *ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		int rc = drain(ld, G, &bad, &wrong, &rows);
		const char *m = rf_loader_errmsg(ld);
		LT_CHECK(rc == RF_ECHECKSUM);
		LT_CHECK(bad == 0 && wrong == 0 && rows < N);
		LT_CHECK(strstr(m, "c.rfs") && strstr(m, want_chunk) && strstr(m, want_sample));
		if (!strstr(m, want_sample))
			fprintf(stderr, "message: %s\n", m);
		rf_loader_close(&ld);
	}
	/* Only the loaded fields are checked: without img, the epoch is whole. */
	const char *xy[] = {"x", "y"};
	o.fields = xy;
	o.nfields = 2;
	ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		LT_CHECK(drain(ld, G, &bad, &wrong, &rows) == 0 && rows == N && bad == 1);
		rf_loader_close(&ld);
	}
	o.fields = NULL;
	o.nfields = 0;
	/* Verify off: delivered as it is on disk. */
	o.no_verify = 1;
	ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		LT_CHECK(drain(ld, G, &bad, &wrong, &rows) == 0);
		LT_CHECK(rows == N && bad == 1 && wrong == 1);
		rf_loader_close(&ld);
	}
	/* A chunk mode catches it with the chunk's checksum. */
	o.no_verify = 0;
	o.mode = RF_SHUFFLE_CHUNKS + 1;
	ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		LT_CHECK(drain(ld, G, &bad, &wrong, &rows) == RF_ECHECKSUM && bad == 0);
		rf_loader_close(&ld);
	}
}

/* A flipped byte in a sample's row of its chunk's checksum table.  Read
 * with O_DIRECT, the stream stops the same way as for a flipped value,
 * naming the sample and the field whose entry no longer matches.  From
 * memory the chunk's whole XXH3-64 shows the values intact: the table is
 * named as damaged in a warning and both epochs arrive exactly. */
static void
test_flip_table(void)
{
	const uint64_t N = 500, G = 77;
	LT_CHECK(lt_pack(dir, "t", N, 0, 4096, 0, 0) == 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/t.rfs", dir);
	const char *paths[] = {path};
	rf_dataset *ds;
	LT_CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
	uint64_t chunk = 0;
	rf_chunk_info ci;
	rf_dataset_find_chunk(ds, G, &chunk);
	rf_dataset_chunk_info(ds, chunk, &ci);
	rf_dataset_close(&ds);
	/* Fields x, y, img: the entry of y is the second of the row. */
	uint64_t in_chunk = G - ci.first_sample;
	lt_flip_byte(dir, "t.rfs",
		     rf_fmt_sums_offset(ci.offset, ci.stored_bytes) + in_chunk * 24 + 8 + 3, 0x20);
	char want[96];
	snprintf(want, sizeof(want), "sample %llu of the chunk (sample %llu of the dataset), "
		 "field y", (unsigned long long)in_chunk, (unsigned long long)G);
	struct opts o = {.pattern = "t.rfs", .seed = 8, .rank = 0, .world = 1, .batch = 8,
			 .epochs = 2, .direct = 1};
	rf_loader *ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		size_t bad, wrong, rows;
		LT_CHECK(drain(ld, G, &bad, &wrong, &rows) == RF_ECHECKSUM && bad == 0);
		LT_CHECK(strstr(rf_loader_errmsg(ld), want) != NULL);
		/* The resident tables' check caught the table first. */
		LT_CHECK(strstr(lt_logged, "per-sample checksum table") &&
			 strstr(lt_logged, "does not match its XXH3-64 in the index"));
		rf_loader_close(&ld);
	}
	o.direct = 2;
	ld = open_full(&o);
	LT_CHECK(ld != NULL);
	if (ld) {
		size_t bad, wrong, rows;
		LT_CHECK(drain(ld, G, &bad, &wrong, &rows) == 0);
		LT_CHECK(bad == 2 && wrong == 0 && rows == 2 * N);
		LT_CHECK(strstr(lt_logged, "per-sample checksum table is damaged"));
		rf_loader_close(&ld);
	}
}

/* The first batch of a host run from memory: the consumer waits for it, so
 * its checks run on the consumer's thread, in rf_loader_next (full.c).  A
 * byte flipped in its first sample's value, or in that sample's row of
 * checksums with a value of the chunk flipped too (a row alone is taken for
 * a damaged table once the chunk's whole hash holds: test_flip_table),
 * stops the stream there the same way: nothing delivered, the message
 * naming sample and field, and every later call failing too. */
static void
test_flip_first(void)
{
	if (use_cuda || lt_gpu_on)
		return;
	const uint64_t N = 500;
	for (int what = 0; what < 2; what++) {
		const char *name = what ? "q1.rfs" : "q0.rfs";
		LT_CHECK(lt_pack(dir, what ? "q1" : "q0", N, 0, 4096, 0, 0) == 0);
		struct opts o = {.pattern = name, .seed = 9, .rank = 0, .world = 1, .batch = 8,
				 .epochs = 1, .direct = 2, .no_verify = 1};
		rf_loader *ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			return;
		const rf_batch *b;
		uint64_t g = 0;
		LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
		if (b) {
			g = row_sample(b, 0);
			rf_loader_release(ld, b, NULL);
		}
		rf_loader_close(&ld);
		uint64_t chunk = 0, in_chunk = 0;
		uint64_t at = img_offset(name, g, &chunk, &in_chunk);
		LT_CHECK(at > 0);
		if (what == 0) {
			lt_flip_byte(dir, name, at + 3, 0x20);
		} else {
			char path[512];
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			const char *paths[] = {path};
			rf_dataset *ds;
			LT_CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
			rf_chunk_info ci;
			rf_dataset_chunk_info(ds, chunk, &ci);
			rf_dataset_close(&ds);
			/* Fields x, y, img: y's entry is the second of the row. */
			lt_flip_byte(dir, name, rf_fmt_sums_offset(ci.offset, ci.stored_bytes) +
					in_chunk * 24 + 8 + 5, 0x20);
			lt_flip_byte(dir, name, at + 3, 0x20);
		}
		char want[128];
		snprintf(want, sizeof(want), "sample %llu of the chunk (sample %llu of the "
			 "dataset), field %s", (unsigned long long)in_chunk, (unsigned long long)g,
			 what ? "y" : "img");
		o.no_verify = 0;
		ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			return;
		size_t bad, wrong, rows;
		LT_CHECK(drain(ld, g, &bad, &wrong, &rows) == RF_ECHECKSUM);
		LT_CHECK(bad == 0 && wrong == 0 && rows == 0);
		const char *m = rf_loader_errmsg(ld);
		LT_CHECK(strstr(m, name) && strstr(m, want));
		if (!strstr(m, want))
			fprintf(stderr, "message: %s (want %s)\n", m, want);
		LT_CHECK(rf_loader_next(ld, &b) == RF_ECHECKSUM && strstr(rf_loader_errmsg(ld), want));
		rf_loader_close(&ld);
	}
}

/* A hash of every byte of a batch's fields (host memory only). */
static uint64_t
batch_hash(const rf_batch *b)
{
	uint64_t h = 1469598103934665603ull;
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		const uint8_t *d = bf->data;
		for (uint64_t j = 0; j < bf->bytes; j++)
			h = (h ^ d[j]) * 1099511628211ull;
	}
	return h;
}

/* Full shuffling from memory (buffered or map: samples copied from the
 * mapped shards) delivers the very bytes the read path (O_DIRECT, or its
 * buffered fallback on tmpfs) delivers, batch by batch, and says which it
 * chose; a flipped byte is caught from memory with the read path's
 * message. */
static void
test_mem(const char *pattern, uint64_t N)
{
	if (use_cuda || lt_gpu_on)
		return;
	uint64_t *hv[3] = {0};
	size_t nb[3] = {0};
	for (int m = 0; m < 3; m++) {
		struct opts o = {.pattern = pattern, .seed = 21, .rank = 0, .world = 1, .batch = 24,
				 .epochs = 2, .direct = m == 0 ? 1 : 2, .map = m == 2};
		rf_loader *ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			return;
		LT_CHECK(strstr(lt_logged, m == 0 ? "shuffle full: one read per sample"
					   : "shuffle full: samples copied from the mapped shards"));
		hv[m] = calloc(2 * N, sizeof(uint64_t));
		const rf_batch *b;
		int rc;
		while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
			if (nb[m] < 2 * N)
				hv[m][nb[m]++] = batch_hash(b);
			rf_loader_release(ld, b, NULL);
		}
		LT_CHECK(rc == 0);
		rf_loader_close(&ld);
	}
	LT_CHECK(nb[0] > 0 && nb[0] == nb[1] && nb[0] == nb[2]);
	for (size_t i = 0; i < nb[0] && i < nb[1] && i < nb[2]; i++)
		LT_CHECK(hv[0][i] == hv[1][i] && hv[0][i] == hv[2][i]);
	for (int m = 0; m < 3; m++)
		free(hv[m]);
}

static void
test_v1(uint64_t N)
{
	lt_pack_format = 1;
	LT_CHECK(lt_pack(dir, "old", N, 0, 4096, 0, 0) == 0);
	lt_pack_format = 0;
	struct opts o = {.pattern = "old.rfs", .seed = 3, .rank = 0, .world = 1, .batch = 8,
			 .epochs = 1};
	rf_loader *ld = open_full(&o);
	const char *m = rf_loader_last_open_error();
	LT_CHECK(ld == NULL && last_open_rc == RF_EUSAGE);
	LT_CHECK(strstr(m, "old.rfs") && strstr(m, "format version 1") &&
		 strstr(m, "ringfeed pack") && strstr(m, "verify = 0"));
	/* Unchecked on request, and the other modes check chunks as ever. */
	o.no_verify = 1;
	for (int mode = 0; mode <= RF_SHUFFLE_WINDOW + 1; mode++) {
		if (mode == 1)
			o.no_verify = 0;
		o.mode = mode;
		ld = open_full(&o);
		LT_CHECK(ld != NULL);
		if (!ld)
			continue;
		struct seq s = {.v = malloc(8 * (2 * N + 64))};
		take(ld, 0, &s, NULL);
		LT_CHECK(is_permutation(s.v, s.n, 0, N));
		free(s.v);
		rf_loader_close(&ld);
	}
	/* Full mode over a mix of format 1 and 2 shards names the old one. */
	o.mode = 0;
	o.pattern = "[co]*.rfs"; /* c.rfs (format 2), old.rfs */
	LT_CHECK(open_full(&o) == NULL && strstr(rf_loader_last_open_error(), "old.rfs"));
}

int
main(int argc, char **argv)
{
	int rc = lt_backend(argc, argv, &emu, &use_cuda);
	if (rc)
		return rc;
	snprintf(dir, sizeof(dir), "%s",
		 lt_tmpdir(lt_gpu_on ? "full-gpu" : use_cuda ? "full-cuda" : "full-host"));
	const uint64_t N = 1234, NW = 300;
	LT_CHECK(lt_pack(dir, "f", N, 0, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "s", N, 0, 2048, 16384, 0) == 0);
	LT_CHECK(lt_pack(dir, "z", 1000, 1, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "v", 1000, 0, 4096, 0, 1) == 0);
	LT_CHECK(pack_wide("w", NW) == 0);

	test_order("f.rfs", N, 17);
	test_order("s-*.rfs", N, 32);
	test_order("w.rfs", NW, 7);
	test_ranks("f.rfs", N);
	test_ranks("w.rfs", NW);
	test_resume("s-*.rfs", N);
	test_resume("w.rfs", NW);
	test_elastic("f.rfs", N);
	test_refused();
	test_flip();
	test_flip_table();
	test_flip_first();
	test_mem("f.rfs", N);
	test_mem("w.rfs", NW);
	test_v1(N);
	lt_rmtree(dir);
	lt_gpu_fini();
	if (use_cuda && !lt_gpu_on) {
		lt_emu_clean(&emu, 0);
	}
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
