/* SPDX-License-Identifier: MIT */
/*
 * The limits of `ringfeed bench` (see bench_limits.h).  Each measurement is a
 * plain, single-purpose loop with nothing of the loader in it, so the ratio
 * loader / limit says how much of the hardware the loader leaves unused.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
#include <zstd.h>

#include "bench_limits.h"
#include "util.h"

#define ALIGN 4096u

/* CPU time of the calling thread, in seconds. */
static double
thread_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double
bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t
round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t
splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------ io_uring */

/* One read in flight: where it goes and how much of it is still missing
 * (short reads are resubmitted for the rest, as the loader does). */
typedef struct raw_slot {
	int file;
	uint64_t offset;
	uint64_t len;
	uint64_t done;
	uint64_t payload;   /* bytes this read counts for when complete */
	bool busy;
} raw_slot;

typedef struct raw_reader {
	struct io_uring ring;
	bool ring_ok;
	int *fds;
	size_t nfds;
	bool fixed_files;
	bool fixed_bufs;
	bool all_direct;
	unsigned depth;
	size_t buf_bytes;
	unsigned char *mem;   /* depth buffers of buf_bytes, 4096-aligned */
	raw_slot *slots;
	unsigned inflight;
} raw_reader;

static void
raw_close(raw_reader *rr)
{
	if (rr->ring_ok)
		io_uring_queue_exit(&rr->ring);
	for (size_t i = 0; i < rr->nfds; i++)
		if (rr->fds[i] >= 0)
			close(rr->fds[i]);
	free(rr->fds);
	free(rr->mem);
	free(rr->slots);
	memset(rr, 0, sizeof *rr);
}

/* Open the shards, the ring and `depth` buffers of buf_bytes.  Registration
 * of files and buffers is tried as the loader tries it and skipped when
 * refused (RLIMIT_MEMLOCK): reads then go into the same memory unregistered. */
static int
raw_open(raw_reader *rr, const rf_dataset *ds, unsigned depth, size_t buf_bytes, bool direct,
	 bench_rate *r)
{
	int ret;

	memset(rr, 0, sizeof *rr);
	rr->depth = depth;
	rr->buf_bytes = round_up(buf_bytes ? buf_bytes : ALIGN, ALIGN);
	rr->nfds = rf_dataset_shards(ds);
	rr->all_direct = direct;
	if (!(rr->fds = calloc(rr->nfds, sizeof *rr->fds)) ||
	    !(rr->slots = calloc(depth, sizeof *rr->slots)) ||
	    posix_memalign((void **)&rr->mem, ALIGN, (size_t)depth * rr->buf_bytes) != 0) {
		rr->mem = NULL;
		snprintf(r->note, sizeof r->note, "out of memory for %u x %zu bytes", depth,
			 rr->buf_bytes);
		raw_close(rr);
		return -ENOMEM;
	}
	memset(rr->mem, 0, (size_t)depth * rr->buf_bytes);
	for (size_t i = 0; i < rr->nfds; i++)
		rr->fds[i] = -1;
	for (size_t i = 0; i < rr->nfds; i++) {
		const char *path = rf_dataset_shard_path(ds, i);
		int fd = direct ? open(path, O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
		if (fd < 0) {
			/* tmpfs and some FUSE refuse O_DIRECT: read buffered, as the
			 * loader's fallback does, and say so. */
			if (direct)
				rr->all_direct = false;
			fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		if (fd < 0) {
			ret = -errno;
			snprintf(r->note, sizeof r->note, "%s: %s", path, strerror(errno));
			raw_close(rr);
			return ret;
		}
		rr->fds[i] = fd;
	}
	/* The loader's ring flags: a bad SQE does not stall the ones behind it,
	 * and completions run when the thread enters the kernel anyway. */
	{
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
		ret = io_uring_queue_init_params(depth, &rr->ring, &p);
		if (ret == -EINVAL) {
			memset(&p, 0, sizeof p);
			ret = io_uring_queue_init_params(depth, &rr->ring, &p);
		}
	}
	if (ret < 0) {
		snprintf(r->note, sizeof r->note, "io_uring unavailable: %s", strerror(-ret));
		raw_close(rr);
		return ret;
	}
	rr->ring_ok = true;
	if (io_uring_register_files(&rr->ring, rr->fds, (unsigned)rr->nfds) == 0)
		rr->fixed_files = true;
	{
		struct iovec *iov = calloc(depth, sizeof *iov);
		if (iov) {
			for (unsigned i = 0; i < depth; i++) {
				iov[i].iov_base = rr->mem + (size_t)i * rr->buf_bytes;
				iov[i].iov_len = rr->buf_bytes;
			}
			if (io_uring_register_buffers(&rr->ring, iov, depth) == 0)
				rr->fixed_bufs = true;
			free(iov);
		}
	}
	return 0;
}

static int
raw_queue(raw_reader *rr, unsigned i)
{
	raw_slot *s = &rr->slots[i];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&rr->ring);
	unsigned char *buf = rr->mem + (size_t)i * rr->buf_bytes + s->done;
	unsigned len = (unsigned)(s->len - s->done);
	int fd = rr->fixed_files ? s->file : rr->fds[s->file];

	if (!sqe)
		return -EBUSY;
	if (rr->fixed_bufs)
		io_uring_prep_read_fixed(sqe, fd, buf, len, s->offset + s->done, (int)i);
	else
		io_uring_prep_read(sqe, fd, buf, len, s->offset + s->done);
	if (rr->fixed_files)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, i);
	return 0;
}

