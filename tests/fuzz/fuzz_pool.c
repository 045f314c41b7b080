// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_pool.c - the live state the fuzzer draws its arguments from
 *
 * Devices, and per open file its buffer objects (with their addresses and
 * CPU mappings), queues and syncobjs; dma-bufs and orphaned mappings. What
 * the pools know is what the oracles trust: a file a child may have
 * changed, or that may hold handles the fuzzer never saw, is judged
 * leniently.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"


int fz_ioctl(struct fz *fz, int fd, enum fz_call c, unsigned long req, void *arg)
{
	int ret = ioctl(fd, req, arg) ? -errno : 0;

	fz_count(fz->sh, c, ret);
	return ret;
}

static const char *err_name(int ret)
{
	const char *name;

	if (!ret)
		return "success";
	name = strerrorname_np(-ret);
	return name ? name : "an unknown errno";
}

bool fz_file_gone(struct fz *fz, const struct fz_file *f)
{
	const struct fz_dev *d = &fz->devs[f->devi];

	return !d->present || d->gen != f->dev_gen;
}

bool fz_file_tainted(struct fz *fz, struct fz_file *f)
{
	unsigned int bit = f->gen % FZ_TAINT_BITS;

	return f->inherited || (atomic_load(&fz->sh->tainted[bit / 64]) >> (bit % 64) & 1);
}

/* A child is about to change a file it shares with the worker: say so first. */
void fz_touch(struct fz *fz, struct fz_file *f)
{
	unsigned int bit = f->gen % FZ_TAINT_BITS;

	if (fz->child && f->inherited)
		atomic_fetch_or(&fz->sh->tainted[bit / 64], 1ull << (bit % 64));
}

/*
 * The outcome of one call on @f against what it may be. An unplugged
 * device answers every ioctl with -ENODEV before looking at it; a child
 * cannot know when the worker unplugs one.
 */
void fz_check(struct fz *fz, struct fz_file *f, enum fz_call c, int ret,
	      struct fz_errs ok, const char *what)
{
	char list[256];
	size_t len = 0;
	int e;

	if (f && fz_file_gone(fz, f))
		ok = FZ_ERRS(ENODEV);
	else if (f && fz_file_tainted(fz, f))
		return;
	if (fz->child)
		fz_errs_add(&ok, ENODEV);
	if (fz_errs_has(&ok, -ret))
		return;

	list[0] = '\0';
	for (e = 0; e < 192 && len < sizeof(list); e++) {
		if (fz_errs_has(&ok, e))
			len += snprintf(list + len, sizeof(list) - len, "%s%s",
					len ? " " : "", e ? err_name(-e) : "success");
	}
	fz_fail(fz, "%s: %s returned %s; expected %s", what, fz_call_name(c),
		err_name(ret), list);
}

/* --- devices ------------------------------------------------------------------ */

/* What never changes on a device instance, read once. */
int fz_dev_probe(struct fz_dev *d)
{
	static const uint32_t params[] = {
		RBLN_PARAM_DEVICE_INDEX, RBLN_PARAM_DEVICE_MEMORY_SIZE, RBLN_PARAM_VA_START,
		RBLN_PARAM_VA_SIZE, RBLN_PARAM_MAX_CMD_SIZE, RBLN_PARAM_ISA_CAPS,
		RBLN_PARAM_NUM_RINGS, RBLN_PARAM_RESET_COUNT, RBLN_PARAM_VM_BIND_START,
		RBLN_PARAM_VM_BIND_SIZE,
	};
	uint64_t *values[] = {
		NULL, &d->mem_size, &d->va_start, &d->va_size, &d->max_cmd, &d->isa_caps,
		&d->num_rings, &d->reset_count, &d->vm_start, &d->vm_size,
	};
	struct rbln_drm_device *dev;
	uint64_t index;
	int minor = rbln_dev_minor(d->name), ret = 0;
	unsigned int i;

	if (minor < 0)
		return -ENODEV;
	ret = rbln_drm_open(minor, &dev);
	if (ret)
		return ret;
	values[0] = &index;
	for (i = 0; i < FZ_ARRAY_SIZE(params) && !ret; i++)
		ret = rbln_drm_get_param(dev, params[i], values[i]);
	rbln_drm_close(dev);
	if (ret)
		return ret;
	if (index != d->id) {
		fprintf(stderr, "rbln_fuzz: %s says it is device %llu, not %u\n", d->name,
			(unsigned long long)index, d->id);
		return -EIO;
	}
	d->mem_mib = d->mem_size / FZ_MIB;
	d->present = true;
	d->timeouts_seen = 0;
	return 0;
}

