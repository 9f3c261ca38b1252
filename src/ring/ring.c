/* SPDX-License-Identifier: MIT */
/*
 * The pinned ring.  The region is anonymous private memory, populated at
 * open so the first reads do not fault; the ring itself never mlocks it:
 * the device backend's host_register page-locks it (cudaHostRegister) and
 * io_uring's buffer registration pins it, and each of those is accounted
 * where it happens.
 *
 * Locking: one mutex guards the free list, the shutdown flag, the per-slot
 * pin lengths and the pinned-bytes counters.  Device registration calls are
 * made outside it (they can take milliseconds per MiB), with the slot marked
 * busy first so a second pin of the same slot is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ring/ring.h"

#define RF_RING_ALIGN 4096

/* Per-slot pin state in transient mode. */
#define PIN_NONE 0
#define PIN_BUSY ((size_t)-1)

struct rf_ring {
	char *base;
	size_t bytes;
	/* Per kind: slot size, first slot number, count, where its slots
	 * start in the region. */
	size_t slot_bytes[RF_RING_KINDS];
	unsigned first[RF_RING_KINDS], n[RF_RING_KINDS];
	size_t off[RF_RING_KINDS];
	unsigned nslots;
	rf_device *dev;
	enum rf_pin_mode mode;
	rf_diag *diag;
	int ring_registered;

	pthread_mutex_t lock;
	pthread_cond_t cv;
	/* Free slots, a stack per kind (in `stack` at first[kind]): the slot
	 * released last is handed out first, so the few slots a steady
	 * pipeline cycles through stay in the CPU's caches instead of the
	 * whole ring streaming through memory (on a machine whose DRAM writes
	 * are slow, a copy into a cold 4 MiB slot ran at a quarter of the speed
	 * of one into a warm slot). */
	unsigned *stack;
	unsigned count[RF_RING_KINDS];
	unsigned char *is_free;
	int shutdown;
	size_t *pinned_len; /* transient mode: bytes locked per slot */
	size_t pinned, peak;
};

/* The kind of a valid slot number. */
static unsigned
kind_of(const rf_ring *r, unsigned slot)
{
	return slot >= r->first[RF_RING_READ] ? RF_RING_READ : RF_RING_STAGE;
}

static char *
slot_at(const rf_ring *r, unsigned slot)
{
	unsigned k = kind_of(r, slot);
	return r->base + r->off[k] + (size_t)(slot - r->first[k]) * r->slot_bytes[k];
}

static void
account(rf_ring *r, size_t add, size_t sub)
{
	r->pinned = r->pinned + add - sub;
	if (r->pinned > r->peak)
		r->peak = r->pinned;
}

int
rf_ring_open_shape(rf_ring **out, const struct rf_ring_shape *shape, rf_device *dev,
		   enum rf_pin_mode mode, rf_diag *diag)
{
	*out = NULL;
	uint64_t total = 0, stride[RF_RING_KINDS];
	unsigned nslots = 0;
	for (unsigned k = 0; k < RF_RING_KINDS; k++) {
		uint64_t bytes;
		stride[k] = RF_ALIGN_UP((uint64_t)shape->slot_bytes[k], RF_RING_ALIGN);
		if (shape->nslots[k] == 0)
			continue;
		if (shape->slot_bytes[k] == 0)
			return rf_fail(diag, RF_EUSAGE, "ring: %u slots of 0 bytes: the size must "
				       "be positive", shape->nslots[k]);
		if (stride[k] < shape->slot_bytes[k] ||
		    rf_mul_u64(stride[k], shape->nslots[k], &bytes) || total + bytes < total ||
		    total + bytes > SIZE_MAX)
			return rf_fail(diag, RF_EUSAGE, "ring: %u slots of %zu bytes overflow",
				       shape->nslots[k], shape->slot_bytes[k]);
		total += bytes;
		nslots += shape->nslots[k];
	}
	if (nslots == 0)
		return rf_fail(diag, RF_EUSAGE, "ring: no slots: the ring needs at least one");
	if (mode != RF_PIN_RING && mode != RF_PIN_TRANSIENT)
		return rf_fail(diag, RF_EUSAGE, "ring: unknown pin mode %d", (int)mode);

