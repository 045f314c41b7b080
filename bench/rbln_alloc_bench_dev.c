// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_alloc_bench_dev - device memory with and without librbln's caching
 * allocator, as a ratio measured in the same run (in a guest: it needs
 * rbln.ko and a device)
 *
 * The alloc+free pairs of rbln_alloc_bench (the same size mixes, seeds and
 * number of live blocks per thread, on one and on two threads, one device
 * file and one allocator for both), done two ways on device memory:
 *
 *  - uncached: each pair closes a DEVICE buffer object and creates one,
 *    rbln_drm_bo_close() and rbln_drm_bo_create(dev, size, RBLN_BO_DEVICE);
 *  - cached: runtime/rbln_alloc.c, built in, over a segment provider on
 *    libdrm_rbln that does what librbln's does (runtime/rbln_device.c: one
 *    DEVICE buffer object per segment). librbln's tensors are not used:
 *    their own bookkeeping is no part of either path.
 *
 * Printed: the uncached cost per pair / the cached one, and how many
 * buffer objects the cached path still created and closed. No job runs, so
 * the provider's device is always idle (synchronize has nothing to wait
 * for). Absolute times under QEMU's TCG mean little; the ratio is the
 * result. Not a test: it gates nothing.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rbln_drm.h>

#include "alloc_mix.h"
#include "rbln_alloc.h"

#define PAIRS		20000		/* per thread */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "rbln_alloc_bench_dev: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

struct trace {
	uint64_t fill[LIVE];
	uint64_t size[PAIRS];
	uint32_t slot[PAIRS];
};

static void trace_make(struct trace *t, const struct mix *mix, uint64_t seed)
{
	uint64_t s = seed;
	size_t i;

	for (i = 0; i < LIVE; i++)
		t->fill[i] = mix->size(&s);
	for (i = 0; i < PAIRS; i++) {
		t->size[i] = mix->size(&s);
		t->slot[i] = (uint32_t)rng_below(&s, LIVE);
	}
}

/* ---- the two paths ---------------------------------------------------- */

struct path {
	uintptr_t (*alloc)(void *ctx, uint64_t size);
	void (*free)(void *ctx, uintptr_t x);
	void *ctx;
};

static uintptr_t bo_alloc(void *ctx, uint64_t size)
{
	uint32_t handle;
	uint64_t va;
	int ret = rbln_drm_bo_create(ctx, size, RBLN_BO_DEVICE, 0, &handle, &va);

	if (ret)
		die("rbln_drm_bo_create", ret);
	return handle;
}

static void bo_free(void *ctx, uintptr_t x)
{
	int ret = rbln_drm_bo_close(ctx, (uint32_t)x);

	if (ret)
		die("rbln_drm_bo_close", ret);
}

static uintptr_t cached_alloc(void *ctx, uint64_t size)
{
	struct rbln_block *b;
	char msg[256];
	int ret = rbln_allocator_alloc(ctx, size, 0, &b, msg, sizeof(msg));

	if (ret) {
		fprintf(stderr, "rbln_alloc_bench_dev: %s\n", msg);
		die("rbln_allocator_alloc", ret);
	}
	return (uintptr_t)b;
}

static void cached_free(void *ctx, uintptr_t x)
{
	rbln_allocator_free(ctx, (struct rbln_block *)x, 0, 0);
}

/* The provider: librbln's (runtime/rbln_device.c), less the jobs. */
static int seg_alloc(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va)
{
	return rbln_drm_bo_create(ctx, size, RBLN_BO_DEVICE, 0, handle, va);
}

static void seg_free(void *ctx, uint32_t handle)
{
	rbln_drm_bo_close(ctx, handle);
}

static int seg_synchronize(void *ctx)
{
	(void)ctx;
	return 0;	/* no job was submitted */
}

static bool seg_point_done(void *ctx, uint64_t point)
{
	(void)ctx;
	(void)point;
	return true;
}

static const struct rbln_segment_ops drm_ops = {
	.alloc = seg_alloc,
	.free = seg_free,
	.synchronize = seg_synchronize,
	.point_done = seg_point_done,
};

struct worker {
	pthread_t thread;
	pthread_barrier_t *barrier;
	const struct path *path;
	const struct trace *trace;
	double t0, t1;
};

