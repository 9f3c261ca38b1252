/* SPDX-License-Identifier: MIT */
/*
 * Description: the default pinned budget is the process's.  Loaders opened
 * with pinned_bytes 0 share RF_PINNED_PROCESS, each taking at most
 * RF_PINNED_DEFAULT of what the others left, and only the slots it runs
 * at full speed with: two that need a whole share open side by side, a
 * third fails at open with RF_EMEMPLAN and a whole message (not cut)
 * naming the loaders that hold the budget and the fix; a loader with its
 * own pinned_bytes is outside the count; closing one gives its share back;
 * a loader whose dataset needs a small ring takes only that (one chunk's
 * dataset: 36 MiB at most, not the deep staging a whole share buys),
 * leaving the rest; a child
 * of fork() starts with the whole budget; a loader too large for a whole
 * share is not told the budget is spent; more holders than it names are
 * counted ("and N more").
 */
#include <sys/wait.h>

#include "lt.h"

/* Samples of 64 KiB: a batch of 256 is 16 MiB; big.rfs's chunks are 64 MiB,
 * so its loaders need the whole default share (RF_PINNED_DEFAULT, 256 MiB)
 * and take it, short of the bytes less than a slot (WHOLE), and one read
 * slot and one staging slot (80 MiB) do not fit in what two of them leave. */
#define VALUE (64u << 10)
#define BATCH 256u
#define MIB (1ull << 20)
#define CHUNK (64 * MIB)
#define WHOLE(r) ((r) <= RF_PINNED_DEFAULT && (r) > RF_PINNED_DEFAULT - CHUNK)

static char dir[256];

static void
fill_byte(uint64_t g, uint8_t *v, uint64_t len)
{
	memset(v, (int)(g & 0xff), len);
}

static int
pack(const char *name, uint64_t n)
{
	return lt_pack_u8(dir, name, "x", VALUE, 0, n, CHUNK, fill_byte);
}

/* Open a loader on dataset `name` with batch_size batch and pinned_bytes
 * pinned (0: the default); *ring its ring's bytes.  rf_loader_open's code. */
static int
open_one(rf_loader **ld, const char *name, uint32_t batch, uint64_t pinned, uint64_t *ring)
{
	struct lt_paths lp;
	rf_config cfg;
	lt_config(&cfg, &lp, dir, name);
	cfg.batch_size = batch;
	cfg.pinned_bytes = pinned;
	cfg.log = NULL;
	int rc = rf_loader_open(ld, &cfg);
	if (rc == 0) {
		rf_stats st = {.size = sizeof(st)};
		LT_CHECK(rf_loader_stats(*ld, &st) == 0);
		*ring = st.pinned_bytes;
		/* It reads. */
		const rf_batch *b;
		LT_CHECK(rf_loader_next(*ld, &b) == 0 && b && b->samples == batch);
		if (b)
			LT_CHECK(rf_loader_release(*ld, b, NULL) == 0);
	}
	return rc;
}

