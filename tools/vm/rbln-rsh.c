// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln-rsh - run a command in another rbln-vm guest, over the private link
 * that joins two guests (tools/vm/rbln-vm-pair), without ssh.
 *
 *   rbln-rsh [-p PORT] HOST COMMAND [ARG]...
 *	The client, as Open MPI's plm_rsh_agent calls it: runs COMMAND on
 *	HOST's server, the way ssh does (the arguments joined by spaces,
 *	then run by /bin/sh -c), copies its stdout and stderr to ours and
 *	exits with its status: its exit code, 128 + the signal that killed
 *	it, or 255 when the server could not be reached or went away.
 *	The command's stdin is /dev/null.
 *   rbln-rsh [-p PORT] --serve ADDRESS [--once]
 *	The server: listens on ADDRESS (one address, the link's: nothing
 *	else reaches it) and runs each command it is given, one at a time,
 *	in a session of its own. A client that goes away has its command's
 *	process group sent SIGTERM. The server is its commands' subreaper:
 *	what they leave running (Open MPI's orted --daemonize) is its child
 *	once they exit. With --once it serves the first command, then
 *	waits for everything that command left running to end, and exits
 *	with the command's status or else the first failure among those;
 *	connections that send no command (--wait's) do not count.
 *   rbln-rsh [-p PORT] --wait SECONDS HOST
 *	Waits up to SECONDS for HOST's server to accept a connection (the
 *	other guest may still be booting); 0 once it has, 1 if it never did.
 *
 * The port is 7077 unless -p or $RBLN_RSH_PORT says otherwise.
 *
 * On the wire, the client sends the command as a 32-bit big-endian length
 * and that many bytes, then nothing: its end of the connection stays open
 * while it waits, and its closing tells the server that the client is
 * gone. The server sends frames of a kind byte ('1' stdout, '2' stderr,
 * 'x' exit), a 32-bit big-endian length and the data; the 'x' frame holds
 * the 32-bit status and is the last one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT "7077"
#define MAX_COMMAND (1u << 20)
#define STATUS_FAILED 255

static const char *prog = "rbln-rsh";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [-p PORT] HOST COMMAND [ARG]...\n"
		"       %s [-p PORT] --serve ADDRESS [--once]\n"
		"       %s [-p PORT] --wait SECONDS HOST\n"
		"Runs COMMAND on HOST's rbln-rsh server (the client, Open MPI's\n"
		"plm_rsh_agent), serves on ADDRESS, or waits for HOST's server.\n"
		"PORT: 7077, or $RBLN_RSH_PORT.\n",
		prog, prog, prog);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads exactly @len bytes: 1 when it did, 0 at end of file before any, -1 otherwise. */
static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			if (got == 0)
				return 0;
			errno = EPIPE;
			return -1;
		}
		got += (size_t)n;
	}
	return 1;
}

static int send_frame(int fd, char kind, const void *data, uint32_t len)
{
	unsigned char hdr[5];
	uint32_t be = htonl(len);

	hdr[0] = (unsigned char)kind;
	memcpy(hdr + 1, &be, 4);
	if (write_all(fd, hdr, sizeof(hdr)) < 0)
		return -1;
	return write_all(fd, data, len);
}

