/* SPDX-License-Identifier: MIT */
/*
 * The edge of the public API, one rule for every constructor: a NULL or
 * foreign handle (or out-pointer) is -EINVAL, a bad value RF_EUSAGE, and a
 * settings struct is trusted only once its size is one a released header
 * has had and its reserved bytes are zero.
 */
#include <stdio.h>

#include "common.h"

int
rf_config_size_check(rf_diag *d, const char *who, const void *cfg, size_t expected,
		     size_t reserved_at, size_t reserved_len, const char *init_fn)
{
	/* Every settings struct starts with its uint32_t size.  A size no
	 * header has had is an uninitialised struct, whose real extent is
	 * unknown: nothing past the size field is read then, the log
	 * callback included, which is why nothing here logs. */
	uint32_t size = *(const uint32_t *)cfg;
	if (size != expected) {
		snprintf(d->msg, sizeof d->msg, "%s: config size %u, expected %zu (call %s)", who,
			 size, expected, init_fn);
		return RF_EUSAGE;
	}
	/* A setting from a newer header, which this library would otherwise
	 * ignore in silence. */
	const unsigned char *r = (const unsigned char *)cfg + reserved_at;
	for (size_t i = 0; i < reserved_len; i++) {
		if (r[i]) {
			snprintf(d->msg, sizeof d->msg, "%s: config has settings this library (%s) "
				 "does not know (reserved bytes are not 0)", who, rf_version_string());
			return RF_EUSAGE;
		}
	}
	return 0;
}
