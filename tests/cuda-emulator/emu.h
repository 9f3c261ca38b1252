/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator's internals, shared by its source files.
 *
 * Locking: one process-wide mutex, g.lock, guards every piece of state
 * below, and one condition variable, g.cond, is broadcast whenever anything
 * a thread may wait for changes (an operation enqueued or finished, a
 * stream destroyed).  The emulator is a test tool: a single lock keeps it
 * simple to prove race-free under ThreadSanitizer, and the work done under
 * it is small (copies and host functions run with it released).
 */
#ifndef RFEMU_EMU_H
#define RFEMU_EMU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "emulator.h"

#define EMU_EXPORT __attribute__((visibility("default")))
#define EMU_MAX_DEVICES 16

struct emu_range {
	uintptr_t lo, hi;	/* [lo, hi) */
};

static inline bool
emu_overlap(struct emu_range a, struct emu_range b)
{
	return a.lo < b.hi && b.lo < a.hi;
}

enum emu_op_kind {
	EMU_OP_COPY,
	EMU_OP_HOSTFN,
	EMU_OP_RECORD,
	EMU_OP_NOP,		/* a wait (its deps) or a legacy-stream barrier */
};

enum emu_dir { EMU_H2H, EMU_H2D, EMU_D2H, EMU_D2D };

struct emu_stream;
struct emu_event;

/* "Wait until stream s has finished its operation number `ticket`." */
struct emu_dep {
	struct emu_stream *s;
	uint64_t ticket;
};

struct emu_op {
	struct emu_op *next;
	enum emu_op_kind kind;
	uint64_t seq;		/* process-wide enqueue order */
	uint64_t ticket;	/* 1-based position in its stream */
	struct emu_dep *deps;
	size_t ndeps;

	/* Device memory this operation reads and writes, for the hazard
	 * checks; the host side of a copy, for unregister/free checks. */
	struct emu_range *reads;
	size_t nreads;
	struct emu_range write;
	bool has_write;
	struct emu_range host;
	bool has_host;

	/* EMU_OP_COPY: dst and src as the caller gave them (device addresses
	 * for device memory), dst_mem and src_mem where the bytes are */
	void *dst;
	const void *src;
	void *dst_mem;
	const void *src_mem;
	size_t n;
	enum emu_dir dir;
	bool check_sum;
	uint64_t sum;

	/* EMU_OP_HOSTFN */
	cudaHostFn_t fn;
	void *arg;

	/* EMU_OP_RECORD */
	struct emu_event *ev;
	uint64_t gen;
};

struct emu_stream {
	struct emu_stream *next_all;
	unsigned id;
	int device;
	unsigned flags;
	bool implicit;		/* legacy default or per-thread stream */
	bool legacy;
	bool blocking;		/* synchronizes with the legacy default stream */
	bool destroyed;		/* handle gone; the worker drains and exits */
	bool exited;		/* the worker returned */
	bool joining;		/* someone is joining the worker */
	int refs;
	pthread_t thread;

	struct emu_op *head, *tail;
	uint64_t enqueued, done;	/* tickets */
	cudaError_t sticky;	/* an execution-time hazard; never cleared */
	uint64_t rng;

	/* rfemu_host_func_reads() ranges waiting for the next host function */
	struct emu_range *tags;
	size_t ntags, cap_tags;
};

struct emu_event {
	struct emu_event *next_all;
	unsigned id;
	unsigned flags;
	bool destroyed;
	int refs;		/* the handle, plus pending record operations */
	bool recorded;
	struct emu_stream *s;	/* last record: (s, ticket) */
	uint64_t ticket;
	uint64_t gen;		/* bumped by each record */
	uint64_t time_ns;	/* when the last record executed */
	cudaError_t err;	/* the stream's sticky error at that time */
};

struct emu_block {
	struct emu_block *next;
	struct emu_range r;
	int device;		/* device allocations */
	void *base;		/* what to free */
	size_t map_len;		/* host allocations: the mmap length; device: the
				 * size rounded to DEVICE_ALIGN (the address range
				 * taken and the budget charged) */
	unsigned flags;
	/* Device allocations: the host memory that holds the bytes.  r is an
	 * address range of the device address space (never accessible to the
	 * host); the emulator's copies and host-function views go through
	 * emu_dev_mem(). */
	unsigned char *store;
	size_t store_len;	/* its mmap length */
};

