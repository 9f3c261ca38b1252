/* SPDX-License-Identifier: MIT */
/*
 * The settings: every check of rf_config (config_check, before anything is
 * opened; then what needs the dataset), the values resolved from it into
 * ld->resolved (W, the read mode, decode threads), the batch layout, and the
 * inputs of the memory plan (memplan.c), which is computed and logged here.
 */
#include "config.h"
#include "io/http.h"
#include "loader/internal.h"

#include <stdatomic.h>

/*
 * The process's default pinned budget.  A loader whose pinned_bytes is 0
 * takes at most RF_PINNED_DEFAULT of what the other such loaders of the
 * process leave of RF_PINNED_PROCESS, counted as the rings they allocated
 * (of the ring it runs at full speed with, memplan.c's lean plan): a
 * notebook's train and validation loaders fit side by side, twice over
 * when a cell is re-run, and one that does not fit fails at open, saying
 * who holds the budget, rather than page-locking another share.  The count belongs to
 * the process that made it: a child of fork() starts from 0 (the parent's
 * rings are not page-locked in it, and its copies of the parent's loaders
 * never free theirs), which the fork generation tells.  Lock-free: a fork
 * must not find a lock held.
 */
static _Atomic uint64_t default_pinned_used;
static atomic_uint default_pinned_gen;
static atomic_uint default_pinned_loaders;

/* Who holds the budget, for the message of the loader it is too small
 * for: the first few such loaders' first shard and ring bytes.  Read
 * without a lock (a message only: a loader closing meanwhile may be
 * named). */
#define DEFAULT_PINNED_NAMED 4
static struct {
	_Atomic(const rf_loader *) ld;
	_Atomic uint64_t bytes;
	char path[80];
} default_pinned_who[DEFAULT_PINNED_NAMED];

static void
default_pinned_sync(void)
{
	unsigned g = rf_fork_generation(), old = atomic_load(&default_pinned_gen);
	if (old != g && atomic_compare_exchange_strong(&default_pinned_gen, &old, g)) {
		atomic_store(&default_pinned_used, 0);
		atomic_store(&default_pinned_loaders, 0);
		for (unsigned i = 0; i < DEFAULT_PINNED_NAMED; i++)
			atomic_store(&default_pinned_who[i].ld, NULL);
	}
}

static void
default_pinned_name(const rf_loader *ld, uint64_t bytes)
{
	const char *p = ld->ds && rf_dataset_shards(ld->ds) ? rf_dataset_shard_path(ld->ds, 0)
							     : "a mixture";
	size_t n = strlen(p), cap = sizeof(default_pinned_who[0].path);
	for (unsigned i = 0; i < DEFAULT_PINNED_NAMED; i++) {
		const rf_loader *none = NULL;
		if (!atomic_compare_exchange_strong(&default_pinned_who[i].ld, &none, ld))
			continue;
		/* A long path keeps its end: the file's name. */
		snprintf(default_pinned_who[i].path, cap, "%s%s", n >= cap ? "..." : "",
			 n >= cap ? p + n - (cap - 4) : p);
		atomic_store(&default_pinned_who[i].bytes, bytes);
		return;
	}
}

/* The loaders holding the budget, as "PATH (SIZE), ...", into buf, and how
 * many more there are of `total` than are named. */
static void
default_pinned_names(char *buf, size_t cap, unsigned total)
{
	size_t o = 0;
	unsigned named = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < DEFAULT_PINNED_NAMED && o + 1 < cap; i++) {
		if (!atomic_load(&default_pinned_who[i].ld))
			continue;
		char sz[32];
		rf_memplan_fmt_size(sz, sizeof sz, atomic_load(&default_pinned_who[i].bytes));
		int w = snprintf(buf + o, cap - o, "%s%s (%s)", o ? ", " : "",
				 default_pinned_who[i].path, sz);
		if (w < 0)
			break;
		o += (size_t)w;
		named++;
	}
	if (named < total && o + 1 < cap) {
		int w = snprintf(buf + o, cap - o, "%sand %u more", o ? ", " : "", total - named);
		if (w > 0)
			o += (size_t)w;
	}
	if (o >= cap)
		buf[cap - 1] = '\0';
}

/* Take `bytes` of the process's default budget for ld: 0, or -1 when
 * another thread's open took it meanwhile. */
