/* SPDX-License-Identifier: MIT */
/*
 * rf_loader_stop with a batch held: every thread of the loader is joined at
 * once (only the main thread is left in /proc/self/task), the held batch
 * stays readable and correct until it is released, nothing more is
 * delivered (the next call ends the stream), and close afterwards frees
 * the rest.  With a URL argument the loader reads it (the remote reader's
 * transfers stop too); without one, a local dataset of its own.
 */
#include <dirent.h>

#include "../loader/lt.h"

static int
count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int
main(int argc, char **argv)
{
	if (count_tasks() != 1) {
		fprintf(stderr, "SKIP: the process has threads of its own\n");
		return LT_SKIP;
	}
	const char *dir = lt_tmpdir("stop");
	struct lt_paths lp;
	rf_config cfg;
	if (argc > 1) {
		lt_config(&cfg, &lp, "", "");
		snprintf(lp.path, sizeof(lp.path), "%s", argv[1]);
	} else {
		LT_CHECK(lt_pack(dir, "d", 20000, 0, 8192, 0, 1) == 0);
		lt_config(&cfg, &lp, dir, "d.rfs");
	}
	cfg.batch_size = 64;
	cfg.decode_threads = 3;
	cfg.epochs = 0; /* endless: the threads have work when stopped */
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}
	const rf_batch *b = NULL, *b2 = NULL;
	LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
	LT_CHECK(rf_loader_next(ld, &b2) == 0 && b2);
	int before = count_tasks();
	LT_CHECK(before >= 5);
	rf_stats st0 = {.size = sizeof(rf_stats)}, st1 = {.size = sizeof(rf_stats)};
	rf_loader_stop(ld);
	int after = count_tasks();
	fprintf(stderr, "threads: %d before the stop, %d after\n", before, after);
	LT_CHECK(after == 1);
	LT_CHECK(rf_loader_stats(ld, &st0) == 0);
	usleep(100000);
	LT_CHECK(rf_loader_stats(ld, &st1) == 0);
	LT_CHECK(st1.bytes_read == st0.bytes_read); /* nothing read after the stop */
	/* The held batches are intact, then go back. */
	if (b && argc <= 1)
		LT_CHECK(lt_check_batch(b, b->first_sample) == 0);
	/* The stream has ended. */
	const rf_batch *b3 = (const rf_batch *)1;
	LT_CHECK(rf_loader_next(ld, &b3) == 0 && !b3);
	if (b)
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	if (b2)
		LT_CHECK(rf_loader_release(ld, b2, NULL) == 0);
	rf_loader_stop(ld); /* a no-op the second time */
	rf_loader_close(&ld);
	LT_CHECK(count_tasks() == 1);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
