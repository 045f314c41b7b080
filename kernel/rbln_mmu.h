/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_mmu.h - per-file device address spaces
 */
#ifndef __RBLN_MMU_H__
#define __RBLN_MMU_H__

#include <linux/bits.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/types.h>

#include <drm/drm_mm.h>

struct rbln_bo;
struct seq_file;

/* The device virtual range of every file: NULL and low addresses never map. */
#define RBLN_VA_START		SZ_4G
#define RBLN_VA_END		BIT_ULL(47)
#define RBLN_VA_SIZE		(RBLN_VA_END - RBLN_VA_START)

/* What a mapping lets the device do. */
#define RBLN_MAP_READ		BIT(0)
#define RBLN_MAP_WRITE		BIT(1)

/**
 * struct rbln_vm - one file's device address space
 * @lock: protects @mm and every mapping's @users. Taken before a buffer
 *	object's map_lock.
 * @mm: allocator of the virtual range; each node is a struct rbln_mapping.
 */
struct rbln_vm {
	struct mutex lock; /* protects mm, users; taken before map_lock */
	struct drm_mm mm;
};

/**
 * struct rbln_mapping - a buffer object seen through one address space
 * @node: its virtual range: the object, then one unmapped guard page that
 *	makes an overrun fault instead of reaching the next object.
 * @vm: the address space.
 * @bo: the object; the file's handle keeps it alive while mapped.
 * @bo_link: in the object's list of mappings, under its map_lock.
 * @users: handles of the file on the object, under @vm->lock.
 * @perm: RBLN_MAP_* granted to the device.
 */
struct rbln_mapping {
	struct drm_mm_node node;
	struct rbln_vm *vm;
	struct rbln_bo *bo;
	struct list_head bo_link;
	unsigned int users;
	u32 perm;
};

void rbln_vm_init(struct rbln_vm *vm);
void rbln_vm_fini(struct rbln_vm *vm);
int rbln_vm_map(struct rbln_vm *vm, struct rbln_bo *bo);
void rbln_vm_unmap(struct rbln_vm *vm, struct rbln_bo *bo);
int rbln_vm_va_of(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va);
struct rbln_bo *rbln_vm_bo_at(struct rbln_vm *vm, u64 va);
void rbln_vm_describe(struct rbln_vm *vm, struct seq_file *m);

#endif /* __RBLN_MMU_H__ */
