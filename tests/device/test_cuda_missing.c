/* SPDX-License-Identifier: MIT */
/*
 * Description: the CUDA backend without a usable CUDA runtime.
 * RINGFEED_CUDART naming a missing file, or a library that is not cudart
 * (liburing), gives RF_ENODEVICE with a message naming the path and the
 * missing piece; a build without CUDA headers says so.  No handle leaks out.
 */
#include <dlfcn.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "rf_test.h"

int
main(void)
{
	rf_diag diag;
	rf_diag_init(&diag, NULL, NULL);
	rf_device *dev = (rf_device *)&diag; /* must be cleared */

	setenv("RINGFEED_CUDART", "/nonexistent/libcudart.so.13", 1);
	int ret = rf_device_open_cuda(&dev, 0, &diag);
	printf("missing file: %s\n", diag.msg);
	CHECK(ret == RF_ENODEVICE);
	CHECK(dev == NULL);
#if RF_TEST_CUDA_HEADERS
	CHECK(strstr(diag.msg, "/nonexistent/libcudart.so.13") != NULL);

	/* A real shared library that exports no cudart function. */
	Dl_info info;
	int (*fn)(unsigned, struct io_uring *, unsigned) = io_uring_queue_init;
	void *addr;
	memcpy(&addr, &fn, sizeof addr);
	CHECK(dladdr(addr, &info) != 0 && info.dli_fname);
	setenv("RINGFEED_CUDART", info.dli_fname, 1);
	ret = rf_device_open_cuda(&dev, 0, &diag);
	printf("not cudart: %s\n", diag.msg);
	CHECK(ret == RF_ENODEVICE);
	CHECK(dev == NULL);
	CHECK(strstr(diag.msg, info.dli_fname) != NULL);
	CHECK(strstr(diag.msg, "does not export cuda") != NULL);
#else
	CHECK(strstr(diag.msg, "built without CUDA headers") != NULL);
#endif
	return 0;
}
