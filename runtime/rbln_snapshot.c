// SPDX-License-Identifier: MIT
/*
 * rbln_snapshot.c - torch.cuda.memory._snapshot() and
 * _record_memory_history() over the caching allocators
 *
 * The allocators keep raw return addresses (rbln_alloc.c); they are
 * resolved here, once per site, when a snapshot is taken, never on the
 * allocation path. A snapshot is plain data in an arena of its own, freed
 * whole by rbln_memory_snapshot_free().
 */

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "rbln_explain.h"
#include "rbln_internal.h"

#define ARENA_CHUNK	(64u << 10)

struct arena_chunk {
	struct arena_chunk *next;
	max_align_t data[];
};

/* A snapshot and the memory its pointers point into. */
struct snapshot {
	struct rbln_memory_snapshot pub;	/* first: the caller's handle */
	struct arena_chunk *chunks;		/* newest first; the newest has room left */
	size_t used, cap;
};

static void *arena_alloc(struct snapshot *s, size_t size)
{
	void *p;

	size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	if (!s->chunks || size > s->cap - s->used) {
		size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
		struct arena_chunk *c = malloc(sizeof(*c) + cap);

		if (!c)
			return NULL;
		c->next = s->chunks;
		s->chunks = c;
		s->used = 0;
		s->cap = cap;
	}
	p = (char *)s->chunks->data + s->used;
	s->used += size;
	return p;
}

static const char *arena_strdup(struct snapshot *s, const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = arena_alloc(s, n);

	return p ? memcpy(p, str, n) : NULL;
}

/* The frames of a site, resolved once however many blocks and events share it. */
struct site_slot {
	const struct rbln_alloc_site *site;
	size_t nframes;
	const struct rbln_memory_frame *frames;
};

struct site_map {
	struct site_slot *slots;
	size_t mask;
	const void *self;	/* librbln's load address */
};

/*
 * A framework's name for its user's code ("model.py:12") as a frame: the
 * file and line when it ends in ":<line>", else all of it as the file.
 */
static bool caller_frame(struct snapshot *s, const char *caller, struct rbln_memory_frame *o)
{
	const char *colon = strrchr(caller, ':');
	char *end = NULL;
	unsigned long line = 0;
	size_t flen = strlen(caller);

	if (colon && colon[1] >= '0' && colon[1] <= '9') {
		line = strtoul(colon + 1, &end, 10);
		if (!*end && line <= UINT32_MAX)
			flen = (size_t)(colon - caller);
		else
			line = 0;
	}
	o->name = "??";
	o->filename = arena_alloc(s, flen + 1);
	o->offset = 0;
	o->line = (unsigned int)line;
	if (!o->filename)
		return false;
	memcpy((char *)o->filename, caller, flen);
	((char *)o->filename)[flen] = '\0';
	return true;
}

/*
 * The frames of @site, with dladdr(3): the leading ones inside librbln
 * (the allocator and the runtime calling it) are left out, so the first
 * frame is the program's call into librbln, unless the framework calling
 * librbln named its user's code (@site's caller): that comes first.
 * false out of memory.
 */
