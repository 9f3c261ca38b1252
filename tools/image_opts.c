/* SPDX-License-Identifier: MIT */
/* The image options of `ringfeed cat` and `ringfeed bench` (image_opts.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_opts.h"
#include "util.h"

void
rf_image_opts_init(struct rf_image_opts *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->field, sizeof o->field, "image");
	rf_image_field_init(&o->f, NULL, 0, 0, RF_IMAGE_EVAL);
}

/* "A,B" as two numbers. */
static int
pair(const char *s, double *a, double *b)
{
	char *e;
	*a = strtod(s, &e);
	if (e == s || *e != ',')
		return -1;
	const char *t = e + 1;
	*b = strtod(t, &e);
	return e == t || *e ? -1 : 0;
}

int
rf_image_opts_parse(struct rf_image_opts *o, int c, const char *arg, const char *usage)
{
	uint64_t v;
	char *e;
	switch (c) {
	case RF_IMGOPT_SIZE: {
		unsigned long h = strtoul(arg, &e, 10), w = h;
		if (e != arg && (*e == 'x' || *e == 'X')) {
			const char *t = e + 1;
			w = strtoul(t, &e, 10);
			if (e == t)
				h = 0;
		}
		if (e == arg || *e || h == 0 || w == 0 || h > 65535 || w > 65535) {
			rf_cli_usage_error(usage, "--image-size: '%s' is not N or HxW (1..65535)", arg);
			return -1;
		}
		o->f.height = (uint32_t)h;
		o->f.width = (uint32_t)w;
		uint32_t m = h > w ? (uint32_t)h : (uint32_t)w;
		if (!(o->size_set & 2)) {
			o->f.resize = (uint32_t)(((uint64_t)m * 8 + 3) / 7);
			if (o->f.resize > 65535)
				o->f.resize = 65535;
		}
		o->size_set |= 1;
		break;
	}
	case RF_IMGOPT_TRANSFORM:
		if (!strcmp(arg, "eval"))
			o->f.transform = RF_IMAGE_EVAL;
		else if (!strcmp(arg, "train"))
			o->f.transform = RF_IMAGE_TRAIN;
		else {
			rf_cli_usage_error(usage, "--image-transform: '%s' is not eval or train", arg);
			return -1;
		}
		break;
	case RF_IMGOPT_CHANNELS:
		if (strcmp(arg, "1") && strcmp(arg, "3")) {
			rf_cli_usage_error(usage, "--image-channels: '%s' is not 1 or 3", arg);
			return -1;
		}
		o->f.channels = (uint32_t)atoi(arg);
		break;
	case RF_IMGOPT_RESIZE:
		if (rf_cli_parse_uint(arg, 1, 65535, &v) < 0) {
			rf_cli_usage_error(usage, "--image-resize: '%s' is not a number in 1..65535",
					   arg);
			return -1;
		}
		o->f.resize = (uint32_t)v;
		o->size_set |= 2;
		break;
	case RF_IMGOPT_SCALE:
		o->train_only = "--image-scale";
		if (pair(arg, &o->f.scale_min, &o->f.scale_max) < 0) {
			rf_cli_usage_error(usage, "--image-scale: '%s' is not MIN,MAX", arg);
			return -1;
		}
		break;
	case RF_IMGOPT_RATIO:
		o->train_only = "--image-ratio";
		if (pair(arg, &o->f.ratio_min, &o->f.ratio_max) < 0) {
			rf_cli_usage_error(usage, "--image-ratio: '%s' is not MIN,MAX", arg);
			return -1;
		}
		break;
	case RF_IMGOPT_FLIP:
		o->train_only = "--image-flip";
		o->f.flip = strtod(arg, &e);
		if (e == arg || *e) {
			rf_cli_usage_error(usage, "--image-flip: '%s' is not a number", arg);
			return -1;
		}
		break;
	case RF_IMGOPT_NO_DCT:
		o->f.dct_scale = 0;
		break;
	case RF_IMGOPT_FIELD:
		snprintf(o->field, sizeof o->field, "%s", arg);
		break;
	default:
		return 0;
	}
	o->on = 1;
	return 1;
}

int
rf_image_opts_apply(struct rf_image_opts *o, rf_config *cfg, const char *usage)
{
	if (!o->on)
		return 0;
	if (!(o->size_set & 1)) {
		rf_cli_usage_error(usage, "the --image-* options need --image-size");
		return -1;
	}
	if (o->train_only && o->f.transform != RF_IMAGE_TRAIN) {
		rf_cli_usage_error(usage, "%s is an option of the train transform, but the "
				   "transform is eval: add --image-transform train or leave %s out",
				   o->train_only, o->train_only);
		return -1;
	}
	if ((o->size_set & 2) && o->f.transform == RF_IMAGE_TRAIN) {
		rf_cli_usage_error(usage, "--image-resize is an option of the eval transform, "
				   "but the transform is train: leave it out");
		return -1;
	}
	o->f.field = o->field;
	cfg->images = &o->f;
	cfg->nimages = 1;
	return 0;
}
