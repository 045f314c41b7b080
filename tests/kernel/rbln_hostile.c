// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_hostile - what a hostile or unlucky caller does: lookups out of
 * range, memory closed under a running job, jobs that outlive their
 * timeout, peers whose exporter is replaced, packets that never end,
 * files opened by the thousand, WAIT packets parked on a ring while
 * their file closes, their word goes, the ring resets or the device does,
 * and WAITs whose word the host keeps moving past the job timeout
 *
 * Each test is the reproduction of a finding of a review of the driver.
 * Most of them do not fail by an assertion on the old driver but by what
 * the guest kernel prints: run with page_poison=1 (rbln-vm does), so a
 * write into a freed page is reported on its next allocation.
 *
 * Run with emu_devices=2, emu_mem_mib=64, job_timeout_ms=500 and
 * wait_timeout_ms=3000, or with two PCI NPUs of 4 GiB instead of the
 * emulated devices.
 */

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define MIB		(1u << 20)
#define VA_END		(1ull << 47)
#define FRESH_ID	17

/* A file with a queue and a command buffer of @cmd_bytes. */
struct file {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd;
};

/* The queue and command buffer of @f, whose device is open. */
static int file_setup(struct file *f, uint64_t cmd_bytes)
{
	return rbln_drm_queue_create(f->dev, RBLN_QUEUE_PRIORITY_NORMAL, &f->queue) ?:
	       rbln_test_buf_new(f->dev, cmd_bytes, RBLN_BO_HOST, 0, &f->cmd);
}

/* @f on initial device @id. */
static int file_open(struct file *f, unsigned int id, uint64_t cmd_bytes)
{
	return rbln_test_open(id, &f->dev) ?: file_setup(f, cmd_bytes);
}

/* @f on the device a test removes (rbln_test.h). */
static int file_open_victim(struct file *f, const struct rbln_test_victim *vic,
			    uint64_t cmd_bytes)
{
	return rbln_test_victim_open(vic, &f->dev) ?: file_setup(f, cmd_bytes);
}

static void file_close(struct file *f)
{
	rbln_test_buf_free(f->dev, &f->cmd);
	rbln_drm_close(f->dev);
}

/* Submits [@off, @end) of @f's command buffer on @queue, with @bos and the buffer. */
static int submit_at(struct file *f, uint32_t queue, uint32_t off, uint32_t end,
		     const uint32_t *bos, uint32_t n, uint32_t *syncobj)
{
	struct drm_rbln_sync signal = { 0 };
	uint32_t all[8], i;
	int ret;

	for (i = 0; i < n; i++)
		all[i] = bos[i];
	all[n] = f->cmd.handle;
	if (drmSyncobjCreate(rbln_drm_fd(f->dev), 0, &signal.handle))
		return -errno;
	ret = rbln_drm_submit(f->dev, queue, f->cmd.va + off, end - off, all, n + 1, NULL, 0,
			      &signal);
	if (ret)
		drmSyncobjDestroy(rbln_drm_fd(f->dev), signal.handle);
	*syncobj = signal.handle;
	return ret;
}

/* Submits @len bytes of @f's command buffer with @bos and the buffer itself. */
static int file_submit(struct file *f, uint32_t len, const uint32_t *bos, uint32_t n,
		       uint32_t *syncobj)
{
	return submit_at(f, f->queue, 0, len, bos, n, syncobj);
}

/* Waits up to @ms for @syncobj and destroys it: 1, the job's -errno, or 0. */
static int file_wait(struct file *f, uint32_t syncobj, int ms)
{
	int status = rbln_test_sync_status(f->dev, syncobj, ms);

	drmSyncobjDestroy(rbln_drm_fd(f->dev), syncobj);
	return status;
}

/* As many DMA_FILL packets of @bytes at @va as the command buffer holds. */
static uint32_t fill_many(struct file *f, uint64_t va, uint64_t bytes, uint32_t max)
{
	struct rbln_drm_cmd c;
	uint32_t n = 0;

	rbln_drm_cmd_init(&c, f->cmd.cpu, f->cmd.size);
	while (n < max && !rbln_drm_cmd_dma_fill(&c, va, 0xdead0000 + n, bytes))
		n++;
	return c.len;
}

/*
 * As fill_many(), with element-wise adds of one to every i32 word, in
 * place: the executor works on the memory itself, not through copies.
 */
static uint32_t add_many(struct file *f, uint64_t va, uint64_t bytes, uint32_t max)
{
	struct rbln_drm_cmd c;
	uint32_t n = 0;

	rbln_drm_cmd_init(&c, f->cmd.cpu, f->cmd.size);
	while (n < max && !rbln_drm_cmd_scalar(&c, RBLN_BINARY_ADD, RBLN_DTYPE_I32, va, va, 1,
					       bytes / 4))
		n++;
	return c.len;
}

/*
 * Finding 1: the lookup walked the address space's node list from a node
 * that is not a mapping when the address was past its end.
 */
TEST(bo_info_by_va_outside_the_address_space)
{
	static const uint64_t vas[] = {
		0, 4096, (1ull << 32) - 1, VA_END, VA_END + 4096, 1ull << 48, 1ull << 63,
		UINT64_MAX - 4096, UINT64_MAX,
	};
	struct rbln_drm_bo_info info;
	struct rbln_drm_device *dev;
	struct rbln_test_buf b;
	unsigned int i;

	ASSERT_EQ(0, rbln_test_open(0, &dev));
	for (i = 0; i < sizeof(vas) / sizeof(vas[0]); i++) {
		EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(dev, vas[i], &info))
			TH_LOG("va %#llx, empty space", (unsigned long long)vas[i]);
	}
	ASSERT_EQ(0, rbln_test_buf_new(dev, 4096, RBLN_BO_DEVICE, 0, &b));
	for (i = 0; i < sizeof(vas) / sizeof(vas[0]); i++) {
		EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(dev, vas[i], &info))
			TH_LOG("va %#llx", (unsigned long long)vas[i]);
	}
	/* Its guard page is no part of it; its last byte is. */
	EXPECT_EQ(-ENOENT, rbln_drm_bo_info_by_va(dev, b.va + 4096, &info));
	EXPECT_EQ(0, rbln_drm_bo_info_by_va(dev, b.va + 4095, &info));
	EXPECT_EQ(b.handle, info.handle);
	rbln_test_buf_free(dev, &b);
	rbln_drm_close(dev);
}

/*
 * Finding 2: a job writes an object it did not list; its owner closes the
 * handle while the job runs. The object's memory must not be freed while
 * the device may still write it: the job faults instead. @placement HOST
 * objects stay bound from an earlier job that did list them.
 */
static void close_under_a_running_job(struct __test_metadata *_metadata, uint32_t placement,
				      uint32_t (*work)(struct file *f, uint64_t va,
						       uint64_t bytes, uint32_t max))
{
	unsigned int i, done = 0, faulted = 0;
	struct file f;

	ASSERT_EQ(0, file_open(&f, 0, 256 * 1024));
	for (i = 0; i < 40; i++) {
		struct rbln_test_buf victim;
		uint32_t sync, len;
		int status;

		ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, placement, 0, &victim));
		if (placement == RBLN_BO_HOST) {
			len = fill_many(&f, victim.va, 4096, 1);
			ASSERT_EQ(0, file_submit(&f, len, &victim.handle, 1, &sync));
			ASSERT_EQ(1, file_wait(&f, sync, 10000));
		}
		len = work(&f, victim.va, 4096, 10000);
		ASSERT_EQ(0, file_submit(&f, len, NULL, 0, &sync));
		/* A little later each time: the close lands at every point of the job. */
		usleep(i * 250);
		rbln_test_buf_free(f.dev, &victim);
		status = file_wait(&f, sync, 10000);
		if (status == 1) {
			done++;
			continue;
		}
		/* A fault bans the file's context: the next round needs a new one. */
		EXPECT_EQ(-EFAULT, status);
		faulted++;
		file_close(&f);
		ASSERT_EQ(0, file_open(&f, 0, 256 * 1024));
	}
	TH_LOG("%u jobs ended before the close, %u faulted after it", done, faulted);
	file_close(&f);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

TEST(close_device_object_under_a_running_job)
{
	close_under_a_running_job(_metadata, RBLN_BO_DEVICE, fill_many);
}

TEST(close_bound_host_object_under_a_running_job)
{
	close_under_a_running_job(_metadata, RBLN_BO_HOST, fill_many);
}

/* The same with arithmetic, which writes device and host memory in place. */
TEST(close_device_object_under_an_elementwise_job)
{
	close_under_a_running_job(_metadata, RBLN_BO_DEVICE, add_many);
}

TEST(close_bound_host_object_under_an_elementwise_job)
{
	close_under_a_running_job(_metadata, RBLN_BO_HOST, add_many);
}

/* The offset of the first nonzero word of @buf, plus one; 0 if none. */
static size_t first_nonzero(const void *buf, size_t bytes)
{
	const uint32_t *w = buf;
	size_t i;

	for (i = 0; i < bytes / 4; i++)
		if (w[i])
			return i * 4 + 1;
	return 0;
}

