/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator: device memory (host memory under a VRAM budget),
 * pinned host allocations and registered host ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu.h"

/* cudaMalloc's documented alignment. */
#define DEVICE_ALIGN 256

struct emu_block *
emu_find_block(struct emu_block *list, const void *p, size_t n, bool *partial)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + (n ? n : 1);

	if (partial)
		*partial = false;
	for (struct emu_block *b = list; b; b = b->next) {
		if (lo >= b->r.lo && lo < b->r.hi) {
			if (hi <= b->r.hi && hi > lo)
				return b;
			if (partial)
				*partial = true;
			return NULL;
		}
		/* A range that starts before a block and runs into it. */
		if (lo < b->r.lo && hi > b->r.lo && partial)
			*partial = true;
	}
	return NULL;
}

/* Pinned, to the driver, means wholly inside one page-locked range: a copy
 * that straddles the end of a registration is a pageable copy. */
bool
emu_host_is_pinned(const void *p, size_t n)
{
	return emu_find_block(g.regs, p, n, NULL) || emu_find_block(g.host_allocs, p, n, NULL);
}

static void
block_unlink(struct emu_block **list, struct emu_block *b)
{
	for (struct emu_block **pp = list; *pp; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			return;
		}
	}
}

/* --- device memory ------------------------------------------------------- */

EMU_EXPORT int
rfemu_pointer_device(const void *p)
{
	struct emu_block *b;
	int dev;

	emu_init_once();
	EMU_LOCK();
	b = emu_find_block(g.dev_allocs, p, 1, NULL);
	dev = b ? b->device : -1;
	EMU_UNLOCK();
	return dev;
}

