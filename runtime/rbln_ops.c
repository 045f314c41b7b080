// SPDX-License-Identifier: MIT
/*
 * rbln_ops.c - ops the NPU runs: validation, then one program per shard
 *
 * An op takes tensors on one rbln device, materializes them, allocates its
 * result there and runs the op's program on every member of the logical
 * device at once: shards line up on the first dimension, so member i
 * works on shard i of every operand. Two exceptions gather an operand
 * whole, device to device (rbln_replica.c): the right-hand side of a
 * matmul that is not batched with the left, which every member needs all
 * of; and a 1-d tensor reduced to a scalar, which member 0 reduces alone,
 * in the order one NPU would, so that the result is the same bits.
 */

#include <stdlib.h>
#include <string.h>

#include "rbln_explain.h"
#include "rbln_internal.h"
#include "rbln_program.h"

struct op {
	const char *name;
	enum rbln_op_kind kind;
	unsigned int sub;
	rbln_tensor *a, *b;	/* b: binary ops and matmul */
	rbln_tensor *out;
	bool owns_out;		/* out is the op's new result */
	uint32_t scalar;	/* EW_SCALAR's operand, DMA_FILL's pattern */
	bool gather_a;		/* the members that compute need all of a */
	bool replicate_b;	/* every member needs all of b */
	const void *site;
	struct rbln_graph *graph;	/* capturing it, not running it */
};

/* The shape of shard @i of @t. */
static void shard_shape(const rbln_tensor *t, int i, int64_t *shape)
{
	memcpy(shape, t->shape, t->ndim * sizeof(*shape));
	if (t->ndim)
		shape[0] = t->shards[i].rows;
}

static uint64_t shard_va(const struct rbln_shard *s)
{
	return s->block ? rbln_block_va(s->block) : 0;
}

static uint32_t add_bo(uint32_t *bos, uint32_t n, const struct rbln_shard *s)
{
	uint32_t h, i;

	if (!s || !s->block)
		return n;
	h = rbln_block_handle(s->block);
	for (i = 0; i < n; i++)
		if (bos[i] == h)
			return n;
	bos[n] = h;
	return n + 1;
}

/*
 * Runs the program for @key on @d with operands @args, a job that uses
 * @bos (@nbos of them); its point in *@point, *@compiled if it was
 * compiled for this. With @g, records it in that graph instead (point 0).
 */
static rbln_status run_program(struct rbln_dev *d, struct rbln_graph *g,
			       const struct rbln_program_key *key, const uint64_t *args,
			       const uint32_t *bos, uint32_t nbos, bool *compiled, uint64_t *point)
{
	struct rbln_program *p;
	rbln_status st;
	uint64_t va;
	void *cmd;
	bool c;

	p = rbln_program_get(key, &c);
	if (!p)
		return RBLN_ERROR_INVALID;
	*compiled |= c;
	if (g) {
		*point = 0;
		st = rbln_graph_record(g, d, rbln_program_size(p), bos, nbos, &cmd);
		if (!st)
			rbln_program_emit(p, cmd, args);
		rbln_program_put(p);
		return st;
	}
	pthread_mutex_lock(&d->lock);
	st = rbln_ring_reserve_locked(d, rbln_program_size(p), &cmd, &va);
	if (!st) {
		rbln_program_emit(p, cmd, args);
		st = rbln_ring_submit_locked(d, va, rbln_program_size(p), bos, nbos, point);
	}
	pthread_mutex_unlock(&d->lock);
	rbln_program_put(p);
	return st;
}

/*
 * Runs @op for shard @i on its member, with operands @a and @b;
 * *@compiled if a program was compiled for this. A batched matmul is a
 * GEMM packet per batch: a batch that one command buffer cannot hold runs
 * as several jobs, in order on the member's ring.
 */
