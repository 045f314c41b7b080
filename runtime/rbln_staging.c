// SPDX-License-Identifier: MIT
/*
 * rbln_staging.c - data between device memory and the host, through
 * pinned staging buffers
 *
 * A device keeps a small pool of staging buffers; a copy takes one per
 * chunk, a DMA job fills or drains it, and it goes back to the pool once
 * that job is done. Tensors copy whole ranges here with two chunks in
 * flight; collectives take buffers and queue the jobs chunk by chunk,
 * since their host side is the network's, each job perhaps waiting on
 * the device for the host to have done its part.
 */

#include <stdlib.h>
#include <string.h>

#include "rbln_staging.h"

/*
 * A device-to-host chunk not yet copied out: the staging buffer's bytes
 * go to @dst once the job at @point is done. Kept on the device
 * (d->copies) for a non-blocking copy, until rbln_synchronize().
 */
struct rbln_pending_copy {
	struct rbln_host_buf *staging;
	uint64_t point;
	void *dst;
	size_t bytes;
	struct rbln_pending_copy *next;
};

/* A staging buffer of @bytes made (@sign 1) or freed (-1), in the statistics; with d->lock held. */
static void staging_count_locked(struct rbln_dev *d, int sign, uint64_t bytes)
{
	struct rbln_stat *s = &d->staging_bytes;

	s->current += sign * (int64_t)bytes;
	if (sign > 0)
		s->total_allocated += bytes;
	else
		s->total_freed += bytes;
	if (s->current > s->peak)
		s->peak = s->current;
}

bool rbln_staging_recycle_locked(struct rbln_dev *d, struct rbln_host_buf *b)
{
	if (d->nstaging < RBLN_STAGING_POOL) {
		b->point = 0;
		b->next = d->staging;
		d->staging = b;
		d->nstaging++;
		return true;
	}
	d->staging_live--;
	staging_count_locked(d, -1, b->size);
	return false;
}

/* The first point a staging buffer waits for; 0: none waits. With d->lock held. */
static uint64_t staging_first_point(struct rbln_dev *d)
{
	struct rbln_host_buf *b;
	uint64_t first = 0;

	for (b = d->deferred; b; b = b->next)
		if (b->staging && (!first || b->point < first))
			first = b->point;
	return first;
}

/*
 * Staging buffers are kept rather than made per copy: creating, mapping
 * and faulting in a buffer object, then unmapping and closing it, was
 * most of a small copy's time (an item() took ~350 us under QEMU). With
 * RBLN_STAGING_POOL of them in existence, one that a job still reads or
 * writes is waited for rather than another made: the job that would use
 * a new one runs after it anyway, on the device's one queue.
 */
rbln_status rbln_staging_get(struct rbln_dev *d, struct rbln_host_buf **out)
{
	struct rbln_host_buf *b;
	uint64_t point;
	rbln_status st;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		rbln_reap_locked(d);
		b = d->staging;
		if (b || d->staging_live < RBLN_STAGING_POOL)
			break;
		point = staging_first_point(d);
		if (!point)
			break;	/* the others are in use: make one more */
		pthread_mutex_unlock(&d->lock);
		st = rbln_wait_done(d, point);
		pthread_mutex_lock(&d->lock);
		if (st)
			break;
	}
	if (b) {
		d->staging = b->next;
		d->nstaging--;
		b->next = NULL;
		*out = b;
		pthread_mutex_unlock(&d->lock);
		return RBLN_OK;
	}
	pthread_mutex_unlock(&d->lock);
	st = rbln_host_buf_new(d, RBLN_STAGING_CHUNK, &b);
	if (st)
		return st;
	b->staging = true;
	pthread_mutex_lock(&d->lock);
	d->staging_live++;
	staging_count_locked(d, 1, b->size);
	pthread_mutex_unlock(&d->lock);
	*out = b;
	return RBLN_OK;
}

/* Adds @bo to the @n distinct objects of @bos: how many there are then. */
static int add_bo(uint32_t *bos, int n, uint32_t bo)
{
	for (int i = 0; i < n; i++)
		if (bos[i] == bo)
			return n;
	bos[n] = bo;
	return n + 1;
}

rbln_status rbln_staging_jobs(struct rbln_dev *d, const struct rbln_copy *cp, int n,
			      const struct rbln_copy_guard *guard, uint64_t *point)
{
	const uint32_t pkt = sizeof(struct rbln_pkt_dma_copy);
	uint32_t head = guard ? sizeof(struct rbln_pkt_wait) : 0, len;
	int per = (d->max_cmd - head) / pkt, done = 0, cnt, nbos, more, i;
	uint32_t bos[RBLN_MAX_MEMBERS + 2];
	rbln_status st = RBLN_OK;
	struct rbln_drm_cmd cmd;
	uint64_t va;
	void *cpu;

	if (!n && !guard)
		return RBLN_OK;
	do {
		/* As many copies as a command buffer holds and a job's object list. */
		nbos = guard ? add_bo(bos, 0, guard->bo) : 0;
		for (cnt = 0; done + cnt < n && cnt < per; cnt++) {
			more = add_bo(bos, add_bo(bos, nbos, cp[done + cnt].dst_bo),
				      cp[done + cnt].src_bo);
			if (more > RBLN_MAX_MEMBERS && cnt)
				break;
			nbos = more;
		}
		len = head + cnt * pkt;
		pthread_mutex_lock(&d->lock);
		st = rbln_ring_reserve_locked(d, len, &cpu, &va);
		if (!st) {
			rbln_drm_cmd_init(&cmd, cpu, len);
			if (guard)
				rbln_drm_cmd_wait(&cmd, guard->va, guard->value);
			for (i = done; i < done + cnt; i++)
				rbln_drm_cmd_dma_copy(&cmd, cp[i].dst, cp[i].src, cp[i].bytes);
			st = rbln_ring_submit_locked(d, va, cmd.len, bos, nbos, point);
		}
		rbln_reap_locked(d);
		pthread_mutex_unlock(&d->lock);
		done += cnt;
	} while (!st && done < n);
	return st;
}

