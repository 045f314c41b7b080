// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_alu.c - the arithmetic unit of the emulated NPU
 *
 * A program must get the same bits from the emulator on every host and from
 * silicon, so nothing here is left to the compiler or the C library: f16 and
 * bf16 are converted by bit manipulation, float to integer conversion is done
 * on the encoding, and only f32 add, subtract, multiply and divide, which
 * IEEE 754 defines exactly, are left to the FPU. This file is built both
 * into the kernel (with the FPU flags, between kernel_fpu_begin() and
 * kernel_fpu_end(), so with MXCSR at its default: round to nearest even, no
 * flush to zero) and into a native unit test, so it uses no library call,
 * no runtime helper and no long double.
 *
 * There is no FMA on the baseline x86-64 the kernel targets, so gcc cannot
 * contract a product and a sum into one rounding even under its default
 * -ffp-contract=fast; the unit test builds with -ffp-contract=off to match.
 */

#ifdef __KERNEL__
#include <asm/cpufeature.h>
#include <asm/fpu/api.h>
#include <asm/fpu/types.h>
#else
#include <stdbool.h>
#endif

#include "rbln_emu_alu.h"

#define F32_SIGN	0x80000000u
#define F32_EXP		0x7f800000u
#define F32_QUIET	0x00400000u
#define F32_NEG_INF	0xff800000u
#define F16_SIGN	0x8000u
#define F16_INF		0x7c00u
#define F16_QUIET	0x0200u
#define BF16_QUIET	0x0040u

/* Buffers are device memory, which is little-endian whatever the host is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static inline u16 alu_le16(u16 v) { return __builtin_bswap16(v); }
static inline u32 alu_le32(u32 v) { return __builtin_bswap32(v); }
#else
static inline u16 alu_le16(u16 v) { return v; }
static inline u32 alu_le32(u32 v) { return v; }
#endif

/* Device addresses carry no alignment guarantee, hence the byte copies. */
static inline u16 ld16(const void *p, size_t i)
{
	u16 v;

	__builtin_memcpy(&v, (const u8 *)p + i * 2, 2);
	return alu_le16(v);
}

static inline u32 ld32(const void *p, size_t i)
{
	u32 v;

	__builtin_memcpy(&v, (const u8 *)p + i * 4, 4);
	return alu_le32(v);
}

static inline void st16(void *p, size_t i, u16 v)
{
	v = alu_le16(v);
	__builtin_memcpy((u8 *)p + i * 2, &v, 2);
}

static inline void st32(void *p, size_t i, u32 v)
{
	v = alu_le32(v);
	__builtin_memcpy((u8 *)p + i * 4, &v, 4);
}

static inline float f32_from_bits(u32 u)
{
	float f;

	__builtin_memcpy(&f, &u, 4);
	return f;
}

static inline u32 f32_to_bits(float f)
{
	u32 u;

	__builtin_memcpy(&u, &f, 4);
	return u;
}

static inline bool f32_isnan(u32 x)
{
	return (x & ~F32_SIGN) > F32_EXP;
}

/* A NaN that did not go through the FPU may still be signalling. */
static inline u32 f32_quiet(u32 x)
{
	return f32_isnan(x) ? x | F32_QUIET : x;
}

static inline bool is_float(u32 dtype)
{
	return dtype <= RBLN_DTYPE_BF16;
}

