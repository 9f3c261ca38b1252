/* SPDX-License-Identifier: MIT */
/*
 * Description: damaged and hostile shards give the right negative code and a
 * message naming the file, never a crash or a huge allocation: (a) a valid
 * shard truncated at lengths covering every region; (b) each byte of the
 * header, index and footer flipped in turn, and a sample of chunk bytes;
 * (c) crafted absurd counts, sizes, offsets, overlaps, schema records and
 * chunk contents with every checksum recomputed, so the structural checks
 * themselves run; (d) wrong magic and version; (e) format 2's per-sample
 * checksum tables: a flipped entry, a wrong table checksum, a table that runs
 * into the index.  (a)-(d) on format 1 shards too.  Run under ASan/UBSan too.
 */
#include <xxhash.h>

#include "fmt_test.h"

static const char *g_dir;
static char *g_mut; /* path of the mutated copy */

struct layout {
	uint64_t size, hsize, hend, index_offset, nchunks;
};

static struct layout
parse(const uint8_t *b, size_t size)
{
	struct layout l;
	l.size = size;
	const uint8_t *f = b + size - 64;
	l.index_offset = rf_le64(f);
	l.nchunks = rf_le64(f + 8);
	l.hsize = rf_le32(b + 12);
	l.hend = RF_ALIGN_UP(l.hsize, 4096);
	return l;
}

static uint8_t *
entry(uint8_t *b, const struct layout *l, uint64_t i)
{
	return b + l->index_offset + 64 * i;
}

/* Recompute the footer checksum. */
static void
fix_footer(uint8_t *b, const struct layout *l)
{
	uint8_t *f = b + l->size - 64;
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
}

static void
fix_index(uint8_t *b, const struct layout *l)
{
	rf_put_le64(b + l->size - 64 + 24, XXH3_64bits(b + l->index_offset, 64 * l->nchunks));
	fix_footer(b, l);
}

static void
fix_header(uint8_t *b, const struct layout *l)
{
	uint64_t h = XXH3_64bits(b, l->hsize - 8);
	rf_put_le64(b + l->hsize - 8, h);
	rf_put_le64(b + l->size - 64 + 32, h);
	fix_footer(b, l);
}

static void
fix_chunk(uint8_t *b, const struct layout *l, uint64_t i)
{
	uint8_t *e = entry(b, l, i);
	rf_put_le64(e + 40, XXH3_64bits(b + rf_le64(e), rf_le64(e + 8)));
	fix_index(b, l);
}

/* Open `len` bytes of b as a shard; expect `want` and a message naming it. */
static void
expect_open_at(const uint8_t *b, size_t len, int want, int line)
{
	t_spit(g_mut, b, len);
	rf_dataset *ds = (rf_dataset *)1;
	const char *paths[] = {g_mut};
	int rc = rf_dataset_open(&ds, paths, 1, NULL);
	if (rc != want) {
		fprintf(stderr, "line %d: length %zu: open gave %d (%s), expected %d (%s): %s\n",
			line, len, rc, rf_strerror(rc), want, rf_strerror(want),
			rf_dataset_last_open_error());
		exit(1);
	}
	if (rc < 0) {
		CHECK(ds == NULL);
		if (!strstr(rf_dataset_last_open_error(), g_mut)) {
			fprintf(stderr, "line %d: message does not name the file: %s\n", line,
				rf_dataset_last_open_error());
			exit(1);
		}
	} else {
		rf_dataset_close(&ds);
	}
}
#define expect_open(b, len, want) expect_open_at(b, len, want, __LINE__)

/* The shard opens; reading chunk `chunk` fails with `want`, naming the file
 * and the chunk. */
