// SPDX-License-Identifier: MIT
/*
 * rbln_tensor.c - tensors, lazy device allocation, transfers
 *
 * A tensor created on an RBLN device keeps its data in host memory until
 * its first device use; then a block of the device's caching allocator
 * takes it, through a staging host buffer and a DMA job, and the host copy
 * goes. Device-to-host copies come back the same way; a non-blocking one
 * completes in rbln_synchronize().
 */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_explain.h"
#include "rbln_internal.h"

#define TENSOR_MAGIC 0x72626c6e54656e73ull	/* "rblnTens" */

struct rbln_tensor {
	uint64_t magic;
	rbln_dtype dtype;
	int ndim;
	int64_t shape[RBLN_MAX_DIMS];
	int64_t numel;
	size_t nbytes;
	int device;			/* RBLN_CPU or a device index */
	pthread_mutex_t lock;		/* protects host, block, last_point */
	void *host;			/* CPU tensors; device tensors until materialized */
	char *offload_path;		/* host is a mapping of this file (offload) */
	struct rbln_block *block;	/* device memory once materialized */
	uint64_t last_point;		/* last job that used block */
};

size_t rbln_dtype_size(rbln_dtype dtype)
{
	switch (dtype) {
	case RBLN_F32:
	case RBLN_I32:
		return 4;
	case RBLN_F16:
	case RBLN_BF16:
		return 2;
	case RBLN_I8:
		return 1;
	}
	return 0;
}

static struct rbln_dev *dev_of(int device)
{
	struct rbln_ldev *l = rbln_ldev_get(device);

	return l ? l->members[0] : NULL;
}

/* Frees a tensor's host memory, heap or offload file. */
static void host_free(rbln_tensor *t)
{
	if (t->offload_path && t->host) {
		rbln_offload_free(t->host, t->nbytes, t->offload_path);
		free(t->offload_path);
		t->offload_path = NULL;
		return;
	}
	free(t->host);
}

static bool tensor_ok(const rbln_tensor *t, const char *fn)
{
	if (!t) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: NULL tensor", fn);
		return false;
	}
	if (t->magic != TENSOR_MAGIC) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: not a live tensor (freed?)", fn);
		return false;
	}
	return true;
}

static rbln_tensor *tensor_new(const int64_t *shape, int ndim, rbln_dtype dtype, int device,
			       const char *fn)
{
	size_t esize = rbln_dtype_size(dtype);
	int64_t numel = 1;
	rbln_tensor *t;
	int i;

	if (!esize) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: unknown dtype %d", fn, (int)dtype);
		return NULL;
	}
	if (ndim < 0 || ndim > RBLN_MAX_DIMS || (ndim && !shape)) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: %d dimensions (0 to %d, with a shape)", fn, ndim,
			  RBLN_MAX_DIMS);
		return NULL;
	}
	for (i = 0; i < ndim; i++) {
		if (shape[i] < 0 || (shape[i] && numel > (INT64_MAX / (int64_t)esize) / shape[i])) {
			rbln_fail(RBLN_ERROR_INVALID, "%s: dimension %d of size %lld is %s", fn, i,
				  (long long)shape[i], shape[i] < 0 ? "negative" : "too large");
			return NULL;
		}
		numel *= shape[i];
	}
	if (device != RBLN_CPU && !dev_of(device))
		return NULL;

	t = calloc(1, sizeof(*t));
	if (!t) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
		return NULL;
	}
	t->magic = TENSOR_MAGIC;
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(*shape));
	t->numel = numel;
	t->nbytes = numel * esize;
	t->device = device;
	pthread_mutex_init(&t->lock, NULL);
	if (device != RBLN_CPU && t->nbytes && rbln_offload_active()) {
		char path[PATH_MAX];

		t->host = rbln_offload_alloc(t->nbytes, path);
		t->offload_path = t->host ? strdup(path) : NULL;
		if (t->host && !t->offload_path) {
			rbln_offload_free(t->host, t->nbytes, path);
			t->host = NULL;
		}
		if (!t->host) {
			free(t);
			return NULL;
		}
	} else {
		t->host = malloc(t->nbytes ? t->nbytes : 1);
	}
	if (!t->host) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of host memory",
			  fn, t->nbytes);
		free(t);
		return NULL;
	}
	if (device != RBLN_CPU) {
		struct rbln_dev *d = dev_of(device);

		pthread_mutex_lock(&d->lock);
		d->lazy_host_bytes += t->nbytes;
		d->lazy_tensors++;
		pthread_mutex_unlock(&d->lock);
	}
	return t;
}

