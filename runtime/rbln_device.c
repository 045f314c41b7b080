// SPDX-License-Identifier: MIT
/*
 * rbln_device.c - which devices exist, which one a thread uses, and
 * opening one on first use
 *
 * The set of devices is fixed at the first call: the rbln accel nodes,
 * filtered and ordered by RBLN_VISIBLE_DEVICES ("0,2": the first and third
 * node) when it is set, are the physical devices; RBLN_NPUS_PER_DEVICE or
 * RBLN_DEVICE_MAP group them into the logical devices that the API's
 * indices name (rbln_device_map.c), one per physical device by default.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xf86drm.h>

#include "rbln_device_map.h"
#include "rbln_internal.h"

#define MAX_DEVICES RBLN_DEVICE_MAP_MAX

static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static struct rbln_dev devices[MAX_DEVICES];
static int device_count;
static struct rbln_ldev ldevs[MAX_DEVICES];
static int ldev_count;
static struct rbln_device_map device_map;	/* for rbln_device_summary() */
static char visible_devices[128];		/* RBLN_VISIBLE_DEVICES, for the same */
static char registry_error[256];

/* -1: not set yet, which means device 0. */
static _Thread_local int current_device = -1;

/* Text built up to a size, counting what did not fit like snprintf(). */
struct text {
	char *buf;
	size_t size, len;
};

static __attribute__((format(printf, 2, 3))) void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->len < t->size ? t->buf + t->len : NULL,
		      t->len < t->size ? t->size - t->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += n;
}

/* "3 (/dev/accel/accel3), 4 (/dev/accel/accel4)" for the physical devices @idx. */
static void text_add_physical(struct text *t, const int *idx, int n)
{
	int i;

	for (i = 0; i < n; i++)
		text_add(t, "%s%d (/dev/accel/accel%u)", i ? ", " : "", idx[i],
			 devices[idx[i]].minor);
}

/*
 * Builds the logical devices over the device_count physical ones. A
 * configuration that is wrong leaves no device at all, like a wrong
 * RBLN_VISIBLE_DEVICES: running on another grouping than the one asked for
 * would be worse than not running.
 */
static void group_devices(void)
{
	struct rbln_device_map *m = &device_map;
	int g, k;

	if (rbln_device_map_build(m, getenv("RBLN_DEVICE_MAP"), getenv("RBLN_NPUS_PER_DEVICE"),
				  device_count, RBLN_MAX_MEMBERS)) {
		snprintf(registry_error, sizeof(registry_error), "%s", m->error);
		device_count = 0;
		return;
	}
	for (g = 0; g < m->ngroups; g++) {
		ldevs[g].index = g;
		ldevs[g].nmembers = m->start[g + 1] - m->start[g];
		rbln_alloc_group_init(&ldevs[g].group);
		for (k = 0; k < ldevs[g].nmembers; k++) {
			ldevs[g].members[k] = &devices[m->member[m->start[g] + k]];
			ldevs[g].members[k]->ldev = &ldevs[g];
		}
	}
	ldev_count = m->ngroups;
	if (m->nunused) {
		char line[4096];
		struct text t = { line, sizeof(line), 0 };

		text_add(&t, "librbln: warning: %s leaves physical device%s ", m->origin,
			 m->nunused == 1 ? "" : "s");
		text_add_physical(&t, m->unused, m->nunused);
		text_add(&t, " unused\n");
		fputs(line, stderr);
	}
}

