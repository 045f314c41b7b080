// SPDX-License-Identifier: MIT
/*
 * graph - capture a small MLP's step once, replay it for every new input
 *
 *   y = relu(x @ w1 + b1) @ w2 + b2      on the NPU, 5 device ops
 *
 * Runs 100 steps eagerly, then captures one step (rbln_graph_capture_begin
 * ... end) and replays it for the same 100 inputs, each copied into the
 * captured input tensor first: the results are the same bits, and a step
 * costs one submission instead of one per op. explain() sees the replays.
 * Last, what a graph cannot hold: reading a result inside the capture
 * invalidates it, and the error says so.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rbln/rbln.h>

#define BATCH	4
#define IN	32
#define HIDDEN	64
#define OUT	16
#define STEPS	100

#define CHECK(expr) do { \
		if (!(expr)) { \
			fprintf(stderr, "graph: %s: %s\n", #expr, rbln_last_error()); \
			exit(1); \
		} \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static rbln_tensor *on_device(rbln_tensor *t)
{
	CHECK(t && rbln_tensor_materialize(t) == RBLN_OK);
	return t;
}

struct mlp {
	rbln_tensor *w1, *b1, *w2, *b2;
};

/* One step; frees its temporaries, as a program would. */
static rbln_tensor *step(const struct mlp *m, rbln_tensor *x)
{
	rbln_tensor *a, *b, *h, *c, *y;

	CHECK(a = rbln_matmul(x, m->w1));
	CHECK(b = rbln_add(a, m->b1));
	CHECK(h = rbln_relu(b));
	CHECK(c = rbln_matmul(h, m->w2));
	CHECK(y = rbln_add(c, m->b2));
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(h);
	rbln_tensor_free(c);
	return y;
}

int main(void)
{
	int64_t sx[2] = { BATCH, IN }, sw1[2] = { IN, HIDDEN }, sb1[2] = { BATCH, HIDDEN };
	int64_t sw2[2] = { HIDDEN, OUT }, sb2[2] = { BATCH, OUT };
	float eager[STEPS][BATCH * OUT], replayed[BATCH * OUT];
	rbln_tensor *inputs[STEPS], *x, *y;
	struct rbln_explain_dump d;
	struct mlp m;
	rbln_explain *e;
	rbln_graph *g;
	double t_eager, t_graph, v;
	int i, same = 0;

	m.w1 = on_device(rbln_tensor_rand(sw1, 2, RBLN_F32, 1, 0));
	m.b1 = on_device(rbln_tensor_full(sb1, 2, RBLN_F32, -0.25, 0));
	m.w2 = on_device(rbln_tensor_rand(sw2, 2, RBLN_F32, 2, 0));
	m.b2 = on_device(rbln_tensor_full(sb2, 2, RBLN_F32, 0.5, 0));
	for (i = 0; i < STEPS; i++)
		inputs[i] = on_device(rbln_tensor_rand(sx, 2, RBLN_F32, 100 + i, 0));

	t_eager = now();
	for (i = 0; i < STEPS; i++) {
		y = step(&m, inputs[i]);
		CHECK(rbln_tensor_read(y, eager[i], sizeof(eager[i])) == RBLN_OK);
		rbln_tensor_free(y);
	}
	t_eager = now() - t_eager;

	/* The captured step reads x, the static input; y is its static output. */
	x = on_device(rbln_tensor_zeros(sx, 2, RBLN_F32, 0));
	CHECK(rbln_graph_capture_begin(0) == RBLN_OK);
	y = step(&m, x);
	CHECK(rbln_graph_capture_end(&g) == RBLN_OK);
	printf("captured one step: %lld ops\n", (long long)rbln_graph_ops(g));

	CHECK(e = rbln_explain_begin(false));
	t_graph = now();
	for (i = 0; i < STEPS; i++) {
		CHECK(rbln_copy(x, inputs[i]) == RBLN_OK);
		CHECK(rbln_graph_replay(g) == RBLN_OK);
		CHECK(rbln_tensor_read(y, replayed, sizeof(replayed)) == RBLN_OK);
		same += !memcmp(replayed, eager[i], sizeof(replayed));
	}
	t_graph = now() - t_graph;
	CHECK(rbln_explain_end(e) == RBLN_OK);
	CHECK(rbln_explain_dump(e, &d) == RBLN_OK);

	printf("%d steps: eager %.1f us a step, replayed %.1f us a step (%.1fx); "
	       "%d of %d results the same bits\n", STEPS, t_eager * 1e6 / STEPS,
	       t_graph * 1e6 / STEPS, t_eager / t_graph, same, STEPS);
	printf("explain() around the replays: %lld replays ran %lld ops, %lld ops dispatched "
	       "(the input copies)\n", (long long)d.graph_replay.count,
	       (long long)d.graph_replay.ops, (long long)d.dispatch.total.count);
	rbln_explain_free(e);
	rbln_graph_free(g);

	/* A replay cannot repeat a read: the capture is invalidated, and says why. */
	CHECK(rbln_graph_capture_begin(0) == RBLN_OK);
	rbln_tensor_free(step(&m, x));
	if (rbln_tensor_item(y, (int64_t[]){ 0, 0 }, &v) == RBLN_ERROR_CAPTURE)
		printf("item() while capturing: %s\n", rbln_last_error());
	if (rbln_graph_capture_end(&g) == RBLN_ERROR_CAPTURE)
		printf("capture_end: %s\n", rbln_last_error());

	for (i = 0; i < STEPS; i++)
		rbln_tensor_free(inputs[i]);
	rbln_tensor_free(x);
	rbln_tensor_free(y);
	rbln_tensor_free(m.w1);
	rbln_tensor_free(m.b1);
	rbln_tensor_free(m.w2);
	rbln_tensor_free(m.b2);
	return same == STEPS ? 0 : 1;
}
