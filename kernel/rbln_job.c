// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_job.c - rings, queues, jobs and their fences, faults and timeouts
 *
 * Each hardware ring has a drm_gpu_scheduler; each queue a scheduler entity
 * spread over all rings, so queues run concurrently and a queue's jobs run
 * in order. A job becomes an entry on a ring with a hardware fence whose
 * seqno the device writes back; the interrupt handler signals the fences up
 * to that seqno. A fault fails the job with -EFAULT and bans its context; a
 * job that outlives the scheduler timeout fails with -ETIMEDOUT once its
 * ring is reset, and the jobs behind it run again; after removal every job
 * fails with -ENODEV.
 */

#include <linux/delay.h>
#include <linux/dma-fence-chain.h>
#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/ktime.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include <uapi/drm/rbln_accel.h>

#include "rbln_drv.h"
#include "rbln_gem.h"
#include "rbln_hw.h"

static unsigned int job_timeout_ms = 5000;
module_param_cb(job_timeout_ms, &rbln_positive_param_ops, &job_timeout_ms, 0444);
MODULE_PARM_DESC(job_timeout_ms, "A job running longer is abandoned and its ring reset (default: 5000)");

/*
 * A job whose WAIT sees its word change between two of its timeouts waits
 * for the host, it is not hung (rbln_job_progressing()); but a file must
 * not hold a ring for as long as it likes by writing the word.
 */
static unsigned int wait_timeout_ms = 60000;
module_param_cb(wait_timeout_ms, &rbln_positive_param_ops, &wait_timeout_ms, 0444);
MODULE_PARM_DESC(wait_timeout_ms, "A job whose WAIT packet sees its word written is kept past job_timeout_ms, up to this long since it became the job its ring runs; at least job_timeout_ms (default: 60000)");

/*
 * Bounds the kernel memory a file's queued jobs pin. Waking at half rather
 * than at each retirement keeps a submitter that runs ahead from sleeping
 * and waking once per job.
 */
static unsigned int max_jobs = 4096;
module_param_cb(max_jobs, &rbln_positive_param_ops, &max_jobs, 0444);
MODULE_PARM_DESC(max_jobs, "Unfinished jobs, and bind jobs, a file may have; SUBMIT or VM_BIND beyond waits until half have retired (default: 4096)");

/*
 * Keeps the CPU for @ms, where the debugfs hooks widen a race. By the
 * clock, not mdelay(): a delay loop is only as long as its CPU's
 * calibration, and a virtual CPU calibrated on a busy host (TCG) was seen
 * to wait 0.6 s of the 1 s asked.
 */
static void rbln_stall_ms(unsigned int ms)
{
	ktime_t end = ktime_add_ms(ktime_get(), ms);

	while (ktime_before(ktime_get(), end))
		cpu_relax();
}

/**
 * struct rbln_ring - the driver's side of one hardware ring
 * @sched: the scheduler feeding it; first, as it outlives the rest
 *	(struct rbln_scheds).
 * @rdev: the device.
 * @index: ring number.
 * @entries: the ring the device reads.
 * @entries_dma: its DMA address.
 * @fence_slot: where the device writes the last completed seqno.
 * @fence_dma: its DMA address.
 * @lock: protects @tail, @seqno, @pending, @head_since, @head_timer,
 *	@head_seen and @resets; the lock of its fences.
 * @tail: next entry to write.
 * @seqno: last seqno handed out.
 * @context: dma-fence context of its fences.
 * @pending: fences not yet signaled, in seqno order.
 * @head_since: jiffies when the first of @pending became the job the ring
 *	runs: wait_timeout_ms counts from then.
 * @head_timer: jiffies when that job's timeout last started: @head_since,
 *	or the last expiry it survived by making progress.
 * @head_seen: the ring's WAIT_SEEN then (rbln_ring_note_seen()).
 * @resets: resets of the ring asked for, of it alone or of the function:
 *	a fault read before one may be gone, or be another, once it is
 *	asked for (rbln_ring_fault()).
 * @slow_doorbell: the doorbell of the job debugfs's "slow_signal" took.
 * @reset_event: sends the uevent of a reset (rbln_ring_reset_event()).
 */
struct rbln_ring {
	struct drm_gpu_scheduler sched;
	struct rbln_device *rdev;
	unsigned int index;
	struct rbln_ring_entry *entries;
	dma_addr_t entries_dma;
	u64 *fence_slot;
	dma_addr_t fence_dma;
	spinlock_t lock; /* protects tail, seqno, pending, head_*, resets; the fences' lock */
	u32 tail;
	u64 seqno;
	u64 context;
	struct list_head pending;
	unsigned long head_since;
	unsigned long head_timer;
	u32 head_seen;
	u32 resets;
	struct work_struct slow_doorbell;
	struct work_struct reset_event;
};

/**
 * struct rbln_fence - a job's completion on its ring
 * @base: the fence, signaled from the interrupt handler.
 * @link: in the ring's pending list while unsignaled.
 * @vm: the job's context, valid until signaled (the job holds it).
 * @cmd_va: the job's command buffer, to write its entry again after a reset.
 * @cmd_size: its size.
 * @slot: the ring entry, for the device's busy time.
 * @slow_cb: debugfs's "slow_signal" hook, when armed for its job.
 */
struct rbln_fence {
	struct dma_fence base;
	struct list_head link;
	struct rbln_vm *vm;
	u64 cmd_va;
	u32 cmd_size;
	u32 slot;
	struct dma_fence_cb slow_cb;
};

/**
 * struct rbln_queue - a sequence of jobs
 * @ref: held by the file's table and by a submission in progress.
 * @entity: its scheduler entity.
 * @lock: makes arming and pushing a job one step, as drm_sched requires.
 */
struct rbln_queue {
	struct kref ref;
	struct drm_sched_entity entity;
	struct mutex lock; /* serialises drm_sched_job_arm() and push */
};

/**
 * struct rbln_job - one submission
 * @base: the scheduler's job.
 * @vm: the context it runs in, held.
 * @cmd_va: command buffer address.
 * @cmd_size: command buffer size.
 * @bo_count: entries of @bos.
 * @bos_used: how many of @bos hold their mapping.
 * @fence: its hardware fence, allocated at submission.
 * @fence_armed: @fence was initialised by run_job and is refcounted.
 * @bos: the objects it uses, held, and their mappings held (@bos_used);
 *	NULL from the first that could not be looked up.
 * @release: frees it off the scheduler (rbln_free_job()).
 */
struct rbln_job {
	struct drm_sched_job base;
	struct work_struct release;
	struct rbln_vm *vm;
	u64 cmd_va;
	u32 cmd_size;
	u32 bo_count;
	u32 bos_used;
	struct rbln_fence *fence;
	bool fence_armed;
	struct drm_gem_object *bos[] __counted_by(bo_count);
};

static struct rbln_job *to_rbln_job(struct drm_sched_job *job)
{
	return container_of(job, struct rbln_job, base);
}

static struct rbln_ring *to_rbln_ring(struct drm_gpu_scheduler *sched)
{
	return container_of(sched, struct rbln_ring, sched);
}

static const char *rbln_fence_driver_name(struct dma_fence *fence)
{
	return "rbln";
}

/* A fence may outlive its ring: name nothing the ring owns. */
static const char *rbln_fence_timeline_name(struct dma_fence *fence)
{
	return "rbln-ring";
}

static const struct dma_fence_ops rbln_fence_ops = {
	.get_driver_name = rbln_fence_driver_name,
	.get_timeline_name = rbln_fence_timeline_name,
};

