/* SPDX-License-Identifier: MIT */
/*
 * The cudart emulator: configuration, devices, errors, hazards, counters
 * and the exit report.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

struct emu_state g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

_Thread_local int emu_tls_device;
_Thread_local bool emu_tls_in_host_func;
/* cudaGetLastError's state is per host thread, as in cudart. */
static _Thread_local cudaError_t tls_last_error;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool inited;

uint64_t
emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- configuration ------------------------------------------------------ */

/* A size with an optional K/M/G/T suffix; `binary` picks 1024 (memory
 * sizes: 16G is a 16 GiB card) or 1000 (bandwidths: 12G is 12 GB/s). */
static int
parse_amount(const char *s, bool binary, double *out)
{
	char *end;
	double v, k = binary ? 1024.0 : 1000.0;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0) || isinf(v))
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v *= k; end++; break;
	case 'm': case 'M': v *= k * k; end++; break;
	case 'g': case 'G': v *= k * k * k; end++; break;
	case 't': case 'T': v *= k * k * k * k; end++; break;
	default: break;
	}
	/* Tolerate "GB", "GiB", "GB/s": the letters after the multiplier
	 * carry no meaning here. */
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (end[0] == '/' && end[1] == 's')
		end += 2;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A duration: a number with ns, us, ms or s (no unit: seconds). */
static int
parse_duration(const char *s, uint64_t *out_ns)
{
	char *end;
	double v, mul = 1e9;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0) || isinf(v))
		return -EINVAL;
	if (!strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "s") || !*end)
		mul = 1e9;
	else
		return -EINVAL;
	if (v * mul > 1e18)
		return -EINVAL;
	*out_ns = (uint64_t)(v * mul);
	return 0;
}

static int
parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Applies one setting; the caller holds g.lock (or runs before any other
 * thread can see the state). */
static int
apply_option(struct emu_config *cfg, const char *name, const char *value)
{
	double d;
	long l;
	uint64_t ns;

	if (!strcmp(name, "RINGFEED_EMU_VRAM")) {
		if (parse_amount(value, true, &d) || d < 1 || d > 1e18)
			return -EINVAL;
		cfg->vram = (uint64_t)d;
	} else if (!strcmp(name, "RINGFEED_EMU_RESERVED")) {
		if (parse_amount(value, true, &d) || d > 1e18)
			return -EINVAL;
		cfg->reserved = (uint64_t)d;
	} else if (!strcmp(name, "RINGFEED_EMU_BW")) {
		if (parse_amount(value, false, &d))
			return -EINVAL;
		cfg->bw = d;
	} else if (!strcmp(name, "RINGFEED_EMU_D2D_BW")) {
		if (parse_amount(value, false, &d))
			return -EINVAL;
		cfg->d2d_bw = d;
	} else if (!strcmp(name, "RINGFEED_EMU_JITTER")) {
		/* "0.2": up to 20% of the nominal duration; "50us": up to 50 us. */
		char *end;

		errno = 0;
		d = strtod(value, &end);
		if (!errno && end != value && !*end && d >= 0 && d <= 100) {
			cfg->jitter = d;
			cfg->jitter_ns = 0;
		} else if (!parse_duration(value, &ns) && ns > 0) {
			cfg->jitter = 0;
			cfg->jitter_ns = ns;
		} else {
			return -EINVAL;
		}
	} else if (!strcmp(name, "RINGFEED_EMU_LATENCY")) {
		if (parse_duration(value, &ns))
			return -EINVAL;
		cfg->latency_ns = ns;
	} else if (!strcmp(name, "RINGFEED_EMU_SEED")) {
		if (parse_int(value, 0, 0x7fffffffL, &l))
			return -EINVAL;
		cfg->seed = (uint64_t)l;
	} else if (!strcmp(name, "RINGFEED_EMU_STRICT")) {
		if (parse_int(value, 0, 1, &l))
			return -EINVAL;
		cfg->strict = l;
	} else if (!strcmp(name, "RINGFEED_EMU_DEVICES")) {
		if (parse_int(value, 0, EMU_MAX_DEVICES, &l))
			return -EINVAL;
		cfg->devices = (int)l;
	} else if (!strcmp(name, "RINGFEED_EMU_DRIVER_VERSION")) {
		if (parse_int(value, 0, 1000000, &l))
			return -EINVAL;
		cfg->driver_version = (int)l;
	} else if (!strcmp(name, "RINGFEED_EMU_PINNED_LIMIT")) {
		if (parse_amount(value, true, &d) || d > 1e18)
			return -EINVAL;
		cfg->pinned_limit = (uint64_t)d;
	} else if (!strcmp(name, "RINGFEED_EMU_REGISTER_BW")) {
		if (parse_amount(value, false, &d))
			return -EINVAL;
		cfg->register_bw = d;
	} else if (!strcmp(name, "RINGFEED_EMU_EXIT_STATUS")) {
		if (parse_int(value, 0, 255, &l))
			return -EINVAL;
		cfg->exit_status = (int)l;
	} else if (!strcmp(name, "RINGFEED_EMU_WAIT_LIMIT")) {
		if (parse_duration(value, &ns))
			return -EINVAL;
		cfg->wait_limit_ns = ns;
	} else if (!strcmp(name, "RINGFEED_EMU_REPORT")) {
		if (parse_int(value, 0, 1, &l))
			return -EINVAL;
		cfg->report = l;
	} else {
		return -EINVAL;
	}
	return 0;
}

