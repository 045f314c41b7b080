/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_hw.h - the hardware interface of an rbln NPU
 *
 * Everything the driver knows about the device goes through this header: a
 * 32-bit register block reached by read/write accessors, command rings and
 * page tables in host memory the device reads by DMA, and an interrupt. The
 * emulated NPU in emu/ implements it in software; the PCI backend
 * (rbln_pci.c, docs/pci.md) implements the same accessors with
 * readl()/writel() on BAR0 and MSI-X handlers, and nothing above it
 * changes. The command ISA is in the UAPI header rbln_isa.h, since
 * userspace writes the commands.
 */
#ifndef __RBLN_HW_H__
#define __RBLN_HW_H__

#ifdef __KERNEL__
#include <linux/bits.h>
#include <linux/types.h>
#endif	/* else rbln-npu-model's kcompat.h, included first */

/* Register block, byte offsets. All registers are 32 bits wide. */
#define RBLN_REG_CHIP_ID		0x000	/* RO: RBLN_CHIP_ID_* (UAPI) */
#define RBLN_REG_HW_REV			0x004	/* RO: (major << 16) | minor */
#define RBLN_REG_HW_CFG			0x008	/* RO: RBLN_HW_CFG_* */
#define RBLN_REG_DEV_INDEX		0x00c	/* RO: index on the bus */
#define RBLN_REG_MEM_SIZE_LO		0x010	/* RO: device memory, bytes */
#define RBLN_REG_MEM_SIZE_HI		0x014
#define RBLN_REG_SCRATCH		0x018	/* RW: liveness probe */
#define RBLN_REG_NUM_RINGS		0x020	/* RO: command rings */
#define RBLN_REG_ISA_CAPS		0x024	/* RO: RBLN_ISA_CAP_* (UAPI) */
#define RBLN_REG_MAX_CMD_SIZE		0x028	/* RO: largest command buffer, bytes */
#define RBLN_REG_IRQ_STATUS		0x030	/* RW1C: bit r: ring r has news */
#define RBLN_REG_IRQ_MASK		0x034	/* RW: bit r: ring r raises no interrupt */
#define RBLN_REG_CTX_TABLE_LO		0x038	/* RW: DMA address of the context table */
#define RBLN_REG_CTX_TABLE_HI		0x03c
#define RBLN_REG_INJECT			0x040	/* WO: RBLN_INJECT_*, emulator only */
#define RBLN_REG_SCRUB_ADDR_LO		0x048	/* RW: device memory to zero, bytes */
#define RBLN_REG_SCRUB_ADDR_HI		0x04c
#define RBLN_REG_SCRUB_SIZE_LO		0x050	/* RW: length; writing HI scrubs, */
#define RBLN_REG_SCRUB_SIZE_HI		0x054	/* done when the write returns */
#define RBLN_REG_MMU_INVALIDATE		0x058	/* W: start; R: 1 while in flight */
#define RBLN_REG_SERIAL_LO		0x060	/* RO: identity, never reused */
#define RBLN_REG_SERIAL_HI		0x064
#define RBLN_REG_PEER_TABLE_LO		0x068	/* RW: DMA address of the peer table */
#define RBLN_REG_PEER_TABLE_HI		0x06c
#define RBLN_REG_FUNC_RESET		0x070	/* W: function reset; R: 1 until done */

#define RBLN_HW_CFG_EMULATED		BIT(0)

/* Test hooks of the emulated NPU; silicon ignores the register. */
#define RBLN_INJECT_HANG		BIT(0)	/* the next job never ends */
#define RBLN_INJECT_DMA_ERROR		BIT(1)	/* the next DMA fails */
#define RBLN_INJECT_FAULT		BIT(2)	/* the next job faults */
#define RBLN_INJECT_STUCK		BIT(3)	/* the next job never ends, nor does RESET */
#define RBLN_INJECT_NO_PAGE		BIT(4)	/* the host has no page for the next DRAM page */
#define RBLN_INJECT_DEAF		BIT(5)	/* MMU_INVALIDATE, FUNC_RESET busy until FLR */

