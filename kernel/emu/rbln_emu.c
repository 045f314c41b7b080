// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu.c - emulated NPUs: their bus, their lifetime, their registers
 *
 * Devices are created by the emu_devices module parameter and, at run time,
 * by writing "ID [MEMORY_MIB]" to /sys/bus/rbln_emu/new_device; writing "ID"
 * to /sys/bus/rbln_emu/del_device removes one. Removal is a surprise
 * removal, as when silicon falls off the bus: the registers read as all-ones
 * from that moment, then the driver is unbound.
 */

#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/idr.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/sizes.h>

#include <uapi/drm/rbln_accel.h>
#include <uapi/drm/rbln_isa.h>

#include "rbln_emu.h"
#include "rbln_emu_internal.h"

#define RBLN_EMU_HW_REV		((1 << 16) | 0)
#define RBLN_EMU_MAX_ID		1023
#define RBLN_EMU_MIN_MEM_MIB	4
#define RBLN_EMU_MAX_MEM_MIB	(64 * 1024)

static unsigned int emu_devices;
module_param(emu_devices, uint, 0444);
MODULE_PARM_DESC(emu_devices, "Number of emulated NPUs created at load (default: 0)");

static unsigned int emu_mem_mib = 512;
module_param(emu_mem_mib, uint, 0444);
MODULE_PARM_DESC(emu_mem_mib, "Device memory of each emulated NPU, MiB, unless given to new_device (default: 512)");

/*
 * rbln_emu_lock serialises device creation and removal: it protects
 * rbln_emu_list, rbln_emu_ids and rbln_emu_enabled. The driver's probe and
 * remove run under it (device_register/unregister) and must not take it.
 */
static DEFINE_MUTEX(rbln_emu_lock);
/* Also protects rbln_emu_list, for lookups from command processors. */
static DEFINE_SPINLOCK(rbln_emu_list_lock);
static LIST_HEAD(rbln_emu_list);
static DEFINE_IDA(rbln_emu_ids);
static bool rbln_emu_enabled;

/*
 * Devices may outlive their removal (an open file holds the DRM device,
 * which holds its parent); module unload waits for the last release, since
 * the release function lives in this module. The bus itself holds one.
 */
static refcount_t rbln_emu_live;
static DECLARE_COMPLETION(rbln_emu_all_released);

/* Serials are never reused, not even across removals: peers tell them apart. */
static atomic64_t rbln_emu_serials;

static struct rbln_emu_dev *to_emu(struct device *dev)
{
	return container_of(dev, struct rbln_emu_dev, dev);
}

static bool rbln_emu_ring_reg(u32 reg, unsigned int *ring, u32 *off)
{
	if (reg < RBLN_RING_REG(0, 0) || reg >= RBLN_RING_REG(RBLN_EMU_NUM_RINGS, 0))
		return false;
	*ring = (reg - RBLN_RING_REG(0, 0)) / 0x40;
	*off = (reg - RBLN_RING_REG(0, 0)) % 0x40;
	return true;
}

static u32 rbln_emu_read32(struct rbln_hw *hw, u32 reg)
{
	struct rbln_emu_dev *edev = container_of(hw, struct rbln_emu_dev, hw);
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
		return edev->dev.id;
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
		       RBLN_ISA_CAP_GEMM | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_F32) |
		       RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_F16) | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_BF16) |
		       RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_I32) | RBLN_ISA_CAP_DTYPE(RBLN_DTYPE_I8);
	case RBLN_REG_MAX_CMD_SIZE:
		return RBLN_EMU_MAX_CMD_SIZE;
	case RBLN_REG_IRQ_STATUS:
		return atomic_read(&edev->irq_status);
	case RBLN_REG_CTX_TABLE_LO:
		return lower_32_bits(READ_ONCE(edev->ctx_table));
	case RBLN_REG_CTX_TABLE_HI:
		return upper_32_bits(READ_ONCE(edev->ctx_table));
	case RBLN_REG_MMU_INVALIDATE:
		return rbln_emu_invalidate_busy(edev);
	case RBLN_REG_SERIAL_LO:
		return lower_32_bits(edev->serial);
	case RBLN_REG_SERIAL_HI:
		return upper_32_bits(edev->serial);
	case RBLN_REG_PEER_TABLE_LO:
		return lower_32_bits(READ_ONCE(edev->peer_table));
	case RBLN_REG_PEER_TABLE_HI:
		return upper_32_bits(READ_ONCE(edev->peer_table));
	default:
		/* Unimplemented registers read as zero, as on most silicon. */
		return 0;
	}
}

