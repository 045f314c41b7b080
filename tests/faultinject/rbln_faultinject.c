// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_faultinject - every ioctl path of rbln.ko with its allocations
 * failed in turn
 *
 * For each operation (open of the node, GET_PARAM, BO_CREATE of host and
 * device objects, BO_INFO, QUEUE_CREATE and QUEUE_DESTROY, SUBMIT with
 * objects, waits and a signal syncobj, VM_RESERVE, VM_BIND maps and
 * unmaps with waits and a signal syncobj and the fdinfo that counts what
 * they hold, PRIME export and import within a
 * device and between two rbln devices), N = 1, 2, ... : arm the kernel to
 * fail the N-th allocation of this thread (/proc/thread-self/fail-nth,
 * honoured by failslab and fail_page_alloc), run the operation once, and
 * check that it either succeeded or failed with an errno, that everything
 * it made is gone again (device memory used back to what it was), and that
 * the same operation then works. The loop ends at the first N at which the
 * operation finished without a failure being injected: every allocation it
 * makes has then failed once. Oopses, KASAN, lockdep, ... are caught by
 * rbln-vm, and kmemleak's scan after the module's unload catches leaks.
 *
 * Which allocations count: only those with a frame of rbln.ko's .text on
 * the stack (the stacktrace filter's require-start/end: the section's
 * address from /sys/module/rbln/sections/.text, its size from the module
 * file, $RBLN_FAULTINJECT_MODULE), so the errors injected are the driver's
 * to handle, and none made inside the kernel's gpu_buddy allocator
 * (reject-start/end: the text of drivers/gpu/buddy.c, found in
 * /proc/kallsyms). gpu_buddy is left out because its split error path is
 * broken (docs/upstream/0001-gpu-buddy-*.patch): a failed split_block()
 * leaves the block in its free tree while __gpu_buddy_free() frees it,
 * and the next allocation walks freed memory (KASAN slab-use-after-free in
 * rb_last, then "kernel BUG at drivers/gpu/buddy.c:775"). That is not a
 * bug rbln.ko can handle; the test buddy_split_error_path reproduces it
 * when RBLN_FAULTINJECT_BUDDY=1 (and is skipped otherwise).
 *
 * Two tests look past the errno: a DEVICE object whose creation failed
 * halfway must have left no page table entry the file's jobs could still
 * use (bo_create_device_failure_maps_nothing), and run_job, which gives a
 * context its hardware index, must allocate nothing at all
 * (context_index_needs_no_allocation).
 *
 * Needs a kernel with CONFIG_FAULT_INJECTION_DEBUG_FS, FAILSLAB,
 * FAIL_PAGE_ALLOC and FAULT_INJECTION_STACKTRACE_FILTER (the debug kernel:
 * `tools/setup --debug-kernel`); skipped elsewhere. Run with emu_devices=2.
 */

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xf86drm.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define DEBUGFS		"/sys/kernel/debug"
#define FAIL_NTH	"/proc/thread-self/fail-nth"
#define MAX_NTH		400	/* more allocations than this in one ioctl: a bug */

static const char *const fault_attrs[] = { "failslab", "fail_page_alloc" };

/* --- the fault-injection controls ------------------------------------------ */

static bool have_fault_injection(void)
{
	return access(DEBUGFS "/failslab/require-start", W_OK) == 0 &&
	       access(DEBUGFS "/fail_page_alloc/require-start", W_OK) == 0 &&
	       access(FAIL_NTH, W_OK) == 0;
}

static int attr_write(const char *attr, const char *file, const char *fmt, ...)
{
	char path[128], value[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), DEBUGFS "/%s/%s", attr, file);
	return rbln_sysfs_write(path, value);
}

/*
 * Both failslab and fail_page_alloc: no random failures (probability 0),
 * only those fail-nth asks for; GFP_KERNEL allocations count too
 * (ignore-gfp-wait N), and so do order-0 pages; a short report of each
 * injection (verbose 1: its stack dump would read as a splat).
 */
static int fault_setup(unsigned long req_start, unsigned long req_end,
		       unsigned long rej_start, unsigned long rej_end)
{
	unsigned int i;
	int err = 0;

	for (i = 0; i < sizeof(fault_attrs) / sizeof(fault_attrs[0]); i++) {
		const char *a = fault_attrs[i];

		err = err ?: attr_write(a, "probability", "0");
		err = err ?: attr_write(a, "interval", "1");
		err = err ?: attr_write(a, "times", "1");
		err = err ?: attr_write(a, "space", "0");
		err = err ?: attr_write(a, "task-filter", "Y");
		err = err ?: attr_write(a, "verbose", "1");
		err = err ?: attr_write(a, "ignore-gfp-wait", "N");
		err = err ?: attr_write(a, "stacktrace-depth", "32");
		/* end first: start <= end must hold at every step */
		err = err ?: attr_write(a, "require-end", "%lu", req_end);
		err = err ?: attr_write(a, "require-start", "%lu", req_start);
		err = err ?: attr_write(a, "reject-end", "%lu", rej_end);
		err = err ?: attr_write(a, "reject-start", "%lu", rej_start);
	}
	err = err ?: attr_write("fail_page_alloc", "ignore-gfp-highmem", "N");
	err = err ?: attr_write("fail_page_alloc", "min-order", "0");
	return err;
}

