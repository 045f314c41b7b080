// SPDX-License-Identifier: MIT
/*
 * rbln_memory.c - torch.rbln's memory functions over the caching allocator
 */

#include <string.h>

#include "rbln_internal.h"

static void stat_add(rbln_memory_stat *to, const struct rbln_stat *s)
{
	to->current += s->current;
	to->peak += s->peak;
	to->total_allocated += s->total_allocated;
	to->total_freed += s->total_freed;
}

static void stat_set_now(rbln_memory_stat *to, const struct rbln_stat *s)
{
	to->current = s->current;
	to->peak = s->peak;
}

/*
 * A logical device's totals and counters are the sums of its members';
 * with several members, its current values and peaks are its own, which
 * the members' allocators keep together (struct rbln_alloc_group): a sum
 * of the members' peaks may be a figure that never was, as their peaks
 * need not come at once.
 */
rbln_status rbln_memory_stats(int device, struct rbln_memory_stats *out)
{
	struct rbln_allocator_stats s;
	struct rbln_ldev *l;
	int i;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_stats: NULL output");
	l = rbln_ldev_get(device);
	if (!l)
		return rbln_last_status();
	memset(out, 0, sizeof(*out));
	for (i = 0; i < l->nmembers; i++) {
		struct rbln_dev *d = l->members[i];

		rbln_allocator_stats(d->alloc, &s);
		stat_add(&out->allocated, &s.allocated);
		stat_add(&out->reserved, &s.reserved);
		stat_add(&out->active, &s.active);
		stat_add(&out->cached, &s.cached);
		out->num_alloc_retries += s.num_alloc_retries;
		out->num_ooms += s.num_ooms;
		out->num_device_alloc += s.num_device_alloc;
		out->num_device_free += s.num_device_free;
		pthread_mutex_lock(&d->lock);
		out->lazy_host_bytes += d->lazy_host_bytes;
		out->lazy_tensors += d->lazy_tensors;
		out->lazy_materializations += d->lazy_materializations;
		stat_add(&out->staging, &d->staging_bytes);
		pthread_mutex_unlock(&d->lock);
	}
	if (l->nmembers > 1) {
		rbln_alloc_group_stats(&l->group, &s);
		stat_set_now(&out->allocated, &s.allocated);
		stat_set_now(&out->reserved, &s.reserved);
		stat_set_now(&out->active, &s.active);
		stat_set_now(&out->cached, &s.cached);
	}
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
		{ "staging.current", s ? s->staging.current : 0 },
		{ "staging.peak", s ? s->staging.peak : 0 },
		{ "staging.total_allocated", s ? s->staging.total_allocated : 0 },
		{ "staging.total_freed", s ? s->staging.total_freed : 0 },
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

/* Applies @fn to the allocator of every member of logical device @device. */
static rbln_status for_each_member(int device, void (*fn)(struct rbln_allocator *))
{
	struct rbln_ldev *l = rbln_ldev_get(device);
	int i;

	if (!l)
		return rbln_last_status();
	for (i = 0; i < l->nmembers; i++)
		fn(l->members[i]->alloc);
	return RBLN_OK;
}

rbln_status rbln_reset_peak_memory_stats(int device)
{
	struct rbln_ldev *l = rbln_ldev_get(device);
	int i;

	if (!l)
		return rbln_last_status();
	for (i = 0; i < l->nmembers; i++) {
		struct rbln_dev *d = l->members[i];

		rbln_allocator_reset_peak(d->alloc);
		pthread_mutex_lock(&d->lock);
		d->staging_bytes.peak = d->staging_bytes.current;
		pthread_mutex_unlock(&d->lock);
	}
	if (l->nmembers > 1)
		rbln_alloc_group_reset_peak(&l->group);
	return RBLN_OK;
}

/*
 * The allocator's totals and counters, lazy.materializations, the one
 * lazy count, and the staging buffers' totals.
 */
rbln_status rbln_reset_accumulated_memory_stats(int device)
{
	struct rbln_ldev *l = rbln_ldev_get(device);
	int i;

	if (!l)
		return rbln_last_status();
	for (i = 0; i < l->nmembers; i++) {
		struct rbln_dev *d = l->members[i];

		rbln_allocator_reset_accumulated(d->alloc);
		pthread_mutex_lock(&d->lock);
		d->lazy_materializations = 0;
		d->staging_bytes.total_allocated = 0;
		d->staging_bytes.total_freed = 0;
		pthread_mutex_unlock(&d->lock);
	}
	return RBLN_OK;
}

rbln_status rbln_empty_cache(int device)
{
	return for_each_member(device, rbln_allocator_empty_cache);
}

size_t rbln_amp_supported_dtypes(rbln_dtype *out, size_t cap)
{
	(void)out;
	(void)cap;
	return 0;
}
