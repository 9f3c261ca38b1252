/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator: device memory (an address space the host cannot
 * touch, backed by host memory, under a VRAM budget), pinned host
 * allocations and registered host ranges.
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

/*
 * Device pointers are addresses in the device address space: ranges
 * reserved with PROT_NONE (and MAP_NORESERVE: no memory, no commit charge)
 * that are never made accessible.  A host read or write through a device
 * pointer faults with SIGSEGV, as on a GPU, instead of quietly working.
 * Each allocation's bytes live in a separate anonymous mapping, left
 * untouched until written, so a card's worth costs nothing; the emulator's
 * copies reach them through the block table (emu_dev_mem), and freed
 * device addresses stay inaccessible.  mmap picks the reservation's place,
 * so the sanitizers' own layouts are respected.
 */
#define ARENA_MIN (64ull << 30)

bool
emu_in_device_space(const void *p, size_t n)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + (n ? n : 1);

	for (struct emu_arena *a = g.arenas; a; a = a->next)
		if (lo < a->hi && a->lo < hi)
			return true;
	return false;
}

void *
emu_dev_mem(const struct emu_block *b, const void *dev_ptr)
{
	return b->store + ((uintptr_t)dev_ptr - b->r.lo);
}

static struct emu_arena *
arena_new(size_t need)
{
	size_t len = need > ARENA_MIN ? need : ARENA_MIN;
	struct emu_arena *a = calloc(1, sizeof(*a));
	struct emu_extent *e = calloc(1, sizeof(*e));
	void *p;

	if (!a || !e) {
		free(a);
		free(e);
		return NULL;
	}
	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(a);
		free(e);
		return NULL;
	}
	a->lo = e->lo = (uintptr_t)p;
	a->hi = e->hi = (uintptr_t)p + len;
	a->free = e;
	a->next = g.arenas;
	g.arenas = a;
	return a;
}

/* First fit in address order; g.lock held.  0 when no extent is large
 * enough (the caller adds an arena). */
static uintptr_t
arena_take(size_t len)
{
	for (struct emu_arena *a = g.arenas; a; a = a->next) {
		for (struct emu_extent **pp = &a->free; *pp; pp = &(*pp)->next) {
			struct emu_extent *e = *pp;
			uintptr_t at = e->lo;

			if (e->hi - e->lo < len)
				continue;
			e->lo += len;
			if (e->lo == e->hi) {
				*pp = e->next;
				free(e);
			}
			return at;
		}
	}
	return 0;
}

/* Gives [lo, lo + len) back to its arena, merged with its neighbours;
 * g.lock held.  An extent that cannot be allocated leaves the range
 * unused, which costs address space only. */
static void
arena_give(uintptr_t lo, size_t len)
{
	uintptr_t hi = lo + len;

	for (struct emu_arena *a = g.arenas; a; a = a->next) {
		struct emu_extent **pp = &a->free, *prev = NULL, *e;

		if (lo < a->lo || hi > a->hi)
			continue;
		while (*pp && (*pp)->lo < lo) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (prev && prev->hi == lo) {
			prev->hi = hi;
			if (*pp && (*pp)->lo == hi) {
				e = *pp;
				prev->hi = e->hi;
				prev->next = e->next;
				free(e);
			}
			return;
		}
		if (*pp && (*pp)->lo == hi) {
			(*pp)->lo = lo;
			return;
		}
		e = malloc(sizeof(*e));
		if (!e)
			return;
		e->lo = lo;
		e->hi = hi;
		e->next = *pp;
		*pp = e;
		return;
	}
}

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

EMU_EXPORT void *
rfemu_device_view(const void *dev_ptr, size_t len)
{
	struct emu_block *b;
	void *mem = NULL;

	emu_init_once();
	if (!dev_ptr)
		return NULL;
	EMU_LOCK();
	b = emu_find_block(g.dev_allocs, dev_ptr, len, NULL);
	if (b)
		mem = emu_dev_mem(b, dev_ptr);
	EMU_UNLOCK();
	return mem;
}

EMU_EXPORT cudaError_t
cudaMalloc(void **devPtr, size_t size)
{
	int dev = emu_tls_device;
	struct emu_block *b;
	size_t rounded, store_len;
	uintptr_t at;
	void *p;

	EMU_ENTER();
	if (!devPtr)
		return emu_ret(cudaErrorInvalidValue);
	/* cudart returns success and a null pointer for zero bytes. */
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	if (size > (SIZE_MAX >> 2))
		return emu_ret(cudaErrorMemoryAllocation);
	rounded = (size + DEVICE_ALIGN - 1) & ~(size_t)(DEVICE_ALIGN - 1);
	store_len = (rounded + 4095) & ~(size_t)4095;

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
	p = mmap(NULL, store_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	b = calloc(1, sizeof(*b));
	EMU_LOCK();
	at = p != MAP_FAILED && b ? arena_take(rounded) : 0;
	if (!at && p != MAP_FAILED && b && arena_new(rounded))
		at = arena_take(rounded);
	if (!at) {
		g.dev_used[dev] -= rounded;
		EMU_UNLOCK();
		if (p != MAP_FAILED)
			munmap(p, store_len);
		free(b);
		return emu_ret(cudaErrorMemoryAllocation);
	}
	b->r.lo = at;
	b->r.hi = at + size;
	b->base = (void *)at;
	b->map_len = rounded;
	b->device = dev;
	b->store = p;
	b->store_len = store_len;
	b->next = g.dev_allocs;
	g.dev_allocs = b;
	g.c.device_bytes += rounded;
	if (g.c.device_bytes > g.c.peak_device_bytes)
		g.c.peak_device_bytes = g.c.device_bytes;
	EMU_UNLOCK();
	*devPtr = (void *)at;
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
	arena_give(b->r.lo, b->map_len);
	EMU_UNLOCK();
	munmap(b->store, b->store_len);
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
	else if (emu_in_device_space(ptr, size))
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
