// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_vm_bind - VM_RESERVE, VM_RELEASE and VM_BIND: every rejection path,
 * mappings that reach exactly what they name, splits, unbinds ordered after
 * the jobs before them, and binds racing a close or an unplug
 */

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define PAGE		4096ull
#define MIB		(1ull << 20)
#define HOT_ID		7

static uint64_t param(struct __test_metadata *_metadata, struct rbln_drm_device *dev,
		      uint32_t which)
{
	uint64_t v = 0;

	EXPECT_EQ(0, rbln_drm_get_param(dev, which, &v));
	return v;
}

/* A file with a queue, a command buffer and a host buffer to read results into. */
struct ctx {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd, out;
};

/* The rest of a context whose device @x->dev is open. */
static int ctx_setup(struct ctx *x)
{
	return rbln_drm_queue_create(x->dev, RBLN_QUEUE_PRIORITY_NORMAL, &x->queue) ?:
	       rbln_test_buf_new(x->dev, 64 * 1024, RBLN_BO_HOST, 0, &x->cmd) ?:
	       rbln_test_buf_new(x->dev, 4 * MIB, RBLN_BO_HOST, 0, &x->out);
}

/* A context on initial device @id. */
static int ctx_open(struct ctx *x, unsigned int id)
{
	memset(x, 0, sizeof(*x));
	return rbln_test_open(id, &x->dev) ?: ctx_setup(x);
}

static void ctx_close(struct ctx *x)
{
	rbln_test_buf_free(x->dev, &x->cmd);
	rbln_test_buf_free(x->dev, &x->out);
	rbln_drm_close(x->dev);
}

/* Runs the commands in @c on @x's queue with its own buffers listed: the job's status. */
static int ctx_run(struct ctx *x, struct rbln_drm_cmd *c)
{
	return rbln_test_run(x->dev, x->queue, &x->cmd, c->len, &x->out.handle, 1, 10000);
}

/* Fills @bytes at @va with @pattern: the job's status. */
static int fill(struct ctx *x, uint64_t va, uint32_t pattern, uint64_t bytes)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, x->cmd.cpu, x->cmd.size);
	if (rbln_drm_cmd_dma_fill(&c, va, pattern, bytes))
		return -2000;
	return ctx_run(x, &c);
}

/* Copies @bytes at @va into the start of @x->out: the job's status. */
static int fetch(struct ctx *x, uint64_t va, uint64_t bytes)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, x->cmd.cpu, x->cmd.size);
	if (rbln_drm_cmd_dma_copy(&c, x->out.va, va, bytes))
		return -2000;
	return ctx_run(x, &c);
}

/* Whether the first @bytes of @x->out all hold @pattern. */
static bool out_holds(struct ctx *x, uint32_t pattern, uint64_t bytes)
{
	const uint32_t *p = x->out.cpu;
	uint64_t i;

	for (i = 0; i < bytes / 4; i++)
		if (p[i] != pattern)
			return false;
	return true;
}

/* A NOP the device hangs on, on @x's queue, from page @nop; @hung gets its fence. */
static int submit_hung_nop(struct ctx *x, struct rbln_test_buf *nop, struct drm_rbln_sync *hung)
{
	return rbln_test_submit_hung_nop(x->dev, x->queue, nop, rbln_test_dev_name(0), hung);
}

/*
 * Behind a hung NOP (submit_hung_nop()), a job that fills the MiB at @va
 * with @pattern and copies it into @x->out; @job gets its fence.
 */
static int fill_behind_a_hang(struct ctx *x, struct rbln_test_buf *nop, uint64_t va,
			      uint32_t pattern, struct drm_rbln_sync *hung,
			      struct drm_rbln_sync *job)
{
	uint32_t bos[2] = { x->out.handle, x->cmd.handle };
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, x->cmd.cpu, x->cmd.size);
	return submit_hung_nop(x, nop, hung) ?:
	       (drmSyncobjCreate(rbln_drm_fd(x->dev), 0, &job->handle) ? -errno : 0) ?:
	       rbln_drm_cmd_dma_fill(&c, va, pattern, MIB) ?:
	       rbln_drm_cmd_dma_copy(&c, x->out.va, va, MIB) ?:
	       rbln_drm_submit(x->dev, x->queue, x->cmd.va, c.len, bos, 2, NULL, 0, job);
}

FIXTURE(vm) {
	struct ctx x;
	uint64_t start, size;
};

FIXTURE_SETUP(vm)
{
	ASSERT_EQ(0, ctx_open(&self->x, 0));
	self->start = param(_metadata, self->x.dev, RBLN_PARAM_VM_BIND_START);
	self->size = param(_metadata, self->x.dev, RBLN_PARAM_VM_BIND_SIZE);
}

FIXTURE_TEARDOWN(vm)
{
	ctx_close(&self->x);
}

TEST_F(vm, bind_range_is_apart_from_the_driver_placed_range)
{
	uint64_t va_start = param(_metadata, self->x.dev, RBLN_PARAM_VA_START);
	uint64_t va_size = param(_metadata, self->x.dev, RBLN_PARAM_VA_SIZE);

	EXPECT_LE(3, param(_metadata, self->x.dev, RBLN_PARAM_ABI_VERSION));
	EXPECT_GE(self->start, va_start + va_size);
	EXPECT_GE(self->size, 1ull << 40);
	EXPECT_LE(self->start + self->size, 1ull << 48);
	EXPECT_EQ(0, self->start % (1ull << 30));
	/* Objects the driver places land below it. */
	EXPECT_LT(self->x.out.va, self->start);
}

