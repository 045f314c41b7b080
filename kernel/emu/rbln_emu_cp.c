// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_emu_cp.c - the emulated NPU's command processor
 *
 * One work item per ring, on an unbound workqueue, so rings run
 * concurrently. A ring's work runs entries from HEAD to TAIL: it fetches
 * the command buffer through the entry's context, executes its packets,
 * writes the entry's seqno to the fence slot and raises the interrupt. A
 * fault stops the ring until the driver acknowledges it. Waits are
 * TASK_IDLE: a hung job is a state of the device, not a blocked task. A
 * reset stops the ring at the next step of whatever it runs and drops its
 * entries.
 */

#include "rbln_emu_internal.h"

/**
 * rbln_emu_ring_stopped() - must the command processor stop what it does?
 * @ring: the ring
 *
 * Lockless: read at every step of long work.
 *
 * Return: true once a reset is asked for or the device is being removed.
 */
bool rbln_emu_ring_stopped(struct rbln_emu_ring *ring)
{
	return READ_ONCE(ring->reset) || READ_ONCE(ring->edev->stopping);
}

/**
 * rbln_emu_ring_flush_irq() - raise the interrupt that moderation holds back
 * @ring: the ring, from its command processor
 *
 * For a step that may last as long as the host wants (WAIT): the entries
 * completed before it must not wait for it to be reported, since their
 * completion may be what the host waits for before it releases the step.
 */
void rbln_emu_ring_flush_irq(struct rbln_emu_ring *ring)
{
	if (!ring->irq_held)
		return;
	rbln_emu_raise_irq(ring->edev, ring->index, false);
	ring->irq_last = ktime_get_ns();
	ring->irq_held = 0;
}

/**
 * rbln_emu_ring_wait_seen() - a WAIT on @ring saw its word change
 * @ring: the ring, from its command processor
 *
 * Counted in RING_WAIT_SEEN, which the driver reads at a job's timeout to
 * tell a WAIT the host is moving along from a hung job.
 */
void rbln_emu_ring_wait_seen(struct rbln_emu_ring *ring)
{
	spin_lock(&ring->lock);
	ring->wait_seen++;
	spin_unlock(&ring->lock);
}

static bool rbln_emu_fault_acked(struct rbln_emu_ring *ring)
{
	return !(READ_ONCE(ring->fault_info) & RBLN_FAULT_VALID) || rbln_emu_ring_stopped(ring);
}

/* Runs one entry: 0, RBLN_EMU_ABORTED or a RBLN_FAULT_*. */
static int rbln_emu_run_entry(struct rbln_emu_ring *ring, struct rbln_ring_entry *entry,
			      u64 *fault_addr)
{
	struct rbln_emu_dev *edev = ring->edev;
	struct rbln_emu_ctx ctx;
	int ret;

	*fault_addr = entry->cmd_va;
	ret = rbln_emu_ctx_init(&ctx, ring, entry->ctx);
	if (ret)
		return ret;
	if (!entry->cmd_size || entry->cmd_size > RBLN_EMU_MAX_CMD_SIZE ||
	    entry->cmd_size % 8 || entry->cmd_va % 8)
		return RBLN_FAULT_MALFORMED;

	if (atomic_fetch_andnot(RBLN_INJECT_HANG, &edev->inject) & RBLN_INJECT_HANG) {
		wait_event_idle(ring->wq, rbln_emu_ring_stopped(ring));
		return RBLN_EMU_ABORTED;
	}
	if (atomic_fetch_andnot(RBLN_INJECT_FAULT, &edev->inject) & RBLN_INJECT_FAULT)
		return RBLN_FAULT_UNMAPPED;
	/* A wedged engine: deaf to RESET, only a function reset ends it. */
	if (atomic_fetch_andnot(RBLN_INJECT_STUCK, &edev->inject) & RBLN_INJECT_STUCK) {
		wait_event_idle(ring->wq, READ_ONCE(ring->power_on) || READ_ONCE(edev->stopping));
		return RBLN_EMU_ABORTED;
	}

	ret = rbln_emu_read(&ctx, entry->cmd_va, ring->cmd_buf, entry->cmd_size);
	if (!ret)
		ret = rbln_emu_exec(&ctx, entry->cmd_va, ring->cmd_buf, entry->cmd_size);
	if (ret > 0)
		*fault_addr = ctx.fault_addr;
	return ret;
}

/*
 * A reset asked for: whatever ran has stopped (its steps check), so drop
 * every entry and any fault. The waiting driver sees RESET read 0 after.
 */
static void rbln_emu_ring_do_reset(struct rbln_emu_ring *ring)
{
	lockdep_assert_held(&ring->lock);
	ring->head = 0;
	ring->tail = 0;
	ring->fault_info = 0;
	ring->wait_seen = 0;
	if (ring->power_on) {
		ring->base = 0;
		ring->fence = 0;
		ring->enabled = false;
		ring->fault_addr = 0;
		ring->fault_seqno = 0;
		ring->busy_ns = 0;
		ring->power_on = false;
	}
	WRITE_ONCE(ring->reset, false);
}

