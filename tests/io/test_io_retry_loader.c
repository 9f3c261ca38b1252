/* SPDX-License-Identifier: MIT */
/*
 * Description: the loader's output survives transient read errors.  A
 * dataset read through the loader (host device, file order) with an I/O
 * error injected into one chunk's read for its first few attempts
 * (RINGFEED_IO_FAIL_AT with RINGFEED_IO_FAIL_TIMES) delivers exactly the
 * bytes of a clean run, on both engines; an error that outlasts the retries
 * ends the run with a message naming the shard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringfeed/dataset.h"
#include "ringfeed/ringfeed.h"
#include "rf_test.h"

#define N 2000

static char *dir, *shard;

static void
make_dataset(void)
{
	rf_schema s = {0};
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U32, 1, (uint64_t[]){64}, -1), 0);
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.no_fsync = 1;
	cfg.chunk_bytes = 64 * 1024;
	rf_writer *w;
	CHECK_RC(rf_writer_open(&w, shard, &s, &cfg), 0);
	uint32_t v[64];
	for (uint32_t i = 0; i < N; i++) {
		for (int k = 0; k < 64; k++)
			v[k] = i * 64 + (uint32_t)k;
		rf_value val = {v, sizeof v};
		CHECK_RC(rf_writer_add(w, &val), 0);
	}
	CHECK_RC(rf_writer_close(&w), 0);
}

/* Every delivered byte in order into out (N x 256 bytes); returns the
 * loader's result (0 at the end of the epoch). */
static int
run(uint8_t *out, char *msg, size_t msgcap)
{
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {shard};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 100;
	cfg.epochs = 1;
	cfg.device = RF_DEVICE_HOST;
	cfg.shuffle = RF_SHUFFLE_NONE;
	rf_loader *ld;
	CHECK_RC(rf_loader_open(&ld, &cfg), 0);
	const rf_batch *b;
	size_t at = 0;
	int rc;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		CHECK_RC(rf_batch_wait(b, NULL), 0);
		CHECK(at + b->fields[0].bytes <= (size_t)N * 256);
		memcpy(out + at, b->fields[0].data, b->fields[0].bytes);
		at += b->fields[0].bytes;
		rf_loader_release(ld, b, NULL);
	}
	snprintf(msg, msgcap, "%s", rc < 0 ? rf_loader_errmsg(ld) : "");
	rf_loader_close(&ld);
	CHECK(rc < 0 || at == (size_t)N * 256);
	return rc;
}

int
main(void)
{
	RF_TEST_REQUIRE_HOOKS("injected read errors (RINGFEED_IO_FAIL_AT)");
	dir = rf_test_tmpdir("rfretry");
	if (asprintf(&shard, "%s/d.rfs", dir) < 0)
		return 1;
	make_dataset();
	uint8_t *clean = calloc(N, 256), *got = calloc(N, 256);
	CHECK(clean && got);
	char msg[1024];
	/* Inside the third chunk's bytes. */
	char fail_at[32];
	{
		rf_dataset *ds;
		const char *p[] = {shard};
		CHECK_RC(rf_dataset_open(&ds, p, 1, NULL), 0);
		rf_chunk_info ci;
		CHECK(rf_dataset_chunks(ds) > 3);
		CHECK_RC(rf_dataset_chunk_info(ds, 2, &ci), 0);
		snprintf(fail_at, sizeof fail_at, "%llu", (unsigned long long)(ci.offset + 100));
		rf_dataset_close(&ds);
	}
	const char *engines[] = {"uring", "pread"};
	for (int e = 0; e < 2; e++) {
		setenv("RINGFEED_IO", engines[e], 1);
		if (run(clean, msg, sizeof msg) < 0) {
			printf("%s: %s: skipped\n", engines[e], msg);
			continue;
		}
		setenv("RINGFEED_IO_FAIL_AT", fail_at, 1);
		setenv("RINGFEED_IO_FAIL_TIMES", "3", 1);
		memset(got, 0, (size_t)N * 256);
		CHECK_RC(run(got, msg, sizeof msg), 0);
		CHECK(memcmp(clean, got, (size_t)N * 256) == 0);
		/* Persistent: the run ends with the read's error. */
		unsetenv("RINGFEED_IO_FAIL_TIMES");
		int rc = run(got, msg, sizeof msg);
		unsetenv("RINGFEED_IO_FAIL_AT");
		CHECK(rc < 0);
		CHECK(strstr(msg, "d.rfs") != NULL);
		printf("%s: %s\n", engines[e], msg);
	}
	unsetenv("RINGFEED_IO");
	free(clean);
	free(got);
	rf_test_rmtree(dir);
	free(shard);
	free(dir);
	return 0;
}