/* Round-to-nearest-even decision for the @drop low bits of @v (0 < drop < 32). */
static inline u32 rne_shift(u32 v, unsigned int drop)
{
	u32 q = v >> drop;
	u32 rem = v & ((1u << drop) - 1);
	u32 half = 1u << (drop - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

static u32 f16_to_f32(u16 h)
{
	u32 sign = (u32)(h & F16_SIGN) << 16;
	u32 exp = (h >> 10) & 0x1f;
	u32 mant = h & 0x3ff;

	if (exp == 0x1f)
		return sign | F32_EXP | mant << 13;
	if (exp == 0) {
		if (!mant)
			return sign;
		/* f16 subnormals are normal numbers in f32: renormalise. */
		exp = 113;
		while (!(mant & 0x400)) {
			mant <<= 1;
			exp--;
		}
		return sign | exp << 23 | (mant & 0x3ff) << 13;
	}
	return sign | (exp + 112) << 23 | mant << 13;
}

static u16 f32_to_f16(u32 x)
{
	u16 sign = (x >> 16) & F16_SIGN;
	u32 exp = (x >> 23) & 0xff;
	u32 mant = x & 0x7fffff;
	s32 e = (s32)exp - 112;	/* the f16 biased exponent */
	u32 h;

	if (exp == 0xff) {
		/* The quiet bit also keeps a truncated payload from reading as inf. */
		if (mant)
			return sign | F16_INF | F16_QUIET | mant >> 13;
		return sign | F16_INF;
	}
	if (e >= 0x1f)
		return sign | F16_INF;
	if (e <= 0) {
		/* Below 2^-25 even the largest value rounds to zero. */
		if (e < -10)
			return sign;
		/* Subnormal: a carry out lands on the smallest normal, as it should. */
		return sign | rne_shift(mant | 0x800000, 14 - e);
	}
	/* A carry out of the mantissa bumps the exponent, up to inf if need be. */
	h = (u32)e << 10 | mant >> 13;
	if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (h & 1)))
		h++;
	return sign | h;
}

