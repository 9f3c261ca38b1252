/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack --images DIR` and `ringfeed pack --tar GLOB`: image
 * datasets as encoded bytes plus labels, one sample per image.
 *
 *   --images DIR   DIR/CLASS/.../FILE: classes are DIR's subdirectories
 *                  sorted by name (label i = the i-th), files sorted by path
 *                  within each class (torchvision's ImageFolder order); the
 *                  class names go to OUT.classes (classes.c).
 *   --tar GLOB     WebDataset-style tar files in sorted order: members
 *                  grouped into samples by key (the path up to the first dot
 *                  of the file name), each extension a field.
 *
 * Fields: image (bytes, the JPEG or PNG file as is), label (i64), name
 * (bytes: the path under DIR, or TAR:KEY) kept for error messages, and with
 * --tar txt and json (bytes) when any sample has them.
 *
 * Each image is checked before it is written (headers and end marker, or a
 * whole decode with --check decode), by -j threads.  A file that cannot be
 * read or is not a JPEG or PNG fails the pack with its path, or with
 * --skip-bad is left out, named at -v and counted.
 */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images.h"
#include "pack_images_impl.h"

#define IPACK_USAGE                                                                    \
	"ringfeed pack -o OUT.rfs (--images DIR | --tar GLOB) [--skip-bad]\n"                  \
	"                     [--check header|decode] [--shuffle SEED] [-j THREADS]\n"          \
	"                     [--zstd LEVEL] [--chunk-bytes SIZE] [--shard-bytes SIZE] [-q|-v]"

/* ------------------------------------------------------------- helpers */

char *
ipack_xasprintf(const char *fmt, ...) RF_CLI_PRINTF(1, 2);

char *
ipack_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

int
ipack_oom(void)
{
	rf_cli_error("out of memory");
	return -1;
}

item *
ipack_new_item(ipack *p)
{
	if (p->nitems == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 1024;
		item *n = realloc(p->items, cap * sizeof *n);
		if (!n)
			return NULL;
		p->items = n;
		p->cap = cap;
	}
	item *it = &p->items[p->nitems++];
	memset(it, 0, sizeof *it);
	return it;
}

void
ipack_item_release(item *it)
{
	free(it->data);
	free(it->txt);
	free(it->json);
	free(it->err);
	it->data = it->txt = it->json = NULL;
	it->err = NULL;
}

/* ----------------------------------------------------------------- main */

void
rf_pack_images_help(FILE *f)
{
	fprintf(f,
		"Image inputs (encoded bytes plus labels; see docs/format.md):\n"
		"  --images DIR           an image folder, DIR/CLASS/.../FILE: the classes are\n"
		"                         DIR's subdirectories sorted by name (label i = the\n"
		"                         i-th, names written to OUT.classes, shown by info),\n"
		"                         files sorted by path within a class.  Fields: image\n"
		"                         (the file's bytes), label (i64), name (its path\n"
		"                         under DIR, for error messages).\n"
		"  --tar GLOB             WebDataset tar files (sorted): members grouped into\n"
		"                         samples by key (the name up to its first dot);\n"
		"                         jpg/jpeg/png -> image, cls -> label, txt and json\n"
		"                         -> fields of their own, name = TAR:KEY.  Without\n"
		"                         --shuffle THREADS tar files are held in memory at\n"
		"                         a time; with it, all of them.\n"
		"  --skip-bad             leave out files that cannot be read or are not JPEG\n"
		"                         or PNG (each named with -v, the count at the end);\n"
		"                         without it the first such file fails the pack\n"
		"  --check header|decode  how images are checked: headers and end marker\n"
		"                         (default), or a whole decode (slower)\n"
		"  -j N                   also reads and checks images on N threads\n");
}

int
rf_pack_images_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (!strcmp(argv[i], "--images") || !strncmp(argv[i], "--images=", 9) ||
		    !strcmp(argv[i], "--tar") || !strncmp(argv[i], "--tar=", 6))
			return 1;
	}
	return 0;
}

enum {
	OPT_IMAGES = PACK_OPT_OWN,
	OPT_TAR,
	OPT_SKIP,
	OPT_CHECK,
	OPT_OTHER_INPUT, /* an option of the other inputs (cmd_pack_args.c) */
};

static int
parse(ipack *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		PACK_SHARED_LONGOPTS,
		{"images", required_argument, NULL, OPT_IMAGES},
		{"tar", required_argument, NULL, OPT_TAR},
		{"skip-bad", no_argument, NULL, OPT_SKIP},
		{"check", required_argument, NULL, OPT_CHECK},
		{"raw", required_argument, NULL, OPT_OTHER_INPUT},
		{"field", required_argument, NULL, OPT_OTHER_INPUT},
		{"llmc", required_argument, NULL, OPT_OTHER_INPUT},
		{"seq-len", required_argument, NULL, OPT_OTHER_INPUT},
		{NULL, 0, NULL, 0},
	};
	int c, rc, li = 0;

	pack_shared_init(&p->sh);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":" PACK_SHARED_SHORTOPTS, longopts, &li)) != -1) {
		if ((rc = pack_shared_option(&p->sh, c, optarg, IPACK_USAGE)) != PACK_NOT_SHARED) {
			if (rc != 0)
				return rc;
			continue;
		}
		switch (c) {
		case OPT_IMAGES:
			p->images_dir = optarg;
			break;
		case OPT_TAR:
			if (p->tar_glob)
				return rf_cli_usage_error(IPACK_USAGE,
							  "--tar given twice (one glob, quoted)");
			p->tar_glob = optarg;
			break;
		case OPT_SKIP:
			p->skip_bad = 1;
			break;
		case OPT_CHECK:
			if (strcmp(optarg, "header") && strcmp(optarg, "decode"))
				return rf_cli_usage_error(IPACK_USAGE,
							  "--check: '%s' is not header or decode",
							  optarg);
			p->check_decode = strcmp(optarg, "decode") == 0;
			break;
		case OPT_OTHER_INPUT:
			return rf_cli_usage_error(IPACK_USAGE, "--%s does not mix with --images or "
						  "--tar inputs", longopts[li].name);
		case 'h':
			printf("usage: %s\n\n", IPACK_USAGE);
			rf_pack_images_help(stdout);
			printf("\n");
			pack_shared_help(stdout);
			return -1;
		default:
			return rf_cli_bad_option(IPACK_USAGE, c, argc, argv);
		}
	}
	if (optind < argc)
		return rf_cli_usage_error(IPACK_USAGE, "unexpected argument '%s' (image inputs "
					  "do not mix with NAME=FILE.npy)", argv[optind]);
	if (!p->sh.out || !*p->sh.out)
		return rf_cli_usage_error(IPACK_USAGE, "missing -o OUT.rfs");
	if (p->images_dir && p->tar_glob)
		return rf_cli_usage_error(IPACK_USAGE, "cannot mix --images and --tar inputs");
#ifndef RF_HAVE_ARCHIVE
	if (p->tar_glob) {
		rf_cli_error("--tar: this ringfeed was built without libarchive");
		return RF_CLI_FAIL;
	}
#endif
#ifndef RF_HAVE_IMAGES
	if (p->check_decode) {
		rf_cli_error("--check decode: this ringfeed was built without the image "
			     "decoders (TurboJPEG, libspng)");
		return RF_CLI_FAIL;
	}
#endif
	return 0;
}

/* The writer's log: errors are printed by the caller from errmsg. */
static void
ipack_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if ((level == RF_LOG_WARN && rf_cli_verbosity >= 1) ||
	    (level == RF_LOG_INFO && rf_cli_verbosity >= 2) ||
	    (level != RF_LOG_ERROR && rf_cli_verbosity >= 3))
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
}

int
rf_cmd_pack_images(int argc, char **argv)
{
	ipack pk, *p = &pk;
	rf_writer_config cfg;
	int rc, status = RF_CLI_FAIL;
	double t0 = rf_cli_now();
	char a[24];

	memset(p, 0, sizeof *p);
	if ((rc = parse(p, argc, argv)) != 0) {
		status = rc < 0 ? RF_CLI_OK : rc;
		goto out;
	}
	rf_cli_signals_install();
	if (p->images_dir)
		rc = ipack_scan_images(p);
#ifdef RF_HAVE_ARCHIVE
	else
		rc = ipack_scan_tars(p);
#endif
	if (rc < 0 || ipack_make_schema(p) < 0)
		goto out;

	pack_shared_writer_config(&p->sh, &cfg);
	cfg.log = ipack_log;
	if ((rc = rf_writer_open(&p->w, p->sh.out, &p->schema, &cfg)) < 0) {
		const char *m = rf_writer_last_error();
		rf_cli_error("%s", m && *m ? m : rf_strerror(rc));
		goto out;
	}
	rf_cli_progress_start(&p->progress, "packing", p->nitems);
	if (p->images_dir)
		rc = ipack_pack_items(p, 0, p->nitems);
#ifdef RF_HAVE_ARCHIVE
	else
		rc = ipack_pack_tars(p);
#endif
	rf_cli_progress_finish(&p->progress);
	if (rc != 0) {
		if (rc > 0) {
			rf_cli_error("interrupted; nothing written");
			status = 128 + rf_cli_interrupted();
		}
		goto out;
	}
	if (p->written == 0) {
		rf_cli_error("no sample left to write (%" PRIu64 " skipped)", p->skipped);
		goto out;
	}
	if ((rc = rf_writer_close(&p->w)) < 0) {
		const char *m = rf_writer_last_error();
		rf_cli_error("%s: %s", p->sh.out, m && *m ? m : rf_strerror(rc));
		goto out;
	}
	if (p->images_dir &&
	    rf_classes_write(p->sh.out, p->sh.shard_bytes != 0, "label", p->classes,
			     p->nclasses) < 0)
		goto out;
	if (p->skipped)
		rf_cli_note(1, "skipped %" PRIu64 " of %zu %s that could not be read or are not "
			    "JPEG or PNG images (-v names them)", p->skipped, p->nitems,
			    p->images_dir ? "files" : "samples");
	rf_cli_note(1, "%" PRIu64 " samples, %s of images, %.1f s -> %s", p->written,
		    rf_cli_fmt_bytes(a, sizeof a, (double)p->in_bytes), rf_cli_now() - t0, p->sh.out);
	if (p->images_dir)
		rf_cli_note(1, "%zu class%s (%s ... %s)", p->nclasses,
			    p->nclasses == 1 ? "" : "es", p->classes[0],
			    p->classes[p->nclasses - 1]);
	status = RF_CLI_OK;
out:
	if (p->w)
		rf_writer_abort(&p->w);
	for (size_t i = 0; i < p->nitems; i++) {
		ipack_item_release(&p->items[i]);
		free(p->items[i].path);
		free(p->items[i].name);
	}
	free(p->items);
	for (size_t i = 0; i < p->nclasses; i++)
		free(p->classes[i]);
	free(p->classes);
	for (int i = 0; i < 4; i++) {
		free(p->cols[i].data);
		free(p->cols[i].off);
	}
#ifdef RF_HAVE_ARCHIVE
	if (p->jobs)
		globfree(&p->tars);
	free(p->jobs);
#endif
	return status;
}
