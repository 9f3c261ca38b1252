/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

const char *rf_cli_prog = "ringfeed";
int rf_cli_verbosity = 1;

/* ------------------------------------------------------------ numbers */

int
rf_cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -ERANGE;
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Suffixes are powers of 1024 whatever their spelling: a user who types
 * "64M" for a chunk size means 64 MiB, and the K/KB/KiB distinction only
 * invites mistakes (the same choice as zstd's command line). */
int
rf_cli_parse_size(const char *s, uint64_t *out)
{
	static const struct {
		char letter;
		unsigned shift;
	} units[] = {{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}, {'P', 50}, {'E', 60}};
	uint64_t v = 0;
	const char *p = s;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -ERANGE;
	}
	if (*p) {
		char c = *p;
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (c == 'B') {
			p++;
		} else {
			size_t i;
			for (i = 0; i < sizeof units / sizeof units[0]; i++)
				if (units[i].letter == c)
					break;
			if (i == sizeof units / sizeof units[0])
				return -EINVAL;
			shift = units[i].shift;
			p++;
			/* Accept K, KB, KiB (any case of the i and the B). */
			if (*p == 'i' || *p == 'I') {
				p++;
				if (*p != 'B' && *p != 'b')
					return -EINVAL;
			}
			if (*p == 'B' || *p == 'b')
				p++;
		}
		if (*p)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

const char *
rf_cli_fmt_bytes(char *buf, size_t cap, double bytes)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;

	while (bytes >= 1024.0 && u + 1 < sizeof unit / sizeof unit[0]) {
		bytes /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%.0f B", bytes);
	else
		snprintf(buf, cap, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, unit[u]);
	return buf;
}

/* ------------------------------------------------------------ messages */

void
rf_cli_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", rf_cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void
rf_cli_note(int level, const char *fmt, ...)
{
	va_list ap;

	if (rf_cli_verbosity < level)
		return;
	fprintf(stderr, "%s: ", rf_cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
rf_cli_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", rf_cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", usage);
	fprintf(stderr, "Try '%s --help' for more information.\n", rf_cli_prog);
	return RF_CLI_USAGE;
}

/* Called after getopt_long returned '?' or ':' (opterr = 0, an optstring
 * starting with ':').  A short option is named by optopt; a long one by the
 * word the user typed, argv[optind - 1], cut at any '='. */
int
rf_cli_bad_option(const char *usage, int c, int argc, char **argv)
{
	char name[64];
	const char *word = (optind >= 1 && optind - 1 < argc) ? argv[optind - 1] : "?";
	bool is_long = word[0] == '-' && word[1] == '-';

	if (is_long) {
		size_t n = strcspn(word, "=");
		if (n >= sizeof name)
			n = sizeof name - 1;
		memcpy(name, word, n);
		name[n] = 0;
	} else {
		snprintf(name, sizeof name, "-%c", optopt ? optopt : '?');
	}
	if (c == ':')
		return rf_cli_usage_error(usage, "option '%s' requires an argument", name);
	if (is_long && optopt && strchr(word, '='))
		return rf_cli_usage_error(usage, "option '%s' does not take an argument", name);
	return rf_cli_usage_error(usage, "unknown option '%s'", name);
}

/* ------------------------------------------------------------ progress */

double
rf_cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
rf_cli_progress_start(rf_cli_progress *p, const char *label, uint64_t total)
{
	memset(p, 0, sizeof *p);
	/* Redrawing with \r only makes sense on a terminal; piped or logged
	 * stderr stays clean. */
	p->enabled = rf_cli_verbosity >= 1 && isatty(STDERR_FILENO);
	p->total = total;
	p->start = rf_cli_now();
	p->label = label;
}

static void
progress_draw(rf_cli_progress *p, double now)
{
	char done[24], total[24], rate[24], line[160];
	double el = now - p->start;
	double bps = el > 0 ? (double)p->done / el : 0;
	int n;

	rf_cli_fmt_bytes(done, sizeof done, (double)p->done);
	rf_cli_fmt_bytes(rate, sizeof rate, bps);
	if (p->total) {
		double frac = (double)p->done / (double)p->total;
		double eta = bps > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / bps : 0;
		char bar[21];
		int fill = (int)(frac * 20.0);
		if (fill > 20)
			fill = 20;
		memset(bar, '#', (size_t)fill);
		memset(bar + fill, '.', (size_t)(20 - fill));
		bar[20] = 0;
		rf_cli_fmt_bytes(total, sizeof total, (double)p->total);
		n = snprintf(line, sizeof line, "%s [%s] %5.1f%% %s / %s  %s/s  ETA %d:%02d",
			     p->label, bar, frac * 100.0, done, total, rate, (int)eta / 60,
			     (int)eta % 60);
	} else {
		n = snprintf(line, sizeof line, "%s %s  %s/s", p->label, done, rate);
	}
	if (n < 0)
		return;
	if (n >= (int)sizeof line)
		n = (int)sizeof line - 1;
	/* Pad with spaces over a longer previous line. */
	fprintf(stderr, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
	fflush(stderr);
	p->width = n;
	p->last_draw = now;
}

void
rf_cli_progress_update(rf_cli_progress *p, uint64_t done)
{
	double now;

	p->done = done;
	if (!p->enabled)
		return;
	now = rf_cli_now();
	/* At most ~6 redraws a second: more is flicker and syscalls. */
	if (now - p->last_draw < 0.16)
		return;
	progress_draw(p, now);
}

void
rf_cli_progress_finish(rf_cli_progress *p)
{
	if (!p->enabled || p->width == 0)
		return;
	fprintf(stderr, "\r%*s\r", p->width, "");
	fflush(stderr);
	p->width = 0;
}

/* ------------------------------------------------------------- signals */

static volatile sig_atomic_t interrupted;

static void
on_signal(int sig)
{
	interrupted = sig;
}

void
rf_cli_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* SA_RESTART: the library's reads and writes must not see EINTR; the
	 * long loops poll rf_cli_interrupted() between blocks instead, which
	 * is often enough (a block is a few MiB). */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL); /* a closed terminal: stop as for Ctrl-C */
}

int
rf_cli_interrupted(void)
{
	return interrupted;
}

/* ---------------------------------------------------------- record spec */

int
rf_cli_parse_field_spec(const char *s, rf_cli_field_spec *out, char *err, size_t errcap)
{
	const char *colon = strchr(s, ':');
	const char *br;
	char dt[32];
	size_t n;

	memset(out, 0, sizeof *out);
	if (!colon || colon == s) {
		snprintf(err, errcap, "field spec '%s' is not NAME:DTYPE[D0,D1,...]", s);
		return -EINVAL;
	}
	n = (size_t)(colon - s);
	if (n >= sizeof out->name) {
		snprintf(err, errcap, "field name in '%s' is too long", s);
		return -EINVAL;
	}
	memcpy(out->name, s, n);
	out->name[n] = 0;
	br = strchr(colon + 1, '[');
	n = br ? (size_t)(br - (colon + 1)) : strlen(colon + 1);
	if (n == 0 || n >= sizeof dt) {
		snprintf(err, errcap, "field spec '%s': missing or bad dtype", s);
		return -EINVAL;
	}
	memcpy(dt, colon + 1, n);
	dt[n] = 0;
	if (rf_dtype_parse(dt, &out->dtype) < 0) {
		snprintf(err, errcap,
			 "field spec '%s': unknown dtype '%s' (u8 i8 u16 i16 u32 i32 u64 i64 f16 "
			 "bf16 f32 f64 bytes)",
			 s, dt);
		return -EINVAL;
	}
	if (!br)
		return 0;
	for (const char *p = br + 1;;) {
		uint64_t v = 0;
		const char *start = p;
		while (*p >= '0' && *p <= '9') {
			if (__builtin_mul_overflow(v, 10, &v) ||
			    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v)) {
				snprintf(err, errcap, "field spec '%s': dimension too large", s);
				return -EINVAL;
			}
			p++;
		}
		if (p == start || v == 0) {
			snprintf(err, errcap, "field spec '%s': dimensions must be integers >= 1", s);
			return -EINVAL;
		}
		if (out->rank == RF_CLI_SPEC_MAX_RANK) {
			snprintf(err, errcap, "field spec '%s': more than %d dimensions", s,
				 RF_CLI_SPEC_MAX_RANK);
			return -EINVAL;
		}
		out->shape[out->rank++] = v;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p == ']' && p[1] == 0)
			return 0;
		snprintf(err, errcap, "field spec '%s' is not NAME:DTYPE[D0,D1,...]", s);
		return -EINVAL;
	}
}

