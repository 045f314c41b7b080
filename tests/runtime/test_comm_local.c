// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_comm_local - collectives among the members of a logical device in
 * one process (rbln_comm_init_all()), a thread per member: every
 * collective and dtype on logical devices of 2 and 4 NPUs, bit for bit
 * against tests/common/rbln_ref.h folded in rank order; mismatches
 * between the threads, a thread that never comes (a bounded error),
 * ordering with queued device work, no host traffic in explain(), and
 * every rejection
 *
 * Run in the VM with emu_devices=7 and RBLN_DEVICE_MAP=[0,1],[2,3,4,5],[6]:
 * rbln:0 has 2 members, rbln:1 has 4, rbln:2 is one NPU. A rank's part
 * of a tensor on the logical device is its member's shard: the tests'
 * tensors have one row per member.
 */

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rbln/rbln.h>
#include <rbln/rbln_comm.h>

#include "kselftest_harness.h"
#include "rbln_comm_ref.h"
#include "rbln_ref.h"
#include "rbln_tensor_data.h"

static const rbln_dtype dtypes[] = { RBLN_F32, RBLN_F16, RBLN_BF16, RBLN_I32, RBLN_I8 };
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
static const char *const dtype_names[] = { "f32", "f16", "bf16", "i32", "i8" };
static const rbln_redop redops[] = { RBLN_SUM, RBLN_MAX, RBLN_MIN };
static const uint32_t redop_isa[] = { RBLN_BINARY_ADD, RBLN_BINARY_MAX, RBLN_BINARY_MIN };
static const char *const redop_names[] = { "sum", "max", "min" };