TEST_F(vm, reserve_rejects_bad_arguments)
{
	struct drm_rbln_vm_reserve r;
	int fd = rbln_drm_fd(self->x.dev);
	uint64_t va;

	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, 0, 0, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, PAGE + 1, 0, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, self->size + PAGE, 0, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, UINT64_MAX & ~(PAGE - 1), 0, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, PAGE, 3 * PAGE, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, PAGE, PAGE / 2, &va));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(self->x.dev, PAGE, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_reserve(NULL, PAGE, 0, &va));
	r = (struct drm_rbln_vm_reserve){ .size = PAGE, .flags = 1 };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_RESERVE, &r));
	EXPECT_EQ(EINVAL, errno);
	r = (struct drm_rbln_vm_reserve){ .size = PAGE, .pad = 1 };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_RESERVE, &r));
	EXPECT_EQ(EINVAL, errno);
	/* An alignment larger than the range leaves no room. */
	EXPECT_EQ(-ENOSPC, rbln_drm_vm_reserve(self->x.dev, PAGE, self->size * 2, &va));
	/* The whole range fits once, not twice. */
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, self->size, 0, &va));
	EXPECT_EQ(self->start, va);
	EXPECT_EQ(-ENOSPC, rbln_drm_vm_reserve(self->x.dev, PAGE, 0, &va));
	EXPECT_EQ(0, rbln_drm_vm_release(self->x.dev, self->start));
}

TEST_F(vm, reservations_are_aligned_and_disjoint)
{
	static const uint64_t sizes[] = { PAGE, 3 * PAGE, 2 * MIB, 5 * MIB, 1ull << 30 };
	static const uint64_t aligns[] = { 0, 64 * 1024, 2 * MIB, 1ull << 30, 1ull << 32 };
	uint64_t va[25], sz[25];
	unsigned int i, j, n = 0;

	for (i = 0; i < 5; i++) {
		for (j = 0; j < 5; j++, n++) {
			ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, sizes[i], aligns[j], &va[n]));
			sz[n] = sizes[i];
			EXPECT_EQ(0, va[n] % (aligns[j] ?: PAGE));
			EXPECT_GE(va[n], self->start);
			EXPECT_LE(va[n] + sizes[i], self->start + self->size);
		}
	}
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			EXPECT_TRUE(va[i] + sz[i] <= va[j] || va[j] + sz[j] <= va[i]);
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, rbln_drm_vm_release(self->x.dev, va[i]));
}

TEST_F(vm, release_rejects_what_is_not_a_free_reservation)
{
	static const uint64_t outside[] = { 0, PAGE, 1ull << 32, 1ull << 47, 1ull << 48,
					     UINT64_MAX - PAGE + 1, UINT64_MAX };
	struct rbln_test_buf b;
	unsigned int i;
	uint64_t va;

	for (i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		EXPECT_EQ(-ENOENT, rbln_drm_vm_release(self->x.dev, outside[i]));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 4 * PAGE, 0, &va));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_release(self->x.dev, va + PAGE));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_release(self->x.dev, va + 4 * PAGE));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_release(self->x.dev, va - PAGE));

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 3 * PAGE, PAGE, b.handle, 0, 0));
	EXPECT_EQ(-EBUSY, rbln_drm_vm_release(self->x.dev, va));
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va + 3 * PAGE, PAGE));
	EXPECT_EQ(0, rbln_drm_vm_release(self->x.dev, va));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_release(self->x.dev, va));
	/* Gone: nothing can be mapped there any more. */
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(self->x.dev, va, PAGE, b.handle, 0, 0, NULL, 0, NULL));
	rbln_test_buf_free(self->x.dev, &b);
}

