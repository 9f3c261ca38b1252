/* SPDX-License-Identifier: MIT */
/*
 * Description: the pinned ring with the host backend.  Slots are 4096-aligned,
 * disjoint and writable; ring mode registers the whole region once (pinned
 * bytes = region, one registration, none after close); transient mode pins
 * and unpins single slots with exact current/peak accounting, refuses a
 * double pin or an unpin of an unpinned slot, and close drops pins left
 * behind.  The free list under threads: no slot is ever held by two threads,
 * acquire blocks until a release, -EAGAIN without blocking, and shutdown
 * wakes blocked acquirers with -ECANCELED.  Two kinds of slot (staging
 * and read, each its own size): numbered staging first, laid out one kind
 * after the other, each kind taken from and given back to its own free
 * list, a transient pin bounded by its slot's size.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "device/host.h"
#include "io_test.h"
#include "ring/ring.h"

static void
counts(rf_device *dev, struct rf_device_host_counts *c)
{
	CHECK_RC(rf_device_host_counts(dev, c), 0);
}

static void
test_ring_mode(rf_device *dev, rf_diag *diag)
{
	rf_ring *ring = NULL;
	CHECK_RC(rf_ring_open(&ring, 10000, 8, dev, RF_PIN_RING, diag), 0);
	CHECK(rf_ring_slot_bytes(ring, 0) == 12288 && rf_ring_slot_bytes(ring, 7) == 12288);
	CHECK(rf_ring_slot_bytes(ring, 8) == 0);
	CHECK(rf_ring_nslots(ring) == 8);
	CHECK(rf_ring_bytes(ring) == 8 * 12288);
	CHECK((uintptr_t)rf_ring_base(ring) % 4096 == 0);
	for (unsigned i = 0; i < 8; i++) {
		char *s = rf_ring_slot(ring, i);
		CHECK((uintptr_t)s % 4096 == 0);
		CHECK(s == (char *)rf_ring_base(ring) + (size_t)i * 12288);
		memset(s, (int)i, 12288);
	}
	for (unsigned i = 0; i < 8; i++)
		CHECK(((char *)rf_ring_slot(ring, i))[12287] == (char)i);
	CHECK(rf_ring_slot(ring, 8) == NULL);
	CHECK(rf_ring_pinned_bytes(ring) == 8 * 12288);
	CHECK(rf_ring_pinned_peak(ring) == 8 * 12288);
	struct rf_device_host_counts c;
	counts(dev, &c);
	CHECK(c.registrations == 1 && c.registered_bytes == 8 * 12288);
	/* Pin and unpin are no-ops in ring mode. */
	CHECK_RC(rf_ring_pin(ring, 0, 100), 0);
	CHECK_RC(rf_ring_unpin(ring, 0), 0);
	counts(dev, &c);
	CHECK(c.registrations == 1);
	rf_ring_close(&ring);
	CHECK(ring == NULL);
	counts(dev, &c);
	CHECK(c.registrations == 0 && c.registered_bytes == 0);

	/* Without a device nothing is registered. */
	CHECK_RC(rf_ring_open(&ring, 4096, 2, NULL, RF_PIN_RING, diag), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 0);
	rf_ring_close(&ring);
	rf_ring_close(&ring); /* NULL is a no-op */

	CHECK_RC(rf_ring_open(&ring, 0, 2, dev, RF_PIN_RING, diag), RF_EUSAGE);
	CHECK_RC(rf_ring_open(&ring, 4096, 0, dev, RF_PIN_RING, diag), RF_EUSAGE);
	CHECK_RC(rf_ring_open(&ring, SIZE_MAX / 2, 4, dev, RF_PIN_RING, diag), RF_EUSAGE);
	CHECK(ring == NULL);
}

