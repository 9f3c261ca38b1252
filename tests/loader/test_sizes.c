/* SPDX-License-Identifier: MIT */
/*
 * Description: a config or stats struct that was never initialised.  Each
 * lies at the very end of a page followed by a PROT_NONE guard page, filled
 * with garbage: rf_loader_open answers RF_EUSAGE ("call rf_config_init")
 * for every size but sizeof(rf_config), and rf_loader_stats RF_EUSAGE for
 * every size but sizeof(rf_stats), writing nothing, without touching the
 * guard page (a read past the struct would end the test with SIGSEGV, and
 * AddressSanitizer would see it too).  Reserved bytes that are not zero (a
 * newer header's settings) are refused; a config from rf_config_init opens.
 */
#include <stddef.h>
#include <sys/mman.h>

#include "lt.h"

static char dir[256];

/* Two pages, the second PROT_NONE; returns where an object of `size` bytes
 * ends exactly at the guard page. */
static void *
guarded(size_t size, void **map, size_t *len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	*len = 2 * pg;
	uint8_t *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	if (mprotect(m + pg, pg, PROT_NONE)) {
		perror("mprotect");
		exit(1);
	}
	*map = m;
	return m + pg - size;
}

static void
config_sizes(void)
{
	void *map;
	size_t len;
	rf_config *cfg = guarded(sizeof(rf_config), &map, &len);
	const uint32_t sizes[] = {
		0, 1, 4, 0xa5a5a5a5u, UINT32_MAX, (uint32_t)sizeof(rf_config) + 1,
		(uint32_t)sizeof(rf_config) + 4096, (uint32_t)sizeof(rf_config) - 1,
		(uint32_t)offsetof(rf_config, reserved), (uint32_t)offsetof(rf_config, map),
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(cfg, 0xa5, sizeof(*cfg));
		cfg->size = sizes[i];
		rf_loader *ld = (rf_loader *)cfg; /* garbage, must be cleared */
		int rc = rf_loader_open(&ld, cfg);
		if (rc != RF_EUSAGE)
			fprintf(stderr, "size %u: %d %s\n", sizes[i], rc, rf_loader_last_open_error());
		LT_CHECK(rc == RF_EUSAGE);
		LT_CHECK(ld == NULL);
		LT_CHECK(strstr(rf_loader_last_open_error(), "call rf_config_init") != NULL);
	}
	/* The zeroed config of `rf_config cfg = {0}` is the same mistake. */
	memset(cfg, 0, sizeof(*cfg));
	rf_loader *ld;
	LT_CHECK(rf_loader_open(&ld, cfg) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_last_open_error(), "call rf_config_init") != NULL);
	LT_CHECK(rf_loader_open(&ld, NULL) == RF_EUSAGE);
	LT_CHECK(rf_loader_open(NULL, NULL) == -EINVAL);

	/* A setting from a newer header in the reserved bytes. */
	static char path[512];
	snprintf(path, sizeof(path), "%s/d.rfs", dir);
	const char *paths[] = {path};
	rf_config_init(cfg);
	cfg->paths = paths;
	cfg->npaths = 1;
	cfg->batch_size = 8;
	cfg->pinned_bytes = 256 << 10;
	cfg->device = RF_DEVICE_HOST;
	cfg->log = lt_log;
	cfg->reserved[sizeof(cfg->reserved) - 1] = 1;
	LT_CHECK(rf_loader_open(&ld, cfg) == RF_EUSAGE);
	LT_CHECK(strstr(rf_loader_last_open_error(), "does not know") != NULL);
	cfg->reserved[sizeof(cfg->reserved) - 1] = 0;
	int rc = rf_loader_open(&ld, cfg);
	if (rc < 0)
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
	LT_CHECK(rc == 0);
	rf_loader_close(&ld);
	munmap(map, len);
}

static void
stats_sizes(void)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/d.rfs", dir);
	const char *paths[] = {path};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 8;
	cfg.pinned_bytes = 256 << 10;
	cfg.device = RF_DEVICE_HOST;
	cfg.log = lt_log;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		exit(1);
	}
	const rf_batch *b;
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
	LT_CHECK(rf_loader_release(ld, b, NULL) == 0);

	void *map;
	size_t len;
	rf_stats *st = guarded(sizeof(rf_stats), &map, &len);
	const uint32_t sizes[] = {
		0, 1, 0xa5a5a5a5u, UINT32_MAX, (uint32_t)sizeof(rf_stats) + 1,
		(uint32_t)sizeof(rf_stats) - 1, (uint32_t)offsetof(rf_stats, stall_share),
		(uint32_t)offsetof(rf_stats, stage_slot_bytes),
	};
	static uint8_t want[sizeof(rf_stats)];
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(st, 0xa5, sizeof(*st));
		st->size = sizes[i];
		memcpy(want, st, sizeof(want));
		LT_CHECK(rf_loader_stats(ld, st) == RF_EUSAGE);
		LT_CHECK(memcmp(want, st, sizeof(want)) == 0); /* nothing written */
		LT_CHECK(strstr(rf_loader_errmsg(ld), "sizeof(rf_stats)") != NULL);
	}
	memset(st, 0xa5, sizeof(*st));
	st->size = sizeof(*st);
	LT_CHECK(rf_loader_stats(ld, st) == 0);
	LT_CHECK(st->size == sizeof(*st));
	LT_CHECK(st->batches == 1 && st->samples == 8);
	LT_CHECK(rf_loader_stats(ld, NULL) == -EINVAL);
	munmap(map, len);
	rf_loader_close(&ld);
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("sizes"));
	if (lt_pack(dir, "d", 64, 0, 4096, 0, 0) < 0) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	config_sizes();
	stats_sizes();
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
