/* SPDX-License-Identifier: MIT */
/*
 * The loader tests' `gpu` mode (the gpu suite, tests/gpu): the CUDA backend
 * on whatever runtime is loaded, a GPU's included.  Device memory is never
 * read from the host: a batch is copied back on the test's stream after its
 * ready event, and checked there.  No emulator counter or option is used.
 *
 * The `cuda` mode (the cudart emulator) copies batches back the same way,
 * through the runtime RINGFEED_CUDART names, on the default stream: the
 * emulator's device pointers fault on the host as a GPU's do.
 */
#ifndef LT_GPU_H
#define LT_GPU_H

#include "lt.h"
#include "../common/rf_gpu.h"
#include "../cuda-emulator/emulator.h"

static struct rf_gpu lt_gpu;
static void *lt_gpu_stream;
static int lt_gpu_on;
/* Batches are in device memory (cuda or gpu): set by lt_backend; a test that
 * picks the CUDA backend itself sets it. */
static int lt_on_device;

/* argv[1] "gpu": loads the runtime and makes a stream.  Returns 0, or
 * LT_SKIP (reason printed) when there is no device, or 1 on an error. */
static inline int
lt_gpu_init(void)
{
	char why[1024] = "";
	if (rf_gpu_load(&lt_gpu, why, sizeof(why)) <= 0) {
		fprintf(stderr, "skipped: %s\n", why);
		return LT_SKIP;
	}
	fprintf(stderr, "runtime %s%s\n", lt_gpu.path, lt_gpu.emulated ? " (emulator)" : "");
	if (lt_gpu.stream_create(&lt_gpu_stream) != 0)
		return 1;
	lt_gpu_on = 1;
	return 0;
}

/* The backend argv[1] names: none or "host", "cuda" (the cudart emulator,
 * whose API is loaded into emu) or "gpu" (a real device, lt_gpu_init).
 * Sets *use_cuda for both CUDA backends.  Returns 0, or the status to exit
 * with: LT_SKIP when the backend is not there, 1 on an error. */
static inline int
lt_backend(int argc, char **argv, struct rfemu_api *emu, int *use_cuda)
{
	*use_cuda = argc > 1 && (!strcmp(argv[1], "cuda") || !strcmp(argv[1], "gpu"));
	lt_on_device = *use_cuda;
	if (argc > 1 && !strcmp(argv[1], "gpu"))
		return lt_gpu_init();
	if (*use_cuda && rfemu_api_load(emu, NULL) != 0) {
		fprintf(stderr, "RINGFEED_CUDART is not the cudart emulator: skipped\n");
		return LT_SKIP;
	}
	return 0;
}

/* The emulator's counters after a test: no hazard (each one named), no
 * device memory left; with `all`, nothing registered and no stream or event
 * left either. */
static inline void
lt_emu_clean(struct rfemu_api *emu, int all)
{
	struct rfemu_counters c;
	memset(&c, 0, sizeof(c));
	LT_CHECK(emu->get_counters(&c, sizeof(c)) == 0);
	for (int k = 0; k < RFEMU_HAZARD_COUNT; k++)
		if (c.hazards[k])
			fprintf(stderr, "hazard %s: %llu\n", emu->hazard_name(k),
				(unsigned long long)c.hazards[k]);
	LT_CHECK(c.hazards_total == 0);
	LT_CHECK(c.device_bytes == 0 && c.live_allocations == 0);
	if (all)
		LT_CHECK(c.registered_bytes == 0 && c.live_streams == 0 && c.live_events == 0);
}

static inline void
lt_gpu_fini(void)
{
	if (lt_gpu_on)
		LT_CHECK(lt_gpu.stream_destroy(lt_gpu_stream) == 0);
}

/* A batch copied back to the host: `b` has the batch's metadata with host
 * pointers (256-byte aligned, as the loader's). */
struct lt_host_batch {
	rf_batch b;
	rf_batch_field f[16];
	void *bufs[16];
	int64_t *offs[16];
	uint64_t bad; /* misaligned device pointers, offsets differing from host_offsets */
};

static inline void
lt_host_batch_free(struct lt_host_batch *h)
{
	for (int f = 0; f < 16; f++) {
		free(h->bufs[f]);
		free(h->offs[f]);
	}
}

