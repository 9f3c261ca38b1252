/* SPDX-License-Identifier: MIT */
/*
 * Description: resuming from a saved state reproduces the uninterrupted run
 * exactly, for every configuration of the table, mode and tail policy: a run
 * that is saved and restored into a fresh plan (built with another seed,
 * epoch, mode, window and tail, which the blob must override) after every k
 * batches, k = 1, 2, 3, 7, delivers the same items and batch sizes as one that
 * never stopped.  Elastic resume: a state saved by a job of 4 ranks, loaded
 * by 2 ranks (and 1) with the same global batch, gives the new ranks disjoint
 * shares, equal in batch count, that cover exactly the positions the old job
 * had not consumed (minus the tail policy's documented drop).
 */
#include <errno.h>

#include "plan_test.h"

/* A plan built with everything the blob should override set differently. */
static rf_plan *
decoy_plan(const struct plan_case *c, uint32_t rank, uint32_t world, uint32_t batch)
{
	rf_plan_params pp;
	case_params(c, RF_PLAN_NONE, RF_PLAN_DROP, 0, &pp);
	pp.seed ^= 0xABCDEF;
	pp.epoch += 11;
	pp.window = c->window + 3;
	pp.mode = RF_PLAN_CHUNKS;
	pp.tail = RF_PLAN_DROP;
	pp.rank = rank;
	pp.world = world;
	pp.batch = batch;
	return make_plan(&pp, c->counts, c->nchunks);
}

static void
load_or_die(rf_plan *p, const uint8_t *blob, size_t len, const char *name)
{
	int rc = rf_plan_state_load(p, blob, len);
	if (rc < 0) {
		fprintf(stderr, "%s: state load: %s: %s\n", name, rf_strerror(rc), rf_plan_errmsg(p));
		exit(1);
	}
}

static void
check_resume(const struct plan_case *c, enum rf_plan_mode mode, enum rf_plan_tail tail)
{
	static const uint64_t ks[] = {1, 2, 3, 7};
	char name[160];
	snprintf(name, sizeof name, "%s %s %s", c->name, rf_plan_mode_name(mode),
		 rf_plan_tail_name(tail));
	for (uint32_t r = 0; r < c->world; r++) {
		rf_plan_params pp;
		case_params(c, mode, tail, r, &pp);
		rf_plan *p = make_plan(&pp, c->counts, c->nchunks);
		struct run full = {0};
		run_append(&full, p, UINT64_MAX);
		rf_plan_destroy(&p);
		for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
			struct run chained = {0};
			p = make_plan(&pp, c->counts, c->nchunks);
			for (int hops = 0;; hops++) {
				uint64_t before = chained.batches;
				run_append(&chained, p, ks[ki]);
				uint8_t blob[RF_PLAN_STATE_SIZE + 8];
				size_t len = 0;
				CHECK_CONT_MSG(rf_plan_state_save(p, blob, sizeof blob, &len) == 0 &&
				      len == RF_PLAN_STATE_SIZE, "%s: save", name);
				rf_plan_destroy(&p);
				p = decoy_plan(c, r, c->world, c->batch);
				load_or_die(p, blob, len, name);
				CHECK_CONT_MSG(rf_plan_tell(p) == chained.batches || chained.batches == before,
				      "%s: cursor %llu after %llu batches", name,
				      (unsigned long long)rf_plan_tell(p), (unsigned long long)chained.batches);
				if (chained.batches == before || hops > 1000)
					break;
			}
			rf_plan_destroy(&p);
			CHECK_CONT_MSG(runs_equal(&full, &chained), "%s: rank %u resumed every %llu batches differs "
			      "(%llu items vs %llu)", name, r, (unsigned long long)ks[ki],
			      (unsigned long long)chained.n, (unsigned long long)full.n);
			run_free(&chained);
		}
		run_free(&full);
	}
}