/*
 * Finding 3: a job that times out must stop before what it uses is
 * released. Its memory is freed the moment its fence says so, and a file
 * opened next, which may get the same context, must see none of its
 * writes; jobs of another file queued behind it run, exactly once.
 */
TEST(timed_out_job_stops_before_its_memory_goes)
{
	struct rbln_test_buf big, later, theirs;
	uint32_t sync, sync_b[8], len, i, n;
	struct file a, b, c;
	struct rbln_drm_cmd cmd;
	uint32_t *p;

	ASSERT_EQ(0, file_open(&a, 0, 64 * 1024));
	ASSERT_EQ(0, file_open(&b, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_test_buf_new(a.dev, 32 * MIB, RBLN_BO_HOST, 0, &big));
	/* Seconds of work where the timeout is half a second. */
	len = fill_many(&a, big.va, 32 * MIB, 2000);
	ASSERT_EQ(0, file_submit(&a, len, &big.handle, 1, &sync));
	/* Another file's small jobs, each adding one to a counter. */
	ASSERT_EQ(0, rbln_test_buf_new(b.dev, 4096, RBLN_BO_HOST, 0, &theirs));
	p = theirs.cpu;
	p[0] = 0;
	rbln_drm_cmd_init(&cmd, b.cmd.cpu, b.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_scalar(&cmd, RBLN_BINARY_ADD, RBLN_DTYPE_I32, theirs.va,
					 theirs.va, 1, 1));
	for (n = 0; n < 8; n++)
		ASSERT_EQ(0, file_submit(&b, cmd.len, &theirs.handle, 1, &sync_b[n]));

	EXPECT_EQ(-ETIMEDOUT, file_wait(&a, sync, 30000));
	/*
	 * Seconds of its work were left: had the job gone on, it would write
	 * here within any fraction of a second.
	 */
	memset(big.cpu, 0, big.size);
	usleep(rbln_test_ms(300) * 1000);
	EXPECT_EQ(0, first_nonzero(big.cpu, big.size));
	/* Gone at once: if the job still wrote, these pages would be written freed. */
	rbln_test_buf_free(a.dev, &big);
	file_close(&a);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(1, file_wait(&b, sync_b[i], 30000)) TH_LOG("job %u of b", i);
	}
	EXPECT_EQ(8, p[0]);

	/* A new file, maybe the same context: nothing of a's lands in it. */
	ASSERT_EQ(0, file_open(&c, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_test_buf_new(c.dev, 32 * MIB, RBLN_BO_HOST, 0, &later));
	memset(later.cpu, 0, later.size);
	len = fill_many(&c, later.va + 4096, 4, 1);
	ASSERT_EQ(0, file_submit(&c, len, &later.handle, 1, &sync));
	EXPECT_EQ(1, file_wait(&c, sync, 10000));
	EXPECT_EQ(0, ((uint32_t *)later.cpu)[0]);
	EXPECT_EQ(0, ((uint32_t *)later.cpu)[later.size / 4 - 1]);
	rbln_test_buf_free(c.dev, &later);
	file_close(&c);
	rbln_test_buf_free(b.dev, &theirs);
	file_close(&b);
}

/*
 * Objects of a removed device, imported: each import reaches nothing, and
 * all of them share one peer slot, so that a file holding dma-bufs of a
 * removed device cannot take the RBLN_MAX_PEERS (64) slots of the
 * importer, which every user's imports from live devices need. Each used
 * to take a slot of its own: the 65th import failed with -ENOSPC, and so
 * did every other user's peer import.
 */
TEST(imports_of_a_removed_exporter_share_one_slot)
{
	enum { N = 80 };
	struct rbln_drm_device *owner, *imp, *live;
	uint32_t handle, peers[N], live_peer;
	struct rbln_test_victim vic;
	int fds[N], i, fd, added;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, FRESH_ID, 16));
	ASSERT_EQ(0, rbln_test_victim_open(&vic, &owner));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, rbln_drm_bo_create(owner, 4096, RBLN_BO_DEVICE, 0, &handle, NULL));
		ASSERT_EQ(0, rbln_drm_bo_export(owner, handle, &fds[i]));
		rbln_drm_bo_close(owner, handle);
	}
	rbln_drm_close(owner);
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));

	ASSERT_EQ(0, rbln_test_bystander_open(&vic, FRESH_ID + 1, &imp, &added));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, rbln_drm_bo_import(imp, fds[i], &peers[i])) TH_LOG("import %d", i);
		close(fds[i]);
	}
	/* A live device's object still imports, through a slot of its own. */
	ASSERT_EQ(0, rbln_emu_add(FRESH_ID + 2, 16));
	ASSERT_EQ(0, rbln_emu_open(FRESH_ID + 2, &live));
	ASSERT_EQ(0, rbln_drm_bo_create(live, 4096, RBLN_BO_DEVICE, 0, &handle, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(live, handle, &fd));
	EXPECT_EQ(0, rbln_drm_bo_import(imp, fd, &live_peer));
	close(fd);

	rbln_drm_bo_close(imp, live_peer);
	for (i = 0; i < N; i++)
		rbln_drm_bo_close(imp, peers[i]);
	rbln_drm_close(imp);
	rbln_drm_bo_close(live, handle);
	rbln_drm_close(live);
	EXPECT_EQ(0, rbln_emu_del(FRESH_ID + 2));
	if (added)
		EXPECT_EQ(0, rbln_emu_del(FRESH_ID + 1));
	EXPECT_EQ(0, rbln_test_victim_restore(&vic));
}

/*
 * Finding 4: an import from another device names that device. When it is
 * removed and a new one takes its id, the import must reach nothing: its
 * jobs fault, and what the new device's users hold stays theirs. On PCI
 * the exporter is the last function, and what takes its place is the same
 * function probed anew, with the same serial.
 */
TEST(peer_import_outlives_its_exporter)
{
	struct rbln_test_buf exported, secret, out;
	struct rbln_test_victim vic;
	struct file imp, owner;
	struct rbln_drm_cmd c;
	uint32_t peer, bos[2], sync;
	struct rbln_drm_bo_info info;
	int fd;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, FRESH_ID, 16));
	ASSERT_EQ(0, file_open_victim(&owner, &vic, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(owner.dev, MIB, RBLN_BO_DEVICE, 0, &exported));
	ASSERT_EQ(0, rbln_drm_bo_export(owner.dev, exported.handle, &fd));
	ASSERT_EQ(0, file_open(&imp, 0, 4096));
	ASSERT_EQ(0, rbln_drm_bo_import(imp.dev, fd, &peer));
	close(fd);
	ASSERT_EQ(0, rbln_drm_bo_info(imp.dev, peer, &info));
	ASSERT_EQ(0, rbln_test_buf_new(imp.dev, 64 * 1024, RBLN_BO_HOST, 0, &out));
	/*
	 * On PCI, where devices reach each other's memory only when their
	 * model lets them: unless the import reaches it now, the fault below
	 * proves nothing.
	 */
	if (rbln_test_on_pci()) {
		rbln_drm_cmd_init(&c, imp.cmd.cpu, imp.cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, info.va, 64 * 1024));
		bos[0] = peer;
		bos[1] = out.handle;
		ASSERT_EQ(0, file_submit(&imp, c.len, bos, 2, &sync));
		ASSERT_EQ(1, file_wait(&imp, sync, 10000))
			TH_LOG("the import does not reach the exporter's memory");
	}

	rbln_test_buf_free(owner.dev, &exported);
	file_close(&owner);
	ASSERT_EQ(0, rbln_test_victim_remove(&vic));
	ASSERT_EQ(0, rbln_test_victim_readd(&vic));

	/* The new device's first user puts a secret where the old object was. */
	ASSERT_EQ(0, file_open_victim(&owner, &vic, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(owner.dev, MIB, RBLN_BO_DEVICE, 0, &secret));
	rbln_drm_cmd_init(&c, owner.cmd.cpu, owner.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, secret.va, 0x5ec12e7, MIB));
	ASSERT_EQ(0, file_submit(&owner, c.len, &secret.handle, 1, &sync));
	ASSERT_EQ(1, file_wait(&owner, sync, 10000));

	/* Reading through the old import faults and brings back nothing. */
	memset(out.cpu, 0, out.size);
	rbln_drm_cmd_init(&c, imp.cmd.cpu, imp.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, info.va, 64 * 1024));
	bos[0] = peer;
	bos[1] = out.handle;
	ASSERT_EQ(0, file_submit(&imp, c.len, bos, 2, &sync));
	EXPECT_EQ(-EFAULT, file_wait(&imp, sync, 10000));
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[0]);
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[16383]);
	rbln_drm_bo_close(imp.dev, peer);
	rbln_test_buf_free(imp.dev, &out);
	file_close(&imp);

	/* And the secret is intact: nothing wrote it through the import either. */
	rbln_test_buf_free(owner.dev, &secret);
	file_close(&owner);
	EXPECT_EQ(0, rbln_test_victim_restore(&vic));
}

struct del_arg {
	struct rbln_test_victim *vic;
	int64_t ms;
	int ret;
};

