/* SPDX-License-Identifier: MIT */
/* Schemas: building and checking them, and their encoding as a shard header
 * (docs/format.md, "Header" and "Field record"). */
#include <errno.h>
#include <string.h>
#include "xxh.h"

#include "format/format.h"

static int
name_ok(const char *name, size_t cap)
{
	size_t len = strnlen(name, cap);
	if (len == 0 || len >= RF_NAME_MAX || len == cap)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

/* Item size of a field, 0 when the field is malformed in any way (a valid
 * field never has item size 0: every fixed dimension is >= 1). */
static uint64_t
field_check(const rf_field *f)
{
	size_t es = rf_dtype_size(f->dtype);
	if (es == 0 || !name_ok(f->name, sizeof f->name))
		return 0;
	if (f->rank > RF_MAX_RANK)
		return 0;
	if (f->var_dim != -1 && (f->var_dim < 0 || (uint32_t)f->var_dim >= f->rank))
		return 0;
	uint64_t item = es;
	for (uint32_t i = 0; i < RF_MAX_RANK; i++) {
		if (i >= f->rank || (int32_t)i == f->var_dim) {
			if (f->shape[i] != 0)
				return 0;
			continue;
		}
		if (f->shape[i] == 0 || rf_mul_u64(item, f->shape[i], &item) < 0 ||
		    item > RF_FMT_MAX_ITEM)
			return 0;
	}
	return item;
}

RF_API uint64_t
rf_field_item_bytes(const rf_field *field)
{
	return field_check(field);
}

RF_API int
rf_schema_validate(const rf_schema *schema)
{
	if (!schema || schema->nfields == 0 || schema->nfields > RF_MAX_FIELDS)
		return RF_ESCHEMA;
	for (uint32_t i = 0; i < schema->nfields; i++) {
		if (field_check(&schema->fields[i]) == 0)
			return RF_ESCHEMA;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(schema->fields[i].name, schema->fields[j].name) == 0)
				return RF_ESCHEMA;
	}
	return 0;
}

RF_API int
rf_schema_find(const rf_schema *schema, const char *name)
{
	if (!schema || !name)
		return -1;
	for (uint32_t i = 0; i < schema->nfields && i < RF_MAX_FIELDS; i++)
		if (strncmp(schema->fields[i].name, name, RF_NAME_MAX) == 0)
			return (int)i;
	return -1;
}

RF_API int
rf_schema_add(rf_schema *schema, const char *name, enum rf_dtype dtype, uint32_t rank,
	      const uint64_t *shape, int32_t var_dim)
{
	if (!schema || !name || schema->nfields >= RF_MAX_FIELDS)
		return RF_ESCHEMA;
	if (rank > RF_MAX_RANK || (rank > 0 && !shape))
		return RF_ESCHEMA;
	size_t len = strnlen(name, RF_NAME_MAX);
	if (len >= RF_NAME_MAX)
		return RF_ESCHEMA;
	rf_field f;
	memset(&f, 0, sizeof f);
	memcpy(f.name, name, len);
	f.dtype = dtype;
	f.rank = rank;
	f.var_dim = var_dim;
	for (uint32_t i = 0; i < rank; i++)
		f.shape[i] = (int32_t)i == var_dim ? 0 : shape[i];
	if (field_check(&f) == 0 || rf_schema_find(schema, f.name) >= 0)
		return RF_ESCHEMA;
	schema->fields[schema->nfields++] = f;
	return 0;
}

