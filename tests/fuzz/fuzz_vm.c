// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_vm.c - VM_RESERVE, VM_RELEASE and VM_BIND, and the bind range as
 * jobs see it
 *
 * A file's model holds its reservations and its mappings as its binds so
 * far leave them, done or not: the view the kernel checks every request
 * against, so that on an untainted file each outcome is known. Binds
 * signal one timeline per file and run in order, so a job that waits for
 * the last point finds every mapping made so far in place; what an unbind
 * removes stays reachable until its point is seen signaled.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

static bool overlaps(uint64_t a, uint64_t asize, uint64_t b, uint64_t bsize)
{
	return a < b + bsize && b < a + asize;
}

/* The reservation of @f that holds all of [@va, + @size), or NULL. */
static struct fz_resv *resv_holding(struct fz_file *f, uint64_t va, uint64_t size)
{
	unsigned int i;

	for (i = 0; i < f->nresvs; i++) {
		struct fz_resv *r = &f->resvs[i];

		if (va >= r->va && size <= r->size && va - r->va <= r->size - size)
			return r;
	}
	return NULL;
}

static bool mapped_in(const struct fz_file *f, uint64_t va, uint64_t size)
{
	unsigned int i;

	for (i = 0; i < f->nvmaps; i++)
		if (overlaps(va, size, f->vmaps[i].va, f->vmaps[i].size))
			return true;
	return false;
}

/* Mapped, or unmapped by an unbind not seen done: a job may reach it. */
static bool maybe_reachable(const struct fz_file *f, uint64_t va, uint64_t size)
{
	unsigned int i;

	for (i = 0; i < f->nunbinds; i++)
		if (overlaps(va, size, f->unbinds[i].va, f->unbinds[i].size))
			return true;
	return mapped_in(f, va, size);
}

/* Forgets the unbinds the bind timeline says are done. */
static void unbinds_seen(struct fz *fz, struct fz_file *f)
{
	uint64_t done = 0;
	struct drm_syncobj_timeline_array q = {
		.handles = (uintptr_t)&f->bind_syncobj,
		.points = (uintptr_t)&done,
		.count_handles = 1,
	};
	unsigned int i = 0;
	int ret;

	/* No timeline yet: no bind has signaled, none is seen done. */
	if (!f->nunbinds || !f->bind_syncobj || fz_file_gone(fz, f))
		return;
	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_QUERY, DRM_IOCTL_SYNCOBJ_QUERY, &q);
	fz_check(fz, f, C_SYNCOBJ_QUERY, ret, FZ_ERRS(0), "SYNCOBJ_QUERY of the bind timeline");
	while (!ret && i < f->nunbinds) {
		if (f->unbinds[i].point <= done)
			f->unbinds[i] = f->unbinds[--f->nunbinds];
		else
			i++;
	}
}

static bool bind_timeline(struct fz *fz, struct fz_file *f)
{
	return f->bind_syncobj || !fz_syncobj_create(fz, f, &f->bind_syncobj);
}

/* --- VM_RESERVE, VM_RELEASE ------------------------------------------------------ */

/* Does [@lo, @hi) hold @size bytes at an @align-aligned address? */
static bool hole_fits(uint64_t lo, uint64_t hi, uint64_t size, uint64_t align)
{
	uint64_t a = (lo + align - 1) & ~(align - 1);

	return a <= hi && hi - a >= size;
}

/* Whether VM_RESERVE finds room: any hole between @f's reservations will do. */
static bool resv_fits(const struct fz_dev *d, const struct fz_file *f, uint64_t size,
		      uint64_t align)
{
	uint64_t lo = d->vm_start, next;
	unsigned int i;

	/* The holes in address order: the next reservation at or above lo each time. */
	for (;;) {
		next = d->vm_start + d->vm_size;
		for (i = 0; i < f->nresvs; i++)
			if (f->resvs[i].va >= lo && f->resvs[i].va < next)
				next = f->resvs[i].va;
		if (hole_fits(lo, next, size, align))
			return true;
		if (next == d->vm_start + d->vm_size)
			return false;
		for (i = 0; i < f->nresvs; i++)
			if (f->resvs[i].va == next)
				lo = next + f->resvs[i].size;
	}
}

