/* SPDX-License-Identifier: MIT */
#include "loader/internal.h"

/* ------------------------------------------------------ full shuffling */

/*
 * Full shuffling reads every sample on its own: the plan's items name the
 * chunk and the index in it, and a fixed field's value i lies at
 *   chunk offset + section offset + i x value bytes,
 * the section offsets following from the chunk's sample count and the schema
 * alone when no variable field comes before (docs/format.md "Chunks"; the
 * open checks that every chunk's raw size agrees).  One thread does it all:
 * it takes a staging slot per plan batch, queues one read per sample and
 * field straight to the sample's place in the batch, keeps up to io_depth
 * reads in flight across consecutive batches, and stages the batches in plan
 * order as their reads complete.  No decode worker runs.  When the dataset
 * is read through the page cache (buffered, or map) it copies each sample
 * from the mapped shards instead (full_main_mem): no read calls at all.
 *
 * O_DIRECT wants the file offset, length and buffer 4096-aligned.  A value
 * that satisfies that (4 KiB multiples in the first field: the common case
 * of large fixed samples) is read straight into place; any other is read as
 * its covering aligned range into the slot's bounce area (past the batch)
 * and copied into place when it completes.  With buffered reads (direct = 0,
 * or a file system that refuses O_DIRECT) every value goes straight into
 * place.
 *
 * Checksums: a chunk's XXH3 covers the whole chunk, which full mode never
 * reads.  With verify on, each sample's row of its chunk's per-sample
 * checksum table (format 2, docs/format.md) is read with one more read
 * beside its values, and every loaded value is hashed and compared before
 * its batch is staged; shards without the table are refused at open.  Also
 * checked: structure (every chunk uncompressed with the raw size its sample
 * count implies, every item inside its chunk, every read complete).
 */

struct fread_rec {          /* one read in flight */
	uint32_t fb;            /* its batch (index in the full thread's queue) */
	uint32_t next_free;
	uint8_t *dst;           /* the value's place in the batch */
	uint8_t *area;          /* its bounce area (mem.bspan bytes), or NULL */
	const uint8_t *bounce;  /* where the value lands, when bounced; else NULL */
	uint64_t len;           /* bytes asked of the reader */
	uint64_t vlen;          /* bytes of the value */
	uint64_t off;           /* file offset of the read */
	uint64_t chunk, sample;
	uint32_t cpage;         /* the checksum page it fills, or UINT32_MAX */
};

/*
 * Checksum rows are small (8 bytes a field) and many share a 4 KiB page of
 * their table: reading each with its own read cost a third more reads per
 * sample than the values alone (0.6x the samples/s for 784-byte samples).
 * The full thread keeps the table pages it has read in an 8-way set
 * associative cache of at most FULL_SUMS_CACHE bytes, 4 entries per table
 * page of the dataset when it can: once the tables of a dataset up to that
 * size have been read (about 16 bytes a sample for two fields: 2 million
 * samples), rows cost a copy.  A row not in it reads its whole page into the
 * cache when an entry of its set has no read in flight, else the row alone.
 * Fixed size: it does not grow with the dataset.  (2 ways thrashed: with 4
 * entries a page, a few sets still drew 3 or 4 pages of a 200k-sample
 * dataset, and re-read them on most of their rows.)
 */
#define FULL_SUMS_CACHE (32u << 20)
#define FULL_SUMS_WAYS 8u

struct sums_cache {
	uint8_t *page;          /* npages x 4096, 4096-aligned (O_DIRECT reads) */
	uint64_t *tag;          /* file page number + 1 (0: empty) */
	uint32_t *shard;
	uint8_t *pending;       /* a read into the page is in flight */
	uint8_t *last;          /* per set: the way to fill next when all hold pages */
	uint32_t mask;          /* npages - 1 */
};

/* The first entry of the page's set (FULL_SUMS_WAYS entries from it). */
static uint32_t
sums_cache_set(const struct sums_cache *c, uint32_t shard, uint64_t fpage)
{
	/* splitmix64's finalizer: table pages come in runs at regular
	 * strides, which a plain multiply maps onto few sets. */
	uint64_t h = fpage ^ ((uint64_t)shard << 40);
	h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
	h ^= h >> 31;
	return (uint32_t)h & c->mask & ~(FULL_SUMS_WAYS - 1);
}

struct fbatch {             /* a plan batch being read */
	unsigned slot;
	uint32_t n;
	uint32_t left;          /* reads not completed */
	int issued;             /* every read queued */
	unsigned check;         /* struct staged's */
	uint64_t epoch, k, first;
};

/* Byte offset of schema field `field`'s section in the raw form of a chunk
 * of n samples; every field up to it is fixed (checked at open). */
static uint64_t
full_section_off(const rf_schema *schema, uint64_t n, uint32_t field)
{
	uint64_t off = 0;
	for (uint32_t j = 0; j < field; j++) {
		off = RF_ALIGN_UP(off, 64);
		off += n * rf_decode_item_bytes(&schema->fields[j]);
	}
	return RF_ALIGN_UP(off, 64);
}

/*
 * Whether shuffle full can read this dataset's loaded fields sample by
 * sample: readable without reading a chunk (fixed, no variable field before
 * them), every chunk uncompressed and of the size the schema implies, and
 * per-sample checksums (format 2) when verify is on.  0, or the error with
 * its message in msg (cap bytes; msg may be NULL to ask only).  Shared by
 * the open's checks and by the choice of a window from memory (window.c),
 * which is served the same way.
 */
int
rf_ld_full_refusal(const rf_loader *ld, const uint32_t *sel, uint32_t nsel, char *msg, size_t cap)
{
	const rf_schema *sc = ld->schema;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nsel; i++)
		if (sel[i] > last)
			last = sel[i];
	for (uint32_t j = 0; j <= last; j++) {
		const rf_field *f = &sc->fields[j];
		if (f->var_dim < 0)
			continue;
		int loaded = 0;
		for (uint32_t i = 0; i < nsel; i++)
			loaded |= sel[i] == j;
		if (loaded)
			snprintf(msg, cap, "loader: shuffle full reads each sample on its own and "
				 "supports fixed-size fields only: field '%s' has a variable size; use "
				 "shuffle window", f->name);
		else
			snprintf(msg, cap, "loader: shuffle full cannot locate the fields after "
				 "variable-size field '%s' without reading whole chunks: load only fields "
				 "before it (rf_config.fields) or use shuffle window", f->name);
		return RF_EUSAGE;
	}
	int has_var = 0;
	for (uint32_t j = 0; j < sc->nfields; j++)
		has_var |= sc->fields[j].var_dim >= 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		rf_chunk_ctx ctx;
		rf_dataset_chunk_ctx(ld->ds, c, &ctx);
		if (ci->codec != RF_CODEC_NONE) {
			snprintf(msg, cap, "loader: shuffle full reads samples one by one and needs "
				 "uncompressed shards, but %s chunk %" PRIu64 " is compressed: use "
				 "shuffle window, or pack the dataset without compression", ctx.path,
				 ctx.chunk);
			return RF_EUSAGE;
		}
		/* With variable fields (after the loaded ones) the schema gives
		 * only the least raw size. */
		uint64_t want = 0;
		if (rf_chunk_raw_size(sc, ci->samples, NULL, &want) < 0 ||
		    (has_var ? want > ci->raw_bytes : want != ci->raw_bytes) ||
		    ci->stored_bytes != ci->raw_bytes) {
			snprintf(msg, cap, "%s: chunk %" PRIu64 " at offset %" PRIu64 ": %" PRIu64
				 " raw bytes for %u samples, the schema implies %" PRIu64, ctx.path,
				 ctx.chunk, ctx.offset, ci->raw_bytes, ci->samples, want);
			return RF_ECORRUPT;
		}
	}
	/* Samples are read one by one, so chunk checksums cannot be checked:
	 * with verify on, each sample is checked against its own checksums,
	 * which only format 2 shards hold.  Refused rather than read
	 * unchecked: verify on promises checked bytes. */
	for (size_t i = 0; ld->cfg.verify && i < rf_dataset_shards(ld->ds); i++) {
		rf_shard_info si;
		rf_dataset_shard_info(ld->ds, i, &si);
		if (si.version < 2) {
			snprintf(msg, cap, "loader: shuffle full checks every sample against its own "
				 "checksums, which %s (format version %u) does not hold: repack the "
				 "dataset with this version's `ringfeed pack` (e.g. ringfeed pack -o "
				 "OUT.rfs FIELD=FILE.npy ...; format 2 writes them by default), or read "
				 "it unchecked with verify = 0 (Python verify=False, ringfeed bench "
				 "--no-verify)", si.path, si.version);
			return RF_EUSAGE;
		}
	}
	return 0;
}