/* Elements of a rank's part: empty, one, odd, not a multiple of the ranks. */
static const int64_t sizes[] = { 0, 1, 7, 1001 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

#define MAXR 4
/* The logical devices of the map, and their members. */
static const int ldevs[] = { 0, 1 };
static const int members[] = { 2, 4 };

/*
 * A [@rows, @m] tensor on @device, row r holding rank r's input @salt
 * (salt 0: every element 3, what no result has), in device memory.
 */
static rbln_tensor *rows_of(int device, rbln_dtype dt, int rows, int64_t m, uint32_t salt)
{
	int64_t shape[2] = { rows, m }, i;
	char *p = malloc(rows * m * rbln_dtype_size(dt) + 1);
	rbln_tensor *t;
	int r;

	for (r = 0; r < rows; r++)
		for (i = 0; i < m; i++)
			ref_put(dt, p, r * m + i, salt ? gen(dt, r, i, salt) : ref_enc(dt, 3));
	t = rbln_tensor_from_data(p, shape, 2, dt, device);
	free(p);
	if (t && rbln_tensor_materialize(t)) {
		rbln_tensor_free(t);
		return NULL;
	}
	return t;
}

enum kind { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, SEND, RECV, SKIP };

/* What each rank's thread calls. */
struct call {
	enum kind kind[MAXR];
	rbln_redop op[MAXR];
	int root[MAXR];
	rbln_tensor *in[MAXR], *out[MAXR];
};

struct job {
	rbln_comm *comm;
	int rank;
	struct call *call;
	rbln_status st;
	char err[512];
	double seconds;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	struct call *c = j->call;
	int r = j->rank;
	double t0 = now();

	switch (c->kind[r]) {
	case ALL_REDUCE:
		j->st = rbln_all_reduce(c->in[r], c->out[r], c->op[r], j->comm);
		break;
	case ALL_GATHER:
		j->st = rbln_all_gather(c->in[r], c->out[r], j->comm);
		break;
	case REDUCE_SCATTER:
		j->st = rbln_reduce_scatter(c->in[r], c->out[r], c->op[r], j->comm);
		break;
	case BROADCAST:
		j->st = rbln_broadcast(c->in[r], c->root[r], j->comm);
		break;
	case SEND:
		j->st = rbln_send(c->in[r], c->root[r], j->comm);
		break;
	case RECV:
		j->st = rbln_recv(c->in[r], c->root[r], j->comm);
		break;
	case SKIP:
		j->st = RBLN_OK;
		break;
	}
	snprintf(j->err, sizeof(j->err), "%s", j->st ? rbln_last_error() : "");
	j->seconds = now() - t0;
	return NULL;
}

/* Every rank's call of @c, each on its own thread, on @comms (@n of them). */
static void run(rbln_comm **comms, int n, struct call *c, struct job *jobs)
{
	pthread_t th[MAXR];
	int r;

	for (r = 0; r < n; r++) {
		jobs[r] = (struct job){ .comm = comms[r], .rank = r, .call = c };
		pthread_create(&th[r], NULL, worker, &jobs[r]);
	}
	for (r = 0; r < n; r++)
		pthread_join(th[r], NULL);
}

/* The same call on every rank, with the same tensors. */
static void same(struct call *c, int n, enum kind kind, rbln_redop op, int root, rbln_tensor *in,
		 rbln_tensor *out)
{
	int r;

	for (r = 0; r < n; r++) {
		c->kind[r] = kind;
		c->op[r] = op;
		c->root[r] = root;
		c->in[r] = in;
		c->out[r] = out;
	}
}

/* Did every rank succeed? Says which did not. */
static bool all_ok(struct __test_metadata *_metadata, const struct job *jobs, int n,
		   const char *what)
{
	bool ok = true;
	int r;

	for (r = 0; r < n; r++)
		if (jobs[r].st) {
			TH_LOG("%s: rank %d: %s: %s", what, r, rbln_status_name(jobs[r].st),
			       jobs[r].err);
			ok = false;
		}
	return ok;
}

/* Did every rank fail with @want, saying @text (the rank at fault: @own_text)? */
static bool all_failed(struct __test_metadata *_metadata, const struct job *jobs, int n,
		       rbln_status want, int at_fault, const char *own_text, const char *text)
{
	bool ok = true;
	int r;

	for (r = 0; r < n; r++) {
		const char *exp = r == at_fault ? own_text : text;

		if (jobs[r].st != want || !strstr(jobs[r].err, exp)) {
			TH_LOG("rank %d: %s \"%s\", expected %s with \"%s\"", r,
			       rbln_status_name(jobs[r].st), jobs[r].err, rbln_status_name(want),
			       exp);
			ok = false;
		}
	}
	return ok;
}

/* Do @n elements at @got match @exp_of(_k)? Logs the first that does not. */
#define MATCH(got, dt, n, exp_of) ({ \
	int64_t _k; bool _ok = true; \
	for (_k = 0; _k < (n) && _ok; _k++) { \
		uint64_t _e = (exp_of); \
		if (!ref_match(dt, ref_get(dt, got, _k), _e)) { \
			TH_LOG("%s element %lld: got 0x%x, expected 0x%llx", dtype_names[dt], \
			       (long long)_k, ref_get(dt, got, _k), (unsigned long long)_e); \
			_ok = false; \
		} \
	} \
	_ok; })

static void init_all(struct __test_metadata *_metadata, rbln_comm **comms, int l)
{
	int r;

	ASSERT_EQ(RBLN_OK, rbln_comm_init_all(comms, members[l], ldevs[l])) TH_LOG("%s",
										     rbln_last_error());
	for (r = 0; r < members[l]; r++) {
		ASSERT_EQ(r, rbln_comm_rank(comms[r]));
		ASSERT_EQ(members[l], rbln_comm_size(comms[r]));
		ASSERT_EQ(ldevs[l], rbln_comm_device(comms[r]));
	}
}

static void free_all(struct __test_metadata *_metadata, rbln_comm **comms, int n)
{
	int r;

	for (r = 0; r < n; r++)
		EXPECT_EQ(RBLN_OK, rbln_comm_free(comms[r]));
}

