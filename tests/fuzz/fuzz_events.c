// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_events.c - what happens around the ioctls: forks that die with jobs
 * in flight, injected hangs and faults, devices unplugged and added back,
 * readers of fdinfo, debugfs and sysfs, and the end of a run
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define DEBUGFS_ACCEL	"/sys/kernel/debug/accel"

/* A child still alive after this long is stuck in the kernel. */
#define CHILD_LIMIT_NS	(60ull * 1000000000)

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* --- children ---------------------------------------------------------------- */

/*
 * A child shares the worker's open files: it works on them and on files of
 * its own for a few operations, then dies, often with jobs in flight.
 * Whatever it changes in a shared file, that file is judged leniently.
 */
static void __attribute__((noreturn)) child_main(struct fz *fz)
{
	unsigned int i;

	fz->child = true;
	fz->nchildren = 0;
	/* The worker's orphaned mappings may be command buffers of its jobs. */
	fz->norphans = 0;
	for (i = 0; i < FZ_MAX_FILES; i++) {
		struct fz_file *f = &fz->files[i];

		if (!f->used)
			continue;
		f->inherited = true;
		f->may_be_banned = true;
		/* Its jobs are the worker's to check; its busy buffers stay busy. */
		f->njobs = 0;
	}
	/* Its own choices, the same in every run with this seed. */
	fz->rng.s = fz->seed ^ (fz->iteration * 0xd1342543de82ef95ull) ^ 0xc41dc41dull;
	fz_run_ops(fz, 1 + fz_below(&fz->rng, 12), true);

	/* Closing its copies leaves the worker's files as they are. */
	if (fz_chance(&fz->rng, 40))
		for (i = 0; i < FZ_MAX_FILES; i++)
			if (fz->files[i].used)
				fz_close_file(fz, &fz->files[i]);
	_exit(FZ_EXIT_OK);
}

void op_fork(struct fz *fz)
{
	pid_t pid;

	if (fz->nchildren == FZ_MAX_CHILDREN)
		return;
	fz_doing(fz, "fork (%u children alive)", fz->nchildren);
	fflush(NULL);
	pid = fork();
	if (!pid)
		child_main(fz);
	fz_count(fz->sh, C_FORK, pid < 0 ? -errno : 0);
	if (pid < 0)
		return;
	/*
	 * The child may make objects and syncobjs in every file it shares,
	 * at any moment: a handle the worker never made is not certainly
	 * unknown there any more. (The taint bit a child sets comes too
	 * late: it may land between the worker's look and its ioctl.)
	 */
	for (unsigned int i = 0; i < FZ_MAX_FILES; i++)
		if (fz->files[i].used)
			fz->files[i].ghosts = true;
	fz->children[fz->nchildren] = pid;
	fz->child_start_ns[fz->nchildren++] = fz_now_ns();
	atomic_fetch_add(&fz->sh->forks, 1);
}

void op_kill_child(struct fz *fz)
{
	pid_t pid;

	if (!fz->nchildren)
		return;
	pid = fz->children[fz_below(&fz->rng, fz->nchildren)];
	fz_doing(fz, "SIGKILL child %d", (int)pid);
	kill(pid, SIGKILL);
}

/*
 * Collects the children that ended; with @wait_all, waits for every one.
 * A child that reported a failure, or that is stuck, fails the run.
 */
void fz_reap_children(struct fz *fz, bool wait_all)
{
	unsigned int i;
	int status;
	pid_t pid;

	for (;;) {
		for (i = 0; i < fz->nchildren;) {
			pid = fz->children[i];
			if (waitpid(pid, &status, WNOHANG) != pid) {
				if (fz_now_ns() - fz->child_start_ns[i] > fz->scale * CHILD_LIMIT_NS) {
					fz_print_task(pid);
					fz_fail(fz, "child %d has not exited after %llu s",
						(int)pid, fz->scale * CHILD_LIMIT_NS / 1000000000);
				}
				i++;
				continue;
			}
			fz->children[i] = fz->children[--fz->nchildren];
			fz->child_start_ns[i] = fz->child_start_ns[fz->nchildren];
			if (WIFEXITED(status) && WEXITSTATUS(status) == FZ_EXIT_FAIL)
				fz_fail(fz, "child %d failed", (int)pid);
			if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
				fz_crash(fz, "child %d died of signal %d", (int)pid,
					 WTERMSIG(status));
			if (WIFEXITED(status) && WEXITSTATUS(status) != FZ_EXIT_OK)
				fz_crash(fz, "child %d exited with %d", (int)pid,
					 WEXITSTATUS(status));
		}
		if (!wait_all || !fz->nchildren)
			return;
		sleep_ms(10);
	}
}

/* --- fault injection ------------------------------------------------------------ */

