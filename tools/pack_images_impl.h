/* SPDX-License-Identifier: MIT */
/*
 * Inside `ringfeed pack --images / --tar`, shared by
 *   pack_images.c        the command: options, the run, shared helpers
 *   pack_images_round.c  rounds: reading and checking images on -j
 *                        workers, writing them in pack order
 *   pack_images_dir.c    --images: the folder walk, classes and labels
 *   pack_images_tar.c    --tar: the tar reader (built with libarchive)
 *
 * Threads: only the command's thread touches the pack, except a round's
 * items, each read and checked by the one worker that claims it (`next`),
 * and the tar reader's jobs, one per tar file.
 */
#ifndef RF_CLI_PACK_IMAGES_IMPL_H
#define RF_CLI_PACK_IMAGES_IMPL_H

#include <glob.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ringfeed/dataset.h>

#include "pack_opts.h"
#include "util.h"

typedef struct item {
	char *path;          /* --images: the file to read */
	char *name;          /* the name stored: path under DIR, or TAR:KEY */
	int64_t label;
	int has_label;
	uint8_t *data;       /* the image, once read (--tar: from the start) */
	size_t len;
	uint8_t *txt, *json; /* --tar */
	size_t txt_len, json_len;
	char *err;           /* why the sample is bad; NULL when good */
} item;

typedef struct ipack {
	pack_shared sh;          /* -o, --zstd, ... (pack_opts.h) */
	const char *images_dir;
	const char *tar_glob;
	int skip_bad;
	int check_decode;

	item *items;
	size_t nitems, cap;
	char **classes;
	size_t nclasses;
	int has_txt, has_json, has_label;
	rf_schema schema;
	rf_writer *w;
	uint64_t skipped, written, in_bytes;
	rf_cli_progress progress;
	/* a round being read and checked */
	item **round;
	size_t nround;
	atomic_size_t next;
	struct vcol {
		uint8_t *data;
		int64_t *off;
		size_t cap;
	} cols[4];               /* image, name, txt, json of a round */
	glob_t tars;
	struct tar_job *jobs;
	size_t njobs;
} ipack;

/* pack_images.c */
/* vasprintf's string, NULL when out of memory. */
char *ipack_xasprintf(const char *fmt, ...) RF_CLI_PRINTF(1, 2);
/* Print "out of memory"; returns -1. */
int ipack_oom(void);
/* A new zeroed item at the end of p->items; NULL when out of memory. */
item *ipack_new_item(ipack *p);
/* Free an item's data (read for one round) and its error. */
void ipack_item_release(item *it);

/* pack_images_round.c */
/* p->schema from the fields the samples have. */
int ipack_make_schema(ipack *p);
/* Read, check and write items [lo, hi). */
int ipack_pack_items(ipack *p, size_t lo, size_t hi);

/* pack_images_dir.c */
/* The items and classes of --images DIR. */
int ipack_scan_images(ipack *p);

/* pack_images_tar.c (with libarchive) */
/* The items of --tar GLOB (names only), then the pack of them. */
int ipack_scan_tars(ipack *p);
int ipack_pack_tars(ipack *p);

#endif
