/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rbln_isa.h - the command ISA of rbln NPUs
 *
 * A command buffer is a sequence of packets in device memory or a host
 * buffer object, read by the command processor through the submitting
 * file's address space. Every packet is little-endian, 8-byte aligned and a
 * multiple of 8 bytes long; it starts with a 32-bit header:
 *
 *   bits  0..7   opcode (RBLN_OP_*)
 *   bits  8..11  dtype (RBLN_DTYPE_*) of the operands, where one applies
 *   bits 12..15  sub-operation (RBLN_UNARY_*, RBLN_BINARY_*, ...) or, for
 *                CAST and GEMM, the destination dtype
 *   bits 16..31  packet length in 8-byte units, header included
 *
 * Addresses are device virtual addresses; counts are elements. A packet
 * whose length does not match its opcode, that runs past the end of the
 * command buffer, or that has a reserved field, an unknown dtype or an
 * unknown sub-operation set is malformed; an unknown opcode is illegal.
 * Either fails the job. docs/isa.md gives the arithmetic rules.
 *
 * WAIT is the one packet that waits for the host: it stalls the command
 * processor until a word in memory, written by the CPU or another engine,
 * reaches a value (a semaphore), or tells it to drop the rest of the
 * command buffer. The job timeout bounds the wait, unless the word keeps
 * changing: see RBLN_WAIT_CANCEL's comment.
 */
#ifndef _UAPI_RBLN_ISA_H_
#define _UAPI_RBLN_ISA_H_

#include <linux/const.h>
#include <linux/types.h>

