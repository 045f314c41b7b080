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
#include <linux/udmabuf.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include <rbln_drm.h>
#include <xf86drm.h>

#include "exporter/rbln_test_exporter.h"

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

/* CLOCK_MONOTONIC in milliseconds. */
static inline int64_t rbln_test_now_ms(void)
{
	return rbln_test_deadline_ns(0) / 1000000;
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

/*
 * Reads a non-negative number from the sysfs file @path, in decimal or in
 * C notation ("0xfffe"), or -1.
 */
static inline long long rbln_sysfs_read_ull(const char *path)
{
	long long v;
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%lli", &v);
	fclose(f);
	return n == 1 && v >= 0 ? v : -1;
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

/* The accel minor of the device whose sysfs directory is @dir, or -1. */
static inline int rbln_sysfs_dev_minor(const char *dir)
{
	unsigned int minor;
	struct dirent *de;
	char path[192];
	int found = -1;
	DIR *d;

	snprintf(path, sizeof(path), "%s/accel", dir);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (sscanf(de->d_name, "accel%u", &minor) == 1)
			found = (int)minor;
	closedir(d);
	return found;
}

/*
 * The accel minor of the emulated device @id, found through sysfs, or -1.
 * Device creation is synchronous: no waiting is needed after rbln_emu_add().
 */
static inline int rbln_emu_minor(unsigned int id)
{
	char dir[96];

	snprintf(dir, sizeof(dir), RBLN_EMU_BUS "/devices/rbln_emu%u", id);
	return rbln_sysfs_dev_minor(dir);
}

/* Opens emulated device @id: 0 or -errno. */
static inline int rbln_emu_open(unsigned int id, struct rbln_drm_device **dev)
{
	int minor = rbln_emu_minor(id);

	return minor < 0 ? -ENODEV : rbln_drm_open(minor, dev);
}

/*
 * Two backends for the same tests. The initial devices, 0..N-1, are:
 * - emulated (the default): the rbln_emu devices rbln.ko creates for
 *   emu_devices=N, device k being rbln_emuk;
 * - PCI, when $RBLN_VM_PCI_DEVICES is N > 0 (rbln-vm --pci-devices N):
 *   the N NPU functions on the PCI bus, device k being the k-th by PCI
 *   address, which rbln-vm gives DEVICE_INDEX k.
 * A device is named as DRM names its debugfs directory, after the parent
 * device: "rbln_emuk" or the PCI address ("0000:01:00.0"). The emulated bus
 * is there in PCI mode too: tests may still add emulated devices to it.
 */
#define RBLN_PCI_DEVICES_ENV	"RBLN_VM_PCI_DEVICES"
#define RBLN_PCI_BUS		"/sys/bus/pci"
#define RBLN_PCI_VENDOR		0xfffe
#define RBLN_PCI_DEVICE		0x0001
#define RBLN_DEBUGFS_ACCEL	"/sys/kernel/debug/accel"
#define RBLN_DEV_NAME_MAX	32

/* How many PCI functions the initial devices are; 0: they are emulated. */
static inline int rbln_test_pci_devices(void)
{
	const char *s = getenv(RBLN_PCI_DEVICES_ENV);

	return s ? atoi(s) : 0;
}

static inline int rbln_test_on_pci(void)
{
	return rbln_test_pci_devices() > 0;
}

/* Number of initial devices: what the run asked for, not what probed. */
static inline int rbln_test_initial_devices(void)
{
	if (rbln_test_on_pci())
		return rbln_test_pci_devices();
	return (int)rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/emu_devices");
}

static inline int rbln_pci_cmp_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/*
 * The PCI addresses of the NPU functions on the bus, bound or not, sorted
 * (the fixed-width "dddd:bb:dd.f" sorts as the address does): how many.
 */
static inline int rbln_pci_functions(char (*names)[RBLN_DEV_NAME_MAX], int max)
{
	struct dirent *de;
	char path[192];
	int n = 0;
	DIR *d;

	d = opendir(RBLN_PCI_BUS "/devices");
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= RBLN_DEV_NAME_MAX)
			continue;
		snprintf(path, sizeof(path), RBLN_PCI_BUS "/devices/%s/vendor", de->d_name);
		if (rbln_sysfs_read_ull(path) != RBLN_PCI_VENDOR)
			continue;
		snprintf(path, sizeof(path), RBLN_PCI_BUS "/devices/%s/device", de->d_name);
		if (rbln_sysfs_read_ull(path) != RBLN_PCI_DEVICE)
			continue;
		strcpy(names[n++], de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), rbln_pci_cmp_name);
	return n;
}

