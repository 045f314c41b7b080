// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_mem.c - the emulated NPU's memory system: DRAM and its MMU
 *
 * DRAM is backed by kernel pages, allocated the first time a page is
 * written and kept until the device goes; a page never written reads as
 * zeros. Every access of a command goes through the MMU, which walks the
 * context's page tables in host memory (rbln_hw.h) and faults on a missing
 * translation or a write to a read-only page. Host memory is reached by its
 * DMA address: the emulated device sits behind no IOMMU, so a DMA address
 * is a physical address.
 */

#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "rbln_emu_internal.h"

void *rbln_emu_host_ptr(u64 dma_addr)
{
	return phys_to_virt(dma_addr);
}

/* The DRAM page @pfn of @edev; NULL when never written and !@write. */
static void *rbln_emu_dram_page(struct rbln_emu_dev *edev, u64 pfn, bool write)
{
	struct page *page, *old;

	page = xa_load(&edev->dram, pfn);
	if (page || !write)
		return page ? page_address(page) : NULL;

	page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!page)
		return ERR_PTR(-ENOMEM);
	old = xa_cmpxchg(&edev->dram, pfn, NULL, page, GFP_KERNEL);
	if (old) {
		__free_page(page);
		if (xa_is_err(old))
			return ERR_PTR(xa_err(old));
		page = old;
	}
	return page_address(page);
}

/*
 * Zeroes [@addr, @addr + @size) of DRAM. A page never written reads as
 * zeros, so scrubbing gives the pages back: what memory the emulator holds
 * follows what device memory is in use.
 */
void rbln_emu_dram_scrub(struct rbln_emu_dev *edev, u64 addr, u64 size)
{
	u64 pfn, first = addr >> PAGE_SHIFT, end;
	struct page *page;

	if (addr >= edev->mem_size)
		return;
	end = min(addr + size, edev->mem_size);
	for (pfn = first; pfn < DIV_ROUND_UP(end, PAGE_SIZE); pfn++) {
		u64 lo = max(addr, pfn << PAGE_SHIFT), hi = min(end, (pfn + 1) << PAGE_SHIFT);

		if (lo == pfn << PAGE_SHIFT && hi == (pfn + 1) << PAGE_SHIFT) {
			page = xa_erase(&edev->dram, pfn);
			if (page)
				__free_page(page);
		} else {
			page = xa_load(&edev->dram, pfn);
			if (page)
				memset(page_address(page) + (lo & (PAGE_SIZE - 1)), 0, hi - lo);
		}
	}
}

void rbln_emu_dram_free(struct rbln_emu_dev *edev)
{
	struct page *page;
	unsigned long pfn;

	xa_for_each(&edev->dram, pfn, page)
		__free_page(page);
	xa_destroy(&edev->dram);
}

int rbln_emu_ctx_init(struct rbln_emu_ctx *ctx, struct rbln_emu_dev *edev, u32 index)
{
	u64 *table;

	ctx->edev = edev;
	ctx->fault_addr = 0;
	if (!edev->ctx_table || index >= RBLN_MAX_CONTEXTS)
		return RBLN_FAULT_BAD_CONTEXT;
	table = rbln_emu_host_ptr(edev->ctx_table);
	ctx->root = READ_ONCE(table[index]);
	return ctx->root ? 0 : RBLN_FAULT_BAD_CONTEXT;
}

/*
 * Translates @va for an access of up to @len bytes. On success *@ptr points
 * at the bytes and *@run says how many are contiguous there (to the end of
 * the page at most); *@ptr is NULL for a DRAM page never written, read as
 * zeros. Returns 0 or a RBLN_FAULT_*, with the address in ctx->fault_addr.
 */
