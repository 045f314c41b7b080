// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_mmu.c - per-file device contexts: address spaces and page tables
 *
 * Every open file has its own context: a device virtual address space and
 * the page tables the device walks for it (format in rbln_hw.h). A buffer
 * object gets an address in a file's space when the file gets a handle to
 * it (creation or PRIME import) and loses it with the file's last handle
 * and the last job using it, so a file can name only what it holds. Each
 * mapping records what the device may do there; the MMU enforces it.
 */

#include <linux/bitfield.h>
#include <linux/dma-mapping.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_hw.h"
#include "rbln_mmu.h"

#define PT_SHIFT(level)		(PAGE_SHIFT + 9 * (level))
#define PT_INDEX(va, level)	(((va) >> PT_SHIFT(level)) & (RBLN_PT_ENTRIES - 1))

/**
 * rbln_mmu_invalidate() - wait until the device uses no old translation
 * @rdev: the device
 *
 * Call after clearing page table or context table entries and before
 * freeing, scrubbing or reusing what they pointed at (rbln_hw.h). A device
 * gone from the bus reads as all-ones, and one that does not answer is cut
 * off (rbln_hw_wait()): either touches no memory any more. Sleeps.
 */
void rbln_mmu_invalidate(struct rbln_device *rdev)
{
	mutex_lock(&rdev->inval_lock);
	rbln_hw_write(rdev->hw, RBLN_REG_MMU_INVALIDATE, 1);
	rbln_hw_wait(rdev, RBLN_REG_MMU_INVALIDATE);
	mutex_unlock(&rdev->inval_lock);
}

/* Tells the device where the context table is: at init and after a function reset. */
void rbln_mmu_program(struct rbln_device *rdev)
{
	rbln_hw_write(rdev->hw, RBLN_REG_CTX_TABLE_LO, lower_32_bits(rdev->ctx_table_dma));
	rbln_hw_write(rdev->hw, RBLN_REG_CTX_TABLE_HI, upper_32_bits(rdev->ctx_table_dma));
}

static void rbln_ctx_table_free(struct rbln_device *rdev)
{
	dma_free_coherent(rdev->hw->dma_dev, RBLN_MAX_CONTEXTS * sizeof(u64),
			  rdev->ctx_table, rdev->ctx_table_dma);
	rdev->ctx_table = NULL;
}

static void rbln_mmu_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln_device(drm);

	if (rdev->ctx_table)
		rbln_ctx_table_free(rdev);
}

/**
 * rbln_mmu_init() - the context table of a device
 * @rdev: the device
 *
 * Return: 0 or a negative errno.
 */
int rbln_mmu_init(struct rbln_device *rdev)
{
	struct device *dma_dev = rdev->hw->dma_dev;
	int ret;

	ret = drmm_mutex_init(&rdev->drm, &rdev->inval_lock) ?:
	      drmm_mutex_init(&rdev->drm, &rdev->vms_lock) ?:
	      drmm_mutex_init(&rdev->drm, &rdev->ctx_lock);
	if (ret)
		return ret;
	INIT_LIST_HEAD(&rdev->vms);
	INIT_LIST_HEAD(&rdev->ctx_lru);
	rdev->ctx_table = dma_alloc_coherent(dma_dev, RBLN_MAX_CONTEXTS * sizeof(u64),
					     &rdev->ctx_table_dma, GFP_KERNEL);
	if (!rdev->ctx_table)
		return -ENOMEM;
	rbln_mmu_program(rdev);
	return drmm_add_action_or_reset(&rdev->drm, rbln_mmu_fini, NULL);
}

/* What a table at @level takes: its page, and a leaf's parent's array of children. */
static u64 rbln_pt_bytes(unsigned int level)
{
	return PAGE_SIZE + (level ? RBLN_PT_ENTRIES * sizeof(struct rbln_pt *) : 0);
}

/*
 * A context's tables are made in the calls of its file (open, SUBMIT,
 * VM_BIND) and charged to the caller's memory cgroup: a process mapping a
 * page a GiB apart takes the memory of two tables each time.
 */
static int rbln_pt_alloc(struct rbln_device *rdev, struct rbln_pt *pt, unsigned int level)
{
	/*
	 * Not a dma_pool: page tables outlive the bus device's sysfs directory
	 * (files stay open after removal), where a pool keeps an attribute.
	 */
	pt->cpu = dma_alloc_coherent(rdev->hw->dma_dev, PAGE_SIZE, &pt->dma, GFP_KERNEL_ACCOUNT);
	if (!pt->cpu)
		return -ENOMEM;
	pt->child = NULL;
	if (level) {
		pt->child = kcalloc(RBLN_PT_ENTRIES, sizeof(*pt->child), GFP_KERNEL_ACCOUNT);
		if (!pt->child) {
			dma_free_coherent(rdev->hw->dma_dev, PAGE_SIZE, pt->cpu, pt->dma);
			return -ENOMEM;
		}
	}
	return 0;
}