TEST_F(vm, map_rejects_bad_requests)
{
	struct rbln_drm_device *dev = self->x.dev;
	struct drm_rbln_sync bad = { .handle = 0xdead }, padded = { .pad = 1 };
	struct drm_rbln_sync many[65] = { 0 };
	int fd = rbln_drm_fd(dev);
	struct drm_rbln_vm_bind a;
	struct rbln_test_buf b;
	uint64_t va, va2;

	ASSERT_EQ(0, rbln_test_buf_new(dev, 4 * PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(dev, 8 * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_drm_vm_reserve(dev, 8 * PAGE, 0, &va2));

	/* Misaligned, empty, wrapping. */
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va + 1, PAGE, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE - 1, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, 8, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, 0, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, UINT64_MAX - PAGE + 1, 2 * PAGE, b.handle, 0, 0,
					   NULL, 0, NULL));
	/* Past the object's end, or an offset that wraps. */
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, 5 * PAGE, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, 2 * PAGE, b.handle, 3 * PAGE, 0, NULL, 0,
					   NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, UINT64_MAX - PAGE + 1, 0,
					   NULL, 0, NULL));
	/* Unknown object, flag, operation. */
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, va, PAGE, 0xdead, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 2, NULL, 0, NULL));
	a = (struct drm_rbln_vm_bind){ .op = 3, .va = va, .size = PAGE, .handle = b.handle };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EINVAL, errno);
	a = (struct drm_rbln_vm_bind){ .op = 0, .va = va, .size = PAGE, .handle = b.handle };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EINVAL, errno);
	/* Outside every reservation, or across the end of one. */
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, self->x.out.va, PAGE, b.handle, 0, 0, NULL, 0,
					   NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, va - PAGE, PAGE, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, va + 7 * PAGE, 2 * PAGE, b.handle, 0, 0, NULL, 0,
					   NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, 1ull << 47, PAGE, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, UINT64_MAX - 2 * PAGE + 1, PAGE, b.handle, 0, 0,
					   NULL, 0, NULL));
	/* Waits and signals. */
	EXPECT_EQ(-E2BIG, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, many, 65, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, NULL, 1, NULL));
	a = (struct drm_rbln_vm_bind){ .op = RBLN_VM_BIND_MAP, .va = va, .size = PAGE,
				       .handle = b.handle, .wait_count = 1, .waits = 8 };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, &bad, 1, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, &padded, 1, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, NULL, 0, &bad));
	padded.handle = 0;
	EXPECT_EQ(-EINVAL, rbln_drm_vm_map(dev, va, PAGE, b.handle, 0, 0, NULL, 0, &padded));

	/* None of that mapped anything; overlaps are refused, neighbours are not. */
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 2 * PAGE, 2 * PAGE, b.handle, 0, 0));
	EXPECT_EQ(-EEXIST, rbln_drm_vm_map(dev, va + 3 * PAGE, PAGE, b.handle, 0, 0, NULL, 0,
					   NULL));
	EXPECT_EQ(-EEXIST, rbln_drm_vm_map(dev, va, 3 * PAGE, b.handle, 0, 0, NULL, 0, NULL));
	EXPECT_EQ(0, rbln_test_vm_map(self->x.dev, va, 2 * PAGE, b.handle, 2 * PAGE, 0));
	EXPECT_EQ(0, rbln_test_vm_map(self->x.dev, va + 4 * PAGE, 4 * PAGE, b.handle, 0, 0));
	/* The same object in another reservation, read-only. */
	EXPECT_EQ(0, rbln_test_vm_map(self->x.dev, va2, 4 * PAGE, b.handle, 0, RBLN_VM_BIND_READ_ONLY));

	EXPECT_EQ(0, rbln_test_vm_unmap(self->x.dev, va, 8 * PAGE));
	EXPECT_EQ(0, rbln_test_vm_unmap(self->x.dev, va2, 8 * PAGE));
	EXPECT_EQ(0, rbln_drm_vm_release(dev, va));
	EXPECT_EQ(0, rbln_drm_vm_release(dev, va2));
	rbln_test_buf_free(dev, &b);
}

TEST_F(vm, unmap_rejects_bad_requests)
{
	struct rbln_drm_device *dev = self->x.dev;
	int fd = rbln_drm_fd(dev);
	struct drm_rbln_vm_bind a;
	struct rbln_test_buf b;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_buf_new(dev, 4 * PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(dev, 8 * PAGE, 0, &va));
	/* Nothing mapped yet. */
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, va, 8 * PAGE, NULL, 0, NULL));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 4 * PAGE, 4 * PAGE, b.handle, 0, 0));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, va, 4 * PAGE, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_unmap(dev, va + 1, PAGE, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_vm_unmap(dev, va, 0, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, va + 4 * PAGE, 8 * PAGE, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, self->x.out.va, PAGE, NULL, 0, NULL));
	a = (struct drm_rbln_vm_bind){ .op = RBLN_VM_BIND_UNMAP, .va = va, .size = 8 * PAGE,
				       .handle = b.handle };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EINVAL, errno);
	a = (struct drm_rbln_vm_bind){ .op = RBLN_VM_BIND_UNMAP, .va = va, .size = 8 * PAGE,
				       .bo_offset = PAGE };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EINVAL, errno);
	a = (struct drm_rbln_vm_bind){ .op = RBLN_VM_BIND_UNMAP, .va = va, .size = 8 * PAGE,
				       .flags = RBLN_VM_BIND_READ_ONLY };
	EXPECT_EQ(-1, drmIoctl(fd, DRM_IOCTL_RBLN_VM_BIND, &a));
	EXPECT_EQ(EINVAL, errno);
	/* The first unbind takes it, the second finds nothing. */
	EXPECT_EQ(0, rbln_drm_vm_unmap(dev, va, 8 * PAGE, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, va, 8 * PAGE, NULL, 0, NULL));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(dev, va + 4 * PAGE, PAGE, NULL, 0, NULL));
	EXPECT_EQ(0, rbln_drm_vm_release(dev, va));
	rbln_test_buf_free(dev, &b);
}

/*
 * One object mapped twice, at different offsets: each address reaches the
 * byte of the object it names, and a device object without an address of
 * its own is used through its mappings only.
 */
TEST_F(vm, mappings_reach_exactly_what_they_name)
{
	struct rbln_drm_bo_info info;
	struct rbln_test_buf b;
	uint64_t va, vb;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 4 * MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	EXPECT_EQ(0, b.va);
	ASSERT_EQ(0, rbln_drm_bo_info(self->x.dev, b.handle, &info));
	EXPECT_EQ(0, info.va);
	EXPECT_EQ(RBLN_BO_NO_VA, info.flags & RBLN_BO_NO_VA);
	/* Not listable: it has no address of its own. */
	EXPECT_EQ(-1000 - ENOENT, rbln_test_run(self->x.dev, self->x.queue, &self->x.cmd, 8,
						&b.handle, 1, 10000));

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 8 * MIB, 2 * MIB, &va));
	vb = va + 6 * MIB;
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, 4 * MIB, b.handle, 0, 0));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, vb, MIB + 3 * PAGE, b.handle, 2 * MIB + PAGE, 0));

	ASSERT_EQ(1, fill(&self->x, va, 0x11111111, 4 * MIB));
	ASSERT_EQ(1, fill(&self->x, vb, 0x22222222, MIB + 3 * PAGE));
	ASSERT_EQ(1, fetch(&self->x, va, 4 * MIB));
	EXPECT_TRUE(out_holds(&self->x, 0x11111111, 2 * MIB + PAGE));
	memmove(self->x.out.cpu, (char *)self->x.out.cpu + 2 * MIB + PAGE, 2 * MIB - PAGE);
	EXPECT_TRUE(out_holds(&self->x, 0x22222222, MIB + 3 * PAGE));
	memmove(self->x.out.cpu, (char *)self->x.out.cpu + MIB + 3 * PAGE, MIB - 4 * PAGE);
	EXPECT_TRUE(out_holds(&self->x, 0x11111111, MIB - 4 * PAGE));

	/* Past the second mapping's end: the guard is the unmapped rest. */
	EXPECT_EQ(-EFAULT, fill(&self->x, vb, 0, MIB + 4 * PAGE));
	ctx_close(&self->x);
	ASSERT_EQ(0, ctx_open(&self->x, 0));
}