rbln_tensor *rbln_tensor_empty(const int64_t *shape, int ndim, rbln_dtype dtype, int device)
{
	return tensor_new(shape, ndim, dtype, device, "rbln_tensor_empty");
}

rbln_tensor *rbln_tensor_zeros(const int64_t *shape, int ndim, rbln_dtype dtype, int device)
{
	rbln_tensor *t = tensor_new(shape, ndim, dtype, device, "rbln_tensor_zeros");

	if (t)
		memset(t->host, 0, t->nbytes);
	return t;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (u >> 16) | 0x40;
	return (u + 0x7fff + ((u >> 16) & 1)) >> 16;
}

/* @v in @dtype's encoding at @dst, with the ISA's cast rules. */
static void encode(rbln_dtype dtype, double v, void *dst)
{
	float f = (float)v;
	double r;

	switch (dtype) {
	case RBLN_F32:
		memcpy(dst, &f, 4);
		return;
	case RBLN_F16: {
		_Float16 h = (_Float16)f;

		memcpy(dst, &h, 2);
		return;
	}
	case RBLN_BF16: {
		uint16_t b = f32_to_bf16(f);

		memcpy(dst, &b, 2);
		return;
	}
	case RBLN_I32: {
		int32_t i;

		r = isnan(v) ? 0 : rint(fmin(fmax(v, INT32_MIN), INT32_MAX));
		i = (int32_t)r;
		memcpy(dst, &i, 4);
		return;
	}
	case RBLN_I8: {
		int8_t i;

		r = isnan(v) ? 0 : rint(fmin(fmax(v, INT8_MIN), INT8_MAX));
		i = (int8_t)r;
		memcpy(dst, &i, 1);
		return;
	}
	}
}

rbln_tensor *rbln_tensor_full(const int64_t *shape, int ndim, rbln_dtype dtype, double value,
			      int device)
{
	rbln_tensor *t = tensor_new(shape, ndim, dtype, device, "rbln_tensor_full");
	size_t esize = rbln_dtype_size(dtype);
	int64_t i;

	if (!t)
		return NULL;
	encode(dtype, value, t->host);
	for (i = 1; i < t->numel; i++)
		memcpy((char *)t->host + i * esize, t->host, esize);
	return t;
}

rbln_tensor *rbln_tensor_from_data(const void *data, const int64_t *shape, int ndim,
				   rbln_dtype dtype, int device)
{
	rbln_tensor *t;

	if (!data) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_from_data: NULL data");
		return NULL;
	}
	t = tensor_new(shape, ndim, dtype, device, "rbln_tensor_from_data");
	if (t)
		memcpy(t->host, data, t->nbytes);
	return t;
}

rbln_tensor *rbln_tensor_rand(const int64_t *shape, int ndim, rbln_dtype dtype, uint64_t seed,
			      int device)
{
	rbln_tensor *t = tensor_new(shape, ndim, dtype, device, "rbln_tensor_rand");
	size_t esize = rbln_dtype_size(dtype);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	int64_t i;

	if (!t)
		return NULL;
	for (i = 0; i < t->numel; i++) {
		double v;

		/* xorshift64*: reproducible everywhere, good enough for data. */
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		v = (double)((x * 0x2545f4914f6cdd1dull) >> 40) / (double)(1u << 24);
		if (dtype == RBLN_I32 || dtype == RBLN_I8)
			v = floor(v * 256) - 128;
		encode(dtype, v, (char *)t->host + i * esize);
	}
	return t;
}

void rbln_tensor_free(rbln_tensor *t)
{
	struct rbln_dev *d;

	if (!t || !tensor_ok(t, "rbln_tensor_free"))
		return;
	t->magic = 0;
	if (t->device != RBLN_CPU) {
		d = dev_of(t->device);
		if (t->block)
			rbln_allocator_free(d->alloc, t->block, t->last_point, 0);
		pthread_mutex_lock(&d->lock);
		if (t->host) {
			d->lazy_host_bytes -= t->nbytes;
			d->lazy_tensors--;
		}
		rbln_reap_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
	pthread_mutex_destroy(&t->lock);
	host_free(t);
	free(t);
}

rbln_dtype rbln_tensor_dtype(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_dtype") ? t->dtype : (rbln_dtype)-1;
}

int rbln_tensor_ndim(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_ndim") ? t->ndim : RBLN_ERROR_INVALID;
}

int64_t rbln_tensor_dim(const rbln_tensor *t, int dim)
{
	if (!tensor_ok(t, "rbln_tensor_dim"))
		return RBLN_ERROR_INVALID;
	if (dim < 0 || dim >= t->ndim)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_dim: no dimension %d of %d", dim,
				 t->ndim);
	return t->shape[dim];
}

