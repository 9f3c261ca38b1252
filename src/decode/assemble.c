/* SPDX-License-Identifier: MIT */
/* Batch layout and the gather of chunk samples into it. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"

/* A copy into the batch: at once, or noted in the sink. */
static void
put(rf_assembly *a, uint8_t *dst, const uint8_t *src, uint64_t len)
{
	rf_copy_sink *s = a->sink;
	if (!s || len == 0) {
		memcpy(dst, src, len);
		return;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		rf_copy_op *ops = realloc(s->ops, cap * sizeof(*ops));
		if (!ops) {
			memcpy(dst, src, len);
			return;
		}
		s->ops = ops;
		s->cap = cap;
	}
	s->ops[s->n++] = (rf_copy_op){.dst = dst, .src = src, .len = len, .tag = s->tag};
	s->bytes += len;
}

uint64_t
rf_copy_sink_run(rf_copy_sink *s)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < s->n; i++) {
		memcpy(s->ops[i].dst, s->ops[i].src, s->ops[i].len);
		bytes += s->ops[i].len;
	}
	s->n = 0;
	s->bytes = 0;
	return bytes;
}

void
rf_copy_sink_free(rf_copy_sink *s)
{
	free(s->ops);
	s->ops = NULL;
	s->n = s->cap = 0;
}

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
rf_token_field_ok(const rf_field *f)
{
	return f->var_dim < 0 && f->rank == 1 && f->shape[0] >= 2 &&
	       f->shape[0] - 1 <= UINT32_MAX / 4 &&
	       (f->dtype == RF_DTYPE_U16 || f->dtype == RF_DTYPE_U32 || f->dtype == RF_DTYPE_I32);
}

/* Place the parts in order: a fixed part's values, or a variable part's
 * offsets then its cap of data (p->cap set).  Sets each fixed part's cap,
 * l->bytes.  0, or -1 when the batch does not fit in 64 bits. */
static int
layout_place(rf_batch_layout *l)
{
	uint64_t pos = 0, sz;
	for (uint32_t i = 0; i < l->nparts; i++) {
		rf_batch_part *p = &l->part[i];
		if (p->var) {
			if (layout_take(&pos, ((uint64_t)l->batch + 1) * 8, &p->off) ||
			    layout_take(&pos, p->cap, &p->data_off))
				return -1;
		} else {
			if (rf_mul_u64(p->value_bytes, l->batch, &sz) || layout_take(&pos, sz, &p->off))
				return -1;
			p->cap = sz;
		}
	}
	l->bytes = RF_ALIGN_UP(pos, RF_BATCH_ALIGN);
	return l->bytes < pos ? -1 : 0;
}

/* Parts of the selection, sel[tok] split in two (tok >= nsel: none). */
static int
layout_build(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel, uint32_t nsel,
	     uint32_t tok, uint32_t batch, uint64_t var_cap, rf_diag *d)
{
	memset(l, 0, sizeof(*l));
	if (nsel == 0 || nsel + (tok < nsel) > RF_MAX_FIELDS || batch == 0)
		return -EINVAL;
	l->batch = batch;
	l->nparts = nsel + (tok < nsel);
	for (uint32_t i = 0, pi = 0; i < nsel; i++, pi++) {
		if (sel[i] >= schema->nfields)
			return -EINVAL;
		const rf_field *f = &schema->fields[sel[i]];
		rf_batch_part *p = &l->part[pi];
		p->field = sel[i];
		p->var = f->var_dim >= 0;
		p->value_bytes = rf_decode_item_bytes(f);
		if (p->value_bytes == 0)
			return -EINVAL;
		if (i == tok) {
			if (!rf_token_field_ok(f))
				return -EINVAL;
			/* Two parts of int32 [B, T]; value_bytes is what one
			 * sample takes in the batch, as for any fixed part. */
			for (uint32_t k = 0; k < 2; k++) {
				p = &l->part[pi + k];
				p->field = sel[i];
				p->kind = k == 0 ? RF_PART_INPUTS : RF_PART_TARGETS;
				p->src_bytes = rf_decode_item_bytes(f);
				p->src_dtype = f->dtype;
				p->value_bytes = (f->shape[0] - 1) * 4;
			}
			pi++; /* the loop steps past the second */
			continue;
		}
		if (p->var) {
			p->cap = RF_ALIGN_UP(var_cap, RF_BATCH_ALIGN);
			if (p->cap < var_cap)
				goto overflow;
		}
	}
	if (layout_place(l) == 0)
		return 0;
overflow:
	return rf_fail(d, RF_EMEMPLAN, "a batch of %u samples does not fit in 64 bits: "
		       "lower batch_size or var_bytes", batch);
}

