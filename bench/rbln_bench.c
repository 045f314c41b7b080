// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_bench - the cost of work on an rbln device, as ratios to baselines
 * measured in the same run
 *
 *  - submit-to-signal round trip of a NOP job / a bare ioctl round trip
 *    (GET_PARAM);
 *  - pipelined NOP jobs per second on 1, 4 and 16 queues, and the cost per
 *    job in bare ioctl round trips (target: at most 5), of which the
 *    submitting thread's CPU time: the rest is the pipeline behind SUBMIT;
 *  - DMA_COPY host -> device -> host of 64 MiB / memcpy of the same bytes
 *    twice (target: at least 0.7); not with --no-dma;
 *  - growing a pool by 2 MiB through VM_BIND (an object, mapped at the end
 *    of a reservation, the map waited for) / creating a 2 MiB object (a
 *    plain segment), and giving each back.
 *
 * Absolute times under QEMU's TCG mean little; the ratios are the result.
 * Under rbln-vm --icount the job ratios are costs in instructions, the same
 * on every run; bandwidth means nothing there, hence --no-dma.
 * Not a test: it gates nothing.
 *
 * `rbln_bench --pipeline QUEUES JOBS` measures only the bare ioctl and
 * JOBS pipelined jobs on QUEUES queues: rbln-bench-sched counts the
 * kernel's events per job around it.
 */

#include <errno.h>
#include <stdbool.h>
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

static double clock_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
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
 * jobs per second, submission to the last completion, and in @submit_s
 * the CPU time per job of the thread that submits.
 */
static double pipelined_jobs_per_s(struct rbln_drm_device *dev, struct buf *cmd,
				   unsigned int nq, unsigned int jobs, double *submit_s)
{
	struct drm_rbln_sync sig = { 0 };
	uint32_t queues[16], syncs[16];
	int fd = rbln_drm_fd(dev), ret;
	unsigned int i;
	double t, cpu;

	for (i = 0; i < nq; i++) {
		if (rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queues[i]) ||
		    drmSyncobjCreate(fd, 0, &syncs[i]))
			die("queue", errno);
	}
	t = now();
	cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
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
	*submit_s = (clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu) / jobs;
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

static void report_pipelined(struct rbln_drm_device *dev, struct buf *cmd, unsigned int nq,
			     unsigned int jobs, double bare)
{
	double jps, submit, per_job;

	jps = pipelined_jobs_per_s(dev, cmd, nq, jobs, &submit);
	per_job = 1e9 / jps / bare;
	printf("pipelined NOP, %2u queue%s     %10.0f jobs/s  %6.1f bare ioctls per job, %.1f submitting%s\n",
	       nq, nq == 1 ? " " : "s", jps, per_job, submit * 1e9 / bare,
	       per_job <= 5 ? "" : "  (target: <= 5)");
}

/*
 * @n times: 2 MiB of device memory gained and given back, as a plain
 * segment (BO_CREATE, GEM_CLOSE) or as an expandable segment's piece
 * (BO_CREATE @flags, VM_BIND map at the reservation's end and wait, then
 * unmap, wait and GEM_CLOSE). ns per gain and give-back.
 */
static double grow_ns(struct rbln_drm_device *dev, unsigned int n, bool bind, uint32_t flags)
{
	struct drm_rbln_sync sig = { 0 };
	int fd = rbln_drm_fd(dev), ret = 0;
	uint64_t va = 0, at;
	unsigned int i;
	uint32_t h;
	double t;

	if (drmSyncobjCreate(fd, 0, &sig.handle))
		die("syncobj", errno);
	if (bind && (ret = rbln_drm_vm_reserve(dev, (uint64_t)n * 2 * MIB, 2 * MIB, &va)))
		die("VM_RESERVE", ret);
	t = now();
	for (i = 0; i < n; i++) {
		at = va + (uint64_t)i * 2 * MIB;
		ret = rbln_drm_bo_create(dev, 2 * MIB, RBLN_BO_DEVICE, flags, &h, NULL);
		if (!ret && bind)
			ret = rbln_drm_vm_map(dev, at, 2 * MIB, h, 0, 0, NULL, 0, &sig);
		if (!ret && bind && drmSyncobjWait(fd, &sig.handle, 1, INT64_MAX, 0, NULL))
			ret = -errno;
		if (!ret && bind)
			ret = rbln_drm_vm_unmap(dev, at, 2 * MIB, NULL, 0, &sig);
		if (!ret && bind && drmSyncobjWait(fd, &sig.handle, 1, INT64_MAX, 0, NULL))
			ret = -errno;
		if (ret)
			die(bind ? "VM_BIND" : "BO_CREATE", ret);
		rbln_drm_bo_close(dev, h);
	}
	t = now() - t;
	if (bind)
		rbln_drm_vm_release(dev, va);
	drmSyncobjDestroy(fd, sig.handle);
	return t * 1e9 / n;
}

static void report_grow(struct rbln_drm_device *dev, double bare)
{
	double plain, bound, bound_va;

	grow_ns(dev, 20, false, 0);
	plain = grow_ns(dev, 200, false, 0);
	bound = grow_ns(dev, 200, true, RBLN_BO_NO_VA);
	bound_va = grow_ns(dev, 200, true, 0);
	printf("grow by 2 MiB and give back:\n");
	printf("  plain segment (BO_CREATE, GEM_CLOSE)  %10.0f ns  %6.1fx bare ioctl  (baseline)\n",
	       plain, plain / bare);
	printf("  VM_BIND piece, NO_VA object           %10.0f ns  %6.2fx a plain segment\n",
	       bound, bound / plain);
	printf("  VM_BIND piece, object with an address %10.0f ns  %6.2fx a plain segment (librbln)\n",
	       bound_va, bound_va / plain);
}

static void usage(void)
{
	fprintf(stderr, "usage: rbln_bench [--no-dma | --pipeline QUEUES JOBS]\n");
	exit(2);
}

/* A count in [1, @max], or usage. */
static unsigned int count_arg(const char *arg, unsigned long max)
{
	unsigned long v;
	char *end;

	if (arg[0] < '0' || arg[0] > '9')
		usage();
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || !v || v > max)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	unsigned int minor, i, nqs[] = { 1, 4, 16 }, pipe_queues = 0, pipe_jobs = 0;
	struct rbln_drm_device *dev;
	bool dma = argc == 1;
	double bare, rt;
	struct buf cmd;
	uint32_t queue;
	int ret;

	if (argc == 4 && !strcmp(argv[1], "--pipeline")) {
		pipe_queues = count_arg(argv[2], 16);
		pipe_jobs = count_arg(argv[3], 1000000);
	} else if (argc > 2 || (argc == 2 && strcmp(argv[1], "--no-dma"))) {
		usage();
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
	bare = bare_ioctl_ns(dev, 20000);
	if (pipe_jobs) {
		report_pipelined(dev, &cmd, pipe_queues, pipe_jobs, bare);
		rbln_drm_close(dev);
		return 0;
	}

	nop_round_trip_ns(dev, queue, &cmd, 50);
	rt = nop_round_trip_ns(dev, queue, &cmd, 500);
	printf("bare ioctl round trip        %10.0f ns  (baseline)\n", bare);
	printf("NOP submit-to-signal         %10.0f ns  %6.1fx bare ioctl\n", rt, rt / bare);

	for (i = 0; i < 3; i++)
		report_pipelined(dev, &cmd, nqs[i], 3000, bare);
	report_grow(dev, bare);
	if (dma)
		report_dma(dev, queue, &cmd);
	rbln_drm_close(dev);
	return 0;
}
