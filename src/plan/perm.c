/* SPDX-License-Identifier: MIT */
/*
 * A keyed bijection on [0, n) in O(1) memory: a Feistel network on the
 * smallest power of two 2^bits >= n, with cycle walking for the values >= n.
 *
 * Why these choices:
 *  - The halves alternate between floor(bits/2) and ceil(bits/2) bits (each
 *    round xors a function of the low half into the high half, then rotates
 *    the two halves), so any bit count works and the domain is < 2n: cycle
 *    walking then needs fewer than 2 steps on average.  A balanced network
 *    would need an even bit count, a domain up to 4n and twice the steps.
 *  - bits >= 8: with halves of 2 bits a round function has 4 inputs and
 *    outputs, and the network reaches a visibly biased set of permutations
 *    whatever the number of rounds (chi-square over the 120 orders of 5
 *    samples: 500-700 for 119 degrees of freedom at 8..32 rounds in a 16-value
 *    domain, about 110 in a 256-value one).  Cycle walking in the larger
 *    domain costs more steps only for datasets of fewer than 256 samples.
 *  - The round function is the splitmix64 finalizer of (half ^ round key),
 *    whose top bits are taken: two multiplies a round, strong avalanche
 *    (rf_perm_f in plan.h).
 *  - 8 rounds: Luby-Rackoff security needs 4 with ideal round functions; the
 *    extra rounds cover the tiny halves of small domains, where a round
 *    function has few inputs (tests/plan checks uniformity by chi-square at
 *    n = 64).
 * A Feistel network permutes its domain by an even permutation only; when n is
 * the whole domain that would leave half the orders out, so a key bit decides
 * whether the outputs 0 and 1 trade places afterwards (an odd permutation half
 * of the time, uniform parity).
 * Cycle walking is a bijection: the iteration follows the cycle of the
 * permutation on [0, 2^bits) through i until it returns into [0, n), which it
 * must since i itself is in [0, n).
 */
#include "plan/plan.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

void
rf_perm_init(rf_perm *p, uint64_t n, uint64_t key)
{
	unsigned bits = 8;
	while (bits < 64 && (UINT64_C(1) << bits) < n)
		bits++;
	p->n = n;
	/* Round parity 0 keeps the low `lo` bits and changes the high `hi`
	 * bits; after the rotation the changed half is at the bottom, so
	 * parity 1 keeps `hi` bits and changes `lo`. */
	unsigned hi = bits / 2, lo = bits - hi;
	p->shift[0] = lo;
	p->rot[0] = hi;
	p->shift[1] = hi;
	p->rot[1] = lo;
	for (int t = 0; t < 2; t++) {
		p->umask[t] = (UINT64_C(1) << p->shift[t]) - 1;
		p->fshift[t] = 64 - p->rot[t];
	}
	uint64_t k = rf_plan_mix64(key ^ GOLDEN);
	for (int r = 0; r < RF_PERM_ROUNDS; r++)
		p->key[r] = rf_plan_mix64(k + (uint64_t)(r + 1) * GOLDEN);
	p->swap01 = rf_plan_mix64(k ^ 0x5851F42D4C957F2Dull) >> 63;
}

#define LANES 8

/*
 * Eight values in flight at once: each step applies one pass of the rounds to
 * every lane; a lane whose value landed in [0, n) writes it out and takes the
 * next input, one that must walk on keeps its value.  So cycle walking (a
 * quarter of the values need a second pass when n is just above a power of
 * two) does not stall the other lanes, and the lanes' multiplies overlap.
 * The bookkeeping is branch-free (selects), since whether a lane is done is a
 * coin toss the branch predictor cannot learn.
 */
