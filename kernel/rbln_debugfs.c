// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_debugfs.c - /sys/kernel/debug/accel/<parent device>/
 *
 * bos: every open file of the device with the buffer objects in its address
 * space: address, size, placement, device permissions.
 * inject: write "hang", "dma", "fault" or "stuck" and the device's next job
 * hangs, fails its next DMA, faults, or hangs so that its ring cannot be
 * reset; "no_page" and the emulated NPU finds no host page for the next
 * DRAM page written first; "deaf" and it answers no MMU invalidation or
 * function reset until its bus resets it (only where the driver can cut
 * it off: PCI, else -EOPNOTSUPP): the recovery paths on demand. The
 * driver's own hooks widen races for the tests that interleave them:
 *  - "slow_signal": the next job's fence, once signaled, holds its signaler
 *    for twice the job timeout before the scheduler hears of it, so that
 *    the job completes as it times out; -EBUSY while such a fence is
 *    signaling;
 *  - "slow_scrub": the next scrub of freed device memory pauses for 100 ms
 *    between programming the address and the size;
 *  - "slow_free": the next job or bind job freed holds its context for a
 *    second after the rest of it is gone;
 *  - "slow_fault": the interrupt handler holds the next fault it reads for
 *    twice the job timeout before it acknowledges it, so that the ring's
 *    reset comes in between.
 */

#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>

#include "rbln_drv.h"
#include "rbln_hw.h"

static int rbln_debugfs_bos(struct seq_file *m, void *data)
{
	struct drm_debugfs_entry *entry = m->private;
	struct drm_device *drm = entry->dev;
	struct drm_file *file;

	mutex_lock(&drm->filelist_mutex);
	list_for_each_entry(file, &drm->filelist, lhead) {
		struct task_struct *task;
		struct pid *pid;

		rcu_read_lock();
		pid = rcu_dereference(file->pid);
		task = pid_task(pid, PIDTYPE_TGID);
		seq_printf(m, "client %llu pid %d (%s)\n", file->client_id,
			   pid_vnr(pid), task ? task->comm : "?");
		rcu_read_unlock();
		rbln_vm_describe(to_rbln_file(file)->vm, m);
	}
	mutex_unlock(&drm->filelist_mutex);
	return 0;
}

static int rbln_debugfs_can_cut(struct rbln_device *rdev)
{
	return rdev->hw->ops->cut_dma ? 0 : -EOPNOTSUPP;
}

static ssize_t rbln_debugfs_inject_write(struct file *f, const char __user *ubuf,
					 size_t len, loff_t *pos)
{
	static const struct {
		const char *name;
		u32 bit;
		int (*arm)(struct rbln_device *rdev);
	} hooks[] = {
		{ "hang", RBLN_INJECT_HANG },
		{ "dma", RBLN_INJECT_DMA_ERROR },
		{ "fault", RBLN_INJECT_FAULT },
		{ "stuck", RBLN_INJECT_STUCK },
		{ "no_page", RBLN_INJECT_NO_PAGE },
		/* Only where the driver can cut a deaf device off: it would wait forever. */
		{ "deaf", RBLN_INJECT_DEAF, rbln_debugfs_can_cut },
		/* The driver's, not the device's. */
		{ "slow_signal", 0, rbln_job_slow_signal },
		{ "slow_scrub", 0, rbln_devmem_slow_scrub },
		{ "slow_free", 0, rbln_job_slow_free },
		{ "slow_fault", 0, rbln_job_slow_fault },
	};
	struct rbln_device *rdev = f->private_data;
	unsigned int i;
	char buf[16];
	int idx, err = 0;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';

	for (i = 0; i < ARRAY_SIZE(hooks); i++) {
		if (sysfs_streq(buf, hooks[i].name))
			break;
	}
	if (i == ARRAY_SIZE(hooks))
		return -EINVAL;
	if (!drm_dev_enter(&rdev->drm, &idx))
		return -ENODEV;
	if (hooks[i].arm)
		err = hooks[i].arm(rdev);
	if (!err && hooks[i].bit)
		rbln_hw_write(rdev->hw, RBLN_REG_INJECT, hooks[i].bit);
	drm_dev_exit(idx);
	return err ? err : (ssize_t)len;
}

static const struct file_operations rbln_debugfs_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = rbln_debugfs_inject_write,
	.llseek = noop_llseek,
};

/**
 * rbln_debugfs_init() - register the device's debugfs files
 * @rdev: the device, before drm_dev_register()
 */
void rbln_debugfs_init(struct rbln_device *rdev)
{
	drm_debugfs_add_file(&rdev->drm, "bos", rbln_debugfs_bos, NULL);
	debugfs_create_file("inject", 0200, rdev->drm.debugfs_root, rdev,
			    &rbln_debugfs_inject_fops);
}
