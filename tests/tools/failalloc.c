/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD allocation-failure shim for the tests: with
 * RF_FAIL_ALLOC_AT=N the N-th allocation of the process (malloc, calloc,
 * realloc, posix_memalign, aligned_alloc; counted over all threads) returns
 * NULL / ENOMEM, once; every other one is glibc's.  When it fails one and
 * RF_FAIL_ALLOC_HIT names a file, that file is created, so a test can tell
 * that N was past the last allocation.  Not for sanitizer builds (they
 * replace the allocator themselves).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t a, size_t n);

void *malloc(size_t n);
void *calloc(size_t n, size_t m);
void *realloc(void *p, size_t n);
int posix_memalign(void **p, size_t a, size_t n);
void *aligned_alloc(size_t a, size_t n);

static long countdown = -2; /* -2: not read yet; < 0: off */

static int
fail_now(void)
{
	long c = __atomic_load_n(&countdown, __ATOMIC_RELAXED);
	if (c == -2) {
		const char *s = getenv("RF_FAIL_ALLOC_AT");
		c = s ? strtol(s, NULL, 10) : -1;
		__atomic_store_n(&countdown, c > 0 ? c : -1, __ATOMIC_RELAXED);
		c = c > 0 ? c : -1;
	}
	if (c < 0)
		return 0;
	if (__atomic_fetch_sub(&countdown, 1, __ATOMIC_RELAXED) != 1)
		return 0;
	const char *hit = getenv("RF_FAIL_ALLOC_HIT");
	if (hit) {
		int fd = open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
	errno = ENOMEM;
	return 1;
}

void *
malloc(size_t n)
{
	return fail_now() ? NULL : __libc_malloc(n);
}

void *
calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __libc_calloc(n, m);
}

void *
realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __libc_realloc(p, n);
}

int
posix_memalign(void **p, size_t a, size_t n)
{
	if (fail_now())
		return ENOMEM;
	*p = __libc_memalign(a, n);
	return *p ? 0 : ENOMEM;
}

void *
aligned_alloc(size_t a, size_t n)
{
	return fail_now() ? NULL : __libc_memalign(a, n);
}