	rf_ring *r = calloc(1, sizeof *r);
	if (!r)
		return rf_fail(diag, -ENOMEM, "ring: out of memory");
	for (unsigned k = 0, at = 0; k < RF_RING_KINDS; k++) {
		r->slot_bytes[k] = (size_t)stride[k];
		r->first[k] = at;
		r->n[k] = shape->nslots[k];
		r->off[k] = k ? r->off[k - 1] + (size_t)r->n[k - 1] * r->slot_bytes[k - 1] : 0;
		at += r->n[k];
	}
	r->nslots = nslots;
	r->bytes = (size_t)total;
	r->dev = dev;
	r->mode = mode;
	r->diag = diag;
	r->base = MAP_FAILED;
	r->stack = calloc(nslots, sizeof *r->stack);
	r->is_free = calloc(nslots, 1);
	r->pinned_len = calloc(nslots, sizeof *r->pinned_len);
	if (!r->stack || !r->is_free || !r->pinned_len) {
		free(r->stack);
		free(r->is_free);
		free(r->pinned_len);
		free(r);
		return rf_fail(diag, -ENOMEM, "ring: out of memory");
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cv, NULL);
	for (unsigned k = 0; k < RF_RING_KINDS; k++) {
		for (unsigned i = 0; i < r->n[k]; i++) {
			/* the kind's first slot on top */
			r->stack[r->first[k] + i] = r->first[k] + r->n[k] - 1 - i;
			r->is_free[r->first[k] + i] = 1;
		}
		r->count[k] = r->n[k];
	}

	void *p = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		int err = -errno;
		rf_ring_close(&r);
		return rf_fail(diag, err, "ring: cannot map %zu bytes (%u slots): %s",
			       (size_t)total, nslots, rf_strerror(err));
	}
	r->base = p;

	if (mode == RF_PIN_RING && dev) {
		int ret = dev->ops->host_register(dev, r->base, r->bytes);
		if (ret < 0) {
			rf_ring_close(&r);
			/* Keep the backend's detail (in the device's diag),
			 * prefixed with the numbers. */
			char detail[RF_ERRMSG_MAX];
			memcpy(detail, dev->diag ? dev->diag->msg : diag->msg, sizeof detail);
			return rf_fail(diag, ret,
				       "ring: cannot page-lock the %zu-byte ring (%u slots) for "
				       "%s: %s; lower pinned_bytes or use pin mode transient",
				       (size_t)total, nslots, dev->desc, detail);
		}
		r->ring_registered = 1;
		account(r, r->bytes, 0);
	}
	*out = r;
	return 0;
}

int
rf_ring_open(rf_ring **out, size_t slot_bytes, unsigned nslots, rf_device *dev,
	     enum rf_pin_mode mode, rf_diag *diag)
{
	struct rf_ring_shape shape = {.slot_bytes = {slot_bytes, 0}, .nslots = {nslots, 0}};
	if (slot_bytes == 0 || nslots == 0) {
		*out = NULL;
		return rf_fail(diag, RF_EUSAGE, "ring: %u slots of %zu bytes: both must be positive",
			       nslots, slot_bytes);
	}
	return rf_ring_open_shape(out, &shape, dev, mode, diag);
}

void
rf_ring_close(rf_ring **rp)
{
	if (!rp || !*rp)
		return;
	rf_ring *r = *rp;
	if (r->ring_registered)
		r->dev->ops->host_unregister(r->dev, r->base);
	/* Transient pins left behind (an error path): drop them so nothing
	 * stays registered with the device. */
	if (r->dev && r->mode == RF_PIN_TRANSIENT && r->base != MAP_FAILED) {
		for (unsigned i = 0; i < r->nslots; i++)
			if (r->pinned_len[i] != PIN_NONE && r->pinned_len[i] != PIN_BUSY)
				r->dev->ops->host_unregister(r->dev, slot_at(r, i));
	}
	if (r->base != MAP_FAILED)
		munmap(r->base, r->bytes);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r->stack);
	free(r->is_free);
	free(r->pinned_len);
	free(r);
	*rp = NULL;
}

void *
rf_ring_base(const rf_ring *ring)
{
	return ring->base;
}

size_t
rf_ring_bytes(const rf_ring *ring)
{
	return ring->bytes;
}

size_t
rf_ring_slot_bytes(const rf_ring *ring, unsigned slot)
{
	return slot < ring->nslots ? ring->slot_bytes[kind_of(ring, slot)] : 0;
}

unsigned
rf_ring_nslots(const rf_ring *ring)
{
	return ring->nslots;
}

void *
rf_ring_slot(const rf_ring *ring, unsigned slot)
{
	if (slot >= ring->nslots)
		return NULL;
	return slot_at(ring, slot);
}

