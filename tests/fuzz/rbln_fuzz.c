// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_fuzz - a UAPI-aware ioctl fuzzer for rbln.ko
 *
 * SYNOPSIS
 *	rbln_fuzz [--seconds S] [--iterations N] [--seed N] [--devices LIST]
 *		  [--verbose]
 *
 * DESCRIPTION
 *	Drives the rbln accel driver of its NPUs the way a buggy or
 *	hostile program would. It keeps pools of live state for every file
 *	it opens (buffer objects of host and device memory with their
 *	addresses and CPU mappings, queues, binary and timeline syncobjs,
 *	dma-bufs exported and imported within a device and between two, the
 *	peer path, foreign ones of the tests' exporter, some with
 *	scatterlists no driver upstream hands out or failing to map) and
 *	calls ioctls with arguments drawn from them, mostly valid and often
 *	mutated: stale and unknown handles, huge sizes, pad fields and flags
 *	that must be zero, addresses inside objects, in their guard pages,
 *	below and beyond the address space up to 2^64, user pointers the
 *	kernel cannot read or write back. It builds command buffers from the
 *	ISA's packets, valid, faulting, malformed and randomly damaged, some
 *	running long enough to be in flight when the rest lands: handles and
 *	files closed under jobs, queues destroyed with jobs queued, munmap,
 *	fork with children dying mid-work, injected hangs, faults and DMA
 *	errors, short timeouts and short waits, WAITs whose word the host
 *	keeps moving past the job timeout, and devices unplugged and added
 *	back.
 *
 *	Where the UAPI says for certain how a call ends, the outcome is
 *	checked: a nonzero pad is -EINVAL, an unknown handle -ENOENT, any
 *	ioctl on an unplugged device -ENODEV, a job of valid packets on live
 *	objects succeeds unless a timeout, an injection (of the kind that
 *	makes the fault fdinfo reports), a ban or its queue's destruction
 *	explains otherwise, a job touching what it may not fails with the
 *	kind of fault it was made to cause, every job ends, no device memory
 *	stays in use once every file is closed.
 *	Elsewhere the oracle is the kernel log: a supervisor process watches
 *	/dev/kmsg for splats and the worker for progress.
 *
 *	Every choice comes from a generator seeded with (seed, iteration):
 *	a run is repeated by its seed, and a failure names the iteration.
 *	Outcomes that depend on timing (a job timing out, a fault landing on
 *	one job or the next) may differ from run to run.
 *
 *	Run it as root in a guest with rbln.ko loaded, emulated devices
 *	(emu_devices=2) and a short job_timeout_ms, e.g. through
 *	tools/vm/rbln-vm; debugfs is needed for fault injection. With
 *	$RBLN_VM_PCI_DEVICES=N (rbln-vm --pci-devices N) it fuzzes the N PCI
 *	NPUs instead, unplugs them from the PCI bus and brings them back
 *	with a rescan. The devices are all emulated or all PCI functions
 *	(of one rbln-npu-model process, which reach each other's memory).
 *
 * OPTIONS
 *	--seconds S	fuzz for S seconds (default 60 when --iterations is
 *			not given either)
 *	--iterations N	stop after N iterations
 *	--seed N	the seed (default 1)
 *	--devices LIST	comma-separated ids of the rbln_emu devices to use,
 *			or numbers of the PCI NPUs (default: all of them)
 *	--verbose	print every operation on stderr
 *
 * ENVIRONMENT
 *	RBLN_FUZZ_SEED	overrides --seed: CI's fixed seed can be changed
 *			without editing the test's definition.
 *	RBLN_TEST_TIMEOUT_SCALE
 *			multiplies how long a job, a child or the worker may
 *			take before it counts as hung (slow kernels: the debug
 *			kernel under TCG); the fuzzing time stays --seconds.
 *	RBLN_TEST_EXPORTER
 *			the tests' dma-buf exporter module
 *			(tests/kernel/exporter), which the fuzzer loads;
 *			without it, no foreign dma-bufs.
 *
 * OUTPUT
 *	TAP on stdout: one test point, "ok 1 fuzz seed=N calls=M", then the
 *	number of ioctls, ioctls per second and every call with how many
 *	times it returned each errno, as TAP comments. On a failure, stderr
 *	has "rbln_fuzz: FAIL seed=N iteration=K: what", what the worker was
 *	doing and its last operations, and the kernel's splat if there was
 *	one.
 *
 * EXIT STATUS
 *	0 no failure; 1 a kernel failure (splat, wrong outcome, hang);
 *	2 the fuzzer itself failed.
 *
 * EXAMPLE
 *	tools/vm/rbln-vm --module build/kernel/rbln.ko --param emu_devices=2 \
 *		--param job_timeout_ms=500 -r /tmp/fuzz -- \
 *		build/tests/fuzz/rbln_fuzz --seconds 60 --seed 7
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

/* What rbln-vm calls a splat, and more: the kernel is unhappy. */
#define SPLAT	"WARNING:|BUG:|Oops|KASAN|UBSAN|lockdep|possible circular locking|" \
		"general protection|refcount_t|list_(add|del) corruption|Call Trace:|" \
		"kernel BUG|hung_task|blocked for more than|rcu_.*stall|Kernel panic"

/* No progress for this long: the worker is stuck in the kernel. */
#define STALL_S		120
/* Beyond --seconds: children, jobs and files being wound up. */
#define WIND_UP_S	300

enum verdict { PASS, FAIL, ERROR };

/* Kernel log lines kept to show with a failure the kernel did not splat on. */
#define KLOG_LINES	64
#define KLOG_LEN	240

struct supervisor {
	struct fz_shared *sh;
	uint64_t seed;
	pid_t worker;
	int kmsg;
	regex_t splat;
	char klog[KLOG_LINES][KLOG_LEN];
	unsigned int klog_head;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: rbln_fuzz [--seconds S] [--iterations N] [--seed N] [--devices LIST] [--verbose]\n"
		"Fuzzes rbln.ko's ioctls on its devices; RBLN_FUZZ_SEED overrides --seed.\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && *s && !*end;
}

/* One kernel log record's text, or NULL when there is none to read now. */
static const char *kmsg_next(struct supervisor *sv, char *buf, size_t size)
{
	ssize_t n;
	char *text, *nl;

	for (;;) {
		n = read(sv->kmsg, buf, size - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten before we read it */
			continue;
		if (n <= 0)
			return NULL;
		buf[n] = '\0';
		text = strchr(buf, ';');
		if (!text)
			continue;
		nl = strchr(++text, '\n');
		if (nl)
			*nl = '\0';
		return text;
	}
}

/*
 * Looks for a splat in what the kernel printed since the last look; on
 * one, reports it with the kernel's next lines and what the worker did.
 */
static bool splat_seen(struct supervisor *sv, unsigned int wait_ms)
{
	char buf[8192];
	const char *line;
	uint64_t until;
	unsigned int shown = 0;

	if (sv->kmsg < 0)
		return false;
	poll(&(struct pollfd){ .fd = sv->kmsg, .events = POLLIN }, 1, wait_ms);
	while ((line = kmsg_next(sv, buf, sizeof(buf)))) {
		if (regexec(&sv->splat, line, 0, NULL, 0)) {
			snprintf(sv->klog[sv->klog_head++ % KLOG_LINES], KLOG_LEN, "%s", line);
			continue;
		}
		fprintf(stderr, "rbln_fuzz: FAIL seed=%llu iteration=%llu: the kernel printed: %s\n",
			(unsigned long long)sv->seed,
			(unsigned long long)atomic_load(&sv->sh->iteration), line);
		fprintf(stderr, "rbln_fuzz: the worker was doing: %s\n", sv->sh->doing);
		fz_print_history(sv->sh);
		fprintf(stderr, "rbln_fuzz: the kernel log from there:\n");
		/* The rest of the report comes within a moment. */
		until = fz_now_ns() + 2000000000ull;
		fprintf(stderr, "rbln_fuzz:   %s\n", line);
		while (shown++ < 80 && fz_now_ns() < until) {
			line = kmsg_next(sv, buf, sizeof(buf));
			if (line)
				fprintf(stderr, "rbln_fuzz:   %s\n", line);
			else
				poll(&(struct pollfd){ .fd = sv->kmsg, .events = POLLIN }, 1, 100);
		}
		snprintf(sv->sh->fail_msg, sizeof(sv->sh->fail_msg), "kernel splat");
		return true;
	}
	return false;
}

/* What the kernel said last, for a failure the worker found: a job's fault, say. */
static void print_klog(struct supervisor *sv)
{
	unsigned int i = sv->klog_head > KLOG_LINES ? sv->klog_head - KLOG_LINES : 0;

	/* Whatever came with the failure, too. */
	splat_seen(sv, 100);
	fprintf(stderr, "rbln_fuzz: the kernel's last %u lines:\n", sv->klog_head - i);
	for (; i < sv->klog_head; i++)
		fprintf(stderr, "rbln_fuzz:   %s\n", sv->klog[i % KLOG_LINES]);
}

/* The worker and its children go; one stuck in the kernel may not. */
static void stop_worker(struct supervisor *sv)
{
	uint64_t until = fz_now_ns() + 10000000000ull;

	kill(-sv->worker, SIGKILL);
	while (waitpid(sv->worker, NULL, WNOHANG) == 0 && fz_now_ns() < until)
		poll(NULL, 0, 50);
}

static void print_children(pid_t pid)
{
	char path[64];
	FILE *f;
	int child;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fscanf(f, "%d", &child) == 1)
		fz_print_task(child);
	fclose(f);
}

static enum verdict supervise(struct supervisor *sv, const struct fz_options *opt)
{
	uint64_t start = fz_now_ns(), last_change = start, beat = 0, now;
	int status;

	for (;;) {
		if (splat_seen(sv, 200)) {
			stop_worker(sv);
			return FAIL;
		}
		if (waitpid(sv->worker, &status, WNOHANG) == sv->worker) {
			/* The worker's last calls may have left something in the log. */
			if (splat_seen(sv, 1000))
				return FAIL;
			if (WIFEXITED(status) && WEXITSTATUS(status) == FZ_EXIT_OK)
				return PASS;
			if (WIFEXITED(status) && WEXITSTATUS(status) == FZ_EXIT_FAIL) {
				print_klog(sv);
				return FAIL;
			}
			if (WIFSIGNALED(status))
				snprintf(sv->sh->fail_msg, sizeof(sv->sh->fail_msg),
					 "fuzzer error: worker died of signal %d", WTERMSIG(status));
			else
				snprintf(sv->sh->fail_msg, sizeof(sv->sh->fail_msg),
					 "fuzzer error: worker exited with %d", WEXITSTATUS(status));
			fprintf(stderr, "rbln_fuzz: %s, not a kernel failure\n", sv->sh->fail_msg);
			return ERROR;
		}
		now = fz_now_ns();
		if (atomic_load(&sv->sh->heartbeat) != beat) {
			beat = atomic_load(&sv->sh->heartbeat);
			last_change = now;
		} else if (now - last_change > opt->scale * STALL_S * 1000000000ull) {
			fprintf(stderr, "rbln_fuzz: FAIL seed=%llu iteration=%llu: no progress for %u s, in: %s\n",
				(unsigned long long)sv->seed,
				(unsigned long long)atomic_load(&sv->sh->iteration),
				opt->scale * STALL_S, sv->sh->doing);
			fz_print_task(sv->worker);
			print_children(sv->worker);
			fz_print_history(sv->sh);
			snprintf(sv->sh->fail_msg, sizeof(sv->sh->fail_msg), "hang");
			stop_worker(sv);
			return FAIL;
		}
		if (opt->seconds > 0 &&
		    now - start > (uint64_t)((opt->seconds + opt->scale * WIND_UP_S) * 1e9)) {
			fprintf(stderr, "rbln_fuzz: FAIL seed=%llu: not done %u s after the end, in: %s\n",
				(unsigned long long)sv->seed, opt->scale * WIND_UP_S, sv->sh->doing);
			fz_print_task(sv->worker);
			snprintf(sv->sh->fail_msg, sizeof(sv->sh->fail_msg), "did not finish");
			stop_worker(sv);
			return FAIL;
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'S' },
		{ "devices", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fz_options opt = { .seed = 1, .scale = 1 };
	struct supervisor sv = { .kmsg = -1 };
	const char *env = getenv("RBLN_FUZZ_SEED");
	const char *scale = getenv("RBLN_TEST_TIMEOUT_SCALE");
	enum verdict v;
	uint64_t start, fuzz_ns, v64;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "s:n:S:d:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			opt.seconds = strtod(optarg, &end);
			if (*end || opt.seconds <= 0) {
				usage(stderr);
				return FZ_EXIT_ERROR;
			}
			break;
		case 'n':
			if (!parse_u64(optarg, &opt.iterations)) {
				usage(stderr);
				return FZ_EXIT_ERROR;
			}
			break;
		case 'S':
			if (!parse_u64(optarg, &opt.seed)) {
				usage(stderr);
				return FZ_EXIT_ERROR;
			}
			break;
		case 'd':
			opt.devices = optarg;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return FZ_EXIT_ERROR;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return FZ_EXIT_ERROR;
	}
	if (env && !parse_u64(env, &opt.seed)) {
		fprintf(stderr, "rbln_fuzz: RBLN_FUZZ_SEED=%s is not a number\n", env);
		return FZ_EXIT_ERROR;
	}
	if (!opt.seconds && !opt.iterations)
		opt.seconds = 60;
	if (scale && (!parse_u64(scale, &v64) || !v64 || v64 > 1000)) {
		fprintf(stderr, "rbln_fuzz: RBLN_TEST_TIMEOUT_SCALE=%s is not a positive number\n",
			scale);
		return FZ_EXIT_ERROR;
	}
	if (scale)
		opt.scale = v64;

	sv.seed = opt.seed;
	sv.sh = mmap(NULL, sizeof(*sv.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (sv.sh == MAP_FAILED) {
		perror("rbln_fuzz: mmap");
		return FZ_EXIT_ERROR;
	}
	if (regcomp(&sv.splat, SPLAT, REG_EXTENDED | REG_NOSUB))
		return FZ_EXIT_ERROR;
	/* Only what the kernel says from now on. */
	sv.kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (sv.kmsg >= 0)
		lseek(sv.kmsg, 0, SEEK_END);

	printf("TAP version 13\n1..1\n");
	printf("# rbln_fuzz: seed=%llu seconds=%g iterations=%llu devices=%s%s\n",
	       (unsigned long long)opt.seed, opt.seconds, (unsigned long long)opt.iterations,
	       opt.devices ? opt.devices : "all", env ? " (seed from RBLN_FUZZ_SEED)" : "");
	if (sv.kmsg < 0)
		printf("# rbln_fuzz: cannot read /dev/kmsg (%s): splats are left to the caller\n",
		       strerror(errno));
	fflush(stdout);

	start = fz_now_ns();
	sv.worker = fork();
	if (sv.worker < 0) {
		perror("rbln_fuzz: fork");
		return FZ_EXIT_ERROR;
	}
	if (!sv.worker) {
		/* Its own group: the worker and its children are stopped together. */
		setpgid(0, 0);
		_exit(fz_worker(sv.sh, &opt));
	}
	setpgid(sv.worker, sv.worker);
	v = supervise(&sv, &opt);

	fuzz_ns = atomic_load(&sv.sh->fuzz_ns);
	if (!fuzz_ns)
		fuzz_ns = fz_now_ns() - start;
	fz_print_stats(sv.sh, fuzz_ns / 1e9);
	printf("%sok 1 fuzz seed=%llu calls=%llu%s%s\n", v == PASS ? "" : "not ",
	       (unsigned long long)opt.seed, (unsigned long long)fz_total_ioctls(sv.sh),
	       v == PASS ? "" : " # ", v == PASS ? "" : sv.sh->fail_msg);
	fflush(stdout);
	return v == PASS ? 0 : v == FAIL ? FZ_EXIT_FAIL : FZ_EXIT_ERROR;
}
