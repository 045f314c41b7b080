// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_offload_cgroup - the proof of offload(): in a cgroup v2 whose
 * memory.max is a quarter of the tensors' size (and no swap), creating and
 * filling the tensors under offload succeeds and the device's results on
 * them are exact; without offload the same program is killed by the OOM
 * killer. That holds on a slow disk too: meson runs it on one of 2 MB/s.
 *
 * Run in the VM with --scratch (offload files need a disk-backed file
 * system: the guest's root is tmpfs) and --allow-oom, emu_mem_mib >= 256.
 */

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rbln/rbln.h>

#include "kselftest_harness.h"

#define MIB		(1 << 20)
#define TENSORS		4
/* Large enough that the runtime's pinned staging and ring (about 5 MiB) leave room. */
#define TENSOR_BYTES	(32 * MIB)
#define LIMIT		(TENSORS * TENSOR_BYTES / 4)
#define CGROUP		"/sys/fs/cgroup/rbln-offload-test"

static int write_file(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	close(fd);
	return ok ? 0 : -1;
}

#define COLS		1024
#define ROWS		(TENSOR_BYTES / 4 / COLS)

/*
 * Exits 0 when every tensor's device results are exact; killed otherwise,
 * we expect. The check runs on the device (row sums and maxima, a few KiB
 * to read), so the program's own memory stays small beside the tensors.
 */
static int workload(const char *scratch, bool offload)
{
	static int32_t sums[ROWS], maxs[ROWS];
	int64_t shape[2] = { ROWS, COLS };
	rbln_tensor *t[TENSORS], *s, *m;
	char path[256];
	int i, r;

	if (offload) {
		snprintf(path, sizeof(path), "%s/offload", scratch);
		setenv("RBLN_OFFLOAD_DIR", path, 1);
		rbln_offload_enter();
	}
	/* Four times memory.max of tensors, written in full as they are made. */
	for (i = 0; i < TENSORS; i++) {
		t[i] = rbln_tensor_full(shape, 2, RBLN_I32, i + 1, 0);
		if (!t[i])
			return 10;
	}
	if (offload)
		rbln_offload_exit();

	for (i = 0; i < TENSORS; i++) {
		s = rbln_sum(t[i]);
		m = rbln_amax(t[i]);
		if (!s || !m || rbln_tensor_read(s, sums, sizeof(sums)) ||
		    rbln_tensor_read(m, maxs, sizeof(maxs)))
			return 13;
		for (r = 0; r < ROWS; r++)
			if (sums[r] != COLS * (i + 1) || maxs[r] != i + 1)
				return 14;
		rbln_tensor_free(s);
		rbln_tensor_free(m);
		rbln_tensor_free(t[i]);
	}
	return 0;
}

static void dump_file(const char *path)
{
	char line[256];
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f))
		fprintf(stderr, "# %s: %s", path, line);
	if (f)
		fclose(f);
}

static pid_t run_in_cgroup(const char *scratch, bool offload)
{
	pid_t pid = fork();
	char self[32];

	if (pid == 0) {
		snprintf(self, sizeof(self), "%d", getpid());
		if (write_file(CGROUP "/cgroup.procs", self))
			_exit(20);
		_exit(workload(scratch, offload));
	}
	return pid;
}

FIXTURE(offload) {};
FIXTURE_SETUP(offload) {}
FIXTURE_TEARDOWN(offload) {}

/* Paging the tensors through the scratch disk takes long under TCG, longer on a busy host. */
TEST_F_TIMEOUT(offload, keeps_a_memory_limited_process_alive, 300)
{
	const char *scratch = getenv("RBLN_VM_SCRATCH");
	char limit[32];
	int status;
	pid_t pid;

	if (!scratch)
		SKIP(return, "needs rbln-vm --scratch");
	/* io too: dirty pages of a memory-limited cgroup are then throttled and
	 * written back for it (cgroup writeback), as on any systemd host. */
	ASSERT_EQ(0, write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +io"));
	ASSERT_TRUE(mkdir(CGROUP, 0755) == 0 || errno == EEXIST);
	snprintf(limit, sizeof(limit), "%d", LIMIT);
	ASSERT_EQ(0, write_file(CGROUP "/memory.max", limit));
	/* No swap here anyway; say so where the kernel has the knob. */
	write_file(CGROUP "/memory.swap.max", "0");

	pid = run_in_cgroup(scratch, true);
	ASSERT_GT(pid, 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		/* What the cgroup held when it failed: for the log. */
		dump_file(CGROUP "/memory.events");
		dump_file(CGROUP "/memory.stat");
		dump_file(CGROUP "/memory.peak");
	}
	EXPECT_TRUE(WIFEXITED(status)) TH_LOG("with offload: killed by signal %d",
					      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	EXPECT_EQ(0, WEXITSTATUS(status));

	pid = run_in_cgroup(scratch, false);
	ASSERT_GT(pid, 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status)) TH_LOG("without offload: exit status %d",
						WEXITSTATUS(status));
	EXPECT_EQ(SIGKILL, WTERMSIG(status));

	EXPECT_EQ(0, rmdir(CGROUP));
}

TEST_HARNESS_MAIN
