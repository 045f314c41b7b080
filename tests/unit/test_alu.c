// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_alu - the emulated NPU's arithmetic unit against independent references
 *
 * The ALU converts f16 and bf16 by bit manipulation and float to integer on
 * the encoding; the references (tests/common/rbln_ref.h, shared with the
 * driver's ISA test) go other ways: GCC's _Float16 (whose conversions are
 * correctly rounded), bf16 rounding in double with rint() and ldexp(), f32
 * arithmetic in double (exact enough that one rounding to f32 is correct),
 * and integer arithmetic in 64 bits. Random inputs come from a fixed seed,
 * so a failure reproduces.
 */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kselftest_harness.h"
#include "rbln_emu_alu.h"
#include "rbln_ref.h"

#define N		4096

#define F32	RBLN_DTYPE_F32
#define F16	RBLN_DTYPE_F16
#define BF16	RBLN_DTYPE_BF16
#define I32	RBLN_DTYPE_I32
#define I8	RBLN_DTYPE_I8

static const char *const dtype_name[] = { "f32", "f16", "bf16", "i32", "i8" };

/* ---- comparison ---- */

static unsigned char abuf[N * 4], bbuf[N * 4], dbuf[N * 4];
static uint64_t expect[N];

/* Mismatches of @got against @exp, the first few logged with their inputs. */
static int compare(struct __test_metadata *_metadata, const char *what, uint32_t dtype,
		   const void *got, const uint64_t *exp, size_t n, uint32_t in_dtype,
		   const void *a, const void *b)
{
	int bad = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t g = ref_get(dtype, got, i);

		if (ref_match(dtype, g, exp[i]))
			continue;
		if (bad++ < 5)
			TH_LOG("%s %s[%zu]: got %#x want %#llx (a %#x b %#x)", what,
			       dtype_name[dtype], i, g, (unsigned long long)exp[i],
			       a ? ref_get(in_dtype, a, i) : 0, b ? ref_get(in_dtype, b, i) : 0);
	}
	return bad;
}

/* ---- tests ---- */

TEST(dtype_size)
{
	EXPECT_EQ(4, rbln_alu_dtype_size(F32));
	EXPECT_EQ(2, rbln_alu_dtype_size(F16));
	EXPECT_EQ(2, rbln_alu_dtype_size(BF16));
	EXPECT_EQ(4, rbln_alu_dtype_size(I32));
	EXPECT_EQ(1, rbln_alu_dtype_size(I8));
	EXPECT_EQ(0, rbln_alu_dtype_size(RBLN_DTYPE_COUNT));
}

/* Every f16 and bf16 encoding widens exactly; NaNs only get quieted. */
TEST(widen_exhaustive)
{
	static uint16_t src[65536];
	static uint32_t dst[65536];
	int bad = 0;
	uint32_t i;

	for (i = 0; i < 65536; i++)
		src[i] = i;
	for (uint32_t dt = F16; dt <= BF16; dt++) {
		rbln_alu_cast(dt, F32, src, dst, 65536);
		for (i = 0; i < 65536; i++) {
			double v = ref_dec(dt, i);
			uint32_t want = ref_fbits((float)v);

			if (isnan(v)) {
				/* Sign and payload survive: top bits of the f32 fraction. */
				uint32_t shift = dt == F16 ? 13 : 16;
				uint32_t frac = dt == F16 ? i & 0x3ff : i & 0x7f;

				want = (i & 0x8000) << 16 | 0x7fc00000 | frac << shift;
			}
			if (dst[i] != want && bad++ < 5)
				TH_LOG("%s %#x: got %#x want %#x", dtype_name[dt], i, dst[i], want);
		}
	}
	EXPECT_EQ(0, bad);
}

/* f32 -> f16 and f32 -> bf16 against the references, random and boundary values. */
TEST(narrow_random)
{
	static uint32_t src[N * 4];
	int bad = 0;
	size_t i, n = ARRAY_SIZE(src);

	ref_rng_seed(1);
	for (i = 0; i < n; i++)
		src[i] = ref_rand_f32();
	/* Every f16 halfway point and its neighbours. */
	for (i = 0; i < 1024; i++) {
		uint32_t h = ref_rng32() & 0x7bff;
		uint32_t mid = ref_fbits((float)((ref_f16_dec(h) + ref_f16_dec(h + 1)) / 2));

		src[i * 3] = mid;
		src[i * 3 + 1] = mid + 1;
		src[i * 3 + 2] = mid - 1;
	}
	for (uint32_t dt = F16; dt <= BF16; dt++) {
		for (i = 0; i < n; i += N) {
			size_t j;

			rbln_alu_cast(F32, dt, src + i, dbuf, N);
			for (j = 0; j < N; j++)
				expect[j] = ref_enc(dt, ref_bitsf(src[i + j]));
			bad += compare(_metadata, "narrow", dt, dbuf, expect, N, F32, src + i,
				       NULL);
		}
	}
	EXPECT_EQ(0, bad);
}

static uint32_t cast1(uint32_t src_dt, uint32_t dst_dt, uint32_t bits)
{
	unsigned char s[4], d[4];

	ref_put(src_dt, s, 0, bits);
	rbln_alu_cast(src_dt, dst_dt, s, d, 1);
	return ref_get(dst_dt, d, 0);
}

TEST(f16_ties_to_even)
{
	uint16_t a = 0x3c00, b = 0x1000 /* 2^-11 */, d;

	/* 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: the even one is 1. */
	EXPECT_EQ(0x3c00, cast1(F32, F16, ref_fbits(1.0f + 0x1p-11f)));
	EXPECT_EQ(0x3c02, cast1(F32, F16, ref_fbits(1.0f + 3 * 0x1p-11f)));
	EXPECT_EQ(0x3c01, cast1(F32, F16, ref_fbits(1.0f + 0x1p-11f + 0x1p-23f)));
	EXPECT_EQ(0xbc00, cast1(F32, F16, ref_fbits(-1.0f - 0x1p-11f)));
	EXPECT_EQ(0x4000, cast1(F32, F16, ref_fbits(2.0f - 0x1p-12f)));
	/* Subnormal ties: 2^-25 -> 0, 3 * 2^-25 -> 2 * 2^-24, 5 * 2^-25 -> 2 * 2^-24 */
	EXPECT_EQ(0x0000, cast1(F32, F16, ref_fbits(0x1p-25f)));
	EXPECT_EQ(0x8000, cast1(F32, F16, ref_fbits(-0x1p-25f)));
	EXPECT_EQ(0x0001, cast1(F32, F16, ref_fbits(0x1p-25f + 0x1p-40f)));
	EXPECT_EQ(0x0002, cast1(F32, F16, ref_fbits(3 * 0x1p-25f)));
	EXPECT_EQ(0x0002, cast1(F32, F16, ref_fbits(5 * 0x1p-25f)));
	/* The largest subnormal plus half an ulp rounds up to the smallest normal. */
	EXPECT_EQ(0x0400, cast1(F32, F16, ref_fbits(0x3ff.8p-24f)));
	EXPECT_EQ(0x03ff, cast1(F32, F16, ref_fbits(0x3ff.7p-24f)));
	/* Same through arithmetic: 1 + 2^-11 computed in f32, rounded on store. */
	rbln_alu_binary(RBLN_BINARY_ADD, F16, &a, &b, &d, 1);
	EXPECT_EQ(0x3c00, d);
	a = 0x3c01;
	rbln_alu_binary(RBLN_BINARY_ADD, F16, &a, &b, &d, 1);
	EXPECT_EQ(0x3c02, d);
}

