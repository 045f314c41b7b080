// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_alloc - librbln's caching device-memory allocator (runtime/rbln_alloc.c)
 *
 * The allocator runs natively against a mock segment provider with a fixed
 * capacity that counts its calls, fails with -ENOSPC when full and has a
 * controllable completed timeline point.  Rules under test are PyTorch's
 * CUDACachingAllocator's, as adapted in the design reference (§6, allocator).
 */

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "rbln_alloc.h"

#define KiB	(1ull << 10)
#define MiB	(1ull << 20)

/* ---- mock provider ---------------------------------------------------- */

struct mock {
	pthread_mutex_t lock;
	uint64_t capacity, used, next_va;
	uint32_t next_handle;
	uint64_t *sizes;	/* by handle; 0: not live */
	uint64_t *vas;		/* by handle */
	size_t nsizes;
	uint64_t last_alloc_size;
	int alloc_calls, alloc_ok, free_calls, bad_frees, sync_calls, live;
	int fail_errno;		/* nonzero: alloc fails with it */
	uint64_t completed;	/* device work up to here is done */
	uint64_t submitted;	/* highest point handed out; synchronize completes it */
};

static int mock_alloc(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va)
{
	struct mock *m = ctx;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	m->alloc_calls++;
	m->last_alloc_size = size;
	if (m->fail_errno) {
		ret = m->fail_errno;
	} else if (size > m->capacity - m->used) {
		ret = -ENOSPC;
	} else {
		uint32_t h = ++m->next_handle;

		if (h >= m->nsizes) {
			size_t n = m->nsizes ? 2 * m->nsizes : 64;

			m->sizes = realloc(m->sizes, n * sizeof(*m->sizes));
			m->vas = realloc(m->vas, n * sizeof(*m->vas));
			memset(m->sizes + m->nsizes, 0, (n - m->nsizes) * sizeof(*m->sizes));
			m->nsizes = n;
		}
		m->sizes[h] = size;
		m->vas[h] = m->next_va;
		m->used += size;
		m->live++;
		m->alloc_ok++;
		*handle = h;
		*va = m->next_va;
		/* a 2 MiB hole after each segment: segments are never adjacent */
		m->next_va += size + 2 * MiB;
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static void mock_free(void *ctx, uint32_t handle)
{
	struct mock *m = ctx;

	pthread_mutex_lock(&m->lock);
	m->free_calls++;
	if (!handle || handle >= m->nsizes || !m->sizes[handle]) {
		m->bad_frees++;
	} else {
		m->used -= m->sizes[handle];
		m->sizes[handle] = 0;
		m->live--;
	}
	pthread_mutex_unlock(&m->lock);
}

static int mock_synchronize(void *ctx)
{
	struct mock *m = ctx;

	pthread_mutex_lock(&m->lock);
	m->sync_calls++;
	if (m->completed < m->submitted)
		m->completed = m->submitted;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static bool mock_point_done(void *ctx, uint64_t point)
{
	struct mock *m = ctx;
	bool done;

	pthread_mutex_lock(&m->lock);
	done = point <= m->completed;
	pthread_mutex_unlock(&m->lock);
	return done;
}

static const struct rbln_segment_ops mock_ops = {
	.alloc = mock_alloc,
	.free = mock_free,
	.synchronize = mock_synchronize,
	.point_done = mock_point_done,
};

static void mock_init(struct mock *m, uint64_t capacity)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->capacity = capacity;
	m->next_va = 1ull << 32;
}

/* Whether [@va, @va + @size) lies in a live segment. */
static bool mock_holds(struct mock *m, uint64_t va, uint64_t size)
{
	bool held = false;
	uint32_t h;

	pthread_mutex_lock(&m->lock);
	for (h = 1; h <= m->next_handle && !held; h++)
		held = m->sizes[h] && m->vas[h] <= va && va + size <= m->vas[h] + m->sizes[h];
	pthread_mutex_unlock(&m->lock);
	return held;
}

static void mock_fini(struct mock *m)
{
	free(m->sizes);
	free(m->vas);
	pthread_mutex_destroy(&m->lock);
}

/* Marks work up to @point submitted and done. */
static void mock_complete(struct mock *m, uint64_t point)
{
	pthread_mutex_lock(&m->lock);
	if (m->submitted < point)
		m->submitted = point;
	if (m->completed < point)
		m->completed = point;
	pthread_mutex_unlock(&m->lock);
}

/* Marks work up to @point submitted, not done. */
static void mock_submit(struct mock *m, uint64_t point)
{
	pthread_mutex_lock(&m->lock);
	if (m->submitted < point)
		m->submitted = point;
	pthread_mutex_unlock(&m->lock);
}

/* ---- helpers ---------------------------------------------------------- */

/*
 * The pools alone, as PyTorch's allocator places blocks: without the
 * thread cache that serves a thread's small blocks in front of them.
 */
static struct rbln_allocator *pools_create(struct mock *m)
{
	return rbln_allocator_create_conf(&mock_ops, m, "thread_cache:0", NULL, 0);
}

#define EXPECT_STAT(s, cur, pk, talloc, tfreed) do {			\
	EXPECT_EQ((int64_t)(cur), (s).current);				\
	EXPECT_EQ((int64_t)(pk), (s).peak);				\
	EXPECT_EQ((int64_t)(talloc), (s).total_allocated);		\
	EXPECT_EQ((int64_t)(tfreed), (s).total_freed);			\
} while (0)

#define EXPECT_CUR_PEAK(s, cur, pk) do {				\
	EXPECT_EQ((int64_t)(cur), (s).current);				\
	EXPECT_EQ((int64_t)(pk), (s).peak);				\
} while (0)

static struct rbln_allocator_stats get_stats(struct __test_metadata *_metadata,
					     struct rbln_allocator *a)
{
	struct rbln_allocator_stats s;

	rbln_allocator_stats(a, &s);
	/* the invariant, checked at every look */
	EXPECT_EQ(s.reserved.current - s.active.current, s.cached.current);
	EXPECT_LE(0, s.cached.current);
	EXPECT_LE(0, s.allocated.current);
	EXPECT_LE(s.allocated.current, s.active.current);
	return s;
}

static struct rbln_block *alloc_ok(struct __test_metadata *_metadata, struct rbln_allocator *a,
				   uint64_t size, uint32_t queue)
{
	struct rbln_block *b = NULL;
	char msg[256];
	int ret;

	ret = rbln_allocator_alloc(a, size, queue, &b, msg, sizeof(msg));
	EXPECT_EQ(0, ret) {
		TH_LOG("alloc(%llu) failed: %s", (unsigned long long)size, msg);
	}
	return b;
}

/* Size of the segment the allocator asks for to serve one @size request. */
static uint64_t segment_for(struct __test_metadata *_metadata, uint64_t size)
{
	struct mock m;
	struct rbln_allocator *a;
	struct rbln_block *b;
	uint64_t seg;

	mock_init(&m, 1ull << 40);
	a = pools_create(&m);
	b = alloc_ok(_metadata, a, size, 0);
	seg = m.alloc_ok == 1 ? m.last_alloc_size : 0;
	if (b)
		rbln_allocator_free(a, b, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
	return seg;
}

/* ---- tests ------------------------------------------------------------ */

TEST(create_rejects_incomplete_ops)
{
	struct rbln_segment_ops ops = mock_ops;

	ops.point_done = NULL;
	EXPECT_NULL(rbln_allocator_create(&ops, NULL));
	EXPECT_NULL(rbln_allocator_create(NULL, NULL));
}

TEST(rounding_and_pools)
{
	struct rbln_block *b1, *b2, *b3, *b4, *b5, *b6;
	struct rbln_allocator *a;
	struct mock m;
	uint64_t seg;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	b1 = alloc_ok(_metadata, a, 1, 0);
	ASSERT_NE(NULL, b1);
	EXPECT_EQ(512, rbln_block_size(b1));
	EXPECT_EQ(1, m.alloc_ok);
	EXPECT_EQ(2 * MiB, m.last_alloc_size);	/* small pool */
	EXPECT_EQ(m.next_handle, rbln_block_handle(b1));
	seg = rbln_block_va(b1);

	b2 = alloc_ok(_metadata, a, 512, 0);
	b3 = alloc_ok(_metadata, a, 513, 0);
	ASSERT_NE(NULL, b2);
	ASSERT_NE(NULL, b3);
	EXPECT_EQ(512, rbln_block_size(b2));
	EXPECT_EQ(1024, rbln_block_size(b3));
	EXPECT_EQ(seg + 512, rbln_block_va(b2));
	EXPECT_EQ(seg + 1024, rbln_block_va(b3));

	/* 1 MiB is still small: carved from the same segment */
	b4 = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, b4);
	EXPECT_EQ(1 * MiB, rbln_block_size(b4));
	EXPECT_EQ(seg + 2048, rbln_block_va(b4));
	EXPECT_EQ(1, m.alloc_ok);
	EXPECT_EQ(rbln_block_handle(b1), rbln_block_handle(b4));

	/* a second 1 MiB no longer fits in 2 MiB - 2048 - 1 MiB: a new small segment */
	b5 = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, b5);
	EXPECT_EQ(2, m.alloc_ok);
	EXPECT_EQ(2 * MiB, m.last_alloc_size);
	EXPECT_NE(rbln_block_handle(b1), rbln_block_handle(b5));

	/* one byte over 1 MiB: the large pool */
	b6 = alloc_ok(_metadata, a, 1 * MiB + 1, 0);
	ASSERT_NE(NULL, b6);
	EXPECT_EQ(1 * MiB + 512, rbln_block_size(b6));
	EXPECT_EQ(3, m.alloc_ok);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);

	get_stats(_metadata, a);
	rbln_allocator_free(a, b1, 0, 0);
	rbln_allocator_free(a, b2, 0, 0);
	rbln_allocator_free(a, b3, 0, 0);
	rbln_allocator_free(a, b4, 0, 0);
	rbln_allocator_free(a, b5, 0, 0);
	rbln_allocator_free(a, b6, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	EXPECT_EQ(0, m.bad_frees);
	mock_fini(&m);
}

TEST(segment_sizes)
{
	EXPECT_EQ(2 * MiB, segment_for(_metadata, 1));
	EXPECT_EQ(2 * MiB, segment_for(_metadata, 1 * MiB));
	EXPECT_EQ(20 * MiB, segment_for(_metadata, 1 * MiB + 1));
	EXPECT_EQ(20 * MiB, segment_for(_metadata, 10 * MiB - 512));
	EXPECT_EQ(20 * MiB, segment_for(_metadata, 10 * MiB - 600));	/* rounds to 10 MiB - 512 */
	EXPECT_EQ(10 * MiB, segment_for(_metadata, 10 * MiB));
	EXPECT_EQ(12 * MiB, segment_for(_metadata, 10 * MiB + 1));
	EXPECT_EQ(22 * MiB, segment_for(_metadata, 21 * MiB));
	EXPECT_EQ(30 * MiB, segment_for(_metadata, 30 * MiB));
	EXPECT_EQ(102 * MiB, segment_for(_metadata, 100 * MiB + 512));
}

TEST(best_fit_small)
{
	struct rbln_block *A, *B, *C, *D, *s[4], *r[5];
	struct rbln_allocator *a;
	struct mock m;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	/* free holes of 4K, 8K, 4K, 2K separated by allocated 512-byte guards */
	A = alloc_ok(_metadata, a, 4 * KiB, 0);
	s[0] = alloc_ok(_metadata, a, 512, 0);
	B = alloc_ok(_metadata, a, 8 * KiB, 0);
	s[1] = alloc_ok(_metadata, a, 512, 0);
	C = alloc_ok(_metadata, a, 4 * KiB, 0);
	s[2] = alloc_ok(_metadata, a, 512, 0);
	D = alloc_ok(_metadata, a, 2 * KiB, 0);
	s[3] = alloc_ok(_metadata, a, 512, 0);
	ASSERT_TRUE(A && B && C && D && s[0] && s[1] && s[2] && s[3]);
	uint64_t va_a = rbln_block_va(A), va_b = rbln_block_va(B);
	uint64_t va_c = rbln_block_va(C), va_d = rbln_block_va(D);
	uint64_t va_tail = rbln_block_va(s[3]) + 512;
	rbln_allocator_free(a, A, 0, 0);
	rbln_allocator_free(a, B, 0, 0);
	rbln_allocator_free(a, C, 0, 0);
	rbln_allocator_free(a, D, 0, 0);

	/* 3K: the 4K holes are the smallest fit; tie broken by the lowest address */
	r[0] = alloc_ok(_metadata, a, 3 * KiB, 0);
	ASSERT_NE(NULL, r[0]);
	EXPECT_EQ(va_a, rbln_block_va(r[0]));
	EXPECT_EQ(3 * KiB, rbln_block_size(r[0]));	/* split: 1K left at va_a + 3K */
	/* 1.5K: the 1K remainder is too small, the 2K hole is the best fit */
	r[1] = alloc_ok(_metadata, a, 1536, 0);
	ASSERT_NE(NULL, r[1]);
	EXPECT_EQ(va_d, rbln_block_va(r[1]));
	/* 4K: C, not the bigger B or the tail */
	r[2] = alloc_ok(_metadata, a, 4 * KiB, 0);
	ASSERT_NE(NULL, r[2]);
	EXPECT_EQ(va_c, rbln_block_va(r[2]));
	/* 6K: B */
	r[3] = alloc_ok(_metadata, a, 6 * KiB, 0);
	ASSERT_NE(NULL, r[3]);
	EXPECT_EQ(va_b, rbln_block_va(r[3]));
	/* 8K: only the tail fits now */
	r[4] = alloc_ok(_metadata, a, 8 * KiB, 0);
	ASSERT_NE(NULL, r[4]);
	EXPECT_EQ(va_tail, rbln_block_va(r[4]));
	EXPECT_EQ(1, m.alloc_ok);

	for (i = 0; i < 5; i++)
		rbln_allocator_free(a, r[i], 0, 0);
	for (i = 0; i < 4; i++)
		rbln_allocator_free(a, s[i], 0, 0);
	get_stats(_metadata, a);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(best_fit_large)
{
	struct rbln_block *b[6], *r[3];
	struct rbln_allocator *a;
	struct mock m;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	/* one 20 MiB segment: 3, 2, 5, 2, 4, 2 MiB and a 2 MiB tail */
	b[0] = alloc_ok(_metadata, a, 3 * MiB, 0);
	b[1] = alloc_ok(_metadata, a, 2 * MiB, 0);
	b[2] = alloc_ok(_metadata, a, 5 * MiB, 0);
	b[3] = alloc_ok(_metadata, a, 2 * MiB, 0);
	b[4] = alloc_ok(_metadata, a, 4 * MiB, 0);
	b[5] = alloc_ok(_metadata, a, 2 * MiB, 0);
	for (i = 0; i < 6; i++)
		ASSERT_NE(NULL, b[i]);
	EXPECT_EQ(1, m.alloc_ok);
	uint64_t va3 = rbln_block_va(b[0]), va4 = rbln_block_va(b[4]);
	uint64_t tail = rbln_block_va(b[5]) + 2 * MiB;
	rbln_allocator_free(a, b[0], 0, 0);
	rbln_allocator_free(a, b[2], 0, 0);
	rbln_allocator_free(a, b[4], 0, 0);

	/* 3.5 MiB: the 4 MiB hole, not the 5; 0.5 MiB left is not split off */
	r[0] = alloc_ok(_metadata, a, 3 * MiB + 512 * KiB, 0);
	ASSERT_NE(NULL, r[0]);
	EXPECT_EQ(va4, rbln_block_va(r[0]));
	EXPECT_EQ(4 * MiB, rbln_block_size(r[0]));
	/* 2.5 MiB: the 3 MiB hole, whole */
	r[1] = alloc_ok(_metadata, a, 2 * MiB + 512 * KiB, 0);
	ASSERT_NE(NULL, r[1]);
	EXPECT_EQ(va3, rbln_block_va(r[1]));
	EXPECT_EQ(3 * MiB, rbln_block_size(r[1]));
	/* 1.5 MiB: the 2 MiB tail */
	r[2] = alloc_ok(_metadata, a, 1 * MiB + 512 * KiB, 0);
	ASSERT_NE(NULL, r[2]);
	EXPECT_EQ(tail, rbln_block_va(r[2]));
	EXPECT_EQ(2 * MiB, rbln_block_size(r[2]));
	EXPECT_EQ(1, m.alloc_ok);

	for (i = 0; i < 3; i++)
		rbln_allocator_free(a, r[i], 0, 0);
	rbln_allocator_free(a, b[1], 0, 0);
	rbln_allocator_free(a, b[3], 0, 0);
	rbln_allocator_free(a, b[5], 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

/* Thousands of holes: best fit stays exact (checked against a brute-force model). */
TEST(best_fit_many_blocks)
{
	enum { PAIRS = 3072, PAIR = 4096, ROUNDS = 2000 };
	struct rbln_block **holes, **guards, **got;
	uint64_t *hva, *hsize;
	struct rbln_allocator *a;
	uint32_t rng = 12345;
	struct mock m;
	int i, j, ngot = 0, mismatches = 0;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	holes = calloc(PAIRS, sizeof(*holes));
	guards = calloc(PAIRS, sizeof(*guards));
	got = calloc(ROUNDS, sizeof(*got));
	hva = calloc(PAIRS, sizeof(*hva));
	hsize = calloc(PAIRS, sizeof(*hsize));
	ASSERT_TRUE(holes && guards && got && hva && hsize);

	/* pairs of 4 KiB fill 2 MiB segments exactly: the holes are the only free blocks */
	for (i = 0; i < PAIRS; i++) {
		uint64_t h;

		rng = rng * 1103515245u + 12345u;
		h = 512 * (1 + (rng >> 16) % 7);
		holes[i] = alloc_ok(_metadata, a, h, 0);
		guards[i] = alloc_ok(_metadata, a, PAIR - h, 0);
		ASSERT_TRUE(holes[i] && guards[i]);
		hva[i] = rbln_block_va(holes[i]);
		hsize[i] = h;
	}
	EXPECT_EQ(PAIRS * PAIR / (2 * MiB), m.alloc_ok);
	for (i = 0; i < PAIRS; i++)
		rbln_allocator_free(a, holes[i], 0, 0);

	for (j = 0; j < ROUNDS; j++) {
		uint64_t want;
		int best = -1;

		rng = rng * 1103515245u + 12345u;
		want = 512 * (1 + (rng >> 16) % 7);
		for (i = 0; i < PAIRS; i++)
			if (hsize[i] >= want && (best < 0 || hsize[i] < hsize[best] ||
						 (hsize[i] == hsize[best] && hva[i] < hva[best])))
				best = i;
		if (best < 0)
			break;
		got[ngot] = alloc_ok(_metadata, a, want, 0);
		ASSERT_NE(NULL, got[ngot]);
		if (rbln_block_va(got[ngot]) != hva[best] || rbln_block_size(got[ngot]) != want)
			mismatches++;
		ngot++;
		hva[best] += want;	/* small pool: any remainder >= 512 is split off */
		hsize[best] -= want;
	}
	EXPECT_EQ(0, mismatches);
	EXPECT_LT(100, ngot);
	EXPECT_EQ(PAIRS * PAIR / (2 * MiB), m.alloc_ok);

	for (i = 0; i < ngot; i++)
		rbln_allocator_free(a, got[i], 0, 0);
	for (i = 0; i < PAIRS; i++)
		rbln_allocator_free(a, guards[i], 0, 0);
	struct rbln_allocator_stats st = get_stats(_metadata, a);

	EXPECT_EQ(0, st.active.current);
	rbln_allocator_empty_cache(a);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.reserved.current);	/* everything coalesced back into whole segments */
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	free(holes);
	free(guards);
	free(got);
	free(hva);
	free(hsize);
	mock_fini(&m);
}

TEST(split_thresholds)
{
	struct rbln_allocator_stats st;
	struct rbln_block *x, *y, *z, *l;
	struct rbln_allocator *a;
	struct mock m;
	uint64_t seg;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	/* small pool: a 512-byte remainder is split off */
	x = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, x);
	seg = rbln_block_va(x);
	y = alloc_ok(_metadata, a, 1 * MiB - 512, 0);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(1 * MiB - 512, rbln_block_size(y));
	z = alloc_ok(_metadata, a, 512, 0);
	ASSERT_NE(NULL, z);
	EXPECT_EQ(seg + 2 * MiB - 512, rbln_block_va(z));
	EXPECT_EQ(1, m.alloc_ok);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.cached.current);

	/* large pool: a remainder of exactly 1 MiB stays with the block */
	l = alloc_ok(_metadata, a, 19 * MiB, 0);
	ASSERT_NE(NULL, l);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);
	EXPECT_EQ(20 * MiB, rbln_block_size(l));
	st = get_stats(_metadata, a);
	EXPECT_EQ(2 * MiB + 20 * MiB, st.active.current);
	EXPECT_EQ(2 * MiB + 19 * MiB, st.allocated.current);
	EXPECT_EQ(0, st.cached.current);
	rbln_allocator_free(a, l, 0, 0);
	rbln_allocator_empty_cache(a);

	/* 1 MiB + 512 is more than 1 MiB: split */
	l = alloc_ok(_metadata, a, 19 * MiB - 512, 0);
	ASSERT_NE(NULL, l);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);
	EXPECT_EQ(19 * MiB - 512, rbln_block_size(l));
	st = get_stats(_metadata, a);
	EXPECT_EQ(1 * MiB + 512, st.cached.current);
	rbln_allocator_free(a, l, 0, 0);

	/* reusing a cached large block: 4 MiB for 3 MiB keeps it whole, 2.5 MiB splits */
	rbln_allocator_empty_cache(a);
	l = alloc_ok(_metadata, a, 8 * MiB, 0);	/* a 20 MiB segment */
	ASSERT_NE(NULL, l);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);
	struct rbln_block *l2 = alloc_ok(_metadata, a, 8 * MiB, 0);	/* leaves a 4 MiB tail */

	ASSERT_NE(NULL, l2);
	EXPECT_EQ(rbln_block_va(l) + 8 * MiB, rbln_block_va(l2));
	struct rbln_block *t = alloc_ok(_metadata, a, 3 * MiB, 0);

	ASSERT_NE(NULL, t);
	EXPECT_EQ(4 * MiB, rbln_block_size(t));
	rbln_allocator_free(a, t, 0, 0);
	t = alloc_ok(_metadata, a, 2 * MiB + 512 * KiB, 0);
	ASSERT_NE(NULL, t);
	EXPECT_EQ(2 * MiB + 512 * KiB, rbln_block_size(t));
	st = get_stats(_metadata, a);
	EXPECT_EQ(1 * MiB + 512 * KiB, st.cached.current);

	rbln_allocator_free(a, t, 0, 0);
	rbln_allocator_free(a, l, 0, 0);
	rbln_allocator_free(a, l2, 0, 0);
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, z, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(coalescing)
{
	struct rbln_block *b[4], *w;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;
	uint64_t seg;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	for (i = 0; i < 4; i++) {
		b[i] = alloc_ok(_metadata, a, 512 * KiB, 0);
		ASSERT_NE(NULL, b[i]);
	}
	EXPECT_EQ(1, m.alloc_ok);
	seg = rbln_block_va(b[0]);

	/* the middle first, then the sides */
	rbln_allocator_free(a, b[1], 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.free_calls);
	rbln_allocator_free(a, b[0], 0, 0);
	rbln_allocator_free(a, b[3], 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.free_calls);	/* b[2] still splits the segment */
	rbln_allocator_free(a, b[2], 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_EQ(2 * MiB, st.cached.current);
	EXPECT_EQ(0, st.active.current);

	/* one free block of the segment's size: a 1 MiB request starts at its base */
	w = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, w);
	EXPECT_EQ(seg, rbln_block_va(w));
	EXPECT_EQ(1, m.alloc_ok);
	rbln_allocator_free(a, w, 0, 0);

	/* and it is unsplit: empty_cache hands it back */
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, m.free_calls);
	EXPECT_EQ(0, m.live);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.reserved.current);
	EXPECT_EQ(1, st.num_device_free);
	rbln_allocator_destroy(a);
	EXPECT_EQ(1, m.free_calls);
	mock_fini(&m);
}

