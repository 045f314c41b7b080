// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_debugfs.c - /sys/kernel/debug/accel/<parent device>/
 *
 * bos: every open file of the device with the buffer objects in its address
 * space: address, size, placement, device permissions.
 */

#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/seq_file.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_file.h>

#include "rbln_drv.h"

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
		rbln_vm_describe(&to_rbln_file(file)->vm, m);
	}
	mutex_unlock(&drm->filelist_mutex);
	return 0;
}

/**
 * rbln_debugfs_init() - register the device's debugfs files
 * @rdev: the device, before drm_dev_register()
 */
void rbln_debugfs_init(struct rbln_device *rdev)
{
	drm_debugfs_add_file(&rdev->drm, "bos", rbln_debugfs_bos, NULL);
}
