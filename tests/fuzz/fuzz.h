/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * fuzz.h - the state rbln_fuzz keeps and the functions its parts share
 *
 * One worker process drives the driver; a supervisor (rbln_fuzz.c) watches
 * it and the kernel log. They, and the children the worker forks, share a
 * struct fz_shared: call counts, what the worker is doing, failures.
 */
#ifndef RBLN_FUZZ_H
#define RBLN_FUZZ_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <rbln_drm.h>

#include "rbln_test.h"

#define FZ_MAX_DEVICES		8
#define FZ_MAX_FILES		8
#define FZ_MAX_BOS		40	/* per file */
#define FZ_MAX_QUEUES		6	/* per file */
#define FZ_MAX_SYNCOBJS		12	/* per file, besides the tracked jobs' */
#define FZ_MAX_JOBS		24	/* tracked jobs in flight, per file */
#define FZ_MAX_DMABUFS		12
#define FZ_MAX_ORPHANS		16	/* CPU mappings that outlived their handle */
#define FZ_MAX_CHILDREN		4
#define FZ_MAX_STALE		8	/* closed handles and addresses remembered */
#define FZ_MAX_MOVING		8	/* WAIT words the host moves (op_wait_move()) */
#define FZ_MAX_UNLISTED		4	/* device objects a job uses unlisted */
#define FZ_MAX_RESVS		6	/* VM_BIND reservations, per file */
#define FZ_MAX_VMAPS		16	/* VM_BIND mappings, per file */
#define FZ_MAX_UNBINDS		8	/* unbinds not seen done, per file */
#define FZ_HISTORY		256	/* last operations shown on a failure */
#define FZ_OP_LEN		200
#define FZ_MSG_LEN		1024

#define FZ_ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define FZ_PAGE			4096ull
#define FZ_MIB			(1ull << 20)
#define FZ_VA_BITS		47	/* what the UAPI promises at most */

/* Exit codes of the worker and of its children. */
#define FZ_EXIT_OK		0
#define FZ_EXIT_FAIL		1	/* a kernel failure: already reported */
#define FZ_EXIT_ERROR		2	/* the fuzzer could not run */

/* --- deterministic choices ------------------------------------------------ */

/* splitmix64: small, fast, and every seed is a good one. */
struct fz_rng {
	uint64_t s;
};