/* The open's checks for full shuffling (rf_ld_full_refusal), and whether
 * each sample is checked against its own checksums. */
int
rf_ld_full_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	/* Images refuse window shuffling too: advise what they take. */
	if (ld->image)
		return rf_ld_image_layout(ld);
	char msg[RF_ERRMSG_MAX];
	int rc = rf_ld_full_refusal(ld, sel, nsel, msg, sizeof msg);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", msg);
	ld->full.sums = ld->cfg.verify != 0;
	return 0;
}

/* Stage a batch whose reads are all in (mu held). */
static void
full_push_locked(rf_loader *ld, const struct fbatch *fb)
{
	rf_assembly a;
	rf_assembly_begin(&a, &ld->layout, rf_ring_slot(ld->ring, fb->slot));
	a.n = fb->n;
	struct staged s = {.kind = SK_BATCH};
	s.slot = fb->slot;
	s.n = fb->n;
	s.epoch = fb->epoch;
	s.first = fb->first;
	s.plan_done = fb->k + 1;
	s.copy_bytes = rf_assembly_bytes(&a);
	s.payload = rf_assembly_payload(&a);
	s.index = ld->gather.batch_counter++;
	s.check = fb->check;
	rf_ld_stage_batch_locked(ld, &s);
}

/* The message of a value that does not hash to its recorded checksum. */
static void
full_mismatch(rf_loader *ld, uint64_t sample, uint32_t field, uint64_t vb, uint64_t h,
	      uint64_t want, char *msg, size_t cap)
{
	uint64_t c = 0;
	rf_chunk_ctx ctx = {0};
	rf_dataset_find_chunk(ld->ds, sample, &c);
	rf_dataset_chunk_ctx(ld->ds, c, &ctx);
	snprintf(msg, cap, "%s: chunk %" PRIu64 " at offset %" PRIu64 ": sample %" PRIu64
		 " of the chunk (sample %" PRIu64 " of the dataset), field %s: checksum "
		 "mismatch: its %" PRIu64 " bytes hash to %016" PRIx64 ", the shard "
		 "records %016" PRIx64, ctx.path, ctx.chunk, ctx.offset,
		 sample - ld->chunks[c].first_sample, sample,
		 ld->schema->fields[field].name, vb, h, want);
}

/* Check every loaded value of a batch whose reads are all in against the
 * checksum rows read beside them (rows[i] of nfields entries for row i).
 * Runs on the full thread without the mutex: the slot is still its own. */
static int
full_verify(rf_loader *ld, const struct fbatch *fb, const uint64_t *rows, const uint64_t *smp,
	    char *msg, size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t nf = ld->schema->nfields;
	const uint8_t *slotp = rf_ring_slot(ld->ring, fb->slot);
	for (uint32_t i = 0; i < fb->n; i++) {
		const uint8_t *row = (const uint8_t *)(rows + (uint64_t)i * nf);
		for (uint32_t q = 0; q < l->nparts; q++) {
			const rf_batch_part *p = &l->part[q];
			uint64_t h = XXH3_64bits(slotp + p->off + (uint64_t)i * p->value_bytes,
						 (size_t)p->value_bytes);
			uint64_t want = rf_le64(row + 8 * (uint64_t)p->field);
			if (h == want)
				continue;
			full_mismatch(ld, smp[i], p->field, p->value_bytes, h, want, msg, cap);
			return RF_ECHECKSUM;
		}
	}
	return 0;
}

/*
 * The checksum tables kept resident: when every chunk's table together
 * takes at most FULL_SUMS_RESIDENT bytes (16 bytes a sample for two fields:
 * 4 million samples), each is read once at the start, whole, and checked
 * against its checksum in the index; a sample's row is then a pointer, with
 * no read and no cache lookup.  A table that does not match (or cannot be
 * read) is left out, logged: its rows are read beside their samples as
 * without the budget, so a corrupt row is reported the same way, by the
 * sample whose value it no longer matches.
 */
#define FULL_SUMS_RESIDENT (64u << 20)

struct sums_res {
	uint8_t *buf;           /* every table, one after the other */
	const uint8_t **tab;    /* per chunk: its table in buf, or NULL */
};

/* The mode a message names: window shuffling from memory runs here too. */
static const char *
full_mode(const rf_loader *ld)
{
	return ld->full.window ? "shuffle window" : "shuffle full";
}

static void
full_sums_load(rf_loader *ld, struct sums_res *r)
{
	const uint32_t nf = ld->schema->nfields;
	uint64_t total = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		total += rf_fmt_sums_bytes(ld->chunks[c].samples, nf);
	if (total > FULL_SUMS_RESIDENT || ld->nchunks == 0)
		return;
	r->buf = malloc(total ? (size_t)total : 1);
	r->tab = calloc(ld->nchunks, sizeof(*r->tab));
	if (!r->buf || !r->tab) {
		free(r->buf);
		free(r->tab);
		r->buf = NULL;
		r->tab = NULL;
		return;
	}
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	d.errors_quiet = 1;
	int fd = -1;
	uint32_t fd_shard = UINT32_MAX;
	uint64_t at = 0, bad = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		if (ci->shard != fd_shard) {
			if (fd >= 0)
				close(fd);
			fd = open(rf_dataset_shard_path(ld->ds, ci->shard), O_RDONLY | O_CLOEXEC);
			fd_shard = ci->shard;
		}
		int rc = fd < 0 ? -errno : rf_dataset_read_sums(ld->ds, fd, c, r->buf + at, &d);
		if (rc == 0) {
			r->tab[c] = r->buf + at;
		} else if (bad++ == 0) {
			rf_log(&ld->diag, RF_LOG_WARN, "%s: %s; the rows of such tables "
			       "are read beside their samples and checked there", full_mode(ld),
			       rc == RF_ECHECKSUM || fd >= 0 ? d.msg : "a shard cannot be opened");
		}
		at += rf_fmt_sums_bytes(ci->samples, nf);
	}
	if (fd >= 0)
		close(fd);
}

