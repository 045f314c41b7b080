/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_emu_internal.h - the emulated NPU's own state, shared by its units
 *
 * The NPU lives in two homes built from these same units: inside rbln.ko,
 * on the rbln_emu bus (rbln_emu.c), and in rbln-npu-model, a process that
 * presents it as a PCI function over vfio-user (tools/rbln-npu-model/). A
 * home owns a struct rbln_emu_dev, forwards register accesses to
 * rbln_emu_reg_read()/rbln_emu_reg_write() and provides the few functions
 * declared at the end, which is all the NPU knows of where it runs. The
 * driver sees neither: only rbln_hw.h.
 */
#ifndef __RBLN_EMU_INTERNAL_H__
#define __RBLN_EMU_INTERNAL_H__

#include "rbln_emu_port.h"
#include "../rbln_hw.h"

#define RBLN_EMU_NUM_RINGS	4
#define RBLN_EMU_FAULT_VECTOR	RBLN_EMU_NUM_RINGS	/* interrupt vector of faults */
#define RBLN_EMU_MAX_CMD_SIZE	(256 * 1024)

/* What executing a command buffer ended with, besides RBLN_FAULT_*. */
#define RBLN_EMU_DONE		0
#define RBLN_EMU_ABORTED	(-1)	/* reset or removed: no fence */
#define RBLN_EMU_NOT_IN_PLACE	(-2)	/* rbln_emu_map(): copy instead */
#define RBLN_EMU_CANCELED	(-3)	/* WAIT canceled: skip the rest, no fault */

struct rbln_emu_dev;

/**
 * struct rbln_emu_ring - one command ring and its command processor
 * @edev: the device.
 * @index: ring number.
 * @work: the command processor, on the device's workqueue.
 * @wq: woken on reset, acknowledged fault and removal.
 * @access: odd while the command processor accesses memory through a
 *	translation; counts accesses (rbln_emu_invalidate_busy()).
 * @inval_snap: @access when MMU_INVALIDATE was last written.
 * @irq_held: entries completed since the ring's last interrupt (interrupt
 *	moderation). Only the command processor touches it and @irq_last.
 * @irq_last: ktime_get_ns() of the ring's last interrupt.
 * @lock: protects the register state below.
 * @base: RING_BASE, DMA address of the entries.
 * @fence: RING_FENCE, DMA address of the fence slot.
 * @head: RING_HEAD.
 * @tail: RING_TAIL.
 * @enabled: RING_ENABLE.
 * @reset: RING_RESET: a reset is asked for and not done. Read without
 *	the lock by the command processor's checks.
 * @power_on: the reset asked for is a function reset: it also clears the
 *	ring's registers.
 * @fault_info: RING_FAULT_INFO, RBLN_FAULT_VALID while unacknowledged.
 * @fault_addr: RING_FAULT_ADDR.
 * @fault_seqno: RING_FAULT_SEQNO.
 * @busy_ns: RING_BUSY_NS.
 * @wait_seen: RING_WAIT_SEEN (rbln_emu_ring_wait_seen()).
 * @buf: scratch buffers of the command processor, RBLN_EMU_BUF_BYTES each.
 * @cmd_buf: where command buffers are fetched, RBLN_EMU_MAX_CMD_SIZE.
 */
struct rbln_emu_ring {
	struct rbln_emu_dev *edev;
	unsigned int index;
	struct work_struct work;
	wait_queue_head_t wq;
	atomic_t access;
	int inval_snap;
	unsigned int irq_held;
	u64 irq_last;

	spinlock_t lock; /* protects the registers */
	u64 base;
	u64 fence;
	u32 head;
	u32 tail;
	bool enabled;
	bool reset;
	bool power_on;
	u32 fault_info;
	u64 fault_addr;
	u64 fault_seqno;
	u64 busy_ns;
	u32 wait_seen;

	void *buf[3];
	void *cmd_buf;
};

