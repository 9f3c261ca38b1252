/* SPDX-License-Identifier: MIT */
/*
 * Mixtures in the loader: several sources (rf_config.sources) streamed as
 * one, in the order of src/plan/mix.h.
 *
 * Open: every source is opened alone first (its errors name it; its schema
 * and chunk count are kept), the fields loaded are checked across them
 * (rf_mix_schemas_check), then all the sources' paths are opened as one
 * dataset, whose chunk table is the sources' tables one after the other:
 * source s's chunk c is the loader's chunk base[s] + c, so the reader,
 * the decode workers and the chunk path address chunks as for one dataset.
 *
 * Order: three rf_mix over the same parameters, one per cursor (the
 * reader's, the gather's, and the consumer's for saving a position), as
 * the plan has three rf_plan.
 *
 * Reader: walks its rank's items (rf_mix_next_batch) and, per source, reads
 * the entries of that source epoch's read sequence from the item's
 * keep_from (or the source's next unread entry) up to the item's read, so
 * every read is issued in the order the items first need it and each
 * source's reads stay in its own read order.
 *
 * Gather: at each read's turn, its chunk is held in its source's window
 * (entries [lo, hi) of the source epoch's read sequence, at most W of
 * them, 1 in none and chunks modes), then items are gathered in stream
 * order as far as the chunks held allow; a source's chunks below its last
 * item's keep_from are let go.  Every read before this one has had its
 * turn, so every item before the one that asked for this read has been
 * gathered: a new source epoch can let the old one's chunks go.  At most
 * sum(W_s) chunks are held, which the memory plan reserves in read slots.
 */
#include <math.h>
#include <string.h>

#include "loader/internal.h"
#include "plan/mix.h"

struct msrc {
	char *path, *name;
	double weight;
	uint64_t base, nchunks, samples;
	uint32_t window;         /* W held at most */
	/* reader */
	int r_on;
	uint64_t r_epoch, r_next;
	/* gather: held chunks of source epoch g_epoch */
	int g_on;
	uint64_t g_epoch, lo, hi;
	struct wentry *tab;
	uint32_t cap;
	/* on_error skip: the chunks of source epoch skip_epoch whose
	 * substitutes a batch has held (rf_stats.chunks_skipped) */
	uint8_t *skip_seen;
	uint64_t skip_epoch;
};

struct rf_ld_mix {
	size_t n;
	struct msrc *src;
	rf_mix *rmix, *gmix, *smix;
	rf_diag diag;
	/* reader */
	rf_mix_item *ritems;
	uint32_t rn, ri;
	uint64_t repoch;
	int p_on;                /* reads pending for one item */
	uint32_t p_src;
	uint64_t p_epoch, p_next, p_last;
	/* gather */
	rf_mix_item *gitems;
};

/* ------------------------------------------------------------- config */

int
rf_ld_mix_config_check(rf_loader *ld)
{
	const rf_config *cfg = &ld->cfg;
	if (!cfg->sources || cfg->nsources == 0)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: nsources is %zu but sources is %s",
			       cfg->nsources, cfg->sources ? "set" : "NULL");
	if (cfg->paths || cfg->npaths)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: give either paths or sources, not "
			       "both (paths set with %zu sources)", cfg->nsources);
	if (cfg->nsources > RF_SOURCES_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: %zu sources, at most %d",
			       cfg->nsources, RF_SOURCES_MAX);
	if (cfg->shuffle == RF_SHUFFLE_FULL)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: a mixture reads chunks: shuffle full "
			       "is not supported with sources (use chunks or window)");
	if (cfg->images && cfg->nimages)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: images (rf_config.images, field "
			       "'%s') are not supported with a mixture (rf_config.sources) yet: "
			       "load the encoded bytes and decode them yourself, or read each "
			       "source alone", cfg->images[0].field ? cfg->images[0].field : "image");
	rf_mix_source ms[RF_SOURCES_MAX];
	memset(ms, 0, sizeof ms);
	for (size_t i = 0; i < cfg->nsources; i++) {
		const rf_source *s = &cfg->sources[i];
		if (!s->path)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: source %zu has no path", i);
		ms[i].name = s->name ? s->name : s->path;
		ms[i].weight = s->weight;
		for (size_t k = 0; s->name && k < i; k++)
			if (cfg->sources[k].name && !strcmp(cfg->sources[k].name, s->name))
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: sources %zu and %zu are "
					       "both named '%s': give each its own name", k, i,
					       s->name);
	}
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	int rc = rf_mix_weights_check(ms, cfg->nsources, &d);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s", d.msg);
	return 0;
}