static int add_dev(struct fz *fz, unsigned int id)
{
	struct fz_dev *d;
	int ret;

	if (fz->ndevs == FZ_MAX_DEVICES) {
		fprintf(stderr, "rbln_fuzz: at most %d devices\n", FZ_MAX_DEVICES);
		return -E2BIG;
	}
	d = &fz->devs[fz->ndevs];
	memset(d, 0, sizeof(*d));
	d->id = id;
	d->pci = rbln_test_on_pci();
	ret = rbln_test_name(id, d->name) ?: fz_dev_probe(d);
	if (ret) {
		fprintf(stderr, "rbln_fuzz: cannot use %s device %u: %s\n",
			d->pci ? "PCI" : "emulated", id, strerror(-ret));
		return ret;
	}
	fz->ndevs++;
	return 0;
}

/*
 * @list: "0,1,..." of emulated device ids (PCI NPU numbers on PCI), or NULL
 * for all of them.
 */
int fz_devices_init(struct fz *fz, const char *list)
{
	unsigned int id;
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	if (list) {
		char *copy = strdup(list), *tok, *save = NULL, *end;

		if (!copy)
			return -ENOMEM;
		for (tok = strtok_r(copy, ",", &save); tok && !ret;
		     tok = strtok_r(NULL, ",", &save)) {
			id = strtoul(tok, &end, 0);
			ret = *end || end == tok ? -EINVAL : add_dev(fz, id);
		}
		free(copy);
	} else if (rbln_test_on_pci()) {
		for (id = 0; id < (unsigned int)rbln_test_pci_devices() && !ret; id++)
			ret = add_dev(fz, id);
	} else {
		dir = opendir(RBLN_EMU_BUS "/devices");
		if (!dir)
			return -errno;
		while ((de = readdir(dir)) && !ret)
			if (sscanf(de->d_name, "rbln_emu%u", &id) == 1)
				ret = add_dev(fz, id);
		closedir(dir);
	}
	if (!ret && !fz->ndevs)
		ret = -ENODEV;
	return ret;
}

/* A random device that is (@present) or is not there, or -1. */
int fz_pick_dev(struct fz *fz, bool present)
{
	unsigned int i, n = 0, k;

	for (i = 0; i < fz->ndevs; i++)
		n += fz->devs[i].present == present;
	if (!n)
		return -1;
	k = fz_below(&fz->rng, n);
	for (i = 0; i < fz->ndevs; i++)
		if (fz->devs[i].present == present && !k--)
			return i;
	return -1;
}

/* --- files ------------------------------------------------------------------ */

/* A mapping that outlives its handle or file: unmapped or touched later. */
static void orphan_add(struct fz *fz, void *cpu, uint64_t size, uint64_t serial)
{
	struct fz_orphan *o = &fz->orphans[fz->norphans++];

	o->cpu = cpu;
	o->size = size;
	o->serial = serial;
}

unsigned int fz_file_index(struct fz *fz, const struct fz_file *f)
{
	return f - fz->files;
}

/* A random open file, gone or not; NULL when none is open. */
struct fz_file *fz_pick_file(struct fz *fz)
{
	unsigned int i, n = 0, k;

	for (i = 0; i < FZ_MAX_FILES; i++)
		n += fz->files[i].used;
	if (!n)
		return NULL;
	k = fz_below(&fz->rng, n);
	for (i = 0; i < FZ_MAX_FILES; i++)
		if (fz->files[i].used && !k--)
			return &fz->files[i];
	return NULL;
}

/* A random open file of a present device, mostly; any file at times. */
struct fz_file *fz_pick_live_file(struct fz *fz)
{
	unsigned int i, n = 0, k;