/* Where the next read goes; returns false when there is nothing more to
 * issue.  The generator of the sequential or the random pattern. */
typedef bool (*raw_next_fn)(void *user, int *file, uint64_t *offset, uint64_t *len,
			    uint64_t *payload);

/* Keep `depth` reads in flight until next() runs dry or min_seconds pass,
 * then drain.  Times from the first submit to the last completion. */
static int
raw_run(raw_reader *rr, raw_next_fn next, void *user, double min_seconds, bench_rate *r)
{
	double t0 = bench_now(), deadline = t0 + min_seconds;
	bool more = true;
	int ret = 0;

	r->bytes = 0;
	r->ops = 0;
	for (;;) {
		/* Ctrl-C ends the measurement early; what was read counts. */
		if (more && (bench_now() >= deadline || rf_cli_interrupted()))
			more = false;
		for (unsigned i = 0; more && i < rr->depth; i++) {
			raw_slot *s = &rr->slots[i];
			if (s->busy)
				continue;
			if (!next(user, &s->file, &s->offset, &s->len, &s->payload)) {
				more = false;
				break;
			}
			s->done = 0;
			s->busy = true;
			if ((ret = raw_queue(rr, i)) < 0)
				goto out;
			rr->inflight++;
		}
		if (!rr->inflight)
			break;
		if ((ret = io_uring_submit_and_wait(&rr->ring, 1)) < 0) {
			if (ret == -EINTR)
				continue;
			snprintf(r->note, sizeof r->note, "io_uring_submit: %s", strerror(-ret));
			goto out;
		}
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&rr->ring, head, cqe) {
			unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
			raw_slot *s = &rr->slots[i];
			int res = cqe->res;
			seen++;
			if (res == -EAGAIN || res == -EINTR) {
				if ((ret = raw_queue(rr, i)) < 0)
					goto out;
				continue;
			}
			if (res < 0) {
				ret = res;
				snprintf(r->note, sizeof r->note, "read of %" PRIu64 " bytes at %" PRIu64 ": %s",
					 s->len, s->offset, strerror(-res));
				goto out;
			}
			s->done += (uint64_t)res;
			if (res > 0 && s->done < s->len) {
				if ((ret = raw_queue(rr, i)) < 0)
					goto out;
				continue;
			}
			s->busy = false;
			rr->inflight--;
			r->bytes += (double)s->payload;
			r->ops += 1;
		}
		io_uring_cq_advance(&rr->ring, seen);
	}
	r->seconds = bench_now() - t0;
	r->ok = r->ops > 0 && r->seconds > 0;
	if (!r->ok && !r->note[0])
		snprintf(r->note, sizeof r->note, "nothing to read");
	return 0;
out:
	/* Wait for what is still in flight before the buffers go away. */
	while (rr->inflight) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&rr->ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(&rr->ring, cqe);
		rr->inflight--;
	}
	r->ok = false;
	return ret;
}

static void
raw_note_mode(const raw_reader *rr, bool direct, bench_rate *r)
{
	if (r->note[0])
		return;
	snprintf(r->note, sizeof r->note, "%s%s%s", rr->all_direct ? "O_DIRECT" : "buffered",
		 direct && !rr->all_direct ? " (O_DIRECT refused by the file system)" : "",
		 rr->fixed_bufs ? ", registered buffers" : ", unregistered buffers");
}

