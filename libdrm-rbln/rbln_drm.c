// SPDX-License-Identifier: MIT
/*
 * rbln_drm.c - enumeration, open and close of rbln accel nodes, GET_PARAM
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <xf86drm.h>

#include "rbln_drm.h"

#define ACCEL_CLASS	"/sys/class/accel"
#define ACCEL_MAJOR	261

struct rbln_drm_device {
	int fd;
	unsigned int minor;
};

/* True when /sys/class/accel/accel<minor> is bound to the rbln driver. */
static int is_rbln_minor(unsigned int minor)
{
	char path[PATH_MAX], target[PATH_MAX];
	const char *name;
	ssize_t len;

	snprintf(path, sizeof(path), ACCEL_CLASS "/accel%u/device/driver", minor);
	len = readlink(path, target, sizeof(target) - 1);
	if (len < 0)
		return 0;
	target[len] = '\0';
	name = strrchr(target, '/');
	name = name ? name + 1 : target;
	return strcmp(name, "rbln") == 0;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return (x > y) - (x < y);
}

int rbln_drm_enumerate(unsigned int *minors, unsigned int max)
{
	unsigned int *found = NULL, nfound = 0, cap = 0, minor, i;
	struct dirent *de;
	DIR *dir;
	char tail;

	if (!minors && max)
		return -EINVAL;

	dir = opendir(ACCEL_CLASS);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;

	while ((de = readdir(dir))) {
		if (sscanf(de->d_name, "accel%u%c", &minor, &tail) != 1 ||
		    !is_rbln_minor(minor))
			continue;
		if (nfound == cap) {
			unsigned int *grown;

			cap = cap ? 2 * cap : 16;
			grown = realloc(found, cap * sizeof(*found));
			if (!grown) {
				free(found);
				closedir(dir);
				return -ENOMEM;
			}
			found = grown;
		}
		found[nfound++] = minor;
	}
	closedir(dir);

	qsort(found, nfound, sizeof(*found), cmp_uint);
	for (i = 0; i < nfound && i < max; i++)
		minors[i] = found[i];
	free(found);
	return (int)nfound;
}

static int is_rbln_fd(int fd)
{
	drmVersionPtr version = drmGetVersion(fd);
	int ok;

	if (!version)
		return 0;
	ok = version->name && strcmp(version->name, "rbln") == 0;
	drmFreeVersion(version);
	return ok;
}

/* Takes ownership of @fd: closes it on failure. */
static int wrap_fd(int fd, struct rbln_drm_device **dev)
{
	struct rbln_drm_device *d;
	struct stat st;
	int ret;

	if (fstat(fd, &st)) {
		ret = -errno;
		goto err;
	}
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != ACCEL_MAJOR ||
	    !is_rbln_fd(fd)) {
		ret = -ENODEV;
		goto err;
	}

	d = calloc(1, sizeof(*d));
	if (!d) {
		ret = -ENOMEM;
		goto err;
	}
	d->fd = fd;
	d->minor = minor(st.st_rdev);
	*dev = d;
	return 0;

err:
	close(fd);
	return ret;
}

int rbln_drm_open(unsigned int minor, struct rbln_drm_device **dev)
{
	char path[64];
	int fd;

	if (!dev)
		return -EINVAL;
	*dev = NULL;

	snprintf(path, sizeof(path), "/dev/accel/accel%u", minor);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return wrap_fd(fd, dev);
}

int rbln_drm_open_fd(int fd, struct rbln_drm_device **dev)
{
	int copy;

	if (!dev)
		return -EINVAL;
	*dev = NULL;

	copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0)
		return -errno;
	return wrap_fd(copy, dev);
}

void rbln_drm_close(struct rbln_drm_device *dev)
{
	if (!dev)
		return;
	close(dev->fd);
	free(dev);
}

int rbln_drm_fd(const struct rbln_drm_device *dev)
{
	return dev->fd;
}

unsigned int rbln_drm_minor(const struct rbln_drm_device *dev)
{
	return dev->minor;
}

int rbln_drm_get_param(struct rbln_drm_device *dev, uint32_t param,
		       uint64_t *value)
{
	struct drm_rbln_get_param args = { .param = param };

	if (!dev || !value)
		return -EINVAL;
	if (drmIoctl(dev->fd, DRM_IOCTL_RBLN_GET_PARAM, &args))
		return -errno;
	*value = args.value;
	return 0;
}
