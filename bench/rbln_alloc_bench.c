// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_alloc_bench - librbln's caching allocator (runtime/rbln_alloc.c) on
 * the host, with a mock segment provider, as ratios to baselines measured
 * in the same run
 *
 *  - alloc+free pairs over a size mix like a transformer's tensors, on one
 *    and on two threads: the caching allocator / glibc malloc+free (target:
 *    at most 2x) and / mimalloc's mi_malloc+mi_free, on the same sizes;
 *    then the same over the mix's small sizes only, which glibc and
 *    mimalloc serve from their heaps, with (next to) no system calls
 *    (target: at most 2x mimalloc). On two threads both use one caching
 *    allocator, as librbln does (one per device), while glibc and
 *    mimalloc give each thread its own heap. The same allocator with
 *    thread_cache:0 too: the pools alone behind one mutex, PyTorch's way;
 *  - fragmentation: peak reserved / peak allocated while replaying the
 *    allocations of a transformer's generation loop, activations freed in
 *    LIFO order and in three non-LIFO orders (target: at most 1.15), under
 *    PyTorch's defaults and under RBLN_ALLOC_CONF settings.
 *
 * The mock provider never runs out: it hands out increasing fake device
 * addresses, and the device has always finished (point_done is true), so
 * what is measured is the allocator alone. Nothing touches the memory:
 * device memory is not the host's, and the host allocators' blocks are not
 * touched either beyond their own headers.
 *
 * Not a test: it gates nothing.
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

#ifdef HAVE_MIMALLOC
#include <mimalloc.h>
#endif

#include "alloc_pairs.h"
#include "rbln_alloc.h"

#define PAIRS		100000		/* alloc+free pairs per thread and run */
#define RUNS		3		/* timed runs, after one warm-up; the best counts */