static void *del_device(void *p)
{
	struct del_arg *a = p;
	int64_t t0 = rbln_test_now_ms();

	a->ret = rbln_test_victim_remove(a->vic);
	a->ms = rbln_test_now_ms() - t0;
	return NULL;
}

/*
 * Finding 5: one packet may ask for minutes of work. The timeout must still
 * end it in bounded time, and removal must not wait for it.
 */
TEST(endless_gemm_packet_is_stopped)
{
	struct rbln_drm_gemm g = { 0 };
	struct rbln_test_buf mem;
	struct rbln_test_victim vic;
	struct del_arg del = { .vic = &vic };
	struct rbln_drm_cmd c;
	uint32_t sync;
	pthread_t t;
	int64_t t0;
	struct file f;
	int sync_fd;

	/*
	 * 4 GiB of device memory never written: it reads as zeros, free.
	 * On PCI the device must have that much (--npu-mem-mib 4096).
	 */
	ASSERT_EQ(0, rbln_test_victim_get(&vic, FRESH_ID, 4096));
	ASSERT_EQ(0, file_open_victim(&f, &vic, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096ull * MIB, RBLN_BO_DEVICE, 0, &mem));
	g.in = RBLN_DTYPE_F32;
	g.out = RBLN_DTYPE_F32;
	g.m = 32;
	g.n = 32;
	g.k = 16u << 20;
	g.a = mem.va;
	g.lda = g.k;
	g.b = mem.va + 2048ull * MIB;
	g.ldb = g.n;
	g.c = mem.va;
	g.ldc = g.n;
	rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_gemm(&c, &g));

	t0 = rbln_test_now_ms();
	ASSERT_EQ(0, file_submit(&f, c.len, NULL, 0, &sync));
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, sync, 60000));
	EXPECT_LT(rbln_test_now_ms() - t0, rbln_test_ms(5000));

	/* Again, and remove the device while it runs. */
	ASSERT_EQ(0, file_submit(&f, c.len, NULL, 0, &sync));
	/* A sync file outlives the device node: it tells how the job ended. */
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(f.dev), sync, &sync_fd));
	ASSERT_EQ(0, pthread_create(&t, NULL, del_device, &del));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, del.ret);
	EXPECT_LT(del.ms, rbln_test_ms(5000));
	EXPECT_EQ(-ENODEV, sync_file_wait_status(sync_fd, 10000));
	close(sync_fd);
	drmSyncobjDestroy(rbln_drm_fd(f.dev), sync);
	rbln_drm_bo_close(f.dev, mem.handle);
	file_close(&f);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

/*
 * Finding 6: opening the node must not use up what other users need.
 * A thousand and more open files, and the device still runs jobs.
 */
TEST(many_open_files_leave_room_for_others)
{
	enum { FILES = 1100 };
	struct rlimit lim = { FILES + 64, FILES + 64 };
	static struct rbln_drm_device *devs[FILES];
	struct rbln_test_buf out;
	struct rbln_drm_cmd c;
	uint32_t sync;
	struct file f;
	int i, opened = 0;

	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &lim));
	for (i = 0; i < FILES; i++) {
		int ret = rbln_test_open(0, &devs[i]);

		EXPECT_EQ(0, ret) TH_LOG("open %d", i);
		if (ret)
			break;
		opened++;
	}
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, out.va, 0x600d, 4096));
	ASSERT_EQ(0, file_submit(&f, c.len, &out.handle, 1, &sync));
	EXPECT_EQ(1, file_wait(&f, sync, 10000));
	EXPECT_EQ(0x600d, ((uint32_t *)out.cpu)[1023]);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
	for (i = 0; i < opened; i++)
		rbln_drm_close(devs[i]);
}

/* A file that fills its own buffer with a value of its own. */
struct filler {
	struct file f;
	struct rbln_test_buf out;
	uint32_t sync;
};

static int filler_open(struct filler *fl)
{
	return file_open(&fl->f, 0, 4096) ?:
	       rbln_test_buf_new(fl->f.dev, 4096, RBLN_BO_HOST, 0, &fl->out);
}

static void filler_close(struct filler *fl)
{
	rbln_test_buf_free(fl->f.dev, &fl->out);
	file_close(&fl->f);
}

static int filler_submit(struct filler *fl, uint32_t value)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, fl->f.cmd.cpu, fl->f.cmd.size);
	return rbln_drm_cmd_dma_fill(&c, fl->out.va, value, fl->out.size) ?:
	       file_submit(&fl->f, c.len, &fl->out.handle, 1, &fl->sync);
}

/* The status of the job, and whether the whole buffer holds @value. */
static int filler_wait(struct filler *fl, uint32_t value)
{
	const uint32_t *out = fl->out.cpu;
	int status = file_wait(&fl->f, fl->sync, 30000);
	size_t i;

	for (i = 0; status == 1 && i < fl->out.size / 4; i++)
		if (out[i] != value)
			return -1;
	return status;
}

/*
 * The other side of finding 6: contexts are taken by work, and the device
 * has 1023. They used to be kept from a file's first job to its close, so
 * that the 1024th file to submit was refused with ENOSPC for as long as
 * the others stayed open, whatever they did. Now a job about to run takes
 * the context of a file with no job on the rings: 1100 files submit at
 * once, twice (the first 77 lose their context to the last ones in
 * between), each filling its own buffer, and every buffer holds its own
 * file's value and nothing else; then half of them close with their jobs
 * in flight while the other half run theirs. sysfs counts the contexts
 * held and taken.
 */
TEST(more_files_run_jobs_than_the_device_has_contexts)
{
	enum { FILES = 1100 };
	struct rlimit lim = { FILES + 64, FILES + 64 };
	long long used = rbln_test_attr(0, "contexts_used");
	long long steals = rbln_test_attr(0, "context_steals");
	static struct filler fl[FILES];
	int i, round, failed;

	ASSERT_EQ(1023, rbln_test_attr(0, "contexts_total"));
	ASSERT_LE(0, used);
	ASSERT_LE(0, steals);
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &lim));
	for (i = 0; i < FILES; i++) {
		ASSERT_EQ(0, filler_open(&fl[i])) TH_LOG("file %d", i);
	}

	for (round = 1; round <= 2; round++) {
		for (i = 0; i < FILES; i++) {
			ASSERT_EQ(0, filler_submit(&fl[i], round << 16 | i))
				TH_LOG("round %d, file %d", round, i);
		}
		for (failed = 0, i = 0; i < FILES; i++) {
			int status = filler_wait(&fl[i], round << 16 | i);

			if (status != 1 && failed++ < 8)
				TH_LOG("round %d, file %d: %d", round, i, status);
		}
		EXPECT_EQ(0, failed) TH_LOG("round %d", round);
		/* Every file has held one; none has given its back. */
		EXPECT_EQ(1023, rbln_test_attr(0, "contexts_used"));
		EXPECT_LE(steals + round * (FILES - 1023), rbln_test_attr(0, "context_steals"));
	}

	for (i = 0; i < FILES; i++) {
		ASSERT_EQ(0, filler_submit(&fl[i], 3 << 16 | i)) TH_LOG("file %d", i);
	}
	for (i = 1; i < FILES; i += 2) {
		drmSyncobjDestroy(rbln_drm_fd(fl[i].f.dev), fl[i].sync);
		filler_close(&fl[i]);
	}
	for (failed = 0, i = 0; i < FILES; i += 2) {
		int status = filler_wait(&fl[i], 3 << 16 | i);

		if (status != 1 && failed++ < 8)
			TH_LOG("round 3, file %d: %d", i, status);
	}
	EXPECT_EQ(0, failed);
	for (i = 0; i < FILES; i += 2)
		filler_close(&fl[i]);
	EXPECT_EQ(used, rbln_test_attr_settles_at(0, "contexts_used", used));
}

/*
 * What a job about to run must never take: the context of a file with a job
 * on the rings, whose next access would then go through the taker's tables.
 * f[0]'s jobs of seconds of DMA_FILL packets, each ended by the timeout,
 * run from before the other 1023 files take the remaining 1022 contexts
 * and one more: its context is the least recently woken one, but busy, and
 * its jobs must end as timed out (or done), neither faulted nor canceled,
 * as they did in 230 ms when the least recently woken context was taken
 * whatever it ran.
 */
