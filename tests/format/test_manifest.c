/* SPDX-License-Identifier: MIT */
/*
 * Description: the pack manifest's text (docs/format.md, "Manifest") reads
 * back what was written, and any change to it is refused: every single
 * byte changed, every truncation, bad names, a wrong count, a second
 * manifest version.  A dataset opened through a damaged manifest fails
 * naming it, and a shard that disagrees with its manifest is named.  A
 * directory holding a pack with a manifest and a dataset written without
 * one (format 2) is refused naming both; listed, they read together.
 */
#include "fmt_test.h"
#include "format/manifest.h"

static int
parses(const char *text, size_t len, rf_manifest *m)
{
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	d.errors_quiet = 1;
	int rc = rf_manifest_parse(text, len, m, "test.rfm", &d);
	if (rc == 0)
		rf_manifest_free(m);
	return rc;
}

static void
text_rules(void)
{
	rf_manifest_shard sh[3] = {
		{"d-00000.rfs", 1052672, 1000, 0x1f2e3d4c5b6a7988ULL},
		{"d-00001.rfs", 8256, 0, 0},
		{"d-00002.rfs", 532480, 480, UINT64_MAX},
	};
	rf_manifest m = {0x8c0a2f6b1d2e3f40ULL, 4242, 3, sh};
	size_t len;
	char *t = rf_manifest_format(&m, &len);
	CHECK(t != NULL && strlen(t) == len);
	rf_manifest back;
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	CHECK_RC(rf_manifest_parse(t, len, &back, "x", &d), 0);
	CHECK(back.pack_id == m.pack_id && back.writer_pid == 4242 && back.nshards == 3);
	for (int i = 0; i < 3; i++)
		CHECK(!strcmp(back.shards[i].name, sh[i].name) && back.shards[i].size == sh[i].size &&
		      back.shards[i].samples == sh[i].samples &&
		      back.shards[i].footer_xxh3 == sh[i].footer_xxh3);
	rf_manifest_free(&back);
	/* Any one byte changed, any truncation or extension: refused. */
	char *c = malloc(len + 2);
	CHECK(c != NULL);
	for (size_t i = 0; i < len; i++) {
		memcpy(c, t, len);
		c[i] ^= 0x01;
		CHECK(parses(c, len, &back) < 0);
		c[i] = ' ';
		if (t[i] != ' ')
			CHECK(parses(c, len, &back) < 0);
	}
	for (size_t l = 0; l < len; l++)
		CHECK(parses(t, l, &back) < 0);
	memcpy(c, t, len);
	c[len] = '\n';
	CHECK(parses(c, len + 1, &back) < 0);
	CHECK_RC(parses("ringfeed-manifest 2\n", 20, &back), RF_EFORMAT);
	CHECK_RC(parses("hello", 5, &back), RF_EFORMAT);
	/* Names a reader must not follow out of the directory. */
	const char *bad[] = {"../x.rfs", "a/b.rfs", "..", ".", "a b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rf_manifest_shard one = {(char *)(uintptr_t)bad[i], 1, 1, 1};
		rf_manifest mb = {1, 1, 1, &one};
		size_t bl;
		char *bt = rf_manifest_format(&mb, &bl);
		CHECK(bt && parses(bt, bl, &back) == RF_ECORRUPT);
		free(bt);
	}
	free(c);
	free(t);
}

static void
damaged_on_disk(const char *dir)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U8, 1, (uint64_t[]){100}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 4096;
	cfg.shard_bytes = 3 * 4096;
	char *p = t_path(dir, "m.rfs");
	CHECK_RC(t_write(p, &s, 200, &cfg, 0), 0);
	char *man = t_path(dir, "m.rfm");
	size_t len;
	char *t = (char *)t_slurp(man, &len);
	const char *paths[] = {dir};
	rf_dataset *ds;
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	uint64_t n = rf_dataset_samples(ds);
	CHECK(n == 200 && rf_dataset_shards(ds) >= 2);
	rf_dataset_close(&ds);
	/* Torn: the manifest is named. */
	FILE *f = fopen(man, "wb");
	CHECK(f && fwrite(t, 1, len / 2, f) == len / 2 && fclose(f) == 0);
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "m.rfm") != NULL);
	/* A shard replaced by another of the same pack (the last, fewer
	 * samples): it disagrees with the manifest's entry and is named. */
	f = fopen(man, "wb");
	CHECK(f && fwrite(t, 1, len, f) == len && fclose(f) == 0);
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	size_t last = rf_dataset_shards(ds) - 1;
	char *s1 = t_path(dir, "m-00001.rfs");
	char *sl = strdup(rf_dataset_shard_path(ds, last));
	rf_dataset_close(&ds);
	size_t ll;
	uint8_t *bl = t_slurp(sl, &ll);
	f = fopen(s1, "wb");
	CHECK(f && fwrite(bl, 1, ll, f) == ll && fclose(f) == 0);
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "m-00001.rfs") != NULL);
	CHECK(strstr(rf_dataset_last_open_error(), "the manifest says") != NULL);
	free(bl);
	free(sl);
	free(s1);
	free(t);
	free(man);
	free(p);
}

static void
beside_older(const char *dir)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U8, 1, (uint64_t[]){100}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 4096;
	cfg.shard_bytes = 3 * 4096;
	char *a = t_path(dir, "new.rfs"), *b = t_path(dir, "legacy.rfs");
	CHECK_RC(t_write(a, &s, 150, &cfg, 0), 0);
	cfg.format_version = 2;
	CHECK_RC(t_write(b, &s, 70, &cfg, 0), 0);
	char *bm = t_path(dir, "legacy.rfm");
	CHECK(access(bm, F_OK) != 0);
	/* A pack beside shards without a pack id is not one dataset: the
	 * directory is refused, naming both; listed, they are read together. */
	const char *paths[] = {dir};
	rf_dataset *ds;
	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), RF_EUSAGE);
	CHECK(strstr(rf_dataset_last_open_error(), "new.rfm") != NULL);
	CHECK(strstr(rf_dataset_last_open_error(), "legacy-00000.rfs") != NULL);
	char *am = t_path(dir, "new.rfm"), *bg = t_path(dir, "legacy-*.rfs");
	const char *listed[] = {bg, am};
	CHECK_RC(rf_dataset_open(&ds, listed, 2, NULL), 0);
	CHECK(rf_dataset_samples(ds) == 220);
	CHECK(strstr(rf_dataset_shard_path(ds, 0), "legacy-00000.rfs") != NULL);
	CHECK(strstr(rf_dataset_shard_path(ds, rf_dataset_shards(ds) - 1), "new-") != NULL);
	rf_dataset_close(&ds);
	free(am);
	free(bg);
	free(bm);
	free(a);
	free(b);
}

int
main(void)
{
	text_rules();
	char *dir = t_tmpdir();
	damaged_on_disk(dir);
	char *sub = t_path(dir, "mixed");
	CHECK(mkdir(sub, 0777) == 0);
	beside_older(sub);
	free(sub);
	t_rmtree(dir);
	free(dir);
	return 0;
}
