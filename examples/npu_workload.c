// SPDX-License-Identifier: MIT
/*
 * npu_workload - hold device memory and keep an NPU busy with DMA jobs
 *
 * A sample workload for watching a device with rbln-smi: it allocates the
 * device (and, optionally, host) memory it is asked for, says so on one
 * line of stdout, then keeps the NPU busy with DMA fills of that memory,
 * from one queue per ring with two jobs in flight on each, until the time
 * is up or SIGINT/SIGTERM arrives.
 *
 *     npu_workload -m 256 -t 30 &
 *     rbln-smi
 *
 * With -f it runs one job that faults instead, as a buggy program's would,
 * and holds on, its context banned, for rbln-smi -q to say why.
 *
 * Exit status: 0 when every job succeeded (with -f: when the job faulted),
 * 1 on any error, 2 on bad usage.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>

#include <rbln_drm.h>
#include <xf86drm.h>

#define MIB		(UINT64_C(1) << 20)
#define MAX_DEVICES	64
#define MAX_MIB		(64 * 1024)
#define FILL_CHUNK	(4 * MIB)	/* bytes one job fills */
#define IN_FLIGHT	2		/* jobs queued at a time */
#define JOB_WAIT_MS	30000		/* a job taking longer is an error */
#define FAULT_VA	0x1000		/* below every object's address */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct options {
	unsigned int device;	/* index in rbln_drm_enumerate() order */
	unsigned int device_mib;
	unsigned int host_mib;
	unsigned int seconds;	/* 0: until a signal */
	unsigned int queues;	/* 0: one per ring of the device */
	bool idle;
	bool fault;
};

#define MAX_QUEUES	16
#define CMD_SLOT	4096	/* bytes of command buffer per queue */

/* A queue with its own timeline: job k signals point k. */
struct queue {
	uint32_t id;
	uint32_t syncobj;
	uint64_t submitted;
	uint32_t cmd_off, cmd_len;
};

struct workload {
	struct rbln_drm_device *dev;
	struct queue queues[MAX_QUEUES];
	unsigned int nqueues;
	uint32_t cmd_bo, mem_bo, host_bo;
	uint64_t cmd_va, mem_va;
	void *cmd_cpu;
	uint64_t cmd_size;
	uint64_t bytes;		/* written by one round of jobs */
	uint64_t rounds;	/* completed on every queue */
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"Usage: %s [OPTION]...\n"
		"Hold NPU memory and keep the NPU busy with DMA jobs.\n\n"
		"  -d, --device INDEX       rbln device, in enumeration order (default: 0)\n"
		"  -m, --memory MIB         device memory to hold, MiB (default: 64)\n"
		"  -H, --host-memory MIB    host memory object to hold, MiB (default: 0)\n"
		"  -t, --seconds SECONDS    how long to run; 0: until SIGINT or SIGTERM\n"
		"                           (default: 10)\n"
		"  -q, --queues N           queues to keep busy (default: one per ring)\n"
		"  -i, --idle               hold the memory, submit no job\n"
		"  -f, --fault              run one job that faults, then hold the memory\n"
		"  -h, --help               this text\n\n"
		"Once the memory is allocated it prints one line starting with \"ready:\".\n"
		"Exit status: 0 when every job succeeded (with -f: when the job faulted),\n"
		"1 on an error, 2 on bad usage.\n",
		prog);
}

static int parse_uint(const char *s, unsigned int max, unsigned int *out)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "memory", required_argument, NULL, 'm' },
		{ "host-memory", required_argument, NULL, 'H' },
		{ "seconds", required_argument, NULL, 't' },
		{ "queues", required_argument, NULL, 'q' },
		{ "idle", no_argument, NULL, 'i' },
		{ "fault", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct options){ .device_mib = 64, .seconds = 10 };
	while ((c = getopt_long(argc, argv, "d:m:H:t:q:ifh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (parse_uint(optarg, MAX_DEVICES - 1, &o->device))
				goto bad;
			break;
		case 'm':
			if (parse_uint(optarg, MAX_MIB, &o->device_mib))
				goto bad;
			break;
		case 'H':
			if (parse_uint(optarg, MAX_MIB, &o->host_mib))
				goto bad;
			break;
		case 't':
			if (parse_uint(optarg, 7 * 24 * 3600, &o->seconds))
				goto bad;
			break;
		case 'q':
			if (parse_uint(optarg, MAX_QUEUES, &o->queues) || !o->queues)
				goto bad;
			break;
		case 'i':
			o->idle = true;
			break;
		case 'f':
			o->fault = true;
			break;
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		default:
			usage(stderr, argv[0]);
			return -EINVAL;
		}
	}
	if (o->idle && o->fault) {
		fprintf(stderr, "%s: -i and -f exclude each other\n", argv[0]);
		return -EINVAL;
	}
	if (o->fault)
		o->queues = 1;
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "%s: invalid value '%s' for -%c\n", argv[0], optarg, c);
	return -EINVAL;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_device(unsigned int index, struct rbln_drm_device **dev)
{
	unsigned int minors[MAX_DEVICES];
	int n;

	n = rbln_drm_enumerate(minors, MAX_DEVICES);
	if (n < 0)
		return n;
	if ((unsigned int)n <= index || index >= MAX_DEVICES)
		return -ENODEV;
	return rbln_drm_open(minors[index], dev);
}