static void rbln_pt_free(struct rbln_device *rdev, struct rbln_pt *pt, unsigned int level)
{
	unsigned int i;

	if (level) {
		for (i = 0; i < RBLN_PT_ENTRIES; i++) {
			if (pt->child[i]) {
				rbln_pt_free(rdev, pt->child[i], level - 1);
				kfree(pt->child[i]);
			}
		}
		kfree(pt->child);
	}
	dma_free_coherent(rdev->hw->dma_dev, PAGE_SIZE, pt->cpu, pt->dma);
}

/**
 * rbln_mmu_unplug() - free the device's tables: it is stopped, unplugged
 * @rdev: the device
 *
 * The context table and every context's page tables go now, with their
 * DMA mappings; a context of a file still open maps nothing any more, and
 * no new one is made.
 */
void rbln_mmu_unplug(struct rbln_device *rdev)
{
	struct rbln_vm *vm;

	mutex_lock(&rdev->vms_lock);
	list_for_each_entry(vm, &rdev->vms, link) {
		mutex_lock(&vm->pt_lock);
		rbln_pt_free(rdev, &vm->root, RBLN_PT_LEVELS - 1);
		vm->root.cpu = NULL;
		vm->root.child = NULL;
		vm->pt_bytes = 0;
		mutex_unlock(&vm->pt_lock);
	}
	rbln_ctx_table_free(rdev);
	mutex_unlock(&rdev->vms_lock);
}

/*
 * The leaf table covering @va. A table missing on the way is linked from
 * @spare, indexed by level, when it has one; else NULL is returned, with
 * *@need set to how many tables are missing from there down: those of the
 * levels below *@need. NULL with *@need 0: the tables are gone, unplugged.
 */
static struct rbln_pt *rbln_pt_leaf(struct rbln_vm *vm, u64 va, struct rbln_pt **spare,
				    unsigned int *need)
{
	struct rbln_pt *pt = &vm->root, *next;
	unsigned int level, idx;

	lockdep_assert_held(&vm->pt_lock);
	*need = 0;
	if (!pt->cpu)
		return NULL;
	for (level = RBLN_PT_LEVELS - 1; level > 0; level--) {
		idx = PT_INDEX(va, level);
		if (!pt->child[idx]) {
			next = spare ? spare[level - 1] : NULL;
			if (!next) {
				*need = level;
				return NULL;
			}
			spare[level - 1] = NULL;
			pt->child[idx] = next;
			vm->pt_bytes += rbln_pt_bytes(level - 1);
			/* The table's zeroes before the entry that leads the device there. */
			dma_wmb();
			WRITE_ONCE(pt->cpu[idx], next->dma | RBLN_PTE_VALID);
		}
		pt = pt->child[idx];
	}
	return pt;
}

/* The leaf table covering @va, if there is one. */
static struct rbln_pt *rbln_pt_find(struct rbln_vm *vm, u64 va)
{
	unsigned int need;

	return rbln_pt_leaf(vm, va, NULL, &need);
}

static void rbln_pt_clear(struct rbln_vm *vm, u64 va, u64 size)
{
	struct rbln_pt *leaf;
	u64 off;

	for (off = 0; off < size; off += PAGE_SIZE) {
		leaf = rbln_pt_find(vm, va + off);
		if (leaf)
			WRITE_ONCE(leaf->cpu[PT_INDEX(va + off, 0)], 0);
	}
}

/*
 * Points the pages of [@va, @va + @size) at @addr onwards with @flags; the
 * leaves are made already (rbln_pt_make()). Should one be missing, what
 * was written is cleared again (the caller invalidates).
 */
static int rbln_pt_set(struct rbln_vm *vm, u64 va, u64 addr, u64 size, u64 flags)
{
	struct rbln_pt *leaf = NULL;
	u64 off;

	for (off = 0; off < size; off += PAGE_SIZE) {
		if (!leaf || !PT_INDEX(va + off, 0))
			leaf = rbln_pt_find(vm, va + off);
		if (WARN_ON_ONCE(!leaf)) {
			rbln_pt_clear(vm, va, off);
			return -ENOMEM;
		}
		WRITE_ONCE(leaf->cpu[PT_INDEX(va + off, 0)], (addr + off) | flags);
	}
	return 0;
}

/* Allocates the table of @level that rbln_pt_leaf() may link from *@spare. */
static int rbln_pt_spare_alloc(struct rbln_vm *vm, struct rbln_pt **spare, unsigned int level)
{
	struct rbln_pt *pt = kzalloc(sizeof(*pt), GFP_KERNEL_ACCOUNT);

	if (!pt || rbln_pt_alloc(vm->rdev, pt, level)) {
		kfree(pt);
		return -ENOMEM;
	}
	*spare = pt;
	return 0;
}