static int reserve(struct fz *fz, struct fz_file *f, struct drm_rbln_vm_reserve *a)
{
	const struct fz_dev *d = &fz->devs[f->devi];
	uint64_t align = a->align ? a->align : FZ_PAGE;
	struct fz_errs ok;
	unsigned int i;
	int ret;

	if (a->flags || a->pad || !a->size || a->size % FZ_PAGE || a->size > d->vm_size ||
	    (a->align && ((a->align & (a->align - 1)) || a->align < FZ_PAGE))) {
		ok = FZ_ERRS(EINVAL);
	} else if (!resv_fits(d, f, a->size, align)) {
		ok = FZ_ERRS(ENOSPC);
	} else {
		/* The model has no room to remember it. */
		if (f->nresvs == FZ_MAX_RESVS)
			return -ENOSPC;
		ok = FZ_ERRS(0, ENOMEM);
	}
	fz_doing(fz, "VM_RESERVE file %u size %#llx align %#llx flags %#x pad %#x",
		 fz_file_index(fz, f), (unsigned long long)a->size, (unsigned long long)a->align,
		 a->flags, a->pad);
	ret = fz_ioctl(fz, f->fd, C_VM_RESERVE, DRM_IOCTL_RBLN_VM_RESERVE, a);
	fz_check(fz, f, C_VM_RESERVE, ret, ok, "VM_RESERVE");
	if (ret || fz_file_gone(fz, f))
		return ret;
	if (!fz_file_tainted(fz, f)) {
		if (a->va % align || a->va < d->vm_start ||
		    a->va - d->vm_start > d->vm_size - a->size)
			fz_fail(fz, "VM_RESERVE of %#llx bytes aligned to %#llx gave %#llx",
				(unsigned long long)a->size, (unsigned long long)align,
				(unsigned long long)a->va);
		for (i = 0; i < f->nresvs; i++)
			if (overlaps(a->va, a->size, f->resvs[i].va, f->resvs[i].size))
				fz_fail(fz, "VM_RESERVE gave %#llx+%#llx, which overlaps %#llx+%#llx",
					(unsigned long long)a->va, (unsigned long long)a->size,
					(unsigned long long)f->resvs[i].va,
					(unsigned long long)f->resvs[i].size);
	}
	if (f->nresvs < FZ_MAX_RESVS) {
		f->resvs[f->nresvs].va = a->va;
		f->resvs[f->nresvs++].size = a->size;
	}
	return 0;
}

/* Mostly what a pool allocator asks for; now and then most of the range. */
static uint64_t resv_size(struct fz *fz, const struct fz_dev *d)
{
	switch (fz_below(&fz->rng, 8)) {
	case 0:
		return d->vm_size >> fz_below(&fz->rng, 3);
	case 1:
		return d->vm_size - FZ_PAGE * fz_below(&fz->rng, 4);
	case 2:
		return 1ull << (20 + fz_below(&fz->rng, 24));
	default:
		return FZ_PAGE * (1 + fz_below(&fz->rng, 4096));
	}
}

void op_vm_reserve(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_vm_reserve a = { 0 };
	const struct fz_dev *d;

	if (!f)
		return;
	d = &fz->devs[f->devi];
	a.size = resv_size(fz, d);
	if (fz_chance(&fz->rng, 40))
		a.align = 1ull << (12 + fz_below(&fz->rng, 36));
	if (fz_chance(&fz->rng, 25)) {
		switch (fz_below(&fz->rng, 7)) {
		case 0:
			a.flags = 1u << fz_below(&fz->rng, 32);
			break;
		case 1:
			a.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
			break;
		case 2:
			a.size = 0;
			break;
		case 3:
			a.size += 1 + fz_below(&fz->rng, FZ_PAGE - 1);
			break;
		case 4:
			a.size = d->vm_size + FZ_PAGE * (1 + fz_below(&fz->rng, 1ull << 40));
			break;
		case 5:	/* not a power of two */
			a.align = (FZ_PAGE << fz_below(&fz->rng, 20)) * (3 + 2 * fz_below(&fz->rng, 8));
			break;
		default:
			a.align = 1ull << fz_below(&fz->rng, 12);
			break;
		}
	}
	reserve(fz, f, &a);
}

