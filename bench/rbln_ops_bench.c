// SPDX-License-Identifier: MIT
/*
 * rbln_ops_bench - the cost of librbln's op dispatch, as ratios to
 * baselines measured in the same run
 *
 *  - a warm-hit add of one element, then synchronize, against a bare
 *    SUBMIT + wait of the same EW_BINARY packet through libdrm-rbln
 *    (target: at most 1.5);
 *  - the same dispatch before any explain() region was ever opened, inside
 *    one, and after it closed (target: no difference off, at most 5% on);
 *  - an elementwise add of a large tensor on a logical device of two NPUs
 *    against one NPU (target: at least 1.6x where the guest's vCPUs run in
 *    parallel).
 *
 * Run by `meson compile -C build bench-ops` in a guest with three emulated
 * NPUs and RBLN_DEVICE_MAP="[0],[1,2]": logical device 0 is one NPU,
 * logical device 1 two. Not a test: it gates nothing.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rbln/rbln.h>

#include "runtime_bench.h"

#define ROUNDS	15	/* short rounds; the fastest of each kind filters out noise */

/* ns per warm-hit one-element add on logical device 0, synchronized. */
static double add_ns(rbln_tensor *a, rbln_tensor *b, int n)
{
	double t = now();
	int i;

	for (i = 0; i < n; i++) {
		rbln_tensor *c = rbln_add(a, b);

		if (!c || rbln_synchronize(0))
			die("add");
		rbln_tensor_free(c);
	}
	return (now() - t) * 1e9 / n;
}

/* ns per SUBMIT + wait of the same packet. */
static double bare_ns(struct bare *b, int n)
{
	double t = now();
	int i;

	for (i = 0; i < n; i++)
		if (!bare_run(b))
			die("submit");
	return (now() - t) * 1e9 / n;
}

/* Seconds for a + b of @numel f32 on logical device @d, best of five. */
static double big_add_s(int d, int64_t numel)
{
	rbln_tensor *a = rbln_tensor_full(&numel, 1, RBLN_F32, 1.5, d);
	rbln_tensor *b = rbln_tensor_full(&numel, 1, RBLN_F32, 2.0, d);
	double best = 1e9, t;
	int r;

	if (!a || !b || rbln_tensor_materialize(a) || rbln_tensor_materialize(b))
		die("big tensors");
	for (r = 0; r < 5; r++) {
		rbln_tensor *c;

		t = now();
		c = rbln_add(a, b);
		if (!c || rbln_synchronize(d))
			die("big add");
		t = now() - t;
		best = t < best ? t : best;
		rbln_tensor_free(c);
	}
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return best;
}

static double max_of(const double *v, int n)
{
	double m = v[0];
	int i;

	for (i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

int main(int argc, char **argv)
{
	int64_t one = 1, big = 8 << 20;
	double never[ROUNDS], on[ROUNDS], off[ROUNDS], bare[ROUNDS], one_npu, two_npus;
	int n = argc > 1 ? atoi(argv[1]) : 150, r;
	rbln_tensor *a, *b;
	rbln_explain *e;
	struct bare bare_dev;

	if (rbln_device_count() != 2 || rbln_physical_device_count() != 3) {
		fprintf(stderr, "rbln_ops_bench: needs RBLN_DEVICE_MAP=\"[0],[1,2]\" over 3 NPUs\n");
		return 1;
	}
	a = rbln_tensor_full(&one, 1, RBLN_F32, 1, 0);
	b = rbln_tensor_full(&one, 1, RBLN_F32, 2, 0);
	add_ns(a, b, 300);	/* compile, fill the caches, settle */
	if (!bare_open(&bare_dev, 1))
		die("bare submit");
	bare_ns(&bare_dev, 300);

	/* Never opened: measured before any region exists in the process. */
	for (r = 0; r < ROUNDS; r++) {
		never[r] = add_ns(a, b, n);
		bare[r] = bare_ns(&bare_dev, n);
	}
	for (r = 0; r < ROUNDS; r++) {
		e = rbln_explain_begin(false);
		if (!e)
			die("explain");
		on[r] = add_ns(a, b, n);
		rbln_explain_end(e);
		rbln_explain_free(e);
		off[r] = add_ns(a, b, n);
	}
	printf("warm-hit add of one element + synchronize: %.1f us; bare submit + wait: %.1f us\n",
	       min_of(never, ROUNDS) / 1e3, min_of(bare, ROUNDS) / 1e3);
	printf("  dispatch / bare submit+wait          %.2f  (target <= 1.5)\n",
	       min_of(never, ROUNDS) / min_of(bare, ROUNDS));
	printf("  explain on / never opened            %.3f  (target <= 1.05)\n",
	       min_of(on, ROUNDS) / min_of(never, ROUNDS));
	printf("  explain off after a region / never   %.3f  (target: no difference)\n",
	       min_of(off, ROUNDS) / min_of(never, ROUNDS));
	printf("  never opened, max / min of %d rounds  %.3f  (the noise)\n", ROUNDS,
	       max_of(never, ROUNDS) / min_of(never, ROUNDS));
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_drm_close(bare_dev.dev);

	one_npu = big_add_s(0, big);
	two_npus = big_add_s(1, big);
	printf("add of %lld f32: one NPU %.1f ms, a logical device of two %.1f ms\n",
	       (long long)big, one_npu * 1e3, two_npus * 1e3);
	printf("  speedup of two NPUs                  %.2fx (target >= 1.6 with parallel vCPUs)\n",
	       one_npu / two_npus);
	return 0;
}
