/* SPDX-License-Identifier: MIT */
/* The CUDA backend of a build without the CUDA toolkit's headers. */
#include "device/device.h"

int
rf_device_open_cuda(rf_device **out, int index, rf_diag *diag)
{
	*out = NULL;
	(void)index; /* -1 (choose) or an ordinal: neither is there */
	return rf_fail(diag, RF_ENODEVICE,
		       "cuda: ringfeed was built without CUDA headers (meson -Dcuda=enabled "
		       "needs the CUDA toolkit); use the host device");
}
