/* SPDX-License-Identifier: MIT */
/*
 * Images decoded in the pipeline (rf_config.images): one more step of the
 * chunk path, run by the decode workers in parallel before the chunk's turn
 * to gather.  The step decodes and transforms every sample of the chunk's
 * image field (rf_image_load, src/decode/image.h) into the worker's buffer
 * of the chunk's decoded values, and puts a fixed section over that buffer
 * in the field's place: the gather then copies pixels as it copies any
 * fixed field, into an RF_PART_IMAGE part of the batch.
 *
 * Why a whole chunk, in the worker: the workers are what runs in parallel
 * (the gather is one turn at a time, in plan order), and a chunk is what a
 * worker holds.  The price is memory, a chunk of decoded values per worker,
 * bounded and counted by the memory plan.
 *
 * Only the samples this rank takes: in a job of several ranks a chunk read
 * by this rank holds samples that other ranks take.  As the reader issues
 * a read (rf_ld_image_take) it walks its plan's items up to those of that
 * read entry and marks the chunk's samples they name in a bitmap carried
 * with the read (struct lstep.taken, one per window place); the step
 * decodes those alone and the gather never reads the others (asserted in
 * debug builds).  The walk is the reader's, on the reader's plan at the
 * read's epoch, so the set never depends on where the plan is later.
 *
 * Why the pixels do not depend on the run: the random draws are keyed by
 * the order's seed, the read's epoch and the sample's dataset-wide index
 * (the chunk's first_sample + its offset), all facts of the read, not of
 * the worker, the rank or the position in the stream.
 */
#include "loader/internal.h"

#ifndef RF_HAVE_IMAGES
#define RF_HAVE_IMAGES 0
#endif

#if RF_HAVE_IMAGES
#include "decode/image.h"
#endif

/* One decoded field. */
struct rf_ld_image_one {
	uint32_t field;          /* schema index */
	uint32_t channels;
	uint64_t value_bytes;    /* height x width x channels */
	uint32_t height, width;
#if RF_HAVE_IMAGES
	rf_image_transform t;
	uint64_t max_pixels;
#endif
};

struct rf_ld_images {
	uint32_t n;
	struct rf_ld_image_one f[RF_MAX_FIELDS];
	int name_field;          /* "name" (bytes), for messages, or -1 */
	uint32_t max_samples;    /* the largest chunk's */
	/* The samples taken per read: a bitmap of `words` words per window
	 * place, and the reader's walk of its plan's items. */
	uint64_t *taken;
	uint64_t words;
	struct {
		int valid;
		uint64_t epoch, entry; /* of the last read marked */
		uint64_t k;            /* the next plan batch to load */
		uint32_t i, n;         /* items[i..n) not walked yet */
		rf_plan_item *items;   /* a batch's */
	} walk;
};

/* A worker's: the decoder's scratch, the chunk's decoded values per field,
 * and an RGB buffer for a luma output. */
struct rf_ld_image_worker {
#if RF_HAVE_IMAGES
	rf_image_scratch scratch;
#endif
	uint8_t *out[RF_MAX_FIELDS];
	uint8_t *rgb;
};

void
rf_image_field_init(rf_image_field *f, const char *field, uint32_t height, uint32_t width,
		    enum rf_image_transform_kind transform)
{
	if (!f)
		return;
	memset(f, 0, sizeof(*f));
	f->field = field;
	f->height = height;
	f->width = width;
	f->channels = 3;
	f->transform = transform;
	uint32_t m = height > width ? height : width;
	f->resize = (uint32_t)(((uint64_t)m * 8 + 3) / 7);
	if (f->resize > 65535) /* a side's limit: sizes over 57344 resize to it */
		f->resize = 65535;
	f->scale_min = 0.08;
	f->scale_max = 1.0;
	f->ratio_min = 3.0 / 4.0;
	f->ratio_max = 4.0 / 3.0;
	f->flip = 0.5;
	f->dct_scale = 1;
}

/* The bytes of one worker's buffers allocated at open: the chunk's
 * decoded values (and an RGB image for a luma output). */
