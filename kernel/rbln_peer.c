// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_peer.c - the peer table: how a device reaches other devices' memory
 *
 * An import of another rbln device's DEVICE object is mapped through a
 * slot of the importer's peer table, which holds the exporter's serial
 * (rbln_hw.h). Serials are never reused, so a mapping can never reach a
 * device that took a removed exporter's place. And when an exporter goes,
 * every importer clears the slots naming it and invalidates: the mappings
 * are revoked at once, their jobs fault, and nothing reaches the memory
 * the exporter leaves behind.
 */

#include <linux/dma-mapping.h>
#include <linux/list.h>
#include <linux/mutex.h>

#include <drm/drm_managed.h>

#include "rbln_drv.h"
#include "rbln_hw.h"

/* Every probed device, for revocation; the lock is taken before a peer_lock. */
static LIST_HEAD(rbln_peer_devices);
static DEFINE_MUTEX(rbln_peer_devices_lock);

static void rbln_peer_table_free(struct rbln_device *rdev)
{
	dma_free_coherent(rdev->hw->dma_dev, RBLN_MAX_PEERS * sizeof(u64), rdev->peer_table,
			  rdev->peer_table_dma);
	rdev->peer_table = NULL;
}

static void rbln_peer_fini(struct drm_device *drm, void *arg)
{
	struct rbln_device *rdev = to_rbln_device(drm);

	if (rdev->peer_table)
		rbln_peer_table_free(rdev);
}

/**
 * rbln_peer_unplug() - free the peer table of @rdev: it is stopped, unplugged
 * @rdev: the device, out of the list of devices (rbln_peer_unregister())
 *
 * Its imports' slots stay counted until they go; they reach nothing.
 */
void rbln_peer_unplug(struct rbln_device *rdev)
{
	mutex_lock(&rdev->peer_lock);
	rbln_peer_table_free(rdev);
	mutex_unlock(&rdev->peer_lock);
}

/* Tells the device where the peer table is: at init and after a function reset. */
void rbln_peer_program(struct rbln_device *rdev)
{
	rbln_hw_write(rdev->hw, RBLN_REG_PEER_TABLE_LO, lower_32_bits(rdev->peer_table_dma));
	rbln_hw_write(rdev->hw, RBLN_REG_PEER_TABLE_HI, upper_32_bits(rdev->peer_table_dma));
}

/**
 * rbln_peer_init() - an empty peer table for @rdev
 * @rdev: the device, identified
 *
 * Return: 0 or a negative errno.
 */
int rbln_peer_init(struct rbln_device *rdev)
{
	int ret;

	INIT_LIST_HEAD(&rdev->link);
	ret = drmm_mutex_init(&rdev->drm, &rdev->peer_lock);
	if (ret)
		return ret;
	rdev->peer_table = dma_alloc_coherent(rdev->hw->dma_dev, RBLN_MAX_PEERS * sizeof(u64),
					      &rdev->peer_table_dma, GFP_KERNEL);
	if (!rdev->peer_table)
		return -ENOMEM;
	rbln_peer_program(rdev);
	return drmm_add_action_or_reset(&rdev->drm, rbln_peer_fini, NULL);
}

/**
 * rbln_peer_register() - @rdev may export to others from now on
 * @rdev: the device, probed
 */
void rbln_peer_register(struct rbln_device *rdev)
{
	mutex_lock(&rbln_peer_devices_lock);
	list_add_tail(&rdev->link, &rbln_peer_devices);
	mutex_unlock(&rbln_peer_devices_lock);
}

/**
 * rbln_peer_unregister() - @rdev is gone: revoke every import of its memory
 * @rdev: the device, unplugged
 *
 * Returns once no other device can reach @rdev's memory.
 */
void rbln_peer_unregister(struct rbln_device *rdev)
{
	struct rbln_device *importer;
	unsigned int slot;
	bool revoked;

	mutex_lock(&rbln_peer_devices_lock);
	list_del_init(&rdev->link);
	list_for_each_entry(importer, &rbln_peer_devices, link) {
		revoked = false;
		mutex_lock(&importer->peer_lock);
		for (slot = 0; slot < RBLN_MAX_PEERS; slot++) {
			if (importer->peers[slot].serial != rdev->serial)
				continue;
			/* Its users keep the slot; it reaches nothing any more. */
			importer->peers[slot].serial = 0;
			WRITE_ONCE(importer->peer_table[slot], 0);
			revoked = true;
		}
		if (revoked)
			rbln_mmu_invalidate(importer);
		mutex_unlock(&importer->peer_lock);
	}
	mutex_unlock(&rbln_peer_devices_lock);
}

/**
 * rbln_peer_get() - a slot of @rdev's peer table that reaches @exporter
 * @rdev: the importing device
 * @exporter: the device whose memory is imported
 *
 * Imports from one exporter share a slot. An exporter already unplugged
 * gets a slot that reaches nothing, as revocation leaves the slots of
 * earlier imports: its serial may be a live device's by now, as a PCI
 * function removed and found again keeps its serial. All such imports
 * share one slot that reaches nothing, a revoked one if there is: a file
 * holding dma-bufs of removed devices cannot take every slot.
 *
 * Return: the slot, held until rbln_peer_put(), -ENOSPC when
 * RBLN_MAX_PEERS other devices are reached already, or -ENODEV when @rdev
 * is unplugged.
 */
int rbln_peer_get(struct rbln_device *rdev, struct rbln_device *exporter)
{
	int slot, free = -ENOSPC;
	bool gone;

	/* Against rbln_peer_unregister(): a slot made after it would escape it. */
	mutex_lock(&rbln_peer_devices_lock);
	gone = list_empty(&exporter->link);
	mutex_lock(&rdev->peer_lock);
	if (!rdev->peer_table) {
		mutex_unlock(&rdev->peer_lock);
		mutex_unlock(&rbln_peer_devices_lock);
		return -ENODEV;
	}
	for (slot = 0; slot < RBLN_MAX_PEERS; slot++) {
		if (gone ? rdev->peers[slot].users && !rdev->peers[slot].serial :
			   rdev->peers[slot].serial == exporter->serial)
			break;
		if (!rdev->peers[slot].users && free < 0)
			free = slot;
	}
	if (slot == RBLN_MAX_PEERS) {
		slot = free;
		if (slot >= 0 && !gone) {
			rdev->peers[slot].serial = exporter->serial;
			WRITE_ONCE(rdev->peer_table[slot], exporter->serial);
		}
	}
	if (slot >= 0)
		rdev->peers[slot].users++;
	mutex_unlock(&rdev->peer_lock);
	mutex_unlock(&rbln_peer_devices_lock);
	return slot;
}

/**
 * rbln_peer_put() - an import through @slot is gone
 * @rdev: the importing device
 * @slot: what rbln_peer_get() returned
 *
 * Its mappings are gone and invalidated already: the last user clears
 * the slot without invalidating again.
 */
void rbln_peer_put(struct rbln_device *rdev, int slot)
{
	mutex_lock(&rdev->peer_lock);
	if (!--rdev->peers[slot].users) {
		rdev->peers[slot].serial = 0;
		if (rdev->peer_table)
			WRITE_ONCE(rdev->peer_table[slot], 0);
	}
	mutex_unlock(&rdev->peer_lock);
}
