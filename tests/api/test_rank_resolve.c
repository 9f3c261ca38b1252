/* SPDX-License-Identifier: MIT */
/*
 * Description: rf_rank_resolve gives the rank and world size rf_loader_open
 * takes: the configured pair, each launcher's variables in turn (torchrun,
 * Open MPI, MPICH/Intel MPI, Slurm) in their order of precedence, a pair half
 * set ignored with a warning, a configured value winning over the
 * launcher's, and RF_EUSAGE with a message for malformed variables, world 0,
 * rank >= world and a world without a rank.
 */
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

#include "rf_test.h"

static const char *const vars[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
				   "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
				   "SLURM_PROCID", "SLURM_NTASKS"};

static void
clear_env(void)
{
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

/* rank/world from (cfg_rank, cfg_world) must be (r, w) from `source`. */
static void
expect(int32_t cr, int32_t cw, uint32_t r, uint32_t w, const char *source, const char *warn)
{
	uint32_t gr = 99, gw = 99;
	const char *src = NULL;
	char msg[512];
	int rc = rf_rank_resolve(cr, cw, &gr, &gw, &src, msg, sizeof msg);
	if (rc != 0 || gr != r || gw != w || !src || strcmp(src, source) ||
	    (warn ? !strstr(msg, warn) : msg[0] != '\0')) {
		fprintf(stderr, "rank %d world %d: rc %d, %u/%u from %s (%s); want %u/%u from %s "
			"(%s)\n", cr, cw, rc, gr, gw, src ? src : "?", msg, r, w, source,
			warn ? warn : "");
		exit(1);
	}
}

static void
refuse(int32_t cr, int32_t cw, const char *needle)
{
	uint32_t gr = 99, gw = 99;
	const char *src = "untouched";
	char msg[512];
	int rc = rf_rank_resolve(cr, cw, &gr, &gw, &src, msg, sizeof msg);
	if (rc != RF_EUSAGE || gr != 99 || gw != 99 || strcmp(src, "untouched") ||
	    !strstr(msg, needle)) {
		fprintf(stderr, "rank %d world %d: rc %d, %u/%u, '%s'; want RF_EUSAGE naming '%s'\n",
			cr, cw, rc, gr, gw, msg, needle);
		exit(1);
	}
}

int
main(void)
{
	static const struct {
		const char *rank, *world, *source;
	} launchers[] = {
		{"RANK", "WORLD_SIZE", "RANK/WORLD_SIZE"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		 "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS"},
	};
	clear_env();
	expect(-1, -1, 0, 1, "default", NULL);
	expect(2, 4, 2, 4, "config", NULL);
	expect(0, -1, 0, 1, "config+default", NULL);
	refuse(-1, 4, "set the rank too");
	refuse(3, 3, "not below the world size");
	refuse(-1, 0, "world size 0");
	refuse(-2, 1, "configured values");
	refuse(0, RF_WORLD_MAX + 1, "configured values");
	expect(RF_WORLD_MAX - 1, RF_WORLD_MAX, RF_WORLD_MAX - 1, RF_WORLD_MAX, "config", NULL);

	/* Each launcher alone, then with every later one set too (the earlier
	 * wins), then half set (ignored, with a warning). */
	for (size_t i = 0; i < 4; i++) {
		clear_env();
		setenv(launchers[i].rank, "3", 1);
		setenv(launchers[i].world, "8", 1);
		expect(-1, -1, 3, 8, launchers[i].source, NULL);
		for (size_t j = i + 1; j < 4; j++) {
			setenv(launchers[j].rank, "1", 1);
			setenv(launchers[j].world, "2", 1);
		}
		expect(-1, -1, 3, 8, launchers[i].source, NULL);
		/* The configured value wins, with a warning when it differs. */
		char mixed[128];
		snprintf(mixed, sizeof mixed, "config+%s", launchers[i].source);
		expect(5, -1, 5, 8, mixed, "configured rank 5");
		expect(-1, 8, 3, 8, mixed, NULL);
		refuse(9, -1, "not below the world size");

		clear_env();
		setenv(launchers[i].rank, "1", 1);
		expect(-1, -1, 0, 1, "default", "is set but");
		clear_env();
		setenv(launchers[i].world, "4", 1);
		expect(-1, -1, 0, 1, "default", "is set but");
		refuse(-1, 4, "set the rank too");

		/* Malformed values are refused, never read as 0. */
		static const char *const junk[] = {"", "-1", "1.0", " 1", "0x2", "two", "16777217"};
		for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++) {
			clear_env();
			setenv(launchers[i].rank, junk[k], 1);
			setenv(launchers[i].world, "4", 1);
			refuse(-1, -1, launchers[i].rank);
			clear_env();
			setenv(launchers[i].rank, "0", 1);
			setenv(launchers[i].world, junk[k], 1);
			refuse(-1, -1, launchers[i].world);
		}
		clear_env();
		setenv(launchers[i].rank, "4", 1);
		setenv(launchers[i].world, "4", 1);
		refuse(-1, -1, launchers[i].source);
		setenv(launchers[i].rank, "0", 1);
		setenv(launchers[i].world, "0", 1);
		refuse(-1, -1, "world size 0");
	}

	/* Outputs and message may be NULL. */
	clear_env();
	CHECK_RC(rf_rank_resolve(-1, -1, NULL, NULL, NULL, NULL, 0), 0);
	CHECK_RC(rf_rank_resolve(1, 1, NULL, NULL, NULL, NULL, 0), RF_EUSAGE);
	char tiny[4];
	CHECK_RC(rf_rank_resolve(1, 1, NULL, NULL, NULL, tiny, sizeof tiny), RF_EUSAGE);
	CHECK(strlen(tiny) == 3);
	return 0;
}
