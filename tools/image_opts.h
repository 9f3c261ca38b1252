/* SPDX-License-Identifier: MIT */
/*
 * The image options of `ringfeed cat` and `ringfeed bench`: a field of
 * encoded images delivered decoded (rf_config.images).
 */
#ifndef RF_TOOLS_IMAGE_OPTS_H
#define RF_TOOLS_IMAGE_OPTS_H

#include <getopt.h>

#include <ringfeed/ringfeed.h>

enum {
	RF_IMGOPT_SIZE = 0x1000,
	RF_IMGOPT_TRANSFORM,
	RF_IMGOPT_CHANNELS,
	RF_IMGOPT_RESIZE,
	RF_IMGOPT_SCALE,
	RF_IMGOPT_RATIO,
	RF_IMGOPT_FLIP,
	RF_IMGOPT_NO_DCT,
	RF_IMGOPT_FIELD,
};

/* The long options, for a command's table. */
#define RF_IMAGE_LONGOPTS                                                         \
	{"image-size", required_argument, NULL, RF_IMGOPT_SIZE},                 \
	{"image-transform", required_argument, NULL, RF_IMGOPT_TRANSFORM},       \
	{"image-channels", required_argument, NULL, RF_IMGOPT_CHANNELS},         \
	{"image-resize", required_argument, NULL, RF_IMGOPT_RESIZE},             \
	{"image-scale", required_argument, NULL, RF_IMGOPT_SCALE},               \
	{"image-ratio", required_argument, NULL, RF_IMGOPT_RATIO},               \
	{"image-flip", required_argument, NULL, RF_IMGOPT_FLIP},                 \
	{"image-no-dct", no_argument, NULL, RF_IMGOPT_NO_DCT},                   \
	{"image-field", required_argument, NULL, RF_IMGOPT_FIELD}

#define RF_IMAGE_USAGE                                                            \
	"[--image-size N|HxW] [--image-transform eval|train] [--image-channels 1|3] " \
	"[--image-resize N] [--image-scale MIN,MAX] [--image-ratio MIN,MAX] "      \
	"[--image-flip P] [--image-no-dct] [--image-field NAME]"

#define RF_IMAGE_HELP                                                             \
	"      --image-size N|HxW  decode the field of encoded images to uint8\n"      \
	"                       [H, W, channels] pixels in the pipeline\n"               \
	"      --image-transform T eval (resize + centre crop, default) or train\n"    \
	"                       (random resized crop + flip, keyed by seed, epoch\n"     \
	"                       and sample: the same pixels on a resume)\n"              \
	"      --image-channels C  3 (RGB, default) or 1 (luma)\n"                       \
	"      --image-resize N    eval: the shorter side before the crop (default\n"   \
	"                       round(size x 8/7): 256 for 224)\n"                        \
	"      --image-scale A,B   train: area share of the crop (default 0.08,1)\n"    \
	"      --image-ratio A,B   train: aspect ratio range (default 0.75,1.3333)\n"   \
	"      --image-flip P      train: flip probability (default 0.5)\n"              \
	"      --image-no-dct      JPEG: no DCT-domain downscaling (exact, slower)\n"    \
	"      --image-field NAME  the field of encoded images (default image; cat:\n"   \
	"                       its --field, the one field it loads)\n"

struct rf_image_opts {
	int on;                  /* an option was given */
	int size_set;
	const char *train_only;  /* a train-only option given, for the check */
	rf_image_field f;
	char field[64];
};

void rf_image_opts_init(struct rf_image_opts *o);

/* Option c with optarg arg: 1 taken, 0 not an image option, -1 bad value
 * (printed as a usage error with `usage`). */
int rf_image_opts_parse(struct rf_image_opts *o, int c, const char *arg, const char *usage);

/* After the options: 0 and, when any was given, cfg->images set to the
 * field (which stays in o); -1 after a usage error.  *field is the field
 * to load. */
int rf_image_opts_apply(struct rf_image_opts *o, rf_config *cfg, const char *usage);

#endif
