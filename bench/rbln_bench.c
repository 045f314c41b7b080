// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_bench - the cost of work on an rbln device, as ratios to baselines
 * measured in the same run
 *
 *  - submit-to-signal round trip of a NOP job / a bare ioctl round trip
 *    (GET_PARAM);
 *  - pipelined NOP jobs per second on 1, 4 and 16 queues, and the cost per
 *    job in bare ioctl round trips (target: at most 5);
 *  - DMA_COPY host -> device -> host of 64 MiB / memcpy of the same bytes
 *    twice (target: at least 0.7); not with --no-dma.
 *
 * Absolute times under QEMU's TCG mean little; the ratios are the result.
 * Under rbln-vm --icount the job ratios are costs in instructions, the same
 * on every run; bandwidth means nothing there, hence --no-dma.
 * Not a test: it gates nothing.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <rbln_drm.h>
#include <xf86drm.h>

#define MIB		(1u << 20)
#define DMA_BYTES	(64u * MIB)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "rbln_bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

struct buf {
	uint32_t handle;
	uint64_t va;
	void *cpu;
};

static void buf_new(struct rbln_drm_device *dev, uint64_t size, uint32_t placement,
		    struct buf *b)
{
	int ret = rbln_drm_bo_create(dev, size, placement, 0, &b->handle, &b->va);

	if (!ret && placement == RBLN_BO_HOST)
		ret = rbln_drm_bo_mmap(dev, b->handle, PROT_READ | PROT_WRITE, &b->cpu, NULL);
	if (ret)
		die("buffer", ret);
}

static double bare_ioctl_ns(struct rbln_drm_device *dev, unsigned int n)
{
	uint64_t v;
	unsigned int i;
	double t = now();

	for (i = 0; i < n; i++)
		if (rbln_drm_get_param(dev, RBLN_PARAM_ABI_VERSION, &v))
			die("GET_PARAM", errno);
	return (now() - t) * 1e9 / n;
}

static double nop_round_trip_ns(struct rbln_drm_device *dev, uint32_t queue,
				struct buf *cmd, unsigned int n)
{
	struct drm_rbln_sync sig = { 0 };
	int fd = rbln_drm_fd(dev), ret;
	unsigned int i;
	double t;

	if (drmSyncobjCreate(fd, 0, &sig.handle))
		die("syncobj", errno);
	t = now();
	for (i = 0; i < n; i++) {
		ret = rbln_drm_submit(dev, queue, cmd->va, 8, &cmd->handle, 1, NULL, 0, &sig);
		if (ret)
			die("submit", ret);
		if (drmSyncobjWait(fd, &sig.handle, 1, INT64_MAX, 0, NULL))
			die("wait", errno);
	}
	t = now() - t;
	drmSyncobjDestroy(fd, sig.handle);
	return t * 1e9 / n;
}

/*
 * @jobs NOP jobs spread round-robin over @nq queues, the way a runtime
 * pipelines work: only each queue's last job signals a syncobj. Returns
 * jobs per second, submission to the last completion.
 */
static double pipelined_jobs_per_s(struct rbln_drm_device *dev, struct buf *cmd,
				   unsigned int nq, unsigned int jobs)
{
	struct drm_rbln_sync sig = { 0 };
	uint32_t queues[16], syncs[16];
	int fd = rbln_drm_fd(dev), ret;
	unsigned int i;
	double t;

	for (i = 0; i < nq; i++) {
		if (rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queues[i]) ||
		    drmSyncobjCreate(fd, 0, &syncs[i]))
			die("queue", errno);
	}
	t = now();
	for (i = 0; i < jobs; i++) {
		unsigned int q = i % nq;

		sig.handle = syncs[q];
		ret = rbln_drm_submit(dev, queues[q], cmd->va, 8, &cmd->handle, 1, NULL, 0,
				      i >= jobs - nq ? &sig : NULL);
		if (ret)
			die("submit", ret);
	}
	if (drmSyncobjWait(fd, syncs, nq, INT64_MAX, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL, NULL))
		die("wait", errno);
	t = now() - t;
	for (i = 0; i < nq; i++) {
		drmSyncobjDestroy(fd, syncs[i]);
		rbln_drm_queue_destroy(dev, queues[i]);
	}
	return jobs / t;
}

/* Host -> device -> host in one job; returns seconds, best of @reps. */
static double dma_round_trip_s(struct rbln_drm_device *dev, uint32_t queue, struct buf *cmd,
			       struct buf *src, struct buf *mem, struct buf *dst, int reps)
{
	uint32_t bos[4] = { src->handle, mem->handle, dst->handle, cmd->handle };
	struct drm_rbln_sync sig = { 0 };
	int fd = rbln_drm_fd(dev), ret, r;
	struct rbln_drm_cmd c;
	double best = 1e9, t;

