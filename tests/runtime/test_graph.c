// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_graph - librbln's graphs against the real driver: replays equal
 * eager runs bit for bit (every op and dtype), replays read new inputs,
 * everything that invalidates a capture, members ordered within a replay,
 * replays beside another thread's and another process's work, a graph
 * freed while its replay runs, 10,000 replays without growth, the graph's
 * memory in the statistics, explain(), and every rejection
 *
 * Run in the VM with emu_devices=2, and on logical devices of two NPUs
 * (RBLN_DEVICE_MAP=[0,1],[2,3]): there every tensor is sharded.
 */

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rbln/rbln.h>

#include "kselftest_harness.h"

static const rbln_dtype dtypes[] = { RBLN_F32, RBLN_F16, RBLN_BF16, RBLN_I32, RBLN_I8 };
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* Random data with NaN, +-inf and -0 among it, materialized on @device. */
static rbln_tensor *input(const int64_t *shape, int ndim, rbln_dtype dt, uint64_t seed, int device)
{
	static const double specials[] = { NAN, INFINITY, -INFINITY, -0.0, 65504, 0.5 };
	rbln_tensor *c = rbln_tensor_rand(shape, ndim, dt, seed, RBLN_CPU), *t;
	int64_t n = rbln_tensor_numel(c);
	size_t i;

	for (i = 0; i < sizeof(specials) / sizeof(specials[0]) && (int64_t)i * 5 < n &&
	     dt != RBLN_I32 && dt != RBLN_I8; i++) {
		rbln_tensor *s = rbln_tensor_full(NULL, 0, dt, specials[i], RBLN_CPU);
		char *p = malloc(rbln_tensor_nbytes(c));
		size_t e = rbln_dtype_size(dt);

		rbln_tensor_read(c, p, rbln_tensor_nbytes(c));
		rbln_tensor_read(s, p + i * 5 * e, e);
		rbln_tensor_free(c);
		c = rbln_tensor_from_data(p, shape, ndim, dt, RBLN_CPU);
		free(p);
		rbln_tensor_free(s);
	}
	t = rbln_tensor_to(c, device, false);
	rbln_tensor_free(c);
	if (t && rbln_tensor_materialize(t)) {
		rbln_tensor_free(t);
		t = NULL;
	}
	return t;
}

#define MAX_OUTS 40

/*
 * Every device op on @a and @b (same shape [4, 6, 8]), @w ([4, 8, 5]) and
 * @w2 ([8, 5]), results in @out; the in-place ones on @io. How many, or
 * -1 if one failed. On a logical device, the matmul by @w2 and the sum of
 * a vector read other members' shards.
 */
static int every_op(rbln_tensor *a, rbln_tensor *b, rbln_tensor *w, rbln_tensor *w2,
		    rbln_tensor *io, rbln_tensor **out)
{
	rbln_tensor *(*const binary[])(rbln_tensor *, rbln_tensor *) = {
		rbln_add, rbln_sub, rbln_mul, rbln_div, rbln_maximum, rbln_minimum,
	};
	rbln_tensor *(*const scalar[])(rbln_tensor *, double) = {
		rbln_add_scalar, rbln_sub_scalar, rbln_mul_scalar, rbln_div_scalar,
		rbln_maximum_scalar, rbln_minimum_scalar,
	};
	rbln_tensor *(*const unary[])(rbln_tensor *) = {
		rbln_neg, rbln_abs, rbln_relu, rbln_sum, rbln_amax, rbln_clone,
	};
	int n = 0;
	size_t i;

	for (i = 0; i < sizeof(binary) / sizeof(binary[0]); i++)
		out[n++] = binary[i](a, b);
	for (i = 0; i < sizeof(scalar) / sizeof(scalar[0]); i++)
		out[n++] = scalar[i](a, 3.0);
	for (i = 0; i < sizeof(unary) / sizeof(unary[0]); i++)
		out[n++] = unary[i](a);
	for (i = 0; i < NDTYPES; i++)
		out[n++] = rbln_cast(a, dtypes[i]);
	out[n++] = rbln_matmul(a, w);
	out[n] = rbln_add(out[0], out[2]);	/* a chain */
	n++;
	out[n] = rbln_relu(out[n - 1]);
	n++;
	out[n++] = rbln_matmul(a, w2);	/* every member needs all of w2 */
	out[n] = rbln_sum(out[15]);	/* [4, 6] to [4], then to a scalar */
	n++;
	out[n] = rbln_sum(out[n - 1]);
	n++;
	for (i = 0; i < (size_t)n; i++)
		if (!out[i])
			return -1;
	if (rbln_copy(io, b) || rbln_fill(b, 2.0))
		return -1;
	out[n] = rbln_mul(io, b);
	return out[n] ? n + 1 : -1;
}

