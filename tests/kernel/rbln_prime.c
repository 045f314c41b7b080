// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_prime - sharing buffer objects as dma-bufs: between files of one
 * device, between two rbln devices (jobs of one reading and writing the
 * other's memory), and from foreign exporters (udmabuf, the system
 * dma-heap, the tests' own in tests/kernel/exporter)
 *
 * Run with emu_devices>=2, and $RBLN_TEST_EXPORTER naming the tests'
 * exporter module, which the tests load.
 */

#include <fcntl.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <xf86drm.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define PAGE 4096ull

FIXTURE(prime) {
	struct rbln_drm_device *a;	/* device 0 */
	struct rbln_drm_device *a2;	/* device 0, another file */
	struct rbln_drm_device *b;	/* device 1 */
};

FIXTURE_SETUP(prime)
{
	ASSERT_EQ(0, rbln_test_open(0, &self->a));
	ASSERT_EQ(0, rbln_test_open(0, &self->a2));
	ASSERT_EQ(0, rbln_test_open(1, &self->b)) TH_LOG("needs emu_devices >= 2");
}

FIXTURE_TEARDOWN(prime)
{
	rbln_drm_close(self->a);
	rbln_drm_close(self->a2);
	rbln_drm_close(self->b);
	EXPECT_EQ(0, rbln_test_mem_used_settled(0));
	EXPECT_EQ(0, rbln_test_mem_used_settled(1));
}

static void fill(uint32_t *p, size_t bytes, uint32_t seed)
{
	size_t i;

	for (i = 0; i < bytes / 4; i++)
		p[i] = seed + (uint32_t)i;
}

/* Object @handle of @from, imported by @to as *@h (its info in *@info): 0, or an ioctl's error. */
static int share(struct rbln_drm_device *from, uint32_t handle, struct rbln_drm_device *to,
		 uint32_t *h, struct rbln_drm_bo_info *info)
{
	int fd, ret;

	ret = rbln_drm_bo_export(from, handle, &fd);
	if (ret)
		return ret;
	ret = rbln_drm_bo_import(to, fd, h);
	close(fd);
	return ret ?: rbln_drm_bo_info(to, *h, info);
}

static int check(const uint32_t *p, size_t bytes, uint32_t seed)
{
	size_t i;

	for (i = 0; i < bytes / 4; i++)
		if (p[i] != seed + (uint32_t)i)
			return 0;
	return 1;
}

TEST_F(prime, host_object_to_another_file)
{
	struct rbln_drm_bo_info info;
	uint32_t h, h2;
	uint32_t *p, *q;
	uint64_t va;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->a, 2 * PAGE, RBLN_BO_HOST, 0, &h, &va));
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->a, h, PROT_READ | PROT_WRITE, (void **)&p, NULL));
	fill(p, 2 * PAGE, 1000);

	ASSERT_EQ(0, rbln_drm_bo_export(self->a, h, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(self->a2, fd, &h2));
	close(fd);

	/* The same object, now at an address of the importer's own space. */
	ASSERT_EQ(0, rbln_drm_bo_info(self->a2, h2, &info));
	EXPECT_EQ(RBLN_BO_HOST, info.placement);
	EXPECT_EQ(2 * PAGE, info.size);
	EXPECT_EQ(0, info.flags);
	ASSERT_EQ(0, rbln_drm_bo_info_by_va(self->a2, info.va, &info));
	EXPECT_EQ(h2, info.handle);

	ASSERT_EQ(0, rbln_drm_bo_mmap(self->a2, h2, PROT_READ | PROT_WRITE, (void **)&q, NULL));
	EXPECT_TRUE(check(q, 2 * PAGE, 1000));
	q[0] = 7;
	EXPECT_EQ(7, p[0]);
	munmap(q, 2 * PAGE);
	munmap(p, 2 * PAGE);

	/* The exporter's handle can go; the importer keeps the object. */
	ASSERT_EQ(0, rbln_drm_bo_close(self->a, h));
	ASSERT_EQ(0, rbln_drm_bo_info(self->a2, h2, &info));
}

