/* SPDX-License-Identifier: MIT */
/*
 * A training loop fed by ringfeed: streams a packed dataset for a few
 * epochs in a new order each epoch (the window shuffle, the mode for
 * training), on the GPU when there is one (device auto), else in host
 * memory, and runs a small computation per batch on the consumer side: the
 * sum of every fixed-size numeric field (a stand-in for a training step).
 *
 *     train_loop [--device host|cuda|auto] [--batch B] [--epochs E]
 *                [--shuffle window|chunks|full|none] [--seed S] PATH...
 *
 * The shape of the loop is the one a real program uses:
 *     next -> wait (the consumer's stream waits for the copy) -> compute ->
 *     release (on the consumer's stream: the buffer is refilled only after
 *     the step's work is done).
 * A CUDA program launches its kernel on its stream between wait and release
 * (examples/cuda_train.cu).
 * This example has no kernels (it builds without the CUDA toolkit), so with a
 * GPU it reads each field back with rf_batch_field_read to compute on the
 * host; with the host backend it reads the batch in place.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

static void
log_cb(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	if (level <= RF_LOG_INFO)
		fprintf(stderr, "ringfeed: %s\n", msg);
}

/* Sum of the values of a fixed field, as a double and (for integer types)
 * exactly as an int64. */
static void
field_sum(const rf_batch_field *f, const void *data, uint64_t count, double *dsum, int64_t *isum)
{
	const unsigned char *p = data;
	for (uint64_t i = 0; i < count; i++) {
		switch (f->dtype) {
		case RF_DTYPE_U8: *isum += ((const uint8_t *)p)[i]; break;
		case RF_DTYPE_I8: *isum += ((const int8_t *)p)[i]; break;
		case RF_DTYPE_U16: *isum += ((const uint16_t *)(const void *)p)[i]; break;
		case RF_DTYPE_I16: *isum += ((const int16_t *)(const void *)p)[i]; break;
		case RF_DTYPE_U32: *isum += ((const uint32_t *)(const void *)p)[i]; break;
		case RF_DTYPE_I32: *isum += ((const int32_t *)(const void *)p)[i]; break;
		case RF_DTYPE_U64: *isum += (int64_t)((const uint64_t *)(const void *)p)[i]; break;
		case RF_DTYPE_I64: *isum += ((const int64_t *)(const void *)p)[i]; break;
		case RF_DTYPE_F32: *dsum += ((const float *)(const void *)p)[i]; break;
		case RF_DTYPE_F64: *dsum += ((const double *)(const void *)p)[i]; break;
		default: break;
		}
	}
}

int
main(int argc, char **argv)
{
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.batch_size = 64;
	cfg.epochs = 2;
	cfg.shuffle = RF_SHUFFLE_WINDOW;
	cfg.log = log_cb;
	const char *paths[64];
	size_t npaths = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			const char *d = argv[++i];
			cfg.device = !strcmp(d, "cuda") ? RF_DEVICE_CUDA
				     : !strcmp(d, "host") ? RF_DEVICE_HOST : RF_DEVICE_AUTO;
		} else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
			cfg.batch_size = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--epochs") && i + 1 < argc) {
			cfg.epochs = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--shuffle") && i + 1 < argc) {
			const char *m = argv[++i];
			cfg.shuffle = !strcmp(m, "none") ? RF_SHUFFLE_NONE
				      : !strcmp(m, "chunks") ? RF_SHUFFLE_CHUNKS
				      : !strcmp(m, "full") ? RF_SHUFFLE_FULL : RF_SHUFFLE_WINDOW;
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			cfg.seed = strtoull(argv[++i], NULL, 10);
		} else if (npaths < 64) {
			paths[npaths++] = argv[i];
		}
	}
	if (!npaths) {
		fprintf(stderr, "usage: train_loop [--device host|cuda|auto] [--batch B] "
			"[--epochs E] [--shuffle window|chunks|full|none] [--seed S] PATH...\n");
		return 2;
	}
	cfg.paths = paths;
	cfg.npaths = npaths;

	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "train_loop: %s\n", rf_loader_last_open_error());
		return 1;
	}
	/* Where auto put the batches: a GPU (device_ordinal >= 0) or host
	 * memory, which no kernel may read. */
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	rf_loader_stats(ld, &st);
	int on_host = st.device_ordinal < 0;
	printf("device %s\n", st.device);

	double dsum[64] = {0};
	int64_t isum[64] = {0};
	const char *names[64] = {0};
	uint32_t nfields = 0;
	uint64_t samples = 0, batches = 0, epoch = 0, epoch_samples = 0;
	void *host = NULL;
	uint64_t host_cap = 0;
	const rf_batch *b;
	while ((rc = rf_loader_next(ld, &b)) == 0 && b) {
		if (b->epoch != epoch) {
			printf("epoch %" PRIu64 ": %" PRIu64 " samples\n", epoch, epoch_samples);
			epoch = b->epoch;
			epoch_samples = 0;
		}
		/* The step: wait for the batch (a stream wait for cuda; returns at
		 * once when the bytes are in place), compute, release. */
		rc = rf_batch_wait(b, NULL);
		for (uint32_t f = 0; rc == 0 && f < b->nfields && f < 64; f++) {
			const rf_batch_field *bf = &b->fields[f];
			names[f] = bf->name;
			if (bf->offsets)
				continue; /* variable-size: not summed here */
			const void *data = bf->data;
			if (!on_host) {
				if (bf->bytes > host_cap) {
					free(host);
					host_cap = bf->bytes;
					host = malloc(host_cap);
				}
				if (!host || (rc = rf_batch_field_read(b, f, host, host_cap)) < 0)
					break;
				data = host;
			}
			size_t es = rf_dtype_size(bf->dtype);
			field_sum(bf, data, es ? bf->bytes / es : 0, &dsum[f], &isum[f]);
		}
		if (b->nfields > nfields)
			nfields = b->nfields < 64 ? b->nfields : 64;
		samples += b->samples;
		epoch_samples += b->samples;
		batches++;
		if (rc == 0)
			rc = rf_loader_release(ld, b, NULL);
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		fprintf(stderr, "train_loop: %s\n", rf_loader_errmsg(ld));
		free(host);
		rf_loader_close(&ld);
		return 1;
	}
	printf("epoch %" PRIu64 ": %" PRIu64 " samples\n", epoch, epoch_samples);
	printf("batches %" PRIu64 " samples %" PRIu64 "\n", batches, samples);
	for (uint32_t f = 0; f < nfields; f++)
		printf("field %s sum %" PRId64 " fsum %.6g\n", names[f], isum[f], dsum[f]);
	rf_loader_stats(ld, &st);
	printf("read %.1f MiB, consumer stalled %.1f%% of %.3f s, io %s\n",
	       (double)st.bytes_read / (1 << 20), 100.0 * st.stall_share, (double)st.wall_ns / 1e9,
	       st.io_engine);
	free(host);
	rf_loader_close(&ld);
	return 0;
}