/*
 * Signals @fence, with @error unless 0, and drops the pending list's ref.
 * A failure is counted before the fence signals, so that a wait that
 * returns sees it (RBLN_PARAM_FAILED_JOBS); the job, and the reference to
 * @fence->vm it holds, live until the fence has signaled.
 */
static void rbln_fence_retire(struct rbln_ring *ring, struct rbln_fence *fence, int error)
{
	lockdep_assert_held(&ring->lock);

	if (ring->pending.next == &fence->link) {
		ring->head_since = jiffies;
		ring->head_timer = ring->head_since;
	}
	list_del_init(&fence->link);
	if (error)
		dma_fence_set_error(&fence->base, error);
	if (fence->base.error)
		atomic_inc(&fence->vm->failed_jobs);
	if (atomic_dec_and_test(&fence->vm->ring_jobs))
		wake_up_all(&fence->vm->rings_done);
	dma_fence_signal_locked(&fence->base);
	dma_fence_put(&fence->base);
}

/*
 * Acknowledging a fault completes its entry. A reset asked for after the
 * fault was read ends that entry instead, and then another entry may fault
 * before the acknowledgment: acknowledged blindly, that one would complete
 * as if it had not faulted. So the acknowledgment is given under the lock
 * and only if no reset was asked for since the fault was read (resets ask
 * under the lock, rbln_ring_reset_ask()); a fault after a reset raises an
 * interrupt of its own.
 */
static void rbln_ring_fault(struct rbln_ring *ring)
{
	struct rbln_device *rdev = ring->rdev;
	struct rbln_hw *hw = rdev->hw;
	u32 r = ring->index, info, resets;
	struct rbln_fence *fence;
	u64 seqno, addr;

	spin_lock(&ring->lock);
	resets = ring->resets;
	spin_unlock(&ring->lock);
	info = rbln_hw_read(hw, RBLN_RING_REG(r, RBLN_RING_FAULT_INFO));
	if (!(info & RBLN_FAULT_VALID) || info == RBLN_REG_DEAD)
		return;
	seqno = rbln_hw_read64(hw, RBLN_RING_REG(r, RBLN_RING_FAULT_SEQNO_LO));
	addr = rbln_hw_read64(hw, RBLN_RING_REG(r, RBLN_RING_FAULT_ADDR_LO));
	if (atomic_read(&rdev->slow_fault) && atomic_xchg(&rdev->slow_fault, 0))
		rbln_stall_ms(2 * job_timeout_ms);

	spin_lock(&ring->lock);
	if (ring->resets != resets)
		goto out;
	list_for_each_entry(fence, &ring->pending, link) {
		struct rbln_vm *vm = fence->vm;

		if (fence->base.seqno != seqno)
			continue;
		/* Jobs of a banned context already on a ring fault on its table entry. */
		if (atomic_xchg(&vm->banned, 1)) {
			dma_fence_set_error(&fence->base, -ECANCELED);
			break;
		}
		dma_fence_set_error(&fence->base, -EFAULT);
		WRITE_ONCE(rdev->ctx_table[vm->id], 0);
		vm->fault_addr = addr;
		/* Pairs with fdinfo's read: the address is there once the info is. */
		smp_store_release(&vm->fault_info, info);
		dev_info_ratelimited(rdev->drm.dev,
				     "context %u: fault %u at %#llx; context banned\n",
				     vm->id, RBLN_FAULT_TYPE(info), addr);
		break;
	}
	/* The device completes the entry now; its fence carries the error. */
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_FAULT_INFO), 0);
out:
	spin_unlock(&ring->lock);
}

/*
 * The first of @ring's pending jobs has just become the job the ring runs,
 * or survived a timeout: note the ring's WAIT_SEEN, which its next timeout
 * compares (rbln_job_progressing()). Inside drm_dev_enter(). Under the
 * lock, so that the value is no older than the head it is noted for: read
 * later, it could count another job's progress as this one's.
 */
static void rbln_ring_note_seen(struct rbln_ring *ring)
{
	lockdep_assert_held(&ring->lock);
	ring->head_seen = rbln_hw_read(ring->rdev->hw,
				       RBLN_RING_REG(ring->index, RBLN_RING_WAIT_SEEN));
}

static void rbln_ring_complete(struct rbln_ring *ring)
{
	struct rbln_fence *fence, *tmp;
	struct list_head *head;
	u64 done;

	/* Pairs with the device's release of the fence: busy_ns is written. */
	done = smp_load_acquire(ring->fence_slot);

	spin_lock(&ring->lock);
	head = ring->pending.next;
	list_for_each_entry_safe(fence, tmp, &ring->pending, link) {
		if (fence->base.seqno > done)
			break;
		atomic64_add(READ_ONCE(ring->entries[fence->slot].busy_ns), &fence->vm->busy_ns);
		rbln_fence_retire(ring, fence, 0);
	}
	/* A register read only when a job that was queued behind starts its time. */
	if (ring->pending.next != head && !list_empty(&ring->pending))
		rbln_ring_note_seen(ring);
	spin_unlock(&ring->lock);
}

/*
 * The device's interrupt. A ring's vector says the ring completed entries,
 * and the fence slot in memory says which: no register is read, the costly
 * part of an interrupt across a bus. The fault vector says that rings
 * faulted, and IRQ_STATUS which. Once the device is unplugged, every fence
 * is failed and the rings' memory goes: an interrupt still arriving has
 * nothing to do.
 */
static void rbln_irq(void *data, unsigned int vector)
{
	struct rbln_device *rdev = data;
	u32 status;
	unsigned int r;
	bool cookie;
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	cookie = dma_fence_begin_signalling();
	if (vector < rdev->num_rings) {
		rbln_ring_complete(&rdev->rings[vector]);
		goto out;
	}
	status = rbln_hw_read(rdev->hw, RBLN_REG_IRQ_STATUS);
	if (status == RBLN_REG_DEAD)
		rbln_device_lost(rdev, "its registers read all-ones");
	if (!status || status == RBLN_REG_DEAD)
		goto out;
	rbln_hw_write(rdev->hw, RBLN_REG_IRQ_STATUS, status);
	for (r = 0; r < rdev->num_rings; r++) {
		if (!(status & BIT(r)))
			continue;
		rbln_ring_fault(&rdev->rings[r]);
		rbln_ring_complete(&rdev->rings[r]);
	}
out:
	dma_fence_end_signalling(cookie);
	drm_dev_exit(idx);
}

/* The entry of @fence's job at @slot, for the device to read after TAIL. */
static void rbln_ring_write_entry(struct rbln_ring *ring, struct rbln_fence *fence, u32 slot)
{
	struct rbln_ring_entry *entry = &ring->entries[slot];

	lockdep_assert_held(&ring->lock);
	fence->slot = slot;
	entry->cmd_va = fence->cmd_va;
	entry->cmd_size = fence->cmd_size;
	entry->ctx = fence->vm->id;
	entry->seqno = fence->base.seqno;
	entry->busy_ns = 0;
}

/*
 * debugfs's "slow_signal": armed for the next job, then busy until that
 * job's fence has signaled. One at a time, so that the delays never add up.
 */
enum {
	RBLN_SLOW_SIGNAL_OFF,
	RBLN_SLOW_SIGNAL_ARMED,
	RBLN_SLOW_SIGNAL_BUSY,
};

/**
 * rbln_job_slow_signal() - arm debugfs's "slow_signal" for @rdev's next job
 * @rdev: the device
 *
 * When that job's fence signals, whoever signals it stays in the fence's
 * first callback for twice the job timeout, so that the job completes as
 * its timeout fires (rbln_fence_slow_cb()).
 *
 * Return: 0 (also when armed already), or -EBUSY while the job that took
 * it has not yet signaled.
 */