static void rbln_pt_unpin(struct rbln_vm *vm, u64 va, u64 size)
{
	u64 last = va + size - 1;
	struct rbln_pt *leaf;

	lockdep_assert_held(&vm->pt_lock);
	for (va = round_down(va, SZ_2M); va <= last; va += SZ_2M) {
		/* None once the device is unplugged: the tables went. */
		leaf = rbln_pt_find(vm, va);
		if (leaf && !WARN_ON(!leaf->pins))
			leaf->pins--;
	}
}

/*
 * Makes the leaf tables of [@va, + @size) and those above them, and pins
 * each leaf if @pin. Tables are allocated with @pt_lock dropped and linked
 * once it is taken again, if still missing: under @lock no other call
 * makes tables, but an unbind on the bind queue may free some meanwhile
 * (rbln_vm_pt_prune()); never a pinned leaf or a table above one.
 *
 * Return: 0, -ENOMEM with nothing pinned, or -ENODEV when unplugged.
 */
static int rbln_pt_make(struct rbln_vm *vm, u64 va, u64 size, bool pin)
{
	struct rbln_pt *spare[RBLN_PT_LEVELS - 1] = {};
	u64 first = round_down(va, SZ_2M), last = va + size - 1;
	unsigned int need, level;
	struct rbln_pt *leaf;
	int ret = 0;

	lockdep_assert_held(&vm->lock);
	/* One leaf covers 2 MiB: one walk per leaf. */
	for (va = first; va <= last && !ret;) {
		mutex_lock(&vm->pt_lock);
		leaf = rbln_pt_leaf(vm, va, spare, &need);
		if (leaf && pin)
			leaf->pins++;
		mutex_unlock(&vm->pt_lock);
		if (leaf) {
			va += SZ_2M;
			continue;
		}
		if (!need)
			ret = -ENODEV;
		for (level = 0; level < need && !ret; level++)
			if (!spare[level])
				ret = rbln_pt_spare_alloc(vm, &spare[level], level);
	}
	if (ret && pin && va > first) {
		mutex_lock(&vm->pt_lock);
		rbln_pt_unpin(vm, first, va - first);
		mutex_unlock(&vm->pt_lock);
	}
	for (level = 0; level < ARRAY_SIZE(spare); level++) {
		if (spare[level]) {
			rbln_pt_free(vm->rdev, spare[level], level);
			kfree(spare[level]);
		}
	}
	return ret;
}

/**
 * rbln_pt_map_bo() - point [@va, + @size) at [@offset, + @size) of @bo
 * @vm: the address space, its page tables locked and made
 *	(rbln_pt_make())
 * @va: first address
 * @bo: the object; a HOST object's pages are pinned already
 *	(rbln_bo_dma_map())
 * @offset: page-aligned offset in @bo
 * @size: page-aligned size, with @offset + @size at most @bo's size
 * @flags: RBLN_PTE_VALID and RBLN_PTE_WRITE as granted
 *
 * Return: 0, or -ENODEV when the device is unplugged; should a table be
 * missing, -ENOMEM with nothing of the range mapped.
 */
static int rbln_pt_map_bo(struct rbln_vm *vm, u64 va, struct rbln_bo *bo, u64 offset,
			  u64 size, u64 flags)
{
	struct rbln_bo *owner = bo->peer ?: bo;
	u64 start = va, end = va + size, n;
	struct gpu_buddy_block *block;
	struct sg_dma_page_iter iter;
	int ret = 0;

	lockdep_assert_held(&vm->pt_lock);

	/* Unplugged: nothing to map, and a HOST object's table may be gone. */
	if (!vm->root.cpu)
		return -ENODEV;
	if (bo->placement == RBLN_BO_DEVICE) {
		struct rbln_device *mem = to_rbln_device(owner->base.base.dev);

		if (bo->peer)
			flags |= RBLN_PTE_PEER | FIELD_PREP(RBLN_PTE_PEER_MASK, bo->peer_slot);
		list_for_each_entry(block, &owner->blocks, link) {
			n = gpu_buddy_block_size(&mem->mem, block);
			if (offset >= n) {
				offset -= n;
				continue;
			}
			n = min(n - offset, end - va);
			ret = rbln_pt_set(vm, va, gpu_buddy_block_offset(block) + offset, n, flags);
			if (ret)
				break;
			va += n;
			offset = 0;
			if (va == end)
				break;
		}
	} else {
		/* An importer's table may be longer than the object: not past it. */
		for_each_sgtable_dma_page(bo->dma_sgt, &iter, offset >> PAGE_SHIFT) {
			if (va == end)
				break;
			ret = rbln_pt_set(vm, va, sg_page_iter_dma_address(&iter), PAGE_SIZE,
					  flags | RBLN_PTE_SYSTEM);
			if (ret)
				break;
			va += PAGE_SIZE;
		}
	}
	if (ret) {
		rbln_pt_clear(vm, start, va - start);
		rbln_mmu_invalidate(vm->rdev);
	}
	return ret;
}

