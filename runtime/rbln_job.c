// SPDX-License-Identifier: MIT
/*
 * rbln_job.c - the runtime's own queue on each device: host buffers the
 * device reads, submission on the device timeline, waiting
 *
 * Every job signals the next point of the device's timeline syncobj, so
 * "all work up to point n is done" is one query, and rbln_synchronize()
 * one wait. Host buffers a job uses are kept until its point is done.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xf86drm.h>

#include "rbln_internal.h"

rbln_status rbln_host_buf_new(struct rbln_dev *d, uint64_t size, struct rbln_host_buf **out)
{
	struct rbln_host_buf *b = calloc(1, sizeof(*b));
	int ret;

	if (!b)
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
	ret = rbln_drm_bo_create(d->drm, size, RBLN_BO_HOST, 0, &b->handle, &b->va);
	if (!ret) {
		ret = rbln_drm_bo_mmap(d->drm, b->handle, PROT_READ | PROT_WRITE, &b->cpu, &b->size);
		if (ret)
			rbln_drm_bo_close(d->drm, b->handle);
	}
	if (ret) {
		free(b);
		return rbln_fail(ret == -ENOMEM ? RBLN_ERROR_OUT_OF_MEMORY : RBLN_ERROR_DEVICE,
				 "cannot create a %llu-byte host buffer: %s",
				 (unsigned long long)size, strerror(-ret));
	}
	*out = b;
	return RBLN_OK;
}

static void host_buf_destroy(struct rbln_dev *d, struct rbln_host_buf *b)
{
	munmap(b->cpu, b->size);
	rbln_drm_bo_close(d->drm, b->handle);
	free(b);
}

/* Frees @b once @point is done; with d->lock held. */
void rbln_host_buf_release(struct rbln_dev *d, struct rbln_host_buf *b, uint64_t point)
{
	if (!point || rbln_point_done(d, point)) {
		host_buf_destroy(d, b);
		return;
	}
	b->point = point;
	b->next = d->deferred;
	d->deferred = b;
}

/* Frees the host buffers whose jobs are done; with d->lock held. */
void rbln_reap_locked(struct rbln_dev *d)
{
	struct rbln_host_buf **pb = &d->deferred, *b;

	while ((b = *pb)) {
		if (rbln_point_done(d, b->point)) {
			*pb = b->next;
			host_buf_destroy(d, b);
		} else {
			pb = &b->next;
		}
	}
}

rbln_status rbln_submit_locked(struct rbln_dev *d, struct rbln_host_buf *cmd, uint32_t len,
			       const uint32_t *bos, uint32_t n, uint64_t *point)
{
	struct drm_rbln_sync signal = { .handle = d->timeline, .point = d->point + 1 };
	uint32_t all[16];
	int ret;

	if (n >= 16)
		return rbln_fail(RBLN_ERROR_INVALID, "internal: too many objects in a job");
	memcpy(all, bos, n * sizeof(*bos));
	all[n] = cmd->handle;
	ret = rbln_drm_submit(d->drm, d->queue, cmd->va, len, all, n + 1, NULL, 0, &signal);
	if (ret)
		return rbln_fail(RBLN_ERROR_DEVICE, "cannot submit work: %s", strerror(-ret));
	*point = ++d->point;
	return RBLN_OK;
}

bool rbln_point_done(struct rbln_dev *d, uint64_t point)
{
	uint64_t done = 0;

	if (!point)
		return true;
	if (drmSyncobjQuery(rbln_drm_fd(d->drm), &d->timeline, &done, 1))
		return false;
	return done >= point;
}

rbln_status rbln_wait_point(struct rbln_dev *d, uint64_t point)
{
	int status = 0, ret;

	if (!point)
		return RBLN_OK;
	if (drmSyncobjTimelineWait(rbln_drm_fd(d->drm), &d->timeline, &point, 1, INT64_MAX,
				   DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL))
		return rbln_fail(RBLN_ERROR_DEVICE, "waiting for the device failed: %s",
				 strerror(errno));
	ret = rbln_drm_fence_status(d->drm, d->timeline, point, &status);
	if (ret || status < 0)
		return rbln_fail(RBLN_ERROR_DEVICE, "device work failed: %s",
				 strerror(ret ? -ret : -status));
	return RBLN_OK;
}