TEST_F(vm, host_objects_map_and_stay_pinned)
{
	struct rbln_test_buf h;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 16 * PAGE, RBLN_BO_HOST, RBLN_BO_NO_VA, &h));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 16 * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, 8 * PAGE, h.handle, 8 * PAGE, 0));
	/* Never listed in a job: the mapping keeps the pages. */
	ASSERT_EQ(1, fill(&self->x, va, 0x5a5a5a5a, 8 * PAGE));
	EXPECT_EQ(0x5a5a5a5au, ((uint32_t *)h.cpu)[8 * PAGE / 4]);
	EXPECT_EQ(0x5a5a5a5au, ((uint32_t *)h.cpu)[16 * PAGE / 4 - 1]);
	EXPECT_EQ(0u, ((uint32_t *)h.cpu)[8 * PAGE / 4 - 1]);
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va, 16 * PAGE));
	EXPECT_EQ(0, rbln_drm_vm_release(self->x.dev, va));
	rbln_test_buf_free(self->x.dev, &h);
}

TEST_F(vm, read_only_mappings_fault_on_write)
{
	struct rbln_test_buf b, ro;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 2 * PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 2 * PAGE, RBLN_BO_DEVICE,
				       RBLN_BO_NO_VA | RBLN_BO_READ_ONLY, &ro));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 8 * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, 2 * PAGE, b.handle, 0, 0));
	ASSERT_EQ(1, fill(&self->x, va, 0x77777777, 2 * PAGE));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 2 * PAGE, 2 * PAGE, b.handle, 0,
			      RBLN_VM_BIND_READ_ONLY));
	/* A read-only object maps read-only, whatever the flags say. */
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 4 * PAGE, 2 * PAGE, ro.handle, 0, 0));
	ASSERT_EQ(1, fetch(&self->x, va + 2 * PAGE, 2 * PAGE));
	EXPECT_TRUE(out_holds(&self->x, 0x77777777, 2 * PAGE));
	/* The fault bans the context: one check per file. */
	EXPECT_EQ(-EFAULT, fill(&self->x, va + 4 * PAGE, 0, PAGE));
	ctx_close(&self->x);
	ASSERT_EQ(0, ctx_open(&self->x, 0));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 2 * PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 8 * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, 2 * PAGE, b.handle, 0, RBLN_VM_BIND_READ_ONLY));
	EXPECT_EQ(-EFAULT, fill(&self->x, va, 0, PAGE));
}

/* Unbinding the middle of a mapping leaves both ends mapped, and only them. */
TEST_F(vm, partial_unbind_splits_a_mapping)
{
	struct rbln_test_buf b;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, 8 * PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, 8 * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, 8 * PAGE, b.handle, 0, 0));
	ASSERT_EQ(1, fill(&self->x, va, 0x33333333, 8 * PAGE));
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va + 2 * PAGE, 3 * PAGE));
	/* What is left still reaches the same memory. */
	ASSERT_EQ(1, fetch(&self->x, va, 2 * PAGE));
	EXPECT_TRUE(out_holds(&self->x, 0x33333333, 2 * PAGE));
	ASSERT_EQ(1, fetch(&self->x, va + 5 * PAGE, 3 * PAGE));
	EXPECT_TRUE(out_holds(&self->x, 0x33333333, 3 * PAGE));
	/* The hole can be mapped again, with another part of the object. */
	EXPECT_EQ(-EEXIST, rbln_drm_vm_map(self->x.dev, va + PAGE, 2 * PAGE, b.handle, 0, 0,
					   NULL, 0, NULL));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + 2 * PAGE, 3 * PAGE, b.handle, 5 * PAGE, 0));
	ASSERT_EQ(1, fill(&self->x, va + 2 * PAGE, 0x44444444, 3 * PAGE));
	ASSERT_EQ(1, fetch(&self->x, va + 5 * PAGE, 3 * PAGE));
	EXPECT_TRUE(out_holds(&self->x, 0x44444444, 3 * PAGE));
	/* One unbind over the three mappings takes them all. */
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va, 8 * PAGE));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(self->x.dev, va, 8 * PAGE, NULL, 0, NULL));
	EXPECT_EQ(-EFAULT, fill(&self->x, va + 7 * PAGE, 0, PAGE));
}

/*
 * An unbind made while a job that uses the range waits its turn (behind a
 * hung job on the same queue) takes effect only after that job: the job
 * completes with the data, and the unbind's fence comes after the job's.
 * Without the wait, the job faults.
 */