TEST(stats_exact)
{
	struct rbln_allocator_stats st;
	struct rbln_block *A, *B, *C;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 0, 0, 0);
	EXPECT_STAT(st.reserved, 0, 0, 0, 0);
	EXPECT_CUR_PEAK(st.active, 0, 0);
	EXPECT_CUR_PEAK(st.cached, 0, 0);

	A = alloc_ok(_metadata, a, 1000, 0);
	ASSERT_NE(NULL, A);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 1000, 1000, 1000, 0);
	EXPECT_STAT(st.reserved, 2 * MiB, 2 * MiB, 2 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 1024, 1024);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB - 1024, 2 * MiB - 1024);
	EXPECT_EQ(1, st.num_device_alloc);
	EXPECT_EQ(0, st.num_device_free);

	B = alloc_ok(_metadata, a, 5 * MiB, 0);
	ASSERT_NE(NULL, B);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 5 * MiB + 1000, 5 * MiB + 1000, 5 * MiB + 1000, 0);
	EXPECT_STAT(st.reserved, 22 * MiB, 22 * MiB, 22 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 5 * MiB + 1024, 5 * MiB + 1024);
	EXPECT_CUR_PEAK(st.cached, 17 * MiB - 1024, 17 * MiB - 1024);
	EXPECT_EQ(2, st.num_device_alloc);

	rbln_allocator_free(a, A, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 5 * MiB, 5 * MiB + 1000, 5 * MiB + 1000, 1000);
	EXPECT_STAT(st.reserved, 22 * MiB, 22 * MiB, 22 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 5 * MiB, 5 * MiB + 1024);
	EXPECT_CUR_PEAK(st.cached, 17 * MiB, 17 * MiB);

	rbln_allocator_free(a, B, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 5 * MiB + 1000, 5 * MiB + 1000, 5 * MiB + 1000);
	EXPECT_STAT(st.reserved, 22 * MiB, 22 * MiB, 22 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 0, 5 * MiB + 1024);
	EXPECT_CUR_PEAK(st.cached, 22 * MiB, 22 * MiB);

	rbln_allocator_empty_cache(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.reserved, 0, 22 * MiB, 22 * MiB, 22 * MiB);
	EXPECT_CUR_PEAK(st.cached, 0, 22 * MiB);
	EXPECT_EQ(2, st.num_device_alloc);
	EXPECT_EQ(2, st.num_device_free);
	EXPECT_EQ(2, m.free_calls);

	rbln_allocator_reset_peak(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 0, 5 * MiB + 1000, 5 * MiB + 1000);
	EXPECT_STAT(st.reserved, 0, 0, 22 * MiB, 22 * MiB);
	EXPECT_CUR_PEAK(st.active, 0, 0);
	EXPECT_CUR_PEAK(st.cached, 0, 0);
	EXPECT_EQ(2, st.num_device_alloc);	/* counters are not peaks */

	C = alloc_ok(_metadata, a, 3 * MiB, 0);
	ASSERT_NE(NULL, C);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 3 * MiB, 3 * MiB, 8 * MiB + 1000, 5 * MiB + 1000);
	EXPECT_STAT(st.reserved, 20 * MiB, 20 * MiB, 42 * MiB, 22 * MiB);
	EXPECT_CUR_PEAK(st.active, 3 * MiB, 3 * MiB);
	EXPECT_CUR_PEAK(st.cached, 17 * MiB, 17 * MiB);
	EXPECT_EQ(3, st.num_device_alloc);

	rbln_allocator_reset_accumulated(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 3 * MiB, 3 * MiB, 0, 0);
	EXPECT_STAT(st.reserved, 20 * MiB, 20 * MiB, 0, 0);
	EXPECT_CUR_PEAK(st.active, 3 * MiB, 3 * MiB);
	EXPECT_CUR_PEAK(st.cached, 17 * MiB, 17 * MiB);
	EXPECT_EQ(0, st.num_device_alloc);
	EXPECT_EQ(0, st.num_device_free);
	EXPECT_EQ(0, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_ooms);

	rbln_allocator_free(a, C, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 3 * MiB, 0, 3 * MiB);
	EXPECT_STAT(st.reserved, 20 * MiB, 20 * MiB, 0, 0);
	EXPECT_CUR_PEAK(st.active, 0, 3 * MiB);
	EXPECT_CUR_PEAK(st.cached, 20 * MiB, 20 * MiB);

	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(empty_cache_only_unsplit)
{
	struct rbln_block *x, *y, *z, *l;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	x = alloc_ok(_metadata, a, 1 * MiB, 0);	/* segment 1 */
	y = alloc_ok(_metadata, a, 1 * MiB, 0);	/* segment 1 */
	z = alloc_ok(_metadata, a, 512 * KiB, 0);	/* segment 2 */
	l = alloc_ok(_metadata, a, 5 * MiB, 0);	/* segment 3 (large) */
	ASSERT_TRUE(x && y && z && l);
	EXPECT_EQ(3, m.alloc_ok);
	rbln_allocator_free(a, y, 0, 0);	/* segment 1 stays split by x */
	rbln_allocator_free(a, z, 0, 0);
	rbln_allocator_free(a, l, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_EQ(24 * MiB, st.reserved.current);

	rbln_allocator_empty_cache(a);
	EXPECT_EQ(2, m.free_calls);
	EXPECT_EQ(1, m.live);
	EXPECT_EQ(2 * MiB, m.used);
	st = get_stats(_metadata, a);
	EXPECT_EQ(2 * MiB, st.reserved.current);
	EXPECT_EQ(1 * MiB, st.cached.current);
	EXPECT_EQ(2, st.num_device_free);
	EXPECT_EQ(0, m.sync_calls);	/* nothing pending: no wait */

	/* x still there and usable */
	EXPECT_EQ(1 * MiB, rbln_block_size(x));
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(3, m.free_calls);
	EXPECT_EQ(0, m.live);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.reserved.current);
	EXPECT_EQ(0, st.cached.current);
	rbln_allocator_destroy(a);
	EXPECT_EQ(3, m.free_calls);
	EXPECT_EQ(0, m.bad_frees);
	mock_fini(&m);
}

/* A segment freed by work still in flight is released after a wait, like PyTorch's. */
TEST(empty_cache_waits_for_pending)
{
	struct rbln_allocator *a;
	struct rbln_block *x;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	x = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, x);
	mock_submit(&m, 7);
	rbln_allocator_free(a, x, 7, 1);
	EXPECT_EQ(0, m.sync_calls);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, m.sync_calls);
	EXPECT_EQ(1, m.free_calls);
	EXPECT_EQ(0, m.live);

	/* with the point already done there is nothing to wait for */
	x = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, x);
	rbln_allocator_free(a, x, 7, 1);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, m.sync_calls);
	EXPECT_EQ(2, m.free_calls);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

TEST(oom_ladder_retry_succeeds)
{
	struct rbln_block *s[4], *big;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;
	int i;

	mock_init(&m, 20 * MiB);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	for (i = 0; i < 4; i++) {
		s[i] = alloc_ok(_metadata, a, 1 * MiB, 0);
		ASSERT_NE(NULL, s[i]);
	}
	EXPECT_EQ(2, m.alloc_ok);
	EXPECT_EQ(4 * MiB, m.used);
	for (i = 0; i < 3; i++)
		rbln_allocator_free(a, s[i], 0, 0);
	/* the last one is still used by point 3 on queue 1: only a sync frees it */
	mock_submit(&m, 3);
	rbln_allocator_free(a, s[3], 3, 1);

	/* 18 MiB + the 4 MiB cached > 20 MiB: sync, release the cache, retry */
	big = alloc_ok(_metadata, a, 18 * MiB, 2);
	ASSERT_NE(NULL, big);
	EXPECT_EQ(18 * MiB, rbln_block_size(big));
	EXPECT_EQ(1, m.sync_calls);
	EXPECT_EQ(4, m.alloc_calls);	/* 2 small, 1 refused, 1 granted */
	EXPECT_EQ(3, m.alloc_ok);
	EXPECT_EQ(2, m.free_calls);
	EXPECT_EQ(18 * MiB, m.used);
	st = get_stats(_metadata, a);
	EXPECT_EQ(1, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_ooms);
	EXPECT_EQ(3, st.num_device_alloc);
	EXPECT_EQ(2, st.num_device_free);
	/* the cache went back before the new segment came: the peak never saw 22 MiB */
	EXPECT_STAT(st.reserved, 18 * MiB, 18 * MiB, 22 * MiB, 4 * MiB);
	EXPECT_STAT(st.allocated, 18 * MiB, 18 * MiB, 22 * MiB, 4 * MiB);
	EXPECT_CUR_PEAK(st.cached, 0, 4 * MiB);

	rbln_allocator_free(a, big, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(oom_failure_message)
{
	struct rbln_block *A, *S, *out = (void *)1;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	char msg[512], small[8];
	struct mock m;
	int ret;

	mock_init(&m, 24 * MiB);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	A = alloc_ok(_metadata, a, 19 * MiB, 0);	/* a 20 MiB segment, not split: 20 MiB active */
	S = alloc_ok(_metadata, a, 512 * KiB, 0);	/* a 2 MiB segment, split */
	ASSERT_TRUE(A && S);

	/* 10.5 MiB needs a 12 MiB segment; 22 + 12 > 24 even after the ladder */
	ret = rbln_allocator_alloc(a, 10 * MiB + 512 * KiB, 0, &out, msg, sizeof(msg));
	EXPECT_EQ(-ENOMEM, ret);
	EXPECT_NULL(out);
	EXPECT_STREQ("out of device memory: tried to allocate 10.50 MiB; the device has "
		     "22.00 MiB in use by this process (19.50 MiB allocated, 2.50 MiB reserved "
		     "but unallocated); free or empty_cache() memory", msg);
	st = get_stats(_metadata, a);
	EXPECT_EQ(1, st.num_ooms);
	EXPECT_EQ(1, st.num_alloc_retries);
	EXPECT_EQ(1, m.sync_calls);
	EXPECT_EQ(0, m.free_calls);	/* nothing releasable: both segments are in use */
	EXPECT_EQ(4, m.alloc_calls);
	EXPECT_EQ(22 * MiB, st.reserved.current);
	EXPECT_EQ(19 * MiB + 512 * KiB, st.allocated.current);
	EXPECT_EQ(20 * MiB + 512 * KiB, st.active.current);

	/* no message buffer, and a tiny one, are fine */
	ret = rbln_allocator_alloc(a, 30 * MiB, 0, &out, NULL, 0);
	EXPECT_EQ(-ENOMEM, ret);
	ret = rbln_allocator_alloc(a, 30 * MiB, 0, &out, small, sizeof(small));
	EXPECT_EQ(-ENOMEM, ret);
	EXPECT_STREQ("out of ", small);
	st = get_stats(_metadata, a);
	EXPECT_EQ(3, st.num_ooms);
	EXPECT_EQ(3, st.num_alloc_retries);
	EXPECT_EQ(2, st.num_device_alloc);

	/* the counters are accumulated stats */
	rbln_allocator_reset_accumulated(a);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.num_ooms);
	EXPECT_EQ(0, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_device_alloc);
	EXPECT_EQ(22 * MiB, st.reserved.current);

	/* after freeing, the same request fits */
	rbln_allocator_free(a, A, 0, 0);
	out = alloc_ok(_metadata, a, 10 * MiB + 512 * KiB, 0);
	ASSERT_NE(NULL, out);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.num_ooms);
	EXPECT_EQ(0, st.num_device_alloc);	/* carved from A's cached 20 MiB */
	rbln_allocator_free(a, out, 0, 0);
	rbln_allocator_free(a, S, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(provider_error_passes_through)
{
	struct rbln_block *out = NULL;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;
	char msg[256];

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	m.fail_errno = -EIO;
	EXPECT_EQ(-EIO, rbln_allocator_alloc(a, 4096, 0, &out, msg, sizeof(msg)));
	EXPECT_NULL(out);
	EXPECT_NE(0, strlen(msg));
	EXPECT_EQ(1, m.alloc_calls);
	EXPECT_EQ(0, m.sync_calls);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_ooms);
	EXPECT_EQ(0, st.num_device_alloc);
	EXPECT_EQ(0, st.reserved.current);

	m.fail_errno = 0;
	out = alloc_ok(_metadata, a, 4096, 0);
	ASSERT_NE(NULL, out);
	rbln_allocator_free(a, out, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(invalid_sizes)
{
	struct rbln_block *out = (void *)1;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;
	char msg[256];

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	EXPECT_EQ(-EINVAL, rbln_allocator_alloc(a, 0, 0, &out, msg, sizeof(msg)));
	EXPECT_NULL(out);
	EXPECT_NE(0, strlen(msg));
	EXPECT_EQ(-EINVAL, rbln_allocator_alloc(a, (1ull << 48) + 1, 0, &out, NULL, 0));
	EXPECT_EQ(-EINVAL, rbln_allocator_alloc(a, UINT64_MAX, 0, &out, NULL, 0));
	EXPECT_EQ(-EINVAL, rbln_allocator_alloc(a, UINT64_MAX - 100, 0, &out, NULL, 0));
	EXPECT_EQ(-EINVAL, rbln_allocator_alloc(a, 4096, 0, NULL, NULL, 0));
	EXPECT_EQ(0, m.alloc_calls);

	/* 2^48 is a size, merely too big for this device */
	EXPECT_EQ(-ENOMEM, rbln_allocator_alloc(a, 1ull << 48, 0, &out, NULL, 0));
	EXPECT_EQ(1ull << 48, m.last_alloc_size);
	st = get_stats(_metadata, a);
	EXPECT_EQ(1, st.num_ooms);
	EXPECT_EQ(0, st.allocated.current);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/*
 * The queue rule, from block A freed pending on point 5 of queue 1: queue
 * 2 must not get it while point 5 runs (t[0]), queue 1 gets it at once,
 * its work running after point 5 (t[1]); freed again unused it is still
 * point 5's (t[2]); once point 5 is done queue 2 gets it back (t[3]).
 */
static void queue_rule_sequence(struct __test_metadata *_metadata, struct rbln_allocator *a,
				struct mock *m, struct rbln_block *A, struct rbln_block **t)
{
	uint64_t va = rbln_block_va(A);

	mock_submit(m, 5);
	rbln_allocator_free(a, A, 5, 1);
	t[0] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[0]);
	EXPECT_NE(va, rbln_block_va(t[0]));
	t[1] = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, t[1]);
	EXPECT_EQ(va, rbln_block_va(t[1]));
	rbln_allocator_free(a, t[1], 0, 0);
	t[2] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[2]);
	EXPECT_NE(va, rbln_block_va(t[2]));
	mock_complete(m, 5);
	t[3] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[3]);
	EXPECT_EQ(va, rbln_block_va(t[3]));
	EXPECT_EQ(1, m->alloc_ok);
	EXPECT_EQ(0, m->sync_calls);
}

