// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_recovery - faults, hangs, injected errors and hot-unplug: the guilty
 * job fails with the right error, its context is banned where it should
 * be, and every other context's results stay exact
 *
 * Run with emu_devices>=1, job_timeout_ms=500 and a small max_jobs.
 */

#include <inttypes.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define MIB		(1u << 20)
#define HOT_ID		9

/* One context with a queue, a command buffer and a scratch device buffer. */
struct ctx {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd, mem, out;
};

/* The rest of a context whose device @x->dev is open. */
static int ctx_setup(struct ctx *x)
{
	return rbln_drm_queue_create(x->dev, RBLN_QUEUE_PRIORITY_NORMAL, &x->queue) ?:
	       rbln_test_buf_new(x->dev, 64 * 1024, RBLN_BO_HOST, 0, &x->cmd) ?:
	       rbln_test_buf_new(x->dev, MIB, RBLN_BO_DEVICE, 0, &x->mem) ?:
	       rbln_test_buf_new(x->dev, 4096, RBLN_BO_HOST, 0, &x->out);
}

/* A context on initial device @id. */
static int ctx_open(struct ctx *x, unsigned int id)
{
	return rbln_test_open(id, &x->dev) ?: ctx_setup(x);
}

/* CPU mappings hold the file open: they go first. */
static void ctx_close(struct ctx *x)
{
	rbln_test_buf_free(x->dev, &x->cmd);
	rbln_test_buf_free(x->dev, &x->mem);
	rbln_test_buf_free(x->dev, &x->out);
	rbln_drm_close(x->dev);
}

static int ctx_run(struct ctx *x, uint32_t len)
{
	uint32_t bos[2] = { x->mem.handle, x->out.handle };

	return rbln_test_run(x->dev, x->queue, &x->cmd, len, bos, 2, 10000);
}

/* A job whose result proves the context works: fill, then copy out. */
static int ctx_check(struct ctx *x, uint32_t pattern)
{
	struct rbln_drm_cmd c;
	uint32_t *o = x->out.cpu;
	int ret;

	rbln_drm_cmd_init(&c, x->cmd.cpu, x->cmd.size);
	rbln_drm_cmd_dma_fill(&c, x->mem.va, pattern, MIB);
	rbln_drm_cmd_dma_copy(&c, x->out.va, x->mem.va + MIB - 4096, 4096);
	ret = ctx_run(x, c.len);
	if (ret != 1)
		return ret;
	return o[0] == pattern && o[1023] == pattern ? 1 : -1;
}

/* Runs the raw packet words @pkt (@len bytes) in @x. */
static int ctx_run_raw(struct ctx *x, const void *pkt, uint32_t len)
{
	memcpy(x->cmd.cpu, pkt, len);
	return ctx_run(x, len);
}

/* fdinfo's rbln-fault of @x, or "none". */
static const char *fault_of(struct ctx *x, char *buf, size_t size)
{
	if (rbln_test_fdinfo_value(rbln_drm_fd(x->dev), "rbln-fault:", buf, size))
		snprintf(buf, size, "none");
	return buf;
}

/* Arms @what on the device named @name (rbln_test_dev_name()). */
static int inject(const char *name, const char *what)
{
	return rbln_dev_debugfs_write(name, "inject", what);
}

FIXTURE(recovery) {
	struct ctx a, b;
};

FIXTURE_SETUP(recovery)
{
	ASSERT_EQ(0, ctx_open(&self->a, 0));
	ASSERT_EQ(0, ctx_open(&self->b, 0));
}

FIXTURE_TEARDOWN(recovery)
{
	ctx_close(&self->a);
	ctx_close(&self->b);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(recovery, unmapped_access_faults_and_bans)
{
	struct rbln_drm_cmd c;
	char fault[64];
	uint32_t q2;

	EXPECT_STREQ("none", fault_of(&self->a, fault, sizeof(fault)));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->a.out.va, 0x10000000ull, 64));
	EXPECT_EQ(-EFAULT, ctx_run(&self->a, c.len));
	/* Its owner learns why, whatever the ratelimited log kept. */
	EXPECT_STREQ("unmapped 0x10000000", fault_of(&self->a, fault, sizeof(fault)));
	EXPECT_STREQ("none", fault_of(&self->b, fault, sizeof(fault)));
	/* Banned: every later submission of the context, on any queue. */
	EXPECT_EQ(-1000 - ECANCELED, ctx_check(&self->a, 1));
	ASSERT_EQ(0, rbln_drm_queue_create(self->a.dev, RBLN_QUEUE_PRIORITY_NORMAL, &q2));
	self->a.queue = q2;
	EXPECT_EQ(-1000 - ECANCELED, ctx_check(&self->a, 1));
	/* The other context runs on, exactly. */
	EXPECT_EQ(1, ctx_check(&self->b, 0x600d));
}

/* A second thread of the file reading its fdinfo while the fault lands. */
struct fault_reader {
	struct ctx *x;
	atomic_bool stop;
	unsigned int reads, torn;
	char torn_value[64];
};

static void *read_faults(void *arg)
{
	struct fault_reader *r = arg;
	char fault[64];

	while (!atomic_load(&r->stop)) {
		fault_of(r->x, fault, sizeof(fault));
		r->reads++;
		if (strcmp(fault, "none") && strcmp(fault, "unmapped 0x20000000")) {
			r->torn++;
			snprintf(r->torn_value, sizeof(r->torn_value), "%s", fault);
		}
	}
	return NULL;
}

/*
 * The fault is published with its address: a reader racing the interrupt
 * handler sees no fault, or the whole one, never a kind without its
 * address. Several faulting jobs in flight ban the context once.
 */
TEST_F(recovery, fdinfo_read_as_the_fault_lands)
{
	struct fault_reader r = { .x = &self->a };
	struct rbln_drm_cmd c;
	pthread_t thread;
	char fault[64];

	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, self->a.mem.va, 0, MIB));
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->a.out.va, 0x20000000ull, 64));
	ASSERT_EQ(0, pthread_create(&thread, NULL, read_faults, &r));
	EXPECT_EQ(-EFAULT, ctx_run(&self->a, c.len));
	atomic_store(&r.stop, true);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	EXPECT_EQ(0, r.torn) TH_LOG("read '%s'", r.torn_value);
	EXPECT_LT(0, r.reads);
	EXPECT_STREQ("unmapped 0x20000000", fault_of(&self->a, fault, sizeof(fault)));
}

TEST_F(recovery, guard_page_faults)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, self->a.mem.va + MIB - 4, 0, 8));
	EXPECT_EQ(-EFAULT, ctx_run(&self->a, c.len));
	EXPECT_EQ(1, ctx_check(&self->b, 2));
}

TEST_F(recovery, write_to_read_only_faults)
{
	char want[64], fault[64];
	struct rbln_test_buf ro;
	struct rbln_drm_cmd c;
	uint32_t bos[2];

	ASSERT_EQ(0, rbln_test_buf_new(self->a.dev, MIB, RBLN_BO_DEVICE, RBLN_BO_READ_ONLY, &ro));
	/* Reading it is fine. */
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->a.out.va, ro.va, 4096));
	bos[0] = ro.handle;
	bos[1] = self->a.out.handle;
	EXPECT_EQ(1, rbln_test_run(self->a.dev, self->a.queue, &self->a.cmd, c.len, bos, 2,
				   10000));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, ro.va + 4096, 1, 4096));
	EXPECT_EQ(-EFAULT, rbln_test_run(self->a.dev, self->a.queue, &self->a.cmd, c.len, bos,
					 2, 10000));
	snprintf(want, sizeof(want), "write-protected %#" PRIx64, ro.va + 4096);
	EXPECT_STREQ(want, fault_of(&self->a, fault, sizeof(fault)));
	EXPECT_EQ(1, ctx_check(&self->b, 3));
}

