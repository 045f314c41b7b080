// SPDX-License-Identifier: MIT
/*
 * rbln_drm_bo.c - buffer objects: create, describe, close, share, map
 */

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>

#include <xf86drm.h>

#include "rbln_drm.h"

int rbln_drm_bo_create(struct rbln_drm_device *dev, uint64_t size,
		       uint32_t placement, uint32_t flags, uint32_t *handle,
		       uint64_t *va)
{
	struct drm_rbln_bo_create args = {
		.size = size,
		.placement = placement,
		.flags = flags,
	};

	if (!dev || !handle)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_BO_CREATE, &args))
		return -errno;
	*handle = args.handle;
	if (va)
		*va = args.va;
	return 0;
}

static int bo_info(struct rbln_drm_device *dev, struct drm_rbln_bo_info *args,
		   struct rbln_drm_bo_info *info)
{
	if (!dev || !info)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_BO_INFO, args))
		return -errno;
	info->handle = args->handle;
	info->placement = args->placement;
	info->flags = args->bo_flags;
	info->va = args->va;
	info->size = args->size;
	info->mmap_offset = args->mmap_offset;
	return 0;
}

int rbln_drm_bo_info(struct rbln_drm_device *dev, uint32_t handle,
		     struct rbln_drm_bo_info *info)
{
	struct drm_rbln_bo_info args = { .handle = handle };

	return bo_info(dev, &args, info);
}

int rbln_drm_bo_info_by_va(struct rbln_drm_device *dev, uint64_t va,
			   struct rbln_drm_bo_info *info)
{
	struct drm_rbln_bo_info args = { .flags = RBLN_BO_INFO_BY_VA, .va = va };

	return bo_info(dev, &args, info);
}

int rbln_drm_bo_close(struct rbln_drm_device *dev, uint32_t handle)
{
	struct drm_gem_close args = { .handle = handle };

	if (!dev)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_GEM_CLOSE, &args))
		return -errno;
	return 0;
}

int rbln_drm_bo_export(struct rbln_drm_device *dev, uint32_t handle, int *fd)
{
	if (!dev || !fd)
		return -EINVAL;
	if (drmPrimeHandleToFD(rbln_drm_fd(dev), handle, DRM_CLOEXEC | DRM_RDWR, fd))
		return -errno;
	return 0;
}

int rbln_drm_bo_import(struct rbln_drm_device *dev, int fd, uint32_t *handle)
{
	if (!dev || !handle)
		return -EINVAL;
	if (drmPrimeFDToHandle(rbln_drm_fd(dev), fd, handle))
		return -errno;
	return 0;
}

int rbln_drm_bo_mmap(struct rbln_drm_device *dev, uint32_t handle, int prot,
		     void **ptr, uint64_t *size)
{
	struct rbln_drm_bo_info info;
	void *p;
	int ret;

	if (!ptr)
		return -EINVAL;
	ret = rbln_drm_bo_info(dev, handle, &info);
	if (ret)
		return ret;
	if (info.placement != RBLN_BO_HOST)
		return -ENODEV;

	p = mmap(NULL, info.size, prot, MAP_SHARED, rbln_drm_fd(dev),
		 (off_t)info.mmap_offset);
	if (p == MAP_FAILED)
		return -errno;
	*ptr = p;
	if (size)
		*size = info.size;
	return 0;
}