static void fault_reset(void)
{
	unsigned int i;

	for (i = 0; i < sizeof(fault_attrs) / sizeof(fault_attrs[0]); i++) {
		attr_write(fault_attrs[i], "probability", "0");
		attr_write(fault_attrs[i], "task-filter", "Y");
		attr_write(fault_attrs[i], "require-start", "0");
		attr_write(fault_attrs[i], "require-end", "%lu", (unsigned long)-1);
		attr_write(fault_attrs[i], "reject-start", "0");
		attr_write(fault_attrs[i], "reject-end", "0");
		attr_write(fault_attrs[i], "verbose", "2");
	}
}

static int fail_nth_fd = -1;

static int fail_nth_arm(unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	return pwrite(fail_nth_fd, buf, len, 0) == len ? 0 : -errno;
}

/* Disarms; true when the armed failure was injected. */
static bool fail_nth_disarm(void)
{
	char buf[16] = "";
	ssize_t n = pread(fail_nth_fd, buf, sizeof(buf) - 1, 0);
	bool injected = n > 0 && strtoul(buf, NULL, 10) == 0;

	fail_nth_arm(0);
	return injected;
}

/* A line in the kernel log before each injection: dmesg tells which. */
static void kmsg(const char *fmt, ...)
{
	char line[200];
	va_list ap;
	int fd, len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, line, len) < 0)
		len = 0;	/* the log is a courtesy */
	close(fd);
}

/* --- where rbln.ko and gpu_buddy are --------------------------------------- */

static unsigned long read_hex(const char *path)
{
	unsigned long v = 0;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%lx", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* Size of section @name in the ELF file @path, 0 if not found. */
static unsigned long elf_section_size(const char *path, const char *name)
{
	unsigned long size = 0;
	Elf64_Shdr *sh = NULL;
	char *names = NULL;
	Elf64_Ehdr eh;
	int fd, i;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(*sh) || eh.e_shstrndx >= eh.e_shnum)
		goto out;
	sh = calloc(eh.e_shnum, sizeof(*sh));
	if (!sh || pread(fd, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff) !=
		   (ssize_t)(eh.e_shnum * sizeof(*sh)))
		goto out;
	names = calloc(1, sh[eh.e_shstrndx].sh_size + 1);
	if (!names || pread(fd, names, sh[eh.e_shstrndx].sh_size, sh[eh.e_shstrndx].sh_offset) !=
		      (ssize_t)sh[eh.e_shstrndx].sh_size)
		goto out;
	for (i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_name < sh[eh.e_shstrndx].sh_size &&
		    !strcmp(names + sh[i].sh_name, name))
			size = sh[i].sh_size;
out:
	free(names);
	free(sh);
	close(fd);
	return size;
}

/*
 * The text of drivers/gpu/buddy.c (built in): from its first exported
 * function (global, "T": gpu_get_buddy, gpu_buddy_*) to the symbol after
 * its last one. Its static functions lie between, or are only ever called
 * from the exported ones; its module init and exit functions ("t", in
 * .init.text and wherever) are left out, lest the range span the kernel.
 */
static int buddy_text(unsigned long *start, unsigned long *end)
{
	unsigned long addr, lo = ~0ul, hi = 0, next = ~0ul;
	char type, name[256], line[512];
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return -errno;
	/* first pass: the gpu_buddy_* functions */
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3 || !addr)
			continue;
		if (type == 'T' && !strchr(line, '[') &&
		    (!strncmp(name, "gpu_buddy_", 10) || !strcmp(name, "gpu_get_buddy"))) {
			lo = addr < lo ? addr : lo;
			hi = addr > hi ? addr : hi;
		}
	}
	/* second pass: the first text symbol after the last of them */
	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) == 3 &&
		    (type == 't' || type == 'T') && addr > hi && addr < next)
			next = addr;
	fclose(f);
	if (!hi || next == ~0ul || next - lo > (1ul << 20))
		return -ENOENT;
	*start = lo;
	*end = next;
	return 0;
}

/*
 * The text of rbln.ko's function @name, from /proc/kallsyms: its address
 * to the next text symbol's.
 */
static int module_function(const char *name, unsigned long *start, unsigned long *end)
{
	unsigned long addr, lo = 0, next = ~0ul;
	char type, sym[256], line[512];
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) == 3 &&
		    (type == 't' || type == 'T') && strstr(line, "[rbln]") && !strcmp(sym, name))
			lo = addr;
	rewind(f);
	while (lo && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) == 3 &&
		    (type == 't' || type == 'T') && addr > lo && addr < next)
			next = addr;
	fclose(f);
	if (!lo || next == ~0ul)
		return -ENOENT;
	*start = lo;
	*end = next;
	return 0;
}

