/* SPDX-License-Identifier: MIT */
/*
 * rbln_drm.h - libdrm_rbln: one C function per rbln ioctl
 *
 * A thin layer over the rbln DRM accel UAPI (rbln_accel.h) in the style of
 * libdrm_amdgpu: opaque handles, no policy, and every function returns 0 or
 * a negative errno. Thread-safe: a device handle is immutable once opened.
 */
#ifndef RBLN_DRM_H
#define RBLN_DRM_H

#include <stdint.h>

#include "rbln_accel.h"
#include "rbln_isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open rbln accel node. */
struct rbln_drm_device;

/*
 * rbln_drm_enumerate - list the accel minors driven by rbln
 *
 * Writes up to @max minors, in increasing order, to @minors (which may be
 * NULL when @max is 0). Returns how many rbln nodes exist, which may be more
 * than @max, or a negative errno. No accel class or no device: 0.
 */
int rbln_drm_enumerate(unsigned int *minors, unsigned int max);

/*
 * rbln_drm_open - open /dev/accel/accel<minor>
 *
 * Fails with -ENODEV when the node is not driven by rbln.
 */
int rbln_drm_open(unsigned int minor, struct rbln_drm_device **dev);

/*
 * rbln_drm_open_fd - wrap an already open accel node
 *
 * @fd is duplicated: the caller keeps and closes its own descriptor.
 */
int rbln_drm_open_fd(int fd, struct rbln_drm_device **dev);

/* rbln_drm_close - close a device; NULL is a no-op. */
void rbln_drm_close(struct rbln_drm_device *dev);

/* rbln_drm_fd - the device's file descriptor, for the core DRM ioctls */
int rbln_drm_fd(const struct rbln_drm_device *dev);

/* rbln_drm_minor - the device's accel minor */
unsigned int rbln_drm_minor(const struct rbln_drm_device *dev);

/*
 * rbln_drm_get_param - DRM_IOCTL_RBLN_GET_PARAM
 *
 * @param is one of enum drm_rbln_param. -EINVAL for an unknown one.
 */
int rbln_drm_get_param(struct rbln_drm_device *dev, uint32_t param,
		       uint64_t *value);

/* What DRM_IOCTL_RBLN_BO_INFO says of a buffer object. */
struct rbln_drm_bo_info {
	uint32_t handle;
	uint32_t placement;	/* RBLN_BO_DEVICE or RBLN_BO_HOST */
	uint32_t flags;		/* RBLN_BO_READ_ONLY, RBLN_BO_IMPORTED, RBLN_BO_NO_VA */
	uint64_t va;		/* device address in this file's space; 0 for RBLN_BO_NO_VA */
	uint64_t size;		/* bytes, page-aligned */
	uint64_t mmap_offset;	/* HOST only; 0 for DEVICE */
};

/*
 * rbln_drm_bo_create - DRM_IOCTL_RBLN_BO_CREATE
 *
 * Creates a buffer object of at least @size bytes in @placement
 * (RBLN_BO_DEVICE or RBLN_BO_HOST) with @flags (RBLN_BO_READ_ONLY or 0),
 * mapped into this device file's address space. @va may be NULL.
 */
int rbln_drm_bo_create(struct rbln_drm_device *dev, uint64_t size,
		       uint32_t placement, uint32_t flags, uint32_t *handle,
		       uint64_t *va);

/* rbln_drm_bo_info - DRM_IOCTL_RBLN_BO_INFO by handle */
int rbln_drm_bo_info(struct rbln_drm_device *dev, uint32_t handle,
		     struct rbln_drm_bo_info *info);

/*
 * rbln_drm_bo_info_by_va - DRM_IOCTL_RBLN_BO_INFO with RBLN_BO_INFO_BY_VA
 *
 * The object of this file that covers the device address @va.
 */
int rbln_drm_bo_info_by_va(struct rbln_drm_device *dev, uint64_t va,
			   struct rbln_drm_bo_info *info);

/* rbln_drm_bo_close - DRM_IOCTL_GEM_CLOSE: drop this file's handle */
int rbln_drm_bo_close(struct rbln_drm_device *dev, uint32_t handle);

/*
 * rbln_drm_bo_export - DRM_IOCTL_PRIME_HANDLE_TO_FD
 *
 * A dma-buf file descriptor (close-on-exec, read-write) for the object.
 */
int rbln_drm_bo_export(struct rbln_drm_device *dev, uint32_t handle, int *fd);

/*
 * rbln_drm_bo_import - DRM_IOCTL_PRIME_FD_TO_HANDLE
 *
 * A handle for the dma-buf @fd, mapped into this file's address space: an
 * object of this or another rbln device, or a foreign buffer (udmabuf,
 * dma-heap), which becomes a HOST object.
 */
int rbln_drm_bo_import(struct rbln_drm_device *dev, int fd, uint32_t *handle);

/*
 * rbln_drm_bo_mmap - map a HOST object into the caller's memory
 *
 * Maps the whole object shared with @prot (PROT_READ, PROT_WRITE); unmap
 * with munmap(*ptr, info.size). DEVICE objects: -ENODEV.
 */
int rbln_drm_bo_mmap(struct rbln_drm_device *dev, uint32_t handle, int prot,
		     void **ptr, uint64_t *size);

/*
 * rbln_drm_queue_create - DRM_IOCTL_RBLN_QUEUE_CREATE
 *
 * @priority is RBLN_QUEUE_PRIORITY_LOW, _NORMAL or _HIGH (which needs
 * CAP_SYS_NICE).
 */
int rbln_drm_queue_create(struct rbln_drm_device *dev, uint32_t priority,
			  uint32_t *queue_id);

