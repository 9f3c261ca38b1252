/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by every part of the library. */
#ifndef RF_COMMON_H
#define RF_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed/ringfeed.h"

/* A message's room: the longest (the process budget's refusal, with the
 * memory plan's own words inside) fits whole. */
#define RF_ERRMSG_MAX 2048

#if defined(__GNUC__)
#define RF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define RF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RF_PRINTF(a, b)
#define RF_UNLIKELY(x) (x)
#endif

#define RF_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t)(a) - 1))

/* A message buffer on a handle plus the handle's logger. */
typedef struct rf_diag {
	char msg[RF_ERRMSG_MAX];
	rf_log_fn log;
	void *log_user;
	int min_level; /* messages above this level are dropped; RINGFEED_LOG */
	int errors_quiet; /* rf_fail records without logging: the owner passes
	                     the message on through its own diag, which logs */
} rf_diag;

/* Initialise from a logger; reads RINGFEED_LOG (error|warn|info|debug) for
 * the level, default info. */
void rf_diag_init(rf_diag *d, rf_log_fn log, void *user);

/* Format the message into d->msg, send it to the log at RF_LOG_ERROR, and
 * return `code` so a caller can write `return rf_fail(d, RF_ECORRUPT, ...)`. */
int rf_fail(rf_diag *d, int code, const char *fmt, ...) RF_PRINTF(3, 4);

/* Send a message to the log (no effect on d->msg). */
void rf_log(const rf_diag *d, enum rf_log_level level, const char *fmt, ...) RF_PRINTF(3, 4);

/* The constructors' argument rule (src/config_check.c): -EINVAL for a NULL
 * or foreign handle or out-pointer, RF_EUSAGE for a bad value.  A public
 * settings struct (first member: uint32_t size) is checked with
 * RF_CONFIG_SIZE_CHECK before any other byte of it is read, its log
 * callback included: RF_EUSAGE when the size is not `expected` ("call
 * INIT_FN") or a reserved byte is not 0, the message in d->msg and not
 * logged (the callback belongs to the struct in doubt); 0 when the struct
 * may be read.  `who` starts the message ("loader", a path, ...). */
int rf_config_size_check(rf_diag *d, const char *who, const void *cfg, size_t expected,
			 size_t reserved_at, size_t reserved_len, const char *init_fn);
#define RF_CONFIG_SIZE_CHECK(d, who, cfg, init_fn)                                         \
	rf_config_size_check((d), (who), (cfg), sizeof(*(cfg)),                           \
			     offsetof(__typeof__(*(cfg)), reserved), sizeof((cfg)->reserved), \
			     (init_fn))

/* Name tables indexed by an enum's value (src/names.c): the name of
 * `value`, or NULL outside [0, n); the index of `name`, or -1 (NULL name
 * included).  One lookup for every table of names in the library. */
const char *rf_name_of(const char *const *names, size_t n, int value);
int rf_name_find(const char *const *names, size_t n, const char *name);

/* Make room for `need` more open files: when the open-file soft limit
 * (RLIMIT_NOFILE) cannot hold them beside the descriptors already open plus a
 * small spare, raise it as far as needed (never past the hard limit) and log
 * that at RF_LOG_INFO.  Returns 0, or -EMFILE with a message naming `what`
 * when even the hard limit cannot hold the files themselves.  Shards each
 * keep a descriptor open, and the soft limit is often 1024 while the hard
 * limit is far higher. */
int rf_fd_reserve(uint64_t need, const char *what, rf_diag *d);

/* Descriptors open in this process now, or 0 when /proc cannot tell. */
uint64_t rf_fds_open(void);

/* Checked arithmetic: return 0 on success, -1 on overflow. */
static inline int
rf_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int
rf_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Little-endian loads and stores (the format is little-endian; these work on
 * any host and any alignment). */
static inline uint64_t
rf_le64(const void *p)
{
	const uint8_t *b = p;
	return (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24 |
	       (uint64_t)b[4] << 32 | (uint64_t)b[5] << 40 | (uint64_t)b[6] << 48 | (uint64_t)b[7] << 56;
}

static inline uint32_t
rf_le32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline void
rf_put_le64(void *p, uint64_t v)
{
	uint8_t *b = p;
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline void
rf_put_le32(void *p, uint32_t v)
{
	uint8_t *b = p;
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

#endif
