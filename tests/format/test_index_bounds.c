/* SPDX-License-Identifier: MIT */
/*
 * Description: the bounds an index entry's sizes must keep, on the entry
 * where nothing else guards them.  (a) The last chunk's stored size may reach
 * the index and no further: index_offset - off opens, one byte more, a page
 * more and 2^40 are RF_ECORRUPT (no next entry's overlap check stands behind
 * it), on a shard of several chunks and on a one-chunk shard.  (b) The zstd
 * expansion bound is exact for any stored size, not only a round one: raw =
 * 32768 x stored opens, one byte more is refused at open, naming the bound.
 * Every index checksum is recomputed, so the structural checks themselves
 * decide.  Both format versions: in version 2 the chunk's per-sample
 * checksum table follows its stored bytes, so a stored size up to the index
 * leaves the table no room and is refused too.
 */
#include <xxhash.h>

#include "fmt_test.h"

static char *g_mut;

struct shard {
	uint8_t *b;
	size_t size;
	uint64_t index_offset, nchunks;
	uint32_t version;
};

static struct shard
make(const char *dir, const char *name, uint64_t chunk_bytes, uint32_t version)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "tokens", RF_DTYPE_U16, 1, (uint64_t[]){0}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "id", RF_DTYPE_I64, 0, NULL, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = 3;
	cfg.chunk_bytes = chunk_bytes;
	cfg.no_fsync = 1;
	cfg.format_version = version;
	char *p = t_path(dir, name);
	CHECK_RC(t_write(p, &s, 60, &cfg, 0), 0);
	struct shard sh;
	sh.b = t_slurp(p, &sh.size);
	free(p);
	sh.index_offset = rf_le64(sh.b + sh.size - 64);
	sh.nchunks = rf_le64(sh.b + sh.size - 64 + 8);
	sh.version = version;
	return sh;
}

static uint8_t *
entry(uint8_t *b, const struct shard *sh, uint64_t i)
{
	return b + sh->index_offset + 64 * i;
}

/* Recompute the index checksum and the footer's. */
static void
fix_index(uint8_t *b, const struct shard *sh)
{
	uint8_t *f = b + sh->size - 64;
	rf_put_le64(f + 24, XXH3_64bits(b + sh->index_offset, 64 * sh->nchunks));
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
}

/* A copy of the shard with entry i's stored and raw sizes set (UINT64_MAX:
 * keep), opened: returns the open's code. */
static int
open_with(const struct shard *sh, uint64_t i, uint64_t stored, uint64_t raw)
{
	uint8_t *cp = malloc(sh->size);
	memcpy(cp, sh->b, sh->size);
	if (stored != UINT64_MAX)
		rf_put_le64(entry(cp, sh, i) + 8, stored);
	if (raw != UINT64_MAX)
		rf_put_le64(entry(cp, sh, i) + 16, raw);
	fix_index(cp, sh);
	t_spit(g_mut, cp, sh->size);
	free(cp);
	rf_dataset *ds = NULL;
	const char *paths[] = {g_mut};
	int rc = rf_dataset_open(&ds, paths, 1, NULL);
	if (rc == 0)
		rf_dataset_close(&ds);
	else
		CHECK(ds == NULL && strstr(rf_dataset_last_open_error(), g_mut));
	return rc;
}

#define EXPECT(sh, i, stored, raw, want)                                                       \
	do {                                                                                   \
		int rc_ = open_with((sh), (i), (stored), (raw));                               \
		if (rc_ != (want)) {                                                           \
			fprintf(stderr, "%s:%d: entry %llu stored %llu raw %llu: open gave %d " \
				"(%s), expected %d: %s\n", __FILE__, __LINE__,                 \
				(unsigned long long)(i), (unsigned long long)(stored),         \
				(unsigned long long)(raw), rc_, rf_strerror(rc_), (int)(want), \
				rf_dataset_last_open_error());                                 \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

/* (a) The last entry's stored size against the index. */
static void
last_entry_stored(const struct shard *sh)
{
	uint64_t last = sh->nchunks - 1;
	const uint8_t *e = entry(sh->b, sh, last);
	uint64_t off = rf_le64(e);
	/* Compressed: a raw chunk's stored size must equal its raw size, a
	 * check that would hide the one under test. */
	CHECK(e[36] == RF_CODEC_ZSTD);
	CHECK(off < sh->index_offset);
	uint64_t room = sh->index_offset - off;
	EXPECT(sh, last, UINT64_MAX, UINT64_MAX, 0);
	/* Version 1: up to the index (the zero padding before it) is still the
	 * chunk's.  Version 2: the checksum table after it would overlap the
	 * index. */
	EXPECT(sh, last, room, UINT64_MAX, sh->version == 1 ? 0 : RF_ECORRUPT);
	EXPECT(sh, last, room + 1, UINT64_MAX, RF_ECORRUPT);
	EXPECT(sh, last, room + 4096, UINT64_MAX, RF_ECORRUPT);
	EXPECT(sh, last, 1ULL << 40, UINT64_MAX, RF_ECORRUPT);
	EXPECT(sh, last, UINT64_MAX - 1, UINT64_MAX, RF_ECORRUPT);
}

/* (b) raw <= 32768 x stored, exactly, for the stored size the chunk has. */
static void
zstd_bound(const struct shard *sh)
{
	uint64_t last = sh->nchunks - 1;
	uint64_t stored = rf_le64(entry(sh->b, sh, last) + 8);
	CHECK(stored > 0 && stored % 4096 != 0);
	EXPECT(sh, last, UINT64_MAX, stored * 32768, 0);
	EXPECT(sh, last, UINT64_MAX, stored * 32768 + 1, RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "zstd") != NULL);
	EXPECT(sh, last, UINT64_MAX, stored * 32768 + 4096, RF_ECORRUPT);
	/* The first entry too, where the next entry stands behind nothing
	 * about raw sizes either. */
	uint64_t s0 = rf_le64(entry(sh->b, sh, 0) + 8);
	EXPECT(sh, 0, UINT64_MAX, s0 * 32768, 0);
	EXPECT(sh, 0, UINT64_MAX, s0 * 32768 + 1, RF_ECORRUPT);
}

int
main(void)
{
	char *dir = t_tmpdir();
	g_mut = t_path(dir, "mutated.rfs");
	for (uint32_t v = 1; v <= 2; v++) {
		struct shard many = make(dir, "many.rfs", 512, v);
		struct shard one = make(dir, "one.rfs", 1 << 20, v);
		CHECK(many.nchunks >= 3);
		CHECK(one.nchunks == 1);
		last_entry_stored(&many);
		last_entry_stored(&one);
		zstd_bound(&many);
		zstd_bound(&one);
		free(many.b);
		free(one.b);
	}
	t_rmtree(dir);
	free(g_mut);
	free(dir);
	return 0;
}