static bool all_reduce_case(struct __test_metadata *_metadata, rbln_comm **comms, int l,
			    rbln_redop op, rbln_dtype dt, int64_t m, bool in_place, uint32_t salt)
{
	int n = members[l], r;
	rbln_tensor *in = rows_of(ldevs[l], dt, n, m, salt);
	rbln_tensor *out = in_place ? in : rows_of(ldevs[l], dt, n, m, 0);
	size_t es = rbln_dtype_size(dt);
	struct job jobs[MAXR];
	struct call c;
	bool ok;
	char *got;

	if (!in || !out)
		return false;
	same(&c, n, ALL_REDUCE, op, 0, in, out);
	run(comms, n, &c, jobs);
	ok = all_ok(_metadata, jobs, n, "rbln_all_reduce");
	got = data_of(out);
	for (r = 0; r < n && ok && got; r++)
		ok = MATCH(got + r * m * es, dt, m, folded(redop_isa[op], dt, n, _k, salt));
	if (!ok)
		TH_LOG("rbln:%d, all_reduce(%s) of %lld %s%s", ldevs[l], redop_names[op],
		       (long long)m, dtype_names[dt], in_place ? " in place" : "");
	free(got);
	if (!in_place)
		rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok && got;
}

TEST(all_reduce)
{
	rbln_comm *comms[MAXR];
	size_t o, d, s;
	int l;

	for (l = 0; l < 2; l++) {
		init_all(_metadata, comms, l);
		for (o = 0; o < 3; o++)
			for (d = 0; d < NDTYPES; d++)
				for (s = 0; s < NSIZES; s++)
					EXPECT_TRUE(all_reduce_case(_metadata, comms, l, redops[o],
								    dtypes[d], sizes[s], false,
								    1 + s));
		/* Larger: many pieces of work per member. */
		EXPECT_TRUE(all_reduce_case(_metadata, comms, l, RBLN_SUM, RBLN_F32, 300001, false,
					    9));
		free_all(_metadata, comms, members[l]);
	}
}

TEST(all_reduce_in_place)
{
	rbln_comm *comms[MAXR];
	size_t o, d;
	int l;

	for (l = 0; l < 2; l++) {
		init_all(_metadata, comms, l);
		for (o = 0; o < 3; o++)
			for (d = 0; d < NDTYPES; d++) {
				EXPECT_TRUE(all_reduce_case(_metadata, comms, l, redops[o],
							    dtypes[d], 1001, true, 11));
				EXPECT_TRUE(all_reduce_case(_metadata, comms, l, redops[o],
							    dtypes[d], 7, true, 12));
			}
		EXPECT_TRUE(all_reduce_case(_metadata, comms, l, RBLN_MIN, RBLN_BF16, 1, true, 13));
		free_all(_metadata, comms, members[l]);
	}
}

static bool all_gather_case(struct __test_metadata *_metadata, rbln_comm **comms, int l,
			    rbln_dtype dt, int64_t m, bool in_place, uint32_t salt)
{
	int n = members[l], r, q;
	size_t es = rbln_dtype_size(dt);
	rbln_tensor *in = rows_of(ldevs[l], dt, n, m, salt), *out;
	struct job jobs[MAXR];
	struct call c;
	char *got = NULL, *mine;
	bool ok = true;

	out = rows_of(ldevs[l], dt, n, n * m, 0);
	if (!in || !out)
		return false;
	if (in_place) {
		/* Rank r's part at part r of its row of the output, the rest stale. */
		mine = data_of(in);
		for (r = 0; r < n && mine && m; r++)
			ok &= rbln_tensor_write(out, (r * n * m + r * m) * es, mine + r * m * es,
						m * es) == RBLN_OK;
		free(mine);
		ok &= mine != NULL;
	}
	same(&c, n, ALL_GATHER, RBLN_SUM, 0, in_place ? out : in, out);
	run(comms, n, &c, jobs);
	ok &= all_ok(_metadata, jobs, n, "rbln_all_gather");
	if (ok)
		got = data_of(out);
	for (r = 0; r < n && ok && got; r++)
		for (q = 0; q < n && ok; q++)
			ok = MATCH(got + (r * n + q) * m * es, dt, m, gen(dt, q, _k, salt));
	if (!ok)
		TH_LOG("rbln:%d, all_gather of %lld %s%s", ldevs[l], (long long)m, dtype_names[dt],
		       in_place ? " in place" : "");
	free(got);
	rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok && got;
}

