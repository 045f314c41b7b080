// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_npu_core.c - the emulated NPU's own units, in a home of the test's
 *
 * kernel/emu/ builds in rbln.ko and in rbln-npu-model. Here it builds a
 * third time over kcompat.h, in a home whose host memory is one buffer at
 * a made-up bus address and whose interrupts are counted per vector, so
 * the register block can be driven directly: what the PCI function's
 * registers do is tested without a guest or a vfio-user client.
 */
#include <stdatomic.h>
#include <time.h>

#include "../../kernel/emu/rbln_emu_internal.h"
#include "kselftest_harness.h"

#define HOST_BASE	0x40000000ULL	/* bus address of the host buffer */
#define HOST_SIZE	(64 * 4096)
#define CTX_TABLE	0x0000		/* 8 KiB */
#define RING_BASE	0x2000		/* 8 KiB */
#define FENCE		0x4000
#define PT_BASE		0x5000		/* 4 levels, one page each */
#define CMD_PAGE	0x9000
#define DATA_PAGE	0xa000
#define CMD_VA		0x100000ULL
#define DATA_VA		0x101000ULL
#define CTX		1

static _Alignas(4096) unsigned char host[HOST_SIZE];
static atomic_int irqs[RBLN_EMU_NUM_RINGS + 1];

void *rbln_emu_host_ptr(struct rbln_emu_dev *edev, u64 dma_addr, u32 len, bool write)
{
	(void)edev;
	(void)write;
	if (dma_addr < HOST_BASE || dma_addr + len > HOST_BASE + HOST_SIZE)
		return NULL;
	return host + (dma_addr - HOST_BASE);
}

struct rbln_emu_dev *rbln_emu_get_by_serial(u64 serial)
{
	(void)serial;
	return NULL;
}

void rbln_emu_put(struct rbln_emu_dev *edev)
{
	(void)edev;
}

void rbln_emu_deliver_irq(struct rbln_emu_dev *edev, unsigned int vector)
{
	(void)edev;
	atomic_fetch_add(&irqs[vector], 1);
}

static u64 *host_u64(u64 off)
{
	return (u64 *)(host + off);
}

/* Maps @va to host page @page (an offset in the buffer), writable. */
static void map_page(u64 va, u64 page, u64 pte_flags)
{
	u64 table = PT_BASE;
	int level;

	for (level = RBLN_PT_LEVELS - 1; level > 0; level--) {
		unsigned int idx = (va >> (12 + 9 * level)) & (RBLN_PT_ENTRIES - 1);
		u64 next = PT_BASE + (RBLN_PT_LEVELS - level) * 4096;

		host_u64(table)[idx] = (HOST_BASE + next) | RBLN_PTE_VALID;
		table = next;
	}
	host_u64(table)[(va >> 12) & (RBLN_PT_ENTRIES - 1)] = page | pte_flags;
}

static void reg_write64(struct rbln_emu_dev *edev, u32 lo, u64 val)
{
	rbln_emu_reg_write(edev, lo, lower_32_bits(val));
	rbln_emu_reg_write(edev, lo + 4, upper_32_bits(val));
}

static bool wait_for(bool (*done)(void *arg), void *arg)
{
	u64 deadline = ktime_get_ns() + 10ULL * 1000000000ULL;

	while (!done(arg))
		if (ktime_get_ns() > deadline)
			return false;
	return true;
}

static bool fence_is(void *arg)
{
	return __atomic_load_n(host_u64(FENCE), __ATOMIC_ACQUIRE) == *(u64 *)arg;
}

/* The device raises a vector after it writes the fence or fault it is about. */
static bool irq_raised(void *arg)
{
	return atomic_load((atomic_int *)arg) > 0;
}

struct reg_wait {
	struct rbln_emu_dev *edev;
	u32 reg, val;
};

static bool reg_is(void *arg)
{
	struct reg_wait *w = arg;

	return rbln_emu_reg_read(w->edev, w->reg) == w->val;
}

FIXTURE(npu) {
	struct rbln_emu_dev edev;
	u32 tail;
};

FIXTURE_SETUP(npu)
{
	unsigned int v;

	memset(host, 0, sizeof(host));
	for (v = 0; v <= RBLN_EMU_NUM_RINGS; v++)
		atomic_store(&irqs[v], 0);
	memset(&self->edev, 0, sizeof(self->edev));
	ASSERT_EQ(0, rbln_emu_dev_init(&self->edev, 3, 16 << 20, 42));

	host_u64(CTX_TABLE)[CTX] = HOST_BASE + PT_BASE;
	map_page(CMD_VA, HOST_BASE + CMD_PAGE, RBLN_PTE_VALID | RBLN_PTE_SYSTEM);
	map_page(DATA_VA, HOST_BASE + DATA_PAGE,
		 RBLN_PTE_VALID | RBLN_PTE_SYSTEM | RBLN_PTE_WRITE);
	reg_write64(&self->edev, RBLN_REG_CTX_TABLE_LO, HOST_BASE + CTX_TABLE);
	reg_write64(&self->edev, RBLN_RING_REG(0, RBLN_RING_BASE_LO), HOST_BASE + RING_BASE);
	reg_write64(&self->edev, RBLN_RING_REG(0, RBLN_RING_FENCE_LO), HOST_BASE + FENCE);
	rbln_emu_reg_write(&self->edev, RBLN_RING_REG(0, RBLN_RING_ENABLE), 1);
	self->tail = 0;
}