TEST(a_context_with_jobs_on_the_rings_is_not_taken)
{
	enum { FILES = 1024, LONG = 4 };
	struct rlimit lim = { FILES + 64, FILES + 64 };
	static struct filler fl[FILES];
	uint32_t sync[LONG], len;
	struct rbln_test_buf big;
	int i, failed;

	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &lim));
	ASSERT_EQ(0, file_open(&fl[0].f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_test_buf_new(fl[0].f.dev, 32 * MIB, RBLN_BO_HOST, 0, &big));
	ASSERT_EQ(0, rbln_test_buf_new(fl[0].f.dev, 4096, RBLN_BO_HOST, 0, &fl[0].out));
	for (i = 1; i < FILES; i++) {
		ASSERT_EQ(0, filler_open(&fl[i])) TH_LOG("file %d", i);
	}

	/* Seconds of work each, where the timeout is half a second. */
	len = fill_many(&fl[0].f, big.va, 32 * MIB, 2000);
	for (i = 0; i < LONG; i++)
		ASSERT_EQ(0, file_submit(&fl[0].f, len, &big.handle, 1, &sync[i]));
	for (i = 1; i < FILES; i++) {
		ASSERT_EQ(0, filler_submit(&fl[i], i)) TH_LOG("file %d", i);
	}
	for (failed = 0, i = 1; i < FILES; i++) {
		int status = filler_wait(&fl[i], i);

		if (status != 1 && failed++ < 8)
			TH_LOG("file %d: %d", i, status);
	}
	EXPECT_EQ(0, failed);
	for (i = 0; i < LONG; i++) {
		int status = file_wait(&fl[0].f, sync[i], 30000);

		/* Done, if the timeout came late to a busy guest; never faulted. */
		EXPECT_TRUE(status == -ETIMEDOUT || status == 1) TH_LOG("job %d: %d", i, status);
	}
	/* And f[0] still runs jobs. */
	ASSERT_EQ(0, filler_submit(&fl[0], 0x600d));
	EXPECT_EQ(1, filler_wait(&fl[0], 0x600d));
	rbln_test_buf_free(fl[0].f.dev, &big);
	for (i = 0; i < FILES; i++)
		filler_close(&fl[i]);
}

/*
 * Closing a file waits for its jobs, but not for as long as they would
 * like: 64 jobs of seconds each, on four queues, must not hold close()
 * (or the exit of a killed process) for minutes in an unkillable sleep.
 */
TEST(close_does_not_wait_for_every_long_job)
{
	struct rbln_test_buf big;
	uint32_t queues[4], len, i;
	struct file f;
	int64_t t0;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 32 * MIB, RBLN_BO_HOST, 0, &big));
	len = fill_many(&f, big.va, 32 * MIB, 2000);
	queues[0] = f.queue;
	for (i = 1; i < 4; i++)
		ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &queues[i]));
	for (i = 0; i < 64; i++) {
		uint32_t bos[2] = { big.handle, f.cmd.handle };

		ASSERT_EQ(0, rbln_drm_submit(f.dev, queues[i % 4], f.cmd.va, len, bos, 2, NULL, 0,
					     NULL));
	}
	t0 = rbln_test_now_ms();
	rbln_test_buf_free(f.dev, &big);
	file_close(&f);
	/* A timeout's worth of waiting, then what runs is stopped. */
	EXPECT_LT(rbln_test_now_ms() - t0, rbln_test_ms(4000));
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

struct freer {
	struct rbln_drm_device *dev;
	uint32_t handle;
	pthread_barrier_t *start;
	int ret;
};

static void *free_at_once(void *p)
{
	struct freer *fr = p;

	pthread_barrier_wait(fr->start);
	fr->ret = rbln_drm_bo_close(fr->dev, fr->handle);
	return NULL;
}

/*
 * Finding 7 (second review): freed device memory is zeroed by a scrubber
 * programmed with four register writes, and objects are freed by many
 * threads at once. With nothing holding the four together, one free's size
 * met another's address: the other object was scrubbed twice, and this
 * one's data stayed for the memory's next owner. Here the first scrub pauses
 * between address and size (debugfs "slow_scrub") while another object is
 * freed; then the memory of both must read zero.
 */
TEST(objects_freed_at_once_are_each_scrubbed)
{
	struct rbln_test_buf obj[2], all, out;
	struct rbln_drm_device *keeper;
	struct freer fr[2];
	pthread_barrier_t start;
	pthread_t t[2];
	uint32_t sync, len, bos[2], i;
	struct rbln_drm_cmd c;
	struct file f;
	int dmabuf;

	ASSERT_EQ(0, file_open(&f, 0, 4096));
	ASSERT_EQ(0, rbln_test_open(0, &keeper));
	rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, rbln_test_buf_new(f.dev, MIB, RBLN_BO_DEVICE, 0, &obj[i]));
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, obj[i].va, 0x5c2b0000 + i, MIB));
		bos[i] = obj[i].handle;
	}
	ASSERT_EQ(0, file_submit(&f, c.len, bos, 2, &sync));
	ASSERT_EQ(1, file_wait(&f, sync, 10000));
	/*
	 * Held by another file alone, the objects are freed by the threads
	 * that close them: closing the first file waits for its job to go.
	 */
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, rbln_drm_bo_export(f.dev, obj[i].handle, &dmabuf));
		ASSERT_EQ(0, rbln_drm_bo_import(keeper, dmabuf, &fr[i].handle));
		close(dmabuf);
	}
	file_close(&f);

	ASSERT_EQ(0, rbln_test_inject(0, "slow_scrub"));
	ASSERT_EQ(0, pthread_barrier_init(&start, NULL, 2));
	for (i = 0; i < 2; i++) {
		fr[i].dev = keeper;
		fr[i].start = &start;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, free_at_once, &fr[i]));
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0, fr[i].ret);
	}
	pthread_barrier_destroy(&start);
	rbln_drm_close(keeper);

	/* Device memory is handed out lowest first: this covers both. */
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 8 * MIB, RBLN_BO_DEVICE, 0, &all));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 8 * MIB, RBLN_BO_HOST, 0, &out));
	memset(out.cpu, 0xff, out.size);
	rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, out.va, all.va, 8 * MIB));
	bos[0] = all.handle;
	bos[1] = out.handle;
	ASSERT_EQ(0, file_submit(&f, c.len, bos, 2, &sync));
	ASSERT_EQ(1, file_wait(&f, sync, 10000));
	len = (uint32_t)first_nonzero(out.cpu, out.size);
	EXPECT_EQ(0, len) TH_LOG("byte %u of freed memory reads %#x", len - 1,
				 ((uint32_t *)out.cpu)[(len - 1) / 4]);
	rbln_test_buf_free(f.dev, &out);
	rbln_test_buf_free(f.dev, &all);
	file_close(&f);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

/* A SCHED_FIFO thread that wakes every millisecond and notes how late. */
struct waker {
	volatile int stop;
	volatile unsigned int wakes;
	int64_t max_late_ns;
};

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static void *wake_every_ms(void *arg)
{
	struct waker *w = arg;
	struct timespec next, now;
	int64_t late;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!w->stop) {
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		late = ns_of(&now) - ns_of(&next);
		if (late > w->max_late_ns)
			w->max_late_ns = late;
		if (late > 1000000)
			next = now;
		w->wakes++;
	}
	return NULL;
}

/*
 * Finding 1 (third review): the emulated NPU scrubs freed device memory in
 * the thread that frees it, a page at a time for every page the device
 * wrote, and held a spinlock throughout: for an object of hundreds of MiB
 * the CPU ran nothing else, a real-time thread of another user neither.
 * Here a SCHED_FIFO thread waking every millisecond shares one CPU with
 * the thread that frees 448 MiB the device wrote; it must never wait a
 * quarter of the free.
 */
TEST(freeing_device_memory_lets_the_cpu_go)
{
	struct sched_param fifo = { .sched_priority = 1 };
	const uint64_t size = 448ull * MIB;
	struct rbln_drm_device *keeper;
	struct waker w = { 0 };
	int64_t t0, took;
	uint64_t off;
	struct rbln_test_buf obj;
	struct rbln_drm_cmd c;
	pthread_attr_t attr;
	uint32_t sync, h;
	cpu_set_t one;
	pthread_t t;
	struct file f;
	int dmabuf;

	ASSERT_EQ(0, rbln_emu_add(FRESH_ID + 3, 512));
	ASSERT_EQ(0, rbln_emu_open(FRESH_ID + 3, &f.dev));
	ASSERT_EQ(0, file_setup(&f, 4096));
	ASSERT_EQ(0, rbln_emu_open(FRESH_ID + 3, &keeper));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, size, RBLN_BO_DEVICE, 0, &obj));
	/* 32 MiB a job: each well within the job timeout. */
	for (off = 0; off < size; off += 32 * MIB) {
		rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, obj.va + off, 0x5eed, 32 * MIB));
		ASSERT_EQ(0, file_submit(&f, c.len, &obj.handle, 1, &sync));
		ASSERT_EQ(1, file_wait(&f, sync, 60000));
	}
	/* Held by another file alone, it is freed by the thread that closes it. */
	ASSERT_EQ(0, rbln_drm_bo_export(f.dev, obj.handle, &dmabuf));
	ASSERT_EQ(0, rbln_drm_bo_import(keeper, dmabuf, &h));
	close(dmabuf);
	file_close(&f);

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	ASSERT_EQ(0, pthread_attr_init(&attr));
	ASSERT_EQ(0, pthread_attr_setaffinity_np(&attr, sizeof(one), &one));
	ASSERT_EQ(0, pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED));
	ASSERT_EQ(0, pthread_attr_setschedpolicy(&attr, SCHED_FIFO));
	ASSERT_EQ(0, pthread_attr_setschedparam(&attr, &fifo));
	ASSERT_EQ(0, pthread_create(&t, &attr, wake_every_ms, &w));
	while (w.wakes < 10)
		sched_yield();
	w.max_late_ns = 0;
	t0 = rbln_test_now_ms();
	EXPECT_EQ(0, rbln_drm_bo_close(keeper, h));
	took = rbln_test_now_ms() - t0;
	w.stop = 1;
	pthread_join(t, NULL);
	pthread_attr_destroy(&attr);
	TH_LOG("freeing %llu MiB took %lld ms; the thread woke at worst %lld us late",
	       (unsigned long long)(size / MIB), (long long)took,
	       (long long)(w.max_late_ns / 1000));
	EXPECT_LT(w.max_late_ns / 1000000, took / 4);
	rbln_drm_close(keeper);
	EXPECT_EQ(0, rbln_emu_del(FRESH_ID + 3));
}