TEST(f16_overflow)
{
	uint16_t a[3] = { 0x7bff, 0xfbff, 0x5bff }, d[3];

	EXPECT_EQ(0x7bff, cast1(F32, F16, ref_fbits(65504.0f)));
	EXPECT_EQ(0x7bff, cast1(F32, F16, ref_fbits(65519.996f)));
	EXPECT_EQ(0x7c00, cast1(F32, F16, ref_fbits(65520.0f)));
	EXPECT_EQ(0xfc00, cast1(F32, F16, ref_fbits(-65520.0f)));
	EXPECT_EQ(0x7c00, cast1(F32, F16, ref_fbits(1e10f)));
	EXPECT_EQ(0x7c00, cast1(F32, F16, 0x7f7fffff));
	EXPECT_EQ(0xfc00, cast1(BF16, F16, 0xc780)); /* -65536 */
	rbln_alu_binary(RBLN_BINARY_ADD, F16, a, a, d, 3);
	EXPECT_EQ(0x7c00, d[0]);
	EXPECT_EQ(0xfc00, d[1]);
	EXPECT_EQ(0x5fff, d[2]);
	rbln_alu_scalar(RBLN_BINARY_MUL, F16, a, 0x4000, d, 3);
	EXPECT_EQ(0x7c00, d[0]);
	EXPECT_EQ(0xfc00, d[1]);
}

TEST(f16_subnormals)
{
	uint16_t a[4] = { 0x0400, 0x0001, 0x0003, 0x8400 }, d[4];

	/* Halving: 2^-14 -> 2^-15, 2^-24 -> tie -> 0, 3 * 2^-24 -> tie -> 2 * 2^-24 */
	rbln_alu_scalar(RBLN_BINARY_MUL, F16, a, 0x3800, d, 4);
	EXPECT_EQ(0x0200, d[0]);
	EXPECT_EQ(0x0000, d[1]);
	EXPECT_EQ(0x0002, d[2]);
	EXPECT_EQ(0x8200, d[3]);
	EXPECT_EQ(ref_fbits(0x1p-24f), cast1(F16, F32, 0x0001));
	EXPECT_EQ(ref_fbits(0x3ffp-24f), cast1(F16, F32, 0x03ff));
	EXPECT_EQ(ref_fbits(-0x1p-15f), cast1(F16, F32, 0x8200));
	EXPECT_EQ(0x0155, cast1(F32, F16, ref_fbits(0x155p-24f)));
	/* f32 subnormals are far below f16's: zero with the sign kept */
	EXPECT_EQ(0x8000, cast1(F32, F16, 0x80000001));
}

TEST(bf16_ties_to_even)
{
	uint16_t a = 0x3f80, d;

	EXPECT_EQ(0x3f80, cast1(F32, BF16, 0x3f808000));
	EXPECT_EQ(0x3f82, cast1(F32, BF16, 0x3f818000));
	EXPECT_EQ(0x3f81, cast1(F32, BF16, 0x3f808001));
	EXPECT_EQ(0x3f80, cast1(F32, BF16, 0x3f807fff));
	EXPECT_EQ(0xbf80, cast1(F32, BF16, 0xbf808000));
	/* The largest finite plus half an ulp ties to the even neighbour: inf. */
	EXPECT_EQ(0x7f80, cast1(F32, BF16, 0x7f7f8000));
	EXPECT_EQ(0x7f7f, cast1(F32, BF16, 0x7f7f7fff));
	EXPECT_EQ(0xff80, cast1(F32, BF16, 0xff7fffff));
	/* Subnormals round like everything else. */
	EXPECT_EQ(0x0000, cast1(F32, BF16, 0x00008000));
	EXPECT_EQ(0x0002, cast1(F32, BF16, 0x00018000));
	EXPECT_EQ(0x0080, cast1(F32, BF16, 0x007fffff));
	/* Through arithmetic: 1 + 2^-8 in f32 is a tie in bf16. */
	rbln_alu_scalar(RBLN_BINARY_ADD, BF16, &a, 0x3b80 /* 2^-8 */, &d, 1);
	EXPECT_EQ(0x3f80, d);
	a = 0x3f81;
	rbln_alu_scalar(RBLN_BINARY_ADD, BF16, &a, 0x3b80, &d, 1);
	EXPECT_EQ(0x3f82, d);
}

TEST(nan_conversions)
{
	/* A NaN whose payload lies below the kept bits must not become inf. */
	EXPECT_EQ(0x7e00, cast1(F32, F16, 0x7f800001));
	EXPECT_EQ(0xfe00, cast1(F32, F16, 0xff800001));
	EXPECT_EQ(0x7e3f, cast1(F32, F16, 0x7f87e000));
	EXPECT_EQ(0xfe00, cast1(F32, F16, 0xffc00000));
	EXPECT_EQ(0x7fc0, cast1(F32, BF16, 0x7f800001));
	EXPECT_EQ(0xffc1, cast1(F32, BF16, 0xff81ffff));
	EXPECT_EQ(0x7fc0, cast1(F32, BF16, 0x7fffffff) & 0xffc0);
	EXPECT_EQ(0x7fc00001, cast1(F32, F32, 0x7f800001));
	EXPECT_EQ(0xffc00000 | 0x5 << 13, cast1(F16, F32, 0xfc05));
	EXPECT_EQ(0x7fc10000, cast1(BF16, F32, 0x7f81));
	EXPECT_EQ(0x7e08, cast1(BF16, F16, 0x7f81));
	EXPECT_EQ(0xfe01, cast1(F16, F16, 0xfc01));
	EXPECT_EQ(0xffc0, cast1(F16, BF16, 0xfc01));
	/* inf is not a NaN */
	EXPECT_EQ(0x7c00, cast1(F32, F16, 0x7f800000));
	EXPECT_EQ(0xff80, cast1(F16, BF16, 0xfc00));
}

