/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_drv.h - the rbln device, shared by the driver's units
 */
#ifndef __RBLN_DRV_H__
#define __RBLN_DRV_H__

#include <linux/bitmap.h>
#include <linux/gpu_buddy.h>
#include <linux/mutex.h>
#include <linux/xarray.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/gpu_scheduler.h>

#include "rbln_hw.h"
#include "rbln_mmu.h"

#define RBLN_DRIVER_NAME	"rbln"
#define RBLN_DRIVER_DESC	"rbln NPU"
#define RBLN_DRIVER_MAJOR	1
#define RBLN_DRIVER_MINOR	0

#define RBLN_MAX_RINGS		16
#define RBLN_MAX_QUEUES		1024	/* per file */

struct dma_fence;
struct dma_fence_chain;
struct drm_printer;
struct drm_rbln_sync;
struct drm_syncobj;
struct rbln_hw;
struct rbln_ring;

/**
 * struct rbln_device - one NPU
 * @drm: the DRM device; its parent is the bus device.
 * @hw: the hardware, reached only through rbln_hw.h. Valid while @drm is;
 *	touch it only inside drm_dev_enter()/drm_dev_exit().
 * @chip_id: RBLN_REG_CHIP_ID, read at probe.
 * @hw_rev: RBLN_REG_HW_REV, read at probe.
 * @index: RBLN_REG_DEV_INDEX, read at probe.
 * @emulated: RBLN_HW_CFG_EMULATED, read at probe.
 * @mem_size: device memory in bytes, read at probe.
 * @num_rings: RBLN_REG_NUM_RINGS, read at probe.
 * @isa_caps: RBLN_REG_ISA_CAPS, read at probe.
 * @max_cmd_size: RBLN_REG_MAX_CMD_SIZE, read at probe.
 * @serial: RBLN_REG_SERIAL, read at probe: the device's identity for peers.
 * @mem_lock: protects @mem.
 * @mem: allocator of device memory, [0, @mem_size).
 * @scrub_lock: the device has one scrubber, programmed by four register
 *	writes: one scrub, or a function reset that clears them, at a time.
 * @slow_scrub: debugfs's "slow_scrub" hook is armed.
 * @ctx_lock: protects @ctx_ids, @ctx_lru, every context's index and the
 *	entries of @ctx_table; taken by run_job, so never held long.
 * @ctx_ids: the context indices held; index 0 is never given. A bitmap,
 *	not an IDA: run_job takes indices and may not allocate memory.
 * @ctx_lru: contexts holding an index, by &rbln_vm.ctx_link, least
 *	recently woken first: where a job finds one to take (rbln_vm_pin()).
 * @ctx_used: indices held by contexts; sysfs reads it without the lock.
 * @ctx_steals: indices a job took from an idle context, since probe;
 *	sysfs reads it without the lock.
 * @ctx_table: the context table the device reads (rbln_hw.h); NULL once
 *	the device is unplugged (rbln_mmu_unplug()).
 * @ctx_table_dma: its DMA address.
 * @vms_lock: protects @vms, @ctx_table's going and every context's page
 *	tables going with it.
 * @vms: every context of the device, by &rbln_vm.link.
 * @inval_lock: serialises MMU invalidations (rbln_mmu_invalidate()).
 * @peer_lock: protects @peers and @peer_table.
 * @peers: what each slot of the peer table is used for.
 * @peer_table: the peer table the device reads (rbln_hw.h); NULL once
 *	the device is unplugged.
 * @peer_table_dma: its DMA address.
 * @link: in the list of rbln devices, for revoking peers (rbln_peer.c).
 * @dma_bos_lock: protects @dma_bos and @dma_gone.
 * @dma_bos: HOST objects mapped for the device (&rbln_bo.dma_link).
 * @dma_gone: the device is unplugged and its objects' mappings are gone
 *	(rbln_gem_unplug()): nothing maps for it any more.
 * @rings: the command rings.
 * @scheds: their schedulers, the list every queue's entity spreads over.
 * @reset_lock: one reset at a time, of a ring or of the function; the
 *	doorbell slow_signal defers (rbln_ring_slow_doorbell()) waits for it.
 * @reset_count: rings reset after a timeout.
 * @lost: it was found gone, or not answering (rbln_device_lost()).
 * @slow_signal: debugfs's "slow_signal" hook, rbln_job_slow_signal()'s state.
 * @slow_free: debugfs's "slow_free" hook is armed.
 * @slow_fault: debugfs's "slow_fault" hook is armed.
 * @bind_sched: runs every file's VM_BIND jobs, on the CPU; a list of one
 *	for the files' bind entities.
 *
 * Fields read at probe never change afterwards and need no lock.
 */
