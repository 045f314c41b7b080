// SPDX-License-Identifier: GPL-2.0-only
/*
 * kcompat.c - the kernel API of kcompat.h, over pthreads and C11 atomics
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "kcompat.h"

void init_waitqueue_head(wait_queue_head_t *wq)
{
	pthread_mutex_init(&wq->m, NULL);
	pthread_cond_init(&wq->c, NULL);
}

void wake_up(wait_queue_head_t *wq)
{
	pthread_mutex_lock(&wq->m);
	pthread_cond_broadcast(&wq->c);
	pthread_mutex_unlock(&wq->m);
}

struct workqueue_struct {
	pthread_mutex_t lock;
	struct work_struct *works;	/* every work queued on it once */
};

void init_work(struct work_struct *work, void (*func)(struct work_struct *work))
{
	memset(work, 0, sizeof(*work));
	work->func = func;
	pthread_mutex_init(&work->lock, NULL);
	pthread_cond_init(&work->cond, NULL);
}

struct workqueue_struct *alloc_workqueue(const char *fmt, unsigned int flags, int max_active, ...)
{
	struct workqueue_struct *wq = calloc(1, sizeof(*wq));

	(void)fmt;
	(void)flags;
	(void)max_active;
	if (wq)
		pthread_mutex_init(&wq->lock, NULL);
	return wq;
}

static void *work_thread(void *arg)
{
	struct work_struct *work = arg;

	pthread_mutex_lock(&work->lock);
	for (;;) {
		while (!work->pending && !work->exit)
			pthread_cond_wait(&work->cond, &work->lock);
		if (work->exit)
			break;
		work->pending = false;
		work->running = true;
		pthread_mutex_unlock(&work->lock);
		work->func(work);
		pthread_mutex_lock(&work->lock);
		work->running = false;
		pthread_cond_broadcast(&work->cond);
	}
	pthread_mutex_unlock(&work->lock);
	return NULL;
}

/* As the kernel's: false when the work was already pending. */
bool queue_work(struct workqueue_struct *wq, struct work_struct *work)
{
	bool queued = false;

	pthread_mutex_lock(&work->lock);
	if (!work->started) {
		if (pthread_create(&work->thread, NULL, work_thread, work)) {
			/* Without a thread the work cannot run: the device is as hung. */
			perror("rbln-npu-model: pthread_create");
			pthread_mutex_unlock(&work->lock);
			return false;
		}
		work->started = true;
		work->wq = wq;
		pthread_mutex_lock(&wq->lock);
		work->next = wq->works;
		wq->works = work;
		pthread_mutex_unlock(&wq->lock);
	}
	if (!work->pending && !work->exit) {
		work->pending = true;
		queued = true;
		pthread_cond_broadcast(&work->cond);
	}
	pthread_mutex_unlock(&work->lock);
	return queued;
}

bool cancel_work_sync(struct work_struct *work)
{
	bool was_pending;

	pthread_mutex_lock(&work->lock);
	was_pending = work->pending;
	work->pending = false;
	while (work->running)
		pthread_cond_wait(&work->cond, &work->lock);
	pthread_mutex_unlock(&work->lock);
	return was_pending;
}

void destroy_workqueue(struct workqueue_struct *wq)
{
	struct work_struct *work;

	for (work = wq->works; work; work = work->next) {
		pthread_mutex_lock(&work->lock);
		work->exit = true;
		pthread_cond_broadcast(&work->cond);
		pthread_mutex_unlock(&work->lock);
		pthread_join(work->thread, NULL);
	}
	free(wq);
}

void *kvmalloc(size_t size, int gfp)
{
	return gfp & __GFP_ZERO ? calloc(1, size) : malloc(size);
}

void kvfree(const void *p)
{
	free((void *)p);
}

struct page *alloc_page(int gfp)
{
	void *p = aligned_alloc(PAGE_SIZE, PAGE_SIZE);

	if (p && (gfp & __GFP_ZERO))
		memset(p, 0, PAGE_SIZE);
	return p;
}

void __free_page(struct page *page)
{
	free(page);
}

void xa_init(struct xarray *xa)
{
	memset(xa->leaves, 0, sizeof(xa->leaves));
	pthread_mutex_init(&xa->lock, NULL);
}

/* The slot of @index; NULL if its leaf is absent and !@create. */
static _Atomic(void *) *xa_slot(struct xarray *xa, unsigned long index, bool create)
{
	unsigned long top = index >> XA_LEAF_BITS;
	_Atomic(void *) *leaf;

	if (top >= XA_LEAVES)
		return NULL;
	leaf = __atomic_load_n(&xa->leaves[top], __ATOMIC_ACQUIRE);
	if (!leaf && create) {
		pthread_mutex_lock(&xa->lock);
		leaf = xa->leaves[top];
		if (!leaf) {
			leaf = calloc(1u << XA_LEAF_BITS, sizeof(*leaf));
			__atomic_store_n(&xa->leaves[top], leaf, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&xa->lock);
	}
	return leaf ? &leaf[index & ((1u << XA_LEAF_BITS) - 1)] : NULL;
}

void *xa_load(struct xarray *xa, unsigned long index)
{
	_Atomic(void *) *slot = xa_slot(xa, index, false);

	return slot ? atomic_load(slot) : NULL;
}

void *xa_cmpxchg(struct xarray *xa, unsigned long index, void *old, void *entry, int gfp)
{
	_Atomic(void *) *slot = xa_slot(xa, index, true);

	(void)gfp;
	if (!slot)
		return ERR_PTR(index >> XA_LEAF_BITS >= XA_LEAVES ? -EINVAL : -ENOMEM);
	atomic_compare_exchange_strong(slot, &old, entry);
	return old;
}

void *xa_erase(struct xarray *xa, unsigned long index)
{
	_Atomic(void *) *slot = xa_slot(xa, index, false);

	return slot ? atomic_exchange(slot, NULL) : NULL;
}

/* The first entry at or after *@index, up to @last; *@index is set to it. */
void *xa_find(struct xarray *xa, unsigned long *index, unsigned long last)
{
	unsigned long i;

	for (i = *index; i <= last && i >> XA_LEAF_BITS < XA_LEAVES; i++) {
		_Atomic(void *) *slot = xa_slot(xa, i, false);
		void *entry;

		if (!slot) {
			/* A whole leaf absent: skip it. */
			i |= (1u << XA_LEAF_BITS) - 1;
			continue;
		}
		entry = atomic_load(slot);
		if (entry) {
			*index = i;
			return entry;
		}
	}
	return NULL;
}

void xa_destroy(struct xarray *xa)
{
	unsigned int i;

	for (i = 0; i < XA_LEAVES; i++) {
		free(xa->leaves[i]);
		xa->leaves[i] = NULL;
	}
}

u64 ktime_get_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * A thread sleeping is idle anyway: TASK_IDLE only matters to the kernel's
 * load average and hung task detector. The sleep goes on after a signal.
 */
void usleep_idle_range(unsigned long min, unsigned long max)
{
	struct timespec ts = {
		.tv_sec = min / 1000000,
		.tv_nsec = (long)(min % 1000000) * 1000,
	};

	(void)max;
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/*
 * Threads here are preempted anyway: giving way matters only to a thread
 * that spins waiting for another, which on few CPUs may be off-CPU. Yield
 * at most once a millisecond, so the hot paths, which call this at every
 * packet and page, do not hand their CPU away each time.
 */
void cond_resched(void)
{
	static _Thread_local u64 last;
	u64 now = ktime_get_ns();

	if (now - last >= 1000000) {
		last = now;
		sched_yield();
	}
}