static int
default_pinned_take(rf_loader *ld, uint64_t bytes)
{
	uint64_t used = atomic_load(&default_pinned_used);
	do {
		if (used > RF_PINNED_PROCESS || bytes > RF_PINNED_PROCESS - used)
			return -1;
	} while (!atomic_compare_exchange_weak(&default_pinned_used, &used, used + bytes));
	atomic_fetch_add(&default_pinned_loaders, 1);
	ld->default_pinned = bytes;
	ld->default_pinned_gen = atomic_load(&default_pinned_gen);
	default_pinned_name(ld, bytes);
	return 0;
}

void
rf_ld_default_pinned_return(rf_loader *ld)
{
	/* Only to the count it was taken from (not a child's fresh one). */
	if (!ld->default_pinned || ld->default_pinned_gen != rf_fork_generation())
		return;
	atomic_fetch_sub(&default_pinned_used, ld->default_pinned);
	atomic_fetch_sub(&default_pinned_loaders, 1);
	for (unsigned i = 0; i < DEFAULT_PINNED_NAMED; i++) {
		const rf_loader *me = ld;
		atomic_compare_exchange_strong(&default_pinned_who[i].ld, &me, NULL);
	}
	ld->default_pinned = 0;
}

/* The default capacity of a variable field's region per batch: twice B
 * times the largest per-sample average of any chunk, so a batch of typical
 * samples fits with room for variance (the raw chunk bytes bound every
 * field's bytes in it). */
static int
default_var_bytes(rf_loader *ld, uint64_t *out)
{
	uint64_t per = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++) {
		const rf_chunk_info *ci = &ld->chunks[c];
		uint64_t a = (ci->raw_bytes + ci->samples - 1) / ci->samples;
		if (a > per)
			per = a;
	}
	uint64_t v;
	if (rf_mul_u64(per, 2ull * ld->cfg.batch_size, &v))
		return -1;
	if (v < 4096)
		v = 4096;
	*out = RF_ALIGN_UP(v, RF_BATCH_ALIGN);
	return 0;
}

/* Bytes the kernel reports as available for new work (MemAvailable), or 0
 * when /proc/meminfo cannot be read. */
static uint64_t
mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[256];
	unsigned long long kib = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

/*
 * direct = -1 (the default) chooses per open: O_DIRECT unless the dataset's
 * stored bytes are at most a quarter of the memory available now.  A
 * dataset that large would push the training program's own memory out of
 * the page cache, and every epoch would evict what the next one needs
 * first; a small one stays cached after the first epoch, and reading it
 * from the cache beats reading the disk every epoch.
 */
static void
choose_direct(rf_loader *ld)
{
	if (ld->resolved.direct >= 0)
		return;
	uint64_t stored = 0;
	for (uint64_t c = 0; c < ld->nchunks; c++)
		stored += ld->chunks[c].stored_bytes;
	uint64_t avail = mem_available();
	ld->resolved.direct = !(avail && stored <= avail / 4);
	char a[32], b[32];
	rf_memplan_fmt_size(a, sizeof a, stored);
	rf_memplan_fmt_size(b, sizeof b, avail);
	rf_log(&ld->diag, RF_LOG_INFO, "reads: %s (dataset %s, memory available %s)",
	       ld->resolved.direct ? "O_DIRECT" : "buffered, the dataset fits in the page cache",
	       a, b);
}

