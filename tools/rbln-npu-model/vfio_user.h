/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vfio_user.h - a vfio-user server for one emulated PCI function
 *
 * The device model process presents the NPU to QEMU's vfio-user-pci
 * client over a UNIX socket (QEMU's docs/interop/vfio-user.rst, protocol
 * version 0.0). This library speaks the protocol and emulates the PCI
 * configuration space; the model supplies BAR0 and reset through callbacks
 * and reaches guest memory through the DMA table the client fills.
 *
 * What the client sees:
 *   - DEVICE_GET_INFO: a PCI device that supports DEVICE_RESET, 9 regions
 *     (the vfio-pci indices: BAR0-5, ROM, config, VGA) and 5 IRQ indices
 *     (INTx, MSI, MSI-X, ERR, REQ).
 *   - Region 0 (BAR0): cfg.bar0_size bytes, read/write through messages,
 *     no mmap. Region 7 (config): 4 KiB, read/write. Every other region
 *     has size 0.
 *   - Config space: type 0 header with the IDs and class of the config,
 *     BAR0 a 32-bit non-prefetchable memory BAR (size probing works), no
 *     ROM, interrupt pin 0 (no INTx), a PCI Express v2 capability (endpoint,
 *     FLR capable) and an MSI-X capability (table and PBA in BAR0, BIR 0).
 *     A config write setting Initiate FLR in Device Control is a function
 *     reset: ops->reset runs and the config registers return to their
 *     power-on values. Clearing Bus Master Enable calls ops->quiesce
 *     before the write completes: the function's DMA has stopped once the
 *     client sees it done. No extended capabilities.
 *   - IRQs: MSI-X has cfg.msix_vectors vectors (eventfd, maskable through
 *     SET_IRQS MASK/UNMASK), ERR and REQ one each (eventfd; accepted,
 *     never raised by the device), INTx and MSI none.
 *   - BAR0: 4-byte accesses at 4-byte aligned offsets go to ops->read32 and
 *     ops->write32; other sizes read all-ones and drop writes. Accesses
 *     wholly inside the MSI-X table (read zeros, writes dropped) or the PBA
 *     (reads the pending bits of vectors masked through SET_IRQS, writes
 *     dropped) are answered by the library: QEMU emulates the table itself.
 *
 * Threads: rbln_vfu_serve() runs in one thread and makes every callback
 * from it. rbln_vfu_dma_ptr(), rbln_vfu_dma_span(), rbln_vfu_irq(),
 * rbln_vfu_bus_master() and rbln_vfu_stop() may be called from any thread
 * at any time between rbln_vfu_listen() and rbln_vfu_destroy().
 *
 * DMA contract. A host pointer from rbln_vfu_dma_ptr()/_span() stays valid
 * only for the duration of an "access": a stretch of device work the model
 * brackets itself (e.g. a counter or lock its device threads hold while they
 * touch guest memory). When the client removes a mapping (DMA_UNMAP or
 * disconnect) the library first takes the range out of the table, so that
 * no new lookup can return it, then calls ops->quiesce, which must return
 * only once every access that started before the call has ended, and only
 * then lets the memory go and replies. (A file the client passes is mapped
 * whole, once, however many regions it backs: a vIOMMU guest maps page by
 * page. It is unmapped when its last region goes.) A pointer must therefore never be
 * kept past the access it was looked up in; look it up again next time.
 * An access may span several lookups. ops->quiesce is called from the
 * serve thread, never with a library lock held, so it may wait on device
 * threads that are themselves calling rbln_vfu_dma_ptr() or rbln_vfu_irq().
 *
 * Logging: ops->log (or stderr) gets refused commands and session ends;
 * RBLN_VFU_TRACE=1 in the environment at rbln_vfu_listen() adds a line for
 * every message.
 *
 * Mappings are the client's: the library refuses a DMA_MAP whose fd is not
 * a regular file (memfd, shm, hugetlbfs or plain file) at least offset+size
 * long, but it cannot stop a hostile client from truncating the file
 * afterwards (memory-backend-memfd seals it by default).
 */
#ifndef RBLN_VFIO_USER_H
#define RBLN_VFIO_USER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rbln_vfu;

struct rbln_vfu_ops {
	/* BAR0, 4-byte aligned 4-byte accesses; off < cfg.bar0_size. */
	uint32_t (*read32)(void *opaque, uint32_t off);
	void (*write32)(void *opaque, uint32_t off, uint32_t val);
	/* DEVICE_RESET or a PCIe FLR: back to the power-on state. Optional. */
	void (*reset)(void *opaque);
	/*
	 * A DMA range has left the table: return once no access that may
	 * have used it is in flight (see "DMA contract" above). Optional
	 * only for a model that never calls rbln_vfu_dma_ptr().
	 */
	void (*quiesce)(void *opaque);
	/* One line (no newline) about something unusual. NULL: stderr. */
	void (*log)(void *opaque, const char *msg);
};

