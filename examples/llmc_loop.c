/* SPDX-License-Identifier: MIT */
/*
 * An llm.c-style training loop over packed token shards.  Pack llm.c's .bin
 * shards first:
 *
 *     ringfeed pack -o tokens.rfs --llmc 'fineweb_train_*.bin' --seq-len 1024
 *
 * Each sample is one field "tokens" of T + 1 tokens.  With
 * cfg.tokens = RF_TOKENS_INPUTS_TARGETS every batch holds two contiguous
 * int32 arrays in its place, "inputs" [B, T] (tokens [0, T) of each row) and
 * "targets" [B, T] (tokens [1, T + 1)): the inputs and targets llm.c's
 * DataLoader produces with fread + cudaMemcpy, here already on the GPU, read
 * ahead of the step (O_DIRECT for a dataset larger than a quarter of the
 * available memory) and copied while the previous step ran.  A step is
 *
 *     rf_batch_wait(b, stream);
 *     gpt2_forward(&model, inputs, targets, B, T);   // the batch's pointers
 *     ...backward, update...
 *     rf_loader_release(ld, b, stream);
 *
 *     llmc_loop [--device cuda|host|auto] [--batch B] [--steps N]
 *               [--shuffle window|none] [--seed S] [--dump FILE] PATH...
 *
 * This example has no kernels: its "step" sums the inputs and the targets
 * (and --dump writes them to FILE, each step's inputs then its targets, as
 * int32), reading them back with rf_batch_field_read when they are on a GPU.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

int
main(int argc, char **argv)
{
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.batch_size = 4;
	cfg.drop_last = 1;   /* every step gets whole (B, T) buffers */
	cfg.epochs = 0;      /* loop over the shards until the step budget is spent */
	cfg.device = RF_DEVICE_CUDA;
	cfg.shuffle = RF_SHUFFLE_WINDOW; /* the mode for training */
	cfg.tokens = RF_TOKENS_INPUTS_TARGETS;
	uint64_t max_steps = 20;
	const char *paths[64], *dump_path = NULL;
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
		} else if (!strcmp(argv[i], "--shuffle") && i + 1 < argc) {
			cfg.shuffle = !strcmp(argv[++i], "none") ? RF_SHUFFLE_NONE : RF_SHUFFLE_WINDOW;
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			cfg.seed = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
			dump_path = argv[++i];
		} else if (npaths < 64) {
			paths[npaths++] = argv[i];
		}
	}
	if (!npaths) {
		fprintf(stderr, "usage: llmc_loop [--device cuda|host|auto] [--batch B] [--steps N] "
			"[--shuffle window|none] [--seed S] [--dump FILE] PATH...\n");
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
	/* Where the batches are: a GPU (device_ordinal >= 0), or host memory
	 * (--device host, or auto without a GPU), which no kernel may read. */
	rf_stats st;
	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	rf_loader_stats(ld, &st);
	int on_gpu = st.device_ordinal >= 0;
	FILE *dump = dump_path ? fopen(dump_path, "wb") : NULL;
	if (dump_path && !dump) {
		perror(dump_path);
		rf_loader_close(&ld);
		return 1;
	}

	int32_t *host = NULL; /* inputs then targets, read back from the GPU */
	uint64_t step = 0, tokens = 0, input_sum = 0, target_sum = 0;
	while (step < max_steps) {
		const rf_batch *b;
		rc = rf_loader_next(ld, &b);
		if (rc < 0 || !b)
			break;
		/* fields[0] is "inputs", fields[1] "targets": both int32 [B, T]. */
		const rf_batch_field *in = &b->fields[0], *tg = &b->fields[1];
		uint64_t B = b->samples, T = (uint64_t)in->shape[1], n = B * T;
		const int32_t *inputs = in->data, *targets = tg->data;
		rc = rf_batch_wait(b, NULL);
		if (rc == 0 && on_gpu) {
			/* A real program passes inputs and targets to its kernels
			 * here; this one reads them back to the host. */
			if (!host && !(host = malloc(2 * n * sizeof *host))) {
				perror("malloc");
				rc = -1;
			}
			if (rc == 0)
				rc = rf_batch_field_read(b, 0, host, n * sizeof *host);
			if (rc == 0)
				rc = rf_batch_field_read(b, 1, host + n, n * sizeof *host);
			inputs = host;
			targets = host + n;
		}
		if (rc < 0) {
			rf_loader_release(ld, b, NULL);
			break;
		}
		uint64_t sum = 0, tsum = 0;
		for (uint64_t i = 0; i < n; i++) {
			sum += (uint64_t)inputs[i];
			tsum += (uint64_t)targets[i];
		}
		if (dump && (fwrite(inputs, sizeof *inputs, n, dump) != n ||
			     fwrite(targets, sizeof *targets, n, dump) != n)) {
			perror(dump_path);
			rf_loader_release(ld, b, NULL);
			rc = -1;
			break;
		}
		tokens += n;
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
	free(host);
	if (dump && fclose(dump) != 0 && rc >= 0) {
		perror(dump_path);
		rc = -1;
	}
	if (rc < 0) {
		if (*rf_loader_errmsg(ld)) /* else the failure was ours, reported above */
			fprintf(stderr, "llmc_loop: %s\n", rf_loader_errmsg(ld));
		rf_loader_close(&ld);
		return 1;
	}
	printf("steps %" PRIu64 " tokens %" PRIu64 " input_sum %" PRIu64 " target_sum %" PRIu64
	       " device %s\n", step, tokens, input_sum, target_sum, st.device);
	rf_loader_close(&ld);
	return 0;
}
