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
 * Data structures.  Per pool, the free blocks reusable by any queue live in
 * a treap ordered by (size, va) and the free blocks pending on one queue in
 * a treap ordered by (queue, size, va): best fit is one O(log n) lower-bound
 * descent in each, no scan.  Mixed blocks sit only in the heap.  Blocks of a
 * segment form an address-ordered doubly linked list for coalescing.
 *
 * Locking.  One mutex per allocator guards everything; every public function
 * takes it.  The provider's alloc, free and point_done are called under it
 * (they are quick ioctls or reads, and PyTorch likewise holds its mutex
 * around cudaMalloc).  synchronize, which can wait for a long time, is never
 * called with the mutex held: the OOM ladder and empty_cache drop it, wait,
 * retake it and look at the state afresh.  Other threads keep allocating and
 * freeing meanwhile.
 *
 * Statistics are updated under the mutex; peaks are folded in at the end of
 * each operation, so a peak is the maximum over states between operations
 * (a fresh segment does not flash its whole size into cached.peak before
 * the block carved from it becomes active).  cached == reserved - active
 * holds at all times.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

enum pool_id { POOL_SMALL, POOL_LARGE, POOL_COUNT };

/* Where a free block is indexed. */
enum block_where {
	W_NONE,		/* allocated (or in transit inside a function) */
	W_READY,	/* pool->ready treap: reusable by any queue */
	W_PENDING,	/* pool->pending treap and the heap: reusable by its queue only */
	W_MIXED,	/* heap only: reusable by nobody until its point is done */
};

/* Pending state of a block's memory: point 0 means nothing in flight. */
struct pstate {
	uint64_t point;
	uint32_t queue;
	bool mixed;	/* pending on more than one queue */
};

struct rbln_segment {
	uint64_t va, size;
	uint32_t handle;
	enum pool_id pool;
	struct rbln_block *first;	/* lowest-address block; never changes */
	struct rbln_segment *prev, *next;
};

struct rbln_block {
	struct rbln_segment *seg;
	struct rbln_block *prev, *next;	/* neighbours in the segment, by address */
	uint64_t va, size;		/* size: rounded / whole block */
	uint64_t requested;		/* bytes the caller asked for, while allocated */
	bool allocated;
	struct pstate st;

	enum block_where where;
	struct rbln_block *left, *right;	/* treap links */
	uint32_t prio;
	size_t heap_idx;
};

struct pool {
	struct rbln_block *ready;	/* treap by (size, va) */
	struct rbln_block *pending;	/* treap by (queue, size, va) */
};

struct rbln_allocator {
	pthread_mutex_t lock;
	struct rbln_segment_ops ops;
	void *ctx;

	struct pool pools[POOL_COUNT];
	struct rbln_block **heap;	/* min-heap of pending/mixed free blocks by point */
	size_t heap_len, heap_cap;	/* heap_cap >= nblocks: pushes never allocate */
	size_t nblocks;
	struct rbln_segment *segments;	/* every segment held */
	uint64_t prio_state;

	struct rbln_allocator_stats stats;
};

/* ---- statistics ------------------------------------------------------- */

static void stat_add(struct rbln_stat *s, int64_t delta)
{
	s->current += delta;
	if (delta > 0)
		s->total_allocated += delta;
	else
		s->total_freed -= delta;
}

static void stat_fold_peak(struct rbln_stat *s)
{
	if (s->current > s->peak)
		s->peak = s->current;
}

static void fold_peaks(struct rbln_allocator *a)
{
	stat_fold_peak(&a->stats.allocated);
	stat_fold_peak(&a->stats.reserved);
	stat_fold_peak(&a->stats.active);
	stat_fold_peak(&a->stats.cached);
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

/* Moves every pending block whose point is done to its ready treap. */
static void process_pending(struct rbln_allocator *a)
{
	while (a->heap_len && a->ops.point_done(a->ctx, a->heap[0]->st.point)) {
		struct rbln_block *b = a->heap[0];

		unlink_free(a, b);
		b->st = (struct pstate){ 0 };
		link_free(a, b);
	}
}

/* ---- segments --------------------------------------------------------- */

static bool segment_unsplit_free(const struct rbln_segment *s)
{
	return !s->first->allocated && s->first->size == s->size;
}

static void segment_release(struct rbln_allocator *a, struct rbln_segment *s)
{
	unlink_free(a, s->first);
	a->ops.free(a->ctx, s->handle);
	a->stats.num_device_free++;
	stat_add(&a->stats.reserved, -(int64_t)s->size);
	stat_add(&a->stats.cached, -(int64_t)s->size);
	if (s->prev)
		s->prev->next = s->next;
	else
		a->segments = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s->first);
	free(s);
	a->nblocks--;
}

/* Releases every entirely free segment whose memory no job still uses. */
static void release_cached(struct rbln_allocator *a)
{
	struct rbln_segment *s = a->segments, *next;

	for (; s; s = next) {
		next = s->next;
		if (segment_unsplit_free(s) && !pstate_normalize(a, s->first->st).point)
			segment_release(a, s);
	}
}