/* Frees what queue_rule_sequence() left allocated, and G. */
static void queue_rule_release(struct rbln_allocator *a, struct rbln_block *G,
			       struct rbln_block **t)
{
	int i;

	for (i = 0; i < 4; i++)
		if (i != 1)
			rbln_allocator_free(a, t[i], 0, 0);
	rbln_allocator_free(a, G, 0, 0);
}

TEST(queue_rule)
{
	struct rbln_block *A, *G, *t[4];
	struct rbln_allocator *a;
	struct mock m;
	uint64_t seg;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	A = alloc_ok(_metadata, a, 4096, 1);
	G = alloc_ok(_metadata, a, 4096, 1);	/* keeps A's hole apart from the tail */
	ASSERT_TRUE(A && G);
	seg = rbln_block_va(A);
	queue_rule_sequence(_metadata, a, &m, A, t);
	/* the shared pool's placement: past G, then the exact hole */
	EXPECT_EQ(seg + 8192, rbln_block_va(t[0]));
	EXPECT_EQ(seg + 12288, rbln_block_va(t[2]));
	queue_rule_release(a, G, t);
	get_stats(_metadata, a);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

/* Each pending block becomes reusable by other queues as soon as its own point is done. */
TEST(queue_rule_points_complete_one_by_one)
{
	struct rbln_block *A, *B, *g[2], *t[3];
	struct rbln_allocator *a;
	struct mock m;
	uint64_t va_a, va_b;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	B = alloc_ok(_metadata, a, 4096, 1);
	g[0] = alloc_ok(_metadata, a, 512, 1);
	A = alloc_ok(_metadata, a, 4096, 1);
	g[1] = alloc_ok(_metadata, a, 512, 1);
	ASSERT_TRUE(A && B && g[0] && g[1]);
	va_a = rbln_block_va(A);
	va_b = rbln_block_va(B);
	mock_submit(&m, 8);
	rbln_allocator_free(a, A, 5, 1);
	rbln_allocator_free(a, B, 8, 1);

	mock_complete(&m, 5);
	t[0] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[0]);
	EXPECT_EQ(va_a, rbln_block_va(t[0]));	/* point 5 done, point 8 not */
	t[1] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[1]);
	EXPECT_NE(va_b, rbln_block_va(t[1]));
	mock_complete(&m, 8);
	t[2] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_NE(NULL, t[2]);
	EXPECT_EQ(va_b, rbln_block_va(t[2]));

	for (i = 0; i < 3; i++)
		rbln_allocator_free(a, t[i], 0, 2);
	rbln_allocator_free(a, g[0], 0, 1);
	rbln_allocator_free(a, g[1], 0, 1);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Pending memory of two queues, coalesced: nobody reuses it before the later point. */
TEST(queue_rule_mixed_coalesce)
{
	struct rbln_block *A, *B, *G, *t[4];
	struct rbln_allocator *a;
	struct mock m;
	uint64_t seg;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);

	A = alloc_ok(_metadata, a, 4096, 1);
	B = alloc_ok(_metadata, a, 4096, 2);
	G = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_TRUE(A && B && G);
	seg = rbln_block_va(A);
	mock_submit(&m, 6);
	rbln_allocator_free(a, A, 5, 1);
	rbln_allocator_free(a, B, 6, 2);	/* merges with A: 8K pending on 1 and 2 */

	t[0] = alloc_ok(_metadata, a, 4096, 1);
	t[1] = alloc_ok(_metadata, a, 4096, 2);
	ASSERT_TRUE(t[0] && t[1]);
	EXPECT_NE(seg, rbln_block_va(t[0]));
	EXPECT_NE(seg, rbln_block_va(t[1]));
	mock_complete(&m, 5);
	t[2] = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, t[2]);
	EXPECT_NE(seg, rbln_block_va(t[2]));	/* point 6 on queue 2 still runs */
	mock_complete(&m, 6);
	t[3] = alloc_ok(_metadata, a, 8192, 3);
	ASSERT_NE(NULL, t[3]);
	EXPECT_EQ(seg, rbln_block_va(t[3]));
	EXPECT_EQ(1, m.alloc_ok);

	for (i = 0; i < 4; i++)
		rbln_allocator_free(a, t[i], 0, 0);
	rbln_allocator_free(a, G, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* The OOM ladder's synchronize makes memory pending on another queue reusable. */
TEST(oom_ladder_reuses_pending_after_sync)
{
	struct rbln_block *x, *y;
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 20 * MiB);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	x = alloc_ok(_metadata, a, 12 * MiB, 1);
	ASSERT_NE(NULL, x);
	mock_submit(&m, 9);
	rbln_allocator_free(a, x, 9, 1);

	/* queue 2: the pending 12 MiB does not qualify, 12 more do not fit, sync, reuse */
	y = alloc_ok(_metadata, a, 12 * MiB, 2);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(1, m.sync_calls);
	EXPECT_EQ(1, m.alloc_ok);
	EXPECT_EQ(0, m.free_calls);
	st = get_stats(_metadata, a);
	EXPECT_EQ(1, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_ooms);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(destroy_returns_every_segment)
{
	struct rbln_block *b[8];
	struct rbln_allocator *a;
	struct mock m;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	b[0] = alloc_ok(_metadata, a, 100, 0);
	b[1] = alloc_ok(_metadata, a, 1 * MiB, 0);
	b[2] = alloc_ok(_metadata, a, 1 * MiB, 1);
	b[3] = alloc_ok(_metadata, a, 3 * MiB, 0);
	b[4] = alloc_ok(_metadata, a, 10 * MiB, 0);
	b[5] = alloc_ok(_metadata, a, 25 * MiB, 2);
	b[6] = alloc_ok(_metadata, a, 19 * MiB, 0);
	b[7] = alloc_ok(_metadata, a, 700 * KiB, 0);
	for (i = 0; i < 8; i++)
		ASSERT_NE(NULL, b[i]);
	EXPECT_LT(3, m.live);
	mock_submit(&m, 4);
	for (i = 0; i < 8; i++)
		rbln_allocator_free(a, b[i], i & 1 ? 4 : 0, i % 3);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	EXPECT_EQ(0, m.used);
	EXPECT_EQ(m.alloc_ok, m.free_calls);
	EXPECT_EQ(0, m.bad_frees);
	mock_fini(&m);
}

/* ---- RBLN_ALLOC_CONF -------------------------------------------------- */

static struct rbln_allocator *create_conf_ok(struct __test_metadata *_metadata, struct mock *m,
					     const char *conf)
{
	struct rbln_allocator *a;
	char msg[256];

	a = rbln_allocator_create_conf(&mock_ops, m, conf, msg, sizeof(msg));
	EXPECT_NE(NULL, a) {
		TH_LOG("'%s' refused: %s", conf, msg);
	}
	return a;
}

TEST(conf_parse)
{
	static const char *const good[] = {
		"", "exact_large_segments:True", "exact_large_segments:false",
		"release_before_grow:1,exact_large_segments:0", "max_split_size_mb:21",
		"thread_cache:0", "thread_cache:4096", "expandable_segments:False",
		"thread_cache:8,", "release_before_grow:TRUE,max_split_size_mb:100,thread_cache:16",
	};
	static const struct { const char *conf, *says; } bad[] = {
		{ "bogus:1", "unknown option 'bogus'" },
		{ "exact_large_segments", "is not key:value" },
		{ "exact_large_segments:maybe", "bad value 'maybe' for exact_large_segments" },
		{ "release_before_grow:", "bad value '' for release_before_grow" },
		{ "max_split_size_mb:20", "bad value '20' for max_split_size_mb" },
		{ "max_split_size_mb:-5", "bad value '-5'" },
		{ "max_split_size_mb:99999999999999999999", "bad value" },
		{ "thread_cache:4097", "bad value '4097' for thread_cache" },
		{ "thread_cache:8,,", "is not key:value" },
		{ "expandable_segments:maybe", "bad value 'maybe' for expandable_segments" },
		{ "expandable_segments:True", "expandable_segments needs a driver with VM_BIND" },
	};
	struct rbln_allocator *a;
	struct mock m;
	char msg[256];
	size_t i;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, NULL);
	rbln_allocator_destroy(a);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		a = create_conf_ok(_metadata, &m, good[i]);
		rbln_allocator_destroy(a);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		a = rbln_allocator_create_conf(&mock_ops, &m, bad[i].conf, msg, sizeof(msg));
		EXPECT_NULL(a) {
			TH_LOG("'%s' accepted", bad[i].conf);
		}
		rbln_allocator_destroy(a);
		EXPECT_EQ(EINVAL, errno);
		EXPECT_NE(NULL, strstr(msg, bad[i].says)) {
			TH_LOG("'%s': '%s' does not say '%s'", bad[i].conf, msg, bad[i].says);
		}
	}
	EXPECT_EQ(0, m.alloc_calls);
	mock_fini(&m);
}

/* The environment's RBLN_ALLOC_CONF is read by rbln_allocator_create(); a bad one keeps the defaults. */
TEST(conf_from_environment)
{
	struct rbln_allocator *a;
	struct rbln_block *b;
	struct mock m;

	mock_init(&m, 1ull << 30);
	ASSERT_EQ(0, setenv("RBLN_ALLOC_CONF", "exact_large_segments:True", 1));
	a = rbln_allocator_create(&mock_ops, &m);
	ASSERT_NE(NULL, a);
	b = alloc_ok(_metadata, a, 3 * MiB, 0);
	EXPECT_EQ(4 * MiB, m.last_alloc_size);
	rbln_allocator_free(a, b, 0, 0);
	rbln_allocator_destroy(a);

	ASSERT_EQ(0, setenv("RBLN_ALLOC_CONF", "exact_large_segments:sometimes", 1));
	a = rbln_allocator_create(&mock_ops, &m);
	ASSERT_EQ(0, unsetenv("RBLN_ALLOC_CONF"));
	ASSERT_NE(NULL, a);
	b = alloc_ok(_metadata, a, 3 * MiB, 0);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);
	rbln_allocator_free(a, b, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(conf_exact_large_segments)
{
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct rbln_block *x, *y, *z;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "exact_large_segments:True");
	ASSERT_NE(NULL, a);

	/* 5 MiB: a 6 MiB segment; the 1 MiB left is not split off (large pool) */
	x = alloc_ok(_metadata, a, 5 * MiB, 0);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(6 * MiB, m.last_alloc_size);
	EXPECT_EQ(6 * MiB, rbln_block_size(x));
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 5 * MiB, 5 * MiB, 5 * MiB, 0);
	EXPECT_STAT(st.reserved, 6 * MiB, 6 * MiB, 6 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 6 * MiB, 6 * MiB);
	EXPECT_CUR_PEAK(st.cached, 0, 0);

	/* 1 MiB + 1: 2 MiB; 10 MiB - 512: 10 MiB; the small pool is unchanged */
	y = alloc_ok(_metadata, a, 1 * MiB + 1, 0);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(2 * MiB, m.last_alloc_size);
	z = alloc_ok(_metadata, a, 10 * MiB - 512, 0);
	ASSERT_NE(NULL, z);
	EXPECT_EQ(10 * MiB, m.last_alloc_size);
	rbln_allocator_free(a, z, 0, 0);
	z = alloc_ok(_metadata, a, 100, 0);
	ASSERT_NE(NULL, z);
	EXPECT_EQ(2 * MiB, m.last_alloc_size);
	EXPECT_EQ(4, m.alloc_ok);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 6 * MiB + 1 + 100, 16 * MiB + 1 - 512, 16 * MiB + 1 + 100 - 512,
		    10 * MiB - 512);
	EXPECT_STAT(st.reserved, 20 * MiB, 20 * MiB, 20 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 8 * MiB + 512, 18 * MiB);
	EXPECT_CUR_PEAK(st.cached, 12 * MiB - 512, 12 * MiB - 512);

	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, z, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(conf_release_before_grow)
{
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct rbln_block *x, *s;
	struct mock m;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		mock_init(&m, 1ull << 30);
		a = create_conf_ok(_metadata, &m, pass ? "release_before_grow:True" : "");
		ASSERT_NE(NULL, a);
		s = alloc_ok(_metadata, a, 4096, 0);	/* a small segment that stays split */
		x = alloc_ok(_metadata, a, 8 * MiB, 0);	/* a 20 MiB segment, then free */
		ASSERT_TRUE(s && x);
		rbln_allocator_free(a, x, 0, 0);

		/* 30 MiB does not fit the free 20 MiB: released first, or kept */
		x = alloc_ok(_metadata, a, 30 * MiB, 0);
		ASSERT_NE(NULL, x);
		st = get_stats(_metadata, a);
		EXPECT_EQ(3, st.num_device_alloc);
		EXPECT_EQ(pass ? 1 : 0, st.num_device_free);
		EXPECT_EQ(pass ? 1 : 0, m.free_calls);
		if (pass) {
			EXPECT_STAT(st.reserved, 32 * MiB, 32 * MiB, 52 * MiB, 20 * MiB);
			EXPECT_CUR_PEAK(st.cached, 2 * MiB - 4096, 22 * MiB - 4096);
		} else {
			EXPECT_STAT(st.reserved, 52 * MiB, 52 * MiB, 52 * MiB, 0);
			EXPECT_CUR_PEAK(st.cached, 22 * MiB - 4096, 22 * MiB - 4096);
		}
		EXPECT_CUR_PEAK(st.active, 30 * MiB + 4096, 30 * MiB + 4096);
		EXPECT_EQ(0, st.num_alloc_retries);
		EXPECT_EQ(0, m.sync_calls);

		/* a split segment is never released */
		rbln_allocator_free(a, x, 0, 0);
		x = alloc_ok(_metadata, a, 40 * MiB, 0);
		ASSERT_NE(NULL, x);
		st = get_stats(_metadata, a);
		EXPECT_EQ(pass ? 2 : 0, st.num_device_free);
		EXPECT_EQ(pass ? 42 * MiB : 92 * MiB, st.reserved.current);
		rbln_allocator_free(a, x, 0, 0);
		rbln_allocator_free(a, s, 0, 0);
		rbln_allocator_destroy(a);
		EXPECT_EQ(0, m.live);
		mock_fini(&m);
	}
}

/* A free segment whose memory a job still uses is not released before growing. */
TEST(conf_release_before_grow_keeps_pending)
{
	struct rbln_allocator *a;
	struct rbln_block *x, *y;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "release_before_grow:True");
	ASSERT_NE(NULL, a);
	x = alloc_ok(_metadata, a, 8 * MiB, 1);
	ASSERT_NE(NULL, x);
	mock_submit(&m, 3);
	rbln_allocator_free(a, x, 3, 1);
	y = alloc_ok(_metadata, a, 30 * MiB, 2);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(0, m.free_calls);
	EXPECT_EQ(2, m.live);
	rbln_allocator_free(a, y, 0, 0);
	mock_complete(&m, 3);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(conf_max_split_size)
{
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct rbln_block *big, *x, *y, *z;
	struct mock m;
	uint64_t va;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "max_split_size_mb:40");
	ASSERT_NE(NULL, a);
	big = alloc_ok(_metadata, a, 70 * MiB, 0);
	ASSERT_NE(NULL, big);
	va = rbln_block_va(big);
	rbln_allocator_free(a, big, 0, 0);

	/* below the limit: the free 70 MiB block is not split, a new 20 MiB segment */
	x = alloc_ok(_metadata, a, 8 * MiB, 0);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(20 * MiB, m.last_alloc_size);
	EXPECT_NE(va, rbln_block_va(x));
	rbln_allocator_free(a, x, 0, 0);

	/* at or above it: not a block 20 MiB bigger or more (a 46 MiB segment, not split) */
	y = alloc_ok(_metadata, a, 45 * MiB, 0);
	ASSERT_NE(NULL, y);
	EXPECT_NE(va, rbln_block_va(y));
	EXPECT_EQ(46 * MiB, m.last_alloc_size);
	EXPECT_EQ(46 * MiB, rbln_block_size(y));
	/* ... but one less than 20 MiB bigger, whole */
	z = alloc_ok(_metadata, a, 55 * MiB, 0);
	ASSERT_NE(NULL, z);
	EXPECT_EQ(va, rbln_block_va(z));
	EXPECT_EQ(70 * MiB, rbln_block_size(z));
	EXPECT_EQ(3, m.alloc_ok);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 100 * MiB, 100 * MiB, 178 * MiB, 78 * MiB);
	EXPECT_STAT(st.reserved, 136 * MiB, 136 * MiB, 136 * MiB, 0);
	EXPECT_CUR_PEAK(st.active, 116 * MiB, 116 * MiB);
	EXPECT_CUR_PEAK(st.cached, 20 * MiB, 90 * MiB);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, z, 0, 0);

	/* without the option, 8 MiB is carved from the free block */
	rbln_allocator_destroy(a);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	big = alloc_ok(_metadata, a, 70 * MiB, 0);
	ASSERT_NE(NULL, big);
	va = rbln_block_va(big);
	rbln_allocator_free(a, big, 0, 0);
	x = alloc_ok(_metadata, a, 8 * MiB, 0);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(va, rbln_block_va(x));
	EXPECT_EQ(8 * MiB, rbln_block_size(x));
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