/* A small reservation for a bind to use; NULL if none could be made. */
static struct fz_resv *small_resv(struct fz *fz, struct fz_file *f)
{
	struct drm_rbln_vm_reserve a = { .size = FZ_PAGE * (16 + fz_below(&fz->rng, 8192)) };

	if (fz_chance(&fz->rng, 30))
		a.align = 2 * FZ_MIB;
	if (fz_file_gone(fz, f) || reserve(fz, f, &a))
		return NULL;
	return resv_holding(f, a.va, a.size);
}

void op_vm_release(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_vm_release a = { 0 };
	struct fz_resv *r;
	struct fz_errs ok;
	const struct fz_dev *d;
	unsigned int i;
	int ret;

	if (!f)
		return;
	d = &fz->devs[f->devi];
	r = f->nresvs ? &f->resvs[fz_below(&fz->rng, f->nresvs)] : NULL;
	switch (r ? fz_below(&fz->rng, 10) : 9) {
	case 0:	/* inside, not at its start */
		a.va = r->va + FZ_PAGE * (1 + fz_below(&fz->rng, r->size / FZ_PAGE));
		break;
	case 1:
		a.va = r->va + 1 + fz_below(&fz->rng, FZ_PAGE - 1);
		break;
	case 2:
		a.va = fz_bad_va(fz, f, false);
		break;
	case 9:
		a.va = d->vm_start + FZ_PAGE * fz_below(&fz->rng, 1 << 20);
		break;
	default:
		a.va = r->va;
		break;
	}
	r = NULL;
	for (i = 0; i < f->nresvs; i++)
		if (f->resvs[i].va == a.va)
			r = &f->resvs[i];
	ok = !r ? FZ_ERRS(ENOENT) : mapped_in(f, r->va, r->size) ? FZ_ERRS(EBUSY) : FZ_ERRS(0);
	fz_doing(fz, "VM_RELEASE file %u va %#llx", fz_file_index(fz, f),
		 (unsigned long long)a.va);
	ret = fz_ioctl(fz, f->fd, C_VM_RELEASE, DRM_IOCTL_RBLN_VM_RELEASE, &a);
	fz_check(fz, f, C_VM_RELEASE, ret, ok, "VM_RELEASE");
	if (!ret && r)
		*r = f->resvs[--f->nresvs];
}

/* --- VM_BIND ----------------------------------------------------------------------- */

/* What a bind request carries besides its struct, to judge it by. */
struct bind {
	struct drm_rbln_vm_bind a;
	struct drm_rbln_sync waits[3];
	int wait_err;		/* the error its waits give, or 0 */
	uint32_t fresh;		/* a syncobj with no fence, to destroy after */
	char what[48];
};

/* Waits that hold the bind back a while: jobs of the file, or earlier binds. */
static void bind_waits(struct fz *fz, struct fz_file *f, struct bind *b)
{
	unsigned int n = 0;

	while (n < 2 && fz_chance(&fz->rng, 25)) {
		if (f->njobs && fz_chance(&fz->rng, 70)) {
			const struct fz_job *j = &f->jobs[fz_below(&fz->rng, f->njobs)];

			b->waits[n].handle = j->syncobj;
			b->waits[n].point = j->point;
		} else if (f->bind_point) {
			b->waits[n].handle = f->bind_syncobj;
			b->waits[n].point = 1 + fz_below(&fz->rng, f->bind_point);
		} else {
			break;
		}
		n++;
	}
	b->a.wait_count = n;
	b->a.waits = (uintptr_t)b->waits;
}

/*
 * How VM_BIND must end on @f, in the order the driver checks; @late: past
 * the first allocation, so -ENOMEM may come instead.
 */
