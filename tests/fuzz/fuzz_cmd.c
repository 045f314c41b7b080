// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_cmd.c - command buffers: valid packets on the pool's objects, long
 * ones, packets that must fault, malformed ones, and random mutations
 *
 * A valid packet reads any object it can reach and writes only objects
 * that are writable and not command buffers, so that valid jobs never
 * change one another's commands. Everything else the ISA allows is fair:
 * overlapping operands across packets, zero counts, every dtype and
 * operation, reads of read-only objects and of peers. WAITs are mostly
 * satisfied or canceled when they run, now and then never: a valid job may
 * time out. Some wait for a word the host keeps moving (op_wait_move()),
 * which keeps their job past its timeout, up to wait_timeout_ms.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

void fz_cmd_init(struct fz_cmd *c, struct fz_file *f, void *buf, uint32_t cap)
{
	rbln_drm_cmd_init(&c->enc, buf, cap);
	c->f = f;
	c->nhandles = 0;
	c->nunlisted = 0;
	c->vm_wait = 0;
	c->vm_hole = c->vm_hole_size = 0;
	c->fault_kinds = NULL;
	c->waits = false;
}

/*
 * A device object need not be on the job's list, nor a host object an
 * earlier job bound: mapped means reachable. Unlisted, it is not held by
 * the job, and closing its handle mid-job pulls it from under the device:
 * what the device must survive.
 */
static void use_maybe_unlisted(struct fz *fz, struct fz_cmd *c, const struct fz_bo *bo)
{
	unsigned int i;

	if ((bo->placement != RBLN_BO_DEVICE && !bo->bound) ||
	    c->nunlisted == FZ_MAX_UNLISTED || !fz_chance(&fz->rng, 25)) {
		fz_cmd_use(c, bo);
		return;
	}
	for (i = 0; i < c->nunlisted; i++)
		if (c->unlisted[i] == bo->serial)
			return;
	c->unlisted[c->nunlisted++] = bo->serial;
}

void fz_cmd_use(struct fz_cmd *c, const struct fz_bo *bo)
{
	unsigned int i;

	for (i = 0; i < c->nhandles; i++)
		if (c->handles[i] == bo->handle)
			return;
	if (c->nhandles < FZ_ARRAY_SIZE(c->handles))
		c->handles[c->nhandles++] = bo->handle;
}

static unsigned int dtype_size(uint32_t dtype)
{
	static const unsigned int size[RBLN_DTYPE_COUNT] = { 4, 2, 2, 4, 1 };

	return size[dtype];
}

static bool writable(const struct fz_bo *bo)
{
	return !(bo->flags & RBLN_BO_READ_ONLY) && !bo->cmd;
}

/*
 * An @align-aligned range of @bytes in a reachable object of the file, one
 * that may be written when @write, at times through a VM_BIND mapping: its
 * address, or 0 when none fits.
 */
static uint64_t region(struct fz *fz, struct fz_cmd *c, bool write, unsigned int align,
		       uint64_t bytes)
{
	struct fz_file *f = c->f;
	unsigned int tries;
	uint64_t va;

	if (f->nvmaps && fz_chance(&fz->rng, 30)) {
		va = fz_vm_region(fz, c, write, align, bytes);
		if (va)
			return va;
	}
	for (tries = 0; tries < 8 && f->nbos; tries++) {
		struct fz_bo *bo = &f->bos[fz_below(&fz->rng, f->nbos)];
		uint64_t slack;

		if (!fz_bo_reachable(fz, bo) || (write && !writable(bo)) || bo->size < bytes ||
		    (bo->flags & RBLN_BO_NO_VA))
			continue;
		slack = (bo->size - bytes) / align;
		use_maybe_unlisted(fz, c, bo);
		return bo->va + fz_below(&fz->rng, slack + 1) * align;
	}
	return 0;
}

/* Element counts: mostly small, some a few pages' worth. */
static uint64_t count_for(struct fz *fz, unsigned int size)
{
	switch (fz_below(&fz->rng, 8)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return (64 * 1024 + fz_below(&fz->rng, 64 * 1024)) / size;
	default:
		return 1 + fz_below(&fz->rng, 4096 / size);
	}
}

static uint32_t scalar_for(struct fz *fz, uint32_t dtype)
{
	static const uint32_t special[] = { 0, 1, 0xffffffffu, 0x80000000u, 0x7fffffffu };
	uint32_t v = fz_chance(&fz->rng, 30) ? special[fz_below(&fz->rng, 5)] :
		     (uint32_t)fz_next(&fz->rng);
	unsigned int bits = 8 * dtype_size(dtype);

	return bits < 32 ? v & ((1u << bits) - 1) : v;
}

