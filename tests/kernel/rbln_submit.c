// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_submit - queues, submission, syncobjs, DMA, and every rejection of
 * QUEUE_CREATE, QUEUE_DESTROY and SUBMIT
 *
 * Run with emu_devices>=1.
 */

#include <sys/ioctl.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define MIB (1u << 20)

FIXTURE(submit) {
	struct rbln_drm_device *dev;
	int fd;
	uint32_t queue;
	struct rbln_test_buf cmd;
};

FIXTURE_SETUP(submit)
{
	ASSERT_EQ(0, rbln_test_open(0, &self->dev));
	self->fd = rbln_drm_fd(self->dev);
	ASSERT_EQ(0, rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_NORMAL, &self->queue));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 64 * 1024, RBLN_BO_HOST, 0, &self->cmd));
}

FIXTURE_TEARDOWN(submit)
{
	rbln_test_buf_free(self->dev, &self->cmd);
	rbln_drm_close(self->dev);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

static int raw_submit(int fd, struct drm_rbln_submit *args)
{
	return ioctl(fd, DRM_IOCTL_RBLN_SUBMIT, args) ? -errno : 0;
}

TEST_F(submit, nop_job_signals)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	EXPECT_EQ(1, rbln_test_run(self->dev, self->queue, &self->cmd, c.len, NULL, 0, 5000));
}

/* How a job ended reads the same on a timeline point as on a binary syncobj. */
TEST_F(submit, failed_job_status_on_a_timeline_point)
{
	struct drm_rbln_sync sig = { .point = 3 };
	struct rbln_drm_cmd c;
	uint64_t point = 3;
	int status = 0;

	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, 0x10000000ull, 0, 64));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_submit(self->dev, self->queue, self->cmd.va, c.len,
				     &self->cmd.handle, 1, NULL, 0, &sig));
	ASSERT_EQ(0, drmSyncobjTimelineWait(self->fd, &sig.handle, &point, 1,
					    rbln_test_deadline_ns(10000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->dev, sig.handle, 3, &status));
	EXPECT_EQ(-EFAULT, status);
	drmSyncobjDestroy(self->fd, sig.handle);
}

TEST_F(submit, dma_round_trip_through_device_memory)
{
	struct rbln_test_buf src, dst, mem;
	uint32_t bos[3], *s, *d, i, n = 3 * MIB + 4096 + 4;
	struct rbln_drm_cmd c;

	ASSERT_EQ(0, rbln_test_buf_new(self->dev, n, RBLN_BO_HOST, 0, &src));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, n, RBLN_BO_HOST, 0, &dst));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, n, RBLN_BO_DEVICE, 0, &mem));
	s = src.cpu;
	d = dst.cpu;
	for (i = 0; i < n / 4; i++)
		s[i] = i * 2654435761u;
	memset(d, 0xee, n);

	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	/* An odd offset and length exercise the page-crossing paths. */
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, mem.va, src.va, n));
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, dst.va + 4, mem.va + 4, n - 8));
	bos[0] = src.handle;
	bos[1] = dst.handle;
	bos[2] = mem.handle;
	ASSERT_EQ(1, rbln_test_run(self->dev, self->queue, &self->cmd, c.len, bos, 3, 10000));
	EXPECT_EQ(0xeeeeeeeeu, d[0]);
	for (i = 1; i < n / 4 - 1; i++) {
		ASSERT_EQ(s[i], d[i]) TH_LOG("word %u", i);
	}
	EXPECT_EQ(0xeeeeeeeeu, d[n / 4 - 1]);

	rbln_test_buf_free(self->dev, &src);
	rbln_test_buf_free(self->dev, &dst);
	rbln_test_buf_free(self->dev, &mem);
}

TEST_F(submit, dma_fill_and_untouched_memory_reads_zero)
{
	struct rbln_test_buf mem, out;
	struct rbln_drm_cmd c;
	uint32_t bos[2], *o, i;

	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 2 * MIB, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 2 * MIB, RBLN_BO_HOST, 0, &out));
	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va + 4096, 0xdeadbeef, MIB));
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, mem.va, 2 * MIB));
	bos[0] = mem.handle;
	bos[1] = out.handle;
	ASSERT_EQ(1, rbln_test_run(self->dev, self->queue, &self->cmd, c.len, bos, 2, 10000));
	o = out.cpu;
	for (i = 0; i < 2 * MIB / 4; i++) {
		uint32_t want = i >= 1024 && i < 1024 + MIB / 4 ? 0xdeadbeef : 0;

		ASSERT_EQ(want, o[i]) TH_LOG("word %u", i);
	}
	rbln_test_buf_free(self->dev, &mem);
	rbln_test_buf_free(self->dev, &out);
}