static void check_unary(struct __test_metadata *_metadata, uint32_t dt, int *bad)
{
	size_t i;

	for (uint32_t op = RBLN_UNARY_NEG; op <= RBLN_UNARY_RELU; op++) {
		ref_fill_random(dt, abuf, N);
		rbln_alu_unary(op, dt, abuf, dbuf, N);
		for (i = 0; i < N; i++)
			expect[i] = ref_unary(op, dt, ref_get(dt, abuf, i));
		if (compare(_metadata, op == 0 ? "neg" : op == 1 ? "abs" : "relu", dt, dbuf,
			    expect, N, dt, abuf, NULL))
			(*bad)++;
	}
}

TEST(unary_all_dtypes)
{
	int bad = 0;

	ref_rng_seed(2);
	for (uint32_t dt = F32; dt <= I8; dt++)
		check_unary(_metadata, dt, &bad);
	EXPECT_EQ(0, bad);
}

TEST(binary_all_dtypes)
{
	int bad = 0;
	size_t i;

	ref_rng_seed(3);
	for (uint32_t dt = F32; dt <= I8; dt++) {
		for (uint32_t op = RBLN_BINARY_ADD; op <= RBLN_BINARY_MIN; op++) {
			char what[16];

			ref_fill_random(dt, abuf, N);
			ref_fill_random(dt, bbuf, N);
			/* Equal operands and swapped signed zeros get their share. */
			for (i = 0; i < N; i += 7)
				ref_put(dt, bbuf, i, ref_get(dt, abuf, i));
			rbln_alu_binary(op, dt, abuf, bbuf, dbuf, N);
			for (i = 0; i < N; i++)
				expect[i] = ref_binary(op, dt, ref_get(dt, abuf, i), ref_get(dt, bbuf, i));
			snprintf(what, sizeof(what), "binary op%u", op);
			bad += compare(_metadata, what, dt, dbuf, expect, N, dt, abuf, bbuf);
		}
	}
	EXPECT_EQ(0, bad);
}

TEST(scalar_all_dtypes)
{
	int bad = 0;
	size_t i;

	ref_rng_seed(4);
	for (uint32_t dt = F32; dt <= I8; dt++) {
		for (uint32_t op = RBLN_BINARY_ADD; op <= RBLN_BINARY_RDIV; op++) {
			for (int rep = 0; rep < 16; rep++) {
				uint32_t s = ref_rand_elem(dt);
				uint32_t enc = dt == I8 ? s & 0xff : s;
				char what[24];

				ref_fill_random(dt, abuf, N / 16);
				rbln_alu_scalar(op, dt, abuf, enc, dbuf, N / 16);
				for (i = 0; i < N / 16; i++) {
					expect[i] = ref_binary(op, dt, ref_get(dt, abuf, i), s);
					ref_put(dt, bbuf, i, s);
				}
				snprintf(what, sizeof(what), "scalar op%u", op);
				bad += compare(_metadata, what, dt, dbuf, expect, N / 16, dt, abuf,
					       bbuf);
			}
		}
	}
	EXPECT_EQ(0, bad);
}

TEST(scalar_encoding)
{
	uint16_t h[2] = { 0x3c00, 0xc000 }, bh[2] = { 0x3f80, 0xc000 }, hd[2];
	int8_t b[2] = { 5, -7 }, bd[2];
	int32_t w[2] = { 5, -7 }, wd[2];
	float f[2] = { 1.0f, -2.0f }, fd[2];

	/* RSUB and RDIV put the scalar on the left. */
	rbln_alu_scalar(RBLN_BINARY_RSUB, F16, h, 0x4200 /* 3 */, hd, 2);
	EXPECT_EQ(0x4000, hd[0]);
	EXPECT_EQ(0x4500, hd[1]);
	rbln_alu_scalar(RBLN_BINARY_RDIV, BF16, bh, 0x4040 /* 3 */, hd, 2);
	EXPECT_EQ(0x4040, hd[0]);
	EXPECT_EQ(0xbfc0, hd[1]);
	rbln_alu_scalar(RBLN_BINARY_RSUB, I8, b, 0xff /* -1 */, bd, 2);
	EXPECT_EQ(-6, bd[0]);
	EXPECT_EQ(6, bd[1]);
	rbln_alu_scalar(RBLN_BINARY_RDIV, I32, w, (uint32_t)-20, wd, 2);
	EXPECT_EQ(-4, wd[0]);
	EXPECT_EQ(2, wd[1]);
	rbln_alu_scalar(RBLN_BINARY_SUB, F32, f, ref_fbits(0.5f), fd, 2);
	EXPECT_EQ(ref_fbits(0.5f), ref_fbits(fd[0]));
	EXPECT_EQ(ref_fbits(-2.5f), ref_fbits(fd[1]));
}

