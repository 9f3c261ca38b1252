/* SPDX-License-Identifier: MIT */
/*
 * Description: mixtures through the loader (rf_config.sources).  Three
 * sources of very different sizes and chunk sizes (5000 samples in 64-byte
 * chunks, 300 in 4 KiB ones, 2000 compressed), each sample an id (source x
 * 2^32 + index) and a variable field, weights 0.7/0.2/0.1:
 * - every batch and every window of 100 batches holds each source's share
 *   +- 2 D_s, the running totals +- D_s, and
 *   every source's draws walk whole permutations of it (each source epoch
 *   holds each sample once);
 * - the stream is the same in two runs, and with 2 ranks of half the batch
 *   the ranks' batches k together are the 1-rank batch k, their counts equal;
 * - a position saved after any of several batches (in epoch 0, at an epoch's
 *   end, in epoch 1) resumes to the rest of the uninterrupted stream, by
 *   rf_config.resume and by rf_loader_state_load, and by 2 ranks of half
 *   the batch (elastic); rewind restarts it;
 * - the same shape and an exact resume with window shuffling, map mode
 *   and file order;
 * - per-source stats count the samples delivered;
 * - weight 0 leaves a source out; negative and NaN weights, a field
 *   mismatch and a corrupt source are refused with the source's name;
 *   with on_error skip, the corrupt chunk counts once per source epoch;
 *   fields in another order name the first that differs, and two sources
 *   of one name are refused.
 */
#include <inttypes.h>
#include <math.h>

#include "lt.h"

enum { S = 3, B = 32, EPOCHS = 2 };

static char dir[256];
static const uint64_t NS[S] = {5000, 300, 2000};
static const char *NAMES[S] = {"web", "code", "math"};
static char paths[S + 3][512];

static int
pack(const char *path, uint32_t src, uint64_t n, uint64_t chunk_bytes, int zstd,
     enum rf_dtype id_type)
{
	rf_schema s;
	memset(&s, 0, sizeof s);
	int rc = rf_schema_add(&s, "id", id_type, 0, NULL, -1);
	if (!rc)
		rc = rf_schema_add(&s, "tok", RF_DTYPE_I32, 1, (uint64_t[]){0}, 0);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = chunk_bytes;
	if (zstd)
		cfg.zstd_level = 1;
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = ((uint64_t)src << 32) | i;
		int32_t tok[5];
		size_t nt = (size_t)(i % 6);
		for (size_t j = 0; j < nt; j++)
			tok[j] = (int32_t)(id + j);
		rf_value v[2] = {{&id, id_type == RF_DTYPE_U64 ? 8 : 4}, {tok, nt * 4}};
		if ((rc = rf_writer_add(w, v)) < 0) {
			rf_writer_abort(&w);
			return rc;
		}
	}
	return rf_writer_close(&w);
}

struct stream {
	uint64_t *ids;    /* every sample delivered, in order */
	uint32_t *bsize;  /* each batch's size */
	uint64_t n, nb;
	uint8_t state[RF_STATE_MAX]; /* after `save_after` batches */
	size_t state_len;
	rf_source_stats st[S];
};

static void
cfg_for(rf_config *cfg, rf_source *src, const double *w, uint32_t rank, uint32_t world,
	uint32_t batch)
{
	rf_config_init(cfg);
	for (int i = 0; i < S; i++)
		src[i] = (rf_source){paths[i], w[i], NAMES[i]};
	cfg->sources = src;
	cfg->nsources = S;
	cfg->batch_size = batch;
	cfg->shuffle = RF_SHUFFLE_CHUNKS;
	cfg->seed = 11;
	cfg->epochs = EPOCHS;
	cfg->drop_last = 1;
	cfg->rank = (int32_t)rank;
	cfg->world = world;
	cfg->device = RF_DEVICE_HOST;
	cfg->var_bytes = 4096;
}