/* A call that may take long, run on a thread while another is timed. */
struct slow_call {
	int (*run)(void *arg);
	void *arg;
	int ret;
	int64_t ms;
	volatile int done;
};

static void *slow_call_thread(void *p)
{
	struct slow_call *s = p;
	int64_t t = rbln_test_now_ms();

	s->ret = s->run(s->arg);
	s->ms = rbln_test_now_ms() - t;
	s->done = 1;
	return NULL;
}

/*
 * Runs @slow on a thread and @probe over and over until @slow is done.
 * Returns the slowest @probe in ms, or -1 if the thread could not start
 * or a @probe failed; @rounds: how many ran.
 */
static int64_t slowest_meanwhile(struct slow_call *slow, int (*probe)(void *arg), void *arg,
				 unsigned int *rounds)
{
	int64_t t, late, worst = 0;
	pthread_t thread;

	*rounds = 0;
	if (pthread_create(&thread, NULL, slow_call_thread, slow))
		return -1;
	while (!slow->done && worst >= 0) {
		t = rbln_test_now_ms();
		late = probe(arg) ? -1 : rbln_test_now_ms() - t;
		worst = late < 0 || late > worst ? late : worst;
		++*rounds;
	}
	pthread_join(thread, NULL);
	return worst;
}

struct export_args {
	struct rbln_drm_device *dev;
	uint32_t handle;
	int fd;
};

static int export_object(void *p)
{
	struct export_args *e = p;

	return rbln_drm_bo_export(e->dev, e->handle, &e->fd);
}

static int create_and_close(void *p)
{
	struct rbln_drm_device *dev = p;
	uint32_t h;

	return rbln_drm_bo_create(dev, 4096, RBLN_BO_HOST, 0, &h, NULL) ?:
	       rbln_drm_bo_close(dev, h);
}

/*
 * Finding 2 (third review): exporting a HOST object maps its pages for the
 * device first, and did so under the device's object_name_lock, which
 * every BO_CREATE, import and handle close of the device takes: a file
 * exporting a large object it had never touched stalled every other
 * file's for as long as the pages took. Here one file exports 512 MiB
 * never touched while another creates and closes small objects: none of
 * those may wait a quarter of the export.
 */
TEST(export_of_an_untouched_object_does_not_stall_the_device)
{
	struct export_args e = { .fd = -1 };
	struct slow_call slow = { .run = export_object, .arg = &e };
	struct rbln_drm_device *b;
	unsigned int rounds;
	int64_t worst;

	ASSERT_EQ(0, rbln_test_open(0, &e.dev));
	ASSERT_EQ(0, rbln_test_open(0, &b));
	ASSERT_EQ(0, rbln_drm_bo_create(e.dev, 512 * MIB, RBLN_BO_HOST, 0, &e.handle, NULL));
	worst = slowest_meanwhile(&slow, create_and_close, b, &rounds);
	ASSERT_LE(0, worst);
	ASSERT_EQ(0, slow.ret);
	TH_LOG("the export took %lld ms; %u creations and closes meanwhile, the slowest %lld ms",
	       (long long)slow.ms, rounds, (long long)worst);
	EXPECT_LT(worst, slow.ms / 4);
	close(e.fd);
	rbln_drm_close(e.dev);
	rbln_drm_close(b);
}

struct submit_args {
	struct file *f;
	uint32_t big, sync;
};

static int submit_nop_listing(void *p)
{
	struct submit_args *s = p;
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, s->f->cmd.cpu, s->f->cmd.size);
	return rbln_drm_cmd_nop(&c) ?: file_submit(s->f, c.len, &s->big, 1, &s->sync);
}

struct lookup_args {
	struct rbln_drm_device *dev;
	uint32_t handle;
};

static int look_up(void *p)
{
	struct lookup_args *l = p;
	struct rbln_drm_bo_info info;

	return rbln_drm_bo_info(l->dev, l->handle, &info);
}

/*
 * Finding 3 (third review): SUBMIT mapped a HOST object's pages, all of
 * them on its first job, under the context's lock, which the device's one
 * bind queue takes to run any file's bind job: a file could hold them all
 * for as long as its pages took. Here a job lists 512 MiB never touched
 * while another thread of the file asks where an object is (BO_INFO, under
 * the same lock): none of those may wait a quarter of the submission.
 */
TEST(submit_maps_a_new_object_outside_the_context_lock)
{
	struct file f;
	struct submit_args s = { .f = &f };
	struct slow_call slow = { .run = submit_nop_listing, .arg = &s };
	struct rbln_test_buf small;
	struct lookup_args l;
	unsigned int rounds;
	int64_t worst;

	ASSERT_EQ(0, file_open(&f, 0, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &small));
	ASSERT_EQ(0, rbln_drm_bo_create(f.dev, 512 * MIB, RBLN_BO_HOST, 0, &s.big, NULL));
	l.dev = f.dev;
	l.handle = small.handle;
	worst = slowest_meanwhile(&slow, look_up, &l, &rounds);
	ASSERT_LE(0, worst);
	ASSERT_EQ(0, slow.ret);
	ASSERT_EQ(1, file_wait(&f, s.sync, 60000));
	TH_LOG("the submission took %lld ms; %u lookups meanwhile, the slowest %lld ms",
	       (long long)slow.ms, rounds, (long long)worst);
	EXPECT_LT(worst, slow.ms / 4);
	EXPECT_EQ(0, rbln_drm_bo_close(f.dev, s.big));
	rbln_test_buf_free(f.dev, &small);
	file_close(&f);
}

/*
 * Finding 4 (third review): the driver published its interrupt handler
 * before it set its rings up, so a vector raised in between (by a function
 * a previous driver left with an interrupt pending) had the handler read a
 * ring that did not exist yet. Here the emulated NPU raises its last ring's
 * vector as the driver programs the first ring at probe (sysfs's
 * stray_vector): the driver must drop it, and the device then work.
 */
TEST(vector_raised_while_the_rings_are_set_up_is_dropped)
{
	const unsigned int id = FRESH_ID + 4;
	char name[32], path[128];
	struct rbln_drm_cmd c;
	struct file f;

	snprintf(name, sizeof(name), "rbln_emu%u", id);
	ASSERT_EQ(0, rbln_emu_add(id, 16));
	ASSERT_EQ(0, rbln_sysfs_write(RBLN_EMU_BUS "/drivers/rbln/unbind", name));
	snprintf(path, sizeof(path), RBLN_EMU_BUS "/devices/%s/stray_vector", name);
	ASSERT_EQ(-EINVAL, rbln_sysfs_write(path, "5"));
	ASSERT_EQ(-EINVAL, rbln_sysfs_write(path, "last"));
	ASSERT_EQ(0, rbln_sysfs_write(path, "3"));
	ASSERT_EQ(0, rbln_sysfs_write(RBLN_EMU_BUS "/drivers/rbln/bind", name));

	ASSERT_EQ(0, rbln_emu_open(id, &f.dev));
	ASSERT_EQ(0, file_setup(&f, 4096));
	rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	EXPECT_EQ(1, rbln_test_run(f.dev, f.queue, &f.cmd, c.len, NULL, 0, 10000));
	file_close(&f);
	EXPECT_EQ(0, rbln_emu_del(id));
}

/* ---- WAIT parked on a ring while everything around it goes ---- */

#define BEFORE		0x11111111u	/* the packet before a WAIT writes it */
#define AFTER		0x22222222u	/* the packet after it */

/*
 * At @off in @f's command buffer: out word 2 @slot = BEFORE, a WAIT for
 * the word at @word_va to reach @value, out word 2 @slot + 1 = AFTER. The
 * offset after it, 0 if it does not fit.
 */
static uint32_t wait_emit(struct file *f, uint32_t off, uint64_t out_va, unsigned int slot,
			  uint64_t word_va, uint64_t value)
{
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, (char *)f->cmd.cpu + off, f->cmd.size - off);
	if (rbln_drm_cmd_dma_fill(&c, out_va + 8 * slot, BEFORE, 4) ||
	    rbln_drm_cmd_wait(&c, word_va, value) ||
	    rbln_drm_cmd_dma_fill(&c, out_va + 8 * slot + 4, AFTER, 4))
		return 0;
	return off + c.len;
}

static void word_set(void *word, uint64_t v)
{
	__atomic_store_n((uint64_t *)word, v, __ATOMIC_RELEASE);
}

