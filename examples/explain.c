// SPDX-License-Identifier: MIT
/*
 * explain - torch.rbln.explain() around a small MLP forward pass, in C
 *
 *   logits = relu(x @ w1 + b1) @ w2 + b2      on the NPU
 *   probs  = softmax(logits)                  on the CPU (no softmax in the ISA)
 *
 * First with a batch size that changes every step: each new shape
 * recompiles the device ops. Then with a steady batch: the device ops are
 * warm hits, and what is left to fix is the softmax fallback and its host
 * bounces, which the report names with their remedy.
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <rbln/rbln.h>

#define IN	64
#define HIDDEN	128
#define OUT	10

#define CHECK(expr) do { \
		if (!(expr)) { \
			fprintf(stderr, "explain: %s: %s\n", #expr, rbln_last_error()); \
			exit(1); \
		} \
	} while (0)

struct mlp {
	rbln_tensor *w1, *w2;
};

/* Uniform in [-1, 1) / sqrt(fan in), so that the logits stay moderate. */
static rbln_tensor *init_weights(const int64_t *shape, uint64_t seed)
{
	rbln_tensor *u, *c, *w;

	CHECK(u = rbln_tensor_rand(shape, 2, RBLN_F32, seed, 0));
	CHECK(c = rbln_sub_scalar(u, 0.5));
	CHECK(w = rbln_mul_scalar(c, 2 / sqrt((double)shape[0])));
	rbln_tensor_free(u);
	rbln_tensor_free(c);
	return w;
}

static rbln_tensor *bias(int64_t batch, int64_t n, double v)
{
	int64_t shape[2] = { batch, n };
	rbln_tensor *t = rbln_tensor_full(shape, 2, RBLN_F32, v, 0);

	CHECK(t);
	return t;
}

/*
 * One forward pass of a batch; returns the probabilities' first element.
 * Not static: explain()'s stacks name exported functions (-rdynamic).
 */
double forward(const struct mlp *m, int64_t batch, uint64_t seed);
double forward(const struct mlp *m, int64_t batch, uint64_t seed)
{
	int64_t shape[2] = { batch, IN }, first[2] = { 0, 0 };
	rbln_tensor *x, *b1, *b2, *h, *hb, *a, *l, *lb, *p;
	double v;

	CHECK(x = rbln_tensor_rand(shape, 2, RBLN_F32, seed, 0));
	b1 = bias(batch, HIDDEN, 0.01);
	b2 = bias(batch, OUT, -0.02);
	CHECK(h = rbln_matmul(x, m->w1));
	CHECK(hb = rbln_add(h, b1));
	CHECK(a = rbln_relu(hb));
	CHECK(l = rbln_matmul(a, m->w2));
	CHECK(lb = rbln_add(l, b2));
	CHECK(p = rbln_softmax(lb));
	CHECK(rbln_tensor_item(p, first, &v) == RBLN_OK);
	rbln_tensor_free(x);
	rbln_tensor_free(b1);
	rbln_tensor_free(b2);
	rbln_tensor_free(h);
	rbln_tensor_free(hb);
	rbln_tensor_free(a);
	rbln_tensor_free(l);
	rbln_tensor_free(lb);
	rbln_tensor_free(p);
	return v;
}

static void run(const char *title, const struct mlp *m, const int64_t *batches, int steps)
{
	struct rbln_explain_verdict verdict;
	rbln_explain *e;
	double v = 0;
	int i;

	/* with_stack: each signal names the line that caused it. */
	CHECK(e = rbln_explain_begin(true));
	for (i = 0; i < steps; i++)
		v += forward(m, batches[i], i);
	CHECK(rbln_explain_end(e) == RBLN_OK);
	printf("== %s (%d steps, checksum %.6f) ==\n%s\n", title, steps, v, rbln_explain_report(e));
	CHECK(rbln_explain_verdict(e, &verdict) == RBLN_OK);
	printf("verdict: %s\n\n", verdict.clean ? "clean" : "not clean");
	rbln_explain_free(e);
}

int main(void)
{
	static const int64_t varying[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	static const int64_t steady[] = { 8, 8, 8, 8, 8, 8, 8, 8 };
	int64_t s1[2] = { IN, HIDDEN }, s2[2] = { HIDDEN, OUT };
	struct mlp m;

	if (!rbln_is_available()) {
		printf("no RBLN device: %s\n", rbln_last_error());
		return 1;
	}
	m.w1 = init_weights(s1, 1);
	m.w2 = init_weights(s2, 2);
	run("varying batch sizes", &m, varying, 8);
	run("steady batch size", &m, steady, 8);
	rbln_tensor_free(m.w1);
	rbln_tensor_free(m.w2);
	return 0;
}
