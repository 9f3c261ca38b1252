/* SPDX-License-Identifier: MIT */
#ifndef RINGFEED_VERSION_H
#define RINGFEED_VERSION_H

/* The one place the version lives: meson reads these for the project
 * version and the shared library's soversion (major.minor while the major
 * number is 0, then the major number: see the ABI policy in README.md). */
#define RF_VERSION_MAJOR 0
#define RF_VERSION_MINOR 1
#define RF_VERSION_PATCH 0

#endif
