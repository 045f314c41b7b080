// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_submit.c - jobs: valid, long, faulting, malformed and wild ones,
 * malformed SUBMITs, and the check of how each job ended
 *
 * Every job the fuzzer queues signals a syncobj of its own and holds its
 * command buffer until it is seen to end, so that no command buffer is
 * rewritten under a job that has yet to read it. How it ended is judged
 * against what it was: a valid job must succeed unless a timeout, an
 * injection, a ban or its queue's destruction explains otherwise; a job
 * that touches what it may not must fail; every job must end.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/sync_file.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

/* Commands are encoded here, then copied to the object that holds them. */
static uint8_t cmd_buf[64 * 1024];

/* A job that has not ended after this long, beyond its share of timeouts, hangs. */
#define HANG_BASE_NS	(45ull * 1000000000)

struct submit {
	struct fz_file *f;
	uint32_t queue;
	struct fz_bo *cmd;	/* the object holding the commands, or NULL */
	uint64_t cmd_va;
	uint32_t cmd_size;
	struct fz_cmd c;
	enum fz_expect expect;
	int refuse;		/* the errno SUBMIT must give, or 0 */
	bool wild;
	char what[96];
};

static int64_t deadline_ns(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (int64_t)ms * 1000000;
}

/* A command buffer of @f that no job holds; a page holds any job's commands. */
static struct fz_bo *free_cmd_bo(struct fz *fz, struct fz_file *f)
{
	struct fz_bo *cand[FZ_MAX_BOS];
	unsigned int i, n = 0;

	for (i = 0; i < f->nbos; i++) {
		struct fz_bo *bo = &f->bos[i];

		if (bo->cmd && bo->cpu && !bo->cmd_busy)
			cand[n++] = bo;
	}
	if (n && fz_chance(&fz->rng, 90))
		return cand[fz_below(&fz->rng, n)];
	return fz_new_bo(fz, f, FZ_PAGE, RBLN_BO_HOST, 0, true);
}

static void poll_jobs(struct fz *fz, struct fz_file *f, unsigned int max);

/* Room for one more tracked job, after checking those that ended. */
static bool job_room(struct fz *fz, struct fz_file *f)
{
	if (f->njobs == FZ_MAX_JOBS)
		poll_jobs(fz, f, FZ_MAX_JOBS);
	return f->njobs < FZ_MAX_JOBS;
}

/*
 * Sets up @s on a live file with a queue and a free command buffer;
 * false when the file cannot take a job now.
 */
static bool prepare(struct fz *fz, struct submit *s)
{
	struct fz_file *f = fz_file_for_op(fz);

	memset(s, 0, sizeof(*s));
	if (!f || fz_file_gone(fz, f) || !job_room(fz, f))
		return false;
	s->f = f;
	s->queue = fz_pick_queue(fz, f);
	if (!s->queue || fz_chance(&fz->rng, 5)) {
		uint32_t q = fz_new_queue(fz, f);

		if (q)
			s->queue = q;
	}
	s->cmd = free_cmd_bo(fz, f);
	if (!s->queue || !s->cmd || !s->cmd->cpu)
		return false;
	s->cmd_va = s->cmd->va;
	fz_cmd_init(&s->c, f, cmd_buf, s->cmd->size < sizeof(cmd_buf) ? s->cmd->size :
		    sizeof(cmd_buf));
	return true;
}

/* Waits that hold the job back for a while: fences of other jobs and syncobjs. */
static unsigned int pick_waits(struct fz *fz, struct fz_file *f, struct drm_rbln_sync *w,
			       unsigned int max)
{
	unsigned int n = 0, tries;

	if (!fz_chance(&fz->rng, 30))
		return 0;
	for (tries = 0; tries < 2 * max && n < max; tries++) {
		if (f->njobs && fz_chance(&fz->rng, 50)) {
			const struct fz_job *j = &f->jobs[fz_below(&fz->rng, f->njobs)];

			w[n].handle = j->syncobj;
			w[n].point = j->point;
		} else {
			const struct fz_syncobj *s = fz_pick_syncobj(fz, f);

			/* Only where a fence is sure to be found. */
			if (!s || !s->has_fence || s->shared || (s->timeline && !s->point))
				continue;
			w[n].handle = s->handle;
			w[n].point = s->timeline ? 1 + fz_below(&fz->rng, s->point) : 0;
		}
		w[n].pad = 0;
		n++;
	}
	return n;
}

int fz_syncobj_create(struct fz *fz, struct fz_file *f, uint32_t *handle)
{
	struct drm_syncobj_create args = { 0 };
	int ret;

	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_CREATE, DRM_IOCTL_SYNCOBJ_CREATE, &args);
	fz_check(fz, f, C_SYNCOBJ_CREATE, ret, FZ_ERRS(0, ENOMEM), "SYNCOBJ_CREATE");
	*handle = args.handle;
	return ret;
}

void fz_syncobj_destroy(struct fz *fz, struct fz_file *f, uint32_t handle)
{
	struct drm_syncobj_destroy args = { .handle = handle };
	int ret;

	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_DESTROY, DRM_IOCTL_SYNCOBJ_DESTROY, &args);
	fz_check(fz, f, C_SYNCOBJ_DESTROY, ret, FZ_ERRS(0), "SYNCOBJ_DESTROY");
}

static void report_unjudged(struct fz *fz, struct fz_file *f);

/* Queues @s as a tracked job: its record, or NULL if SUBMIT failed. */
static struct fz_job *submit(struct fz *fz, struct submit *s)
{
	struct fz_file *f = s->f;
	struct drm_rbln_sync waits[5], signal = { 0 };
	uint32_t bos[40];
	unsigned int nbos = 0, nwaits, i;
	struct fz_errs ok = FZ_ERRS(s->refuse, ENOMEM);
	struct fz_job *j;
	int ret;

