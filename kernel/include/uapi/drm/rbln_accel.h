/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln_accel.h - UAPI of the rbln DRM accel driver
 *
 * The one contract between rbln.ko and userspace. Rules that keep it
 * growable without breaking old binaries:
 *
 *  - every struct is made of fixed-size __u64/__u32 fields and its size is a
 *    multiple of 8 bytes;
 *  - padding and reserved fields must be zero, or the ioctl fails with
 *    -EINVAL;
 *  - unknown flags and unknown parameters fail with -EINVAL;
 *  - new fields are only ever appended; DRM zero-extends a short struct
 *    coming from an older binary, so zero must always mean "old behaviour".
 */
#ifndef _UAPI_RBLN_ACCEL_H_
#define _UAPI_RBLN_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/*
 * RBLN_ABI_VERSION - version of this interface
 *
 * Bumped when an ioctl or parameter is added; userspace reads the running
 * driver's value with RBLN_PARAM_ABI_VERSION to know what it may use.
 */
#define RBLN_ABI_VERSION		1

#define DRM_RBLN_GET_PARAM		0x00
#define DRM_RBLN_BO_CREATE		0x01
#define DRM_RBLN_BO_INFO		0x02

#define DRM_IOCTL_RBLN_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_GET_PARAM, struct drm_rbln_get_param)
#define DRM_IOCTL_RBLN_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_CREATE, struct drm_rbln_bo_create)
#define DRM_IOCTL_RBLN_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_INFO, struct drm_rbln_bo_info)

/**
 * enum drm_rbln_param - what DRM_IOCTL_RBLN_GET_PARAM can answer
 *
 * @RBLN_PARAM_ABI_VERSION: RBLN_ABI_VERSION of the running driver.
 * @RBLN_PARAM_DEVICE_ID: chip identifier read from the hardware
 *	(RBLN_CHIP_ID_* below).
 * @RBLN_PARAM_HW_REVISION: hardware revision, (major << 16) | minor.
 * @RBLN_PARAM_EMULATED: 1 when the device is the emulated NPU inside the
 *	module, 0 for silicon.
 * @RBLN_PARAM_DEVICE_MEMORY_SIZE: device memory capacity in bytes.
 * @RBLN_PARAM_DEVICE_INDEX: index of the device on its bus (the emulated
 *	device's id, or the PCI function for silicon); stable across
 *	reloads, unlike the accel minor.
 * @RBLN_PARAM_VA_START: first device virtual address a buffer object can be
 *	mapped at, in every file's address space.
 * @RBLN_PARAM_VA_SIZE: size of the device virtual address range.
 * @RBLN_PARAM_DEVICE_MEMORY_USED: device memory in use by all buffer
 *	objects of all files, in bytes.
 */
enum drm_rbln_param {
	RBLN_PARAM_ABI_VERSION		= 0,
	RBLN_PARAM_DEVICE_ID		= 1,
	RBLN_PARAM_HW_REVISION		= 2,
	RBLN_PARAM_EMULATED		= 3,
	RBLN_PARAM_DEVICE_MEMORY_SIZE	= 4,
	RBLN_PARAM_DEVICE_INDEX		= 5,
	RBLN_PARAM_VA_START		= 6,
	RBLN_PARAM_VA_SIZE		= 7,
	RBLN_PARAM_DEVICE_MEMORY_USED	= 8,
};

/* Values of RBLN_PARAM_DEVICE_ID. */
#define RBLN_CHIP_ID_EMULATED		0x0000e1a0

/**
 * struct drm_rbln_get_param - argument of DRM_IOCTL_RBLN_GET_PARAM
 *
 * @param: one of enum drm_rbln_param (in).
 * @pad: must be zero.
 * @value: the parameter's value (out).
 */
struct drm_rbln_get_param {
	__u32 param;
	__u32 pad;
	__u64 value;
};

/* Placement of a buffer object: where its memory is. */
#define RBLN_BO_DEVICE			1	/* device memory, not CPU-mappable */
#define RBLN_BO_HOST			2	/* host memory, mmap-able */

/* Flags of a buffer object. */
#define RBLN_BO_READ_ONLY		0x1	/* the device may not write it */
#define RBLN_BO_IMPORTED		0x2	/* out only: from a dma-buf */

/**
 * struct drm_rbln_bo_create - argument of DRM_IOCTL_RBLN_BO_CREATE
 *
 * Creates a buffer object and maps it into the calling file's device address
 * space. Release it with DRM_IOCTL_GEM_CLOSE.
 *
 * @size: bytes wanted (in); rounded up to the page size (out). Zero, or a
 *	size that overflows when rounded or exceeds the address space:
 *	-EINVAL. More than the free device memory: -ENOSPC; more host memory
 *	than the machine has: -ENOMEM.
 * @placement: RBLN_BO_DEVICE or RBLN_BO_HOST (in).
 * @flags: RBLN_BO_READ_ONLY or 0 (in).
 * @handle: the new object's handle (out).
 * @pad: must be zero.
 * @va: device virtual address of the object in this file's space (out).
 */
struct drm_rbln_bo_create {
	__u64 size;
	__u32 placement;
	__u32 flags;
	__u32 handle;
	__u32 pad;
	__u64 va;
};

/* struct drm_rbln_bo_info.flags */
#define RBLN_BO_INFO_BY_VA		0x1	/* look up by @va, not @handle */

/**
 * struct drm_rbln_bo_info - argument of DRM_IOCTL_RBLN_BO_INFO
 *
 * Describes a buffer object of the calling file, found by handle or, with
 * RBLN_BO_INFO_BY_VA, by any device address inside it. Unknown handle or an
 * address no object of this file covers: -ENOENT.
 *
 * @handle: the object (in); with RBLN_BO_INFO_BY_VA, its handle (out).
 * @flags: RBLN_BO_INFO_BY_VA or 0 (in).
 * @va: start of the object in this file's address space (out); with
 *	RBLN_BO_INFO_BY_VA, an address to look up (in).
 * @size: size in bytes (out).
 * @mmap_offset: offset to mmap() the object at on this file, HOST objects
 *	only; 0 for DEVICE objects, which the CPU cannot map (out).
 * @placement: RBLN_BO_DEVICE or RBLN_BO_HOST (out).
 * @bo_flags: RBLN_BO_READ_ONLY, RBLN_BO_IMPORTED (out).
 */
struct drm_rbln_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 va;
	__u64 size;
	__u64 mmap_offset;
	__u32 placement;
	__u32 bo_flags;
};

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ACCEL_H_ */
