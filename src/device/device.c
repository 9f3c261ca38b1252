/* SPDX-License-Identifier: MIT */
/* What every backend shares. */
#include "device/device.h"

void
rf_device_close(rf_device **dev)
{
	if (!dev || !*dev)
		return;
	(*dev)->ops->close(*dev);
	*dev = NULL;
}
