// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_sync.c - the syncobjs a job waits for and signals
 *
 * SUBMIT and VM_BIND take the same struct drm_rbln_sync arrays and signal
 * the same way: a binary syncobj gets the job's fence, a timeline one a
 * new point. Everything that can fail is done before the job is pushed,
 * so that a pushed job always signals.
 */

#include <linux/dma-fence-chain.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"

/**
 * rbln_sync_add_waits() - make @job wait for user syncobjs
 * @job: the job, initialised
 * @file: whose syncobjs
 * @waits: user pointer to @count struct drm_rbln_sync
 * @count: at most RBLN_SUBMIT_MAX_WAITS, checked by the caller
 *
 * Return: 0, -EFAULT, -EINVAL for a non-zero pad or a syncobj (or point)
 * with no fence yet, -ENOENT for an unknown syncobj, or -ENOMEM.
 */
int rbln_sync_add_waits(struct drm_sched_job *job, struct drm_file *file, u64 waits, u32 count)
{
	struct drm_rbln_sync wait;
	struct dma_fence *fence;
	u32 i;
	int ret;

	for (i = 0; i < count; i++) {
		if (copy_from_user(&wait, u64_to_user_ptr(waits) + i * sizeof(wait),
				   sizeof(wait)))
			return -EFAULT;
		if (wait.pad)
			return -EINVAL;
		/* Not drm_sched_job_add_syncobj_dependency(): it takes a 32-bit point. */
		ret = drm_syncobj_find_fence(file, wait.handle, wait.point, 0, &fence);
		if (ret)
			return ret;
		ret = drm_sched_job_add_dependency(job, fence);
		if (ret)
			return ret;
	}
	return 0;
}

/**
 * rbln_sync_signal_prepare() - look up what a job will signal
 * @file: whose syncobj
 * @sync: the syncobj and point; handle 0 for none
 * @signal: filled in; pass to rbln_sync_signal() or rbln_sync_signal_abort()
 *
 * Return: 0, -EINVAL for a non-zero pad, -ENOENT or -ENOMEM.
 */
int rbln_sync_signal_prepare(struct drm_file *file, const struct drm_rbln_sync *sync,
			     struct rbln_sync_signal *signal)
{
	*signal = (struct rbln_sync_signal){ .point = sync->point };
	if (sync->pad)
		return -EINVAL;
	if (!sync->handle)
		return 0;
	signal->syncobj = drm_syncobj_find(file, sync->handle);
	if (!signal->syncobj)
		return -ENOENT;
	if (sync->point) {
		signal->chain = dma_fence_chain_alloc();
		if (!signal->chain) {
			drm_syncobj_put(signal->syncobj);
			signal->syncobj = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

/**
 * rbln_sync_signal() - hand a pushed job's fence to its syncobj
 * @signal: from rbln_sync_signal_prepare(), consumed
 * @fence: the job's finished fence
 */
void rbln_sync_signal(struct rbln_sync_signal *signal, struct dma_fence *fence)
{
	if (!signal->syncobj)
		return;
	if (signal->chain)
		drm_syncobj_add_point(signal->syncobj, signal->chain, fence, signal->point);
	else
		drm_syncobj_replace_fence(signal->syncobj, fence);
	drm_syncobj_put(signal->syncobj);
}

/**
 * rbln_sync_signal_abort() - drop what rbln_sync_signal_prepare() took
 * @signal: consumed
 */
void rbln_sync_signal_abort(struct rbln_sync_signal *signal)
{
	dma_fence_chain_free(signal->chain);
	if (signal->syncobj)
		drm_syncobj_put(signal->syncobj);
}