static void registry_init(void)
{
	unsigned int minors[MAX_DEVICES];
	const char *visible = getenv("RBLN_VISIBLE_DEVICES");
	int n = rbln_drm_enumerate(minors, MAX_DEVICES), i;

	if (n < 0) {
		snprintf(registry_error, sizeof(registry_error),
			 "cannot list rbln devices: %s", strerror(-n));
		return;
	}
	if (n > MAX_DEVICES)
		n = MAX_DEVICES;

	if (visible && *visible) {
		const char *p = visible;
		char *end;

		while (*p) {
			long idx = strtol(p, &end, 10);

			if (end == p || idx < 0 || idx >= n || (*end && *end != ',')) {
				snprintf(registry_error, sizeof(registry_error),
					 "RBLN_VISIBLE_DEVICES=\"%s\": \"%s\" is not one of the %d devices",
					 visible, p, n);
				device_count = 0;
				return;
			}
			for (i = 0; i < device_count; i++) {
				if (devices[i].minor == minors[idx]) {
					snprintf(registry_error, sizeof(registry_error),
						 "RBLN_VISIBLE_DEVICES=\"%s\" names device %ld twice",
						 visible, idx);
					device_count = 0;
					return;
				}
			}
			devices[device_count++].minor = minors[idx];
			p = *end ? end + 1 : end;
		}
	} else {
		for (i = 0; i < n; i++)
			devices[device_count++].minor = minors[i];
	}
	if (!device_count) {
		snprintf(registry_error, sizeof(registry_error), "no rbln device on this machine");
		return;
	}
	if (visible && *visible)
		snprintf(visible_devices, sizeof(visible_devices), "%.100s%s", visible,
			 strlen(visible) > 100 ? "..." : "");
	for (i = 0; i < device_count; i++) {
		devices[i].once = (pthread_once_t)PTHREAD_ONCE_INIT;
		pthread_mutex_init(&devices[i].lock, NULL);
		pthread_mutex_init(&devices[i].async_lock, NULL);
	}
	group_devices();
}

/* The number of logical devices. */
static int registry_count(void)
{
	pthread_once(&registry_once, registry_init);
	return ldev_count;
}

bool rbln_is_available(void)
{
	return registry_count() > 0;
}

int rbln_device_count(void)
{
	return registry_count();
}

int rbln_physical_device_count(void)
{
	pthread_once(&registry_once, registry_init);
	return device_count;
}

int64_t rbln_device_summary(char *buf, size_t size)
{
	struct rbln_device_map *m = &device_map;
	struct text t = { buf, buf ? size : 0, 0 };
	int g;

	if (!buf && size)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_device_summary: NULL buffer of %zu bytes",
				 size);
	if (!registry_count())
		return rbln_fail(RBLN_ERROR_NO_DEVICE, "%s", registry_error);
	text_add(&t, "%d logical device%s over %d physical device%s", ldev_count,
		 ldev_count == 1 ? "" : "s", device_count, device_count == 1 ? "" : "s");
	if (*visible_devices)
		text_add(&t, " (RBLN_VISIBLE_DEVICES=\"%s\")", visible_devices);
	text_add(&t, ": %s\n", m->origin);
	/* From the logical devices themselves: the summary shows what runs. */
	for (g = 0; g < ldev_count; g++) {
		int idx[RBLN_MAX_MEMBERS], k;

		for (k = 0; k < ldevs[g].nmembers; k++)
			idx[k] = ldevs[g].members[k] - devices;
		text_add(&t, "rbln:%d: physical ", g);
		text_add_physical(&t, idx, ldevs[g].nmembers);
		text_add(&t, "\n");
	}
	if (m->nunused) {
		text_add(&t, "unused: physical ");
		text_add_physical(&t, m->unused, m->nunused);
		text_add(&t, "\n");
	}
	return t.len;
}

static rbln_status check_device(int device)
{
	int n = registry_count();

	if (!n)
		return rbln_fail(RBLN_ERROR_NO_DEVICE, "%s", registry_error);
	if (device < 0 || device >= n)
		return rbln_fail(RBLN_ERROR_NO_DEVICE, "device %d does not exist (%d device%s)",
				 device, n, n == 1 ? "" : "s");
	return RBLN_OK;
}

int rbln_current_device(void)
{
	if (!registry_count())
		return -1;
	return current_device < 0 ? 0 : current_device;
}

/* As torch.cuda.set_device(): a negative index selects nothing and is no error. */
rbln_status rbln_set_device(int device)
{
	rbln_status st;

	if (device < 0)
		return RBLN_OK;
	st = check_device(device);
	if (st == RBLN_OK)
		current_device = device;
	return st;
}

rbln_status rbln_device_parse(const char *name, int *device)
{
	const char *p;
	char *end;
	long idx;

	if (!name || !device)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_device_parse: NULL argument");
	if (!strcmp(name, "rbln")) {
		if (!registry_count())
			return rbln_fail(RBLN_ERROR_NO_DEVICE, "%s", registry_error);
		*device = rbln_current_device();
		return RBLN_OK;
	}
	p = strncmp(name, "rbln:", 5) ? name : name + 5;
	errno = 0;
	idx = strtol(p, &end, 10);
	if (end == p || *end || errno || idx < 0 || idx > INT32_MAX)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "\"%s\" is not a device: use \"rbln\", \"rbln:N\" or \"N\"", name);
	*device = (int)idx;
	return check_device(*device);
}

