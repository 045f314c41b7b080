// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_exec.c - decoding and executing the packets of a command buffer
 *
 * Every packet is checked in full before it runs (rbln_isa.h). Arithmetic
 * works on bounded chunks: operands are gathered through the MMU into the
 * ring's scratch buffers, the ALU runs between kernel_fpu_begin() and
 * kernel_fpu_end() (preemption is off there, so each stretch is short), and
 * results are scattered back. A reset or a removal is honoured at every
 * packet and between chunks and tiles: no packet runs for long unchecked.
 * WAIT polls its word with a backoff, sleeping between reads, and honours
 * them at every poll.
 */

#include "rbln_emu_internal.h"
#include "rbln_emu_alu.h"

#define GEMM_TM		32
#define GEMM_TN		32
#define GEMM_TK		64

/* The largest element count an operand may have: its bytes fit in 48 bits. */
#define MAX_BYTES	BIT_ULL(48)

/*
 * WAIT's sleep between two reads of its word, in microseconds: from the
 * first, doubling while the word stays the same, back to the first when it
 * changes (a host counting up is likely close).
 */
#define WAIT_POLL_MIN_US	4
#define WAIT_POLL_MAX_US	128

struct rbln_emu_job {
	struct rbln_emu_ring *ring;
	struct rbln_emu_ctx *ctx;
};

/* Every stretch of element or tile arithmetic sits in one of these. */
static void rbln_emu_fpu_begin(void)
{
	kernel_fpu_begin();
	rbln_alu_begin();
}

/* Between two bounded steps of work: give way, and stop when told to. */
static int rbln_emu_check_stop(struct rbln_emu_job *job)
{
	cond_resched();
	return rbln_emu_ring_stopped(job->ring) ? RBLN_EMU_ABORTED : 0;
}

/* @count elements of @dtype at @va: aligned and of a sane size, or malformed. */
static int rbln_emu_check_operand(u64 va, u64 count, u32 dtype)
{
	unsigned int size = rbln_alu_dtype_size(dtype);

	if (!size || va % size || count > MAX_BYTES / size)
		return RBLN_FAULT_MALFORMED;
	return 0;
}

static int rbln_emu_dma_fault_injected(struct rbln_emu_job *job, u64 va)
{
	struct rbln_emu_dev *edev = job->ring->edev;

	if (!(atomic_fetch_andnot(RBLN_INJECT_DMA_ERROR, &edev->inject) & RBLN_INJECT_DMA_ERROR))
		return 0;
	job->ctx->fault_addr = va;
	return RBLN_FAULT_DMA;
}

static int rbln_emu_dma_copy(struct rbln_emu_job *job, const struct rbln_pkt_dma_copy *p)
{
	if (p->reserved || p->bytes > MAX_BYTES)
		return RBLN_FAULT_MALFORMED;
	return rbln_emu_dma_fault_injected(job, p->src) ?:
	       rbln_emu_copy(job->ctx, p->dst, p->src, p->bytes);
}

static int rbln_emu_dma_fill(struct rbln_emu_job *job, const struct rbln_pkt_dma_fill *p)
{
	if (p->dst % 4 || p->bytes % 4 || p->bytes > MAX_BYTES)
		return RBLN_FAULT_MALFORMED;
	return rbln_emu_dma_fault_injected(job, p->dst) ?:
	       rbln_emu_fill(job->ctx, p->dst, p->pattern, p->bytes);
}

/**
 * rbln_emu_wait() - run a WAIT packet
 * @job: the job
 * @p: the packet
 *
 * Reads the word through the MMU at every poll, so a mapping removed
 * meanwhile faults at the next read, and sleeps TASK_IDLE between polls: a
 * waiting ring costs no CPU, and holds no access section while it sleeps.
 * The first time the word does not satisfy it, the interrupt for entries
 * completed before is raised: the host may wait for them before it writes.
 * Each later read that finds the word changed is counted in the ring's
 * WAIT_SEEN: the driver keeps a job whose WAIT sees progress past its
 * timeout.
 *
 * Return: 0 once satisfied, RBLN_EMU_CANCELED, RBLN_EMU_ABORTED on reset
 * or removal, or the RBLN_FAULT_* of a bad packet or of the read.
 */
