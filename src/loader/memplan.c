/* SPDX-License-Identifier: MIT */
/*
 * The memory plan (memplan.h): a pure function of the batch layout, the
 * dataset's chunk count and largest read, the budget and the modes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format/format.h"
#include "loader/memplan.h"

void
rf_memplan_fmt_size(char *buf, size_t cap, uint64_t b)
{
	if (b >= (1ull << 30))
		snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
	else if (b >= (1ull << 20))
		snprintf(buf, cap, "%.2f MiB", (double)b / (double)(1ull << 20));
	else if (b >= (1ull << 10))
		snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
	else
		snprintf(buf, cap, "%" PRIu64 " B", b);
}

/* The largest batch size below in->batch_size whose slot, max(batch, span)
 * rounded up to 4096, is at most `limit`: 0 when none is, or when a part is
 * variable (its data region is var_bytes, not a batch size's). */
static uint32_t
batch_size_within(const struct rf_memplan_in *in, uint64_t span, uint64_t limit)
{
	const rf_batch_layout *l = in->layout;
	uint64_t per = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		if (l->part[i].var)
			return 0;
		per += l->part[i].value_bytes;
	}
	if (per == 0 || RF_ALIGN_UP(span, RF_FMT_ALIGN) > limit)
		return 0;
	uint64_t k = limit / per;
	if (k >= in->batch_size)
		k = in->batch_size - 1;
	for (; k > 0; k--) {
		/* Each part starts 256-aligned (rf_batch_layout_init). */
		uint64_t bytes = 0;
		for (uint32_t i = 0; i < l->nparts; i++)
			bytes = RF_ALIGN_UP(bytes, RF_BATCH_ALIGN) + k * l->part[i].value_bytes;
		bytes = RF_ALIGN_UP(bytes, RF_BATCH_ALIGN);
		if (RF_ALIGN_UP(bytes > span ? bytes : span, RF_FMT_ALIGN) <= limit)
			return (uint32_t)k;
	}
	return 0;
}

/* A window of W chunks does not fit the budget even with a single staging
 * slot: say what would hold it, exactly. */
static int
window_fail(const struct rf_memplan_in *in, uint64_t slot, uint64_t span, uint64_t nslots,
	    unsigned want, rf_diag *d)
{
	char a[32], b[32], c[32], e[32], f[32], g[32];
	uint32_t wnd = in->window;
	uint64_t bb = in->layout->bytes;
	uint64_t least, full;
	if (rf_mul_u64((uint64_t)wnd + 3, slot, &least))
		least = UINT64_MAX;
	if (rf_mul_u64((uint64_t)wnd + 2 + want, slot, &full))
		full = UINT64_MAX;
	rf_memplan_fmt_size(a, sizeof a, in->pinned_bytes);
	rf_memplan_fmt_size(b, sizeof b, slot);
	rf_memplan_fmt_size(c, sizeof c, bb);
	rf_memplan_fmt_size(e, sizeof e, span);
	rf_memplan_fmt_size(f, sizeof f, least);
	rf_memplan_fmt_size(g, sizeof g, full);
	/* The other ways out: a batch no larger than a chunk (when the
	 * batch sizes the slots), a smaller window on every rank. */
	char other[256] = "";
	size_t len = 0;
	uint32_t k = bb > span ? batch_size_within(in, span, in->pinned_bytes / ((uint64_t)wnd + 3)) : 0;
	if (k)
		len += (size_t)snprintf(other + len, sizeof other - len, ", or lower batch_size to %u%s",
					k, k > 1 ? " or less" : "");
	if (nslots >= 4 && in->mix)
		snprintf(other + len, sizeof other - len, ", or set a smaller window (on every "
			 "rank: W is part of the order)");
	else if (nslots >= 4)
		snprintf(other + len, sizeof other - len, ", or set window to %" PRIu64 " or less "
			 "on every rank (W is part of the order)", nslots - 3);
	else if (!k && span * 4 > in->pinned_bytes)
		snprintf(other + len, sizeof other - len, ", or repack the dataset in smaller "
			 "chunks (ringfeed pack --chunk-bytes, Python chunk_bytes=)");
	return rf_fail(d, RF_EMEMPLAN,
		       "memory plan: window shuffling with a window of W = %u chunks needs W + 2 = %u "
		       "read slots and a staging one, %u slots of %s (the larger of a batch, %s for "
		       "batch_size %u, and the largest chunk read, %s); pinned_bytes %" PRIu64 " (%s) "
		       "holds %" PRIu64 ": raise pinned_bytes to %" PRIu64 " (%s; %" PRIu64 " (%s) "
		       "for %u staging slots, full speed)%s",
		       wnd, wnd + 2, wnd + 3, b, c, in->batch_size, e, in->pinned_bytes, a, nslots,
		       least, f, full, g, want, other);
}