static u64 rbln_pte_flags(u32 perm)
{
	return RBLN_PTE_VALID | (perm & RBLN_MAP_WRITE ? RBLN_PTE_WRITE : 0);
}

/* Writes the page table entries of @map: its whole object. */
static int rbln_mapping_bind(struct rbln_vm *vm, struct rbln_mapping *map)
{
	struct rbln_bo *bo = map->bo;
	u64 size = bo->base.base.size;
	int ret;

	lockdep_assert_held(&vm->lock);
	if (map->bound)
		return 0;
	if (bo->placement == RBLN_BO_HOST) {
		struct sg_table *sgt = rbln_bo_dma_map(bo);

		if (IS_ERR(sgt))
			return PTR_ERR(sgt);
	}
	ret = rbln_pt_make(vm, map->node.start, size, false);
	if (ret)
		return ret;
	mutex_lock(&vm->pt_lock);
	ret = rbln_pt_map_bo(vm, map->node.start, bo, 0, size, rbln_pte_flags(map->perm));
	mutex_unlock(&vm->pt_lock);
	if (!ret)
		map->bound = true;
	return ret;
}

/**
 * rbln_vm_pt_prepare() - make the page tables that will map a range
 * @vm: the address space, locked
 * @va: page-aligned start
 * @size: page-aligned size
 *
 * So that rbln_vm_pt_map() allocates nothing: it runs where a completion
 * may be waited for (the bind queue), where reclaim must not be entered.
 * The leaves are pinned until rbln_vm_pt_unpin().
 *
 * Return: 0, -ENOMEM, or -ENODEV when the device is unplugged.
 */
int rbln_vm_pt_prepare(struct rbln_vm *vm, u64 va, u64 size)
{
	return rbln_pt_make(vm, va, size, true);
}

/**
 * rbln_vm_pt_unpin() - the MAP job that prepared [@va, + @size) is done
 * @vm: the address space
 * @va: what rbln_vm_pt_prepare() was given
 * @size: likewise
 *
 * Whether it ran or was killed, its leaves may go with an unbind now.
 */
void rbln_vm_pt_unpin(struct rbln_vm *vm, u64 va, u64 size)
{
	mutex_lock(&vm->pt_lock);
	rbln_pt_unpin(vm, va, size);
	mutex_unlock(&vm->pt_lock);
}

/*
 * Detaches onto *@dead the tables under @pt (at @level, covering @base
 * onwards) that map nothing of [@start, @end] any more; whether @pt itself
 * maps nothing now. A leaf a MAP job is to write stays.
 */
static bool rbln_pt_prune(struct rbln_pt *pt, unsigned int level, u64 base, u64 start,
			  u64 last, struct rbln_pt **dead)
{
	u64 span = BIT_ULL(PT_SHIFT(level)), end;
	unsigned int i, lo, hi;

	if (!level) {
		if (pt->pins)
			return false;
		for (i = 0; i < RBLN_PT_ENTRIES; i++)
			if (pt->cpu[i])
				return false;
		return true;
	}
	end = base + RBLN_PT_ENTRIES * span - 1;
	lo = (max(start, base) - base) >> PT_SHIFT(level);
	hi = (min(last, end) - base) >> PT_SHIFT(level);
	for (i = lo; i <= hi; i++) {
		struct rbln_pt *child = pt->child[i];

		if (child && rbln_pt_prune(child, level - 1, base + i * span, start, last, dead)) {
			WRITE_ONCE(pt->cpu[i], 0);
			pt->child[i] = NULL;
			child->dead = *dead;
			*dead = child;
		}
	}
	for (i = 0; i < RBLN_PT_ENTRIES; i++)
		if (pt->child[i])
			return false;
	return true;
}

/**
 * rbln_vm_pt_prune() - free the tables an unbind of [@va, + @size) emptied
 * @vm: the address space
 * @va: page-aligned start
 * @size: page-aligned size, its entries cleared and invalidated
 *
 * Otherwise a file could map and unmap a page at every 2 MiB of its
 * reservations and hold a table for each until it closes. The device may
 * walk a table until its parent's entry is cleared and invalidated: only
 * then does its memory go.
 */