/* rbln_drm_queue_destroy - DRM_IOCTL_RBLN_QUEUE_DESTROY */
int rbln_drm_queue_destroy(struct rbln_drm_device *dev, uint32_t queue_id);

/*
 * rbln_drm_submit - DRM_IOCTL_RBLN_SUBMIT
 *
 * Runs the command buffer at @cmd_va (@cmd_size bytes) on @queue_id once
 * every wait is signaled, holding the @bo_count objects of @bos, and
 * signals @signal (may be NULL) when it is done. Wait with libdrm's
 * drmSyncobjWait()/drmSyncobjTimelineWait() on rbln_drm_fd(dev); the
 * outcome is rbln_drm_fence_status().
 */
int rbln_drm_submit(struct rbln_drm_device *dev, uint32_t queue_id,
		    uint64_t cmd_va, uint32_t cmd_size,
		    const uint32_t *bos, uint32_t bo_count,
		    const struct drm_rbln_sync *waits, uint32_t wait_count,
		    const struct drm_rbln_sync *signal);

/*
 * rbln_drm_vm_reserve - DRM_IOCTL_RBLN_VM_RESERVE
 *
 * Reserves @size bytes of the file's address space, aligned to @align (0:
 * the page size), for rbln_drm_vm_map(); the start goes to @va.
 */
int rbln_drm_vm_reserve(struct rbln_drm_device *dev, uint64_t size, uint64_t align,
			uint64_t *va);

/* rbln_drm_vm_release - DRM_IOCTL_RBLN_VM_RELEASE: gives back the range reserved at @va. */
int rbln_drm_vm_release(struct rbln_drm_device *dev, uint64_t va);

/*
 * rbln_drm_vm_map - DRM_IOCTL_RBLN_VM_BIND, RBLN_VM_BIND_MAP
 *
 * Maps [@bo_offset, + @size) of object @handle at @va, inside a
 * reservation, once every wait is signaled; signals @signal (may be NULL)
 * when the mapping is in place. @flags: RBLN_VM_BIND_READ_ONLY or 0.
 */
int rbln_drm_vm_map(struct rbln_drm_device *dev, uint64_t va, uint64_t size,
		    uint32_t handle, uint64_t bo_offset, uint32_t flags,
		    const struct drm_rbln_sync *waits, uint32_t wait_count,
		    const struct drm_rbln_sync *signal);

/*
 * rbln_drm_vm_unmap - DRM_IOCTL_RBLN_VM_BIND, RBLN_VM_BIND_UNMAP
 *
 * Unmaps whatever is mapped in [@va, + @size) once every wait is signaled
 * and every job submitted before has ended; signals @signal (may be NULL)
 * when the device can no longer reach the range.
 */
int rbln_drm_vm_unmap(struct rbln_drm_device *dev, uint64_t va, uint64_t size,
		      const struct drm_rbln_sync *waits, uint32_t wait_count,
		      const struct drm_rbln_sync *signal);

/*
 * rbln_drm_fence_status - how the fence at @point of syncobj @handle ended
 *
 * Returns 1 when it signaled without error, 0 while it is pending, or the
 * job's negative errno (-EFAULT: fault, -ETIMEDOUT: hang, -ECANCELED:
 * context banned, -ENODEV: device removed). Other negative errnos are
 * errors of the query itself.
 */
int rbln_drm_fence_status(struct rbln_drm_device *dev, uint32_t handle,
			  uint64_t point, int *status);

/*
 * The command encoder: packets of rbln_isa.h written into a caller's
 * buffer, typically a mapped HOST object. Each rbln_drm_cmd_*() appends one
 * packet and returns 0, -ENOSPC when the buffer is full (nothing written)
 * or -EINVAL for an operation or dtype the ISA does not have.
 */
struct rbln_drm_cmd {
	void *buf;
	uint32_t cap;	/* bytes */
	uint32_t len;	/* bytes written */
};

void rbln_drm_cmd_init(struct rbln_drm_cmd *cmd, void *buf, uint32_t cap);
int rbln_drm_cmd_nop(struct rbln_drm_cmd *cmd);
int rbln_drm_cmd_dma_copy(struct rbln_drm_cmd *cmd, uint64_t dst, uint64_t src,
			  uint64_t bytes);
int rbln_drm_cmd_dma_fill(struct rbln_drm_cmd *cmd, uint64_t dst, uint32_t pattern,
			  uint64_t bytes);
int rbln_drm_cmd_wait(struct rbln_drm_cmd *cmd, uint64_t addr, uint64_t value);
int rbln_drm_cmd_unary(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
		       uint64_t dst, uint64_t src, uint64_t count);
int rbln_drm_cmd_binary(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t a, uint64_t b, uint64_t count);
int rbln_drm_cmd_scalar(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t src, uint32_t scalar, uint64_t count);
int rbln_drm_cmd_cast(struct rbln_drm_cmd *cmd, uint32_t dst_dtype, uint32_t src_dtype,
		      uint64_t dst, uint64_t src, uint64_t count);
int rbln_drm_cmd_reduce(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t src, uint32_t rows, uint32_t cols);

/* C (m x n, @out dtype) = A (m x k) B (k x n) in @in dtype; RBLN_GEMM_* flags. */
struct rbln_drm_gemm {
	uint32_t in, out, flags;
	uint64_t a, b, c;
	uint32_t m, n, k, lda, ldb, ldc;
};

int rbln_drm_cmd_gemm(struct rbln_drm_cmd *cmd, const struct rbln_drm_gemm *gemm);

#ifdef __cplusplus
}
#endif

#endif /* RBLN_DRM_H */