static int emit_copy(struct fz *fz, struct fz_cmd *c)
{
	uint64_t bytes = 1 + fz_below(&fz->rng, fz_chance(&fz->rng, 20) ? 256 * 1024 : 8192);
	uint64_t src, dst;

	/* Ranges of one copy may not overlap: the source never is written. */
	src = region(fz, c, false, 1, bytes);
	dst = region(fz, c, true, 1, bytes);
	if (!src || !dst || (src < dst + bytes && dst < src + bytes))
		return -ENOENT;
	return rbln_drm_cmd_dma_copy(&c->enc, dst, src, bytes);
}

static int emit_fill(struct fz *fz, struct fz_cmd *c)
{
	uint64_t bytes = 4 * fz_below(&fz->rng, fz_chance(&fz->rng, 20) ? 65536 : 2048);
	uint64_t dst = region(fz, c, true, 4, bytes);

	if (!dst)
		return -ENOENT;
	return rbln_drm_cmd_dma_fill(&c->enc, dst, (uint32_t)fz_next(&fz->rng), bytes);
}

static int emit_elementwise(struct fz *fz, struct fz_cmd *c, uint32_t op)
{
	uint32_t dtype = fz_below(&fz->rng, RBLN_DTYPE_COUNT), out = dtype, sub;
	unsigned int size = dtype_size(dtype);
	uint64_t count = count_for(fz, size), a, b = 0, dst;

	if (op == RBLN_OP_CAST)
		out = fz_below(&fz->rng, RBLN_DTYPE_COUNT);
	a = region(fz, c, false, size, count * size);
	if (op == RBLN_OP_EW_BINARY)
		b = region(fz, c, false, size, count * size);
	dst = region(fz, c, true, dtype_size(out), count * dtype_size(out));
	if (!a || !dst || (op == RBLN_OP_EW_BINARY && !b))
		return -ENOENT;

	switch (op) {
	case RBLN_OP_EW_UNARY:
		sub = fz_below(&fz->rng, RBLN_UNARY_RELU + 1);
		return rbln_drm_cmd_unary(&c->enc, sub, dtype, dst, a, count);
	case RBLN_OP_EW_BINARY:
		sub = fz_below(&fz->rng, RBLN_BINARY_MIN + 1);
		return rbln_drm_cmd_binary(&c->enc, sub, dtype, dst, a, b, count);
	case RBLN_OP_EW_SCALAR:
		sub = fz_below(&fz->rng, RBLN_BINARY_RDIV + 1);
		return rbln_drm_cmd_scalar(&c->enc, sub, dtype, dst, a, scalar_for(fz, dtype),
					   count);
	default:
		return rbln_drm_cmd_cast(&c->enc, out, dtype, dst, a, count);
	}
}

static int emit_reduce(struct fz *fz, struct fz_cmd *c)
{
	uint32_t dtype = fz_below(&fz->rng, RBLN_DTYPE_COUNT);
	uint32_t rows = fz_below(&fz->rng, 64), cols = fz_below(&fz->rng, 512);
	unsigned int size = dtype_size(dtype);
	uint64_t src = region(fz, c, false, size, (uint64_t)rows * cols * size);
	uint64_t dst = region(fz, c, true, size, (uint64_t)rows * size);

	if (!src || !dst)
		return -ENOENT;
	return rbln_drm_cmd_reduce(&c->enc, fz_below(&fz->rng, RBLN_REDUCE_MAX + 1), dtype,
				   dst, src, rows, cols);
}

/* @dim: largest m, n and k. */
static int emit_gemm(struct fz *fz, struct fz_cmd *c, uint32_t dim)
{
	struct rbln_drm_gemm g = {
		.in = fz_below(&fz->rng, RBLN_DTYPE_COUNT),
		.out = fz_below(&fz->rng, RBLN_DTYPE_COUNT),
		.flags = fz_below(&fz->rng, 8),
		.m = fz_below(&fz->rng, dim + 1),
		.n = fz_below(&fz->rng, dim + 1),
		.k = fz_below(&fz->rng, dim + 1),
	};
	bool ta = g.flags & RBLN_GEMM_TRANS_A, tb = g.flags & RBLN_GEMM_TRANS_B;
	unsigned int in = dtype_size(g.in), out = dtype_size(g.out);

	g.lda = (ta ? g.m : g.k) + fz_below(&fz->rng, 3);
	g.ldb = (tb ? g.k : g.n) + fz_below(&fz->rng, 3);
	g.ldc = g.n + fz_below(&fz->rng, 3);
	g.a = region(fz, c, false, in, (uint64_t)(ta ? g.k : g.m) * g.lda * in);
	g.b = region(fz, c, false, in, (uint64_t)(tb ? g.n : g.k) * g.ldb * in);
	g.c = region(fz, c, true, out, (uint64_t)g.m * g.ldc * out);
	if (!g.a || !g.b || !g.c)
		return -ENOENT;
	return rbln_drm_cmd_gemm(&c->enc, &g);
}