/* ---- thread caches ---------------------------------------------------- */

struct on_thread {
	struct rbln_allocator *a;
	void (*fn)(struct on_thread *t);
	struct rbln_block *b[16];
	uint64_t size;
	uint32_t queue;
	uint64_t point;
	int n;
};

static void *on_thread_run(void *p)
{
	struct on_thread *t = p;

	t->fn(t);
	return NULL;
}

/* Runs @fn on a new thread, to its end (the thread's exit included). */
static void run_on_thread(struct on_thread *t)
{
	pthread_t th;

	if (pthread_create(&th, NULL, on_thread_run, t))
		abort();
	pthread_join(th, NULL);
}

static void thread_alloc_n(struct on_thread *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (rbln_allocator_alloc(t->a, t->size, t->queue, &t->b[i], NULL, 0))
			t->b[i] = NULL;
}

static void thread_free_n(struct on_thread *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		rbln_allocator_free(t->a, t->b[i], t->point, t->queue);
}

TEST(thread_cache_stats_and_empty_cache)
{
	struct rbln_allocator_stats st;
	struct rbln_block *A, *B, *C, *G;
	struct rbln_allocator *a;
	struct mock m;
	uint64_t va_a;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 100, 0);	/* 512 B at the segment's base */
	ASSERT_NE(NULL, G);
	rbln_allocator_reset_accumulated(a);
	rbln_allocator_reset_peak(a);

	A = alloc_ok(_metadata, a, 3000, 0);	/* 3072 */
	B = alloc_ok(_metadata, a, 3000, 0);
	ASSERT_TRUE(A && B);
	va_a = rbln_block_va(A);
	EXPECT_EQ(rbln_block_va(G) + 512, va_a);
	rbln_allocator_free(a, A, 0, 0);
	rbln_allocator_free(a, B, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 100, 6100, 6000, 6000);
	EXPECT_CUR_PEAK(st.active, 512, 512 + 6144);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB - 512, 2 * MiB - 512);
	EXPECT_STAT(st.reserved, 2 * MiB, 2 * MiB, 0, 0);

	/* from this thread's cache: the last freed first, no coalescing meanwhile */
	C = alloc_ok(_metadata, a, 2900, 0);
	ASSERT_NE(NULL, C);
	EXPECT_EQ(va_a + 3072, rbln_block_va(C));
	EXPECT_EQ(3072, rbln_block_size(C));
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 3000, 6100, 8900, 6000);
	EXPECT_CUR_PEAK(st.active, 512 + 3072, 512 + 6144);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB - 512 - 3072, 2 * MiB - 512);
	rbln_allocator_free(a, C, 0, 0);
	rbln_allocator_free(a, G, 0, 0);

	/* everything is free but sits in a cache: empty_cache takes it back, coalesces, releases */
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 6100, 8900, 9000);
	EXPECT_CUR_PEAK(st.active, 0, 512 + 6144);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB, 2 * MiB);
	rbln_allocator_empty_cache(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.reserved, 0, 2 * MiB, 0, 2 * MiB);
	EXPECT_CUR_PEAK(st.cached, 0, 2 * MiB);
	EXPECT_EQ(1, st.num_device_free);
	EXPECT_EQ(0, m.live);

	/* reset_peak and reset_accumulated reach the caches' share */
	A = alloc_ok(_metadata, a, 512, 0);
	ASSERT_NE(NULL, A);
	rbln_allocator_free(a, A, 0, 0);
	A = alloc_ok(_metadata, a, 512, 0);	/* a cache hit */
	ASSERT_NE(NULL, A);
	rbln_allocator_reset_peak(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 512, 512, 9924, 9512);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB - 512, 2 * MiB - 512);
	rbln_allocator_reset_accumulated(a);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 512, 512, 0, 0);
	rbln_allocator_free(a, A, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 0, 512, 0, 512);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	EXPECT_EQ(0, m.bad_frees);
	mock_fini(&m);
}

/* A thread that frees a block into its cache, then waits to be let go. */
struct holder {
	struct on_thread t;
	pthread_barrier_t bar;
};

static void *free_and_hold(void *p)
{
	struct holder *h = p;

	thread_free_n(&h->t);
	pthread_barrier_wait(&h->bar);	/* freed */
	pthread_barrier_wait(&h->bar);	/* may exit */
	return NULL;
}

/*
 * Another thread frees a 256 KiB block of a full small segment into its
 * cache and stays alive while this one asks for 256 KiB, on a device of
 * @capacity bytes: the block in the other cache is the only free one.
 */
static void alloc_beside_other_cache(struct __test_metadata *_metadata, uint64_t capacity,
				     bool device_full)
{
	struct rbln_allocator_stats st;
	struct rbln_block *b[8], *G, *x;
	struct rbln_allocator *a;
	struct holder *h;
	struct mock m;
	pthread_t th;
	uint64_t va;
	int i;

	mock_init(&m, capacity);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 512, 0);
	ASSERT_NE(NULL, G);
	for (i = 0; i < 8; i++) {	/* fill the small segment */
		b[i] = alloc_ok(_metadata, a, i < 7 ? 256 * KiB : 256 * KiB - 512, 0);
		ASSERT_NE(NULL, b[i]);
	}
	EXPECT_EQ(1, m.alloc_ok);

	va = rbln_block_va(b[3]);
	h = calloc(1, sizeof(*h));
	ASSERT_NE(NULL, h);
	h->t = (struct on_thread){ .a = a, .b = { b[3] }, .n = 1 };
	pthread_barrier_init(&h->bar, NULL, 2);
	ASSERT_EQ(0, pthread_create(&th, NULL, free_and_hold, h));
	pthread_barrier_wait(&h->bar);
	st = get_stats(_metadata, a);
	EXPECT_CUR_PEAK(st.active, 2 * MiB - 256 * KiB, 2 * MiB);
	EXPECT_CUR_PEAK(st.cached, 256 * KiB, 2 * MiB - 512);

	x = alloc_ok(_metadata, a, 256 * KiB, 0);
	ASSERT_NE(NULL, x);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.num_ooms);
	if (device_full) {
		/* the device said no: the other cache's block came back, after one retry */
		EXPECT_EQ(va, rbln_block_va(x));
		EXPECT_EQ(1, m.alloc_ok);
		EXPECT_EQ(1, st.num_alloc_retries);
	} else {
		/* the other thread was not stopped: the pool grew, its cache kept the block */
		EXPECT_NE(va, rbln_block_va(x));
		EXPECT_EQ(2, m.alloc_ok);
		EXPECT_EQ(0, st.num_alloc_retries);
		/* cached: the other cache's 256 KiB and the new 2 MiB's rest */
		EXPECT_EQ(256 * KiB + 2 * MiB - 256 * KiB, st.cached.current);
	}
	pthread_barrier_wait(&h->bar);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&h->bar);
	free(h);

	if (device_full)
		b[3] = x;
	else
		rbln_allocator_free(a, x, 0, 0);
	for (i = 0; i < 8; i++)
		if (device_full || i != 3)
			rbln_allocator_free(a, b[i], 0, 0);
	rbln_allocator_free(a, G, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.active.current);
	EXPECT_EQ(st.reserved.current, st.cached.current);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/*
 * Another thread's cached blocks are not taken back while the device has
 * room (that would stop the thread), but before the device runs out.
 */
TEST(thread_cache_of_another_thread_kept_while_device_has_room)
{
	alloc_beside_other_cache(_metadata, 1ull << 30, false);
}

TEST(thread_cache_of_another_thread_used_before_out_of_memory)
{
	alloc_beside_other_cache(_metadata, 2 * MiB, true);
}

/*
 * A thread's cache goes back to the pools when the thread exits (and is
 * freed: the sanitizers' leak check sees to that).
 */
TEST(thread_cache_of_exited_thread)
{
	struct on_thread t = { 0 };
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct rbln_block *g, *x;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	g = alloc_ok(_metadata, a, 512, 0);
	ASSERT_NE(NULL, g);
	/* a thread fills the rest of the segment and frees it all into its cache, then exits */
	t = (struct on_thread){ .a = a, .size = 64 * KiB, .n = 16, .fn = thread_alloc_n };
	run_on_thread(&t);
	EXPECT_EQ(1, m.alloc_ok);
	t.fn = thread_free_n;
	run_on_thread(&t);
	st = get_stats(_metadata, a);
	EXPECT_STAT(st.allocated, 512, 512 + 1 * MiB, 512 + 1 * MiB, 1 * MiB);
	EXPECT_CUR_PEAK(st.active, 512, 512 + 1 * MiB);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB - 512, 2 * MiB - 512);

	/* coalesced in the pool: 1 MiB (the small pool's biggest) comes from it at g + 512 */
	x = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(rbln_block_va(g) + 512, rbln_block_va(x));
	EXPECT_EQ(1, m.alloc_ok);
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_free(a, g, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Cached blocks keep the queue rule: reused by another queue only after the fence. */
TEST(thread_cache_queue_rule)
{
	struct rbln_block *G, *A, *t[4];
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 512, 1);
	A = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_TRUE(G && A);
	/* A goes into this thread's cache, pending on queue 1. */
	queue_rule_sequence(_metadata, a, &m, A, t);
	queue_rule_release(a, G, t);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* The device is full, yet memory is there: cached blocks come back, no OOM ladder. */
TEST(thread_cache_device_full)
{
	struct rbln_allocator_stats st;
	struct rbln_block *b[8], *x;
	struct rbln_allocator *a;
	struct mock m;
	int i;

	mock_init(&m, 2 * MiB);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	for (i = 0; i < 8; i++) {
		b[i] = alloc_ok(_metadata, a, 256 * KiB - 512, 0);
		ASSERT_NE(NULL, b[i]);
	}
	for (i = 0; i < 8; i++)
		rbln_allocator_free(a, b[i], 0, 0);	/* all into this thread's cache */
	st = get_stats(_metadata, a);
	EXPECT_EQ(2 * MiB, st.cached.current);
	/* 1 MiB: no such size cached, the device full: the cache comes back and coalesces */
	x = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, x);
	st = get_stats(_metadata, a);
	EXPECT_EQ(0, st.num_alloc_retries);
	EXPECT_EQ(0, st.num_ooms);
	EXPECT_EQ(1, m.alloc_ok);
	EXPECT_EQ(1, m.alloc_calls);
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

/* thread_cache:0: no caches, even when shared: a free goes straight back to the pool. */
TEST(thread_cache_off)
{
	struct rbln_block *A, *B, *G, *x;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "thread_cache:0");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 512, 0);
	A = alloc_ok(_metadata, a, 4096, 0);
	B = alloc_ok(_metadata, a, 4096, 0);
	ASSERT_TRUE(G && A && B);
	rbln_allocator_free(a, A, 0, 0);
	rbln_allocator_free(a, B, 0, 0);
	/* coalesced: 8 KiB fits where A was */
	x = alloc_ok(_metadata, a, 8192, 0);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(rbln_block_va(G) + 512, rbln_block_va(x));
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_free(a, G, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

/* A second free of a block sitting in a cache is ignored, as in the pools. */
TEST(thread_cache_double_free)
{
	struct rbln_allocator_stats st;
	struct rbln_block *A, *G, *x, *y;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 512, 0);
	A = alloc_ok(_metadata, a, 4096, 0);
	ASSERT_TRUE(G && A);
	rbln_allocator_free(a, A, 0, 0);
	rbln_allocator_free(a, A, 0, 0);
	st = get_stats(_metadata, a);
	EXPECT_EQ(512, st.active.current);
	EXPECT_EQ(512, st.allocated.current);
	x = alloc_ok(_metadata, a, 4096, 0);
	y = alloc_ok(_metadata, a, 4096, 0);
	ASSERT_TRUE(x && y);
	EXPECT_NE(rbln_block_va(x), rbln_block_va(y));
	rbln_allocator_free(a, x, 0, 0);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, G, 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

static uint32_t xorshift(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/*
 * Two threads take turns, one operation each, on one allocator: through
 * their caches, past their stat allowances, and through the pools.  With
 * one operation at a time, every current value and peak is known exactly:
 * a peak missed while a cache's allowance hid it would show.
 */
enum { LOCKSTEP_STEPS = 3000, LOCKSTEP_LIVE = 24 };

struct lockstep {
	struct __test_metadata *md;
	struct rbln_allocator *a;
	pthread_mutex_t lock;
	pthread_cond_t turn_cv;
	int turn, step;
	uint32_t rng;
	struct rbln_block *live[2][LOCKSTEP_LIVE];
	uint64_t req[2][LOCKSTEP_LIVE];
	int64_t allocated, active, peak_allocated, peak_active, peak_cached;
};

static void lockstep_check(struct lockstep *ls)
{
	struct __test_metadata *_metadata = ls->md;
	struct rbln_allocator_stats st = get_stats(_metadata, ls->a);
	int64_t cached = st.reserved.current - st.active.current;

	if (cached > ls->peak_cached)
		ls->peak_cached = cached;
	EXPECT_CUR_PEAK(st.allocated, ls->allocated, ls->peak_allocated);
	EXPECT_CUR_PEAK(st.active, ls->active, ls->peak_active);
	EXPECT_CUR_PEAK(st.cached, cached, ls->peak_cached);
}

/* One operation of thread @id: an allocation, or a free of its own block or the other's. */
static void lockstep_op(struct lockstep *ls, int id)
{
	struct __test_metadata *_metadata = ls->md;
	uint32_t r = xorshift(&ls->rng);
	int owner = (r & 3) == 0 ? !id : id, slot = (int)((r >> 2) % LOCKSTEP_LIVE);
	struct rbln_block *b = ls->live[owner][slot];

	if (b) {
		ls->allocated -= (int64_t)ls->req[owner][slot];
		ls->active -= (int64_t)rbln_block_size(b);
		rbln_allocator_free(ls->a, b, 0, 0);
		ls->live[owner][slot] = NULL;
		return;
	}
	/* mostly what the caches take, sometimes the small pool's biggest sizes */
	ls->req[owner][slot] = (r >> 8) % 16 ? 1 + (r >> 12) % (64 * KiB) : 512 * KiB + (r >> 12) % MiB / 2;
	b = alloc_ok(_metadata, ls->a, ls->req[owner][slot], 0);
	ASSERT_NE(NULL, b);
	ls->live[owner][slot] = b;
	ls->allocated += (int64_t)ls->req[owner][slot];
	ls->active += (int64_t)rbln_block_size(b);
	if (ls->allocated > ls->peak_allocated)
		ls->peak_allocated = ls->allocated;
	if (ls->active > ls->peak_active)
		ls->peak_active = ls->active;
}

static void lockstep_run(struct lockstep *ls, int id)
{
	pthread_mutex_lock(&ls->lock);
	for (;;) {
		while (ls->turn != id && ls->step < LOCKSTEP_STEPS)
			pthread_cond_wait(&ls->turn_cv, &ls->lock);
		if (ls->step >= LOCKSTEP_STEPS)
			break;
		lockstep_op(ls, id);
		lockstep_check(ls);
		if (++ls->step == LOCKSTEP_STEPS / 2) {
			/* peaks down to the current values: every allowance is revoked */
			rbln_allocator_reset_peak(ls->a);
			ls->peak_allocated = ls->allocated;
			ls->peak_active = ls->active;
			ls->peak_cached = 0;
			lockstep_check(ls);
		}
		ls->turn = !id;
		pthread_cond_broadcast(&ls->turn_cv);
	}
	pthread_mutex_unlock(&ls->lock);
}

static void *lockstep_thread(void *p)
{
	lockstep_run(p, 1);
	return NULL;
}

TEST(thread_cache_peaks_exact)
{
	struct lockstep ls = { .md = _metadata, .rng = 2463534242u };
	struct rbln_allocator_stats st;
	pthread_t th;
	struct mock m;
	int i, j;

	mock_init(&m, 1ull << 30);
	ls.a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, ls.a);
	pthread_mutex_init(&ls.lock, NULL);
	pthread_cond_init(&ls.turn_cv, NULL);
	ASSERT_EQ(0, pthread_create(&th, NULL, lockstep_thread, &ls));
	lockstep_run(&ls, 0);
	pthread_join(th, NULL);
	for (i = 0; i < 2; i++)
		for (j = 0; j < LOCKSTEP_LIVE; j++)
			rbln_allocator_free(ls.a, ls.live[i][j], 0, 0);
	st = get_stats(_metadata, ls.a);
	EXPECT_EQ(0, st.allocated.current);
	EXPECT_EQ(0, st.active.current);
	EXPECT_LT(1, st.num_device_alloc);	/* the pools took part, not only the caches */
	rbln_allocator_destroy(ls.a);
	EXPECT_EQ(0, m.live);
	pthread_cond_destroy(&ls.turn_cv);
	pthread_mutex_destroy(&ls.lock);
	mock_fini(&m);
}

/* ---- groups: the members of a logical device -------------------------- */

static struct rbln_allocator_stats group_stats(struct __test_metadata *_metadata,
					       struct rbln_alloc_group *g)
{
	struct rbln_allocator_stats s;

	rbln_alloc_group_stats(g, &s);
	EXPECT_EQ(s.reserved.current - s.active.current, s.cached.current);
	EXPECT_LE(s.allocated.current, s.allocated.peak);
	EXPECT_LE(s.reserved.current, s.reserved.peak);
	EXPECT_EQ(0, s.allocated.total_allocated);
	EXPECT_EQ(0, s.num_device_alloc);
	return s;
}

/*
 * 8 KiB on one member, freed, then 4 KiB on each: the group never held
 * more than 8 KiB, though the members' peaks add up to 12 KiB.
 */
static void group_sequence(struct __test_metadata *_metadata, const char *conf)
{
	struct rbln_allocator_stats st, sa, sb;
	struct rbln_block *x, *y, *z;
	struct rbln_allocator *a, *b;
	struct rbln_alloc_group g;
	struct mock ma, mb;

	mock_init(&ma, 1ull << 30);
	mock_init(&mb, 1ull << 30);
	a = create_conf_ok(_metadata, &ma, conf);
	b = create_conf_ok(_metadata, &mb, conf);
	ASSERT_TRUE(a && b);
	rbln_alloc_group_init(&g);
	rbln_allocator_join(a, &g);
	rbln_allocator_join(b, &g);

	x = alloc_ok(_metadata, a, 8192, 0);
	ASSERT_NE(NULL, x);
	rbln_allocator_free(a, x, 0, 0);
	y = alloc_ok(_metadata, a, 4096, 0);
	z = alloc_ok(_metadata, b, 4096, 0);
	ASSERT_TRUE(y && z);
	sa = get_stats(_metadata, a);
	sb = get_stats(_metadata, b);
	EXPECT_EQ(12288, sa.allocated.peak + sb.allocated.peak);	/* never held at once */
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 8192, 8192);
	EXPECT_CUR_PEAK(st.active, 8192, 8192);
	EXPECT_CUR_PEAK(st.reserved, 4 * MiB, 4 * MiB);
	/* a's segment was all free (2 MiB), then 2 MiB - 4 KiB each */
	EXPECT_CUR_PEAK(st.cached, 4 * MiB - 8192, 4 * MiB - 8192);
	EXPECT_EQ(4 * MiB - 4096, sa.cached.peak + sb.cached.peak);

	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(b, z, 0, 0);
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 0, 8192);
	EXPECT_CUR_PEAK(st.active, 0, 8192);
	EXPECT_CUR_PEAK(st.cached, 4 * MiB, 4 * MiB);

	/* the group's reset is its own: the members keep their peaks */
	rbln_alloc_group_reset_peak(&g);
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 0, 0);
	EXPECT_CUR_PEAK(st.reserved, 4 * MiB, 4 * MiB);
	EXPECT_EQ(8192, get_stats(_metadata, a).allocated.peak);
	z = alloc_ok(_metadata, b, 1000, 0);
	ASSERT_NE(NULL, z);
	rbln_allocator_free(b, z, 0, 0);
	rbln_allocator_empty_cache(a);
	rbln_allocator_empty_cache(b);
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 0, 1000);
	EXPECT_CUR_PEAK(st.active, 0, 1024);
	EXPECT_CUR_PEAK(st.reserved, 0, 4 * MiB);
	EXPECT_CUR_PEAK(st.cached, 0, 4 * MiB);

	rbln_allocator_destroy(a);
	rbln_allocator_destroy(b);
	rbln_alloc_group_destroy(&g);
	EXPECT_EQ(0, ma.live + mb.live);
	mock_fini(&ma);
	mock_fini(&mb);
}

