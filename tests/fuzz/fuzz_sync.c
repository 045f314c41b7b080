// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_sync.c - queues and syncobjs: created, destroyed with jobs queued,
 * signaled, reset, moved between files and devices, and waited on, never
 * without a deadline
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

/* --- queues ------------------------------------------------------------------- */

/* A new queue in the pool, or 0. */
uint32_t fz_new_queue(struct fz *fz, struct fz_file *f)
{
	struct drm_rbln_queue_create args = {
		.priority = fz_below(&fz->rng, RBLN_QUEUE_PRIORITY_HIGH + 1),
	};
	int ret;

	if (f->nqueues == FZ_MAX_QUEUES)
		return 0;
	fz_doing(fz, "QUEUE_CREATE file %u priority %u", fz_file_index(fz, f), args.priority);
	ret = fz_ioctl(fz, f->fd, C_QUEUE_CREATE, DRM_IOCTL_RBLN_QUEUE_CREATE, &args);
	/* As root: CAP_SYS_NICE is there for the high priority. */
	fz_check(fz, f, C_QUEUE_CREATE, ret, FZ_ERRS(0, ENOMEM, ENOSPC), "QUEUE_CREATE");
	if (ret)
		return 0;
	if (!args.queue_id || (fz_queue_known(f, args.queue_id) && !fz_file_tainted(fz, f)))
		fz_fail(fz, "QUEUE_CREATE gave queue %u, already live or zero", args.queue_id);
	f->queues[f->nqueues++] = args.queue_id;
	return args.queue_id;
}

void op_queue_create(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_queue_create args = { 0 };
	int ret;

	if (!f)
		return;
	if (fz_chance(&fz->rng, 80)) {
		fz_new_queue(fz, f);
		return;
	}
	args.priority = RBLN_QUEUE_PRIORITY_HIGH + 1 + fz_below(&fz->rng, 0xfffffffcu);
	fz_doing(fz, "QUEUE_CREATE (bad) file %u priority %u", fz_file_index(fz, f),
		 args.priority);
	ret = fz_ioctl(fz, f->fd, C_QUEUE_CREATE, DRM_IOCTL_RBLN_QUEUE_CREATE, &args);
	fz_check(fz, f, C_QUEUE_CREATE, ret, FZ_ERRS(EINVAL), "QUEUE_CREATE of a bad priority");
}

/* Destroys a queue, often with jobs of it queued or running. */
void op_queue_destroy(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_queue_destroy args = { 0 };
	struct fz_errs ok = FZ_ERRS(0);
	unsigned int i;
	int ret;

	if (!f)
		return;
	args.queue_id = fz_pick_queue(fz, f);
	if (!args.queue_id || fz_chance(&fz->rng, 20)) {
		do {
			args.queue_id = fz_chance(&fz->rng, 50) ? (uint32_t)fz_next(&fz->rng) :
					fz_below(&fz->rng, 8);
		} while (fz_queue_known(f, args.queue_id));
		ok = f->ghosts ? FZ_ERRS(0, ENOENT) : FZ_ERRS(ENOENT);
	}
	if (fz_chance(&fz->rng, 10)) {
		args.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
		ok = FZ_ERRS(EINVAL);
	}
	fz_doing(fz, "QUEUE_DESTROY file %u queue %u pad %#x", fz_file_index(fz, f),
		 args.queue_id, args.pad);
	ret = fz_ioctl(fz, f->fd, C_QUEUE_DESTROY, DRM_IOCTL_RBLN_QUEUE_DESTROY, &args);
	fz_check(fz, f, C_QUEUE_DESTROY, ret, ok, "QUEUE_DESTROY");
	if (ret || !fz_queue_known(f, args.queue_id))
		return;
	fz_forget_queue(f, args.queue_id);
	for (i = 0; i < f->njobs; i++)
		if (f->jobs[i].queue == args.queue_id)
			f->jobs[i].queue_destroyed = true;
}

/* --- syncobjs --------------------------------------------------------------------- */

/* A new syncobj in the pool, or NULL. */
static struct fz_syncobj *new_syncobj(struct fz *fz, struct fz_file *f, bool timeline)
{
	struct drm_syncobj_create args = { 0 };
	struct fz_syncobj *s;
	int ret;

