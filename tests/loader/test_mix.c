/* SPDX-License-Identifier: MIT */
/*
 * Description: window shuffling mixes from the first batch.  A dataset of
 * 60,000 samples of 10 classes packed in label order (what walking an
 * image folder gives: a 784-byte image and a u8 label, the writer's
 * default chunk size), streamed through the loader: the mean total-variation
 * distance between each batch's label histogram and the uniform one over an
 * epoch, for `window` at its default W, is at most 1.5x that of `full`
 * (fixed seeds, so the figures are the same on every run), and so is the
 * distance of the epoch's first batches.  Also printed, not checked: `chunks`
 * and a window of a fraction of the chunks (smaller chunks).
 */
#include "lt.h"

enum { N = 60000, CLASSES = 10, PIX = 784, B = 128 };

static char dir[256];

static int
pack(const char *name, uint64_t chunk_bytes)
{
	rf_schema s;
	memset(&s, 0, sizeof s);
	int rc = rf_schema_add(&s, "image", RF_DTYPE_U8, 2, (uint64_t[]){28, 28}, -1);
	if (!rc)
		rc = rf_schema_add(&s, "label", RF_DTYPE_U8, 0, NULL, -1);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	if (chunk_bytes)
		cfg.chunk_bytes = chunk_bytes;
	char path[512];
	snprintf(path, sizeof path, "%s/%s.rfs", dir, name);
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	static uint8_t img[PIX];
	for (uint32_t i = 0; i < N; i++) {
		uint8_t label = (uint8_t)(i / (N / CLASSES));
		for (int p = 0; p < PIX; p++)
			img[p] = (uint8_t)(i * 31 + (uint32_t)p);
		rf_value v[2] = {{img, PIX}, {&label, 1}};
		if ((rc = rf_writer_add(w, v)) < 0) {
			rf_writer_abort(&w);
			return rc;
		}
	}
	return rf_writer_close(&w);
}

struct mix {
	double tv;       /* mean over the epoch's batches */
	double tv_first; /* mean over its first 8 batches */
	uint32_t window;
};

static int
measure(const char *name, enum rf_shuffle mode, uint32_t window, uint64_t seed, struct mix *out)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s.rfs", dir, name);
	const char *paths[] = {path};
	const char *fields[] = {"label"};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.fields = fields;
	cfg.nfields = 1;
	cfg.batch_size = B;
	cfg.drop_last = 1;
	cfg.epochs = 1;
	cfg.shuffle = mode;
	cfg.window = window;
	cfg.seed = seed;
	cfg.device = RF_DEVICE_HOST;
	cfg.log = lt_log;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s: open: %s\n", name, rf_loader_last_open_error());
		return rc;
	}
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	rf_loader_stats(ld, &st);
	out->window = st.window;
	double sum = 0, first = 0;
	uint64_t nb = 0, seen = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		uint32_t hist[CLASSES] = {0};
		const uint8_t *lab = b->fields[0].data;
		for (uint32_t i = 0; i < b->samples; i++)
			hist[lab[i] < CLASSES ? lab[i] : 0]++;
		double tv = 0;
		for (int c = 0; c < CLASSES; c++) {
			double d = (double)hist[c] / b->samples - 1.0 / CLASSES;
			tv += d < 0 ? -d : d;
		}
		tv /= 2;
		sum += tv;
		if (nb < 8)
			first += tv;
		nb++;
		seen += b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	rf_loader_close(&ld);
	LT_CHECK(rc == 0 && seen == (uint64_t)N / B * B);
	out->tv = sum / (double)nb;
	out->tv_first = first / 8;
	return rc;
}

int
main(void)
{
	snprintf(dir, sizeof dir, "%s", lt_tmpdir("mix"));
	LT_CHECK(pack("sorted", 0) == 0);           /* the writer's default chunks */
	LT_CHECK(pack("small", 256 << 10) == 0);    /* ~180 chunks */

	struct mix full = {0}, win = {0}, chunks = {0}, part = {0};
	LT_CHECK(measure("sorted", RF_SHUFFLE_FULL, 0, 11, &full) == 0);
	LT_CHECK(measure("sorted", RF_SHUFFLE_WINDOW, 0, 11, &win) == 0);
	LT_CHECK(measure("sorted", RF_SHUFFLE_CHUNKS, 0, 11, &chunks) == 0);
	LT_CHECK(measure("small", RF_SHUFFLE_WINDOW, 32, 11, &part) == 0);
	printf("label mixing, mean TV distance to uniform per batch of %d (first 8 batches):\n", B);
	printf("  full                              %.4f (%.4f)\n", full.tv, full.tv_first);
	printf("  window, default W = %-4u          %.4f (%.4f)\n", win.window, win.tv, win.tv_first);
	printf("  chunks                            %.4f (%.4f)\n", chunks.tv, chunks.tv_first);
	printf("  window W = 32 of ~180 chunks      %.4f (%.4f)\n", part.tv, part.tv_first);
	LT_CHECK(full.tv > 0 && win.tv <= 1.5 * full.tv);
	LT_CHECK(win.tv_first <= 1.5 * full.tv);
	LT_CHECK(chunks.tv > 1.5 * full.tv); /* the metric sees a poor shuffle */

	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
