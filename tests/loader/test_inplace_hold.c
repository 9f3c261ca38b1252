/* SPDX-License-Identifier: MIT */
/*
 * Description: a consumer may hold up to depth batches handed out in place
 * (rf_config.inplace) and still get the next one.  With depth 10, holding
 * 1 to 9 batches of 1, 2 or 4 batches a chunk, each next batch comes (a
 * wait of 10 s is a stall); the held batches keep their bytes, released in
 * another order than they came; the rest of the epoch follows, every
 * sample once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

static int failures;
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                       \
		}                                                                         \
	} while (0)

#define N 2000
#define IMG 64
#define CHUNK_SAMPLES 100
#define DEPTH 10
#define WAIT_NS 10000000000ull

static void
value_img(uint64_t g, uint8_t *b)
{
	for (int j = 0; j < IMG; j++)
		b[j] = (uint8_t)(g * 131 + (uint64_t)j * 7 + (g >> 8));
}

static int
pack(const char *path)
{
	rf_schema s;
	memset(&s, 0, sizeof(s));
	int rc = rf_schema_add(&s, "img", RF_DTYPE_U8, 1, (uint64_t[]){IMG}, -1);
	if (!rc)
		rc = rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = CHUNK_SAMPLES * (IMG + 8);
	cfg.no_fsync = 1;
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	for (uint64_t g = 0; g < N; g++) {
		uint8_t img[IMG];
		int64_t y = (int64_t)g;
		value_img(g, img);
		rf_value v[2] = {{img, IMG}, {&y, 8}};
		if ((rc = rf_writer_add(w, v)) < 0) {
			rf_writer_abort(&w);
			return rc;
		}
	}
	return rf_writer_close(&w);
}

/* The batch's rows are the packed samples; marks them seen. */
static void
check_batch(const rf_batch *b, uint8_t *seen)
{
	for (uint32_t i = 0; i < b->samples; i++) {
		int64_t y = ((const int64_t *)b->fields[1].data)[i];
		CHECK(y >= 0 && y < N);
		if (y < 0 || y >= N)
			return;
		uint8_t want[IMG];
		value_img((uint64_t)y, want);
		CHECK(memcmp((const uint8_t *)b->fields[0].data + (uint64_t)i * IMG, want, IMG) == 0);
		CHECK(!seen[y]);
		seen[y] = 1;
	}
}

/* Returns 1 when a batch did not come. */
static int
hold(const char *path, uint32_t batch, int keep)
{
	const char *paths[] = {path};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = batch;
	cfg.depth = DEPTH;
	cfg.epochs = 1;
	cfg.rank = 0;
	cfg.world = 1;
	cfg.device = RF_DEVICE_HOST;
	cfg.map = 1;
	cfg.inplace = RF_INPLACE_ON;
	rf_loader *ld = NULL;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		exit(1);
	}
	uint8_t seen[N] = {0};
	const rf_batch *held[DEPTH];
	int n = 0, in_place = 0;
	for (; n < keep; n++) {
		int rc = rf_loader_next_timeout(ld, &held[n], WAIT_NS);
		if (rc == -EAGAIN)
			fprintf(stderr, "batch %u: no batch %d within 10 s while %d in place are held "
				"(depth %d)\n", batch, n, n, DEPTH);
		CHECK(rc == 0 && held[n]);
		if (rc || !held[n])
			break;
		in_place += (held[n]->flags & RF_BATCH_READONLY) != 0;
	}
	CHECK(in_place > 0 || n < keep);
	/* Released in another order than they came: odd places first. */
	for (int i = 1; i < n; i += 2) {
		check_batch(held[i], seen);
		CHECK(rf_loader_release(ld, held[i], NULL) == 0);
	}
	for (int i = 0; i < n; i += 2) {
		check_batch(held[i], seen);
		CHECK(rf_loader_release(ld, held[i], NULL) == 0);
	}
	if (n == keep) {
		for (;;) {
			const rf_batch *b = NULL;
			int rc = rf_loader_next_timeout(ld, &b, WAIT_NS);
			CHECK(rc == 0);
			if (rc || !b)
				break;
			check_batch(b, seen);
			CHECK(rf_loader_release(ld, b, NULL) == 0);
		}
		for (int i = 0; i < N; i++)
			CHECK(seen[i]);
	}
	rf_loader_close(&ld);
	return n < keep;
}

int
main(void)
{
	char dir[] = "/tmp/rf-inplace-hold-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char path[sizeof(dir) + 16];
	snprintf(path, sizeof(path), "%s/d.rfs", dir);
	int rc = pack(path);
	if (rc < 0) {
		fprintf(stderr, "pack: %s\n", rf_writer_last_error());
		return 1;
	}
	static const uint32_t batches[] = {25, 50, 100};
	for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]); i++)
		for (int keep = 1; keep < DEPTH; keep++) {
			int before = failures;
			int stalled = hold(path, batches[i], keep);
			if (failures != before)
				fprintf(stderr, "failed: batch %u, %d held\n", batches[i], keep);
			if (stalled)
				break; /* holding more stalls as well */
		}
	unlink(path);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