/* Set while this process has a PCI function of its own removed. */
static int rbln_pci_removed_here;

static inline int rbln_pci_rescan(void)
{
	return rbln_sysfs_write(RBLN_PCI_BUS "/rescan", "1");
}

/*
 * The name of initial device @id into @name (RBLN_DEV_NAME_MAX bytes):
 * 0, or -ENODEV when there is no such device.
 *
 * Functions only leave the PCI bus when a test removes them, and it adds
 * them back before it ends; one that failed half-way cannot. So a test
 * that finds fewer functions than the run has, and removed none itself,
 * rescans the bus first, and says so: it gets the device it asked for
 * rather than a neighbour.
 */
static inline int rbln_test_name(unsigned int id, char *name)
{
	char names[RBLN_MAX_TEST_DEVICES][RBLN_DEV_NAME_MAX];
	int want = rbln_test_pci_devices(), n;

	if (want <= 0) {
		snprintf(name, RBLN_DEV_NAME_MAX, "rbln_emu%u", id);
		return 0;
	}
	n = rbln_pci_functions(names, RBLN_MAX_TEST_DEVICES);
	if (n < want && !rbln_pci_removed_here) {
		fprintf(stderr, "# rbln_test: %d of %d PCI NPUs on the bus, rescanning\n",
			n, want);
		rbln_pci_rescan();
		n = rbln_pci_functions(names, RBLN_MAX_TEST_DEVICES);
	}
	if (id >= (unsigned int)n)
		return -ENODEV;
	strcpy(name, names[id]);
	return 0;
}

/*
 * The name of initial device @id, in a buffer of its own that lasts as long
 * as the program; "none" (which names no device) if there is no such device.
 */
static inline const char *rbln_test_dev_name(unsigned int id)
{
	static char names[RBLN_MAX_TEST_DEVICES][RBLN_DEV_NAME_MAX];

	if (id >= RBLN_MAX_TEST_DEVICES || rbln_test_name(id, names[id]))
		return "none";
	return names[id];
}

/* The sysfs directory of the device named @name into @dir (@size bytes). */
static inline void rbln_dev_dir(const char *name, char *dir, size_t size)
{
	if (!strncmp(name, "rbln_emu", 8))
		snprintf(dir, size, RBLN_EMU_BUS "/devices/%s", name);
	else
		snprintf(dir, size, RBLN_PCI_BUS "/devices/%s", name);
}

/* The accel minor of the device named @name, or -1. */
static inline int rbln_dev_minor(const char *name)
{
	char dir[128];

	rbln_dev_dir(name, dir, sizeof(dir));
	return rbln_sysfs_dev_minor(dir);
}

