// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_ops.c - files, GET_PARAM and ioctls the driver must turn down
 * before reading them
 *
 * Like every operation of the fuzzer, each draws its arguments from the
 * pools, mostly valid and often mutated. Where the UAPI says for certain
 * how a call must end (a nonzero pad is -EINVAL, an unknown handle
 * -ENOENT, an unplugged device -ENODEV), the outcome is checked against
 * exactly that; elsewhere the call only must not hurt the kernel.
 */

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "fuzz.h"

/* A live file to work on, opened if there is none; NULL if no device is left. */
struct fz_file *fz_file_for_op(struct fz *fz)
{
	struct fz_file *f = fz_pick_live_file(fz), *o;
	int devi;

	if (!f || (fz_file_gone(fz, f) && fz_chance(&fz->rng, 50))) {
		devi = fz_pick_dev(fz, true);
		o = devi < 0 ? NULL : fz_open_file(fz, devi);
		if (o)
			f = o;
	}
	/* A banned context only refuses jobs: now and then, a fresh one. */
	if (f && f->banned && !f->inherited && fz_chance(&fz->rng, 10)) {
		devi = f->devi;
		fz_doing(fz, "close banned file %u", fz_file_index(fz, f));
		fz_close_file(fz, f);
		f = fz_open_file(fz, devi);
	}
	if (f)
		fz_touch(fz, f);
	return f;
}

/* --- files ------------------------------------------------------------------ */

void op_open(struct fz *fz)
{
	int devi = fz_pick_dev(fz, true);

	if (devi >= 0)
		fz_open_file(fz, devi);
}

/* Closes a file as it is: jobs in flight, objects mapped, exported. */
void op_close_file(struct fz *fz)
{
	struct fz_file *f = fz_pick_file(fz), *o;
	unsigned int i;

	/* Files that cannot do much any more go first. */
	for (i = 0; i < FZ_MAX_FILES; i++) {
		o = &fz->files[i];
		if (o->used && (fz_file_gone(fz, o) || o->banned || fz_file_tainted(fz, o)) &&
		    fz_chance(&fz->rng, 60))
			f = o;
	}
	if (!f)
		return;
	fz_doing(fz, "close file %u (%u jobs in flight, %u objects)", fz_file_index(fz, f),
		 f->njobs, f->nbos);
	fz_close_file(fz, f);
}

/* --- GET_PARAM ---------------------------------------------------------------- */

static void check_param(struct fz *fz, struct fz_file *f, uint32_t p, uint64_t v)
{
	struct fz_dev *d = &fz->devs[f->devi];
	uint64_t want;

	switch (p) {
	case RBLN_PARAM_ABI_VERSION:
		if (v < 3)
			fz_fail(fz, "ABI version %llu", (unsigned long long)v);
		return;
	case RBLN_PARAM_DEVICE_ID:
		want = RBLN_CHIP_ID_EMULATED;
		break;
	case RBLN_PARAM_EMULATED:
		want = 1;
		break;
	case RBLN_PARAM_DEVICE_INDEX:
		want = d->id;
		break;
	case RBLN_PARAM_DEVICE_MEMORY_SIZE:
		want = d->mem_size;
		break;
	case RBLN_PARAM_VA_START:
		want = d->va_start;
		break;
	case RBLN_PARAM_VA_SIZE:
		want = d->va_size;
		break;
	case RBLN_PARAM_NUM_RINGS:
		want = d->num_rings;
		break;
	case RBLN_PARAM_ISA_CAPS:
		want = d->isa_caps;
		break;
	case RBLN_PARAM_MAX_CMD_SIZE:
		want = d->max_cmd;
		break;
	case RBLN_PARAM_VM_BIND_START:
		want = d->vm_start;
		break;
	case RBLN_PARAM_VM_BIND_SIZE:
		want = d->vm_size;
		break;
	case RBLN_PARAM_DEVICE_MEMORY_USED:
		if (v > d->mem_size)
			fz_fail(fz, "%llu bytes of device memory used of %llu",
				(unsigned long long)v, (unsigned long long)d->mem_size);
		return;
	case RBLN_PARAM_RESET_COUNT:
		if (v < d->reset_count || v < d->timeouts_seen)
			fz_fail(fz, "reset count %llu after %llu, with %llu timeouts seen",
				(unsigned long long)v, (unsigned long long)d->reset_count,
				(unsigned long long)d->timeouts_seen);
		d->reset_count = v;
		return;
	case RBLN_PARAM_FAILED_JOBS:
		if (v < f->failed_param || v < f->failed_seen)
			fz_fail(fz, "failed jobs %llu after %llu, with %llu failures seen",
				(unsigned long long)v, (unsigned long long)f->failed_param,
				(unsigned long long)f->failed_seen);
		f->failed_param = v;
		return;
	default:
		return;
	}
	if (v != want)
		fz_fail(fz, "parameter %u is %#llx, was %#llx", p, (unsigned long long)v,
			(unsigned long long)want);
}