static int rbln_emu_translate(struct rbln_emu_ctx *ctx, u64 va, u64 len, bool write,
			      void **ptr, u64 *run)
{
	u64 entry = ctx->root | RBLN_PTE_VALID, offset = va & (PAGE_SIZE - 1);
	struct rbln_emu_dev *owner = ctx->edev, *peer = NULL;
	int level;
	void *page;

	if (va >> 48)
		goto unmapped;
	for (level = RBLN_PT_LEVELS - 1; level >= 0; level--) {
		u64 *table = rbln_emu_host_ptr(entry & RBLN_PTE_ADDR_MASK);
		unsigned int idx = (va >> (12 + 9 * level)) & (RBLN_PT_ENTRIES - 1);

		entry = READ_ONCE(table[idx]);
		if (!(entry & RBLN_PTE_VALID))
			goto unmapped;
	}
	if (write && !(entry & RBLN_PTE_WRITE)) {
		ctx->fault_addr = va;
		return RBLN_FAULT_WRITE_PROTECTED;
	}

	*run = min(len, PAGE_SIZE - offset);
	if (entry & RBLN_PTE_SYSTEM) {
		*ptr = rbln_emu_host_ptr((entry & RBLN_PTE_ADDR_MASK) + offset);
		return 0;
	}
	if (entry & RBLN_PTE_PEER) {
		peer = rbln_emu_get_by_index((entry & RBLN_PTE_PEER_MASK) >> RBLN_PTE_PEER_SHIFT);
		if (!peer)
			goto unmapped;
		owner = peer;
	}
	if ((entry & RBLN_PTE_ADDR_MASK) >= owner->mem_size) {
		if (peer)
			put_device(&peer->dev);
		goto unmapped;
	}
	page = rbln_emu_dram_page(owner, (entry & RBLN_PTE_ADDR_MASK) >> PAGE_SHIFT, write);
	/* The peer's DRAM lives as long as its device, which the importer holds. */
	if (peer)
		put_device(&peer->dev);
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

int rbln_emu_read(struct rbln_emu_ctx *ctx, u64 va, void *buf, u64 len)
{
	int ret = rbln_emu_check_range(ctx, va, len);
	void *src;
	u64 run;

	while (!ret && len) {
		ret = rbln_emu_translate(ctx, va, len, false, &src, &run);
		if (ret)
			break;
		if (src)
			memcpy(buf, src, run);
		else
			memset(buf, 0, run);
		buf += run;
		va += run;
		len -= run;
	}
	return ret;
}

int rbln_emu_write(struct rbln_emu_ctx *ctx, u64 va, const void *buf, u64 len)
{
	int ret = rbln_emu_check_range(ctx, va, len);
	void *dst;
	u64 run;

	while (!ret && len) {
		ret = rbln_emu_translate(ctx, va, len, true, &dst, &run);
		if (ret)
			break;
		memcpy(dst, buf, run);
		buf += run;
		va += run;
		len -= run;
	}
	return ret;
}

/* Straight from page to page: one pass over the bytes, as a DMA engine. */
int rbln_emu_copy(struct rbln_emu_ctx *ctx, u64 dst, u64 src, u64 len)
{
	int ret = rbln_emu_check_range(ctx, src, len) ?: rbln_emu_check_range(ctx, dst, len);
	u64 src_run, dst_run, run;
	void *s, *d;

	while (!ret && len) {
		ret = rbln_emu_translate(ctx, src, len, false, &s, &src_run);
		if (!ret)
			ret = rbln_emu_translate(ctx, dst, len, true, &d, &dst_run);
		if (ret)
			break;
		run = min(src_run, dst_run);
		if (s)
			memcpy(d, s, run);
		else
			memset(d, 0, run);
		src += run;
		dst += run;
		len -= run;
		cond_resched();
	}
	return ret;
}

int rbln_emu_fill(struct rbln_emu_ctx *ctx, u64 dst, u32 pattern, u64 len)
{
	int ret = rbln_emu_check_range(ctx, dst, len);
	u64 run, i;
	void *d;

	while (!ret && len) {
		ret = rbln_emu_translate(ctx, dst, len, true, &d, &run);
		if (ret)
			break;
		/* dst and len are 4-byte aligned: runs are whole words. */
		for (i = 0; i < run; i += 4)
			memcpy(d + i, &pattern, 4);
		dst += run;
		len -= run;
		cond_resched();
	}
	return ret;
}
