/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "common.h"

RF_API unsigned
rf_version(void)
{
	return (RF_VERSION_MAJOR << 16) | (RF_VERSION_MINOR << 8) | RF_VERSION_PATCH;
}

#define RF_STR_(x) #x
#define RF_STR(x) RF_STR_(x)

RF_API const char *
rf_version_string(void)
{
	return RF_STR(RF_VERSION_MAJOR) "." RF_STR(RF_VERSION_MINOR) "." RF_STR(RF_VERSION_PATCH);
}

RF_API const char *
rf_strerror(int code)
{
	switch (code) {
	case 0: return "success";
	case RF_EFORMAT: return "not a ringfeed shard or unsupported format version";
	case RF_ECORRUPT: return "corrupt data: invalid size, offset, count or value";
	case RF_ECHECKSUM: return "checksum mismatch";
	case RF_ESCHEMA: return "invalid or mismatched schema";
	case RF_ETRUNCATED: return "file is truncated";
	case RF_ECODEC: return "compression codec error";
	case RF_ENODEVICE: return "no usable CUDA runtime or device";
	case RF_ECUDA: return "CUDA runtime error";
	case RF_EMEMPLAN: return "memory plan does not fit";
	case RF_EHELD: return "consumer holds every buffer";
	case RF_ESTATE: return "invalid resume state";
	case RF_ENPY: return "malformed or unsupported .npy file";
	case RF_EUSAGE: return "usage error: a setting is out of range or contradicts another";
	case RF_EFORK: return "loader used in a child of fork()";
	default: break;
	}
	if (code < 0 && code > -4096) {
		/* strerror is not guaranteed thread-safe; strerrordesc_np is
		 * (glibc >= 2.32) and returns a static string. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
		const char *s = strerrordesc_np(-code);
		if (s)
			return s;
#else
		switch (-code) {
		case ENOMEM: return "Cannot allocate memory";
		case EIO: return "Input/output error";
		case ENOENT: return "No such file or directory";
		case EINVAL: return "Invalid argument";
		case EAGAIN: return "Resource temporarily unavailable";
		default: break;
		}
#endif
	}
	return "unknown error";
}

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[RF_DTYPE_U8] = {"u8", 1},     [RF_DTYPE_I8] = {"i8", 1},
	[RF_DTYPE_U16] = {"u16", 2},   [RF_DTYPE_I16] = {"i16", 2},
	[RF_DTYPE_U32] = {"u32", 4},   [RF_DTYPE_I32] = {"i32", 4},
	[RF_DTYPE_U64] = {"u64", 8},   [RF_DTYPE_I64] = {"i64", 8},
	[RF_DTYPE_F16] = {"f16", 2},   [RF_DTYPE_BF16] = {"bf16", 2},
	[RF_DTYPE_F32] = {"f32", 4},   [RF_DTYPE_F64] = {"f64", 8},
	[RF_DTYPE_BYTES] = {"bytes", 1},
};

RF_API size_t
rf_dtype_size(enum rf_dtype dtype)
{
	if ((int)dtype < RF_DTYPE_U8 || (int)dtype > RF_DTYPE_BYTES)
		return 0;
	return dtypes[dtype].size;
}

RF_API const char *
rf_dtype_name(enum rf_dtype dtype)
{
	if ((int)dtype < RF_DTYPE_U8 || (int)dtype > RF_DTYPE_BYTES)
		return NULL;
	return dtypes[dtype].name;
}

RF_API int
rf_dtype_parse(const char *name, enum rf_dtype *out)
{
	for (int i = RF_DTYPE_U8; i <= RF_DTYPE_BYTES; i++) {
		if (strcmp(name, dtypes[i].name) == 0) {
			*out = (enum rf_dtype)i;
			return 0;
		}
	}
	return RF_EUSAGE;
}

void
rf_diag_init(rf_diag *d, rf_log_fn log, void *user)
{
	d->msg[0] = '\0';
	d->log = log;
	d->log_user = user;
	d->errors_quiet = 0;
	d->min_level = RF_LOG_INFO;
	const char *env = getenv("RINGFEED_LOG");
	if (env) {
		if (strcasecmp(env, "error") == 0)
			d->min_level = RF_LOG_ERROR;
		else if (strcasecmp(env, "warn") == 0)
			d->min_level = RF_LOG_WARN;
		else if (strcasecmp(env, "info") == 0)
			d->min_level = RF_LOG_INFO;
		else if (strcasecmp(env, "debug") == 0)
			d->min_level = RF_LOG_DEBUG;
	}
}

int
rf_fail(rf_diag *d, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof d->msg, fmt, ap);
	va_end(ap);
	if (d->log && !d->errors_quiet)
		d->log(d->log_user, RF_LOG_ERROR, d->msg);
	return code;
}

void
rf_log(const rf_diag *d, enum rf_log_level level, const char *fmt, ...)
{
	if (!d->log || (int)level > d->min_level)
		return;
	char buf[RF_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	d->log(d->log_user, level, buf);
}

uint64_t
rf_fds_open(void)
{
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return 0;
	uint64_t n = 0;
	const struct dirent *e;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n > 0 ? n - 1 : 0; /* less the directory's own */
}

int
rf_fd_reserve(uint64_t need, const char *what, rf_diag *d)
{
	/* The spare leaves room for what the training program opens next
	 * (a checkpoint, a log, a socket) and for io_uring's own descriptor. */
	enum { SPARE = 64 };
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	uint64_t have = rf_fds_open();
	uint64_t want = have + need + SPARE;
	if (want <= (uint64_t)rl.rlim_cur)
		return 0;
	/* The spare is a wish: only the files themselves must fit. */
	if (rl.rlim_max != RLIM_INFINITY && want > (uint64_t)rl.rlim_max)
		want = (uint64_t)rl.rlim_max;
	if (want < have + need)
		return rf_fail(d, -EMFILE,
			       "%s: %" PRIu64 " files to open beside the %" PRIu64
			       " already open, above the hard open-file limit %" PRIu64
			       " (raise it, as with ulimit -Hn, or pack fewer, larger shards)",
			       what, need, have, (uint64_t)rl.rlim_max);
	uint64_t old = (uint64_t)rl.rlim_cur;
	if (want <= old)
		return 0;
	rl.rlim_cur = (rlim_t)want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		int e = -errno;
		return rf_fail(d, -EMFILE,
			       "%s: %" PRIu64 " files to open beside the %" PRIu64
			       " already open, above the open-file limit %" PRIu64
			       " that could not be raised (%s)",
			       what, need, have, old, rf_strerror(e));
	}
	rf_log(d, RF_LOG_INFO, "%s: raised the open-file soft limit from %" PRIu64 " to %" PRIu64
	       " for %" PRIu64 " files", what, old, want, need);
	return 0;
}