TEST_F(recovery, host_object_not_listed_faults)
{
	struct rbln_test_buf hidden;
	struct rbln_drm_cmd c;

	/* Mapped in the context, but never listed in a job: not bound. */
	ASSERT_EQ(0, rbln_test_buf_new(self->a.dev, 4096, RBLN_BO_HOST, 0, &hidden));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->a.out.va, hidden.va, 64));
	EXPECT_EQ(-EFAULT, ctx_run(&self->a, c.len));
	rbln_test_buf_free(self->a.dev, &hidden);
}

TEST_F(recovery, illegal_opcode_faults)
{
	uint32_t pkt[2] = { RBLN_PKT_HEADER(0x7f, 0, 0, 1), 0 };
	char want[64], fault[64];

	EXPECT_EQ(-EFAULT, ctx_run_raw(&self->a, pkt, sizeof(pkt)));
	snprintf(want, sizeof(want), "illegal-opcode %#" PRIx64, self->a.cmd.va);
	EXPECT_STREQ(want, fault_of(&self->a, fault, sizeof(fault)));
	EXPECT_EQ(1, ctx_check(&self->b, 4));
}

/* Each case spoils one packet in its own context (a fault bans it). */
TEST(malformed_packets_fault)
{
	static const char *const what[] = {
		"nop reserved", "length past the end", "packet past the end",
		"dtype on dma", "unaligned fill", "unknown dtype", "unknown unary op",
		"scalar wider than its dtype",
	};
	unsigned int i;

	for (i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		struct rbln_drm_cmd c;
		uint32_t *pkt, len;
		struct ctx x;

		ASSERT_EQ(0, ctx_open(&x, 0));
		rbln_drm_cmd_init(&c, x.cmd.cpu, x.cmd.size);
		pkt = x.cmd.cpu;
		switch (i) {
		case 0:
			rbln_drm_cmd_nop(&c);
			pkt[1] = 1;
			break;
		case 1:
			rbln_drm_cmd_nop(&c);
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_NOP, 0, 0, 2);
			break;
		case 2:
			rbln_drm_cmd_dma_copy(&c, x.mem.va, x.mem.va + 4096, 64);
			c.len = 16;
			break;
		case 3:
			rbln_drm_cmd_dma_copy(&c, x.mem.va, x.mem.va + 4096, 64);
			pkt[0] |= RBLN_DTYPE_F16 << 8;
			break;
		case 4:
			rbln_drm_cmd_dma_fill(&c, x.mem.va + 2, 0, 4);
			break;
		case 5:
			rbln_drm_cmd_unary(&c, RBLN_UNARY_NEG, RBLN_DTYPE_F32, x.mem.va,
					   x.mem.va, 4);
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_EW_UNARY, 9, 0, 4);
			break;
		case 6:
			rbln_drm_cmd_unary(&c, RBLN_UNARY_NEG, RBLN_DTYPE_F32, x.mem.va,
					   x.mem.va, 4);
			pkt[0] = RBLN_PKT_HEADER(RBLN_OP_EW_UNARY, 0, 5, 4);
			break;
		case 7:
			rbln_drm_cmd_scalar(&c, RBLN_BINARY_ADD, RBLN_DTYPE_I8, x.mem.va,
					    x.mem.va, 0x100, 4);
			break;
		}
		len = c.len;
		EXPECT_EQ(-EFAULT, ctx_run(&x, len)) TH_LOG("%s", what[i]);
		ctx_close(&x);
	}
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_F(recovery, jobs_behind_a_fault_are_canceled)
{
	struct drm_rbln_sync sig[3] = { 0 };
	uint32_t bos[2] = { self->a.mem.handle, self->a.cmd.handle }, i;
	struct rbln_drm_cmd c;
	uint64_t failed = 7;
	int status;

	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, inject(rbln_test_dev_name(0), "hang"));
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	/* The first job hangs until the timeout, so the fault comes after. */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(self->a.dev), 0, &sig[i].handle));
		if (i == 1)
			ASSERT_EQ(0, inject(rbln_test_dev_name(0), "fault"));
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
					     bos, 2, NULL, 0, &sig[i]));
	}
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, drmSyncobjWait(rbln_drm_fd(self->a.dev), &sig[i].handle, 1,
					    rbln_test_deadline_ns(10000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[0].handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[1].handle, 0, &status));
	EXPECT_EQ(-EFAULT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[2].handle, 0, &status));
	EXPECT_EQ(-ECANCELED, status);
	EXPECT_EQ(1, ctx_check(&self->b, 5));
	/* Each failure counted for its own file, and only there. */
	EXPECT_EQ(0, rbln_drm_get_param(self->a.dev, RBLN_PARAM_FAILED_JOBS, &failed));
	EXPECT_EQ(3, failed);
	EXPECT_EQ(0, rbln_drm_get_param(self->b.dev, RBLN_PARAM_FAILED_JOBS, &failed));
	EXPECT_EQ(0, failed);
}

/*
 * A fault read before a reset. The driver's slow_fault hook holds the
 * interrupt handler between reading the first job's fault and
 * acknowledging it, for twice the job timeout: the job times out
 * meanwhile, its ring is reset, and the job behind it, which faults too,
 * runs again and faults. Acknowledged as the first, that second fault
 * would let its job complete as if it had not faulted.
 */
TEST_F(recovery, fault_read_before_a_reset_is_not_acknowledged_after)
{
	long long resets = rbln_test_attr(0, "reset_count");
	uint32_t bos[2] = { self->a.mem.handle, self->a.out.handle }, i;
	int fd = rbln_drm_fd(self->a.dev), status;
	struct drm_rbln_sync sig[2] = { 0 };
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->a.out.va, 0x10000000ull, 64));
	ASSERT_EQ(0, inject(rbln_test_dev_name(0), "slow_fault"));
	/* One queue: the second job waits on the same ring behind the first. */
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig[i].handle));
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
					     bos, 2, NULL, 0, &sig[i]));
	}
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, drmSyncobjWait(fd, &sig[i].handle, 1, rbln_test_deadline_ns(10000),
					    0, NULL));
	EXPECT_GT(rbln_test_attr(0, "reset_count"), resets);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[0].handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[1].handle, 0, &status));
	EXPECT_EQ(-EFAULT, status);
	EXPECT_EQ(-1000 - ECANCELED, ctx_check(&self->a, 1));
	EXPECT_EQ(1, ctx_check(&self->b, 0x600d));
}

/*
 * 32 jobs of 4 x 32 MiB written each on one queue: together far longer
 * than job_timeout_ms, each well within it. Completions are moderated, but
 * never held back long enough for a finished job to look hung.
 */
