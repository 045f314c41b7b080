// SPDX-License-Identifier: MIT
/*
 * rbln_tensor.c - tensors, lazy device allocation, transfers
 *
 * A tensor created on an RBLN device keeps its data in host memory until
 * its first device use; then a block of the device's caching allocator
 * takes it, through staging host buffers and DMA jobs (rbln_staging.c), and
 * the host copy goes. Device-to-host copies come back the same way; a
 * non-blocking one completes in rbln_synchronize().
 */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_explain.h"
#include "rbln_internal.h"
#include "rbln_staging.h"

/* Data of @t's shards on devices (sign 1) or gone from there (-1). */
static void account_lazy(rbln_tensor *t, int sign)
{
	int i;

	for (i = 0; i < t->nshards; i++) {
		struct rbln_dev *d = t->shards[i].dev;

		pthread_mutex_lock(&d->lock);
		d->lazy_host_bytes += sign * (int64_t)t->shards[i].nbytes;
		if (t->offload_path)
			d->offloaded_bytes += sign * (int64_t)t->shards[i].nbytes;
		if (!i)
			d->lazy_tensors += sign;
		pthread_mutex_unlock(&d->lock);
	}
}

/* Frees a tensor's host memory, heap or offload file. */
static void host_free(rbln_tensor *t)
{
	if (t->offload_path && t->host) {
		rbln_offload_free(t->host, t->nbytes, t->offload_path);
		free(t->offload_path);
		t->offload_path = NULL;
	} else {
		free(t->host);
	}
	t->host = NULL;
}

bool rbln_tensor_ok(const rbln_tensor *t, const char *fn)
{
	if (!t) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: NULL tensor", fn);
		return false;
	}
	if (t->magic != RBLN_TENSOR_MAGIC) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: not a live tensor (freed?)", fn);
		return false;
	}
	return true;
}

/*
 * Tensor structs never go back to malloc: a freed one keeps its magic
 * cleared, so a stale handle passed to the API is caught instead of being
 * undefined behaviour. They are reused first in, first out, once
 * QUARANTINE others have been freed after them.
 */
#define QUARANTINE	1024

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static rbln_tensor *pool_head, *pool_tail;
static size_t pool_len;

static rbln_tensor *tensor_alloc(int nshards)
{
	struct rbln_shard *shards = calloc(nshards, sizeof(*shards));
	rbln_tensor *t = NULL;

	if (!shards)
		return NULL;
	pthread_mutex_lock(&pool_lock);
	if (pool_len > QUARANTINE) {
		t = pool_head;
		pool_head = t->pool_next;
		pool_len--;
	}
	pthread_mutex_unlock(&pool_lock);
	if (t)
		memset(t, 0, sizeof(*t));
	else
		t = calloc(1, sizeof(*t));
	if (!t) {
		free(shards);
		return NULL;
	}
	t->shards = shards;
	return t;
}

/* A live tensor of @shape, @dtype and @numel elements (@nbytes) on @device, and its lock. */
static void tensor_init(rbln_tensor *t, const int64_t *shape, int ndim, rbln_dtype dtype,
			int64_t numel, size_t nbytes, int device)
{
	t->magic = RBLN_TENSOR_MAGIC;
	t->refs = 1;
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(*shape));
	t->numel = numel;
	t->nbytes = nbytes;
	t->device = device;
	pthread_mutex_init(&t->lock, NULL);
}

static void tensor_release(rbln_tensor *t)
{
	t->magic = 0;
	free(t->shards);
	t->shards = NULL;
	t->pool_next = NULL;
	pthread_mutex_lock(&pool_lock);
	if (pool_len)
		pool_tail->pool_next = t;
	else
		pool_head = t;
	pool_tail = t;
	pool_len++;
	pthread_mutex_unlock(&pool_lock);
}

/*
 * Splits the first dimension over @l's members as torch.chunk does:
 * ceil(rows / n) rows each, the last shards smaller or empty. A 0-d
 * tensor is one row.
 */
