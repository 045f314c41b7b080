// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_bo.c - buffer objects: creation, lookup by handle and by address,
 * closing, CPU mappings, and PRIME between files and devices
 *
 * The pool's record of each object (size, address, placement, flags) is
 * what BO_CREATE and BO_INFO must keep agreeing with; addresses no live
 * object covers must find nothing, up to 2^64.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

#define ALIGN_PAGE(x)	(((x) + FZ_PAGE - 1) & ~(FZ_PAGE - 1))

/* --- buffer objects ------------------------------------------------------------ */

void fz_close_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo)
{
	struct drm_gem_close args = { .handle = bo->handle };
	int ret;

	fz_doing(fz, "GEM_CLOSE file %u handle %u (%s %#llx+%#llx, %u jobs run it)",
		 fz_file_index(fz, f), bo->handle,
		 bo->placement == RBLN_BO_HOST ? "host" : "device",
		 (unsigned long long)bo->va, (unsigned long long)bo->size, bo->cmd_busy);
	ret = fz_ioctl(fz, f->fd, C_GEM_CLOSE, DRM_IOCTL_GEM_CLOSE, &args);
	fz_check(fz, f, C_GEM_CLOSE, ret, FZ_ERRS(0), "GEM_CLOSE of a live handle");
	fz_forget_bo(fz, f, bo);
}

static uint64_t host_bytes(const struct fz_file *f)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < f->nbos; i++)
		if (f->bos[i].placement == RBLN_BO_HOST)
			n += f->bos[i].size;
	return n;
}

/* A new object, checked, in the pool; NULL if it could not be made. */
struct fz_bo *fz_new_bo(struct fz *fz, struct fz_file *f, uint64_t size, uint32_t placement,
			uint32_t flags, bool cmd)
{
	struct drm_rbln_bo_create args = { .size = size, .placement = placement, .flags = flags };
	const struct fz_dev *d = &fz->devs[f->devi];
	struct fz_bo *bo;
	unsigned int i;
	int ret;

	if (f->nbos == FZ_MAX_BOS)
		fz_close_bo(fz, f, fz_pick_bo(fz, f));
	fz_doing(fz, "BO_CREATE file %u size %#llx %s flags %#x%s", fz_file_index(fz, f),
		 (unsigned long long)size, placement == RBLN_BO_HOST ? "host" : "device", flags,
		 cmd ? " (commands)" : "");
	ret = fz_ioctl(fz, f->fd, C_BO_CREATE, DRM_IOCTL_RBLN_BO_CREATE, &args);
	fz_check(fz, f, C_BO_CREATE, ret, FZ_ERRS(0, ENOSPC, ENOMEM), "BO_CREATE");
	if (ret)
		return NULL;
	if (!fz_file_tainted(fz, f)) {
		if (args.size != ALIGN_PAGE(size) ||
		    ((flags & RBLN_BO_NO_VA) ? args.va != 0 :
		     args.va % FZ_PAGE || args.va < d->va_start ||
		     args.va + args.size + FZ_PAGE > d->va_start + d->va_size))
			fz_fail(fz, "BO_CREATE of %#llx bytes flags %#x gave %#llx bytes at %#llx",
				(unsigned long long)size, flags, (unsigned long long)args.size,
				(unsigned long long)args.va);
		for (i = 0; i < f->nbos && !(flags & RBLN_BO_NO_VA); i++) {
			bo = &f->bos[i];
			/* Each mapping is followed by its guard page. */
			if (!(bo->flags & RBLN_BO_NO_VA) &&
			    args.va < bo->va + bo->size + FZ_PAGE &&
			    bo->va < args.va + args.size + FZ_PAGE)
				fz_fail(fz, "new object at %#llx+%#llx overlaps handle %u at %#llx+%#llx",
					(unsigned long long)args.va,
					(unsigned long long)args.size, bo->handle,
					(unsigned long long)bo->va,
					(unsigned long long)bo->size);
		}
	}
	bo = fz_add_bo(fz, f, args.handle, placement, flags, args.size, args.va);
	bo->cmd = cmd;
	if (placement == RBLN_BO_HOST && (cmd || fz_chance(&fz->rng, 50))) {
		ret = fz_map_bo(fz, f, bo);
		fz_check(fz, f, C_MMAP, ret, FZ_ERRS(0, ENOMEM), "mmap of a new object");
	}
	return bo;
}