	rbln_drm_cmd_init(&c, cmd->cpu, 4096);
	rbln_drm_cmd_dma_copy(&c, mem->va, src->va, DMA_BYTES);
	rbln_drm_cmd_dma_copy(&c, dst->va, mem->va, DMA_BYTES);
	if (drmSyncobjCreate(fd, 0, &sig.handle))
		die("syncobj", errno);
	for (r = 0; r < reps; r++) {
		t = now();
		ret = rbln_drm_submit(dev, queue, cmd->va, c.len, bos, 4, NULL, 0, &sig);
		if (ret)
			die("submit", ret);
		if (drmSyncobjWait(fd, &sig.handle, 1, INT64_MAX, 0, NULL))
			die("wait", errno);
		t = now() - t;
		if (t < best)
			best = t;
	}
	drmSyncobjDestroy(fd, sig.handle);
	return best;
}

static double memcpy_twice_s(void *a, void *b, void *c, int reps)
{
	double best = 1e9, t;
	int r;

	for (r = 0; r < reps; r++) {
		t = now();
		memcpy(b, a, DMA_BYTES);
		memcpy(c, b, DMA_BYTES);
		t = now() - t;
		if (t < best)
			best = t;
	}
	return best;
}

/* DMA_COPY of 64 MiB host -> device -> host against memcpy of the same. */
static void report_dma(struct rbln_drm_device *dev, uint32_t queue, struct buf *cmd)
{
	struct buf src, mem, dst;
	void *h1, *h2, *h3;
	double dma, cpu;

	buf_new(dev, DMA_BYTES, RBLN_BO_HOST, &src);
	buf_new(dev, DMA_BYTES, RBLN_BO_DEVICE, &mem);
	buf_new(dev, DMA_BYTES, RBLN_BO_HOST, &dst);
	memset(src.cpu, 0x5a, DMA_BYTES);
	memset(dst.cpu, 0, DMA_BYTES);
	h1 = malloc(DMA_BYTES);
	h2 = malloc(DMA_BYTES);
	h3 = malloc(DMA_BYTES);
	if (!h1 || !h2 || !h3)
		die("malloc", ENOMEM);
	memset(h1, 0x5a, DMA_BYTES);
	memset(h2, 0, DMA_BYTES);
	memset(h3, 0, DMA_BYTES);

	dma = dma_round_trip_s(dev, queue, cmd, &src, &mem, &dst, 5);
	cpu = memcpy_twice_s(h1, h2, h3, 5);
	if (memcmp(src.cpu, dst.cpu, DMA_BYTES))
		die("DMA result differs", EIO);
	printf("memcpy 2 x 64 MiB            %10.2f ms  %6.2f GB/s  (baseline)\n",
	       cpu * 1e3, 2.0 * DMA_BYTES / cpu / 1e9);
	printf("DMA_COPY host->dev->host     %10.2f ms  %6.2f GB/s  %5.2fx memcpy%s\n",
	       dma * 1e3, 2.0 * DMA_BYTES / dma / 1e9, cpu / dma,
	       cpu / dma >= 0.7 ? "" : "  (target: >= 0.7)");
	free(h1);
	free(h2);
	free(h3);
}

int main(int argc, char **argv)
{
	struct rbln_drm_device *dev;
	unsigned int minor, i, nqs[] = { 1, 4, 16 };
	double bare, rt, jps;
	struct buf cmd;
	uint32_t queue;
	int ret;

	if (argc > 2 || (argc == 2 && strcmp(argv[1], "--no-dma"))) {
		fprintf(stderr, "usage: rbln_bench [--no-dma]\n");
		return 2;
	}
	if (rbln_drm_enumerate(&minor, 1) < 1)
		die("no rbln device", ENODEV);
	ret = rbln_drm_open(minor, &dev);
	if (!ret)
		ret = rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue);
	if (ret)
		die("open", ret);
	buf_new(dev, 4096, RBLN_BO_HOST, &cmd);
	rbln_drm_cmd_nop(&(struct rbln_drm_cmd){ cmd.cpu, 4096, 0 });

	/* Warm up paths and caches before measuring. */
	bare_ioctl_ns(dev, 1000);
	nop_round_trip_ns(dev, queue, &cmd, 50);

	bare = bare_ioctl_ns(dev, 20000);
	rt = nop_round_trip_ns(dev, queue, &cmd, 500);
	printf("bare ioctl round trip        %10.0f ns  (baseline)\n", bare);
	printf("NOP submit-to-signal         %10.0f ns  %6.1fx bare ioctl\n", rt, rt / bare);

	for (i = 0; i < 3; i++) {
		jps = pipelined_jobs_per_s(dev, &cmd, nqs[i], 3000);
		printf("pipelined NOP, %2u queue%s     %10.0f jobs/s  %6.1f bare ioctls per job%s\n",
		       nqs[i], nqs[i] == 1 ? " " : "s", jps, 1e9 / jps / bare,
		       1e9 / jps / bare <= 5 ? "" : "  (target: <= 5)");
	}
	if (argc == 1)
		report_dma(dev, queue, &cmd);
	rbln_drm_close(dev);
	return 0;
}