/* --------------------------------------------------------------- open */

static void
mix_free(struct rf_ld_mix *m)
{
	if (!m)
		return;
	for (size_t i = 0; m->src && i < m->n; i++) {
		free(m->src[i].path);
		free(m->src[i].name);
		for (uint32_t k = 0; m->src[i].tab && k < m->src[i].cap; k++)
			free(m->src[i].tab[k].raw);
		free(m->src[i].tab);
		free(m->src[i].skip_seen);
	}
	free(m->src);
	rf_mix_destroy(&m->rmix);
	rf_mix_destroy(&m->gmix);
	rf_mix_destroy(&m->smix);
	free(m->ritems);
	free(m->gitems);
	free(m);
}

void
rf_ld_mix_free(rf_loader *ld)
{
	mix_free(ld->mix);
	ld->mix = NULL;
}

/* Open each source alone (its messages name it), check the fields across
 * them, then all of them as ld->ds. */
int
rf_ld_mix_open(rf_loader *ld, const rf_dataset_config *dcfg)
{
	const rf_config *cfg = &ld->cfg;
	size_t n = cfg->nsources;
	struct rf_ld_mix *m = calloc(1, sizeof(*m));
	if (!m || !(m->src = calloc(n, sizeof(*m->src)))) {
		free(m);
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	}
	m->n = n;
	rf_diag_init(&m->diag, cfg->log, cfg->log_user);
	ld->mix = m;
	rf_dataset *one[RF_SOURCES_MAX] = {0};
	const rf_schema *sch[RF_SOURCES_MAX];
	const char *names[RF_SOURCES_MAX], *paths[RF_SOURCES_MAX];
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		const rf_source *s = &cfg->sources[i];
		struct msrc *ms = &m->src[i];
		ms->path = strdup(s->path);
		ms->name = strdup(s->name ? s->name : s->path);
		ms->weight = s->weight;
		if (!ms->path || !ms->name) {
			rc = rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
			goto out;
		}
		names[i] = ms->name;
		paths[i] = ms->path;
		const char *p = s->path;
		rc = rf_dataset_open(&one[i], &p, 1, dcfg);
		if (rc < 0) {
			rc = rf_fail(&ld->diag, rc, "loader: source '%s' (%zu): %s", ms->name, i,
				     rf_dataset_last_open_error());
			goto out;
		}
		rf_dataset_close_files(one[i]);
		sch[i] = rf_dataset_schema(one[i]);
		ms->nchunks = rf_dataset_chunks(one[i]);
		ms->samples = rf_dataset_samples(one[i]);
		ms->base = i ? m->src[i - 1].base + m->src[i - 1].nchunks : 0;
	}
	rc = rf_mix_schemas_check(sch, names, n, cfg->fields, cfg->fields ? cfg->nfields : 0,
				  &m->diag);
	if (rc < 0) {
		rc = rf_fail(&ld->diag, rc, "loader: %s", m->diag.msg);
		goto out;
	}
	for (size_t i = 1; i < n; i++) {
		const rf_schema *a = sch[0], *b = sch[i];
		int same = a->nfields == b->nfields;
		for (uint32_t f = 0; same && f < a->nfields; f++)
			same = strcmp(a->fields[f].name, b->fields[f].name) == 0 &&
			       a->fields[f].dtype == b->fields[f].dtype &&
			       a->fields[f].rank == b->fields[f].rank &&
			       a->fields[f].var_dim == b->fields[f].var_dim &&
			       memcmp(a->fields[f].shape, b->fields[f].shape,
				      sizeof(a->fields[f].shape)) == 0;
		if (!same) {
			/* The first field that differs, and whether the two hold
			 * the same names in another order. */
			uint32_t f = 0;
			while (f < a->nfields && f < b->nfields &&
			       strcmp(a->fields[f].name, b->fields[f].name) == 0)
				f++;
			int reordered = a->nfields == b->nfields;
			for (uint32_t k = 0; reordered && k < a->nfields; k++)
				reordered = rf_schema_find(b, a->fields[k].name) >= 0;
			char here[RF_NAME_MAX + 8], there[RF_NAME_MAX + 8];
			snprintf(here, sizeof here, f < b->nfields ? "'%s'" : "none",
				 f < b->nfields ? b->fields[f].name : "");
			snprintf(there, sizeof there, f < a->nfields ? "'%s'" : "none",
				 f < a->nfields ? a->fields[f].name : "");
			if (f == a->nfields && f == b->nfields)
				rc = rf_fail(&ld->diag, RF_ESCHEMA, "loader: source '%s' (%zu) and "
					     "source '%s' (0) have the same field names, but a field "
					     "not loaded differs in dtype or shape; a mixture needs the "
					     "same schema in every source: pack them with the same "
					     "fields", names[i], i, names[0]);
			else
				rc = rf_fail(&ld->diag, RF_ESCHEMA, "loader: source '%s' (%zu) has "
					     "field %u %s where source '%s' (0) has %s%s; the fields "
					     "loaded match, but a mixture needs the same schema in "
					     "every source, in the same order: pack them with the "
					     "same fields in one order", names[i], i, f, here,
					     names[0], there, reordered ? " (the same fields in "
					     "another order)" : "");
			goto out;
		}
	}
	rc = rf_dataset_open(&ld->ds, paths, n, dcfg);
	if (rc < 0) {
		rc = rf_fail(&ld->diag, rc, "loader: the sources together: %s",
			     rf_dataset_last_open_error());
		goto out;
	}
	uint64_t tot = 0;
	for (size_t i = 0; i < n; i++)
		tot += m->src[i].nchunks;
	if (tot != rf_dataset_chunks(ld->ds))
		rc = rf_fail(&ld->diag, RF_EUSAGE, "loader: the sources hold %" PRIu64 " chunks "
			     "alone but %" PRIu64 " together: does one source's path include "
			     "another's shards?", tot, rf_dataset_chunks(ld->ds));
