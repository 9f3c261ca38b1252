/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack --images DIR` and `ringfeed pack --tar GLOB`: image
 * datasets as encoded bytes plus labels, one sample per image.
 *
 *   --images DIR   DIR/CLASS/.../FILE: classes are DIR's subdirectories
 *                  sorted by name (label i = the i-th), files sorted by path
 *                  within each class (torchvision's ImageFolder order); the
 *                  class names go to OUT.classes (classes.c).
 *   --tar GLOB     WebDataset-style tar files in sorted order: members
 *                  grouped into samples by key (the path up to the first dot
 *                  of the file name), each extension a field.
 *
 * Fields: image (bytes, the JPEG or PNG file as is), label (i64), name
 * (bytes: the path under DIR, or TAR:KEY) kept for error messages, and with
 * --tar txt and json (bytes) when any sample has them.
 *
 * Each image is checked before it is written (headers and end marker, or a
 * whole decode with --check decode), by -j threads.  A file that cannot be
 * read or is not a JPEG or PNG fails the pack with its path, or with
 * --skip-bad is left out, named at -v and counted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RF_HAVE_ARCHIVE
#include <archive.h>
#include <archive_entry.h>
#endif
#ifdef RF_HAVE_IMAGES
#include "decode/image.h"
#endif

#include "images.h"
#include "util.h"

#define IPACK_USAGE                                                                          \
	"ringfeed pack -o OUT.rfs (--images DIR | --tar GLOB) [--skip-bad] [--check "         \
	"header|decode]\n"                                                                     \
	"                     [--shuffle SEED] [-j THREADS] [--zstd LEVEL] [--chunk-bytes SIZE]" \
	" [--shard-bytes SIZE] [-q|-v]"

/* Samples read and checked per round: what a round holds in memory (256
 * average images, tens of MiB). */
#define ROUND_ITEMS 256

typedef struct item {
	char *path;          /* --images: the file to read */
	char *name;          /* the name stored: path under DIR, or TAR:KEY */
	int64_t label;
	int has_label;
	uint8_t *data;       /* the image, once read (--tar: from the start) */
	size_t len;
	uint8_t *txt, *json; /* --tar */
	size_t txt_len, json_len;
	char *err;           /* why the sample is bad; NULL when good */
} item;

typedef struct ipack {
	const char *out;
	const char *images_dir;
	const char *tar_glob;
	int skip_bad;
	int check_decode;
	int shuffle;
	uint64_t seed;
	unsigned threads;
	int zstd_level;
	uint64_t chunk_bytes, shard_bytes;

	item *items;
	size_t nitems, cap;
	char **classes;
	size_t nclasses;
	int has_txt, has_json, has_label;
	rf_schema schema;
	rf_writer *w;
	uint64_t skipped, written, in_bytes;
	rf_cli_progress progress;
	/* a round being read and checked */
	item **round;
	size_t nround;
	atomic_size_t next;
	struct vcol {
		uint8_t *data;
		int64_t *off;
		size_t cap;
	} cols[4];               /* image, name, txt, json of a round */
	glob_t tars;
	struct tar_job *jobs;
	size_t njobs;
} ipack;

/* ------------------------------------------------------------- helpers */

static char *
xasprintf(const char *fmt, ...) RF_CLI_PRINTF(1, 2);

static char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static int
oom(void)
{
	rf_cli_error("out of memory");
	return -1;
}

static item *
new_item(ipack *p)
{
	if (p->nitems == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 1024;
		item *n = realloc(p->items, cap * sizeof *n);
		if (!n)
			return NULL;
		p->items = n;
		p->cap = cap;
	}
	item *it = &p->items[p->nitems++];
	memset(it, 0, sizeof *it);
	return it;
}

static void
item_release(item *it)
{
	free(it->data);
	free(it->txt);
	free(it->json);
	free(it->err);
	it->data = it->txt = it->json = NULL;
	it->err = NULL;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

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
				it->err = xasprintf("cannot read: %s", strerror(errno));
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
	unsigned n = p->threads, started = 0;

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

static int
make_schema(ipack *p)
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
		item_release(p->round[i]);
	}
	ret = 0;
	goto out;
nomem:
	oom();
out:
	free(good);
	free(labels);
	return ret;
}

/* Read, check and write items [lo, hi) in rounds, in pack order or, with
 * --shuffle (then the whole list), in rf_pack_order's. */
static int
pack_items(ipack *p, size_t lo, size_t hi)
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
		if (p->shuffle) {
			if (rf_pack_order(p->nitems, p->seed, pos, n, order) < 0)
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
	oom();
out:
	free(order);
	free(p->round);
	p->round = NULL;
	return ret;
}

/* ------------------------------------------------------ image folders */

/* Append DIR/rel's regular files (recursively, hidden ones skipped) to
 * *list as paths relative to the class directory's parent. */
static int
walk(const char *root, const char *rel, char ***list, size_t *n, size_t *cap, int depth)
{
	char *dir = xasprintf("%s/%s", root, rel);
	DIR *d;
	struct dirent *e;
	int ret = 0;

	if (!dir)
		return oom();
	if (depth > 64) {
		/* Links are followed, as ImageFolder does: a loop ends here. */
		rf_cli_error("%s: more than 64 folders deep (a symbolic link loop?)", dir);
		free(dir);
		return -1;
	}
	if (!(d = opendir(dir))) {
		rf_cli_error("%s: %s", dir, strerror(errno));
		free(dir);
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		char *r = xasprintf("%s/%s", rel, e->d_name);
		char *full = r ? xasprintf("%s/%s", root, r) : NULL;
		if (!full) {
			free(r);
			ret = oom();
			break;
		}
		if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
			free(full);
			ret = walk(root, r, list, n, cap, depth + 1);
			free(r);
			if (ret < 0)
				break;
			continue;
		}
		free(full);
		/* Anything else (a broken link, a device) is read later and
		 * reported with its path then. */
		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 256;
			char **l = realloc(*list, c * sizeof *l);
			if (!l) {
				free(r);
				ret = oom();
				break;
			}
			*list = l;
			*cap = c;
		}
		(*list)[(*n)++] = r;
	}
	closedir(d);
	free(dir);
	return ret;
}

static int
scan_images(ipack *p)
{
	const char *root = p->images_dir;
	DIR *d = opendir(root);
	struct dirent *e;
	size_t cap = 0, loose = 0;

	if (!d) {
		rf_cli_error("--images %s: %s", root, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		char *full = xasprintf("%s/%s", root, e->d_name);
		if (!full) {
			closedir(d);
			return oom();
		}
		int isdir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
		free(full);
		if (!isdir) {
			rf_cli_note(2, "%s/%s: not in a class directory, left out", root, e->d_name);
			loose++;
			continue;
		}
		if (strchr(e->d_name, '\n')) {
			rf_cli_error("%s/%s: a class name with a newline cannot be stored", root,
				     e->d_name);
			closedir(d);
			return -1;
		}
		if (p->nclasses == cap) {
			cap = cap ? 2 * cap : 64;
			char **c = realloc(p->classes, cap * sizeof *c);
			if (!c) {
				closedir(d);
				return oom();
			}
			p->classes = c;
		}
		if (!(p->classes[p->nclasses] = strdup(e->d_name))) {
			closedir(d);
			return oom();
		}
		p->nclasses++;
	}
	closedir(d);
	if (loose)
		rf_cli_note(1, "%zu file(s) directly in %s are not in a class directory and are "
			    "left out", loose, root);
	if (p->nclasses == 0) {
		rf_cli_error("--images %s: no class directories (expected DIR/CLASS/FILE)", root);
		return -1;
	}
	qsort(p->classes, p->nclasses, sizeof *p->classes, cmp_str);
	for (size_t c = 0; c < p->nclasses; c++) {
		char **files = NULL;
		size_t n = 0, fcap = 0;
		if (walk(root, p->classes[c], &files, &n, &fcap, 0) < 0) {
			for (size_t i = 0; i < n; i++)
				free(files[i]);
			free(files);
			return -1;
		}
		qsort(files, n, sizeof *files, cmp_str);
		if (n == 0)
			rf_cli_note(1, "class '%s' (label %zu) has no files", p->classes[c], c);
		for (size_t i = 0; i < n; i++) {
			item *it = new_item(p);
			if (!it || !(it->path = xasprintf("%s/%s", root, files[i]))) {
				for (; i < n; i++)
					free(files[i]);
				free(files);
				return oom();
			}
			it->name = files[i];
			it->label = (int64_t)c;
			it->has_label = 1;
		}
		free(files);
	}
	p->has_label = 1;
	if (p->nitems == 0) {
		rf_cli_error("--images %s: no files in its %zu class directories", root,
			     p->nclasses);
		return -1;
	}
	rf_cli_note(2, "%zu files in %zu classes", p->nitems, p->nclasses);
	return 0;
}

/* ----------------------------------------------------------- tar files */

#ifdef RF_HAVE_ARCHIVE

typedef struct tar_job {
	ipack *p;
	const char *path;
	size_t first, count;   /* its items */
	char *err;             /* a failure of the whole file */
} tar_job;

/* Split a member's path into key and extension (WebDataset: the extension
 * starts at the first dot of the file name).  Returns the key length. */
static size_t
split_key(const char *path, const char **ext)
{
	const char *base = strrchr(path, '/');
	const char *dot;

	base = base ? base + 1 : path;
	dot = strchr(base, '.');
	if (!dot) {
		*ext = "";
		return strlen(path);
	}
	*ext = dot + 1;
	return (size_t)(dot - path);
}

enum member_kind { M_IMAGE, M_CLS, M_TXT, M_JSON, M_OTHER };

static enum member_kind
member_kind(const char *ext)
{
	if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg") || !strcasecmp(ext, "png"))
		return M_IMAGE;
	if (!strcasecmp(ext, "cls"))
		return M_CLS;
	if (!strcasecmp(ext, "txt"))
		return M_TXT;
	if (!strcasecmp(ext, "json"))
		return M_JSON;
	return M_OTHER;
}

static struct archive *
tar_open(const char *path)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rf_cli_error("%s: %s", path, archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* One pass over the member names: the samples (keys) and which fields
 * appear, so the schema and the items exist before any data is read. */
static int
tar_scan(ipack *p, const char *path, size_t *others)
{
	struct archive *a = tar_open(path);
	struct archive_entry *e;
	char *last = NULL;
	size_t lastlen = 0;
	item *cur = NULL;
	int r, ret = 0;

	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *ext;
		if (archive_entry_filetype(e) != AE_IFREG || !name)
			continue;
		size_t klen = split_key(name, &ext);
		enum member_kind k = member_kind(ext);
		if (k == M_OTHER) {
			(*others)++;
			continue;
		}
		if (!cur || klen != lastlen || memcmp(last, name, klen) != 0) {
			free(last);
			if (!(last = strndup(name, klen)) || !(cur = new_item(p)) ||
			    !(cur->name = xasprintf("%s:%s", path, last))) {
				ret = oom();
				break;
			}
			lastlen = klen;
		}
		p->has_txt |= k == M_TXT;
		p->has_json |= k == M_JSON;
		p->has_label |= k == M_CLS;
	}
	if (ret == 0 && r != ARCHIVE_EOF) {
		rf_cli_error("%s: %s", path, archive_error_string(a));
		ret = -1;
	}
	free(last);
	archive_read_free(a);
	return ret;
}

static uint8_t *
member_data(struct archive *a, struct archive_entry *e, size_t *len)
{
	la_int64_t size = archive_entry_size(e);
	uint8_t *buf;
	size_t got = 0;

	if (size < 0 || (uint64_t)size > (1ull << 32))
		return NULL;
	if (!(buf = malloc(size ? (size_t)size : 1)))
		return NULL;
	while (got < (size_t)size) {
		la_ssize_t n = archive_read_data(a, buf + got, (size_t)size - got);
		if (n <= 0) {
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	*len = got;
	return buf;
}

/* Read one tar's members into its items (the same walk as tar_scan). */
static void *
tar_read(void *arg)
{
	tar_job *t = arg;
	ipack *p = t->p;
	struct archive *a;
	struct archive_entry *e;
	size_t idx = t->first - 1, seen = 0;
	char *last = NULL;
	size_t lastlen = 0;
	int r;

	if (!(a = archive_read_new())) {
		t->err = strdup("out of memory");
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_filename(a, t->path, 1 << 16) != ARCHIVE_OK) {
		t->err = xasprintf("%s", archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *ext;
		if (archive_entry_filetype(e) != AE_IFREG || !name)
			continue;
		size_t klen = split_key(name, &ext);
		enum member_kind k = member_kind(ext);
		if (k == M_OTHER)
			continue;
		if (!seen || klen != lastlen || memcmp(last, name, klen) != 0) {
			free(last);
			last = strndup(name, klen);
			lastlen = klen;
			idx++;
			seen++;
			if (!last || idx >= t->first + t->count) {
				t->err = strdup("the tar file changed while packing");
				goto out;
			}
		}
		item *it = &p->items[idx];
		size_t len = 0;
		uint8_t *d = member_data(a, e, &len);
		if (!d) {
			if (!it->err)
				it->err = xasprintf("cannot read member %s: %s", name,
						    archive_error_string(a) ? archive_error_string(a)
									    : "too large or short");
			continue;
		}
		switch (k) {
		case M_IMAGE:
			if (it->data && !it->err)
				it->err = xasprintf("two images in one sample (%s)", name);
			free(it->data);
			it->data = d;
			it->len = len;
			break;
		case M_CLS: {
			char txt[32];
			char *end;
			size_t m = len < sizeof txt - 1 ? len : sizeof txt - 1;
			memcpy(txt, d, m);
			txt[m] = 0;
			errno = 0;
			long long v = strtoll(txt, &end, 10);
			while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
				end++;
			if (errno || end == txt || *end || len >= sizeof txt) {
				if (!it->err)
					it->err = xasprintf("%s: not an integer class", name);
			} else {
				it->label = v;
				it->has_label = 1;
			}
			free(d);
			break;
		}
		case M_TXT:
			free(it->txt);
			it->txt = d;
			it->txt_len = len;
			break;
		default:
			free(it->json);
			it->json = d;
			it->json_len = len;
			break;
		}
	}
	if (r != ARCHIVE_EOF)
		t->err = xasprintf("%s", archive_error_string(a));
out:
	free(last);
	archive_read_free(a);
	return NULL;
}

static int
read_tars(ipack *p, tar_job *jobs, size_t njobs)
{
	pthread_t th[256];
	int ret = 0;

	for (size_t i = 0; i < njobs; i += p->threads) {
		size_t n = njobs - i < p->threads ? njobs - i : p->threads, started = 0;
		int ok[256];
		for (size_t k = 0; k < n; k++)
			ok[k] = pthread_create(&th[k], NULL, tar_read, &jobs[i + k]) == 0;
		for (size_t k = 0; k < n; k++) {
			if (ok[k]) {
				pthread_join(th[k], NULL);
				started++;
			} else {
				tar_read(&jobs[i + k]);
			}
		}
		for (size_t k = 0; k < n; k++) {
			if (jobs[i + k].err) {
				rf_cli_error("%s: %s", jobs[i + k].path, jobs[i + k].err);
				ret = -1;
			}
		}
		if (ret < 0)
			break;
	}
	return ret;
}

/* The tar files and their samples (names only: no data is read yet). */
static int
scan_tars(ipack *p)
{
	size_t others = 0;
	int rc = glob(p->tar_glob, GLOB_ERR, NULL, &p->tars);

	if (rc == GLOB_NOMATCH) {
		rf_cli_error("--tar: no file matches '%s'", p->tar_glob);
		return -1;
	}
	if (rc != 0) {
		rf_cli_error("--tar: cannot expand '%s'", p->tar_glob);
		return -1;
	}
	if (!(p->jobs = calloc(p->tars.gl_pathc, sizeof *p->jobs)))
		return oom();
	p->njobs = p->tars.gl_pathc;
	for (size_t i = 0; i < p->njobs; i++) {
		p->jobs[i].p = p;
		p->jobs[i].path = p->tars.gl_pathv[i];
		p->jobs[i].first = p->nitems;
		if (tar_scan(p, p->jobs[i].path, &others) < 0)
			return -1;
		p->jobs[i].count = p->nitems - p->jobs[i].first;
	}
	if (others)
		rf_cli_note(1, "%zu tar member(s) with extensions other than jpg, jpeg, png, cls, "
			    "txt and json are left out", others);
	if (p->nitems == 0) {
		rf_cli_error("--tar %s: no samples", p->tar_glob);
		return -1;
	}
	rf_cli_note(2, "%zu samples in %zu tar file(s)", p->nitems, p->njobs);
	return 0;
}

/* Memory: with --shuffle every tar is read first (any sample may come
 * next); without, THREADS tars at a time. */
static int
pack_tars(ipack *p)
{
	if (p->shuffle) {
		if (read_tars(p, p->jobs, p->njobs) < 0)
			return -1;
		return pack_items(p, 0, p->nitems);
	}
	for (size_t i = 0; i < p->njobs; i += p->threads) {
		size_t n = p->njobs - i < p->threads ? p->njobs - i : p->threads;
		int rc;
		if (read_tars(p, p->jobs + i, n) < 0)
			return -1;
		size_t lo = p->jobs[i].first;
		size_t hi = p->jobs[i + n - 1].first + p->jobs[i + n - 1].count;
		if ((rc = pack_items(p, lo, hi)) != 0)
			return rc;
	}
	return 0;
}

#endif /* RF_HAVE_ARCHIVE */

/* ----------------------------------------------------------------- main */

void
rf_pack_images_help(FILE *f)
{
	fprintf(f,
		"Image inputs (encoded bytes plus labels; see docs/format.md):\n"
		"  --images DIR           an image folder, DIR/CLASS/.../FILE: the classes are\n"
		"                         DIR's subdirectories sorted by name (label i = the\n"
		"                         i-th, names written to OUT.classes, shown by info),\n"
		"                         files sorted by path within a class.  Fields: image\n"
		"                         (the file's bytes), label (i64), name (its path\n"
		"                         under DIR, for error messages).\n"
		"  --tar GLOB             WebDataset tar files (sorted): members grouped into\n"
		"                         samples by key (the name up to its first dot);\n"
		"                         jpg/jpeg/png -> image, cls -> label, txt and json\n"
		"                         -> fields of their own, name = TAR:KEY.  Without\n"
		"                         --shuffle THREADS tar files are held in memory at\n"
		"                         a time; with it, all of them.\n"
		"  --skip-bad             leave out files that cannot be read or are not JPEG\n"
		"                         or PNG (each named with -v, the count at the end);\n"
		"                         without it the first such file fails the pack\n"
		"  --check header|decode  how images are checked: headers and end marker\n"
		"                         (default), or a whole decode (slower)\n"
		"  -j N                   also reads and checks images on N threads\n");
}

int
rf_pack_images_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (!strcmp(argv[i], "--images") || !strncmp(argv[i], "--images=", 9) ||
		    !strcmp(argv[i], "--tar") || !strncmp(argv[i], "--tar=", 6))
			return 1;
	}
	return 0;
}

enum {
	OPT_ZSTD = 256,
	OPT_CHUNK,
	OPT_SHARD,
	OPT_SHUFFLE,
	OPT_IMAGES,
	OPT_TAR,
	OPT_SKIP,
	OPT_CHECK,
};

static int
parse(ipack *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"zstd", required_argument, NULL, OPT_ZSTD},
		{"chunk-bytes", required_argument, NULL, OPT_CHUNK},
		{"shard-bytes", required_argument, NULL, OPT_SHARD},
		{"threads", required_argument, NULL, 'j'},
		{"shuffle", required_argument, NULL, OPT_SHUFFLE},
		{"images", required_argument, NULL, OPT_IMAGES},
		{"tar", required_argument, NULL, OPT_TAR},
		{"skip-bad", no_argument, NULL, OPT_SKIP},
		{"check", required_argument, NULL, OPT_CHECK},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, rc;

	p->threads = 1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:j:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			p->out = optarg;
			break;
		case OPT_ZSTD:
			if (rf_cli_parse_uint(optarg, 0, 22, &v) < 0)
				return rf_cli_usage_error(IPACK_USAGE,
							  "--zstd: '%s' is not a level in 0..22", optarg);
			p->zstd_level = (int)v;
			break;
		case OPT_CHUNK:
		case OPT_SHARD:
			if ((rc = rf_cli_parse_size(optarg, &v)) < 0 || v == 0 ||
			    (c == OPT_CHUNK && v > (1ull << 32)))
				return rf_cli_usage_error(IPACK_USAGE, "%s: '%s' is not a size",
							  c == OPT_CHUNK ? "--chunk-bytes"
									 : "--shard-bytes", optarg);
			if (c == OPT_CHUNK)
				p->chunk_bytes = v;
			else
				p->shard_bytes = v;
			break;
		case 'j':
			if (rf_cli_parse_uint(optarg, 1, 256, &v) < 0)
				return rf_cli_usage_error(IPACK_USAGE,
							  "-j: '%s' is not a thread count in 1..256",
							  optarg);
			p->threads = (unsigned)v;
			break;
		case OPT_SHUFFLE:
			if (rf_cli_parse_uint(optarg, 0, UINT64_MAX, &v) < 0)
				return rf_cli_usage_error(IPACK_USAGE, "--shuffle: '%s' is not a seed in "
							  "0..18446744073709551615", optarg);
			p->shuffle = 1;
			p->seed = v;
			break;
		case OPT_IMAGES:
			p->images_dir = optarg;
			break;
		case OPT_TAR:
			if (p->tar_glob)
				return rf_cli_usage_error(IPACK_USAGE,
							  "--tar given twice (one glob, quoted)");
			p->tar_glob = optarg;
			break;
		case OPT_SKIP:
			p->skip_bad = 1;
			break;
		case OPT_CHECK:
			if (strcmp(optarg, "header") && strcmp(optarg, "decode"))
				return rf_cli_usage_error(IPACK_USAGE,
							  "--check: '%s' is not header or decode",
							  optarg);
			p->check_decode = strcmp(optarg, "decode") == 0;
			break;
		case 'q':
			rf_cli_verbosity = 0;
			break;
		case 'v':
			rf_cli_verbosity = rf_cli_verbosity < 1 ? 2 : rf_cli_verbosity + 1;
			break;
		case 'h':
			printf("usage: %s\n\n", IPACK_USAGE);
			rf_pack_images_help(stdout);
			return -1;
		default:
			return rf_cli_bad_option(IPACK_USAGE, c, argc, argv);
		}
	}
	if (optind < argc)
		return rf_cli_usage_error(IPACK_USAGE, "unexpected argument '%s' (image inputs "
					  "do not mix with NAME=FILE.npy)", argv[optind]);
	if (!p->out || !*p->out)
		return rf_cli_usage_error(IPACK_USAGE, "missing -o OUT.rfs");
	if (p->images_dir && p->tar_glob)
		return rf_cli_usage_error(IPACK_USAGE, "cannot mix --images and --tar inputs");
#ifndef RF_HAVE_ARCHIVE
	if (p->tar_glob) {
		rf_cli_error("--tar: this ringfeed was built without libarchive");
		return RF_CLI_FAIL;
	}
#endif
#ifndef RF_HAVE_IMAGES
	if (p->check_decode) {
		rf_cli_error("--check decode: this ringfeed was built without the image "
			     "decoders (TurboJPEG, libspng)");
		return RF_CLI_FAIL;
	}
#endif
	return 0;
}

/* The writer's log: errors are printed by the caller from errmsg. */
static void
ipack_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if ((level == RF_LOG_WARN && rf_cli_verbosity >= 1) ||
	    (level == RF_LOG_INFO && rf_cli_verbosity >= 2) ||
	    (level != RF_LOG_ERROR && rf_cli_verbosity >= 3))
		fprintf(stderr, "%s: %s\n", rf_cli_prog, msg);
}

int
rf_cmd_pack_images(int argc, char **argv)
{
	ipack pk, *p = &pk;
	rf_writer_config cfg;
	int rc, status = RF_CLI_FAIL;
	double t0 = rf_cli_now();
	char a[24];

	memset(p, 0, sizeof *p);
	if ((rc = parse(p, argc, argv)) != 0) {
		status = rc < 0 ? RF_CLI_OK : rc;
		goto out;
	}
	rf_cli_signals_install();
	if (p->images_dir)
		rc = scan_images(p);
#ifdef RF_HAVE_ARCHIVE
	else
		rc = scan_tars(p);
#endif
	if (rc < 0 || make_schema(p) < 0)
		goto out;

	rf_writer_config_init(&cfg);
	cfg.zstd_level = p->zstd_level;
	if (p->chunk_bytes)
		cfg.chunk_bytes = p->chunk_bytes;
	cfg.shard_bytes = p->shard_bytes;
	cfg.threads = p->threads;
	cfg.log = ipack_log;
	if ((rc = rf_writer_open(&p->w, p->out, &p->schema, &cfg)) < 0) {
		const char *m = rf_writer_last_error();
		rf_cli_error("%s", m && *m ? m : rf_strerror(rc));
		goto out;
	}
	rf_cli_progress_start(&p->progress, "packing", p->nitems);
	if (p->images_dir)
		rc = pack_items(p, 0, p->nitems);
#ifdef RF_HAVE_ARCHIVE
	else
		rc = pack_tars(p);
#endif
	rf_cli_progress_finish(&p->progress);
	if (rc != 0) {
		if (rc > 0) {
			rf_cli_error("interrupted; nothing written");
			status = 128 + rf_cli_interrupted();
		}
		goto out;
	}
	if (p->written == 0) {
		rf_cli_error("no sample left to write (%" PRIu64 " skipped)", p->skipped);
		goto out;
	}
	if ((rc = rf_writer_close(&p->w)) < 0) {
		const char *m = rf_writer_last_error();
		rf_cli_error("%s: %s", p->out, m && *m ? m : rf_strerror(rc));
		goto out;
	}
	if (p->images_dir &&
	    rf_classes_write(p->out, p->shard_bytes != 0, "label", p->classes, p->nclasses) < 0)
		goto out;
	if (p->skipped)
		rf_cli_note(1, "skipped %" PRIu64 " of %zu %s that could not be read or are not "
			    "JPEG or PNG images (-v names them)", p->skipped, p->nitems,
			    p->images_dir ? "files" : "samples");
	rf_cli_note(1, "%" PRIu64 " samples, %s of images, %.1f s -> %s", p->written,
		    rf_cli_fmt_bytes(a, sizeof a, (double)p->in_bytes), rf_cli_now() - t0, p->out);
	if (p->images_dir)
		rf_cli_note(1, "%zu classes (%s ... %s)", p->nclasses, p->classes[0],
			    p->classes[p->nclasses - 1]);
	status = RF_CLI_OK;
out:
	if (p->w)
		rf_writer_abort(&p->w);
	for (size_t i = 0; i < p->nitems; i++) {
		item_release(&p->items[i]);
		free(p->items[i].path);
		free(p->items[i].name);
	}
	free(p->items);
	for (size_t i = 0; i < p->nclasses; i++)
		free(p->classes[i]);
	free(p->classes);
	for (int i = 0; i < 4; i++) {
		free(p->cols[i].data);
		free(p->cols[i].off);
	}
#ifdef RF_HAVE_ARCHIVE
	if (p->jobs)
		globfree(&p->tars);
	free(p->jobs);
#endif
	return status;
}
