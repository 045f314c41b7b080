/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_ref.h - independent references for the numeric rules of docs/isa.md
 *
 * The emulated NPU's ALU converts f16 and bf16 by bit manipulation and float
 * to integer on the encoding; the references here go other ways: GCC's
 * _Float16 (whose conversions are correctly rounded), bf16 rounding in
 * double with rint() and ldexp(), f32 arithmetic in double (exact enough
 * that one rounding to f32 is correct), and integer arithmetic in 64 bits.
 * Where the ISA specifies a NaN's bits (MAX, MIN, RELU, REDUCE MAX, float
 * casts) the reference gives them; where it leaves them unspecified (ADD,
 * SUB, MUL, DIV, REDUCE SUM, GEMM) it gives REF_ANY_QNAN.
 *
 * Also here: a seeded generator of inputs rich in special values, so that
 * the ALU's unit test and the driver's ISA test draw from the same
 * distributions and a failure reproduces.
 *
 * Header-only, for tests: link with -lm. Products and sums are rounded by
 * explicit casts, so no contraction into a fused multiply-add can happen.
 */
#ifndef RBLN_REF_H
#define RBLN_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_isa.h"

/* An expected element that may be any quiet NaN of the dtype. */
#define REF_ANY_QNAN	0x100000000ull

/* ---- buffers of any dtype, as raw little-endian bytes ---- */

static inline unsigned int ref_dtype_size(uint32_t dtype)
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

static inline void ref_put(uint32_t dtype, void *buf, size_t i, uint32_t bits)
{
	switch (ref_dtype_size(dtype)) {
	case 4:
		memcpy((uint8_t *)buf + 4 * i, &bits, 4);
		break;
	case 2: {
		uint16_t h = bits;

		memcpy((uint8_t *)buf + 2 * i, &h, 2);
		break;
	}
	default:
		((uint8_t *)buf)[i] = bits;
	}
}

/* The element's bits; integers sign-extended to 32 bits. */
static inline uint32_t ref_get(uint32_t dtype, const void *buf, size_t i)
{
	uint32_t v = 0;
	uint16_t h;

	switch (ref_dtype_size(dtype)) {
	case 4:
		memcpy(&v, (const uint8_t *)buf + 4 * i, 4);
		return v;
	case 2:
		memcpy(&h, (const uint8_t *)buf + 2 * i, 2);
		return h;
	default:
		return (uint32_t)(int32_t)((const int8_t *)buf)[i];
	}
}

static inline bool ref_is_float(uint32_t dtype)
{
	return dtype == RBLN_DTYPE_F32 || dtype == RBLN_DTYPE_F16 || dtype == RBLN_DTYPE_BF16;
}

static inline uint32_t ref_fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float ref_bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* ---- encodings ---- */

static inline double ref_f16_dec(uint16_t b)
{
	_Float16 h;

	memcpy(&h, &b, 2);
	return (double)h;
}

static inline uint16_t ref_f16_enc(double v)
{
	_Float16 h = (_Float16)v;
	uint16_t b;

	memcpy(&b, &h, 2);
	return b;
}

static inline double ref_bf16_dec(uint16_t b)
{
	int e = (b >> 7) & 0xff;
	int m = b & 0x7f;
	double v;

	if (e == 0xff)
		v = m ? NAN : INFINITY;
	else if (e)
		v = ldexp(128 + m, e - 127 - 7);
	else
		v = ldexp(m, -126 - 7);
	return (b & 0x8000) ? -v : v;
}

/* Round to 8 significant bits, never below the bf16 subnormal quantum 2^-133. */
static inline uint16_t ref_bf16_enc(double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	double a = fabs(v), r;
	int e, qe;

	if (isnan(v))
		return sign | 0x7fc0;
	if (isinf(v))
		return sign | 0x7f80;
	if (a == 0)
		return sign;
	frexp(a, &e);
	qe = e - 8 < -133 ? -133 : e - 8;
	r = ldexp(rint(ldexp(a, -qe)), qe);
	if (r >= 0x1p128)
		return sign | 0x7f80;
	return sign | (ref_fbits((float)r) >> 16);
}