static rbln_status run_shard(struct op *op, int i, struct rbln_shard *a, struct rbln_shard *b,
			     bool *compiled)
{
	struct rbln_shard *out = &op->out->shards[i];
	struct rbln_dev *d = out->dev;
	struct rbln_program_key key;
	uint64_t args[RBLN_NARGS], step[RBLN_NARGS] = { 0 }, point;
	int64_t batch = 1, per = 1, done, cnt;
	uint32_t bos[3], n = 0;
	rbln_status st = RBLN_OK;
	int arg;

	memset(&key, 0, sizeof(key));
	key.kind = op->kind;
	key.sub = op->sub;
	key.in_dtype = op->a->dtype;
	key.out_dtype = op->out->dtype;
	key.ndim_a = op->a->ndim;
	if (op->gather_a)
		memcpy(key.shape_a, op->a->shape, op->a->ndim * sizeof(int64_t));
	else
		shard_shape(op->a, i, key.shape_a);
	if (op->b) {
		key.ndim_b = op->b->ndim;
		if (op->replicate_b)
			memcpy(key.shape_b, op->b->shape, op->b->ndim * sizeof(int64_t));
		else
			shard_shape(op->b, i, key.shape_b);
	}

	args[RBLN_ARG_A] = shard_va(a);
	args[RBLN_ARG_B] = b ? shard_va(b) : 0;
	args[RBLN_ARG_OUT] = shard_va(out);
	args[RBLN_ARG_SCALAR] = op->scalar;
	n = add_bo(bos, n, a);
	n = add_bo(bos, n, b);
	n = add_bo(bos, n, out);

	/* With an empty K a matmul is one fill, whatever the batch. */
	if (op->kind == RBLN_OPK_MATMUL && key.ndim_a == 3 && key.shape_a[2]) {
		int64_t m = key.shape_a[1], k = key.shape_a[2], nn = key.shape_b[key.ndim_b - 1];

		batch = key.shape_a[0];
		per = d->max_cmd / sizeof(struct rbln_pkt_gemm);
		step[RBLN_ARG_A] = m * k * rbln_dtype_size(key.in_dtype);
		step[RBLN_ARG_B] = key.ndim_b == 3 ? k * nn * rbln_dtype_size(key.in_dtype) : 0;
		step[RBLN_ARG_OUT] = m * nn * rbln_dtype_size(key.out_dtype);
	}
	for (done = 0; done < batch; done += cnt) {
		cnt = batch - done < per ? batch - done : per;
		if (cnt < batch) {
			key.shape_a[0] = cnt;
			if (key.ndim_b == 3)
				key.shape_b[0] = cnt;
		}
		st = run_program(d, op->graph, &key, args, bos, n, compiled, &point);
		if (st)
			break;
		rbln_shard_used(a, point);
		if (b)
			rbln_shard_used(b, point);
		rbln_shard_used(out, point);
		for (arg = 0; arg < RBLN_NARGS; arg++)
			args[arg] += cnt * step[arg];
	}
	return st;
}

/* Can @op be captured? Its operands must be in device memory already: no copy from the host. */
static rbln_status capture_check(struct op *op)
{
	const rbln_tensor *lazy = NULL;
	char what[160];

	if (rbln_capture_valid(op->graph, op->name))
		return RBLN_ERROR_CAPTURE;
	if (!__atomic_load_n(&op->a->materialized, __ATOMIC_ACQUIRE))
		lazy = op->a;
	else if (op->b && !__atomic_load_n(&op->b->materialized, __ATOMIC_ACQUIRE))
		lazy = op->b;
	else if (!__atomic_load_n(&op->out->materialized, __ATOMIC_ACQUIRE))
		lazy = op->out;
	if (!lazy)
		return RBLN_OK;
	snprintf(what, sizeof(what),
		 "%s: an operand still in host memory (lazy) would be copied to the device: materialize it before capturing",
		 op->name);
	return rbln_capture_refuse(op->out->device, NULL, what);
}

/* The graph keeps the tensors of captured @op. */
static rbln_status capture_hold(struct op *op)
{
	rbln_status st;

	st = rbln_graph_hold(op->graph, op->a);
	if (!st)
		st = rbln_graph_hold(op->graph, op->b);
	if (!st)
		st = rbln_graph_hold(op->graph, op->out);
	if (!st)
		rbln_graph_count_op(op->graph);
	return st;
}

