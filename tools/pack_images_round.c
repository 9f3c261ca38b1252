/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack --images / --tar`: a round's images read and checked by -j
 * workers (headers and end marker, or a whole decode with --check decode),
 * then written in pack order.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RF_HAVE_IMAGES
#include "decode/image.h"
#endif

#include "pack_images_impl.h"

/* Samples read and checked per round: what a round holds in memory (256
 * average images, tens of MiB). */
#define ROUND_ITEMS 256

/* Read a whole file into memory; NULL with errno. */
static uint8_t *
read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		goto fail;
	}
	if ((uint64_t)st.st_size > (1ull << 32)) {
		errno = EFBIG; /* more than a chunk holds */
		goto fail;
	}
	if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1)))
		goto fail;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break; /* shrank while read: what is there is checked */
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
fail: {
	int e = errno;
	free(buf);
	close(fd);
	errno = e;
	return NULL;
}
}

/* ------------------------------------------------------------- checking */

/* Check one image; NULL when good, else the reason (allocated). */
static char *
check_image(const uint8_t *data, size_t len, int full, void *scratch)
{
#ifdef RF_HAVE_IMAGES
	rf_image_scratch *s = scratch;
	if (rf_image_check(data, len, full, NULL, s) < 0)
		return strdup(s->msg);
	return NULL;
#else
	/* Without the image libraries: the signature only. */
	(void)full;
	(void)scratch;
	if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
		return NULL;
	if (len >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
		return NULL;
	return strdup(len == 0 ? "empty file" : "not a JPEG or PNG image");
#endif
}

/* A worker of a round: read (--images) and check items until none is left. */
static void *
round_worker(void *arg)
{
	ipack *p = arg;
#ifdef RF_HAVE_IMAGES
	rf_image_scratch sc;
	rf_image_scratch_init(&sc);
	void *scratch = &sc;
#else
	void *scratch = NULL;
#endif
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->nround)
			break;
		item *it = p->round[i];
		if (it->err)
			continue; /* found bad while grouping a tar */
		if (!it->data && it->path) {
			if (!(it->data = read_file(it->path, &it->len))) {
				it->err = ipack_xasprintf("cannot read: %s", strerror(errno));
				continue;
			}
		}
		if (!it->data) {
			it->err = strdup("no image (jpg, jpeg or png) in the sample");
			continue;
		}
		it->err = check_image(it->data, it->len, p->check_decode, scratch);
	}
#ifdef RF_HAVE_IMAGES
	rf_image_scratch_fini(&sc);
#endif
	return NULL;
}

static void
run_round(ipack *p)
{
	pthread_t th[256];
	unsigned n = p->sh.threads, started = 0;

	atomic_store(&p->next, 0);
	if (n > p->nround)
		n = (unsigned)p->nround;
	for (unsigned t = 1; t < n; t++)
		if (pthread_create(&th[started], NULL, round_worker, p) == 0)
			started++;
	round_worker(p);
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);
}

/* ------------------------------------------------------------ writing */

static int
add_bytes_field(ipack *p, const char *name)
{
	uint64_t shape[1] = {0};
	return rf_schema_add(&p->schema, name, RF_DTYPE_BYTES, 1, shape, 0);
}

int
ipack_make_schema(ipack *p)
{
	memset(&p->schema, 0, sizeof p->schema);
	if (add_bytes_field(p, "image") < 0 ||
	    (p->has_label && rf_schema_add(&p->schema, "label", RF_DTYPE_I64, 0, NULL, -1) < 0) ||
	    add_bytes_field(p, "name") < 0 || (p->has_txt && add_bytes_field(p, "txt") < 0) ||
	    (p->has_json && add_bytes_field(p, "json") < 0)) {
		rf_cli_error("cannot make the schema");
		return -1;
	}
	return 0;
}

typedef struct vcol vcol;

static int
vcol_fill(vcol *c, item *const *its, size_t n, int which)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += which == 0 ? its[i]->len : which == 1 ? strlen(its[i]->name)
			 : which == 2 ? its[i]->txt_len : its[i]->json_len;
	if (total > c->cap) {
		free(c->data);
		if (!(c->data = malloc(total)))
			return -1;
		c->cap = total;
	}
	c->off[0] = 0;
	for (size_t i = 0; i < n; i++) {
		const void *src = which == 0 ? its[i]->data : which == 1 ? (void *)its[i]->name
				  : which == 2 ? its[i]->txt : its[i]->json;
		size_t len = which == 0 ? its[i]->len : which == 1 ? strlen(its[i]->name)
			     : which == 2 ? its[i]->txt_len : its[i]->json_len;
		if (len)
			memcpy(c->data + c->off[i], src, len);
		c->off[i + 1] = c->off[i] + (int64_t)len;
	}
	return 0;
}

/* Write the good items of a checked round, in order; a bad one fails the
 * pack, or with --skip-bad is counted.  Frees the items' data. */
static int
write_round(ipack *p)
{
	vcol *cols = p->cols;
	item **good = malloc((p->nround ? p->nround : 1) * sizeof *good);
	int64_t *labels = malloc((p->nround ? p->nround : 1) * sizeof *labels);
	size_t ng = 0;
	int ret = -1;

	if (!good || !labels)
		goto nomem;
	for (size_t i = 0; i < p->nround; i++) {
		item *it = p->round[i];
		const char *where = it->path ? it->path : it->name;
		if (it->err) {
			if (!p->skip_bad) {
				rf_cli_progress_finish(&p->progress);
				rf_cli_error("%s: %s (--skip-bad leaves such files out)", where,
					     it->err);
				goto out;
			}
			rf_cli_note(2, "skipping %s: %s", where, it->err);
			p->skipped++;
			continue;
		}
		if (p->has_label && !it->has_label) {
			if (!p->skip_bad) {
				rf_cli_progress_finish(&p->progress);
				rf_cli_error("%s: no .cls member (other samples have one; "
					     "--skip-bad leaves such samples out)", where);
				goto out;
			}
			rf_cli_note(2, "skipping %s: no .cls member", where);
			p->skipped++;
			continue;
		}
		labels[ng] = it->label;
		good[ng++] = it;
	}
	if (ng) {
		rf_column c[RF_MAX_FIELDS];
		uint32_t k = 0;
		for (int v = 0; v < 4; v++) {
			free(cols[v].off);
			if (!(cols[v].off = malloc((ng + 1) * sizeof(int64_t))))
				goto nomem;
		}
		if (vcol_fill(&cols[0], good, ng, 0) < 0 || vcol_fill(&cols[1], good, ng, 1) < 0 ||
		    (p->has_txt && vcol_fill(&cols[2], good, ng, 2) < 0) ||
		    (p->has_json && vcol_fill(&cols[3], good, ng, 3) < 0))
			goto nomem;
		c[k].data = cols[0].data;
		c[k++].offsets = cols[0].off;
		if (p->has_label) {
			c[k].data = labels;
			c[k++].offsets = NULL;
		}
		c[k].data = cols[1].data;
		c[k++].offsets = cols[1].off;
		if (p->has_txt) {
			c[k].data = cols[2].data;
			c[k++].offsets = cols[2].off;
		}
		if (p->has_json) {
			c[k].data = cols[3].data;
			c[k++].offsets = cols[3].off;
		}
		int rc = rf_writer_add_columns(p->w, ng, c);
		if (rc < 0) {
			const char *m = rf_writer_errmsg(p->w);
			rf_cli_progress_finish(&p->progress);
			rf_cli_error("%s", m && *m ? m : rf_strerror(rc));
			goto out;
		}
		p->written += ng;
	}
	for (size_t i = 0; i < p->nround; i++) {
		p->in_bytes += p->round[i]->len;
		ipack_item_release(p->round[i]);
	}
	ret = 0;
	goto out;
nomem:
	ipack_oom();
out:
	free(good);
	free(labels);
	return ret;
}

/* Read, check and write items [lo, hi) in rounds, in pack order or, with
 * --shuffle (then the whole list), in rf_pack_order's. */
int
ipack_pack_items(ipack *p, size_t lo, size_t hi)
{
	uint64_t *order = NULL;
	size_t pos = lo;
	int ret = -1;

	if (!(p->round = malloc(ROUND_ITEMS * sizeof *p->round)) ||
	    !(order = malloc(ROUND_ITEMS * sizeof *order)))
		goto nomem;
	while (pos < hi) {
		size_t n = hi - pos < ROUND_ITEMS ? hi - pos : ROUND_ITEMS;
		if (rf_cli_interrupted()) {
			ret = 1;
			goto out;
		}
		if (p->sh.shuffle) {
			if (rf_pack_order(p->nitems, p->sh.seed, pos, n, order) < 0)
				goto out;
		} else {
			for (size_t i = 0; i < n; i++)
				order[i] = pos + i;
		}
		p->nround = n;
		for (size_t i = 0; i < n; i++)
			p->round[i] = &p->items[order[i]];
		run_round(p);
		if (write_round(p) < 0)
			goto out;
		pos += n;
		rf_cli_progress_update(&p->progress, pos);
	}
	ret = 0;
	goto out;
nomem:
	ipack_oom();
out:
	free(order);
	free(p->round);
	p->round = NULL;
	return ret;
}
