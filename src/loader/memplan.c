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

/* The largest batch size below in->batch_size whose staging slot (the
 * batch rounded up to 4096) is at most `limit`: 0 when none is, or when a
 * part is variable (its data region is var_bytes, not a batch size's). */
static uint32_t
batch_size_within(const struct rf_memplan_in *in, uint64_t limit)
{
	const rf_batch_layout *l = in->layout;
	uint64_t per = 0;
	for (uint32_t i = 0; i < l->nparts; i++) {
		if (l->part[i].var)
			return 0;
		per += l->part[i].value_bytes;
	}
	if (per == 0)
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
		if (RF_ALIGN_UP(bytes, RF_FMT_ALIGN) <= limit)
			return (uint32_t)k;
	}
	return 0;
}

/* A window of W chunks does not fit the budget even with a single staging
 * slot: say what would hold it, exactly. */
static int
window_fail(const struct rf_memplan_in *in, uint64_t rslot, uint64_t sslot, unsigned want,
	    rf_diag *d)
{
	char a[32], b[32], c[32], e[32], f[32], g[32];
	uint32_t wnd = in->window;
	uint64_t P = in->pinned_bytes;
	uint64_t reads_bytes, least, full;
	if (rf_mul_u64((uint64_t)wnd + 2, rslot, &reads_bytes))
		reads_bytes = UINT64_MAX - sslot * want;
	least = reads_bytes + sslot;
	full = reads_bytes + sslot * want;
	rf_memplan_fmt_size(a, sizeof a, P);
	rf_memplan_fmt_size(b, sizeof b, rslot);
	rf_memplan_fmt_size(c, sizeof c, in->layout->bytes);
	rf_memplan_fmt_size(e, sizeof e, sslot);
	rf_memplan_fmt_size(f, sizeof f, least);
	rf_memplan_fmt_size(g, sizeof g, full);
	/* The other ways out: a smaller batch (when the window's reads fit
	 * and the staging slot does not), a smaller window on every rank. */
	char other[256] = "";
	size_t len = 0;
	uint64_t fit = P > sslot ? (P - sslot) / rslot : 0; /* read slots beside a staging one */
	uint32_t k = P > reads_bytes ? batch_size_within(in, P - reads_bytes) : 0;
	if (k)
		len += (size_t)snprintf(other + len, sizeof other - len, ", or lower batch_size to %u%s",
					k, k > 1 ? " or less" : "");
	if (fit >= 3 && in->mix)
		snprintf(other + len, sizeof other - len, ", or set a smaller window (on every "
			 "rank: W is part of the order)");
	else if (fit == 3)
		snprintf(other + len, sizeof other - len, ", or set window to 1 on every rank (W "
			 "is part of the order)");
	else if (fit > 3)
		snprintf(other + len, sizeof other - len, ", or set window to a value from 1 to "
			 "%" PRIu64 " on every rank (W is part of the order)", fit - 2);
	else if (!k && rslot * 4 > P)
		snprintf(other + len, sizeof other - len, ", or repack the dataset in smaller "
			 "chunks (ringfeed pack --chunk-bytes, Python chunk_bytes=)");
	return rf_fail(d, RF_EMEMPLAN,
		       "memory plan: window shuffling with a window of W = %u chunks needs W + 2 = %u "
		       "read slots of %s (the largest chunk read) and a staging slot of %s (a batch, "
		       "%s for batch_size %u); pinned_bytes %" PRIu64 " (%s) holds %" PRIu64 " read "
		       "slots beside a staging one: raise pinned_bytes to %" PRIu64 " (%s; %" PRIu64
		       " (%s) for %u staging slots, full speed)%s",
		       wnd, wnd + 2, b, e, c, in->batch_size, P, a, fit, least, f, full, g, want,
		       other);
}

/* Full shuffling: no chunk is read whole, every slot is a staging slot
 * (a batch being read into or staged, or bounce areas). */