/* Whether out word @idx of @out holds @v within @ms. */
static bool out_becomes(const struct rbln_test_buf *out, unsigned int idx, uint32_t v, int ms)
{
	volatile uint32_t *o = out->cpu;
	int64_t end = rbln_test_now_ms() + rbln_test_ms(ms);

	while (o[idx] != v && rbln_test_now_ms() < end)
		usleep(1000);
	return o[idx] == v;
}

/* A job parked at its WAIT: what comes before it done, its fence not. */
static bool parked(struct file *f, const struct rbln_test_buf *out, unsigned int slot,
		   uint32_t sync)
{
	return out_becomes(out, 2 * slot, BEFORE, 2000) && rbln_test_pending(f->dev, sync) &&
	       ((volatile uint32_t *)out->cpu)[2 * slot + 1] == 0;
}

/*
 * A WAIT never released is a job that runs too long: it fails with
 * -ETIMEDOUT after the job timeout, the job behind it on its queue runs,
 * and another queue's job, on another ring, does not wait for either.
 */
TEST(wait_never_released_times_out)
{
	struct rbln_test_buf word, out;
	uint32_t w, behind, other, q2, end, end2, end3, bos[2];
	int64_t t0, other_ms;
	struct file f;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &q2));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &word));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	word_set(word.cpu, 0);
	bos[0] = word.handle;
	bos[1] = out.handle;

	end = wait_emit(&f, 0, out.va, 0, word.va, 1);
	end2 = wait_emit(&f, end, out.va, 1, word.va, 0);
	end3 = wait_emit(&f, end2, out.va, 2, word.va, 0);
	ASSERT_NE(0, end3);
	t0 = rbln_test_now_ms();
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_EQ(0, submit_at(&f, f.queue, end, end2, bos, 2, &behind));
	ASSERT_TRUE(parked(&f, &out, 0, w));

	/* Another queue: another ring, not held up by the WAIT. */
	ASSERT_EQ(0, submit_at(&f, q2, end2, end3, bos, 2, &other));
	EXPECT_EQ(1, file_wait(&f, other, 400));
	other_ms = rbln_test_now_ms() - t0;
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	EXPECT_TRUE(rbln_test_pending(f.dev, behind));

	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, w, 10000));
	TH_LOG("other queue's job done after %lld ms, the WAIT timed out after %lld ms",
	       (long long)other_ms, (long long)(rbln_test_now_ms() - t0));
	EXPECT_LT(rbln_test_now_ms() - t0, rbln_test_ms(3000));
	EXPECT_EQ(1, file_wait(&f, behind, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[3]);
	/* The timed-out job's packets after its WAIT never ran. */
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[1]);
	word_set(word.cpu, 1);
	usleep(rbln_test_ms(50) * 1000);
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[1]);
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
}

/*
 * A hostile file: WAITs that never end, on many queues, released or
 * canceled all at once, then as many left parked while the file closes,
 * which takes no more than the job timeout and frees everything.
 */
TEST(many_waits_on_many_queues)
{
	enum { QUEUES = 16, JOBS = 4 };
	uint32_t queue[QUEUES], sync[QUEUES][JOBS], off, end, bos[2];
	struct rbln_test_buf word, out;
	unsigned int q, j, n;
	int64_t t0;
	struct file f;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &word));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	bos[0] = word.handle;
	bos[1] = out.handle;
	for (q = 0; q < QUEUES; q++) {
		word_set((uint64_t *)word.cpu + q, 0);
		ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &queue[q]));
	}
	for (off = 0, q = 0; q < QUEUES; q++) {
		for (j = 0; j < JOBS; j++, off = end) {
			end = wait_emit(&f, off, out.va, q * JOBS + j, word.va + 8 * q, 1);
			ASSERT_NE(0, end);
			ASSERT_EQ(0, submit_at(&f, queue[q], off, end, bos, 2, &sync[q][j]));
		}
	}
	for (n = 0, q = 0; q < QUEUES; q++)
		for (j = 0; j < JOBS; j++)
			n += rbln_test_pending(f.dev, sync[q][j]);
	EXPECT_EQ(QUEUES * JOBS, n);
	/* Half released, half canceled. */
	for (q = 0; q < QUEUES; q++)
		word_set((uint64_t *)word.cpu + q, q % 2 ? RBLN_WAIT_CANCEL : 1);
	for (q = 0; q < QUEUES; q++) {
		for (j = 0; j < JOBS; j++) {
			unsigned int k = q * JOBS + j;

			EXPECT_EQ(1, file_wait(&f, sync[q][j], 5000)) TH_LOG("queue %u job %u", q, j);
			EXPECT_EQ(BEFORE, ((uint32_t *)out.cpu)[2 * k]);
			EXPECT_EQ(q % 2 ? 0 : AFTER, ((uint32_t *)out.cpu)[2 * k + 1]);
		}
	}

	/* Parked again, and the file closes under them. */
	for (q = 0; q < QUEUES; q++)
		word_set((uint64_t *)word.cpu + q, 0);
	for (off = 0, q = 0; q < QUEUES; q++) {
		for (j = 0; j < JOBS; j++, off = end) {
			end = wait_emit(&f, off, out.va, q * JOBS + j, word.va + 8 * q, 1);
			ASSERT_EQ(0, submit_at(&f, queue[q], off, end, bos, 2, &sync[q][j]));
		}
	}
	EXPECT_TRUE(rbln_test_pending(f.dev, sync[0][0]));
	t0 = rbln_test_now_ms();
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
	TH_LOG("close with %u WAITs parked took %lld ms", QUEUES * JOBS,
	       (long long)(rbln_test_now_ms() - t0));
	EXPECT_LT(rbln_test_now_ms() - t0, rbln_test_ms(3000));
	EXPECT_EQ(0, rbln_test_mem_used_settled(0));
	ASSERT_EQ(0, rbln_test_open(0, &f.dev));
	EXPECT_EQ(1, rbln_test_works(f.dev, 0x5eed));
	rbln_drm_close(f.dev);
}

/*
 * The word in device memory: released by another queue's DMA_FILL, as an
 * engine would; then the object is closed under the WAIT, which faults at
 * its next read. (An object allocated in its place at once may take the
 * same address: the WAIT then reads that one, as the context says.)
 */
TEST(wait_on_a_device_object_closed_under_it)
{
	struct rbln_test_buf mem, out, other;
	uint32_t q2, w, rel, end, end2;
	char fault[64], want[64];
	struct rbln_drm_cmd c;
	struct file f;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &q2));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_DEVICE, 0, &mem));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));

	/* Device memory is zeroed when allocated: the WAIT waits. */
	end = wait_emit(&f, 0, out.va, 0, mem.va, 1);
	rbln_drm_cmd_init(&c, (char *)f.cmd.cpu + end, f.cmd.size - end);
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, mem.va, 1, 8));
	end2 = end + c.len;
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, &out.handle, 1, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, submit_at(&f, q2, end, end2, NULL, 0, &rel));
	EXPECT_EQ(1, file_wait(&f, rel, 5000));
	EXPECT_EQ(1, file_wait(&f, w, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);

	/* A fresh object; closed while the WAIT reads it. */
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_DEVICE, 0, &other));
	end = wait_emit(&f, 0, out.va, 1, other.va, 1);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, &out.handle, 1, &w));
	ASSERT_TRUE(parked(&f, &out, 1, w));
	snprintf(want, sizeof(want), "unmapped %#llx", (unsigned long long)other.va);
	rbln_test_buf_free(f.dev, &other);
	EXPECT_EQ(-EFAULT, file_wait(&f, w, 5000));
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[3]);
	EXPECT_EQ(0, rbln_test_fdinfo_value(rbln_drm_fd(f.dev), "rbln-fault:", fault,
					    sizeof(fault)));
	EXPECT_STREQ(want, fault);
	rbln_test_buf_free(f.dev, &mem);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
	EXPECT_EQ(0, rbln_test_mem_used_settled(0));
}

/*
 * The word in a host object bound with VM_BIND: an unbind waits for the
 * WAIT before it, released or timed out, and the CPU's writes to the word
 * after that reach nothing the device reads.
 */