static int rbln_emu_wait(struct rbln_emu_job *job, const struct rbln_pkt_wait *p)
{
	u64 want = p->value & ~RBLN_WAIT_CANCEL, word, last = 0;
	unsigned long delay = 0;
	int ret;

	if (p->reserved || p->addr % sizeof(u64))
		return RBLN_FAULT_MALFORMED;
	for (;;) {
		ret = rbln_emu_read_u64(job->ctx, p->addr, &word);
		if (ret)
			return ret;
		if (word & RBLN_WAIT_CANCEL)
			return RBLN_EMU_CANCELED;
		if (word >= want)
			return 0;
		if (!delay) {
			rbln_emu_ring_flush_irq(job->ring);
			delay = WAIT_POLL_MIN_US;
		} else if (word != last) {
			rbln_emu_ring_wait_seen(job->ring);
			delay = WAIT_POLL_MIN_US;
		} else {
			delay = min(2 * delay, WAIT_POLL_MAX_US);
		}
		last = word;
		usleep_idle_range(delay, delay + delay / 2);
		ret = rbln_emu_check_stop(job);
		if (ret)
			return ret;
	}
}

/* The element-wise family: dst[i] = f(a[i], b[i]); see rbln_emu_elementwise(). */
static void rbln_emu_alu_elementwise(u32 header, u32 scalar, const void *a, const void *b,
				     void *dst, u32 n)
{
	u32 op = RBLN_PKT_OP(header), dtype = RBLN_PKT_DTYPE(header), sub = RBLN_PKT_SUB(header);

	rbln_emu_fpu_begin();
	switch (op) {
	case RBLN_OP_EW_UNARY:
		rbln_alu_unary(sub, dtype, a, dst, n);
		break;
	case RBLN_OP_EW_BINARY:
		rbln_alu_binary(sub, dtype, a, b, dst, n);
		break;
	case RBLN_OP_EW_SCALAR:
		rbln_alu_scalar(sub, dtype, a, scalar, dst, n);
		break;
	default:
		rbln_alu_cast(dtype, sub, a, dst, n);
		break;
	}
	kernel_fpu_end();
}

static bool rbln_emu_overlap(const struct rbln_emu_span *x, const struct rbln_emu_span *y)
{
	return x->va < y->va + y->len && y->va < x->va + x->len;
}

/*
 * One chunk of an element-wise packet: @span holds its operands (a, b,
 * dst), @count elements of @in and @out bytes. It runs in device memory
 * when the operands allow, for as many elements as their pages hold
 * (returned in *@count), and through the ring's buffers otherwise. The
 * result must not depend on the way, so an output overlapping an input
 * qualifies only when they are the same elements, which the ALU allows.
 */
static int rbln_emu_elementwise_chunk(struct rbln_emu_job *job, u32 header, u32 scalar,
				      struct rbln_emu_span *span, unsigned int in,
				      unsigned int out, u64 *count)
{
	unsigned int n = RBLN_PKT_OP(header) == RBLN_OP_EW_BINARY ? 3 : 2, i;
	void **buf = job->ring->buf;
	u64 done = *count;
	int ret = 0;

	for (i = 0; i < n - 1; i++)
		if (rbln_emu_overlap(&span[i], &span[n - 1]) &&
		    (span[i].va != span[n - 1].va || in != out))
			ret = RBLN_EMU_NOT_IN_PLACE;
	ret = ret ?: rbln_emu_map(job->ctx, span, n);
	if (!ret) {
		for (i = 0; i < n; i++)
			done = min(done, span[i].run / (i == n - 1 ? out : in));
		rbln_emu_alu_elementwise(header, scalar, span[0].mem,
					 n == 3 ? span[1].mem : NULL, span[n - 1].mem, done);
		rbln_emu_unmap(job->ctx);
		*count = done;
		return 0;
	}
	if (ret != RBLN_EMU_NOT_IN_PLACE)
		return ret;

	for (ret = 0, i = 0; i < n - 1 && !ret; i++)
		ret = rbln_emu_read(job->ctx, span[i].va, buf[i], done * in);
	if (ret)
		return ret;
	rbln_emu_alu_elementwise(header, scalar, buf[0], buf[1], buf[2], done);
	return rbln_emu_write(job->ctx, span[n - 1].va, buf[2], done * out);
}

