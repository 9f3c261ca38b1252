/* SPDX-License-Identifier: MIT */
/*
 * The random-access reader: rf_dataset_open validates every shard's footer,
 * header and index (docs/format.md, "What a reader checks") and builds one
 * dataset-wide chunk table; rf_dataset_read decodes chunks with pread on a
 * buffered descriptor, keeping the last one.  The streaming loader reads
 * chunks itself and uses only the table (format.h).
 *
 * Nothing is allocated from a size read in a file before that size has been
 * bounded by the file's real size (index) or the format's limits (chunks).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"
#include <zstd.h>

#include "format/format.h"
#include "format/manifest.h"
#include "io/http.h"

/* A zstd block holds at most 128 KiB and takes at least 4 bytes (3 of header,
 * 1 of RLE payload), so one stored byte never decodes to more than 32 KiB:
 * a bound that rejects absurd raw sizes before a buffer is allocated. */
#define ZSTD_MAX_EXPANSION 32768

struct shard {
	char *path;
	int fd;
	/* A remote shard (a URL): its handle in the dataset's rf_http, -1 for
	 * a local file; and the head and tail fetched together at open, which
	 * serve the footer, header and (usually) index reads. */
	int hfile;
	rf_http *http;
	uint8_t *head, *tail;
	size_t head_len, tail_len;
	uint64_t file_size;
	uint64_t header_end;
	uint64_t index_offset;
	uint64_t nchunks;
	uint64_t nsamples;
	uint64_t first_chunk;
	uint64_t first_sample;
	uint32_t version;
	uint64_t pack_id;      /* version 3, else 0 */
	uint32_t pack_shards;  /* version 3: shards in its pack, else 0 */
	uint64_t footer_xxh3;
};

struct rf_dataset {
	rf_diag diag;
	int verify;
	rf_schema schema;
	struct shard *shards;
	size_t nshards;
	rf_chunk_info *chunks;
	uint64_t nchunks;
	uint64_t nsamples;
	uint64_t max_raw, max_span;

	/* One-chunk cache for rf_dataset_read. */
	uint64_t cached;       /* chunk number, UINT64_MAX for none */
	uint8_t *stored;
	uint64_t stored_cap;
	uint8_t *raw;
	uint64_t raw_cap;
	ZSTD_DCtx *dctx;
	rf_chunk_sections sec;

	rf_http *http;         /* remote shards' reader, NULL when all are local */
};

static _Thread_local char last_open_error[RF_ERRMSG_MAX];

RF_API const char *
rf_dataset_last_open_error(void)
{
	return last_open_error;
}

RF_API void
rf_dataset_config_init(rf_dataset_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->verify = 1;
}

RF_API const char *
rf_dataset_errmsg(const rf_dataset *ds)
{
	return ds ? ds->diag.msg : "";
}

/* ------------------------------------------------------------- paths */

/* Append to a bounded message; the last room says that more were left out. */
static void
msg_add(char *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 12 < cap) {
		memcpy(buf + *len, s, n + 1);
		*len += n;
	} else if (*len + 6 < cap && strcmp(buf + *len - 5, " ...") != 0) {
		memcpy(buf + *len, " ...", 5);
		*len += 4;
	}
}

/* What a manifest says of one of its shards, checked once it is loaded. */
struct expect {
	char *manifest;        /* the manifest's path; NULL: not from a manifest */
	char *final;           /* the shard's own name when v is its temporary
	                          name (a committed pack not yet renamed) */
	uint64_t pack, size, samples, footer_xxh3;
	int listed;            /* from a directory listing or a glob */
};

struct pathlist {
	char **v;
	struct expect *ex;     /* parallel to v */
	size_t n, cap;
};

static int
pl_add_ex(struct pathlist *pl, const char *p, const struct expect *ex)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 16;
		char **v = realloc(pl->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		pl->v = v;
		struct expect *e = realloc(pl->ex, cap * sizeof *e);
		if (!e)
			return -ENOMEM;
		pl->ex = e;
		pl->cap = cap;
	}
	memset(&pl->ex[pl->n], 0, sizeof *pl->ex);
	if (!(pl->v[pl->n] = strdup(p)))
		return -ENOMEM;
	if (ex) {
		pl->ex[pl->n] = *ex;
		pl->ex[pl->n].manifest = strdup(ex->manifest);
		pl->ex[pl->n].final = ex->final ? strdup(ex->final) : NULL;
		if (!pl->ex[pl->n].manifest || (ex->final && !pl->ex[pl->n].final)) {
			free(pl->ex[pl->n].manifest);
			free(pl->ex[pl->n].final);
			free(pl->v[pl->n]);
			return -ENOMEM;
		}
	}
	pl->n++;
	return 0;
}

static int
pl_add(struct pathlist *pl, const char *p)
{
	return pl_add_ex(pl, p, NULL);
}

static void
pl_free(struct pathlist *pl)
{
	for (size_t i = 0; i < pl->n; i++) {
		free(pl->v[i]);
		free(pl->ex[i].manifest);
		free(pl->ex[i].final);
	}
	free(pl->v);
	free(pl->ex);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Byte order, not the locale's collation: the same shards in the same order
 * on every machine, since sample numbers depend on it. */
static void
pl_sort_from(struct pathlist *pl, size_t from)
{
	/* Only lists without expectations are sorted (directory and glob
	 * listings); a manifest gives its own order. */
	qsort(pl->v + from, pl->n - from, sizeof *pl->v, cmp_str);
}

static int
ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

/*
 * The shards a manifest lists, in its order.  A shard whose file does not
 * hold the manifest's pack yet is taken from its temporary name when that
 * does: the writer committed the pack (renamed the manifest) and was
 * stopped, or is still working, before renaming every shard.  Whatever is
 * taken is checked against the manifest once loaded.
 */
static int
expand_manifest(struct pathlist *pl, const char *mpath, rf_diag *d)
{
	rf_manifest m;
	int rc = rf_manifest_read(mpath, &m, d);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < m.nshards && rc == 0; i++) {
		const rf_manifest_shard *s = &m.shards[i];
		char *fin = rf_manifest_shard_path(mpath, s->name);
		char *tmp = rf_manifest_tmp_path(mpath, s->name, m.writer_pid);
		if (!fin || !tmp) {
			rc = rf_fail(d, -ENOMEM, "%s: out of memory", mpath);
		} else {
			struct expect ex = {(char *)(uintptr_t)mpath, NULL, m.pack_id, s->size,
					    s->samples, s->footer_xxh3, 0};
			uint64_t id;
			const char *use = fin;
			if (!(rf_shard_peek_pack(fin, &id) && id == m.pack_id) &&
			    rf_shard_peek_pack(tmp, &id) && id == m.pack_id) {
				use = tmp;
				ex.final = fin;
			}
			if (pl_add_ex(pl, use, &ex) < 0)
				rc = rf_fail(d, -ENOMEM, "%s: out of memory", mpath);
		}
		free(fin);
		free(tmp);
	}
	rf_manifest_free(&m);
	return rc;
}

/* Whether `name` (a file name) is one a write to BASE makes: BASE.rfs or
 * BASE-NNNNN.rfs, for the BASE of one of the directory's manifests. */
static int
of_a_manifest(const char *name, const struct pathlist *ms)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < ms->n; i++) {
		const char *m = strrchr(ms->v[i], '/');
		m = m ? m + 1 : ms->v[i];
		size_t bl = strlen(m) - strlen(RF_MANIFEST_EXT);
		if (nl < bl || strncmp(name, m, bl) != 0)
			continue;
		if (strcmp(name + bl, ".rfs") == 0 ||
		    (nl == bl + 10 && name[bl] == '-' && strspn(name + bl + 1, "0123456789") == 5 &&
		     strcmp(name + bl + 6, ".rfs") == 0))
			return 1;
	}
	return 0;
}

struct pl_ent {
	char *v;
	struct expect ex;
};

static int
cmp_ent(const void *a, const void *b)
{
	const struct pl_ent *x = a, *y = b;
	return strcmp(x->ex.final ? x->ex.final : x->v, y->ex.final ? y->ex.final : y->v);
}

