/* SPDX-License-Identifier: MIT */
/* Batch layout and the gather of chunk samples into it. */
#include <errno.h>
#include <string.h>

#include "decode/decode.h"

uint64_t
rf_decode_item_bytes(const rf_field *f)
{
	uint64_t n = rf_dtype_size(f->dtype);
	for (uint32_t i = 0; i < f->rank && i < RF_MAX_RANK; i++) {
		if ((int32_t)i == f->var_dim)
			continue;
		if (rf_mul_u64(n, f->shape[i], &n))
			return 0;
	}
	return n;
}

/* Reserve `bytes` at the next aligned position after *pos. */
static int
layout_take(uint64_t *pos, uint64_t bytes, uint64_t *start)
{
	uint64_t s = RF_ALIGN_UP(*pos, RF_BATCH_ALIGN), e;
	if (s < *pos || rf_add_u64(s, bytes, &e))
		return -1;
	*start = s;
	*pos = e;
	return 0;
}

int
rf_batch_layout_init(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel,
		     uint32_t nsel, uint32_t batch, uint64_t var_cap, rf_diag *d)
{
	memset(l, 0, sizeof(*l));
	if (nsel == 0 || nsel > RF_MAX_FIELDS || batch == 0)
		return -EINVAL;
	l->batch = batch;
	l->nparts = nsel;
	uint64_t pos = 0;
	for (uint32_t i = 0; i < nsel; i++) {
		if (sel[i] >= schema->nfields)
			return -EINVAL;
		const rf_field *f = &schema->fields[sel[i]];
		rf_batch_part *p = &l->part[i];
		p->field = sel[i];
		p->var = f->var_dim >= 0;
		p->value_bytes = rf_decode_item_bytes(f);
		if (p->value_bytes == 0)
			return -EINVAL;
		uint64_t sz;
		if (p->var) {
			uint64_t cap = RF_ALIGN_UP(var_cap, RF_BATCH_ALIGN);
			if (cap < var_cap || layout_take(&pos, ((uint64_t)batch + 1) * 8, &p->off) ||
			    layout_take(&pos, cap, &p->data_off))
				goto overflow;
			p->cap = cap;
		} else {
			if (rf_mul_u64(p->value_bytes, batch, &sz) || layout_take(&pos, sz, &p->off))
				goto overflow;
			p->cap = sz;
		}
	}
	l->bytes = RF_ALIGN_UP(pos, RF_BATCH_ALIGN);
	if (l->bytes < pos)
		goto overflow;
	return 0;
overflow:
	return rf_fail(d, RF_EMEMPLAN, "a batch of %u samples does not fit in 64 bits: "
		       "lower batch_size or var_bytes", batch);
}

void
rf_assembly_begin(rf_assembly *a, const rf_batch_layout *l, void *base)
{
	a->layout = l;
	a->base = base;
	a->n = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		a->used[i] = 0;
		if (l->part[i].var)
			memset(a->base + l->part[i].off, 0, 8); /* offsets[0] = 0 */
	}
}

int
rf_assembly_add(rf_assembly *a, const rf_chunk_sections *sec, uint32_t lo, uint32_t hi,
		uint32_t *added, uint64_t *need, uint32_t *part)
{
	const rf_batch_layout *l = a->layout;
	*added = 0;
	if (lo > hi || hi > sec->samples)
		return -EINVAL;
	uint32_t k = hi - lo;
	if (k > l->batch - a->n)
		k = l->batch - a->n;

	/* Variable fields bound k by their remaining capacity.  The offsets were
	 * validated (non-decreasing, in bounds), so the differences below cannot
	 * wrap. */
	for (uint32_t i = 0; i < l->nparts && k > 0; i++) {
		const rf_batch_part *p = &l->part[i];
		if (!p->var)
			continue;
		const uint64_t *so = sec->field[p->field].offsets;
		uint64_t room = p->cap - a->used[i];
		uint32_t j = 0;
		while (j < k && so[lo + j + 1] - so[lo] <= room)
			j++;
		if (j == 0) {
			*need = a->used[i] + (so[lo + 1] - so[lo]);
			*part = i;
			if (a->n == 0)
				return -E2BIG;
		}
		k = j;
	}
	if (k == 0)
		return 0;

	for (uint32_t i = 0; i < l->nparts; i++) {
		const rf_batch_part *p = &l->part[i];
		const rf_chunk_section *s = &sec->field[p->field];
		if (!p->var) {
			memcpy(a->base + p->off + (uint64_t)a->n * p->value_bytes,
			       s->data + (uint64_t)lo * p->value_bytes, (uint64_t)k * p->value_bytes);
			continue;
		}
		const uint64_t *so = s->offsets;
		uint64_t base = so[lo], used = a->used[i];
		int64_t *dst = (int64_t *)(void *)(a->base + p->off);
		for (uint32_t j = 0; j < k; j++)
			dst[a->n + j + 1] = (int64_t)(used + (so[lo + j + 1] - base));
		uint64_t len = so[lo + k] - base;
		memcpy(a->base + p->data_off + used, s->data + base, len);
		a->used[i] = used + len;
	}
	a->n += k;
	*added = k;
	return 0;
}

uint64_t
rf_assembly_bytes(const rf_assembly *a)
{
	const rf_batch_layout *l = a->layout;
	uint64_t end = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		const rf_batch_part *p = &l->part[i];
		uint64_t e = p->var ? p->data_off + a->used[i]
				    : p->off + (uint64_t)a->n * p->value_bytes;
		if (p->var && p->off + ((uint64_t)a->n + 1) * 8 > e)
			e = p->off + ((uint64_t)a->n + 1) * 8;
		if (e > end)
			end = e;
	}
	return end;
}

uint64_t
rf_assembly_payload(const rf_assembly *a)
{
	const rf_batch_layout *l = a->layout;
	uint64_t sum = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		const rf_batch_part *p = &l->part[i];
		if (p->var)
			sum += ((uint64_t)a->n + 1) * 8 + a->used[i];
		else
			sum += (uint64_t)a->n * p->value_bytes;
	}
	return sum;
}