TEST(float_special_values)
{
	const uint32_t qnan = 0x7fc00000, snan = 0x7f800123, inf = 0x7f800000, ninf = 0xff800000;
	uint32_t a[8] = { inf, inf, qnan, ref_fbits(1.0f), ref_fbits(-1.0f), 0, ref_fbits(2.0f), snan };
	uint32_t b[8] = { ninf, 0, ref_fbits(1.0f), 0, 0, 0, qnan, ref_fbits(1.0f) };
	uint32_t r[5] = { qnan | 0x80000000, ninf, 0x80000000, 0x80000001, snan };
	uint16_t x[3] = { 0x7c00, 0x7e00, 0x7c00 }, y[3] = { 0x7c00, 0x3c00, 0x4000 }, z[3];
	uint32_t d[8];

	rbln_alu_binary(RBLN_BINARY_ADD, F32, a, b, d, 1);
	EXPECT_TRUE(ref_is_qnan(F32, d[0]));
	rbln_alu_binary(RBLN_BINARY_MUL, F32, a + 1, b + 1, d, 1);
	EXPECT_TRUE(ref_is_qnan(F32, d[0]));
	rbln_alu_binary(RBLN_BINARY_DIV, F32, a, b, d, 8);
	EXPECT_TRUE(ref_is_qnan(F32, d[0]));	/* inf / -inf */
	EXPECT_EQ(inf, d[1]);
	EXPECT_TRUE(ref_is_qnan(F32, d[2]));
	EXPECT_EQ(inf, d[3]);			/* 1 / 0 */
	EXPECT_EQ(ninf, d[4]);			/* -1 / 0 */
	EXPECT_TRUE(ref_is_qnan(F32, d[5]));	/* 0 / 0 */
	EXPECT_TRUE(ref_is_qnan(F32, d[6]));
	EXPECT_TRUE(ref_is_qnan(F32, d[7]));	/* a signalling NaN comes out quiet */
	/* MAX and MIN: NaN wins over anything, the first NaN operand quieted. */
	rbln_alu_binary(RBLN_BINARY_MAX, F32, a, b, d, 8);
	EXPECT_EQ(inf, d[0]);
	EXPECT_EQ(qnan, d[2]);
	EXPECT_EQ(qnan, d[6]);
	EXPECT_EQ(snan | 0x400000, d[7]);
	rbln_alu_binary(RBLN_BINARY_MIN, F32, a, b, d, 8);
	EXPECT_EQ(ninf, d[0]);
	EXPECT_EQ(qnan, d[2]);
	EXPECT_EQ(qnan, d[6]);
	EXPECT_EQ(snan | 0x400000, d[7]);
	rbln_alu_binary(RBLN_BINARY_MIN, F32, b, a, d, 8);
	EXPECT_EQ(snan | 0x400000, d[7]);
	EXPECT_EQ(qnan, d[2]);
	/* Two NaNs: the first operand's. */
	a[0] = 0xffc00005;
	b[0] = 0x7fc00006;
	rbln_alu_binary(RBLN_BINARY_MAX, F32, a, b, d, 1);
	EXPECT_EQ(0xffc00005, d[0]);
	rbln_alu_binary(RBLN_BINARY_MIN, F32, b, a, d, 1);
	EXPECT_EQ(0x7fc00006, d[0]);
	/* RELU: a NaN stays one, quieted, with its sign; -0 and below become +0. */
	rbln_alu_unary(RBLN_UNARY_RELU, F32, r, d, 5);
	EXPECT_EQ(qnan | 0x80000000, d[0]);
	EXPECT_EQ(0, d[1]);
	EXPECT_EQ(0, d[2]);
	EXPECT_EQ(0, d[3]);
	EXPECT_EQ(snan | 0x400000, d[4]);
	/* f16: inf - inf, NaN + 1, inf * 2 */
	rbln_alu_binary(RBLN_BINARY_SUB, F16, x, y, z, 1);
	EXPECT_TRUE(ref_is_qnan(F16, z[0]));
	rbln_alu_binary(RBLN_BINARY_ADD, F16, x + 1, y + 1, z, 1);
	EXPECT_TRUE(ref_is_qnan(F16, z[0]));
	rbln_alu_binary(RBLN_BINARY_MUL, F16, x + 2, y + 2, z, 1);
	EXPECT_EQ(0x7c00, z[0]);
	x[1] = 0x7fc1;
	rbln_alu_binary(RBLN_BINARY_MAX, BF16, y, x, z, 2);
	EXPECT_EQ(0x7c00, z[0]);		/* a finite bf16 */
	EXPECT_EQ(0x7fc1, z[1]);
}

TEST(signed_zero_max_min)
{
	for (uint32_t dt = F32; dt <= BF16; dt++) {
		uint32_t z = 0, nz = dt == F32 ? 0x80000000 : 0x8000;
		unsigned char a[16], b[16], d[16];

		ref_put(dt, a, 0, nz);
		ref_put(dt, b, 0, z);
		ref_put(dt, a, 1, z);
		ref_put(dt, b, 1, nz);
		ref_put(dt, a, 2, nz);
		ref_put(dt, b, 2, nz);
		rbln_alu_binary(RBLN_BINARY_MAX, dt, a, b, d, 3);
		EXPECT_EQ(z, ref_get(dt, d, 0));
		EXPECT_EQ(z, ref_get(dt, d, 1));
		EXPECT_EQ(nz, ref_get(dt, d, 2));
		rbln_alu_binary(RBLN_BINARY_MIN, dt, a, b, d, 3);
		EXPECT_EQ(nz, ref_get(dt, d, 0));
		EXPECT_EQ(nz, ref_get(dt, d, 1));
		EXPECT_EQ(nz, ref_get(dt, d, 2));
		rbln_alu_scalar(RBLN_BINARY_MAX, dt, a, z, d, 2);
		EXPECT_EQ(z, ref_get(dt, d, 0));
		rbln_alu_scalar(RBLN_BINARY_MIN, dt, a, z, d, 2);
		EXPECT_EQ(nz, ref_get(dt, d, 0));
	}
}

TEST(neg_abs_nan_bits)
{
	uint32_t f[2] = { 0xff812345, 0x7fc00001 }, fd[2];
	uint16_t h[2] = { 0xfc01, 0x7f81 }, hd[2];

	rbln_alu_unary(RBLN_UNARY_ABS, F32, f, fd, 2);
	EXPECT_EQ(0x7f812345, fd[0]);
	EXPECT_EQ(0x7fc00001, fd[1]);
	rbln_alu_unary(RBLN_UNARY_NEG, F32, f, fd, 2);
	EXPECT_EQ(0x7f812345, fd[0]);
	EXPECT_EQ(0xffc00001, fd[1]);
	rbln_alu_unary(RBLN_UNARY_ABS, F16, h, hd, 2);
	EXPECT_EQ(0x7c01, hd[0]);
	rbln_alu_unary(RBLN_UNARY_NEG, BF16, h, hd, 2);
	EXPECT_EQ(0x7c01, hd[0]);
	EXPECT_EQ(0xff81, hd[1]);
	/* In place */
	rbln_alu_unary(RBLN_UNARY_NEG, F16, h, h, 2);
	EXPECT_EQ(0x7c01, h[0]);
}

TEST(integer_wraparound)
{
	int32_t a[4] = { INT32_MAX, INT32_MIN, 0x10000, -5 }, b[4] = { 1, 1, 0x10000, 3 }, d[4];
	int8_t c[4] = { 127, -128, 16, -100 }, e[4] = { 1, 1, 16, -100 }, f[4];

	rbln_alu_binary(RBLN_BINARY_ADD, I32, a, b, d, 4);
	EXPECT_EQ(INT32_MIN, d[0]);
	rbln_alu_binary(RBLN_BINARY_SUB, I32, a, b, d, 4);
	EXPECT_EQ(INT32_MAX, d[1]);
	rbln_alu_binary(RBLN_BINARY_MUL, I32, a, b, d, 4);
	EXPECT_EQ(0, d[2]);
	EXPECT_EQ(-15, d[3]);
	rbln_alu_unary(RBLN_UNARY_NEG, I32, a, d, 4);
	EXPECT_EQ(INT32_MIN + 1, d[0]);
	EXPECT_EQ(INT32_MIN, d[1]);
	rbln_alu_unary(RBLN_UNARY_ABS, I32, a, d, 4);
	EXPECT_EQ(INT32_MIN, d[1]);
	EXPECT_EQ(5, d[3]);
	rbln_alu_unary(RBLN_UNARY_RELU, I32, a, d, 4);
	EXPECT_EQ(INT32_MAX, d[0]);
	EXPECT_EQ(0, d[1]);
	rbln_alu_binary(RBLN_BINARY_ADD, I8, c, e, f, 4);
	EXPECT_EQ(-128, f[0]);
	EXPECT_EQ(-127, f[1]);
	EXPECT_EQ(32, f[2]);
	EXPECT_EQ(56, f[3]);
	rbln_alu_binary(RBLN_BINARY_SUB, I8, c, e, f, 4);
	EXPECT_EQ(127, f[1]);
	rbln_alu_binary(RBLN_BINARY_MUL, I8, c, e, f, 4);
	EXPECT_EQ(0, f[2]);
	EXPECT_EQ(16, f[3]);	/* 10000 = 0x2710 */
	rbln_alu_unary(RBLN_UNARY_NEG, I8, c, f, 4);
	EXPECT_EQ(-127, f[0]);
	EXPECT_EQ(-128, f[1]);
	rbln_alu_unary(RBLN_UNARY_ABS, I8, c, f, 4);
	EXPECT_EQ(-128, f[1]);
	EXPECT_EQ(100, f[3]);
	rbln_alu_scalar(RBLN_BINARY_RSUB, I8, c, 0x80, f, 4);
	EXPECT_EQ(1, f[0]);	/* -128 - 127 wraps */
}

