// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_isolation - one process cannot reach another's buffer objects, and a
 * killed process leaves nothing behind
 */

#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define PAGE		4096ull
#define PATTERN_A	0xa5a5a5a5u
#define PATTERN_B	0x5b5b5b5bu

/* What process A tells process B about its objects. */
struct a_objects {
	uint32_t host, device;
	uint64_t host_va, device_va, host_offset;
};

static int send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 2)] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (nfds) {
		msg.msg_control = ctl;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(sock, &msg, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fds(int sock, void *buf, size_t len, int *fds, int nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 2)] = { 0 };
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl, .msg_controllen = sizeof(ctl),
	};
	struct cmsghdr *c;

	if (recvmsg(sock, &msg, 0) != (ssize_t)len)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (nfds) {
		if (!c || c->cmsg_type != SCM_RIGHTS)
			return -1;
		memcpy(fds, CMSG_DATA(c), sizeof(int) * nfds);
	}
	return 0;
}

/*
 * Process B: it has its own file on the device and only what A sends it.
 * Exits 0 when every check held; each failed check exits with its number.
 */
static int process_b(int sock)
{
	struct rbln_drm_bo_info info;
	struct rbln_drm_device *dev;
	struct a_objects a;
	uint32_t h, mine, ih, id;
	int fds[2], ok = 1;
	uint32_t *p;
	void *q;

	if (rbln_test_open(0, &dev))
		return 10;
	if (recv_fds(sock, &a, sizeof(a), NULL, 0))
		return 11;

	/* Not by handle: A's handles name nothing in B's file. */
	if (rbln_drm_bo_info(dev, a.host, &info) != -ENOENT ||
	    rbln_drm_bo_info(dev, a.device, &info) != -ENOENT)
		return 12;
	if (rbln_drm_bo_close(dev, a.host) != -EINVAL)
		return 13;
	/* Not by address: B's space has nothing at A's addresses. */
	if (rbln_drm_bo_info_by_va(dev, a.host_va, &info) != -ENOENT ||
	    rbln_drm_bo_info_by_va(dev, a.device_va, &info) != -ENOENT)
		return 14;
	/* Not by mmap offset: the offset is A's object, which B may not map. */
	q = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, rbln_drm_fd(dev), a.host_offset);
	if (q != MAP_FAILED || errno != EACCES)
		return 15;
	/* B's own object with the same handle number is B's, not A's. */
	if (rbln_drm_bo_create(dev, PAGE, RBLN_BO_HOST, 0, &mine, NULL))
		return 16;
	if (mine == a.host &&
	    (rbln_drm_bo_mmap(dev, mine, PROT_READ, (void **)&p, NULL) || p[0] != 0))
		return 17;

	if (send_fds(sock, &ok, sizeof(ok), NULL, 0))
		return 18;

	/* After A exports and B imports, B can. */
	if (recv_fds(sock, &ok, sizeof(ok), fds, 2))
		return 19;
	if (rbln_drm_bo_import(dev, fds[0], &ih) || rbln_drm_bo_import(dev, fds[1], &id))
		return 20;
	/* Importing twice gives the same handle. */
	if (rbln_drm_bo_import(dev, fds[0], &h) || h != ih)
		return 25;
	close(fds[0]);
	close(fds[1]);
	if (rbln_drm_bo_import(dev, fds[0], &h) != -EBADF)
		return 28;
	if (rbln_drm_bo_info(dev, id, &info) || info.placement != RBLN_BO_DEVICE ||
	    info.size != 2 * PAGE)
		return 21;
	if (rbln_drm_bo_info_by_va(dev, info.va + PAGE, &info) || info.handle != id)
		return 22;
	if (rbln_drm_bo_mmap(dev, ih, PROT_READ | PROT_WRITE, (void **)&p, NULL))
		return 23;
	if (p[0] != PATTERN_A)
		return 24;
	p[1] = PATTERN_B;
	munmap(p, PAGE);

	if (send_fds(sock, &ok, sizeof(ok), NULL, 0))
		return 26;
	/* Keep the imports until A has checked B's write. */
	if (recv_fds(sock, &ok, sizeof(ok), NULL, 0))
		return 27;
	rbln_drm_close(dev);
	return 0;
}

TEST(two_processes)
{
	struct rbln_drm_device *dev;
	struct rbln_drm_bo_info info;
	struct a_objects a = { 0 };
	int sv[2], fds[2], ok, status;
	uint32_t *p;
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	/* B starts before A opens anything: it inherits none of A's files. */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(process_b(sv[1]));
	}
	close(sv[1]);

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	ASSERT_EQ(0, rbln_drm_bo_create(dev, PAGE, RBLN_BO_HOST, 0, &a.host, &a.host_va));
	ASSERT_EQ(0, rbln_drm_bo_create(dev, 2 * PAGE, RBLN_BO_DEVICE, 0, &a.device,
					&a.device_va));
	ASSERT_EQ(0, rbln_drm_bo_info(dev, a.host, &info));
	a.host_offset = info.mmap_offset;
	ASSERT_EQ(0, rbln_drm_bo_mmap(dev, a.host, PROT_READ | PROT_WRITE, (void **)&p, NULL));
	p[0] = PATTERN_A;

	ASSERT_EQ(0, send_fds(sv[0], &a, sizeof(a), NULL, 0));
	ASSERT_EQ(0, recv_fds(sv[0], &ok, sizeof(ok), NULL, 0));

	ASSERT_EQ(0, rbln_drm_bo_export(dev, a.host, &fds[0]));
	ASSERT_EQ(0, rbln_drm_bo_export(dev, a.device, &fds[1]));
	ASSERT_EQ(0, send_fds(sv[0], &ok, sizeof(ok), fds, 2));
	close(fds[0]);
	close(fds[1]);
	ASSERT_EQ(0, recv_fds(sv[0], &ok, sizeof(ok), NULL, 0));
	EXPECT_EQ(PATTERN_B, p[1]);
	ASSERT_EQ(0, send_fds(sv[0], &ok, sizeof(ok), NULL, 0));

	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("process B failed check %d",
						 WEXITSTATUS(status));
	munmap(p, PAGE);
	rbln_drm_close(dev);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

/* A process holding every kind of object, killed: nothing stays behind. */
TEST(killed_process_leaks_nothing)
{
	int ready[2], status;
	char c;
	pid_t pid;

	ASSERT_EQ(0, rbln_test_mem_used(0));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct rbln_drm_device *dev, *dev2;
		uint32_t h, hd;
		int fd;
		char *p;

		if (rbln_test_open(0, &dev) || rbln_test_open(0, &dev2) ||
		    rbln_drm_bo_create(dev, 8 << 20, RBLN_BO_DEVICE, 0, &hd, NULL) ||
		    rbln_drm_bo_create(dev, 1 << 20, RBLN_BO_HOST, 0, &h, NULL) ||
		    rbln_drm_bo_mmap(dev, h, PROT_READ | PROT_WRITE, (void **)&p, NULL) ||
		    rbln_drm_bo_export(dev, hd, &fd) ||
		    rbln_drm_bo_import(dev2, fd, &h) ||
		    rbln_drm_bo_create(dev2, 4 << 20, RBLN_BO_DEVICE, 0, &h, NULL))
			_exit(1);
		memset(p, 1, 1 << 20);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	EXPECT_EQ(12 << 20, rbln_test_mem_used(0));

	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	/* Files, mappings and dma-bufs are released before the parent is told. */
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_HARNESS_MAIN