int
rf_ring_acquire_kind(rf_ring *r, enum rf_ring_kind kind, unsigned *slot, int block)
{
	if ((unsigned)kind >= RF_RING_KINDS)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	while (!r->count[kind] && !r->shutdown && block)
		pthread_cond_wait(&r->cv, &r->lock);
	int ret = 0;
	if (r->shutdown) {
		ret = -ECANCELED;
	} else if (!r->count[kind]) {
		ret = -EAGAIN;
	} else {
		*slot = r->stack[r->first[kind] + --r->count[kind]];
		r->is_free[*slot] = 0;
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

int
rf_ring_acquire(rf_ring *r, unsigned *slot, int block)
{
	return rf_ring_acquire_kind(r, RF_RING_STAGE, slot, block);
}

void
rf_ring_release(rf_ring *r, unsigned slot)
{
	if (slot >= r->nslots)
		return;
	pthread_mutex_lock(&r->lock);
	/* A second release of a slot would hand it out twice; ignore it. */
	if (!r->is_free[slot]) {
		unsigned k = kind_of(r, slot);
		r->is_free[slot] = 1;
		r->stack[r->first[k] + r->count[k]++] = slot;
		/* Waiters of both kinds share the condition. */
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->lock);
}

void
rf_ring_shutdown(rf_ring *r)
{
	pthread_mutex_lock(&r->lock);
	r->shutdown = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
}

unsigned
rf_ring_free_slots(rf_ring *r)
{
	pthread_mutex_lock(&r->lock);
	unsigned n = r->count[RF_RING_STAGE] + r->count[RF_RING_READ];
	pthread_mutex_unlock(&r->lock);
	return n;
}

int
rf_ring_pin(rf_ring *r, unsigned slot, size_t len)
{
	if (r->mode != RF_PIN_TRANSIENT || !r->dev)
		return 0;
	if (slot >= r->nslots || len == 0 || len > rf_ring_slot_bytes(r, slot))
		return rf_fail(r->diag, RF_EUSAGE, "ring: pin of %zu bytes of slot %u (%u slots, "
			       "that one of %zu bytes)", len, slot, r->nslots,
			       rf_ring_slot_bytes(r, slot));
	len = (size_t)RF_ALIGN_UP(len, RF_RING_ALIGN);
	pthread_mutex_lock(&r->lock);
	if (r->pinned_len[slot] != PIN_NONE) {
		pthread_mutex_unlock(&r->lock);
		return rf_fail(r->diag, -EBUSY, "ring: slot %u is already pinned", slot);
	}
	r->pinned_len[slot] = PIN_BUSY;
	pthread_mutex_unlock(&r->lock);

	int ret = r->dev->ops->host_register(r->dev, slot_at(r, slot), len);

	pthread_mutex_lock(&r->lock);
	if (ret < 0) {
		r->pinned_len[slot] = PIN_NONE;
	} else {
		r->pinned_len[slot] = len;
		account(r, len, 0);
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

int
rf_ring_unpin(rf_ring *r, unsigned slot)
{
	if (r->mode != RF_PIN_TRANSIENT || !r->dev)
		return 0;
	if (slot >= r->nslots)
		return rf_fail(r->diag, RF_EUSAGE, "ring: unpin of slot %u (%u slots)", slot, r->nslots);
	pthread_mutex_lock(&r->lock);
	size_t len = r->pinned_len[slot];
	if (len == PIN_NONE || len == PIN_BUSY) {
		pthread_mutex_unlock(&r->lock);
		return rf_fail(r->diag, -EINVAL, "ring: slot %u is not pinned", slot);
	}
	r->pinned_len[slot] = PIN_BUSY;
	pthread_mutex_unlock(&r->lock);

	int ret = r->dev->ops->host_unregister(r->dev, slot_at(r, slot));

	pthread_mutex_lock(&r->lock);
	if (ret < 0) {
		r->pinned_len[slot] = len; /* still locked */
	} else {
		r->pinned_len[slot] = PIN_NONE;
		account(r, 0, len);
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

size_t
rf_ring_pinned_bytes(const rf_ring *ring)
{
	rf_ring *r = (rf_ring *)ring;
	pthread_mutex_lock(&r->lock);
	size_t n = r->pinned;
	pthread_mutex_unlock(&r->lock);
	return n;
}

size_t
rf_ring_pinned_peak(const rf_ring *ring)
{
	rf_ring *r = (rf_ring *)ring;
	pthread_mutex_lock(&r->lock);
	size_t n = r->peak;
	pthread_mutex_unlock(&r->lock);
	return n;
}