static uint64_t
worker_bytes(const struct rf_ld_images *im)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < im->n; i++) {
		const struct rf_ld_image_one *o = &im->f[i];
		sum += RF_ALIGN_UP((uint64_t)im->max_samples * o->value_bytes, 64);
#if RF_HAVE_IMAGES
		if (o->channels == 1)
			sum += (uint64_t)o->height * o->width * 3;
#endif
	}
	return sum;
}

/* The most one worker's decoder scratch grows to (as images need). */
static uint64_t
scratch_bound(const struct rf_ld_images *im)
{
	uint64_t most = 0;
#if RF_HAVE_IMAGES
	for (uint32_t i = 0; i < im->n; i++) {
		uint64_t b = rf_image_scratch_bound(&im->f[i].t, im->f[i].max_pixels);
		if (b > most)
			most = b;
	}
#else
	(void)im;
#endif
	return most;
}

/* After the fields are selected, before the settings are resolved (the
 * decode threads and the skip buffer depend on it): check and copy
 * rf_config.images.  The config's pointer is dropped (the caller's). */
int
rf_ld_image_setup(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	rf_config *cfg = &ld->cfg;
	const rf_image_field *in = cfg->images;
	size_t n = cfg->nimages;
	cfg->images = NULL;
	if (!in && n)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: images is NULL with nimages %zu", n);
	if (n == 0)
		return 0;
#if !RF_HAVE_IMAGES
	(void)sel;
	(void)nsel;
	return rf_fail(&ld->diag, RF_EUSAGE, "loader: images: this ringfeed was built without "
		       "image decoding (TurboJPEG and libspng; meson option -Dimages=enabled)");
#else
	if (n > nsel)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: images has %zu entries for %u loaded "
			       "fields", n, nsel);
	struct rf_ld_images *im = calloc(1, sizeof(*im));
	if (!im)
		return rf_fail(&ld->diag, -ENOMEM, "loader: out of memory");
	ld->image = im;
	for (size_t i = 0; i < n; i++) {
		const rf_image_field *e = &in[i];
		if (!e->field)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu]: field is NULL", i);
		for (size_t r = 0; r < sizeof(e->reserved); r++)
			if (e->reserved[r])
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu] (%s): reserved "
					       "bytes are not 0: fill it with rf_image_field_init", i,
					       e->field);
		int k = rf_schema_find(ld->schema, e->field);
		int loaded = 0;
		for (uint32_t j = 0; k >= 0 && j < nsel; j++)
			loaded |= sel[j] == (uint32_t)k;
		if (!loaded)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu]: field '%s' is %s",
				       i, e->field, k < 0 ? "not a field of the dataset" :
				       "not among the fields loaded: add it to rf_config.fields "
				       "(Python fields=)");
		const rf_field *f = &ld->schema->fields[k];
		if (f->var_dim < 0 || rf_dtype_size(f->dtype) != 1 || f->rank != 1)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu]: field '%s' is not "
				       "a variable-size field of bytes (encoded images, as `ringfeed "
				       "pack --images` writes 'image')", i, e->field);
		for (uint32_t j = 0; j < im->n; j++)
			if (im->f[j].field == (uint32_t)k)
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: images: field '%s' is "
					       "named twice", e->field);
		struct rf_ld_image_one *o = &im->f[im->n];
		o->field = (uint32_t)k;
		o->channels = e->channels ? e->channels : 3;
		if (o->channels != 1 && o->channels != 3)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu] (%s): channels %u: "
				       "1 (luma) or 3 (RGB)", i, e->field, e->channels);
		if (e->transform == RF_IMAGE_TRAIN) {
			rf_image_transform_train(&o->t, e->width, e->height);
			o->t.scale_min = e->scale_min;
			o->t.scale_max = e->scale_max;
			o->t.ratio_min = e->ratio_min;
			o->t.ratio_max = e->ratio_max;
			o->t.flip_p = e->flip;
		} else if (e->transform == RF_IMAGE_EVAL) {
			rf_image_transform_eval(&o->t, e->width, e->height, e->resize);
		} else {
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu] (%s): transform %d: "
				       "RF_IMAGE_EVAL or RF_IMAGE_TRAIN", i, e->field,
				       (int)e->transform);
		}
		o->t.dct_scale = e->dct_scale != 0;
		char why[256];
		if (rf_image_transform_check(&o->t, why, sizeof why) < 0)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images[%zu] (%s): %s", i,
				       e->field, why);
		o->max_pixels = e->max_pixels;
		o->height = e->height;
		o->width = e->width;
		o->value_bytes = (uint64_t)e->height * e->width * o->channels;
		im->n++;
	}
	int nk = rf_schema_find(ld->schema, "name");
	im->name_field = nk >= 0 && ld->schema->fields[nk].var_dim >= 0 &&
				 rf_dtype_size(ld->schema->fields[nk].dtype) == 1
			 ? nk : -1;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		if (ld->chunks[c].samples > im->max_samples)
			im->max_samples = ld->chunks[c].samples;
	return 0;
