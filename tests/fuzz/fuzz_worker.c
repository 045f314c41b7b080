// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_worker.c - the loop: one operation per iteration, chosen by weight
 * with a generator seeded from (seed, iteration), so that iteration K of a
 * seed makes the same choices in every run that reaches it in the same
 * state
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

uint64_t fz_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What this process did last, for its own failure report. */
static char last_doing[FZ_OP_LEN];

/* Records what is about to happen: for --verbose, the watchdog and failures. */
void fz_doing(struct fz *fz, const char *fmt, ...)
{
	struct fz_shared *sh = fz->sh;
	unsigned int slot;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_doing, sizeof(last_doing), fmt, ap);
	va_end(ap);
	if (!fz->child)
		memcpy(sh->doing, last_doing, sizeof(sh->doing));
	slot = atomic_fetch_add(&sh->history_head, 1) % FZ_HISTORY;
	snprintf(sh->history[slot], sizeof(sh->history[slot]), "%s%llu: %s",
		 fz->child ? "child " : "", (unsigned long long)fz->iteration, last_doing);
	atomic_fetch_add(&sh->heartbeat, 1);
	if (fz->verbose)
		fprintf(stderr, "rbln_fuzz: %s%llu: %s\n", fz->child ? "child " : "",
			(unsigned long long)fz->iteration, last_doing);
}

void fz_print_history(struct fz_shared *sh)
{
	unsigned int head = atomic_load(&sh->history_head), i;

	fprintf(stderr, "rbln_fuzz: the last operations, oldest first:\n");
	for (i = head > FZ_HISTORY ? head - FZ_HISTORY : 0; i < head; i++)
		fprintf(stderr, "rbln_fuzz:   %s\n", sh->history[i % FZ_HISTORY]);
}

/* Where task @pid is in the kernel: what a hang report needs. */
void fz_print_task(pid_t pid)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(line, sizeof(line), f))
			fprintf(stderr, "rbln_fuzz: task %d waits in %s\n", (int)pid, line);
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/stack", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "rbln_fuzz:   %s", line);
	fclose(f);
}

/* A kernel failure: report it with how to reproduce it, and stop. */
void fz_fail(struct fz *fz, const char *fmt, ...)
{
	char msg[FZ_MSG_LEN];
	int expected = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rbln_fuzz: FAIL seed=%llu iteration=%llu: %s\n",
		(unsigned long long)fz->seed, (unsigned long long)fz->iteration, msg);
	fprintf(stderr, "rbln_fuzz: %s %d was doing: %s\n", fz->child ? "child" : "worker",
		(int)getpid(), last_doing);
	if (atomic_compare_exchange_strong(&fz->sh->failed, &expected, 1)) {
		snprintf(fz->sh->fail_msg, sizeof(fz->sh->fail_msg), "%s", msg);
		fz_print_history(fz->sh);
	}
	fflush(NULL);
	_exit(FZ_EXIT_FAIL);
}

/* A failure of the fuzzer itself, not of the kernel. */
void fz_crash(struct fz *fz, const char *fmt, ...)
{
	char msg[FZ_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rbln_fuzz: fuzzer error seed=%llu iteration=%llu: %s\n",
		(unsigned long long)fz->seed, (unsigned long long)fz->iteration, msg);
	fflush(NULL);
	_exit(FZ_EXIT_ERROR);
}

struct fz_op {
	const char *name;
	void (*run)(struct fz *fz);
	unsigned int weight;
	bool in_child;
};

/* Weights per thousand, roughly: ioctls mostly, events now and then. */
static const struct fz_op ops[] = {
	{ "open", op_open, 15, true },
	{ "close_file", op_close_file, 8, true },
	{ "get_param", op_get_param, 30, true },
	{ "bo_create", op_bo_create, 60, true },
	{ "bo_create_bad", op_bo_create_bad, 25, true },
	{ "bo_info", op_bo_info, 30, true },
	{ "bo_info_va", op_bo_info_va, 45, true },
	{ "gem_close", op_gem_close, 30, true },
	{ "mmap", op_mmap, 20, true },
	{ "munmap", op_munmap, 12, true },
	{ "cpu_touch", op_cpu_touch, 15, true },
	{ "wait_move", op_wait_move, 25, true },
	{ "export", op_export, 20, true },
	{ "import", op_import, 25, true },
	{ "dmabuf_misc", op_dmabuf_misc, 10, true },
	{ "queue_create", op_queue_create, 15, true },
	{ "queue_destroy", op_queue_destroy, 10, true },
	{ "syncobj", op_syncobj, 40, true },
	{ "wait", op_wait, 25, true },
	{ "raw_ioctl", op_raw_ioctl, 20, true },
	{ "submit", op_submit, 120, true },
	{ "submit_long", op_submit_long, 20, true },
	{ "submit_fault", op_submit_fault, 25, true },
	{ "submit_malformed", op_submit_malformed, 20, true },
	{ "submit_fuzz", op_submit_fuzz, 20, true },
	{ "submit_bad", op_submit_bad, 40, true },
	{ "fill_verify", op_fill_verify, 10, true },
	{ "foreign", op_foreign, 10, true },
	{ "submit_unbound", op_submit_unbound, 20, true },
	{ "vm_reserve", op_vm_reserve, 25, true },
	{ "vm_release", op_vm_release, 15, true },
	{ "vm_map", op_vm_map, 50, true },
	{ "vm_unmap", op_vm_unmap, 35, true },
	{ "vm_bind_bad", op_vm_bind_bad, 30, true },
	{ "poll_jobs", op_poll_jobs, 80, true },
	{ "read_info", op_read_info, 15, true },
	{ "fork", op_fork, 3, false },
	{ "kill_child", op_kill_child, 2, false },
	{ "inject", op_inject, 4, false },
	{ "unplug", op_unplug, 1, false },
	{ "replug", op_replug, 0, false },	/* weighted by how many devices are gone */
};

