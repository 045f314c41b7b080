// SPDX-License-Identifier: MIT
/*
 * rbln_drm_job.c - queues, submission, and how a job ended
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/sync_file.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <xf86drm.h>

#include "rbln_drm.h"

int rbln_drm_queue_create(struct rbln_drm_device *dev, uint32_t priority,
			  uint32_t *queue_id)
{
	struct drm_rbln_queue_create args = { .priority = priority };

	if (!dev || !queue_id)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_QUEUE_CREATE, &args))
		return -errno;
	*queue_id = args.queue_id;
	return 0;
}

int rbln_drm_queue_destroy(struct rbln_drm_device *dev, uint32_t queue_id)
{
	struct drm_rbln_queue_destroy args = { .queue_id = queue_id };

	if (!dev)
		return -EINVAL;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_QUEUE_DESTROY, &args))
		return -errno;
	return 0;
}

int rbln_drm_submit(struct rbln_drm_device *dev, uint32_t queue_id,
		    uint64_t cmd_va, uint32_t cmd_size,
		    const uint32_t *bos, uint32_t bo_count,
		    const struct drm_rbln_sync *waits, uint32_t wait_count,
		    const struct drm_rbln_sync *signal)
{
	struct drm_rbln_submit args = {
		.queue_id = queue_id,
		.cmd_va = cmd_va,
		.cmd_size = cmd_size,
		.bo_count = bo_count,
		.bo_handles = (uintptr_t)bos,
		.wait_count = wait_count,
		.waits = (uintptr_t)waits,
	};

	if (!dev || (bo_count && !bos) || (wait_count && !waits))
		return -EINVAL;
	if (signal)
		args.signal = *signal;
	if (drmIoctl(rbln_drm_fd(dev), DRM_IOCTL_RBLN_SUBMIT, &args))
		return -errno;
	return 0;
}

/* The status of a sync_file: 1 signaled, 0 pending, <0 the fence's error. */
/*
 * The status of a sync file: its own, unless one of the fences it holds
 * failed. A timeline point's fence is a chain link, whose own status never
 * carries its job's error: the fences it unwraps to do.
 */
static int sync_file_status(int fd, int *status)
{
	struct sync_file_info info = { 0 };
	struct sync_fence_info *fences;
	uint32_t i, n;
	int ret = 0;

	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	*status = info.status;
	n = info.num_fences;
	if (!n)
		return 0;
	fences = calloc(n, sizeof(*fences));
	if (!fences)
		return -ENOMEM;
	info.sync_fence_info = (uintptr_t)fences;
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info)) {
		ret = -errno;
	} else {
		for (i = 0; i < info.num_fences && i < n; i++) {
			if (fences[i].status < 0) {
				*status = fences[i].status;
				break;
			}
		}
	}
	free(fences);
	return ret;
}

int rbln_drm_fence_status(struct rbln_drm_device *dev, uint32_t handle,
			  uint64_t point, int *status)
{
	uint32_t tmp = 0;
	int fd = -1, ret, fdev;

	if (!dev || !status)
		return -EINVAL;
	fdev = rbln_drm_fd(dev);

	/* A timeline point: move its fence to a binary syncobj to export it. */
	if (point) {
		if (drmSyncobjCreate(fdev, 0, &tmp))
			return -errno;
		if (drmSyncobjTransfer(fdev, tmp, 0, handle, point, 0)) {
			ret = -errno;
			goto out;
		}
		handle = tmp;
	}
	if (drmSyncobjExportSyncFile(fdev, handle, &fd)) {
		ret = -errno;
		goto out;
	}
	ret = sync_file_status(fd, status);
	close(fd);
out:
	if (tmp)
		drmSyncobjDestroy(fdev, tmp);
	return ret;
}