/* The CPUs this process may run on. */
static long
usable_cpus(void)
{
	cpu_set_t set;
	long n = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

int
rf_ld_has_remote(const rf_loader *ld)
{
	for (size_t i = 0; i < ld->nshards; i++)
		if (rf_is_url(rf_dataset_shard_path(ld->ds, i)))
			return 1;
	return 0;
}

/*
 * Maps for a dataset in file or chunk order that the library itself chose
 * to read through the page cache (direct = -1: it fits in memory), on 4
 * CPUs or more.  A read call copies cached pages on the reader's one
 * thread; through maps the decode workers copy chunks into the batches in
 * parallel.  16 CPUs, a 2 GiB set, 16 MiB batches to an H200 from Python:
 * 4.3-4.8 GB/s with read calls, 35.5-37.9 with maps, hot; a first epoch
 * from the disk 1.36-1.38 against 1.84-1.99 GB/s.  On 2 CPUs the reads
 * stay: a map's copy costs what the read call's does, and a batch can no
 * longer be handed out of its read slot (150 KiB samples: 21.8 against
 * 30.3 k samples/s).  Not for images, mixtures or remote shards; a map
 * asked for, or direct set, is the caller's choice.  RINGFEED_SEQ_MAP=0
 * or 1 overrides the CPU count (the test suites pin it to 0).
 */
static void
choose_seq_map(rf_loader *ld)
{
	if (ld->cfg.direct != -1 || ld->resolved.direct || ld->map.on || ld->image || ld->mix ||
	    (ld->resolved.shuffle != RF_SHUFFLE_NONE && ld->resolved.shuffle != RF_SHUFFLE_CHUNKS))
		return;
	const char *e = getenv("RINGFEED_SEQ_MAP");
	if (e && *e ? strcmp(e, "1") != 0 : usable_cpus() < 4)
		return;
	if (rf_ld_has_remote(ld))
		return;
	ld->map.on = 1;
	rf_log(&ld->diag, RF_LOG_INFO, "reads: chunks copied from maps of the shards by the "
	       "decode workers (the dataset fits in the page cache, %ld CPUs)", usable_cpus());
}

/* rf_config.tokens: *tok is the selected field to split into int32 inputs
 * and targets (UINT32_MAX: none), after the checks the header lists. */
static int
tokens_check(rf_loader *ld, const uint32_t *sel, uint32_t nsel, uint32_t *tok)
{
	const rf_config *cfg = &ld->cfg;
	const char *ds = rf_dataset_shard_path(ld->ds, 0);
	*tok = UINT32_MAX;
	if (cfg->tokens == RF_TOKENS_STORED)
		return 0;
	/* The layout and its combination with full shuffling: config_check. */
	for (uint32_t i = 0; i < nsel; i++) {
		const char *name = ld->schema->fields[sel[i]].name;
		if (!strcmp(name, "tokens"))
			*tok = i;
		else if (!strcmp(name, "inputs") || !strcmp(name, "targets"))
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout "
				       "names two fields 'inputs' and 'targets', but %s has a field '%s' "
				       "too: leave it out (rf_config.fields)", ds, name);
	}
	if (*tok == UINT32_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "a loaded field named 'tokens' (as `ringfeed pack --llmc` writes); %s "
			       "has none%s", ds, nsel < ld->schema->nfields ? " among the fields loaded" : "");
	const rf_field *f = &ld->schema->fields[sel[*tok]];
	if (!rf_token_field_ok(f))
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout needs "
			       "field 'tokens' of %s to hold T + 1 >= 2 tokens of u16, u32 or i32 per "
			       "sample (one fixed dimension); it is %s of %u dimension(s)%s", ds,
			       rf_dtype_name(f->dtype), f->rank, f->var_dim >= 0 ? ", variable" : "");
	if (nsel >= RF_MAX_FIELDS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout makes "
			       "one field two: load at most %d fields", RF_MAX_FIELDS - 1);
	return 0;
}

/* Decide the batch layout, then the memory plan (memplan.c) from it, the
 * dataset, the settings and the device, and log it. */
int
rf_ld_plan_memory(rf_loader *ld, const uint32_t *sel, uint32_t nsel)
{
	const rf_config *cfg = &ld->cfg;
	uint64_t var_cap = cfg->var_bytes;
	int has_var = 0;
	for (uint32_t i = 0; i < nsel; i++)
		has_var |= ld->schema->fields[sel[i]].var_dim >= 0;
	if (has_var && var_cap == 0 && default_var_bytes(ld, &var_cap) < 0)
		return rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: the variable-size region of "
			       "a batch overflows: lower batch_size or set var_bytes");
	/* The batch is sized from its delivered layout: with token parts,
	 * int32 inputs and targets rather than the stored tokens. */
	uint32_t tok;
	int rc = tokens_check(ld, sel, nsel, &tok);
	if (rc < 0)
		return rc;
	rc = tok < nsel ? rf_batch_layout_init_tokens(&ld->layout, ld->schema, sel, nsel, tok,
						      cfg->batch_size, var_cap, &ld->diag)
			: rf_batch_layout_init(&ld->layout, ld->schema, sel, nsel, cfg->batch_size,
					       var_cap, &ld->diag);
	if (rc < 0)
		return rc;
	rc = rf_ld_image_layout(ld);
	if (rc < 0)
		return rc;
	/* RINGFEED_HOST_COPY=1 copies into device buffers on a host-memory
	 * device too, as the cuda path does (to compare the two): a test-only
	 * switch (-Dtest_hooks). */
