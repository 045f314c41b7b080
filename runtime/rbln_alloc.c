// SPDX-License-Identifier: MIT
/*
 * rbln_alloc.c - librbln's device-memory caching allocator
 *
 * Behaviour follows PyTorch's CUDACachingAllocator (see rbln_alloc.h):
 *
 *  - Requests round up to 512 bytes.  Rounded sizes <= 1 MiB come from the
 *    small pool (2 MiB segments), bigger ones from the large pool (a 20 MiB
 *    segment below 10 MiB, else the size rounded up to 2 MiB).
 *  - Best fit within the pool: the smallest eligible free block, ties by the
 *    lowest address.  A block bigger than needed is split when the remainder
 *    is >= 512 bytes (small pool) or > 1 MiB (large pool).
 *  - A free block coalesces with its free neighbours of the same segment.
 *  - Out of device memory (-ENOSPC from the provider): synchronize, release
 *    every entirely free segment and retry once (num_alloc_retries); then
 *    fail with -ENOMEM and an explanation (num_ooms).
 *
 * RBLN_ALLOC_CONF, modelled on PYTORCH_CUDA_ALLOC_CONF, changes some of
 * this (struct alloc_conf; docs/runtime.md lists the options).
 *
 * Expandable segments (expandable_segments:True, the default when the
 * provider can map), as PyTorch's on CUDA's virtual memory API: each pool
 * has one segment, an address range reserved once, that grows by mapping
 * memory (the provider's map: VM_BIND in librbln) when no free block fits,
 * and shrinks by unmapping every map that free memory no job uses covers
 * whole (empty_cache, the OOM ladder), below allocated blocks too.  The
 * holes that leaves are where it grows first.  A block may span several
 * maps, so the tail of one burst of temporaries and the next burst's blocks
 * coalesce where fixed segments would strand them; it never spans a hole
 * (neighbours in a segment's list merge only when adjacent).  A pool grows
 * by at least a plain segment's size where the hole allows (2 MiB small,
 * 20 MiB large, as PyTorch maps), so it makes no more provider objects
 * than plain segments would; reserved counts mapped bytes.
 *
 * Queue-ordered reuse.  Every free block carries a "pending" state: the
 * timeline point of the last job that used its memory and that job's queue.
 * Until the point is done only work on that same queue, which runs in order
 * after it, may reuse the block.  A block built from memory pending on two
 * different queues (by coalescing) is "mixed": nobody reuses it until its
 * point, the max of both, is done.  A block handed out from pending memory
 * keeps that pending state as well, so that freeing it again with no job
 * (last_point 0) cannot make memory another queue's job may still be using
 * reusable by a third queue early.  Points are a single device timeline and
 * point_done(p) means "all work up to p is done", so pending blocks sit in a
 * min-heap by point and are promoted from its top while their point is done.
 * (Were a provider's point_done not monotonic, blocks would be promoted late,
 * never early.)
 *
 * Data structures.  Free blocks reusable by any queue are indexed by
 * (size, va): in the small pool one treap per 512-byte size class (sizes
 * reach 2 MiB, a segment) with a two-level bitmap of the non-empty classes,
 * so that best fit is a bit scan plus the leftmost node of a (usually tiny)
 * treap; in the large pool, with few and varied blocks, one treap.  The free
 * blocks pending on one queue are in a treap per pool ordered by (queue,
 * size, va): best fit is one O(log n) descent, no scan.  Mixed blocks sit
 * only in the heap.  Blocks of a segment form an address-ordered doubly
 * linked list for coalescing.  Block records come from a free list refilled
 * a chunk at a time, not from malloc per split.
 *
 * Thread caches.  Each thread keeps a bounded cache of the small blocks it
 * freed (struct tcache), binned by size: an allocation on an eligible
 * queue takes back the newest block of the smallest size that fits and is
 * at most half as big again (TC_BAND), without the allocator's mutex, so
 * that a thread's small pairs cost tens of nanoseconds and threads stop
 * queueing on that mutex.  Placement differs from PyTorch's for the blocks
 * a thread frees and allocates again; thread_cache:0 gives its exact
 * placement.  Cached blocks stay allocated as far as the pools are
 * concerned (nobody coalesces into them) and carry their pending state,
 * so the queue rule holds for them as for the pools.  They go back to the
 * pools on overflow (the older half of each bin), at thread exit, in
 * empty_cache, and when the pools cannot serve a request: the thread's
 * own cache before a pool grows, other threads' caches (claimed, see
 * Locking) on the OOM ladder, before the device is out of memory.
 *
 * Locking.  One mutex per allocator guards the pools, the segments and the
 * list of thread caches.  A thread enters its own cache with plain loads
 * and stores (tc_enter()): busy set, claimed tested.  Any other access to
 * a cache is a claim, by a holder of the allocator's mutex (destroy holds
 * the registry's instead): it takes the cache's mutex, sets claimed and
 * waits until the owner is out of its fast path, which the owner shows by
 * acknowledging the claim (ack_seq) at its next entry or while it waits
 * for the allocator's mutex, or else membarrier(2) and busy show
 * (tc_mark_claimed()).  Without membarrier, owners take their cache's
 * mutex instead.  Lock order: tc_registry, allocator, thread caches in
 * list order; a thread never holds its cache's mutex while it waits for
 * the allocator's.  The allocator's mutex spins briefly before it sleeps
 * (it is held for short stretches, by threads on other CPUs).  Block
 * records, caches and the allocator's read-mostly fields have cache lines
 * of their own.  The provider's alloc and free are called under the
 * allocator's mutex (they are quick ioctls, and PyTorch likewise holds its
 * mutex around cudaMalloc); point_done is called with or without it, from
 * any thread.  synchronize, which can wait for a long time, is never called
 * with a mutex held: the OOM ladder and empty_cache drop it, wait, retake it
 * and look at the state afresh.  Other threads keep allocating and freeing
 * meanwhile.
 *
 * Statistics.  allocated, active and cached change on the thread caches'
 * fast paths as well.  Their current value is base (changed under the
 * allocator's mutex) plus every cache's share cur (changed by its owner,
 * or by a claimer), so that threads share no counter.  Peaks stay exact
 * without a global order on every operation: each cache has an allowance,
 * and base + the sum of allowances <= peak, so no current value can pass
 * its peak unseen.  A cache whose share would rise past its allowance
 * redoes the operation with every cache claimed, folds the exact sum into
 * the peak and shares the headroom left below the peaks out again, evenly
 * (peaks_fold_locked()); so does an operation under the allocator's mutex
 * that raises base too far.  Between peaks, a thread claims other
 * threads' caches only when it has used up its share of the headroom.
 * Totals and the counters that only change under a mutex are plain, a
 * thread cache's totals kept in the cache and folded in on reading.  An
 * operation applies its net change once, at its end, so a peak is the
 * maximum over states between operations (a fresh segment does not flash
 * its whole size into cached.peak before the block carved from it becomes
 * active).  Readers, reset_peak and reset_accumulated hold the allocator's
 * mutex and claim every thread cache: a snapshot is of one state, in which
 * cached == reserved - active.
 *
 * Groups.  An allocator in a group (the members of a logical device)
 * applies each operation's net change to the group as well, where it
 * applies it to itself: on a cache's fast path inside the cache, else in
 * delta_apply() under its mutex, with the change of reserved since the
 * last one.  The group's current values are exact sums and its peaks the
 * largest sums between operations, kept under the group's lock, the last
 * lock taken (see rbln_alloc.h).
 *
 * History.  Off, the entry points test one flag and pass no call record
 * down (struct call): nothing is recorded, no site captured, and a free
 * tests the block's site, which it keeps only from an allocation made with
 * history on.  On, an entry point captures its caller's return addresses
 * (with stacks) before taking any lock, and each event goes into a bounded
 * ring under the history's own mutex, taken inside whatever guards the
 * block or segment the event is about (the allocator's mutex, or a thread
 * cache's ownership on its fast path): so an event is in the ring before
 * another thread can see the change it records, and a block's alloc and
 * free events come in the order it changed hands.  Lock order: allocator,
 * thread caches, history.
 * A free with its job pending is kept aside (struct pending_free) until the
 * allocator finds the job's point done or hands the memory out again on
 * that queue: then its free_completed is recorded.  Snapshots hold every
 * lock, like the statistics, and add up to them exactly.
 */

#include <errno.h>
#include <execinfo.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rbln_alloc.h"

#define KiB			(1ull << 10)
#define MiB			(1ull << 20)

#define MIN_BLOCK_SIZE		512ull		/* rounding granule and smallest block */
#define SMALL_SIZE		(1 * MiB)	/* largest request served by the small pool */
#define SMALL_BUFFER		(2 * MiB)	/* small-pool segment size */
#define LARGE_BUFFER		(20 * MiB)	/* large-pool segment for requests below MIN_LARGE_ALLOC */
#define MIN_LARGE_ALLOC		(10 * MiB)
#define ROUND_LARGE		(2 * MiB)	/* large segments above MIN_LARGE_ALLOC round to this */
#define MAX_ALLOC_SIZE		(1ull << 48)

/* Small-pool size classes: every multiple of 512 up to a segment. */
#define NCLASS			(SMALL_BUFFER / MIN_BLOCK_SIZE)
#define NCLASS_WORDS		(NCLASS / 64)

/* Thread caches: blocks up to TC_MAX_SIZE, at most TC_MAX_BYTES per thread. */
#define TC_MAX_SIZE		(256 * KiB)
#define TC_CLASSES		(TC_MAX_SIZE / MIN_BLOCK_SIZE)
#define TC_MAX_BYTES		SMALL_BUFFER
#define TC_DEFAULT_BLOCKS	128
/*
 * How long a claim spins for an acknowledgement before it uses membarrier
 * (15 us here); a test builds it with 0, to make every claim of a running
 * owner's cache a membarrier.  How long an owner spins for a claim's end,
 * or for the allocator's mutex while acknowledging claims, before it
 * yields (or sleeps), and yields for a claim's end before it sleeps.
 */
#ifndef TC_ACK_SPIN_NS
#define TC_ACK_SPIN_NS		4000
#endif
#define TC_WAIT_SPIN_NS		4000
#define TC_WAIT_YIELD_NS	1000000
/*
 * A cached block serves requests down to 2/3 of its size (the smallest
 * fitting one first): a bigger block now costs less than queueing for the
 * allocator's mutex with another thread.
 */
#define TC_BAND(size)		(((size) / 2) & ~(MIN_BLOCK_SIZE - 1))

#define BLOCKS_PER_CHUNK	64
#define CACHE_LINE		64

enum pool_id { POOL_SMALL, POOL_LARGE, POOL_COUNT };

/* Where a free block is indexed. */
enum block_where {
	W_NONE,		/* allocated, in a thread cache, or in transit inside a function */
	W_READY,	/* the pool's ready index: reusable by any queue */
	W_PENDING,	/* pool->pending treap and the heap: reusable by its queue only */
	W_MIXED,	/* heap only: reusable by nobody until its point is done */
};

/* Pending state of a block's memory: point 0 means nothing in flight. */
struct pstate {
	uint64_t point;
	uint32_t queue;
	bool mixed;	/* pending on more than one queue */
};

/* What one map of an expandable segment put at [va, va + size). */
struct rbln_chunk {
	uint64_t va, size;
	uint32_t handle;
};

struct rbln_segment {
	uint64_t va, size;	/* expandable: size is what is mapped, from va up with holes */
	uint32_t handle;	/* plain segments */
	uint64_t span;		/* expandable: the address space reserved; 0 for plain */
	struct rbln_chunk *chunks;	/* expandable: what is mapped, by address */
	size_t nchunks, chunks_cap;
	uint32_t queue;			/* of the request it was reserved for */
	enum pool_id pool;
	struct rbln_alloc_site *site;	/* where that request came from, with history on */
	struct rbln_block *first;	/* lowest-address block; never changes in plain segments */
	struct rbln_segment *prev, *next;
};

/*
 * A cache line or two of its own: records of different threads' blocks
 * sharing a line cost thread caches half their speed (false sharing).
 */
struct rbln_block {
	alignas(CACHE_LINE) struct rbln_segment *seg;
	struct rbln_block *prev, *next;	/* neighbours in the segment, by address */
	uint64_t va, size;		/* size: rounded / whole block */
	uint64_t requested;		/* bytes the caller asked for, while allocated */
	bool allocated;			/* not in a pool: in use or in a thread cache */
	bool in_tc;			/* in a thread cache */
	uint32_t queue;			/* the queue it was last allocated for */
	struct pstate st;

	enum block_where where;
	uint32_t prio;
	struct rbln_block *left, *right;	/* treap links */
	struct rbln_block *tc_next;	/* a thread cache's size bin */
	struct rbln_alloc_site *site;	/* where it was allocated, while allocated with history on */
	size_t heap_idx;
};

struct pool {
	struct rbln_block *ready;	/* large pool: treap by (size, va) */
	struct rbln_block *pending;	/* treap by (queue, size, va) */
};

