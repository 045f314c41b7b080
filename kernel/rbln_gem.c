// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_gem.c - buffer objects: host memory (shmem) and device memory
 *
 * HOST objects are shmem GEM objects: pageable until the device needs them,
 * mmap-able by their owners, shareable with any driver through PRIME.
 * DEVICE objects are blocks of the NPU's own memory (rbln_devmem.c): the
 * CPU cannot map them, and only another rbln device can import them, as a
 * peer object naming the exporter's memory.
 *
 * Either kind is mapped into a file's device address space when the file
 * gets a handle to it (the GEM open hook) and unmapped with the handle.
 *
 * A HOST object's pages are mapped for the device (an sg table on the bus
 * device) when the device first needs them, and unmapped when the object
 * goes, or when the device is unplugged if that comes first: no mapping
 * outlives the driver's binding to the bus device, whatever files stay
 * open.
 */

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>

#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"
#include "rbln_gem.h"

static int rbln_gem_open(struct drm_gem_object *obj, struct drm_file *file)
{
	return rbln_vm_map(to_rbln_file(file)->vm, to_rbln_bo(obj));
}

static void rbln_gem_close(struct drm_gem_object *obj, struct drm_file *file)
{
	rbln_vm_unmap(to_rbln_file(file)->vm, to_rbln_bo(obj));
}

static void rbln_bo_init(struct rbln_bo *bo, u32 placement)
{
	bo->placement = placement;
	INIT_LIST_HEAD(&bo->blocks);
	INIT_LIST_HEAD(&bo->mappings);
	INIT_LIST_HEAD(&bo->dma_link);
	mutex_init(&bo->map_lock);
	mutex_init(&bo->dma_lock);
	drm_gem_gpuva_set_lock(&bo->base.base, &bo->map_lock);
}

static void rbln_bo_fini(struct rbln_bo *bo)
{
	WARN_ON(!list_empty(&bo->mappings));
	mutex_destroy(&bo->dma_lock);
	mutex_destroy(&bo->map_lock);
}

/* --- DMA mappings of HOST objects ------------------------------------------ */

/* Gives back the device's mapping of @bo; under the device's dma_bos_lock. */
static void rbln_bo_dma_unmap(struct rbln_bo *bo)
{
	struct drm_gem_shmem_object *shmem = &bo->base;
	struct drm_gem_object *obj = &shmem->base;

	if (!bo->dma_sgt)
		return;
	list_del_init(&bo->dma_link);
	if (bo->dma_attach) {
		dma_buf_unmap_attachment_unlocked(bo->dma_attach, bo->dma_sgt, DMA_BIDIRECTIONAL);
		dma_buf_detach(bo->dma_attach->dmabuf, bo->dma_attach);
		bo->dma_attach = NULL;
	} else {
		/* The pages stay pinned, as drm_gem_shmem_free() expects. */
		dma_resv_lock(obj->resv, NULL);
		dma_unmap_sgtable(obj->dev->dev, shmem->sgt, DMA_BIDIRECTIONAL, 0);
		sg_free_table(shmem->sgt);
		kfree(shmem->sgt);
		shmem->sgt = NULL;
		dma_resv_unlock(obj->resv);
	}
	bo->dma_sgt = NULL;
}

/*
 * The device maps host memory a page at a time (rbln_pt_map_bo()): an
 * exporter's table must be whole pages, and cover the object. Nothing in
 * the dma-buf contract says it is, and a segment that starts or ends
 * inside a page would give the device the bytes around it, and shift
 * every page after it.
 */
static bool rbln_sgt_is_pages(struct sg_table *sgt, size_t size)
{
	struct scatterlist *sg;
	size_t covered = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		if (!PAGE_ALIGNED(sg_dma_address(sg)) || !PAGE_ALIGNED(sg_dma_len(sg)))
			return false;
		covered += sg_dma_len(sg);
	}
	return covered >= size;
}

/* Maps @bo's pages for the device; its dma_lock held, the device's not. */
static struct sg_table *rbln_bo_dma_map_new(struct rbln_bo *bo,
					    struct dma_buf_attachment **attachp)
{
	struct drm_gem_object *obj = &bo->base.base;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;