int
main(void)
{
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("budget"));
	if (pack("big.rfs", 4 * BATCH) || pack("small.rfs", 64)) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	rf_config c0;
	rf_config_init(&c0);
	LT_CHECK(c0.pinned_bytes == 0);

	rf_loader *a = NULL, *b = NULL, *c = NULL, *own = NULL;
	uint64_t ra = 0, rb = 0, rc_ = 0, rown = 0;
	/* Train and validation side by side: 256 MiB each. */
	LT_CHECK(open_one(&a, "big.rfs", BATCH, 0, &ra) == 0 && WHOLE(ra));
	LT_CHECK(open_one(&b, "big.rfs", BATCH, 0, &rb) == 0 && WHOLE(rb));
	/* A third: the budget is spent, and the message says by whom. */
	int rc = open_one(&c, "big.rfs", BATCH, 0, &rc_);
	const char *m = rf_loader_last_open_error();
	LT_CHECK(rc == RF_EMEMPLAN && c == NULL);
	LT_CHECK(strstr(m, "default pinned budget") && strstr(m, "2 other loader(s)") &&
		 strstr(m, "512 MiB") &&
		 strstr(m, "Close one") && strstr(m, "pinned_bytes"));
	/* Whole, naming who holds the budget and the notebook's re-run. */
	size_t ml = strlen(m), tl = strlen("its own pinned_bytes");
	LT_CHECK(ml > tl && strcmp(m + ml - tl, "its own pinned_bytes") == 0);
	LT_CHECK(strstr(m, "big.rfs (2") && strstr(m, " MiB), ") && strstr(m, "del train"));
	if (rc != RF_EMEMPLAN)
		rf_loader_close(&c);
	fprintf(stderr, "third loader: %s\n", m);
	/* Its own budget is outside the count. */
	LT_CHECK(open_one(&own, "big.rfs", BATCH, 128 * MIB, &rown) == 0 && rown <= 128 * MIB &&
		 rown > 64 * MIB);

	/* A child of fork() has none of the parent's rings: the whole budget.
	 * Not under the sanitizers: ThreadSanitizer refuses threads in a child
	 * of a threaded parent, and ASan's allocator may hang there. */
	if (!RF_TSAN && !RF_ASAN) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			rf_loader *x = NULL, *y = NULL;
			uint64_t rx = 0, ry = 0;
			int ok = open_one(&x, "big.rfs", BATCH, 0, &rx) == 0 && WHOLE(rx) &&
				 open_one(&y, "big.rfs", BATCH, 0, &ry) == 0 && WHOLE(ry);
			if (!ok)
				fprintf(stderr, "child: %s\n", rf_loader_last_open_error());
			rf_loader_close(&x);
			rf_loader_close(&y);
			_exit(ok && !lt_failures ? 0 : 1);
	}
	int status = 0;
	LT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 0);
	}

	/* Closing one gives its share back. */
	rf_loader_close(&b);
	LT_CHECK(open_one(&c, "big.rfs", BATCH, 0, &rc_) == 0 && WHOLE(rc_));
	rf_loader_close(&c);
	/* A loader too large for a whole share is not told the others spent
	 * the budget: a batch of 256 MiB and a chunk need 320 MiB. */
	{
		struct lt_paths lp;
		rf_config cfg;
		lt_config(&cfg, &lp, dir, "big.rfs");
		cfg.batch_size = 4096;
		cfg.drop_last = 0;
		cfg.log = NULL;
		rc = rf_loader_open(&c, &cfg);
		m = rf_loader_last_open_error();
		LT_CHECK(rc == RF_EMEMPLAN && !strstr(m, "default pinned budget") &&
			 strstr(m, "raise pinned_bytes"));
		if (rc == 0)
			rf_loader_close(&c);
		fprintf(stderr, "too large: %.200s\n", m);
	}

	/* A small dataset's ring is what it can use, and the next loader
	 * takes what is left after it: less than a full share. */
	uint64_t rs = 0, rn = 0;
	rf_loader *s = NULL, *n = NULL;
	LT_CHECK(open_one(&s, "small.rfs", 16, 0, &rs) == 0 && rs > 0 && rs <= 9 * 4 * MIB);
	LT_CHECK(open_one(&n, "big.rfs", BATCH, 0, &rn) == 0);
	LT_CHECK(rn <= RF_PINNED_PROCESS - ra - rs && rn >= 64 * MIB);
	fprintf(stderr, "rings: %llu + %llu + %llu MiB (own: %llu MiB)\n",
		(unsigned long long)(ra / MIB), (unsigned long long)(rs / MIB),
		(unsigned long long)(rn / MIB), (unsigned long long)(rown / MIB));
	rf_loader_close(&n);
	rf_loader_close(&s);
	rf_loader_close(&a);
	rf_loader_close(&own);

	/* More holders than the message names: it says how many more. */
	{
		rf_loader *many[48] = {0};
		uint64_t r = 0;
		unsigned k = 0;
		LT_CHECK(open_one(&many[k++], "big.rfs", BATCH, 0, &r) == 0);
		while (k < 48 && open_one(&many[k], "small.rfs", 16, 0, &r) == 0)
			k++;
		m = rf_loader_last_open_error();
		char more[32];
		snprintf(more, sizeof more, ", and %u more), leaving", k - 4);
		LT_CHECK(k > 4 && k < 48 && strstr(m, more) != NULL);
		fprintf(stderr, "%u loaders: %.300s\n", k, m);
		for (unsigned i = 0; i < k; i++)
			rf_loader_close(&many[i]);
	}

	/* All given back: two full shares again. */
	LT_CHECK(open_one(&a, "big.rfs", BATCH, 0, &ra) == 0 && WHOLE(ra));
	LT_CHECK(open_one(&b, "big.rfs", BATCH, 0, &rb) == 0 && WHOLE(rb));
	rf_loader_close(&a);
	rf_loader_close(&b);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