int64_t rbln_tensor_numel(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_numel") ? t->numel : RBLN_ERROR_INVALID;
}

size_t rbln_tensor_nbytes(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_nbytes") ? t->nbytes : 0;
}

int rbln_tensor_device(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_device") ? t->device : RBLN_ERROR_INVALID;
}

bool rbln_tensor_is_materialized(const rbln_tensor *t)
{
	return tensor_ok(t, "rbln_tensor_is_materialized") && t->block;
}

rbln_device_guard rbln_device_enter_of(const rbln_tensor *t)
{
	return rbln_device_enter(t && t->magic == TENSOR_MAGIC ? t->device : -1);
}

/* Staging buffers: this size at most, two in flight at most. */
#define STAGING_CHUNK	(2u << 20)

/*
 * Copies @bytes between @block and the host memory @host by DMA jobs
 * through pinned staging buffers of at most STAGING_CHUNK bytes, so a big
 * tensor never needs its size in pinned memory (offload relies on it).
 * A device-to-host copy completes before this returns unless
 * @non_blocking: then rbln_synchronize() completes it. *@last gets the
 * point of the last job.
 */
static rbln_status transfer(struct rbln_dev *d, struct rbln_block *block, bool to_device,
			    void *host, size_t bytes, bool non_blocking, uint64_t *last)
{
	uint64_t inflight[2] = { 0, 0 }, point = 0;
	struct rbln_host_buf *cmd, *stage;
	struct rbln_pending_copy *pc;
	struct rbln_drm_cmd c;
	size_t off, n, i;
	uint32_t bos[2];
	rbln_status st = RBLN_OK;

	for (off = 0, i = 0; off < bytes && !st; off += n, i++) {
		n = bytes - off < STAGING_CHUNK ? bytes - off : STAGING_CHUNK;
		/* Bound the pinned memory: the chunk before last must be done. */
		st = rbln_wait_point(d, inflight[i % 2]);
		if (st)
			break;
		st = rbln_host_buf_new(d, n, &stage);
		if (st)
			break;
		st = rbln_host_buf_new(d, 4096, &cmd);
		if (st) {
			pthread_mutex_lock(&d->lock);
			rbln_host_buf_release(d, stage, 0);
			pthread_mutex_unlock(&d->lock);
			break;
		}
		if (to_device)
			memcpy(stage->cpu, (char *)host + off, n);
		rbln_drm_cmd_init(&c, cmd->cpu, 4096);
		if (to_device)
			rbln_drm_cmd_dma_copy(&c, rbln_block_va(block) + off, stage->va, n);
		else
			rbln_drm_cmd_dma_copy(&c, stage->va, rbln_block_va(block) + off, n);
		bos[0] = rbln_block_handle(block);
		bos[1] = stage->handle;

		pthread_mutex_lock(&d->lock);
		st = rbln_submit_locked(d, cmd, c.len, bos, 2, &point);
		rbln_host_buf_release(d, cmd, st ? 0 : point);
		if (to_device || st) {
			rbln_host_buf_release(d, stage, st ? 0 : point);
			stage = NULL;
		}
		rbln_reap_locked(d);
		pthread_mutex_unlock(&d->lock);
		if (st)
			break;
		inflight[i % 2] = point;
		if (to_device)
			continue;

		pc = non_blocking ? malloc(sizeof(*pc)) : NULL;
		if (pc) {
			pc->staging = stage;
			pc->point = point;
			pc->dst = (char *)host + off;
			pc->bytes = n;
			pthread_mutex_lock(&d->lock);
			pc->next = d->copies;
			d->copies = pc;
			pthread_mutex_unlock(&d->lock);
			continue;
		}
		st = rbln_wait_point(d, point);
		if (!st)
			memcpy((char *)host + off, stage->cpu, n);
		pthread_mutex_lock(&d->lock);
		rbln_host_buf_release(d, stage, 0);
		pthread_mutex_unlock(&d->lock);
	}
	*last = point;
	return st;
}

static rbln_status materialize_locked(rbln_tensor *t)
{
	struct rbln_dev *d = dev_of(t->device);
	char msg[256];
	uint64_t point;
	rbln_status st;
	int ret;

	if (t->block)
		return RBLN_OK;
	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	ret = rbln_allocator_alloc(d->alloc, t->nbytes ? t->nbytes : 1, 0, &t->block, msg,
				   sizeof(msg));
	if (ret)
		return rbln_fail(ret == -ENOMEM ? RBLN_ERROR_OUT_OF_MEMORY : RBLN_ERROR_DEVICE,
				 "device %d: %s", t->device, ret == -ENOMEM ? msg : strerror(-ret));
	if (t->nbytes) {
		st = transfer(d, t->block, true, t->host, t->nbytes, false, &point);
		if (st) {
			rbln_allocator_free(d->alloc, t->block, 0, 0);
			t->block = NULL;
			return st;
		}
		t->last_point = point;
	}
	pthread_mutex_lock(&d->lock);
	d->lazy_host_bytes -= t->nbytes;
	d->lazy_tensors--;
	d->lazy_materializations++;
	pthread_mutex_unlock(&d->lock);
	host_free(t);
	t->host = NULL;
	return RBLN_OK;
}