FIXTURE_TEARDOWN(npu)
{
	rbln_emu_dev_stop(&self->edev);
	rbln_emu_dev_fini(&self->edev);
}

/* Queues a DMA_FILL of one word at @dst on ring 0 as entry @seqno. */
static void submit_fill(struct rbln_emu_dev *edev, u32 *tail, u64 dst, u32 pattern, u64 seqno)
{
	struct rbln_pkt_dma_fill *pkt = (void *)(host + CMD_PAGE);
	struct rbln_ring_entry *entry = (void *)(host + RING_BASE);

	pkt->header = RBLN_PKT_HEADER(RBLN_OP_DMA_FILL, 0, 0, sizeof(*pkt) / 8);
	pkt->pattern = pattern;
	pkt->dst = dst;
	pkt->bytes = 4;
	entry[*tail] = (struct rbln_ring_entry){
		.cmd_va = CMD_VA, .cmd_size = sizeof(*pkt), .ctx = CTX, .seqno = seqno,
	};
	*tail = (*tail + 1) % RBLN_RING_ENTRIES;
	rbln_emu_reg_write(edev, RBLN_RING_REG(0, RBLN_RING_TAIL), *tail);
}

TEST_F(npu, identity_registers)
{
	EXPECT_EQ(RBLN_CHIP_ID_EMULATED, rbln_emu_reg_read(&self->edev, RBLN_REG_CHIP_ID));
	EXPECT_EQ(3, rbln_emu_reg_read(&self->edev, RBLN_REG_DEV_INDEX));
	EXPECT_EQ(16 << 20, rbln_emu_reg_read(&self->edev, RBLN_REG_MEM_SIZE_LO));
	EXPECT_EQ(42, rbln_emu_reg_read(&self->edev, RBLN_REG_SERIAL_LO));
	EXPECT_EQ(RBLN_EMU_NUM_RINGS, rbln_emu_reg_read(&self->edev, RBLN_REG_NUM_RINGS));
}

TEST_F(npu, job_writes_fence_and_raises_its_ring_vector)
{
	u64 seqno = 7;

	submit_fill(&self->edev, &self->tail, DATA_VA, 0xdeadbeef, seqno);
	ASSERT_TRUE(wait_for(fence_is, &seqno));
	EXPECT_EQ(0xdeadbeef, *(u32 *)(host + DATA_PAGE));
	EXPECT_TRUE(rbln_emu_reg_read(&self->edev, RBLN_REG_IRQ_STATUS) & 1);
	ASSERT_TRUE(wait_for(irq_raised, &irqs[0]));
	EXPECT_EQ(0, atomic_load(&irqs[RBLN_EMU_FAULT_VECTOR]));
}

TEST_F(npu, irq_mask_latches_status_but_raises_nothing)
{
	u64 seqno = 1;

	rbln_emu_reg_write(&self->edev, RBLN_REG_IRQ_MASK, 1);
	EXPECT_EQ(1, rbln_emu_reg_read(&self->edev, RBLN_REG_IRQ_MASK));
	submit_fill(&self->edev, &self->tail, DATA_VA, 1, seqno);
	ASSERT_TRUE(wait_for(fence_is, &seqno));
	/* The ring raises (if at all) once it has drained: wait for HEAD first. */
	struct reg_wait head = { &self->edev, RBLN_RING_REG(0, RBLN_RING_HEAD), 1 };

	ASSERT_TRUE(wait_for(reg_is, &head));
	EXPECT_TRUE(rbln_emu_reg_read(&self->edev, RBLN_REG_IRQ_STATUS) & 1);
	EXPECT_EQ(0, atomic_load(&irqs[0]));
}

TEST_F(npu, fault_raises_the_fault_vector)
{
	struct reg_wait fault = { &self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_INFO),
				  RBLN_FAULT_VALID | RBLN_FAULT_UNMAPPED };
	u64 seqno = 2;

	submit_fill(&self->edev, &self->tail, DATA_VA + 0x10000, 1, seqno);
	ASSERT_TRUE(wait_for(reg_is, &fault));
	EXPECT_EQ(DATA_VA + 0x10000,
		  rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_ADDR_LO)));
	ASSERT_TRUE(wait_for(irq_raised, &irqs[RBLN_EMU_FAULT_VECTOR]));
	EXPECT_EQ(1, atomic_load(&irqs[RBLN_EMU_FAULT_VECTOR]));
	/* Acknowledged, the entry completes. */
	rbln_emu_reg_write(&self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_INFO), 0);
	ASSERT_TRUE(wait_for(fence_is, &seqno));
}

