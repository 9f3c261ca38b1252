/* SPDX-License-Identifier: MIT */
/* Description: the run-time version matches the header, error names and
 * dtype tables are complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ringfeed/ringfeed.h>

int main(void);

static int failures;

#define CHECK(c)                                                          \
	do {                                                              \
		if (!(c)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                            \
			failures++;                                       \
		}                                                         \
	} while (0)

int
main(void)
{
	unsigned v = rf_version();
	CHECK(v == ((RF_VERSION_MAJOR << 16) | (RF_VERSION_MINOR << 8) | RF_VERSION_PATCH));
	char buf[32];
	snprintf(buf, sizeof buf, "%d.%d.%d", RF_VERSION_MAJOR, RF_VERSION_MINOR, RF_VERSION_PATCH);
	CHECK(strcmp(buf, rf_version_string()) == 0);

	for (int code = RF_EFORK; code <= RF_EFORMAT; code++)
		CHECK(strcmp(rf_strerror(code), "unknown error") != 0);
	CHECK(strcmp(rf_strerror(-1099), "unknown error") == 0);
	CHECK(strstr(rf_strerror(-ENOENT), "No such file") != NULL);
	CHECK(strcmp(rf_strerror(0), "success") == 0);

	static const struct {
		const char *name;
		size_t size;
	} want[] = {
		{"u8", 1}, {"i8", 1}, {"u16", 2}, {"i16", 2}, {"u32", 4}, {"i32", 4}, {"u64", 8},
		{"i64", 8}, {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"bytes", 1},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		enum rf_dtype dt;
		CHECK(rf_dtype_parse(want[i].name, &dt) == 0);
		CHECK(rf_dtype_size(dt) == want[i].size);
		CHECK(strcmp(rf_dtype_name(dt), want[i].name) == 0);
	}
	enum rf_dtype dt;
	CHECK(rf_dtype_parse("f128", &dt) == RF_EUSAGE);
	CHECK(rf_dtype_size((enum rf_dtype)0) == 0);
	CHECK(rf_dtype_name((enum rf_dtype)99) == NULL);
	return failures ? 1 : 0;
}