/*
 * The rest of a directory that has manifests: its *.rfs files that no
 * manifest lists.  One that a write to a manifest's BASE made (BASE.rfs,
 * BASE-NNNNN.rfs: an earlier pack's leftover, or a file copied in by hand)
 * is not read, and a warning says so; any other (a dataset written without
 * a manifest, by an older version) is read as a directory listing reads it.
 * Then everything from `from` on is put in name order, as a listing would
 * have it.
 */
static int
add_unlisted(struct pathlist *pl, size_t from, const struct pathlist *ms, const char *dir,
	     rf_diag *d)
{
	size_t n = 0, listed = pl->n - from;
	const char **names = malloc(2 * listed * sizeof *names + 1);
	if (!names)
		return rf_fail(d, -ENOMEM, "%s: out of memory", dir);
	for (size_t i = from; i < pl->n; i++) {
		names[n++] = pl->v[i];
		if (pl->ex[i].final)
			names[n++] = pl->ex[i].final;
	}
	qsort(names, n, sizeof *names, cmp_str);
	DIR *dp = opendir(dir);
	size_t dl = strlen(dir);
	int slash = dl > 0 && dir[dl - 1] == '/';
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && dp && (de = readdir(dp))) {
		if (de->d_name[0] == '.' || !ends_with(de->d_name, ".rfs"))
			continue;
		char *full = malloc(dl + strlen(de->d_name) + 2);
		if (!full) {
			rc = rf_fail(d, -ENOMEM, "%s: out of memory", dir);
			break;
		}
		sprintf(full, "%s%s%s", dir, slash ? "" : "/", de->d_name);
		const char *key = full;
		struct stat st;
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) &&
		    !bsearch(&key, names, n, sizeof *names, cmp_str)) {
			if (of_a_manifest(de->d_name, ms))
				rf_log(d, RF_LOG_WARN, "%s: not listed by the manifest of its pack in "
				       "%s, not read", full, dir);
			else if (pl_add(pl, full) < 0)
				rc = rf_fail(d, -ENOMEM, "%s: out of memory", dir);
			else
				pl->ex[pl->n - 1].listed = 1;
		}
		free(full);
	}
	if (dp)
		closedir(dp);
	free(names);
	if (rc < 0)
		return rc;
	/* Name order over manifests' shards and the rest together. */
	struct pl_ent *e = malloc((pl->n - from + 1) * sizeof *e);
	if (!e)
		return rf_fail(d, -ENOMEM, "%s: out of memory", dir);
	for (size_t i = from; i < pl->n; i++)
		e[i - from] = (struct pl_ent){pl->v[i], pl->ex[i]};
	qsort(e, pl->n - from, sizeof *e, cmp_ent);
	for (size_t i = from; i < pl->n; i++) {
		pl->v[i] = e[i - from].v;
		pl->ex[i] = e[i - from].ex;
	}
	free(e);
	return 0;
}

/* A directory with manifests is the packs they list (one manifest per
 * output written to the directory), plus its shards of no manifest's output
 * (add_unlisted), in name order. */
static int
expand_dir_manifests(struct pathlist *pl, const char *dir, int *found, rf_diag *d)
{
	*found = 0;
	DIR *dp = opendir(dir);
	if (!dp)
		return rf_fail(d, -errno, "%s: cannot open directory: %s", dir, rf_strerror(-errno));
	struct pathlist ms = {0};
	size_t dl = strlen(dir);
	int slash = dl > 0 && dir[dl - 1] == '/';
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.' || !ends_with(de->d_name, RF_MANIFEST_EXT))
			continue;
		char *full = malloc(dl + strlen(de->d_name) + 2);
		if (!full) {
			rc = rf_fail(d, -ENOMEM, "%s: out of memory", dir);
			break;
		}
		sprintf(full, "%s%s%s", dir, slash ? "" : "/", de->d_name);
		struct stat st;
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && pl_add(&ms, full) < 0)
			rc = rf_fail(d, -ENOMEM, "%s: out of memory", dir);
		free(full);
		if (rc < 0)
			break;
	}
	closedir(dp);
	size_t from = pl->n;
	if (rc == 0 && ms.n) {
		*found = 1;
		pl_sort_from(&ms, 0);
		for (size_t i = 0; i < ms.n && rc == 0; i++)
			rc = expand_manifest(pl, ms.v[i], d);
		if (rc == 0)
			rc = add_unlisted(pl, from, &ms, dir, d);
	}
	pl_free(&ms);
	return rc;
}

static int
expand_dir(struct pathlist *pl, const char *dir, rf_diag *d)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return rf_fail(d, -errno, "%s: cannot open directory: %s", dir, rf_strerror(-errno));
	size_t from = pl->n;
	size_t dl = strlen(dir);
	int slash = dl > 0 && dir[dl - 1] == '/';
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		size_t nl = strlen(de->d_name);
		if (nl < 5 || strcmp(de->d_name + nl - 4, ".rfs") != 0 || de->d_name[0] == '.')
			continue;
		char *full = malloc(dl + nl + 2);
		if (!full) {
			rc = -ENOMEM;
			break;
		}
		memcpy(full, dir, dl);
		if (!slash)
			full[dl] = '/';
		memcpy(full + dl + !slash, de->d_name, nl + 1);
		struct stat st;
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && (rc = pl_add(pl, full)) == 0)
			pl->ex[pl->n - 1].listed = 1;
		free(full);
		if (rc < 0)
			break;
	}
	closedir(dp);
	if (rc < 0)
		return rf_fail(d, rc, "%s: out of memory", dir);
	if (pl->n == from)
		return rf_fail(d, -ENOENT, "%s: no .rfs files in this directory", dir);
	pl_sort_from(pl, from);
	return 0;
}

/* The length of the BASE of a shard path: without "-NNNNN.rfs" or ".rfs". */
static size_t
shard_base_len(const char *path)
{
	size_t n = strlen(path);
	if (n >= 10 && ends_with(path, ".rfs") && path[n - 10] == '-' &&
	    strspn(path + n - 9, "0123456789") == 5)
		return n - 10;
	return ends_with(path, ".rfs") ? n - 4 : n;
}

/* One pack a directory holds, for the check below. */
struct dir_pack {
	const char *name;      /* a shard's path (or its manifest's) */
	size_t base;           /* the length of its BASE in `name`; 0 for the
	                          shards without a pack id, which are one group */
	int manifest;          /* named by its manifest */
	size_t shards;
};

/*
 * A directory is one dataset: exactly one pack (the shards of one manifest,
 * or format-3 shards of one BASE without a manifest), or only shards
 * without a pack id (formats 1 and 2: a directory of them was always read
 * whole).  Anything else (two packs written side by side, train.rfs and
 * test.rfs, or a pack next to older shards) would be read as one dataset
 * nobody wrote; RF_EUSAGE names the packs and says how to pick.  The shards
 * of one BASE are one group here whatever their pack ids: check_packs
 * names those that are mixed.
 */
