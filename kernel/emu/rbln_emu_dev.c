// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_dev.c - the emulated NPU's register block and lifetime
 *
 * Whatever its home, the NPU is created with rbln_emu_dev_init(), answers
 * the register accesses its home forwards, raises interrupts through the
 * home, and goes with rbln_emu_dev_stop() (from then on it touches no
 * memory and its registers read as all-ones) and rbln_emu_dev_fini().
 */

#include "rbln_emu_internal.h"

#define RBLN_EMU_HW_REV		((1 << 16) | 0)

static bool rbln_emu_ring_reg(u32 reg, unsigned int *ring, u32 *off)
{
	if (reg < RBLN_RING_REG(0, 0) || reg >= RBLN_RING_REG(RBLN_EMU_NUM_RINGS, 0))
		return false;
	*ring = (reg - RBLN_RING_REG(0, 0)) / 0x40;
	*off = (reg - RBLN_RING_REG(0, 0)) % 0x40;
	return true;
}

static void rbln_emu_set_lo(u64 *reg, u32 val)
{
	WRITE_ONCE(*reg, (*reg & GENMASK_ULL(63, 32)) | val);
}

static void rbln_emu_set_hi(u64 *reg, u32 val)
{
	WRITE_ONCE(*reg, (*reg & GENMASK_ULL(31, 0)) | (u64)val << 32);
}

/*
 * FUNC_RESET: back to the state of power-on, but for DRAM, which keeps
 * its contents as DRAM does across a reset. Every ring stops as on RESET
 * and clears its registers; until they all have, FUNC_RESET reads 1.
 */
static void rbln_emu_func_reset(struct rbln_emu_dev *edev)
{
	unsigned int r;

	WRITE_ONCE(edev->scratch, 0);
	mutex_lock(&edev->scrub_lock);
	edev->scrub_addr = 0;
	edev->scrub_size = 0;
	mutex_unlock(&edev->scrub_lock);
	atomic_set(&edev->inject, 0);
	atomic_set(&edev->irq_mask, 0);
	/*
	 * The rings are told to stop before the tables go: what they run
	 * until they stop may still read them, and a fault that makes is the
	 * reset's doing, not the job's (rbln_emu_ring_work()).
	 */
	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++)
		rbln_emu_ring_power_on(&edev->rings[r]);
	/* The stops before the tables; pairs with the command processor's fault check. */
	smp_mb();
	WRITE_ONCE(edev->ctx_table, 0);
	WRITE_ONCE(edev->peer_table, 0);
	atomic_set(&edev->irq_status, 0);
}

/*
 * The scrubber, which writing SIZE_HI starts. Writes from several CPUs
 * reach it one at a time, as over a bus: two scrubs never free the same
 * DRAM pages at once, whatever the driver does.
 */
static void rbln_emu_scrub_write(struct rbln_emu_dev *edev, u32 reg, u32 val)
{
	mutex_lock(&edev->scrub_lock);
	switch (reg) {
	case RBLN_REG_SCRUB_ADDR_LO:
		rbln_emu_set_lo(&edev->scrub_addr, val);
		break;
	case RBLN_REG_SCRUB_ADDR_HI:
		rbln_emu_set_hi(&edev->scrub_addr, val);
		break;
	case RBLN_REG_SCRUB_SIZE_LO:
		rbln_emu_set_lo(&edev->scrub_size, val);
		break;
	case RBLN_REG_SCRUB_SIZE_HI:
		rbln_emu_set_hi(&edev->scrub_size, val);
		rbln_emu_dram_scrub(edev, edev->scrub_addr, edev->scrub_size);
		break;
	}
	mutex_unlock(&edev->scrub_lock);
}

static bool rbln_emu_func_reset_busy(struct rbln_emu_dev *edev)
{
	unsigned int r;

	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++)
		if (rbln_emu_ring_read(&edev->rings[r], RBLN_RING_RESET))
			return true;
	return false;
}

/**
 * rbln_emu_reg_read() - a read of the register block
 * @edev: the device
 * @reg: byte offset of a 32-bit register
 *
 * Return: the register's value; RBLN_REG_DEAD once the device is stopped.
 */
