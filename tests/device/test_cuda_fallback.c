/* SPDX-License-Identifier: MIT */
/*
 * Description: the CUDA backend's choice of runtime, built here with its
 * list of runtimes (libcudart.so.13, libcudart.so.12) replaced by: a missing
 * file, the emulator built for an old driver (loads, cannot start: what
 * libcudart.so.13 does on a CUDA 12 driver), ./libcudart-copy.so (a copy of
 * the emulator, when the test puts one there) and the emulator.  A runtime
 * that is missing or does not start is passed over for the next; a runtime
 * already in the process is preferred to loading one; RINGFEED_CUDART is
 * used alone (no fallback); when none starts the error names each.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "emulator.h"
#include "rf_test.h"

#ifndef RF_TEST_EMU
#error "RF_TEST_EMU must name the emulator"
#endif
#ifndef RF_TEST_EMU_OLDDRIVER
#error "RF_TEST_EMU_OLDDRIVER must name the old-driver emulator"
#endif

static int
loaded(const char *path)
{
	return dlopen(path, RTLD_NOW | RTLD_NOLOAD) != NULL;
}

static void
copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	CHECK(in && out);
	char buf[65536];
	size_t n;
	while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
		CHECK(fwrite(buf, 1, n, out) == n);
	if (in)
		fclose(in);
	if (out)
		fclose(out);
}

int
main(void)
{
	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = NULL;
	/* ./libcudart-copy.so is relative to a directory of our own. */
	char *tmp = rf_test_tmpdir("rf-cudart-fallback");
	CHECK(chdir(tmp) == 0);

	/* RINGFEED_CUDART is used alone: the old-driver runtime fails and
	 * nothing else is tried. */
	setenv("RINGFEED_CUDART", RF_TEST_EMU_OLDDRIVER, 1);
	CHECK_RC_MSG(rf_device_open_cuda(&dev, 0, &diag), RF_ENODEVICE, diag.msg);
	printf("%s\n", diag.msg);
	CHECK(!dev && strstr(diag.msg, "RINGFEED_CUDART") &&
	      strstr(diag.msg, "cudaErrorInsufficientDriver"));
	CHECK(!loaded(RF_TEST_EMU));
	unsetenv("RINGFEED_CUDART");

	/* The list: missing, old driver, no copy yet, then the emulator. */
	CHECK_RC_MSG(rf_device_open_cuda(&dev, 0, &diag), 0, diag.msg);
	CHECK(dev != NULL);
	if (dev) {
		printf("%s\n", dev->desc);
		CHECK(strstr(dev->desc, "(libcudart-emulator.so, cudart") != NULL);
		rf_device_close(&dev);
	}
	CHECK(loaded(RF_TEST_EMU));

	/* A runtime already in the process wins over one earlier in the
	 * list that would have to be loaded: one runtime, shared. */
	copy_file(RF_TEST_EMU, "libcudart-copy.so");
	CHECK_RC_MSG(rf_device_open_cuda(&dev, 0, &diag), 0, diag.msg);
	if (dev) {
		printf("%s\n", dev->desc);
		CHECK(strstr(dev->desc, "(libcudart-emulator.so, cudart") != NULL);
		rf_device_close(&dev);
	}
	CHECK(!loaded("./libcudart-copy.so"));
	unlink("libcudart-copy.so");

	/* None starts: every reason in one message. */
	struct rfemu_api emu;
	CHECK(rfemu_api_load(&emu, RF_TEST_EMU) == 0);
	CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "0") == 0);
	CHECK_RC_MSG(rf_device_open_cuda(&dev, 0, &diag), RF_ENODEVICE, diag.msg);
	printf("%s\n", diag.msg);
	CHECK(!dev && strstr(diag.msg, "/nonexistent/libcudart.so.13") &&
	      strstr(diag.msg, "cudaErrorInsufficientDriver") &&
	      strstr(diag.msg, "cudaErrorNoDevice") && strstr(diag.msg, "RINGFEED_CUDART"));
	CHECK(emu.set_option("RINGFEED_EMU_DEVICES", "1") == 0);
	emu.reset_counters(); /* the failures were on purpose */
	unlink("libcudart-copy.so");
	CHECK(chdir("/") == 0);
	rmdir(tmp);
	free(tmp);
	return 0;
}