int rbln_job_slow_signal(struct rbln_device *rdev)
{
	if (atomic_cmpxchg(&rdev->slow_signal, RBLN_SLOW_SIGNAL_OFF,
			   RBLN_SLOW_SIGNAL_ARMED) == RBLN_SLOW_SIGNAL_BUSY)
		return -EBUSY;
	return 0;
}

/*
 * debugfs's "slow_signal": whoever signals the job's fence stays in this
 * callback, the first, for twice the job timeout. The fence reads signaled
 * while the scheduler's callback, which reads the job, has not run yet: the
 * job's timeout lands in between, as when the CPU signaling it is held up
 * by interrupts or by its hypervisor.
 */
static void rbln_fence_slow_cb(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct rbln_fence *fence = container_of(cb, struct rbln_fence, slow_cb);
	struct rbln_device *rdev = fence->vm->rdev;

	rbln_stall_ms(2 * job_timeout_ms);
	atomic_set(&rdev->slow_signal, RBLN_SLOW_SIGNAL_OFF);
}

/**
 * rbln_job_slow_free() - arm debugfs's "slow_free" for @rdev's next freed job
 * @rdev: the device
 *
 * The next job or bind job freed holds its context for a second after the
 * rest of it is gone (rbln_job_slow_free_wait()): its file may close
 * meanwhile and leave the job the context's last reference.
 *
 * Return: 0.
 */
int rbln_job_slow_free(struct rbln_device *rdev)
{
	atomic_set(&rdev->slow_free, 1);
	return 0;
}

/**
 * rbln_job_slow_fault() - arm debugfs's "slow_fault" for @rdev's next fault
 * @rdev: the device
 *
 * The interrupt handler holds the next fault it reads for twice the job
 * timeout before it acknowledges it: the faulting job's timeout, and the
 * reset of its ring, land in between (rbln_ring_fault()).
 *
 * Return: 0.
 */
int rbln_job_slow_fault(struct rbln_device *rdev)
{
	atomic_set(&rdev->slow_fault, 1);
	return 0;
}

/**
 * rbln_job_slow_free_wait() - where a job being freed takes "slow_free"
 * @rdev: its device
 */
void rbln_job_slow_free_wait(struct rbln_device *rdev)
{
	if (atomic_read(&rdev->slow_free) && atomic_xchg(&rdev->slow_free, 0))
		msleep(1000);
}

/* The device runs @ring's entries up to @tail, as written before. */
static void rbln_ring_doorbell(struct rbln_ring *ring, u32 tail)
{
	/* Order the entries' stores before the doorbell that makes the device read them. */
	dma_wmb();
	rbln_hw_write(ring->rdev->hw, RBLN_RING_REG(ring->index, RBLN_RING_TAIL), tail);
}

/*
 * The doorbell of the job debugfs's "slow_signal" took, rung from the
 * scheduler's ordered workqueue: after the scheduler has put its callback
 * on the job's fence, behind the hook's, and before it runs another job on
 * the ring. Else the device could complete the job first, the scheduler
 * would find its fence signaled and retire the job itself, and the hook's
 * window would not open. A reset in between put the entry back already.
 */
static void rbln_ring_slow_doorbell(struct work_struct *work)
{
	struct rbln_ring *ring = container_of(work, struct rbln_ring, slow_doorbell);
	struct rbln_device *rdev = ring->rdev;
	u32 tail;
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	mutex_lock(&rdev->reset_lock);
	spin_lock(&ring->lock);
	tail = ring->tail;
	spin_unlock(&ring->lock);
	rbln_ring_doorbell(ring, tail);
	mutex_unlock(&rdev->reset_lock);
	drm_dev_exit(idx);
}

/*
 * The scheduler re-arms its timeout, a whole one, each time a job starts:
 * jobs going on behind one that hangs would put its end off for as long
 * as they keep coming. So the timeout is set back to what is left of the
 * job the ring runs, whose timeout started at @head_timer.
 */
static void rbln_ring_keep_timeout(struct rbln_ring *ring)
{
	long left = (long)(ring->head_timer + ring->sched.timeout - jiffies);

	lockdep_assert_held(&ring->lock);
	drm_sched_resume_timeout(&ring->sched, max(left, 0L));
}

/*
 * Puts @job on @ring, inside drm_dev_enter(): its fence, or an ERR_PTR for
 * the scheduler to fail it.
 */
static struct dma_fence *rbln_ring_start(struct rbln_ring *ring, struct rbln_job *job)
{
	struct rbln_device *rdev = ring->rdev;
	struct rbln_fence *fence = job->fence;
	u32 slot, tail;
	int ret;

	ret = rbln_vm_pin(job->vm);
	if (ret)
		return ERR_PTR(ret);

	spin_lock(&ring->lock);
	slot = ring->tail;
	dma_fence_init(&fence->base, &rbln_fence_ops, &ring->lock, ring->context,
		       ++ring->seqno);
	job->fence_armed = true;
	fence->vm = job->vm;
	fence->cmd_va = job->cmd_va;
	fence->cmd_size = job->cmd_size;
	rbln_ring_write_entry(ring, fence, slot);
	if (list_empty(&ring->pending)) {
		ring->head_since = jiffies;
		ring->head_timer = ring->head_since;
		/* Before the doorbell: nothing runs on the ring yet. */
		rbln_ring_note_seen(ring);
	} else {
		rbln_ring_keep_timeout(ring);
	}
	list_add_tail(&fence->link, &ring->pending);
	dma_fence_get(&fence->base);
	tail = (slot + 1) % RBLN_RING_ENTRIES;
	ring->tail = tail;
	spin_unlock(&ring->lock);

	/* Before the scheduler's callback, and before the device can signal. */
	if (atomic_cmpxchg(&rdev->slow_signal, RBLN_SLOW_SIGNAL_ARMED,
			   RBLN_SLOW_SIGNAL_BUSY) == RBLN_SLOW_SIGNAL_ARMED) {
		if (dma_fence_add_callback(&fence->base, &fence->slow_cb, rbln_fence_slow_cb))
			atomic_set(&rdev->slow_signal, RBLN_SLOW_SIGNAL_OFF);
		queue_work(ring->sched.submit_wq, &ring->slow_doorbell);
	} else {
		rbln_ring_doorbell(ring, tail);
	}
	return dma_fence_get(&fence->base);
}

/*
 * The job's fence depends on this, and memory reclaim may wait for fences:
 * nothing here may allocate, or take a lock held where memory is allocated.
 * lockdep checks it, in a section opened inside drm_dev_enter(): opened
 * outside, lockdep would see what follows only through that read lock,
 * and report nothing.
 */
static struct dma_fence *rbln_run_job(struct drm_sched_job *sched_job)
{
	struct rbln_ring *ring = to_rbln_ring(sched_job->sched);
	struct rbln_job *job = to_rbln_job(sched_job);
	struct dma_fence *fence = ERR_PTR(-ECANCELED);
	bool cookie;
	int idx;

	/* Refused: the scheduler fails the finished fence when this returns. */
	if (!atomic_read(&job->vm->banned)) {
		fence = ERR_PTR(-ENODEV);
		if (drm_dev_enter(&ring->rdev->drm, &idx)) {
			cookie = dma_fence_begin_signalling();
			fence = rbln_ring_start(ring, job);
			dma_fence_end_signalling(cookie);
			drm_dev_exit(idx);
		}
	}
	if (IS_ERR(fence))
		atomic_inc(&job->vm->failed_jobs);
	return fence;
}