#endif
}

/* With the layout built: the image fields' parts become fixed uint8 parts.
 * The read modes that hold chunks past their turn, or read no chunks, are
 * refused here, once they are resolved. */
int
rf_ld_image_layout(rf_loader *ld)
{
	struct rf_ld_images *im = ld->image;
	if (!im)
		return 0;
	if (ld->full.on || ld->window.on || ld->resolved.shuffle == RF_SHUFFLE_WINDOW ||
	    ld->resolved.shuffle == RF_SHUFFLE_FULL)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: images are decoded with shuffle "
			       "none or chunks, not %s: use none or chunks (pack with `ringfeed pack "
			       "--shuffle SEED` so that chunks mix classes)",
			       rf_shuffle_name(ld->resolved.shuffle));
	for (uint32_t i = 0; i < im->n; i++) {
		uint32_t p = 0;
		while (p < ld->layout.nparts && ld->layout.part[p].field != im->f[i].field)
			p++;
		int rc = p < ld->layout.nparts
				 ? rf_batch_layout_set_image(&ld->layout, p, im->f[i].value_bytes,
							     &ld->diag)
				 : -EINVAL;
		if (rc == -EINVAL)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: images: field '%s' cannot be "
				       "decoded (it is in the token layout?)",
				       ld->schema->fields[im->f[i].field].name);
		if (rc < 0)
			return rc;
	}
	return 0;
}

uint64_t
rf_ld_image_worker_bytes(const rf_loader *ld)
{
	return ld->image ? worker_bytes(ld->image) : 0;
}

uint64_t
rf_ld_image_scratch_bound(const rf_loader *ld)
{
	return ld->image ? scratch_bound(ld->image) : 0;
}

uint64_t
rf_ld_image_item_bytes(const rf_loader *ld)
{
	uint64_t most = 0;
	for (uint32_t i = 0; ld->image && i < ld->image->n; i++)
		if (ld->image->f[i].value_bytes > most)
			most = ld->image->f[i].value_bytes;
	return most;
}

int
rf_ld_image_worker_init(rf_loader *ld, struct worker *w)
{
	struct rf_ld_images *im = ld->image;
	if (!im)
		return 0;
	struct rf_ld_image_worker *iw = calloc(1, sizeof(*iw));
	if (!iw)
		return -ENOMEM;
	w->img = iw;
#if RF_HAVE_IMAGES
	rf_image_scratch_init(&iw->scratch);
	uint64_t rgb = 0;
	for (uint32_t i = 0; i < im->n; i++) {
		const struct rf_ld_image_one *o = &im->f[i];
		uint64_t b = RF_ALIGN_UP((uint64_t)(im->max_samples ? im->max_samples : 1) *
						 o->value_bytes, 64);
		iw->out[i] = aligned_alloc(64, b);
		if (!iw->out[i])
			return -ENOMEM;
		if (o->channels == 1 && (uint64_t)o->height * o->width * 3 > rgb)
			rgb = (uint64_t)o->height * o->width * 3;
	}
	if (rgb && !(iw->rgb = malloc(rgb)))
		return -ENOMEM;
#endif
	return 0;
}

void
rf_ld_image_worker_fini(struct worker *w)
{
	struct rf_ld_image_worker *iw = w->img;
	if (!iw)
		return;
#if RF_HAVE_IMAGES
	rf_image_scratch_fini(&iw->scratch);
#endif
	for (uint32_t i = 0; i < RF_MAX_FIELDS; i++)
		free(iw->out[i]);
	free(iw->rgb);
	free(iw);
	w->img = NULL;
}

