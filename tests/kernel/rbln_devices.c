// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_devices - device enumeration and the devices' lifecycle
 *
 * Run with rbln.ko loaded with emu_devices=N and no other device added, or
 * with emu_devices=0 and N PCI NPUs (rbln-vm --pci-devices N).
 * Every test leaves the set of devices as it found it.
 */

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <xf86drm.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

/* Ids far from those emu_devices creates (0..N-1). */
#define ID_A	700
#define ID_B	701

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return (x > y) - (x < y);
}

/* The minors of /dev/accel/accel*, sorted; returns how many. */
static int dev_accel_minors(unsigned int *minors, int max)
{
	struct dirent *de;
	struct stat st;
	char path[300];
	DIR *dir;
	int n = 0;

	dir = opendir("/dev/accel");
	if (!dir)
		return 0;
	while ((de = readdir(dir)) && n < max) {
		if (strncmp(de->d_name, "accel", 5))
			continue;
		snprintf(path, sizeof(path), "/dev/accel/%s", de->d_name);
		if (!stat(path, &st) && S_ISCHR(st.st_mode))
			minors[n++] = minor(st.st_rdev);
	}
	closedir(dir);
	qsort(minors, n, sizeof(*minors), cmp_uint);
	return n;
}

TEST(initial_devices_appear)
{
	unsigned int minors[RBLN_MAX_TEST_DEVICES];
	int expected = rbln_test_initial_devices();
	int n, i;

	ASSERT_GE(expected, 1) TH_LOG("load rbln.ko with emu_devices >= 1");
	n = rbln_drm_enumerate(minors, RBLN_MAX_TEST_DEVICES);
	ASSERT_EQ(expected, n);

	for (i = 0; i < n; i++) {
		ASSERT_EQ((int)minors[i], rbln_test_minor(i))
			TH_LOG("device %d is not accel%u", i, minors[i]);
	}
}

TEST(enumeration_matches_dev_accel)
{
	unsigned int from_lib[RBLN_MAX_TEST_DEVICES], from_dev[RBLN_MAX_TEST_DEVICES];
	int n_lib, n_dev, i;

	n_lib = rbln_drm_enumerate(from_lib, RBLN_MAX_TEST_DEVICES);
	n_dev = dev_accel_minors(from_dev, RBLN_MAX_TEST_DEVICES);
	/* rbln is the only accel driver in the test VM. */
	ASSERT_EQ(n_dev, n_lib);
	for (i = 0; i < n_lib; i++)
		ASSERT_EQ(from_dev[i], from_lib[i]);
}

TEST(enumerate_counts_beyond_max)
{
	unsigned int one = ~0u;
	int expected = rbln_test_initial_devices();

	ASSERT_EQ(expected, rbln_drm_enumerate(NULL, 0));
	ASSERT_EQ(expected, rbln_drm_enumerate(&one, 1));
	ASSERT_EQ((unsigned int)rbln_test_minor(0), one);
	ASSERT_EQ(-EINVAL, rbln_drm_enumerate(NULL, 1));
}

TEST(driver_name_is_rbln)
{
	unsigned int minors[RBLN_MAX_TEST_DEVICES];
	int n, i;

	n = rbln_drm_enumerate(minors, RBLN_MAX_TEST_DEVICES);
	ASSERT_GE(n, 1);
	for (i = 0; i < n; i++) {
		drmVersionPtr v;
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/dev/accel/accel%u", minors[i]);
		fd = open(path, O_RDWR | O_CLOEXEC);
		ASSERT_GE(fd, 0);
		v = drmGetVersion(fd);
		ASSERT_NE(NULL, v);
		EXPECT_STREQ("rbln", v->name);
		EXPECT_EQ(1, v->version_major);
		drmFreeVersion(v);
		close(fd);
	}
}

TEST(open_fd_rejects_other_files)
{
	struct rbln_drm_device *dev = (void *)1;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	ASSERT_GE(fd, 0);
	EXPECT_EQ(-ENODEV, rbln_drm_open_fd(fd, &dev));
	EXPECT_EQ(NULL, dev);
	/* The caller's descriptor is still its own. */
	EXPECT_EQ(0, close(fd));
	EXPECT_EQ(-EBADF, rbln_drm_open_fd(fd, &dev));
	EXPECT_EQ(-ENOENT, rbln_drm_open(4000, &dev));
	EXPECT_EQ(-EINVAL, rbln_drm_open(0, NULL));
}