static void
expect_chunk_at(const uint8_t *b, size_t len, uint64_t chunk, int want, int line)
{
	t_spit(g_mut, b, len);
	rf_dataset *ds;
	const char *paths[] = {g_mut};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	int rc = rf_dataset_verify_chunk(ds, chunk);
	if (rc != want) {
		fprintf(stderr, "line %d: chunk %llu gave %d (%s), expected %d: %s\n", line,
			(unsigned long long)chunk, rc, rf_strerror(rc), want, rf_dataset_errmsg(ds));
		exit(1);
	}
	if (!strstr(rf_dataset_errmsg(ds), g_mut) || !strstr(rf_dataset_errmsg(ds), "chunk")) {
		fprintf(stderr, "line %d: message: %s\n", line, rf_dataset_errmsg(ds));
		exit(1);
	}
	/* Reading samples of the chunk fails the same way, and the other
	 * chunks still read. */
	rf_chunk_info ci;
	CHECK_RC(rf_dataset_chunk_info(ds, chunk, &ci), 0);
	uint8_t buf[4096];
	size_t l;
	CHECK_RC(rf_dataset_read(ds, ci.first_sample, 0, buf, sizeof buf, &l), want);
	for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++)
		if (c != chunk)
			CHECK_RC(rf_dataset_verify_chunk(ds, c), 0);
	rf_dataset_close(&ds);
}
#define expect_chunk(b, len, c, want) expect_chunk_at(b, len, c, want, __LINE__)

static char rf_dataset_errmsg_last[RF_ERRMSG_MAX];

/* The shard opens and reads (the chunk's own checksum is good), and
 * rf_dataset_verify_chunk fails with RF_ECHECKSUM, a message naming the
 * file, the chunk and `what`. */
static void
expect_chunk_sums_at(const uint8_t *b, size_t len, uint64_t chunk, const char *what, int line)
{
	t_spit(g_mut, b, len);
	rf_dataset *ds;
	const char *paths[] = {g_mut};
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	rf_chunk_info ci;
	CHECK_RC(rf_dataset_chunk_info(ds, chunk, &ci), 0);
	uint8_t buf[4096];
	size_t l;
	CHECK_RC(rf_dataset_read(ds, ci.first_sample, 1, buf, sizeof buf, &l), 0);
	int rc = rf_dataset_verify_chunk(ds, chunk);
	const char *m = rf_dataset_errmsg(ds);
	char head[64];
	snprintf(head, sizeof head, "chunk %llu at offset", (unsigned long long)chunk);
	if (rc != RF_ECHECKSUM || !strstr(m, g_mut) || !strstr(m, head) || !strstr(m, what)) {
		fprintf(stderr, "line %d: chunk %llu gave %d: %s\n", line, (unsigned long long)chunk,
			rc, m);
		exit(1);
	}
	snprintf(rf_dataset_errmsg_last, sizeof rf_dataset_errmsg_last, "%s", m);
	for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++)
		if (c != chunk)
			CHECK_RC(rf_dataset_verify_chunk(ds, c), 0);
	rf_dataset_close(&ds);
}
#define expect_chunk_sums(b, len, c, what) expect_chunk_sums_at(b, len, c, what, __LINE__)

/* With verification off, whatever a damaged chunk gives must be an error
 * code or data: never a crash. */
static void
read_all_unverified(const uint8_t *b, size_t len)
{
	t_spit(g_mut, b, len);
	rf_dataset *ds;
	const char *paths[] = {g_mut};
	rf_dataset_config dc;
	rf_dataset_config_init(&dc);
	dc.verify = 0;
	if (rf_dataset_open(&ds, paths, 1, &dc) < 0)
		return;
	uint8_t buf[4096];
	size_t l;
	for (uint64_t i = 0; i < rf_dataset_samples(ds); i++)
		for (uint32_t k = 0; k < rf_dataset_schema(ds)->nfields; k++) {
			int rc = rf_dataset_read(ds, i, k, buf, sizeof buf, &l);
			CHECK(rc == 0 || rc == RF_ECORRUPT || rc == RF_ECODEC);
		}
	rf_dataset_close(&ds);
}

static rf_schema
schema(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "tokens", RF_DTYPE_U16, 1, (uint64_t[]){0}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "label", RF_DTYPE_I32, 0, NULL, -1), 0);
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_F32, 2, (uint64_t[]){2, 3}, -1), 0);
	return s;
}

