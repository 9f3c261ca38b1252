/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the subcommands of the `ringfeed` tool: size parsing,
 * diagnostics on stderr, the progress bar, and Ctrl-C handling.  These are
 * tool settings only; nothing here reaches into the library.
 */
#ifndef RF_CLI_UTIL_H
#define RF_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ringfeed/dataset.h>

#if defined(__GNUC__)
#define RF_CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RF_CLI_PRINTF(a, b)
#endif

/* Exit codes of every subcommand. */
enum {
	RF_CLI_OK = 0,
	RF_CLI_FAIL = 1,   /* a runtime failure: bad input, I/O, corrupt data */
	RF_CLI_USAGE = 2,  /* bad command line */
};

/* Parse a byte size: decimal digits, then an optional suffix K, M, G, T
 * (also k/m/g/t, KB/KiB, MB/MiB, ...; all powers of 1024) or B.  Returns 0 and
 * *out, or -EINVAL for a malformed string, -ERANGE when the value does not
 * fit in 64 bits. */
int rf_cli_parse_size(const char *s, uint64_t *out);

/* Parse a decimal unsigned integer in [min, max].  Returns 0, -EINVAL or
 * -ERANGE. */
int rf_cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Format a byte count as "1.5 GiB" into buf (at least 16 bytes). */
const char *rf_cli_fmt_bytes(char *buf, size_t cap, double bytes);

/* ------------------------------------------------------------- messages */

/* The current subcommand's name for message prefixes ("ringfeed pack"). */
extern const char *rf_cli_prog;
/* Verbosity: 0 with -q, 1 default, 2 with -v, 3 with -vv. */
extern int rf_cli_verbosity;

/* "ringfeed CMD: message\n" on stderr (always printed). */
void rf_cli_error(const char *fmt, ...) RF_CLI_PRINTF(1, 2);
/* A status line on stderr, printed when verbosity >= level. */
void rf_cli_note(int level, const char *fmt, ...) RF_CLI_PRINTF(2, 3);

/* A bad command line: "ringfeed CMD: message" plus the usage line, on stderr;
 * returns RF_CLI_USAGE so a caller can `return rf_cli_usage_error(...)`. */
int rf_cli_usage_error(const char *usage, const char *fmt, ...) RF_CLI_PRINTF(2, 3);

/* Report a getopt_long failure, `c` being what it returned ('?' or ':'; the
 * optstring must start with ':' and opterr be 0), naming the offending option.
 * Returns RF_CLI_USAGE. */
int rf_cli_bad_option(const char *usage, int c, int argc, char **argv);

/* ------------------------------------------------------------- progress */

typedef struct rf_cli_progress {
	bool enabled;         /* stderr is a terminal and not -q */
	uint64_t total;       /* bytes expected; 0 = unknown */
	uint64_t done;
	double start;         /* monotonic seconds */
	double last_draw;
	int width;            /* chars of the last line drawn, for clearing */
	const char *label;
} rf_cli_progress;

/* Monotonic time in seconds. */
double rf_cli_now(void);

void rf_cli_progress_start(rf_cli_progress *p, const char *label, uint64_t total);
/* Record progress; redraws at most ~6 times a second. */
void rf_cli_progress_update(rf_cli_progress *p, uint64_t done);
/* Erase the bar (call before printing anything else and at the end). */
void rf_cli_progress_finish(rf_cli_progress *p);

/* -------------------------------------------------------------- signals */

/* Install SIGINT/SIGTERM handlers that only record the signal, so a long
 * operation can stop at a safe point, clean up and exit 128 + signal. */
void rf_cli_signals_install(void);
/* The signal received (SIGINT, SIGTERM) or 0. */
int rf_cli_interrupted(void);

#endif

/* ---------------------------------------------------------- record spec */

#define RF_CLI_SPEC_MAX_RANK 8

/* One field of a raw record: "NAME:DTYPE" or "NAME:DTYPE[D0,D1,...]" with
 * DTYPE a ringfeed dtype name (u8 ... f64, bf16, bytes) and each Di >= 1. */
typedef struct rf_cli_field_spec {
	char name[64];
	enum rf_dtype dtype;
	uint32_t rank;
	uint64_t shape[RF_CLI_SPEC_MAX_RANK];
} rf_cli_field_spec;

/* Parse a spec; returns 0, or -EINVAL with a reason in err. */
int rf_cli_parse_field_spec(const char *s, rf_cli_field_spec *out, char *err, size_t errcap);

/* -------------------------------------------------------------- datasets */

/* Open a dataset from paths (files, directories, globs) with a logger that
 * prints the library's warnings (info with -v).  On failure prints the
 * library's message and returns its code. */
int rf_cli_open_dataset(rf_dataset **ds, char **paths, size_t npaths, int verify);

/* Write a JSON string literal (quoted, escaped) to f. */
void rf_cli_json_str(FILE *f, const char *s);