void rbln_vm_pt_prune(struct rbln_vm *vm, u64 va, u64 size)
{
	struct rbln_pt *dead = NULL, *pt;

	mutex_lock(&vm->pt_lock);
	if (vm->root.cpu)
		rbln_pt_prune(&vm->root, RBLN_PT_LEVELS - 1, 0, va, va + size - 1, &dead);
	for (pt = dead; pt; pt = pt->dead)
		vm->pt_bytes -= rbln_pt_bytes(pt->child ? 1 : 0);
	mutex_unlock(&vm->pt_lock);
	if (!dead)
		return;
	rbln_mmu_invalidate(vm->rdev);
	while (dead) {
		pt = dead;
		dead = pt->dead;
		/* Emptied: whatever its level, no child is left to free with it. */
		rbln_pt_free(vm->rdev, pt, pt->child ? 1 : 0);
		kfree(pt);
	}
}

/**
 * rbln_vm_pt_map() - map a range of an object at @va, for VM_BIND
 * @vm: the address space, its tables made by rbln_vm_pt_prepare()
 * @va: page-aligned start
 * @bo: the object, its pages pinned if in host memory
 * @offset: page-aligned offset in @bo
 * @size: page-aligned size, inside @bo
 * @perm: RBLN_MAP_*
 *
 * Allocates nothing and takes no lock held where memory is allocated.
 */
void rbln_vm_pt_map(struct rbln_vm *vm, u64 va, struct rbln_bo *bo, u64 offset, u64 size,
		    u32 perm)
{
	int ret;

	mutex_lock(&vm->pt_lock);
	ret = rbln_pt_map_bo(vm, va, bo, offset, size, rbln_pte_flags(perm));
	mutex_unlock(&vm->pt_lock);
	/* Every table exists; unless the device is unplugged, and has none. */
	WARN_ON(ret && ret != -ENODEV);
}

/**
 * rbln_vm_pt_clear() - unmap a range, for VM_BIND
 * @vm: the address space
 * @va: page-aligned start
 * @size: page-aligned size
 *
 * The device may still use the old entries until rbln_mmu_invalidate().
 */
void rbln_vm_pt_clear(struct rbln_vm *vm, u64 va, u64 size)
{
	mutex_lock(&vm->pt_lock);
	rbln_pt_clear(vm, va, size);
	mutex_unlock(&vm->pt_lock);
}

static void rbln_gpuvm_free(struct drm_gpuvm *gpuvm)
{
	kfree(container_of(gpuvm, struct rbln_vm, gpuvm));
}

static const struct drm_gpuvm_ops rbln_gpuvm_ops = {
	.vm_free = rbln_gpuvm_free,
	.sm_step_remap = rbln_vm_bind_sm_step_remap,
	.sm_step_unmap = rbln_vm_bind_sm_step_unmap,
};

/**
 * rbln_vm_create() - a new context with an empty address space
 * @rdev: the device
 *
 * The context gets a hardware context index when a job of it runs
 * (rbln_vm_pin()): open files that never submit take none.
 *
 * Return: the context, or an ERR_PTR: -ENODEV once the device is unplugged.
 */
struct rbln_vm *rbln_vm_create(struct rbln_device *rdev)
{
	struct drm_gem_object *r_obj;
	struct rbln_vm *vm;
	bool gone;
	int ret;

	vm = kzalloc(sizeof(*vm), GFP_KERNEL_ACCOUNT);
	if (!vm)
		return ERR_PTR(-ENOMEM);
	r_obj = drm_gpuvm_resv_object_alloc(&rdev->drm);
	if (!r_obj) {
		kfree(vm);
		return ERR_PTR(-ENOMEM);
	}
	ret = rbln_pt_alloc(rdev, &vm->root, RBLN_PT_LEVELS - 1);
	if (ret) {
		drm_gem_object_put(r_obj);
		kfree(vm);
		return ERR_PTR(ret);
	}
	INIT_LIST_HEAD(&vm->link);
	INIT_LIST_HEAD(&vm->ctx_link);
	kref_init(&vm->ref);
	vm->pt_bytes = rbln_pt_bytes(RBLN_PT_LEVELS - 1);
	vm->rdev = rdev;
	init_waitqueue_head(&vm->jobs_done);
	init_waitqueue_head(&vm->rings_done);
	mutex_init(&vm->lock);
	mutex_init(&vm->pt_lock);
	drm_mm_init(&vm->mm, RBLN_VA_START, RBLN_VA_SIZE);
	drm_mm_init(&vm->reserved, RBLN_VM_BIND_START, RBLN_VM_BIND_SIZE);
	/* From here on, the gpuvm's last reference frees @vm (rbln_gpuvm_free()). */
	drm_gpuvm_init(&vm->gpuvm, "rbln", 0, &rdev->drm, r_obj, RBLN_VM_BIND_START,
		       RBLN_VM_BIND_SIZE, 0, 0, &rbln_gpuvm_ops);
	drm_gem_object_put(r_obj);