typedef struct seq_state {
	const rf_dataset *ds;
	uint64_t chunk, nchunks;
	uint64_t issued, max_reads; /* reads so far; 0: no cap */
} seq_state;

static bool
seq_next(void *user, int *file, uint64_t *offset, uint64_t *len, uint64_t *payload)
{
	seq_state *st = user;
	rf_chunk_info ci;

	if (st->max_reads && st->issued >= st->max_reads)
		return false;
	if (rf_dataset_chunk_info(st->ds, st->chunk, &ci) < 0)
		return false;
	st->chunk = (st->chunk + 1) % st->nchunks;
	*file = (int)ci.shard;
	*offset = ci.offset;
	*len = round_up(ci.stored_bytes, ALIGN);
	*payload = ci.stored_bytes;
	st->issued++;
	return true;
}

int
bench_raw_sequential(const rf_dataset *ds, unsigned depth, bool direct, double min_seconds,
		     bool one_pass, bench_rate *r)
{
	seq_state st = {.ds = ds, .nchunks = rf_dataset_chunks(ds)};
	st.max_reads = one_pass ? st.nchunks : 0;
	uint64_t biggest = 0;
	raw_reader rr;
	int ret;

	memset(r, 0, sizeof *r);
	if (!st.nchunks) {
		snprintf(r->note, sizeof r->note, "the dataset has no chunks");
		return 0;
	}
	for (uint64_t c = 0; c < st.nchunks; c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) == 0 && ci.stored_bytes > biggest)
			biggest = ci.stored_bytes;
	}
	if (!depth)
		depth = 1;
	if ((ret = raw_open(&rr, ds, depth, (size_t)round_up(biggest, ALIGN), direct, r)) < 0)
		return ret;
	ret = raw_run(&rr, seq_next, &st, min_seconds, r);
	raw_note_mode(&rr, direct, r);
	raw_close(&rr);
	return ret;
}

/* The random pattern of the `full` shuffle: a random sample, then one read
 * per field of the aligned pages that hold its value. */
typedef struct rand_state {
	const rf_dataset *ds;
	const rf_schema *schema;
	uint64_t samples;
	uint64_t rng;
	uint32_t field;       /* next field of the current sample */
	rf_chunk_info ci;
	uint64_t in_chunk;    /* the sample's index in its chunk */
	uint64_t item[RF_MAX_FIELDS];
	bool failed;
} rand_state;

static bool
rand_next(void *user, int *file, uint64_t *offset, uint64_t *len, uint64_t *payload)
{
	rand_state *st = user;
	uint64_t section = 0, start, end;

	if (st->field == 0 || st->field >= st->schema->nfields) {
		uint64_t s = splitmix64(&st->rng) % st->samples, c;
		if (rf_dataset_find_chunk(st->ds, s, &c) < 0 ||
		    rf_dataset_chunk_info(st->ds, c, &st->ci) < 0) {
			st->failed = true;
			return false;
		}
		st->in_chunk = s - st->ci.first_sample;
		st->field = 0;
	}
	/* Sections are columnar, each at a multiple of 64 (docs/format.md). */
	for (uint32_t f = 0; f < st->field; f++)
		section = round_up(section, 64) + st->ci.samples * st->item[f];
	section = round_up(section, 64);
	start = st->ci.offset + section + st->in_chunk * st->item[st->field];
	end = start + st->item[st->field];
	*file = (int)st->ci.shard;
	*offset = start / ALIGN * ALIGN;
	*len = round_up(end, ALIGN) - *offset;
	/* A sample is counted once, when the read of its last field is. */
	*payload = 0;
	st->field++;
	if (st->field == st->schema->nfields) {
		for (uint32_t f = 0; f < st->schema->nfields; f++)
			*payload += st->item[f];
	}
	return true;
}