static int
plan_full(const struct rf_memplan_in *in, struct rf_memplan *mp, unsigned want0, const char *vmsg,
	  rf_diag *d)
{
	const rf_batch_layout *l = in->layout;
	uint64_t bb = l->bytes;
	/* Values O_DIRECT cannot read in place need a bounce area per read
	 * in flight, the largest value's aligned covering range, carved from
	 * slots set aside (see rf_ld_full_main). */
	const rf_batch_part *p0 = &l->part[0];
	int in_place = l->nparts == 1 && p0->field == 0 && p0->off == 0 &&
		       p0->value_bytes % RF_FMT_ALIGN == 0;
	if (in->direct && !in_place)
		for (uint32_t i = 0; i < l->nparts; i++) {
			uint64_t bs = RF_ALIGN_UP(l->part[i].value_bytes, RF_FMT_ALIGN) + RF_FMT_ALIGN;
			if (bs > mp->bspan)
				mp->bspan = bs;
		}
	/* A sample's checksum row is never 4096-aligned: bounced. */
	uint64_t row = RF_ALIGN_UP(8 * (uint64_t)in->nfields, RF_FMT_ALIGN) + RF_FMT_ALIGN;
	if (in->direct && in->sums && row > mp->bspan)
		mp->bspan = row;
	uint64_t slot = RF_ALIGN_UP(bb > mp->bspan ? bb : mp->bspan, RF_FMT_ALIGN);
	if (slot < bb || slot == 0)
		return 1;
	uint64_t nslots = in->pinned_bytes / slot;
	const char *mode = in->full_window ? "window shuffling from memory" : "shuffle full";
	if (nslots < 2) {
		char a[32], b[32], need[32];
		rf_memplan_fmt_size(a, sizeof a, in->pinned_bytes);
		rf_memplan_fmt_size(b, sizeof b, bb);
		rf_memplan_fmt_size(need, sizeof need, 2 * slot);
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: pinned_bytes %s holds %" PRIu64 " slot(s) of %" PRIu64
			       " bytes (a batch, %s for batch_size %u); %s needs at least 2: raise "
			       "pinned_bytes to at least %" PRIu64 " (%s) or lower batch_size%s",
			       a, nslots, slot, b, in->batch_size, mode, 2 * slot, need, vmsg);
	}
	if (nslots > RF_MEMPLAN_SLOTS_MAX)
		nslots = RF_MEMPLAN_SLOTS_MAX;
	if (in->lean) {
		/* Four batches being read or filled (two in flight, two beside
		 * them), the staged ones, and bounce areas for io_depth reads
		 * in flight. */
		uint64_t lean_total = 4 + want0 + (mp->in_place ? in->depth : 0);
		if (mp->bspan) {
			uint64_t bs = slot / mp->bspan ? slot / mp->bspan : 1;
			uint64_t nb = (in->io_depth + bs - 1) / bs;
			lean_total += nb < RF_MEMPLAN_BOUNCE_SLOTS_MAX ? nb : RF_MEMPLAN_BOUNCE_SLOTS_MAX;
		}
		if (nslots > lean_total)
			nslots = lean_total;
	}
	mp->nslots = (unsigned)nslots;
	mp->stage_bytes = slot;
	/* The queue depth shrinks when the ring cannot hold bounce areas for
	 * all of it and 2 batches. */
	mp->qd = in->io_depth;
	mp->nbounce = 0;
	if (mp->bspan) {
		uint64_t per = slot / mp->bspan;
		uint64_t most = (uint64_t)(mp->nslots - 2 < RF_MEMPLAN_BOUNCE_SLOTS_MAX
						   ? mp->nslots - 2
						   : RF_MEMPLAN_BOUNCE_SLOTS_MAX) * per;
		if (mp->qd > most)
			mp->qd = (unsigned)most;
		if (mp->qd == 0)
			return rf_fail(d, RF_EMEMPLAN, "memory plan: pinned_bytes %" PRIu64
				       " holds %u slots of %" PRIu64 " bytes: %s with O_DIRECT "
				       "reads needs at least 3 (two batches and bounce areas): "
				       "raise pinned_bytes to at least %" PRIu64, in->pinned_bytes,
				       mp->nslots, slot, mode, 3 * slot);
		mp->nbounce = (unsigned)((mp->qd + per - 1) / per);
	}
	mp->n_stage = mp->nslots - mp->nbounce;
	mp->n_read = 0;
	if (mp->in_place && mp->n_stage < in->depth + 1)
		mp->in_place = 0;
	mp->n_ring = mp->nslots;
	mp->ring_bytes = (uint64_t)mp->nslots * slot;
	return 0;
}

/*
 * Chunk reads: W + 2 read slots at least (the window's W held, one read
 * into and one decoded beside them), the reads kept in flight, and the
 * staging slots, counted in bytes: read slots are the largest chunk read,
 * staging slots a batch, so a batch smaller than a chunk leaves the bytes
 * a chunk-sized staging slot would have taken to reads.
 */