static void free_all(rbln_tensor **t, int n)
{
	while (n-- > 0)
		rbln_tensor_free(t[n]);
}

/* Do @n tensors of @x and @y hold the same bytes? */
static bool same_bytes(rbln_tensor **x, rbln_tensor **y, int n, int *which)
{
	int i;

	for (i = 0; i < n; i++) {
		size_t len = rbln_tensor_nbytes(x[i]);
		char *p = malloc(len + 1), *q = malloc(len + 1);
		bool same = p && q && len == rbln_tensor_nbytes(y[i]) &&
			    !rbln_tensor_read(x[i], p, len) && !rbln_tensor_read(y[i], q, len) &&
			    !memcmp(p, q, len);

		free(p);
		free(q);
		if (!same) {
			*which = i;
			return false;
		}
	}
	return true;
}

TEST(replay_equals_eager_for_every_op_and_dtype)
{
	int64_t sa[3] = { 4, 6, 8 }, sw[3] = { 4, 8, 5 };
	size_t d;

	for (d = 0; d < NDTYPES; d++) {
		rbln_dtype dt = dtypes[d];
		rbln_tensor *eager[MAX_OUTS], *replayed[MAX_OUTS];
		rbln_tensor *a = input(sa, 3, dt, 1 + d, 0), *b = input(sa, 3, dt, 50 + d, 0);
		rbln_tensor *w = input(sw, 3, dt, 90 + d, 0), *io = input(sa, 3, dt, 7, 0);
		rbln_tensor *w2 = input(&sw[1], 2, dt, 95 + d, 0), *b0 = rbln_clone(b);
		rbln_graph *g = NULL;
		int n, m, which = -1;

		ASSERT_TRUE(a && b && w && w2 && io && b0) TH_LOG("%s", rbln_last_error());
		n = every_op(a, b, w, w2, io, eager);
		ASSERT_LT(0, n) TH_LOG("dtype %d: %s", dt, rbln_last_error());

		/* The same from the same inputs, captured: b was filled, put it back. */
		ASSERT_EQ(RBLN_OK, rbln_copy(b, b0));
		ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
		EXPECT_EQ(0, rbln_graph_capturing());
		m = every_op(a, b, w, w2, io, replayed);
		ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g)) TH_LOG("%s", rbln_last_error());
		ASSERT_EQ(n, m) TH_LOG("dtype %d: %s", dt, rbln_last_error());
		EXPECT_EQ(-1, rbln_graph_capturing());
		EXPECT_EQ(n + 2, rbln_graph_ops(g));	/* with the copy and the fill */
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
		EXPECT_TRUE(same_bytes(eager, replayed, n, &which))
			TH_LOG("dtype %d: result %d differs", dt, which);

		/* Again, with the inputs as they were: the same bits once more. */
		ASSERT_EQ(RBLN_OK, rbln_copy(b, b0));
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		EXPECT_TRUE(same_bytes(eager, replayed, n, &which))
			TH_LOG("dtype %d: second replay, result %d differs", dt, which);

		rbln_graph_free(g);
		free_all(eager, n);
		free_all(replayed, m);
		rbln_tensor_free(a);
		rbln_tensor_free(b);
		rbln_tensor_free(b0);
		rbln_tensor_free(w);
		rbln_tensor_free(w2);
		rbln_tensor_free(io);
	}
}