out:
	for (size_t i = 0; i < n; i++)
		rf_dataset_close(&one[i]);
	return rc;
}

/* W held at most per source (set before the memory plan), and their sum. */
uint32_t
rf_ld_mix_held_max(rf_loader *ld)
{
	struct rf_ld_mix *m = ld->mix;
	uint32_t sum = 0;
	for (size_t i = 0; i < m->n; i++) {
		struct msrc *s = &m->src[i];
		s->window = 1;
		if (ld->resolved.shuffle == RF_SHUFFLE_WINDOW)
			s->window = rf_plan_window_in_force(ld->resolved.window,
							    s->nchunks ? s->nchunks : 1);
		if (s->weight > 0)
			sum += s->window;
	}
	return sum;
}

static enum rf_plan_mode
mode_of(enum rf_shuffle s)
{
	return s == RF_SHUFFLE_CHUNKS ? RF_PLAN_CHUNKS : s == RF_SHUFFLE_WINDOW ? RF_PLAN_WINDOW
										  : RF_PLAN_NONE;
}

/* The three mixtures (reader, gather, consumer), the per-source windows and
 * the resume blob. */
int
rf_ld_mix_open_order(rf_loader *ld)
{
	rf_config *cfg = &ld->cfg;
	struct rf_ld_mix *m = ld->mix;
	int rc;
	rf_ld_mix_held_max(ld);
	rf_mix_source ms[RF_SOURCES_MAX];
	uint32_t *counts = malloc((ld->nchunks ? ld->nchunks : 1) * sizeof(*counts));
	if (!counts)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	for (uint64_t c = 0; c < ld->nchunks; c++)
		counts[c] = ld->chunks[c].samples;
	for (size_t i = 0; i < m->n; i++) {
		struct msrc *s = &m->src[i];
		uint64_t fp = rf_plan_mix64(s->nchunks);
		for (uint64_t c = s->base; c < s->base + s->nchunks; c++)
			fp = rf_plan_mix64(fp ^ rf_plan_mix64(ld->chunks[c].xxh3 + ld->chunks[c].samples +
							      (ld->chunks[c].raw_bytes << 20)));
		ms[i] = (rf_mix_source){.name = s->name, .weight = s->weight,
					.counts = counts + s->base, .nchunks = s->nchunks,
					.fingerprint = fp, .mode = mode_of(ld->resolved.shuffle),
					.window = s->window};
		s->cap = s->window + 2;
		s->tab = calloc(s->cap, sizeof(*s->tab));
		if (!s->tab) {
			free(counts);
			return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
		}
		for (uint32_t k = 0; k < s->cap; k++)
			s->tab[k].slot = -1;
	}
	rf_mix_params mp;
	rf_mix_params_init(&mp);
	mp.seed = ld->resolved.seed;
	mp.epoch = ld->resolved.epoch;
	mp.epoch_samples = cfg->epoch_samples;
	mp.rank = ld->resolved.rank;
	mp.world = ld->resolved.world;
	mp.batch = cfg->batch_size;
	mp.tail = cfg->drop_last ? RF_PLAN_DROP : RF_PLAN_KEEP;
	rc = rf_mix_create(&m->rmix, &mp, ms, m->n, &m->diag);
	if (rc == 0)
		rc = rf_mix_create(&m->gmix, &mp, ms, m->n, &m->diag);
	if (rc == 0)
		rc = rf_mix_create(&m->smix, &mp, ms, m->n, &m->diag);
	free(counts);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s", m->diag.msg);
	m->ritems = calloc(cfg->batch_size, sizeof(*m->ritems));
	m->gitems = calloc(cfg->batch_size, sizeof(*m->gitems));
	if (!m->ritems || !m->gitems)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->reader.epoch_last = cfg->epochs ? cfg->epoch + cfg->epochs : 0;
	m->repoch = ld->gather.epoch = ld->delivery.epoch = ld->resolved.epoch;
	ld->gather.direct_ok = 0;
	rc = rf_ld_mix_window_setup(ld);
	if (rc < 0)
		return rc;
	if (cfg->resume) {
		rc = rf_ld_mix_seek_blob(ld, cfg->resume, cfg->resume_len);
		if (rc < 0)
			return rc;
	}
	ld->plan_empty = rf_mix_batches(m->gmix) == 0;
	ld->order_id = rf_mix_order_id(m->gmix);
	ld->order_window = ld->resolved.shuffle == RF_SHUFFLE_WINDOW ? ld->resolved.window : 0;
	rf_log(&ld->diag, RF_LOG_INFO, "plan: mixture of %zu sources, shuffle %s, seed %" PRIu64
	       ", rank %u of %u (%s), epochs of %" PRIu64 " samples, %" PRIu64 " batches of %u, "
	       "order id %016" PRIx64, m->n, rf_shuffle_name(ld->resolved.shuffle),
	       ld->resolved.seed, mp.rank, mp.world, ld->resolved.rank_source,
	       rf_mix_epoch_samples(m->gmix), rf_mix_batches(m->gmix), cfg->batch_size,
	       ld->order_id);
	for (size_t i = 0; i < m->n; i++)
		rf_log(&ld->diag, RF_LOG_INFO, "plan: source '%s' (%zu): %" PRIu64 " samples in %"
		       PRIu64 " chunks, weight %g, share %.6f, within %.3f samples", m->src[i].name,
		       i, m->src[i].samples, m->src[i].nchunks, m->src[i].weight,
		       rf_mix_share(m->gmix, i), rf_mix_bound(m->gmix, i));
	if (ld->plan_empty)
		rf_log(&ld->diag, RF_LOG_WARN, "plan: a mixture epoch has no batch for rank %u: %"
		       PRIu64 " samples, batch_size %u x world %u; the stream is empty", mp.rank,
		       rf_mix_epoch_samples(m->gmix), cfg->batch_size, mp.world);
	return 0;
}

