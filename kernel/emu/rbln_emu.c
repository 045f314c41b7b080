// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu.c - emulated NPUs in rbln.ko: their bus and their lifetime
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

#include "rbln_emu.h"
#include "rbln_emu_internal.h"

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

/**
 * struct rbln_emu_kdev - an emulated NPU in rbln.ko
 * @dev: its device on the rbln_emu bus; dev.id is the device's ID.
 * @hw: what the driver holds; the register accessors.
 * @list: link in rbln_emu_list.
 * @irq_lock: serialises calls of the driver's handler.
 * @stray_vector: 1 + the vector the next write of a ring's BASE_LO
 *	raises at once (sysfs's stray_vector), or 0.
 * @dma_parms: what it can map in one segment: anything.
 * @edev: the NPU itself.
 */
struct rbln_emu_kdev {
	struct device dev;
	struct rbln_hw hw;
	struct list_head list;
	spinlock_t irq_lock; /* serialises the driver's handler */
	atomic_t stray_vector;
	struct device_dma_parameters dma_parms;
	struct rbln_emu_dev edev;
};

static struct rbln_emu_kdev *to_emu(struct device *dev)
{
	return container_of(dev, struct rbln_emu_kdev, dev);
}

static struct rbln_emu_kdev *to_kdev(struct rbln_emu_dev *edev)
{
	return container_of(edev, struct rbln_emu_kdev, edev);
}

static u32 rbln_emu_read32(struct rbln_hw *hw, u32 reg)
{
	return rbln_emu_reg_read(&container_of(hw, struct rbln_emu_kdev, hw)->edev, reg);
}

static bool rbln_emu_is_ring_base(u32 reg)
{
	u32 stride = RBLN_RING_REG(1, 0) - RBLN_RING_REG(0, 0);

	return reg >= RBLN_RING_REG(0, 0) && reg < RBLN_RING_REG(RBLN_EMU_NUM_RINGS, 0) &&
	       (reg - RBLN_RING_REG(0, 0)) % stride == RBLN_RING_BASE_LO;
}

static void rbln_emu_write32(struct rbln_hw *hw, u32 reg, u32 val)
{
	struct rbln_emu_kdev *kdev = container_of(hw, struct rbln_emu_kdev, hw);
	int stray;

	rbln_emu_reg_write(&kdev->edev, reg, val);
	if (!rbln_emu_is_ring_base(reg))
		return;
	stray = atomic_xchg(&kdev->stray_vector, 0);
	if (stray)
		rbln_emu_deliver_irq(&kdev->edev, stray - 1);
}

static const struct rbln_hw_ops rbln_emu_hw_ops = {
	.read32 = rbln_emu_read32,
	.write32 = rbln_emu_write32,
};

/*
 * Every vector leads to the driver's one handler, called one at a time,
 * like a threaded interrupt handler.
 */
void rbln_emu_deliver_irq(struct rbln_emu_dev *edev, unsigned int vector)
{
	struct rbln_emu_kdev *kdev = to_kdev(edev);
	void (*handler)(void *irq_data, unsigned int vector);

	spin_lock(&kdev->irq_lock);
	/* Pairs with rbln_job_init()'s release: the rings it serves are ready. */
	handler = smp_load_acquire(&kdev->hw.irq);
	if (READ_ONCE(edev->present) && handler)
		handler(kdev->hw.irq_data, vector);
	spin_unlock(&kdev->irq_lock);
}

/**
 * rbln_emu_irq_detach() - the driver lets go of an emulated device
 * @dev: a device on rbln_emu_bus_type, its driver's probe failed or its
 *	remove done
 *
 * The device outlives its binding and may still raise a vector (a command
 * processor finishing as the driver stops it): once this returns, no call
 * of the driver's handler runs, and none starts until a probe sets it again.
 */
void rbln_emu_irq_detach(struct device *dev)
{
	struct rbln_emu_kdev *kdev = to_emu(dev);

	spin_lock(&kdev->irq_lock);
	kdev->hw.irq = NULL;
	kdev->hw.irq_data = NULL;
	spin_unlock(&kdev->irq_lock);
}

/* On this bus the device sits behind no IOMMU: a DMA address is physical. */
void *rbln_emu_host_ptr(struct rbln_emu_dev *edev, u64 dma_addr, u32 len, bool write)
{
	return phys_to_virt(dma_addr);
}

struct rbln_emu_dev *rbln_emu_get_by_serial(u64 serial)
{
	struct rbln_emu_kdev *kdev;
	struct rbln_emu_dev *found = NULL;

	spin_lock(&rbln_emu_list_lock);
	list_for_each_entry(kdev, &rbln_emu_list, list) {
		if (kdev->edev.serial == serial && !READ_ONCE(kdev->edev.stopping)) {
			found = &kdev->edev;
			get_device(&kdev->dev);
			break;
		}
	}
	spin_unlock(&rbln_emu_list_lock);
	return found;
}

