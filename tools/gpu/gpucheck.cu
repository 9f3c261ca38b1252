// SPDX-License-Identifier: MIT
//
// gpucheck: the CUDA side of the GPU kit (tools/gpu/run).  One JSON object
// on stdout per command; exit 0 done, 1 a check failed or an error, 77 no
// CUDA device (the kit reports the step as skipped).
//
//   gpucheck info                       device, memory, driver and runtime
//   gpucheck copy SIZE_MIB...           pinned cudaMemcpyAsync host-to-device
//                                       GB/s at each size (the copy limit)
//   gpucheck pack PATH BYTES SAMPLE_BYTES
//                                       a dataset of one u64 field whose
//                                       words are a function of (sample, k)
//   gpucheck stream PATH [options]      the loader on the device, every batch
//                                       checksummed by a kernel against the
//                                       host's expected value
//       --batch-mib M    batch bytes (samples of the dataset's size), default 16
//       --depth D        device buffers (default 2)
//       --pin ring|transient
//       --step-us U      a kernel spinning U us per batch after the checksum
//                        (the training step); 0: none
//       --leave-mib L    first fill device memory until L MiB are free
//       --seconds S      stop after S seconds (0: one epoch)
//
// The dataset's word k of sample s is rf_word(s, k) (splitmix64); a batch's
// checksum is sum over rows r and words k of word * (k % 251 + 1) * (r + 1)
// mod 2^64, so a wrong byte, a swapped row or a wrong batch changes it.
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#define SKIP 77

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

__host__ __device__ static inline uint64_t
rf_word(uint64_t s, uint64_t k)
{
	uint64_t z = (s << 32) + k + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// One block per row: sum of word * (k % 251 + 1), times (row + 1), added to *out.
__global__ void
checksum_kernel(const uint64_t *data, uint64_t words, uint32_t rows, unsigned long long *out)
{
	__shared__ unsigned long long part[256];
	uint32_t r = blockIdx.x;
	if (r >= rows)
		return;
	const uint64_t *row = data + (uint64_t)r * words;
	unsigned long long acc = 0;
	for (uint64_t k = threadIdx.x; k < words; k += blockDim.x)
		acc += row[k] * (k % 251 + 1);
	part[threadIdx.x] = acc;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			part[threadIdx.x] += part[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(out, part[0] * (unsigned long long)(r + 1));
}

// A training step of known duration: spins on the global timer.
__global__ void
spin_kernel(uint64_t ns)
{
	uint64_t t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
}

static uint64_t
host_row_sum(uint64_t s, uint64_t words)
{
	uint64_t acc = 0;
	for (uint64_t k = 0; k < words; k++)
		acc += rf_word(s, k) * (k % 251 + 1);
	return acc;
}

static int
no_device(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n <= 0) {
		printf("{\"skipped\": true, \"why\": \"no CUDA device: %s\"}\n",
		       e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
		return 1;
	}
	return 0;
}

#define CK(x) do { \
		cudaError_t e_ = (x); \
		if (e_ != cudaSuccess) { \
			fprintf(stderr, "gpucheck: %s: %s\n", #x, cudaGetErrorString(e_)); \
			printf("{\"error\": \"%s: %s\"}\n", #x, cudaGetErrorName(e_)); \
			return 1; \
		} \
	} while (0)

static int
cmd_info(void)
{
	if (no_device())
		return SKIP;
	int dev = 0, drv = 0, rt = 0, n = 0;
	cudaGetDeviceCount(&n);
	CK(cudaSetDevice(dev));
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, dev));
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	printf("{\"devices\": %d, \"name\": \"%s\", \"cc\": \"%d.%d\", \"sms\": %d, "
	       "\"total_bytes\": %zu, \"free_bytes\": %zu, \"driver_version\": %d, "
	       "\"runtime_version\": %d}\n",
	       n, p.name, p.major, p.minor, p.multiProcessorCount, tot, fr, drv, rt);
	return 0;
}

static int
cmd_copy(int argc, char **argv)
{
	if (no_device())
		return SKIP;
	printf("{\"host_to_device_pinned\": [");
	for (int i = 0; i < argc; i++) {
		size_t bytes = (size_t)atof(argv[i]) * (1 << 20);
		void *h = NULL, *d = NULL;
		cudaStream_t s;
		cudaEvent_t e0, e1;
		CK(cudaHostAlloc(&h, bytes, cudaHostAllocDefault));
		memset(h, 1, bytes);
		CK(cudaMalloc(&d, bytes));
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		CK(cudaEventCreate(&e0));
		CK(cudaEventCreate(&e1));
		CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s)); // warm up
		CK(cudaStreamSynchronize(s));
		int reps = (int)((2ull << 30) / bytes);
		if (reps < 8)
			reps = 8;
		CK(cudaEventRecord(e0, s));
		for (int r = 0; r < reps; r++)
			CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		float ms = 0;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		double gbps = (double)bytes * reps / (ms * 1e-3) / 1e9;
		printf("%s{\"mib\": %s, \"gb_per_s\": %.3f, \"reps\": %d}", i ? ", " : "", argv[i],
		       gbps, reps);
		cudaEventDestroy(e0);
		cudaEventDestroy(e1);
		cudaStreamDestroy(s);
		cudaFree(d);
		cudaFreeHost(h);
	}
	printf("]}\n");
	return 0;
}

