/* SPDX-License-Identifier: MIT */
/*
 * Description: device memory is not host memory.  A host read or write
 * through a pointer from cudaMalloc faults with SIGSEGV at that address,
 * as on a GPU (checked in child processes), also after cudaFree and for a
 * card-sized allocation; copies through the API round-trip in every
 * direction, synchronous and asynchronous; a freed device address is
 * refused by cudaMemcpy and cudaHostRegister; rfemu_device_view gives a
 * host function the bytes; a card's worth of device memory costs no host
 * memory until written.
 */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu-test.h"

static volatile uintptr_t want_lo, want_hi;

/* The child's SIGSEGV handler: exits 42 when the fault is at the device
 * address it touched, 43 when elsewhere. */
static void
on_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)sig;
	(void)uc;
	_exit(a >= want_lo && a < want_hi ? 42 : 43);
}

enum touch { READ, WRITE };

/* Touches p from the host in a child process.  With `handler`, the child
 * catches the fault and reports its address (exit 42: at p); without, it
 * must die of SIGSEGV itself.  Returns whether it went as on a GPU. */
static bool
host_touch_faults(void *p, size_t span, enum touch how, bool handler)
{
	int st = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		volatile unsigned char *v = p;

		if (handler) {
			struct sigaction sa;

			memset(&sa, 0, sizeof(sa));
			sa.sa_sigaction = on_segv;
			sa.sa_flags = SA_SIGINFO;
			want_lo = (uintptr_t)p;
			want_hi = (uintptr_t)p + span;
			sigaction(SIGSEGV, &sa, NULL);
		} else {
			signal(SIGSEGV, SIG_DFL);
		}
		if (how == READ)
			(void)v[0];
		else
			v[0] = 1;
		_exit(0);	/* the host reached device memory */
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	if (handler)
		return WIFEXITED(st) && WEXITSTATUS(st) == 42;
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

static void
test_faults(void)
{
	const size_t n = 64 << 10;
	unsigned char *d;

	OK(cudaMalloc((void **)&d, n));
	CHECK(((uintptr_t)d & 255) == 0);
	CHECK(host_touch_faults(d, 1, READ, true));
	CHECK(host_touch_faults(d + n - 1, 1, WRITE, true));
	CHECK(host_touch_faults(d + 4096, 1, READ, false));
	CHECK(host_touch_faults(d, 1, WRITE, false));
	/* The parent was not touched by the children's attempts. */
	CHECK(rfemu_pointer_device(d) == 0);
	OK(cudaFree(d));
	/* A freed device address stays out of the host's reach. */
	CHECK(host_touch_faults(d, 1, READ, true));
	CHECK(rfemu_pointer_device(d) == -1);
}

static void
test_round_trip(void)
{
	const size_t n = (1 << 20) + 300;	/* not a multiple of anything */
	unsigned char *host, *back, *pin, *d1, *d2;
	cudaStream_t s;

	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMalloc((void **)&d1, n));
	OK(cudaMalloc((void **)&d2, n));
	OK(cudaMallocHost((void **)&pin, n));
	host = malloc(n);
	back = malloc(n);
	CHECK(host && back);
	for (size_t i = 0; i < n; i++)
		host[i] = (unsigned char)(i * 131 + (i >> 10));

	/* Synchronous, every direction, the pointers telling the kind. */
	OK(cudaMemcpy(d1, host, n, cudaMemcpyHostToDevice));
	OK(cudaMemcpy(d2, d1, n, cudaMemcpyDeviceToDevice));
	OK(cudaDeviceSynchronize());
	memset(back, 0, n);
	OK(cudaMemcpy(back, d2, n, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(back, host, n));
	memset(back, 0, n);
	OK(cudaMemcpy(back + 7, d1 + 7, n - 7, cudaMemcpyDefault));
	CHECK(!memcmp(back + 7, host + 7, n - 7));

	/* Asynchronous, through pinned memory, at offsets inside a buffer. */
	memcpy(pin, host, n);
	OK(cudaMemcpyAsync(d1 + 1000, pin, n - 1000, cudaMemcpyHostToDevice, s));
	OK(cudaMemcpyAsync(d2, d1 + 1000, n - 1000, cudaMemcpyDeviceToDevice, s));
	memset(back, 0, n);
	OK(cudaStreamSynchronize(s));
	memset(pin, 0, n);
	OK(cudaMemcpyAsync(pin, d2, n - 1000, cudaMemcpyDeviceToHost, s));
	OK(cudaStreamSynchronize(s));
	CHECK(!memcmp(pin, host, n - 1000));

	/* The kernel's view: the same bytes, at another address. */
	{
		const unsigned char *v = rfemu_device_view(d2, n - 1000);

		CHECK(v != NULL && v != d2);
		CHECK(!memcmp(v, host, n - 1000));
		CHECK(rfemu_device_view(d2 + 1, n) == NULL);	/* runs past the end */
		CHECK(rfemu_device_view(host, 1) == NULL);
	}

	/* A device address no allocation holds is neither device nor host
	 * memory: refused at the call, not a crash in the copy. */
	OK(cudaFree(d2));
	EXPECT(cudaMemcpy(back, d2, 16, cudaMemcpyDefault), cudaErrorInvalidValue);
	EXPECT(cudaMemcpy(d2, host, 16, cudaMemcpyDefault), cudaErrorInvalidValue);
	EXPECT(cudaMemcpy(back, d2, 16, cudaMemcpyHostToHost), cudaErrorInvalidValue);
	EXPECT(cudaHostRegister(d2, 4096, 0), cudaErrorInvalidValue);
	EXPECT(cudaHostRegister(d1, 4096, 0), cudaErrorInvalidValue);

	OK(cudaFree(d1));
	OK(cudaFreeHost(pin));
	OK(cudaStreamDestroy(s));
	free(host);
	free(back);
	(void)cudaGetLastError();
}

static long
rss_kib(void)
{
	long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A card's worth (the default 16 GiB, in two allocations) costs nothing
 * until written, faults from the host like any device memory, and takes
 * copies at both ends. */
static void
test_card_sized(void)
{
	const size_t half = (size_t)8 << 30;
	unsigned char *a, *b, bytes[2] = { 0x11, 0x22 }, got[2] = { 0, 0 };
	long before = rss_kib(), after;

	OK(cudaMalloc((void **)&a, half));
	OK(cudaMalloc((void **)&b, half));
	OK(cudaMemcpy(a + half - 1, &bytes[0], 1, cudaMemcpyHostToDevice));
	OK(cudaMemcpy(b, &bytes[1], 1, cudaMemcpyHostToDevice));
	OK(cudaMemcpy(&got[0], a + half - 1, 1, cudaMemcpyDeviceToHost));
	OK(cudaMemcpy(&got[1], b, 1, cudaMemcpyDeviceToHost));
	CHECK(got[0] == 0x11 && got[1] == 0x22);
	CHECK(host_touch_faults(a + half / 2, 1, READ, true));
	CHECK(host_touch_faults(b + half - 1, 1, WRITE, true));
	after = rss_kib();
	if (before >= 0 && after >= 0)
		CHECK(after - before < 64 * 1024);	/* well under 64 MiB */
	OK(cudaFree(a));
	OK(cudaFree(b));
}

int
main(void)
{
	struct rfemu_counters c;

	test_faults();
	test_round_trip();
	test_card_sized();

	c = counters();
	check_only_hazard(&c, RFEMU_HAZARD_COUNT, "devmem");
	CHECK(c.live_allocations == 0 && c.device_bytes == 0);
	CHECK(c.live_host_allocs == 0 && c.live_streams == 0 && c.pending_ops == 0);
	return 0;
}