static size_t count_pending_unsplit(struct rbln_allocator *a)
{
	struct rbln_segment *s;
	size_t n = 0;

	for (s = a->segments; s; s = s->next)
		if (segment_unsplit_free(s) && pstate_normalize(a, s->first->st).point)
			n++;
	return n;
}

static uint64_t segment_size_for(enum pool_id pool, uint64_t rounded)
{
	if (pool == POOL_SMALL)
		return SMALL_BUFFER;
	if (rounded < MIN_LARGE_ALLOC)
		return LARGE_BUFFER;
	return (rounded + ROUND_LARGE - 1) & ~(ROUND_LARGE - 1);
}

/*
 * Reserves a new segment from the provider and indexes it as one free block.
 * 0 and *out, or the provider's -errno, or -ENOMEM (host).
 */
static int segment_new(struct rbln_allocator *a, enum pool_id pool, uint64_t size,
		       struct rbln_block **out)
{
	struct rbln_segment *s;
	struct rbln_block *b;
	uint32_t handle = 0;
	uint64_t va = 0;
	int ret;

	s = calloc(1, sizeof(*s));
	b = calloc(1, sizeof(*b));
	if (!s || !b || heap_reserve(a)) {
		free(s);
		free(b);
		return -ENOMEM;
	}
	ret = a->ops.alloc(a->ctx, size, &handle, &va);
	if (ret) {
		free(s);
		free(b);
		return ret < 0 ? ret : -EIO;
	}
	a->stats.num_device_alloc++;
	stat_add(&a->stats.reserved, (int64_t)size);
	stat_add(&a->stats.cached, (int64_t)size);