static bool site_frames(struct snapshot *s, struct site_map *m, const struct rbln_alloc_site *site,
			size_t *nframes, const struct rbln_memory_frame **frames)
{
	Dl_info info[RBLN_ALLOC_SITE_FRAMES];
	bool found[RBLN_ALLOC_SITE_FRAMES];
	struct rbln_memory_frame *f;
	struct site_slot *slot;
	unsigned int i, first = 0, n, top;
	size_t h;

	*nframes = 0;
	*frames = NULL;
	if (!site)
		return true;
	h = ((uintptr_t)site >> 4) * 0x9e3779b97f4a7c15ull;
	for (slot = &m->slots[h & m->mask]; slot->site && slot->site != site;)
		slot = &m->slots[(size_t)(slot - m->slots + 1) & m->mask];
	if (slot->site) {
		*nframes = slot->nframes;
		*frames = slot->frames;
		return true;
	}
	n = site->nframes < RBLN_ALLOC_SITE_FRAMES ? site->nframes : RBLN_ALLOC_SITE_FRAMES;
	for (i = 0; i < n; i++) {
		/* a return address may be one past a call ending its function */
		found[i] = dladdr((const void *)((uintptr_t)site->frames[i] - 1), &info[i]) &&
			   info[i].dli_fname;
	}
	while (first < n && found[first] && info[first].dli_fbase == m->self)
		first++;
	if (first == n)	/* all of it inside librbln: better those than nothing */
		first = 0;
	top = site->caller ? 1 : 0;
	f = arena_alloc(s, (top + n - first) * sizeof(*f));
	if (!f && top + n > first)
		return false;
	if (top && !caller_frame(s, site->caller, f))
		return false;
	for (i = first; i < n; i++) {
		struct rbln_memory_frame *o = &f[top + i - first];
		uintptr_t addr = (uintptr_t)site->frames[i];

		o->name = arena_strdup(s, found[i] && info[i].dli_sname ? info[i].dli_sname : "??");
		o->filename = arena_strdup(s, found[i] ? info[i].dli_fname : "??");
		o->offset = found[i] ? addr - (uintptr_t)info[i].dli_fbase : addr;
		o->line = 0;
		if (!o->name || !o->filename)
			return false;
	}
	*slot = (struct site_slot){ .site = site, .nframes = top + n - first, .frames = f };
	*nframes = slot->nframes;
	*frames = f;
	return true;
}

/* One member's allocator snapshot @raw into @s; false out of memory. */
static bool add_member(struct snapshot *s, int member, int physical,
		       const struct rbln_alloc_snapshot *raw, struct rbln_memory_segment *segs,
		       struct rbln_memory_trace *trace, const void *self)
{
	struct rbln_memory_block *blocks;
	struct rbln_memory_event *events;
	struct site_map m = { .self = self };
	size_t i, j, cap = 16;
	bool ok = false;

	/* at most one site per segment, block and event: a table at most half full */
	while (cap < 2 * (raw->nsegments + raw->nblocks + raw->nevents))
		cap *= 2;
	m.slots = calloc(cap, sizeof(*m.slots));
	m.mask = cap - 1;
	blocks = arena_alloc(s, raw->nblocks * sizeof(*blocks));
	events = arena_alloc(s, raw->nevents * sizeof(*events));
	if (!m.slots || (!blocks && raw->nblocks) || (!events && raw->nevents))
		goto out;
	for (i = 0; i < raw->nblocks; i++) {
		const struct rbln_alloc_snap_block *b = &raw->blocks[i];

		blocks[i] = (struct rbln_memory_block){
			.address = b->va, .size = b->size, .requested_size = b->requested,
			.state = b->state, .queue = b->queue, .thread_cached = b->thread_cached,
		};
		if (!site_frames(s, &m, b->site, &blocks[i].nframes, &blocks[i].frames))
			goto out;
	}
	for (i = 0; i < raw->nsegments; i++) {
		const struct rbln_alloc_snap_segment *g = &raw->segments[i];
		struct rbln_memory_segment *o = &segs[i];

		*o = (struct rbln_memory_segment){
			.device = member, .physical_device = physical, .address = g->va,
			.total_size = g->size, .allocated_size = g->allocated,
			.active_size = g->active, .requested_size = g->requested,
			.queue = g->queue, .small = g->small, .expandable = g->expandable,
			.nblocks = g->nblocks,
			.blocks = blocks + g->first_block,
		};
		if (!site_frames(s, &m, g->site, &o->nframes, &o->frames))
			goto out;
	}
	for (j = 0; j < raw->nevents; j++) {
		const struct rbln_alloc_event *e = &raw->events[j];

		events[j] = (struct rbln_memory_event){
			.action = e->action, .addr = e->addr, .size = e->size, .queue = e->queue,
			.time_us = e->time_us,
		};
		if (!site_frames(s, &m, e->site, &events[j].nframes, &events[j].frames))
			goto out;
	}
	*trace = (struct rbln_memory_trace){
		.physical_device = physical, .nevents = raw->nevents, .events = events,
	};
	ok = true;
out:
	free(m.slots);
	return ok;
}