static int
plan_reads(const struct rf_memplan_in *in, struct rf_memplan *mp, unsigned want, const char *vmsg,
	   rf_diag *d)
{
	char a[32], b[32], c[32];
	uint64_t bb = in->layout->bytes;
	uint64_t P = in->pinned_bytes;
	uint32_t wnd = in->window;
	uint64_t sslot = RF_ALIGN_UP(bb, RF_FMT_ALIGN);
	uint64_t rslot = RF_ALIGN_UP(in->max_span, RF_FMT_ALIGN);
	if (sslot < bb || sslot == 0)
		return 1;
	if (rslot == 0)
		rslot = RF_FMT_ALIGN;
	if (wnd && (P < sslot || (P - sslot) / rslot < (uint64_t)wnd + 2))
		return window_fail(in, rslot, sslot, want, d);
	if (P < sslot || P - sslot < rslot) {
		char e[32], need[32];
		rf_memplan_fmt_size(a, sizeof a, P);
		rf_memplan_fmt_size(b, sizeof b, bb);
		rf_memplan_fmt_size(c, sizeof c, rslot);
		rf_memplan_fmt_size(e, sizeof e, sslot);
		rf_memplan_fmt_size(need, sizeof need, rslot + sslot);
		/* What is larger is what to lower: the batch, or the chunks
		 * (which only a repack changes). */
		const char *lower = rslot > sslot ? " or repack the dataset in smaller chunks "
						    "(ringfeed pack --chunk-bytes, Python chunk_bytes=)"
						  : " or lower batch_size";
		return rf_fail(d, RF_EMEMPLAN,
			       "memory plan: pinned_bytes %s cannot hold a read slot of %s (the "
			       "largest chunk read) and a staging slot of %s (a batch, %s for "
			       "batch_size %u); the loader needs at least one of each: raise "
			       "pinned_bytes to at least %" PRIu64 " (%s)%s%s", a, c, e, b,
			       in->batch_size, rslot + sslot, need, lower, vmsg);
	}
	unsigned zdepth = mp->in_place ? in->depth : 0;
	/* Reads the stream can use: W and the two beside it, and the dataset's
	 * chunks or io_depth, whichever is more: past its last chunk the
	 * reader goes on into the next epoch (with 12 chunks, 14 read slots
	 * ran cold O_DIRECT epochs 7-8 % below 16 and 34).  More would be
	 * page-locked for nothing, and locking them costs time at open (about
	 * 1 s per GiB). */
	uint64_t useful = (in->nchunks > in->io_depth ? in->nchunks : in->io_depth) + 2 + wnd;
	/*
	 * Staging: enough for the copy stage to stay busy (`want`: depth + 2
	 * batches, at least 4 so the gather wakes for several at a time) but
	 * never more than half of the budget: reads keep the disk busy.
	 */
	uint64_t st = (P / 2) / sslot;
	if (st > want)
		st = want;
	if (st < 1)
		st = 1;
	uint64_t reads = (P - st * sslot) / rslot;
	if (reads > useful)
		reads = useful;
	/* Reads come first, the window's W + 2 of them: W is part of the
	 * order, the staging share only speed.  With chunks large beside the
	 * budget the staging share gives way, down to one slot. */
	uint64_t least = wnd ? (uint64_t)wnd + 2 : 1;
	if (reads < least) {
		reads = least;
		st = (P - reads * rslot) / sslot;
	}
	/*
	 * More staged batches absorb a pipeline thread that waits for a core
	 * longer than a few training steps (with 100 us steps on 2 cores, 4
	 * staged batches left the consumer waiting 1.2 % of the time, 16 left
	 * it 0.3 %).  They come only from bytes the reads cannot use (past
	 * `useful`, or less than a read slot): taking reads it can use
	 * cost half of the O_DIRECT read rate with a 64 MiB ring.  The host
	 * device's slots lent to the consumer (in place) are staging slots
	 * too, added the same way; without spare bytes they come out of the
	 * staging share, which must then hold depth of them and one more.
	 */
	uint64_t more = (RF_MEMPLAN_STAGE_DEEP > want ? RF_MEMPLAN_STAGE_DEEP - want : 0) + zdepth;
	uint64_t left = (P - reads * rslot - st * sslot) / sslot;
	st += left < more ? left : more;
	/*
	 * The default budget is shared by the process's loaders: one takes
	 * the reads it keeps in flight (io_depth, at most the dataset's chunks
	 * past the window) besides the W held and the two beside them (W
	 * itself is never sized from the budget), and depth + 2 staged batches
	 * (and depth more lent in place), so a validation set's loader stays
	 * small and a notebook cell re-run fits.
	 */
	if (in->lean) {
		uint64_t ahead = in->nchunks > wnd ? in->nchunks - wnd : 1;
		uint64_t lean_reads = (uint64_t)wnd + 2 + (ahead < in->io_depth ? ahead : in->io_depth);
		uint64_t lean_st = (uint64_t)want + zdepth;
		if (lean_reads <= reads && lean_st * sslot + lean_reads * rslot <= P) {
			reads = lean_reads;
			st = lean_st;
		}
	}
	if (st + reads > RF_MEMPLAN_SLOTS_MAX)
		reads = RF_MEMPLAN_SLOTS_MAX - st > (uint64_t)wnd + 2 ? RF_MEMPLAN_SLOTS_MAX - st
								       : (uint64_t)wnd + 2;
	if (st + reads > RF_MEMPLAN_SLOTS_MAX)
		st = RF_MEMPLAN_SLOTS_MAX - reads;
	if (mp->in_place && st < in->depth + 1)
		mp->in_place = 0; /* too small to lend depth slots: copy */
	mp->stage_bytes = sslot;
	mp->read_bytes = rslot;
	mp->n_stage = (unsigned)st;
	mp->n_read = (unsigned)reads;
	mp->nslots = mp->n_stage + mp->n_read;
	mp->qd = in->io_depth < mp->n_read ? in->io_depth : mp->n_read;
	/*
	 * Map mode: a read is a chunk faulted in where it lies in its shard's
	 * map, so the ring holds only the staging slots.  The reads still
	 * count as read slots of the budget: they bound how far ahead the
	 * reader faults chunks in, as far as read calls would have read ahead,
	 * so a map never runs further ahead of the consumer (and evicts more
	 * of the page cache) than pinned_bytes would allow.
	 */
	mp->n_ring = in->map ? mp->n_stage : mp->nslots;
	mp->ring_bytes = (uint64_t)mp->n_stage * sslot + (in->map ? 0 : (uint64_t)mp->n_read * rslot);
	return 0;
}

