/* SPDX-License-Identifier: MIT */
/*
 * Description: for every configuration of the table (chunk sizes x world x
 * batch x window) and every mode and tail policy: the epoch's global order is
 * a permutation of [0, N); the same seed and epoch give the same order and
 * another seed or epoch another one; the ranks' shares are disjoint, equal in
 * batch count, cover exactly the samples plan.h says they cover, and take the
 * documented slice of each global batch (a kept tail loses no sample: the
 * ranks past the first rem % world take one pad); pads repeat the documented
 * sample; the read sequence names every item's chunk, and the decoded-chunk window
 * the items need never exceeds W (1 for none and chunks).
 */
#include <errno.h>
#include <inttypes.h>

#include "plan_test.h"

static uint64_t
nonempty_chunks(const struct plan_case *c)
{
	uint64_t n = 0;
	for (uint64_t i = 0; i < c->nchunks; i++)
		n += c->counts[i] > 0;
	return n;
}

static uint64_t *
global_order(rf_plan *p)
{
	uint64_t n = rf_plan_samples(p);
	uint64_t *o = malloc((n + 1) * sizeof *o);
	for (uint64_t i = 0; i < n; i++)
		if (rf_plan_global(p, i, &o[i]) < 0)
			o[i] = UINT64_MAX;
	return o;
}