#define RBLN_EMU_BUF_BYTES	(16 * 1024)
/*
 * Interrupt moderation while the ring is busy: the interrupt is raised
 * after this many entries, or once this long has passed since the last
 * one, whichever comes first; and always when the ring drains.
 */
#define RBLN_EMU_IRQ_BATCH	16
#define RBLN_EMU_IRQ_DELAY_NS	(50 * NSEC_PER_USEC)

/**
 * struct rbln_emu_dev - one emulated NPU
 * @index: DEV_INDEX, its ID on its bus.
 * @mem_size: device memory capacity, bytes; fixed at creation.
 * @present: false once removed: registers read as RBLN_REG_DEAD. By
 *	then no access is in flight and none starts.
 * @stopping: set first on removal: accesses refuse to start.
 * @serial: SERIAL register, never given to another device.
 * @scratch: the scratch register.
 * @ctx_table: CTX_TABLE register.
 * @peer_table: PEER_TABLE register.
 * @scrub_lock: the scrubber is one engine: protects @scrub_addr and
 *	@scrub_size, and is held while it scrubs. A mutex: a scrub runs in
 *	the thread that writes SCRUB_SIZE_HI, and lets the CPU go on the way.
 * @scrub_addr: SCRUB_ADDR register.
 * @scrub_size: SCRUB_SIZE register.
 * @inject: pending RBLN_INJECT_* test hooks.
 * @deaf: RBLN_INJECT_DEAF: MMU_INVALIDATE and FUNC_RESET read busy until
 *	the bus resets the function (rbln_emu_bus_reset()).
 * @irq_status: IRQ_STATUS register.
 * @irq_mask: IRQ_MASK register.
 * @dram: device memory pages by page number, allocated on first write.
 * @wq: runs the command processors, one work item per ring.
 * @rings: the command rings.
 */
struct rbln_emu_dev {
	u32 index;
	u64 mem_size;
	bool present;
	bool stopping;
	u64 serial;
	u32 scratch;
	u64 ctx_table;
	u64 peer_table;
	struct mutex scrub_lock; /* protects scrub_addr, scrub_size, the scrubbing */
	u64 scrub_addr;
	u64 scrub_size;
	atomic_t inject;
	bool deaf;
	atomic_t irq_status;
	atomic_t irq_mask;
	struct xarray dram;
	struct workqueue_struct *wq;
	struct rbln_emu_ring rings[RBLN_EMU_NUM_RINGS];
};

/* rbln_emu_dev.c: registers and lifetime */
int rbln_emu_dev_init(struct rbln_emu_dev *edev, u32 index, u64 mem_size, u64 serial);
void rbln_emu_dev_stop(struct rbln_emu_dev *edev);
void rbln_emu_dev_fini(struct rbln_emu_dev *edev);
u32 rbln_emu_reg_read(struct rbln_emu_dev *edev, u32 reg);
void rbln_emu_reg_write(struct rbln_emu_dev *edev, u32 reg, u32 val);
void rbln_emu_raise_irq(struct rbln_emu_dev *edev, unsigned int ring, bool fault);
void rbln_emu_quiesce(struct rbln_emu_dev *edev);
void rbln_emu_bus_reset(struct rbln_emu_dev *edev);

/* rbln_emu_cp.c */
int rbln_emu_cp_init(struct rbln_emu_dev *edev);
void rbln_emu_cp_stop(struct rbln_emu_dev *edev);
void rbln_emu_cp_fini(struct rbln_emu_dev *edev);
u32 rbln_emu_ring_read(struct rbln_emu_ring *ring, u32 off);
void rbln_emu_ring_write(struct rbln_emu_ring *ring, u32 off, u32 val);
void rbln_emu_ring_power_on(struct rbln_emu_ring *ring);
bool rbln_emu_ring_stopped(struct rbln_emu_ring *ring);
void rbln_emu_ring_flush_irq(struct rbln_emu_ring *ring);
void rbln_emu_ring_wait_seen(struct rbln_emu_ring *ring);