	*attachp = NULL;
	if (!drm_gem_is_imported(obj))
		return drm_gem_shmem_get_pages_sgt(&bo->base);
	attach = dma_buf_attach(obj->import_attach->dmabuf, obj->dev->dev);
	if (IS_ERR(attach))
		return ERR_CAST(attach);
	sgt = dma_buf_map_attachment_unlocked(attach, DMA_BIDIRECTIONAL);
	if (!IS_ERR(sgt) && !rbln_sgt_is_pages(sgt, obj->size)) {
		dma_buf_unmap_attachment_unlocked(attach, sgt, DMA_BIDIRECTIONAL);
		sgt = ERR_PTR(-EINVAL);
	}
	if (IS_ERR(sgt))
		dma_buf_detach(attach->dmabuf, attach);
	else
		*attachp = attach;
	return sgt;
}

/**
 * rbln_bo_dma_map() - pin a HOST object's pages and map them for the device
 * @bo: the object
 *
 * Both last as long as the object, or until the device is unplugged
 * (rbln_gem_unplug()). The first call maps, which may take long (pages to
 * allocate): under the object's own lock, while other objects are mapped
 * and freed.
 *
 * Return: the mapped sg table, or an ERR_PTR: -ENODEV once unplugged,
 * -EINVAL for an import whose exporter's table is not whole pages.
 */
struct sg_table *rbln_bo_dma_map(struct rbln_bo *bo)
{
	struct rbln_device *rdev = to_rbln_device(bo->base.base.dev);
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;

	mutex_lock(&bo->dma_lock);
	mutex_lock(&rdev->dma_bos_lock);
	sgt = rdev->dma_gone ? ERR_PTR(-ENODEV) : bo->dma_sgt;
	mutex_unlock(&rdev->dma_bos_lock);
	if (sgt)
		goto out;

	sgt = rbln_bo_dma_map_new(bo, &attach);
	if (IS_ERR(sgt))
		goto out;
	mutex_lock(&rdev->dma_bos_lock);
	bo->dma_sgt = sgt;
	bo->dma_attach = attach;
	list_add_tail(&bo->dma_link, &rdev->dma_bos);
	if (rdev->dma_gone) {
		/* Unplugged meanwhile, and swept without this one. */
		rbln_bo_dma_unmap(bo);
		sgt = ERR_PTR(-ENODEV);
	}
	mutex_unlock(&rdev->dma_bos_lock);
out:
	mutex_unlock(&bo->dma_lock);
	return sgt;
}

/**
 * rbln_gem_init() - the device's list of mapped HOST objects
 * @rdev: the device
 *
 * Return: 0 or a negative errno.
 */
int rbln_gem_init(struct rbln_device *rdev)
{
	INIT_LIST_HEAD(&rdev->dma_bos);
	return drmm_mutex_init(&rdev->drm, &rdev->dma_bos_lock);
}

/**
 * rbln_gem_unplug() - unmap every HOST object from the unplugged device
 * @rdev: the device, stopped, with no page table left that names a page
 *	(rbln_mmu_unplug())
 *
 * The bus device may be gone, or bound to another driver, by the time the
 * objects go with the last file: their mappings go now.
 */
void rbln_gem_unplug(struct rbln_device *rdev)
{
	struct rbln_bo *bo, *tmp;

	mutex_lock(&rdev->dma_bos_lock);
	rdev->dma_gone = true;
	list_for_each_entry_safe(bo, tmp, &rdev->dma_bos, dma_link)
		rbln_bo_dma_unmap(bo);
	mutex_unlock(&rdev->dma_bos_lock);
}

/* --- HOST objects ---------------------------------------------------------- */