/* @t's int32 elements all equal @v? */
static bool all_i32(rbln_tensor *t, int32_t v)
{
	int64_t n = rbln_tensor_numel(t), i;
	int32_t *p = malloc(n * sizeof(*p));
	bool ok = p && !rbln_tensor_read(t, p, n * sizeof(*p));

	for (i = 0; ok && i < n; i++)
		ok = p[i] == v;
	free(p);
	return ok;
}

TEST(captured_ops_run_only_when_replayed_and_read_new_inputs)
{
	int64_t shape[2] = { 3, 1000 };
	rbln_tensor *x = rbln_tensor_full(shape, 2, RBLN_I32, 1, 0);
	rbln_tensor *y = rbln_tensor_full(shape, 2, RBLN_I32, 0, 0);
	rbln_tensor *t1, *t2, *fresh;
	rbln_graph *g;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(y));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	/* y = relu(x * 3 - 5): the temporaries are freed at once, the graph keeps them */
	t1 = rbln_mul_scalar(x, 3);
	t2 = rbln_sub_scalar(t1, 5);
	rbln_tensor_free(t1);
	ASSERT_EQ(RBLN_OK, rbln_copy(y, rbln_relu(t2)));
	rbln_tensor_free(t2);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(4, rbln_graph_ops(g));

	/* Recorded, not run. */
	EXPECT_TRUE(all_i32(y, 0));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	EXPECT_TRUE(all_i32(y, 0));	/* relu(-2) */

	for (i = 2; i < 6; i++) {
		fresh = rbln_tensor_full(shape, 2, RBLN_I32, i, 0);
		ASSERT_EQ(RBLN_OK, rbln_copy(x, fresh));
		rbln_tensor_free(fresh);
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		EXPECT_TRUE(all_i32(y, 3 * i - 5)) TH_LOG("input %d", i);
	}
	/* The caller's handle to x goes; the graph keeps its memory. */
	rbln_tensor_free(x);
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	EXPECT_TRUE(all_i32(y, 10));
	rbln_graph_free(g);
	rbln_tensor_free(y);
}

TEST(tensors_created_while_capturing_live_in_the_graph)
{
	int64_t shape[1] = { 4096 };
	rbln_tensor *z, *f, *e, *s;
	rbln_graph *g;
	int32_t out[4096];

	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	z = rbln_tensor_zeros(shape, 1, RBLN_I32, 0);
	f = rbln_tensor_full(shape, 1, RBLN_I32, 7, 0);
	e = rbln_tensor_empty(shape, 1, RBLN_I32, 0);
	ASSERT_TRUE(z && f && e) TH_LOG("%s", rbln_last_error());
	EXPECT_TRUE(rbln_tensor_is_materialized(z));
	EXPECT_TRUE(rbln_tensor_is_materialized(e));
	s = rbln_add(z, f);
	ASSERT_NE(NULL, s);
	ASSERT_EQ(RBLN_OK, rbln_copy(e, s));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g)) TH_LOG("%s", rbln_last_error());
	/* zeros and full are captured fills. */
	EXPECT_EQ(4, rbln_graph_ops(g));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(e, out, sizeof(out)));
	EXPECT_EQ(7, out[0]);
	EXPECT_EQ(7, out[4095]);
	/* A replay fills z again: what was written there in between is gone. */
	ASSERT_EQ(RBLN_OK, rbln_fill(z, 100));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	EXPECT_TRUE(all_i32(e, 7));
	rbln_tensor_free(z);
	rbln_tensor_free(f);
	rbln_tensor_free(e);
	rbln_tensor_free(s);
	rbln_graph_free(g);
}

/* What a thread can do in a capture that a replay cannot repeat. */
enum bad { SYNC, ITEM, READ, TO_CPU, TO_DEVICE, FALLBACK, PRINT, FROM_DATA, RAND,
	   MATERIALIZE, LAZY_OPERAND, REPLAY, NBAD };