void rbln_memory_snapshot_free(struct rbln_memory_snapshot *snapshot)
{
	struct snapshot *s = (struct snapshot *)snapshot;
	struct arena_chunk *c, *next;

	if (!s)
		return;
	for (c = s->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(s);
}

/*
 * A logical device's snapshot covers every member's allocator: segments
 * name their member, and each member has its own trace.
 */
rbln_status rbln_memory_snapshot(int device, struct rbln_memory_snapshot **out)
{
	struct rbln_alloc_snapshot raw[RBLN_MAX_MEMBERS] = { { 0 } };
	struct rbln_memory_segment *segs;
	struct rbln_memory_trace *traces;
	struct snapshot *s = NULL;
	size_t nsegs = 0;
	struct rbln_ldev *l;
	Dl_info self;
	rbln_status st = RBLN_OK;
	int i;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_snapshot: NULL output");
	*out = NULL;
	l = rbln_ldev_get(device);
	if (!l)
		return rbln_last_status();
	if (!dladdr((const void *)rbln_memory_snapshot, &self))
		self.dli_fbase = NULL;
	for (i = 0; i < l->nmembers; i++) {
		if (rbln_allocator_snapshot(l->members[i]->alloc, &raw[i]))
			goto nomem;
		nsegs += raw[i].nsegments;
	}
	s = calloc(1, sizeof(*s));
	segs = s ? arena_alloc(s, nsegs * sizeof(*segs)) : NULL;
	traces = s ? arena_alloc(s, (size_t)l->nmembers * sizeof(*traces)) : NULL;
	if (!traces || (!segs && nsegs))
		goto nomem;
	s->pub = (struct rbln_memory_snapshot){
		.device = l->index, .nsegments = nsegs, .segments = segs,
		.ntraces = (size_t)l->nmembers, .device_traces = traces,
	};
	for (i = 0; i < l->nmembers; i++) {
		if (!add_member(s, i, rbln_pdev_index(l->members[i]), &raw[i], segs, &traces[i],
				self.dli_fbase))
			goto nomem;
		segs += raw[i].nsegments;
	}
	*out = &s->pub;
	goto out;
nomem:
	rbln_memory_snapshot_free(s ? &s->pub : NULL);
	st = rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_memory_snapshot: out of host memory");
out:
	for (i = 0; i < l->nmembers; i++)
		rbln_alloc_snapshot_release(&raw[i]);
	return st;
}

/*
 * Serializes changes of history, for rbln_explain_memory_stacks()'s count.
 * A device closed while recording stacks stays counted: framework sites
 * are then taken for nothing, which costs time, not correctness.
 */
static pthread_mutex_t history_lock = PTHREAD_MUTEX_INITIALIZER;

rbln_status rbln_memory_record_history(int device, bool enabled, bool stacks, size_t max_entries)
{
	struct rbln_ldev *l;
	int i, ret = 0;

	if (enabled && !max_entries)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_record_history: max_entries is 0 "
				 "(at least 1 event must fit)");
	if (enabled && max_entries > RBLN_MEMORY_HISTORY_MAX)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_record_history: max_entries %zu "
				 "is more than RBLN_MEMORY_HISTORY_MAX (%u)", max_entries,
				 RBLN_MEMORY_HISTORY_MAX);
	l = rbln_ldev_get(device);
	if (!l)
		return rbln_last_status();
	if (enabled && stacks)
		rbln_alloc_set_caller_fn(rbln_explain_caller);
	/* Each member's change of stacks counted once, whoever races it. */
	pthread_mutex_lock(&history_lock);
	for (i = 0; i < l->nmembers && !ret; i++) {
		struct rbln_allocator *a = l->members[i]->alloc;
		bool was = rbln_allocator_records_stacks(a);

		ret = rbln_allocator_record_history(a, enabled, stacks, max_entries);
		if (was != rbln_allocator_records_stacks(a))
			rbln_explain_memory_stacks(!was);
		if (ret)
			rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_memory_record_history: out of host "
				  "memory for the history of physical device %d",
				  rbln_pdev_index(l->members[i]));
	}
	pthread_mutex_unlock(&history_lock);
	return ret ? RBLN_ERROR_OUT_OF_MEMORY : RBLN_OK;
}