static uint64_t bo_size(struct fz *fz, uint32_t placement)
{
	static const uint64_t sizes[] = {
		1, 4095, 4096, 4097, 8192, 12288, 65536, 65537, 256 << 10, 1 << 20,
		2 << 20, (2 << 20) + 4096, 3 << 20, (4 << 20) + 1,
	};

	if (placement == RBLN_BO_DEVICE && fz_chance(&fz->rng, 5))
		return (8 + fz_below(&fz->rng, 9)) << 20;
	if (fz_chance(&fz->rng, 60))
		return sizes[fz_below(&fz->rng, FZ_ARRAY_SIZE(sizes))];
	return 1 + fz_below(&fz->rng, 512 << 10);
}

void op_bo_create(struct fz *fz)
{
	static const uint64_t cmd_sizes[] = { 4096, 16384, 65536 };
	struct fz_file *f = fz_file_for_op(fz);
	uint32_t placement, flags = 0;
	bool cmd;

	if (!f)
		return;
	placement = fz_chance(&fz->rng, 55) ? RBLN_BO_HOST : RBLN_BO_DEVICE;
	/* Host memory pinned by jobs is the guest's: keep each file's modest. */
	if (placement == RBLN_BO_HOST && host_bytes(f) > (24 << 20))
		placement = RBLN_BO_DEVICE;
	cmd = placement == RBLN_BO_HOST && fz_chance(&fz->rng, 35);
	if (cmd) {
		fz_new_bo(fz, f, cmd_sizes[fz_below(&fz->rng, 3)], placement, 0, true);
		return;
	}
	if (fz_chance(&fz->rng, 15))
		flags = RBLN_BO_READ_ONLY;
	/* Memory only VM_BIND places, as a pool allocator's. */
	if (fz_chance(&fz->rng, 15))
		flags |= RBLN_BO_NO_VA;
	fz_new_bo(fz, f, bo_size(fz, placement), placement, flags, false);
}

/* BO_CREATE with one or two things wrong: each says how it must fail. */
void op_bo_create_bad(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_bo_create args = { .size = 4096, .placement = RBLN_BO_HOST };
	bool einval = false, enospc;
	const struct fz_dev *d;
	unsigned int i, n;
	int ret;

	if (!f)
		return;
	d = &fz->devs[f->devi];
	if (fz_chance(&fz->rng, 50))
		args.placement = RBLN_BO_DEVICE;
	n = 1 + fz_below(&fz->rng, 2);
	for (i = 0; i < n; i++) {
		switch (fz_below(&fz->rng, 8)) {
		case 0:
			args.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
			einval = true;
			break;
		case 1:
			args.flags = (RBLN_BO_NO_VA << 1) << fz_below(&fz->rng, 29);
			einval = true;
			break;
		case 2: {
			static const uint32_t bad[] = { 0, 3, 4, 0x80000001u, 0xffffffffu };

			args.placement = bad[fz_below(&fz->rng, 5)];
			einval = true;
			break;
		}
		case 3:
			args.size = 0;
			break;
		case 4:	/* overflows when rounded to a page */
			args.size = ~0ull - fz_below(&fz->rng, FZ_PAGE - 1);
			break;
		case 5:	/* larger than the address space */
			args.size = d->va_size - FZ_PAGE + 1 +
				    fz_below(&fz->rng, ~0ull - d->va_size - FZ_PAGE);
			break;
		default:
			if (args.placement == RBLN_BO_DEVICE)
				args.size = d->mem_size + 1 + fz_below(&fz->rng, 1ull << 40);
			else	/* more than any guest has, less than the address space */
				args.size = (1ull << 42) + fz_below(&fz->rng, 1ull << 44);
			break;
		}
	}
	/* The size checks come after the fields', in this order. */
	if (!args.size || args.size > d->va_size - FZ_PAGE)
		einval = true;
	enospc = args.placement == RBLN_BO_DEVICE && args.size > d->mem_size;
	fz_doing(fz, "BO_CREATE (bad) file %u size %#llx placement %u flags %#x pad %#x",
		 fz_file_index(fz, f), (unsigned long long)args.size, args.placement,
		 args.flags, args.pad);
	ret = fz_ioctl(fz, f->fd, C_BO_CREATE, DRM_IOCTL_RBLN_BO_CREATE, &args);
	fz_check(fz, f, C_BO_CREATE, ret,
		 einval ? FZ_ERRS(EINVAL) : enospc ? FZ_ERRS(ENOSPC) : FZ_ERRS(ENOMEM),
		 "BO_CREATE with invalid arguments");
	if (!ret) {
		struct drm_gem_close close_args = { .handle = args.handle };

		fz_ioctl(fz, f->fd, C_GEM_CLOSE, DRM_IOCTL_GEM_CLOSE, &close_args);
	}
}