/*
 * A WAIT: mostly for 0 (passes, or cancels on a word with bit 63), or on a
 * word of a mapped host object written here to satisfy or cancel it, or
 * left for the host to move (op_wait_move()); now and then for a value no
 * word reaches, which only the timeout ends. Other jobs may write the word
 * meanwhile: then anything goes, within the timeout.
 */
static int emit_wait(struct fz *fz, struct fz_cmd *c)
{
	unsigned int pick = fz_below(&fz->rng, 100), i;
	struct fz_file *f = c->f;
	uint64_t addr, value;

	if (!c->waits)
		return -ENOENT;
	if (pick < 15 && f->nbos) {
		struct fz_bo *bo = &f->bos[fz_below(&fz->rng, f->nbos)];
		uint64_t *word;

		if (!bo->cpu || !writable(bo) || bo->size < 8 || !fz_bo_reachable(fz, bo) ||
		    (bo->flags & RBLN_BO_NO_VA))
			return -ENOENT;
		i = fz_below(&fz->rng, bo->size / 8);
		word = (uint64_t *)bo->cpu + i;
		value = 1 + fz_below(&fz->rng, RBLN_WAIT_CANCEL - 1);
		if (fz_chance(&fz->rng, 30)) {
			/* Moved by the host from 0 until canceled, or its time is up. */
			value = RBLN_WAIT_CANCEL - 1;
			__atomic_store_n(word, 0, __ATOMIC_RELEASE);
			fz->moving[fz->nmoving % FZ_MAX_MOVING].serial = bo->serial;
			fz->moving[fz->nmoving % FZ_MAX_MOVING].off = 8 * i;
			fz->nmoving++;
		} else {
			__atomic_store_n(word, fz_chance(&fz->rng, 50) ? value :
					 RBLN_WAIT_CANCEL | fz_next(&fz->rng), __ATOMIC_RELEASE);
		}
		fz_cmd_use(c, bo);
		return rbln_drm_cmd_wait(&c->enc, bo->va + 8 * i, value);
	}
	addr = region(fz, c, false, 8, 8);
	if (!addr)
		return -ENOENT;
	if (pick < 18)
		value = RBLN_WAIT_CANCEL - 1;
	else
		value = fz_chance(&fz->rng, 20) ? RBLN_WAIT_CANCEL : 0;
	return rbln_drm_cmd_wait(&c->enc, addr, value);
}

/* One valid packet: 0, -ENOSPC when the buffer is full, -ENOENT when no object fits. */
int fz_cmd_valid_packet(struct fz *fz, struct fz_cmd *c)
{
	switch (fz_below(&fz->rng, 12)) {
	case 11:
		return emit_wait(fz, c);
	case 0:
		return rbln_drm_cmd_nop(&c->enc);
	case 1:
	case 2:
		return emit_copy(fz, c);
	case 3:
	case 4:
		return emit_fill(fz, c);
	case 5:
		return emit_elementwise(fz, c, RBLN_OP_EW_UNARY);
	case 6:
		return emit_elementwise(fz, c, RBLN_OP_EW_BINARY);
	case 7:
		return emit_elementwise(fz, c, RBLN_OP_EW_SCALAR);
	case 8:
		return emit_elementwise(fz, c, RBLN_OP_CAST);
	case 9:
		return emit_reduce(fz, c);
	default:
		return emit_gemm(fz, c, 40);
	}
}

/*
 * One GEMM block with an inner dimension as long as the file's objects
 * allow: far past any timeout, so the device must stop it mid-packet.
 */
