// SPDX-License-Identifier: GPL-2.0-only
/*
 * devices.c - rbln devices and the driver, from sysfs
 *
 * A device is an /sys/class/accel/accelN whose parent device is bound to
 * the rbln driver; its attributes are in that parent device's directory.
 * Devices are numbered in increasing accel minor order, the order of
 * rbln_drm_enumerate().
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "smi.h"

const char *smi_sysfs = "/sys";

/*
 * Reads the small text file @path into @buf, without its trailing newline.
 * Returns 0 or -errno (-EOVERFLOW when it does not fit).
 */
int smi_read_string(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do {
		n = read(fd, buf, size);
	} while (n < 0 && errno == EINTR);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	if ((size_t)n >= size)
		return -EOVERFLOW;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* Reads a decimal unsigned number from @path: 0, -errno or -EINVAL. */
int smi_read_u64(const char *path, uint64_t *value)
{
	unsigned long long v;
	char buf[32], *end;
	int ret;

	ret = smi_read_string(path, buf, sizeof(buf));
	if (ret)
		return ret;
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*value = v;
	return 0;
}

/* snprintf() into @buf, or -ENAMETOOLONG when it does not fit. */
static int pathf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pathf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The last component of the symbolic link @path, into @buf. */
static int read_link_name(const char *path, char *buf, size_t size)
{
	char target[PATH_MAX];
	const char *base;
	ssize_t n;

	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strlen(base) >= size)
		return -EOVERFLOW;
	strcpy(buf, base);
	return 0;
}

/* Is /sys/class/accel/@name an rbln device? 1, 0, or -errno. */
static int is_rbln(const char *name)
{
	char path[PATH_MAX], driver[64];
	int ret;

	ret = pathf(path, sizeof(path), "%s/" SMI_SYSFS_ACCEL "/%s/device/driver", smi_sysfs,
		    name);
	if (!ret)
		ret = read_link_name(path, driver, sizeof(driver));
	if (ret == -ENOENT || ret == -EOVERFLOW || ret == -ENAMETOOLONG)
		return 0;	/* unbound, gone, or another driver */
	if (ret)
		return ret;
	return strcmp(driver, SMI_DRIVER) == 0;
}

/* One attribute of the device's parent: SMI_UNKNOWN when unreadable. */
static uint64_t read_attr(const char *dir, const char *attr, bool *failed)
{
	char path[PATH_MAX];
	uint64_t v;

	if (pathf(path, sizeof(path), "%s/device/%s", dir, attr) ||
	    smi_read_u64(path, &v)) {
		*failed = true;
		return SMI_UNKNOWN;
	}
	return v;
}

/*
 * Fills @d from sysfs. Returns 0, -ENOENT when the device went away while
 * it was being read (it is then left out), or -errno.
 */
static int read_device(const char *name, unsigned int minor, struct smi_device *d)
{
	char dir[PATH_MAX], path[PATH_MAX], buf[32];
	unsigned int major, mnr;
	bool failed = false, optional = false;
	uint64_t emulated;
	int ret;

	memset(d, 0, sizeof(*d));
	d->minor = minor;
	d->utilization = -1;
	if (pathf(d->node, sizeof(d->node), "/dev/accel/%s", name) ||
	    pathf(dir, sizeof(dir), "%s/" SMI_SYSFS_ACCEL "/%s", smi_sysfs, name))
		return -ENAMETOOLONG;

	ret = pathf(path, sizeof(path), "%s/dev", dir);
	if (!ret)
		ret = smi_read_string(path, buf, sizeof(buf));
	if (ret)
		return ret;
	if (sscanf(buf, "%u:%u", &major, &mnr) != 2)
		return -EINVAL;
	d->rdev = makedev(major, mnr);

	ret = pathf(path, sizeof(path), "%s/device", dir);
	if (!ret)
		ret = read_link_name(path, d->bus_id, sizeof(d->bus_id));
	if (ret)
		return ret;
	if (pathf(path, sizeof(path), "%s/device/subsystem", dir) ||
	    read_link_name(path, d->subsystem, sizeof(d->subsystem)))
		strcpy(d->subsystem, "unknown");

	d->mem_total = read_attr(dir, "memory_total", &failed);
	d->mem_used = read_attr(dir, "memory_used", &failed);
	d->busy_ns = read_attr(dir, "busy_ns", &failed);
	d->num_rings = read_attr(dir, "num_rings", &failed);
	d->reset_count = read_attr(dir, "reset_count", &failed);
	emulated = read_attr(dir, "emulated", &failed);
	d->emulated = emulated == 1;
	/* Newer than the rest: a driver without them is not unhealthy. */
	d->contexts_total = read_attr(dir, "contexts_total", &optional);
	d->contexts_used = read_attr(dir, "contexts_used", &optional);
	d->context_steals = read_attr(dir, "context_steals", &optional);
	if (failed && access(dir, F_OK) && errno == ENOENT)
		return -ENOENT;
	d->health = failed ? SMI_HEALTH_UNKNOWN : SMI_HEALTH_OK;
	return 0;
}

