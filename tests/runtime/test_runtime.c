// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_runtime - librbln against the real driver: devices, tensors and lazy
 * allocation, transfers, the caching allocator's statistics, snapshots and
 * history, errors
 *
 * Run in the VM with emu_devices=2 and emu_mem_mib=64.
 */

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <json.h>
#include <rbln/rbln.h>
#include <rbln_accel.h>

#include "kselftest_harness.h"

#define MIB (1ll << 20)

static atomic_int host_bo_creates;

/*
 * Counts this process's BO_CREATE ioctls for host memory: the executable
 * exports its ioctl(), which librbln's libdrm then calls instead of the C
 * library's.
 */
int ioctl(int fd, unsigned long request, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (request == DRM_IOCTL_RBLN_BO_CREATE &&
	    ((struct drm_rbln_bo_create *)arg)->placement == RBLN_BO_HOST)
		atomic_fetch_add(&host_bo_creates, 1);
	return real(fd, request, arg);
}

/* Sum of drm-total-device over this process's rbln files, from fdinfo. */
static long long fdinfo_device_bytes(void)
{
	char path[64], line[128];
	long long total = 0;
	int fd;

	for (fd = 0; fd < 1024; fd++) {
		unsigned long long v;
		char unit[8];
		int is_rbln = 0, n;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (!strcmp(line, "drm-driver:\trbln\n"))
				is_rbln = 1;
			unit[0] = '\0';
			n = sscanf(line, "drm-total-device: %llu %7s", &v, unit);
			if (is_rbln && n >= 1)
				total += v << (!strcmp(unit, "MiB") ? 20 : !strcmp(unit, "KiB") ? 10 : 0);
		}
		fclose(f);
	}
	return total;
}

TEST(devices)
{
	int d;

	ASSERT_TRUE(rbln_is_available());
	EXPECT_EQ(2, rbln_device_count());
	EXPECT_EQ(2, rbln_physical_device_count());
	EXPECT_EQ(0, rbln_current_device());
	EXPECT_EQ(RBLN_OK, rbln_device_parse("rbln:1", &d));
	EXPECT_EQ(1, d);
	EXPECT_EQ(RBLN_OK, rbln_device_parse("0", &d));
	EXPECT_EQ(0, d);
	EXPECT_EQ(RBLN_OK, rbln_set_device(1));
	EXPECT_EQ(RBLN_OK, rbln_device_parse("rbln", &d));
	EXPECT_EQ(1, d);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_set_device(2));
	EXPECT_STREQ("device 2 does not exist (2 devices)", rbln_last_error());
	EXPECT_EQ(1, rbln_current_device());
	/* A negative index is a silent no-op, as torch.cuda.set_device(-1) is. */
	EXPECT_EQ(RBLN_OK, rbln_set_device(-1));
	EXPECT_EQ(1, rbln_current_device());
	EXPECT_EQ(RBLN_OK, rbln_set_device(INT_MIN));
	EXPECT_EQ(1, rbln_current_device());
	EXPECT_STREQ("device 2 does not exist (2 devices)", rbln_last_error());
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_set_device(INT_MAX));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "device 2147483647 does not exist"));
	EXPECT_EQ(1, rbln_current_device());
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_parse("rbln:x", &d));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "\"rbln:x\" is not a device"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_parse("rbln:", &d));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_parse("-1", &d));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_device_parse("rbln:7", &d));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_parse(NULL, &d));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_parse("0", NULL));
	EXPECT_STREQ("RBLN_ERROR_NO_DEVICE", rbln_status_name(RBLN_ERROR_NO_DEVICE));
}

static void *current_in_thread(void *arg)
{
	*(int *)arg = rbln_current_device();
	return NULL;
}

TEST(current_device_is_per_thread)
{
	pthread_t th;
	int other = -5;

	ASSERT_EQ(RBLN_OK, rbln_set_device(1));
	ASSERT_EQ(0, pthread_create(&th, NULL, current_in_thread, &other));
	pthread_join(th, NULL);
	EXPECT_EQ(0, other);
	EXPECT_EQ(1, rbln_current_device());
}

TEST(device_guards_nest)
{
	rbln_device_guard outer, inner, none;
	int64_t shape[1] = { 4 };
	rbln_tensor *cpu, *dev1;

	ASSERT_EQ(RBLN_OK, rbln_set_device(0));
	outer = rbln_device_enter(1);
	EXPECT_EQ(1, rbln_current_device());
	inner = rbln_device_enter(0);
	EXPECT_EQ(0, rbln_current_device());
	EXPECT_EQ(RBLN_OK, outer.status);
	EXPECT_EQ(RBLN_OK, inner.status);
	none = rbln_device_enter(-1);
	EXPECT_EQ(-1, none.previous);
	EXPECT_EQ(RBLN_OK, none.status);
	EXPECT_EQ(0, rbln_current_device());
	rbln_device_exit(&none);
	rbln_device_exit(&inner);
	EXPECT_EQ(1, rbln_current_device());
	rbln_device_exit(&outer);
	EXPECT_EQ(0, rbln_current_device());
	rbln_device_exit(&outer);	/* a second exit does nothing */
	EXPECT_EQ(0, rbln_current_device());

	cpu = rbln_tensor_zeros(shape, 1, RBLN_F32, RBLN_CPU);
	dev1 = rbln_tensor_zeros(shape, 1, RBLN_F32, 1);
	ASSERT_NE(NULL, cpu);
	ASSERT_NE(NULL, dev1);
	outer = rbln_device_enter_of(cpu);
	EXPECT_EQ(0, rbln_current_device());
	rbln_device_exit(&outer);
	outer = rbln_device_enter_of(dev1);
	EXPECT_EQ(1, rbln_current_device());
	rbln_device_exit(&outer);
	EXPECT_EQ(0, rbln_current_device());
	rbln_tensor_free(cpu);
	rbln_tensor_free(dev1);
}

/*
 * A guard on a device that does not exist does nothing, like a no-op
 * guard, but says why: torch.rbln.device(9) raises where device(-1) and
 * device(None) do nothing.
 */