u32 rbln_emu_reg_read(struct rbln_emu_dev *edev, u32 reg)
{
	unsigned int ring;
	u32 off;

	if (!READ_ONCE(edev->present))
		return RBLN_REG_DEAD;
	if (rbln_emu_ring_reg(reg, &ring, &off))
		return rbln_emu_ring_read(&edev->rings[ring], off);

	switch (reg) {
	case RBLN_REG_CHIP_ID:
		return RBLN_CHIP_ID_EMULATED;
	case RBLN_REG_HW_REV:
		return RBLN_EMU_HW_REV;
	case RBLN_REG_HW_CFG:
		return RBLN_HW_CFG_EMULATED;
	case RBLN_REG_DEV_INDEX:
		return edev->index;
	case RBLN_REG_MEM_SIZE_LO:
		return lower_32_bits(edev->mem_size);
	case RBLN_REG_MEM_SIZE_HI:
		return upper_32_bits(edev->mem_size);
	case RBLN_REG_SCRATCH:
		return READ_ONCE(edev->scratch);
	case RBLN_REG_NUM_RINGS:
		return RBLN_EMU_NUM_RINGS;
	case RBLN_REG_ISA_CAPS:
		return RBLN_ISA_CAP_DMA | RBLN_ISA_CAP_ELEMENTWISE | RBLN_ISA_CAP_REDUCE |
		       RBLN_ISA_CAP_GEMM | RBLN_ISA_CAP_WAIT | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_F32) |
		       RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_F16) | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_BF16) |
		       RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_I32) | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_I8);
	case RBLN_REG_MAX_CMD_SIZE:
		return RBLN_EMU_MAX_CMD_SIZE;
	case RBLN_REG_IRQ_STATUS:
		return atomic_read(&edev->irq_status);
	case RBLN_REG_IRQ_MASK:
		return atomic_read(&edev->irq_mask);
	case RBLN_REG_CTX_TABLE_LO:
		return lower_32_bits(READ_ONCE(edev->ctx_table));
	case RBLN_REG_CTX_TABLE_HI:
		return upper_32_bits(READ_ONCE(edev->ctx_table));
	case RBLN_REG_MMU_INVALIDATE:
		return READ_ONCE(edev->deaf) || rbln_emu_invalidate_busy(edev);
	case RBLN_REG_SERIAL_LO:
		return lower_32_bits(edev->serial);
	case RBLN_REG_SERIAL_HI:
		return upper_32_bits(edev->serial);
	case RBLN_REG_PEER_TABLE_LO:
		return lower_32_bits(READ_ONCE(edev->peer_table));
	case RBLN_REG_PEER_TABLE_HI:
		return upper_32_bits(READ_ONCE(edev->peer_table));
	case RBLN_REG_FUNC_RESET:
		return READ_ONCE(edev->deaf) || rbln_emu_func_reset_busy(edev);
	default:
		/* Unimplemented registers read as zero, as on most silicon. */
		return 0;
	}
}

/**
 * rbln_emu_reg_write() - a write to the register block
 * @edev: the device
 * @reg: byte offset of a 32-bit register
 * @val: the value
 *
 * Writes to read-only or unknown registers, and to a stopped device, are
 * dropped.
 */
void rbln_emu_reg_write(struct rbln_emu_dev *edev, u32 reg, u32 val)
{
	unsigned int ring;
	u32 off;

	if (!READ_ONCE(edev->present))
		return;
	if (rbln_emu_ring_reg(reg, &ring, &off)) {
		rbln_emu_ring_write(&edev->rings[ring], off, val);
		return;
	}

	switch (reg) {
	case RBLN_REG_SCRATCH:
		WRITE_ONCE(edev->scratch, val);
		break;
	case RBLN_REG_IRQ_STATUS:
		atomic_andnot(val, &edev->irq_status);
		break;
	case RBLN_REG_IRQ_MASK:
		atomic_set(&edev->irq_mask, val);
		break;
	case RBLN_REG_CTX_TABLE_LO:
		rbln_emu_set_lo(&edev->ctx_table, val);
		break;
	case RBLN_REG_CTX_TABLE_HI:
		rbln_emu_set_hi(&edev->ctx_table, val);
		break;
	case RBLN_REG_PEER_TABLE_LO:
		rbln_emu_set_lo(&edev->peer_table, val);
		break;
	case RBLN_REG_PEER_TABLE_HI:
		rbln_emu_set_hi(&edev->peer_table, val);
		break;
	case RBLN_REG_MMU_INVALIDATE:
		rbln_emu_invalidate_start(edev);
		break;
	case RBLN_REG_SCRUB_ADDR_LO ... RBLN_REG_SCRUB_SIZE_HI:
		rbln_emu_scrub_write(edev, reg, val);
		break;
	case RBLN_REG_INJECT:
		atomic_or(val & (RBLN_INJECT_HANG | RBLN_INJECT_DMA_ERROR | RBLN_INJECT_FAULT |
				 RBLN_INJECT_STUCK | RBLN_INJECT_NO_PAGE), &edev->inject);
		if (val & RBLN_INJECT_DEAF)
			WRITE_ONCE(edev->deaf, true);
		break;
	case RBLN_REG_FUNC_RESET:
		rbln_emu_func_reset(edev);
		break;
	default:
		break;
	}
}