/*
 * The element-wise family: dst[i] = f(a[i], b[i]) chunk by chunk; @b is
 * unused (0) for unary, scalar and cast operations.
 */
static int rbln_emu_elementwise(struct rbln_emu_job *job, u32 header, u32 scalar,
				u64 a, u64 b, u64 dst, u64 count)
{
	u32 op = RBLN_PKT_OP(header), dtype = RBLN_PKT_DTYPE(header);
	u32 out_dtype = op == RBLN_OP_CAST ? RBLN_PKT_SUB(header) : dtype;
	unsigned int in = rbln_alu_dtype_size(dtype), out = rbln_alu_dtype_size(out_dtype);
	struct rbln_emu_span span[3] = {};
	u64 done, chunk;
	int ret;

	ret = rbln_emu_check_operand(a, count, dtype) ?:
	      rbln_emu_check_operand(dst, count, out_dtype);
	if (!ret && op == RBLN_OP_EW_BINARY)
		ret = rbln_emu_check_operand(b, count, dtype);
	if (ret)
		return ret;

	for (done = 0; done < count; done += chunk) {
		struct rbln_emu_span *d = &span[op == RBLN_OP_EW_BINARY ? 2 : 1];

		chunk = min_t(u64, count - done, RBLN_EMU_BUF_BYTES / max(in, out));
		span[0] = (struct rbln_emu_span){ .va = a + done * in, .len = chunk * in };
		span[1] = (struct rbln_emu_span){ .va = b + done * in, .len = chunk * in };
		*d = (struct rbln_emu_span){ .va = dst + done * out, .len = chunk * out,
					     .write = true };
		ret = rbln_emu_elementwise_chunk(job, header, scalar, span, in, out, &chunk) ?:
		      rbln_emu_check_stop(job);
		if (ret)
			return ret;
	}
	return 0;
}