static int bind_error(struct fz_file *f, const struct bind *b, bool *late)
{
	const struct drm_rbln_vm_bind *a = &b->a;
	bool map = a->op == RBLN_VM_BIND_MAP;
	const struct fz_bo *bo;

	*late = false;
	if (!map && a->op != RBLN_VM_BIND_UNMAP)
		return EINVAL;
	if (map ? a->flags & ~RBLN_VM_BIND_READ_ONLY : a->flags || a->handle || a->bo_offset)
		return EINVAL;
	if (!a->size || a->size % FZ_PAGE || a->va % FZ_PAGE || a->bo_offset % FZ_PAGE ||
	    a->va + a->size < a->va)
		return EINVAL;
	if (a->wait_count > RBLN_SUBMIT_MAX_WAITS)
		return E2BIG;
	*late = true;
	if (map) {
		bo = fz_find_bo(f, a->handle);
		if (!bo)
			return ENOENT;
		if (a->bo_offset + a->size < a->bo_offset || a->bo_offset + a->size > bo->size)
			return EINVAL;
	}
	if (a->signal.pad)
		return EINVAL;
	if (a->signal.handle && !fz_syncobj_known(f, a->signal.handle))
		return ENOENT;
	if (b->wait_err)
		return b->wait_err;
	if (!resv_holding(f, a->va, a->size))
		return ENOENT;
	if (map)
		return mapped_in(f, a->va, a->size) ? EEXIST : 0;
	return mapped_in(f, a->va, a->size) ? 0 : ENOENT;
}

/* The model after an unbind of [@va, + @size): straddling mappings split. */
static void model_unmap(struct fz_file *f, uint64_t va, uint64_t size)
{
	uint64_t end = va + size;
	unsigned int i = 0;

	while (i < f->nvmaps) {
		struct fz_vmap *m = &f->vmaps[i], tail = *m;
		bool has_tail = m->va + m->size > end;

		if (!overlaps(va, size, m->va, m->size)) {
			i++;
			continue;
		}
		tail.va = end;
		tail.size = m->va + m->size - end;
		tail.bo_offset += end - m->va;
		if (m->va < va) {
			m->size = va - m->va;
			i++;
			/*
			 * It starts past the hole: the loop passes it by. No
			 * room only where the model is not trusted anyway.
			 */
			if (has_tail && f->nvmaps < FZ_MAX_VMAPS)
				f->vmaps[f->nvmaps++] = tail;
		} else if (has_tail) {
			*m = tail;
			i++;
		} else {
			*m = f->vmaps[--f->nvmaps];
		}
	}
}

/* Would an unbind of [@va, + @size) cut a mapping in two? */
static bool splits(const struct fz_file *f, uint64_t va, uint64_t size)
{
	unsigned int i;

	for (i = 0; i < f->nvmaps; i++)
		if (f->vmaps[i].va < va && f->vmaps[i].va + f->vmaps[i].size > va + size)
			return true;
	return false;
}

static void model_map(struct fz_file *f, const struct drm_rbln_vm_bind *a, uint64_t point)
{
	const struct fz_bo *bo = fz_find_bo(f, a->handle);
	struct fz_vmap *m;
	unsigned int i;

	/* Jobs aimed at a hole there may find it mapped when they run. */
	for (i = 0; i < f->njobs; i++) {
		struct fz_job *j = &f->jobs[i];

		if (j->expect == FZ_JOB_FAULT && j->vm_hole_size &&
		    overlaps(a->va, a->size, j->vm_hole, j->vm_hole_size))
			j->expect = FZ_JOB_MAY_FAULT;
	}
	if (!bo || f->nvmaps == FZ_MAX_VMAPS)
		return;
	m = &f->vmaps[f->nvmaps++];
	m->va = a->va;
	m->size = a->size;
	m->bo_offset = a->bo_offset;
	m->serial = bo->serial;
	m->writable = !(bo->flags & RBLN_BO_READ_ONLY) && !bo->cmd &&
		      !(a->flags & RBLN_VM_BIND_READ_ONLY);
	m->mem_dev = bo->mem_dev;
	m->mem_gen = bo->mem_gen;
	m->point = point;
}