/* --- the test ---------------------------------------------------------------- */

#define PAGE		4096ull
#define MIB		(1ull << 20)

FIXTURE(fi) {
	struct rbln_drm_device *a;	/* device 0 */
	struct rbln_drm_device *a2;	/* device 0, another file */
	struct rbln_drm_device *b;	/* device 1 */
	unsigned long text_start, text_end;
	unsigned long buddy_start, buddy_end;
	/* what the operations work on, made before any fault is armed */
	uint32_t queue;
	struct rbln_test_buf cmd;	/* HOST: the command buffer */
	struct rbln_test_buf host;	/* HOST: 64 KiB */
	struct rbln_test_buf dev;	/* DEVICE: 1 MiB */
	uint32_t cmd_len;
	uint32_t wait_syncobj, signal_syncobj;
	uint64_t bind_va;		/* a VM_BIND reservation of 4 MiB */
	int host_fd, dev_fd;		/* dma-bufs of host and dev */
	long long used0, used1;		/* device memory used with all that */
};

FIXTURE_SETUP(fi)
{
	const char *ko = getenv("RBLN_FAULTINJECT_MODULE");
	struct rbln_drm_cmd c;
	unsigned long size;

	self->host_fd = self->dev_fd = -1;
	if (!have_fault_injection())
		SKIP(return, "no failslab/fail_page_alloc with a stacktrace filter in %s, "
		     "or no %s: needs the debug kernel (tools/setup --debug-kernel)",
		     DEBUGFS, FAIL_NTH);
	ASSERT_NE(NULL, ko) TH_LOG("RBLN_FAULTINJECT_MODULE: the path of rbln.ko");

	self->text_start = read_hex("/sys/module/rbln/sections/.text");
	size = elf_section_size(ko, ".text");
	ASSERT_NE(0, self->text_start) TH_LOG("cannot read /sys/module/rbln/sections/.text");
	ASSERT_NE(0, size) TH_LOG("no .text in %s", ko);
	self->text_end = self->text_start + size;
	ASSERT_EQ(0, buddy_text(&self->buddy_start, &self->buddy_end))
		TH_LOG("no gpu_buddy_* functions in /proc/kallsyms");
	if (getenv("RBLN_FAULTINJECT_BUDDY") && !strcmp(getenv("RBLN_FAULTINJECT_BUDDY"), "1"))
		self->buddy_start = self->buddy_end = 0;	/* buddy_split_error_path */
	TH_LOG("rbln.ko .text %#lx-%#lx, gpu_buddy %#lx-%#lx", self->text_start,
	       self->text_end, self->buddy_start, self->buddy_end);
	ASSERT_EQ(0, fault_setup(self->text_start, self->text_end,
				 self->buddy_start, self->buddy_end));
	fail_nth_fd = open(FAIL_NTH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fail_nth_fd);

	ASSERT_EQ(0, rbln_test_open(0, &self->a));
	ASSERT_EQ(0, rbln_test_open(0, &self->a2));
	ASSERT_EQ(0, rbln_test_open(1, &self->b)) TH_LOG("needs emu_devices >= 2");

	ASSERT_EQ(0, rbln_drm_queue_create(self->a, RBLN_QUEUE_PRIORITY_NORMAL, &self->queue));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, 64 * 1024, RBLN_BO_HOST, 0, &self->cmd));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, 64 * 1024, RBLN_BO_HOST, 0, &self->host));
	ASSERT_EQ(0, rbln_test_buf_new(self->a, MIB, RBLN_BO_DEVICE, 0, &self->dev));
	memset(self->host.cpu, 0x5a, self->host.size);
	rbln_drm_cmd_init(&c, self->cmd.cpu, self->cmd.size);
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->dev.va, self->host.va, 64 * 1024));
	ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, self->host.va, self->dev.va + 4096, 4096));
	self->cmd_len = c.len;
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(self->a), DRM_SYNCOBJ_CREATE_SIGNALED,
				      &self->wait_syncobj));
	ASSERT_EQ(0, drmSyncobjCreate(rbln_drm_fd(self->a), 0, &self->signal_syncobj));
	ASSERT_EQ(0, rbln_drm_vm_reserve(self->a, 4 * MIB, 0, &self->bind_va));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, self->host.handle, &self->host_fd));
	ASSERT_EQ(0, rbln_drm_bo_export(self->a, self->dev.handle, &self->dev_fd));
	self->used0 = rbln_test_mem_used(0);
	self->used1 = rbln_test_mem_used(1);
	ASSERT_LE(MIB, self->used0);
	ASSERT_LE(0, self->used1);
}