static const char *const bad_name[NBAD] = {
	"rbln_synchronize", "rbln_tensor_item", "rbln_tensor_read", "rbln_tensor_to",
	"rbln_tensor_to", "exp", "rbln_tensor_print", "rbln_tensor_from_data",
	"rbln_tensor_rand", "rbln_tensor_materialize", "add", "rbln_graph_replay",
};

/* Does @bad; its status, *@made a tensor it made (freed by the caller). */
static rbln_status do_bad(enum bad bad, rbln_tensor *x, rbln_tensor *lazy, rbln_graph *other,
			  rbln_tensor **made)
{
	int64_t shape[2] = { 2, 64 }, idx[2] = { 0, 0 }, n = 2 * 64;
	int32_t buf[128] = { 0 };
	double v;
	FILE *f;
	rbln_status st;

	*made = NULL;
	switch (bad) {
	case SYNC:
		return rbln_synchronize(0);
	case ITEM:
		return rbln_tensor_item(x, idx, &v);
	case READ:
		return rbln_tensor_read(x, buf, sizeof(buf));
	case TO_CPU:
		*made = rbln_tensor_to(x, RBLN_CPU, false);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	case TO_DEVICE: {
		rbln_tensor *c = rbln_tensor_full(shape, 2, RBLN_I32, 1, RBLN_CPU);

		*made = rbln_tensor_to(c, 0, false);
		rbln_tensor_free(c);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	}
	case FALLBACK:
		*made = rbln_exp(x);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	case PRINT:
		f = fopen("/dev/null", "w");
		st = rbln_tensor_print(x, f);
		fclose(f);
		return st;
	case FROM_DATA:
		*made = rbln_tensor_from_data(buf, shape, 2, RBLN_I32, 0);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	case RAND:
		*made = rbln_tensor_rand(shape, 2, RBLN_I32, n, 0);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	case MATERIALIZE:
		return rbln_tensor_materialize(lazy);
	case LAZY_OPERAND:
		*made = rbln_add(x, lazy);
		return *made ? RBLN_OK : RBLN_ERROR_CAPTURE;
	case REPLAY:
		return rbln_graph_replay(other);
	case NBAD:
		break;
	}
	return RBLN_ERROR_INVALID;
}

TEST(what_a_replay_cannot_repeat_invalidates_the_capture)
{
	int64_t shape[2] = { 2, 64 };
	int64_t before;
	int bad;

	for (bad = 0; bad < NBAD; bad++) {
		rbln_tensor *x = rbln_tensor_full(shape, 2, RBLN_I32, 3, 0);
		rbln_tensor *lazy = rbln_tensor_full(shape, 2, RBLN_I32, 4, 0);
		rbln_tensor *y, *z, *made;
		rbln_graph *other, *g = (rbln_graph *)&bad;
		char msg[512];

		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
		ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
		rbln_tensor_free(rbln_neg(x));
		ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&other));
		ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
		before = rbln_memory_allocated(0);

		ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
		y = rbln_add(x, x);
		ASSERT_NE(NULL, y);
		EXPECT_EQ(RBLN_ERROR_CAPTURE, do_bad(bad, x, lazy, other, &made))
			TH_LOG("%s", bad_name[bad]);
		rbln_tensor_free(made);
		snprintf(msg, sizeof(msg), "%s", rbln_last_error());
		EXPECT_NE(NULL, strstr(msg, bad_name[bad])) TH_LOG("%s: %s", bad_name[bad], msg);
		/* Later ops on the device fail too, naming the first cause. */
		z = rbln_mul(x, x);
		EXPECT_EQ(NULL, z);
		EXPECT_NE(NULL, strstr(rbln_last_error(), "invalidated by"));
		EXPECT_NE(NULL, strstr(rbln_last_error(), bad_name[bad]))
			TH_LOG("%s: %s", bad_name[bad], rbln_last_error());
		EXPECT_EQ(RBLN_ERROR_CAPTURE, rbln_graph_capture_end(&g));
		EXPECT_EQ(NULL, g);
		EXPECT_NE(NULL, strstr(rbln_last_error(), bad_name[bad]))
			TH_LOG("%s: %s", bad_name[bad], rbln_last_error());
		EXPECT_EQ(-1, rbln_graph_capturing());

		/* Nothing held: freeing y gives its memory back. */
		rbln_tensor_free(y);
		EXPECT_EQ(RBLN_OK, rbln_synchronize(0));
		EXPECT_EQ(before, rbln_memory_allocated(0)) TH_LOG("%s", bad_name[bad]);
		/* And the device works as before. */
		y = rbln_add(x, x);
		ASSERT_NE(NULL, y) TH_LOG("%s: %s", bad_name[bad], rbln_last_error());
		EXPECT_TRUE(all_i32(y, 6));
		EXPECT_EQ(RBLN_OK, rbln_graph_replay(other));
		rbln_tensor_free(y);
		rbln_graph_free(other);
		rbln_tensor_free(x);
		rbln_tensor_free(lazy);
	}
}