int
rf_ld_image_reads_init(rf_loader *ld)
{
	struct rf_ld_images *im = ld->image;
	if (!im || ld->mix)
		return 0;
	im->words = ((uint64_t)(im->max_samples ? im->max_samples : 1) + 63) / 64;
	im->taken = calloc((size_t)(im->words * ld->nwin), sizeof(uint64_t));
	im->walk.items = calloc(ld->layout.batch ? ld->layout.batch : 1, sizeof(rf_plan_item));
	if (!im->taken || !im->walk.items)
		return -ENOMEM;
	im->walk.valid = 0;
	return 0;
}

void
rf_ld_image_reads_reset(rf_loader *ld)
{
	if (ld->image)
		ld->image->walk.valid = 0;
}

void
rf_ld_image_take(rf_loader *ld, struct lstep *st, uint64_t seq)
{
	st->taken = NULL;
	struct rf_ld_images *im = ld->image;
	if (!im || !im->taken || ld->mix)
		return;
	uint64_t *bits = im->taken + (seq % ld->nwin) * im->words;
	memset(bits, 0, im->words * sizeof(uint64_t));
	const rf_plan *plan = ld->reader.plan;
	/* Items name read entries in non-decreasing order (none and chunks
	 * modes): the walk goes on from the last read's items, or starts
	 * the epoch afresh (a new epoch, a resume, a rewind).  A pad repeats
	 * a sample of an earlier item, so it is in an earlier read's set. */
	if (!im->walk.valid || im->walk.epoch != st->epoch || st->entry <= im->walk.entry) {
		im->walk.valid = 1;
		im->walk.epoch = st->epoch;
		im->walk.k = 0;
		im->walk.i = im->walk.n = 0;
	}
	im->walk.entry = st->entry;
	uint64_t nb = rf_plan_batches(plan);
	uint32_t samples = ld->chunks[st->chunk].samples;
	for (;;) {
		if (im->walk.i >= im->walk.n) {
			if (im->walk.k >= nb)
				break;
			uint32_t n = 0;
			if (rf_plan_batch(plan, im->walk.k, im->walk.items, ld->layout.batch, &n) < 0) {
				im->walk.valid = 0; /* cannot happen: decode them all */
				return;
			}
			im->walk.k++;
			im->walk.i = 0;
			im->walk.n = n;
			continue;
		}
		const rf_plan_item *it = &im->walk.items[im->walk.i];
		if (it->read != RF_PLAN_NO_READ && it->read > st->entry)
			break;
		if (it->read == st->entry && it->offset < samples)
			bits[it->offset / 64] |= UINT64_C(1) << (it->offset % 64);
		im->walk.i++;
	}
	st->taken = bits;
}

int
rf_ld_image_taken(const struct lstep *st, uint32_t off, uint32_t n)
{
	for (uint32_t j = off; st->taken && j < off + n; j++)
		if (!((st->taken[j / 64] >> (j % 64)) & 1))
			return 0;
	return 1;
}

void
rf_ld_image_free(rf_loader *ld)
{
	if (ld->image) {
		free(ld->image->taken);
		free(ld->image->walk.items);
	}
	free(ld->image);
	ld->image = NULL;
}

/* A skipped chunk's substitutes (worker.c): the image fields as fixed
 * sections of zeros (black pixels) over the zero buffer, which
 * rf_ld_skip_setup sized for rf_ld_image_item_bytes. */
void
rf_ld_image_skip_sections(const rf_loader *ld, rf_chunk_sections *sec)
{
	for (uint32_t i = 0; ld->image && i < ld->image->n; i++) {
		rf_chunk_section *s = &sec->field[ld->image->f[i].field];
		s->offsets = NULL;
		s->item_bytes = ld->image->f[i].value_bytes;
		s->data_bytes = (uint64_t)sec->samples * s->item_bytes;
	}
}

