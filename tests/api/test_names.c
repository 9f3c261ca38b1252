/* SPDX-License-Identifier: MIT */
/*
 * Description: the settings' names (rf_shuffle_*, rf_device_*, rf_pinning_*)
 * round-trip value -> name -> value for every value of each enum, refuse
 * unknown, misspelt and NULL names with RF_EUSAGE leaving *out alone, and
 * give NULL for values outside the enums; the limit macros agree with what
 * the loader documents.
 */
#include <string.h>

#include <ringfeed/ringfeed.h>

#include "rf_test.h"

static const struct {
	enum rf_shuffle v;
	const char *name;
} shuffles[] = {
	{RF_SHUFFLE_NONE, "none"},
	{RF_SHUFFLE_CHUNKS, "chunks"},
	{RF_SHUFFLE_WINDOW, "window"},
	{RF_SHUFFLE_FULL, "full"},
};

static const struct {
	enum rf_device_kind v;
	const char *name;
} devices[] = {
	{RF_DEVICE_AUTO, "auto"},
	{RF_DEVICE_HOST, "host"},
	{RF_DEVICE_CUDA, "cuda"},
};

static const struct {
	enum rf_pinning v;
	const char *name;
} pinnings[] = {
	{RF_PINNING_RING, "ring"},
	{RF_PINNING_TRANSIENT, "transient"},
};

/* Names no table accepts: other spellings, other tables' names. */
static const char *const bad[] = {"", "None", "NONE", "chunk", "window ", " full", "cpu",
				  "cuda:0", "gpu", "Ring", "pinned", "drop", "u8", "auto\n"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int
main(void)
{
	for (size_t i = 0; i < N(shuffles); i++) {
		enum rf_shuffle s = (enum rf_shuffle)99;
		CHECK(rf_shuffle_name(shuffles[i].v) && !strcmp(rf_shuffle_name(shuffles[i].v),
								 shuffles[i].name));
		CHECK_RC(rf_shuffle_parse(shuffles[i].name, &s), 0);
		CHECK(s == shuffles[i].v);
	}
	for (size_t i = 0; i < N(devices); i++) {
		enum rf_device_kind d = (enum rf_device_kind)99;
		CHECK(rf_device_name(devices[i].v) && !strcmp(rf_device_name(devices[i].v),
							       devices[i].name));
		CHECK_RC(rf_device_parse(devices[i].name, &d), 0);
		CHECK(d == devices[i].v);
	}
	for (size_t i = 0; i < N(pinnings); i++) {
		enum rf_pinning p = (enum rf_pinning)99;
		CHECK(rf_pinning_name(pinnings[i].v) && !strcmp(rf_pinning_name(pinnings[i].v),
								 pinnings[i].name));
		CHECK_RC(rf_pinning_parse(pinnings[i].name, &p), 0);
		CHECK(p == pinnings[i].v);
	}

	/* Values outside the enums have no name. */
	CHECK(rf_shuffle_name((enum rf_shuffle)4) == NULL);
	CHECK(rf_shuffle_name((enum rf_shuffle)-1) == NULL);
	CHECK(rf_device_name((enum rf_device_kind)3) == NULL);
	CHECK(rf_device_name((enum rf_device_kind)-1) == NULL);
	CHECK(rf_pinning_name((enum rf_pinning)2) == NULL);
	CHECK(rf_pinning_name((enum rf_pinning)-1) == NULL);

	/* Bad names: RF_EUSAGE and *out untouched. */
	for (size_t i = 0; i < N(bad); i++) {
		enum rf_shuffle s = (enum rf_shuffle)77;
		enum rf_device_kind d = (enum rf_device_kind)77;
		enum rf_pinning p = (enum rf_pinning)77;
		CHECK_RC(rf_shuffle_parse(bad[i], &s), RF_EUSAGE);
		CHECK_RC(rf_device_parse(bad[i], &d), RF_EUSAGE);
		CHECK_RC(rf_pinning_parse(bad[i], &p), RF_EUSAGE);
		CHECK((int)s == 77 && (int)d == 77 && (int)p == 77);
	}
	enum rf_shuffle s;
	enum rf_device_kind d;
	enum rf_pinning p;
	CHECK_RC(rf_shuffle_parse(NULL, &s), RF_EUSAGE);
	CHECK_RC(rf_device_parse(NULL, &d), RF_EUSAGE);
	CHECK_RC(rf_pinning_parse(NULL, &p), RF_EUSAGE);
	CHECK_RC(rf_shuffle_parse("none", NULL), RF_EUSAGE);
	CHECK_RC(rf_device_parse("host", NULL), RF_EUSAGE);
	CHECK_RC(rf_pinning_parse("ring", NULL), RF_EUSAGE);

	/* The limits are the documented ones. */
	CHECK(RF_DEPTH_MAX == 64 && RF_DECODE_THREADS_MAX == 64 && RF_WINDOW_MAX == 1024 &&
	      RF_IO_DEPTH_MAX == 4096 && RF_WORLD_MAX == 1 << 24);
	return 0;
}
