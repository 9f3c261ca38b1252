/* SPDX-License-Identifier: MIT */
/*
 * URL files in the reader (io.h): a path that is an http://, https:// or
 * s3:// URL is read by the remote reader (http.h), created at the first
 * such file and sharing the reader's queue depth, and its completions come
 * back through rf_io_wait with the local ones.  io.c calls in here from
 * one hook per operation; the engines' own code does not change.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/http.h"
#include "io/io_impl.h"

int
rf_io_remote_add(rf_io *io, const char *path, int *file)
{
	if (!io->http) {
		rf_http_config cfg;
		rf_http_config_init(&cfg);
		cfg.queue_depth = io->qd;
		cfg.cache_dir = io->cache_dir;
		cfg.cache_bytes = io->cache_bytes;
		int rc = rf_http_open(&io->http, &cfg, io->diag);
		if (rc < 0)
			return rc;
	}
	int h;
	int rc = rf_http_add_file(io->http, path, &h);
	if (rc < 0)
		return rc;
	struct rf_io_file *f;
	if ((rc = rf_io_file_slot(io, &f)) < 0)
		return rc;
	f->fd = -1;
	f->fixed = -1;
	f->remote = h + 1;
	if (!(f->path = strdup(path)))
		return rf_fail(io->diag, -ENOMEM, "io: out of memory");
	*file = (int)io->nfiles++;
	return 0;
}

/* "http" when every file is a URL, else the local engine's name and
 * "+http": what rf_io_engine() reports once a URL file is added. */
const char *
rf_io_remote_engine(rf_io *io)
{
	int local = 0;
	for (unsigned i = 0; i < io->nfiles; i++)
		local |= !io->files[i].remote;
	if (local)
		snprintf(io->engine_name, sizeof io->engine_name, "%s+http", io->engine);
	else
		snprintf(io->engine_name, sizeof io->engine_name, "http");
	return io->engine_name;
}

void
rf_io_cache_file(rf_io *io, int file, uint64_t version)
{
	if (file >= 0 && (unsigned)file < io->nfiles && io->files[file].remote)
		rf_http_cache_file(io->http, io->files[file].remote - 1, version);
}

void
rf_io_cache_drop(rf_io *io, int file, uint64_t offset, size_t len)
{
	if (file >= 0 && (unsigned)file < io->nfiles && io->files[file].remote)
		rf_http_cache_drop(io->http, io->files[file].remote - 1, offset, len);
}

int64_t
rf_io_reread(rf_io *io, int file, uint64_t offset, void *buf, size_t len)
{
	if (!io || file < 0 || (unsigned)file >= io->nfiles || !io->files[file].remote)
		return -ENOTSUP;
	return rf_http_read_now(io->http, io->files[file].remote - 1, offset, buf, len);
}

int
rf_io_read_error(rf_io *io, int file, uint64_t offset, char *buf, size_t cap)
{
	if (!io || file < 0 || (unsigned)file >= io->nfiles || !io->files[file].remote)
		return 0;
	return rf_http_read_error(io->http, io->files[file].remote - 1, offset, buf, cap);
}

int
rf_io_remote_read(rf_io *io, const struct rf_io_file *f, uint64_t offset, void *buf, size_t len,
		  uint64_t tag)
{
	if (io->outstanding >= io->qd)
		return -EAGAIN;
	int rc = rf_http_read(io->http, f->remote - 1, offset, buf, len, tag);
	if (rc < 0)
		return rc;
	io->outstanding++;
	io->remote_out++;
	return 0;
}

int
rf_io_remote_submit(rf_io *io)
{
	return rf_http_submit(io->http);
}

/* Local completions already reaped, up to max, into done[]. */
static unsigned
take_local(rf_io *io, rf_io_done *done, unsigned max)
{
	unsigned n = 0;
	while (n < max && io->ready_count) {
		done[n++] = io->ready[io->ready_head];
		io->ready_head = (io->ready_head + 1) % io->qd;
		io->ready_count--;
	}
	return n;
}

static int
reap_local(rf_io *io, unsigned min)
{
	return io->ops->reap(io, min);
}

int
rf_io_remote_wait(rf_io *io, rf_io_done *done, unsigned max, unsigned min)
{
	if (min > io->outstanding)
		min = io->outstanding;
	unsigned local_out = io->outstanding - io->remote_out;
	unsigned n = 0;
	int rc;
	for (;;) {
		/* Only one kind in flight: block in that one's wait. */
		if (!local_out && !io->ready_count) {
			int got = rf_http_wait(io->http, done + n, max - n, min > n ? min - n : 0);
			if (got < 0)
				return got;
			n += (unsigned)got;
			io->remote_out -= (unsigned)got;
			break;
		}
		if (!io->remote_out) {
			if ((rc = reap_local(io, min > n ? min - n : 0)) < 0)
				return rc;
			unsigned got = take_local(io, done + n, max - n);
			n += got;
			local_out -= got < local_out ? got : local_out;
			break;
		}
		/* Both: neither wait may block on the other's completions. */
		if ((rc = reap_local(io, 0)) < 0)
			return rc;
		unsigned got = take_local(io, done + n, max - n);
		n += got;
		local_out -= got < local_out ? got : local_out;
		int g = rf_http_wait(io->http, done + n, max - n, 0);
		if (g < 0)
			return g;
		n += (unsigned)g;
		io->remote_out -= (unsigned)g;
		if (n >= min || n == max)
			break;
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	io->outstanding -= n;
	return (int)n;
}

void
rf_io_remote_close(rf_io *io)
{
	rf_http_close(&io->http);
}