static void shard_layout(rbln_tensor *t, const struct rbln_ldev *l)
{
	int64_t rows = t->ndim ? t->shape[0] : 1, chunk, row = 0;
	size_t row_bytes = rows ? t->nbytes / rows : 0;
	int i;

	t->nshards = l ? l->nmembers : 1;
	chunk = (rows + t->nshards - 1) / t->nshards;
	for (i = 0; i < t->nshards; i++) {
		struct rbln_shard *s = &t->shards[i];

		s->dev = l ? l->members[i] : NULL;
		s->row0 = row;
		s->rows = rows - row < chunk ? rows - row : chunk;
		s->offset = row * row_bytes;
		s->nbytes = s->rows * row_bytes;
		row += s->rows;
	}
}

rbln_status rbln_shard_alloc(struct rbln_shard *s, int device, const char *op)
{
	char msg[256];
	int ret;

	ret = rbln_allocator_alloc(s->dev->alloc, s->nbytes, 0, &s->block, msg, sizeof(msg));
	if (!ret)
		return RBLN_OK;
	return rbln_fail(rbln_errno_status(ret), "%s%sdevice %d: %s", op ? op : "",
			 op ? ": " : "", device, ret == -ENOMEM ? msg : strerror(-ret));
}

/* Device memory for every non-empty shard of @t. */
static rbln_status alloc_blocks(rbln_tensor *t)
{
	rbln_status st;
	int i;

	for (i = 0; i < t->nshards; i++) {
		if (!t->shards[i].nbytes || t->shards[i].block)
			continue;
		st = rbln_shard_alloc(&t->shards[i], t->device, NULL);
		if (st) {
			while (i--) {
				if (t->shards[i].block)
					rbln_allocator_free(t->shards[i].dev->alloc,
							    t->shards[i].block, 0, 0);
				t->shards[i].block = NULL;
			}
			return st;
		}
	}
	for (i = 0; i < t->nshards; i++) {
		pthread_mutex_lock(&t->shards[i].dev->lock);
		t->shards[i].dev->device_bytes += t->shards[i].nbytes;
		pthread_mutex_unlock(&t->shards[i].dev->lock);
	}
	return RBLN_OK;
}

/*
 * A new tensor; with @host, its data in host memory (lazy on a device),
 * else (device tensors only) in device memory at once.
 */
static rbln_tensor *tensor_new(const int64_t *shape, int ndim, rbln_dtype dtype, int device,
			       bool host, const char *fn)
{
	size_t esize = rbln_dtype_size(dtype);
	struct rbln_ldev *l = NULL;
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
	if (device != RBLN_CPU) {
		l = rbln_ldev_get(device);
		if (!l)
			return NULL;
	}

	t = tensor_alloc(l ? l->nmembers : 1);
	if (!t) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
		return NULL;
	}
	tensor_init(t, shape, ndim, dtype, numel, numel * esize, device);
	shard_layout(t, l);
	if (!host) {
		struct rbln_graph *g = rbln_capture_of(device);

		/* While capturing, memory a graph recycled comes first. */
		if (g)
			rbln_graph_reuse(g, t);
		if (alloc_blocks(t)) {
			tensor_release(t);
			return NULL;
		}
		t->capture = g ? rbln_graph_capture_id(g) : 0;
		t->materialized = true;
		return t;
	}
	if (device != RBLN_CPU && t->nbytes && rbln_offload_active()) {
		char path[PATH_MAX];

		t->host = rbln_offload_alloc(t->nbytes, path);
		t->offload_path = t->host ? strdup(path) : NULL;
		if (t->host && !t->offload_path) {
			rbln_offload_free(t->host, t->nbytes, path);
			t->host = NULL;
		}
		if (!t->host) {
			tensor_release(t);
			return NULL;
		}
	} else {
		t->host = malloc(t->nbytes ? t->nbytes : 1);
	}
	if (!t->host) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of host memory",
			  fn, t->nbytes);
		tensor_release(t);
		return NULL;
	}
	if (device != RBLN_CPU)
		account_lazy(t, 1);
	return t;
}

