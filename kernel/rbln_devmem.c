// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_devmem.c - device memory: who owns which bytes of the NPU's DRAM
 *
 * The buddy allocator shared by the DRM drivers (gpu_buddy, formerly
 * drm_buddy) hands out page-granular blocks of [0, mem_size); a buffer
 * object may be made of several blocks, which the MMU stitches into one
 * contiguous device virtual range. The memory itself belongs to the
 * hardware; this only decides who may use which part of it.
 */

#include <linux/delay.h>
#include <linux/sizes.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>

#include "rbln_drv.h"
#include "rbln_hw.h"

static void rbln_devmem_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln_device(drm);

	/* Every buffer object holds the device: none can be left. */
	WARN_ON(rbln_devmem_used(rdev));
	gpu_buddy_fini(&rdev->mem);
}

/*
 * Zeroes [@addr, @addr + @size) of device memory; done when the last write
 * returns. Objects are freed by many threads at once: unserialised, one
 * free's size would meet another's address, scrubbing memory someone
 * holds and leaving the freed memory to its next owner as it was.
 */
static void rbln_devmem_scrub(struct rbln_device *rdev, u64 addr, u64 size)
{
	mutex_lock(&rdev->scrub_lock);
	rbln_hw_write(rdev->hw, RBLN_REG_SCRUB_ADDR_LO, lower_32_bits(addr));
	rbln_hw_write(rdev->hw, RBLN_REG_SCRUB_ADDR_HI, upper_32_bits(addr));
	if (atomic_read(&rdev->slow_scrub) && atomic_xchg(&rdev->slow_scrub, 0))
		msleep(100);
	rbln_hw_write(rdev->hw, RBLN_REG_SCRUB_SIZE_LO, lower_32_bits(size));
	rbln_hw_write(rdev->hw, RBLN_REG_SCRUB_SIZE_HI, upper_32_bits(size));
	mutex_unlock(&rdev->scrub_lock);
}

/**
 * rbln_devmem_slow_scrub() - arm debugfs's "slow_scrub" for the next scrub
 * @rdev: the device
 *
 * Return: 0.
 */
int rbln_devmem_slow_scrub(struct rbln_device *rdev)
{
	atomic_set(&rdev->slow_scrub, 1);
	return 0;
}

/**
 * rbln_devmem_init() - set up the allocator for @rdev->mem_size bytes
 * @rdev: the device, with mem_size read from the hardware
 *
 * Torn down with the DRM device.
 *
 * Return: 0 or a negative errno.
 */
int rbln_devmem_init(struct rbln_device *rdev)
{
	int ret;

	ret = drmm_mutex_init(&rdev->drm, &rdev->scrub_lock);
	if (ret)
		return ret;
	/*
	 * Device memory outlives a binding, as on silicon: what the last
	 * driver left, objects freed after its removal among them, must not
	 * reach this one's users.
	 */
	rbln_devmem_scrub(rdev, 0, rdev->mem_size);

	ret = drmm_mutex_init(&rdev->drm, &rdev->mem_lock);
	if (ret)
		return ret;
	ret = gpu_buddy_init(&rdev->mem, rdev->mem_size, PAGE_SIZE);
	if (ret)
		return ret;
	return drmm_add_action_or_reset(&rdev->drm, rbln_devmem_fini, NULL);
}

/**
 * rbln_devmem_alloc() - allocate @size bytes of device memory
 * @rdev: the device
 * @size: bytes, a multiple of PAGE_SIZE
 * @blocks: list the blocks are added to
 *
 * Return: 0, or -ENOSPC when the free memory cannot hold @size.
 */
int rbln_devmem_alloc(struct rbln_device *rdev, u64 size, struct list_head *blocks)
{
	int ret;

	mutex_lock(&rdev->mem_lock);
	ret = gpu_buddy_alloc_blocks(&rdev->mem, 0, rdev->mem_size, size,
				     PAGE_SIZE, blocks, 0);
	mutex_unlock(&rdev->mem_lock);
	return ret;
}

/**
 * rbln_devmem_free() - scrub and give back the blocks of one allocation
 * @rdev: the device
 * @blocks: what rbln_devmem_alloc() returned; empty afterwards
 *
 * The next owner of the memory must not read the last one's data.
 */
void rbln_devmem_free(struct rbln_device *rdev, struct list_head *blocks)
{
	struct gpu_buddy_block *block;
	int idx;

	/* Not after removal: the next driver of the device scrubs it all. */
	if (drm_dev_enter(&rdev->drm, &idx)) {
		list_for_each_entry(block, blocks, link)
			rbln_devmem_scrub(rdev, gpu_buddy_block_offset(block),
					  gpu_buddy_block_size(&rdev->mem, block));
		drm_dev_exit(idx);
	}
	mutex_lock(&rdev->mem_lock);
	gpu_buddy_free_list(&rdev->mem, blocks, 0);
	mutex_unlock(&rdev->mem_lock);
}

/**
 * rbln_devmem_used() - bytes of device memory allocated, by every file
 * @rdev: the device
 *
 * Return: the exact sum of the sizes of all live device buffer objects.
 */
u64 rbln_devmem_used(struct rbln_device *rdev)
{
	u64 avail;

	mutex_lock(&rdev->mem_lock);
	avail = rdev->mem.avail;
	mutex_unlock(&rdev->mem_lock);
	return rdev->mem_size - avail;
}
