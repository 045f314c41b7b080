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
#define RBLN_ABI_VERSION		3

#define DRM_RBLN_GET_PARAM		0x00
#define DRM_RBLN_BO_CREATE		0x01
#define DRM_RBLN_BO_INFO		0x02
#define DRM_RBLN_QUEUE_CREATE		0x03
#define DRM_RBLN_QUEUE_DESTROY		0x04
#define DRM_RBLN_SUBMIT			0x05
#define DRM_RBLN_VM_RESERVE		0x06
#define DRM_RBLN_VM_RELEASE		0x07
#define DRM_RBLN_VM_BIND		0x08

#define DRM_IOCTL_RBLN_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_GET_PARAM, struct drm_rbln_get_param)
#define DRM_IOCTL_RBLN_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_CREATE, struct drm_rbln_bo_create)
#define DRM_IOCTL_RBLN_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_BO_INFO, struct drm_rbln_bo_info)
#define DRM_IOCTL_RBLN_QUEUE_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_QUEUE_CREATE, struct drm_rbln_queue_create)
#define DRM_IOCTL_RBLN_QUEUE_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_RBLN_QUEUE_DESTROY, struct drm_rbln_queue_destroy)
#define DRM_IOCTL_RBLN_SUBMIT \
	DRM_IOW(DRM_COMMAND_BASE + DRM_RBLN_SUBMIT, struct drm_rbln_submit)
#define DRM_IOCTL_RBLN_VM_RESERVE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_VM_RESERVE, struct drm_rbln_vm_reserve)
#define DRM_IOCTL_RBLN_VM_RELEASE \
	DRM_IOW(DRM_COMMAND_BASE + DRM_RBLN_VM_RELEASE, struct drm_rbln_vm_release)
#define DRM_IOCTL_RBLN_VM_BIND \
	DRM_IOW(DRM_COMMAND_BASE + DRM_RBLN_VM_BIND, struct drm_rbln_vm_bind)

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
 *	given at creation or import, in every file's address space.
 * @RBLN_PARAM_VA_SIZE: size of that range.
 * @RBLN_PARAM_DEVICE_MEMORY_USED: device memory in use by all buffer
 *	objects of all files, in bytes.
 * @RBLN_PARAM_NUM_RINGS: hardware command rings; queues are spread on them.
 * @RBLN_PARAM_ISA_CAPS: RBLN_ISA_CAP_* the device executes.
 * @RBLN_PARAM_MAX_CMD_SIZE: largest command buffer SUBMIT accepts, bytes.
 * @RBLN_PARAM_RESET_COUNT: rings reset after a job timed out, since load.
 * @RBLN_PARAM_FAILED_JOBS: jobs submitted through the calling file that
 *	ended with an error (fault, timeout, cancel, unplug), counted before
 *	their fences signal: a wait that returns sees the count of the job it
 *	waited for, so one query tells whether any fence needs a closer look.
 *	Jobs that a queue destroyed before they ran drops (their fences fail
 *	with -ESRCH) are not counted: the file's owner ended them.
 *	Since ABI version 2.
 * @RBLN_PARAM_VM_BIND_START: first address of the range that
 *	DRM_IOCTL_RBLN_VM_RESERVE hands out, apart from the range above.
 *	Since ABI version 3.
 * @RBLN_PARAM_VM_BIND_SIZE: size of that range. Since ABI version 3.
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
	RBLN_PARAM_NUM_RINGS		= 9,
	RBLN_PARAM_ISA_CAPS		= 10,
	RBLN_PARAM_MAX_CMD_SIZE		= 11,
	RBLN_PARAM_RESET_COUNT		= 12,
	RBLN_PARAM_FAILED_JOBS		= 13,
	RBLN_PARAM_VM_BIND_START	= 14,
	RBLN_PARAM_VM_BIND_SIZE		= 15,
};

/* RBLN_PARAM_ISA_CAPS: opcode groups and dtypes (rbln_isa.h). */
#define RBLN_ISA_CAP_DMA		0x1	/* NOP, DMA_COPY, DMA_FILL */
#define RBLN_ISA_CAP_ELEMENTWISE	0x2	/* EW_UNARY, EW_BINARY, EW_SCALAR, CAST */
#define RBLN_ISA_CAP_REDUCE		0x4
#define RBLN_ISA_CAP_GEMM		0x8
#define RBLN_ISA_CAP_WAIT		0x10	/* WAIT */
#define RBLN_ISA_CAP_DTYPE(dtype)	(0x100u << (dtype))

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
#define RBLN_BO_NO_VA			0x4	/* placed only by DRM_IOCTL_RBLN_VM_BIND */