/* Writes elements [@first, @first + @n) of @t's host memory; @arg is the filler's. */
typedef void (*fill_fn)(rbln_tensor *t, int64_t first, int64_t n, void *arg);

/*
 * Fills @t's host memory with @fill: offloaded, a window at a time, each
 * sent to the file as soon as it is written (rbln_offload_wrote()).
 */
static rbln_tensor *fill_host(rbln_tensor *t, fill_fn fill, void *arg)
{
	struct rbln_offload_writer w;
	size_t esize;
	int64_t step, i, n;

	if (!t)
		return NULL;
	if (!t->offload_path) {
		fill(t, 0, t->numel, arg);
		return t;
	}
	esize = rbln_dtype_size(t->dtype);
	step = RBLN_OFFLOAD_WINDOW / esize;
	rbln_offload_write_begin(&w, t->host, t->offload_path);
	for (i = 0; i < t->numel; i += n) {
		n = t->numel - i < step ? t->numel - i : step;
		fill(t, i, n, arg);
		rbln_offload_wrote(&w, i * esize, n * esize);
	}
	rbln_offload_write_end(&w);
	return t;
}

rbln_tensor *rbln_tensor_new_device(const int64_t *shape, int ndim, rbln_dtype dtype,
				    int device, const char *fn)
{
	return tensor_new(shape, ndim, dtype, device, false, fn);
}

/* Is the calling thread capturing a graph on @device? */
static bool captured(int device)
{
	return device != RBLN_CPU && rbln_capture_of(device);
}

/* Refuses @what on @t while the calling thread captures a graph on its device. */
static rbln_status refuse_captured(const rbln_tensor *t, const char *what)
{
	return t->device == RBLN_CPU ? RBLN_OK : rbln_capture_refuse(t->device, NULL, what);
}

/*
 * While a graph is captured on @device, a tensor created there lives in
 * device memory from the start, which the graph keeps (its memory pool):
 * lazy host memory would need a copy that a replay cannot make. Filled
 * with @value by a captured fill when @fill.
 */
static rbln_tensor *captured_new(const int64_t *shape, int ndim, rbln_dtype dtype, int device,
				 bool fill, double value, const char *fn)
{
	struct rbln_graph *g = rbln_capture_of(device);
	rbln_tensor *t;
	rbln_status st;

	st = rbln_capture_valid(g, fn);
	if (st)
		return NULL;
	t = tensor_new(shape, ndim, dtype, device, false, fn);
	if (!t)
		return NULL;
	st = fill ? rbln_fill(t, value) : rbln_graph_hold(g, t);
	if (st) {
		rbln_capture_failed(g, st);
		rbln_tensor_free(t);
		return NULL;
	}
	return t;
}

rbln_tensor *rbln_tensor_empty(const int64_t *shape, int ndim, rbln_dtype dtype, int device)
{
	if (captured(device))
		return captured_new(shape, ndim, dtype, device, false, 0, "rbln_tensor_empty");
	return tensor_new(shape, ndim, dtype, device, true, "rbln_tensor_empty");
}

rbln_tensor *rbln_tensor_zeros(const int64_t *shape, int ndim, rbln_dtype dtype, int device)
{
	rbln_tensor *t;

	if (captured(device))
		return captured_new(shape, ndim, dtype, device, true, 0, "rbln_tensor_zeros");
	t = tensor_new(shape, ndim, dtype, device, true, "rbln_tensor_zeros");
	/* A new offload file reads as zeros already: writing them would only cost RAM. */
	if (t && !t->offload_path)
		memset(t->host, 0, t->nbytes);
	return t;
}

static void fill_value(rbln_tensor *t, int64_t first, int64_t n, void *value)
{
	size_t esize = rbln_dtype_size(t->dtype);
	int64_t i;

	for (i = first; i < first + n; i++)
		memcpy((char *)t->host + i * esize, value, esize);
}

