/* SPDX-License-Identifier: MIT */
/*
 * Description: the mmap engine alone: ranges of mapped files come back as
 * pointers to their bytes in place, a range past a file's end is short (or
 * empty, pointing at the end), and an empty or missing file is refused with
 * a message naming it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mmap.h"
#include "rf_test.h"

#define LEN 20000

static char *
write_file(const char *dir, const char *name, size_t n)
{
	char *path = malloc(strlen(dir) + strlen(name) + 2);
	CHECK(path);
	sprintf(path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	CHECK(f);
	for (size_t i = 0; i < n; i++)
		fputc((int)(uint8_t)(i * 7 + 3), f);
	CHECK(fclose(f) == 0);
	return path;
}

int
main(void)
{
	char *dir = rf_test_tmpdir("io-mmap");
	char *a = write_file(dir, "a", LEN);
	char *b = write_file(dir, "b", 4096);
	char *empty = write_file(dir, "empty", 0);
	rf_diag d;
	rf_diag_init(&d, NULL, NULL);
	rf_io_map *m = NULL;
	CHECK_RC_MSG(rf_io_map_open(&m, 3, 8192, &d), 0, d.msg);
	CHECK_RC_MSG(rf_io_map_add(m, 0, a), 0, d.msg);
	CHECK_RC_MSG(rf_io_map_add(m, 1, b), 0, d.msg);

	const uint8_t *p = NULL;
	/* Inside the file: every byte where it lies. */
	CHECK(rf_io_map_range(m, 0, 5000, 8000, &p) == 8000);
	for (size_t i = 0; i < 8000; i++)
		CHECK(p[i] == (uint8_t)((5000 + i) * 7 + 3));
	/* Across the end: short. */
	CHECK(rf_io_map_range(m, 0, LEN - 100, 4096, &p) == 100);
	CHECK(p[99] == (uint8_t)((LEN - 1) * 7 + 3));
	/* Past the end: nothing, at the end. */
	const uint8_t *start = NULL;
	CHECK(rf_io_map_range(m, 0, 0, 1, &start) == 1);
	CHECK(rf_io_map_range(m, 0, LEN + 4096, 4096, &p) == 0);
	CHECK(p == start + LEN);
	/* Another file: its own map. */
	CHECK(rf_io_map_range(m, 1, 0, 4096, &p) == 4096);
	CHECK(p[4095] == (uint8_t)(4095 * 7 + 3));

	/* Refused, with the file named. */
	CHECK_RC(rf_io_map_add(m, 2, empty), RF_ETRUNCATED);
	CHECK(strstr(d.msg, empty) && strstr(d.msg, "empty"));
	char missing[4096];
	snprintf(missing, sizeof missing, "%s/missing", dir);
	CHECK_RC(rf_io_map_add(m, 2, missing), -ENOENT);
	CHECK(strstr(d.msg, missing) != NULL);
	CHECK(rf_io_map_add(m, 3, a) == -EINVAL);

	rf_io_map_close(&m);
	CHECK(m == NULL);
	rf_io_map_close(&m);
	rf_test_rmtree(dir);
	free(a);
	free(b);
	free(empty);
	free(dir);
	return 0;
}
