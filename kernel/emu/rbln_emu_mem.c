// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_mem.c - the emulated NPU's memory system: DRAM and its MMU
 *
 * DRAM is backed by kernel pages, allocated the first time a page is
 * written and kept until scrubbed; a page never written reads as zeros.
 * The command processor is what the device's fences wait for, so it takes
 * those pages without reclaim, which may wait for the same fences: when
 * the host has no free page the write faults with RBLN_FAULT_DMA, as an
 * uncorrectable memory error would on silicon.
 *
 * Every access of a command goes through the MMU, which walks the
 * context's page tables in host memory (rbln_hw.h) and faults on a missing
 * translation or a write to a read-only page. Host memory is reached by its
 * DMA address, through the home's rbln_emu_host_ptr(); an address that
 * reaches no memory fails the access with RBLN_FAULT_DMA.
 *
 * A translation lives for one access: one run of bytes within a page,
 * walked, used and forgotten inside an access section of its ring. That is
 * what lets MMU_INVALIDATE promise that nothing uses an old translation
 * once it reads 0: it waits for the sections open when it was written.
 */

#include "rbln_emu_internal.h"

/* The DRAM page @pfn of @edev; NULL when never written and !@write. */
static void *rbln_emu_dram_page(struct rbln_emu_dev *edev, u64 pfn, bool write)
{
	struct page *page, *old;

	page = xa_load(&edev->dram, pfn);
	if (page || !write)
		return page ? page_address(page) : NULL;

	if (atomic_fetch_andnot(RBLN_INJECT_NO_PAGE, &edev->inject) & RBLN_INJECT_NO_PAGE)
		return ERR_PTR(-ENOMEM);
	page = alloc_page(GFP_NOWAIT | __GFP_NOWARN | __GFP_ZERO);
	if (!page)
		return ERR_PTR(-ENOMEM);
	old = xa_cmpxchg(&edev->dram, pfn, NULL, page, GFP_NOWAIT | __GFP_NOWARN);
	if (old) {
		__free_page(page);
		if (xa_is_err(old))
			return ERR_PTR(xa_err(old));
		page = old;
	}
	return page_address(page);
}

/* Zeroes [@lo, @hi), within one page, if that page was ever written. */
static void rbln_emu_dram_zero(struct rbln_emu_dev *edev, u64 lo, u64 hi)
{
	struct page *page = xa_load(&edev->dram, lo >> PAGE_SHIFT);

	if (page)
		memset(page_address(page) + offset_in_page(lo), 0, hi - lo);
}

/*
 * Zeroes [@addr, @addr + @size) of DRAM. A page never written reads as
 * zeros, so scrubbing gives whole pages back: what memory the emulator
 * holds follows what device memory is in use, and the work follows the
 * pages held, not the size of the range.
 */
void rbln_emu_dram_scrub(struct rbln_emu_dev *edev, u64 addr, u64 size)
{
	u64 end, first, last;
	struct page *page;
	unsigned long pfn;

	if (addr >= edev->mem_size || !size)
		return;
	end = min(addr + size, edev->mem_size);
	first = DIV_ROUND_UP(addr, PAGE_SIZE);
	last = end >> PAGE_SHIFT;
	if (first > last) {
		rbln_emu_dram_zero(edev, addr, end);
		return;
	}
	if (addr < first << PAGE_SHIFT)
		rbln_emu_dram_zero(edev, addr, first << PAGE_SHIFT);
	if (end > last << PAGE_SHIFT)
		rbln_emu_dram_zero(edev, last << PAGE_SHIFT, end);
	if (first == last)
		return;
	xa_for_each_range(&edev->dram, pfn, page, first, last - 1) {
		xa_erase(&edev->dram, pfn);
		__free_page(page);
		cond_resched();
	}
}

void rbln_emu_dram_free(struct rbln_emu_dev *edev)
{
	struct page *page;
	unsigned long pfn;

	xa_for_each(&edev->dram, pfn, page) {
		__free_page(page);
		cond_resched();
	}
	xa_destroy(&edev->dram);
}

