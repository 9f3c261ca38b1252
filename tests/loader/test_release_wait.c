/* SPDX-License-Identifier: MIT */
/*
 * Description: a batch whose copy is done is handed out while the consumer's
 * stream still works on the batches before it.  With depth 2 and both device
 * buffers released on a stream whose work takes 200 ms each (host functions
 * on the consumer's stream, under the cudart emulator), the next batch's
 * copy must wait for the first buffer's work only: it is ready after about
 * 200 ms, not after the second buffer's work too (400 ms).  A copy thread
 * that waited on the host for each released buffer's work before issuing
 * the next copy held a finished batch back until then: on a GPU that is a
 * gap in the consumer's stream at every batch.  Every batch's rows are
 * checked, and the emulator reports no hazard (no buffer overwritten while
 * the stream still read it).
 */
#include <unistd.h>

#include "lt.h"
#include "lt_gpu.h"

#define MS 1000000ull

static char dir[256];
static struct rfemu_api emu;

/* The consumer's step: 200 ms of work on its stream. */
static void
step(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
}

int
main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	if (!getenv("RINGFEED_CUDART") || rfemu_api_load(&emu, NULL) != 0) {
		printf("needs the cudart emulator (RINGFEED_CUDART)\n");
		return LT_SKIP;
	}
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("release-wait"));
	if (lt_pack(dir, "d", 64, 0, 4096, 0, 0) < 0)
		return 1;
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "d.rfs");
	cfg.batch_size = 4;
	cfg.device = RF_DEVICE_CUDA;
	cfg.depth = 2;
	cfg.pinned_bytes = 1 << 20;
	rf_loader *ld;
	if (rf_loader_open(&ld, &cfg) < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}
	void *stream = NULL;
	LT_CHECK(emu.stream_create(&stream) == 0);

	const rf_batch *b[3];
	uint64_t first = 0;
	for (int i = 0; i < 2; i++) {
		LT_CHECK(rf_loader_next(ld, &b[i]) == 0 && b[i]);
		if (!b[i])
			return 1;
		LT_CHECK(lt_check_batch_emu(&emu, b[i], first) == 0);
		first += b[i]->samples;
	}
	/* Both buffers released behind 200 ms of work each: the first is
	 * free at about 200 ms, the second at about 400 ms. */
	uint64_t t0 = lt_now_ns();
	for (int i = 0; i < 2; i++) {
		LT_CHECK(rf_batch_wait(b[i], stream) == 0);
		LT_CHECK(emu.launch_host_func(stream, step, NULL) == 0);
		LT_CHECK(rf_loader_release(ld, b[i], stream) == 0);
	}
	LT_CHECK(rf_loader_next(ld, &b[2]) == 0 && b[2]);
	uint64_t took = lt_now_ns() - t0;
	if (b[2]) {
		LT_CHECK(lt_check_batch_emu(&emu, b[2], first) == 0);
		first += b[2]->samples;
	}
	/* Ready once the first buffer's work is done: well before the
	 * second's. */
	LT_CHECK(took >= 150 * MS);
	LT_CHECK(took < 330 * MS);
	if (took >= 330 * MS)
		fprintf(stderr, "the third batch took %.0f ms: held back until the second "
			"buffer's work was done\n", (double)took / 1e6);
	if (b[2])
		LT_CHECK(rf_loader_release(ld, b[2], stream) == 0);
	/* The rest of the epoch, in order and whole. */
	const rf_batch *x;
	int rc;
	while ((rc = rf_loader_next(ld, &x)) == 0 && x) {
		LT_CHECK(lt_check_batch_emu(&emu, x, first) == 0);
		first += x->samples;
		LT_CHECK(rf_loader_release(ld, x, stream) == 0);
	}
	LT_CHECK(rc == 0 && first == 64);
	LT_CHECK(emu.stream_synchronize(stream) == 0);
	rf_loader_close(&ld);
	LT_CHECK(emu.stream_destroy(stream) == 0);
	lt_emu_clean(&emu, 1);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