/* The exact value of an element; integers too. */
static inline double ref_dec(uint32_t dtype, uint32_t bits)
{
	switch (dtype) {
	case RBLN_DTYPE_F32:
		return ref_bitsf(bits);
	case RBLN_DTYPE_F16:
		return ref_f16_dec(bits);
	case RBLN_DTYPE_BF16:
		return ref_bf16_dec(bits);
	default:
		return (int32_t)bits;
	}
}

/* @v rounded once to a float dtype; REF_ANY_QNAN for a NaN. */
static inline uint64_t ref_enc(uint32_t dtype, double v)
{
	if (isnan(v))
		return REF_ANY_QNAN;
	switch (dtype) {
	case RBLN_DTYPE_F32:
		return ref_fbits((float)v);
	case RBLN_DTYPE_F16:
		return ref_f16_enc(v);
	default:
		return ref_bf16_enc(v);
	}
}

static inline int64_t ref_wrap(uint32_t dtype, uint64_t v)
{
	return dtype == RBLN_DTYPE_I8 ? (int8_t)(uint8_t)v : (int32_t)(uint32_t)v;
}

static inline int64_t ref_clamp(uint32_t dtype, int64_t v)
{
	int64_t lo = dtype == RBLN_DTYPE_I8 ? -128 : INT32_MIN;
	int64_t hi = dtype == RBLN_DTYPE_I8 ? 127 : INT32_MAX;

	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- NaNs, on the encoding: sign, quiet bit, payload below it ---- */

static inline bool ref_is_nan(uint32_t dtype, uint32_t b)
{
	switch (dtype) {
	case RBLN_DTYPE_F32:
		return (b & 0x7fffffff) > 0x7f800000;
	case RBLN_DTYPE_F16:
		return (b & 0x7fff) > 0x7c00;
	case RBLN_DTYPE_BF16:
		return (b & 0x7fff) > 0x7f80;
	default:
		return false;
	}
}

static inline bool ref_is_qnan(uint32_t dtype, uint32_t b)
{
	switch (dtype) {
	case RBLN_DTYPE_F32:
		return (b & 0x7fc00000) == 0x7fc00000;
	case RBLN_DTYPE_F16:
		return (b & 0x7e00) == 0x7e00;
	case RBLN_DTYPE_BF16:
		return (b & 0x7fc0) == 0x7fc0;
	default:
		return false;
	}
}

/* The NaN @b of @dtype with its quiet bit set. */
static inline uint32_t ref_quiet(uint32_t dtype, uint32_t b)
{
	switch (dtype) {
	case RBLN_DTYPE_F32:
		return b | 0x00400000;
	case RBLN_DTYPE_F16:
		return b | 0x0200;
	default:
		return b | 0x0040;
	}
}

/*
 * The NaN @b of float dtype @src converted to float dtype @dst: its sign,
 * the top bits of its fraction (left-aligned, quiet bit first), quieted.
 */
static inline uint32_t ref_nan_convert(uint32_t src, uint32_t dst, uint32_t b)
{
	uint32_t sign, frac;	/* frac: 23 bits, as in f32 */

	switch (src) {
	case RBLN_DTYPE_F32:
		sign = b >> 31;
		frac = b & 0x7fffff;
		break;
	case RBLN_DTYPE_F16:
		sign = b >> 15;
		frac = (b & 0x3ff) << 13;
		break;
	default:
		sign = b >> 15;
		frac = (b & 0x7f) << 16;
		break;
	}
	switch (dst) {
	case RBLN_DTYPE_F32:
		return sign << 31 | 0x7fc00000 | frac;
	case RBLN_DTYPE_F16:
		return sign << 15 | 0x7e00 | frac >> 13;
	default:
		return sign << 15 | 0x7fc0 | frac >> 16;
	}
}

/* ---- element operations ---- */

/*
 * Binary float op on exact f32 values: double holds sums, products and
 * quotients of f32 closely enough (53 >= 2 * 24 + 2 bits) that rounding
 * the double result to f32 is the correctly rounded f32 result.
 */
static inline double ref_fop(uint32_t op, double x, double y)
{
	if ((op == RBLN_BINARY_MAX || op == RBLN_BINARY_MIN) && (isnan(x) || isnan(y)))
		return NAN;
	switch (op) {
	case RBLN_BINARY_ADD:
		return (float)(x + y);
	case RBLN_BINARY_SUB:
		return (float)(x - y);
	case RBLN_BINARY_MUL:
		return (float)(x * y);
	case RBLN_BINARY_DIV:
		return (float)(x / y);
	case RBLN_BINARY_MAX:
		if (x == 0 && y == 0)
			return signbit(x) && signbit(y) ? -0.0 : 0.0;
		return x > y ? x : y;
	case RBLN_BINARY_MIN:
		if (x == 0 && y == 0)
			return signbit(x) || signbit(y) ? -0.0 : 0.0;
		return x < y ? x : y;
	case RBLN_BINARY_RSUB:
		return (float)(y - x);
	default:
		return (float)(y / x);
	}
}

static inline int64_t ref_iop(uint32_t op, int64_t x, int64_t y)
{
	switch (op) {
	case RBLN_BINARY_ADD:
		return x + y;
	case RBLN_BINARY_SUB:
		return x - y;
	case RBLN_BINARY_MUL:
		return x * y;
	case RBLN_BINARY_DIV:
		return y ? x / y : 0;
	case RBLN_BINARY_MAX:
		return x > y ? x : y;
	case RBLN_BINARY_MIN:
		return x < y ? x : y;
	case RBLN_BINARY_RSUB:
		return y - x;
	default:
		return x ? y / x : 0;
	}
}

/*
 * a OP b of EW_BINARY, or of EW_SCALAR with the scalar as @b (RSUB and RDIV
 * swap the operands). MAX and MIN return the first NaN operand, quieted.
 */
static inline uint64_t ref_binary(uint32_t op, uint32_t dtype, uint32_t a, uint32_t b)
{
	if (!ref_is_float(dtype))
		return (uint32_t)ref_wrap(dtype, ref_iop(op, (int32_t)a, (int32_t)b));
	if (op == RBLN_BINARY_MAX || op == RBLN_BINARY_MIN) {
		if (ref_is_nan(dtype, a))
			return ref_quiet(dtype, a);
		if (ref_is_nan(dtype, b))
			return ref_quiet(dtype, b);
	}
	return ref_enc(dtype, ref_fop(op, ref_dec(dtype, a), ref_dec(dtype, b)));
}

static inline uint64_t ref_unary(uint32_t op, uint32_t dtype, uint32_t a)
{
	uint32_t sign = dtype == RBLN_DTYPE_F32 ? 0x80000000u : 0x8000;
	double x = ref_dec(dtype, a);
	int64_t i = (int32_t)a;

	if (ref_is_float(dtype)) {
		/* NEG and ABS are sign-bit operations, NaN included. */
		if (isnan(x))
			return op == RBLN_UNARY_NEG ? a ^ sign :
			       op == RBLN_UNARY_ABS ? a & ~sign : ref_quiet(dtype, a);
		if (op == RBLN_UNARY_NEG)
			return ref_enc(dtype, -x);
		if (op == RBLN_UNARY_ABS)
			return ref_enc(dtype, fabs(x));
		return ref_enc(dtype, x > 0 ? x : 0.0);
	}
	if (op == RBLN_UNARY_NEG)
		i = -i;
	else if (op == RBLN_UNARY_ABS)
		i = i < 0 ? -i : i;
	else
		i = i > 0 ? i : 0;
	return (uint32_t)ref_wrap(dtype, i);
}

static inline int64_t ref_f2i(uint32_t dtype, double v)
{
	if (isnan(v))
		return 0;
	/* Far outside i32 either way: keep the conversion to int64_t defined. */
	v = v > 0x1p40 ? 0x1p40 : v < -0x1p40 ? -0x1p40 : v;
	return ref_clamp(dtype, (int64_t)rint(v));
}

/* CAST of one element: exact for every input, NaNs included. */
static inline uint64_t ref_cast(uint32_t src, uint32_t dst, uint32_t bits)
{
	double v = ref_dec(src, bits);

	if (ref_is_float(dst)) {
		if (ref_is_float(src) && ref_is_nan(src, bits))
			return ref_nan_convert(src, dst, bits);
		return ref_enc(dst, v);
	}
	if (ref_is_float(src))
		return (uint32_t)ref_f2i(dst, v);
	return (uint32_t)ref_clamp(dst, (int32_t)bits);
}

/* REDUCE of the @n elements at @src. */
static inline uint64_t ref_reduce(uint32_t op, uint32_t dt, const void *src, uint32_t n)
{
	uint64_t isum = 0;
	int64_t imax = dt == RBLN_DTYPE_I8 ? -128 : INT32_MIN;
	float fs = 0;
	uint32_t i;

	if (ref_is_float(dt) && op == RBLN_REDUCE_MAX) {
		double m = -INFINITY;

		for (i = 0; i < n; i++) {
			uint32_t b = ref_get(dt, src, i);

			/* The first NaN of the row, quieted. */
			if (ref_is_nan(dt, b))
				return ref_quiet(dt, b);
			m = ref_fop(RBLN_BINARY_MAX, m, ref_dec(dt, b));
		}
		return ref_enc(dt, m);
	}
	if (ref_is_float(dt)) {
		for (i = 0; i < n; i++) {
			double x = ref_dec(dt, ref_get(dt, src, i));

			fs = i ? (float)(fs + x) : (float)x;
		}
		return ref_enc(dt, fs);
	}
	for (i = 0; i < n; i++) {
		int64_t x = (int32_t)ref_get(dt, src, i);

		isum += (uint64_t)x;
		imax = x > imax ? x : imax;
	}
	if (op == RBLN_REDUCE_MAX)
		return (uint32_t)imax;
	isum = (uint32_t)(int32_t)(uint32_t)isum;
	return (uint32_t)(dt == RBLN_DTYPE_I8 ? ref_clamp(RBLN_DTYPE_I8, (int32_t)isum) :
						(int32_t)isum);
}

/*
 * GEMM: C = A B (+ C0 if @c0), the expected C bits in @exp. A is m x k,
 * B is k x n, C0 and @exp m x n, all row-major and contiguous. Returns
 * false if out of memory.
 */
static inline bool ref_gemm(uint32_t in, uint32_t out, const void *a, const void *b,
			    const void *c0, uint32_t m, uint32_t n, uint32_t k, uint64_t *exp)
{
	bool fl = ref_is_float(in);
	uint32_t acc_dt = fl ? RBLN_DTYPE_F32 : RBLN_DTYPE_I32;
	/* The inputs' exact values, decoded once. */
	double *da = malloc(((size_t)m * k + 1) * sizeof(double));
	double *db = malloc(((size_t)k * n + 1) * sizeof(double));

	if (!da || !db) {
		free(da);
		free(db);
		return false;
	}
	for (size_t i = 0; i < (size_t)m * k; i++)
		da[i] = ref_dec(in, ref_get(in, a, i));
	for (size_t i = 0; i < (size_t)k * n; i++)
		db[i] = ref_dec(in, ref_get(in, b, i));

	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t j = 0; j < n; j++) {
			uint32_t acc;

			if (fl) {
				float s = 0;

				if (c0)
					s = ref_bitsf(ref_cast(out, RBLN_DTYPE_F32,
							       ref_get(out, c0, (size_t)i * n + j)));
				for (uint32_t p = 0; p < k; p++) {
					float prod = (float)(da[(size_t)i * k + p] *
							     db[(size_t)p * n + j]);

					s = (float)((double)s + prod);
				}
				/* The bits of a NaN sum are unspecified. */
				if (isnan(s) && ref_is_float(out)) {
					exp[(size_t)i * n + j] = REF_ANY_QNAN;
					continue;
				}
				acc = ref_fbits(s);
			} else {
				uint64_t s = 0;

				if (c0)
					s = (uint32_t)ref_cast(out, RBLN_DTYPE_I32,
							       ref_get(out, c0, (size_t)i * n + j));
				for (uint32_t p = 0; p < k; p++)
					s += (uint64_t)(int64_t)da[(size_t)i * k + p] *
					     (uint64_t)(int64_t)db[(size_t)p * n + j];
				acc = (uint32_t)s;
			}
			exp[(size_t)i * n + j] = ref_cast(acc_dt, out, acc);
		}
	}
	free(da);
	free(db);
	return true;
}