uint64_t
rf_fmt_encode_header(const rf_schema *schema, uint32_t version, uint8_t *buf)
{
	uint64_t hsize = RF_FMT_HEADER_SIZE(schema->nfields);
	memset(buf, 0, hsize);
	memcpy(buf, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN);
	rf_put_le32(buf + 8, version);
	rf_put_le32(buf + 12, (uint32_t)hsize);
	rf_put_le32(buf + 16, 0);
	rf_put_le32(buf + 20, schema->nfields);
	for (uint32_t k = 0; k < schema->nfields; k++) {
		const rf_field *f = &schema->fields[k];
		uint8_t *rec = buf + RF_FMT_HEADER_FIXED + (size_t)k * RF_FMT_FIELD_SIZE;
		memcpy(rec, f->name, strnlen(f->name, RF_NAME_MAX));
		rec[56] = (uint8_t)f->dtype;
		rec[57] = (uint8_t)f->rank;
		rec[58] = f->var_dim < 0 ? RF_FMT_VAR_NONE : (uint8_t)f->var_dim;
		for (int i = 0; i < RF_MAX_RANK; i++)
			rf_put_le64(rec + 64 + 8 * i, f->shape[i]);
	}
	uint64_t h = XXH3_64bits(buf, hsize - 8);
	rf_put_le64(buf + hsize - 8, h);
	return h;
}

int
rf_fmt_decode_field(const uint8_t *rec, uint32_t k, rf_field *out, const char *path, rf_diag *d)
{
	rf_field f;
	memset(&f, 0, sizeof f);
	uint64_t at = RF_FMT_HEADER_FIXED + (uint64_t)k * RF_FMT_FIELD_SIZE;
	size_t len = strnlen((const char *)rec, RF_NAME_MAX);
	if (len == 0 || len >= RF_NAME_MAX)
		return rf_fail(d, RF_ECORRUPT, "%s: header field %u at offset %llu: name is %s", path,
			       k, (unsigned long long)at, len == 0 ? "empty" : "not NUL-terminated");
	for (size_t i = len; i < RF_NAME_MAX; i++)
		if (rec[i] != 0)
			return rf_fail(d, RF_ECORRUPT,
				       "%s: header field %u at offset %llu: non-zero byte after the name",
				       path, k, (unsigned long long)(at + i));
	memcpy(f.name, rec, len);
	if (!name_ok(f.name, sizeof f.name))
		return rf_fail(d, RF_ECORRUPT,
			       "%s: header field %u at offset %llu: name has a character outside [A-Za-z0-9_.-]",
			       path, k, (unsigned long long)at);
	f.dtype = (enum rf_dtype)rec[56];
	if (rf_dtype_size(f.dtype) == 0)
		return rf_fail(d, RF_ECORRUPT, "%s: header field %u (%s) at offset %llu: unknown dtype %u",
			       path, k, f.name, (unsigned long long)(at + 56), rec[56]);
	f.rank = rec[57];
	if (f.rank > RF_MAX_RANK)
		return rf_fail(d, RF_ECORRUPT, "%s: header field %u (%s) at offset %llu: rank %u > %d",
			       path, k, f.name, (unsigned long long)(at + 57), rec[57], RF_MAX_RANK);
	if (rec[58] == RF_FMT_VAR_NONE)
		f.var_dim = -1;
	else if (rec[58] < f.rank)
		f.var_dim = rec[58];
	else
		return rf_fail(d, RF_ECORRUPT,
			       "%s: header field %u (%s) at offset %llu: var_dim %u not below rank %u",
			       path, k, f.name, (unsigned long long)(at + 58), rec[58], f.rank);
	for (int i = 59; i < 64; i++)
		if (rec[i] != 0)
			return rf_fail(d, RF_ECORRUPT,
				       "%s: header field %u (%s) at offset %llu: reserved byte is not 0",
				       path, k, f.name, (unsigned long long)(at + i));
	for (int i = 0; i < RF_MAX_RANK; i++)
		f.shape[i] = rf_le64(rec + 64 + 8 * i);
	if (field_check(&f) == 0)
		return rf_fail(d, RF_ECORRUPT,
			       "%s: header field %u (%s) at offset %llu: bad shape (a fixed dimension "
			       "is 0, a variable or unused dimension is not 0, or the item size "
			       "exceeds 2^40 bytes)",
			       path, k, f.name, (unsigned long long)(at + 64));
	*out = f;
	return 0;
}
