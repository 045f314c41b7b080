/* SPDX-License-Identifier: MIT */
/*
 * rbln_staging.h - moving data between device memory and the host through
 * pinned staging buffers (internal)
 *
 * Device memory is not CPU-mappable: every byte the host reads or writes
 * goes by a DMA job through a host buffer object, a staging buffer. Two
 * users: tensors (rbln_staging_copy(), a whole range with two chunks in
 * flight) and collectives (rbln_staging_get() and rbln_staging_dma(),
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

/* One stretch of a DMA job: @bytes at device address @va of object @bo, at @at of the buffer. */
struct rbln_staging_span {
	uint32_t bo;
	uint64_t va;
	size_t at;
	size_t bytes;
};

/*
 * Queues the copies of the @n spans between device memory and host
 * buffer @b (@to_device: from @b), in order with @d's other work, as one
 * job or a few (as many packets as a command buffer holds each). *@point
 * gets the last job's point; @b stays the caller's.
 */
RBLN_INTERNAL rbln_status rbln_staging_dma(struct rbln_dev *d, struct rbln_host_buf *b,
			     const struct rbln_staging_span *spans, int n, bool to_device,
			     uint64_t *point);

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
