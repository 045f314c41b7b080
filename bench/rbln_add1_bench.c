// SPDX-License-Identifier: MIT
/*
 * rbln_add1_bench - a warm-hit add of one f32 element through librbln's C
 * API: the baseline of torch.rbln's benchmark (torch_rbln_bench.py).
 *
 * A library, not a program: the benchmark loads it into its own process
 * and runs its rounds between rounds of the same op through torch, so the
 * two share the guest, the C library and the moment, and noise from the
 * rest of the machine falls on both alike.
 */

#include "runtime_bench.h"

/*
 * Nanoseconds per add over @n adds of two one-element f32 tensors on
 * device 0, each add queued and its result freed, one synchronize at the
 * end, as a torch loop `c = a + b` does; -1 with librbln's message on
 * stderr on failure. The operands are made by the first call and kept:
 * the benchmark calls it from one thread.
 */
double rbln_add1_round(int n)
{
	static rbln_tensor *a, *b;
	int64_t shape[1] = { 1 };
	float one = 1.0f;
	double t;
	int i;

	if (!a) {
		a = rbln_tensor_from_data(&one, shape, 1, RBLN_F32, 0);
		b = rbln_tensor_from_data(&one, shape, 1, RBLN_F32, 0);
	}
	if (!a || !b)
		goto fail;
	t = now();
	for (i = 0; i < n; i++) {
		rbln_tensor *c = rbln_add(a, b);

		if (!c)
			goto fail;
		rbln_tensor_free(c);
	}
	if (rbln_synchronize(0))
		goto fail;
	return (now() - t) / n * 1e9;
fail:
	fprintf(stderr, "rbln_add1_round: %s\n", rbln_last_error());
	return -1;
}
