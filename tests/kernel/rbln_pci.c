// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_pci - what only the PCI function has: its identity on the bus, an
 * interrupt vector per ring and one for faults, and surprise removal when
 * the device model dies mid-job
 *
 * Run by rbln-vm with --pci-devices 1 (suite kernel-pci). The last test
 * kills the device model: nothing may run after it.
 */

#include <pthread.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define MIB		(1u << 20)
#define QUEUES		8

static unsigned long long read_hex(const char *name, const char *attr)
{
	char dir[128], path[192];

	rbln_dev_dir(name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	FILE *f = fopen(path, "re");
	unsigned long long v = ~0ULL;

	if (f) {
		if (fscanf(f, "%llx", &v) != 1)
			v = ~0ULL;
		fclose(f);
	}
	return v;
}

/* Interrupts of the vector named "rbln-<name>-<what>" in /proc/interrupts, all CPUs; -1 if none. */
static long long irq_count(const char *name, const char *what)
{
	char line[1024], want[96];
	long long total = -1;
	FILE *f = fopen("/proc/interrupts", "re");

	snprintf(want, sizeof(want), "rbln-%s-%s", name, what);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':'), *end;
		size_t n = strlen(line);

		while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
			line[--n] = 0;
		if (!p || n < strlen(want) || strcmp(line + n - strlen(want), want))
			continue;
		total = 0;
		for (p++;; p = end) {
			long long v = strtoll(p, &end, 10);

			if (end == p)
				break;
			total += v;
		}
	}
	fclose(f);
	return total;
}

TEST(function_is_the_npu_on_the_pci_bus)
{
	const char *name = rbln_test_dev_name(0);

	ASSERT_TRUE(rbln_test_on_pci()) TH_LOG("run with rbln-vm --pci-devices");
	EXPECT_EQ(RBLN_PCI_VENDOR, read_hex(name, "vendor"));
	EXPECT_EQ(RBLN_PCI_DEVICE, read_hex(name, "device"));
	EXPECT_EQ(0x120000, read_hex(name, "class"));
	EXPECT_LE(0, rbln_dev_minor(name));
	/* The driver's attributes are on the function. */
	EXPECT_LT(0, rbln_test_attr(0, "memory_total"));
}

/*
 * Jobs on every ring raise every ring's vector; a fault raises the fault
 * vector, which nothing else does.
 *
 * Which ring a queue runs on is the scheduler's choice: the least loaded
 * when the queue's first job is armed, kept while the queue has jobs
 * pending. So every queue's first job waits for a job of another file that
 * hangs until the timeout: no job finishes before all queues are placed,
 * each lands on the ring with the fewest queues, and QUEUES >= rings fill
 * them all.
 */
