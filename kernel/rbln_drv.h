/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_drv.h - the rbln device, shared by the driver's units
 */
#ifndef __RBLN_DRV_H__
#define __RBLN_DRV_H__

#include <linux/gpu_buddy.h>
#include <linux/mutex.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>

#include "rbln_mmu.h"

#define RBLN_DRIVER_NAME	"rbln"
#define RBLN_DRIVER_DESC	"rbln NPU"
#define RBLN_DRIVER_MAJOR	1
#define RBLN_DRIVER_MINOR	0

struct rbln_hw;

/**
 * struct rbln_device - one NPU
 * @drm: the DRM device; its parent is the bus device.
 * @hw: the hardware, reached only through rbln_hw.h. Valid while @drm is;
 *	touch it only inside drm_dev_enter()/drm_dev_exit().
 * @chip_id: RBLN_REG_CHIP_ID, read at probe.
 * @hw_rev: RBLN_REG_HW_REV, read at probe.
 * @index: RBLN_REG_DEV_INDEX, read at probe.
 * @emulated: RBLN_HW_CFG_EMULATED, read at probe.
 * @mem_size: device memory in bytes, read at probe.
 * @mem_lock: protects @mem.
 * @mem: allocator of device memory, [0, @mem_size).
 *
 * Fields read at probe never change afterwards and need no lock.
 */
struct rbln_device {
	struct drm_device drm;
	struct rbln_hw *hw;
	u32 chip_id;
	u32 hw_rev;
	u32 index;
	bool emulated;
	u64 mem_size;

	struct mutex mem_lock; /* protects mem */
	struct gpu_buddy mem;
};

/**
 * struct rbln_file - what the driver keeps per open file
 * @vm: the file's device address space.
 */
struct rbln_file {
	struct rbln_vm vm;
};

static inline struct rbln_device *to_rbln_device(struct drm_device *drm)
{
	return container_of(drm, struct rbln_device, drm);
}

static inline struct rbln_file *to_rbln_file(struct drm_file *file)
{
	return file->driver_priv;
}

/* rbln_devmem.c */
int rbln_devmem_init(struct rbln_device *rdev);
int rbln_devmem_alloc(struct rbln_device *rdev, u64 size, struct list_head *blocks);
void rbln_devmem_free(struct rbln_device *rdev, struct list_head *blocks);
u64 rbln_devmem_used(struct rbln_device *rdev);

/* rbln_sysfs.c */
extern const struct attribute_group *rbln_dev_groups[];

/* rbln_debugfs.c */
void rbln_debugfs_init(struct rbln_device *rdev);

#endif /* __RBLN_DRV_H__ */