static void check_info(struct fz *fz, const struct fz_bo *bo, const struct drm_rbln_bo_info *i)
{
	uint32_t flags = bo->flags & ~RBLN_BO_IMPORTED;

	if (i->va != bo->va || i->size != bo->size || i->placement != bo->placement ||
	    (i->bo_flags & ~RBLN_BO_IMPORTED) != flags ||
	    (bo->placement == RBLN_BO_HOST) != (i->mmap_offset != 0))
		fz_fail(fz, "BO_INFO of handle %u: va %#llx size %#llx placement %u flags %#x mmap %#llx; "
			"created as va %#llx size %#llx placement %u flags %#x",
			bo->handle, (unsigned long long)i->va, (unsigned long long)i->size,
			i->placement, i->bo_flags, (unsigned long long)i->mmap_offset,
			(unsigned long long)bo->va, (unsigned long long)bo->size, bo->placement,
			bo->flags);
}

void op_bo_info(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_bo_info args = { 0 };
	struct fz_errs ok;
	struct fz_bo *bo;
	int ret;

	if (!f)
		return;
	bo = fz_chance(&fz->rng, 75) ? fz_pick_bo(fz, f) : NULL;
	args.handle = bo ? bo->handle : fz_unknown_handle(fz, f);
	args.va = fz_next(&fz->rng);
	if (fz_chance(&fz->rng, 10)) {
		args.flags = RBLN_BO_INFO_BY_VA << (1 + fz_below(&fz->rng, 31));
		ok = FZ_ERRS(EINVAL);
	} else {
		ok = bo ? FZ_ERRS(0) : f->ghosts ? FZ_ERRS(0, ENOENT) : FZ_ERRS(ENOENT);
	}
	fz_doing(fz, "BO_INFO file %u handle %u flags %#x", fz_file_index(fz, f), args.handle,
		 args.flags);
	ret = fz_ioctl(fz, f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &args);
	fz_check(fz, f, C_BO_INFO, ret, ok, "BO_INFO by handle");
	if (!ret && bo && !fz_file_tainted(fz, f))
		check_info(fz, bo, &args);
}

/*
 * BO_INFO by address: inside objects, in their guard pages, below and
 * beyond the address space, up to 2^64. Only addresses inside a live
 * object may find one.
 */
void op_bo_info_va(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_bo_info args = { .flags = RBLN_BO_INFO_BY_VA };
	struct fz_bo *bo = NULL, *found;
	struct fz_errs ok;
	uint64_t va;
	int ret;

	if (!f)
		return;
	if (fz_chance(&fz->rng, 35))
		bo = fz_pick_bo(fz, f);
	va = bo ? bo->va + fz_below(&fz->rng, bo->size) : fz_bad_va(fz, f, false);
	args.va = va;
	args.handle = (uint32_t)fz_next(&fz->rng);
	if (fz_chance(&fz->rng, 5)) {
		args.flags |= 2u << fz_below(&fz->rng, 31);
		ok = FZ_ERRS(EINVAL);
	} else if (!fz_va_known_free(f, va)) {
		ok = FZ_ERRS(0);
	} else {
		ok = f->ghosts ? FZ_ERRS(0, ENOENT) : FZ_ERRS(ENOENT);
	}
	fz_doing(fz, "BO_INFO file %u by va %#llx flags %#x", fz_file_index(fz, f),
		 (unsigned long long)va, args.flags);
	ret = fz_ioctl(fz, f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &args);
	fz_check(fz, f, C_BO_INFO, ret, ok, "BO_INFO by address");
	if (ret || fz_file_tainted(fz, f) || fz_file_gone(fz, f))
		return;
	found = fz_find_bo(f, args.handle);
	if (!found && f->ghosts)
		return;
	if (!found || va - found->va >= found->size)
		fz_fail(fz, "BO_INFO by address %#llx found handle %u at %#llx, which is not a live object there",
			(unsigned long long)va, args.handle, (unsigned long long)args.va);
	check_info(fz, found, &args);
}

