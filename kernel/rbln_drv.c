// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_drv.c - module, DRM driver, ioctl table and device lifecycle
 */

#include <linux/atomic.h>
#include <linux/device.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_hw.h"
#include "emu/rbln_emu.h"

static int rbln_get_param_ioctl(struct drm_device *drm, void *data,
				struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln_device(drm);
	struct drm_rbln_get_param *args = data;

	if (args->pad)
		return -EINVAL;

	switch (args->param) {
	case RBLN_PARAM_ABI_VERSION:
		args->value = RBLN_ABI_VERSION;
		break;
	case RBLN_PARAM_DEVICE_ID:
		args->value = rdev->chip_id;
		break;
	case RBLN_PARAM_HW_REVISION:
		args->value = rdev->hw_rev;
		break;
	case RBLN_PARAM_EMULATED:
		args->value = rdev->emulated;
		break;
	case RBLN_PARAM_DEVICE_MEMORY_SIZE:
		args->value = rdev->mem_size;
		break;
	case RBLN_PARAM_DEVICE_INDEX:
		args->value = rdev->index;
		break;
	case RBLN_PARAM_VA_START:
		args->value = RBLN_VA_START;
		break;
	case RBLN_PARAM_VA_SIZE:
		args->value = RBLN_VA_SIZE;
		break;
	case RBLN_PARAM_DEVICE_MEMORY_USED:
		args->value = rbln_devmem_used(rdev);
		break;
	case RBLN_PARAM_NUM_RINGS:
		args->value = rdev->num_rings;
		break;
	case RBLN_PARAM_ISA_CAPS:
		args->value = rdev->isa_caps;
		break;
	case RBLN_PARAM_MAX_CMD_SIZE:
		args->value = rdev->max_cmd_size;
		break;
	case RBLN_PARAM_RESET_COUNT:
		args->value = atomic_read(&rdev->reset_count);
		break;
	case RBLN_PARAM_FAILED_JOBS:
		args->value = atomic_read(&to_rbln_file(file)->vm->failed_jobs);
		break;
	case RBLN_PARAM_VM_BIND_START:
		args->value = RBLN_VM_BIND_START;
		break;
	case RBLN_PARAM_VM_BIND_SIZE:
		args->value = RBLN_VM_BIND_SIZE;
		break;
	default:
		return -EINVAL;
	}

	return 0;
}

static int rbln_open(struct drm_device *drm, struct drm_file *file)
{
	struct rbln_file *rfile = kzalloc(sizeof(*rfile), GFP_KERNEL);
	int ret;

	if (!rfile)
		return -ENOMEM;
	rfile->vm = rbln_vm_create(to_rbln_device(drm));
	if (IS_ERR(rfile->vm)) {
		ret = PTR_ERR(rfile->vm);
		kfree(rfile);
		return ret;
	}
	ret = rbln_vm_bind_open(rfile, to_rbln_device(drm));
	if (ret) {
		rbln_vm_put(rfile->vm);
		kfree(rfile);
		return ret;
	}
	xa_init_flags(&rfile->queues, XA_FLAGS_ALLOC1);
	file->driver_priv = rfile;
	return 0;
}

/*
 * GEM handles are gone by now; jobs still running keep the context and
 * the objects they use until they retire.
 */
static void rbln_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct rbln_file *rfile = to_rbln_file(file);

	rbln_queues_destroy(rfile);
	rbln_vm_bind_close(rfile);
	rbln_vm_put(rfile->vm);
	kfree(rfile);
}

static void rbln_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	rbln_job_show_fdinfo(p, file);
	rbln_gem_show_fdinfo(p, file);
	rbln_vm_show_fdinfo(p, to_rbln_file(file)->vm);
}

static const struct drm_ioctl_desc rbln_ioctls[] = {
	DRM_IOCTL_DEF_DRV(RBLN_GET_PARAM, rbln_get_param_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_BO_CREATE, rbln_bo_create_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_BO_INFO, rbln_bo_info_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_QUEUE_CREATE, rbln_queue_create_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_QUEUE_DESTROY, rbln_queue_destroy_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_SUBMIT, rbln_submit_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_VM_RESERVE, rbln_vm_reserve_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_VM_RELEASE, rbln_vm_release_ioctl, 0),
	DRM_IOCTL_DEF_DRV(RBLN_VM_BIND, rbln_vm_bind_ioctl, 0),
};

