/* SPDX-License-Identifier: MIT */
/*
 * Description: the emulator's exit checks.  The test runs itself as a
 * child in several roles and checks the child's exit status and stderr:
 * a program that leaks a device allocation, a registered range, a pinned
 * allocation, a stream and an event exits with status 1 and a report
 * naming each (leak_at_exit); with RINGFEED_EMU_EXIT_STATUS=0 the report
 * is printed and the program's own status kept; a hazard nobody
 * acknowledged fails the exit too; RINGFEED_EMU_STRICT=1 aborts on the
 * first hazard; RINGFEED_EMU_WAIT_LIMIT turns a deadlocked wait into a
 * report of what each stream waits for and an abort; a clean program exits
 * 0 and prints nothing.
 */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu-test.h"

static int
child_leak(void)
{
	cudaStream_t s;
	cudaEvent_t e;
	void *d, *h;
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	OK(cudaMalloc(&d, 1000));
	OK(cudaMallocHost(&h, 100));
	OK(cudaHostRegister(m, 8192, 0));
	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&e));
	return 0;
}

static int
child_clean(void)
{
	cudaStream_t s;
	void *d, *h;

	OK(cudaMalloc(&d, 1000));
	OK(cudaMallocHost(&h, 1000));
	OK(cudaStreamCreate(&s));
	OK(cudaMemcpyAsync(d, h, 1000, cudaMemcpyHostToDevice, s));
	OK(cudaStreamSynchronize(s));
	OK(cudaStreamDestroy(s));
	OK(cudaFree(d));
	OK(cudaFreeHost(h));
	return 0;
}

static void
holdup(void *p)
{
	gate_wait(p);
}

/* A source modified before its copy ran, never acknowledged. */
static int
child_hazard(void)
{
	static struct gate gate = GATE_INIT;
	cudaStream_t s;
	char *d, *h;

	OK(cudaMalloc((void **)&d, 1000));
	OK(cudaMallocHost((void **)&h, 1000));
	OK(cudaStreamCreate(&s));
	OK(cudaLaunchHostFunc(s, holdup, &gate));
	OK(cudaMemcpyAsync(d, h, 1000, cudaMemcpyHostToDevice, s));
	h[0] = 1;
	gate_open(&gate);
	(void)cudaStreamSynchronize(s);
	OK(cudaStreamDestroy(s));
	OK(cudaFree(d));
	OK(cudaFreeHost(h));
	return 0;
}

/* A stream waits on an event of a stream held forever, and the program
 * synchronizes with it: a deadlock. */
static int
child_hang(void)
{
	static struct gate never = GATE_INIT;
	cudaStream_t a, b;
	cudaEvent_t e;

	OK(cudaStreamCreate(&a));
	OK(cudaStreamCreate(&b));
	OK(cudaEventCreate(&e));
	OK(cudaLaunchHostFunc(b, holdup, &never));
	OK(cudaEventRecord(e, b));
	OK(cudaStreamWaitEvent(a, e, 0));
	(void)cudaStreamSynchronize(a);
	return 0;
}

/* Runs this program as `role` with extra environment; returns the wait
 * status and the child's stderr. */
static int
run_child(const char *role, const char *env1, const char *env2, char *err, size_t errlen)
{
	int fds[2], status;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char *const argv[] = { (char *)"test-emu-exit", (char *)role, NULL };

		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		if (env1)
			putenv((char *)env1);
		if (env2)
			putenv((char *)env2);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	while (got + 1 < errlen && (r = read(fds[0], err + got, errlen - 1 - got)) > 0)
		got += (size_t)r;
	err[got] = '\0';
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	return status;
}

#define EXPECT_IN(hay, needle) do { \
		if (!strstr(hay, needle)) { \
			fprintf(stderr, "%s:%d: child stderr lacks \"%s\":\n%s\n", __FILE__, __LINE__, \
				needle, hay); \
			exit(1); \
		} \
	} while (0)

int
main(int argc, char **argv)
{
	static char err[16384];
	int st;

	if (argc > 1) {
		if (!strcmp(argv[1], "leak"))
			return child_leak();
		if (!strcmp(argv[1], "clean"))
			return child_clean();
		if (!strcmp(argv[1], "hazard"))
			return child_hazard();
		if (!strcmp(argv[1], "hang"))
			return child_hang();
		return 2;
	}

	st = run_child("leak", NULL, NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	EXPECT_IN(err, "leak_at_exit 5");
	EXPECT_IN(err, "live device allocation");
	EXPECT_IN(err, "live pinned host allocation");
	EXPECT_IN(err, "live registered range");
	EXPECT_IN(err, "live stream");
	EXPECT_IN(err, "live event");

	st = run_child("leak", "RINGFEED_EMU_EXIT_STATUS=0", NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT_IN(err, "leak_at_exit 5");

	st = run_child("leak", "RINGFEED_EMU_EXIT_STATUS=7", NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);

	st = run_child("hazard", NULL, NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	EXPECT_IN(err, "HAZARD source_modified");
	EXPECT_IN(err, "source_modified 1");

	st = run_child("hazard", "RINGFEED_EMU_STRICT=1", NULL, err, sizeof(err));
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	EXPECT_IN(err, "HAZARD source_modified");

	st = run_child("clean", NULL, NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(!strstr(err, "cudart-emulator"));

	st = run_child("clean", "RINGFEED_EMU_REPORT=1", NULL, err, sizeof(err));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT_IN(err, "report (at exit)");
	EXPECT_IN(err, "hazards 0");

	st = run_child("hang", "RINGFEED_EMU_WAIT_LIMIT=200ms", NULL, err, sizeof(err));
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	EXPECT_IN(err, "cudaStreamSynchronize has waited longer than RINGFEED_EMU_WAIT_LIMIT");
	EXPECT_IN(err, "pending, next: wait, waiting for stream #");
	EXPECT_IN(err, "pending, next: host function");

	st = run_child("clean", "RINGFEED_EMU_BW=fast", NULL, err, sizeof(err));
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	EXPECT_IN(err, "bad value RINGFEED_EMU_BW=fast");
	return 0;
}
