// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_unload - the module unloads only once every device is released,
 * whatever still holds one after its files have closed
 *
 * Its one test unloads rbln.ko: rbln-vm runs it in a guest of its own, and
 * finds the module gone afterwards.
 */

#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

/*
 * The last file of a device closes while a job of it is still being freed
 * (the debugfs hook slow_free holds the job's context for a second after
 * the rest of it is gone): the device is released after that second, and
 * the module's code runs until then. Unloading waits for it. It used to
 * wait on the emulated bus only: the module of a PCI function went while
 * the job's free still slept in its code.
 */
TEST(unload_waits_for_a_device_released_late)
{
	struct rbln_drm_device *dev;
	struct rbln_test_buf cmd;
	struct rbln_drm_cmd c;
	uint32_t queue;
	int64_t t0;

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, rbln_test_inject(0, "slow_free"));
	t0 = rbln_test_now_ms();
	ASSERT_EQ(1, rbln_test_run(dev, queue, &cmd, c.len, NULL, 0, 10000));
	rbln_test_buf_free(dev, &cmd);
	rbln_drm_close(dev);

	ASSERT_EQ(0, syscall(SYS_delete_module, "rbln", O_NONBLOCK))
		TH_LOG("rmmod: %s", strerror(errno));
	/* The job's free began after t0, and held the device a second. */
	EXPECT_LE(t0 + 1000, rbln_test_now_ms());
}

TEST_HARNESS_MAIN