TEST_F(vm, unbind_waits_for_the_jobs_before_it)
{
	struct drm_rbln_sync hung = { 0 }, job = { 0 }, unbound = { 0 };
	int fd = rbln_drm_fd(self->x.dev), status = 0, job_status = 0;
	struct rbln_test_buf b, cmd2;
	uint64_t used, va;

	used = param(_metadata, self->x.dev, RBLN_PARAM_DEVICE_MEMORY_USED);
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_HOST, 0, &cmd2));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, MIB, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, MIB, b.handle, 0, 0));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &unbound.handle));

	ASSERT_EQ(0, fill_behind_a_hang(&self->x, &cmd2, va, 0x66666666, &hung, &job));
	ASSERT_EQ(0, rbln_drm_vm_unmap(self->x.dev, va, MIB, NULL, 0, &unbound));
	/* The object's only holder now is the unbind in flight. */
	rbln_test_buf_free(self->x.dev, &b);

	/* Whenever the unbind is done, the job is. */
	if (!drmSyncobjWait(fd, &unbound.handle, 1, 0, 0, NULL))
		EXPECT_EQ(0, drmSyncobjWait(fd, &job.handle, 1, 0, 0, NULL));
	ASSERT_EQ(0, drmSyncobjWait(fd, &unbound.handle, 1, rbln_test_deadline_ns(20000), 0,
				    NULL));
	EXPECT_EQ(0, drmSyncobjWait(fd, &job.handle, 1, 0, 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, job.handle, 0, &job_status));
	EXPECT_EQ(1, job_status);
	EXPECT_TRUE(out_holds(&self->x, 0x66666666, MIB));
	/*
	 * And then the memory went with the mapping: when the unbind job is
	 * freed, just after its fence signals.
	 */
	EXPECT_EQ(used, rbln_test_mem_used_settles_at(0, used));
	/* The range faults now. */
	EXPECT_EQ(-EFAULT, fill(&self->x, va, 0, PAGE));
	rbln_test_buf_free(self->x.dev, &cmd2);
}

/*
 * An unbind need not wait again for the jobs an unbind before it waits for:
 * it runs after that one. Unless that one was refused after it had looked
 * at the jobs: it waits for nothing. Here the job behind a hang uses range
 * A; an unbind of range B, refused as it goes past its reservation's end,
 * then an unbind of B, then one of A: the last one must still wait for
 * the job, which must not fault.
 */
TEST_F(vm, unbind_after_a_refused_one_still_waits_for_the_jobs_before_it)
{
	struct drm_rbln_sync hung = { 0 }, job = { 0 }, unbound = { 0 };
	int fd = rbln_drm_fd(self->x.dev), status = 0;
	struct rbln_test_buf a, b, cmd2;
	uint64_t va_a, va_b;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &a));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_HOST, 0, &cmd2));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, MIB, 0, &va_a));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, MIB, 0, &va_b));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va_a, MIB, a.handle, 0, 0));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va_b, MIB, b.handle, 0, 0));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &unbound.handle));

	ASSERT_EQ(0, fill_behind_a_hang(&self->x, &cmd2, va_a, 0x77777777, &hung, &job));
	EXPECT_EQ(-ENOENT, rbln_drm_vm_unmap(self->x.dev, va_b, 2 * MIB, NULL, 0, NULL));
	ASSERT_EQ(0, rbln_drm_vm_unmap(self->x.dev, va_b, MIB, NULL, 0, NULL));
	ASSERT_EQ(0, rbln_drm_vm_unmap(self->x.dev, va_a, MIB, NULL, 0, &unbound));

	/* Whenever the last unbind is done, the job is. */
	if (!drmSyncobjWait(fd, &unbound.handle, 1, 0, 0, NULL))
		EXPECT_EQ(0, drmSyncobjWait(fd, &job.handle, 1, 0, 0, NULL));
	ASSERT_EQ(0, drmSyncobjWait(fd, &unbound.handle, 1, rbln_test_deadline_ns(20000), 0,
				    NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, job.handle, 0, &status));
	EXPECT_EQ(1, status);
	EXPECT_TRUE(out_holds(&self->x, 0x77777777, MIB));
	rbln_test_buf_free(self->x.dev, &a);
	rbln_test_buf_free(self->x.dev, &b);
	rbln_test_buf_free(self->x.dev, &cmd2);
}