/* A driver attribute of the device named @name (in its device directory), or -1. */
static inline long long rbln_dev_attr(const char *name, const char *attr)
{
	char dir[128], path[192];

	rbln_dev_dir(name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	return rbln_sysfs_read_ull(path);
}

/* Writes @value to the debugfs file @file of the device named @name: 0 or -errno. */
static inline int rbln_dev_debugfs_write(const char *name, const char *file, const char *value)
{
	char path[192];

	snprintf(path, sizeof(path), RBLN_DEBUGFS_ACCEL "/%s/%s", name, file);
	return rbln_sysfs_write(path, value);
}

/* The accel minor of initial device @id, found through sysfs, or -1. */
static inline int rbln_test_minor(unsigned int id)
{
	char name[RBLN_DEV_NAME_MAX];

	return rbln_test_name(id, name) ? -1 : rbln_dev_minor(name);
}

/* An attribute of initial device @id under its device directory, or -1. */
static inline long long rbln_test_attr(unsigned int id, const char *attr)
{
	char name[RBLN_DEV_NAME_MAX];

	return rbln_test_name(id, name) ? -1 : rbln_dev_attr(name, attr);
}

/* Device memory in use on initial device @id, from sysfs. */
static inline long long rbln_test_mem_used(unsigned int id)
{
	return rbln_test_attr(id, "memory_used");
}

/*
 * Attribute @attr of initial device @id once the jobs of closed files are
 * gone: a finished job drops its objects and its context when the
 * scheduler frees it, after its fence signals, so what another device's
 * job used may still be counted for a moment after every file closed.
 * Waits up to 2 s (scaled) for it to reach @expected, and returns what it
 * reads then.
 */
static inline long long rbln_test_attr_settles_at(unsigned int id, const char *attr,
						  long long expected)
{
	int64_t deadline = rbln_test_deadline_ns(2000);
	long long v;

	while ((v = rbln_test_attr(id, attr)) != expected && rbln_test_deadline_ns(0) < deadline)
		sched_yield();
	return v;
}

/* rbln_test_attr_settles_at() for the device memory in use. */
static inline long long rbln_test_mem_used_settles_at(unsigned int id, long long expected)
{
	return rbln_test_attr_settles_at(id, "memory_used", expected);
}

/* rbln_test_mem_used_settles_at() 0: what every closed file held is back. */
static inline long long rbln_test_mem_used_settled(unsigned int id)
{
	return rbln_test_mem_used_settles_at(id, 0);
}

/* Opens initial device @id: 0 or -errno. */
static inline int rbln_test_open(unsigned int id, struct rbln_drm_device **dev)
{
	int minor = rbln_test_minor(id);

	return minor < 0 ? -ENODEV : rbln_drm_open(minor, dev);
}

/* The path of debugfs file @file of initial device @id into @path: 0 or -ENODEV. */
static inline int rbln_test_debugfs_path(unsigned int id, const char *file, char *path,
					 size_t size)
{
	char name[RBLN_DEV_NAME_MAX];

	if (rbln_test_name(id, name))
		return -ENODEV;
	snprintf(path, size, RBLN_DEBUGFS_ACCEL "/%s/%s", name, file);
	return 0;
}

/* Arms fault injection @what ("hang", "dma", "fault") on initial device @id. */
static inline int rbln_test_inject(unsigned int id, const char *what)
{
	char name[RBLN_DEV_NAME_MAX];

	return rbln_test_name(id, name) ?: rbln_dev_debugfs_write(name, "inject", what);
}

/*
 * A device a test removes while it is in use (files open, jobs in flight).
 * On the emulated backend, a fresh emulated device the test adds, @emu_id
 * with @mem_mib MiB, and removes with del_device. On the PCI backend, the
 * last initial device, so that the others keep their numbers: removed as
 * a hot-unplug removes it (/sys/bus/pci/devices/<addr>/remove, which
 * unbinds the driver and takes the function off the bus) and brought back
 * by rbln_test_victim_restore() with a rescan, which probes it anew.
 */
struct rbln_test_victim {
	int pci;
	unsigned int id;	/* the emulated id, or the initial device number */
	unsigned int mem_mib;	/* what an emulated one is added with */
	char name[RBLN_DEV_NAME_MAX];
	int removed;
};

static inline int rbln_test_victim_minor(const struct rbln_test_victim *v)
{
	return rbln_dev_minor(v->name);
}

static inline int rbln_test_victim_open(const struct rbln_test_victim *v,
					struct rbln_drm_device **dev)
{
	int minor = rbln_dev_minor(v->name);

	return minor < 0 ? -ENODEV : rbln_drm_open(minor, dev);
}

/* Takes the victim, of at least @mem_mib MiB (0: the default): 0 or -errno. */
static inline int rbln_test_victim_get(struct rbln_test_victim *v, unsigned int emu_id,
				       unsigned int mem_mib)
{
	struct rbln_drm_device *dev;
	uint64_t size;
	int ret;

	memset(v, 0, sizeof(*v));
	v->pci = rbln_test_on_pci();
	v->mem_mib = mem_mib;
	if (!v->pci) {
		v->id = emu_id;
		snprintf(v->name, sizeof(v->name), "rbln_emu%u", emu_id);
		return rbln_emu_add(emu_id, mem_mib);
	}
	v->id = rbln_test_pci_devices() - 1;
	if (rbln_test_name(v->id, v->name))
		return -ENODEV;
	/* Its memory is what the run gave it: too little is an error. */
	ret = rbln_test_victim_open(v, &dev);
	if (ret)
		return ret;
	ret = rbln_drm_get_param(dev, RBLN_PARAM_DEVICE_MEMORY_SIZE, &size);
	rbln_drm_close(dev);
	if (!ret && size < (uint64_t)mem_mib << 20) {
		fprintf(stderr, "# rbln_test: %s has less than the %u MiB the test needs\n",
			v->name, mem_mib);
		ret = -ENOSPC;
	}
	return ret;
}

/* The DEVICE_INDEX the victim reports. */
static inline unsigned int rbln_test_victim_index(const struct rbln_test_victim *v)
{
	return v->id;
}

/*
 * Opens a device other than the victim @v, to see that it is untouched:
 * initial device 0, or when that is @v (a single PCI device) a fresh
 * emulated device @emu_id, added here: then *@emu_added is set, and the
 * caller deletes it.
 */
static inline int rbln_test_bystander_open(const struct rbln_test_victim *v,
					   unsigned int emu_id, struct rbln_drm_device **dev,
					   int *emu_added)
{
	int ret;

	*emu_added = 0;
	if (!v->pci || v->id != 0)
		return rbln_test_open(0, dev);
	ret = rbln_emu_add(emu_id, 16);
	if (ret)
		return ret;
	*emu_added = 1;
	return rbln_emu_open(emu_id, dev);
}

/* Removes the victim, with whatever is open on it: 0 or -errno. */
static inline int rbln_test_victim_remove(struct rbln_test_victim *v)
{
	char path[128];
	int ret;

	if (!v->pci) {
		ret = rbln_emu_del(v->id);
	} else {
		rbln_pci_removed_here = 1;
		snprintf(path, sizeof(path), RBLN_PCI_BUS "/devices/%s/remove", v->name);
		ret = rbln_sysfs_write(path, "1");
	}
	v->removed = !ret;
	return ret;
}

/*
 * Brings the removed victim back, a new instance of it: the emulated
 * device added again with its id, or on PCI the function found again by
 * a rescan of the bus and probed anew. 0, once it has an accel node, or
 * -errno.
 */
static inline int rbln_test_victim_readd(struct rbln_test_victim *v)
{
	int ret;

	ret = v->pci ? rbln_pci_rescan() : rbln_emu_add(v->id, v->mem_mib);
	if (ret)
		return ret;
	v->removed = 0;
	if (v->pci)
		rbln_pci_removed_here = 0;
	return rbln_dev_minor(v->name) < 0 ? -ENODEV : 0;
}

/*
 * Puts things back as the test found them: on PCI the victim returns,
 * probed anew, and 0 says it has its accel node again; an emulated victim
 * not removed yet is removed. 0 or -errno.
 */
static inline int rbln_test_victim_restore(struct rbln_test_victim *v)
{
	if (!v->pci)
		return v->removed ? 0 : rbln_test_victim_remove(v);
	if (v->removed)
		return rbln_test_victim_readd(v);
	return rbln_dev_minor(v->name) < 0 ? -ENODEV : 0;
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
 * A NOP written into @nop, which the device named @name hangs on (until
 * job_timeout_ms ends it), submitted on @queue with @nop listed; @hung
 * gets its fence.
 */
static inline int rbln_test_submit_hung_nop(struct rbln_drm_device *dev, uint32_t queue,
					    struct rbln_test_buf *nop, const char *name,
					    struct drm_rbln_sync *hung)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, nop->cpu, nop->size);
	return (drmSyncobjCreate(rbln_drm_fd(dev), 0, &hung->handle) ? -errno : 0) ?:
	       rbln_drm_cmd_nop(&c) ?:
	       rbln_dev_debugfs_write(name, "inject", "hang") ?:
	       rbln_drm_submit(dev, queue, nop->va, c.len, &nop->handle, 1, NULL, 0, hung);
}

