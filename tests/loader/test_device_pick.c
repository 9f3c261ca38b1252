/* SPDX-License-Identifier: MIT */
/*
 * Description: which GPU a process's loader delivers to, on the CUDA backend
 * under the cudart emulator with 2 and 4 devices.  With no device_index: each
 * launcher variable (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
 * MPI_LOCALRANKID) picks its value modulo the device count, the first one
 * set winning; with none, the calling thread's current device (cudaSetDevice
 * before open), which open leaves current; else 0.  An explicit index (0
 * included) wins over both.  rf_stats.device_ordinal, the device every
 * batch pointer belongs to and the open log line ("cuda:N (why)") agree,
 * with device cuda and auto.  A malformed launcher variable is RF_EUSAGE
 * naming it (auto does not fall back to host); a failed CUDA open logs its
 * error once; the host device reports ordinal -1.
 */
#include "lt.h"
#include "lt_gpu.h"

static const char *const launcher_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
					    "SLURM_LOCALID", "MPI_LOCALRANKID"};

static struct rfemu_api emu;
static char path[512];

struct logbuf {
	char info[4096];
	int errors;
	char last_error[512];
};

static void
logcb(void *user, enum rf_log_level level, const char *msg)
{
	struct logbuf *lb = user;
	if (level == RF_LOG_ERROR) {
		lb->errors++;
		snprintf(lb->last_error, sizeof lb->last_error, "%s", msg);
	}
	size_t n = strlen(lb->info);
	snprintf(lb->info + n, sizeof lb->info - n, "%s\n", msg);
	if (getenv("LT_VERBOSE"))
		fprintf(stderr, "[ringfeed %d] %s\n", (int)level, msg);
}

static void
clear_launcher(void)
{
	for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
		unsetenv(launcher_vars[i]);
}

/* Open with (device, index), stream the whole dataset, and check that every
 * batch lies on device `want` (stats, pointers, log line with `why`). */
static void
expect_device(enum rf_device_kind kind, int index, int want, const char *why, const char *what)
{
	struct logbuf lb;
	memset(&lb, 0, sizeof lb);
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {path};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 16;
	cfg.pinned_bytes = 1 << 20;
	cfg.decode_threads = 1;
	cfg.device = kind;
	if (index != -2)
		cfg.device_index = index;
	cfg.log = logcb;
	cfg.log_user = &lb;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "%s: open failed: %s\n", what, rf_loader_last_open_error());
		lt_failures++;
		return;
	}
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	LT_CHECK(rf_loader_stats(ld, &st) == 0);
	if (st.device_ordinal != want) {
		fprintf(stderr, "%s: device_ordinal %d, want %d (%s)\n", what, st.device_ordinal, want,
			st.device);
		lt_failures++;
	}
	char prefix[24];
	snprintf(prefix, sizeof prefix, "cuda:%d ", want);
	LT_CHECK(strncmp(st.device, prefix, strlen(prefix)) == 0);
	char line[128];
	snprintf(line, sizeof line, "cuda:%d (%s)", want, why);
	if (!strstr(lb.info, line)) {
		fprintf(stderr, "%s: no \"%s\" in the log:\n%s", what, line, lb.info);
		lt_failures++;
	}
	uint64_t batches = 0, first = 0;
	int misplaced = 0;
	for (;;) {
		const rf_batch *b = NULL;
		rc = rf_loader_next(ld, &b);
		if (rc < 0 || !b)
			break;
		LT_CHECK(rf_batch_wait(b, NULL) == 0);
		for (uint32_t f = 0; f < b->nfields; f++) {
			if (emu.pointer_device(b->fields[f].data) != want)
				misplaced++;
			if (b->fields[f].offsets && emu.pointer_device(b->fields[f].offsets) != want)
				misplaced++;
		}
		LT_CHECK(lt_check_batch_any(b, first) == 0);
		first += b->samples;
		batches++;
		LT_CHECK(rf_loader_release(ld, b, NULL) == 0);
	}
	LT_CHECK(rc == 0);
	LT_CHECK(batches > 0 && first == 200);
	if (misplaced) {
		fprintf(stderr, "%s: %d batch pointers not on device %d\n", what, misplaced, want);
		lt_failures++;
	}
	rf_loader_close(&ld);
}

