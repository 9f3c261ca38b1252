/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the emulator's own tests (the checks are rf_test.h's): a gate (a host function that holds a stream until the test
 * opens it, so a test decides exactly when queued work may run), and the
 * emulator's exported functions (the tests link the library).
 */
#ifndef RFEMU_EMU_TEST_H
#define RFEMU_EMU_TEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "emulator.h"
#include "rf_test.h"

#define EXPECT(call, want) do { \
		cudaError_t got_ = (call); \
		if (got_ != (want)) { \
			fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, \
				#call, cudaGetErrorName(got_), cudaGetErrorName(want)); \
			exit(1); \
		} \
	} while (0)

#define OK(call) EXPECT(call, cudaSuccess)

#define SET(name, value) CHECK(rfemu_set_option(name, value) == 0)

static inline struct rfemu_counters
counters(void)
{
	struct rfemu_counters c;

	CHECK(rfemu_get_counters(&c, sizeof(c)) == 0);
	return c;
}

/* Fails the test if any hazard other than `allowed` (or any at all, with
 * RFEMU_HAZARD_COUNT) has been counted. */
static inline void
check_only_hazard(const struct rfemu_counters *c, int allowed, const char *where)
{
	for (int k = 0; k < RFEMU_HAZARD_COUNT; k++) {
		if (k != allowed && c->hazards[k]) {
			fprintf(stderr, "%s: unexpected hazard %s (%llu)\n", where,
				rfemu_hazard_name(k), (unsigned long long)c->hazards[k]);
			exit(1);
		}
	}
}

static inline void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A gate: cudaLaunchHostFunc(stream, gate_wait, &gate) holds the stream
 * until gate_open(&gate).  A gate never opened fails the test after 20 s
 * rather than hang it. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	bool reached;
};

#define GATE_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false }

static inline void
gate_wait(void *arg)
{
	struct gate *gt = arg;
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	pthread_mutex_lock(&gt->lock);
	gt->reached = true;
	pthread_cond_broadcast(&gt->cond);
	while (!gt->open) {
		if (pthread_cond_timedwait(&gt->cond, &gt->lock, &dl)) {
			fprintf(stderr, "gate never opened\n");
			exit(1);
		}
	}
	pthread_mutex_unlock(&gt->lock);
}

static inline void
gate_open(struct gate *gt)
{
	pthread_mutex_lock(&gt->lock);
	gt->open = true;
	pthread_cond_broadcast(&gt->cond);
	pthread_mutex_unlock(&gt->lock);
}

/* Whether the stream has reached the gate (is blocked in it). */
static inline bool
gate_reached(struct gate *gt)
{
	bool r;

	pthread_mutex_lock(&gt->lock);
	r = gt->reached;
	pthread_mutex_unlock(&gt->lock);
	return r;
}

/* A flag a host function raises and the test waits for (20 s bound). */
struct flag {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int value;
};

#define FLAG_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }

static inline void
flag_set(struct flag *f, int v)
{
	pthread_mutex_lock(&f->lock);
	f->value = v;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static inline int
flag_get(struct flag *f)
{
	int v;

	pthread_mutex_lock(&f->lock);
	v = f->value;
	pthread_mutex_unlock(&f->lock);
	return v;
}

static inline bool
flag_wait(struct flag *f, int v)
{
	struct timespec dl;
	bool ok = true;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	pthread_mutex_lock(&f->lock);
	while (f->value != v && ok)
		ok = pthread_cond_timedwait(&f->cond, &f->lock, &dl) == 0;
	ok = f->value == v;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

#endif /* RFEMU_EMU_TEST_H */