/* A guard that failed does nothing either, but says so in its status. */
rbln_device_guard rbln_device_enter(int device)
{
	rbln_device_guard guard = { .previous = -1, .status = RBLN_OK };

	if (device < 0)
		return guard;
	guard.status = check_device(device);
	if (guard.status == RBLN_OK) {
		guard.previous = rbln_current_device();
		current_device = device;
	}
	return guard;
}

void rbln_device_exit(rbln_device_guard *guard)
{
	if (guard && guard->previous >= 0) {
		current_device = guard->previous;
		guard->previous = -1;
	}
}

/* --- opening a device --------------------------------------------------------- */

static int seg_alloc(void *ctx, uint64_t size, uint32_t *handle, uint64_t *va)
{
	return rbln_drm_bo_create(((struct rbln_dev *)ctx)->drm, size, RBLN_BO_DEVICE, 0, handle,
				  va);
}

static void seg_free(void *ctx, uint32_t handle)
{
	rbln_drm_bo_close(((struct rbln_dev *)ctx)->drm, handle);
}

static int seg_synchronize(void *ctx)
{
	struct rbln_dev *d = ctx;
	uint64_t point;

	pthread_mutex_lock(&d->lock);
	point = d->point;
	pthread_mutex_unlock(&d->lock);
	return rbln_wait_point(d, point) == RBLN_OK ? 0 : -EIO;
}

static bool seg_point_done(void *ctx, uint64_t point)
{
	return rbln_point_done(ctx, point);
}

/*
 * Expandable segments, on VM_BIND. Each pool reserves address space for
 * more than the whole device memory (as PyTorch reserves 1 1/8 of it), so
 * a segment never stops growing before the device is full.
 */
static int seg_reserve(void *ctx, uint64_t *va, uint64_t *size)
{
	struct rbln_dev *d = ctx;

	*size = (d->mem_size + d->mem_size / 8 + (2ull << 20) - 1) & ~((2ull << 20) - 1);
	return rbln_drm_vm_reserve(d->drm, *size, 2ull << 20, va);
}

static void seg_release(void *ctx, uint64_t va)
{
	rbln_drm_vm_release(((struct rbln_dev *)ctx)->drm, va);
}

/* Binds complete on the driver's bind queue: wait, so that callers may use the range. */
static int bind_wait(struct rbln_dev *d)
{
	int fd = rbln_drm_fd(d->drm), status = 0;

	if (drmSyncobjWait(fd, &d->bind_sync, 1, INT64_MAX, 0, NULL))
		return -errno;
	return rbln_drm_fence_status(d->drm, d->bind_sync, 0, &status) ?: status < 0 ? status : 0;
}

/*
 * An object of its own (with its own address too, so that another member
 * can import it as a peer: rbln_block_piece()), bound at @va.
 */
static int seg_map(void *ctx, uint64_t va, uint64_t size, uint32_t *handle)
{
	struct rbln_dev *d = ctx;
	struct drm_rbln_sync sig = { .handle = d->bind_sync };
	int ret;

	ret = rbln_drm_bo_create(d->drm, size, RBLN_BO_DEVICE, 0, handle, NULL);
	if (ret)
		return ret;
	ret = rbln_drm_vm_map(d->drm, va, size, *handle, 0, 0, NULL, 0, &sig);
	if (!ret)
		ret = bind_wait(d);
	if (ret)
		rbln_drm_bo_close(d->drm, *handle);
	return ret;
}

/* The unbind waits for the jobs before it; the memory goes with the handle. */
static void seg_unmap(void *ctx, uint64_t va, uint64_t size, uint32_t handle)
{
	struct rbln_dev *d = ctx;
	struct drm_rbln_sync sig = { .handle = d->bind_sync };

	if (!rbln_drm_vm_unmap(d->drm, va, size, NULL, 0, &sig))
		bind_wait(d);
	rbln_drm_bo_close(d->drm, handle);
}

static const struct rbln_segment_ops segment_ops = {
	.alloc = seg_alloc,
	.free = seg_free,
	.synchronize = seg_synchronize,
	.point_done = seg_point_done,
};