/* Runs @op on every member, or captures it; frees op->out on failure. */
static rbln_status dispatch(struct op *op)
{
	struct rbln_shard replicas[RBLN_MAX_MEMBERS], whole_a;
	bool active = rbln_explain_active(), compiled = false, have_b = false, have_a = false;
	uint64_t start = active ? rbln_explain_now() : 0;
	rbln_status st = RBLN_OK;
	int i;

	op->graph = rbln_capture_of(op->out->device);
	if (op->graph)
		st = capture_check(op);
	if (!st)
		st = rbln_tensor_ensure_device(op->a);
	if (!st && op->b)
		st = rbln_tensor_ensure_device(op->b);
	if (!st && !op->owns_out)
		st = rbln_tensor_ensure_device(op->out);
	op->replicate_b = op->replicate_b && op->out->nshards > 1;
	if (!st && op->replicate_b) {
		st = rbln_tensor_replicate(op->b, replicas, op->out->nshards, op->name);
		have_b = !st;
	}
	/* Only a scalar result gathers a: member 0 alone computes it. */
	op->gather_a = op->gather_a && op->a->nshards > 1;
	if (!st && op->gather_a) {
		st = rbln_tensor_replicate(op->a, &whole_a, 1, op->name);
		have_a = !st;
	}
	for (i = 0; i < op->out->nshards && !st; i++) {
		struct rbln_shard *a = op->gather_a ? &whole_a : &op->a->shards[i];
		struct rbln_shard *b = op->b ? op->replicate_b ? &replicas[i] :
					       &op->b->shards[i] : NULL;

		if (op->out->shards[i].nbytes)
			st = run_shard(op, i, a, b, &compiled);
	}
	/* A graph keeps the replicas it captured. */
	if (have_b && !op->graph)
		rbln_replicas_free(replicas, op->out->nshards);
	if (have_a && !op->graph)
		rbln_replicas_free(&whole_a, 1);
	if (!st && op->graph)
		st = capture_hold(op);
	if (st && op->graph)
		rbln_capture_failed(op->graph, st);
	if (st) {
		if (op->owns_out)
			rbln_tensor_free(op->out);
		return st;
	}
	if (active)
		rbln_explain_dispatch(compiled ? RBLN_DISPATCH_RECOMPILE : RBLN_DISPATCH_WARM_HIT,
				      op->name, rbln_explain_now() - start, op->site);
	return RBLN_OK;
}

rbln_status rbln_ew_binary(struct rbln_dev *d, unsigned int sub, rbln_dtype dtype, int64_t count,
			   uint64_t out, uint64_t a, uint64_t b, const uint32_t *bos, uint32_t nbos,
			   const char *name, const void *site, uint64_t *point)
{
	uint64_t args[RBLN_NARGS] = { [RBLN_ARG_A] = a, [RBLN_ARG_B] = b, [RBLN_ARG_OUT] = out };
	bool active = rbln_explain_active(), compiled = false;
	uint64_t start = active ? rbln_explain_now() : 0;
	struct rbln_program_key key;
	rbln_status st;

	memset(&key, 0, sizeof(key));
	key.kind = RBLN_OPK_BINARY;
	key.sub = sub;
	key.in_dtype = key.out_dtype = dtype;
	key.ndim_a = key.ndim_b = 1;
	key.shape_a[0] = key.shape_b[0] = count;
	st = run_program(d, NULL, &key, args, bos, nbos, &compiled, point);
	if (!st && active)
		rbln_explain_dispatch(compiled ? RBLN_DISPATCH_RECOMPILE : RBLN_DISPATCH_WARM_HIT,
				      name, rbln_explain_now() - start, site);
	return st;
}

/* Checks that @t is a live tensor on an rbln device, for op @name. */
static bool on_device(const rbln_tensor *t, const char *name)
{
	if (!rbln_tensor_ok(t, name))
		return false;
	if (t->device == RBLN_CPU) {
		rbln_fail(RBLN_ERROR_INVALID,
			  "%s: a CPU tensor: device ops take tensors on rbln devices (rbln_tensor_to)",
			  name);
		return false;
	}
	return true;
}

static bool same_device(const rbln_tensor *a, const rbln_tensor *b, const char *name)
{
	if (a->device == b->device)
		return true;
	rbln_fail(RBLN_ERROR_INVALID, "%s: tensors on different devices (rbln:%d and rbln:%d)",
		  name, a->device, b->device);
	return false;
}

static bool same_dtype(const rbln_tensor *a, const rbln_tensor *b, const char *name)
{
	if (a->dtype == b->dtype)
		return true;
	rbln_fail(RBLN_ERROR_INVALID, "%s: dtypes differ (%d and %d): cast one with rbln_cast",
		  name, (int)a->dtype, (int)b->dtype);
	return false;
}

static bool same_shape(const rbln_tensor *a, const rbln_tensor *b, const char *name)
{
	if (a->ndim == b->ndim && !memcmp(a->shape, b->shape, a->ndim * sizeof(a->shape[0])))
		return true;
	rbln_fail(RBLN_ERROR_INVALID, "%s: shapes differ (%d-d and %d-d, or a dimension)", name,
		  a->ndim, b->ndim);
	return false;
}