TEST_F(recovery, long_jobs_in_a_row_do_not_time_out)
{
	long long resets = rbln_test_attr(0, "reset_count");
	uint32_t bos[2] = { 0, self->a.cmd.handle }, i;
	int fd = rbln_drm_fd(self->a.dev), status;
	struct drm_rbln_sync sig[32] = { 0 };
	struct rbln_test_buf big;
	struct rbln_drm_cmd c;

	ASSERT_EQ(0, rbln_test_buf_new(self->a.dev, 32 * MIB, RBLN_BO_HOST, 0, &big));
	/* Its pages allocated first: each job then stays well within the timeout. */
	memset(big.cpu, 0, big.size);
	bos[0] = big.handle;
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, 256);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, big.va, i, 32 * MIB));
	for (i = 0; i < 32; i++) {
		ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig[i].handle));
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
					     bos, 2, NULL, 0, &sig[i]));
	}
	for (i = 0; i < 32; i++) {
		ASSERT_EQ(0, drmSyncobjWait(fd, &sig[i].handle, 1, rbln_test_deadline_ns(60000), 0,
					    NULL));
		ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig[i].handle, 0, &status));
		EXPECT_EQ(1, status) TH_LOG("job %u", i);
		drmSyncobjDestroy(fd, sig[i].handle);
	}
	EXPECT_EQ(resets, rbln_test_attr(0, "reset_count"));
	rbln_test_buf_free(self->a.dev, &big);
}

static int uevent_socket(void)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);

	if (s >= 0 && bind(s, (struct sockaddr *)&addr, sizeof(addr))) {
		close(s);
		return -1;
	}
	return s;
}

/* True when a uevent with RESET=1 arrives within @ms. */
static int saw_reset_uevent(int s, int ms)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	char buf[2048];
	ssize_t n, off;

	while (poll(&p, 1, ms) == 1) {
		n = recv(s, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return 0;
		buf[n] = '\0';
		for (off = 0; off < n; off += strlen(buf + off) + 1)
			if (!strcmp(buf + off, "RESET=1"))
				return 1;
	}
	return 0;
}

TEST_F(recovery, hang_times_out_and_resets_the_ring)
{
	long long resets = rbln_test_attr(0, "reset_count");
	struct rbln_drm_cmd c;
	uint64_t param;
	int s;

	s = uevent_socket();
	ASSERT_GE(s, 0);
	ASSERT_EQ(0, inject(rbln_test_dev_name(0), "hang"));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	EXPECT_EQ(-ETIMEDOUT, ctx_run(&self->a, c.len));
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	ASSERT_EQ(0, rbln_drm_get_param(self->a.dev, RBLN_PARAM_RESET_COUNT, &param));
	EXPECT_EQ(resets + 1, (long long)param);
	EXPECT_TRUE(saw_reset_uevent(s, 2000));
	close(s);
	/* A hang is not the context's fault: it goes on, and so do others. */
	EXPECT_EQ(1, ctx_check(&self->a, 6));
	EXPECT_EQ(1, ctx_check(&self->b, 7));
}

/*
 * A job's timeout runs from when it reached the head of its ring, however
 * many jobs start behind it. The scheduler re-arms its timer each time one
 * does: a file that kept submitting behind its own hung job would keep
 * the ring, and every other file's jobs on it, stalled for as long as it
 * went on. Here a NOP goes in behind a hang every 0.6 job timeouts, up to
 * 5 times (a timeout then comes 4 timeouts in); the hang must end within
 * 2.5.
 */
TEST_F(recovery, jobs_behind_a_hang_do_not_put_off_its_timeout)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/job_timeout_ms");
	long long resets = rbln_test_attr(0, "reset_count");
	int fd = rbln_drm_fd(self->a.dev), status;
	struct drm_rbln_sync hung = { 0 };
	unsigned int i, nops = 0;
	int64_t t0, ended = 0;
	struct rbln_drm_cmd c;

	ASSERT_GT(timeout_ms, 0);
	t0 = rbln_test_now_ms();
	ASSERT_EQ(0, rbln_test_submit_hung_nop(self->a.dev, self->a.queue, &self->a.cmd,
					       rbln_test_dev_name(0), &hung));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	for (i = 1; i <= 5; i++) {
		int64_t until = t0 + i * timeout_ms * 6 / 10;

		if (!drmSyncobjWait(fd, &hung.handle, 1, until * 1000000, 0, NULL)) {
			ended = rbln_test_now_ms();
			break;
		}
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
					     &self->a.cmd.handle, 1, NULL, 0, NULL));
		nops++;
	}
	if (!ended) {
		ASSERT_EQ(0, drmSyncobjWait(fd, &hung.handle, 1, rbln_test_deadline_ns(60000), 0,
					    NULL));
		ended = rbln_test_now_ms();
	}
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	EXPECT_LT(ended - t0, timeout_ms * 5 / 2)
		TH_LOG("the hang ended %lld ms in, with %u NOPs behind it; job timeout %lld ms",
		       (long long)(ended - t0), nops, timeout_ms);
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	drmSyncobjDestroy(fd, hung.handle);
	/* The NOPs behind it were innocent: they ran after the reset. */
	EXPECT_EQ(1, ctx_check(&self->a, 8));
}

/* A context's check job, run on a thread of its own, and how long it took. */
struct timed_check {
	struct ctx *x;
	int ret;
	long long ms;
};

static void *timed_check(void *arg)
{
	struct timed_check *c = arg;
	int64_t t = rbln_test_now_ms();

	c->ret = ctx_check(c->x, 10);
	c->ms = rbln_test_now_ms() - t;
	return NULL;
}

/*
 * A job that completes as it times out. The driver's slow_signal hook
 * holds whoever signals the job's fence for twice the job timeout, after
 * the fence reads signaled and before the scheduler's callback, which
 * reads the job, has run. The timeout fires in between and finds the job
 * done: no reset and no failure, and the job is not freed under that
 * callback (the debug kernel's KASAN would see it). Meanwhile the hook
 * cannot be armed again.
 */
TEST_F(recovery, job_completing_as_it_times_out)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/job_timeout_ms");
	long long resets = rbln_test_attr(0, "reset_count"), deadline;
	const char *name = rbln_test_dev_name(0);
	struct timed_check check = { .x = &self->a };
	uint64_t failed;
	pthread_t thread;
	int ret;

	ASSERT_GT(timeout_ms, 0);
	ASSERT_EQ(0, inject(name, "slow_signal"));
	ASSERT_EQ(0, pthread_create(&thread, NULL, timed_check, &check));
	/* Armed until the job takes it, then busy until its fence has signaled. */
	deadline = rbln_test_now_ms() + rbln_test_ms(10000);
	do
		ret = inject(name, "slow_signal");
	while (!ret && rbln_test_now_ms() < deadline);
	EXPECT_EQ(-EBUSY, ret);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	EXPECT_EQ(1, check.ret);
	/* The completion did outlive the timeout. */
	EXPECT_GE(check.ms, 2 * timeout_ms);
	EXPECT_EQ(resets, rbln_test_attr(0, "reset_count"));
	EXPECT_EQ(0, rbln_drm_get_param(self->a.dev, RBLN_PARAM_FAILED_JOBS, &failed));
	EXPECT_EQ(0, failed);
	EXPECT_EQ(1, ctx_check(&self->a, 11));
	EXPECT_EQ(1, ctx_check(&self->b, 12));
}

/*
 * Whether process @pid sleeps uninterruptibly ('D' in /proc/PID/stat) in
 * ioctl(@fd, @request) (/proc/PID/syscall): sleeping anywhere else, say
 * paging in its code from the guest's 9p root, it has not reached the wait
 * a kill is meant to land in.
 */