static u16 f32_to_bf16(u32 x)
{
	if (f32_isnan(x))
		return (x >> 16) | BF16_QUIET;
	/* Adding just under half an ulp, plus the lsb, rounds ties to even. */
	return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

/* Element @i of a float buffer, widened exactly to f32 bits. */
static inline u32 ld_f(u32 dtype, const void *p, size_t i)
{
	switch (dtype) {
	case RBLN_DTYPE_F16:
		return f16_to_f32(ld16(p, i));
	case RBLN_DTYPE_BF16:
		return (u32)ld16(p, i) << 16;
	default:
		return ld32(p, i);
	}
}

/* Store the f32 bits @x into a float buffer, rounding once. */
static inline void st_f(u32 dtype, void *p, size_t i, u32 x)
{
	switch (dtype) {
	case RBLN_DTYPE_F16:
		st16(p, i, f32_to_f16(x));
		break;
	case RBLN_DTYPE_BF16:
		st16(p, i, f32_to_bf16(x));
		break;
	default:
		st32(p, i, x);
		break;
	}
}

static inline s32 ld_i(u32 dtype, const void *p, size_t i)
{
	if (dtype == RBLN_DTYPE_I8)
		return (s8)((const u8 *)p)[i];
	return (s32)ld32(p, i);
}

/* Arithmetic wraps, so the i8 result is the low byte. */
static inline void st_i(u32 dtype, void *p, size_t i, s32 v)
{
	if (dtype == RBLN_DTYPE_I8)
		((u8 *)p)[i] = (u8)v;
	else
		st32(p, i, (u32)v);
}

static inline s32 sat_i8(s32 v)
{
	return v < -128 ? -128 : v > 127 ? 127 : v;
}

/* The scalar operand, decoded as an element of @dtype would be. */
static u32 scalar_f(u32 dtype, u32 s)
{
	switch (dtype) {
	case RBLN_DTYPE_F16:
		return f16_to_f32(s & 0xffff);
	case RBLN_DTYPE_BF16:
		return (s & 0xffff) << 16;
	default:
		return s;
	}
}

static s32 scalar_i(u32 dtype, u32 s)
{
	if (dtype == RBLN_DTYPE_I8)
		return (s8)(u8)s;
	return (s32)s;
}

/* Ordered compares alone would make the result depend on operand order. */
static u32 f32_max(u32 a, u32 b)
{
	float fa, fb;

	if (f32_isnan(a))
		return a | F32_QUIET;
	if (f32_isnan(b))
		return b | F32_QUIET;
	fa = f32_from_bits(a);
	fb = f32_from_bits(b);
	if (fa > fb)
		return a;
	if (fb > fa)
		return b;
	/* Equal: the bits differ only for -0 and +0, and +0 must win. */
	return a & b;
}

static u32 f32_min(u32 a, u32 b)
{
	float fa, fb;

	if (f32_isnan(a))
		return a | F32_QUIET;
	if (f32_isnan(b))
		return b | F32_QUIET;
	fa = f32_from_bits(a);
	fb = f32_from_bits(b);
	if (fa < fb)
		return a;
	if (fb < fa)
		return b;
	return a | b;
}

static u32 f32_binop(u32 op, u32 a, u32 b)
{
	float x = f32_from_bits(a);
	float y = f32_from_bits(b);
	float r;

	switch (op) {
	case RBLN_BINARY_ADD:
		r = x + y;
		break;
	case RBLN_BINARY_SUB:
		r = x - y;
		break;
	case RBLN_BINARY_MUL:
		r = x * y;
		break;
	case RBLN_BINARY_DIV:
		r = x / y;
		break;
	case RBLN_BINARY_MAX:
		return f32_max(a, b);
	case RBLN_BINARY_MIN:
		return f32_min(a, b);
	case RBLN_BINARY_RSUB:
		r = y - x;
		break;
	default:
		r = y / x;
		break;
	}
	return f32_to_bits(r);
}

/**
 * rbln_alu_begin() - ready the FPU for a stretch of ALU work
 *
 * Call it after kernel_fpu_begin(). It raises the FPU's sticky inexact
 * flag with one inexact division. No result depends on the flag; but QEMU's
 * TCG, which runs the guests this emulator is developed and tested in,
 * computes a guest's floats on the host FPU only once that flag is set
 * (the host FPU could not tell it whether a result was exact), and in
 * software until then, about 1.6x slower: a chain of exact operations
 * (x * 0.5, x + 1) would never leave software.
 */
void rbln_alu_begin(void)
{
	float third = 1.0f;

	/* Neither computed at build time nor dropped as unused. */
	__asm__ __volatile__("" : "+m" (third));
	third /= 3.0f;
	__asm__ __volatile__("" : : "m" (third));
}

#ifdef __x86_64__
/*
 * f32 add, subtract, multiply and divide eight lanes at a time with AVX,
 * where the CPU has it. They are the same IEEE operations as f32_binop()'s,
 * so they give the same bits; what they save is instructions, which an
 * emulated guest CPU pays for dearly: under QEMU's TCG, 1,024 elements
 * cost 7.9 us this way against 41 us element by element. Each returns how
 * many leading elements it did, a multiple of eight; the element-by-element
 * loop does the rest and every other operation.
 */
#define ALU_AVX __attribute__((target("avx")))

#define ALU_F32X8 float __attribute__((vector_size(32)))

static bool alu_has_avx(void)
{
#ifdef __KERNEL__
	return boot_cpu_has(X86_FEATURE_AVX) &&
	       cpu_has_xfeatures(XFEATURE_MASK_SSE | XFEATURE_MASK_YMM, NULL);
#else
	return __builtin_cpu_supports("avx");
#endif
}

static inline ALU_AVX ALU_F32X8 ldx8(const void *p, u32 i)
{
	ALU_F32X8 v;

	__builtin_memcpy(&v, (const u8 *)p + i * 4, 32);
	return v;
}

static inline ALU_AVX void stx8(void *p, u32 i, ALU_F32X8 v)
{
	__builtin_memcpy((u8 *)p + i * 4, &v, 32);
}

static ALU_AVX u32 f32x8_binary(u32 op, const void *a, const void *b, void *dst, u32 n)
{
	u32 i, end = n & ~7u;

	switch (op) {
	case RBLN_BINARY_ADD:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) + ldx8(b, i));
		break;
	case RBLN_BINARY_SUB:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) - ldx8(b, i));
		break;
	case RBLN_BINARY_MUL:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) * ldx8(b, i));
		break;
	case RBLN_BINARY_DIV:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) / ldx8(b, i));
		break;
	default:
		return 0;
	}
	return end;
}

