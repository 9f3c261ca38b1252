/* SPDX-License-Identifier: MIT */
/*
 * One shard of the writer's output: its temporary file PATH.tmp.PID (or
 * BASE-NNNNN.rfs.tmp.PID when sharded), created with the header, written
 * forward, and finished with the index and footer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "xxh.h"

#include "format/format.h"
#include "format/writer_impl.h"

int
rf_wr_write_iov(rf_writer *w, struct iovec *iov, int cnt, uint64_t total)
{
	uint64_t done = 0;
	while (done < total) {
		while (cnt > 0 && iov->iov_len == 0) {
			iov++;
			cnt--;
		}
		ssize_t r = pwritev(w->fd, iov, cnt > IOV_MAX ? IOV_MAX : cnt, (off_t)w->pos);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			return rf_fail(&w->diag, -e, "%s: write of %llu bytes at offset %llu: %s",
				       w->shards[w->nshards - 1].tmp,
				       (unsigned long long)(total - done), (unsigned long long)w->pos,
				       rf_strerror(-e));
		}
		if (r == 0)
			return rf_fail(&w->diag, -EIO, "%s: write at offset %llu made no progress",
				       w->shards[w->nshards - 1].tmp, (unsigned long long)w->pos);
		done += (uint64_t)r;
		w->pos += (uint64_t)r;
		w->bytes += (uint64_t)r;
		size_t left = (size_t)r;
		while (cnt > 0 && left >= iov->iov_len) {
			left -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + left;
			iov->iov_len -= left;
		}
	}
	return 0;
}

static int
write_buf(rf_writer *w, const void *buf, uint64_t len)
{
	struct iovec iov = {(void *)(uintptr_t)buf, (size_t)len};
	return rf_wr_write_iov(w, &iov, 1, len);
}

char *
rf_wr_str_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}

/* Start a new shard: its temporary file and header. */
int
rf_wr_shard_open(rf_writer *w)
{
	if (w->nshards == w->shards_cap) {
		size_t cap = w->shards_cap ? 2 * w->shards_cap : 4;
		struct wshard *s = realloc(w->shards, cap * sizeof *s);
		if (!s)
			return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
		w->shards = s;
		w->shards_cap = cap;
	}
	struct wshard *s = &w->shards[w->nshards];
	/* Five digits: a reader sorts names by byte, and out-100000.rfs would
	 * sort before out-10001.rfs. */
	if (w->sharded && w->nshards > 99999)
		return rf_fail(&w->diag, RF_EUSAGE, "%s: more than 100000 shards: raise the "
			       "shard size", w->path);
	if (w->sharded) {
		size_t len = strlen(w->path);
		int base = (int)(len >= 4 && strcmp(w->path + len - 4, ".rfs") == 0 ? len - 4 : len);
		s->final = rf_wr_str_printf("%.*s-%05zu.rfs", base, w->path, w->nshards);
	} else {
		s->final = strdup(w->path);
	}
	s->tmp = s->final ? rf_wr_str_printf("%s.tmp.%ld", s->final, (long)getpid()) : NULL;
	if (!s->final || !s->tmp) {
		free(s->final);
		free(s->tmp);
		return rf_fail(&w->diag, -ENOMEM, "%s: out of memory", w->path);
	}
	w->fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (w->fd < 0) {
		int e = errno;
		int rc = rf_fail(&w->diag, -e, "%s: cannot create: %s", s->tmp, rf_strerror(-e));
		free(s->final);
		free(s->tmp);
		return rc;
	}
	w->nshards++;
	w->pos = 0;
	w->nchunks = 0;
	w->shard_samples = 0;
	return write_buf(w, w->header, w->header_end);
}

/* Write the index and footer of the current shard, fsync and close it. */
int
rf_wr_shard_finish(rf_writer *w)
{
	uint64_t isize = w->nchunks * RF_FMT_INDEX_ENTRY_SIZE;
	uint8_t *buf = w->index;
	/* The index buffer keeps room for the footer after the entries. */
	uint8_t *f = buf + isize;
	memset(f, 0, RF_FMT_FOOTER_SIZE);
	rf_put_le64(f + 0, w->pos);
	rf_put_le64(f + 8, w->nchunks);
	rf_put_le64(f + 16, w->shard_samples);
	rf_put_le64(f + 24, XXH3_64bits(buf, isize));
	rf_put_le64(f + 32, w->header_xxh3);
	rf_put_le32(f + 40, w->version);
	rf_put_le64(f + 48, XXH3_64bits(f, 48));
	memcpy(f + 56, RF_FMT_MAGIC, RF_FMT_MAGIC_LEN);
	int rc = write_buf(w, buf, isize + RF_FMT_FOOTER_SIZE);
	if (rc < 0)
		return rc;
	struct wshard *sh = &w->shards[w->nshards - 1];
	sh->size = w->pos;
	sh->samples = w->shard_samples;
	sh->footer_xxh3 = rf_le64(f + 48);
	sh->index_offset = rf_le64(f + 0);
	sh->nchunks = w->nchunks;
	sh->index_xxh3 = rf_le64(f + 24);
	/* Format 3: synced once its pack id is in (rf_wr_seal_pack). */
	if (w->version < 3 && !w->cfg.no_fsync && fsync(w->fd) < 0) {
		int e = errno;
		return rf_fail(&w->diag, -e, "%s: fsync: %s", w->shards[w->nshards - 1].tmp,
			       rf_strerror(-e));
	}
	int fd = w->fd;
	w->fd = -1;
	if (close(fd) < 0) {
		int e = errno;
		return rf_fail(&w->diag, -e, "%s: close: %s", w->shards[w->nshards - 1].tmp,
			       rf_strerror(-e));
	}
	return 0;
}
