/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_drv.h - the rbln device, shared by the driver's units
 */
#ifndef __RBLN_DRV_H__
#define __RBLN_DRV_H__

#include <drm/drm_device.h>

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
};

static inline struct rbln_device *to_rbln_device(struct drm_device *drm)
{
	return container_of(drm, struct rbln_device, drm);
}

#endif /* __RBLN_DRV_H__ */