	mutex_lock(&rdev->vms_lock);
	gone = !rdev->ctx_table;
	if (!gone)
		list_add_tail(&vm->link, &rdev->vms);
	mutex_unlock(&rdev->vms_lock);
	if (gone) {
		rbln_vm_put(vm);
		return ERR_PTR(-ENODEV);
	}
	return vm;
}

/*
 * Takes @id from the context holding it, which has no job on the rings:
 * its entry goes, and once the device confirms that no access can use it
 * any more, the index is free to be given to another context.
 */
static void rbln_ctx_evict(struct rbln_device *rdev, struct rbln_vm *vm)
{
	lockdep_assert_held(&rdev->ctx_lock);
	WRITE_ONCE(rdev->ctx_table[vm->id], 0);
	rbln_mmu_invalidate(rdev);
	list_del_init(&vm->ctx_link);
	WRITE_ONCE(vm->id, 0);
}

/* An index for @vm: a free one, or the least recently woken idle one's. */
static int rbln_ctx_find(struct rbln_device *rdev)
{
	struct rbln_vm *vm;
	int id;

	id = find_next_zero_bit(rdev->ctx_ids, RBLN_MAX_CONTEXTS, 1);
	if (id < RBLN_MAX_CONTEXTS) {
		__set_bit(id, rdev->ctx_ids);
		WRITE_ONCE(rdev->ctx_used, rdev->ctx_used + 1);
		return id;
	}
	list_for_each_entry(vm, &rdev->ctx_lru, ctx_link) {
		if (atomic_read(&vm->ring_jobs))
			continue;
		id = vm->id;
		rbln_ctx_evict(rdev, vm);
		WRITE_ONCE(rdev->ctx_steals, rdev->ctx_steals + 1);
		return id;
	}
	return -ENOSPC;
}

/**
 * rbln_vm_pin() - hold @vm's hardware context for a job going on a ring
 * @vm: the address space
 *
 * Counts the job in @vm's ring_jobs, the count that keeps its index: the
 * fence's retirement gives it back (rbln_fence_retire()). A context with
 * a job on the rings needs no lock to be pinned again. One without may
 * have lost its index to another context's job, and takes a free index,
 * or else that of the context least recently woken of those with no job
 * on the rings. There is always one: the rings hold fewer jobs than the
 * device has contexts (rbln_ring_credits()). So the contexts a device has
 * bound how many files run at once, not how many may ever submit.
 *
 * Called by run_job, inside drm_dev_enter(): the tables are there.
 *
 * Return: 0, -ECANCELED for a banned context, which may not have its
 * entry written again, or -ENOSPC if the rings' bound does not hold.
 */
int rbln_vm_pin(struct rbln_vm *vm)
{
	struct rbln_device *rdev = vm->rdev;
	int id, ret = 0;

	if (atomic_inc_not_zero(&vm->ring_jobs))
		return 0;

	mutex_lock(&rdev->ctx_lock);
	/* After rbln_vm_cancel() cleared the entry: it must stay cleared. */
	if (atomic_read(&vm->banned)) {
		ret = -ECANCELED;
		goto out;
	}
	if (!vm->id) {
		id = rbln_ctx_find(rdev);
		if (WARN_ON_ONCE(id < 0)) {
			ret = id;
			goto out;
		}
		WRITE_ONCE(vm->id, id);
		WRITE_ONCE(rdev->ctx_table[id], vm->root.dma);
	}
	list_move_tail(&vm->ctx_link, &rdev->ctx_lru);
	atomic_inc(&vm->ring_jobs);
out:
	mutex_unlock(&rdev->ctx_lock);
	return ret;
}

/**
 * rbln_vm_cancel() - end every job of @vm now: its file is closing
 * @vm: the address space
 *
 * Bans the context and takes its table entry away: entries already on a
 * ring fault at their next access, later ones at their first, and the
 * fault handler fails them with -ECANCELED.
 */
void rbln_vm_cancel(struct rbln_vm *vm)
{
	struct rbln_device *rdev = vm->rdev;

	int idx;

	atomic_set(&vm->banned, 1);
	/* Else the device is unplugged: its table is gone. */
	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	mutex_lock(&rdev->ctx_lock);
	if (vm->id)
		WRITE_ONCE(rdev->ctx_table[vm->id], 0);
	mutex_unlock(&rdev->ctx_lock);
	drm_dev_exit(idx);
}

