// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_reset - the function resets: a wedged ring brought back, and the
 * driver letting go of a device that is running jobs
 *
 * Run with emu_devices>=1 (or the PCI backend) and job_timeout_ms=500.
 */

#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define MIB		(1u << 20)
#define FILL_BYTES	(16 * MIB)
#define FILLS_PER_JOB	8
#define JOBS		12

/* The driver directory of the bus device @name: where unbind and bind are. */
static void driver_dir(const char *name, char *dir, size_t size)
{
	if (!strncmp(name, "rbln_emu", 8))
		snprintf(dir, size, RBLN_EMU_BUS "/drivers/rbln");
	else
		snprintf(dir, size, RBLN_PCI_BUS "/drivers/rbln");
}

static int driver_write(const char *name, const char *file)
{
	char dir[64], path[96];

	driver_dir(name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return rbln_sysfs_write(path, name);
}

/*
 * A job whose ring ignores RESET: the timeout finds the ring wedged and
 * resets the whole function. The job fails with -ETIMEDOUT, one reset is
 * counted, and every context goes on, the same one included.
 */
TEST(wedged_ring_is_brought_back_by_a_function_reset)
{
	long long resets = rbln_test_attr(0, "reset_count");
	struct rbln_test_buf cmd;
	struct rbln_drm_device *dev;
	struct rbln_drm_cmd c;
	uint32_t queue;

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_inject(0, "stuck"));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	EXPECT_EQ(-ETIMEDOUT, rbln_test_run(dev, queue, &cmd, c.len, NULL, 0, 20000));
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	/* The function came back programmed: contexts, rings, tables. */
	EXPECT_EQ(1, rbln_test_works(dev, 0x5eed));
	rbln_test_buf_free(dev, &cmd);
	rbln_drm_close(dev);

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	EXPECT_EQ(1, rbln_test_works(dev, 0xc0de));
	rbln_drm_close(dev);
}

/* Touches @bytes of fresh memory: pages freed earlier come back, checked for poison. */
static void recycle_memory(size_t bytes)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	memset(p, 1, bytes);
	munmap(p, bytes);
}

/*
 * Unbinding the driver through sysfs while jobs write host memory: they
 * fail with -ENODEV, and the device has stopped by then, so their memory,
 * which the process may reuse or free, changes no more. The kernel runs
 * with page_poison=1: a write into a freed page would show as a poison
 * report when the page is handed out again, which fails the run. Then the
 * driver binds again and the device works.
 */
TEST(unbind_stops_the_device_before_its_jobs_memory_is_freed)
{
	struct drm_rbln_sync signal = { 0 };
	struct rbln_test_buf cmd, dst;
	struct rbln_drm_device *dev;
	char name[RBLN_DEV_NAME_MAX];
	uint32_t queue, bos[2];
	struct rbln_drm_cmd c;
	int64_t deadline;
	uint32_t last;
	int i, j, fd;
	void *snap;

	ASSERT_EQ(0, rbln_test_name(0, name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, FILL_BYTES, RBLN_BO_HOST, 0, &dst));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	for (j = 0; j < FILLS_PER_JOB; j++)
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, dst.va, 0xa5a5a5a5 + j, FILL_BYTES));
	bos[0] = dst.handle;
	bos[1] = cmd.handle;
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &signal.handle));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &last));
	for (i = 0; i < JOBS; i++) {
		/* The last job signals a binary syncobj: a timeline point hides errors. */
		struct drm_rbln_sync sync = { .handle = i < JOBS - 1 ? signal.handle : last,
					      .point = i < JOBS - 1 ? i + 1 : 0 };

		ASSERT_EQ(0, rbln_drm_submit(dev, queue, cmd.va, c.len, bos, 2, NULL, 0, &sync));
	}
	/* The first job runs: the device is busy writing. */
	ASSERT_EQ(0, drmSyncobjTimelineWait(rbln_drm_fd(dev), &signal.handle, &(uint64_t){ 1 },
					    1, rbln_test_deadline_ns(20000),
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL));

	/* ioctls fail once the device is unplugged: the last job's fence as a sync_file. */
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(dev), last, &fd));

	ASSERT_EQ(0, driver_write(name, "unbind"));
	EXPECT_EQ(-ENODEV, sync_file_wait_status(fd, rbln_test_ms(20000)))
		TH_LOG("the last job was not failed by the unbind");
	close(fd);
	/* Failed means stopped: what the jobs wrote stays as it is. */
	snap = malloc(FILL_BYTES);
	ASSERT_NE(NULL, snap);
	memcpy(snap, dst.cpu, FILL_BYTES);
	deadline = rbln_test_deadline_ns(500);
	do {
		ASSERT_EQ(0, memcmp(snap, dst.cpu, FILL_BYTES))
			TH_LOG("the device still writes the memory of jobs failed by the unbind");
	} while (rbln_test_deadline_ns(0) < deadline);
	free(snap);
	EXPECT_EQ(-ENODEV, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	rbln_test_buf_free(dev, &cmd);
	rbln_test_buf_free(dev, &dst);
	rbln_drm_close(dev);
	/* The objects' pages are free now: make them come round again. */
	for (i = 0; i < 4; i++)
		recycle_memory(256 * MIB);

	ASSERT_EQ(0, driver_write(name, "bind"));
	ASSERT_LE(0, rbln_dev_minor(name));
	ASSERT_EQ(0, rbln_test_open(0, &dev));
	EXPECT_EQ(1, rbln_test_works(dev, 0xb1d));
	rbln_drm_close(dev);
}

TEST_HARNESS_MAIN