/* @t's f32 elements, read back (the caller frees them). */
static float *floats(rbln_tensor *t)
{
	float *p = malloc(rbln_tensor_nbytes(t));

	if (p && rbln_tensor_read(t, p, rbln_tensor_nbytes(t))) {
		free(p);
		return NULL;
	}
	return p;
}

TEST(members_read_each_others_shards_in_order)
{
	int64_t sx[2] = { 64, 32 }, sw[2] = { 32, 48 };
	rbln_tensor *x = input(sx, 2, RBLN_F32, 3, 0), *w = input(sw, 2, RBLN_F32, 4, 0);
	rbln_tensor *w0 = rbln_clone(w), *w2, *y, *e1, *e2, *ey;
	rbln_graph *g;
	float *got, *want;
	int r;

	ASSERT_TRUE(x && w && w0);
	/*
	 * Eagerly: w2 = w * 2 written shard by shard, y = x @ w2 gathers all
	 * of w2 on every member, then w is overwritten: a replay must order
	 * the gather after the scale and before the fill, on every member.
	 */
	e1 = rbln_mul_scalar(w, 2);
	ey = rbln_matmul(x, e1);
	ASSERT_TRUE(e1 && ey);
	want = floats(ey);
	ASSERT_NE(NULL, want);

	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	w2 = rbln_mul_scalar(w, 2);
	y = rbln_matmul(x, w2);
	ASSERT_NE(NULL, y) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_fill(w, -1000));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g)) TH_LOG("%s", rbln_last_error());
	for (r = 0; r < 20; r++) {
		ASSERT_EQ(RBLN_OK, rbln_copy(w, w0));
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		got = floats(y);
		ASSERT_NE(NULL, got);
		EXPECT_EQ(0, memcmp(got, want, 64 * 48 * sizeof(float))) TH_LOG("replay %d", r);
		free(got);
	}
	/* Work queued on a member after a replay runs after its gathers. */
	for (r = 0; r < 20; r++) {
		ASSERT_EQ(RBLN_OK, rbln_copy(w, w0));
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		e2 = rbln_tensor_full(sw, 2, RBLN_F32, 7, 0);
		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(e2));
		ASSERT_EQ(RBLN_OK, rbln_copy(w2, e2));
		rbln_tensor_free(e2);
		got = floats(y);
		ASSERT_NE(NULL, got);
		EXPECT_EQ(0, memcmp(got, want, 64 * 48 * sizeof(float))) TH_LOG("replay %d", r);
		free(got);
	}
	free(want);
	rbln_graph_free(g);
	rbln_tensor_free(w2);
	rbln_tensor_free(y);
	rbln_tensor_free(e1);
	rbln_tensor_free(ey);
	rbln_tensor_free(x);
	rbln_tensor_free(w);
	rbln_tensor_free(w0);
}