#define NR_OPS	FZ_ARRAY_SIZE(ops)

static unsigned int weight(struct fz *fz, const struct fz_op *op, bool in_child)
{
	unsigned int i, absent = 0;

	if (in_child && !op->in_child)
		return 0;
	if (op->run != op_replug)
		return op->weight;
	for (i = 0; i < fz->ndevs; i++)
		absent += !fz->devs[i].present;
	return 8 * absent;
}

static const struct fz_op *pick_op(struct fz *fz, bool in_child)
{
	unsigned int i, total = 0, k;

	for (i = 0; i < NR_OPS; i++)
		total += weight(fz, &ops[i], in_child);
	k = fz_below(&fz->rng, total);
	for (i = 0; i < NR_OPS; i++) {
		unsigned int w = weight(fz, &ops[i], in_child);

		if (k < w)
			return &ops[i];
		k -= w;
	}
	return &ops[0];
}

/* @n operations in a row, on the generator as it is: a child's life. */
void fz_run_ops(struct fz *fz, unsigned int n, bool in_child)
{
	while (n--)
		pick_op(fz, in_child)->run(fz);
}

int fz_worker(struct fz_shared *sh, const struct fz_options *opt)
{
	static struct fz fz;
	uint64_t start, end, it;
	long long timeout_ms;
	uint8_t *pages;
	unsigned int i;
	int ret;

	fz.seed = opt->seed;
	fz.sh = sh;
	fz.verbose = opt->verbose;
	fz.scale = opt->scale;
	timeout_ms = rbln_sysfs_read_ull("/sys/module/rbln/parameters/job_timeout_ms");
	fz.job_timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;

	/* [scratch][unreadable][read-only on demand]: pointers that fault, and where. */
	pages = mmap(NULL, 3 * FZ_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (pages == MAP_FAILED)
		return FZ_EXIT_ERROR;
	fz.bad_page = pages + FZ_PAGE;
	fz.ro_page = pages + 2 * FZ_PAGE;
	mprotect(fz.bad_page, FZ_PAGE, PROT_NONE);
	fz_fault_guard_init();

	ret = fz_devices_init(&fz, opt->devices);
	if (ret) {
		fprintf(stderr, "rbln_fuzz: no usable device: %s\n", strerror(-ret));
		return FZ_EXIT_ERROR;
	}
	for (i = 0; i < fz.ndevs; i++)
		printf("# rbln_fuzz: %s: %u MiB, %llu rings, addresses %#llx+%#llx\n",
		       fz.devs[i].name, fz.devs[i].mem_mib, (unsigned long long)fz.devs[i].num_rings,
		       (unsigned long long)fz.devs[i].va_start,
		       (unsigned long long)fz.devs[i].va_size);
	printf("# rbln_fuzz: job_timeout_ms=%u\n", fz.job_timeout_ms);
	/* Once, before any child: children inherit it. */
	fz.exporter = rbln_test_exporter_open();
	if (fz.exporter < 0)
		printf("# rbln_fuzz: no foreign dma-bufs: the tests' exporter: %s\n",
		       strerror(-fz.exporter));
	fflush(stdout);

	start = fz_now_ns();
	end = start + (uint64_t)(opt->seconds * 1e9);
	for (it = 0; !opt->iterations || it < opt->iterations; it++) {
		if (opt->seconds > 0 && fz_now_ns() >= end)
			break;
		fz.iteration = it;
		atomic_store(&sh->iteration, it);
		fz.rng.s = opt->seed * 0x9e3779b97f4a7c15ull + it * 0xd1342543de82ef95ull;
		fz_next(&fz.rng);
		fz_reap_children(&fz, false);
		pick_op(&fz, false)->run(&fz);
		atomic_store(&sh->iterations_done, it + 1);
	}
	atomic_store(&sh->fuzz_ns, fz_now_ns() - start);
	fz_teardown(&fz);
	return FZ_EXIT_OK;
}