FIXTURE_TEARDOWN(fi)
{
	if (fail_nth_fd >= 0) {
		fail_nth_arm(0);
		close(fail_nth_fd);
		fail_nth_fd = -1;
	}
	if (!have_fault_injection())
		return;
	fault_reset();
	if (self->host_fd >= 0)
		close(self->host_fd);
	if (self->dev_fd >= 0)
		close(self->dev_fd);
	if (self->a) {
		if (self->bind_va)
			EXPECT_EQ(0, rbln_drm_vm_release(self->a, self->bind_va));
		drmSyncobjDestroy(rbln_drm_fd(self->a), self->wait_syncobj);
		drmSyncobjDestroy(rbln_drm_fd(self->a), self->signal_syncobj);
		rbln_test_buf_free(self->a, &self->cmd);
		rbln_test_buf_free(self->a, &self->host);
		rbln_test_buf_free(self->a, &self->dev);
		rbln_drm_close(self->a);
	}
	if (self->a2)
		rbln_drm_close(self->a2);
	if (self->b)
		rbln_drm_close(self->b);
	EXPECT_EQ(0, rbln_test_mem_used(0));
	EXPECT_EQ(0, rbln_test_mem_used(1));
}

/*
 * One operation: @run makes something with faults armed and returns 0 or
 * -errno (once the armed failure is injected, nothing else fails: @run may
 * clean up after itself); @undo (faults disarmed) removes what a
 * successful @run made and returns 0, or -errno if what it made was wrong.
 */
struct op {
	const char *name;
	int (*run)(FIXTURE_DATA(fi) *self, void *state);
	int (*undo)(FIXTURE_DATA(fi) *self, void *state);
	bool allocates;	/* rbln.ko allocates in it: no injection is a bug here */
};

/* The errors an allocation failure may turn into. */
static bool clean_error(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -EAGAIN || err == -EINTR ||
	       err == -ENOBUFS;
}

/*
 * Fails each allocation of @op in turn. Returns how many were failed, or
 * -1 after a failed check (logged).
 */
static int exercise(struct __test_metadata *_metadata, FIXTURE_DATA(fi) *self,
		    const struct op *op)
{
	unsigned int n;
	int failed = 0;

	for (n = 1; n <= MAX_NTH; n++) {
		uint64_t state[8] = { 0 };
		bool injected;
		int ret;

		kmsg("rbln_faultinject: %s, allocation %u fails\n", op->name, n);
		if (fail_nth_arm(n))
			return -1;
		ret = op->run(self, state);
		injected = fail_nth_disarm();
		if (!ret && op->undo && (ret = op->undo(self, state))) {
			TH_LOG("%s, allocation %u failed, the call succeeded but its result is "
			       "wrong: %d (%s)", op->name, n, ret, strerror(-ret));
			return -1;
		}
		if (ret && !injected) {
			TH_LOG("%s: %d (%s) without an injected failure", op->name, ret,
			       strerror(-ret));
			return -1;
		}
		if (ret && !clean_error(ret)) {
			TH_LOG("%s, allocation %u failed: %d (%s), not an out-of-memory error",
			       op->name, n, ret, strerror(-ret));
			return -1;
		}
		if (rbln_test_mem_used(0) != self->used0 || rbln_test_mem_used(1) != self->used1) {
			TH_LOG("%s, allocation %u failed (-> %d): device memory used %lld, %lld; "
			       "was %lld, %lld", op->name, n, ret, rbln_test_mem_used(0),
			       rbln_test_mem_used(1), self->used0, self->used1);
			return -1;
		}
		if (!injected) {
			TH_LOG("%s: %u allocations failed in turn, %d of them failed the call",
			       op->name, n - 1, failed);
			if (n == 1 && op->allocates) {
				TH_LOG("%s: no allocation of rbln.ko was failed: is the "
				       "stacktrace filter right?", op->name);
				return -1;
			}
			return failed;
		}
		failed += !!ret;
		/* It still works, and leaves nothing behind. */
		memset(state, 0, sizeof(state));
		ret = op->run(self, state);
		if (ret) {
			TH_LOG("%s after allocation %u failed: %d (%s) without faults",
			       op->name, n, ret, strerror(-ret));
			return -1;
		}
		if (op->undo && (ret = op->undo(self, state))) {
			TH_LOG("%s after allocation %u failed: %d (%s) from its result",
			       op->name, n, ret, strerror(-ret));
			return -1;
		}
	}
	TH_LOG("%s: still allocating after %u allocations", op->name, MAX_NTH);
	return -1;
}

#define EXERCISE(op) ASSERT_LE(0, exercise(_metadata, self, op))

/* open and close of the accel node */
static int run_open(FIXTURE_DATA(fi) *self, void *state)
{
	struct rbln_drm_device *dev;
	int ret = rbln_test_open(1, &dev);

	if (!ret)
		rbln_drm_close(dev);
	return ret;
}

static int run_get_param(FIXTURE_DATA(fi) *self, void *state)
{
	static const uint32_t params[] = {
		RBLN_PARAM_ABI_VERSION, RBLN_PARAM_DEVICE_MEMORY_SIZE,
		RBLN_PARAM_DEVICE_MEMORY_USED, RBLN_PARAM_ISA_CAPS, RBLN_PARAM_RESET_COUNT,
	};
	uint64_t v;
	unsigned int i;
	int ret;

	for (i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		ret = rbln_drm_get_param(self->a, params[i], &v);
		if (ret)
			return ret;
	}
	return 0;
}