/* ------------------------------------------------------------- resume */

static void
reset_cursors(struct rf_ld_mix *m)
{
	for (size_t i = 0; i < m->n; i++) {
		m->src[i].r_on = 0;
		m->src[i].g_on = 0;
		m->src[i].lo = m->src[i].hi = 0;
		/* a loaded position counts its source epochs' chunks afresh */
		if (m->src[i].skip_seen)
			memset(m->src[i].skip_seen, 0, (size_t)(m->src[i].nchunks / 8 + 1));
	}
	m->rn = m->ri = 0;
	m->p_on = 0;
}

int
rf_ld_mix_seek_blob(rf_loader *ld, const void *blob, size_t len)
{
	struct rf_ld_mix *m = ld->mix;
	rf_config *cfg = &ld->cfg;
	int rc = rf_mix_state_load(m->gmix, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s%s", strncmp(m->diag.msg, "resume", 6) ? "resume: " : "", m->diag.msg);
	const rf_mix_params *p = rf_mix_params_get(m->gmix);
	if (cfg->epochs && (p->epoch < ld->reader.epoch_last - cfg->epochs ||
			    p->epoch >= ld->reader.epoch_last))
		return rf_fail(&ld->diag, RF_ESTATE, "loader: resume: the position lies in epoch %"
			       PRIu64 ", outside this loader's epochs %" PRIu64 "..%" PRIu64
			       ": open with the epoch and epochs of the run that saved it", p->epoch,
			       ld->reader.epoch_last - cfg->epochs, ld->reader.epoch_last - 1);
	rc = rf_mix_state_load(m->rmix, blob, len);
	if (rc == 0)
		rc = rf_mix_state_load(m->smix, blob, len);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "loader: %s%s", strncmp(m->diag.msg, "resume", 6) ? "resume: " : "", m->diag.msg);
	ld->resolved.seed = p->seed;
	ld->resolved.epoch = p->epoch;
	m->repoch = ld->gather.epoch = ld->delivery.epoch = p->epoch;
	ld->gather.done = ld->delivery.done = rf_mix_tell(m->gmix);
	ld->gather.n = ld->gather.i = 0;
	ld->gather.skip = ld->delivery.part = 0;
	reset_cursors(m);
	ld->order_id = rf_mix_order_id(m->gmix);
	rf_log(&ld->diag, RF_LOG_INFO, "resume: mixture epoch %" PRIu64 ", batch %" PRIu64,
	       p->epoch, ld->gather.done);
	return 0;
}