TEST(integer_division)
{
	int32_t a[6] = { 7, -7, 7, INT32_MIN, INT32_MIN, 0 }, b[6] = { 0, 2, -2, -1, 1, 0 };
	int8_t c[4] = { -128, -7, 5, -128 }, e[4] = { -1, 2, 0, 0 };
	int32_t d[6];
	int8_t f[4];

	rbln_alu_binary(RBLN_BINARY_DIV, I32, a, b, d, 6);
	EXPECT_EQ(0, d[0]);
	EXPECT_EQ(-3, d[1]);
	EXPECT_EQ(-3, d[2]);
	EXPECT_EQ(INT32_MIN, d[3]);
	EXPECT_EQ(INT32_MIN, d[4]);
	EXPECT_EQ(0, d[5]);
	rbln_alu_binary(RBLN_BINARY_DIV, I8, c, e, f, 4);
	EXPECT_EQ(-128, f[0]);
	EXPECT_EQ(-3, f[1]);
	EXPECT_EQ(0, f[2]);
	EXPECT_EQ(0, f[3]);
	rbln_alu_scalar(RBLN_BINARY_RDIV, I32, b, 9, d, 6);
	EXPECT_EQ(0, d[0]);
	EXPECT_EQ(4, d[1]);
	EXPECT_EQ(-9, d[3]);
	rbln_alu_scalar(RBLN_BINARY_RDIV, I8, e, 0x80, f, 4);
	EXPECT_EQ(-128, f[0]);	/* -128 / -1 */
	EXPECT_EQ(0, f[2]);	/* -128 / 0 */
	rbln_alu_scalar(RBLN_BINARY_DIV, I32, a, 0, d, 6);
	EXPECT_EQ(0, d[3]);
}

