/* SPDX-License-Identifier: MIT */
/*
 * Description: a directory is one dataset.  Two packs written side by side
 * (train.rfs and test.rfs, or a single-file pack and a sharded one), format-3
 * shards of two names without manifests, or a pack beside shards without a
 * pack id are refused (RF_EUSAGE) with the packs named and the way to pick
 * one; a directory of shards without pack ids (formats 1 and 2) still reads
 * whole.  Listed paths and globs combine what they name.  A sharded pack
 * opens by the name it was packed to (BASE.rfs, through BASE.rfm), and a
 * missing shard name does not.
 */
#include "fmt_test.h"

static rf_schema s;

static void
write_pack(const char *dir, const char *name, uint64_t n, uint64_t shard_bytes, int version)
{
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 4096;
	cfg.shard_bytes = shard_bytes;
	cfg.format_version = (uint32_t)version;
	char *p = t_path(dir, name);
	CHECK_RC(t_write(p, &s, n, &cfg, 0), 0);
	free(p);
}

static void
open_rc(const char *const *paths, size_t n, int want, uint64_t samples)
{
	rf_dataset *ds = NULL;
	CHECK_RC(rf_dataset_open(&ds, paths, n, NULL), want);
	if (want == 0) {
		CHECK(rf_dataset_samples(ds) == samples);
		rf_dataset_close(&ds);
	}
}

static int
said(const char *what)
{
	const char *m = rf_dataset_last_open_error();
	if (!strstr(m, what)) {
		fprintf(stderr, "message lacks \"%s\": %s\n", what, m);
		return 0;
	}
	return 1;
}

/* train.rfs + test.rfs, each with its manifest. */
static void
train_and_test(const char *root)
{
	char *dir = t_path(root, "tt");
	CHECK(mkdir(dir, 0777) == 0);
	write_pack(dir, "train.rfs", 600, 0, 0);
	write_pack(dir, "test.rfs", 100, 0, 0);
	const char *by_dir[] = {dir};
	open_rc(by_dir, 1, RF_EUSAGE, 0);
	CHECK(said("holds 2 packs"));
	CHECK(said("train.rfm"));
	CHECK(said("test.rfm"));
	CHECK(said("test.rfs"));
	/* Named one by one, or listed, or globbed: what the user asked for. */
	char *tr = t_path(dir, "train.rfs"), *te = t_path(dir, "test.rfs");
	char *trm = t_path(dir, "train.rfm"), *all = t_path(dir, "*.rfs");
	const char *one[] = {tr}, *onem[] = {trm}, *both[] = {tr, te}, *glob1[] = {all};
	open_rc(one, 1, 0, 600);
	open_rc(onem, 1, 0, 600);
	open_rc(both, 2, 0, 700);
	open_rc(glob1, 1, 0, 700);
	/* Without the manifests, shards of two names are still two packs. */
	CHECK(unlink(trm) == 0);
	char *tem = t_path(dir, "test.rfm");
	CHECK(unlink(tem) == 0);
	open_rc(by_dir, 1, RF_EUSAGE, 0);
	CHECK(said("train.rfs"));
	CHECK(said("test.rfs"));
	open_rc(glob1, 1, 0, 700);
	free(tem);
	free(tr);
	free(te);
	free(trm);
	free(all);
	free(dir);
}

/* fm.rfs beside the same data packed sharded, fmz-NNNNN.rfs + fmz.rfm. */
static void
single_and_sharded(const char *root)
{
	char *dir = t_path(root, "ss");
	CHECK(mkdir(dir, 0777) == 0);
	write_pack(dir, "fm.rfs", 500, 0, 0);
	write_pack(dir, "fmz.rfs", 500, 3 * 4096, 0);
	char *z0 = t_path(dir, "fmz-00001.rfs");
	CHECK(access(z0, F_OK) == 0);
	const char *by_dir[] = {dir};
	open_rc(by_dir, 1, RF_EUSAGE, 0);
	CHECK(said("fm.rfm"));
	CHECK(said("fmz.rfm"));
	/* The sharded pack by the name it was packed to. */
	char *z = t_path(dir, "fmz.rfs");
	const char *by_base[] = {z};
	rf_dataset *ds = NULL;
	CHECK_RC(rf_dataset_open(&ds, by_base, 1, NULL), 0);
	CHECK(rf_dataset_samples(ds) == 500);
	CHECK(rf_dataset_shards(ds) > 1);
	CHECK(strstr(rf_dataset_shard_path(ds, 0), "fmz-00000.rfs") != NULL);
	rf_dataset_close(&ds);
	/* A shard name that does not exist is not the pack. */
	char *z9 = t_path(dir, "fmz-00099.rfs");
	const char *by_missing[] = {z9};
	open_rc(by_missing, 1, -ENOENT, 0);
	char *q = t_path(dir, "nope.rfs");
	const char *by_nope[] = {q};
	open_rc(by_nope, 1, -ENOENT, 0);
	CHECK(said("nope.rfs"));
	free(q);
	free(z9);
	free(z);
	free(z0);
	free(dir);
}

/* Shards without a pack id: a directory of them reads whole, as always;
 * beside a format-3 pack it is refused naming them. */
static void
older(const char *root)
{
	char *dir = t_path(root, "old");
	CHECK(mkdir(dir, 0777) == 0);
	write_pack(dir, "a.rfs", 100, 0, 2);
	write_pack(dir, "b.rfs", 150, 3 * 4096, 1);
	const char *by_dir[] = {dir};
	open_rc(by_dir, 1, 0, 250);
	write_pack(dir, "c.rfs", 70, 0, 0);
	open_rc(by_dir, 1, RF_EUSAGE, 0);
	CHECK(said("c.rfm"));
	CHECK(said("without a pack id"));
	free(dir);
}

/* One pack in a directory, sharded, with its manifest: read as before. */
static void
one_pack(const char *root)
{
	char *dir = t_path(root, "one");
	CHECK(mkdir(dir, 0777) == 0);
	write_pack(dir, "p.rfs", 400, 3 * 4096, 0);
	const char *by_dir[] = {dir};
	open_rc(by_dir, 1, 0, 400);
	char *m = t_path(dir, "p.rfm");
	CHECK(unlink(m) == 0);
	open_rc(by_dir, 1, 0, 400);
	free(m);
	free(dir);
}

int
main(void)
{
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U8, 1, (uint64_t[]){100}, -1), 0);
	char *root = t_tmpdir();
	train_and_test(root);
	single_and_sharded(root);
	older(root);
	one_pack(root);
	t_rmtree(root);
	free(root);
	return 0;
}
