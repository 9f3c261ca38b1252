/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_config.on_error = skip.  A dataset with a corrupt chunk
 * (raw and zstd) streamed on 4 ranks (rank/world in the config), with
 * shuffle none, chunks and window, against the same stream of an intact
 * copy: every rank delivers the batches the intact copy gives, of the same
 * sizes; each row of a sample of the bad chunk is a zero substitute (fixed
 * fields all 0, the variable field empty) and every other row is the
 * intact copy's sample at that place; stats count the chunk skipped and
 * the samples substituted.  The counters count what was delivered: after
 * every batch, with the pipeline given time to read ahead, over two epochs
 * on every rank (a chunk once per epoch and rank), and at a close in the
 * middle of an epoch with the bad chunk's substitutes read ahead but not
 * delivered.  The skip limit raises the chunk's error past it; raise mode
 * stops as before; shuffle full with skip and an unknown policy are
 * RF_EUSAGE at open.
 */
#include <inttypes.h>
#include <unistd.h>

#include "lt.h"

#define B 16
#define WORLD 4

static char *dir;

/* Flip a byte in the middle of dataset chunk `chunk`'s stored bytes; its
 * first sample and sample count into *first, *n. */
static void
corrupt(const char *name, uint64_t chunk, uint64_t *first, uint32_t *n)
{
	rf_dataset *ds;
	LT_CHECK(lt_dataset_open(&ds, dir, name) == 0);
	rf_chunk_info ci;
	LT_CHECK(rf_dataset_chunk_info(ds, chunk, &ci) == 0);
	*first = ci.first_sample;
	*n = ci.samples;
	FILE *f = fopen(rf_dataset_shard_path(ds, ci.shard), "r+b");
	LT_CHECK(f != NULL);
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	int c = fgetc(f);
	fseek(f, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
	rf_dataset_close(&ds);
}

static int
row_is_zero(const rf_batch *b, uint32_t i)
{
	for (uint32_t f = 0; f < b->nfields; f++) {
		const rf_batch_field *bf = &b->fields[f];
		const uint8_t *data = bf->data;
		if (bf->offsets) {
			if (bf->offsets[i + 1] != bf->offsets[i])
				return 0;
			continue;
		}
		uint64_t vb = bf->bytes / b->samples;
		for (uint64_t k = 0; k < vb; k++)
			if (data[(uint64_t)i * vb + k])
				return 0;
	}
	return 1;
}

static void
open_cfg(rf_config *cfg, struct lt_paths *p, const char *name, enum rf_shuffle sh,
	 int32_t rank, int32_t world, enum rf_on_error oe)
{
	lt_config(cfg, p, dir, name);
	cfg->batch_size = B;
	cfg->pinned_bytes = 256 << 10;
	cfg->window = 8;
	cfg->shuffle = sh;
	cfg->seed = 7;
	cfg->rank = rank;
	cfg->world = world;
	cfg->on_error = oe;
}

/* The samples (rows' "y") of one rank's stream, and its batch sizes. */
struct stream {
	uint64_t *g;
	uint32_t *sizes;
	uint64_t n, nb;
};

static void
run_stream(const char *name, enum rf_shuffle sh, int32_t rank, uint64_t bad_first,
	   uint32_t bad_n, const struct stream *ref, struct stream *out, rf_stats *st)
{
	struct lt_paths p;
	rf_config cfg;
	open_cfg(&cfg, &p, name, sh, rank, WORLD, ref ? RF_ON_ERROR_SKIP : RF_ON_ERROR_RAISE);
	rf_loader *ld;
	LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
	if (!ld)
		return;
	const rf_batch *b;
	int rc;
	uint64_t pos = 0, nb = 0, bad_rows = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		if (ref) {
			LT_CHECK(nb < ref->nb && b->samples == ref->sizes[nb]);
			for (uint32_t i = 0; i < b->samples && pos + i < ref->n; i++) {
				uint64_t g = ref->g[pos + i];
				if (g >= bad_first && g < bad_first + bad_n) {
					LT_CHECK(row_is_zero(b, i));
					bad_rows++;
				} else {
					LT_CHECK(lt_row_ok(b, i, g));
				}
			}
		} else {
			out->sizes[nb] = b->samples;
			for (uint32_t i = 0; i < b->samples; i++) {
				out->g[pos + i] = lt_row_sample(b, i);
				LT_CHECK(lt_row_ok(b, i, out->g[pos + i]));
			}
		}
		pos += b->samples;
		nb++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "rank %d: %s\n", rank, rf_loader_errmsg(ld));
	if (ref) {
		LT_CHECK(nb == ref->nb && pos == ref->n);
		rf_stats s;
		memset(&s, 0, sizeof(s));
		s.size = sizeof(s);
		LT_CHECK(rf_loader_stats(ld, &s) == 0);
		LT_CHECK(s.samples_substituted == bad_rows);
		LT_CHECK(s.chunks_skipped == (bad_rows ? 1u : 0u));
		*st = s;
	} else {
		out->n = pos;
		out->nb = nb;
	}
	rf_loader_close(&ld);
}