/* Issues @b unless the model could not record its success; judges and records it. */
static void do_bind(struct fz *fz, struct fz_file *f, struct bind *b)
{
	struct drm_rbln_vm_bind *a = &b->a;
	bool map = a->op == RBLN_VM_BIND_MAP, late;
	int err, ret;
	struct fz_errs ok;
	/* Binds are in place after the next point taken, if not their own. */
	uint64_t point = a->signal.handle ? a->signal.point : f->bind_point + 1;

	unbinds_seen(fz, f);
	err = bind_error(f, b, &late);
	if (!err && (map ? f->nvmaps == FZ_MAX_VMAPS :
		     f->nunbinds == FZ_MAX_UNBINDS ||
		     (f->nvmaps == FZ_MAX_VMAPS && splits(f, a->va, a->size))))
		return;
	ok = FZ_ERRS(err);
	if (late)
		fz_errs_add(&ok, ENOMEM);
	fz_doing(fz, "VM_BIND %s file %u op %u flags %#x va %#llx size %#llx handle %u offset %#llx, %u waits, signal %u:%llu pad %#x",
		 b->what, fz_file_index(fz, f), a->op, a->flags, (unsigned long long)a->va,
		 (unsigned long long)a->size, a->handle, (unsigned long long)a->bo_offset,
		 a->wait_count, a->signal.handle, (unsigned long long)a->signal.point,
		 a->signal.pad);
	ret = fz_ioctl(fz, f->fd, C_VM_BIND, DRM_IOCTL_RBLN_VM_BIND, a);
	fz_check(fz, f, C_VM_BIND, ret, ok, b->what);
	if (ret)
		return;
	if (a->signal.handle)
		f->bind_point = a->signal.point;
	if (map) {
		model_map(f, a, point);
		return;
	}
	model_unmap(f, a->va, a->size);
	if (f->nunbinds < FZ_MAX_UNBINDS) {
		f->unbinds[f->nunbinds].va = a->va;
		f->unbinds[f->nunbinds].size = a->size;
		f->unbinds[f->nunbinds++].point = point;
	}
}

/* Signals the next point of the bind timeline, mostly; nothing at times. */
static void bind_signal(struct fz *fz, struct fz_file *f, struct bind *b)
{
	if (fz_file_gone(fz, f) || fz_chance(&fz->rng, 10) || !bind_timeline(fz, f))
		return;
	b->a.signal.handle = f->bind_syncobj;
	b->a.signal.point = f->bind_point + 1;
}

/* A MAP that should succeed: a free stretch of a reservation, often made for it. */
static bool gen_map(struct fz *fz, struct fz_file *f, struct bind *b)
{
	struct drm_rbln_vm_bind *a = &b->a;
	uint64_t gap, room, pages;
	struct fz_resv *r;
	struct fz_bo *bo = NULL;
	unsigned int i;

	/* Objects that only a bind can place, first. */
	for (i = 0; i < f->nbos && fz_chance(&fz->rng, 50); i++)
		if (f->bos[i].flags & RBLN_BO_NO_VA)
			bo = &f->bos[i];
	if (!bo)
		bo = fz_pick_bo(fz, f);
	if (!bo)
		bo = fz_new_bo(fz, f, FZ_PAGE * (1 + fz_below(&fz->rng, 64)),
			       fz_chance(&fz->rng, 50) ? RBLN_BO_HOST : RBLN_BO_DEVICE,
			       RBLN_BO_NO_VA, false);
	r = f->nresvs && fz_chance(&fz->rng, 85) ? &f->resvs[fz_below(&fz->rng, f->nresvs)] :
						  small_resv(fz, f);
	if (!bo || !r)
		return false;
	a->op = RBLN_VM_BIND_MAP;
	a->handle = bo->handle;
	a->va = r->va + FZ_PAGE * fz_below(&fz->rng, r->size / FZ_PAGE);
	/* Mostly right after the page before: pools grow in place. */
	for (i = 0; i < f->nvmaps && fz_chance(&fz->rng, 50); i++) {
		const struct fz_vmap *m = &f->vmaps[i];

		if (m->va + m->size - r->va < r->size && m->va >= r->va)
			a->va = m->va + m->size;
	}
	/* The free stretch from there, up to the reservation's end or the next mapping. */
	gap = r->va + r->size - a->va;
	for (i = 0; i < f->nvmaps; i++)
		if (f->vmaps[i].va >= a->va && f->vmaps[i].va - a->va < gap)
			gap = f->vmaps[i].va - a->va;
	room = bo->size / FZ_PAGE;
	pages = gap / FZ_PAGE < room ? gap / FZ_PAGE : room;
	a->size = FZ_PAGE * (1 + fz_below(&fz->rng, pages ? pages : 1));
	if (fz_chance(&fz->rng, 50))
		a->size = FZ_PAGE * (pages ? pages : 1);
	a->bo_offset = a->size <= bo->size ?
		       FZ_PAGE * fz_below(&fz->rng, (bo->size - a->size) / FZ_PAGE + 1) : 0;
	/* A command buffer is never written by a valid job, through any address. */
	if (bo->cmd || fz_chance(&fz->rng, 15))
		a->flags = RBLN_VM_BIND_READ_ONLY;
	snprintf(b->what, sizeof(b->what), "map");
	return true;
}