static int emit_heavy_gemm(struct fz *fz, struct fz_cmd *c)
{
	struct rbln_drm_gemm g = { .in = RBLN_DTYPE_F32, .out = RBLN_DTYPE_F32, .m = 32, .n = 32 };
	uint64_t largest = 0;
	unsigned int i;

	for (i = 0; i < c->f->nbos; i++)
		if (fz_bo_reachable(fz, &c->f->bos[i]) && !(c->f->bos[i].flags & RBLN_BO_NO_VA) &&
		    c->f->bos[i].size > largest)
			largest = c->f->bos[i].size;
	/* A and B then fit in any object of half that size. */
	g.k = largest / (2 * 32 * 4);
	if (!g.k)
		return -ENOENT;
	g.lda = g.k;
	g.ldb = g.n;
	g.ldc = g.n;
	g.a = region(fz, c, false, 4, (uint64_t)g.m * g.k * 4);
	g.b = region(fz, c, false, 4, (uint64_t)g.k * g.n * 4);
	g.c = region(fz, c, true, 4, (uint64_t)g.m * g.n * 4);
	if (!g.a || !g.b || !g.c)
		return -ENOENT;
	return rbln_drm_cmd_gemm(&c->enc, &g);
}

/*
 * A job that keeps its ring busy for a good fraction of the scheduler's
 * timeout, or past it: many large fills, a big GEMM, or one with a huge
 * inner dimension, so that other events land while it runs.
 */
int fz_cmd_long(struct fz *fz, struct fz_cmd *c)
{
	unsigned int i, n;
	uint64_t bytes, dst;
	int ret = 0;

	if (fz_chance(&fz->rng, 10) && !emit_heavy_gemm(fz, c))
		return 0;
	if (fz_chance(&fz->rng, 30)) {
		for (i = 0; i < 4 && !ret; i++)
			ret = emit_gemm(fz, c, 96 + fz_below(&fz->rng, 96));
		return ret;
	}
	n = 16 + fz_below(&fz->rng, 112);
	for (i = 0; i < n && !ret; i++) {
		bytes = (256 * 1024 + fz_below(&fz->rng, 768 * 1024)) & ~3ull;
		dst = region(fz, c, true, 4, bytes);
		if (!dst)
			dst = region(fz, c, true, 4, bytes = 16 * 1024);
		ret = dst ? rbln_drm_cmd_dma_fill(&c->enc, dst, i, bytes) : -ENOENT;
	}
	return ret;
}

static int emit_raw(struct fz_cmd *c, const void *pkt, uint32_t size)
{
	if (c->enc.cap - c->enc.len < size)
		return -ENOSPC;
	memcpy((uint8_t *)c->enc.buf + c->enc.len, pkt, size);
	c->enc.len += size;
	return 0;
}

/*
 * A well-formed packet that touches what the file cannot: an address no
 * mapping of it covers, a range running into an object's guard page, a
 * write to a read-only object, or the memory of a removed exporter. Its
 * job must fail.
 */