TEST(all_gather)
{
	rbln_comm *comms[MAXR];
	size_t d, s;
	int l;

	for (l = 0; l < 2; l++) {
		init_all(_metadata, comms, l);
		for (d = 0; d < NDTYPES; d++) {
			for (s = 0; s < NSIZES; s++)
				EXPECT_TRUE(all_gather_case(_metadata, comms, l, dtypes[d],
							    sizes[s], false, 20 + s));
			EXPECT_TRUE(all_gather_case(_metadata, comms, l, dtypes[d], 1001, true,
						    29));
		}
		free_all(_metadata, comms, members[l]);
	}
}

static bool reduce_scatter_case(struct __test_metadata *_metadata, rbln_comm **comms, int l,
				rbln_redop op, rbln_dtype dt, int64_t m, bool in_place,
				uint32_t salt)
{
	int n = members[l], r;
	size_t es = rbln_dtype_size(dt);
	rbln_tensor *in = rows_of(ldevs[l], dt, n, n * m, salt);
	rbln_tensor *out = in_place ? in : rows_of(ldevs[l], dt, n, m, 0);
	int64_t row = in_place ? n * m : m;
	struct job jobs[MAXR];
	struct call c;
	char *got = NULL;
	bool ok;

	if (!in || !out)
		return false;
	same(&c, n, REDUCE_SCATTER, op, 0, in, out);
	run(comms, n, &c, jobs);
	ok = all_ok(_metadata, jobs, n, "rbln_reduce_scatter");
	if (ok)
		got = data_of(out);
	for (r = 0; r < n && ok && got; r++)
		ok = MATCH(got + (r * row + (in_place ? r * m : 0)) * es, dt, m,
			   folded(redop_isa[op], dt, n, r * m + _k, salt));
	if (!ok)
		TH_LOG("rbln:%d, reduce_scatter(%s) of %lld %s%s", ldevs[l], redop_names[op],
		       (long long)m, dtype_names[dt], in_place ? " in place" : "");
	free(got);
	if (!in_place)
		rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok && got;
}

TEST(reduce_scatter)
{
	rbln_comm *comms[MAXR];
	size_t o, d, s;
	int l;

	for (l = 0; l < 2; l++) {
		init_all(_metadata, comms, l);
		for (o = 0; o < 3; o++)
			for (d = 0; d < NDTYPES; d++) {
				for (s = 0; s < NSIZES; s++)
					EXPECT_TRUE(reduce_scatter_case(_metadata, comms, l,
									redops[o], dtypes[d],
									sizes[s], false, 30 + s));
				EXPECT_TRUE(reduce_scatter_case(_metadata, comms, l, redops[o],
								dtypes[d], 1001, true, 39));
			}
		free_all(_metadata, comms, members[l]);
	}
}