int
rf_batch_layout_init(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel,
		     uint32_t nsel, uint32_t batch, uint64_t var_cap, rf_diag *d)
{
	return layout_build(l, schema, sel, nsel, UINT32_MAX, batch, var_cap, d);
}

int
rf_batch_layout_init_tokens(rf_batch_layout *l, const rf_schema *schema, const uint32_t *sel,
			    uint32_t nsel, uint32_t tok, uint32_t batch, uint64_t var_cap,
			    rf_diag *d)
{
	if (tok >= nsel)
		return -EINVAL;
	return layout_build(l, schema, sel, nsel, tok, batch, var_cap, d);
}

int
rf_batch_layout_set_image(rf_batch_layout *l, uint32_t part, uint64_t value_bytes, rf_diag *d)
{
	if (part >= l->nparts || !l->part[part].var || l->part[part].kind != RF_PART_COPY ||
	    value_bytes == 0)
		return -EINVAL;
	rf_batch_part *ip = &l->part[part];
	ip->var = 0;
	ip->kind = RF_PART_IMAGE;
	ip->value_bytes = value_bytes;
	ip->data_off = 0;
	if (layout_place(l) == 0)
		return 0;
	return rf_fail(d, RF_EMEMPLAN, "a batch of %u samples of %" PRIu64 "-byte images does "
		       "not fit in 64 bits: lower batch_size", l->batch, value_bytes);
}

/* k rows of T int32 tokens from stored rows of T + 1 tokens, starting at
 * token `first` (0: inputs, 1: targets) of each.  The sections are 64-byte
 * aligned and a row of u16 or u32 tokens keeps the token alignment, so the
 * typed reads below are aligned. */
static void
widen_tokens(int32_t *dst, const uint8_t *src, const rf_batch_part *p, uint32_t k, unsigned first)
{
	const uint64_t T = p->value_bytes / 4;
	for (uint32_t j = 0; j < k; j++, dst += T, src += p->src_bytes) {
		if (p->src_dtype == RF_DTYPE_U16) {
			const uint16_t *s = (const uint16_t *)(const void *)src + first;
			for (uint64_t t = 0; t < T; t++)
				dst[t] = (int32_t)s[t];
		} else {
			/* u32 / i32: the bits as they are (llm.c reads tokens as
			 * int; a u32 token above INT32_MAX comes out negative). */
			memcpy(dst, src + (uint64_t)first * 4, T * 4);
		}
	}
}

void
rf_assembly_begin(rf_assembly *a, const rf_batch_layout *l, void *base)
{
	a->layout = l;
	a->base = base;
	a->n = 0;
	a->sink = NULL;
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
		if (p->kind == RF_PART_INPUTS || p->kind == RF_PART_TARGETS) {
			widen_tokens((int32_t *)(void *)(a->base + p->off) + (uint64_t)a->n *
					     (p->value_bytes / 4),
				     s->data + (uint64_t)lo * p->src_bytes, p, k,
				     p->kind == RF_PART_TARGETS);
			continue;
		}
		if (!p->var) {
			put(a, a->base + p->off + (uint64_t)a->n * p->value_bytes,
			    s->data + (uint64_t)lo * p->value_bytes, (uint64_t)k * p->value_bytes);
			continue;
		}
		const uint64_t *so = s->offsets;
		uint64_t base = so[lo], used = a->used[i];
		int64_t *dst = (int64_t *)(void *)(a->base + p->off);
		for (uint32_t j = 0; j < k; j++)
			dst[a->n + j + 1] = (int64_t)(used + (so[lo + j + 1] - base));
		uint64_t len = so[lo + k] - base;
		put(a, a->base + p->data_off + used, s->data + base, len);
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