static void
test_ranks(int zstd, enum rf_shuffle sh)
{
	char good[32], bad[32];
	snprintf(good, sizeof(good), "good%d%d", zstd, (int)sh);
	snprintf(bad, sizeof(bad), "bad%d%d", zstd, (int)sh);
	LT_CHECK(lt_pack(dir, good, 2000, zstd, 4096, 0, 1) == 0);
	LT_CHECK(lt_pack(dir, bad, 2000, zstd, 4096, 0, 1) == 0);
	char gname[64], bname[64];
	snprintf(gname, sizeof(gname), "%s.rfs", good);
	snprintf(bname, sizeof(bname), "%s.rfs", bad);
	uint64_t first;
	uint32_t n;
	corrupt(bname, 5, &first, &n);
	uint64_t total_sub = 0, total_skip = 0, ref_bad = 0;
	for (int32_t r = 0; r < WORLD; r++) {
		struct stream ref = {calloc(2000, 8), calloc(2000, 4), 0, 0};
		run_stream(gname, sh, r, 0, 0, NULL, &ref, NULL);
		for (uint64_t i = 0; i < ref.n; i++)
			ref_bad += ref.g[i] >= first && ref.g[i] < first + n;
		rf_stats st;
		memset(&st, 0, sizeof(st));
		run_stream(bname, sh, r, first, n, &ref, NULL, &st);
		total_sub += st.samples_substituted;
		total_skip += st.chunks_skipped;
		free(ref.g);
		free(ref.sizes);
	}
	fprintf(stderr, "zstd %d shuffle %d: chunk of %u samples at %" PRIu64 ": %" PRIu64
		" substituted, %" PRIu64 " skips\n", zstd, (int)sh, n, first, total_sub, total_skip);
	LT_CHECK(ref_bad > 0 && total_sub == ref_bad);
	LT_CHECK(total_skip >= 1);
}

/* The substitutes of a delivered batch: its all-zero rows (no intact
 * sample is all zero: its y is g * 1000003 - 5).  Every other row must be
 * its sample's. */
static uint64_t
zero_rows(const rf_batch *b)
{
	uint64_t z = 0;
	for (uint32_t i = 0; i < b->samples; i++) {
		if (row_is_zero(b, i))
			z++;
		else
			LT_CHECK(lt_row_ok(b, i, lt_row_sample(b, i)));
	}
	return z;
}

/* rf_stats' skip counters against what the consumer received. */
static void
check_counts(rf_loader *ld, uint64_t rows, uint64_t chunks, const char *what, uint64_t nb)
{
	rf_stats s;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	LT_CHECK(rf_loader_stats(ld, &s) == 0);
	if (s.samples_substituted != rows || s.chunks_skipped != chunks) {
		fprintf(stderr, "%s after %" PRIu64 " batches: stats say %" PRIu64 " substitutes, %"
			PRIu64 " chunks; delivered %" PRIu64 ", %" PRIu64 "\n", what, nb,
			s.samples_substituted, s.chunks_skipped, rows, chunks);
		lt_failures++;
	}
}

/* One bad chunk, two epochs, each rank of WORLD: the counters after every
 * batch (a pause first, so the pipeline reads ahead) equal the substitutes
 * delivered so far and the epochs in which any was, also when the loader is
 * closed just before the first batch with substitutes (they are read ahead
 * by then) or just after it. */
static void
test_delivered(int zstd, enum rf_shuffle sh)
{
	char base[32], name[40], what[64];
	snprintf(base, sizeof(base), "dl%d%d", zstd, (int)sh);
	snprintf(name, sizeof(name), "%s.rfs", base);
	LT_CHECK(lt_pack(dir, base, 2000, zstd, 4096, 0, 1) == 0);
	uint64_t first;
	uint32_t n;
	corrupt(name, 5, &first, &n);
	for (int32_t r = 0; r < WORLD; r++) {
		uint64_t first_bad = UINT64_MAX; /* the first batch with substitutes */
		for (int stop = 0; stop < 3; stop++) {
			if (stop && first_bad == UINT64_MAX)
				break; /* this rank gets none of the chunk's samples */
			struct lt_paths p;
			rf_config cfg;
			open_cfg(&cfg, &p, name, sh, r, WORLD, RF_ON_ERROR_SKIP);
			cfg.epochs = 2;
			rf_loader *ld;
			LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
			if (!ld)
				return;
			snprintf(what, sizeof(what), "zstd %d shuffle %d rank %d stop %d", zstd,
				 (int)sh, r, stop);
			const rf_batch *b;
			int rc;
			uint64_t nb = 0, rows = 0, chunks = 0, epoch_with = UINT64_MAX;
			/* stop 1: close before batch first_bad; stop 2: after it. */
			uint64_t end = stop == 1 ? first_bad : stop == 2 ? first_bad + 1 : UINT64_MAX;
			while (nb < end && (rc = rf_loader_next(ld, &b)) == 0 && b) {
				LT_CHECK(rf_batch_wait(b, NULL) == 0);
				uint64_t z = zero_rows(b);
				if (z && first_bad == UINT64_MAX)
					first_bad = nb;
				if (z && b->epoch != epoch_with) {
					epoch_with = b->epoch;
					chunks++;
				}
				rows += z;
				nb++;
				LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
				usleep(1000);
				check_counts(ld, rows, chunks, what, nb);
			}
			if (stop == 0) {
				LT_CHECK(rc == 0);
				LT_CHECK(chunks == (rows ? 2u : 0u));
			}
			rf_loader_close(&ld);
		}
	}
}

