/* SPDX-License-Identifier: MIT */
/*
 * Description: a pack replaces the previous one at once or not at all.
 * Over an earlier pack (more shards, then fewer), a writer is killed (or its
 * rename fails) at each of its renames in turn; after every one, the
 * directory, the manifest, the streaming loader and `ringfeed verify` see
 * exactly the old samples or exactly the new ones, never a mix, and a glob
 * of the shards either sees one pack or fails naming the mixed shards.  The
 * next pack to the same output finishes or removes what the killed one left
 * (no *.tmp.PID stays).  Shards of two packs put together by hand, with or
 * without a manifest, are refused with their names.
 *
 * The renames are intercepted by defining rename() here: the library's calls
 * bind to this definition.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/wait.h>

#include "fmt_test.h"
#include "ringfeed/ringfeed.h"

static int fault_at;     /* 1-based rename to fault, 0: none */
static int fault_kill;   /* kill the process there instead of failing */
static int renames;

int
rename(const char *from, const char *to)
{
	renames++;
	if (fault_at && renames == fault_at) {
		if (fault_kill)
			raise(SIGKILL);
		errno = EIO;
		return -1;
	}
	return renameat(AT_FDCWD, from, AT_FDCWD, to);
}

static const char *ringfeed_exe;

static rf_schema
schema(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U32, 1, (uint64_t[]){256}, -1), 0);
	return s;
}

/* Pack `gen`: n samples, sample i all gen x 1000000 + i. */
static int
pack(const char *out, uint32_t gen, uint32_t n, int at, int kill)
{
	rf_schema s = schema();
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 3072;                /* 3 samples, one page */
	cfg.shard_bytes = 4 * 4096;            /* 3 chunks a shard */
	rf_writer *w;
	int rc = rf_writer_open(&w, out, &s, &cfg);
	if (rc < 0)
		return rc;
	renames = 0;
	fault_at = at;
	fault_kill = kill;
	uint32_t v[256];
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		for (int k = 0; k < 256; k++)
			v[k] = gen * 1000000 + i;
		rf_value val = {v, sizeof v};
		rc = rf_writer_add(w, &val);
	}
	if (rc == 0)
		rc = rf_writer_close(&w);
	else
		rf_writer_abort(&w);
	fault_at = 0;
	return rc;
}

/* The generation whose samples ds holds, all of them in order, else -1. */
static int
generation(rf_dataset *ds, const uint32_t *nof)
{
	uint64_t n = rf_dataset_samples(ds);
	uint32_t v[256];
	size_t len;
	if (n == 0 || rf_dataset_read(ds, 0, 0, v, sizeof v, &len) < 0)
		return -1;
	int gen = (int)(v[0] / 1000000);
	if (gen < 1 || gen > 9 || n != nof[gen])
		return -1;
	for (uint64_t i = 0; i < n; i++) {
		if (rf_dataset_read(ds, i, 0, v, sizeof v, &len) < 0 ||
		    v[0] != (uint32_t)gen * 1000000 + i || v[255] != v[0])
			return -1;
	}
	return gen;
}

static int
open_gen(const char *path, const uint32_t *nof, int *rc_out)
{
	rf_dataset *ds;
	const char *p[] = {path};
	int rc = rf_dataset_open(&ds, p, 1, NULL);
	*rc_out = rc;
	if (rc < 0)
		return -1;
	int g = generation(ds, nof);
	rf_dataset_close(&ds);
	return g;
}

/* The generation the streaming loader delivers from dir, else -1. */
static int
loader_gen(const char *dir, const uint32_t *nof)
{
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {dir};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 16;
	cfg.epochs = 1;
	cfg.device = RF_DEVICE_HOST;
	cfg.shuffle = RF_SHUFFLE_NONE;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "loader open %s: %s\n", dir, rf_loader_last_open_error());
		return -1;
	}
	const rf_batch *b;
	int gen = 0, rc;
	uint64_t seen = 0;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		rf_batch_wait(b, NULL);
		const uint32_t *x = b->fields[0].data;
		for (uint64_t i = 0; i < b->samples; i++, seen++) {
			uint32_t v = x[i * 256];
			if (!gen)
				gen = (int)(v / 1000000);
			if (v != (uint32_t)gen * 1000000 + seen)
				gen = -1;
		}
		rf_loader_release(ld, b, NULL);
	}
	rf_loader_close(&ld);
	return rc == 0 && gen > 0 && seen == nof[gen] ? gen : -1;
}