/* --- JSON --------------------------------------------------------------------- */

static const char *state_name(enum rbln_memory_block_state state)
{
	switch (state) {
	case RBLN_BLOCK_ACTIVE_ALLOCATED:
		return "active_allocated";
	case RBLN_BLOCK_ACTIVE_PENDING_FREE:
		return "active_pending_free";
	case RBLN_BLOCK_INACTIVE:
		break;
	}
	return "inactive";
}

/* PyTorch's names for the actions of its trace entries. */
static const char *action_name(enum rbln_memory_action action)
{
	switch (action) {
	case RBLN_MEMORY_ALLOC:
		return "alloc";
	case RBLN_MEMORY_FREE_REQUESTED:
		return "free_requested";
	case RBLN_MEMORY_FREE_COMPLETED:
		return "free_completed";
	case RBLN_MEMORY_SEGMENT_ALLOC:
		return "segment_alloc";
	case RBLN_MEMORY_SEGMENT_FREE:
		return "segment_free";
	case RBLN_MEMORY_OOM:
		return "oom";
	case RBLN_MEMORY_SEGMENT_MAP:
		return "segment_map";
	case RBLN_MEMORY_SEGMENT_UNMAP:
		return "segment_unmap";
	}
	return "unknown";
}

static struct json_object *jint(uint64_t v)
{
	return json_object_new_int64((int64_t)v);
}

/* Adds "frames": [{name, filename, line, offset}...] to @o; line is 0 but in a framework's frame (no debug info is read). */
static bool jframes(struct json_object *o, const struct rbln_memory_frame *f, size_t n)
{
	struct json_object *a = json_object_new_array(), *fo;
	size_t i;

	if (!rbln_json_add(o, "frames", a))
		return false;
	for (i = 0; i < n; i++) {
		fo = json_object_new_object();
		if (!rbln_json_push(a, fo) ||
		    !rbln_json_add(fo, "name", json_object_new_string(f[i].name)) ||
		    !rbln_json_add(fo, "filename", json_object_new_string(f[i].filename)) ||
		    !rbln_json_add(fo, "line", jint(f[i].line)) ||
		    !rbln_json_add(fo, "offset", jint(f[i].offset)))
			return false;
	}
	return true;
}

static bool jblocks(struct json_object *seg, const struct rbln_memory_segment *g)
{
	struct json_object *a = json_object_new_array(), *o;
	size_t i;

	if (!rbln_json_add(seg, "blocks", a))
		return false;
	for (i = 0; i < g->nblocks; i++) {
		const struct rbln_memory_block *b = &g->blocks[i];

		o = json_object_new_object();
		if (!rbln_json_push(a, o) ||
		    !rbln_json_add(o, "address", jint(b->address)) ||
		    !rbln_json_add(o, "size", jint(b->size)) ||
		    !rbln_json_add(o, "requested_size", jint(b->requested_size)) ||
		    !rbln_json_add(o, "state", json_object_new_string(state_name(b->state))) ||
		    (b->queue < 0 ? json_object_object_add(o, "queue", NULL) != 0 :
				    !rbln_json_add(o, "queue", json_object_new_int64(b->queue))) ||
		    !rbln_json_add(o, "thread_cached", json_object_new_boolean(b->thread_cached)) ||
		    !jframes(o, b->frames, b->nframes))
			return false;
	}
	return true;
}