/* The LIVE blocks are allocated and freed untimed. */
static void *pairs_run(void *arg)
{
	struct worker *w = arg;
	const struct path *p = w->path;
	const struct trace *t = w->trace;
	uintptr_t live[LIVE];
	size_t i;

	for (i = 0; i < LIVE; i++)
		live[i] = p->alloc(p->ctx, t->fill[i]);
	pthread_barrier_wait(w->barrier);
	w->t0 = now();
	for (i = 0; i < PAIRS; i++) {
		uint32_t s = t->slot[i];

		p->free(p->ctx, live[s]);
		live[s] = p->alloc(p->ctx, t->size[i]);
	}
	w->t1 = now();
	for (i = 0; i < LIVE; i++)
		p->free(p->ctx, live[i]);
	return NULL;
}

/* Microseconds per pair: wall time over the pairs of every thread. */
static double pairs_us(const struct path *p, const struct trace *traces, unsigned int nthreads)
{
	pthread_barrier_t barrier;
	struct worker w[2];
	double t0, t1;
	unsigned int i;

	pthread_barrier_init(&barrier, NULL, nthreads);
	for (i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ .barrier = &barrier, .path = p, .trace = &traces[i] };
		if (i && pthread_create(&w[i].thread, NULL, pairs_run, &w[i]))
			die("pthread_create", errno);
	}
	pairs_run(&w[0]);
	for (i = 1; i < nthreads; i++)
		pthread_join(w[i].thread, NULL);
	pthread_barrier_destroy(&barrier);
	t0 = w[0].t0;
	t1 = w[0].t1;
	for (i = 1; i < nthreads; i++) {
		t0 = w[i].t0 < t0 ? w[i].t0 : t0;
		t1 = w[i].t1 > t1 ? w[i].t1 : t1;
	}
	return (t1 - t0) * 1e6 / ((double)PAIRS * nthreads);
}

static void bench_mix(struct rbln_drm_device *dev, const struct mix *mix)
{
	static struct trace t[2], t_cold[2];
	struct rbln_allocator_stats s0, s1;
	struct rbln_allocator *a;
	struct path bo = { bo_alloc, bo_free, dev }, cached = { cached_alloc, cached_free, NULL };
	double raw, cold, warm;
	unsigned int i, nthreads;

	for (i = 0; i < 2; i++) {
		trace_make(&t[i], mix, SEED + i);
		trace_make(&t_cold[i], mix, SEED + 2 + i);
	}
	printf("alloc+free pairs, %s\n"
	       "  (rbln_alloc_bench's: fixed seed, %u live blocks per thread), %u pairs per thread,\n"
	       "  us per pair = wall time / pairs of all threads\n", mix->name, LIVE, PAIRS);
	for (nthreads = 1; nthreads <= 2; nthreads++) {
		a = rbln_allocator_create(&drm_ops, dev);
		if (!a)
			die("rbln_allocator_create", errno);
		cached.ctx = a;
		/*
		 * Cold: a fresh allocator, over other traces of the same mix;
		 * then warm, as in a running program, over the measured traces
		 * (which the cache has not seen).
		 */
		cold = pairs_us(&cached, t_cold, nthreads);
		rbln_allocator_stats(a, &s0);
		warm = pairs_us(&cached, t, nthreads);
		rbln_allocator_stats(a, &s1);
		rbln_allocator_destroy(a);
		raw = pairs_us(&bo, t, nthreads);

		printf("  %u thread%s\n", nthreads, nthreads == 1 ? "" : "s");
		printf("    %-38s %8.1f us  (baseline)\n", "rbln_alloc, driver provider, warm", warm);
		printf("    %-38s %8.1f us  %6.1fx warm\n", "rbln_alloc, driver provider, cold", cold,
		       cold / warm);
		printf("    %-38s %8.1f us  %6.1fx warm\n", "BO_CREATE/BO_CLOSE DEVICE (uncached)",
		       raw, raw / warm);
		printf("    warm, the cached path created %" PRId64 " and closed %" PRId64 " BOs"
		       " (%" PRId64 " OOM retries); %.0f MiB reserved at the peak\n",
		       s1.num_device_alloc - s0.num_device_alloc,
		       s1.num_device_free - s0.num_device_free,
		       s1.num_alloc_retries - s0.num_alloc_retries, (double)s1.reserved.peak / MiB);
	}
	printf("\n");
}

int main(void)
{
	struct rbln_drm_device *dev;
	unsigned int minor;
	uint64_t mem;
	size_t i;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (rbln_drm_enumerate(&minor, 1) < 1)
		die("no rbln device", ENODEV);
	ret = rbln_drm_open(minor, &dev);
	if (ret)
		die("open", ret);
	ret = rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &mem);
	if (ret)
		die("GET_PARAM", ret);
	printf("device memory: %.0f MiB\n", (double)mem / MiB);
	for (i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		bench_mix(dev, &mixes[i]);
	rbln_drm_close(dev);
	return 0;
}