TEST_F(prime, device_object_to_another_file)
{
	struct rbln_drm_bo_info info;
	uint32_t h, h2;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->a, 1 << 20, RBLN_BO_DEVICE, RBLN_BO_READ_ONLY,
					&h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, h, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(self->a2, fd, &h2));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_info(self->a2, h2, &info));
	EXPECT_EQ(RBLN_BO_DEVICE, info.placement);
	EXPECT_EQ(RBLN_BO_READ_ONLY, info.flags);
	EXPECT_EQ(1 << 20, info.size);
	/* One object, charged once. */
	EXPECT_EQ(1 << 20, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_bo_close(self->a, h));
	EXPECT_EQ(1 << 20, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_bo_close(self->a2, h2));
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(prime, host_object_to_another_device)
{
	struct rbln_drm_bo_info info;
	uint32_t h, hb;
	uint32_t *p, *q;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->a, 3 * PAGE, RBLN_BO_HOST, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->a, h, PROT_READ | PROT_WRITE, (void **)&p, NULL));
	fill(p, 3 * PAGE, 77);
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, h, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(self->b, fd, &hb));
	close(fd);

	ASSERT_EQ(0, rbln_drm_bo_info(self->b, hb, &info));
	EXPECT_EQ(RBLN_BO_HOST, info.placement);
	EXPECT_EQ(RBLN_BO_IMPORTED, info.flags);
	EXPECT_EQ(3 * PAGE, info.size);
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->b, hb, PROT_READ, (void **)&q, NULL));
	EXPECT_TRUE(check(q, 3 * PAGE, 77));
	munmap(q, 3 * PAGE);
	munmap(p, 3 * PAGE);
}

TEST_F(prime, device_object_to_another_device)
{
	struct rbln_drm_bo_info info;
	uint32_t h, hb;
	void *p;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->a, 2 << 20, RBLN_BO_DEVICE, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, h, &fd));
	/* The CPU cannot map device memory through the dma-buf either. */
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(ENODEV, errno);

	ASSERT_EQ(0, rbln_drm_bo_import(self->b, fd, &hb));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_info(self->b, hb, &info));
	EXPECT_EQ(RBLN_BO_DEVICE, info.placement);
	EXPECT_EQ(RBLN_BO_IMPORTED, info.flags);
	EXPECT_EQ(2 << 20, info.size);
	EXPECT_EQ(0, info.mmap_offset);

	/* A peer: the memory stays device 0's, alive while device 1 holds it. */
	EXPECT_EQ(2 << 20, rbln_test_mem_used(0));
	EXPECT_EQ(0, rbln_test_mem_used(1));
	ASSERT_EQ(0, rbln_drm_bo_close(self->a, h));
	EXPECT_EQ(2 << 20, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_bo_close(self->b, hb));
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

/* Copies @len bytes from @src to @dst in one job on @dev; the job's status. */
static int dma_copy(struct rbln_drm_device *dev, uint64_t dst, uint64_t src, uint64_t len,
		    const uint32_t *bos, uint32_t n)
{
	struct rbln_test_buf cmd;
	struct rbln_drm_cmd c;
	uint32_t queue;
	int ret;

	if (rbln_test_buf_new(dev, PAGE, RBLN_BO_HOST, 0, &cmd))
		return -2000;
	ret = rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue);
	if (!ret) {
		rbln_drm_cmd_init(&c, cmd.cpu, PAGE);
		rbln_drm_cmd_dma_copy(&c, dst, src, len);
		ret = rbln_test_run(dev, queue, &cmd, c.len, bos, n, 10000);
		rbln_drm_queue_destroy(dev, queue);
	}
	rbln_test_buf_free(dev, &cmd);
	return ret;
}

/*
 * Both devices map a shared HOST object for their jobs, the importer's
 * first, and each reads what the other wrote. The importer's mapping
 * skips the CPU sync and the exporter's does not: made in this order, the
 * DMA API's checks (the debug kernel's CONFIG_DMA_API_DEBUG) warned of an
 * overlap, which fails the run, until exporting mapped the object for its
 * own device first.
 */