static int
verify_status(const char *path)
{
	if (!ringfeed_exe)
		return 0;
	char *cmd;
	if (asprintf(&cmd, "'%s' verify -q '%s' >/dev/null 2>&1", ringfeed_exe, path) < 0)
		exit(1);
	int st = system(cmd);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
count_tmp(const char *dir)
{
	char *pat = t_path(dir, "*.tmp.*");
	glob_t g;
	int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (n)
		globfree(&g);
	free(pat);
	return n;
}

/* Every reader sees generation old or new, never a mix. */
static int
check_state(const char *dir, const char *out, const uint32_t *nof, int old, int new, int at)
{
	char *man = t_path(dir, "d.rfm"), *pat = t_path(dir, "d-*.rfs");
	int rc;
	int g = open_gen(dir, nof, &rc);
	if (g != old && g != new) {
		fprintf(stderr, "rename %d: the directory holds generation %d (rc %d: %s)\n", at, g,
			rc, rf_dataset_last_open_error());
		CHECK(0);
	}
	int gm = open_gen(man, nof, &rc);
	CHECK(gm == g || (access(man, F_OK) != 0 && g == old));
	int gg = open_gen(pat, nof, &rc);
	if (gg < 0) {
		/* Mixed or partial under the final names: refused, naming
		 * them. */
		const char *m = rf_dataset_last_open_error();
		CHECK_RC(rc, RF_ECORRUPT);
		CHECK((strstr(m, "different packs") && strstr(m, "d-00000.rfs")) ||
		      strstr(m, "shards of a pack of"));
	}
	CHECK(gg < 0 || gg == old || gg == new);
	CHECK(loader_gen(dir, nof) == g);
	CHECK(verify_status(dir) == 0);
	(void)out;
	free(man);
	free(pat);
	return g;
}

static void
faults(const char *dir, int kill, uint32_t n_old, uint32_t n_new)
{
	char *out = t_path(dir, "d.rfs");
	uint32_t nof[10] = {0, n_old, n_new, n_old};
	/* Generation 1, then 2 renames faulted one by one, 3 after each. */
	CHECK_RC(pack(out, 1, n_old, 0, 0), 0);
	int shards_new = 0;
	{
		/* How many renames a clean pack of generation 2 makes. */
		char *sub = t_path(dir, "probe");
		mkdir(sub, 0777);
		char *po = t_path(sub, "d.rfs");
		CHECK_RC(pack(po, 2, n_new, 0, 0), 0);
		shards_new = renames;
		free(po);
		t_rmtree(sub);
		free(sub);
	}
	CHECK(shards_new >= 3);
	for (int at = 1; at <= shards_new; at++) {
		int old = 1, new = 2;
		if (kill) {
			pid_t pid = fork();
			CHECK(pid >= 0);
			if (pid == 0)
				_exit(pack(out, 2, n_new, at, 1) == 0 ? 0 : 3);
			int st;
			CHECK(waitpid(pid, &st, 0) == pid);
			CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		} else {
			int rc = pack(out, 2, n_new, at, 0);
			CHECK_RC(rc, -EIO);
			CHECK(strstr(rf_writer_last_error(), "rename") != NULL);
		}
		int g = check_state(dir, out, nof, old, new, at);
		/* Before the manifest's rename the old pack stays; after it the
		 * new one is the dataset. */
		CHECK(g == (at == 1 ? old : new));
		CHECK(kill || (at == 1) == (count_tmp(dir) == 0));
		/* The next pack finishes or removes what is left. */
		CHECK_RC(pack(out, 3, n_old, 0, 0), 0);
		CHECK(count_tmp(dir) == 0);
		nof[1] = n_old;
		CHECK(check_state(dir, out, nof, 3, 3, 0) == 3);
		/* Back to generation 1 for the next round. */
		CHECK_RC(pack(out, 1, n_old, 0, 0), 0);
		CHECK(count_tmp(dir) == 0);
	}
	free(out);
}

/* Shards of two packs put together by hand. */
static void
mixed_by_hand(const char *dir)
{
	char *a = t_path(dir, "a"), *b = t_path(dir, "b");
	mkdir(a, 0777);
	mkdir(b, 0777);
	char *pa = t_path(a, "d.rfs"), *pb = t_path(b, "d.rfs");
	CHECK_RC(pack(pa, 1, 60, 0, 0), 0);
	CHECK_RC(pack(pb, 2, 60, 0, 0), 0);
	/* b's second shard into a. */
	char *from = t_path(b, "d-00001.rfs"), *to = t_path(a, "d-00001.rfs");
	CHECK(renameat(AT_FDCWD, from, AT_FDCWD, to) == 0);
	const char *p[] = {a};
	rf_dataset *ds;
	/* With the manifest: it names a's pack. */
	CHECK_RC(rf_dataset_open(&ds, p, 1, NULL), RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "d-00001.rfs") != NULL);
	CHECK(strstr(rf_dataset_last_open_error(), "d.rfm") != NULL);
	CHECK(verify_status(a) == 1);
	/* Without it: the pack ids disagree. */
	char *man = t_path(a, "d.rfm");
	CHECK(unlink(man) == 0);
	CHECK_RC(rf_dataset_open(&ds, p, 1, NULL), RF_ECORRUPT);
	CHECK(strstr(rf_dataset_last_open_error(), "different packs") != NULL);
	CHECK(strstr(rf_dataset_last_open_error(), "d-00001.rfs") != NULL);
	CHECK(verify_status(a) == 1);
	/* Different datasets in one directory stay allowed. */
	char *pc = t_path(a, "other.rfs");
	CHECK_RC(pack(pc, 3, 10, 0, 0), 0);
	free(pc);
	free(man);
	free(from);
	free(to);
	free(pa);
	free(pb);
	free(a);
	free(b);
}