int
rf_memplan_compute(const struct rf_memplan_in *in, struct rf_memplan *out, rf_diag *d)
{
	char a[32], b[32], c[32];
	struct rf_memplan mp = {0};
	const rf_batch_layout *l = in->layout;
	uint64_t bb = l->bytes;
	uint64_t span = in->max_span;
	/* W: part of the order, never sized from the budget (which may differ
	 * between ranks); the ring must hold it. */
	uint32_t wnd = in->window;
	uint64_t slot = RF_ALIGN_UP(bb > span ? bb : span, RF_FMT_ALIGN);
	if (in->full) {
		/* No chunk is read whole: a slot is a batch.  Values O_DIRECT
		 * cannot read in place need a bounce area per read in flight,
		 * the largest value's aligned covering range, carved from
		 * slots set aside (see rf_ld_full_main). */
		const rf_batch_part *p0 = &l->part[0];
		int in_place = l->nparts == 1 && p0->field == 0 && p0->off == 0 &&
			       p0->value_bytes % RF_FMT_ALIGN == 0;
		if (in->direct && !in_place)
			for (uint32_t i = 0; i < l->nparts; i++) {
				uint64_t bs = RF_ALIGN_UP(l->part[i].value_bytes, RF_FMT_ALIGN) +
					      RF_FMT_ALIGN;
				if (bs > mp.bspan)
					mp.bspan = bs;
			}
		/* A sample's checksum row is never 4096-aligned: bounced. */
		uint64_t row = RF_ALIGN_UP(8 * (uint64_t)in->nfields, RF_FMT_ALIGN) + RF_FMT_ALIGN;
		if (in->direct && in->sums && row > mp.bspan)
			mp.bspan = row;
		slot = RF_ALIGN_UP(bb > mp.bspan ? bb : mp.bspan, RF_FMT_ALIGN);
		span = 0;
	}
	/* Variable fields' data regions (var_bytes, by default sized from
	 * whole samples, images included) can be most of a batch: say so. */
	char vmsg[320] = "";
	uint64_t vbytes = 0;
	unsigned nvar = 0;
	for (uint32_t i = 0; i < l->nparts; i++)
		if (l->part[i].var) {
			vbytes += l->part[i].cap;
			nvar++;
		}
	if (nvar) {
		rf_memplan_fmt_size(a, sizeof a, vbytes);
		snprintf(vmsg, sizeof vmsg, "; of a batch, %s is the data of %u variable-size "
			 "field(s), var_bytes each (by default twice batch_size x the largest "
			 "average sample, all fields counted): load only the fields needed "
			 "(rf_config.fields, Python fields=[...]) or set var_bytes", a, nvar);
	}
	if (slot < bb || slot == 0)
		return rf_fail(d, RF_EMEMPLAN, "memory plan: a batch of %u samples is too "
			       "large: lower batch_size%s", in->batch_size, vmsg);
	uint64_t nslots = in->pinned_bytes / slot;
	mp.slot_bytes = slot;
	/* W + 2 read slots and a staging one, at least. */
	if (wnd && !in->full && nslots < (uint64_t)wnd + 3) {
		unsigned want = (in->depth + 2 > 4 ? in->depth + 2 : 4);
		return window_fail(in, slot, span, nslots, want, d);
	}
	if (nslots < 2) {
		rf_memplan_fmt_size(a, sizeof a, in->pinned_bytes);
		rf_memplan_fmt_size(b, sizeof b, bb);
		rf_memplan_fmt_size(c, sizeof c, span);
		char need[32];
		rf_memplan_fmt_size(need, sizeof need, 2 * slot);
		/* What sizes the slot is what to lower: the batch, or the
		 * chunks (which only a repack changes). */
		const char *lower = span > bb ? " or repack the dataset in smaller chunks "
						"(ringfeed pack --chunk-bytes, Python chunk_bytes=)"
					      : " or lower batch_size";
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: pinned_bytes %s holds %" PRIu64 " slot(s) of %" PRIu64
			       " bytes (the larger of a batch, %s for batch_size %u, and the largest "
			       "chunk read, %s); the loader needs at least 2 (one read, one staged "
			       "batch): raise pinned_bytes to at least %s%s%s",
			       a, nslots, slot, b, in->batch_size, c, need, lower, vmsg);
	}
	if (nslots > RF_MEMPLAN_SLOTS_MAX)
		nslots = RF_MEMPLAN_SLOTS_MAX;
	/* Host memory: a batch is handed out in the slot it was assembled (or
	 * read) in, with no copy into a separate buffer; the slot goes back
	 * when the batch is released.  Up to depth slots are then the
	 * consumer's, on top of what the pipeline needs. */
	mp.in_place = in->host_memory;
	unsigned zdepth = mp.in_place ? in->depth : 0;
	if (!in->full) {
		/* A read slot holds one chunk: more read slots than the dataset
		 * has chunks (plus the staging side and a window) would be
		 * page-locked for nothing, and locking them costs time at open
		 * (about 1 s per GiB). */
		uint64_t useful = in->nchunks + RF_MEMPLAN_STAGE_DEEP + in->depth + zdepth + 2 + wnd;
		if (nslots > useful)
			nslots = useful;
	}
	/* The default budget is shared by the process's loaders: one takes
	 * the reads it keeps in flight (io_depth, at most the dataset's
	 * chunks past the window) besides the W held and the two beside them
	 * (W itself is never sized from the budget), and depth + 2
	 * staged batches (and depth more lent in place), so a validation
	 * set's loader stays small and a notebook cell re-run fits. */
	uint64_t lean_total = 0;
	/* Several decode workers fill the batches their chunks go to at once
	 * (the parallel fill, src/loader/gather.c): as many batches as their
	 * chunks span, besides those staged for the copy, or the last worker
	 * to need a new batch makes its copies in its turn, alone.  Not the
	 * window's, mixtures' or full shuffling's, which fill one at a time. */
	unsigned filling = 0;
	if (in->workers > 1 && !wnd && !in->full && bb) {
		uint64_t f = ((uint64_t)in->workers * span + bb - 1) / bb;
		filling = f < RF_MEMPLAN_STAGE_DEEP ? (unsigned)f : RF_MEMPLAN_STAGE_DEEP;
	}
	unsigned want0 = (in->depth + 2 > 4 ? in->depth + 2 : 4) + filling;
	if (in->lean) {
		/* Reads ahead of the window: none past the dataset's chunks. */
		uint64_t ahead = in->nchunks > wnd ? in->nchunks - wnd : 1;
		uint64_t inflight = in->full ? 2 : (ahead < in->io_depth ? ahead : in->io_depth);
		lean_total = (uint64_t)wnd + 2 + inflight + want0 + zdepth;
		if (in->full && slot) {
			uint64_t bs = mp.bspan ? (slot / mp.bspan ? slot / mp.bspan : 1) : 0;
			uint64_t nb = bs ? (in->io_depth + bs - 1) / bs : 0;
			lean_total += nb < RF_MEMPLAN_BOUNCE_SLOTS_MAX ? nb : RF_MEMPLAN_BOUNCE_SLOTS_MAX;
		}
		if (nslots > lean_total)
			nslots = lean_total;
	}
	mp.nslots = (unsigned)nslots;
	/* Staging: enough for the copy stage to stay busy (depth + 2 batches,
	 * at least 4 so the gather wakes for several at a time) but never more
	 * than half of the ring: reads keep the disk busy. */
	unsigned want = (in->depth + 2 > 4 ? in->depth + 2 : 4) + filling;
	unsigned st = mp.nslots / 2;
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
	 * to the consumer (in place) are staging slots too, added the same
	 * way; without spare reads they come out of the staging share, which
	 * must then hold depth of them and one more.
	 */
	unsigned reads = mp.nslots - st;
	uint64_t need = in->nchunks + 2 + wnd;
	unsigned spare = reads > need ? (unsigned)(reads - need) : 0;
	unsigned more = (RF_MEMPLAN_STAGE_DEEP > want ? RF_MEMPLAN_STAGE_DEEP - want : 0) + zdepth;
	st += spare < more ? spare : more;
	if (in->lean && nslots == lean_total && !in->full)
		st = want + zdepth;
	/* The window's W + 2 read slots come first: W is part of the order,
	 * the staging share only speed.  With large chunks (a ring of a few
	 * slots) the staging share gives way, down to one slot. */
	if (wnd && !in->full && mp.nslots - st < wnd + 2 && mp.nslots >= (uint64_t)wnd + 3)
		st = mp.nslots - (wnd + 2);
	if (mp.in_place && st < in->depth + 1)
		mp.in_place = 0; /* too small to lend depth slots: copy */
	mp.n_stage = st;
	mp.n_read = mp.nslots - st;
	if (wnd && !in->full && mp.n_read < (uint64_t)wnd + 2) {
		/* W chunks held, one read into and one decoded beside them (see
		 * rf_ld_window_setup): W + 2 read slots besides the staging ones. */
		uint64_t slots = (uint64_t)wnd + 2 + want, need_bytes;
		if (rf_mul_u64(slots, slot, &need_bytes))
			need_bytes = UINT64_MAX;
		rf_memplan_fmt_size(a, sizeof a, in->pinned_bytes);
		rf_memplan_fmt_size(b, sizeof b, need_bytes);
		rf_memplan_fmt_size(c, sizeof c, slot);
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: window shuffling with a window of W = %u chunks needs "
			       "%u read slots of %s besides %u staging ones, pinned_bytes %" PRIu64
			       " (%s); pinned_bytes %" PRIu64 " (%s) gives %u: raise pinned_bytes to "
			       "%" PRIu64 " or set a smaller window (the same on every rank: W is "
			       "part of the order)", wnd, wnd + 2, c, want, need_bytes, b,
			       in->pinned_bytes, a, mp.n_read, need_bytes);
	}
	if (in->full) {
		/* Every slot holds a batch (being read or staged), but those set
		 * aside for bounce areas; the queue depth shrinks when the ring
		 * cannot hold bounce areas for all of it and 2 batches. */
		mp.qd = in->io_depth;
		mp.nbounce = 0;
		if (mp.bspan) {
			uint64_t per = slot / mp.bspan;
			uint64_t most = (uint64_t)(mp.nslots - 2 < RF_MEMPLAN_BOUNCE_SLOTS_MAX
							   ? mp.nslots - 2
							   : RF_MEMPLAN_BOUNCE_SLOTS_MAX) * per;
			if (mp.qd > most)
				mp.qd = (unsigned)most;
			if (mp.qd == 0)
				return rf_fail(d, RF_EMEMPLAN, "memory plan: pinned_bytes %" PRIu64
					       " holds %u slots of %" PRIu64 " bytes: shuffle full needs "
					       "at least 3: raise pinned_bytes", in->pinned_bytes,
					       mp.nslots, slot);
			mp.nbounce = (unsigned)((mp.qd + per - 1) / per);
		}
		mp.n_stage = mp.nslots - mp.nbounce;
		mp.n_read = 0;
		if (mp.in_place && mp.n_stage < in->depth + 1)
			mp.in_place = 0;
	} else {
		mp.qd = in->io_depth < mp.n_read ? in->io_depth : mp.n_read;
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
	mp.n_ring = in->map ? mp.n_stage : mp.nslots;
	mp.ring_slot_bytes = in->map ? RF_ALIGN_UP(bb, RF_FMT_ALIGN) : slot;

	if (!mp.in_place && rf_mul_u64(bb, in->depth, &mp.dev_bytes))
		return rf_fail(d, RF_EMEMPLAN, "memory plan: depth x batch bytes overflows");
	if (in->dev_free_known && mp.dev_bytes > in->dev_free) {
		rf_memplan_fmt_size(a, sizeof a, mp.dev_bytes);
		rf_memplan_fmt_size(b, sizeof b, bb);
		rf_memplan_fmt_size(c, sizeof c, in->dev_free);
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: device buffers need %s (depth %u x batch %s for "
			       "batch_size %u) but %s has only %s free: lower batch_size or depth",
			       a, in->depth, b, in->batch_size, in->dev_desc, c);
	}
	/* Decoded images: a chunk of them per worker (rf_config.images). */
	if (rf_mul_u64(in->worker_bytes, in->workers, &mp.decode_bytes) ||
	    mp.decode_bytes > RF_IMAGE_DECODE_BYTES_MAX) {
		rf_memplan_fmt_size(a, sizeof a, in->worker_bytes);
		rf_memplan_fmt_size(b, sizeof b, RF_IMAGE_DECODE_BYTES_MAX);
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: %u decode workers x %s of decoded images (a chunk "
			       "each) is more than %s: pack the images in smaller chunks (`ringfeed "
			       "pack --chunk-bytes`), or lower the output size or decode_threads",
			       in->workers, a, b);
	}
	*out = mp;
	return 0;
}

