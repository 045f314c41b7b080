// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_ops - librbln's ops against the real driver: every device op and
 * dtype bit for bit against tests/common/rbln_ref.h, the CPU ops against
 * libm, element reads, printing, and every rejection
 *
 * Run in the VM with emu_devices=2.
 */

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rbln/rbln.h>

#include "kselftest_harness.h"
#include "rbln_ref.h"
#include "rbln_tensor_data.h"

static const rbln_dtype dtypes[] = { RBLN_F32, RBLN_F16, RBLN_BF16, RBLN_I32, RBLN_I8 };
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* Does element @i of @got match the expected bits (or any quiet NaN)? */
static bool elem_ok(rbln_dtype dt, const void *got, size_t i, uint64_t exp)
{
	uint32_t g = ref_get(dt, got, i);

	if (exp == REF_ANY_QNAN)
		return ref_is_qnan(dt, g);
	return g == (uint32_t)exp;
}

/* Random data with some specials: NaN, +-inf, -0 and big values for floats. */
static rbln_tensor *special_rand(const int64_t *shape, int ndim, rbln_dtype dt, uint64_t seed,
				 int device)
{
	rbln_tensor *t = rbln_tensor_rand(shape, ndim, dt, seed, RBLN_CPU), *d;
	static const double specials[] = { NAN, INFINITY, -INFINITY, -0.0, 65504, -3e38, 0.5 };
	size_t n = rbln_tensor_nbytes(t), i;
	void *p = malloc(n);

	rbln_tensor_read(t, p, n);
	for (i = 0; i < sizeof(specials) / sizeof(specials[0]) && ref_is_float(dt) &&
	     i * 3 < (size_t)rbln_tensor_numel(t); i++) {
		uint64_t b = ref_enc(dt, specials[i]);

		ref_put(dt, p, i * 3, b == REF_ANY_QNAN ? (dt == RBLN_F32 ? 0x7fc00000 : dt == RBLN_F16 ? 0x7e00 : 0x7fc0) : (uint32_t)b);
	}
	d = rbln_tensor_from_data(p, shape, ndim, dt, device);
	free(p);
	rbln_tensor_free(t);
	return d;
}

TEST(binary_ops_every_dtype)
{
	static const struct {
		rbln_tensor *(*fn)(rbln_tensor *, rbln_tensor *);
		uint32_t op;
	} ops[] = {
		{ rbln_add, RBLN_BINARY_ADD }, { rbln_sub, RBLN_BINARY_SUB },
		{ rbln_mul, RBLN_BINARY_MUL }, { rbln_div, RBLN_BINARY_DIV },
		{ rbln_maximum, RBLN_BINARY_MAX }, { rbln_minimum, RBLN_BINARY_MIN },
	};
	int64_t shape[2] = { 5, 13 };
	size_t o, d, i;

	for (d = 0; d < NDTYPES; d++) {
		rbln_dtype dt = dtypes[d];
		rbln_tensor *a = special_rand(shape, 2, dt, 1 + d, 0);
		rbln_tensor *b = special_rand(shape, 2, dt, 100 + d, 0);
		void *ha = data_of(a), *hb = data_of(b);

		for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			rbln_tensor *c = ops[o].fn(a, b);
			void *hc;

			ASSERT_NE(NULL, c) TH_LOG("op %u dtype %d: %s", ops[o].op, dt, rbln_last_error());
			EXPECT_EQ(0, rbln_tensor_device(c));
			EXPECT_EQ(dt, rbln_tensor_dtype(c));
			hc = data_of(c);
			ASSERT_NE(NULL, hc);
			for (i = 0; i < 65; i++) {
				if (dt != RBLN_F32 && dt != RBLN_F16 && dt != RBLN_BF16 &&
				    ops[o].op == RBLN_BINARY_DIV && !ref_get(dt, hb, i))
					continue;	/* integer division by 0: see docs/isa.md */
				ASSERT_TRUE(elem_ok(dt, hc, i, ref_binary(ops[o].op, dt, ref_get(dt, ha, i),
									 ref_get(dt, hb, i))))
					TH_LOG("op %u dtype %d element %zu", ops[o].op, dt, i);
			}
			free(hc);
			rbln_tensor_free(c);
		}
		free(ha);
		free(hb);
		rbln_tensor_free(a);
		rbln_tensor_free(b);
	}
}

