/* SPDX-License-Identifier: MIT */
/*
 * Description: a test helper, not a test: packs the loader tests' dataset
 * (tests/loader/lt.h) for scripts.  Usage: lt-pack DIR NAME SAMPLES ZSTD
 * CHUNK_BYTES SHARD_BYTES WITH_VAR.
 */
#include "lt.h"

int
main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: lt-pack DIR NAME SAMPLES ZSTD CHUNK_BYTES SHARD_BYTES WITH_VAR\n");
		return 2;
	}
	int rc = lt_pack(argv[1], argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]),
			 strtoull(argv[5], NULL, 0), strtoull(argv[6], NULL, 0), atoi(argv[7]));
	if (rc < 0) {
		fprintf(stderr, "lt-pack: %s\n", rf_strerror(rc));
		return 1;
	}
	return 0;
}