	if (f->nsyncobjs == FZ_MAX_SYNCOBJS)
		return NULL;
	if (!timeline && fz_chance(&fz->rng, 30))
		args.flags = DRM_SYNCOBJ_CREATE_SIGNALED;
	fz_doing(fz, "SYNCOBJ_CREATE file %u flags %#x%s", fz_file_index(fz, f), args.flags,
		 timeline ? " (timeline)" : "");
	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_CREATE, DRM_IOCTL_SYNCOBJ_CREATE, &args);
	fz_check(fz, f, C_SYNCOBJ_CREATE, ret, FZ_ERRS(0, ENOMEM), "SYNCOBJ_CREATE");
	if (ret)
		return NULL;
	s = fz_add_syncobj(f, args.handle, timeline);
	s->has_fence = args.flags;
	return s;
}

static int syncobj_destroy(struct fz *fz, struct fz_file *f, uint32_t handle)
{
	struct drm_syncobj_destroy args = { .handle = handle };

	return fz_ioctl(fz, f->fd, C_SYNCOBJ_DESTROY, DRM_IOCTL_SYNCOBJ_DESTROY, &args);
}

/* Moves a syncobj to another file, or to another device, by fd. */
static void syncobj_share(struct fz *fz, struct fz_file *f, struct fz_syncobj *s)
{
	struct fz_file *to = fz_pick_live_file(fz);
	struct drm_syncobj_handle args = { .handle = s->handle, .fd = -1 };
	struct fz_syncobj *t;
	bool sync_file = fz_chance(&fz->rng, 40);
	int ret;

	if (sync_file)
		args.flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE;
	fz_doing(fz, "SYNCOBJ_HANDLE_TO_FD file %u handle %u flags %#x", fz_file_index(fz, f),
		 s->handle, args.flags);
	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_HANDLE_TO_FD, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &args);
	fz_check(fz, f, C_SYNCOBJ_HANDLE_TO_FD, ret,
		 sync_file ? FZ_ERRS(0, EINVAL, ENOMEM, EMFILE) : FZ_ERRS(0, ENOMEM, EMFILE),
		 "SYNCOBJ_HANDLE_TO_FD");
	if (ret)
		return;
	if (!sync_file)
		s->shared = true;
	if (!to || fz_file_gone(fz, to) || to->nsyncobjs == FZ_MAX_SYNCOBJS) {
		close(args.fd);
		return;
	}
	fz_touch(fz, to);
	if (sync_file) {
		/* Into one of the target's binary syncobjs: it gets the fence. */
		t = fz_pick_syncobj(fz, to);
		if (!t || t->timeline) {
			close(args.fd);
			return;
		}
		args.handle = t->handle;
		args.flags = DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE;
	} else {
		args.handle = 0;
		args.flags = 0;
	}
	fz_doing(fz, "SYNCOBJ_FD_TO_HANDLE file %u fd %d flags %#x", fz_file_index(fz, to),
		 args.fd, args.flags);
	ret = fz_ioctl(fz, to->fd, C_SYNCOBJ_FD_TO_HANDLE, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &args);
	close(args.fd);
	fz_check(fz, to, C_SYNCOBJ_FD_TO_HANDLE, ret, FZ_ERRS(0, ENOMEM), "SYNCOBJ_FD_TO_HANDLE");
	if (ret)
		return;
	if (sync_file) {
		t->has_fence = true;
	} else {
		t = fz_add_syncobj(to, args.handle, s->timeline);
		t->has_fence = s->has_fence;
		t->point = s->point;
		t->shared = true;
	}
}