	if (fz_chance(&fz->rng, 3))
		return fz_pick_file(fz);
	for (i = 0; i < FZ_MAX_FILES; i++)
		n += fz->files[i].used && !fz_file_gone(fz, &fz->files[i]);
	if (!n)
		return fz_pick_file(fz);
	k = fz_below(&fz->rng, n);
	for (i = 0; i < FZ_MAX_FILES; i++)
		if (fz->files[i].used && !fz_file_gone(fz, &fz->files[i]) && !k--)
			return &fz->files[i];
	return NULL;
}

struct fz_file *fz_open_file(struct fz *fz, int devi)
{
	struct fz_dev *d = &fz->devs[devi];
	struct fz_file *f = NULL;
	unsigned int i;
	int minor, ret;

	for (i = 0; i < FZ_MAX_FILES && !f; i++)
		if (!fz->files[i].used)
			f = &fz->files[i];
	if (!f || !d->present)
		return NULL;
	fz_doing(fz, "open %s as file %u", d->name, fz_file_index(fz, f));
	minor = rbln_dev_minor(d->name);
	/* A child cannot know whether the worker just unplugged it. */
	if (minor < 0 && fz->child)
		return NULL;
	if (minor < 0)
		fz_fail(fz, "%s is present but has no accel node", d->name);
	ret = rbln_drm_open(minor, &f->dev);
	fz_count(fz->sh, C_OPEN, ret);
	if (ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM ||
	    (fz->child && (ret == -ENOENT || ret == -ENODEV)))
		return NULL;
	if (ret)
		fz_fail(fz, "open of accel%d (%s) failed: %s", minor, d->name,
			strerror(-ret));
	f->used = true;
	f->fd = rbln_drm_fd(f->dev);
	f->devi = devi;
	f->dev_gen = d->gen;
	f->gen = ++fz->next_gen;
	f->inherited = false;
	f->banned = false;
	/* The worker's injections may land on a child's jobs at any time. */
	f->may_be_banned = fz->child || atomic_load(&fz->sh->inject_pending[devi]) > 0;
	f->ghosts = false;
	f->peers = 0;
	f->failed_seen = f->failed_param = 0;
	f->nbos = f->nqueues = f->nsyncobjs = f->njobs = f->nstale = 0;
	f->nresvs = f->nvmaps = f->nunbinds = 0;
	f->bind_syncobj = 0;
	f->bind_point = 0;
	return f;
}

/*
 * Closes @f with whatever it has in flight. Its CPU mappings stay behind,
 * holding the file open until they go, when there is room to remember them.
 */
void fz_close_file(struct fz *fz, struct fz_file *f)
{
	unsigned int i;

	for (i = 0; i < f->nbos; i++) {
		struct fz_bo *bo = &f->bos[i];

		if (!bo->cpu)
			continue;
		if (fz_chance(&fz->rng, 50) && fz->norphans < FZ_MAX_ORPHANS)
			orphan_add(fz, bo->cpu, bo->size, bo->serial);
		else
			fz_count(fz->sh, C_MUNMAP, munmap(bo->cpu, bo->size) ? -errno : 0);
		bo->cpu = NULL;
	}
	rbln_drm_close(f->dev);
	fz_count(fz->sh, C_CLOSE, 0);
	memset(f, 0, sizeof(*f));
}

/* --- buffer objects --------------------------------------------------------- */

struct fz_bo *fz_add_bo(struct fz *fz, struct fz_file *f, uint32_t handle,
			uint32_t placement, uint32_t flags, uint64_t size, uint64_t va)
{
	struct fz_bo *bo;

	if (f->nbos == FZ_MAX_BOS)
		return NULL;
	bo = &f->bos[f->nbos++];
	memset(bo, 0, sizeof(*bo));
	bo->serial = ++fz->next_serial;
	bo->handle = handle;
	bo->placement = placement;
	bo->flags = flags;
	bo->size = size;
	bo->va = va;
	bo->mem_dev = placement == RBLN_BO_DEVICE ? f->devi : -1;
	bo->mem_gen = fz->devs[f->devi].gen;
	bo->origin_dev = f->devi;
	bo->origin_gen = fz->devs[f->devi].gen;
	return bo;
}

