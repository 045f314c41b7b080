// SPDX-License-Identifier: MIT
/*
 * rbln_graph_bench - what a graph saves per op, as ratios to baselines
 * measured in the same run
 *
 * A chain of 256 small elementwise ops (every result the next op's
 * operand, each freed once used), then a synchronize, of 1,024 f32 and of
 * 16 f32 per op:
 *  - per op, eager dispatch against replaying the captured chain
 *    (target: replay at least 10x cheaper);
 *  - per op, the replay against a bare SUBMIT + wait of one such op with
 *    libdrm-rbln alone: what a replay costs beside the cheapest job;
 *  - the device's own time per op (drm-engine-npu of the process's
 *    fdinfo, during the replays): what a graph cannot take away. The
 *    emulated NPU computes floats in the guest's CPU, which QEMU's TCG
 *    makes slow: at 1,024 elements it is most of a replay's time.
 *
 * Run by `meson compile -C build bench-graph` in a guest with one NPU.
 * Not a test: it gates nothing.
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rbln/rbln.h>

#include "runtime_bench.h"

#define CHAIN	256
#define MAX_NUMEL	1024
#define ROUNDS	7	/* interleaved; the fastest of each kind filters out noise */

/* The chain on @x: x * 0.5 + 1, CHAIN / 2 times; the caller keeps the result. */
static rbln_tensor *chain(rbln_tensor *x)
{
	rbln_tensor *t = x, *next;
	int i;

	for (i = 0; i < CHAIN; i++) {
		next = i % 2 ? rbln_add_scalar(t, 1) : rbln_mul_scalar(t, 0.5);
		if (!next)
			die("op");
		if (t != x)
			rbln_tensor_free(t);
		t = next;
	}
	return t;
}

/* ns per op of the chain run eagerly, @n times, each synchronized. */
static double eager_ns(rbln_tensor *x, int n)
{
	double t = now();
	int i;

	for (i = 0; i < n; i++) {
		rbln_tensor *y = chain(x);

		if (rbln_synchronize(0))
			die("synchronize");
		rbln_tensor_free(y);
	}
	return (now() - t) * 1e9 / n / CHAIN;
}

/* ns per op of the captured chain replayed @n times, each synchronized. */
static double replay_ns(rbln_graph *g, int n)
{
	double t = now();
	int i;

	for (i = 0; i < n; i++)
		if (rbln_graph_replay(g) || rbln_synchronize(0))
			die("replay");
	return (now() - t) * 1e9 / n / CHAIN;
}

static double bare_ns(struct bare *b, int n)
{
	double t = now();
	int i;

	for (i = 0; i < n; i++)
		if (!bare_run(b))
			die("bare submit");
	return (now() - t) * 1e9 / n;
}

/* The NPU time of every rbln file of the process, in ns (fdinfo's drm-engine-npu). */
static double engine_ns(void)
{
	DIR *dir = opendir("/proc/self/fdinfo");
	struct dirent *de;
	char path[300], line[256];
	uint64_t v, sum = 0;
	FILE *f;

	while (dir && (de = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", de->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "drm-engine-npu: %" SCNu64, &v) == 1)
				sum += v;
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return (double)sum;
}

/* Measures and prints the chain of @numel-element ops, replayed @n times a round. */
static void measure(int64_t numel, int n)
{
	double eager[ROUNDS], replay[ROUNDS], bare[ROUNDS], device[ROUNDS], e, g, b, dv, t0;
	float out[MAX_NUMEL], ref[MAX_NUMEL];
	rbln_tensor *x, *y, *z;
	struct bare bare_dev;
	rbln_graph *graph;
	int r;

	x = rbln_tensor_full(&numel, 1, RBLN_F32, 3, 0);
	if (!x || rbln_tensor_materialize(x))
		die("input");
	if (!bare_open(&bare_dev, numel))
		die("bare submit");
	if (rbln_graph_capture_begin(0))
		die("capture");
	y = chain(x);
	if (rbln_graph_capture_end(&graph))
		die("capture");
	eager_ns(x, 2);
	replay_ns(graph, 2);
	bare_ns(&bare_dev, 50);
	/* The replay computes what the eager chain does. */
	z = chain(x);
	if (rbln_tensor_read(z, ref, numel * 4) || rbln_tensor_read(y, out, numel * 4))
		die("read");
	rbln_tensor_free(z);
	if (memcmp(out, ref, numel * 4))
		die("the replay and the eager chain differ");

	for (r = 0; r < ROUNDS; r++) {
		eager[r] = eager_ns(x, n);
		t0 = engine_ns();
		replay[r] = replay_ns(graph, n);
		device[r] = (engine_ns() - t0) / n / CHAIN;
		bare[r] = bare_ns(&bare_dev, CHAIN);
	}
	e = min_of(eager, ROUNDS);
	g = min_of(replay, ROUNDS);
	b = min_of(bare, ROUNDS);
	dv = min_of(device, ROUNDS);
	printf("chain of %d elementwise ops on %" PRId64 " f32, synchronized, per op: eager %.2f us, graph replay %.2f us\n"
	       "  (of which the NPU's own time %.2f us); bare SUBMIT + wait of one such op: %.2f us\n",
	       CHAIN, numel, e / 1e3, g / 1e3, dv / 1e3, b / 1e3);
	printf("  eager / replay, per op                %.1f  (target >= 10)\n", e / g);
	printf("  eager / replay, host time per op      %.1f  (without the NPU's own time)\n",
	       (e - dv) / (g - dv > 1 ? g - dv : 1));
	printf("  replay per op / bare SUBMIT+wait      %.3f\n", g / b);

	rbln_graph_free(graph);
	rbln_tensor_free(y);
	rbln_tensor_free(x);
	rbln_drm_close(bare_dev.dev);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;

	if (n < 1) {
		fprintf(stderr, "usage: rbln_graph_bench [REPLAYS_PER_ROUND]\n");
		return 2;
	}
	measure(1024, n);
	measure(16, n);
	return 0;
}