TEST_F(prime, host_object_mapped_by_its_importer_first)
{
	struct rbln_test_buf shared, ha, hb;
	struct rbln_drm_bo_info info;
	uint32_t imported, bos[2];
	int fd;

	ASSERT_EQ(0, rbln_test_buf_new(self->a, PAGE, RBLN_BO_HOST, 0, &shared));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, PAGE, RBLN_BO_HOST, 0, &ha));
	ASSERT_EQ(0, rbln_test_buf_new(self->b, PAGE, RBLN_BO_HOST, 0, &hb));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, shared.handle, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(self->b, fd, &imported));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_info(self->b, imported, &info));

	fill(hb.cpu, PAGE, 31);
	bos[0] = imported;
	bos[1] = hb.handle;
	EXPECT_EQ(1, dma_copy(self->b, info.va, hb.va, PAGE, bos, 2));
	EXPECT_TRUE(check(shared.cpu, PAGE, 31));
	bos[0] = shared.handle;
	bos[1] = ha.handle;
	EXPECT_EQ(1, dma_copy(self->a, ha.va, shared.va, PAGE, bos, 2));
	EXPECT_TRUE(check(ha.cpu, PAGE, 31));
	fill(shared.cpu, PAGE, 53);
	bos[0] = imported;
	bos[1] = hb.handle;
	EXPECT_EQ(1, dma_copy(self->b, hb.va, info.va, PAGE, bos, 2));
	EXPECT_TRUE(check(hb.cpu, PAGE, 53));

	rbln_drm_bo_close(self->b, imported);
	rbln_test_buf_free(self->a, &shared);
	rbln_test_buf_free(self->a, &ha);
	rbln_test_buf_free(self->b, &hb);
}

/*
 * Device 1's jobs read and write device 0's memory through a peer object,
 * also once device 0's own handle is gone: the memory lives while a peer
 * names it.
 */
TEST_F(prime, peer_object_carries_dma_both_ways)
{
	struct rbln_test_buf ha, hb, mem;
	struct rbln_drm_bo_info info;
	uint32_t peer, bos[2];
	uint64_t len = 1 << 20;

	ASSERT_EQ(0, rbln_test_buf_new(self->a, len, RBLN_BO_HOST, 0, &ha));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, len, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(self->b, len, RBLN_BO_HOST, 0, &hb));
	fill(ha.cpu, len, 5);
	bos[0] = mem.handle;
	bos[1] = ha.handle;
	ASSERT_EQ(1, dma_copy(self->a, mem.va, ha.va, len, bos, 2));

	ASSERT_EQ(0, share(self->a, mem.handle, self->b, &peer, &info));
	bos[0] = peer;
	bos[1] = hb.handle;
	/* Read: device 0's bytes arrive in device 1's host object. */
	ASSERT_EQ(1, dma_copy(self->b, hb.va, info.va, len, bos, 2));
	EXPECT_TRUE(check(hb.cpu, len, 5));

	/* Write, into half of it, and device 0 sees it. */
	fill(hb.cpu, len, 9);
	ASSERT_EQ(1, dma_copy(self->b, info.va + len / 2, hb.va, len / 2, bos, 2));
	memset(ha.cpu, 0, len);
	bos[0] = mem.handle;
	bos[1] = ha.handle;
	ASSERT_EQ(1, dma_copy(self->a, ha.va, mem.va, len, bos, 2));
	EXPECT_TRUE(check(ha.cpu, len / 2, 5));
	EXPECT_TRUE(check((uint32_t *)ha.cpu + len / 8, len / 2, 9));

	/* Device 0's handle gone, the peer still reads the same memory. */
	rbln_test_buf_free(self->a, &mem);
	EXPECT_EQ(len, rbln_test_mem_used(0));
	memset(hb.cpu, 0, len);
	bos[0] = peer;
	bos[1] = hb.handle;
	ASSERT_EQ(1, dma_copy(self->b, hb.va, info.va, len, bos, 2));
	EXPECT_TRUE(check((uint32_t *)hb.cpu + len / 8, len / 2, 9));

	rbln_drm_bo_close(self->b, peer);
	rbln_test_buf_free(self->a, &ha);
	rbln_test_buf_free(self->b, &hb);
}