static int
cmd_pack(const char *path, uint64_t bytes, uint64_t sample_bytes)
{
	uint64_t words = sample_bytes / 8;
	uint64_t n = bytes / (words * 8);
	if (!words || !n) {
		fprintf(stderr, "gpucheck pack: nothing to write\n");
		return 1;
	}
	rf_schema schema;
	memset(&schema, 0, sizeof(schema));
	uint64_t shape[1] = {words};
	if (rf_schema_add(&schema, "w", RF_DTYPE_U64, 1, shape, -1) < 0)
		return 1;
	rf_writer_config cfg;
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = 4 << 20;
	cfg.no_fsync = 1;
	rf_writer *w = NULL;
	int rc = rf_writer_open(&w, path, &schema, &cfg);
	if (rc < 0) {
		fprintf(stderr, "gpucheck pack: %s: %s\n", path, rf_writer_last_error());
		return 1;
	}
	std::vector<uint64_t> buf(words);
	double t0 = now_s();
	for (uint64_t s = 0; s < n && rc >= 0; s++) {
		for (uint64_t k = 0; k < words; k++)
			buf[k] = rf_word(s, k);
		rf_value v = {buf.data(), words * 8};
		rc = rf_writer_add(w, &v);
	}
	if (rc < 0) {
		fprintf(stderr, "gpucheck pack: %s\n", rf_writer_errmsg(w));
		rf_writer_abort(&w);
		return 1;
	}
	rc = rf_writer_close(&w);
	if (rc < 0) {
		fprintf(stderr, "gpucheck pack: close: %s\n", rf_strerror(rc));
		return 1;
	}
	printf("{\"path\": \"%s\", \"samples\": %llu, \"sample_bytes\": %llu, \"bytes\": %llu, "
	       "\"seconds\": %.2f}\n",
	       path, (unsigned long long)n, (unsigned long long)(words * 8),
	       (unsigned long long)(n * words * 8), now_s() - t0);
	return 0;
}