static bool blocked_in_ioctl(pid_t pid, int fd, unsigned long request)
{
	char path[64], buf[512], *p = NULL;
	unsigned long nr, a0, a1;
	bool blocked = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		p = strrchr(buf, ')');
	fclose(f);
	if (!p || strncmp(p, ") D ", 4))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fscanf(f, "%lu %lx %lx", &nr, &a0, &a1) == 3)
		blocked = nr == SYS_ioctl && a0 == (unsigned long)fd && a1 == request;
	fclose(f);
	return blocked;
}

/*
 * Destroying a queue waits until its jobs have left it for the device,
 * unless the task is killed meanwhile: then the jobs still in it end with
 * -ESRCH once what they wait for has signaled, and they are not counted in
 * FAILED_JOBS, since they never ran. Here a child sharing the file
 * destroys a queue whose job waits for a WAIT on another queue, and is
 * killed while it waits. The test moves the WAIT's word so that the
 * device keeps it past the job timeout, and releases it only after the
 * kill: however late the child or this process runs, the kill lands in
 * the wait. The job waits for the WAIT through a timeline point, as for
 * another driver's fence: on the WAIT's own ring, the scheduler would
 * let it go to the device as soon as the WAIT had.
 */
TEST_F(recovery, killed_queue_destroy_drops_waiting_jobs_uncounted)
{
	struct drm_rbln_sync held = { 0 }, dropped = { 0 }, point = { .point = 1 };
	int fd = rbln_drm_fd(self->a.dev), wstatus;
	struct rbln_test_mover mover;
	struct rbln_test_buf word;
	long long deadline;
	struct rbln_drm_cmd c;
	uint32_t queue, bos[2];
	uint64_t failed;
	pid_t pid;

	ASSERT_EQ(0, rbln_test_buf_new(self->a.dev, 4096, RBLN_BO_HOST, 0, &word));
	bos[0] = self->a.cmd.handle;
	bos[1] = word.handle;
	ASSERT_EQ(0, rbln_drm_queue_create(self->a.dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &held.handle));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &dropped.handle));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &point.handle));
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_wait(&c, word.va, UINT64_MAX >> 1));
	ASSERT_EQ(0, rbln_test_mover_start(&mover, word.cpu, rbln_test_ms(50), 0));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
				     bos, 2, NULL, 0, &held));
	ASSERT_EQ(0, drmSyncobjTransfer(fd, point.handle, point.point, held.handle, 0, 0));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, queue, self->a.cmd.va, c.len,
				     bos, 2, &point, 1, &dropped));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		_exit(rbln_drm_queue_destroy(self->a.dev, queue) ? 1 : 0);
	deadline = rbln_test_now_ms() + rbln_test_ms(10000);
	while (!blocked_in_ioctl(pid, fd, DRM_IOCTL_RBLN_QUEUE_DESTROY) &&
	       rbln_test_now_ms() < deadline)
		usleep(1000);
	EXPECT_TRUE(blocked_in_ioctl(pid, fd, DRM_IOCTL_RBLN_QUEUE_DESTROY));
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &wstatus, 0));
	EXPECT_TRUE(WIFSIGNALED(wstatus));
	/* Dropped only once what it waits for has signaled. */
	EXPECT_TRUE(rbln_test_pending(self->a.dev, held.handle));
	EXPECT_TRUE(rbln_test_pending(self->a.dev, dropped.handle));
	rbln_test_mover_stop(&mover);
	__atomic_store_n((uint64_t *)word.cpu, UINT64_MAX >> 1, __ATOMIC_RELEASE);
	EXPECT_EQ(1, rbln_test_sync_status(self->a.dev, held.handle, 20000));
	EXPECT_EQ(-ESRCH, rbln_test_sync_status(self->a.dev, dropped.handle, 20000));
	EXPECT_EQ(0, rbln_drm_get_param(self->a.dev, RBLN_PARAM_FAILED_JOBS, &failed));
	EXPECT_EQ(0, failed);
	/* The child took the queue with it. */
	EXPECT_EQ(-ENOENT, rbln_drm_queue_destroy(self->a.dev, queue));
	drmSyncobjDestroy(fd, held.handle);
	drmSyncobjDestroy(fd, dropped.handle);
	drmSyncobjDestroy(fd, point.handle);
	rbln_test_buf_free(self->a.dev, &word);
	EXPECT_EQ(1, ctx_check(&self->a, 13));
}

TEST_F(recovery, injected_dma_error_and_fault)
{
	EXPECT_EQ(0, inject(rbln_test_dev_name(0), "dma"));
	EXPECT_EQ(-EFAULT, ctx_check(&self->a, 8));
	EXPECT_EQ(0, inject(rbln_test_dev_name(0), "fault"));
	EXPECT_EQ(-EFAULT, ctx_check(&self->b, 9));
	EXPECT_EQ(-EINVAL, inject(rbln_test_dev_name(0), "melt"));
	/* Deaf only where the driver can cut the device off (rbln_pci tests that). */
	if (!rbln_test_on_pci())
		EXPECT_EQ(-EOPNOTSUPP, inject(rbln_test_dev_name(0), "deaf"));
}

/*
 * No host page for device memory written the first time, as under host
 * memory pressure: the emulated NPU does not reclaim, since the device's
 * fences wait for it. The access faults, the job fails and its context is
 * banned; the next first write finds a page.
 */
TEST_F(recovery, no_host_page_for_device_memory_faults)
{
	EXPECT_EQ(0, inject(rbln_test_dev_name(0), "no_page"));
	EXPECT_EQ(-EFAULT, ctx_check(&self->a, 8));
	EXPECT_EQ(-1000 - ECANCELED, ctx_check(&self->a, 8));
	EXPECT_EQ(1, ctx_check(&self->b, 9));
}

/* A NOP that hangs, on @x's queue on the device named @name; @hung gets its fence. */
static int submit_hung_nop(struct ctx *x, const char *name, struct drm_rbln_sync *hung)
{
	return rbln_test_submit_hung_nop(x->dev, x->queue, &x->cmd, name, hung);
}

/*
 * Fills @x's file up to max_jobs unfinished jobs behind a hung one, which
 * holds them all until job_timeout_ms ends it. Its fence is left in @hung.
 * With @fault, the job after it faults. @x is on the device named @name.
 */
static int fill_behind_a_hang(struct ctx *x, const char *name, struct drm_rbln_sync *hung,
			      bool fault)
{
	long long max_jobs = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/max_jobs");
	long long i;
	int ret;

	if (max_jobs < 2 || max_jobs > 64)
		return -ERANGE;	/* the suite runs with a small max_jobs */
	ret = submit_hung_nop(x, name, hung);
	for (i = 1; i < max_jobs && !ret; i++) {
		if (i == 1 && fault)
			ret = inject(name, "fault");
		ret = ret ?: rbln_drm_submit(x->dev, x->queue, x->cmd.va, 8, &x->cmd.handle, 1,
					     NULL, 0, NULL);
	}
	return ret;
}

/*
 * The same for bind jobs: @x's file reserves a MiB at @va, then maps and
 * unmaps it max_jobs times, the first map after @blocker. @va is left
 * unmapped. A bind job gives its room back when the scheduler frees it,
 * some time after its fence has signaled (later still in a busy guest), so
 * the file must have made no bind before: one not yet freed would take the
 * last room and leave the last bind here waiting for @blocker.
 */
