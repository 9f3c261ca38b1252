/* SPDX-License-Identifier: MIT */
/* Helpers shared by the C tests (tests/common, the rf_test static library),
 * the one check header of every test area: checks that report where they
 * failed and exit 1 (CHECK, CHECK_RC) or count and go on (CHECK_CONT), the
 * exit status of a skipped test, temporary directories, and a zero-bytes
 * test. */
#ifndef RF_TEST_H
#define RF_TEST_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define T_SKIP 77

/* RF_TEST_HOOKS: whether the library has its test-only switches
 * (-Dtest_hooks; src/config.h, seen by tests built with the library's
 * internal include directories).  Without config.h, assume it has. */
#if defined(__has_include)
#if __has_include("config.h")
#include "config.h"
#endif
#endif
#ifndef RF_TEST_HOOKS
#define RF_TEST_HOOKS 1
#endif

/* A test (or part of one) that sets a test-only switch of the library
 * (RINGFEED_IO_FAIL_AT, ...) calls this first: without the switches it
 * would test nothing, so it skips. */
#define RF_TEST_REQUIRE_HOOKS(what)                                                              \
	do {                                                                                     \
		if (!RF_TEST_HOOKS) {                                                            \
			printf("library built without -Dtest_hooks: skipping %s\n", (what));     \
			exit(T_SKIP);                                                            \
		}                                                                                \
	} while (0)

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* `expr` must return `want`; on failure also prints `detail`, a string the
 * caller has at hand (an rf_diag's message, say). */
#define CHECK_RC_MSG(expr, want, detail)                                                         \
	do {                                                                                     \
		int rc_ = (expr);                                                                \
		if (rc_ != (want)) {                                                             \
			fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)%s%s\n",   \
				__FILE__, __LINE__, #expr, rc_, rf_strerror(rc_), (int)(want),   \
				rf_strerror(want), *(detail) ? ": " : "", (detail));         \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

#define CHECK_RC(expr, want) CHECK_RC_MSG(expr, want, "")

/* Checks that go on after a failure: print where and what, count it in
 * rf_test_failures and continue, so a table test reports every failing row
 * at once.  Such a test ends with `return rf_test_status(name);`. */
extern int rf_test_failures;

#define CHECK_CONT(cond)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			rf_test_failures++;                                                      \
		}                                                                                \
	} while (0)

/* The same with a printf-style message after the condition. */
#define CHECK_CONT_MSG(cond, ...)                                                                \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                            \
			fputc('\n', stderr);                                                     \
			rf_test_failures++;                                                      \
		}                                                                                \
	} while (0)

/* 0 when no continuing check failed, else 1 after a line naming the test
 * (`name`, may be NULL) and the count. */
int
rf_test_status(const char *name);

/* A fresh directory $TMPDIR/<prefix>.XXXXXX (/tmp without TMPDIR); exits 1
 * when it cannot be made.  The caller frees the path. */
char *
rf_test_tmpdir(const char *prefix);

/* Remove `dir` and everything below it (best effort). */
void
rf_test_rmtree(const char *dir);

/* Whether all `n` bytes at `p` are zero. */
int
rf_test_all_zero(const void *p, size_t n);

#endif