/*
 * A read-only object of device 0 in @placement, imported into device 1:
 * device 1 reads it and faults writing it, and a HOST object's contents
 * stay what they were.
 */
static void read_only_import(struct __test_metadata *_metadata, FIXTURE_DATA(prime) *self,
			     uint32_t placement)
{
	struct rbln_test_buf ro, hb;
	struct rbln_drm_bo_info info;
	uint32_t imported, bos[2];
	int fd;

	ASSERT_EQ(0, rbln_test_buf_new(self->a, PAGE, placement, RBLN_BO_READ_ONLY, &ro));
	if (ro.cpu)
		fill(ro.cpu, PAGE, 7000);
	ASSERT_EQ(0, rbln_test_buf_new(self->b, PAGE, RBLN_BO_HOST, 0, &hb));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, ro.handle, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(self->b, fd, &imported));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_info(self->b, imported, &info));
	EXPECT_EQ(RBLN_BO_READ_ONLY | RBLN_BO_IMPORTED, info.flags);
	bos[0] = imported;
	bos[1] = hb.handle;
	EXPECT_EQ(1, dma_copy(self->b, hb.va, info.va, PAGE, bos, 2));
	if (ro.cpu)
		EXPECT_EQ(1, check(hb.cpu, PAGE, 7000));
	EXPECT_EQ(-EFAULT, dma_copy(self->b, info.va, hb.va, PAGE, bos, 2));
	if (ro.cpu)
		EXPECT_EQ(1, check(ro.cpu, PAGE, 7000));
	rbln_drm_bo_close(self->b, imported);
	rbln_test_buf_free(self->a, &ro);
	rbln_test_buf_free(self->b, &hb);
}

/*
 * A peer object is an operand of arithmetic as of DMA: device 1 adds, in
 * place, into device 0's memory (written and never written pages), and
 * device 0 reads the sums.
 */