struct rbln_device {
	struct drm_device drm;
	struct rbln_hw *hw;
	u32 chip_id;
	u32 hw_rev;
	u32 index;
	bool emulated;
	u64 mem_size;
	u32 num_rings;
	u32 isa_caps;
	u32 max_cmd_size;
	u64 serial;

	struct mutex mem_lock; /* protects mem */
	struct gpu_buddy mem;
	struct mutex scrub_lock; /* the SCRUB registers; inside reset_lock */
	atomic_t slow_scrub;

	struct mutex ctx_lock; /* ctx_ids, ctx_lru, ids, entries; inside vms_lock */
	DECLARE_BITMAP(ctx_ids, RBLN_MAX_CONTEXTS);
	struct list_head ctx_lru;
	u32 ctx_used;
	u64 ctx_steals;
	u64 *ctx_table;
	dma_addr_t ctx_table_dma;
	struct mutex inval_lock; /* one MMU_INVALIDATE at a time; innermost */
	struct mutex vms_lock; /* protects vms, ctx_table going; before a vm's lock */
	struct list_head vms;

	struct mutex peer_lock; /* protects peers, peer_table; before inval_lock */
	struct rbln_peer_slot {
		u64 serial;
		unsigned int users;
	} peers[RBLN_MAX_PEERS];
	u64 *peer_table;
	dma_addr_t peer_table_dma;
	struct list_head link;

	struct mutex dma_bos_lock; /* protects dma_bos, dma_gone; before a bo's resv */
	struct list_head dma_bos;
	bool dma_gone;

	struct rbln_ring *rings;
	struct drm_gpu_scheduler **scheds;
	struct mutex reset_lock; /* serialises resets; outside inval_lock */
	atomic_t reset_count;
	atomic_t lost;
	atomic_t slow_signal;
	atomic_t slow_free;
	atomic_t slow_fault;

	struct drm_gpu_scheduler *bind_sched;
};

/**
 * struct rbln_file - what the driver keeps per open file
 * @vm: the file's context and address space; jobs hold it too.
 * @queues: the file's queues by id; the xarray's lock protects it.
 * @bind_entity: the file's VM_BIND jobs, in the order they were made.
 */
struct rbln_file {
	struct rbln_vm *vm;
	struct xarray queues;
	struct drm_sched_entity bind_entity;
};

/**
 * struct rbln_sync_signal - what a job signals, looked up before it is pushed
 * @syncobj: the syncobj, held; NULL for none.
 * @chain: for a timeline point, preallocated.
 * @point: the point, 0 for a binary syncobj.
 */
struct rbln_sync_signal {
	struct drm_syncobj *syncobj;
	struct dma_fence_chain *chain;
	u64 point;
};

static inline struct rbln_device *to_rbln_device(struct drm_device *drm)
{
	return container_of(drm, struct rbln_device, drm);
}

static inline struct rbln_file *to_rbln_file(struct drm_file *file)
{
	return file->driver_priv;
}

