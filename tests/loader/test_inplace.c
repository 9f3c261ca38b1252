/* SPDX-License-Identifier: MIT */
/*
 * Description: batches handed out in place (rf_config.inplace).  On the
 * host device with mapped shards, a batch that lies whole in one
 * uncompressed chunk points into the shard's map (checked against
 * /proc/self/maps), is flagged RF_BATCH_READONLY, and holds exactly the
 * bytes the copy path (inplace = off) delivers, for every batch of several
 * epochs, in shuffle none and chunks; batches that straddle two chunks are
 * copied, the others never (their rows are aligned to their elements
 * wherever they start); a byte flipped in a chunk fails
 * the stream before any batch from that chunk is delivered; a write into a
 * batch in place faults instead of reaching the page cache; a batch held
 * across rf_loader_stop keeps its bytes; with the consumer away, a chunk's
 * batches are staged, beyond the staging places copied batches are held
 * to, and a consumer holding depth (63) of them, more than a chunk's, still
 * gets the next; compressed chunks, reads into the
 * ring, window shuffling and inplace = off are never in place.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

static int failures;
#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                       \
		}                                                                         \
	} while (0)

#define N 2000
#define IMG 64      /* u8[64]: rows of 64 bytes, aligned wherever they start */
#define CHUNK_SAMPLES 100

static void
value_img(uint64_t g, uint8_t *b)
{
	for (int j = 0; j < IMG; j++)
		b[j] = (uint8_t)(g * 131 + (uint64_t)j * 7 + (g >> 8));
}

static int64_t
value_y(uint64_t g)
{
	return (int64_t)(g * 1000003u) - 17;
}

static int
pack(const char *path, int zstd)
{
	rf_schema s;
	memset(&s, 0, sizeof(s));
	int rc = rf_schema_add(&s, "img", RF_DTYPE_U8, 1, (uint64_t[]){IMG}, -1);
	if (!rc)
		rc = rf_schema_add(&s, "y", RF_DTYPE_I64, 0, NULL, -1);
	if (rc)
		return rc;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.zstd_level = zstd ? 3 : 0;
	cfg.chunk_bytes = CHUNK_SAMPLES * (IMG + 8);
	cfg.no_fsync = 1;
	rf_writer *w;
	if ((rc = rf_writer_open(&w, path, &s, &cfg)) < 0)
		return rc;
	for (uint64_t g = 0; g < N; g++) {
		uint8_t img[IMG];
		int64_t y = value_y(g);
		value_img(g, img);
		rf_value v[2] = {{img, IMG}, {&y, 8}};
		if ((rc = rf_writer_add(w, v)) < 0) {
			rf_writer_abort(&w);
			return rc;
		}
	}
	return rf_writer_close(&w);
}

/* The address range of the map of `path` in this process, from
 * /proc/self/maps; 0 when none. */
static int
map_range(const char *path, uintptr_t *lo, uintptr_t *hi)
{
	char real[4096];
	if (!realpath(path, real))
		return 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[8192];
	int found = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &b, perms, &pos) < 3 || !pos)
			continue;
		char *name = line + pos;
		name[strcspn(name, "\n")] = 0;
		if (strcmp(name, real))
			continue;
		CHECK(perms[1] == '-'); /* never writable */
		if (!found || a < *lo)
			*lo = a;
		if (!found || b > *hi)
			*hi = b;
		found = 1;
	}
	fclose(f);
	return found;
}

static uint32_t open_depth; /* rf_config.depth of the next open (0: default) */

static rf_loader *
open_loader(const char *path, enum rf_shuffle shuffle, uint32_t batch, int map, int direct,
	    enum rf_inplace inplace, uint32_t epochs)
{
	const char *paths[] = {path};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = batch;
	cfg.shuffle = shuffle;
	cfg.seed = 7;
	cfg.epochs = epochs;
	cfg.device = RF_DEVICE_HOST;
	cfg.map = map;
	cfg.direct = direct;
	cfg.inplace = inplace;
	cfg.depth = open_depth;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		exit(1);
	}
	return ld;
}

/* Whether the batch's samples lie whole in one chunk (file order or chunk
 * order keeps a chunk's samples consecutive): its first sample index and
 * count, from the y field. */
static int
whole_in_chunk(const rf_batch *b)
{
	const int64_t *y = b->fields[1].data;
	uint64_t g0 = (uint64_t)((y[0] + 17) / 1000003);
	uint64_t g1 = (uint64_t)((y[b->samples - 1] + 17) / 1000003);
	return g0 / CHUNK_SAMPLES == g1 / CHUNK_SAMPLES && g1 - g0 + 1 == b->samples;
}