/* Open must fail with `want_rc` and a message containing `needle`, logged
 * exactly once. */
static void
expect_open_error(enum rf_device_kind kind, int index, int want_rc, const char *needle,
		  const char *what)
{
	struct logbuf lb;
	memset(&lb, 0, sizeof lb);
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {path};
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = 16;
	cfg.pinned_bytes = 1 << 20;
	cfg.device = kind;
	cfg.device_index = index;
	cfg.log = logcb;
	cfg.log_user = &lb;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	const char *msg = rf_loader_last_open_error();
	if (rc != want_rc || !strstr(msg, needle) || lb.errors != 1) {
		fprintf(stderr, "%s: rc %d (want %d), %d error lines (want 1), message: %s\n", what,
			rc, want_rc, lb.errors, msg);
		lt_failures++;
	}
	if (ld)
		rf_loader_close(&ld);
}

int
main(void)
{
	if (rfemu_api_load(&emu, NULL) != 0) {
		printf("RINGFEED_CUDART does not name the cudart emulator\n");
		return LT_SKIP;
	}
	lt_on_device = 1; /* every loader here is on the emulator */
	char *dir = lt_tmpdir("devpick");
	snprintf(path, sizeof path, "%s/d.rfs", dir);
	if (lt_pack(dir, "d", 200, 0, 1024, 0, 1) != 0) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	clear_launcher();

	static const int counts[] = {2, 4};
	for (size_t c = 0; c < 2; c++) {
		int n = counts[c];
		char ns[8], what[128], why[96];
		snprintf(ns, sizeof ns, "%d", n);
		LT_CHECK(emu.set_option("RINGFEED_EMU_DEVICES", ns) == 0);
		LT_CHECK(emu.set_device(0) == 0);

		/* Each launcher variable alone, values below and above n. */
		for (size_t v = 0; v < 4; v++) {
			for (unsigned lr = 1; lr <= 5; lr += 2) {
				char val[16];
				snprintf(val, sizeof val, "%u", lr);
				clear_launcher();
				setenv(launcher_vars[v], val, 1);
				snprintf(what, sizeof what, "%d devices, %s=%u", n, launcher_vars[v], lr);
				snprintf(why, sizeof why, "%s=%u of %d devices", launcher_vars[v], lr, n);
				expect_device(RF_DEVICE_CUDA, -2, (int)(lr % (unsigned)n), why, what);
			}
		}
		/* The first one set wins: LOCAL_RANK over SLURM_LOCALID. */
		clear_launcher();
		setenv("SLURM_LOCALID", "0", 1);
		setenv("LOCAL_RANK", "1", 1);
		snprintf(why, sizeof why, "LOCAL_RANK=1 of %d devices", n);
		expect_device(RF_DEVICE_AUTO, -2, 1, why, "LOCAL_RANK and SLURM_LOCALID, auto");

		/* No launcher variable: the thread's current device. */
		clear_launcher();
		LT_CHECK(emu.set_device(n - 1) == 0);
		snprintf(what, sizeof what, "%d devices, cudaSetDevice(%d)", n, n - 1);
		expect_device(RF_DEVICE_CUDA, -2, n - 1, "the calling thread's current device", what);
		int cur = -1;
		LT_CHECK(emu.get_device(&cur) == 0 && cur == n - 1);
		LT_CHECK(emu.set_device(1) == 0);
		expect_device(RF_DEVICE_AUTO, -2, 1, "the calling thread's current device",
			      "cudaSetDevice(1), auto");

		/* An explicit index wins over both, device 0 included. */
		setenv("LOCAL_RANK", "1", 1);
		LT_CHECK(emu.set_device(1) == 0);
		expect_device(RF_DEVICE_CUDA, 0, 0, "device_index", "explicit 0 over LOCAL_RANK=1");
		expect_device(RF_DEVICE_CUDA, n - 1, n - 1, "device_index",
			      "explicit last over LOCAL_RANK=1");
		expect_device(RF_DEVICE_CUDA, RF_DEVICE_INDEX_AUTO, 1, why, "RF_DEVICE_INDEX_AUTO");
		clear_launcher();
		LT_CHECK(emu.set_device(0) == 0);
	}

	/* Malformed launcher variables: a usage error naming the variable,
	 * with auto too (host would hide the mistake). */
	static const char *const bad[] = {"", "-1", "1.0", "x", " 1", "99999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		clear_launcher();
		setenv(i % 2 ? "SLURM_LOCALID" : "LOCAL_RANK", bad[i], 1);
		expect_open_error(RF_DEVICE_CUDA, -1, RF_EUSAGE, i % 2 ? "SLURM_LOCALID" : "LOCAL_RANK",
				  "malformed, cuda");
		expect_open_error(RF_DEVICE_AUTO, -1, RF_EUSAGE, i % 2 ? "SLURM_LOCALID" : "LOCAL_RANK",
				  "malformed, auto");
	}
	clear_launcher();

	/* An index below -1 is a usage error. */
	{
		rf_config cfg;
		rf_config_init(&cfg);
		LT_CHECK(cfg.device_index == RF_DEVICE_INDEX_AUTO);
		const char *paths[] = {path};
		cfg.paths = paths;
		cfg.npaths = 1;
		cfg.device = RF_DEVICE_CUDA;
		cfg.device_index = -2;
		rf_loader *ld = NULL;
		LT_CHECK(rf_loader_open(&ld, &cfg) == RF_EUSAGE && !ld);
	}

	/* A failed CUDA open is logged once. */
	LT_CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "0") == 0);
	expect_open_error(RF_DEVICE_CUDA, -1, RF_ENODEVICE, "cudaErrorNoDevice", "no device");
	LT_CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "2") == 0);

	/* An explicit choice that fails is an error with auto too: host
	 * would hide it.  An index the runtime does not have names the
	 * index and the count. */
	expect_open_error(RF_DEVICE_AUTO, 5, RF_EUSAGE, "device 5 requested",
			  "index 5 of 2, auto");
	expect_open_error(RF_DEVICE_AUTO, 5, RF_EUSAGE, "sees 2 devices", "index 5 of 2, auto");
	expect_open_error(RF_DEVICE_CUDA, 2, RF_EUSAGE, "device 2 requested", "index 2 of 2");
	{
		char *saved = strdup(getenv("RINGFEED_CUDART"));
		setenv("RINGFEED_CUDART", "/nonexistent.so", 1);
		expect_open_error(RF_DEVICE_AUTO, -1, RF_ENODEVICE, "RINGFEED_CUDART=/nonexistent.so",
				  "RINGFEED_CUDART missing, auto");
		setenv("RINGFEED_CUDART", saved, 1);
		free(saved);
	}

	/* The host device has no ordinal. */
	{
		rf_config cfg;
		rf_config_init(&cfg);
		const char *paths[] = {path};
		cfg.paths = paths;
		cfg.npaths = 1;
		cfg.device = RF_DEVICE_HOST;
		cfg.pinned_bytes = 1 << 20;
		rf_loader *ld = NULL;
		LT_CHECK(rf_loader_open(&ld, &cfg) == 0);
		rf_stats st;
		memset(&st, 0, sizeof st);
		st.size = sizeof st;
		LT_CHECK(ld && rf_loader_stats(ld, &st) == 0 && st.device_ordinal == -1);
		rf_loader_close(&ld);
	}

	emu.reset_counters(); /* the failed opens above were on purpose */
	struct rfemu_counters c;
	LT_CHECK(emu.get_counters(&c, sizeof c) == 0);
	LT_CHECK(c.hazards_total == 0 && c.live_allocations == 0 && c.live_streams == 0 &&
		 c.live_registered_ranges == 0);
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