/* rbln_emu_mem.c: the memory system as seen from one context of a ring */
struct rbln_emu_ctx {
	struct rbln_emu_ring *ring;
	struct rbln_emu_dev *edev;
	u32 index;		/* in the context table */
	u64 fault_addr;		/* set with a fault */
	struct rbln_emu_dev *peer;	/* held during an access through a peer slot */
};

int rbln_emu_ctx_init(struct rbln_emu_ctx *ctx, struct rbln_emu_ring *ring, u32 index);
void rbln_emu_invalidate_start(struct rbln_emu_dev *edev);
bool rbln_emu_invalidate_busy(struct rbln_emu_dev *edev);
void rbln_emu_drain_accesses(struct rbln_emu_dev *edev);
int rbln_emu_read(struct rbln_emu_ctx *ctx, u64 va, void *buf, u64 len);
int rbln_emu_read_u64(struct rbln_emu_ctx *ctx, u64 va, u64 *val);

/**
 * struct rbln_emu_span - a range of device addresses worked on in place
 * @va: its start.
 * @len: its bytes.
 * @write: whether the work writes it.
 * @mem: set by rbln_emu_map(): where its first @run bytes are.
 * @run: set by rbln_emu_map(); at least one page's worth unless @len is less.
 */
struct rbln_emu_span {
	u64 va;
	u64 len;
	bool write;
	void *mem;
	u64 run;
};

int rbln_emu_map(struct rbln_emu_ctx *ctx, struct rbln_emu_span *spans, unsigned int n);
void rbln_emu_unmap(struct rbln_emu_ctx *ctx);
int rbln_emu_write(struct rbln_emu_ctx *ctx, u64 va, const void *buf, u64 len);
int rbln_emu_copy(struct rbln_emu_ctx *ctx, u64 dst, u64 src, u64 len);
int rbln_emu_fill(struct rbln_emu_ctx *ctx, u64 dst, u32 pattern, u64 len);
void rbln_emu_dram_free(struct rbln_emu_dev *edev);
void rbln_emu_dram_scrub(struct rbln_emu_dev *edev, u64 addr, u64 size);
int rbln_emu_host_read(struct rbln_emu_ring *ring, u64 dma_addr, void *buf, u32 len);
int rbln_emu_host_write(struct rbln_emu_ring *ring, u64 dma_addr, const void *buf, u32 len);
int rbln_emu_host_write_fence(struct rbln_emu_ring *ring, u64 dma_addr, u64 seqno);

/* rbln_emu_exec.c: the packets */
int rbln_emu_exec(struct rbln_emu_ctx *ctx, u64 cmd_va, const void *cmd, u32 size);

/*
 * Provided by the home.
 *
 * rbln_emu_host_ptr() - where the bytes at a DMA address are, for a read,
 * or a write if @write, of @len bytes that does not cross a page; NULL when
 * the address reaches no host memory that allows it. Called only inside an access section (see
 * rbln_emu_mem.c), and the pointer is dropped before the section ends.
 *
 * rbln_emu_get_by_serial() - the device with that SERIAL, for peer access,
 * held; NULL if none is reachable or it is being removed.
 * rbln_emu_put() - drops what rbln_emu_get_by_serial() held.
 *
 * rbln_emu_deliver_irq() - raise interrupt vector @vector: a ring's index,
 * or RBLN_EMU_FAULT_VECTOR. May be called from any command processor.
 */
void *rbln_emu_host_ptr(struct rbln_emu_dev *edev, u64 dma_addr, u32 len, bool write);
struct rbln_emu_dev *rbln_emu_get_by_serial(u64 serial);
void rbln_emu_put(struct rbln_emu_dev *edev);
void rbln_emu_deliver_irq(struct rbln_emu_dev *edev, unsigned int vector);

#endif /* __RBLN_EMU_INTERNAL_H__ */