static int
check_dir_one_pack(const struct pathlist *pl, size_t from, const char *dir, rf_diag *d)
{
	size_t n = pl->n - from, ng = 0;
	struct dir_pack *g = malloc((n ? n : 1) * sizeof *g);
	if (!g)
		return rf_fail(d, -ENOMEM, "%s: out of memory", dir);
	for (size_t i = from; i < pl->n; i++) {
		const struct expect *ex = &pl->ex[i];
		struct dir_pack one = {ex->manifest, 0, 1, 1};
		if (!ex->manifest) {
			uint64_t id = 0;
			if (!rf_shard_peek_pack(pl->v[i], &id))
				id = 0;
			one = (struct dir_pack){pl->v[i], id ? shard_base_len(pl->v[i]) : 0, 0, 1};
		}
		size_t k;
		for (k = 0; k < ng; k++) {
			if (g[k].manifest != one.manifest || g[k].base != one.base)
				continue;
			if (one.manifest ? strcmp(g[k].name, one.name) == 0
					 : memcmp(g[k].name, one.name, one.base) == 0)
				break;
		}
		if (k < ng)
			g[k].shards++;
		else
			g[ng++] = one;
	}
	if (ng <= 1) {
		free(g);
		return 0;
	}
	char msg[RF_ERRMSG_MAX], one[600];
	size_t len, ex = 0;
	snprintf(msg, sizeof msg, "%s: the directory holds %zu packs, not one dataset:", dir, ng);
	len = strlen(msg);
	for (size_t k = 0; k < ng; k++) {
		if (g[k].manifest)
			snprintf(one, sizeof one, " %s (%zu shard%s);", g[k].name, g[k].shards,
				 g[k].shards == 1 ? "" : "s");
		else if (g[k].base)
			snprintf(one, sizeof one, " %s (%zu shard%s, no manifest);", g[k].name,
				 g[k].shards, g[k].shards == 1 ? "" : "s");
		else
			snprintf(one, sizeof one, " %zu shard%s without a pack id (format 1 or 2), "
				 "%s ...;", g[k].shards, g[k].shards == 1 ? "" : "s", g[k].name);
		msg_add(msg, sizeof msg, &len, one);
		if (g[k].manifest && !g[ex].manifest)
			ex = k;
	}
	/* The way to name one: its manifest, or BASE.rfs (which opens the
	 * manifest of a sharded pack). */
	if (g[ex].manifest) {
		const char *m = g[ex].name;
		size_t ml = strlen(m) - strlen(RF_MANIFEST_EXT);
		snprintf(one, sizeof one, " open one pack by its manifest or name (%s or %.*s.rfs), "
			 "or list the packs (or a glob) to read them as one dataset", m, (int)ml, m);
	} else {
		snprintf(one, sizeof one, " open one pack by its name (%s), or list the packs (or "
			 "a glob) to read them as one dataset", g[ex].name);
	}
	free(g);
	msg_add(msg, sizeof msg, &len, one);
	return rf_fail(d, RF_EUSAGE, "%s", msg);
}

static int
expand(struct pathlist *pl, const char *p, rf_diag *d)
{
	struct stat st;
	if (stat(p, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			size_t from = pl->n;
			int found, rc = expand_dir_manifests(pl, p, &found, d);
			if (rc == 0 && !found)
				rc = expand_dir(pl, p, d);
			return rc < 0 ? rc : check_dir_one_pack(pl, from, p, d);
		}
		if (S_ISREG(st.st_mode) && ends_with(p, RF_MANIFEST_EXT))
			return expand_manifest(pl, p, d);
		return pl_add(pl, p) < 0 ? rf_fail(d, -ENOMEM, "%s: out of memory", p) : 0;
	}
	int e = errno;
	if (!*p)
		return rf_fail(d, -ENOENT, "a dataset path is empty");
	if (e == ENOENT && ends_with(p, ".rfs") && shard_base_len(p) == strlen(p) - 4) {
		/* BASE.rfs written as a sharded pack: BASE-NNNNN.rfs and its
		 * manifest BASE.rfm.  The name it was packed to opens it. */
		char *m = rf_manifest_path_for(p);
		if (!m)
			return rf_fail(d, -ENOMEM, "%s: out of memory", p);
		int rc = 1;
		if (stat(m, &st) == 0 && S_ISREG(st.st_mode))
			rc = expand_manifest(pl, m, d);
		free(m);
		if (rc <= 0)
			return rc;
	}
	if (!strpbrk(p, "*?[")) {
		return rf_fail(d, -e, "%s: %s", p, rf_strerror(-e));
	}
	glob_t g;
	int r = glob(p, GLOB_NOSORT, NULL, &g);
	if (r == GLOB_NOMATCH) {
		globfree(&g);
		return rf_fail(d, -ENOENT, "%s: no file matches this pattern", p);
	}
	if (r != 0) {
		globfree(&g);
		return rf_fail(d, r == GLOB_NOSPACE ? -ENOMEM : -EIO, "%s: glob failed", p);
	}
	size_t from = pl->n;
	int rc = 0;
	for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
		/* Regular files only, as in a directory: a pipe or a device
		 * that matches the pattern is not a shard (opening a pipe
		 * would block). */
		if (stat(g.gl_pathv[i], &st) == 0 && !S_ISREG(st.st_mode))
			continue;
		if (pl_add(pl, g.gl_pathv[i]) < 0)
			rc = rf_fail(d, -ENOMEM, "%s: out of memory", p);
		else
			pl->ex[pl->n - 1].listed = 1;
	}
	globfree(&g);
	if (rc == 0 && pl->n == from)
		rc = rf_fail(d, -ENOENT, "%s: no file matches this pattern", p);
	if (rc == 0)
		pl_sort_from(pl, from);
	return rc;
}

/* ------------------------------------------------------------- remote */

static int
pl_add_url(void *arg, const char *url)
{
	return pl_add(arg, url);
}

/* Bytes fetched from each remote shard's two ends at open: the tail holds
 * the footer and, for a shard of up to ~1000 chunks, the whole index; the
 * head the largest header (3 pages). */
#define RF_REMOTE_TAIL (64 * 1024)
#define RF_REMOTE_HEAD (3 * RF_FMT_ALIGN)

/* Shards whose ends are fetched together: bounds the memory of an open
 * (76 KiB a shard) whatever the number of shards. */
#define RF_REMOTE_WINDOW 64

/* Fetch the head and tail of remote shards [from, to) at once, as many
 * requests in flight as the reader allows: opening a dataset of many shards
 * costs a few round trips per window, not a few per shard. */
static int
remote_prefetch(rf_dataset *ds, size_t from, size_t to, rf_diag *d)
{
	rf_http *h = ds->http;
	for (size_t i = from; i < to; i++) {
		struct shard *sh = &ds->shards[i];
		if (sh->hfile >= 0 && (!(sh->head = malloc(RF_REMOTE_HEAD)) ||
				       !(sh->tail = malloc(RF_REMOTE_TAIL))))
			return rf_fail(d, -ENOMEM, "rf_dataset_open: out of memory");
	}
	rf_io_done done[64];
	size_t next = 2 * from;
	for (;;) {
		int rc = 0;
		while (next < 2 * to) {
			struct shard *sh = &ds->shards[next / 2];
			if (sh->hfile < 0) {
				next++;
				continue;
			}
			rc = next % 2 ? rf_http_read(h, sh->hfile, 0, sh->head, RF_REMOTE_HEAD, next)
				      : rf_http_read_tail(h, sh->hfile, sh->tail, RF_REMOTE_TAIL, next);
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				return rc;
			next++;
		}
		if (!rf_http_inflight(h))
			return 0;
		int n = rf_http_wait(h, done, 64, 1);
		if (n < 0)
			return n;
		for (int k = 0; k < n; k++) {
			struct shard *sh = &ds->shards[done[k].tag / 2];
			if (done[k].res < 0)
				return (int)done[k].res; /* the message names URL and status */
			if (done[k].tag % 2) {
				sh->head_len = (size_t)done[k].res;
			} else {
				sh->tail_len = (size_t)done[k].res;
				uint64_t size = 0;
				/* An empty object answers 416 and may not say
				 * its size: 0 it is. */
				if (rf_http_file_size(h, sh->hfile, &size) < 0)
					size = sh->tail_len;
				sh->file_size = size;
			}
		}
	}
}

/* ------------------------------------------------------------- validation */

/* Transient read errors (what NFS, Lustre and FUSE return for a moment):
 * asked again this many times, 1, 4, 16 ... ms apart, as the loader's
 * reader does (src/io). */
#define READ_RETRIES 5

static int
pread_full(int fd, void *buf, uint64_t len, uint64_t off, const char *path, const char *what,
	   rf_diag *d)
{
	uint8_t *p = buf;
	uint64_t done = 0;
	unsigned retries = 0;
	while (done < len) {
		ssize_t r = pread(fd, p + done, len - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			if ((e == EIO || e == EAGAIN || e == ETIMEDOUT) && retries < READ_RETRIES) {
				unsigned us = 1000u << (2 * retries++);
				rf_log(d, RF_LOG_WARN, "%s: read of %s at offset %llu: %s; retry %u of %d "
				       "in %u ms", path, what, (unsigned long long)(off + done),
				       rf_strerror(-e), retries, READ_RETRIES, us / 1000);
				usleep(us);
				continue;
			}
			return rf_fail(d, -e, "%s: read of %s (%llu bytes at offset %llu): %s%s", path,
				       what, (unsigned long long)len, (unsigned long long)off,
				       rf_strerror(-e), retries ? " (after retries)" : "");
		}
		if (r == 0)
			return rf_fail(d, RF_ETRUNCATED,
				       "%s: file ends at %llu, inside %s (%llu bytes at offset %llu)",
				       path, (unsigned long long)(off + done), what,
				       (unsigned long long)len, (unsigned long long)off);
		done += (uint64_t)r;
	}
	return 0;
}