int rbln_emu_ctx_init(struct rbln_emu_ctx *ctx, struct rbln_emu_ring *ring, u32 index)
{
	ctx->ring = ring;
	ctx->edev = ring->edev;
	ctx->index = index;
	ctx->fault_addr = 0;
	ctx->peer = NULL;
	if (!READ_ONCE(ctx->edev->ctx_table) || !index || index >= RBLN_MAX_CONTEXTS)
		return RBLN_FAULT_BAD_CONTEXT;
	return 0;
}

/*
 * Access sections. A ring's counter is odd inside one. The full barriers
 * pair with the one in rbln_emu_invalidate_start(): either the invalidation
 * sees the section open and waits for it, or the section sees the cleared
 * entries.
 */
static int rbln_emu_access_begin(struct rbln_emu_ctx *ctx)
{
	atomic_inc(&ctx->ring->access);
	/* Open before reading any table entry; pairs with invalidate_start(). */
	smp_mb__after_atomic();
	if (!READ_ONCE(ctx->edev->stopping))
		return 0;
	/* Nothing was read: the section closes at once. */
	smp_mb__before_atomic();
	atomic_inc(&ctx->ring->access);
	return RBLN_EMU_ABORTED;
}

static void rbln_emu_access_end(struct rbln_emu_ctx *ctx)
{
	if (ctx->peer) {
		rbln_emu_put(ctx->peer);
		ctx->peer = NULL;
	}
	/* Every byte of the access is done before the section reads closed. */
	smp_mb__before_atomic();
	atomic_inc(&ctx->ring->access);
}

/**
 * rbln_emu_invalidate_start() - MMU_INVALIDATE was written
 * @edev: the device
 *
 * Notes which rings are inside an access now: those sections may hold a
 * translation made before the driver's last page table update.
 */
void rbln_emu_invalidate_start(struct rbln_emu_dev *edev)
{
	unsigned int r;

	/* The driver's cleared entries before the counters; pairs with access_begin(). */
	smp_mb();
	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++)
		WRITE_ONCE(edev->rings[r].inval_snap, atomic_read(&edev->rings[r].access));
}

/* MMU_INVALIDATE reads 1 while a section noted at its write is still open. */
bool rbln_emu_invalidate_busy(struct rbln_emu_dev *edev)
{
	unsigned int r;

	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++) {
		int snap = READ_ONCE(edev->rings[r].inval_snap);

		if ((snap & 1) && atomic_read(&edev->rings[r].access) == snap)
			return true;
	}
	return false;
}

/* After @edev->stopping is set: returns once no access is in flight. */
void rbln_emu_drain_accesses(struct rbln_emu_dev *edev)
{
	unsigned int r;

	/* @stopping before the counters: a section opened after sees it. */
	smp_mb();
	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++)
		while (atomic_read(&edev->rings[r].access) & 1)
			cond_resched();
}

/*
 * Host memory the command processor reads and writes for itself (ring
 * entries, fences), each access in a section of its own like those of
 * commands, so that MMU_INVALIDATE and removal cover them too.
 */
static int rbln_emu_host_access(struct rbln_emu_ring *ring, u64 dma_addr, void *buf,
				u32 len, bool write, bool fence)
{
	struct rbln_emu_ctx ctx = { .ring = ring, .edev = ring->edev };
	void *ptr;
	int ret;

	ret = rbln_emu_access_begin(&ctx);
	if (ret)
		return ret;
	ptr = rbln_emu_host_ptr(ring->edev, dma_addr, len, write);
	if (!ptr)
		ret = RBLN_FAULT_DMA;
	else if (fence)
		/* Pairs with the driver's read of the fence before the results. */
		smp_store_release((u64 *)ptr, *(u64 *)buf);
	else if (write)
		memcpy(ptr, buf, len);
	else
		memcpy(buf, ptr, len);
	rbln_emu_access_end(&ctx);
	return ret;
}