static void rbln_emu_write32(struct rbln_hw *hw, u32 reg, u32 val)
{
	struct rbln_emu_dev *edev = container_of(hw, struct rbln_emu_dev, hw);
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
	case RBLN_REG_CTX_TABLE_LO:
		WRITE_ONCE(edev->ctx_table, (edev->ctx_table & GENMASK_ULL(63, 32)) | val);
		break;
	case RBLN_REG_CTX_TABLE_HI:
		WRITE_ONCE(edev->ctx_table,
			   (edev->ctx_table & GENMASK_ULL(31, 0)) | (u64)val << 32);
		break;
	case RBLN_REG_PEER_TABLE_LO:
		WRITE_ONCE(edev->peer_table, (edev->peer_table & GENMASK_ULL(63, 32)) | val);
		break;
	case RBLN_REG_PEER_TABLE_HI:
		WRITE_ONCE(edev->peer_table,
			   (edev->peer_table & GENMASK_ULL(31, 0)) | (u64)val << 32);
		break;
	case RBLN_REG_MMU_INVALIDATE:
		rbln_emu_invalidate_start(edev);
		break;
	case RBLN_REG_SCRUB_ADDR_LO:
		edev->scrub_addr = (edev->scrub_addr & GENMASK_ULL(63, 32)) | val;
		break;
	case RBLN_REG_SCRUB_ADDR_HI:
		edev->scrub_addr = (edev->scrub_addr & GENMASK_ULL(31, 0)) | (u64)val << 32;
		break;
	case RBLN_REG_SCRUB_SIZE_LO:
		edev->scrub_size = (edev->scrub_size & GENMASK_ULL(63, 32)) | val;
		break;
	case RBLN_REG_SCRUB_SIZE_HI:
		edev->scrub_size = (edev->scrub_size & GENMASK_ULL(31, 0)) | (u64)val << 32;
		rbln_emu_dram_scrub(edev, edev->scrub_addr, edev->scrub_size);
		break;
	case RBLN_REG_INJECT:
		atomic_or(val & (RBLN_INJECT_HANG | RBLN_INJECT_DMA_ERROR | RBLN_INJECT_FAULT),
			  &edev->inject);
		break;
	default:
		/* Writes to read-only or unimplemented registers are dropped. */
		break;
	}
}

/**
 * rbln_emu_raise_irq() - a ring has news for the driver
 * @edev: the device
 * @ring: the ring
 *
 * Sets the ring's IRQ_STATUS bit and calls the driver's handler, one call
 * at a time, like a threaded interrupt handler.
 */
void rbln_emu_raise_irq(struct rbln_emu_dev *edev, unsigned int ring)
{
	atomic_or(BIT(ring), &edev->irq_status);
	spin_lock(&edev->irq_lock);
	if (READ_ONCE(edev->present) && edev->hw.irq)
		edev->hw.irq(edev->hw.irq_data);
	spin_unlock(&edev->irq_lock);
}

static const struct rbln_hw_ops rbln_emu_hw_ops = {
	.read32 = rbln_emu_read32,
	.write32 = rbln_emu_write32,
};

/**
 * rbln_emu_get_by_serial() - a device not being removed, for peer access
 * @serial: its SERIAL
 *
 * Return: the device with a reference the caller puts, or NULL.
 */
struct rbln_emu_dev *rbln_emu_get_by_serial(u64 serial)
{
	struct rbln_emu_dev *edev, *found = NULL;

	spin_lock(&rbln_emu_list_lock);
	list_for_each_entry(edev, &rbln_emu_list, list) {
		if (edev->serial == serial && !READ_ONCE(edev->stopping)) {
			found = edev;
			get_device(&edev->dev);
			break;
		}
	}
	spin_unlock(&rbln_emu_list_lock);
	return found;
}

