// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_mmu.c - per-file device address spaces
 *
 * Every open file has its own device virtual address space. A buffer object
 * gets an address in a file's space when the file gets a handle to it
 * (creation or PRIME import) and loses it with the file's last handle, so a
 * file can name only what it holds. The space records, per mapping, what
 * the device may do there; commands are checked against it.
 */

#include <linux/seq_file.h>
#include <linux/slab.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_gem.h"
#include "rbln_mmu.h"

void rbln_vm_init(struct rbln_vm *vm)
{
	mutex_init(&vm->lock);
	drm_mm_init(&vm->mm, RBLN_VA_START, RBLN_VA_SIZE);
}

/* Every handle is closed before this: the space must be empty. */
void rbln_vm_fini(struct rbln_vm *vm)
{
	drm_mm_takedown(&vm->mm);
	mutex_destroy(&vm->lock);
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
 * large pages for them.
 *
 * Return: 0, -ENOMEM, or -ENOSPC when the address space is full.
 */
int rbln_vm_map(struct rbln_vm *vm, struct rbln_bo *bo)
{
	u64 size = bo->base.base.size;
	struct rbln_mapping *map;
	int ret;

	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (map) {
		map->users++;
		mutex_unlock(&vm->lock);
		return 0;
	}

	map = kzalloc(sizeof(*map), GFP_KERNEL);
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
 * rbln_vm_unmap() - drop one handle's use of @bo's mapping in @vm
 * @vm: the address space
 * @bo: the object
 *
 * The address goes with the last handle of the file.
 */
void rbln_vm_unmap(struct rbln_vm *vm, struct rbln_bo *bo)
{
	struct rbln_mapping *map;

	mutex_lock(&vm->lock);
	map = rbln_vm_find(vm, bo);
	if (WARN_ON(!map) || --map->users) {
		mutex_unlock(&vm->lock);
		return;
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
 * Return: 0, or -ENOENT when @bo is not mapped in @vm.
 */
int rbln_vm_va_of(struct rbln_vm *vm, struct rbln_bo *bo, u64 *va)
{
	struct rbln_mapping *map;

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
 * rbln_vm_describe() - one line per mapping of @vm, for debugfs
 * @vm: the address space
 * @m: where to print
 */
void rbln_vm_describe(struct rbln_vm *vm, struct seq_file *m)
{
	struct drm_mm_node *node;

	mutex_lock(&vm->lock);
	drm_mm_for_each_node(node, &vm->mm) {
		struct rbln_mapping *map = container_of(node, struct rbln_mapping, node);
		struct rbln_bo *bo = map->bo;

		seq_printf(m, "\t%#014llx %12zu %-6s %c%c%s\n", node->start,
			   bo->base.base.size,
			   bo->placement == RBLN_BO_DEVICE ? "device" : "host",
			   map->perm & RBLN_MAP_READ ? 'r' : '-',
			   map->perm & RBLN_MAP_WRITE ? 'w' : '-',
			   drm_gem_is_imported(&bo->base.base) ? " imported" : "");
	}
	mutex_unlock(&vm->lock);
}
