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
	EXPECT_EQ(3, RBLN_ABI_VERSION);
}

TEST(get_param)
{
	EXPECT_EQ(16, sizeof(struct drm_rbln_get_param));
	EXPECT_EQ(0, offsetof(struct drm_rbln_get_param, param));
	EXPECT_EQ(4, offsetof(struct drm_rbln_get_param, pad));
	EXPECT_EQ(8, offsetof(struct drm_rbln_get_param, value));
	EXPECT_EQ(0xc0106440ul, DRM_IOCTL_RBLN_GET_PARAM);
}

TEST(bo_create)
{
	EXPECT_EQ(32, sizeof(struct drm_rbln_bo_create));
	EXPECT_EQ(0, offsetof(struct drm_rbln_bo_create, size));
	EXPECT_EQ(8, offsetof(struct drm_rbln_bo_create, placement));
	EXPECT_EQ(12, offsetof(struct drm_rbln_bo_create, flags));
	EXPECT_EQ(16, offsetof(struct drm_rbln_bo_create, handle));
	EXPECT_EQ(20, offsetof(struct drm_rbln_bo_create, pad));
	EXPECT_EQ(24, offsetof(struct drm_rbln_bo_create, va));
	EXPECT_EQ(0xc0206441ul, DRM_IOCTL_RBLN_BO_CREATE);
	EXPECT_EQ(1, RBLN_BO_DEVICE);
	EXPECT_EQ(2, RBLN_BO_HOST);
	EXPECT_EQ(1, RBLN_BO_READ_ONLY);
	EXPECT_EQ(2, RBLN_BO_IMPORTED);
	EXPECT_EQ(4, RBLN_BO_NO_VA);
}

TEST(bo_info)
{
	EXPECT_EQ(40, sizeof(struct drm_rbln_bo_info));
	EXPECT_EQ(0, offsetof(struct drm_rbln_bo_info, handle));
	EXPECT_EQ(4, offsetof(struct drm_rbln_bo_info, flags));
	EXPECT_EQ(8, offsetof(struct drm_rbln_bo_info, va));
	EXPECT_EQ(16, offsetof(struct drm_rbln_bo_info, size));
	EXPECT_EQ(24, offsetof(struct drm_rbln_bo_info, mmap_offset));
	EXPECT_EQ(32, offsetof(struct drm_rbln_bo_info, placement));
	EXPECT_EQ(36, offsetof(struct drm_rbln_bo_info, bo_flags));
	EXPECT_EQ(0xc0286442ul, DRM_IOCTL_RBLN_BO_INFO);
	EXPECT_EQ(1, RBLN_BO_INFO_BY_VA);
}

TEST(param_numbers)
{
	EXPECT_EQ(0, RBLN_PARAM_ABI_VERSION);
	EXPECT_EQ(1, RBLN_PARAM_DEVICE_ID);
	EXPECT_EQ(2, RBLN_PARAM_HW_REVISION);
	EXPECT_EQ(3, RBLN_PARAM_EMULATED);
	EXPECT_EQ(4, RBLN_PARAM_DEVICE_MEMORY_SIZE);
	EXPECT_EQ(5, RBLN_PARAM_DEVICE_INDEX);
	EXPECT_EQ(6, RBLN_PARAM_VA_START);
	EXPECT_EQ(7, RBLN_PARAM_VA_SIZE);
	EXPECT_EQ(8, RBLN_PARAM_DEVICE_MEMORY_USED);
	EXPECT_EQ(13, RBLN_PARAM_FAILED_JOBS);
	EXPECT_EQ(14, RBLN_PARAM_VM_BIND_START);
	EXPECT_EQ(15, RBLN_PARAM_VM_BIND_SIZE);
	EXPECT_EQ(0xe1a0, RBLN_CHIP_ID_EMULATED);
}

TEST(vm_reserve)
{
	EXPECT_EQ(32, sizeof(struct drm_rbln_vm_reserve));
	EXPECT_EQ(0, offsetof(struct drm_rbln_vm_reserve, size));
	EXPECT_EQ(8, offsetof(struct drm_rbln_vm_reserve, align));
	EXPECT_EQ(16, offsetof(struct drm_rbln_vm_reserve, va));
	EXPECT_EQ(24, offsetof(struct drm_rbln_vm_reserve, flags));
	EXPECT_EQ(28, offsetof(struct drm_rbln_vm_reserve, pad));
	EXPECT_EQ(0xc0206446ul, DRM_IOCTL_RBLN_VM_RESERVE);
}

TEST(vm_release)
{
	EXPECT_EQ(8, sizeof(struct drm_rbln_vm_release));
	EXPECT_EQ(0x40086447ul, DRM_IOCTL_RBLN_VM_RELEASE);
}

TEST(vm_bind)
{
	EXPECT_EQ(64, sizeof(struct drm_rbln_vm_bind));
	EXPECT_EQ(0, offsetof(struct drm_rbln_vm_bind, op));
	EXPECT_EQ(4, offsetof(struct drm_rbln_vm_bind, flags));
	EXPECT_EQ(8, offsetof(struct drm_rbln_vm_bind, va));
	EXPECT_EQ(16, offsetof(struct drm_rbln_vm_bind, size));
	EXPECT_EQ(24, offsetof(struct drm_rbln_vm_bind, bo_offset));
	EXPECT_EQ(32, offsetof(struct drm_rbln_vm_bind, handle));
	EXPECT_EQ(36, offsetof(struct drm_rbln_vm_bind, wait_count));
	EXPECT_EQ(40, offsetof(struct drm_rbln_vm_bind, waits));
	EXPECT_EQ(48, offsetof(struct drm_rbln_vm_bind, signal));
	EXPECT_EQ(0x40406448ul, DRM_IOCTL_RBLN_VM_BIND);
	EXPECT_EQ(1, RBLN_VM_BIND_MAP);
	EXPECT_EQ(2, RBLN_VM_BIND_UNMAP);
	EXPECT_EQ(1, RBLN_VM_BIND_READ_ONLY);
}

TEST_HARNESS_MAIN