TEST(group_peaks_are_values_the_sum_had)
{
	group_sequence(_metadata, "thread_cache:0");
}

TEST(group_peaks_are_values_the_sum_had_thread_caches)
{
	group_sequence(_metadata, "");
}

/* An allocator that joins a group late brings what it holds. */
TEST(group_join_counts_what_is_held)
{
	struct rbln_allocator_stats st;
	struct rbln_alloc_group g;
	struct rbln_allocator *a;
	struct rbln_block *x, *y;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	x = alloc_ok(_metadata, a, 3000, 0);
	y = alloc_ok(_metadata, a, 5000, 0);
	ASSERT_TRUE(x && y);
	rbln_allocator_free(a, y, 0, 0);	/* into this thread's cache */
	rbln_alloc_group_init(&g);
	rbln_allocator_join(a, &g);
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 3000, 3000);
	EXPECT_CUR_PEAK(st.active, 3072, 3072);
	EXPECT_CUR_PEAK(st.reserved, 2 * MiB, 2 * MiB);
	rbln_allocator_free(a, x, 0, 0);
	st = group_stats(_metadata, &g);
	EXPECT_CUR_PEAK(st.allocated, 0, 3000);
	EXPECT_CUR_PEAK(st.cached, 2 * MiB, 2 * MiB);
	rbln_allocator_destroy(a);
	rbln_alloc_group_destroy(&g);
	mock_fini(&m);
}

/*
 * Two threads take turns, one operation each, on two allocators of one
 * group, through their caches (past their allowances too) and the pools:
 * every current value and peak of the group is known exactly.
 */
enum { GROUP_STEPS = 3000, GROUP_LIVE = 24 };

struct group_lockstep {
	struct __test_metadata *md;
	struct rbln_allocator *a[2];
	struct rbln_alloc_group g;
	pthread_mutex_t lock;
	pthread_cond_t turn_cv;
	int turn, step;
	uint32_t rng;
	struct rbln_block *live[2][GROUP_LIVE];
	int on[2][GROUP_LIVE];		/* which allocator */
	uint64_t req[2][GROUP_LIVE];
	int64_t allocated, active, peak_allocated, peak_active;
	int64_t peak_reserved, peak_cached;
	int64_t sum_of_peaks;		/* of allocated, for the record */
};

static void group_lockstep_check(struct group_lockstep *ls)
{
	struct __test_metadata *_metadata = ls->md;
	struct rbln_allocator_stats st, m0 = get_stats(_metadata, ls->a[0]),
				    m1 = get_stats(_metadata, ls->a[1]);
	int64_t reserved = m0.reserved.current + m1.reserved.current;
	int64_t cached = m0.cached.current + m1.cached.current;

	if (reserved > ls->peak_reserved)
		ls->peak_reserved = reserved;
	if (cached > ls->peak_cached)
		ls->peak_cached = cached;
	ls->sum_of_peaks = m0.allocated.peak + m1.allocated.peak;
	st = group_stats(_metadata, &ls->g);
	EXPECT_CUR_PEAK(st.allocated, ls->allocated, ls->peak_allocated);
	EXPECT_CUR_PEAK(st.active, ls->active, ls->peak_active);
	EXPECT_CUR_PEAK(st.reserved, reserved, ls->peak_reserved);
	EXPECT_CUR_PEAK(st.cached, cached, ls->peak_cached);
}

static void group_lockstep_op(struct group_lockstep *ls, int id)
{
	struct __test_metadata *_metadata = ls->md;
	uint32_t r = xorshift(&ls->rng);
	int owner = (r & 3) == 0 ? !id : id, slot = (int)((r >> 2) % GROUP_LIVE);
	struct rbln_block *b = ls->live[owner][slot];
	int k;

	if (b) {
		ls->allocated -= (int64_t)ls->req[owner][slot];
		ls->active -= (int64_t)rbln_block_size(b);
		rbln_allocator_free(ls->a[ls->on[owner][slot]], b, 0, 0);
		ls->live[owner][slot] = NULL;
		return;
	}
	k = (r >> 7) & 1;
	ls->req[owner][slot] = (r >> 8) % 16 ? 1 + (r >> 12) % (64 * KiB) : 512 * KiB + (r >> 12) % MiB / 2;
	b = alloc_ok(_metadata, ls->a[k], ls->req[owner][slot], 0);
	ASSERT_NE(NULL, b);
	ls->live[owner][slot] = b;
	ls->on[owner][slot] = k;
	ls->allocated += (int64_t)ls->req[owner][slot];
	ls->active += (int64_t)rbln_block_size(b);
	if (ls->allocated > ls->peak_allocated)
		ls->peak_allocated = ls->allocated;
	if (ls->active > ls->peak_active)
		ls->peak_active = ls->active;
}

static void group_lockstep_run(struct group_lockstep *ls, int id)
{
	pthread_mutex_lock(&ls->lock);
	for (;;) {
		while (ls->turn != id && ls->step < GROUP_STEPS)
			pthread_cond_wait(&ls->turn_cv, &ls->lock);
		if (ls->step >= GROUP_STEPS)
			break;
		group_lockstep_op(ls, id);
		group_lockstep_check(ls);
		if (++ls->step == GROUP_STEPS / 2) {
			rbln_alloc_group_reset_peak(&ls->g);
			ls->peak_allocated = ls->allocated;
			ls->peak_active = ls->active;
			ls->peak_reserved = 0;
			ls->peak_cached = 0;
			group_lockstep_check(ls);
		}
		ls->turn = !id;
		pthread_cond_broadcast(&ls->turn_cv);
	}
	pthread_mutex_unlock(&ls->lock);
}

static void *group_lockstep_thread(void *p)
{
	group_lockstep_run(p, 1);
	return NULL;
}

TEST(group_peaks_exact_across_threads)
{
	struct group_lockstep ls = { .md = _metadata, .rng = 88675123u };
	struct rbln_allocator_stats st;
	struct mock m[2];
	pthread_t th;
	int i, j;

	for (i = 0; i < 2; i++) {
		mock_init(&m[i], 1ull << 30);
		ls.a[i] = create_conf_ok(_metadata, &m[i], "");
		ASSERT_NE(NULL, ls.a[i]);
	}
	rbln_alloc_group_init(&ls.g);
	rbln_allocator_join(ls.a[0], &ls.g);
	rbln_allocator_join(ls.a[1], &ls.g);
	pthread_mutex_init(&ls.lock, NULL);
	pthread_cond_init(&ls.turn_cv, NULL);
	ASSERT_EQ(0, pthread_create(&th, NULL, group_lockstep_thread, &ls));
	group_lockstep_run(&ls, 0);
	pthread_join(th, NULL);
	/* the members' peaks came at different times: their sum was never held */
	EXPECT_LT(ls.peak_allocated, ls.sum_of_peaks);
	for (i = 0; i < 2; i++)
		for (j = 0; j < GROUP_LIVE; j++)
			if (ls.live[i][j])
				rbln_allocator_free(ls.a[ls.on[i][j]], ls.live[i][j], 0, 0);
	st = group_stats(_metadata, &ls.g);
	EXPECT_EQ(0, st.allocated.current);
	EXPECT_EQ(0, st.active.current);
	for (i = 0; i < 2; i++) {
		rbln_allocator_destroy(ls.a[i]);
		EXPECT_EQ(0, m[i].live);
		mock_fini(&m[i]);
	}
	rbln_alloc_group_destroy(&ls.g);
	pthread_cond_destroy(&ls.turn_cv);
	pthread_mutex_destroy(&ls.lock);
}

/* ---- multi-threaded hammer ------------------------------------------- */

enum { HAMMER_THREADS = 4, HAMMER_OPS = 10000, HAMMER_LIVE = 16, HAMMER_PENDING = 4096 };

struct range {
	uint64_t va, size, point;
	uint32_t queue;
};

struct hammer {
	struct rbln_allocator *a;
	struct mock *m;
	pthread_mutex_t lock;		/* guards the checker's books below */
	struct range live[HAMMER_THREADS * HAMMER_LIVE];
	int nlive;
	struct range pending[HAMMER_PENDING];	/* freed memory with its point */
	int npending;
	atomic_uint_least64_t next_point;
	atomic_int errors, ooms, allocs;
	bool small;		/* sizes the thread caches take, blocks freed by other threads */
	struct rbln_block *parked;	/* under lock: a block left for another thread to free */
};

struct hammer_arg {
	struct hammer *h;
	int id;
};

static bool overlaps(const struct range *r, uint64_t va, uint64_t size)
{
	return va < r->va + r->size && r->va < va + size;
}

/* Books a new block: no live block overlaps it, nor memory pending on another queue. */
static void book_alloc(struct hammer *h, uint64_t va, uint64_t size, uint32_t queue)
{
	int i;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nlive; i++)
		if (overlaps(&h->live[i], va, size))
			atomic_fetch_add(&h->errors, 1);
	for (i = 0; i < h->npending; i++)
		if (h->pending[i].queue != queue && overlaps(&h->pending[i], va, size) &&
		    !mock_point_done(h->m, h->pending[i].point))
			atomic_fetch_add(&h->errors, 1);
	h->live[h->nlive++] = (struct range){ .va = va, .size = size };
	pthread_mutex_unlock(&h->lock);
}

static void book_free(struct hammer *h, uint64_t va, uint64_t point, uint32_t queue)
{
	uint64_t size = 0;
	int i;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nlive; i++) {
		if (h->live[i].va == va) {
			size = h->live[i].size;
			h->live[i] = h->live[--h->nlive];
			break;
		}
	}
	if (!size)
		atomic_fetch_add(&h->errors, 1);
	if (point) {
		if (h->npending == HAMMER_PENDING) {
			for (i = 0; i < h->npending; )
				if (mock_point_done(h->m, h->pending[i].point))
					h->pending[i] = h->pending[--h->npending];
				else
					i++;
		}
		if (h->npending < HAMMER_PENDING)
			h->pending[h->npending++] = (struct range){ va, size, point, queue };
	}
	pthread_mutex_unlock(&h->lock);
}

static bool stats_sane(const struct rbln_allocator_stats *s)
{
	return s->cached.current == s->reserved.current - s->active.current &&
	       s->cached.current >= 0 && s->allocated.current >= 0 &&
	       s->allocated.current <= s->active.current &&
	       s->allocated.peak >= s->allocated.current &&
	       s->reserved.peak >= s->reserved.current &&
	       s->active.peak >= s->active.current && s->cached.peak >= s->cached.current;
}

static const uint64_t small_sizes[] = { 512, 4096, 64 * KiB, 256 * KiB, 1 * MiB };

static void *hammer_thread(void *p)
{
	struct hammer_arg *arg = p;
	struct hammer *h = arg->h;
	struct rbln_block *blocks[HAMMER_LIVE];
	uint32_t queue = arg->id & 1, rng = 0x9e3779b9u * (arg->id + 1);
	int n = 0, i;

	for (i = 0; i < HAMMER_OPS; i++) {
		uint32_t r = xorshift(&rng);

		/* thread caches: a thread's blocks freed on one queue and reused on another */
		if (h->small)
			queue = (r >> 12) & 1;

		if (n == 0 || (n < HAMMER_LIVE && (r & 1))) {
			uint32_t kind = (r >> 1) % 100, r2 = xorshift(&rng);
			uint64_t size;
			struct rbln_block *b = NULL;
			int ret;

			if (h->small && kind < 97)
				size = small_sizes[r2 % 5] - (r2 >> 8) % 512;
			else if (kind < 70)
				size = 1 + r2 % MiB;
			else if (kind < 97)
				size = MiB + 1 + r2 % (9 * MiB);
			else
				size = 10 * MiB + r2 % (14 * MiB);
			ret = rbln_allocator_alloc(h->a, size, queue, &b, NULL, 0);
			if (ret == -ENOMEM) {
				atomic_fetch_add(&h->ooms, 1);
				continue;
			}
			if (ret || !b || rbln_block_size(b) < size || rbln_block_size(b) % 512 ||
			    rbln_block_va(b) % 512) {
				atomic_fetch_add(&h->errors, 1);
				continue;
			}
			atomic_fetch_add(&h->allocs, 1);
			book_alloc(h, rbln_block_va(b), rbln_block_size(b), queue);
			blocks[n++] = b;
		} else {
			int k = (r >> 1) % n;
			struct rbln_block *b = blocks[k];
			uint64_t point = 0;

			if (h->small && !(r & 0x600)) {
				/* swap with the parked block: a block of another thread's */
				pthread_mutex_lock(&h->lock);
				blocks[k] = h->parked;
				h->parked = b;
				pthread_mutex_unlock(&h->lock);
				if (!blocks[k]) {
					blocks[k] = blocks[--n];
					continue;
				}
				b = blocks[k];
			}

			if (r & 0x100) {
				point = atomic_fetch_add(&h->next_point, 1) + 1;
				mock_submit(h->m, point);
			}
			book_free(h, rbln_block_va(b), point, queue);
			rbln_allocator_free(h->a, b, point, queue);
			blocks[k] = blocks[--n];
		}
		if (i % 64 == 63) {
			uint64_t np = atomic_load(&h->next_point);
			uint64_t lag = xorshift(&rng) % 16;

			if (np > lag)
				mock_complete(h->m, np - lag);
		}
		if (i % 100 == 0) {
			struct rbln_allocator_stats s;

			rbln_allocator_stats(h->a, &s);
			if (!stats_sane(&s))
				atomic_fetch_add(&h->errors, 1);
		}
		if (i % 2500 == 2499)
			rbln_allocator_empty_cache(h->a);
		if (i % 3000 == 1500 && arg->id == 0)
			rbln_allocator_reset_peak(h->a);
	}
	while (n) {
		struct rbln_block *b = blocks[--n];

		book_free(h, rbln_block_va(b), 0, queue);
		rbln_allocator_free(h->a, b, 0, queue);
	}
	return NULL;
}

static void hammer(struct __test_metadata *_metadata, bool small)
{
	struct hammer_arg args[HAMMER_THREADS];
	pthread_t th[HAMMER_THREADS];
	struct rbln_allocator_stats st;
	struct hammer *h;
	struct mock m;
	int i;

	h = calloc(1, sizeof(*h));
	ASSERT_NE(NULL, h);
	h->small = small;
	mock_init(&m, 128 * MiB);
	h->m = &m;
	h->a = rbln_allocator_create(&mock_ops, &m);
	ASSERT_NE(NULL, h->a);
	pthread_mutex_init(&h->lock, NULL);

	for (i = 0; i < HAMMER_THREADS; i++) {
		args[i] = (struct hammer_arg){ h, i };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hammer_thread, &args[i]));
	}
	for (i = 0; i < HAMMER_THREADS; i++)
		pthread_join(th[i], NULL);
	if (h->parked) {
		book_free(h, rbln_block_va(h->parked), 0, 0);
		rbln_allocator_free(h->a, h->parked, 0, 0);
	}

	EXPECT_EQ(0, atomic_load(&h->errors));
	EXPECT_LT(HAMMER_THREADS * HAMMER_OPS / 4, atomic_load(&h->allocs));
	TH_LOG("%d allocations, %d OOMs, %d syncs", atomic_load(&h->allocs),
	       atomic_load(&h->ooms), m.sync_calls);
	st = get_stats(_metadata, h->a);
	EXPECT_EQ(0, st.allocated.current);
	EXPECT_EQ(0, st.active.current);
	EXPECT_EQ(st.reserved.current, st.cached.current);
	EXPECT_EQ(st.allocated.total_allocated, st.allocated.total_freed);
	EXPECT_EQ(m.alloc_ok, st.num_device_alloc);
	EXPECT_EQ(m.free_calls, st.num_device_free);
	EXPECT_EQ((int64_t)m.used, st.reserved.current);
	EXPECT_EQ(atomic_load(&h->ooms), st.num_ooms);

	/* everything free and coalesced: empty_cache (after a wait) returns it all */
	rbln_allocator_empty_cache(h->a);
	st = get_stats(_metadata, h->a);
	EXPECT_EQ(0, st.reserved.current);
	EXPECT_EQ(0, m.live);
	rbln_allocator_destroy(h->a);
	EXPECT_EQ(0, m.live);
	EXPECT_EQ(0, m.bad_frees);
	pthread_mutex_destroy(&h->lock);
	free(h);
	mock_fini(&m);
}