TEST(mmap_without_objects_fails)
{
	struct rbln_drm_device *dev;
	void *p;

	ASSERT_EQ(0, rbln_drm_open(rbln_test_minor(0), &dev));
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, rbln_drm_fd(dev), 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	rbln_drm_close(dev);
}

TEST(unknown_ioctl_fails)
{
	struct drm_rbln_get_param arg = { 0 };
	struct rbln_drm_device *dev;
	unsigned long nr = DRM_IOWR(DRM_COMMAND_BASE + 0x3f, struct drm_rbln_get_param);

	ASSERT_EQ(0, rbln_drm_open(rbln_test_minor(0), &dev));
	EXPECT_EQ(-1, ioctl(rbln_drm_fd(dev), nr, &arg));
	EXPECT_EQ(EINVAL, errno);
	rbln_drm_close(dev);
}

/*
 * On PCI, a function leaves the bus as a hot-unplug takes it and a rescan
 * brings it back: probed anew, the same device, with a working node.
 */
static void pci_remove_and_rescan(struct __test_metadata *_metadata)
{
	int before = rbln_drm_enumerate(NULL, 0);
	struct rbln_test_victim vic;
	struct rbln_drm_device *dev;
	uint64_t v, mem;
	int minor;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, 0, 0));
	minor = rbln_test_victim_minor(&vic);
	ASSERT_GE(minor, 0);
	ASSERT_EQ(0, rbln_drm_open(minor, &dev));
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
	EXPECT_EQ(rbln_test_victim_index(&vic), v);
	ASSERT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &mem));
	rbln_drm_close(dev);

	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	EXPECT_EQ(-1, rbln_test_victim_minor(&vic));
	EXPECT_EQ(before - 1, rbln_drm_enumerate(NULL, 0));
	EXPECT_EQ(-ENOENT, rbln_drm_open(minor, &dev));

	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
	EXPECT_EQ(before, rbln_drm_enumerate(NULL, 0));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &dev));
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
	EXPECT_EQ(rbln_test_victim_index(&vic), v);
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &v));
	EXPECT_EQ(mem, v);
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_USED, &v));
	EXPECT_EQ(0, v);
	rbln_drm_close(dev);
}

TEST(add_and_remove_at_run_time)
{
	int before = rbln_drm_enumerate(NULL, 0);
	struct rbln_drm_device *dev;
	uint64_t v;
	int minor;

	if (rbln_test_on_pci()) {
		pci_remove_and_rescan(_metadata);
		return;
	}
	ASSERT_EQ(0, rbln_emu_add(ID_A, 64));
	minor = rbln_emu_minor(ID_A);
	ASSERT_GE(minor, 0);
	EXPECT_EQ(before + 1, rbln_drm_enumerate(NULL, 0));

	ASSERT_EQ(0, rbln_drm_open(minor, &dev));
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
	EXPECT_EQ(ID_A, v);
	EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &v));
	EXPECT_EQ(64ull << 20, v);
	EXPECT_EQ((unsigned int)minor, rbln_drm_minor(dev));
	rbln_drm_close(dev);

	ASSERT_EQ(0, rbln_emu_del(ID_A));
	EXPECT_EQ(-1, rbln_emu_minor(ID_A));
	EXPECT_EQ(before, rbln_drm_enumerate(NULL, 0));
	EXPECT_EQ(-ENOENT, rbln_drm_open(minor, &dev));

	/* The id is free again. */
	ASSERT_EQ(0, rbln_emu_add(ID_A, 0));
	ASSERT_EQ(0, rbln_emu_del(ID_A));
}

/* The emulated bus's own files: its argument checking, which PCI has not. */
#define SKIP_ON_PCI(why) do {							\
	if (rbln_test_on_pci())							\
		SKIP(return, "the initial devices are PCI functions: %s", why);	\
} while (0)