	if (s->cmd && !fz_guarded_copy(s->cmd->cpu, cmd_buf, s->c.enc.len))
		fz_fail(fz, "SIGBUS writing commands to a live host object");
	for (i = 0; i < s->c.nhandles; i++)
		bos[nbos++] = s->c.handles[i];
	if (s->cmd)
		bos[nbos++] = s->cmd->handle;
	/* Listing more than a job uses, or twice, is allowed; what has no address is not. */
	if (fz_chance(&fz->rng, 10) && f->nbos) {
		const struct fz_bo *extra = fz_pick_bo(fz, f);

		if (!(extra->flags & RBLN_BO_NO_VA))
			bos[nbos++] = extra->handle;
	}
	if (nbos && fz_chance(&fz->rng, 5))
		bos[nbos++] = bos[0];
	for (i = nbos; i > 1; i--) {
		unsigned int k = fz_below(&fz->rng, i);
		uint32_t t = bos[i - 1];

		bos[i - 1] = bos[k];
		bos[k] = t;
	}
	nwaits = pick_waits(fz, f, waits, 4);
	/* Mappings it uses are in place once the bind timeline reaches this point. */
	if (s->c.vm_wait) {
		waits[nwaits].handle = f->bind_syncobj;
		waits[nwaits].point = s->c.vm_wait;
		waits[nwaits++].pad = 0;
	}
	if (fz_syncobj_create(fz, f, &signal.handle))
		return NULL;
	/* A timeline point now and then: the chain path of SUBMIT. */
	if (fz_chance(&fz->rng, 25))
		signal.point = 1 + fz_below(&fz->rng, 1000);

	if (f->may_be_banned || f->banned)
		fz_errs_add(&ok, ECANCELED);
	fz_doing(fz, "SUBMIT file %u queue %u %s: cmd %#llx+%u, %u objects, %u waits, bind point %llu",
		 fz_file_index(fz, f), s->queue, s->what, (unsigned long long)s->cmd_va,
		 s->cmd_size, nbos, nwaits, (unsigned long long)s->c.vm_wait);
	ret = rbln_drm_submit(f->dev, s->queue, s->cmd_va, s->cmd_size, bos, nbos, waits,
			      nwaits, &signal);
	fz_count(fz->sh, C_SUBMIT, ret);
	if (ret == -ECANCELED && !fz_errs_has(&ok, ECANCELED) && !fz->child &&
	    !fz_file_tainted(fz, f))
		report_unjudged(fz, f);
	fz_check(fz, f, C_SUBMIT, ret, ok, s->what);
	if (ret == -ECANCELED)
		f->banned = true;
	if (ret) {
		fz_syncobj_destroy(fz, f, signal.handle);
		return NULL;
	}

	/* Bound now, until the last handle and job let go. */
	for (i = 0; i < nbos; i++) {
		struct fz_bo *bo = fz_find_bo(f, bos[i]);

		if (bo)
			bo->bound = true;
	}
	j = &f->jobs[f->njobs++];
	memset(j, 0, sizeof(*j));
	j->syncobj = signal.handle;
	j->point = signal.point;
	j->queue = s->queue;
	j->expect = s->expect;
	j->wild = s->wild;
	j->iteration = fz->iteration;
	j->submitted_ns = fz_now_ns();
	snprintf(j->what, sizeof(j->what), "%s", s->what);
	j->cmd_words = s->cmd_size / 8 < FZ_ARRAY_SIZE(j->cmd) ? s->cmd_size / 8 : FZ_ARRAY_SIZE(j->cmd);
	memcpy(j->cmd, cmd_buf, j->cmd_words * 8);
	memcpy(j->unlisted, s->c.unlisted, sizeof(j->unlisted));
	j->nunlisted = s->c.nunlisted;
	j->vm_hole = s->c.vm_hole;
	j->vm_hole_size = s->c.vm_hole_size;
	j->fault_kinds = s->c.fault_kinds;
	if (s->cmd) {
		j->cmd_serial = s->cmd->serial;
		s->cmd->cmd_busy++;
	}
	/* A wild job may write any command buffer of its file. */
	for (i = 0; i < f->njobs - 1; i++) {
		if (s->wild)
			f->jobs[i].clobbered = true;
		else if (f->jobs[i].wild)
			j->clobbered = true;
	}
	return j;
}

static void release_cmd(struct fz_file *f, uint64_t serial)
{
	unsigned int i;

	for (i = 0; i < f->nbos; i++)
		if (f->bos[i].serial == serial && f->bos[i].cmd_busy)
			f->bos[i].cmd_busy--;
}

static void forget_job(struct fz_file *f, unsigned int i)
{
	release_cmd(f, f->jobs[i].cmd_serial);
	f->jobs[i] = f->jobs[--f->njobs];
}

/*
 * The devices (bits) whose injection may explain the fault that banned
 * @f, as fdinfo's rbln-fault gives it: a "fault" is an unmapped command
 * buffer on @f's device; a "dma" error a DMA fault of a packet on @f's
 * device; a "no_page" a DMA fault writing the DRAM of whichever device
 * the address leads to, @f's or an exporter's. Nothing injected makes any
 * other kind of fault. Without the key (a child's view of the file), any
 * of the devices it reaches.
 */
static unsigned int injection_suspects(struct fz_file *f)
{
	unsigned int own = 1u << f->devi, i;
	char kind[FZ_FAULT_KIND];
	uint64_t addr;

	if (!fz_file_fault(f, kind, &addr))
		return own | f->peers;
	if (!strcmp(kind, "unmapped"))
		return own;
	if (strcmp(kind, "dma"))
		return 0;
	for (i = 0; i < f->nbos; i++) {
		const struct fz_bo *bo = &f->bos[i];

		if (bo->va && addr >= bo->va && addr - bo->va < bo->size)
			return own | (bo->mem_dev >= 0 ? 1u << bo->mem_dev : 0);
	}
	/* Through a VM_BIND mapping, or a handle since closed: any exporter. */
	return own | f->peers;
}

/* The devices (bits) with an injection pending that could explain @f's fault. */
static unsigned int injection_armed(struct fz *fz, struct fz_file *f)
{
	unsigned int suspects = injection_suspects(f), armed = 0;

	for (int devi = 0; devi < FZ_MAX_DEVICES; devi++)
		if ((suspects & 1u << devi) && atomic_load(&fz->sh->inject_pending[devi]) > 0)
			armed |= 1u << devi;
	return armed;
}

/*
 * Takes the fault injected into the one device that can explain @f's:
 * when two could, which one's injection is spent is not known, and both
 * stay pending, a lenience that the next replug of either ends.
 */
static bool take_injected_fault(struct fz *fz, struct fz_file *f)
{
	unsigned int armed = injection_armed(fz, f);
	_Atomic int *pending;

	if (!armed)
		return false;
	if (armed & (armed - 1))
		return true;
	pending = &fz->sh->inject_pending[__builtin_ctz(armed)];
	for (int p = atomic_load(pending); p > 0;)
		if (atomic_compare_exchange_weak(pending, &p, p - 1))
			return true;
	return false;
}

