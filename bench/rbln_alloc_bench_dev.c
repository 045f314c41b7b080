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

#include "alloc_pairs.h"
#include "rbln_alloc.h"

#define PAIRS		20000		/* per thread */

static void die(const char *what, int err)
{
	fprintf(stderr, "rbln_alloc_bench_dev: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- the two paths ---------------------------------------------------- */

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

static void bench_mix(struct rbln_drm_device *dev, const struct mix *mix)
{
	struct trace t[2], t_cold[2];
	struct rbln_allocator_stats s0, s1;
	struct rbln_allocator *a;
	struct heap bo = { "BO create/close", bo_alloc, bo_free, dev };
	struct heap cached = { "rbln_alloc", cached_alloc, cached_free, NULL };
	double raw, cold, warm;
	unsigned int i, nthreads;

	for (i = 0; i < 2; i++) {
		trace_make(&t[i], mix, SEED + i, PAIRS);
		trace_make(&t_cold[i], mix, SEED + 2 + i, PAIRS);
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
		cold = pairs_seconds(&cached, t_cold, nthreads) * 1e6;
		rbln_allocator_stats(a, &s0);
		warm = pairs_seconds(&cached, t, nthreads) * 1e6;
		rbln_allocator_stats(a, &s1);
		rbln_allocator_destroy(a);
		raw = pairs_seconds(&bo, t, nthreads) * 1e6;

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
	for (i = 0; i < 2; i++) {
		trace_free(&t[i]);
		trace_free(&t_cold[i]);
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