/* Old job: c->world ranks; new job: `nw` ranks with the same global batch. */
static void
check_elastic(const struct plan_case *c, enum rf_plan_mode mode, enum rf_plan_tail tail,
	      uint32_t nw)
{
	uint64_t G = (uint64_t)c->world * c->batch;
	if (G % nw)
		return;
	uint32_t nb = (uint32_t)(G / nw);
	char name[160];
	snprintf(name, sizeof name, "%s %s %s elastic %u->%u", c->name, rf_plan_mode_name(mode),
		 rf_plan_tail_name(tail), c->world, nw);
	rf_plan_params pp;
	case_params(c, mode, tail, 0, &pp);
	rf_plan *ref = make_plan(&pp, c->counts, c->nchunks);
	uint64_t N = rf_plan_samples(ref), total = rf_plan_batches(ref);
	static const uint64_t ks[] = {0, 1, 2, 3, 7};
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		uint64_t k = ks[ki];
		if (k > total)
			continue;
		/* The old job: every rank runs k batches; the positions they
		 * consumed are marked. */
		uint8_t *state = calloc(N + 1, 1); /* 1: consumed by old, 2: by new */
		uint8_t blob[RF_PLAN_STATE_SIZE];
		size_t len = 0;
		for (uint32_t r = 0; r < c->world; r++) {
			case_params(c, mode, tail, r, &pp);
			rf_plan *p = make_plan(&pp, c->counts, c->nchunks);
			struct run run = {0};
			run_append(&run, p, k);
			for (uint64_t i = 0; i < run.n; i++)
				if (!(run.items[i].flags & RF_PLAN_ITEM_PAD))
					state[run.items[i].pos] = 1;
			uint8_t b2[RF_PLAN_STATE_SIZE];
			size_t l2;
			rf_plan_state_save(p, r == 0 ? blob : b2, RF_PLAN_STATE_SIZE, r == 0 ? &len : &l2);
			/* Every rank's blob is the same. */
			if (r > 0)
				CHECK_CONT_MSG(memcmp(blob, b2, RF_PLAN_STATE_SIZE) == 0, "%s: rank %u's blob differs", name, r);
			run_free(&run);
			rf_plan_destroy(&p);
		}
		/* The new job. */
		uint64_t nbatches = UINT64_MAX, dropped = 0, new_total = 0;
		for (uint32_t r = 0; r < nw; r++) {
			rf_plan *p = decoy_plan(c, r, nw, nb);
			load_or_die(p, blob, len, name);
			CHECK_CONT_MSG(rf_plan_params_get(p)->mode == mode && rf_plan_params_get(p)->tail == tail,
			      "%s: blob did not restore mode and tail", name);
			struct run run = {0};
			run_append(&run, p, UINT64_MAX);
			if (nbatches == UINT64_MAX)
				nbatches = run.batches;
			CHECK_CONT_MSG(run.batches == nbatches, "%s: new rank %u has %llu batches, rank 0 %llu", name,
			      r, (unsigned long long)run.batches, (unsigned long long)nbatches);
			for (uint64_t i = 0; i < run.n; i++) {
				const rf_plan_item *it = &run.items[i];
				if (it->flags & RF_PLAN_ITEM_PAD)
					continue;
				uint64_t s;
				rf_plan_global(ref, it->pos, &s);
				CHECK_CONT_MSG(s == it->sample, "%s: sample at %llu is not the saved order's", name,
				      (unsigned long long)it->pos);
				CHECK_CONT_MSG(state[it->pos] == 0, "%s: position %llu delivered twice (%s)", name,
				      (unsigned long long)it->pos, state[it->pos] == 1 ? "old and new" : "new");
				state[it->pos] = 2;
			}
			dropped = rf_plan_dropped(p);
			new_total = rf_plan_batches(p);
			run_free(&run);
			rf_plan_destroy(&p);
		}
		/* Every position is consumed by exactly one job except the ones
		 * the new job's tail policy drops, which are the last ones, and
		 * only when the old job had not reached the tail. */
		uint64_t missing = 0, first_missing = N;
		for (uint64_t i = 0; i < N; i++) {
			if (!state[i]) {
				missing++;
				if (first_missing == N)
					first_missing = i;
			}
		}
		/* Up to the last full global batch both jobs agree; a tail batch
		 * the old job took ends the epoch for the new one. */
		if (k > N / G)
			dropped = rf_plan_dropped(ref);
		else
			CHECK_CONT_MSG(new_total - nbatches == k, "%s: new job starts at global batch %llu, "
			      "not %llu", name, (unsigned long long)(new_total - nbatches),
			      (unsigned long long)k);
		CHECK_CONT_MSG(missing == dropped, "%s k=%llu: %llu positions never delivered, %llu dropped",
		      name, (unsigned long long)k, (unsigned long long)missing,
		      (unsigned long long)dropped);
		CHECK_CONT_MSG(missing == 0 || first_missing == N - missing,
		      "%s: a position before the tail was skipped", name);
		free(state);
	}
	rf_plan_destroy(&ref);
}

int
main(void)
{
	plan_cases_init();
	for (size_t i = 0; i < NCASES; i++) {
		for (size_t m = 0; m < 4; m++) {
			for (size_t t = 0; t < 3; t++) {
				check_resume(&plan_cases[i], all_modes[m], all_tails[t]);
				if (plan_cases[i].world == 4) {
					check_elastic(&plan_cases[i], all_modes[m], all_tails[t], 2);
					check_elastic(&plan_cases[i], all_modes[m], all_tails[t], 1);
					check_elastic(&plan_cases[i], all_modes[m], all_tails[t], 8);
				}
			}
		}
	}
	return test_result("test_plan_resume");
}
