/* SPDX-License-Identifier: MIT */
/*
 * Description: variable-size fields whose item is not a power of two (3, 6,
 * 12 and 24 bytes; 4 as the control), end to end through the public writer
 * and reader: every value reads back with its length and bytes, and every
 * chunk decodes; an offset moved off a multiple of the item (by one byte,
 * and by half an item, which a power-of-two mask of item - 1 would let
 * through for some sizes), with every checksum recomputed, makes that chunk
 * RF_ECORRUPT (verify and read), while the other chunks still read.
 */
#include <xxhash.h>

#include "fmt_test.h"

static char *g_dir, *g_mut;

static void
fix_chunk(uint8_t *b, size_t size, uint64_t c)
{
	uint64_t io = rf_le64(b + size - 64), nch = rf_le64(b + size - 64 + 8);
	uint8_t *e = b + io + 64 * c, *f = b + size - 64;
	rf_put_le64(e + 40, XXH3_64bits(b + rf_le64(e), rf_le64(e + 8)));
	rf_put_le64(f + 24, XXH3_64bits(b + io, 64 * nch));
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
}

/* Chunk c of the shard b, with offsets[i + 1] of its first field (a
 * variable one: its n + 1 offsets open the raw chunk) lowered by `by`. */
static void
expect_bad_offset(const uint8_t *b, size_t size, uint64_t c, uint64_t by, uint64_t item)
{
	uint64_t io = rf_le64(b + size - 64);
	const uint8_t *e = b + io + 64 * c;
	uint64_t off = rf_le64(e);
	uint32_t n = rf_le32(e + 32);
	CHECK(e[36] == RF_CODEC_NONE);
	uint8_t *cp = malloc(size);
	memcpy(cp, b, size);
	uint8_t *o = cp + off;
	uint32_t i = 0;
	while (i < n && rf_le64(o + 8 * (i + 1)) - rf_le64(o + 8 * i) < item)
		i++;
	CHECK(i < n); /* a sample with at least one item */
	uint64_t v = rf_le64(o + 8 * (i + 1));
	CHECK((v - by) % item != 0);
	rf_put_le64(o + 8 * (i + 1), v - by);
	fix_chunk(cp, size, c);
	t_spit(g_mut, cp, size);
	free(cp);

	rf_dataset *ds;
	const char *paths[] = {g_mut};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	int rc = rf_dataset_verify_chunk(ds, c);
	if (rc != RF_ECORRUPT) {
		fprintf(stderr, "item %llu: offset %llu of sample %u lowered by %llu to %llu: chunk "
			"%llu gave %d (%s), expected RF_ECORRUPT: %s\n", (unsigned long long)item,
			(unsigned long long)v, i, (unsigned long long)by,
			(unsigned long long)(v - by), (unsigned long long)c, rc, rf_strerror(rc),
			rf_dataset_errmsg(ds));
		exit(1);
	}
	CHECK(strstr(rf_dataset_errmsg(ds), g_mut) != NULL);
	rf_chunk_info ci;
	CHECK_RC(rf_dataset_chunk_info(ds, c, &ci), 0);
	uint8_t buf[4096];
	size_t len;
	CHECK_RC(rf_dataset_read(ds, ci.first_sample + i, 0, buf, sizeof buf, &len), RF_ECORRUPT);
	for (uint64_t k = 0; k < rf_dataset_chunks(ds); k++)
		if (k != c)
			CHECK_RC(rf_dataset_verify_chunk(ds, k), 0);
	rf_dataset_close(&ds);
}

static void
one(enum rf_dtype dt, uint64_t inner)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "v", dt, 2, (uint64_t[]){0, inner}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "id", RF_DTYPE_I64, 0, NULL, -1), 0);
	uint64_t item = rf_field_item_bytes(&s.fields[0]);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = 0;
	cfg.chunk_bytes = 700;
	cfg.no_fsync = 1;
	char name[64];
	snprintf(name, sizeof name, "item%llu.rfs", (unsigned long long)item);
	char *p = t_path(g_dir, name);
	uint64_t n = 90;
	CHECK_RC(t_write(p, &s, n, &cfg, 0), 0);
	rf_dataset *ds;
	const char *paths[] = {p};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	CHECK(rf_dataset_chunks(ds) >= 3);
	t_check_dataset(ds, &s, n);
	rf_dataset_close(&ds);
	size_t size;
	uint8_t *b = t_slurp(p, &size);
	if (item > 1) {
		expect_bad_offset(b, size, 1, 1, item);
		if (item / 2 > 1)
			expect_bad_offset(b, size, 1, item / 2, item);
	}
	free(b);
	free(p);
}

int
main(void)
{
	g_dir = t_tmpdir();
	g_mut = t_path(g_dir, "mutated.rfs");
	one(RF_DTYPE_U8, 3);   /* 3 */
	one(RF_DTYPE_U16, 3);  /* 6 */
	one(RF_DTYPE_I32, 3);  /* 12 */
	one(RF_DTYPE_F64, 3);  /* 24 */
	one(RF_DTYPE_U8, 4);   /* 4: the power-of-two path */
	t_rmtree(g_dir);
	free(g_mut);
	free(g_dir);
	return 0;
}
