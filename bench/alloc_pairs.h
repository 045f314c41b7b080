/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * alloc_pairs.h - the alloc+free pair loop the allocator benchmarks share
 *
 * A thread allocates LIVE blocks (untimed), then @pairs times frees the
 * block in a random slot and allocates one of the next size in its place.
 * The native benchmark runs it over malloc and a mock-backed rbln_alloc,
 * the device one over the driver directly and a driver-backed rbln_alloc.
 */
#ifndef RBLN_BENCH_ALLOC_PAIRS_H
#define RBLN_BENCH_ALLOC_PAIRS_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloc_mix.h"

/* An allocator under test: blocks are opaque words. */
struct heap {
	const char *name;
	uintptr_t (*alloc)(void *ctx, uint64_t size);
	void (*free)(void *ctx, uintptr_t block);
	void *ctx;
};

/* One thread's sizes and slots. */
struct trace {
	uint64_t fill[LIVE];
	uint64_t *size;
	uint32_t *slot;
	size_t pairs;
};

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void bench_fail(const char *what)
{
	perror(what);
	exit(1);
}

static inline void trace_make(struct trace *t, const struct mix *mix, uint64_t seed,
			      size_t pairs)
{
	uint64_t s = seed;
	size_t i;

	t->pairs = pairs;
	t->size = malloc(pairs * sizeof(*t->size));
	t->slot = malloc(pairs * sizeof(*t->slot));
	if (!t->size || !t->slot)
		bench_fail("trace");
	for (i = 0; i < LIVE; i++)
		t->fill[i] = mix->size(&s);
	for (i = 0; i < pairs; i++) {
		t->size[i] = mix->size(&s);
		t->slot[i] = (uint32_t)rng_below(&s, LIVE);
	}
}

static inline void trace_free(struct trace *t)
{
	free(t->size);
	free(t->slot);
}

struct pairs_worker {
	pthread_t thread;
	pthread_barrier_t *barrier;
	const struct heap *heap;
	const struct trace *trace;
	double t0, t1;
};

static inline void *pairs_run(void *arg)
{
	struct pairs_worker *w = arg;
	const struct heap *h = w->heap;
	const struct trace *t = w->trace;
	uintptr_t live[LIVE];
	size_t i;

	for (i = 0; i < LIVE; i++)
		live[i] = h->alloc(h->ctx, t->fill[i]);
	pthread_barrier_wait(w->barrier);
	w->t0 = bench_now();
	for (i = 0; i < t->pairs; i++) {
		uint32_t s = t->slot[i];

		h->free(h->ctx, live[s]);
		live[s] = h->alloc(h->ctx, t->size[i]);
	}
	w->t1 = bench_now();
	for (i = 0; i < LIVE; i++)
		h->free(h->ctx, live[i]);
	return NULL;
}

/* Seconds per pair on @nthreads (1 or 2) threads: wall time over all pairs. */
static inline double pairs_seconds(const struct heap *h, const struct trace *traces,
				   unsigned int nthreads)
{
	struct pairs_worker w[2];
	pthread_barrier_t barrier;
	size_t pairs = 0;
	double t0, t1;
	unsigned int i;

	if (nthreads < 1 || nthreads > sizeof(w) / sizeof(w[0])) {
		fprintf(stderr, "pairs_seconds: %u threads, not 1 or 2\n", nthreads);
		exit(1);
	}
	pthread_barrier_init(&barrier, NULL, nthreads);
	for (i = 0; i < nthreads; i++) {
		w[i] = (struct pairs_worker){ .barrier = &barrier, .heap = h, .trace = &traces[i] };
		pairs += traces[i].pairs;
		if (i && pthread_create(&w[i].thread, NULL, pairs_run, &w[i]))
			bench_fail("pthread_create");
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
	return (t1 - t0) / (double)pairs;
}

#endif /* RBLN_BENCH_ALLOC_PAIRS_H */
