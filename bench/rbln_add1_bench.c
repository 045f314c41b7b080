// SPDX-License-Identifier: MIT
/*
 * rbln_add1_bench - a warm-hit add of one f32 element through librbln's C
 * API: the baseline of torch.rbln's benchmark (torch_rbln_bench.py), which
 * runs the same op through torch in the same guest run.
 *
 * Prints "c_add_ns N": nanoseconds per add, the fastest of 5 rounds of 500,
 * each add queued and its result freed, one synchronize per round, as a
 * torch loop `c = a + b` does.
 */

#include "runtime_bench.h"

int main(void)
{
	int64_t shape[1] = { 1 };
	float one = 1.0f;
	rbln_tensor *a = rbln_tensor_from_data(&one, shape, 1, RBLN_F32, 0);
	rbln_tensor *b = rbln_tensor_from_data(&one, shape, 1, RBLN_F32, 0);
	double rounds[5], t;
	int r, i;

	if (!a || !b)
		die("tensors");
	for (r = -1; r < 5; r++) {
		t = now();
		for (i = 0; i < 500; i++) {
			rbln_tensor *c = rbln_add(a, b);

			if (!c)
				die("add");
			rbln_tensor_free(c);
		}
		if (rbln_synchronize(0))
			die("synchronize");
		if (r >= 0)	/* the first round compiles and warms up */
			rounds[r] = (now() - t) / 500;
	}
	printf("c_add_ns %.0f\n", min_of(rounds, 5) * 1e9);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return 0;
}