/* pread_full for a shard wherever it is: a remote one's reads come from
 * the head or tail fetched at open when they lie inside, else as a ranged
 * GET. */
static int
shard_read(struct shard *sh, void *buf, uint64_t len, uint64_t off, const char *what, rf_diag *d)
{
	if (sh->hfile < 0)
		return pread_full(sh->fd, buf, len, off, sh->path, what, d);
	if (off + len <= sh->head_len) {
		memcpy(buf, sh->head + off, (size_t)len);
		return 0;
	}
	if (sh->tail_len && off >= sh->file_size - sh->tail_len && off + len <= sh->file_size) {
		memcpy(buf, sh->tail + (off - (sh->file_size - sh->tail_len)), (size_t)len);
		return 0;
	}
	if (len > SIZE_MAX)
		return rf_fail(d, -ENOMEM, "%s: a %llu-byte read", sh->path, (unsigned long long)len);
	rf_http_set_diag(sh->http, d);
	size_t got = 0;
	int rc = rf_http_pread(sh->http, sh->hfile, buf, (size_t)len, off, &got);
	if (rc == RF_ETRUNCATED)
		return rf_fail(d, RF_ETRUNCATED,
			       "%s: file ends at %llu, inside %s (%llu bytes at offset %llu)", sh->path,
			       (unsigned long long)(off + got), what, (unsigned long long)len,
			       (unsigned long long)off);
	return rc; /* the message, naming the URL and the range, is on d */
}

static int
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Open and check one shard; appends its chunks to *chunks (grown here).
 * On success, sh holds the open fd. */