static void
check_case(const struct plan_case *c, enum rf_plan_mode mode, enum rf_plan_tail tail)
{
	char name[160];
	snprintf(name, sizeof name, "%s %s %s", c->name, rf_plan_mode_name(mode),
		 rf_plan_tail_name(tail));
	rf_plan_params pp;
	case_params(c, mode, tail, 0, &pp);
	rf_plan *p0 = make_plan(&pp, c->counts, c->nchunks);
	uint64_t N = rf_plan_samples(p0);
	uint64_t G = (uint64_t)c->world * c->batch;

	/* 1. A permutation. */
	uint64_t *order = global_order(p0);
	uint8_t *seen = calloc(N + 1, 1);
	for (uint64_t i = 0; i < N; i++) {
		CHECK_CONT_MSG(order[i] < N, "%s: P(%llu) = %llu out of range", name, (unsigned long long)i,
		      (unsigned long long)order[i]);
		if (order[i] < N) {
			CHECK_CONT_MSG(!seen[order[i]], "%s: sample %llu twice", name, (unsigned long long)order[i]);
			seen[order[i]] = 1;
		}
	}
	uint64_t dummy;
	CHECK_CONT_MSG(rf_plan_global(p0, N, &dummy) == -ERANGE, "%s: P(N) not -ERANGE", name);
	if (mode == RF_PLAN_NONE)
		for (uint64_t i = 0; i < N; i++)
			CHECK_CONT_MSG(order[i] == i, "%s: file order broken at %llu", name, (unsigned long long)i);
	if (mode == RF_PLAN_CHUNKS) {
		/* Samples of a chunk stay together and in order. */
		uint64_t breaks = 0;
		for (uint64_t i = 1; i < N; i++)
			breaks += order[i] != order[i - 1] + 1;
		CHECK_CONT_MSG(breaks + 1 <= nonempty_chunks(c) || N == 0, "%s: %llu breaks for %llu chunks", name,
		      (unsigned long long)breaks, (unsigned long long)nonempty_chunks(c));
	}

	/* 2. Deterministic; another epoch or seed gives another order. */
	rf_plan *q = make_plan(&pp, c->counts, c->nchunks);
	uint64_t *o2 = global_order(q);
	CHECK_CONT_MSG(memcmp(order, o2, N * sizeof *order) == 0, "%s: same seed and epoch, another order", name);
	free(o2);
	int expect_diff = (mode == RF_PLAN_CHUNKS && nonempty_chunks(c) >= 5) ||
			  ((mode == RF_PLAN_WINDOW || mode == RF_PLAN_FULL) && N >= 6);
	if (expect_diff) {
		CHECK_CONT_MSG(rf_plan_set_epoch(q, pp.epoch + 1) == 0, "%s: set_epoch", name);
		o2 = global_order(q);
		CHECK_CONT_MSG(memcmp(order, o2, N * sizeof *order) != 0, "%s: epoch+1 gives the same order", name);
		free(o2);
		rf_plan_destroy(&q);
		rf_plan_params pq = pp;
		pq.seed++;
		q = make_plan(&pq, c->counts, c->nchunks);
		o2 = global_order(q);
		CHECK_CONT_MSG(memcmp(order, o2, N * sizeof *order) != 0, "%s: seed+1 gives the same order", name);
		free(o2);
	}
	rf_plan_destroy(&q);

	/* 3. Sharding. */
	uint64_t nfull = N / G, base = nfull * G, rem = N - base;
	/* KEEP: the tail of rem samples is shared out q = rem / world a rank,
	 * one more for the first m = rem % world ranks; the others pad to
	 * ceil(rem / world), so nothing is dropped and every rank has the same
	 * batches of the same sizes. */
	uint64_t expect_batches = nfull, covered = base, tail_s = 0;
	uint64_t tail_q = rem / c->world, tail_m = rem % c->world;
	if (tail != RF_PLAN_DROP && rem) {
		expect_batches++;
		covered = N;
		if (tail == RF_PLAN_KEEP)
			tail_s = tail_q + (tail_m > 0);
	}
	CHECK_CONT_MSG(rf_plan_batches(p0) == expect_batches, "%s: %llu batches, expected %llu", name,
	      (unsigned long long)rf_plan_batches(p0), (unsigned long long)expect_batches);
	CHECK_CONT_MSG(rf_plan_dropped(p0) == N - covered, "%s: dropped %llu, expected %llu", name,
	      (unsigned long long)rf_plan_dropped(p0), (unsigned long long)(N - covered));
	int *owner = malloc((N + 1) * sizeof *owner);
	for (uint64_t i = 0; i < N; i++)
		owner[i] = -1;
	uint64_t pads = 0;
	uint32_t bound = 1;
	if (mode == RF_PLAN_WINDOW)
		bound = c->window;
	for (uint32_t r = 0; r < c->world; r++) {
		case_params(c, mode, tail, r, &pp);
		rf_plan *p = make_plan(&pp, c->counts, c->nchunks);
		struct run run = {0}, again = {0};
		run_append(&run, p, UINT64_MAX);
		CHECK_CONT_MSG(run.batches == expect_batches, "%s: rank %u has %llu batches", name, r,
		      (unsigned long long)run.batches);
		/* Random access gives the same batches as the cursor. */
		rf_plan_item *buf = malloc(c->batch * sizeof *buf);
		uint64_t at = 0;
		for (uint64_t k = 0; k < run.batches; k++) {
			uint32_t n;
			CHECK_CONT_MSG(rf_plan_batch(p, k, buf, c->batch, &n) == 0 && n == run.sizes[k],
			      "%s: rf_plan_batch %llu", name, (unsigned long long)k);
			for (uint32_t i = 0; i < n && at + i < run.n; i++)
				CHECK_CONT_MSG(items_equal(&buf[i], &run.items[at + i]), "%s: rf_plan_batch item", name);
			if (n > 1) {
				uint32_t m;
				CHECK_CONT_MSG(rf_plan_batch(p, k, buf, n - 1, &m) == -ENOSPC && m == n,
				      "%s: short capacity accepted", name);
			}
			at += run.sizes[k];
		}
		free(buf);
		rf_plan_seek(p, 0);
		run_append(&again, p, UINT64_MAX);
		CHECK_CONT_MSG(runs_equal(&run, &again), "%s: rank %u not deterministic", name, r);
		run_free(&again);

		uint64_t idx = 0, last_real = UINT64_MAX;
		uint64_t keep = 0, maxread = 0;
		uint8_t *used = calloc(rf_plan_reads(p) + 1, 1);
		for (uint64_t k = 0; k < run.batches; k++) {
			uint32_t bs = run.sizes[k];
			CHECK_CONT_MSG(bs == (k == nfull && tail == RF_PLAN_KEEP ? tail_s : c->batch),
			      "%s: batch %llu has %u samples", name, (unsigned long long)k, bs);
			for (uint32_t i = 0; i < bs; i++, idx++) {
				const rf_plan_item *it = &run.items[idx];
				uint64_t pos;
				if (k < nfull)
					pos = k * G + (uint64_t)r * c->batch + i;
				else if (tail == RF_PLAN_KEEP)
					pos = i < tail_q + (r < tail_m)
						      ? base + r * tail_q + (r < tail_m ? r : tail_m) + i
						      : N; /* a pad */
				else
					pos = base + (uint64_t)r * c->batch + i;
				if (pos < N) {
					CHECK_CONT_MSG(!(it->flags & RF_PLAN_ITEM_PAD), "%s: real item flagged", name);
					CHECK_CONT_MSG(it->pos == pos, "%s: rank %u batch %llu item %u at position %llu, "
					      "expected %llu", name, r, (unsigned long long)k, i,
					      (unsigned long long)it->pos, (unsigned long long)pos);
					CHECK_CONT_MSG(it->sample == order[pos], "%s: item sample is not P(pos)", name);
					CHECK_CONT_MSG(owner[pos] == -1, "%s: position %llu given to ranks %d and %u", name,
					      (unsigned long long)pos, owner[pos], r);
					owner[pos] = (int)r;
					last_real = it->sample;
				} else {
					pads++;
					CHECK_CONT_MSG(tail != RF_PLAN_DROP, "%s: position past N without padding", name);
					CHECK_CONT_MSG(it->flags & RF_PLAN_ITEM_PAD, "%s: pad not flagged", name);
					uint64_t want = last_real != UINT64_MAX ? last_real : order[N - 1];
					CHECK_CONT_MSG(it->sample == want, "%s: pad repeats %llu, expected %llu", name,
					      (unsigned long long)it->sample, (unsigned long long)want);
				}
				uint64_t ch;
				uint32_t off;
				CHECK_CONT_MSG(rf_plan_locate(p, it->sample, &ch, &off) == 0 && ch == it->chunk &&
				      off == it->offset, "%s: item chunk/offset wrong", name);
				if (mode == RF_PLAN_FULL) {
					CHECK_CONT_MSG(it->read == RF_PLAN_NO_READ && it->keep_from == RF_PLAN_NO_READ,
					      "%s: full mode item has a read entry", name);
					continue;
				}
				uint64_t rc_chunk = UINT64_MAX;
				CHECK_CONT_MSG(rf_plan_read_chunk(p, it->read, &rc_chunk) == 0 && rc_chunk == it->chunk,
				      "%s: read entry %llu is not the item's chunk", name,
				      (unsigned long long)it->read);
				if (it->read < rf_plan_reads(p))
					used[it->read] = 1;
				CHECK_CONT_MSG(it->keep_from >= keep, "%s: keep_from went back", name);
				keep = it->keep_from;
				CHECK_CONT_MSG(it->read >= keep, "%s: item needs a dropped chunk", name);
				if (it->read > maxread)
					maxread = it->read;
				CHECK_CONT_MSG(maxread - keep + 1 <= bound, "%s: %llu decoded chunks needed, bound %u",
				      name, (unsigned long long)(maxread - keep + 1), bound);
			}
		}
		if (mode == RF_PLAN_FULL) {
			CHECK_CONT_MSG(rf_plan_reads(p) == 0, "%s: full mode has reads", name);
		} else if (mode != RF_PLAN_WINDOW) {
			/* none and chunks read only what the rank uses. */
			for (uint64_t j = 0; j < rf_plan_reads(p); j++)
				CHECK_CONT_MSG(used[j], "%s: rank %u reads entry %llu for nothing", name, r,
				      (unsigned long long)j);
		}
		free(used);
		run_free(&run);
		rf_plan_destroy(&p);
	}
	for (uint64_t i = 0; i < N; i++) {
		if (i < covered)
			CHECK_CONT_MSG(owner[i] >= 0, "%s: position %llu given to no rank", name, (unsigned long long)i);
		else
			CHECK_CONT_MSG(owner[i] == -1, "%s: dropped position %llu delivered", name, (unsigned long long)i);
	}
	if (tail == RF_PLAN_PAD)
		CHECK_CONT_MSG(pads == expect_batches * G - N || (rem == 0 && pads == 0), "%s: %llu pads", name,
		      (unsigned long long)pads);
	if (tail == RF_PLAN_KEEP)
		CHECK_CONT_MSG(pads == (tail_m ? c->world - tail_m : 0), "%s: %llu pads, expected %llu", name,
		      (unsigned long long)pads, (unsigned long long)(tail_m ? c->world - tail_m : 0));
	free(owner);
	free(seen);
	free(order);
	rf_plan_destroy(&p0);
}