/* Everything a syncobj can go through, right and wrong. */
void op_syncobj(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_syncobj_timeline_array ta = { 0 };
	struct drm_syncobj_array arr = { 0 };
	struct drm_syncobj_transfer tr = { 0 };
	struct fz_syncobj *s;
	uint64_t points[2] = { 0 };
	uint32_t handles[2];
	int ret;

	if (!f)
		return;
	s = fz_pick_syncobj(fz, f);
	if (!s || fz_chance(&fz->rng, 15)) {
		new_syncobj(fz, f, fz_chance(&fz->rng, 40));
		return;
	}
	handles[0] = s->handle;
	arr.handles = (uintptr_t)handles;
	arr.count_handles = 1;
	ta.handles = (uintptr_t)handles;
	ta.points = (uintptr_t)points;
	ta.count_handles = 1;

	switch (fz_below(&fz->rng, 9)) {
	case 0:
		fz_doing(fz, "SYNCOBJ_DESTROY file %u handle %u", fz_file_index(fz, f), s->handle);
		ret = syncobj_destroy(fz, f, s->handle);
		fz_check(fz, f, C_SYNCOBJ_DESTROY, ret, FZ_ERRS(0), "SYNCOBJ_DESTROY");
		fz_forget_syncobj(f, s);
		break;
	case 1:
		if (s->timeline) {
			points[0] = ++s->point;
			fz_doing(fz, "SYNCOBJ_TIMELINE_SIGNAL file %u handle %u point %llu",
				 fz_file_index(fz, f), s->handle, (unsigned long long)points[0]);
			ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_TIMELINE_SIGNAL,
				       DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &ta);
			fz_check(fz, f, C_SYNCOBJ_TIMELINE_SIGNAL, ret, FZ_ERRS(0, ENOMEM),
				 "SYNCOBJ_TIMELINE_SIGNAL");
		} else {
			fz_doing(fz, "SYNCOBJ_SIGNAL file %u handle %u", fz_file_index(fz, f),
				 s->handle);
			ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_SIGNAL, DRM_IOCTL_SYNCOBJ_SIGNAL, &arr);
			fz_check(fz, f, C_SYNCOBJ_SIGNAL, ret, FZ_ERRS(0, ENOMEM), "SYNCOBJ_SIGNAL");
		}
		s->has_fence |= !ret;
		break;
	case 2:
		fz_doing(fz, "SYNCOBJ_RESET file %u handle %u", fz_file_index(fz, f), s->handle);
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_RESET, DRM_IOCTL_SYNCOBJ_RESET, &arr);
		fz_check(fz, f, C_SYNCOBJ_RESET, ret, FZ_ERRS(0), "SYNCOBJ_RESET");
		s->has_fence = false;
		break;
	case 3:
		ta.flags = fz_chance(&fz->rng, 50) ? DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED : 0;
		fz_doing(fz, "SYNCOBJ_QUERY file %u handle %u", fz_file_index(fz, f), s->handle);
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_QUERY, DRM_IOCTL_SYNCOBJ_QUERY, &ta);
		fz_check(fz, f, C_SYNCOBJ_QUERY, ret, FZ_ERRS(0), "SYNCOBJ_QUERY");
		break;
	case 4: {
		/* A tracked job's fence, or another syncobj's, onto a timeline point. */
		struct fz_syncobj *dst = fz_pick_syncobj(fz, f);

		if (!dst || !dst->timeline || dst == s)
			break;
		tr.src_handle = f->njobs && fz_chance(&fz->rng, 50) ?
				f->jobs[fz_below(&fz->rng, f->njobs)].syncobj : s->handle;
		tr.src_point = s->timeline && tr.src_handle == s->handle ? s->point : 0;
		tr.dst_handle = dst->handle;
		tr.dst_point = ++dst->point;
		fz_doing(fz, "SYNCOBJ_TRANSFER file %u %u:%llu to %u:%llu", fz_file_index(fz, f),
			 tr.src_handle, (unsigned long long)tr.src_point, tr.dst_handle,
			 (unsigned long long)tr.dst_point);
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_TRANSFER, DRM_IOCTL_SYNCOBJ_TRANSFER, &tr);
		fz_check(fz, f, C_SYNCOBJ_TRANSFER, ret, FZ_ERRS(0, EINVAL, ENOMEM),
			 "SYNCOBJ_TRANSFER");
		/* Its points now come from elsewhere: valid jobs keep off it. */
		dst->shared = true;
		break;
	}
	case 5:
		syncobj_share(fz, f, s);
		break;
	case 6:	/* the arrays' rules */
		arr.count_handles = 0;
		fz_doing(fz, "SYNCOBJ_SIGNAL file %u of no handle", fz_file_index(fz, f));
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_SIGNAL, DRM_IOCTL_SYNCOBJ_SIGNAL, &arr);
		fz_check(fz, f, C_SYNCOBJ_SIGNAL, ret, FZ_ERRS(EINVAL), "SYNCOBJ_SIGNAL of none");
		break;
	case 7:
		arr.handles = (uintptr_t)fz->bad_page;
		arr.count_handles = 1 + fz_below(&fz->rng, 4);
		fz_doing(fz, "SYNCOBJ_RESET file %u of handles at a bad address",
			 fz_file_index(fz, f));
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_RESET, DRM_IOCTL_SYNCOBJ_RESET, &arr);
		fz_check(fz, f, C_SYNCOBJ_RESET, ret, FZ_ERRS(EFAULT), "SYNCOBJ_RESET");
		break;
	default: {
		uint32_t h;

		do {
			h = fz_chance(&fz->rng, 50) ? (uint32_t)fz_next(&fz->rng) :
			    fz_below(&fz->rng, 64);
		} while (fz_syncobj_known(f, h));
		fz_doing(fz, "SYNCOBJ_DESTROY file %u unknown handle %u", fz_file_index(fz, f), h);
		ret = syncobj_destroy(fz, f, h);
		fz_check(fz, f, C_SYNCOBJ_DESTROY, ret,
			 f->ghosts ? FZ_ERRS(0, EINVAL) : FZ_ERRS(EINVAL),
			 "SYNCOBJ_DESTROY of an unknown handle");
		break;
	}
	}
}