/*
 * The command processor. The device's fences wait for it, so it runs in a
 * fence signalling section: lockdep then reports whatever in it could wait
 * for them, an allocation that reclaims above all.
 */
static void rbln_emu_ring_work(struct work_struct *work)
{
	struct rbln_emu_ring *ring = container_of(work, struct rbln_emu_ring, work);
	struct rbln_emu_dev *edev = ring->edev;
	bool cookie = dma_fence_begin_signalling();
	u64 slot, fault_addr, start, busy;
	struct rbln_ring_entry entry;
	u32 head;
	int ret;

	ring->irq_held = 0;
	ring->irq_last = ktime_get_ns();

	for (;;) {
		spin_lock(&ring->lock);
		if (ring->reset)
			rbln_emu_ring_do_reset(ring);
		head = ring->head;
		if (!ring->enabled || READ_ONCE(edev->stopping) || head == ring->tail) {
			spin_unlock(&ring->lock);
			rbln_emu_ring_flush_irq(ring);
			break;
		}
		slot = ring->base + head * sizeof(entry);
		spin_unlock(&ring->lock);

		start = ktime_get_ns();
		ret = rbln_emu_host_read(ring, slot, &entry, sizeof(entry));
		if (ret > 0) {
			/* The ring itself is out of reach: the entry faults. */
			memset(&entry, 0, sizeof(entry));
			fault_addr = slot;
		} else if (!ret) {
			ret = rbln_emu_run_entry(ring, &entry, &fault_addr);
		}
		busy = ktime_get_ns() - start;

		/*
		 * A fault met while the ring is being stopped may be the stop's
		 * own doing: a function reset takes the tables away once it has
		 * told the rings to stop. The entry is abandoned, as any
		 * stopped one.
		 */
		if (ret > 0) {
			/* What faulted before the stop; pairs with rbln_emu_func_reset()'s. */
			smp_mb();
			if (rbln_emu_ring_stopped(ring))
				ret = RBLN_EMU_ABORTED;
		}
		if (ret > 0) {
			spin_lock(&ring->lock);
			ring->fault_info = RBLN_FAULT_VALID | ret;
			ring->fault_addr = fault_addr;
			ring->fault_seqno = entry.seqno;
			spin_unlock(&ring->lock);
			rbln_emu_raise_irq(edev, ring->index, true);
			wait_event_idle(ring->wq, rbln_emu_fault_acked(ring));
		}

		spin_lock(&ring->lock);
		/* Stopped under way: the entry is abandoned, no fence. */
		if (ring->reset || READ_ONCE(edev->stopping)) {
			spin_unlock(&ring->lock);
			continue;
		}
		ring->busy_ns += busy;
		ring->head = (head + 1) % RBLN_RING_ENTRIES;
		spin_unlock(&ring->lock);

		rbln_emu_host_write(ring, slot + offsetof(struct rbln_ring_entry, busy_ns),
				    &busy, sizeof(busy));
		/* The fence is the last thing the driver reads of the entry. */
		rbln_emu_host_write_fence(ring, READ_ONCE(ring->fence), entry.seqno);
		/*
		 * Interrupt moderation: one interrupt covers every entry done
		 * so far, so raise it when the ring drains or every few
		 * entries, not after each; but never hold a completion back
		 * for long, as long entries would.
		 */
		if (++ring->irq_held >= RBLN_EMU_IRQ_BATCH || READ_ONCE(ring->tail) == ring->head ||
		    start + busy - ring->irq_last >= RBLN_EMU_IRQ_DELAY_NS)
			rbln_emu_ring_flush_irq(ring);
		cond_resched();
	}
	dma_fence_end_signalling(cookie);
}

u32 rbln_emu_ring_read(struct rbln_emu_ring *ring, u32 off)
{
	u32 val;

	spin_lock(&ring->lock);
	switch (off) {
	case RBLN_RING_BASE_LO:
		val = lower_32_bits(ring->base);
		break;
	case RBLN_RING_BASE_HI:
		val = upper_32_bits(ring->base);
		break;
	case RBLN_RING_TAIL:
		val = ring->tail;
		break;
	case RBLN_RING_HEAD:
		val = ring->head;
		break;
	case RBLN_RING_FENCE_LO:
		val = lower_32_bits(ring->fence);
		break;
	case RBLN_RING_FENCE_HI:
		val = upper_32_bits(ring->fence);
		break;
	case RBLN_RING_ENABLE:
		val = ring->enabled;
		break;
	case RBLN_RING_FAULT_INFO:
		val = ring->fault_info;
		break;
	case RBLN_RING_FAULT_ADDR_LO:
		val = lower_32_bits(ring->fault_addr);
		break;
	case RBLN_RING_FAULT_ADDR_HI:
		val = upper_32_bits(ring->fault_addr);
		break;
	case RBLN_RING_FAULT_SEQNO_LO:
		val = lower_32_bits(ring->fault_seqno);
		break;
	case RBLN_RING_FAULT_SEQNO_HI:
		val = upper_32_bits(ring->fault_seqno);
		break;
	case RBLN_RING_RESET:
		val = ring->reset;
		break;
	case RBLN_RING_WAIT_SEEN:
		val = ring->wait_seen;
		break;
	case RBLN_RING_BUSY_NS_LO:
		val = lower_32_bits(ring->busy_ns);
		break;
	case RBLN_RING_BUSY_NS_HI:
		val = upper_32_bits(ring->busy_ns);
		break;
	default:
		val = 0;
		break;
	}
	spin_unlock(&ring->lock);
	return val;
}