/* radix_tree_node objects in use (/proc/slabinfo): xarrays' nodes, or -1. */
static long long xa_nodes(void)
{
	long long active = -1;
	char line[512];
	FILE *f = fopen("/proc/slabinfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "radix_tree_node %lld", &active) == 1)
			break;
	fclose(f);
	return active;
}

/*
 * What unbinds waiting behind another bind hold in the scheduler is not
 * charged to anyone (its dependency xarrays). It was every queue's last
 * fence per unbind: 1024 queues with a job each waiting, times 4096
 * unbinds, 37 MiB a file, and a quadratic search in the scheduler for
 * each unbind (65 ms here). Now an unbind holds only the fences the one
 * before it does not. Here 14 unbinds wait behind a bind that waits for a
 * hung job, as do 1023 queues' jobs: they took 238 xarray nodes, 14 now.
 * The hang lasts the suite's job timeout of 2 s: longer than the old
 * unbinds took, so that they are still waiting when counted.
 */
TEST_F(vm, unbinds_do_not_each_hold_every_queues_fence)
{
	enum { QUEUES = 1023, UNBINDS = 14 };
	static uint32_t queues[QUEUES];
	int fd = rbln_drm_fd(self->x.dev), i, status = 0;
	struct drm_rbln_sync hung = { 0 }, gate = { 0 };
	struct rbln_test_buf cmd2, page;
	struct rbln_drm_cmd c;
	long long before, after;
	uint64_t va;

	ASSERT_LE(0, xa_nodes());
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_HOST, 0, &cmd2));
	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, (UNBINDS + 1) * PAGE, RBLN_BO_DEVICE,
				       RBLN_BO_NO_VA, &page));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, (UNBINDS + 1) * PAGE, 0, &va));
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + PAGE, UNBINDS * PAGE, page.handle, PAGE, 0));
	rbln_drm_cmd_init(&c, cmd2.cpu, cmd2.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	for (i = 0; i < QUEUES; i++) {
		ASSERT_EQ(0, rbln_drm_queue_create(self->x.dev, RBLN_QUEUE_PRIORITY_NORMAL,
						   &queues[i])) TH_LOG("queue %d", i);
	}

	ASSERT_EQ(0, submit_hung_nop(&self->x, &cmd2, &hung));
	for (i = 0; i < QUEUES; i++) {
		ASSERT_EQ(0, rbln_drm_submit(self->x.dev, queues[i], cmd2.va, c.len, &cmd2.handle,
					     1, &hung, 1, NULL)) TH_LOG("queue %d", i);
	}
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &gate.handle));
	ASSERT_EQ(0, rbln_drm_vm_map(self->x.dev, va, PAGE, page.handle, 0, 0, &hung, 1, &gate));
	before = xa_nodes();
	for (i = 0; i < UNBINDS; i++) {
		ASSERT_EQ(0, rbln_drm_vm_unmap(self->x.dev, va + (i + 1) * PAGE, PAGE, NULL, 0,
					       NULL)) TH_LOG("unbind %d", i);
	}
	after = xa_nodes();
	/* Else the unbinds may have run and dropped what they held. */
	EXPECT_EQ(-ETIME, drmSyncobjWait(fd, &gate.handle, 1, 0, 0, NULL) ? -errno : 0);
	EXPECT_LT(after - before, 4 * (QUEUES / 64 + 1))
		TH_LOG("%lld xarray nodes for %d unbinds", after - before, UNBINDS);

	ASSERT_EQ(0, drmSyncobjWait(fd, &gate.handle, 1, rbln_test_deadline_ns(20000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	for (i = 0; i < QUEUES; i++) {
		ASSERT_EQ(0, rbln_drm_queue_destroy(self->x.dev, queues[i]));
	}
	rbln_test_buf_free(self->x.dev, &page);
	rbln_test_buf_free(self->x.dev, &cmd2);
}

/* The file's rbln-page-tables in fdinfo, in bytes, or -1. */
static long long page_tables(struct ctx *x)
{
	return rbln_test_fdinfo_key(rbln_drm_fd(x->dev), "rbln-page-tables:");
}

/*
 * The page tables an unbind empties go with it. They used to stay until
 * the file closed, in no memory cgroup: a page mapped and unmapped at
 * every GiB of a reservation held a leaf and a level-1 table each, 48 MiB
 * for the 4096 here. The range works as before afterwards.
 */
TEST_F(vm, unbinds_free_the_tables_they_empty)
{
	const uint64_t gib = 1ull << 30, n = 4096;
	long long before, mapped;
	uint64_t va, i;

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, n * gib, gib, &va));
	before = page_tables(&self->x);
	ASSERT_LT(0, before);
	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va, PAGE, self->x.out.handle, 0, 0));
	mapped = page_tables(&self->x);
	/* A leaf and a level-1 table at least. */
	EXPECT_LE(before + 12 * 1024, mapped);
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va, PAGE));
	EXPECT_EQ(before, page_tables(&self->x));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + i * gib, PAGE, self->x.out.handle,
					      0, 0));
		ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va + i * gib, PAGE));
	}
	EXPECT_EQ(before, page_tables(&self->x))
		TH_LOG("%lld KiB of page tables after %llu binds a GiB apart, %lld before",
		       page_tables(&self->x) >> 10, (unsigned long long)n, before >> 10);

	ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, va + gib, PAGE, self->x.out.handle, 0, 0));
	EXPECT_EQ(1, fill(&self->x, va + gib, 0x7ab1e5, PAGE));
	EXPECT_EQ(0x7ab1e5, ((uint32_t *)self->x.out.cpu)[0]);
	ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, va + gib, PAGE));
	EXPECT_EQ(-EFAULT, fill(&self->x, va + gib, 0, PAGE));
}

/* One thread's maps and unmaps of a page at @va, for maps_race_unbinds_that_free_tables. */
struct map_loop {
	struct rbln_drm_device *dev;
	uint32_t handle;
	uint64_t va;
	int ret;
};

static void *map_unmap_loop(void *arg)
{
	struct map_loop *m = arg;
	int n;

	for (n = 0; n < 1000 && !m->ret; n++)
		m->ret = rbln_test_vm_map(m->dev, m->va, PAGE, m->handle, 0, 0) ?:
			 rbln_test_vm_unmap(m->dev, m->va, PAGE);
	return NULL;
}

/*
 * A map makes its tables with the tables' lock dropped, while the bind
 * queue may free tables of the same GiB for an unbind that emptied them:
 * two threads of one file map and unmap a page 2 MiB apart, each unbind
 * freeing the leaf and, when the other page is out too, the tables above.
 * Every call succeeds, nothing is held after, and the range still maps.
 */