static int rbln_emu_reduce(struct rbln_emu_job *job, const struct rbln_pkt_reduce *p)
{
	u32 dtype = RBLN_PKT_DTYPE(p->header), op = RBLN_PKT_SUB(p->header);
	unsigned int size = rbln_alu_dtype_size(dtype);
	u64 rows = p->rows, cols = p->cols, r, done, chunk;
	struct rbln_alu_acc acc;
	void **buf = job->ring->buf;
	int ret;

	if (p->reserved || op > RBLN_REDUCE_MAX)
		return RBLN_FAULT_MALFORMED;
	ret = rbln_emu_check_operand(p->src, rows * cols, dtype) ?:
	      rbln_emu_check_operand(p->dst, rows, dtype);
	if (ret)
		return ret;

	for (r = 0; r < rows; r++) {
		kernel_fpu_begin();
		rbln_alu_reduce_init(op, dtype, &acc);
		kernel_fpu_end();
		for (done = 0; done < cols; done += chunk) {
			chunk = min_t(u64, cols - done, RBLN_EMU_BUF_BYTES / size);
			ret = rbln_emu_read(job->ctx, p->src + (r * cols + done) * size, buf[0],
					    chunk * size);
			if (ret)
				return ret;
			rbln_emu_fpu_begin();
			rbln_alu_reduce_step(op, dtype, &acc, buf[0], chunk);
			kernel_fpu_end();
			ret = rbln_emu_check_stop(job);
			if (ret)
				return ret;
		}
		kernel_fpu_begin();
		rbln_alu_reduce_finish(op, dtype, &acc, buf[2]);
		kernel_fpu_end();
		ret = rbln_emu_write(job->ctx, p->dst + r * size, buf[2], size) ?:
		      rbln_emu_check_stop(job);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Gathers the @rows x @cols block at (@r0, @c0) of a logical row-major
 * matrix into @tile (row stride @cols). The matrix is stored at @base with
 * leading dimension @ld, transposed when @trans: element (r, c) is then at
 * (c, r) of the storage.
 */
static int rbln_emu_gather(struct rbln_emu_job *job, void *tile, u64 base, u32 ld, bool trans,
			   u32 r0, u32 c0, u32 rows, u32 cols, unsigned int size)
{
	u8 line[GEMM_TK * 4];
	u32 i, j;
	int ret;

	if (!trans) {
		for (i = 0; i < rows; i++) {
			ret = rbln_emu_read(job->ctx, base + ((u64)(r0 + i) * ld + c0) * size,
					    tile + (u64)i * cols * size, (u64)cols * size);
			if (ret)
				return ret;
		}
		return 0;
	}
	/* Stored rows are the tile's columns: read each, place it across. */
	for (j = 0; j < cols; j++) {
		ret = rbln_emu_read(job->ctx, base + ((u64)(c0 + j) * ld + r0) * size, line,
				    (u64)rows * size);
		if (ret)
			return ret;
		for (i = 0; i < rows; i++)
			memcpy(tile + ((u64)i * cols + j) * size, line + (u64)i * size, size);
	}
	return 0;
}

static int rbln_emu_gemm_block(struct rbln_emu_job *job, const struct rbln_pkt_gemm *p,
			       u32 i0, u32 j0, u32 tm, u32 tn)
{
	u32 in = RBLN_PKT_DTYPE(p->header), out = RBLN_PKT_SUB(p->header);
	unsigned int in_size = rbln_alu_dtype_size(in), out_size = rbln_alu_dtype_size(out);
	void *a = job->ring->buf[0], *b = job->ring->buf[1], *acc = job->ring->buf[2];
	u32 k0, tk, i;
	int ret;

	if (p->flags & RBLN_GEMM_ACCUMULATE) {
		ret = rbln_emu_gather(job, a, p->c, p->ldc, false, i0, j0, tm, tn, out_size);
		if (ret)
			return ret;
		kernel_fpu_begin();
		rbln_alu_gemm_load(in, out, a, acc, tm * tn);
		kernel_fpu_end();
	} else {
		/* All-zero bits are 0.0f and 0. */
		memset(acc, 0, (size_t)tm * tn * 4);
	}

	for (k0 = 0; k0 < p->k; k0 += tk) {
		tk = min_t(u32, p->k - k0, GEMM_TK);
		ret = rbln_emu_gather(job, a, p->a, p->lda, p->flags & RBLN_GEMM_TRANS_A,
				      i0, k0, tm, tk, in_size) ?:
		      rbln_emu_gather(job, b, p->b, p->ldb, p->flags & RBLN_GEMM_TRANS_B,
				      k0, j0, tk, tn, in_size);
		if (ret)
			return ret;
		rbln_emu_fpu_begin();
		rbln_alu_gemm_tile(in, a, b, acc, tm, tn, tk);
		kernel_fpu_end();
		ret = rbln_emu_check_stop(job);
		if (ret)
			return ret;
	}

	kernel_fpu_begin();
	rbln_alu_gemm_store(in, out, acc, a, tm * tn);
	kernel_fpu_end();
	for (i = 0; i < tm; i++) {
		ret = rbln_emu_write(job->ctx, p->c + ((u64)(i0 + i) * p->ldc + j0) * out_size,
				     a + (u64)i * tn * out_size, (u64)tn * out_size);
		if (ret)
			return ret;
	}
	return 0;
}

static int rbln_emu_gemm(struct rbln_emu_job *job, const struct rbln_pkt_gemm *p)
{
	u32 in = RBLN_PKT_DTYPE(p->header), out = RBLN_PKT_SUB(p->header);
	bool ta = p->flags & RBLN_GEMM_TRANS_A, tb = p->flags & RBLN_GEMM_TRANS_B;
	u32 i0, j0;
	int ret;

	if (p->flags & ~(RBLN_GEMM_TRANS_A | RBLN_GEMM_TRANS_B | RBLN_GEMM_ACCUMULATE) ||
	    out >= RBLN_DTYPE_COUNT ||
	    p->lda < (ta ? p->m : p->k) || p->ldb < (tb ? p->k : p->n) || p->ldc < p->n)
		return RBLN_FAULT_MALFORMED;
	if (!p->m || !p->n)
		return 0;
	/* Whole extents of the stored matrices, for alignment and size. */
	ret = rbln_emu_check_operand(p->a, (u64)(ta ? p->k : p->m) * p->lda, in) ?:
	      rbln_emu_check_operand(p->b, (u64)(tb ? p->n : p->k) * p->ldb, in) ?:
	      rbln_emu_check_operand(p->c, (u64)p->m * p->ldc, out);
	if (ret)
		return ret;

	for (i0 = 0; i0 < p->m; i0 += GEMM_TM) {
		for (j0 = 0; j0 < p->n; j0 += GEMM_TN) {
			ret = rbln_emu_gemm_block(job, p, i0, j0, min_t(u32, p->m - i0, GEMM_TM),
						  min_t(u32, p->n - j0, GEMM_TN)) ?:
			      rbln_emu_check_stop(job);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* The length in bytes each opcode's packet must have, 0 for unknown. */
static unsigned int rbln_emu_packet_size(u32 op)
{
	switch (op) {
	case RBLN_OP_NOP:
		return sizeof(struct rbln_pkt_nop);
	case RBLN_OP_DMA_COPY:
		return sizeof(struct rbln_pkt_dma_copy);
	case RBLN_OP_DMA_FILL:
		return sizeof(struct rbln_pkt_dma_fill);
	case RBLN_OP_WAIT:
		return sizeof(struct rbln_pkt_wait);
	case RBLN_OP_EW_UNARY:
		return sizeof(struct rbln_pkt_ew_unary);
	case RBLN_OP_EW_BINARY:
		return sizeof(struct rbln_pkt_ew_binary);
	case RBLN_OP_EW_SCALAR:
		return sizeof(struct rbln_pkt_ew_scalar);
	case RBLN_OP_CAST:
		return sizeof(struct rbln_pkt_cast);
	case RBLN_OP_REDUCE:
		return sizeof(struct rbln_pkt_reduce);
	case RBLN_OP_GEMM:
		return sizeof(struct rbln_pkt_gemm);
	default:
		return 0;
	}
}

/* Dtype and sub-operation fields each opcode allows. */
static bool rbln_emu_fields_valid(u32 header)
{
	u32 op = RBLN_PKT_OP(header), dtype = RBLN_PKT_DTYPE(header), sub = RBLN_PKT_SUB(header);

	switch (op) {
	case RBLN_OP_NOP:
	case RBLN_OP_DMA_COPY:
	case RBLN_OP_DMA_FILL:
	case RBLN_OP_WAIT:
		return !dtype && !sub;
	case RBLN_OP_EW_UNARY:
		return dtype < RBLN_DTYPE_COUNT && sub <= RBLN_UNARY_RELU;
	case RBLN_OP_EW_BINARY:
		return dtype < RBLN_DTYPE_COUNT && sub <= RBLN_BINARY_MIN;
	case RBLN_OP_EW_SCALAR:
		return dtype < RBLN_DTYPE_COUNT && sub <= RBLN_BINARY_RDIV;
	case RBLN_OP_CAST:
	case RBLN_OP_GEMM:
		return dtype < RBLN_DTYPE_COUNT && sub < RBLN_DTYPE_COUNT;
	default:
		return dtype < RBLN_DTYPE_COUNT;
	}
}

static int rbln_emu_packet(struct rbln_emu_job *job, const void *pkt)
{
	u32 header = *(const u32 *)pkt;

	switch (RBLN_PKT_OP(header)) {
	case RBLN_OP_NOP: {
		const struct rbln_pkt_nop *p = pkt;

		return p->reserved ? RBLN_FAULT_MALFORMED : 0;
	}
	case RBLN_OP_DMA_COPY:
		return rbln_emu_dma_copy(job, pkt);
	case RBLN_OP_DMA_FILL:
		return rbln_emu_dma_fill(job, pkt);
	case RBLN_OP_WAIT:
		return rbln_emu_wait(job, pkt);
	case RBLN_OP_EW_UNARY:
	case RBLN_OP_CAST: {
		const struct rbln_pkt_ew_unary *p = pkt;

		if (p->reserved)
			return RBLN_FAULT_MALFORMED;
		return rbln_emu_elementwise(job, header, 0, p->src, 0, p->dst, p->count);
	}
	case RBLN_OP_EW_BINARY: {
		const struct rbln_pkt_ew_binary *p = pkt;

		if (p->reserved)
			return RBLN_FAULT_MALFORMED;
		return rbln_emu_elementwise(job, header, 0, p->a, p->b, p->dst, p->count);
	}
	case RBLN_OP_EW_SCALAR: {
		const struct rbln_pkt_ew_scalar *p = pkt;
		unsigned int bits = 8 * rbln_alu_dtype_size(RBLN_PKT_DTYPE(header));

		if (bits < 32 && p->scalar >> bits)
			return RBLN_FAULT_MALFORMED;
		return rbln_emu_elementwise(job, header, p->scalar, p->src, 0, p->dst, p->count);
	}
	case RBLN_OP_REDUCE:
		return rbln_emu_reduce(job, pkt);
	default:
		return rbln_emu_gemm(job, pkt);
	}
}

/**
 * rbln_emu_exec() - run the packets of a command buffer
 * @ctx: the submitting context's memory, on the ring it runs on (for its
 *	scratch buffers and its resets)
 * @cmd_va: the command buffer's device address, for fault reports
 * @cmd: the command buffer, copied from device memory
 * @size: its size, a multiple of 8
 *
 * A WAIT canceled ends the command buffer there, as a success.
 *
 * Return: 0, RBLN_EMU_ABORTED, or the RBLN_FAULT_* that stopped it, with
 * the faulting address (the packet's, for a bad packet) in @ctx.
 */
int rbln_emu_exec(struct rbln_emu_ctx *ctx, u64 cmd_va, const void *cmd, u32 size)
{
	struct rbln_emu_job job = { .ring = ctx->ring, .ctx = ctx };
	u32 off = 0, header, len;
	int ret;

	while (off < size) {
		ret = rbln_emu_check_stop(&job);
		if (ret)
			return ret;
		header = *(const u32 *)(cmd + off);
		len = RBLN_PKT_LEN8(header) * 8;
		ctx->fault_addr = cmd_va + off;
		if (!rbln_emu_packet_size(RBLN_PKT_OP(header)))
			return RBLN_FAULT_ILLEGAL_OPCODE;
		if (len != rbln_emu_packet_size(RBLN_PKT_OP(header)) || len > size - off ||
		    !rbln_emu_fields_valid(header))
			return RBLN_FAULT_MALFORMED;
		ret = rbln_emu_packet(&job, cmd + off);
		if (ret == RBLN_EMU_CANCELED)
			return 0;
		if (ret)
			return ret;
		off += len;
	}
	return 0;
}