static const struct file_operations rbln_fops = {
	.owner = THIS_MODULE,
	DRM_ACCEL_FOPS,
	.show_fdinfo = drm_show_fdinfo,
};

static const struct drm_driver rbln_drm_driver = {
	.driver_features = DRIVER_COMPUTE_ACCEL | DRIVER_GEM | DRIVER_GEM_GPUVA |
			   DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE,
	.open = rbln_open,
	.postclose = rbln_postclose,
	.show_fdinfo = rbln_show_fdinfo,
	.gem_create_object = rbln_gem_create_object,
	.prime_handle_to_fd = rbln_gem_prime_handle_to_fd,
	.gem_prime_import = rbln_gem_prime_import,
	.fops = &rbln_fops,
	.ioctls = rbln_ioctls,
	.num_ioctls = ARRAY_SIZE(rbln_ioctls),
	.name = RBLN_DRIVER_NAME,
	.desc = RBLN_DRIVER_DESC,
	.major = RBLN_DRIVER_MAJOR,
	.minor = RBLN_DRIVER_MINOR,
};

/*
 * Reads what the hardware says about itself and checks that it answers:
 * a scratch register that does not hold what was written means the device
 * is absent or dead, and binding to it would only fail later.
 */
static int rbln_hw_identify(struct rbln_device *rdev)
{
	struct rbln_hw *hw = rdev->hw;
	const u32 probe = 0x5a5aa5a5;

	rbln_hw_write(hw, RBLN_REG_SCRATCH, probe);
	if (rbln_hw_read(hw, RBLN_REG_SCRATCH) != probe)
		return -ENODEV;

	rdev->chip_id = rbln_hw_read(hw, RBLN_REG_CHIP_ID);
	if (rdev->chip_id != RBLN_CHIP_ID_EMULATED) {
		drm_err(&rdev->drm, "unknown chip id %#x\n", rdev->chip_id);
		return -ENODEV;
	}
	rdev->hw_rev = rbln_hw_read(hw, RBLN_REG_HW_REV);
	rdev->index = rbln_hw_read(hw, RBLN_REG_DEV_INDEX);
	rdev->emulated = rbln_hw_read(hw, RBLN_REG_HW_CFG) & RBLN_HW_CFG_EMULATED;
	rdev->mem_size = rbln_hw_read64(hw, RBLN_REG_MEM_SIZE_LO);
	rdev->num_rings = rbln_hw_read(hw, RBLN_REG_NUM_RINGS);
	rdev->isa_caps = rbln_hw_read(hw, RBLN_REG_ISA_CAPS);
	rdev->max_cmd_size = rbln_hw_read(hw, RBLN_REG_MAX_CMD_SIZE);
	rdev->serial = rbln_hw_read64(hw, RBLN_REG_SERIAL_LO);
	if (!rdev->num_rings || rdev->num_rings > RBLN_MAX_RINGS) {
		drm_err(&rdev->drm, "%u rings is not supported\n", rdev->num_rings);
		return -ENODEV;
	}
	return 0;
}

static int rbln_param_set_positive(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, UINT_MAX);
}

const struct kernel_param_ops rbln_positive_param_ops = {
	.set = rbln_param_set_positive,
	.get = param_get_uint,
};

static unsigned int hw_timeout_ms = 10000;
module_param_cb(hw_timeout_ms, &rbln_positive_param_ops, &hw_timeout_ms, 0444);
MODULE_PARM_DESC(hw_timeout_ms, "A device that has not finished an MMU invalidation or a function reset after this long is cut off from memory and unbound, where its bus can cut it off (default: 10000)");

/**
 * rbln_hw_wait() - wait until the device has done what @reg was written for
 * @rdev: the device
 * @reg: a register that reads 1 until then: MMU_INVALIDATE, FUNC_RESET
 *
 * Until the device answers, the memory it may reach is its own: nothing
 * of it may be freed. A device that has not answered after hw_timeout_ms
 * is wedged beyond its own resets; where the bus can, its DMA is cut off
 * (&rbln_hw_ops.cut_dma), which frees that memory as an answer would, and
 * it is unbound. Without that the wait goes on. A device gone from the bus
 * reads all-ones, which answers; once it is found lost, gone or cut off,
 * by this wait or another, no wait goes on.
 *
 * Return: true if the device answered, false if it is lost.
 */
