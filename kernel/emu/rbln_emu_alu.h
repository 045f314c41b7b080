/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_emu_alu.h - the arithmetic unit of the emulated NPU
 *
 * Element-wise, cast, reduction and GEMM kernels over host buffers, with the
 * numeric rules of docs/isa.md. The implementation computes in float; this
 * header holds no float type because it is also included by units built
 * without FPU support. Every call must sit between kernel_fpu_begin() and
 * kernel_fpu_end() in the kernel, with the rounding mode at its default.
 *
 * Callers validate the packet first: op and dtype arguments are valid.
 * Buffers hold little-endian elements and need no particular alignment.
 */
#ifndef __RBLN_EMU_ALU_H__
#define __RBLN_EMU_ALU_H__

#ifdef __KERNEL__
#include <linux/types.h>
#include <uapi/drm/rbln_isa.h>
#else
/* The native unit test: the kernel's names over the UAPI's types. */
#include <stddef.h>
#include <linux/types.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s8 s8;
typedef __s32 s32;
#include "rbln_isa.h"
#endif

/**
 * rbln_alu_dtype_size() - size of one element
 * @dtype: RBLN_DTYPE_*
 *
 * Return: bytes of one element of @dtype, 0 for an unknown dtype.
 */
static inline unsigned int rbln_alu_dtype_size(u32 dtype)
{
	switch (dtype) {
	case RBLN_DTYPE_F32:
	case RBLN_DTYPE_I32:
		return 4;
	case RBLN_DTYPE_F16:
	case RBLN_DTYPE_BF16:
		return 2;
	case RBLN_DTYPE_I8:
		return 1;
	default:
		return 0;
	}
}

void rbln_alu_begin(void);
void rbln_alu_unary(u32 op, u32 dtype, const void *src, void *dst, u32 n);
void rbln_alu_binary(u32 op, u32 dtype, const void *a, const void *b, void *dst, u32 n);
void rbln_alu_scalar(u32 op, u32 dtype, const void *a, u32 scalar, void *dst, u32 n);
void rbln_alu_cast(u32 src_dtype, u32 dst_dtype, const void *src, void *dst, u32 n);

/**
 * struct rbln_alu_acc - running state of one row reduction
 * @bits: the accumulator: f32 bits for float dtypes, an i32 for integer ones.
 * @count: elements folded in so far.
 */
struct rbln_alu_acc {
	u64 bits;
	u32 count;
};

void rbln_alu_reduce_init(u32 op, u32 dtype, struct rbln_alu_acc *acc);
void rbln_alu_reduce_step(u32 op, u32 dtype, struct rbln_alu_acc *acc, const void *src, u32 n);
void rbln_alu_reduce_finish(u32 op, u32 dtype, const struct rbln_alu_acc *acc, void *dst);

void rbln_alu_gemm_tile(u32 in, const void *a, const void *b, void *acc, u32 m, u32 n, u32 k);
void rbln_alu_gemm_load(u32 in, u32 out, const void *c, void *acc, u32 count);
void rbln_alu_gemm_store(u32 in, u32 out, const void *acc, void *c, u32 count);

#endif /* __RBLN_EMU_ALU_H__ */
