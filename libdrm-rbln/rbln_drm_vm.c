// SPDX-License-Identifier: MIT
/*
 * rbln_drm_vm.c - VM_BIND: reserved ranges and the mappings placed in them
 */

#include <errno.h>
#include <stdint.h>

#include <xf86drm.h>

#include "rbln_drm.h"

int rbln_drm_vm_reserve(struct rbln_drm_device *dev, uint64_t size, uint64_t align,
			uint64_t *va)
{
	struct drm_rbln_vm_reserve args = { .size = size, .align = align };

	if (!dev || !va)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_VM_RESERVE, &args))
		return -errno;
	*va = args.va;
	return 0;
}

int rbln_drm_vm_release(struct rbln_drm_device *dev, uint64_t va)
{
	struct drm_rbln_vm_release args = { .va = va };

	if (!dev)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_VM_RELEASE, &args))
		return -errno;
	return 0;
}

static int vm_bind(struct rbln_drm_device *dev, struct drm_rbln_vm_bind *args,
		   const struct drm_rbln_sync *waits, uint32_t wait_count,
		   const struct drm_rbln_sync *signal)
{
	if (!dev || (wait_count && !waits))
		return -EINVAL;
	args->wait_count = wait_count;
	args->waits = (uintptr_t)waits;
	if (signal)
		args->signal = *signal;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_VM_BIND, args))
		return -errno;
	return 0;
}

int rbln_drm_vm_map(struct rbln_drm_device *dev, uint64_t va, uint64_t size,
		    uint32_t handle, uint64_t bo_offset, uint32_t flags,
		    const struct drm_rbln_sync *waits, uint32_t wait_count,
		    const struct drm_rbln_sync *signal)
{
	struct drm_rbln_vm_bind args = {
		.op = RBLN_VM_BIND_MAP,
		.flags = flags,
		.va = va,
		.size = size,
		.bo_offset = bo_offset,
		.handle = handle,
	};

	return vm_bind(dev, &args, waits, wait_count, signal);
}

int rbln_drm_vm_unmap(struct rbln_drm_device *dev, uint64_t va, uint64_t size,
		      const struct drm_rbln_sync *waits, uint32_t wait_count,
		      const struct drm_rbln_sync *signal)
{
	struct drm_rbln_vm_bind args = {
		.op = RBLN_VM_BIND_UNMAP,
		.va = va,
		.size = size,
	};

	return vm_bind(dev, &args, waits, wait_count, signal);
}