static uint8_t *
make_v(const char *name, int zstd, uint32_t version, size_t *len)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = zstd;
	cfg.format_version = version;
	cfg.chunk_bytes = 600;
	cfg.no_fsync = 1;
	char *p = t_path(g_dir, name);
	CHECK_RC(t_write(p, &s, 40, &cfg, 0), 0);
	uint8_t *b = t_slurp(p, len);
	free(p);
	CHECK(rf_le32(b + 8) == (version ? version : RF_FMT_VERSION));
	return b;
}

static uint8_t *
make(const char *name, int zstd, size_t *len)
{
	return make_v(name, zstd, 0, len);
}

static void
truncations(const uint8_t *b, const struct layout *l)
{
	uint64_t cuts[4096];
	size_t n = 0;
	for (uint64_t c = 0; c <= 72; c++)
		cuts[n++] = c;
	uint64_t marks[] = {l->hsize - 8, l->hsize, 4095, 4096, 4097, l->index_offset,
			    l->size - 65, l->size - 64, l->size - 63, l->size - 8, l->size - 1};
	for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
		for (int d = -1; d <= 1; d++)
			cuts[n++] = marks[i] + (uint64_t)d;
	uint8_t *tmp = malloc(l->size);
	memcpy(tmp, b, l->size);
	for (uint64_t i = 0; i < l->nchunks; i++) {
		uint64_t off = rf_le64(entry(tmp, l, i)), st = rf_le64(entry(tmp, l, i) + 8);
		cuts[n++] = off;
		cuts[n++] = off + 1;
		cuts[n++] = off + st / 2;
		cuts[n++] = off + st;
	}
	free(tmp);
	for (uint64_t c = 0; c < l->size; c += 509)
		cuts[n++] = c;
	for (size_t i = 0; i < n; i++) {
		if (cuts[i] >= l->size)
			continue;
		expect_open(b, cuts[i], cuts[i] < 8 ? RF_EFORMAT : RF_ETRUNCATED);
	}
}

static void
flips(uint8_t *b, const struct layout *l)
{
	/* Header pages, padding included. */
	for (uint64_t i = 0; i < l->hend; i++) {
		b[i] ^= 0xFF;
		expect_open(b, l->size, i < 12 ? RF_EFORMAT : RF_ECORRUPT);
		b[i] ^= 0xFF;
	}
	/* Index. */
	for (uint64_t i = l->index_offset; i < l->size - 64; i++) {
		b[i] ^= 0x01;
		expect_open(b, l->size, RF_ECORRUPT);
		b[i] ^= 0x01;
	}
	/* Footer. */
	for (uint64_t i = 0; i < 64; i++) {
		uint64_t at = l->size - 64 + i;
		int want = i >= 56 ? RF_ETRUNCATED : (i >= 40 && i < 44) ? RF_EFORMAT : RF_ECORRUPT;
		b[at] ^= 0xFF;
		expect_open(b, l->size, want);
		b[at] ^= 0xFF;
	}
	/* A sample of chunk bytes: caught by the checksum; with verification
	 * off, whatever decoding gives is an error or data. */
	for (uint64_t c = 0; c < l->nchunks; c++) {
		uint64_t off = rf_le64(entry(b, l, c)), st = rf_le64(entry(b, l, c) + 8);
		for (uint64_t i = 0; i < st; i += 1 + st / 23) {
			b[off + i] ^= 0x5A;
			expect_chunk(b, l->size, c, RF_ECHECKSUM);
			read_all_unverified(b, l->size);
			b[off + i] ^= 0x5A;
		}
	}
}

/* Set a u64 (or u32/u8 when width says so) at `at`, apply a fix, expect. */
#define WITH(b, l, at, width, val, fix, want)                                          \
	do {                                                                           \
		uint8_t *cp_ = malloc((l)->size);                                      \
		memcpy(cp_, (b), (l)->size);                                           \
		if ((width) == 8)                                                      \
			rf_put_le64(cp_ + (at), (uint64_t)(val));                      \
		else if ((width) == 4)                                                 \
			rf_put_le32(cp_ + (at), (uint32_t)(val));                      \
		else                                                                   \
			cp_[(at)] = (uint8_t)(val);                                    \
		fix(cp_, (l));                                                         \
		expect_open(cp_, (l)->size, (want));                                   \
		free(cp_);                                                             \
	} while (0)

