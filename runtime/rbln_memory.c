// SPDX-License-Identifier: MIT
/*
 * rbln_memory.c - torch.rbln's memory functions over the caching allocator
 */

#include <string.h>

#include "rbln_internal.h"

rbln_status rbln_memory_stats(int device, struct rbln_memory_stats *out)
{
	struct rbln_allocator_stats s;
	struct rbln_dev *d;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_stats: NULL output");
	d = rbln_dev_get(device);
	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	rbln_allocator_stats(d->alloc, &s);
	memset(out, 0, sizeof(*out));
#define COPY(f) do { \
		out->f.current = s.f.current; out->f.peak = s.f.peak; \
		out->f.total_allocated = s.f.total_allocated; out->f.total_freed = s.f.total_freed; \
	} while (0)
	COPY(allocated);
	COPY(reserved);
	COPY(active);
	COPY(cached);
#undef COPY
	out->num_alloc_retries = s.num_alloc_retries;
	out->num_ooms = s.num_ooms;
	out->num_device_alloc = s.num_device_alloc;
	out->num_device_free = s.num_device_free;
	pthread_mutex_lock(&d->lock);
	out->lazy_host_bytes = d->lazy_host_bytes;
	out->lazy_tensors = d->lazy_tensors;
	out->lazy_materializations = d->lazy_materializations;
	pthread_mutex_unlock(&d->lock);
	return RBLN_OK;
}

bool rbln_memory_stats_entry(const struct rbln_memory_stats *s, size_t i, const char **key,
			     int64_t *value)
{
	const struct {
		const char *key;
		int64_t value;
	} entries[] = {
		{ "allocated.current", s ? s->allocated.current : 0 },
		{ "allocated.peak", s ? s->allocated.peak : 0 },
		{ "allocated.total_allocated", s ? s->allocated.total_allocated : 0 },
		{ "allocated.total_freed", s ? s->allocated.total_freed : 0 },
		{ "reserved.current", s ? s->reserved.current : 0 },
		{ "reserved.peak", s ? s->reserved.peak : 0 },
		{ "reserved.total_allocated", s ? s->reserved.total_allocated : 0 },
		{ "reserved.total_freed", s ? s->reserved.total_freed : 0 },
		{ "active.current", s ? s->active.current : 0 },
		{ "active.peak", s ? s->active.peak : 0 },
		{ "cached.current", s ? s->cached.current : 0 },
		{ "cached.peak", s ? s->cached.peak : 0 },
		{ "num_alloc_retries", s ? s->num_alloc_retries : 0 },
		{ "num_ooms", s ? s->num_ooms : 0 },
		{ "num_device_alloc", s ? s->num_device_alloc : 0 },
		{ "num_device_free", s ? s->num_device_free : 0 },
		{ "lazy.host_bytes", s ? s->lazy_host_bytes : 0 },
		{ "lazy.tensors", s ? s->lazy_tensors : 0 },
		{ "lazy.materializations", s ? s->lazy_materializations : 0 },
	};

	if (!s || !key || !value) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_stats_entry: NULL argument");
		return false;
	}
	if (i >= sizeof(entries) / sizeof(entries[0]))
		return false;
	*key = entries[i].key;
	*value = entries[i].value;
	return true;
}

static int64_t stat_of(int device, int which)
{
	struct rbln_memory_stats s;
	rbln_status st = rbln_memory_stats(device, &s);

	if (st)
		return st;
	switch (which) {
	case 0:
		return s.allocated.current;
	case 1:
		return s.reserved.current;
	case 2:
		return s.allocated.peak;
	default:
		return s.reserved.peak;
	}
}

int64_t rbln_memory_allocated(int device)
{
	return stat_of(device, 0);
}

int64_t rbln_memory_reserved(int device)
{
	return stat_of(device, 1);
}

int64_t rbln_max_memory_allocated(int device)
{
	return stat_of(device, 2);
}

int64_t rbln_max_memory_reserved(int device)
{
	return stat_of(device, 3);
}

rbln_status rbln_reset_peak_memory_stats(int device)
{
	struct rbln_dev *d = rbln_dev_get(device);

	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	rbln_allocator_reset_peak(d->alloc);
	return RBLN_OK;
}

rbln_status rbln_reset_accumulated_memory_stats(int device)
{
	struct rbln_dev *d = rbln_dev_get(device);

	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	rbln_allocator_reset_accumulated(d->alloc);
	return RBLN_OK;
}

rbln_status rbln_empty_cache(int device)
{
	struct rbln_dev *d = rbln_dev_get(device);

	if (!d)
		return RBLN_ERROR_NO_DEVICE;
	rbln_allocator_empty_cache(d->alloc);
	return RBLN_OK;
}

size_t rbln_amp_supported_dtypes(rbln_dtype *out, size_t cap)
{
	(void)out;
	(void)cap;
	return 0;
}
