/* SPDX-License-Identifier: MIT */
/*
 * --mix for cat and bench: each PATH argument becomes a mixture source,
 * written [NAME=]PATH:WEIGHT (the weight after the last colon, the name
 * before the first '=' when that part holds no '/').
 */
#ifndef RF_TOOLS_MIX_ARGS_H
#define RF_TOOLS_MIX_ARGS_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringfeed/ringfeed.h>

/* After util.h (rf_cli_usage_error). */


/* Parse n arguments (changed in place: the colon and '=' become NULs) into
 * src[] and their paths into paths[] (RF_SOURCES_MAX at most).  Returns 0
 * or the usage error's exit status (message printed). */
static inline int
rf_cli_parse_mix(char **args, size_t n, rf_source *src, const char **paths, const char *usage)
{
	if (n > RF_SOURCES_MAX)
		return rf_cli_usage_error(usage, "--mix: %zu sources, at most %d", n,
					  RF_SOURCES_MAX);
	for (size_t i = 0; i < n; i++) {
		char *a = args[i], *colon = strrchr(a, ':'), *eq = strchr(a, '=');
		if (!colon || colon == a || !colon[1])
			return rf_cli_usage_error(usage, "--mix: '%s' is not [NAME=]PATH:WEIGHT", a);
		char *end;
		errno = 0;
		double w = strtod(colon + 1, &end);
		if (end == colon + 1 || *end)
			return rf_cli_usage_error(usage, "--mix: '%s': the weight '%s' is not a number",
						  a, colon + 1);
		if (errno == ERANGE && w != 0)
			return rf_cli_usage_error(usage, "--mix: '%s': the weight '%s' is out of range "
						  "(a weight is finite, >= 0, relative to the "
						  "others')", a, colon + 1);
		*colon = 0;
		const char *name = NULL, *path = a;
		if (eq == a)
			return rf_cli_usage_error(usage, "--mix: '%s:%s': the name before '=' is "
						  "empty (give NAME=PATH:WEIGHT or PATH:WEIGHT)",
						  a, colon + 1);
		if (eq && eq < colon && !memchr(a, '/', (size_t)(eq - a))) {
			*eq = 0;
			name = a;
			path = eq + 1;
		}
		for (size_t k = 0; name && k < i; k++)
			if (src[k].name && !strcmp(src[k].name, name))
				return rf_cli_usage_error(usage, "--mix: sources %zu and %zu are both "
							  "named '%s': give each its own name", k,
							  i, name);
		src[i] = (rf_source){.path = path, .weight = w, .name = name};
		paths[i] = path;
	}
	return 0;
}

/* Without --mix, a PATH that cannot be opened and ends in :WEIGHT was
 * probably meant as a source: say so (after the open error). */
static inline void
rf_cli_mix_hint(int rc, const char *const *paths, size_t n)
{
	if (rc != -ENOENT)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *colon = strrchr(paths[i], ':');
		char *end;
		if (!colon || !colon[1])
			continue;
		(void)strtod(colon + 1, &end);
		if (*end || end == colon + 1 || access(paths[i], F_OK) == 0)
			continue;
		rf_cli_error("hint: '%s' looks like PATH:WEIGHT: give --mix to read the "
			     "paths as the sources of a mixture", paths[i]);
		return;
	}
}

#endif