static void
fix_none(uint8_t *b, const struct layout *l)
{
	(void)b;
	(void)l;
}

static void
crafted(const uint8_t *b, const struct layout *l)
{
	uint64_t F = l->size - 64, I = l->index_offset;
	/* Footer: counts and offsets. */
	WITH(b, l, F + 8, 8, 1ULL << 60, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 8, 8, 1ULL << 32, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 8, 8, UINT64_MAX, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 8, 8, l->nchunks + 1, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 0, 8, I + 64, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 0, 8, I + 1, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 0, 8, 0, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 0, 8, UINT64_MAX - 4095, fix_footer, RF_ECORRUPT);
	WITH(b, l, F + 16, 8, 1ULL << 62, fix_footer, RF_ECORRUPT);
	if (rf_le32(b + 8) < 3)
		WITH(b, l, F + 44, 4, 7, fix_footer, RF_ECORRUPT);      /* reserved */
	else
		WITH(b, l, F + 44, 4, 0, fix_footer, RF_ECORRUPT);      /* 0 shards */
	WITH(b, l, F + 40, 4, RF_FMT_VERSION + 1, fix_footer, RF_EFORMAT);
	/* A version the library reads, but not the header's. */
	WITH(b, l, F + 40, 4, rf_le32(b + 8) == 1 ? 2 : 1, fix_footer, RF_ECORRUPT);
	/* Index entries. */
	WITH(b, l, I + 16, 8, 1ULL << 40, fix_index, RF_ECORRUPT);      /* raw huge */
	WITH(b, l, I + 16, 8, 0, fix_index, RF_ECORRUPT);
	WITH(b, l, I + 8, 8, 1ULL << 63, fix_index, RF_ECORRUPT);       /* stored huge */
	WITH(b, l, I + 8, 8, 0, fix_index, RF_ECORRUPT);
	WITH(b, l, I + 0, 8, I, fix_index, RF_ECORRUPT);                /* into the index */
	WITH(b, l, I + 0, 8, UINT64_MAX - 4095, fix_index, RF_ECORRUPT);
	WITH(b, l, I + 0, 8, 0, fix_index, RF_ECORRUPT);                /* over the header */
	WITH(b, l, I + 0, 8, 4096 + 8, fix_index, RF_ECORRUPT);         /* unaligned */
	WITH(b, l, I + 64, 8, rf_le64(b + I), fix_index, RF_ECORRUPT);  /* overlap */
	WITH(b, l, I + 64 + 24, 8, 0, fix_index, RF_ECORRUPT);          /* first_sample */
	WITH(b, l, I + 32, 4, 0, fix_index, RF_ECORRUPT);               /* no samples */
	WITH(b, l, I + 32, 4, UINT32_MAX, fix_index, RF_ECORRUPT);
	WITH(b, l, I + 36, 1, 2, fix_index, RF_ECORRUPT);               /* codec */
	WITH(b, l, I + 38, 1, 1, fix_index, RF_ECORRUPT);               /* reserved */
	WITH(b, l, I + 60, 1, 1, fix_index, RF_ECORRUPT);
	if (rf_le32(b + 8) == 1)
		WITH(b, l, I + 50, 1, 1, fix_index, RF_ECORRUPT);       /* v1: reserved */
	WITH(b, l, I + 16, 8, 8, fix_index, RF_ECORRUPT);               /* below minimum */
	/* Header, with the checksum and its footer copy recomputed. */
	WITH(b, l, 20, 4, 0, fix_header, RF_ECORRUPT);                  /* nfields */
	WITH(b, l, 20, 4, 65, fix_header, RF_ECORRUPT);
	WITH(b, l, 20, 4, UINT32_MAX, fix_header, RF_ECORRUPT);
	WITH(b, l, 12, 4, l->hsize + 128, fix_header, RF_ECORRUPT);     /* header_size */
	WITH(b, l, 12, 4, UINT32_MAX, fix_header, RF_ECORRUPT);
	WITH(b, l, 16, 4, 1, fix_header, RF_ECORRUPT);                  /* flags */
	if (rf_le32(b + 8) < 3)                                          /* v3: pack id */
		WITH(b, l, 24, 1, 1, fix_header, RF_ECORRUPT);          /* reserved */
	WITH(b, l, 8, 4, RF_FMT_VERSION + 1, fix_header, RF_EFORMAT);   /* version */
	WITH(b, l, 8, 4, 0, fix_header, RF_EFORMAT);
	uint64_t f0 = 32, f1 = 32 + 128, f2 = 32 + 256;
	WITH(b, l, f0 + 56, 1, 0, fix_header, RF_ECORRUPT);             /* dtype */
	WITH(b, l, f0 + 56, 1, 14, fix_header, RF_ECORRUPT);
	WITH(b, l, f0 + 57, 1, 9, fix_header, RF_ECORRUPT);             /* rank */
	WITH(b, l, f0 + 58, 1, 1, fix_header, RF_ECORRUPT);             /* var_dim >= rank */
	WITH(b, l, f1 + 58, 1, 0, fix_header, RF_ECORRUPT);             /* var_dim, rank 0 */
	WITH(b, l, f0 + 60, 1, 1, fix_header, RF_ECORRUPT);             /* reserved */
	WITH(b, l, f0 + 64, 8, 5, fix_header, RF_ECORRUPT);             /* var entry != 0 */
	WITH(b, l, f2 + 64, 8, 0, fix_header, RF_ECORRUPT);             /* zero fixed dim */
	WITH(b, l, f2 + 64 + 16, 8, 1, fix_header, RF_ECORRUPT);        /* beyond rank */
	WITH(b, l, f2 + 64, 8, 1ULL << 38, fix_header, RF_ECORRUPT);    /* item > 2^40 */
	WITH(b, l, f2 + 64, 8, UINT64_MAX, fix_header, RF_ECORRUPT);    /* overflow */
	WITH(b, l, f0 + 0, 1, 0, fix_header, RF_ECORRUPT);              /* empty name */
	WITH(b, l, f0 + 1, 1, '/', fix_header, RF_ECORRUPT);            /* bad char */
	WITH(b, l, f0 + 55, 1, 'a', fix_header, RF_ECORRUPT);           /* no NUL */
	WITH(b, l, f0 + 30, 1, 'a', fix_header, RF_ECORRUPT);           /* byte after NUL */
	{
		/* Duplicate names: field 2 ("x") renamed to "label". */
		uint8_t *cp = malloc(l->size);
		memcpy(cp, b, l->size);
		memset(cp + f2, 0, 56);
		memcpy(cp + f2, "label", 5);
		fix_header(cp, l);
		expect_open(cp, l->size, RF_ECORRUPT);
		free(cp);
	}
	/* (d) magic and version without any fix. */
	WITH(b, l, 0, 1, 'X', fix_none, RF_EFORMAT);
	WITH(b, l, F + 56, 1, 'X', fix_none, RF_ETRUNCATED);
	{
		uint8_t *cp = malloc(l->size);
		memcpy(cp, b, l->size);
		cp[0] = 'X';
		cp[F + 57] = 'X';
		expect_open(cp, l->size, RF_EFORMAT);
		free(cp);
	}
	static const char text[] = "this is not a shard\n";
	expect_open((const uint8_t *)text, sizeof text - 1, RF_EFORMAT);
	uint8_t *zeros = calloc(1, 3 * 4096);
	expect_open(zeros, 3 * 4096, RF_EFORMAT);
	free(zeros);
}

