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
#include <sys/mman.h>
#include <time.h>

#include <rbln/rbln.h>
#include <rbln_drm.h>
#include <xf86drm.h>

#define ROUNDS	15	/* short rounds; the fastest of each kind filters out noise */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "rbln_ops_bench: %s: %s\n", what, rbln_last_error()[0] ?
		rbln_last_error() : strerror(errno));
	exit(1);
}

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

/* A one-element EW_BINARY add, submitted with libdrm-rbln alone. */
struct bare {
	struct rbln_drm_device *dev;
	uint32_t queue, h[4];
	struct drm_rbln_sync sig;
	uint32_t len;
	uint64_t queue_va;	/* of the command buffer */
};

static void bare_open(struct bare *b)
{
	struct rbln_drm_cmd c;
	unsigned int minor;
	uint64_t va[4];
	void *cpu;
	int i;

	memset(b, 0, sizeof(*b));
	if (rbln_drm_enumerate(&minor, 1) < 1 || rbln_drm_open(minor, &b->dev) ||
	    rbln_drm_queue_create(b->dev, RBLN_QUEUE_PRIORITY_NORMAL, &b->queue))
		die("open");
	for (i = 0; i < 3; i++)
		if (rbln_drm_bo_create(b->dev, 4096, RBLN_BO_DEVICE, 0, &b->h[i], &va[i]))
			die("bo");
	if (rbln_drm_bo_create(b->dev, 4096, RBLN_BO_HOST, 0, &b->h[3], &va[3]) ||
	    rbln_drm_bo_mmap(b->dev, b->h[3], PROT_READ | PROT_WRITE, &cpu, NULL) ||
	    drmSyncobjCreate(rbln_drm_fd(b->dev), 0, &b->sig.handle))
		die("command buffer");
	rbln_drm_cmd_init(&c, cpu, 4096);
	rbln_drm_cmd_binary(&c, RBLN_BINARY_ADD, RBLN_DTYPE_F32, va[2], va[0], va[1], 1);
	b->len = c.len;
	b->sig.point = 0;
	b->queue_va = va[3];
}

/* ns per SUBMIT + wait of the same packet. */
static double bare_ns(struct bare *b, int n)
{
	int fd = rbln_drm_fd(b->dev), i;
	double t = now();

	for (i = 0; i < n; i++) {
		if (rbln_drm_submit(b->dev, b->queue, b->queue_va, b->len, b->h, 4, NULL, 0,
				    &b->sig) ||
		    drmSyncobjWait(fd, &b->sig.handle, 1, INT64_MAX, 0, NULL))
			die("submit");
	}
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

static double min_of(const double *v, int n)
{
	double m = v[0];
	int i;

	for (i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
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
	bare_open(&bare_dev);
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