TEST(hammer_threads)
{
	hammer(_metadata, false);
}

/* Thread caches under load: their sizes, blocks freed by a thread that did not allocate them. */
TEST(hammer_thread_caches)
{
	hammer(_metadata, true);
}

/*
 * Claims against a fast path: a claimer empties the caches, reads the
 * statistics or resets the peaks, each of which takes every cache from
 * under its owner, while the owner allocates or frees a small block in
 * step with it: both start at once, the claimer's store to claimed and
 * the owner's to busy racing, as in the store-buffering litmus test.  A
 * claim that did not keep the owner out would let both work on one cache:
 * a block handed out twice (overlapping a live one), one whose segment
 * went back to the device while it was live, a torn statistic, or a bin
 * that loses blocks, so that the pool must grow.  It never needs to: the
 * owner's blocks (1 to 8 of at most 8 KiB) and its cache fit the first
 * small segment, its cache goes back to the pool before the pool would
 * grow, and with a block always live, empty_cache never releases it.
 */
enum { CLAIMS = 100000, CLAIM_LIVE = 8 };

struct claim_race {
	struct rbln_allocator *a;
	struct mock *m;
	atomic_int errors, round, ops;
};

static bool overlaps_live(struct rbln_block *const *live, unsigned int k)
{
	uint64_t va = rbln_block_va(live[k]), end = va + rbln_block_size(live[k]);
	unsigned int i;

	for (i = 0; i < CLAIM_LIVE; i++)
		if (live[i] && i != k && rbln_block_va(live[i]) < end &&
		    va < rbln_block_va(live[i]) + rbln_block_size(live[i]))
			return true;
	return false;
}

static void *claim_owner_thread(void *p)
{
	struct claim_race *r = p;
	struct rbln_block *live[CLAIM_LIVE] = { NULL };
	uint32_t rng = 0x9e3779b9u;
	int i, round = 0, n = 0;

	while (round < CLAIMS) {
		uint32_t x = xorshift(&rng), k = x % CLAIM_LIVE;

		while (n == 1 && live[k])	/* not the last live block */
			k = (k + 1) % CLAIM_LIVE;
		/* the first operations make the cache (a first free does), then in step */
		if (atomic_load(&r->ops) > 64)
			while (atomic_load(&r->round) == round)
				;
		round = atomic_load(&r->round);
		if (live[k]) {
			if (!mock_holds(r->m, rbln_block_va(live[k]), rbln_block_size(live[k])))
				atomic_fetch_add(&r->errors, 1);
			rbln_allocator_free(r->a, live[k], 0, 0);
			live[k] = NULL;
			n--;
		} else if (rbln_allocator_alloc(r->a, 512 * (1 + (x >> 8) % 16), 0, &live[k],
						NULL, 0) || overlaps_live(live, k)) {
			atomic_fetch_add(&r->errors, 1);
		} else {
			n++;
		}
		atomic_fetch_add(&r->ops, 1);
	}
	for (i = 0; i < CLAIM_LIVE; i++)
		rbln_allocator_free(r->a, live[i], 0, 0);
	return NULL;
}

TEST(thread_cache_claims_exclude_owners)
{
	struct rbln_allocator_stats st;
	struct claim_race *r;
	struct mock m;
	pthread_t th;
	int i;

	r = calloc(1, sizeof(*r));
	ASSERT_NE(NULL, r);
	mock_init(&m, 1ull << 30);
	r->m = &m;
	r->a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, r->a);
	ASSERT_EQ(0, pthread_create(&th, NULL, claim_owner_thread, r));
	while (atomic_load(&r->ops) <= 64)
		sched_yield();
	for (i = 1; i <= CLAIMS; i++) {
		atomic_store(&r->round, i);
		switch (i % 3) {
		case 0:
			rbln_allocator_empty_cache(r->a);
			break;
		case 1:
			rbln_allocator_stats(r->a, &st);
			if (!stats_sane(&st))
				atomic_fetch_add(&r->errors, 1);
			break;
		default:
			rbln_allocator_reset_peak(r->a);
		}
	}
	pthread_join(th, NULL);
	EXPECT_EQ(0, atomic_load(&r->errors));
	EXPECT_EQ(1, m.alloc_ok);
	st = get_stats(_metadata, r->a);
	EXPECT_EQ(0, st.allocated.current);
	EXPECT_EQ(0, st.active.current);
	EXPECT_EQ(st.reserved.current, st.cached.current);
	rbln_allocator_destroy(r->a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
	free(r);
}

/* ---- snapshots and history -------------------------------------------- */

/*
 * A snapshot of @a, checked against the statistics taken with it: the
 * blocks tile each segment, segments come by address, and the sums by state
 * are the statistics exactly.  Nothing may change @a meanwhile.
 */
static void snapshot_ok(struct __test_metadata *_metadata, struct rbln_allocator *a,
			struct rbln_alloc_snapshot *snap)
{
	struct rbln_allocator_stats st = get_stats(_metadata, a);
	uint64_t reserved = 0, active = 0, requested = 0, cached = 0;
	size_t i, j;

	ASSERT_EQ(0, rbln_allocator_snapshot(a, snap));
	for (i = 0; i < snap->nsegments; i++) {
		const struct rbln_alloc_snap_segment *g = &snap->segments[i];
		uint64_t va = g->va, alloc = 0, act = 0, req = 0;

		if (i)
			EXPECT_LT(snap->segments[i - 1].va, g->va);
		EXPECT_LE(1, g->nblocks);
		for (j = 0; j < g->nblocks; j++) {
			const struct rbln_alloc_snap_block *b = &snap->blocks[g->first_block + j];

			EXPECT_EQ(va, b->va);
			va += b->size;
			if (b->state == RBLN_BLOCK_ACTIVE_ALLOCATED) {
				alloc += b->size;
				req += b->requested;
				EXPECT_LE(0, b->queue);
				EXPECT_FALSE(b->thread_cached);
			} else {
				cached += b->size;
				EXPECT_EQ(0, b->requested);
				EXPECT_EQ(NULL, b->site);
			}
			if (b->state != RBLN_BLOCK_INACTIVE)
				act += b->size;
			else
				EXPECT_EQ(-1, b->queue);
		}
		EXPECT_EQ(g->va + g->size, va);
		EXPECT_EQ(alloc, g->allocated);
		EXPECT_EQ(act, g->active);
		EXPECT_EQ(req, g->requested);
		if (g->small && !g->expandable)
			EXPECT_EQ(2 * MiB, g->size);
		reserved += g->size;
		active += g->allocated;
		requested += g->requested;
	}
	EXPECT_EQ(st.reserved.current, (int64_t)reserved);
	EXPECT_EQ(st.active.current, (int64_t)active);
	EXPECT_EQ(st.allocated.current, (int64_t)requested);
	EXPECT_EQ(st.cached.current, (int64_t)cached);
}

/* Blocks of the snapshot in @state, and their bytes. */
static size_t count_state(const struct rbln_alloc_snapshot *s, enum rbln_memory_block_state state,
			  uint64_t *bytes)
{
	size_t i, n = 0;

	*bytes = 0;
	for (i = 0; i < s->nblocks; i++) {
		if (s->blocks[i].state == state) {
			n++;
			*bytes += s->blocks[i].size;
		}
	}
	return n;
}

static const struct rbln_alloc_snap_block *snap_block_at(const struct rbln_alloc_snapshot *s,
							 uint64_t va)
{
	size_t i;

	for (i = 0; i < s->nblocks; i++)
		if (s->blocks[i].va == va)
			return &s->blocks[i];
	return NULL;
}

struct ev {
	enum rbln_memory_action action;
	uint64_t addr, size;
	uint32_t queue;
};

/* The history is exactly @want, in order. */
static void expect_events(struct __test_metadata *_metadata, const struct rbln_alloc_snapshot *s,
			  const struct ev *want, size_t n)
{
	size_t i;

	ASSERT_EQ(n, s->nevents);
	for (i = 0; i < n; i++) {
		const struct rbln_alloc_event *e = &s->events[i];

		EXPECT_EQ(want[i].action, e->action) {
			TH_LOG("event %zu", i);
		}
		EXPECT_EQ(want[i].addr, e->addr) {
			TH_LOG("event %zu", i);
		}
		EXPECT_EQ(want[i].size, e->size) {
			TH_LOG("event %zu", i);
		}
		EXPECT_EQ(want[i].queue, e->queue);
		if (i)
			EXPECT_LE(s->events[i - 1].time_us, e->time_us);
		EXPECT_LT(1700000000000000ll, e->time_us);	/* since the epoch */
	}
}

TEST(snapshot_matches_stats)
{
	struct rbln_block *s1, *s2, *s3, *l1, *l2, *h1;
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	uint64_t bytes;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(0, snap.nsegments);
	EXPECT_EQ(0, snap.nevents);
	rbln_alloc_snapshot_release(&snap);

	s1 = alloc_ok(_metadata, a, 1000, 0);		/* 1024 of a 2 MiB segment */
	s2 = alloc_ok(_metadata, a, 3000, 1);		/* 3072 */
	s3 = alloc_ok(_metadata, a, 600 * KiB, 0);
	l1 = alloc_ok(_metadata, a, 3 * MiB, 0);	/* 3 MiB of a 20 MiB segment */
	l2 = alloc_ok(_metadata, a, 5 * MiB + 1, 2);
	h1 = alloc_ok(_metadata, a, 30 * MiB, 0);	/* a segment of its own */
	ASSERT_TRUE(s1 && s2 && s3 && l1 && l2 && h1);
	rbln_allocator_free(a, s2, 0, 1);
	mock_submit(&m, 7);
	rbln_allocator_free(a, l1, 7, 0);		/* pending until point 7 */

	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(3, snap.nsegments);
	EXPECT_EQ(4, count_state(&snap, RBLN_BLOCK_ACTIVE_ALLOCATED, &bytes));
	EXPECT_EQ(1024 + 600 * KiB + (5 * MiB + 512) + 30 * MiB, bytes);
	EXPECT_EQ(1, count_state(&snap, RBLN_BLOCK_ACTIVE_PENDING_FREE, &bytes));
	EXPECT_EQ(3 * MiB, bytes);
	EXPECT_EQ(0, snap_block_at(&snap, rbln_block_va(l1))->queue);
	EXPECT_EQ(2, snap_block_at(&snap, rbln_block_va(l2))->queue);
	EXPECT_EQ(5 * MiB + 1, snap_block_at(&snap, rbln_block_va(l2))->requested);
	EXPECT_EQ(0, snap.nevents);			/* history is off by default */
	EXPECT_EQ(NULL, snap_block_at(&snap, rbln_block_va(s1))->site);
	rbln_alloc_snapshot_release(&snap);

	/* the point is done: the pending block is just free, and coalesces as it goes */
	mock_complete(&m, 7);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(0, count_state(&snap, RBLN_BLOCK_ACTIVE_PENDING_FREE, &bytes));
	EXPECT_EQ(RBLN_BLOCK_INACTIVE, snap_block_at(&snap, rbln_block_va(l1))->state);
	rbln_alloc_snapshot_release(&snap);

	rbln_allocator_free(a, s1, 0, 0);
	rbln_allocator_free(a, s3, 0, 0);
	rbln_allocator_free(a, l2, 0, 2);
	rbln_allocator_free(a, h1, 0, 0);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(3, snap.nsegments);
	EXPECT_EQ(3, snap.nblocks);			/* each coalesced whole */
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_empty_cache(a);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(0, snap.nsegments);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Blocks in a thread's cache are free (cached), uncoalesced, and say so. */
TEST(snapshot_thread_cache)
{
	struct rbln_alloc_snapshot snap;
	const struct rbln_alloc_snap_block *sb;
	struct rbln_block *G, *A, *B;
	struct rbln_allocator *a;
	uint64_t bytes;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = create_conf_ok(_metadata, &m, "");
	ASSERT_NE(NULL, a);
	G = alloc_ok(_metadata, a, 100, 0);
	ASSERT_NE(NULL, G);
	A = alloc_ok(_metadata, a, 3000, 0);
	B = alloc_ok(_metadata, a, 3000, 0);
	ASSERT_TRUE(A && B);
	mock_submit(&m, 3);
	rbln_allocator_free(a, A, 3, 1);		/* into this thread's cache, pending */
	snapshot_ok(_metadata, a, &snap);
	sb = snap_block_at(&snap, rbln_block_va(A));
	ASSERT_NE(NULL, sb);
	EXPECT_TRUE(sb->thread_cached);
	EXPECT_EQ(RBLN_BLOCK_ACTIVE_PENDING_FREE, sb->state);
	EXPECT_EQ(1, sb->queue);
	EXPECT_EQ(3072, sb->size);
	EXPECT_EQ(2, count_state(&snap, RBLN_BLOCK_ACTIVE_ALLOCATED, &bytes));
	rbln_alloc_snapshot_release(&snap);
	mock_complete(&m, 3);
	snapshot_ok(_metadata, a, &snap);
	sb = snap_block_at(&snap, rbln_block_va(A));
	EXPECT_EQ(RBLN_BLOCK_INACTIVE, sb->state);
	EXPECT_TRUE(sb->thread_cached);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_free(a, B, 0, 0);
	rbln_allocator_free(a, G, 0, 0);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/*
 * One random step on 32 slots: free a live block (after a new point of work
 * on @m, half the time) or allocate on one of three queues, up to @big
 * bytes or @small.
 */
static void random_op(struct rbln_allocator *a, struct mock *m, struct rbln_block *live[32],
		      uint32_t *rng, uint64_t *point, uint64_t big, uint64_t small)
{
	uint32_t r = xorshift(rng);
	int k = (int)(r % 32);

	if (live[k]) {
		uint64_t p = 0;

		if (r & 0x100) {
			p = ++*point;
			mock_submit(m, p);
		}
		rbln_allocator_free(a, live[k], p, (r >> 9) % 3);
		live[k] = NULL;
	} else {
		uint64_t size = 1 + (r >> 12) % (r & 0x200 ? big : small);

		if (rbln_allocator_alloc(a, size, (r >> 9) % 3, &live[k], NULL, 0))
			live[k] = NULL;
	}
}

/* Random allocations, pending frees and completions: every snapshot adds up, history on or off. */
TEST(snapshot_random_sequence)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *live[32] = { NULL };
	struct rbln_allocator *a;
	uint32_t rng = 12345;
	uint64_t point = 0;
	struct mock m;
	int i, k;

	mock_init(&m, 256 * MiB);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	for (i = 0; i < 3000; i++) {
		random_op(a, &m, live, &rng, &point, 12 * MiB, 64 * KiB);
		if (i % 97 == 0 && point > 3)
			mock_complete(&m, point - 3);
		if (i % 500 == 250)
			rbln_allocator_empty_cache(a);
		if (i % 1000 == 0)
			ASSERT_EQ(0, rbln_allocator_record_history(a, i % 2000 == 0, i % 4000 == 0, 64));
		if (i % 50 == 0) {
			snapshot_ok(_metadata, a, &snap);
			rbln_alloc_snapshot_release(&snap);
		}
	}
	for (k = 0; k < 32; k++)
		rbln_allocator_free(a, live[k], 0, 0);
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, m.live);
	mock_fini(&m);
}

TEST(history_rejects)
{
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	EXPECT_EQ(-EINVAL, rbln_allocator_record_history(a, true, false, 0));
	EXPECT_EQ(-EINVAL, rbln_allocator_record_history(a, true, true,
							  (size_t)RBLN_MEMORY_HISTORY_MAX + 1));
	EXPECT_EQ(-EINVAL, rbln_allocator_record_history(NULL, true, false, 10));
	EXPECT_EQ(0, rbln_allocator_record_history(a, true, false, RBLN_MEMORY_HISTORY_MAX));
	EXPECT_EQ(0, rbln_allocator_record_history(a, false, false, 0));
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

TEST(history_events_in_order)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *A, *B, *L;
	struct rbln_allocator *a;
	uint64_t seg, lseg;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 100));
	A = alloc_ok(_metadata, a, 1000, 3);
	B = alloc_ok(_metadata, a, 5000, 3);
	L = alloc_ok(_metadata, a, 2 * MiB, 4);
	ASSERT_TRUE(A && B && L);
	seg = rbln_block_va(A);
	lseg = rbln_block_va(L);
	rbln_allocator_free(a, A, 0, 3);
	mock_submit(&m, 9);
	rbln_allocator_free(a, B, 9, 5);		/* pending: completed later */
	rbln_allocator_free(a, L, 0, 4);
	snapshot_ok(_metadata, a, &snap);
	{
		const struct ev want[] = {
			{ RBLN_MEMORY_SEGMENT_ALLOC, seg, 2 * MiB, 3 },
			{ RBLN_MEMORY_ALLOC, seg, 1000, 3 },
			{ RBLN_MEMORY_ALLOC, seg + 1024, 5000, 3 },
			{ RBLN_MEMORY_SEGMENT_ALLOC, lseg, 20 * MiB, 4 },
			{ RBLN_MEMORY_ALLOC, lseg, 2 * MiB, 4 },
			{ RBLN_MEMORY_FREE_REQUESTED, seg, 1000, 3 },
			{ RBLN_MEMORY_FREE_COMPLETED, seg, 1000, 3 },
			{ RBLN_MEMORY_FREE_REQUESTED, seg + 1024, 5000, 3 },
			{ RBLN_MEMORY_FREE_REQUESTED, lseg, 2 * MiB, 4 },
			{ RBLN_MEMORY_FREE_COMPLETED, lseg, 2 * MiB, 4 },
		};

		expect_events(_metadata, &snap, want, sizeof(want) / sizeof(want[0]));
	}
	rbln_alloc_snapshot_release(&snap);

	/* point 9 done: B's free completes; empty_cache gives both segments back */
	mock_complete(&m, 9);
	rbln_allocator_empty_cache(a);
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(13, snap.nevents);
	EXPECT_EQ(RBLN_MEMORY_FREE_COMPLETED, snap.events[10].action);
	EXPECT_EQ(seg + 1024, snap.events[10].addr);
	EXPECT_EQ(5000, snap.events[10].size);
	EXPECT_EQ(RBLN_MEMORY_SEGMENT_FREE, snap.events[11].action);
	EXPECT_EQ(RBLN_MEMORY_SEGMENT_FREE, snap.events[12].action);
	EXPECT_EQ(seg + lseg, snap.events[11].addr + snap.events[12].addr);
	EXPECT_EQ(22 * MiB, snap.events[11].size + snap.events[12].size);
	EXPECT_EQ(NULL, snap.events[0].site);		/* no stacks asked for */
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Memory pending on its queue is reused there at once: its free completes first. */
TEST(history_reuse_on_queue_completes_free)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *A, *B;
	struct rbln_allocator *a;
	struct mock m;
	uint64_t va;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	A = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, A);
	va = rbln_block_va(A);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 100));
	mock_submit(&m, 5);
	rbln_allocator_free(a, A, 5, 1);
	B = alloc_ok(_metadata, a, 4096, 1);
	ASSERT_NE(NULL, B);
	EXPECT_EQ(va, rbln_block_va(B));
	snapshot_ok(_metadata, a, &snap);
	{
		const struct ev want[] = {
			{ RBLN_MEMORY_FREE_REQUESTED, va, 4096, 1 },
			{ RBLN_MEMORY_FREE_COMPLETED, va, 4096, 1 },
			{ RBLN_MEMORY_ALLOC, va, 4096, 1 },
		};

		expect_events(_metadata, &snap, want, 3);
	}
	rbln_alloc_snapshot_release(&snap);
	/* and never again when the point is done */
	mock_complete(&m, 5);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(3, snap.nevents);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_free(a, B, 0, 1);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