static int fill_binds_behind(struct ctx *x, const struct drm_rbln_sync *blocker, uint64_t *va)
{
	long long max_jobs = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/max_jobs");
	long long i;
	int ret;

	if (max_jobs < 2 || max_jobs > 64 || max_jobs % 2)
		return -ERANGE;	/* the suite runs with a small, even max_jobs */
	ret = rbln_drm_vm_reserve(x->dev, MIB, 0, va);
	for (i = 0; i < max_jobs && !ret; i++)
		ret = i % 2 ? rbln_drm_vm_unmap(x->dev, *va, MIB, NULL, 0, NULL) :
			      rbln_drm_vm_map(x->dev, *va, MIB, x->mem.handle, 0, 0,
					      i ? NULL : blocker, !i, NULL);
	return ret;
}

/*
 * A job that runs until the job timeout ends it: the largest command
 * buffer of fills, a hundred GiB and more, longer than any job timeout,
 * scaled (RBLN_TEST_TIMEOUT_SCALE) or not, on any host, even where the
 * device does not slow down with the guest's kernel, as a device model
 * process does not. The fills go to @big; the commands, @len bytes, are
 * in @cmd.
 */
static int long_job_new(struct ctx *x, struct rbln_test_buf *big, struct rbln_test_buf *cmd,
			uint32_t *len)
{
	struct rbln_drm_cmd c;
	uint64_t max_cmd;
	int ret;

	ret = rbln_test_buf_new(x->dev, 16 * MIB, RBLN_BO_DEVICE, 0, big) ?:
	      rbln_drm_get_param(x->dev, RBLN_PARAM_MAX_CMD_SIZE, &max_cmd) ?:
	      rbln_test_buf_new(x->dev, max_cmd, RBLN_BO_HOST, 0, cmd);
	if (ret)
		return ret;
	rbln_drm_cmd_init(&c, cmd->cpu, cmd->size);
	while (!rbln_drm_cmd_dma_fill(&c, big->va, 0x10ad, 16 * MIB))
		;
	*len = c.len;
	return 0;
}

/*
 * A process's job waits for the last of another file's jobs, each of
 * which runs until the job timeout; the process exits. Its exit kills the
 * job, which never reached a ring, and returns within the scheduler's
 * grace and a job timeout or so, not once the other file's jobs are over.
 * It used to wait, uninterruptibly, for every job of the file to be
 * freed, and a killed job is freed only once what it waits for has
 * signaled: another file's queue, long or starved, held the exit (and a
 * close) in D state. The killed job still holds what it uses until then,
 * and gives it back after.
 */
TEST_F(recovery, exit_does_not_wait_for_another_files_jobs)
{
	long long timeout_ms = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/job_timeout_ms");
	struct drm_rbln_sync last = { 0 };
	int fd = rbln_drm_fd(self->b.dev), sync_fd, pipefd[2], status, i;
	struct rbln_test_buf big, longcmd;
	uint32_t bos[2], long_len;
	int64_t t0, exited;
	long long used;
	char ready;
	pid_t pid;

	ASSERT_LT(0, timeout_ms);
	ASSERT_EQ(0, long_job_new(&self->b, &big, &longcmd, &long_len));
	bos[0] = longcmd.handle;
	bos[1] = big.handle;
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &last.handle));
	for (i = 0; i < 16; i++)
		ASSERT_EQ(0, rbln_drm_submit(self->b.dev, self->b.queue, longcmd.va, long_len,
					     bos, 2, NULL, 0, i == 15 ? &last : NULL));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(fd, last.handle, &sync_fd));
	used = rbln_test_mem_used(0);

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct drm_rbln_sync gate = { 0 };
		struct rbln_drm_cmd c;
		struct ctx x = { 0 };
		uint32_t held[3];

		if (ctx_open(&x, 0) ||
		    drmSyncobjCreate(rbln_drm_fd(x.dev), 0, &gate.handle) ||
		    drmSyncobjImportSyncFile(rbln_drm_fd(x.dev), gate.handle, sync_fd))
			_exit(1);
		rbln_drm_cmd_init(&c, x.cmd.cpu, x.cmd.size);
		rbln_drm_cmd_nop(&c);
		held[0] = x.cmd.handle;
		held[1] = x.mem.handle;
		held[2] = x.out.handle;
		if (rbln_drm_submit(x.dev, x.queue, x.cmd.va, c.len, held, 3, &gate, 1, NULL) ||
		    write(pipefd[1], "j", 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &ready, 1)) TH_LOG("the child could not submit");
	close(pipefd[0]);
	t0 = rbln_test_now_ms();
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	exited = rbln_test_now_ms() - t0;
	EXPECT_EQ(0, status);
	/*
	 * drm_sched_entity_flush() gives an exiting process's queue a second,
	 * close one more job timeout: 1.5 s of the 8 s the other file's jobs
	 * take.
	 */
	EXPECT_GT(1000 + 4 * timeout_ms, exited)
		TH_LOG("the exit took %lld ms; the job timeout is %lld ms", (long long)exited,
		       timeout_ms);

	/* The killed job holds the child's memory until the other file's jobs end. */
	EXPECT_EQ(used + MIB, rbln_test_mem_used(0));
	EXPECT_EQ(-ETIMEDOUT, sync_file_wait_status(sync_fd, rbln_test_ms(60000)));
	close(sync_fd);
	EXPECT_EQ(used, rbln_test_mem_used_settles_at(0, used));
	rbln_test_buf_free(self->b.dev, &longcmd);
	rbln_test_buf_free(self->b.dev, &big);
}

/*
 * A file at max_jobs waits in SUBMIT until half its jobs have retired: the
 * next submission returns only after the hung job ahead of them timed out.
 */
TEST_F(recovery, submit_waits_for_room_at_max_jobs)
{
	struct drm_rbln_sync hung = { 0 }, sig = { 0 };
	int fd = rbln_drm_fd(self->a.dev), status;

	ASSERT_EQ(0, fill_behind_a_hang(&self->a, rbln_test_dev_name(0), &hung, false));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, 8,
				     &self->a.cmd.handle, 1, NULL, 0, &sig));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, drmSyncobjWait(fd, &sig.handle, 1, rbln_test_deadline_ns(10000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig.handle, 0, &status));
	EXPECT_EQ(1, status);
	/* The bound is per file: the other file goes on as before. */
	EXPECT_EQ(1, ctx_check(&self->b, 11));
	EXPECT_EQ(1, ctx_check(&self->a, 12));
}

/*
 * Bind jobs have a room of their own, as large: max_jobs binds wait
 * behind long jobs (a bind waits for them, an unmap for every job before
 * it, and binds run in order), and the next one returns only after those
 * timed out. Without the bound, a file could queue binds until the kernel
 * ran out of memory.
 */
