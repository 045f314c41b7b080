// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_uapi_layout - the UAPI's binary layout does not move
 *
 * Old binaries keep working only if ioctl numbers, struct sizes and field
 * offsets stay what they were. Any change here is an ABI break.
 */

#include <stddef.h>

#include "kselftest_harness.h"
#include "rbln_accel.h"

TEST(abi_version)
{
	EXPECT_EQ(1, RBLN_ABI_VERSION);
}

TEST(get_param)
{
	EXPECT_EQ(16, sizeof(struct drm_rbln_get_param));
	EXPECT_EQ(0, offsetof(struct drm_rbln_get_param, param));
	EXPECT_EQ(4, offsetof(struct drm_rbln_get_param, pad));
	EXPECT_EQ(8, offsetof(struct drm_rbln_get_param, value));
	EXPECT_EQ(0xc0106440ul, DRM_IOCTL_RBLN_GET_PARAM);
}

TEST(param_numbers)
{
	EXPECT_EQ(0, RBLN_PARAM_ABI_VERSION);
	EXPECT_EQ(1, RBLN_PARAM_DEVICE_ID);
	EXPECT_EQ(2, RBLN_PARAM_HW_REVISION);
	EXPECT_EQ(3, RBLN_PARAM_EMULATED);
	EXPECT_EQ(4, RBLN_PARAM_DEVICE_MEMORY_SIZE);
	EXPECT_EQ(5, RBLN_PARAM_DEVICE_INDEX);
	EXPECT_EQ(0xe1a0, RBLN_CHIP_ID_EMULATED);
}

TEST_HARNESS_MAIN