TEST_F(npu, host_address_out_of_reach_faults_as_dma)
{
	struct reg_wait fault = { &self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_INFO),
				  RBLN_FAULT_VALID | RBLN_FAULT_DMA };
	u64 seqno = 3;

	/* A leaf naming a bus address the home cannot reach. */
	map_page(DATA_VA, HOST_BASE + HOST_SIZE,
		 RBLN_PTE_VALID | RBLN_PTE_SYSTEM | RBLN_PTE_WRITE);
	submit_fill(&self->edev, &self->tail, DATA_VA, 1, seqno);
	ASSERT_TRUE(wait_for(reg_is, &fault));
	rbln_emu_reg_write(&self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_INFO), 0);
	ASSERT_TRUE(wait_for(fence_is, &seqno));
}

TEST_F(npu, ring_out_of_reach_faults_the_entry)
{
	struct reg_wait fault = { &self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_INFO),
				  RBLN_FAULT_VALID | RBLN_FAULT_DMA };

	reg_write64(&self->edev, RBLN_RING_REG(0, RBLN_RING_BASE_LO), HOST_BASE + HOST_SIZE);
	rbln_emu_reg_write(&self->edev, RBLN_RING_REG(0, RBLN_RING_TAIL), 1);
	ASSERT_TRUE(wait_for(reg_is, &fault));
	EXPECT_EQ(HOST_BASE + HOST_SIZE,
		  rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_ADDR_LO)) |
		  (u64)rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_FAULT_ADDR_HI)) << 32);
}

TEST_F(npu, function_reset_stops_a_hung_ring_and_clears_registers)
{
	struct reg_wait done = { &self->edev, RBLN_REG_FUNC_RESET, 0 };
	struct reg_wait head = { &self->edev, RBLN_RING_REG(0, RBLN_RING_HEAD), 1 };
	u64 seqno = 9, zero = 0;

	rbln_emu_reg_write(&self->edev, RBLN_REG_SCRATCH, 0x1234);
	rbln_emu_reg_write(&self->edev, RBLN_REG_IRQ_MASK, 2);
	rbln_emu_reg_write(&self->edev, RBLN_REG_INJECT, RBLN_INJECT_HANG);
	submit_fill(&self->edev, &self->tail, DATA_VA, 5, seqno);
	/* Hung: HEAD never moves past the entry and no fence comes. */
	EXPECT_FALSE(reg_is(&head));

	rbln_emu_reg_write(&self->edev, RBLN_REG_FUNC_RESET, 1);
	ASSERT_TRUE(wait_for(reg_is, &done));
	EXPECT_TRUE(fence_is(&zero));
	EXPECT_EQ(0, *(u32 *)(host + DATA_PAGE));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_REG_SCRATCH));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_REG_IRQ_MASK));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_REG_CTX_TABLE_LO));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_BASE_LO)));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_ENABLE)));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_HEAD)));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_RING_REG(0, RBLN_RING_TAIL)));
	/* The identity survives: it is not state. */
	EXPECT_EQ(42, rbln_emu_reg_read(&self->edev, RBLN_REG_SERIAL_LO));
}

/* Deaf: invalidations and function resets never finish; only the bus's reset ends it. */
TEST_F(npu, deaf_device_answers_only_the_bus_reset)
{
	rbln_emu_reg_write(&self->edev, RBLN_REG_INJECT, RBLN_INJECT_DEAF);
	rbln_emu_reg_write(&self->edev, RBLN_REG_MMU_INVALIDATE, 1);
	EXPECT_EQ(1, rbln_emu_reg_read(&self->edev, RBLN_REG_MMU_INVALIDATE));
	rbln_emu_reg_write(&self->edev, RBLN_REG_FUNC_RESET, 1);
	EXPECT_EQ(1, rbln_emu_reg_read(&self->edev, RBLN_REG_FUNC_RESET));
	rbln_emu_bus_reset(&self->edev);
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_REG_FUNC_RESET));
	EXPECT_EQ(0, rbln_emu_reg_read(&self->edev, RBLN_REG_MMU_INVALIDATE));
}

TEST_F(npu, stopped_device_reads_all_ones_and_ignores_writes)
{
	rbln_emu_dev_stop(&self->edev);
	EXPECT_EQ(RBLN_REG_DEAD, rbln_emu_reg_read(&self->edev, RBLN_REG_CHIP_ID));
	rbln_emu_reg_write(&self->edev, RBLN_REG_SCRATCH, 1);
	EXPECT_EQ(RBLN_REG_DEAD, rbln_emu_reg_read(&self->edev, RBLN_REG_SCRATCH));
}

TEST_HARNESS_MAIN
