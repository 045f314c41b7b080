// SPDX-License-Identifier: MIT
/*
 * rbln_drm_cmd.c - encoding the packets of rbln_isa.h
 *
 * The encoder checks what it can know (enums, room in the buffer); the
 * device checks the rest (addresses, alignment) and faults the job.
 */

#include <errno.h>
#include <string.h>

#include "rbln_drm.h"

void rbln_drm_cmd_init(struct rbln_drm_cmd *cmd, void *buf, uint32_t cap)
{
	cmd->buf = buf;
	cmd->cap = cap & ~7u;
	cmd->len = 0;
}

static int emit(struct rbln_drm_cmd *cmd, const void *pkt, uint32_t size)
{
	if (!cmd || !cmd->buf || cmd->cap - cmd->len < size)
		return cmd && cmd->buf ? -ENOSPC : -EINVAL;
	memcpy((char *)cmd->buf + cmd->len, pkt, size);
	cmd->len += size;
	return 0;
}

#define HEADER(op, dtype, sub, type) RBLN_PKT_HEADER(op, dtype, sub, sizeof(type) / 8)

int rbln_drm_cmd_nop(struct rbln_drm_cmd *cmd)
{
	struct rbln_pkt_nop p = { .header = HEADER(RBLN_OP_NOP, 0, 0, p) };

	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_dma_copy(struct rbln_drm_cmd *cmd, uint64_t dst, uint64_t src,
			  uint64_t bytes)
{
	struct rbln_pkt_dma_copy p = {
		.header = HEADER(RBLN_OP_DMA_COPY, 0, 0, p),
		.src = src, .dst = dst, .bytes = bytes,
	};

	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_dma_fill(struct rbln_drm_cmd *cmd, uint64_t dst, uint32_t pattern,
			  uint64_t bytes)
{
	struct rbln_pkt_dma_fill p = {
		.header = HEADER(RBLN_OP_DMA_FILL, 0, 0, p),
		.pattern = pattern, .dst = dst, .bytes = bytes,
	};

	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_wait(struct rbln_drm_cmd *cmd, uint64_t addr, uint64_t value)
{
	struct rbln_pkt_wait p = {
		.header = HEADER(RBLN_OP_WAIT, 0, 0, p),
		.addr = addr, .value = value,
	};

	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_unary(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
		       uint64_t dst, uint64_t src, uint64_t count)
{
	struct rbln_pkt_ew_unary p = {
		.header = HEADER(RBLN_OP_EW_UNARY, dtype, op, p),
		.src = src, .dst = dst, .count = count,
	};

	if (op > RBLN_UNARY_RELU || dtype >= RBLN_DTYPE_COUNT)
		return -EINVAL;
	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_binary(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t a, uint64_t b, uint64_t count)
{
	struct rbln_pkt_ew_binary p = {
		.header = HEADER(RBLN_OP_EW_BINARY, dtype, op, p),
		.a = a, .b = b, .dst = dst, .count = count,
	};

	if (op > RBLN_BINARY_MIN || dtype >= RBLN_DTYPE_COUNT)
		return -EINVAL;
	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_scalar(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t src, uint32_t scalar, uint64_t count)
{
	struct rbln_pkt_ew_scalar p = {
		.header = HEADER(RBLN_OP_EW_SCALAR, dtype, op, p),
		.scalar = scalar, .src = src, .dst = dst, .count = count,
	};

	if (op > RBLN_BINARY_RDIV || dtype >= RBLN_DTYPE_COUNT)
		return -EINVAL;
	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_cast(struct rbln_drm_cmd *cmd, uint32_t dst_dtype, uint32_t src_dtype,
		      uint64_t dst, uint64_t src, uint64_t count)
{
	struct rbln_pkt_cast p = {
		.header = HEADER(RBLN_OP_CAST, src_dtype, dst_dtype, p),
		.src = src, .dst = dst, .count = count,
	};

	if (dst_dtype >= RBLN_DTYPE_COUNT || src_dtype >= RBLN_DTYPE_COUNT)
		return -EINVAL;
	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_reduce(struct rbln_drm_cmd *cmd, uint32_t op, uint32_t dtype,
			uint64_t dst, uint64_t src, uint32_t rows, uint32_t cols)
{
	struct rbln_pkt_reduce p = {
		.header = HEADER(RBLN_OP_REDUCE, dtype, op, p),
		.src = src, .dst = dst, .rows = rows, .cols = cols,
	};

	if (op > RBLN_REDUCE_MAX || dtype >= RBLN_DTYPE_COUNT)
		return -EINVAL;
	return emit(cmd, &p, sizeof(p));
}

int rbln_drm_cmd_gemm(struct rbln_drm_cmd *cmd, const struct rbln_drm_gemm *g)
{
	struct rbln_pkt_gemm p;

	if (!g || g->in >= RBLN_DTYPE_COUNT || g->out >= RBLN_DTYPE_COUNT ||
	    g->flags & ~(RBLN_GEMM_TRANS_A | RBLN_GEMM_TRANS_B | RBLN_GEMM_ACCUMULATE))
		return -EINVAL;
	p = (struct rbln_pkt_gemm) {
		.header = HEADER(RBLN_OP_GEMM, g->in, g->out, p),
		.flags = g->flags, .a = g->a, .b = g->b, .c = g->c,
		.m = g->m, .n = g->n, .k = g->k, .lda = g->lda, .ldb = g->ldb, .ldc = g->ldc,
	};
	return emit(cmd, &p, sizeof(p));
}
