/* SPDX-License-Identifier: MIT */
/*
 * The reader's common part: engine choice, files, request slots and the
 * completion path shared by both engines.  Everything here runs on the one
 * thread that submits and waits, so none of it takes a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "io/http.h"
#include "io/io_impl.h"

/* Consecutive -EAGAIN/-EINTR results of one request before it is failed:
 * the kernel retries internally, so a request that keeps coming back with
 * them is stuck, not busy. */
#define RF_IO_MAX_RETRY 1000

/* Errors that network and parallel file systems (NFS, Lustre, FUSE) return
 * for a moment and not the next time: a read that meets one is asked again
 * up to RF_IO_TRANSIENT_RETRIES times, after RF_IO_BACKOFF_US, then 4x that,
 * 16x ... (about 0.35 s in all), before it fails. */
#define RF_IO_TRANSIENT_RETRIES 5
#define RF_IO_BACKOFF_US 1000u

static int
transient(int64_t res)
{
	return res == -EIO || res == -EAGAIN || res == -ETIMEDOUT;
}

void
rf_io_config_init(rf_io_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->queue_depth = 32;
	cfg->direct = 1;
	cfg->engine = 0;
}

#if RF_TEST_HOOKS
static uint64_t
env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return def;
	return v;
}
#endif

int
rf_io_open(rf_io **out, const rf_io_config *cfg, rf_diag *diag)
{
	*out = NULL;
	rf_io_config def;
	if (!cfg) {
		rf_io_config_init(&def);
		cfg = &def;
	}
	if (cfg->engine < 0 || cfg->engine > 2)
		return rf_fail(diag, RF_EUSAGE, "io: engine %d is not 0 (auto), 1 (io_uring) or 2 (pread)",
			       cfg->engine);
	if (cfg->region && (uintptr_t)cfg->region % 4096)
		return rf_fail(diag, RF_EUSAGE, "io: the read region must be 4096-aligned");

	int engine = cfg->engine;
	const char *env = getenv("RINGFEED_IO");
	if (env && *env) {
		if (strcasecmp(env, "pread") == 0)
			engine = 2;
		else if (strcasecmp(env, "uring") == 0 || strcasecmp(env, "io_uring") == 0)
			engine = 1;
		else if (strcasecmp(env, "auto") == 0)
			engine = 0;
		else
			rf_log(diag, RF_LOG_WARN, "RINGFEED_IO=%s is not pread, uring or auto; ignored", env);
	}

	rf_io *io = calloc(1, sizeof *io);
	if (!io)
		return rf_fail(diag, -ENOMEM, "io: out of memory");
	io->diag = diag;
	io->qd = cfg->queue_depth ? cfg->queue_depth : 32;
	if (io->qd > RF_IO_DEPTH_MAX) {
		rf_log(diag, RF_LOG_DEBUG, "io: queue depth %u capped at %u", io->qd, RF_IO_DEPTH_MAX);
		io->qd = RF_IO_DEPTH_MAX;
	}
	io->want_direct = cfg->direct != 0;
	io->region = cfg->region;
	io->region_bytes = cfg->region ? cfg->region_bytes : 0;
	io->cache_bytes = cfg->cache_bytes;
	if (cfg->cache_dir && *cfg->cache_dir && !(io->cache_dir = strdup(cfg->cache_dir))) {
		free(io);
		return rf_fail(diag, -ENOMEM, "io: out of memory");
	}
#if RF_TEST_HOOKS
	/* Test-only switches (-Dtest_hooks): injected faults, small pieces,
	 * a simulated O_DIRECT refusal. */
	io->fail_at = env_u64("RINGFEED_IO_FAIL_AT", UINT64_MAX);
	/* Stored plus one: 1 marks the failures as spent, 0 "always". */
	uint64_t times = env_u64("RINGFEED_IO_FAIL_TIMES", 0);
	io->fail_times = times && times < UINT64_MAX ? times + 1 : 0;
	uint64_t piece = env_u64("RINGFEED_IO_MAX_PIECE", RF_IO_MAX_PIECE);
	/* Whole pages, so the pieces of an O_DIRECT read stay aligned. */
	piece &= ~(uint64_t)4095;
	io->max_piece = piece && piece < RF_IO_MAX_PIECE ? (size_t)piece : RF_IO_MAX_PIECE;
	const char *rd = getenv("RINGFEED_IO_REFUSE_DIRECT");
	/* "1": every file; another string: the files whose path holds it. */
	io->refuse_direct = rd && *rd && strcmp(rd, "0") != 0;
	io->refuse_match = io->refuse_direct && strcmp(rd, "1") != 0 ? rd : NULL;
#else
	io->fail_at = UINT64_MAX;
	io->max_piece = RF_IO_MAX_PIECE;
#endif

	io->reqs = calloc(io->qd, sizeof *io->reqs);
	io->free_stack = calloc(io->qd, sizeof *io->free_stack);
	io->ready = calloc(io->qd, sizeof *io->ready);
	if (!io->reqs || !io->free_stack || !io->ready) {
		rf_io_close(&io);
		return rf_fail(diag, -ENOMEM, "io: out of memory");
	}
	for (unsigned i = 0; i < io->qd; i++)
		io->free_stack[i] = io->qd - 1 - i;
	io->nfree = io->qd;

	int ret = -ENOSYS;
	if (engine != 2) {
		ret = rf_io_uring_setup(io, engine == 1);
		if (ret < 0 && engine == 1) {
			rf_io_close(&io);
			return ret; /* the message is on the diag */
		}
	}
	if (ret < 0) {
		ret = rf_io_pread_setup(io);
		if (ret < 0) {
			rf_io_close(&io);
			return ret;
		}
	}
	*out = io;
	return 0;
}