TEST(each_ring_and_faults_have_a_vector_of_their_own)
{
	const char *name = rbln_test_dev_name(0);
	struct drm_rbln_sync done[QUEUES] = { 0 }, gate = { 0 };
	struct rbln_test_buf cmd, mem, hang_cmd;
	struct rbln_drm_device *dev, *hanger;
	long long before[16], faults, rings;
	uint32_t queue[QUEUES], done_handles[QUEUES], bos[2], hang_queue;
	struct rbln_drm_cmd c;
	char what[16];
	int q, r, j, fd;

	rings = rbln_test_attr(0, "num_rings");
	ASSERT_LT(0, rings);
	ASSERT_GE(QUEUES, rings);
	for (r = 0; r < rings; r++) {
		snprintf(what, sizeof(what), "ring%d", r);
		before[r] = irq_count(name, what);
		ASSERT_LE(0, before[r]) TH_LOG("no vector named rbln-%s-%s", name, what);
	}
	faults = irq_count(name, "fault");
	ASSERT_LE(0, faults);

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, MIB, RBLN_BO_DEVICE, 0, &mem));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 7, MIB));
	bos[0] = mem.handle;
	bos[1] = cmd.handle;
	for (q = 0; q < QUEUES; q++) {
		ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue[q]));
		ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &done[q].handle));
		done_handles[q] = done[q].handle;
	}

	/* Another file's, as the file of a hung job is banned. */
	ASSERT_EQ(0, rbln_test_open(0, &hanger));
	ASSERT_EQ(0, rbln_drm_queue_create(hanger, RBLN_QUEUE_PRIORITY_NORMAL, &hang_queue));
	ASSERT_EQ(0, rbln_test_buf_new(hanger, 4096, RBLN_BO_HOST, 0, &hang_cmd));
	ASSERT_EQ(0, rbln_test_submit_hung_nop(hanger, hang_queue, &hang_cmd, rbln_test_dev_name(0),
					       &gate));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(hanger), gate.handle, &fd));
	ASSERT_EQ(0, drmSyncobjDestroy(rbln_drm_fd(hanger), gate.handle));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &gate.handle));
	ASSERT_EQ(0, drmSyncobjImportSyncFile(rbln_drm_fd(dev), gate.handle, fd));
	close(fd);

	for (j = 0; j < 8; j++)
		for (q = 0; q < QUEUES; q++)
			ASSERT_EQ(0, rbln_drm_submit(dev, queue[q], cmd.va, c.len, bos, 2,
						     j ? NULL : &gate, j ? 0 : 1,
						     j == 7 ? &done[q] : NULL));
	/* All of them: a job still running would take the fault injected below. */
	ASSERT_EQ(0, drmSyncobjWait(rbln_drm_fd(dev), done_handles, QUEUES,
				    rbln_test_deadline_ns(20000),
				    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL, NULL));
	for (q = 0; q < QUEUES; q++) {
		EXPECT_EQ(1, rbln_test_sync_status(dev, done[q].handle, 0)) TH_LOG("queue %d", q);
	}
	for (r = 0; r < rings; r++) {
		snprintf(what, sizeof(what), "ring%d", r);
		EXPECT_LT(before[r], irq_count(name, what)) TH_LOG("ring %d raised nothing", r);
	}
	EXPECT_EQ(faults, irq_count(name, "fault"));

	ASSERT_EQ(0, rbln_test_inject(0, "fault"));
	EXPECT_EQ(-EFAULT, rbln_test_run(dev, queue[0], &cmd, c.len, &mem.handle, 1, 10000));
	EXPECT_LT(faults, irq_count(name, "fault"));
	drmSyncobjDestroy(rbln_drm_fd(dev), gate.handle);
	for (q = 0; q < QUEUES; q++)
		drmSyncobjDestroy(rbln_drm_fd(dev), done[q].handle);
	rbln_test_buf_free(hanger, &hang_cmd);
	rbln_drm_close(hanger);
	rbln_test_buf_free(dev, &cmd);
	rbln_test_buf_free(dev, &mem);
	rbln_drm_close(dev);
}

/*
 * After a cut-off (rbln_hw_wait()): the bus's reset (FLR), which a
 * function obeys in any state, brings the device back, bound again.
 */
static int restore_cut_off(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), RBLN_PCI_BUS "/devices/%s/reset", name);
	return rbln_sysfs_write(path, "1") ?:
	       rbln_sysfs_write(RBLN_PCI_BUS "/drivers/rbln/bind", name) ?:
	       (rbln_dev_minor(name) < 0 ? -ENODEV : 0);
}