/* Chunk contents with checksums recomputed: the layout checks. */
static void
crafted_chunks(const uint8_t *b, const struct layout *l)
{
	rf_schema s = schema();
	uint8_t *cp = malloc(l->size);
	uint64_t off = rf_le64(entry((uint8_t *)b, l, 1)), st = rf_le64(entry((uint8_t *)b, l, 1) + 8);
	uint32_t n = rf_le32(entry((uint8_t *)b, l, 1) + 32);
	CHECK(n >= 2);
	(void)s;
	/* The first section is "tokens": n + 1 u64 offsets at raw offset 0. */
	uint8_t *o = NULL;
#define RESET() (memcpy(cp, b, l->size), o = cp + off)
	RESET();
	rf_put_le64(o + 8, rf_le64(o + 16) + 2); /* offsets[1] > offsets[2]: decreasing */
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	rf_put_le64(o, 2); /* offsets[0] != 0 */
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	rf_put_le64(o + 8, rf_le64(o + 8) + 1); /* not a multiple of the u16 item */
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	rf_put_le64(o + 8 * n, 1ULL << 40); /* the data runs far past the raw size */
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	rf_put_le64(o + 8 * n, UINT64_MAX - 1); /* near-overflow */
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	/* Raw size 64 bytes larger than the sections (stored grows into the
	 * zero padding): the sections end before raw_size. */
	CHECK(st % 4096 != 0 && st % 4096 + 64 <= 4096);
	rf_put_le64(entry(cp, l, 1) + 8, st + 64);
	rf_put_le64(entry(cp, l, 1) + 16, st + 64);
	fix_chunk(cp, l, 1);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
	RESET();
	/* One sample fewer than the offsets describe. */
	rf_put_le32(entry(cp, l, 1) + 32, n - 1);
	for (uint64_t c = 2; c < l->nchunks; c++)
		rf_put_le64(entry(cp, l, c) + 24, rf_le64(entry(cp, l, c) + 24) - 1);
	rf_put_le64(cp + l->size - 64 + 16, rf_le64(cp + l->size - 64 + 16) - 1);
	fix_index(cp, l);
	expect_chunk(cp, l->size, 1, RF_ECORRUPT);
#undef RESET
	free(cp);
}