TEST(unbind_of_the_word_waits_for_the_wait)
{
	struct drm_rbln_sync unbound = { 0 };
	struct rbln_test_buf h, out;
	uint32_t w, end, round;
	struct file f;
	uint64_t va;
	int fd;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	fd = rbln_drm_fd(f.dev);
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	for (round = 0; round < 2; round++) {
		ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, RBLN_BO_NO_VA, &h));
		ASSERT_EQ(0, rbln_drm_vm_reserve(f.dev, 4096, 0, &va));
		ASSERT_EQ(0, rbln_test_vm_map(f.dev, va, 4096, h.handle, 0, 0));
		word_set(h.cpu, 0);
		memset(out.cpu, 0, 4096);
		end = wait_emit(&f, 0, out.va, 0, va, 1);
		ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, &out.handle, 1, &w));
		ASSERT_TRUE(parked(&f, &out, 0, w));
		ASSERT_EQ(0, drmSyncobjCreate(fd, 0, &unbound.handle));
		ASSERT_EQ(0, rbln_drm_vm_unmap(f.dev, va, 4096, NULL, 0, &unbound));
		usleep(rbln_test_ms(50) * 1000);
		EXPECT_TRUE(rbln_test_pending(f.dev, unbound.handle));
		EXPECT_TRUE(rbln_test_pending(f.dev, w));
		if (!round) {
			/* Released: it completes, then the unbind does. */
			word_set(h.cpu, 1);
			EXPECT_EQ(1, file_wait(&f, w, 5000));
			EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);
		} else {
			/* Never released: the job timeout ends both. */
			EXPECT_EQ(-ETIMEDOUT, file_wait(&f, w, 10000));
		}
		EXPECT_EQ(0, drmSyncobjWait(fd, &unbound.handle, 1, rbln_test_deadline_ns(5000), 0,
					    NULL));
		drmSyncobjDestroy(fd, unbound.handle);
		EXPECT_EQ(0, rbln_drm_vm_release(f.dev, va));
		/* Nothing reads it now: a write to it goes nowhere. */
		word_set(h.cpu, 1);
		rbln_test_buf_free(f.dev, &h);
	}
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
}

/*
 * Resets around a parked WAIT: behind a job whose timeout resets the ring,
 * it runs again and waits; parked when another ring's wedged job makes a
 * function reset, it is stopped and runs again from its start.
 */
TEST(wait_survives_resets_it_did_not_cause)
{
	struct rbln_test_buf word, out, nop;
	struct drm_rbln_sync hung = { 0 };
	uint32_t w, q2, end, bos[2];
	struct rbln_drm_cmd c;
	long long resets;
	struct file f;

	ASSERT_EQ(0, file_open(&f, 0, 64 * 1024));
	ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &q2));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &word));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &nop));
	bos[0] = word.handle;
	bos[1] = out.handle;

	/* Behind a hang on its queue: the ring's reset puts it back on. */
	word_set(word.cpu, 0);
	resets = rbln_test_attr(0, "reset_count");
	end = wait_emit(&f, 0, out.va, 0, word.va, 1);
	ASSERT_EQ(0, rbln_test_submit_hung_nop(f.dev, f.queue, &nop, rbln_test_dev_name(0),
					       &hung));
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, hung.handle, 10000));
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	word_set(word.cpu, 1);
	EXPECT_EQ(1, file_wait(&f, w, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);

	/*
	 * Parked on one ring while a wedged job on another makes a function
	 * reset: the WAIT goes back on and waits again. The reset comes two
	 * job timeouts after the wedged job starts (one to time out, one for
	 * its ring not to stop), so the WAIT starts after 1.4 of them and is
	 * released as soon as it runs again, before its own timeout.
	 */
	word_set(word.cpu, 0);
	memset(out.cpu, 0, 4096);
	resets = rbln_test_attr(0, "reset_count");
	ASSERT_EQ(0, rbln_test_inject(0, "stuck"));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(f.dev), 0, &hung.handle));
	rbln_drm_cmd_init(&c, nop.cpu, nop.size);
	ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
	ASSERT_EQ(0, rbln_drm_submit(f.dev, q2, nop.va, c.len, &nop.handle, 1, NULL, 0, &hung));
	usleep(rbln_test_ms(700) * 1000);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	/* Cleared: the run after the reset writes it again. */
	((volatile uint32_t *)out.cpu)[0] = 0;
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, hung.handle, 10000));
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	EXPECT_TRUE(out_becomes(&out, 0, BEFORE, 200));
	word_set(word.cpu, 1);
	EXPECT_EQ(1, file_wait(&f, w, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);

	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	rbln_test_buf_free(f.dev, &nop);
	file_close(&f);
}

/* Removing the device stops a parked WAIT at once: its fence fails with -ENODEV. */
TEST(unplug_with_a_wait_parked)
{
	struct rbln_test_buf word, out;
	struct rbln_test_victim vic;
	struct del_arg del = { .vic = &vic };
	uint32_t w, end, bos[2];
	struct file f;
	pthread_t t;
	int sync_fd;

	ASSERT_EQ(0, rbln_test_victim_get(&vic, FRESH_ID, 64));
	ASSERT_EQ(0, file_open_victim(&f, &vic, 4096));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &word));
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &out));
	bos[0] = word.handle;
	bos[1] = out.handle;
	word_set(word.cpu, 0);
	end = wait_emit(&f, 0, out.va, 0, word.va, 1);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(f.dev), w, &sync_fd));
	ASSERT_EQ(0, pthread_create(&t, NULL, del_device, &del));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, del.ret);
	TH_LOG("removal with a WAIT parked took %lld ms", (long long)del.ms);
	EXPECT_LT(del.ms, rbln_test_ms(5000));
	EXPECT_EQ(-ENODEV, sync_file_wait_status(sync_fd, 10000));
	close(sync_fd);
	drmSyncobjDestroy(rbln_drm_fd(f.dev), w);
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

/* ---- WAIT kept past the job timeout while the host moves its word ---- */

#define FAR		(1ull << 40)	/* a value the moving word never reaches */

/* The module's parameter @name, in ms (rbln-vm scales them with the tests). */
static int64_t param_ms(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), RBLN_MODULE_PARAMS "/%s", name);
	return rbln_sysfs_read_ull(path);
}

/*
 * A WAIT for FAR on a host word at 0 whose job then writes AFTER to
 * @out's word 1: commands [0, *@end) of @f, whose objects are @bos
 * (word, out); not submitted.
 */
static void moving_wait_new(struct __test_metadata *_metadata, struct file *f,
			    struct rbln_test_buf *word, struct rbln_test_buf *out, uint32_t *bos,
			    uint32_t *end)
{
	ASSERT_EQ(0, rbln_test_buf_new(f->dev, 4096, RBLN_BO_HOST, 0, word));
	ASSERT_EQ(0, rbln_test_buf_new(f->dev, 4096, RBLN_BO_HOST, 0, out));
	bos[0] = word->handle;
	bos[1] = out->handle;
	word_set(word->cpu, 0);
	*end = wait_emit(f, 0, out->va, 0, word->va, FAR);
}

/*
 * Submits the WAIT of moving_wait_new() as *@w, and behind it on @f's
 * queue a job whose own WAIT passes at once, writing AFTER to @out's word 3,
 * as *@behind.
 */
static void moving_wait_submit(struct __test_metadata *_metadata, struct file *f,
			       const struct rbln_test_buf *word, const struct rbln_test_buf *out,
			       uint32_t *bos, uint32_t end, uint32_t *w, uint32_t *behind)
{
	uint32_t end2 = wait_emit(f, end, out->va, 1, word->va, 0);

	ASSERT_NE(0, end2);
	ASSERT_EQ(0, submit_at(f, f->queue, 0, end, bos, 2, w));
	ASSERT_EQ(0, submit_at(f, f->queue, end, end2, bos, 2, behind));
}

/*
 * A WAIT whose word the host moves, every 150 ms for 2 s (four job
 * timeouts), makes progress: it is not reset at its timeouts, and once
 * released its job completes.
 */
TEST(wait_kept_while_its_word_moves)
{
	int64_t t0, job_ms = param_ms("job_timeout_ms");
	struct rbln_test_buf word, out;
	uint32_t w, end, bos[2];
	long long resets;
	struct rbln_test_mover m;
	struct file f;

	ASSERT_LT(0, job_ms);
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	moving_wait_new(_metadata, &f, &word, &out, bos, &end);
	resets = rbln_test_attr(0, "reset_count");
	t0 = rbln_test_now_ms();
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(150), 4 * job_ms));
	pthread_join(m.thread, NULL);
	TH_LOG("%u writes; still waiting after %lld ms", m.writes,
	       (long long)(rbln_test_now_ms() - t0));
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	word_set(word.cpu, FAR);
	EXPECT_EQ(1, file_wait(&f, w, 2000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);
	EXPECT_EQ(resets, rbln_test_attr(0, "reset_count"));
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
}

/*
 * The host stops moving the word after 1 s (its process died, say): the
 * job is reset at the first timeout that finds no move since the one
 * before, between one and two job timeouts after the last write, and the
 * job behind it on its queue runs.
 */
TEST(wait_reset_once_its_word_stops)
{
	int64_t t0, t, job_ms = param_ms("job_timeout_ms");
	uint32_t w, behind, end, bos[2];
	struct rbln_test_buf word, out;
	long long resets;
	struct rbln_test_mover m;
	struct file f;

	ASSERT_LT(0, job_ms);
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	moving_wait_new(_metadata, &f, &word, &out, bos, &end);
	resets = rbln_test_attr(0, "reset_count");
	t0 = rbln_test_now_ms();
	moving_wait_submit(_metadata, &f, &word, &out, bos, end, &w, &behind);
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(150), 2 * job_ms));
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, w, 10000));
	t = rbln_test_now_ms();
	rbln_test_mover_stop(&m);
	TH_LOG("%u writes, the last after %lld ms; reset %lld ms after it, %lld ms in",
	       m.writes, (long long)(m.last_ms - t0), (long long)(t - m.last_ms),
	       (long long)(t - t0));
	EXPECT_LT(2 * job_ms, t - t0);
	EXPECT_LE(job_ms * 8 / 10, t - m.last_ms);
	EXPECT_GE(job_ms * 5 / 2, t - m.last_ms);
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	EXPECT_EQ(1, file_wait(&f, behind, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[3]);
	EXPECT_EQ(0, ((uint32_t *)out.cpu)[1]);
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
}