static int
shard_load(struct shard *sh, rf_schema *schema, int have_schema, rf_chunk_info **chunks,
	   uint64_t *nchunks, uint64_t *chunks_cap, uint32_t shard_no, rf_diag *d)
{
	const char *path = sh->path;
	uint64_t size = sh->file_size; /* a remote shard's, known from its tail */
	if (sh->hfile < 0) {
		/* O_NONBLOCK: a pipe named as a shard must fail below, not
		 * block the open until a writer comes.  Cleared once it is a
		 * regular file. */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return rf_fail(d, -errno, "%s: cannot open: %s", path, rf_strerror(-errno));
		sh->fd = fd;
		struct stat st;
		if (fstat(fd, &st) < 0)
			return rf_fail(d, -errno, "%s: fstat: %s", path, rf_strerror(-errno));
		if (!S_ISREG(st.st_mode))
			return rf_fail(d, RF_EFORMAT, "%s: not a regular file", path);
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return rf_fail(d, -errno, "%s: fcntl: %s", path, rf_strerror(-errno));
		size = (uint64_t)st.st_size;
		sh->file_size = size;
	}

	/* 1. The footer.  A file whose start is a shard header but whose end
	 * is not a footer was cut short (or never finished). */
	uint8_t head[RF_FMT_MAGIC_LEN];
	int head_ok = size >= RF_FMT_MAGIC_LEN &&
		      shard_read(sh, head, sizeof head, 0, "header magic", d) == 0 &&
		      memcmp(head, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) == 0;
	uint8_t f[RF_FMT_FOOTER_SIZE];
	int foot_ok = 0;
	if (size >= RF_FMT_FOOTER_SIZE) {
		int rc = shard_read(sh, f, sizeof f, size - RF_FMT_FOOTER_SIZE, "footer", d);
		if (rc < 0)
			return rc;
		foot_ok = memcmp(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) == 0;
	}
	if (!head_ok && !foot_ok)
		return rf_fail(d, RF_EFORMAT, "%s: not a ringfeed shard (no magic at the start or "
			       "the end)", path);
	if (size < RF_FMT_MIN_FILE || !foot_ok) {
		if (!head_ok)
			return rf_fail(d, RF_EFORMAT, "%s: header at offset 0: bad magic", path);
		return rf_fail(d, RF_ETRUNCATED, "%s: footer at offset %llu: no footer magic; the "
			       "file (%llu bytes) is truncated or was never finished", path,
			       (unsigned long long)(size >= RF_FMT_FOOTER_SIZE ? size - RF_FMT_FOOTER_SIZE : 0),
			       (unsigned long long)size);
	}
	uint64_t foff = size - RF_FMT_FOOTER_SIZE;
	uint32_t fver = rf_le32(f + 40);
	if (fver < RF_FMT_VERSION_MIN || fver > RF_FMT_VERSION)
		return rf_fail(d, RF_EFORMAT, "%s: footer at offset %llu: format version %u, this "
			       "library reads versions %d..%d", path, (unsigned long long)(foff + 40),
			       fver, RF_FMT_VERSION_MIN, RF_FMT_VERSION);
	if (XXH3_64bits(f, 48) != rf_le64(f + 48))
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: checksum mismatch", path,
			       (unsigned long long)foff);
	/* Version 3: the pack's shard count; older versions reserve it. */
	if (fver < 3 ? rf_le32(f + 44) != 0 : rf_le32(f + 44) == 0)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %s", path,
			       (unsigned long long)(foff + 44),
			       fver < 3 ? "reserved bytes are not 0" : "a pack of 0 shards");
	sh->pack_shards = rf_le32(f + 44);
	uint64_t index_offset = rf_le64(f + 0), nch = rf_le64(f + 8), nsamples = rf_le64(f + 16);
	if (nch > RF_FMT_MAX_CHUNKS)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %llu chunks, more than 2^32",
			       path, (unsigned long long)(foff + 8), (unsigned long long)nch);
	if (index_offset % RF_FMT_ALIGN != 0 || index_offset < RF_FMT_ALIGN ||
	    index_offset > foff || (foff - index_offset) / RF_FMT_INDEX_ENTRY_SIZE != nch ||
	    (foff - index_offset) % RF_FMT_INDEX_ENTRY_SIZE != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: index offset %llu and %llu "
			       "chunks disagree with the file size %llu", path,
			       (unsigned long long)foff, (unsigned long long)index_offset,
			       (unsigned long long)nch, (unsigned long long)size);
	sh->index_offset = index_offset;
	sh->nchunks = nch;
	sh->nsamples = nsamples;

	/* 2. The header: the fixed part from its first page, then all its
	 * pages (at most 3) once header_size is known to be sane. */
	uint8_t page[RF_FMT_ALIGN];
	int rc = shard_read(sh, page, sizeof page, 0, "header", d);
	if (rc < 0)
		return rc;
	if (memcmp(page, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN) != 0)
		return rf_fail(d, RF_EFORMAT, "%s: header at offset 0: bad magic", path);
	uint32_t hver = rf_le32(page + 8), hsize = rf_le32(page + 12), flags = rf_le32(page + 16),
		 nfields = rf_le32(page + 20);
	if (hver < RF_FMT_VERSION_MIN || hver > RF_FMT_VERSION)
		return rf_fail(d, RF_EFORMAT, "%s: header at offset 8: format version %u, this "
			       "library reads versions %d..%d", path, hver, RF_FMT_VERSION_MIN,
			       RF_FMT_VERSION);
	if (hver != fver)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 8: format version %u, the "
			       "footer says %u", path, hver, fver);
	sh->version = hver;
	if (flags != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 16: unknown flags 0x%x", path,
			       flags);
	if (nfields == 0 || nfields > RF_MAX_FIELDS)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 20: %u fields, expected 1..%d",
			       path, nfields, RF_MAX_FIELDS);
	if (hsize != RF_FMT_HEADER_SIZE(nfields))
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 12: header size %u, expected "
			       "%llu for %u fields", path, hsize,
			       (unsigned long long)RF_FMT_HEADER_SIZE(nfields), nfields);
	/* Version 3: the pack id; older versions reserve the bytes. */
	if (hver < 3 && rf_le64(page + RF_FMT_PACK_ID_AT) != 0)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset 24: reserved bytes are not 0",
			       path);
	sh->pack_id = hver >= 3 ? rf_le64(page + RF_FMT_PACK_ID_AT) : 0;
	sh->footer_xxh3 = rf_le64(f + 48);
	uint64_t hend = RF_ALIGN_UP(hsize, RF_FMT_ALIGN);
	if (hend > index_offset)
		return rf_fail(d, RF_ECORRUPT, "%s: header (%u bytes) runs past the index at offset "
			       "%llu", path, hsize, (unsigned long long)index_offset);
	sh->header_end = hend;
	uint8_t hbuf[RF_FMT_ALIGN * 3];
	_Static_assert(RF_ALIGN_UP(RF_FMT_HEADER_SIZE(RF_MAX_FIELDS), RF_FMT_ALIGN) <= sizeof hbuf,
		       "header buffer too small");
	memcpy(hbuf, page, sizeof page);
	if (hend > sizeof page &&
	    (rc = shard_read(sh, hbuf + sizeof page, hend - sizeof page, sizeof page, "header",
			     d)) < 0)
		return rc;
	uint64_t hx = rf_le64(hbuf + hsize - 8);
	if (XXH3_64bits(hbuf, hsize - 8) != hx)
		return rf_fail(d, RF_ECORRUPT, "%s: header at offset %u: checksum mismatch", path,
			       hsize - 8);
	if (hx != rf_le64(f + 32))
		return rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: header checksum copy "
			       "differs from the header's", path, (unsigned long long)(foff + 32));
	if (!all_zero(hbuf + hsize, hend - hsize))
		return rf_fail(d, RF_ECORRUPT, "%s: header padding at offset %u is not zero", path,
			       hsize);
	rf_schema s;
	memset(&s, 0, sizeof s);
	s.nfields = nfields;
	for (uint32_t k = 0; k < nfields; k++) {
		if ((rc = rf_fmt_decode_field(hbuf + RF_FMT_HEADER_FIXED + k * RF_FMT_FIELD_SIZE, k,
					      &s.fields[k], path, d)) < 0)
			return rc;
		for (uint32_t j = 0; j < k; j++)
			if (strcmp(s.fields[j].name, s.fields[k].name) == 0)
				return rf_fail(d, RF_ECORRUPT, "%s: header field %u: duplicate name %s",
					       path, k, s.fields[k].name);
	}
	if (!have_schema) {
		*schema = s;
	} else {
		if (schema->nfields != s.nfields)
			return rf_fail(d, RF_ESCHEMA, "%s: %u fields, the first shard has %u", path,
				       s.nfields, schema->nfields);
		for (uint32_t k = 0; k < nfields; k++) {
			const rf_field *a = &schema->fields[k], *b = &s.fields[k];
			if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->rank != b->rank ||
			    a->var_dim != b->var_dim || memcmp(a->shape, b->shape, sizeof a->shape))
				return rf_fail(d, RF_ESCHEMA, "%s: field %u (%s) differs from the first "
					       "shard's field %u (%s)", path, k, b->name, k, a->name);
		}
	}

	/* 3. The index: its size is exactly bounded by the file size now. */
	uint64_t isize = nch * RF_FMT_INDEX_ENTRY_SIZE;
	uint8_t *idx = malloc(isize ? isize : 1);
	if (!idx)
		return rf_fail(d, -ENOMEM, "%s: out of memory for a %llu-byte index", path,
			       (unsigned long long)isize);
	if ((rc = shard_read(sh, idx, isize, index_offset, "index", d)) < 0)
		goto out;
	if (XXH3_64bits(idx, isize) != rf_le64(f + 24)) {
		rc = rf_fail(d, RF_ECORRUPT, "%s: index at offset %llu: checksum mismatch", path,
			     (unsigned long long)index_offset);
		goto out;
	}
	if (nch > *chunks_cap - *nchunks) {
		uint64_t cap = *chunks_cap ? *chunks_cap : 64;
		while (cap - *nchunks < nch)
			cap *= 2;
		rf_chunk_info *c = cap > SIZE_MAX / sizeof *c ? NULL : realloc(*chunks, cap * sizeof *c);
		if (!c) {
			rc = rf_fail(d, -ENOMEM, "%s: out of memory for %llu chunks", path,
				     (unsigned long long)nch);
			goto out;
		}
		*chunks = c;
		*chunks_cap = cap;
	}
	uint64_t min_raw, sum = 0, prev_end = hend;
	int fixed_only = 1;
	for (uint32_t k = 0; k < nfields; k++)
		fixed_only &= s.fields[k].var_dim < 0;
	for (uint64_t i = 0; i < nch; i++) {
		const uint8_t *e = idx + i * RF_FMT_INDEX_ENTRY_SIZE;
		unsigned long long eoff = index_offset + i * RF_FMT_INDEX_ENTRY_SIZE;
		uint64_t off = rf_le64(e), stored = rf_le64(e + 8), raw = rf_le64(e + 16),
			 first = rf_le64(e + 24);
		uint32_t n = rf_le32(e + 32);
		uint8_t codec = e[36];
		/* Version 2: the per-sample checksum table follows the stored
		 * bytes and ends the chunk's extent.  Bounded (n < 2^32, 64
		 * fields) so nothing overflows once off and stored are inside
		 * the file. */
		uint64_t end = stored;
		if (hver >= 2 && off < index_offset && stored <= index_offset - off)
			end = rf_fmt_sums_offset(0, stored) + rf_fmt_sums_bytes(n, nfields);
		const char *bad = NULL;
		if (off % RF_FMT_ALIGN != 0)
			bad = "offset is not 4096-aligned";
		else if (off < prev_end)
			bad = i ? "overlaps the previous chunk" : "overlaps the header";
		else if (off >= index_offset || stored == 0 || stored > index_offset - off)
			bad = "stored bytes are empty or run into the index";
		else if (end > index_offset - off)
			bad = "the per-sample checksum table runs into the index";
		else if (raw == 0 || raw > RF_FMT_MAX_RAW)
			bad = "raw size outside 1..2^32";
		else if (first != sum)
			bad = "first sample does not follow the previous chunk";
		else if (n == 0)
			bad = "holds no sample";
		else if (codec > RF_CODEC_ZSTD)
			bad = "unknown codec";
		else if (codec == RF_CODEC_NONE && stored != raw)
			bad = "a raw chunk whose stored size differs from its raw size";
		/* raw > stored x 32768, without the product (raw >= 1 here) */
		else if (codec == RF_CODEC_ZSTD && (raw - 1) / ZSTD_MAX_EXPANSION >= stored)
			bad = "raw size beyond what zstd can expand its stored bytes to";
		else if (!all_zero(e + 37, 3) || !all_zero(e + (hver >= 2 ? 56 : 48),
							   hver >= 2 ? 8 : 16))
			bad = "reserved bytes are not 0";
		else if (rf_chunk_raw_size(&s, n, NULL, &min_raw) < 0 || min_raw > raw ||
			 (fixed_only && min_raw != raw))
			bad = "raw size disagrees with its sample count and the schema";
		if (bad) {
			rc = rf_fail(d, RF_ECORRUPT, "%s: index entry %llu at offset %llu: %s", path,
				     (unsigned long long)i, eoff, bad);
			goto out;
		}
		sum += n; /* nch <= 2^32 entries of < 2^32: no overflow */
		prev_end = RF_ALIGN_UP(off + end, RF_FMT_ALIGN);
		rf_chunk_info *ci = &(*chunks)[*nchunks + i];
		ci->shard = shard_no;
		ci->offset = off;
		ci->stored_bytes = stored;
		ci->raw_bytes = raw;
		ci->first_sample = first; /* made dataset-wide by the caller */
		ci->samples = n;
		ci->codec = (enum rf_codec)codec;
		ci->xxh3 = rf_le64(e + 40);
	}
	if (sum != nsamples) {
		rc = rf_fail(d, RF_ECORRUPT, "%s: footer at offset %llu: %llu samples, the index "
			     "holds %llu", path, (unsigned long long)(foff + 16),
			     (unsigned long long)nsamples, (unsigned long long)sum);
		goto out;
	}
	*nchunks += nch;
	rc = 0;
out:
	free(idx);
	return rc;
}

/* The group a shard's name puts it in: BASE for BASE-NNNNN.rfs (the shards a
 * sharded write makes), else none (0). */
static size_t
pack_group(const char *path)
{
	size_t n = strlen(path);
	if (n < 11 || strcmp(path + n - 4, ".rfs") != 0 || path[n - 10] != '-' ||
	    strspn(path + n - 9, "0123456789") != 5)
		return 0;
	return n - 10;
}