struct rbln_vfu_config {
	uint16_t vendor, device;
	uint16_t subsys_vendor, subsys_device;	/* 0: same as vendor, device */
	uint32_t class_code;		/* 24 bits: class, subclass, prog-if */
	uint8_t revision;
	uint32_t bar0_size;		/* power of two, 4 KiB .. 1 GiB */
	unsigned int msix_vectors;	/* 1 .. 2048 */
	uint32_t msix_table_off;	/* in BAR0, 8-byte aligned */
	uint32_t msix_pba_off;		/* in BAR0, 8-byte aligned */
};

/* rbln_vfu_dma_ptr()/_span() access: what the device will do there. */
#define RBLN_VFU_DMA_READ	0x1	/* device reads guest memory */
#define RBLN_VFU_DMA_WRITE	0x2	/* device writes guest memory */

/* Limits this server announces in its VERSION reply. */
#define RBLN_VFU_MAX_DATA_XFER	(1u << 20)	/* bytes in one region access */
#define RBLN_VFU_MAX_MSG_FDS	16
#define RBLN_VFU_MAX_DMA_MAPS	65535

/*
 * Creates the UNIX socket at socket_path (a stale socket there is replaced;
 * any other file is an error) and listens on it: it exists when this
 * returns. The config and ops are copied. NULL with errno set on failure
 * (EINVAL: a bad config; ENAMETOOLONG: the path).
 */
struct rbln_vfu *rbln_vfu_listen(const char *socket_path,
				 const struct rbln_vfu_config *cfg,
				 const struct rbln_vfu_ops *ops, void *opaque);

/*
 * Accepts one client and serves it until it disconnects. On the way out
 * every DMA mapping is removed (quiesce, munmap) and every eventfd closed;
 * the emulated config space and the device's own state are kept, so a
 * later rbln_vfu_serve() can take a reconnecting client.
 * Returns 0: the client disconnected; 1: rbln_vfu_stop() was called;
 * -errno: a fatal error (the listening socket failed, or the client broke
 * the protocol beyond recovery: a header shorter than itself, an
 * unsupported major version).
 */
int rbln_vfu_serve(struct rbln_vfu *vfu);

/*
 * Makes a running or the next rbln_vfu_serve() return 1 soon. Async-signal
 * safe: a SIGTERM handler may call it.
 *
 * A client still connected then sees the device go as a clean end of the
 * stream, never as a reset connection (which QEMU does not survive): the
 * server finishes the command it is in, if any, and answers it, then shuts
 * down its sending side (the client reads EOF; nothing is answered after
 * it), reads and drops what the client still sends until the client closes
 * or 0.5 s have passed, then stops receiving (the client's sends fail with
 * EPIPE from then on) and closes. The session then ends as on a
 * disconnect: every DMA mapping is removed (quiesce, munmap) before
 * rbln_vfu_serve() returns.
 */
void rbln_vfu_stop(struct rbln_vfu *vfu);

/* Closes and unlinks the socket and frees vfu. Not while serve() runs. */
void rbln_vfu_destroy(struct rbln_vfu *vfu);

/*
 * The host address of [iova, iova + len) if one DMA mapping covers all of
 * it with the access prot (RBLN_VFU_DMA_*) allowed and its memory was
 * passed as an fd; else NULL. len 0 counts as 1. Valid only within the
 * current access (see "DMA contract").
 */
void *rbln_vfu_dma_ptr(struct rbln_vfu *vfu, uint64_t iova, size_t len, int prot);

/*
 * Like rbln_vfu_dma_ptr() for a buffer that may cross mappings (with a
 * vIOMMU, every page may be a mapping of its own): the host address of
 * iova, and *len lowered to the bytes that are contiguous in that mapping
 * from iova (*len 0: all of them). NULL, *len unchanged, when iova itself
 * is not reachable with prot.
 */
void *rbln_vfu_dma_span(struct rbln_vfu *vfu, uint64_t iova, size_t *len, int prot);

/*
 * Raises MSI-X vector `vector`: signals its eventfd if the client set one
 * and has not masked it through SET_IRQS (then the vector's PBA bit is set
 * and the interrupt is delivered on unmask). Out-of-range vectors and
 * vectors without an eventfd are ignored: the interrupt is lost, as it is
 * on hardware whose MSI-X is disabled.
 */
void rbln_vfu_irq(struct rbln_vfu *vfu, unsigned int vector);

/* Bus Master Enable in the emulated Command register (0 or 1). */
int rbln_vfu_bus_master(struct rbln_vfu *vfu);

#ifdef __cplusplus
}
#endif

#endif	/* RBLN_VFIO_USER_H */