/* Queue A fills, queue B copies after A's timeline point: B sees A's data. */
TEST_F(submit, timeline_orders_queues)
{
	struct rbln_test_buf mem, out, cmd_b;
	struct drm_rbln_sync sig = { 0 }, wait = { 0 };
	uint32_t qb, bos_a[2], bos_b[3], *o;
	struct rbln_drm_cmd c;
	unsigned int round;
	uint64_t point;
	int status;

	ASSERT_EQ(0, rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_LOW, &qb));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 8 * MIB, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 4096, RBLN_BO_HOST, 0, &out));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 4096, RBLN_BO_HOST, 0, &cmd_b));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sig.handle));
	wait.handle = sig.handle;

	for (round = 1; round <= 3; round++) {
		/* A: a large fill, so B would overtake it if unordered. */
		rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 0x1000 + round, 8 * MIB));
		bos_a[0] = mem.handle;
		bos_a[1] = self->cmd.handle;
		sig.point = round;
		ASSERT_EQ(0, rbln_drm_submit(self->dev, self->queue, self->cmd.va, c.len,
					     bos_a, 2, NULL, 0, &sig));
		/* B: copy the last word out once A's point signals. */
		rbln_drm_cmd_init(&c, cmd_b.cpu, cmd_b.size);
		ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, mem.va + 8 * MIB - 4, 4));
		bos_b[0] = mem.handle;
		bos_b[1] = out.handle;
		bos_b[2] = cmd_b.handle;
		wait.point = round;
		sig.point = 100 + round;
		ASSERT_EQ(0, rbln_drm_submit(self->dev, qb, cmd_b.va, c.len, bos_b, 3,
					     &wait, 1, &sig));
		point = sig.point;
		ASSERT_EQ(0, drmSyncobjTimelineWait(self->fd, &sig.handle, &point, 1,
						    rbln_test_deadline_ns(10000),
						    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL));
		ASSERT_EQ(0, rbln_drm_fence_status(self->dev, sig.handle, sig.point, &status));
		EXPECT_EQ(1, status);
		o = out.cpu;
		EXPECT_EQ(0x1000 + round, o[0]);
	}
	drmSyncobjDestroy(self->fd, sig.handle);
	rbln_test_buf_free(self->dev, &mem);
	rbln_test_buf_free(self->dev, &out);
	rbln_test_buf_free(self->dev, &cmd_b);
	EXPECT_EQ(0, rbln_drm_queue_destroy(self->dev, qb));
}

/* Many processes, each with several queues, each job checking its own data. */
TEST(many_queues_and_processes)
{
	const unsigned int procs = 4, queues = 4, jobs = 24;
	unsigned int p;
	int status;

	for (p = 0; p < procs; p++) {
		if (fork() == 0) {
			struct rbln_test_buf mem[4], out[4], cmd[4];
			struct drm_rbln_sync sig = { 0 };
			struct rbln_drm_device *dev;
			uint32_t q[4], bos[3], want;
			unsigned int i, j;
			struct rbln_drm_cmd c;

			if (rbln_test_open(0, &dev) || drmSyncobjCreate(rbln_drm_fd(dev), 0, &sig.handle))
				_exit(10);
			for (i = 0; i < queues; i++) {
				if (rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &q[i]) ||
				    rbln_test_buf_new(dev, MIB, RBLN_BO_DEVICE, 0, &mem[i]) ||
				    rbln_test_buf_new(dev, 4096 * jobs, RBLN_BO_HOST, 0, &out[i]) ||
				    rbln_test_buf_new(dev, 4096 * jobs, RBLN_BO_HOST, 0, &cmd[i]))
					_exit(11);
			}
			for (j = 0; j < jobs; j++) {
				for (i = 0; i < queues; i++) {
					want = p << 24 | i << 16 | j;
					rbln_drm_cmd_init(&c, (char *)cmd[i].cpu + 4096 * j, 4096);
					if (rbln_drm_cmd_dma_fill(&c, mem[i].va, want, MIB) ||
					    rbln_drm_cmd_dma_copy(&c, out[i].va + 4096 * j,
								  mem[i].va + MIB - 4096, 4096))
						_exit(12);
					bos[0] = mem[i].handle;
					bos[1] = out[i].handle;
					bos[2] = cmd[i].handle;
					sig.point = j * queues + i + 1;
					if (rbln_drm_submit(dev, q[i], cmd[i].va + 4096 * j, c.len,
							    bos, 3, NULL, 0, &sig))
						_exit(13);
				}
			}
			/* Points of one timeline signal in order of their fences. */
			for (j = 1; j <= jobs * queues; j++) {
				uint64_t point = j;
				int st;

				if (drmSyncobjTimelineWait(rbln_drm_fd(dev), &sig.handle, &point, 1,
							   rbln_test_deadline_ns(60000), 0, NULL) ||
				    rbln_drm_fence_status(dev, sig.handle, point, &st) || st != 1)
					_exit(14);
			}
			for (i = 0; i < queues; i++) {
				for (j = 0; j < jobs; j++) {
					uint32_t *o = (uint32_t *)((char *)out[i].cpu + 4096 * j);

					if (o[0] != (p << 24 | i << 16 | j) || o[1023] != o[0])
						_exit(15);
				}
			}
			rbln_drm_close(dev);
			_exit(0);
		}
	}
	for (p = 0; p < procs; p++) {
		ASSERT_GT(wait(&status), 0);
		EXPECT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status));
	}
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(submit, queue_create_rejections)
{
	struct drm_rbln_queue_create args = { .priority = 3 };
	uint32_t q;

	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_QUEUE_CREATE, &args));
	EXPECT_EQ(EINVAL, errno);
	args.priority = UINT32_MAX;
	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_QUEUE_CREATE, &args));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-EINVAL, rbln_drm_queue_create(self->dev, 0, NULL));
	/* Root may ask for high priority; each new queue gets a new id. */
	ASSERT_EQ(0, rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_HIGH, &q));
	EXPECT_NE(self->queue, q);
	EXPECT_EQ(0, rbln_drm_queue_destroy(self->dev, q));
}