static int cmp_minor(const void *a, const void *b)
{
	const struct smi_device *x = a, *y = b;

	return (x->minor > y->minor) - (x->minor < y->minor);
}

/* Adds every rbln device to @snap, in minor order. 0 or -errno. */
int smi_read_devices(struct smi_snapshot *snap)
{
	struct smi_device *devs = NULL, *grown;
	size_t n = 0, cap = 0, i;
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	if (pathf(path, sizeof(path), "%s/" SMI_SYSFS_ACCEL, smi_sysfs))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;	/* no accel class: no device */

	while ((errno = 0, de = readdir(dir))) {
		unsigned int minor;
		char tail;

		if (sscanf(de->d_name, "accel%u%c", &minor, &tail) != 1)
			continue;
		ret = is_rbln(de->d_name);
		if (ret <= 0) {
			if (ret < 0)
				break;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			grown = realloc(devs, cap * sizeof(*devs));
			if (!grown) {
				ret = -ENOMEM;
				break;
			}
			devs = grown;
		}
		ret = read_device(de->d_name, minor, &devs[n]);
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (ret)
			break;
		n++;
	}
	if (!ret && errno)
		ret = -errno;
	closedir(dir);
	if (ret) {
		free(devs);
		return ret;
	}

	qsort(devs, n, sizeof(*devs), cmp_minor);
	for (i = 0; i < n; i++)
		devs[i].index = (unsigned int)i;
	snap->devices = devs;
	snap->ndevices = n;
	return 0;
}

/*
 * Utilization and health of @cur's devices over the interval since @prev
 * (NULL: no earlier sample). A device is the same one in both samples when
 * its minor and its parent device are.
 */
void smi_derive(struct smi_snapshot *cur, const struct smi_snapshot *prev)
{
	int64_t interval;
	size_t i, j;

	if (!prev)
		return;
	interval = (cur->mono.tv_sec - prev->mono.tv_sec) * INT64_C(1000000000) +
		   (cur->mono.tv_nsec - prev->mono.tv_nsec);
	if (interval <= 0)
		return;

	for (i = 0; i < cur->ndevices; i++) {
		struct smi_device *d = &cur->devices[i];
		const struct smi_device *p = NULL;

		for (j = 0; j < prev->ndevices; j++) {
			if (prev->devices[j].minor == d->minor &&
			    !strcmp(prev->devices[j].bus_id, d->bus_id)) {
				p = &prev->devices[j];
				break;
			}
		}
		if (!p)
			continue;
		d->interval_ns = (uint64_t)interval;
		if (d->busy_ns != SMI_UNKNOWN && p->busy_ns != SMI_UNKNOWN &&
		    d->num_rings != SMI_UNKNOWN && d->num_rings &&
		    d->busy_ns >= p->busy_ns) {
			double u = (double)(d->busy_ns - p->busy_ns) * 100.0 /
				   ((double)interval * (double)d->num_rings);

			d->utilization = u > 100.0 ? 100.0 : u;
		}
		if (d->health == SMI_HEALTH_OK && p->reset_count != SMI_UNKNOWN &&
		    d->reset_count > p->reset_count)
			d->health = SMI_HEALTH_RESET;
	}
}

const char *smi_health_name(enum smi_health h)
{
	switch (h) {
	case SMI_HEALTH_OK:
		return "ok";
	case SMI_HEALTH_RESET:
		return "reset";
	default:
		return "unknown";
	}
}

const char *smi_device_name(const struct smi_device *d)
{
	return d->emulated ? "RBLN-EMU" : "RBLN-NPU";
}

/*
 * JSON's "bus" (schema_version 1): "emulated" for an NPU emulated inside
 * the driver, on its rbln_emu bus; otherwise the bus address, which is the
 * bus id. A PCI function served by a device model is emulated too, but it
 * has a PCI address.
 */