void op_get_param(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_get_param args = { 0 };
	bool bad_param = fz_chance(&fz->rng, 15), bad_pad = fz_chance(&fz->rng, 10);
	int ret;

	if (!f)
		return;
	args.param = bad_param ? RBLN_PARAM_VM_BIND_SIZE + 1 + fz_below(&fz->rng, 1000) :
		     fz_below(&fz->rng, RBLN_PARAM_VM_BIND_SIZE + 1);
	if (bad_param && fz_chance(&fz->rng, 30))
		args.param = 0xffffffffu - fz_below(&fz->rng, 2);
	if (bad_pad)
		args.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
	args.value = fz_next(&fz->rng);
	fz_doing(fz, "GET_PARAM file %u param %u pad %#x", fz_file_index(fz, f), args.param,
		 args.pad);
	ret = fz_ioctl(fz, f->fd, C_GET_PARAM, DRM_IOCTL_RBLN_GET_PARAM, &args);
	fz_check(fz, f, C_GET_PARAM, ret,
		 bad_param || bad_pad ? FZ_ERRS(EINVAL) : FZ_ERRS(0), "GET_PARAM");
	if (!ret && !fz_file_gone(fz, f))
		check_param(fz, f, args.param, args.value);
}

/* Every parameter with a rule, at once. */
void fz_check_params(struct fz *fz, struct fz_file *f)
{
	struct drm_rbln_get_param args = { 0 };
	uint32_t p;
	int ret;

	if (fz_file_gone(fz, f))
		return;
	for (p = 0; p <= RBLN_PARAM_VM_BIND_SIZE; p++) {
		args.param = p;
		ret = fz_ioctl(fz, f->fd, C_GET_PARAM, DRM_IOCTL_RBLN_GET_PARAM, &args);
		fz_check(fz, f, C_GET_PARAM, ret, FZ_ERRS(0), "GET_PARAM");
		if (!ret)
			check_param(fz, f, p, args.value);
	}
}

/* --- malformed ioctls ---------------------------------------------------------------- */

static const unsigned long rbln_ioctls[] = {
	DRM_IOCTL_RBLN_GET_PARAM, DRM_IOCTL_RBLN_BO_CREATE, DRM_IOCTL_RBLN_BO_INFO,
	DRM_IOCTL_RBLN_QUEUE_CREATE, DRM_IOCTL_RBLN_QUEUE_DESTROY, DRM_IOCTL_RBLN_SUBMIT,
	DRM_IOCTL_RBLN_VM_RESERVE, DRM_IOCTL_RBLN_VM_RELEASE, DRM_IOCTL_RBLN_VM_BIND,
};

/* A user pointer the kernel cannot read. */
static void *bad_pointer(struct fz *fz)
{
	switch (fz_below(&fz->rng, 4)) {
	case 0:
		return NULL;
	case 1:
		return fz->bad_page + 8 * fz_below(&fz->rng, FZ_PAGE / 8);
	case 2:
		return (void *)0xffff888000000000ull;
	default:
		return (void *)0x8000000000000000ull;
	}
}

/*
 * Ioctls the driver must turn down before looking at them: unknown
 * numbers, sizes that do not match, arguments it cannot read or write back.
 */
