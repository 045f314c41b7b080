/* SPDX-License-Identifier: MIT */
/*
 * rbln_alloc.h - librbln's device-memory caching allocator (internal)
 *
 * A pure-C caching allocator modelled on PyTorch's CUDACachingAllocator:
 * 512-byte rounding, a small pool (<= 1 MiB, 2 MiB segments) and a large
 * pool (20 MiB segments below 10 MiB, 2 MiB multiples above), best fit,
 * splitting, coalescing, queue-ordered reuse and an OOM ladder, plus
 * per-thread caches of small blocks in front of the pools, and PyTorch's
 * expandable segments.  Segments come from a pluggable provider:
 * BO_CREATE(DEVICE) and VM_BIND in librbln, a mock in the unit tests.  Not
 * part of the public API.
 */
#ifndef RBLN_ALLOC_H
#define RBLN_ALLOC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln.h"	/* the states and actions of snapshots and history */
#include "rbln_export.h"

/* Where segments come from: the driver (BO_CREATE DEVICE) in librbln, a mock in tests. */
struct rbln_segment_ops {
	/* Reserve @size bytes: 0 with *handle and *va set, -ENOSPC when the device is full, other -errno on failure. */
	int (*alloc)(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va);
	void (*free)(void *ctx, uint32_t handle);
	/* Wait until all device work has completed (the OOM ladder calls it before releasing the cache). 0 or -errno. */
	int (*synchronize)(void *ctx);
	/* Has device work up to timeline point @point completed? Called from any thread, concurrently. */
	bool (*point_done)(void *ctx, uint64_t point);

	/*
	 * Expandable segments (optional: without them, RBLN_ALLOC_CONF's
	 * expandable_segments is refused and the default stays off).
	 * reserve: address space to grow one pool's segment into; the
	 * provider chooses its *size (a multiple of 2 MiB). map: new memory
	 * of @size bytes (a multiple of 2 MiB) at @va inside a reservation,
	 * usable by jobs once it returns; *handle is an object jobs may
	 * list. 0, -ENOSPC when the device is full, other -errno. unmap:
	 * what one map put there, once no job can reach it (the provider
	 * waits for that).
	 */
	int (*reserve)(void *ctx, uint64_t *va, uint64_t *size);
	void (*release)(void *ctx, uint64_t va);
	int (*map)(void *ctx, uint64_t va, uint64_t size, uint32_t *handle);
	void (*unmap)(void *ctx, uint64_t va, uint64_t size, uint32_t handle);
};

struct rbln_allocator;
struct rbln_block;	/* opaque */

/* With the options of the environment's RBLN_ALLOC_CONF (if invalid: a warning on stderr, the defaults). */
struct rbln_allocator *rbln_allocator_create(const struct rbln_segment_ops *ops, void *ctx);
/*
 * With the options in @conf ("key:value,...", as RBLN_ALLOC_CONF; NULL or "": the defaults).
 * NULL with errno EINVAL and the reason in @msg for an invalid @conf or incomplete @ops.
 */
struct rbln_allocator *rbln_allocator_create_conf(const struct rbln_segment_ops *ops, void *ctx,
						  const char *conf, char *msg, size_t msglen);
void rbln_allocator_destroy(struct rbln_allocator *a);	/* frees every segment; blocks must all be freed */

/*
 * Allocates @size bytes (size > 0) for work on queue @queue.
 * 0 and *out, or -ENOMEM with an explanation in @msg (msg may be NULL; msglen its size) when the device
 * is out of memory after the OOM ladder, or -EINVAL for size 0 / absurd sizes (> 2^48), or the provider's errno.
 */
RBLN_INTERNAL int rbln_allocator_alloc(struct rbln_allocator *a, uint64_t size, uint32_t queue,
			 struct rbln_block **out, char *msg, size_t msglen);
/*
 * Frees a block. @last_point is the device timeline point of the last job that used it (0: none in flight),
 * @last_queue the queue that job ran on: until that point is done, the block may be reused only by
 * work on the same queue (which runs in order after it), like PyTorch's stream-ordered reuse.
 */
RBLN_INTERNAL void rbln_allocator_free(struct rbln_allocator *a, struct rbln_block *b,
				       uint64_t last_point, uint32_t last_queue);

RBLN_INTERNAL uint64_t rbln_block_va(const struct rbln_block *b);	/* device address of the block */
uint64_t rbln_block_size(const struct rbln_block *b);	/* the rounded size */
RBLN_INTERNAL uint32_t rbln_block_handle(const struct rbln_block *b);	/* a BO of its memory (for job BO lists) */
/*
 * The BO behind byte @offset of @b, *obj_offset that byte's offset in it
 * and *len how many bytes of @b from @offset it holds: an expandable
 * segment's block may span several.
 */
RBLN_INTERNAL uint32_t rbln_block_piece(const struct rbln_block *b, uint64_t offset,
					uint64_t *obj_offset, uint64_t *len);

/*
 * Releases every cached segment that is entirely free (unsplit), and unmaps
 * what free memory covers of expandable segments — PyTorch's empty_cache.
 */
void rbln_allocator_empty_cache(struct rbln_allocator *a);