static ALU_AVX u32 f32x8_scalar(u32 op, const void *a, u32 scalar, void *dst, u32 n)
{
	float s = f32_from_bits(scalar);	/* each operation broadcasts it */
	u32 i, end = n & ~7u;

	switch (op) {
	case RBLN_BINARY_ADD:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) + s);
		break;
	case RBLN_BINARY_SUB:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) - s);
		break;
	case RBLN_BINARY_MUL:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) * s);
		break;
	case RBLN_BINARY_DIV:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, ldx8(a, i) / s);
		break;
	case RBLN_BINARY_RSUB:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, s - ldx8(a, i));
		break;
	case RBLN_BINARY_RDIV:
		for (i = 0; i < end; i += 8)
			stx8(dst, i, s / ldx8(a, i));
		break;
	default:
		return 0;
	}
	return end;
}

static u32 f32_vector_binary(u32 op, const void *a, const void *b, void *dst, u32 n)
{
	return alu_has_avx() ? f32x8_binary(op, a, b, dst, n) : 0;
}

static u32 f32_vector_scalar(u32 op, const void *a, u32 scalar, void *dst, u32 n)
{
	return alu_has_avx() ? f32x8_scalar(op, a, scalar, dst, n) : 0;
}
#else
static u32 f32_vector_binary(u32 op, const void *a, const void *b, void *dst, u32 n)
{
	return 0;
}

static u32 f32_vector_scalar(u32 op, const void *a, u32 scalar, void *dst, u32 n)
{
	return 0;
}
#endif

/* C leaves INT_MIN / -1 undefined and x / 0 traps; the ISA defines both. */
static s32 i32_div(s32 a, s32 b)
{
	if (b == 0)
		return 0;
	if (b == -1)
		return (s32)(0u - (u32)a);
	return a / b;
}

/* Wrapping arithmetic is done in u32: signed overflow is undefined in C. */
static s32 i32_binop(u32 op, s32 a, s32 b)
{
	switch (op) {
	case RBLN_BINARY_ADD:
		return (s32)((u32)a + (u32)b);
	case RBLN_BINARY_SUB:
		return (s32)((u32)a - (u32)b);
	case RBLN_BINARY_MUL:
		return (s32)((u32)a * (u32)b);
	case RBLN_BINARY_DIV:
		return i32_div(a, b);
	case RBLN_BINARY_MAX:
		return a > b ? a : b;
	case RBLN_BINARY_MIN:
		return a < b ? a : b;
	case RBLN_BINARY_RSUB:
		return (s32)((u32)b - (u32)a);
	default:
		return i32_div(b, a);
	}
}

/* f32 to integer on the encoding: exact, and independent of MXCSR. */
static s32 f32_to_i32(u32 x)
{
	u32 exp = (x >> 23) & 0xff;
	u32 mag;

	if (f32_isnan(x))
		return 0;
	/* |x| >= 2^31 saturates; -2^31 itself saturates to the right value. */
	if (exp >= 127 + 31)
		return (x & F32_SIGN) ? (s32)0x80000000u : 0x7fffffff;
	/* |x| < 0.5, and 0.5 itself ties to 0. */
	if (exp < 126)
		return 0;
	mag = (x & 0x7fffff) | 0x800000;
	if (exp >= 150)
		mag <<= exp - 150;
	else
		mag = rne_shift(mag, 150 - exp);
	return (x & F32_SIGN) ? (s32)(0u - mag) : (s32)mag;
}

/*
 * Integer to float, rounded once to @prec significant bits. Going through
 * f32 first would round twice for bf16 (e.g. 2^24 + 2^16 + 1).
 */
static u32 i32_to_f(s32 v, unsigned int prec)
{
	u32 mag = v < 0 ? 0u - (u32)v : (u32)v;
	unsigned int drop;

	if (mag >> prec) {
		drop = 32 - __builtin_clz(mag) - prec;
		if (drop)
			mag = rne_shift(mag, drop) << drop;
	}
	/* Exact: at most prec significant bits, and mag <= 2^31. */
	return f32_to_bits((float)mag) | (v < 0 ? F32_SIGN : 0);
}

