/* SPDX-License-Identifier: MIT */
/*
 * Rank and world size: from the configuration, else from the launcher's
 * environment.  A wrong rank silently duplicates or loses data across a job,
 * so every value is parsed strictly and checked against the others.
 */
#include <stdlib.h>

#include "plan/plan.h"

#define RANK_LIMIT (UINT32_C(1) << 24)

static const struct {
	const char *rank, *world, *source, *mixed;
} launchers[] = {
	{"RANK", "WORLD_SIZE", "RANK/WORLD_SIZE", "config+RANK/WORLD_SIZE"},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE",
	 "config+OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"},
	{"PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE", "config+PMI_RANK/PMI_SIZE"},
	{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS", "config+SLURM_PROCID/SLURM_NTASKS"},
};

static const char *
process_getenv(void *user, const char *name)
{
	(void)user;
	return getenv(name);
}

/* A plain decimal number (digits only, at most RANK_LIMIT). */
static int
parse_count(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > RANK_LIMIT)
			return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int
rf_plan_resolve_rank(int64_t cfg_rank, int64_t cfg_world, rf_plan_getenv_fn getenv_fn, void *user,
		     uint32_t *rank, uint32_t *world, const char **source, rf_diag *d)
{
	if (cfg_rank < -1 || cfg_world < -1 || cfg_rank > (int64_t)RANK_LIMIT ||
	    cfg_world > (int64_t)RANK_LIMIT)
		return rf_fail(d, RF_EUSAGE, "rank %lld / world %lld: configured values must be -1 (unset) "
			       "or 0..%u", (long long)cfg_rank, (long long)cfg_world, RANK_LIMIT);
	if (!getenv_fn)
		getenv_fn = process_getenv;
	uint32_t r = 0, w = 1;
	const char *src = "default";
	if (cfg_rank >= 0 && cfg_world >= 0) {
		src = "config";
	} else {
		for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
			const char *rs = getenv_fn(user, launchers[i].rank);
			const char *ws = getenv_fn(user, launchers[i].world);
			if (!rs != !ws)
				rf_log(d, RF_LOG_WARN, "%s is set but %s is not: that pair is ignored",
				       rs ? launchers[i].rank : launchers[i].world,
				       rs ? launchers[i].world : launchers[i].rank);
			if (!rs || !ws)
				continue;
			if (parse_count(rs, &r) < 0 || parse_count(ws, &w) < 0)
				return rf_fail(d, RF_EUSAGE, "%s=\"%s\", %s=\"%s\": not a number in 0..%u",
					       launchers[i].rank, rs, launchers[i].world, ws, RANK_LIMIT);
			src = (cfg_rank >= 0 || cfg_world >= 0) ? launchers[i].mixed : launchers[i].source;
			/* A configured value that contradicts the launcher is
			 * allowed (the configuration wins) but worth a line. */
			if (cfg_world >= 0 && (uint32_t)cfg_world != w)
				rf_log(d, RF_LOG_WARN, "configured world size %lld, %s=%u: using %lld",
				       (long long)cfg_world, launchers[i].world, w, (long long)cfg_world);
			if (cfg_rank >= 0 && (uint32_t)cfg_rank != r)
				rf_log(d, RF_LOG_WARN, "configured rank %lld, %s=%u: using %lld",
				       (long long)cfg_rank, launchers[i].rank, r, (long long)cfg_rank);
			break;
		}
	}
	if ((cfg_rank >= 0) != (cfg_world >= 0) && src[0] == 'd') {
		/* Every process would take rank 0's share. */
		if (cfg_world > 1)
			return rf_fail(d, RF_EUSAGE, "world size %lld configured without a rank, and "
				       "no launcher variable gives one (RANK, OMPI_COMM_WORLD_RANK, "
				       "PMI_RANK, SLURM_PROCID): set the rank too",
				       (long long)cfg_world);
		src = "config+default";
	}
	if (cfg_rank >= 0)
		r = (uint32_t)cfg_rank;
	if (cfg_world >= 0)
		w = (uint32_t)cfg_world;
	if (w == 0)
		return rf_fail(d, RF_EUSAGE, "world size 0 (from %s)", src);
	if (r >= w)
		return rf_fail(d, RF_EUSAGE, "rank %u is not below the world size %u (from %s)", r, w, src);
	*rank = r;
	*world = w;
	*source = src;
	return 0;
}
