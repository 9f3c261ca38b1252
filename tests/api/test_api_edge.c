/* SPDX-License-Identifier: MIT */
/*
 * Description: one rule at the edge of the API for the three constructors
 * (rf_loader_open, rf_dataset_open, rf_writer_open) and their handles: a
 * NULL out-pointer or handle is -EINVAL; a bad value RF_EUSAGE; a settings
 * struct whose size is wrong is RF_EUSAGE naming its init function, with no
 * other byte of it read (its log callback is never called); reserved bytes
 * that are not 0 are RF_EUSAGE; the message is in the constructor's
 * thread-local open error.
 */
#include <errno.h>
#include <string.h>

#include <ringfeed/dataset.h>
#include <ringfeed/ringfeed.h>

#include "rf_test.h"

static int log_calls;

static void
counting_log(void *user, enum rf_log_level level, const char *msg)
{
	(void)user;
	(void)level;
	(void)msg;
	log_calls++;
}

static void
has(const char *msg, const char *needle)
{
	if (!strstr(msg, needle)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", msg, needle);
		exit(1);
	}
}

static void
loader_edge(void)
{
	rf_config cfg;
	rf_config_init(&cfg);
	const char *paths[] = {"/nonexistent/ringfeed-api-edge"};
	cfg.paths = paths;
	cfg.npaths = 1;
	CHECK_RC(rf_loader_open(NULL, &cfg), -EINVAL);
	rf_loader *ld = (rf_loader *)&cfg;
	CHECK_RC(rf_loader_open(&ld, NULL), RF_EUSAGE);
	CHECK(ld == NULL);
	cfg.log = counting_log;
	cfg.size = 0;
	log_calls = 0;
	CHECK_RC(rf_loader_open(&ld, &cfg), RF_EUSAGE);
	CHECK(log_calls == 0);
	has(rf_loader_last_open_error(), "config size 0");
	has(rf_loader_last_open_error(), "call rf_config_init");
	rf_config_init(&cfg);
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.reserved[7] = 1;
	CHECK_RC(rf_loader_open(&ld, &cfg), RF_EUSAGE);
	has(rf_loader_last_open_error(), "reserved bytes are not 0");
	CHECK_RC(rf_loader_stats(NULL, &(rf_stats){.size = sizeof(rf_stats)}), -EINVAL);
	CHECK_RC(rf_loader_next(NULL, &(const rf_batch *){NULL}), -EINVAL);
}

static void
dataset_edge(const char *path)
{
	const char *paths[] = {path};
	rf_dataset_config cfg;
	rf_dataset_config_init(&cfg);
	cfg.log = counting_log;
	CHECK_RC(rf_dataset_open(NULL, paths, 1, &cfg), -EINVAL);

	rf_dataset *ds = (rf_dataset *)&cfg;
	cfg.size = 0;
	log_calls = 0;
	CHECK_RC(rf_dataset_open(&ds, paths, 1, &cfg), RF_EUSAGE);
	CHECK(ds == NULL && log_calls == 0);
	has(rf_dataset_last_open_error(), "config size 0");
	has(rf_dataset_last_open_error(), "call rf_dataset_config_init");

	rf_dataset_config_init(&cfg);
	cfg.reserved[63] = 1;
	CHECK_RC(rf_dataset_open(&ds, paths, 1, &cfg), RF_EUSAGE);
	has(rf_dataset_last_open_error(), "reserved bytes are not 0");

	/* A bad value is RF_EUSAGE, and now logged (the config is sound). */
	rf_dataset_config_init(&cfg);
	cfg.log = counting_log;
	log_calls = 0;
	CHECK_RC(rf_dataset_open(&ds, paths, 0, &cfg), RF_EUSAGE);
	CHECK(log_calls == 1);

	CHECK_RC(rf_dataset_open(&ds, paths, 1, NULL), 0);
	size_t len;
	uint32_t v;
	uint64_t chunk;
	rf_chunk_info ci;
	CHECK_RC(rf_dataset_read(NULL, 0, 0, &v, sizeof v, &len), -EINVAL);
	CHECK_RC(rf_dataset_read(ds, 0, 0, &v, sizeof v, NULL), -EINVAL);
	CHECK_RC(rf_dataset_read(ds, 0, 0, &v, sizeof v, &len), 0);
	CHECK_RC(rf_dataset_verify_chunk(NULL, 0), -EINVAL);
	CHECK_RC(rf_dataset_chunk_info(NULL, 0, &ci), -EINVAL);
	CHECK_RC(rf_dataset_chunk_info(ds, 0, NULL), -EINVAL);
	CHECK_RC(rf_dataset_find_chunk(NULL, 0, &chunk), -EINVAL);
	CHECK_RC(rf_dataset_find_chunk(ds, 0, NULL), -EINVAL);
	rf_dataset_close(&ds);
	CHECK(ds == NULL);
}

int
main(void)
{
	char *dir = rf_test_tmpdir("rfedge");
	char path[4096];
	snprintf(path, sizeof path, "%s/d.rfs", dir);
	rf_schema s;
	memset(&s, 0, sizeof s);
	CHECK_RC(rf_schema_add(&s, "x", RF_DTYPE_U32, 0, NULL, -1), 0);
	rf_writer_config wc;
	rf_writer_config_init(&wc);
	wc.no_fsync = 1;
	uint32_t one = 1;
	rf_value val = {&one, sizeof one};

	CHECK_RC(rf_writer_open(NULL, path, &s, &wc), -EINVAL);
	rf_writer *w = (rf_writer *)&wc;
	wc.size = 0;
	wc.log = counting_log;
	log_calls = 0;
	CHECK_RC(rf_writer_open(&w, path, &s, &wc), RF_EUSAGE);
	CHECK(w == NULL && log_calls == 0);
	has(rf_writer_last_error(), "config size 0");
	has(rf_writer_last_error(), "call rf_writer_config_init");
	rf_writer_config_init(&wc);
	wc.no_fsync = 1;
	wc.reserved[0] = 1;
	CHECK_RC(rf_writer_open(&w, path, &s, &wc), RF_EUSAGE);
	has(rf_writer_last_error(), "reserved bytes are not 0");
	wc.reserved[0] = 0;
	CHECK_RC(rf_writer_add(NULL, &val), -EINVAL);
	CHECK_RC(rf_writer_add_columns(NULL, 1, &(rf_column){&one, NULL}), -EINVAL);
	CHECK_RC(rf_writer_open(&w, path, &s, &wc), 0);
	CHECK_RC(rf_writer_add(w, &val), 0);
	CHECK_RC(rf_writer_add(w, NULL), RF_EUSAGE);
	CHECK_RC(rf_writer_close(&w), 0);

	dataset_edge(path);
	loader_edge();
	rf_test_rmtree(dir);
	free(dir);
	return 0;
}
