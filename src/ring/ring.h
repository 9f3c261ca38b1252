/* SPDX-License-Identifier: MIT */
/*
 * The pinned ring: one mmap'd region of slots (4096-aligned), the only host
 * memory the data path reads into and copies from.  Its size is at most the
 * loader's pinned_bytes budget.  Slots are of two kinds, each of one size:
 * staging slots (a batch each; numbers 0 .. n_stage - 1) and read slots (a
 * chunk read each; the numbers after them), so a batch smaller than a chunk
 * does not take a chunk's bytes.
 *
 * Page-locking for the device (pin modes):
 *  - RF_PIN_RING: the whole region is registered with the device backend
 *    once at open (cudaHostRegister) and unregistered at close;
 *  - RF_PIN_TRANSIENT: a slot is registered by rf_ring_pin() just before its
 *    copy and unregistered by rf_ring_unpin() once its copy-complete event has
 *    fired, for hosts where page-locked memory is scarce.
 *
 * Slots are handed out by a thread-safe free list: rf_ring_acquire() blocks
 * until a slot is free or the ring is shut down; rf_ring_release() returns
 * one.  The ring never decides when a slot is reusable: the loader releases
 * a slot only after the read into it and the copy out of it have completed
 * (invariant 2, "no reuse in flight").
 */
#ifndef RF_RING_H
#define RF_RING_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "device/device.h"

typedef struct rf_ring rf_ring;

enum rf_ring_kind {
	RF_RING_STAGE = 0,
	RF_RING_READ = 1,
	RF_RING_KINDS
};

/* Slots of each kind and their size (rounded up to 4096; a kind of no
 * slots may have any size). */
struct rf_ring_shape {
	size_t slot_bytes[RF_RING_KINDS];
	unsigned nslots[RF_RING_KINDS];
};

enum rf_pin_mode {
	RF_PIN_RING = 0,
	RF_PIN_TRANSIENT = 1,
};

/* Map the region and, in RF_PIN_RING mode, register it with `dev` (which may
 * be NULL: nothing is registered).  Fails with the numbers when the region
 * cannot be mapped or locked. */
int rf_ring_open_shape(rf_ring **out, const struct rf_ring_shape *shape, rf_device *dev,
		       enum rf_pin_mode mode, rf_diag *diag);
/* A ring of staging slots alone, `nslots` of `slot_bytes`. */
int rf_ring_open(rf_ring **out, size_t slot_bytes, unsigned nslots, rf_device *dev,
		 enum rf_pin_mode mode, rf_diag *diag);
void rf_ring_close(rf_ring **ring);

void *rf_ring_base(const rf_ring *ring);
size_t rf_ring_bytes(const rf_ring *ring);
/* The size of slot `slot` (its kind's, aligned); 0 past the last. */
size_t rf_ring_slot_bytes(const rf_ring *ring, unsigned slot);
unsigned rf_ring_nslots(const rf_ring *ring);
void *rf_ring_slot(const rf_ring *ring, unsigned slot);

/* Take a free slot of a kind: blocks while none is free when `block` is
 * set, else returns -EAGAIN.  Returns -ECANCELED once rf_ring_shutdown()
 * was called.  rf_ring_acquire takes a staging slot. */
int rf_ring_acquire_kind(rf_ring *ring, enum rf_ring_kind kind, unsigned *slot, int block);
int rf_ring_acquire(rf_ring *ring, unsigned *slot, int block);
/* Give a slot back to its kind's free list. */
void rf_ring_release(rf_ring *ring, unsigned slot);
/* Wake every blocked acquire with -ECANCELED (used by close). */
void rf_ring_shutdown(rf_ring *ring);
/* Free slots, both kinds. */
unsigned rf_ring_free_slots(rf_ring *ring);

/* Transient mode: page-lock the first `len` bytes of a slot for its copy,
 * and release the lock after the copy completed.  No-ops in ring mode. */
int rf_ring_pin(rf_ring *ring, unsigned slot, size_t len);
int rf_ring_unpin(rf_ring *ring, unsigned slot);

/* Bytes page-locked for the device now, and the most at any time. */
size_t rf_ring_pinned_bytes(const rf_ring *ring);
size_t rf_ring_pinned_peak(const rf_ring *ring);

#endif