TEST(device_guard_of_no_device_fails)
{
	rbln_device_guard g;

	ASSERT_EQ(RBLN_OK, rbln_set_device(1));
	g = rbln_device_enter(2);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, g.status);
	EXPECT_EQ(-1, g.previous);
	EXPECT_STREQ("device 2 does not exist (2 devices)", rbln_last_error());
	EXPECT_EQ(1, rbln_current_device());
	rbln_device_exit(&g);
	EXPECT_EQ(1, rbln_current_device());

	g = rbln_device_enter(INT_MAX);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, g.status);
	rbln_device_exit(&g);
	EXPECT_EQ(1, rbln_current_device());

	/* no tensor at all is an error too, where a CPU tensor is a no-op */
	g = rbln_device_enter_of(NULL);
	EXPECT_EQ(RBLN_ERROR_INVALID, g.status);
	EXPECT_EQ(-1, g.previous);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln_device_enter_of"));
	rbln_device_exit(&g);
	EXPECT_EQ(1, rbln_current_device());

	/* a guard that failed leaves rbln_last_error() to the next failure only */
	g = rbln_device_enter(-1);
	EXPECT_EQ(RBLN_OK, g.status);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "rbln_device_enter_of"));
	g = rbln_device_enter(0);
	EXPECT_EQ(RBLN_OK, g.status);
	EXPECT_EQ(0, rbln_current_device());
	rbln_device_exit(&g);
	EXPECT_EQ(1, rbln_current_device());
}

/* Each child sets RBLN_VISIBLE_DEVICES before its first librbln call. */
static int visible_count(const char *value)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		setenv("RBLN_VISIBLE_DEVICES", value, 1);
		_exit(rbln_device_count());
	}
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}

TEST(visible_devices)
{
	EXPECT_EQ(1, visible_count("1"));
	EXPECT_EQ(2, visible_count("1,0"));
	EXPECT_EQ(2, visible_count(""));
	EXPECT_EQ(0, visible_count("0,0"));
	EXPECT_EQ(0, visible_count("2"));
	EXPECT_EQ(0, visible_count("zero"));
}

/*
 * In a child: 0 when using device 0 with RBLN_ALLOC_CONF=@conf works, 1 when
 * it fails with a message naming the variable, 2 on any other outcome.
 */
static int alloc_conf_outcome(const char *conf)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct rbln_memory_stats s;
		rbln_status st;

		setenv("RBLN_ALLOC_CONF", conf, 1);
		st = rbln_memory_stats(0, &s);
		if (st == RBLN_OK)
			_exit(0);
		_exit(st == RBLN_ERROR_INVALID && strstr(rbln_last_error(), "RBLN_ALLOC_CONF: ") ?
		      1 : 2);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

TEST(alloc_conf)
{
	EXPECT_EQ(0, alloc_conf_outcome(""));
	EXPECT_EQ(0, alloc_conf_outcome("exact_large_segments:True,release_before_grow:True"));
	EXPECT_EQ(0, alloc_conf_outcome("expandable_segments:True"));
	EXPECT_EQ(0, alloc_conf_outcome("expandable_segments:False"));
	EXPECT_EQ(1, alloc_conf_outcome("expandable_segments:maybe"));
	EXPECT_EQ(1, alloc_conf_outcome("no_such_option:1"));
}

TEST(lazy_allocation)
{
	int64_t shape[2] = { 256, 1024 };	/* 1 MiB of f32 */
	struct rbln_memory_stats s;
	rbln_tensor *t;
	float *data, *back;
	int64_t i;

	data = malloc(MIB);
	back = malloc(MIB);
	ASSERT_NE(NULL, data);
	for (i = 0; i < MIB / 4; i++)
		data[i] = (float)i * 0.5f;
	t = rbln_tensor_from_data(data, shape, 2, RBLN_F32, 0);
	ASSERT_NE(NULL, t) TH_LOG("%s", rbln_last_error());

	/* Created on the device, but still in host memory. */
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(0, s.allocated.current);
	EXPECT_EQ(MIB, s.lazy_host_bytes);
	EXPECT_EQ(1, s.lazy_tensors);
	EXPECT_FALSE(rbln_tensor_is_materialized(t));
	EXPECT_EQ(0, rbln_memory_allocated(0));

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t)) TH_LOG("%s", rbln_last_error());
	EXPECT_TRUE(rbln_tensor_is_materialized(t));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(MIB, s.allocated.current);
	EXPECT_EQ(MIB, s.active.current);
	EXPECT_EQ(2 * MIB, s.reserved.current);	/* a small-pool segment */
	EXPECT_EQ(MIB, s.cached.current);
	EXPECT_EQ(0, s.lazy_host_bytes);
	EXPECT_EQ(0, s.lazy_tensors);
	EXPECT_EQ(1, s.lazy_materializations);
	EXPECT_EQ(1, s.num_device_alloc);
	/* The driver agrees about reserved memory. */
	EXPECT_EQ(s.reserved.current, fdinfo_device_bytes());

	memset(back, 0, MIB);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, back, MIB));
	EXPECT_EQ(0, memcmp(data, back, MIB));
	rbln_tensor_free(t);
	EXPECT_EQ(0, rbln_memory_allocated(0));
	EXPECT_EQ(2 * MIB, rbln_memory_reserved(0));
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(0));
	EXPECT_EQ(0, rbln_memory_reserved(0));
	EXPECT_EQ(0, fdinfo_device_bytes());
	free(data);
	free(back);
}

TEST(transfers)
{
	int64_t shape[1] = { 3000 };
	int32_t data[3000], back[3000];
	rbln_tensor *t, *d0, *d1, *c, *same;
	int i;

	for (i = 0; i < 3000; i++)
		data[i] = i * 7 - 1000;
	t = rbln_tensor_from_data(data, shape, 1, RBLN_I32, RBLN_CPU);
	ASSERT_NE(NULL, t);
	d0 = rbln_tensor_to(t, 0, false);
	ASSERT_NE(NULL, d0);
	EXPECT_FALSE(rbln_tensor_is_materialized(d0));
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(d0));

	/* Device to the same device stays in device memory. */
	same = rbln_tensor_to(d0, 0, false);
	ASSERT_NE(NULL, same);
	EXPECT_TRUE(rbln_tensor_is_materialized(same));
	/* To another device, through the host. */
	d1 = rbln_tensor_to(same, 1, false);
	ASSERT_NE(NULL, d1);
	EXPECT_EQ(1, rbln_tensor_device(d1));

	/* Non-blocking device-to-host: complete after synchronize. */
	c = rbln_tensor_to(d1, RBLN_CPU, true);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(1));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, back, sizeof(back)));
	EXPECT_EQ(0, memcmp(data, back, sizeof(data)));
	memset(back, 0, sizeof(back));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(same, back, sizeof(back)));
	EXPECT_EQ(0, memcmp(data, back, sizeof(data)));

	rbln_tensor_free(t);
	rbln_tensor_free(d0);
	rbln_tensor_free(d1);
	rbln_tensor_free(c);
	rbln_tensor_free(same);
	EXPECT_EQ(RBLN_OK, rbln_synchronize(-1));
	EXPECT_EQ(0, rbln_memory_allocated(0));
	EXPECT_EQ(0, rbln_memory_allocated(1));
}