/* Does @got (an element as ref_get() returns it) match @exp? */
static inline bool ref_match(uint32_t dtype, uint32_t got, uint64_t exp)
{
	if (exp == REF_ANY_QNAN)
		return ref_is_qnan(dtype, got);
	return got == exp;
}

/* ---- random inputs ---- */

static uint64_t ref_rng_state;

static inline void ref_rng_seed(uint64_t s)
{
	ref_rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static inline uint32_t ref_rng32(void)
{
	ref_rng_state ^= ref_rng_state << 13;
	ref_rng_state ^= ref_rng_state >> 7;
	ref_rng_state ^= ref_rng_state << 17;
	return ref_rng_state >> 32;
}

/* Zeros, ones, ties, NaNs (quiet and signalling), infinities, extremes. */
static const uint32_t ref_f32_specials[] = {
	0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x3f000000, 0x40200000,
	0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345,
	0x7f7fffff, 0xff7fffff, 0x00800000, 0x00000001, 0x807fffff, 0x477fe000,
	0x477ff000, 0x33800000, 0x33000000, 0x38800000, 0x4f000000, 0xcf000000,
	0x3f808000, 0x3f818000, 0x7f7f8000,
};

static const uint32_t ref_i32_specials[] = {
	0, 1, (uint32_t)-1, 2, (uint32_t)-2, 0x7fffffff, 0x80000000, 0x80000001,
	127, 128, (uint32_t)-128, (uint32_t)-129, 255, 0x01000001, 0x01010001,
};

static inline uint32_t ref_rand_f32(void)
{
	uint32_t r = ref_rng32();
	float f;

	switch (r & 3) {
	case 0:
		return ref_rng32();
	case 1:
		/* Ordinary magnitudes, where sums and products stay finite. */
		f = ldexpf((float)(ref_rng32() & 0xffffff), (int)(ref_rng32() % 40) - 40);
		return ref_fbits(r & 4 ? -f : f);
	case 2:
		/* Small dyadic numbers: ties, exact results, equal operands. */
		f = (float)((int)(ref_rng32() % 41) - 20) / (float)(1 << (ref_rng32() % 4));
		return ref_fbits(f);
	default:
		return ref_f32_specials[ref_rng32() % (sizeof(ref_f32_specials) /
						       sizeof(ref_f32_specials[0]))];
	}
}

static inline uint32_t ref_rand_elem(uint32_t dtype)
{
	uint32_t r = ref_rng32();

	switch (dtype) {
	case RBLN_DTYPE_F32:
		return ref_rand_f32();
	case RBLN_DTYPE_F16:
		return r & 1 ? ref_rng32() & 0xffff : ref_f16_enc(ref_bitsf(ref_rand_f32()));
	case RBLN_DTYPE_BF16:
		return r & 1 ? ref_rng32() & 0xffff : ref_rand_f32() >> 16;
	default:
		switch (r & 3) {
		case 0:
			r = ref_i32_specials[ref_rng32() % (sizeof(ref_i32_specials) /
							    sizeof(ref_i32_specials[0]))];
			break;
		case 1:
			r = (uint32_t)((int32_t)(ref_rng32() % 41) - 20);
			break;
		default:
			r = ref_rng32();
		}
		return dtype == RBLN_DTYPE_I8 ? (uint32_t)(int32_t)(int8_t)r : r;
	}
}

static inline void ref_fill_random(uint32_t dtype, void *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ref_put(dtype, buf, i, ref_rand_elem(dtype));
}

/* Floats: a random multiple of 2^-shift in [-range, range]; integers: anything. */
static inline uint32_t ref_rand_moderate(uint32_t dtype, int range, int shift)
{
	int v = (int)(ref_rng32() % (2 * range + 1)) - range;

	if (!ref_is_float(dtype))
		return ref_rand_elem(dtype);
	return ref_enc(dtype, ldexp(v, -shift));
}

static inline void ref_fill_moderate(uint32_t dtype, void *buf, size_t n, int range,
				     int max_shift)
{
	for (size_t i = 0; i < n; i++)
		ref_put(dtype, buf, i,
			ref_rand_moderate(dtype, range, ref_rng32() % (max_shift + 1)));
}

static inline void ref_replace_nans(uint32_t dtype, void *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ref_is_nan(dtype, ref_get(dtype, buf, i)))
			ref_put(dtype, buf, i, 0);
}

#endif /* RBLN_REF_H */