int rbln_emu_host_read(struct rbln_emu_ring *ring, u64 dma_addr, void *buf, u32 len)
{
	return rbln_emu_host_access(ring, dma_addr, buf, len, false, false);
}

int rbln_emu_host_write(struct rbln_emu_ring *ring, u64 dma_addr, const void *buf, u32 len)
{
	return rbln_emu_host_access(ring, dma_addr, (void *)buf, len, true, false);
}

/* Writes @seqno with release semantics: everything before it is seen first. */
int rbln_emu_host_write_fence(struct rbln_emu_ring *ring, u64 dma_addr, u64 seqno)
{
	return rbln_emu_host_access(ring, dma_addr, &seqno, sizeof(seqno), true, true);
}

/* One u64 of a table in host memory, inside an access section; 0 if out of reach. */
static u64 rbln_emu_host_u64(struct rbln_emu_dev *edev, u64 table, unsigned int index)
{
	u64 *entry = rbln_emu_host_ptr(edev, table + index * sizeof(u64), sizeof(u64), false);

	return entry ? READ_ONCE(*entry) : 0;
}

/* The device a peer slot of @edev reaches, held, or NULL. */
static struct rbln_emu_dev *rbln_emu_peer(struct rbln_emu_dev *edev, unsigned int slot)
{
	u64 table = READ_ONCE(edev->peer_table), serial;

	if (!table || slot >= RBLN_MAX_PEERS)
		return NULL;
	serial = rbln_emu_host_u64(edev, table, slot);
	return serial ? rbln_emu_get_by_serial(serial) : NULL;
}

/*
 * Translates @va for an access of up to @len bytes, inside an access
 * section. On success *@ptr points at the bytes and *@run says how many are
 * contiguous there (to the end of the page at most); *@ptr is NULL for a
 * DRAM page never written, read as zeros. Returns 0 or a RBLN_FAULT_*,
 * with the address in ctx->fault_addr. The context's root is read anew
 * each time: a banned or released context stops at its next access.
 */
static int rbln_emu_translate(struct rbln_emu_ctx *ctx, u64 va, u64 len, bool write,
			      void **ptr, u64 *run)
{
	u64 table = READ_ONCE(ctx->edev->ctx_table);
	/* None, as during a function reset: no context, not one read at address 0. */
	u64 entry = table ? rbln_emu_host_u64(ctx->edev, table, ctx->index) : 0;
	u64 offset = va & (PAGE_SIZE - 1);
	struct rbln_emu_dev *owner = ctx->edev;
	int level;
	void *page;

	if (!entry) {
		ctx->fault_addr = va;
		return RBLN_FAULT_BAD_CONTEXT;
	}
	entry |= RBLN_PTE_VALID;
	if (va >> 48)
		goto unmapped;
	for (level = RBLN_PT_LEVELS - 1; level >= 0; level--) {
		unsigned int idx = (va >> (12 + 9 * level)) & (RBLN_PT_ENTRIES - 1);

		entry = rbln_emu_host_u64(ctx->edev, entry & RBLN_PTE_ADDR_MASK, idx);
		if (!(entry & RBLN_PTE_VALID))
			goto unmapped;
	}
	if (write && !(entry & RBLN_PTE_WRITE)) {
		ctx->fault_addr = va;
		return RBLN_FAULT_WRITE_PROTECTED;
	}

	*run = min(len, PAGE_SIZE - offset);
	if (entry & RBLN_PTE_SYSTEM) {
		*ptr = rbln_emu_host_ptr(ctx->edev, (entry & RBLN_PTE_ADDR_MASK) + offset, *run,
					 write);
		if (*ptr)
			return 0;
		ctx->fault_addr = va;
		return RBLN_FAULT_DMA;
	}
	if (entry & RBLN_PTE_PEER) {
		/* Held until the access ends: its DRAM stays while we touch it. */
		ctx->peer = rbln_emu_peer(ctx->edev, FIELD_GET(RBLN_PTE_PEER_MASK, entry));
		if (!ctx->peer)
			goto unmapped;
		owner = ctx->peer;
	}
	if ((entry & RBLN_PTE_ADDR_MASK) >= owner->mem_size)
		goto unmapped;
	page = rbln_emu_dram_page(owner, (entry & RBLN_PTE_ADDR_MASK) >> PAGE_SHIFT, write);
	if (IS_ERR(page)) {
		ctx->fault_addr = va;
		return RBLN_FAULT_DMA;
	}
	*ptr = page ? page + offset : NULL;
	return 0;

unmapped:
	ctx->fault_addr = va;
	return RBLN_FAULT_UNMAPPED;
}

