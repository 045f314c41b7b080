// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_stats.c - counting every call and how it ended, and the report
 */

#include <stdio.h>
#include <string.h>

#include "fuzz.h"

static const char *const call_names[C_NR_CALLS] = {
	[C_GET_PARAM]			= "RBLN_GET_PARAM",
	[C_BO_CREATE]			= "RBLN_BO_CREATE",
	[C_BO_INFO]			= "RBLN_BO_INFO",
	[C_QUEUE_CREATE]		= "RBLN_QUEUE_CREATE",
	[C_QUEUE_DESTROY]		= "RBLN_QUEUE_DESTROY",
	[C_SUBMIT]			= "RBLN_SUBMIT",
	[C_VM_RESERVE]			= "RBLN_VM_RESERVE",
	[C_VM_RELEASE]			= "RBLN_VM_RELEASE",
	[C_VM_BIND]			= "RBLN_VM_BIND",
	[C_GEM_CLOSE]			= "GEM_CLOSE",
	[C_PRIME_HANDLE_TO_FD]		= "PRIME_HANDLE_TO_FD",
	[C_PRIME_FD_TO_HANDLE]		= "PRIME_FD_TO_HANDLE",
	[C_SYNCOBJ_CREATE]		= "SYNCOBJ_CREATE",
	[C_SYNCOBJ_DESTROY]		= "SYNCOBJ_DESTROY",
	[C_SYNCOBJ_WAIT]		= "SYNCOBJ_WAIT",
	[C_SYNCOBJ_TIMELINE_WAIT]	= "SYNCOBJ_TIMELINE_WAIT",
	[C_SYNCOBJ_RESET]		= "SYNCOBJ_RESET",
	[C_SYNCOBJ_SIGNAL]		= "SYNCOBJ_SIGNAL",
	[C_SYNCOBJ_TIMELINE_SIGNAL]	= "SYNCOBJ_TIMELINE_SIGNAL",
	[C_SYNCOBJ_QUERY]		= "SYNCOBJ_QUERY",
	[C_SYNCOBJ_TRANSFER]		= "SYNCOBJ_TRANSFER",
	[C_SYNCOBJ_HANDLE_TO_FD]	= "SYNCOBJ_HANDLE_TO_FD",
	[C_SYNCOBJ_FD_TO_HANDLE]	= "SYNCOBJ_FD_TO_HANDLE",
	[C_DRM_OTHER]			= "other DRM ioctls",
	[C_SYNC_FILE_INFO]		= "SYNC_IOC_FILE_INFO",
	[C_OPEN]			= "open",
	[C_CLOSE]			= "close",
	[C_MMAP]			= "mmap",
	[C_MUNMAP]			= "munmap",
	[C_DMABUF_MMAP]			= "mmap of a dma-buf",
	[C_TEST_EXPORT]			= "export by the tests' exporter",
	[C_FORK]			= "fork",
	[C_READ_INFO]			= "read fdinfo/debugfs/sysfs",
	[C_INJECT]			= "debugfs inject",
	[C_DEL_DEVICE]			= "del_device",
	[C_NEW_DEVICE]			= "new_device",
};

const char *fz_call_name(enum fz_call c)
{
	return call_names[c];
}

struct fz_errs fz_errs_of(const int *list)
{
	struct fz_errs s = { { 0 } };

	for (; *list >= 0; list++)
		fz_errs_add(&s, *list);
	return s;
}

/* @ret: 0 or a negative errno. Safe from any process sharing @sh. */
void fz_count(struct fz_shared *sh, enum fz_call c, int ret)
{
	int e = ret < 0 ? -ret : 0;

	if (e > FZ_ERRNO_SLOTS - 1)
		e = FZ_ERRNO_SLOTS;
	atomic_fetch_add_explicit(&sh->calls[c][e], 1, memory_order_relaxed);
}

static uint64_t call_total(struct fz_shared *sh, enum fz_call c)
{
	uint64_t n = 0;
	int e;

	for (e = 0; e <= FZ_ERRNO_SLOTS; e++)
		n += atomic_load(&sh->calls[c][e]);
	return n;
}

uint64_t fz_total_ioctls(struct fz_shared *sh)
{
	uint64_t n = 0;
	int c;

	for (c = 0; c < C_NR_IOCTLS; c++)
		n += call_total(sh, c);
	return n;
}

static void print_row(struct fz_shared *sh, enum fz_call c)
{
	char line[1024];
	uint64_t total = call_total(sh, c), n;
	size_t len;
	int e;

	if (!total)
		return;
	len = snprintf(line, sizeof(line), "# %-26s %10llu %10llu",
		       fz_call_name(c), (unsigned long long)total,
		       (unsigned long long)atomic_load(&sh->calls[c][0]));
	for (e = 1; e <= FZ_ERRNO_SLOTS && len < sizeof(line); e++) {
		const char *name;

		n = atomic_load(&sh->calls[c][e]);
		if (!n)
			continue;
		name = e < FZ_ERRNO_SLOTS ? strerrorname_np(e) : NULL;
		if (name)
			len += snprintf(line + len, sizeof(line) - len, " %s:%llu", name,
					(unsigned long long)n);
		else if (e < FZ_ERRNO_SLOTS)
			len += snprintf(line + len, sizeof(line) - len, " errno%d:%llu", e,
					(unsigned long long)n);
		else
			len += snprintf(line + len, sizeof(line) - len, " other:%llu",
					(unsigned long long)n);
	}
	printf("%s\n", line);
}

void fz_print_stats(struct fz_shared *sh, double seconds)
{
	uint64_t ioctls = fz_total_ioctls(sh), others = 0;
	int c;

	for (c = C_NR_IOCTLS; c < C_NR_CALLS; c++)
		others += call_total(sh, c);
	printf("# rbln_fuzz: %llu iterations, %llu ioctls in %.1f s: %.0f ioctls/s; %llu other calls\n",
	       (unsigned long long)atomic_load(&sh->iterations_done),
	       (unsigned long long)ioctls, seconds, seconds > 0 ? ioctls / seconds : 0.0,
	       (unsigned long long)others);
	printf("# rbln_fuzz: jobs checked %llu (succeeded %llu, failed %llu, timed out %llu), unplugs %llu, forks %llu\n",
	       (unsigned long long)atomic_load(&sh->jobs_checked),
	       (unsigned long long)atomic_load(&sh->jobs_ok),
	       (unsigned long long)atomic_load(&sh->jobs_failed),
	       (unsigned long long)atomic_load(&sh->timeouts),
	       (unsigned long long)atomic_load(&sh->unplugs),
	       (unsigned long long)atomic_load(&sh->forks));
	printf("# %-26s %10s %10s  errors\n", "call", "total", "ok");
	for (c = 0; c < C_NR_CALLS; c++)
		print_row(sh, c);
	fflush(stdout);
}