/* A result shaped like @a, of @dtype, for @op. */
static rbln_tensor *result(struct op *op, const int64_t *shape, int ndim, rbln_dtype dtype)
{
	op->out = rbln_tensor_new_device(shape, ndim, dtype, op->a->device, op->name);
	op->owns_out = true;
	if (!op->out || dispatch(op))
		return NULL;
	return op->out;
}

static rbln_tensor *binary(const char *name, unsigned int sub, rbln_tensor *a, rbln_tensor *b,
			   const void *site)
{
	struct op op = { .name = name, .kind = RBLN_OPK_BINARY, .sub = sub, .a = a, .b = b,
			 .site = site };

	if (!on_device(a, name) || !on_device(b, name) || !same_device(a, b, name) ||
	    !same_dtype(a, b, name) || !same_shape(a, b, name))
		return NULL;
	return result(&op, a->shape, a->ndim, a->dtype);
}

rbln_tensor *rbln_add(rbln_tensor *a, rbln_tensor *b)
{
	return binary("add", RBLN_BINARY_ADD, a, b, RBLN_CALLER());
}

rbln_tensor *rbln_sub(rbln_tensor *a, rbln_tensor *b)
{
	return binary("sub", RBLN_BINARY_SUB, a, b, RBLN_CALLER());
}

rbln_tensor *rbln_mul(rbln_tensor *a, rbln_tensor *b)
{
	return binary("mul", RBLN_BINARY_MUL, a, b, RBLN_CALLER());
}

rbln_tensor *rbln_div(rbln_tensor *a, rbln_tensor *b)
{
	return binary("div", RBLN_BINARY_DIV, a, b, RBLN_CALLER());
}

rbln_tensor *rbln_maximum(rbln_tensor *a, rbln_tensor *b)
{
	return binary("maximum", RBLN_BINARY_MAX, a, b, RBLN_CALLER());
}

rbln_tensor *rbln_minimum(rbln_tensor *a, rbln_tensor *b)
{
	return binary("minimum", RBLN_BINARY_MIN, a, b, RBLN_CALLER());
}

static rbln_tensor *scalar(const char *name, unsigned int sub, rbln_tensor *a, double s,
			   const void *site)
{
	struct op op = { .name = name, .kind = RBLN_OPK_SCALAR, .sub = sub, .a = a,
			 .site = site };

	if (!on_device(a, name))
		return NULL;
	rbln_dtype_encode(a->dtype, s, &op.scalar);
	return result(&op, a->shape, a->ndim, a->dtype);
}

rbln_tensor *rbln_add_scalar(rbln_tensor *a, double s)
{
	return scalar("add_scalar", RBLN_BINARY_ADD, a, s, RBLN_CALLER());
}

rbln_tensor *rbln_sub_scalar(rbln_tensor *a, double s)
{
	return scalar("sub_scalar", RBLN_BINARY_SUB, a, s, RBLN_CALLER());
}

rbln_tensor *rbln_mul_scalar(rbln_tensor *a, double s)
{
	return scalar("mul_scalar", RBLN_BINARY_MUL, a, s, RBLN_CALLER());
}

rbln_tensor *rbln_div_scalar(rbln_tensor *a, double s)
{
	return scalar("div_scalar", RBLN_BINARY_DIV, a, s, RBLN_CALLER());
}

rbln_tensor *rbln_maximum_scalar(rbln_tensor *a, double s)
{
	return scalar("maximum_scalar", RBLN_BINARY_MAX, a, s, RBLN_CALLER());
}

rbln_tensor *rbln_minimum_scalar(rbln_tensor *a, double s)
{
	return scalar("minimum_scalar", RBLN_BINARY_MIN, a, s, RBLN_CALLER());
}

static rbln_tensor *unary(const char *name, unsigned int sub, rbln_tensor *a, const void *site)
{
	struct op op = { .name = name, .kind = RBLN_OPK_UNARY, .sub = sub, .a = a,
			 .site = site };

	if (!on_device(a, name))
		return NULL;
	return result(&op, a->shape, a->ndim, a->dtype);
}

rbln_tensor *rbln_neg(rbln_tensor *a)
{
	return unary("neg", RBLN_UNARY_NEG, a, RBLN_CALLER());
}

rbln_tensor *rbln_abs(rbln_tensor *a)
{
	return unary("abs", RBLN_UNARY_ABS, a, RBLN_CALLER());
}