/* Counts a reset of @ring as asked for, before it is: see rbln_ring_fault(). */
static void rbln_ring_reset_ask(struct rbln_ring *ring)
{
	spin_lock(&ring->lock);
	ring->resets++;
	spin_unlock(&ring->lock);
}

/*
 * Stops @ring in hardware and waits until the device confirms: from then
 * on nothing of the entries on it runs or touches memory (rbln_hw.h).
 * Returns false when the ring did not stop within the job timeout: it is
 * wedged, and only a function reset stops it.
 */
static bool rbln_ring_reset(struct rbln_ring *ring)
{
	struct rbln_hw *hw = ring->rdev->hw;
	u32 reg = RBLN_RING_REG(ring->index, RBLN_RING_RESET), busy;

	rbln_ring_reset_ask(ring);
	rbln_hw_write(hw, reg, 1);
	return !read_poll_timeout(rbln_hw_read, busy, busy != 1, 50,
				  job_timeout_ms * USEC_PER_MSEC, false, hw, reg);
}

/*
 * After a reset: the entries not done are off the ring. The guilty one
 * fails; the others, every context's, were not at fault and go back on in
 * their order, from slot 0, with their fences. None of them had started,
 * unless the guilty job finished just as the reset came: then the next one
 * may have begun, and runs again from its start.
 */
static void rbln_ring_replay(struct rbln_ring *ring, struct rbln_fence *guilty)
{
	struct rbln_fence *fence, *tmp;
	u32 tail = 0;

	spin_lock(&ring->lock);
	ring->head_since = jiffies;
	ring->head_timer = ring->head_since;
	/* Stopped, and not yet given the entries again: nothing changes it. */
	rbln_ring_note_seen(ring);
	list_for_each_entry_safe(fence, tmp, &ring->pending, link) {
		if (fence == guilty) {
			rbln_fence_retire(ring, fence, -ETIMEDOUT);
			continue;
		}
		rbln_ring_write_entry(ring, fence, tail++);
	}
	ring->tail = tail;
	spin_unlock(&ring->lock);
	rbln_ring_doorbell(ring, tail);
}

/* Where the ring's entries and fence slot are; then it runs. */
static void rbln_ring_program(struct rbln_ring *ring)
{
	struct rbln_hw *hw = ring->rdev->hw;
	unsigned int r = ring->index;

	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_BASE_LO), lower_32_bits(ring->entries_dma));
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_BASE_HI), upper_32_bits(ring->entries_dma));
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_FENCE_LO), lower_32_bits(ring->fence_dma));
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_FENCE_HI), upper_32_bits(ring->fence_dma));
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_TAIL), 0);
	rbln_hw_write(hw, RBLN_RING_REG(r, RBLN_RING_ENABLE), 1);
}

/*
 * Stops, or starts again, feeding every ring but @wedged. Not in a fence
 * signalling section: a stop waits for the ring's run_job work, whose
 * dma_fence_signal() of a job it refuses is a section of its own, and
 * lockdep takes a section waiting for another for a cycle (panfrost's
 * timeout handler stops its schedulers outside its section likewise).
 * What that work and the free_job work do is checked in their sections.
 */
static void rbln_rings_feed(struct rbln_device *rdev, struct rbln_ring *wedged, bool on)
{
	unsigned int r;

	for (r = 0; r < rdev->num_rings; r++) {
		if (&rdev->rings[r] == wedged)
			continue;
		if (on)
			drm_sched_wqueue_start(&rdev->rings[r].sched);
		else
			drm_sched_wqueue_stop(&rdev->rings[r].sched);
	}
}

/* Fails @fence: the device is gone. */
static void rbln_fence_lost(struct rbln_ring *ring, struct rbln_fence *fence)
{
	spin_lock(&ring->lock);
	if (!list_empty(&fence->link))
		rbln_fence_retire(ring, fence, -ENODEV);
	spin_unlock(&ring->lock);
}

/*
 * A ring that does not stop is wedged: reset the whole function and wait
 * for it, the other rings stopped (rbln_rings_feed()). A function reset
 * cannot be refused; a device that never finishes it reads all-ones, gone,
 * or is cut off (rbln_hw_wait()): then false, and its unbind fails every
 * job. It loses the state of every ring and the table registers, so
 * everything is programmed again and every ring's pending jobs go back on,
 * but for @guilty, which fails.
 */
static bool rbln_function_reset(struct rbln_device *rdev, struct rbln_ring *wedged,
				struct rbln_fence *guilty)
{
	struct rbln_hw *hw = rdev->hw;
	unsigned int r;
	bool answered;

	lockdep_assert_held(&rdev->reset_lock);
	for (r = 0; r < rdev->num_rings; r++)
		rbln_ring_reset_ask(&rdev->rings[r]);
	/* Not between a scrub's address and its size: the reset clears them. */
	mutex_lock(&rdev->scrub_lock);
	rbln_hw_write(hw, RBLN_REG_FUNC_RESET, 1);
	answered = rbln_hw_wait(rdev, RBLN_REG_FUNC_RESET);
	mutex_unlock(&rdev->scrub_lock);
	if (!answered) {
		rbln_fence_lost(wedged, guilty);
		return false;
	}

	rbln_mmu_program(rdev);
	rbln_peer_program(rdev);
	/* Counted before the guilty fence signals: whoever waits on it sees the reset. */
	atomic_inc(&rdev->reset_count);
	for (r = 0; r < rdev->num_rings; r++) {
		struct rbln_ring *ring = &rdev->rings[r];

		rbln_ring_program(ring);
		rbln_ring_complete(ring);
		rbln_ring_replay(ring, ring == wedged ? guilty : NULL);
	}
	drm_err(&rdev->drm, "ring %u did not stop: function reset\n", wedged->index);
	return true;
}

/*
 * The uevent of a ring's reset, sent from a work item: it allocates, and
 * the timeout handler must not wait for memory, which may wait for fences
 * that only the handler's next run ends. Resets in a row may make one.
 */
static void rbln_ring_reset_event(struct work_struct *work)
{
	struct rbln_ring *ring = container_of(work, struct rbln_ring, reset_event);
	struct rbln_device *rdev = ring->rdev;
	char ring_env[16], *envp[] = { "RESET=1", ring_env, NULL };
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return;
	snprintf(ring_env, sizeof(ring_env), "RING=%u", ring->index);
	kobject_uevent_env(&rdev->drm.accel->kdev->kobj, KOBJ_CHANGE, envp);
	drm_dev_exit(idx);
}

/**
 * rbln_job_progressing() - is a job past its timeout waiting, not hung?
 * @ring: its ring
 * @job: the job, armed, whose timeout fired
 *
 * A WAIT can wait for the host longer than a job may run: a collective's
 * steps queued behind WAITs for a peer that is late. While the host writes
 * the word, the WAIT sees it change and the ring's WAIT_SEEN moves: the job
 * makes progress, as the GPUs' drivers that keep a job whose engine moves
 * on (etnaviv, v3d) say. So it is kept for another whole timeout if
 * WAIT_SEEN moved since its previous one started (rbln_ring_note_seen()),
 * but for wait_timeout_ms at most since it became the job the ring runs: a
 * hostile file writing its word holds the ring no longer, and a WAIT whose
 * writer died is reset one timeout after its last write.
 *
 * Only the job at the ring's head can time out: the scheduler's pending
 * list is in the ring's order, and every job before it there has
 * signaled, so the jobs before it on the ring have too. WAIT_SEEN, like
 * the job's time, is the ring's own: a WAIT moving on another ring keeps
 * nothing on this one.
 *
 * Inside drm_dev_enter(), under the reset lock: a function reset another
 * ring's timeout makes clears WAIT_SEEN and starts every job again.
 *
 * Return: 1 to keep the job, 0 to reset its ring, -ENODEV if the device
 * is gone.
 */