/*
 * A host thread moving a WAIT's 64-bit word, as a collective's MPI
 * progress thread does: the device keeps such a WAIT past the job timeout
 * (up to wait_timeout_ms). It writes one more every @period_ms, from 1,
 * until @until_ms (rbln_test_now_ms()), or until stopped if 0.
 */
struct rbln_test_mover {
	uint64_t *word;
	int64_t period_ms;
	int64_t until_ms;
	volatile int stop;
	int64_t last_ms;	/* when it last wrote */
	unsigned int writes;
	pthread_t thread;
};

static inline void *rbln_test_mover_run(void *p)
{
	struct rbln_test_mover *m = p;

	while (!m->stop && (!m->until_ms || rbln_test_now_ms() < m->until_ms)) {
		usleep(m->period_ms * 1000);
		if (m->stop)
			break;
		__atomic_store_n(m->word, ++m->writes, __ATOMIC_RELEASE);
		m->last_ms = rbln_test_now_ms();
	}
	return NULL;
}

/* Starts @m moving @word every @period_ms for @for_ms, or until stopped if 0. */
static inline int rbln_test_mover_start(struct rbln_test_mover *m, void *word,
					int64_t period_ms, int64_t for_ms)
{
	memset(m, 0, sizeof(*m));
	m->word = word;
	m->period_ms = period_ms;
	m->until_ms = for_ms ? rbln_test_now_ms() + for_ms : 0;
	m->last_ms = rbln_test_now_ms();
	return pthread_create(&m->thread, NULL, rbln_test_mover_run, m);
}