TEST(new_device_rejects_bad_input)
{
	char line[64];

	SKIP_ON_PCI("new_device is the emulated bus's, whose id 0 is not taken");
	EXPECT_EQ(-EEXIST, rbln_emu_add(0, 0));
	EXPECT_EQ(-EINVAL, rbln_emu_add(1024, 0));	/* id above the maximum */
	EXPECT_EQ(-EINVAL, rbln_emu_add(ID_A, 3));	/* memory below 4 MiB */
	EXPECT_EQ(-EINVAL, rbln_emu_add(ID_A, 65537));	/* memory above 64 GiB */
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/new_device", "abc"));
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/new_device", "\n"));
	snprintf(line, sizeof(line), "%u 64 1", ID_A);
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/new_device", line));
	snprintf(line, sizeof(line), "%u 64x", ID_A);
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/new_device", line));
	/* Nothing was created by any of these. */
	EXPECT_EQ(-1, rbln_emu_minor(ID_A));
	EXPECT_EQ(rbln_test_initial_devices(), rbln_drm_enumerate(NULL, 0));
}

TEST(del_device_rejects_bad_input)
{
	SKIP_ON_PCI("del_device is the emulated bus's");
	EXPECT_EQ(-ENOENT, rbln_emu_del(ID_B));
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/del_device", "zero"));
	EXPECT_EQ(-EINVAL, rbln_sysfs_write(RBLN_EMU_BUS "/del_device", "1 2"));
	EXPECT_EQ(rbln_test_initial_devices(), rbln_drm_enumerate(NULL, 0));
}

/* Removal: a fresh emulated device, or on PCI the last function (rbln_test.h). */
TEST(remove_with_open_file)
{
	struct rbln_test_victim vic;
	struct rbln_drm_device *dev;
	uint64_t v = 0;
	void *p;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, ID_B, 16));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &dev));
	ASSERT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
	ASSERT_EQ(rbln_test_victim_index(&vic), v);

	ASSERT_EQ(0, rbln_test_victim_remove(&vic));

	/* The file stays open; everything on it now fails with ENODEV. */
	v = 42;
	EXPECT_EQ(-ENODEV, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
	EXPECT_EQ(42, v);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, rbln_drm_fd(dev), 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(-1, rbln_test_victim_minor(&vic));
	rbln_drm_close(dev);

	/* Others are untouched. */
	if (rbln_test_victim_index(&vic) != 0) {
		ASSERT_EQ(0, rbln_drm_open(rbln_test_minor(0), &dev));
		EXPECT_EQ(0, rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_INDEX, &v));
		EXPECT_EQ(0, v);
		rbln_drm_close(dev);
	}
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

/* 1 when the @bytes at @p all hold @pattern. */
static int holds(const void *p, size_t bytes, uint32_t pattern)
{
	const uint32_t *w = p;
	size_t i;

	for (i = 0; i < bytes / 4; i++)
		if (w[i] != pattern)
			return 0;
	return 1;
}

/*
 * Removal while the victim has every kind of DMA mapping: HOST objects
 * mapped by a job and by VM_BIND, a foreign buffer imported (udmabuf), a
 * peer import, jobs in flight and a bind waiting behind them. The mappings
 * go with the removal, while the driver still owns the bus device; what
 * stays open winds down after it: the waiting bind runs on a context whose
 * tables are gone, handles close, the CPU mapping still reads what the
 * device wrote. On the debug kernel, DMA-API debugging reports a mapping
 * left at the unbind as a splat, and KASAN a table used after it was freed.
 */
