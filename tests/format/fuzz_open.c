/* SPDX-License-Identifier: MIT */
/*
 * Description: fuzz replay for the shard reader.  `fuzz_open DIR|FILE...`
 * opens every file given (a directory: every file in it) as a dataset, with
 * and without checksum verification, and reads every value and every chunk.
 * Any result is fine except a crash, a sanitizer report, an error without a
 * message naming the file, or a handle returned on error.  With no argument
 * it first generates a corpus (fixed seed) of mutations of valid shards:
 * random byte flips, truncations, and interesting values written over the
 * header, index, footer and chunk offsets with the checksums recomputed so
 * the mutations reach the structural checks, then replays it.
 */
#include <dirent.h>
#include <xxhash.h>

#include "fmt_test.h"

static uint64_t rng_state = 0x5eed5eed12345678ULL;

static uint64_t
rng(void)
{
	rng_state += 0x9e3779b97f4a7c15ULL;
	return t_mix(rng_state);
}

/* Outcomes, printed so a corpus that stopped reaching deep checks shows. */
static int n_open_fail, n_open_ok, n_read_fail;

static int
fuzz_one(const char *path)
{
	for (int verify = 0; verify <= 1; verify++) {
		rf_dataset_config dc;
		rf_dataset_config_init(&dc);
		dc.verify = verify;
		rf_dataset *ds = (rf_dataset *)1;
		const char *paths[] = {path};
		int rc = rf_dataset_open(&ds, paths, 1, &dc);
		if (rc < 0) {
			if (ds != NULL || !strstr(rf_dataset_last_open_error(), path)) {
				fprintf(stderr, "%s: error %d without a proper message: %s\n", path, rc,
					rf_dataset_last_open_error());
				return -1;
			}
			n_open_fail++;
			continue;
		}
		n_open_ok++;
		static uint8_t buf[1 << 16];
		size_t len;
		uint64_t n = rf_dataset_samples(ds);
		for (uint64_t i = 0; i < n && i < 100000; i++)
			for (uint32_t k = 0; k < rf_dataset_schema(ds)->nfields; k++) {
				rc = rf_dataset_read(ds, i, k, buf, sizeof buf, &len);
				n_read_fail += rc < 0;
				if (rc < 0 && rc != -ENOSPC && !strstr(rf_dataset_errmsg(ds), path)) {
					fprintf(stderr, "%s: read error %d: %s\n", path, rc,
						rf_dataset_errmsg(ds));
					return -1;
				}
			}
		for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++)
			rf_dataset_verify_chunk(ds, c);
		rf_dataset_close(&ds);
	}
	return 0;
}

static int
replay(const char *p)
{
	struct stat st;
	if (stat(p, &st) < 0) {
		perror(p);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return fuzz_one(p);
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int bad = 0, count = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char *f = t_path(p, de->d_name);
		bad |= fuzz_one(f) < 0;
		count++;
		free(f);
	}
	closedir(d);
	fprintf(stderr, "%s: %d files replayed: %d opens failed, %d succeeded, %d reads failed\n",
		p, count, n_open_fail, n_open_ok, n_read_fail);
	return bad ? -1 : 0;
}

/* Recompute every checksum that a reader checks before it parses. */
static void
fix_all(uint8_t *b, size_t size)
{
	if (size < RF_FMT_MIN_FILE)
		return;
	uint8_t *f = b + size - 64;
	uint64_t hsize = rf_le32(b + 12);
	if (hsize >= 40 && hsize <= 4096) {
		uint64_t h = XXH3_64bits(b, hsize - 8);
		rf_put_le64(b + hsize - 8, h);
		rf_put_le64(f + 32, h);
	}
	uint64_t io = rf_le64(f), nch = rf_le64(f + 8);
	if (io <= size - 64 && nch == (size - 64 - io) / 64) {
		for (uint64_t i = 0; i < nch; i++) {
			uint8_t *e = b + io + 64 * i;
			uint64_t off = rf_le64(e), st = rf_le64(e + 8);
			if (off <= size && st <= size - off)
				rf_put_le64(e + 40, XXH3_64bits(b + off, st));
		}
		rf_put_le64(f + 24, XXH3_64bits(b + io, 64 * nch));
	}
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
}

static const uint64_t interesting[] = {
	0, 1, 2, 7, 8, 63, 64, 65, 4095, 4096, 4097, 1ULL << 31, 1ULL << 32, (1ULL << 32) + 1,
	1ULL << 40, 1ULL << 60, 1ULL << 63, UINT64_MAX, UINT64_MAX - 4095, UINT32_MAX,
};

