/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_schema_add, rf_schema_validate, rf_schema_find and
 * rf_field_item_bytes accept what docs/format.md allows and refuse the rest:
 * names, dtypes, ranks, var_dim, zero dimensions, duplicates, field count and
 * the 2^40-byte item limit (computed without overflow); and the header
 * encoding round-trips through the field-record decoder.
 */
#include "fmt_test.h"

int
main(void)
{
	rf_schema s = {0};
	uint64_t sh[RF_MAX_RANK] = {2, 3, 4, 5, 6, 7, 8, 9};

	CHECK_RC(rf_schema_validate(&s), RF_ESCHEMA); /* no field */
	CHECK_RC(rf_schema_add(&s, "image", RF_DTYPE_U8, 3, (uint64_t[]){28, 28, 1}, -1), 0);
	CHECK_RC(rf_schema_add(&s, "label", RF_DTYPE_I64, 0, NULL, -1), 0);
	CHECK_RC(rf_schema_add(&s, "tok.ens-1_", RF_DTYPE_U16, 1, (uint64_t[]){99}, 0), 0);
	CHECK(s.nfields == 3);
	CHECK(s.fields[2].shape[0] == 0); /* the variable entry is stored as 0 */
	CHECK_RC(rf_schema_validate(&s), 0);
	CHECK(rf_schema_find(&s, "label") == 1);
	CHECK(rf_schema_find(&s, "nope") == -1);
	CHECK(rf_field_item_bytes(&s.fields[0]) == 784);
	CHECK(rf_field_item_bytes(&s.fields[1]) == 8);
	CHECK(rf_field_item_bytes(&s.fields[2]) == 2);

	/* Names. */
	CHECK_RC(rf_schema_add(&s, "", RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "a b", RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "a/b", RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "label", RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);
	char name[80];
	memset(name, 'n', sizeof name);
	name[55] = 0;
	CHECK_RC(rf_schema_add(&s, name, RF_DTYPE_U8, 0, NULL, -1), 0); /* 55 bytes */
	name[55] = 'n';
	name[56] = 0;
	CHECK_RC(rf_schema_add(&s, name, RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);

	/* dtype, rank, var_dim, zero dimension. */
	CHECK_RC(rf_schema_add(&s, "d0", (enum rf_dtype)0, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "d14", (enum rf_dtype)14, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "r9", RF_DTYPE_U8, 9, sh, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "r8", RF_DTYPE_U8, 8, sh, -1), 0);
	CHECK(rf_field_item_bytes(&s.fields[s.nfields - 1]) == 2ULL * 3 * 4 * 5 * 6 * 7 * 8 * 9);
	CHECK_RC(rf_schema_add(&s, "noshape", RF_DTYPE_U8, 2, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "vd", RF_DTYPE_U8, 2, sh, 2), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "vd2", RF_DTYPE_U8, 2, sh, -2), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "vd0", RF_DTYPE_U8, 0, NULL, 0), RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "zero", RF_DTYPE_U8, 2, (uint64_t[]){3, 0}, -1), RF_ESCHEMA);
	/* A zero in the variable dimension is fine (ignored). */
	CHECK_RC(rf_schema_add(&s, "v0", RF_DTYPE_F32, 2, (uint64_t[]){0, 3}, 0), 0);
	CHECK(rf_field_item_bytes(&s.fields[s.nfields - 1]) == 12);

	/* Item size: 2^40 exactly is allowed, one more element is not, and a
	 * product that overflows 64 bits is caught. */
	CHECK_RC(rf_schema_add(&s, "big", RF_DTYPE_U8, 2, (uint64_t[]){1ULL << 20, 1ULL << 20}, -1), 0);
	CHECK(rf_field_item_bytes(&s.fields[s.nfields - 1]) == 1ULL << 40);
	CHECK_RC(rf_schema_add(&s, "big2", RF_DTYPE_U16, 2, (uint64_t[]){1ULL << 20, 1ULL << 20}, -1),
		 RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "ovf", RF_DTYPE_U64, 3,
			       (uint64_t[]){1ULL << 32, 1ULL << 32, 1ULL << 32}, -1),
		 RF_ESCHEMA);
	CHECK_RC(rf_schema_add(&s, "ovf2", RF_DTYPE_U8, 2, (uint64_t[]){UINT64_MAX, 2}, 1),
		 RF_ESCHEMA);
	CHECK_RC(rf_schema_validate(&s), 0);

	/* validate catches what a hand-built schema gets wrong. */
	rf_schema bad = s;
	bad.fields[1].shape[3] = 1; /* beyond rank */
	CHECK_RC(rf_schema_validate(&bad), RF_ESCHEMA);
	CHECK(rf_field_item_bytes(&bad.fields[1]) == 0);
	bad = s;
	strcpy(bad.fields[1].name, "image");
	CHECK_RC(rf_schema_validate(&bad), RF_ESCHEMA);
	bad = s;
	bad.fields[2].shape[0] = 5; /* variable entry must be 0 */
	CHECK_RC(rf_schema_validate(&bad), RF_ESCHEMA);
	bad = s;
	bad.nfields = RF_MAX_FIELDS + 1;
	CHECK_RC(rf_schema_validate(&bad), RF_ESCHEMA);

	/* Field limit. */
	rf_schema many = {0};
	for (int i = 0; i < RF_MAX_FIELDS; i++) {
		char nm[16];
		snprintf(nm, sizeof nm, "f%d", i);
		CHECK_RC(rf_schema_add(&many, nm, RF_DTYPE_U8, 0, NULL, -1), 0);
	}
	CHECK_RC(rf_schema_add(&many, "one_more", RF_DTYPE_U8, 0, NULL, -1), RF_ESCHEMA);
	CHECK_RC(rf_schema_validate(&many), 0);

	/* Encode a header and decode its records back. */
	uint8_t *h = malloc(RF_FMT_HEADER_SIZE(RF_MAX_FIELDS));
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	const rf_schema *all[] = {&s, &many};
	for (int t = 0; t < 2; t++) {
		const rf_schema *x = all[t];
		rf_fmt_encode_header(x, RF_FMT_VERSION, h);
		CHECK(memcmp(h, RF_FMT_MAGIC, 8) == 0);
		CHECK(rf_le32(h + 12) == RF_FMT_HEADER_SIZE(x->nfields));
		for (uint32_t k = 0; k < x->nfields; k++) {
			rf_field f;
			CHECK_RC(rf_fmt_decode_field(h + 32 + 128 * k, k, &f, "x.rfs", &d), 0);
			const rf_field *g = &x->fields[k];
			CHECK(strcmp(f.name, g->name) == 0 && f.dtype == g->dtype &&
			      f.rank == g->rank && f.var_dim == g->var_dim &&
			      memcmp(f.shape, g->shape, sizeof f.shape) == 0);
		}
	}
	/* A record with a bad name byte is refused with a message. */
	rf_fmt_encode_header(&s, RF_FMT_VERSION, h);
	h[32] = ' ';
	rf_field f;
	CHECK_RC(rf_fmt_decode_field(h + 32, 0, &f, "x.rfs", &d), RF_ECORRUPT);
	CHECK(strstr(d.msg, "x.rfs") && strstr(d.msg, "field 0"));
	free(h);
	return 0;
}