/* The runtime for copies back outside gpu mode (the emulator's tests):
 * loaded at the first use, no stream of its own. */
static inline int
lt_gpu_runtime(void)
{
	char why[1024] = "";
	if (lt_gpu.handle)
		return 0;
	if (rf_gpu_load(&lt_gpu, why, sizeof(why)) <= 0) {
		fprintf(stderr, "copying a batch back: %s\n", why);
		return -1;
	}
	return 0;
}

/* Copies a batch in device memory back: on the test's stream in gpu mode,
 * else on the default stream, after the batch's ready event either way. */
static inline void
lt_gpu_to_host(const rf_batch *b, struct lt_host_batch *h)
{
	void *st = lt_gpu_on ? lt_gpu_stream : NULL;
	memset(h, 0, sizeof(*h));
	h->b = *b;
	h->b.fields = h->f;
	LT_CHECK(b->nfields <= 16);
	if (lt_gpu_runtime() != 0) {
		h->bad++;
		h->b.nfields = 0;
		return;
	}
	LT_CHECK(rf_batch_wait(b, st) == 0);
	for (uint32_t f = 0; f < b->nfields && f < 16; f++) {
		const rf_batch_field *bf = &b->fields[f];
		h->f[f] = *bf;
		if ((uintptr_t)bf->data % 256)
			h->bad++;
		h->bufs[f] = aligned_alloc(256, (bf->bytes + 255) / 256 * 256 + 256);
		LT_CHECK(h->bufs[f] != NULL);
		if (bf->bytes)
			LT_CHECK(lt_gpu.memcpy_async(h->bufs[f], bf->data, bf->bytes, RF_GPU_D2H,
						     st) == 0);
		h->f[f].data = h->bufs[f];
		if (bf->offsets) {
			h->offs[f] = malloc((b->samples + 1) * 8);
			LT_CHECK(h->offs[f] != NULL);
			LT_CHECK(lt_gpu.memcpy_async(h->offs[f], bf->offsets, (b->samples + 1) * 8,
						     RF_GPU_D2H, st) == 0);
			h->f[f].offsets = h->offs[f];
		}
	}
	LT_CHECK(lt_gpu.stream_synchronize(st) == 0);
	for (uint32_t f = 0; f < b->nfields && f < 16; f++)
		if (h->offs[f] && b->fields[f].host_offsets &&
		    memcmp(h->offs[f], b->fields[f].host_offsets, (b->samples + 1) * 8) != 0)
			h->bad++;
}

/* lt_check_batch on the batch's bytes wherever they are: in place on the
 * host backend, copied back from device memory (cuda, gpu). */
static inline uint64_t
lt_check_batch_any(const rf_batch *b, uint64_t first)
{
	if (!lt_gpu_on && !lt_on_device)
		return lt_check_batch(b, first);
	struct lt_host_batch h;
	lt_gpu_to_host(b, &h);
	uint64_t bad = h.bad + lt_check_batch(&h.b, first);
	lt_host_batch_free(&h);
	return bad;
}

/* lt_check_batch on a batch in the emulator's device memory, read through
 * its view of it (rfemu_device_view) rather than copied back: no copy, so
 * no time on the simulated link, for tests that measure it.  The batch's
 * copy must have finished (rf_loader_next hands batches out after it). */
static inline uint64_t
lt_check_batch_emu(const struct rfemu_api *emu, const rf_batch *b, uint64_t first)
{
	rf_batch v = *b;
	rf_batch_field f[16];
	uint64_t bad = 0;
	if (b->nfields > 16)
		return 1;
	for (uint32_t i = 0; i < b->nfields; i++) {
		const rf_batch_field *bf = &b->fields[i];
		f[i] = *bf;
		if (bf->bytes && !(f[i].data = emu->device_view(bf->data, bf->bytes)))
			bad++;
		if (bf->offsets &&
		    !(f[i].offsets = emu->device_view(bf->offsets, (b->samples + 1) * 8)))
			bad++;
	}
	v.fields = f;
	return bad ? bad : lt_check_batch(&v, first);
}

#endif /* LT_GPU_H */
