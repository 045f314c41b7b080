/* SPDX-License-Identifier: MIT */
/*
 * rbln_staging.h - moving data between device memory and the host through
 * pinned staging buffers (internal)
 *
 * Device memory is not CPU-mappable: every byte the host reads or writes
 * goes by a DMA job through a host buffer object, a staging buffer. Two
 * users: tensors (rbln_staging_copy(), a whole range with two chunks in
 * flight) and collectives (rbln_staging_get() and rbln_staging_jobs(),
 * chunk by chunk, while the network works on the host side of another).
 */
#ifndef RBLN_STAGING_H
#define RBLN_STAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbln_internal.h"

/* Staging buffers: this size, so many kept idle per device. */
#define RBLN_STAGING_CHUNK	(2u << 20)
#define RBLN_STAGING_POOL	2

/*
 * A staging buffer of RBLN_STAGING_CHUNK bytes, idle; given back with
 * rbln_host_buf_release() and the point of the last job using it.
 */
RBLN_INTERNAL rbln_status rbln_staging_get(struct rbln_dev *d, struct rbln_host_buf **out);
/*
 * Staging buffer @b is idle again, with d->lock held: true when the pool
 * keeps it, false when the caller is to free it.
 */
bool rbln_staging_recycle_locked(struct rbln_dev *d, struct rbln_host_buf *b);

/* A copy a job makes: @bytes from @src (in object @src_bo) to @dst (in @dst_bo). */
struct rbln_copy {
	uint32_t dst_bo, src_bo;
	uint64_t dst, src, bytes;
};

/* A WAIT (docs/isa.md) for the word at @va of object @bo to reach @value. */
struct rbln_copy_guard {
	uint32_t bo;
	uint64_t va, value;
};

/*
 * Queues the @n copies of @cp in order with @d's other work, in as few
 * jobs as command buffers and object lists allow, each headed by @guard
 * if not NULL (with no copies, one job of the guard alone). *@point gets
 * the last job's point.
 */
RBLN_INTERNAL rbln_status rbln_staging_jobs(struct rbln_dev *d, const struct rbln_copy *cp, int n,
					    const struct rbln_copy_guard *guard, uint64_t *point);

/*
 * Copies @bytes between device address @va (of object @bo) and host
 * memory @host, chunk by chunk through staging buffers, two jobs in
 * flight. Device to host, the copy is complete when this returns unless
 * @non_blocking: then its last chunks complete in rbln_staging_finish_locked().
 * @cold: @host is offloaded memory, told it is done with once copied.
 * *@last gets the point of the last job.
 */
rbln_status rbln_staging_copy(struct rbln_dev *d, uint32_t bo, uint64_t va, bool to_device,
			      void *host, size_t bytes, bool non_blocking, bool cold,
			      uint64_t *last);
/* Completes every non-blocking copy of @d whose job is done; with d->lock held. */
void rbln_staging_finish_locked(struct rbln_dev *d);

#endif /* RBLN_STAGING_H */
