/* SPDX-License-Identifier: MIT */
/*
 * The dataset reader's paths (reader_impl.h): what rf_dataset_open's paths
 * name, as a list of shards (directories, globs, manifests, remote
 * expansion), and the one-pack rule checked once the shards are loaded.
 */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/manifest.h"
#include "format/reader_impl.h"

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

void
rf_rd_pl_free(struct pathlist *pl)
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
	rf_rd_pl_free(&ms);
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
 * of one BASE are one group here whatever their pack ids: rf_rd_check_packs
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

int
rf_rd_expand(struct pathlist *pl, const char *p, rf_diag *d)
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

int
rf_rd_pl_add_url(void *arg, const char *url, const struct rf_http_expect *hx)
{
	if (!hx)
		return pl_add(arg, url);
	/* From a remote pack manifest: checked by rf_rd_check_packs. */
	struct expect ex = {(char *)(uintptr_t)hx->manifest, NULL, hx->pack, hx->size,
			    hx->samples, hx->footer_xxh3, 0};
	return pl_add_ex(arg, url, &ex);
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
int
rf_rd_check_packs(rf_dataset *ds, const struct pathlist *pl, rf_diag *d)
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