TEST(scalar_unary_and_cast_ops)
{
	static const struct {
		rbln_tensor *(*fn)(rbln_tensor *, double);
		uint32_t op;
	} sops[] = {
		{ rbln_add_scalar, RBLN_BINARY_ADD }, { rbln_sub_scalar, RBLN_BINARY_SUB },
		{ rbln_mul_scalar, RBLN_BINARY_MUL }, { rbln_div_scalar, RBLN_BINARY_DIV },
		{ rbln_maximum_scalar, RBLN_BINARY_MAX }, { rbln_minimum_scalar, RBLN_BINARY_MIN },
	};
	static const struct {
		rbln_tensor *(*fn)(rbln_tensor *);
		uint32_t op;
	} uops[] = {
		{ rbln_neg, RBLN_UNARY_NEG }, { rbln_abs, RBLN_UNARY_ABS },
		{ rbln_relu, RBLN_UNARY_RELU },
	};
	int64_t shape[1] = { 41 };
	size_t o, d, e, i;

	for (d = 0; d < NDTYPES; d++) {
		rbln_dtype dt = dtypes[d];
		rbln_tensor *a = special_rand(shape, 1, dt, 7 + d, 1);
		void *ha = data_of(a);
		uint32_t s = ref_is_float(dt) ? (uint32_t)ref_enc(dt, 3.0) : 3;

		for (o = 0; o < sizeof(sops) / sizeof(sops[0]); o++) {
			rbln_tensor *c = sops[o].fn(a, 3.0);
			void *hc = data_of(c);

			ASSERT_NE(NULL, hc) TH_LOG("%s", rbln_last_error());
			EXPECT_EQ(1, rbln_tensor_device(c));
			for (i = 0; i < 41; i++) {
				ASSERT_TRUE(elem_ok(dt, hc, i, ref_binary(sops[o].op, dt,
									 ref_get(dt, ha, i), s)))
					TH_LOG("scalar op %u dtype %d element %zu", sops[o].op, dt, i);
			}
			free(hc);
			rbln_tensor_free(c);
		}
		for (o = 0; o < sizeof(uops) / sizeof(uops[0]); o++) {
			rbln_tensor *c = uops[o].fn(a);
			void *hc = data_of(c);

			ASSERT_NE(NULL, hc) TH_LOG("%s", rbln_last_error());
			for (i = 0; i < 41; i++) {
				ASSERT_TRUE(elem_ok(dt, hc, i, ref_unary(uops[o].op, dt,
									ref_get(dt, ha, i))))
					TH_LOG("unary op %u dtype %d element %zu", uops[o].op, dt, i);
			}
			free(hc);
			rbln_tensor_free(c);
		}
		for (e = 0; e < NDTYPES; e++) {
			rbln_tensor *c = rbln_cast(a, dtypes[e]);
			void *hc = data_of(c);

			ASSERT_NE(NULL, hc) TH_LOG("%s", rbln_last_error());
			EXPECT_EQ(dtypes[e], rbln_tensor_dtype(c));
			for (i = 0; i < 41; i++) {
				ASSERT_TRUE(elem_ok(dtypes[e], hc, i,
						    ref_cast(dt, dtypes[e], ref_get(dt, ha, i))))
					TH_LOG("cast %d to %d element %zu", dt, dtypes[e], i);
			}
			free(hc);
			rbln_tensor_free(c);
		}
		free(ha);
		rbln_tensor_free(a);
	}
}

/*
 * @s and @m, the sums and maxima of @a's rows of @cols elements, against
 * the reference bit for bit; frees all three.
 */
static bool reductions_ok(rbln_tensor *a, rbln_tensor *s, rbln_tensor *m, int64_t cols)
{
	rbln_dtype dt = rbln_tensor_dtype(a);
	int64_t rows = cols ? rbln_tensor_numel(a) / cols : 0, r;
	void *ha = data_of(a), *hs = s ? data_of(s) : NULL, *hm = m ? data_of(m) : NULL;
	size_t es = rbln_dtype_size(dt);
	bool ok = ha && hs && hm;

	for (r = 0; r < rows && ok; r++) {
		const void *row = (char *)ha + r * cols * es;

		ok = elem_ok(dt, hs, r, ref_reduce(RBLN_REDUCE_SUM, dt, row, cols)) &&
		     elem_ok(dt, hm, r, ref_reduce(RBLN_REDUCE_MAX, dt, row, cols));
	}
	free(ha);
	free(hs);
	free(hm);
	rbln_tensor_free(a);
	rbln_tensor_free(s);
	rbln_tensor_free(m);
	return ok;
}

TEST(reduce_over_the_last_dimension)
{
	int64_t shape[3] = { 2, 3, 37 };
	size_t d;

	for (d = 0; d < NDTYPES; d++) {
		rbln_tensor *a = rbln_tensor_rand(shape, 3, dtypes[d], 11 + d, 0);
		rbln_tensor *s = rbln_sum(a), *m = rbln_amax(a);

		ASSERT_NE(NULL, s) TH_LOG("%s", rbln_last_error());
		ASSERT_NE(NULL, m);
		ASSERT_EQ(2, rbln_tensor_ndim(s));
		EXPECT_EQ(3, rbln_tensor_dim(s, 1));
		EXPECT_TRUE(reductions_ok(a, s, m, 37)) TH_LOG("dtype %d", dtypes[d]);
	}
}

/*
 * A vector reduces to a scalar. On a logical device (test_ops_sharded) it
 * is split over the members, and is gathered to the first for the same
 * bits as on one NPU, device to device: no host bounce.
 */
TEST(reduce_a_vector)
{
	int64_t lens[] = { 1, 5, 37, 4099 };
	size_t d, l;

	for (d = 0; d < NDTYPES; d++) {
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			rbln_tensor *a = special_rand(&lens[l], 1, dtypes[d], 31 + l, 0), *s, *m;
			struct rbln_explain_dump dump;
			rbln_explain *e;

			ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
			e = rbln_explain_begin(false);
			s = rbln_sum(a);
			m = rbln_amax(a);
			ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
			ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &dump));
			rbln_explain_free(e);
			ASSERT_NE(NULL, s) TH_LOG("%s", rbln_last_error());
			ASSERT_NE(NULL, m) TH_LOG("%s", rbln_last_error());
			EXPECT_EQ(0, rbln_tensor_ndim(s));
			EXPECT_EQ(0, dump.host_bounce.count);
			EXPECT_TRUE(reductions_ok(a, s, m, lens[l]))
				TH_LOG("dtype %d, length %lld", dtypes[d], (long long)lens[l]);
		}
	}
}

