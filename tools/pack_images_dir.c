/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed pack --images DIR`: the folder walk.  Classes are DIR's
 * subdirectories sorted by name, files sorted by path within each class.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "pack_images_impl.h"

/* ------------------------------------------------------ image folders */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files are images by their extension, as torchvision's ImageFolder
 * takes them (any case); others (notes.txt, a file without one) are left
 * out and counted.  Images of a format ringfeed does not decode are kept,
 * so that the pack names them. */
static int
image_extension(const char *name)
{
	static const char *const ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm",
					  ".tif", ".tiff", ".webp", NULL};
	const char *dot = strrchr(name, '.');
	for (int i = 0; dot && ext[i]; i++)
		if (!strcasecmp(dot, ext[i]))
			return 1;
	return 0;
}

/* Append DIR/rel's image files (recursively, hidden ones skipped) to
 * *list as paths relative to the class directory's parent; *ignored counts
 * the files left out for their extension. */
static int
walk(const char *root, const char *rel, char ***list, size_t *n, size_t *cap, int depth,
     size_t *ignored)
{
	char *dir = ipack_xasprintf("%s/%s", root, rel);
	DIR *d;
	struct dirent *e;
	int ret = 0;

	if (!dir)
		return ipack_oom();
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
		char *r = ipack_xasprintf("%s/%s", rel, e->d_name);
		char *full = r ? ipack_xasprintf("%s/%s", root, r) : NULL;
		if (!full) {
			free(r);
			ret = ipack_oom();
			break;
		}
		if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
			free(full);
			ret = walk(root, r, list, n, cap, depth + 1, ignored);
			free(r);
			if (ret < 0)
				break;
			continue;
		}
		free(full);
		if (!image_extension(e->d_name)) {
			rf_cli_note(2, "%s/%s: not an image file name, left out", root, r);
			free(r);
			(*ignored)++;
			continue;
		}
		/* Anything else (a broken link, a device) is read later and
		 * reported with its path then. */
		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 256;
			char **l = realloc(*list, c * sizeof *l);
			if (!l) {
				free(r);
				ret = ipack_oom();
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

int
ipack_scan_images(ipack *p)
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
		char *full = ipack_xasprintf("%s/%s", root, e->d_name);
		if (!full) {
			closedir(d);
			return ipack_oom();
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
				return ipack_oom();
			}
			p->classes = c;
		}
		if (!(p->classes[p->nclasses] = strdup(e->d_name))) {
			closedir(d);
			return ipack_oom();
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
	size_t ignored = 0;
	for (size_t c = 0; c < p->nclasses; c++) {
		char **files = NULL;
		size_t n = 0, fcap = 0;
		if (walk(root, p->classes[c], &files, &n, &fcap, 0, &ignored) < 0) {
			for (size_t i = 0; i < n; i++)
				free(files[i]);
			free(files);
			return -1;
		}
		qsort(files, n, sizeof *files, cmp_str);
		if (n == 0)
			rf_cli_note(1, "class '%s' (label %zu) has no files", p->classes[c], c);
		for (size_t i = 0; i < n; i++) {
			item *it = ipack_new_item(p);
			if (!it || !(it->path = ipack_xasprintf("%s/%s", root, files[i]))) {
				for (; i < n; i++)
					free(files[i]);
				free(files);
				return ipack_oom();
			}
			it->name = files[i];
			it->label = (int64_t)c;
			it->has_label = 1;
		}
		free(files);
	}
	p->has_label = 1;
	if (ignored)
		rf_cli_note(1, "%zu file(s) in the class directories have no image extension "
			    "(.jpg, .jpeg, .png, ...) and are left out, as torchvision's "
			    "ImageFolder does (-v names them)", ignored);
	if (p->nitems == 0) {
		rf_cli_error("--images %s: no files in its %zu class directories", root,
			     p->nclasses);
		return -1;
	}
	rf_cli_note(2, "%zu files in %zu classes", p->nitems, p->nclasses);
	return 0;
}