TEST_F(prime, peer_object_is_an_elementwise_operand)
{
	const uint64_t len = 4 * PAGE, n = len / 4;
	struct rbln_test_buf ha, hb, mem, cmd;
	struct rbln_drm_bo_info info;
	uint32_t peer, queue, bos[2];
	struct rbln_drm_cmd c;
	const uint32_t *sum;
	int bad = 0;

	ASSERT_EQ(0, rbln_test_buf_new(self->a, len, RBLN_BO_HOST, 0, &ha));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, 2 * len, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(self->b, len, RBLN_BO_HOST, 0, &hb));
	ASSERT_EQ(0, rbln_test_buf_new(self->b, PAGE, RBLN_BO_HOST, 0, &cmd));
	fill(ha.cpu, len, 5);
	fill(hb.cpu, len, 1000);
	bos[0] = mem.handle;
	bos[1] = ha.handle;
	ASSERT_EQ(1, dma_copy(self->a, mem.va, ha.va, len, bos, 2));

	ASSERT_EQ(0, share(self->a, mem.handle, self->b, &peer, &info));
	ASSERT_EQ(0, rbln_drm_queue_create(self->b, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	rbln_drm_cmd_init(&c, cmd.cpu, PAGE);
	/* Its first half holds 5 + i, its second half was never written. */
	ASSERT_EQ(0, rbln_drm_cmd_binary(&c, RBLN_BINARY_ADD, RBLN_DTYPE_I32, info.va, info.va,
					 hb.va, n));
	ASSERT_EQ(0, rbln_drm_cmd_binary(&c, RBLN_BINARY_ADD, RBLN_DTYPE_I32, info.va + len,
					 info.va + len, hb.va, n));
	bos[0] = peer;
	bos[1] = hb.handle;
	ASSERT_EQ(1, rbln_test_run(self->b, queue, &cmd, c.len, bos, 2, 10000));

	bos[0] = mem.handle;
	bos[1] = ha.handle;
	ASSERT_EQ(1, dma_copy(self->a, ha.va, mem.va, len, bos, 2));
	sum = ha.cpu;
	for (uint64_t i = 0; i < n; i++)
		if (sum[i] != 1005 + 2 * i && bad++ < 3)
			TH_LOG("written half [%llu]: %u", (unsigned long long)i, sum[i]);
	EXPECT_EQ(0, bad);
	ASSERT_EQ(1, dma_copy(self->a, ha.va, mem.va + len, len, bos, 2));
	EXPECT_TRUE(check(ha.cpu, len, 1000));

	rbln_drm_queue_destroy(self->b, queue);
	rbln_drm_bo_close(self->b, peer);
	rbln_test_buf_free(self->b, &cmd);
	rbln_test_buf_free(self->a, &mem);
	rbln_test_buf_free(self->a, &ha);
	rbln_test_buf_free(self->b, &hb);
}

/* A read-only object stays read-only through a peer: writing faults. */
TEST_F(prime, peer_of_read_only_object_faults_on_write)
{
	read_only_import(_metadata, self, RBLN_BO_DEVICE);
}

/*
 * The same for a HOST object: what its device may not write, no device
 * importing it may. The import used to be writable on the other device.
 */
TEST_F(prime, host_import_of_read_only_object_faults_on_write)
{
	read_only_import(_metadata, self, RBLN_BO_HOST);
}

TEST_F(prime, udmabuf_as_host_object)
{
	struct rbln_drm_bo_info info;
	int memfd, dev, buf;
	uint32_t *p, *q;
	uint32_t h;

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		SKIP(return, "no /dev/udmabuf");
	memfd = rbln_test_sealed_memfd(4 * PAGE);
	ASSERT_GE(memfd, 0);
	p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	fill(p, 4 * PAGE, 31337);

	buf = rbln_test_udmabuf(dev, memfd, 4 * PAGE);
	ASSERT_GE(buf, 0);
	ASSERT_EQ(0, rbln_drm_bo_import(self->a, buf, &h));
	close(buf);

	ASSERT_EQ(0, rbln_drm_bo_info(self->a, h, &info));
	EXPECT_EQ(RBLN_BO_HOST, info.placement);
	EXPECT_EQ(RBLN_BO_IMPORTED, info.flags);
	EXPECT_EQ(4 * PAGE, info.size);
	ASSERT_EQ(0, rbln_drm_bo_mmap(self->a, h, PROT_READ, (void **)&q, NULL));
	EXPECT_TRUE(check(q, 4 * PAGE, 31337));
	munmap(q, 4 * PAGE);
	munmap(p, 4 * PAGE);
	close(memfd);
	close(dev);
}

/*
 * An importer's pages come from the exporter's sg table, which the driver
 * does not size: its mapping must end with the object, not with the table.
 * No exporter a user reaches here hands out a longer table; the bound is
 * checked all the same, with the device's own access past the end.
 */
TEST_F(prime, imported_host_object_ends_at_its_size)
{
	struct rbln_drm_bo_info info;
	struct rbln_test_buf out;
	int memfd, dev, buf;
	uint32_t h, bos[2];

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		SKIP(return, "no /dev/udmabuf");
	memfd = rbln_test_sealed_memfd(3 * PAGE);
	ASSERT_GE(memfd, 0);
	buf = rbln_test_udmabuf(dev, memfd, 3 * PAGE);
	ASSERT_GE(buf, 0);
	ASSERT_EQ(0, rbln_drm_bo_import(self->a, buf, &h));
	close(buf);
	ASSERT_EQ(0, rbln_drm_bo_info(self->a, h, &info));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, PAGE, RBLN_BO_HOST, 0, &out));
	bos[0] = h;
	bos[1] = out.handle;
	EXPECT_EQ(1, dma_copy(self->a, out.va, info.va + 3 * PAGE - 64, 64, bos, 2));
	EXPECT_EQ(-EFAULT, dma_copy(self->a, out.va, info.va + 3 * PAGE, 64, bos, 2));
	rbln_test_buf_free(self->a, &out);
	rbln_drm_bo_close(self->a, h);
	close(memfd);
	close(dev);
}