/**
 * rbln_emu_raise_irq() - a ring has news for the driver
 * @edev: the device
 * @ring: the ring
 * @fault: the news is a fault
 *
 * Sets the ring's IRQ_STATUS bit and, unless IRQ_MASK masks the ring,
 * raises the ring's vector, or the fault vector for a fault.
 */
void rbln_emu_raise_irq(struct rbln_emu_dev *edev, unsigned int ring, bool fault)
{
	atomic_or(BIT(ring), &edev->irq_status);
	if (!(atomic_read(&edev->irq_mask) & BIT(ring)) && READ_ONCE(edev->present))
		rbln_emu_deliver_irq(edev, fault ? RBLN_EMU_FAULT_VECTOR : ring);
}

/**
 * rbln_emu_quiesce() - wait until no access that started before is in flight
 * @edev: the device
 *
 * What MMU_INVALIDATE does, for a home whose own mappings of host memory
 * change under the device (an IOMMU unmap): once this returns, nothing
 * uses a pointer rbln_emu_host_ptr() gave before it was called.
 */
void rbln_emu_quiesce(struct rbln_emu_dev *edev)
{
	rbln_emu_invalidate_start(edev);
	while (rbln_emu_invalidate_busy(edev))
		cond_resched();
}

/**
 * rbln_emu_bus_reset() - a reset by the bus: FLR, vfio-user's DEVICE_RESET
 * @edev: the device
 *
 * A function reset that even a deaf device (RBLN_INJECT_DEAF) obeys, as
 * silicon obeys its bus; complete when this returns.
 */
void rbln_emu_bus_reset(struct rbln_emu_dev *edev)
{
	WRITE_ONCE(edev->deaf, false);
	rbln_emu_reg_write(edev, RBLN_REG_FUNC_RESET, 1);
	while (rbln_emu_reg_read(edev, RBLN_REG_FUNC_RESET) == 1)
		cond_resched();
}

/**
 * rbln_emu_dev_init() - power on an NPU
 * @edev: zeroed by the caller
 * @index: DEV_INDEX
 * @mem_size: device memory, bytes
 * @serial: SERIAL, never given to another device
 *
 * Return: 0 or a negative errno; on failure, rbln_emu_dev_fini() frees
 * what was allocated.
 */
int rbln_emu_dev_init(struct rbln_emu_dev *edev, u32 index, u64 mem_size, u64 serial)
{
	edev->index = index;
	edev->mem_size = mem_size;
	edev->serial = serial;
	edev->present = true;
	mutex_init(&edev->scrub_lock);
	xa_init(&edev->dram);
	return rbln_emu_cp_init(edev);
}

/**
 * rbln_emu_dev_stop() - the NPU falls off its bus
 * @edev: the device
 *
 * From the moment its registers read dead it touches no memory: first no
 * access may start, then those under way end, and only then do the
 * registers die. Returns once no command processor runs.
 */
void rbln_emu_dev_stop(struct rbln_emu_dev *edev)
{
	WRITE_ONCE(edev->stopping, true);
	rbln_emu_drain_accesses(edev);
	WRITE_ONCE(edev->present, false);
	rbln_emu_cp_stop(edev);
}

/**
 * rbln_emu_dev_fini() - free what the NPU holds
 * @edev: a device stopped, or whose rbln_emu_dev_init() failed
 */
void rbln_emu_dev_fini(struct rbln_emu_dev *edev)
{
	rbln_emu_cp_fini(edev);
	rbln_emu_dram_free(edev);
}
