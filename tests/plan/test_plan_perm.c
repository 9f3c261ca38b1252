/* SPDX-License-Identifier: MIT */
/*
 * Description: the keyed permutation rf_perm is a bijection on [0, n) for
 * sizes around powers of two, tiny and empty domains; rf_perm_fill (eight
 * lanes, cycle walking per lane) gives exactly rf_perm_at's values for every
 * start and count, including counts below and around the lane width; another
 * key gives another permutation.
 */
#include "plan_test.h"

static void
check_n(uint64_t n, uint64_t key)
{
	rf_perm p, q;
	rf_perm_init(&p, n, key);
	rf_perm_init(&q, n, key + 1);
	uint8_t *seen = calloc(n + 1, 1);
	uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 64) * sizeof *b);
	uint64_t same = 0;
	for (uint64_t i = 0; i < n; i++) {
		a[i] = rf_perm_at(&p, i);
		CHECK_CONT_MSG(a[i] < n, "n=%llu: image %llu out of range", (unsigned long long)n,
		      (unsigned long long)a[i]);
		if (a[i] < n) {
			CHECK_CONT_MSG(!seen[a[i]], "n=%llu: %llu hit twice", (unsigned long long)n,
			      (unsigned long long)a[i]);
			seen[a[i]] = 1;
		}
		same += rf_perm_at(&q, i) == a[i];
	}
	if (n >= 8)
		CHECK_CONT_MSG(same < n, "n=%llu: key+1 gives the same permutation", (unsigned long long)n);
	/* fill over a few (start, count) windows. */
	const uint64_t starts[] = {0, 1, 7, n / 3, n > 40 ? n - 40 : 0};
	const uint32_t counts[] = {0, 1, 7, 8, 15, 16, 17, 33, 100, 1000};
	for (size_t si = 0; si < 5; si++) {
		for (size_t ci = 0; ci < 10; ci++) {
			uint64_t st = starts[si];
			uint32_t c = counts[ci];
			if (st > n || c > n - st)
				continue;
			for (uint32_t i = 0; i < c + 8 && i < n + 64; i++)
				b[i] = 0xDEAD;
			rf_perm_fill(&p, st, c, b);
			for (uint32_t i = 0; i < c; i++)
				CHECK_CONT_MSG(b[i] == a[st + i], "n=%llu fill(%llu, %u)[%u] = %llu, at gives %llu",
				      (unsigned long long)n, (unsigned long long)st, c, i,
				      (unsigned long long)b[i], (unsigned long long)a[st + i]);
			if (c < n + 64)
				CHECK_CONT_MSG(b[c] == 0xDEAD, "n=%llu: fill wrote past count", (unsigned long long)n);
		}
	}
	/* The whole domain in one call. */
	if (n <= UINT32_MAX) {
		rf_perm_fill(&p, 0, (uint32_t)n, b);
		CHECK_CONT_MSG(n == 0 || memcmp(a, b, n * sizeof *a) == 0, "n=%llu: whole fill differs",
		      (unsigned long long)n);
	}
	free(seen);
	free(a);
	free(b);
}

int
main(void)
{
	const uint64_t ns[] = {0, 1, 2, 3, 5, 15, 16, 17, 100, 255, 256, 257, 511, 1000, 4095, 4096,
			       4097, 65537, 100003};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		for (uint64_t key = 0; key < 3; key++)
			check_n(ns[i], key * 0x1234567 + 9);
	return test_result("test_plan_perm");
}