void
rf_io_close(rf_io **iop)
{
	if (!iop || !*iop)
		return;
	rf_io *io = *iop;
	/* Engines wait for reads still in flight: the memory they land in
	 * belongs to the caller, who may unmap it as soon as this returns. */
	rf_io_remote_close(io);
	free(io->cache_dir);
	if (io->ops)
		io->ops->teardown(io);
	for (unsigned i = 0; i < io->nfiles; i++) {
		if (io->files[i].fd >= 0)
			close(io->files[i].fd);
		free(io->files[i].path);
	}
	free(io->files);
	free(io->reqs);
	free(io->free_stack);
	free(io->ready);
	free(io);
	*iop = NULL;
}

/* The next entry of the file table, zeroed (not yet counted in nfiles). */
int
rf_io_file_slot(rf_io *io, struct rf_io_file **out)
{
	if (io->nfiles == io->files_cap) {
		unsigned cap = io->files_cap ? io->files_cap * 2 : 16;
		struct rf_io_file *nf = realloc(io->files, cap * sizeof *nf);
		if (!nf)
			return rf_fail(io->diag, -ENOMEM, "io: out of memory");
		io->files = nf;
		io->files_cap = cap;
	}
	*out = &io->files[io->nfiles];
	memset(*out, 0, sizeof **out);
	return 0;
}

int
rf_io_add_file(rf_io *io, const char *path, int *file)
{
	if (rf_is_url(path))
		return rf_io_remote_add(io, path, file);
	struct rf_io_file *f = NULL;
	int rc = rf_io_file_slot(io, &f);
	if (rc < 0)
		return rc;
	f->fixed = -1;
	f->path = strdup(path);
	if (!f->path)
		return rf_fail(io->diag, -ENOMEM, "io: out of memory");

	int fd = -1;
	if (io->want_direct) {
		if (io->refuse_direct && (!io->refuse_match || strstr(path, io->refuse_match))) {
			/* Test hook: behave as a file system that refuses
			 * O_DIRECT (tmpfs before Linux 6.6, some FUSE). */
			errno = EINVAL;
		} else {
			fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
		}
		if (fd >= 0) {
			f->direct = 1;
		} else if (errno == EINVAL) {
			if (!io->warned_buffered) {
				rf_log(io->diag, RF_LOG_WARN,
				       "io: the file system of %s refuses O_DIRECT; reading it and any "
				       "other such file through the page cache",
				       path);
				io->warned_buffered = 1;
			}
		} else {
			int err = -errno;
			free(f->path);
			return rf_fail(io->diag, err, "open %s: %s", path, rf_strerror(err));
		}
	}
	if (fd < 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int err = -errno;
			free(f->path);
			return rf_fail(io->diag, err, "open %s: %s", path, rf_strerror(err));
		}
	}
	f->fd = fd;
	unsigned index = io->nfiles++;
	if (io->ops->add_file)
		io->ops->add_file(io, f, index);
	*file = (int)index;
	return 0;
}

int
rf_io_read(rf_io *io, int file, uint64_t offset, void *buf, size_t len, uint64_t tag)
{
	if (RF_UNLIKELY(file < 0 || (unsigned)file >= io->nfiles))
		return rf_fail(io->diag, -EBADF, "io: read of unknown file handle %d", file);
	const struct rf_io_file *f = &io->files[file];
	if (f->remote)
		return rf_io_remote_read(io, f, offset, buf, len, tag);
	if (RF_UNLIKELY(!buf || len == 0))
		return rf_fail(io->diag, -EINVAL, "io: empty read of %s at offset %" PRIu64, f->path,
			       offset);
	if (RF_UNLIKELY(f->direct && (((uintptr_t)buf | offset | len) & 4095)))
		return rf_fail(io->diag, -EINVAL,
			       "io: O_DIRECT read of %s needs 4096-aligned buffer, offset and length "
			       "(buffer %p, offset %" PRIu64 ", length %zu)",
			       f->path, buf, offset, len);
	if (RF_UNLIKELY(offset > UINT64_MAX - len))
		return rf_fail(io->diag, -EINVAL, "io: read of %s: offset %" PRIu64 " + %zu overflows",
			       f->path, offset, len);
	if (io->outstanding >= io->qd)
		return -EAGAIN;
	unsigned idx = io->free_stack[--io->nfree];
	struct rf_io_req *r = &io->reqs[idx];
	r->tag = tag;
	r->offset = offset;
	r->buf = buf;
	r->len = len;
	r->done = 0;
	r->piece = 0;
	r->file = file;
	r->fd = f->fd;
	r->res = 0;
	r->again = 0;
	r->retries = 0;
	io->outstanding++;
	if (io->ops->kernel_writes)
		RF_IO_POISON(buf, len);
	io->ops->queue(io, idx);
	return 0;
}

