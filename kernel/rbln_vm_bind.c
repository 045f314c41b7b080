// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_vm_bind.c - VM_BIND: mappings a file places itself, on drm_gpuvm
 *
 * A file reserves ranges of the upper part of its address space
 * (RBLN_VM_BIND_START onwards), binds objects or ranges of them at
 * addresses it chooses there, and unbinds any range, splitting the
 * mappings that straddle its ends: what an allocator needs to grow a pool
 * in place by mapping more memory behind it, as CUDA's virtual memory API
 * lets PyTorch do.
 *
 * Two views, as in nouveau and panthor. The ioctl checks a request against
 * the gpuvm tree, which says what is mapped once every bind made so far is
 * done, and updates it at once, so that the next request is checked
 * against this one. The page table entries are written by the file's bind
 * queue: a scheduler entity on a device-wide scheduler that runs on the
 * CPU, in the order of the requests, once their waits are signaled. An
 * unbind also waits for every job the context pushed before it (their
 * fences are in the gpuvm's reservation object), so that a job never loses
 * a mapping it was submitted with; the mappings it removes keep their
 * objects until the entries are cleared and the device has confirmed that
 * nothing reaches them (rbln_mmu_invalidate()): unmapped means untouched.
 */

#include <linux/bsearch.h>
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_managed.h>
#include <drm/gpu_scheduler.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_mmu.h"

/**
 * struct rbln_bind_job - one VM_BIND request
 * @base: the scheduler's job.
 * @vm: the address space, held.
 * @op: RBLN_VM_BIND_MAP or RBLN_VM_BIND_UNMAP.
 * @va: start of the range.
 * @size: its size.
 * @bo: MAP: the object, held by the job (the mapping holds it too, but an
 *	unbind made before this job runs may drop that).
 * @offset: MAP: offset in @bo.
 * @perm: MAP: RBLN_MAP_*.
 * @unmapped: UNMAP: the mappings it removed from the tree, still holding
 *	their objects; struct rbln_va linked by @unbind_link.
 * @done: the page tables were changed.
 * @release: frees it off the scheduler (rbln_bind_free_job()).
 */
struct rbln_bind_job {
	struct drm_sched_job base;
	struct work_struct release;
	struct rbln_vm *vm;
	u32 op;
	u64 va;
	u64 size;
	struct rbln_bo *bo;
	u64 offset;
	u32 perm;
	struct list_head unmapped;
	bool done;
};

static struct rbln_bind_job *to_bind_job(struct drm_sched_job *job)
{
	return container_of(job, struct rbln_bind_job, base);
}

static struct rbln_va *to_rbln_va(struct drm_gpuva *va)
{
	return container_of(va, struct rbln_va, base);
}

/* Unlinks a mapping out of the tree from its object and frees it. */
static void rbln_va_free(struct rbln_va *map)
{
	struct drm_gem_object *obj = map->base.gem.obj;
	struct rbln_bo *bo = to_rbln_bo(obj);

	/* The link may hold the object's last reference; not the lock's. */
	drm_gem_object_get(obj);
	mutex_lock(&bo->map_lock);
	drm_gpuva_unlink(&map->base);
	mutex_unlock(&bo->map_lock);
	drm_gem_object_put(obj);
	kfree(map);
}

/*
 * Changes the page tables. A MAP job that never ran (its file closed
 * first) has nothing to do: no job of the file runs any more. The lock of
 * the tables is the only one taken: the job's fence waits for this, and
 * the context's lock is held where memory is allocated, which may wait
 * for fences. An unbind's mappings keep their objects until the job is
 * freed.
 */
static void rbln_bind_apply(struct rbln_bind_job *job, bool ran)
{
	struct rbln_vm *vm = job->vm;
	struct rbln_va *map;
	u64 start, end;

	if (job->done)
		return;
	job->done = true;
	if (job->op == RBLN_VM_BIND_MAP) {
		if (ran)
			rbln_vm_pt_map(vm, job->va, job->bo, job->offset, job->size, job->perm);
		rbln_vm_pt_unpin(vm, job->va, job->size);
		return;
	}

	list_for_each_entry(map, &job->unmapped, unbind_link) {
		start = max(map->base.va.addr, job->va);
		end = min(map->base.va.addr + map->base.va.range, job->va + job->size);
		rbln_vm_pt_clear(vm, start, end - start);
	}
	rbln_mmu_invalidate(vm->rdev);
	rbln_vm_pt_prune(vm, job->va, job->size);
}

static struct dma_fence *rbln_bind_run_job(struct drm_sched_job *sched_job)
{
	bool cookie = dma_fence_begin_signalling();

	rbln_bind_apply(to_bind_job(sched_job), true);
	dma_fence_end_signalling(cookie);
	return NULL;
}

static void rbln_bind_job_free(struct rbln_bind_job *job)
{
	struct rbln_va *map, *tmp;

	/* Applied, or never in the tree: the memory may go. */
	list_for_each_entry_safe(map, tmp, &job->unmapped, unbind_link)
		rbln_va_free(map);
	if (job->bo)
		drm_gem_object_put(&job->bo->base.base);
	rbln_vm_room_put(job->vm, &job->vm->bind_jobs);
	rbln_job_slow_free_wait(job->vm->rdev);
	rbln_vm_put(job->vm);
	kfree(job);
}

static void rbln_bind_job_release(struct work_struct *work)
{
	rbln_bind_job_free(container_of(work, struct rbln_bind_job, release));
}

/*
 * On the work queue of run_job, which the bind queue's fences wait for:
 * the objects and mappings, whose release takes locks held where memory
 * is allocated, go on rbln_wq.
 */
static void rbln_bind_free_job(struct drm_sched_job *sched_job)
{
	struct rbln_bind_job *job = to_bind_job(sched_job);
	bool cookie = dma_fence_begin_signalling();

	/* Killed before it ran: an unbind still owes its clearing. */
	rbln_bind_apply(job, false);
	drm_sched_job_cleanup(sched_job);
	INIT_WORK(&job->release, rbln_bind_job_release);
	queue_work(rbln_wq, &job->release);
	dma_fence_end_signalling(cookie);
}

static enum drm_gpu_sched_stat rbln_bind_timedout_job(struct drm_sched_job *sched_job)
{
	/* Never: the scheduler has no timeout and run_job finishes the job. */
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static const struct drm_sched_backend_ops rbln_bind_sched_ops = {
	.run_job = rbln_bind_run_job,
	.timedout_job = rbln_bind_timedout_job,
	.free_job = rbln_bind_free_job,
};

static void rbln_vm_bind_fini(struct drm_device *drm, void *arg)
{
	struct drm_gpu_scheduler *sched = to_rbln_device(drm)->bind_sched;

	drm_sched_fini(sched);
	sched->ops = NULL;
}

/**
 * rbln_vm_bind_init() - the scheduler of a device's bind queues
 * @rdev: the device
 *
 * Torn down with the DRM device, after every file is closed.
 *
 * Return: 0 or a negative errno.
 */
int rbln_vm_bind_init(struct rbln_device *rdev)
{
	struct drm_sched_init_args args = {
		.ops = &rbln_bind_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = 1024,
		.timeout = MAX_SCHEDULE_TIMEOUT,
		.name = "rbln-bind",
		.dev = rdev->drm.dev,
	};
	int ret;

	ret = drm_sched_init(rdev->bind_sched, &args);
	if (ret) {
		rdev->bind_sched->ops = NULL;
		return ret;
	}
	return drmm_add_action_or_reset(&rdev->drm, rbln_vm_bind_fini, NULL);
}

/**
 * rbln_vm_bind_open() - the bind queue of a new file
 * @rfile: the file
 * @rdev: its device
 *
 * Return: 0 or a negative errno.
 */
int rbln_vm_bind_open(struct rbln_file *rfile, struct rbln_device *rdev)
{
	return drm_sched_entity_init(&rfile->bind_entity, DRM_SCHED_PRIORITY_NORMAL,
				     &rdev->bind_sched, 1, NULL);
}

/**
 * rbln_vm_bind_close() - end the bind queue of a closing file
 * @rfile: the file, its jobs done (rbln_queues_destroy())
 *
 * Binds still waiting are killed: unbinds among them clear their entries
 * all the same (rbln_bind_free_job()). Then, as for jobs, the bind jobs
 * get a job timeout to be freed, so that the objects they hold go with
 * the file; one killed waits for what it waited for, maybe another file's
 * job, and holds its object until then.
 */
void rbln_vm_bind_close(struct rbln_file *rfile)
{
	drm_sched_entity_destroy(&rfile->bind_entity);
	rbln_vm_jobs_wait(rfile->vm, &rfile->vm->bind_jobs);
}

/**
 * rbln_vm_unbind_all() - drop every VM_BIND mapping of a dead context
 * @vm: the address space; no job or bind job of it is left, and the device
 *	no longer walks its tables
 */
void rbln_vm_unbind_all(struct rbln_vm *vm)
{
	struct drm_gpuva *va, *next;

	drm_gpuvm_for_each_va_safe(va, next, &vm->gpuvm) {
		drm_gpuva_remove(va);
		rbln_va_free(to_rbln_va(va));
	}
}

/* A fence by its identity: kept after the fence itself may be gone. */
struct rbln_fence_id {
	u64 context;
	u64 seqno;
};

static int rbln_fence_id_cmp(const void *a, const void *b)
{
	const struct rbln_fence_id *x = a, *y = b;

	if (x->context != y->context)
		return x->context < y->context ? -1 : 1;
	return x->seqno < y->seqno ? -1 : x->seqno > y->seqno;
}

/**
 * rbln_vm_unbind_seen_free() - forget what the last unbind waited for
 * @vm: the address space, dying
 */
void rbln_vm_unbind_seen_free(struct rbln_vm *vm)
{
	kvfree(vm->unbind_seen);
	dma_fence_put(vm->unbind_last);
}

/*
 * An unbind waits for every job of the context pushed before it: for the
 * fences in the gpuvm's reservation object, one per queue. Not for those
 * the last unbind pushed waits for: this one runs after it, also when a
 * closing file's jobs are killed, as it waits for its finished fence. So
 * what a context's pending unbinds hold in the scheduler, uncharged, is
 * bounded by its jobs (max_jobs), not by its queues times its unbinds.
 *
 * Returns in *@seen what this unbind waits for, for rbln_unbind_commit()
 * once it is pushed; nothing changes before, so a failure has no undo.
 */
static int rbln_unbind_add_deps(struct rbln_bind_job *job, struct dma_resv *resv,
				struct rbln_fence_id **seen, u32 *count)
{
	struct rbln_vm *vm = job->vm;
	struct rbln_fence_id *ids, id;
	struct dma_resv_iter cursor;
	struct dma_fence *fence;
	u32 n = 0;
	int ret;

	dma_resv_assert_held(resv);
	dma_resv_for_each_fence(&cursor, resv, DMA_RESV_USAGE_BOOKKEEP, fence)
		n++;
	ids = kvmalloc_array(max(n, 1u), sizeof(*ids), GFP_KERNEL_ACCOUNT);
	if (!ids)
		return -ENOMEM;
	*seen = ids;
	*count = n;

	ret = drm_sched_job_add_dependency(&job->base, dma_fence_get(vm->unbind_last));
	n = 0;
	dma_resv_for_each_fence(&cursor, resv, DMA_RESV_USAGE_BOOKKEEP, fence) {
		if (ret)
			break;
		id.context = fence->context;
		id.seqno = fence->seqno;
		ids[n++] = id;
		if (bsearch(&id, vm->unbind_seen, vm->unbind_seen_count, sizeof(id),
			    rbln_fence_id_cmp))
			continue;
		ret = drm_sched_job_add_dependency(&job->base, dma_fence_get(fence));
	}
	sort(ids, n, sizeof(*ids), rbln_fence_id_cmp, NULL);
	return ret;
}

/* The unbind that waits for @seen, whose finished fence is @done, is pushed. */
static void rbln_unbind_commit(struct rbln_vm *vm, struct dma_resv *resv,
			       struct rbln_fence_id *seen, u32 count, struct dma_fence *done)
{
	dma_resv_lock(resv, NULL);
	swap(vm->unbind_seen, seen);
	vm->unbind_seen_count = count;
	dma_fence_put(vm->unbind_last);
	vm->unbind_last = dma_fence_get(done);
	dma_resv_unlock(resv);
	kvfree(seen);
}

static int rbln_obj_cmp(const void *a, const void *b)
{
	const struct drm_gem_object *x = *(const struct drm_gem_object * const *)a;
	const struct drm_gem_object *y = *(const struct drm_gem_object * const *)b;

	return x < y ? -1 : x > y;
}

/**
 * rbln_vm_bound_objects() - the objects @vm's VM_BIND mappings hold
 * @vm: the address space
 * @count: (out) how many
 *
 * For fdinfo: a mapping keeps its object, and the memory with it, after
 * the file closes its handle.
 *
 * Return: the distinct objects, each referenced, sorted for
 * rbln_vm_bound_includes(); give them back with rbln_vm_bound_put().
 * NULL and *count 0 when there are none, or no memory to list them in.
 */
struct drm_gem_object **rbln_vm_bound_objects(struct rbln_vm *vm, unsigned int *count)
{
	struct drm_gem_object **objs = NULL;
	struct drm_gpuva *va;
	unsigned int n = 0, i, j;

	*count = 0;
	mutex_lock(&vm->lock);
	drm_gpuvm_for_each_va(va, &vm->gpuvm)
		n++;
	if (n)
		objs = kvmalloc_array(n, sizeof(*objs), GFP_KERNEL | __GFP_NOWARN);
	if (objs) {
		n = 0;
		drm_gpuvm_for_each_va(va, &vm->gpuvm) {
			drm_gem_object_get(va->gem.obj);
			objs[n++] = va->gem.obj;
		}
	}
	mutex_unlock(&vm->lock);
	if (!objs)
		return NULL;

	sort(objs, n, sizeof(*objs), rbln_obj_cmp, NULL);
	for (i = 0, j = 0; i < n; i++) {
		if (j && objs[j - 1] == objs[i])
			drm_gem_object_put(objs[i]);
		else
			objs[j++] = objs[i];
	}
	*count = j;
	return objs;
}

/**
 * rbln_vm_bound_includes() - is @obj among rbln_vm_bound_objects()' list?
 * @objs: the list
 * @count: its length
 * @obj: the object
 *
 * Return: true if it is.
 */
bool rbln_vm_bound_includes(struct drm_gem_object **objs, unsigned int count,
			    struct drm_gem_object *obj)
{
	return count && bsearch(&obj, objs, count, sizeof(*objs), rbln_obj_cmp);
}

/**
 * rbln_vm_bound_put() - give back rbln_vm_bound_objects()' list
 * @objs: the list, or NULL
 * @count: its length
 */
void rbln_vm_bound_put(struct drm_gem_object **objs, unsigned int count)
{
	unsigned int i;

	for (i = 0; i < count; i++)
		drm_gem_object_put(objs[i]);
	kvfree(objs);
}

/* The reservation that holds [@va, + @size), or NULL. */
static struct drm_mm_node *rbln_vm_reservation(struct rbln_vm *vm, u64 va, u64 size)
{
	struct drm_mm_node *node;

	lockdep_assert_held(&vm->lock);
	/* Outside the range, the walk would start from the list head. */
	if (va < RBLN_VM_BIND_START || va >= RBLN_VM_BIND_END)
		return NULL;
	drm_mm_for_each_node_in_range(node, &vm->reserved, va, va + 1) {
		if (va - node->start <= node->size - size && size <= node->size)
			return node;
		break;
	}
	return NULL;
}

int rbln_vm_reserve_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_vm *vm = to_rbln_file(file)->vm;
	struct drm_rbln_vm_reserve *args = data;
	struct drm_mm_node *node;
	int ret;

	if (args->flags || args->pad)
		return -EINVAL;
	if (!args->size || !PAGE_ALIGNED(args->size) || args->size > RBLN_VM_BIND_SIZE)
		return -EINVAL;
	if (args->align && (!is_power_of_2(args->align) || args->align < PAGE_SIZE))
		return -EINVAL;

	node = kzalloc(sizeof(*node), GFP_KERNEL_ACCOUNT);
	if (!node)
		return -ENOMEM;
	mutex_lock(&vm->lock);
	ret = drm_mm_insert_node_in_range(&vm->reserved, node, args->size,
					  args->align ?: PAGE_SIZE, 0, RBLN_VM_BIND_START,
					  RBLN_VM_BIND_END, DRM_MM_INSERT_BEST);
	mutex_unlock(&vm->lock);
	if (ret) {
		kfree(node);
		return ret;
	}
	args->va = node->start;
	return 0;
}

int rbln_vm_release_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_vm *vm = to_rbln_file(file)->vm;
	struct drm_rbln_vm_release *args = data;
	struct drm_mm_node *node;
	int ret = 0;

	mutex_lock(&vm->lock);
	node = rbln_vm_reservation(vm, args->va, PAGE_SIZE);
	if (!node || node->start != args->va)
		ret = -ENOENT;
	else if (!drm_gpuvm_interval_empty(&vm->gpuvm, node->start, node->size))
		ret = -EBUSY;
	else
		drm_mm_remove_node(node);
	mutex_unlock(&vm->lock);
	if (!ret)
		kfree(node);
	return ret;
}