TEST_F(vm, maps_race_unbinds_that_free_tables)
{
	const uint64_t gib = 1ull << 30;
	struct map_loop m[2];
	long long before;
	pthread_t t[2];
	uint64_t va;
	int i;

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, gib, gib, &va));
	before = page_tables(&self->x);
	for (i = 0; i < 2; i++) {
		m[i] = (struct map_loop){ self->x.dev, self->x.out.handle, va + i * 2 * MIB, 0 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, map_unmap_loop, &m[i]));
	}
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, m[i].ret);
	}
	EXPECT_EQ(before, page_tables(&self->x));

	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, rbln_test_vm_map(self->x.dev, m[i].va, PAGE, self->x.out.handle, 0, 0));
		EXPECT_EQ(1, fill(&self->x, m[i].va, 0x5ace + i, PAGE));
		EXPECT_EQ(0x5ace + i, ((uint32_t *)self->x.out.cpu)[0]);
		ASSERT_EQ(0, rbln_test_vm_unmap(self->x.dev, m[i].va, PAGE));
	}
	EXPECT_EQ(-EFAULT, fill(&self->x, va, 0, PAGE));
}

/* cgroup v2, which rbln-vm's guest mounts. */
#define CGROUP_ROOT	"/sys/fs/cgroup"

/* A memory cgroup of its own for this process, named after it in @dir; 0 or -errno. */
static int cgroup_enter(char *dir, size_t size)
{
	char pid[16], procs[192];

	snprintf(dir, size, CGROUP_ROOT "/rbln-vm-bind-%d", (int)getpid());
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return rbln_sysfs_write(CGROUP_ROOT "/cgroup.subtree_control", "+memory") ?:
	       rbln_sysfs_write(procs, pid);
}

static void cgroup_leave(const char *dir)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	rbln_sysfs_write(CGROUP_ROOT "/cgroup.procs", pid);
	rmdir(dir);
}

static long long cgroup_memory(const char *dir)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/memory.current", dir);
	return rbln_sysfs_read_ull(path);
}

/*
 * The page tables a file's binds make are charged to the caller's memory
 * cgroup, as its objects are: otherwise a process could map one page a GiB
 * apart and take memory no limit of its container bounds.
 */
TEST_F(vm, page_tables_are_charged_to_the_callers_memory_cgroup)
{
	const uint64_t gib = 1ull << 30, n = 1024;
	long long tables, charged;
	char dir[128];
	uint64_t va, i;

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, n * gib, gib, &va));
	ASSERT_EQ(0, cgroup_enter(dir, sizeof(dir)));
	tables = page_tables(&self->x);
	charged = cgroup_memory(dir);
	ASSERT_LE(0, charged);
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, rbln_drm_vm_map(self->x.dev, va + i * gib, PAGE, self->x.out.handle,
					     0, 0, NULL, 0, NULL));
	tables = page_tables(&self->x) - tables;
	charged = cgroup_memory(dir) - charged;
	/* A leaf and a level-1 table each. */
	EXPECT_LE((long long)n * 12 * 1024, tables);
	EXPECT_LE(tables, charged)
		TH_LOG("%lld KiB of page tables, %lld KiB charged", tables >> 10, charged >> 10);
	cgroup_leave(dir);
}

/* A map waits for its syncobjs: the range is reached only after them. */
TEST_F(vm, map_waits_for_its_syncobjs)
{
	struct drm_rbln_sync hung = { 0 }, mapped = { 0 };
	int fd = rbln_drm_fd(self->x.dev), status;
	struct rbln_test_buf b;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, PAGE, 0, &va));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &mapped.handle));
	ASSERT_EQ(0, submit_hung_nop(&self->x, &self->x.cmd, &hung));
	ASSERT_EQ(0, rbln_drm_vm_map(self->x.dev, va, PAGE, b.handle, 0, 0, &hung, 1, &mapped));
	if (!drmSyncobjWait(fd, &mapped.handle, 1, 0, 0, NULL))
		EXPECT_EQ(0, drmSyncobjWait(fd, &hung.handle, 1, 0, 0, NULL));
	ASSERT_EQ(0, drmSyncobjWait(fd, &mapped.handle, 1, rbln_test_deadline_ns(20000), 0,
				    NULL));
	/* A failed wait does not undo the map: the tree says it is there. */
	ASSERT_EQ(0, rbln_drm_fence_status(self->x.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	EXPECT_EQ(1, fill(&self->x, va, 1, PAGE));
	rbln_test_buf_free(self->x.dev, &b);
}

/* Timeline points in and out, as SUBMIT takes them. */
TEST_F(vm, binds_take_timeline_points)
{
	struct drm_rbln_sync p1 = { .point = 1 }, p2 = { .point = 2 };
	int fd = rbln_drm_fd(self->x.dev);
	struct rbln_test_buf b;
	uint64_t va, point = 2;

	ASSERT_EQ(0, rbln_test_buf_new(self->x.dev, PAGE, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->x.dev, PAGE, 0, &va));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &p1.handle));
	p2.handle = p1.handle;
	ASSERT_EQ(0, rbln_drm_vm_map(self->x.dev, va, PAGE, b.handle, 0, 0, NULL, 0, &p1));
	ASSERT_EQ(0, rbln_drm_vm_unmap(self->x.dev, va, PAGE, &p1, 1, &p2));
	ASSERT_EQ(0, drmSyncobjTimelineWait(fd, &p1.handle, &point, 1,
					    rbln_test_deadline_ns(10000), 0, NULL));
	EXPECT_EQ(0, rbln_drm_vm_release(self->x.dev, va));
	rbln_test_buf_free(self->x.dev, &b);
}

/*
 * A bind job holds the object it maps until the scheduler frees it, some
 * time after its fence has signaled. Close waits for that, as for jobs:
 * once it returns, what the file held is back. It used to be counted
 * still, for as long as the scheduler took to free the last binds.
 */