/*
 * Full shuffling from memory (full.mem): every shard mapped whole, each
 * sample copied from the map into its place in the batch; no read calls.
 *
 * Per sample: its draw from the plan, one copy of its values, one XXH3 of
 * each value compared with its row of the (resident) checksum table.  Per
 * batch: one hand-off.  The copies are bound by memory latency (samples lie
 * at random in the page cache), so the sample FULL_MEM_AHEAD items ahead is
 * fetched while this one is copied.  The hash reads the copied values back
 * from the batch, FULL_MEM_GROUP bytes of samples at a time, after their
 * copies: hashing each value right after its own copy stalled on the
 * copy's stores still in flight (a loop of 784-byte samples took 1.5-2x the
 * time of copying a group and then hashing it), and a group still sits in
 * this core's cache.  The delivered bytes themselves are what is hashed.
 *
 * Two threads produce batches, in the plan's order: this one (the full
 * thread), ahead of the consumer, and the consumer's own thread when it
 * asks for a batch and none is ready (rf_ld_full_help_locked, from
 * rf_loader_next): rather than wait for a wake-up it claims the next plan
 * batch and fills it itself.  On two cores shared with other work, the
 * full thread is often not running when the consumer wants its batch, and
 * a hand-off costs a wake-up and a switch per batch; a batch the consumer
 * fills costs neither.  Batches are claimed in plan order and staged in
 * claim order (fm.claimed, fm.staged), so the order, the epochs and the
 * stream's end are those of a single producer.  With mu held on entry and
 * return; 1 when the maps could not be set up (logged), and the caller
 * reads as without.
 */
#define FULL_MEM_AHEAD 4u
#define FULL_MEM_GROUP (32u << 10) /* bytes copied before they are hashed */
/* Batches the full thread fills ahead of the consumer at most: resident
 * data needs no deep queue, and a few slots reused stay in the cache. */
#define FULL_MEM_LEAD 4u

struct rf_full_mem {
	const uint8_t **vsrc;   /* per chunk and part: its values in the map */
	const uint8_t **tsrc;   /* per chunk: its checksum table */
	uint64_t epoch, k;      /* the next plan batch to claim */
	int done_all;           /* nothing left to claim */
	int epoch_wait;         /* the next epoch waits for the claims to stage */
	uint64_t claimed;       /* batches claimed so far, */
	uint64_t staged;        /* and staged, in claim order */
	unsigned helping;       /* fills on the consumer's thread in progress (or
	                           its wait for their turn) */
	/* The consumer's batch, filled, whose turn to stage had not come when
	 * rf_loader_next_timeout's time ran out: kept here, staged by the
	 * consumer's next call (rf_ld_full_help_locked). */
	int parked;
	struct fbatch pfb;
	uint64_t pseq;
	int perr;               /* its fill's error (message in cmsg) */
	unsigned delay_ms;      /* tests: the full thread sleeps before each fill */
	int twait;              /* the full thread waits for the consumer's thread */
	uint64_t helped;        /* batches it filled */
	unsigned lead;          /* batches the full thread fills ahead */
	rf_plan_item *citems;   /* the consumer's plan items (B) */
	char cmsg[RF_ERRMSG_MAX + 128];
	/* More threads filling batches beside the full thread (fillers), on
	 * machines with the cores for them.  They wait on fill_cv only. */
	pthread_cond_t fill_cv;
	unsigned fill_idle;     /* fillers waiting for a batch to claim */
	unsigned fill_turn;     /* fillers waiting for their turn to stage */
	int fill_quit;          /* the full thread is done: fillers leave */
};

/* Check a batch lent with its checksums (struct staged.check: full.cw) on
 * the consumer's thread, from rf_loader_next.  The fills above check what
 * they copy themselves, so no batch comes with check set now; kept for the
 * consumer's side of that hand-off. */
int
rf_ld_full_check_lent(rf_loader *ld, const struct dbuf *b, char *msg, size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t np = l->nparts, n = b->src.n;
	const uint64_t *cw = ld->full.cw + (size_t)(b->src.check - 1) * l->batch * (np + 1);
	const uint8_t *base = b->dptr;
	for (uint32_t q = 0; q < np; q++) {
		const rf_batch_part *p = &l->part[q];
		const uint8_t *v = base + p->off;
		for (uint32_t i = 0; i < n; i++, v += p->value_bytes) {
			const uint64_t *row = cw + (size_t)i * (np + 1);
			uint64_t h = XXH3_64bits(v, (size_t)p->value_bytes);
			if (h == row[q])
				continue;
			full_mismatch(ld, row[np], p->field, p->value_bytes, h, row[q], msg, cap);
			return RF_ECHECKSUM;
		}
	}
	return 0;
}

/* Start fetching plan item a's values (their first two lines: the
 * hardware's prefetcher follows on) and its checksum row. */
static inline void
full_fetch(const rf_loader *ld, const rf_plan_item *a, const struct rf_full_mem *fm)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t np = l->nparts;
	if (a->chunk >= ld->nchunks)
		return;
	for (uint32_t q = 0; q < np; q++) {
		uint64_t vb = l->part[q].value_bytes;
		const uint8_t *src = fm->vsrc[a->chunk * np + q] + (uint64_t)a->offset * vb;
		__builtin_prefetch(src);
		if (vb > 64)
			__builtin_prefetch(src + 64);
	}
	if (ld->full.sums)
		__builtin_prefetch(fm->tsrc[a->chunk] + (uint64_t)a->offset * 8 * ld->schema->nfields);
}

/*
 * A value that does not match its row: the row may be the damaged part.
 * The chunk's XXH3-64 over its stored bytes in the map settles it: when it
 * holds, the value is as packed and the table is damaged (a warning; the
 * value is delivered).  Returns 1 then, 0 when the values are bad.
 */
static int
full_table_damaged(rf_loader *ld, const struct rf_full_mem *fm, uint64_t chunk)
{
	const rf_chunk_info *ci = &ld->chunks[chunk];
	const uint32_t np = ld->layout.nparts;
	if (np == 0)
		return 0;
	/* The table may be a resident copy: the values are in the map. */
	const uint8_t *stored = fm->vsrc[chunk * np] -
				full_section_off(ld->schema, ci->samples, ld->layout.part[0].field);
	if (XXH3_64bits(stored, (size_t)ci->stored_bytes) != ci->xxh3)
		return 0;
	rf_chunk_ctx ctx = {0};
	rf_dataset_chunk_ctx(ld->ds, chunk, &ctx);
	rf_log(&ld->diag, RF_LOG_WARN, "%s: chunk %" PRIu64 " at offset %" PRIu64 ": its "
	       "per-sample checksum table is damaged (a value that fails its row matches the "
	       "chunk's XXH3-64, checked whole instead; ringfeed verify %s)", ctx.path, ctx.chunk,
	       ctx.offset, ctx.path);
	return 1;
}

/* Hash samples [from, to) of a batch in slotp against their rows. */
static int
full_mem_check(rf_loader *ld, const struct rf_full_mem *fm, const rf_plan_item *items,
	       uint32_t from, uint32_t to, const uint8_t *slotp, char *msg, size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t np = l->nparts, nf = ld->schema->nfields;
	for (uint32_t i = from; i < to; i++) {
		const rf_plan_item *it = &items[i];
		const uint8_t *row = fm->tsrc[it->chunk] + (uint64_t)it->offset * 8 * nf;
		for (uint32_t q = 0; q < np; q++) {
			const rf_batch_part *p = &l->part[q];
			uint64_t vb = p->value_bytes;
			uint64_t h = XXH3_64bits(slotp + p->off + (uint64_t)i * vb, (size_t)vb);
			uint64_t want = rf_le64(row + 8 * (uint64_t)p->field);
			if (h != want && !full_table_damaged(ld, fm, it->chunk)) {
				full_mismatch(ld, it->sample, p->field, vb, h, want, msg, cap);
				return RF_ECHECKSUM;
			}
		}
	}
	return 0;
}

/* Draw a claimed batch's items from the plan, copy its samples from the
 * maps into its slot and, with verify on, check them.  Without mu: the
 * plan stays in the batch's epoch until it is staged (full_mem_claim_locked). */
