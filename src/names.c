/* SPDX-License-Identifier: MIT */
/*
 * The names of the loader's settings, defined once: the command-line tool,
 * the Python module and the log lines all spell a mode the way these tables
 * do, so a name accepted in one place is accepted everywhere.
 */
#include <string.h>

#include "common.h"

/* Indexed by the enum's value: the enums are numbered from 0 without gaps. */
static const char *const shuffle_names[] = {
	[RF_SHUFFLE_NONE] = "none",
	[RF_SHUFFLE_CHUNKS] = "chunks",
	[RF_SHUFFLE_WINDOW] = "window",
	[RF_SHUFFLE_FULL] = "full",
};

static const char *const device_names[] = {
	[RF_DEVICE_AUTO] = "auto",
	[RF_DEVICE_HOST] = "host",
	[RF_DEVICE_CUDA] = "cuda",
};

static const char *const pinning_names[] = {
	[RF_PINNING_RING] = "ring",
	[RF_PINNING_TRANSIENT] = "transient",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *
rf_name_of(const char *const *names, size_t n, int value)
{
	return value >= 0 && (size_t)value < n ? names[value] : NULL;
}

int
rf_name_find(const char *const *names, size_t n, const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

RF_API const char *
rf_shuffle_name(enum rf_shuffle mode)
{
	return rf_name_of(shuffle_names, NELEM(shuffle_names), (int)mode);
}

RF_API int
rf_shuffle_parse(const char *name, enum rf_shuffle *out)
{
	int i = rf_name_find(shuffle_names, NELEM(shuffle_names), name);
	if (i < 0 || !out)
		return RF_EUSAGE;
	*out = (enum rf_shuffle)i;
	return 0;
}

RF_API const char *
rf_device_name(enum rf_device_kind kind)
{
	return rf_name_of(device_names, NELEM(device_names), (int)kind);
}

RF_API int
rf_device_parse(const char *name, enum rf_device_kind *out)
{
	int i = rf_name_find(device_names, NELEM(device_names), name);
	if (i < 0 || !out)
		return RF_EUSAGE;
	*out = (enum rf_device_kind)i;
	return 0;
}

RF_API const char *
rf_pinning_name(enum rf_pinning pinning)
{
	return rf_name_of(pinning_names, NELEM(pinning_names), (int)pinning);
}

RF_API int
rf_pinning_parse(const char *name, enum rf_pinning *out)
{
	int i = rf_name_find(pinning_names, NELEM(pinning_names), name);
	if (i < 0 || !out)
		return RF_EUSAGE;
	*out = (enum rf_pinning)i;
	return 0;
}