static const struct rbln_segment_ops segment_ops_vm_bind = {
	.alloc = seg_alloc,
	.free = seg_free,
	.synchronize = seg_synchronize,
	.point_done = seg_point_done,
	.reserve = seg_reserve,
	.release = seg_release,
	.map = seg_map,
	.unmap = seg_unmap,
};

static struct rbln_dev *opening;

static void dev_open(void)
{
	struct rbln_dev *d = opening;
	uint64_t abi = 0;
	int ret, i;

	ret = rbln_drm_open(d->minor, &d->drm);
	if (!ret)
		ret = rbln_drm_queue_create(d->drm, RBLN_QUEUE_PRIORITY_NORMAL, &d->queue);
	if (!ret) {
		uint64_t max_cmd = 0;

		ret = rbln_drm_get_param(d->drm, RBLN_PARAM_MAX_CMD_SIZE, &max_cmd);
		d->max_cmd = max_cmd > UINT32_MAX ? UINT32_MAX : max_cmd;
	}
	if (!ret)
		ret = rbln_drm_get_param(d->drm, RBLN_PARAM_DEVICE_MEMORY_SIZE, &d->mem_size) ?:
		      rbln_drm_get_param(d->drm, RBLN_PARAM_ABI_VERSION, &abi);
	for (i = 0; i < RBLN_SYNC_SLOTS && !ret; i++)
		if (drmSyncobjCreate(rbln_drm_fd(d->drm), 0, &d->slots[i]))
			ret = -errno;
	if (!ret && drmSyncobjCreate(rbln_drm_fd(d->drm), 0, &d->bind_sync))
		ret = -errno;
	if (ret) {
		d->open_status = RBLN_ERROR_NO_DEVICE;
		rbln_drm_close(d->drm);
		d->drm = NULL;
		return;
	}
	/* A driver older than VM_BIND gets plain segments. */
	d->alloc = rbln_allocator_create_conf(abi >= 3 ? &segment_ops_vm_bind : &segment_ops, d,
					      getenv("RBLN_ALLOC_CONF"), d->open_error,
					      sizeof(d->open_error));
	if (!d->alloc) {
		d->open_status = errno == EINVAL ? RBLN_ERROR_INVALID : RBLN_ERROR_OUT_OF_MEMORY;
		return;
	}
	/* A logical device of several members keeps its own figures (rbln_memory_stats()). */
	if (d->ldev && d->ldev->nmembers > 1)
		rbln_allocator_join(d->alloc, &d->ldev->group);
	__atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
}

/* Physical device @physical, opened on first use; NULL and an error if it cannot be. */
static struct rbln_dev *pdev_open(int physical)
{
	static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
	struct rbln_dev *d = &devices[physical];

	if (__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE))
		return d;
	/* pthread_once takes no argument: pass it under a lock. */
	pthread_mutex_lock(&open_lock);
	opening = d;
	pthread_once(&d->once, dev_open);
	pthread_mutex_unlock(&open_lock);
	if (d->open_status == RBLN_ERROR_INVALID) {
		rbln_fail(d->open_status, "RBLN_ALLOC_CONF: %s", d->open_error);
		return NULL;
	}
	if (d->open_status != RBLN_OK) {
		rbln_fail(d->open_status, "cannot open physical device %d (/dev/accel/accel%u)",
			  physical, d->minor);
		return NULL;
	}
	return d;
}

struct rbln_ldev *rbln_ldev_get(int device)
{
	struct rbln_ldev *l;
	int i;

	if (device == -1)
		device = rbln_current_device();
	if (check_device(device) != RBLN_OK)
		return NULL;
	l = &ldevs[device];
	for (i = 0; i < l->nmembers; i++)
		if (!pdev_open(l->members[i] - devices))
			return NULL;
	return l;
}

struct rbln_dev *rbln_pdev_if_open(int physical)
{
	struct rbln_dev *d;

	pthread_once(&registry_once, registry_init);
	if (physical < 0 || physical >= device_count)
		return NULL;
	d = &devices[physical];
	return __atomic_load_n(&d->ready, __ATOMIC_ACQUIRE) ? d : NULL;
}

int rbln_pdev_index(const struct rbln_dev *d)
{
	return (int)(d - devices);
}
