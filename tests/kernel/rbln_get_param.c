// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_get_param - DRM_IOCTL_RBLN_GET_PARAM: every parameter, every rejection
 */

#include <limits.h>
#include <sys/ioctl.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

FIXTURE(param) {
	struct rbln_drm_device *dev;
	int fd;
	unsigned int index;
};

FIXTURE_VARIANT(param) {
	unsigned int index;	/* which initial device */
};

FIXTURE_VARIANT_ADD(param, first) { .index = 0 };
FIXTURE_VARIANT_ADD(param, second) { .index = 1 };

FIXTURE_SETUP(param)
{
	int minor = rbln_test_minor(variant->index);

	if (minor < 0)
		SKIP(return, "no device %u", variant->index);
	ASSERT_EQ(0, rbln_drm_open(minor, &self->dev));
	self->fd = rbln_drm_fd(self->dev);
	self->index = variant->index;
}

FIXTURE_TEARDOWN(param)
{
	rbln_drm_close(self->dev);
}

static uint64_t param(struct __test_metadata *_metadata,
		      struct rbln_drm_device *dev, uint32_t p)
{
	uint64_t v = 0xdeadbeef;

	EXPECT_EQ(0, rbln_drm_get_param(dev, p, &v));
	return v;
}

TEST_F(param, abi_version)
{
	EXPECT_EQ(RBLN_ABI_VERSION, param(_metadata, self->dev, RBLN_PARAM_ABI_VERSION));
}

TEST_F(param, device_id)
{
	EXPECT_EQ(RBLN_CHIP_ID_EMULATED, param(_metadata, self->dev, RBLN_PARAM_DEVICE_ID));
}

TEST_F(param, hw_revision)
{
	EXPECT_EQ(1u << 16, param(_metadata, self->dev, RBLN_PARAM_HW_REVISION));
}

TEST_F(param, emulated)
{
	EXPECT_EQ(1, param(_metadata, self->dev, RBLN_PARAM_EMULATED));
}

/* PCI NPUs get the same size (meson passes --npu-mem-mib as emu_mem_mib). */
TEST_F(param, device_memory_size)
{
	long long mib = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/emu_mem_mib");

	ASSERT_GT(mib, 0);
	EXPECT_EQ((uint64_t)mib << 20,
		  param(_metadata, self->dev, RBLN_PARAM_DEVICE_MEMORY_SIZE));
}

TEST_F(param, device_index)
{
	EXPECT_EQ(self->index, param(_metadata, self->dev, RBLN_PARAM_DEVICE_INDEX));
}

TEST_F(param, va_range)
{
	uint64_t start = param(_metadata, self->dev, RBLN_PARAM_VA_START);
	uint64_t size = param(_metadata, self->dev, RBLN_PARAM_VA_SIZE);

	/* Address 0 and the low 4 GiB never map; the range is page-aligned. */
	EXPECT_GE(start, 1ull << 32);
	EXPECT_EQ(0, start % 4096);
	EXPECT_GE(size, 1ull << 40);
	EXPECT_EQ(0, size % 4096);
	EXPECT_LE(start + size, 1ull << 48);
}

TEST_F(param, device_memory_used)
{
	uint64_t total = param(_metadata, self->dev, RBLN_PARAM_DEVICE_MEMORY_SIZE);
	uint32_t h;

	EXPECT_EQ(0, param(_metadata, self->dev, RBLN_PARAM_DEVICE_MEMORY_USED));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, total, RBLN_BO_DEVICE, 0, &h, NULL));
	EXPECT_EQ(total, param(_metadata, self->dev, RBLN_PARAM_DEVICE_MEMORY_USED));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, h));
	EXPECT_EQ(0, param(_metadata, self->dev, RBLN_PARAM_DEVICE_MEMORY_USED));
}

TEST_F(param, execution)
{
	uint64_t caps = param(_metadata, self->dev, RBLN_PARAM_ISA_CAPS);
	uint32_t d;

	EXPECT_EQ(rbln_test_attr(self->index, "num_rings"),
		  (long long)param(_metadata, self->dev, RBLN_PARAM_NUM_RINGS));
	EXPECT_EQ(RBLN_ISA_CAP_DMA, caps & RBLN_ISA_CAP_DMA);
	EXPECT_EQ(RBLN_ISA_CAP_ELEMENTWISE, caps & RBLN_ISA_CAP_ELEMENTWISE);
	EXPECT_EQ(RBLN_ISA_CAP_REDUCE, caps & RBLN_ISA_CAP_REDUCE);
	EXPECT_EQ(RBLN_ISA_CAP_GEMM, caps & RBLN_ISA_CAP_GEMM);
	EXPECT_EQ(RBLN_ISA_CAP_WAIT, caps & RBLN_ISA_CAP_WAIT);
	for (d = 0; d < RBLN_DTYPE_COUNT; d++) {
		EXPECT_NE(0, caps & RBLN_ISA_CAP_DTYPE(d)) TH_LOG("dtype %u", d);
	}
	EXPECT_GE(param(_metadata, self->dev, RBLN_PARAM_MAX_CMD_SIZE), 4096);
	EXPECT_EQ(rbln_test_attr(self->index, "reset_count"),
		  (long long)param(_metadata, self->dev, RBLN_PARAM_RESET_COUNT));
	/* Per file: a new file has had no job fail. */
	EXPECT_EQ(0, param(_metadata, self->dev, RBLN_PARAM_FAILED_JOBS));
}

TEST_F(param, unknown_param)
{
	static const uint32_t bad[] = {
		RBLN_PARAM_VM_BIND_SIZE + 1, 64, INT_MAX, UINT_MAX,
	};
	struct drm_rbln_get_param arg;
	unsigned int i;
	uint64_t v = 7;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&arg, 0, sizeof(arg));
		arg.param = bad[i];
		EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, &arg));
		EXPECT_EQ(EINVAL, errno);
		EXPECT_EQ(-EINVAL, rbln_drm_get_param(self->dev, bad[i], &v));
		EXPECT_EQ(7, v);
	}
}

TEST_F(param, nonzero_pad)
{
	struct drm_rbln_get_param arg = {
		.param = RBLN_PARAM_ABI_VERSION,
		.pad = 1,
		.value = 0,
	};

	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, &arg));
	EXPECT_EQ(EINVAL, errno);
	arg.pad = 0x80000000;
	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, &arg));
	EXPECT_EQ(EINVAL, errno);
	arg.pad = 0;
	EXPECT_EQ(0, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, &arg));
	EXPECT_EQ(RBLN_ABI_VERSION, arg.value);
}

TEST_F(param, bad_user_pointer)
{
	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, (void *)16));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_GET_PARAM, NULL));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(param, library_rejects_null)
{
	uint64_t v;

	EXPECT_EQ(-EINVAL, rbln_drm_get_param(self->dev, RBLN_PARAM_ABI_VERSION, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_get_param(NULL, RBLN_PARAM_ABI_VERSION, &v));
}

TEST_HARNESS_MAIN
