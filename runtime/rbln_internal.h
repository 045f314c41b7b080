/* SPDX-License-Identifier: MIT */
/*
 * rbln_internal.h - what librbln's units share
 */
#ifndef RBLN_INTERNAL_H
#define RBLN_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>

#include <rbln_drm.h>

#include "rbln/rbln.h"
#include "rbln_alloc.h"

/*
 * JSON (rbln_json.c): adds @val (NULL: creating it failed) to object @obj
 * under @key, or appends it to array @a; the container then owns it.
 * False on failure, @val freed.
 */
struct json_object;
bool rbln_json_add(struct json_object *obj, const char *key, struct json_object *val);
bool rbln_json_push(struct json_object *a, struct json_object *val);

/*
 * Makes room in the array *@v (of @size-byte elements, *@cap of them) for
 * @need; false when out of memory, the array as it was.
 */
static inline bool rbln_grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	p = realloc(*v, n * size);
	if (!p)
		return false;
	*v = p;
	*cap = n;
	return true;
}

/* Sets the calling thread's last error; returns @status. */
RBLN_INTERNAL rbln_status rbln_fail(rbln_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The status a negative errno from the driver or the allocator maps to. */
RBLN_INTERNAL rbln_status rbln_errno_status(int err);

/*
 * A host buffer object the device reaches (a command buffer or a staging
 * buffer), freed once the job that used it is done.
 */
struct rbln_host_buf {
	uint32_t handle;
	uint64_t va;
	void *cpu;
	uint64_t size;
	uint64_t point;			/* last job using it; 0: none */
	bool staging;			/* one of the device's staging buffers */
	struct rbln_host_buf *next;	/* in the device's deferred list or staging pool */
};

/* Jobs in flight on a device at most: one binary syncobj each (rbln_job.c). */
#define RBLN_SYNC_SLOTS	256

/*
 * struct rbln_dev - one physical device as the runtime uses it, opened on
 * first use. @lock protects everything below it; the allocator has its
 * own lock, and is called without @lock held.
 */
struct rbln_dev {
	unsigned int minor;
	pthread_once_t once;
	rbln_status open_status;
	char open_error[160];		/* why the allocator's options were refused */
	bool ready;			/* opened: set last, with release */
	uint32_t max_cmd;		/* RBLN_PARAM_MAX_CMD_SIZE: a job's commands at most */
	struct rbln_drm_device *drm;
	uint32_t queue;
	uint32_t slots[RBLN_SYNC_SLOTS];	/* binary syncobjs: job n signals n % SLOTS */
	uint64_t mem_size;		/* RBLN_PARAM_DEVICE_MEMORY_SIZE */
	uint32_t bind_sync;		/* binary syncobj of the allocator's binds, under its lock */
	struct rbln_allocator *alloc;
	struct rbln_ldev *ldev;		/* the logical device it is a member of; NULL: unused */

	pthread_mutex_t lock;
	uint64_t point;			/* last point submitted */
	uint64_t completed;		/* a point known to be done (atomic) */
	uint64_t failed_seen;		/* RBLN_PARAM_FAILED_JOBS last reported (atomic) */
	struct rbln_cmd_ring *ring;	/* where command buffers go */
	struct rbln_host_buf *deferred;	/* host buffers of jobs in flight */
	struct rbln_host_buf *staging;	/* idle staging buffers (rbln_staging.c) */
	unsigned int nstaging;
	unsigned int staging_live;	/* staging buffers in existence */
	struct rbln_stat staging_bytes;	/* their bytes: memory_stats()' staging.* */
	struct rbln_pending_copy *copies;	/* non-blocking copies' last chunks */
	struct rbln_peer_ref *peers;	/* other members' objects imported here */
	size_t npeers, cap_peers;
	int64_t lazy_host_bytes, lazy_tensors, lazy_materializations;
	int64_t device_bytes;		/* tensor data in device memory */
	int64_t offloaded_bytes;	/* lazy bytes that are file-backed */
	/*
	 * A collective that failed after its call returned (rbln_comm.c's
	 * progress thread), for the next rbln_synchronize(). Its own lock:
	 * the progress thread never takes d->lock.
	 */
	pthread_mutex_t async_lock;
	rbln_status async_status;
	char async_error[512];
};

/* An object of another member imported into a device's file, and its users. */
struct rbln_peer_ref {
	uint32_t handle;
	unsigned int refs;
	uint64_t va;		/* in the importing file */
};

/*
 * Imports the object of member @from holding byte @offset of @block into
 * @to's file, or takes one more reference to it: the handle in *@handle,
 * its device address there in *@va, that byte's offset in it in *@at.
 * rbln_peer_put() drops the reference; the last closes the handle.
 */
RBLN_INTERNAL rbln_status rbln_peer_get(struct rbln_dev *to, struct rbln_dev *from,
					struct rbln_block *block, uint64_t offset, uint32_t *handle,
					uint64_t *va, uint64_t *at);
RBLN_INTERNAL void rbln_peer_put(struct rbln_dev *to, uint32_t handle);

/*
 * A logical device, what the API's device indices name: the physical
 * devices a tensor on it is sharded over, in shard order (one unless
 * RBLN_NPUS_PER_DEVICE or RBLN_DEVICE_MAP group them).
 */
#define RBLN_MAX_MEMBERS 16
struct rbln_ldev {
	int index;
	int nmembers;
	struct rbln_dev *members[RBLN_MAX_MEMBERS];
	/*
	 * With several members: their allocators' current values and peaks
	 * together, which each member's allocator keeps as it changes
	 * (rbln_allocator_join()), so that a peak is a value that happened.
	 */
	struct rbln_alloc_group group;
};

/* The logical device @device (-1: current) with every member opened; NULL and an error if none. */
RBLN_INTERNAL struct rbln_ldev *rbln_ldev_get(int device);
/* Physical device @physical if it has been opened, else NULL: never opens one. */
struct rbln_dev *rbln_pdev_if_open(int physical);
/* The physical index of @d. */
int rbln_pdev_index(const struct rbln_dev *d);

/*
 * A tensor is sharded over the members of its logical device on the first
 * dimension: shard i holds rows [row0, row0 + rows) at byte @offset of the
 * tensor's data. A CPU tensor, or one on a single device, has one shard.
 */
struct rbln_shard {
	struct rbln_dev *dev;		/* NULL on the CPU */
	int64_t row0, rows;
	size_t offset, nbytes;
	struct rbln_block *block;	/* device memory once materialized */
	uint64_t last_point;		/* last job using block (atomic) */
};

struct rbln_tensor {
	uint64_t magic;
	rbln_dtype dtype;
	int ndim;
	int64_t shape[RBLN_MAX_DIMS];
	int64_t numel;
	size_t nbytes;
	int device;			/* RBLN_CPU or a logical device index */
	pthread_mutex_t lock;		/* protects host and the shards' blocks */
	void *host;			/* CPU tensors; device tensors until materialized */
	char *offload_path;		/* host is a mapping of this file (offload) */
	bool materialized;
	int nshards;
	struct rbln_shard *shards;
	unsigned int refs;		/* the caller's, until rbln_tensor_free(), and each graph's */
	uint64_t capture;		/* the capture that made it (rbln_graph_capture_id), or 0 */
	rbln_tensor *pool_next;		/* freed: in the pool of tensor structs */
	rbln_tensor *base;		/* a view: whose blocks its shards point to */
	unsigned int views;		/* views of this tensor still alive (atomic) */
};

#define RBLN_TENSOR_MAGIC 0x72626c6e54656e73ull	/* "rblnTens" */

/* Is @t a live tensor? Else fails naming @fn. */
RBLN_INTERNAL bool rbln_tensor_ok(const rbln_tensor *t, const char *fn);
/* Takes a reference to @t for a graph; rbln_tensor_put() drops it (the last one frees @t). */
void rbln_tensor_get(rbln_tensor *t);
void rbln_tensor_put(rbln_tensor *t);
/* A new tensor on @device whose shards hold device memory and no host copy. */
rbln_tensor *rbln_tensor_new_device(const int64_t *shape, int ndim, rbln_dtype dtype,
				    int device, const char *fn);
/* Materializes @t (taking its lock); RBLN_OK at once if it is. */
RBLN_INTERNAL rbln_status rbln_tensor_ensure_device(rbln_tensor *t);
/*
 * The tensor's data in host memory: a CPU tensor's own, else a malloc'ed
 * copy (the caller frees it) read from the devices (*@from_device) or
 * from the lazy host copy.
 */
rbln_status rbln_tensor_host_data(rbln_tensor *t, void **data, bool *from_device);
/* Element @index (flat) of @t into @out, from the device if it lives there. */
rbln_status rbln_tensor_read_element(rbln_tensor *t, int64_t index, void *out);
/*
 * All of @t on the first @n members of its device, one shard per member in
 * @r, copied device to device (rbln_replica.c) for op @op. On success the
 * caller frees @r with rbln_replicas_free(); on failure nothing is left to
 * free.
 */
rbln_status rbln_tensor_replicate(rbln_tensor *t, struct rbln_shard *r, int n, const char *op);
void rbln_replicas_free(struct rbln_shard *r, int n);
/*
 * Device memory for shard @s (its dev and nbytes set) of a tensor on
 * logical device @device; the error names @op unless NULL.
 */
rbln_status rbln_shard_alloc(struct rbln_shard *s, int device, const char *op);
/* Notes that the job at @point used @s's block. */
RBLN_INTERNAL void rbln_shard_used(struct rbln_shard *s, uint64_t point);

/*
 * Queues @out = @a @sub @b over @count elements of @dtype at device
 * addresses of @d, in objects @bos, through the program cache
 * (rbln_ops.c); explain() sees op @name called from @site. *@point gets
 * the job's point.
 */
RBLN_INTERNAL rbln_status rbln_ew_binary(struct rbln_dev *d, unsigned int sub, rbln_dtype dtype,
					int64_t count, uint64_t out, uint64_t a, uint64_t b,
					const uint32_t *bos, uint32_t nbos, const char *name,
					const void *site, uint64_t *point);

/* Element encodings (rbln_dtype.c), with the ISA's conversion rules. */
void rbln_dtype_encode(rbln_dtype dtype, double v, void *dst);
double rbln_dtype_decode(rbln_dtype dtype, const void *src);

/* Host buffers and jobs (rbln_job.c) */
RBLN_INTERNAL rbln_status rbln_host_buf_new(struct rbln_dev *d, uint64_t size,
					    struct rbln_host_buf **out);
RBLN_INTERNAL void rbln_host_buf_release(struct rbln_dev *d, struct rbln_host_buf *b,
					 uint64_t point);
/*
 * Command space in the device's ring of command buffers: @len bytes at
 * *@cpu, device address *@va; with d->lock held, then submitted with
 * rbln_ring_submit_locked() before the lock goes: that submits them with
 * the @n objects of @bos, and returns the job's point in *@point.
 */
RBLN_INTERNAL rbln_status rbln_ring_reserve_locked(struct rbln_dev *d, uint32_t len, void **cpu,
						 uint64_t *va);
RBLN_INTERNAL rbln_status rbln_ring_submit_locked(struct rbln_dev *d, uint64_t va, uint32_t len,
						 const uint32_t *bos, uint32_t n, uint64_t *point);
/*
 * Submits @len bytes of commands at @va, which the @n objects of @bos
 * (the command buffer's among them) hold, as the device's next point,
 * after the @nwaits syncobjs of @waits; with d->lock held.
 */
rbln_status rbln_submit_locked(struct rbln_dev *d, uint64_t va, uint32_t len, const uint32_t *bos,
			       uint32_t n, const struct drm_rbln_sync *waits, uint32_t nwaits,
			       uint64_t *point);
/*
 * A sync_file of @d's newest job in *@fd, what another member's job waits
 * for; -1 when every job is done.
 */
rbln_status rbln_last_job_fence(struct rbln_dev *d, int *fd);
/* Waits for @point, and reports a job that failed since the last report. */
RBLN_INTERNAL rbln_status rbln_wait_point(struct rbln_dev *d, uint64_t point);
/*
 * Binary syncobj @handle gets the fence of submitted @point, for a thread
 * that must wait for it without d->lock; signalled if @point is long done.
 */
RBLN_INTERNAL rbln_status rbln_point_syncobj(struct rbln_dev *d, uint64_t point, uint32_t handle);
/* Notes @st, with rbln_last_error(), as @d's error for the next rbln_synchronize(). */
RBLN_INTERNAL void rbln_async_fail(struct rbln_dev *d, rbln_status st);
/* Waits for @point to be done, failed or not. */
rbln_status rbln_wait_done(struct rbln_dev *d, uint64_t point);
bool rbln_point_done(struct rbln_dev *d, uint64_t point);
RBLN_INTERNAL void rbln_reap_locked(struct rbln_dev *d);

/*
 * Graph capture (rbln_graph.c). The capture of the calling thread, if it
 * captures on logical device @device, else NULL: a thread-local load when
 * it captures nothing.
 */
struct rbln_graph;
struct rbln_graph *rbln_capture_of(int device);
/*
 * Fails with RBLN_ERROR_CAPTURE, invalidating the capture, when the
 * calling thread captures on a logical device that shares a member with
 * @device (-1: the current device) or holds @d (when not NULL): @what names
 * what cannot be captured. RBLN_OK otherwise.
 */
RBLN_INTERNAL rbln_status rbln_capture_refuse(int device, struct rbln_dev *d, const char *what);
/* Fails op @op when @g was invalidated already. */
rbln_status rbln_capture_valid(struct rbln_graph *g, const char *op);
/* An op failed while captured: the capture is invalidated with its status and message. */
void rbln_capture_failed(struct rbln_graph *g, rbln_status st);
/*
 * Room for @len bytes of one op's commands on member @d of graph @g
 * (in *@cpu), run with the @n objects of @bos; ops count the op.
 */
rbln_status rbln_graph_record(struct rbln_graph *g, struct rbln_dev *d, uint32_t len,
			      const uint32_t *bos, uint32_t n, void **cpu);
/* The graph keeps @t, and so its device memory, until it is freed. */
rbln_status rbln_graph_hold(struct rbln_graph *g, rbln_tensor *t);
/* The id of @g's capture: never 0, never reused. */
uint64_t rbln_graph_capture_id(const struct rbln_graph *g);
/*
 * @t, made by @g's capture, is freed by the caller while capturing: the
 * capture's later tensors may take its memory (its blocks go to the
 * graph's pool), as replays run the ops in the order they were recorded.
 */
void rbln_graph_recycle(struct rbln_graph *g, rbln_tensor *t);
/* Gives the shards of new tensor @t what blocks of the graph's pool fit them. */
void rbln_graph_reuse(struct rbln_graph *g, rbln_tensor *t);
/* One op captured (counted once however many members ran it). */
void rbln_graph_count_op(struct rbln_graph *g);
/*
 * The ops recorded after this on any member run after every member's
 * earlier work: what an op needs whose members read each other's memory.
 */
rbln_status rbln_graph_barrier(struct rbln_graph *g);
/* The graph keeps the blocks of the @n shards of @r (replicas), and a peer reference of @d. */
rbln_status rbln_graph_keep_shards(struct rbln_graph *g, struct rbln_shard *r, int n);
rbln_status rbln_graph_keep_peer(struct rbln_graph *g, struct rbln_dev *d, uint32_t handle);

/* File-backed host memory (rbln_offload.c) */
void *rbln_offload_alloc(size_t size, char *path);
void rbln_offload_free(void *p, size_t size, const char *path);
/*
 * Tells the kernel that @len bytes at @offset of offloaded memory @p are
 * done with for now: it reclaims them first rather than giving them a
 * second chance because they were just touched.
 */
void rbln_offload_cold(void *p, size_t offset, size_t len);

/* The CPU writes offloaded memory this many bytes at a time (rbln_offload_writer). */
#define RBLN_OFFLOAD_WINDOW	(2u << 20)

/*
 * Writes into offloaded memory @base (file @path), made window by window
 * in order, each handed to rbln_offload_wrote() once written.
 */
struct rbln_offload_writer {
	char *base;
	int fd;			/* the file, or -1: then reclaim does what it can */
	size_t off, len;	/* the window last written, its writeback begun */
};

void rbln_offload_write_begin(struct rbln_offload_writer *w, void *base, const char *path);
void rbln_offload_wrote(struct rbln_offload_writer *w, size_t offset, size_t len);
void rbln_offload_write_end(struct rbln_offload_writer *w);

#endif /* RBLN_INTERNAL_H */