TEST(cast_float_to_int)
{
	static const struct {
		float v;
		int32_t i32;
		int8_t i8;
	} c[] = {
		{ 2.5f, 2, 2 }, { 3.5f, 4, 4 }, { -2.5f, -2, -2 }, { -3.5f, -4, -4 },
		{ 0.5f, 0, 0 }, { 1.5f, 2, 2 }, { -0.5f, 0, 0 }, { 0.49999997f, 0, 0 },
		{ 0.50000006f, 1, 1 }, { -0.0f, 0, 0 }, { 1e-40f, 0, 0 },
		{ 126.5f, 126, 126 }, { 127.5f, 128, 127 }, { -128.5f, -128, -128 },
		{ -129.5f, -130, -128 }, { 200.0f, 200, 127 }, { -200.0f, -200, -128 },
		{ 8388607.5f, 8388608, 127 }, { 8388609.0f, 8388609, 127 },
		{ 2147483520.0f, 2147483520, 127 }, { 2147483648.0f, INT32_MAX, 127 },
		{ -2147483648.0f, INT32_MIN, -128 }, { -2147483904.0f, INT32_MIN, -128 },
		{ 1e10f, INT32_MAX, 127 }, { -1e10f, INT32_MIN, -128 },
		{ INFINITY, INT32_MAX, 127 }, { -INFINITY, INT32_MIN, -128 },
		{ NAN, 0, 0 }, { -NAN, 0, 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		uint32_t x = ref_fbits(c[i].v);

		EXPECT_EQ(c[i].i32, (int32_t)cast1(F32, I32, x)) TH_LOG("%a", c[i].v);
		EXPECT_EQ(c[i].i8, (int32_t)cast1(F32, I8, x)) TH_LOG("%a", c[i].v);
		/* Through f16 and bf16 where the value is exact there. */
		if (ref_f16_dec(ref_f16_enc(c[i].v)) == c[i].v) {
			EXPECT_EQ(c[i].i32, (int32_t)cast1(F16, I32, ref_f16_enc(c[i].v)))
				TH_LOG("f16 %a", c[i].v);
		}
		if (ref_bf16_dec(ref_bf16_enc(c[i].v)) == c[i].v) {
			EXPECT_EQ(c[i].i8, (int32_t)cast1(BF16, I8, ref_bf16_enc(c[i].v)))
				TH_LOG("bf16 %a", c[i].v);
		}
	}
	EXPECT_EQ(0, (int32_t)cast1(F16, I32, 0x7e00));
	EXPECT_EQ(0, (int32_t)cast1(BF16, I8, 0xffc1));
	EXPECT_EQ(65504, (int32_t)cast1(F16, I32, 0x7bff));
	EXPECT_EQ(-128, (int32_t)cast1(F16, I8, 0xfc00));
}

TEST(cast_int_to_float)
{
	/* f32: 2^24 + 1 ties to 2^24, 2^24 + 3 to 2^24 + 4 */
	EXPECT_EQ(ref_fbits(16777216.0f), cast1(I32, F32, 16777217));
	EXPECT_EQ(ref_fbits(16777220.0f), cast1(I32, F32, 16777219));
	EXPECT_EQ(ref_fbits(-16777216.0f), cast1(I32, F32, (uint32_t)-16777217));
	EXPECT_EQ(0xcf000000, cast1(I32, F32, 0x80000000));
	EXPECT_EQ(0x4f000000, cast1(I32, F32, 0x7fffffff));
	EXPECT_EQ(0, cast1(I32, F32, 0));
	/* bf16 rounds once: 2^24 + 2^16 + 1 is above the halfway point 2^24 + 2^16. */
	EXPECT_EQ(0x4b81, cast1(I32, BF16, 0x01010001));
	EXPECT_EQ(0x4b80, cast1(I32, BF16, 0x01010000));
	EXPECT_EQ(0x4b82, cast1(I32, BF16, 0x01030000));
	EXPECT_EQ(0x4380, cast1(I32, BF16, 257));	/* 257 -> 256 */
	EXPECT_EQ(0x4382, cast1(I32, BF16, 259));	/* 259 -> 260 */
	EXPECT_EQ(0xcf00, cast1(I32, BF16, 0x80000000));
	EXPECT_EQ(0x4f00, cast1(I32, BF16, 0x7fffffff));
	/* f16: 2049 -> 2048, 2051 -> 2052, overflow */
	EXPECT_EQ(0x6800, cast1(I32, F16, 2049));
	EXPECT_EQ(0x6802, cast1(I32, F16, 2051));
	EXPECT_EQ(0x7bff, cast1(I32, F16, 65519));
	EXPECT_EQ(0x7c00, cast1(I32, F16, 65520));
	EXPECT_EQ(0xfc00, cast1(I32, F16, 0x80000000));
	EXPECT_EQ(0xd800, cast1(I8, F16, 0x80));
	EXPECT_EQ(0xc300, cast1(I8, BF16, 0x80));
	EXPECT_EQ(ref_fbits(127.0f), cast1(I8, F32, 127));
}

TEST(cast_int_to_int)
{
	int32_t a[6] = { 127, 128, -128, -129, INT32_MAX, INT32_MIN };
	int8_t d[6], b[2] = { -128, 127 };
	int32_t e[2];

	rbln_alu_cast(I32, I8, a, d, 6);
	EXPECT_EQ(127, d[0]);
	EXPECT_EQ(127, d[1]);
	EXPECT_EQ(-128, d[2]);
	EXPECT_EQ(-128, d[3]);
	EXPECT_EQ(127, d[4]);
	EXPECT_EQ(-128, d[5]);
	rbln_alu_cast(I8, I32, b, e, 2);
	EXPECT_EQ(-128, e[0]);
	EXPECT_EQ(127, e[1]);
}

TEST(cast_float_to_float)
{
	/* f16 1 + 2^-8 is exact in f32 and a tie in bf16: rounded once, to even. */
	EXPECT_EQ(0x3f80, cast1(F16, BF16, 0x3c04));
	EXPECT_EQ(0x3f82, cast1(F16, BF16, 0x3c0c));
	EXPECT_EQ(0x7c00, cast1(BF16, F16, 0x4780));		/* 65536 */
	EXPECT_EQ(0x7bf8, cast1(BF16, F16, 0x477f));		/* 65280, exact */
	EXPECT_EQ(0x0001, cast1(BF16, F16, 0x3380));		/* 2^-24 */
	EXPECT_EQ(0x0000, cast1(BF16, F16, 0x3300));		/* 2^-25 ties to 0 */
	EXPECT_EQ(0x3c00, cast1(BF16, F16, 0x3f80));
	EXPECT_EQ(0x7f7fffff, cast1(F32, F32, 0x7f7fffff));
	EXPECT_EQ(0x8000, cast1(F16, BF16, 0x8000));
}

/* Every dtype pair on random data. */
TEST(cast_random)
{
	int bad = 0;
	size_t i;

	ref_rng_seed(5);
	for (uint32_t s = F32; s <= I8; s++) {
		for (uint32_t d = F32; d <= I8; d++) {
			char what[24];

			ref_fill_random(s, abuf, N);
			rbln_alu_cast(s, d, abuf, dbuf, N);
			for (i = 0; i < N; i++)
				expect[i] = ref_cast(s, d, ref_get(s, abuf, i));
			snprintf(what, sizeof(what), "cast from %s", dtype_name[s]);
			bad += compare(_metadata, what, d, dbuf, expect, N, s, abuf, NULL);
		}
	}
	EXPECT_EQ(0, bad);
}

/* Reduce @n elements of @src in chunks of @chunk (0: one pass). */
static uint32_t reduce(uint32_t op, uint32_t dt, const void *src, uint32_t n, uint32_t chunk)
{
	struct rbln_alu_acc acc;
	unsigned char out[4];
	uint32_t i = 0, size = rbln_alu_dtype_size(dt);

	rbln_alu_reduce_init(op, dt, &acc);
	if (!chunk)
		chunk = n ? n : 1;
	while (i < n) {
		uint32_t c = n - i < chunk ? n - i : chunk;

		rbln_alu_reduce_step(op, dt, &acc, (const uint8_t *)src + (size_t)i * size, c);
		i += c;
	}
	rbln_alu_reduce_step(op, dt, &acc, src, 0);
	rbln_alu_reduce_finish(op, dt, &acc, out);
	return ref_get(dt, out, 0);
}

TEST(reduce_random_chunked)
{
	static const uint32_t lens[] = { 1, 2, 3, 17, 100, 1000 };
	static const uint32_t chunks[] = { 1, 3, 7, 64 };
	int bad = 0;

	ref_rng_seed(6);
	for (uint32_t dt = F32; dt <= I8; dt++) {
		for (uint32_t op = RBLN_REDUCE_SUM; op <= RBLN_REDUCE_MAX; op++) {
			for (size_t l = 0; l < ARRAY_SIZE(lens); l++) {
				uint32_t n = lens[l];
				uint32_t one;
				uint64_t want;

				ref_fill_random(dt, abuf, n);
				/* Mostly NaN-free rows, or every float max would be NaN. */
				if (ref_rng32() & 3)
					ref_replace_nans(dt, abuf, n);
				one = reduce(op, dt, abuf, n, 0);
				want = ref_reduce(op, dt, abuf, n);
				bad += compare(_metadata, op ? "max" : "sum", dt, &one, &want, 1,
					       dt, NULL, NULL) ? 1 : 0;
				for (size_t c = 0; c < ARRAY_SIZE(chunks); c++) {
					uint32_t got = reduce(op, dt, abuf, n, chunks[c]);

					if (got != one && bad++ < 5)
						TH_LOG("%s op%u n %u chunk %u: %#x vs %#x",
						       dtype_name[dt], op, n, chunks[c], got, one);
				}
			}
		}
	}
	EXPECT_EQ(0, bad);
}

TEST(reduce_special)
{
	uint32_t f[4] = { 0x80000000, 0x80000000, 0x80000000, 0 };
	uint32_t g[4] = { ref_fbits(1e8f), ref_fbits(1.0f), ref_fbits(-1e8f), ref_fbits(1.0f) };
	uint16_t h[4] = { 0x3c00, 0x7e00, 0x7c00, 0xfc00 };
	int32_t w[3] = { INT32_MAX, 1, 0 };
	int8_t b[4] = { 100, 100, -100, 27 }, nb[2] = { -100, -100 };

	/* A row of -0 sums to -0; an empty row sums to +0 and maxes to -inf / min. */
	EXPECT_EQ(0x80000000, reduce(RBLN_REDUCE_SUM, F32, f, 3, 1));
	EXPECT_EQ(0x8000, reduce(RBLN_REDUCE_SUM, F16, (uint16_t[]){ 0x8000, 0x8000 }, 2, 1));
	EXPECT_EQ(0, reduce(RBLN_REDUCE_SUM, F32, f, 4, 2));
	EXPECT_EQ(0, reduce(RBLN_REDUCE_SUM, F32, f, 0, 0));
	EXPECT_EQ(0, reduce(RBLN_REDUCE_SUM, BF16, f, 0, 0));
	EXPECT_EQ(0, reduce(RBLN_REDUCE_SUM, I8, f, 0, 0));
	EXPECT_EQ(0xff800000, reduce(RBLN_REDUCE_MAX, F32, f, 0, 0));
	EXPECT_EQ(0xfc00, reduce(RBLN_REDUCE_MAX, F16, f, 0, 0));
	EXPECT_EQ(0xff80, reduce(RBLN_REDUCE_MAX, BF16, f, 0, 0));
	EXPECT_EQ((uint32_t)INT32_MIN, reduce(RBLN_REDUCE_MAX, I32, f, 0, 0));
	EXPECT_EQ((uint32_t)-128, reduce(RBLN_REDUCE_MAX, I8, f, 0, 0));
	/* max(-0, +0) = +0 in either order */
	EXPECT_EQ(0, reduce(RBLN_REDUCE_MAX, F32, f, 4, 1));
	EXPECT_EQ(0x80000000, reduce(RBLN_REDUCE_MAX, F32, f, 3, 1));
	/* Index order: (1e8 + 1) - 1e8 = 0 in f32, then + 1 */
	EXPECT_EQ(ref_fbits(1.0f), reduce(RBLN_REDUCE_SUM, F32, g, 4, 2));
	EXPECT_EQ(ref_fbits(1e8f), reduce(RBLN_REDUCE_MAX, F32, g, 4, 3));
	/* NaN anywhere wins; inf + -inf is NaN */
	EXPECT_TRUE(ref_is_qnan(F16, reduce(RBLN_REDUCE_MAX, F16, h, 4, 3)));
	EXPECT_TRUE(ref_is_qnan(F16, reduce(RBLN_REDUCE_SUM, F16, h, 4, 1)));
	EXPECT_TRUE(ref_is_qnan(F16, reduce(RBLN_REDUCE_SUM, F16, h + 2, 2, 1)));
	/* Of several NaNs, MAX keeps the first, quieted. */
	EXPECT_EQ(0xfe01, reduce(RBLN_REDUCE_MAX, F16,
				 (uint16_t[]){ 0x3c00, 0xfc01, 0x7e02 }, 3, 1));
	EXPECT_EQ(0x7fc00002, reduce(RBLN_REDUCE_MAX, F32,
				     (uint32_t[]){ 0x7f800002, 0xffc00001 }, 2, 0));
	EXPECT_EQ(0x7c00, reduce(RBLN_REDUCE_MAX, F16, h + 2, 2, 1));
	EXPECT_TRUE(ref_is_qnan(F32, reduce(RBLN_REDUCE_SUM, F32, (uint32_t[]){ 0x7f800001 }, 1, 0)));
	/* The f16 sum is rounded once at the end: 2048 + 1 + 1 = 2050 */
	EXPECT_EQ(0x6801, reduce(RBLN_REDUCE_SUM, F16, (uint16_t[]){ 0x6800, 0x3c00, 0x3c00 },
				 3, 1));
	/* Integers: i32 wraps, i8 accumulates in i32 and saturates at the end */
	EXPECT_EQ((uint32_t)INT32_MIN, reduce(RBLN_REDUCE_SUM, I32, w, 3, 1));
	EXPECT_EQ(127, reduce(RBLN_REDUCE_SUM, I8, b, 4, 1));
	EXPECT_EQ(127, reduce(RBLN_REDUCE_SUM, I8, b, 2, 1));
	EXPECT_EQ(100, reduce(RBLN_REDUCE_SUM, I8, b, 3, 2));
	EXPECT_EQ((uint32_t)-128, reduce(RBLN_REDUCE_SUM, I8, nb, 2, 1));
	EXPECT_EQ(100, reduce(RBLN_REDUCE_MAX, I8, b, 4, 1));
	EXPECT_EQ((uint32_t)INT32_MAX, reduce(RBLN_REDUCE_MAX, I32, w, 3, 2));
}

/* ---- GEMM ---- */

/* Copy columns [p0, p0 + kk) of the m x k matrix @a into a contiguous m x kk one. */
static void sub_cols(uint32_t dt, const void *a, void *dst, uint32_t m, uint32_t k,
		     uint32_t p0, uint32_t kk)
{
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t p = 0; p < kk; p++)
			ref_put(dt, dst, i * kk + p, ref_get(dt, a, i * k + p0 + p));
}