#if RF_TEST_HOOKS
	const char *hc = getenv("RINGFEED_HOST_COPY");
#else
	const char *hc = NULL;
#endif
	size_t fr = 0, tot = 0;
	struct rf_memplan_in in = {
		.layout = &ld->layout,
		.nfields = ld->schema->nfields,
		.max_span = rf_dataset_max_stored_span(ld->ds),
		.nchunks = ld->nchunks,
		.pinned_bytes = cfg->pinned_bytes,
		.batch_size = cfg->batch_size,
		.depth = ld->resolved.depth,
		.io_depth = ld->resolved.io_depth,
		.window = ld->mix ? rf_ld_mix_held_max(ld) : ld->full.window ? 0 : ld->resolved.window,
		.mix = ld->mix != NULL,
		.full = ld->full.on,
		.full_window = ld->full.on && ld->full.window,
		.map = ld->map.on,
		.direct = ld->resolved.direct,
		.sums = ld->full.sums,
		.workers = ld->nworkers,
		.worker_bytes = rf_ld_image_worker_bytes(ld),
		.worker_scratch = rf_ld_image_scratch_bound(ld),
		.host_memory = rf_device_has(ld->dev, RF_DEVICE_CAP_HOST_MEMORY) &&
			       !(hc && strcmp(hc, "1") == 0),
		.dev_desc = ld->dev->desc,
	};
	in.dev_free_known = ld->dev->ops->mem_info(ld->dev, &fr, &tot) == 0;
	in.dev_free = fr;
	uint64_t left = 0;
	unsigned others = 0;
	if (!cfg->pinned_bytes) {
		default_pinned_sync();
		uint64_t used = atomic_load(&default_pinned_used);
		others = atomic_load(&default_pinned_loaders);
		left = used < RF_PINNED_PROCESS ? RF_PINNED_PROCESS - used : 0;
		in.pinned_bytes = left < RF_PINNED_DEFAULT ? left : RF_PINNED_DEFAULT;
		in.lean = 1;
	}
	rc = rf_memplan_compute(&in, &ld->mem, &ld->diag);
	if (rc < 0 && ld->mix)
		rf_ld_mix_memplan_note(ld, in.window);
	if (rc == 0 && !cfg->pinned_bytes &&
	    default_pinned_take(ld, ld->mem.ring_bytes) < 0)
		rc = rf_fail(&ld->diag, RF_EMEMPLAN, "memory plan: another loader of this "
			     "process took the default pinned budget meanwhile");
	/* Blamed on the others only where they cut this loader's share. */
	if (rc < 0 && !cfg->pinned_bytes && others > 0 && left < RF_PINNED_DEFAULT) {
		char u[32], l[32], who[400], msg[sizeof(ld->diag.msg)];
		rf_memplan_fmt_size(u, sizeof u, RF_PINNED_PROCESS - left);
		rf_memplan_fmt_size(l, sizeof l, left);
		default_pinned_names(who, sizeof who, others);
		/* The plan's own words, less their "memory plan: ". */
		const char *why = ld->diag.msg;
		if (strncmp(why, "memory plan: ", 13) == 0)
			why += 13;
		snprintf(msg, sizeof msg, "%s", why);
		/* The plan's words are cut, if any: the fix must be read whole. */
#define BUDGET_FMT "memory plan: the process's default pinned budget (%u MiB, shared by " \
		   "the loaders with pinned_bytes 0) is spent: %u other loader(s) hold %s " \
		   "of it (%s), leaving %s, too little for this one (%.*s). Close one " \
		   "(Python: loader.close() or del loader; C: rf_loader_close). A re-run " \
		   "notebook cell `train = Loader(...)` builds the new loader while the old " \
		   "one still holds its share: `del train` or `train.close()` first. Or give " \
		   "this loader its own pinned_bytes"
		int rest = snprintf(NULL, 0, BUDGET_FMT, (unsigned)(RF_PINNED_PROCESS >> 20),
				    others, u, who, l, 0, "");
		int room = (int)sizeof(ld->diag.msg) - 1 - rest;
		return rf_fail(&ld->diag, rc, BUDGET_FMT, (unsigned)(RF_PINNED_PROCESS >> 20),
			       others, u, who, l, room > 0 ? room : 0, msg);
#undef BUDGET_FMT
	}
	if (rc < 0)
		return rc;
	char line[512];
	rf_memplan_describe(&in, &ld->mem, line, sizeof line);
	rf_log(&ld->diag, RF_LOG_INFO, "%s", line);
	return 0;
}