rbln_tensor *rbln_relu(rbln_tensor *a)
{
	return unary("relu", RBLN_UNARY_RELU, a, RBLN_CALLER());
}

rbln_tensor *rbln_cast(rbln_tensor *a, rbln_dtype dtype)
{
	struct op op = { .name = "cast", .kind = RBLN_OPK_CAST, .a = a, .site = RBLN_CALLER() };

	if (!on_device(a, op.name))
		return NULL;
	if (!rbln_dtype_size(dtype)) {
		rbln_fail(RBLN_ERROR_INVALID, "cast: unknown dtype %d", (int)dtype);
		return NULL;
	}
	return result(&op, a->shape, a->ndim, dtype);
}

static rbln_tensor *reduce(const char *name, unsigned int sub, rbln_tensor *a, const void *site)
{
	struct op op = { .name = name, .kind = RBLN_OPK_REDUCE, .sub = sub, .a = a,
			 .site = site };
	int64_t rows;
	int i;

	if (!on_device(a, name))
		return NULL;
	/* Sharded along the reduced dimension. */
	op.gather_a = a->ndim == 1;
	for (i = 0, rows = 1; i < a->ndim - 1; i++)
		rows *= a->shape[i];
	if (a->ndim && !a->shape[a->ndim - 1] && rows) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: the last dimension is empty", name);
		return NULL;
	}
	return result(&op, a->shape, a->ndim ? a->ndim - 1 : 0, a->dtype);
}

rbln_tensor *rbln_sum(rbln_tensor *a)
{
	return reduce("sum", RBLN_REDUCE_SUM, a, RBLN_CALLER());
}

rbln_tensor *rbln_amax(rbln_tensor *a)
{
	return reduce("amax", RBLN_REDUCE_MAX, a, RBLN_CALLER());
}

rbln_tensor *rbln_matmul(rbln_tensor *a, rbln_tensor *b)
{
	struct op op = { .name = "matmul", .kind = RBLN_OPK_MATMUL, .a = a, .b = b,
			 .site = RBLN_CALLER() };
	int64_t shape[3];

	if (!on_device(a, op.name) || !on_device(b, op.name) || !same_device(a, b, op.name) ||
	    !same_dtype(a, b, op.name))
		return NULL;
	if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > a->ndim ||
	    a->shape[a->ndim - 1] != b->shape[b->ndim - 2] ||
	    (b->ndim == 3 && a->shape[0] != b->shape[0])) {
		rbln_fail(RBLN_ERROR_INVALID,
			  "matmul: [M,K] or [B,M,K] by [K,N] or [B,K,N] (got %d-d by %d-d, or sizes that differ)",
			  a->ndim, b->ndim);
		return NULL;
	}
	memcpy(shape, a->shape, (a->ndim - 1) * sizeof(*shape));
	shape[a->ndim - 1] = b->shape[b->ndim - 1];
	op.replicate_b = b->ndim == 2;
	return result(&op, shape, a->ndim, a->dtype);
}

rbln_tensor *rbln_clone(rbln_tensor *a)
{
	struct op op = { .name = "clone", .kind = RBLN_OPK_COPY, .a = a, .site = RBLN_CALLER() };

	if (!on_device(a, op.name))
		return NULL;
	return result(&op, a->shape, a->ndim, a->dtype);
}

rbln_status rbln_copy(rbln_tensor *dst, rbln_tensor *src)
{
	struct op op = { .name = "copy", .kind = RBLN_OPK_COPY, .a = src, .out = dst,
			 .site = RBLN_CALLER() };

	if (!on_device(dst, op.name) || !on_device(src, op.name) ||
	    !same_device(dst, src, op.name) || !same_dtype(dst, src, op.name) ||
	    !same_shape(dst, src, op.name))
		return RBLN_ERROR_INVALID;
	if (dst == src)
		return RBLN_OK;
	return dispatch(&op);
}

rbln_status rbln_fill(rbln_tensor *t, double value)
{
	struct op op = { .name = "fill", .kind = RBLN_OPK_FILL, .a = t, .out = t, .site = RBLN_CALLER() };
	size_t esize;
	uint32_t v = 0;

	if (!on_device(t, op.name))
		return RBLN_ERROR_INVALID;
	esize = rbln_dtype_size(t->dtype);
	rbln_dtype_encode(t->dtype, value, &v);
	op.scalar = esize == 1 ? v * 0x01010101u : esize == 2 ? v | v << 16 : v;
	return dispatch(&op);
}