int
bench_raw_random(const rf_dataset *ds, unsigned depth, bool direct, double min_seconds,
		 uint64_t seed, bench_rate *r)
{
	rand_state st = {.ds = ds, .schema = rf_dataset_schema(ds),
			 .samples = rf_dataset_samples(ds), .rng = seed};
	uint64_t biggest = 0;
	raw_reader rr;
	int ret;

	memset(r, 0, sizeof *r);
	if (!st.samples) {
		snprintf(r->note, sizeof r->note, "the dataset has no samples");
		return 0;
	}
	for (uint32_t f = 0; f < st.schema->nfields; f++) {
		if (st.schema->fields[f].var_dim >= 0) {
			snprintf(r->note, sizeof r->note,
				 "variable-size field '%s': random reads not measured",
				 st.schema->fields[f].name);
			return 0;
		}
		st.item[f] = rf_field_item_bytes(&st.schema->fields[f]);
		if (st.item[f] > biggest)
			biggest = st.item[f];
	}
	for (uint64_t c = 0; c < rf_dataset_chunks(ds); c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) == 0 && ci.codec != RF_CODEC_NONE) {
			snprintf(r->note, sizeof r->note,
				 "compressed chunks are read whole: random reads not measured");
			return 0;
		}
	}
	if (!depth)
		depth = 1;
	if ((ret = raw_open(&rr, ds, depth, (size_t)round_up(biggest, ALIGN) + ALIGN, direct,
			    r)) < 0)
		return ret;
	ret = raw_run(&rr, rand_next, &st, min_seconds, r);
	/* ops counted reads; a sample is nfields reads. */
	r->ops /= st.schema->nfields ? st.schema->nfields : 1;
	if (st.failed && !r->note[0])
		snprintf(r->note, sizeof r->note, "the dataset's index could not be searched");
	raw_note_mode(&rr, direct, r);
	raw_close(&rr);
	return ret;
}

/* --------------------------------------------------------------- zstd */

int
bench_zstd(const rf_dataset *ds, unsigned max_chunks, double min_seconds, bench_rate *r)
{
	uint64_t nchunks = rf_dataset_chunks(ds), nz = 0;
	rf_chunk_info *pick = NULL;
	unsigned char **stored = NULL;
	unsigned char *raw = NULL;
	uint64_t raw_max = 0;
	unsigned npick = 0;
	ZSTD_DCtx *dctx = NULL;
	int ret = 0;

	memset(r, 0, sizeof *r);
	for (uint64_t c = 0; c < nchunks; c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) == 0 && ci.codec == RF_CODEC_ZSTD)
			nz++;
	}
	if (!nz) {
		snprintf(r->note, sizeof r->note, "no zstd chunks");
		return 0;
	}
	if (!max_chunks)
		max_chunks = 1;
	if (nz < max_chunks)
		max_chunks = (unsigned)nz;
	pick = calloc(max_chunks, sizeof *pick);
	stored = calloc(max_chunks, sizeof *stored);
	if (!pick || !stored) {
		ret = -ENOMEM;
		goto out;
	}
	/* Chunks spread evenly over the zstd chunks of the dataset, so a
	 * dataset whose start compresses differently from its end is sampled
	 * fairly. */
	for (uint64_t c = 0, k = 0; c < nchunks && npick < max_chunks; c++) {
		rf_chunk_info ci;
		if (rf_dataset_chunk_info(ds, c, &ci) < 0 || ci.codec != RF_CODEC_ZSTD)
			continue;
		if (k++ * max_chunks / nz != npick)
			continue;
		pick[npick] = ci;
		if (!(stored[npick] = malloc(ci.stored_bytes))) {
			ret = -ENOMEM;
			goto out;
		}
		int fd = open(rf_dataset_shard_path(ds, ci.shard), O_RDONLY | O_CLOEXEC);
		ssize_t got = fd < 0 ? -1 : pread(fd, stored[npick], ci.stored_bytes, (off_t)ci.offset);
		int err = errno;
		if (fd >= 0)
			close(fd);
		if (got != (ssize_t)ci.stored_bytes) {
			snprintf(r->note, sizeof r->note, "%s: cannot read chunk %" PRIu64 ": %s",
				 rf_dataset_shard_path(ds, ci.shard), c,
				 got < 0 ? strerror(err) : "short read");
			npick++;
			ret = -EIO;
			goto out;
		}
		if (ci.raw_bytes > raw_max)
			raw_max = ci.raw_bytes;
		npick++;
	}
	if (!(raw = malloc(raw_max ? raw_max : 1)) || !(dctx = ZSTD_createDCtx())) {
		ret = -ENOMEM;
		goto out;
	}
	{
		double t0 = bench_now(), c0 = thread_cpu_now(), t;
		unsigned i = 0;
		do {
			size_t n = ZSTD_decompressDCtx(dctx, raw, raw_max, stored[i],
						       pick[i].stored_bytes);
			if (ZSTD_isError(n) || n != pick[i].raw_bytes) {
				snprintf(r->note, sizeof r->note, "chunk at offset %" PRIu64 ": %s",
					 pick[i].offset,
					 ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size");
				ret = -EIO;
				goto out;
			}
			r->bytes += (double)n;
			r->ops += 1;
			i = (i + 1) % npick;
		} while (((t = bench_now()) < t0 + min_seconds || i != 0) && !rf_cli_interrupted());
		/* CPU time, not wall time: a CPU-bound limit is what one core
		 * does, whatever else the machine runs meanwhile. */
		r->seconds = thread_cpu_now() - c0;
		r->wall_seconds = t - t0;
	}
	r->ok = r->seconds > 0;
	snprintf(r->note, sizeof r->note, "%u chunk%s, one thread, CPU time", npick,
		 npick == 1 ? "" : "s");
out:
	if (ret == -ENOMEM)
		snprintf(r->note, sizeof r->note, "out of memory");
	ZSTD_freeDCtx(dctx);
	free(raw);
	if (stored)
		for (unsigned i = 0; i < npick; i++)
			free(stored[i]);
	free(stored);
	free(pick);
	return ret;
}