static int
full_mem_fill(rf_loader *ld, const struct rf_full_mem *fm, rf_plan_item *items,
	      struct fbatch *fb, char *msg, size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t np = l->nparts;
	uint32_t n = 0;
	int prc = rf_plan_batch(ld->reader.plan, fb->k, items, l->batch, &n);
	if (prc < 0 || n != fb->n) {
		snprintf(msg, cap, "loader: batch %" PRIu64 " of epoch %" PRIu64
			 " is missing from the plan", fb->k, fb->epoch);
		return prc < 0 ? prc : -EPROTO;
	}
	fb->first = items[0].pos;
	uint8_t *slotp = rf_ring_slot(ld->ring, fb->slot);
	uint64_t sb = 0;
	for (uint32_t q = 0; q < np; q++)
		sb += l->part[q].value_bytes;
	const uint32_t group = sb >= FULL_MEM_GROUP ? 1 : (uint32_t)(FULL_MEM_GROUP / (sb ? sb : 1));
	for (uint32_t j = 0; j < FULL_MEM_AHEAD && j < n; j++)
		full_fetch(ld, &items[j], fm);
	uint32_t checked = 0;
	for (uint32_t i = 0; i < n; i++) {
		const rf_plan_item *it = &items[i];
		if (i + FULL_MEM_AHEAD < n)
			full_fetch(ld, &items[i + FULL_MEM_AHEAD], fm);
		if (it->chunk >= ld->nchunks || it->offset >= ld->chunks[it->chunk].samples) {
			snprintf(msg, cap, "loader: the plan names sample %u of chunk %" PRIu64
				 ", which does not exist", it->offset, it->chunk);
			return -EPROTO;
		}
		const uint8_t *const *src = fm->vsrc + it->chunk * np;
		for (uint32_t q = 0; q < np; q++) {
			const rf_batch_part *p = &l->part[q];
			uint64_t vb = p->value_bytes;
			memcpy(slotp + p->off + (uint64_t)i * vb, src[q] + (uint64_t)it->offset * vb,
			       (size_t)vb);
		}
		if (ld->full.sums && (i + 1 - checked >= group || i + 1 == n)) {
			int rc = full_mem_check(ld, fm, items, checked, i + 1, slotp, msg, cap);
			if (rc < 0)
				return rc;
			checked = i + 1;
		}
	}
	atomic_fetch_add_explicit(&ld->stats.bytes_read, sb * n, memory_order_relaxed);
	return 0;
}

/* Claim the next plan batch (mu held): its number, a staging slot and its
 * place in the order; its items are drawn after, without mu (full_mem_fill:
 * a window's draws cost about 12 us a batch of 256, and under mu they kept
 * the other thread waiting for it, a futex sleep and wake each time).  So
 * the plan moves to the next epoch only once every batch claimed is
 * staged: no thread draws from it then.  1 claimed; 0 nothing to claim
 * now (no staging place, the plan is done, or batches of this epoch are
 * still drawn: fm->epoch_wait); < 0 failed (the loader failed). */
static int
full_mem_claim_locked(rf_loader *ld, struct rf_full_mem *fm, struct fbatch *fb, uint64_t *seq,
		      char *msg, size_t cap)
{
	for (;;) {
		if (ld->stop || ld->failed)
			return -ECANCELED;
		if (fm->done_all)
			return 0;
		if (fm->k < rf_plan_batches(ld->reader.plan))
			break;
		if (ld->reader.epoch_last && fm->epoch + 1 >= ld->reader.epoch_last) {
			/* The full thread ends the stream, once every batch
			 * claimed is staged. */
			fm->done_all = 1;
			pthread_cond_broadcast(&ld->stage_cv);
			return 0;
		}
		fm->epoch_wait = fm->staged != fm->claimed;
		if (fm->epoch_wait)
			return 0;
		int rc = rf_plan_set_epoch(ld->reader.plan, fm->epoch + 1);
		if (rc < 0) {
			snprintf(msg, cap, "loader: the plan of epoch %" PRIu64 " failed: %s",
				 fm->epoch + 1, rf_strerror(rc));
			rf_ld_fail_locked(ld, rc, msg);
			return rc;
		}
		fm->epoch++;
		fm->k = 0;
	}
	if (ld->stage_held >= ld->mem.n_stage)
		return 0;
	uint32_t n = rf_plan_batch_size(ld->reader.plan, fm->k);
	if (n == 0 || n > ld->layout.batch) {
		snprintf(msg, cap, "loader: batch %" PRIu64 " of epoch %" PRIu64
			 " is missing from the plan", fm->k, fm->epoch);
		rf_ld_fail_locked(ld, -EPROTO, msg);
		return -EPROTO;
	}
	unsigned slot;
	int rc = rf_ring_acquire(ld->ring, &slot, 0);
	if (rc < 0) {
		if (!ld->stop)
			rf_ld_fail_locked(ld, rc, "loader: no free ring slot for a batch");
		return rc;
	}
	ld->stage_held++;
	rf_ld_note_max(&ld->stats.max_slots, ld->stage_held);
	*fb = (struct fbatch){.slot = slot, .n = n, .epoch = fm->epoch, .k = fm->k};
	fm->k++;
	*seq = fm->claimed++;
	return 1;
}

/* Stage a filled batch in its turn (mu held; waits on cv, dropping mu, for
 * the batches claimed before it).  err: the fill's error, reported in
 * order; a stopped or failed loader gives the slot back instead. */
static void
full_mem_stage_locked(rf_loader *ld, struct rf_full_mem *fm, const struct fbatch *fb,
		      uint64_t seq, int err, const char *msg, pthread_cond_t *cv)
{
	/* twait is the full thread's alone: the others waiting for their turn
	 * must not clear it while the full thread waits too. */
	const int full = cv == &ld->stage_cv, filler = cv == &fm->fill_cv;
	while (fm->staged != seq && !ld->stop && !ld->failed) {
		if (full)
			fm->twait = 1;
		fm->fill_turn += (unsigned)filler;
		pthread_cond_wait(cv, &ld->mu);
		fm->fill_turn -= (unsigned)filler;
		if (full)
			fm->twait = 0;
	}
	if (ld->stop || ld->failed || err) {
		if (err)
			rf_ld_fail_locked(ld, err, msg);
		pthread_mutex_unlock(&ld->mu);
		rf_ring_release(ld->ring, fb->slot);
		pthread_mutex_lock(&ld->mu);
		ld->stage_held--;
		/* Claims after this one wait for it: let them see the failure. */
		pthread_cond_broadcast(&ld->stage_cv);
		pthread_cond_broadcast(&ld->cons_cv);
		pthread_cond_broadcast(&fm->fill_cv);
		return;
	}
	full_push_locked(ld, fb);
	fm->staged++;
	/* Fillers waiting for their turn, or for the epoch to move on. */
	if (fm->fill_turn || (fm->fill_idle && fm->epoch_wait))
		pthread_cond_broadcast(&fm->fill_cv);
}

/* This thread's CPU time in ns (0 when unknown). */
static uint64_t
full_cpu_now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This thread's CPU time since `since` (full_cpu_now) counted as the
 * loader's (rf_stats.thread_cpu_ns), for threads without a slot of their
 * own in rf_stats' per-thread clocks. */
static void
full_cpu_count(rf_loader *ld, uint64_t since)
{
	uint64_t now = full_cpu_now();
	if (now > since)
		atomic_fetch_add_explicit(&ld->stats.cpu_done_ns, now - since,
					  memory_order_relaxed);
}

/* The consumer's thread waits for its parked batch's turn to stage (mu
 * held, dropped while it waits): until deadline (CLOCK_MONOTONIC; NULL:
 * no limit; wait 0: not at all).  1 when its turn has come (or the loader
 * stopped or failed: staging gives the slot back then), 0 when not.  Those
 * staging the batches before it wake cons_cv while fm->helping. */