/* Stream to the end (or `stop` batches), saving the position after
 * `save_after` batches. */
static int
run(const rf_config *cfg, uint64_t save_after, uint64_t stop, struct stream *out)
{
	memset(out, 0, sizeof *out);
	rf_loader *ld;
	int rc = rf_loader_open(&ld, cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return rc;
	}
	uint64_t cap = 1 << 16;
	out->ids = malloc(cap * 8);
	out->bsize = malloc(cap * 4);
	const rf_batch *b;
	while ((!stop || out->nb < stop) && (rc = rf_loader_next(ld, &b)) == 0 && b) {
		uint64_t tmp[B];
		LT_CHECK(b->samples <= B && b->fields[0].bytes == 8ull * b->samples);
		rf_batch_field_read(b, 0, tmp, sizeof tmp);
		for (uint32_t i = 0; i < b->samples && out->n < cap; i++)
			out->ids[out->n++] = tmp[i];
		out->bsize[out->nb++] = b->samples;
		rf_loader_release(ld, b, NULL);
		if (out->nb == save_after) {
			LT_CHECK(rf_loader_state_size(ld) <= RF_STATE_MAX);
			rc = rf_loader_state_save(ld, out->state, sizeof out->state, &out->state_len);
			LT_CHECK(rc == 0 && out->state_len == rf_loader_state_size(ld));
		}
	}
	if (rc < 0)
		fprintf(stderr, "next: %d %s\n", rc, rf_loader_errmsg(ld));
	for (int i = 0; i < S; i++) {
		LT_CHECK(rf_loader_source_stats(ld, (size_t)i, &out->st[i]) == 0);
		LT_CHECK(!strcmp(out->st[i].name, NAMES[i]));
		out->st[i].name = NULL; /* the loader's */
	}
	LT_CHECK(rf_loader_source_stats(ld, S, &out->st[0]) == -ERANGE);
	rf_loader_close(&ld);
	return rc;
}

static void
stream_free(struct stream *s)
{
	free(s->ids);
	free(s->bsize);
}

static void
check_shape(const struct stream *s, const double *w, uint64_t epoch_len)
{
	double sum = 0;
	for (int i = 0; i < S; i++)
		sum += w[i];
	/* Proportions: the running totals of the first epoch within D_s < 1
	 * and every batch within 2 D_s < 2 samples with 3 sources (the
	 * documented bounds), */
	uint64_t per_epoch = epoch_len / B;
	LT_CHECK(s->nb == per_epoch * EPOCHS);
	uint64_t run_c[S] = {0};
	for (uint64_t k = 0; k < s->nb; k++) {
		uint64_t c[S] = {0};
		for (uint64_t i = k * B; i < (k + 1) * B; i++)
			c[s->ids[i] >> 32]++;
		for (int i = 0; i < S; i++) {
			double want = (double)B * w[i] / sum;
			run_c[i] += c[i];
			double run_want = (double)(k + 1) * B * w[i] / sum;
			if (fabs((double)c[i] - want) >= 2.0 ||
			    (k < per_epoch && fabs((double)run_c[i] - run_want) >= 1.0)) {
				fprintf(stderr, "batch %" PRIu64 ": source %d has %" PRIu64 " (want "
					"%.2f), %" PRIu64 " so far (want %.2f)\n", k, i, c[i], want,
					run_c[i], run_want);
				LT_CHECK(0);
				return;
			}
		}
	}
	/* and every window of 100 batches (full batches, drop_last) within
	 * 2 D_s. */
	uint64_t windows = 0;
	for (uint64_t k = 0; k + 100 <= s->nb; k++) {
		uint64_t c[S] = {0};
		for (uint64_t i = k * B; i < (k + 100) * B; i++)
			c[s->ids[i] >> 32]++;
		for (int i = 0; i < S; i++) {
			double want = 100.0 * B * w[i] / sum;
			if (fabs((double)c[i] - want) >= 2.0) {
				fprintf(stderr, "window at batch %" PRIu64 ": source %d has %" PRIu64
					", want %.2f\n", k, i, c[i], want);
				LT_CHECK(0);
				return;
			}
		}
		windows++;
	}
	LT_CHECK(windows > 0);
	/* Each source epoch is a permutation of the source (the dropped tail
	 * of a mixture epoch is skipped, so only the first epoch's draws are
	 * known to be contiguous). */
	for (int src = 0; src < S; src++) {
		if (w[src] == 0)
			continue;
		uint8_t *seen = calloc(NS[src], 1);
		uint64_t drawn = 0;
		for (uint64_t i = 0; i < per_epoch * B; i++) {
			if ((int)(s->ids[i] >> 32) != src)
				continue;
			uint64_t idx = s->ids[i] & 0xffffffffu;
			LT_CHECK(idx < NS[src]);
			if (drawn % NS[src] == 0)
				memset(seen, 0, NS[src]);
			LT_CHECK(!seen[idx]);
			seen[idx] = 1;
			drawn++;
		}
		free(seen);
	}
}

