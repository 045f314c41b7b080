/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_mmu.h - per-file device address spaces
 */
#ifndef __RBLN_MMU_H__
#define __RBLN_MMU_H__

#include <linux/bits.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/types.h>
#include <linux/atomic.h>
#include <linux/wait.h>

#include <drm/drm_gpuvm.h>
#include <drm/drm_mm.h>

struct dma_fence;
struct rbln_bo;
struct rbln_fence_id;
struct seq_file;

/*
 * The device virtual range of every file, in two parts. The driver places
 * objects in the first when a file gets a handle; NULL and low addresses
 * never map. VM_RESERVE hands out the second, where only the file's bind
 * queue writes page table entries, in the order of its binds: an address
 * given back there cannot be mapped again before its unbinds are done.
 */
#define RBLN_VA_START		SZ_4G
#define RBLN_VA_END		BIT_ULL(46)
#define RBLN_VA_SIZE		(RBLN_VA_END - RBLN_VA_START)
#define RBLN_VM_BIND_START	RBLN_VA_END
#define RBLN_VM_BIND_END	BIT_ULL(47)
#define RBLN_VM_BIND_SIZE	(RBLN_VM_BIND_END - RBLN_VM_BIND_START)

/* What a mapping lets the device do. */
#define RBLN_MAP_READ		BIT(0)
#define RBLN_MAP_WRITE		BIT(1)

/**
 * struct rbln_pt - one page table, and the driver's shadow of its children
 * @cpu: the 512 entries the device reads.
 * @dma: their DMA address.
 * @child: next-level tables, NULL at the leaf level.
 * @pins: VM_BIND MAP jobs queued to write this leaf, which made it
 *	(rbln_vm_pt_prepare()): an unbind does not free it under them.
 * @dead: in the list of tables an unbind frees (rbln_vm_pt_prune()).
 */
struct rbln_pt {
	u64 *cpu;
	dma_addr_t dma;
	struct rbln_pt **child;
	unsigned int pins;
	struct rbln_pt *dead;
};

/**
 * struct rbln_vm - one file's device context: its address space
 * @ref: held by the file and by every job of the context.
 * @rdev: the device.
 * @id: the context's index in the device's context table, or 0 for none;
 *	under the device's ctx_lock. Given to a job that runs, and taken back
 *	for another context's job only while @ring_jobs is 0 (rbln_vm_pin()):
 *	so it does not change under a job on a ring, and whoever holds such
 *	a job (the fault handler) may read it and clear its entry unlocked.
 * @ctx_link: in the device's ctx_lru while @id is not 0.
 * @lock: protects @mm, @reserved, @gpuvm's tree and every mapping's @users
 *	and @bound; held across allocations, so never taken where a fence
 *	is to be signaled. Taken before @pt_lock and a buffer object's
 *	map_lock.
 * @mm: allocator of the driver-placed range; each node is a struct
 *	rbln_mapping.
 * @reserved: the VM_RESERVE ranges (struct drm_mm_node each).
 * @gpuvm: the VM_BIND mappings (struct rbln_va each), as the file's binds
 *	leave them: what the bind queue has still to do is in its jobs. Its
 *	reservation object carries the fence of every job of the context,
 *	for unbinds to wait for.
 * @pt_lock: protects @root, every table below it and their @pins, and
 *	@pt_bytes. Nothing allocates under it: the bind queue takes it to
 *	write entries, and a fence waits for that. Tables are made with it
 *	dropped and linked once it is taken again (rbln_pt_make()).
 * @root: the top-level page table. Its @cpu is NULL once the device is
 *	unplugged: the tables are gone (rbln_mmu_unplug()), and the context
 *	maps nothing any more.
 * @link: in the device's list of contexts, under its vms_lock.
 * @banned: set when a job of the context faulted: no more submissions.
 * @fault_info: the fault that banned the context, RBLN_RING_FAULT_INFO
 *	as the device gave it (0: none), for fdinfo; written once, by
 *	whoever set @banned for it, after @fault_addr.
 * @fault_addr: the address of that fault.
 * @busy_ns: time the device spent on the context's jobs.
 * @jobs: jobs of the context not yet freed.
 * @bind_jobs: bind jobs of the context not yet freed.
 * @ring_jobs: jobs of the context on the rings: taken by run_job
 *	(rbln_vm_pin()), their fence not yet signaled.
 * @jobs_done: woken when @jobs or @bind_jobs drops to zero, and to half
 *	the max_jobs module parameter, for callers waiting for room
 *	(rbln_vm_room_get()), who are woken at nothing else.
 * @rings_done: woken when @ring_jobs drops to zero, for a closing file.
 * @unbind_seen: the fences the last unbind pushed waits for, by
 *	context and seqno, sorted (struct rbln_fence_id): a later unbind, run
 *	after it, need not wait for them again (rbln_unbind_add_deps()).
 *	Under the reservation lock of @gpuvm, with @unbind_seen_count.
 * @unbind_seen_count: entries of @unbind_seen.
 * @unbind_last: that unbind's finished fence, held.
 * @pt_bytes: memory its page tables take, the device's and the shadows'
 *	child arrays (fdinfo's rbln-page-tables); under @pt_lock.
 */