/* Every batch of `epochs` epochs from ld (in place where it can be) and
 * from ref (inplace off): the same bytes, in place exactly where they
 * should be.  Returns the batches in place. */
static uint64_t
compare(const char *path, rf_loader *ld, rf_loader *ref, uint32_t batch, int expect_inplace)
{
	uintptr_t lo = 0, hi = 0;
	int mapped = map_range(path, &lo, &hi);
	uint64_t in_place = 0, batches = 0;
	(void)batch;
	for (;;) {
		const rf_batch *a = NULL, *b = NULL;
		int ra = rf_loader_next(ld, &a), rb = rf_loader_next(ref, &b);
		CHECK(ra == 0 && rb == 0);
		if (ra || rb) {
			fprintf(stderr, "next: %s / %s\n", rf_loader_errmsg(ld), rf_loader_errmsg(ref));
			break;
		}
		CHECK(!a == !b);
		if (!a || !b)
			break;
		batches++;
		CHECK(a->index == b->index && a->epoch == b->epoch && a->samples == b->samples &&
		      a->first_sample == b->first_sample && a->nfields == 2);
		CHECK(b->flags == 0);
		for (uint32_t f = 0; f < a->nfields; f++) {
			CHECK(a->fields[f].bytes == b->fields[f].bytes);
			CHECK(memcmp(a->fields[f].data, b->fields[f].data, b->fields[f].bytes) == 0);
		}
		/* The contents are the packed samples (first_sample is the
		 * position; in file order, the sample). */
		for (uint32_t i = 0; i < a->samples; i++) {
			int64_t y = ((const int64_t *)a->fields[1].data)[i];
			uint64_t g = (uint64_t)((y + 17) / 1000003);
			uint8_t want[IMG];
			value_img(g, want);
			CHECK(value_y(g) == y && g < N);
			CHECK(memcmp((const uint8_t *)a->fields[0].data + (uint64_t)i * IMG, want,
				     IMG) == 0);
		}
		int whole = whole_in_chunk(a);
		int ro = (a->flags & RF_BATCH_READONLY) != 0;
		if (ro) {
			in_place++;
			CHECK(whole);
			CHECK(mapped);
			for (uint32_t f = 0; f < a->nfields; f++) {
				uintptr_t p = (uintptr_t)a->fields[f].data;
				CHECK(mapped && p >= lo && p + a->fields[f].bytes <= hi);
				CHECK(p % (f ? 8 : 1) == 0);
			}
			CHECK(a->data == a->fields[0].data);
			CHECK(a->bytes == a->fields[0].bytes + a->fields[1].bytes);
		} else {
			/* Copied: in the ring, never in the map. */
			uintptr_t p = (uintptr_t)a->fields[0].data;
			CHECK(!mapped || p < lo || p >= hi);
			/* A whole batch is in place whenever it can be. */
			if (expect_inplace && whole)
				CHECK(!"a whole batch was copied");
		}
		CHECK(rf_loader_release(ld, a, NULL) == 0);
		CHECK(rf_loader_release(ref, b, NULL) == 0);
	}
	rf_stats st = {.size = sizeof(st)};
	CHECK(rf_loader_stats(ld, &st) == 0);
	CHECK(st.inplace == (uint32_t)expect_inplace);
	if (st.inplace != (uint32_t)expect_inplace)
		fprintf(stderr, "rf_stats.inplace %u (engine %s, in_place %d)\n", st.inplace,
			st.io_engine, st.in_place);
	CHECK(batches > 0);
	if (!expect_inplace)
		CHECK(in_place == 0);
	return in_place;
}

static void
run_compare(const char *path, enum rf_shuffle shuffle, uint32_t batch, int map, int direct,
	    int expect_inplace, uint32_t epochs)
{
	rf_loader *ld = open_loader(path, shuffle, batch, map, direct, RF_INPLACE_ON, epochs);
	rf_loader *ref = open_loader(path, shuffle, batch, map, direct, RF_INPLACE_OFF, epochs);
	rf_stats st = {.size = sizeof(st)};
	CHECK(rf_loader_stats(ref, &st) == 0 && st.inplace == 0);
	uint64_t n = compare(path, ld, ref, batch, expect_inplace);
	/* Of the N / batch batches per epoch, those inside a chunk. */
	if (expect_inplace)
		CHECK(n > 0);
	printf("shuffle %d, batch %u, map %d, direct %d: %" PRIu64 " batches in place\n",
	       (int)shuffle, batch, map, direct, n);
	rf_loader_close(&ld);
	rf_loader_close(&ref);
}