struct grp {
	const char *path;
	size_t key;
	uint64_t pack;
	uint32_t pack_shards;
	int listed;
};

static int
cmp_grp(const void *a, const void *b)
{
	const struct grp *x = a, *y = b;
	size_t n = x->key < y->key ? x->key : y->key;
	int c = memcmp(x->path, y->path, n);
	if (c || x->key != y->key)
		return c ? c : x->key < y->key ? -1 : 1;
	return strcmp(x->path, y->path);
}

/*
 * The shards are whole packs: every shard a manifest lists holds the
 * manifest's pack id, size, sample count and footer; shards named
 * BASE-NNNNN.rfs of one BASE that came without a manifest hold one pack id
 * (shards without one, of formats 1 and 2, count as one more pack), and
 * when they came from a listing (directory or glob), all of the pack's
 * shards.  A failure names every shard of the wrong pack.
 */
static int
check_packs(rf_dataset *ds, const struct pathlist *pl, rf_diag *d)
{
	char msg[RF_ERRMSG_MAX];
	size_t len = 0;
	msg[0] = '\0';
	const char *manifest = NULL;
	for (size_t i = 0; i < ds->nshards; i++) {
		const struct expect *ex = &pl->ex[i];
		const struct shard *sh = &ds->shards[i];
		if (!ex->manifest)
			continue;
		char one[600];
		if (sh->pack_id != ex->pack)
			snprintf(one, sizeof one, " %s (pack %016llx)", sh->path,
				 (unsigned long long)sh->pack_id);
		else if (sh->file_size != ex->size || sh->nsamples != ex->samples ||
			 sh->footer_xxh3 != ex->footer_xxh3)
			snprintf(one, sizeof one, " %s (%llu bytes, %llu samples, footer %016llx; the "
				 "manifest says %llu, %llu, %016llx)", sh->path,
				 (unsigned long long)sh->file_size, (unsigned long long)sh->nsamples,
				 (unsigned long long)sh->footer_xxh3, (unsigned long long)ex->size,
				 (unsigned long long)ex->samples,
				 (unsigned long long)ex->footer_xxh3);
		else
			continue;
		if (!manifest) {
			manifest = ex->manifest;
			snprintf(msg, sizeof msg, "%s: the manifest of pack %016llx names shards that "
				 "are not of this pack (an interrupted or concurrent write, or shards "
				 "replaced by hand):", ex->manifest, (unsigned long long)ex->pack);
			len = strlen(msg);
		}
		msg_add(msg, sizeof msg, &len, one);
	}
	if (manifest)
		return rf_fail(d, RF_ECORRUPT, "%s", msg);

	struct grp *g = malloc((ds->nshards ? ds->nshards : 1) * sizeof *g);
	if (!g)
		return rf_fail(d, -ENOMEM, "rf_dataset_open: out of memory");
	size_t ng = 0;
	for (size_t i = 0; i < ds->nshards; i++) {
		size_t key = pack_group(ds->shards[i].path);
		if (!pl->ex[i].manifest && key)
			g[ng++] = (struct grp){ds->shards[i].path, key, ds->shards[i].pack_id,
					       ds->shards[i].pack_shards, pl->ex[i].listed};
	}
	qsort(g, ng, sizeof *g, cmp_grp);
	int rc = 0;
	for (size_t a = 0, b; a < ng && rc == 0; a = b) {
		int mixed = 0;
		for (b = a + 1; b < ng && g[b].key == g[a].key &&
				memcmp(g[b].path, g[a].path, g[a].key) == 0; b++)
			mixed |= g[b].pack != g[a].pack;
		/* A listing that finds part of a pack: an interrupted write
		 * that had renamed only some of its shards (or shards lost).
		 * Shards named one by one may be any part of their pack. */
		if (!mixed && g[a].pack && g[a].listed && b - a != g[a].pack_shards) {
			rc = rf_fail(d, RF_ECORRUPT, "%.*s-NNNNN.rfs: %zu shards of a pack of %u (pack "
				     "%016llx): an interrupted write, or shards missing; a complete "
				     "pack has a manifest, %.*s.rfm", (int)g[a].key, g[a].path, b - a,
				     g[a].pack_shards, (unsigned long long)g[a].pack, (int)g[a].key,
				     g[a].path);
			break;
		}
		if (!mixed)
			continue;
		snprintf(msg, sizeof msg, "%.*s-NNNNN.rfs: shards of different packs (an interrupted "
			 "write, or shards mixed by hand; a complete pack has a manifest, %.*s.rfm):",
			 (int)g[a].key, g[a].path, (int)g[a].key, g[a].path);
		len = strlen(msg);
		for (size_t i = a; i < b; i++) {
			char one[600];
			snprintf(one, sizeof one, " %s (pack %016llx)", g[i].path,
				 (unsigned long long)g[i].pack);
			msg_add(msg, sizeof msg, &len, one);
		}
		rc = rf_fail(d, RF_ECORRUPT, "%s", msg);
	}
	free(g);
	return rc;
}

RF_API int
rf_dataset_open(rf_dataset **out, const char *const *paths, size_t npaths,
		const rf_dataset_config *cfg)
{
	rf_diag d;
	/* No logger until the config is known to be one (its size checked). */
	rf_diag_init(&d, NULL, NULL);
	last_open_error[0] = '\0';
	int rc;
	rf_dataset *ds = NULL;
	struct pathlist pl = {0};
	rf_http *http = NULL;
	if (!out) {
		rc = rf_fail(&d, -EINVAL, "rf_dataset_open: out is NULL");
		goto fail;
	}
	*out = NULL;
	if (cfg) {
		if ((rc = RF_CONFIG_SIZE_CHECK(&d, "rf_dataset_open", cfg, "rf_dataset_config_init")) < 0)
			goto fail;
		d.log = cfg->log;
		d.log_user = cfg->log_user;
	}
	if (!paths || npaths == 0) {
		rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: no path given");
		goto fail;
	}
	for (size_t i = 0; i < npaths; i++) {
		if (!paths[i]) {
			rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: path %zu is NULL", i);
			goto fail;
		}
		if (rf_is_url(paths[i])) {
			if ((!http && (rc = rf_http_open(&http, NULL, &d)) < 0) ||
			    (rc = rf_http_expand(http, paths[i], pl_add_url, &pl)) < 0)
				goto fail;
			continue;
		}
		if ((rc = expand(&pl, paths[i], &d)) < 0)
			goto fail;
	}
	if (pl.n > UINT32_MAX) {
		rc = rf_fail(&d, RF_EUSAGE, "rf_dataset_open: %zu shards, at most 2^32 - 1", pl.n);
		goto fail;
	}
	ds = calloc(1, sizeof *ds);
	if (!ds || !(ds->shards = calloc(pl.n, sizeof *ds->shards))) {
		rc = rf_fail(&d, -ENOMEM, "rf_dataset_open: out of memory");
		goto fail;
	}
	ds->cached = UINT64_MAX;
	ds->verify = cfg ? cfg->verify != 0 : 1;
	ds->http = http;
	http = NULL;
	for (size_t i = 0; i < pl.n; i++) {
		ds->shards[i].fd = -1;
		ds->shards[i].hfile = -1;
		ds->shards[i].path = pl.v[i];
		pl.v[i] = NULL;
	}
	ds->nshards = pl.n;
	for (size_t i = 0; ds->http && i < ds->nshards; i++) {
		struct shard *sh = &ds->shards[i];
		if (rf_is_url(sh->path)) {
			sh->http = ds->http;
			if ((rc = rf_http_add_file(ds->http, sh->path, &sh->hfile)) < 0)
				goto fail;
		}
	}

	if ((rc = rf_fd_reserve(ds->nshards, "rf_dataset_open", &d)) < 0)
		goto fail;
	uint64_t cap = 0;
	for (size_t i = 0, fetched = 0; i < ds->nshards; i++) {
		struct shard *sh = &ds->shards[i];
		uint64_t before = ds->nchunks;
		if (ds->http && i == fetched) {
			fetched = ds->nshards - i < RF_REMOTE_WINDOW ? ds->nshards : i + RF_REMOTE_WINDOW;
			if ((rc = remote_prefetch(ds, i, fetched, &d)) < 0)
				goto fail;
		}
		rc = shard_load(sh, &ds->schema, i > 0, &ds->chunks, &ds->nchunks, &cap,
				(uint32_t)i, &d);
		if (rc == -ENOENT && pl.ex[i].final) {
			/* Renamed by its writer since the manifest was read. */
			if (sh->fd >= 0)
				close(sh->fd);
			sh->fd = -1;
			free(sh->path);
			sh->path = pl.ex[i].final;
			pl.ex[i].final = NULL;
			rc = shard_load(sh, &ds->schema, i > 0, &ds->chunks, &ds->nchunks, &cap,
					(uint32_t)i, &d);
		}
		/* Later reads are chunks and index entries: ranged GETs. */
		free(sh->head);
		free(sh->tail);
		sh->head = sh->tail = NULL;
		sh->head_len = sh->tail_len = 0;
		if (rc < 0)
			goto fail;
		sh->first_chunk = before;
		sh->first_sample = ds->nsamples;
		if (rf_add_u64(ds->nsamples, sh->nsamples, &ds->nsamples) < 0) {
			rc = rf_fail(&d, RF_ECORRUPT, "%s: the dataset holds more than 2^64 samples",
				     sh->path);
			goto fail;
		}
		for (uint64_t c = before; c < ds->nchunks; c++) {
			rf_chunk_info *ci = &ds->chunks[c];
			ci->first_sample += sh->first_sample;
			if (ci->raw_bytes > ds->max_raw)
				ds->max_raw = ci->raw_bytes;
			uint64_t span = RF_ALIGN_UP(ci->stored_bytes, RF_FMT_ALIGN);
			if (span > ds->max_span)
				ds->max_span = span;
		}
	}
	if ((rc = check_packs(ds, &pl, &d)) < 0)
		goto fail;
	ds->diag = d;
	ds->diag.msg[0] = '\0';
	if (ds->http)
		rf_http_set_diag(ds->http, &ds->diag);
	pl_free(&pl);
	*out = ds;
	return 0;
fail:
	snprintf(last_open_error, sizeof last_open_error, "%s", d.msg);
	pl_free(&pl);
	rf_http_close(&http);
	rf_dataset_close(&ds);
	return rc;
}