/* ------------------------------------------------------------- memcpy */

/* Read after every copy so the compiler cannot drop copies nobody reads. */
static volatile unsigned bench_memcpy_sink;

int
bench_memcpy(size_t bytes, double min_seconds, bench_rate *r)
{
	unsigned char *a, *b;
	double t0, c0, t;

	memset(r, 0, sizeof *r);
	a = malloc(bytes);
	b = malloc(bytes);
	if (!a || !b) {
		free(a);
		free(b);
		snprintf(r->note, sizeof r->note, "out of memory");
		return -ENOMEM;
	}
	/* Touch both so page faults stay out of the timing. */
	memset(a, 1, bytes);
	memset(b, 2, bytes);
	memcpy(b, a, bytes);
	t0 = bench_now();
	c0 = thread_cpu_now();
	do {
		memcpy(b, a, bytes);
		bench_memcpy_sink += b[(size_t)r->ops * 4099 % bytes];  /* keep the copies observable */
		r->bytes += (double)bytes;
		r->ops += 1;
	} while ((t = bench_now()) < t0 + min_seconds && !rf_cli_interrupted());
	r->seconds = thread_cpu_now() - c0;
	r->wall_seconds = t - t0;
	r->ok = r->seconds > 0;
	snprintf(r->note, sizeof r->note, "one thread, %zu MiB buffers, CPU time", bytes >> 20);
	free(a);
	free(b);
	return 0;
}

struct memcpy_go {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int go;
	double stop;        /* bench_now() when the threads stop */
};

struct memcpy_thread {
	pthread_t t;
	unsigned char *a, *b;
	size_t bytes;
	double copied;
	unsigned sink;
	struct memcpy_go *g;
};

static void *
memcpy_thread_main(void *arg)
{
	struct memcpy_thread *m = arg;
	unsigned sink = 0;
	pthread_mutex_lock(&m->g->mu);
	while (!m->g->go)
		pthread_cond_wait(&m->g->cv, &m->g->mu);
	double stop = m->g->stop;
	pthread_mutex_unlock(&m->g->mu);
	while (bench_now() < stop && !rf_cli_interrupted()) {
		memcpy(m->b, m->a, m->bytes);
		sink += m->b[(size_t)m->copied % m->bytes];
		m->copied += (double)m->bytes;
	}
	m->sink = sink;
	return NULL;
}