/* A dma-buf of @pages from the tests' exporter whose scatterlist has @shape; or -errno. */
static int test_export(uint32_t pages, uint32_t shape, uint32_t fail_maps)
{
	struct rbln_test_export args = { .pages = pages, .shape = shape, .fail_maps = fail_maps };
	int dev = rbln_test_exporter_open(), ret;

	if (dev < 0)
		return dev;
	ret = ioctl(dev, RBLN_TEST_IOCTL_EXPORT, &args) ? -errno : args.fd;
	close(dev);
	return ret;
}

/*
 * A device maps an importer's pages whole, a page table entry a page: a
 * scatterlist whose segments do not start and end on page boundaries, or
 * that does not cover the object, cannot be mapped as it is. No exporter
 * upstream hands one out, but nothing says one may not, and the tests'
 * exporter does. A job or a VM_BIND using such an object is refused with
 * -EINVAL, rather than have the device reach the bytes around a segment,
 * or find the pages after it out of place. The exporter's well-formed
 * table is read as it is, byte for byte.
 */
TEST_F(prime, import_of_a_misshapen_scatterlist_is_refused)
{
	static const char *const shapes[] = { "pages", "offset", "short", "truncated" };
	struct rbln_drm_bo_info info;
	struct rbln_test_buf out;
	uint32_t shape, h, bos[2], page, i;
	const uint8_t *p;
	int buf, ret, bind;
	uint64_t va;

	ASSERT_EQ(RBLN_TEST_SG_SHAPES, sizeof(shapes) / sizeof(shapes[0]));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, 4 * PAGE, RBLN_BO_HOST, 0, &out));
	for (shape = 0; shape < RBLN_TEST_SG_SHAPES; shape++) {
		buf = test_export(4, shape, 0);
		ASSERT_LE(0, buf) TH_LOG("the tests' exporter: %s", strerror(-buf));
		ASSERT_EQ(0, rbln_drm_bo_import(self->a, buf, &h));
		close(buf);
		ASSERT_EQ(0, rbln_drm_bo_info(self->a, h, &info));
		EXPECT_EQ(4 * PAGE, info.size);
		bos[0] = h;
		bos[1] = out.handle;
		memset(out.cpu, 0, 4 * PAGE);
		ret = dma_copy(self->a, out.va, info.va, 4 * PAGE, bos, 2);
		/* And VM_BIND, which maps an object's pages as a job does. */
		ASSERT_EQ(0, rbln_drm_vm_reserve(self->a, 4 * PAGE, 0, &va));
		bind = rbln_test_vm_map(self->a, va, 4 * PAGE, h, 0, 0);
		if (!bind)
			EXPECT_EQ(0, rbln_test_vm_unmap(self->a, va, 4 * PAGE));
		EXPECT_EQ(0, rbln_drm_vm_release(self->a, va));
		if (shape != RBLN_TEST_SG_PAGES) {
			EXPECT_EQ(-1000 - EINVAL, ret) TH_LOG("shape %s", shapes[shape]);
			EXPECT_EQ(-EINVAL, bind) TH_LOG("shape %s", shapes[shape]);
			rbln_drm_bo_close(self->a, h);
			continue;
		}
		EXPECT_EQ(0, bind);
		EXPECT_EQ(1, ret);
		p = out.cpu;
		for (page = 0; page < 4; page++)
			for (i = 0; i < PAGE; i++)
				ASSERT_EQ((uint8_t)((page + 1) * 16 + i % 16), p[page * PAGE + i])
					TH_LOG("page %u, byte %u", page, i);
		rbln_drm_bo_close(self->a, h);
	}
	rbln_test_buf_free(self->a, &out);
}

/*
 * An exporter may fail to map a buffer it exported (its memory out of
 * reach for a while): the use that maps it fails with the exporter's
 * error, job or VM_BIND, and leaves nothing half done, so that the next
 * use maps it anew and reads it right.
 */