/* decode_threads = 0: a worker per CPU for compressed data (up to 8);
 * uncompressed chunks need only checksums and the copies into the batches,
 * memory-bound work that the workers share (the parallel fill, gather.c):
 * a worker per two CPUs from 4 CPUs (up to 8), the other half left to the
 * consumer; below 4, a second worker takes the core the consumer needs. */
static uint32_t
decode_threads_auto(int compressed)
{
	long n = usable_cpus();
	if (compressed)
		return n > 8 ? 8 : (uint32_t)n;
	if (n < 4)
		return 1;
	return n / 2 > 8 ? 8 : (uint32_t)(n / 2);
}

/*
 * Every check of the user's settings that needs no dataset, before
 * anything is opened, allocated, page-locked or started; the settings that
 * need the dataset (fields, tokens, full shuffling's needs, the resume blob,
 * the memory plan) are checked right after it is opened, still before the
 * ring is page-locked (loader_open).  The config is never changed: what is
 * resolved from it goes to ld->resolved.
 */
int
rf_ld_config_check(rf_loader *ld)
{
	const rf_config *cfg = &ld->cfg;
	if (cfg->sources || cfg->nsources) {
		int mrc = rf_ld_mix_config_check(ld);
		if (mrc < 0)
			return mrc;
	} else if (cfg->epoch_samples) {
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: epoch_samples %" PRIu64 " is for a "
			       "mixture (rf_config.sources); leave it 0 with paths", cfg->epoch_samples);
	} else if (cfg->npaths == 0 || !cfg->paths)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: no dataset paths given (paths %s, "
			       "npaths %zu)", cfg->paths ? "set" : "NULL", cfg->npaths);
	/* A count without its array is a mistake, not "the default". */
	if (!cfg->fields && cfg->nfields)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: nfields is %zu but fields is NULL "
			       "(NULL with nfields 0 loads every field)", cfg->nfields);
	if (!cfg->resume && cfg->resume_len)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: resume_len is %zu but resume is NULL",
			       cfg->resume_len);
	if (cfg->batch_size == 0)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: batch_size must be at least 1");
	if (cfg->depth > RF_DEPTH_MAX)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: depth %u is more than %d", cfg->depth,
			       RF_DEPTH_MAX);
	if (cfg->pinning != RF_PINNING_RING && cfg->pinning != RF_PINNING_TRANSIENT)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: pinning %d is not ring or transient",
			       (int)cfg->pinning);
	if (cfg->epochs && cfg->epoch > UINT64_MAX - cfg->epochs)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: epoch %" PRIu64 " + epochs %u "
			       "overflows the epoch counter", cfg->epoch, cfg->epochs);
	if (cfg->device != RF_DEVICE_AUTO && cfg->device != RF_DEVICE_HOST &&
	    cfg->device != RF_DEVICE_CUDA)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: device %d is not auto, host or cuda",
			       (int)cfg->device);
	if (cfg->tokens != RF_TOKENS_STORED && cfg->tokens != RF_TOKENS_INPUTS_TARGETS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: tokens = %d is not a token layout",
			       (int)cfg->tokens);

	/* A saved position continues in its own order: its shuffle mode (and
	 * window, unless one is set) shape the loader, so they are taken
	 * before it is laid out.  A blob that is not whole is refused when it
	 * is loaded, with the reason. */
	ld->resolved.shuffle = cfg->shuffle;
	enum rf_plan_mode rmode;
	uint32_t rwin;
	if (cfg->resume && rf_plan_state_peek(cfg->resume, cfg->resume_len, &rmode, &rwin) == 0)
		ld->resolved.shuffle = rf_ld_shuffle_of_mode(rmode);
	if ((unsigned)ld->resolved.shuffle > RF_SHUFFLE_FULL)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: shuffle %d is not none, chunks, window "
			       "or full", (int)ld->resolved.shuffle);
	int full = ld->resolved.shuffle == RF_SHUFFLE_FULL;
	if (cfg->map && cfg->direct == 1)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: map = 1 reads through the page "
			       "cache: it cannot be combined with direct = 1");
	if (cfg->inplace != RF_INPLACE_OFF && cfg->inplace != RF_INPLACE_ON)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: inplace %d is not off (0) or on (1)",
			       (int)cfg->inplace);
	if (cfg->on_error != RF_ON_ERROR_RAISE && cfg->on_error != RF_ON_ERROR_SKIP)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: on_error %d is not raise or skip",
			       (int)cfg->on_error);
	if (full && cfg->on_error == RF_ON_ERROR_SKIP)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: on_error skip drops and substitutes "
			       "whole chunks, which shuffle full (it reads samples) does not do: use "
			       "shuffle window, or on_error raise");
	if (full && cfg->tokens == RF_TOKENS_INPUTS_TARGETS)
		return rf_fail(&ld->diag, RF_EUSAGE, "loader: the inputs/targets token layout is "
			       "not available with shuffle full, which reads values straight into "
			       "the batch: use shuffle window");

	rf_diag_init(&ld->plan_diag, cfg->log, cfg->log_user);
	ld->plan_diag.errors_quiet = 1; /* each failure is passed on through ld->diag */
	ld->resolved.rank_source = "";
	int rc = rf_plan_resolve_rank(cfg->rank, cfg->world, NULL, NULL, &ld->resolved.rank,
				      &ld->resolved.world, &ld->resolved.rank_source,
				      &ld->plan_diag);
	if (rc < 0)
		return rf_fail(&ld->diag, rc, "%s", ld->plan_diag.msg);

	ld->resolved.depth = cfg->depth ? cfg->depth : 2;
	ld->resolved.io_depth = cfg->io_depth == 0 ? 32 : cfg->io_depth;
	if (ld->resolved.io_depth > RF_IO_DEPTH_MAX) /* what a ring is allocated for at open */
		ld->resolved.io_depth = RF_IO_DEPTH_MAX;
	ld->resolved.decode_threads = cfg->decode_threads > RF_DECODE_THREADS_MAX
					      ? RF_DECODE_THREADS_MAX : cfg->decode_threads;
	ld->resolved.seed = cfg->seed;
	ld->resolved.epoch = cfg->epoch;
	ld->full.on = full;
	ld->map.on = cfg->map && !full;
	ld->resolved.direct = ld->map.on ? 0 : cfg->direct;
	return 0;
}

