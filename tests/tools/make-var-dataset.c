/* SPDX-License-Identifier: MIT */
/*
 * Description: helper for the tool tests: writes a shard with a variable-
 * length field through the public writer API (the tool's pack makes fixed
 * fields only).  Sample i: "text" = i % 7 bytes of value i (u8, shape [?]),
 * "label" = i (i32).  usage: make-var-dataset OUT.rfs NSAMPLES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed/dataset.h>

int
main(int argc, char **argv)
{
	rf_schema schema;
	rf_writer_config cfg;
	rf_writer *w = NULL;
	uint64_t shape[1] = {0};
	unsigned char text[8];
	long n;
	int rc;

	if (argc != 3 || (n = strtol(argv[2], NULL, 10)) < 0) {
		fprintf(stderr, "usage: %s OUT.rfs NSAMPLES\n", argv[0]);
		return 1;
	}
	memset(&schema, 0, sizeof schema);
	if (rf_schema_add(&schema, "text", RF_DTYPE_U8, 1, shape, 0) < 0 ||
	    rf_schema_add(&schema, "label", RF_DTYPE_I32, 0, NULL, -1) < 0) {
		fprintf(stderr, "schema refused\n");
		return 1;
	}
	rf_writer_config_init(&cfg);
	cfg.chunk_bytes = 1024;
	cfg.no_fsync = 1;
	if ((rc = rf_writer_open(&w, argv[1], &schema, &cfg)) < 0) {
		fprintf(stderr, "open: %s\n", rf_strerror(rc));
		return 1;
	}
	for (long i = 0; i < n; i++) {
		int32_t label = (int32_t)i;
		rf_value v[2];
		memset(text, (int)(i & 0xff), sizeof text);
		v[0].data = text;
		v[0].len = (uint64_t)(i % 7);
		v[1].data = &label;
		v[1].len = sizeof label;
		if ((rc = rf_writer_add(w, v)) < 0) {
			fprintf(stderr, "add: %s\n", rf_writer_errmsg(w));
			rf_writer_abort(&w);
			return 1;
		}
	}
	if ((rc = rf_writer_close(&w)) < 0) {
		fprintf(stderr, "close: %s\n", rf_strerror(rc));
		return 1;
	}
	return 0;
}
