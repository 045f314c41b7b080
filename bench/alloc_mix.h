/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * alloc_mix.h - the allocation size mixes the allocator benchmarks share,
 * so that the native and the device runs replay the same sizes
 */
#ifndef RBLN_BENCH_ALLOC_MIX_H
#define RBLN_BENCH_ALLOC_MIX_H

#include <stdint.h>

#define KiB		(1ull << 10)
#define MiB		(1ull << 20)

#define SEED		0x5eed0a110cull
#define LIVE		64		/* live blocks while pairs run */

/* splitmix64: a fixed seed gives the same sizes on every run and machine. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

/* Log-uniform by octaves in [lo, hi), lo and hi powers of two. */
static inline uint64_t log_uniform(uint64_t *s, uint64_t lo, uint64_t hi)
{
	unsigned int octaves = 0;
	uint64_t base;

	while ((lo << octaves) < hi)
		octaves++;
	base = lo << rng_below(s, octaves);
	return base + rng_below(s, base);
}

/*
 * The size mix of a transformer's tensors: 90% small (biases, norms,
 * per-head and decode-step activations: 512 B to 64 KiB), 9% medium
 * (activations and weight matrices: 1 to 16 MiB), 1% big (attention scores,
 * logits, embeddings: 64 to 256 MiB), each log-uniform.
 */
static inline uint64_t tensor_size(uint64_t *s)
{
	uint64_t r = rng_below(s, 100);

	if (r < 90)
		return log_uniform(s, 512, 64 * KiB);
	if (r < 99)
		return log_uniform(s, 1 * MiB, 16 * MiB);
	return log_uniform(s, 64 * MiB, 256 * MiB);
}

/* The small part of the mix alone. */
static inline uint64_t small_size(uint64_t *s)
{
	return log_uniform(s, 512, 64 * KiB);
}

struct mix {
	const char *name;
	uint64_t (*size)(uint64_t *s);
};

static const struct mix mixes[] = {
	{ "sizes 90% 512 B-64 KiB, 9% 1-16 MiB, 1% 64-256 MiB", tensor_size },
	{ "sizes 512 B-64 KiB only", small_size },
};

#endif /* RBLN_BENCH_ALLOC_MIX_H */