static void print_commands(const struct fz_job *j)
{
	for (unsigned int i = 0; i < j->cmd_words; i += 4) {
		fprintf(stderr, "rbln_fuzz:   commands +%3u:", 8 * i);
		for (unsigned int k = i; k < i + 4 && k < j->cmd_words; k++)
			fprintf(stderr, " %016llx", (unsigned long long)j->cmd[k]);
		fputc('\n', stderr);
	}
}

/*
 * A job meant to fault that did banned its context with its fault: the
 * kind fdinfo reports must be one it was built to make, unless an
 * injection pending on a device it reaches could have struck first.
 */
static void check_fault_kind(struct fz *fz, struct fz_file *f, const struct fz_job *j)
{
	char kind[FZ_FAULT_KIND];
	uint64_t addr;
	size_t n;

	if (!j->fault_kinds)
		return;
	if (!fz_file_fault(f, kind, &addr)) {
		fz_print_file(fz, f);
		fz_fail(fz, "job '%s' of iteration %llu faulted, but fdinfo names no fault",
			j->what, (unsigned long long)j->iteration);
	}
	/* One of the space-separated words of fault_kinds. */
	n = strlen(kind);
	for (const char *k = j->fault_kinds; *k; k += strcspn(k, " "), k += *k == ' ')
		if (!strncmp(k, kind, n) && (k[n] == ' ' || !k[n]))
			return;
	if (injection_armed(fz, f))
		return;
	print_commands(j);
	fz_print_file(fz, f);
	fz_fail(fz, "job '%s' of iteration %llu faulted with %s at %#llx; it was made to fault with %s",
		j->what, (unsigned long long)j->iteration, kind, (unsigned long long)addr,
		j->fault_kinds);
}

/* The outcome of a job against what it was: fails the run if they disagree. */
static void judge(struct fz *fz, struct fz_file *f, const struct fz_job *j, int status)
{
	struct fz_dev *d = &fz->devs[f->devi];
	int err = status < 0 ? -status : 0;
	const char *name = err ? strerrorname_np(err) : "success";

	atomic_fetch_add(&fz->sh->jobs_checked, 1);
	atomic_fetch_add(status == 1 ? &fz->sh->jobs_ok : &fz->sh->jobs_failed, 1);
	if (status == 0)
		fz_fail(fz, "the fence of job '%s' (iteration %llu) signaled but says pending",
			j->what, (unsigned long long)j->iteration);
	/* RBLN_PARAM_FAILED_JOBS leaves out the jobs a destroyed queue dropped. */
	if (err && !(err == ESRCH && j->queue_destroyed))
		f->failed_seen++;
	f->may_be_banned |= err == EFAULT;
	if (err == ETIMEDOUT) {
		d->timeouts_seen++;
		atomic_fetch_add(&fz->sh->timeouts, 1);
	}
	if (err == EFAULT || err == ECANCELED)
		f->banned = f->may_be_banned = true;
	if (j->clobbered || fz_file_tainted(fz, f))
		return;

	switch (j->expect) {
	case FZ_JOB_MAY_FAULT:
		if (err == EFAULT)
			return;
		/* fall through */
	case FZ_JOB_VALID:
		/* A timeout needs no injection: a long job, or a slow host. */
		if (status == 1 || err == ETIMEDOUT)
			return;
		if (err == ECANCELED && f->may_be_banned)
			return;
		if (err == ESRCH && j->queue_destroyed)
			return;
		/* A child cannot see the worker remove the exporter of its imports. */
		if (err == EFAULT && fz->child && f->peers)
			return;
		if (err == EFAULT && take_injected_fault(fz, f)) {
			fz_doing(fz, "job '%s' of iteration %llu, file %u, took an injected fault",
				 j->what, (unsigned long long)j->iteration, fz_file_index(fz, f));
			return;
		}
		print_commands(j);
		fz_print_file(fz, f);
		fz_fail(fz, "valid job '%s' of iteration %llu ended with %s%s",
			j->what, (unsigned long long)j->iteration, name ? name : "an unknown errno",
			err == ECANCELED ? " though nothing could ban its context" :
			err == EFAULT ? " and no fault was injected" : "");
		break;
	case FZ_JOB_FAULT:
		if (status == 1) {
			print_commands(j);
			fz_fail(fz, "job '%s' of iteration %llu succeeded; it must fault",
				j->what, (unsigned long long)j->iteration);
		}
		if (err == EFAULT)
			check_fault_kind(fz, f, j);
		break;
	case FZ_JOB_ANY:
		break;
	}
}

/*
 * 1, or the negative errno the fence of job @j carries. The fences inside
 * are asked one by one: a timeline point's is a dma_fence_chain, whose own
 * status never carries its job's error.
 */
static int job_fence_status(struct fz *fz, struct fz_file *f, const struct fz_job *j)
{
	struct drm_syncobj_handle h = {
		.flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE,
		.fd = -1,
	};
	struct sync_fence_info fences[4];
	struct sync_file_info info = {
		.num_fences = 4,
		.sync_fence_info = (uintptr_t)fences,
	};
	uint32_t tmp = 0;
	int ret;

	h.handle = j->syncobj;
	if (j->point) {
		/* A point of a timeline: its fence onto a binary syncobj first. */
		struct drm_syncobj_transfer tr = { .src_handle = j->syncobj,
						   .src_point = j->point };

		if (fz_syncobj_create(fz, f, &tmp))
			return -ENOMEM;
		tr.dst_handle = tmp;
		ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_TRANSFER, DRM_IOCTL_SYNCOBJ_TRANSFER, &tr);
		fz_check(fz, f, C_SYNCOBJ_TRANSFER, ret, FZ_ERRS(0, ENOMEM), "SYNCOBJ_TRANSFER");
		h.handle = tmp;
	}
	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_HANDLE_TO_FD, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &h);
	fz_check(fz, f, C_SYNCOBJ_HANDLE_TO_FD, ret, FZ_ERRS(0, ENOMEM, EMFILE),
		 "export of a signaled job's fence");
	if (tmp)
		fz_syncobj_destroy(fz, f, tmp);
	if (ret)
		return ret;
	ret = ioctl(h.fd, SYNC_IOC_FILE_INFO, &info) ? -errno : 0;
	fz_count(fz->sh, C_SYNC_FILE_INFO, ret);
	close(h.fd);
	if (ret)
		fz_fail(fz, "SYNC_IOC_FILE_INFO of a job's fence: %s", strerror(-ret));
	return info.status;
}