struct fz_bo *fz_find_bo(struct fz_file *f, uint32_t handle)
{
	unsigned int i;

	for (i = 0; i < f->nbos; i++)
		if (f->bos[i].handle == handle)
			return &f->bos[i];
	return NULL;
}

struct fz_bo *fz_pick_bo(struct fz *fz, struct fz_file *f)
{
	return f->nbos ? &f->bos[fz_below(&fz->rng, f->nbos)] : NULL;
}

static void remember_stale(struct fz *fz, struct fz_file *f, uint32_t handle, uint64_t va)
{
	unsigned int i = f->nstale < FZ_MAX_STALE ? f->nstale++ : fz_below(&fz->rng, FZ_MAX_STALE);

	f->stale_handles[i] = handle;
	f->stale_vas[i] = va;
}

/* The handle is closed: the record goes, its mapping may stay behind. */
void fz_forget_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo)
{
	fz_jobs_lose(f, bo->serial);
	remember_stale(fz, f, bo->handle, bo->va);
	if (bo->cpu) {
		if (fz->norphans < FZ_MAX_ORPHANS && fz_chance(&fz->rng, 60))
			orphan_add(fz, bo->cpu, bo->size, bo->serial);
		else
			fz_count(fz->sh, C_MUNMAP, munmap(bo->cpu, bo->size) ? -errno : 0);
	}
	*bo = f->bos[--f->nbos];
}

/*
 * Can a job reach memory of @mem_dev (-1: host, FZ_MEM_UNKNOWN) as it was
 * at generation @mem_gen: a peer's exporter may be gone.
 */
bool fz_mem_reachable(struct fz *fz, int mem_dev, unsigned int mem_gen)
{
	const struct fz_dev *d;

	if (mem_dev == FZ_MEM_UNKNOWN)
		return false;
	if (mem_dev < 0)
		return true;
	d = &fz->devs[mem_dev];
	return d->present && d->gen == mem_gen;
}

bool fz_bo_reachable(struct fz *fz, const struct fz_bo *bo)
{
	return fz_mem_reachable(fz, bo->mem_dev, bo->mem_gen);
}

/*
 * The fault that banned @f, as fdinfo's rbln-fault gives it: its kind
 * into @kind (FZ_FAULT_KIND bytes) and its address. False when there is
 * none.
 */
bool fz_file_fault(const struct fz_file *f, char *kind, uint64_t *addr)
{
	unsigned long long a;
	char value[128];

	if (rbln_test_fdinfo_value(f->fd, "rbln-fault:", value, sizeof(value)) ||
	    sscanf(value, "%31s %llx", kind, &a) != 2)
		return false;
	*addr = a;
	return true;
}

/*
 * What a failure report needs of @f: the fault the kernel says banned it,
 * and the objects and mappings the fuzzer believes it has.
 */
void fz_print_file(struct fz *fz, const struct fz_file *f)
{
	char kind[FZ_FAULT_KIND] = "none";
	uint64_t addr = 0;
	unsigned int i;

	fz_file_fault(f, kind, &addr);
	fprintf(stderr, "rbln_fuzz: file %u (fd %d, %s): fault %s %#llx; %u objects, %u mappings%s%s\n",
		fz_file_index(fz, f), f->fd, fz->devs[f->devi].name, kind,
		(unsigned long long)addr, f->nbos, f->nvmaps,
		f->may_be_banned ? ", may be banned" : "", f->ghosts ? ", ghosts" : "");
	for (i = 0; i < f->nbos; i++) {
		const struct fz_bo *bo = &f->bos[i];

		fprintf(stderr, "rbln_fuzz:   object %llu handle %u %s %#llx+%#llx flags %#x memory of %d%s%s%s%s\n",
			(unsigned long long)bo->serial, bo->handle,
			bo->placement == RBLN_BO_DEVICE ? "device" : "host",
			(unsigned long long)bo->va, (unsigned long long)bo->size, bo->flags,
			bo->mem_dev, fz_bo_reachable(fz, bo) ? "" : " (unreachable)",
			bo->bound ? ", bound" : "", bo->imported ? ", imported" : "",
			bo->cmd ? ", commands" : "");
	}
	for (i = 0; i < f->nvmaps; i++) {
		const struct fz_vmap *m = &f->vmaps[i];

		fprintf(stderr, "rbln_fuzz:   mapping %#llx+%#llx of object %llu from %#llx, point %llu\n",
			(unsigned long long)m->va, (unsigned long long)m->size,
			(unsigned long long)m->serial, (unsigned long long)m->bo_offset,
			(unsigned long long)m->point);
	}
}

