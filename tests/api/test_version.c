/* SPDX-License-Identifier: MIT */
/* Description: the run-time version matches the header, error names and
 * dtype tables are complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

#include "rf_test.h"

int main(void);

int
main(void)
{
	unsigned v = rf_version();
	CHECK_CONT(v == ((RF_VERSION_MAJOR << 16) | (RF_VERSION_MINOR << 8) | RF_VERSION_PATCH));
	char buf[32];
	snprintf(buf, sizeof buf, "%d.%d.%d", RF_VERSION_MAJOR, RF_VERSION_MINOR, RF_VERSION_PATCH);
	CHECK_CONT(strcmp(buf, rf_version_string()) == 0);

	for (int code = RF_EFORK; code <= RF_EFORMAT; code++)
		CHECK_CONT(strcmp(rf_strerror(code), "unknown error") != 0);
	CHECK_CONT(strcmp(rf_strerror(-1099), "unknown error") == 0);
	CHECK_CONT(strstr(rf_strerror(-ENOENT), "No such file") != NULL);
	CHECK_CONT(strcmp(rf_strerror(0), "success") == 0);

	static const struct {
		const char *name;
		size_t size;
	} want[] = {
		{"u8", 1}, {"i8", 1}, {"u16", 2}, {"i16", 2}, {"u32", 4}, {"i32", 4}, {"u64", 8},
		{"i64", 8}, {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"bytes", 1},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		enum rf_dtype dt;
		CHECK_CONT(rf_dtype_parse(want[i].name, &dt) == 0);
		CHECK_CONT(rf_dtype_size(dt) == want[i].size);
		CHECK_CONT(strcmp(rf_dtype_name(dt), want[i].name) == 0);
	}
	enum rf_dtype dt;
	CHECK_CONT(rf_dtype_parse("f128", &dt) == RF_EUSAGE);
	CHECK_CONT(rf_dtype_size((enum rf_dtype)0) == 0);
	CHECK_CONT(rf_dtype_name((enum rf_dtype)99) == NULL);
	return rf_test_status("version");
}