TEST_F(recovery, vm_bind_waits_for_room_at_max_jobs)
{
	struct drm_rbln_sync last = { 0 }, sig = { 0 };
	int fd = rbln_drm_fd(self->a.dev), status, i;
	struct rbln_test_buf big, longcmd;
	uint32_t bos[2], long_len;
	struct rbln_drm_cmd c;
	uint64_t va;

	/* A queue runs its jobs in turn: four timeouts for what follows. */
	ASSERT_EQ(0, long_job_new(&self->a, &big, &longcmd, &long_len));
	bos[0] = longcmd.handle;
	bos[1] = big.handle;
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &last.handle));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, longcmd.va, long_len,
					     bos, 2, NULL, 0, i == 3 ? &last : NULL));
	ASSERT_EQ(0, fill_binds_behind(&self->a, &last, &va));
	/* The regular room is another: a job goes in at once. */
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	rbln_drm_cmd_nop(&c);
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, c.len,
				     &self->a.cmd.handle, 1, NULL, 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, last.handle, 0, &status));
	ASSERT_EQ(0, status) TH_LOG("the binds or the job waited for the long jobs");

	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_vm_map(self->a.dev, va, MIB, self->a.mem.handle, 0, 0, NULL, 0,
				     &sig));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, last.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	EXPECT_EQ(1, rbln_test_sync_status(self->a.dev, sig.handle, 10000));
	/* The bound is per file: the other file goes on as before. */
	EXPECT_EQ(1, ctx_check(&self->b, 11));
	rbln_test_buf_free(self->a.dev, &longcmd);
	rbln_test_buf_free(self->a.dev, &big);
}

/* A thread that makes one call which may wait for room: a SUBMIT or a VM_BIND map. */
struct herd {
	struct rbln_drm_device *dev;
	uint32_t queue, cmd;	/* herd_submit(): a NOP at cmd_va */
	uint64_t cmd_va;
	uint32_t bo;		/* herd_map(): a MiB of bo at va */
	uint64_t va;
	pthread_t thread;
	_Atomic pid_t tid;
	_Atomic int ret;	/* 1 until the call returns */
};

static void *herd_submit(void *p)
{
	struct herd *h = p;

	h->tid = gettid();
	h->ret = rbln_drm_submit(h->dev, h->queue, h->cmd_va, 8, &h->cmd, 1, NULL, 0, NULL);
	return NULL;
}

static void *herd_map(void *p)
{
	struct herd *h = p;

	h->tid = gettid();
	h->ret = rbln_drm_vm_map(h->dev, h->va, MIB, h->bo, 0, 0, NULL, 0, NULL);
	return NULL;
}

/* Thread @tid sleeps in the wait for room (rbln_vm_room_get()). */
static bool waits_for_room(pid_t tid)
{
	char path[64], wchan[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(wchan, sizeof(wchan), f))
		wchan[0] = '\0';
	fclose(f);
	return !strcmp(wchan, "rbln_vm_room_get");
}

/* Which of the herd's submitters returned, and which sleep in SUBMIT: bit i each. */
struct herd_state {
	uint64_t returned, asleep;
};

static struct herd_state herd_look(const struct herd *herd, int n)
{
	struct herd_state st = { 0, 0 };
	int i;

	for (i = 0; i < n; i++) {
		if (herd[i].ret != 1)
			st.returned |= 1ull << i;
		else if (herd[i].tid && waits_for_room(herd[i].tid))
			st.asleep |= 1ull << i;
	}
	return st;
}

/*
 * Submitters waiting for room all wake when half the jobs have retired;
 * together they take the room that is left and no more: the file never
 * has more than max_jobs unfinished jobs. Half the file's jobs wait behind
 * two long jobs on one queue, the other half behind two long jobs on a
 * second queue that start when the first queue's are over (a job of
 * seconds ends at the job timeout). 2 * max_jobs threads wait to add to the
 * second queue, so every one they get in stays unfinished, and can be
 * counted, until its long jobs are over too.
 */
TEST_F(recovery, waiters_for_room_take_no_more_than_max_jobs)
{
	long long max_jobs = rbln_sysfs_read_ull(RBLN_MODULE_PARAMS "/max_jobs");
	struct drm_rbln_sync first = { 0 }, hold = { 0 }, drained = { 0 };
	int fd = rbln_drm_fd(self->a.dev), status, n, returned, blocked, i;
	struct herd_state now = { 0, 0 }, before;
	struct rbln_test_buf big, longcmd;
	struct herd herd[64];
	struct rbln_drm_cmd c;
	uint32_t qb, bos[2], long_len;
	int64_t until;

	if (max_jobs < 6 || max_jobs > 32)
		SKIP(return, "needs a small max_jobs (the suite's is %lld)", max_jobs);
	n = 2 * max_jobs;
	ASSERT_EQ(0, rbln_drm_queue_create(self->a.dev, RBLN_QUEUE_PRIORITY_NORMAL, &qb));
	ASSERT_EQ(0, long_job_new(&self->a, &big, &longcmd, &long_len));
	bos[0] = longcmd.handle;
	bos[1] = big.handle;
	rbln_drm_cmd_init(&c, self->a.cmd.cpu, self->a.cmd.size);
	rbln_drm_cmd_nop(&c);
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &first.handle));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &hold.handle));

	/* Queue 1: two long jobs, then short ones: half of max_jobs. */
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, longcmd.va, long_len,
					     bos, 2, NULL, 0, i ? &first : NULL));
	for (; i < max_jobs / 2; i++)
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, 8,
					     &self->a.cmd.handle, 1, NULL, 0, NULL));
	/*
	 * Queue 2: two long jobs after queue 1's, then short ones. The first
	 * one's end frees one slot, which wakes nobody: what the herd got
	 * stays as it is until the second ends.
	 */
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, qb, longcmd.va, long_len, bos, 2,
				     &first, 1, NULL));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, qb, longcmd.va, long_len, bos, 2,
				     NULL, 0, &hold));
	for (i = 2; i < max_jobs - max_jobs / 2; i++)
		ASSERT_EQ(0, rbln_drm_submit(self->a.dev, qb, self->a.cmd.va, 8,
					     &self->a.cmd.handle, 1, NULL, 0, NULL));

	for (i = 0; i < n; i++) {
		herd[i] = (struct herd){ .dev = self->a.dev, .queue = qb,
					 .cmd = self->a.cmd.handle, .cmd_va = self->a.cmd.va,
					 .ret = 1 };
		ASSERT_EQ(0, pthread_create(&herd[i].thread, NULL, herd_submit, &herd[i]));
	}
	/* All of them wait before queue 1 drains, or the count below means less. */
	until = rbln_test_deadline_ns(20000);
	do {
		usleep(1000);
		now = herd_look(herd, n);
	} while (__builtin_popcountll(now.asleep) < n && rbln_test_deadline_ns(0) < until);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, first.handle, 0, &status));
	ASSERT_EQ(0, status) TH_LOG("queue 1 drained before the herd was waiting");
	ASSERT_EQ(n, __builtin_popcountll(now.asleep));

	/*
	 * Queue 1 drains, the herd wakes: max_jobs / 2 get in, not more (the
	 * room) and not fewer (woken, each takes room while there is some);
	 * the others wait again while queue 2's long jobs run.
	 */
	do {
		before = now;
		usleep(rbln_test_ms(10) * 1000);
		now = herd_look(herd, n);
		returned = __builtin_popcountll(now.returned);
		blocked = __builtin_popcountll(now.asleep);
		/*
		 * Settled: each got in or sleeps in SUBMIT, twice alike. A thread
		 * that waits for a lock inside SUBMIT looks asleep there too, but
		 * not for long: its holder returns, and the next look differs.
		 */
		if (returned > max_jobs / 2 ||
		    (returned && returned + blocked == n &&
		     now.returned == before.returned && now.asleep == before.asleep))
			break;
	} while (rbln_test_deadline_ns(0) < until);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, hold.handle, 0, &status));
	EXPECT_EQ(0, status) TH_LOG("queue 2 drained before the herd was counted");
	EXPECT_EQ(max_jobs / 2, returned) TH_LOG("%d of %d waiting submitters got in, %d wait",
						 returned, n, blocked);
	EXPECT_EQ(n - max_jobs / 2, blocked);

	/* Queue 2's long jobs end; everyone gets in, and every job completes. */
	for (i = 0; i < n; i++) {
		pthread_join(herd[i].thread, NULL);
		EXPECT_EQ(0, herd[i].ret);
	}
	ASSERT_EQ(0, drmSyncobjWait(fd, &hold.handle, 1, rbln_test_deadline_ns(20000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, hold.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	/*
	 * The herd's NOPs, behind it on queue 2, read the command buffer
	 * ctx_check() writes: one more NOP there, and once it is done, all are.
	 */
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &drained.handle));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, qb, self->a.cmd.va, 8, &self->a.cmd.handle, 1,
				     NULL, 0, &drained));
	ASSERT_EQ(0, drmSyncobjWait(fd, &drained.handle, 1, rbln_test_deadline_ns(20000), 0,
				    NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, drained.handle, 0, &status));
	EXPECT_EQ(1, status);
	EXPECT_EQ(1, ctx_check(&self->a, 15));
	EXPECT_EQ(1, ctx_check(&self->b, 16));
	rbln_test_buf_free(self->a.dev, &longcmd);
	rbln_test_buf_free(self->a.dev, &big);
}

