/* SPDX-License-Identifier: MIT */
/*
 * ringfeed: stream training datasets from disk into GPU memory with bounded
 * host and device memory.
 *
 * This header is the manual for the library's common vocabulary (versions,
 * error codes, logging, element types) and for the streaming loader.  The
 * dataset writer and random-access reader are in <ringfeed/dataset.h>.
 *
 * Conventions used by every function of the library:
 *  - Functions return int: 0 on success or a negative error code: either a
 *    negated errno value (-ENOMEM, -EIO, -EINVAL, ...) or one of the RF_E*
 *    codes below.  rf_strerror() names any of them.  Sizes and handles come
 *    back through out-parameters.
 *  - The detail of the last failure (file, chunk, byte offset, cause) is kept
 *    on the handle that failed and read with the handle's errmsg function; it
 *    is also sent to the log callback, if one is set.
 *  - The library never exits, aborts or prints.  Diagnostics go to the log
 *    callback only.
 *  - Teardown functions accept NULL and a pointer to NULL, and clear the
 *    caller's handle.
 */
#ifndef RINGFEED_RINGFEED_H
#define RINGFEED_RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RF_BUILDING_LIBRARY) && defined(__GNUC__)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/* ---------------------------------------------------------------- version */

/* The run-time version as (major << 16) | (minor << 8) | patch; compare with
 * RF_VERSION_MAJOR etc. from <ringfeed/version.h> to detect a mismatch between
 * the header a program was built with and the library it runs with. */
RF_API unsigned rf_version(void);
/* The same as a static string, "0.1.0". */
RF_API const char *rf_version_string(void);

/* ------------------------------------------------------------ error codes */

/* Library-specific failures.  Their values are stable and lie below every
 * errno value, so a caller can tell them apart from negated errno codes. */
enum rf_error {
	RF_EFORMAT = -1000,   /* not a ringfeed shard, or an unsupported version */
	RF_ECORRUPT = -1001,  /* a size, offset, count or value in a file is invalid */
	RF_ECHECKSUM = -1002, /* a chunk's stored bytes do not match their XXH3-64 */
	RF_ESCHEMA = -1003,   /* shards disagree on the schema, or a bad schema was given */
	RF_ETRUNCATED = -1004,/* a file ends before a region it declares */
	RF_ECODEC = -1005,    /* zstd could not decode (or encode) a chunk */
	RF_ENODEVICE = -1006, /* no usable CUDA runtime or device */
	RF_ECUDA = -1007,     /* a CUDA runtime call failed; the message names it */
	RF_EMEMPLAN = -1008,  /* the memory plan does not fit the budget or the device */
	RF_EHELD = -1009,     /* the consumer holds every buffer (more than depth batches) */
	RF_ESTATE = -1010,    /* a resume state blob is corrupt or from another dataset */
	RF_ENPY = -1011,      /* a .npy file is malformed or of an unsupported kind */
	RF_EUSAGE = -1012,    /* an argument is out of range or contradicts another */
};

/* A static, human-readable name for any code returned by the library
 * (negated errno values included).  Never NULL; thread-safe. */
RF_API const char *rf_strerror(int code);

/* ---------------------------------------------------------------- logging */

enum rf_log_level {
	RF_LOG_ERROR = 0,
	RF_LOG_WARN = 1,
	RF_LOG_INFO = 2,
	RF_LOG_DEBUG = 3,
};

/* A log callback receives one complete message (no trailing newline) at a
 * time.  It may be called from any of the library's threads, concurrently
 * when the callback's owner sets one callback on several handles; it must not
 * call back into the handle that logged.  `user` is the pointer given with the
 * callback.  When no callback is set, nothing is logged. */
typedef void (*rf_log_fn)(void *user, enum rf_log_level level, const char *msg);

/* ------------------------------------------------------------ element types */

enum rf_dtype {
	RF_DTYPE_U8 = 1,
	RF_DTYPE_I8 = 2,
	RF_DTYPE_U16 = 3,
	RF_DTYPE_I16 = 4,
	RF_DTYPE_U32 = 5,
	RF_DTYPE_I32 = 6,
	RF_DTYPE_U64 = 7,
	RF_DTYPE_I64 = 8,
	RF_DTYPE_F16 = 9,
	RF_DTYPE_BF16 = 10,
	RF_DTYPE_F32 = 11,
	RF_DTYPE_F64 = 12,
	RF_DTYPE_BYTES = 13, /* opaque bytes: element size 1 */
};

/* Element size in bytes (1, 2, 4 or 8), or 0 for an unknown dtype. */
RF_API size_t rf_dtype_size(enum rf_dtype dtype);
/* The dtype's short name ("u8", "f32", "bf16", "bytes"), or NULL. */
RF_API const char *rf_dtype_name(enum rf_dtype dtype);
/* Parse a short name; returns 0 and sets *out, or RF_EUSAGE. */
RF_API int rf_dtype_parse(const char *name, enum rf_dtype *out);

/* ---------------------------------------------------------------- loader */
/* (The streaming loader API follows in this section.) */

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_RINGFEED_H */
