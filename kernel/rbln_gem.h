/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_gem.h - buffer objects
 */
#ifndef __RBLN_GEM_H__
#define __RBLN_GEM_H__

#include <linux/list.h>
#include <linux/mutex.h>

#include <drm/drm_gem_shmem_helper.h>

struct dma_buf;
struct dma_buf_attachment;
struct drm_printer;
struct rbln_device;
struct sg_table;

/**
 * struct rbln_bo - a buffer object, in host or device memory
 * @base: the GEM object. HOST objects are shmem objects (their pages, or
 *	the importer's sg table); DEVICE objects use only @base.base.
 * @placement: RBLN_BO_DEVICE or RBLN_BO_HOST.
 * @flags: RBLN_BO_READ_ONLY, RBLN_BO_NO_VA.
 * @blocks: device memory blocks of a DEVICE object that this device
 *	allocated; empty for one imported from another rbln device.
 * @peer: the exporting rbln device's object, for a DEVICE object imported
 *	from it; the import's dma-buf attachment keeps it alive.
 * @peer_slot: the slot of this device's peer table that reaches the
 *	exporter, held while @peer is set.
 * @map_lock: protects @mappings, and the GEM object's list of VM_BIND
 *	mappings (&drm_gem_object.gpuva).
 * @mappings: the struct rbln_mapping of every address space it is in.
 * @dma_lock: one rbln_bo_dma_map() of the object at a time, which may take
 *	long (pages to allocate) and so is not done under the device's lock.
 * @dma_link: in the device's list of HOST objects mapped for it
 *	(rbln_bo_dma_map()); under its dma_bos_lock, as are the next two.
 * @dma_sgt: a HOST object's pages as the device reaches them, NULL until
 *	rbln_bo_dma_map(): the shmem helper's sg table, or for an import
 *	that of @dma_attach.
 * @dma_attach: an imported HOST object's attachment that maps it for the
 *	device. The GEM object's own (&drm_gem_object.import_attach) never
 *	maps anything, as exporters may keep a mapping until detach.
 */
struct rbln_bo {
	struct drm_gem_shmem_object base;
	u32 placement;
	u32 flags;
	struct list_head blocks;
	struct rbln_bo *peer;
	int peer_slot;
	struct mutex map_lock; /* protects mappings, base.base.gpuva */
	struct list_head mappings;
	struct mutex dma_lock; /* one rbln_bo_dma_map() at a time; before dma_bos_lock */
	struct list_head dma_link;
	struct sg_table *dma_sgt;
	struct dma_buf_attachment *dma_attach;
};

static inline struct rbln_bo *to_rbln_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct rbln_bo, base.base);
}

struct drm_gem_object *rbln_gem_create_object(struct drm_device *drm, size_t size);
int rbln_gem_prime_handle_to_fd(struct drm_device *drm, struct drm_file *file, u32 handle,
				u32 flags, int *fd);
struct drm_gem_object *rbln_gem_prime_import(struct drm_device *drm,
					     struct dma_buf *dma_buf);
struct sg_table *rbln_bo_dma_map(struct rbln_bo *bo);
int rbln_gem_init(struct rbln_device *rdev);
void rbln_gem_unplug(struct rbln_device *rdev);
int rbln_bo_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_bo_info_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
void rbln_gem_show_fdinfo(struct drm_printer *p, struct drm_file *file);

#endif /* __RBLN_GEM_H__ */
