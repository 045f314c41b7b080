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

#define DRM_IOCTL_RBLN_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_GET_PARAM, struct drm_rbln_get_param)

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
 */
enum drm_rbln_param {
	RBLN_PARAM_ABI_VERSION		= 0,
	RBLN_PARAM_DEVICE_ID		= 1,
	RBLN_PARAM_HW_REVISION		= 2,
	RBLN_PARAM_EMULATED		= 3,
	RBLN_PARAM_DEVICE_MEMORY_SIZE	= 4,
	RBLN_PARAM_DEVICE_INDEX		= 5,
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

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ACCEL_H_ */