/* a [batch, m, k] @ b ([batch,] k, n) against ref_gemm, batch by batch. */
static bool check_matmul(int bdims, rbln_dtype dt, int64_t batch, int64_t m, int64_t k,
			 int64_t n)
{
	int64_t sa[3] = { batch, m, k }, sb[3] = { batch, k, n };
	int ad = batch ? 3 : 2;
	rbln_tensor *a = rbln_tensor_rand(batch ? sa : sa + 1, ad, dt, 21, 0);
	rbln_tensor *b = rbln_tensor_rand(bdims == 3 ? sb : sb + 1, bdims, dt, 22, 0);
	rbln_tensor *c = rbln_matmul(a, b);
	void *ha = data_of(a), *hb = data_of(b), *hc = c ? data_of(c) : NULL;
	size_t es = rbln_dtype_size(dt);
	uint64_t *exp = malloc(m * n * sizeof(*exp));
	bool ok = hc && exp && rbln_tensor_ndim(c) == ad && rbln_tensor_dim(c, ad - 1) == n;
	int64_t i, j;

	for (i = 0; i < (batch ? batch : 1) && ok; i++) {
		ok = ref_gemm(dt, dt, (char *)ha + i * m * k * es,
			      (char *)hb + (bdims == 3 ? i * k * n * es : 0), NULL, m, n, k, exp);
		for (j = 0; j < m * n && ok; j++)
			ok = elem_ok(dt, (char *)hc + i * m * n * es, j, exp[j]);
	}
	free(exp);
	free(ha);
	free(hb);
	free(hc);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
	return ok;
}

TEST(matmul_2d_and_batched)
{
	size_t d;

	for (d = 0; d < NDTYPES; d++) {
		EXPECT_TRUE(check_matmul(2, dtypes[d], 0, 5, 7, 3)) TH_LOG("2-D dtype %d", dtypes[d]);
		EXPECT_TRUE(check_matmul(2, dtypes[d], 0, 1, 33, 17)) TH_LOG("1-row dtype %d", dtypes[d]);
		EXPECT_TRUE(check_matmul(3, dtypes[d], 3, 4, 5, 6)) TH_LOG("batched dtype %d", dtypes[d]);
		EXPECT_TRUE(check_matmul(2, dtypes[d], 3, 4, 5, 6)) TH_LOG("batched by 2-D dtype %d", dtypes[d]);
	}
	/*
	 * More batches than one command buffer holds GEMM packets (4681 of
	 * the emulator's 256 KiB): several jobs, the last one shorter.
	 */
	EXPECT_TRUE(check_matmul(3, RBLN_F32, 10000, 2, 3, 2)) TH_LOG("10000 batches");
	EXPECT_TRUE(check_matmul(2, RBLN_BF16, 10000, 1, 2, 3)) TH_LOG("10000 batches by 2-D");
	/* K = 0: an empty sum is zeros. */
	{
		int64_t sa[2] = { 3, 0 }, sb[2] = { 0, 4 };
		rbln_tensor *a = rbln_tensor_empty(sa, 2, RBLN_F32, 0);
		rbln_tensor *b = rbln_tensor_empty(sb, 2, RBLN_F32, 0);
		rbln_tensor *c = rbln_matmul(a, b);
		float out[12];
		int i;

		ASSERT_NE(NULL, c) TH_LOG("%s", rbln_last_error());
		memset(out, 0xff, sizeof(out));
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, out, sizeof(out)));
		for (i = 0; i < 12; i++) {
			EXPECT_EQ(0.0f, out[i]);
		}
		rbln_tensor_free(a);
		rbln_tensor_free(b);
		rbln_tensor_free(c);
	}
}

TEST(clone_copy_fill)
{
	int64_t shape[2] = { 3, 5 };
	rbln_tensor *a = rbln_tensor_rand(shape, 2, RBLN_BF16, 5, 0);
	rbln_tensor *b = rbln_tensor_zeros(shape, 2, RBLN_BF16, 0);
	rbln_tensor *c = rbln_clone(a);
	uint16_t ha[15], hb[15], hc[15];
	size_t d;
	int i;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(RBLN_OK, rbln_copy(b, a));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(a, ha, sizeof(ha)));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(b, hb, sizeof(hb)));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, hc, sizeof(hc)));
	EXPECT_EQ(0, memcmp(ha, hb, sizeof(ha)));
	EXPECT_EQ(0, memcmp(ha, hc, sizeof(ha)));
	EXPECT_EQ(RBLN_OK, rbln_copy(a, a));
	for (d = 0; d < NDTYPES; d++) {
		rbln_tensor *t = rbln_tensor_rand(shape, 2, dtypes[d], 9, 0), *ref;
		uint8_t got[60], exp[60];

		ASSERT_EQ(RBLN_OK, rbln_fill(t, -2.5));
		ref = rbln_tensor_full(shape, 2, dtypes[d], -2.5, RBLN_CPU);
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, got, sizeof(got)));
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(ref, exp, sizeof(exp)));
		EXPECT_EQ(0, memcmp(got, exp, rbln_tensor_nbytes(t))) TH_LOG("dtype %d", dtypes[d]);
		rbln_tensor_free(t);
		rbln_tensor_free(ref);
	}
	for (i = 0; i < 15; i++) {
		EXPECT_EQ(ha[i], hc[i]);
	}
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
}

