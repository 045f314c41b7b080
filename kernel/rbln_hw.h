/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_hw.h - the hardware interface of an rbln NPU
 *
 * Everything the driver knows about the device goes through this header: a
 * 32-bit register block reached by read/write accessors. The emulated NPU in
 * emu/ implements it in software; a PCI backend would implement the same
 * accessors with readl()/writel() on BAR0 and nothing above it would change.
 */
#ifndef __RBLN_HW_H__
#define __RBLN_HW_H__

#include <linux/types.h>

/* Register block, byte offsets. All registers are 32 bits wide. */
#define RBLN_REG_CHIP_ID		0x000	/* RO: RBLN_CHIP_ID_* (UAPI) */
#define RBLN_REG_HW_REV			0x004	/* RO: (major << 16) | minor */
#define RBLN_REG_HW_CFG			0x008	/* RO: RBLN_HW_CFG_* */
#define RBLN_REG_DEV_INDEX		0x00c	/* RO: index on the bus */
#define RBLN_REG_MEM_SIZE_LO		0x010	/* RO: device memory, bytes */
#define RBLN_REG_MEM_SIZE_HI		0x014
#define RBLN_REG_SCRATCH		0x018	/* RW: liveness probe */

#define RBLN_HW_CFG_EMULATED		BIT(0)

/* What every register reads as once the device is gone, as on PCI. */
#define RBLN_REG_DEAD			0xffffffffu

struct rbln_hw;

/**
 * struct rbln_hw_ops - register accessors of one backend
 * @read32: read the register at byte offset @reg.
 * @write32: write @val to the register at byte offset @reg.
 *
 * Both may be called from any context and must not sleep.
 */
struct rbln_hw_ops {
	u32 (*read32)(struct rbln_hw *hw, u32 reg);
	void (*write32)(struct rbln_hw *hw, u32 reg, u32 val);
};

/**
 * struct rbln_hw - one NPU as the driver sees it
 * @ops: the backend's accessors.
 */
struct rbln_hw {
	const struct rbln_hw_ops *ops;
};

static inline u32 rbln_hw_read(struct rbln_hw *hw, u32 reg)
{
	return hw->ops->read32(hw, reg);
}

static inline void rbln_hw_write(struct rbln_hw *hw, u32 reg, u32 val)
{
	hw->ops->write32(hw, reg, val);
}

static inline u64 rbln_hw_read64(struct rbln_hw *hw, u32 lo_reg)
{
	return rbln_hw_read(hw, lo_reg) |
	       (u64)rbln_hw_read(hw, lo_reg + 4) << 32;
}

#endif /* __RBLN_HW_H__ */