/* An UNMAP of a mapping, part of one, several, or a free stretch. */
static bool gen_unmap(struct fz *fz, struct fz_file *f, struct bind *b)
{
	struct drm_rbln_vm_bind *a = &b->a;
	const struct fz_vmap *m = f->nvmaps ? &f->vmaps[fz_below(&fz->rng, f->nvmaps)] : NULL;
	const struct fz_resv *r;

	a->op = RBLN_VM_BIND_UNMAP;
	switch (m ? fz_below(&fz->rng, 10) : 9) {
	case 0:
	case 1:
	case 2:
	case 3:
		a->va = m->va;
		a->size = m->size;
		break;
	case 4:	/* a piece from its middle: the mapping splits in two */
	case 5:
		a->va = m->va + FZ_PAGE * fz_below(&fz->rng, m->size / FZ_PAGE);
		a->size = FZ_PAGE * (1 + fz_below(&fz->rng, (m->va + m->size - a->va) / FZ_PAGE));
		break;
	case 6:	/* across its start, and maybe across others */
	case 7:
		a->va = m->va - FZ_PAGE * fz_below(&fz->rng, 4);
		a->size = FZ_PAGE * (1 + fz_below(&fz->rng, 2 * m->size / FZ_PAGE + 4));
		break;
	default:
		if (!f->nresvs)
			return false;
		r = &f->resvs[fz_below(&fz->rng, f->nresvs)];
		if (fz_chance(&fz->rng, 50)) {
			a->va = r->va;
			a->size = r->size;
		} else {
			a->va = r->va + FZ_PAGE * fz_below(&fz->rng, r->size / FZ_PAGE);
			a->size = FZ_PAGE * (1 + fz_below(&fz->rng, 16));
		}
		break;
	}
	snprintf(b->what, sizeof(b->what), "unmap");
	return true;
}

void op_vm_map(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct bind b;

	memset(&b, 0, sizeof(b));
	if (!f || !gen_map(fz, f, &b))
		return;
	bind_waits(fz, f, &b);
	bind_signal(fz, f, &b);
	do_bind(fz, f, &b);
}

void op_vm_unmap(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct bind b;

	memset(&b, 0, sizeof(b));
	if (!f || !gen_unmap(fz, f, &b))
		return;
	bind_waits(fz, f, &b);
	bind_signal(fz, f, &b);
	do_bind(fz, f, &b);
}

/* Ways a wait list goes wrong, as in SUBMIT. */
static void bad_wait(struct fz *fz, struct fz_file *f, struct bind *b)
{
	if (fz_chance(&fz->rng, 25)) {
		b->a.wait_count = 1 + fz_below(&fz->rng, 4);
		b->a.waits = (uintptr_t)fz->bad_page;
		b->wait_err = EFAULT;
		return;
	}
	b->wait_err = fz_bad_wait(fz, f, &b->waits[b->a.wait_count++], &b->fresh);
}