void
rf_perm_fill(const rf_perm *p, uint64_t first, uint32_t count, uint64_t *out)
{
	if (p->n <= 1 || count < 2 * LANES) {
		for (uint32_t i = 0; i < count; i++)
			out[i] = rf_perm_at(p, first + i);
		return;
	}
	const uint64_t n = p->n, swap = p->swap01;
	uint64_t x[LANES], idx[LANES], scratch = 0, next = LANES;
	for (int j = 0; j < LANES; j++) {
		x[j] = first + (uint64_t)j;
		idx[j] = (uint64_t)j;
	}
	while (next < count) {
		/* Unrolled, so the lanes live in registers. */
#pragma GCC unroll 8
		for (int r = 0; r < RF_PERM_ROUNDS; r++) {
			int t = r & 1;
			uint64_t um = p->umask[t], key = p->key[r];
			unsigned sh = p->shift[t], fs = p->fshift[t], rot = p->rot[t];
#pragma GCC unroll 8
			for (int j = 0; j < LANES; j++) {
				uint64_t lo = x[j] & um, hi = x[j] >> sh;
				hi ^= rf_perm_f(lo ^ key) >> fs;
				x[j] = (lo << rot) | hi;
			}
		}
		/* idx[j] < count here: a lane only takes an index >= count in
		 * the step that ends the loop. */
#pragma GCC unroll 8
		for (int j = 0; j < LANES; j++) {
			uint64_t v = x[j];
			int done = v < n;
			uint64_t *dst = done ? out + idx[j] : &scratch;
			*dst = v < 2 ? v ^ swap : v;
			x[j] = done ? first + next : v;
			idx[j] = done ? next : idx[j];
			next += (uint64_t)done;
		}
	}
	/* The lanes still in flight: fresh inputs or values walking on; both
	 * need at least one more pass. */
	for (int j = 0; j < LANES; j++) {
		if (idx[j] >= count)
			continue;
		uint64_t v = x[j];
		do
			v = rf_perm_rounds(p, v);
		while (v >= n);
		out[idx[j]] = v < 2 ? v ^ swap : v;
	}
	(void)scratch;
}

/*
 * rf_perm_fill's lanes over arbitrary inputs, each under its own
 * permutation: out[i] = rf_perm_at(ps[i], in[i]).  The same values as one
 * rf_perm_at each; only the rounds of independent values overlap.  Each
 * lane reads its permutation's keys and shifts (L1 loads, off the chain of
 * multiplies).
 */
void
rf_perm_map_each(const rf_perm *const *ps, const uint64_t *in, uint32_t count, uint64_t *out)
{
	uint32_t i = 0;
	if (count >= LANES) {
		const rf_perm *P[LANES];
		uint64_t x[LANES], idx[LANES], scratch = 0, next = LANES;
		for (int j = 0; j < LANES; j++) {
			x[j] = in[j];
			idx[j] = (uint64_t)j;
			P[j] = ps[j];
		}
		while (next < count) {
#pragma GCC unroll 8
			for (int r = 0; r < RF_PERM_ROUNDS; r++) {
				int t = r & 1;
#pragma GCC unroll 8
				for (int j = 0; j < LANES; j++) {
					const rf_perm *p = P[j];
					uint64_t lo = x[j] & p->umask[t], hi = x[j] >> p->shift[t];
					hi ^= rf_perm_f(lo ^ p->key[r]) >> p->fshift[t];
					x[j] = (lo << p->rot[t]) | hi;
				}
			}
#pragma GCC unroll 8
			for (int j = 0; j < LANES; j++) {
				uint64_t v = x[j];
				int done = v < P[j]->n;
				uint64_t *dst = done ? out + idx[j] : &scratch;
				*dst = v < 2 ? v ^ P[j]->swap01 : v;
				/* A done lane takes the next input while there is one. */
				uint64_t k = done && next < count ? next : idx[j];
				x[j] = done ? (next < count ? in[next] : 0) : v;
				P[j] = ps[k < count ? k : idx[j]];
				idx[j] = done ? next : idx[j];
				next += (uint64_t)done;
			}
		}
		for (int j = 0; j < LANES; j++) {
			if (idx[j] >= count)
				continue;
			const rf_perm *p = P[j];
			uint64_t v = x[j];
			do
				v = rf_perm_rounds(p, v);
			while (v >= p->n);
			out[idx[j]] = v < 2 ? v ^ p->swap01 : v;
		}
		(void)scratch;
		i = count; /* every input had a lane */
	}
	for (; i < count; i++)
		out[i] = rf_perm_at(ps[i], in[i]);
}
