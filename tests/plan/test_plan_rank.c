/* SPDX-License-Identifier: MIT */
/*
 * Description: rank and world size resolution: configured values win; else
 * the launcher variables in the documented order (torchrun, Open MPI, PMI,
 * Slurm), with the source reported; inconsistent or malformed values (rank >=
 * world, world 0, signs, spaces, letters, overflow, configured values below
 * -1) are refused with RF_EUSAGE and a message; a configured value that
 * contradicts the launcher's wins with a warning.  Also through the process
 * environment (getenv NULL).
 */
#include "plan_test.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *
fake_getenv(void *user, const char *name)
{
	const char *const *env = user;
	for (; env[0]; env += 2)
		if (strcmp(env[0], name) == 0)
			return env[1];
	return NULL;
}

static void
count_warn(void *user, enum rf_log_level level, const char *msg)
{
	(void)msg;
	if (level == RF_LOG_WARN)
		(*(int *)user)++;
}

static void
expect(int64_t cr, int64_t cw, const char *const *env, uint32_t rank, uint32_t world,
       const char *source)
{
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	uint32_t r = 999, w = 999;
	const char *src = NULL;
	int rc = rf_plan_resolve_rank(cr, cw, fake_getenv, (void *)env, &r, &w, &src, &d);
	CHECK_CONT_MSG(rc == 0, "(%lld, %lld): %s", (long long)cr, (long long)cw, d.msg);
	if (rc == 0)
		CHECK_CONT_MSG(r == rank && w == world && strcmp(src, source) == 0,
		      "(%lld, %lld): got %u/%u from %s, expected %u/%u from %s", (long long)cr,
		      (long long)cw, r, w, src, rank, world, source);
}

static void
refuse(int64_t cr, int64_t cw, const char *const *env, const char *what)
{
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	uint32_t r = 999, w = 999;
	const char *src = NULL;
	int rc = rf_plan_resolve_rank(cr, cw, fake_getenv, (void *)env, &r, &w, &src, &d);
	CHECK_CONT_MSG(rc == RF_EUSAGE, "%s: accepted (%u/%u from %s)", what, r, w, src ? src : "?");
	CHECK_CONT_MSG(d.msg[0] != '\0', "%s: no message", what);
	CHECK_CONT_MSG(r == 999 && w == 999, "%s: outputs written on failure", what);
	if (getenv("PLAN_TEST_VERBOSE"))
		printf("%s: %s\n", what, d.msg);
}

int
main(void)
{
	const char *none[] = {NULL};
	const char *torch[] = {"RANK", "3", "WORLD_SIZE", "8", "OMPI_COMM_WORLD_RANK", "1",
			       "OMPI_COMM_WORLD_SIZE", "2", NULL};
	const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "PMI_RANK", "0",
			      "PMI_SIZE", "4", "SLURM_PROCID", "5", "SLURM_NTASKS", "6", NULL};
	const char *pmi[] = {"PMI_RANK", "0", "PMI_SIZE", "4", "SLURM_PROCID", "5", "SLURM_NTASKS", "6",
			     NULL};
	const char *slurm[] = {"SLURM_PROCID", "5", "SLURM_NTASKS", "6", NULL};
	/* A half-set pair is skipped: the next launcher decides. */
	const char *half[] = {"RANK", "3", "SLURM_PROCID", "1", "SLURM_NTASKS", "2", NULL};
	const char *zeros[] = {"RANK", "007", "WORLD_SIZE", "0010", NULL};

	expect(-1, -1, none, 0, 1, "default");
	expect(2, 4, torch, 2, 4, "config");
	expect(-1, -1, torch, 3, 8, "RANK/WORLD_SIZE");
	expect(-1, -1, ompi, 1, 2, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
	expect(-1, -1, pmi, 0, 4, "PMI_RANK/PMI_SIZE");
	expect(-1, -1, slurm, 5, 6, "SLURM_PROCID/SLURM_NTASKS");
	expect(-1, -1, half, 1, 2, "SLURM_PROCID/SLURM_NTASKS");
	expect(-1, -1, zeros, 7, 10, "RANK/WORLD_SIZE");
	expect(-1, 16, torch, 3, 16, "config+RANK/WORLD_SIZE");
	expect(0, -1, torch, 0, 8, "config+RANK/WORLD_SIZE");
	expect(0, -1, none, 0, 1, "config+default");

	refuse(4, 4, none, "rank == world");
	refuse(0, 0, none, "world 0");
	refuse(-2, 4, none, "rank -2");
	refuse(0, -7, none, "world -7");
	refuse(1, -1, none, "rank 1 without a world");
	refuse(-1, 4, none, "world 4 without a rank");
	refuse(9, -1, torch, "configured rank 9 in an 8-rank world");
	const char *bad[][5] = {
		{"RANK", "8", "WORLD_SIZE", "8", NULL},
		{"RANK", "0", "WORLD_SIZE", "0", NULL},
		{"RANK", "-1", "WORLD_SIZE", "4", NULL},
		{"RANK", "+1", "WORLD_SIZE", "4", NULL},
		{"RANK", "1 ", "WORLD_SIZE", "4", NULL},
		{"RANK", "", "WORLD_SIZE", "4", NULL},
		{"RANK", "1", "WORLD_SIZE", "4x", NULL},
		{"RANK", "0x1", "WORLD_SIZE", "4", NULL},
		{"RANK", "1", "WORLD_SIZE", "99999999999999999999999", NULL},
		{"RANK", "1", "WORLD_SIZE", "16777217", NULL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char what[96];
		snprintf(what, sizeof what, "RANK=\"%s\" WORLD_SIZE=\"%s\"", bad[i][1], bad[i][3]);
		refuse(-1, -1, bad[i], what);
	}

	/* A configured value that contradicts the launcher wins, with a
	 * warning in the log. */
	{
		int warns = 0;
		rf_diag dw;
		rf_diag_init(&dw, count_warn, &warns);
		dw.min_level = RF_LOG_DEBUG; /* whatever RINGFEED_LOG says */
		uint32_t rr, ww;
		const char *ss;
		CHECK_CONT_MSG(rf_plan_resolve_rank(-1, 16, fake_getenv, (void *)torch, &rr, &ww, &ss, &dw) == 0 &&
		      ww == 16 && warns == 1, "world 16 over WORLD_SIZE=8: %u warnings", warns);
		warns = 0;
		CHECK_CONT_MSG(rf_plan_resolve_rank(-1, 8, fake_getenv, (void *)torch, &rr, &ww, &ss, &dw) == 0 &&
		      warns == 0, "agreeing world warned");
	}

	/* The process environment. */
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	uint32_t r, w;
	const char *src;
	CHECK_CONT_MSG(rf_plan_resolve_rank(-1, -1, NULL, NULL, &r, &w, &src, &d) == 0 && r == 2 && w == 3 &&
	      strcmp(src, "RANK/WORLD_SIZE") == 0, "process environment");
	setenv("WORLD_SIZE", "2", 1);
	CHECK_CONT_MSG(rf_plan_resolve_rank(-1, -1, NULL, NULL, &r, &w, &src, &d) == RF_EUSAGE,
	      "process environment: rank 2 of 2 accepted");
	return test_result("test_plan_rank");
}
