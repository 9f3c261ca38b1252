/* SPDX-License-Identifier: MIT */
/*
 * The effective values of settings that the front ends show before, or
 * without, opening a loader: the rank and world size a process will take,
 * and the batches of an epoch.  Each is the loader's own rule (src/plan),
 * so a front end that reports them never drifts from what the loader does.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "plan/plan.h"

/* Collects the warnings of a resolution for the caller's buffer. */
struct msg_sink {
	char *buf;
	size_t cap;
};

static void
sink_log(void *user, enum rf_log_level level, const char *msg)
{
	struct msg_sink *s = user;
	if (level != RF_LOG_WARN || !s->buf || !s->cap)
		return;
	size_t len = strlen(s->buf);
	snprintf(s->buf + len, s->cap - len, "%s%s", len ? "; " : "", msg);
}

RF_API int
rf_rank_resolve(int32_t rank, int32_t world, uint32_t *rank_out, uint32_t *world_out,
		const char **source, char *msg, size_t msg_cap)
{
	struct msg_sink sink = {msg, msg_cap};
	rf_diag d;
	uint32_t r, w;
	const char *src;

	if (msg && msg_cap)
		msg[0] = '\0';
	rf_diag_init(&d, sink_log, &sink);
	/* Warnings are the caller's to show whatever RINGFEED_LOG says; the
	 * error goes to d.msg, not through the sink. */
	d.min_level = RF_LOG_WARN;
	d.errors_quiet = 1;
	int rc = rf_plan_resolve_rank(rank, world, NULL, NULL, &r, &w, &src, &d);
	if (rc < 0) {
		if (msg && msg_cap)
			snprintf(msg, msg_cap, "%s", d.msg);
		return rc;
	}
	if (rank_out)
		*rank_out = r;
	if (world_out)
		*world_out = w;
	if (source)
		*source = src;
	return 0;
}

RF_API int
rf_epoch_batches(uint64_t samples, uint32_t batch_size, uint32_t rank, uint32_t world,
		 int drop_last, uint64_t *out)
{
	if (!out || batch_size == 0 || world == 0 || rank >= world)
		return RF_EUSAGE;
	*out = rf_plan_epoch_batches(samples, world, batch_size,
				     drop_last ? RF_PLAN_DROP : RF_PLAN_KEEP);
	return 0;
}