/*
 * A view is another shape and dtype over a tensor's bytes (what torch.rbln
 * makes of torch's storages): ops on it compute in its shape, writes
 * through it are the base's, and it outlives the base's handle. On a
 * logical device only views keeping the first dimension share the shards.
 */
TEST(views_share_memory)
{
	bool sharded = getenv("RBLN_DEVICE_MAP") != NULL;
	int64_t bytes_shape[1] = { 96 }, grid[2] = { 4, 6 }, split[3] = { 4, 3, 2 };
	rbln_tensor *base, *v, *pairs, *sum, *twice, *canary[8];
	float data[24], got[24], sums[12];
	int i;

	for (i = 0; i < 24; i++)
		data[i] = (float)i - 7.5f;
	/* Bytes, then floats: the rows of the view are 4, not 96. */
	base = rbln_tensor_from_data(data, bytes_shape, 1, RBLN_I8, 0);
	ASSERT_NE(NULL, base);
	v = rbln_tensor_view(base, grid, 2, RBLN_F32);
	if (sharded) {
		EXPECT_EQ(NULL, v);
		EXPECT_EQ(RBLN_ERROR_UNSUPPORTED, rbln_last_status());
		EXPECT_NE(NULL, strstr(rbln_last_error(), "first dimension"));
		rbln_tensor_free(base);
		base = rbln_tensor_from_data(data, grid, 2, RBLN_F32, 0);
		ASSERT_NE(NULL, base);
		v = rbln_tensor_view(base, grid, 2, RBLN_F32);
	}
	ASSERT_NE(NULL, v);
	EXPECT_TRUE(rbln_tensor_is_materialized(base));
	twice = rbln_add(v, v);
	ASSERT_NE(NULL, twice);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(twice, got, sizeof(got)));
	for (i = 0; i < 24; i++)
		EXPECT_EQ(2 * data[i], got[i]) TH_LOG("element %d", i);
	rbln_tensor_free(twice);

	/*
	 * Into a tensor with neighbours: an op on the view touches its 96
	 * bytes, not 96 rows of them (the caching allocator puts blocks
	 * allocated one after the other next to each other).
	 */
	twice = rbln_tensor_zeros(grid, 2, RBLN_F32, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(twice));
	for (i = 0; i < 8; i++) {
		canary[i] = rbln_tensor_full(grid, 2, RBLN_F32, 42 + i, 0);
		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(canary[i]));
	}
	ASSERT_EQ(RBLN_OK, rbln_copy(twice, v));
	for (i = 0; i < 8; i++) {
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(canary[i], got, sizeof(got)));
		EXPECT_EQ(42 + i, got[0]) TH_LOG("neighbour %d overwritten", i);
		EXPECT_EQ(42 + i, got[23]) TH_LOG("neighbour %d overwritten", i);
		rbln_tensor_free(canary[i]);
	}
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(twice, got, sizeof(got)));
	EXPECT_EQ(0, memcmp(got, data, sizeof(got)));
	rbln_tensor_free(twice);

	/* Another view of it, of three dimensions: sums pairs. */
	pairs = rbln_tensor_view(v, split, 3, RBLN_F32);

	ASSERT_NE(NULL, pairs);
	sum = rbln_sum(pairs);
	ASSERT_NE(NULL, sum);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(sum, sums, sizeof(sums)));
	for (i = 0; i < 12; i++)
		EXPECT_EQ(data[2 * i] + data[2 * i + 1], sums[i]) TH_LOG("pair %d", i);
	rbln_tensor_free(sum);

	/* Writes through a view are the base's, also once its handle is gone. */
	rbln_tensor_free(base);
	ASSERT_EQ(RBLN_OK, rbln_fill(pairs, 1.5));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(v, got, sizeof(got)));
	for (i = 0; i < 24; i++)
		EXPECT_EQ(1.5f, got[i]);
	rbln_tensor_free(v);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(pairs, got, sizeof(got)));
	EXPECT_EQ(1.5f, got[23]);
	rbln_tensor_free(pairs);
}

TEST(view_rejections)
{
	int64_t shape[2] = { 4, 6 }, wrong[2] = { 5, 6 }, neg[2] = { -4, -6 }, big[1] = { 1 };
	rbln_tensor *d = rbln_tensor_zeros(shape, 2, RBLN_F32, 0);
	rbln_tensor *c = rbln_tensor_zeros(shape, 2, RBLN_F32, RBLN_CPU);

	ASSERT_NE(NULL, d);
	EXPECT_EQ(NULL, rbln_tensor_view(NULL, shape, 2, RBLN_F32));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_last_status());
	EXPECT_EQ(NULL, rbln_tensor_view(c, shape, 2, RBLN_F32));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "CPU tensor"));
	EXPECT_EQ(NULL, rbln_tensor_view(d, wrong, 2, RBLN_F32));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "96 bytes"));
	EXPECT_EQ(NULL, rbln_tensor_view(d, neg, 2, RBLN_F32));
	EXPECT_EQ(NULL, rbln_tensor_view(d, shape, 2, (rbln_dtype)42));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "dtype"));
	EXPECT_EQ(NULL, rbln_tensor_view(d, NULL, 2, RBLN_F32));
	EXPECT_EQ(NULL, rbln_tensor_view(d, shape, RBLN_MAX_DIMS + 1, RBLN_F32));
	EXPECT_EQ(NULL, rbln_tensor_view(d, big, 1, RBLN_F32));
	/* The base is unharmed. */
	EXPECT_EQ(RBLN_OK, rbln_fill(d, 2));
	rbln_tensor_free(d);
	rbln_tensor_free(c);
}