static inline void rbln_test_mover_stop(struct rbln_test_mover *m)
{
	m->stop = 1;
	pthread_join(m->thread, NULL);
}

/* Whether the fence of @syncobj has not signaled yet, asked without waiting. */
static inline int rbln_test_pending(struct rbln_drm_device *dev, uint32_t syncobj)
{
	return drmSyncobjWait(rbln_drm_fd(dev), &syncobj, 1, 0, 0, NULL) != 0;
}

/* A memory value of fdinfo per drm-usage-stats.rst (a number, then KiB or MiB), or -1. */
static inline long long rbln_test_fdinfo_bytes(const char *v)
{
	unsigned long long n;
	char unit[8] = "";

	if (!v || sscanf(v, "%llu %7s", &n, unit) < 1)
		return -1;
	if (!unit[0])
		return (long long)n;
	if (!strcmp(unit, "KiB"))
		return (long long)(n << 10);
	if (!strcmp(unit, "MiB"))
		return (long long)(n << 20);
	return -1;
}

/* The value of fdinfo key @key (with its colon) of file @fd into @buf: 0, or -1 if absent. */
static inline int rbln_test_fdinfo_value(int fd, const char *key, char *buf, size_t size)
{
	size_t len = strlen(key);
	char path[64], line[256];
	int ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, len))
			continue;
		snprintf(buf, size, "%s", line + len + strspn(line + len, " \t"));
		buf[strcspn(buf, "\n")] = '\0';
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* The bytes of fdinfo key @key (with its colon) of file @fd, or -1. */
static inline long long rbln_test_fdinfo_key(int fd, const char *key)
{
	char v[128];

	return rbln_test_fdinfo_value(fd, key, v, sizeof(v)) ? -1 : rbln_test_fdinfo_bytes(v);
}

/* The bytes of fdinfo key drm-@stat-@region of file @fd, or -1. */
static inline long long rbln_test_fdinfo_mem(int fd, const char *stat, const char *region)
{
	char key[64];

	snprintf(key, sizeof(key), "drm-%s-%s:", stat, region);
	return rbln_test_fdinfo_key(fd, key);
}

/* VM_BIND maps and waits for the bind job: 0 or the error (-EIO: the job failed). */
static inline int rbln_test_vm_map(struct rbln_drm_device *dev, uint64_t va, uint64_t size,
				   uint32_t handle, uint64_t off, uint32_t flags)
{
	struct drm_rbln_sync sig = { 0 };
	int fd = rbln_drm_fd(dev), ret, status = 0;

	if (drmSyncobjCreate(fd, 0, &sig.handle))
		return -errno;
	ret = rbln_drm_vm_map(dev, va, size, handle, off, flags, NULL, 0, &sig);
	if (!ret && drmSyncobjWait(fd, &sig.handle, 1, rbln_test_deadline_ns(10000), 0, NULL))
		ret = -ETIME;
	if (!ret && !rbln_drm_fence_status(dev, sig.handle, 0, &status) && status != 1)
		ret = -EIO;
	drmSyncobjDestroy(fd, sig.handle);
	return ret;
}

