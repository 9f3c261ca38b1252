/* SPDX-License-Identifier: MIT */
/*
 * The writer's pack commit.
 *
 * A pack is committed by its manifest (manifest.h): format 3 (the default)
 * puts a pack id in every shard's header, a checksum of the whole pack's
 * content (so the same input packs to the same bytes, and two different
 * packs to the same output differ), patched into each shard's header and
 * footer once the last shard is written; rf_writer_close writes the
 * manifest naming the shards and that id, renames it into place, and only
 * then renames the shards.  Before the manifest's rename a reader sees the
 * old dataset; after it the new one (a shard not renamed yet is read from its
 * temporary name, which the manifest gives); a reader of mixed shards without
 * a manifest fails naming them.
 *
 * Also here: what earlier writes to the same output left (shards of an
 * older, larger pack; temporary files of writers that were killed).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"

#include "format/format.h"
#include "format/manifest.h"
#include "format/writer_impl.h"

/* Whether no process `pid` runs on this machine (EPERM: one runs, owned by
 * someone else). */
static int
pid_gone(long pid)
{
	return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* The pid of NAME.tmp.PID when `name` is a temporary file that a writer to
 * this output makes (a shard's, or the manifest's), else 0.  `base` is the
 * output's file name without ".rfs", `file` the output's file name. */
static long
temp_pid(const char *name, const char *file, const char *base)
{
	const char *t = strstr(name, ".tmp.");
	if (!t)
		return 0;
	while (strstr(t + 1, ".tmp."))
		t = strstr(t + 1, ".tmp.");
	const char *digits = t + 5;
	if (!*digits || strspn(digits, "0123456789") != strlen(digits) || strlen(digits) > 9)
		return 0;
	size_t stem = (size_t)(t - name), bl = strlen(base);
	int ours = (stem == strlen(file) && strncmp(name, file, stem) == 0) ||
		   (stem == bl + 4 && strncmp(name, base, bl) == 0 &&
		    strncmp(name + bl, RF_MANIFEST_EXT, 4) == 0) ||
		   (stem == bl + 10 && strncmp(name, base, bl) == 0 && name[bl] == '-' &&
		    strspn(name + bl + 1, "0123456789") == 5 && strncmp(name + bl + 6, ".rfs", 4) == 0);
	return ours ? strtol(digits, NULL, 10) : 0;
}

/*
 * Clean up after an earlier writer to this output that was killed.
 *
 * A writer killed after its manifest's rename but before renaming all its
 * shards left a committed pack whose remaining shards are still at their
 * temporary names (so did one of this process whose rename failed): finish
 * its renames, so the output is whole again before
 * this writer replaces it (readers read the same pack either way).  Then
 * remove the temporary files of writers that no longer run, except those a
 * committed manifest still needs (a rename that failed again).
 */
void
rf_wr_recover_output(rf_writer *w)
{
	char *mpath = rf_manifest_path_for(w->path);
	char *copy = strdup(w->path);
	if (!mpath || !copy)
		goto out;
	uint64_t committed = 0;
	rf_manifest m;
	rf_diag quiet;
	rf_diag_init(&quiet, NULL, NULL);
	quiet.errors_quiet = 1;
	if (access(mpath, F_OK) == 0 && rf_manifest_read(mpath, &m, &quiet) == 0) {
		committed = m.pack_id;
		/* This process: a writer whose close failed after the commit
		 * (its rename failed). */
		int gone = m.writer_pid == (long)getpid() || pid_gone(m.writer_pid);
		for (size_t i = 0; gone && i < m.nshards; i++) {
			char *tmp = rf_manifest_tmp_path(mpath, m.shards[i].name, m.writer_pid);
			char *fin = rf_manifest_shard_path(mpath, m.shards[i].name);
			uint64_t id;
			if (tmp && fin && rf_shard_peek_pack(tmp, &id) && id == m.pack_id) {
				if (rename(tmp, fin) == 0)
					rf_log(&w->diag, RF_LOG_INFO, "%s: renamed to %s, finishing the "
					       "pack its manifest %s names", tmp, fin, mpath);
				else
					rf_log(&w->diag, RF_LOG_WARN, "%s: cannot rename to %s: %s", tmp,
					       fin, rf_strerror(-errno));
			}
			free(tmp);
			free(fin);
		}
		rf_manifest_free(&m);
	}
	/* dirname and basename of the output path */
	char *slash = strrchr(copy, '/');
	const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
	const char *file = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	size_t fl = strlen(file);
	char base[NAME_MAX + 1];
	snprintf(base, sizeof base, "%.*s", (int)(fl >= 4 && strcmp(file + fl - 4, ".rfs") == 0 ?
						   fl - 4 : fl), file);
	DIR *dp = opendir(dir);
	struct dirent *de;
	while (dp && (de = readdir(dp))) {
		long pid = temp_pid(de->d_name, file, base);
		if (!pid || !pid_gone(pid))
			continue;
		char *p = rf_wr_str_printf("%s/%s", dir, de->d_name);
		uint64_t id;
		if (p && !(committed && rf_shard_peek_pack(p, &id) && id == committed)) {
			if (unlink(p) == 0)
				rf_log(&w->diag, RF_LOG_INFO, "%s: removed, left by a write to %s that "
				       "was killed (process %ld is gone)", p, w->path, pid);
			else
				rf_log(&w->diag, RF_LOG_WARN, "%s: left by a killed write to %s, cannot "
				       "remove it: %s", p, w->path, rf_strerror(-errno));
		}
		free(p);
	}
	if (dp)
		closedir(dp);
out:
	free(mpath);
	free(copy);
}

int
rf_wr_fsync_dir(rf_writer *w, const char *file)
{
	char *copy = strdup(file);
	if (!copy)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", file);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (fd >= 0) {
		if (fsync(fd) < 0 && errno != EINVAL)
			rc = rf_fail(&w->diag, -errno, "%s: fsync of its directory: %s", file,
				     rf_strerror(-errno));
		close(fd);
	}
	free(copy);
	return rc;
}