/* @n floats from the host to device 0 and back, read and through item(). */
static void round_trip(struct __test_metadata *_metadata, const float *data, float *back,
		       int64_t n, bool non_blocking)
{
	int64_t last = n - 1;
	rbln_tensor *t, *d, *c;
	double v = 0;

	t = rbln_tensor_from_data(data, &n, 1, RBLN_F32, RBLN_CPU);
	ASSERT_NE(NULL, t);
	d = rbln_tensor_to(t, 0, false);
	ASSERT_NE(NULL, d);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(d));
	c = rbln_tensor_to(d, RBLN_CPU, non_blocking);
	ASSERT_NE(NULL, c);
	if (non_blocking)
		ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	memset(back, 0, n * sizeof(*back));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, back, n * sizeof(*back)));
	EXPECT_EQ(0, memcmp(data, back, n * sizeof(*back)));
	ASSERT_EQ(RBLN_OK, rbln_tensor_item(d, &last, &v));
	EXPECT_EQ(data[last], v);
	rbln_tensor_free(t);
	rbln_tensor_free(d);
	rbln_tensor_free(c);
}

/*
 * Copies between host and device go through staging buffers the device
 * keeps: once there are two, copies of any size (5 MiB: three chunks, two
 * in flight), blocking or not, create no more host buffer objects.
 */
TEST(transfers_reuse_staging_buffers)
{
	int64_t small = 1000, big = 5 * MIB / 4, i;
	float *data = malloc(big * sizeof(*data)), *back = malloc(big * sizeof(*back));
	int before, round;

	ASSERT_TRUE(data && back);
	for (i = 0; i < big; i++)
		data[i] = (float)(i % 1000) - 0.5f;
	round_trip(_metadata, data, back, small, false);
	round_trip(_metadata, data, back, big, false);
	before = atomic_load(&host_bo_creates);
	EXPECT_LE(2, before);	/* the ring and a staging buffer at least */
	for (round = 0; round < 10; round++) {
		round_trip(_metadata, data, back, small, false);
		round_trip(_metadata, data, back, small, true);
		round_trip(_metadata, data, back, big, false);
		round_trip(_metadata, data, back, big, true);
	}
	EXPECT_EQ(before, atomic_load(&host_bo_creates));
	free(data);
	free(back);
}

TEST(creation_values)
{
	int64_t shape[1] = { 5 };
	uint16_t h[5];
	int8_t q[5];
	float f[5];
	rbln_tensor *t;

	t = rbln_tensor_full(shape, 1, RBLN_I8, 300.0, 0);
	ASSERT_NE(NULL, t);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, q, sizeof(q)));
	EXPECT_EQ(127, q[4]);	/* saturated */
	rbln_tensor_free(t);
	t = rbln_tensor_full(shape, 1, RBLN_BF16, 1.0, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, h, sizeof(h)));
	EXPECT_EQ(0x3f80, h[2]);
	rbln_tensor_free(t);
	t = rbln_tensor_rand(shape, 1, RBLN_F32, 42, RBLN_CPU);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, f, sizeof(f)));
	for (int i = 0; i < 5; i++)
		EXPECT_TRUE(f[i] >= 0.0f && f[i] < 1.0f);
	rbln_tensor_free(t);
	EXPECT_EQ(0, rbln_amp_supported_dtypes(NULL, 0));
}

TEST(stats_walk_and_resets)
{
	static const char *const keys[] = {
		"allocated.current", "allocated.peak", "allocated.total_allocated",
		"allocated.total_freed", "reserved.current", "reserved.peak",
		"reserved.total_allocated", "reserved.total_freed", "active.current",
		"active.peak", "cached.current", "cached.peak", "num_alloc_retries", "num_ooms",
		"num_device_alloc", "num_device_free", "lazy.host_bytes", "lazy.tensors",
		"lazy.materializations", "staging.current", "staging.peak",
		"staging.total_allocated", "staging.total_freed",
	};
	int64_t shape[1] = { 1000 }, value;
	struct rbln_memory_stats s;
	const char *key;
	rbln_tensor *t;
	size_t i;

	t = rbln_tensor_zeros(shape, 1, RBLN_F32, 0);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t));
	rbln_tensor_free(t);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	for (i = 0; rbln_memory_stats_entry(&s, i, &key, &value); i++) {
		ASSERT_LT(i, sizeof(keys) / sizeof(keys[0]));
		EXPECT_STREQ(keys[i], key);
	}
	EXPECT_EQ(sizeof(keys) / sizeof(keys[0]), i);
	/* Each test runs in a new process: the numbers are this test's. */
	EXPECT_EQ(4000, s.allocated.total_allocated);
	EXPECT_EQ(4000, s.allocated.total_freed);
	EXPECT_EQ(4000, s.allocated.peak);
	EXPECT_EQ(4096, s.active.peak);

	ASSERT_EQ(RBLN_OK, rbln_reset_peak_memory_stats(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(s.allocated.current, s.allocated.peak);
	EXPECT_EQ(s.reserved.current, s.reserved.peak);
	EXPECT_EQ(1, s.lazy_materializations);
	ASSERT_EQ(RBLN_OK, rbln_reset_accumulated_memory_stats(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(0, s.allocated.total_allocated);
	EXPECT_EQ(0, s.reserved.total_freed);
	EXPECT_EQ(0, s.num_device_alloc);
	/* an accumulated counter too; the lazy figures of now stay */
	EXPECT_EQ(0, s.lazy_materializations);
	t = rbln_tensor_zeros(shape, 1, RBLN_F32, 0);
	ASSERT_NE(NULL, t);
	ASSERT_EQ(RBLN_OK, rbln_reset_accumulated_memory_stats(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(1, s.lazy_tensors);
	EXPECT_EQ(4000, s.lazy_host_bytes);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(1, s.lazy_materializations);
	rbln_tensor_free(t);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_stats(0, NULL));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_stats(9, &s));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_allocated(9));
	EXPECT_FALSE(rbln_memory_stats_entry(NULL, 0, &key, &value));
}

/*
 * The pinned host buffers that copies stage through count in staging.*,
 * apart from device memory: none before the first copy; a copy of three
 * 2 MiB chunks keeps two in flight, which the device then keeps for the
 * next copies.
 */
TEST(stats_staging)
{
	const int64_t chunk = 2 << 20;
	int64_t shape[1] = { 3 * chunk / 4 + 5 };
	struct rbln_memory_stats s;
	float *host = calloc(shape[0], sizeof(float));
	rbln_tensor *t;

	ASSERT_NE(NULL, host);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(0, s.staging.current);
	EXPECT_EQ(0, s.staging.total_allocated);
	t = rbln_tensor_from_data(host, shape, 1, RBLN_F32, 0);
	ASSERT_NE(NULL, t);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, host, shape[0] * sizeof(float)));
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(2 * chunk, s.staging.current);
	EXPECT_EQ(2 * chunk, s.staging.peak);
	EXPECT_EQ(2 * chunk, s.staging.total_allocated);
	EXPECT_EQ(0, s.staging.total_freed);
	/* Not device memory: the tensor's bytes alone are allocated. */
	EXPECT_EQ(shape[0] * 4, s.allocated.current);
	rbln_tensor_free(t);
	ASSERT_EQ(RBLN_OK, rbln_reset_accumulated_memory_stats(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(2 * chunk, s.staging.current);
	EXPECT_EQ(0, s.staging.total_allocated);
	free(host);
}

TEST(out_of_device_memory)
{
	rbln_tensor *t[64];
	int64_t shape[1] = { 4 * MIB };	/* 4 MiB of i8 */
	struct rbln_memory_stats s;
	int n, i;

	for (n = 0; n < 64; n++) {
		t[n] = rbln_tensor_empty(shape, 1, RBLN_I8, 0);
		ASSERT_NE(NULL, t[n]);
		if (rbln_tensor_materialize(t[n]) != RBLN_OK)
			break;
	}
	ASSERT_LT(n, 64);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "out of device memory"))
		TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s));
	EXPECT_EQ(1, s.num_ooms);
	EXPECT_GE(s.num_alloc_retries, 1);
	for (i = 0; i <= n; i++)
		rbln_tensor_free(t[i]);
	/* Usable again. */
	t[0] = rbln_tensor_empty(shape, 1, RBLN_I8, 0);
	EXPECT_EQ(RBLN_OK, rbln_tensor_materialize(t[0]));
	rbln_tensor_free(t[0]);
	EXPECT_EQ(RBLN_OK, rbln_empty_cache(0));
	EXPECT_EQ(0, rbln_memory_reserved(0));
}

