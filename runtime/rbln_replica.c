// SPDX-License-Identifier: MIT
/*
 * rbln_replica.c - a whole tensor copied onto members of its logical device
 *
 * An op whose members each need all of an operand (a matmul's 2-D
 * right-hand side, a vector reduced to a scalar) runs on replicas. A
 * tensor is copied device to device: a member's own shard by a local
 * DMA_COPY, another member's through peer objects, the objects of the
 * shard's memory exported by its member and imported by this one, as the
 * driver's PRIME path allows between rbln devices: nothing goes through
 * the host.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rbln_internal.h"

void rbln_replicas_free(struct rbln_shard *r, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (r[i].block)
			rbln_allocator_free(r[i].dev->alloc, r[i].block,
					    __atomic_load_n(&r[i].last_point, __ATOMIC_ACQUIRE), 0);
}

/*
 * Copies @bytes of shard @src from byte @from, all in one object of its
 * member (exported there, imported here as a peer), to @dst_va on @dst's
 * member; the job's point in *@point.
 */
static rbln_status copy_peer_piece(struct rbln_shard *dst, uint64_t dst_va, struct rbln_shard *src,
				   uint64_t from, uint64_t bytes, const char *op, uint64_t *point)
{
	struct rbln_dev *dd = dst->dev, *sd = src->dev;
	uint64_t obj_offset, cmd_va;
	struct rbln_drm_bo_info info;
	struct rbln_drm_cmd c;
	uint32_t bos[2], peer = 0;
	rbln_status st;
	int ret, fd = -1;
	void *cmd;

	bos[0] = rbln_block_handle(dst->block);
	ret = rbln_drm_bo_export(sd->drm, rbln_block_piece(src->block, from, &obj_offset, NULL),
				 &fd);
	if (ret)
		return rbln_fail(rbln_errno_status(ret),
				 "%s: cannot export a shard to another member: %s", op,
				 strerror(-ret));

	pthread_mutex_lock(&dd->lock);
	/*
	 * An import of a dma-buf the file holds already returns the same
	 * handle: under the device lock, no other copy closes it under us.
	 */
	ret = rbln_drm_bo_import(dd->drm, fd, &peer);
	if (!ret)
		ret = rbln_drm_bo_info(dd->drm, peer, &info);
	close(fd);
	if (ret) {
		if (peer)
			rbln_drm_bo_close(dd->drm, peer);
		pthread_mutex_unlock(&dd->lock);
		return rbln_fail(rbln_errno_status(ret),
				 "%s: cannot import another member's shard: %s", op, strerror(-ret));
	}
	bos[1] = peer;
	st = rbln_ring_reserve_locked(dd, sizeof(struct rbln_pkt_dma_copy), &cmd, &cmd_va);
	if (!st) {
		rbln_drm_cmd_init(&c, cmd, sizeof(struct rbln_pkt_dma_copy));
		rbln_drm_cmd_dma_copy(&c, dst_va, info.va + obj_offset, bytes);
		st = rbln_ring_submit_locked(dd, cmd_va, c.len, bos, 2, point);
	}
	/* The job holds the peer object until it retires. */
	rbln_drm_bo_close(dd->drm, peer);
	pthread_mutex_unlock(&dd->lock);
	return st;
}

/*
 * Copies shard @src of a tensor into @dst's block at @offset, on @dst's
 * member, for op @op. Another member's shard is read through peer objects
 * once the last job writing it there is done, one per object its block
 * spans (an expandable segment's block may span several).
 */
static rbln_status copy_shard(struct rbln_shard *dst, size_t offset, struct rbln_shard *src,
			      const char *op)
{
	struct rbln_dev *dd = dst->dev, *sd = src->dev;
	uint32_t bos[2] = { rbln_block_handle(dst->block), rbln_block_handle(src->block) };
	uint64_t dst_va = rbln_block_va(dst->block) + offset, cmd_va, point = 0, from, len;
	struct rbln_drm_cmd c;
	rbln_status st;
	void *cmd;

	if (sd != dd) {
		st = rbln_wait_point(sd, __atomic_load_n(&src->last_point, __ATOMIC_ACQUIRE));
		for (from = 0; !st && from < src->nbytes; from += len) {
			rbln_block_piece(src->block, from, NULL, &len);
			if (len > src->nbytes - from)
				len = src->nbytes - from;
			st = copy_peer_piece(dst, dst_va + from, src, from, len, op, &point);
		}
		if (st)
			return st;
		rbln_shard_used(dst, point);
		return RBLN_OK;
	}

	pthread_mutex_lock(&dd->lock);
	st = rbln_ring_reserve_locked(dd, sizeof(struct rbln_pkt_dma_copy), &cmd, &cmd_va);
	if (!st) {
		rbln_drm_cmd_init(&c, cmd, sizeof(struct rbln_pkt_dma_copy));
		rbln_drm_cmd_dma_copy(&c, dst_va, rbln_block_va(src->block), src->nbytes);
		st = rbln_ring_submit_locked(dd, cmd_va, c.len, bos, 2, &point);
	}
	pthread_mutex_unlock(&dd->lock);
	if (st)
		return st;
	rbln_shard_used(dst, point);
	rbln_shard_used(src, point);
	return RBLN_OK;
}

/* All of @t, in device memory and locked, into @r's block, device to device. */
static rbln_status gather(rbln_tensor *t, struct rbln_shard *r, const char *op)
{
	rbln_status st = RBLN_OK;
	int i;

	for (i = 0; i < t->nshards && !st; i++)
		if (t->shards[i].nbytes)
			st = copy_shard(r, t->shards[i].offset, &t->shards[i], op);
	/*
	 * The other members' shards may be freed and their memory reused as
	 * soon as this returns, by jobs this member's ring does not order.
	 */
	return st ? st : rbln_wait_point(r->dev, __atomic_load_n(&r->last_point,
								 __ATOMIC_ACQUIRE));
}

rbln_status rbln_tensor_replicate(rbln_tensor *t, struct rbln_shard *r, int n, const char *op)
{
	rbln_status st;
	int i;

	memset(r, 0, n * sizeof(*r));
	st = rbln_tensor_ensure_device(t);
	if (st)
		return st;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < n && !st && t->nbytes; i++) {
		r[i].dev = t->shards[i].dev;
		r[i].nbytes = t->nbytes;
		st = rbln_shard_alloc(&r[i], t->device, op);
		if (!st)
			st = gather(t, &r[i], op);
	}
	pthread_mutex_unlock(&t->lock);
	if (st)
		rbln_replicas_free(r, n);
	return st;
}