static void die(const char *what, int err)
{
	fprintf(stderr, "rbln_alloc_bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- the mock provider ------------------------------------------------ */

/* Called under the allocator's lock: needs none of its own. */
struct mock {
	uint64_t next_va;
	uint32_t next_handle;
};

static int mock_alloc(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va)
{
	struct mock *m = ctx;

	*handle = ++m->next_handle;
	*va = m->next_va;
	m->next_va += (size + 2 * MiB - 1) & ~(2 * MiB - 1);
	return 0;
}

static void mock_free(void *ctx, uint32_t handle)
{
	(void)ctx;
	(void)handle;
}

static int mock_synchronize(void *ctx)
{
	(void)ctx;
	return 0;
}

static bool mock_point_done(void *ctx, uint64_t point)
{
	(void)ctx;
	(void)point;
	return true;
}

/* Expandable segments: address space for more than a device would have. */
static int mock_reserve(void *ctx, uint64_t *va, uint64_t *size)
{
	struct mock *m = ctx;

	*size = 1ull << 36;
	*va = m->next_va;
	m->next_va += *size;
	return 0;
}

static void mock_release(void *ctx, uint64_t va)
{
	(void)ctx;
	(void)va;
}

static int mock_map(void *ctx, uint64_t va, uint64_t size, uint32_t *handle)
{
	struct mock *m = ctx;

	(void)va;
	(void)size;
	*handle = ++m->next_handle;
	return 0;
}

static void mock_unmap(void *ctx, uint64_t va, uint64_t size, uint32_t handle)
{
	(void)ctx;
	(void)va;
	(void)size;
	(void)handle;
}

static const struct rbln_segment_ops mock_ops = {
	.alloc = mock_alloc,
	.free = mock_free,
	.synchronize = mock_synchronize,
	.point_done = mock_point_done,
	.reserve = mock_reserve,
	.release = mock_release,
	.map = mock_map,
	.unmap = mock_unmap,
};

/* @conf: RBLN_ALLOC_CONF's syntax; the environment's is not read. */
static struct rbln_allocator *mock_allocator(struct mock *m, const char *conf)
{
	struct rbln_allocator *a;
	char msg[256];

	*m = (struct mock){ .next_va = 1ull << 32 };
	a = rbln_allocator_create_conf(&mock_ops, m, conf, msg, sizeof(msg));
	if (!a) {
		fprintf(stderr, "rbln_alloc_bench: %s\n", msg);
		die("rbln_allocator_create_conf", errno);
	}
	return a;
}

/* ---- alloc+free pairs ------------------------------------------------- */

static uintptr_t glibc_alloc(void *ctx, uint64_t size)
{
	void *p = malloc(size);

	(void)ctx;
	if (!p)
		die("malloc", ENOMEM);
	return (uintptr_t)p;
}

static void glibc_free(void *ctx, uintptr_t p)
{
	(void)ctx;
	free((void *)p);
}

#ifdef HAVE_MIMALLOC
static uintptr_t mi_alloc(void *ctx, uint64_t size)
{
	void *p = mi_malloc(size);

	(void)ctx;
	if (!p)
		die("mi_malloc", ENOMEM);
	return (uintptr_t)p;
}

static void mi_release(void *ctx, uintptr_t p)
{
	(void)ctx;
	mi_free((void *)p);
}
#endif

static uintptr_t rbln_heap_alloc(void *ctx, uint64_t size)
{
	struct rbln_block *b;
	char msg[256];
	int ret = rbln_allocator_alloc(ctx, size, 0, &b, msg, sizeof(msg));

	if (ret) {
		fprintf(stderr, "rbln_alloc_bench: %s\n", msg);
		die("rbln_allocator_alloc", ret);
	}
	return (uintptr_t)b;
}

static void rbln_heap_free(void *ctx, uintptr_t p)
{
	/* Freed with no job in flight: the mock's device is idle. */
	rbln_allocator_free(ctx, (struct rbln_block *)p, 0, 0);
}

enum { H_GLIBC, H_MIMALLOC, H_RBLN, H_RBLN_NOTC, H_COUNT };

/* @vs_mimalloc: the target is 2x mimalloc, else 2x glibc. */
static void bench_pairs(const struct mix *mix, bool vs_mimalloc)
{
	struct rbln_allocator_stats st;
	struct rbln_allocator *a;
	struct trace traces[2];
	struct heap heaps[H_COUNT];
	double best[H_COUNT], ns;
	unsigned int nthreads, h, run;
	struct rbln_allocator *notc;
	struct mock m, m2;

	a = mock_allocator(&m, NULL);
	notc = mock_allocator(&m2, "thread_cache:0");
	heaps[H_GLIBC] = (struct heap){ "glibc malloc/free", glibc_alloc, glibc_free, NULL };
#ifdef HAVE_MIMALLOC
	heaps[H_MIMALLOC] = (struct heap){ "mimalloc mi_malloc/mi_free", mi_alloc, mi_release, NULL };
#else
	heaps[H_MIMALLOC] = (struct heap){ NULL, NULL, NULL, NULL };
#endif
	heaps[H_RBLN] = (struct heap){ "rbln_alloc, mock provider", rbln_heap_alloc, rbln_heap_free, a };
	heaps[H_RBLN_NOTC] = (struct heap){ "rbln_alloc, thread_cache:0", rbln_heap_alloc,
					    rbln_heap_free, notc };
	trace_make(&traces[0], mix, SEED, PAIRS);
	trace_make(&traces[1], mix, SEED + 1, PAIRS);

	printf("alloc+free pairs, %s\n"
	       "  (log-uniform, fixed seed), %u live blocks per thread, %u pairs per thread,\n"
	       "  ns per pair = wall time / pairs of all threads, best of %u runs\n",
	       mix->name, LIVE, PAIRS, RUNS);
	for (nthreads = 1; nthreads <= 2; nthreads++) {
		for (h = 0; h < H_COUNT; h++)
			best[h] = 1e30;
		/* Run 0 warms every heap up; the heaps take turns so that drift hits all. */
		for (run = 0; run <= RUNS; run++) {
			for (h = 0; h < H_COUNT; h++) {
				if (!heaps[h].name)
					continue;
				ns = pairs_seconds(&heaps[h], traces, nthreads) * 1e9;
				if (run && ns < best[h])
					best[h] = ns;
			}
		}
		printf("  %u thread%s\n", nthreads, nthreads == 1 ? "" : "s");
		printf("    %-28s %8.1f ns  (baseline)\n", heaps[H_GLIBC].name, best[H_GLIBC]);
		if (heaps[H_MIMALLOC].name)
			printf("    %-28s %8.1f ns  %5.2fx glibc\n", heaps[H_MIMALLOC].name,
			       best[H_MIMALLOC], best[H_MIMALLOC] / best[H_GLIBC]);
		else
			printf("    %-28s not built (no libmimalloc-dev)\n", "mimalloc");
		printf("    %-28s %8.1f ns  %5.2fx glibc", heaps[H_RBLN].name, best[H_RBLN],
		       best[H_RBLN] / best[H_GLIBC]);
		if (heaps[H_MIMALLOC].name)
			printf("  %5.2fx mimalloc", best[H_RBLN] / best[H_MIMALLOC]);
		if (!vs_mimalloc && best[H_RBLN] / best[H_GLIBC] > 2.0)
			printf("  (target: <= 2x glibc)");
		if (vs_mimalloc && heaps[H_MIMALLOC].name && best[H_RBLN] / best[H_MIMALLOC] > 2.0)
			printf("  (target: <= 2x mimalloc)");
		printf("\n    %-28s %8.1f ns  %5.2fx glibc  (the pools alone, one mutex)\n",
		       heaps[H_RBLN_NOTC].name, best[H_RBLN_NOTC], best[H_RBLN_NOTC] / best[H_GLIBC]);
	}
	rbln_allocator_stats(a, &st);
	printf("  rbln_alloc reserved %" PRId64 " segments from the provider, %.0f MiB at the peak\n\n",
	       st.num_device_alloc, (double)st.reserved.peak / MiB);
	rbln_allocator_destroy(a);
	rbln_allocator_destroy(notc);
	trace_free(&traces[0]);
	trace_free(&traces[1]);
}

/* ---- fragmentation: a transformer's generation loop --------------------- */

/*
 * The trace is that of greedy generation with a decoder-only transformer
 * shaped like OPT-1.3B, in fp16:
 *
 *   24 layers, hidden 2048, 32 heads, MLP 8192, vocabulary 50272;
 *   batch 4, a 512-token prompt (prefill), then 255 decode steps of one
 *   token each: 256 forward passes.
 *
 * One forward pass of n = batch x new tokens, over a context of c tokens:
 *
 *   ids [n] int64, x = embedding(ids) [n, 2048]
 *   per layer, x -> y:
 *     a1 = ln1(x), qkv = a1 W_qkv [n, 3 x 2048],
 *     the KV cache grows: K and V [batch, c, 2048] are each reallocated
 *       one token (16 KiB) bigger, the old one freed as soon as the new one
 *       exists (torch.cat into a DynamicCache),
 *     scores = q k^T [batch, 32, new, c], probs = softmax(scores),
 *     ctx = probs v [n, 2048], attn = ctx W_o, h = x + attn,
 *     a2 = ln2(h), up = a2 W_1 [n, 8192], act = gelu(up), down = act W_2,
 *     y = h + down
 *   head: f = ln_f(y), logits = f W_emb^T [n, 50272] (the prefill's is
 *     196 MiB), last = fp32 logits of the last position [batch, 50272],
 *     next = argmax(last) [batch] int64, freed once read back.
 *
 * Activations are freed either at their last use (as eager PyTorch's
 * reference counting does: a non-LIFO order), or at the end of their scope
 * (the layer, or the head) in one of these orders: LIFO (reverse
 * allocation order, the layer's input last), FIFO (allocation order) or a
 * shuffle with a fixed seed. The KV cache's growth is the same in all.
 * The whole trace runs once without the weights and once with the weights
 * (2.5 GiB, allocated first and kept) resident, on a fresh allocator each.
 */
#define T_LAYERS	24
#define T_HIDDEN	2048ull
#define T_HEADS		32ull
#define T_MLP		8192ull
#define T_VOCAB		50272ull
#define T_BATCH		4ull
#define T_PROMPT	512ull
#define T_STEPS		256ull
#define T_FP16		2ull

enum order { O_LIFO, O_FIFO, O_LAST_USE, O_SHUFFLED, O_COUNT };

static const char *const order_names[O_COUNT] = {
	"LIFO at the end of each layer", "FIFO at the end of each layer",
	"at last use (eager)", "shuffled at the end of each layer",
};

struct tensor {
	struct rbln_block *b;
	uint64_t seq;	/* allocation order */
};

struct replay {
	struct rbln_allocator *a;
	enum order order;
	uint64_t rng, seq, allocs;
	struct tensor scope[32];	/* freed at the end of the scope */
	unsigned int nscope;
};

static struct tensor t_alloc(struct replay *r, uint64_t bytes)
{
	struct tensor t = { .b = (struct rbln_block *)rbln_heap_alloc(r->a, bytes),
			    .seq = r->seq++ };

	r->allocs++;
	return t;
}

static void t_free(struct replay *r, struct tensor t)
{
	rbln_allocator_free(r->a, t.b, 0, 0);
}

/* @t's last use is over: freed now or at the end of the scope. */
static void t_done(struct replay *r, struct tensor t)
{
	if (r->order == O_LAST_USE) {
		t_free(r, t);
		return;
	}
	if (r->nscope == sizeof(r->scope) / sizeof(r->scope[0]))
		die("replay scope full", ENOSPC);
	r->scope[r->nscope++] = t;
}

static int seq_cmp(const void *x, const void *y)
{
	const struct tensor *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void scope_end(struct replay *r)
{
	unsigned int i, j;
	struct tensor tmp;

	qsort(r->scope, r->nscope, sizeof(r->scope[0]), seq_cmp);
	if (r->order == O_SHUFFLED) {
		for (i = r->nscope; i > 1; i--) {
			j = (unsigned int)rng_below(&r->rng, i);
			tmp = r->scope[i - 1];
			r->scope[i - 1] = r->scope[j];
			r->scope[j] = tmp;
		}
	}
	for (i = 0; i < r->nscope; i++)
		t_free(r, r->scope[r->order == O_LIFO ? r->nscope - 1 - i : i]);
	r->nscope = 0;
}

static struct tensor layer(struct replay *r, struct tensor x, struct tensor kv[2], uint64_t s,
			   uint64_t c)
{
	uint64_t n = T_BATCH * s, act = n * T_HIDDEN * T_FP16;
	struct tensor a1, qkv, scores, probs, ctx, attn, h, a2, up, gelu, down, y, nkv;
	unsigned int i;

	a1 = t_alloc(r, act);
	qkv = t_alloc(r, 3 * act);
	t_done(r, a1);
	for (i = 0; i < 2; i++) {
		nkv = t_alloc(r, T_BATCH * c * T_HIDDEN * T_FP16);
		if (kv[i].b)
			t_free(r, kv[i]);
		kv[i] = nkv;
	}
	scores = t_alloc(r, T_BATCH * T_HEADS * s * c * T_FP16);
	t_done(r, qkv);
	probs = t_alloc(r, T_BATCH * T_HEADS * s * c * T_FP16);
	t_done(r, scores);
	ctx = t_alloc(r, act);
	t_done(r, probs);
	attn = t_alloc(r, act);
	t_done(r, ctx);
	h = t_alloc(r, act);
	t_done(r, attn);
	t_done(r, x);
	a2 = t_alloc(r, act);
	up = t_alloc(r, n * T_MLP * T_FP16);
	t_done(r, a2);
	gelu = t_alloc(r, n * T_MLP * T_FP16);
	t_done(r, up);
	down = t_alloc(r, act);
	t_done(r, gelu);
	y = t_alloc(r, act);
	t_done(r, down);
	t_done(r, h);
	scope_end(r);
	return y;
}

static void forward(struct replay *r, struct tensor kv[][2], uint64_t s, uint64_t c)
{
	uint64_t n = T_BATCH * s;
	struct tensor ids, x, f, logits, last, next;
	int l;

	ids = t_alloc(r, n * 8);
	x = t_alloc(r, n * T_HIDDEN * T_FP16);
	t_done(r, ids);
	scope_end(r);
	for (l = 0; l < T_LAYERS; l++)
		x = layer(r, x, kv[l], s, c);
	f = t_alloc(r, n * T_HIDDEN * T_FP16);
	t_done(r, x);
	logits = t_alloc(r, n * T_VOCAB * T_FP16);
	t_done(r, f);
	last = t_alloc(r, T_BATCH * T_VOCAB * 4);
	t_done(r, logits);
	next = t_alloc(r, T_BATCH * 8);
	t_done(r, last);
	scope_end(r);
	t_free(r, next);
}

/* The weights of OPT-1.3B's shape: embedding (tied head), per layer 2 norms, 4 matrices. */
static unsigned int weights_alloc(struct replay *r, struct tensor *w)
{
	unsigned int n = 0;
	int l, i;

	w[n++] = t_alloc(r, T_VOCAB * T_HIDDEN * T_FP16);
	w[n++] = t_alloc(r, 2048 * T_HIDDEN * T_FP16);	/* positions */
	for (l = 0; l < T_LAYERS; l++) {
		for (i = 0; i < 4; i++)				/* ln1, ln2 weight and bias */
			w[n++] = t_alloc(r, T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, 3 * T_HIDDEN * T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, 3 * T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, T_HIDDEN * T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, T_HIDDEN * T_MLP * T_FP16);
		w[n++] = t_alloc(r, T_MLP * T_FP16);
		w[n++] = t_alloc(r, T_MLP * T_HIDDEN * T_FP16);
		w[n++] = t_alloc(r, T_HIDDEN * T_FP16);
	}
	w[n++] = t_alloc(r, T_HIDDEN * T_FP16);			/* ln_f */
	w[n++] = t_alloc(r, T_HIDDEN * T_FP16);
	return n;
}

struct frag_result {
	int64_t peak_allocated, peak_reserved, device_allocs;
	uint64_t allocs;
};

static struct frag_result replay_run(enum order order, bool weights, const char *conf)
{
	struct tensor kv[T_LAYERS][2], w[2 + T_LAYERS * 12 + 2];
	struct rbln_allocator_stats st;
	struct frag_result res;
	struct replay r = { .order = order, .rng = SEED };
	unsigned int nw = 0, i;
	uint64_t step;
	struct mock m;
	int l;

	r.a = mock_allocator(&m, conf);
	memset(kv, 0, sizeof(kv));
	if (weights)
		nw = weights_alloc(&r, w);
	forward(&r, kv, T_PROMPT, T_PROMPT);
	for (step = 1; step < T_STEPS; step++)
		forward(&r, kv, 1, T_PROMPT + step);
	rbln_allocator_stats(r.a, &st);
	res.peak_allocated = st.allocated.peak;
	res.peak_reserved = st.reserved.peak;
	res.allocs = r.allocs;
	res.device_allocs = st.num_device_alloc;
	for (l = 0; l < T_LAYERS; l++)
		for (i = 0; i < 2; i++)
			t_free(&r, kv[l][i]);
	for (i = 0; i < nw; i++)
		t_free(&r, w[i]);
	rbln_allocator_stats(r.a, &st);
	if (st.allocated.current)
		die("replay leaked", EFAULT);
	rbln_allocator_destroy(r.a);
	return res;
}

/* RBLN_ALLOC_CONF settings compared: the defaults (expandable segments) first, then PyTorch's. */
static const char *const frag_confs[] = {
	"",
	"expandable_segments:False,thread_cache:0",
	"expandable_segments:False,exact_large_segments:True",
	"expandable_segments:False,release_before_grow:True",
	"expandable_segments:False,max_split_size_mb:64",
	"expandable_segments:False,exact_large_segments:True,release_before_grow:True",
};

static void bench_fragmentation(void)
{
	struct frag_result res = { 0 }, resw;
	double ratio, ratiow;
	enum order o;
	size_t c;

	printf("fragmentation: greedy generation, OPT-1.3B shape (24 layers, hidden 2048), fp16,\n"
	       "  batch 4, 512-token prompt + 255 decode steps, KV cache grown by reallocation;\n"
	       "  peak reserved / peak allocated (target: <= 1.15), and segments reserved\n"
	       "  (provider objects: plain segments, or an expandable segment's maps)\n");
	for (c = 0; c < sizeof(frag_confs) / sizeof(frag_confs[0]); c++) {
		printf("  RBLN_ALLOC_CONF=\"%s\"%s\n", frag_confs[c],
		       frag_confs[c][0] ? c == 1 ? " (PyTorch's defaults)" : "" : " (the defaults)");
		printf("    %-34s %10s %10s %8s %5s  %s\n", "activations freed", "peak alloc",
		       "peak resv", "resv/alloc", "segs", "with weights resident");
		for (o = 0; o < O_COUNT; o++) {
			res = replay_run(o, false, frag_confs[c]);
			resw = replay_run(o, true, frag_confs[c]);
			ratio = (double)res.peak_reserved / (double)res.peak_allocated;
			ratiow = (double)resw.peak_reserved / (double)resw.peak_allocated;
			printf("    %-34s %6.0f MiB %6.0f MiB %8.3f %5" PRId64
			       "  %6.3f (%.0f / %.0f MiB, %" PRId64 " segs)%s\n",
			       order_names[o], (double)res.peak_allocated / MiB,
			       (double)res.peak_reserved / MiB, ratio, res.device_allocs, ratiow,
			       (double)resw.peak_reserved / MiB, (double)resw.peak_allocated / MiB,
			       resw.device_allocs, ratio <= 1.15 ? "" : "  (target: <= 1.15)");
		}
	}
	printf("  (%" PRIu64 " allocations per replay without the weights)\n", res.allocs);
}

int main(void)
{
	size_t i;

#ifdef HAVE_MIMALLOC
	/* Debian's libmimalloc.so also defines malloc(): it must not be the one called. */
	void *p = calloc(1, 100);

	if (!p)
		die("calloc", ENOMEM);
	if (mi_is_in_heap_region(p))
		die("malloc() is mimalloc's, not glibc's (libc must be linked before libmimalloc)",
		    EINVAL);
	free(p);
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		bench_pairs(&mixes[i], i == 1);
	bench_fragmentation();
	return 0;
}