static void rbln_host_bo_free(struct drm_gem_object *obj)
{
	struct rbln_device *rdev = to_rbln_device(obj->dev);
	struct rbln_bo *bo = to_rbln_bo(obj);

	/*
	 * Unmapped under the lock an unplug sweeps under, or the sweep could
	 * miss it and finish, and the unmap come after the driver let go of
	 * the bus device. The pages stay pinned for drm_gem_shmem_free().
	 */
	mutex_lock(&rdev->dma_bos_lock);
	rbln_bo_dma_unmap(bo);
	list_del(&bo->dma_link);
	mutex_unlock(&rdev->dma_bos_lock);
	rbln_bo_fini(bo);
	drm_gem_shmem_free(&bo->base);
}

static enum drm_gem_object_status rbln_host_bo_status(struct drm_gem_object *obj)
{
	struct drm_gem_shmem_object *shmem = &to_rbln_bo(obj)->base;

	/* An import's pages are the exporter's, and present. */
	return shmem->pages || drm_gem_is_imported(obj) ? DRM_GEM_OBJECT_RESIDENT : 0;
}

/*
 * An importer's device maps the pages with DMA_ATTR_SKIP_CPU_SYNC
 * (drm_gem_map_dma_buf()), the object's own device without it
 * (drm_gem_shmem_get_pages_sgt()). The DMA API's checks let a mapping that
 * skips the sync overlap one that does not, not the other way round: so
 * the object's device maps first, and exporting costs what the object's
 * first job would. rbln_gem_prime_handle_to_fd() has mapped it already.
 */
static struct dma_buf *rbln_host_bo_export(struct drm_gem_object *obj, int flags)
{
	struct sg_table *sgt = rbln_bo_dma_map(to_rbln_bo(obj));

	if (IS_ERR(sgt))
		return ERR_CAST(sgt);
	return drm_gem_prime_export(obj, flags);
}

static const struct drm_gem_object_funcs rbln_host_bo_funcs = {
	.free = rbln_host_bo_free,
	.export = rbln_host_bo_export,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.status = rbln_host_bo_status,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/**
 * rbln_gem_create_object() - &drm_driver.gem_create_object
 * @drm: the device
 * @size: the object's size
 *
 * The shmem helpers allocate every HOST object, created or imported,
 * through this.
 *
 * Return: the new object's GEM base or an ERR_PTR.
 */
struct drm_gem_object *rbln_gem_create_object(struct drm_device *drm, size_t size)
{
	struct rbln_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	rbln_bo_init(bo, RBLN_BO_HOST);
	bo->base.map_wc = false;
	bo->base.base.funcs = &rbln_host_bo_funcs;
	return &bo->base.base;
}

/* --- DEVICE objects -------------------------------------------------------- */

static void rbln_device_bo_free(struct drm_gem_object *obj)
{
	struct rbln_bo *bo = to_rbln_bo(obj);

	rbln_devmem_free(to_rbln_device(obj->dev), &bo->blocks);
	if (bo->peer)
		rbln_peer_put(to_rbln_device(obj->dev), bo->peer_slot);
	if (drm_gem_is_imported(obj))
		drm_prime_gem_destroy(obj, NULL);
	drm_gem_object_release(obj);
	rbln_bo_fini(bo);
	kfree(bo);
}

/* Device memory never moves: pinning for an importer always succeeds. */
static int rbln_device_bo_pin(struct drm_gem_object *obj)
{
	return 0;
}

static void rbln_device_bo_unpin(struct drm_gem_object *obj)
{
}

/* Only rbln devices, which need no pages, can import device memory. */
static struct sg_table *rbln_device_bo_get_sg_table(struct drm_gem_object *obj)
{
	return ERR_PTR(-EOPNOTSUPP);
}

/*
 * The CPU cannot reach device memory. Without this, mmap() of an exported
 * DEVICE object's dma-buf would take the PRIME fallback, which needs a
 * primary node an accel device does not have.
 */
static int rbln_device_bo_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	return -ENODEV;
}

static enum drm_gem_object_status rbln_device_bo_status(struct drm_gem_object *obj)
{
	return DRM_GEM_OBJECT_RESIDENT;
}

static const struct drm_gem_object_funcs rbln_device_bo_funcs = {
	.free = rbln_device_bo_free,
	.open = rbln_gem_open,
	.close = rbln_gem_close,
	.pin = rbln_device_bo_pin,
	.unpin = rbln_device_bo_unpin,
	.get_sg_table = rbln_device_bo_get_sg_table,
	.mmap = rbln_device_bo_mmap,
	.status = rbln_device_bo_status,
};