/* Unbound within 20 s (scaled), as a lost device is. */
static bool unbound(const char *name)
{
	int64_t deadline = rbln_test_deadline_ns(20000);

	while (rbln_dev_minor(name) >= 0 && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	return rbln_dev_minor(name) < 0;
}

/*
 * A device that stops answering (debugfs inject "deaf"): its MMU
 * invalidations and function resets never complete. Until one completes
 * the memory the device may reach is its own, so the driver waits, but
 * hw_timeout_ms at most: then it clears Bus Master Enable, which stops the
 * function's DMA whatever it runs, and unbinds it. The ioctl that waited
 * returns, and every later one fails with -ENODEV.
 */
TEST(deaf_device_is_cut_off_and_unbound)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/hw_timeout_ms");
	char name[RBLN_DEV_NAME_MAX];
	struct rbln_drm_device *dev;
	struct rbln_test_buf mem;
	uint32_t queue;
	int64_t start;

	ASSERT_GT(timeout_ms, 0);
	ASSERT_EQ(0, rbln_test_name(0, name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(1, rbln_test_works(dev, 0xdeaf));
	ASSERT_EQ(0, rbln_test_buf_new(dev, MIB, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_dev_debugfs_write(name, "inject", "deaf"));
	/* Closing a mapped object invalidates the MMU: the wait ends at the timeout. */
	start = rbln_test_now_ms();
	rbln_test_buf_free(dev, &mem);
	EXPECT_GE(rbln_test_now_ms() - start, timeout_ms);
	EXPECT_TRUE(unbound(name));
	EXPECT_EQ(-ENODEV, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	rbln_drm_close(dev);

	ASSERT_EQ(0, restore_cut_off(name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	EXPECT_EQ(1, rbln_test_works(dev, 0xa1fe));
	rbln_drm_close(dev);
}

/*
 * Two waits for a deaf device at once: a job stuck in its engine times
 * out, its ring does not stop, so the function is reset, which the device
 * does not do either; meanwhile a closing object waits for an MMU
 * invalidation, from before. The first wait to time out cuts the device
 * off, and that ends the other one too: its job fails with -ENODEV then,
 * not at its own timeout, up to hw_timeout_ms later, all the while holding
 * up the unbind.
 */
TEST(deaf_device_cut_off_ends_every_wait_for_it)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/hw_timeout_ms");
	long long job_timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/job_timeout_ms");
	char name[RBLN_DEV_NAME_MAX];
	struct drm_rbln_sync stuck = { 0 };
	struct rbln_test_buf mem, cmd;
	struct rbln_drm_device *dev;
	struct rbln_drm_cmd c;
	uint32_t queue;
	int64_t start;
	int job;

	/*
	 * The function reset starts 2 job timeouts in (the job's, its ring
	 * reset's), before the cut-off: on its own it would wait that much
	 * longer than the invalidation.
	 */
	ASSERT_GT(timeout_ms, 2 * job_timeout_ms);
	ASSERT_EQ(0, rbln_test_name(0, name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, MIB, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &stuck.handle));
	ASSERT_EQ(0, rbln_dev_debugfs_write(name, "inject", "stuck"));
	ASSERT_EQ(0, rbln_drm_submit(dev, queue, cmd.va, c.len, &cmd.handle, 1, NULL, 0, &stuck));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(dev), stuck.handle, &job));
	ASSERT_EQ(0, rbln_dev_debugfs_write(name, "inject", "deaf"));

	start = rbln_test_now_ms();
	rbln_test_buf_free(dev, &mem);
	EXPECT_GE(rbln_test_now_ms() - start, timeout_ms);
	/* Not scaled: what is measured is the driver's own clock. */
	EXPECT_EQ(-ENODEV, sync_file_wait_status(job, job_timeout_ms))
		TH_LOG("the function reset went on waiting for the device cut off");
	EXPECT_EQ(-ENODEV, sync_file_wait_status(job, rbln_test_ms(20000)));
	close(job);
	EXPECT_TRUE(unbound(name));
	rbln_test_buf_free(dev, &cmd);
	rbln_drm_close(dev);
	ASSERT_EQ(0, restore_cut_off(name));
}

struct churn {
	struct rbln_drm_device *dev;
	pthread_t thread;
	int rounds;
	int ret;	/* as rbln_test_run(), or -1000 - errno of another step */
};

/* Maps, fills and unmaps device memory until something fails. */
static void *churn_until_gone(void *arg)
{
	struct churn *ch = arg;
	struct rbln_test_buf cmd, mem;
	struct rbln_drm_cmd c;
	uint32_t queue;
	int ret;

	ret = rbln_drm_queue_create(ch->dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue) ?:
	      rbln_test_buf_new(ch->dev, 4096, RBLN_BO_HOST, 0, &cmd);
	if (ret) {
		ch->ret = -1000 + ret;
		return NULL;
	}
	for (;; __atomic_fetch_add(&ch->rounds, 1, __ATOMIC_RELAXED)) {
		ret = rbln_test_buf_new(ch->dev, 64 << 10, RBLN_BO_DEVICE, 0, &mem);
		if (ret) {
			ch->ret = -1000 + ret;
			break;
		}
		rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
		rbln_drm_cmd_dma_fill(&c, mem.va, ch->rounds, 64 << 10);
		ch->ret = rbln_test_run(ch->dev, queue, &cmd, c.len, &mem.handle, 1,
					rbln_test_ms(20000));
		rbln_test_buf_free(ch->dev, &mem);
		if (ch->ret != 1)
			break;
	}
	rbln_test_buf_free(ch->dev, &cmd);
	return NULL;
}

/*
 * A deaf device is cut off while another thread of the same file maps,
 * runs jobs and unmaps in a loop. Whatever step the cut-off finds it in,
 * the thread gets -ENODEV from the next one, soon, and nothing else:
 * every job before completed, none hangs, none fails otherwise.
 */
TEST(deaf_device_cut_off_under_a_busy_file)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/hw_timeout_ms");
	char name[RBLN_DEV_NAME_MAX];
	struct churn ch = { 0 };
	struct rbln_drm_device *dev;
	struct rbln_test_buf mem;
	struct timespec ts;
	int64_t deadline;

	ASSERT_EQ(0, rbln_test_name(0, name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_test_buf_new(dev, MIB, RBLN_BO_DEVICE, 0, &mem));
	ch.dev = dev;
	ASSERT_EQ(0, pthread_create(&ch.thread, NULL, churn_until_gone, &ch));
	deadline = rbln_test_deadline_ns(20000);
	while (!__atomic_load_n(&ch.rounds, __ATOMIC_RELAXED) && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	ASSERT_EQ(0, rbln_dev_debugfs_write(name, "inject", "deaf"));
	rbln_test_buf_free(dev, &mem);
	EXPECT_TRUE(unbound(name));

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += rbln_test_ms(timeout_ms + 20000) / 1000;
	ASSERT_EQ(0, pthread_timedjoin_np(ch.thread, NULL, &ts)) TH_LOG("the thread hangs");
	EXPECT_LT(0, ch.rounds);
	EXPECT_TRUE(ch.ret == -ENODEV || ch.ret == -1000 - ENODEV)
		TH_LOG("after %d rounds: %d", ch.rounds, ch.ret);
	rbln_drm_close(dev);
	ASSERT_EQ(0, restore_cut_off(name));
}

/*
 * The device model dies while jobs run: the function reads all-ones from
 * then on and nothing on the bus says it left. The driver finds it gone
 * when the job times out, fails it with -ENODEV and unbinds the function;
 * the memory the job wrote changes no more, every ioctl fails, and once
 * the file closes the module unloads (rbln-vm checks) with nothing leaked.
 */
TEST(killed_device_model_is_a_surprise_removal)
{
	const char *req = getenv("RBLN_VM_KILL_NPU_MODEL");
	char name[RBLN_DEV_NAME_MAX], done[256];
	struct drm_rbln_sync sync = { 0 };
	struct rbln_test_buf cmd, dst;
	struct rbln_drm_device *dev;
	struct rbln_drm_cmd c;
	uint32_t queue, bos[2];
	int64_t deadline;
	int j, fd, job;
	void *snap;

	ASSERT_NE(NULL, req) TH_LOG("rbln-vm exports RBLN_VM_KILL_NPU_MODEL with --pci-devices");
	ASSERT_EQ(0, rbln_test_name(0, name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 16 * MIB, RBLN_BO_HOST, 0, &dst));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	for (j = 0; j < 64; j++)
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, dst.va, 0x1000 + j, 16 * MIB));
	bos[0] = dst.handle;
	bos[1] = cmd.handle;
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &sync.handle));
	ASSERT_EQ(0, rbln_drm_submit(dev, queue, cmd.va, c.len, bos, 2, NULL, 0, &sync));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(dev), sync.handle, &job));

	/* Mid-job: the device is writing. */
	deadline = rbln_test_deadline_ns(20000);
	while (!((uint32_t *)dst.cpu)[0] && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	ASSERT_NE(0, ((uint32_t *)dst.cpu)[0]);
	fd = open(req, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", req, strerror(errno));
	close(fd);
	snprintf(done, sizeof(done), "%s.done", req);
	deadline = rbln_test_deadline_ns(20000);
	while (access(done, F_OK) && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	ASSERT_EQ(0, access(done, F_OK)) TH_LOG("rbln-vm did not stop the model");

	EXPECT_EQ(-ENODEV, sync_file_wait_status(job, rbln_test_ms(30000)));
	close(job);
	/* Unbound: the accel node is gone from the function. */
	deadline = rbln_test_deadline_ns(20000);
	while (rbln_dev_minor(name) >= 0 && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	EXPECT_GT(0, rbln_dev_minor(name));
	EXPECT_EQ(-ENODEV, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));

	snap = malloc(16 * MIB);
	ASSERT_NE(NULL, snap);
	memcpy(snap, dst.cpu, 16 * MIB);
	deadline = rbln_test_deadline_ns(500);
	do {
		ASSERT_EQ(0, memcmp(snap, dst.cpu, 16 * MIB))
			TH_LOG("the dead device still writes host memory");
	} while (rbln_test_deadline_ns(0) < deadline);
	free(snap);
	rbln_test_buf_free(dev, &cmd);
	rbln_test_buf_free(dev, &dst);
	rbln_drm_close(dev);
}

TEST_HARNESS_MAIN