static int
cmd_stream(const char *path, int argc, char **argv)
{
	double batch_mib = 16, seconds = 0, step_us = 0, leave_mib = 0;
	unsigned depth = 2;
	int transient = 0;
	for (int i = 0; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--batch-mib"))
			batch_mib = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--depth"))
			depth = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--pin"))
			transient = !strcmp(argv[i + 1], "transient");
		else if (!strcmp(argv[i], "--step-us"))
			step_us = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--leave-mib"))
			leave_mib = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else {
			fprintf(stderr, "gpucheck stream: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (no_device())
		return SKIP;
	CK(cudaSetDevice(0));
	CK(cudaFree(0)); // the primary context, before anything is measured

	// Memory taken first, as by a model: device memory filled down to
	// leave_mib free.
	std::vector<void *> fill;
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	if (leave_mib > 0) {
		size_t leave = (size_t)(leave_mib * (1 << 20));
		size_t piece = (size_t)256 << 20;
		while (fr > leave + piece / 2) {
			size_t take = fr - leave < piece ? fr - leave : piece;
			void *p = NULL;
			if (cudaMalloc(&p, take) != cudaSuccess) {
				cudaGetLastError();
				if (piece <= (16 << 20))
					break;
				piece /= 2;
				continue;
			}
			fill.push_back(p);
			CK(cudaMemGetInfo(&fr, &tot));
		}
	}
	size_t free_before = fr;

	rf_dataset *ds = NULL;
	const char *paths[1] = {path};
	if (rf_dataset_open(&ds, paths, 1, NULL) < 0) {
		fprintf(stderr, "gpucheck stream: cannot open %s\n", path);
		return 1;
	}
	uint64_t nsamples = rf_dataset_samples(ds);
	const rf_schema *schema = rf_dataset_schema(ds);
	uint64_t words = schema->fields[0].shape[0];
	rf_dataset_close(&ds);
	uint32_t batch = (uint32_t)(batch_mib * (1 << 20) / (words * 8));
	if (batch < 1)
		batch = 1;

	// The host's expected per-row sums, computed once.
	std::vector<uint64_t> rowsum(nsamples);
	for (uint64_t s = 0; s < nsamples; s++)
		rowsum[s] = host_row_sum(s, words);

	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.batch_size = batch;
	cfg.depth = depth;
	cfg.device = RF_DEVICE_CUDA;
	cfg.pinning = transient ? RF_PINNING_TRANSIENT : RF_PINNING_RING;
	cfg.pinned_bytes = (uint64_t)batch * words * 8 * 8 + (64 << 20);
	if (cfg.pinned_bytes < ((uint64_t)256 << 20))
		cfg.pinned_bytes = (uint64_t)256 << 20;
	cfg.epochs = seconds > 0 ? 0 : 1;
	rf_loader *ld = NULL;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		printf("{\"error\": \"open: %s: %s\"}\n", rf_strerror(rc), rf_loader_last_open_error());
		return 1;
	}
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	const int NS = 64; // results in flight
	unsigned long long *dsum = NULL, *hsum = NULL;
	CK(cudaMalloc(&dsum, NS * sizeof(*dsum)));
	CK(cudaHostAlloc(&hsum, NS * sizeof(*hsum), cudaHostAllocDefault));
	// done[slot]: the batch's work ended; began[slot]: it started, after the
	// wait for its copy.  The GPU waited for data between one batch's end
	// and the next one's start: busy is the sum of (done - began).
	cudaEvent_t done[NS], began[NS], g0, g1;
	for (int i = 0; i < NS; i++) {
		CK(cudaEventCreate(&done[i]));
		CK(cudaEventCreate(&began[i]));
	}
	double busy = 0;
	// Each wait between batches (one batch's end to the next one's start),
	// in us, for where the GPU's waiting lies: the start, a few long
	// hiccups, or a little every batch.
	std::vector<double> gaps;
	double prev_done = -1;
	auto account = [&](int slot) -> int {
		float b0 = 0, d0 = 0;
		CK(cudaEventElapsedTime(&b0, g0, began[slot]));
		CK(cudaEventElapsedTime(&d0, g0, done[slot]));
		busy += (d0 - b0) * 1e-3;
		if (prev_done >= 0)
			gaps.push_back((b0 - prev_done) * 1e3);
		prev_done = d0;
		return 0;
	};
	CK(cudaEventCreate(&g0));
	CK(cudaEventCreate(&g1));
	std::vector<uint64_t> want(NS);
	uint64_t batches = 0, samples = 0, bad = 0, bytes = 0, checked = 0;
	size_t free_min = SIZE_MAX, free_max = 0;
	double t0 = now_s(), t_first = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		int slot = (int)(batches % NS);
		if (batches >= (uint64_t)NS) { // the result of batch - NS
			CK(cudaEventSynchronize(done[slot]));
			bad += hsum[slot] != want[slot];
			checked++;
			if (account(slot))
				return 1;
		}
		uint64_t w = 0;
		for (uint32_t r = 0; r < b->samples; r++)
			w += rowsum[b->first_sample + r] * (uint64_t)(r + 1);
		want[slot] = w;
		if (rf_batch_wait(b, st) < 0) {
			printf("{\"error\": \"rf_batch_wait: %s\"}\n", rf_loader_errmsg(ld));
			return 1;
		}
		if (batches == 0) {
			CK(cudaEventRecord(g0, st));
			t_first = now_s();
		}
		CK(cudaEventRecord(began[slot], st));
		CK(cudaMemsetAsync(dsum + slot, 0, sizeof(*dsum), st));
		checksum_kernel<<<b->samples, 256, 0, st>>>((const uint64_t *)b->fields[0].data, words,
							     b->samples, dsum + slot);
		if (step_us > 0)
			spin_kernel<<<1, 1, 0, st>>>((uint64_t)(step_us * 1000));
		CK(cudaGetLastError());
		CK(cudaMemcpyAsync(hsum + slot, dsum + slot, sizeof(*dsum), cudaMemcpyDeviceToHost, st));
		CK(cudaEventRecord(done[slot], st));
		if (rf_loader_release(ld, b, st) < 0) {
			printf("{\"error\": \"release: %s\"}\n", rf_loader_errmsg(ld));
			return 1;
		}
		batches++;
		samples += b->samples;
		bytes += b->fields[0].bytes;
		size_t f = 0, t = 0;
		if ((batches & 7) == 1 && cudaMemGetInfo(&f, &t) == cudaSuccess) {
			free_min = f < free_min ? f : free_min;
			free_max = f > free_max ? f : free_max;
		}
		if (seconds > 0 && now_s() - t0 >= seconds)
			break;
	}
	if (rc < 0) {
		printf("{\"error\": \"next: %s\"}\n", rf_loader_errmsg(ld));
		return 1;
	}
	CK(cudaEventRecord(g1, st));
	CK(cudaStreamSynchronize(st));
	double wall = now_s() - t0, steady = now_s() - t_first;
	for (uint64_t i = batches > (uint64_t)NS ? batches - NS : 0; i < batches; i++) {
		int slot = (int)(i % NS);
		bad += hsum[slot] != want[slot];
		checked++;
		if (account(slot))
			return 1;
	}
	float gpu_ms = 0;
	CK(cudaEventElapsedTime(&gpu_ms, g0, g1));
	rf_stats s;
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	rf_loader_stats(ld, &s);
	double gpu_span = gpu_ms * 1e-3;
	double gpu_stall = step_us > 0 && gpu_span > 0 ? 1.0 - busy / gpu_span : -1;
	std::vector<double> sg(gaps);
	std::sort(sg.begin(), sg.end());
	double gap_first = 0, gap_over = 0;
	for (size_t i = 0; i < gaps.size() && i < 16; i++)
		gap_first += gaps[i];
	for (double g : gaps)
		gap_over += g > 100 ? g : 0;
	auto pct = [&](double q) { return sg.empty() ? 0.0 : sg[(size_t)(q * (sg.size() - 1))]; };
	if (gpu_stall < 0 && step_us > 0)
		gpu_stall = 0;
	printf("{\"batches\": %llu, \"samples\": %llu, \"dataset_samples\": %llu, "
	       "\"batch_samples\": %u, \"batch_bytes\": %llu, \"bytes\": %llu, \"seconds\": %.4f, "
	       "\"gb_per_s\": %.4f, \"per_batch_us\": %.2f, \"checked\": %llu, \"bad\": %llu, "
	       "\"step_us\": %.1f, \"gpu_span_s\": %.4f, \"gpu_busy_s\": %.4f, "
	       "\"gpu_stall_share\": %.5f, \"gap_us_p50\": %.1f, \"gap_us_p99\": %.1f, "
	       "\"gap_us_max\": %.1f, \"gap_us_first16\": %.1f, \"gap_us_over100\": %.1f, "
	       "\"loader_stall_share\": %.5f, \"depth\": %u, \"pinning\": \"%s\", "
	       "\"device_peak\": %llu, \"device_expected\": %llu, \"free_before\": %zu, "
	       "\"free_min\": %zu, \"free_max\": %zu, \"filled_bytes\": %zu}\n",
	       (unsigned long long)batches, (unsigned long long)samples,
	       (unsigned long long)nsamples, batch, (unsigned long long)s.batch_bytes,
	       (unsigned long long)bytes, wall, bytes / steady / 1e9,
	       batches ? steady / batches * 1e6 : 0.0, (unsigned long long)checked,
	       (unsigned long long)bad, step_us, gpu_span, busy, gpu_stall, pct(0.5),
	       pct(0.99), pct(1.0), gap_first, gap_over, s.stall_share, depth,
	       transient ? "transient" : "ring", (unsigned long long)s.device_peak,
	       (unsigned long long)depth * s.batch_bytes, free_before,
	       free_min == SIZE_MAX ? 0 : free_min, free_max, fill.size() ? tot - free_before : 0);
	rf_loader_close(&ld);
	for (int i = 0; i < NS; i++) {
		cudaEventDestroy(done[i]);
		cudaEventDestroy(began[i]);
	}
	cudaFree(dsum);
	cudaFreeHost(hsum);
	cudaStreamDestroy(st);
	for (void *p : fill)
		cudaFree(p);
	int ok = bad == 0 && checked == batches && (seconds > 0 || samples == nsamples) &&
		 s.device_peak == (uint64_t)depth * s.batch_bytes;
	return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gpucheck info|copy|pack|stream ...\n");
		return 2;
	}
	if (!strcmp(argv[1], "info"))
		return cmd_info();
	if (!strcmp(argv[1], "copy"))
		return cmd_copy(argc - 2, argv + 2);
	if (!strcmp(argv[1], "pack") && argc == 5)
		return cmd_pack(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0));
	if (!strcmp(argv[1], "stream") && argc >= 3)
		return cmd_stream(argv[2], argc - 3, argv + 3);
	fprintf(stderr, "usage: gpucheck info|copy|pack|stream ...\n");
	return 2;
}
