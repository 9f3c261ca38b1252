/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed export`: one field of every sample, in order, as a .npy file.
 *
 * The header is numpy.save's own (version 1.0, 64-byte aligned), so a file
 * packed from a .npy and exported again is the same file, byte for byte,
 * except where the format keeps no numpy type: b1 comes back as u1, V<n> as
 * S<n>, and bf16 (which numpy lacks) as its bits in u2.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringfeed/dataset.h>

#include "cmd.h"
#include "npy.h"
#include "util.h"

#define EXPORT_USAGE "ringfeed export --field NAME -o FILE.npy [-q|-v] PATH..."

/* Output buffered in blocks of about this size. */
#define EXPORT_BLOCK_BYTES (8u << 20)

static void
export_help(void)
{
	printf("usage: %s\n\n", EXPORT_USAGE);
	printf("Write field NAME of every sample, in order, to FILE.npy: an array of\n"
	       "shape [samples, *field shape].  Fixed-size fields only.  dtypes map to\n"
	       "numpy's: u8 |u1, i8 |i1, u16 <u2, ..., f16 <f2, f32 <f4, f64 <f8; bf16 as\n"
	       "its bits, <u2; bytes as |S<n>, n being the last dimension.  The file is\n"
	       "written to a temporary name and renamed when complete.\n"
	       "\n"
	       "Options:\n"
	       "      --field NAME     the field to export\n"
	       "  -o, --output FILE    the .npy file to write\n"
	       "  -q, --quiet          no progress\n"
	       "  -v, --verbose        more messages\n"
	       "  -h, --help           this help\n"
	       "\n"
	       "Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n");
}

static int
write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
rf_cmd_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"field", required_argument, NULL, 'f'},
		{"output", required_argument, NULL, 'o'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *field_name = NULL, *out = NULL;
	rf_dataset *ds = NULL;
	char *tmp = NULL;
	unsigned char *buf = NULL;
	int fd = -1, c, rc, status = RF_CLI_FAIL;
	char descr[32], hdr[4096];
	uint64_t shape[RF_MAX_RANK + 1];
	int ndim;
	long hlen;
	const rf_field *f;
	uint64_t n, item, per;
	int fi;
	rf_cli_progress prog;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': field_name = optarg; break;
		case 'o': out = optarg; break;
		case 'q': rf_cli_verbosity = 0; break;
		case 'v': rf_cli_verbosity++; break;
		case 'h': export_help(); return RF_CLI_OK;
		default: return rf_cli_bad_option(EXPORT_USAGE, c, argc, argv);
		}
	}
	if (optind >= argc)
		return rf_cli_usage_error(EXPORT_USAGE, "missing PATH");
	if (!field_name)
		return rf_cli_usage_error(EXPORT_USAGE, "missing --field NAME");
	if (!out)
		return rf_cli_usage_error(EXPORT_USAGE, "missing -o FILE.npy");

	if (rf_cli_open_dataset(&ds, argv + optind, (size_t)(argc - optind), 1) < 0)
		return RF_CLI_FAIL;
	fi = rf_schema_find(rf_dataset_schema(ds), field_name);
	if (fi < 0) {
		const rf_schema *s = rf_dataset_schema(ds);
		char names[512] = "";
		size_t len = 0;
		for (uint32_t i = 0; i < s->nfields && len < sizeof names; i++)
			len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
						s->fields[i].name);
		rf_cli_error("no field '%s' in the dataset (fields: %s)", field_name, names);
		status = RF_CLI_USAGE;
		goto out;
	}
	f = &rf_dataset_schema(ds)->fields[fi];
	if (f->var_dim >= 0) {
		rf_cli_error("field '%s' is variable-length: export writes fixed-size fields only",
			     field_name);
		goto out;
	}
	n = rf_dataset_samples(ds);
	item = rf_field_item_bytes(f);
	shape[0] = n;
	ndim = 1;
	for (uint32_t d = 0; d < f->rank; d++)
		shape[ndim++] = f->shape[d];
	if (f->dtype == RF_DTYPE_BYTES) {
		/* The last dimension becomes the string length. */
		uint64_t len = 1;
		if (f->rank > 0)
			len = shape[--ndim];
		snprintf(descr, sizeof descr, "|S%" PRIu64, len);
	} else {
		snprintf(descr, sizeof descr, "%s", rf_npy_descr(f->dtype));
	}
	hlen = rf_npy_header(hdr, sizeof hdr, descr, ndim, shape);
	if (hlen < 0) {
		rf_cli_error("cannot build a .npy header: %s", strerror((int)-hlen));
		goto out;
	}
	per = item >= EXPORT_BLOCK_BYTES ? 1 : EXPORT_BLOCK_BYTES / item;
	if (item > SIZE_MAX || !(buf = malloc((size_t)(per * item)))) {
		rf_cli_error("out of memory (a value of field '%s' is %" PRIu64 " bytes)", field_name,
			     item);
		goto out;
	}
	/* The result is renamed over OUT: only a regular file (or nothing)
	 * may be there, and it keeps its permissions.  A device, a pipe or a
	 * link would be replaced by a file, not written through. */
	struct stat ost;
	mode_t mode = 0666;
	if (lstat(out, &ost) == 0) {
		if (!S_ISREG(ost.st_mode)) {
			rf_cli_error("-o %s: %s; give a regular file's path", out,
				     S_ISLNK(ost.st_mode) ? "a symbolic link" : "not a regular file");
			goto out;
		}
		mode = ost.st_mode & 07777;
	}
	rf_cli_signals_install(); /* before the temporary file exists */
	if (asprintf(&tmp, "%s.tmp.%ld", out, (long)getpid()) < 0) {
		tmp = NULL;
		rf_cli_error("out of memory");
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		rf_cli_error("%s: %s", tmp, strerror(errno));
		free(tmp);
		tmp = NULL; /* nothing to remove */
		goto out;
	}
	if (mode != 0666 && fchmod(fd, mode) < 0) { /* the umask may have narrowed it */
		rf_cli_error("%s: %s", tmp, strerror(errno));
		goto out;
	}
	if ((rc = write_all(fd, hdr, (size_t)hlen)) < 0) {
		rf_cli_error("%s: %s", tmp, strerror(-rc));
		goto out;
	}
	rf_cli_progress_start(&prog, "exporting", n * item);
	for (uint64_t s = 0; s < n;) {
		uint64_t k = n - s < per ? n - s : per;
		if (rf_cli_interrupted()) {
			rf_cli_progress_finish(&prog);
			rf_cli_error("interrupted; nothing written");
			status = 128 + rf_cli_interrupted();
			goto out;
		}
		for (uint64_t r = 0; r < k; r++) {
			size_t len = 0;
			rc = rf_dataset_read(ds, s + r, (uint32_t)fi, buf + r * item, (size_t)item, &len);
			if (rc == 0 && len != item)
				rc = RF_ECORRUPT;
			if (rc < 0) {
				const char *m = rf_dataset_errmsg(ds);
				rf_cli_progress_finish(&prog);
				rf_cli_error("sample %" PRIu64 ": %s", s + r, m && *m ? m : rf_strerror(rc));
				goto out;
			}
		}
		if ((rc = write_all(fd, buf, (size_t)(k * item))) < 0) {
			rf_cli_progress_finish(&prog);
			rf_cli_error("%s: %s", tmp, strerror(-rc));
			goto out;
		}
		s += k;
		rf_cli_progress_update(&prog, s * item);
	}
	rf_cli_progress_finish(&prog);
	/* Durable before it gets its final name, like the writer's shards. */
	if (fsync(fd) < 0 || close(fd) < 0) {
		fd = -1;
		rf_cli_error("%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, out) < 0) {
		rf_cli_error("%s: %s", out, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	rf_cli_note(2, "%" PRIu64 " samples of '%s' (%s) -> %s", n, field_name, descr, out);
	status = RF_CLI_OK;
out:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(buf);
	rf_dataset_close(&ds);
	return status;
}