/**
 * struct drm_rbln_bo_create - argument of DRM_IOCTL_RBLN_BO_CREATE
 *
 * Creates a buffer object and maps it into the calling file's device address
 * space, unless RBLN_BO_NO_VA: such an object, like memory from
 * cuMemCreate(), has no address until DRM_IOCTL_RBLN_VM_BIND gives it one
 * (in any file it reaches), and SUBMIT cannot list it. Release it with
 * DRM_IOCTL_GEM_CLOSE.
 *
 * @size: bytes wanted (in); rounded up to the page size (out). Zero, or a
 *	size that overflows when rounded or exceeds the address space:
 *	-EINVAL. More than the free device memory: -ENOSPC; more host memory
 *	than the machine has: -ENOMEM.
 * @placement: RBLN_BO_DEVICE or RBLN_BO_HOST (in).
 * @flags: RBLN_BO_READ_ONLY, RBLN_BO_NO_VA or 0 (in).
 * @handle: the new object's handle (out).
 * @pad: must be zero.
 * @va: device virtual address of the object in this file's space, 0 for
 *	RBLN_BO_NO_VA (out).
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
 * @bo_flags: RBLN_BO_READ_ONLY, RBLN_BO_IMPORTED, RBLN_BO_NO_VA (out).
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

/* struct drm_rbln_queue_create.priority */
#define RBLN_QUEUE_PRIORITY_LOW		0
#define RBLN_QUEUE_PRIORITY_NORMAL	1
#define RBLN_QUEUE_PRIORITY_HIGH	2	/* needs CAP_SYS_NICE */

/**
 * struct drm_rbln_queue_create - argument of DRM_IOCTL_RBLN_QUEUE_CREATE
 *
 * A queue runs its jobs in submission order; jobs of different queues run
 * concurrently on the device's rings, a higher priority first.
 *
 * @priority: RBLN_QUEUE_PRIORITY_* (in).
 * @queue_id: the new queue (out).
 */
struct drm_rbln_queue_create {
	__u32 priority;
	__u32 queue_id;
};

/**
 * struct drm_rbln_queue_destroy - argument of DRM_IOCTL_RBLN_QUEUE_DESTROY
 *
 * Jobs already submitted still run; their fences signal.
 *
 * @queue_id: the queue.
 * @pad: must be zero.
 */
struct drm_rbln_queue_destroy {
	__u32 queue_id;
	__u32 pad;
};

/**
 * struct drm_rbln_sync - a syncobj and, for a timeline, a point on it
 * @handle: syncobj handle.
 * @pad: must be zero.
 * @point: timeline point, or 0 for a binary syncobj.
 */
struct drm_rbln_sync {
	__u32 handle;
	__u32 pad;
	__u64 point;
};

#define RBLN_SUBMIT_MAX_BOS		4096
#define RBLN_SUBMIT_MAX_WAITS		64

/**
 * struct drm_rbln_submit - argument of DRM_IOCTL_RBLN_SUBMIT
 *
 * Queues a job: once every wait is signaled, the command buffer at @cmd_va
 * runs in this file's address space. The job holds the listed objects until
 * it retires; host objects must be listed for the device to reach them.
 * Its completion, with an error if it failed (-EFAULT for a fault,
 * -ETIMEDOUT after a hang, -ENODEV after removal), is signaled on @signal.
 *
 * A file has at most the rbln module's max_jobs parameter of jobs not yet
 * retired, on all its queues; a submission beyond waits, interruptibly,
 * until half of them have retired. A file's first submission gives it one
 * of the device's hardware contexts, which it keeps until it is closed:
 * -ENOSPC when every one is held by another file.
 *
 * @queue_id: the queue.
 * @flags: must be zero.
 * @cmd_va: command buffer address, 8-byte aligned.
 * @cmd_size: its size: a multiple of 8, at most RBLN_PARAM_MAX_CMD_SIZE.
 * @bo_count: entries of @bo_handles, at most RBLN_SUBMIT_MAX_BOS.
 * @bo_handles: user pointer to __u32 handles.
 * @wait_count: entries of @waits, at most RBLN_SUBMIT_MAX_WAITS.
 * @pad: must be zero.
 * @waits: user pointer to struct drm_rbln_sync.
 * @signal: syncobj (and point) to signal; handle 0 for none.
 */