/* A TCP connection to @host:@port, or -1 with errno (and *@why for getaddrinfo). */
static int connect_to(const char *host, const char *port, const char **why)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, err, saved = ECONNREFUSED, one = 1;

	*why = NULL;
	err = getaddrinfo(host, port, &hints, &res);
	if (err) {
		*why = gai_strerror(err);
		errno = EINVAL;
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		errno = saved;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int client(const char *host, const char *port, int argc, char **argv)
{
	size_t len = 0, off = 0;
	const char *why;
	char *cmd;
	uint32_t be;
	int fd, i;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (len > MAX_COMMAND) {
		fprintf(stderr, "%s: the command is longer than %u bytes\n", prog, MAX_COMMAND);
		return STATUS_FAILED;
	}
	cmd = malloc(len);
	if (!cmd) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return STATUS_FAILED;
	}
	for (i = 0; i < argc; i++) {
		size_t n = strlen(argv[i]);

		memcpy(cmd + off, argv[i], n);
		off += n;
		cmd[off++] = ' ';
	}
	len--;	/* no space after the last one */

	fd = connect_to(host, port, &why);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot connect to %s port %s: %s\n", prog, host, port,
			why ? why : strerror(errno));
		free(cmd);
		return STATUS_FAILED;
	}
	be = htonl((uint32_t)len);
	if (write_all(fd, &be, 4) < 0 || write_all(fd, cmd, len) < 0) {
		fprintf(stderr, "%s: cannot send the command to %s: %s\n", prog, host,
			strerror(errno));
		free(cmd);
		close(fd);
		return STATUS_FAILED;
	}
	free(cmd);

	for (;;) {
		unsigned char hdr[5];
		char buf[65536];
		uint32_t n;
		int r = read_full(fd, hdr, sizeof(hdr));

		if (r <= 0)
			break;
		memcpy(&be, hdr + 1, 4);
		n = ntohl(be);
		if (hdr[0] == 'x') {
			if (n != 4 || read_full(fd, &be, 4) <= 0)
				break;
			close(fd);
			return (int)ntohl(be);
		}
		if ((hdr[0] != '1' && hdr[0] != '2') || n > sizeof(buf)) {
			fprintf(stderr, "%s: bad frame from %s\n", prog, host);
			close(fd);
			return STATUS_FAILED;
		}
		if (read_full(fd, buf, n) <= 0)
			break;
		/* Our own stdout or stderr gone: closing the connection stops the command. */
		if (write_all(hdr[0] == '1' ? 1 : 2, buf, n) < 0) {
			close(fd);
			return STATUS_FAILED;
		}
	}
	fprintf(stderr, "%s: the connection to %s closed before the command's status\n", prog,
		host);
	close(fd);
	return STATUS_FAILED;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int wait_for(const char *host, const char *port, const char *seconds)
{
	char *end;
	double limit = strtod(seconds, &end), deadline;
	const char *why;
	int fd;

	if (end == seconds || *end || !(limit >= 0)) {
		fprintf(stderr, "%s: --wait needs a number of seconds, not '%s'\n", prog, seconds);
		return 2;
	}
	deadline = now() + limit;
	for (;;) {
		struct timespec pause = { .tv_nsec = 100 * 1000 * 1000 };

		fd = connect_to(host, port, &why);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (why) {
			fprintf(stderr, "%s: %s: %s\n", prog, host, why);
			return 1;
		}
		if (now() >= deadline)
			break;
		/* The server is not up yet: try again a little later. */
		nanosleep(&pause, NULL);
	}
	fprintf(stderr, "%s: no server on %s port %s within %s s (last: %s)\n", prog, host, port,
		seconds, strerror(errno));
	return 1;
}

