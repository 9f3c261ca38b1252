/* SPDX-License-Identifier: MIT */
/*
 * The io_uring engine.  One ring per reader, used from the reader's thread
 * only, so nothing here locks.  Reads are prepared as SQEs by rf_io_read and
 * go to the kernel in batches (one io_uring_enter per rf_io_submit/rf_io_wait,
 * which also reaps); the read region is registered once as fixed buffers and
 * the files in a sparse fixed-file table, so the kernel neither pins pages
 * nor looks up a file per read.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io/io_impl.h"

#define RF_IO_FIXED_FILES_MIN 256

/* io_uring charges registered buffers to RLIMIT_MEMLOCK unless the process
 * holds CAP_IPC_LOCK (io_uring_create only accounts for users without it). */
static int
has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capget, &hdr, data) != 0)
		return 0;
	return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

static void
register_buffers(rf_io *io)
{
	size_t bytes = io->region_bytes;
	struct rlimit rl;
	if (!has_cap_ipc_lock() && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)bytes > (uint64_t)rl.rlim_cur) {
		rf_log(io->diag, RF_LOG_WARN,
		       "io: registering the %zu-byte read region with io_uring needs RLIMIT_MEMLOCK >= "
		       "%zu bytes, but the limit is %llu bytes; reading into it unregistered "
		       "(io_uring-unregistered). To register, raise the limit: `ulimit -l unlimited`, "
		       "LimitMEMLOCK=infinity (systemd), --ulimit memlock=-1 (docker), or grant "
		       "CAP_IPC_LOCK",
		       bytes, bytes, (unsigned long long)rl.rlim_cur);
		io->engine = "io_uring-unregistered";
		return;
	}
	unsigned n = (unsigned)((bytes + ((size_t)1 << RF_IO_BUF_SHIFT) - 1) >> RF_IO_BUF_SHIFT);
	struct iovec *iov = calloc(n, sizeof *iov);
	if (!iov) {
		io->engine = "io_uring-unregistered";
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		size_t off = (size_t)i << RF_IO_BUF_SHIFT;
		size_t len = bytes - off;
		if (len > ((size_t)1 << RF_IO_BUF_SHIFT))
			len = (size_t)1 << RF_IO_BUF_SHIFT;
		iov[i].iov_base = (char *)io->region + off;
		iov[i].iov_len = len;
	}
	int ret = io_uring_register_buffers(&io->ring, iov, n);
	free(iov);
	if (ret < 0) {
		/* The limit counts every page the user has locked, so the
		 * check above can pass and registration still fail. */
		rf_log(io->diag, RF_LOG_WARN,
		       "io: io_uring could not register the %zu-byte read region (%s); reading into "
		       "it unregistered (io_uring-unregistered). RLIMIT_MEMLOCK counts all memory the "
		       "user has locked: raise it with `ulimit -l unlimited` or LimitMEMLOCK=infinity",
		       bytes, rf_strerror(ret));
		io->engine = "io_uring-unregistered";
		return;
	}
	io->bufs_registered = 1;
	io->nbufs = n;
}

int
rf_io_uring_setup(rf_io *io, int forced)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	/* SUBMIT_ALL: a bad SQE does not stall the ones behind it.  (Not
	 * COOP_TASKRUN: it defers posting completions to our next kernel
	 * entry, which a caller polling with min = 0 may never make.) */
	p.flags = IORING_SETUP_SUBMIT_ALL;
	int ret = io_uring_queue_init_params(io->qd, &io->ring, &p);
	if (ret == -EINVAL) {
		memset(&p, 0, sizeof p);
		ret = io_uring_queue_init_params(io->qd, &io->ring, &p);
	}
	if (ret < 0) {
		const char *why = ret == -ENOSYS ? " (kernel without io_uring)"
				  : ret == -EPERM ? " (blocked by kernel.io_uring_disabled or a seccomp profile)"
						  : "";
		if (forced)
			return rf_fail(io->diag, ret,
				       "io: io_uring_queue_init(%u): %s%s; io_uring was forced "
				       "(RINGFEED_IO=uring or engine 1)",
				       io->qd, rf_strerror(ret), why);
		rf_log(io->diag, RF_LOG_WARN,
		       "io: io_uring is unavailable (io_uring_queue_init: %s%s); reading with a pool "
		       "of pread threads",
		       rf_strerror(ret), why);
		return ret;
	}
	io->ring_ok = 1;
	io->kind = RF_IO_URING;
	io->ops = &rf_io_uring_ops;
	io->engine = "io_uring";
	if (io->region && io->region_bytes)
		register_buffers(io);

	struct rlimit rl;
	unsigned cap = RF_IO_FIXED_FILES_MIN;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < cap)
		cap = (unsigned)rl.rlim_cur;
	ret = io_uring_register_files_sparse(&io->ring, cap);
	if (ret == 0) {
		io->files_registered = 1;
		io->fixed_cap = cap;
	} else {
		rf_log(io->diag, RF_LOG_DEBUG, "io: no registered files (%s)", rf_strerror(ret));
	}
	return 0;
}

static int process_cqes(rf_io *io);