TEST(bad_input)
{
	int64_t shape[2] = { 2, 3 }, neg[1] = { -1 }, huge[2] = { INT64_MAX / 2, 4 };
	char buf[4];
	rbln_tensor *t;

	EXPECT_EQ(NULL, rbln_tensor_zeros(neg, 1, RBLN_F32, 0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "negative"));
	EXPECT_EQ(NULL, rbln_tensor_zeros(huge, 2, RBLN_F32, 0));
	EXPECT_EQ(NULL, rbln_tensor_zeros(shape, 2, (rbln_dtype)9, 0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "unknown dtype"));
	EXPECT_EQ(NULL, rbln_tensor_zeros(shape, 9, RBLN_F32, 0));
	EXPECT_EQ(NULL, rbln_tensor_zeros(shape, 2, RBLN_F32, 5));
	EXPECT_EQ(NULL, rbln_tensor_from_data(NULL, shape, 2, RBLN_F32, 0));
	t = rbln_tensor_zeros(shape, 2, RBLN_F32, 0);
	ASSERT_NE(NULL, t);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_read(t, buf, sizeof(buf)));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_read(t, NULL, 100));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_dim(t, 2));
	EXPECT_EQ(3, rbln_tensor_dim(t, 1));
	EXPECT_EQ(6, rbln_tensor_numel(t));
	EXPECT_EQ(24u, rbln_tensor_nbytes(t));
	rbln_tensor_free(t);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_tensor_materialize(NULL));
	EXPECT_EQ(NULL, rbln_tensor_to(NULL, 0, false));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_synchronize(3));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_empty_cache(3));
	rbln_tensor_free(NULL);
}

/* Files in @dir: the offload files of live tensors. */
static int count_files(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

TEST(offload)
{
	char dir[64] = "/tmp/rbln-offload-XXXXXX";
	int64_t shape[1] = { 1 << 18 };	/* 1 MiB of f32 */
	rbln_tensor *plain, *a, *b, *cpu;
	float *back;
	int64_t i;

	ASSERT_NE(NULL, mkdtemp(dir));
	/* A directory that does not exist yet is made. */
	strcat(dir, "/sub");
	setenv("RBLN_OFFLOAD_DIR", dir, 1);
	back = malloc(4 << 18);
	ASSERT_NE(NULL, back);

	EXPECT_FALSE(rbln_offload_active());
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_offload_exit());
	EXPECT_NE(NULL, strstr(rbln_last_error(), "not inside"));
	plain = rbln_tensor_zeros(shape, 1, RBLN_F32, 0);
	ASSERT_NE(NULL, plain);

	ASSERT_EQ(RBLN_OK, rbln_offload_enter());
	ASSERT_EQ(RBLN_OK, rbln_offload_enter());
	EXPECT_TRUE(rbln_offload_active());
	a = rbln_tensor_full(shape, 1, RBLN_F32, 2.5, 0);
	ASSERT_NE(NULL, a) TH_LOG("%s", rbln_last_error());
	/* Only the outermost exit turns it off. */
	ASSERT_EQ(RBLN_OK, rbln_offload_exit());
	EXPECT_TRUE(rbln_offload_active());
	b = rbln_tensor_rand(shape, 1, RBLN_F32, 3, 0);
	cpu = rbln_tensor_zeros(shape, 1, RBLN_F32, RBLN_CPU);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, cpu);
	ASSERT_EQ(RBLN_OK, rbln_offload_exit());
	EXPECT_FALSE(rbln_offload_active());
	/* Device tensors made inside are file-backed; others are not. */
	EXPECT_EQ(2, count_files(dir));

	/* The data survives the trip through the file and the device. */
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	EXPECT_EQ(1, count_files(dir));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(a, back, 4 << 18));
	for (i = 0; i < (1 << 18); i++)
		ASSERT_EQ(2.5f, back[i]);
	rbln_tensor_free(b);
	EXPECT_EQ(0, count_files(dir));
	rbln_tensor_free(a);
	rbln_tensor_free(plain);
	rbln_tensor_free(cpu);
	free(back);
	rmdir(dir);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

/*
 * Offloaded memory is written a window at a time (2 MiB): every fill, and
 * a copy of a tensor not yet on the device, gives the same data there as
 * in plain memory, over several windows and a part.
 */