void
rf_dataset_close_files(rf_dataset *ds)
{
	for (size_t i = 0; i < ds->nshards; i++) {
		if (ds->shards[i].fd >= 0)
			close(ds->shards[i].fd);
		ds->shards[i].fd = -1;
	}
}

RF_API void
rf_dataset_close(rf_dataset **pds)
{
	if (!pds || !*pds)
		return;
	rf_dataset *ds = *pds;
	*pds = NULL;
	if (ds->shards)
		rf_dataset_close_files(ds);
	rf_http_close(&ds->http);
	for (size_t i = 0; ds->shards && i < ds->nshards; i++) {
		free(ds->shards[i].path);
		free(ds->shards[i].head);
		free(ds->shards[i].tail);
	}
	free(ds->shards);
	free(ds->chunks);
	free(ds->stored);
	free(ds->raw);
	ZSTD_freeDCtx(ds->dctx);
	free(ds);
}

/* ------------------------------------------------------------- queries */

RF_API const rf_schema *
rf_dataset_schema(const rf_dataset *ds)
{
	return &ds->schema;
}

RF_API uint64_t
rf_dataset_samples(const rf_dataset *ds)
{
	return ds->nsamples;
}

RF_API uint64_t
rf_dataset_chunks(const rf_dataset *ds)
{
	return ds->nchunks;
}

RF_API size_t
rf_dataset_shards(const rf_dataset *ds)
{
	return ds->nshards;
}

RF_API const char *
rf_dataset_shard_path(const rf_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i].path : NULL;
}

RF_API uint64_t
rf_dataset_shard_bytes(const rf_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i].file_size : 0;
}

RF_API int
rf_dataset_chunk_info(const rf_dataset *ds, uint64_t chunk, rf_chunk_info *out)
{
	if (!ds || !out)
		return -EINVAL;
	if (chunk >= ds->nchunks)
		return -ERANGE;
	*out = ds->chunks[chunk];
	return 0;
}

RF_API int
rf_dataset_find_chunk(const rf_dataset *ds, uint64_t index, uint64_t *chunk)
{
	if (!ds || !chunk)
		return -EINVAL;
	if (index >= ds->nsamples)
		return -ERANGE;
	/* The last chunk whose first sample is <= index. */
	uint64_t lo = 0, hi = ds->nchunks;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ds->chunks[mid].first_sample <= index)
			lo = mid;
		else
			hi = mid;
	}
	*chunk = lo;
	return 0;
}

const rf_chunk_info *
rf_dataset_chunk_table(const rf_dataset *ds)
{
	return ds->chunks;
}

int
rf_dataset_chunk_ctx(const rf_dataset *ds, uint64_t chunk, rf_chunk_ctx *ctx)
{
	if (chunk >= ds->nchunks)
		return -ERANGE;
	const rf_chunk_info *ci = &ds->chunks[chunk];
	const struct shard *sh = &ds->shards[ci->shard];
	ctx->path = sh->path;
	ctx->chunk = chunk - sh->first_chunk;
	ctx->offset = ci->offset;
	return 0;
}

int
rf_dataset_shard_info(const rf_dataset *ds, size_t i, rf_shard_info *out)
{
	if (i >= ds->nshards)
		return -ERANGE;
	const struct shard *sh = &ds->shards[i];
	out->path = sh->path;
	out->fd = sh->fd;
	out->file_size = sh->file_size;
	out->header_end = sh->header_end;
	out->index_offset = sh->index_offset;
	out->first_chunk = sh->first_chunk;
	out->nchunks = sh->nchunks;
	out->first_sample = sh->first_sample;
	out->nsamples = sh->nsamples;
	out->version = sh->version;
	out->pack_id = sh->pack_id;
	return 0;
}

uint64_t
rf_dataset_max_raw_bytes(const rf_dataset *ds)
{
	return ds->max_raw;
}

uint64_t
rf_dataset_max_stored_span(const rf_dataset *ds)
{
	return ds->max_span;
}

/* ------------------------------------------------------------- reading */

static int
ensure(rf_dataset *ds, uint8_t **buf, uint64_t *cap, uint64_t need)
{
	if (*cap >= need)
		return 0;
	free(*buf);
	*cap = 0;
	/* 64-byte aligned: sections are 64-aligned from the chunk start. */
	uint64_t sz = RF_ALIGN_UP(need, 64);
	*buf = sz > SIZE_MAX ? NULL : aligned_alloc(64, (size_t)sz);
	if (!*buf)
		return rf_fail(&ds->diag, -ENOMEM, "out of memory for a %llu-byte chunk buffer",
			       (unsigned long long)need);
	*cap = sz;
	return 0;
}

static int
load_chunk(rf_dataset *ds, uint64_t chunk, int verify)
{
	if (ds->cached == chunk && !verify)
		return 0;
	ds->cached = UINT64_MAX;
	const rf_chunk_info *ci = &ds->chunks[chunk];
	rf_chunk_ctx ctx;
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	int rc = ensure(ds, &ds->stored, &ds->stored_cap, ci->stored_bytes);
	if (rc < 0)
		return rc;
	struct shard *sh = &ds->shards[ci->shard];
	if (sh->hfile < 0 && sh->fd < 0 && (sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC)) < 0) {
		int e = -errno;
		return rf_fail(&ds->diag, e, "%s: cannot open: %s", sh->path, rf_strerror(e));
	}
	rc = shard_read(sh, ds->stored, ci->stored_bytes, ci->offset, "a chunk", &ds->diag);
	if (rc < 0) {
		/* The index was checked against the file size at open: a short
		 * read now means the file shrank underneath us. */
		return rc == RF_ETRUNCATED ? rf_fail(&ds->diag, -EIO, "%s: chunk %llu at offset "
						     "%llu: file shrank since it was opened",
						     ctx.path, (unsigned long long)ctx.chunk,
						     (unsigned long long)ctx.offset)
					   : rc;
	}
	if (ci->codec == RF_CODEC_ZSTD) {
		if ((rc = ensure(ds, &ds->raw, &ds->raw_cap, ci->raw_bytes)) < 0)
			return rc;
		if (!ds->dctx && !(ds->dctx = ZSTD_createDCtx()))
			return rf_fail(&ds->diag, -ENOMEM, "out of memory for a zstd context");
	}
	rc = rf_chunk_open(&ds->schema, ci, ds->stored, ds->raw, ds->raw_cap, ds->dctx, verify,
			   &ds->sec, &ctx, &ds->diag);
	if (rc < 0)
		return rc;
	ds->cached = chunk;
	return 0;
}