void
rf_io_uring_teardown(rf_io *io)
{
	if (!io->ring_ok)
		return;
	/* Let every read in flight land before the ring (and the caller's
	 * memory) goes away. */
	while (io->nfree < io->qd) {
		int ret = io_uring_submit_and_wait(&io->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			break;
		process_cqes(io);
	}
	io_uring_queue_exit(&io->ring);
	io->ring_ok = 0;
}

static int
grow_fixed(rf_io *io, unsigned need)
{
	struct rlimit rl;
	unsigned cap = io->fixed_cap * 2;
	while (cap <= need)
		cap *= 2;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < cap)
		cap = (unsigned)rl.rlim_cur;
	if (cap <= need)
		return -EMFILE;
	/* SQEs still in the ring name slots of the old table. */
	if (io_uring_sq_ready(&io->ring))
		rf_io_uring_submit(io);
	int ret = io_uring_unregister_files(&io->ring);
	if (ret < 0)
		return ret;
	io->fixed_cap = 0;
	ret = io_uring_register_files_sparse(&io->ring, cap);
	if (ret < 0)
		return ret;
	io->fixed_cap = cap;
	for (unsigned i = 0; i < io->nfiles; i++) {
		if (io->files[i].fixed < 0)
			continue;
		ret = io_uring_register_files_update(&io->ring, (unsigned)io->files[i].fixed,
						     &io->files[i].fd, 1);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int
rf_io_uring_add_file(rf_io *io, struct rf_io_file *f, unsigned index)
{
	if (!io->files_registered)
		return 0;
	int ret = 0;
	if (index >= io->fixed_cap)
		ret = grow_fixed(io, index);
	if (ret == 0) {
		ret = io_uring_register_files_update(&io->ring, index, &f->fd, 1);
		if (ret == 1) {
			f->fixed = (int)index;
			return 0;
		}
		if (ret >= 0)
			ret = -EIO;
	}
	/* Reads through plain descriptors work as well; only the per-read
	 * file lookup comes back. */
	rf_log(io->diag, RF_LOG_DEBUG, "io: registered files disabled at %s (%s)", f->path,
	       rf_strerror(ret));
	io->files_registered = 0;
	for (unsigned i = 0; i < io->nfiles; i++)
		io->files[i].fixed = -1;
	f->fixed = -1;
	io_uring_unregister_files(&io->ring);
	return 0;
}

void
rf_io_uring_queue(rf_io *io, unsigned idx)
{
	struct rf_io_req *r = &io->reqs[idx];
	const struct rf_io_file *f = &io->files[r->file];
	char *p = r->buf + r->done;
	uint64_t off = r->offset + r->done;
	size_t n = r->len - r->done;
	if (n > io->max_piece)
		n = io->max_piece;

	/* Requests in use never exceed qd <= the SQ size, so an SQE is free
	 * unless prepared ones wait for a submit; submit those then. */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
	while (RF_UNLIKELY(!sqe)) {
		io_uring_submit(&io->ring);
		sqe = io_uring_get_sqe(&io->ring);
	}
	int fd = f->fixed >= 0 ? f->fixed : f->fd;
	char *base = io->region;
	if (io->bufs_registered && p >= base && (size_t)(p - base) < io->region_bytes) {
		size_t rel = (size_t)(p - base);
		unsigned bi = (unsigned)(rel >> RF_IO_BUF_SHIFT);
		size_t end = ((size_t)bi + 1) << RF_IO_BUF_SHIFT;
		if (end > io->region_bytes)
			end = io->region_bytes;
		if (n > end - rel)
			n = end - rel; /* the rest follows as the next piece */
		io_uring_prep_read_fixed(sqe, fd, p, (unsigned)n, off, (int)bi);
	} else {
		io_uring_prep_read(sqe, fd, p, (unsigned)n, off);
	}
	if (f->fixed >= 0)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, idx);
	r->piece = n;
}

/* Move every available CQE through the completion path; resubmissions are
 * prepared as SQEs and go out with the next enter. */
static int
process_cqes(rf_io *io)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&io->ring, head, cqe)
	{
		unsigned idx = (unsigned)cqe->user_data;
		int64_t res = cqe->res;
		seen++;
		if (idx >= io->qd)
			continue;
		struct rf_io_req *r = &io->reqs[idx];
		if (res > 0 && rf_io_hits_fail(io, r, r->piece))
			res = -EIO;
		if (rf_io_finish_piece(io, idx, res))
			rf_io_uring_queue(io, idx);
	}
	io_uring_cq_advance(&io->ring, seen);
	return (int)seen;
}

int
rf_io_uring_submit(rf_io *io)
{
	unsigned busy = 0;
	while (io_uring_sq_ready(&io->ring)) {
		int ret = io_uring_submit(&io->ring);
		if (ret >= 0 || ret == -EINTR)
			continue;
		if ((ret == -EAGAIN || ret == -EBUSY) && ++busy < 1000) {
			/* Out of kernel resources or completions pending:
			 * reap what is there, then try again. */
			process_cqes(io);
			continue;
		}
		return rf_fail(io->diag, ret, "io: io_uring_submit: %s", rf_strerror(ret));
	}
	return 0;
}

int
rf_io_uring_reap(rf_io *io, unsigned min)
{
	for (;;) {
		process_cqes(io);
		if (io->ready_count >= min || io->nfree == io->qd)
			return rf_io_uring_submit(io);
		/* One enter submits what is prepared and waits. */
		int ret = io_uring_submit_and_wait(&io->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME)
			return rf_fail(io->diag, ret, "io: io_uring_enter: %s", rf_strerror(ret));
	}
}

const struct rf_io_ops rf_io_uring_ops = {
	.kernel_writes = 1,
	.teardown = rf_io_uring_teardown,
	.add_file = rf_io_uring_add_file,
	.queue = rf_io_uring_queue,
	.submit = rf_io_uring_submit,
	.reap = rf_io_uring_reap,
};