static struct rbln_bo *rbln_device_bo_alloc(struct drm_device *drm, size_t size)
{
	struct rbln_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	rbln_bo_init(bo, RBLN_BO_DEVICE);
	bo->base.base.funcs = &rbln_device_bo_funcs;
	drm_gem_private_object_init(drm, &bo->base.base, size);
	return bo;
}

static struct rbln_bo *rbln_device_bo_create(struct rbln_device *rdev, size_t size)
{
	struct rbln_bo *bo;
	int ret;

	if (size > rdev->mem_size)
		return ERR_PTR(-ENOSPC);

	bo = rbln_device_bo_alloc(&rdev->drm, size);
	if (IS_ERR(bo))
		return bo;
	ret = rbln_devmem_alloc(rdev, size, &bo->blocks);
	if (ret) {
		drm_gem_object_put(&bo->base.base);
		return ERR_PTR(ret);
	}
	return bo;
}

/*
 * A DEVICE object of another rbln device: a peer object that names the
 * exporter's memory through a peer slot, the path of device-to-device
 * copies. The attachment keeps the exporter's object (and device) alive as
 * long as the import; the exporter's removal revokes the slot.
 */
static struct drm_gem_object *rbln_device_bo_import_peer(struct drm_device *drm,
							 struct dma_buf *dma_buf)
{
	struct rbln_bo *exported = to_rbln_bo(dma_buf->priv);
	struct dma_buf_attachment *attach;
	struct rbln_bo *bo;
	int slot;

	slot = rbln_peer_get(to_rbln_device(drm), to_rbln_device(exported->base.base.dev));
	if (slot < 0)
		return ERR_PTR(slot);
	attach = dma_buf_attach(dma_buf, drm->dev);
	if (IS_ERR(attach)) {
		rbln_peer_put(to_rbln_device(drm), slot);
		return ERR_CAST(attach);
	}

	bo = rbln_device_bo_alloc(drm, dma_buf->size);
	if (IS_ERR(bo)) {
		dma_buf_detach(dma_buf, attach);
		rbln_peer_put(to_rbln_device(drm), slot);
		return ERR_CAST(bo);
	}
	get_dma_buf(dma_buf);
	bo->peer_slot = slot;
	bo->peer = exported;
	bo->flags = exported->flags;
	bo->base.base.import_attach = attach;
	bo->base.base.resv = dma_buf->resv;
	return &bo->base.base;
}

static void rbln_unmapped_move_notify(struct dma_buf_attachment *attach)
{
	/* Nothing is mapped through it: nothing moves under the device. */
}

static const struct dma_buf_attach_ops rbln_unmapped_attach_ops = {
	.move_notify = rbln_unmapped_move_notify,
};

/*
 * A HOST object on a foreign buffer (or a HOST object of another rbln
 * device), as drm_gem_prime_import() makes one, but with an attachment
 * that maps nothing: of the exporter's kind, dynamic or not, as attaching
 * across kinds maps at once. The device's mapping is another attachment,
 * made when it needs the pages (rbln_bo_dma_map()).
 */
static struct drm_gem_object *rbln_host_bo_import(struct drm_device *drm,
						  struct dma_buf *dma_buf)
{
	struct dma_buf_attachment *attach;
	struct drm_gem_object *obj;

	attach = dma_buf_dynamic_attach(dma_buf, drm->dev,
					dma_buf_is_dynamic(dma_buf) ?
					&rbln_unmapped_attach_ops : NULL, NULL);
	if (IS_ERR(attach))
		return ERR_CAST(attach);
	obj = drm_gem_shmem_prime_import_sg_table(drm, attach, NULL);
	if (IS_ERR(obj)) {
		dma_buf_detach(dma_buf, attach);
		return obj;
	}
	get_dma_buf(dma_buf);
	obj->import_attach = attach;
	obj->resv = dma_buf->resv;
	return obj;
}

