// SPDX-License-Identifier: MIT
/*
 * rbln_job.c - the runtime's own queue on each device: host buffers the
 * device reads, submission on the device timeline, waiting
 *
 * Jobs are numbered: the n-th job on a device is point n, and jobs of the
 * queue complete in order, so "point n is done" means all up to n are.
 * Job n signals binary syncobj n % RBLN_SYNC_SLOTS, and job n + SLOTS is
 * not submitted before job n is done, so each slot holds the fence of the
 * one point it names. A timeline syncobj would do the same with one
 * handle, but its chain nodes cost every job an allocation, an RCU free
 * and a longer wait: about 15% of a small op's round trip under QEMU.
 * Commands go to a ring of command space; host buffers a job uses are
 * kept until its point is done.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xf86drm.h>

#include "rbln_internal.h"
#include "rbln_staging.h"

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
		return rbln_fail(rbln_errno_status(ret), "cannot create a %llu-byte host buffer: %s",
				 (unsigned long long)size, strerror(-ret));
	}
	*out = b;
	return RBLN_OK;
}

static uint32_t slot_of(struct rbln_dev *d, uint64_t point)
{
	return d->slots[point % RBLN_SYNC_SLOTS];
}

/* Raises d->completed to @point; it only moves forward. */
static void note_completed(struct rbln_dev *d, uint64_t point)
{
	uint64_t seen = __atomic_load_n(&d->completed, __ATOMIC_RELAXED);

	while (seen < point &&
	       !__atomic_compare_exchange_n(&d->completed, &seen, point, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/*
 * A host buffer no job uses any more, with d->lock held: a staging buffer
 * goes back to the pool if there is room, anything else away.
 */
static void host_buf_retire(struct rbln_dev *d, struct rbln_host_buf *b)
{
	if (b->staging && rbln_staging_recycle_locked(d, b))
		return;
	munmap(b->cpu, b->size);
	rbln_drm_bo_close(d->drm, b->handle);
	free(b);
}

/* Retires @b once @point is done; with d->lock held. */
void rbln_host_buf_release(struct rbln_dev *d, struct rbln_host_buf *b, uint64_t point)
{
	if (!point || rbln_point_done(d, point)) {
		host_buf_retire(d, b);
		return;
	}
	b->point = point;
	b->next = d->deferred;
	d->deferred = b;
}

/* Retires the host buffers whose jobs are done; with d->lock held. */
void rbln_reap_locked(struct rbln_dev *d)
{
	struct rbln_host_buf **pb = &d->deferred, *b;

	while ((b = *pb)) {
		if (rbln_point_done(d, b->point)) {
			*pb = b->next;
			host_buf_retire(d, b);
		} else {
			pb = &b->next;
		}
	}
}

/*
 * The ring of command buffers: one host buffer object per device, written
 * front to back and reused once the jobs that read a stretch are done, so
 * a job needs no buffer object of its own. Protected by d->lock.
 */

struct rbln_cmd_ring {
	struct rbln_host_buf *buf;
	uint64_t size;		/* of buf */
	uint64_t head;		/* bytes ever submitted */
	uint64_t tail;		/* bytes ever released */
	uint64_t next;		/* end of the reservation not yet submitted */
	struct {
		uint64_t end, point;
	} jobs[RBLN_SYNC_SLOTS];	/* submitted stretches not yet released, oldest first */
	unsigned int first, count;
};

/* Releases the oldest stretch once its job is done; waits for it if @wait. */
static rbln_status ring_retire(struct rbln_dev *d, struct rbln_cmd_ring *r, bool wait)
{
	uint64_t point = r->jobs[r->first].point;
	rbln_status st = RBLN_OK;

	/* A failed job read its commands too: the stretch is free either way. */
	if (!rbln_point_done(d, point)) {
		if (!wait)
			return RBLN_ERROR_BUSY;
		st = rbln_wait_done(d, point);
	}
	if (st)
		return st;
	r->tail = r->jobs[r->first].end;
	r->first = (r->first + 1) % RBLN_SYNC_SLOTS;
	r->count--;
	return RBLN_OK;
}

rbln_status rbln_ring_reserve_locked(struct rbln_dev *d, uint32_t len, void **cpu, uint64_t *va)
{
	struct rbln_cmd_ring *r = d->ring;
	uint64_t start, pos;
	rbln_status st;

	len = (len + 7) & ~7u;
	if (!len || len > d->max_cmd)
		return rbln_fail(RBLN_ERROR_UNSUPPORTED, "a %u-byte command buffer (at most %u)", len,
				 d->max_cmd);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
		/* Twice the largest command buffer: little of it pinned (offload counts on that). */
		r->size = 2 * (uint64_t)d->max_cmd;
		st = rbln_host_buf_new(d, r->size, &r->buf);
		if (st) {
			free(r);
			return st;
		}
		d->ring = r;
	}
	while (r->count && ring_retire(d, r, false) == RBLN_OK)
		;
	start = r->head;
	pos = start % r->size;
	if (pos + len > r->size)
		start += r->size - pos;	/* a packet never wraps */
	while (start + len - r->tail > r->size || r->count == RBLN_SYNC_SLOTS) {
		st = ring_retire(d, r, true);
		if (st)
			return st;
	}
	r->next = start + len;
	*cpu = (char *)r->buf->cpu + start % r->size;
	*va = r->buf->va + start % r->size;
	return RBLN_OK;
}

rbln_status rbln_submit_locked(struct rbln_dev *d, uint64_t va, uint32_t len, const uint32_t *bos,
			       uint32_t n, const struct drm_rbln_sync *waits, uint32_t nwaits,
			       uint64_t *point)
{
	struct drm_rbln_sync signal = { .handle = slot_of(d, d->point + 1) };
	rbln_status st;
	int ret;

	/* The slot's previous point must be done before its fence is replaced. */
	if (d->point + 1 > RBLN_SYNC_SLOTS) {
		st = rbln_wait_done(d, d->point + 1 - RBLN_SYNC_SLOTS);
		if (st)
			return st;
	}
	ret = rbln_drm_submit(d->drm, d->queue, va, len, bos, n, waits, nwaits, &signal);
	if (ret)
		return rbln_fail(RBLN_ERROR_DEVICE, "cannot submit work: %s", strerror(-ret));
	*point = ++d->point;
	return RBLN_OK;
}

rbln_status rbln_ring_submit_locked(struct rbln_dev *d, uint64_t va, uint32_t len,
				    const uint32_t *bos, uint32_t n, uint64_t *point)
{
	struct rbln_cmd_ring *r = d->ring;
	uint32_t all[2 * RBLN_MAX_MEMBERS + 4];
	unsigned int slot;
	rbln_status st;

	if (n >= sizeof(all) / sizeof(all[0]))
		return rbln_fail(RBLN_ERROR_INVALID, "internal: %u objects in a job", n);
	memcpy(all, bos, n * sizeof(*bos));
	all[n] = r->buf->handle;
	st = rbln_submit_locked(d, va, len, all, n + 1, NULL, 0, point);
	if (st)
		return st;
	slot = (r->first + r->count++) % RBLN_SYNC_SLOTS;
	r->jobs[slot].end = r->next;
	r->jobs[slot].point = *point;
	r->head = r->next;
	return RBLN_OK;
}

/*
 * Waits up to @timeout_ns (absolute) for submitted @point: 0 when it is
 * done, -ETIME when not yet. Its slot may hold a later point by now, which
 * completes after it: waiting for that one is longer, never wrong.
 */
static int slot_wait(struct rbln_dev *d, uint64_t point, int64_t timeout_ns)
{
	uint32_t h = slot_of(d, point);

	if (drmSyncobjWait(rbln_drm_fd(d->drm), &h, 1, timeout_ns, 0, NULL))
		return -errno;
	note_completed(d, point);
	return 0;
}

bool rbln_point_done(struct rbln_dev *d, uint64_t point)
{
	if (point <= __atomic_load_n(&d->completed, __ATOMIC_ACQUIRE))
		return true;
	return !slot_wait(d, point, 0);
}

rbln_status rbln_wait_done(struct rbln_dev *d, uint64_t point)
{
	int ret;

	if (point <= __atomic_load_n(&d->completed, __ATOMIC_ACQUIRE))
		return RBLN_OK;
	ret = slot_wait(d, point, INT64_MAX);
	if (ret)
		return rbln_fail(RBLN_ERROR_DEVICE, "waiting for the device failed: %s",
				 strerror(-ret));
	return RBLN_OK;
}

/*
 * Reports a job that failed since the last report, like CUDA's sticky
 * errors: one GET_PARAM says whether any did, and only then is the fence
 * of @point looked at for the error to name.
 */
static rbln_status check_failures(struct rbln_dev *d, uint64_t point)
{
	uint64_t failed, seen;
	int status = 0, ret;

	ret = rbln_drm_get_param(d->drm, RBLN_PARAM_FAILED_JOBS, &failed);
	if (ret)
		return rbln_fail(RBLN_ERROR_DEVICE, "cannot query the device: %s", strerror(-ret));
	seen = __atomic_exchange_n(&d->failed_seen, failed, __ATOMIC_ACQ_REL);
	if (failed == seen)
		return RBLN_OK;
	ret = rbln_drm_fence_status(d->drm, slot_of(d, point), 0, &status);
	if (ret || status < 0)
		return rbln_fail(RBLN_ERROR_DEVICE, "device work failed: %s",
				 strerror(ret ? -ret : -status));
	return rbln_fail(RBLN_ERROR_DEVICE, "%llu earlier job%s on the device failed",
			 (unsigned long long)(failed - seen), failed - seen == 1 ? "" : "s");
}

rbln_status rbln_last_job_fence(struct rbln_dev *d, int *fd)
{
	rbln_status st = RBLN_OK;
	uint64_t point;

	*fd = -1;
	/* Under the lock no submission reuses the slot of the newest point. */
	pthread_mutex_lock(&d->lock);
	point = d->point;
	if (point && !rbln_point_done(d, point) &&
	    drmSyncobjExportSyncFile(rbln_drm_fd(d->drm), slot_of(d, point), fd)) {
		*fd = -1;
		st = rbln_fail(RBLN_ERROR_DEVICE, "cannot export a fence: %s", strerror(errno));
	}
	pthread_mutex_unlock(&d->lock);
	return st;
}

rbln_status rbln_point_syncobj(struct rbln_dev *d, uint64_t point, uint32_t handle)
{
	int fd = rbln_drm_fd(d->drm), ret;

	pthread_mutex_lock(&d->lock);
	/* Its slot holds a later point once @point + RBLN_SYNC_SLOTS is submitted, when it was done. */
	if (!point || d->point - point >= RBLN_SYNC_SLOTS)
		ret = drmSyncobjSignal(fd, &handle, 1);
	else
		ret = drmSyncobjTransfer(fd, handle, 0, slot_of(d, point), 0, 0);
	pthread_mutex_unlock(&d->lock);
	if (ret)
		return rbln_fail(RBLN_ERROR_DEVICE, "cannot hand a fence over: %s", strerror(errno));
	return RBLN_OK;
}

void rbln_async_fail(struct rbln_dev *d, rbln_status st)
{
	pthread_mutex_lock(&d->async_lock);
	/* The first failure is the one to report: later ones may follow from it. */
	if (!d->async_status) {
		d->async_status = st;
		snprintf(d->async_error, sizeof(d->async_error), "%s", rbln_last_error());
	}
	pthread_mutex_unlock(&d->async_lock);
}

rbln_status rbln_wait_point(struct rbln_dev *d, uint64_t point)
{
	rbln_status st;

	if (!point)
		return RBLN_OK;
	st = rbln_wait_done(d, point);
	return st ? st : check_failures(d, point);
}