int
rf_io_submit(rf_io *io)
{
	if (io->http && rf_io_remote_submit(io) < 0)
		return -EIO;
	return io->ops->submit(io);
}

static void
complete(rf_io *io, unsigned idx, int64_t res)
{
	struct rf_io_req *r = &io->reqs[idx];
	/* ready[] holds at most qd entries: a request moves there when its
	 * slot is freed, and rf_io_read counts both against qd. */
	rf_io_done *d = &io->ready[(io->ready_head + io->ready_count) % io->qd];
	d->tag = r->tag;
	d->res = res;
	if (io->ops->kernel_writes)
		RF_IO_UNPOISON(r->buf, r->len);
	io->ready_count++;
	io->free_stack[io->nfree++] = idx;
}

int
rf_io_finish_piece(rf_io *io, unsigned idx, int64_t res)
{
	struct rf_io_req *r = &io->reqs[idx];
	const struct rf_io_file *f = &io->files[r->file];
	if (res == -EAGAIN || res == -EINTR) {
		if (++r->again < RF_IO_MAX_RETRY)
			return 1;
	}
	if (res < 0 && transient(res) && r->retries < RF_IO_TRANSIENT_RETRIES) {
		/* Waits on the thread that reaps completions: other reads'
		 * completions wait too, which is what a file system in
		 * trouble needs anyway, and the wait is rare and bounded. */
		unsigned us = RF_IO_BACKOFF_US << (2 * r->retries);
		r->retries++;
		__atomic_fetch_add(&io->retries, 1, __ATOMIC_RELAXED);
		rf_log(io->diag, RF_LOG_WARN, "read of %s at offset %" PRIu64 " (%zu bytes): %s; "
		       "retry %u of %d in %u ms", f->path, r->offset + r->done, r->piece,
		       rf_strerror((int)res), r->retries, RF_IO_TRANSIENT_RETRIES, us / 1000);
		usleep(us);
		return 1;
	}
	if (res < 0) {
		rf_fail(io->diag, (int)res,
			"read of %s at offset %" PRIu64 " (%zu bytes) failed: %s%s", f->path,
			r->offset + r->done, r->piece, rf_strerror((int)res),
			r->retries ? " (after retries)" : "");
		complete(io, idx, res);
		return 0;
	}
	r->again = 0;
	if (res == 0) {
		/* End of file: the read completes with what came in. */
		complete(io, idx, (int64_t)r->done);
		return 0;
	}
	r->done += (size_t)res;
	if (r->done >= r->len) {
		complete(io, idx, (int64_t)r->len);
		return 0;
	}
	/* O_DIRECT moves whole logical blocks, so a short count that is not a
	 * multiple of one can only mean end of file; asking again would be a
	 * misaligned read. */
	if (f->direct && (size_t)res < r->piece && (res & 4095)) {
		complete(io, idx, (int64_t)r->done);
		return 0;
	}
	return 1;
}

int
rf_io_wait(rf_io *io, rf_io_done *done, unsigned max, unsigned min)
{
	if (io->http)
		return rf_io_remote_wait(io, done, max, min);
	if (min > io->outstanding)
		min = io->outstanding;
	int ret = io->ops->reap(io, min);
	if (ret < 0)
		return ret;
	unsigned n = 0;
	while (n < max && io->ready_count) {
		done[n++] = io->ready[io->ready_head];
		io->ready_head = (io->ready_head + 1) % io->qd;
		io->ready_count--;
	}
	io->outstanding -= n;
	return (int)n;
}

uint64_t
rf_io_retries(const rf_io *io)
{
	return __atomic_load_n(&io->retries, __ATOMIC_RELAXED);
}

unsigned
rf_io_inflight(const rf_io *io)
{
	return io->outstanding;
}

const char *
rf_io_engine(const rf_io *io)
{
	if (io->http) /* the name is built in the reader's own buffer */
		return rf_io_remote_engine((rf_io *)io);
	return io->engine;
}

int
rf_io_file_direct(const rf_io *io, int file)
{
	return file >= 0 && (unsigned)file < io->nfiles && io->files[file].direct;
}

int
rf_io_direct(const rf_io *io)
{
	if (!io->want_direct)
		return 0;
	for (unsigned i = 0; i < io->nfiles; i++)
		if (!io->files[i].direct)
			return 0;
	return 1;
}
