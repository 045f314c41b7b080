// SPDX-License-Identifier: MIT
/*
 * rbln_program.c - compiling device ops to packets, and the program cache
 *
 * The cache is process-wide, shared by every device and thread: a program
 * holds no addresses, so it runs anywhere. It keeps at most CACHE_MAX
 * programs and drops the oldest beyond that; a program in use survives
 * being dropped until its last user puts it.
 */

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_internal.h"
#include "rbln_program.h"

#define CACHE_BUCKETS	1024
#define CACHE_MAX	4096

struct rbln_reloc {
	uint32_t offset;	/* in the program */
	uint32_t arg;		/* enum rbln_arg */
	uint64_t addend;	/* bytes past the operand's address */
};

struct rbln_program {
	struct rbln_program_key key;
	uint64_t hash;
	unsigned int refs;		/* the cache's and users'; under cache_lock */
	struct rbln_program *next;	/* in its bucket */
	struct rbln_program *newer;	/* in age order, for dropping the oldest */
	uint32_t len, nrelocs;
	struct rbln_reloc *relocs;
	uint8_t *code;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rbln_program *buckets[CACHE_BUCKETS];
static struct rbln_program *oldest, *newest;
static unsigned int cached;

/* FNV-1a over 64-bit words: the key is zeroed, padding included, by its builder. */
static uint64_t key_hash(const struct rbln_program_key *k)
{
	const uint8_t *p = (const uint8_t *)k;
	uint64_t h = 0xcbf29ce484222325ull, w;
	size_t i;

	_Static_assert(sizeof(*k) % 8 == 0, "the key is hashed in words");
	for (i = 0; i < sizeof(*k); i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	return h ^ h >> 29;
}

/* --- compiling ------------------------------------------------------------------ */

struct builder {
	struct rbln_drm_cmd cmd;
	size_t cap;
	struct rbln_reloc *relocs;
	uint32_t nrelocs, reloc_cap;
	int err;
};

/* Room for @bytes more of packets and @relocs more relocations. */
static bool reserve(struct builder *b, size_t bytes, uint32_t relocs)
{
	if (b->cmd.len + bytes > b->cap) {
		size_t cap = (b->cmd.len + bytes) * 2;
		void *buf = cap <= UINT32_MAX ? realloc(b->cmd.buf, cap) : NULL;

		if (!buf)
			goto fail;
		b->cmd.buf = buf;
		b->cmd.cap = cap;
		b->cap = cap;
	}
	if (b->nrelocs + relocs > b->reloc_cap) {
		uint32_t cap = (b->nrelocs + relocs) * 2;
		void *r = realloc(b->relocs, cap * sizeof(*b->relocs));

		if (!r)
			goto fail;
		b->relocs = r;
		b->reloc_cap = cap;
	}
	return true;
fail:
	b->err = -ENOMEM;
	return false;
}

static void reloc(struct builder *b, uint32_t start, size_t field, enum rbln_arg arg,
		  uint64_t addend)
{
	b->relocs[b->nrelocs++] = (struct rbln_reloc) {
		.offset = start + field, .arg = arg, .addend = addend,
	};
}

/* Emits one packet of struct @type with @call, relocating the fields that follow. */
#define EMIT(b, type, call, ...) do {						\
	uint32_t start_ = (b)->cmd.len;						\
	int ret_;								\
										\
	if ((b)->err || !reserve((b), sizeof(struct type), 4))			\
		break;								\
	ret_ = (call);								\
	if (ret_) {								\
		(b)->err = ret_;						\
		break;								\
	}									\
	__VA_ARGS__;								\
} while (0)
#define RELOC(b, type, field, arg, addend) \
	reloc((b), start_, offsetof(struct type, field), (arg), (addend))

static int64_t numel_of(const int64_t *shape, int ndim)
{
	int64_t n = 1;
	int i;

	for (i = 0; i < ndim; i++)
		n *= shape[i];
	return n;
}

static void compile_reduce(struct builder *b, const struct rbln_program_key *k)
{
	int64_t cols = k->ndim_a ? k->shape_a[k->ndim_a - 1] : 1;
	int64_t rows = cols ? numel_of(k->shape_a, k->ndim_a) / cols : 0, r, n;
	size_t esize = rbln_dtype_size(k->in_dtype);

	if (cols > UINT32_MAX) {
		b->err = -E2BIG;
		return;
	}
	for (r = 0; r < rows; r += n) {
		n = rows - r < UINT32_MAX ? rows - r : UINT32_MAX;
		EMIT(b, rbln_pkt_reduce,
		     rbln_drm_cmd_reduce(&b->cmd, k->sub, k->in_dtype, 0, 0, n, cols),
		     RELOC(b, rbln_pkt_reduce, src, RBLN_ARG_A, r * cols * esize);
		     RELOC(b, rbln_pkt_reduce, dst, RBLN_ARG_OUT, r * esize));
	}
}

/* a: [M, K] or [B, M, K]; b: [K, N] or [B, K, N]; out: [M, N] or [B, M, N]. */
static void compile_matmul(struct builder *b, const struct rbln_program_key *k)
{
	int na = k->ndim_a, nb = k->ndim_b;
	int64_t batch = na == 3 ? k->shape_a[0] : 1, i;
	int64_t m = k->shape_a[na - 2], kk = k->shape_a[na - 1], n = k->shape_b[nb - 1];
	size_t ein = rbln_dtype_size(k->in_dtype), eout = rbln_dtype_size(k->out_dtype);

	if (m > UINT32_MAX || n > UINT32_MAX || kk > UINT32_MAX) {
		b->err = -E2BIG;
		return;
	}
	if (!kk) {	/* an empty sum: zeros */
		EMIT(b, rbln_pkt_dma_fill,
		     rbln_drm_cmd_dma_fill(&b->cmd, 0, 0, (batch * m * n * eout + 3) & ~3ull),
		     RELOC(b, rbln_pkt_dma_fill, dst, RBLN_ARG_OUT, 0));
		return;
	}
	for (i = 0; i < batch; i++) {
		struct rbln_drm_gemm g = {
			.in = k->in_dtype, .out = k->out_dtype,
			.m = m, .n = n, .k = kk, .lda = kk, .ldb = n, .ldc = n,
		};

		EMIT(b, rbln_pkt_gemm, rbln_drm_cmd_gemm(&b->cmd, &g),
		     RELOC(b, rbln_pkt_gemm, a, RBLN_ARG_A, i * m * kk * ein);
		     RELOC(b, rbln_pkt_gemm, b, RBLN_ARG_B, nb == 3 ? i * kk * n * ein : 0);
		     RELOC(b, rbln_pkt_gemm, c, RBLN_ARG_OUT, i * m * n * eout));
	}
}

static void compile(struct builder *b, const struct rbln_program_key *k)
{
	int64_t count = numel_of(k->shape_a, k->ndim_a);
	size_t esize = rbln_dtype_size(k->in_dtype);

	switch (k->kind) {
	case RBLN_OPK_COPY:
		EMIT(b, rbln_pkt_dma_copy, rbln_drm_cmd_dma_copy(&b->cmd, 0, 0, count * esize),
		     RELOC(b, rbln_pkt_dma_copy, src, RBLN_ARG_A, 0);
		     RELOC(b, rbln_pkt_dma_copy, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_FILL:
		/* DMA_FILL works in words; blocks are 512-byte multiples, so the tail fits. */
		EMIT(b, rbln_pkt_dma_fill,
		     rbln_drm_cmd_dma_fill(&b->cmd, 0, 0, (count * esize + 3) & ~3ull),
		     RELOC(b, rbln_pkt_dma_fill, pattern, RBLN_ARG_SCALAR, 0);
		     RELOC(b, rbln_pkt_dma_fill, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_UNARY:
		EMIT(b, rbln_pkt_ew_unary,
		     rbln_drm_cmd_unary(&b->cmd, k->sub, k->in_dtype, 0, 0, count),
		     RELOC(b, rbln_pkt_ew_unary, src, RBLN_ARG_A, 0);
		     RELOC(b, rbln_pkt_ew_unary, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_BINARY:
		EMIT(b, rbln_pkt_ew_binary,
		     rbln_drm_cmd_binary(&b->cmd, k->sub, k->in_dtype, 0, 0, 0, count),
		     RELOC(b, rbln_pkt_ew_binary, a, RBLN_ARG_A, 0);
		     RELOC(b, rbln_pkt_ew_binary, b, RBLN_ARG_B, 0);
		     RELOC(b, rbln_pkt_ew_binary, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_SCALAR:
		EMIT(b, rbln_pkt_ew_scalar,
		     rbln_drm_cmd_scalar(&b->cmd, k->sub, k->in_dtype, 0, 0, 0, count),
		     RELOC(b, rbln_pkt_ew_scalar, scalar, RBLN_ARG_SCALAR, 0);
		     RELOC(b, rbln_pkt_ew_scalar, src, RBLN_ARG_A, 0);
		     RELOC(b, rbln_pkt_ew_scalar, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_CAST:
		EMIT(b, rbln_pkt_cast,
		     rbln_drm_cmd_cast(&b->cmd, k->out_dtype, k->in_dtype, 0, 0, count),
		     RELOC(b, rbln_pkt_cast, src, RBLN_ARG_A, 0);
		     RELOC(b, rbln_pkt_cast, dst, RBLN_ARG_OUT, 0));
		return;
	case RBLN_OPK_REDUCE:
		compile_reduce(b, k);
		return;
	case RBLN_OPK_MATMUL:
		compile_matmul(b, k);
		return;
	}
	b->err = -EINVAL;
}

static struct rbln_program *program_new(const struct rbln_program_key *key, uint64_t hash)
{
	struct builder b = { 0 };
	struct rbln_program *p;

	compile(&b, key);
	p = b.err ? NULL : calloc(1, sizeof(*p));
	if (!p) {
		rbln_fail(b.err == -E2BIG ? RBLN_ERROR_UNSUPPORTED : b.err == -ENOMEM || !b.err ?
			  RBLN_ERROR_OUT_OF_MEMORY : RBLN_ERROR_INVALID,
			  "cannot compile the op: %s", strerror(b.err ? -b.err : ENOMEM));
		free(b.cmd.buf);
		free(b.relocs);
		return NULL;
	}
	p->key = *key;
	p->hash = hash;
	p->len = b.cmd.len;
	p->code = b.cmd.buf;
	p->nrelocs = b.nrelocs;
	p->relocs = b.relocs;
	return p;
}

static void program_free(struct rbln_program *p)
{
	free(p->code);
	free(p->relocs);
	free(p);
}

/* Drops the oldest program from the cache; with cache_lock held. */
static void drop_oldest_locked(void)
{
	struct rbln_program *p = oldest, **pp = &buckets[p->hash % CACHE_BUCKETS];

	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	oldest = p->newer;
	if (!oldest)
		newest = NULL;
	cached--;
	if (!--p->refs)
		program_free(p);
}

struct rbln_program *rbln_program_get(const struct rbln_program_key *key, bool *compiled)
{
	uint64_t hash = key_hash(key);
	struct rbln_program *p, *q;

	pthread_mutex_lock(&cache_lock);
	for (p = buckets[hash % CACHE_BUCKETS]; p; p = p->next) {
		if (p->hash == hash && !memcmp(&p->key, key, sizeof(*key))) {
			p->refs++;
			pthread_mutex_unlock(&cache_lock);
			*compiled = false;
			return p;
		}
	}
	pthread_mutex_unlock(&cache_lock);

	/* Compile unlocked; a racing thread may have cached the same program meanwhile. */
	p = program_new(key, hash);
	if (!p)
		return NULL;
	*compiled = true;
	pthread_mutex_lock(&cache_lock);
	for (q = buckets[hash % CACHE_BUCKETS]; q; q = q->next)
		if (q->hash == hash && !memcmp(&q->key, key, sizeof(*key)))
			break;
	if (q) {
		q->refs++;
		pthread_mutex_unlock(&cache_lock);
		program_free(p);
		return q;
	}
	if (cached == CACHE_MAX)
		drop_oldest_locked();
	p->refs = 2;
	p->next = buckets[hash % CACHE_BUCKETS];
	buckets[hash % CACHE_BUCKETS] = p;
	if (newest)
		newest->newer = p;
	else
		oldest = p;
	newest = p;
	cached++;
	pthread_mutex_unlock(&cache_lock);
	return p;
}

void rbln_program_put(struct rbln_program *p)
{
	bool last;

	pthread_mutex_lock(&cache_lock);
	last = !--p->refs;
	pthread_mutex_unlock(&cache_lock);
	if (last)
		program_free(p);
}

uint32_t rbln_program_size(const struct rbln_program *p)
{
	return p->len;
}

void rbln_program_emit(const struct rbln_program *p, void *dst, const uint64_t args[RBLN_NARGS])
{
	uint32_t i;

	memcpy(dst, p->code, p->len);
	for (i = 0; i < p->nrelocs; i++) {
		const struct rbln_reloc *r = &p->relocs[i];
		uint8_t *at = (uint8_t *)dst + r->offset;

		if (r->arg == RBLN_ARG_SCALAR) {
			uint32_t v = args[r->arg];

			memcpy(at, &v, 4);
		} else {
			uint64_t v = args[r->arg] + r->addend;

			memcpy(at, &v, 8);
		}
	}
}