TEST(offload_fills_are_exact)
{
	char dir[64] = "/tmp/rbln-offload-XXXXXX";
	int64_t shape[1] = { (5 << 20) / 2 + 3 }, i, n = shape[0];
	rbln_tensor *plain[5], *off[5];
	int32_t *data, *x, *y;
	int k;

	ASSERT_NE(NULL, mkdtemp(dir));
	setenv("RBLN_OFFLOAD_DIR", dir, 1);
	data = malloc(n * 4);
	x = malloc(n * 4);
	y = malloc(n * 4);
	ASSERT_TRUE(data && x && y);
	for (i = 0; i < n; i++)
		data[i] = (int32_t)(i * 2654435761u);
	for (k = 0; k < 2; k++) {
		rbln_tensor **t = k ? off : plain;

		if (k)
			ASSERT_EQ(RBLN_OK, rbln_offload_enter());
		t[0] = rbln_tensor_zeros(shape, 1, RBLN_I32, 0);
		t[1] = rbln_tensor_full(shape, 1, RBLN_I32, -7, 0);
		t[2] = rbln_tensor_rand(shape, 1, RBLN_I32, 11, 0);
		t[3] = rbln_tensor_from_data(data, shape, 1, RBLN_I32, 0);
		t[4] = rbln_tensor_to(t[2], 0, false);
		if (k)
			ASSERT_EQ(RBLN_OK, rbln_offload_exit());
	}
	EXPECT_EQ(5, count_files(dir));
	for (k = 0; k < 5; k++) {
		ASSERT_NE(NULL, plain[k]);
		ASSERT_NE(NULL, off[k]);
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(plain[k], x, n * 4));
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(off[k], y, n * 4));
		EXPECT_EQ(0, memcmp(x, y, n * 4)) TH_LOG("fill %d", k);
		if (k == 3)
			EXPECT_EQ(0, memcmp(x, data, n * 4));
		/* And on the device, through the file. */
		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(off[k]));
		ASSERT_EQ(RBLN_OK, rbln_tensor_read(off[k], y, n * 4));
		EXPECT_EQ(0, memcmp(x, y, n * 4)) TH_LOG("fill %d on the device", k);
	}
	for (k = 0; k < 5; k++) {
		rbln_tensor_free(plain[k]);
		rbln_tensor_free(off[k]);
	}
	EXPECT_EQ(0, count_files(dir));
	free(data);
	free(x);
	free(y);
	rmdir(dir);
}

static void *toggle_offload(void *arg)
{
	int i, *failures = arg;

	for (i = 0; i < 10000; i++)
		if (rbln_offload_enter() || rbln_offload_exit())
			(*failures)++;
	return NULL;
}

TEST(offload_depth_is_thread_safe)
{
	int failures[4] = { 0 }, i;
	pthread_t th[4];

	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, toggle_offload, &failures[i]));
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, failures[i]);
	}
	EXPECT_FALSE(rbln_offload_active());
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_offload_exit());
}

struct hammer {
	int device;
	int failures;
};

static void *hammer(void *arg)
{
	struct hammer *h = arg;
	struct rbln_memory_stats s;
	int i;

	for (i = 0; i < 150; i++) {
		int64_t shape[1] = { 1 + (i * 7919) % 50000 };
		rbln_tensor *t = rbln_tensor_full(shape, 1, RBLN_I32, i, h->device);

		if (!t || rbln_tensor_materialize(t) ||
		    rbln_memory_stats(h->device, &s) || s.cached.current != s.reserved.current -
							 s.active.current)
			h->failures++;
		if (t && i % 10 == 0 &&
		    (rbln_tensor_read(t, NULL, 0) != RBLN_ERROR_INVALID))
			h->failures++;
		rbln_tensor_free(t);
	}
	return NULL;
}

TEST(threads_hammer_the_allocator)
{
	struct hammer h[4] = { { 0, 0 }, { 0, 0 }, { 1, 0 }, { 0, 0 } };
	pthread_t th[4];
	int i;

	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, hammer, &h[i]));
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, h[i].failures);
	}
	EXPECT_EQ(0, rbln_memory_allocated(0));
	EXPECT_EQ(0, rbln_memory_allocated(1));
}

/* Not static, not inlined: the snapshot names it as the allocation site (-rdynamic). */
__attribute__((noinline)) rbln_tensor *snapshot_site_marker(int64_t bytes)
{
	int64_t shape[1] = { bytes };
	rbln_tensor *t = rbln_tensor_zeros(shape, 1, RBLN_I8, 0);

	if (t && rbln_tensor_materialize(t) != RBLN_OK) {
		rbln_tensor_free(t);
		t = NULL;
	}
	__asm__ volatile("" ::: "memory");	/* no tail call: this frame stays */
	return t;
}

/* Sums of the snapshot's blocks by state equal the statistics of the same moment. */
static void check_snapshot_sums(struct __test_metadata *_metadata,
				const struct rbln_memory_snapshot *snap, int device)
{
	uint64_t reserved = 0, allocated = 0, requested = 0, free_bytes = 0;
	struct rbln_memory_stats s;
	size_t i, j;

	ASSERT_EQ(RBLN_OK, rbln_memory_stats(device, &s));
	for (i = 0; i < snap->nsegments; i++) {
		const struct rbln_memory_segment *g = &snap->segments[i];
		uint64_t va = g->address;

		reserved += g->total_size;
		allocated += g->allocated_size;
		requested += g->requested_size;
		for (j = 0; j < g->nblocks; j++) {
			EXPECT_EQ(va, g->blocks[j].address);
			va += g->blocks[j].size;
			if (g->blocks[j].state != RBLN_BLOCK_ACTIVE_ALLOCATED)
				free_bytes += g->blocks[j].size;
		}
		EXPECT_EQ(g->address + g->total_size, va);
	}
	EXPECT_EQ(s.reserved.current, (int64_t)reserved);
	EXPECT_EQ(s.active.current, (int64_t)allocated);
	EXPECT_EQ(s.allocated.current, (int64_t)requested);
	EXPECT_EQ(s.cached.current, (int64_t)free_bytes);
}

/* The number of events of @action in @t. */
static size_t count_action(const struct rbln_memory_trace *t, enum rbln_memory_action action)
{
	size_t i, n = 0;

	for (i = 0; i < t->nevents; i++)
		n += t->events[i].action == action;
	return n;
}

