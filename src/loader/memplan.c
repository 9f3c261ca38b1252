/* SPDX-License-Identifier: MIT */
/*
 * The memory plan: batch layout, slot size and counts against the pinned
 * budget and the device, and the open-time policies it depends on.
 */
#include "loader/internal.h"

/* The default capacity of a variable field's region per batch: twice B
 * times the largest per-sample average of any chunk, so a batch of typical
 * samples fits with room for variance (the raw chunk bytes bound every
 * field's bytes in it). */
static int
default_var_bytes(rf_loader *ld, uint64_t *out)
{
	uint64_t per = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		uint64_t a = (ci->raw_bytes + ci->samples - 1) / ci->samples;
		if (a > per)
			per = a;
	}
	uint64_t v;
	if (rf_mul_u64(per, 2ull * ld->cfg.batch_size, &v))
		return -1;
	if (v < 4096)
		v = 4096;
	*out = RF_ALIGN_UP(v, RF_BATCH_ALIGN);
	return 0;
}

/* Bytes the kernel reports as available for new work (MemAvailable), or 0
 * when /proc/meminfo cannot be read. */
static uint64_t
mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[256];
	unsigned long long kib = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

/*
 * direct = -1 (the default) chooses per open: O_DIRECT unless the dataset's
 * stored bytes are at most a quarter of the memory available now.  A
 * dataset that large would push the training program's own memory out of
 * the page cache, and every epoch would evict what the next one needs
 * first; a small one stays cached after the first epoch, and reading it
 * from the cache beats reading the disk every epoch.
 */
void
rf_ld_choose_direct(rf_loader *ld)
{
	if (ld->resolved.direct >= 0)
		return;
	uint64_t stored = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		stored += ld->chunks[c].stored_bytes;
	uint64_t avail = mem_available();
	ld->resolved.direct = !(avail && stored <= avail / 4);
	char a[32], b[32];
	rf_ld_fmt_size(a, sizeof a, stored);
	rf_ld_fmt_size(b, sizeof b, avail);
	rf_log(&ld->diag, RF_LOG_INFO, "reads: %s (dataset %s, memory available %s)",
	       ld->resolved.direct ? "O_DIRECT" : "buffered, the dataset fits in the page cache",
	       a, b);
}

/* Staged batches wanted when the ring has room (see rf_ld_plan_memory). */
#define RF_STAGE_DEEP 16

/* rf_config.tokens: *tok is the selected field to split into int32 inputs
 * and targets (UINT32_MAX: none), after the checks the header lists. */
static int
tokens_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel, uint32_t *tok)
{
	const rf_config *cfg = &ld->cfg;
	const char *ds = rf_dataset_shard_path(ld->ds, 0);
	*tok = UINT32_MAX;
	if (cfg->tokens == RF_TOKENS_STORED)
		return 0;
	/* The layout and its combination with full shuffling: config_check. */
	for (uint32_t i = 0; i < nsel; i++) {
		const char *name = ld->schema->fields[sel[i]].name;
		if (!strcmp(name, "tokens"))
			*tok = i;
		else if (!strcmp(name, "inputs") || !strcmp(name, "targets"))
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout "
				       "names two fields 'inputs' and 'targets', but %s has a field '%s' "
				       "too: leave it out (rf_config.fields)", ds, name);
	}
	if (*tok == UINT32_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "a loaded field named 'tokens' (as `ringfeed pack --llmc` writes); %s "
			       "has none%s", ds, nsel < ld->schema->nfields ? " among the fields loaded" : "");
	const rf_field *f = &ld->schema->fields[sel[*tok]];
	if (!rf_token_field_ok(f))
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "field 'tokens' of %s to hold T + 1 >= 2 tokens of u16, u32 or i32 per "
			       "sample (one fixed dimension); it is %s of %u dimension(s)%s", ds,
			       rf_dtype_name(f->dtype), f->rank, f->var_dim >= 0 ? ", variable" : "");
	if (nsel >= RF_MAX_FIELDS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout makes "
			       "one field two: load at most %d fields", RF_MAX_FIELDS - 1);
	return 0;
}

/* Decide the batch layout, slot size and counts, and check them against the
 * pinned budget and the device's free memory. */
