/* SPDX-License-Identifier: MIT */
/* The shared test helpers' functions (see rf_test.h). */
#define _FILE_OFFSET_BITS 64
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "rf_test.h"

int rf_test_failures;

int
rf_test_status(const char *name)
{
	if (!rf_test_failures)
		return 0;
	fprintf(stderr, "%s%s%d checks failed\n", name ? name : "", name ? ": " : "",
		rf_test_failures);
	return 1;
}

static int
rm_one(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

void
rf_test_rmtree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *
rf_test_tmpdir(const char *prefix)
{
	const char *base = getenv("TMPDIR");
	char *p;
	if (asprintf(&p, "%s/%s.XXXXXX", base && *base ? base : "/tmp", prefix) < 0)
		exit(1);
	if (!mkdtemp(p)) {
		perror("mkdtemp");
		exit(1);
	}
	return p;
}

int
rf_test_all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}