static void rbln_vm_release(struct kref *ref)
{
	struct rbln_vm *vm = container_of(ref, struct rbln_vm, ref);
	struct rbln_device *rdev = vm->rdev;
	struct drm_mm_node *node, *next;
	u32 id;

	/*
	 * No job of the context runs any more; nothing may walk its tables.
	 * Unless the device is unplugged: then they are gone already.
	 */
	mutex_lock(&rdev->vms_lock);
	list_del(&vm->link);
	mutex_lock(&rdev->ctx_lock);
	id = vm->id;
	if (id) {
		if (vm->root.cpu)
			rbln_ctx_evict(rdev, vm);
		else
			list_del(&vm->ctx_link);
		__clear_bit(id, rdev->ctx_ids);
		WRITE_ONCE(rdev->ctx_used, rdev->ctx_used - 1);
	}
	mutex_unlock(&rdev->ctx_lock);
	if (vm->root.cpu)
		rbln_pt_free(rdev, &vm->root, RBLN_PT_LEVELS - 1);
	mutex_unlock(&rdev->vms_lock);
	rbln_vm_unbind_all(vm);
	rbln_vm_unbind_seen_free(vm);
	drm_mm_takedown(&vm->mm);
	drm_mm_for_each_node_safe(node, next, &vm->reserved) {
		drm_mm_remove_node(node);
		kfree(node);
	}
	drm_mm_takedown(&vm->reserved);
	mutex_destroy(&vm->pt_lock);
	mutex_destroy(&vm->lock);
	drm_gpuvm_put(&vm->gpuvm);
}

void rbln_vm_put(struct rbln_vm *vm)
{
	kref_put(&vm->ref, rbln_vm_release);
}

static struct rbln_mapping *rbln_vm_find(struct rbln_vm *vm, struct rbln_bo *bo)
{
	struct rbln_mapping *map, *found = NULL;

	lockdep_assert_held(&vm->lock);

	mutex_lock(&bo->map_lock);
	list_for_each_entry(map, &bo->mappings, bo_link) {
		if (map->vm == vm) {
			found = map;
			break;
		}
	}
	mutex_unlock(&bo->map_lock);
	return found;
}

/**
 * rbln_vm_map() - give @bo an address in @vm, or count one more handle
 * @vm: the address space
 * @bo: the object
 *
 * Objects of 2 MiB and more are aligned to 2 MiB, so that the MMU can use
 * large pages for them. DEVICE objects are bound at once.
 *
 * Return: 0, -ENOMEM, or -ENOSPC when the address space is full.
 */
int rbln_vm_map(struct rbln_vm *vm, struct rbln_bo *bo)
{
	u64 size = bo->base.base.size;
	struct rbln_mapping *map;
	int ret;

	if (bo->flags & RBLN_BO_NO_VA)
		return 0;
	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (map) {
		map->users++;
		mutex_unlock(&vm->lock);
		return 0;
	}

	map = kzalloc(sizeof(*map), GFP_KERNEL_ACCOUNT);
	if (!map) {
		mutex_unlock(&vm->lock);
		return -ENOMEM;
	}
	map->vm = vm;
	map->bo = bo;
	map->users = 1;
	map->perm = RBLN_MAP_READ;
	if (!(bo->flags & RBLN_BO_READ_ONLY))
		map->perm |= RBLN_MAP_WRITE;

	ret = drm_mm_insert_node_in_range(&vm->mm, &map->node, size + PAGE_SIZE,
					  size >= SZ_2M ? SZ_2M : PAGE_SIZE, 0,
					  RBLN_VA_START, RBLN_VA_END,
					  DRM_MM_INSERT_BEST);
	if (!ret && bo->placement == RBLN_BO_DEVICE) {
		ret = rbln_mapping_bind(vm, map);
		if (ret)
			drm_mm_remove_node(&map->node);
	}
	if (ret) {
		kfree(map);
		mutex_unlock(&vm->lock);
		return ret;
	}

	mutex_lock(&bo->map_lock);
	list_add_tail(&map->bo_link, &bo->mappings);
	mutex_unlock(&bo->map_lock);
	mutex_unlock(&vm->lock);
	return 0;
}

/**
 * rbln_vm_use() - a job is about to use @bo through @vm
 * @vm: the address space
 * @bo: an object mapped there
 *
 * Binds the mapping if needed and holds it for the job until the job calls
 * rbln_vm_unmap(): closing the handle meanwhile does not pull the memory
 * from under the device.
 *
 * Return: 0, -ENOENT when @bo is not mapped in @vm, or a binding error.
 */
int rbln_vm_use(struct rbln_vm *vm, struct rbln_bo *bo)
{
	struct rbln_mapping *map;
	int ret = -ENOENT;

	/* Not under the lock, which the bind queue takes: pages may take long. */
	if (bo->placement == RBLN_BO_HOST) {
		struct sg_table *sgt = rbln_bo_dma_map(bo);

		if (IS_ERR(sgt))
			return PTR_ERR(sgt);
	}
	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (map) {
		ret = rbln_mapping_bind(vm, map);
		if (!ret)
			map->users++;
	}
	mutex_unlock(&vm->lock);
	return ret;
}

/**
 * rbln_vm_unmap() - drop one handle's or job's use of @bo's mapping in @vm
 * @vm: the address space
 * @bo: the object
 *
 * The address goes with the last user.
 */