TEST(remove_with_every_kind_of_mapping)
{
	struct rbln_test_buf cmd, slow, a, b, peer;
	struct drm_rbln_sync done = { 0 }, bound = { 0 };
	struct rbln_drm_device *dev, *other;
	uint32_t queue, bos[5], h_peer, h_udma = 0, n = 0;
	struct rbln_drm_bo_info info;
	struct rbln_test_victim vic;
	int added, udma, memfd = -1, fd, bound_fd, i;
	long long host;
	struct rbln_drm_cmd c;
	uint64_t va;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, ID_B, 16));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &dev));
	ASSERT_EQ(0, rbln_test_bystander_open(&vic, ID_A, &other, &added));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &slow));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4 << 20, RBLN_BO_HOST, 0, &a));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 2 << 20, RBLN_BO_HOST, 0, &b));
	/* B at an address of the file's choosing, with room for a second bind. */
	ASSERT_EQ(0, rbln_drm_vm_reserve(dev, 4 << 20, 0, &va));
	ASSERT_EQ(0, rbln_drm_vm_map(dev, va, 2 << 20, b.handle, 0, 0, NULL, 0, NULL));
	/* The bystander's device memory, through the victim's peer table. */
	ASSERT_EQ(0, rbln_test_buf_new(other, 1 << 20, RBLN_BO_DEVICE, 0, &peer));
	ASSERT_EQ(0, rbln_drm_bo_export(other, peer.handle, &fd));
	ASSERT_EQ(0, rbln_drm_bo_import(dev, fd, &h_peer));
	close(fd);

	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, a.va, 0xa11ce, a.size));
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, va, 0xb0b, b.size));
	ASSERT_EQ(0, rbln_drm_bo_info(dev, h_peer, &info));
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, info.va, 0xbee, 1 << 20));
	bos[n++] = a.handle;
	bos[n++] = b.handle;
	bos[n++] = h_peer;
	udma = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (udma >= 0) {
		memfd = rbln_test_sealed_memfd(1 << 20);
		ASSERT_LE(0, memfd);
		fd = rbln_test_udmabuf(udma, memfd, 1 << 20);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, rbln_drm_bo_import(dev, fd, &h_udma));
		close(fd);
		ASSERT_EQ(0, rbln_drm_bo_info(dev, h_udma, &info));
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, info.va, 0xf00, 1 << 20));
		bos[n++] = h_udma;
	} else {
		TH_LOG("no /dev/udmabuf: no foreign import");
	}
	/* One job uses them all: each is mapped for the device now. */
	ASSERT_EQ(1, rbln_test_run(dev, queue, &cmd, c.len, bos, n, 20000));
	EXPECT_TRUE(holds(b.cpu, b.size, 0xb0b));

	/* Jobs that keep the device busy, and a bind that waits for the last. */
	rbln_drm_cmd_init(&c, slow.cpu, slow.size);
	for (i = 0; i < 16; i++)
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, a.va, i, a.size));
	bos[0] = a.handle;
	bos[1] = slow.handle;
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &done.handle));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(dev), 0, &bound.handle));
	for (i = 0; i < 8; i++)
		ASSERT_EQ(0, rbln_drm_submit(dev, queue, slow.va, c.len, bos, 2, NULL, 0,
					     i == 7 ? &done : NULL));
	ASSERT_EQ(0, rbln_drm_vm_map(dev, va + (2 << 20), 2 << 20, b.handle, 0, 0, &done, 1,
				     &bound));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(dev), bound.handle, &bound_fd));
	/* B's handle goes: its mappings hold it, and fdinfo still counts it. */
	host = rbln_test_fdinfo_mem(rbln_drm_fd(dev), "total", "host");
	EXPECT_LE(6 << 20, host);
	ASSERT_EQ(0, rbln_drm_bo_close(dev, b.handle));
	EXPECT_EQ(host, rbln_test_fdinfo_mem(rbln_drm_fd(dev), "total", "host"));

	ASSERT_EQ(0, rbln_test_victim_remove(&vic));

	/* The bind runs once the jobs it waits for are failed: it maps nothing. */
	EXPECT_NE(0, sync_file_wait_status(bound_fd, rbln_test_ms(20000)))
		TH_LOG("the bind waiting at the removal never ended");
	close(bound_fd);
	EXPECT_EQ(-ENODEV, rbln_drm_submit(dev, queue, cmd.va, 64, bos, 2, NULL, 0, NULL));
	EXPECT_EQ(-ENODEV, rbln_drm_vm_map(dev, va + (2 << 20), 2 << 20, b.handle, 0, 0,
					   NULL, 0, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(other, peer.handle, &fd));
	EXPECT_EQ(-ENODEV, rbln_drm_bo_import(dev, fd, &h_peer));
	close(fd);
	/* The pages are the process's still, as the device left them. */
	EXPECT_TRUE(holds(b.cpu, b.size, 0xb0b));

	/* Handles, CPU mappings and the file go after their device. */
	munmap(a.cpu, a.size);
	munmap(b.cpu, b.size);
	munmap(cmd.cpu, cmd.size);
	munmap(slow.cpu, slow.size);
	rbln_drm_close(dev);
	if (memfd >= 0)
		close(memfd);
	if (udma >= 0)
		close(udma);

	/* The exporter of the peer import is untouched. */
	EXPECT_EQ(0, rbln_test_buf_new(other, 4096, RBLN_BO_HOST, 0, &a));
	rbln_test_buf_free(other, &a);
	rbln_test_buf_free(other, &peer);
	rbln_drm_close(other);
	if (added)
		EXPECT_EQ(0, rbln_emu_del(ID_A));
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

struct hammer {
	struct rbln_drm_device *dev;
	atomic_long ok, gone, other;
};

/* Calls GET_PARAM until the first failure, which must be ENODEV. */
static void *hammer_get_param(void *arg)
{
	struct hammer *h = arg;
	uint64_t v;
	int ret;

	while (!(ret = rbln_drm_get_param(h->dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &v)))
		atomic_fetch_add(&h->ok, 1);
	atomic_fetch_add(ret == -ENODEV ? &h->gone : &h->other, 1);
	return NULL;
}

TEST(remove_during_ioctls)
{
	struct rbln_test_victim vic;
	struct hammer h = { 0 };
	pthread_t threads[4];
	unsigned int i;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, ID_B, 16));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &h.dev));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&threads[i], NULL, hammer_get_param, &h));

	/* Let every thread get some calls through before the device goes. */
	while (atomic_load(&h.ok) < 1000)
		sched_yield();
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	for (i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);

	EXPECT_EQ(4, atomic_load(&h.gone));
	EXPECT_EQ(0, atomic_load(&h.other));
	rbln_drm_close(h.dev);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

