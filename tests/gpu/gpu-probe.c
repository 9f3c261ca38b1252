/* SPDX-License-Identifier: MIT */
/*
 * gpu-probe PROGRAM [ARGS...]: runs a test of the `gpu` suite when a CUDA
 * device is there, else exits 77 saying why.  The runtime is the one the
 * CUDA backend would load (RINGFEED_CUDART, else libcudart.so.13/.so.12);
 * the program runs with RINGFEED_CUDART set to the file found, so the
 * library, the tools and Python load that same runtime.
 *
 * The cudart emulator is not a GPU: named by RINGFEED_CUDART it gives a skip
 * too, unless RF_GPU_ALLOW_EMULATOR=1 (the kit's own check of its plumbing
 * on a machine without a GPU, whose results are the emulator's, never a
 * GPU's).  With no PROGRAM, prints the probe's result: exit 0 with a device,
 * 77 without.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rf_gpu.h"

int
main(int argc, char **argv)
{
	struct rf_gpu g;
	char why[1024] = "";
	if (rf_gpu_load(&g, why, sizeof(why)) <= 0) {
		printf("skipped: no CUDA device: %s\n", why);
		return 77;
	}
	const char *allow = getenv("RF_GPU_ALLOW_EMULATOR");
	if (g.emulated && !(allow && !strcmp(allow, "1"))) {
		printf("skipped: %s is the cudart emulator, not a GPU's runtime "
		       "(RF_GPU_ALLOW_EMULATOR=1 runs the test against it)\n", g.path);
		return 77;
	}
	size_t fr = 0, tot = 0;
	g.mem_get_info(&fr, &tot);
	fprintf(stderr, "gpu-probe: %d device(s)%s, runtime %s, device 0: %zu MiB free of %zu MiB\n",
		g.devices, g.emulated ? " (EMULATOR)" : "", g.path, fr >> 20, tot >> 20);
	if (argc < 2)
		return 0;
	if (setenv("RINGFEED_CUDART", g.path, 1) != 0) {
		perror("setenv");
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "gpu-probe: cannot run %s\n", argv[1]);
	perror("execvp");
	return 1;
}