TEST(broadcast_and_send_recv)
{
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	size_t d, s;
	struct call c;
	char *got;
	int l, r, n, root;

	for (l = 0; l < 2; l++) {
		init_all(_metadata, comms, l);
		n = members[l];
		for (d = 0; d < NDTYPES; d++)
			for (s = 0; s < NSIZES; s++) {
				size_t es = rbln_dtype_size(dtypes[d]);
				int64_t m = sizes[s];
				rbln_tensor *t = rows_of(ldevs[l], dtypes[d], n, m, 40 + s);

				ASSERT_NE(NULL, t);
				root = (int)(s + d) % n;
				same(&c, n, BROADCAST, RBLN_SUM, root, t, t);
				run(comms, n, &c, jobs);
				ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_broadcast"));
				got = data_of(t);
				ASSERT_NE(NULL, got);
				for (r = 0; r < n; r++)
					EXPECT_TRUE(MATCH(got + r * m * es, dtypes[d], m,
							  gen(dtypes[d], root, _k, 40 + s)));
				free(got);
				rbln_tensor_free(t);

				/* Pairs at once: 0 sends to 1 (2 to 3), then 1 to 0 (3 to 2). */
				t = rows_of(ldevs[l], dtypes[d], n, m, 50 + s);
				ASSERT_NE(NULL, t);
				for (int round = 0; round < 2; round++) {
					for (r = 0; r < n; r++) {
						c.kind[r] = (r & 1) == round ? SEND : RECV;
						c.root[r] = r ^ 1;
						c.in[r] = c.out[r] = t;
					}
					run(comms, n, &c, jobs);
					ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_send/rbln_recv"));
				}
				got = data_of(t);
				ASSERT_NE(NULL, got);
				/* Each row went to the other of its pair and came back. */
				for (r = 0; r < n; r++)
					EXPECT_TRUE(MATCH(got + r * m * es, dtypes[d], m,
							  gen(dtypes[d], r & ~1, _k, 50 + s)));
				free(got);
				rbln_tensor_free(t);
			}
		free_all(_metadata, comms, members[l]);
	}
}

/*
 * A collective sees the device work queued on its input just before, and
 * work queued on its result just after sees the collective's result.
 */
TEST(ordered_with_device_work)
{
	const int64_t m = 4097;
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	rbln_tensor *x, *y, *z;
	char *got;
	int n = members[1], r;

	init_all(_metadata, comms, 1);
	x = rows_of(ldevs[1], RBLN_I32, n, m, 71);
	ASSERT_NE(NULL, x);
	y = rbln_neg(x);
	ASSERT_NE(NULL, y);
	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, y, y);
	run(comms, n, &c, jobs);
	ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_all_reduce"));
	z = rbln_neg(y);
	ASSERT_NE(NULL, z);
	got = data_of(z);
	ASSERT_NE(NULL, got);
	for (r = 0; r < n; r++)
		EXPECT_TRUE(MATCH(got + r * m * 4, RBLN_I32, m,
				  (uint32_t)folded(RBLN_BINARY_ADD, RBLN_I32, n, _k, 71)));
	free(got);
	rbln_tensor_free(z);
	rbln_tensor_free(y);
	rbln_tensor_free(x);
	free_all(_metadata, comms, n);
}

/*
 * A shard over two of the caching allocator's objects: in a fresh process
 * a 17 MiB block takes most of the first 20 MiB map of a member's
 * expandable segment, and the next one, of 4 MiB, starts in its last 3 MiB
 * and ends in the next map. The other members reach it as two peer
 * objects.
 */
TEST(shard_over_two_objects)
{
	const int64_t m = (4 << 20) / 4;
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	rbln_tensor *x, *y;
	char *got;
	int l, n, r;

	for (l = 0; l < 2; l++) {
		int64_t shape[2] = { members[l], (17 << 20) / 4 };

		n = members[l];
		init_all(_metadata, comms, l);
		x = rbln_tensor_zeros(shape, 2, RBLN_F32, ldevs[l]);
		ASSERT_NE(NULL, x);
		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(x));
		y = rows_of(ldevs[l], RBLN_I32, n, m, 95);
		ASSERT_NE(NULL, y);
		same(&c, n, ALL_REDUCE, RBLN_SUM, 0, y, y);
		run(comms, n, &c, jobs);
		ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_all_reduce"));
		got = data_of(y);
		ASSERT_NE(NULL, got);
		for (r = 0; r < n; r++)
			EXPECT_TRUE(MATCH(got + r * m * 4, RBLN_I32, m,
					  (uint32_t)folded(RBLN_BINARY_ADD, RBLN_I32, n, _k, 95)));
		free(got);
		rbln_tensor_free(y);
		rbln_tensor_free(x);
		free_all(_metadata, comms, n);
	}
}