/* Waits for point @point of queue @q and checks how its job ended. */
static int wait_point(struct workload *w, struct queue *q, uint64_t point)
{
	int fd = rbln_drm_fd(w->dev), ret, status;

	ret = drmSyncobjTimelineWait(fd, &q->syncobj, &point, 1,
				     now_ns() + (int64_t)JOB_WAIT_MS * 1000000,
				     DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL);
	if (ret)
		return errno == ETIME ? -ETIMEDOUT : -errno;
	ret = rbln_drm_fence_status(w->dev, q->syncobj, point, &status);
	if (ret)
		return ret;
	if (status != 1)
		return status ? status : -EBUSY;
	return 0;
}

/*
 * Encodes each queue's job once: the command buffers do not change. Queue
 * i fills its own slice of the device memory, then copies the slice's
 * first half over its second; with no device memory, jobs are NOPs; with
 * @fault, the one queue's job fills a page where nothing is mapped.
 */
static int encode_jobs(struct workload *w, uint64_t mem_bytes, bool fault)
{
	uint64_t slice = mem_bytes / w->nqueues / 4096 * 4096, base, half;
	struct rbln_drm_cmd c;
	unsigned int i;
	int ret = 0;

	if (slice > FILL_CHUNK)
		slice = FILL_CHUNK;
	w->bytes = 0;
	for (i = 0; i < w->nqueues && !ret; i++) {
		struct queue *q = &w->queues[i];

		q->cmd_off = i * CMD_SLOT;
		rbln_drm_cmd_init(&c, (char *)w->cmd_cpu + q->cmd_off, CMD_SLOT);
		if (fault) {
			ret = rbln_drm_cmd_dma_fill(&c, FAULT_VA, 0, 4096);
		} else if (!slice) {
			ret = rbln_drm_cmd_nop(&c);
		} else {
			base = w->mem_va + i * slice;
			half = slice / 2 / 4096 * 4096;
			ret = rbln_drm_cmd_dma_fill(&c, base, 0x5a5a5a00 | i, slice);
			w->bytes += slice;
			if (!ret && half) {
				ret = rbln_drm_cmd_dma_copy(&c, base + half, base, half);
				w->bytes += half;
			}
		}
		q->cmd_len = c.len;
	}
	return ret;
}

static int submit(struct workload *w, struct queue *q)
{
	uint32_t bos[2] = { w->cmd_bo, w->mem_bo };
	struct drm_rbln_sync sig = { .handle = q->syncobj, .point = q->submitted + 1 };
	int ret;

	ret = rbln_drm_submit(w->dev, q->id, w->cmd_va + q->cmd_off, q->cmd_len, bos,
			      w->mem_bo ? 2 : 1, NULL, 0, &sig);
	if (!ret)
		q->submitted++;
	return ret;
}

/* Rounds of one job per queue, IN_FLIGHT rounds queued, until the end. */
static int run_jobs(struct workload *w, int64_t deadline)
{
	unsigned int i;
	int ret = 0;

	while (!ret && !stop && (!deadline || now_ns() < deadline)) {
		for (i = 0; i < w->nqueues && !ret; i++) {
			struct queue *q = &w->queues[i];

			if (q->submitted >= IN_FLIGHT)
				ret = wait_point(w, q, q->submitted - IN_FLIGHT + 1);
			if (!ret)
				ret = submit(w, q);
		}
		if (!ret && w->queues[0].submitted > IN_FLIGHT)
			w->rounds = w->queues[0].submitted - IN_FLIGHT;
	}
	/* Let what was submitted finish, even after an error. */
	for (i = 0; i < w->nqueues; i++) {
		struct queue *q = &w->queues[i];
		int err = q->submitted ? wait_point(w, q, q->submitted) : 0;

		if (!ret)
			ret = err;
	}
	if (!ret)
		w->rounds = w->queues[0].submitted;
	return ret;
}

/* The one job that must fault: 0 once it has, its context banned. */
static int run_fault(struct workload *w)
{
	struct queue *q = &w->queues[0];
	int ret = submit(w, q);

	if (!ret)
		ret = wait_point(w, q, q->submitted);
	if (ret == -EFAULT) {
		printf("faulted: a fill at %#x, as asked; the context is banned\n", FAULT_VA);
		fflush(stdout);
		return 0;
	}
	return ret ? ret : -EPROTO;
}

static void idle(int64_t deadline)
{
	while (!stop && (!deadline || now_ns() < deadline)) {
		struct timespec ts = { .tv_nsec = 100000000 };

		nanosleep(&ts, NULL);
	}
}