/* A job ahead faults while a submission waits for room: it is refused. */
TEST_F(recovery, ban_while_waiting_for_room_refuses_the_submission)
{
	struct drm_rbln_sync hung = { 0 };

	ASSERT_EQ(0, fill_behind_a_hang(&self->a, rbln_test_dev_name(0), &hung, true));
	EXPECT_EQ(-ECANCELED, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, 8,
					      &self->a.cmd.handle, 1, NULL, 0, NULL));
	EXPECT_EQ(1, ctx_check(&self->b, 14));
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal ends the wait for room; the submission queued nothing. */
TEST_F(recovery, waiting_for_room_is_interruptible)
{
	struct itimerval tick = { { 0, 10000 }, { 0, 10000 } }, off = { 0 };
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct drm_rbln_sync hung = { 0 }, sig = { 0 };
	struct drm_rbln_submit args = {
		.queue_id = self->a.queue,
		.cmd_va = self->a.cmd.va,
		.cmd_size = 8,
		.bo_count = 1,
		.bo_handles = (uintptr_t)&self->a.cmd.handle,
	};
	int fd = rbln_drm_fd(self->a.dev), ret, err, status;

	ASSERT_EQ(0, fill_behind_a_hang(&self->a, rbln_test_dev_name(0), &hung, false));
	/* No SA_RESTART, and ioctl() rather than libdrm's, which retries. */
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, &old));
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &tick, NULL));
	ret = ioctl(fd, DRM_IOCTL_RBLN_SUBMIT, &args);
	err = errno;
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EINTR, err);
	/* Submitted again, it waits its turn; the queue runs it last. */
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_submit(self->a.dev, self->a.queue, self->a.cmd.va, 8,
				     &self->a.cmd.handle, 1, NULL, 0, &sig));
	ASSERT_EQ(0, drmSyncobjWait(fd, &sig.handle, 1, rbln_test_deadline_ns(10000), 0, NULL));
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, hung.handle, 0, &status));
	EXPECT_EQ(-ETIMEDOUT, status);
	ASSERT_EQ(0, rbln_drm_fence_status(self->a.dev, sig.handle, 0, &status));
	EXPECT_EQ(1, status);
	EXPECT_EQ(1, ctx_check(&self->a, 13));
}

/*
 * The device that goes: a fresh emulated one, or on PCI the last function
 * (rbln_test.h). The other: device 0, or when that is the one that goes, a
 * fresh emulated device.
 */
static int hot_open(struct rbln_test_victim *vic, struct ctx *gone, struct ctx *other,
		    int *other_added)
{
	return rbln_test_victim_get(vic, HOT_ID, 16) ?:
	       rbln_test_victim_open(vic, &gone->dev) ?: ctx_setup(gone) ?:
	       rbln_test_bystander_open(vic, HOT_ID + 1, &other->dev, other_added) ?:
	       ctx_setup(other);
}

static int hot_close(struct rbln_test_victim *vic, struct ctx *other, int other_added)
{
	ctx_close(other);
	if (other_added && rbln_emu_del(HOT_ID + 1))
		return -EIO;
	return rbln_test_victim_restore(vic);
}

/*
 * Removes a device while four jobs are in flight on it, the first hung by
 * the device after the driver hooks @hooks (debugfs inject words) were
 * armed.
 */
static void unplug_with_jobs_in_flight(struct __test_metadata *_metadata,
				       const char *const *hooks, unsigned int n)
{
	struct drm_rbln_sync sig = { 0 };
	int fd, sync_fd[4], status, added = 0;
	struct rbln_test_victim vic;
	struct ctx gone, other;
	struct rbln_drm_cmd c;
	uint32_t bos[2], i;

	ASSERT_EQ(0, hot_open(&vic, &gone, &other, &added));
	fd = rbln_drm_fd(gone.dev);
	rbln_drm_cmd_init(&c, gone.cmd.cpu, gone.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, gone.mem.va, 1, MIB));
	bos[0] = gone.mem.handle;
	bos[1] = gone.cmd.handle;
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, inject(vic.name, hooks[i]));
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig.handle));
	/* Sync files outlive the device node: they tell how the jobs ended. */
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, rbln_drm_submit(gone.dev, gone.queue, gone.cmd.va, c.len, bos, 2,
					     NULL, 0, &sig));
		ASSERT_EQ(0, drmSyncobjExportSyncFile(fd, sig.handle, &sync_fd[i]));
	}

	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	/* Every fence signals with ENODEV: none is left to a timeout. */
	for (i = 0; i < 4; i++) {
		status = sync_file_wait_status(sync_fd[i], 10000);
		EXPECT_EQ(-ENODEV, status) TH_LOG("job %u", i);
		close(sync_fd[i]);
	}
	EXPECT_EQ(-ENODEV, rbln_drm_submit(gone.dev, gone.queue, gone.cmd.va, c.len, bos, 2,
					   NULL, 0, NULL));
	EXPECT_EQ(-ENODEV, rbln_drm_queue_create(gone.dev, 0, &i));
	ctx_close(&gone);
	EXPECT_EQ(1, ctx_check(&other, 10));
	ASSERT_EQ(0, hot_close(&vic, &other, added));
}

TEST(hot_unplug_with_jobs_in_flight)
{
	static const char *const hooks[] = { "hang" };

	unplug_with_jobs_in_flight(_metadata, hooks, 1);
}

/*
 * The same with the hung job's doorbell deferred by slow_signal: the
 * removal fails its fence, and so signals it slowly itself.
 */
TEST(hot_unplug_with_a_slow_signal_job_in_flight)
{
	static const char *const hooks[] = { "hang", "slow_signal" };

	unplug_with_jobs_in_flight(_metadata, hooks, 2);
}

static void *submit_nop(void *arg)
{
	struct ctx *x = arg;

	return (void *)(intptr_t)rbln_drm_submit(x->dev, x->queue, x->cmd.va, 8, &x->cmd.handle,
						 1, NULL, 0, NULL);
}

