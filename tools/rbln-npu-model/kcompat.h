/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kcompat.h - the kernel API that kernel/emu/ uses, for a userspace process
 *
 * Only what the NPU's units call, with the kernel's semantics where they
 * matter to them: a spinlock is a mutex (nothing here runs in interrupt
 * context), a work item runs on a thread of its own and is never run twice
 * at once, wait_event_idle() sleeps on a condition variable, an xarray is a
 * two-level table of pointers, a page is 4 KiB of heap. kernel/emu/
 * includes this through rbln_emu_port.h when __KERNEL__ is not defined.
 */
#ifndef RBLN_KCOMPAT_H
#define RBLN_KCOMPAT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s8 s8;
typedef __s16 s16;
typedef __s32 s32;
typedef __s64 s64;

#define BIT(n)			(1UL << (n))
#define BIT_ULL(n)		(1ULL << (n))
#define GENMASK_ULL(h, l)	((~0ULL >> (63 - (h))) & (~0ULL << (l)))
#define FIELD_GET(mask, v)	(((v) & (mask)) >> __builtin_ctzll(mask))
#define lower_32_bits(v)	((u32)((v) & 0xffffffffu))
#define upper_32_bits(v)	((u32)((u64)(v) >> 32))
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#define DIV_ROUND_UP(n, d)	(((n) + (d) - 1) / (d))
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))
#define min(a, b)		((a) < (b) ? (a) : (b))
#define max(a, b)		((a) > (b) ? (a) : (b))
#define min_t(t, a, b)		min((t)(a), (t)(b))
#define fallthrough		__attribute__((__fallthrough__))
#define NSEC_PER_USEC		1000ULL

#define PAGE_SHIFT		12
#define PAGE_SIZE		(1UL << PAGE_SHIFT)
#define offset_in_page(p)	((unsigned long)(p) & (PAGE_SIZE - 1))

#define MAX_ERRNO		4095
#define ERR_PTR(err)		((void *)(long)(err))
#define IS_ERR(p)		((unsigned long)(p) >= (unsigned long)-MAX_ERRNO)
#define PTR_ERR(p)		((long)(p))

/* Ordering: the NPU's units only need what C11 gives. */
#define READ_ONCE(x)		(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))
#define smp_mb()		atomic_thread_fence(memory_order_seq_cst)
#define smp_mb__before_atomic()	smp_mb()
#define smp_mb__after_atomic()	smp_mb()
#define smp_store_release(p, v) \
	__atomic_store_n((p), (v), __ATOMIC_RELEASE)

typedef struct { atomic_int counter; } atomic_t;

static inline int atomic_read(atomic_t *a) { return atomic_load(&a->counter); }
static inline void atomic_set(atomic_t *a, int v) { atomic_store(&a->counter, v); }
static inline void atomic_inc(atomic_t *a) { atomic_fetch_add(&a->counter, 1); }
static inline void atomic_or(int v, atomic_t *a) { atomic_fetch_or(&a->counter, v); }
static inline void atomic_andnot(int v, atomic_t *a) { atomic_fetch_and(&a->counter, ~v); }
static inline int atomic_fetch_andnot(int v, atomic_t *a)
{
	return atomic_fetch_and(&a->counter, ~v);
}

typedef struct { pthread_mutex_t m; } spinlock_t;

static inline void spin_lock_init(spinlock_t *l) { pthread_mutex_init(&l->m, NULL); }
static inline void spin_lock(spinlock_t *l) { pthread_mutex_lock(&l->m); }
static inline void spin_unlock(spinlock_t *l) { pthread_mutex_unlock(&l->m); }

struct mutex { pthread_mutex_t m; };
static inline void mutex_init(struct mutex *l) { pthread_mutex_init(&l->m, NULL); }
static inline void mutex_lock(struct mutex *l) { pthread_mutex_lock(&l->m); }
static inline void mutex_unlock(struct mutex *l) { pthread_mutex_unlock(&l->m); }
#define lockdep_assert_held(l)	((void)(l))

