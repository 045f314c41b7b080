// SPDX-License-Identifier: GPL-2.0-only
/*
 * memviz_device.c - librbln's snapshot code over an allocator without a
 * driver, for rbln-memviz's tests
 *
 * The snapshot a program gets from librbln needs a device, which only the
 * VM has. This library runs the same code natively: rbln_snapshot.c (the
 * structs, the sites, the JSON) over rbln_alloc.c, whose segments come from
 * a provider that hands out addresses, behind one logical device of one
 * member. It is a shared library as librbln is: the snapshot drops the
 * leading frames inside its own object, so a site's top frame is the
 * program's call into it, as with librbln.
 */

#include <stdlib.h>

#include "memviz_device.h"
#include "rbln_explain.h"
#include "rbln_internal.h"

#define SEGMENT_GAP	(2ull << 20)	/* segments are never adjacent, as in the driver's VA space */

struct provider {
	uint64_t next_va;
	uint32_t next_handle;
	uint64_t submitted, completed;	/* job points: a free may wait for one */
};

static struct provider provider = { .next_va = 1ull << 32 };
static struct rbln_dev dev;
static struct rbln_ldev ldev = { .index = 0, .nmembers = 1, .members = { &dev } };

static int provider_alloc(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va)
{
	struct provider *p = ctx;

	*handle = ++p->next_handle;
	*va = p->next_va;
	p->next_va += size + SEGMENT_GAP;
	return 0;
}

static void provider_free(void *ctx, uint32_t handle)
{
	(void)ctx;
	(void)handle;
}

static int provider_synchronize(void *ctx)
{
	struct provider *p = ctx;

	p->completed = p->submitted;
	return 0;
}

static bool provider_point_done(void *ctx, uint64_t point)
{
	return point <= ((struct provider *)ctx)->completed;
}

/* Expandable segments: a reservation is address space, a map a handle. */
static int provider_reserve(void *ctx, uint64_t *va, uint64_t *size)
{
	struct provider *p = ctx;

	*size = 1ull << 30;
	*va = p->next_va;
	p->next_va += *size + SEGMENT_GAP;
	return 0;
}

static void provider_release(void *ctx, uint64_t va)
{
	(void)ctx;
	(void)va;
}

static int provider_map(void *ctx, uint64_t va, uint64_t size, uint32_t *handle)
{
	(void)va;
	(void)size;
	*handle = ++((struct provider *)ctx)->next_handle;
	return 0;
}

static void provider_unmap(void *ctx, uint64_t va, uint64_t size, uint32_t handle)
{
	(void)ctx;
	(void)va;
	(void)size;
	(void)handle;
}

static const struct rbln_segment_ops provider_ops = {
	.alloc = provider_alloc,
	.free = provider_free,
	.synchronize = provider_synchronize,
	.point_done = provider_point_done,
	.reserve = provider_reserve,
	.release = provider_release,
	.map = provider_map,
	.unmap = provider_unmap,
};

/* What rbln_snapshot.c asks of the runtime: the one logical device. */
struct rbln_ldev *rbln_ldev_get(int device)
{
	if (device > 0) {
		rbln_fail(RBLN_ERROR_NO_DEVICE, "memviz_device: no device %d", device);
		return NULL;
	}
	if (!dev.alloc)
		dev.alloc = rbln_allocator_create(&provider_ops, &provider);
	if (!dev.alloc) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "memviz_device: no allocator");
		return NULL;
	}
	return &ldev;
}

int rbln_pdev_index(const struct rbln_dev *d)
{
	(void)d;
	return 0;
}

/* And of explain(): no framework above names its code here. */
const char *rbln_explain_caller(void)
{
	return NULL;
}

void rbln_explain_memory_stacks(bool on)
{
	(void)on;
}

struct rbln_block *memviz_alloc(uint64_t size)
{
	struct rbln_block *b;

	if (!rbln_ldev_get(0) || rbln_allocator_alloc(dev.alloc, size, 0, &b, NULL, 0))
		abort();
	return b;
}

void memviz_free(struct rbln_block *b, bool in_flight)
{
	rbln_allocator_free(dev.alloc, b, in_flight ? ++provider.submitted : 0, 0);
}

void memviz_finish_jobs(void)
{
	provider.completed = provider.submitted;
}

void memviz_empty_cache(void)
{
	rbln_allocator_empty_cache(dev.alloc);
}