/* High priority needs CAP_SYS_NICE, like a nice value below zero. */
TEST_F(submit, high_priority_needs_cap_sys_nice)
{
	pid_t pid = fork();
	int status;

	ASSERT_GE(pid, 0);
	if (pid == 0) {
		uint32_t q;

		/* Nobody, but with the device file root opened. */
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(10);
		if (rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_HIGH, &q) != -EACCES)
			_exit(11);
		_exit(rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_NORMAL, &q) ? 12 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(submit, queue_destroy_rejections)
{
	struct drm_rbln_queue_destroy args = { .queue_id = self->queue, .pad = 1 };
	uint32_t q;

	EXPECT_EQ(-1, ioctl(self->fd, DRM_IOCTL_RBLN_QUEUE_DESTROY, &args));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-ENOENT, rbln_drm_queue_destroy(self->dev, 0));
	EXPECT_EQ(-ENOENT, rbln_drm_queue_destroy(self->dev, 9999));
	ASSERT_EQ(0, rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_LOW, &q));
	EXPECT_EQ(0, rbln_drm_queue_destroy(self->dev, q));
	EXPECT_EQ(-ENOENT, rbln_drm_queue_destroy(self->dev, q));
	EXPECT_EQ(-EINVAL, rbln_drm_queue_destroy(NULL, q));
}

/*
 * The kernel reads a handle list a chunk at a time (16 handles): a long
 * one works, and one that fails in a later chunk, on an unknown handle or
 * an unreadable page, holds nothing of the objects found before (the
 * fixture checks that device memory is all freed).
 */
TEST_F(submit, long_handle_lists)
{
	long page = sysconf(_SC_PAGESIZE);
	struct drm_rbln_submit a = {
		.queue_id = self->queue, .cmd_va = self->cmd.va, .cmd_size = 8, .bo_count = 130,
	};
	struct rbln_test_buf mem;
	struct rbln_drm_cmd c;
	uint32_t *list;
	char *pages;
	int i;

	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 64 * 1024, RBLN_BO_DEVICE, 0, &mem));
	pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, pages);
	/* Four chunks in the first page, the rest in the second. */
	list = (uint32_t *)(pages + page - 64 * sizeof(*list));
	list[0] = self->cmd.handle;
	for (i = 1; i < 130; i++)
		list[i] = mem.handle;
	a.bo_handles = (uintptr_t)list;
	EXPECT_EQ(0, raw_submit(self->fd, &a));
	list[100] = 9999;
	EXPECT_EQ(-ENOENT, raw_submit(self->fd, &a));
	list[100] = mem.handle;
	ASSERT_EQ(0, mprotect(pages + page, page, PROT_NONE));
	EXPECT_EQ(-EFAULT, raw_submit(self->fd, &a));
	munmap(pages, 2 * page);
	rbln_test_buf_free(self->dev, &mem);
}

