/* SPDX-License-Identifier: MIT */
/*
 * The memory plan: how the pinned budget is cut into ring slots (read slots
 * of a chunk, staging slots of a batch), how many reads may be in flight, whether the host device hands
 * batches out in place, and what the device buffers need; or why the budget
 * or the device cannot hold the loader.  A pure function of its inputs: no
 * allocation, no system call, no log (the caller logs rf_memplan_describe),
 * so it is tested over tables of inputs (tests/loader/test_memplan.c).
 */
#ifndef RF_LOADER_MEMPLAN_H
#define RF_LOADER_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "decode/decode.h"

/* More slots only add bookkeeping. */
#define RF_MEMPLAN_SLOTS_MAX 4096u
/* Staged batches wanted when the ring has room (see rf_memplan_compute). */
#define RF_MEMPLAN_STAGE_DEEP 16u
/* Full shuffling: ring slots set aside for bounce areas, at most (the full
 * thread keeps their numbers in an array of this size). */
#define RF_MEMPLAN_BOUNCE_SLOTS_MAX 64u

struct rf_memplan_in {
	const rf_batch_layout *layout; /* the delivered batch (bytes, parts) */
	uint32_t nfields;        /* fields in the schema: a checksum row's width */
	uint64_t max_span;       /* the largest chunk read, aligned (stored span) */
	uint64_t nchunks;
	uint64_t pinned_bytes;
	int lean;                /* the process's default budget: take only the
	                            slots the loader runs at full speed with
	                            (reads in flight, W, staging), not the
	                            deeper staging extra slots buy */
	uint32_t batch_size;     /* for messages */
	uint32_t depth;          /* device buffers, resolved (1..RF_DEPTH_MAX) */
	uint32_t io_depth;       /* reads in flight asked for, resolved */
	uint32_t window;         /* W in force (window shuffling), else 0 */
	int mix;                 /* a mixture: `window` counts the chunks its
	                            sources hold together, not one W */
	int full;                /* shuffle full: samples read into the batch */
	int full_window;         /* full: window shuffling from memory, served
	                            as full is (for messages) */
	int map;                 /* reads are chunks faulted in from shard maps */
	int direct;              /* O_DIRECT reads */
	int sums;                /* full: each sample's checksum row read too */
	uint32_t workers;        /* decode workers */
	uint64_t worker_bytes;   /* ordinary memory each allocates at open (a
	                            chunk of decoded images) */
	uint64_t worker_scratch; /* and the most its decoder's scratch grows to */
	int host_memory;         /* the device may have batches handed out in
	                            place (RF_DEVICE_CAP_HOST_MEMORY, not
	                            overridden by RINGFEED_HOST_COPY) */
	int dev_free_known;      /* dev_free holds the device's free bytes */
	uint64_t dev_free;
	const char *dev_desc;    /* the device, for messages */
};

struct rf_memplan {
	/* Slots of two sizes: staging slots hold a batch each (full
	 * shuffling: or bounce areas), read slots a chunk read each; the
	 * numbers 0 .. n_stage - 1 are staging slots, the n_read after them
	 * reads.  Both sizes 4096-aligned; read_bytes 0 without reads. */
	uint64_t stage_bytes, read_bytes;
	unsigned nslots, n_read, n_stage;
	/* The ring's slots: all of nslots, but in map mode only the staging
	 * ones: a read there holds no bytes, and its slot number (n_stage and
	 * up) comes from the map's free list.  ring_bytes is the ring's size
	 * (at most pinned_bytes, which the reads of map mode count against
	 * as if they were read slots). */
	unsigned n_ring;
	uint64_t ring_bytes;
	unsigned qd;             /* reads in flight at most */
	int in_place;            /* batches handed out in their ring slots */
	uint64_t bspan;          /* full: bounce bytes per read in flight; 0: none */
	unsigned nbounce;        /* full: ring slots set aside for bounce areas */
	uint64_t dev_bytes;      /* device buffers: depth x batch, 0 in place */
	uint64_t decode_bytes;   /* workers x worker_bytes, at most
	                            RF_IMAGE_DECODE_BYTES_MAX */
};

/* Plan, or RF_EMEMPLAN with a message on d that names the numbers and what
 * to change.  *out is filled only on success. */
int rf_memplan_compute(const struct rf_memplan_in *in, struct rf_memplan *out, rf_diag *d);

/* The plan in one line ("memory plan: pinned ..."), for the log. */
void rf_memplan_describe(const struct rf_memplan_in *in, const struct rf_memplan *mp, char *buf,
			 size_t cap);

/* b bytes as "1.50 MiB" (B, KiB, MiB, GiB). */
void rf_memplan_fmt_size(char *buf, size_t cap, uint64_t b);

#endif