size_t
rf_ld_mix_state_size(const rf_loader *ld)
{
	return RF_MIX_STATE_SIZE(ld->mix->n);
}

int
rf_ld_mix_state_save(rf_loader *ld, uint64_t epoch, uint64_t done, void *buf, size_t cap,
		     size_t *len)
{
	return rf_mix_state_save_at(ld->mix->smix, epoch, done, buf, cap, len);
}

int
rf_ld_mix_source_stats(rf_loader *ld, size_t i, rf_source_stats *st)
{
	struct rf_ld_mix *m = ld->mix;
	if (!m || i >= m->n)
		return -ERANGE;
	pthread_mutex_lock(&ld->mu);
	uint64_t epoch = ld->delivery.epoch, done = ld->delivery.done;
	pthread_mutex_unlock(&ld->mu);
	memset(st, 0, sizeof(*st));
	st->name = m->src[i].name;
	st->weight = m->src[i].weight;
	st->share = rf_mix_share(m->smix, i);
	return rf_mix_source_progress(m->smix, i, epoch, done, &st->samples, &st->epochs,
				      &st->in_epoch);
}

/* ------------------------------------------------------------- reader */

/* The next read (mu held), or 0 after the last epoch. */
int
rf_ld_mix_next_read(rf_loader *ld, struct lstep *st)
{
	struct rf_ld_mix *m = ld->mix;
	if (ld->plan_empty)
		return 0;
	int rc;
	while (!m->p_on) {
		if (m->ri >= m->rn) {
			uint32_t n = 0;
			rc = rf_mix_next_batch(m->rmix, m->ritems, ld->cfg.batch_size, &n);
			if (rc < 0)
				return rc;
			if (n == 0) {
				if (ld->reader.epoch_last && m->repoch + 1 >= ld->reader.epoch_last)
					return 0;
				rc = rf_mix_set_epoch(m->rmix, m->repoch + 1);
				if (rc < 0)
					return rc;
				m->repoch++;
				continue;
			}
			m->rn = n;
			m->ri = 0;
		}
		const rf_mix_item *it = &m->ritems[m->ri++];
		struct msrc *s = &m->src[it->source];
		if (!s->r_on || s->r_epoch != it->source_epoch) {
			s->r_on = 1;
			s->r_epoch = it->source_epoch;
			s->r_next = it->item.keep_from;
		}
		if (it->item.read < s->r_next)
			continue; /* read already */
		m->p_on = 1;
		m->p_src = it->source;
		m->p_epoch = it->source_epoch;
		m->p_next = s->r_next > it->item.keep_from ? s->r_next : it->item.keep_from;
		m->p_last = it->item.read;
		s->r_next = it->item.read + 1;
	}
	const rf_plan *sp = rf_mix_source_plan(m->rmix, m->p_src, m->p_epoch);
	if (!sp)
		return -ENOMEM;
	uint64_t chunk;
	rc = rf_plan_read_chunk(sp, m->p_next, &chunk);
	const struct msrc *s = &m->src[m->p_src];
	if (rc < 0 || chunk >= s->nchunks)
		return rc < 0 ? rc : -ERANGE;
	st->chunk = s->base + chunk;
	st->entry = m->p_next;
	st->epoch = m->p_epoch;
	st->source = m->p_src;
	if (m->p_next++ == m->p_last)
		m->p_on = 0;
	ld->reader.epoch = m->repoch;
	return 1;
}