/* Options from RBLN_ALLOC_CONF. */
struct alloc_conf {
	bool exact_large_segments;	/* large segments below 10 MiB: the request rounded to 2 MiB */
	bool release_before_grow;	/* release free cached segments before reserving one */
	uint64_t max_split_size;	/* large blocks at least this big are not split; 0: no limit */
	unsigned int thread_cache;	/* blocks per thread cache; 0: no thread caches */
	int expandable;			/* expandable_segments: 1, 0, -1 unset (on if the provider maps) */
};

/* The statistics thread caches change too (see Statistics). */
enum { S_ALLOCATED, S_ACTIVE, S_CACHED, S_SHARED };

/* Their totals: total_allocated, total_freed. */
struct totals {
	int64_t in[S_SHARED], out[S_SHARED];
};

/* One thread's cache of freed small blocks for one allocator; lines of its own. */
struct tcache {
	alignas(CACHE_LINE) pthread_mutex_t lock;	/* the fields below; see Locking */
	atomic_bool busy;		/* its thread is in its fast path (tc_enter()) */
	atomic_bool claimed;		/* a holder of lock keeps its thread out (tc_claim()) */
	atomic_uint claim_seq;		/* claims so far, changed under lock */
	atomic_uint ack_seq;		/* the last claim its thread acknowledged */
	_Atomic(struct rbln_allocator *) a;	/* NULL once the allocator is destroyed */
	struct tcache *prev, *next;	/* the allocator's list, under its mutex */
	struct tcache *tnext;		/* the owning thread's list */
	struct rbln_block *bin[TC_CLASSES];	/* by size, newest first, through tc_next */
	uint64_t bin_bits[TC_CLASSES / 64];	/* non-empty bins */
	unsigned int count;
	uint64_t bytes;
	struct totals totals;
	int64_t cur[S_SHARED];		/* this thread's share of each current value */
	int64_t allow[S_SHARED];	/* how far cur may rise without the allocator's mutex */
};

/* A free whose last job is not done: its free_completed is due then. */
struct pending_free {
	uint64_t addr, size, point;
	uint32_t queue;
	struct rbln_alloc_site *site;
};

/* The memory history (see History); its mutex is taken last of all. */
struct history {
	pthread_mutex_t lock;
	atomic_bool stacks;
	struct rbln_alloc_event *ring;	/* NULL while off */
	size_t cap, max, head, len;	/* allocated, the bound, the oldest, in use */
	struct pending_free *pend;	/* in order of free */
	size_t npend, pend_cap;
	uint64_t pend_min;		/* the lowest point in pend */
};

/* An allocator call whose events are recorded; NULL where history is off. */
struct call {
	struct rbln_alloc_site *site;	/* NULL without stacks */
};

struct block_chunk {
	struct block_chunk *next;
	struct rbln_block blocks[BLOCKS_PER_CHUNK];
};

struct rbln_allocator {
	/* set at creation: the thread caches' fast paths read these alone */
	struct rbln_segment_ops ops;
	void *ctx;
	struct alloc_conf conf;
	atomic_bool hist_on;		/* history: the one flag the fast paths test */
	struct rbln_alloc_group *group;	/* set by join with every lock held; NULL: none */

	/* written under lock, away from the lines above (false sharing) */
	alignas(CACHE_LINE) pthread_mutex_t lock;
	struct pool pools[POOL_COUNT];
	struct rbln_block *cls[NCLASS];	/* small pool's ready blocks: treap by va per size class */
	uint64_t cls_bits[NCLASS_WORDS];	/* non-empty classes */
	uint64_t cls_summary;		/* non-zero words of cls_bits */
	struct rbln_block **heap;	/* min-heap of pending/mixed free blocks by point */
	size_t heap_len, heap_cap;	/* heap_cap >= nblocks: pushes never allocate */
	size_t nblocks;
	struct rbln_block *spare;	/* unused block records, through next */
	struct block_chunk *chunks;
	struct rbln_segment *segments;	/* every segment held */
	bool expandable;
	struct rbln_segment *exp[POOL_COUNT];	/* each pool's expandable segment, once mapped */
	uint64_t prio_state;

	struct tcache *tcaches;

	int64_t base[S_SHARED];		/* current values, but for the thread caches' shares */
	int64_t peak[S_SHARED];
	int64_t allow_sum[S_SHARED];	/* of the thread caches' allow */
	struct totals totals;		/* of the mutex-protected paths */
	struct rbln_stat reserved;
	int64_t group_reserved;		/* reserved.current as the group last had it */
	int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;

	struct history hist;
};

/* ---- thread cache ownership ------------------------------------------ */

/*
 * Whether claims can use membarrier(2): then a thread enters its own cache
 * with plain stores and loads (tc_enter()), no atomic read-modify-write,
 * and never a fence; without it, it takes the cache's mutex.
 */
static bool tc_asym;
static pthread_once_t tc_asym_once = PTHREAD_ONCE_INIT;

static void tc_asym_init(void)
{
	tc_asym = !syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
}

static struct tcache *tc_find(struct rbln_allocator *a);
static bool tc_enter_claimed(struct tcache *tc);

