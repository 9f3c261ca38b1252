/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_pack_order, the order of `ringfeed pack --shuffle`: for
 * sizes around the Feistel domain's edges (0, 1, 2, 255, 256, 257, 5000)
 * every position gets a distinct input sample below n; asking in pieces
 * gives what one call gives; the same seed gives the same order and another
 * seed another one; the order is not the identity, and not the full
 * shuffle's order under the same seed; a range past n is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/dataset.h>

#include "plan/plan.h"
#include "rf_test.h"


int
main(void)
{
	static const uint64_t sizes[] = {0, 1, 2, 255, 256, 257, 5000};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t n = sizes[s];
		uint64_t *a = calloc(n + 1, 8), *b = calloc(n + 1, 8), *c = calloc(n + 1, 8);
		unsigned char *seen = calloc(n + 1, 1);
		CHECK_CONT(rf_pack_order(n, 42, 0, n, a) == 0);
		uint64_t bad = 0;
		for (uint64_t i = 0; i < n; i++) {
			bad += a[i] >= n || seen[a[i]];
			if (a[i] < n)
				seen[a[i]] = 1;
		}
		CHECK_CONT(bad == 0);
		/* In pieces of 1, 7 and 100 positions. */
		for (uint64_t at = 0, k = 1; at < n; at += k, k = k == 1 ? 7 : 100) {
			uint64_t m = n - at < k ? n - at : k;
			CHECK_CONT(rf_pack_order(n, 42, at, m, b + at) == 0);
		}
		CHECK_CONT(n == 0 || memcmp(a, b, n * 8) == 0);
		CHECK_CONT(rf_pack_order(n, 42, 0, n, c) == 0);
		CHECK_CONT(n == 0 || memcmp(a, c, n * 8) == 0);
		if (n >= 255) {
			uint64_t same = 0, fixed = 0;
			CHECK_CONT(rf_pack_order(n, 43, 0, n, c) == 0);
			for (uint64_t i = 0; i < n; i++) {
				same += a[i] == c[i];
				fixed += a[i] == i;
			}
			CHECK_CONT(same < n / 8 && fixed < n / 8);
			/* Not the full shuffle's order for the same seed. */
			rf_perm p;
			rf_perm_init(&p, n, 42);
			uint64_t full_same = 0;
			for (uint64_t i = 0; i < n; i++)
				full_same += rf_perm_at(&p, i) == a[i];
			CHECK_CONT(full_same < n / 8);
		}
		CHECK_CONT(rf_pack_order(n, 42, n, 0, a) == 0);
		CHECK_CONT(rf_pack_order(n, 42, n, 1, a) == -EINVAL);
		CHECK_CONT(rf_pack_order(n, 42, n + 1, 0, a) == -EINVAL);
		CHECK_CONT(rf_pack_order(n, 42, 1, UINT64_MAX, a) == -EINVAL);
		free(a);
		free(b);
		free(c);
		free(seen);
	}
	return rf_test_status("test_pack_order");
}
