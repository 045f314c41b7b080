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

#include <rbln_drm.h>

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

#endif /* RBLN_TEST_H */