struct rbln_vm {
	struct kref ref;
	struct rbln_device *rdev;
	u32 id;
	struct list_head ctx_link;
	struct mutex lock; /* protects mm, reserved, gpuvm, users, bound */
	struct drm_mm mm;
	struct drm_mm reserved;
	struct drm_gpuvm gpuvm;
	struct mutex pt_lock; /* protects root, the tables, pt_bytes; allocates nothing */
	struct rbln_pt root;
	struct list_head link;
	atomic_t banned;
	u32 fault_info;
	u64 fault_addr;
	atomic64_t busy_ns;
	atomic_t jobs;
	atomic_t bind_jobs;
	atomic_t ring_jobs;
	atomic_t failed_jobs;
	wait_queue_head_t jobs_done;
	wait_queue_head_t rings_done;
	struct rbln_fence_id *unbind_seen;
	u32 unbind_seen_count;
	struct dma_fence *unbind_last;
	u64 pt_bytes;
};

/**
 * struct rbln_mapping - a buffer object seen through one address space
 * @node: its virtual range: the object, then one unmapped guard page that
 *	makes an overrun fault instead of reaching the next object.
 * @vm: the address space.
 * @bo: the object; the file's handle keeps it alive while mapped.
 * @bo_link: in the object's list of mappings, under its map_lock.
 * @users: the file's handles on the object and the jobs using it.
 * @perm: RBLN_MAP_* granted to the device.
 * @bound: the page table entries are written. DEVICE objects are bound
 *	at once; HOST objects when a job first lists them, which pins their
 *	pages until the mapping goes.
 */
struct rbln_mapping {
	struct drm_mm_node node;
	struct rbln_vm *vm;
	struct rbln_bo *bo;
	struct list_head bo_link;
	unsigned int users;
	u32 perm;
	bool bound;
};

/**
 * struct rbln_va - a VM_BIND mapping
 * @base: its range, object and offset; linked to the object's
 *	&drm_gpuvm_bo, which holds the object, under its map_lock.
 * @perm: RBLN_MAP_* granted to the device.
 * @unbind_link: once out of the tree, in the list of the unbind that
 *	clears its entries.
 */
struct rbln_va {
	struct drm_gpuva base;
	u32 perm;
	struct list_head unbind_link;
};

struct rbln_device;

int rbln_mmu_init(struct rbln_device *rdev);
void rbln_mmu_invalidate(struct rbln_device *rdev);
void rbln_mmu_program(struct rbln_device *rdev);
void rbln_mmu_unplug(struct rbln_device *rdev);
struct rbln_vm *rbln_vm_create(struct rbln_device *rdev);
int rbln_vm_pin(struct rbln_vm *vm);
void rbln_vm_cancel(struct rbln_vm *vm);
void rbln_vm_put(struct rbln_vm *vm);
int rbln_vm_map(struct rbln_vm *vm, struct rbln_bo *bo);
int rbln_vm_use(struct rbln_vm *vm, struct rbln_bo *bo);
void rbln_vm_unmap(struct rbln_vm *vm, struct rbln_bo *bo);
int rbln_vm_va_of(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va);
struct rbln_bo *rbln_vm_bo_at(struct rbln_vm *vm, u64 va);
void rbln_vm_describe(struct rbln_vm *vm, struct seq_file *m);
void rbln_vm_show_fdinfo(struct drm_printer *p, struct rbln_vm *vm);
int rbln_vm_pt_prepare(struct rbln_vm *vm, u64 va, u64 size);
void rbln_vm_pt_unpin(struct rbln_vm *vm, u64 va, u64 size);
void rbln_vm_pt_prune(struct rbln_vm *vm, u64 va, u64 size);
void rbln_vm_pt_map(struct rbln_vm *vm, u64 va, struct rbln_bo *bo, u64 offset, u64 size,
		    u32 perm);
void rbln_vm_pt_clear(struct rbln_vm *vm, u64 va, u64 size);
void rbln_vm_unbind_all(struct rbln_vm *vm);
void rbln_vm_unbind_seen_free(struct rbln_vm *vm);
struct drm_gem_object **rbln_vm_bound_objects(struct rbln_vm *vm, unsigned int *count);
bool rbln_vm_bound_includes(struct drm_gem_object **objs, unsigned int count,
			    struct drm_gem_object *obj);
void rbln_vm_bound_put(struct drm_gem_object **objs, unsigned int count);

static inline struct rbln_vm *rbln_vm_get(struct rbln_vm *vm)
{
	kref_get(&vm->ref);
	return vm;
}

#endif /* __RBLN_MMU_H__ */
