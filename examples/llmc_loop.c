/* SPDX-License-Identifier: MIT */
/*
 * An llm.c-style training loop over packed token shards.  Pack llm.c's .bin
 * shards first:
 *
 *     ringfeed pack -o tokens.rfs --llmc 'fineweb_train_*.bin' --seq-len 1024
 *
 * Each sample is one field "tokens" of T + 1 tokens; a batch of B samples
 * gives, per row, inputs = tokens[0, T) and targets = tokens[1, T + 1): the
 * (B, T) inputs and targets llm.c's DataLoader produces with fread +
 * cudaMemcpy, here already on the GPU, read with O_DIRECT and copied while
 * the previous step ran.
 *
 *     llmc_loop [--device host|cuda|auto] [--batch B] [--steps N] PATH...
 *
 * The "step" below sums the inputs and the targets through those two views
 * (llm.c would run gpt2_forward(model, inputs, targets, B, T) on the device
 * pointers, with the row stride T + 1).  With a GPU and no
 * kernels in this example, the tokens are read back with
 * rf_batch_field_read; a real program uses b->fields[0].data directly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

static uint64_t
token_at(const unsigned char *p, size_t size, uint64_t i)
{
	if (size == 2) {
		uint16_t v;
		memcpy(&v, p + 2 * i, 2);
		return v;
	}
	uint32_t v;
	memcpy(&v, p + 4 * i, 4);
	return v;
}

int
main(int argc, char **argv)
{
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.batch_size = 4;
	cfg.drop_last = 1; /* llm.c steps on whole (B, T) batches */
	cfg.epochs = 0;    /* loop over the shards until the step budget is spent */
	uint64_t max_steps = 20;
	const char *paths[64];
	size_t npaths = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			const char *d = argv[++i];
			cfg.device = !strcmp(d, "cuda") ? RF_DEVICE_CUDA
				     : !strcmp(d, "host") ? RF_DEVICE_HOST : RF_DEVICE_AUTO;
		} else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
			cfg.batch_size = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
			max_steps = strtoull(argv[++i], NULL, 10);
		} else if (npaths < 64) {
			paths[npaths++] = argv[i];
		}
	}
	if (!npaths) {
		fprintf(stderr, "usage: llmc_loop [--device host|cuda|auto] [--batch B] "
			"[--steps N] PATH...\n");
		return 2;
	}
	const char *fields[] = {"tokens"};
	cfg.paths = paths;
	cfg.npaths = npaths;
	cfg.fields = fields;
	cfg.nfields = 1;

	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "llmc_loop: %s\n", rf_loader_last_open_error());
		return 1;
	}
	rf_stats st = {.size = sizeof(st)};
	rf_loader_stats(ld, &st);
	int on_host = !strcmp(st.device, "host");

	unsigned char *host = NULL;
	uint64_t host_cap = 0, step = 0, tokens = 0, input_sum = 0, target_sum = 0;
	while (step < max_steps) {
		const rf_batch *b;
		rc = rf_loader_next(ld, &b);
		if (rc < 0 || !b)
			break;
		const rf_batch_field *tf = &b->fields[0];
		uint64_t B = b->samples, T = (uint64_t)tf->shape[1] - 1;
		size_t ts = rf_dtype_size(tf->dtype);
		const unsigned char *tok = tf->data;
		rc = rf_batch_wait(b, NULL);
		if (rc == 0 && !on_host) {
			if (tf->bytes > host_cap) {
				free(host);
				host_cap = tf->bytes;
				host = malloc(host_cap);
			}
			rc = host ? rf_batch_field_read(b, 0, host, host_cap) : -1;
			tok = host;
		}
		if (rc < 0) {
			rf_loader_release(ld, b, NULL);
			break;
		}
		/* inputs[r][t] = tok[r * (T + 1) + t], targets[r][t] = tok[r * (T + 1) + t + 1]. */
		uint64_t sum = 0, tsum = 0;
		for (uint64_t r = 0; r < B; r++) {
			const unsigned char *inputs = tok + r * (T + 1) * ts;
			const unsigned char *targets = inputs + ts;
			for (uint64_t t = 0; t < T; t++) {
				sum += token_at(inputs, ts, t);
				tsum += token_at(targets, ts, t);
			}
		}
		tokens += B * T;
		input_sum += sum;
		target_sum += tsum;
		printf("step %" PRIu64 ": inputs (%" PRIu64 ", %" PRIu64 ") targets (%" PRIu64 ", %"
		       PRIu64 "), epoch %" PRIu64 ", input token sum %" PRIu64 "\n", step, B, T, B, T,
		       b->epoch, sum);
		rc = rf_loader_release(ld, b, NULL);
		if (rc < 0)
			break;
		step++;
	}
	if (rc < 0) {
		fprintf(stderr, "llmc_loop: %s\n", rf_loader_errmsg(ld));
		free(host);
		rf_loader_close(&ld);
		return 1;
	}
	rf_loader_stats(ld, &st);
	printf("steps %" PRIu64 " tokens %" PRIu64 " input_sum %" PRIu64 " target_sum %" PRIu64
	       " device %s\n", step, tokens, input_sum, target_sum, st.device);
	free(host);
	rf_loader_close(&ld);
	return 0;
}