static int undo_bo(FIXTURE_DATA(fi) *self, void *state)
{
	uint32_t *h = state;

	return rbln_drm_bo_close(self->a, *h);
}

static int run_bo_create_host(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_bo_create(self->a, 256 * 1024, RBLN_BO_HOST, 0, state, NULL);
}

static int run_bo_create_device(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_bo_create(self->a, 3 * MIB + PAGE, RBLN_BO_DEVICE, RBLN_BO_READ_ONLY,
				  state, NULL);
}

static int run_bo_info(FIXTURE_DATA(fi) *self, void *state)
{
	struct rbln_drm_bo_info info;
	int ret;

	ret = rbln_drm_bo_info(self->a, self->dev.handle, &info);
	return ret ?: rbln_drm_bo_info_by_va(self->a, self->host.va + 4096, &info);
}

static int run_queue_create(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_queue_create(self->a, RBLN_QUEUE_PRIORITY_LOW, state);
}

static int undo_queue(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_queue_destroy(self->a, *(uint32_t *)state);
}

/* QUEUE_CREATE then QUEUE_DESTROY, both armed (with a job in between) */
static int run_queue_destroy(FIXTURE_DATA(fi) *self, void *state)
{
	uint32_t bos[3] = { self->host.handle, self->dev.handle, self->cmd.handle };
	struct drm_rbln_sync signal = { 0 };
	uint32_t q;
	int ret;

	ret = rbln_drm_queue_create(self->a, RBLN_QUEUE_PRIORITY_NORMAL, &q);
	if (ret)
		return ret;
	ret = drmSyncobjCreate(rbln_drm_fd(self->a), 0, &signal.handle) ? -errno : 0;
	if (!ret) {
		ret = rbln_drm_submit(self->a, q, self->cmd.va, self->cmd_len, bos, 3,
				      NULL, 0, &signal);
		if (!ret)
			drmSyncobjWait(rbln_drm_fd(self->a), &signal.handle, 1,
				       rbln_test_deadline_ns(60000), 0, NULL);
		drmSyncobjDestroy(rbln_drm_fd(self->a), signal.handle);
	}
	if (rbln_drm_queue_destroy(self->a, q))
		ret = ret ?: rbln_drm_queue_destroy(self->a, q);
	return ret;
}

static int run_submit(FIXTURE_DATA(fi) *self, void *state)
{
	uint32_t bos[3] = { self->host.handle, self->dev.handle, self->cmd.handle };
	struct drm_rbln_sync wait = { .handle = self->wait_syncobj };
	struct drm_rbln_sync signal = { .handle = self->signal_syncobj };

	return rbln_drm_submit(self->a, self->queue, self->cmd.va, self->cmd_len, bos, 3,
			       &wait, 1, &signal);
}

/* A submitted job finishes, and succeeds. */
static int undo_submit(FIXTURE_DATA(fi) *self, void *state)
{
	int status = 0, ret;

	drmSyncobjWait(rbln_drm_fd(self->a), &self->signal_syncobj, 1,
		       rbln_test_deadline_ns(60000), 0, NULL);
	ret = rbln_drm_fence_status(self->a, self->signal_syncobj, 0, &status);
	drmSyncobjReset(rbln_drm_fd(self->a), &self->signal_syncobj, 1);
	if (ret)
		return ret;
	return status == 1 ? 0 : status ?: -ETIMEDOUT;
}

/* VM_RESERVE, and the VM_RELEASE that gives the range back */
static int run_vm_reserve(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_vm_reserve(self->a, 4 * MIB, 0, (uint64_t *)state);
}

static int undo_vm_reserve(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_drm_vm_release(self->a, *(uint64_t *)state);
}

/* Waits for the last bind job's signal: 0 once it succeeded. */
static int bind_done(FIXTURE_DATA(fi) *self)
{
	return undo_submit(self, NULL);
}

/*
 * VM_BIND of the device object's first half and of the host object, each
 * behind a wait and with a signal syncobj: the bind jobs run, and succeed.
 */
static int run_vm_bind_map(FIXTURE_DATA(fi) *self, void *state)
{
	struct drm_rbln_sync wait = { .handle = self->wait_syncobj };
	struct drm_rbln_sync signal = { .handle = self->signal_syncobj };
	int ret;

	ret = rbln_drm_vm_map(self->a, self->bind_va, MIB / 2, self->dev.handle, 0, 0, &wait, 1,
			      &signal);
	if (ret)
		return ret;
	ret = bind_done(self);
	if (ret)
		return ret;
	ret = rbln_drm_vm_map(self->a, self->bind_va + 2 * MIB, 64 * 1024, self->host.handle, 0,
			      RBLN_VM_BIND_READ_ONLY, &wait, 1, &signal);
	if (ret) {
		rbln_test_vm_unmap(self->a, self->bind_va, MIB / 2);
		return ret;
	}
	return bind_done(self);
}