void
rf_memplan_describe(const struct rf_memplan_in *in, const struct rf_memplan *mp, char *buf,
		    size_t cap)
{
	char a[32], b[32];
	uint64_t bb = in->layout->bytes;
	rf_memplan_fmt_size(a, sizeof a, (uint64_t)mp->n_ring * mp->ring_slot_bytes);
	rf_memplan_fmt_size(b, sizeof b, mp->dev_bytes);
	if (in->map)
		snprintf(buf, cap,
			 "memory plan: pinned %s = %u staging slots of %" PRIu64 " bytes%s; up to %u "
			 "chunks faulted in ahead in the shard maps; device %s = %u x %" PRIu64
			 " bytes", a, mp->n_ring, mp->ring_slot_bytes,
			 mp->in_place ? " (up to depth of them hold batches handed out)" : "",
			 mp->n_read, b, mp->in_place ? 0 : in->depth, bb);
	else if (mp->in_place)
		snprintf(buf, cap,
			 "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging, "
			 "of which up to %u hold batches handed out: host delivery without a copy)",
			 a, mp->nslots, mp->slot_bytes, mp->n_read, mp->n_stage, in->depth);
	else
		snprintf(buf, cap,
			 "memory plan: pinned %s = %u slots of %" PRIu64 " bytes (%u read, %u staging); "
			 "device %s = %u x %" PRIu64 " bytes", a, mp->nslots, mp->slot_bytes,
			 mp->n_read, mp->n_stage, b, in->depth, bb);
	if (in->host_memory && !mp->in_place) {
		/* Why a host device gets copies (and no batches in place). */
		size_t len = strlen(buf);
		snprintf(buf + len, cap > len ? cap - len : 0, "; batches copied on the host: "
			 "the staging share cannot lend depth + 1 = %u slots (raise pinned_bytes, "
			 "or lower depth, to hand batches out without a copy or in place)",
			 in->depth + 1);
	}
	if (mp->decode_bytes) {
		size_t len = strlen(buf);
		rf_memplan_fmt_size(a, sizeof a, mp->decode_bytes);
		rf_memplan_fmt_size(b, sizeof b, in->worker_scratch);
		snprintf(buf + len, cap > len ? cap - len : 0, "; decode %s = %u workers x %" PRIu64
			 " bytes of decoded images, and a decoder scratch each that grows as "
			 "images need, to at most %s", a, in->workers, in->worker_bytes, b);
	}
}