int
main(void)
{
	plan_cases_init();
	for (size_t i = 0; i < NCASES; i++)
		for (size_t m = 0; m < 4; m++)
			for (size_t t = 0; t < 3; t++)
				check_case(&plan_cases[i], all_modes[m], all_tails[t]);

	/* Bad parameters are refused with RF_EUSAGE. */
	rf_plan_params pp;
	rf_plan *p;
	uint32_t counts[] = {4, 4};
	rf_plan_params_init(&pp);
	pp.rank = 2;
	pp.world = 2;
	CHECK_CONT_MSG(rf_plan_create(&p, &pp, counts, 2, NULL) == RF_EUSAGE && !p, "rank >= world accepted");
	rf_plan_params_init(&pp);
	pp.batch = 0;
	CHECK_CONT_MSG(rf_plan_create(&p, &pp, counts, 2, NULL) == RF_EUSAGE, "batch 0 accepted");
	rf_plan_params_init(&pp);
	pp.window = 0;
	CHECK_CONT_MSG(rf_plan_create(&p, &pp, counts, 2, NULL) == RF_EUSAGE, "window 0 accepted");
	rf_plan_params_init(&pp);
	pp.mode = (enum rf_plan_mode)9;
	CHECK_CONT_MSG(rf_plan_create(&p, &pp, counts, 2, NULL) == RF_EUSAGE, "mode 9 accepted");
	rf_plan_destroy(&p);
	rf_plan_destroy(NULL);

	/* Names and the default window. */
	enum rf_plan_mode m;
	enum rf_plan_tail t;
	CHECK_CONT_MSG(rf_plan_mode_parse("window", &m) == 0 && m == RF_PLAN_WINDOW, "parse window");
	CHECK_CONT_MSG(rf_plan_mode_parse("shuffle", &m) == RF_EUSAGE, "parse junk");
	CHECK_CONT_MSG(rf_plan_tail_parse("pad", &t) == 0 && t == RF_PLAN_PAD, "parse pad");
	/* The default window: of the dataset alone (average chunk, largest
	 * chunk's slot; 0: no slot bound). */
	CHECK_CONT_MSG(rf_plan_default_window(1ull << 20, 0) == 128, "default window 128M/1M = %u",
	      rf_plan_default_window(1ull << 20, 0));
	CHECK_CONT_MSG(rf_plan_default_window(4ull << 20, 0) == 32, "default window 128M/4M");
	CHECK_CONT_MSG(rf_plan_default_window(100ull << 20, 0) == RF_PLAN_WINDOW_MIN, "large chunks");
	CHECK_CONT_MSG(rf_plan_default_window(1024, 0) == RF_PLAN_WINDOW_MAX, "small chunks");
	CHECK_CONT_MSG(rf_plan_default_window(3ull << 20, 0) == 42, "odd W kept");
	CHECK_CONT_MSG(rf_plan_default_window(0, 0) == RF_PLAN_WINDOW_MAX, "empty chunks");
	/* Ordinary chunks keep the first rule: 4 MiB chunks of 784 + 8 byte
	 * samples and their checksum table (32), 128 samples of 150 KiB + 8
	 * (6), 1 MiB chunks (128), and chunks up to 19 MiB. */
	CHECK_CONT_MSG(rf_plan_default_window(4ull << 20, (4ull << 20) + (96 << 10)) == 32,
		       "4 MiB chunks: %u", rf_plan_default_window(4ull << 20, (4ull << 20) + (96 << 10)));
	uint64_t big = 128ull * (150 * 1024 + 8);
	CHECK_CONT_MSG(rf_plan_default_window(big, big + 4096) == 6, "150 KiB samples: %u",
		       rf_plan_default_window(big, big + 4096));
	CHECK_CONT_MSG(rf_plan_default_window(1ull << 20, (1ull << 20) + 4096) == 128, "1 MiB chunks");
	for (uint64_t c = 1; c <= 19; c++)
		CHECK_CONT_MSG(rf_plan_default_window(c << 20, (c << 20) + 4096) ==
			       rf_plan_default_window(c << 20, 0), "%" PRIu64 " MiB chunks", c);
	/* Large chunks: W + 2 read slots and the staging ones within the
	 * default budget, never below 2: 20 samples of 1 MiB (5), one of 30
	 * MiB (2, not 4). */
	uint64_t m1 = 20ull * ((1ull << 20) + 8);
	CHECK_CONT_MSG(rf_plan_default_window(m1, m1 + 4096) == 5, "20 MiB chunks: %u",
		       rf_plan_default_window(m1, m1 + 4096));
	uint64_t m30 = (30ull << 20) + 8;
	CHECK_CONT_MSG(rf_plan_default_window(m30, m30 + 4096) == RF_PLAN_WINDOW_MIN,
		       "30 MiB chunks: %u", rf_plan_default_window(m30, m30 + 4096));
	CHECK_CONT_MSG(rf_plan_default_window(1ull << 30, 1ull << 30) == RF_PLAN_WINDOW_MIN,
		       "chunks beyond the budget");
	for (uint64_t c = 1; c <= 40; c++) {
		uint64_t slot = (c << 20) + 4096;
		uint32_t w = rf_plan_default_window(c << 20, slot);
		CHECK_CONT_MSG(w == RF_PLAN_WINDOW_MIN ||
			       (w + 2 + RF_PLAN_WINDOW_STAGE_SLOTS) * slot <= RF_PINNED_DEFAULT,
			       "%" PRIu64 " MiB chunks: W %u outgrows the default budget", c, w);
	}
	return test_result("test_plan_order");
}