/* Writes from the host: a lazy tensor stays lazy, one on the device is copied to. */
TEST(write_from_the_host)
{
	int64_t shape[1] = { 8 };
	float in[8] = { 1, -2, 3, -4, 5, -6, 7, -8 }, out[8], two[2] = { 0.25f, 0.5f };
	rbln_tensor *t = rbln_tensor_empty(shape, 1, RBLN_F32, 0), *sq;
	int i;

	ASSERT_NE(NULL, t);
	ASSERT_EQ(RBLN_OK, rbln_tensor_write(t, 0, in, sizeof(in)));
	EXPECT_FALSE(rbln_tensor_is_materialized(t));
	sq = rbln_mul(t, t);
	ASSERT_NE(NULL, sq);
	EXPECT_TRUE(rbln_tensor_is_materialized(t));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(sq, out, sizeof(out)));
	for (i = 0; i < 8; i++)
		EXPECT_EQ(in[i] * in[i], out[i]);
	/* Now in device memory (on a logical device, across its shards). */
	ASSERT_EQ(RBLN_OK, rbln_tensor_write(sq, 0, in, sizeof(in)));
	ASSERT_EQ(RBLN_OK, rbln_tensor_write(sq, 3 * sizeof(float), two, sizeof(two)));
	memset(in, 0, sizeof(in));	/* the source may be reused at once */
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(sq, out, sizeof(out)));
	EXPECT_EQ(3.0f, out[2]);
	EXPECT_EQ(0.25f, out[3]);
	EXPECT_EQ(0.5f, out[4]);
	EXPECT_EQ(-6.0f, out[5]);
	EXPECT_EQ(-8.0f, out[7]);
	/* Part of a lazy one. */
	ASSERT_EQ(RBLN_OK, rbln_tensor_write(t, 7 * sizeof(float), two, sizeof(float)));
	EXPECT_EQ(RBLN_OK, rbln_tensor_write(t, 8 * sizeof(float), two, 0));

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_write(sq, 4, in, sizeof(in)));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not within the tensor of 32 bytes"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_write(sq, SIZE_MAX, in, 2));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_write(sq, 0, NULL, sizeof(in)));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "from NULL"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_write(NULL, 0, in, sizeof(in)));
	rbln_tensor_free(t);
	rbln_tensor_free(sq);
}

/* Ops compose on the device: data stays there between them. */
TEST(chained_ops_stay_on_the_device)
{
	int64_t shape[2] = { 4, 8 };
	float x[32], y[32];
	rbln_tensor *a, *b, *c, *d;
	int i;

	for (i = 0; i < 32; i++)
		x[i] = (float)(i - 16) / 4;
	a = rbln_tensor_from_data(x, shape, 2, RBLN_F32, 0);
	EXPECT_FALSE(rbln_tensor_is_materialized(a));
	b = rbln_mul_scalar(a, 2.0);
	EXPECT_TRUE(rbln_tensor_is_materialized(a));
	EXPECT_TRUE(rbln_tensor_is_materialized(b));
	c = rbln_relu(b);
	d = rbln_add(c, a);
	ASSERT_NE(NULL, d);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(d, y, sizeof(y)));
	for (i = 0; i < 32; i++) {
		EXPECT_EQ(fmaxf(x[i] * 2, 0) + x[i], y[i]);
	}
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
	rbln_tensor_free(d);
}

TEST(cpu_ops_against_libm)
{
	int64_t shape[2] = { 3, 10 };
	float x[30], y[30];
	rbln_tensor *a, *e, *l, *t, *s, *cpu, *ci;
	int i, r, c;

	for (i = 0; i < 30; i++)
		x[i] = 0.25f + (float)i / 8;
	a = rbln_tensor_from_data(x, shape, 2, RBLN_F32, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	e = rbln_exp(a);
	l = rbln_log(a);
	t = rbln_tanh(a);
	s = rbln_softmax(a);
	ASSERT_NE(NULL, s) TH_LOG("%s", rbln_last_error());
	/* Results of CPU ops on device data go back to the device. */
	EXPECT_EQ(0, rbln_tensor_device(s));
	EXPECT_TRUE(rbln_tensor_is_materialized(s));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(e, y, sizeof(y)));
	for (i = 0; i < 30; i++) {
		EXPECT_EQ((float)exp(x[i]), y[i]);
	}
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(l, y, sizeof(y)));
	for (i = 0; i < 30; i++) {
		EXPECT_EQ((float)log(x[i]), y[i]);
	}
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, y, sizeof(y)));
	for (i = 0; i < 30; i++) {
		EXPECT_EQ((float)tanh(x[i]), y[i]);
	}
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(s, y, sizeof(y)));
	for (r = 0; r < 3; r++) {
		double max = -INFINITY, sum = 0;

		for (c = 0; c < 10; c++)
			max = fmax(max, x[r * 10 + c]);
		for (c = 0; c < 10; c++)
			sum += exp(x[r * 10 + c] - max);
		for (c = 0; c < 10; c++) {
			EXPECT_EQ((float)(exp(x[r * 10 + c] - max) / sum), y[r * 10 + c]);
		}
	}
	/* On a CPU tensor, on the CPU; integers give float32. */
	cpu = rbln_tensor_from_data(x, shape, 2, RBLN_F32, RBLN_CPU);
	rbln_tensor_free(e);
	e = rbln_exp(cpu);
	EXPECT_EQ(RBLN_CPU, rbln_tensor_device(e));
	ci = rbln_tensor_full(shape, 2, RBLN_I8, 2, RBLN_CPU);
	rbln_tensor_free(l);
	l = rbln_exp(ci);
	EXPECT_EQ(RBLN_F32, rbln_tensor_dtype(l));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(l, y, sizeof(y)));
	EXPECT_EQ((float)exp(2), y[29]);
	rbln_tensor_free(a);
	rbln_tensor_free(e);
	rbln_tensor_free(l);
	rbln_tensor_free(t);
	rbln_tensor_free(s);
	rbln_tensor_free(cpu);
	rbln_tensor_free(ci);
}