/* The settings that depend on the dataset: W, the read mode, the decode
 * threads. */
int
rf_ld_resolve_settings(rf_loader *ld)
{
	const rf_config *cfg = &ld->cfg;
	if (ld->resolved.shuffle == RF_SHUFFLE_WINDOW) {
		/* The window is part of the order: a function of the dataset
		 * (and of rf_config.window, or the resume blob's) alone, which
		 * the ring must hold; never sized from the budget, which may
		 * differ between ranks. */
		uint32_t want = cfg->window;
		enum rf_plan_mode rmode;
		uint32_t rwin;
		if (want == 0 && cfg->resume &&
		    rf_plan_state_peek(cfg->resume, cfg->resume_len, &rmode, &rwin) == 0 &&
		    rmode == RF_PLAN_WINDOW)
			want = rwin;
		uint64_t raw = 0;
		for (uint64_t ci = 0; ci < ld->nchunks; ci++)
			raw += ld->chunks[ci].raw_bytes;
		uint64_t span = RF_ALIGN_UP(rf_dataset_max_stored_span(ld->ds), RF_FMT_ALIGN);
		uint32_t w = want ? want
				  : rf_plan_default_window(ld->nchunks ? raw / ld->nchunks : 0, span);
		uint32_t wnd = rf_plan_window_in_force(w, ld->nchunks);
		if (wnd > RF_WINDOW_MAX)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: window %u: at most %u chunks",
				       want, RF_WINDOW_MAX);
		ld->resolved.window = wnd;
	}
	choose_direct(ld);
	choose_seq_map(ld);
	rf_ld_window_choose_map(ld);
	/* Full shuffling from memory: a dataset read through the page cache
	 * (buffered, chosen above because it fits, or map asked for) is
	 * copied sample by sample from the mapped shards: a read call per
	 * sample costs more than the copy.  O_DIRECT keeps the reads. */
	if (ld->full.on) {
		ld->full.mem = cfg->map || !ld->resolved.direct;
		rf_log(&ld->diag, RF_LOG_INFO, "shuffle full: %s", ld->full.mem
		       ? "samples copied from the mapped shards (the dataset is read through "
			 "the page cache)"
		       : "one read per sample (O_DIRECT)");
	}
	/* Decode workers: a raw buffer each only when some chunk is compressed
	 * (ld->compressed, found here once for the open and the gather). */
	ld->compressed = 0;
	for (uint64_t c = 0; c < ld->nchunks && !ld->compressed; c++)
		ld->compressed = ld->chunks[c].codec != RF_CODEC_NONE;
	if (ld->resolved.decode_threads == 0)
		ld->resolved.decode_threads = decode_threads_auto(ld->compressed || ld->image);
	/* Window shuffling from read slots (O_DIRECT, or a remote shard): its
	 * gather is one thread in its turn, a copy per sample, and on two or
	 * three CPUs it was the loader's bound, at the disk's rate; a second
	 * worker checks the next chunk while the first gathers, off the turn
	 * (cold, 784 + 8 byte samples, 4 alternating pairs: +6 % to +29 %). */
	if (cfg->decode_threads == 0 && ld->resolved.shuffle == RF_SHUFFLE_WINDOW && !ld->mix &&
	    !ld->map.on && ld->resolved.decode_threads < 2 && usable_cpus() >= 2)
		ld->resolved.decode_threads = 2;
	ld->nworkers = ld->full.on ? 0 : ld->resolved.decode_threads; /* full: nothing to decode */
	return rf_ld_skip_setup(ld);
}