static void
test_kinds(rf_device *dev, rf_diag *diag)
{
	rf_ring *ring = NULL;
	struct rf_ring_shape shape = {.slot_bytes = {5000, 20000}, .nslots = {3, 2}};
	CHECK_RC(rf_ring_open_shape(&ring, &shape, dev, RF_PIN_TRANSIENT, diag), 0);
	CHECK(rf_ring_nslots(ring) == 5);
	CHECK(rf_ring_bytes(ring) == 3 * 8192 + 2 * 20480);
	char *base = rf_ring_base(ring);
	for (unsigned i = 0; i < 5; i++) {
		size_t want = i < 3 ? 8192 : 20480;
		char *at = i < 3 ? base + i * 8192 : base + 3 * 8192 + (i - 3) * 20480;
		CHECK(rf_ring_slot_bytes(ring, i) == want);
		CHECK(rf_ring_slot(ring, i) == at);
		memset(at, (int)i, want);
	}
	for (unsigned i = 0; i < 5; i++)
		CHECK(((char *)rf_ring_slot(ring, i))[rf_ring_slot_bytes(ring, i) - 1] == (char)i);
	/* Each kind from its own list. */
	unsigned r[3], st[4];
	CHECK_RC(rf_ring_acquire_kind(ring, RF_RING_READ, &r[0], 0), 0);
	CHECK_RC(rf_ring_acquire_kind(ring, RF_RING_READ, &r[1], 0), 0);
	CHECK(r[0] >= 3 && r[1] >= 3 && r[0] != r[1]);
	CHECK_RC(rf_ring_acquire_kind(ring, RF_RING_READ, &r[2], 0), -EAGAIN);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_RC(rf_ring_acquire(ring, &st[i], 0), 0);
		CHECK(st[i] < 3);
	}
	CHECK_RC(rf_ring_acquire(ring, &st[3], 0), -EAGAIN);
	CHECK(rf_ring_free_slots(ring) == 0);
	/* A read slot given back is a read slot again, never a staging one. */
	rf_ring_release(ring, r[1]);
	CHECK_RC(rf_ring_acquire(ring, &st[3], 0), -EAGAIN);
	CHECK_RC(rf_ring_acquire_kind(ring, RF_RING_READ, &r[2], 0), 0);
	CHECK(r[2] == r[1]);
	rf_ring_release(ring, st[0]);
	CHECK_RC(rf_ring_acquire_kind(ring, RF_RING_READ, &r[1], 0), -EAGAIN);
	CHECK_RC(rf_ring_acquire(ring, &st[3], 0), 0);
	CHECK(st[3] == st[0]);
	/* Pins: up to the slot's own size. */
	CHECK_RC(rf_ring_pin(ring, r[0], 20480), 0);
	CHECK_RC(rf_ring_pin(ring, st[1], 8193), RF_EUSAGE);
	CHECK_RC(rf_ring_pin(ring, st[1], 8192), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 20480 + 8192);
	CHECK_RC(rf_ring_unpin(ring, r[0]), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 8192);
	rf_ring_close(&ring); /* drops the pin left */
	struct rf_device_host_counts c;
	counts(dev, &c);
	CHECK(c.registrations == 0);

	/* A kind of no slots takes no bytes; a ring of none is refused. */
	shape = (struct rf_ring_shape){.slot_bytes = {4096, 0}, .nslots = {2, 0}};
	CHECK_RC(rf_ring_open_shape(&ring, &shape, NULL, RF_PIN_RING, diag), 0);
	CHECK(rf_ring_bytes(ring) == 8192);
	rf_ring_close(&ring);
	shape = (struct rf_ring_shape){.slot_bytes = {4096, 4096}, .nslots = {0, 0}};
	CHECK_RC(rf_ring_open_shape(&ring, &shape, NULL, RF_PIN_RING, diag), RF_EUSAGE);
	shape = (struct rf_ring_shape){.slot_bytes = {4096, 0}, .nslots = {1, 1}};
	CHECK_RC(rf_ring_open_shape(&ring, &shape, NULL, RF_PIN_RING, diag), RF_EUSAGE);
	CHECK(ring == NULL);
}

static void
test_transient_mode(rf_device *dev, rf_diag *diag)
{
	rf_ring *ring = NULL;
	struct rf_device_host_counts c;
	CHECK_RC(rf_ring_open(&ring, 16384, 4, dev, RF_PIN_TRANSIENT, diag), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 0);
	counts(dev, &c);
	CHECK(c.registrations == 0);

	CHECK_RC(rf_ring_pin(ring, 0, 5000), 0); /* rounded to pages: 8192 */
	CHECK(rf_ring_pinned_bytes(ring) == 8192);
	CHECK_RC(rf_ring_pin(ring, 1, 16384), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 8192 + 16384);
	CHECK(rf_ring_pinned_peak(ring) == 8192 + 16384);
	counts(dev, &c);
	CHECK(c.registrations == 2 && c.registered_bytes == 8192 + 16384);
	CHECK_RC(rf_ring_pin(ring, 0, 4096), -EBUSY);
	CHECK_RC(rf_ring_pin(ring, 2, 16385), RF_EUSAGE);
	CHECK_RC(rf_ring_pin(ring, 4, 4096), RF_EUSAGE);

	CHECK_RC(rf_ring_unpin(ring, 0), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 16384);
	CHECK_RC(rf_ring_unpin(ring, 0), -EINVAL);
	CHECK_RC(rf_ring_pin(ring, 2, 4096), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 16384 + 4096);
	CHECK(rf_ring_pinned_peak(ring) == 8192 + 16384);
	CHECK_RC(rf_ring_unpin(ring, 2), 0);
	CHECK(rf_ring_pinned_bytes(ring) == 16384);
	counts(dev, &c);
	CHECK(c.registrations == 1);
	/* Slot 1 is still pinned: close drops it. */
	rf_ring_close(&ring);
	counts(dev, &c);
	CHECK(c.registrations == 0);
}

