/* SPDX-License-Identifier: MIT */
/*
 * Description: a write replaces everything an earlier write to the same
 * path left.  Written in many shards and then in fewer, the directory holds only
 * the new shards (a loader given the directory reads exactly the new samples);
 * written sharded over a single-file output and single-file over a sharded
 * one, the other layout's files go; a file with a shard's name that is not a
 * shard (no magic) is never removed, and files of other bases stay.
 */
#include "fmt_test.h"

static rf_schema
schema(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U8, 1, (uint64_t[]){1000}, -1), 0);
	return s;
}

static int
exists(const char *dir, const char *name)
{
	char *p = t_path(dir, name);
	int e = access(p, F_OK) == 0;
	free(p);
	return e;
}

static void
write_set(const char *dir, const char *name, uint64_t n, uint64_t shard_bytes)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 8192;
	cfg.shard_bytes = shard_bytes;
	char *p = t_path(dir, name);
	CHECK_RC(t_write(p, &s, n, &cfg, 0), 0);
	free(p);
}

/* Samples of the dataset a directory (or glob) names. */
static uint64_t
samples_of(const char *dir, const char *pattern)
{
	char *p = t_path(dir, pattern);
	const char *paths[] = {p};
	rf_dataset *ds;
	int rc = rf_dataset_open(&ds, paths, 1, NULL);
	free(p);
	if (rc < 0) {
		fprintf(stderr, "open %s: %s\n", pattern, rf_dataset_last_open_error());
		return 0;
	}
	uint64_t n = rf_dataset_samples(ds);
	rf_dataset_close(&ds);
	return n;
}

/* The shards d-00000.rfs, d-00001.rfs, ... up to the first missing one. */
static int
count_shards(const char *dir)
{
	int n = 0;
	for (;; n++) {
		char name[64];
		snprintf(name, sizeof name, "d-%05d.rfs", n);
		if (!exists(dir, name))
			return n;
	}
}

static void
put_file(const char *dir, const char *name, const char *text)
{
	char *p = t_path(dir, name);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	fputs(text, f);
	fclose(f);
	free(p);
}

int
main(void)
{
	char *dir = t_tmpdir();

	/* Many shards, then fewer: the first write's shards above the new
	 * count go. */
	write_set(dir, "d.rfs", 400, 64 << 10);
	int before = count_shards(dir);
	CHECK(before >= 4);
	CHECK(samples_of(dir, "d-*.rfs") == 400);
	put_file(dir, "other-00000.rfs", "not ours");
	write_set(dir, "d.rfs", 100, 64 << 10);
	int after = count_shards(dir);
	CHECK(after >= 1 && after < before);
	for (int i = after; i < before; i++) {
		char name[64];
		snprintf(name, sizeof name, "d-%05d.rfs", i);
		CHECK(!exists(dir, name));
	}
	CHECK(samples_of(dir, "d-*.rfs") == 100);
	CHECK(exists(dir, "other-00000.rfs"));

	/* Single-file over sharded: every numbered shard goes. */
	write_set(dir, "d.rfs", 50, 0);
	CHECK(exists(dir, "d.rfs") && !exists(dir, "d-00000.rfs") && !exists(dir, "d-00001.rfs"));
	CHECK(samples_of(dir, "d*.rfs") == 50);

	/* Sharded over single-file: the single file goes. */
	write_set(dir, "d.rfs", 300, 64 << 10);
	CHECK(!exists(dir, "d.rfs") && exists(dir, "d-00000.rfs"));
	CHECK(samples_of(dir, "d*.rfs") == 300);

	/* A file by a shard's name that is not a shard stays; the probe goes
	 * on past it and removes a real leftover shard above it. */
	int shards = count_shards(dir);
	CHECK(shards >= 3);
	char stranger[64], stale[64], cmd[8192];
	snprintf(stranger, sizeof stranger, "d-%05d.rfs", shards);
	snprintf(stale, sizeof stale, "d-%05d.rfs", shards + 1);
	put_file(dir, stranger, "a note someone left");
	snprintf(cmd, sizeof cmd, "cp '%s/d-00000.rfs' '%s/%s'", dir, dir, stale);
	CHECK(system(cmd) == 0);
	write_set(dir, "d.rfs", 300, 64 << 10); /* the same shards again */
	CHECK(exists(dir, stranger));
	CHECK(!exists(dir, stale));

	t_rmtree(dir);
	free(dir);
	return 0;
}