TEST(rejections)
{
	int64_t shape[1] = { 8 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_F32, 1, 0), *c;
	rbln_graph *g = NULL;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_capture_end(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_capture_end(&g));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not capturing"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_graph_capture_begin(99));
	EXPECT_EQ(-1, rbln_graph_capturing());

	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(-1));
	EXPECT_EQ(rbln_current_device(), rbln_graph_capturing());
	EXPECT_EQ(RBLN_ERROR_BUSY, rbln_graph_capture_begin(0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "captures on rbln:0 already"));
	/* BUSY invalidates nothing. */
	c = rbln_add(x, x);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	ASSERT_NE(NULL, g);

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_replay(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_ops(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_replay((rbln_graph *)x));
	EXPECT_EQ(RBLN_OK, rbln_graph_replay(g));
	rbln_graph_free(g);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_replay(g));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not a live graph"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_graph_ops(g));
	rbln_graph_free(g);	/* twice: refused, no harm */
	EXPECT_NE(NULL, strstr(rbln_last_error(), "freed already"));
	rbln_graph_free(NULL);

	/* An empty capture is a graph that does nothing. */
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	EXPECT_EQ(0, rbln_graph_ops(g));
	EXPECT_EQ(RBLN_OK, rbln_graph_replay(g));
	rbln_graph_free(g);
	EXPECT_EQ(RBLN_OK, rbln_synchronize(0));
	rbln_tensor_free(c);
	rbln_tensor_free(x);
}

struct eager_worker {
	int device, iterations;
	bool ok;
};

static void *eager_work(void *arg)
{
	struct eager_worker *w = arg;
	int64_t shape[1] = { 777 };
	int i;

	w->ok = true;
	for (i = 0; i < w->iterations && w->ok; i++) {
		rbln_tensor *a = rbln_tensor_full(shape, 1, RBLN_I32, i, w->device);
		rbln_tensor *b = rbln_add_scalar(a, 5);

		w->ok = b && all_i32(b, i + 5);
		rbln_tensor_free(a);
		rbln_tensor_free(b);
	}
	return NULL;
}

TEST(replays_beside_other_threads_work_on_the_device)
{
	struct eager_worker w = { 0, 60, false };
	int64_t shape[1] = { 4096 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_I32, 0, 0), *t, *fresh;
	rbln_graph *g;
	pthread_t th;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	/* The capture is this thread's: the other thread's ops run. */
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	ASSERT_EQ(0, pthread_create(&th, NULL, eager_work, &w));
	for (i = 0; i < 20; i++) {
		t = rbln_add_scalar(x, 1);
		ASSERT_EQ(RBLN_OK, rbln_copy(x, t));
		rbln_tensor_free(t);
	}
	pthread_join(th, NULL);
	EXPECT_TRUE(w.ok);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	EXPECT_EQ(40, rbln_graph_ops(g));

	w.ok = false;
	ASSERT_EQ(0, pthread_create(&th, NULL, eager_work, &w));
	for (i = 0; i < 50; i++)
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	pthread_join(th, NULL);
	EXPECT_TRUE(w.ok);
	EXPECT_TRUE(all_i32(x, 50 * 20));
	/* Replays are ordered with the thread's own work on the device. */
	fresh = rbln_tensor_full(shape, 1, RBLN_I32, -7, 0);
	ASSERT_EQ(RBLN_OK, rbln_copy(x, fresh));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	ASSERT_EQ(RBLN_OK, rbln_fill(fresh, 0));
	EXPECT_TRUE(all_i32(x, 13));
	rbln_tensor_free(fresh);
	rbln_graph_free(g);
	rbln_tensor_free(x);
}