/* VM_BIND with one or two things wrong; the model says which error comes. */
void op_vm_bind_bad(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_vm_bind *a;
	const struct fz_bo *bo;
	unsigned int i, n;
	struct bind b;

	memset(&b, 0, sizeof(b));
	if (!f || !(fz_chance(&fz->rng, 50) ? gen_map(fz, f, &b) : gen_unmap(fz, f, &b)))
		return;
	a = &b.a;
	bind_waits(fz, f, &b);
	bind_signal(fz, f, &b);
	n = 1 + fz_below(&fz->rng, 2);
	for (i = 0; i < n; i++) {
		switch (fz_below(&fz->rng, 16)) {
		case 0:
			a->op = fz_chance(&fz->rng, 50) ? fz_below(&fz->rng, 4) * 3 :
				(uint32_t)fz_next(&fz->rng);
			break;
		case 1:
			a->flags |= 2u << fz_below(&fz->rng, 31);
			break;
		case 2:	/* what only a MAP may carry */
			if (a->op == RBLN_VM_BIND_MAP)
				a->op = RBLN_VM_BIND_UNMAP;
			else
				a->flags = RBLN_VM_BIND_READ_ONLY;
			if (fz_chance(&fz->rng, 50))
				a->handle = f->nbos ? fz_pick_bo(fz, f)->handle : 1;
			else
				a->bo_offset = FZ_PAGE * (1 + fz_below(&fz->rng, 16));
			break;
		case 3:
			a->size = fz_chance(&fz->rng, 50) ? 0 : a->size + 1 + fz_below(&fz->rng, 4095);
			break;
		case 4:
			a->va += 1 + fz_below(&fz->rng, FZ_PAGE - 1);
			break;
		case 5:
			a->bo_offset += 1 + fz_below(&fz->rng, FZ_PAGE - 1);
			break;
		case 6:	/* past 2^64 */
			a->va = 0ull - FZ_PAGE * (1 + fz_below(&fz->rng, 16));
			a->size = FZ_PAGE * (16 + fz_below(&fz->rng, 1 << 20));
			break;
		case 7:
			a->wait_count = RBLN_SUBMIT_MAX_WAITS + 1 + fz_below(&fz->rng, 1000);
			break;
		case 8:	/* unknown handles are certain only where no ghost hides */
			if (a->op == RBLN_VM_BIND_MAP && !f->ghosts)
				a->handle = fz_unknown_handle(fz, f);
			break;
		case 9:
			bo = a->op == RBLN_VM_BIND_MAP ? fz_find_bo(f, a->handle) : NULL;
			if (bo && fz_chance(&fz->rng, 50))
				a->bo_offset = bo->size - FZ_PAGE * fz_below(&fz->rng, a->size / FZ_PAGE);
			else if (bo)
				a->size = bo->size + FZ_PAGE * (1 + fz_below(&fz->rng, 16));
			break;
		case 10:
			a->signal.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
			break;
		case 11:
			do {
				a->signal.handle = 1 + fz_below(&fz->rng, 0xfffffffeu);
			} while (fz_syncobj_known(f, a->signal.handle));
			break;
		case 12:
			if (!b.wait_err && a->wait_count < FZ_ARRAY_SIZE(b.waits))
				bad_wait(fz, f, &b);
			break;
		case 13:	/* outside every reservation, or across the end of one */
			if (fz_chance(&fz->rng, 30))
				a->va = fz->devs[f->devi].va_start + FZ_PAGE * fz_below(&fz->rng, 1 << 20);
			else if (fz_chance(&fz->rng, 50))
				a->va = fz->devs[f->devi].vm_start + fz->devs[f->devi].vm_size -
					FZ_PAGE * fz_below(&fz->rng, 4);
			else
				a->size += FZ_PAGE * (1 + fz_below(&fz->rng, 1 << 20));
			break;
		case 14:	/* onto a mapping, or where nothing is mapped */
			if (f->nvmaps) {
				const struct fz_vmap *m = &f->vmaps[fz_below(&fz->rng, f->nvmaps)];

				a->va = m->va + FZ_PAGE * fz_below(&fz->rng, m->size / FZ_PAGE);
				a->size = FZ_PAGE;
			}
			break;
		default:
			if (f->nresvs) {
				const struct fz_resv *r = &f->resvs[fz_below(&fz->rng, f->nresvs)];

				a->va = r->va + r->size - FZ_PAGE;
				a->size = FZ_PAGE;
			}
			break;
		}
	}
	snprintf(b.what, sizeof(b.what), "%s (bad)",
		 a->op == RBLN_VM_BIND_MAP ? "map" : a->op == RBLN_VM_BIND_UNMAP ? "unmap" : "op");
	do_bind(fz, f, &b);
	if (b.fresh)
		fz_syncobj_destroy(fz, f, b.fresh);
}