/**
 * rbln_gem_prime_handle_to_fd() - &drm_driver.prime_handle_to_fd
 * @drm: the device
 * @file: the caller's file
 * @handle: the object to export
 * @flags: DRM_CLOEXEC, DRM_RDWR
 * @fd: the dma-buf's file descriptor (out)
 *
 * As drm_gem_prime_handle_to_fd(), which exports under the device's
 * object_name_lock: every BO_CREATE, import and handle close of the device
 * waits for it. A HOST object is mapped for the device first, outside it:
 * its pages, as many as memory holds, may take seconds to allocate.
 *
 * Return: 0 or a negative errno.
 */
int rbln_gem_prime_handle_to_fd(struct drm_device *drm, struct drm_file *file, u32 handle,
				u32 flags, int *fd)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(file, handle);
	struct sg_table *sgt = NULL;

	if (!obj)
		return -ENOENT;
	if (to_rbln_bo(obj)->placement == RBLN_BO_HOST && !drm_gem_is_imported(obj))
		sgt = rbln_bo_dma_map(to_rbln_bo(obj));
	drm_gem_object_put(obj);
	if (IS_ERR(sgt))
		return PTR_ERR(sgt);
	return drm_gem_prime_handle_to_fd(drm, file, handle, flags, fd);
}

/**
 * rbln_gem_prime_import() - &drm_driver.gem_prime_import
 * @drm: the importing device
 * @dma_buf: what to import
 *
 * An object of this device is itself again. DEVICE objects of other rbln
 * devices become peer objects; everything else (a HOST object of another
 * rbln device, a foreign buffer such as a udmabuf or a dma-heap buffer)
 * a HOST object here.
 *
 * Return: the imported object or an ERR_PTR.
 */
struct drm_gem_object *rbln_gem_prime_import(struct drm_device *drm,
					     struct dma_buf *dma_buf)
{
	struct drm_gem_object *obj, *imported;

	/* drm_gem_prime_export() makes every rbln dma-buf owned by us. */
	if (dma_buf->owner != THIS_MODULE)
		return rbln_host_bo_import(drm, dma_buf);
	obj = dma_buf->priv;
	if (obj->dev == drm) {
		drm_gem_object_get(obj);
		return obj;
	}
	if (to_rbln_bo(obj)->placement == RBLN_BO_DEVICE)
		return rbln_device_bo_import_peer(drm, dma_buf);
	/* What its own device may not write, neither may this one. */
	imported = rbln_host_bo_import(drm, dma_buf);
	if (!IS_ERR(imported))
		to_rbln_bo(imported)->flags |= to_rbln_bo(obj)->flags & RBLN_BO_READ_ONLY;
	return imported;
}

/* --- ioctls ---------------------------------------------------------------- */

int rbln_bo_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln_device(drm);
	struct drm_rbln_bo_create *args = data;
	struct drm_gem_shmem_object *shmem;
	struct rbln_bo *bo;
	u64 size;
	int ret;

	if (args->pad || args->flags & ~(RBLN_BO_READ_ONLY | RBLN_BO_NO_VA))
		return -EINVAL;
	if (args->placement != RBLN_BO_DEVICE && args->placement != RBLN_BO_HOST)
		return -EINVAL;
	if (!args->size || check_add_overflow(args->size, (u64)PAGE_SIZE - 1, &size))
		return -EINVAL;
	size = round_down(size, PAGE_SIZE);
	/* Never mappable, whatever the memory. */
	if (size > RBLN_VA_SIZE - PAGE_SIZE)
		return -EINVAL;

	if (args->placement == RBLN_BO_DEVICE) {
		bo = rbln_device_bo_create(rdev, size);
	} else {
		if (size >> PAGE_SHIFT > totalram_pages())
			return -ENOMEM;
		shmem = drm_gem_shmem_create(drm, size);
		bo = IS_ERR(shmem) ? ERR_CAST(shmem) : to_rbln_bo(&shmem->base);
	}
	if (IS_ERR(bo))
		return PTR_ERR(bo);
	bo->flags = args->flags;

	/* The handle maps the object into this file's address space. */
	ret = drm_gem_handle_create(file, &bo->base.base, &args->handle);
	if (!ret)
		ret = rbln_vm_va_of(to_rbln_file(file)->vm, bo, &args->va);
	drm_gem_object_put(&bo->base.base);
	if (ret)
		return ret;

	args->size = size;
	return 0;
}

