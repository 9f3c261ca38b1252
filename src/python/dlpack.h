/* SPDX-License-Identifier: MIT */
/*
 * The DLPack ABI (dlpack.h v0.8, and 1.0's versioned tensor): the
 * structures a producer hands to a consumer inside a PyCapsule named
 * "dltensor" ("dltensor_versioned" for DLManagedTensorVersioned).  Written out here from the
 * public specification so the extension needs no extra header; the layout
 * and the constants must match it exactly, since torch, numpy and cupy read
 * these structures directly.
 */
#ifndef RFPY_DLPACK_H
#define RFPY_DLPACK_H

#include <stdint.h>

#define RFPY_DLPACK_MAJOR 0
#define RFPY_DLPACK_MINOR 8

typedef enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLCUDAHost = 3,
} DLDeviceType;

typedef struct {
	DLDeviceType device_type;
	int32_t device_id;
} DLDevice;

typedef enum {
	kDLInt = 0,
	kDLUInt = 1,
	kDLFloat = 2,
	kDLBfloat = 4,
} DLDataTypeCode;

typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;     /* NULL: compact, C order */
	uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	/* Called by the consumer (any thread) when it no longer needs the
	 * memory; by the capsule's destructor when nobody consumed it. */
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* DLPack 1.0: a version and flags, the tensor last. */
typedef struct {
	uint32_t major;
	uint32_t minor;
} DLPackVersion;

#define RFPY_DLPACK_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define RFPY_DLPACK_FLAG_IS_COPIED (UINT64_C(1) << 1)

typedef struct DLManagedTensorVersioned {
	DLPackVersion version;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensorVersioned *self);
	uint64_t flags;
	DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