bool rbln_hw_wait(struct rbln_device *rdev, u32 reg)
{
	struct rbln_hw *hw = rdev->hw;
	u64 timeout_us = hw->ops->cut_dma ? (u64)hw_timeout_ms * USEC_PER_MSEC : 0;
	u32 busy;

	/* Another wait's cut-off ends this one too: the device reaches no memory. */
	if (!read_poll_timeout(rbln_hw_read, busy, busy != 1 || atomic_read(&rdev->lost),
			       20, timeout_us, false, hw, reg))
		return !atomic_read(&rdev->lost);
	hw->ops->cut_dma(hw);
	rbln_device_lost(rdev, "it stopped answering; cut off from memory");
	return false;
}

/*
 * Stops whatever the function runs, and waits until it has: at probe, for
 * what a previous driver left behind, and when the driver lets go of a
 * device that may still run (an unbind), since nothing of its jobs may
 * touch memory once they are failed and freed. A device already gone reads
 * all-ones. False if it had to be cut off instead (rbln_hw_wait()).
 */
static bool rbln_hw_stop(struct rbln_device *rdev)
{
	rbln_hw_write(rdev->hw, RBLN_REG_FUNC_RESET, 1);
	return rbln_hw_wait(rdev, RBLN_REG_FUNC_RESET);
}

/*
 * Devices not yet released. A device outlives its driver's unbinding as
 * long as something holds it: an open file, a job or bind job not yet
 * freed (killed, it waits for what it depends on, maybe another driver's
 * fence), a context freed off rbln_wq. All of them run the module's code,
 * so unloading waits for every device, on PCI as on the emulated bus.
 */
static atomic_t rbln_devices_live = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(rbln_devices_released);

static void rbln_device_released(struct drm_device *drm, void *arg)
{
	if (atomic_dec_and_test(&rbln_devices_live))
		wake_up_all(&rbln_devices_released);
}

/**
 * rbln_device_alloc() - the DRM device of one NPU on @parent
 * @parent: the bus device
 *
 * Memory is device-managed: it goes when @parent is unbound, or when the
 * last open file closes, whichever is later. A backend whose state must
 * live as long keeps it in drmm_ memory of the result.
 *
 * Return: the device, or an ERR_PTR().
 */
struct rbln_device *rbln_device_alloc(struct device *parent)
{
	struct rbln_device *rdev;
	int ret;

	rdev = devm_drm_dev_alloc(parent, &rbln_drm_driver, struct rbln_device, drm);
	if (IS_ERR(rdev))
		return rdev;
	/* Added first, run last of the driver's releases. */
	atomic_inc(&rbln_devices_live);
	ret = drmm_add_action_or_reset(&rdev->drm, rbln_device_released, NULL);
	if (ret)
		return ERR_PTR(ret);
	dev_set_drvdata(parent, rdev);
	return rdev;
}

/**
 * rbln_device_init() - bring up one NPU and publish its accel node
 * @rdev: from rbln_device_alloc()
 * @hw: its hardware, valid as long as @rdev; its interrupt must be able
 *	to reach hw->irq from now on.
 *
 * Return: 0 or a negative errno.
 */
int rbln_device_init(struct rbln_device *rdev, struct rbln_hw *hw)
{
	int ret;

	rdev->hw = hw;
	/* Whatever a previous driver left running stops before anything is set up. */
	if (!rbln_hw_stop(rdev))
		return -ENODEV;
	ret = rbln_hw_identify(rdev);
	if (ret)
		return ret;

	ret = rbln_devmem_init(rdev) ?: rbln_gem_init(rdev) ?: rbln_mmu_init(rdev) ?:
	      rbln_peer_init(rdev) ?: rbln_job_init(rdev) ?: rbln_vm_bind_init(rdev);
	if (ret)
		return ret;
	rbln_debugfs_init(rdev);

	/* Before its users: their imports must be in the list that revokes. */
	rbln_peer_register(rdev);
	ret = drm_dev_register(&rdev->drm, 0);
	if (ret) {
		rbln_peer_unregister(rdev);
		return ret;
	}

	drm_info(&rdev->drm, "%s NPU %u, rev %u.%u, %llu MiB device memory\n",
		 rdev->emulated ? "emulated" : "silicon", rdev->index,
		 rdev->hw_rev >> 16, rdev->hw_rev & 0xffff,
		 rdev->mem_size >> 20);
	return 0;
}

