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

rbln_status rbln_peer_get(struct rbln_dev *to, struct rbln_dev *from, struct rbln_block *block,
			  uint64_t offset, uint32_t *handle, uint64_t *va, uint64_t *at)
{
	struct rbln_drm_bo_info info;
	uint32_t h = 0;
	int ret, fd = -1;
	size_t i;

	ret = rbln_drm_bo_export(from->drm, rbln_block_piece(block, offset, at, NULL), &fd);
	if (ret)
		return rbln_fail(rbln_errno_status(ret), "cannot export a shard to another member: %s",
				 strerror(-ret));
	pthread_mutex_lock(&to->lock);
	/*
	 * An import of a dma-buf the file holds already returns the same
	 * handle: hence one reference count per handle, under the lock.
	 */
	ret = rbln_drm_bo_import(to->drm, fd, &h);
	close(fd);
	for (i = 0; !ret && i < to->npeers && to->peers[i].handle != h; i++)
		;
	if (!ret && i == to->npeers) {
		ret = rbln_drm_bo_info(to->drm, h, &info);
		if (!ret && !rbln_grow((void **)&to->peers, &to->cap_peers, to->npeers + 1,
				       sizeof(*to->peers)))
			ret = -ENOMEM;
		if (!ret)
			to->peers[to->npeers++] = (struct rbln_peer_ref){ .handle = h, .va = info.va };
		else
			rbln_drm_bo_close(to->drm, h);
	}
	if (!ret) {
		to->peers[i].refs++;
		*handle = h;
		*va = to->peers[i].va;
	}
	pthread_mutex_unlock(&to->lock);
	if (ret)
		return rbln_fail(rbln_errno_status(ret), "cannot import another member's shard: %s",
				 strerror(-ret));
	return RBLN_OK;
}

void rbln_peer_put(struct rbln_dev *to, uint32_t handle)
{
	size_t i;

	pthread_mutex_lock(&to->lock);
	for (i = 0; i < to->npeers && to->peers[i].handle != handle; i++)
		;
	/* A job using it holds the object until it retires. */
	if (i < to->npeers && !--to->peers[i].refs) {
		rbln_drm_bo_close(to->drm, handle);
		to->peers[i] = to->peers[--to->npeers];
	}
	pthread_mutex_unlock(&to->lock);
}

/*
 * A DMA_COPY of @bytes from @src_va to @dst_va on @d, a job using the two
 * objects of @bos, or recorded in graph @g (point 0).
 */
static rbln_status dma_copy(struct rbln_dev *d, struct rbln_graph *g, uint64_t dst_va,
			    uint64_t src_va, uint64_t bytes, const uint32_t *bos, uint64_t *point)
{
	struct rbln_drm_cmd c;
	uint64_t cmd_va;
	rbln_status st;
	void *cmd;

	*point = 0;
	if (g) {
		st = rbln_graph_record(g, d, sizeof(struct rbln_pkt_dma_copy), bos, 2, &cmd);
	} else {
		pthread_mutex_lock(&d->lock);
		st = rbln_ring_reserve_locked(d, sizeof(struct rbln_pkt_dma_copy), &cmd, &cmd_va);
	}
	if (!st) {
		rbln_drm_cmd_init(&c, cmd, sizeof(struct rbln_pkt_dma_copy));
		rbln_drm_cmd_dma_copy(&c, dst_va, src_va, bytes);
		if (!g)
			st = rbln_ring_submit_locked(d, cmd_va, c.len, bos, 2, point);
	}
	if (!g)
		pthread_mutex_unlock(&d->lock);
	return st;
}

/*
 * Copies shard @src of a tensor into @dst's block at @offset, on @dst's
 * member, or records it in graph @g. Another member's shard is read
 * through peer objects, one per object its block spans (an expandable
 * segment's block may span several), once the last job writing it there
 * is done: the caller waits for that (a graph orders its members itself).
 */
static rbln_status copy_shard(struct rbln_shard *dst, size_t offset, struct rbln_shard *src,
			      struct rbln_graph *g)
{
	struct rbln_dev *dd = dst->dev, *sd = src->dev;
	uint32_t bos[2] = { rbln_block_handle(dst->block), rbln_block_handle(src->block) };
	uint64_t dst_va = rbln_block_va(dst->block) + offset, point = 0, from, len, va, at;
	rbln_status st = RBLN_OK;

	if (sd == dd) {
		st = dma_copy(dd, g, dst_va, rbln_block_va(src->block), src->nbytes, bos, &point);
		rbln_shard_used(src, point);
	}
	for (from = 0; sd != dd && !st && from < src->nbytes; from += len) {
		rbln_block_piece(src->block, from, NULL, &len);
		if (len > src->nbytes - from)
			len = src->nbytes - from;
		st = rbln_peer_get(dd, sd, src->block, from, &bos[1], &va, &at);
		if (st)
			break;
		st = dma_copy(dd, g, dst_va + from, va + at, len, bos, &point);
		if (!st && g)
			st = rbln_graph_keep_peer(g, dd, bos[1]);
		else
			rbln_peer_put(dd, bos[1]);
	}
	if (!st)
		rbln_shard_used(dst, point);
	return st;
}

/* All of @t, in device memory and locked, into @r's block, device to device. */
static rbln_status gather(rbln_tensor *t, struct rbln_shard *r, struct rbln_graph *g)
{
	rbln_status st = RBLN_OK;
	int i;

	for (i = 0; i < t->nshards && !st; i++) {
		struct rbln_shard *s = &t->shards[i];

		if (!s->nbytes)
			continue;
		if (!g && s->dev != r->dev)
			st = rbln_wait_point(s->dev, __atomic_load_n(&s->last_point,
								     __ATOMIC_ACQUIRE));
		if (!st)
			st = copy_shard(r, s->offset, s, g);
	}
	if (st || g)
		return st;
	/*
	 * The other members' shards may be freed and their memory reused as
	 * soon as this returns, by jobs this member's ring does not order.
	 */
	return rbln_wait_point(r->dev, __atomic_load_n(&r->last_point, __ATOMIC_ACQUIRE));
}

/*
 * While a graph is captured, the copies are recorded between two barriers
 * of the graph (each member's later work waits for every member's earlier
 * work), and on success the graph keeps the replicas.
 */
rbln_status rbln_tensor_replicate(rbln_tensor *t, struct rbln_shard *r, int n, const char *op)
{
	struct rbln_graph *g = rbln_capture_of(t->device);
	rbln_status st;
	int i;

	memset(r, 0, n * sizeof(*r));
	st = rbln_tensor_ensure_device(t);
	if (!st && g)
		st = rbln_graph_barrier(g);
	if (st)
		return st;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < n && !st && t->nbytes; i++) {
		r[i].dev = t->shards[i].dev;
		r[i].nbytes = t->nbytes;
		st = rbln_shard_alloc(&r[i], t->device, op);
		if (!st)
			st = gather(t, &r[i], g);
	}
	pthread_mutex_unlock(&t->lock);
	if (!st && g)
		st = rbln_graph_barrier(g);
	if (!st && g)
		st = rbln_graph_keep_shards(g, r, n);
	if (st)
		rbln_replicas_free(r, n);
	return st;
}