TEST(history_ring_keeps_newest)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	struct rbln_block *b;
	struct mock m;
	size_t i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	b = alloc_ok(_metadata, a, 512, 0);	/* the segment exists before history starts */
	rbln_allocator_free(a, b, 0, 0);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 7));
	for (i = 1; i <= 200; i++) {	/* 600 events: alloc, free_requested, free_completed */
		b = alloc_ok(_metadata, a, i * 512, 0);
		ASSERT_NE(NULL, b);
		rbln_allocator_free(a, b, 0, 0);
	}
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(7, snap.nevents);
	/* the newest 7: ..., 199's three, 200's three */
	EXPECT_EQ(RBLN_MEMORY_FREE_COMPLETED, snap.events[0].action);
	EXPECT_EQ(198 * 512, snap.events[0].size);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(RBLN_MEMORY_ALLOC + i, snap.events[1 + i].action);
		EXPECT_EQ(199 * 512, snap.events[1 + i].size);
		EXPECT_EQ(RBLN_MEMORY_ALLOC + i, snap.events[4 + i].action);
		EXPECT_EQ(200 * 512, snap.events[4 + i].size);
	}
	rbln_alloc_snapshot_release(&snap);

	/* on again with a smaller bound: the newest that fit stay */
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 2));
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(2, snap.nevents);
	EXPECT_EQ(RBLN_MEMORY_FREE_REQUESTED, snap.events[0].action);
	EXPECT_EQ(RBLN_MEMORY_FREE_COMPLETED, snap.events[1].action);
	EXPECT_EQ(200 * 512, snap.events[1].size);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

TEST(history_oom_event)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	struct rbln_block *b, *big;
	struct mock m;
	char msg[256];

	mock_init(&m, 24 * MiB);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, true, 100));
	big = alloc_ok(_metadata, a, 20 * MiB, 2);
	ASSERT_NE(NULL, big);
	EXPECT_EQ(-ENOMEM, rbln_allocator_alloc(a, 8 * MiB, 2, &b, msg, sizeof(msg)));
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(3, snap.nevents);
	EXPECT_EQ(RBLN_MEMORY_SEGMENT_ALLOC, snap.events[0].action);
	EXPECT_EQ(RBLN_MEMORY_ALLOC, snap.events[1].action);
	EXPECT_EQ(RBLN_MEMORY_OOM, snap.events[2].action);
	EXPECT_EQ(0, snap.events[2].addr);
	EXPECT_EQ(8 * MiB, snap.events[2].size);
	EXPECT_EQ(2, snap.events[2].queue);
	EXPECT_NE(NULL, snap.events[2].site);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_free(a, big, 0, 2);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

static __thread const char *test_caller;

static const char *caller_of_thread(void)
{
	return test_caller;
}

/*
 * Sites keep what the caller function said when they were captured, and
 * only with stacks; records_stacks() follows the history's state.
 */
TEST(history_sites_keep_the_caller)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	struct rbln_block *b[3];
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	rbln_alloc_set_caller_fn(caller_of_thread);
	EXPECT_FALSE(rbln_allocator_records_stacks(a));
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 100));
	EXPECT_FALSE(rbln_allocator_records_stacks(a));
	test_caller = "model.py:1";
	b[0] = alloc_ok(_metadata, a, 4096, 0);			/* no stacks: no site */
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, true, 100));
	EXPECT_TRUE(rbln_allocator_records_stacks(a));
	test_caller = "model.py:2";
	b[1] = alloc_ok(_metadata, a, 8192, 0);
	test_caller = NULL;
	b[2] = alloc_ok(_metadata, a, 16384, 0);
	ASSERT_TRUE(b[0] && b[1] && b[2]);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(NULL, snap_block_at(&snap, rbln_block_va(b[0]))->site);
	ASSERT_NE(NULL, snap_block_at(&snap, rbln_block_va(b[1]))->site);
	EXPECT_STREQ("model.py:2", snap_block_at(&snap, rbln_block_va(b[1]))->site->caller);
	ASSERT_NE(NULL, snap_block_at(&snap, rbln_block_va(b[2]))->site);
	EXPECT_EQ(NULL, snap_block_at(&snap, rbln_block_va(b[2]))->site->caller);
	rbln_alloc_snapshot_release(&snap);
	ASSERT_EQ(0, rbln_allocator_record_history(a, false, false, 0));
	EXPECT_FALSE(rbln_allocator_records_stacks(a));
	rbln_alloc_set_caller_fn(NULL);
	for (int i = 0; i < 3; i++)
		rbln_allocator_free(a, b[i], 0, 0);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Frees pending completion are as bounded as the ring: the oldest never completes. */
TEST(history_pending_frees_bounded)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *b[4];
	struct rbln_allocator *a;
	struct mock m;
	uint64_t va;
	int i;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	for (i = 0; i < 4; i++) {
		b[i] = alloc_ok(_metadata, a, 4096, 0);
		ASSERT_NE(NULL, b[i]);
	}
	va = rbln_block_va(b[0]);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 3));
	mock_submit(&m, 4);
	for (i = 0; i < 4; i++)
		rbln_allocator_free(a, b[i], (uint64_t)i + 1, 1);
	mock_complete(&m, 4);
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(3, snap.nevents);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(RBLN_MEMORY_FREE_COMPLETED, snap.events[i].action);
		EXPECT_EQ(va + 4096 * (uint64_t)(i + 1), snap.events[i].addr);
	}
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* Not static and not inlined: the sites below must name it (the test links with -rdynamic). */
__attribute__((noinline)) struct rbln_block *history_site_marker(struct rbln_allocator *a,
								 uint64_t size)
{
	struct rbln_block *b = NULL;

	if (rbln_allocator_alloc(a, size, 0, &b, NULL, 0))
		return NULL;
	__asm__ volatile("" ::: "memory");	/* no tail call: this frame stays */
	return b;
}

/* Does any frame of @s lie in history_site_marker()? */
static bool site_names_marker(const struct rbln_alloc_site *s)
{
	unsigned int i;
	Dl_info info;

	for (i = 0; s && i < s->nframes; i++)
		if (dladdr((const void *)((uintptr_t)s->frames[i] - 1), &info) && info.dli_sname &&
		    !strcmp(info.dli_sname, "history_site_marker"))
			return true;
	return false;
}

TEST(history_sites)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *A, *B, *C;
	struct rbln_allocator *a;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	A = history_site_marker(a, 512);	/* before history: no site */
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, true, 100));
	B = history_site_marker(a, 1024);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 100));
	C = history_site_marker(a, 1536);	/* without stacks: no site either */
	ASSERT_TRUE(A && B && C);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(NULL, snap_block_at(&snap, rbln_block_va(A))->site);
	EXPECT_TRUE(site_names_marker(snap_block_at(&snap, rbln_block_va(B))->site));
	EXPECT_EQ(NULL, snap_block_at(&snap, rbln_block_va(C))->site);
	ASSERT_EQ(2, snap.nevents);	/* B's alloc and C's: the segment was A's */
	EXPECT_EQ(RBLN_MEMORY_ALLOC, snap.events[0].action);
	EXPECT_TRUE(site_names_marker(snap.events[0].site));
	EXPECT_LE(1, snap.events[0].site->nframes);
	EXPECT_GE(RBLN_ALLOC_SITE_FRAMES, snap.events[0].site->nframes);
	EXPECT_EQ(RBLN_MEMORY_ALLOC, snap.events[1].action);
	EXPECT_EQ(NULL, snap.events[1].site);
	rbln_alloc_snapshot_release(&snap);

	/* off: the ring goes, nothing more is recorded, B keeps its site until freed */
	ASSERT_EQ(0, rbln_allocator_record_history(a, false, false, 0));
	rbln_allocator_free(a, C, 0, 0);
	snapshot_ok(_metadata, a, &snap);
	EXPECT_EQ(0, snap.nevents);
	EXPECT_TRUE(site_names_marker(snap_block_at(&snap, rbln_block_va(B))->site));
	rbln_alloc_snapshot_release(&snap);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, true, 100));
	rbln_allocator_free(a, B, 0, 0);
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(2, snap.nevents);		/* a fresh ring */
	EXPECT_EQ(RBLN_MEMORY_FREE_REQUESTED, snap.events[0].action);
	EXPECT_NE(NULL, snap.events[0].site);	/* the site of the free */
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_free(a, A, 0, 0);
	rbln_allocator_destroy(a);		/* drops the sites of blocks and events */
	mock_fini(&m);
}

enum { HIST_THREADS = 4, HIST_PAIRS = 5000 };

struct hist_arg {
	struct rbln_allocator *a;
	int id;
	atomic_int *errors;
};

static void *hist_thread(void *p)
{
	struct hist_arg *h = p;
	struct rbln_block *live[8] = { NULL };
	int i;

	for (i = 0; i < HIST_PAIRS; i++) {
		int k = i % 8;

		if (live[k])
			rbln_allocator_free(h->a, live[k], 0, (uint32_t)h->id);
		if (rbln_allocator_alloc(h->a, 512 * (1 + (i * 7 + h->id) % 64), (uint32_t)h->id,
					 &live[k], NULL, 0))
			atomic_fetch_add(h->errors, 1);
	}
	for (i = 0; i < 8; i++)
		rbln_allocator_free(h->a, live[i], 0, (uint32_t)h->id);
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * Threads allocate and free with history on, through their caches: every
 * event is kept, and per address they alternate alloc, free_requested,
 * free_completed, in the order the blocks changed hands.
 */
TEST(history_threads_lose_no_events)
{
	struct hist_arg args[HIST_THREADS];
	pthread_t th[HIST_THREADS];
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	size_t i, n[8] = { 0 }, nva = 0;
	uint64_t *vas;
	atomic_int errors = 0;
	struct mock m;

	mock_init(&m, 1ull << 30);
	a = pools_create(&m);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, true, 4 * HIST_THREADS * HIST_PAIRS));
	for (i = 0; i < HIST_THREADS; i++) {
		args[i] = (struct hist_arg){ a, (int)i, &errors };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hist_thread, &args[i]));
	}
	for (i = 0; i < HIST_THREADS; i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ(0, atomic_load(&errors));
	snapshot_ok(_metadata, a, &snap);
	for (i = 0; i < snap.nevents; i++)
		n[snap.events[i].action]++;
	EXPECT_EQ(HIST_THREADS * HIST_PAIRS, n[RBLN_MEMORY_ALLOC]);
	EXPECT_EQ(HIST_THREADS * HIST_PAIRS, n[RBLN_MEMORY_FREE_REQUESTED]);
	EXPECT_EQ(HIST_THREADS * HIST_PAIRS, n[RBLN_MEMORY_FREE_COMPLETED]);
	EXPECT_EQ(snap.nevents, 3 * HIST_THREADS * HIST_PAIRS + n[RBLN_MEMORY_SEGMENT_ALLOC]);
	EXPECT_EQ(0, n[RBLN_MEMORY_OOM]);

	/* per address, in event order: alloc, free_requested, free_completed, alloc, ... */
	vas = malloc(snap.nevents * sizeof(*vas));
	ASSERT_NE(NULL, vas);
	for (i = 0; i < snap.nevents; i++)
		if (snap.events[i].action == RBLN_MEMORY_ALLOC)
			vas[nva++] = snap.events[i].addr;
	qsort(vas, nva, sizeof(*vas), cmp_u64);
	for (i = 0; i < nva; i++) {
		size_t j, step = 0;

		if (i && vas[i] == vas[i - 1])
			continue;
		for (j = 0; j < snap.nevents; j++) {
			const struct rbln_alloc_event *e = &snap.events[j];

			if (e->action > RBLN_MEMORY_FREE_COMPLETED || e->addr != vas[i])
				continue;
			EXPECT_EQ(step % 3, (size_t)e->action) {
				TH_LOG("address %#llx, event %zu", (unsigned long long)vas[i], j);
				break;
			}
			step++;
		}
		EXPECT_EQ(0, step % 3);
	}
	free(vas);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_destroy(a);
	mock_fini(&m);
}

/* ---- expandable segments ------------------------------------------------ */

/*
 * The mock, able to reserve and map: map() takes memory from the same
 * capacity as alloc(), and checks that every range it maps lies inside a
 * reservation and is not mapped already.
 */
struct vm_mock {
	struct mock m;
	uint64_t span;			/* what reserve() gives */
	uint64_t res_va[4];		/* live reservations (0: none) */
	int reserves, releases, maps, unmaps, bad_maps;
	uint64_t mapped[64][2];		/* live maps: va, size */
	uint32_t mapped_handle[64];
};

static int vm_reserve(void *ctx, uint64_t *va, uint64_t *size)
{
	struct vm_mock *v = ctx;
	int i;

	for (i = 0; i < 4 && v->res_va[i]; i++)
		;
	if (i == 4)
		return -ENOSPC;
	v->reserves++;
	*size = v->span;
	*va = v->res_va[i] = (1ull << 46) + (uint64_t)v->reserves * (1ull << 40);
	return 0;
}

static void vm_release(void *ctx, uint64_t va)
{
	struct vm_mock *v = ctx;
	int i;

	v->releases++;
	for (i = 0; i < 4; i++)
		if (v->res_va[i] == va)
			v->res_va[i] = 0;
}

static int vm_map(void *ctx, uint64_t va, uint64_t size, uint32_t *handle)
{
	struct vm_mock *v = ctx;
	uint64_t ignored;
	int i, ret, slot = -1, inside = 0;

	for (i = 0; i < 4; i++)
		if (v->res_va[i] && va >= v->res_va[i] && va + size <= v->res_va[i] + v->span)
			inside = 1;
	for (i = 0; i < 64; i++) {
		if (!v->mapped[i][1]) {
			if (slot < 0)
				slot = i;
		} else if (va < v->mapped[i][0] + v->mapped[i][1] && v->mapped[i][0] < va + size) {
			inside = 0;
		}
	}
	if (!inside || slot < 0 || size % (2 * MiB)) {
		v->bad_maps++;
		return -EINVAL;
	}
	ret = mock_alloc(&v->m, size, handle, &ignored);
	if (ret)
		return ret;
	v->maps++;
	v->mapped[slot][0] = va;
	v->mapped[slot][1] = size;
	v->mapped_handle[slot] = *handle;
	return 0;
}

static void vm_unmap(void *ctx, uint64_t va, uint64_t size, uint32_t handle)
{
	struct vm_mock *v = ctx;
	int i;

	for (i = 0; i < 64; i++)
		if (v->mapped[i][0] == va && v->mapped[i][1] == size &&
		    v->mapped_handle[i] == handle)
			break;
	if (i == 64) {
		v->bad_maps++;
		return;
	}
	v->mapped[i][1] = 0;
	v->unmaps++;
	mock_free(&v->m, handle);
}

static const struct rbln_segment_ops vm_ops = {
	.alloc = mock_alloc,
	.free = mock_free,
	.synchronize = mock_synchronize,
	.point_done = mock_point_done,
	.reserve = vm_reserve,
	.release = vm_release,
	.map = vm_map,
	.unmap = vm_unmap,
};

static struct rbln_allocator *vm_create(struct __test_metadata *_metadata, struct vm_mock *v,
					uint64_t capacity, const char *conf)
{
	struct rbln_allocator *a;
	char msg[256];

	memset(v, 0, sizeof(*v));
	mock_init(&v->m, capacity);
	v->span = 1ull << 30;
	/* struct mock is the first member: the provider's ctx is the vm_mock */
	a = rbln_allocator_create_conf(&vm_ops, v, conf, msg, sizeof(msg));
	EXPECT_NE(NULL, a) TH_LOG("%s", msg);
	return a;
}

static void vm_destroy(struct __test_metadata *_metadata, struct vm_mock *v,
		       struct rbln_allocator *a)
{
	rbln_allocator_destroy(a);
	EXPECT_EQ(0, v->m.live);
	EXPECT_EQ(0, v->m.bad_frees);
	EXPECT_EQ(0, v->bad_maps);
	EXPECT_EQ(v->reserves, v->releases);
	EXPECT_EQ(v->maps, v->unmaps);
	mock_fini(&v->m);
}

/* On by default when the provider maps; blocks then span what each map added. */
TEST(expandable_grows_in_place)
{
	struct rbln_block *b1, *b2, *b3;
	struct rbln_allocator_stats s;
	struct rbln_allocator *a;
	uint64_t off, len, va;
	struct vm_mock v;
	uint32_t h1, h2;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	b1 = alloc_ok(_metadata, a, 8 * MiB, 0);
	b2 = alloc_ok(_metadata, a, 8 * MiB, 0);
	ASSERT_NE(NULL, b2);
	/* One map of a plain large segment's size, no plain segment at all. */
	EXPECT_EQ(0, v.m.alloc_calls - v.maps);
	EXPECT_EQ(1, v.maps);
	EXPECT_EQ(20 * MiB, v.m.last_alloc_size);
	va = rbln_block_va(b1);
	EXPECT_EQ(va + 8 * MiB, rbln_block_va(b2));

	/* 4 MiB are left: the next 8 MiB block takes them and 4 MiB of a new map. */
	b3 = alloc_ok(_metadata, a, 8 * MiB, 0);
	ASSERT_NE(NULL, b3);
	EXPECT_EQ(2, v.maps);
	EXPECT_EQ(va + 16 * MiB, rbln_block_va(b3));
	h1 = rbln_block_piece(b3, 0, &off, &len);
	EXPECT_EQ(16 * MiB, off);
	EXPECT_EQ(4 * MiB, len);
	h2 = rbln_block_piece(b3, 5 * MiB, &off, &len);
	EXPECT_NE(h1, h2);
	EXPECT_EQ(1 * MiB, off);
	EXPECT_EQ(3 * MiB, len);
	EXPECT_EQ(h1, rbln_block_handle(b3));

	s = get_stats(_metadata, a);
	EXPECT_CUR_PEAK(s.reserved, 40 * MiB, 40 * MiB);
	EXPECT_CUR_PEAK(s.active, 24 * MiB, 24 * MiB);
	EXPECT_EQ(2, s.num_device_alloc);

	/* Freed, the three coalesce across the maps into one block... */
	rbln_allocator_free(a, b1, 0, 0);
	rbln_allocator_free(a, b2, 0, 0);
	rbln_allocator_free(a, b3, 0, 0);
	/* ...which a 36 MiB request takes without growing. */
	b1 = alloc_ok(_metadata, a, 36 * MiB, 0);
	EXPECT_EQ(va, rbln_block_va(b1));
	EXPECT_EQ(2, v.maps);
	rbln_allocator_free(a, b1, 0, 0);
	vm_destroy(_metadata, &v, a);
}