TEST(item_and_print)
{
	int64_t shape[2] = { 2, 3 }, idx[2] = { 1, 2 }, bad[2] = { 2, 0 };
	float x[6] = { 1, 2.5f, -3, 4, 5, 6.125f };
	rbln_tensor *a = rbln_tensor_from_data(x, shape, 2, RBLN_F32, 1);
	int64_t big_shape[1] = { 2000 };
	rbln_tensor *big = rbln_tensor_zeros(big_shape, 1, RBLN_I32, 0);
	char *text = NULL;
	size_t len = 0;
	double v = 0;
	FILE *f;

	ASSERT_EQ(RBLN_OK, rbln_tensor_item(a, idx, &v));
	EXPECT_EQ(6.125, v);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	idx[1] = 1;
	ASSERT_EQ(RBLN_OK, rbln_tensor_item(a, idx, &v));
	EXPECT_EQ(5, v);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_item(a, bad, &v));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "out of [0, 2)"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_item(a, NULL, &v));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_item(a, idx, NULL));

	f = open_memstream(&text, &len);
	ASSERT_EQ(RBLN_OK, rbln_tensor_print(a, f));
	ASSERT_EQ(RBLN_OK, rbln_tensor_print(big, f));
	fclose(f);
	EXPECT_EQ(0, strncmp(text, "tensor([[1.0000, 2.5000, -3.0000],\n"
				   "        [4.0000, 5.0000, 6.1250]], device='rbln:1', dtype=rbln.float32)\n"
				   "tensor([0, 0, 0, ..., 0, 0, 0], device='rbln:0', dtype=rbln.int32)\n",
			     len)) TH_LOG("%s", text);
	free(text);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_print(a, NULL));
	rbln_tensor_free(a);
	rbln_tensor_free(big);
}

/* Every op, given what it must refuse: a NULL, a freed and (device ops) a CPU tensor. */
TEST(every_op_refuses_bad_tensors)
{
	static rbln_tensor *(*const device1[])(rbln_tensor *) = {
		rbln_neg, rbln_abs, rbln_relu, rbln_sum, rbln_amax, rbln_clone,
	};
	static rbln_tensor *(*const cpu1[])(rbln_tensor *) = {
		rbln_exp, rbln_log, rbln_tanh, rbln_softmax,
	};
	static rbln_tensor *(*const device2[])(rbln_tensor *, rbln_tensor *) = {
		rbln_add, rbln_sub, rbln_mul, rbln_div, rbln_maximum, rbln_minimum, rbln_matmul,
	};
	static rbln_tensor *(*const scalar[])(rbln_tensor *, double) = {
		rbln_add_scalar, rbln_sub_scalar, rbln_mul_scalar, rbln_div_scalar,
		rbln_maximum_scalar, rbln_minimum_scalar,
	};
	int64_t shape[2] = { 2, 2 }, idx[2] = { 0, 0 };
	rbln_tensor *a = rbln_tensor_zeros(shape, 2, RBLN_F32, 0);
	rbln_tensor *cpu = rbln_tensor_zeros(shape, 2, RBLN_F32, RBLN_CPU);
	rbln_tensor *gone = rbln_tensor_zeros(shape, 2, RBLN_F32, 0);
	double v;
	size_t i;

	rbln_tensor_free(gone);
	for (i = 0; i < sizeof(device1) / sizeof(device1[0]); i++) {
		EXPECT_EQ(NULL, device1[i](NULL)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, device1[i](gone)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, device1[i](cpu)) TH_LOG("op %zu", i);
		EXPECT_NE(NULL, strstr(rbln_last_error(), "CPU tensor"));
	}
	for (i = 0; i < sizeof(cpu1) / sizeof(cpu1[0]); i++) {
		EXPECT_EQ(NULL, cpu1[i](NULL)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, cpu1[i](gone)) TH_LOG("op %zu", i);
		EXPECT_NE(NULL, strstr(rbln_last_error(), "not a live tensor"));
	}
	for (i = 0; i < sizeof(device2) / sizeof(device2[0]); i++) {
		EXPECT_EQ(NULL, device2[i](NULL, a)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, device2[i](a, gone)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, device2[i](cpu, cpu)) TH_LOG("op %zu", i);
	}
	for (i = 0; i < sizeof(scalar) / sizeof(scalar[0]); i++) {
		EXPECT_EQ(NULL, scalar[i](NULL, 1)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, scalar[i](gone, 1)) TH_LOG("op %zu", i);
		EXPECT_EQ(NULL, scalar[i](cpu, 1)) TH_LOG("op %zu", i);
	}
	EXPECT_EQ(NULL, rbln_cast(NULL, RBLN_F16));
	EXPECT_EQ(NULL, rbln_cast(cpu, RBLN_F16));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_copy(NULL, a));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_copy(a, cpu));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_item(NULL, idx, &v));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_item(gone, idx, &v));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_print(NULL, stderr));
	rbln_tensor_free(a);
	rbln_tensor_free(cpu);
}