static int rbln_handle_of(struct drm_file *file, struct drm_gem_object *obj, u32 *handle)
{
	struct drm_gem_object *o;
	int id, ret = -ENOENT;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, o, id) {
		if (o == obj) {
			*handle = id;
			ret = 0;
			break;
		}
	}
	spin_unlock(&file->table_lock);
	return ret;
}

int rbln_bo_info_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_vm *vm = to_rbln_file(file)->vm;
	struct drm_rbln_bo_info *args = data;
	struct drm_gem_object *obj;
	struct rbln_bo *bo;
	int ret;

	if (args->flags & ~RBLN_BO_INFO_BY_VA)
		return -EINVAL;

	if (args->flags & RBLN_BO_INFO_BY_VA) {
		bo = rbln_vm_bo_at(vm, args->va);
		if (!bo)
			return -ENOENT;
		obj = &bo->base.base;
		ret = rbln_handle_of(file, obj, &args->handle);
	} else {
		obj = drm_gem_object_lookup(file, args->handle);
		if (!obj)
			return -ENOENT;
		bo = to_rbln_bo(obj);
		ret = 0;
	}
	if (!ret)
		ret = rbln_vm_va_of(vm, bo, &args->va);
	if (ret)
		goto out;

	args->size = obj->size;
	args->placement = bo->placement;
	args->bo_flags = bo->flags;
	if (drm_gem_is_imported(obj))
		args->bo_flags |= RBLN_BO_IMPORTED;
	args->mmap_offset = 0;
	if (bo->placement == RBLN_BO_HOST) {
		ret = drm_gem_create_mmap_offset(obj);
		if (!ret)
			args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
	}
out:
	drm_gem_object_put(obj);
	return ret;
}

/* --- fdinfo ---------------------------------------------------------------- */

/* Adds @obj to the statistics of its region: stats[0] device, stats[1] host. */
static void rbln_gem_account(struct drm_memory_stats *stats, struct drm_gem_object *obj)
{
	struct drm_memory_stats *s = &stats[to_rbln_bo(obj)->placement == RBLN_BO_DEVICE ? 0 : 1];

	if (drm_gem_object_is_shared_for_memory_stats(obj))
		s->shared += obj->size;
	else
		s->private += obj->size;
	if (obj->funcs->status(obj) & DRM_GEM_OBJECT_RESIDENT)
		s->resident += obj->size;
	if (!dma_resv_test_signaled(obj->resv, dma_resv_usage_rw(true)))
		s->active += obj->size;
}

/**
 * rbln_gem_show_fdinfo() - the memory keys of a file's fdinfo
 * @p: where to print
 * @file: the file
 *
 * Per Documentation/gpu/drm-usage-stats.rst, with two regions: "device"
 * (device memory, including peers imported from other rbln devices) and
 * "host" (host memory the device can reach). The file's objects are those
 * it has handles to and those its VM_BIND mappings hold, each once: a
 * mapping keeps its object after the handle is closed, and so the memory.
 */
void rbln_gem_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct drm_memory_stats stats[2] = {};
	struct drm_gem_object **bound, *obj;
	unsigned int nbound, i;
	int id;

	bound = rbln_vm_bound_objects(to_rbln_file(file)->vm, &nbound);
	for (i = 0; i < nbound; i++)
		rbln_gem_account(stats, bound[i]);
	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		if (!rbln_vm_bound_includes(bound, nbound, obj))
			rbln_gem_account(stats, obj);
	}
	spin_unlock(&file->table_lock);
	rbln_vm_bound_put(bound, nbound);

	drm_print_memory_stats(p, &stats[0], DRM_GEM_OBJECT_RESIDENT, "device");
	drm_print_memory_stats(p, &stats[1], DRM_GEM_OBJECT_RESIDENT, "host");
}