void rbln_vm_unmap(struct rbln_vm *vm, struct rbln_bo *bo)
{
	struct rbln_mapping *map;

	if (bo->flags & RBLN_BO_NO_VA)
		return;
	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (WARN_ON(!map) || --map->users) {
		mutex_unlock(&vm->lock);
		return;
	}
	/* Only then may the memory go: its handle and its jobs are gone. */
	if (map->bound) {
		mutex_lock(&vm->pt_lock);
		rbln_pt_clear(vm, map->node.start, bo->base.base.size);
		mutex_unlock(&vm->pt_lock);
		rbln_mmu_invalidate(vm->rdev);
	}
	drm_mm_remove_node(&map->node);
	mutex_lock(&bo->map_lock);
	list_del(&map->bo_link);
	mutex_unlock(&bo->map_lock);
	mutex_unlock(&vm->lock);
	kfree(map);
}

/**
 * rbln_vm_va_of() - the address of @bo in @vm
 * @vm: the address space
 * @bo: the object
 * @va: its start address (out)
 *
 * Return: 0, or -ENOENT when @bo is not mapped in @vm. An RBLN_BO_NO_VA
 * object has address 0.
 */
int rbln_vm_va_of(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va)
{
	struct rbln_mapping *map;

	*va = 0;
	if (bo->flags & RBLN_BO_NO_VA)
		return 0;
	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (map)
		*va = map->node.start;
	mutex_unlock(&vm->lock);
	return map ? 0 : -ENOENT;
}

/**
 * rbln_vm_bo_at() - the object mapped at @va in @vm
 * @vm: the address space
 * @va: any address inside the object (its guard page does not count)
 *
 * Return: the object with a reference the caller must put, or NULL.
 */
struct rbln_bo *rbln_vm_bo_at(struct rbln_vm *vm, u64 va)
{
	struct drm_mm_node *node;
	struct rbln_bo *bo = NULL;

	/*
	 * Outside the range, the walk would start from the list head, which
	 * is no mapping.
	 */
	if (va < RBLN_VA_START || va >= RBLN_VA_END)
		return NULL;
	mutex_lock(&vm->lock);
	drm_mm_for_each_node_in_range(node, &vm->mm, va, va + 1) {
		struct rbln_mapping *map = container_of(node, struct rbln_mapping, node);

		if (va - node->start < map->bo->base.base.size) {
			bo = map->bo;
			drm_gem_object_get(&bo->base.base);
		}
		break;
	}
	mutex_unlock(&vm->lock);
	return bo;
}

/**
 * rbln_vm_show_fdinfo() - the page-table key of a file's fdinfo
 * @p: where to print
 * @vm: the file's address space
 *
 * Kernel memory the file holds beyond its objects, which no region counts.
 */
void rbln_vm_show_fdinfo(struct drm_printer *p, struct rbln_vm *vm)
{
	u64 bytes;

	mutex_lock(&vm->pt_lock);
	bytes = vm->pt_bytes;
	mutex_unlock(&vm->pt_lock);
	drm_printf(p, "rbln-page-tables:\t%llu KiB\n", bytes >> 10);
}

/**
 * rbln_vm_describe() - one line per mapping of @vm, for debugfs
 * @vm: the address space
 * @m: where to print
 */
void rbln_vm_describe(struct rbln_vm *vm, struct seq_file *m)
{
	struct drm_mm_node *node;
	struct drm_gpuva *va;

	mutex_lock(&vm->lock);
	drm_mm_for_each_node(node, &vm->mm) {
		struct rbln_mapping *map = container_of(node, struct rbln_mapping, node);
		struct rbln_bo *bo = map->bo;

		seq_printf(m, "\t%#014llx %12zu %-6s %c%c%s%s\n", node->start,
			   bo->base.base.size,
			   bo->placement == RBLN_BO_DEVICE ? "device" : "host",
			   map->perm & RBLN_MAP_READ ? 'r' : '-',
			   map->perm & RBLN_MAP_WRITE ? 'w' : '-',
			   map->bound ? " bound" : "",
			   drm_gem_is_imported(&bo->base.base) ? " imported" : "");
	}
	drm_mm_for_each_node(node, &vm->reserved)
		seq_printf(m, "\t%#014llx %12llu reserved\n", node->start, node->size);
	drm_gpuvm_for_each_va(va, &vm->gpuvm) {
		struct rbln_bo *bo = to_rbln_bo(va->gem.obj);

		seq_printf(m, "\t%#014llx %12llu %-6s r%c bind +%#llx\n", va->va.addr,
			   va->va.range, bo->placement == RBLN_BO_DEVICE ? "device" : "host",
			   container_of(va, struct rbln_va, base)->perm & RBLN_MAP_WRITE ?
			   'w' : '-', va->gem.offset);
	}
	mutex_unlock(&vm->lock);
}