/* empty_cache unmaps what a free tail covers whole, and the segment with its last map. */
TEST(expandable_shrinks_at_its_end)
{
	struct rbln_block *b1, *b2, *b3;
	struct rbln_allocator_stats s;
	struct rbln_allocator *a;
	struct vm_mock v;

	a = vm_create(_metadata, &v, 1ull << 30, "expandable_segments:True");
	ASSERT_NE(NULL, a);
	b1 = alloc_ok(_metadata, a, 8 * MiB, 0);
	b2 = alloc_ok(_metadata, a, 8 * MiB, 0);
	b3 = alloc_ok(_metadata, a, 8 * MiB, 0);
	ASSERT_NE(NULL, b3);
	rbln_allocator_free(a, b3, 0, 0);
	rbln_allocator_empty_cache(a);
	/* The second map lay wholly in the free tail [16, 40) MiB; the first did not. */
	EXPECT_EQ(1, v.unmaps);
	s = get_stats(_metadata, a);
	EXPECT_CUR_PEAK(s.reserved, 20 * MiB, 40 * MiB);
	EXPECT_EQ(1, s.num_device_free);
	/* A map that an allocated block still reaches into stays. */
	rbln_allocator_free(a, b1, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, v.unmaps);
	rbln_allocator_free(a, b2, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(2, v.unmaps);
	EXPECT_EQ(1, v.releases);
	s = get_stats(_metadata, a);
	EXPECT_EQ(0, s.reserved.current);
	EXPECT_EQ(0, s.cached.current);
	/* Growing again reserves again. */
	b1 = alloc_ok(_metadata, a, 512, 0);
	EXPECT_EQ(2, v.reserves);
	EXPECT_EQ(2 * MiB, v.m.last_alloc_size);
	rbln_allocator_free(a, b1, 0, 0);
	vm_destroy(_metadata, &v, a);
}

/* The snapshot's segments are what @v has mapped, and @v maps what the allocator reserved. */
static void vm_check(struct __test_metadata *_metadata, struct vm_mock *v, struct rbln_allocator *a)
{
	struct rbln_alloc_snapshot snap;
	uint64_t mapped = 0;
	size_t i;
	int j;

	snapshot_ok(_metadata, a, &snap);
	for (j = 0; j < 64; j++)
		mapped += v->mapped[j][1];
	EXPECT_EQ(get_stats(_metadata, a).reserved.current, (int64_t)mapped);
	for (i = 0; i < snap.nsegments; i++) {
		const struct rbln_alloc_snap_segment *g = &snap.segments[i];
		uint64_t inside = 0;

		EXPECT_TRUE(g->expandable);
		for (j = 0; j < 64; j++)
			if (v->mapped[j][1] && v->mapped[j][0] >= g->va &&
			    v->mapped[j][0] + v->mapped[j][1] <= g->va + g->size)
				inside += v->mapped[j][1];
		EXPECT_EQ(g->size, inside);
	}
	EXPECT_EQ(0, v->bad_maps);
	rbln_alloc_snapshot_release(&snap);
}

/* Three 20 MiB blocks, a map of its own each, at the start of the large pool's segment. */
static bool alloc_three_maps(struct __test_metadata *_metadata, struct rbln_allocator *a,
			     struct rbln_block **x1, struct rbln_block **x2, struct rbln_block **x3)
{
	*x1 = alloc_ok(_metadata, a, 20 * MiB, 0);
	*x2 = alloc_ok(_metadata, a, 20 * MiB, 0);
	*x3 = alloc_ok(_metadata, a, 20 * MiB, 0);
	return *x1 && *x2 && *x3;
}

/*
 * empty_cache unmaps every map that free memory covers whole, below live
 * blocks too, as PyTorch's does; a growth maps the hole again first.
 */
TEST(expandable_unmaps_holes)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_block *x1, *x2, *x3, *y;
	struct rbln_allocator_stats s;
	struct rbln_allocator *a;
	struct vm_mock v;
	uint64_t va, off, len;
	uint32_t h;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	ASSERT_TRUE(alloc_three_maps(_metadata, a, &x1, &x2, &x3));
	va = rbln_block_va(x1);
	EXPECT_EQ(va + 40 * MiB, rbln_block_va(x3));
	EXPECT_EQ(3, v.maps);

	/* Pending on a queue, the middle stays mapped until empty_cache has waited. */
	mock_submit(&v.m, 5);
	rbln_allocator_free(a, x2, 5, 1);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, v.m.sync_calls);
	EXPECT_EQ(1, v.unmaps);
	s = get_stats(_metadata, a);
	EXPECT_CUR_PEAK(s.reserved, 40 * MiB, 60 * MiB);
	EXPECT_EQ(0, s.cached.current);
	EXPECT_EQ(1, s.num_device_free);
	vm_check(_metadata, &v, a);
	snapshot_ok(_metadata, a, &snap);
	ASSERT_EQ(2, snap.nsegments);
	EXPECT_EQ(va, snap.segments[0].va);
	EXPECT_EQ(20 * MiB, snap.segments[0].size);
	EXPECT_EQ(va + 40 * MiB, snap.segments[1].va);
	rbln_alloc_snapshot_release(&snap);

	/* 30 MiB: x1's free 20 MiB and the hole mapped again, below x3; no growth at the end. */
	rbln_allocator_free(a, x1, 0, 0);
	y = alloc_ok(_metadata, a, 30 * MiB, 0);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(va, rbln_block_va(y));
	EXPECT_EQ(4, v.maps);
	EXPECT_EQ(1, v.reserves);
	h = rbln_block_piece(y, 25 * MiB, &off, &len);
	EXPECT_NE(rbln_block_handle(y), h);
	EXPECT_EQ(5 * MiB, off);
	EXPECT_EQ(5 * MiB, len);
	vm_check(_metadata, &v, a);

	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, x3, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(4, v.unmaps);
	EXPECT_EQ(1, v.releases);
	EXPECT_EQ(0, get_stats(_metadata, a).reserved.current);
	vm_destroy(_metadata, &v, a);
}

/* A hole mapped whole joins the free block above it. */
TEST(expandable_hole_joins_the_block_above)
{
	struct rbln_block *x1, *x2, *x3, *y, *z;
	struct rbln_allocator *a;
	struct vm_mock v;
	uint64_t va;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	ASSERT_TRUE(alloc_three_maps(_metadata, a, &x1, &x2, &x3));
	va = rbln_block_va(x1);
	rbln_allocator_free(a, x2, 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(1, v.unmaps);
	rbln_allocator_free(a, x3, 0, 0);
	/* [20, 40) MiB is a hole, [40, 60) free: mapping the hole makes 40 MiB. */
	y = alloc_ok(_metadata, a, 30 * MiB, 0);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(va + 20 * MiB, rbln_block_va(y));
	EXPECT_EQ(4, v.maps);
	EXPECT_EQ(20 * MiB, v.m.last_alloc_size);
	/* The 10 MiB left at the end and 40 MiB more make the next 50 MiB. */
	z = alloc_ok(_metadata, a, 50 * MiB, 0);
	ASSERT_NE(NULL, z);
	EXPECT_EQ(va + 50 * MiB, rbln_block_va(z));
	EXPECT_EQ(5, v.maps);
	EXPECT_EQ(40 * MiB, v.m.last_alloc_size);
	vm_check(_metadata, &v, a);
	rbln_allocator_free(a, x1, 0, 0);
	rbln_allocator_free(a, y, 0, 0);
	rbln_allocator_free(a, z, 0, 0);
	vm_destroy(_metadata, &v, a);
}

/* Without empty_cache's wait, memory still pending stays mapped (here: release_before_grow). */
TEST(expandable_pending_memory_stays_mapped)
{
	struct rbln_block *x1, *x2, *x3, *y;
	struct rbln_allocator *a;
	struct vm_mock v;
	uint64_t va;

	a = vm_create(_metadata, &v, 1ull << 30, "release_before_grow:True");
	ASSERT_NE(NULL, a);
	ASSERT_TRUE(alloc_three_maps(_metadata, a, &x1, &x2, &x3));
	va = rbln_block_va(x1);
	mock_submit(&v.m, 9);
	rbln_allocator_free(a, x2, 9, 1);
	/* Queue 0 cannot use x2's memory yet, nor may it be unmapped: the segment grows. */
	y = alloc_ok(_metadata, a, 20 * MiB, 0);
	ASSERT_NE(NULL, y);
	EXPECT_EQ(va + 60 * MiB, rbln_block_va(y));
	EXPECT_EQ(0, v.unmaps);
	mock_complete(&v.m, 9);
	rbln_allocator_free(a, y, 0, 0);
	/*
	 * Done now: a growth for 40 MiB releases both first; the hole x2 left
	 * is too small, so the map goes at the end again.
	 */
	y = alloc_ok(_metadata, a, 40 * MiB, 0);
	EXPECT_EQ(va + 60 * MiB, rbln_block_va(y));
	EXPECT_EQ(2, v.unmaps);
	EXPECT_EQ(5, v.maps);
	vm_check(_metadata, &v, a);
	rbln_allocator_free(a, x1, 0, 0);
	rbln_allocator_free(a, x3, 0, 0);
	rbln_allocator_free(a, y, 0, 0);
	vm_destroy(_metadata, &v, a);
}

/*
 * Random allocations on three queues, pending frees, completions, empty_cache
 * and OOM ladders on a small device: what is mapped is always what the
 * allocator reports, and its blocks lie in it.
 */
TEST(expandable_random_sequence)
{
	struct rbln_block *live[32] = { NULL };
	struct rbln_allocator *a;
	uint32_t rng = 4242;
	uint64_t point = 0;
	struct vm_mock v;
	int i, k;

	a = vm_create(_metadata, &v, 96 * MiB, NULL);
	ASSERT_NE(NULL, a);
	for (i = 0; i < 4000; i++) {
		random_op(a, &v.m, live, &rng, &point, 24 * MiB, MiB);
		if (i % 89 == 0 && point > 3)
			mock_complete(&v.m, point - 3);
		if (i % 37 == 0)
			rbln_allocator_empty_cache(a);
		if (i % 25 == 0)
			vm_check(_metadata, &v, a);
	}
	for (k = 0; k < 32; k++)
		rbln_allocator_free(a, live[k], 0, 0);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, get_stats(_metadata, a).reserved.current);
	vm_destroy(_metadata, &v, a);
}

/* The small pool's segment grows 2 MiB at a time; its free blocks pass 2 MiB. */
TEST(expandable_small_pool)
{
	struct rbln_block *b[5];
	struct rbln_allocator *a;
	struct vm_mock v;
	uint64_t va;
	int i;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	for (i = 0; i < 3; i++)
		b[i] = alloc_ok(_metadata, a, 1 * MiB, 0);
	ASSERT_NE(NULL, b[2]);
	va = rbln_block_va(b[0]);
	EXPECT_EQ(va + 2 * MiB, rbln_block_va(b[2]));
	EXPECT_EQ(2, v.maps);
	EXPECT_EQ(2 * MiB, v.m.last_alloc_size);
	/* [1, 3) MiB free across the two maps: two 1 MiB blocks fit without growing. */
	rbln_allocator_free(a, b[1], 0, 0);
	rbln_allocator_free(a, b[2], 0, 0);
	b[3] = alloc_ok(_metadata, a, 1 * MiB, 0);
	b[4] = alloc_ok(_metadata, a, 1 * MiB, 0);
	EXPECT_EQ(va + 1 * MiB, rbln_block_va(b[3]));
	EXPECT_EQ(va + 2 * MiB, rbln_block_va(b[4]));
	EXPECT_EQ(2, v.maps);
	rbln_allocator_free(a, b[0], 0, 0);
	rbln_allocator_free(a, b[3], 0, 0);
	rbln_allocator_free(a, b[4], 0, 0);
	vm_destroy(_metadata, &v, a);
}

/* A tail still pending on another queue is not taken: the segment grows past it. */
TEST(expandable_pending_tail_keeps_the_queue_rule)
{
	struct rbln_block *b1, *b2, *b3;
	struct rbln_allocator *a;
	struct vm_mock v;
	uint64_t va;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	b1 = alloc_ok(_metadata, a, 8 * MiB, 1);
	ASSERT_NE(NULL, b1);
	va = rbln_block_va(b1);
	mock_submit(&v.m, 5);
	rbln_allocator_free(a, b1, 5, 1);
	/* [0, 20) MiB is one free block pending on queue 1 until point 5. */
	b2 = alloc_ok(_metadata, a, 16 * MiB, 2);
	ASSERT_NE(NULL, b2);
	EXPECT_EQ(2, v.maps);
	EXPECT_EQ(va + 20 * MiB, rbln_block_va(b2));
	/* Queue 1 reuses its own pending memory. */
	b3 = alloc_ok(_metadata, a, 8 * MiB, 1);
	EXPECT_EQ(va, rbln_block_va(b3));
	EXPECT_EQ(2, v.maps);
	rbln_allocator_free(a, b3, 0, 1);
	mock_complete(&v.m, 5);
	rbln_allocator_free(a, b2, 0, 2);
	rbln_allocator_empty_cache(a);
	EXPECT_EQ(0, get_stats(_metadata, a).reserved.current);
	vm_destroy(_metadata, &v, a);
}

/* Out of device memory, the OOM ladder unmaps the other pool's free tail and retries. */
TEST(expandable_oom_ladder_unmaps)
{
	struct rbln_allocator_stats s;
	struct rbln_block *small, *big;
	struct rbln_allocator *a;
	struct vm_mock v;
	char msg[256];

	a = vm_create(_metadata, &v, 21 * MiB, NULL);
	ASSERT_NE(NULL, a);
	small = alloc_ok(_metadata, a, 512, 0);
	rbln_allocator_free(a, small, 0, 0);
	big = alloc_ok(_metadata, a, 19 * MiB, 0);
	ASSERT_NE(NULL, big);
	s = get_stats(_metadata, a);
	EXPECT_EQ(1, s.num_alloc_retries);
	EXPECT_EQ(0, s.num_ooms);
	EXPECT_EQ(1, v.unmaps);
	EXPECT_CUR_PEAK(s.reserved, 20 * MiB, 20 * MiB);
	/* Nothing left to unmap: a clear failure. */
	EXPECT_EQ(-ENOMEM, rbln_allocator_alloc(a, 4 * MiB, 0, &small, msg, sizeof(msg)));
	EXPECT_NE(NULL, strstr(msg, "out of device memory"));
	s = get_stats(_metadata, a);
	EXPECT_EQ(1, s.num_ooms);
	rbln_allocator_free(a, big, 0, 0);
	vm_destroy(_metadata, &v, a);
}

/* Plain segments still, when asked; and a provider error passes through. */
TEST(expandable_off_and_provider_errors)
{
	struct rbln_allocator *a;
	struct rbln_block *b;
	struct vm_mock v;
	char msg[256];

	a = vm_create(_metadata, &v, 1ull << 30, "expandable_segments:False");
	ASSERT_NE(NULL, a);
	b = alloc_ok(_metadata, a, 512, 0);
	EXPECT_EQ(0, v.maps);
	EXPECT_EQ(1, v.m.alloc_ok);
	rbln_allocator_free(a, b, 0, 0);
	vm_destroy(_metadata, &v, a);

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	v.m.fail_errno = -EIO;
	EXPECT_EQ(-EIO, rbln_allocator_alloc(a, 512, 0, &b, msg, sizeof(msg)));
	/* The reservation made for it is given back. */
	EXPECT_EQ(1, v.reserves);
	EXPECT_EQ(1, v.releases);
	v.m.fail_errno = 0;
	/* A reservation too small for the request: out of memory, not a wrong block. */
	v.span = 4 * MiB;
	EXPECT_EQ(-ENOMEM, rbln_allocator_alloc(a, 8 * MiB, 0, &b, msg, sizeof(msg)));
	EXPECT_EQ(0, get_stats(_metadata, a).reserved.current);
	vm_destroy(_metadata, &v, a);
}

/* Snapshots show the segment as mapped, and history its maps and unmaps. */
TEST(expandable_snapshot_and_history)
{
	struct rbln_alloc_snapshot snap;
	struct rbln_allocator *a;
	struct rbln_block *b1, *b2;
	int maps = 0, unmaps = 0;
	struct vm_mock v;
	size_t i;

	a = vm_create(_metadata, &v, 1ull << 30, NULL);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, rbln_allocator_record_history(a, true, false, 100));
	b1 = alloc_ok(_metadata, a, 12 * MiB, 0);
	b2 = alloc_ok(_metadata, a, 12 * MiB, 0);
	rbln_allocator_free(a, b2, 0, 0);
	rbln_allocator_empty_cache(a);
	ASSERT_EQ(0, rbln_allocator_snapshot(a, &snap));
	ASSERT_EQ(1, snap.nsegments);
	EXPECT_TRUE(snap.segments[0].expandable);
	EXPECT_EQ(20 * MiB, snap.segments[0].size);
	EXPECT_EQ(2, snap.segments[0].nblocks);
	for (i = 0; i < snap.nevents; i++) {
		maps += snap.events[i].action == RBLN_MEMORY_SEGMENT_MAP;
		unmaps += snap.events[i].action == RBLN_MEMORY_SEGMENT_UNMAP;
	}
	EXPECT_EQ(2, maps);
	EXPECT_EQ(1, unmaps);
	rbln_alloc_snapshot_release(&snap);
	rbln_allocator_free(a, b1, 0, 0);
	vm_destroy(_metadata, &v, a);
}

TEST_HARNESS_MAIN