TEST(gemm_random)
{
	static const struct { uint32_t m, n, k; } shapes[] = {
		{ 1, 1, 1 }, { 3, 5, 7 }, { 7, 2, 16 }, { 4, 9, 33 }, { 16, 16, 16 },
	};
	static unsigned char acc1[N * 4], acc2[N * 4], tmp[N * 4], c[N * 4];
	int bad = 0;

	ref_rng_seed(7);
	for (uint32_t in = F32; in <= I8; in++) {
		for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
			uint32_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
			uint32_t k1 = k / 2, out = ref_is_float(in) ? in : I32;
			char what[32];

			/* Finite moderate values, or everything is NaN or inf. */
			ref_fill_moderate(in, abuf, m * k, 1000, 9);
			ref_fill_moderate(in, bbuf, k * n, 1000, 9);
			memset(acc1, 0, sizeof(acc1));
			memset(acc2, 0, sizeof(acc2));
			rbln_alu_gemm_tile(in, abuf, bbuf, acc1, m, n, k);
			rbln_alu_gemm_store(in, out, acc1, c, m * n);
			ASSERT_TRUE(ref_gemm(in, out, abuf, bbuf, NULL, m, n, k, expect));
			snprintf(what, sizeof(what), "gemm %ux%ux%u", m, n, k);
			bad += compare(_metadata, what, out, c, expect, m * n, out, NULL, NULL);

			/* k split over two tiles: the same accumulator bits. */
			sub_cols(in, abuf, tmp, m, k, 0, k1);
			rbln_alu_gemm_tile(in, tmp, bbuf, acc2, m, n, k1);
			sub_cols(in, abuf, tmp, m, k, k1, k - k1);
			rbln_alu_gemm_tile(in, tmp, bbuf + (size_t)k1 * n * rbln_alu_dtype_size(in),
					   acc2, m, n, k - k1);
			if (memcmp(acc1, acc2, (size_t)m * n * 4) && bad++ < 5)
				TH_LOG("%s split k differs", what);
		}
	}
	EXPECT_EQ(0, bad);
}