void rbln_emu_put(struct rbln_emu_dev *edev)
{
	put_device(&to_kdev(edev)->dev);
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
	struct rbln_emu_kdev *kdev = to_emu(dev);

	rbln_emu_dev_fini(&kdev->edev);
	kfree(kdev);
	if (refcount_dec_and_test(&rbln_emu_live))
		complete(&rbln_emu_all_released);
}

/*
 * A test hook: the device raises a vector as a driver sets its rings up,
 * as a function a previous driver left with an interrupt pending would.
 */
static ssize_t stray_vector_store(struct device *dev, struct device_attribute *attr,
				  const char *buf, size_t count)
{
	unsigned int vector;
	int ret = kstrtouint(buf, 0, &vector);

	if (ret)
		return ret;
	if (vector > RBLN_EMU_NUM_RINGS)
		return -EINVAL;
	atomic_set(&to_emu(dev)->stray_vector, vector + 1);
	return count;
}
static DEVICE_ATTR_WO(stray_vector);

static struct attribute *rbln_emu_dev_attrs[] = {
	&dev_attr_stray_vector.attr,
	NULL
};
ATTRIBUTE_GROUPS(rbln_emu_dev);

static const struct device_type rbln_emu_dev_type = {
	.name = "rbln_emu",
	.groups = rbln_emu_dev_groups,
	.release = rbln_emu_dev_release,
};

static int rbln_emu_dev_new(unsigned int id, unsigned int mem_mib)
{
	struct rbln_emu_kdev *kdev;
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

	kdev = kzalloc(sizeof(*kdev), GFP_KERNEL);
	if (!kdev)
		return -ENOMEM;

	ret = ida_alloc_range(&rbln_emu_ids, id, id, GFP_KERNEL);
	if (ret < 0) {
		kfree(kdev);
		return ret == -ENOSPC ? -EEXIST : ret;
	}

	kdev->hw.ops = &rbln_emu_hw_ops;
	kdev->hw.dma_dev = &kdev->dev;
	spin_lock_init(&kdev->irq_lock);
	kdev->dev.id = id;
	kdev->dev.bus = &rbln_emu_bus_type;
	kdev->dev.type = &rbln_emu_dev_type;
	device_initialize(&kdev->dev);
	refcount_inc(&rbln_emu_live);

	/* It masters DMA with 64-bit addresses and no IOMMU, like a PCIe NPU. */
	kdev->dev.dma_mask = &kdev->dev.coherent_dma_mask;
	kdev->dev.dma_parms = &kdev->dma_parms;
	dma_set_max_seg_size(&kdev->dev, UINT_MAX);
	ret = rbln_emu_dev_init(&kdev->edev, id, (u64)mem_mib * SZ_1M,
				atomic64_inc_return(&rbln_emu_serials));
	if (!ret)
		ret = dma_coerce_mask_and_coherent(&kdev->dev, DMA_BIT_MASK(64));
	if (!ret)
		ret = dev_set_name(&kdev->dev, "rbln_emu%u", id);
	if (!ret)
		ret = device_add(&kdev->dev);
	if (ret) {
		ida_free(&rbln_emu_ids, id);
		put_device(&kdev->dev);
		return ret;
	}

	spin_lock(&rbln_emu_list_lock);
	list_add_tail(&kdev->list, &rbln_emu_list);
	spin_unlock(&rbln_emu_list_lock);
	return 0;
}

static void rbln_emu_dev_del(struct rbln_emu_kdev *kdev)
{
	lockdep_assert_held(&rbln_emu_lock);

	spin_lock(&rbln_emu_list_lock);
	list_del(&kdev->list);
	spin_unlock(&rbln_emu_list_lock);
	rbln_emu_dev_stop(&kdev->edev);
	ida_free(&rbln_emu_ids, kdev->dev.id);
	device_unregister(&kdev->dev);
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
	struct rbln_emu_kdev *kdev;
	unsigned int id;
	int ret;

	ret = kstrtouint(buf, 0, &id);
	if (ret) {
		pr_err("rbln_emu: del_device takes \"ID\"\n");
		return ret;
	}

	mutex_lock(&rbln_emu_lock);
	ret = rbln_emu_enabled ? -ENOENT : -ENODEV;
	list_for_each_entry(kdev, &rbln_emu_list, list) {
		if (rbln_emu_enabled && kdev->dev.id == id) {
			rbln_emu_dev_del(kdev);
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
	struct rbln_emu_kdev *kdev, *tmp;

	mutex_lock(&rbln_emu_lock);
	rbln_emu_enabled = false;
	list_for_each_entry_safe(kdev, tmp, &rbln_emu_list, list)
		rbln_emu_dev_del(kdev);
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