/**
 * rbln_emu_hw() - the hardware behind an emulated device
 * @dev: a device on rbln_emu_bus_type
 *
 * Return: the struct rbln_hw the driver uses for @dev; valid as long as the
 * caller holds a reference on @dev.
 */
struct rbln_hw *rbln_emu_hw(struct device *dev)
{
	return &to_emu(dev)->hw;
}

static void rbln_emu_dev_release(struct device *dev)
{
	struct rbln_emu_dev *edev = to_emu(dev);

	rbln_emu_cp_fini(edev);
	rbln_emu_dram_free(edev);
	kfree(edev);
	if (refcount_dec_and_test(&rbln_emu_live))
		complete(&rbln_emu_all_released);
}

static const struct device_type rbln_emu_dev_type = {
	.name = "rbln_emu",
	.release = rbln_emu_dev_release,
};

static int rbln_emu_dev_new(unsigned int id, unsigned int mem_mib)
{
	struct rbln_emu_dev *edev;
	int ret;

	lockdep_assert_held(&rbln_emu_lock);

	if (id > RBLN_EMU_MAX_ID) {
		pr_err("rbln_emu: device id %u is above %u\n", id, RBLN_EMU_MAX_ID);
		return -EINVAL;
	}
	if (mem_mib < RBLN_EMU_MIN_MEM_MIB || mem_mib > RBLN_EMU_MAX_MEM_MIB) {
		pr_err("rbln_emu: memory of %u MiB is outside [%u, %u]\n",
		       mem_mib, RBLN_EMU_MIN_MEM_MIB, RBLN_EMU_MAX_MEM_MIB);
		return -EINVAL;
	}

	edev = kzalloc(sizeof(*edev), GFP_KERNEL);
	if (!edev)
		return -ENOMEM;

	ret = ida_alloc_range(&rbln_emu_ids, id, id, GFP_KERNEL);
	if (ret < 0) {
		kfree(edev);
		return ret == -ENOSPC ? -EEXIST : ret;
	}

	edev->hw.ops = &rbln_emu_hw_ops;
	edev->hw.dma_dev = &edev->dev;
	edev->mem_size = (u64)mem_mib * SZ_1M;
	edev->serial = atomic64_inc_return(&rbln_emu_serials);
	edev->present = true;
	spin_lock_init(&edev->irq_lock);
	xa_init(&edev->dram);
	edev->dev.id = id;
	edev->dev.bus = &rbln_emu_bus_type;
	edev->dev.type = &rbln_emu_dev_type;
	device_initialize(&edev->dev);
	refcount_inc(&rbln_emu_live);

	/* It masters DMA with 64-bit addresses and no IOMMU, like a PCIe NPU. */
	edev->dev.dma_mask = &edev->dev.coherent_dma_mask;
	edev->dev.dma_parms = &edev->dma_parms;
	dma_set_max_seg_size(&edev->dev, UINT_MAX);
	ret = dma_coerce_mask_and_coherent(&edev->dev, DMA_BIT_MASK(64));
	if (!ret)
		ret = rbln_emu_cp_init(edev);
	if (!ret)
		ret = dev_set_name(&edev->dev, "rbln_emu%u", id);
	if (!ret)
		ret = device_add(&edev->dev);
	if (ret) {
		ida_free(&rbln_emu_ids, id);
		put_device(&edev->dev);
		return ret;
	}

	spin_lock(&rbln_emu_list_lock);
	list_add_tail(&edev->list, &rbln_emu_list);
	spin_unlock(&rbln_emu_list_lock);
	return 0;
}

static void rbln_emu_dev_del(struct rbln_emu_dev *edev)
{
	lockdep_assert_held(&rbln_emu_lock);

	spin_lock(&rbln_emu_list_lock);
	list_del(&edev->list);
	spin_unlock(&rbln_emu_list_lock);
	/*
	 * As silicon falling off the bus: from the moment its registers read
	 * dead, it touches no memory. So first no access may start, then
	 * those under way end, and only then do the registers die.
	 */
	WRITE_ONCE(edev->stopping, true);
	rbln_emu_drain_accesses(edev);
	WRITE_ONCE(edev->present, false);
	rbln_emu_cp_stop(edev);
	ida_free(&rbln_emu_ids, edev->dev.id);
	device_unregister(&edev->dev);
}