static int rbln_job_progressing(struct rbln_ring *ring, struct rbln_job *job)
{
	unsigned long cap = msecs_to_jiffies(max(wait_timeout_ms, job_timeout_ms));
	struct rbln_device *rdev = ring->rdev;
	struct rbln_fence *fence = job->fence;
	int keep = 0;
	u32 seen;

	lockdep_assert_held(&rdev->reset_lock);
	seen = rbln_hw_read(rdev->hw, RBLN_RING_REG(ring->index, RBLN_RING_WAIT_SEEN));
	/* All-ones is also a count: the device is gone if CHIP_ID reads so too. */
	if (seen == RBLN_REG_DEAD &&
	    rbln_hw_read(rdev->hw, RBLN_REG_CHIP_ID) == RBLN_REG_DEAD)
		return -ENODEV;

	spin_lock(&ring->lock);
	/* Signaled meanwhile: off the list, and its timeout is moot. */
	if (list_empty(&fence->link))
		goto out;
	if (drm_WARN_ON_ONCE(&rdev->drm, ring->pending.next != &fence->link))
		goto out;
	if (seen == ring->head_seen || time_after_eq(jiffies, ring->head_since + cap))
		goto out;
	ring->head_seen = seen;
	/* The scheduler starts a whole timeout when this returns. */
	ring->head_timer = jiffies;
	keep = 1;
out:
	spin_unlock(&ring->lock);
	return keep;
}

/*
 * A job ran past the timeout; inside drm_dev_enter(). The order matters:
 * nothing it used may be released while the device can still touch it.
 * So: stop feeding the ring, reset it and wait for the device to confirm,
 * retire what completed meanwhile, fail the guilty job, put the innocent
 * ones back, go on. A ring that will not stop takes the whole function
 * down with it. But a job whose WAIT makes progress is not hung: then
 * nothing is done and @kept is set (rbln_job_progressing()).
 */
static enum drm_gpu_sched_stat rbln_job_recover(struct rbln_ring *ring, struct rbln_job *job,
						bool *kept)
{
	struct rbln_device *rdev = ring->rdev;
	struct rbln_fence *fence = job->fence;
	bool cookie, stopped, reset;
	int progress;
	u32 ctx;

	if (dma_fence_is_signaled(&fence->base))
		return DRM_GPU_SCHED_STAT_NOMINAL;
	/* The index it runs with: once it fails, another context may take it. */
	ctx = READ_ONCE(job->vm->id);
	/* Fallen off the bus: it touches no memory any more, and is unbound soon. */
	if (rbln_hw_read(rdev->hw, RBLN_REG_CHIP_ID) == RBLN_REG_DEAD) {
		rbln_fence_lost(ring, fence);
		rbln_device_lost(rdev, "its registers read all-ones");
		return DRM_GPU_SCHED_STAT_ENODEV;
	}

	/*
	 * Stopped under the lock: a function reset another ring's timeout
	 * runs meanwhile restarts every ring but its own, this one too. Every
	 * fence of the rings waits for what follows the stops, as for run_job.
	 */
	mutex_lock(&rdev->reset_lock);
	progress = rbln_job_progressing(ring, job);
	if (progress) {
		mutex_unlock(&rdev->reset_lock);
		if (progress > 0) {
			*kept = true;
			return DRM_GPU_SCHED_STAT_NOMINAL;
		}
		rbln_fence_lost(ring, fence);
		rbln_device_lost(rdev, "its registers read all-ones");
		return DRM_GPU_SCHED_STAT_ENODEV;
	}
	drm_sched_wqueue_stop(&ring->sched);
	cookie = dma_fence_begin_signalling();
	stopped = rbln_ring_reset(ring);
	if (stopped) {
		rbln_ring_complete(ring);
		/* Counted before the fence signals: whoever waits on it sees the reset. */
		atomic_inc(&rdev->reset_count);
		rbln_ring_replay(ring, fence);
	}
	dma_fence_end_signalling(cookie);
	reset = stopped;
	if (!stopped) {
		rbln_rings_feed(rdev, ring, false);
		cookie = dma_fence_begin_signalling();
		reset = rbln_function_reset(rdev, ring, fence);
		dma_fence_end_signalling(cookie);
		rbln_rings_feed(rdev, ring, true);
	}
	mutex_unlock(&rdev->reset_lock);
	drm_sched_wqueue_start(&ring->sched);
	if (!reset)
		return DRM_GPU_SCHED_STAT_ENODEV;

	drm_warn(&rdev->drm, "ring %u: job %llu of context %u timed out; ring reset\n",
		 ring->index, fence->base.seqno, ctx);
	queue_work(system_unbound_wq, &ring->reset_event);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

/*
 * A job kept running past its timeout goes back where the scheduler took
 * it from, the head of its pending list, as etnaviv's and v3d's do, and
 * the scheduler arms a whole timeout for it again. Unless its finished
 * fence signaled meanwhile: the scheduler's free work, which only frees
 * the first job of the list, may have come and gone while it was off it,
 * so it is freed as a guilty one instead, at once.
 */
static bool rbln_job_requeue(struct drm_sched_job *sched_job)
{
	struct drm_gpu_scheduler *sched = sched_job->sched;
	bool requeued;

	spin_lock(&sched->job_list_lock);
	requeued = !dma_fence_is_signaled(&sched_job->s_fence->finished);
	if (requeued)
		list_add(&sched_job->list, &sched->pending_list);
	spin_unlock(&sched->job_list_lock);
	return requeued;
}

/*
 * The scheduler took the job off its list: unless it goes back on
 * (rbln_job_requeue()), it is ours to free, and it frees it as soon as we
 * return. By then the job's hardware fence has signaled, here or on
 * another CPU (the interrupt handler, unplug), but the callback that
 * signal runs, the scheduler's, reads the job until it has signaled the
 * finished fence: so wait for that one.
 */
static enum drm_gpu_sched_stat rbln_timedout_job(struct drm_sched_job *sched_job)
{
	struct rbln_ring *ring = to_rbln_ring(sched_job->sched);
	struct rbln_job *job = to_rbln_job(sched_job);
	enum drm_gpu_sched_stat status = DRM_GPU_SCHED_STAT_NOMINAL;
	bool kept = false;
	int idx;

	/* Not armed: run_job refused it (banned, removed), it is already done. */
	if (job->fence_armed && drm_dev_enter(&ring->rdev->drm, &idx)) {
		status = rbln_job_recover(ring, job, &kept);
		drm_dev_exit(idx);
	} else if (job->fence_armed) {
		/* Removal stopped the device and fails every fence: maybe not this one yet. */
		rbln_fence_lost(ring, job->fence);
		status = DRM_GPU_SCHED_STAT_ENODEV;
	}
	if (kept && rbln_job_requeue(sched_job))
		return status;
	sched_job->sched->free_guilty = true;
	/* Signaled by now, or about to be, in the callback of the hardware fence. */
	dma_fence_wait(&sched_job->s_fence->finished, false);
	return status;
}

/**
 * rbln_vm_room_get() - take room for one more unfinished job of a context
 * @vm: the context
 * @count: its count of jobs (SUBMIT) or of bind jobs (VM_BIND)
 *
 * A file has at most max_jobs of each, or its jobs, waiting behind one that
 * never ends before the job timeout, could take all the kernel's memory.
 * Room is taken before anything is allocated, so a signal leaves nothing
 * to undo, and atomically, so that racing callers cannot all see room for
 * one. Waiters are woken when half of @count has retired
 * (rbln_vm_room_put()) and then take what room there is.
 *
 * Return: 0, or -ERESTARTSYS if a signal came first.
 */
int rbln_vm_room_get(struct rbln_vm *vm, atomic_t *count)
{
	if (atomic_add_unless(count, 1, max_jobs) ||
	    !wait_event_interruptible(vm->jobs_done, atomic_add_unless(count, 1, max_jobs)))
		return 0;
	return -ERESTARTSYS;
}

/**
 * rbln_vm_room_put() - a job of @vm is gone, or a caller gave up its room
 * @vm: the context
 * @count: what rbln_vm_room_get() counted it in
 */
void rbln_vm_room_put(struct rbln_vm *vm, atomic_t *count)
{
	int left = atomic_dec_return(count);

	if (!left || left == max_jobs / 2)
		wake_up_all(&vm->jobs_done);
}

/**
 * rbln_vm_jobs_wait() - give a closing context's jobs time to be freed
 * @vm: the context
 * @count: its count of jobs or of bind jobs (rbln_vm_room_get())
 *
 * A job holds what it uses until the scheduler frees it, a moment after
 * its fence has signaled; waiting for that releases it with the file. For
 * job_timeout_ms at most, as long as one job may run.
 *
 * Return: true if they are all gone.
 */
bool rbln_vm_jobs_wait(struct rbln_vm *vm, atomic_t *count)
{
	return wait_event_timeout(vm->jobs_done, !atomic_read(count),
				  msecs_to_jiffies(job_timeout_ms));
}

static void rbln_job_free(struct rbln_job *job)
{
	u32 i;

	for (i = 0; i < job->bo_count && job->bos[i]; i++) {
		if (i < job->bos_used)
			rbln_vm_unmap(job->vm, to_rbln_bo(job->bos[i]));
		drm_gem_object_put(job->bos[i]);
	}
	if (job->fence_armed)
		dma_fence_put(&job->fence->base);
	else
		kfree(job->fence);
	rbln_vm_room_put(job->vm, &job->vm->jobs);
	rbln_job_slow_free_wait(job->vm->rdev);
	rbln_vm_put(job->vm);
	kvfree(job);
}

static void rbln_job_release(struct work_struct *work)
{
	rbln_job_free(container_of(work, struct rbln_job, release));
}

/*
 * Fences wait for this: the scheduler runs it on the ordered work queue of
 * run_job, and a timeout's stops wait for it. Dropping mappings and
 * objects takes locks held where memory is allocated, so the rest of the
 * job goes on rbln_wq.
 */
static void rbln_free_job(struct drm_sched_job *sched_job)
{
	struct rbln_job *job = to_rbln_job(sched_job);
	bool cookie = dma_fence_begin_signalling();

	drm_sched_job_cleanup(sched_job);
	INIT_WORK(&job->release, rbln_job_release);
	queue_work(rbln_wq, &job->release);
	dma_fence_end_signalling(cookie);
}

static const struct drm_sched_backend_ops rbln_sched_ops = {
	.run_job = rbln_run_job,
	.timedout_job = rbln_timedout_job,
	.free_job = rbln_free_job,
};

/* The memory the device reads and writes for @ring, once it no longer does. */
static void rbln_ring_free_dma(struct rbln_ring *ring)
{
	struct device *dma_dev = ring->rdev->hw->dma_dev;

	if (ring->entries)
		dma_free_coherent(dma_dev, RBLN_RING_ENTRIES * sizeof(*ring->entries),
				  ring->entries, ring->entries_dma);
	if (ring->fence_slot)
		dma_free_coherent(dma_dev, sizeof(u64), ring->fence_slot, ring->fence_dma);
	ring->entries = NULL;
	ring->fence_slot = NULL;
}

static void rbln_job_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln_device(drm);
	unsigned int r;

	for (r = 0; r < rdev->num_rings; r++) {
		struct rbln_ring *ring = &rdev->rings[r];

		if (ring->sched.ops) {
			cancel_work_sync(&ring->reset_event);
			drm_sched_fini(&ring->sched);
		}
		ring->sched.ops = NULL;
		rbln_ring_free_dma(ring);
	}
}