static int
full_help_turn_locked(rf_loader *ld, const struct rf_full_mem *fm, int wait,
		      const struct timespec *deadline)
{
	while (fm->staged != fm->pseq && !ld->stop && !ld->failed) {
		if (!wait)
			return 0;
		if (!deadline)
			pthread_cond_wait(&ld->cons_cv, &ld->mu);
		else if (pthread_cond_timedwait(&ld->cons_cv, &ld->mu, deadline) == ETIMEDOUT)
			return fm->staged == fm->pseq || ld->stop || ld->failed;
	}
	return 1;
}

/*
 * The consumer's thread fills a batch itself (mu held; dropped while it
 * copies): from rf_loader_next, when no batch is ready and the full thread
 * copies from memory.  1 when it staged one (or the loader's state changed:
 * look again), 0 when there is nothing it can do but wait.
 *
 * A batch it filled is staged in its turn, after the batches claimed
 * before it, which the full thread or a filler may still be filling: that
 * wait ends at deadline (rf_loader_next_timeout; NULL for rf_loader_next),
 * so that a consumer that must wake up now and then (an interpreter
 * checking for Ctrl-C) does.  The batch is then parked, and -ETIMEDOUT
 * returned; the next call stages it (wait 0, try_next: only when its turn
 * has come, claiming nothing new).  The batches after it wait for it
 * meanwhile, as they wait for a batch being filled.
 */
int
rf_ld_full_help_locked(rf_loader *ld, int wait, const struct timespec *deadline)
{
	struct rf_full_mem *fm = ld->full.fm;
	if (!fm || fm->helping)
		return 0;
	if (!fm->parked) {
		if (!wait || !ld->mem.in_place || ld->sq_len || ld->stop || ld->failed)
			return 0;
		struct fbatch fb;
		uint64_t seq;
		int rc = full_mem_claim_locked(ld, fm, &fb, &seq, fm->cmsg, sizeof(fm->cmsg));
		if (rc <= 0)
			return rc < 0;
		fm->helping++;
		pthread_mutex_unlock(&ld->mu);
		/* Its CPU time counts as the loader's (rf_stats.thread_cpu_ns). */
		uint64_t c0 = full_cpu_now();
		int err = full_mem_fill(ld, fm, fm->citems, &fb, fm->cmsg, sizeof(fm->cmsg));
		full_cpu_count(ld, c0);
		pthread_mutex_lock(&ld->mu);
		fm->pfb = fb;
		fm->pseq = seq;
		fm->perr = err;
		fm->parked = 1;
	} else {
		fm->helping++;
	}
	if (!full_help_turn_locked(ld, fm, wait, deadline)) {
		/* Parked.  A full thread leaving (stop, failure) waits for
		 * helping to reach 0 before its fm goes. */
		fm->helping--;
		if (fm->twait)
			pthread_cond_signal(&ld->stage_cv);
		return -ETIMEDOUT;
	}
	fm->parked = 0;
	uint64_t staged = fm->staged;
	full_mem_stage_locked(ld, fm, &fm->pfb, fm->pseq, fm->perr, fm->cmsg, &ld->cons_cv);
	fm->helping--;
	/* Counted when staged: a batch that failed its checks is no batch. */
	fm->helped += fm->staged != staged;
	/* Only a full thread waiting for this batch (its turn, the end, the
	 * close) is woken: a wake-up for nothing would take the core from
	 * this thread. */
	if (fm->twait)
		pthread_cond_signal(&ld->stage_cv);
	return 1;
}

/* A filler: claims, fills and stages batches as the full thread does,
 * beside it, until the full thread is done (fill_quit). */
struct full_filler {
	rf_loader *ld;
	struct rf_full_mem *fm;
	rf_plan_item *items;
	pthread_t tid;
	char msg[RF_ERRMSG_MAX + 128];
};

static void *
full_filler_main(void *arg)
{
	struct full_filler *f = arg;
	rf_loader *ld = f->ld;
	struct rf_full_mem *fm = f->fm;
	pthread_mutex_lock(&ld->mu);
	while (!fm->fill_quit && !ld->stop && !ld->failed) {
		struct fbatch fb;
		uint64_t seq;
		int rc = ld->stage_held >= fm->lead ? 0
			 : full_mem_claim_locked(ld, fm, &fb, &seq, f->msg, sizeof(f->msg));
		if (rc < 0)
			break;
		if (rc == 0) {
			/* No place (the full thread passes on releases), the
			 * epoch's last batches still filled, or the end. */
			fm->fill_idle++;
			pthread_cond_wait(&fm->fill_cv, &ld->mu);
			fm->fill_idle--;
			continue;
		}
		pthread_mutex_unlock(&ld->mu);
		int err = full_mem_fill(ld, fm, f->items, &fb, f->msg, sizeof(f->msg));
		pthread_mutex_lock(&ld->mu);
		full_mem_stage_locked(ld, fm, &fb, seq, err, f->msg, &fm->fill_cv);
		/* The full thread waiting for this batch (its turn, the end,
		 * the epoch), or the consumer's thread waiting for its turn. */
		ld->wake_defer = 1;
		if (fm->twait)
			rf_ld_wake_locked(ld, WAKE_STAGE);
		if (fm->helping)
			rf_ld_wake_locked(ld, WAKE_CONS);
		rf_ld_unlock_wake(ld);
		pthread_mutex_lock(&ld->mu);
	}
	pthread_mutex_unlock(&ld->mu);
	/* Its CPU time, all of this thread's, counts as the loader's. */
	full_cpu_count(ld, 0);
	return NULL;
}

/* Fillers beside the full thread: the decode threads' count less one (full
 * shuffling decodes nothing; on two cores that is none, and the consumer's
 * thread is the second filler); RINGFEED_FULL_FILLERS sets it (tests). */
static unsigned
full_fillers_wanted(const rf_loader *ld)
{
	const char *e = getenv("RINGFEED_FULL_FILLERS");
	unsigned n = e && *e ? (unsigned)strtoul(e, NULL, 10)
			     : (ld->resolved.decode_threads > 1 ? ld->resolved.decode_threads - 1 : 0);
	return n > RF_DECODE_THREADS_MAX ? RF_DECODE_THREADS_MAX : n;
}