int
bench_memcpy_parallel(unsigned threads, double min_seconds, bench_rate *r)
{
	memset(r, 0, sizeof *r);
	if (threads < 2) {
		snprintf(r->note, sizeof r->note, "one thread: see memcpy");
		return 0;
	}
	/* 64 MiB a buffer, at most 1 GiB for all, at least 8 MiB. */
	size_t bytes = ((size_t)1 << 30) / (2 * (size_t)threads);
	if (bytes > ((size_t)64 << 20))
		bytes = (size_t)64 << 20;
	if (bytes < ((size_t)8 << 20))
		bytes = (size_t)8 << 20;
	struct memcpy_go g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	struct memcpy_thread *m = calloc(threads, sizeof *m);
	int rc = m ? 0 : -ENOMEM;
	for (unsigned i = 0; rc == 0 && i < threads; i++) {
		m[i].a = malloc(bytes);
		m[i].b = malloc(bytes);
		if (!m[i].a || !m[i].b) {
			rc = -ENOMEM;
			break;
		}
		/* Touch both so page faults stay out of the timing. */
		memset(m[i].a, 1, bytes);
		memset(m[i].b, 2, bytes);
		m[i].bytes = bytes;
		m[i].g = &g;
	}
	unsigned started = 0;
	for (unsigned i = 0; rc == 0 && i < threads; i++) {
		if (pthread_create(&m[i].t, NULL, memcpy_thread_main, &m[i])) {
			rc = -EAGAIN;
			break;
		}
		started++;
	}
	pthread_mutex_lock(&g.mu);
	double t0 = bench_now();
	g.stop = rc == 0 ? t0 + min_seconds : 0; /* a failure: stop at once */
	g.go = 1;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(m[i].t, NULL);
	double t = bench_now() - t0;
	if (rc == 0) {
		for (unsigned i = 0; i < threads; i++) {
			r->bytes += m[i].copied;
			bench_memcpy_sink += m[i].sink;
		}
		r->ops = threads;
		r->seconds = r->wall_seconds = t;
		r->ok = t > 0 && r->bytes > 0;
		snprintf(r->note, sizeof r->note, "%u threads at once, %zu MiB buffers each, wall time",
			 threads, bytes >> 20);
	} else {
		snprintf(r->note, sizeof r->note, "%s for %u threads",
			 rc == -ENOMEM ? "out of memory" : "could not start", threads);
	}
	for (unsigned i = 0; m && i < threads; i++) {
		free(m[i].a);
		free(m[i].b);
	}
	free(m);
	return rc;
}

/* ---------------------------------------------------------------- CUDA */

/* The handful of cudart entry points used, typed by hand (cudaError_t is an
 * int-sized enum; cudaMemcpyHostToDevice is 1, cudaStreamNonBlocking 1), so
 * the tool needs no toolkit headers. */
typedef int (*cu_int_fn)(int);
typedef int (*cu_malloc_fn)(void **, size_t);
typedef int (*cu_ptr_fn)(void *);
typedef int (*cu_hostreg_fn)(void *, size_t, unsigned);
typedef int (*cu_stream_create_fn)(void **, unsigned);
typedef int (*cu_memcpy_async_fn)(void *, const void *, size_t, int, void *);

static void *
cu_sym(void *lib, const char *name)
{
	return dlsym(lib, name);
}