struct drm_rbln_submit {
	__u32 queue_id;
	__u32 flags;
	__u64 cmd_va;
	__u32 cmd_size;
	__u32 bo_count;
	__u64 bo_handles;
	__u32 wait_count;
	__u32 pad;
	__u64 waits;
	struct drm_rbln_sync signal;
};

/*
 * VM_BIND: user-placed mappings, as on nouveau, xe and panthor. A file
 * reserves ranges of its address space, then binds buffer objects, or
 * ranges of them, at addresses it chooses inside them, and unbinds any
 * range. Binds and unbinds run in the order they are made, once their
 * waits are signaled; an unbind also waits for every job the file
 * submitted before it, and completes only when the device can no longer
 * reach the range. A job that touches a range before its bind completes,
 * or after its unbind does, faults. Addresses, offsets and sizes are
 * multiples of the page size (4 KiB).
 */

/**
 * struct drm_rbln_vm_reserve - argument of DRM_IOCTL_RBLN_VM_RESERVE
 *
 * Reserves a range of the calling file's address space inside
 * [RBLN_PARAM_VM_BIND_START, + RBLN_PARAM_VM_BIND_SIZE), for
 * DRM_IOCTL_RBLN_VM_BIND. Nothing is mapped there yet.
 *
 * @size: bytes, a non-zero multiple of the page size (in). No room: -ENOSPC.
 * @align: alignment of the range: 0 for the page size, else a power of two
 *	of at least the page size (in).
 * @va: start of the range (out).
 * @flags: must be zero.
 * @pad: must be zero.
 */
struct drm_rbln_vm_reserve {
	__u64 size;
	__u64 align;
	__u64 va;
	__u32 flags;
	__u32 pad;
};

/**
 * struct drm_rbln_vm_release - argument of DRM_IOCTL_RBLN_VM_RELEASE
 *
 * Gives a reserved range back. -ENOENT when no reservation starts at @va;
 * -EBUSY while anything is bound inside it (unbind first). The range may
 * be reserved again at once: binds there take effect after the unbinds
 * made before them, and until those complete, the file's jobs may still
 * reach what they unmap.
 *
 * @va: start of the reservation.
 */
struct drm_rbln_vm_release {
	__u64 va;
};

/* struct drm_rbln_vm_bind.op */
#define RBLN_VM_BIND_MAP		1
#define RBLN_VM_BIND_UNMAP		2

/* struct drm_rbln_vm_bind.flags */
#define RBLN_VM_BIND_READ_ONLY		0x1	/* MAP: the device may not write */

/**
 * struct drm_rbln_vm_bind - argument of DRM_IOCTL_RBLN_VM_BIND
 *
 * RBLN_VM_BIND_MAP maps [@bo_offset, + @size) of the object @handle at
 * [@va, + @size), which must lie inside one reservation and overlap no
 * other mapping (-EEXIST). A range outside every reservation: -ENOENT; past
 * the object's end, misaligned or empty: -EINVAL. The mapping holds the
 * object: closing the handle does not unmap it.
 *
 * RBLN_VM_BIND_UNMAP unmaps whatever is mapped in [@va, + @size), inside
 * one reservation, splitting mappings that straddle its ends; -ENOENT when
 * nothing is mapped there (a second unbind of the same range). @handle and
 * @bo_offset must be zero.
 *
 * The change is made once every wait is signaled and, for an unbind, every
 * job submitted before it has ended; completion is signaled on @signal.
 *
 * @op: RBLN_VM_BIND_MAP or RBLN_VM_BIND_UNMAP.
 * @flags: RBLN_VM_BIND_READ_ONLY (MAP only) or 0.
 * @va: start of the range in the file's address space.
 * @size: its size.
 * @bo_offset: MAP: offset of the range in the object.
 * @handle: MAP: the object.
 * @wait_count: entries of @waits, at most RBLN_SUBMIT_MAX_WAITS.
 * @waits: user pointer to struct drm_rbln_sync.
 * @signal: syncobj (and point) to signal; handle 0 for none.
 */
struct drm_rbln_vm_bind {
	__u32 op;
	__u32 flags;
	__u64 va;
	__u64 size;
	__u64 bo_offset;
	__u32 handle;
	__u32 wait_count;
	__u64 waits;
	struct drm_rbln_sync signal;
};

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ACCEL_H_ */