/* ------------------------------------------------------------- gather */

static void
src_drop_below(rf_loader *ld, struct msrc *s, uint64_t keep_from)
{
	while (s->lo < s->hi && s->lo < keep_from)
		rf_ld_window_entry_release(ld, &s->tab[s->lo++ % s->cap]);
	if (s->lo < keep_from && s->lo == s->hi)
		s->lo = s->hi = keep_from;
}

/* Every held chunk let go (a pipeline reset: slot references are cleared
 * by the caller, raw buffers go back to the pool). */
void
rf_ld_mix_reset(rf_loader *ld)
{
	struct rf_ld_mix *m = ld->mix;
	for (size_t i = 0; i < m->n; i++) {
		struct msrc *s = &m->src[i];
		for (uint32_t k = 0; k < s->cap; k++)
			s->tab[k].slot = -1;
		src_drop_below(ld, s, UINT64_MAX);
	}
	reset_cursors(m);
}

/* `added` substitutes of the source's chunk `chunk` went into
 * the open batch: they count when it is delivered, and so does the chunk
 * when no batch of this source epoch held its substitutes before, so each
 * skipped chunk counts once per source epoch (and rank), as a single
 * dataset's counts once per epoch (rf_ld_skip_gathered). */
static int
mix_skip_gathered(rf_loader *ld, struct msrc *s, uint64_t source_epoch, uint64_t chunk,
		  uint32_t added, rf_diag *d)
{
	if (chunk >= s->nchunks)
		return rf_fail(d, -EPROTO, "loader: mixture: source '%s' has %" PRIu64 " chunks, "
			       "an item names chunk %" PRIu64, s->name, s->nchunks, chunk);
	size_t bytes = (size_t)(s->nchunks / 8 + 1);
	if (!s->skip_seen) {
		s->skip_seen = calloc(bytes, 1);
		if (!s->skip_seen)
			return rf_fail(d, -ENOMEM, "loader: mixture: out of memory");
		s->skip_epoch = source_epoch;
	}
	if (s->skip_epoch != source_epoch) {
		memset(s->skip_seen, 0, bytes);
		s->skip_epoch = source_epoch;
	}
	uint64_t c = chunk;
	ld->gather.cur_subst += added;
	if (!((s->skip_seen[c / 8] >> (c % 8)) & 1)) {
		s->skip_seen[c / 8] |= (uint8_t)(1u << (c % 8));
		ld->gather.cur_subst_chunks++;
	}
	return 0;
}

