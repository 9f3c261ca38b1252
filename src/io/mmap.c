/* SPDX-License-Identifier: MIT */
/*
 * The "mmap" engine (mmap.h): files mapped whole, ranges faulted in where
 * they lie.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/mmap.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

struct rf_io_map {
	rf_diag *diag;
	size_t nfiles;
	uint8_t **base;
	uint64_t *len;
	size_t page;
	int populate;        /* MADV_POPULATE_READ works (else MADV_WILLNEED) */
	unsigned char *mvec; /* mincore's answer for the largest range */
	size_t mvec_len;
};

int
rf_io_map_open(rf_io_map **out, size_t nfiles, uint64_t max_span, rf_diag *diag)
{
	*out = NULL;
	rf_io_map *m = calloc(1, sizeof(*m));
	if (!m)
		return rf_fail(diag, -ENOMEM, "loader: out of memory");
	long pg = sysconf(_SC_PAGESIZE);
	m->diag = diag;
	m->page = pg > 0 ? (size_t)pg : 4096;
	m->populate = 1;
	m->nfiles = nfiles;
	size_t n = nfiles ? nfiles : 1;
	m->base = calloc(n, sizeof(*m->base));
	m->len = calloc(n, sizeof(*m->len));
	m->mvec_len = (size_t)(max_span / m->page) + 2;
	m->mvec = malloc(m->mvec_len);
	if (!m->base || !m->len || !m->mvec) {
		rf_io_map_close(&m);
		return rf_fail(diag, -ENOMEM, "loader: out of memory");
	}
	*out = m;
	return 0;
}

int
rf_io_map_add(rf_io_map *m, size_t index, const char *path)
{
	if (index >= m->nfiles)
		return rf_fail(m->diag, -EINVAL, "%s: file %zu of a map of %zu", path, index,
			       m->nfiles);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = -errno;
		return rf_fail(m->diag, e, "%s: cannot open: %s", path, rf_strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return rf_fail(m->diag, e, "%s: cannot map: %s", path, rf_strerror(e));
	}
	if (st.st_size <= 0) {
		close(fd);
		return rf_fail(m->diag, RF_ETRUNCATED, "%s: cannot map: the file is empty", path);
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	int e = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (e)
		return rf_fail(m->diag, e, "%s: cannot map %" PRId64 " bytes: %s", path,
			       (int64_t)st.st_size, rf_strerror(e));
	m->base[index] = p;
	m->len[index] = (uint64_t)st.st_size;
	return 0;
}

/* 1 when every page of mincore's vector is resident. */
static int
all_resident(const unsigned char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(v[i] & 1))
			return 0;
	return 1;
}

/*
 * MADV_POPULATE_READ reads what is not in the page cache and maps it, here
 * in the caller (the loader's reader thread), ahead of whoever reads the
 * bytes; a page that cannot be read (I/O error, the file shrank) is EFAULT
 * from the kernel, reported as EIO instead of the SIGBUS a reader of the
 * bytes would get touching it.
 */
int64_t
rf_io_map_range(rf_io_map *m, size_t index, uint64_t offset, uint64_t len, const uint8_t **p)
{
	uint64_t flen = m->len[index];
	uint64_t n = offset < flen ? flen - offset : 0;
	if (n > len)
		n = len;
	/* A file shorter than asked: point at its end (n = 0). */
	uint8_t *at = m->base[index] + (offset < flen ? offset : flen);
	*p = at;
	if (n == 0)
		return 0;
	uintptr_t lo = (uintptr_t)at & ~(uintptr_t)(m->page - 1);
	size_t span = (size_t)((uintptr_t)at + n - lo);
	/* Every page already in the page cache (a warm dataset, a later
	 * epoch): nothing to read, and faulting in pages that are mapped
	 * already costs more than this check. */
	size_t np = (span + m->page - 1) / m->page;
	if (np <= m->mvec_len && mincore((void *)lo, span, m->mvec) == 0 &&
	    all_resident(m->mvec, np))
		return (int64_t)n;
	for (;;) {
		int adv = m->populate ? MADV_POPULATE_READ : MADV_WILLNEED;
		if (madvise((void *)lo, span, adv) == 0)
			return (int64_t)n;
		int e = errno;
		if (e == EINTR || e == EAGAIN)
			continue;
		if (e == EINVAL && m->populate) {
			m->populate = 0;
			rf_log(m->diag, RF_LOG_WARN, "map: MADV_POPULATE_READ is not supported "
			       "(kernel before 5.14): pages are faulted in by the decode workers");
			continue;
		}
		return e == EFAULT ? -EIO : -e;
	}
}

void
rf_io_map_close(rf_io_map **mp)
{
	if (!mp || !*mp)
		return;
	rf_io_map *m = *mp;
	for (size_t i = 0; m->base && i < m->nfiles; i++)
		if (m->base[i])
			munmap(m->base[i], (size_t)m->len[i]);
	free(m->base);
	free(m->len);
	free(m->mvec);
	free(m);
	*mp = NULL;
}