/*
 * A device's schedulers outlive it. drm_sched's fences name their timeline
 * by reading their scheduler's name, and whoever holds a fence (a
 * sync_file, a syncobj, another driver's reservation object) may ask long
 * after the device went: freed, the scheduler would be read freed. So the
 * schedulers of a released device go back to a pool for the next device,
 * are never cleared over the name, and are freed with the module.
 */
struct rbln_scheds {
	struct list_head link;
	struct drm_gpu_scheduler bind;
	struct rbln_ring rings[RBLN_MAX_RINGS];
};

static LIST_HEAD(rbln_scheds_pool);
static DEFINE_MUTEX(rbln_scheds_lock); /* protects rbln_scheds_pool */

static void rbln_scheds_put(struct drm_device *drm, void *arg)
{
	struct rbln_scheds *scheds = arg;

	mutex_lock(&rbln_scheds_lock);
	list_add(&scheds->link, &rbln_scheds_pool);
	mutex_unlock(&rbln_scheds_lock);
}

/* Schedulers for @rdev's rings and binds, returned to the pool with the device. */
static struct rbln_scheds *rbln_scheds_get(struct rbln_device *rdev)
{
	const size_t rest = offsetofend(struct rbln_ring, sched);
	struct rbln_scheds *scheds;
	unsigned int r;

	mutex_lock(&rbln_scheds_lock);
	scheds = list_first_entry_or_null(&rbln_scheds_pool, struct rbln_scheds, link);
	if (scheds)
		list_del(&scheds->link);
	mutex_unlock(&rbln_scheds_lock);
	if (!scheds) {
		scheds = kzalloc(sizeof(*scheds), GFP_KERNEL);
		if (!scheds)
			return NULL;
	}
	/* drm_sched_init() sets all a scheduler uses; the rest starts zeroed. */
	for (r = 0; r < RBLN_MAX_RINGS; r++)
		memset((char *)&scheds->rings[r] + rest, 0, sizeof(scheds->rings[r]) - rest);
	if (drmm_add_action_or_reset(&rdev->drm, rbln_scheds_put, scheds))
		return NULL;
	return scheds;
}

/**
 * rbln_job_exit() - free the schedulers kept for devices to come
 *
 * At module unload, every device released.
 */
void rbln_job_exit(void)
{
	struct rbln_scheds *scheds, *tmp;

	list_for_each_entry_safe(scheds, tmp, &rbln_scheds_pool, link)
		kfree(scheds);
}

/*
 * Jobs a ring holds at once. All rings together hold fewer than the
 * device's contexts, so that a job about to run always finds a context
 * with none on the rings to take the index of (rbln_vm_pin()).
 */
static u32 rbln_ring_credits(struct rbln_device *rdev)
{
	return min(RBLN_RING_ENTRIES - 1, (RBLN_MAX_CONTEXTS - 1) / rdev->num_rings);
}