static unsigned int f_prec(u32 dtype)
{
	switch (dtype) {
	case RBLN_DTYPE_F16:
		return 11;
	case RBLN_DTYPE_BF16:
		return 8;
	default:
		return 24;
	}
}

/**
 * rbln_alu_unary() - element-wise unary operation
 * @op: RBLN_UNARY_*
 * @dtype: RBLN_DTYPE_* of @src and @dst
 * @src: the operand, @n elements
 * @dst: the result, @n elements; may be @src
 * @n: number of elements
 *
 * NEG and ABS on floats only touch the sign bit, as IEEE 754 negate and abs
 * do: NaNs keep their payload and signalling state.
 */
void rbln_alu_unary(u32 op, u32 dtype, const void *src, void *dst, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++) {
		if (dtype == RBLN_DTYPE_F32) {
			u32 x = ld32(src, i);

			if (op == RBLN_UNARY_NEG)
				x ^= F32_SIGN;
			else if (op == RBLN_UNARY_ABS)
				x &= ~F32_SIGN;
			else if (f32_isnan(x))
				x |= F32_QUIET;
			else if (!(f32_from_bits(x) > 0))
				x = 0;
			st32(dst, i, x);
		} else if (is_float(dtype)) {
			u16 h = ld16(src, i);
			u32 x;

			if (op == RBLN_UNARY_NEG) {
				st16(dst, i, h ^ 0x8000);
			} else if (op == RBLN_UNARY_ABS) {
				st16(dst, i, h & 0x7fff);
			} else {
				x = ld_f(dtype, src, i);
				if (f32_isnan(x))
					x |= F32_QUIET;
				else if (!(f32_from_bits(x) > 0))
					x = 0;
				st_f(dtype, dst, i, x);
			}
		} else {
			s32 v = ld_i(dtype, src, i);

			if (op == RBLN_UNARY_NEG)
				v = (s32)(0u - (u32)v);
			else if (op == RBLN_UNARY_ABS)
				v = v < 0 ? (s32)(0u - (u32)v) : v;
			else
				v = v > 0 ? v : 0;
			st_i(dtype, dst, i, v);
		}
	}
}

/**
 * rbln_alu_binary() - element-wise binary operation
 * @op: RBLN_BINARY_ADD..RBLN_BINARY_MIN
 * @dtype: RBLN_DTYPE_* of @a, @b and @dst
 * @a: left operand, @n elements
 * @b: right operand, @n elements
 * @dst: dst[i] = a[i] op b[i]; may be @a or @b
 * @n: number of elements
 */
void rbln_alu_binary(u32 op, u32 dtype, const void *a, const void *b, void *dst, u32 n)
{
	u32 i = 0;

	if (dtype == RBLN_DTYPE_F32)
		i = f32_vector_binary(op, a, b, dst, n);
	if (is_float(dtype)) {
		for (; i < n; i++)
			st_f(dtype, dst, i, f32_binop(op, ld_f(dtype, a, i), ld_f(dtype, b, i)));
	} else {
		for (i = 0; i < n; i++)
			st_i(dtype, dst, i, i32_binop(op, ld_i(dtype, a, i), ld_i(dtype, b, i)));
	}
}

/**
 * rbln_alu_scalar() - element-wise operation with a scalar
 * @op: RBLN_BINARY_*; RSUB is s - a[i], RDIV is s / a[i]
 * @dtype: RBLN_DTYPE_* of @a, @dst and the scalar
 * @a: the vector operand, @n elements
 * @scalar: the scalar in @dtype's encoding, in the low bits
 * @dst: dst[i] = a[i] op scalar; may be @a
 * @n: number of elements
 */