static struct json_object *jget(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

TEST(memory_snapshot_and_history)
{
	struct rbln_memory_snapshot *snap = NULL;
	const struct rbln_memory_block *blk = NULL;
	struct json_object *root, *segs, *seg, *blocks, *b, *traces, *ev, *frames;
	rbln_tensor *keep, *gone;
	char *json, path[] = "/tmp/rbln_snapshot_XXXXXX";
	size_t i, j, nalloc = 0;
	int fd;

	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, true, true, 1000))
		TH_LOG("%s", rbln_last_error());
	keep = snapshot_site_marker(3000);
	gone = snapshot_site_marker(MIB);
	ASSERT_TRUE(keep && gone) TH_LOG("%s", rbln_last_error());
	rbln_tensor_free(gone);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));

	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(0, snap->device);
	check_snapshot_sums(_metadata, snap, 0);
	ASSERT_EQ(1, snap->nsegments);		/* both in one small-pool segment */
	EXPECT_TRUE(snap->segments[0].small);
	EXPECT_EQ(0, snap->segments[0].device);
	EXPECT_EQ(0, snap->segments[0].physical_device);
	EXPECT_EQ(3072, snap->segments[0].allocated_size);
	EXPECT_EQ(3000, snap->segments[0].requested_size);
	for (i = 0; i < snap->segments[0].nblocks; i++)
		if (snap->segments[0].blocks[i].state == RBLN_BLOCK_ACTIVE_ALLOCATED)
			blk = &snap->segments[0].blocks[i];
	ASSERT_NE(NULL, blk);
	EXPECT_EQ(3000, blk->requested_size);
	/* librbln's own frames are left out: the first is the program's call */
	ASSERT_LE(1, blk->nframes);
	EXPECT_STREQ("snapshot_site_marker", blk->frames[0].name);
	EXPECT_NE(NULL, strstr(blk->frames[0].filename, "test_runtime"));

	ASSERT_EQ(1, snap->ntraces);
	EXPECT_EQ(0, snap->device_traces[0].physical_device);
	/* The defaults: the small pool's expandable segment maps its first piece. */
	EXPECT_EQ(1, count_action(&snap->device_traces[0], RBLN_MEMORY_SEGMENT_MAP));
	EXPECT_EQ(2, count_action(&snap->device_traces[0], RBLN_MEMORY_ALLOC));
	EXPECT_EQ(1, count_action(&snap->device_traces[0], RBLN_MEMORY_FREE_REQUESTED));
	EXPECT_EQ(1, count_action(&snap->device_traces[0], RBLN_MEMORY_FREE_COMPLETED));
	ASSERT_LE(1, snap->device_traces[0].nevents);
	EXPECT_EQ(RBLN_MEMORY_SEGMENT_MAP, snap->device_traces[0].events[0].action);
	ASSERT_LE(1, snap->device_traces[0].events[0].nframes);
	EXPECT_STREQ("snapshot_site_marker", snap->device_traces[0].events[0].frames[0].name);

	/* The JSON says the same, in PyTorch's layout. */
	json = rbln_memory_snapshot_json(snap);
	ASSERT_NE(NULL, json) TH_LOG("%s", rbln_last_error());
	root = json_tokener_parse(json);
	ASSERT_NE(NULL, root) TH_LOG("%s", json);
	EXPECT_EQ(0, json_object_get_int(jget(root, "device")));
	segs = jget(root, "segments");
	ASSERT_EQ(1, json_object_array_length(segs));
	seg = json_object_array_get_idx(segs, 0);
	EXPECT_EQ((int64_t)snap->segments[0].address, json_object_get_int64(jget(seg, "address")));
	EXPECT_EQ(2 * MIB, json_object_get_int64(jget(seg, "total_size")));
	EXPECT_EQ(3072, json_object_get_int64(jget(seg, "allocated_size")));
	EXPECT_EQ(3000, json_object_get_int64(jget(seg, "requested_size")));
	EXPECT_STREQ("small", json_object_get_string(jget(seg, "pool")));
	blocks = jget(seg, "blocks");
	ASSERT_EQ(snap->segments[0].nblocks, json_object_array_length(blocks));
	for (i = 0; i < json_object_array_length(blocks); i++) {
		const char *state;

		b = json_object_array_get_idx(blocks, i);
		state = json_object_get_string(jget(b, "state"));
		if (strcmp(state, "active_allocated")) {
			EXPECT_STREQ("inactive", state);
			EXPECT_EQ(json_type_null, json_object_get_type(jget(b, "queue")));
			continue;
		}
		EXPECT_EQ(3000, json_object_get_int64(jget(b, "requested_size")));
		frames = jget(b, "frames");
		ASSERT_LE(1, json_object_array_length(frames));
		EXPECT_STREQ("snapshot_site_marker",
			     json_object_get_string(jget(json_object_array_get_idx(frames, 0),
							 "name")));
	}
	traces = jget(root, "device_traces");
	ASSERT_EQ(1, json_object_array_length(traces));
	traces = json_object_array_get_idx(traces, 0);
	ASSERT_EQ(snap->device_traces[0].nevents, json_object_array_length(traces));
	for (j = 0; j < json_object_array_length(traces); j++) {
		ev = json_object_array_get_idx(traces, j);
		EXPECT_NE(NULL, jget(ev, "addr"));
		EXPECT_NE(NULL, jget(ev, "time_us"));
		nalloc += !strcmp(json_object_get_string(jget(ev, "action")), "alloc");
	}
	EXPECT_EQ(2, nalloc);
	json_object_put(root);
	free(json);
	rbln_memory_snapshot_free(snap);

	/* _dump_snapshot(): the same JSON in a file */
	fd = mkstemp(path);
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(RBLN_OK, rbln_memory_dump_snapshot(0, path)) TH_LOG("%s", rbln_last_error());
	root = json_object_from_file(path);
	ASSERT_NE(NULL, root);
	EXPECT_EQ(1, json_object_array_length(jget(root, "segments")));
	json_object_put(root);
	unlink(path);

	/* Off: the history goes, the live block keeps its site; device 1 never recorded. */
	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, false, false, 0));
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap));
	EXPECT_EQ(0, snap->device_traces[0].nevents);
	check_snapshot_sums(_metadata, snap, 0);
	rbln_memory_snapshot_free(snap);
	ASSERT_EQ(RBLN_OK, rbln_set_device(1));
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(-1, &snap));
	EXPECT_EQ(1, snap->device);
	EXPECT_EQ(1, snap->device_traces[0].physical_device);
	EXPECT_EQ(0, snap->device_traces[0].nevents);
	EXPECT_EQ(0, snap->nsegments);
	rbln_memory_snapshot_free(snap);
	rbln_tensor_free(keep);
}