/*
 * Command rings. Ring r's registers start at RBLN_RING_REG(r, 0). The ring
 * is an array of RBLN_RING_ENTRIES struct rbln_ring_entry in host memory;
 * the driver writes entries at TAIL and then TAIL itself (the doorbell),
 * the command processor executes them in order from HEAD, and after each
 * one writes its seqno to the 64-bit fence slot and sets the ring's bit in
 * IRQ_STATUS, which raises the interrupt.
 *
 * On a fault the ring stops before writing the fence, fills FAULT_* and
 * raises the interrupt; writing FAULT_INFO (any value) acknowledges: the
 * entry then completes (its fence is written) and the ring goes on.
 *
 * Writing RESET (any value) stops the ring: the entry being executed is
 * abandoned at its next step (the device checks at every packet and at
 * least every ~1 ms of work inside one), its fence is never written, the
 * entries not yet started are dropped, and a pending fault is forgotten.
 * RESET reads 1 until the ring has stopped and touches no memory for any
 * of those entries; HEAD and TAIL are then 0 and the ring takes new
 * entries from slot 0 when TAIL is written.
 *
 * WAIT_SEEN counts, wrapping, the reads of a WAIT packet running on the
 * ring that found its word different from that WAIT's previous read (the
 * first read of each WAIT does not count): the host is writing the word,
 * so the job, however long it waits, is not hung. RESET and FUNC_RESET
 * clear it.
 *
 * A ring whose RESET does not complete is wedged: FUNC_RESET brings the
 * whole function back to its power-on state (rings stopped, their
 * registers, CTX_TABLE, PEER_TABLE and IRQ_MASK cleared; device memory
 * keeps its contents), and reads 1 until it has.
 */
#define RBLN_RING_REG(r, off)		(0x100 + (r) * 0x40 + (off))
#define RBLN_RING_BASE_LO		0x00	/* RW: DMA address of the entries */
#define RBLN_RING_BASE_HI		0x04
#define RBLN_RING_TAIL			0x08	/* RW: doorbell, entry index */
#define RBLN_RING_HEAD			0x0c	/* RO: next entry to execute */
#define RBLN_RING_FENCE_LO		0x10	/* RW: DMA address of the fence slot */
#define RBLN_RING_FENCE_HI		0x14
#define RBLN_RING_ENABLE		0x18	/* RW: 1 to run */
#define RBLN_RING_FAULT_INFO		0x1c	/* RO: RBLN_FAULT_*; W: acknowledge */
#define RBLN_RING_FAULT_ADDR_LO		0x20	/* RO: the faulting address */
#define RBLN_RING_FAULT_ADDR_HI		0x24
#define RBLN_RING_FAULT_SEQNO_LO	0x28	/* RO: the faulting entry */
#define RBLN_RING_FAULT_SEQNO_HI	0x2c
#define RBLN_RING_RESET			0x30	/* W: stop; R: 1 until stopped */
#define RBLN_RING_WAIT_SEEN		0x34	/* RO: WAIT reads that saw a change */
#define RBLN_RING_BUSY_NS_LO		0x38	/* RO: time spent executing, ns */
#define RBLN_RING_BUSY_NS_HI		0x3c

#define RBLN_RING_ENTRIES		256

/**
 * struct rbln_ring_entry - one job on a ring
 * @cmd_va: device virtual address of the command buffer.
 * @cmd_size: its size in bytes.
 * @ctx: context (address space) to run it in: index in the context table.
 * @seqno: written to the fence slot when the entry completes.
 * @busy_ns: written by the device before the fence: execution time.
 */
struct rbln_ring_entry {
	u64 cmd_va;
	u32 cmd_size;
	u32 ctx;
	u64 seqno;
	u64 busy_ns;
};

/* RBLN_RING_FAULT_INFO */
#define RBLN_FAULT_VALID		BIT(31)
#define RBLN_FAULT_TYPE(info)		((info) & 0xff)
#define RBLN_FAULT_UNMAPPED		1	/* no translation for the address */
#define RBLN_FAULT_WRITE_PROTECTED	2	/* write to a read-only mapping */
#define RBLN_FAULT_ILLEGAL_OPCODE	3
#define RBLN_FAULT_MALFORMED		4	/* bad length, field or alignment */
#define RBLN_FAULT_DMA			5	/* the memory system reported an error */
#define RBLN_FAULT_BAD_CONTEXT		6	/* no page table for the context */

/*
 * Address translation. The context table is an array of RBLN_MAX_CONTEXTS
 * u64 entries, each the DMA address of a context's top-level page table, or
 * 0. Page tables are 4 levels of 512 u64 entries (9 bits of address each,
 * 4 KiB pages, 48-bit addresses). A table entry holds the DMA address of
 * the next table and RBLN_PTE_VALID; a leaf entry:
 */