static const char *const option_names[] = {
	"RINGFEED_EMU_VRAM", "RINGFEED_EMU_RESERVED", "RINGFEED_EMU_BW",
	"RINGFEED_EMU_D2D_BW", "RINGFEED_EMU_JITTER", "RINGFEED_EMU_LATENCY",
	"RINGFEED_EMU_SEED", "RINGFEED_EMU_STRICT", "RINGFEED_EMU_DEVICES",
	"RINGFEED_EMU_DRIVER_VERSION", "RINGFEED_EMU_PINNED_LIMIT",
	"RINGFEED_EMU_REGISTER_BW", "RINGFEED_EMU_EXIT_STATUS",
	"RINGFEED_EMU_REPORT", "RINGFEED_EMU_WAIT_LIMIT",
};

static void
init(void)
{
	struct emu_config *cfg = &g.cfg;

	cfg->vram = 16ull << 30;	/* a Colab T4 */
	cfg->reserved = 0;
	cfg->bw = 12e9;			/* PCIe 3.0 x16, pinned, as measured */
	cfg->d2d_bw = 300e9;		/* T4 on-card bandwidth */
	cfg->jitter = 0.1;
	cfg->jitter_ns = 0;
	cfg->latency_ns = 0;
	cfg->seed = 1;
	cfg->strict = false;
	cfg->devices = 1;
#ifdef RFEMU_DEFAULT_DRIVER_VERSION
	/* The old-driver build: a runtime that loads but cannot start. */
	cfg->driver_version = RFEMU_DEFAULT_DRIVER_VERSION;
#else
	cfg->driver_version = CUDART_VERSION;
#endif
	cfg->pinned_limit = 0;
	cfg->register_bw = 0;
	cfg->exit_status = 1;
	cfg->report = false;

	/* A bad value is a broken test setup: say which and stop, rather than
	 * run a test under settings it did not ask for. */
	for (size_t i = 0; i < sizeof(option_names) / sizeof(option_names[0]); i++) {
		const char *v = getenv(option_names[i]);

		if (v && apply_option(cfg, option_names[i], v)) {
			fprintf(stderr, "cudart-emulator: bad value %s=%s (see tests/cuda-emulator/README.md)\n",
				option_names[i], v);
			abort();
		}
	}
	g.c.size = sizeof(g.c);
	g.c.version = RFEMU_COUNTERS_VERSION;
	inited = true;
}

void
emu_init_once(void)
{
	pthread_once(&init_once, init);
}

/* --- errors ------------------------------------------------------------- */

cudaError_t
emu_ret(cudaError_t err)
{
	/* cudaErrorNotReady reports progress, not failure: cudart leaves the
	 * last error alone for it too. */
	if (err != cudaSuccess && err != cudaErrorNotReady) {
		tls_last_error = err;
		EMU_LOCK();
		g.c.api_errors++;
		EMU_UNLOCK();
	}
	return err;
}

static cudaError_t
driver_state(void)
{
	int drv, ndev;

	EMU_LOCK();
	drv = g.cfg.driver_version;
	ndev = g.cfg.devices;
	EMU_UNLOCK();
	if (drv == 0)
		return cudaErrorInsufficientDriver;
	if (ndev == 0)
		return cudaErrorNoDevice;
	return cudaSuccess;
}