TEST(rejections)
{
	int64_t s2[2] = { 2, 3 }, s3[2] = { 3, 2 }, s1[1] = { 4 };
	rbln_tensor *a = rbln_tensor_zeros(s2, 2, RBLN_F32, 0);
	rbln_tensor *b = rbln_tensor_zeros(s3, 2, RBLN_F32, 0);
	rbln_tensor *h = rbln_tensor_zeros(s2, 2, RBLN_F16, 0);
	rbln_tensor *other = rbln_tensor_zeros(s2, 2, RBLN_F32, 1);
	rbln_tensor *cpu = rbln_tensor_zeros(s2, 2, RBLN_F32, RBLN_CPU);
	rbln_tensor *v = rbln_tensor_zeros(s1, 1, RBLN_F32, 0);
	int64_t se[2] = { 2, 0 };
	rbln_tensor *empty_rows = rbln_tensor_zeros(se, 2, RBLN_F32, 0), *c, *gone;
	int64_t before;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	before = rbln_memory_allocated(0);

	EXPECT_EQ(NULL, rbln_add(a, NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL tensor"));
	EXPECT_EQ(NULL, rbln_add(a, b));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "shapes differ"));
	EXPECT_EQ(NULL, rbln_mul(a, h));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "dtypes differ"));
	EXPECT_EQ(NULL, rbln_sub(a, other));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "different devices (rbln:0 and rbln:1)"));
	EXPECT_EQ(NULL, rbln_add(a, cpu));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "CPU tensor"));
	EXPECT_EQ(NULL, rbln_relu(cpu));
	EXPECT_EQ(NULL, rbln_cast(a, (rbln_dtype)9));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "unknown dtype"));
	EXPECT_EQ(NULL, rbln_matmul(a, a));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "matmul"));
	EXPECT_EQ(NULL, rbln_matmul(v, v));
	EXPECT_EQ(NULL, rbln_matmul(a, h));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_copy(a, b));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_copy(a, other));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_fill(cpu, 1));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_fill(NULL, 1));
	EXPECT_EQ(NULL, rbln_exp(NULL));
	EXPECT_EQ(NULL, rbln_sum(NULL));
	/* A freed tensor's handle is caught, not undefined behaviour. */
	gone = rbln_tensor_zeros(s2, 2, RBLN_F32, 0);
	rbln_tensor_free(gone);
	EXPECT_EQ(NULL, rbln_add(a, gone));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not a live tensor"));
	EXPECT_EQ(NULL, rbln_softmax(gone));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_fill(gone, 1));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_print(gone, stderr));
	/* Reducing empty rows has no value to give. */
	EXPECT_EQ(NULL, rbln_amax(empty_rows));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "last dimension is empty"));
	/* Nothing leaked: no result was allocated by a rejected op. */
	EXPECT_EQ(before, rbln_memory_allocated(0));
	/* And the runtime still works. */
	c = rbln_add(a, a);
	EXPECT_NE(NULL, c);
	rbln_tensor_free(c);
	rbln_tensor_free(empty_rows);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(h);
	rbln_tensor_free(other);
	rbln_tensor_free(cpu);
	rbln_tensor_free(v);
}

/* Freed results go back to the cache; stats see the op's output. */
TEST(results_use_the_caching_allocator)
{
	int64_t shape[1] = { 1024 };
	rbln_tensor *a = rbln_tensor_zeros(shape, 1, RBLN_F32, 1), *c;
	struct rbln_memory_stats s0, s1;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s0));
	c = rbln_neg(a);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s1));
	EXPECT_EQ(s0.allocated.current + 4096, s1.allocated.current);
	EXPECT_EQ(s0.lazy_tensors, s1.lazy_tensors);
	rbln_tensor_free(c);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s1));
	EXPECT_EQ(s0.allocated.current, s1.allocated.current);
	EXPECT_EQ(s0.reserved.current, s1.reserved.current);
	rbln_tensor_free(a);
}

struct worker {
	int device;
	int iterations;
	bool ok;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	int64_t shape[1] = { 257 };
	int i;

	w->ok = true;
	for (i = 0; i < w->iterations && w->ok; i++) {
		rbln_tensor *a = rbln_tensor_full(shape, 1, RBLN_I32, i, w->device);
		rbln_tensor *b = rbln_add_scalar(a, 1000);
		rbln_tensor *c = rbln_add(a, b);
		/* Sharded, a vector's sum gathers it: the threads' gathers cross. */
		rbln_tensor *s = rbln_sum(c);
		int32_t out[257], sum = 0;

		w->ok = c && s && rbln_tensor_read(c, out, sizeof(out)) == RBLN_OK &&
			out[0] == 2 * i + 1000 && out[256] == 2 * i + 1000 &&
			rbln_tensor_read(s, &sum, sizeof(sum)) == RBLN_OK &&
			sum == 257 * (2 * i + 1000);
		rbln_tensor_free(a);
		rbln_tensor_free(b);
		rbln_tensor_free(c);
		rbln_tensor_free(s);
	}
	return NULL;
}