int fz_cmd_faulting_packet(struct fz *fz, struct fz_cmd *c, char *why, size_t len)
{
	struct fz_file *f = c->f;
	uint64_t bad = fz_bad_va(fz, f, true) & ~7ull, good;
	struct fz_bo *bo;
	unsigned int i;

	/* Every address it picks reaches no page, or a read-only one (case 3). */
	c->fault_kinds = "unmapped";
	/* A peer whose exporter went: the identity must not reach a newcomer. */
	for (i = 0; i < f->nbos; i++) {
		bo = &f->bos[i];
		if (bo->mem_dev < 0 || fz_bo_reachable(fz, bo) || (bo->flags & RBLN_BO_NO_VA) ||
		    !fz_chance(&fz->rng, 50))
			continue;
		good = region(fz, c, true, 1, 64);
		if (!good)
			break;
		fz_cmd_use(c, bo);
		snprintf(why, len, "read of %#llx, a peer of removed %s",
			 (unsigned long long)bo->va, fz->devs[bo->mem_dev].name);
		return rbln_drm_cmd_dma_copy(&c->enc, good, bo->va, 64);
	}

	switch (fz_below(&fz->rng, 6)) {
	case 0:
		snprintf(why, len, "DMA_FILL at %#llx", (unsigned long long)bad);
		return rbln_drm_cmd_dma_fill(&c->enc, bad, 0xdead, 8 + 8 * fz_below(&fz->rng, 64));
	case 1:
		good = region(fz, c, true, 1, 64);
		if (!good)
			break;
		snprintf(why, len, "DMA_COPY from %#llx", (unsigned long long)bad);
		return rbln_drm_cmd_dma_copy(&c->enc, good, bad, 64);
	case 2:
		good = region(fz, c, false, 4, 256);
		if (!good)
			break;
		snprintf(why, len, "EW_UNARY into %#llx", (unsigned long long)bad);
		return rbln_drm_cmd_unary(&c->enc, RBLN_UNARY_NEG, RBLN_DTYPE_F32, bad, good, 64);
	case 3:
		for (i = 0; i < f->nbos; i++) {
			bo = &f->bos[i];
			if ((bo->flags & RBLN_BO_READ_ONLY) && !(bo->flags & RBLN_BO_NO_VA) &&
			    fz_bo_reachable(fz, bo)) {
				fz_cmd_use(c, bo);
				c->fault_kinds = "write-protected";
				snprintf(why, len, "DMA_FILL of read-only %#llx",
					 (unsigned long long)bo->va);
				return rbln_drm_cmd_dma_fill(&c->enc, bo->va, 1, 4);
			}
		}
		break;
	case 4:
		bo = fz_pick_bo(fz, f);
		if (!bo || !writable(bo) || !fz_bo_reachable(fz, bo) || (bo->flags & RBLN_BO_NO_VA))
			break;
		fz_cmd_use(c, bo);
		snprintf(why, len, "DMA_FILL across the end of %#llx+%#llx",
			 (unsigned long long)bo->va, (unsigned long long)bo->size);
		return rbln_drm_cmd_dma_fill(&c->enc, bo->va + bo->size - 8, 2, 16);
	default:
		break;
	}
	snprintf(why, len, "DMA_FILL at %#llx", (unsigned long long)bad);
	return rbln_drm_cmd_dma_fill(&c->enc, bad, 0xbad, 4);
}

/* A packet the command processor must refuse: its job must fail. */
int fz_cmd_malformed_packet(struct fz *fz, struct fz_cmd *c, char *why, size_t len)
{
	struct fz_rng *r = &fz->rng;
	uint64_t p[7] = { 0 };
	uint32_t *w = (uint32_t *)p, size = 32;

	c->fault_kinds = "malformed illegal-opcode";
	switch (fz_below(r, 10)) {
	case 0: {
		static const uint8_t ops[] = { 0x04, 0x0f, 0x15, 0x1f, 0x21, 0x80, 0xff };
		uint8_t op = ops[fz_below(r, sizeof(ops))];

		size = 8 * (1 + fz_below(r, 6));
		w[0] = RBLN_PKT_HEADER(op, 0, 0, size / 8);
		snprintf(why, len, "unknown opcode %#x", op);
		break;
	}
	case 1: {
		static const uint16_t lens[] = { 0, 1, 2, 4, 0xffff };

		w[0] = RBLN_PKT_HEADER(RBLN_OP_DMA_FILL, 0, 0, lens[fz_below(r, 5)]);
		snprintf(why, len, "DMA_FILL of length %u", RBLN_PKT_LEN8(w[0]));
		break;
	}
	case 2:
		size = 8;
		w[0] = RBLN_PKT_HEADER(RBLN_OP_NOP, 0, 0, 1);
		w[1] = 1 + fz_below(r, 0xffffffffu);
		snprintf(why, len, "NOP with reserved %#x", w[1]);
		break;
	case 3:
		w[0] = RBLN_PKT_HEADER(RBLN_OP_EW_UNARY, RBLN_DTYPE_COUNT + fz_below(r, 11), 0, 4);
		snprintf(why, len, "EW_UNARY of dtype %u", RBLN_PKT_DTYPE(w[0]));
		break;
	case 4:
		w[0] = RBLN_PKT_HEADER(RBLN_OP_EW_UNARY, 0, RBLN_UNARY_RELU + 1 + fz_below(r, 13), 4);
		snprintf(why, len, "EW_UNARY operation %u", RBLN_PKT_SUB(w[0]));
		break;
	case 5:
		size = 40;
		w[0] = RBLN_PKT_HEADER(RBLN_OP_EW_BINARY, 0, RBLN_BINARY_RDIV, 5);
		snprintf(why, len, "EW_BINARY with RDIV");
		break;
	case 6:
		w[0] = RBLN_PKT_HEADER(RBLN_OP_DMA_COPY, 1 + fz_below(r, 15), 0, 4);
		snprintf(why, len, "DMA_COPY with dtype %u", RBLN_PKT_DTYPE(w[0]));
		break;
	case 7:
		size = 56;
		w[0] = RBLN_PKT_HEADER(RBLN_OP_GEMM, 0, 0, 7);
		w[1] = 8u << fz_below(r, 24);
		snprintf(why, len, "GEMM with flags %#x", w[1]);
		break;
	case 8:
		/* A WAIT that would pass at once, were it well formed. */
		size = 24;
		w[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 0, 3);
		switch (fz_below(r, 4)) {
		case 0:
			p[1] = 8 * fz_next(r) + 1 + fz_below(r, 7);
			snprintf(why, len, "WAIT at unaligned %#llx", (unsigned long long)p[1]);
			break;
		case 1:
			w[1] = 1 + fz_below(r, 0xffffffffu);
			snprintf(why, len, "WAIT with reserved %#x", w[1]);
			break;
		case 2:
			w[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 1 + fz_below(r, 15), fz_below(r, 16), 3);
			snprintf(why, len, "WAIT with dtype %u", RBLN_PKT_DTYPE(w[0]));
			break;
		default:
			w[0] = RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 0, fz_chance(r, 50) ? 2 : 4);
			size = 32;
			snprintf(why, len, "WAIT of length %u", RBLN_PKT_LEN8(w[0]));
			break;
		}
		break;
	default:
		size = 24;
		w[0] = RBLN_PKT_HEADER(RBLN_OP_EW_SCALAR, RBLN_DTYPE_I8, 0, 4);
		w[1] = 0x100 + fz_below(r, 0xffffff00u);
		snprintf(why, len, "EW_SCALAR i8 scalar %#x, and cut short", w[1]);
		break;
	}
	return emit_raw(c, p, size);
}