int
rf_ld_plan_memory(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	const rf_config *cfg = &ld->cfg;
	char a[32], b[32], c[32];
	uint64_t var_cap = cfg->var_bytes;
	int has_var = 0;
	for (uint32_t i = 0; i < nsel; i++)
		has_var |= ld->schema->fields[sel[i]].var_dim >= 0;
	if (has_var && var_cap == 0 && default_var_bytes(ld, &var_cap) < 0)
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: the variable-size region of "
			       "a batch overflows: lower batch_size or set var_bytes");
	/* The batch is sized from its delivered layout: with token parts,
	 * int32 inputs and targets rather than the stored tokens. */
	uint32_t tok;
	int rc = tokens_check(ld, sel, nsel, &tok);
	if (rc < 0)
		return rc;
	rc = tok < nsel ? rf_batch_layout_init_tokens(&ld->layout, ld->schema, sel, nsel, tok,
						      cfg->batch_size, var_cap, &ld->diag)
			: rf_batch_layout_init(&ld->layout, ld->schema, sel, nsel, cfg->batch_size,
					       var_cap, &ld->diag);
	if (rc < 0)
		return rc;
	uint64_t bb = ld->layout.bytes;
	uint64_t span = rf_dataset_max_stored_span(ld->ds);
	/* W, resolved at open: part of the order, never sized from the
	 * budget (which may differ between ranks); the ring must hold it. */
	uint32_t wnd = ld->resolved.window;
	uint64_t slot = RF_ALIGN_UP(bb > span ? bb : span, 4096);
	if (ld->full.on) {
		/* No chunk is read whole: a slot is a batch.  Values O_DIRECT
		 * cannot read in place need a bounce area per read in flight,
		 * the largest value's aligned covering range, carved from
		 * slots set aside (see rf_ld_full_main). */
		const rf_batch_part *p0 = &ld->layout.part[0];
		int in_place = ld->layout.nparts == 1 && p0->field == 0 && p0->off == 0 &&
			       p0->value_bytes % 4096 == 0;
		ld->mem.bspan = 0;
		if (ld->resolved.direct && !in_place)
			for (uint32_t i = 0; i < ld->layout.nparts; i++) {
				uint64_t bs = RF_ALIGN_UP(ld->layout.part[i].value_bytes, 4096) + 4096;
				if (bs > ld->mem.bspan)
					ld->mem.bspan = bs;
			}
		/* A sample's checksum row is never 4096-aligned: bounced. */
		uint64_t row = RF_ALIGN_UP(8 * (uint64_t)ld->schema->nfields, 4096) + 4096;
		if (ld->resolved.direct && ld->full.sums && row > ld->mem.bspan)
			ld->mem.bspan = row;
		slot = RF_ALIGN_UP(bb > ld->mem.bspan ? bb : ld->mem.bspan, 4096);
		span = 0;
	}
	if (slot < bb || slot == 0)
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: a batch of %u samples is too "
			       "large: lower batch_size", cfg->batch_size);
	uint64_t nslots = cfg->pinned_bytes / slot;
	ld->mem.slot_bytes = slot;
	if (nslots < 2) {
		rf_ld_fmt_size(a, sizeof a, cfg->pinned_bytes);
		rf_ld_fmt_size(b, sizeof b, bb);
		rf_ld_fmt_size(c, sizeof c, span);
		char need[32];
		rf_ld_fmt_size(need, sizeof need, 2 * slot);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: pinned_bytes %s holds %" PRIu64 " slot(s) of %" PRIu64
			       " bytes (the larger of a batch, %s for batch_size %u, and the largest "
			       "chunk read, %s); the loader needs at least 2 (one read, one staged "
			       "batch): raise pinned_bytes to at least %s or lower batch_size",
			       a, nslots, slot, b, cfg->batch_size, c, need);
	}
	if (nslots > 4096)
		nslots = 4096; /* more slots only add bookkeeping */
	/* Host device: a batch is handed out in the slot it was assembled (or
	 * read) in, with no copy into a separate buffer; the slot goes back
	 * when the batch is released.  Up to depth slots are then the
	 * consumer's, on top of what the pipeline needs.  RINGFEED_HOST_COPY=1
	 * copies instead, as the cuda path does (to compare the two). */
	const char *hc = getenv("RINGFEED_HOST_COPY");
	ld->mem.in_place = rf_device_has(ld->dev, RF_DEVICE_CAP_HOST_MEMORY) &&
			   !(hc && strcmp(hc, "1") == 0);
	unsigned zdepth = ld->mem.in_place ? ld->resolved.depth : 0;
	if (!ld->full.on) {
		/* A read slot holds one chunk: more read slots than the dataset
		 * has chunks (plus the staging side and a window) would be
		 * page-locked for nothing, and locking them costs time at open
		 * (about 1 s per GiB). */
		uint64_t useful = ld->nchunks + RF_STAGE_DEEP + ld->resolved.depth + zdepth + 2 + wnd;
		if (nslots > useful)
			nslots = useful;
	}
	ld->mem.nslots = (unsigned)nslots;
	/* Staging: enough for the copy stage to stay busy (depth + 2 batches,
	 * at least 4 so the gather wakes for several at a time) but never more
	 * than half of the ring: reads keep the disk busy. */
	unsigned want = ld->resolved.depth + 2 > 4 ? ld->resolved.depth + 2 : 4;
	unsigned st = ld->mem.nslots / 2;
	if (st > want)
		st = want;
	if (st < 1)
		st = 1;
	/*
	 * More staged batches absorb a pipeline thread that waits for a core
	 * longer than a few training steps (with 100 us steps on 2 cores, 4
	 * staged batches left the consumer waiting 1.2 % of the time, 16 left
	 * it 0.3 %).  They come only from read slots the dataset cannot use
	 * (more than its chunks): taking reads it can use cost half of the
	 * O_DIRECT read rate with a 64 MiB ring.  The host device's slots lent
	 * to the consumer (zero copy) are staging slots too, added the same
	 * way; without spare reads they come out of the staging share, which
	 * must then hold depth of them and one more.
	 */
	unsigned reads = ld->mem.nslots - st;
	uint64_t need = ld->nchunks + 2 + wnd;
	unsigned spare = reads > need ? (unsigned)(reads - need) : 0;
	unsigned more = (RF_STAGE_DEEP > want ? RF_STAGE_DEEP - want : 0) + zdepth;
	st += spare < more ? spare : more;
	if (ld->mem.in_place && st < ld->resolved.depth + 1)
		ld->mem.in_place = 0; /* too small to lend depth slots: copy */
	ld->mem.n_stage = st;
	ld->mem.n_read = ld->mem.nslots - st;
	if (wnd && ld->mem.n_read < (uint64_t)wnd + 2) {
		/* W chunks held, one read into and one decoded beside them (see
		 * rf_ld_window_setup): W + 2 read slots besides the staging ones. */
		uint64_t slots = (uint64_t)wnd + 2 + want, need_bytes;
		if (rf_mul_u64(slots, slot, &need_bytes))
			need_bytes = UINT64_MAX;
		rf_ld_fmt_size(a, sizeof a, cfg->pinned_bytes);
		rf_ld_fmt_size(b, sizeof b, need_bytes);
		rf_ld_fmt_size(c, sizeof c, slot);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: window shuffling with a window of W = %u chunks needs "
			       "%u read slots of %s besides %u staging ones, pinned_bytes %" PRIu64
			       " (%s); pinned_bytes %" PRIu64 " (%s) gives %u: raise pinned_bytes to "
			       "%" PRIu64 " or set a smaller window (the same on every rank: W is "
			       "part of the order)", wnd, wnd + 2, c, want, need_bytes, b,
			       cfg->pinned_bytes, a, ld->mem.n_read, need_bytes);
	}
	if (ld->full.on) {
		/* Every slot holds a batch (being read or staged), but those set
		 * aside for bounce areas; the queue depth shrinks when the ring
		 * cannot hold bounce areas for all of it and 2 batches. */
		ld->mem.qd = ld->resolved.io_depth;
		ld->mem.nbounce = 0;
		if (ld->mem.bspan) {
			uint64_t per = slot / ld->mem.bspan;
			uint64_t most = (uint64_t)(ld->mem.nslots - 2 < 64 ? ld->mem.nslots - 2 : 64) * per;
			if (ld->mem.qd > most)
				ld->mem.qd = (unsigned)most;
			if (ld->mem.qd == 0)
				return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: pinned_bytes %" PRIu64
					       " holds %u slots of %" PRIu64 " bytes: shuffle full needs "
					       "at least 3: raise pinned_bytes", cfg->pinned_bytes,
					       ld->mem.nslots, slot);
			ld->mem.nbounce = (unsigned)((ld->mem.qd + per - 1) / per);
		}
		ld->mem.n_stage = ld->mem.nslots - ld->mem.nbounce;
		ld->mem.n_read = 0;
		if (ld->mem.in_place && ld->mem.n_stage < ld->resolved.depth + 1)
			ld->mem.in_place = 0;
	}
	/*
	 * Map mode: a read is a chunk faulted in where it lies in its shard's
	 * map, so the ring holds only the staging slots, each the size of a
	 * batch.  The reads still count as chunk-sized slots of the budget:
	 * they bound how far ahead the reader faults chunks in, as far as read
	 * calls would have read ahead, so a map never runs further ahead of the
	 * consumer (and evicts more of the page cache) than pinned_bytes would
	 * allow.
	 */
	ld->mem.n_ring = ld->map.on ? ld->mem.n_stage : ld->mem.nslots;
	ld->mem.ring_slot_bytes = ld->map.on ? RF_ALIGN_UP(bb, 4096) : slot;

	uint64_t dev_bytes = 0;
	if (!ld->mem.in_place && rf_mul_u64(bb, ld->resolved.depth, &dev_bytes))
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: depth x batch bytes overflows");
	size_t fr = 0, tot = 0;
	rc = ld->dev->ops->mem_info(ld->dev, &fr, &tot);
	if (rc == 0 && dev_bytes > fr) {
		rf_ld_fmt_size(a, sizeof a, dev_bytes);
		rf_ld_fmt_size(b, sizeof b, bb);
		rf_ld_fmt_size(c, sizeof c, fr);
		return rf_fail(&ld->diag, RF_EMEMPLAN,
			       "memory plan: device buffers need %s (depth %u x batch %s for "
			       "batch_size %u) but %s has only %s free: lower batch_size or depth",
			       a, ld->resolved.depth, b, cfg->batch_size, ld->dev->desc, c);
	}
	rf_ld_fmt_size(a, sizeof a, (uint64_t)ld->mem.n_ring * ld->mem.ring_slot_bytes);
	rf_ld_fmt_size(b, sizeof b, dev_bytes);
	if (ld->map.on)
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u staging slots of %" PRIu64 " bytes%s; up to %u "
		       "chunks faulted in ahead in the shard maps; device %s = %u x %" PRIu64
		       " bytes", a, ld->mem.n_ring, ld->mem.ring_slot_bytes,
		       ld->mem.in_place ? " (up to depth of them hold batches handed out)" : "",
		       ld->mem.n_read, b, ld->mem.in_place ? 0 : ld->resolved.depth, bb);
	else if (ld->mem.in_place)
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging, "
		       "of which up to %u hold batches handed out: host delivery without a copy)",
		       a, ld->mem.nslots, slot, ld->mem.n_read, ld->mem.n_stage, ld->resolved.depth);
	else
		rf_log(&ld->diag, RF_LOG_INFO,
		       "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging); "
		       "device %s = %u x %" PRIu64 " bytes", a, ld->mem.nslots, slot, ld->mem.n_read,
		       ld->mem.n_stage, b, ld->resolved.depth, bb);
	return 0;
}

/* decode_threads = 0: a worker per CPU for compressed data (up to 8);
 * uncompressed chunks need only checksums and gathers, memory-bound work
 * where a second worker pays only from 4 CPUs (below, it takes the core the
 * consumer needs). */
uint32_t
rf_ld_decode_threads_auto(int compressed)
{
	cpu_set_t set;
	long n = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	if (compressed)
		return n > 8 ? 8 : (uint32_t)n;
	return n >= 4 ? 2 : 1;
}