void op_gem_close(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_gem_close args = { 0 };
	struct fz_bo *bo;
	int ret;

	if (!f)
		return;
	bo = fz_chance(&fz->rng, 70) ? fz_pick_bo(fz, f) : NULL;
	if (bo) {
		fz_close_bo(fz, f, bo);
		return;
	}
	args.handle = fz_unknown_handle(fz, f);
	fz_doing(fz, "GEM_CLOSE file %u unknown handle %u", fz_file_index(fz, f), args.handle);
	ret = fz_ioctl(fz, f->fd, C_GEM_CLOSE, DRM_IOCTL_GEM_CLOSE, &args);
	fz_check(fz, f, C_GEM_CLOSE, ret, f->ghosts ? FZ_ERRS(0, EINVAL) : FZ_ERRS(EINVAL),
		 "GEM_CLOSE of an unknown handle");
}

/* --- CPU mappings -------------------------------------------------------------- */

void op_mmap(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_bo_info info = { 0 };
	uint64_t len;
	struct fz_bo *bo;
	int ret, flags = MAP_SHARED;
	void *p;

	bo = f ? fz_pick_bo(fz, f) : NULL;
	if (!bo)
		return;
	if (bo->placement == RBLN_BO_HOST && !bo->cpu && fz_chance(&fz->rng, 70)) {
		fz_doing(fz, "mmap file %u handle %u", fz_file_index(fz, f), bo->handle);
		ret = fz_map_bo(fz, f, bo);
		fz_check(fz, f, C_MMAP, ret, FZ_ERRS(0, ENOMEM), "mmap of a live host object");
		return;
	}
	/* The wrong way: device memory, too long, private, at a bad offset. */
	info.handle = bo->handle;
	ret = fz_ioctl(fz, f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &info);
	if (ret)
		return;
	len = bo->size;
	switch (fz_below(&fz->rng, 4)) {
	case 0:
		len += FZ_PAGE * (1 + fz_below(&fz->rng, 4));
		break;
	case 1:
		flags = MAP_PRIVATE;
		break;
	case 2:
		info.mmap_offset += FZ_PAGE * (1 + fz_below(&fz->rng, 4));
		break;
	default:
		info.mmap_offset = fz_next(&fz->rng) & ~(FZ_PAGE - 1) & ((1ull << 46) - 1);
		break;
	}
	fz_doing(fz, "mmap (bad) file %u handle %u offset %#llx len %#llx flags %#x",
		 fz_file_index(fz, f), bo->handle, (unsigned long long)info.mmap_offset,
		 (unsigned long long)len, flags);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, f->fd, info.mmap_offset);
	ret = p == MAP_FAILED ? -errno : 0;
	fz_count(fz->sh, C_MMAP, ret);
	if (fz_file_gone(fz, f))
		fz_check(fz, f, C_MMAP, ret, FZ_ERRS(ENODEV), "mmap");
	if (!ret)
		fz_count(fz->sh, C_MUNMAP, munmap(p, len) ? -errno : 0);
}

void op_munmap(struct fz *fz)
{
	struct fz_file *f = fz_pick_file(fz);
	struct fz_bo *bo = f ? fz_pick_bo(fz, f) : NULL;

	if (fz->norphans && (fz_chance(&fz->rng, 50) || !bo || !bo->cpu)) {
		unsigned int i = fz_below(&fz->rng, fz->norphans);
		struct fz_orphan *o = &fz->orphans[i];

		fz_doing(fz, "munmap orphan %p+%#llx", o->cpu, (unsigned long long)o->size);
		/* A page off the front: the rest stays mapped. */
		if (o->size > FZ_PAGE && fz_chance(&fz->rng, 30)) {
			fz_count(fz->sh, C_MUNMAP, munmap(o->cpu, FZ_PAGE) ? -errno : 0);
			o->cpu = (uint8_t *)o->cpu + FZ_PAGE;
			o->size -= FZ_PAGE;
		} else {
			fz_orphan_drop(fz, i);
		}
		return;
	}
	if (!bo || !bo->cpu)
		return;
	fz_doing(fz, "munmap file %u handle %u (%u jobs run it)", fz_file_index(fz, f),
		 bo->handle, bo->cmd_busy);
	fz_count(fz->sh, C_MUNMAP, munmap(bo->cpu, bo->size) ? -errno : 0);
	bo->cpu = NULL;
}