void rbln_alu_scalar(u32 op, u32 dtype, const void *a, u32 scalar, void *dst, u32 n)
{
	u32 i = 0;

	if (dtype == RBLN_DTYPE_F32)
		i = f32_vector_scalar(op, a, scalar, dst, n);
	if (is_float(dtype)) {
		u32 s = scalar_f(dtype, scalar);

		for (; i < n; i++)
			st_f(dtype, dst, i, f32_binop(op, ld_f(dtype, a, i), s));
	} else {
		s32 s = scalar_i(dtype, scalar);

		for (i = 0; i < n; i++)
			st_i(dtype, dst, i, i32_binop(op, ld_i(dtype, a, i), s));
	}
}

/**
 * rbln_alu_cast() - element-wise conversion
 * @src_dtype: RBLN_DTYPE_* of @src
 * @dst_dtype: RBLN_DTYPE_* of @dst
 * @src: @n elements
 * @dst: @n elements; may be @src only if both dtypes have the same size
 * @n: number of elements
 *
 * Float to float goes through the exact f32 value, so it rounds once. Float
 * to integer rounds to nearest even and saturates, NaN giving 0; integer to
 * float rounds to nearest even; integer to integer saturates. NaNs come out
 * quiet.
 */
void rbln_alu_cast(u32 src_dtype, u32 dst_dtype, const void *src, void *dst, u32 n)
{
	u32 i;
	s32 v;

	for (i = 0; i < n; i++) {
		if (is_float(src_dtype)) {
			u32 x = ld_f(src_dtype, src, i);

			if (is_float(dst_dtype)) {
				st_f(dst_dtype, dst, i, f32_quiet(x));
				continue;
			}
			v = f32_to_i32(x);
		} else {
			v = ld_i(src_dtype, src, i);
			if (is_float(dst_dtype)) {
				st_f(dst_dtype, dst, i, i32_to_f(v, f_prec(dst_dtype)));
				continue;
			}
		}
		st_i(dst_dtype, dst, i, dst_dtype == RBLN_DTYPE_I8 ? sat_i8(v) : v);
	}
}

/**
 * rbln_alu_reduce_init() - start a row reduction
 * @op: RBLN_REDUCE_*
 * @dtype: RBLN_DTYPE_* of the row
 * @acc: the state to set up
 *
 * The state is the identity of @op, which is what an empty row reduces to:
 * 0 for SUM, -inf or the type's minimum for MAX.
 */
void rbln_alu_reduce_init(u32 op, u32 dtype, struct rbln_alu_acc *acc)
{
	acc->count = 0;
	if (op == RBLN_REDUCE_SUM)
		acc->bits = 0;
	else if (is_float(dtype))
		acc->bits = F32_NEG_INF;
	else
		acc->bits = dtype == RBLN_DTYPE_I8 ? (u32)-128 : 0x80000000u;
}

/**
 * rbln_alu_reduce_step() - fold the next elements of a row in
 * @op: RBLN_REDUCE_*
 * @dtype: RBLN_DTYPE_* of @src
 * @acc: the state from rbln_alu_reduce_init()
 * @src: the next @n elements of the row, in index order
 * @n: number of elements
 *
 * A float sum is ((x0 + x1) + x2) + ... in f32: it starts from x0 itself,
 * not from 0 + x0, so that a row of -0 sums to -0. Chunking does not change
 * the result.
 */
void rbln_alu_reduce_step(u32 op, u32 dtype, struct rbln_alu_acc *acc, const void *src, u32 n)
{
	u32 r = (u32)acc->bits;
	u32 i = 0;

	if (!n)
		return;
	if (is_float(dtype) && op == RBLN_REDUCE_SUM) {
		float s = f32_from_bits(r);

		if (!acc->count)
			s = f32_from_bits(ld_f(dtype, src, i++));
		for (; i < n; i++)
			s = s + f32_from_bits(ld_f(dtype, src, i));
		r = f32_to_bits(s);
	} else if (is_float(dtype)) {
		for (; i < n; i++)
			r = f32_max(r, ld_f(dtype, src, i));
	} else if (op == RBLN_REDUCE_SUM) {
		for (; i < n; i++)
			r += (u32)ld_i(dtype, src, i);
	} else {
		for (; i < n; i++) {
			s32 v = ld_i(dtype, src, i);

			if (v > (s32)r)
				r = (u32)v;
		}
	}
	acc->bits = r;
	acc->count += n;
}