/**
 * rbln_device_unplug() - the NPU is gone, or its driver is unbound
 * @rdev: the device
 *
 * Unplug rather than unregister: files may still be open. From here on
 * every ioctl fails with -ENODEV, the device is stopped, every job in
 * flight or queued fails with -ENODEV, other devices' imports of its
 * memory reach nothing, nothing stays mapped for DMA on the bus device,
 * and the driver's state lives until the last file closes.
 */
void rbln_device_unplug(struct rbln_device *rdev)
{
	drm_dev_unplug(&rdev->drm);
	rbln_peer_unregister(rdev);
	rbln_hw_stop(rdev);
	rbln_job_unplug(rdev);
	/*
	 * Stopped, the device reads no memory any more: every DMA mapping
	 * goes now, while the driver is bound to the bus device; the files
	 * still open keep only memory the device no longer names.
	 */
	rbln_mmu_unplug(rdev);
	rbln_gem_unplug(rdev);
	rbln_peer_unplug(rdev);
}

/**
 * rbln_device_lost() - the device is gone, or as good as gone
 * @rdev: the device
 * @why: what showed it, for the log
 *
 * It fell off its bus and the bus did not tell (its registers read
 * all-ones), or it stopped answering and was cut off: have the backend
 * unbind it, which unplugs it as a removal does. Any context.
 */
void rbln_device_lost(struct rbln_device *rdev, const char *why)
{
	if (atomic_xchg(&rdev->lost, 1))
		return;
	drm_err(&rdev->drm, "the device is lost: %s\n", why);
	if (rdev->hw->ops->lost)
		rdev->hw->ops->lost(rdev->hw);
}

static int rbln_emu_probe(struct device *dev)
{
	struct rbln_device *rdev = rbln_device_alloc(dev);
	int ret;

	if (IS_ERR(rdev))
		return PTR_ERR(rdev);
	ret = rbln_device_init(rdev, rbln_emu_hw(dev));
	if (ret)
		rbln_emu_irq_detach(dev);
	return ret;
}

static int rbln_emu_remove(struct device *dev)
{
	rbln_device_unplug(dev_get_drvdata(dev));
	rbln_emu_irq_detach(dev);
	return 0;
}

static struct device_driver rbln_emu_driver = {
	.name = RBLN_DRIVER_NAME,
	.bus = &rbln_emu_bus_type,
	.owner = THIS_MODULE,
	.probe = rbln_emu_probe,
	.remove = rbln_emu_remove,
	.dev_groups = rbln_dev_groups,
};

struct workqueue_struct *rbln_wq;

static int __init rbln_init(void)
{
	int ret;

	rbln_wq = alloc_workqueue("rbln", WQ_UNBOUND, 0);
	if (!rbln_wq)
		return -ENOMEM;
	ret = rbln_emu_init();
	if (ret)
		goto err_wq;

	ret = driver_register(&rbln_emu_driver);
	if (ret)
		goto err_emu;

	ret = rbln_emu_add_initial();
	if (ret)
		goto err_driver;

	ret = rbln_pci_register();
	if (ret)
		goto err_driver;

	return 0;

err_driver:
	rbln_emu_remove_all();
	driver_unregister(&rbln_emu_driver);
err_emu:
	rbln_emu_exit();
err_wq:
	destroy_workqueue(rbln_wq);
	rbln_job_exit();
	return ret;
}

static void __exit rbln_exit(void)
{
	rbln_pci_unregister();
	rbln_emu_remove_all();
	driver_unregister(&rbln_emu_driver);
	wait_event(rbln_devices_released, !atomic_read(&rbln_devices_live));
	rbln_emu_exit();
	/* Last: what is queued may release a device, with the module's code. */
	destroy_workqueue(rbln_wq);
	rbln_job_exit();
}

module_init(rbln_init);
module_exit(rbln_exit);

MODULE_DESCRIPTION("DRM accel driver for rbln NPUs, on PCI and emulated");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
