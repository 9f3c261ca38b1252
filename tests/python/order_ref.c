/* SPDX-License-Identifier: MIT */
/*
 * Description: the C loader's order, the reference the Python module's
 * order test compares with: prints one line per batch, "EPOCH: v v v ...",
 * the values of the int64 field "y" of its samples, for
 *   order_ref PATH BATCH DROP_LAST EPOCHS [SHUFFLE SEED FIRST_EPOCH RANK WORLD]
 * with the host device (SHUFFLE: none, chunks, window, full).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

int
main(int argc, char **argv)
{
	if (argc != 5 && argc != 10) {
		fprintf(stderr, "usage: order_ref PATH BATCH DROP_LAST EPOCHS "
			"[SHUFFLE SEED FIRST_EPOCH RANK WORLD]\n");
		return 2;
	}
	const char *paths[] = {argv[1]};
	const char *fields[] = {"y"};
	rf_config cfg;
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.fields = fields;
	cfg.nfields = 1;
	cfg.batch_size = (uint32_t)atoi(argv[2]);
	cfg.drop_last = atoi(argv[3]);
	cfg.epochs = (uint32_t)atoi(argv[4]);
	cfg.device = RF_DEVICE_HOST;
	if (argc == 10) {
		static const char *const modes[] = {"none", "chunks", "window", "full"};
		int m = -1;
		for (int i = 0; i < 4; i++)
			if (!strcmp(argv[5], modes[i]))
				m = i;
		if (m < 0) {
			fprintf(stderr, "order_ref: bad shuffle '%s'\n", argv[5]);
			return 2;
		}
		cfg.shuffle = (enum rf_shuffle)m;
		cfg.seed = strtoull(argv[6], NULL, 10);
		cfg.epoch = strtoull(argv[7], NULL, 10);
		cfg.rank = atoi(argv[8]);
		cfg.world = atoi(argv[9]);
	}
	cfg.pinned_bytes = 1 << 20;

	rf_loader *ld;
	int rc = rf_loader_open(&ld, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
		return 1;
	}
	for (;;) {
		const rf_batch *b;
		rc = rf_loader_next(ld, &b);
		if (rc < 0 || !b)
			break;
		rf_batch_wait(b, NULL);
		const int64_t *y = b->fields[0].data;
		printf("%" PRIu64 ":", b->epoch);
		for (uint32_t i = 0; i < b->samples; i++)
			printf(" %" PRId64, y[i]);
		printf("\n");
		rf_loader_release(ld, b, NULL);
	}
	if (rc < 0)
		fprintf(stderr, "next: %s\n", rf_loader_errmsg(ld));
	rf_loader_close(&ld);
	return rc < 0;
}