#if defined(__cplusplus)
extern "C" {
#endif

enum rbln_opcode {
	RBLN_OP_NOP		= 0x00,
	RBLN_OP_DMA_COPY	= 0x01,
	RBLN_OP_DMA_FILL	= 0x02,
	RBLN_OP_WAIT		= 0x03,
	RBLN_OP_EW_UNARY	= 0x10,
	RBLN_OP_EW_BINARY	= 0x11,
	RBLN_OP_EW_SCALAR	= 0x12,
	RBLN_OP_CAST		= 0x13,
	RBLN_OP_REDUCE		= 0x14,
	RBLN_OP_GEMM		= 0x20,
};

enum rbln_dtype {
	RBLN_DTYPE_F32		= 0,
	RBLN_DTYPE_F16		= 1,
	RBLN_DTYPE_BF16		= 2,
	RBLN_DTYPE_I32		= 3,
	RBLN_DTYPE_I8		= 4,
	RBLN_DTYPE_COUNT
};

enum rbln_unary_op {
	RBLN_UNARY_NEG		= 0,
	RBLN_UNARY_ABS		= 1,
	RBLN_UNARY_RELU		= 2,
};

/* EW_BINARY: dst = a OP b. EW_SCALAR: dst = a OP s (RSUB: s - a, RDIV: s / a). */
enum rbln_binary_op {
	RBLN_BINARY_ADD		= 0,
	RBLN_BINARY_SUB		= 1,
	RBLN_BINARY_MUL		= 2,
	RBLN_BINARY_DIV		= 3,
	RBLN_BINARY_MAX		= 4,
	RBLN_BINARY_MIN		= 5,
	RBLN_BINARY_RSUB	= 6,	/* EW_SCALAR only */
	RBLN_BINARY_RDIV	= 7,	/* EW_SCALAR only */
};

enum rbln_reduce_op {
	RBLN_REDUCE_SUM		= 0,
	RBLN_REDUCE_MAX		= 1,
};

#define RBLN_PKT_HEADER(op, dtype, sub, len8) \
	((__u32)(op) | (__u32)(dtype) << 8 | (__u32)(sub) << 12 | (__u32)(len8) << 16)
#define RBLN_PKT_OP(h)		((h) & 0xff)
#define RBLN_PKT_DTYPE(h)	(((h) >> 8) & 0xf)
#define RBLN_PKT_SUB(h)		(((h) >> 12) & 0xf)
#define RBLN_PKT_LEN8(h)	((h) >> 16)

/* NOP: does nothing; lets a queue order work through fences alone. */
struct rbln_pkt_nop {
	__u32 header;
	__u32 reserved;
};

/* DMA_COPY: @bytes from @src to @dst; the ranges may not overlap. */
struct rbln_pkt_dma_copy {
	__u32 header;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u64 bytes;
};

/* DMA_FILL: @bytes at @dst with the repeated little-endian @pattern. */
struct rbln_pkt_dma_fill {
	__u32 header;
	__u32 pattern;
	__u64 dst;
	__u64 bytes;
};

/*
 * WAIT (dtype and sub 0): the command processor reads the little-endian
 * 64-bit word at @addr (8-byte aligned) through the job's address space,
 * again at every poll, until the word is at least @value, both compared
 * unsigned with bit 63 masked off; then it goes on with the next packet.
 * A word with RBLN_WAIT_CANCEL set ends the wait and skips the rest of the
 * command buffer: the job completes without error (the packets before the
 * WAIT have run). A read that faults fails the job as any access does.
 * A WAIT that is never satisfied times out with its job; but while the
 * word keeps changing (a host thread writing it as it makes progress),
 * the job is not hung, and the driver lets it run past its timeout, one
 * timeout at a time, up to a bound of its own (rbln.ko's wait_timeout_ms).
 * docs/isa.md has the rules.
 */
#define RBLN_WAIT_CANCEL	_BITULL(63)

struct rbln_pkt_wait {
	__u32 header;
	__u32 reserved;
	__u64 addr;
	__u64 value;
};

/* EW_UNARY (sub: RBLN_UNARY_*): dst[i] = op(src[i]), i < count. */
struct rbln_pkt_ew_unary {
	__u32 header;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u64 count;
};

/* EW_BINARY (sub: RBLN_BINARY_ADD..MIN): dst[i] = a[i] op b[i]. */
struct rbln_pkt_ew_binary {
	__u32 header;
	__u32 reserved;
	__u64 a;
	__u64 b;
	__u64 dst;
	__u64 count;
};

/*
 * EW_SCALAR (sub: RBLN_BINARY_*): dst[i] = a[i] op scalar. @scalar holds
 * the scalar in the dtype's encoding, zero-extended: f32 bits, f16/bf16
 * bits in the low 16 bits, i32, or i8 in the low 8 bits.
 */
struct rbln_pkt_ew_scalar {
	__u32 header;
	__u32 scalar;
	__u64 src;
	__u64 dst;
	__u64 count;
};

/* CAST (dtype: source, sub: destination dtype): dst[i] = (dst type)src[i]. */
struct rbln_pkt_cast {
	__u32 header;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u64 count;
};

/*
 * REDUCE (sub: RBLN_REDUCE_*): over the last dimension of a row-major
 * rows x cols matrix: dst[r] = op(src[r][0..cols-1]), same dtype.
 */
struct rbln_pkt_reduce {
	__u32 header;
	__u32 reserved;
	__u64 src;
	__u64 dst;
	__u32 rows;
	__u32 cols;
};

/* struct rbln_pkt_gemm.flags */
#define RBLN_GEMM_TRANS_A	0x1	/* A is stored k x m */
#define RBLN_GEMM_TRANS_B	0x2	/* B is stored n x k */
#define RBLN_GEMM_ACCUMULATE	0x4	/* C += A B instead of C = A B */

/*
 * GEMM (dtype: A and B, sub: C's dtype): C (m x n) = A (m x k) B (k x n),
 * row-major with leading dimensions in elements. Float inputs accumulate in
 * f32, integer inputs in i32; the sum is converted to C's dtype once.
 */
struct rbln_pkt_gemm {
	__u32 header;
	__u32 flags;
	__u64 a;
	__u64 b;
	__u64 c;
	__u32 m;
	__u32 n;
	__u32 k;
	__u32 lda;
	__u32 ldb;
	__u32 ldc;
};

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_RBLN_ISA_H_ */