/* A stale temporary file of a killed write goes; one of a live process
 * stays; other names stay. */
static void
stale_temps(const char *dir)
{
	char *out = t_path(dir, "s.rfs");
	CHECK_RC(pack(out, 1, 60, 0, 0), 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	CHECK(waitpid(pid, NULL, 0) == pid);
	char name[128];
	const char *stems[] = {"s-00000.rfs", "s-00007.rfs", "s.rfm", "s.rfs", "t-00000.rfs"};
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "%s.tmp.%ld", stems[i], (long)pid);
		char *p = t_path(dir, name);
		int fd = open(p, O_WRONLY | O_CREAT, 0666);
		CHECK(fd >= 0);
		close(fd);
		free(p);
	}
	snprintf(name, sizeof name, "s-00001.rfs.tmp.%ld", (long)getppid());
	char *live = t_path(dir, name);
	int fd = open(live, O_WRONLY | O_CREAT, 0666);
	CHECK(fd >= 0);
	close(fd);
	CHECK_RC(pack(out, 1, 60, 0, 0), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "%s.tmp.%ld", stems[i], (long)pid);
		char *p = t_path(dir, name);
		CHECK((access(p, F_OK) == 0) == (i == 4));
		unlink(p);
		free(p);
	}
	CHECK(access(live, F_OK) == 0);
	unlink(live);
	free(live);
	free(out);
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		ringfeed_exe = argv[1];
	char *dir = t_tmpdir();
	char *d1 = t_path(dir, "kill"), *d2 = t_path(dir, "fail"), *d3 = t_path(dir, "grow");
	char *d4 = t_path(dir, "mixed"), *d5 = t_path(dir, "stale");
	mkdir(d1, 0777);
	mkdir(d2, 0777);
	mkdir(d3, 0777);
	mkdir(d4, 0777);
	mkdir(d5, 0777);
	faults(d1, 1, 50, 24);  /* 6 shards, then 3 */
	faults(d2, 0, 50, 24);
	faults(d3, 1, 24, 50);  /* 3 shards, then 6 */
	mixed_by_hand(d4);
	stale_temps(d5);
	t_rmtree(dir);
	free(d1);
	free(d2);
	free(d3);
	free(d4);
	free(d5);
	free(dir);
	return 0;
}