/* Jobs in flight whose command buffer is the object @serial. */
static void clobber(struct fz *fz, uint64_t serial)
{
	unsigned int i, j;

	for (i = 0; i < FZ_MAX_FILES; i++) {
		for (j = 0; j < fz->files[i].njobs; j++) {
			if (fz->files[i].jobs[j].cmd_serial == serial) {
				fz->files[i].jobs[j].clobbered = true;
				/* Garbage commands fault, and the fault bans the context. */
				fz->files[i].may_be_banned = true;
			}
		}
	}
}

/* The CPU writes or reads a mapping, maybe while the device works on it. */
void op_cpu_touch(struct fz *fz)
{
	struct fz_file *f = fz_pick_file(fz);
	struct fz_bo *bo = f ? fz_pick_bo(fz, f) : NULL;
	uint8_t buf[512];
	uint64_t size, serial, off;
	bool live = false, write, ok;
	size_t len;
	void *cpu;

	if (bo && bo->cpu) {
		fz_touch(fz, f);
		cpu = bo->cpu;
		size = bo->size;
		serial = bo->serial;
		live = !fz_file_gone(fz, f);
	} else if (fz->norphans) {
		struct fz_orphan *o = &fz->orphans[fz_below(&fz->rng, fz->norphans)];

		cpu = o->cpu;
		size = o->size;
		serial = o->serial;
	} else {
		return;
	}
	len = 1 + fz_below(&fz->rng, sizeof(buf));
	if (len > size)
		len = size;
	off = fz_below(&fz->rng, size - len + 1);
	write = fz_chance(&fz->rng, 50);
	fz_doing(fz, "CPU %s %p+%#llx, %zu bytes", write ? "write" : "read", cpu,
		 (unsigned long long)off, len);
	if (write) {
		memset(buf, (int)fz_next(&fz->rng), len);
		clobber(fz, serial);
		ok = fz_guarded_copy((uint8_t *)cpu + off, buf, len);
	} else {
		ok = fz_guarded_copy(buf, (uint8_t *)cpu + off, len);
	}
	if (!ok && live)
		fz_fail(fz, "SIGBUS or SIGSEGV touching the mapping of a live host object");
}

/* --- PRIME ------------------------------------------------------------------ */