/*
 * @bo of @f is memory of @mem_dev (-1: host, FZ_MEM_UNKNOWN). Another
 * device's: @f imported it, and that device's removal revokes it even
 * while @f's jobs use it (handles closed since included).
 */
void fz_bo_set_memory(struct fz *fz, struct fz_file *f, struct fz_bo *bo, int mem_dev,
		      unsigned int mem_gen)
{
	bo->mem_dev = mem_dev;
	bo->mem_gen = mem_gen;
	if (mem_dev < 0 || mem_dev == f->devi)
		return;
	f->peers |= 1u << mem_dev;
	/* A missing page injected there, not taken yet, faults @f's writes too. */
	if (atomic_load(&fz->sh->inject_pending[mem_dev]) > 0)
		f->may_be_banned = true;
}

/* A handle no live object of @f has: stale, zero, or far off. */
uint32_t fz_unknown_handle(struct fz *fz, struct fz_file *f)
{
	uint32_t h;
	int tries;

	for (tries = 0; tries < 8; tries++) {
		switch (fz_below(&fz->rng, 5)) {
		case 0:
			h = 0;
			break;
		case 1:
			h = f->nstale ? f->stale_handles[fz_below(&fz->rng, f->nstale)] : 1;
			break;
		case 2:
			h = 0xffffffffu - fz_below(&fz->rng, 4);
			break;
		case 3:
			h = 0x80000000u;
			break;
		default:
			h = f->nbos + 1 + fz_below(&fz->rng, 64);
			break;
		}
		if (!fz_find_bo(f, h))
			return h;
	}
	return 0;
}

/*
 * An address that is wrong for @f: when @certain, one no mapping of @f can
 * cover (a live object's guard page, below the range, beyond the bind
 * range up to 2^64), else also stale, unaligned or random ones. The bind
 * range is left to fuzz_vm.c, which knows what may be mapped there.
 */
uint64_t fz_bad_va(struct fz *fz, struct fz_file *f, bool certain)
{
	const struct fz_dev *d = &fz->devs[f->devi];
	struct fz_rng *r = &fz->rng;
	uint64_t end = d->vm_start + d->vm_size;
	struct fz_bo *bo;

	switch (fz_below(r, certain ? 7 : 11)) {
	case 0:
		bo = fz_pick_bo(fz, f);
		if (bo)	/* the guard page right after the object */
			return bo->va + bo->size + (fz_below(r, FZ_PAGE / 8) * 8);
		return end;
	case 1:
		return fz_below(r, d->va_start / 8) * 8;
	case 2:
		return end + fz_below(r, 1u << 20) * 8;
	case 3:	/* anywhere above: 47 to 64 bits */
		return (end + (fz_next(r) & ~7ull) % (0ull - end - 8)) & ~7ull;
	case 4:
		return 0ull - 8 * (1 + fz_below(r, 16));
	case 5:
		return 1ull << (FZ_VA_BITS + fz_below(r, 64 - FZ_VA_BITS));
	case 6:
		return 0;
	case 7:
		return f->nstale ? f->stale_vas[fz_below(r, f->nstale)] : d->va_start;
	case 8:
		bo = fz_pick_bo(fz, f);
		return (bo ? bo->va : d->va_start) + 1 + fz_below(r, 7);
	case 9:
		return fz_next(r);
	default:
		return d->va_start + fz_below(r, 1ull << 32);
	}
}