/*
 * The same maps, then fdinfo, which lists the objects mappings hold: when
 * that list cannot be had, fdinfo still reads, and takes no reference.
 */
static int run_vm_bind_fdinfo(FIXTURE_DATA(fi) *self, void *state)
{
	int ret = run_vm_bind_map(self, state);

	if (!ret && rbln_test_fdinfo_mem(rbln_drm_fd(self->a), "total", "device") < MIB)
		ret = -EIO;
	return ret;
}

static int undo_vm_bind_map(FIXTURE_DATA(fi) *self, void *state)
{
	return rbln_test_vm_unmap(self->a, self->bind_va, 4 * MIB);
}

/*
 * VM_BIND unmap of part of a mapping, which splits it in two, and then
 * the rest: the map before it is made with faults armed too.
 */
static int run_vm_bind_unmap(FIXTURE_DATA(fi) *self, void *state)
{
	struct drm_rbln_sync signal = { .handle = self->signal_syncobj };
	int ret;

	ret = rbln_drm_vm_map(self->a, self->bind_va, MIB, self->dev.handle, 0, 0, NULL, 0,
			      &signal);
	if (ret)
		return ret;
	ret = rbln_drm_vm_unmap(self->a, self->bind_va + 4096, 4096, NULL, 0, &signal);
	if (!ret)
		ret = bind_done(self);
	if (!ret)
		ret = rbln_drm_vm_unmap(self->a, self->bind_va, MIB, NULL, 0, &signal);
	if (!ret)
		return bind_done(self);
	/* after the one failure, the cleanup cannot fail */
	rbln_test_vm_unmap(self->a, self->bind_va, MIB);
	return ret;
}

static int run_export(FIXTURE_DATA(fi) *self, void *state)
{
	int fd, ret;

	ret = rbln_drm_bo_export(self->a, self->host.handle, &fd);
	if (ret)
		return ret;
	close(fd);
	ret = rbln_drm_bo_export(self->a, self->dev.handle, &fd);
	if (ret)
		return ret;
	close(fd);
	return 0;
}

/* state: [0] the device the import went to, [1] the handle */
static int undo_import(FIXTURE_DATA(fi) *self, void *state)
{
	struct rbln_drm_device **dev = state;
	uint32_t *h = (uint32_t *)((uint64_t *)state + 1);

	return rbln_drm_bo_close(*dev, *h);
}

static int import(struct rbln_drm_device *dev, int fd, void *state)
{
	uint32_t *h = (uint32_t *)((uint64_t *)state + 1);

	*(struct rbln_drm_device **)state = dev;
	return rbln_drm_bo_import(dev, fd, h);
}

static int run_import_host_same_device(FIXTURE_DATA(fi) *self, void *state)
{
	return import(self->a2, self->host_fd, state);
}

static int run_import_device_same_device(FIXTURE_DATA(fi) *self, void *state)
{
	return import(self->a2, self->dev_fd, state);
}

static int run_import_host_other_device(FIXTURE_DATA(fi) *self, void *state)
{
	return import(self->b, self->host_fd, state);
}

static int run_import_device_other_device(FIXTURE_DATA(fi) *self, void *state)
{
	return import(self->b, self->dev_fd, state);
}

/* A job on device 1 reading device 0's memory through the import. */
static int run_submit_imported(FIXTURE_DATA(fi) *self, void *state)
{
	struct drm_rbln_sync signal = { 0 };
	struct rbln_test_buf cmd, out;
	struct rbln_drm_cmd c;
	uint32_t h, q, bos[3];
	int ret, status = 0;
	uint64_t va;

	ret = rbln_drm_queue_create(self->b, RBLN_QUEUE_PRIORITY_NORMAL, &q);
	if (ret)
		return ret;
	ret = rbln_drm_bo_import(self->b, self->dev_fd, &h);
	if (ret)
		goto destroy_queue;
	ret = rbln_test_buf_new(self->b, 64 * 1024, RBLN_BO_HOST, 0, &cmd);
	if (ret)
		goto close_import;
	ret = rbln_test_buf_new(self->b, 64 * 1024, RBLN_BO_HOST, 0, &out);
	if (ret)
		goto free_cmd;
	{
		struct rbln_drm_bo_info info;

		ret = rbln_drm_bo_info(self->b, h, &info);
		if (ret)
			goto free_out;
		va = info.va;
	}
	rbln_drm_cmd_init(&c, cmd.cpu, cmd.size);
	rbln_drm_cmd_dma_copy(&c, out.va, va, 4096);
	ret = drmSyncobjCreate(rbln_drm_fd(self->b), 0, &signal.handle) ? -errno : 0;
	if (ret)
		goto free_out;
	bos[0] = h;
	bos[1] = out.handle;
	bos[2] = cmd.handle;
	ret = rbln_drm_submit(self->b, q, cmd.va, c.len, bos, 3, NULL, 0, &signal);
	if (!ret) {
		drmSyncobjWait(rbln_drm_fd(self->b), &signal.handle, 1,
			       rbln_test_deadline_ns(60000), 0, NULL);
		if (rbln_drm_fence_status(self->b, signal.handle, 0, &status) || status != 1)
			ret = status < 0 ? status : -ETIMEDOUT;
	}
	drmSyncobjDestroy(rbln_drm_fd(self->b), signal.handle);
free_out:
	rbln_test_buf_free(self->b, &out);
free_cmd:
	rbln_test_buf_free(self->b, &cmd);
close_import:
	rbln_drm_bo_close(self->b, h);
destroy_queue:
	rbln_drm_queue_destroy(self->b, q);
	return ret;
}

