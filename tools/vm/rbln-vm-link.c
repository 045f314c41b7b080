// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln-vm-link COMMAND [ARG]... - runs COMMAND with the two ends of a TCP
 * connection over this machine's loopback as its file descriptors 3 and 4.
 *
 * tools/vm/rbln-vm-pair gives one end to each of two QEMUs (rbln-vm
 * --net-fd), whose virtio-net NICs then exchange Ethernet frames over it:
 * a virtual link between the two guests, carried by a loopback socket.
 * Connected here, before either QEMU starts, neither has to listen or to
 * wait for the other, and no fixed port can be taken by someone else: the
 * listening socket is on 127.0.0.1, on a port the kernel picks, and only
 * until its one connection, ours (checked by address), is accepted.
 * Both ends have TCP_NODELAY, as a link does not hold frames back.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "rbln-vm-link: %s: %s\n", what, strerror(errno));
	return 125;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	}, mine, peer;
	socklen_t len = sizeof(addr);
	int lfd, a, b, one = 1;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "Usage: rbln-vm-link COMMAND [ARG]...\n"
				"Runs COMMAND with a loopback TCP connection's ends as fds 3 and 4.\n");
		return argc < 2 ? 125 : (strcmp(argv[1], "--help") ? 125 : 0);
	}

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return fail("socket");
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) < 0)
		return fail("listen on 127.0.0.1");
	a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a < 0)
		return fail("socket");
	if (connect(a, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return fail("connect to 127.0.0.1");
	len = sizeof(mine);
	if (getsockname(a, (struct sockaddr *)&mine, &len) < 0)
		return fail("getsockname");
	/* Whoever else connects to the port meanwhile is turned away. */
	for (;;) {
		len = sizeof(peer);
		b = accept4(lfd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
		if (b < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return fail("accept");
		}
		if (len == sizeof(peer) && peer.sin_port == mine.sin_port &&
		    peer.sin_addr.s_addr == mine.sin_addr.s_addr)
			break;
		close(b);
	}
	close(lfd);
	if (setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return fail("TCP_NODELAY");

	/* Out of the way of 3 and 4 first: either may be one of them. */
	lfd = fcntl(a, F_DUPFD_CLOEXEC, 10);
	close(a);
	a = lfd;
	lfd = fcntl(b, F_DUPFD_CLOEXEC, 10);
	close(b);
	b = lfd;
	if (a < 0 || b < 0)
		return fail("dup");
	if (dup2(a, 3) < 0 || dup2(b, 4) < 0)
		return fail("dup2");
	close(a);
	close(b);
	execvp(argv[1], argv + 1);
	fprintf(stderr, "rbln-vm-link: cannot run %s: %s\n", argv[1], strerror(errno));
	return 125;
}