static int setup(struct workload *w, const struct options *o)
{
	unsigned int i;
	int ret = 0;

	if (o->device_mib) {
		ret = rbln_drm_bo_create(w->dev, (uint64_t)o->device_mib * MIB, RBLN_BO_DEVICE,
					 0, &w->mem_bo, &w->mem_va);
		if (ret) {
			fprintf(stderr, "npu_workload: cannot allocate %u MiB of device memory: %s\n",
				o->device_mib, strerror(-ret));
			return ret;
		}
	}
	if (o->host_mib) {
		ret = rbln_drm_bo_create(w->dev, (uint64_t)o->host_mib * MIB, RBLN_BO_HOST, 0,
					 &w->host_bo, NULL);
		if (ret) {
			fprintf(stderr, "npu_workload: cannot allocate %u MiB of host memory: %s\n",
				o->host_mib, strerror(-ret));
			return ret;
		}
	}
	if (o->idle)
		return 0;

	w->nqueues = o->queues;
	if (!w->nqueues) {
		uint64_t rings;

		ret = rbln_drm_get_param(w->dev, RBLN_PARAM_NUM_RINGS, &rings);
		if (ret) {
			fprintf(stderr, "npu_workload: cannot read the number of rings: %s\n",
				strerror(-ret));
			return ret;
		}
		w->nqueues = rings < 1 ? 1 : rings > MAX_QUEUES ? MAX_QUEUES : (unsigned int)rings;
	}
	for (i = 0; i < w->nqueues && !ret; i++) {
		ret = rbln_drm_queue_create(w->dev, RBLN_QUEUE_PRIORITY_NORMAL, &w->queues[i].id);
		if (ret)
			break;
		ret = drmSyncobjCreate(rbln_drm_fd(w->dev), 0, &w->queues[i].syncobj) ? -errno : 0;
		if (ret)
			rbln_drm_queue_destroy(w->dev, w->queues[i].id);
	}
	if (ret) {
		w->nqueues = i;	/* the ones to tear down */
		fprintf(stderr, "npu_workload: cannot create a queue: %s\n", strerror(-ret));
		return ret;
	}
	ret = rbln_drm_bo_create(w->dev, (uint64_t)w->nqueues * CMD_SLOT, RBLN_BO_HOST, 0,
				 &w->cmd_bo, &w->cmd_va);
	if (!ret)
		ret = rbln_drm_bo_mmap(w->dev, w->cmd_bo, PROT_READ | PROT_WRITE, &w->cmd_cpu,
				       &w->cmd_size);
	if (!ret)
		ret = encode_jobs(w, (uint64_t)o->device_mib * MIB, o->fault);
	if (ret)
		fprintf(stderr, "npu_workload: cannot set up the command buffers: %s\n",
			strerror(-ret));
	return ret;
}

static void teardown(struct workload *w)
{
	unsigned int i;

	if (w->cmd_cpu)
		munmap(w->cmd_cpu, w->cmd_size);
	for (i = 0; i < w->nqueues; i++) {
		drmSyncobjDestroy(rbln_drm_fd(w->dev), w->queues[i].syncobj);
		rbln_drm_queue_destroy(w->dev, w->queues[i].id);
	}
	if (w->cmd_bo)
		rbln_drm_bo_close(w->dev, w->cmd_bo);
	if (w->host_bo)
		rbln_drm_bo_close(w->dev, w->host_bo);
	if (w->mem_bo)
		rbln_drm_bo_close(w->dev, w->mem_bo);
	rbln_drm_close(w->dev);
}
int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct workload w = { 0 };
	int64_t start, deadline;
	struct options o;
	int ret;

	if (parse_options(argc, argv, &o))
		return 2;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL)) {
		perror("npu_workload: sigaction");
		return 1;
	}

	ret = open_device(o.device, &w.dev);
	if (ret) {
		fprintf(stderr, "npu_workload: cannot open rbln device %u: %s\n", o.device,
			ret == -ENODEV ? "no such device" : strerror(-ret));
		return 1;
	}
	ret = setup(&w, &o);
	if (ret) {
		teardown(&w);
		return 1;
	}

	printf("ready: pid %ld holds %u MiB of device memory and %u MiB of host memory "
	       "on /dev/accel/accel%u; %s", (long)getpid(), o.device_mib, o.host_mib,
	       rbln_drm_minor(w.dev), o.idle ? "idle" : o.fault ? "running a faulting job" :
	       "running DMA jobs");
	if (o.seconds)
		printf(" for %u s\n", o.seconds);
	else
		printf(" until interrupted\n");
	fflush(stdout);

	start = now_ns();
	deadline = o.seconds ? start + (int64_t)o.seconds * 1000000000 : 0;
	if (o.idle || o.fault) {
		ret = o.fault ? run_fault(&w) : 0;
		if (!ret)
			idle(deadline);
	} else {
		ret = run_jobs(&w, deadline);
	}

	if (ret)
		fprintf(stderr, "npu_workload: a job failed: %s\n", strerror(-ret));
	else if (!o.idle && !o.fault)
		printf("done: %" PRIu64 " jobs on %u queues in %.1f s, %" PRIu64 " MiB written\n",
		       w.rounds * w.nqueues, w.nqueues, (now_ns() - start) / 1e9,
		       w.rounds * w.bytes / MIB);
	teardown(&w);
	return ret ? 1 : 0;
}
