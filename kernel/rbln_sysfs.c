// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_sysfs.c - attributes of an NPU under /sys/class/accel/accelN/device/
 *
 * One value per file, for sysadmin tools (rbln-smi) that read no ioctl and
 * need no access to the device node: memory in bytes, the time the device
 * spent executing in nanoseconds over all rings (utilisation is its rate of
 * change divided by num_rings), how many times a hung job made the driver
 * reset a ring, whether the device is the emulated NPU, and its hardware
 * contexts: how many it has, how many files hold one, and how often a job
 * had to take an idle file's (contention for them).
 */

#include <linux/device.h>
#include <linux/sysfs.h>

#include "rbln_drv.h"

static ssize_t memory_total_show(struct device *dev, struct device_attribute *attr,
				 char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%llu\n", rdev->mem_size);
}
static DEVICE_ATTR_RO(memory_total);

static ssize_t memory_used_show(struct device *dev, struct device_attribute *attr,
				char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%llu\n", rbln_devmem_used(rdev));
}
static DEVICE_ATTR_RO(memory_used);

static ssize_t busy_ns_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%llu\n", rbln_ring_busy_ns(rdev));
}
static DEVICE_ATTR_RO(busy_ns);

static ssize_t reset_count_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%d\n", atomic_read(&rdev->reset_count));
}
static DEVICE_ATTR_RO(reset_count);

static ssize_t emulated_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%d\n", rdev->emulated);
}
static DEVICE_ATTR_RO(emulated);

static ssize_t num_rings_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%u\n", rdev->num_rings);
}
static DEVICE_ATTR_RO(num_rings);

static ssize_t contexts_total_show(struct device *dev, struct device_attribute *attr,
				   char *buf)
{
	/* Index 0 stands for none (&rbln_vm.id). */
	return sysfs_emit(buf, "%u\n", RBLN_MAX_CONTEXTS - 1);
}
static DEVICE_ATTR_RO(contexts_total);

static ssize_t contexts_used_show(struct device *dev, struct device_attribute *attr,
				  char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%u\n", READ_ONCE(rdev->ctx_used));
}
static DEVICE_ATTR_RO(contexts_used);

static ssize_t context_steals_show(struct device *dev, struct device_attribute *attr,
				   char *buf)
{
	struct rbln_device *rdev = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%llu\n", READ_ONCE(rdev->ctx_steals));
}
static DEVICE_ATTR_RO(context_steals);

static struct attribute *rbln_dev_attrs[] = {
	&dev_attr_memory_total.attr,
	&dev_attr_memory_used.attr,
	&dev_attr_busy_ns.attr,
	&dev_attr_reset_count.attr,
	&dev_attr_emulated.attr,
	&dev_attr_num_rings.attr,
	&dev_attr_contexts_total.attr,
	&dev_attr_contexts_used.attr,
	&dev_attr_context_steals.attr,
	NULL
};

static const struct attribute_group rbln_dev_group = {
	.attrs = rbln_dev_attrs,
};

/* Created after probe and removed before remove by the driver core. */
const struct attribute_group *rbln_dev_groups[] = {
	&rbln_dev_group,
	NULL
};
