/* SPDX-License-Identifier: MIT */
/*
 * Description: the parallel fill.  With several decode workers each copies
 * its own chunk's samples into the batches after its turn in plan order,
 * so a batch made of several chunks is filled by several threads at once;
 * read through maps, each chunk's checksum is checked with those copies.
 * Streams a dataset of small chunks (many per batch), read calls and maps,
 * shuffled or not, one and four workers, and checks that every batch
 * arrives whole and in order, that with four workers batches were filled
 * by more than one thread (the loader's internal counters), that every
 * byte was copied once into staging, and that with maps every chunk was
 * checked with its copies; with one worker nothing is filled in parallel.
 */
#include "lt.h"

#include "loader/internal.h"

static char dir[256];
static uint8_t seen[3000];

/* Sample i of a batch of fields img and y: y names the sample, img must be
 * its value.  Returns 1 when it is not. */
static int
check_sample(const rf_batch *b, uint32_t i)
{
	const rf_batch_field *img = NULL, *y = NULL;
	for (uint32_t f = 0; f < b->nfields; f++) {
		if (!strcmp(b->fields[f].name, "img"))
			img = &b->fields[f];
		if (!strcmp(b->fields[f].name, "y"))
			y = &b->fields[f];
	}
	if (!img || !y)
		return 1;
	int64_t v;
	memcpy(&v, (const uint8_t *)y->data + (uint64_t)i * 8, 8);
	uint64_t g = (uint64_t)(v + 5) / 1000003u;
	uint8_t want[64];
	if (g >= 3000 || (int64_t)(g * 1000003u) - 5 != v || seen[g]++)
		return 1;
	lt_value("img", g, want);
	return memcmp((const uint8_t *)img->data + (uint64_t)i * 20, want, 20) != 0;
}

static uint64_t
run(int map, uint32_t threads, enum rf_shuffle shuffle)
{
	struct lt_paths p;
	rf_config cfg;
	lt_config(&cfg, &p, dir, "fill.rfs");
	cfg.batch_size = 64;
	cfg.decode_threads = threads;
	cfg.map = map;
	/* On the host, mapped batches would go out in place, which keeps the
	 * copies in the turn (gather.c): the fill is what is tested here. */
	cfg.inplace = RF_INPLACE_OFF;
	cfg.shuffle = shuffle;
	cfg.seed = 7;
	cfg.pinned_bytes = 1 << 20;
	cfg.fields = (const char *[]){"img", "y"};
	cfg.nfields = 2;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	LT_CHECK(rc == 0);
	if (rc)
		return 0;
	const rf_batch *b;
	uint64_t samples = 0, batches = 0, bytes = 0;
	memset(seen, 0, sizeof(seen));
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		if (shuffle == RF_SHUFFLE_NONE)
			LT_CHECK(b->first_sample == samples);
		for (uint32_t i = 0; i < b->samples; i++)
			LT_CHECK(check_sample(b, i) == 0);
		samples += b->samples;
		bytes += (uint64_t)b->samples * (20 + 8);
		batches++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	LT_CHECK(samples == 3000);
	/* The threads joined: their counters are final. */
	rf_loader_stop(ld);
	uint64_t par = atomic_load(&ld->stats.fill_bytes_parallel);
	uint64_t all = atomic_load(&ld->stats.fill_bytes);
	uint64_t checked = atomic_load(&ld->stats.fill_checked);
	uint64_t chunks = atomic_load(&ld->stats.chunks);
	fprintf(stderr, "map %d threads %u shuffle %d: %" PRIu64 " batches, %" PRIu64
		" filled by several workers, %" PRIu64 " of %" PRIu64 " bytes copied after the "
		"turn, %" PRIu64 " of %" PRIu64 " chunks checked with their copies\n",
		map, threads, (int)shuffle, batches, ld->stats.fill_batches_multi, par, all,
		checked, chunks);
	uint64_t multi = ld->stats.fill_batches_multi;
	if (threads > 1) {
		/* Batches filled by several workers: counted by the caller, over
		 * tries (one worker may win every turn of a run on a busy
		 * machine). */
		LT_CHECK(par > 0);
		/* Each delivered byte copied once into staging (none twice). */
		LT_CHECK(all == bytes);
		if (map)
			LT_CHECK(checked == chunks);
		else
			LT_CHECK(checked == 0);
	} else {
		LT_CHECK(par == 0 && multi == 0 && checked == 0);
	}
	rf_loader_close(&ld);
	return multi;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("fill"));
	/* ~150 samples a chunk: a batch of 64 spans one or two chunks, and
	 * 20 chunks keep four workers busy. */
	LT_CHECK(lt_pack(dir, "fill", 3000, 0, 4096, 0, 0) == 0);
	for (int map = 0; map <= 1; map++)
		for (uint32_t t = 1; t <= 4; t += 3) {
			uint64_t multi = 0;
			for (int tries = 0; tries < 5 && (tries == 0 || (t > 1 && multi == 0));
			     tries++)
				multi = run(map, t, RF_SHUFFLE_NONE) + run(map, t, RF_SHUFFLE_CHUNKS);
			if (t > 1)
				LT_CHECK(multi > 0);
		}
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