	s->va = va;
	s->size = size;
	s->handle = handle;
	s->pool = pool;
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

/* ---- allocation ------------------------------------------------------- */

static bool should_split(enum pool_id pool, uint64_t remaining)
{
	if (pool == POOL_SMALL)
		return remaining >= MIN_BLOCK_SIZE;
	return remaining > SMALL_SIZE;
}

/* Best fit for @queue: ready blocks and blocks pending on @queue alike. */
static struct rbln_block *find_free(struct rbln_allocator *a, enum pool_id pool, uint64_t size,
				    uint32_t queue)
{
	struct pool *p = &a->pools[pool];
	struct rbln_block *r = ready_lower_bound(p->ready, size);
	struct rbln_block *q = pending_lower_bound(p->pending, queue, size);

	if (!r)
		return q;
	if (!q)
		return r;
	return block_cmp(TREE_READY, q, r) < 0 ? q : r;
}

/* Hands out @b (free, big enough) for @size bytes, splitting off the rest. */
static void take_block(struct rbln_allocator *a, struct rbln_block *b, uint64_t rounded,
		       uint64_t size)
{
	uint64_t remaining = b->size - rounded;
	struct rbln_block *r;

	unlink_free(a, b);
	/* Without host memory for the remainder's bookkeeping, hand out the whole block. */
	if (should_split(b->seg->pool, remaining) && !heap_reserve(a) &&
	    (r = calloc(1, sizeof(*r)))) {
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
	stat_add(&a->stats.allocated, (int64_t)size);
	stat_add(&a->stats.active, (int64_t)b->size);
	stat_add(&a->stats.cached, -(int64_t)b->size);
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

static double mib(int64_t bytes)
{
	return (double)bytes / (double)MiB;
}

int rbln_allocator_alloc(struct rbln_allocator *a, uint64_t size, uint32_t queue,
			 struct rbln_block **out, char *msg, size_t msglen)
{
	struct rbln_block *b = NULL;
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
	pool = rounded <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
	segsize = segment_size_for(pool, rounded);

	pthread_mutex_lock(&a->lock);
	for (attempt = 0; ; attempt++) {
		process_pending(a);
		b = find_free(a, pool, rounded, queue);
		if (b)
			break;
		if (attempt == 1)
			release_cached(a);
		ret = segment_new(a, pool, segsize, &b);
		if (!ret)
			break;
		if (ret != -ENOSPC) {
			set_msg(msg, msglen, "device memory allocation of %" PRIu64
				" bytes failed: %s", segsize, strerror(-ret));
			goto out;
		}
		if (attempt == 1) {
			a->stats.num_ooms++;
			set_msg(msg, msglen, "out of device memory: tried to allocate %.2f MiB; "
				"the device has %.2f MiB in use by this process "
				"(%.2f MiB allocated, %.2f MiB reserved but unallocated); "
				"free or empty_cache() memory",
				mib((int64_t)size), mib(a->stats.reserved.current),
				mib(a->stats.allocated.current),
				mib(a->stats.reserved.current - a->stats.allocated.current));
			ret = -ENOMEM;
			goto out;
		}
		/*
		 * The OOM ladder: wait for the device without holding the lock,
		 * then look again (blocks pending on other queues may be free
		 * now) and, failing that, release the cache and retry once.
		 */
		a->stats.num_alloc_retries++;
		pthread_mutex_unlock(&a->lock);
		/*
		 * A failed wait (device lost or reset) is not fatal here: the
		 * retry then only uses and releases memory whose point is done.
		 */
		a->ops.synchronize(a->ctx);
		pthread_mutex_lock(&a->lock);
	}
	take_block(a, b, rounded, size);
	fold_peaks(a);
	*out = b;
	ret = 0;
out:
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void rbln_allocator_free(struct rbln_allocator *a, struct rbln_block *b, uint64_t last_point,
			 uint32_t last_queue)
{
	struct rbln_block *n;
	struct pstate st;

	if (!a || !b)
		return;
	pthread_mutex_lock(&a->lock);
	/*
	 * A second free of a block not yet merged into a neighbour is ignored
	 * rather than corrupting the pools; once merged, the handle is gone
	 * and freeing it again is undefined, as with free(3).
	 */
	if (!b->allocated) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	st = pstate_normalize(a, (struct pstate){ .point = last_point, .queue = last_queue });
	st = pstate_merge(pstate_normalize(a, b->st), st);

	b->allocated = false;
	stat_add(&a->stats.allocated, -(int64_t)b->requested);
	stat_add(&a->stats.active, -(int64_t)b->size);
	stat_add(&a->stats.cached, (int64_t)b->size);
	b->requested = 0;

	n = b->prev;
	if (n && !n->allocated) {
		unlink_free(a, n);
		st = pstate_merge(pstate_normalize(a, n->st), st);
		n->size += b->size;
		n->next = b->next;
		if (b->next)
			b->next->prev = n;
		free(b);
		a->nblocks--;
		b = n;
	}
	n = b->next;
	if (n && !n->allocated) {
		unlink_free(a, n);
		st = pstate_merge(st, pstate_normalize(a, n->st));
		b->size += n->size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		free(n);
		a->nblocks--;
	}
	b->st = st;
	link_free(a, b);
	fold_peaks(a);
	pthread_mutex_unlock(&a->lock);
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
	return b->seg->handle;
}

/*
 * Like PyTorch's empty_cache, which first waits for the events of freed
 * blocks: when an entirely free segment is still pending, wait for the
 * device (without the lock) so that it can be released too.
 */
void rbln_allocator_empty_cache(struct rbln_allocator *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	process_pending(a);
	if (count_pending_unsplit(a)) {
		pthread_mutex_unlock(&a->lock);
		a->ops.synchronize(a->ctx);
		pthread_mutex_lock(&a->lock);
		process_pending(a);
	}
	release_cached(a);
	pthread_mutex_unlock(&a->lock);
}

/* ---- lifetime and statistics ------------------------------------------ */

struct rbln_allocator *rbln_allocator_create(const struct rbln_segment_ops *ops, void *ctx)
{
	struct rbln_allocator *a;

	if (!ops || !ops->alloc || !ops->free || !ops->synchronize || !ops->point_done) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	if (pthread_mutex_init(&a->lock, NULL)) {
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	a->ops = *ops;
	a->ctx = ctx;
	a->prio_state = (uint64_t)(uintptr_t)a;
	return a;
}

/* Returns every segment to the provider; blocks still allocated become invalid. */
void rbln_allocator_destroy(struct rbln_allocator *a)
{
	struct rbln_segment *s, *next;

	if (!a)
		return;
	for (s = a->segments; s; s = next) {
		struct rbln_block *b = s->first, *bn;

		next = s->next;
		a->ops.free(a->ctx, s->handle);
		for (; b; b = bn) {
			bn = b->next;
			free(b);
		}
		free(s);
	}
	free(a->heap);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

void rbln_allocator_stats(struct rbln_allocator *a, struct rbln_allocator_stats *out)
{
	pthread_mutex_lock(&a->lock);
	*out = a->stats;
	pthread_mutex_unlock(&a->lock);
}

static void stat_reset_peak(struct rbln_stat *s)
{
	s->peak = s->current;
}

static void stat_reset_accumulated(struct rbln_stat *s)
{
	s->total_allocated = 0;
	s->total_freed = 0;
}

void rbln_allocator_reset_peak(struct rbln_allocator *a)
{
	pthread_mutex_lock(&a->lock);
	stat_reset_peak(&a->stats.allocated);
	stat_reset_peak(&a->stats.reserved);
	stat_reset_peak(&a->stats.active);
	stat_reset_peak(&a->stats.cached);
	pthread_mutex_unlock(&a->lock);
}

void rbln_allocator_reset_accumulated(struct rbln_allocator *a)
{
	pthread_mutex_lock(&a->lock);
	stat_reset_accumulated(&a->stats.allocated);
	stat_reset_accumulated(&a->stats.reserved);
	stat_reset_accumulated(&a->stats.active);
	stat_reset_accumulated(&a->stats.cached);
	a->stats.num_alloc_retries = 0;
	a->stats.num_ooms = 0;
	a->stats.num_device_alloc = 0;
	a->stats.num_device_free = 0;
	pthread_mutex_unlock(&a->lock);
}