/* --- jobs in the bind range ---------------------------------------------------------- */

/*
 * An @align-aligned range of @bytes in a mapping of the file that the
 * last signaled bind has put in place, writable when @write: its address,
 * or 0. The job then waits for that bind.
 */
uint64_t fz_vm_region(struct fz *fz, struct fz_cmd *c, bool write, unsigned int align,
		      uint64_t bytes)
{
	struct fz_file *f = c->f;
	unsigned int tries;

	for (tries = 0; tries < 4 && f->nvmaps; tries++) {
		const struct fz_vmap *m = &f->vmaps[fz_below(&fz->rng, f->nvmaps)];

		if (m->point > f->bind_point || !fz_mem_reachable(fz, m->mem_dev, m->mem_gen) ||
		    (write && !m->writable) || m->size < bytes)
			continue;
		c->vm_wait = f->bind_point;
		return m->va + fz_below(&fz->rng, (m->size - bytes) / align + 1) * align;
	}
	return 0;
}

/*
 * A packet into the bind range where the file may have nothing mapped: a
 * reserved page no bind has touched (it must fault, unless a map lands
 * there before the job runs), or a range an unbind not seen done removes,
 * or one a map not waited for adds (it may). 0, or -ENOENT if the file
 * has no such range.
 */
int fz_cmd_unbound_packet(struct fz *fz, struct fz_cmd *c, enum fz_expect *expect, char *why,
			  size_t len)
{
	struct fz_file *f = c->f;
	uint64_t page, at, good;
	unsigned int bytes;
	const char *kind;

	switch (fz_below(&fz->rng, 4)) {
	case 0:
		if (!f->nunbinds)
			return -ENOENT;
		{
			const struct fz_unbind *u = &f->unbinds[fz_below(&fz->rng, f->nunbinds)];

			page = u->va + FZ_PAGE * fz_below(&fz->rng, u->size / FZ_PAGE);
		}
		kind = "unmapped";
		break;
	case 1:
		if (!f->nvmaps)
			return -ENOENT;
		{
			const struct fz_vmap *m = &f->vmaps[fz_below(&fz->rng, f->nvmaps)];

			page = m->va + FZ_PAGE * fz_below(&fz->rng, m->size / FZ_PAGE);
		}
		kind = "mapped, not waited for,";
		break;
	default:
		if (!f->nresvs)
			return -ENOENT;
		{
			const struct fz_resv *r = &f->resvs[fz_below(&fz->rng, f->nresvs)];

			page = r->va + FZ_PAGE * fz_below(&fz->rng, r->size / FZ_PAGE);
		}
		kind = "reserved";
		break;
	}
	if (maybe_reachable(f, page, FZ_PAGE)) {
		*expect = FZ_JOB_MAY_FAULT;
	} else {
		*expect = FZ_JOB_FAULT;
		c->fault_kinds = "unmapped";
		c->vm_hole = page;
		c->vm_hole_size = FZ_PAGE;
		kind = "reserved, unmapped,";
	}
	bytes = 8 * (1 + fz_below(&fz->rng, 8));
	at = page + 8 * fz_below(&fz->rng, (FZ_PAGE - bytes) / 8 + 1);
	if (fz_chance(&fz->rng, 30)) {
		good = fz_vm_region(fz, c, true, 1, bytes);
		if (good) {
			snprintf(why, len, "DMA_COPY from %s %#llx", kind, (unsigned long long)at);
			return rbln_drm_cmd_dma_copy(&c->enc, good, at, bytes);
		}
	}
	snprintf(why, len, "DMA_FILL of %s %#llx", kind, (unsigned long long)at);
	return rbln_drm_cmd_dma_fill(&c->enc, at, 0xb1d, bytes);
}