TEST_F(prime, exporter_failing_to_map_fails_the_use_not_the_object)
{
	struct rbln_drm_bo_info info;
	struct rbln_test_buf out;
	uint32_t h, bos[2], i;
	const uint8_t *p;
	uint64_t va;
	int buf;

	ASSERT_EQ(0, rbln_test_buf_new(self->a, 4 * PAGE, RBLN_BO_HOST, 0, &out));
	buf = test_export(4, RBLN_TEST_SG_PAGES, 2);
	ASSERT_LE(0, buf) TH_LOG("the tests' exporter: %s", strerror(-buf));
	ASSERT_EQ(0, rbln_drm_bo_import(self->a, buf, &h));
	close(buf);
	ASSERT_EQ(0, rbln_drm_bo_info(self->a, h, &info));
	bos[0] = h;
	bos[1] = out.handle;
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->a, 4 * PAGE, 0, &va));
	EXPECT_EQ(-1000 - EIO, dma_copy(self->a, out.va, info.va, 4 * PAGE, bos, 2));
	EXPECT_EQ(-EIO, rbln_test_vm_map(self->a, va, 4 * PAGE, h, 0, 0));
	/* The exporter maps it now. */
	EXPECT_EQ(0, rbln_test_vm_map(self->a, va, 4 * PAGE, h, 0, 0));
	EXPECT_EQ(1, dma_copy(self->a, out.va, va, 4 * PAGE, bos, 2));
	p = out.cpu;
	for (i = 0; i < 4 * PAGE; i++)
		ASSERT_EQ((uint8_t)((i / PAGE + 1) * 16 + i % 16), p[i]) TH_LOG("byte %u", i);
	EXPECT_EQ(0, rbln_test_vm_unmap(self->a, va, 4 * PAGE));
	EXPECT_EQ(0, rbln_drm_vm_release(self->a, va));
	rbln_drm_bo_close(self->a, h);
	rbln_test_buf_free(self->a, &out);
}

/*
 * One foreign buffer imported by two files of a device and one of
 * another: each import is an attachment of its own, and all three map
 * the same pages at once. Each reads the buffer byte for byte. Under
 * DMA-API debugging, an exporter that syncs each mapping on its own
 * (maps without DMA_ATTR_SKIP_CPU_SYNC) is reported for the overlap, as
 * the tests' exporter was.
 */
TEST_F(prime, foreign_buffer_mapped_by_three_importers_at_once)
{
	struct rbln_drm_device *devs[3] = { self->a, self->a2, self->b };
	struct rbln_drm_bo_info info;
	struct rbln_test_buf out[3];
	uint32_t h[3], bos[2], i, k;
	const uint8_t *p;
	int buf;

	buf = test_export(4, RBLN_TEST_SG_PAGES, 0);
	ASSERT_LE(0, buf) TH_LOG("the tests' exporter: %s", strerror(-buf));
	for (k = 0; k < 3; k++) {
		ASSERT_EQ(0, rbln_drm_bo_import(devs[k], buf, &h[k]));
		ASSERT_EQ(0, rbln_test_buf_new(devs[k], 4 * PAGE, RBLN_BO_HOST, 0, &out[k]));
	}
	close(buf);
	/* Each job maps its import and keeps it mapped: all three at once by the last. */
	for (k = 0; k < 3; k++) {
		ASSERT_EQ(0, rbln_drm_bo_info(devs[k], h[k], &info));
		bos[0] = h[k];
		bos[1] = out[k].handle;
		EXPECT_EQ(1, dma_copy(devs[k], out[k].va, info.va, 4 * PAGE, bos, 2)) TH_LOG("file %u", k);
		p = out[k].cpu;
		for (i = 0; i < 4 * PAGE; i++)
			ASSERT_EQ((uint8_t)((i / PAGE + 1) * 16 + i % 16), p[i])
				TH_LOG("file %u, byte %u", k, i);
	}
	for (k = 0; k < 3; k++) {
		rbln_test_buf_free(devs[k], &out[k]);
		rbln_drm_bo_close(devs[k], h[k]);
	}
}

