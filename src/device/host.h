/* SPDX-License-Identifier: MIT */
/*
 * Host backend extras: what the backend holds right now (tests, leak
 * checks), a way to hold a stream's worker so a test can observe work that is
 * queued but not yet run, and the opt-in inline mode for a stream.
 */
#ifndef RF_DEVICE_HOST_H
#define RF_DEVICE_HOST_H

#include <stddef.h>

#include "device/device.h"

struct rf_device_host_counts {
	unsigned allocs;         /* live alloc() blocks */
	size_t alloc_bytes;
	unsigned registrations;  /* live host_register() ranges */
	size_t registered_bytes;
	unsigned streams;
	unsigned events;
	unsigned long long copies; /* async copies run by stream workers so far */
	unsigned long long inline_copies; /* run in the caller (inline streams) */
};

/* 1 when `dev` is a host backend. */
int rf_device_is_host(const rf_device *dev);

/* Fill *c; -EINVAL when `dev` is not a host backend.  Thread-safe. */
int rf_device_host_counts(rf_device *dev, struct rf_device_host_counts *c);

/* hold = 1: the stream's worker starts no further op until released with
 * hold = 0 (the op in progress, if any, finishes).  Test-only. */
int rf_device_host_hold(rf_device *dev, void *stream, int hold);

/* Largest copy an inline stream runs in the caller.  Above it the two
 * hand-offs saved are small next to the copy, and a caller that copies
 * while it could be handing over finished work adds the copy's time to that
 * work's latency (measured: worse consumer stalls with 39 MB batches). */
#define RF_DEVICE_HOST_INLINE_MAX ((size_t)1 << 20)

/* on = 1: `stream` runs ops in the caller's thread while it is idle (nothing
 * queued or running, not held): copy_h2d_async of at most
 * RF_DEVICE_HOST_INLINE_MAX bytes copies before it returns and event_record
 * completes the event at once, saving two thread hand-offs per copy.
 * Otherwise (and for larger copies) ops queue as on any stream, so FIFO
 * order, stream waits and event generations behave as before; only "the call
 * returns before the copy runs" is given up for small copies.  on = 0 restores fully asynchronous behaviour.
 * -EINVAL when `dev` is not a host backend (so callers may call it on any
 * backend and ignore the result).  Any thread; takes effect for later ops. */
int rf_device_host_stream_inline(rf_device *dev, void *stream, int on);

#endif