/* Every byte of [@va, @va + @len) must be addressable without wrapping. */
static int rbln_emu_check_range(struct rbln_emu_ctx *ctx, u64 va, u64 len)
{
	if (len && va + len < va) {
		ctx->fault_addr = va;
		return RBLN_FAULT_UNMAPPED;
	}
	return 0;
}

/*
 * Between two page runs of a transfer: the ring may be reset and the device
 * removed meanwhile, and the CPU has other work (writeback, among others,
 * which a long transfer must not starve).
 */
static int rbln_emu_step(struct rbln_emu_ctx *ctx)
{
	cond_resched();
	return rbln_emu_ring_stopped(ctx->ring) ? RBLN_EMU_ABORTED : 0;
}

enum rbln_emu_xfer { XFER_READ, XFER_WRITE, XFER_FILL };

/* One page run of a read, a write or a fill, in an access section. */
static int rbln_emu_xfer_run(struct rbln_emu_ctx *ctx, enum rbln_emu_xfer op, u64 va,
			     void *buf, u32 pattern, u64 len, u64 *run)
{
	void *mem;
	int ret;

	ret = rbln_emu_access_begin(ctx);
	if (ret)
		return ret;
	ret = rbln_emu_translate(ctx, va, len, op != XFER_READ, &mem, run);
	if (!ret) {
		switch (op) {
		case XFER_READ:
			if (mem)
				memcpy(buf, mem, *run);
			else
				memset(buf, 0, *run);
			break;
		case XFER_WRITE:
			memcpy(mem, buf, *run);
			break;
		case XFER_FILL:
			/* dst and len are 4-byte aligned: runs are whole words. */
			memset32(mem, pattern, *run / 4);
			break;
		}
	}
	rbln_emu_access_end(ctx);
	return ret;
}

static int rbln_emu_xfer(struct rbln_emu_ctx *ctx, enum rbln_emu_xfer op, u64 va, void *buf,
			 u32 pattern, u64 len)
{
	int ret = rbln_emu_check_range(ctx, va, len);
	u64 run;

	while (!ret && len) {
		ret = rbln_emu_xfer_run(ctx, op, va, buf, pattern, len, &run);
		if (ret)
			break;
		if (buf)
			buf += run;
		va += run;
		len -= run;
		ret = rbln_emu_step(ctx);
	}
	return ret;
}

int rbln_emu_read(struct rbln_emu_ctx *ctx, u64 va, void *buf, u64 len)
{
	return rbln_emu_xfer(ctx, XFER_READ, va, buf, 0, len);
}

/**
 * rbln_emu_read_u64() - read one aligned 64-bit word in a single access
 * @ctx: the context
 * @va: the word's address, 8-byte aligned: it never crosses a page
 * @val: the word
 *
 * Unlike rbln_emu_read(), which may copy byte by byte, a CPU writing the
 * word meanwhile is seen before or after its write, never half-way. The
 * translation is made anew at each call.
 *
 * Return: 0, RBLN_EMU_ABORTED, or a RBLN_FAULT_* with the address in @ctx.
 */
int rbln_emu_read_u64(struct rbln_emu_ctx *ctx, u64 va, u64 *val)
{
	void *mem;
	u64 run;
	int ret;

	ret = rbln_emu_access_begin(ctx);
	if (ret)
		return ret;
	ret = rbln_emu_translate(ctx, va, sizeof(*val), false, &mem, &run);
	if (!ret)
		*val = mem ? READ_ONCE(*(u64 *)mem) : 0;
	rbln_emu_access_end(ctx);
	return ret;
}