/* An absolute CLOCK_MONOTONIC time @ms from now: every wait has one. */
static int64_t deadline_ms(int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (int64_t)ms * 1000000;
}

/* Short waits, on pool syncobjs and on tracked jobs, all with deadlines. */
void op_wait(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_syncobj_timeline_wait tw = { 0 };
	struct drm_syncobj_wait w = { 0 };
	uint32_t handles[4];
	uint64_t points[4];
	unsigned int i, n;
	int64_t deadline;
	int ret;

	if (!f || (!f->nsyncobjs && !f->njobs))
		return;
	n = 1 + fz_below(&fz->rng, 4);
	for (i = 0; i < n; i++) {
		if (f->njobs && (!f->nsyncobjs || fz_chance(&fz->rng, 50))) {
			handles[i] = f->jobs[fz_below(&fz->rng, f->njobs)].syncobj;
			points[i] = 0;
		} else {
			struct fz_syncobj *s = fz_pick_syncobj(fz, f);

			handles[i] = s->handle;
			points[i] = s->timeline ? fz_below(&fz->rng, s->point + 2) : 0;
		}
	}
	switch (fz_below(&fz->rng, 4)) {
	case 0:
		deadline = 0;
		break;
	case 1:
		deadline = -(int64_t)fz_below(&fz->rng, 1ull << 62);
		break;
	default:
		deadline = deadline_ms(fz_below(&fz->rng, 20));
		break;
	}
	if (fz_chance(&fz->rng, 50)) {
		w.handles = (uintptr_t)handles;
		w.count_handles = n;
		w.timeout_nsec = deadline;
		w.flags = fz_below(&fz->rng, 4);
		fz_doing(fz, "SYNCOBJ_WAIT file %u %u handles flags %#x", fz_file_index(fz, f), n,
			 w.flags);
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_WAIT, DRM_IOCTL_SYNCOBJ_WAIT, &w);
		fz_check(fz, f, C_SYNCOBJ_WAIT, ret, FZ_ERRS(0, ETIME, EINVAL),
			 "SYNCOBJ_WAIT");
	} else {
		tw.handles = (uintptr_t)handles;
		tw.points = (uintptr_t)points;
		tw.count_handles = n;
		tw.timeout_nsec = deadline;
		tw.flags = fz_below(&fz->rng, 8);
		fz_doing(fz, "SYNCOBJ_TIMELINE_WAIT file %u %u handles flags %#x",
			 fz_file_index(fz, f), n, tw.flags);
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_TIMELINE_WAIT, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT,
			       &tw);
		fz_check(fz, f, C_SYNCOBJ_TIMELINE_WAIT, ret, FZ_ERRS(0, ETIME, EINVAL),
			 "SYNCOBJ_TIMELINE_WAIT");
	}
}
