/* SPDX-License-Identifier: MIT */
/*
 * Description: the library's own choice of maps for a dataset in file or
 * chunk order that it reads through the page cache (direct = -1 choosing
 * buffered reads; on 4 CPUs or more, here forced by RINGFEED_SEQ_MAP=1).
 * The loader reads through maps then (rf_stats.io_engine "mmap", logged),
 * and delivers the same batches, byte for byte and in the same order, as
 * with read calls (RINGFEED_SEQ_MAP=0), uncompressed and zstd, over one
 * shard and several, for shuffle none and chunks, over two epochs.  A
 * caller who sets direct (0 or 1) keeps read calls, and window and full
 * shuffling keep their own choices.
 */
#include "lt.h"

static char dir[256];

/* The samples of every row of two epochs, in order, into out (at most
 * cap); the count.  *engine: rf_stats.io_engine. */
static size_t
stream(const char *name, enum rf_shuffle shuffle, int direct, const char *seq_map,
       uint64_t *out, size_t cap, char *engine, size_t ecap)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, name);
	cfg.shuffle = shuffle;
	cfg.seed = 9;
	cfg.batch_size = 24;
	cfg.epochs = 2;
	cfg.direct = direct;
	cfg.log = lt_log_keep;
	lt_logged[0] = 0;
	setenv("RINGFEED_SEQ_MAP", seq_map, 1);
	rf_stats st;
	size_t n = lt_stream_rows(&cfg, out, cap, &st);
	snprintf(engine, ecap, "%s", st.io_engine);
	return n;
}

static void
compare(const char *name, uint64_t N, enum rf_shuffle shuffle)
{
	uint64_t *a = calloc(2 * N + 1, 8), *m = calloc(2 * N + 1, 8);
	char ea[32], em[32];
	size_t na = stream(name, shuffle, -1, "0", a, 2 * N, ea, sizeof(ea));
	LT_CHECK(strcmp(ea, "mmap") != 0 && !strstr(lt_logged, "copied from maps of the shards"));
	size_t nm = stream(name, shuffle, -1, "1", m, 2 * N, em, sizeof(em));
	LT_CHECK(strcmp(em, "mmap") == 0);
	LT_CHECK(strstr(lt_logged, "reads: chunks copied from maps of the shards by the decode workers"));
	LT_CHECK(na == 2 * N && nm == na && !memcmp(a, m, 8 * na));
	if (nm != na || memcmp(a, m, 8 * na))
		fprintf(stderr, "%s, shuffle %d: %zu rows with read calls, %zu through maps\n", name,
			(int)shuffle, na, nm);
	/* direct set by the caller: read calls, whatever the CPUs. */
	for (int direct = 0; direct <= 1; direct++) {
		stream(name, shuffle, direct, "1", m, 2 * N, em, sizeof(em));
		LT_CHECK(strcmp(em, "mmap") != 0);
	}
	free(a);
	free(m);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("seq-map"));
	const uint64_t N = 1000;
	LT_CHECK(lt_pack(dir, "raw", N, 0, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "zst", N, 3, 4096, 0, 0) == 0);
	LT_CHECK(lt_pack(dir, "sh", N, 0, 2048, 16384, 0) == 0);
	const char *names[] = {"raw.rfs", "zst.rfs", "sh-*.rfs"};
	for (size_t i = 0; i < 3; i++) {
		compare(names[i], N, RF_SHUFFLE_NONE);
		compare(names[i], N, RF_SHUFFLE_CHUNKS);
	}
	/* window and full keep their own engines' choices. */
	char e[32];
	uint64_t *v = calloc(2 * N + 1, 8);
	stream("raw.rfs", RF_SHUFFLE_FULL, -1, "1", v, 2 * N, e, sizeof(e));
	LT_CHECK(!strstr(lt_logged, "copied from maps of the shards by the decode workers"));
	stream("raw.rfs", RF_SHUFFLE_WINDOW, -1, "1", v, 2 * N, e, sizeof(e));
	LT_CHECK(!strstr(lt_logged, "copied from maps of the shards by the decode workers"));
	free(v);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
