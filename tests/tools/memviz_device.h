/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memviz_device.h - the allocator of memviz_device.c, for the workload
 * that makes rbln-memviz's test snapshot; with rbln_memory_record_history()
 * and rbln_memory_dump_snapshot() of device 0, librbln's own.
 */
#ifndef MEMVIZ_DEVICE_H
#define MEMVIZ_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "rbln/rbln.h"

struct rbln_block;

RBLN_API struct rbln_block *memviz_alloc(uint64_t size);	/* on queue 0; aborts on failure */
/* With @in_flight, a job still uses @b: it is pending free until memviz_finish_jobs(). */
RBLN_API void memviz_free(struct rbln_block *b, bool in_flight);
RBLN_API void memviz_finish_jobs(void);
RBLN_API void memviz_empty_cache(void);

#endif /* MEMVIZ_DEVICE_H */