rbln_tensor *rbln_tensor_full(const int64_t *shape, int ndim, rbln_dtype dtype, double value,
			      int device)
{
	unsigned char encoded[sizeof(double)];

	if (captured(device))
		return captured_new(shape, ndim, dtype, device, true, value, "rbln_tensor_full");
	rbln_dtype_encode(dtype, value, encoded);
	return fill_host(tensor_new(shape, ndim, dtype, device, true, "rbln_tensor_full"),
			 fill_value, encoded);
}

static void fill_data(rbln_tensor *t, int64_t first, int64_t n, void *data)
{
	size_t esize = rbln_dtype_size(t->dtype);

	memcpy((char *)t->host + first * esize, (const char *)data + first * esize, n * esize);
}

rbln_tensor *rbln_tensor_from_data(const void *data, const int64_t *shape, int ndim,
				   rbln_dtype dtype, int device)
{
	if (!data) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_from_data: NULL data");
		return NULL;
	}
	if (captured(device)) {
		rbln_capture_refuse(device, NULL, "rbln_tensor_from_data: a copy from the host");
		return NULL;
	}
	return fill_host(tensor_new(shape, ndim, dtype, device, true, "rbln_tensor_from_data"),
			 fill_data, (void *)data);
}

/* xorshift64*: reproducible everywhere, good enough for data. */
static void fill_random(rbln_tensor *t, int64_t first, int64_t n, void *state)
{
	size_t esize = rbln_dtype_size(t->dtype);
	uint64_t *x = state;
	int64_t i;
	double v;

	for (i = first; i < first + n; i++) {
		*x ^= *x >> 12;
		*x ^= *x << 25;
		*x ^= *x >> 27;
		v = (double)((*x * 0x2545f4914f6cdd1dull) >> 40) / (double)(1u << 24);
		if (t->dtype == RBLN_I32 || t->dtype == RBLN_I8)
			v = floor(v * 256) - 128;
		rbln_dtype_encode(t->dtype, v, (char *)t->host + i * esize);
	}
}

rbln_tensor *rbln_tensor_rand(const int64_t *shape, int ndim, rbln_dtype dtype, uint64_t seed,
			      int device)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	if (captured(device)) {
		rbln_capture_refuse(device, NULL, "rbln_tensor_rand: a copy from the host");
		return NULL;
	}
	return fill_host(tensor_new(shape, ndim, dtype, device, true, "rbln_tensor_rand"),
			 fill_random, &x);
}

/* Frees @t once nothing holds it: neither the caller nor a graph. */
static void tensor_destroy(rbln_tensor *t)
{
	rbln_tensor *base = t->base;
	int i;

	if (base) {
		/* The blocks are the base's: they go with it, after the view's last jobs. */
		for (i = 0; i < t->nshards; i++) {
			uint64_t point = __atomic_load_n(&t->shards[i].last_point, __ATOMIC_ACQUIRE);

			rbln_shard_used(&base->shards[i], point);
		}
		pthread_mutex_destroy(&t->lock);
		tensor_release(t);
		__atomic_sub_fetch(&base->views, 1, __ATOMIC_RELAXED);
		rbln_tensor_put(base);
		return;
	}

	if (t->device != RBLN_CPU && t->host)
		account_lazy(t, -1);
	for (i = 0; i < t->nshards && t->device != RBLN_CPU; i++) {
		struct rbln_shard *s = &t->shards[i];
		struct rbln_dev *d = s->dev;

		if (s->block)
			rbln_allocator_free(d->alloc, s->block,
					    __atomic_load_n(&s->last_point, __ATOMIC_ACQUIRE), 0);
		pthread_mutex_lock(&d->lock);
		if (s->block)
			d->device_bytes -= s->nbytes;
		rbln_reap_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
	pthread_mutex_destroy(&t->lock);
	host_free(t);
	tensor_release(t);
}

void rbln_tensor_get(rbln_tensor *t)
{
	__atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
}

void rbln_tensor_put(rbln_tensor *t)
{
	if (!__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL))
		tensor_destroy(t);
}

/*
 * The handle dies at once; what a graph holds of it stays until the graph
 * goes, except the memory of a tensor its own capture made, which later
 * ops of the capture may reuse.
 */