static void
test_limit(void)
{
	LT_CHECK(lt_pack(dir, "lim", 2000, 0, 4096, 0, 1) == 0);
	uint64_t first;
	uint32_t n;
	corrupt("lim.rfs", 3, &first, &n);
	corrupt("lim.rfs", 6, &first, &n);
	corrupt("lim.rfs", 9, &first, &n);
	/* Raise (the default): the first bad chunk stops the stream. */
	for (int mode = 0; mode < 4; mode++) {
		struct lt_paths p;
		rf_config cfg;
		open_cfg(&cfg, &p, "lim.rfs", RF_SHUFFLE_NONE, 0, 1,
			 mode ? RF_ON_ERROR_SKIP : RF_ON_ERROR_RAISE);
		/* mode 2: the default, 16; mode 3: 3 epochs, the same 3 chunks
		 * each time count once against the limit. */
		cfg.skip_limit = mode == 1 ? 2 : mode == 3 ? 3 : 0;
		cfg.epochs = mode == 3 ? 3 : 1;
		rf_loader *ld;
		LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
		if (!ld)
			continue;
		const rf_batch *b;
		int rc;
		/* Substitutes delivered, and the chunks (of 74 samples here,
		 * so a zero row past the last one seen is a new chunk's). */
		uint64_t rows = 0, chunks = 0, last = UINT64_MAX, epoch = UINT64_MAX;
		while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
			LT_CHECK(rf_batch_wait(b, NULL) == 0);
			for (uint32_t i = 0; i < b->samples; i++) {
				if (!row_is_zero(b, i))
					continue;
				uint64_t pos = b->first_sample + i;
				if (b->epoch != epoch || pos > last + 1)
					chunks++;
				epoch = b->epoch;
				last = pos;
				rows++;
			}
			LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
		}
		rf_stats s;
		memset(&s, 0, sizeof(s));
		s.size = sizeof(s);
		LT_CHECK(rf_loader_stats(ld, &s) == 0);
		fprintf(stderr, "limit mode %d: rc %d, %" PRIu64 " skipped, %" PRIu64 " delivered: %s\n",
			mode, rc, s.chunks_skipped, chunks, rc ? rf_loader_errmsg(ld) : "");
		/* Counted as delivered (with the limit's error, the batches read
		 * ahead of it are not). */
		LT_CHECK(s.chunks_skipped == chunks && s.samples_substituted == rows);
		if (mode == 0) {
			LT_CHECK(rc == RF_ECHECKSUM && s.chunks_skipped == 0);
		} else if (mode == 1) {
			LT_CHECK(rc == RF_ECHECKSUM && s.chunks_skipped <= 2);
			LT_CHECK(strstr(rf_loader_errmsg(ld), "skip_limit 2") != NULL);
		} else if (mode == 2) {
			LT_CHECK(rc == 0 && s.chunks_skipped == 3);
		} else {
			LT_CHECK(rc == 0 && s.chunks_skipped == 9);
		}
		rf_loader_close(&ld);
	}
}

static void
test_usage(void)
{
	struct lt_paths p;
	rf_config cfg;
	rf_loader *ld;
	open_cfg(&cfg, &p, "lim.rfs", RF_SHUFFLE_FULL, 0, 1, RF_ON_ERROR_SKIP);
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_last_open_error(), "shuffle full") != NULL);
	open_cfg(&cfg, &p, "lim.rfs", RF_SHUFFLE_NONE, 0, 1, (enum rf_on_error)7);
	LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE);
}

int
main(void)
{
	dir = lt_tmpdir("skip");
	for (int zstd = 0; zstd < 2; zstd++) {
		test_ranks(zstd, RF_SHUFFLE_NONE);
		test_ranks(zstd, RF_SHUFFLE_CHUNKS);
		test_ranks(zstd, RF_SHUFFLE_WINDOW);
		test_delivered(zstd, RF_SHUFFLE_NONE);
		test_delivered(zstd, RF_SHUFFLE_WINDOW);
	}
	test_limit();
	test_usage();
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d failures\n", lt_failures);
	return lt_failures ? 1 : 0;
}