/* The threads' tensors may be their own: only a rank's shard is its part. */
TEST(tensors_of_each_thread)
{
	const int64_t m = 333;
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	char *got;
	int n = members[1], r;

	init_all(_metadata, comms, 1);
	for (r = 0; r < n; r++) {
		c.kind[r] = ALL_REDUCE;
		c.op[r] = RBLN_MAX;
		c.in[r] = rows_of(ldevs[1], RBLN_F16, n, m, 81);
		c.out[r] = rows_of(ldevs[1], RBLN_F16, n, m, 0);
		ASSERT_TRUE(c.in[r] && c.out[r]);
	}
	run(comms, n, &c, jobs);
	ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_all_reduce"));
	for (r = 0; r < n; r++) {
		got = data_of(c.out[r]);
		ASSERT_NE(NULL, got);
		/* Row r of thread r's output: the result; the other rows untouched. */
		EXPECT_TRUE(MATCH(got + r * m * 2, RBLN_F16, m,
				  folded(RBLN_BINARY_MAX, RBLN_F16, n, _k, 81)));
		EXPECT_TRUE(MATCH(got + ((r + 1) % n) * m * 2, RBLN_F16, m,
				  ref_enc(RBLN_F16, 3)));
		free(got);
		rbln_tensor_free(c.in[r]);
		rbln_tensor_free(c.out[r]);
	}
	free_all(_metadata, comms, n);
}

TEST(mismatches)
{
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	rbln_tensor *a, *b, *i32, *wide, *g;
	char *got;
	int n = members[1], r;

	init_all(_metadata, comms, 1);
	a = rows_of(ldevs[1], RBLN_F32, n, 100, 60);
	b = rows_of(ldevs[1], RBLN_F32, n, 100, 0);
	i32 = rows_of(ldevs[1], RBLN_I32, n, 100, 60);
	wide = rows_of(ldevs[1], RBLN_F32, n, 101, 60);
	g = rows_of(ldevs[1], RBLN_F32, n, 100 * n, 0);
	ASSERT_TRUE(a && b && i32 && wide && g);

	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, a, b);
	c.in[1] = c.out[1] = i32;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "rbln_all_reduce: ranks disagree: rank 0 calls rbln_all_reduce(sum) of 100 f32 elements, rank 1 rbln_all_reduce(sum) of 100 i32 elements"));
	same(&c, n, BROADCAST, RBLN_SUM, 0, a, a);
	c.in[3] = c.out[3] = wide;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "rank 3 rbln_broadcast from rank 0 of 101 f32 elements"));
	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, a, a);
	c.op[2] = RBLN_MAX;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "rank 2 rbln_all_reduce(max) of 100 f32"));
	same(&c, n, ALL_REDUCE, RBLN_MIN, 0, a, a);
	c.kind[3] = ALL_GATHER;
	c.out[3] = g;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "rank 3 rbln_all_gather of 100 f32"));
	/* A send met by a send. */
	for (r = 0; r < n; r++) {
		c.kind[r] = r < 2 ? SEND : SKIP;
		c.root[r] = r ^ 1;
		c.in[r] = c.out[r] = a;
	}
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, 2, RBLN_ERROR_INVALID, -1, "",
			       "this rank calls rbln_send of 100 f32 elements, peer"));
	/* Nothing changed, and the communicators still work. */
	got = data_of(a);
	ASSERT_NE(NULL, got);
	for (r = 0; r < n; r++)
		EXPECT_TRUE(MATCH(got + r * 400, RBLN_F32, 100, gen(RBLN_F32, r, _k, 60)));
	free(got);
	EXPECT_TRUE(all_reduce_case(_metadata, comms, 1, RBLN_SUM, RBLN_I8, 64, false, 61));
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(i32);
	rbln_tensor_free(wide);
	rbln_tensor_free(g);
	free_all(_metadata, comms, n);
}