void op_raw_ioctl(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	uint64_t args[32] = { 0 };
	unsigned long req;
	struct fz_errs ok;
	int ret;

	if (!f)
		return;
	switch (fz_below(&fz->rng, 7)) {
	case 0:	/* past the driver's table */
		req = DRM_IOWR(DRM_COMMAND_BASE + DRM_RBLN_VM_BIND + 1 +
			       fz_below(&fz->rng, DRM_COMMAND_END - DRM_COMMAND_BASE - 9), uint64_t);
		ok = FZ_ERRS(EINVAL);
		break;
	case 1:	/* not a DRM ioctl at all */
		req = _IOWR('Z', fz_below(&fz->rng, 256), uint64_t);
		ok = FZ_ERRS(ENOTTY);
		break;
	case 2:	/* BO_CREATE shorter than its struct: placement reads as 0 */
		args[0] = 4096;
		req = _IOC(_IOC_READ | _IOC_WRITE, DRM_IOCTL_BASE,
			   DRM_COMMAND_BASE + DRM_RBLN_BO_CREATE, 8);
		ok = FZ_ERRS(EINVAL);
		break;
	case 3:	/* SUBMIT with no input: cmd_size reads as 0 */
		req = _IOC(fz_chance(&fz->rng, 50) ? _IOC_NONE : _IOC_READ, DRM_IOCTL_BASE,
			   DRM_COMMAND_BASE + DRM_RBLN_SUBMIT, sizeof(struct drm_rbln_submit));
		ok = FZ_ERRS(EINVAL);
		break;
	case 4:	/* GET_PARAM longer than its struct: the tail is ignored */
		args[0] = RBLN_PARAM_ABI_VERSION;
		args[2] = fz_next(&fz->rng);
		req = _IOC(_IOC_READ | _IOC_WRITE, DRM_IOCTL_BASE,
			   DRM_COMMAND_BASE + DRM_RBLN_GET_PARAM, 8 * (3 + fz_below(&fz->rng, 29)));
		ok = FZ_ERRS(0);
		break;
	case 5:	/* an argument the kernel cannot read */
		req = rbln_ioctls[fz_below(&fz->rng, FZ_ARRAY_SIZE(rbln_ioctls))];
		fz_doing(fz, "ioctl %#lx file %u with a bad argument pointer", req,
			 fz_file_index(fz, f));
		ret = fz_ioctl(fz, f->fd, C_DRM_OTHER, req, bad_pointer(fz));
		fz_check(fz, f, C_DRM_OTHER, ret, FZ_ERRS(EFAULT), "ioctl with a bad argument");
		return;
	default: {
		/*
		 * An argument the kernel cannot write back: what the ioctl
		 * did stays done, and the file may now hold objects the
		 * fuzzer never learns the handles of.
		 */
		struct drm_rbln_bo_create *c = (struct drm_rbln_bo_create *)fz->ro_page;
		struct drm_rbln_get_param *g = (struct drm_rbln_get_param *)fz->ro_page;
		bool create = fz_chance(&fz->rng, 30);

		memset(fz->ro_page, 0, FZ_PAGE);
		if (create) {
			c->size = FZ_PAGE;
			c->placement = RBLN_BO_DEVICE;
			f->ghosts = true;
		} else {
			g->param = RBLN_PARAM_NUM_RINGS;
		}
		mprotect(fz->ro_page, FZ_PAGE, PROT_READ);
		fz_doing(fz, "%s file %u with a read-only argument",
			 create ? "BO_CREATE" : "GET_PARAM", fz_file_index(fz, f));
		ret = fz_ioctl(fz, f->fd, C_DRM_OTHER,
			       create ? DRM_IOCTL_RBLN_BO_CREATE : DRM_IOCTL_RBLN_GET_PARAM,
			       fz->ro_page);
		mprotect(fz->ro_page, FZ_PAGE, PROT_READ | PROT_WRITE);
		fz_check(fz, f, C_DRM_OTHER, ret,
			 create ? FZ_ERRS(EFAULT, ENOSPC, ENOMEM) : FZ_ERRS(EFAULT),
			 "ioctl with a read-only argument");
		return;
	}
	}
	fz_doing(fz, "ioctl %#lx file %u (malformed)", req, fz_file_index(fz, f));
	ret = fz_ioctl(fz, f->fd, C_DRM_OTHER, req, args);
	fz_check(fz, f, C_DRM_OTHER, ret, ok, "malformed ioctl");
}