/* ------------------------------------------------------------- datasets */

static void
dataset_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	/* Errors come back as return codes and are printed once by the caller. */
	if ((level == RF_LOG_WARN && rf_cli_verbosity >= 1) ||
	    (level == RF_LOG_INFO && rf_cli_verbosity >= 2) ||
	    (level == RF_LOG_DEBUG && rf_cli_verbosity >= 3))
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
}

int
rf_cli_open_dataset(rf_dataset **ds, char **paths, size_t npaths, int verify)
{
	rf_dataset_config cfg;
	int rc;

	rf_dataset_config_init(&cfg);
	cfg.verify = verify;
	cfg.log = dataset_log;
	rc = rf_dataset_open(ds, (const char *const *)paths, npaths, &cfg);
	if (rc < 0) {
		const char *msg = rf_dataset_last_open_error();
		rf_cli_error("%s", msg && *msg ? msg : rf_strerror(rc));
	}
	return rc;
}

void
rf_cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (*p < 0x20) {
				fprintf(f, "\\u%04x", *p);
			} else if (*p < 0x80) {
				fputc(*p, f);
			} else {
				/* UTF-8 passes; a byte that does not start a
				 * whole sequence (a path need not be UTF-8)
				 * becomes U+FFFD, so the JSON stays valid. */
				int n = *p >= 0xc2 && *p <= 0xdf   ? 1
					: *p >= 0xe0 && *p <= 0xef ? 2
					: *p >= 0xf0 && *p <= 0xf4 ? 3 : -1;
				for (int i = 1; n > 0 && i <= n; i++)
					if ((p[i] & 0xc0) != 0x80)
						n = -1;
				if (n < 0) {
					fputs("\\ufffd", f);
				} else {
					fwrite(p, 1, (size_t)n + 1, f);
					p += n;
				}
			}
		}
	}
	fputc('"', f);
}