/*
 * A device that comes back under the name of a removed one shows nothing
 * of the old one's memory. On PCI it is the same function, whose memory
 * keeps its contents across a function reset; what the old instance held
 * is freed only after the removal, when the device can no longer be told
 * to scrub it.
 */
TEST(readded_device_shows_none_of_the_old_memory)
{
	const uint64_t size = 4 << 20;
	struct rbln_test_buf cmd, mem, out;
	struct rbln_test_victim vic;
	struct rbln_drm_device *dev;
	struct rbln_drm_cmd c;
	uint32_t queue, bos[2];
	const uint32_t *w;
	uint64_t i;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, ID_B, 16));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, size, RBLN_BO_DEVICE, 0, &mem));
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 0x5ec12e7, size));
	bos[0] = mem.handle;
	ASSERT_EQ(1, rbln_test_run(dev, queue, &cmd, c.len, bos, 1, 10000));

	/* Removed with the object alive, which goes with the file, after. */
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	munmap(cmd.cpu, cmd.size);
	rbln_drm_close(dev);

	/* The new instance's first object is where the old one's was. */
	ASSERT_EQ(0, rbln_test_victim_readd(&vic));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &dev));
	ASSERT_EQ(0, rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, rbln_test_buf_new(dev, size, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd));
	ASSERT_EQ(0, rbln_test_buf_new(dev, size, RBLN_BO_HOST, 0, &out));
	memset(out.cpu, 0xff, size);
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, mem.va, size));
	bos[0] = mem.handle;
	bos[1] = out.handle;
	ASSERT_EQ(1, rbln_test_run(dev, queue, &cmd, c.len, bos, 2, 10000));
	for (w = out.cpu, i = 0; i < size / 4 && !w[i]; i++)
		;
	EXPECT_EQ(size / 4, i) TH_LOG("word %llu of a new object reads %#x",
				      (unsigned long long)i, w[i]);
	rbln_test_buf_free(dev, &out);
	rbln_test_buf_free(dev, &cmd);
	rbln_test_buf_free(dev, &mem);
	rbln_drm_close(dev);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

TEST_HARNESS_MAIN