int
rf_memplan_compute(const struct rf_memplan_in *in, struct rf_memplan *out, rf_diag *d)
{
	char a[32], b[32], c[32];
	struct rf_memplan mp = {0};
	const rf_batch_layout *l = in->layout;
	uint64_t bb = l->bytes;
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
	/* Host memory: a batch is handed out in the slot it was assembled (or
	 * read) in, with no copy into a separate buffer; the slot goes back
	 * when the batch is released.  Up to depth slots are then the
	 * consumer's, on top of what the pipeline needs. */
	mp.in_place = in->host_memory;
	/* Several decode workers fill the batches their chunks go to at once
	 * (the parallel fill, src/loader/gather.c): as many batches as their
	 * chunks span, besides those staged for the copy, or the last worker
	 * to need a new batch makes its copies in its turn, alone.  Not the
	 * window's, mixtures' or full shuffling's, which fill one at a time. */
	unsigned filling = 0;
	if (in->workers > 1 && !in->window && !in->full && bb) {
		uint64_t f = ((uint64_t)in->workers * in->max_span + bb - 1) / bb;
		filling = f < RF_MEMPLAN_STAGE_DEEP ? (unsigned)f : RF_MEMPLAN_STAGE_DEEP;
	}
	unsigned want = (in->depth + 2 > 4 ? in->depth + 2 : 4) + filling;
	int rc = in->full ? plan_full(in, &mp, want, vmsg, d) : plan_reads(in, &mp, want, vmsg, d);
	if (rc > 0)
		return rf_fail(d, RF_EMEMPLAN, "memory plan: a batch of %u samples is too "
			       "large: lower batch_size%s", in->batch_size, vmsg);
	if (rc < 0)
		return rc;

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
	rf_memplan_fmt_size(a, sizeof a, mp->ring_bytes);
	rf_memplan_fmt_size(b, sizeof b, mp->dev_bytes);
	char reads[96] = "";
	if (mp->n_read)
		snprintf(reads, sizeof reads, "%u read slots of %" PRIu64 " bytes and ", mp->n_read,
			 mp->read_bytes);
	if (in->map)
		snprintf(buf, cap,
			 "memory plan: pinned %s = %u staging slots of %" PRIu64 " bytes%s; up to %u "
			 "chunks faulted in ahead in the shard maps (counted as read slots of %" PRIu64
			 " bytes); device %s = %u x %" PRIu64 " bytes", a, mp->n_ring, mp->stage_bytes,
			 mp->in_place ? " (up to depth of them hold batches handed out)" : "",
			 mp->n_read, mp->read_bytes, b, mp->in_place ? 0 : in->depth, bb);
	else if (mp->in_place)
		snprintf(buf, cap,
			 "memory plan: pinned %s = %s%u staging slots of %" PRIu64 " bytes, of which "
			 "up to %u hold batches handed out: host delivery without a copy",
			 a, reads, mp->nslots - mp->n_read, mp->stage_bytes, in->depth);
	else
		snprintf(buf, cap,
			 "memory plan: pinned %s = %s%u staging slots of %" PRIu64 " bytes; device "
			 "%s = %u x %" PRIu64 " bytes", a, reads, mp->nslots - mp->n_read,
			 mp->stage_bytes, b, in->depth, bb);
	if (mp->nbounce) {
		size_t len = strlen(buf);
		snprintf(buf + len, cap > len ? cap - len : 0, "; %u of the staging slots hold bounce areas "
			 "of %" PRIu64 " bytes", mp->nbounce, mp->bspan);
	}
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
