/* SPDX-License-Identifier: MIT */
/*
 * Window shuffling from maps with samples of 4 KiB and more: each gathered
 * sample is checked against its row of the per-sample checksums (not each
 * chunk as it is read).  The order and the bytes are those of the chunk
 * checked path (O_DIRECT reads); a flipped byte of a value, or of its
 * checksum row, ends the stream with RF_ECHECKSUM naming the sample and the
 * field.
 */
#include "lt.h"
#include "format/format.h"

#include <inttypes.h>

static char dir[256];

#define N 600
#define IMG 4096

static void
img_of(uint64_t g, uint8_t *out)
{
	for (uint32_t j = 0; j < IMG; j++)
		out[j] = (uint8_t)(g * 7 + j * 13 + (j >> 8));
}

static void
fill_img(uint64_t g, uint8_t *v, uint64_t len)
{
	(void)len;
	img_of(g, v);
}

/* N samples: img u8 [4096] and y i64 = g; chunks of about 64 KiB. */
static int
pack(const char *name)
{
	return lt_pack_u8(dir, name, "img", IMG, 1, N, 64 << 10, fill_img);
}

struct run {
	int rc;
	char msg[1024];
	char engine[32];
	int per_sample;           /* the loader said it checks samples */
	int table_damaged;        /* ... and that a chunk's table is damaged */
	uint64_t order[N];
	uint64_t got;
};

static void
note_log(void *user, enum rf_log_level level, const char *msg)
{
	struct run *r = user;
	if (strstr(msg, "per-sample checksums as it is gathered"))
		r->per_sample = 1;
	if (strstr(msg, "per-sample checksum table is damaged"))
		r->table_damaged++;
	lt_log(NULL, level, msg);
}

/* Two epochs of window shuffling, checking every delivered value. */
static void
stream(const char *name, int direct, struct run *r)
{
	memset(r, 0, sizeof(*r));
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, name);
	cfg.log = note_log;
	cfg.log_user = r;
	cfg.batch_size = 16;
	cfg.epochs = 2;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.window = 4;
	cfg.seed = 5;
	cfg.direct = direct;
	rf_loader *ld;
	r->rc = rf_loader_open(&ld, &cfg);
	if (r->rc < 0)
		return;
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	snprintf(r->engine, sizeof r->engine, "%s", st.io_engine);
	const rf_batch *b;
	int rc;
	static uint8_t want[IMG];
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->nfields == 2);
		for (uint32_t i = 0; i < b->samples; i++) {
			int64_t y;
			memcpy(&y, (const uint8_t *)b->fields[1].data + 8 * (uint64_t)i, 8);
			img_of((uint64_t)y, want);
			LT_CHECK(memcmp((const uint8_t *)b->fields[0].data + (uint64_t)i * IMG, want,
					IMG) == 0);
			if (r->got < N)
				r->order[r->got] = (uint64_t)y;
			r->got++;
		}
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	r->rc = rc;
	snprintf(r->msg, sizeof r->msg, "%s", rc < 0 ? rf_loader_errmsg(ld) : "");
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("window-sums"));
	/* The window that holds chunks: from memory (test_window_mem.c) it
	 * is served as shuffle full from memory is. */
	setenv("RINGFEED_WINDOW_HOLD", "1", 1);
	LT_CHECK(pack("s.rfs") == 0);

	/* From the maps, checked sample by sample; from O_DIRECT reads,
	 * chunk by chunk: the same order, every value right. */
	static struct run m, d;
	stream("s.rfs", 0, &m);
	stream("s.rfs", 1, &d);
	LT_CHECK(m.rc == 0 && d.rc == 0);
	LT_CHECK(strcmp(m.engine, "mmap") == 0);
	LT_CHECK(m.per_sample && !d.per_sample);
	LT_CHECK(m.got == 2 * N && d.got == 2 * N);
	LT_CHECK(memcmp(m.order, d.order, sizeof m.order) == 0);

	/* A flipped byte of a value: the sample and the field are named. */
	rf_dataset *ds;
	rf_chunk_info ci;
	LT_CHECK(pack("v.rfs") == 0);
	LT_CHECK(lt_dataset_open(&ds, dir, "v.rfs") == 0);
	LT_CHECK(rf_dataset_chunks(ds) > 4);
	LT_CHECK(rf_dataset_chunk_info(ds, 3, &ci) == 0);
	/* Chunk 3's first sample in the dataset; byte 100 of its second
	 * sample's img value is flipped. */
	uint64_t first = 0;
	for (uint64_t c = 0; c < 3; c++) {
		rf_chunk_info cj;
		rf_dataset_chunk_info(ds, c, &cj);
		first += cj.samples;
	}
	rf_dataset_close(&ds);
	static struct run v;
	uint64_t at_v = 0;
	{
		/* Where sample first + 1's img value lies in the chunk: found
		 * by its bytes. */
		char path[4096];
		snprintf(path, sizeof path, "%s/v.rfs", dir);
		FILE *f = fopen(path, "rb");
		uint8_t *buf = malloc(ci.stored_bytes);
		static uint8_t val[IMG];
		img_of(first + 1, val);
		LT_CHECK(f && buf);
		if (f && buf) {
			fseek(f, (long)ci.offset, SEEK_SET);
			LT_CHECK(fread(buf, 1, ci.stored_bytes, f) == ci.stored_bytes);
			const uint8_t *at = memmem(buf, ci.stored_bytes, val, IMG);
			LT_CHECK(at != NULL);
			if (at) {
				at_v = ci.offset + (uint64_t)(at - buf) + 100;
				lt_flip_byte(dir, "v.rfs", at_v, 0x5a);
			}
		}
		if (f)
			fclose(f);
		free(buf);
	}
	stream("v.rfs", 0, &v);
	LT_CHECK(v.rc == RF_ECHECKSUM);
	char want[128];
	snprintf(want, sizeof want, "sample %" PRIu64 " (1 of the chunk), field img", first + 1);
	if (!strstr(v.msg, want))
		fprintf(stderr, "got: %s\nwanted: %s\n", v.msg, want);
	LT_CHECK(strstr(v.msg, want) != NULL);
	LT_CHECK(v.got < 2 * N);

	/* A flipped byte of a checksum row (sample 2 of chunk 3, field y): the
	 * values are intact, which the chunk's whole hash shows, so the stream
	 * goes on, every value checked as delivered, and the damaged table is
	 * named in a warning. */
	LT_CHECK(pack("r.rfs") == 0);
	lt_flip_byte(dir, "r.rfs",
		     rf_fmt_sums_offset(ci.offset, ci.stored_bytes) + (2 * 2 + 1) * 8 + 3, 0x5a);
	static struct run r;
	stream("r.rfs", 0, &r);
	LT_CHECK(r.rc == 0 && r.got == 2 * N);
	LT_CHECK(r.table_damaged >= 1); /* once per epoch the chunk is held */
	/* Values damaged as well as their rows: the chunk's hash fails too,
	 * and the sample is named. */
	LT_CHECK(pack("q.rfs") == 0);
	lt_flip_byte(dir, "q.rfs",
		     rf_fmt_sums_offset(ci.offset, ci.stored_bytes) + (2 * 2 + 1) * 8 + 3, 0x5a);
	lt_flip_byte(dir, "q.rfs", at_v, 0x5a);
	static struct run q;
	stream("q.rfs", 0, &q);
	LT_CHECK(q.rc == RF_ECHECKSUM && q.table_damaged == 0);
	LT_CHECK(q.got < 2 * N);

	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
