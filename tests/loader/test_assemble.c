/* SPDX-License-Identifier: MIT */
/*
 * Description: batch assembly on its own: the layout (256-byte-aligned
 * parts, offsets [B+1] for variable fields), gathering sample ranges of
 * hand-built chunk sections across chunk and batch boundaries, early close
 * when a variable field's capacity is reached, and the -E2BIG case of one
 * value larger than the capacity.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"

static int failures;
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                       \
		}                                                                         \
	} while (0)

/* Schema: "a" u16[3] fixed, "tok" i32 variable [*], "b" u8 scalar. */
static void
make_schema(rf_schema *s)
{
	memset(s, 0, sizeof(*s));
	s->nfields = 3;
	strcpy(s->fields[0].name, "a");
	s->fields[0].dtype = RF_DTYPE_U16;
	s->fields[0].rank = 1;
	s->fields[0].var_dim = -1;
	s->fields[0].shape[0] = 3;
	strcpy(s->fields[1].name, "tok");
	s->fields[1].dtype = RF_DTYPE_I32;
	s->fields[1].rank = 1;
	s->fields[1].var_dim = 0;
	strcpy(s->fields[2].name, "b");
	s->fields[2].dtype = RF_DTYPE_U8;
	s->fields[2].rank = 0;
	s->fields[2].var_dim = -1;
}

/* Sample g (global number): a = {g, g+1, g+2}; tok = g % 5 values
 * 1000*g + j; b = g & 0xff. */
struct chunk {
	uint16_t a[64 * 3];
	uint64_t off[65];
	int32_t tok[64 * 5];
	uint8_t b[64];
	rf_chunk_sections sec;
};

static void
make_chunk(struct chunk *c, uint32_t first, uint32_t n)
{
	uint64_t pos = 0;
	c->off[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = first + i;
		for (int j = 0; j < 3; j++)
			c->a[i * 3 + j] = (uint16_t)(g + j);
		for (uint32_t j = 0; j < g % 5; j++)
			c->tok[pos / 4 + j] = (int32_t)(1000 * g + j);
		pos += 4 * (g % 5);
		c->off[i + 1] = pos;
		c->b[i] = (uint8_t)g;
	}
	memset(&c->sec, 0, sizeof(c->sec));
	c->sec.samples = n;
	c->sec.nfields = 3;
	c->sec.field[0] = (rf_chunk_section){(const uint8_t *)c->a, NULL, n * 6ull, 6};
	c->sec.field[1] = (rf_chunk_section){(const uint8_t *)c->tok, c->off, pos, 4};
	c->sec.field[2] = (rf_chunk_section){c->b, NULL, n, 1};
}

/* Check that the batch in buf holds samples [first, first + n). */
static void
check_batch(const rf_batch_layout *l, const uint8_t *buf, uint32_t first, uint32_t n, int has_tok)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = first + i;
		for (uint32_t p = 0; p < l->nparts; p++) {
			const rf_batch_part *part = &l->part[p];
			if (part->field == 0) {
				const uint16_t *a = (const uint16_t *)(buf + part->off);
				for (int j = 0; j < 3; j++)
					CHECK(a[i * 3 + j] == (uint16_t)(g + j));
			} else if (part->field == 2) {
				CHECK(buf[part->off + i] == (uint8_t)g);
			} else {
				const int64_t *o = (const int64_t *)(buf + part->off);
				const int32_t *t = (const int32_t *)(buf + part->data_off);
				CHECK(o[0] == 0);
				CHECK(o[i + 1] - o[i] == 4 * (int64_t)(g % 5));
				for (uint32_t j = 0; j < g % 5; j++)
					CHECK(t[o[i] / 4 + j] == (int32_t)(1000 * g + j));
			}
		}
	}
	(void)has_tok;
}