/* An unexpected ban: one of these faulted, though none should have. */
static void report_unjudged(struct fz *fz, struct fz_file *f)
{
	static const char *const expect[] = { "valid", "fault", "may fault", "any" };
	unsigned int i;

	for (i = 0; i < f->njobs; i++) {
		const struct fz_job *j = &f->jobs[i];
		struct drm_syncobj_timeline_wait w = {
			.handles = (uintptr_t)&j->syncobj,
			.points = (uintptr_t)&j->point,
			.count_handles = 1,
		};
		int status = ioctl(f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w) ? 0 :
			     job_fence_status(fz, f, j);

		fprintf(stderr, "rbln_fuzz: unjudged job of iteration %llu (%s, %s): %s\n",
			(unsigned long long)j->iteration, expect[j->expect],
			status == 1 ? "done" : status < 0 ? strerrorname_np(-status) : "pending",
			j->what);
		print_commands(j);
	}
}

/*
 * Checks tracked job @i of @f, waiting until @deadline: false while it
 * runs, unless it has run for longer than anything may; true once it is
 * judged and forgotten, with how it ended in @status (1 or -errno).
 */
static bool job_try(struct fz *fz, struct fz_file *f, unsigned int i, int64_t deadline,
		    int *status)
{
	struct fz_job *j = &f->jobs[i];
	struct drm_syncobj_timeline_wait w = {
		.handles = (uintptr_t)&j->syncobj,
		.points = (uintptr_t)&j->point,
		.count_handles = 1,
		.timeout_nsec = deadline,
	};
	uint64_t age, limit;
	unsigned int k, inflight = 0;
	int ret;

	atomic_fetch_add(&fz->sh->heartbeat, 1);
	ret = fz_ioctl(fz, f->fd, C_SYNCOBJ_TIMELINE_WAIT, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
	fz_check(fz, f, C_SYNCOBJ_TIMELINE_WAIT, ret, FZ_ERRS(0, ETIME),
		 "wait on a tracked job's syncobj");
	if (ret == -ETIME) {
		for (k = 0; k < FZ_MAX_FILES; k++)
			inflight += fz->files[k].njobs;
		age = fz_now_ns() - j->submitted_ns;
		limit = fz->scale * (HANG_BASE_NS + 2ull * inflight * fz->job_timeout_ms * 1000000);
		if (age > limit)
			fz_fail(fz, "job '%s' of iteration %llu has not ended after %.1f s (%u jobs in flight)",
				j->what, (unsigned long long)j->iteration, age / 1e9, inflight);
		return false;
	}
	/* A child took its syncobj: nothing left to ask. */
	if (ret) {
		*status = ret;
		forget_job(f, i);
		return true;
	}
	*status = job_fence_status(fz, f, j);
	judge(fz, f, j, *status);
	fz_syncobj_destroy(fz, f, j->syncobj);
	forget_job(f, i);
	return true;
}

static void poll_jobs(struct fz *fz, struct fz_file *f, unsigned int max)
{
	unsigned int i = 0;
	int status;

	if (fz_file_gone(fz, f)) {
		fz_drop_jobs(f);
		return;
	}
	while (i < f->njobs && max--)
		if (!job_try(fz, f, i, 0, &status))
			i++;
}

void op_poll_jobs(struct fz *fz)
{
	struct fz_file *f = fz_pick_file(fz);

	if (!f || !f->njobs)
		return;
	fz_doing(fz, "check the jobs of file %u (%u in flight)", fz_file_index(fz, f), f->njobs);
	poll_jobs(fz, f, 6);
	if (!f->njobs && fz_chance(&fz->rng, 20))
		fz_check_params(fz, f);
}

/*
 * The handle of object @serial is closed: jobs that use it unlisted may
 * fault now, or write whatever takes its addresses, command buffers too.
 */
void fz_jobs_lose(struct fz_file *f, uint64_t serial)
{
	unsigned int i, k;
	bool lost = false;

	for (i = 0; i < f->njobs; i++) {
		struct fz_job *j = &f->jobs[i];

		for (k = 0; k < j->nunlisted; k++) {
			if (j->unlisted[k] == serial) {
				j->expect = FZ_JOB_ANY;
				j->wild = lost = true;
			}
		}
	}
	for (i = 0; lost && i < f->njobs; i++)
		if (!f->jobs[i].wild)
			f->jobs[i].clobbered = true;
	/* A job that faults bans the context. */
	if (lost)
		f->may_be_banned = true;
}

/*
 * Device @devi, whose memory @f imported, is gone: the mappings are
 * revoked at once, so a job in flight that uses one faults, and its
 * context is banned. Which of them do, the fuzzer does not track.
 */
void fz_peer_revoked(struct fz_file *f, int devi)
{
	unsigned int i;

	f->peers &= ~(1u << devi);
	f->may_be_banned = true;
	for (i = 0; i < f->njobs; i++) {
		if (f->jobs[i].expect == FZ_JOB_VALID)
			f->jobs[i].expect = FZ_JOB_ANY;
		/* A packet before the one meant to fault may fault first. */
		f->jobs[i].fault_kinds = NULL;
	}
}

/* The file is closed or its device gone: its syncobjs went with it. */
void fz_drop_jobs(struct fz_file *f)
{
	while (f->njobs)
		forget_job(f, 0);
}

/* Waits for every tracked job to end; a hang fails the run. */
void fz_wait_jobs(struct fz *fz)
{
	unsigned int i;
	int status;
	bool left;

	do {
		left = false;
		for (i = 0; i < FZ_MAX_FILES; i++) {
			struct fz_file *f = &fz->files[i];

			if (!f->used)
				continue;
			poll_jobs(fz, f, FZ_MAX_JOBS);
			if (f->njobs) {
				left = true;
				job_try(fz, f, 0, deadline_ns(50), &status);
			}
		}
	} while (left);
}

/* Up to @n valid packets; at least a NOP. */
static void valid_packets(struct fz *fz, struct submit *s, unsigned int n)
{
	unsigned int i, misses = 0;
	int ret;

	for (i = 0; i < n && misses < 8; i++) {
		ret = fz_cmd_valid_packet(fz, &s->c);
		if (ret == -ENOSPC)
			break;
		if (ret)
			misses++, i--;
	}
	if (!s->c.enc.len)
		rbln_drm_cmd_nop(&s->c.enc);
}

void op_submit(struct fz *fz)
{
	struct submit s;

	if (!prepare(fz, &s))
		return;
	s.c.waits = true;
	valid_packets(fz, &s, 1 + fz_below(&fz->rng, 8));
	s.cmd_size = s.c.enc.len;
	s.expect = FZ_JOB_VALID;
	snprintf(s.what, sizeof(s.what), "valid, %u bytes of commands", s.cmd_size);
	submit(fz, &s);
}

void op_submit_long(struct fz *fz)
{
	struct submit s;

	if (!prepare(fz, &s))
		return;
	if (fz_cmd_long(fz, &s.c) == -ENOENT && !s.c.enc.len)
		return;
	s.cmd_size = s.c.enc.len;
	s.expect = FZ_JOB_VALID;
	snprintf(s.what, sizeof(s.what), "long, %u bytes of commands", s.cmd_size);
	submit(fz, &s);
}

/* A job that must fault: a bad address in a packet, or as its commands. */
void op_submit_fault(struct fz *fz)
{
	char why[80];
	struct submit s;

	if (!prepare(fz, &s))
		return;
	s.f->may_be_banned = true;
	s.expect = FZ_JOB_FAULT;
	if (fz_chance(&fz->rng, 20)) {
		s.cmd = NULL;
		s.c.fault_kinds = "unmapped";
		s.cmd_va = fz_bad_va(fz, s.f, true) & ~7ull;
		s.cmd_size = 8 * (1 + fz_below(&fz->rng, 64));
		snprintf(s.what, sizeof(s.what), "commands at %#llx",
			 (unsigned long long)s.cmd_va);
	} else {
		valid_packets(fz, &s, fz_below(&fz->rng, 3));
		fz_cmd_faulting_packet(fz, &s.c, why, sizeof(why));
		if (fz_chance(&fz->rng, 30))
			valid_packets(fz, &s, 1);
		s.cmd_size = s.c.enc.len;
		snprintf(s.what, sizeof(s.what), "faulting: %s", why);
	}
	submit(fz, &s);
}

void op_submit_malformed(struct fz *fz)
{
	char why[80];
	struct submit s;

	if (!prepare(fz, &s))
		return;
	s.f->may_be_banned = true;
	s.expect = FZ_JOB_FAULT;
	valid_packets(fz, &s, fz_below(&fz->rng, 4));
	if (fz_cmd_malformed_packet(fz, &s.c, why, sizeof(why)))
		return;
	s.cmd_size = s.c.enc.len;
	snprintf(s.what, sizeof(s.what), "malformed: %s", why);
	submit(fz, &s);
}

/* A packet into the bind range where nothing may be mapped. */
void op_submit_unbound(struct fz *fz)
{
	char why[80];
	struct submit s;

	if (!prepare(fz, &s))
		return;
	valid_packets(fz, &s, fz_below(&fz->rng, 3));
	if (fz_cmd_unbound_packet(fz, &s.c, &s.expect, why, sizeof(why)))
		return;
	s.f->may_be_banned = true;
	if (fz_chance(&fz->rng, 30))
		valid_packets(fz, &s, 1);
	s.cmd_size = s.c.enc.len;
	snprintf(s.what, sizeof(s.what), "%s: %s",
		 s.expect == FZ_JOB_FAULT ? "faulting" : "may fault", why);
	submit(fz, &s);
}

/* Valid packets, then random damage: anything may happen but a crash. */
void op_submit_fuzz(struct fz *fz)
{
	struct submit s;

	if (!prepare(fz, &s))
		return;
	s.f->may_be_banned = true;
	s.expect = FZ_JOB_ANY;
	s.wild = true;
	s.c.waits = true;
	valid_packets(fz, &s, 1 + fz_below(&fz->rng, 6));
	fz_cmd_mutate(fz, &s.c);
	s.cmd_size = s.c.enc.len;
	if (s.cmd_size > 8 && fz_chance(&fz->rng, 20))
		s.cmd_size -= 8 * (1 + fz_below(&fz->rng, s.cmd_size / 8 - 1));
	snprintf(s.what, sizeof(s.what), "mutated, %u bytes of commands", s.cmd_size);
	submit(fz, &s);
}

/* How SUBMIT must fail on handle list @a: 0 if it may pass. */
static int bos_error(struct fz *fz, struct fz_file *f, const struct drm_rbln_submit *a)
{
	const uint32_t *h = (const uint32_t *)(uintptr_t)a->bo_handles;
	uint32_t i;

	if (!a->bo_count)
		return 0;
	if ((const uint8_t *)(h + a->bo_count) > fz->bad_page)
		return EFAULT;
	/* All are looked up before any address is: no address is no better. */
	for (i = 0; i < a->bo_count; i++)
		if (!fz_find_bo(f, h[i]) || (fz_find_bo(f, h[i])->flags & RBLN_BO_NO_VA))
			return ENOENT;
	return 0;
}

/*
 * Makes @w, a wait of @f, one the driver refuses (rbln_sync_add_waits(),
 * shared by SUBMIT and VM_BIND): a non-zero pad, a syncobj with no fence
 * yet (made once into *@fresh, which the caller destroys), or an unknown
 * handle. Returns the errno it must give.
 */
int fz_bad_wait(struct fz *fz, struct fz_file *f, struct drm_rbln_sync *w, uint32_t *fresh)
{
	memset(w, 0, sizeof(*w));
	switch (fz_below(&fz->rng, 3)) {
	case 0:
		/* Not the fresh one either: an earlier call may have made it. */
		do {
			w->handle = 1 + fz_below(&fz->rng, 1000);
		} while (fz_syncobj_known(f, w->handle) || w->handle == *fresh);
		return ENOENT;
	case 1:
		if (!*fresh && !fz_file_gone(fz, f))
			fz_syncobj_create(fz, f, fresh);
		w->handle = *fresh;
		return *fresh ? EINVAL : ENOENT;
	default:
		w->pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
		return EINVAL;
	}
}

/*
 * SUBMIT with one or two things wrong. The driver checks in a known order
 * (rbln_accel.h's rules, then the queue, the objects, the signal, the
 * waits), so the final arguments say which error must come. The commands
 * are at an address that faults, should the job run after all.
 */
void op_submit_bad(struct fz *fz)
{
	struct fz_file *f = fz_file_for_op(fz);
	struct drm_rbln_sync waits[1] = { { 0 } };
	struct drm_rbln_submit a = { 0 };
	int err, ret, wait_err = 0;
	uint32_t *handles, fresh = 0;
	const struct fz_dev *d;
	struct fz_errs ok;
	unsigned int i, n;

	if (!f)
		return;
	d = &fz->devs[f->devi];
	/* The list sits at the end of the page before the unreadable one. */
	handles = (uint32_t *)(fz->bad_page - 64);
	for (i = 0; i < 16; i++)
		handles[i] = f->nbos ? fz_pick_bo(fz, f)->handle : 0;
	a.queue_id = fz_pick_queue(fz, f);
	if (!a.queue_id && !fz_file_gone(fz, f))
		a.queue_id = fz_new_queue(fz, f);
	a.cmd_va = fz_bad_va(fz, f, true) & ~7ull;
	a.cmd_size = 8;
	a.bo_count = f->nbos ? fz_below(&fz->rng, 4) : 0;
	a.bo_handles = (uintptr_t)(handles + 16 - a.bo_count);

	n = 1 + fz_below(&fz->rng, 2);
	for (i = 0; i < n; i++) {
		/* Unknown handles are certain only where no ghost hides. */
		switch (fz_below(&fz->rng, f->ghosts ? 9 : 13)) {
		case 0:
			a.flags = 1u << fz_below(&fz->rng, 32);
			break;
		case 1:
			a.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
			break;
		case 2:
			a.signal.pad = 1 + fz_below(&fz->rng, 0xfffffffeu);
			break;
		case 3: {
			const uint32_t sizes[] = { 0, 1 + 8 * (uint32_t)fz_below(&fz->rng, 64),
						   (uint32_t)d->max_cmd + 8, 0xfffffff8u };

			a.cmd_size = sizes[fz_below(&fz->rng, 4)];
			break;
		}
		case 4:
			a.cmd_va |= 1 + fz_below(&fz->rng, 7);
			break;
		case 5:
			a.bo_count = RBLN_SUBMIT_MAX_BOS + 1 + fz_below(&fz->rng, 1u << 20);
			break;
		case 6:
			a.wait_count = RBLN_SUBMIT_MAX_WAITS + 1 + fz_below(&fz->rng, 1000);
			break;
		case 7:	/* the first chunk the driver copies runs into the unreadable page */
			a.bo_count = 1 + fz_below(&fz->rng, 40);
			a.bo_handles = (uintptr_t)(fz->bad_page - 4 * fz_below(&fz->rng,
						   a.bo_count < 16 ? a.bo_count : 16));
			break;
		case 8:
			a.wait_count = 1 + fz_below(&fz->rng, 4);
			a.waits = (uintptr_t)fz->bad_page;
			break;
		case 9:
			do {
				a.queue_id = (uint32_t)fz_next(&fz->rng) >> fz_below(&fz->rng, 32);
			} while (fz_queue_known(f, a.queue_id));
			break;
		case 10:
			a.bo_count = 1 + fz_below(&fz->rng, 16);
			a.bo_handles = (uintptr_t)(handles + 16 - a.bo_count);
			handles[16 - 1 - fz_below(&fz->rng, a.bo_count)] = fz_unknown_handle(fz, f);
			break;
		case 11:
			do {
				a.signal.handle = 1 + fz_below(&fz->rng, 0xfffffffeu);
			} while (fz_syncobj_known(f, a.signal.handle));
			break;
		default:
			a.wait_count = 1;
			a.waits = (uintptr_t)waits;
			wait_err = fz_bad_wait(fz, f, &waits[0], &fresh);
			break;
		}
	}

	if (a.flags || a.pad || a.signal.pad || !a.cmd_size || a.cmd_size % 8 ||
	    a.cmd_size > d->max_cmd || a.cmd_va % 8) {
		ok = FZ_ERRS(EINVAL);
	} else if (a.bo_count > RBLN_SUBMIT_MAX_BOS || a.wait_count > RBLN_SUBMIT_MAX_WAITS) {
		ok = FZ_ERRS(E2BIG);
	} else {
		err = bos_error(fz, f, &a);
		if (!fz_queue_known(f, a.queue_id))
			err = ENOENT;
		else if (!err && a.signal.handle && !fz_syncobj_known(f, a.signal.handle))
			err = ENOENT;
		else if (!err && a.wait_count && (const uint8_t *)(uintptr_t)a.waits == fz->bad_page)
			err = EFAULT;
		else if (!err && a.wait_count)
			err = wait_err;
		ok = FZ_ERRS(err, ENOMEM);
		/* Nothing wrong after all: its commands fault. */
		if (!err)
			f->may_be_banned = true;
		if (f->may_be_banned || f->banned)
			fz_errs_add(&ok, ECANCELED);
	}
	fz_doing(fz, "SUBMIT (bad) file %u queue %u flags %#x pad %#x cmd %#llx+%u, %u objects at %#llx, %u waits at %#llx (%u pad %#x), signal %u pad %#x",
		 fz_file_index(fz, f), a.queue_id, a.flags, a.pad, (unsigned long long)a.cmd_va,
		 a.cmd_size, a.bo_count, (unsigned long long)a.bo_handles, a.wait_count,
		 (unsigned long long)a.waits, waits[0].handle, waits[0].pad, a.signal.handle,
		 a.signal.pad);
	ret = fz_ioctl(fz, f->fd, C_SUBMIT, DRM_IOCTL_RBLN_SUBMIT, &a);
	fz_check(fz, f, C_SUBMIT, ret, ok, "SUBMIT with invalid arguments");
	if (ret == -ECANCELED)
		f->banned = true;
	if (fresh)
		fz_syncobj_destroy(fz, f, fresh);
}

/* Queues @s and waits for it: true if it succeeded. */
static bool run_sync(struct fz *fz, struct submit *s)
{
	struct fz_job *j = submit(fz, s);
	int status = 0;

	/* Long enough for the jobs ahead on its ring; else it stays tracked. */
	return j && job_try(fz, s->f, j - s->f->jobs, deadline_ns(10000 * fz->scale), &status) &&
	       status == 1;
}

static void verify(struct fz *fz, struct fz_file *f, struct fz_bo *bo, uint64_t off,
		   uint64_t len, uint32_t pattern)
{
	static uint32_t words[64 * 1024 / 4];
	uint64_t i;

	if (fz_file_tainted(fz, f) || bo->size > sizeof(words))
		return;
	if (!fz_guarded_copy(words, bo->cpu, bo->size))
		fz_fail(fz, "SIGBUS reading a live host object");
	for (i = 0; i < bo->size / 4; i++) {
		uint32_t want = i * 4 >= off && i * 4 < off + len ? pattern : 0;

		if (words[i] != want)
			fz_fail(fz, "byte %#llx of handle %u reads %#x after the job, not %#x",
				(unsigned long long)i * 4, bo->handle, words[i], want);
	}
}

static bool quiet(struct fz *fz, struct fz_file *f)
{
	unsigned int i;

	if (!f || fz_file_gone(fz, f) || fz_file_tainted(fz, f) || f->banned)
		return false;
	for (i = 0; i < f->njobs; i++)
		if (f->jobs[i].wild)
			return false;
	return true;
}

/* A file of another present device, for the peer path; NULL if none. */
static struct fz_file *peer_file(struct fz *fz, struct fz_file *f)
{
	unsigned int i;

	for (i = 0; i < FZ_MAX_FILES; i++) {
		struct fz_file *g = &fz->files[i];

		if (g->used && g->devi != f->devi && quiet(fz, g) && g->nbos < FZ_MAX_BOS - 3)
			return g;
	}
	return NULL;
}

/* Imports @dev of @f into @g: the peer's record in @g, or NULL. */
static struct fz_bo *import_peer(struct fz *fz, struct fz_file *f, struct fz_bo *dev,
				 struct fz_file *g)
{
	struct drm_prime_handle exp = { .handle = dev->handle,
					.flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
	struct drm_rbln_bo_info info = { 0 };
	struct fz_bo *peer;
	int ret;

	fz_doing(fz, "export handle %u of file %u for a peer read by file %u", dev->handle,
		 fz_file_index(fz, f), fz_file_index(fz, g));
	ret = fz_ioctl(fz, f->fd, C_PRIME_HANDLE_TO_FD, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp);
	fz_check(fz, f, C_PRIME_HANDLE_TO_FD, ret, FZ_ERRS(0, ENOMEM, EMFILE),
		 "PRIME_HANDLE_TO_FD");
	if (ret)
		return NULL;
	exp.handle = 0;
	ret = fz_ioctl(fz, g->fd, C_PRIME_FD_TO_HANDLE, DRM_IOCTL_PRIME_FD_TO_HANDLE, &exp);
	close(exp.fd);
	fz_check(fz, g, C_PRIME_FD_TO_HANDLE, ret, FZ_ERRS(0, ENOMEM, ENOSPC),
		 "PRIME_FD_TO_HANDLE of a peer");
	if (ret)
		return NULL;
	info.handle = exp.handle;
	ret = fz_ioctl(fz, g->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &info);
	fz_check(fz, g, C_BO_INFO, ret, FZ_ERRS(0), "BO_INFO of a peer import");
	if (ret)
		return NULL;
	peer = fz_find_bo(g, exp.handle);
	if (!peer)
		peer = fz_add_bo(fz, g, exp.handle, info.placement, info.bo_flags, info.size,
				 info.va);
	peer->imported = true;
	fz_bo_set_memory(fz, g, peer, dev->mem_dev, dev->mem_gen);
	peer->origin_dev = f->devi;
	peer->origin_gen = f->dev_gen;
	return peer;
}

/*
 * A job whose result is known: fill part of a fresh host object, or of a
 * fresh device object copied whole to it, maybe read back by another
 * device as a peer, and compare every byte: memory of a dead job must not
 * be written any more, and new objects must not show old data.
 */
void op_fill_verify(struct fz *fz)
{
	uint64_t size = FZ_PAGE * (1 + fz_below(&fz->rng, 16)), off, len;
	uint32_t pattern = (uint32_t)fz_next(&fz->rng) | 1;
	struct fz_bo *host, *dev = NULL, *peer, *out;
	struct fz_file *g;
	struct submit s;

	if (!prepare(fz, &s) || !quiet(fz, s.f) || s.f->nbos > FZ_MAX_BOS - 3)
		return;
	host = fz_new_bo(fz, s.f, size, RBLN_BO_HOST, 0, false);
	if (!host || (!host->cpu && fz_map_bo(fz, s.f, host)))
		return;
	off = 4 * fz_below(&fz->rng, size / 4);
	len = 4 * fz_below(&fz->rng, (size - off) / 4 + 1);
	fz_cmd_use(&s.c, host);
	if (fz_chance(&fz->rng, 50))
		dev = fz_new_bo(fz, s.f, size, RBLN_BO_DEVICE, 0, false);
	if (dev) {
		fz_cmd_use(&s.c, dev);
		/* All of it: device memory comes scrubbed, as zeros. */
		rbln_drm_cmd_dma_fill(&s.c.enc, dev->va + off, pattern, len);
		rbln_drm_cmd_dma_copy(&s.c.enc, host->va, dev->va, size);
	} else {
		rbln_drm_cmd_dma_fill(&s.c.enc, host->va + off, pattern, len);
	}
	s.cmd_size = s.c.enc.len;
	s.expect = FZ_JOB_VALID;
	snprintf(s.what, sizeof(s.what), "fill %#llx+%#llx with %#x and check",
		 (unsigned long long)off, (unsigned long long)len, pattern);
	if (!run_sync(fz, &s) || !quiet(fz, s.f))
		return;
	verify(fz, s.f, host, off, len, pattern);

	/* The same bytes, read by another device through a peer import. */
	g = dev ? peer_file(fz, s.f) : NULL;
	peer = g && job_room(fz, g) ? import_peer(fz, s.f, dev, g) : NULL;
	if (!peer)
		return;
	s.f = g;
	s.queue = fz_pick_queue(fz, g);
	if (!s.queue)
		s.queue = fz_new_queue(fz, g);
	s.cmd = free_cmd_bo(fz, g);
	out = fz_new_bo(fz, g, size, RBLN_BO_HOST, 0, false);
	if (!s.queue || !s.cmd || !s.cmd->cpu || !out || (!out->cpu && fz_map_bo(fz, g, out)))
		return;
	s.cmd_va = s.cmd->va;
	fz_cmd_init(&s.c, g, cmd_buf, s.cmd->size);
	fz_cmd_use(&s.c, peer);
	fz_cmd_use(&s.c, out);
	rbln_drm_cmd_dma_copy(&s.c.enc, out->va, peer->va, size);
	s.cmd_size = s.c.enc.len;
	snprintf(s.what, sizeof(s.what), "peer read of %#llx bytes and check",
		 (unsigned long long)size);
	if (run_sync(fz, &s) && quiet(fz, g))
		verify(fz, g, out, off, len, pattern);
}

/* Bytes [0, @size) of @out read as the tests' exporter fills its pages. */
static void verify_foreign(struct fz *fz, struct fz_file *f, struct fz_bo *out, uint64_t size)
{
	static uint8_t bytes[16 * FZ_PAGE];
	uint64_t i;

	if (fz_file_tainted(fz, f) || size > sizeof(bytes))
		return;
	if (!fz_guarded_copy(bytes, out->cpu, size))
		fz_fail(fz, "SIGBUS reading a live host object");
	for (i = 0; i < size; i++)
		if (bytes[i] != (uint8_t)((i / FZ_PAGE + 1) * 16 + i % 16))
			fz_fail(fz, "byte %#llx of the tests' exporter's buffer reads %#x",
				(unsigned long long)i, bytes[i]);
}

/*
 * VM_BIND of all of @bo, which the driver must refuse to map: EINVAL for a
 * misshapen import, EIO while its exporter fails to map it. False if it
 * never got that far: no room to reserve, or no memory.
 */
static bool bind_refused(struct fz *fz, struct fz_file *f, struct fz_bo *bo, int err)
{
	struct drm_rbln_vm_reserve r = { .size = bo->size };
	struct drm_rbln_vm_bind b = { .op = RBLN_VM_BIND_MAP, .size = bo->size,
				      .handle = bo->handle };
	struct drm_rbln_vm_release rel = { 0 };
	bool refused;
	int ret;

	ret = fz_ioctl(fz, f->fd, C_VM_RESERVE, DRM_IOCTL_RBLN_VM_RESERVE, &r);
	fz_check(fz, f, C_VM_RESERVE, ret, FZ_ERRS(0, ENOMEM, ENOSPC), "VM_RESERVE");
	if (ret)
		return false;
	b.va = rel.va = r.va;
	fz_doing(fz, "VM_BIND file %u handle %u at %#llx: a foreign import it cannot map",
		 fz_file_index(fz, f), bo->handle, (unsigned long long)b.va);
	ret = fz_ioctl(fz, f->fd, C_VM_BIND, DRM_IOCTL_RBLN_VM_BIND, &b);
	fz_check(fz, f, C_VM_BIND, ret, FZ_ERRS(err, ENOMEM),
		 "VM_BIND of a foreign import it cannot map");
	refused = ret == -err;
	ret = fz_ioctl(fz, f->fd, C_VM_RELEASE, DRM_IOCTL_RBLN_VM_RELEASE, &rel);
	fz_check(fz, f, C_VM_RELEASE, ret, FZ_ERRS(0), "VM_RELEASE of a range never bound");
	return refused;
}

/*
 * A dma-buf of the tests' exporter (tests/kernel/exporter), imported. Of
 * whole pages, a job reads it byte for byte, and it stays among the
 * file's objects as a HOST import; of any other scatterlist, SUBMIT and
 * VM_BIND refuse to map it, with EINVAL, and it is closed. At times the
 * exporter fails the first map of whole pages: VM_BIND gives its EIO, and
 * the job after maps it anew.
 */
void op_foreign(struct fz *fz)
{
	struct rbln_test_export exp = { .pages = 2 + fz_below(&fz->rng, 15),
					.shape = fz_below(&fz->rng, RBLN_TEST_SG_SHAPES) };
	struct drm_rbln_bo_info info = { 0 };
	struct drm_prime_handle imp = { 0 };
	uint64_t size = (uint64_t)exp.pages * FZ_PAGE;
	struct fz_bo *bo, *out;
	struct submit s;
	int ret;

	if (fz->exporter < 0 || !prepare(fz, &s) || !quiet(fz, s.f) || s.f->nbos > FZ_MAX_BOS - 3)
		return;
	exp.fail_maps = exp.shape == RBLN_TEST_SG_PAGES && fz_chance(&fz->rng, 25);
	fz_doing(fz, "export %u pages of scatterlist shape %u by the tests' exporter, %u maps failing",
		 exp.pages, exp.shape, exp.fail_maps);
	ret = ioctl(fz->exporter, RBLN_TEST_IOCTL_EXPORT, &exp) ? -errno : 0;
	fz_count(fz->sh, C_TEST_EXPORT, ret);
	fz_check(fz, NULL, C_TEST_EXPORT, ret, FZ_ERRS(0, ENOMEM), "the tests' exporter");
	if (ret)
		return;
	imp.fd = exp.fd;
	fz_doing(fz, "PRIME_FD_TO_HANDLE file %u fd %d (foreign)", fz_file_index(fz, s.f), imp.fd);
	ret = fz_ioctl(fz, s.f->fd, C_PRIME_FD_TO_HANDLE, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp);
	close(exp.fd);
	fz_check(fz, s.f, C_PRIME_FD_TO_HANDLE, ret, FZ_ERRS(0, ENOMEM, ENOSPC),
		 "PRIME_FD_TO_HANDLE of a foreign dma-buf");
	if (ret)
		return;
	info.handle = imp.handle;
	ret = fz_ioctl(fz, s.f->fd, C_BO_INFO, DRM_IOCTL_RBLN_BO_INFO, &info);
	fz_check(fz, s.f, C_BO_INFO, ret, FZ_ERRS(0), "BO_INFO of a foreign import");
	if (ret)
		return;
	if (info.size != size || info.placement != RBLN_BO_HOST || !info.va)
		fz_fail(fz, "import of %#llx foreign bytes: BO_INFO says placement %u, %#llx bytes at %#llx",
			(unsigned long long)size, info.placement, (unsigned long long)info.size,
			(unsigned long long)info.va);
	bo = fz_add_bo(fz, s.f, imp.handle, info.placement, info.bo_flags, info.size, info.va);
	bo->imported = true;
	bo->origin_dev = s.f->devi;
	bo->origin_gen = s.f->dev_gen;
	fz_bo_set_memory(fz, s.f, bo, -1, 0);

	snprintf(s.what, sizeof(s.what), "read %u foreign pages of scatterlist shape %u",
		 exp.pages, exp.shape);
	s.cmd_size = 8;
	s.expect = FZ_JOB_VALID;
	fz_cmd_use(&s.c, bo);
	if (exp.shape != RBLN_TEST_SG_PAGES) {
		rbln_drm_cmd_nop(&s.c.enc);
		s.refuse = EINVAL;
		submit(fz, &s);
		bind_refused(fz, s.f, bo, EINVAL);
		fz_close_bo(fz, s.f, bo);
		return;
	}
	/* Else the exporter's failure is still to come. */
	if (exp.fail_maps && !bind_refused(fz, s.f, bo, EIO)) {
		fz_close_bo(fz, s.f, bo);
		return;
	}
	out = fz_new_bo(fz, s.f, size, RBLN_BO_HOST, 0, false);
	if (!out || (!out->cpu && fz_map_bo(fz, s.f, out)))
		return;
	fz_cmd_use(&s.c, out);
	rbln_drm_cmd_dma_copy(&s.c.enc, out->va, bo->va, size);
	s.cmd_size = s.c.enc.len;
	if (run_sync(fz, &s) && quiet(fz, s.f))
		verify_foreign(fz, s.f, out, size);
}