/* The block of @snap's segments that @requested bytes were asked for, or NULL. */
static const struct rbln_memory_block *block_of(const struct rbln_memory_snapshot *snap,
						uint64_t requested)
{
	for (size_t i = 0; i < snap->nsegments; i++)
		for (size_t j = 0; j < snap->segments[i].nblocks; j++)
			if (snap->segments[i].blocks[j].requested_size == requested)
				return &snap->segments[i].blocks[j];
	return NULL;
}

/*
 * A framework on librbln (torch.rbln) names its user's code with
 * rbln_explain_attribute(): with stacks, blocks and events put that frame
 * first, as a file and a line, before the program's call into librbln.
 * Sites are wanted while such a history records, and only then.
 */
TEST(memory_history_names_a_framework_caller)
{
	struct rbln_memory_snapshot *snap = NULL;
	const struct rbln_memory_block *b;
	struct json_object *root;
	rbln_tensor *t[3];
	char *json;

	EXPECT_FALSE(rbln_explain_wants_sites());
	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, true, false, 100));
	EXPECT_FALSE(rbln_explain_wants_sites());	/* no stacks, no sites */
	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, true, true, 100));
	EXPECT_TRUE(rbln_explain_wants_sites());

	ASSERT_EQ(RBLN_OK, rbln_explain_attribute("add", "model.py:12"));
	t[0] = snapshot_site_marker(1000);
	ASSERT_EQ(RBLN_OK, rbln_explain_attribute(NULL, "generate"));
	t[1] = snapshot_site_marker(2000);
	ASSERT_EQ(RBLN_OK, rbln_explain_attribute(NULL, NULL));
	t[2] = snapshot_site_marker(3000);
	ASSERT_TRUE(t[0] && t[1] && t[2]) TH_LOG("%s", rbln_last_error());

	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap)) TH_LOG("%s", rbln_last_error());
	b = block_of(snap, 1000);
	ASSERT_NE(NULL, b);
	ASSERT_LE(2, b->nframes);
	EXPECT_STREQ("model.py", b->frames[0].filename);
	EXPECT_EQ(12, b->frames[0].line);
	EXPECT_STREQ("??", b->frames[0].name);
	EXPECT_STREQ("snapshot_site_marker", b->frames[1].name);
	EXPECT_EQ(0, b->frames[1].line);
	b = block_of(snap, 2000);
	ASSERT_NE(NULL, b);
	ASSERT_LE(1, b->nframes);
	EXPECT_STREQ("generate", b->frames[0].filename);	/* no line: all of it */
	EXPECT_EQ(0, b->frames[0].line);
	b = block_of(snap, 3000);
	ASSERT_NE(NULL, b);
	ASSERT_LE(1, b->nframes);
	EXPECT_STREQ("snapshot_site_marker", b->frames[0].name);
	/* The history's allocation events carry the same first frame; so does the JSON. */
	for (size_t i = 0, found = 0; i < snap->device_traces[0].nevents; i++) {
		const struct rbln_memory_event *e = &snap->device_traces[0].events[i];

		if (e->action != RBLN_MEMORY_ALLOC || e->size != 1000)
			continue;
		ASSERT_LE(1, e->nframes);
		EXPECT_STREQ("model.py", e->frames[0].filename);
		EXPECT_EQ(12, e->frames[0].line);
		EXPECT_EQ(0, found++);
	}
	json = rbln_memory_snapshot_json(snap);
	ASSERT_NE(NULL, json);
	root = json_tokener_parse(json);
	ASSERT_NE(NULL, root);
	EXPECT_NE(NULL, strstr(json, "\"filename\":\"model.py\",\"line\":12"))
		TH_LOG("%.400s", json);
	json_object_put(root);
	free(json);
	rbln_memory_snapshot_free(snap);

	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, false, false, 0));
	EXPECT_FALSE(rbln_explain_wants_sites());
	for (int i = 0; i < 3; i++)
		rbln_tensor_free(t[i]);
}

TEST(memory_snapshot_rejects)
{
	struct rbln_memory_snapshot *snap = (void *)1;

	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_record_history(0, true, true, 0));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "max_entries is 0"));
	EXPECT_EQ(RBLN_ERROR_INVALID,
		  rbln_memory_record_history(0, true, false, (size_t)RBLN_MEMORY_HISTORY_MAX + 1));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "RBLN_MEMORY_HISTORY_MAX"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_record_history(2, true, true, 10));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "device 2 does not exist"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_record_history(-2, false, false, 0));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_snapshot(0, NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL output"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_snapshot(7, &snap));
	EXPECT_EQ(NULL, snap);
	EXPECT_NE(NULL, strstr(rbln_last_error(), "device 7 does not exist"));
	EXPECT_EQ(NULL, rbln_memory_snapshot_json(NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL snapshot"));
	rbln_memory_snapshot_free(NULL);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_dump_snapshot(0, NULL));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "NULL path"));
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_memory_dump_snapshot(0, "/nonexistent/dir/s.json"));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "cannot write /nonexistent/dir/s.json"));
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, rbln_memory_dump_snapshot(3, "/tmp/x.json"));
	/* refusals changed nothing: history is still off */
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap));
	EXPECT_EQ(0, snap->device_traces[0].nevents);
	rbln_memory_snapshot_free(snap);
}

/* Several threads allocate with history on: every allocation and free is in it. */
static void *history_thread(void *arg)
{
	int64_t shape[1] = { 4096 };
	int i;

	(void)arg;
	for (i = 0; i < 50; i++) {
		rbln_tensor *t = rbln_tensor_zeros(shape, 1, RBLN_I8, 0);

		if (!t || rbln_tensor_materialize(t) != RBLN_OK)
			return (void *)1;
		rbln_tensor_free(t);
	}
	return NULL;
}

TEST(memory_history_threads)
{
	struct rbln_memory_snapshot *snap;
	pthread_t th[4];
	void *ret;
	int i;

	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(0, true, true, 10000));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, history_thread, NULL));
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], &ret);
		EXPECT_EQ(NULL, ret);
	}
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap));
	check_snapshot_sums(_metadata, snap, 0);
	EXPECT_EQ(200, count_action(&snap->device_traces[0], RBLN_MEMORY_ALLOC));
	EXPECT_EQ(200, count_action(&snap->device_traces[0], RBLN_MEMORY_FREE_REQUESTED));
	EXPECT_EQ(200, count_action(&snap->device_traces[0], RBLN_MEMORY_FREE_COMPLETED));
	rbln_memory_snapshot_free(snap);
}

