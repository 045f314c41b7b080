// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_bo - buffer objects: BO_CREATE, BO_INFO, GEM_CLOSE, mmap, device
 * memory accounting and exhaustion
 *
 * Run with emu_devices>=1. Every test ends with device memory back at zero.
 */

#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define PAGE 4096ull

FIXTURE(bo) {
	struct rbln_drm_device *dev;
	int fd;
	uint64_t mem_size, va_start, va_size;
};

FIXTURE_SETUP(bo)
{
	ASSERT_EQ(0, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_test_open(0, &self->dev));
	self->fd = rbln_drm_fd(self->dev);
	ASSERT_EQ(0, rbln_drm_get_param(self->dev, RBLN_PARAM_DEVICE_MEMORY_SIZE,
					&self->mem_size));
	ASSERT_EQ(0, rbln_drm_get_param(self->dev, RBLN_PARAM_VA_START, &self->va_start));
	ASSERT_EQ(0, rbln_drm_get_param(self->dev, RBLN_PARAM_VA_SIZE, &self->va_size));
}

FIXTURE_TEARDOWN(bo)
{
	rbln_drm_close(self->dev);
	/* Closing the file released everything it held. */
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

static int create_raw(int fd, struct drm_rbln_bo_create *args)
{
	return ioctl(fd, DRM_IOCTL_RBLN_BO_CREATE, args) ? -errno : 0;
}

static int create(int fd, uint64_t size, uint32_t placement, uint32_t flags)
{
	struct drm_rbln_bo_create args = {
		.size = size, .placement = placement, .flags = flags,
	};

	return create_raw(fd, &args);
}

TEST_F(bo, create_device_and_host)
{
	struct rbln_drm_bo_info info;
	uint64_t vd, vh, used;
	uint32_t hd, hh;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 3 * PAGE + 1, RBLN_BO_DEVICE, 0, &hd, &vd));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 5000, RBLN_BO_HOST, 0, &hh, &vh));
	EXPECT_NE(hd, hh);

	ASSERT_EQ(0, rbln_drm_bo_info(self->dev, hd, &info));
	EXPECT_EQ(hd, info.handle);
	EXPECT_EQ(RBLN_BO_DEVICE, info.placement);
	EXPECT_EQ(0, info.flags);
	EXPECT_EQ(4 * PAGE, info.size);
	EXPECT_EQ(vd, info.va);
	EXPECT_EQ(0, info.mmap_offset);

	ASSERT_EQ(0, rbln_drm_bo_info(self->dev, hh, &info));
	EXPECT_EQ(RBLN_BO_HOST, info.placement);
	EXPECT_EQ(2 * PAGE, info.size);
	EXPECT_EQ(vh, info.va);
	EXPECT_NE(0, info.mmap_offset);

	/* Both inside the advertised range, page-aligned, not overlapping. */
	EXPECT_GE(vd, self->va_start);
	EXPECT_LE(vd + 4 * PAGE, self->va_start + self->va_size);
	EXPECT_EQ(0, vd % PAGE);
	EXPECT_TRUE(vh >= vd + 4 * PAGE || vd >= vh + 2 * PAGE);

	/* Device memory counts DEVICE objects only, exactly. */
	EXPECT_EQ(4 * PAGE, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_get_param(self->dev, RBLN_PARAM_DEVICE_MEMORY_USED, &used));
	EXPECT_EQ(4 * PAGE, used);

	EXPECT_EQ(0, rbln_drm_bo_close(self->dev, hd));
	EXPECT_EQ(0, rbln_test_mem_used(0));
	EXPECT_EQ(0, rbln_drm_bo_close(self->dev, hh));
}

TEST_F(bo, create_returns_rounded_size)
{
	struct drm_rbln_bo_create args = { .size = 1, .placement = RBLN_BO_HOST };

	ASSERT_EQ(0, create_raw(self->fd, &args));
	EXPECT_EQ(PAGE, args.size);
	EXPECT_NE(0, args.handle);
	EXPECT_NE(0, args.va);
}

TEST_F(bo, large_objects_are_2m_aligned)
{
	uint32_t h;
	uint64_t va;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 2 << 20, RBLN_BO_DEVICE, 0, &h, &va));
	EXPECT_EQ(0, va % (2 << 20));
}

TEST_F(bo, read_only_flag)
{
	struct rbln_drm_bo_info info;
	uint32_t h;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_DEVICE,
					RBLN_BO_READ_ONLY, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_info(self->dev, h, &info));
	EXPECT_EQ(RBLN_BO_READ_ONLY, info.flags);
}