/* 1 when `path` is a file that starts with a shard's magic. */
static int
is_shard(const char *path)
{
	char head[RF_FMT_MAGIC_LEN];
	/* O_NONBLOCK: a pipe by that name must not block the open. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	ssize_t n = read(fd, head, sizeof head);
	close(fd);
	return n == (ssize_t)sizeof head && memcmp(head, RF_FMT_MAGIC, sizeof head) == 0;
}

/* Remove one leftover if it is a shard; returns 1 when the name was taken
 * (removed or not), 0 when there is nothing by that name. */
static int
remove_leftover(rf_writer *w, const char *path)
{
	if (access(path, F_OK) < 0)
		return 0;
	if (!is_shard(path))
		return 1;
	if (unlink(path) < 0) {
		int e = errno;
		rf_log(&w->diag, RF_LOG_WARN, "%s: a shard of an earlier write to %s could not be "
		       "removed (%s): a loader given its directory or a glob reads it too",
		       path, w->path, rf_strerror(-e));
	} else {
		rf_log(&w->diag, RF_LOG_INFO, "%s: removed, a shard of an earlier write to %s",
		       path, w->path);
	}
	return 1;
}

/*
 * The output replaces what an earlier write to the same path left, all of
 * it: a dataset once written in more shards (BASE-00007.rfs ...) or in the
 * other layout (PATH alone against BASE-NNNNN.rfs) would otherwise leave
 * shards that a loader given the directory reads as part of this dataset,
 * samples nobody asked for.  Only files that start with a shard's magic are
 * removed; numbered names are probed upwards until one is missing.
 */
void
rf_wr_remove_leftovers(rf_writer *w)
{
	size_t len = strlen(w->path);
	int base = (int)(len >= 4 && strcmp(w->path + len - 4, ".rfs") == 0 ? len - 4 : len);
	if (w->sharded)
		remove_leftover(w, w->path);
	for (size_t i = w->sharded ? w->nshards : 0;; i++) {
		char *name = rf_wr_str_printf("%.*s-%05zu.rfs", base, w->path, i);
		int taken = name ? remove_leftover(w, name) : 0;
		free(name);
		if (!taken)
			break;
	}
}

static int
pwrite_all(rf_writer *w, int fd, const void *buf, size_t len, uint64_t off, const char *path)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			return rf_fail(&w->diag, -e, "%s: write at offset %llu: %s", path,
				       (unsigned long long)(off + done), rf_strerror(-e));
		}
		done += (size_t)r;
	}
	return 0;
}

/*
 * Format 3: the pack id is the XXH3-64 of the header (with a zero id) and of
 * every shard's size, sample count and index checksum (which covers every
 * chunk's checksum): the same content gives the same id, different content a
 * different one.  Written into every finished shard's header and footer (the
 * footer holds the header's checksum, and the pack's shard count), then each
 * shard is synced.
 */