/* A bad argument on one thread fails it, and the others with its message. */
TEST(bad_argument_on_one_thread)
{
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	rbln_tensor *a, *cpu, *other, *a12;
	int64_t shape[2] = { 4, 10 };
	int n = members[1];

	init_all(_metadata, comms, 1);
	a = rows_of(ldevs[1], RBLN_F16, n, 10, 63);
	cpu = rbln_tensor_zeros(shape, 2, RBLN_F16, RBLN_CPU);
	other = rbln_tensor_zeros(shape, 2, RBLN_F16, ldevs[0]);
	a12 = rows_of(ldevs[1], RBLN_F16, n, 12, 0);
	ASSERT_TRUE(a && cpu && other && a12);

	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, a, a);
	c.in[2] = NULL;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, 2,
			       "rbln_all_reduce: NULL tensor",
			       "rank 2 cannot take part: rbln_all_reduce: NULL tensor"));
	same(&c, n, ALL_GATHER, RBLN_SUM, 0, a12, a12);
	c.in[1] = cpu;
	c.out[1] = cpu;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, 1,
			       "the input is a CPU tensor",
			       "rank 1 cannot take part: rbln_all_gather: the input is a CPU tensor"));
	same(&c, n, BROADCAST, RBLN_SUM, 1, a, a);
	c.in[0] = c.out[0] = other;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, 0,
			       "the tensor is on rbln:0; the communicator's device is rbln:1",
			       "rank 0 cannot take part: rbln_broadcast: the tensor is on rbln:0"));
	same(&c, n, REDUCE_SCATTER, RBLN_SUM, 0, a12, a12);
	c.op[3] = (rbln_redop)7;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, 3, "unknown reduction 7",
			       "rank 3 cannot take part"));
	/* Bad everywhere: each thread says why. */
	same(&c, n, BROADCAST, RBLN_SUM, n, a, a);
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "root 4 is not a rank (0 to 3)"));
	same(&c, n, ALL_GATHER, RBLN_SUM, 0, a, a);
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "",
			       "do not split into 4 equal parts"));
	same(&c, n, SEND, RBLN_SUM, 0, a, a);
	for (int r = 0; r < n; r++)
		c.root[r] = r;
	run(comms, n, &c, jobs);
	EXPECT_TRUE(all_failed(_metadata, jobs, n, RBLN_ERROR_INVALID, -1, "", "is this rank"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_all_reduce(a, a, RBLN_SUM, NULL));
	/* Still usable. */
	EXPECT_TRUE(all_reduce_case(_metadata, comms, 1, RBLN_MAX, RBLN_I32, 12, false, 65));
	rbln_tensor_free(a);
	rbln_tensor_free(cpu);
	rbln_tensor_free(other);
	rbln_tensor_free(a12);
	free_all(_metadata, comms, n);
}

/*
 * A thread that never calls: the others fail within the timeout, naming
 * it, and so does every later collective, at once.
 */