/* rbln_drv.c */
struct rbln_device *rbln_device_alloc(struct device *parent);
int rbln_device_init(struct rbln_device *rdev, struct rbln_hw *hw);
void rbln_device_unplug(struct rbln_device *rdev);
void rbln_device_lost(struct rbln_device *rdev, const char *why);
bool rbln_hw_wait(struct rbln_device *rdev, u32 reg);

/* A module parameter that takes a positive number. */
extern const struct kernel_param_ops rbln_positive_param_ops;

/* rbln_pci.c */
int rbln_pci_register(void);
void rbln_pci_unregister(void);

/*
 * The driver's own work, drained at module unload: what must not run where
 * fences wait (a finished job's release, rbln_free_job()), nor on the work
 * queue of what it tears down (a context's last reference, which may
 * release the device and its schedulers).
 */
extern struct workqueue_struct *rbln_wq;

/* rbln_devmem.c */
int rbln_devmem_init(struct rbln_device *rdev);
int rbln_devmem_alloc(struct rbln_device *rdev, u64 size, struct list_head *blocks);
void rbln_devmem_free(struct rbln_device *rdev, struct list_head *blocks);
int rbln_devmem_slow_scrub(struct rbln_device *rdev);
u64 rbln_devmem_used(struct rbln_device *rdev);

/* rbln_peer.c */
int rbln_peer_init(struct rbln_device *rdev);
void rbln_peer_program(struct rbln_device *rdev);
void rbln_peer_register(struct rbln_device *rdev);
void rbln_peer_unregister(struct rbln_device *rdev);
int rbln_peer_get(struct rbln_device *rdev, struct rbln_device *exporter);
void rbln_peer_put(struct rbln_device *rdev, int slot);
void rbln_peer_unplug(struct rbln_device *rdev);

/* rbln_job.c */
int rbln_job_init(struct rbln_device *rdev);
void rbln_job_exit(void);
void rbln_job_unplug(struct rbln_device *rdev);
int rbln_job_slow_signal(struct rbln_device *rdev);
int rbln_job_slow_fault(struct rbln_device *rdev);
int rbln_job_slow_free(struct rbln_device *rdev);
void rbln_job_slow_free_wait(struct rbln_device *rdev);
int rbln_vm_room_get(struct rbln_vm *vm, atomic_t *count);
void rbln_vm_room_put(struct rbln_vm *vm, atomic_t *count);
bool rbln_vm_jobs_wait(struct rbln_vm *vm, atomic_t *count);
void rbln_queues_destroy(struct rbln_file *rfile);
u64 rbln_ring_busy_ns(struct rbln_device *rdev);
void rbln_job_show_fdinfo(struct drm_printer *p, struct drm_file *file);
int rbln_queue_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_queue_destroy_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

/* rbln_sync.c */
int rbln_sync_add_waits(struct drm_sched_job *job, struct drm_file *file, u64 waits, u32 count);
int rbln_sync_signal_prepare(struct drm_file *file, const struct drm_rbln_sync *sync,
			     struct rbln_sync_signal *signal);
void rbln_sync_signal(struct rbln_sync_signal *signal, struct dma_fence *fence);
void rbln_sync_signal_abort(struct rbln_sync_signal *signal);

/* rbln_vm_bind.c */
int rbln_vm_bind_init(struct rbln_device *rdev);
int rbln_vm_bind_sm_step_unmap(struct drm_gpuva_op *op, void *priv);
int rbln_vm_bind_sm_step_remap(struct drm_gpuva_op *op, void *priv);
int rbln_vm_bind_open(struct rbln_file *rfile, struct rbln_device *rdev);
void rbln_vm_bind_close(struct rbln_file *rfile);
int rbln_vm_reserve_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_vm_release_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int rbln_vm_bind_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

/* rbln_sysfs.c */
extern const struct attribute_group *rbln_dev_groups[];

/* rbln_debugfs.c */
void rbln_debugfs_init(struct rbln_device *rdev);

#endif /* __RBLN_DRV_H__ */