void op_inject(struct fz *fz)
{
	static const char *const what[] = {
		"hang", "fault", "dma", "no_page", "slow_signal", "slow_scrub", "slow_free",
		"slow_fault",
	};
	/* The driver's hooks hold what they slow for up to a second: seldom. */
	unsigned int k = fz_below(&fz->rng, 32) ? fz_below(&fz->rng, 4) : 4 + fz_below(&fz->rng, 4);
	unsigned int i;
	bool fails = k >= 1 && k <= 3;
	int devi = fz_pick_dev(fz, true), ret;
	char path[128];

	if (devi < 0)
		return;
	snprintf(path, sizeof(path), DEBUGFS_ACCEL "/%s/inject", fz->devs[devi].name);
	/*
	 * A hang only times a job out, and the driver's hooks only slow what
	 * they hold; a fault, a DMA error or a missing page fails a job and
	 * bans its context. A missing page of the device's memory is found by
	 * whoever writes there first: a job of an importer too, on another
	 * device (fz_bo_set_memory() for imports to come).
	 */
	if (fails) {
		atomic_fetch_add(&fz->sh->inject_pending[devi], 1);
		for (i = 0; i < FZ_MAX_FILES; i++) {
			struct fz_file *f = &fz->files[i];

			if (f->used && (f->devi == devi ||
					(!strcmp(what[k], "no_page") && f->peers & 1u << devi)))
				f->may_be_banned = true;
		}
	}
	fz_doing(fz, "inject %s into %s", what[k], fz->devs[devi].name);
	ret = rbln_sysfs_write(path, what[k]);
	fz_count(fz->sh, C_INJECT, ret);
	if (ret && fails)
		atomic_fetch_sub(&fz->sh->inject_pending[devi], 1);
}

/* --- hot-unplug ----------------------------------------------------------------- */

void op_unplug(struct fz *fz)
{
	int devi = fz_pick_dev(fz, true), ret;
	struct fz_dev *d;
	unsigned int i, nfiles = 0, njobs = 0;
	char id[16], path[128];

	if (devi < 0)
		return;
	d = &fz->devs[devi];
	for (i = 0; i < FZ_MAX_FILES; i++) {
		if (fz->files[i].used && fz->files[i].devi == devi && !fz_file_gone(fz, &fz->files[i])) {
			nfiles++;
			njobs += fz->files[i].njobs;
		}
	}
	if (d->pci) {
		/* Off the PCI bus, as a hot-unplug takes it. */
		snprintf(path, sizeof(path), RBLN_PCI_BUS "/devices/%s/remove", d->name);
		fz_doing(fz, "remove PCI function %s with %u files open, %u tracked jobs in flight",
			 d->name, nfiles, njobs);
		ret = rbln_sysfs_write(path, "1");
	} else {
		snprintf(id, sizeof(id), "%u", d->id);
		fz_doing(fz, "del_device %u with %u files open, %u tracked jobs in flight", d->id,
			 nfiles, njobs);
		ret = rbln_sysfs_write(RBLN_EMU_BUS "/del_device", id);
	}
	fz_count(fz->sh, C_DEL_DEVICE, ret);
	if (ret)
		fz_fail(fz, "removal of %s: %s", d->name, strerror(-ret));
	d->present = false;
	atomic_fetch_add(&fz->sh->unplugs, 1);
	if (rbln_dev_minor(d->name) >= 0)
		fz_fail(fz, "%s still has an accel node after its removal", d->name);
	/* Its files answer only -ENODEV now, waits on their syncobjs included. */
	for (i = 0; i < FZ_MAX_FILES; i++) {
		if (!fz->files[i].used)
			continue;
		if (fz->files[i].devi == devi)
			fz_drop_jobs(&fz->files[i]);
		else if (fz->files[i].peers & 1u << devi)
			fz_peer_revoked(&fz->files[i], devi);
	}
}

/* A device back: probed anew, a new instance of it. */
static void replugged(struct fz *fz, int devi)
{
	struct fz_dev *d = &fz->devs[devi];
	int ret;

	d->gen++;
	atomic_store(&fz->sh->inject_pending[devi], 0);
	ret = fz_dev_probe(d);
	if (ret)
		fz_fail(fz, "%s added back is not usable: %s", d->name, strerror(-ret));
}

/* A rescan of the PCI bus brings back every function removed. */
static void pci_rescan(struct fz *fz)
{
	unsigned int i;
	int ret;

	fz_doing(fz, "rescan the PCI bus");
	ret = rbln_pci_rescan();
	fz_count(fz->sh, C_NEW_DEVICE, ret);
	if (ret)
		fz_fail(fz, "PCI rescan: %s", strerror(-ret));
	for (i = 0; i < fz->ndevs; i++)
		if (fz->devs[i].pci && !fz->devs[i].present)
			replugged(fz, i);
}