/* (e) Format 2's per-sample checksum tables. */
static void
crafted_sums(const uint8_t *b, const struct layout *l)
{
	uint8_t *cp = malloc(l->size);
	uint64_t last = l->nchunks - 1;
	uint8_t *e = entry((uint8_t *)b, l, 1);
	uint64_t at = rf_fmt_sums_offset(rf_le64(e), rf_le64(e + 8));
	uint64_t tb = rf_fmt_sums_bytes(rf_le32(e + 32), 3);
	/* Each entry of a table (label's of sample 0, x's of the last sample)
	 * flipped: verify names the table; the chunk's own checksum and
	 * every other chunk stay good. */
	uint64_t flip[] = {at + 8, at + tb - 1};
	for (int i = 0; i < 2; i++) {
		memcpy(cp, b, l->size);
		cp[flip[i]] ^= 0x10;
		expect_chunk_sums(cp, l->size, 1, "per-sample checksum table");
	}
	/* The entry and the table's checksum rewritten to match: the value
	 * no longer matches, named with its sample and field. */
	memcpy(cp, b, l->size);
	cp[at + 8] ^= 0x10;
	rf_put_le64(entry(cp, l, 1) + 48, XXH3_64bits(cp + at, tb));
	fix_index(cp, l);
	expect_chunk_sums(cp, l->size, 1, "sample 0 of the chunk");
	CHECK(strstr(rf_dataset_errmsg_last, "field label") != NULL);
	/* Only the table's checksum changed. */
	memcpy(cp, b, l->size);
	rf_put_le64(entry(cp, l, 1) + 48, rf_le64(entry(cp, l, 1) + 48) ^ 1);
	fix_index(cp, l);
	expect_chunk_sums(cp, l->size, 1, "per-sample checksum table");
	/* The last chunk's table would run into the index (its stored bytes
	 * still fit): refused at open. */
	memcpy(cp, b, l->size);
	e = entry(cp, l, last);
	uint64_t room = l->index_offset - rf_le64(e);
	uint32_t n = rf_le32(e + 32);
	CHECK(room > rf_le64(e + 8));
	rf_put_le32(e + 32, n + (uint32_t)(room / 24));
	rf_put_le64(cp + l->size - 64 + 16, rf_le64(cp + l->size - 64 + 16) + room / 24);
	fix_index(cp, l);
	expect_open(cp, l->size, RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "checksum table runs into the index") != NULL);
	free(cp);
}