/* Interesting values for an address or a count. */
static uint64_t wild_value(struct fz *fz, struct fz_file *f)
{
	switch (fz_below(&fz->rng, 6)) {
	case 0:
		return 0;
	case 1:
		return ~0ull - fz_below(&fz->rng, 16);
	case 2:
		return 1ull << fz_below(&fz->rng, 64);
	case 3:
		return fz_next(&fz->rng);
	default:
		return fz_bad_va(fz, f, false);
	}
}

/*
 * Flips bits and plants wild values in what is encoded: lengths, opcodes,
 * addresses, counts. The device may do anything with it but crash.
 */
void fz_cmd_mutate(struct fz *fz, struct fz_cmd *c)
{
	uint32_t words = c->enc.len / 8, n = 1 + fz_below(&fz->rng, 4), i, at;
	uint64_t *q = c->enc.buf;

	for (i = 0; i < n && words; i++) {
		at = fz_below(&fz->rng, words);
		switch (fz_below(&fz->rng, 4)) {
		case 0:
			q[at] ^= 1ull << fz_below(&fz->rng, 64);
			break;
		case 1:
			q[at] = (q[at] & ~0xffffull) | fz_below(&fz->rng, 0x100);
			break;
		default:
			q[at] = wild_value(fz, c->f);
			break;
		}
	}
}

/*
 * The host moves the word of a WAIT that waits for it, as a collective's
 * progress thread does: one more, now and then a cancel. The word's object
 * is looked up again, still mapped and writable, as the job may be long
 * gone and its object closed or turned into a command buffer.
 */
void op_wait_move(struct fz *fz)
{
	unsigned int n = fz->nmoving < FZ_MAX_MOVING ? fz->nmoving : FZ_MAX_MOVING;
	unsigned int k, i, b;
	uint64_t serial, v;
	uint8_t *word;

	if (!n)
		return;
	k = fz_below(&fz->rng, n);
	serial = fz->moving[k].serial;
	for (i = 0; i < FZ_MAX_FILES; i++) {
		struct fz_file *f = &fz->files[i];

		if (!f->used)
			continue;
		for (b = 0; b < f->nbos; b++) {
			struct fz_bo *bo = &f->bos[b];

			if (bo->serial != serial)
				continue;
			if (!bo->cpu || !writable(bo) || fz->moving[k].off + 8 > bo->size)
				return;
			word = (uint8_t *)bo->cpu + fz->moving[k].off;
			if (!fz_guarded_copy(&v, word, sizeof(v)))
				return;
			v = fz_chance(&fz->rng, 5) ? RBLN_WAIT_CANCEL : (v + 1) & ~RBLN_WAIT_CANCEL;
			fz_doing(fz, "move a WAIT's word %p to %#llx", word, (unsigned long long)v);
			fz_guarded_copy(word, &v, sizeof(v));
			return;
		}
	}
}