TEST(missing_thread)
{
	rbln_comm *comms[MAXR];
	struct job jobs[MAXR];
	struct call c;
	rbln_tensor *a;
	int n = members[1], r;

	ASSERT_EQ(0, setenv("RBLN_COMM_TIMEOUT_MS", "300", 1));
	init_all(_metadata, comms, 1);
	a = rows_of(ldevs[1], RBLN_F32, n, 50, 90);
	ASSERT_NE(NULL, a);
	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, a, a);
	c.kind[2] = SKIP;
	run(comms, n, &c, jobs);
	for (r = 0; r < n; r++) {
		if (r == 2)
			continue;
		EXPECT_EQ(RBLN_ERROR_TIMEOUT, jobs[r].st);
		EXPECT_NE(NULL, strstr(jobs[r].err, "no answer from rank 2 in 300 ms"))
			TH_LOG("rank %d: %s", r, jobs[r].err);
		EXPECT_LT(jobs[r].seconds, 5.0);
	}
	/* Broken for good: the next collective fails at once on every thread. */
	same(&c, n, BROADCAST, RBLN_SUM, 0, a, a);
	run(comms, n, &c, jobs);
	for (r = 0; r < n; r++) {
		EXPECT_EQ(RBLN_ERROR_TIMEOUT, jobs[r].st);
		EXPECT_LT(jobs[r].seconds, 0.25);
	}
	rbln_tensor_free(a);
	free_all(_metadata, comms, n);
	/* A pair whose receiver never comes. */
	init_all(_metadata, comms, 0);
	a = rows_of(ldevs[0], RBLN_I8, 2, 5, 91);
	ASSERT_NE(NULL, a);
	c.kind[0] = SEND;
	c.root[0] = 1;
	c.in[0] = a;
	c.kind[1] = SKIP;
	run(comms, 2, &c, jobs);
	EXPECT_EQ(RBLN_ERROR_TIMEOUT, jobs[0].st);
	EXPECT_NE(NULL, strstr(jobs[0].err, "no answer from rank 1"));
	rbln_tensor_free(a);
	free_all(_metadata, comms, 2);
}

TEST(bad_init)
{
	rbln_comm *comms[MAXR] = { NULL };

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_init_all(NULL, 2, 0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL result array"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_init_all(comms, 1, 2));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln:2 is one NPU, not a logical device"))
		TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_comm_init_all(comms, 2, 99));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_comm_init_all(comms, 2, -7));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_init_all(comms, 2, 1));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln:1 has 4 members, one communicator each: 2 asked"))
		TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_init_all(comms, 0, 1));
	ASSERT_EQ(0, setenv("RBLN_COMM_TIMEOUT_MS", "soon", 1));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_init_all(comms, 4, 1));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "RBLN_COMM_TIMEOUT_MS=soon"));
	ASSERT_EQ(0, unsetenv("RBLN_COMM_TIMEOUT_MS"));
	for (int r = 0; r < MAXR; r++)
		EXPECT_EQ(NULL, comms[r]);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_rank(NULL));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_timeout(NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln_comm_timeout: NULL communicator"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_comm_set_timeout(NULL, 100));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln_comm_set_timeout: NULL communicator"));
	EXPECT_EQ(RBLN_OK, rbln_comm_free(NULL));
}

/*
 * NPU to NPU: explain() sees no host bounce, only the folds; the fold of
 * an in-place reduction is device memory, back after the call.
 */
TEST(explain_and_memory)
{
	rbln_comm *comms[MAXR];
	struct rbln_explain_dump dump;
	struct job jobs[MAXR];
	struct call c;
	rbln_explain *e;
	rbln_tensor *a;
	int64_t before;
	int n = members[1];

	init_all(_metadata, comms, 1);
	a = rows_of(ldevs[1], RBLN_F32, n, 1001, 67);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(ldevs[1]));
	before = rbln_memory_allocated(ldevs[1]);
	e = rbln_explain_begin(true);
	ASSERT_NE(NULL, e);
	same(&c, n, ALL_REDUCE, RBLN_SUM, 0, a, a);
	run(comms, n, &c, jobs);
	ASSERT_TRUE(all_ok(_metadata, jobs, n, "rbln_all_reduce"));
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &dump));
	EXPECT_EQ(0, dump.host_bounce.count);
	EXPECT_EQ(0, dump.host_bounce.bytes);
	/* n - 1 folds by each of the n members, at least. */
	EXPECT_GE(dump.dispatch.total.count, n * (n - 1));
	rbln_explain_free(e);
	EXPECT_EQ(before, rbln_memory_allocated(ldevs[1]));
	rbln_tensor_free(a);
	free_all(_metadata, comms, n);
}

TEST_HARNESS_MAIN
