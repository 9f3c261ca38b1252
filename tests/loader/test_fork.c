/* SPDX-License-Identifier: MIT */
/*
 * Description: a loader used in a child of fork() fails at once.  A loader
 * is opened and a batch taken; the process forks, several times, while the
 * loader's threads read ahead.  In each child every public call on the
 * parent's loader (next, try_next, next_timeout, release, batch_wait,
 * field_read, state save and load, stats) returns RF_EFORK with a message
 * that names the fix (and rf_loader_forked says 1 there, 0 in the parent,
 * whose rf_fork_generation is unchanged), rf_loader_close returns without
 * touching the parent's threads, and a loader the child opens itself reads
 * the whole dataset.  The parent then reads every sample, exactly once, in order.  A hang fails
 * the test: each child has an alarm, and the parent waits for it with a
 * deadline and kills it.  Argument "cuda": the same on the cudart emulator.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "lt.h"
#include "lt_gpu.h"


#define N_SAMPLES 3000
#define BATCH 16

static int use_cuda;
static char dir[256];

static void
config(rf_config *cfg, const char **paths)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/d.rfs", dir);
	paths[0] = path;
	rf_config_init(cfg);
	cfg->paths = paths;
	cfg->npaths = 1;
	cfg->batch_size = BATCH;
	cfg->pinned_bytes = 256 << 10;
	cfg->device = use_cuda ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
	cfg->log = lt_log;
}

/* Read ld to its end; returns the samples, checking each batch's place and
 * bytes. */
static uint64_t
drain(rf_loader *ld, uint64_t next)
{
	const rf_batch *b;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		LT_CHECK(b->first_sample == next);
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		LT_CHECK(lt_check_batch_any(b, b->first_sample) == 0);
		next += b->samples;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	return next;
}

static int
is_fork_error(rf_loader *ld, int rc)
{
	const char *m = rf_loader_errmsg(ld);
	if (rc != RF_EFORK || !strstr(m, "fork()") || !strstr(m, "open the loader in each")) {
		fprintf(stderr, "child: rc %d (%s), message \"%s\"\n", rc, rf_strerror(rc), m);
		return 0;
	}
	return 1;
}

/* The child's side: everything on the parent's loader fails at once. */
static int
child(rf_loader *ld, const rf_batch *held)
{
	const rf_batch *b = NULL;
	alarm(20); /* a hang ends the child with SIGALRM, which the parent reports */
	LT_CHECK(rf_loader_forked(ld) == 1 && rf_loader_forked(NULL) == 0);
	LT_CHECK(is_fork_error(ld, rf_loader_next(ld, &b)) && b == NULL);
	LT_CHECK(is_fork_error(ld, rf_loader_try_next(ld, &b)));
	LT_CHECK(is_fork_error(ld, rf_loader_next_timeout(ld, &b, 1000000000u)));
	LT_CHECK(is_fork_error(ld, rf_batch_wait(held, NULL)));
	uint8_t buf[4096];
	LT_CHECK(is_fork_error(ld, rf_batch_field_read(held, 0, buf, sizeof(buf))));
	LT_CHECK(is_fork_error(ld, rf_loader_release(ld, held, NULL)));
	uint8_t st[RF_STATE_MAX];
	size_t len = 0;
	LT_CHECK(is_fork_error(ld, rf_loader_state_save(ld, st, sizeof(st), &len)));
	LT_CHECK(is_fork_error(ld, rf_loader_state_load(ld, st, sizeof(st))));
	rf_stats s;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	LT_CHECK(is_fork_error(ld, rf_loader_stats(ld, &s)));
	rf_loader_close(&ld);
	LT_CHECK(ld == NULL);

	/* The pattern that works: a loader of the child's own (not under
	 * ThreadSanitizer, which refuses new threads after a multi-threaded
	 * fork, nor AddressSanitizer, see RF_ASAN). */
	if (!use_cuda && !RF_TSAN && !RF_ASAN) {
		rf_config cfg;
		const char *paths[1];
		config(&cfg, paths);
		rf_loader *own = NULL;
		int rc = rf_loader_open(&own, &cfg);
		LT_CHECK(rc == 0);
		if (rc == 0) {
			LT_CHECK(drain(own, 0) == N_SAMPLES);
			rf_loader_close(&own);
		}
	}
	return lt_failures ? 1 : 0;
}

/* Wait for pid at most 30 s; kill it past that.  Returns 1 when it exited
 * with status 0. */
static int
wait_child(pid_t pid)
{
	int status = 0;
	for (int i = 0; i < 3000; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			if (WIFSIGNALED(status))
				fprintf(stderr, "child ended by signal %d (a hang ends with %d)\n",
					WTERMSIG(status), SIGALRM);
			return WIFEXITED(status) && WEXITSTATUS(status) == 0;
		}
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	fprintf(stderr, "child %ld still running after 30 s: killed\n", (long)pid);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 0;
}

int
main(int argc, char **argv)
{
	use_cuda = argc > 1 && !strcmp(argv[1], "cuda");
	lt_on_device = use_cuda;
	if (use_cuda && !getenv("RINGFEED_CUDART")) {
		fprintf(stderr, "RINGFEED_CUDART is not set: skipped\n");
		return LT_SKIP;
	}
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir(use_cuda ? "fork-cuda" : "fork-host"));
	int rc = lt_pack(dir, "d", N_SAMPLES, 0, 4096, 0, 1);
	if (rc < 0) {
		fprintf(stderr, "pack: %s\n", rf_strerror(rc));
		return 1;
	}
	rf_config cfg;
	const char *paths[1];
	config(&cfg, paths);
	rf_loader *ld = NULL;
	rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}
	uint64_t next = 0;
	for (int round = 0; round < 3; round++) {
		const rf_batch *b;
		LT_CHECK(rf_loader_next(ld, &b) == 0 && b);
		if (!b)
			break;
		LT_CHECK(b->first_sample == next);
		next += b->samples;
		fflush(NULL);
		LT_CHECK(rf_loader_forked(ld) == 0);
		unsigned gen = rf_fork_generation();
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(child(ld, b));
		LT_CHECK(wait_child(pid));
		LT_CHECK(rf_fork_generation() == gen && rf_loader_forked(ld) == 0);
		/* The parent's loader goes on: the batch is still held here. */
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		LT_CHECK(lt_check_batch_any(b, b->first_sample) == 0);
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(drain(ld, next) == N_SAMPLES);
	rf_stats s;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	LT_CHECK(rf_loader_stats(ld, &s) == 0 && s.samples == N_SAMPLES);
	rf_loader_close(&ld);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