static void replug(struct fz *fz, int devi)
{
	struct fz_dev *d = &fz->devs[devi];
	char arg[32];
	int ret;

	if (d->pci) {
		pci_rescan(fz);
		return;
	}
	snprintf(arg, sizeof(arg), "%u %u", d->id, d->mem_mib);
	fz_doing(fz, "new_device %s", arg);
	ret = rbln_sysfs_write(RBLN_EMU_BUS "/new_device", arg);
	fz_count(fz->sh, C_NEW_DEVICE, ret);
	if (ret == -ENOMEM)
		return;
	if (ret)
		fz_fail(fz, "new_device %s after del_device: %s", arg, strerror(-ret));
	replugged(fz, devi);
}

void op_replug(struct fz *fz)
{
	int devi = fz_pick_dev(fz, false);

	if (devi >= 0)
		replug(fz, devi);
}

/* --- readers -------------------------------------------------------------------- */

/* Reads all of @path into @buf (NUL-terminated): bytes read or -errno. */
static ssize_t read_file(const char *path, char *buf, size_t size)
{
	ssize_t n, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	n = n < 0 ? -errno : len;
	close(fd);
	buf[len] = '\0';
	return n;
}

void op_read_info(struct fz *fz)
{
	static char buf[64 * 1024];
	struct fz_file *f = fz_pick_file(fz);
	int devi = fz_pick_dev(fz, true);
	char path[160];
	long long used, total, resets;
	ssize_t n;

	switch (fz_below(&fz->rng, 3)) {
	case 0:
		if (!f)
			return;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", f->fd);
		fz_doing(fz, "read %s", path);
		n = read_file(path, buf, sizeof(buf));
		fz_count(fz->sh, C_READ_INFO, n < 0 ? (int)n : 0);
		/* An unplugged device shows nothing; a child cannot know of it. */
		if (n >= 0 && !fz->child && !fz_file_gone(fz, f) &&
		    !strstr(buf, "drm-driver:\trbln"))
			fz_fail(fz, "fdinfo of file %u has no drm-driver key:\n%s",
				fz_file_index(fz, f), buf);
		break;
	case 1:
		if (devi < 0)
			return;
		snprintf(path, sizeof(path), DEBUGFS_ACCEL "/%s/bos", fz->devs[devi].name);
		fz_doing(fz, "read %s", path);
		n = read_file(path, buf, sizeof(buf));
		fz_count(fz->sh, C_READ_INFO, n < 0 ? (int)n : 0);
		break;
	default:
		if (devi < 0)
			return;
		fz_doing(fz, "read the sysfs attributes of %s", fz->devs[devi].name);
		used = rbln_dev_attr(fz->devs[devi].name, "memory_used");
		total = rbln_dev_attr(fz->devs[devi].name, "memory_total");
		resets = rbln_dev_attr(fz->devs[devi].name, "reset_count");
		fz_count(fz->sh, C_READ_INFO, used < 0 || total < 0 || resets < 0 ? -EIO : 0);
		/* A child cannot see the worker replug the device, which counts from 0 again. */
		if (used > total || (resets >= 0 && !fz->child &&
				     (uint64_t)resets < fz->devs[devi].reset_count))
			fz_fail(fz, "%s: memory_used %lld of %lld, reset_count %lld after %llu",
				fz->devs[devi].name, used, total, resets,
				(unsigned long long)fz->devs[devi].reset_count);
		break;
	}
}

/* --- the end ------------------------------------------------------------------------ */

/*
 * Ends the run cleanly and checks what is left: every job ends, every
 * device comes back, and once every file is closed no device memory
 * stays in use.
 */
void fz_teardown(struct fz *fz)
{
	unsigned int i, tries;
	long long used = 0;

	fz_doing(fz, "end: wait for %u children", fz->nchildren);
	fz_reap_children(fz, true);
	fz_doing(fz, "end: wait for every tracked job");
	fz_wait_jobs(fz);
	for (i = 0; i < FZ_MAX_FILES; i++)
		if (fz->files[i].used)
			fz_check_params(fz, &fz->files[i]);

	fz_doing(fz, "end: close everything");
	while (fz->ndmabufs)
		fz_dmabuf_drop(fz, 0);
	while (fz->norphans)
		fz_orphan_drop(fz, 0);
	for (i = 0; i < FZ_MAX_FILES; i++)
		if (fz->files[i].used)
			fz_close_file(fz, &fz->files[i]);
	while (fz->norphans)
		fz_orphan_drop(fz, 0);
	for (i = 0; i < fz->ndevs; i++)
		if (!fz->devs[i].present)
			replug(fz, i);

	for (i = 0; i < fz->ndevs; i++) {
		if (!fz->devs[i].present)
			continue;
		fz_doing(fz, "end: device memory of %s goes back", fz->devs[i].name);
		for (tries = 0;
		     tries < 100 * fz->scale &&
		     (used = rbln_dev_attr(fz->devs[i].name, "memory_used")) > 0;
		     tries++)
			sleep_ms(100);
		if (used != 0)
			fz_fail(fz, "%s: %lld bytes of device memory in use after every file closed",
				fz->devs[i].name, used);
	}
}