static bool jsegments(struct json_object *root, const struct rbln_memory_snapshot *s)
{
	struct json_object *a = json_object_new_array(), *o;
	size_t i;

	if (!rbln_json_add(root, "segments", a))
		return false;
	for (i = 0; i < s->nsegments; i++) {
		const struct rbln_memory_segment *g = &s->segments[i];

		o = json_object_new_object();
		if (!rbln_json_push(a, o) ||
		    !rbln_json_add(o, "device", json_object_new_int(g->device)) ||
		    !rbln_json_add(o, "physical_device", json_object_new_int(g->physical_device)) ||
		    !rbln_json_add(o, "address", jint(g->address)) ||
		    !rbln_json_add(o, "total_size", jint(g->total_size)) ||
		    !rbln_json_add(o, "allocated_size", jint(g->allocated_size)) ||
		    !rbln_json_add(o, "active_size", jint(g->active_size)) ||
		    !rbln_json_add(o, "requested_size", jint(g->requested_size)) ||
		    !rbln_json_add(o, "queue", jint(g->queue)) ||
		    !rbln_json_add(o, "pool", json_object_new_string(g->small ? "small" : "large")) ||
		    !rbln_json_add(o, "is_expandable", json_object_new_boolean(g->expandable)) ||
		    !jblocks(o, g) || !jframes(o, g->frames, g->nframes))
			return false;
	}
	return true;
}

static bool jtraces(struct json_object *root, const struct rbln_memory_snapshot *s)
{
	struct json_object *traces = json_object_new_array(), *a, *o;
	size_t i, j;

	if (!rbln_json_add(root, "device_traces", traces))
		return false;
	for (i = 0; i < s->ntraces; i++) {
		a = json_object_new_array();
		if (!rbln_json_push(traces, a))
			return false;
		for (j = 0; j < s->device_traces[i].nevents; j++) {
			const struct rbln_memory_event *e = &s->device_traces[i].events[j];

			o = json_object_new_object();
			if (!rbln_json_push(a, o) ||
			    !rbln_json_add(o, "action", json_object_new_string(action_name(e->action))) ||
			    !rbln_json_add(o, "addr", jint(e->addr)) ||
			    !rbln_json_add(o, "size", jint(e->size)) ||
			    !rbln_json_add(o, "queue", jint(e->queue)) ||
			    !rbln_json_add(o, "time_us", json_object_new_int64(e->time_us)) ||
			    !jframes(o, e->frames, e->nframes))
				return false;
		}
	}
	return true;
}

char *rbln_memory_snapshot_json(const struct rbln_memory_snapshot *snapshot)
{
	struct json_object *root, *phys;
	const char *text;
	char *out = NULL;
	size_t i;

	if (!snapshot) {
		rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_snapshot_json: NULL snapshot");
		return NULL;
	}
	root = json_object_new_object();
	phys = json_object_new_array();
	if (!root || !rbln_json_add(root, "device", json_object_new_int(snapshot->device)) ||
	    !rbln_json_add(root, "physical_devices", phys))
		goto out;
	for (i = 0; i < snapshot->ntraces; i++)
		if (!rbln_json_push(phys,
				    json_object_new_int(snapshot->device_traces[i].physical_device)))
			goto out;
	if (!jsegments(root, snapshot) || !jtraces(root, snapshot))
		goto out;
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
					      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text)
		out = strdup(text);
out:
	json_object_put(root);
	if (!out)
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "rbln_memory_snapshot_json: out of host memory");
	return out;
}

rbln_status rbln_memory_dump_snapshot(int device, const char *path)
{
	struct rbln_memory_snapshot *s;
	rbln_status st;
	char *json;
	FILE *f;
	int err = 0;

	if (!path)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_dump_snapshot: NULL path");
	st = rbln_memory_snapshot(device, &s);
	if (st)
		return st;
	json = rbln_memory_snapshot_json(s);
	rbln_memory_snapshot_free(s);
	if (!json)
		return rbln_last_status();
	f = fopen(path, "we");
	if (!f) {
		err = errno;
	} else {
		if (fputs(json, f) == EOF)
			err = errno ? errno : EIO;
		if (fclose(f) && !err)
			err = errno;
	}
	free(json);
	if (err)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_memory_dump_snapshot: cannot write %s: %s",
				 path, strerror(err));
	return RBLN_OK;
}