const char *smi_device_bus(const struct smi_device *d)
{
	return strcmp(d->subsystem, "rbln_emu") ? d->bus_id : "emulated";
}

/*
 * Does @id name the PCI address @bus_id? Hex digits in either case, and
 * the domain may be left out when it is 0000, as lspci -s takes it.
 */
static bool pci_address_is(const char *id, const char *bus_id)
{
	if (!strcasecmp(id, bus_id))
		return true;
	return !strncmp(bus_id, "0000:", 5) && !strcasecmp(id, bus_id + 5);
}

/*
 * The index of the device @id names in @s, or -1: an index, an accel
 * node (accel0 or /dev/accel/accel0) or a bus id (rbln_emu0, a PCI
 * address).
 */
int smi_resolve(const struct smi_snapshot *s, const char *id)
{
	unsigned long index;
	const char *name;
	char *end;
	size_t i;

	errno = 0;
	index = strtoul(id, &end, 10);
	if (*id >= '0' && *id <= '9' && !*end && !errno)
		return index < s->ndevices ? (int)index : -1;

	name = strncmp(id, "/dev/accel/", 11) ? id : id + 11;
	for (i = 0; i < s->ndevices; i++) {
		const struct smi_device *d = &s->devices[i];

		if (!strcmp(name, d->node + 11) || !strcmp(id, d->bus_id) ||
		    (!strcmp(d->subsystem, "pci") && pci_address_is(id, d->bus_id)))
			return (int)i;
	}
	return -1;
}

/*
 * Calls @fn for each parameter of the loaded module, in name order; stops
 * at the first non-zero return, which it returns. No module: 0.
 */
int smi_for_each_param(int (*fn)(const char *name, const char *value, void *arg),
		       void *arg)
{
	struct dirent **names;
	char path[PATH_MAX], value[256];
	int n, i, ret = 0;

	if (pathf(path, sizeof(path), "%s/" SMI_SYSFS_MODULE "/parameters", smi_sysfs))
		return -ENAMETOOLONG;
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0)
		return errno == ENOENT ? 0 : -errno;
	for (i = 0; i < n; i++) {
		if (!ret && names[i]->d_name[0] != '.') {
			/* Write-only or unreadable parameters are not shown. */
			if (!pathf(path, sizeof(path), "%s/" SMI_SYSFS_MODULE "/parameters/%s",
				   smi_sysfs, names[i]->d_name) &&
			    !smi_read_string(path, value, sizeof(value)))
				ret = fn(names[i]->d_name, value, arg);
		}
		free(names[i]);
	}
	free(names);
	return ret;
}

/*
 * Takes a snapshot of the driver, its devices and, if @with_procs, the
 * processes using them. On error @snap holds nothing to free.
 */
int smi_snapshot_take(struct smi_snapshot *snap, bool with_procs)
{
	char path[PATH_MAX];
	struct stat st;
	int ret;

	memset(snap, 0, sizeof(*snap));
	if (pathf(path, sizeof(path), "%s/" SMI_SYSFS_MODULE, smi_sysfs))
		return -ENAMETOOLONG;
	if (stat(path, &st) == 0)
		snap->driver_loaded = true;
	else if (errno != ENOENT)
		return -errno;
	if (snap->driver_loaded) {
		ret = pathf(path, sizeof(path), "%s/" SMI_SYSFS_MODULE "/version", smi_sysfs);
		if (!ret)
			ret = smi_read_string(path, snap->driver_version,
					      sizeof(snap->driver_version));
		if (ret)
			snap->driver_version[0] = '\0';
	}

	ret = smi_read_devices(snap);
	if (ret)
		return ret;
	clock_gettime(CLOCK_MONOTONIC, &snap->mono);
	clock_gettime(CLOCK_REALTIME, &snap->wall);
	if (with_procs) {
		ret = smi_read_processes(snap);
		if (ret) {
			smi_snapshot_free(snap);
			return ret;
		}
	}
	return 0;
}

void smi_snapshot_free(struct smi_snapshot *snap)
{
	size_t i;

	for (i = 0; i < snap->nprocs; i++) {
		free(snap->procs[i].clients);
		free(snap->procs[i].faults);
	}
	free(snap->procs);
	free(snap->devices);
	memset(snap, 0, sizeof(*snap));
}