/* Removal ends a wait for room: the submission fails like any after it. */
TEST(hot_unplug_while_waiting_for_room)
{
	struct drm_rbln_sync hung = { 0 };
	struct rbln_test_victim vic;
	struct ctx gone, other;
	int added = 0;
	void *ret;
	pthread_t t;

	ASSERT_EQ(0, hot_open(&vic, &gone, &other, &added));
	ASSERT_EQ(0, fill_behind_a_hang(&gone, vic.name, &hung, false));
	ASSERT_EQ(0, pthread_create(&t, NULL, submit_nop, &gone));
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	ASSERT_EQ(0, pthread_join(t, &ret));
	EXPECT_EQ(-ENODEV, (int)(intptr_t)ret);
	ctx_close(&gone);
	EXPECT_EQ(1, ctx_check(&other, 15));
	ASSERT_EQ(0, hot_close(&vic, &other, added));
}

/*
 * Removal ends a wait for bind room too, and the bind fails as a SUBMIT
 * does. It used to go on once the removal had freed the jobs before it,
 * and return 0 for an unbind on a device that was gone.
 */
TEST(hot_unplug_while_a_bind_waits_for_room)
{
	struct drm_rbln_sync hung = { 0 };
	struct rbln_test_victim vic;
	struct ctx gone, other;
	struct herd b;
	int64_t deadline;
	int added = 0;
	uint64_t va;

	ASSERT_EQ(0, hot_open(&vic, &gone, &other, &added));
	ASSERT_EQ(0, submit_hung_nop(&gone, vic.name, &hung));
	ASSERT_EQ(0, fill_binds_behind(&gone, &hung, &va));
	b = (struct herd){ .dev = gone.dev, .bo = gone.mem.handle, .va = va, .ret = 1 };
	ASSERT_EQ(0, pthread_create(&b.thread, NULL, herd_map, &b));
	deadline = rbln_test_now_ms() + rbln_test_ms(10000);
	while (!(b.tid && waits_for_room(b.tid)) && b.ret == 1 && rbln_test_now_ms() < deadline)
		usleep(1000);
	EXPECT_TRUE(waits_for_room(b.tid));
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	ASSERT_EQ(0, pthread_join(b.thread, NULL));
	EXPECT_EQ(-ENODEV, b.ret);
	ctx_close(&gone);
	EXPECT_EQ(1, ctx_check(&other, 16));
	ASSERT_EQ(0, hot_close(&vic, &other, added));
}

/*
 * A job freed after its file has closed, on a removed device, holds the
 * last reference to its context, and so to the DRM device, whose release
 * tears down the scheduler whose work is freeing the job. "slow_free"
 * keeps the next job's context a second past the rest of it, while the
 * test removes the device and closes the file. The release used to wait
 * for itself there: the device was never released, and rbln.ko never
 * unloaded after the test (rbln-vm fails such a run).
 */
static void close_before_removed_device_frees(struct __test_metadata *_metadata,
					     bool bind)
{
	struct rbln_test_victim vic;
	struct ctx gone, other;
	struct rbln_drm_cmd c;
	int added = 0;
	uint64_t va;

	ASSERT_EQ(0, hot_open(&vic, &gone, &other, &added));
	ASSERT_EQ(0, inject(vic.name, "slow_free"));
	if (bind) {
		ASSERT_EQ(0, rbln_drm_vm_reserve(gone.dev, MIB, 0, &va));
		ASSERT_EQ(0, rbln_test_vm_map(gone.dev, va, MIB, gone.mem.handle, 0, 0));
	} else {
		rbln_drm_cmd_init(&c, gone.cmd.cpu, gone.cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
		ASSERT_EQ(1, rbln_test_run(gone.dev, gone.queue, &gone.cmd, c.len, NULL, 0,
					   10000));
	}
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	ctx_close(&gone);
	EXPECT_EQ(1, ctx_check(&other, 10));
	ASSERT_EQ(0, hot_close(&vic, &other, added));
}

TEST(close_before_a_removed_device_frees_a_job)
{
	close_before_removed_device_frees(_metadata, false);
}

TEST(close_before_a_removed_device_frees_a_bind_job)
{
	close_before_removed_device_frees(_metadata, true);
}

/* The names SYNC_IOC_FILE_INFO gives for the one fence of sync_file @fd. */
static int sync_file_names(int fd, struct sync_fence_info *fence)
{
	struct sync_file_info info = {
		.num_fences = 1,
		.sync_fence_info = (uintptr_t)fence,
	};

	memset(fence, 0, sizeof(*fence));
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	return info.num_fences == 1 && info.status == 1 ? 0 : -EINVAL;
}

/*
 * A job's fence outlives its device: a sync_file kept past the device's
 * removal, when nothing else holds the device, still names its timeline.
 * drm_sched's fences read the name from their scheduler, which went with
 * the device: SYNC_IOC_FILE_INFO read freed memory (KASAN reports it on
 * the debug kernel). The fences of a job and of a bind job both.
 */
TEST(sync_files_outlive_their_device)
{
	static const char *const timeline[] = { "rbln", "rbln-bind" };
	struct drm_rbln_sync sig = { 0 };
	struct rbln_test_victim vic;
	struct sync_fence_info fence;
	struct ctx gone, other;
	struct rbln_drm_cmd c;
	int fd, sync_fd[2], added = 0;
	uint64_t va;
	unsigned int i;

	ASSERT_EQ(0, hot_open(&vic, &gone, &other, &added));
	fd = rbln_drm_fd(gone.dev);
	ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &sig.handle));
	rbln_drm_cmd_init(&c, gone.cmd.cpu, gone.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, rbln_drm_submit(gone.dev, gone.queue, gone.cmd.va, c.len, &gone.cmd.handle,
				     1, NULL, 0, &sig));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(fd, sig.handle, &sync_fd[0]));
	ASSERT_EQ(0, rbln_drm_vm_reserve(gone.dev, MIB, 0, &va));
	ASSERT_EQ(0, rbln_drm_vm_map(gone.dev, va, MIB, gone.mem.handle, 0, 0, NULL, 0, &sig));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(fd, sig.handle, &sync_fd[1]));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(1, sync_file_wait_status(sync_fd[i], 10000));
	ctx_close(&gone);
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));

	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, sync_file_names(sync_fd[i], &fence));
		EXPECT_STREQ(timeline[i], fence.obj_name);
		EXPECT_STREQ("drm_sched", fence.driver_name);
		close(sync_fd[i]);
	}
	EXPECT_EQ(1, ctx_check(&other, 10));
	ASSERT_EQ(0, hot_close(&vic, &other, added));
}

TEST(close_with_a_hung_job)
{
	struct drm_rbln_sync sig = { 0 };
	struct rbln_drm_cmd c;
	int sync_fd;
	struct ctx x;

	ASSERT_EQ(0, ctx_open(&x, 0));
	ASSERT_EQ(0, inject(rbln_test_dev_name(0), "hang"));
	rbln_drm_cmd_init(&c, x.cmd.cpu, x.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(x.dev), 0, &sig.handle));
	ASSERT_EQ(0, rbln_drm_submit(x.dev, x.queue, x.cmd.va, c.len, &x.cmd.handle, 1, NULL, 0,
				     &sig));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(x.dev), sig.handle, &sync_fd));
	/* Closing waits for the context's jobs: the timeout ends this one. */
	ctx_close(&x);
	EXPECT_EQ(-ETIMEDOUT, sync_file_wait_status(sync_fd, 0));
	close(sync_fd);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST_HARNESS_MAIN