TEST_F(bo, create_rejects_bad_sizes)
{
	static const uint64_t bad[] = {
		0, UINT64_MAX, UINT64_MAX - PAGE + 2, 1ull << 62, 1ull << 48,
	};
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, create(self->fd, bad[i], RBLN_BO_DEVICE, 0))
			TH_LOG("size %#llx", (unsigned long long)bad[i]);
		EXPECT_EQ(-EINVAL, create(self->fd, bad[i], RBLN_BO_HOST, 0))
			TH_LOG("size %#llx", (unsigned long long)bad[i]);
	}
	/* Fits the address space but not the device. */
	EXPECT_EQ(-ENOSPC, create(self->fd, self->mem_size + PAGE, RBLN_BO_DEVICE, 0));
	/* Fits the address space but not the machine. */
	EXPECT_EQ(-ENOMEM, create(self->fd, 1ull << 45, RBLN_BO_HOST, 0));
	/* Past the range the driver places objects in, which VM_BIND's follows. */
	EXPECT_EQ(-EINVAL, create(self->fd, 1ull << 46, RBLN_BO_HOST, 0));
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(bo, create_rejects_bad_placement_and_flags)
{
	static const uint32_t placements[] = { 0, 3, 4, UINT32_MAX };
	unsigned int i;
	struct drm_rbln_bo_create args = {
		.size = PAGE, .placement = RBLN_BO_HOST, .pad = 1,
	};

	for (i = 0; i < sizeof(placements) / sizeof(placements[0]); i++)
		EXPECT_EQ(-EINVAL, create(self->fd, PAGE, placements[i], 0));
	EXPECT_EQ(-EINVAL, create(self->fd, PAGE, RBLN_BO_HOST, RBLN_BO_IMPORTED));
	EXPECT_EQ(-EINVAL, create(self->fd, PAGE, RBLN_BO_HOST, 1u << 7));
	EXPECT_EQ(-EINVAL, create(self->fd, PAGE, RBLN_BO_DEVICE, 1u << 31));
	EXPECT_EQ(-EINVAL, create_raw(self->fd, &args));
	EXPECT_EQ(-EFAULT, ioctl(self->fd, DRM_IOCTL_RBLN_BO_CREATE, (void *)8) ? -errno : 0);
	/* The library checks its own arguments. */
	EXPECT_EQ(-EINVAL, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, NULL, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_create(NULL, PAGE, RBLN_BO_HOST, 0, &args.handle, NULL));
}

TEST_F(bo, info_rejects_unknown_and_closed_handles)
{
	struct drm_rbln_bo_info args = { 0 };
	struct rbln_drm_bo_info info;
	uint32_t h;

	EXPECT_EQ(-ENOENT, rbln_drm_bo_info(self->dev, 0, &info));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info(self->dev, 12345, &info));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info(self->dev, UINT32_MAX, &info));

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, h));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info(self->dev, h, &info));
	/* GEM_CLOSE of a closed or unknown handle. */
	EXPECT_EQ(-EINVAL, rbln_drm_bo_close(self->dev, h));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_close(self->dev, 777));

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	args.handle = h;
	args.flags = 1u << 1;
	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_BO_INFO, &args));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info(self->dev, h, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info(NULL, h, &info));
}

TEST_F(bo, info_by_va)
{
	struct rbln_drm_bo_info info;
	uint32_t h1, h2;
	uint64_t va1, va2;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 3 * PAGE, RBLN_BO_DEVICE, 0, &h1, &va1));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h2, &va2));

	ASSERT_EQ(0, rbln_drm_bo_info_by_va(self->dev, va1, &info));
	EXPECT_EQ(h1, info.handle);
	EXPECT_EQ(va1, info.va);
	ASSERT_EQ(0, rbln_drm_bo_info_by_va(self->dev, va1 + 3 * PAGE - 1, &info));
	EXPECT_EQ(h1, info.handle);
	ASSERT_EQ(0, rbln_drm_bo_info_by_va(self->dev, va2 + 17, &info));
	EXPECT_EQ(h2, info.handle);
	EXPECT_EQ(RBLN_BO_HOST, info.placement);

	/* Past the end is the guard page, not the next object. */
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(self->dev, va1 + 3 * PAGE, &info));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(self->dev, 0, &info));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(self->dev, self->va_start - 1, &info));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(self->dev, UINT64_MAX, &info));

	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, h1));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(self->dev, va1, &info));
}

TEST_F(bo, mmap_host_object)
{
	uint64_t size;
	uint32_t *p;
	unsigned int i;
	uint32_t h;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 4 * PAGE, RBLN_BO_HOST, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->dev, h, PROT_READ | PROT_WRITE, (void **)&p, &size));
	ASSERT_EQ(4 * PAGE, size);
	for (i = 0; i < size / 4; i++) {
		EXPECT_EQ(0, p[i]) TH_LOG("new memory is not zero at %u", i);
	}
	for (i = 0; i < size / 4; i++)
		p[i] = i * 2654435761u;
	ASSERT_EQ(0, munmap(p, size));

	/* The data is the object's, not the mapping's. */
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->dev, h, PROT_READ, (void **)&p, &size));
	for (i = 0; i < size / 4; i++)
		ASSERT_EQ(i * 2654435761u, p[i]);
	ASSERT_EQ(0, munmap(p, size));
}