static int rbln_ring_init(struct rbln_device *rdev, struct rbln_ring *ring, unsigned int r)
{
	struct drm_sched_init_args args = {
		.ops = &rbln_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = rbln_ring_credits(rdev),
		.timeout = msecs_to_jiffies(job_timeout_ms),
		/* Not behind whatever holds the CPU its timer fired on. */
		.timeout_wq = system_unbound_wq,
		.name = "rbln",
		.dev = rdev->drm.dev,
	};
	struct rbln_hw *hw = rdev->hw;
	int ret;

	ring->rdev = rdev;
	ring->index = r;
	spin_lock_init(&ring->lock);
	INIT_LIST_HEAD(&ring->pending);
	INIT_WORK(&ring->slow_doorbell, rbln_ring_slow_doorbell);
	INIT_WORK(&ring->reset_event, rbln_ring_reset_event);
	ring->context = dma_fence_context_alloc(1);

	ring->entries = dma_alloc_coherent(hw->dma_dev, RBLN_RING_ENTRIES * sizeof(*ring->entries),
					   &ring->entries_dma, GFP_KERNEL);
	ring->fence_slot = dma_alloc_coherent(hw->dma_dev, sizeof(u64), &ring->fence_dma,
					      GFP_KERNEL);
	if (!ring->entries || !ring->fence_slot)
		return -ENOMEM;

	ret = drm_sched_init(&ring->sched, &args);
	if (ret) {
		ring->sched.ops = NULL;
		return ret;
	}

	rbln_ring_program(ring);
	return 0;
}

/**
 * rbln_job_init() - bring up the rings of a device
 * @rdev: the device, identified
 *
 * Torn down with the DRM device, after every file is closed.
 *
 * Return: 0 or a negative errno.
 */
int rbln_job_init(struct rbln_device *rdev)
{
	struct rbln_scheds *scheds;
	unsigned int r;
	int ret;

	scheds = rbln_scheds_get(rdev);
	/* Entities keep a pointer to the list: it lives with the device. */
	rdev->scheds = drmm_kcalloc(&rdev->drm, rdev->num_rings, sizeof(*rdev->scheds),
				    GFP_KERNEL);
	if (!scheds || !rdev->scheds)
		return -ENOMEM;
	rdev->rings = scheds->rings;
	rdev->bind_sched = &scheds->bind;
	ret = drmm_add_action(&rdev->drm, rbln_job_fini, NULL) ?:
	      drmm_mutex_init(&rdev->drm, &rdev->reset_lock);
	if (ret)
		return ret;

	for (r = 0; r < rdev->num_rings; r++) {
		ret = rbln_ring_init(rdev, &rdev->rings[r], r);
		if (ret)
			return ret;
		rdev->scheds[r] = &rdev->rings[r].sched;
	}
	/* Not before: a stray vector would find rings half set up. */
	rdev->hw->irq_data = rdev;
	/* Pairs with the backends' acquire: they see the rings and irq_data. */
	smp_store_release(&rdev->hw->irq, rbln_irq);
	return 0;
}

/**
 * rbln_job_unplug() - fail every job in flight: the device is gone
 * @rdev: the device, after drm_dev_unplug(), stopped
 *
 * Jobs still queued fail in run_job; nothing waits for the device again.
 * The rings' memory goes: only drm_dev_enter() sections touch it (run_job,
 * the timeout handler, the interrupt handler), and none is left.
 */
void rbln_job_unplug(struct rbln_device *rdev)
{
	struct rbln_fence *fence, *tmp;
	unsigned int r;

	for (r = 0; r < rdev->num_rings; r++) {
		struct rbln_ring *ring = &rdev->rings[r];

		spin_lock(&ring->lock);
		list_for_each_entry_safe(fence, tmp, &ring->pending, link)
			rbln_fence_retire(ring, fence, -ENODEV);
		spin_unlock(&ring->lock);
		rbln_ring_free_dma(ring);
	}
}

/**
 * rbln_ring_busy_ns() - time the device spent executing, all rings
 * @rdev: the device
 *
 * Return: nanoseconds since the device came up.
 */
u64 rbln_ring_busy_ns(struct rbln_device *rdev)
{
	unsigned int r;
	u64 sum = 0;
	int idx;

	if (!drm_dev_enter(&rdev->drm, &idx))
		return 0;
	for (r = 0; r < rdev->num_rings; r++)
		sum += rbln_hw_read64(rdev->hw, RBLN_RING_REG(r, RBLN_RING_BUSY_NS_LO));
	drm_dev_exit(idx);
	return sum;
}

/* --- queues ------------------------------------------------------------------ */

static void rbln_queue_release(struct kref *ref)
{
	struct rbln_queue *queue = container_of(ref, struct rbln_queue, ref);

	/* Jobs already queued run, or fail if the device is gone. */
	drm_sched_entity_destroy(&queue->entity);
	mutex_destroy(&queue->lock);
	kfree(queue);
}

static void rbln_queue_put(struct rbln_queue *queue)
{
	kref_put(&queue->ref, rbln_queue_release);
}

int rbln_queue_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	static const enum drm_sched_priority prio[] = {
		[RBLN_QUEUE_PRIORITY_LOW] = DRM_SCHED_PRIORITY_LOW,
		[RBLN_QUEUE_PRIORITY_NORMAL] = DRM_SCHED_PRIORITY_NORMAL,
		[RBLN_QUEUE_PRIORITY_HIGH] = DRM_SCHED_PRIORITY_HIGH,
	};
	struct rbln_device *rdev = to_rbln_device(drm);
	struct rbln_file *rfile = to_rbln_file(file);
	struct drm_rbln_queue_create *args = data;
	struct rbln_queue *queue;
	int ret;

	if (args->priority > RBLN_QUEUE_PRIORITY_HIGH)
		return -EINVAL;
	if (args->priority == RBLN_QUEUE_PRIORITY_HIGH && !capable(CAP_SYS_NICE))
		return -EACCES;

	queue = kzalloc(sizeof(*queue), GFP_KERNEL);
	if (!queue)
		return -ENOMEM;
	kref_init(&queue->ref);
	mutex_init(&queue->lock);
	ret = drm_sched_entity_init(&queue->entity, prio[args->priority], rdev->scheds,
				    rdev->num_rings, NULL);
	if (ret)
		goto err_free;

	ret = xa_alloc(&rfile->queues, &args->queue_id, queue,
		       XA_LIMIT(1, RBLN_MAX_QUEUES), GFP_KERNEL);
	if (ret)
		goto err_entity;
	return 0;

err_entity:
	drm_sched_entity_destroy(&queue->entity);
err_free:
	mutex_destroy(&queue->lock);
	kfree(queue);
	return ret == -EBUSY ? -ENOSPC : ret;
}

int rbln_queue_destroy_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_rbln_queue_destroy *args = data;
	struct rbln_queue *queue;

	if (args->pad)
		return -EINVAL;
	queue = xa_erase(&to_rbln_file(file)->queues, args->queue_id);
	if (!queue)
		return -ENOENT;
	rbln_queue_put(queue);
	return 0;
}

/**
 * rbln_queues_destroy() - destroy every queue of a closing file, wait for
 * its jobs
 * @rfile: the file
 *
 * A queued job runs before its queue goes, or, in an exiting process, is
 * killed after the scheduler's short grace (drm_sched_entity_flush()).
 * Then the file's jobs get job_timeout_ms, as long as one job may run, to
 * be done and freed, so that what they held is released with the file.
 * After that the context is canceled: what still runs stops at its next
 * access, what has not started does not, and all end with -ECANCELED.
 * Otherwise a file could hold its closer, or a killed process's exit, for
 * as many timeouts as it has jobs on the rings.
 *
 * Only the jobs on the rings are waited for then, as only they can touch
 * memory. A killed job is freed once what it waits for has signaled
 * (drm_sched_entity_kill()): maybe another file's job, behind a queue that
 * is long or starved. It holds what it uses until then, by reference.
 */