/* The fields, by name or all: their schema indices into sel. */
int
rf_ld_select_fields(rf_loader *ld, uint32_t *sel, uint32_t *nselp)
{
	const rf_config *cfg = &ld->cfg;
	uint32_t nsel = 0;
	if (cfg->fields) {
		if (cfg->nfields == 0 || cfg->nfields > RF_MAX_FIELDS)
			return rf_fail(&ld->diag, RF_EUSAGE, "loader: %zu fields selected (1..%d)",
				       cfg->nfields, RF_MAX_FIELDS);
		for (size_t i = 0; i < cfg->nfields; i++) {
			int k = cfg->fields[i] ? rf_schema_find(ld->schema, cfg->fields[i]) : -1;
			if (k < 0) {
				/* The names there are, so a typo shows at once. */
				char have[256];
				size_t o = 0;
				have[0] = 0;
				for (uint32_t f = 0; f < ld->schema->nfields; f++) {
					int w = snprintf(have + o, sizeof(have) - o, "%s%s",
							 f ? ", " : "", ld->schema->fields[f].name);
					if (w < 0 || (size_t)w >= sizeof(have) - o) {
						snprintf(have + (o < sizeof(have) - 6 ? o : sizeof(have) - 6),
							 6, ", ...");
						break;
					}
					o += (size_t)w;
				}
				return rf_fail(&ld->diag, RF_EUSAGE, "loader: no field named '%s' in %s; "
					       "its fields are: %s",
					       cfg->fields[i] ? cfg->fields[i] : "(null)",
					       rf_dataset_shard_path(ld->ds, 0), have);
			}
			for (uint32_t j = 0; j < nsel; j++)
				if (sel[j] == (uint32_t)k)
					return rf_fail(&ld->diag, RF_EUSAGE,
						       "loader: field '%s' selected twice", cfg->fields[i]);
			sel[nsel++] = (uint32_t)k;
		}
	} else {
		for (uint32_t i = 0; i < ld->schema->nfields; i++)
			sel[nsel++] = i;
	}
	for (uint32_t i = 0; i < nsel; i++)
		ld->nvar += ld->schema->fields[sel[i]].var_dim >= 0;
	*nselp = nsel;
	return 0;
}
