/* SPDX-License-Identifier: MIT */
/*
 * rbln_internal.h - what librbln's units share
 */
#ifndef RBLN_INTERNAL_H
#define RBLN_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>

#include <rbln_drm.h>

#include "rbln/rbln.h"
#include "rbln_alloc.h"

/* Sets the calling thread's last error; returns @status. */
rbln_status rbln_fail(rbln_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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
	struct rbln_host_buf *next;	/* in the device's deferred list */
};

/*
 * A non-blocking device-to-host copy, finished by rbln_synchronize():
 * the staging buffer's bytes go to @dst then.
 */
struct rbln_pending_copy {
	struct rbln_host_buf *staging;
	uint64_t point;
	void *dst;
	size_t bytes;
	struct rbln_pending_copy *next;
};

/*
 * struct rbln_dev - one physical device as the runtime uses it, opened on
 * first use. @lock protects everything below it; the allocator has its
 * own lock, and is called without @lock held.
 */
struct rbln_dev {
	unsigned int minor;
	pthread_once_t once;
	rbln_status open_status;
	bool ready;			/* opened: set last, with release */
	struct rbln_drm_device *drm;
	uint32_t queue;
	uint32_t timeline;		/* syncobj: point n = the n-th job */
	struct rbln_allocator *alloc;

	pthread_mutex_t lock;
	uint64_t point;			/* last point submitted */
	struct rbln_host_buf *deferred;	/* host buffers of jobs in flight */
	struct rbln_pending_copy *copies;
	int64_t lazy_host_bytes, lazy_tensors, lazy_materializations;
	int64_t device_bytes;		/* tensor data in device memory */
	int64_t offloaded_bytes;	/* lazy bytes that are file-backed */
};

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
};

/* The logical device @device (-1: current) with every member opened; NULL and an error if none. */
struct rbln_ldev *rbln_ldev_get(int device);
/* Physical device @physical if it has been opened, else NULL: never opens one. */
struct rbln_dev *rbln_pdev_if_open(int physical);

/* Host buffers and jobs (rbln_job.c) */
rbln_status rbln_host_buf_new(struct rbln_dev *d, uint64_t size, struct rbln_host_buf **out);
void rbln_host_buf_release(struct rbln_dev *d, struct rbln_host_buf *b, uint64_t point);
/*
 * Submits the @len bytes of commands in @cmd with the @n objects of @bos
 * (and @cmd itself): with d->lock held; returns the job's point in *@point.
 */
rbln_status rbln_submit_locked(struct rbln_dev *d, struct rbln_host_buf *cmd, uint32_t len,
			       const uint32_t *bos, uint32_t n, uint64_t *point);
rbln_status rbln_wait_point(struct rbln_dev *d, uint64_t point);
bool rbln_point_done(struct rbln_dev *d, uint64_t point);
void rbln_reap_locked(struct rbln_dev *d);

/* File-backed host memory (rbln_offload.c) */
void *rbln_offload_alloc(size_t size, char *path);
void rbln_offload_free(void *p, size_t size, const char *path);

#endif /* RBLN_INTERNAL_H */
