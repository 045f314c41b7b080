// SPDX-License-Identifier: MIT
/*
 * list_devices - the rbln devices of this machine, through libdrm_rbln
 *
 * The first program to read: enumerate the accel nodes driven by rbln,
 * open each one and ask it what it is.
 */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rbln_drm.h>

#define MAX_DEVICES 64

static int print_device(unsigned int minor)
{
	uint64_t abi, chip, rev, emulated, mem, index;
	struct rbln_drm_device *dev;
	int ret;

	ret = rbln_drm_open(minor, &dev);
	if (ret) {
		fprintf(stderr, "accel%u: cannot open: %s\n", minor, strerror(-ret));
		return ret;
	}
	ret = rbln_drm_get_param(dev, RBLN_PARAM_ABI_VERSION, &abi);
	if (!ret)
		ret = rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_ID, &chip);
	if (!ret)
		ret = rbln_drm_get_param(dev, RBLN_PARAM_HW_REVISION, &rev);
	if (!ret)
		ret = rbln_drm_get_param(dev, RBLN_PARAM_EMULATED, &emulated);
	if (!ret)
		ret = rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &mem);
	if (!ret)
		ret = rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &index);
	rbln_drm_close(dev);
	if (ret) {
		fprintf(stderr, "accel%u: GET_PARAM failed: %s\n", minor, strerror(-ret));
		return ret;
	}

	printf("/dev/accel/accel%-3u %5" PRIu64 "  %#010" PRIx64 "  %-8s  %2" PRIu64
	       ".%-3" PRIu64 " %8" PRIu64 " MiB  %3" PRIu64 "\n",
	       minor, index, chip, emulated ? "emulated" : "silicon",
	       rev >> 16, rev & 0xffff, mem >> 20, abi);
	return 0;
}

int main(void)
{
	unsigned int minors[MAX_DEVICES];
	int n, i, failed = 0;

	n = rbln_drm_enumerate(minors, MAX_DEVICES);
	if (n < 0) {
		fprintf(stderr, "cannot enumerate rbln devices: %s\n", strerror(-n));
		return 1;
	}
	printf("%d rbln device%s\n", n, n == 1 ? "" : "s");
	if (n == 0)
		return 0;
	if (n > MAX_DEVICES)
		n = MAX_DEVICES;

	printf("%-19s %5s  %-10s  %-8s  %-6s %12s  %3s\n",
	       "node", "index", "chip", "kind", "rev", "memory", "abi");
	for (i = 0; i < n; i++)
		failed |= print_device(minors[i]) != 0;
	return failed;
}