static int rbln_vm_bind_check(struct drm_rbln_vm_bind *args)
{
	u64 end;

	switch (args->op) {
	case RBLN_VM_BIND_MAP:
		if (args->flags & ~RBLN_VM_BIND_READ_ONLY)
			return -EINVAL;
		break;
	case RBLN_VM_BIND_UNMAP:
		if (args->flags || args->handle || args->bo_offset)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (!args->size || !PAGE_ALIGNED(args->size) || !PAGE_ALIGNED(args->va) ||
	    !PAGE_ALIGNED(args->bo_offset) || check_add_overflow(args->va, args->size, &end))
		return -EINVAL;
	if (args->wait_count > RBLN_SUBMIT_MAX_WAITS)
		return -E2BIG;
	return 0;
}

/* MAP, in the tree: the caller pushes the job at once. */
static int rbln_bind_map(struct rbln_bind_job *job, struct rbln_va *map)
{
	struct rbln_vm *vm = job->vm;
	struct rbln_bo *bo = job->bo;
	struct drm_gpuvm_bo *vm_bo;
	int ret;

	lockdep_assert_held(&vm->lock);
	if (!rbln_vm_reservation(vm, job->va, job->size))
		return -ENOENT;
	if (!drm_gpuvm_interval_empty(&vm->gpuvm, job->va, job->size))
		return -EEXIST;
	ret = rbln_vm_pt_prepare(vm, job->va, job->size);
	if (ret)
		return ret;

	mutex_lock(&bo->map_lock);
	vm_bo = drm_gpuvm_bo_obtain(&vm->gpuvm, &bo->base.base);
	if (IS_ERR(vm_bo)) {
		mutex_unlock(&bo->map_lock);
		rbln_vm_pt_unpin(vm, job->va, job->size);
		return PTR_ERR(vm_bo);
	}
	drm_gpuva_init(&map->base, job->va, job->size, &bo->base.base, job->offset);
	map->perm = job->perm;
	/* Checked empty above: cannot fail. */
	WARN_ON(drm_gpuva_insert(&vm->gpuvm, &map->base));
	drm_gpuva_link(&map->base, vm_bo);
	drm_gpuvm_bo_put(vm_bo);
	mutex_unlock(&bo->map_lock);
	return 0;
}

/* What rbln_bind_unmap() hands drm_gpuvm_sm_unmap()'s steps. */
struct rbln_unmap_walk {
	struct rbln_bind_job *job;
	struct rbln_va **spare;
	unsigned int used;
	bool found;
};

/**
 * rbln_vm_bind_sm_step_unmap() - &drm_gpuvm_ops.sm_step_unmap
 * @op: a mapping [va, + size) covers whole
 * @priv: the &struct rbln_unmap_walk
 *
 * Return: 0.
 */
int rbln_vm_bind_sm_step_unmap(struct drm_gpuva_op *op, void *priv)
{
	struct rbln_unmap_walk *walk = priv;
	struct rbln_va *old = to_rbln_va(op->unmap.va);

	drm_gpuva_unmap(&op->unmap);
	list_add_tail(&old->unbind_link, &walk->job->unmapped);
	walk->found = true;
	return 0;
}

/* Takes the next spare mapping out of @walk's. */
static struct rbln_va *rbln_unmap_walk_spare(struct rbln_unmap_walk *walk)
{
	struct rbln_va *va = walk->spare[walk->used];

	walk->spare[walk->used++] = NULL;
	return va;
}

/**
 * rbln_vm_bind_sm_step_remap() - &drm_gpuvm_ops.sm_step_remap
 * @op: a mapping that straddles an end of [va, + size): the object stays
 *	mapped around the hole, in the pieces of @priv's spares
 * @priv: the &struct rbln_unmap_walk
 *
 * Return: 0.
 */
int rbln_vm_bind_sm_step_remap(struct drm_gpuva_op *op, void *priv)
{
	struct rbln_unmap_walk *walk = priv;
	struct rbln_va *old = to_rbln_va(op->remap.unmap->va);
	struct rbln_va *prev = op->remap.prev ? rbln_unmap_walk_spare(walk) : NULL;
	struct rbln_va *next = op->remap.next ? rbln_unmap_walk_spare(walk) : NULL;

	drm_gpuva_remap(prev ? &prev->base : NULL, next ? &next->base : NULL, &op->remap);
	mutex_lock(&to_rbln_bo(old->base.gem.obj)->map_lock);
	if (prev) {
		prev->perm = old->perm;
		drm_gpuva_link(&prev->base, old->base.vm_bo);
	}
	if (next) {
		next->perm = old->perm;
		drm_gpuva_link(&next->base, old->base.vm_bo);
	}
	mutex_unlock(&to_rbln_bo(old->base.gem.obj)->map_lock);
	list_add_tail(&old->unbind_link, &walk->job->unmapped);
	walk->found = true;
	return 0;
}

/*
 * UNMAP, in the tree: removes what [va, + size) covers and keeps the
 * pieces of straddling mappings outside it, in @spare (two are enough: only
 * the first and the last mapping can straddle); those it uses are taken
 * out of @spare. The removed mappings go to the job, to be freed once
 * their entries are cleared. The steps run as drm_gpuvm walks the range,
 * which allocates nothing: its list of operations would (and 6.12's
 * leaks an entry when one of those allocations fails).
 */
static int rbln_bind_unmap(struct rbln_bind_job *job, struct rbln_va *spare[2])
{
	struct rbln_unmap_walk walk = { .job = job, .spare = spare };
	struct rbln_vm *vm = job->vm;
	int ret;

	lockdep_assert_held(&vm->lock);
	if (!rbln_vm_reservation(vm, job->va, job->size))
		return -ENOENT;
	ret = drm_gpuvm_sm_unmap(&vm->gpuvm, &walk, job->va, job->size);
	if (ret)
		return ret;
	return walk.found ? 0 : -ENOENT;
}

/* Looks up and pins the object a MAP names; the job holds it. */
static int rbln_bind_lookup(struct rbln_bind_job *job, struct drm_file *file,
			    struct drm_rbln_vm_bind *args)
{
	struct drm_gem_object *obj;
	struct rbln_bo *bo;
	u64 end;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_rbln_bo(obj);
	job->bo = bo;
	if (check_add_overflow(args->bo_offset, args->size, &end) || end > obj->size)
		return -EINVAL;
	job->offset = args->bo_offset;
	job->perm = RBLN_MAP_READ;
	if (!(bo->flags & RBLN_BO_READ_ONLY) && !(args->flags & RBLN_VM_BIND_READ_ONLY))
		job->perm |= RBLN_MAP_WRITE;
	/* Host pages stay pinned as long as the object: the bind queue cannot allocate. */
	if (bo->placement == RBLN_BO_HOST)
		return PTR_ERR_OR_ZERO(rbln_bo_dma_map(bo));
	return 0;
}

int rbln_vm_bind_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_file *rfile = to_rbln_file(file);
	struct drm_rbln_vm_bind *args = data;
	struct rbln_sync_signal signal = {};
	struct rbln_va *map = NULL, *spare[2] = {};
	struct rbln_vm *vm = rfile->vm;
	struct dma_resv *resv = drm_gpuvm_resv(&vm->gpuvm);
	struct rbln_fence_id *seen = NULL;
	struct rbln_bind_job *job;
	struct dma_fence *done;
	u32 seen_count = 0;
	int ret;

	ret = rbln_vm_bind_check(args);
	if (ret)
		return ret;
	ret = rbln_vm_room_get(vm, &vm->bind_jobs);
	if (ret)
		return ret;
	/* After the wait, as SUBMIT: the device may be gone. */
	if (drm_dev_is_unplugged(drm)) {
		rbln_vm_room_put(vm, &vm->bind_jobs);
		return -ENODEV;
	}

	job = kzalloc(sizeof(*job), GFP_KERNEL_ACCOUNT);
	if (!job) {
		rbln_vm_room_put(vm, &vm->bind_jobs);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&job->unmapped);
	/* The job has the room now: freeing it gives it back. */
	job->vm = rbln_vm_get(vm);
	job->op = args->op;
	job->va = args->va;
	job->size = args->size;

	if (job->op == RBLN_VM_BIND_MAP) {
		ret = rbln_bind_lookup(job, file, args);
		if (ret)
			goto err_job;
		map = kzalloc(sizeof(*map), GFP_KERNEL_ACCOUNT);
		ret = -ENOMEM;
		if (!map)
			goto err_job;
	} else {
		spare[0] = kzalloc(sizeof(*spare[0]), GFP_KERNEL_ACCOUNT);
		spare[1] = kzalloc(sizeof(*spare[1]), GFP_KERNEL_ACCOUNT);
		ret = -ENOMEM;
		if (!spare[0] || !spare[1])
			goto err_job;
	}
	ret = rbln_sync_signal_prepare(file, &args->signal, &signal);
	if (ret)
		goto err_job;

	ret = drm_sched_job_init(&job->base, &rfile->bind_entity, 1, vm, file->client_id);
	if (ret)
		goto err_job;
	ret = rbln_sync_add_waits(&job->base, file, args->waits, args->wait_count);
	if (ret)
		goto err_sched_job;
	if (job->op == RBLN_VM_BIND_UNMAP) {
		/* Jobs pushed later are not waited for: they come after the unbind. */
		ret = dma_resv_lock_interruptible(resv, NULL);
		if (ret)
			goto err_sched_job;
		ret = rbln_unbind_add_deps(job, resv, &seen, &seen_count);
		dma_resv_unlock(resv);
		if (ret)
			goto err_sched_job;
	}

	/* The tree changes in the order the jobs run: one lock for both. */
	mutex_lock(&vm->lock);
	if (job->op == RBLN_VM_BIND_MAP)
		ret = rbln_bind_map(job, map);
	else
		ret = rbln_bind_unmap(job, spare);
	if (ret) {
		mutex_unlock(&vm->lock);
		goto err_sched_job;
	}
	drm_sched_job_arm(&job->base);
	done = dma_fence_get(&job->base.s_fence->finished);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&vm->lock);

	if (seen)
		rbln_unbind_commit(vm, resv, seen, seen_count, done);
	rbln_sync_signal(&signal, done);
	dma_fence_put(done);
	kfree(spare[0]);
	kfree(spare[1]);
	return 0;

err_sched_job:
	drm_sched_job_cleanup(&job->base);
err_job:
	rbln_sync_signal_abort(&signal);
	kvfree(seen);
	kfree(map);
	kfree(spare[0]);
	kfree(spare[1]);
	rbln_bind_job_free(job);
	return ret;
}