static void
crafted_zstd(const uint8_t *b, const struct layout *l)
{
	uint8_t *cp = malloc(l->size);
	uint64_t raw = rf_le64(entry((uint8_t *)b, l, 0) + 16);
	CHECK(b[l->index_offset + 36] == RF_CODEC_ZSTD);
	memcpy(cp, b, l->size);
	rf_put_le64(entry(cp, l, 0) + 16, raw - 2); /* frame decodes to more */
	fix_index(cp, l);
	expect_chunk(cp, l->size, 0, RF_ECODEC);
	memcpy(cp, b, l->size);
	rf_put_le64(entry(cp, l, 0) + 16, raw + 64); /* frame decodes to less */
	fix_index(cp, l);
	expect_chunk(cp, l->size, 0, RF_ECODEC);
	memcpy(cp, b, l->size);
	/* Absurd expansion is refused at open, before any buffer. */
	rf_put_le64(entry(cp, l, 0) + 16, 1ULL << 32);
	rf_put_le64(entry(cp, l, 0) + 8, 4);
	fix_index(cp, l);
	expect_open(cp, l->size, RF_ECORRUPT);
	/* The bound is exact: 32768 x stored bytes may be claimed, one byte
	 * more may not. */
	rf_put_le64(entry(cp, l, 0) + 16, 4 * 32768 + 1);
	fix_index(cp, l);
	expect_open(cp, l->size, RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "zstd can expand") != NULL);
	rf_put_le64(entry(cp, l, 0) + 16, 4 * 32768);
	fix_index(cp, l);
	t_spit(g_mut, cp, l->size);
	rf_dataset *ds = NULL;
	const char *paths[] = {g_mut};
	if (rf_dataset_open(&ds, paths, 1, NULL) < 0)
		CHECK(strstr(rf_dataset_last_open_error(), "zstd can expand") == NULL);
	rf_dataset_close(&ds);
	free(cp);
}

int
main(void)
{
	char *dir = t_tmpdir();
	g_dir = dir;
	g_mut = t_path(dir, "mutated.rfs");
	size_t rlen, zlen;
	uint8_t *rb = make("raw.rfs", 0, &rlen), *zb = make("zstd.rfs", 3, &zlen);
	struct layout rl = parse(rb, rlen), zl = parse(zb, zlen);
	CHECK(rl.nchunks >= 3 && zl.nchunks >= 2);
	expect_open(rb, rlen, 0);
	expect_open(zb, zlen, 0);
	/* Format 1, as earlier writers made it: every check still holds. */
	size_t r1len;
	uint8_t *r1 = make_v("raw1.rfs", 0, 1, &r1len);
	struct layout r1l = parse(r1, r1len);
	CHECK(r1l.nchunks >= 3);
	expect_open(r1, r1len, 0);
	truncations(r1, &r1l);
	flips(r1, &r1l);
	crafted(r1, &r1l);
	crafted_chunks(r1, &r1l);
	free(r1);
	crafted_sums(rb, &rl);

	truncations(rb, &rl);
	truncations(zb, &zl);
	flips(rb, &rl);
	flips(zb, &zl);
	crafted(rb, &rl);
	crafted(zb, &zl);
	crafted_chunks(rb, &rl);
	crafted_zstd(zb, &zl);

	/* An empty file and a directory are not shards. */
	expect_open(rb, 0, RF_EFORMAT);
	rf_dataset *ds;
	const char *paths[] = {dir};
	unlink(g_mut);
	char *sub = t_path(dir, "d.rfs");
	CHECK(mkdir(sub, 0777) == 0);
	const char *subp[] = {sub};
	CHECK_RC(rf_dataset_open(&ds, subp, 1, NULL), -ENOENT);
	(void)paths;
	free(sub);

	free(rb);
	free(zb);
	t_rmtree(dir);
	free(g_mut);
	free(dir);
	return 0;
}