static int
same(const struct stream *a, uint64_t a_from, const struct stream *b)
{
	if (a->n - a_from != b->n) {
		fprintf(stderr, "resumed stream has %" PRIu64 " samples, want %" PRIu64 "\n", b->n,
			a->n - a_from);
		return 0;
	}
	return memcmp(a->ids + a_from, b->ids, b->n * 8) == 0;
}

static void
expect_open_error(const rf_config *cfg, int code, const char *want1, const char *want2)
{
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, cfg);
	const char *msg = rf_loader_last_open_error();
	if ((code ? rc != code : rc >= 0) || !strstr(msg, want1) || (want2 && !strstr(msg, want2))) {
		fprintf(stderr, "want %d with '%s' '%s', got %d: %s\n", code, want1,
			want2 ? want2 : "", rc, msg);
		LT_CHECK(0);
	}
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof dir, "/tmp/rf-sources-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	const uint64_t chunk[S] = {64, 4096, 1024};
	for (int i = 0; i < S; i++) {
		snprintf(paths[i], sizeof paths[i], "%s/%s.rfs", dir, NAMES[i]);
		if (pack(paths[i], (uint32_t)i, NS[i], chunk[i], i == 2, RF_DTYPE_U64) < 0)
			return 1;
	}
	const double w[S] = {0.7, 0.2, 0.1};
	uint64_t total = NS[0] + NS[1] + NS[2];
	rf_config cfg;
	rf_source src[S];

	/* The stream, its shape, and a second run. */
	cfg_for(&cfg, src, w, 0, 1, B);
	struct stream a, a2;
	LT_CHECK(run(&cfg, 0, 0, &a) == 0);
	check_shape(&a, w, total);
	LT_CHECK(run(&cfg, 0, 0, &a2) == 0);
	LT_CHECK(a.n == a2.n && memcmp(a.ids, a2.ids, a.n * 8) == 0);
	stream_free(&a2);
	/* Stats: samples drawn over the 2 epochs (drop_last: whole epochs are
	 * batches of B, so nothing dropped but the epoch tails). */
	uint64_t stat_sum = 0;
	for (int i = 0; i < S; i++) {
		uint64_t c = 0;
		for (uint64_t k = 0; k < a.n; k++)
			c += (int)(a.ids[k] >> 32) == i;
		LT_CHECK(a.st[i].samples >= c && a.st[i].samples - c <= B);
		LT_CHECK(a.st[i].epochs * NS[i] + a.st[i].in_epoch == a.st[i].samples);
		stat_sum += a.st[i].samples;
	}
	/* A dropped epoch tail is drawn when the next epoch starts. */
	LT_CHECK(stat_sum == a.n + (total % B) * (EPOCHS - 1));
	LT_CHECK(a.st[1].epochs >= 3); /* 300 samples at 20% of 14600 */

	/* Two ranks of half the batch: batch k of rank 0 then rank 1 is the
	 * one-rank batch k. */
	struct stream r[2];
	for (uint32_t k = 0; k < 2; k++) {
		cfg_for(&cfg, src, w, k, 2, B / 2);
		LT_CHECK(run(&cfg, 0, 0, &r[k]) == 0);
	}
	LT_CHECK(r[0].nb == r[1].nb && r[0].nb == a.nb);
	for (uint64_t k = 0; k < a.nb && k < r[0].nb && k < r[1].nb; k++) {
		LT_CHECK(memcmp(r[0].ids + k * (B / 2), a.ids + k * B, B / 2 * 8) == 0);
		LT_CHECK(memcmp(r[1].ids + k * (B / 2), a.ids + k * B + B / 2, B / 2 * 8) == 0);
	}
	stream_free(&r[0]);
	stream_free(&r[1]);

	/* Resume at several points: rf_config.resume, and state_load. */
	const uint64_t at[] = {1, 37, (NS[0] + NS[1] + NS[2]) / B, (NS[0] + NS[1] + NS[2]) / B + 5,
			       a.nb - 1};
	for (size_t t = 0; t < sizeof at / sizeof at[0]; t++) {
		struct stream cut, rest;
		cfg_for(&cfg, src, w, 0, 1, B);
		LT_CHECK(run(&cfg, at[t], at[t], &cut) == 0);
		LT_CHECK(cut.state_len > 0);
		cfg.resume = cut.state;
		cfg.resume_len = cut.state_len;
		LT_CHECK(run(&cfg, 0, 0, &rest) == 0);
		if (!same(&a, at[t] * B, &rest)) {
			fprintf(stderr, "resume after batch %" PRIu64 " differs\n", at[t]);
			LT_CHECK(0);
		}
		stream_free(&rest);
		/* The same blob loaded into an open loader, after some batches. */
		cfg.resume = NULL;
		cfg.resume_len = 0;
		rf_loader *ld;
		LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
		const rf_batch *b;
		for (int k = 0; k < 3 && rf_loader_next(ld, &b) == 0; k++)
			rf_loader_release(ld, b, NULL);
		LT_CHECK(rf_loader_state_load(ld, cut.state, cut.state_len) == 0);
		int nrc = rf_loader_next(ld, &b);
		if (nrc != 0 || !b)
			fprintf(stderr, "next after state_load: %d %s\n", nrc, rf_loader_errmsg(ld));
		LT_CHECK(nrc == 0 && b);
		uint64_t ids[B] = {0}, id;
		rf_batch_field_read(b, 0, ids, sizeof ids);
		id = ids[0];
		if (!(at[t] * B < a.n && id == a.ids[at[t] * B])) {
			fprintf(stderr, "state_load at %" PRIu64 ": id %" PRIx64 ", want %" PRIx64 "\n",
				at[t], id, a.ids[at[t] * B]);
			LT_CHECK(0);
		}
		rf_loader_release(ld, b, NULL);
		/* Rewind to the start. */
		LT_CHECK(rf_loader_rewind(ld, 0) == 0);
		LT_CHECK(rf_loader_next(ld, &b) == 0);
		rf_batch_field_read(b, 0, ids, sizeof ids);
		LT_CHECK(ids[0] == a.ids[0]);
		rf_loader_release(ld, b, NULL);
		rf_loader_close(&ld);
		stream_free(&cut);
	}
	/* Elastic: saved with 1 rank of 32, resumed by 2 ranks of 16. */
	{
		struct stream cut, rr[2];
		cfg_for(&cfg, src, w, 0, 1, B);
		LT_CHECK(run(&cfg, 37, 37, &cut) == 0);
		for (uint32_t k = 0; k < 2; k++) {
			cfg_for(&cfg, src, w, k, 2, B / 2);
			cfg.resume = cut.state;
			cfg.resume_len = cut.state_len;
			LT_CHECK(run(&cfg, 0, 0, &rr[k]) == 0);
		}
		LT_CHECK(rr[0].nb == rr[1].nb && rr[0].nb == a.nb - 37);
		for (uint64_t k = 0; k < rr[0].nb && k < rr[1].nb && 37 + k < a.nb; k++) {
			LT_CHECK(memcmp(rr[0].ids + k * (B / 2), a.ids + (37 + k) * B, B / 2 * 8) == 0);
			LT_CHECK(memcmp(rr[1].ids + k * (B / 2), a.ids + (37 + k) * B + B / 2,
					B / 2 * 8) == 0);
		}
		stream_free(&cut);
		stream_free(&rr[0]);
		stream_free(&rr[1]);
	}
	/* A blob of a mixture with other weights is refused. */
	{
		struct stream cut;
		cfg_for(&cfg, src, w, 0, 1, B);
		LT_CHECK(run(&cfg, 5, 5, &cut) == 0);
		const double w2[S] = {0.5, 0.3, 0.2};
		cfg_for(&cfg, src, w2, 0, 1, B);
		cfg.resume = cut.state;
		cfg.resume_len = cut.state_len;
		expect_open_error(&cfg, RF_ESTATE, "resume", NULL);
		stream_free(&cut);
	}
	stream_free(&a);

	/* Window shuffling (W per source), map mode, none: the same shape,
	 * and a resume. */
	for (int mode = 0; mode < 3; mode++) {
		cfg_for(&cfg, src, w, 0, 1, B);
		if (mode == 0) {
			cfg.shuffle = RF_SHUFFLE_WINDOW;
			cfg.window = 3;
		} else if (mode == 1) {
			cfg.map = 1;
		} else {
			cfg.shuffle = RF_SHUFFLE_NONE;
		}
		struct stream m, cut, rest;
		LT_CHECK(run(&cfg, 0, 0, &m) == 0);
		check_shape(&m, w, total);
		LT_CHECK(run(&cfg, 50, 50, &cut) == 0);
		cfg.resume = cut.state;
		cfg.resume_len = cut.state_len;
		LT_CHECK(run(&cfg, 0, 0, &rest) == 0);
		if (!same(&m, 50 * B, &rest)) {
			fprintf(stderr, "mode %d: resume differs\n", mode);
			LT_CHECK(0);
		}
		stream_free(&m);
		stream_free(&cut);
		stream_free(&rest);
	}

	/* A 3-sample source at half the stream: 5 of its epochs a batch, each
	 * a permutation; a resume inside them. */
	{
		snprintf(paths[S + 2], sizeof paths[S + 2], "%s/tiny.rfs", dir);
		LT_CHECK(pack(paths[S + 2], 1, 3, 4096, 0, RF_DTYPE_U64) == 0);
		const double wt[S] = {1, 1, 0};
		cfg_for(&cfg, src, wt, 0, 1, B);
		src[1].path = paths[S + 2];
		struct stream m, cut, rest;
		LT_CHECK(run(&cfg, 0, 0, &m) == 0);
		LT_CHECK(m.nb == (NS[0] + 3) / B * EPOCHS);
		uint64_t tiny = 0, seen = 0;
		for (uint64_t k = 0; k < (NS[0] + 3) / B * B; k++) {
			if ((m.ids[k] >> 32) != 1)
				continue;
			uint64_t idx = m.ids[k] & 0xffffffffu;
			LT_CHECK(idx < 3 && !(seen & (1u << idx)));
			seen |= 1u << idx;
			if (++tiny % 3 == 0)
				seen = 0;
		}
		LT_CHECK(tiny > 2000);
		LT_CHECK(run(&cfg, 9, 9, &cut) == 0);
		cfg.resume = cut.state;
		cfg.resume_len = cut.state_len;
		LT_CHECK(run(&cfg, 0, 0, &rest) == 0);
		LT_CHECK(same(&m, 9 * B, &rest));
		stream_free(&m);
		stream_free(&cut);
		stream_free(&rest);
	}

	/* Weight 0: the source is never drawn. */
	{
		const double w0[S] = {0.7, 0, 0.3};
		cfg_for(&cfg, src, w0, 0, 1, B);
		struct stream z;
		LT_CHECK(run(&cfg, 0, 0, &z) == 0);
		uint64_t n1 = 0;
		for (uint64_t k = 0; k < z.n; k++)
			n1 += (z.ids[k] >> 32) == 1;
		LT_CHECK(n1 == 0 && z.n == (NS[0] + NS[2]) / B * B * EPOCHS);
		LT_CHECK(z.st[1].samples == 0 && z.st[1].share == 0);
		check_shape(&z, w0, NS[0] + NS[2]);
		stream_free(&z);
	}
	/* Refused weights, naming the source. */
	{
		const double wn[S] = {0.7, -0.5, 0.1};
		cfg_for(&cfg, src, wn, 0, 1, B);
		expect_open_error(&cfg, RF_EUSAGE, "code", "negative");
		const double wnan[S] = {0.7, 0.2, NAN};
		cfg_for(&cfg, src, wnan, 0, 1, B);
		expect_open_error(&cfg, RF_EUSAGE, "math", NULL);
		const double wz[S] = {0, 0, 0};
		cfg_for(&cfg, src, wz, 0, 1, B);
		expect_open_error(&cfg, RF_EUSAGE, "0", NULL);
		/* paths and sources together */
		cfg_for(&cfg, src, w, 0, 1, B);
		const char *p1[] = {paths[0]};
		cfg.paths = p1;
		cfg.npaths = 1;
		expect_open_error(&cfg, RF_EUSAGE, "not both", NULL);
		cfg_for(&cfg, src, w, 0, 1, B);
		cfg.shuffle = RF_SHUFFLE_FULL;
		expect_open_error(&cfg, RF_EUSAGE, "full", NULL);
	}
	/* A field of another dtype: the source and the field are named. */
	{
		snprintf(paths[S], sizeof paths[S], "%s/other.rfs", dir);
		LT_CHECK(pack(paths[S], 9, 100, 1024, 0, RF_DTYPE_U32) == 0);
		cfg_for(&cfg, src, w, 0, 1, B);
		src[2].path = paths[S];
		src[2].name = "other";
		expect_open_error(&cfg, RF_ESCHEMA, "other", "'id'");
	}
	/* The same fields in another order: the first that differs is
	 * named, and the order; two sources of one name are refused. */
	{
		char p1[512], p2[512];
		snprintf(p1, sizeof p1, "%s/ab.rfs", dir);
		snprintf(p2, sizeof p2, "%s/ba.rfs", dir);
		for (int k = 0; k < 2; k++) {
			rf_schema s;
			memset(&s, 0, sizeof s);
			LT_CHECK(rf_schema_add(&s, "id", RF_DTYPE_U64, 0, NULL, -1) == 0);
			LT_CHECK(rf_schema_add(&s, k ? "b" : "a", RF_DTYPE_U8, 0, NULL, -1) == 0);
			LT_CHECK(rf_schema_add(&s, k ? "a" : "b", RF_DTYPE_U8, 0, NULL, -1) == 0);
			rf_writer_config wc;
			rf_writer_config_init(&wc);
			wc.no_fsync = 1;
			rf_writer *wr;
			LT_CHECK(rf_writer_open(&wr, k ? p2 : p1, &s, &wc) == 0);
			for (uint64_t i = 0; i < 100; i++) {
				uint8_t x = 1;
				rf_value v[3] = {{&i, 8}, {&x, 1}, {&x, 1}};
				LT_CHECK(rf_writer_add(wr, v) == 0);
			}
			LT_CHECK(rf_writer_close(&wr) == 0);
		}
		rf_source two[2] = {{p1, 1, "ab"}, {p2, 1, "ba"}};
		const char *idf[] = {"id"};
		rf_config c2;
		rf_config_init(&c2);
		c2.sources = two;
		c2.nsources = 2;
		c2.fields = idf;
		c2.nfields = 1;
		c2.batch_size = 8;
		c2.device = RF_DEVICE_HOST;
		expect_open_error(&c2, RF_ESCHEMA, "field 1 'b'", "order");
		two[1] = (rf_source){p1, 1, "ab"};
		expect_open_error(&c2, RF_EUSAGE, "'ab'", "both");
	}
	/* A corrupt source: its index cut short, then a chunk's bytes. */
	{
		snprintf(paths[S + 1], sizeof paths[S + 1], "%s/bad.rfs", dir);
		LT_CHECK(pack(paths[S + 1], 2, 2000, 1024, 0, RF_DTYPE_U64) == 0);
		FILE *f = fopen(paths[S + 1], "r+b");
		fseek(f, 0, SEEK_END);
		long len = ftell(f);
		LT_CHECK(ftruncate(fileno(f), len - 100) == 0);
		fclose(f);
		cfg_for(&cfg, src, w, 0, 1, B);
		src[2].path = paths[S + 1];
		src[2].name = "broken";
		expect_open_error(&cfg, 0, "broken", NULL);
		LT_CHECK(pack(paths[S + 1], 2, 2000, 1024, 0, RF_DTYPE_U64) == 0);
		f = fopen(paths[S + 1], "r+b");
		fseek(f, 4096 + 200, SEEK_SET);
		fputc(0x5a, f);
		fputc(0xa5, f);
		fclose(f);
		rf_loader *ld;
		int rc = rf_loader_open(&ld, &cfg);
		LT_CHECK(rc == 0);
		const rf_batch *b;
		while (rc == 0 && (rc = rf_loader_next(ld, &b)) == 0 && b)
			rf_loader_release(ld, b, NULL);
		LT_CHECK(rc < 0);
		if (!strstr(rf_loader_errmsg(ld), "bad.rfs") ||
		    !strstr(rf_loader_errmsg(ld), "source 'broken' (2)")) {
			fprintf(stderr, "corrupt chunk message: %s\n", rf_loader_errmsg(ld));
			LT_CHECK(0);
		}
		rf_loader_close(&ld);
		/* on_error skip: the bad chunk counts once per source epoch
		 * whose batches hold its substitutes, as samples are counted. */
		const double wb[S] = {0.2, 0.2, 0.6};
		cfg_for(&cfg, src, wb, 0, 1, B);
		src[2].path = paths[S + 1];
		src[2].name = "broken";
		cfg.on_error = RF_ON_ERROR_SKIP;
		LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
		while ((rc = rf_loader_next(ld, &b)) == 0 && b)
			rf_loader_release(ld, b, NULL);
		LT_CHECK(rc == 0);
		rf_stats st = {.size = sizeof st};
		rf_source_stats bs;
		LT_CHECK(rf_loader_stats(ld, &st) == 0);
		LT_CHECK(rf_loader_source_stats(ld, 2, &bs) == 0);
		uint64_t touched = bs.epochs + (bs.in_epoch > 0);
		if (!(touched >= 3 && st.chunks_skipped >= touched - 1 &&
		      st.chunks_skipped <= touched && st.samples_substituted > 0 &&
		      st.samples_substituted <= st.chunks_skipped * 2000)) {
			fprintf(stderr, "skip: %" PRIu64 " chunks, %" PRIu64 " samples, %" PRIu64
				" source epochs\n", st.chunks_skipped, st.samples_substituted, touched);
			LT_CHECK(0);
		}
		rf_loader_close(&ld);
	}
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