/* The device address space: ranges reserved PROT_NONE, never made
 * accessible, from which cudaMalloc carves its addresses (free extents in
 * address order). */
struct emu_extent {
	struct emu_extent *next;
	uintptr_t lo, hi;
};

struct emu_arena {
	struct emu_arena *next;
	uintptr_t lo, hi;
	struct emu_extent *free;
};

struct emu_config {
	uint64_t vram;
	uint64_t reserved;
	double bw;		/* bytes per second, host <-> device; 0 = instant */
	double d2d_bw;
	double jitter;		/* fraction of the nominal duration, or... */
	uint64_t jitter_ns;	/* ...an absolute upper bound when non-zero */
	uint64_t latency_ns;
	uint64_t seed;
	bool strict;
	int devices;
	int driver_version;
	uint64_t pinned_limit;	/* 0 = unlimited */
	double register_bw;	/* 0 = instant */
	int exit_status;
	bool report;
	uint64_t wait_limit_ns;	/* 0 = wait forever */
};

struct emu_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct emu_config cfg;

	struct emu_stream *streams;
	struct emu_event *events;
	struct emu_block *dev_allocs;
	struct emu_arena *arenas;
	struct emu_block *host_allocs;
	struct emu_block *regs;

	struct emu_stream *legacy[EMU_MAX_DEVICES];
	uint64_t dev_used[EMU_MAX_DEVICES];
	uint64_t engine_free_ns[2];	/* H2D and D2H copy engines */
	uint64_t seq;
	unsigned next_id;
	bool pageable_noted;
	uint64_t hazard_lines;

	struct rfemu_counters c;
};

extern struct emu_state g;

/* Per host thread, as in cudart. */
extern _Thread_local int emu_tls_device;
extern _Thread_local bool emu_tls_in_host_func;

/* Functions below that read or change shared state expect g.lock held:
 * emu_hazard, emu_update_pinned_peaks, emu_find_block, emu_host_is_pinned,
 * emu_in_device_space,
 * emu_resolve_stream, emu_enqueue, emu_pending_*, emu_stream_unref,
 * emu_worker_threads; emu_reap and emu_enter take it themselves. */

/* emu_core.c */
void emu_init_once(void);
cudaError_t emu_enter(const char *fn);
cudaError_t emu_ret(cudaError_t err);
void emu_hazard(enum rfemu_hazard kind, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
uint64_t emu_now_ns(void);
void emu_host_wait(uint64_t since_ns, const char *what);
void emu_update_pinned_peaks(void);

/* emu_memory.c */
struct emu_block *emu_find_block(struct emu_block *list, const void *p, size_t n,
	bool *partial);
bool emu_host_is_pinned(const void *p, size_t n);
bool emu_in_device_space(const void *p, size_t n);
void *emu_dev_mem(const struct emu_block *b, const void *dev_ptr);

/* emu_stream.c */
struct emu_stream *emu_resolve_stream(cudaStream_t h, cudaError_t *err);
cudaError_t emu_enqueue(struct emu_stream *s, struct emu_op *op, bool wait);
struct emu_op *emu_op_new(enum emu_op_kind kind);
bool emu_pending_host(struct emu_range r);
bool emu_pending_device(struct emu_range r);
void emu_reap(void);
uint64_t emu_pending_ops(void);
uint64_t emu_worker_threads(void);
void emu_stream_unref(struct emu_stream *s);
void emu_describe_streams(FILE *f);

/* The per-thread default stream names (cuda_runtime_api.h maps the plain
 * names to these under CUDA_API_PER_THREAD_DEFAULT_STREAM). */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
	enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
	unsigned int flags);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);

#define EMU_LOCK() pthread_mutex_lock(&g.lock)
#define EMU_UNLOCK() pthread_mutex_unlock(&g.lock)

/* Every cudart entry point starts with this: lazy init, the driver and
 * device checks, and the no-CUDA-from-host-functions rule. */
#define EMU_ENTER() do { \
		cudaError_t e_ = emu_enter(__func__); \
		if (e_ != cudaSuccess) \
			return emu_ret(e_); \
	} while (0)

#endif /* RFEMU_EMU_H */