TEST(replays_beside_another_process_queue_on_the_device)
{
	struct eager_worker w = { 0, 150, false };
	int64_t shape[1] = { 4096 };
	rbln_tensor *x, *t;
	rbln_graph *g;
	int i, status;
	pid_t pid;

	/* Before this process opens the device: the child has a file and queue of its own. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		eager_work(&w);
		_exit(w.ok ? 0 : 1);
	}
	x = rbln_tensor_full(shape, 1, RBLN_I32, 0, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	for (i = 0; i < 8; i++) {
		t = rbln_add_scalar(x, 3);
		ASSERT_EQ(RBLN_OK, rbln_copy(x, t));
		rbln_tensor_free(t);
	}
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	for (i = 1; i <= 100; i++) {
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
		if (i % 10 == 0)
			EXPECT_TRUE(all_i32(x, 24 * i)) TH_LOG("replay %d", i);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rbln_graph_free(g);
	rbln_tensor_free(x);
}

TEST(a_graph_and_its_tensors_freed_while_the_replay_runs)
{
	/* Big enough that the replay is still running when everything is freed. */
	int64_t shape[2] = { 16, 16384 }, xbytes = 16 * 16384 * 4;
	rbln_tensor *x = rbln_tensor_full(shape, 2, RBLN_I32, 1, 0), *t, *after;
	int64_t before;
	rbln_graph *g;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	before = rbln_memory_allocated(0);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	for (i = 0; i < 16; i++) {
		t = rbln_mul_scalar(x, 2);
		ASSERT_EQ(RBLN_OK, rbln_copy(x, t));
		rbln_tensor_free(t);
	}
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	EXPECT_LT(before, rbln_memory_allocated(0));	/* the graph's pool */
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	rbln_graph_free(g);
	rbln_tensor_free(x);
	/* Memory freed under the replay goes to new tensors only after it, in order. */
	after = rbln_tensor_full(shape, 2, RBLN_I32, 5, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(after));
	EXPECT_EQ(RBLN_OK, rbln_synchronize(0)) TH_LOG("%s", rbln_last_error());
	EXPECT_TRUE(all_i32(after, 5));
	rbln_tensor_free(after);
	EXPECT_EQ(RBLN_OK, rbln_synchronize(0));
	EXPECT_EQ(before - xbytes, rbln_memory_allocated(0));
}

TEST(ten_thousand_replays_grow_nothing)
{
	int64_t shape[1] = { 1024 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_F32, 0, 0), *t;
	int64_t allocated, reserved;
	struct rbln_memory_stats s0, s1;
	int fds, i;
	rbln_graph *g;
	float out[1024];

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	t = rbln_add_scalar(x, 1);
	ASSERT_EQ(RBLN_OK, rbln_copy(x, t));
	rbln_tensor_free(t);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	allocated = rbln_memory_allocated(0);
	reserved = rbln_memory_reserved(0);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s0));
	fds = open_fds();
	for (i = 0; i < 10000; i++) {
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g)) TH_LOG("replay %d: %s", i, rbln_last_error());
		if (i % 1000 == 999)
			ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	}
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(x, out, sizeof(out)));
	EXPECT_EQ(10001.0f, out[0]);
	EXPECT_EQ(10001.0f, out[1023]);
	EXPECT_EQ(allocated, rbln_memory_allocated(0));
	EXPECT_EQ(reserved, rbln_memory_reserved(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s1));
	EXPECT_EQ(s0.num_device_alloc, s1.num_device_alloc);
	EXPECT_EQ(s0.allocated.total_allocated, s1.allocated.total_allocated);
	EXPECT_EQ(fds, open_fds());
	rbln_graph_free(g);
	rbln_tensor_free(x);
}

TEST(the_graph_pool_is_in_the_statistics_until_the_graph_goes)
{
	int64_t shape[1] = { 100000 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_F32, -1, 0), *t, *next, *keep[3];
	int64_t before;
	rbln_graph *g;
	float *out;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	before = rbln_memory_allocated(0);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	/* Three results kept, the caller's to read. */
	for (i = 0; i < 3; i++)
		keep[i] = rbln_mul_scalar(x, i);
	/*
	 * A chain of 50, each result freed once the next is made: a freed
	 * result's memory goes to the next but one, as PyTorch's private
	 * pools do, so the chain needs two blocks, not 50.
	 */
	t = rbln_abs(x);
	for (i = 0; i < 50; i++) {
		next = rbln_add_scalar(t, 1);
		ASSERT_NE(NULL, next);
		rbln_tensor_free(t);
		t = next;
	}
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	EXPECT_EQ(before + 5 * 400000, rbln_memory_allocated(0));
	/* Freed after the capture: the graph keeps it. */
	rbln_tensor_free(keep[2]);
	EXPECT_EQ(before + 5 * 400000, rbln_memory_allocated(0));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	out = floats(t);
	ASSERT_NE(NULL, out);
	EXPECT_EQ(51.0f, out[0]);
	EXPECT_EQ(51.0f, out[99999]);
	free(out);
	out = floats(keep[1]);
	ASSERT_NE(NULL, out);
	EXPECT_EQ(-1.0f, out[99999]);
	free(out);
	rbln_graph_free(g);
	rbln_tensor_free(keep[0]);
	rbln_tensor_free(keep[1]);
	EXPECT_EQ(before + 400000, rbln_memory_allocated(0));
	rbln_tensor_free(t);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	EXPECT_EQ(before, rbln_memory_allocated(0));
	rbln_tensor_free(x);
}