/* No live object of @f covers @va: BY_VA finds nothing there. */
bool fz_va_known_free(struct fz_file *f, uint64_t va)
{
	unsigned int i;

	for (i = 0; i < f->nbos; i++)
		if (!(f->bos[i].flags & RBLN_BO_NO_VA) && va - f->bos[i].va < f->bos[i].size)
			return false;
	return true;
}

/* Maps a HOST object whole; 0 or a negative errno. */
int fz_map_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo)
{
	struct drm_rbln_bo_info info = { .handle = bo->handle };
	void *p;
	int ret;

	ret = fz_ioctl(fz, f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &info);
	if (ret)
		return ret;
	p = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, info.mmap_offset);
	ret = p == MAP_FAILED ? -errno : 0;
	fz_count(fz->sh, C_MMAP, ret);
	if (!ret)
		bo->cpu = p;
	return ret;
}

void fz_orphan_drop(struct fz *fz, unsigned int i)
{
	struct fz_orphan *o = &fz->orphans[i];

	fz_count(fz->sh, C_MUNMAP, munmap(o->cpu, o->size) ? -errno : 0);
	*o = fz->orphans[--fz->norphans];
}

/*
 * CPU accesses to mappings of objects whose device went away may raise
 * SIGBUS; the fuzzer notes it rather than dies.
 */
static sigjmp_buf guard_env;
static volatile sig_atomic_t guard_on;

static void guard_handler(int sig)
{
	if (guard_on)
		siglongjmp(guard_env, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

void fz_fault_guard_init(void)
{
	struct sigaction sa = { .sa_handler = guard_handler };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

bool fz_guarded_copy(void *dst, const void *src, size_t len)
{
	if (sigsetjmp(guard_env, 1)) {
		guard_on = 0;
		return false;
	}
	guard_on = 1;
	memcpy(dst, src, len);
	guard_on = 0;
	return true;
}

/* --- syncobjs and queues ------------------------------------------------------- */

struct fz_syncobj *fz_add_syncobj(struct fz_file *f, uint32_t handle, bool timeline)
{
	struct fz_syncobj *s;

	if (f->nsyncobjs == FZ_MAX_SYNCOBJS)
		return NULL;
	s = &f->syncobjs[f->nsyncobjs++];
	memset(s, 0, sizeof(*s));
	s->handle = handle;
	s->timeline = timeline;
	return s;
}

struct fz_syncobj *fz_pick_syncobj(struct fz *fz, struct fz_file *f)
{
	return f->nsyncobjs ? &f->syncobjs[fz_below(&fz->rng, f->nsyncobjs)] : NULL;
}

void fz_forget_syncobj(struct fz_file *f, struct fz_syncobj *s)
{
	*s = f->syncobjs[--f->nsyncobjs];
}

/* Syncobj handles: the pool's and the tracked jobs'. */
bool fz_syncobj_known(struct fz_file *f, uint32_t handle)
{
	unsigned int i;

	for (i = 0; i < f->nsyncobjs; i++)
		if (f->syncobjs[i].handle == handle)
			return true;
	for (i = 0; i < f->njobs; i++)
		if (f->jobs[i].syncobj == handle)
			return true;
	return f->bind_syncobj && f->bind_syncobj == handle;
}

uint32_t fz_pick_queue(struct fz *fz, struct fz_file *f)
{
	return f->nqueues ? f->queues[fz_below(&fz->rng, f->nqueues)] : 0;
}

bool fz_queue_known(struct fz_file *f, uint32_t id)
{
	unsigned int i;

	for (i = 0; i < f->nqueues; i++)
		if (f->queues[i] == id)
			return true;
	return false;
}

void fz_forget_queue(struct fz_file *f, uint32_t id)
{
	unsigned int i;

	for (i = 0; i < f->nqueues; i++) {
		if (f->queues[i] == id) {
			f->queues[i] = f->queues[--f->nqueues];
			return;
		}
	}
}

void fz_dmabuf_drop(struct fz *fz, unsigned int i)
{
	close(fz->dmabufs[i].fd);
	fz_count(fz->sh, C_CLOSE, 0);
	fz->dmabufs[i] = fz->dmabufs[--fz->ndmabufs];
}