static ssize_t new_device_store(const struct bus_type *bus, const char *buf,
				size_t count)
{
	unsigned int id, mem_mib = READ_ONCE(emu_mem_mib);
	char tail;
	int n, ret;

	n = sscanf(buf, "%u %u %c", &id, &mem_mib, &tail);
	if (n < 1 || n > 2) {
		pr_err("rbln_emu: new_device takes \"ID [MEMORY_MIB]\"\n");
		return -EINVAL;
	}

	mutex_lock(&rbln_emu_lock);
	ret = rbln_emu_enabled ? rbln_emu_dev_new(id, mem_mib) : -ENODEV;
	mutex_unlock(&rbln_emu_lock);

	return ret ? ret : count;
}
static BUS_ATTR_WO(new_device);

static ssize_t del_device_store(const struct bus_type *bus, const char *buf,
				size_t count)
{
	struct rbln_emu_dev *edev;
	unsigned int id;
	int ret;

	ret = kstrtouint(buf, 0, &id);
	if (ret) {
		pr_err("rbln_emu: del_device takes \"ID\"\n");
		return ret;
	}

	mutex_lock(&rbln_emu_lock);
	ret = rbln_emu_enabled ? -ENOENT : -ENODEV;
	list_for_each_entry(edev, &rbln_emu_list, list) {
		if (rbln_emu_enabled && edev->dev.id == id) {
			rbln_emu_dev_del(edev);
			ret = 0;
			break;
		}
	}
	mutex_unlock(&rbln_emu_lock);

	return ret ? ret : count;
}
static BUS_ATTR_WO(del_device);

static struct attribute *rbln_emu_bus_attrs[] = {
	&bus_attr_new_device.attr,
	&bus_attr_del_device.attr,
	NULL
};
ATTRIBUTE_GROUPS(rbln_emu_bus);

const struct bus_type rbln_emu_bus_type = {
	.name = "rbln_emu",
	.bus_groups = rbln_emu_bus_groups,
};

/**
 * rbln_emu_init() - register the rbln_emu bus
 *
 * Drivers for emulated devices register after this; devices appear with
 * rbln_emu_add_initial() once they have.
 *
 * Return: 0 or a negative errno.
 */
int rbln_emu_init(void)
{
	refcount_set(&rbln_emu_live, 1);
	reinit_completion(&rbln_emu_all_released);
	return bus_register(&rbln_emu_bus_type);
}

/**
 * rbln_emu_add_initial() - create the devices asked for by emu_devices
 *
 * Opens new_device and del_device for business whether or not it succeeds,
 * so a caller that fails may still clean up with rbln_emu_exit().
 *
 * Return: 0 or the negative errno of the first device that failed.
 */
int rbln_emu_add_initial(void)
{
	unsigned int i;
	int ret = 0;

	mutex_lock(&rbln_emu_lock);
	rbln_emu_enabled = true;
	for (i = 0; i < emu_devices && !ret; i++)
		ret = rbln_emu_dev_new(i, emu_mem_mib);
	mutex_unlock(&rbln_emu_lock);

	return ret;
}

/**
 * rbln_emu_remove_all() - remove every emulated device
 *
 * After this new_device fails with -ENODEV. Devices still referenced (by an
 * open DRM device) are released later; rbln_emu_exit() waits for them.
 */
void rbln_emu_remove_all(void)
{
	struct rbln_emu_dev *edev, *tmp;

	mutex_lock(&rbln_emu_lock);
	rbln_emu_enabled = false;
	list_for_each_entry_safe(edev, tmp, &rbln_emu_list, list)
		rbln_emu_dev_del(edev);
	mutex_unlock(&rbln_emu_lock);
}

/**
 * rbln_emu_exit() - unregister the bus once every device is released
 *
 * Call after rbln_emu_remove_all() and after the driver is unregistered.
 */
void rbln_emu_exit(void)
{
	if (!refcount_dec_and_test(&rbln_emu_live))
		wait_for_completion(&rbln_emu_all_released);
	bus_unregister(&rbln_emu_bus_type);
}
