/* SPDX-License-Identifier: MIT */
/*
 * Image datasets in the tool: `ringfeed pack --images DIR` and `--tar GLOB`
 * (pack_images.c), and the class-name file that goes with an image-folder
 * pack (classes.c, specified in docs/format.md, "Class names").
 */
#ifndef RF_CLI_IMAGES_H
#define RF_CLI_IMAGES_H

#include <stddef.h>
#include <stdio.h>

#include <ringfeed/dataset.h>

/* 1 when argv asks `pack` for an image input (--images or --tar). */
int rf_pack_images_wanted(int argc, char **argv);

/* `ringfeed pack --images DIR | --tar GLOB ...`: the exit status. */
int rf_cmd_pack_images(int argc, char **argv);

/* The help text of the image inputs, for `ringfeed pack --help`. */
void rf_pack_images_help(FILE *f);

/* The class-name file of the pack whose first shard (or only file) is
 * `out` ("OUT.rfs" and "OUT-00000.rfs" both give "OUT.classes"). */
int rf_classes_path(char *buf, size_t cap, const char *shard);

/* Class names of an open dataset: the file beside its first shard, used
 * only when it lists every shard of the dataset (by the checksum in each
 * footer), so a file left by another pack is never shown.  Returns the
 * count (*names, *field set; free with rf_classes_free), 0 when there is
 * none (a mismatch is noted at -v), or -1 on an allocation failure. */
int rf_classes_load(const rf_dataset *ds, char ***names, char **field);
void rf_classes_free(char **names, size_t n, char *field);

/* For `info`: the class names of an image-folder pack, when it has its
 * file: text ("classes: N (of field F)" then "  I  NAME" lines) or a JSON
 * member (', "classes": {"field": F, "names": [...]}'). */
void rf_classes_print(const rf_dataset *ds, int json);

/* Write OUT.classes for the shards just written at `out` (numbered when
 * sharded): `field` names the label field, names[i] is label i's class.
 * Written to a temporary name and renamed.  0, or -1 after printing why. */
int rf_classes_write(const char *out, int sharded, const char *field, char *const *names,
		     size_t n);

#endif