static void *capture_and_exit(void *arg)
{
	rbln_tensor *x = arg;

	if (rbln_graph_capture_begin(0) == RBLN_OK)
		rbln_tensor_free(rbln_neg(x));
	return NULL;	/* without capture_end */
}

TEST(a_thread_that_exits_mid_capture_leaves_nothing)
{
	int64_t shape[1] = { 50000 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_F32, 1, 0);
	int64_t before;
	pthread_t th;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	before = rbln_memory_allocated(0);
	ASSERT_EQ(0, pthread_create(&th, NULL, capture_and_exit, x));
	pthread_join(th, NULL);
	EXPECT_EQ(before, rbln_memory_allocated(0));
	EXPECT_EQ(-1, rbln_graph_capturing());
	rbln_tensor_free(x);
}

TEST(more_ops_than_one_command_buffer_holds)
{
	int64_t shape[1] = { 64 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_I32, 0, 0);
	rbln_tensor *y = rbln_tensor_full(shape, 1, RBLN_I32, 0, 0);
	rbln_graph *g;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(y));
	/* 30,000 packets of 24 and 32 bytes: several command buffers of 256 KiB. */
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	for (i = 1; i <= 15000; i++) {
		ASSERT_EQ(RBLN_OK, rbln_fill(x, i));
		ASSERT_EQ(RBLN_OK, rbln_copy(y, x));
	}
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(30000, rbln_graph_ops(g));
	EXPECT_TRUE(all_i32(y, 0));
	ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	EXPECT_TRUE(all_i32(y, 15000));
	rbln_graph_free(g);
	rbln_tensor_free(x);
	rbln_tensor_free(y);
}

TEST(explain_counts_replays_not_dispatches)
{
	int64_t shape[1] = { 16 };
	rbln_tensor *x = rbln_tensor_full(shape, 1, RBLN_F32, 1, 0), *t[5];
	struct rbln_explain_verdict v;
	struct rbln_explain_dump d;
	rbln_explain *e;
	rbln_graph *g;
	char *json;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_begin(0));
	for (i = 0; i < 5; i++)
		t[i] = rbln_mul_scalar(x, i);
	ASSERT_EQ(RBLN_OK, rbln_graph_capture_end(&g));
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(RBLN_OK, rbln_graph_replay(g));
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(3, d.graph_replay.count);
	EXPECT_EQ(15, d.graph_replay.ops);
	EXPECT_LT(0, d.graph_replay.ns);
	EXPECT_EQ(0, d.dispatch.total.count);
	ASSERT_EQ(RBLN_OK, rbln_explain_verdict(e, &v));
	EXPECT_TRUE(v.clean);
	EXPECT_NE(NULL, strstr(rbln_explain_report(e), "15 captured ops replayed (not overhead)"));
	json = rbln_explain_dump_json(e);
	ASSERT_NE(NULL, json);
	EXPECT_NE(NULL, strstr(json, "\"graph_replay\""));
	free(json);
	rbln_explain_free(e);
	rbln_graph_free(g);
	for (i = 0; i < 5; i++)
		rbln_tensor_free(t[i]);
	rbln_tensor_free(x);
}

TEST_HARNESS_MAIN