static void
mutate(uint8_t *b, size_t *size, uint64_t ops)
{
	size_t n = *size;
	int fix = 0;
	for (uint64_t o = 0; o < ops; o++) {
		uint64_t r = rng();
		switch (r % 6) {
		case 0: /* byte flips anywhere */
			b[rng() % n] ^= (uint8_t)(1 + rng() % 255);
			break;
		case 1: /* truncate */
			n = (size_t)(rng() % (n + 1));
			if (n == 0)
				goto done;
			break;
		case 2: { /* an interesting value over a header word */
			uint64_t at = rng() % (n < 512 ? n : 512);
			uint64_t v = interesting[rng() % (sizeof interesting / sizeof interesting[0])];
			for (uint64_t i = 0; i < 8 && at + i < n; i++)
				b[at + i] = (uint8_t)(v >> (8 * i));
			fix = 1;
			break;
		}
		case 3: /* ... over the index and footer (the tail) */
		case 4: {
			uint64_t tail = n < 1024 ? n : 1024;
			uint64_t at = n - 1 - rng() % tail;
			at -= at % 8;
			uint64_t v = interesting[rng() % (sizeof interesting / sizeof interesting[0])];
			if (rng() % 3 == 0)
				v = rf_le64(b + at) + (rng() % 3) - 1;
			for (uint64_t i = 0; i < 8 && at + i < n; i++)
				b[at + i] = (uint8_t)(v >> (8 * i));
			fix = 1;
			break;
		}
		case 5: /* inside the first chunk: its offsets arrays */
			if (n > 4096 + 64) {
				uint64_t at = 4096 + (rng() % 64) * 8;
				uint64_t v = interesting[rng() % (sizeof interesting / sizeof interesting[0])];
				if (at + 8 <= n)
					rf_put_le64(b + at, rng() % 2 ? v : rf_le64(b + at) + 2);
				fix = 1;
			}
			break;
		}
	}
done:
	if (fix && rng() % 4)
		fix_all(b, n);
	*size = n;
}

static int
generate_and_replay(void)
{
	char *dir = t_tmpdir();
	char *corpus = t_path(dir, "corpus");
	CHECK(mkdir(corpus, 0777) == 0);
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "tok", RF_DTYPE_U16, 1, (uint64_t[]){0}, 0), 0);
	CHECK_RC(rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1), 0);
	CHECK_RC(rf_schema_add(&s, "img", RF_DTYPE_U8, 2, (uint64_t[]){3, 5}, -1), 0);
	CHECK_RC(rf_schema_add(&s, "b", RF_DTYPE_BYTES, 1, (uint64_t[]){0}, 0), 0);
	uint8_t *seeds[2];
	size_t seed_len[2];
	for (int z = 0; z < 2; z++) {
		rf_writer_config cfg;
		rf_writer_config_init(&cfg);
		cfg.zstd_level = z ? 1 : 0;
		cfg.chunk_bytes = 700;
		cfg.no_fsync = 1;
		char *p = t_path(dir, z ? "seed-z.rfs" : "seed.rfs");
		CHECK_RC(t_write(p, &s, 60, &cfg, 0), 0);
		seeds[z] = t_slurp(p, &seed_len[z]);
		t_spit(p, seeds[z], seed_len[z]);
		free(p);
	}
	uint8_t *m = malloc(seed_len[0] > seed_len[1] ? seed_len[0] : seed_len[1]);
	for (int i = 0; i < 800; i++) {
		int z = i % 2;
		memcpy(m, seeds[z], seed_len[z]);
		size_t n = seed_len[z];
		mutate(m, &n, 1 + rng() % 4);
		char name[32];
		snprintf(name, sizeof name, "m%04d.rfs", i);
		char *p = t_path(corpus, name);
		t_spit(p, m, n);
		free(p);
	}
	free(m);
	int rc = replay(corpus);
	char *seed_path = t_path(dir, "seed.rfs");
	rc |= fuzz_one(seed_path);
	free(seed_path);
	free(seeds[0]);
	free(seeds[1]);
	t_rmtree(dir);
	free(corpus);
	free(dir);
	return rc;
}

#ifdef RF_FUZZ_ENGINE
/* Built with a fuzzing engine (-DRF_FUZZ_ENGINE -fsanitize=fuzzer): each
 * input is written to a file and opened like a corpus file. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *path;
	if (!path) {
		char *dir = t_tmpdir();
		path = t_path(dir, "input.rfs");
		free(dir);
	}
	t_spit(path, data, size);
	if (fuzz_one(path) < 0)
		abort();
	return 0;
}
#else
int
main(int argc, char **argv)
{
	if (argc < 2)
		return generate_and_replay() < 0 ? 1 : 0;
	int bad = 0;
	for (int i = 1; i < argc; i++)
		bad |= replay(argv[i]) < 0;
	return bad;
}
#endif