EMU_EXPORT cudaError_t
cudaMalloc(void **devPtr, size_t size)
{
	int dev = emu_tls_device;
	struct emu_block *b;
	size_t rounded;
	void *p;

	EMU_ENTER();
	if (!devPtr)
		return emu_ret(cudaErrorInvalidValue);
	/* cudart returns success and a null pointer for zero bytes. */
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	if (size > (SIZE_MAX >> 1))
		return emu_ret(cudaErrorMemoryAllocation);
	rounded = (size + DEVICE_ALIGN - 1) & ~(size_t)(DEVICE_ALIGN - 1);

	EMU_LOCK();
	/* The budget is the card's: the sum of live allocations plus what the
	 * context reserves may not pass RINGFEED_EMU_VRAM. */
	if (g.dev_used[dev] + g.cfg.reserved + rounded > g.cfg.vram) {
		EMU_UNLOCK();
		return emu_ret(cudaErrorMemoryAllocation);
	}
	g.dev_used[dev] += rounded;
	EMU_UNLOCK();

	/* Left untouched: the pages cost nothing until written, so a test
	 * may allocate a card's worth on a small machine. */
	p = aligned_alloc(DEVICE_ALIGN, rounded);
	b = calloc(1, sizeof(*b));
	if (!p || !b) {
		free(p);
		free(b);
		EMU_LOCK();
		g.dev_used[dev] -= rounded;
		EMU_UNLOCK();
		return emu_ret(cudaErrorMemoryAllocation);
	}
	b->r.lo = (uintptr_t)p;
	b->r.hi = (uintptr_t)p + size;
	b->base = p;
	b->map_len = rounded;
	b->device = dev;

	EMU_LOCK();
	b->next = g.dev_allocs;
	g.dev_allocs = b;
	g.c.device_bytes += rounded;
	if (g.c.device_bytes > g.c.peak_device_bytes)
		g.c.peak_device_bytes = g.c.device_bytes;
	EMU_UNLOCK();
	*devPtr = p;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaFree(void *devPtr)
{
	struct emu_block *b;

	EMU_ENTER();
	if (!devPtr)
		return cudaSuccess;
	EMU_LOCK();
	b = emu_find_block(g.dev_allocs, devPtr, 1, NULL);
	if (!b || b->r.lo != (uintptr_t)devPtr) {
		EMU_UNLOCK();
		return emu_ret(cudaErrorInvalidValue);
	}
	/* cudart's cudaFree waits for the whole device first, so this is
	 * "safe" on a GPU, but a loader that frees a buffer its own pending
	 * work uses has lost track of it.  Refused: the buffer stays, the
	 * work finishes on valid memory, the call fails. */
	if (emu_pending_device(b->r)) {
		emu_hazard(RFEMU_HAZARD_FREE_PENDING,
			"cudaFree(%p): %zu-byte buffer still used by pending work; refused",
			devPtr, (size_t)(b->r.hi - b->r.lo));
		EMU_UNLOCK();
		return emu_ret(cudaErrorIllegalState);
	}
	block_unlink(&g.dev_allocs, b);
	g.dev_used[b->device] -= b->map_len;
	g.c.device_bytes -= b->map_len;
	EMU_UNLOCK();
	free(b->base);
	free(b);
	return cudaSuccess;
}

/* --- pinned host memory -------------------------------------------------- */

static cudaError_t
pinned_budget_locked(size_t size)
{
	uint64_t pinned = g.c.registered_bytes + g.c.host_alloc_bytes;

	if (g.cfg.pinned_limit && pinned + size > g.cfg.pinned_limit)
		return cudaErrorMemoryAllocation;
	return cudaSuccess;
}

/* Page-locking runs at 1-2 GB/s on real hosts; RINGFEED_EMU_REGISTER_BW
 * makes the emulator take that long too (off by default). */
static void
pin_delay(size_t size)
{
	double bw;
	struct timespec ts;
	double sec;

	EMU_LOCK();
	bw = g.cfg.register_bw;
	EMU_UNLOCK();
	if (bw <= 0)
		return;
	sec = (double)size / bw;
	ts.tv_sec = (time_t)sec;
	ts.tv_nsec = (long)((sec - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

EMU_EXPORT cudaError_t
cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	struct emu_block *b;
	size_t len;
	void *p;
	cudaError_t e;

	EMU_ENTER();
	if (!pHost || (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
			cudaHostAllocWriteCombined)))
		return emu_ret(cudaErrorInvalidValue);
	if (size == 0) {
		*pHost = NULL;
		return cudaSuccess;
	}
	if (size > (SIZE_MAX >> 1))
		return emu_ret(cudaErrorMemoryAllocation);
	len = (size + 4095) & ~(size_t)4095;
	EMU_LOCK();
	e = pinned_budget_locked(len);
	EMU_UNLOCK();
	if (e != cudaSuccess)
		return emu_ret(e);
	pin_delay(size);

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	b = calloc(1, sizeof(*b));
	if (p == MAP_FAILED || !b) {
		if (p != MAP_FAILED)
			munmap(p, len);
		free(b);
		return emu_ret(cudaErrorMemoryAllocation);
	}
	b->r.lo = (uintptr_t)p;
	b->r.hi = (uintptr_t)p + size;
	b->base = p;
	b->map_len = len;
	b->flags = flags;

	EMU_LOCK();
	/* Checked again: another thread may have pinned memory meanwhile. */
	e = pinned_budget_locked(len);
	if (e == cudaSuccess) {
		b->next = g.host_allocs;
		g.host_allocs = b;
		g.c.host_alloc_bytes += len;
		emu_update_pinned_peaks();
	}
	EMU_UNLOCK();
	if (e != cudaSuccess) {
		munmap(p, len);
		free(b);
		return emu_ret(e);
	}
	*pHost = p;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaMallocHost(void **ptr, size_t size)
{
	/* cudart documents cudaMallocHost as cudaHostAlloc with no flags. */
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

EMU_EXPORT cudaError_t
cudaFreeHost(void *ptr)
{
	struct emu_block *b;

	EMU_ENTER();
	if (!ptr)
		return cudaSuccess;
	EMU_LOCK();
	b = emu_find_block(g.host_allocs, ptr, 1, NULL);
	if (!b || b->r.lo != (uintptr_t)ptr) {
		EMU_UNLOCK();
		return emu_ret(cudaErrorInvalidValue);
	}
	/* cudaFreeHost also synchronizes on a GPU, but a pending copy from
	 * the memory means its owner freed a buffer in flight. */
	if (emu_pending_host(b->r)) {
		emu_hazard(RFEMU_HAZARD_FREEHOST_PENDING,
			"cudaFreeHost(%p): a copy using this memory is still pending; refused", ptr);
		EMU_UNLOCK();
		return emu_ret(cudaErrorIllegalState);
	}
	block_unlink(&g.host_allocs, b);
	g.c.host_alloc_bytes -= b->map_len;
	EMU_UNLOCK();
	munmap(b->base, b->map_len);
	free(b);
	return cudaSuccess;
}

/* --- registered host ranges ---------------------------------------------- */

EMU_EXPORT cudaError_t
cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	struct emu_block *b;
	struct emu_range r;
	cudaError_t e = cudaSuccess;
	bool partial;

	EMU_ENTER();
	if (!ptr || size == 0 || (uintptr_t)ptr + size < (uintptr_t)ptr ||
	    (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
			cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)))
		return emu_ret(cudaErrorInvalidValue);
	r.lo = (uintptr_t)ptr;
	r.hi = r.lo + size;

	b = calloc(1, sizeof(*b));
	if (!b)
		return emu_ret(cudaErrorMemoryAllocation);
	b->r = r;
	b->base = ptr;
	b->flags = flags;

	EMU_LOCK();
	/* Any overlap with a registered range, or with memory that is already
	 * page-locked by cudaHostAlloc, is refused, as the driver does. */
	if (emu_find_block(g.regs, ptr, size, &partial) || partial ||
	    emu_find_block(g.host_allocs, ptr, size, &partial) || partial)
		e = cudaErrorHostMemoryAlreadyRegistered;
	else if (emu_find_block(g.dev_allocs, ptr, size, &partial) || partial)
		e = cudaErrorInvalidValue;
	else
		e = pinned_budget_locked(size);
	if (e == cudaSuccess) {
		b->next = g.regs;
		g.regs = b;
		g.c.registered_bytes += size;
		emu_update_pinned_peaks();
	}
	EMU_UNLOCK();
	if (e != cudaSuccess) {
		free(b);
		return emu_ret(e);
	}
	pin_delay(size);
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaHostUnregister(void *ptr)
{
	struct emu_block *b;

	EMU_ENTER();
	if (!ptr)
		return emu_ret(cudaErrorInvalidValue);
	EMU_LOCK();
	b = emu_find_block(g.regs, ptr, 1, NULL);
	if (!b || b->r.lo != (uintptr_t)ptr) {
		EMU_UNLOCK();
		return emu_ret(cudaErrorHostMemoryNotRegistered);
	}
	/* On a GPU the DMA engine would go on reading pages that are no
	 * longer locked: silent corruption.  Here: refused, loudly. */
	if (emu_pending_host(b->r)) {
		emu_hazard(RFEMU_HAZARD_UNREGISTER_PENDING,
			"cudaHostUnregister(%p): a copy using this %zu-byte range is still pending; refused",
			ptr, (size_t)(b->r.hi - b->r.lo));
		EMU_UNLOCK();
		return emu_ret(cudaErrorIllegalState);
	}
	block_unlink(&g.regs, b);
	g.c.registered_bytes -= b->r.hi - b->r.lo;
	EMU_UNLOCK();
	free(b);
	return cudaSuccess;
}