static inline uint64_t fz_next(struct fz_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static inline uint64_t fz_below(struct fz_rng *r, uint64_t n)
{
	return n ? fz_next(r) % n : 0;
}

static inline bool fz_chance(struct fz_rng *r, unsigned int percent)
{
	return fz_below(r, 100) < percent;
}

/* --- sets of acceptable outcomes -------------------------------------------- */

/* Errnos below 192; 0 stands for success. */
struct fz_errs {
	uint64_t w[3];
};

static inline void fz_errs_add(struct fz_errs *s, int e)
{
	if (e >= 0 && e < 192)
		s->w[e / 64] |= 1ull << (e % 64);
}

static inline bool fz_errs_has(const struct fz_errs *s, int e)
{
	return e >= 0 && e < 192 && (s->w[e / 64] >> (e % 64) & 1);
}

struct fz_errs fz_errs_of(const int *list);
#define FZ_ERRS(...)	fz_errs_of((const int[]){ __VA_ARGS__, -1 })

/* --- statistics ------------------------------------------------------------- */

enum fz_call {
	C_GET_PARAM,
	C_BO_CREATE,
	C_BO_INFO,
	C_QUEUE_CREATE,
	C_QUEUE_DESTROY,
	C_SUBMIT,
	C_VM_RESERVE,
	C_VM_RELEASE,
	C_VM_BIND,
	C_GEM_CLOSE,
	C_PRIME_HANDLE_TO_FD,
	C_PRIME_FD_TO_HANDLE,
	C_SYNCOBJ_CREATE,
	C_SYNCOBJ_DESTROY,
	C_SYNCOBJ_WAIT,
	C_SYNCOBJ_TIMELINE_WAIT,
	C_SYNCOBJ_RESET,
	C_SYNCOBJ_SIGNAL,
	C_SYNCOBJ_TIMELINE_SIGNAL,
	C_SYNCOBJ_QUERY,
	C_SYNCOBJ_TRANSFER,
	C_SYNCOBJ_HANDLE_TO_FD,
	C_SYNCOBJ_FD_TO_HANDLE,
	C_DRM_OTHER,		/* core ioctls, unknown numbers, odd sizes */
	C_SYNC_FILE_INFO,
	C_NR_IOCTLS,
	/* Not ioctls: the other ways in. */
	C_OPEN = C_NR_IOCTLS,
	C_CLOSE,
	C_MMAP,
	C_MUNMAP,
	C_DMABUF_MMAP,
	C_TEST_EXPORT,		/* the tests' dma-buf exporter */
	C_FORK,
	C_READ_INFO,		/* fdinfo, debugfs, sysfs */
	C_INJECT,
	C_DEL_DEVICE,
	C_NEW_DEVICE,
	C_NR_CALLS
};

#define FZ_TAINT_BITS	(1u << 21)
#define FZ_ERRNO_SLOTS	136	/* errnos counted one by one; the rest in the last */

struct fz_shared {
	_Atomic uint64_t calls[C_NR_CALLS][FZ_ERRNO_SLOTS + 1];
	_Atomic uint64_t heartbeat;	/* bumped as the worker moves on */
	_Atomic uint64_t iteration;
	_Atomic unsigned int history_head;
	char history[FZ_HISTORY][FZ_OP_LEN + 32];	/* "child K: " and what */
	char doing[FZ_OP_LEN];		/* what the worker is doing now */
	/* Fault and DMA-error injections of each device not yet seen to land. */
	_Atomic int inject_pending[FZ_MAX_DEVICES];
	/*
	 * Bit g: a child touched the worker's file of generation g. Sticky,
	 * as children come and go; a generation that wraps only makes a file
	 * judged more leniently.
	 */
	_Atomic uint64_t tainted[FZ_TAINT_BITS / 64];
	_Atomic int failed;
	char fail_msg[FZ_MSG_LEN];
	_Atomic uint64_t iterations_done;
	_Atomic uint64_t fuzz_ns;	/* time spent fuzzing, teardown aside */
	_Atomic uint64_t jobs_checked, jobs_ok, jobs_failed, timeouts, unplugs, forks;
};

const char *fz_call_name(enum fz_call c);
void fz_count(struct fz_shared *sh, enum fz_call c, int ret);
void fz_print_stats(struct fz_shared *sh, double seconds);
uint64_t fz_total_ioctls(struct fz_shared *sh);

/* --- the pools ---------------------------------------------------------------- */

/*
 * A device the fuzzer may use, and may unplug and add back: an emulated
 * one, or with $RBLN_VM_PCI_DEVICES a PCI function (rbln_test.h), which
 * unplugs from the PCI bus and comes back with a rescan.
 */
struct fz_dev {
	unsigned int id;	/* on /sys/bus/rbln_emu, or the PCI NPU's number */
	char name[RBLN_DEV_NAME_MAX];	/* rbln_emuN, or the PCI address */
	bool pci;
	unsigned int gen;	/* bumped when added back: a new instance */
	bool present;
	unsigned int mem_mib;
	uint64_t mem_size, va_start, va_size, max_cmd, isa_caps, num_rings;
	uint64_t vm_start, vm_size;	/* what VM_RESERVE hands out */
	uint64_t timeouts_seen;	/* tracked jobs of this instance that timed out */
	uint64_t reset_count;	/* last RBLN_PARAM_RESET_COUNT */
};

/* Device memory imported from a file a child changed: whose, nobody knows. */
#define FZ_MEM_UNKNOWN		(-2)

struct fz_bo {
	uint64_t serial;	/* unique in the run: handles are reused */
	uint32_t handle;
	uint32_t placement;	/* RBLN_BO_DEVICE or RBLN_BO_HOST */
	uint32_t flags;		/* RBLN_BO_READ_ONLY, RBLN_BO_IMPORTED, RBLN_BO_NO_VA */
	uint64_t size, va;	/* va 0: RBLN_BO_NO_VA, only VM_BIND places it */
	void *cpu;		/* the whole object mapped, or NULL */
	int mem_dev;		/* device whose memory it is, -1 (host), FZ_MEM_UNKNOWN */
	unsigned int mem_gen;
	int origin_dev;		/* device that exports it: its creator's */
	unsigned int origin_gen;
	bool cmd;		/* a command buffer: valid jobs never write it */
	bool bound;		/* a job listed it: the device reaches it from now on */
	bool imported;		/* a handle from PRIME, not from BO_CREATE */
	unsigned int cmd_busy;	/* tracked jobs that run it as commands */
};

struct fz_syncobj {
	uint32_t handle;
	bool timeline;
	bool has_fence;		/* a wait on it (point) finds a fence */
	bool shared;		/* exported: another file may change it */
	uint64_t point;		/* last point added, timelines */
};

/* What a tracked job's outcome may be. */
enum fz_expect {
	FZ_JOB_VALID,		/* must succeed, unless something else explains it */
	FZ_JOB_FAULT,		/* must fail */
	FZ_JOB_MAY_FAULT,	/* may fault; otherwise as a valid one */
	FZ_JOB_ANY,		/* no oracle but "it ends" */
};

/* A submitted job that signals its own syncobj, checked when it ends. */
struct fz_job {
	uint32_t syncobj;
	uint64_t point;		/* its signal point if a timeline, else 0 */
	uint32_t queue;
	enum fz_expect expect;
	uint64_t cmd_serial;	/* the command buffer it holds busy, or 0 */
	uint64_t iteration;
	uint64_t submitted_ns;
	bool queue_destroyed;	/* its queue went while it was queued */
	bool wild;		/* randomly mutated: may write anywhere */
	bool clobbered;		/* its commands may have been overwritten */
	char what[96];
	uint64_t cmd[48];	/* its first packets, for a failure report */
	unsigned int cmd_words;
	uint64_t unlisted[FZ_MAX_UNLISTED];	/* serials, as in struct fz_cmd */
	unsigned int nunlisted;
	uint64_t vm_hole, vm_hole_size;	/* as in struct fz_cmd */
	const char *fault_kinds;	/* as in struct fz_cmd */
};

/* A VM_RESERVE range of a file. */
struct fz_resv {
	uint64_t va, size;
};

/*
 * A VM_BIND mapping as the file's binds so far leave it, done or not: the
 * kernel checks each bind against the same view.
 */
struct fz_vmap {
	uint64_t va, size;
	uint64_t bo_offset;
	uint64_t serial;	/* the object's: the mapping holds it past its handle */
	bool writable;		/* neither the object nor the bind is read-only, nor commands */
	int mem_dev;		/* as in struct fz_bo */
	unsigned int mem_gen;
	uint64_t point;		/* bind timeline point after which it is in place */
};

/* An unbind whose completion has not been seen: the device may reach the range yet. */
struct fz_unbind {
	uint64_t va, size;
	uint64_t point;		/* on the bind timeline */
};

struct fz_file {
	bool used;
	struct rbln_drm_device *dev;
	int fd;
	int devi;		/* index in fz.devs */
	unsigned int dev_gen;	/* instance of the device it was opened on */
	unsigned int gen;	/* the worker's count of files opened: names this one */
	bool inherited;		/* in a child: the worker's file, shared */
	bool banned;		/* a job of it faulted: certain */
	bool may_be_banned;	/* something may have banned it */
	bool ghosts;		/* may hold handles the fuzzer does not know */
	unsigned int peers;	/* devices (bits) whose memory it imported */
	uint64_t failed_seen;	/* tracked jobs that ended with an error */
	uint64_t failed_param;	/* last RBLN_PARAM_FAILED_JOBS */
	struct fz_bo bos[FZ_MAX_BOS];
	unsigned int nbos;
	uint32_t queues[FZ_MAX_QUEUES];
	unsigned int nqueues;
	struct fz_syncobj syncobjs[FZ_MAX_SYNCOBJS];
	unsigned int nsyncobjs;
	struct fz_job jobs[FZ_MAX_JOBS];
	unsigned int njobs;
	uint32_t stale_handles[FZ_MAX_STALE];
	uint64_t stale_vas[FZ_MAX_STALE];
	unsigned int nstale;
	struct fz_resv resvs[FZ_MAX_RESVS];
	unsigned int nresvs;
	struct fz_vmap vmaps[FZ_MAX_VMAPS];
	unsigned int nvmaps;
	struct fz_unbind unbinds[FZ_MAX_UNBINDS];
	unsigned int nunbinds;
	/*
	 * Binds run in order: each that signals takes the next point of this
	 * timeline, so a point done means every bind before it is done too.
	 */
	uint32_t bind_syncobj;
	uint64_t bind_point;	/* last point a bind took */
};

/* An exported dma-buf the fuzzer holds. */
struct fz_dmabuf {
	int fd;
	int devi;		/* exporting device */
	unsigned int dev_gen;
	uint32_t placement, flags;
	uint64_t size;
	int mem_dev;		/* whose memory (DEVICE) */
	unsigned int mem_gen;
	bool known;		/* exported by a file no child changed: the above holds */
};

/* A CPU mapping whose handle is gone: it still holds the object. */
struct fz_orphan {
	void *cpu;
	uint64_t size;
	uint64_t serial;
};

struct fz {
	uint64_t seed;
	uint64_t iteration;
	struct fz_rng rng;
	struct fz_shared *sh;
	bool verbose;
	bool child;
	unsigned int job_timeout_ms;
	unsigned int scale;	/* RBLN_TEST_TIMEOUT_SCALE: slow kernels wait longer */
	uint64_t next_serial;
	unsigned int next_gen;
	struct fz_dev devs[FZ_MAX_DEVICES];
	unsigned int ndevs;
	struct fz_file files[FZ_MAX_FILES];
	struct fz_dmabuf dmabufs[FZ_MAX_DMABUFS];
	unsigned int ndmabufs;
	struct fz_orphan orphans[FZ_MAX_ORPHANS];
	unsigned int norphans;
	pid_t children[FZ_MAX_CHILDREN];
	uint64_t child_start_ns[FZ_MAX_CHILDREN];
	unsigned int nchildren;
	uint8_t *bad_page;	/* PROT_NONE: user pointers that fault */
	uint8_t *ro_page;	/* PROT_READ: arguments the kernel cannot write back */
	int exporter;		/* the tests' dma-buf exporter, or -errno: none */
	/* Words of WAITs waiting for the host to move them: object and offset. */
	struct {
		uint64_t serial;
		uint64_t off;
	} moving[FZ_MAX_MOVING];
	unsigned int nmoving;
};

/* --- fuzz_worker.c: reporting ------------------------------------------------- */

uint64_t fz_now_ns(void);
void fz_doing(struct fz *fz, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fz_fail(struct fz *fz, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void fz_crash(struct fz *fz, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void fz_print_history(struct fz_shared *sh);
void fz_print_task(pid_t pid);

/* --- fuzz_pool.c ---------------------------------------------------------------- */

int fz_ioctl(struct fz *fz, int fd, enum fz_call c, unsigned long req, void *arg);
void fz_check(struct fz *fz, struct fz_file *f, enum fz_call c, int ret,
	      struct fz_errs ok, const char *what);
bool fz_file_gone(struct fz *fz, const struct fz_file *f);
bool fz_file_tainted(struct fz *fz, struct fz_file *f);
void fz_touch(struct fz *fz, struct fz_file *f);

int fz_devices_init(struct fz *fz, const char *list);
int fz_dev_probe(struct fz_dev *d);
int fz_pick_dev(struct fz *fz, bool present);

struct fz_file *fz_pick_file(struct fz *fz);
struct fz_file *fz_pick_live_file(struct fz *fz);
struct fz_file *fz_open_file(struct fz *fz, int devi);
void fz_close_file(struct fz *fz, struct fz_file *f);
unsigned int fz_file_index(struct fz *fz, const struct fz_file *f);

struct fz_bo *fz_add_bo(struct fz *fz, struct fz_file *f, uint32_t handle,
			uint32_t placement, uint32_t flags, uint64_t size, uint64_t va);
struct fz_bo *fz_find_bo(struct fz_file *f, uint32_t handle);
struct fz_bo *fz_pick_bo(struct fz *fz, struct fz_file *f);
void fz_forget_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo);
void fz_close_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo);
bool fz_mem_reachable(struct fz *fz, int mem_dev, unsigned int mem_gen);
bool fz_bo_reachable(struct fz *fz, const struct fz_bo *bo);
#define FZ_FAULT_KIND		32	/* bytes of a fault's kind, as fdinfo names it */
bool fz_file_fault(const struct fz_file *f, char *kind, uint64_t *addr);
void fz_print_file(struct fz *fz, const struct fz_file *f);
void fz_bo_set_memory(struct fz *fz, struct fz_file *f, struct fz_bo *bo, int mem_dev,
		      unsigned int mem_gen);
uint32_t fz_unknown_handle(struct fz *fz, struct fz_file *f);
uint64_t fz_bad_va(struct fz *fz, struct fz_file *f, bool certain);
bool fz_va_known_free(struct fz_file *f, uint64_t va);
int fz_map_bo(struct fz *fz, struct fz_file *f, struct fz_bo *bo);
void fz_orphan_drop(struct fz *fz, unsigned int i);
bool fz_guarded_copy(void *dst, const void *src, size_t len);
void fz_fault_guard_init(void);

struct fz_syncobj *fz_add_syncobj(struct fz_file *f, uint32_t handle, bool timeline);
struct fz_syncobj *fz_pick_syncobj(struct fz *fz, struct fz_file *f);
void fz_forget_syncobj(struct fz_file *f, struct fz_syncobj *s);
bool fz_syncobj_known(struct fz_file *f, uint32_t handle);
uint32_t fz_pick_queue(struct fz *fz, struct fz_file *f);
bool fz_queue_known(struct fz_file *f, uint32_t id);
void fz_forget_queue(struct fz_file *f, uint32_t id);

void fz_dmabuf_drop(struct fz *fz, unsigned int i);

/* --- fuzz_cmd.c: command buffers ------------------------------------------------- */

/* The objects a command buffer touches: they go on the job's list. */
struct fz_cmd {
	struct rbln_drm_cmd enc;
	struct fz_file *f;
	uint32_t handles[32];
	unsigned int nhandles;
	/* Device objects used but not listed: the device reaches them anyway. */
	uint64_t unlisted[FZ_MAX_UNLISTED];
	unsigned int nunlisted;
	/* Bound ranges used: the job waits for this bind timeline point, if not 0. */
	uint64_t vm_wait;
	/* Bind range it touches that must be unmapped: a later bind there makes it uncertain. */
	uint64_t vm_hole, vm_hole_size;
	/* The kinds of fault (fdinfo's names, space-separated) it must fault with, or NULL. */
	const char *fault_kinds;
	/*
	 * Valid packets may include WAITs: not in a job whose later packet
	 * must run, which a canceled WAIT skips and one never released holds.
	 */
	bool waits;
};

void fz_cmd_init(struct fz_cmd *c, struct fz_file *f, void *buf, uint32_t cap);
void fz_cmd_use(struct fz_cmd *c, const struct fz_bo *bo);
int fz_cmd_valid_packet(struct fz *fz, struct fz_cmd *c);
int fz_cmd_long(struct fz *fz, struct fz_cmd *c);
int fz_cmd_faulting_packet(struct fz *fz, struct fz_cmd *c, char *why, size_t len);
int fz_cmd_malformed_packet(struct fz *fz, struct fz_cmd *c, char *why, size_t len);
void fz_cmd_mutate(struct fz *fz, struct fz_cmd *c);

/* --- fuzz_ops.c: files, GET_PARAM, malformed ioctls ----------------------------------- */

struct fz_file *fz_file_for_op(struct fz *fz);
void fz_check_params(struct fz *fz, struct fz_file *f);
void op_open(struct fz *fz);
void op_close_file(struct fz *fz);
void op_get_param(struct fz *fz);
void op_raw_ioctl(struct fz *fz);

/* --- fuzz_bo.c: buffer objects, CPU mappings, PRIME ------------------------------------ */

struct fz_bo *fz_new_bo(struct fz *fz, struct fz_file *f, uint64_t size, uint32_t placement,
			uint32_t flags, bool cmd);
void op_bo_create(struct fz *fz);
void op_bo_create_bad(struct fz *fz);
void op_bo_info(struct fz *fz);
void op_bo_info_va(struct fz *fz);
void op_gem_close(struct fz *fz);
void op_mmap(struct fz *fz);
void op_munmap(struct fz *fz);
void op_cpu_touch(struct fz *fz);
void op_wait_move(struct fz *fz);
void op_export(struct fz *fz);
void op_import(struct fz *fz);
void op_dmabuf_misc(struct fz *fz);

/* --- fuzz_sync.c: queues, syncobjs, waits ------------------------------------------------ */

uint32_t fz_new_queue(struct fz *fz, struct fz_file *f);
void op_queue_create(struct fz *fz);
void op_queue_destroy(struct fz *fz);
void op_syncobj(struct fz *fz);
void op_wait(struct fz *fz);

/* --- fuzz_submit.c: jobs ----------------------------------------------------------- */

void op_submit(struct fz *fz);
void op_submit_long(struct fz *fz);
void op_submit_fault(struct fz *fz);
void op_submit_malformed(struct fz *fz);
void op_submit_fuzz(struct fz *fz);
void op_submit_bad(struct fz *fz);
void op_submit_unbound(struct fz *fz);
int fz_syncobj_create(struct fz *fz, struct fz_file *f, uint32_t *handle);
void fz_syncobj_destroy(struct fz *fz, struct fz_file *f, uint32_t handle);
int fz_bad_wait(struct fz *fz, struct fz_file *f, struct drm_rbln_sync *w, uint32_t *fresh);
void op_fill_verify(struct fz *fz);
void op_foreign(struct fz *fz);
void op_poll_jobs(struct fz *fz);
void fz_drop_jobs(struct fz_file *f);
void fz_jobs_lose(struct fz_file *f, uint64_t serial);
void fz_peer_revoked(struct fz_file *f, int devi);
void fz_wait_jobs(struct fz *fz);

/* --- fuzz_vm.c: VM_RESERVE, VM_RELEASE, VM_BIND ------------------------------------ */

uint64_t fz_vm_region(struct fz *fz, struct fz_cmd *c, bool write, unsigned int align,
		      uint64_t bytes);
int fz_cmd_unbound_packet(struct fz *fz, struct fz_cmd *c, enum fz_expect *expect, char *why,
			  size_t len);
void op_vm_reserve(struct fz *fz);
void op_vm_release(struct fz *fz);
void op_vm_map(struct fz *fz);
void op_vm_unmap(struct fz *fz);
void op_vm_bind_bad(struct fz *fz);

/* --- fuzz_events.c: everything that is not one ioctl -------------------------------- */

void op_fork(struct fz *fz);
void op_kill_child(struct fz *fz);
void op_inject(struct fz *fz);
void op_unplug(struct fz *fz);
void op_replug(struct fz *fz);
void op_read_info(struct fz *fz);
void fz_reap_children(struct fz *fz, bool wait_all);
void fz_teardown(struct fz *fz);

/* --- fuzz_worker.c ------------------------------------------------------------------- */

struct fz_options {
	uint64_t seed;
	uint64_t iterations;	/* 0: no bound */
	double seconds;		/* 0: no bound */
	const char *devices;	/* NULL: every emulated device */
	bool verbose;
	unsigned int scale;	/* multiplies every watchdog's limit */
};

int fz_worker(struct fz_shared *sh, const struct fz_options *opt);
void fz_run_ops(struct fz *fz, unsigned int n, bool in_child);

#endif /* RBLN_FUZZ_H */
