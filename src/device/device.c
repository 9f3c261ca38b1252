/* SPDX-License-Identifier: MIT */
/* What every backend shares. */
#include <stdlib.h>

#include "device/device.h"

void
rf_device_close(rf_device **dev)
{
	if (!dev || !*dev)
		return;
	(*dev)->ops->close(*dev);
	*dev = NULL;
}

#define LOCAL_RANK_LIMIT (1u << 24)

int
rf_device_local_rank(rf_diag *diag, unsigned *rank, const char **var)
{
	/* In the order a process is likelier to trust: torchrun's own, then
	 * the MPI and Slurm launchers'. */
	static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
					   "SLURM_LOCALID", "MPI_LOCALRANKID"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *s = getenv(vars[i]);
		if (!s)
			continue;
		/* Strict, as the rank is: a misread local rank puts two
		 * processes on one GPU, silently. */
		unsigned long v = 0;
		const char *p = s;
		for (; *p >= '0' && *p <= '9' && v <= LOCAL_RANK_LIMIT; p++)
			v = v * 10 + (unsigned long)(*p - '0');
		if (!*s || *p || v > LOCAL_RANK_LIMIT)
			return rf_fail(diag, RF_EUSAGE,
				       "%s=\"%s\": not a number in 0..%u (it picks this process's "
				       "CUDA device; set device_index to choose one explicitly)",
				       vars[i], s, LOCAL_RANK_LIMIT);
		*rank = (unsigned)v;
		*var = vars[i];
		return 1;
	}
	return 0;
}