void
rf_ld_image_describe(const rf_loader *ld, uint32_t part, rf_batch_field *bf)
{
	const struct rf_ld_images *im = ld->image;
	uint32_t field = ld->layout.part[part].field;
	for (uint32_t i = 0; im && i < im->n; i++) {
		if (im->f[i].field != field)
			continue;
		bf->dtype = RF_DTYPE_U8;
		bf->ndim = 4;
		bf->shape[1] = im->f[i].height;
		bf->shape[2] = im->f[i].width;
		bf->shape[3] = im->f[i].channels;
		bf->var_dim = -1;
	}
}

#if RF_HAVE_IMAGES
/* The source's name of sample j, for messages: the "name" field's bytes,
 * printable ones only, or "" when the dataset has none. */
static void
sample_name(const struct rf_ld_images *im, const rf_chunk_sections *sec, uint32_t j, char *buf,
	    size_t cap)
{
	buf[0] = 0;
	if (im->name_field < 0 || cap < 2)
		return;
	const rf_chunk_section *s = &sec->field[im->name_field];
	if (!s->offsets)
		return;
	uint64_t a = s->offsets[j], b = s->offsets[j + 1], k = 0;
	for (uint64_t i = a; i < b && k + 1 < cap; i++) {
		uint8_t c = s->data[i];
		buf[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	buf[k] = 0;
}

/* rgb (h x w x 3) to its luma, as PIL's convert("L"): ITU-R 601-2 weights
 * in 16-bit fixed point, rounded. */
static void
to_luma(const uint8_t *rgb, uint8_t *out, uint64_t pixels)
{
	for (uint64_t i = 0; i < pixels; i++, rgb += 3)
		out[i] = (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >>
				   16);
}
#endif

/* The chunk step: decode and transform every sample of each image field. */
int
rf_ld_image_step(rf_loader *ld, struct worker *w, struct chunk_job *job)
{
#if !RF_HAVE_IMAGES
	(void)ld;
	(void)job;
	return rf_fail(&w->diag, RF_EUSAGE, "loader: built without image decoding");
#else
	const struct rf_ld_images *im = ld->image;
	struct rf_ld_image_worker *iw = w->img;
	rf_chunk_sections *sec = &job->sec;
	const rf_chunk_ctx *ctx = &job->ctx;
	uint64_t decoded = 0;
	for (uint32_t i = 0; i < im->n; i++) {
		const struct rf_ld_image_one *o = &im->f[i];
		rf_chunk_section *s = &sec->field[o->field];
		if (!s->offsets)
			return rf_fail(&w->diag, RF_ECORRUPT, "%s: chunk %" PRIu64 ": field %s has no "
				       "offsets", ctx->path, ctx->chunk,
				       ld->schema->fields[o->field].name);
		iw->scratch.max_pixels = o->max_pixels;
		for (uint32_t j = 0; j < sec->samples; j++) {
			if (job->taken && !((job->taken[j / 64] >> (j % 64)) & 1))
				continue; /* another rank's: never gathered here */
			decoded++;
			uint64_t a = s->offsets[j], b = s->offsets[j + 1];
			uint64_t index = job->info->first_sample + j;
			uint8_t *dst = iw->out[i] + (uint64_t)j * o->value_bytes;
			int rc = rf_image_load(s->data + a, b - a, &o->t, ld->resolved.seed, job->epoch,
					       index, o->channels == 1 ? iw->rgb : dst, NULL,
					       &iw->scratch);
			if (rc < 0) {
				char name[160];
				sample_name(im, sec, j, name, sizeof name);
				return rf_fail(&w->diag, rc, "%s: chunk %" PRIu64 " at offset %" PRIu64
					       ": sample %" PRIu64 "%s%s%s, field %s (%" PRIu64
					       " bytes): %s", ctx->path, ctx->chunk, ctx->offset, index,
					       name[0] ? " (" : "", name, name[0] ? ")" : "",
					       ld->schema->fields[o->field].name, b - a,
					       iw->scratch.msg);
			}
			if (o->channels == 1)
				to_luma(iw->rgb, dst, (uint64_t)o->height * o->width);
		}
		s->data = iw->out[i];
		s->offsets = NULL;
		s->item_bytes = o->value_bytes;
		s->data_bytes = (uint64_t)sec->samples * o->value_bytes;
	}
	atomic_fetch_add_explicit(&ld->stats.images_decoded, decoded, memory_order_relaxed);
	return 0;
#endif
}