int
main(void)
{
	rf_schema s;
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	make_schema(&s);

	/* Layout: every part 256-aligned, sizes as documented. */
	rf_batch_layout l;
	uint32_t all[] = {0, 1, 2};
	CHECK(rf_batch_layout_init(&l, &s, all, 3, 10, 100, &d) == 0);
	CHECK(l.nparts == 3 && l.batch == 10);
	CHECK(l.part[0].off == 0 && l.part[0].cap == 60);
	CHECK(l.part[1].off == 256 && l.part[1].data_off == 512 && l.part[1].cap == 256);
	CHECK(l.part[2].off == 768 && l.part[2].cap == 10);
	CHECK(l.bytes == 1024);
	CHECK(rf_batch_layout_init(&l, &s, all, 0, 10, 100, &d) == -EINVAL);
	CHECK(rf_batch_layout_init(&l, &s, all, 3, 0, 100, &d) == -EINVAL);
	CHECK(rf_batch_layout_init(&l, &s, all, 3, 10, UINT64_MAX - 10, &d) == RF_EMEMPLAN);

	/* Fixed fields only, selected out of order: batches of 7 over chunks of
	 * 5 samples, 23 samples in all. */
	{
		uint32_t sel[] = {2, 0};
		CHECK(rf_batch_layout_init(&l, &s, sel, 2, 7, 0, &d) == 0);
		uint8_t *buf = aligned_alloc(256, l.bytes);
		rf_assembly a;
		rf_assembly_begin(&a, &l, buf);
		uint32_t g = 0, batch_first = 0, batches = 0;
		while (g < 23) {
			struct chunk c;
			uint32_t n = 23 - g < 5 ? 23 - g : 5;
			make_chunk(&c, g, n);
			uint32_t lo = 0;
			while (lo < n) {
				uint32_t added;
				uint64_t need;
				uint32_t part;
				CHECK(rf_assembly_add(&a, &c.sec, lo, n, &added, &need, &part) == 0);
				CHECK(added > 0);
				lo += added;
				if (rf_assembly_full(&a)) {
					check_batch(&l, buf, batch_first, a.n, 0);
					CHECK(rf_assembly_payload(&a) == 7 * 7);
					CHECK(rf_assembly_bytes(&a) == l.part[1].off + 42);
					batch_first += a.n;
					batches++;
					rf_assembly_begin(&a, &l, buf);
				}
			}
			g += n;
		}
		CHECK(batches == 3 && a.n == 2);
		check_batch(&l, buf, batch_first, a.n, 0);
		free(buf);
	}

	/* With the variable field and a small capacity (64 bytes = 16 values):
	 * batches close early, never overflow, and keep every sample in order. */
	{
		CHECK(rf_batch_layout_init(&l, &s, all, 3, 8, 64, &d) == 0);
		CHECK(l.part[1].cap == 256); /* rounded up to the alignment */
		l.part[1].cap = 64;          /* force a small region for the test */
		uint8_t *buf = aligned_alloc(256, l.bytes);
		rf_assembly a;
		rf_assembly_begin(&a, &l, buf);
		uint32_t batch_first = 0, delivered = 0, early = 0;
		for (uint32_t g = 0; g < 100; g += 10) {
			struct chunk c;
			make_chunk(&c, g, 10);
			uint32_t lo = 0;
			while (lo < 10) {
				uint32_t added;
				uint64_t need;
				uint32_t part;
				CHECK(rf_assembly_add(&a, &c.sec, lo, 10, &added, &need, &part) == 0);
				lo += added;
				CHECK(a.used[1] <= 64);
				if (rf_assembly_full(&a) || (added == 0 && a.n > 0)) {
					check_batch(&l, buf, batch_first, a.n, 1);
					const int64_t *o = (const int64_t *)(buf + l.part[1].off);
					CHECK((uint64_t)o[a.n] == a.used[1]);
					if (!rf_assembly_full(&a))
						early++;
					batch_first += a.n;
					delivered += a.n;
					rf_assembly_begin(&a, &l, buf);
				}
			}
		}
		delivered += a.n;
		CHECK(delivered == 100);
		CHECK(early > 0);

		/* One value larger than the whole region: -E2BIG on an empty
		 * batch, with the size that would fit. */
		l.part[1].cap = 8;
		rf_assembly_begin(&a, &l, buf);
		struct chunk c;
		make_chunk(&c, 4, 2); /* sample 4 has 4 values = 16 bytes */
		uint32_t added = 99, part = 99;
		uint64_t need = 0;
		CHECK(rf_assembly_add(&a, &c.sec, 0, 2, &added, &need, &part) == -E2BIG);
		CHECK(added == 0 && need == 16 && part == 1);
		CHECK(rf_assembly_add(&a, &c.sec, 1, 3, &added, &need, &part) == -EINVAL);
		free(buf);
	}

	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