static int
full_main_mem(rf_loader *ld, rf_plan_item *items, const struct sums_res *sr, char *msg,
	      size_t cap)
{
	const rf_batch_layout *l = &ld->layout;
	const uint32_t B = l->batch, np = l->nparts;
	const uint8_t **base = calloc(ld->nshards ? ld->nshards : 1, sizeof(*base));
	struct rf_full_mem fm = {0};
	fm.vsrc = calloc(ld->nchunks * np + 1, sizeof(*fm.vsrc));
	fm.tsrc = calloc(ld->nchunks + 1, sizeof(*fm.tsrc));
	fm.citems = calloc(B, sizeof(*fm.citems));
	uint64_t max_file = 0;
	for (size_t i = 0; i < ld->nshards; i++) {
		rf_shard_info si;
		rf_dataset_shard_info(ld->ds, i, &si);
		if (si.file_size > max_file)
			max_file = si.file_size;
	}
	rf_io_map *m = NULL;
	pthread_mutex_unlock(&ld->mu);
	int rc = base && fm.vsrc && fm.tsrc && fm.citems
		 ? rf_io_map_open(&m, ld->nshards, max_file, &ld->io_diag) : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < ld->nshards; i++) {
		rf_shard_info si;
		rf_dataset_shard_info(ld->ds, i, &si);
		rc = rf_io_map_add(m, i, rf_dataset_shard_path(ld->ds, i));
		int64_t got = rc < 0 ? rc : rf_io_map_range(m, i, 0, si.file_size, &base[i]);
		if (got >= 0 && (uint64_t)got < si.file_size)
			got = RF_ETRUNCATED;
		rc = got < 0 ? (int)got : 0;
	}
	for (uint64_t c = 0; rc == 0 && c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		for (uint32_t q = 0; q < np; q++)
			fm.vsrc[c * np + q] = base[ci->shard] + ci->offset +
				full_section_off(ld->schema, ci->samples, l->part[q].field);
		fm.tsrc[c] = sr->tab && sr->tab[c] ? sr->tab[c]
			     : base[ci->shard] + rf_fmt_sums_offset(ci->offset, ci->stored_bytes);
	}
	pthread_mutex_lock(&ld->mu);
	if (rc < 0) {
		rf_log(&ld->diag, RF_LOG_WARN, "%s: cannot map the shards (%s): reading "
		       "each sample instead", full_mode(ld), rf_strerror(rc));
		/* rf_stats.io_engine said mmap from the open (read under mu). */
		snprintf(ld->stats.io_engine, sizeof(ld->stats.io_engine), "%s", rf_io_engine(ld->io));
		rf_io_map_close(&m);
		free(base);
		free(fm.vsrc);
		free(fm.tsrc);
		free(fm.citems);
		return 1;
	}
	/* No batch from before a reset is left to check. */
	ld->full.cw_busy = 0;
	fm.epoch = ld->reader.epoch;
	fm.k = ld->full.next;
	fm.done_all = ld->plan_empty;
	fm.lead = ld->mem.n_stage < FULL_MEM_LEAD ? ld->mem.n_stage : FULL_MEM_LEAD;
	if (ld->mem.in_place && fm.lead < ld->resolved.depth + 1)
		fm.lead = ld->resolved.depth + 1 < ld->mem.n_stage ? ld->resolved.depth + 1
								  : ld->mem.n_stage;
	/* The consumer's thread fills batches too (host delivery only: a
	 * device's batches go through the copy thread), whatever the samples'
	 * size: small samples' copies wait on memory latency, which two
	 * threads overlap, and a consumer that would wait for the full
	 * thread's copies of large ones makes its own instead (150 KiB
	 * samples, the consumer summing every byte, on 2 quiet cores: 1.7x the
	 * samples/s with it; with 4 busy loops beside it, 1.1-1.4x). */
	if (ld->mem.in_place && !getenv("RINGFEED_FULL_NO_HELP")) {
		ld->full.fm = &fm;
		/* Tests: 0 leaves every batch to the consumer's thread. */
		const char *e = getenv("RINGFEED_FULL_LEAD");
		if (e && *e)
			fm.lead = (unsigned)strtoul(e, NULL, 10);
		/* Tests: a full thread slow to fill its batches, for the
		 * consumer's thread to wait for their turn. */
		e = getenv("RINGFEED_FULL_FILL_DELAY_MS");
		if (e && *e)
			fm.delay_ms = (unsigned)strtoul(e, NULL, 10);
		/* A consumer already waiting may fill the first batch. */
		pthread_cond_broadcast(&ld->cons_cv);
	}
	/* Fillers beside this thread, on machines with the cores for them:
	 * one thread copying samples from memory made 5.5 GB/s of 64 KiB
	 * samples on a 16-core host, the maps read in order 30 GB/s. */
	unsigned nfill = full_fillers_wanted(ld), nstarted = 0;
	struct full_filler *fill = nfill ? calloc(nfill, sizeof(*fill)) : NULL;
	pthread_cond_init(&fm.fill_cv, NULL);
	for (unsigned i = 0; fill && i < nfill; i++) {
		fill[i].ld = ld;
		fill[i].fm = &fm;
		fill[i].items = calloc(B, sizeof(*fill[i].items));
		if (!fill[i].items || pthread_create(&fill[i].tid, NULL, full_filler_main, &fill[i]))
			break;
		nstarted++;
	}
	/* Each filler a batch in hand and one staged. */
	if (nstarted && fm.lead < 2 * (nstarted + 1))
		fm.lead = 2 * (nstarted + 1) < ld->mem.n_stage ? 2 * (nstarted + 1) : ld->mem.n_stage;
	for (;;) {
		if (ld->stop || ld->failed)
			break;
		if (fm.done_all && fm.staged == fm.claimed) {
			ld->plan_done = 1;
			if (!ld->end_pushed) {
				ld->end_pushed = 1;
				struct staged e = {.kind = SK_END};
				rf_ld_sq_push_locked(ld, &e);
			}
			break;
		}
		struct fbatch fb;
		uint64_t seq;
		rc = ld->stage_held >= fm.lead ? 0
		     : full_mem_claim_locked(ld, &fm, &fb, &seq, msg, cap);
		if (rc < 0)
			break;
		if (rc == 0 && fm.done_all && fm.staged == fm.claimed)
			continue;
		if (rc == 0) {
			/* No place (wait for a release), or the consumer's
			 * thread or a filler fills the last batches of the
			 * stream or of the epoch (for their stage). */
			fm.twait = fm.done_all || fm.epoch_wait;
			pthread_cond_wait(&ld->stage_cv, &ld->mu);
			fm.twait = 0;
			continue;
		}
		/* Releases wake this thread only: it passes places on. */
		if (fm.fill_idle && ld->stage_held < fm.lead)
			pthread_cond_broadcast(&fm.fill_cv);
		pthread_mutex_unlock(&ld->mu);
		if (fm.delay_ms)
			usleep(fm.delay_ms * 1000u);
		int err = full_mem_fill(ld, &fm, items, &fb, msg, cap);
		pthread_mutex_lock(&ld->mu);
		/* The consumer it makes ready is woken after the unlock, not
		 * to block on mu at once (see rf_ld_unlock_wake). */
		full_mem_stage_locked(ld, &fm, &fb, seq, err, msg, &ld->stage_cv);
		ld->wake_defer = 1;
		/* A consumer waiting for this batch's turn to stage its own. */
		if (fm.helping)
			rf_ld_wake_locked(ld, WAKE_CONS);
		rf_ld_unlock_wake(ld);
		pthread_mutex_lock(&ld->mu);
	}
	/* The fillers and the consumer's thread may still be copying from
	 * the maps. */
	ld->full.fm = NULL;
	fm.fill_quit = 1;
	pthread_cond_broadcast(&fm.fill_cv);
	pthread_mutex_unlock(&ld->mu);
	for (unsigned i = 0; i < nstarted; i++)
		pthread_join(fill[i].tid, NULL);
	for (unsigned i = 0; fill && i < nfill; i++)
		free(fill[i].items);
	free(fill);
	pthread_mutex_lock(&ld->mu);
	pthread_cond_destroy(&fm.fill_cv);
	while (fm.helping) {
		fm.twait = 1;
		pthread_cond_wait(&ld->stage_cv, &ld->mu);
	}
	fm.twait = 0;
	rf_log(&ld->diag, RF_LOG_INFO, "%s from memory: %" PRIu64 " of %" PRIu64
	       " batches filled on the consumer's thread; %u more threads filling", full_mode(ld),
	       fm.helped, fm.staged, nstarted);
	pthread_mutex_unlock(&ld->mu);
	rf_io_map_close(&m);
	pthread_mutex_lock(&ld->mu);
	free(base);
	free(fm.vsrc);
	free(fm.tsrc);
	free(fm.citems);
	return 0;
}