int
bench_h2d(int index, size_t bytes, double min_seconds, bench_rate *r)
{
	static const char *const names[] = {"libcudart.so.13", "libcudart.so.12"};
	const char *env = getenv("RINGFEED_CUDART");
	void *lib = NULL, *host = MAP_FAILED, *dev = NULL, *stream = NULL;
	cu_int_fn set_device = NULL;
	cu_malloc_fn cmalloc = NULL;
	cu_ptr_fn cfree = NULL, unreg = NULL, ssync = NULL, sdestroy = NULL;
	cu_hostreg_fn reg = NULL;
	cu_stream_create_fn screate = NULL;
	cu_memcpy_async_fn copy = NULL;
	bool registered = false;
	int e;

	memset(r, 0, sizeof *r);
	if (env && *env)
		lib = dlopen(env, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	for (size_t i = 0; !lib && !(env && *env) && i < sizeof names / sizeof names[0]; i++)
		lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib) {
		snprintf(r->note, sizeof r->note, "no CUDA runtime: not measured");
		return 0;
	}
	/* dlsym hands back void *; converting through memcpy keeps -Wpedantic
	 * quiet about object-to-function pointer casts. */
#define CU_LOAD(var, name)                                               \
	do {                                                             \
		void *s_ = cu_sym(lib, name);                            \
		if (!s_) {                                               \
			snprintf(r->note, sizeof r->note,                \
				 "the CUDA runtime lacks %s", name);     \
			goto out;                                        \
		}                                                        \
		memcpy(&(var), &s_, sizeof s_);                          \
	} while (0)
	CU_LOAD(set_device, "cudaSetDevice");
	CU_LOAD(cmalloc, "cudaMalloc");
	CU_LOAD(cfree, "cudaFree");
	CU_LOAD(reg, "cudaHostRegister");
	CU_LOAD(unreg, "cudaHostUnregister");
	CU_LOAD(screate, "cudaStreamCreateWithFlags");
	CU_LOAD(sdestroy, "cudaStreamDestroy");
	CU_LOAD(ssync, "cudaStreamSynchronize");
	CU_LOAD(copy, "cudaMemcpyAsync");
#undef CU_LOAD
	if ((e = set_device(index)) != 0) {
		snprintf(r->note, sizeof r->note, "cudaSetDevice(%d): error %d", index, e);
		goto out;
	}
	host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED) {
		snprintf(r->note, sizeof r->note, "out of memory");
		goto out;
	}
	memset(host, 3, bytes);
	if ((e = reg(host, bytes, 0)) != 0) {
		snprintf(r->note, sizeof r->note, "cudaHostRegister: error %d", e);
		goto out;
	}
	registered = true;
	if ((e = cmalloc(&dev, bytes)) != 0) {
		dev = NULL;
		snprintf(r->note, sizeof r->note, "cudaMalloc: error %d", e);
		goto out;
	}
	if ((e = screate(&stream, 1)) != 0) {
		stream = NULL;
		snprintf(r->note, sizeof r->note, "cudaStreamCreate: error %d", e);
		goto out;
	}
	/* One warm-up copy, then groups of 4 queued copies per synchronize so
	 * the copy engine never idles between them. */
	if ((e = copy(dev, host, bytes, 1, stream)) != 0 || (e = ssync(stream)) != 0) {
		snprintf(r->note, sizeof r->note, "cudaMemcpyAsync: error %d", e);
		goto out;
	}
	{
		double t0 = bench_now(), t;
		do {
			for (int k = 0; k < 4; k++)
				if ((e = copy(dev, host, bytes, 1, stream)) != 0)
					break;
			if (e || (e = ssync(stream)) != 0) {
				snprintf(r->note, sizeof r->note, "cudaMemcpyAsync: error %d", e);
				goto out;
			}
			r->bytes += 4.0 * (double)bytes;
			r->ops += 4;
		} while ((t = bench_now()) < t0 + min_seconds);
		r->seconds = t - t0;
	}
	r->ok = true;
	snprintf(r->note, sizeof r->note, "pinned, %zu KiB per copy", bytes >> 10);
out:
	if (stream)
		sdestroy(stream);
	if (dev)
		cfree(dev);
	if (registered)
		unreg(host);
	if (host != MAP_FAILED)
		munmap(host, bytes);
	if (lib)
		dlclose(lib);
	return 0;
}

/* --------------------------------------------------------- page cache */

void
bench_cache_check(const rf_dataset *ds, bool drop, bench_cache *c)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = rf_dataset_shards(ds);

	memset(c, 0, sizeof *c);
	c->dropped = drop;
	if (page <= 0)
		page = 4096;
	for (size_t i = 0; i < n; i++) {
		const char *path = rf_dataset_shard_path(ds, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			if (!c->note[0])
				snprintf(c->note, sizeof c->note, "%s: %s", path, strerror(errno));
			c->dropped = false;
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (drop) {
			/* Clean pages go at once; dirty ones (a file just written
			 * without fsync) stay until written back, which mincore
			 * below shows. */
			int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			if (e) {
				c->dropped = false;
				if (!c->note[0])
					snprintf(c->note, sizeof c->note, "%s: posix_fadvise: %s", path,
						 strerror(e));
			}
		}
		size_t len = (size_t)st.st_size, pages = (len + (size_t)page - 1) / (size_t)page;
		c->pages += pages;
		if (len) {
			void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
			unsigned char *vec = malloc(pages);
			if (map != MAP_FAILED && vec && mincore(map, len, vec) == 0) {
				for (size_t k = 0; k < pages; k++)
					c->resident += vec[k] & 1;
			} else if (!c->note[0]) {
				snprintf(c->note, sizeof c->note, "%s: mincore: %s", path,
					 strerror(errno));
			}
			free(vec);
			if (map != MAP_FAILED)
				munmap(map, len);
		}
		close(fd);
	}
	/* The advice can succeed and drop nothing (tmpfs, whose pages are the
	 * file): what stays resident says whether the run is cold. */
	if (drop && c->dropped && c->pages && c->resident * 2 > c->pages) {
		c->dropped = false;
		if (!c->note[0])
			snprintf(c->note, sizeof c->note, "%llu of %llu pages still resident after "
				 "posix_fadvise(DONTNEED): the file system keeps them (tmpfs?)",
				 (unsigned long long)c->resident, (unsigned long long)c->pages);
	}
}
