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

#ifdef __cplusplus
}
#endif

#endif /* RBLN_DRM_H */