void *
rf_ld_full_main(void *arg)
{
	rf_loader *ld = arg;
	const rf_batch_layout *l = &ld->layout;
	const uint32_t B = l->batch, np = l->nparts;
	/* Reads per sample: its values, then its checksum row when checked. */
	const uint32_t npr = np + (ld->full.sums ? 1 : 0), nf = ld->schema->nfields;
	const unsigned nfb = ld->mem.n_stage;
	rf_io_done done[RF_LD_REAP_MAX];
	char msg[RF_ERRMSG_MAX + 128];
	int err = 0;

	struct fbatch *fq = calloc(nfb, sizeof(*fq));
	struct fread_rec *rec = calloc(ld->mem.qd, sizeof(*rec));
	rf_plan_item *items = calloc(B, sizeof(*items));
	/* Per queued batch: B checksum rows and the samples they belong to. */
	uint64_t *fsum = ld->full.sums ? calloc((size_t)nfb * B * nf, 8) : NULL;
	uint64_t *fsmp = ld->full.sums ? calloc((size_t)nfb * B, 8) : NULL;
	/* Four entries for every table page of the dataset (fewer
	 * collisions), at most FULL_SUMS_CACHE. */
	struct sums_cache sc = {0};
	struct sums_res sr = {0};
	if (ld->full.sums) {
		uint64_t want = rf_dataset_samples(ld->ds) / (4096 / (8 * nf) ? 4096 / (8 * nf) : 1) +
				2 * ld->nchunks + 1;
		uint32_t np2 = 16;
		while (np2 < FULL_SUMS_CACHE / 4096 && np2 < 4 * want)
			np2 *= 2;
		sc.mask = np2 - 1;
		sc.page = aligned_alloc(4096, (size_t)np2 * 4096);
		sc.tag = calloc(np2, sizeof(*sc.tag));
		sc.shard = calloc(np2, sizeof(*sc.shard));
		sc.pending = calloc(np2, 1);
		sc.last = calloc(np2 / FULL_SUMS_WAYS, 1);
	}
	unsigned bslots[RF_MEMPLAN_BOUNCE_SLOTS_MAX];
	unsigned nb = 0;

	pthread_mutex_lock(&ld->mu);
	if (!fq || !rec || !items ||
	    (ld->full.sums && (!fsum || !fsmp || !sc.page || !sc.tag || !sc.shard || !sc.pending ||
				  !sc.last))) {
		rf_ld_fail_locked(ld, -ENOMEM, "loader: out of memory for the full shuffle's reads");
		goto out;
	}
	/* The bounce slots: outside the staging count, held while this
	 * thread runs. */
	for (; nb < ld->mem.nbounce && nb < RF_MEMPLAN_BOUNCE_SLOTS_MAX; nb++) {
		int rc = rf_ring_acquire(ld->ring, &bslots[nb], 0);
		if (rc < 0) {
			rf_ld_fail_locked(ld, rc, "loader: no free ring slot for the bounce areas");
			goto out;
		}
	}
	if (ld->mem.bspan) {
		uint64_t per = ld->mem.stage_bytes / ld->mem.bspan;
		for (uint32_t i = 0; i < ld->mem.qd; i++)
			rec[i].area = (uint8_t *)rf_ring_slot(ld->ring, bslots[i / per]) +
				      (i % per) * ld->mem.bspan;
	}
	if (ld->full.sums) {
		pthread_mutex_unlock(&ld->mu);
		full_sums_load(ld, &sr);
		pthread_mutex_lock(&ld->mu);
	}
	if (ld->full.mem && full_main_mem(ld, items, &sr, msg, sizeof(msg)) == 0)
		goto out;
	uint32_t free_rec = 0;
	for (uint32_t i = 0; i < ld->mem.qd; i++)
		rec[i].next_free = i + 1 < ld->mem.qd ? i + 1 : UINT32_MAX;
	unsigned fq_head = 0, fq_len = 0;
	int opened = 0;        /* fq's last batch is still being queued */
	uint32_t it_i = 0, it_p = 0, it_n = 0;
	uint64_t epoch = ld->reader.epoch, k = ld->full.next;
	int done_all = ld->plan_empty;
	unsigned inflight = 0;

	for (;;) {
		if (ld->stop || ld->failed)
			break;
		/* Queue reads while the queue depth allows. */
		while (!done_all && inflight < ld->mem.qd) {
			if (!opened) {
				if (k >= rf_plan_batches(ld->reader.plan)) {
					if (ld->reader.epoch_last && epoch + 1 >= ld->reader.epoch_last) {
						done_all = 1;
						break;
					}
					int rc = rf_plan_set_epoch(ld->reader.plan, epoch + 1);
					if (rc < 0) {
						snprintf(msg, sizeof(msg), "loader: the plan of epoch %"
							 PRIu64 " failed: %s", epoch + 1, rf_strerror(rc));
						rf_ld_fail_locked(ld, rc, msg);
						goto out;
					}
					epoch++;
					k = 0;
					continue;
				}
				if (ld->stage_held >= ld->mem.n_stage || fq_len >= nfb)
					break;
				uint32_t n = 0;
				int rc = rf_plan_batch(ld->reader.plan, k, items, B, &n);
				if (rc < 0 || n == 0) {
					snprintf(msg, sizeof(msg), "loader: batch %" PRIu64 " of epoch %"
						 PRIu64 " is missing from the plan", k, epoch);
					rf_ld_fail_locked(ld, rc < 0 ? rc : -EPROTO, msg);
					goto out;
				}
				unsigned slot;
				rc = rf_ring_acquire(ld->ring, &slot, 0);
				if (rc < 0) {
					if (!ld->stop)
						rf_ld_fail_locked(ld, rc, "loader: no free ring slot for a batch");
					goto out;
				}
				ld->stage_held++;
				rf_ld_note_max(&ld->stats.max_slots, ld->stage_held);
				struct fbatch *fb = &fq[(fq_head + fq_len) % nfb];
				fq_len++;
				*fb = (struct fbatch){.slot = slot, .n = n, .epoch = epoch, .k = k,
						      .first = items[0].pos};
				opened = 1;
				it_i = it_p = 0;
				it_n = n;
			}
			unsigned fbi = (fq_head + fq_len - 1) % nfb;
			struct fbatch *fb = &fq[fbi];
			const rf_plan_item *it = &items[it_i];
			const rf_batch_part *p = it_p < np ? &l->part[it_p] : NULL;
			if (it->chunk >= ld->nchunks || it->offset >= ld->chunks[it->chunk].samples) {
				snprintf(msg, sizeof(msg), "loader: the plan names sample %u of chunk %"
					 PRIu64 ", which does not exist", it->offset, it->chunk);
				rf_ld_fail_locked(ld, -EPROTO, msg);
				goto out;
			}
			const rf_chunk_info *ci = &ld->chunks[it->chunk];
			uint64_t vb, off;
			uint8_t *dst;
			uint32_t cpage = UINT32_MAX;
			if (p) {
				vb = p->value_bytes;
				off = ci->offset + full_section_off(ld->schema, ci->samples, p->field) +
				      (uint64_t)it->offset * vb;
				uint8_t *slotp = rf_ring_slot(ld->ring, fb->slot);
				dst = slotp + p->off + (uint64_t)it_i * vb;
			} else {
				/* The sample's row of the checksum table. */
				uint64_t row = (uint64_t)fbi * B + it_i;
				vb = 8 * (uint64_t)nf;
				off = rf_fmt_sums_offset(ci->offset, ci->stored_bytes) +
				      (uint64_t)it->offset * vb;
				dst = (uint8_t *)(fsum + row * nf);
				fsmp[row] = it->sample;
				if (sr.tab && sr.tab[it->chunk]) {
					/* Resident: no read, no lookup. */
					memcpy(dst, sr.tab[it->chunk] + (uint64_t)it->offset * vb, vb);
					it_p = 0;
					if (++it_i == it_n) {
						fb->issued = 1;
						opened = 0;
						k++;
					}
					continue;
				}
				uint64_t fpage = off / 4096;
				if ((off + vb - 1) / 4096 == fpage) {
					uint32_t set = sums_cache_set(&sc, ci->shard, fpage), cs = set;
					int have = 0;
					for (uint32_t w = 0; w < FULL_SUMS_WAYS && !have; w++) {
						cs = set + w;
						have = sc.tag[cs] == fpage + 1 && sc.shard[cs] == ci->shard;
					}
					if (have && !sc.pending[cs]) {
						/* In the cache: no read. */
						memcpy(dst, sc.page + (size_t)cs * 4096 + off % 4096, vb);
						it_p = 0;
						if (++it_i == it_n) {
							fb->issued = 1;
							opened = 0;
							k++;
						}
						continue;
					}
					/* Not there: into an entry of its set with no read
					 * in flight, an empty one first, else round robin. */
					if (!have) {
						uint32_t e = UINT32_MAX;
						for (uint32_t w = 0; w < FULL_SUMS_WAYS && e == UINT32_MAX; w++)
							if (!sc.tag[set + w])
								e = set + w;
						for (uint32_t w = 0; w < FULL_SUMS_WAYS && e == UINT32_MAX; w++) {
							uint32_t x = set + (sc.last[set / FULL_SUMS_WAYS] + w) %
									   FULL_SUMS_WAYS;
							if (!sc.pending[x])
								e = x;
						}
						if (e != UINT32_MAX) {
							cpage = e;
							sc.last[set / FULL_SUMS_WAYS] =
								(uint8_t)((e - set + 1) % FULL_SUMS_WAYS);
						}
					}
				}
			}
			struct fread_rec *r = &rec[free_rec];
			uint32_t ri = free_rec;
			free_rec = r->next_free;
			r->fb = fbi;
			r->dst = dst;
			r->chunk = it->chunk;
			r->sample = it->sample;
			uint8_t *target = dst;
			uint64_t roff = off, rlen = vb;
			r->bounce = NULL;
			/* Per file: some shards may refuse O_DIRECT (tmpfs)
			 * while others take it. */
			if (rf_io_file_direct(ld->io, ld->files[ci->shard]) &&
			    ((off | vb | (uintptr_t)dst) & 4095)) {
				roff = off & ~4095ull;
				rlen = RF_ALIGN_UP(off + vb, RF_FMT_ALIGN) - roff;
				target = r->area;
				r->bounce = target + (off - roff);
			}
			r->cpage = cpage;
			if (cpage != UINT32_MAX) {
				/* Read the row's whole page into the cache. */
				sc.pending[cpage] = 1;
				sc.tag[cpage] = off / 4096 + 1;
				sc.shard[cpage] = ci->shard;
				roff = off & ~4095ull;
				rlen = 4096;
				target = sc.page + (size_t)cpage * 4096;
				r->bounce = target + (off - roff);
			}
			r->off = roff;
			r->len = rlen;
			r->vlen = vb;
			if (++it_p == npr) {
				it_p = 0;
				if (++it_i == it_n) {
					fb->issued = 1;
					opened = 0;
					k++;
				}
			}
			fb->left++;
			int shard = ld->files[ci->shard];
			pthread_mutex_unlock(&ld->mu);
			int rc = rf_io_read(ld->io, shard, roff, target, rlen, ri);
			pthread_mutex_lock(&ld->mu);
			if (rc < 0) {
				snprintf(msg, sizeof(msg), "loader: queueing a read of sample %" PRIu64
					 " failed: %s (%s)", r->sample, rf_strerror(rc), ld->io_diag.msg);
				rf_ld_fail_locked(ld, rc, msg);
				goto out;
			}
			inflight++;
			ld->reader.inflight = inflight;
			rf_ld_note_max(&ld->stats.max_inflight, inflight);
		}
		/* Stage the batches whose reads are all in, in plan order. */
		int unlocked = 0;
		while (fq_len > 0 && fq[fq_head].issued && fq[fq_head].left == 0) {
			if (ld->full.sums) {
				unlocked = 1;
				pthread_mutex_unlock(&ld->mu);
				int vr = full_verify(ld, &fq[fq_head], fsum + (size_t)fq_head * B * nf,
						     fsmp + (size_t)fq_head * B, msg, sizeof(msg));
				pthread_mutex_lock(&ld->mu);
				if (vr < 0) {
					rf_ld_fail_locked(ld, vr, msg);
					goto out;
				}
			}
			full_push_locked(ld, &fq[fq_head]);
			fq_head = (fq_head + 1) % nfb;
			fq_len--;
		}
		if (done_all && fq_len == 0 && !opened) {
			ld->plan_done = 1;
			if (!ld->end_pushed) {
				ld->end_pushed = 1;
				struct staged m = {.kind = SK_END};
				rf_ld_sq_push_locked(ld, &m);
			}
			break;
		}
		if (inflight == 0) {
			/* Nothing to wait for but a staging slot.  A stop or a
			 * slot freed while the checks above ran without the
			 * mutex signalled nobody: look again before waiting. */
			if (unlocked)
				continue;
			pthread_cond_wait(&ld->stage_cv, &ld->mu);
			continue;
		}
		pthread_mutex_unlock(&ld->mu);
		int n = rf_ld_reads_wait(ld, done, RF_LD_REAP_MAX);
		uint64_t bytes = 0;
		for (int i = 0; i < n && !err; i++) {
			struct fread_rec *r = &rec[done[i].tag];
			if (done[i].res < 0 || (uint64_t)done[i].res < r->len) {
				rf_chunk_ctx ctx;
				rf_dataset_chunk_ctx(ld->ds, r->chunk, &ctx);
				err = done[i].res < 0 ? (int)done[i].res : RF_ETRUNCATED;
				snprintf(msg, sizeof(msg), "%s: chunk %" PRIu64 " at offset %" PRIu64
					 ": reading sample %" PRIu64 " (%" PRIu64 " bytes at file offset %"
					 PRIu64 ") %s%s", ctx.path, ctx.chunk, ctx.offset, r->sample,
					 r->len, r->off, done[i].res < 0 ? "failed: " : "came up short: "
					 "the file is truncated", done[i].res < 0 ?
					 rf_strerror((int)done[i].res) : "");
				break;
			}
			if (r->bounce)
				memcpy(r->dst, r->bounce, r->vlen);
			if (r->cpage != UINT32_MAX)
				sc.pending[r->cpage] = 0;
			bytes += (uint64_t)done[i].res;
		}
		atomic_fetch_add_explicit(&ld->stats.bytes_read, bytes, memory_order_relaxed);
		pthread_mutex_lock(&ld->mu);
		if (n < 0) {
			snprintf(msg, sizeof(msg), "loader: waiting for reads failed: %s (%s)",
				 rf_strerror(n), ld->io_diag.msg);
			rf_ld_fail_locked(ld, n, msg);
			break;
		}
		if (err) {
			rf_ld_fail_locked(ld, err, msg);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct fread_rec *r = &rec[done[i].tag];
			fq[r->fb].left--;
			r->next_free = free_rec;
			free_rec = (uint32_t)done[i].tag;
			inflight--;
		}
		ld->reader.inflight = inflight;
	}
out:
	pthread_mutex_unlock(&ld->mu);
	/* Reads still in flight land in ring memory: wait for them before the
	 * ring can be unmapped. */
	while (rf_io_inflight(ld->io) > 0) {
		if (rf_io_wait(ld->io, done, RF_LD_REAP_MAX, 1) < 0)
			break;
	}
	for (unsigned i = 0; i < nb; i++)
		rf_ring_release(ld->ring, bslots[i]);
	free(fq);
	free(rec);
	free(items);
	free(fsum);
	free(fsmp);
	free(sc.page);
	free(sc.tag);
	free(sc.shard);
	free(sc.pending);
	free(sc.last);
	free(sr.buf);
	free(sr.tab);
	rf_ld_thread_exit_account(ld, 0);
	return NULL;
}
