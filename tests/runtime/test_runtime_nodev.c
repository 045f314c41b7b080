// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_runtime_nodev - librbln on a machine without RBLN devices: no
 * crash, counts of zero, and clear errors
 */

#include <pthread.h>
#include <string.h>

#include <rbln/rbln.h>

#include "kselftest_harness.h"

TEST(no_device)
{
	int64_t shape[1] = { 8 };
	struct rbln_memory_stats s;
	rbln_device_guard g;
	rbln_tensor *t;
	int d;

	if (access("/sys/bus/rbln_emu", F_OK) == 0)
		SKIP(return, "rbln.ko is loaded here");
	EXPECT_FALSE(rbln_is_available());
	EXPECT_EQ(0, rbln_device_count());
	EXPECT_EQ(0, rbln_physical_device_count());
	EXPECT_EQ(-1, rbln_current_device());
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_set_device(0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "no rbln device"));
	/* A negative index is a no-op even then, as in torch.cuda.set_device(). */
	EXPECT_EQ(RBLN_OK, rbln_set_device(-1));
	EXPECT_EQ(-1, rbln_current_device());
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_device_parse("rbln", &d));
	EXPECT_EQ(NULL, rbln_tensor_zeros(shape, 1, RBLN_F32, 0));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_synchronize(-1));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_stats(0, &s));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_allocated(-1));
	g = rbln_device_enter(0);
	EXPECT_EQ(-1, g.previous);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, g.status);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "no rbln device"));
	rbln_device_exit(&g);
	g = rbln_device_enter(-1);
	EXPECT_EQ(-1, g.previous);
	EXPECT_EQ(RBLN_OK, g.status);
	rbln_device_exit(&g);

	/* The offload switch needs no device either. */
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_offload_exit());
	EXPECT_EQ(RBLN_OK, rbln_offload_enter());
	EXPECT_TRUE(rbln_offload_active());
	EXPECT_EQ(RBLN_OK, rbln_offload_exit());
	EXPECT_FALSE(rbln_offload_active());

	/* CPU tensors need no device. */
	t = rbln_tensor_full(shape, 1, RBLN_F16, 1.5, RBLN_CPU);
	ASSERT_NE(NULL, t);
	EXPECT_EQ(RBLN_CPU, rbln_tensor_device(t));
	EXPECT_EQ(16u, rbln_tensor_nbytes(t));
	rbln_tensor_free(t);
}

/*
 * A call that returns NULL (here a second explain region) leaves its
 * status for the caller to read, through the shared library, per thread.
 */
static void *other_thread_status(void *arg)
{
	*(rbln_status *)arg = rbln_last_status();
	return NULL;
}

TEST(last_status_of_a_busy_region)
{
	rbln_status other = RBLN_ERROR_DEVICE;
	rbln_explain *e;
	pthread_t th;

	EXPECT_EQ(RBLN_OK, rbln_last_status());	/* nothing failed yet */
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(NULL, rbln_explain_begin(true));
	EXPECT_EQ(RBLN_ERROR_BUSY, rbln_last_status());
	EXPECT_NE(NULL, strstr(rbln_last_error(), "already open"));
	ASSERT_EQ(0, pthread_create(&th, NULL, other_thread_status, &other));
	pthread_join(th, NULL);
	EXPECT_EQ(RBLN_OK, other);
	/* a success leaves the last failure's status, as it leaves its message */
	EXPECT_EQ(RBLN_OK, rbln_explain_end(e));
	EXPECT_EQ(RBLN_ERROR_BUSY, rbln_last_status());
	EXPECT_EQ(NULL, rbln_tensor_zeros(NULL, 1, RBLN_F32, RBLN_CPU));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_last_status());
	rbln_explain_free(e);
}

TEST(no_device_memory_snapshot)
{
	struct rbln_memory_snapshot *snap = (void *)1;

	if (access("/sys/bus/rbln_emu", F_OK) == 0)
		SKIP(return, "rbln.ko is loaded here");
	/* bad arguments first, then the missing device */
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_record_history(0, true, true, 0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "max_entries is 0"));
	EXPECT_EQ(RBLN_ERROR_INVALID,
		  rbln_memory_record_history(-1, true, true, (size_t)RBLN_MEMORY_HISTORY_MAX + 1));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "RBLN_MEMORY_HISTORY_MAX"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_record_history(0, true, false, 100));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "no rbln device"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_record_history(-1, false, false, 0));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_snapshot(0, NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL output"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_snapshot(-1, &snap));
	EXPECT_EQ(NULL, snap);
	EXPECT_EQ(NULL, rbln_memory_snapshot_json(NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL snapshot"));
	rbln_memory_snapshot_free(NULL);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_dump_snapshot(0, NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL path"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_dump_snapshot(0, "/tmp/rbln_nodev.json"));
	EXPECT_NE(0, access("/tmp/rbln_nodev.json", F_OK));
}

TEST_HARNESS_MAIN