void rbln_emu_ring_write(struct rbln_emu_ring *ring, u32 off, u32 val)
{
	bool kick = false, wake = false;

	spin_lock(&ring->lock);
	switch (off) {
	case RBLN_RING_BASE_LO:
		ring->base = (ring->base & GENMASK_ULL(63, 32)) | val;
		break;
	case RBLN_RING_BASE_HI:
		ring->base = (ring->base & GENMASK_ULL(31, 0)) | (u64)val << 32;
		break;
	case RBLN_RING_TAIL:
		ring->tail = val % RBLN_RING_ENTRIES;
		kick = true;
		break;
	case RBLN_RING_FENCE_LO:
		ring->fence = (ring->fence & GENMASK_ULL(63, 32)) | val;
		break;
	case RBLN_RING_FENCE_HI:
		ring->fence = (ring->fence & GENMASK_ULL(31, 0)) | (u64)val << 32;
		break;
	case RBLN_RING_ENABLE:
		ring->enabled = val & 1;
		kick = true;
		break;
	case RBLN_RING_FAULT_INFO:
		ring->fault_info = 0;
		wake = true;
		break;
	case RBLN_RING_RESET:
		/* The command processor does it, once what runs has stopped. */
		WRITE_ONCE(ring->reset, true);
		wake = true;
		kick = true;
		break;
	default:
		break;
	}
	spin_unlock(&ring->lock);

	if (wake)
		wake_up(&ring->wq);
	if (kick)
		queue_work(ring->edev->wq, &ring->work);
}

int rbln_emu_cp_init(struct rbln_emu_dev *edev)
{
	unsigned int r, b;

	edev->wq = alloc_workqueue("rbln_emu%u", WQ_UNBOUND, RBLN_EMU_NUM_RINGS, edev->index);
	if (!edev->wq)
		return -ENOMEM;

	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++) {
		struct rbln_emu_ring *ring = &edev->rings[r];

		ring->edev = edev;
		ring->index = r;
		spin_lock_init(&ring->lock);
		init_waitqueue_head(&ring->wq);
		INIT_WORK(&ring->work, rbln_emu_ring_work);
		for (b = 0; b < ARRAY_SIZE(ring->buf); b++) {
			ring->buf[b] = kvmalloc(RBLN_EMU_BUF_BYTES, GFP_KERNEL);
			if (!ring->buf[b])
				return -ENOMEM;
		}
		ring->cmd_buf = kvmalloc(RBLN_EMU_MAX_CMD_SIZE, GFP_KERNEL);
		if (!ring->cmd_buf)
			return -ENOMEM;
	}
	return 0;
}

/**
 * rbln_emu_ring_power_on() - start a function reset of @ring
 * @ring: the ring
 *
 * As a RESET write, and the command processor also clears the ring's
 * registers once what ran has stopped; RESET reads 1 until then.
 */
void rbln_emu_ring_power_on(struct rbln_emu_ring *ring)
{
	spin_lock(&ring->lock);
	ring->power_on = true;
	spin_unlock(&ring->lock);
	rbln_emu_ring_write(ring, RBLN_RING_RESET, 1);
}

/*
 * After @edev->stopping was set: wake every waiting ring and wait until no
 * command processor runs.
 */
void rbln_emu_cp_stop(struct rbln_emu_dev *edev)
{
	unsigned int r;

	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++) {
		wake_up(&edev->rings[r].wq);
		cancel_work_sync(&edev->rings[r].work);
	}
}

/* Frees what rbln_emu_cp_init() allocated, even partly. */
void rbln_emu_cp_fini(struct rbln_emu_dev *edev)
{
	unsigned int r, b;

	for (r = 0; r < RBLN_EMU_NUM_RINGS; r++) {
		for (b = 0; b < ARRAY_SIZE(edev->rings[r].buf); b++)
			kvfree(edev->rings[r].buf[b]);
		kvfree(edev->rings[r].cmd_buf);
	}
	if (edev->wq)
		destroy_workqueue(edev->wq);
}
