// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_libdrm_rbln - libdrm_rbln's rejections that need no device
 *
 * Runs on the build machine, where rbln.ko is not loaded: this is also the
 * "driver absent" case of every function.
 */

#include <fcntl.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "rbln_drm.h"

TEST(enumerate_without_driver)
{
	unsigned int minors[4];

	if (access("/sys/bus/rbln_emu", F_OK) == 0)
		SKIP(return, "rbln.ko is loaded here");
	EXPECT_EQ(0, rbln_drm_enumerate(minors, 4));
	EXPECT_EQ(0, rbln_drm_enumerate(NULL, 0));
}

TEST(enumerate_rejects_null_array)
{
	EXPECT_EQ(-EINVAL, rbln_drm_enumerate(NULL, 1));
}

TEST(open_rejects_null_out)
{
	EXPECT_EQ(-EINVAL, rbln_drm_open(0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_open_fd(0, NULL));
}

TEST(open_missing_node)
{
	struct rbln_drm_device *dev = (void *)1;

	EXPECT_EQ(-ENOENT, rbln_drm_open(4000, &dev));
	EXPECT_EQ(NULL, dev);
}

TEST(open_fd_rejects_non_accel)
{
	struct rbln_drm_device *dev = (void *)1;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	ASSERT_GE(fd, 0);
	EXPECT_EQ(-ENODEV, rbln_drm_open_fd(fd, &dev));
	EXPECT_EQ(NULL, dev);
	/* The descriptor was duplicated, not taken. */
	EXPECT_EQ(0, close(fd));
}

TEST(open_fd_rejects_bad_fd)
{
	struct rbln_drm_device *dev;

	EXPECT_EQ(-EBADF, rbln_drm_open_fd(-1, &dev));
	EXPECT_EQ(-EBADF, rbln_drm_open_fd(1 << 20, &dev));
}

TEST(close_null)
{
	rbln_drm_close(NULL);
}

TEST(get_param_rejects_null)
{
	uint64_t v;

	EXPECT_EQ(-EINVAL, rbln_drm_get_param(NULL, RBLN_PARAM_ABI_VERSION, &v));
}

TEST(bo_functions_reject_null)
{
	struct rbln_drm_bo_info info;
	uint32_t h;
	void *p;
	int fd;

	EXPECT_EQ(-EINVAL, rbln_drm_bo_create(NULL, 4096, RBLN_BO_HOST, 0, &h, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info(NULL, 1, &info));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info_by_va(NULL, 1ull << 32, &info));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_close(NULL, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_export(NULL, 1, &fd));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_import(NULL, 0, &h));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_mmap(NULL, 1, 0, &p, NULL));
}

TEST_HARNESS_MAIN