int rbln_emu_write(struct rbln_emu_ctx *ctx, u64 va, const void *buf, u64 len)
{
	return rbln_emu_xfer(ctx, XFER_WRITE, va, (void *)buf, 0, len);
}

int rbln_emu_fill(struct rbln_emu_ctx *ctx, u64 dst, u32 pattern, u64 len)
{
	return rbln_emu_xfer(ctx, XFER_FILL, dst, NULL, pattern, len);
}

/**
 * rbln_emu_map() - the memory behind device addresses, to work on in place
 * @ctx: the context the addresses are in
 * @spans: the ranges; each gets where its first bytes are, up to the end
 *         of their page
 * @n: how many
 *
 * Translates the start of every span in one access section, and leaves the
 * section open: the caller works on the memory, briefly (the section holds
 * off the driver's invalidations), then closes it with rbln_emu_unmap().
 * Only this device's own DRAM and host memory qualify: a peer's DRAM (one
 * reference held per section) or a page never written (nothing to point
 * at) make the caller go through rbln_emu_read() and rbln_emu_write().
 *
 * Return: 0 with the section open; with it closed, a fault, a reset's or
 * removal's RBLN_EMU_ABORTED, or RBLN_EMU_NOT_IN_PLACE.
 */
int rbln_emu_map(struct rbln_emu_ctx *ctx, struct rbln_emu_span *spans, unsigned int n)
{
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = rbln_emu_check_range(ctx, spans[i].va, spans[i].len);
		if (ret)
			return ret;
	}
	ret = rbln_emu_access_begin(ctx);
	if (ret)
		return ret;
	for (i = 0; i < n && !ret; i++) {
		ret = rbln_emu_translate(ctx, spans[i].va, spans[i].len, spans[i].write,
					 &spans[i].mem, &spans[i].run);
		if (!ret && (ctx->peer || !spans[i].mem))
			ret = RBLN_EMU_NOT_IN_PLACE;
	}
	if (ret)
		rbln_emu_access_end(ctx);
	return ret;
}

/**
 * rbln_emu_unmap() - done with what rbln_emu_map() gave
 * @ctx: the context
 */
void rbln_emu_unmap(struct rbln_emu_ctx *ctx)
{
	rbln_emu_access_end(ctx);
}

/*
 * Straight from page to page, as a DMA engine: both translations are made
 * in one access section, and forgotten with it.
 */
static int rbln_emu_copy_run(struct rbln_emu_ctx *ctx, u64 dst, u64 src, u64 len, u64 *run)
{
	u64 src_run, dst_run;
	struct rbln_emu_dev *src_peer;
	void *s, *d;
	int ret;

	ret = rbln_emu_access_begin(ctx);
	if (ret)
		return ret;
	ret = rbln_emu_translate(ctx, src, len, false, &s, &src_run);
	/* A second peer translation must not drop the first one's reference. */
	src_peer = ctx->peer;
	ctx->peer = NULL;
	if (!ret)
		ret = rbln_emu_translate(ctx, dst, len, true, &d, &dst_run);
	if (!ret) {
		*run = min(src_run, dst_run);
		if (s)
			memcpy(d, s, *run);
		else
			memset(d, 0, *run);
	}
	if (src_peer)
		rbln_emu_put(src_peer);
	rbln_emu_access_end(ctx);
	return ret;
}

int rbln_emu_copy(struct rbln_emu_ctx *ctx, u64 dst, u64 src, u64 len)
{
	int ret = rbln_emu_check_range(ctx, src, len) ?: rbln_emu_check_range(ctx, dst, len);
	u64 run = 0;

	while (!ret && len) {
		ret = rbln_emu_copy_run(ctx, dst, src, len, &run);
		if (ret)
			break;
		src += run;
		dst += run;
		len -= run;
		ret = rbln_emu_step(ctx);
	}
	return ret;
}