int
rf_wr_seal_pack(rf_writer *w)
{
	if (w->version < 3)
		return 0;
	uint64_t hsize = RF_FMT_HEADER_SIZE(w->schema.nfields);
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, w->header, (size_t)hsize);
	for (size_t i = 0; i < w->nshards; i++) {
		const struct wshard *s = &w->shards[i];
		uint8_t rec[24];
		rf_put_le64(rec, s->size);
		rf_put_le64(rec + 8, s->samples);
		rf_put_le64(rec + 16, s->index_xxh3);
		XXH3_64bits_update(st, rec, sizeof rec);
	}
	w->pack_id = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	if (w->pack_id == 0)
		w->pack_id = 1; /* 0 means "no pack id" */
	rf_put_le64(w->header + RF_FMT_PACK_ID_AT, w->pack_id);
	w->header_xxh3 = XXH3_64bits(w->header, (size_t)hsize - 8);
	rf_put_le64(w->header + hsize - 8, w->header_xxh3);
	for (size_t i = 0; i < w->nshards; i++) {
		struct wshard *s = &w->shards[i];
		uint8_t f[RF_FMT_FOOTER_SIZE] = {0};
		rf_put_le64(f + 0, s->index_offset);
		rf_put_le64(f + 8, s->nchunks);
		rf_put_le64(f + 16, s->samples);
		rf_put_le64(f + 24, s->index_xxh3);
		rf_put_le64(f + 32, w->header_xxh3);
		rf_put_le32(f + 40, w->version);
		rf_put_le32(f + 44, (uint32_t)w->nshards); /* <= 100000 */
		rf_put_le64(f + 48, XXH3_64bits(f, 48));
		memcpy(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN);
		s->footer_xxh3 = rf_le64(f + 48);
		int fd = open(s->tmp, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return rf_fail(&w->diag, -errno, "%s: cannot open: %s", s->tmp,
				       rf_strerror(-errno));
		int rc = pwrite_all(w, fd, w->header, (size_t)hsize, 0, s->tmp);
		if (rc == 0)
			rc = pwrite_all(w, fd, f, sizeof f, s->size - RF_FMT_FOOTER_SIZE, s->tmp);
		if (rc == 0 && !w->cfg.no_fsync && fsync(fd) < 0)
			rc = rf_fail(&w->diag, -errno, "%s: fsync: %s", s->tmp, rf_strerror(-errno));
		if (close(fd) < 0 && rc == 0)
			rc = rf_fail(&w->diag, -errno, "%s: close: %s", s->tmp, rf_strerror(-errno));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Format 3: write the manifest (manifest.h) to a temporary name, sync it and
 * rename it into place: the commit.  *committed is set once the rename is
 * done.  Older formats have no pack id to check a manifest against, so an
 * earlier pack's manifest is removed instead (a reader then lists the
 * directory, as before manifests).
 */
int
rf_wr_commit_manifest(rf_writer *w, int *committed)
{
	char *mpath = rf_manifest_path_for(w->path);
	if (!mpath)
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	int rc = 0;
	if (w->version < 3) {
		if (unlink(mpath) < 0 && errno != ENOENT)
			rc = rf_fail(&w->diag, -errno, "%s: cannot remove the manifest of an earlier "
				     "pack: %s", mpath, rf_strerror(-errno));
		free(mpath);
		return rc;
	}
	rf_manifest m = {w->pack_id, (long)getpid(), w->nshards, NULL};
	char *tmp = rf_wr_str_printf("%s.tmp.%ld", mpath, (long)getpid());
	char *text = NULL;
	size_t len = 0;
	int fd = -1;
	m.shards = calloc(w->nshards, sizeof *m.shards);
	if (!tmp || !m.shards) {
		rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", mpath);
		goto out;
	}
	for (size_t i = 0; i < w->nshards; i++) {
		const struct wshard *s = &w->shards[i];
		const char *slash = strrchr(s->final, '/');
		m.shards[i].name = (char *)(uintptr_t)(slash ? slash + 1 : s->final);
		m.shards[i].size = s->size;
		m.shards[i].samples = s->samples;
		m.shards[i].footer_xxh3 = s->footer_xxh3;
	}
	if (!(text = rf_manifest_format(&m, &len))) {
		rc = rf_fail(&w->diag, -ENOMEM, "%s: out of memory", mpath);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: cannot create: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	for (size_t done = 0; done < len;) {
		ssize_t r = write(fd, text + done, len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			rc = rf_fail(&w->diag, -e, "%s: write: %s", tmp, rf_strerror(-e));
			goto out;
		}
		done += (size_t)r;
	}
	if (!w->cfg.no_fsync && fsync(fd) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: fsync: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	int cfd = fd;
	fd = -1;
	if (close(cfd) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: close: %s", tmp, rf_strerror(-errno));
		goto out;
	}
	if (rename(tmp, mpath) < 0) {
		rc = rf_fail(&w->diag, -errno, "%s: rename to %s: %s (the earlier dataset is "
			     "unchanged)", tmp, mpath, rf_strerror(-errno));
		goto out;
	}
	*committed = 1;
	/* The commit must be on disk before any shard's rename is. */
	if (!w->cfg.no_fsync)
		rc = rf_wr_fsync_dir(w, mpath);
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && !*committed && tmp)
		unlink(tmp);
	free(text);
	free(m.shards);
	free(tmp);
	free(mpath);
	return rc;
}