/* Waits: the condition is re-checked under the queue's mutex, which wake_up() takes. */
typedef struct {
	pthread_mutex_t m;
	pthread_cond_t c;
} wait_queue_head_t;

void init_waitqueue_head(wait_queue_head_t *wq);
void wake_up(wait_queue_head_t *wq);
#define wait_event_idle(wq, cond)					\
	do {								\
		pthread_mutex_lock(&(wq).m);				\
		while (!(cond))						\
			pthread_cond_wait(&(wq).c, &(wq).m);		\
		pthread_mutex_unlock(&(wq).m);				\
	} while (0)

/* A work item has a thread of its own, started the first time it is queued. */
struct workqueue_struct;
struct work_struct {
	void (*func)(struct work_struct *work);
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool pending, running, started, exit;
	pthread_t thread;
	struct work_struct *next;	/* in its workqueue */
	struct workqueue_struct *wq;
};

#define WQ_UNBOUND		0
#define INIT_WORK(w, fn)	init_work((w), (fn))
void init_work(struct work_struct *work, void (*func)(struct work_struct *work));
struct workqueue_struct *alloc_workqueue(const char *fmt, unsigned int flags, int max_active, ...);
bool queue_work(struct workqueue_struct *wq, struct work_struct *work);
bool cancel_work_sync(struct work_struct *work);
void destroy_workqueue(struct workqueue_struct *wq);

/* Nothing here reclaims on the caller's behalf: every mode is GFP_KERNEL. */
#define GFP_KERNEL		0
#define GFP_NOWAIT		0
#define __GFP_NOWARN		0
#define __GFP_ZERO		1
void *kvmalloc(size_t size, int gfp);
void kvfree(const void *p);

struct page;
struct page *alloc_page(int gfp);
void __free_page(struct page *page);
static inline void *page_address(struct page *page) { return page; }

static inline void memset32(u32 *s, u32 v, size_t n)
{
	while (n--)
		*s++ = v;
}

/* An xarray of pages: indices below 2^24 (64 GiB of 4 KiB pages). */
#define XA_LEAF_BITS		12
#define XA_LEAVES		(1u << 12)
struct xarray {
	_Atomic(void *) *leaves[XA_LEAVES];
	pthread_mutex_t lock;	/* allocation of leaves */
};

void xa_init(struct xarray *xa);
void *xa_load(struct xarray *xa, unsigned long index);
void *xa_cmpxchg(struct xarray *xa, unsigned long index, void *old, void *entry, int gfp);
void *xa_erase(struct xarray *xa, unsigned long index);
void *xa_find(struct xarray *xa, unsigned long *index, unsigned long last);
void xa_destroy(struct xarray *xa);
static inline bool xa_is_err(const void *entry) { return IS_ERR(entry); }
static inline int xa_err(const void *entry) { return IS_ERR(entry) ? (int)PTR_ERR(entry) : 0; }
#define xa_for_each_range(xa, index, entry, start, last)			\
	for ((index) = (start), (entry) = xa_find((xa), &(index), (last));	\
	     (entry); (index)++, (entry) = xa_find((xa), &(index), (last)))
#define xa_for_each(xa, index, entry)	xa_for_each_range(xa, index, entry, 0, ~0UL)

u64 ktime_get_ns(void);
void cond_resched(void);
/* A short sleep of at least @min microseconds that no signal ends early. */
void usleep_idle_range(unsigned long min, unsigned long max);
/* Userspace saves the FPU state itself; MXCSR stays at its default. */
static inline void kernel_fpu_begin(void) {}
static inline void kernel_fpu_end(void) {}
/* A process waits for no fence of the guest's: nothing to annotate. */
static inline bool dma_fence_begin_signalling(void) { return false; }
static inline void dma_fence_end_signalling(bool cookie) { (void)cookie; }

#endif /* RBLN_KCOMPAT_H */