/* Items, in stream order, as far as the chunks held allow.  0, or an
 * error. */
static int
mix_items(rf_loader *ld, rf_diag *d)
{
	struct rf_ld_mix *m = ld->mix;
	int rc;
	for (;;) {
		if (ld->gather.i >= ld->gather.n) {
			uint32_t n = 0;
			rc = rf_mix_next_batch(m->gmix, m->gitems, ld->layout.batch, &n);
			if (rc < 0)
				return rf_fail(d, rc, "loader: the mixture's next batch failed: %s",
					       rf_mix_errmsg(m->gmix));
			if (n == 0) {
				if (ld->reader.epoch_last && ld->gather.epoch + 1 >= ld->reader.epoch_last)
					return 0; /* the stream's end */
				rc = rf_mix_set_epoch(m->gmix, ld->gather.epoch + 1);
				if (rc < 0)
					return rf_fail(d, rc, "loader: mixture epoch %" PRIu64 ": %s",
						       ld->gather.epoch + 1, rf_strerror(rc));
				ld->gather.epoch++;
				ld->gather.done = 0;
				continue;
			}
			ld->gather.n = n;
			ld->gather.i = 0;
		}
		const rf_mix_item *it = &m->gitems[ld->gather.i];
		struct msrc *s = &m->src[it->source];
		if (!s->g_on || s->g_epoch != it->source_epoch || it->item.read >= s->hi) {
			if (s->g_on && s->g_epoch > it->source_epoch)
				return rf_fail(d, -EPROTO, "loader: mixture: source '%s' is in epoch %"
					       PRIu64 ", an item needs its epoch %" PRIu64, s->name,
					       s->g_epoch, it->source_epoch);
			return 0; /* needs a later read */
		}
		if (it->item.read < s->lo)
			return rf_fail(d, -EPROTO, "loader: mixture: source '%s': an item needs read %"
				       PRIu64 " which was let go (holding %" PRIu64 "..%" PRIu64 ")",
				       s->name, it->item.read, s->lo, s->hi);
		const struct wentry *we = &s->tab[it->item.read % s->cap];
		const rf_chunk_sections *sec = &we->sec;
		const rf_chunk_ctx *ctx = &we->ctx;
		uint32_t r = 1;
		while (ld->gather.i + r < ld->gather.n && it[r].source == it->source &&
		       it[r].source_epoch == it->source_epoch && it[r].item.read == it->item.read &&
		       it[r].item.offset == it->item.offset + r)
			r++;
		if (it->item.offset + (uint64_t)r > sec->samples)
			return rf_fail(d, RF_ECORRUPT, "%s: chunk %" PRIu64 " (source '%s') has %u "
				       "samples, the order asks for sample %u", ctx->path, ctx->chunk,
				       s->name, sec->samples, it->item.offset + r - 1);
		if (ld->gather.cur_slot < 0) {
			rc = rf_ld_gather_open_batch(ld, ld->gather.epoch, it->pos);
			if (rc < 0)
				return rc;
		}
		uint32_t added = 0, part = 0;
		uint64_t need = 0;
		rc = rf_assembly_add(&ld->gather.asmb, sec, it->item.offset, it->item.offset + r,
				     &added, &need, &part);
		if (rc == -E2BIG || (rc == 0 && added == 0)) {
			const rf_batch_part *p = &ld->layout.part[part];
			return rf_fail(d, RF_EMEMPLAN, "%s: source '%s', chunk %" PRIu64 ": sample %"
				       PRIu64 " needs %" PRIu64 " bytes of field %s, more than the %"
				       PRIu64 " left in a batch of %" PRIu64 " (a mixture never closes "
				       "a batch early): raise var_bytes (twice the need leaves room)",
				       ctx->path, s->name, ctx->chunk, it->item.sample, need,
				       ld->schema->fields[p->field].name, p->cap, p->cap);
		}
		if (rc < 0)
			return rf_fail(d, rc, "loader: assembling chunk %" PRIu64 " (source '%s') "
				       "failed", ctx->chunk, s->name);
		if (rf_ld_skip_is_substitute(ld, sec)) {
			rc = mix_skip_gathered(ld, s, it->source_epoch, it->item.chunk, added, d);
			if (rc < 0)
				return rc;
		}
		uint64_t keep_from = it[added - 1].item.keep_from;
		ld->gather.i += added;
		if (ld->gather.i >= ld->gather.n) {
			ld->gather.done++;
			rf_ld_gather_push_batch(ld);
		}
		src_drop_below(ld, s, keep_from);
	}
}