TEST_F(fi, open_close)
{
	static const struct op op = { "open", run_open, NULL, true };

	EXERCISE(&op);
}

TEST_F(fi, get_param)
{
	static const struct op op = { "GET_PARAM", run_get_param, NULL, false };

	EXERCISE(&op);
}

TEST_F(fi, bo_create_host)
{
	static const struct op op = { "BO_CREATE(host)", run_bo_create_host, undo_bo, true };

	EXERCISE(&op);
}

TEST_F(fi, bo_create_device)
{
	static const struct op op = { "BO_CREATE(device)", run_bo_create_device, undo_bo, true };

	EXERCISE(&op);
}

/*
 * A DEVICE object of 4 MiB spans page tables of two or more 2 MiB ranges,
 * which its creation makes as it writes the entries. When one of those
 * allocations fails, no entry it wrote may stay: the object's memory goes
 * back to the allocator, and a job of the file reading the address would
 * reach whoever gets that memory next. Each round runs on a new file, whose
 * address space has no table yet, and reads the object's first page there
 * after the failure: that must fault.
 */
struct fresh_file {
	struct rbln_drm_device *dev;
	uint32_t queue;
	struct rbln_test_buf cmd, out;
};

static int fresh_file_open(struct fresh_file *f)
{
	memset(f, 0, sizeof(*f));
	return rbln_test_open(0, &f->dev) ?:
	       rbln_drm_queue_create(f->dev, RBLN_QUEUE_PRIORITY_NORMAL, &f->queue) ?:
	       rbln_test_buf_new(f->dev, 64 * 1024, RBLN_BO_HOST, 0, &f->cmd) ?:
	       rbln_test_buf_new(f->dev, 64 * 1024, RBLN_BO_HOST, 0, &f->out);
}

static void fresh_file_close(struct fresh_file *f)
{
	if (!f->dev)
		return;
	rbln_test_buf_free(f->dev, &f->out);
	rbln_test_buf_free(f->dev, &f->cmd);
	rbln_drm_close(f->dev);
}

TEST_F(fi, bo_create_device_failure_maps_nothing)
{
	struct fresh_file f;
	struct rbln_drm_cmd c;
	uint64_t va, where;
	unsigned int n;
	bool injected;
	uint32_t h;
	int ret;

	/* Where the object lands in a new file: the same place every time. */
	ASSERT_EQ(0, fresh_file_open(&f));
	ASSERT_EQ(0, rbln_drm_bo_create(f.dev, 4 * MIB, RBLN_BO_DEVICE, 0, &h, &where));
	fresh_file_close(&f);

	for (n = 1; n <= MAX_NTH; n++) {
		ASSERT_EQ(0, fresh_file_open(&f));
		kmsg("rbln_faultinject: BO_CREATE(device, 4 MiB), allocation %u fails\n", n);
		ASSERT_EQ(0, fail_nth_arm(n));
		ret = rbln_drm_bo_create(f.dev, 4 * MIB, RBLN_BO_DEVICE, 0, &h, &va);
		injected = fail_nth_disarm();
		if (!ret) {
			EXPECT_EQ(where, va);
			fresh_file_close(&f);
			if (!injected)
				break;
			continue;
		}
		EXPECT_TRUE(clean_error(ret)) TH_LOG("allocation %u: %d", n, ret);
		rbln_drm_cmd_init(&c, f.cmd.cpu, f.cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_dma_copy(&c, f.out.va, where, PAGE));
		EXPECT_EQ(-EFAULT, rbln_test_run(f.dev, f.queue, &f.cmd, c.len, &f.out.handle, 1,
						 60000))
			TH_LOG("allocation %u failed the creation, yet the device reads its "
			       "address %#" PRIx64, n, where);
		fresh_file_close(&f);
		EXPECT_EQ(self->used0, rbln_test_mem_used(0));
	}
	EXPECT_GE(MAX_NTH, n);
}

/*
 * run_job gives a context its hardware index, in the path that signals
 * fences, where an allocation may wait for the very fences it holds up:
 * nothing may be allocated there. With every allocation under
 * rbln_vm_pin() failing, in any task (the scheduler's worker runs the
 * job), the first job of each of more files than an IDA keeps without
 * allocating (62) still gets an index and runs.
 */
