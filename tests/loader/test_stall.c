/* SPDX-License-Identifier: MIT */
/*
 * Description: the consumer's stall counter (rf_stats.stall_ns) counts the
 * time rf_loader_next really waited, and only that.  On the CUDA backend
 * under the cudart emulator with a fixed latency on every copy
 * (RINGFEED_EMU_LATENCY, set by meson: 200 ms), a batch cannot be ready
 * sooner than that after its buffer was freed, so the waits are certain:
 * right after open, rf_loader_next_timeout for 20 ms returns -EAGAIN and
 * stall_ns grows by at least 20 ms (and by no more than the call took);
 * with all `depth` batches held it returns RF_EHELD at once and stall_ns
 * does not move; after one release a 20 ms wait is -EAGAIN again, counted;
 * a blocking rf_loader_next that waited for its batch adds what it waited;
 * stall_ns <= wall_ns and stall_share = stall_ns / wall_ns throughout.
 */

#include "lt.h"
#include "lt_gpu.h"

#define MS 1000000ull
#define DEPTH 2

static char dir[256];

static rf_stats
stats(rf_loader *ld)
{
	rf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (rf_loader_stats(ld, &st) != 0) {
		fprintf(stderr, "rf_loader_stats failed\n");
		exit(1);
	}
	LT_CHECK(st.stall_ns <= st.wall_ns);
	LT_CHECK(st.wall_ns > 0);
	double share = (double)st.stall_ns / (double)st.wall_ns;
	LT_CHECK(st.stall_share > share - 1e-9 && st.stall_share < share + 1e-9);
	return st;
}

/* A timed wait that must time out: -EAGAIN after at least `ns`, counted in
 * full (and no more than the call took). */
static void
timed_out_wait(rf_loader *ld, uint64_t ns, int line)
{
	const rf_batch *b = (const rf_batch *)&b;
	uint64_t before = stats(ld).stall_ns, t0 = lt_now_ns();
	int rc = rf_loader_next_timeout(ld, &b, ns);
	uint64_t took = lt_now_ns() - t0, after = stats(ld).stall_ns;
	if (rc != -EAGAIN) {
		fprintf(stderr, "line %d: rf_loader_next_timeout gave %d (%s), expected -EAGAIN\n",
			line, rc, rf_strerror(rc));
		exit(1);
	}
	if (took < ns || after - before < ns || after - before > took) {
		fprintf(stderr, "line %d: a %llu ns wait took %llu ns and added %llu ns of stall "
			"(from %llu): expected at least %llu and at most the call's time\n", line,
			(unsigned long long)ns, (unsigned long long)took,
			(unsigned long long)(after - before), (unsigned long long)before,
			(unsigned long long)ns);
		lt_failures++;
	}
}

int
main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	const char *lat = getenv("RINGFEED_EMU_LATENCY");
	if (!getenv("RINGFEED_CUDART") || !lat || strcmp(lat, "200ms") != 0) {
		printf("needs the cudart emulator (RINGFEED_CUDART) and RINGFEED_EMU_LATENCY=200ms\n");
		return LT_SKIP;
	}
	/* Batches are checked through the emulator's view of device memory:
	 * a copy back would take 200 ms of the link this test times. */
	struct rfemu_api emu;
	if (rfemu_api_load(&emu, NULL) != 0) {
		printf("RINGFEED_CUDART is not the cudart emulator\n");
		return LT_SKIP;
	}
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("stall"));
	if (lt_pack(dir, "d", 64, 0, 4096, 0, 0) < 0)
		return 1;
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, "d.rfs");
	cfg.batch_size = 4;
	cfg.device = RF_DEVICE_CUDA;
	cfg.depth = DEPTH;
	cfg.pinned_bytes = 1 << 20;
	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}

	/* The first batch's copy takes 200 ms: a 20 ms wait times out. */
	timed_out_wait(ld, 20 * MS, __LINE__);

	/* Take `depth` batches and hold them all. */
	const rf_batch *held[DEPTH];
	uint64_t first = 0;
	for (int i = 0; i < DEPTH; i++) {
		uint64_t before = stats(ld).stall_ns, t0 = lt_now_ns();
		rc = rf_loader_next(ld, &held[i]);
		uint64_t took = lt_now_ns() - t0, added = stats(ld).stall_ns - before;
		if (rc != 0 || !held[i]) {
			fprintf(stderr, "next: %d (%s)\n", rc, rf_strerror(rc));
			return 1;
		}
		LT_CHECK(lt_check_batch_emu(&emu, held[i], first) == 0);
		first += held[i]->samples;
		LT_CHECK(added <= took);
		/* A call that had to wait for a copy has it counted (all but
		 * the few microseconds around the wait). */
		if (took >= 50 * MS)
			LT_CHECK(added + 20 * MS >= took);
	}

	/* All held: RF_EHELD without waiting, and no stall counted. */
	uint64_t before = stats(ld).stall_ns, t0 = lt_now_ns();
	const rf_batch *b = NULL;
	rc = rf_loader_next_timeout(ld, &b, 20 * MS);
	uint64_t took = lt_now_ns() - t0;
	LT_CHECK(rc == RF_EHELD);
	LT_CHECK(stats(ld).stall_ns == before);

	/* One released: its buffer's refill takes 200 ms, so a 20 ms wait
	 * times out again, counted. */
	LT_CHECK(rf_loader_release(ld, held[0], NULL) == 0);
	timed_out_wait(ld, 20 * MS, __LINE__);

	/* And a blocking call waits for it, counted. */
	before = stats(ld).stall_ns;
	t0 = lt_now_ns();
	rc = rf_loader_next(ld, &b);
	took = lt_now_ns() - t0;
	uint64_t added = stats(ld).stall_ns - before;
	LT_CHECK(rc == 0 && b);
	if (b) {
		LT_CHECK(lt_check_batch_emu(&emu, b, first) == 0);
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(took >= 100 * MS);
	LT_CHECK(added <= took && added + 20 * MS >= took);
	LT_CHECK(rf_loader_release(ld, held[1], NULL) == 0);

	rf_stats st = stats(ld);
	LT_CHECK(st.stall_ns >= 2 * 20 * MS + 100 * MS);
	LT_CHECK(st.stall_share > 0 && st.stall_share <= 1);
	rf_loader_close(&ld);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d check(s) failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