/* VM_BIND unmaps and waits for the bind job. */
static inline int rbln_test_vm_unmap(struct rbln_drm_device *dev, uint64_t va, uint64_t size)
{
	struct drm_rbln_sync sig = { 0 };
	int fd = rbln_drm_fd(dev), ret;

	if (drmSyncobjCreate(fd, 0, &sig.handle))
		return -errno;
	ret = rbln_drm_vm_unmap(dev, va, size, NULL, 0, &sig);
	if (!ret && drmSyncobjWait(fd, &sig.handle, 1, rbln_test_deadline_ns(10000), 0, NULL))
		ret = -ETIME;
	drmSyncobjDestroy(fd, sig.handle);
	return ret;
}

/*
 * Waits up to @timeout_ms (scaled) for the fence of @syncobj and returns
 * rbln_drm_fence_status()'s status: 1 for success, the job's -errno, or 0
 * if it did not finish in time; a failed query, below -1000: -1000 - errno.
 */
static inline int rbln_test_sync_status(struct rbln_drm_device *dev, uint32_t syncobj,
					int timeout_ms)
{
	int ret, status = 0;

	drmSyncobjWait(rbln_drm_fd(dev), &syncobj, 1, rbln_test_deadline_ns(timeout_ms), 0,
		       NULL);
	ret = rbln_drm_fence_status(dev, syncobj, 0, &status);
	return ret ? -1000 + ret : status;
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
	status = rbln_test_sync_status(dev, signal.handle, timeout_ms);
	drmSyncobjDestroy(rbln_drm_fd(dev), signal.handle);
	return status;
}

/*
 * Fills 1 MiB of device memory of @dev and copies its last page out: 1
 * when the result is exact, as rbln_test_run() otherwise.
 */
static inline int rbln_test_works(struct rbln_drm_device *dev, uint32_t pattern)
{
	struct rbln_test_buf cmd, mem, out;
	struct rbln_drm_cmd c;
	uint32_t queue, bos[2], mib = 1u << 20;
	int ret;

	ret = rbln_drm_queue_create(dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue) ?:
	      rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &cmd) ?:
	      rbln_test_buf_new(dev, mib, RBLN_BO_DEVICE, 0, &mem) ?:
	      rbln_test_buf_new(dev, 4096, RBLN_BO_HOST, 0, &out);
	if (ret)
		return -1000 + ret;
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	rbln_drm_cmd_dma_fill(&c, mem.va, pattern, mib);
	rbln_drm_cmd_dma_copy(&c, out.va, mem.va + mib - 4096, 4096);
	bos[0] = mem.handle;
	bos[1] = out.handle;
	ret = rbln_test_run(dev, queue, &cmd, c.len, bos, 2, 10000);
	if (ret == 1 && (((uint32_t *)out.cpu)[0] != pattern ||
			 ((uint32_t *)out.cpu)[1023] != pattern))
		ret = -1;
	rbln_test_buf_free(dev, &cmd);
	rbln_test_buf_free(dev, &mem);
	rbln_test_buf_free(dev, &out);
	return ret;
}

/*
 * The tests' dma-buf exporter (tests/kernel/exporter), its module loaded
 * from $RBLN_TEST_EXPORTER first: a descriptor for RBLN_TEST_IOCTL_EXPORT,
 * or -errno (-ENOENT: the variable is not set).
 */
static inline int rbln_test_exporter_open(void)
{
	const char *ko = getenv("RBLN_TEST_EXPORTER");
	int fd, ret;

	if (!ko)
		return -ENOENT;
	fd = open(ko, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST ? -errno : 0;
	close(fd);
	if (ret)
		return ret;
	fd = open(RBLN_TEST_EXPORTER_DEV, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* A memfd of @size that cannot shrink, as udmabuf wants; or -1. */
static inline int rbln_test_sealed_memfd(size_t size)
{
	int fd = memfd_create("rbln-test", MFD_ALLOW_SEALING | MFD_CLOEXEC);

	if (fd >= 0 && (ftruncate(fd, size) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A dma-buf of the first @size bytes of @memfd, from /dev/udmabuf @dev; or -1. */
static inline int rbln_test_udmabuf(int dev, int memfd, size_t size)
{
	struct udmabuf_create create = {
		.memfd = memfd, .flags = UDMABUF_FLAGS_CLOEXEC, .size = size,
	};

	return ioctl(dev, UDMABUF_CREATE, &create);
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