void rbln_queues_destroy(struct rbln_file *rfile)
{
	struct rbln_vm *vm = rfile->vm;
	struct rbln_queue *queue;
	unsigned long id;

	xa_for_each(&rfile->queues, id, queue) {
		xa_erase(&rfile->queues, id);
		rbln_queue_put(queue);
	}
	xa_destroy(&rfile->queues);
	if (rbln_vm_jobs_wait(vm, &vm->jobs))
		return;
	rbln_vm_cancel(vm);
	wait_event(vm->rings_done, !atomic_read(&vm->ring_jobs));
}

static struct rbln_queue *rbln_queue_get(struct rbln_file *rfile, u32 id)
{
	struct rbln_queue *queue;

	xa_lock(&rfile->queues);
	queue = xa_load(&rfile->queues, id);
	if (queue)
		kref_get(&queue->ref);
	xa_unlock(&rfile->queues);
	return queue;
}

/* --- submission ---------------------------------------------------------------- */

/*
 * Looks up the @job->bo_count handles at user address @handles, a chunk
 * at a time, into the job itself: drm_gem_objects_lookup() would allocate
 * an array and a copy of the handles besides, an eighth of SUBMIT's cost.
 */
static int rbln_job_lookup_bos(struct rbln_job *job, struct drm_file *file, u64 handles)
{
	u32 chunk[16], i, j, n;

	for (i = 0; i < job->bo_count; i += n) {
		n = min_t(u32, job->bo_count - i, ARRAY_SIZE(chunk));
		if (copy_from_user(chunk, u64_to_user_ptr(handles) + i * sizeof(u32),
				   n * sizeof(u32)))
			return -EFAULT;
		for (j = 0; j < n; j++) {
			job->bos[i + j] = drm_gem_object_lookup(file, chunk[j]);
			if (!job->bos[i + j])
				return -ENOENT;
		}
	}
	return 0;
}

static int rbln_submit_check(struct rbln_device *rdev, struct drm_rbln_submit *args)
{
	if (args->flags || args->pad || args->signal.pad)
		return -EINVAL;
	if (!args->cmd_size || args->cmd_size % 8 || args->cmd_va % 8 ||
	    args->cmd_size > rdev->max_cmd_size)
		return -EINVAL;
	if (args->bo_count > RBLN_SUBMIT_MAX_BOS || args->wait_count > RBLN_SUBMIT_MAX_WAITS)
		return -E2BIG;
	return 0;
}

int rbln_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct rbln_device *rdev = to_rbln_device(drm);
	struct rbln_file *rfile = to_rbln_file(file);
	struct drm_rbln_submit *args = data;
	struct rbln_sync_signal signal = {};
	struct dma_resv *resv;
	struct rbln_queue *queue;
	struct dma_fence *done;
	struct rbln_job *job;
	int ret;
	u32 i;

	ret = rbln_submit_check(rdev, args);
	if (ret)
		return ret;
	ret = rbln_vm_room_get(rfile->vm, &rfile->vm->jobs);
	if (ret)
		return ret;
	/* After the wait: a job ahead may have faulted, or the device gone. */
	ret = -ECANCELED;
	if (atomic_read(&rfile->vm->banned))
		goto out_room;
	ret = -ENODEV;
	if (drm_dev_is_unplugged(drm))
		goto out_room;
	ret = -ENOENT;
	queue = rbln_queue_get(rfile, args->queue_id);
	if (!queue)
		goto out_room;

	job = kvzalloc(struct_size(job, bos, args->bo_count), GFP_KERNEL_ACCOUNT);
	if (job) {
		job->bo_count = args->bo_count;
		job->fence = kzalloc(sizeof(*job->fence), GFP_KERNEL_ACCOUNT);
	}
	if (!job || !job->fence) {
		kvfree(job);
		rbln_queue_put(queue);
		ret = -ENOMEM;
		goto out_room;
	}
	INIT_LIST_HEAD(&job->fence->link);
	/* The job has the room now: freeing it gives it back. */
	job->vm = rbln_vm_get(rfile->vm);
	job->cmd_va = args->cmd_va;
	job->cmd_size = args->cmd_size;

	ret = rbln_job_lookup_bos(job, file, args->bo_handles);
	if (ret)
		goto err_job;
	for (i = 0; i < job->bo_count; i++) {
		ret = rbln_vm_use(job->vm, to_rbln_bo(job->bos[i]));
		if (ret)
			goto err_job;
		job->bos_used++;
	}

	ret = rbln_sync_signal_prepare(file, &args->signal, &signal);
	if (ret)
		goto err_job;

	ret = drm_sched_job_init(&job->base, &queue->entity, 1, job->vm, file->client_id);
	if (ret)
		goto err_job;
	ret = rbln_sync_add_waits(&job->base, file, args->waits, args->wait_count);
	if (ret)
		goto err_sched_job;

	/*
	 * Unbinds wait for every job of the context pushed before them: they
	 * take the fences under the same lock (rbln_vm_bind_ioctl()).
	 */
	resv = drm_gpuvm_resv(&job->vm->gpuvm);
	ret = dma_resv_lock_interruptible(resv, NULL);
	if (ret)
		goto err_sched_job;
	ret = dma_resv_reserve_fences(resv, 1);
	if (ret) {
		dma_resv_unlock(resv);
		goto err_sched_job;
	}
	mutex_lock(&queue->lock);
	drm_sched_job_arm(&job->base);
	done = dma_fence_get(&job->base.s_fence->finished);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&queue->lock);
	dma_resv_add_fence(resv, done, DMA_RESV_USAGE_BOOKKEEP);
	dma_resv_unlock(resv);

	rbln_sync_signal(&signal, done);
	dma_fence_put(done);
	rbln_queue_put(queue);
	return 0;

err_sched_job:
	drm_sched_job_cleanup(&job->base);
err_job:
	rbln_sync_signal_abort(&signal);
	rbln_job_free(job);
	rbln_queue_put(queue);
	return ret;

out_room:
	rbln_vm_room_put(rfile->vm, &rfile->vm->jobs);
	return ret;
}

/**
 * rbln_job_show_fdinfo() - the engine keys of a file's fdinfo
 * @p: where to print
 * @file: the file
 *
 * And, once a job of the file faulted, the fault that banned its context:
 * the kernel log may have dropped its line (it is ratelimited), and the
 * job's owner is the one to ask.
 */
void rbln_job_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	static const char *const types[] = {
		[RBLN_FAULT_UNMAPPED] = "unmapped",
		[RBLN_FAULT_WRITE_PROTECTED] = "write-protected",
		[RBLN_FAULT_ILLEGAL_OPCODE] = "illegal-opcode",
		[RBLN_FAULT_MALFORMED] = "malformed",
		[RBLN_FAULT_DMA] = "dma",
		[RBLN_FAULT_BAD_CONTEXT] = "bad-context",
	};
	struct rbln_device *rdev = to_rbln_device(file->minor->dev);
	struct rbln_vm *vm = to_rbln_file(file)->vm;
	u32 info, type;

	drm_printf(p, "drm-engine-npu:\t%llu ns\n", (u64)atomic64_read(&vm->busy_ns));
	drm_printf(p, "drm-engine-capacity-npu:\t%u\n", rdev->num_rings);
	/* Pairs with rbln_ring_fault()'s release: the address is written. */
	info = smp_load_acquire(&vm->fault_info);
	if (!info)
		return;
	type = RBLN_FAULT_TYPE(info);
	if (type < ARRAY_SIZE(types) && types[type])
		drm_printf(p, "rbln-fault:\t%s %#llx\n", types[type], vm->fault_addr);
	else
		drm_printf(p, "rbln-fault:\t%u %#llx\n", type, vm->fault_addr);
}