TEST_F(submit, submit_rejections)
{
	struct drm_rbln_sync waits[RBLN_SUBMIT_MAX_WAITS + 1] = { 0 };
	uint32_t bos[2] = { self->cmd.handle, 0 }, empty;
	struct drm_rbln_submit base = {
		.queue_id = self->queue, .cmd_va = self->cmd.va, .cmd_size = 8,
		.bo_count = 1, .bo_handles = (uintptr_t)bos,
	}, a;
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	a = base;
	ASSERT_EQ(0, raw_submit(self->fd, &a));

	a = base; a.queue_id = 4242;
	EXPECT_EQ(-ENOENT, raw_submit(self->fd, &a));
	a = base; a.flags = 1;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.pad = 1;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.signal.pad = 1;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.cmd_size = 0;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.cmd_size = 12;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.cmd_va += 4;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.cmd_size = 64 * MIB;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.bo_count = RBLN_SUBMIT_MAX_BOS + 1;
	EXPECT_EQ(-E2BIG, raw_submit(self->fd, &a));
	a = base; a.wait_count = RBLN_SUBMIT_MAX_WAITS + 1; a.waits = (uintptr_t)waits;
	EXPECT_EQ(-E2BIG, raw_submit(self->fd, &a));
	a = base; a.bo_count = 2;
	EXPECT_EQ(-ENOENT, raw_submit(self->fd, &a));
	a = base; a.bo_handles = 8;
	EXPECT_EQ(-EFAULT, raw_submit(self->fd, &a));
	a = base; a.wait_count = 1; a.waits = 8;
	EXPECT_EQ(-EFAULT, raw_submit(self->fd, &a));
	a = base; a.wait_count = 1; a.waits = (uintptr_t)waits; waits[0].handle = 777;
	EXPECT_EQ(-ENOENT, raw_submit(self->fd, &a));
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &empty));
	/* Waiting on nothing yet submitted is refused, not a hang. */
	waits[0].handle = empty;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	waits[0].point = 5;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	waits[0].pad = 1;
	EXPECT_EQ(-EINVAL, raw_submit(self->fd, &a));
	a = base; a.signal.handle = 778;
	EXPECT_EQ(-ENOENT, raw_submit(self->fd, &a));
	EXPECT_EQ(-EFAULT, ioctl(self->fd, DRM_IOCTL_RBLN_SUBMIT, (void *)8) ? -errno : 0);
	EXPECT_EQ(-EINVAL, rbln_drm_submit(self->dev, self->queue, self->cmd.va, 8, NULL, 1,
					    NULL, 0, NULL));
	drmSyncobjDestroy(self->fd, empty);
}

/* A queue destroyed with jobs in it still runs them. */
TEST_F(submit, queue_destroy_keeps_submitted_jobs)
{
	struct drm_rbln_sync sig = { 0 };
	struct rbln_test_buf mem;
	struct rbln_drm_cmd c;
	uint32_t bos[2];
	int status;

	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 8 * MIB, RBLN_BO_DEVICE, 0, &mem));
	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 1, 8 * MIB));
	bos[0] = mem.handle;
	bos[1] = self->cmd.handle;
	ASSERT_EQ(0, drmSyncobjCreate(self->fd, 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_submit(self->dev, self->queue, self->cmd.va, c.len, bos, 2,
				     NULL, 0, &sig));
	ASSERT_EQ(0, rbln_drm_queue_destroy(self->dev, self->queue));
	ASSERT_EQ(0, drmSyncobjWait(self->fd, &sig.handle, 1, rbln_test_deadline_ns(10000), 0,
				    NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->dev, sig.handle, 0, &status));
	EXPECT_EQ(1, status);
	ASSERT_EQ(0, rbln_drm_queue_create(self->dev, RBLN_QUEUE_PRIORITY_NORMAL, &self->queue));
	drmSyncobjDestroy(self->fd, sig.handle);
	rbln_test_buf_free(self->dev, &mem);
}

TEST_F(submit, engine_time_is_accounted)
{
	struct rbln_test_buf mem;
	struct rbln_drm_cmd c;
	long long before = rbln_test_attr(0, "busy_ns");
	char path[64], line[128];
	unsigned long long ns = 0;
	uint32_t bos[1];
	FILE *f;

	ASSERT_EQ(0, rbln_test_buf_new(self->dev, 16 * MIB, RBLN_BO_DEVICE, 0, &mem));
	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 7, 16 * MIB));
	bos[0] = mem.handle;
	ASSERT_EQ(1, rbln_test_run(self->dev, self->queue, &self->cmd, c.len, bos, 1, 10000));

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", self->fd);
	f = fopen(path, "re");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "drm-engine-npu: %llu ns", &ns);
	fclose(f);
	EXPECT_GT(ns, 0);
	EXPECT_GE(rbln_test_attr(0, "busy_ns"), before + (long long)ns);
	rbln_test_buf_free(self->dev, &mem);
}

TEST_HARNESS_MAIN