cudaError_t
emu_enter(const char *fn)
{
	emu_init_once();
	if (emu_tls_in_host_func) {
		EMU_LOCK();
		emu_hazard(RFEMU_HAZARD_API_IN_HOST_FUNC,
			"%s called from a host function (CUDA forbids CUDA calls there)", fn);
		EMU_UNLOCK();
		return cudaErrorNotPermitted;
	}
	return driver_state();
}

struct err_entry {
	cudaError_t code;
	const char *name;
	const char *text;
};

/* The codes the emulator returns, with cudart's names and messages. */
static const struct err_entry err_table[] = {
	{ cudaSuccess, "cudaSuccess", "no error" },
	{ cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
	{ cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
	{ cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
	{ cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
	{ cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy" },
	{ cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
		"CUDA driver version is insufficient for CUDA runtime version" },
	{ cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
	{ cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
	{ cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
	{ cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered" },
	{ cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
		"part or all of the requested memory range is already mapped" },
	{ cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
		"pointer does not correspond to a registered memory region" },
	{ cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state" },
	{ cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted" },
	{ cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
	{ cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

static const struct err_entry *
err_find(cudaError_t e)
{
	for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
		if (err_table[i].code == e)
			return &err_table[i];
	return NULL;
}

EMU_EXPORT const char *
cudaGetErrorName(cudaError_t error)
{
	const struct err_entry *e = err_find(error);

	return e ? e->name : "unrecognized error code";
}

EMU_EXPORT const char *
cudaGetErrorString(cudaError_t error)
{
	const struct err_entry *e = err_find(error);

	return e ? e->text : "unrecognized error code";
}

EMU_EXPORT cudaError_t
cudaGetLastError(void)
{
	cudaError_t e = tls_last_error;

	tls_last_error = cudaSuccess;
	return e;
}

EMU_EXPORT cudaError_t
cudaPeekAtLastError(void)
{
	return tls_last_error;
}

/* --- hazards and counters ------------------------------------------------ */

static const char *const hazard_names[RFEMU_HAZARD_COUNT] = {
	[RFEMU_HAZARD_SOURCE_MODIFIED] = "source_modified",
	[RFEMU_HAZARD_UNREGISTER_PENDING] = "unregister_pending",
	[RFEMU_HAZARD_FREEHOST_PENDING] = "freehost_pending",
	[RFEMU_HAZARD_FREE_PENDING] = "free_pending",
	[RFEMU_HAZARD_OVERWRITE_IN_USE] = "overwrite_in_use",
	[RFEMU_HAZARD_READ_BEFORE_READY] = "read_before_ready",
	[RFEMU_HAZARD_WRITE_WRITE] = "write_write",
	[RFEMU_HAZARD_API_IN_HOST_FUNC] = "api_in_host_func",
	[RFEMU_HAZARD_BAD_HANDLE] = "bad_handle",
	[RFEMU_HAZARD_LEAK_AT_EXIT] = "leak_at_exit",
};

EMU_EXPORT const char *
rfemu_hazard_name(int kind)
{
	if (kind < 0 || kind >= RFEMU_HAZARD_COUNT)
		return "unknown";
	return hazard_names[kind];
}

/* Counts and prints a hazard; the caller holds g.lock. */
void
emu_hazard(enum rfemu_hazard kind, const char *fmt, ...)
{
	va_list ap;

	/* Every hazard is printed up to a bound, so a test committing
	 * thousands of them does not drown the log. */
	if (g.hazard_lines < 200) {
		char buf[512];

		va_start(ap, fmt);
		vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		fprintf(stderr, "cudart-emulator: HAZARD %s: %s\n", hazard_names[kind], buf);
	} else if (g.hazard_lines == 200) {
		fprintf(stderr, "cudart-emulator: further hazards are counted, not printed\n");
	}
	g.hazard_lines++;
	g.c.hazards[kind]++;
	g.c.hazards_total++;
	if (g.cfg.strict) {
		fprintf(stderr, "cudart-emulator: RINGFEED_EMU_STRICT=1: aborting on the first hazard\n");
		abort();
	}
}

void
emu_update_pinned_peaks(void)
{
	uint64_t pinned = g.c.registered_bytes + g.c.host_alloc_bytes;

	if (g.c.registered_bytes > g.c.peak_registered_bytes)
		g.c.peak_registered_bytes = g.c.registered_bytes;
	if (g.c.host_alloc_bytes > g.c.peak_host_alloc_bytes)
		g.c.peak_host_alloc_bytes = g.c.host_alloc_bytes;
	if (pinned > g.c.peak_pinned_bytes)
		g.c.peak_pinned_bytes = pinned;
}

static uint64_t
count_blocks(const struct emu_block *b)
{
	uint64_t n = 0;

	for (; b; b = b->next)
		n++;
	return n;
}

static void
fill_live_locked(void)
{
	uint64_t streams = 0, events = 0;

	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		if (!s->implicit && !s->destroyed)
			streams++;
	for (struct emu_event *e = g.events; e; e = e->next_all)
		if (!e->destroyed)
			events++;
	g.c.live_streams = streams;
	g.c.live_events = events;
	g.c.live_allocations = count_blocks(g.dev_allocs);
	g.c.live_host_allocs = count_blocks(g.host_allocs);
	g.c.live_registered_ranges = count_blocks(g.regs);
	g.c.worker_threads = emu_worker_threads();
	g.c.pending_ops = emu_pending_ops();
}

EMU_EXPORT int
rfemu_get_counters(struct rfemu_counters *out, size_t size)
{
	if (!out || size < 8)
		return -EINVAL;
	emu_init_once();
	/* Join workers of destroyed streams first, so worker_threads counts
	 * only threads that can still run. */
	emu_reap();
	EMU_LOCK();
	fill_live_locked();
	memcpy(out, &g.c, size < sizeof(g.c) ? size : sizeof(g.c));
	EMU_UNLOCK();
	return 0;
}

EMU_EXPORT void
rfemu_reset_counters(void)
{
	emu_init_once();
	EMU_LOCK();
	g.c.copies = g.c.bytes_copied = g.c.bytes_h2d = g.c.bytes_d2h = g.c.bytes_d2d = 0;
	g.c.pageable_copies = g.c.pageable_h2d = g.c.host_funcs = 0;
	memset(g.c.hazards, 0, sizeof(g.c.hazards));
	g.c.hazards_total = 0;
	g.c.api_errors = 0;
	g.c.peak_device_bytes = g.c.device_bytes;
	g.c.peak_registered_bytes = g.c.registered_bytes;
	g.c.peak_host_alloc_bytes = g.c.host_alloc_bytes;
	g.c.peak_pinned_bytes = g.c.registered_bytes + g.c.host_alloc_bytes;
	g.hazard_lines = 0;
	EMU_UNLOCK();
}

EMU_EXPORT int
rfemu_set_option(const char *name, const char *value)
{
	int ret;

	if (!name || !value)
		return -EINVAL;
	emu_init_once();
	EMU_LOCK();
	ret = apply_option(&g.cfg, name, value);
	EMU_UNLOCK();
	return ret;
}

static void
report_locked(const char *why)
{
	const struct rfemu_counters *c = &g.c;

	fill_live_locked();
	fprintf(stderr, "cudart-emulator: report (%s)\n", why);
	fprintf(stderr, "  copies %llu, bytes %llu (h2d %llu, d2h %llu, d2d %llu), pageable copies %llu (h2d %llu), host functions %llu\n",
		(unsigned long long)c->copies, (unsigned long long)c->bytes_copied,
		(unsigned long long)c->bytes_h2d, (unsigned long long)c->bytes_d2h,
		(unsigned long long)c->bytes_d2d, (unsigned long long)c->pageable_copies,
		(unsigned long long)c->pageable_h2d, (unsigned long long)c->host_funcs);
	fprintf(stderr, "  peak device bytes %llu, peak registered bytes %llu, peak host-allocated bytes %llu, peak pinned bytes %llu\n",
		(unsigned long long)c->peak_device_bytes, (unsigned long long)c->peak_registered_bytes,
		(unsigned long long)c->peak_host_alloc_bytes, (unsigned long long)c->peak_pinned_bytes);
	fprintf(stderr, "  hazards %llu", (unsigned long long)c->hazards_total);
	for (int k = 0; k < RFEMU_HAZARD_COUNT; k++)
		if (c->hazards[k])
			fprintf(stderr, ", %s %llu", hazard_names[k], (unsigned long long)c->hazards[k]);
	fprintf(stderr, "\n");
	fprintf(stderr, "  live: %llu device allocations (%llu bytes), %llu host allocations (%llu bytes), %llu registered ranges (%llu bytes), %llu streams, %llu events, %llu pending operations\n",
		(unsigned long long)c->live_allocations, (unsigned long long)c->device_bytes,
		(unsigned long long)c->live_host_allocs, (unsigned long long)c->host_alloc_bytes,
		(unsigned long long)c->live_registered_ranges, (unsigned long long)c->registered_bytes,
		(unsigned long long)c->live_streams, (unsigned long long)c->live_events,
		(unsigned long long)c->pending_ops);
	for (struct emu_block *b = g.dev_allocs; b; b = b->next)
		fprintf(stderr, "  live device allocation %p, %zu bytes (device %d)\n",
			(void *)b->r.lo, (size_t)(b->r.hi - b->r.lo), b->device);
	for (struct emu_block *b = g.host_allocs; b; b = b->next)
		fprintf(stderr, "  live pinned host allocation %p, %zu bytes\n",
			(void *)b->r.lo, (size_t)(b->r.hi - b->r.lo));
	for (struct emu_block *b = g.regs; b; b = b->next)
		fprintf(stderr, "  live registered range %p, %zu bytes\n",
			(void *)b->r.lo, (size_t)(b->r.hi - b->r.lo));
	for (struct emu_stream *s = g.streams; s; s = s->next_all)
		if (!s->implicit && !s->destroyed)
			fprintf(stderr, "  live stream %p (#%u), %llu operations pending\n",
				(void *)s, s->id, (unsigned long long)(s->enqueued - s->done));
	for (struct emu_event *e = g.events; e; e = e->next_all)
		if (!e->destroyed)
			fprintf(stderr, "  live event %p (#%u)\n", (void *)e, e->id);
	emu_describe_streams(stderr);
}

/*
 * A host thread waiting for the device, g.lock held.  Under
 * RINGFEED_EMU_WAIT_LIMIT a wait that outlasts the limit is taken for a
 * deadlock (an event that is never recorded, a host function that never
 * returns): the report shows what every stream is blocked on, then the
 * process aborts, instead of hanging until the test harness kills it with
 * nothing to show.
 */
void
emu_host_wait(uint64_t since_ns, const char *what)
{
	struct timespec ts;

	if (!g.cfg.wait_limit_ns) {
		pthread_cond_wait(&g.cond, &g.lock);
		return;
	}
	/* g.cond uses CLOCK_REALTIME; wake every 50 ms to look at the
	 * monotonic clock. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 50 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&g.cond, &g.lock, &ts);
	if (emu_now_ns() - since_ns > g.cfg.wait_limit_ns) {
		fprintf(stderr, "cudart-emulator: %s has waited longer than RINGFEED_EMU_WAIT_LIMIT: a deadlock?\n",
			what);
		report_locked("wait limit");
		abort();
	}
}

EMU_EXPORT void
rfemu_report(void)
{
	emu_init_once();
	EMU_LOCK();
	report_locked("on request");
	EMU_UNLOCK();
}

/*
 * At exit: anything still allocated, registered or created is a leak
 * (invariant 6 of the design).  It is counted, reported, and, unless
 * RINGFEED_EMU_EXIT_STATUS=0, turns the process's exit status into a
 * failure, as are hazards nobody acknowledged with rfemu_reset_counters():
 * a test that never reads the counters still fails.  The library is linked
 * with -z nodelete, so this runs at process exit, never at a dlclose.
 */
__attribute__((destructor)) static void
emu_fini(void)
{
	uint64_t leaks;
	int status;

	if (!inited)
		return;
	EMU_LOCK();
	fill_live_locked();
	leaks = g.c.live_allocations + g.c.live_host_allocs + g.c.live_registered_ranges +
		g.c.live_streams + g.c.live_events;
	if (leaks) {
		g.c.hazards[RFEMU_HAZARD_LEAK_AT_EXIT] += leaks;
		g.c.hazards_total += leaks;
	}
	if (g.c.hazards_total || g.cfg.report)
		report_locked("at exit");
	status = g.c.hazards_total ? g.cfg.exit_status : 0;
	if (leaks && g.cfg.strict) {
		fprintf(stderr, "cudart-emulator: RINGFEED_EMU_STRICT=1: aborting on leaks at exit\n");
		abort();
	}
	EMU_UNLOCK();
	if (status) {
		fprintf(stderr, "cudart-emulator: exit status %d: hazards or leaks (RINGFEED_EMU_EXIT_STATUS=0 keeps the program's own)\n",
			status);
		fflush(NULL);
		_exit(status);
	}
}

/* --- devices ------------------------------------------------------------- */

EMU_EXPORT cudaError_t
cudaDriverGetVersion(int *driverVersion)
{
	emu_init_once();
	if (!driverVersion)
		return emu_ret(cudaErrorInvalidValue);
	EMU_LOCK();
	/* 0 when no driver is installed, as cudart reports it. */
	*driverVersion = g.cfg.driver_version;
	EMU_UNLOCK();
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaRuntimeGetVersion(int *runtimeVersion)
{
	emu_init_once();
	if (!runtimeVersion)
		return emu_ret(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaGetDeviceCount(int *count)
{
	cudaError_t e;

	emu_init_once();
	if (emu_tls_in_host_func)
		return emu_ret(emu_enter(__func__));
	if (!count)
		return emu_ret(cudaErrorInvalidValue);
	e = driver_state();
	EMU_LOCK();
	*count = e == cudaSuccess ? g.cfg.devices : 0;
	EMU_UNLOCK();
	return emu_ret(e);
}

EMU_EXPORT cudaError_t
cudaSetDevice(int device)
{
	int n;

	EMU_ENTER();
	EMU_LOCK();
	n = g.cfg.devices;
	EMU_UNLOCK();
	if (device < 0 || device >= n)
		return emu_ret(cudaErrorInvalidDevice);
	emu_tls_device = device;
	return cudaSuccess;
}

EMU_EXPORT cudaError_t
cudaGetDevice(int *device)
{
	EMU_ENTER();
	if (!device)
		return emu_ret(cudaErrorInvalidValue);
	*device = emu_tls_device;
	return cudaSuccess;
}

static void
fill_props(struct cudaDeviceProp *p, int device, uint64_t vram)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "Tesla T4 (ringfeed cudart emulator)");
	for (size_t i = 0; i < sizeof(p->uuid.bytes); i++)
		p->uuid.bytes[i] = (char)(0x40 + device + (int)i);
	p->totalGlobalMem = (size_t)vram;
	p->sharedMemPerBlock = 48 << 10;
	p->regsPerBlock = 65536;
	p->warpSize = 32;
	p->memPitch = (size_t)1 << 31;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = 1024;
	p->maxThreadsDim[1] = 1024;
	p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 0x7fffffff;
	p->maxGridSize[1] = 65535;
	p->maxGridSize[2] = 65535;
	p->totalConstMem = 64 << 10;
	p->major = 7;
	p->minor = 5;
	p->textureAlignment = 512;
	p->texturePitchAlignment = 32;
	p->multiProcessorCount = 40;
	p->canMapHostMemory = 1;
	p->concurrentKernels = 1;
	p->pciBusID = device;
	p->asyncEngineCount = 3;
	p->unifiedAddressing = 1;
	p->memoryBusWidth = 256;
	p->l2CacheSize = 4 << 20;
	p->maxThreadsPerMultiProcessor = 1024;
	p->streamPrioritiesSupported = 1;
	p->sharedMemPerMultiprocessor = 64 << 10;
	p->regsPerMultiprocessor = 65536;
	p->managedMemory = 1;
	p->hostRegisterSupported = 1;
	p->hostRegisterReadOnlySupported = 1;
	p->maxBlocksPerMultiProcessor = 16;
}

EMU_EXPORT cudaError_t
cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	int n;
	uint64_t vram;

	EMU_ENTER();
	if (!prop)
		return emu_ret(cudaErrorInvalidValue);
	EMU_LOCK();
	n = g.cfg.devices;
	vram = g.cfg.vram;
	EMU_UNLOCK();
	if (device < 0 || device >= n)
		return emu_ret(cudaErrorInvalidDevice);
	fill_props(prop, device, vram);
	return cudaSuccess;
}

/* CUDA 12's headers renamed cudaGetDeviceProperties to
 * cudaGetDeviceProperties_v2 (libcudart.so.12 exports both); a backend that
 * looks up either name finds the same function here. */
EMU_EXPORT cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
	__attribute__((alias("cudaGetDeviceProperties")));

EMU_EXPORT cudaError_t
cudaMemGetInfo(size_t *free, size_t *total)
{
	int dev = emu_tls_device;
	uint64_t used, cap;

	EMU_ENTER();
	if (!free || !total)
		return emu_ret(cudaErrorInvalidValue);
	EMU_LOCK();
	cap = g.cfg.vram;
	used = g.dev_used[dev] + g.cfg.reserved;
	EMU_UNLOCK();
	*total = (size_t)cap;
	*free = (size_t)(used < cap ? cap - used : 0);
	return cudaSuccess;
}