/* Whether a block of member @phys's expandable segments of @size bytes crosses a 20 MiB map. */
static bool block_spans_maps(const struct rbln_memory_snapshot *snap, int phys, uint64_t size)
{
	size_t i, j;

	for (i = 0; i < snap->nsegments; i++) {
		const struct rbln_memory_segment *g = &snap->segments[i];

		if (g->physical_device != phys || !g->expandable || g->small)
			continue;
		for (j = 0; j < g->nblocks; j++) {
			uint64_t at = g->blocks[j].address - g->address;

			if (g->blocks[j].size == size && at < 20 * MIB && at + size > 20 * MIB)
				return true;
		}
	}
	return false;
}

/*
 * The defaults grow each pool's segment in place (VM_BIND). A block that
 * spans two maps holds its data exactly, another member copies it device
 * to device one mapped object at a time, and empty_cache gives every map
 * back to the driver.
 */
TEST(expandable_segments_span_maps)
{
	const int64_t n = 768 * 1024;	/* a row of b: 3 MiB of f32, across the first map's end */
	int64_t sf[2] = { 2, 18 * MIB / 4 }, sa[2] = { 2, 2 }, sb[2] = { 2, n };
	struct rbln_memory_snapshot *snap;
	rbln_tensor *filler, *a, *b, *c;
	struct rbln_memory_stats st;
	float *vals, *out;
	int64_t j;

	setenv("RBLN_DEVICE_MAP", "[0,1]", 1);
	vals = malloc(2 * n * sizeof(float));
	out = malloc(2 * n * sizeof(float));
	ASSERT_NE(NULL, vals);
	ASSERT_NE(NULL, out);
	for (j = 0; j < n; j++) {
		vals[j] = (float)(j % 7);
		vals[n + j] = (float)(2 * (j % 5));
	}
	/* 18 MiB per member first, so that b's rows start 18 MiB into the segment. */
	filler = rbln_tensor_full(sf, 2, RBLN_F32, 3, 0);
	ASSERT_NE(NULL, filler) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(filler));
	b = rbln_tensor_from_data(vals, sb, 2, RBLN_F32, 0);
	ASSERT_NE(NULL, b) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(b));
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap));
	EXPECT_TRUE(block_spans_maps(snap, 0, n * sizeof(float)));
	EXPECT_TRUE(block_spans_maps(snap, 1, n * sizeof(float)));
	rbln_memory_snapshot_free(snap);

	/* Read back whole: both rows, each across a map's end. */
	memset(vals, 0, 2 * n * sizeof(float));
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(b, vals, 2 * n * sizeof(float)));
	for (j = 0; j < n; j++) {
		ASSERT_EQ((float)(j % 7), vals[j]) TH_LOG("row 0, element %lld", (long long)j);
		ASSERT_EQ((float)(2 * (j % 5)), vals[n + j]) TH_LOG("row 1, element %lld",
								    (long long)j);
	}
	/* Each member computes a row of c from all of b: the other's row comes piece by piece. */
	a = rbln_tensor_full(sa, 2, RBLN_F32, 1, 0);
	ASSERT_NE(NULL, a);
	c = rbln_matmul(a, b);
	ASSERT_NE(NULL, c) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, out, 2 * n * sizeof(float)))
		TH_LOG("%s", rbln_last_error());
	for (j = 0; j < 2 * n; j++) {
		ASSERT_EQ((float)(j % n % 7 + 2 * (j % n % 5)), out[j]) TH_LOG("element %lld",
									       (long long)j);
	}

	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &st));
	EXPECT_EQ(0, st.reserved.current % (2 * MIB));
	rbln_tensor_free(filler);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(0));
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &st));
	EXPECT_EQ(0, st.reserved.current);
	EXPECT_EQ(st.num_device_alloc, st.num_device_free);
	EXPECT_LT(0, st.num_device_alloc);
	free(vals);
	free(out);
}

/* Whether every element of @t, of @n f32, is @v. */
static bool all_equal(rbln_tensor *t, int64_t n, float v)
{
	float *got = malloc(n * sizeof(float));
	bool ok = got && rbln_tensor_read(t, got, n * sizeof(float)) == RBLN_OK;
	int64_t j;

	for (j = 0; ok && j < n; j++)
		ok = got[j] == v;
	free(got);
	return ok;
}

/*
 * empty_cache unmaps a piece freed below live tensors (a hole in the
 * segment, VM_BIND unbinding it), the driver counts it gone, and the next
 * tensor that fits maps the hole again; the tensors around it keep their
 * data throughout.
 */
TEST(expandable_segments_unmap_holes)
{
	int64_t shape[1] = { 20 * MIB / 4 };	/* a large-pool map each */
	struct rbln_memory_stats st;
	rbln_tensor *t[3], *u;
	int i;

	for (i = 0; i < 3; i++) {
		t[i] = rbln_tensor_full(shape, 1, RBLN_F32, i + 1, 0);
		ASSERT_NE(NULL, t[i]) TH_LOG("%s", rbln_last_error());
		ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t[i])) TH_LOG("%s", rbln_last_error());
	}
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &st));
	EXPECT_EQ(60 * MIB, st.reserved.current);
	EXPECT_EQ(3, st.num_device_alloc);

	rbln_tensor_free(t[1]);
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(0));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &st));
	EXPECT_EQ(40 * MIB, st.reserved.current);
	EXPECT_EQ(1, st.num_device_free);
	EXPECT_EQ(st.reserved.current, fdinfo_device_bytes());
	EXPECT_TRUE(all_equal(t[0], shape[0], 1));
	EXPECT_TRUE(all_equal(t[2], shape[0], 3));

	u = rbln_tensor_full(shape, 1, RBLN_F32, 5, 0);
	ASSERT_NE(NULL, u);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(u)) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &st));
	EXPECT_EQ(60 * MIB, st.reserved.current);
	EXPECT_EQ(4, st.num_device_alloc);
	EXPECT_EQ(st.reserved.current, fdinfo_device_bytes());
	EXPECT_TRUE(all_equal(u, shape[0], 5));
	EXPECT_TRUE(all_equal(t[0], shape[0], 1));
	EXPECT_TRUE(all_equal(t[2], shape[0], 3));

	rbln_tensor_free(t[0]);
	rbln_tensor_free(t[2]);
	rbln_tensor_free(u);
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(0));
	EXPECT_EQ(0, rbln_memory_reserved(0));
	EXPECT_EQ(0, fdinfo_device_bytes());
}

TEST_HARNESS_MAIN
