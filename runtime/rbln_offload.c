// SPDX-License-Identifier: MIT
/*
 * rbln_offload.c - file-backed host memory for tensors, torch.rbln.offload()
 *
 * While the process-wide switch is on, the host memory behind an RBLN
 * tensor (its data until the device takes it) is a shared mapping of a
 * file under $RBLN_OFFLOAD_DIR (default ~/.cache/rbln/offload), never
 * pinned: under memory pressure the kernel writes it to the file and
 * drops it, instead of keeping it in RAM. Transfers to the device still go
 * through pinned staging buffers. The file goes with the host memory.
 *
 * What the CPU writes there goes to the file as it is written (struct
 * rbln_offload_writer), not when reclaim gets to it: reclaim in a
 * memory-limited cgroup cannot write file pages itself, it only waits a
 * little for the flusher and then calls the OOM killer, which a fast
 * writer on a slow disk reaches. Written this way, at most two windows of
 * a tensor are in RAM at once whatever the disk's speed.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rbln_internal.h"

static atomic_int offload_depth;
static atomic_uint offload_seq;

rbln_status rbln_offload_enter(void)
{
	atomic_fetch_add(&offload_depth, 1);
	return RBLN_OK;
}

rbln_status rbln_offload_exit(void)
{
	int depth = atomic_load(&offload_depth);

	/* Only the outermost exit turns the switch off; never below zero. */
	do {
		if (depth <= 0)
			return rbln_fail(RBLN_ERROR_INVALID,
					 "rbln_offload_exit: not inside rbln_offload_enter()");
	} while (!atomic_compare_exchange_weak(&offload_depth, &depth, depth - 1));
	return RBLN_OK;
}

bool rbln_offload_active(void)
{
	return atomic_load(&offload_depth) > 0;
}

/* mkdir -p, for the offload directory. */
static int make_dirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/**
 * rbln_offload_alloc() - @size bytes of file-backed host memory
 * @size: bytes, more than 0
 * @path: where the backing file's name goes, PATH_MAX bytes
 *
 * Return: the mapping, or NULL with rbln_last_error() set.
 */
void *rbln_offload_alloc(size_t size, char *path)
{
	const char *dir = getenv("RBLN_OFFLOAD_DIR"), *home = getenv("HOME");
	char dirbuf[PATH_MAX];
	void *p;
	int fd, ret;

	if (dir && *dir)
		ret = snprintf(dirbuf, sizeof(dirbuf), "%s", dir);
	else
		ret = snprintf(dirbuf, sizeof(dirbuf), "%s/.cache/rbln/offload", home ? home : "/tmp");
	if (ret < 0 || ret >= (int)sizeof(dirbuf) - 32) {
		rbln_fail(RBLN_ERROR_INVALID, "offload directory: path too long");
		return NULL;
	}
	ret = make_dirs(dirbuf);
	if (ret) {
		rbln_fail(RBLN_ERROR_INVALID, "offload directory %s: %s", dirbuf, strerror(-ret));
		return NULL;
	}
	ret = snprintf(path, PATH_MAX, "%s/rbln-%d-%u", dirbuf, (int)getpid(),
		       atomic_fetch_add(&offload_seq, 1));
	if (ret < 0 || ret >= PATH_MAX) {
		rbln_fail(RBLN_ERROR_INVALID, "offload file: path too long");
		return NULL;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rbln_fail(RBLN_ERROR_INVALID, "offload file %s: %s", path, strerror(errno));
		return NULL;
	}
	if (ftruncate(fd, (off_t)size)) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "offload file %s of %zu bytes: %s", path, size,
			  strerror(errno));
		close(fd);
		unlink(path);
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "mapping offload file %s: %s", path,
			  strerror(errno));
		unlink(path);
		return NULL;
	}
	return p;
}

/* Unmaps what rbln_offload_alloc() mapped and removes its file. */
void rbln_offload_free(void *p, size_t size, const char *path)
{
	munmap(p, size);
	unlink(path);
}

void rbln_offload_cold(void *p, size_t offset, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = ((uintptr_t)p + offset) & ~(uintptr_t)(page - 1);
	uintptr_t end = (uintptr_t)p + offset + len;

	/* Advice only: if the kernel declines, reclaim just works harder. */
	if (len)
		madvise((void *)start, end - start, MADV_COLD);
}

/**
 * rbln_offload_write_begin() - start writing offloaded memory
 * @w: the writer, filled in here
 * @base: what rbln_offload_alloc() returned
 * @path: its file
 *
 * Without the file (it cannot be opened) the writes still happen; only
 * their early writeback does not.
 */
void rbln_offload_write_begin(struct rbln_offload_writer *w, void *base, const char *path)
{
	*w = (struct rbln_offload_writer){ .base = base, .fd = open(path, O_RDWR | O_CLOEXEC) };
}

/* Waits for the last window's writeback and drops its now clean pages. */
static void drop_last(struct rbln_offload_writer *w)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = ((uintptr_t)w->base + w->off) & ~(uintptr_t)(page - 1);
	uintptr_t end = (uintptr_t)w->base + w->off + w->len;

	if (w->fd < 0 || !w->len)
		return;
	sync_file_range(w->fd, (off64_t)w->off, (off64_t)w->len,
			SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
			SYNC_FILE_RANGE_WAIT_AFTER);
	/* Advice: before Linux 5.4 (no MADV_PAGEOUT) reclaim takes them first. */
	if (madvise((void *)start, end - start, MADV_PAGEOUT))
		madvise((void *)start, end - start, MADV_COLD);
	w->len = 0;
}

/**
 * rbln_offload_wrote() - @len bytes at @offset were just written
 * @w: the writer
 * @offset: byte offset in the memory, after every earlier window
 * @len: bytes
 *
 * Starts their writeback, then waits for the previous window's and drops
 * it: its writeback ran while this window was written.
 */
void rbln_offload_wrote(struct rbln_offload_writer *w, size_t offset, size_t len)
{
	if (w->fd < 0 || !len)
		return;
	sync_file_range(w->fd, (off64_t)offset, (off64_t)len, SYNC_FILE_RANGE_WRITE);
	drop_last(w);
	w->off = offset;
	w->len = len;
}

/* rbln_offload_write_end() - the writes are done: the last window goes too. */
void rbln_offload_write_end(struct rbln_offload_writer *w)
{
	drop_last(w);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}