struct shared {
	rf_ring *ring;
	_Atomic int owner[8];
	_Atomic int bad;
	int iterations;
};

struct worker_arg {
	struct shared *sh;
	int id;
	int result;
};

static void *
churn(void *p)
{
	struct worker_arg *a = p;
	struct shared *sh = a->sh;
	for (int i = 0; i < sh->iterations; i++) {
		unsigned slot;
		int ret = rf_ring_acquire(sh->ring, &slot, 1);
		if (ret != 0 || slot >= 8) {
			atomic_store(&sh->bad, 1);
			break;
		}
		int expect = -1;
		if (!atomic_compare_exchange_strong(&sh->owner[slot], &expect, a->id))
			atomic_store(&sh->bad, 1);
		char *mem = rf_ring_slot(sh->ring, slot);
		mem[0] = (char)a->id;
		if (mem[0] != (char)a->id)
			atomic_store(&sh->bad, 1);
		expect = a->id;
		if (!atomic_compare_exchange_strong(&sh->owner[slot], &expect, -1))
			atomic_store(&sh->bad, 1);
		rf_ring_release(sh->ring, slot);
	}
	return NULL;
}

static void *
blocked_acquire(void *p)
{
	struct worker_arg *a = p;
	unsigned slot = 99;
	a->result = rf_ring_acquire(a->sh->ring, &slot, 1);
	if (a->result == 0)
		a->result = (int)slot + 1000;
	return NULL;
}

static void
test_threads(rf_diag *diag)
{
	struct shared sh = {.iterations = 20000};
	CHECK_RC(rf_ring_open(&sh.ring, 4096, 8, NULL, RF_PIN_RING, diag), 0);
	for (int i = 0; i < 8; i++)
		atomic_init(&sh.owner[i], -1);
	atomic_init(&sh.bad, 0);
	pthread_t t[6];
	struct worker_arg args[6];
	for (int i = 0; i < 6; i++) {
		args[i] = (struct worker_arg){.sh = &sh, .id = i};
		CHECK(pthread_create(&t[i], NULL, churn, &args[i]) == 0);
	}
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&sh.bad) == 0);
	CHECK(rf_ring_free_slots(sh.ring) == 8);

	/* Take every slot; a second release of one is ignored. */
	unsigned slots[8];
	for (int i = 0; i < 8; i++)
		CHECK_RC(rf_ring_acquire(sh.ring, &slots[i], 0), 0);
	unsigned x;
	CHECK_RC(rf_ring_acquire(sh.ring, &x, 0), -EAGAIN);

	/* A blocked acquire gets the slot released later. */
	struct worker_arg b = {.sh = &sh};
	pthread_t bt;
	CHECK(pthread_create(&bt, NULL, blocked_acquire, &b) == 0);
	rf_ring_release(sh.ring, slots[5]);
	pthread_join(bt, NULL);
	CHECK(b.result == 1000 + (int)slots[5]);
	rf_ring_release(sh.ring, slots[6]);
	rf_ring_release(sh.ring, slots[6]);
	CHECK(rf_ring_free_slots(sh.ring) == 1);
	CHECK_RC(rf_ring_acquire(sh.ring, &x, 0), 0);
	CHECK(x == slots[6]);

	/* Shutdown wakes blocked acquirers. */
	struct worker_arg w[3];
	pthread_t wt[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (struct worker_arg){.sh = &sh, .result = 1};
		CHECK(pthread_create(&wt[i], NULL, blocked_acquire, &w[i]) == 0);
	}
	rf_ring_shutdown(sh.ring);
	for (int i = 0; i < 3; i++) {
		pthread_join(wt[i], NULL);
		CHECK(w[i].result == -ECANCELED);
	}
	rf_ring_release(sh.ring, slots[0]);
	CHECK_RC(rf_ring_acquire(sh.ring, &x, 0), -ECANCELED);
	rf_ring_close(&sh.ring);
}

int
main(void)
{
	struct t_log log = {0};
	rf_diag diag;
	rf_diag_init(&diag, t_log_fn, &log);
	rf_device *dev = NULL;
	CHECK_RC(rf_device_open_host(&dev, &diag), 0);
	test_ring_mode(dev, &diag);
	test_transient_mode(dev, &diag);
	test_kinds(dev, &diag);
	test_threads(&diag);
	struct rf_device_host_counts c;
	counts(dev, &c);
	CHECK(c.registrations == 0 && c.allocs == 0);
	rf_device_close(&dev);
	CHECK(dev == NULL);
	return 0;
}