static int exit_status(int wstatus)
{
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

/*
 * Runs the command a client sent on @conn and sends it the command's output
 * and status. Returns the status; -1 when the client sent no command (a
 * probe) or went away before sending all of it.
 */
static int serve_one(int conn)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, pidfd = -1, status = STATUS_FAILED;
	int open_pipes, exited = 0, gone = 0, told = 0, wstatus = 0, r;
	uint32_t be, len;
	char *cmd;
	pid_t pid;

	r = read_full(conn, &be, 4);
	if (r <= 0)
		return -1;
	len = ntohl(be);
	if (len > MAX_COMMAND) {
		fprintf(stderr, "%s: refusing a command of %u bytes\n", prog, len);
		return -1;
	}
	cmd = malloc((size_t)len + 1);
	if (!cmd) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	if (read_full(conn, cmd, len) <= 0 && len) {
		free(cmd);
		return -1;
	}
	cmd[len] = '\0';

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		goto report;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		goto report;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		setsid();
		if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	/* Readable once the command has exited, whoever holds its pipes. */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		fprintf(stderr, "%s: pidfd_open: %s\n", prog, strerror(errno));
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto report;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	open_pipes = 2;

	/*
	 * Until the command has exited and its pipes are drained: what is in
	 * them once it has exited goes too, without waiting for an end of
	 * file that a process it left behind could hold off.
	 */
	while (!exited || open_pipes) {
		struct pollfd p[4] = {
			{ .fd = out[0], .events = POLLIN },
			{ .fd = err[0], .events = POLLIN },
			{ .fd = gone ? -1 : conn, .events = POLLIN },
			{ .fd = exited ? -1 : pidfd, .events = POLLIN },
		};
		int k;

		if (exited) {
			/* Drain without blocking. */
			for (k = 0; k < 2; k++) {
				int *fd = k ? &err[0] : &out[0];
				char buf[65536];
				ssize_t n;

				while (*fd >= 0) {
					n = read(*fd, buf, sizeof(buf));
					if (n > 0) {
						if (!gone && send_frame(conn, k ? '2' : '1', buf,
									(uint32_t)n) < 0)
							gone = 1;
						continue;
					}
					if (n < 0 && errno == EINTR)
						continue;
					close(*fd);
					*fd = -1;
					open_pipes--;
				}
			}
			break;
		}
		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: poll: %s\n", prog, strerror(errno));
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			goto report;
		}
		for (k = 0; k < 2; k++) {
			int *fd = k ? &err[0] : &out[0];
			char buf[65536];
			ssize_t n;

			if (*fd < 0 || !(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(*fd, buf, sizeof(buf));
			if (n > 0) {
				if (!gone && send_frame(conn, k ? '2' : '1', buf, (uint32_t)n) < 0)
					gone = 1;
			} else if (n == 0 || errno != EAGAIN) {
				close(*fd);
				*fd = -1;
				open_pipes--;
			}
		}
		if (!gone && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			char c;

			/* The client sends nothing after the command: this is its end. */
			if (read(conn, &c, 1) <= 0)
				gone = 1;
		}
		if (gone && !exited && !told) {
			fprintf(stderr, "%s: the client went away: stopping '%s'\n", prog, cmd);
			kill(-pid, SIGTERM);
			told = 1;
		}
		if (p[3].revents & POLLIN) {
			if (waitpid(pid, &wstatus, 0) == pid)
				exited = 1;
		}
	}
	status = exit_status(wstatus);

report:
	if (!gone) {
		be = htonl((uint32_t)status);
		send_frame(conn, 'x', &be, 4);
	}
	if (pidfd >= 0)
		close(pidfd);
	for (r = 0; r < 2; r++) {
		if (out[r] >= 0)
			close(out[r]);
		if (err[r] >= 0)
			close(err[r]);
	}
	free(cmd);
	return status;
}

static int server(const char *address, const char *port, int once)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct addrinfo *res;
	int lfd, err, one = 1;

	err = getaddrinfo(address, port, &hints, &res);
	if (err) {
		fprintf(stderr, "%s: %s: %s\n", prog, address, gai_strerror(err));
		return STATUS_FAILED;
	}
	lfd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, res->ai_addr, res->ai_addrlen) < 0 || listen(lfd, 8) < 0) {
		fprintf(stderr, "%s: cannot listen on %s port %s: %s\n", prog, address, port,
			strerror(errno));
		freeaddrinfo(res);
		if (lfd >= 0)
			close(lfd);
		return STATUS_FAILED;
	}
	freeaddrinfo(res);
	/* What the commands leave running becomes ours, not init's. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		fprintf(stderr, "%s: PR_SET_CHILD_SUBREAPER: %s\n", prog, strerror(errno));
		close(lfd);
		return STATUS_FAILED;
	}

	for (;;) {
		int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), status;

		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "%s: accept: %s\n", prog, strerror(errno));
			close(lfd);
			return STATUS_FAILED;
		}
		setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		status = serve_one(conn);
		close(conn);
		if (once && status >= 0) {
			int wstatus;
			pid_t pid;

			close(lfd);
			/* Until the last process the command left behind has ended. */
			while ((pid = waitpid(-1, &wstatus, 0)) > 0 || errno == EINTR) {
				if (pid > 0 && status == 0 && exit_status(wstatus) != 0) {
					fprintf(stderr, "%s: process %d, left running by the command, "
						"exited with status %d\n", prog, (int)pid,
						exit_status(wstatus));
					status = exit_status(wstatus);
				}
			}
			return status;
		}
		/* Reap what earlier commands left behind and has ended since. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}

int main(int argc, char **argv)
{
	const char *port = getenv("RBLN_RSH_PORT");
	int i = 1;

	if (!port || !*port)
		port = DEFAULT_PORT;
	/* A client that the command outlives, or a server whose client is gone: write errors, not signals. */
	signal(SIGPIPE, SIG_IGN);

	if (i < argc && !strcmp(argv[i], "-p")) {
		if (i + 1 >= argc) {
			usage(stderr);
			return 2;
		}
		port = argv[i + 1];
		i += 2;
	}
	if (i < argc && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (i < argc && !strcmp(argv[i], "--serve")) {
		if (argc - i == 2)
			return server(argv[i + 1], port, 0);
		if (argc - i == 3 && !strcmp(argv[i + 2], "--once"))
			return server(argv[i + 1], port, 1);
		usage(stderr);
		return 2;
	}
	if (i < argc && !strcmp(argv[i], "--wait")) {
		if (argc - i != 3) {
			usage(stderr);
			return 2;
		}
		return wait_for(argv[i + 2], port, argv[i + 1]);
	}
	if (argc - i < 2 || argv[i][0] == '-') {
		usage(stderr);
		return 2;
	}
	return client(argv[i], port, argc - i - 1, argv + i + 1);
}