/*
 * Finishes a chunk copied to a staging buffer: unless the copy already
 * failed (@st), waits for its job (if @wait; else it is known done) and
 * copies it out. Gives the staging buffer back either way; *@h is empty
 * afterwards.
 */
static rbln_status copy_out(struct rbln_dev *d, struct rbln_pending_copy *h, bool wait,
			    rbln_status st)
{
	if (!st && wait)
		st = rbln_wait_point(d, h->point);
	if (!st)
		memcpy(h->dst, h->staging->cpu, h->bytes);
	pthread_mutex_lock(&d->lock);
	rbln_host_buf_release(d, h->staging, h->point);
	pthread_mutex_unlock(&d->lock);
	h->staging = NULL;
	return st;
}

/*
 * The last two chunks of a device-to-host copy, held[@older] first (its
 * job is done before the other's): finished now, or with @non_blocking
 * left for rbln_synchronize() (rbln_staging_finish_locked()).
 */
static rbln_status copy_out_last(struct rbln_dev *d, struct rbln_pending_copy *held,
				 size_t older, bool non_blocking, rbln_status st)
{
	struct rbln_pending_copy *pc;
	size_t j;

	for (j = older; j < older + 2; j++) {
		struct rbln_pending_copy *h = &held[j % 2];

		if (!h->staging)
			continue;
		pc = non_blocking && !st ? malloc(sizeof(*pc)) : NULL;
		if (!pc) {
			st = copy_out(d, h, true, st);
			continue;
		}
		*pc = *h;
		pthread_mutex_lock(&d->lock);
		pc->next = d->copies;
		d->copies = pc;
		pthread_mutex_unlock(&d->lock);
	}
	return st;
}

/*
 * Two jobs in flight, so a big tensor never needs its size in pinned
 * memory (offload relies on it). Device to host, a chunk is copied out
 * of its staging buffer once the job two chunks later is about to take
 * one.
 */
rbln_status rbln_staging_copy(struct rbln_dev *d, uint32_t bo, uint64_t va, bool to_device,
			      void *host, size_t bytes, bool non_blocking, bool cold,
			      uint64_t *last)
{
	struct rbln_pending_copy held[2] = { { 0 }, { 0 } };
	uint64_t inflight[2] = { 0, 0 }, point = 0;
	struct rbln_host_buf *stage;
	struct rbln_copy cp;
	size_t off, n, i;
	rbln_status st;

	st = rbln_capture_refuse(0, d, to_device ? "a copy from the host to the device" :
				 "a copy from the device to the host");
	for (off = 0, i = 0; off < bytes && !st; off += n, i++) {
		n = bytes - off < RBLN_STAGING_CHUNK ? bytes - off : RBLN_STAGING_CHUNK;
		/*
		 * Bound the pinned memory: the chunk before last must be done,
		 * and its staging buffer back in the pool before one is taken.
		 */
		st = rbln_wait_point(d, inflight[i % 2]);
		if (held[i % 2].staging)
			st = copy_out(d, &held[i % 2], false, st);
		if (st)
			break;
		st = rbln_staging_get(d, &stage);
		if (st)
			break;
		if (to_device)
			memcpy(stage->cpu, (char *)host + off, n);
		if (to_device && cold)
			rbln_offload_cold(host, off, n);
		cp = to_device ? (struct rbln_copy){ bo, stage->handle, va + off, stage->va, n } :
				 (struct rbln_copy){ stage->handle, bo, stage->va, va + off, n };
		st = rbln_staging_jobs(d, &cp, 1, NULL, &point);
		if (to_device || st) {
			pthread_mutex_lock(&d->lock);
			rbln_host_buf_release(d, stage, st ? 0 : point);
			pthread_mutex_unlock(&d->lock);
		}
		if (st)
			break;
		inflight[i % 2] = point;
		if (!to_device)
			held[i % 2] = (struct rbln_pending_copy){ .staging = stage, .point = point,
								  .dst = (char *)host + off, .bytes = n };
	}
	*last = point;
	return copy_out_last(d, held, i % 2, non_blocking, st);
}

void rbln_staging_finish_locked(struct rbln_dev *d)
{
	struct rbln_pending_copy **pp = &d->copies, *pc;

	while ((pc = *pp)) {
		if (rbln_point_done(d, pc->point)) {
			memcpy(pc->dst, pc->staging->cpu, pc->bytes);
			*pp = pc->next;
			rbln_host_buf_release(d, pc->staging, 0);
			free(pc);
		} else {
			pp = &pc->next;
		}
	}
}