TEST(gemm_order_and_rounding)
{
	/* Ascending k: 1 + 1e8 rounds to 1e8, so the row sums to 0; backwards it is 1. */
	float a[3] = { 1.0f, 1e8f, -1e8f }, b[3] = { 1.0f, 1.0f, 1.0f };
	float acc = 0;
	/* Each product rounds to f32 before the add: no fused multiply-add. */
	float x = 1.0f + 0x1p-12f, y = 1.0f + 0x1p-12f, prod_acc = -(1.0f + 0x1p-11f);
	int8_t ia[2] = { -128, -128 }, ib[2] = { -128, -128 };
	int32_t iacc = INT32_MAX;
	int32_t big[2] = { 0x10000, 0x10000 };

	rbln_alu_gemm_tile(F32, a, b, &acc, 1, 1, 3);
	EXPECT_EQ(0, ref_fbits(acc));
	rbln_alu_gemm_tile(F32, &x, &y, &prod_acc, 1, 1, 1);
	EXPECT_EQ(0, ref_fbits(prod_acc));
	/* Integers wrap: INT_MAX + 2 * 16384 */
	rbln_alu_gemm_tile(I8, ia, ib, &iacc, 1, 1, 2);
	EXPECT_EQ((int32_t)(0x7fffffffu + 32768u), iacc);
	iacc = 5;
	rbln_alu_gemm_tile(I32, big, big, &iacc, 1, 1, 2);
	EXPECT_EQ(5, iacc);
}

TEST(gemm_load_store_accumulate)
{
	static const uint32_t combos[][2] = {
		{ F16, F16 }, { BF16, F32 }, { F32, F16 }, { F32, I32 }, { F16, I8 },
		{ I8, I32 }, { I8, I8 }, { I32, F32 }, { I8, BF16 }, { BF16, BF16 },
	};
	static unsigned char acc[N * 4], c[N * 4], c0[N * 4];
	const uint32_t m = 5, n = 6, k = 9;
	int bad = 0;

	ref_rng_seed(8);
	for (size_t t = 0; t < ARRAY_SIZE(combos); t++) {
		uint32_t in = combos[t][0], out = combos[t][1];
		char what[32];

		ref_fill_moderate(in, abuf, m * k, 30, 0);
		ref_fill_moderate(in, bbuf, k * n, 100, 3);
		ref_fill_moderate(out, c0, m * n, 2000, 1);
		memcpy(c, c0, sizeof(c));
		rbln_alu_gemm_load(in, out, c, acc, m * n);
		rbln_alu_gemm_tile(in, abuf, bbuf, acc, m, n, k);
		rbln_alu_gemm_store(in, out, acc, c, m * n);
		ASSERT_TRUE(ref_gemm(in, out, abuf, bbuf, c0, m, n, k, expect));
		snprintf(what, sizeof(what), "acc gemm %s->%s", dtype_name[in], dtype_name[out]);
		bad += compare(_metadata, what, out, c, expect, m * n, out, c0, NULL);
	}
	EXPECT_EQ(0, bad);
}

TEST(gemm_load_store_rounding)
{
	int32_t ci = 16777217;
	float fa;
	uint16_t h = 0x3c01, ho;
	float one = 1.0f;
	int8_t i8o;

	/* Load converts C with the CAST rules: i32 2^24 + 1 becomes f32 2^24. */
	rbln_alu_gemm_load(F32, I32, &ci, &fa, 1);
	EXPECT_EQ(ref_fbits(16777216.0f), ref_fbits(fa));
	/* Store rounds the f32 sum once: 1 + 2^-10 + 2^-11 is a tie in f16. */
	fa = 1.0f + 0x1p-10f + 0x1p-11f;
	rbln_alu_gemm_store(F16, F16, &fa, &ho, 1);
	EXPECT_EQ(0x3c02, ho);
	rbln_alu_gemm_load(F16, F16, &h, &fa, 1);
	EXPECT_EQ(ref_fbits(1.0f + 0x1p-10f), ref_fbits(fa));
	fa = 300.5f;
	rbln_alu_gemm_store(F32, I8, &fa, &i8o, 1);
	EXPECT_EQ(127, i8o);
	ci = 300;
	rbln_alu_gemm_store(I8, I8, &ci, &i8o, 1);
	EXPECT_EQ(127, i8o);
	rbln_alu_gemm_store(F32, I32, &one, &ci, 1);
	EXPECT_EQ(1, ci);
}

TEST(unaligned_buffers)
{
	unsigned char src[16], dst[16];
	float one = 1.0f, two = 2.0f, r;

	memcpy(src + 1, &one, 4);
	memcpy(src + 5, &two, 4);
	rbln_alu_binary(RBLN_BINARY_ADD, F32, src + 1, src + 5, dst + 3, 1);
	memcpy(&r, dst + 3, 4);
	EXPECT_EQ(ref_fbits(3.0f), ref_fbits(r));
}

/*
 * f32 ADD..DIV and their scalar forms go eight lanes at a time where the
 * CPU has AVX, then element by element: every length's tail, unaligned
 * buffers and results written over an operand must come out the same, and
 * nothing past the last element may be written.
 */
TEST(f32_lanes_tails_and_in_place)
{
	unsigned char a[64 * 4 + 1], b[64 * 4 + 1], d[64 * 4 + 1];
	uint32_t s = ref_fbits(-0.75f);
	int bad = 0;
	size_t i;

	ref_rng_seed(11);
	for (uint32_t n = 1; n <= 64; n += n < 20 ? 1 : 11) {
		for (uint32_t op = RBLN_BINARY_ADD; op <= RBLN_BINARY_RDIV; op++) {
			ref_fill_random(F32, a + 1, n);
			ref_fill_random(F32, b + 1, n);
			for (i = 0; i < n; i++)
				expect[i] = ref_binary(op, F32, ref_get(F32, a + 1, i),
						       op <= RBLN_BINARY_DIV ?
						       ref_get(F32, b + 1, i) : s);
			memcpy(d, a, sizeof(d));
			if (op <= RBLN_BINARY_DIV)
				rbln_alu_binary(op, F32, d + 1, b + 1, d + 1, n);
			else
				rbln_alu_scalar(op, F32, d + 1, s, d + 1, n);
			bad += compare(_metadata, "in place", F32, d + 1, expect, n, F32, a + 1,
				       b + 1);
			/* Nothing past the last element is written. */
			bad += memcmp(d + 1 + n * 4, a + 1 + n * 4, (64 - n) * 4) != 0;
		}
	}
	EXPECT_EQ(0, bad);
}

TEST_HARNESS_MAIN
