/* SPDX-License-Identifier: MIT */
/*
 * Description: every setting the loader refuses is refused before anything
 * is set up: an invalid shuffle mode, rank/world, device or token layout
 * fails with RF_EUSAGE and its message while no device was opened and no
 * memory plan made (no "device:" or "memory plan:" message logged), and the
 * same bad setting gives the same answer whatever the pinned budget (a budget
 * too small for the dataset does not hide it behind a memory plan error).
 */
#include <inttypes.h>

#include "lt.h"

static int nsetup;
static char last[1024];

static void
capture(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	if (strstr(msg, "device:") || strstr(msg, "memory plan:") || strstr(msg, "reads:"))
		nsetup++;
	snprintf(last, sizeof(last), "%s", msg);
}

struct bad {
	const char *what;
	void (*set)(rf_config *cfg);
	const char *msg; /* in the error message */
};

static void set_shuffle(rf_config *cfg) { cfg->shuffle = (enum rf_shuffle)99; }
static void set_rank(rf_config *cfg) { cfg->rank = 3; cfg->world = 2; }
static void set_device(rf_config *cfg) { cfg->device = (enum rf_device_kind)7; }
static void set_tokens(rf_config *cfg) { cfg->tokens = (enum rf_tokens)9; }
static void set_depth(rf_config *cfg) { cfg->depth = RF_DEPTH_MAX + 1; }

static const struct bad bads[] = {
	{"shuffle", set_shuffle, "shuffle 99 is not"},
	{"rank", set_rank, "rank"},
	{"device", set_device, "device 7 is not"},
	{"tokens", set_tokens, "tokens = 9"},
	{"depth", set_depth, "more than 64"},
};

int
main(void)
{
	setenv("RINGFEED_LOG", "debug", 1);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", lt_tmpdir("config-first"));
	if (lt_pack(dir, "d", 200, 0, 1024, 0, 0) < 0) {
		fprintf(stderr, "pack failed\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		/* A budget that fits, and one too small for any memory plan. */
		for (int small = 0; small < 2; small++) {
			struct lt_paths p;
			rf_config cfg;
			lt_config(&cfg, &p, dir, "d.rfs");
			cfg.log = capture;
			cfg.pinned_bytes = small ? 4096 : 8 << 20;
			bads[i].set(&cfg);
			nsetup = 0;
			rf_loader *ld = NULL;
			int rc = rf_loader_open(&ld, &cfg);
			const char *err = rf_loader_last_open_error();
			LT_CHECK(rc == RF_EUSAGE);
			LT_CHECK(ld == NULL);
			LT_CHECK(strstr(err, bads[i].msg) != NULL);
			LT_CHECK(nsetup == 0);
			if (rc != RF_EUSAGE || !strstr(err, bads[i].msg) || nsetup)
				fprintf(stderr, "%s (pinned %" PRIu64 "): rc %d, \"%s\"; %d set-up "
					"messages, the last \"%s\"\n", bads[i].what, cfg.pinned_bytes,
					rc, err, nsetup, last);
			rf_loader_close(&ld);
		}
	}
	lt_rmtree(dir);
	if (lt_failures)
		fprintf(stderr, "%d checks failed\n", lt_failures);
	return lt_failures ? 1 : 0;
}