TEST(close_gives_back_what_its_binds_held)
{
	int round, i;

	for (round = 0; round < 50; round++) {
		struct drm_rbln_sync done = { 0 };
		struct rbln_drm_device *dev;
		uint64_t va, bo_va;
		uint32_t bo;

		ASSERT_EQ(0, rbln_test_open(0, &dev));
		ASSERT_EQ(0, rbln_drm_bo_create(dev, MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &bo,
						&bo_va));
		ASSERT_EQ(0, rbln_drm_vm_reserve(dev, MIB, 0, &va));
		ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &done.handle));
		for (i = 0; i < 16; i++)
			ASSERT_EQ(0, i % 2 ? rbln_drm_vm_unmap(dev, va, MIB, NULL, 0,
							       i == 15 ? &done : NULL) :
					     rbln_drm_vm_map(dev, va, MIB, bo, 0, 0, NULL, 0, NULL));
		ASSERT_EQ(1, rbln_test_sync_status(dev, done.handle, 10000));
		rbln_drm_close(dev);
		ASSERT_EQ(0, rbln_test_mem_used(0)) TH_LOG("after close %d", round);
	}
}

/*
 * Closing a file with binds and jobs in flight, from many processes at
 * once: nothing is left behind, and the device memory comes back.
 */
TEST(binds_race_close)
{
	struct rbln_drm_device *dev;
	uint64_t before, after;
	int i, status, alive = 0;

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_USED, &before));
	for (i = 0; i < 8; i++) {
		int go[2];
		pid_t pid;
		char byte;

		ASSERT_EQ(0, pipe(go));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			struct ctx x;
			struct rbln_test_buf b;
			struct rbln_drm_cmd c;
			uint64_t va;
			int n;

			if (ctx_open(&x, 0) ||
			    rbln_test_buf_new(x.dev, 2 * MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b) ||
			    rbln_drm_vm_reserve(x.dev, 64 * MIB, 0, &va))
				_exit(1);
			for (n = 0; n < 16; n++) {
				uint64_t at = va + (n % 8) * 2 * MIB;

				rbln_drm_vm_map(x.dev, at, 2 * MIB, b.handle, 0, 0, NULL, 0, NULL);
				rbln_drm_cmd_init(&c, x.cmd.cpu, x.cmd.size);
				rbln_drm_cmd_dma_fill(&c, at, n, 2 * MIB);
				rbln_drm_submit(x.dev, x.queue, x.cmd.va, c.len, &x.cmd.handle, 1,
						NULL, 0, NULL);
				if (n % 3 == 0)
					rbln_drm_vm_unmap(x.dev, at, 2 * MIB, NULL, 0, NULL);
				/* The parent's kill lands from here on, anywhere. */
				if (n == i)
					write(go[1], "", 1);
			}
			/* Half leave through exit, half are killed mid-way. */
			if (i % 2)
				_exit(0);
			pause();
		}
		alive++;
		close(go[1]);
		if (i % 2 == 0 && read(go[0], &byte, 1) == 1)
			kill(pid, SIGKILL);
		close(go[0]);
	}
	while (alive--) {
		ASSERT_LT(0, wait(&status));
		EXPECT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) == 0);
	}
	ASSERT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_USED, &after));
	EXPECT_EQ(before, after);
	rbln_drm_close(dev);
}

struct unplug_worker {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd;
	uint64_t va;
	uint32_t handle;
	int enodev;
};

static void *bind_until_gone(void *arg)
{
	struct unplug_worker *w = arg;
	struct rbln_drm_cmd c;
	int n, ret;

	for (n = 0; n < 100000; n++) {
		uint64_t at = w->va + (n % 4) * MIB;

		ret = rbln_drm_vm_map(w->dev, at, MIB, w->handle, 0, 0, NULL, 0, NULL);
		rbln_drm_cmd_init(&c, w->cmd.cpu, w->cmd.size);
		rbln_drm_cmd_dma_fill(&c, at, n, MIB);
		rbln_drm_submit(w->dev, w->queue, w->cmd.va, c.len, &w->cmd.handle, 1, NULL, 0,
				NULL);
		if (!ret)
			ret = rbln_drm_vm_unmap(w->dev, at, MIB, NULL, 0, NULL);
		if (ret == -ENODEV) {
			w->enodev = 1;
			break;
		}
	}
	return NULL;
}

/* Removing the device while binds, unbinds and jobs go on. */
TEST(binds_race_unplug)
{
	struct rbln_test_victim vic;
	struct unplug_worker w[2];
	struct rbln_test_buf b;
	pthread_t t[2];
	struct ctx x;
	uint64_t va;
	int i;

	/* A fresh emulated device, or on PCI the last function (rbln_test.h). */
	ASSERT_EQ(0, rbln_test_victim_get(&vic, HOT_ID, 16));
	memset(&x, 0, sizeof(x));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &x.dev));
	ASSERT_EQ(0, ctx_setup(&x));
	ASSERT_EQ(0, rbln_test_buf_new(x.dev, MIB, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &b));
	ASSERT_EQ(0, rbln_drm_vm_reserve(x.dev, 8 * MIB, 0, &va));
	for (i = 0; i < 2; i++) {
		w[i] = (struct unplug_worker){ .dev = x.dev, .queue = x.queue,
					       .va = va + i * 4 * MIB, .handle = b.handle };
		ASSERT_EQ(0, rbln_test_buf_new(x.dev, PAGE, RBLN_BO_HOST, 0, &w[i].cmd));
	}
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, bind_until_gone, &w[i]));
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(1, w[i].enodev);
	}
	EXPECT_EQ(-ENODEV, rbln_drm_vm_reserve(x.dev, PAGE, 0, &va));
	for (i = 0; i < 2; i++)
		rbln_test_buf_free(x.dev, &w[i].cmd);
	ctx_close(&x);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

TEST_HARNESS_MAIN