void rbln_tensor_free(rbln_tensor *t)
{
	struct rbln_graph *g;

	if (!t || !rbln_tensor_ok(t, "rbln_tensor_free"))
		return;
	t->magic = 0;
	g = t->capture ? rbln_capture_of(t->device) : NULL;
	/* Not while views of it still read its memory. */
	if (g && t->capture == rbln_graph_capture_id(g) &&
	    !__atomic_load_n(&t->views, __ATOMIC_RELAXED))
		rbln_graph_recycle(g, t);
	rbln_tensor_put(t);
}

rbln_tensor *rbln_tensor_view(rbln_tensor *base, const int64_t *shape, int ndim, rbln_dtype dtype)
{
	size_t esize = rbln_dtype_size(dtype);
	int64_t numel = 1;
	rbln_tensor *t;
	int i;

	if (!rbln_tensor_ok(base, "rbln_tensor_view"))
		return NULL;
	if (!esize) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_view: unknown dtype %d", (int)dtype);
		return NULL;
	}
	if (base->device == RBLN_CPU) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_view: a CPU tensor has no device memory");
		return NULL;
	}
	if (ndim < 0 || ndim > RBLN_MAX_DIMS || (ndim && !shape)) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_view: %d dimensions (0 to %d, with a shape)",
			  ndim, RBLN_MAX_DIMS);
		return NULL;
	}
	for (i = 0; i < ndim; i++) {
		if (shape[i] < 0 || (shape[i] && numel > (int64_t)(base->nbytes / esize) / shape[i])) {
			numel = -1;
			break;
		}
		numel *= shape[i];
	}
	if (numel < 0 || numel * esize != base->nbytes) {
		rbln_fail(RBLN_ERROR_INVALID,
			  "rbln_tensor_view: the shape and dtype do not cover the tensor's %zu bytes",
			  base->nbytes);
		return NULL;
	}
	/* A view's shards are its base's: they must split its rows the same way. */
	if (base->nshards > 1 && (!ndim || !base->ndim || shape[0] != base->shape[0])) {
		rbln_fail(RBLN_ERROR_UNSUPPORTED,
			  "rbln_tensor_view: a view of a tensor sharded over %d devices keeps its first dimension",
			  base->nshards);
		return NULL;
	}
	if (base->base)
		base = base->base;
	if (rbln_tensor_ensure_device(base))
		return NULL;

	t = tensor_alloc(base->nshards);
	if (!t) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_tensor_view: out of host memory");
		return NULL;
	}
	/* The base's blocks, in rows of the view's shape (the same rows when sharded). */
	memcpy(t->shards, base->shards, base->nshards * sizeof(*t->shards));
	for (i = 0; i < base->nshards; i++)
		t->shards[i].last_point = 0;
	if (base->nshards == 1)
		t->shards[0].rows = ndim ? shape[0] : 1;
	tensor_init(t, shape, ndim, dtype, numel, base->nbytes, base->device);
	t->materialized = true;
	t->nshards = base->nshards;
	t->base = base;
	rbln_tensor_get(base);
	__atomic_add_fetch(&base->views, 1, __ATOMIC_RELAXED);
	return t;
}

rbln_dtype rbln_tensor_dtype(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_dtype") ? t->dtype : (rbln_dtype)-1;
}

int rbln_tensor_ndim(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_ndim") ? t->ndim : RBLN_ERROR_INVALID;
}

int64_t rbln_tensor_dim(const rbln_tensor *t, int dim)
{
	if (!rbln_tensor_ok(t, "rbln_tensor_dim"))
		return RBLN_ERROR_INVALID;
	if (dim < 0 || dim >= t->ndim)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_dim: no dimension %d of %d", dim,
				 t->ndim);
	return t->shape[dim];
}

int64_t rbln_tensor_numel(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_numel") ? t->numel : RBLN_ERROR_INVALID;
}

size_t rbln_tensor_nbytes(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_nbytes") ? t->nbytes : 0;
}