/* One statistic, as in the seed: */
struct rbln_stat { int64_t current, peak, total_allocated, total_freed; };
struct rbln_allocator_stats {
	struct rbln_stat allocated;	/* bytes requested by callers */
	struct rbln_stat reserved;	/* bytes of segments held from the provider */
	struct rbln_stat active;	/* bytes of blocks in use (rounded sizes); only current and peak meaningful */
	struct rbln_stat cached;	/* bytes of free blocks inside segments; only current and peak meaningful */
	int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
};
void rbln_allocator_stats(struct rbln_allocator *a, struct rbln_allocator_stats *out);
void rbln_allocator_reset_peak(struct rbln_allocator *a);		/* peak = current, for every stat */
void rbln_allocator_reset_accumulated(struct rbln_allocator *a);	/* totals and counters to 0 */

/*
 * Allocators that count together: the members of a logical device.  The
 * group keeps the current value and the peak of allocated, reserved,
 * active and cached over all of them, and each operation of a member
 * applies its net change to them as it applies it to its own, under the
 * group's lock: so a group's peak is a value its sum had, where the sum of
 * the members' peaks may be one it never had (their peaks need not come at
 * once).  Totals and counters are plain sums of the members', and are not
 * kept here.  The lock is taken last of all, with nothing inside it.
 */
struct rbln_alloc_group {
	pthread_mutex_t lock;
	int64_t current[4], peak[4];	/* private: rbln_alloc_group_stats() reads them */
};
void rbln_alloc_group_init(struct rbln_alloc_group *g);
void rbln_alloc_group_destroy(struct rbln_alloc_group *g);	/* once its members are gone */
/* From now on @a counts in @g (with what it holds now); once per allocator. */
void rbln_allocator_join(struct rbln_allocator *a, struct rbln_alloc_group *g);
/* current and peak of allocated, reserved, active and cached over @g; the rest 0. */
void rbln_alloc_group_stats(struct rbln_alloc_group *g, struct rbln_allocator_stats *out);
/* The group's peaks become its current values (the members' own: rbln_allocator_reset_peak()). */
void rbln_alloc_group_reset_peak(struct rbln_alloc_group *g);

/*
 * Memory history and snapshots (rbln_memory_snapshot(3) over these).
 *
 * A site: the return addresses of a call into the allocator, captured when
 * history is on with stacks and shared (counted references) by the block
 * it allocated and the events it caused.  frames[0] is inside the
 * allocator's entry point; its callers follow.  Never symbolized here.
 * @caller is what the caller function (rbln_alloc_set_caller_fn()) said
 * the calling thread was doing: a framework's name for its user's code.
 */
#define RBLN_ALLOC_SITE_FRAMES	16
struct rbln_alloc_site {
	atomic_uint refs;
	const char *caller;	/* e.g. "model.py:12", kept for the process's life; or NULL */
	unsigned int nframes;
	void *frames[];
};
void rbln_alloc_site_put(struct rbln_alloc_site *s);	/* drops a reference; NULL is a no-op */

/*
 * Where the calling thread's code comes from, by the name a framework
 * above gave it (a string kept for the process's life), or NULL.  Sites
 * captured from now on ask @fn (NULL: nobody); any thread may set it.
 */
typedef const char *(*rbln_alloc_caller_fn)(void);
void rbln_alloc_set_caller_fn(rbln_alloc_caller_fn fn);
/* Whether @a records its history with stacks now. */
bool rbln_allocator_records_stacks(struct rbln_allocator *a);

/*
 * Turns the history on (a ring of the newest @max_entries events, 1 to
 * RBLN_MEMORY_HISTORY_MAX; with @stacks, sites of allocations and frees) or
 * off (the ring is freed; blocks keep the sites they were allocated with).
 * Turning it on again keeps the newest events that fit.  0, -EINVAL or
 * -ENOMEM.
 */
int rbln_allocator_record_history(struct rbln_allocator *a, bool enabled, bool stacks,
				  size_t max_entries);

/* One event; @site NULL without stacks.  PyTorch's TraceEntry. */
struct rbln_alloc_event {
	enum rbln_memory_action action;
	uint32_t queue;
	uint64_t addr, size;	/* size: bytes requested; a segment's size for segment events */
	int64_t time_us;	/* CLOCK_REALTIME */
	struct rbln_alloc_site *site;
};

struct rbln_alloc_snap_block {
	uint64_t va, size, requested;
	enum rbln_memory_block_state state;
	int64_t queue;		/* allocated for / pending on; -1 when inactive */
	bool thread_cached;	/* free, in a thread's cache */
	struct rbln_alloc_site *site;
};

struct rbln_alloc_snap_segment {
	uint64_t va, size;
	uint64_t allocated;	/* rounded sizes of allocated blocks */
	uint64_t active;	/* the same plus blocks pending free */
	uint64_t requested;	/* bytes requested by the allocated blocks */
	uint32_t queue;
	bool small;		/* of the small pool */
	bool expandable;	/* a run of mapped memory of a segment that maps and unmaps */
	struct rbln_alloc_site *site;
	size_t first_block, nblocks;	/* its blocks in the snapshot's, by address */
};

/*
 * One consistent state: every segment by address and its blocks, then the
 * history's events, oldest first.  The sites are referenced until release.
 */
struct rbln_alloc_snapshot {
	struct rbln_alloc_snap_segment *segments;
	size_t nsegments;
	struct rbln_alloc_snap_block *blocks;
	size_t nblocks;
	struct rbln_alloc_event *events;
	size_t nevents;
};
int rbln_allocator_snapshot(struct rbln_allocator *a, struct rbln_alloc_snapshot *out);	/* 0 or -ENOMEM */
void rbln_alloc_snapshot_release(struct rbln_alloc_snapshot *s);

#endif /* RBLN_ALLOC_H */
