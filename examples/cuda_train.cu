// SPDX-License-Identifier: MIT
/*
 * A CUDA training loop fed by ringfeed: every batch lands in device memory
 * and a kernel consumes it on the program's own stream, with no host copy
 * and no synchronisation in the loop.  The "training step" is a stand-in
 * that reads every byte of one field: a kernel that sums them into a
 * device counter (a real program launches its forward/backward here).
 *
 *     cuda_train [--auto] [--field NAME] [--batch B] [--epochs E] PATH...
 *
 * The loop is the one the header documents:
 *     rf_loader_next -> rf_batch_wait(b, stream)   (the stream waits for the
 *     copy; the host does not) -> kernel<<<..., stream>>> ->
 *     rf_loader_release(ld, b, stream)   (the buffer is refilled only once
 *     the kernel queued before it has run).
 *
 * Build (the loader takes the CUDA runtime that is already loaded, so link
 * it shared; the run path finds a libringfeed installed outside the
 * loader's search path):
 *     nvcc -cudart shared -o cuda_train cuda_train.cu $(pkg-config --cflags --libs ringfeed) \
 *         -Xlinker -rpath -Xlinker $(pkg-config --variable=libdir ringfeed)
 *
 * It prints the batches, the samples and the byte sum of the field, which a
 * check can compare with a host-side sum of the same data.
 */
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <ringfeed/ringfeed.h>

// Sum of n bytes into *total (one atomic per thread, after a grid-stride
// loop): every byte of the batch's field is read on the device.
__global__ void
byte_sum(const unsigned char *data, uint64_t n, unsigned long long *total)
{
	unsigned long long s = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		s += data[i];
	if (s)
		atomicAdd(total, s);
}

static void
log_cb(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if (level <= RF_LOG_WARN)
		fprintf(stderr, "ringfeed: %s\n", msg);
}

static int
cuda_ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 1;
	fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
	return 0;
}

int
main(int argc, char **argv)
{
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.batch_size = 64;
	cfg.epochs = 1;
	// Device memory or nothing: RF_DEVICE_CUDA fails at open (RF_ENODEVICE)
	// where RF_DEVICE_AUTO would hand host pointers to the kernel.
	cfg.device = RF_DEVICE_CUDA;
	cfg.log = log_cb;
	const char *field_name = NULL;
	static const char *paths[64];
	size_t npaths = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--auto"))
			cfg.device = RF_DEVICE_AUTO;
		else if (!strcmp(argv[i], "--field") && i + 1 < argc)
			field_name = argv[++i];
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			cfg.batch_size = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
			cfg.epochs = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (npaths < 64)
			paths[npaths++] = argv[i];
	}
	if (!npaths) {
		fprintf(stderr, "usage: cuda_train [--auto] [--field NAME] [--batch B] "
				"[--epochs E] PATH...\n");
		return 2;
	}
	cfg.paths = paths;
	cfg.npaths = npaths;
	const char *fields[1] = {field_name};
	if (field_name) {
		cfg.fields = fields;
		cfg.nfields = 1;
	}

	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s (%s)\n", rf_loader_last_open_error(), rf_strerror(rc));
		return 1;
	}
	// With RF_DEVICE_AUTO the loader falls back to host memory when there
	// is no usable GPU: the stats say where batches go (-1: the host).
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	if (rf_loader_stats(ld, &st) == 0 && st.device_ordinal < 0) {
		fprintf(stderr, "no GPU: batches would be in host memory (%s)\n", st.device);
		rf_loader_close(&ld);
		return 1;
	}

	cudaStream_t stream;
	unsigned long long *d_total = NULL;
	if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream") ||
	    !cuda_ok(cudaMalloc((void **)&d_total, sizeof *d_total), "cudaMalloc") ||
	    !cuda_ok(cudaMemsetAsync(d_total, 0, sizeof *d_total, stream), "memset")) {
		rf_loader_close(&ld);
		return 1;
	}

	uint64_t batches = 0, samples = 0;
	int failed = 0;
	for (;;) {
		const rf_batch *b;
		rc = rf_loader_next(ld, &b);        // blocks until a batch is ready
		if (rc < 0 || !b)                   // an error, or the end of the last epoch
			break;
		rc = rf_batch_wait(b, stream);      // the stream waits for the copy
		if (rc < 0)
			break;
		const rf_batch_field *f = &b->fields[0];
		unsigned blocks = (unsigned)((f->bytes + 255) / 256);
		if (blocks > 1024)
			blocks = 1024;
		if (blocks)
			byte_sum<<<blocks, 256, 0, stream>>>(
				static_cast<const unsigned char *>(f->data), f->bytes, d_total);
		if (!cuda_ok(cudaGetLastError(), "launch"))
			failed = 1;
		batches++;
		samples += b->samples;
		// Refilled only after the kernel queued above has run.
		rc = rf_loader_release(ld, b, stream);
		if (rc < 0 || failed)
			break;
	}
	if (rc < 0)
		fprintf(stderr, "loader: %s\n", rf_loader_errmsg(ld));

	unsigned long long total = 0;
	if (!cuda_ok(cudaMemcpyAsync(&total, d_total, sizeof total, cudaMemcpyDeviceToHost, stream),
		     "copy back") ||
	    !cuda_ok(cudaStreamSynchronize(stream), "synchronize"))
		failed = 1;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	rf_loader_stats(ld, &st);
	rf_loader_close(&ld);               // joins threads, frees everything
	cudaFree(d_total);
	cudaStreamDestroy(stream);

	printf("batches %" PRIu64 " samples %" PRIu64 " byte_sum %llu stall %.3f device %s\n",
	       batches, samples, total, st.stall_share, st.device);
	return rc < 0 || failed ? 1 : 0;
}