void op_export(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_prime_handle args = { .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
	struct fz_errs ok = FZ_ERRS(0, ENOMEM, EMFILE);
	struct fz_dmabuf *b;
	struct fz_bo *bo;
	int ret;

	if (!f)
		return;
	bo = fz_pick_bo(fz, f);
	/* Command buffers stay private: nobody else may write them. */
	if (bo && bo->cmd)
		bo = NULL;
	args.handle = bo ? bo->handle : fz_unknown_handle(fz, f);
	if (!bo)
		ok = f->ghosts ? FZ_ERRS(0, ENOENT) : FZ_ERRS(ENOENT);
	if (fz_chance(&fz->rng, 10)) {
		args.flags |= 1u << fz_below(&fz->rng, 32);
		if (args.flags & ~(DRM_CLOEXEC | DRM_RDWR))
			ok = FZ_ERRS(EINVAL);
	}
	if (fz->ndmabufs == FZ_MAX_DMABUFS)
		fz_dmabuf_drop(fz, fz_below(&fz->rng, fz->ndmabufs));
	fz_doing(fz, "PRIME_HANDLE_TO_FD file %u handle %u flags %#x", fz_file_index(fz, f),
		 args.handle, args.flags);
	ret = fz_ioctl(fz, f->fd, C_PRIME_HANDLE_TO_FD, DRM_IOCTL_PRIME_HANDLE_TO_FD, &args);
	fz_check(fz, f, C_PRIME_HANDLE_TO_FD, ret, ok, "PRIME_HANDLE_TO_FD");
	if (ret)
		return;
	if (!bo) {
		close(args.fd);
		return;
	}
	b = &fz->dmabufs[fz->ndmabufs++];
	b->fd = args.fd;
	b->devi = bo->origin_dev;
	b->dev_gen = bo->origin_gen;
	b->placement = bo->placement;
	b->flags = bo->flags & RBLN_BO_READ_ONLY;
	b->size = bo->size;
	b->mem_dev = bo->mem_dev;
	b->mem_gen = bo->mem_gen;
	b->known = !fz_file_tainted(fz, f);
}

/* Imports a dma-buf into a file of the same or of another device. */
void op_import(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_prime_handle args = { .fd = -1 };
	struct drm_rbln_bo_info info = { 0 };
	struct fz_dmabuf *b = NULL;
	struct fz_errs ok;
	struct fz_bo *bo;
	int ret;

	if (!f)
		return;
	if (fz->ndmabufs && fz_chance(&fz->rng, 85)) {
		b = &fz->dmabufs[fz_below(&fz->rng, fz->ndmabufs)];
		args.fd = b->fd;
		ok = FZ_ERRS(0, ENOMEM, ENOSPC);
	} else {
		switch (fz_below(&fz->rng, 3)) {
		case 0:
			args.fd = -1 - (int)fz_below(&fz->rng, 2);
			ok = FZ_ERRS(EBADF);
			break;
		case 1:
			args.fd = 1 << 20;
			ok = FZ_ERRS(EBADF);
			break;
		default:	/* an open file that is no dma-buf */
			args.fd = f->fd;
			ok = FZ_ERRS(EINVAL);
			break;
		}
	}
	fz_doing(fz, "PRIME_FD_TO_HANDLE file %u (%s) fd %d%s", fz_file_index(fz, f),
		 fz->devs[f->devi].name, args.fd,
		 b ? (b->placement == RBLN_BO_HOST ? " (host)" : " (device)") : "");
	ret = fz_ioctl(fz, f->fd, C_PRIME_FD_TO_HANDLE, DRM_IOCTL_PRIME_FD_TO_HANDLE, &args);
	/* An exporter that went away may or may not let go: no rule there. */
	if (!b || (fz->devs[b->devi].present && fz->devs[b->devi].gen == b->dev_gen))
		fz_check(fz, f, C_PRIME_FD_TO_HANDLE, ret, ok, "PRIME_FD_TO_HANDLE");
	if (ret || !b || fz_find_bo(f, args.handle))
		return;

	info.handle = args.handle;
	ret = fz_ioctl(fz, f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &info);
	fz_check(fz, f, C_BO_INFO, ret, FZ_ERRS(0), "BO_INFO of an import");
	if (ret)
		return;
	if (b->known && !fz_file_tainted(fz, f) &&
	    (info.size != b->size || info.placement != b->placement ||
	     (b->placement == RBLN_BO_DEVICE &&
	      (info.bo_flags & RBLN_BO_READ_ONLY) != b->flags)))
		fz_fail(fz, "import of a %s object of %#llx bytes, flags %#x: BO_INFO says placement %u, %#llx bytes, flags %#x",
			b->placement == RBLN_BO_HOST ? "host" : "device",
			(unsigned long long)b->size, b->flags, info.placement,
			(unsigned long long)info.size, info.bo_flags);
	if (f->nbos == FZ_MAX_BOS)
		fz_close_bo(fz, f, fz_pick_bo(fz, f));
	bo = fz_add_bo(fz, f, args.handle, info.placement, info.bo_flags, info.size, info.va);
	bo->imported = true;
	bo->origin_dev = b->devi;
	bo->origin_gen = b->dev_gen;
	/* Device memory of a file a child changed: whose, nobody knows. */
	fz_bo_set_memory(fz, f, bo, info.placement == RBLN_BO_HOST ? -1 :
			 b->known ? b->mem_dev : FZ_MEM_UNKNOWN, b->mem_gen);
}

/* Closes, or maps, a dma-buf: device memory never reaches the CPU. */
void op_dmabuf_misc(struct fz *fz)
{
	struct fz_dmabuf *b;
	unsigned int i;
	int ret;
	void *p;

	if (!fz->ndmabufs)
		return;
	i = fz_below(&fz->rng, fz->ndmabufs);
	b = &fz->dmabufs[i];
	if (fz_chance(&fz->rng, 60)) {
		fz_doing(fz, "close dma-buf fd %d", b->fd);
		fz_dmabuf_drop(fz, i);
		return;
	}
	fz_doing(fz, "mmap dma-buf fd %d (%s, %#llx bytes)", b->fd,
		 b->placement == RBLN_BO_HOST ? "host" : "device", (unsigned long long)b->size);
	p = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	ret = p == MAP_FAILED ? -errno : 0;
	fz_count(fz->sh, C_DMABUF_MMAP, ret);
	if (!ret && b->known && b->placement == RBLN_BO_DEVICE)
		fz_fail(fz, "the CPU mapped a dma-buf of device memory");
	if (!ret)
		fz_count(fz->sh, C_MUNMAP, munmap(p, b->size) ? -errno : 0);
}
