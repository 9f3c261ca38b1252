/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed verify`: read every chunk of a dataset and check it.
 *
 * Each shard is opened and checked on its own, so one shard with a bad
 * footer or index does not hide the problems of the others, and a corrupt
 * chunk does not stop the check: every problem gets its own line naming the
 * shard, the chunk and the byte offset.  Then the shards are opened together
 * to check that they agree on the schema and are whole packs.  The shards
 * are those rf_dataset_open takes (a directory with a manifest, or a
 * manifest, gives the shards it lists); when the paths do not open as one
 * dataset, each PATH is opened alone for its shards, and the shards a
 * listing gives are checked one by one for a PATH that does not open, so
 * that every problem is still found: a PATH whose shards are each sound yet
 * do not open as one (a missing shard of a pack, two packs in a directory)
 * is reported with the reason, whatever the other PATHs hold.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ringfeed/dataset.h>

#include "cmd.h"
#include "util.h"

#define VERIFY_USAGE "ringfeed verify [-q|-v] PATH..."

typedef struct path_list {
	char **v;
	size_t n, cap;
} path_list;

typedef struct verify_state {
	uint64_t problems;
	uint64_t open_failures; /* shards that did not open on their own */
	uint64_t chunks;
	uint64_t samples;
	uint64_t bytes_total;
	uint64_t bytes_done;
	rf_cli_progress progress;
} verify_state;

static void
verify_help(void)
{
	printf("usage: %s\n\n", VERIFY_USAGE);
	printf("Check a dataset: every shard's footer, header, schema and index, every\n"
	       "chunk's checksum and decoded layout, every sample's own checksums (format\n"
	       "2 shards), and that the shards agree on the schema.  Each PATH is a\n"
	       "shard, a pack's manifest (BASE.rfm) or name (BASE.rfs), a directory\n"
	       "holding one pack, or a glob.  Every\n"
	       "problem is reported on its own line (shard, chunk, byte offset, cause);\n"
	       "the check goes on after a bad chunk.\n"
	       "\n"
	       "Options:\n"
	       "  -q, --quiet     print problems only\n"
	       "  -v, --verbose   print each shard's result\n"
	       "  -h, --help      this help\n"
	       "\n"
	       "Exit status: 0 all good, 1 a problem was found, 2 bad usage, 130 interrupted.\n");
}

static int
list_add(path_list *l, const char *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(p)))
		return -ENOMEM;
	l->n++;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A regular file (not a pipe, which would block the open, nor a directory). */
static int
is_regular(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The same expansion rf_dataset_open applies: a file is itself, a directory
 * gives its regular *.rfs files whose names do not start with a dot, sorted,
 * anything else is a glob (its regular files, sorted). */
static int
expand_path(path_list *l, const char *p)
{
	struct stat st;

	if (strstr(p, "://")) {
		/* A remote shard is itself; a remote prefix or shard list is
		 * expanded by the library, which lists it (and reads every
		 * shard's footer: a broken one is reported here, whole). */
		size_t len = strcspn(p, "?#"); /* a presigned URL's query follows */
		rf_dataset *ds = NULL;
		const char *one[1] = {p};
		rf_dataset_config cfg;
		if (len > 4 && strncmp(p + len - 4, ".rfs", 4) == 0)
			return list_add(l, p) < 0 ? -1 : 0;
		rf_dataset_config_init(&cfg);
		cfg.verify = 0;
		if (rf_dataset_open(&ds, one, 1, &cfg) < 0) {
			rf_cli_error("%s", rf_dataset_last_open_error());
			return -1;
		}
		for (size_t i = 0; i < rf_dataset_shards(ds); i++)
			if (list_add(l, rf_dataset_shard_path(ds, i)) < 0) {
				rf_dataset_close(&ds);
				return -1;
			}
		rf_dataset_close(&ds);
		return 0;
	}
	if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
		DIR *d = opendir(p);
		struct dirent *e;
		size_t first = l->n;
		if (!d) {
			rf_cli_error("%s: %s", p, strerror(errno));
			return -1;
		}
		while ((e = readdir(d))) {
			size_t len = strlen(e->d_name);
			char *full;
			if (len < 5 || strcmp(e->d_name + len - 4, ".rfs") != 0 ||
			    e->d_name[0] == '.')
				continue;
			if (asprintf(&full, "%s%s%s", p, p[strlen(p) - 1] == '/' ? "" : "/",
				     e->d_name) < 0) {
				closedir(d);
				rf_cli_error("out of memory");
				return -1;
			}
			if (is_regular(full) && list_add(l, full) < 0) {
				free(full);
				closedir(d);
				rf_cli_error("out of memory");
				return -1;
			}
			free(full);
		}
		closedir(d);
		if (l->n == first) {
			rf_cli_error("%s: no .rfs files in the directory", p);
			return -1;
		}
		qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
		return 0;
	}
	if (stat(p, &st) == 0) {
		if (list_add(l, p) < 0) {
			rf_cli_error("%s: out of memory", p);
			return -1;
		}
		return 0;
	}
	{
		glob_t g;
		int rc = glob(p, 0, NULL, &g);
		if (rc != 0) {
			rf_cli_error("%s: %s", p, rc == GLOB_NOMATCH ? "no such file" : "cannot expand");
			if (rc != GLOB_NOMATCH)
				globfree(&g);
			return -1;
		}
		size_t first = l->n;
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (is_regular(g.gl_pathv[i]) && list_add(l, g.gl_pathv[i]) < 0) {
				globfree(&g);
				rf_cli_error("%s: out of memory", p);
				return -1;
			}
		globfree(&g);
		if (l->n == first) {
			rf_cli_error("%s: no regular file matches", p);
			return -1;
		}
	}
	return 0;
}

/* The library's warnings (a shard a directory's manifest does not list);
 * its errors are reported as problems instead. */
static void
verify_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if (level == RF_LOG_WARN)
		rf_cli_error("warning: %s", msg);
}

static void
problem(verify_state *vs, const char *path, const char *msg)
{
	rf_cli_progress_finish(&vs->progress);
	rf_cli_error("%s: %s", path, msg);
	vs->problems++;
}

/* Check the index as the reader sees it: chunks in file order, aligned, not
 * overlapping, sample ranges contiguous and summing to the total. */
static void
check_index(verify_state *vs, rf_dataset *ds, const char *path)
{
	uint64_t next_sample = 0, end = 0;
	char msg[256];

	for (uint64_t k = 0, n = rf_dataset_chunks(ds); k < n; k++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, k, &ci) < 0) {
			snprintf(msg, sizeof msg, "index entry %" PRIu64 " cannot be read", k);
			problem(vs, path, msg);
			return;
		}
		if (ci.offset % 4096 || ci.offset < end || ci.first_sample != next_sample ||
		    ci.samples == 0 || ci.stored_bytes == 0 ||
		    (ci.codec != RF_CODEC_NONE && ci.codec != RF_CODEC_ZSTD)) {
			snprintf(msg, sizeof msg,
				 "index entry %" PRIu64 " (chunk at byte offset %" PRIu64
				 ") is inconsistent",
				 k, ci.offset);
			problem(vs, path, msg);
		}
		end = ci.offset + ci.stored_bytes;
		next_sample = ci.first_sample + ci.samples;
	}
	if (next_sample != rf_dataset_samples(ds)) {
		snprintf(msg, sizeof msg, "index counts %" PRIu64 " samples, footer %" PRIu64,
			 next_sample, rf_dataset_samples(ds));
		problem(vs, path, msg);
	}
}

/* Returns 1 when interrupted. */
static int
verify_shard(verify_state *vs, const char *path)
{
	rf_dataset *ds = NULL;
	rf_dataset_config cfg;
	const char *one[1] = {path};
	char msg[1024];
	uint64_t bad = 0;
	int rc;

	rf_dataset_config_init(&cfg);
	cfg.verify = 1;
	if ((rc = rf_dataset_open(&ds, one, 1, &cfg)) < 0) {
		const char *m = rf_dataset_last_open_error();
		size_t pl = strlen(path);
		/* The library's message names the file already: once is enough. */
		if (m && strncmp(m, path, pl) == 0 && m[pl] == ':' && m[pl + 1] == ' ')
			m += pl + 2;
		problem(vs, path, m && *m ? m : rf_strerror(rc));
		vs->open_failures++;
		return 0;
	}
	if (rf_schema_validate(rf_dataset_schema(ds)) < 0)
		problem(vs, path, "the schema is invalid");
	check_index(vs, ds, path);
	for (uint64_t k = 0, n = rf_dataset_chunks(ds); k < n; k++) {
		rf_chunk_info ci;
		if (rf_cli_interrupted()) {
			rf_dataset_close(&ds);
			return 1;
		}
		if (rf_dataset_chunk_info(ds, k, &ci) < 0)
			break;
		rc = rf_dataset_verify_chunk(ds, k);
		if (rc < 0) {
			const char *m = rf_dataset_errmsg(ds);
			size_t plen = strlen(path);
			char head[32];
			if (!m || !*m)
				m = rf_strerror(rc);
			/* The library's message usually names the shard, chunk
			 * and offset already; do not say it twice. */
			if (strncmp(m, path, plen) == 0 && strncmp(m + plen, ": ", 2) == 0)
				m += plen + 2;
			snprintf(head, sizeof head, "chunk %" PRIu64 " ", k);
			if (strncmp(m, head, strlen(head)) == 0)
				snprintf(msg, sizeof msg, "%s", m);
			else
				snprintf(msg, sizeof msg,
					 "chunk %" PRIu64 " (samples %" PRIu64 "..%" PRIu64
					 ") at byte offset %" PRIu64 ": %s",
					 k, ci.first_sample, ci.first_sample + ci.samples - 1,
					 ci.offset, m);
			problem(vs, path, msg);
			bad++;
		}
		vs->bytes_done += ci.stored_bytes;
		rf_cli_progress_update(&vs->progress, vs->bytes_done);
	}
	vs->chunks += rf_dataset_chunks(ds);
	vs->samples += rf_dataset_samples(ds);
	if (rf_cli_verbosity >= 2) {
		rf_cli_progress_finish(&vs->progress);
		printf("%s: %s (%" PRIu64 " chunks, %" PRIu64 " samples)\n", path,
		       bad ? "BAD" : "ok", rf_dataset_chunks(ds), rf_dataset_samples(ds));
	}
	rf_dataset_close(&ds);
	return 0;
}

int
rf_cmd_verify(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	path_list shards = {0};
	verify_state vs;
	int c, status = RF_CLI_FAIL;
	int expand_failed = 0, joint_ok = 0;
	char joint_error[1024] = "";
	/* Per PATH when they do not open together: its shards' range in
	 * `shards`, and why it does not open on its own (NULL: it does). */
	size_t *arg_end = NULL;
	uint64_t *arg_failures = NULL;
	char **arg_error = NULL;
	int nargs = 0;

	memset(&vs, 0, sizeof vs);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'q': rf_cli_verbosity = 0; break;
		case 'v': rf_cli_verbosity++; break;
		case 'h': verify_help(); return RF_CLI_OK;
		default: return rf_cli_bad_option(VERIFY_USAGE, c, argc, argv);
		}
	}
	if (optind >= argc)
		return rf_cli_usage_error(VERIFY_USAGE, "missing PATH");
	{
		/* The shards the library takes for these paths (a manifest's
		 * list), when they open as one dataset. */
		rf_dataset *ds = NULL;
		rf_dataset_config cfg;
		rf_dataset_config_init(&cfg);
		cfg.log = verify_log;
		int rc = rf_dataset_open(&ds, (const char *const *)(argv + optind),
					 (size_t)(argc - optind), &cfg);
		if (rc < 0) {
			const char *m = rf_dataset_last_open_error();
			snprintf(joint_error, sizeof joint_error, "%s", m && *m ? m : rf_strerror(rc));
		}
		for (size_t i = 0; rc == 0 && i < rf_dataset_shards(ds); i++) {
			if (list_add(&shards, rf_dataset_shard_path(ds, i)) < 0) {
				rf_cli_error("out of memory");
				expand_failed = 1;
				break;
			}
		}
		rf_dataset_close(&ds);
		joint_ok = rc == 0;
	}
	if (!joint_ok && !expand_failed) {
		nargs = argc - optind;
		arg_end = calloc((size_t)nargs, sizeof *arg_end);
		arg_failures = calloc((size_t)nargs, sizeof *arg_failures);
		arg_error = calloc((size_t)nargs, sizeof *arg_error);
		if (!arg_end || !arg_failures || !arg_error) {
			rf_cli_error("out of memory");
			expand_failed = 1;
		}
	}
	for (int i = 0; !joint_ok && !expand_failed && i < nargs; i++) {
		const char *one[1] = {argv[optind + i]};
		rf_dataset *ds = NULL;
		if (rf_dataset_open(&ds, one, 1, NULL) == 0) {
			for (size_t k = 0; k < rf_dataset_shards(ds) && !expand_failed; k++)
				if (list_add(&shards, rf_dataset_shard_path(ds, k)) < 0) {
					rf_cli_error("out of memory");
					expand_failed = 1;
				}
			rf_dataset_close(&ds);
		} else {
			const char *m = rf_dataset_last_open_error();
			if (!(arg_error[i] = strdup(m && *m ? m : "cannot be opened"))) {
				rf_cli_error("out of memory");
				expand_failed = 1;
			} else if (expand_path(&shards, argv[optind + i]) < 0) {
				expand_failed = 1;
			}
		}
		arg_end[i] = shards.n;
	}
	if (expand_failed)
		goto out;

	rf_cli_signals_install();
	/* Progress counts stored chunk bytes; the total is the shards' sizes,
	 * close enough for an ETA. */
	for (size_t i = 0; i < shards.n; i++) {
		struct stat st;
		if (stat(shards.v[i], &st) == 0)
			vs.bytes_total += (uint64_t)st.st_size;
	}
	rf_cli_progress_start(&vs.progress, "verifying", vs.bytes_total);
	for (size_t i = 0, a = 0; i < shards.n; i++) {
		uint64_t before = vs.open_failures;
		if (verify_shard(&vs, shards.v[i])) {
			rf_cli_progress_finish(&vs.progress);
			rf_cli_error("interrupted");
			status = 128 + rf_cli_interrupted();
			goto out;
		}
		while (a < (size_t)nargs && i >= arg_end[a])
			a++;
		if (a < (size_t)nargs)
			arg_failures[a] += vs.open_failures - before;
	}
	rf_cli_progress_finish(&vs.progress);
	int arg_reported = 0;
	for (int i = 0; i < nargs; i++) {
		/* A PATH that does not open although each of its shards does:
		 * a shard missing from its pack, two packs in a directory. */
		if (arg_error[i] && arg_failures[i] == 0) {
			rf_cli_error("the shards do not form one dataset: %s", arg_error[i]);
			vs.problems++;
		}
		arg_reported |= arg_error[i] != NULL;
	}
	if (!joint_ok && !arg_reported && vs.open_failures == 0) {
		/* Every PATH opens on its own, yet they do not open as one
		 * dataset: other schemas, or shards of different packs. */
		rf_cli_error("the shards do not form one dataset: %s", joint_error);
		vs.problems++;
	}
	if (rf_cli_verbosity >= 1) {
		if (vs.problems)
			printf("%" PRIu64 " problem(s) found in %zu shard(s)\n", vs.problems, shards.n);
		else
			printf("ok: %zu shard(s), %" PRIu64 " chunks, %" PRIu64 " samples\n", shards.n,
			       vs.chunks, vs.samples);
	}
	status = vs.problems ? RF_CLI_FAIL : RF_CLI_OK;
out:
	for (size_t i = 0; i < shards.n; i++)
		free(shards.v[i]);
	free(shards.v);
	for (int i = 0; arg_error && i < nargs; i++)
		free(arg_error[i]);
	free(arg_error);
	free(arg_end);
	free(arg_failures);
	fflush(stdout);
	return status;
}
