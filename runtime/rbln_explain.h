/* SPDX-License-Identifier: MIT */
/*
 * rbln_explain.h - what op dispatch tells explain() (internal)
 *
 * The hooks record only while a region is open; callers test
 * rbln_explain_active() first, so with no region open a dispatch pays one
 * relaxed atomic load and nothing else.
 */
#ifndef RBLN_EXPLAIN_H
#define RBLN_EXPLAIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "rbln_export.h"
extern RBLN_INTERNAL atomic_bool rbln_explain_open;

static inline bool rbln_explain_active(void)
{
	return atomic_load_explicit(&rbln_explain_open, memory_order_relaxed);
}

/* Dispatch times, taken only while a region is open. */
static inline uint64_t rbln_explain_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The site of an op: where the application called the public function using this. */
#define RBLN_CALLER() __builtin_return_address(0)

enum rbln_dispatch_kind {
	RBLN_DISPATCH_WARM_HIT,		/* a device op whose program was cached */
	RBLN_DISPATCH_RECOMPILE,	/* a device op compiled for this call */
	RBLN_DISPATCH_CPU_FALLBACK,	/* an op the device cannot run, run on the CPU */
};

/*
 * One op dispatched: @op is a static name ("add", "softmax"), @ns the host
 * time the dispatch took, @site the return address of the public function
 * the application called (resolved only with_stack).
 */
void rbln_explain_dispatch(enum rbln_dispatch_kind kind, const char *op, uint64_t ns,
			   const void *site);

/*
 * Data of @bytes crossed between host and device because op @op needed it
 * on the other side (@to_host: device to host), called from @site.
 */
RBLN_INTERNAL void rbln_explain_bounce(const char *op, bool to_host, uint64_t bytes,
				       const void *site);

/* A graph of @ops ops replayed, its submission taking @ns of host time. */
void rbln_explain_graph_replay(int64_t ops, uint64_t ns);

/*
 * The site a framework attributed this thread's work to
 * (rbln_explain_attribute()), interned; NULL when none: the allocator's
 * history names allocations with it.
 */
const char *rbln_explain_caller(void);

/*
 * One more (@on) or one fewer device records its memory history with
 * stacks: while any does, rbln_explain_wants_sites() is true, so that a
 * framework names its sites for the history too.
 */
void rbln_explain_memory_stacks(bool on);

/* Where tensor data lives now, over every device opened (rbln_tensor.c). */
struct rbln_residency {
	int64_t device_bytes;		/* tensor data in device memory */
	int64_t lazy_bytes;		/* data of tensors on devices, still in host memory */
	int64_t offloaded_bytes;	/* of which file-backed (offload) */
	int64_t device_memory_current;	/* allocated.current, summed over logical devices */
	int64_t device_memory_peak;	/* allocated.peak, summed over logical devices */
};

void rbln_residency_get(struct rbln_residency *r);

#endif /* RBLN_EXPLAIN_H */
