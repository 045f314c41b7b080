/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_test.h - helpers shared by the driver's kselftests
 *
 * The tests run in the rbln-vm guest with rbln.ko loaded, as root.
 */
#ifndef RBLN_TEST_H
#define RBLN_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/sync_file.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#include <rbln_drm.h>
#include <xf86drm.h>

/*
 * @ms of the plain kernel's time on this one: slow kernels (the debug
 * kernel under TCG) set RBLN_TEST_TIMEOUT_SCALE, which rbln-vm also
 * applies to the module's job_timeout_ms.
 */
static inline int64_t rbln_test_ms(int64_t ms)
{
	const char *s = getenv("RBLN_TEST_TIMEOUT_SCALE");
	long scale = s ? atol(s) : 1;

	return scale > 1 ? ms * scale : ms;
}

/* An absolute CLOCK_MONOTONIC deadline @ms (scaled) from now, for drmSyncobjWait. */
static inline int64_t rbln_test_deadline_ns(int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + rbln_test_ms(ms) * 1000000;
}

#define RBLN_EMU_BUS		"/sys/bus/rbln_emu"
#define RBLN_MODULE_PARAMS	"/sys/module/rbln/parameters"
#define RBLN_MAX_TEST_DEVICES	64

/* Writes @value to the sysfs file @path: 0 or -errno. */
static inline int rbln_sysfs_write(const char *path, const char *value)
{
	ssize_t len = strlen(value), n;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, value, len);
	if (n < 0)
		err = -errno;
	else if (n != len)
		err = -EIO;
	close(fd);
	return err;
}

/* Reads an unsigned number from the sysfs file @path, or -1. */
static inline long long rbln_sysfs_read_ull(const char *path)
{
	unsigned long long v;
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%llu", &v);
	fclose(f);
	return n == 1 ? (long long)v : -1;
}

/* new_device with "@id [@mem_mib]" (@mem_mib 0: the default): 0 or -errno. */
static inline int rbln_emu_add(unsigned int id, unsigned int mem_mib)
{
	char buf[64];

	if (mem_mib)
		snprintf(buf, sizeof(buf), "%u %u", id, mem_mib);
	else
		snprintf(buf, sizeof(buf), "%u", id);
	return rbln_sysfs_write(RBLN_EMU_BUS "/new_device", buf);
}

static inline int rbln_emu_del(unsigned int id)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%u", id);
	return rbln_sysfs_write(RBLN_EMU_BUS "/del_device", buf);
}

/*
 * The accel minor of the emulated device @id, found through sysfs, or -1.
 * Device creation is synchronous: no waiting is needed after rbln_emu_add().
 */
static inline int rbln_emu_minor(unsigned int id)
{
	unsigned int minor;
	struct dirent *de;
	char path[128];
	int found = -1;
	DIR *dir;

	snprintf(path, sizeof(path), RBLN_EMU_BUS "/devices/rbln_emu%u/accel", id);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)))
		if (sscanf(de->d_name, "accel%u", &minor) == 1)
			found = (int)minor;
	closedir(dir);
	return found;
}

/* Number of emulated devices the module was loaded with. */
static inline int rbln_emu_initial_devices(void)
{
	return (int)rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/emu_devices");
}

/* An attribute of emulated device @id under its device directory, or -1. */
static inline long long rbln_emu_attr(unsigned int id, const char *attr)
{
	char path[160];

	snprintf(path, sizeof(path), RBLN_EMU_BUS "/devices/rbln_emu%u/%s", id, attr);
	return rbln_sysfs_read_ull(path);
}

/* Device memory in use on emulated device @id, from sysfs. */
static inline long long rbln_emu_mem_used(unsigned int id)
{
	return rbln_emu_attr(id, "memory_used");
}

/* Opens emulated device @id: 0 or -errno. */
static inline int rbln_emu_open(unsigned int id, struct rbln_drm_device **dev)
{
	int minor = rbln_emu_minor(id);

	return minor < 0 ? -ENODEV : rbln_drm_open(minor, dev);
}

/* A buffer object with its address and, for HOST objects, its mapping. */
struct rbln_test_buf {
	uint32_t handle;
	uint64_t va;
	uint64_t size;
	void *cpu;
};

static inline int rbln_test_buf_new(struct rbln_drm_device *dev, uint64_t size,
				    uint32_t placement, uint32_t flags,
				    struct rbln_test_buf *b)
{
	int ret;

	memset(b, 0, sizeof(*b));
	ret = rbln_drm_bo_create(dev, size, placement, flags, &b->handle, &b->va);
	if (ret || placement != RBLN_BO_HOST)
		return ret;
	return rbln_drm_bo_mmap(dev, b->handle, PROT_READ | PROT_WRITE, &b->cpu, &b->size);
}

static inline void rbln_test_buf_free(struct rbln_drm_device *dev, struct rbln_test_buf *b)
{
	struct rbln_drm_bo_info info;

	if (b->cpu && !rbln_drm_bo_info(dev, b->handle, &info))
		munmap(b->cpu, info.size);
	rbln_drm_bo_close(dev, b->handle);
	memset(b, 0, sizeof(*b));
}

/*
 * Submits the @cmd_len bytes already encoded in @cmd (a HOST buffer) on
 * @queue with the @n objects of @bos plus @cmd itself, waits up to
 * @timeout_ms and returns rbln_drm_fence_status()'s status: 1 for success,
 * the job's -errno, or 0 if it did not finish in time. A submission error
 * is returned as is, below -1000 so it cannot be mistaken: -1000 - errno.
 */
static inline int rbln_test_run(struct rbln_drm_device *dev, uint32_t queue,
				struct rbln_test_buf *cmd, uint32_t cmd_len,
				const uint32_t *bos, uint32_t n, int timeout_ms)
{
	struct drm_rbln_sync signal = { 0 };
	uint32_t all[64];
	int ret, status = 0;
	uint32_t i;

	if (n >= 64)
		return -1000 - E2BIG;
	for (i = 0; i < n; i++)
		all[i] = bos[i];
	all[n] = cmd->handle;
	if (drmSyncobjCreate(rbln_drm_fd(dev), 0, &signal.handle))
		return -1000 - errno;
	ret = rbln_drm_submit(dev, queue, cmd->va, cmd_len, all, n + 1, NULL, 0, &signal);
	if (ret) {
		drmSyncobjDestroy(rbln_drm_fd(dev), signal.handle);
		return -1000 + ret;
	}
	drmSyncobjWait(rbln_drm_fd(dev), &signal.handle, 1,
		       rbln_test_deadline_ns(timeout_ms), 0, NULL);
	ret = rbln_drm_fence_status(dev, signal.handle, 0, &status);
	drmSyncobjDestroy(rbln_drm_fd(dev), signal.handle);
	return ret ? -1000 + ret : status;
}

/* The status of a sync_file once it signals within @ms: see sync_file.h. */
static inline int sync_file_wait_status(int fd, int ms)
{
	struct sync_file_info info = { 0 };
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return 0;
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -1000 - errno;
	return info.status;
}

#endif /* RBLN_TEST_H */
