/* SPDX-License-Identifier: MIT */
/*
 * Host backend extras for tests and for leak checks: what the backend holds
 * right now, and a way to hold a stream's worker so a test can observe work
 * that is queued but not yet run.
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
};

/* 1 when `dev` is a host backend. */
int rf_device_is_host(const rf_device *dev);

/* Fill *c; -EINVAL when `dev` is not a host backend.  Thread-safe. */
int rf_device_host_counts(rf_device *dev, struct rf_device_host_counts *c);

/* hold = 1: the stream's worker starts no further op until released with
 * hold = 0 (the op in progress, if any, finishes).  Test-only. */
int rf_device_host_hold(rf_device *dev, void *stream, int hold);

#endif