/* A read's turn: hold its chunk in its source's window, then gather. */
int
rf_ld_mix_gather_step(rf_loader *ld, const struct lstep *st, const rf_chunk_sections *sec,
		      const rf_chunk_ctx *ctx, struct worker *w, int in_slot, unsigned read_slot,
		      rf_diag *d)
{
	struct rf_ld_mix *m = ld->mix;
	struct msrc *s = &m->src[st->source];
	if (!s->g_on || s->g_epoch != st->epoch) {
		/* Every item before the one that asked for this read is in:
		 * the source's previous epoch is done with. */
		src_drop_below(ld, s, UINT64_MAX);
		s->g_on = 1;
		s->g_epoch = st->epoch;
		s->lo = s->hi = st->entry;
	}
	if (st->entry > s->hi) {
		/* Reads the items skipped (a dropped tail's draws, or below a
		 * window item's keep_from): nothing held is needed any more. */
		src_drop_below(ld, s, UINT64_MAX);
		s->lo = s->hi = st->entry;
	}
	if (st->entry != s->hi || s->hi - s->lo >= s->cap)
		return rf_fail(d, -EPROTO, "loader: mixture: source '%s': read %" PRIu64 " arrived "
			       "out of order (holding %" PRIu64 "..%" PRIu64 ")", s->name, st->entry,
			       s->lo, s->hi);
	int rc = rf_ld_window_entry_fill(ld, &s->tab[st->entry % s->cap], sec, ctx, w, in_slot,
					 read_slot, "mixture", d);
	if (rc < 0)
		return rc;
	s->hi++;
	return mix_items(ld, d);
}

/* The raw-buffer pool of the windows, shared by the sources. */
int
rf_ld_mix_window_setup(rf_loader *ld)
{
	uint32_t held = rf_ld_mix_held_max(ld);
	ld->window.pool_cap = held + ld->nworkers + 1;
	ld->window.pool = calloc(ld->window.pool_cap, sizeof(*ld->window.pool));
	if (!ld->window.pool)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	/* The workers hand their chunks to rf_ld_gather_step_window, which
	 * passes them on here (the window's own table stays empty). */
	ld->window.on = 1;
	ld->window.raw_cap = rf_dataset_max_raw_bytes(ld->ds);
	return 0;
}

/* A chunk's error names its source: "source 'web' (0): <message>". */
void
rf_ld_mix_name_error(rf_loader *ld, uint32_t source, rf_diag *d)
{
	struct rf_ld_mix *m = ld->mix;
	if (source >= m->n)
		return;
	char msg[RF_ERRMSG_MAX];
	int k = snprintf(msg, sizeof msg, "source '%s' (%u): ", m->src[source].name, source);
	if (k < 0 || (size_t)k >= sizeof msg)
		return;
	size_t left = sizeof msg - (size_t)k;
	memcpy(msg + k, d->msg, left - 1);
	msg[sizeof msg - 1] = 0;
	memcpy(d->msg, msg, sizeof msg);
}

/* The memory plan speaks of a window: for a mixture, say what it holds. */
void
rf_ld_mix_memplan_note(rf_loader *ld, uint32_t held)
{
	char note[160];
	snprintf(note, sizeof note, " [a mixture of %zu sources holds %u decoded chunks at once, "
		 "counted as W: one per source, W per source with window shuffling]", ld->mix->n,
		 held);
	size_t len = strlen(ld->diag.msg);
	if (len + strlen(note) < sizeof ld->diag.msg)
		memcpy(ld->diag.msg + len, note, strlen(note) + 1);
}