#define RBLN_MAX_CONTEXTS		1024
#define RBLN_PT_LEVELS			4
#define RBLN_PT_ENTRIES			512
#define RBLN_PTE_VALID			BIT_ULL(0)
#define RBLN_PTE_WRITE			BIT_ULL(1)
#define RBLN_PTE_SYSTEM			BIT_ULL(2)	/* host memory: a DMA address */
#define RBLN_PTE_PEER			BIT_ULL(3)	/* another NPU's memory */
#define RBLN_PTE_ADDR_MASK		GENMASK_ULL(51, 12)
#define RBLN_PTE_PEER_MASK		GENMASK_ULL(61, 52)	/* its peer slot */

/*
 * Unmapped means untouched. Translations are made per access: once the
 * driver has cleared page table or context table entries, it writes
 * MMU_INVALIDATE and waits until the register reads 0. From then on no
 * access that may have used the old entries is in flight, and the memory
 * they pointed at, or the page tables themselves, may be freed. Scrubbing
 * and freeing come only after that.
 *
 * Peers. A PEER leaf entry names a slot of the peer table: an array of
 * RBLN_MAX_PEERS u64 in host memory, each the SERIAL of the device whose
 * memory the slot reaches, or 0. A serial is never given to two devices,
 * even after removal, so a slot can never reach a device that replaced
 * the one it was made for; an access through a slot whose device is gone,
 * or whose entry is 0, faults as unmapped. Clearing an entry and
 * invalidating revokes every mapping through it at once.
 */
#define RBLN_MAX_PEERS			64

/*
 * What every register reads as once the device is gone, as on PCI. By
 * then the device touches no memory: a gone device needs no invalidation.
 */
#define RBLN_REG_DEAD			0xffffffffu

struct rbln_hw;

/**
 * struct rbln_hw_ops - register accessors of one backend
 * @read32: read the register at byte offset @reg.
 * @write32: write @val to the register at byte offset @reg.
 * @lost: optional: the driver found the device gone (its registers read
 *	all-ones, or it stopped answering) without its bus saying so; the
 *	backend unbinds it, later, from a context of its own. May be called
 *	more than once.
 * @cut_dma: optional: the device stopped answering; stop it reaching host
 *	memory, whatever it runs, before returning (on PCI, Bus Master
 *	Enable cleared). Without it, the driver waits for an answer as long
 *	as it takes (rbln_hw_wait()).
 *
 * All may be called from any context and must not sleep.
 */
struct rbln_hw_ops {
	u32 (*read32)(struct rbln_hw *hw, u32 reg);
	void (*write32)(struct rbln_hw *hw, u32 reg, u32 val);
	void (*lost)(struct rbln_hw *hw);
	void (*cut_dma)(struct rbln_hw *hw);
};

/**
 * struct rbln_hw - one NPU as the driver sees it
 * @ops: the backend's accessors.
 * @irq: the driver's interrupt handler, published (smp_store_release())
 *	once every ring it serves is set up, before any job is submitted.
 *	The backend reads it with smp_load_acquire() and calls it with the
 *	vector raised (a ring's index, or NUM_RINGS for a fault), never
 *	concurrently with itself, in a context that may not sleep for long
 *	(a threaded interrupt's); a vector raised before it is published is
 *	dropped.
 * @irq_data: passed to @irq.
 * @dma_dev: the device that masters DMA, for the DMA API.
 */
struct rbln_hw {
	const struct rbln_hw_ops *ops;
	void (*irq)(void *irq_data, unsigned int vector);
	void *irq_data;
	struct device *dma_dev;
};

static inline u32 rbln_hw_read(struct rbln_hw *hw, u32 reg)
{
	return hw->ops->read32(hw, reg);
}

static inline void rbln_hw_write(struct rbln_hw *hw, u32 reg, u32 val)
{
	hw->ops->write32(hw, reg, val);
}

static inline u64 rbln_hw_read64(struct rbln_hw *hw, u32 lo_reg)
{
	return rbln_hw_read(hw, lo_reg) |
	       (u64)rbln_hw_read(hw, lo_reg + 4) << 32;
}

#endif /* __RBLN_HW_H__ */
