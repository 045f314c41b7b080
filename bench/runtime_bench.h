/* SPDX-License-Identifier: MIT */
/*
 * runtime_bench.h - what librbln's benchmarks share: a clock, dying with
 * librbln's message, the fastest of rounds, and their baseline, one
 * EW_BINARY add of @numel f32 submitted and waited for with libdrm-rbln
 * alone, on the first rbln device, on a queue of its own
 */
#ifndef RUNTIME_BENCH_H
#define RUNTIME_BENCH_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <rbln/rbln.h>
#include <rbln_drm.h>
#include <xf86drm.h>

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
		rbln_last_error()[0] ? rbln_last_error() : strerror(errno));
	exit(1);
}

static inline double min_of(const double *v, int n)
{
	double m = v[0];
	int i;

	for (i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

struct bare {
	struct rbln_drm_device *dev;
	uint32_t queue, h[4];
	struct drm_rbln_sync sig;
	uint32_t len;
	uint64_t queue_va;	/* of the command buffer */
};

/* False, errno set, on failure. */
static inline bool bare_open(struct bare *b, uint32_t numel)
{
	uint64_t va[4], size = ((uint64_t)numel * 4 + 4095) & ~4095ull;
	struct rbln_drm_cmd c;
	unsigned int minor;
	void *cpu;
	int i;

	memset(b, 0, sizeof(*b));
	if (rbln_drm_enumerate(&minor, 1) < 1 || rbln_drm_open(minor, &b->dev) ||
	    rbln_drm_queue_create(b->dev, RBLN_QUEUE_PRIORITY_NORMAL, &b->queue))
		return false;
	for (i = 0; i < 3; i++)
		if (rbln_drm_bo_create(b->dev, size, RBLN_BO_DEVICE, 0, &b->h[i], &va[i]))
			return false;
	if (rbln_drm_bo_create(b->dev, 4096, RBLN_BO_HOST, 0, &b->h[3], &va[3]) ||
	    rbln_drm_bo_mmap(b->dev, b->h[3], PROT_READ | PROT_WRITE, &cpu, NULL) ||
	    drmSyncobjCreate(rbln_drm_fd(b->dev), 0, &b->sig.handle))
		return false;
	rbln_drm_cmd_init(&c, cpu, 4096);
	rbln_drm_cmd_binary(&c, RBLN_BINARY_ADD, RBLN_DTYPE_F32, va[2], va[0], va[1], numel);
	b->len = c.len;
	b->queue_va = va[3];
	return true;
}

/* One SUBMIT + wait of the packet; false on failure. */
static inline bool bare_run(struct bare *b)
{
	return !rbln_drm_submit(b->dev, b->queue, b->queue_va, b->len, b->h, 4, NULL, 0, &b->sig) &&
	       !drmSyncobjWait(rbln_drm_fd(b->dev), &b->sig.handle, 1, INT64_MAX, 0, NULL);
}

#endif /* RUNTIME_BENCH_H */
