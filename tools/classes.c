/* SPDX-License-Identifier: MIT */
/*
 * The class-name file of an image-folder pack, OUT.classes (docs/format.md,
 * "Class names"): a text file beside the shards, which readers of the
 * format that do not know it never open.  It names the shards it belongs to
 * by the checksum in each one's footer, so a file left beside a later pack
 * of other data is recognised as stale and not shown.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images.h"
#include "util.h"

#define CLASSES_MAGIC "ringfeed-classes 1"

int
rf_classes_path(char *buf, size_t cap, const char *shard)
{
	size_t len = strlen(shard);
	int n;

	if (len >= 4 && strcmp(shard + len - 4, ".rfs") == 0)
		len -= 4;
	/* BASE-NNNNN: a numbered shard of BASE. */
	if (len >= 6 && shard[len - 6] == '-' && strspn(shard + len - 5, "0123456789") >= 5)
		len -= 6;
	n = snprintf(buf, cap, "%.*s.classes", (int)len, shard);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The footer checksum of a shard (docs/format.md: footer bytes 48..56). */
static int
footer_sum(const char *path, uint64_t *sum)
{
	unsigned char f[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end;
	int ok = 0;

	if (fd < 0)
		return -1;
	end = lseek(fd, 0, SEEK_END);
	if (end >= 64 && pread(fd, f, 64, end - 64) == 64) {
		uint64_t v = 0;
		for (int i = 7; i >= 0; i--)
			v = (v << 8) | f[48 + i];
		*sum = v;
		ok = 1;
	}
	close(fd);
	return ok ? 0 : -1;
}

int
rf_classes_write(const char *out, int sharded, const char *field, char *const *names, size_t n)
{
	char path[4096], tmp[4200], shard[4096];
	size_t len = strlen(out);
	int base = (int)(len >= 4 && strcmp(out + len - 4, ".rfs") == 0 ? len - 4 : len);
	FILE *f;
	unsigned nshards = 0;
	uint64_t sums[4096];
	char *const *p;

	if (rf_classes_path(path, sizeof path, out) < 0) {
		rf_cli_error("%s: name too long for its class-name file", out);
		return -1;
	}
	for (unsigned i = 0; i < 100000; i++) {
		if (sharded)
			snprintf(shard, sizeof shard, "%.*s-%05u.rfs", base, out, i);
		else if (i == 0)
			snprintf(shard, sizeof shard, "%s", out);
		else
			break;
		if (access(shard, F_OK) < 0)
			break;
		if (nshards == sizeof sums / sizeof sums[0]) {
			rf_cli_error("%s: more than %zu shards: class names not written", out,
				     sizeof sums / sizeof sums[0]);
			return -1;
		}
		if (footer_sum(shard, &sums[nshards]) < 0) {
			rf_cli_error("%s: cannot read its footer: %s", shard, strerror(errno));
			return -1;
		}
		nshards++;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	if (!(f = fopen(tmp, "w"))) {
		rf_cli_error("%s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "%s\nfield %s\nshards %u\n", CLASSES_MAGIC, field, nshards);
	for (unsigned i = 0; i < nshards; i++)
		fprintf(f, "%016" PRIx64 "\n", sums[i]);
	fprintf(f, "classes %zu\n", n);
	for (p = names; p < names + n; p++)
		fprintf(f, "%s\n", *p);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f)) {
		rf_cli_error("%s: %s", tmp, strerror(errno));
		fclose(f);
		unlink(tmp);
		return -1;
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		rf_cli_error("%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	rf_cli_note(2, "%zu class names -> %s", n, path);
	return 0;
}

void
rf_classes_free(char **names, size_t n, char *field)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	free(field);
}

/* One line without its newline, in a buffer owned by the caller (*line,
 * *cap as getline). */
static int
read_line(FILE *f, char **line, size_t *cap)
{
	ssize_t n = getline(line, cap, f);
	if (n < 0)
		return -1;
	if (n > 0 && (*line)[n - 1] == '\n')
		(*line)[n - 1] = 0;
	return 0;
}

int
rf_classes_load(const rf_dataset *ds, char ***names_out, char **field_out)
{
	char path[4096];
	char *line = NULL, *field = NULL, **names = NULL;
	size_t cap = 0, nshards = rf_dataset_shards(ds);
	unsigned long long nsums = 0, nnames = 0;
	uint64_t *sums = NULL;
	FILE *f;
	int ret = 0;

	*names_out = NULL;
	*field_out = NULL;
	if (nshards == 0 || rf_classes_path(path, sizeof path, rf_dataset_shard_path(ds, 0)) < 0)
		return 0;
	if (!(f = fopen(path, "r")))
		return 0;
	if (read_line(f, &line, &cap) < 0 || strcmp(line, CLASSES_MAGIC) != 0)
		goto bad;
	if (read_line(f, &line, &cap) < 0 || strncmp(line, "field ", 6) != 0 ||
	    rf_schema_find(rf_dataset_schema(ds), line + 6) < 0)
		goto bad;
	if (!(field = strdup(line + 6)))
		goto oom;
	if (read_line(f, &line, &cap) < 0 || sscanf(line, "shards %llu", &nsums) != 1 ||
	    nsums == 0 || nsums > 100000)
		goto bad;
	if (!(sums = calloc(nsums, sizeof *sums)))
		goto oom;
	for (unsigned long long i = 0; i < nsums; i++)
		if (read_line(f, &line, &cap) < 0 || sscanf(line, "%" SCNx64, &sums[i]) != 1)
			goto bad;
	/* Every shard of the dataset must be one of this pack's. */
	for (size_t i = 0; i < nshards; i++) {
		uint64_t s;
		unsigned long long k;
		if (footer_sum(rf_dataset_shard_path(ds, i), &s) < 0)
			goto stale;
		for (k = 0; k < nsums && sums[k] != s; k++)
			;
		if (k == nsums)
			goto stale;
	}
	if (read_line(f, &line, &cap) < 0 || sscanf(line, "classes %llu", &nnames) != 1 ||
	    nnames > (1ull << 24))
		goto bad;
	if (!(names = calloc(nnames ? nnames : 1, sizeof *names)))
		goto oom;
	for (unsigned long long i = 0; i < nnames; i++) {
		if (read_line(f, &line, &cap) < 0)
			goto bad;
		if (!(names[i] = strdup(line)))
			goto oom;
	}
	*names_out = names;
	*field_out = field;
	ret = (int)nnames;
	names = NULL;
	field = NULL;
	goto out;
stale:
	rf_cli_note(2, "%s belongs to another pack (its shard checksums differ): "
		    "class names not shown", path);
	goto out;
bad:
	rf_cli_note(1, "%s: not a class-name file of this format: ignored", path);
	goto out;
oom:
	ret = -1;
out:
	rf_classes_free(names, nnames, field);
	free(sums);
	free(line);
	fclose(f);
	return ret;
}

void
rf_classes_print(const rf_dataset *ds, int json)
{
	char **names, *field;
	int n = rf_classes_load(ds, &names, &field);

	if (n <= 0 && !field)
		return;
	if (json) {
		printf(", \"classes\": {\"field\": ");
		rf_cli_json_str(stdout, field);
		printf(", \"names\": [");
		for (int i = 0; i < n; i++) {
			printf("%s", i ? ", " : "");
			rf_cli_json_str(stdout, names[i]);
		}
		printf("]}");
	} else {
		printf("classes:      %d (labels of field %s)\n", n, field);
		for (int i = 0; i < n; i++)
			printf("  %-4d %s\n", i, names[i]);
	}
	rf_classes_free(names, (size_t)n, field);
}