/* The tests' exporter refuses what it cannot make: its own rejection paths. */
TEST_F(prime, test_exporter_rejects_bad_input)
{
	struct rbln_test_export args;
	int dev = rbln_test_exporter_open();

	ASSERT_LE(0, dev) TH_LOG("the tests' exporter: %s", strerror(-dev));
	args = (struct rbln_test_export){ .pages = 1 };
	EXPECT_EQ(-1, ioctl(dev, RBLN_TEST_IOCTL_EXPORT, &args));
	EXPECT_EQ(EINVAL, errno);
	args = (struct rbln_test_export){ .pages = 1025 };
	EXPECT_EQ(-1, ioctl(dev, RBLN_TEST_IOCTL_EXPORT, &args));
	EXPECT_EQ(EINVAL, errno);
	args = (struct rbln_test_export){ .pages = 2, .shape = RBLN_TEST_SG_SHAPES };
	EXPECT_EQ(-1, ioctl(dev, RBLN_TEST_IOCTL_EXPORT, &args));
	EXPECT_EQ(EINVAL, errno);
	args = (struct rbln_test_export){ .pages = 2, .fail_maps = RBLN_TEST_MAX_FAIL_MAPS + 1 };
	EXPECT_EQ(-1, ioctl(dev, RBLN_TEST_IOCTL_EXPORT, &args));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(dev, RBLN_TEST_IOCTL_EXPORT, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, ioctl(dev, _IO('r', 0x41), 0));
	EXPECT_EQ(ENOTTY, errno);
	close(dev);
}

TEST_F(prime, dma_heap_as_host_object)
{
	struct dma_heap_allocation_data alloc = {
		.len = 8 * PAGE, .fd_flags = O_RDWR | O_CLOEXEC,
	};
	struct rbln_drm_bo_info info;
	uint32_t h;
	int heap;

	heap = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);
	if (heap < 0)
		SKIP(return, "no system dma-heap");
	ASSERT_EQ(0, ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &alloc));
	ASSERT_EQ(0, rbln_drm_bo_import(self->b, alloc.fd, &h));
	close(alloc.fd);
	close(heap);
	ASSERT_EQ(0, rbln_drm_bo_info(self->b, h, &info));
	EXPECT_EQ(RBLN_BO_HOST, info.placement);
	EXPECT_EQ(RBLN_BO_IMPORTED, info.flags);
	EXPECT_EQ(8 * PAGE, info.size);
	EXPECT_NE(0, info.va);
}

TEST_F(prime, import_rejects_garbage)
{
	uint32_t h;
	int fd;

	EXPECT_EQ(-EBADF, rbln_drm_bo_import(self->a, -1, &h));
	EXPECT_EQ(-EBADF, rbln_drm_bo_import(self->a, 1 << 20, &h));
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-EINVAL, rbln_drm_bo_import(self->a, fd, &h));
	close(fd);
	/* An accel node is not a dma-buf either. */
	EXPECT_EQ(-EINVAL, rbln_drm_bo_import(self->a, rbln_drm_fd(self->b), &h));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_import(self->a, 0, NULL));
}

TEST_F(prime, export_rejects_bad_input)
{
	struct drm_prime_handle args = { 0 };
	uint32_t h;
	int fd;

	EXPECT_EQ(-ENOENT, rbln_drm_bo_export(self->a, 4242, &fd));
	ASSERT_EQ(0, rbln_drm_bo_create(self->a, PAGE, RBLN_BO_HOST, 0, &h, NULL));
	args.handle = h;
	args.flags = 0x1234;
	EXPECT_EQ(-1, ioctl(rbln_drm_fd(self->a), DRM_IOCTL_PRIME_HANDLE_TO_FD, &args));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, rbln_drm_bo_close(self->a, h));
	EXPECT_EQ(-ENOENT, rbln_drm_bo_export(self->a, h, &fd));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_export(self->a, h, NULL));
}

TEST_F(prime, dma_buf_outlives_every_handle)
{
	uint32_t h, h2;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->a, 1 << 20, RBLN_BO_DEVICE, 0, &h, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, h, &fd));
	ASSERT_EQ(0, rbln_drm_bo_close(self->a, h));
	/* Only the dma-buf holds the object now. */
	EXPECT_EQ(1 << 20, rbln_test_mem_used(0));
	ASSERT_EQ(0, rbln_drm_bo_import(self->a2, fd, &h2));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_close(self->a2, h2));
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_HARNESS_MAIN