TEST_F(bo, mmap_rejections)
{
	struct rbln_drm_bo_info info;
	uint32_t hh, hd;
	void *p;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 2 * PAGE, RBLN_BO_HOST, 0, &hh, NULL));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 2 * PAGE, RBLN_BO_DEVICE, 0, &hd, NULL));
	ASSERT_EQ(0, rbln_drm_bo_info(self->dev, hh, &info));

	/* Beyond the object. */
	p = mmap(NULL, 3 * PAGE, PROT_READ, MAP_SHARED, self->fd, info.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, self->fd, info.mmap_offset + PAGE);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* A DEVICE object has no CPU mapping. */
	EXPECT_EQ(-ENODEV, rbln_drm_bo_mmap(self->dev, hd, PROT_READ, &p, NULL));
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, self->fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* Nor does a closed object. */
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hh));
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, self->fd, info.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-EINVAL, rbln_drm_bo_mmap(self->dev, hd, PROT_READ, NULL, NULL));
}

TEST_F(bo, mapping_outlives_handle)
{
	uint64_t size;
	uint32_t h;
	char *p;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->dev, h, PROT_READ | PROT_WRITE, (void **)&p, &size));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, h));
	/* The CPU mapping holds the object. */
	p[0] = 'x';
	EXPECT_EQ('x', p[0]);
	ASSERT_EQ(0, munmap(p, size));
}

TEST_F(bo, fill_device_memory_to_the_last_byte)
{
	uint64_t left = self->mem_size, chunk, used;
	unsigned int n = 0, max = 4096, i;
	uint32_t *handles = calloc(max, sizeof(*handles));
	uint32_t h;

	ASSERT_NE(NULL, handles);
	/* Mixed sizes: large chunks, then odd page counts down to one page. */
	while (left) {
		chunk = left >= (8 << 20) ? (3 << 20) + PAGE : left >= 5 * PAGE ? 5 * PAGE : PAGE;
		if (chunk > left)
			chunk = left;
		ASSERT_LT(n, max);
		ASSERT_EQ(0, rbln_drm_bo_create(self->dev, chunk, RBLN_BO_DEVICE, 0,
						&handles[n], NULL))
			TH_LOG("%llu bytes left", (unsigned long long)left);
		n++;
		left -= chunk;
	}
	EXPECT_EQ(self->mem_size, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_get_param(self->dev, RBLN_PARAM_DEVICE_MEMORY_USED, &used));
	EXPECT_EQ(self->mem_size, used);

	/* Full: the next page fails cleanly, HOST objects still work. */
	EXPECT_EQ(-ENOSPC, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_DEVICE, 0, &h, NULL));
	EXPECT_EQ(0, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	EXPECT_EQ(0, rbln_drm_bo_close(self->dev, h));

	for (i = 0; i < n; i++)
		ASSERT_EQ(0, rbln_drm_bo_close(self->dev, handles[i]));
	EXPECT_EQ(0, rbln_test_mem_used(0));

	/* The whole capacity again, in one object. */
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, self->mem_size, RBLN_BO_DEVICE, 0, &h, NULL));
	EXPECT_EQ(self->mem_size, rbln_test_mem_used(0));
	EXPECT_EQ(-ENOSPC, rbln_drm_bo_create(self->dev, PAGE, RBLN_BO_DEVICE, 0, &h, NULL));
	free(handles);
}

TEST_F(bo, sysfs_memory)
{
	uint32_t h;

	EXPECT_EQ((long long)self->mem_size, rbln_test_attr(0, "memory_total"));
	EXPECT_EQ(1, rbln_test_attr(0, "emulated"));
	EXPECT_EQ(4, rbln_test_attr(0, "num_rings"));
	EXPECT_EQ(0, rbln_test_attr(0, "memory_used"));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 1 << 20, RBLN_BO_DEVICE, 0, &h, NULL));
	EXPECT_EQ(1 << 20, rbln_test_attr(0, "memory_used"));
	/* Another device is not charged. */
	if (rbln_test_minor(1) >= 0)
		EXPECT_EQ(0, rbln_test_mem_used(1));
}

TEST_F(bo, two_files_are_charged_to_one_device)
{
	struct rbln_drm_device *other;
	uint32_t h;

	ASSERT_EQ(0, rbln_test_open(0, &other));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 1 << 20, RBLN_BO_DEVICE, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_create(other, 2 << 20, RBLN_BO_DEVICE, 0, &h, NULL));
	EXPECT_EQ(3 << 20, rbln_test_mem_used(0));
	rbln_drm_close(other);
	EXPECT_EQ(1 << 20, rbln_test_mem_used(0));
}

TEST_HARNESS_MAIN