/* A write into a batch in place faults (the map is read-only): done in a
 * child, which must not survive it. */
static void
write_faults(const char *path)
{
	rf_loader *ld = open_loader(path, RF_SHUFFLE_NONE, 20, 1, -1, RF_INPLACE_ON, 1);
	const rf_batch *b = NULL;
	CHECK(rf_loader_next(ld, &b) == 0 && b);
	if (b && (b->flags & RF_BATCH_READONLY)) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			signal(SIGSEGV, SIG_DFL);
			signal(SIGBUS, SIG_DFL);
			((volatile uint8_t *)b->fields[0].data)[0] ^= 1;
			_exit(0);
		}
		int status = 0;
		CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
		CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
		/* ... and the bytes are still the packed ones. */
		uint8_t want[IMG];
		value_img(0, want);
		CHECK(memcmp(b->fields[0].data, want, IMG) == 0);
	} else {
		CHECK(!"the first batch is not in place");
	}
	if (b)
		CHECK(rf_loader_release(ld, b, NULL) == 0);
	rf_loader_close(&ld);
}

/* The maps outlive the batches: a batch in place held across
 * rf_loader_stop keeps its bytes until it is released. */
static void
held_across_stop(const char *path)
{
	rf_loader *ld = open_loader(path, RF_SHUFFLE_NONE, 20, 1, -1, RF_INPLACE_ON, 1);
	const rf_batch *b = NULL;
	CHECK(rf_loader_next(ld, &b) == 0 && b && (b->flags & RF_BATCH_READONLY));
	rf_loader_stop(ld);
	if (b) {
		for (uint32_t i = 0; i < b->samples; i++) {
			uint8_t want[IMG];
			value_img(i, want);
			CHECK(memcmp((const uint8_t *)b->fields[0].data + (uint64_t)i * IMG, want,
				     IMG) == 0);
			CHECK(((const int64_t *)b->fields[1].data)[i] == value_y(i));
		}
		CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	rf_loader_close(&ld);
}

/* Batches in place hold no staging memory: with the consumer away, the
 * worker stages all of a chunk's batches (50 of 2 samples), beyond the
 * staging places the copied batches are held to, instead of stopping
 * there and leaving the next chunk's check for when the consumer waits. */
static void
staged_a_chunk_ahead(const char *path)
{
	rf_loader *ld = open_loader(path, RF_SHUFFLE_NONE, 2, 1, -1, RF_INPLACE_ON, 1);
	const rf_batch *b = NULL;
	CHECK(rf_loader_next(ld, &b) == 0 && b && (b->flags & RF_BATCH_READONLY));
	rf_stats st = {.size = sizeof(st)};
	for (int i = 0; i < 200; i++) {
		CHECK(rf_loader_stats(ld, &st) == 0);
		if (st.staged >= CHUNK_SAMPLES / 2 - 2)
			break;
		usleep(10000);
	}
	printf("batches of 2 in place staged behind one held: %u (most %u)\n", st.staged,
	       st.staged_max);
	CHECK(st.staged >= CHUNK_SAMPLES / 2 - 2);
	if (b)
		CHECK(rf_loader_release(ld, b, NULL) == 0);
	uint64_t n = 1;
	while (rf_loader_next(ld, &b) == 0 && b) {
		for (uint32_t i = 0; i < b->samples; i++)
			CHECK(((const int64_t *)b->fields[1].data)[i] == value_y(n * 2 + i));
		n++;
		CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	CHECK(n == N / 2);
	rf_loader_close(&ld);
}

/* The consumer may hold depth batches in place, more than a chunk's (60
 * of 2 samples, 50 a chunk): the next one still comes (it once waited for
 * a release, forever, past a chunk's batches and 2). */
static void
held_beyond_a_chunk(const char *path)
{
	open_depth = 63;
	rf_loader *ld = open_loader(path, RF_SHUFFLE_NONE, 2, 1, -1, RF_INPLACE_ON, 1);
	open_depth = 0;
	const rf_batch *b[61];
	alarm(60); /* a hang fails the test instead of its timeout */
	uint32_t got = 0;
	for (; got < 61; got++) {
		if (rf_loader_next(ld, &b[got]) != 0 || !b[got])
			break;
		CHECK(((const int64_t *)b[got]->fields[1].data)[0] == value_y(2 * got));
	}
	alarm(0);
	printf("batches in place held at once: %u\n", got);
	CHECK(got == 61);
	for (uint32_t i = 0; i < got; i++)
		CHECK(rf_loader_release(ld, b[i], NULL) == 0);
	rf_loader_close(&ld);
}

/* A byte flipped in chunk `bad`: every batch before it is delivered, and
 * the stream fails before any batch with a sample of that chunk. */
static void
flipped(const char *dir, const char *good)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/flipped.rfs", dir);
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", good, path);
	CHECK(system(cmd) == 0);
	rf_dataset *ds = NULL;
	const char *paths[] = {path};
	CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
	uint64_t nchunks = rf_dataset_chunks(ds);
	uint64_t bad = nchunks / 2;
	rf_chunk_info ci;
	CHECK(rf_dataset_chunk_info(ds, bad, &ci) == 0);
	rf_dataset_close(&ds);
	FILE *f = fopen(path, "r+b");
	CHECK(f != NULL);
	if (!f)
		return;
	long at = (long)(ci.offset + ci.stored_bytes / 3);
	fseek(f, at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x10, f);
	fclose(f);

	rf_loader *ld = open_loader(path, RF_SHUFFLE_NONE, 20, 1, -1, RF_INPLACE_ON, 1);
	uint64_t delivered = 0;
	int rc;
	for (;;) {
		const rf_batch *b = NULL;
		rc = rf_loader_next(ld, &b);
		if (rc < 0 || !b)
			break;
		CHECK(b->first_sample + b->samples <= ci.first_sample);
		delivered += b->samples;
		CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	CHECK(rc == RF_ECHECKSUM);
	CHECK(strstr(rf_loader_errmsg(ld), "chunk") != NULL);
	/* Everything before the bad chunk's batch came out. */
	CHECK(delivered == ci.first_sample / 20 * 20);
	printf("flipped byte in chunk %" PRIu64 ": %" PRIu64 " samples before it, then: %s\n", bad,
	       delivered, rf_loader_errmsg(ld));
	rf_loader_close(&ld);
}

int
main(void)
{
	char dir[] = "/tmp/rf-inplace-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char raw[4096], zst[4096];
	snprintf(raw, sizeof(raw), "%s/raw.rfs", dir);
	snprintf(zst, sizeof(zst), "%s/zstd.rfs", dir);
	if (pack(raw, 0) < 0 || pack(zst, 1) < 0) {
		fprintf(stderr, "pack: %s\n", rf_writer_last_error());
		return 1;
	}
	rf_dataset *ds = NULL;
	const char *paths[] = {raw};
	CHECK(rf_dataset_open(&ds, paths, 1, NULL) == 0);
	rf_chunk_info ci;
	CHECK(rf_dataset_chunk_info(ds, 0, &ci) == 0 && ci.samples == CHUNK_SAMPLES);
	rf_dataset_close(&ds);

	/* File order: batches of 20 and 5 lie whole in chunks of 100; of 16,
	 * most do and some straddle. */
	run_compare(raw, RF_SHUFFLE_NONE, 20, 1, -1, 1, 3);
	run_compare(raw, RF_SHUFFLE_NONE, 16, 1, -1, 1, 2);
	run_compare(raw, RF_SHUFFLE_NONE, 5, 1, -1, 1, 1);
	run_compare(raw, RF_SHUFFLE_CHUNKS, 24, 1, -1, 1, 3);
	/* Never in place: compressed chunks, reads into the ring (buffered
	 * or O_DIRECT), window shuffling. */
	run_compare(zst, RF_SHUFFLE_NONE, 20, 1, -1, 0, 1);
	run_compare(raw, RF_SHUFFLE_NONE, 20, 0, 0, 0, 1);
	run_compare(raw, RF_SHUFFLE_NONE, 20, 0, 1, 0, 1);
	run_compare(raw, RF_SHUFFLE_WINDOW, 20, 1, -1, 0, 1);

	write_faults(raw);
	held_across_stop(raw);
	staged_a_chunk_ahead(raw);
	held_beyond_a_chunk(raw);
	flipped(dir, raw);

	/* A value that is neither auto nor off. */
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.inplace = (enum rf_inplace)7;
	rf_loader *ld = NULL;
	CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && !ld);

	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
