/* SPDX-License-Identifier: MIT */
/*
 * rf_pack_order: the order `ringfeed pack --shuffle` writes samples in.  It
 * is the full shuffle's bijection (perm.c) under a key of its own, so that a
 * dataset packed with seed s and then read with shuffle full and seed s is
 * not put back into a related order.
 */
#include <errno.h>

#include <ringfeed/dataset.h>

#include "plan/plan.h"

#define PACK_KEY 0x7061636B6F726465ull /* "packorde" */

int
rf_pack_order(uint64_t n, uint64_t seed, uint64_t first, uint64_t count, uint64_t *out)
{
	if (first > n || count > n - first)
		return -EINVAL;
	rf_perm p;
	rf_perm_init(&p, n, rf_plan_mix64(seed ^ PACK_KEY));
	while (count) {
		uint32_t k = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
		rf_perm_fill(&p, first, k, out);
		first += k;
		out += k;
		count -= k;
	}
	return 0;
}