TEST(threads_dispatch_at_once)
{
	struct worker w[4] = { { 0, 40, false }, { 0, 40, false }, { 1, 40, false }, { 1, 40, false } };
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_create(&t[i], NULL, hammer, &w[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		EXPECT_TRUE(w[i].ok) TH_LOG("worker %d", i);
	}
}

/* Counts of one region around @fn's ops, from explain()'s dump. */
struct counts {
	int64_t warm, recompile, fallback, bounces, bounce_bytes;
};

static struct counts explained(void (*fn)(void *), void *arg)
{
	struct rbln_explain_dump d;
	struct counts c = { -1, -1, -1, -1, -1 };
	rbln_explain *e = rbln_explain_begin(false);

	if (!e)
		return c;
	fn(arg);
	if (rbln_explain_end(e) == RBLN_OK && rbln_explain_dump(e, &d) == RBLN_OK)
		c = (struct counts) { d.dispatch.warm_hit.count, d.dispatch.recompile.count,
				      d.dispatch.cpu_fallback.count, d.host_bounce.count,
				      d.host_bounce.bytes };
	rbln_explain_free(e);
	return c;
}

static void add_free(rbln_tensor *a, rbln_tensor *b)
{
	rbln_tensor_free(rbln_add(a, b));
}

/* A new (op, dtypes, shapes) compiles once; the same again is a warm hit. */
static void cache_sequence(void *arg)
{
	rbln_tensor **t = arg;	/* [0], [1]: f32 [7,11]; [2]: f32 [11,7]; [3]: i8 [7,11] */

	add_free(t[0], t[1]);			/* recompile: the first f32 [7,11] add */
	add_free(t[1], t[0]);			/* warm hit */
	add_free(t[2], t[2]);			/* recompile: another shape */
	add_free(t[3], t[3]);			/* recompile: another dtype */
	rbln_tensor_free(rbln_add_scalar(t[0], 1));	/* recompile: another op */
	rbln_tensor_free(rbln_add_scalar(t[0], 2));	/* warm hit: the scalar is an operand */
	rbln_tensor_free(rbln_mul_scalar(t[0], 2));	/* recompile */
	add_free(t[0], t[1]);			/* warm hit */
}

static void fallback_sequence(void *arg)
{
	rbln_tensor **t = arg;

	rbln_tensor_free(rbln_softmax(t[0]));	/* 308 bytes there and back */
	rbln_tensor_free(rbln_exp(t[4]));	/* a lazy tensor: no bounce */
}

TEST(program_cache_and_explain)
{
	/* Shapes no other test uses, so the first region starts cold. */
	int64_t s1[2] = { 7, 11 }, s2[2] = { 11, 7 };
	rbln_tensor *t[5] = {
		rbln_tensor_rand(s1, 2, RBLN_F32, 1, 0), rbln_tensor_rand(s1, 2, RBLN_F32, 2, 0),
		rbln_tensor_rand(s2, 2, RBLN_F32, 3, 0), rbln_tensor_rand(s1, 2, RBLN_I8, 4, 0),
		rbln_tensor_rand(s1, 2, RBLN_F32, 5, 0),
	};
	struct counts c;
	int i;

	c = explained(cache_sequence, t);
	EXPECT_EQ(5, c.recompile);
	EXPECT_EQ(3, c.warm);
	EXPECT_EQ(0, c.fallback);
	EXPECT_EQ(0, c.bounces);
	/* Everything known now: the same sequence is warm hits only. */
	c = explained(cache_sequence, t);
	EXPECT_EQ(0, c.recompile);
	EXPECT_EQ(8, c.warm);
	c = explained(fallback_sequence, t);
	EXPECT_EQ(2, c.fallback);
	EXPECT_EQ(0, c.recompile);
	EXPECT_EQ(2, c.bounces);
	EXPECT_EQ(2 * 77 * 4, c.bounce_bytes);
	for (i = 0; i < 5; i++)
		rbln_tensor_free(t[i]);
}

/*
 * In a child, as the fault bans the process's context on the device: an
 * op whose job faults is reported by the next synchronize, once, and the
 * ops after it fail too.
 */
static int fault_child(void)
{
	int64_t shape[1] = { 64 };
	rbln_tensor *a = rbln_tensor_full(shape, 1, RBLN_F32, 1, 0), *b;
	char link[256], inject_path[300], *bus_name;
	ssize_t n;
	FILE *f;

	if (!a || rbln_tensor_materialize(a) || rbln_synchronize(0))
		return 10;
	/* debugfs names the device after its bus device, emulated or PCI. */
	n = readlink("/sys/class/accel/accel0/device", link, sizeof(link) - 1);
	if (n <= 0)
		return 15;
	link[n] = 0;
	bus_name = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	snprintf(inject_path, sizeof(inject_path), "/sys/kernel/debug/accel/%s/inject", bus_name);
	f = fopen(inject_path, "we");
	if (!f || fputs("fault", f) == EOF || fclose(f))
		return 11;
	b = rbln_neg(a);
	if (!b)
		return 12;
	if (rbln_synchronize(0) != RBLN_ERROR_DEVICE ||
	    !strstr(rbln_last_error(), "device work failed: Bad address"))
		return 13;
	rbln_tensor_free(b);
	b = rbln_neg(a);
	if (b && rbln_synchronize(0) != RBLN_ERROR_DEVICE)
		return 14;
	return 0;
}

TEST(device_faults_are_reported)
{
	int status;
	pid_t pid = fork();

	if (!pid)
		_exit(fault_child());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