RF_API int
rf_dataset_read(rf_dataset *ds, uint64_t index, uint32_t field, void *buf, size_t cap,
		size_t *len)
{
	if (!ds || !len)
		return -EINVAL;
	if (index >= ds->nsamples || field >= ds->schema.nfields)
		return rf_fail(&ds->diag, -ERANGE, "sample %llu field %u: out of range (%llu "
			       "samples, %u fields)", (unsigned long long)index, field,
			       (unsigned long long)ds->nsamples, ds->schema.nfields);
	uint64_t chunk;
	rf_dataset_find_chunk(ds, index, &chunk);
	int rc = load_chunk(ds, chunk, ds->verify && ds->cached != chunk);
	if (rc < 0)
		return rc;
	uint64_t i = index - ds->chunks[chunk].first_sample;
	const rf_chunk_section *s = &ds->sec.field[field];
	const uint8_t *src;
	uint64_t n;
	if (s->offsets) {
		src = s->data + s->offsets[i];
		n = s->offsets[i + 1] - s->offsets[i];
	} else {
		src = s->data + i * s->item_bytes;
		n = s->item_bytes;
	}
	if (len)
		*len = (size_t)n;
	if (n > cap)
		return rf_fail(&ds->diag, -ENOSPC, "sample %llu field %s: %llu bytes, buffer holds "
			       "%zu", (unsigned long long)index, ds->schema.fields[field].name,
			       (unsigned long long)n, cap);
	if (n)
		memcpy(buf, src, (size_t)n);
	return 0;
}

/* Format 2: check a loaded chunk's per-sample checksum table, against the
 * index entry's checksum of the table and against every value of the chunk.
 * The table is read in pieces, so a chunk of many small samples needs no
 * buffer of its size. */
static int
verify_sums(rf_dataset *ds, uint64_t chunk)
{
	const rf_chunk_info *ci = &ds->chunks[chunk];
	struct shard *sh = &ds->shards[ci->shard];
	rf_chunk_ctx ctx = {0};
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	uint32_t nf = ds->schema.nfields;
	/* The table's own checksum is in the index entry, which the dataset
	 * does not keep in memory (8 bytes a chunk is all it would cost, but
	 * only this check needs it). */
	uint8_t e[RF_FMT_INDEX_ENTRY_SIZE];
	int rc = shard_read(sh, e, sizeof e, sh->index_offset + ctx.chunk * sizeof e,
			    "an index entry", &ds->diag);
	if (rc < 0)
		return rc;
	uint64_t at = rf_fmt_sums_offset(ci->offset, ci->stored_bytes);
	uint64_t total = rf_fmt_sums_bytes(ci->samples, nf);
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		return rf_fail(&ds->diag, -ENOMEM, "out of memory for a checksum state");
	XXH3_64bits_reset(st);
	uint64_t buf[4096];
	uint64_t bad_i = UINT64_MAX, got = 0, want = 0;
	uint32_t bad_k = 0;
	for (uint64_t done = 0; done < total && rc == 0;) {
		uint64_t len = total - done < sizeof buf ? total - done : sizeof buf;
		if ((rc = shard_read(sh, buf, len, at + done, "a per-sample checksum table",
				     &ds->diag)) < 0)
			break;
		XXH3_64bits_update(st, buf, (size_t)len);
		for (uint64_t x = 0; x < len / 8 && bad_i == UINT64_MAX; x++) {
			uint64_t entry = done / 8 + x, i = entry / nf;
			uint32_t k = (uint32_t)(entry % nf);
			const rf_chunk_section *sec = &ds->sec.field[k];
			uint64_t h = sec->offsets
				? XXH3_64bits(sec->data + sec->offsets[i],
					      (size_t)(sec->offsets[i + 1] - sec->offsets[i]))
				: XXH3_64bits(sec->data + i * sec->item_bytes, (size_t)sec->item_bytes);
			if (h != rf_le64((const uint8_t *)&buf[x])) {
				bad_i = i;
				bad_k = k;
				got = h;
				want = rf_le64((const uint8_t *)&buf[x]);
			}
		}
		done += len;
	}
	uint64_t tx = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	if (rc < 0)
		return rc == RF_ETRUNCATED ? rf_fail(&ds->diag, -EIO, "%s: chunk %llu at offset %llu: "
						     "file shrank since it was opened", ctx.path,
						     (unsigned long long)ctx.chunk,
						     (unsigned long long)ctx.offset)
					   : rc;
	if (tx != rf_le64(e + 48))
		return rf_fail(&ds->diag, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: the per-sample "
			       "checksum table (%llu bytes at offset %llu) does not match its XXH3-64 "
			       "in the index", ctx.path, (unsigned long long)ctx.chunk,
			       (unsigned long long)ctx.offset, (unsigned long long)total,
			       (unsigned long long)at);
	if (bad_i != UINT64_MAX)
		return rf_fail(&ds->diag, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: sample %llu "
			       "of the chunk (sample %llu of the shard), field %s: checksum mismatch "
			       "(value %016llx, recorded %016llx)", ctx.path,
			       (unsigned long long)ctx.chunk, (unsigned long long)ctx.offset,
			       (unsigned long long)bad_i,
			       (unsigned long long)(ci->first_sample - sh->first_sample + bad_i),
			       ds->schema.fields[bad_k].name, (unsigned long long)got,
			       (unsigned long long)want);
	return 0;
}

/* Format 2: read chunk `chunk`'s per-sample checksum table whole into out
 * (rf_fmt_sums_bytes bytes) through fd, a descriptor of its shard the
 * caller opened, and check it against the index entry's checksum of the
 * table.  Touches nothing of ds but what open set, so a thread of its own
 * may call it; messages go to d.  RF_ECHECKSUM when the table does not
 * match. */
int
rf_dataset_read_sums(const rf_dataset *ds, int fd, uint64_t chunk, void *out, rf_diag *d)
{
	const rf_chunk_info *ci = &ds->chunks[chunk];
	const struct shard *sh = &ds->shards[ci->shard];
	rf_chunk_ctx ctx = {0};
	rf_dataset_chunk_ctx(ds, chunk, &ctx);
	uint8_t e[RF_FMT_INDEX_ENTRY_SIZE];
	int rc = pread_full(fd, e, sizeof e, sh->index_offset + ctx.chunk * sizeof e, ctx.path,
			    "an index entry", d);
	uint64_t at = rf_fmt_sums_offset(ci->offset, ci->stored_bytes);
	uint64_t total = rf_fmt_sums_bytes(ci->samples, ds->schema.nfields);
	if (rc == 0)
		rc = pread_full(fd, out, total, at, ctx.path, "a per-sample checksum table", d);
	if (rc < 0)
		return rc;
	if (XXH3_64bits(out, (size_t)total) != rf_le64(e + 48))
		return rf_fail(d, RF_ECHECKSUM, "%s: chunk %llu at offset %llu: the per-sample "
			       "checksum table (%llu bytes at offset %llu) does not match its XXH3-64 "
			       "in the index", ctx.path, (unsigned long long)ctx.chunk,
			       (unsigned long long)ctx.offset, (unsigned long long)total,
			       (unsigned long long)at);
	return 0;
}

RF_API int
rf_dataset_verify_chunk(rf_dataset *ds, uint64_t chunk)
{
	if (!ds)
		return -EINVAL;
	if (chunk >= ds->nchunks)
		return rf_fail(&ds->diag, -ERANGE, "chunk %llu: out of range (%llu chunks)",
			       (unsigned long long)chunk, (unsigned long long)ds->nchunks);
	int rc = load_chunk(ds, chunk, 1);
	if (rc == 0 && ds->shards[ds->chunks[chunk].shard].version >= 2)
		rc = verify_sums(ds, chunk);
	return rc;
}