/**
 * rbln_alu_reduce_finish() - write the result of a row reduction
 * @op: RBLN_REDUCE_*
 * @dtype: RBLN_DTYPE_* of @dst
 * @acc: the state after the last rbln_alu_reduce_step()
 * @dst: one element
 *
 * The accumulator is rounded to @dtype once, here; an i8 sum saturates.
 */
void rbln_alu_reduce_finish(u32 op, u32 dtype, const struct rbln_alu_acc *acc, void *dst)
{
	s32 v = (s32)(u32)acc->bits;

	if (is_float(dtype))
		st_f(dtype, dst, 0, f32_quiet((u32)acc->bits));
	else if (dtype == RBLN_DTYPE_I8)
		st_i(dtype, dst, 0, op == RBLN_REDUCE_SUM ? sat_i8(v) : v);
	else
		st_i(dtype, dst, 0, v);
}

/**
 * rbln_alu_gemm_tile() - accumulate one tile product
 * @in: RBLN_DTYPE_* of @a and @b
 * @a: m x k, row-major, contiguous
 * @b: k x n, row-major, contiguous
 * @acc: m x n accumulators, f32 for float @in, i32 for integer @in
 * @m: rows of @a and @acc
 * @n: columns of @b and @acc
 * @k: columns of @a, rows of @b
 *
 * Each product is rounded to f32 and then added on its own, in ascending p,
 * so that splitting k over several tiles gives the same bits as one tile.
 * Integer products and sums wrap at 32 bits.
 */
void rbln_alu_gemm_tile(u32 in, const void *a, const void *b, void *acc, u32 m, u32 n, u32 k)
{
	size_t i, j, p;

	for (i = 0; i < m; i++) {
		for (p = 0; p < k; p++) {
			if (is_float(in)) {
				float x = f32_from_bits(ld_f(in, a, i * k + p));

				for (j = 0; j < n; j++) {
					float prod = x * f32_from_bits(ld_f(in, b, p * n + j));
					float s = f32_from_bits(ld32(acc, i * n + j));

					s = s + prod;
					st32(acc, i * n + j, f32_to_bits(s));
				}
			} else {
				u32 x = (u32)ld_i(in, a, i * k + p);

				for (j = 0; j < n; j++) {
					u32 prod = x * (u32)ld_i(in, b, p * n + j);

					st32(acc, i * n + j, ld32(acc, i * n + j) + prod);
				}
			}
		}
	}
}

static u32 acc_dtype(u32 in)
{
	return is_float(in) ? RBLN_DTYPE_F32 : RBLN_DTYPE_I32;
}

/**
 * rbln_alu_gemm_load() - seed accumulators from C, for RBLN_GEMM_ACCUMULATE
 * @in: RBLN_DTYPE_* of A and B, which decides the accumulator type
 * @out: RBLN_DTYPE_* of @c
 * @c: @count elements of C
 * @acc: @count accumulators
 * @count: number of elements
 *
 * C converts to the accumulator type with the CAST rules.
 */
void rbln_alu_gemm_load(u32 in, u32 out, const void *c, void *acc, u32 count)
{
	rbln_alu_cast(out, acc_dtype(in), c, acc, count);
}

/**
 * rbln_alu_gemm_store() - write accumulators to C
 * @in: RBLN_DTYPE_* of A and B, which decides the accumulator type
 * @out: RBLN_DTYPE_* of @c
 * @acc: @count accumulators
 * @c: @count elements of C
 * @count: number of elements
 *
 * The only rounding of the sum to @out, with the CAST rules.
 */
void rbln_alu_gemm_store(u32 in, u32 out, const void *acc, void *c, u32 count)
{
	rbln_alu_cast(acc_dtype(in), out, acc, c, count);
}
