/* SPDX-License-Identifier: MIT */
/*
 * Description: the chunk size the writer chooses with chunk_bytes 0 (the
 * default).  Fixed-size samples of 784 bytes fill 4 MiB chunks (5,000 and
 * more a chunk); of 40 KiB, chunks of 128 samples (5 MiB: more than 4 MiB,
 * so that a chunk holds whole batches); of 400 KiB, chunks capped at
 * 20 MiB (52 samples); a variable field keeps 4 MiB; a chunk_bytes asked
 * for is kept whatever the samples (40 KiB samples in 1 MiB: 25 a chunk).
 * The config's default is 0.  Both rf_writer_add and rf_writer_add_columns.
 */
#include "fmt_test.h"

#define MIB (UINT64_C(1) << 20)

/* Pack n samples of one u8[bytes] field (a variable u8[?] field when var)
 * and an i64, with chunk_bytes cb, by rows or by columns; returns the
 * chunks' sample counts in counts[] (at most max) and their number. */
static uint64_t
pack(const char *dir, uint64_t bytes, int var, uint64_t n, uint64_t cb, int columns,
     uint64_t *counts, uint64_t max)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U8, 1, (uint64_t[]){var ? 0 : bytes},
			       var ? 0 : -1), 0);
	CHECK_RC(rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	CHECK(cfg.chunk_bytes == 0);
	cfg.chunk_bytes = cb;
	char *path = t_path(dir, "c.rfs");
	rf_writer *w = NULL;
	CHECK_RC(rf_writer_open(&w, path, &s, &cfg), 0);
	uint8_t *x = calloc(n, bytes);
	int64_t *y = calloc(n, sizeof(*y));
	int64_t *off = calloc(n + 1, sizeof(*off));
	if (!x || !y || !off)
		exit(1);
	for (uint64_t i = 0; i < n; i++) {
		x[i * bytes] = (uint8_t)i;
		y[i] = (int64_t)i;
		off[i + 1] = (int64_t)((i + 1) * bytes);
	}
	if (columns) {
		rf_column c[2] = {{x, var ? off : NULL}, {y, NULL}};
		CHECK_RC(rf_writer_add_columns(w, n, c), 0);
	} else {
		for (uint64_t i = 0; i < n; i++) {
			rf_value v[2] = {{x + i * bytes, bytes}, {&y[i], sizeof(*y)}};
			CHECK_RC(rf_writer_add(w, v), 0);
		}
	}
	CHECK_RC(rf_writer_close(&w), 0);
	free(x);
	free(y);
	free(off);

	rf_dataset *ds = NULL;
	const char *paths[] = {path};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	uint64_t k = ds ? rf_dataset_chunks(ds) : 0;
	for (uint64_t c = 0; c < k && c < max; c++) {
		rf_chunk_info ci;
		CHECK_RC(rf_dataset_chunk_info(ds, c, &ci), 0);
		counts[c] = ci.samples;
	}
	rf_dataset_close(&ds);
	unlink(path);
	free(path);
	return k;
}

/* Every chunk but the last holds `per` samples (the last the rest). */
static void
expect(const char *what, const uint64_t *counts, uint64_t k, uint64_t n, uint64_t per)
{
	uint64_t want = (n + per - 1) / per;
	if (k != want)
		fprintf(stderr, "%s: %llu chunks, want %llu\n", what, (unsigned long long)k,
			(unsigned long long)want);
	CHECK(k == want);
	for (uint64_t c = 0; c + 1 < k && c < 64; c++)
		CHECK(counts[c] == per);
	printf("%s: %llu chunks of %llu samples\n", what, (unsigned long long)k,
	       (unsigned long long)counts[0]);
}

int
main(void)
{
	char *dir = t_tmpdir();
	uint64_t counts[64];
	for (int columns = 0; columns < 2; columns++) {
		/* 784 + 8 bytes (each field padded to 64 in a chunk): 4 MiB. */
		uint64_t k = pack(dir, 784, 0, 12000, 0, columns, counts, 64);
		CHECK(k == 3 && counts[0] > 5000 && counts[0] < 5400);
		/* 40 KiB + 8: 128 samples, about 5 MiB. */
		k = pack(dir, 40 << 10, 0, 300, 0, columns, counts, 64);
		expect("40 KiB, default", counts, k, 300, 128);
		/* 400 KiB + 8: the 20 MiB cap, 52 samples (the sample that
		 * reaches it closes the chunk). */
		k = pack(dir, 400 << 10, 0, 120, 0, columns, counts, 64);
		CHECK(k >= 2 && counts[0] * (400 << 10) >= 19 * MIB &&
		      counts[0] * (400 << 10) <= 21 * MIB);
		printf("400 KiB, default: %llu chunks of %llu samples\n", (unsigned long long)k,
		       (unsigned long long)counts[0]);
		/* Asked for: 1 MiB chunks of 40 KiB samples, 25 a chunk (the
		 * 26th brings it past 1 MiB: 26). */
		k = pack(dir, 40 << 10, 0, 300, MIB, columns, counts, 64);
		CHECK(k > 10 && counts[0] >= 25 && counts[0] <= 26);
		/* A variable field: 4 MiB, about 102 samples of 40 KiB. */
		k = pack(dir, 40 << 10, 1, 300, 0, columns, counts, 64);
		CHECK(k == 3 && counts[0] >= 100 && counts[0] <= 104);
	}
	t_rmtree(dir);
	free(dir);
	return 0;
}