static inline __attribute__((always_inline)) void tc_mark_busy(struct tcache *tc)
{
	/* the compiler keeps the store between the fast path and the load of claimed */
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&tc->busy, true, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

/*
 * The owning thread's way into @tc: true if it then holds @tc's mutex
 * (after a long claim, or without membarrier(2)), false if it is merely
 * marked busy.  See tc_mark_claimed().
 */
static inline __attribute__((always_inline)) bool tc_enter(struct tcache *tc)
{
	if (!tc_asym) {
		pthread_mutex_lock(&tc->lock);
		return true;
	}
	tc_mark_busy(tc);
	if (__builtin_expect(!atomic_load_explicit(&tc->claimed, memory_order_acquire), 1))
		return false;
	return tc_enter_claimed(tc);
}

static inline __attribute__((always_inline)) void tc_leave(struct tcache *tc, bool locked)
{
	if (locked)
		pthread_mutex_unlock(&tc->lock);
	else
		atomic_store_explicit(&tc->busy, false, memory_order_release);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void tc_ack(struct tcache *tc)
{
	atomic_store_explicit(&tc->ack_seq, atomic_load_explicit(&tc->claim_seq, memory_order_relaxed),
			      memory_order_release);
}

static bool tc_acked(struct tcache *tc)
{
	return atomic_load_explicit(&tc->ack_seq, memory_order_acquire) ==
	       atomic_load_explicit(&tc->claim_seq, memory_order_relaxed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Whether a spin that began at @t0 has had @limit ns, at its @n-th turn. */
static bool spin_expired(unsigned int n, uint64_t t0, uint64_t limit)
{
	return (n % 64 == 0 || !limit) && now_ns() - t0 > limit;
}

/*
 * Waits until @tc's claim ends (claims are short: a fold of the peaks, a
 * reclaim, a snapshot): true, or false after TC_WAIT_YIELD_NS, when its
 * owner should sleep on the mutex.  It spins, then yields rather than
 * sleeps: a claimer that claims again right after unclaiming would take
 * the mutex again before a woken owner runs, over and over; an owner that
 * watches claimed enters in between.
 */
static bool tc_wait_unclaimed(struct tcache *tc)
{
	uint64_t t0 = now_ns();
	unsigned int n;

	for (n = 1; atomic_load_explicit(&tc->claimed, memory_order_relaxed); n++) {
		if (!spin_expired(n, t0, TC_WAIT_SPIN_NS))
			cpu_relax();
		else if (spin_expired(n, t0, TC_WAIT_YIELD_NS))
			return false;
		else
			sched_yield();
	}
	return true;
}

/*
 * tc_enter() on a claimed cache: acknowledges the claim (ack_seq) and
 * waits for its end, then enters again.
 */
static __attribute__((noinline)) bool tc_enter_claimed(struct tcache *tc)
{
	do {
		atomic_store_explicit(&tc->busy, false, memory_order_release);
		tc_ack(tc);
		if (!tc_wait_unclaimed(tc)) {
			pthread_mutex_lock(&tc->lock);
			return true;
		}
		tc_mark_busy(tc);
	} while (atomic_load_explicit(&tc->claimed, memory_order_acquire));
	return false;
}

/*
 * Marks the caches from @tc on (only @tc with @one), their mutexes held,
 * claimed, and waits until their owners are out of their fast paths; the
 * calling thread's own cache (@own) is not in its fast path.
 *
 * An owner that is allocating or freeing acknowledges the claim at its
 * next entry, within nanoseconds: its release of ack_seq publishes what it
 * did in its cache.  One that does not within TC_ACK_SPIN_NS (it is busy
 * elsewhere, asleep, or waiting for the allocator's mutex) is waited for
 * the asymmetric way, as in the pattern of membarrier(2)'s manual page:
 * membarrier makes every running thread pass a full barrier, after which
 * either the owner's load sees claimed or the claimer's sees busy, never
 * neither.  So the owner's fast path needs no fence either way.
 */
static void tc_mark_claimed(struct tcache *tc, bool one, struct tcache *own)
{
	bool waiting = false;
	struct tcache *t;
	unsigned int n;
	uint64_t t0;

	for (t = tc; t; t = one ? NULL : t->next) {
		atomic_store_explicit(&t->claim_seq,
				      atomic_load_explicit(&t->claim_seq, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		atomic_store(&t->claimed, true);
		waiting |= t != own;
	}
	if (!tc_asym || !waiting)
		return;
	t0 = now_ns();
	for (n = 1; ; n++) {
		waiting = false;
		for (t = tc; t && !waiting; t = one ? NULL : t->next)
			waiting = t != own && !tc_acked(t);
		if (!waiting)
			return;
		cpu_relax();
		if (spin_expired(n, t0, TC_ACK_SPIN_NS))
			break;
	}
	/* Cannot fail once registered; were it to, blocks would be handed out twice. */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		abort();
	for (t = tc; t; t = one ? NULL : t->next)
		while (t != own && !tc_acked(t) && atomic_load(&t->busy))
			sched_yield();
}

/*
 * Takes the allocator's mutex.  Its holder may be claiming this thread's
 * cache: while the mutex is taken, the thread acknowledges such claims, as
 * it would on entering its cache, so that they need no membarrier; after
 * TC_WAIT_SPIN_NS it sleeps on the mutex.
 */
static void alloc_lock(struct rbln_allocator *a)
{
	struct tcache *own;
	unsigned int n;
	uint64_t t0;

	if (!pthread_mutex_trylock(&a->lock))
		return;
	own = tc_asym ? tc_find(a) : NULL;
	if (own) {
		t0 = now_ns();
		for (n = 1; ; n++) {
			if (atomic_load_explicit(&own->claimed, memory_order_acquire))
				tc_ack(own);
			if (!pthread_mutex_trylock(&a->lock))
				return;
			cpu_relax();
			if (spin_expired(n, t0, TC_WAIT_SPIN_NS))
				break;
		}
	}
	pthread_mutex_lock(&a->lock);
}

/* Claims @tc alone: its mutex, and its owner kept out; @own: the caller's cache. */
static void tc_claim(struct tcache *tc, struct tcache *own)
{
	pthread_mutex_lock(&tc->lock);
	tc_mark_claimed(tc, true, own);
}

static void tc_unclaim(struct tcache *tc)
{
	atomic_store_explicit(&tc->claimed, false, memory_order_release);
	pthread_mutex_unlock(&tc->lock);
}

/* ---- statistics ------------------------------------------------------- */

/* Net change of one operation. */
struct delta {
	int64_t d[S_SHARED];
};

static void tc_lock_all(struct rbln_allocator *a);
static void tc_unlock_all(struct rbln_allocator *a);

/* Current value of stat @i; the allocator's mutex and every thread cache's held. */
static int64_t stat_current(struct rbln_allocator *a, int i)
{
	int64_t v = a->base[i];
	struct tcache *tc;

	for (tc = a->tcaches; tc; tc = tc->next)
		v += tc->cur[i];
	return v;
}

/*
 * Folds the current values into the peaks, then shares the headroom below
 * the peaks out among the thread caches as their allowances (all of it with
 * @spread, none without).  The allocator's mutex and every thread cache's
 * held.
 */
static void peaks_fold_locked(struct rbln_allocator *a, bool spread)
{
	struct tcache *tc;
	int64_t n = 0;
	int i;

	for (tc = a->tcaches; tc; tc = tc->next)
		n++;
	for (i = 0; i < S_SHARED; i++) {
		int64_t cur = stat_current(a, i), share;

		if (cur > a->peak[i])
			a->peak[i] = cur;
		share = spread && n ? (a->peak[i] - cur) / n : 0;
		a->allow_sum[i] = 0;
		for (tc = a->tcaches; tc; tc = tc->next) {
			tc->allow[i] = tc->cur[i] + share;
			a->allow_sum[i] += tc->allow[i];
		}
	}
}

/* The allocator's mutex held: claims every thread cache to fold the peaks and share out headroom. */
static void peaks_refold(struct rbln_allocator *a)
{
	tc_lock_all(a);
	peaks_fold_locked(a, true);
	tc_unlock_all(a);
}

/* A group's figures: the shared statistics', then reserved's. */
enum { G_RESERVED = S_SHARED, G_STATS };
_Static_assert(G_STATS == sizeof(((struct rbln_alloc_group *)0)->current) / sizeof(int64_t),
	       "a group keeps every statistic with a current value");

/* Adds @d to the group's value of stat @i, its lock held. */
static void group_move(struct rbln_alloc_group *g, int i, int64_t d)
{
	g->current[i] += d;
	if (g->current[i] > g->peak[i])
		g->peak[i] = g->current[i];
}

/*
 * Applies an operation's net change @d, and @reserved to reserved, to
 * @a's group, where @a applies it to itself (see Groups).
 */
static void group_apply(struct rbln_allocator *a, const struct delta *d, int64_t reserved)
{
	struct rbln_alloc_group *g = a->group;
	int i;

	pthread_mutex_lock(&g->lock);
	for (i = 0; i < S_SHARED; i++)
		group_move(g, i, d->d[i]);
	group_move(g, G_RESERVED, reserved);
	pthread_mutex_unlock(&g->lock);
}

/*
 * Applies a thread cache operation's net change to @tc's share, its lock
 * held: false, and nothing changed, if a value would rise past its
 * allowance, unless @exact (every lock held: the caller folds the peaks).
 */
static inline __attribute__((always_inline)) bool
tc_delta_apply(struct tcache *tc, const struct delta *d, bool exact)
{
	int i;

	for (i = 0; i < S_SHARED && !exact; i++)
		if (d->d[i] > 0 && tc->cur[i] + d->d[i] > tc->allow[i])
			return false;
	for (i = 0; i < S_SHARED; i++) {
		tc->cur[i] += d->d[i];
		if (d->d[i] < 0)
			tc->totals.out[i] -= d->d[i];
		else
			tc->totals.in[i] += d->d[i];
	}
	return true;
}

/*
 * Applies an operation's net change at its end, the allocator's mutex
 * held: to the calling thread's share if it has a cache and the allowance
 * suffices, else to base.  base + allow_sum <= peak holds between
 * operations, so a current value can only pass its peak when base grows
 * past that or a cache's allowance runs short: then the exact values are
 * folded in.
 */
static void delta_apply(struct rbln_allocator *a, const struct delta *d)
{
	struct tcache *tc = a->tcaches ? tc_find(a) : NULL;
	bool over = false;
	int i;

	if (a->group) {
		int64_t r = a->reserved.current - a->group_reserved;

		a->group_reserved = a->reserved.current;
		if (r || d->d[S_ALLOCATED] || d->d[S_ACTIVE] || d->d[S_CACHED])
			group_apply(a, d, r);
	}
	if (tc) {
		bool taken;

		bool locked = tc_enter(tc);

		taken = tc_delta_apply(tc, d, false);
		tc_leave(tc, locked);
		if (taken)
			return;
	}
	for (i = 0; i < S_SHARED; i++) {
		int64_t v = d->d[i];

		a->base[i] += v;
		if (v < 0) {
			a->totals.out[i] -= v;
		} else if (v) {
			a->totals.in[i] += v;
			over |= a->base[i] + a->allow_sum[i] > a->peak[i];
		}
	}
	if (over)
		peaks_refold(a);
}

/* At the end of an operation under the allocator's mutex. */
static void fold_reserved_peak(struct rbln_allocator *a)
{
	if (a->reserved.current > a->reserved.peak)
		a->reserved.peak = a->reserved.current;
}

/* Peaks of reserved are folded in by delta_apply(), at the end of the operation. */
static void reserved_add(struct rbln_allocator *a, int64_t d)
{
	a->reserved.current += d;
	if (d > 0)
		a->reserved.total_allocated += d;
	else
		a->reserved.total_freed -= d;
}

/* ---- configuration ---------------------------------------------------- */

static int parse_bool(const char *v, size_t n, bool *out)
{
	if ((n == 4 && !strncasecmp(v, "true", 4)) || (n == 1 && v[0] == '1'))
		*out = true;
	else if ((n == 5 && !strncasecmp(v, "false", 5)) || (n == 1 && v[0] == '0'))
		*out = false;
	else
		return -1;
	return 0;
}

static int parse_uint(const char *v, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t x = 0;
	size_t i;

	if (!n)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9' || x > (max - (uint64_t)(v[i] - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 0;
}

static void set_msg(char *msg, size_t msglen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_msg(char *msg, size_t msglen, const char *fmt, ...)
{
	va_list ap;

	if (!msg || !msglen)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, msglen, fmt, ap);
	va_end(ap);
}

/* "key:value,key:value" as in PYTORCH_CUDA_ALLOC_CONF; 0, or -EINVAL and why in @msg. */
static int conf_parse(const char *s, struct alloc_conf *c, char *msg, size_t msglen)
{
	*c = (struct alloc_conf){ .thread_cache = TC_DEFAULT_BLOCKS, .expandable = -1 };
	while (s && *s) {
		size_t len = strcspn(s, ","), klen = strcspn(s, ":,"), vlen;
		const char *v = s + klen + 1;
		uint64_t x = 0;
		bool flag;
		int bad = 0;

		if (klen >= len) {
			set_msg(msg, msglen, "'%.*s' is not key:value", (int)len, s);
			return -EINVAL;
		}
		vlen = len - klen - 1;
#define KEY(k) (klen == sizeof(k) - 1 && !strncmp(s, k, klen))
		if (KEY("exact_large_segments")) {
			bad = parse_bool(v, vlen, &c->exact_large_segments);
		} else if (KEY("release_before_grow")) {
			bad = parse_bool(v, vlen, &c->release_before_grow);
		} else if (KEY("max_split_size_mb")) {
			/* as in PyTorch: more than the 20 MiB segment, so small requests can split */
			bad = parse_uint(v, vlen, MAX_ALLOC_SIZE / MiB, &x) || x <= LARGE_BUFFER / MiB;
			c->max_split_size = x * MiB;
		} else if (KEY("thread_cache")) {
			bad = parse_uint(v, vlen, TC_MAX_BYTES / MIN_BLOCK_SIZE, &x);
			c->thread_cache = (unsigned int)x;
		} else if (KEY("expandable_segments")) {
			bad = parse_bool(v, vlen, &flag);
			c->expandable = flag;
		} else {
			set_msg(msg, msglen, "unknown option '%.*s'", (int)klen, s);
			return -EINVAL;
		}
#undef KEY
		if (bad) {
			set_msg(msg, msglen, "bad value '%.*s' for %.*s", (int)vlen, v, (int)klen, s);
			return -EINVAL;
		}
		s += len + (s[len] == ',');
	}
	return 0;
}

/* ---- pending state ---------------------------------------------------- */

static struct pstate pstate_normalize(const struct rbln_allocator *a, struct pstate s)
{
	if (s.point && a->ops.point_done(a->ctx, s.point))
		s = (struct pstate){ 0 };
	return s;
}

static struct pstate pstate_merge(struct pstate x, struct pstate y)
{
	struct pstate r;

	if (!x.point)
		return y;
	if (!y.point)
		return x;
	r.point = x.point > y.point ? x.point : y.point;
	r.queue = x.queue;
	r.mixed = x.mixed || y.mixed || x.queue != y.queue;
	return r;
}

/* ---- history ---------------------------------------------------------- */

static bool hist_on(struct rbln_allocator *a)
{
	return atomic_load_explicit(&a->hist_on, memory_order_relaxed);
}

static struct rbln_alloc_site *site_get(struct rbln_alloc_site *s)
{
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void rbln_alloc_site_put(struct rbln_alloc_site *s)
{
	if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		free(s);
}

static _Atomic(rbln_alloc_caller_fn) caller_fn;

void rbln_alloc_set_caller_fn(rbln_alloc_caller_fn fn)
{
	atomic_store_explicit(&caller_fn, fn, memory_order_release);
}

/*
 * The return addresses from the entry point that calls it on (not inlined,
 * so that its own frame is the one to drop), and the caller function's
 * name for the thread's work; NULL out of memory.
 */
static __attribute__((noinline)) struct rbln_alloc_site *site_capture(void)
{
	void *buf[RBLN_ALLOC_SITE_FRAMES + 1];
	int n = backtrace(buf, RBLN_ALLOC_SITE_FRAMES + 1);
	struct rbln_alloc_site *s;
	rbln_alloc_caller_fn fn;

	if (n <= 1)
		return NULL;
	s = malloc(sizeof(*s) + (size_t)(n - 1) * sizeof(void *));
	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	fn = atomic_load_explicit(&caller_fn, memory_order_acquire);
	s->caller = fn ? fn() : NULL;
	s->nframes = (unsigned int)(n - 1);
	memcpy(s->frames, buf + 1, s->nframes * sizeof(void *));
	return s;
}

/* An entry point's call, history on: with stacks, its caller's site. */
static void call_begin(struct rbln_allocator *a, struct call *c)
{
	c->site = atomic_load(&a->hist.stacks) ? site_capture() : NULL;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Appends an event, the history's lock held: the oldest goes when the ring is full. */
static void hist_push_locked(struct history *h, enum rbln_memory_action act, uint64_t addr,
			     uint64_t size, uint32_t queue, struct rbln_alloc_site *site)
{
	struct rbln_alloc_event *e;

	/* grows until the bound; the ring only wraps once it is full, so head is 0 here */
	if (h->len == h->cap && h->cap < h->max && !h->head) {
		size_t cap = h->cap * 2 < h->max ? h->cap * 2 : h->max;

		e = realloc(h->ring, cap * sizeof(*e));
		if (e) {
			h->ring = e;
			h->cap = cap;
		}
	}
	if (h->len == h->cap) {
		rbln_alloc_site_put(h->ring[h->head].site);
		h->head = (h->head + 1) % h->cap;
		h->len--;
	}
	h->ring[(h->head + h->len++) % h->cap] = (struct rbln_alloc_event){
		.action = act, .queue = queue, .addr = addr, .size = size,
		.time_us = now_us(), .site = site_get(site),
	};
}

/*
 * Records free_completed for the pending frees whose point is done or
 * whose memory [@va, @va + @size) is handed out again (on their queue,
 * before the point), in order of free; the history's lock held.
 */
static void hist_complete_locked(struct rbln_allocator *a, uint64_t va, uint64_t size)
{
	struct history *h = &a->hist;
	uint64_t min = UINT64_MAX;
	size_t i, n = 0;

	if (!h->npend || (!size && !a->ops.point_done(a->ctx, h->pend_min)))
		return;
	for (i = 0; i < h->npend; i++) {
		struct pending_free *p = &h->pend[i];

		if ((p->addr < va + size && va < p->addr + p->size) ||
		    a->ops.point_done(a->ctx, p->point)) {
			hist_push_locked(h, RBLN_MEMORY_FREE_COMPLETED, p->addr, p->size, p->queue,
					 p->site);
			rbln_alloc_site_put(p->site);
			continue;
		}
		if (p->point < min)
			min = p->point;
		h->pend[n++] = *p;
	}
	h->npend = n;
	h->pend_min = min;
}

/*
 * Records event @act of call @c (NULL: history off); the lock that
 * guards what it records held, so that events come in their true order.
 * An allocation of memory still pending (reused on its queue) completes
 * the frees of that memory first.
 */
static void hist_event(struct rbln_allocator *a, const struct call *c,
		       enum rbln_memory_action act, uint64_t addr, uint64_t size, uint32_t queue,
		       bool reused_pending)
{
	struct history *h = &a->hist;

	if (!c)
		return;
	pthread_mutex_lock(&h->lock);
	if (h->ring) {
		hist_complete_locked(a, reused_pending ? addr : 0, reused_pending ? size : 0);
		hist_push_locked(h, act, addr, size, queue, c->site);
	}
	pthread_mutex_unlock(&h->lock);
}

/*
 * Records the free of @b (requested size and queue still set) with pending
 * state @st in call @c (not NULL: callers test it, as this is not inlined):
 * free_requested, then free_completed at once or when its point is done.
 */
static void hist_free(struct rbln_allocator *a, const struct call *c, const struct rbln_block *b,
		      struct pstate st)
{
	struct history *h = &a->hist;
	struct pending_free *p;

	pthread_mutex_lock(&h->lock);
	if (!h->ring)
		goto out;
	hist_complete_locked(a, 0, 0);
	hist_push_locked(h, RBLN_MEMORY_FREE_REQUESTED, b->va, b->requested, b->queue, c->site);
	if (!st.point) {
		hist_push_locked(h, RBLN_MEMORY_FREE_COMPLETED, b->va, b->requested, b->queue,
				 c->site);
		goto out;
	}
	/* as bounded as the ring: without room, the oldest is never completed */
	if (h->npend == h->pend_cap) {
		size_t cap = h->pend_cap ? 2 * h->pend_cap : 64;

		if (cap > h->max)
			cap = h->max;
		p = cap > h->pend_cap ? realloc(h->pend, cap * sizeof(*p)) : NULL;
		if (p) {
			h->pend = p;
			h->pend_cap = cap;
		} else if (h->npend) {
			rbln_alloc_site_put(h->pend[0].site);
			memmove(h->pend, h->pend + 1, --h->npend * sizeof(*p));
		} else {
			goto out;
		}
	}
	if (!h->npend || st.point < h->pend_min)
		h->pend_min = st.point;
	h->pend[h->npend++] = (struct pending_free){
		.addr = b->va, .size = b->requested, .point = st.point, .queue = b->queue,
		.site = site_get(c->site),
	};
out:
	pthread_mutex_unlock(&h->lock);
}

/* Drops every event and pending free; the history's lock held. */
static void hist_clear_locked(struct history *h)
{
	size_t i;

	for (i = 0; i < h->len; i++)
		rbln_alloc_site_put(h->ring[(h->head + i) % h->cap].site);
	for (i = 0; i < h->npend; i++)
		rbln_alloc_site_put(h->pend[i].site);
	free(h->ring);
	free(h->pend);
	h->ring = NULL;
	h->pend = NULL;
	h->cap = h->max = h->head = h->len = h->npend = h->pend_cap = 0;
}

/* A ring bounded by @max keeping the newest events that fit; the history's lock held. */
static int hist_resize_locked(struct history *h, size_t max)
{
	size_t keep = h->len < max ? h->len : max, cap = max < 64 ? max : 64, i;
	struct rbln_alloc_event *r;

	if (cap < keep)
		cap = keep;
	r = malloc(cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (i = 0; i < h->len - keep; i++)
		rbln_alloc_site_put(h->ring[(h->head + i) % h->cap].site);
	for (i = 0; i < keep; i++)
		r[i] = h->ring[(h->head + h->len - keep + i) % h->cap];
	free(h->ring);
	h->ring = r;
	h->cap = cap;
	h->max = max;
	h->head = 0;
	h->len = keep;
	return 0;
}

int rbln_allocator_record_history(struct rbln_allocator *a, bool enabled, bool stacks,
				  size_t max_entries)
{
	struct history *h;
	int ret = 0;

	if (!a || (enabled && (!max_entries || max_entries > RBLN_MEMORY_HISTORY_MAX)))
		return -EINVAL;
	h = &a->hist;
	if (enabled && stacks) {
		void *f;

		/* the first backtrace() loads the unwinder: here, not in an allocation */
		backtrace(&f, 1);
	}
	pthread_mutex_lock(&h->lock);
	if (!enabled) {
		atomic_store(&a->hist_on, false);
		hist_clear_locked(h);
	} else {
		ret = hist_resize_locked(h, max_entries);
		if (!ret) {
			atomic_store(&h->stacks, stacks);
			atomic_store(&a->hist_on, true);
		}
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

bool rbln_allocator_records_stacks(struct rbln_allocator *a)
{
	return hist_on(a) && atomic_load(&a->hist.stacks);
}

/* ---- block records ---------------------------------------------------- */

static struct rbln_block *block_new(struct rbln_allocator *a)
{
	struct rbln_block *b = a->spare;

	if (!b) {
		struct block_chunk *c = aligned_alloc(CACHE_LINE, sizeof(*c));
		int i;

		if (!c)
			return NULL;
		c->next = a->chunks;
		a->chunks = c;
		for (i = 0; i < BLOCKS_PER_CHUNK; i++) {
			c->blocks[i].next = a->spare;
			a->spare = &c->blocks[i];
		}
		b = a->spare;
	}
	a->spare = b->next;
	memset(b, 0, sizeof(*b));
	return b;
}

static void block_put(struct rbln_allocator *a, struct rbln_block *b)
{
	b->next = a->spare;
	a->spare = b;
}

/* A block leaving use forgets where it was allocated: free blocks have no site. */
static void block_drop_site(struct rbln_block *b)
{
	if (b->site) {
		rbln_alloc_site_put(b->site);
		b->site = NULL;
	}
}

/* ---- treaps ----------------------------------------------------------- */

enum tree_kind { TREE_READY, TREE_PENDING };

static int u64_cmp(uint64_t x, uint64_t y)
{
	return x < y ? -1 : x > y;
}

static int block_cmp(enum tree_kind kind, const struct rbln_block *x, const struct rbln_block *y)
{
	int c;

	if (kind == TREE_PENDING && x->st.queue != y->st.queue)
		return x->st.queue < y->st.queue ? -1 : 1;
	c = u64_cmp(x->size, y->size);
	return c ? c : u64_cmp(x->va, y->va);
}

static uint32_t next_prio(struct rbln_allocator *a)
{
	/* splitmix64 */
	uint64_t z = (a->prio_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

static void treap_insert(struct rbln_block **root, struct rbln_block *n, enum tree_kind kind)
{
	struct rbln_block *r = *root, *c;

	if (!r) {
		n->left = n->right = NULL;
		*root = n;
		return;
	}
	if (block_cmp(kind, n, r) < 0) {
		treap_insert(&r->left, n, kind);
		c = r->left;
		if (c->prio > r->prio) {
			r->left = c->right;
			c->right = r;
			*root = c;
		}
	} else {
		treap_insert(&r->right, n, kind);
		c = r->right;
		if (c->prio > r->prio) {
			r->right = c->left;
			c->left = r;
			*root = c;
		}
	}
}

/* Joins two treaps where every key of @x is below every key of @y. */
static struct rbln_block *treap_join(struct rbln_block *x, struct rbln_block *y)
{
	struct rbln_block *root = NULL, **link = &root;

	while (x && y) {
		if (x->prio > y->prio) {
			*link = x;
			link = &x->right;
			x = x->right;
		} else {
			*link = y;
			link = &y->left;
			y = y->left;
		}
	}
	*link = x ? x : y;
	return root;
}

static void treap_remove(struct rbln_block **root, struct rbln_block *n, enum tree_kind kind)
{
	while (*root && *root != n)
		root = block_cmp(kind, n, *root) < 0 ? &(*root)->left : &(*root)->right;
	if (!*root)
		abort();	/* index corrupted: never continue handing out memory */
	*root = treap_join(n->left, n->right);
	n->left = n->right = NULL;
}

/* Smallest (size, va) with size >= @size. */
static struct rbln_block *ready_lower_bound(struct rbln_block *n, uint64_t size)
{
	struct rbln_block *best = NULL;

	while (n) {
		if (n->size >= size) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best;
}

/* Smallest (size, va) with size >= @size pending on @queue. */
static struct rbln_block *pending_lower_bound(struct rbln_block *n, uint32_t queue, uint64_t size)
{
	struct rbln_block *best = NULL;

	while (n) {
		if (n->st.queue > queue || (n->st.queue == queue && n->size >= size)) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best && best->st.queue == queue ? best : NULL;
}

/* ---- the small pool's size classes ------------------------------------ */

/* A small pool's expandable segment has free blocks past 2 MiB: the last class. */
static size_t size_class(uint64_t size)
{
	return size < SMALL_BUFFER ? (size_t)(size / MIN_BLOCK_SIZE) - 1 : NCLASS - 1;
}

static void class_insert(struct rbln_allocator *a, struct rbln_block *b)
{
	size_t c = size_class(b->size);

	treap_insert(&a->cls[c], b, TREE_READY);
	a->cls_bits[c / 64] |= 1ull << (c % 64);
	a->cls_summary |= 1ull << (c / 64);
}

static void class_remove(struct rbln_allocator *a, struct rbln_block *b)
{
	size_t c = size_class(b->size);

	treap_remove(&a->cls[c], b, TREE_READY);
	if (a->cls[c])
		return;
	a->cls_bits[c / 64] &= ~(1ull << (c % 64));
	if (!a->cls_bits[c / 64])
		a->cls_summary &= ~(1ull << (c / 64));
}

/* The lowest-address block of the smallest non-empty class >= @size's. */
static struct rbln_block *class_lower_bound(struct rbln_allocator *a, uint64_t size)
{
	size_t c = size_class(size), w = c / 64;
	uint64_t bits = a->cls_bits[w] & (~0ull << (c % 64));
	struct rbln_block *n;

	if (!bits) {
		uint64_t words = w + 1 < 64 ? a->cls_summary & (~0ull << (w + 1)) : 0;

		if (!words)
			return NULL;
		w = (size_t)__builtin_ctzll(words);
		bits = a->cls_bits[w];
	}
	n = a->cls[w * 64 + (size_t)__builtin_ctzll(bits)];
	while (n->left)
		n = n->left;
	return n;
}

/* ---- heap of pending blocks ------------------------------------------- */

static void heap_set(struct rbln_allocator *a, size_t i, struct rbln_block *b)
{
	a->heap[i] = b;
	b->heap_idx = i;
}

static void heap_sift_up(struct rbln_allocator *a, size_t i)
{
	struct rbln_block *b = a->heap[i];

	while (i) {
		size_t parent = (i - 1) / 2;

		if (a->heap[parent]->st.point <= b->st.point)
			break;
		heap_set(a, i, a->heap[parent]);
		i = parent;
	}
	heap_set(a, i, b);
}

static void heap_sift_down(struct rbln_allocator *a, size_t i)
{
	struct rbln_block *b = a->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= a->heap_len)
			break;
		if (c + 1 < a->heap_len && a->heap[c + 1]->st.point < a->heap[c]->st.point)
			c++;
		if (a->heap[c]->st.point >= b->st.point)
			break;
		heap_set(a, i, a->heap[c]);
		i = c;
	}
	heap_set(a, i, b);
}

/*
 * Makes room in the heap for every block that exists, plus one about to be
 * created, so that indexing a free block can never fail.
 */
static int heap_reserve(struct rbln_allocator *a)
{
	struct rbln_block **h;
	size_t cap;

	if (a->nblocks < a->heap_cap)
		return 0;
	cap = a->heap_cap ? 2 * a->heap_cap : 64;
	h = realloc(a->heap, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	a->heap = h;
	a->heap_cap = cap;
	return 0;
}

static void heap_push(struct rbln_allocator *a, struct rbln_block *b)
{
	/* heap_cap >= nblocks > heap_len: see heap_reserve() */
	a->heap[a->heap_len] = b;
	b->heap_idx = a->heap_len++;
	heap_sift_up(a, b->heap_idx);
}

static void heap_remove(struct rbln_allocator *a, struct rbln_block *b)
{
	size_t i = b->heap_idx;
	struct rbln_block *last = a->heap[--a->heap_len];

	if (last == b)
		return;
	heap_set(a, i, last);
	heap_sift_up(a, i);
	heap_sift_down(a, last->heap_idx);
}

/* ---- free-block index ------------------------------------------------- */

static struct pool *block_pool(struct rbln_allocator *a, const struct rbln_block *b)
{
	return &a->pools[b->seg->pool];
}

static void unlink_free(struct rbln_allocator *a, struct rbln_block *b)
{
	struct pool *p = block_pool(a, b);

	switch (b->where) {
	case W_READY:
		if (b->seg->pool == POOL_SMALL)
			class_remove(a, b);
		else
			treap_remove(&p->ready, b, TREE_READY);
		break;
	case W_PENDING:
		treap_remove(&p->pending, b, TREE_PENDING);
		heap_remove(a, b);
		break;
	case W_MIXED:
		heap_remove(a, b);
		break;
	case W_NONE:
		break;
	}
	b->where = W_NONE;
}

/* Indexes a free block by its pending state. */
static void link_free(struct rbln_allocator *a, struct rbln_block *b)
{
	struct pool *p = block_pool(a, b);

	b->st = pstate_normalize(a, b->st);
	b->prio = next_prio(a);
	if (!b->st.point) {
		if (b->seg->pool == POOL_SMALL)
			class_insert(a, b);
		else
			treap_insert(&p->ready, b, TREE_READY);
		b->where = W_READY;
		return;
	}
	heap_push(a, b);
	if (b->st.mixed) {
		b->where = W_MIXED;
	} else {
		treap_insert(&p->pending, b, TREE_PENDING);
		b->where = W_PENDING;
	}
}

/* Moves every pending block whose point is done to its ready index. */
static void process_pending(struct rbln_allocator *a)
{
	while (a->heap_len && a->ops.point_done(a->ctx, a->heap[0]->st.point)) {
		struct rbln_block *b = a->heap[0];

		unlink_free(a, b);
		b->st = (struct pstate){ 0 };
		link_free(a, b);
	}
}

/*
 * May @x and the block after it, @y, merge?  Both free, and nothing between
 * them: an expandable segment's neighbours may have unmapped memory between.
 */
static bool free_and_adjacent(const struct rbln_block *x, const struct rbln_block *y)
{
	return x && y && !x->allocated && !y->allocated && x->va + x->size == y->va;
}

/*
 * Returns a block leaving use (or a thread cache) to its pool with pending
 * state @st, merging it with its free neighbours.  Statistics are the
 * caller's.
 */
static void pool_put(struct rbln_allocator *a, struct rbln_block *b, struct pstate st)
{
	struct rbln_block *n;

	b->allocated = false;
	b->in_tc = false;
	b->requested = 0;
	n = b->prev;
	if (free_and_adjacent(n, b)) {
		unlink_free(a, n);
		st = pstate_merge(pstate_normalize(a, n->st), st);
		n->size += b->size;
		n->next = b->next;
		if (b->next)
			b->next->prev = n;
		block_put(a, b);
		a->nblocks--;
		b = n;
	}
	n = b->next;
	if (free_and_adjacent(b, n)) {
		unlink_free(a, n);
		st = pstate_merge(st, pstate_normalize(a, n->st));
		b->size += n->size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		block_put(a, n);
		a->nblocks--;
	}
	b->st = st;
	link_free(a, b);
}

/* ---- thread caches ---------------------------------------------------- */

/*
 * Guards the lifetime of thread caches between their threads' exit and
 * their allocators' destruction; taken before any allocator's mutex.
 */
static pthread_mutex_t tc_registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t tc_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t tc_key;
static bool tc_key_ok;
static _Thread_local struct tcache *tl_caches;	/* this thread's, one per allocator */
static _Thread_local struct tcache *tl_last;	/* the last one used */

static struct tcache *tc_find(struct rbln_allocator *a)
{
	struct tcache *tc = tl_last;

	if (tc && atomic_load_explicit(&tc->a, memory_order_relaxed) == a)
		return tc;
	for (tc = tl_caches; tc; tc = tc->tnext) {
		if (atomic_load_explicit(&tc->a, memory_order_relaxed) == a) {
			tl_last = tc;
			return tc;
		}
	}
	return NULL;
}

static void tc_push(struct tcache *tc, struct rbln_block *b)
{
	size_t c = size_class(b->size);

	tc->bin_bits[c / 64] |= 1ull << (c % 64);
	b->tc_next = tc->bin[c];
	tc->bin[c] = b;
	tc->count++;
	tc->bytes += b->size;
}

/* Removes the block *@link points to from bin @c of @tc, its lock held. */
static struct rbln_block *tc_unlink(struct tcache *tc, size_t c, struct rbln_block **link)
{
	struct rbln_block *b = *link;

	*link = b->tc_next;
	if (!tc->bin[c])
		tc->bin_bits[c / 64] &= ~(1ull << (c % 64));
	b->tc_next = NULL;
	tc->count--;
	tc->bytes -= b->size;
	return b;
}

/*
 * Detaches the older half of every bin of @tc (its lock held), or with
 * @all every block, as a list through tc_next.
 */
static struct rbln_block *tc_detach(struct tcache *tc, bool all)
{
	struct rbln_block *list = NULL, **link, *b;
	size_t w, c;

	for (w = 0; w < TC_CLASSES / 64; w++) {
		uint64_t bits = tc->bin_bits[w];

		while (bits) {
			size_t n = 0, keep;

			c = w * 64 + (size_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			for (b = tc->bin[c]; b; b = b->tc_next)
				n++;
			keep = all ? 0 : n / 2;
			for (link = &tc->bin[c]; keep; keep--)
				link = &(*link)->tc_next;
			while (*link) {
				b = tc_unlink(tc, c, link);
				b->tc_next = list;
				list = b;
			}
		}
	}
	return list;
}

/* Returns blocks detached from a thread cache to their pools; the allocator's mutex held. */
static void tc_return(struct rbln_allocator *a, struct rbln_block *list)
{
	while (list) {
		struct rbln_block *b = list;

		list = b->tc_next;
		b->tc_next = NULL;
		pool_put(a, b, pstate_normalize(a, b->st));
	}
}

/*
 * Takes the older half of the calling thread's cached blocks back into the
 * pools, or with @all every block, without claiming any cache; the
 * allocator's mutex held.
 */
static bool tc_reclaim_own(struct rbln_allocator *a, bool all)
{
	struct tcache *tc = tc_find(a);
	struct rbln_block *list;
	bool locked;

	if (!tc)
		return false;
	locked = tc_enter(tc);
	list = tc_detach(tc, all);
	tc_leave(tc, locked);
	tc_return(a, list);
	return list != NULL;
}

/*
 * Takes the older half of every thread's cached blocks back into the
 * pools, or with @all every block; the allocator's mutex held.
 */
static bool tc_reclaim(struct rbln_allocator *a, bool all)
{
	struct tcache *tc;
	bool any = false;

	tc_lock_all(a);
	for (tc = a->tcaches; tc; tc = tc->next) {
		struct rbln_block *list;

		list = tc_detach(tc, all);
		any |= list != NULL;
		tc_return(a, list);
	}
	tc_unlock_all(a);
	return any;
}

/* Claims every thread cache of @a; the allocator's mutex held. */
static void tc_lock_all(struct rbln_allocator *a)
{
	struct tcache *tc;

	for (tc = a->tcaches; tc; tc = tc->next)
		pthread_mutex_lock(&tc->lock);
	if (a->tcaches)
		tc_mark_claimed(a->tcaches, false, tc_find(a));
}

static void tc_unlock_all(struct rbln_allocator *a)
{
	struct tcache *tc;

	for (tc = a->tcaches; tc; tc = tc->next)
		tc_unclaim(tc);
}

/* At thread exit: every cache of the thread goes back to its allocator. */
static void tc_thread_exit(void *arg)
{
	struct tcache *tc = arg, *next;
	int i;

	pthread_mutex_lock(&tc_registry);
	for (; tc; tc = next) {
		struct rbln_allocator *a = atomic_load(&tc->a);

		next = tc->tnext;
		if (a) {
			struct rbln_block *list;

			alloc_lock(a);
			if (tc->prev)
				tc->prev->next = tc->next;
			else
				a->tcaches = tc->next;
			if (tc->next)
				tc->next->prev = tc->prev;
			pthread_mutex_lock(&tc->lock);
			list = tc_detach(tc, true);
			for (i = 0; i < S_SHARED; i++) {
				a->totals.in[i] += tc->totals.in[i];
				a->totals.out[i] += tc->totals.out[i];
				a->base[i] += tc->cur[i];
				a->allow_sum[i] -= tc->allow[i];
			}
			pthread_mutex_unlock(&tc->lock);
			tc_return(a, list);
			pthread_mutex_unlock(&a->lock);
		}
		pthread_mutex_destroy(&tc->lock);
		free(tc);
	}
	pthread_mutex_unlock(&tc_registry);
	tl_caches = tl_last = NULL;
}

static void tc_key_create(void)
{
	tc_key_ok = !pthread_key_create(&tc_key, tc_thread_exit);
}

/* Frees this thread's caches of destroyed allocators; not with an allocator's mutex held. */
static void tc_prune(void)
{
	struct tcache **link = &tl_caches, *tc;
	bool pruned = false;

	pthread_mutex_lock(&tc_registry);
	while ((tc = *link)) {
		if (atomic_load(&tc->a)) {
			link = &tc->tnext;
			continue;
		}
		pruned = true;
		*link = tc->tnext;
		if (tl_last == tc)
			tl_last = NULL;
		pthread_mutex_destroy(&tc->lock);
		free(tc);
	}
	/* the exit destructor gets the list's head (the key exists: this thread made caches) */
	if (pruned)
		pthread_setspecific(tc_key, tl_caches);
	pthread_mutex_unlock(&tc_registry);
}

/* This thread's cache for @a, created if need be; the allocator's mutex held. NULL: none. */
static struct tcache *tc_get_locked(struct rbln_allocator *a)
{
	struct tcache *tc = tc_find(a);

	if (tc)
		return tc;
	pthread_once(&tc_key_once, tc_key_create);
	if (!tc_key_ok)
		return NULL;
	pthread_once(&tc_asym_once, tc_asym_init);
	tc = aligned_alloc(CACHE_LINE, sizeof(*tc));
	if (!tc)
		return NULL;
	memset(tc, 0, sizeof(*tc));
	if (pthread_mutex_init(&tc->lock, NULL)) {
		free(tc);
		return NULL;
	}
	atomic_init(&tc->a, a);
	tc->tnext = tl_caches;
	if (pthread_setspecific(tc_key, tc)) {
		pthread_mutex_destroy(&tc->lock);
		free(tc);
		return NULL;
	}
	tl_caches = tc;
	tl_last = tc;
	tc->next = a->tcaches;
	if (a->tcaches)
		a->tcaches->prev = tc;
	a->tcaches = tc;
	return tc;
}

static bool tc_enabled(const struct rbln_allocator *a)
{
	return a->conf.thread_cache;
}

/* May @b, pending as @st, be reused by work on @queue now? Normalizes @st. */
static bool reusable_on(const struct rbln_allocator *a, struct pstate *st, uint32_t queue)
{
	if (!st->point || (!st->mixed && st->queue == queue))
		return true;
	*st = pstate_normalize(a, *st);
	return !st->point;
}

/*
 * The link to the newest block of @tc (its lock held) reusable on @queue,
 * of the smallest size class from @rounded's up to TC_BAND bigger, and
 * that class in *@cls; NULL if none.
 */
static inline __attribute__((always_inline)) struct rbln_block **
tc_best(struct rbln_allocator *a, struct tcache *tc, uint64_t rounded, uint32_t queue, size_t *cls)
{
	size_t c = size_class(rounded), last = size_class(rounded + TC_BAND(rounded));
	struct rbln_block **link;

	if (last >= TC_CLASSES)
		last = TC_CLASSES - 1;
	while (c <= last) {
		uint64_t bits = tc->bin_bits[c / 64] & (~0ull << (c % 64));

		if (!bits) {
			c = (c / 64 + 1) * 64;
			continue;
		}
		c = (c / 64) * 64 + (size_t)__builtin_ctzll(bits);
		if (c > last)
			break;
		for (link = &tc->bin[c]; *link; link = &(*link)->tc_next) {
			if (reusable_on(a, &(*link)->st, queue)) {
				*cls = c;
				return link;
			}
		}
		c++;
	}
	return NULL;
}

/*
 * Takes a block for @size bytes from @tc, its lock held: 0 and *out,
 * -ENOENT if it has none, or -EAGAIN if its allowance is short.  With
 * @exact, the caller holds every lock and folds the peaks afterwards.
 */
static inline __attribute__((always_inline)) int
tc_take(struct rbln_allocator *a, struct tcache *tc, uint64_t rounded, uint64_t size,
	uint32_t queue, bool exact, const struct call *c, struct rbln_block **out)
{
	struct rbln_block **link, *b;
	struct delta d;
	size_t cls;

	link = tc_best(a, tc, rounded, queue, &cls);
	if (!link)
		return -ENOENT;
	b = *link;
	d = (struct delta){ { (int64_t)size, (int64_t)b->size, -(int64_t)b->size } };
	if (!tc_delta_apply(tc, &d, exact))
		return -EAGAIN;
	if (a->group)
		group_apply(a, &d, 0);
	tc_unlink(tc, cls, link);
	b->in_tc = false;
	b->requested = size;
	b->queue = queue;
	if (c) {
		b->site = site_get(c->site);
		hist_event(a, c, RBLN_MEMORY_ALLOC, b->va, size, queue, b->st.point != 0);
	}
	*out = b;
	return 0;
}

/*
 * Puts @b, freed after work up to @last, into @tc, its lock held: 0 (a
 * second free is ignored, see rbln_allocator_free()), or -EAGAIN if its
 * allowance is short.  @exact as for tc_take().
 */
static inline __attribute__((always_inline)) int
tc_put(struct rbln_allocator *a, struct tcache *tc, struct rbln_block *b, struct pstate last,
       bool exact, const struct call *c)
{
	struct delta d;

	if (!b->allocated || b->in_tc)
		return 0;
	d = (struct delta){ { -(int64_t)b->requested, -(int64_t)b->size, (int64_t)b->size } };
	if (!tc_delta_apply(tc, &d, exact))
		return -EAGAIN;
	if (a->group)
		group_apply(a, &d, 0);
	b->st = pstate_merge(pstate_normalize(a, b->st), pstate_normalize(a, last));
	if (c)
		hist_free(a, c, b, b->st);
	block_drop_site(b);
	b->in_tc = true;
	b->requested = 0;
	tc_push(tc, b);
	return 0;
}

/* An allocation from this thread's cache: true and *out, or false.  Inlined as take_block(). */
static inline __attribute__((always_inline)) bool
tc_alloc(struct rbln_allocator *a, uint64_t rounded, uint64_t size, uint32_t queue,
	 const struct call *c, struct rbln_block **out)
{
	struct tcache *tc = tc_find(a);
	bool locked;
	int ret;

	if (!tc)
		return false;
	locked = tc_enter(tc);
	ret = tc_take(a, tc, rounded, size, queue, false, c, out);
	tc_leave(tc, locked);
	if (ret != -EAGAIN)
		return !ret;
	/* past its allowance: again with every lock, to fold the peaks exactly */
	alloc_lock(a);
	tc_lock_all(a);
	ret = tc_take(a, tc, rounded, size, queue, true, c, out);
	if (!ret)
		peaks_fold_locked(a, true);
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
	return !ret;
}

/*
 * A free into this thread's cache: false when @b is not for it (the caller
 * frees it to its pool).  Inlined as take_block().
 */
static inline __attribute__((always_inline)) bool
tc_free(struct rbln_allocator *a, struct rbln_block *b, struct pstate last, const struct call *c)
{
	struct rbln_block *list = NULL;
	bool locked = false, entered;
	struct tcache *tc;

	if (b->seg->pool != POOL_SMALL || b->size > TC_MAX_SIZE || !(tc = tc_find(a)))
		return false;
	entered = tc_enter(tc);
	if (tc_put(a, tc, b, last, false, c)) {
		/* past its allowance: again with every lock, to fold the peaks exactly */
		tc_leave(tc, entered);
		alloc_lock(a);
		tc_lock_all(a);
		tc_put(a, tc, b, last, true, c);
		peaks_fold_locked(a, true);
		locked = true;
	}
	/* full: the older half goes back, in one trip to the pools */
	if (tc->count > a->conf.thread_cache || tc->bytes > TC_MAX_BYTES)
		list = tc_detach(tc, false);
	if (locked) {
		tc_unlock_all(a);
	} else {
		tc_leave(tc, entered);
		if (!list)
			return true;
		alloc_lock(a);
	}
	tc_return(a, list);
	pthread_mutex_unlock(&a->lock);
	return true;
}

/* ---- segments --------------------------------------------------------- */

static bool segment_unsplit_free(const struct rbln_segment *s)
{
	return !s->span && !s->first->allocated && s->first->size == s->size;
}

static void segment_unlink(struct rbln_allocator *a, struct rbln_segment *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		a->segments = s->next;
	if (s->next)
		s->next->prev = s->prev;
}

static void segment_release(struct rbln_allocator *a, struct rbln_segment *s, struct delta *d,
			    const struct call *c)
{
	hist_event(a, c, RBLN_MEMORY_SEGMENT_FREE, s->va, s->size, s->queue, false);
	rbln_alloc_site_put(s->site);
	unlink_free(a, s->first);
	a->ops.free(a->ctx, s->handle);
	a->num_device_free++;
	reserved_add(a, -(int64_t)s->size);
	d->d[S_CACHED] -= (int64_t)s->size;
	segment_unlink(a, s);
	block_put(a, s->first);
	free(s);
	a->nblocks--;
}

/* The first of expandable segment @s's maps at or above @va. */
static size_t chunk_at(const struct rbln_segment *s, uint64_t va)
{
	size_t lo = 0, hi = s->nchunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->chunks[mid].va < va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Links @n into @s's block list after @prev (NULL: first). */
static void block_link_after(struct rbln_segment *s, struct rbln_block *prev, struct rbln_block *n)
{
	n->prev = prev;
	n->next = prev ? prev->next : s->first;
	if (n->next)
		n->next->prev = n;
	if (prev)
		prev->next = n;
	else
		s->first = n;
}

static void block_unlink(struct rbln_segment *s, struct rbln_block *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		s->first = b->next;
	if (b->next)
		b->next->prev = b->prev;
}

/* Gives back the address space of expandable segment @s, which maps nothing now. */
static void exp_release(struct rbln_allocator *a, struct rbln_segment *s)
{
	a->exp[s->pool] = NULL;
	a->ops.release(a->ctx, s->va);
	segment_unlink(a, s);
	rbln_alloc_site_put(s->site);
	free(s->chunks);
	free(s);
}

/* Free and reusable by any queue: a block a growth may extend, or empty_cache unmap. */
static bool free_ready(const struct rbln_allocator *a, const struct rbln_block *b)
{
	return b && !b->allocated && !pstate_normalize(a, b->st).point;
}

/*
 * Unmaps the maps of expandable segment @s that free block @b, no longer
 * used by any job, covers whole, as PyTorch's release of an expandable
 * segment's free pages does.  What @b keeps below and above them stays
 * free; between them the segment has a hole, which a later growth may map
 * again.  Without a host record for the part above, nothing is unmapped.
 */
static void exp_unmap_block(struct rbln_allocator *a, struct rbln_segment *s, struct rbln_block *b,
			    struct delta *d, const struct call *c)
{
	uint64_t end = b->va + b->size, lo, hi;
	size_t i = chunk_at(s, b->va), j = i, k;
	struct rbln_block *prev = b->prev, *r = NULL;

	while (j < s->nchunks && s->chunks[j].va + s->chunks[j].size <= end)
		j++;
	if (i == j)
		return;
	lo = s->chunks[i].va;
	hi = s->chunks[j - 1].va + s->chunks[j - 1].size;
	if (hi < end) {
		if (heap_reserve(a))
			return;
		r = block_new(a);
		if (!r)
			return;
	}
	unlink_free(a, b);
	for (k = i; k < j; k++) {
		struct rbln_chunk *ch = &s->chunks[k];

		hist_event(a, c, RBLN_MEMORY_SEGMENT_UNMAP, ch->va, ch->size, s->queue, false);
		a->ops.unmap(a->ctx, ch->va, ch->size, ch->handle);
		a->num_device_free++;
		reserved_add(a, -(int64_t)ch->size);
		d->d[S_CACHED] -= (int64_t)ch->size;
		s->size -= ch->size;
	}
	memmove(&s->chunks[i], &s->chunks[j], (s->nchunks - j) * sizeof(*s->chunks));
	s->nchunks -= j - i;

	if (lo > b->va) {
		b->size = lo - b->va;
		b->st = (struct pstate){ 0 };
		link_free(a, b);
		prev = b;
	} else {
		block_unlink(s, b);
		block_put(a, b);
		a->nblocks--;
	}
	if (r) {
		a->nblocks++;
		r->seg = s;
		r->va = hi;
		r->size = end - hi;
		block_link_after(s, prev, r);
		link_free(a, r);
	}
}

/*
 * Unmaps every map of expandable segment @s that free memory no job uses
 * any more covers whole; the reservation goes with the last map.
 */
static void exp_shrink(struct rbln_allocator *a, struct rbln_segment *s, struct delta *d,
		       const struct call *c)
{
	struct rbln_block *b, *next;

	for (b = s->first; b; b = next) {
		next = b->next;
		if (free_ready(a, b))
			exp_unmap_block(a, s, b, d, c);
	}
	if (!s->nchunks)
		exp_release(a, s);
}

/*
 * Releases every entirely free segment whose memory no job still uses, and
 * the free tails of expandable segments.
 */
static void release_cached(struct rbln_allocator *a, struct delta *d, const struct call *c)
{
	struct rbln_segment *s = a->segments, *next;

	for (; s; s = next) {
		next = s->next;
		if (s->span)
			exp_shrink(a, s, d, c);
		else if (segment_unsplit_free(s) && !pstate_normalize(a, s->first->st).point)
			segment_release(a, s, d, c);
	}
}

/* Is there free memory that empty_cache could give back once the device is done with it? */
static bool any_pending_releasable(struct rbln_allocator *a)
{
	struct rbln_segment *s;
	struct rbln_block *b;

	for (s = a->segments; s; s = s->next) {
		if (!s->span) {
			if (segment_unsplit_free(s) && pstate_normalize(a, s->first->st).point)
				return true;
			continue;
		}
		for (b = s->first; b; b = b->next)
			if (!b->allocated && pstate_normalize(a, b->st).point)
				return true;
	}
	return false;
}

static uint64_t segment_size_for(const struct rbln_allocator *a, enum pool_id pool,
				 uint64_t rounded)
{
	if (pool == POOL_SMALL)
		return SMALL_BUFFER;
	if (rounded < MIN_LARGE_ALLOC && !a->conf.exact_large_segments)
		return LARGE_BUFFER;
	return (rounded + ROUND_LARGE - 1) & ~(ROUND_LARGE - 1);
}

/*
 * Reserves a new segment from the provider and indexes it as one free block.
 * 0 and *out, or the provider's -errno, or -ENOMEM (host).
 */
static int segment_new(struct rbln_allocator *a, enum pool_id pool, uint64_t size, uint32_t queue,
		       const struct call *c, struct rbln_block **out, struct delta *d)
{
	struct rbln_segment *s;
	struct rbln_block *b;
	uint32_t handle = 0;
	uint64_t va = 0;
	int ret;

	s = calloc(1, sizeof(*s));
	b = s ? block_new(a) : NULL;
	if (!b || heap_reserve(a)) {
		if (b)
			block_put(a, b);
		free(s);
		return -ENOMEM;
	}
	ret = a->ops.alloc(a->ctx, size, &handle, &va);
	if (ret) {
		block_put(a, b);
		free(s);
		return ret < 0 ? ret : -EIO;
	}
	a->num_device_alloc++;
	reserved_add(a, (int64_t)size);
	d->d[S_CACHED] += (int64_t)size;

	s->va = va;
	s->size = size;
	s->handle = handle;
	s->queue = queue;
	s->pool = pool;
	if (c)
		s->site = site_get(c->site);
	hist_event(a, c, RBLN_MEMORY_SEGMENT_ALLOC, va, size, queue, false);
	s->first = b;
	s->next = a->segments;
	if (a->segments)
		a->segments->prev = s;
	a->segments = s;
	a->nblocks++;

	b->seg = s;
	b->va = va;
	b->size = size;
	link_free(a, b);
	*out = b;
	return 0;
}

/*
 * Grows @pool's expandable segment (reserving it first) by enough for a
 * @rounded-byte block: in its lowest hole (memory empty_cache unmapped) or
 * at its end where, together with the free blocks on either side, such a
 * block fits.  It maps at least a plain segment's size where the hole
 * allows, so that it maps no more often than plain segments would be
 * created.  A free neighbour still pending on some queue is not this
 * request's to take.  0 and the free block in *out, or the provider's
 * -errno (-ENOSPC: the device, or the reservation, is full), or -ENOMEM
 * (host).
 */
static int exp_grow(struct rbln_allocator *a, enum pool_id pool, uint64_t rounded,
		    uint32_t queue, const struct call *c, struct rbln_block **out,
		    struct delta *d)
{
	struct rbln_segment *s = a->exp[pool];
	struct rbln_block *prev = NULL, *next, *b;
	uint64_t below = 0, above = 0, lo = 0, hi = 0, grow = 0, step;
	uint32_t handle = 0;
	size_t i;
	int ret;

	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		ret = a->ops.reserve(a->ctx, &s->va, &s->span);
		if (ret) {
			free(s);
			return ret < 0 ? ret : -EIO;
		}
		s->pool = pool;
		s->queue = queue;
		if (c)
			s->site = site_get(c->site);
		s->next = a->segments;
		if (a->segments)
			a->segments->prev = s;
		a->segments = s;
		a->exp[pool] = s;
	}

	/* The lowest hole [lo, hi) between prev and next where the block fits. */
	ret = -ENOSPC;
	for (next = s->first; ; prev = next, next = next->next) {
		lo = prev ? prev->va + prev->size : s->va;
		hi = next ? next->va : s->va + s->span;
		below = free_ready(a, prev) ? prev->size : 0;
		above = free_ready(a, next) ? next->size : 0;
		if (hi > lo && below + (hi - lo) + above >= rounded)
			break;
		if (!next)
			goto fail;
	}
	step = pool == POOL_SMALL ? SMALL_BUFFER : LARGE_BUFFER;
	grow = rounded > below ? (rounded - below + ROUND_LARGE - 1) & ~(ROUND_LARGE - 1) : 0;
	if (grow < step)
		grow = step;
	if (grow > hi - lo)
		grow = hi - lo;

	ret = -ENOMEM;
	if (s->nchunks == s->chunks_cap) {
		size_t cap = s->chunks_cap ? 2 * s->chunks_cap : 8;
		struct rbln_chunk *n = realloc(s->chunks, cap * sizeof(*n));

		if (!n)
			goto fail;
		s->chunks = n;
		s->chunks_cap = cap;
	}
	b = below ? prev : block_new(a);
	if (!b)
		goto fail;
	if (heap_reserve(a) || (ret = a->ops.map(a->ctx, lo, grow, &handle))) {
		if (!below)
			block_put(a, b);
		if (ret > 0)
			ret = -EIO;
		goto fail;
	}
	i = chunk_at(s, lo);
	memmove(&s->chunks[i + 1], &s->chunks[i], (s->nchunks - i) * sizeof(*s->chunks));
	s->chunks[i] = (struct rbln_chunk){ lo, grow, handle };
	s->nchunks++;
	s->size += grow;
	a->num_device_alloc++;
	reserved_add(a, (int64_t)grow);
	d->d[S_CACHED] += (int64_t)grow;
	hist_event(a, c, RBLN_MEMORY_SEGMENT_MAP, lo, grow, s->queue, false);
	if (below) {
		unlink_free(a, b);
		b->size += grow;
	} else {
		b->seg = s;
		b->va = lo;
		b->size = grow;
		block_link_after(s, prev, b);
		a->nblocks++;
	}
	/* The hole is gone: the block above joins. */
	if (above && lo + grow == hi) {
		unlink_free(a, next);
		b->size += next->size;
		block_unlink(s, next);
		block_put(a, next);
		a->nblocks--;
	}
	link_free(a, b);
	*out = b;
	return 0;

fail:
	if (!s->nchunks)
		exp_release(a, s);
	return ret;
}

/* ---- allocation ------------------------------------------------------- */

static bool should_split(const struct rbln_allocator *a, enum pool_id pool, uint64_t rounded,
			 uint64_t remaining)
{
	if (pool == POOL_SMALL)
		return remaining >= MIN_BLOCK_SIZE;
	if (a->conf.max_split_size && rounded >= a->conf.max_split_size)
		return false;
	return remaining > SMALL_SIZE;
}

/*
 * max_split_size_mb, as in PyTorch: a request below the limit takes no block
 * at or above it (those are kept whole for big requests), and a request at
 * or above it takes a block at most 20 MiB bigger.  Candidates are the
 * smallest that fit: if one is refused, every bigger one would be too.
 */
static struct rbln_block *split_limit(const struct rbln_allocator *a, struct rbln_block *b,
				      uint64_t rounded)
{
	uint64_t max = a->conf.max_split_size;

	if (!b || !max || b->seg->pool == POOL_SMALL)
		return b;
	if (rounded < max && b->size >= max)
		return NULL;
	if (rounded >= max && b->size >= rounded + LARGE_BUFFER)
		return NULL;
	return b;
}

/* Best fit for @queue: ready blocks and blocks pending on @queue alike. */
static struct rbln_block *find_free(struct rbln_allocator *a, enum pool_id pool, uint64_t size,
				    uint32_t queue)
{
	struct pool *p = &a->pools[pool];
	struct rbln_block *r, *q;

	if (pool == POOL_SMALL)
		r = class_lower_bound(a, size);
	else
		r = split_limit(a, ready_lower_bound(p->ready, size), size);
	q = split_limit(a, pending_lower_bound(p->pending, queue, size), size);
	if (!r)
		return q;
	if (!q)
		return r;
	return block_cmp(TREE_READY, q, r) < 0 ? q : r;
}

/*
 * Hands out @b (free, big enough) for @size bytes on @queue, splitting off
 * the rest.  Inlined into both copies of alloc_call(): in the one without
 * history, the recording goes (see alloc_call()).
 */
static inline __attribute__((always_inline)) void
take_block(struct rbln_allocator *a, struct rbln_block *b, uint64_t rounded, uint64_t size,
	   uint32_t queue, const struct call *c, struct delta *d)
{
	uint64_t remaining = b->size - rounded;
	struct rbln_block *r;

	unlink_free(a, b);
	/* Without host memory for the remainder's bookkeeping, hand out the whole block. */
	if (should_split(a, b->seg->pool, rounded, remaining) && !heap_reserve(a) &&
	    (r = block_new(a))) {
		a->nblocks++;
		r->seg = b->seg;
		r->va = b->va + rounded;
		r->size = remaining;
		r->st = b->st;	/* the same memory: the same jobs may be using it */
		r->prev = b;
		r->next = b->next;
		if (b->next)
			b->next->prev = r;
		b->next = r;
		b->size = rounded;
		link_free(a, r);
	}
	/* b->st stays: memory still pending on this queue stays so when freed again */
	b->allocated = true;
	b->requested = size;
	b->queue = queue;
	if (c) {
		b->site = site_get(c->site);
		hist_event(a, c, RBLN_MEMORY_ALLOC, b->va, size, queue,
			   pstate_normalize(a, b->st).point != 0);
	}
	d->d[S_ALLOCATED] += (int64_t)size;
	d->d[S_ACTIVE] += (int64_t)b->size;
	d->d[S_CACHED] -= (int64_t)b->size;
}

static double mib(int64_t bytes)
{
	return (double)bytes / (double)MiB;
}

/*
 * Inlined into its entry point twice, once with @c NULL: there the
 * compiler drops the recording, so history off costs the flag's test alone.
 */
static inline __attribute__((always_inline)) int
alloc_call(struct rbln_allocator *a, uint64_t size, uint32_t queue, struct rbln_block **out,
	   char *msg, size_t msglen, const struct call *c)
{
	struct rbln_block *b = NULL;
	struct delta d = { { 0 } };
	enum pool_id pool;
	uint64_t rounded, segsize;
	int ret = 0, attempt;

	if (msg && msglen)
		msg[0] = '\0';
	if (!a || !out)
		return -EINVAL;
	*out = NULL;
	if (size == 0 || size > MAX_ALLOC_SIZE) {
		set_msg(msg, msglen, "invalid device allocation size %" PRIu64
			" bytes (must be 1 to 2^48)", size);
		return -EINVAL;
	}
	rounded = (size + MIN_BLOCK_SIZE - 1) & ~(MIN_BLOCK_SIZE - 1);
	if (rounded <= TC_MAX_SIZE && tc_enabled(a) && tc_alloc(a, rounded, size, queue, c, out))
		return 0;
	pool = rounded <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
	segsize = segment_size_for(a, pool, rounded);

	alloc_lock(a);
	for (attempt = 0; ; attempt++) {
		process_pending(a);
		b = find_free(a, pool, rounded, queue);
		if (b)
			break;
		/*
		 * This thread's cache is used before the device's memory: its
		 * older half first, as emptying it would send the thread here
		 * for its next allocations.  Other threads' caches (at most
		 * TC_MAX_BYTES each) are used before the device runs out: on
		 * the way down the OOM ladder, not before every growth, where
		 * claiming them would stop their threads.
		 */
		if (tc_reclaim_own(a, false)) {
			process_pending(a);
			b = find_free(a, pool, rounded, queue);
			if (b)
				break;
		}
		if (tc_reclaim_own(a, true)) {
			process_pending(a);
			b = find_free(a, pool, rounded, queue);
			if (b)
				break;
		}
		if (attempt == 1 && tc_reclaim(a, false)) {
			process_pending(a);
			b = find_free(a, pool, rounded, queue);
			if (b)
				break;
		}
		if (attempt == 1 && tc_reclaim(a, true)) {
			process_pending(a);
			b = find_free(a, pool, rounded, queue);
			if (b)
				break;
		}
		if (attempt == 1 || a->conf.release_before_grow)
			release_cached(a, &d, c);
		if (a->expandable)
			ret = exp_grow(a, pool, rounded, queue, c, &b, &d);
		else
			ret = segment_new(a, pool, segsize, queue, c, &b, &d);
		if (!ret)
			break;
		if (ret != -ENOSPC) {
			set_msg(msg, msglen, "device memory allocation of %" PRIu64
				" bytes failed: %s", segsize, strerror(-ret));
			goto out;
		}
		if (attempt == 1) {
			int64_t allocated;

			a->num_ooms++;
			hist_event(a, c, RBLN_MEMORY_OOM, 0, size, queue, false);
			delta_apply(a, &d);
			d = (struct delta){ { 0 } };
			/* consistent figures: no thread cache changes them meanwhile */
			tc_lock_all(a);
			allocated = stat_current(a, S_ALLOCATED);
			tc_unlock_all(a);
			set_msg(msg, msglen, "out of device memory: tried to allocate %.2f MiB; "
				"the device has %.2f MiB in use by this process "
				"(%.2f MiB allocated, %.2f MiB reserved but unallocated); "
				"free or empty_cache() memory",
				mib((int64_t)size), mib(a->reserved.current), mib(allocated),
				mib(a->reserved.current - allocated));
			ret = -ENOMEM;
			goto out;
		}
		/*
		 * The OOM ladder: wait for the device without holding the lock,
		 * then look again (blocks pending on other queues may be free
		 * now) and, failing that, release the cache and retry once.
		 */
		a->num_alloc_retries++;
		delta_apply(a, &d);
		d = (struct delta){ { 0 } };
		pthread_mutex_unlock(&a->lock);
		/*
		 * A failed wait (device lost or reset) is not fatal here: the
		 * retry then only uses and releases memory whose point is done.
		 */
		a->ops.synchronize(a->ctx);
		alloc_lock(a);
	}
	take_block(a, b, rounded, size, queue, c, &d);
	*out = b;
	ret = 0;
out:
	delta_apply(a, &d);
	fold_reserved_peak(a);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/*
 * History costs the entry points one test of a flag while it is off; on,
 * each captures its caller's site (with stacks) before taking any lock.
 */
int rbln_allocator_alloc(struct rbln_allocator *a, uint64_t size, uint32_t queue,
			 struct rbln_block **out, char *msg, size_t msglen)
{
	struct call c;
	int ret;

	if (__builtin_expect(!a || !hist_on(a), 1))
		return alloc_call(a, size, queue, out, msg, msglen, NULL);
	call_begin(a, &c);
	ret = alloc_call(a, size, queue, out, msg, msglen, &c);
	rbln_alloc_site_put(c.site);
	return ret;
}

/* Inlined twice, as alloc_call(). */
static inline __attribute__((always_inline)) void
free_call(struct rbln_allocator *a, struct rbln_block *b, uint64_t last_point,
	  uint32_t last_queue, const struct call *c)
{
	struct pstate last = { .point = last_point, .queue = last_queue };
	struct delta d;
	struct pstate st;

	if (!a || !b)
		return;
	if (tc_enabled(a) && tc_free(a, b, last, c))
		return;
	alloc_lock(a);
	/*
	 * A second free of a block not yet merged into a neighbour is ignored
	 * rather than corrupting the pools; once merged, the handle is gone
	 * and freeing it again is undefined, as with free(3).
	 */
	if (!b->allocated || b->in_tc) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (tc_enabled(a) && b->seg->pool == POOL_SMALL && b->size <= TC_MAX_SIZE &&
	    !tc_find(a) && tc_get_locked(a)) {
		/* this thread's first free of a small block: its cache exists now */
		pthread_mutex_unlock(&a->lock);
		if (tc_free(a, b, last, c))
			return;
		alloc_lock(a);
	}
	st = pstate_merge(pstate_normalize(a, b->st), pstate_normalize(a, last));
	d = (struct delta){ { -(int64_t)b->requested, -(int64_t)b->size, (int64_t)b->size } };
	if (c)
		hist_free(a, c, b, st);
	block_drop_site(b);
	pool_put(a, b, st);
	delta_apply(a, &d);
	pthread_mutex_unlock(&a->lock);
}

void rbln_allocator_free(struct rbln_allocator *a, struct rbln_block *b, uint64_t last_point,
			 uint32_t last_queue)
{
	struct call c;

	if (__builtin_expect(!a || !hist_on(a), 1)) {
		free_call(a, b, last_point, last_queue, NULL);
		return;
	}
	call_begin(a, &c);
	free_call(a, b, last_point, last_queue, &c);
	rbln_alloc_site_put(c.site);
}

uint64_t rbln_block_va(const struct rbln_block *b)
{
	return b->va;
}

uint64_t rbln_block_size(const struct rbln_block *b)
{
	return b->size;
}

uint32_t rbln_block_handle(const struct rbln_block *b)
{
	return rbln_block_piece(b, 0, NULL, NULL);
}

uint32_t rbln_block_piece(const struct rbln_block *b, uint64_t offset, uint64_t *obj_offset,
			  uint64_t *len)
{
	const struct rbln_segment *s = b->seg;
	uint64_t va = b->va + offset, start = s->va, size = s->size;
	uint32_t handle = s->handle;
	size_t lo = 0, hi = s->nchunks;

	/* The chunk holding @va: chunks are sorted and cover the segment's blocks. */
	while (s->span && hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->chunks[mid].va <= va)
			lo = mid;
		else
			hi = mid;
	}
	if (s->span) {
		start = s->chunks[lo].va;
		size = s->chunks[lo].size;
		handle = s->chunks[lo].handle;
	}
	if (obj_offset)
		*obj_offset = va - start;
	if (len)
		*len = start + size - va < b->size - offset ? start + size - va : b->size - offset;
	return handle;
}

/*
 * Like PyTorch's empty_cache, which first waits for the events of freed
 * blocks: when an entirely free segment is still pending, wait for the
 * device (without the lock) so that it can be released too.  Blocks in
 * thread caches are taken back first: they are cached memory like any other.
 */
void rbln_allocator_empty_cache(struct rbln_allocator *a)
{
	struct delta d = { { 0 } };
	struct call call = { NULL }, *c = NULL;

	if (!a)
		return;
	if (hist_on(a)) {
		call_begin(a, &call);
		c = &call;
	}
	alloc_lock(a);
	tc_reclaim(a, true);
	process_pending(a);
	if (any_pending_releasable(a)) {
		pthread_mutex_unlock(&a->lock);
		a->ops.synchronize(a->ctx);
		alloc_lock(a);
		tc_reclaim(a, true);
		process_pending(a);
	}
	release_cached(a, &d, c);
	delta_apply(a, &d);
	pthread_mutex_unlock(&a->lock);
	rbln_alloc_site_put(call.site);
}

/* ---- lifetime and statistics ------------------------------------------ */

struct rbln_allocator *rbln_allocator_create_conf(const struct rbln_segment_ops *ops, void *ctx,
						  const char *conf, char *msg, size_t msglen)
{
	pthread_mutexattr_t attr;
	struct rbln_allocator *a;
	struct alloc_conf c;
	bool can_map;
	int ret;

	if (msg && msglen)
		msg[0] = '\0';
	if (!ops || !ops->alloc || !ops->free || !ops->synchronize || !ops->point_done) {
		set_msg(msg, msglen, "incomplete segment provider");
		errno = EINVAL;
		return NULL;
	}
	if (conf_parse(conf, &c, msg, msglen)) {
		errno = EINVAL;
		return NULL;
	}
	can_map = ops->reserve && ops->release && ops->map && ops->unmap;
	if (c.expandable == 1 && !can_map) {
		set_msg(msg, msglen, "expandable_segments needs a driver with VM_BIND "
			"(RBLN_ABI_VERSION 3)");
		errno = EINVAL;
		return NULL;
	}
	a = aligned_alloc(CACHE_LINE, sizeof(*a));
	if (!a)
		return NULL;
	memset(a, 0, sizeof(*a));
	/*
	 * Held briefly but by threads on other CPUs: spinning a little before
	 * sleeping saves a futex wait and wake (microseconds) per collision.
	 */
	if (pthread_mutexattr_init(&attr)) {
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	ret = pthread_mutex_init(&a->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (!ret && pthread_mutex_init(&a->hist.lock, NULL)) {
		pthread_mutex_destroy(&a->lock);
		ret = -1;
	}
	if (ret) {
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	a->ops = *ops;
	a->ctx = ctx;
	a->conf = c;
	a->expandable = c.expandable != 0 && can_map;
	a->prio_state = (uint64_t)(uintptr_t)a;
	atomic_init(&a->hist_on, false);
	atomic_init(&a->hist.stacks, false);
	/* a destroyed allocator's caches of this thread: a new one may get its address */
	tc_prune();
	return a;
}

struct rbln_allocator *rbln_allocator_create(const struct rbln_segment_ops *ops, void *ctx)
{
	const char *conf = getenv("RBLN_ALLOC_CONF");
	struct alloc_conf c;
	char msg[256];

	/* A bad setting must not take the device away: say so, keep the defaults. */
	if (conf && conf_parse(conf, &c, msg, sizeof(msg))) {
		fprintf(stderr, "librbln: RBLN_ALLOC_CONF: %s; using the defaults\n", msg);
		conf = NULL;
	}
	return rbln_allocator_create_conf(ops, ctx, conf, NULL, 0);
}

/* Returns every segment to the provider; blocks still allocated become invalid. */
void rbln_allocator_destroy(struct rbln_allocator *a)
{
	struct rbln_segment *s, *next;
	struct block_chunk *c, *cn;
	struct tcache *tc, *own;

	if (!a)
		return;
	/* detach the thread caches: their threads free them (tc_prune, thread exit) */
	pthread_mutex_lock(&tc_registry);
	own = tc_find(a);
	for (tc = a->tcaches; tc; tc = tc->next) {
		tc_claim(tc, own);
		atomic_store(&tc->a, NULL);
		tc_unclaim(tc);
	}
	pthread_mutex_unlock(&tc_registry);
	tc_prune();

	for (s = a->segments; s; s = next) {
		struct rbln_block *b;

		next = s->next;
		for (b = s->first; b; b = b->next)
			block_drop_site(b);
		rbln_alloc_site_put(s->site);
		if (s->span) {
			while (s->nchunks) {
				struct rbln_chunk *ch = &s->chunks[--s->nchunks];

				a->ops.unmap(a->ctx, ch->va, ch->size, ch->handle);
			}
			a->ops.release(a->ctx, s->va);
			free(s->chunks);
		} else {
			a->ops.free(a->ctx, s->handle);
		}
		free(s);
	}
	hist_clear_locked(&a->hist);	/* nobody else can hold it now */
	pthread_mutex_destroy(&a->hist.lock);
	for (c = a->chunks; c; c = cn) {
		cn = c->next;
		free(c);
	}
	free(a->heap);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The allocator's mutex and every thread cache's held. */
static void stat_out(struct rbln_allocator *a, struct rbln_stat *o, int i, const struct totals *t)
{
	o->current = stat_current(a, i);
	o->peak = a->peak[i];
	o->total_allocated = t->in[i];
	o->total_freed = t->out[i];
}

void rbln_allocator_stats(struct rbln_allocator *a, struct rbln_allocator_stats *out)
{
	struct totals t;
	struct tcache *tc;
	int i;

	alloc_lock(a);
	tc_lock_all(a);
	t = a->totals;
	for (tc = a->tcaches; tc; tc = tc->next) {
		for (i = 0; i < S_SHARED; i++) {
			t.in[i] += tc->totals.in[i];
			t.out[i] += tc->totals.out[i];
		}
	}
	stat_out(a, &out->allocated, S_ALLOCATED, &t);
	stat_out(a, &out->active, S_ACTIVE, &t);
	stat_out(a, &out->cached, S_CACHED, &t);
	out->reserved = a->reserved;
	out->num_alloc_retries = a->num_alloc_retries;
	out->num_ooms = a->num_ooms;
	out->num_device_alloc = a->num_device_alloc;
	out->num_device_free = a->num_device_free;
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
}

void rbln_allocator_reset_peak(struct rbln_allocator *a)
{
	int i;

	alloc_lock(a);
	tc_lock_all(a);
	for (i = 0; i < S_SHARED; i++)
		a->peak[i] = stat_current(a, i);
	peaks_fold_locked(a, false);	/* no headroom left to share */
	a->reserved.peak = a->reserved.current;
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
}

void rbln_allocator_reset_accumulated(struct rbln_allocator *a)
{
	struct tcache *tc;

	alloc_lock(a);
	tc_lock_all(a);
	memset(&a->totals, 0, sizeof(a->totals));
	for (tc = a->tcaches; tc; tc = tc->next)
		memset(&tc->totals, 0, sizeof(tc->totals));
	a->reserved.total_allocated = 0;
	a->reserved.total_freed = 0;
	a->num_alloc_retries = 0;
	a->num_ooms = 0;
	a->num_device_alloc = 0;
	a->num_device_free = 0;
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
}

void rbln_alloc_group_init(struct rbln_alloc_group *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
}

void rbln_alloc_group_destroy(struct rbln_alloc_group *g)
{
	pthread_mutex_destroy(&g->lock);
}

/* Every lock held, so no operation is half applied: @a's values go into @g at once. */
void rbln_allocator_join(struct rbln_allocator *a, struct rbln_alloc_group *g)
{
	int i;

	alloc_lock(a);
	tc_lock_all(a);
	if (!a->group) {
		pthread_mutex_lock(&g->lock);
		for (i = 0; i < S_SHARED; i++)
			group_move(g, i, stat_current(a, i));
		group_move(g, G_RESERVED, a->reserved.current);
		pthread_mutex_unlock(&g->lock);
		a->group_reserved = a->reserved.current;
		a->group = g;
	}
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
}

void rbln_alloc_group_stats(struct rbln_alloc_group *g, struct rbln_allocator_stats *out)
{
	struct rbln_stat *to[G_STATS];
	int i;

	memset(out, 0, sizeof(*out));
	to[S_ALLOCATED] = &out->allocated;
	to[S_ACTIVE] = &out->active;
	to[S_CACHED] = &out->cached;
	to[G_RESERVED] = &out->reserved;
	pthread_mutex_lock(&g->lock);
	for (i = 0; i < G_STATS; i++) {
		to[i]->current = g->current[i];
		to[i]->peak = g->peak[i];
	}
	pthread_mutex_unlock(&g->lock);
}

void rbln_alloc_group_reset_peak(struct rbln_alloc_group *g)
{
	int i;

	pthread_mutex_lock(&g->lock);
	for (i = 0; i < G_STATS; i++)
		g->peak[i] = g->current[i];
	pthread_mutex_unlock(&g->lock);
}

/* ---- snapshots -------------------------------------------------------- */

/* The allocator's mutex and every thread cache's held. */
static void snap_block(const struct rbln_allocator *a, const struct rbln_block *b,
		       struct rbln_alloc_snap_block *o)
{
	struct pstate st = pstate_normalize(a, b->st);

	*o = (struct rbln_alloc_snap_block){
		.va = b->va, .size = b->size, .queue = -1, .thread_cached = b->in_tc,
	};
	if (b->allocated && !b->in_tc) {
		o->state = RBLN_BLOCK_ACTIVE_ALLOCATED;
		o->requested = b->requested;
		o->queue = b->queue;
		o->site = site_get(b->site);
	} else if (st.point) {
		o->state = RBLN_BLOCK_ACTIVE_PENDING_FREE;
		o->queue = st.queue;
	} else {
		o->state = RBLN_BLOCK_INACTIVE;
	}
}

static int cmp_segment_va(const void *x, const void *y)
{
	const struct rbln_alloc_snap_segment *s = x, *t = y;

	return u64_cmp(s->va, t->va);
}

/*
 * Under the allocator's mutex and every thread cache's, like the
 * statistics: the blocks add up to them exactly.  The history's events are
 * copied under its own mutex, after the frees found completed are recorded.
 */
int rbln_allocator_snapshot(struct rbln_allocator *a, struct rbln_alloc_snapshot *out)
{
	struct history *h = &a->hist;
	struct rbln_segment *s;
	struct rbln_block *b;
	size_t ns = 0, nb = 0, i;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	alloc_lock(a);
	tc_lock_all(a);
	/* a segment for each run of mapped memory, as PyTorch shows an expandable segment */
	for (s = a->segments; s; s = s->next) {
		for (b = s->first; b; b = b->next) {
			ns += !b->prev || b->prev->va + b->prev->size != b->va;
			nb++;
		}
	}
	out->segments = malloc((ns ? ns : 1) * sizeof(*out->segments));
	out->blocks = malloc((nb ? nb : 1) * sizeof(*out->blocks));
	if (!out->segments || !out->blocks) {
		ret = -ENOMEM;
		goto unlock;
	}
	for (s = a->segments; s; s = s->next) {
		struct rbln_alloc_snap_segment *o = NULL;

		for (b = s->first; b; b = b->next) {
			struct rbln_alloc_snap_block *ob;

			if (!o || b->prev->va + b->prev->size != b->va) {
				o = &out->segments[out->nsegments++];
				*o = (struct rbln_alloc_snap_segment){
					.va = b->va, .queue = s->queue,
					.small = s->pool == POOL_SMALL, .expandable = s->span != 0,
					.site = site_get(s->site),
					.first_block = out->nblocks,
				};
			}
			ob = &out->blocks[out->nblocks++];
			snap_block(a, b, ob);
			o->size += ob->size;
			o->nblocks++;
			if (ob->state == RBLN_BLOCK_ACTIVE_ALLOCATED) {
				o->allocated += ob->size;
				o->requested += ob->requested;
			}
			if (ob->state != RBLN_BLOCK_INACTIVE)
				o->active += ob->size;
		}
	}
	pthread_mutex_lock(&h->lock);
	if (h->ring) {
		hist_complete_locked(a, 0, 0);
		out->events = malloc((h->len ? h->len : 1) * sizeof(*out->events));
		if (out->events) {
			for (i = 0; i < h->len; i++) {
				out->events[i] = h->ring[(h->head + i) % h->cap];
				site_get(out->events[i].site);
			}
			out->nevents = h->len;
		} else {
			ret = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&h->lock);
unlock:
	tc_unlock_all(a);
	pthread_mutex_unlock(&a->lock);
	if (ret) {
		rbln_alloc_snapshot_release(out);
		return ret;
	}
	qsort(out->segments, out->nsegments, sizeof(*out->segments), cmp_segment_va);
	return 0;
}

void rbln_alloc_snapshot_release(struct rbln_alloc_snapshot *s)
{
	size_t i;

	for (i = 0; i < s->nsegments; i++)
		rbln_alloc_site_put(s->segments[i].site);
	for (i = 0; i < s->nblocks; i++)
		rbln_alloc_site_put(s->blocks[i].site);
	for (i = 0; i < s->nevents; i++)
		rbln_alloc_site_put(s->events[i].site);
	free(s->segments);
	free(s->blocks);
	free(s->events);
	memset(s, 0, sizeof(*s));
}