int rbln_tensor_device(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_device") ? t->device : RBLN_ERROR_INVALID;
}

bool rbln_tensor_is_materialized(const rbln_tensor *t)
{
	return rbln_tensor_ok(t, "rbln_tensor_is_materialized") &&
	       __atomic_load_n(&t->materialized, __ATOMIC_ACQUIRE);
}

rbln_device_guard rbln_device_enter_of(const rbln_tensor *t)
{
	if (!rbln_tensor_ok(t, "rbln_device_enter_of"))
		return (rbln_device_guard){ .previous = -1, .status = RBLN_ERROR_INVALID };
	return rbln_device_enter(t->device);
}

void rbln_shard_used(struct rbln_shard *s, uint64_t point)
{
	uint64_t seen = __atomic_load_n(&s->last_point, __ATOMIC_RELAXED);

	while (seen < point &&
	       !__atomic_compare_exchange_n(&s->last_point, &seen, point, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/* Copies @bytes at byte @offset of shard @s's block from or to @host. */
static rbln_status shard_transfer(struct rbln_shard *s, bool to_device, size_t offset,
				  void *host, size_t bytes, bool non_blocking, bool cold)
{
	uint64_t point = 0;
	rbln_status st;

	st = rbln_staging_copy(s->dev, rbln_block_handle(s->block),
			       rbln_block_va(s->block) + offset, to_device, host, bytes,
			       non_blocking, cold, &point);
	rbln_shard_used(s, point);
	return st;
}

static rbln_status materialize_locked(rbln_tensor *t)
{
	struct rbln_dev *d0 = t->shards[0].dev;
	rbln_status st;
	int i;

	if (t->materialized)
		return RBLN_OK;
	st = alloc_blocks(t);
	if (st)
		return st;
	/* Shards go to their devices at once: a to-device transfer does not wait. */
	for (i = 0; i < t->nshards && !st; i++)
		if (t->shards[i].nbytes)
			st = shard_transfer(&t->shards[i], true, 0,
					    (char *)t->host + t->shards[i].offset,
					    t->shards[i].nbytes, false, t->offload_path != NULL);
	if (st) {
		for (i = 0; i < t->nshards; i++) {
			struct rbln_shard *s = &t->shards[i];

			if (!s->block)
				continue;
			rbln_allocator_free(s->dev->alloc, s->block,
					    __atomic_load_n(&s->last_point, __ATOMIC_ACQUIRE), 0);
			s->block = NULL;
			pthread_mutex_lock(&s->dev->lock);
			s->dev->device_bytes -= s->nbytes;
			pthread_mutex_unlock(&s->dev->lock);
		}
		return st;
	}
	account_lazy(t, -1);
	pthread_mutex_lock(&d0->lock);
	d0->lazy_materializations++;
	pthread_mutex_unlock(&d0->lock);
	host_free(t);
	__atomic_store_n(&t->materialized, true, __ATOMIC_RELEASE);
	return RBLN_OK;
}

rbln_status rbln_tensor_materialize(rbln_tensor *t)
{
	if (!rbln_tensor_ok(t, "rbln_tensor_materialize"))
		return RBLN_ERROR_INVALID;
	if (t->device == RBLN_CPU)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_materialize: a CPU tensor");
	if (!__atomic_load_n(&t->materialized, __ATOMIC_ACQUIRE) &&
	    refuse_captured(t, "rbln_tensor_materialize: a copy from the host"))
		return RBLN_ERROR_CAPTURE;
	return rbln_tensor_ensure_device(t);
}

rbln_status rbln_tensor_ensure_device(rbln_tensor *t)
{
	rbln_status st;

	if (__atomic_load_n(&t->materialized, __ATOMIC_ACQUIRE))
		return RBLN_OK;
	pthread_mutex_lock(&t->lock);
	st = materialize_locked(t);
	pthread_mutex_unlock(&t->lock);
	return st;
}

/* Waits for @d's work up to @point and completes the copies it finished. */
static rbln_status finish_to(struct rbln_dev *d, uint64_t point)
{
	rbln_status st = rbln_wait_point(d, point);

	pthread_mutex_lock(&d->lock);
	rbln_staging_finish_locked(d);
	rbln_reap_locked(d);
	pthread_mutex_unlock(&d->lock);
	return st;
}

/*
 * Copies @t's data to @out, through the devices if it lives there: every
 * shard's copy is queued before any is waited for, so members work at once.
 */
static rbln_status read_locked(rbln_tensor *t, void *out, bool non_blocking)
{
	rbln_status st = RBLN_OK;
	int i;

	if (!t->materialized) {
		memcpy(out, t->host, t->nbytes);
		return RBLN_OK;
	}
	for (i = 0; i < t->nshards && !st; i++)
		if (t->shards[i].nbytes)
			st = shard_transfer(&t->shards[i], false, 0,
					    (char *)out + t->shards[i].offset,
					    t->shards[i].nbytes,
					    non_blocking || t->nshards > 1, false);
	if (non_blocking || t->nshards == 1)
		return st;
	for (i = 0; i < t->nshards; i++) {
		rbln_status s = finish_to(t->shards[i].dev, t->shards[i].last_point);

		st = st ? st : s;
	}
	return st;
}

rbln_status rbln_tensor_write(rbln_tensor *t, size_t offset, const void *data, size_t size)
{
	rbln_status st = RBLN_OK;
	int i;

	if (!rbln_tensor_ok(t, "rbln_tensor_write"))
		return RBLN_ERROR_INVALID;
	if ((!data && size) || offset > t->nbytes || size > t->nbytes - offset)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "rbln_tensor_write: %zu bytes at %zu %s of %zu bytes", size, offset,
				 data || !size ? "are not within the tensor" : "from NULL", t->nbytes);
	if (!size)
		return RBLN_OK;
	if (refuse_captured(t, "rbln_tensor_write: a copy from the host"))
		return RBLN_ERROR_CAPTURE;
	pthread_mutex_lock(&t->lock);
	if (t->host) {
		/* A CPU tensor, or a lazy one: it stays lazy. */
		memcpy((char *)t->host + offset, data, size);
	} else {
		/* Into each shard the range covers, by DMA. */
		for (i = 0; i < t->nshards && !st; i++) {
			struct rbln_shard *s = &t->shards[i];
			size_t lo = offset > s->offset ? offset : s->offset;
			size_t hi = offset + size < s->offset + s->nbytes ? offset + size :
									   s->offset + s->nbytes;

			if (lo < hi)
				st = shard_transfer(s, true, lo - s->offset,
						    (char *)data + (lo - offset), hi - lo, false, false);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

rbln_status rbln_tensor_read(rbln_tensor *t, void *out, size_t size)
{
	rbln_status st;

	if (!rbln_tensor_ok(t, "rbln_tensor_read"))
		return RBLN_ERROR_INVALID;
	if (!out || size < t->nbytes)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "rbln_tensor_read: needs %zu bytes at a non-NULL address, got %zu",
				 t->nbytes, out ? size : 0);
	if (refuse_captured(t, "rbln_tensor_read: a copy to the host"))
		return RBLN_ERROR_CAPTURE;
	pthread_mutex_lock(&t->lock);
	st = read_locked(t, out, false);
	pthread_mutex_unlock(&t->lock);
	return st;
}

rbln_status rbln_tensor_host_data(rbln_tensor *t, void **data, bool *from_device)
{
	rbln_status st;

	*from_device = false;
	if (t->device == RBLN_CPU) {
		*data = t->host;
		return RBLN_OK;
	}
	*data = malloc(t->nbytes ? t->nbytes : 1);
	if (!*data)
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory",
				 t->nbytes);
	pthread_mutex_lock(&t->lock);
	*from_device = t->materialized;
	st = read_locked(t, *data, false);
	pthread_mutex_unlock(&t->lock);
	if (st) {
		free(*data);
		*data = NULL;
	}
	return st;
}

rbln_status rbln_tensor_read_element(rbln_tensor *t, int64_t index, void *out)
{
	size_t esize = rbln_dtype_size(t->dtype), at = index * esize;
	rbln_status st = RBLN_OK;
	int i;

	pthread_mutex_lock(&t->lock);
	if (!t->materialized) {
		memcpy(out, (char *)t->host + at, esize);
	} else {
		for (i = 0; i < t->nshards; i++)
			if (at >= t->shards[i].offset && at < t->shards[i].offset + t->shards[i].nbytes)
				break;
		st = shard_transfer(&t->shards[i], false, at - t->shards[i].offset, out, esize,
				    false, false);
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

rbln_tensor *rbln_tensor_to(rbln_tensor *t, int device, bool non_blocking)
{
	rbln_tensor *out;
	rbln_status st = RBLN_OK;

	if (!rbln_tensor_ok(t, "rbln_tensor_to"))
		return NULL;
	if (refuse_captured(t, "rbln_tensor_to: a copy through the host") ||
	    (captured(device) &&
	     rbln_capture_refuse(device, NULL, "rbln_tensor_to: a copy through the host")))
		return NULL;
	out = tensor_new(t->shape, t->ndim, t->dtype, device, true, "rbln_tensor_to");
	if (!out)
		return NULL;
	pthread_mutex_lock(&t->lock);
	/* Into the new tensor's host memory: lazy on a device, final on the CPU. */
	if (out->offload_path && !t->materialized)
		fill_host(out, fill_data, t->host);	/* to its file as it goes */
	else
		st = read_locked(t, out->host, non_blocking && device == RBLN_CPU);
	pthread_mutex_unlock(&t->lock);
	if (!st && device != RBLN_CPU && t->materialized) {
		/* The source lived in device memory: so does the copy. */
		st = rbln_tensor_materialize(out);
	}
	if (st) {
		rbln_tensor_free(out);
		return NULL;
	}
	return out;
}

rbln_status rbln_synchronize(int device)
{
	struct rbln_ldev *l = rbln_ldev_get(device);
	rbln_status st = RBLN_OK;
	uint64_t point;
	int i;

	if (!l)
		return rbln_last_status();
	if (rbln_capture_refuse(l->index, NULL, "rbln_synchronize"))
		return RBLN_ERROR_CAPTURE;
	for (i = 0; i < l->nmembers; i++) {
		struct rbln_dev *d = l->members[i];
		rbln_status s;

		pthread_mutex_lock(&d->lock);
		point = d->point;
		pthread_mutex_unlock(&d->lock);
		s = finish_to(d, point);
		st = st ? st : s;
		/* A collective that failed after its call returned (rbln_comm.c): done by now. */
		pthread_mutex_lock(&d->async_lock);
		if (d->async_status && !st) {
			st = rbln_fail(d->async_status, "%s", d->async_error);
			d->async_status = RBLN_OK;
		}
		pthread_mutex_unlock(&d->async_lock);
	}
	return st;
}

/* Is @d the first member of its logical device that is open? */
static bool first_open_member(const struct rbln_dev *d)
{
	int k;

	for (k = 0; k < d->ldev->nmembers; k++)
		if (rbln_pdev_if_open(rbln_pdev_index(d->ldev->members[k])))
			return d->ldev->members[k] == d;
	return false;
}

/* Device memory by logical device: one of several members counts its group's figures. */
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
		if (!d->ldev || d->ldev->nmembers == 1)
			rbln_allocator_stats(d->alloc, &s);
		else if (first_open_member(d))
			rbln_alloc_group_stats(&d->ldev->group, &s);
		else
			s.allocated.current = s.allocated.peak = 0;
		r->device_memory_current += s.allocated.current;
		r->device_memory_peak += s.allocated.peak;
		pthread_mutex_lock(&d->lock);
		r->device_bytes += d->device_bytes;
		r->lazy_bytes += d->lazy_host_bytes;
		r->offloaded_bytes += d->offloaded_bytes;
		pthread_mutex_unlock(&d->lock);
	}
}