rbln_status rbln_tensor_materialize(rbln_tensor *t)
{
	rbln_status st;

	if (!tensor_ok(t, "rbln_tensor_materialize"))
		return RBLN_ERROR_INVALID;
	if (t->device == RBLN_CPU)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_materialize: a CPU tensor");
	pthread_mutex_lock(&t->lock);
	st = materialize_locked(t);
	pthread_mutex_unlock(&t->lock);
	return st;
}

/* Copies @t's data to @out, through the device if it lives there. */
static rbln_status read_locked(rbln_tensor *t, void *out, bool non_blocking)
{
	uint64_t point;
	rbln_status st;

	if (!t->block || !t->nbytes) {
		memcpy(out, t->host, t->nbytes);
		return RBLN_OK;
	}
	st = transfer(dev_of(t->device), t->block, false, out, t->nbytes, non_blocking,
		      &point);
	if (!st)
		t->last_point = point;
	return st;
}

rbln_status rbln_tensor_read(rbln_tensor *t, void *out, size_t size)
{
	rbln_status st;

	if (!tensor_ok(t, "rbln_tensor_read"))
		return RBLN_ERROR_INVALID;
	if (!out || size < t->nbytes)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "rbln_tensor_read: needs %zu bytes at a non-NULL address, got %zu",
				 t->nbytes, out ? size : 0);
	pthread_mutex_lock(&t->lock);
	st = read_locked(t, out, false);
	pthread_mutex_unlock(&t->lock);
	return st;
}

rbln_tensor *rbln_tensor_to(rbln_tensor *t, int device, bool non_blocking)
{
	rbln_tensor *out;
	rbln_status st;

	if (!tensor_ok(t, "rbln_tensor_to"))
		return NULL;
	out = tensor_new(t->shape, t->ndim, t->dtype, device, "rbln_tensor_to");
	if (!out)
		return NULL;
	pthread_mutex_lock(&t->lock);
	/* Into the new tensor's host memory: lazy on a device, final on the CPU. */
	st = read_locked(t, out->host, non_blocking && device == RBLN_CPU);
	pthread_mutex_unlock(&t->lock);
	if (!st && device != RBLN_CPU && t->block) {
		/* The source lived in device memory: so does the copy. */
		st = rbln_tensor_materialize(out);
	}
	if (st) {
		rbln_tensor_free(out);
		return NULL;
	}
	return out;
}

/* Completes every non-blocking copy whose job is done; with d->lock held. */
static void finish_copies_locked(struct rbln_dev *d)
{
	struct rbln_pending_copy **pp = &d->copies, *pc;

	while ((pc = *pp)) {
		if (rbln_point_done(d, pc->point)) {
			memcpy(pc->dst, pc->staging->cpu, pc->bytes);
			*pp = pc->next;
			rbln_host_buf_release(d, pc->staging, 0);
			free(pc);
		} else {
			pp = &pc->next;
		}
	}
}

rbln_status rbln_synchronize(int device)
{
	struct rbln_dev *d = dev_of(device);
	uint64_t point;
	rbln_status st;

	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	pthread_mutex_lock(&d->lock);
	point = d->point;
	pthread_mutex_unlock(&d->lock);
	st = rbln_wait_point(d, point);
	pthread_mutex_lock(&d->lock);
	finish_copies_locked(d);
	rbln_reap_locked(d);
	pthread_mutex_unlock(&d->lock);
	return st;
}

void rbln_residency_get(struct rbln_residency *r)
{
	struct rbln_allocator_stats s;
	struct rbln_dev *d;
	int i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < rbln_physical_device_count(); i++) {
		d = rbln_pdev_if_open(i);
		if (!d)
			continue;
		rbln_allocator_stats(d->alloc, &s);
		r->device_memory_current += s.allocated.current;
		r->device_memory_peak += s.allocated.peak;
		pthread_mutex_lock(&d->lock);
		r->device_bytes += d->device_bytes;
		r->lazy_bytes += d->lazy_host_bytes;
		r->offloaded_bytes += d->offloaded_bytes;
		pthread_mutex_unlock(&d->lock);
	}
}