/*
 * A word that never stops moving holds the ring no longer than
 * wait_timeout_ms, give or take the one job timeout the last check may
 * come after it; then the ring is reset and runs the next job.
 */
TEST(wait_kept_no_longer_than_wait_timeout)
{
	int64_t t0, t, job_ms = param_ms("job_timeout_ms"), cap_ms = param_ms("wait_timeout_ms");
	uint32_t w, behind, end, bos[2];
	struct rbln_test_buf word, out;
	long long resets;
	struct rbln_test_mover m;
	struct file f;

	ASSERT_LT(0, job_ms);
	ASSERT_LE(2 * job_ms, cap_ms) TH_LOG("run with a wait_timeout_ms of a few job timeouts");
	ASSERT_GE(8 * job_ms, cap_ms) TH_LOG("run with a wait_timeout_ms of a few job timeouts");
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	moving_wait_new(_metadata, &f, &word, &out, bos, &end);
	resets = rbln_test_attr(0, "reset_count");
	t0 = rbln_test_now_ms();
	moving_wait_submit(_metadata, &f, &word, &out, bos, end, &w, &behind);
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(100), 0));
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, w, 4 * cap_ms));
	t = rbln_test_now_ms();
	rbln_test_mover_stop(&m);
	TH_LOG("reset after %lld ms of %u writes; wait_timeout_ms %lld, job_timeout_ms %lld",
	       (long long)(t - t0), m.writes, (long long)cap_ms, (long long)job_ms);
	EXPECT_LE(cap_ms, t - t0);
	EXPECT_GE(cap_ms + job_ms + job_ms / 2, t - t0);
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	EXPECT_EQ(1, file_wait(&f, behind, 5000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[3]);
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
}

/*
 * A moving WAIT keeps only its own job: another queue's job, on another
 * ring, that hangs meanwhile is reset on time, and so is one that hangs
 * behind it on its ring. Then the file closes, or the device goes, while
 * a WAIT moves: neither waits for wait_timeout_ms.
 */
TEST(moving_wait_keeps_nothing_else)
{
	int64_t t0, t, job_ms = param_ms("job_timeout_ms"), cap_ms = param_ms("wait_timeout_ms");
	struct rbln_test_buf word, out, nop;
	struct drm_rbln_sync hung = { 0 };
	int sync_fd, udma, memfd, buf;
	struct rbln_drm_bo_info info;
	struct rbln_test_victim vic;
	struct del_arg del = { .vic = &vic };
	uint32_t w, q2, end, bos[2];
	long long resets;
	uint64_t *moving;
	struct rbln_test_mover m;
	struct file f;
	pthread_t th;

	ASSERT_LT(0, job_ms);
	ASSERT_LE(2 * job_ms, cap_ms);
	ASSERT_EQ(0, file_open(&f, 0, 4096));
	ASSERT_EQ(0, rbln_drm_queue_create(f.dev, RBLN_QUEUE_PRIORITY_NORMAL, &q2));
	moving_wait_new(_metadata, &f, &word, &out, bos, &end);
	ASSERT_EQ(0, rbln_test_buf_new(f.dev, 4096, RBLN_BO_HOST, 0, &nop));

	/* A hang on another ring while the WAIT moves: reset after one job timeout. */
	resets = rbln_test_attr(0, "reset_count");
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(100), 0));
	t0 = rbln_test_now_ms();
	ASSERT_EQ(0, rbln_test_submit_hung_nop(f.dev, q2, &nop, rbln_test_dev_name(0), &hung));
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, hung.handle, 4 * cap_ms));
	t = rbln_test_now_ms();
	TH_LOG("the hung job was reset after %lld ms, job_timeout_ms %lld",
	       (long long)(t - t0), (long long)job_ms);
	/* Kept once for the other ring's moves, it would take two. */
	EXPECT_GT(job_ms * 8 / 5, t - t0);
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	rbln_test_mover_stop(&m);
	word_set(word.cpu, FAR);
	EXPECT_EQ(1, file_wait(&f, w, 2000));
	EXPECT_EQ(AFTER, ((uint32_t *)out.cpu)[1]);
	EXPECT_EQ(resets + 1, rbln_test_attr(0, "reset_count"));

	/*
	 * A hang behind a WAIT kept for its moves, on its queue, so its ring:
	 * the moves counted before it became the ring's job keep it no more.
	 */
	word_set(word.cpu, 0);
	memset(out.cpu, 0, 4096);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_TRUE(parked(&f, &out, 0, w));
	ASSERT_EQ(0, rbln_test_submit_hung_nop(f.dev, f.queue, &nop, rbln_test_dev_name(0),
					       &hung));
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(100), 0));
	usleep((job_ms + job_ms / 2) * 1000);
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	rbln_test_mover_stop(&m);
	word_set(word.cpu, FAR);
	EXPECT_EQ(1, file_wait(&f, w, 2000));
	t0 = rbln_test_now_ms();
	EXPECT_EQ(-ETIMEDOUT, file_wait(&f, hung.handle, 4 * cap_ms));
	t = rbln_test_now_ms();
	TH_LOG("the hang behind the moving WAIT was reset %lld ms after it",
	       (long long)(t - t0));
	/* Kept once for the moves before it, it would take two. */
	EXPECT_GT(job_ms * 8 / 5, t - t0);
	EXPECT_EQ(resets + 2, rbln_test_attr(0, "reset_count"));
	rbln_test_buf_free(f.dev, &nop);

	/*
	 * The file closes while its WAIT moves, kept past a timeout already.
	 * The word is a memfd's, imported: a mapping of the file's own
	 * objects would keep the file open.
	 */
	udma = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, udma) TH_LOG("no /dev/udmabuf");
	memfd = rbln_test_sealed_memfd(4096);
	ASSERT_LE(0, memfd);
	moving = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, moving);
	word_set(moving, 0);
	buf = rbln_test_udmabuf(udma, memfd, 4096);
	ASSERT_LE(0, buf);
	ASSERT_EQ(0, rbln_drm_bo_import(f.dev, buf, &bos[0]));
	close(buf);
	ASSERT_EQ(0, rbln_drm_bo_info(f.dev, bos[0], &info));
	end = wait_emit(&f, 0, out.va, 0, info.va, FAR);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_EQ(0, rbln_test_mover_start(&m, moving, rbln_test_ms(100), 0));
	usleep((job_ms + job_ms / 2) * 1000);
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	t0 = rbln_test_now_ms();
	file_close(&f);
	t = rbln_test_now_ms();
	rbln_test_mover_stop(&m);
	munmap(moving, 4096);
	close(memfd);
	close(udma);
	TH_LOG("close with a moving WAIT took %lld ms", (long long)(t - t0));
	EXPECT_LE(job_ms * 8 / 10, t - t0);
	EXPECT_GE(2 * job_ms, t - t0);
	EXPECT_EQ(0, rbln_test_mem_used_settled(0));
	ASSERT_EQ(0, rbln_test_open(0, &f.dev));
	EXPECT_EQ(1, rbln_test_works(f.dev, 0x5eed));
	rbln_drm_close(f.dev);

	/* The device goes while a WAIT on it moves. */
	ASSERT_EQ(0, rbln_test_victim_get(&vic, FRESH_ID, 64));
	ASSERT_EQ(0, file_open_victim(&f, &vic, 4096));
	moving_wait_new(_metadata, &f, &word, &out, bos, &end);
	ASSERT_EQ(0, submit_at(&f, f.queue, 0, end, bos, 2, &w));
	ASSERT_EQ(0, rbln_test_mover_start(&m, word.cpu, rbln_test_ms(100), 0));
	usleep((job_ms + job_ms / 2) * 1000);
	EXPECT_TRUE(rbln_test_pending(f.dev, w));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(rbln_drm_fd(f.dev), w, &sync_fd));
	ASSERT_EQ(0, pthread_create(&th, NULL, del_device, &del));
	ASSERT_EQ(0, pthread_join(th, NULL));
	rbln_test_mover_stop(&m);
	EXPECT_EQ(0, del.ret);
	TH_LOG("removal with a moving WAIT took %lld ms", (long long)del.ms);
	EXPECT_GE(2 * job_ms, del.ms);
	EXPECT_EQ(-ENODEV, sync_file_wait_status(sync_fd, 10000));
	close(sync_fd);
	drmSyncobjDestroy(rbln_drm_fd(f.dev), w);
	rbln_test_buf_free(f.dev, &word);
	rbln_test_buf_free(f.dev, &out);
	file_close(&f);
	ASSERT_EQ(0, rbln_test_victim_restore(&vic));
}

TEST_HARNESS_MAIN