#define HELD_CONTEXTS	70

TEST_F(fi, context_index_needs_no_allocation)
{
	static struct fresh_file held[HELD_CONTEXTS];
	unsigned long start = 0, end = 0;
	struct rbln_drm_cmd c;
	unsigned int i, a;
	int status;

	ASSERT_EQ(0, module_function("rbln_vm_pin", &start, &end));
	ASSERT_EQ(0, fault_setup(start, end, 0, 0));
	for (a = 0; a < sizeof(fault_attrs) / sizeof(fault_attrs[0]); a++) {
		ASSERT_EQ(0, attr_write(fault_attrs[a], "task-filter", "N"));
		ASSERT_EQ(0, attr_write(fault_attrs[a], "times", "-1"));
		ASSERT_EQ(0, attr_write(fault_attrs[a], "probability", "100"));
	}
	for (i = 0; i < HELD_CONTEXTS; i++) {
		ASSERT_EQ(0, fresh_file_open(&held[i]));
		rbln_drm_cmd_init(&c, held[i].cmd.cpu, held[i].cmd.size);
		ASSERT_EQ(0, rbln_drm_cmd_nop(&c));
		status = rbln_test_run(held[i].dev, held[i].queue, &held[i].cmd, c.len, NULL, 0,
				       60000);
		ASSERT_EQ(1, status) TH_LOG("the job of file %u: %d", i, status);
	}
	EXPECT_LE(HELD_CONTEXTS, rbln_test_attr(0, "contexts_used"));
	for (i = 0; i < HELD_CONTEXTS; i++)
		fresh_file_close(&held[i]);
}

TEST_F(fi, bo_info)
{
	static const struct op op = { "BO_INFO", run_bo_info, NULL, false };

	EXERCISE(&op);
}

TEST_F(fi, queue_create)
{
	static const struct op op = { "QUEUE_CREATE", run_queue_create, undo_queue, true };

	EXERCISE(&op);
}

TEST_F(fi, queue_destroy)
{
	static const struct op op = { "QUEUE_CREATE+QUEUE_DESTROY", run_queue_destroy, NULL, true };

	EXERCISE(&op);
}

TEST_F(fi, submit)
{
	static const struct op op = { "SUBMIT", run_submit, undo_submit, true };

	EXERCISE(&op);
}

TEST_F(fi, vm_reserve)
{
	static const struct op op = { "VM_RESERVE", run_vm_reserve, undo_vm_reserve, true };

	EXERCISE(&op);
}

TEST_F(fi, vm_bind_map)
{
	static const struct op op = { "VM_BIND map", run_vm_bind_map, undo_vm_bind_map, true };

	EXERCISE(&op);
}

TEST_F(fi, vm_bind_fdinfo)
{
	static const struct op op = { "VM_BIND map + fdinfo", run_vm_bind_fdinfo,
				      undo_vm_bind_map, true };

	EXERCISE(&op);
}

TEST_F(fi, vm_bind_unmap)
{
	static const struct op op = { "VM_BIND map+unmap", run_vm_bind_unmap, NULL, true };

	EXERCISE(&op);
}

TEST_F(fi, prime_export)
{
	static const struct op op = { "PRIME export", run_export, NULL, false };

	EXERCISE(&op);
}

TEST_F(fi, prime_import_same_device)
{
	static const struct op host = { "PRIME import host, same device",
					run_import_host_same_device, undo_import, true };
	static const struct op dev = { "PRIME import device, same device",
				       run_import_device_same_device, undo_import, true };

	EXERCISE(&host);
	EXERCISE(&dev);
}

TEST_F(fi, prime_import_other_device)
{
	static const struct op host = { "PRIME import host, other device",
					run_import_host_other_device, undo_import, true };
	static const struct op dev = { "PRIME import device, other device",
				       run_import_device_other_device, undo_import, true };

	EXERCISE(&host);
	EXERCISE(&dev);
}

TEST_F(fi, submit_on_imported_object)
{
	static const struct op op = { "import + SUBMIT on the other device",
				      run_submit_imported, NULL, true };

	EXERCISE(&op);
}

/*
 * The kernel's gpu_buddy split error path (see the top of this file and
 * docs/upstream/): device objects with gpu_buddy's own allocations failed
 * too. On Debian's 6.12 this ends in KASAN's slab-use-after-free in rb_last
 * and "kernel BUG at drivers/gpu/buddy.c:775": run it by hand to see that.
 */
TEST_F(fi, buddy_split_error_path)
{
	static const struct op op = { "BO_CREATE(device), gpu_buddy included",
				      run_bo_create_device, undo_bo, true };
	const char *on = getenv("RBLN_FAULTINJECT_BUDDY");

	if (!on || strcmp(on, "1"))
		SKIP(return, "reproduces a bug of the kernel's gpu_buddy: RBLN_FAULTINJECT_BUDDY=1");
	EXERCISE(&op);
}

TEST_HARNESS_MAIN
