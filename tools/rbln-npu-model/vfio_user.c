// SPDX-License-Identifier: GPL-2.0-only
/*
 * vfio_user.c - a vfio-user server for one emulated PCI function
 *
 * Written from the protocol specification (QEMU's
 * docs/interop/vfio-user.rst, version 0.0) and from what QEMU's
 * vfio-user-pci client sends; see vfio_user.h for what the client sees.
 *
 * Everything the client sends is checked before it is used: a message
 * is read whole into a fixed buffer (or drained and refused when larger),
 * every payload length, index, offset and count is bounded, unexpected
 * file descriptors are closed, and a command that fails gets an error
 * reply, not a dead server. Only a header shorter than itself ends the
 * session, since the stream cannot be followed after it.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vfio_user.h"

/* Commands (vfio-user.rst "Commands"). */
enum {
	CMD_VERSION = 1,
	CMD_DMA_MAP = 2,
	CMD_DMA_UNMAP = 3,
	CMD_DEVICE_GET_INFO = 4,
	CMD_DEVICE_GET_REGION_INFO = 5,
	CMD_DEVICE_GET_REGION_IO_FDS = 6,
	CMD_DEVICE_GET_IRQ_INFO = 7,
	CMD_DEVICE_SET_IRQS = 8,
	CMD_REGION_READ = 9,
	CMD_REGION_WRITE = 10,
	CMD_DMA_READ = 11,
	CMD_DMA_WRITE = 12,
	CMD_DEVICE_RESET = 13,
	CMD_REGION_WRITE_MULTI = 15,
};

/* Header flags. */
#define HDR_TYPE_MASK		0xfu
#define HDR_TYPE_COMMAND	0x0u
#define HDR_TYPE_REPLY		0x1u
#define HDR_NO_REPLY		0x10u
#define HDR_ERROR		0x20u

struct hdr {
	uint16_t id;
	uint16_t cmd;
	uint32_t size;
	uint32_t flags;
	uint32_t error;
};
#define HDR_SIZE	16u

/* <linux/vfio.h> values the protocol reuses. */
#define DEVICE_FLAGS_RESET	(1u << 0)
#define DEVICE_FLAGS_PCI	(1u << 1)
#define REGION_FLAG_READ	(1u << 0)
#define REGION_FLAG_WRITE	(1u << 1)
#define IRQ_INFO_EVENTFD	(1u << 0)
#define IRQ_INFO_MASKABLE	(1u << 1)
#define IRQ_SET_DATA_NONE	(1u << 0)
#define IRQ_SET_DATA_BOOL	(1u << 1)
#define IRQ_SET_DATA_EVENTFD	(1u << 2)
#define IRQ_SET_DATA_MASK	0x7u
#define IRQ_SET_ACTION_MASK	(1u << 3)
#define IRQ_SET_ACTION_UNMASK	(1u << 4)
#define IRQ_SET_ACTION_TRIGGER	(1u << 5)
#define IRQ_SET_ACTION_BITS	0x38u
#define DMA_MAP_FLAG_READ	(1u << 0)
#define DMA_MAP_FLAG_WRITE	(1u << 1)
#define DMA_UNMAP_FLAG_ALL	(1u << 1)

/* vfio-pci region and IRQ indices. */
#define REGION_BAR0		0
#define REGION_CONFIG		7
#define NUM_REGIONS		9
#define IRQ_INTX		0
#define IRQ_MSI			1
#define IRQ_MSIX		2
#define IRQ_ERR			3
#define IRQ_REQ			4
#define NUM_IRQS		5

/* Fixed payload sizes. */
#define DMA_MAP_SIZE		32u
#define DMA_UNMAP_SIZE		24u
#define DEVICE_INFO_SIZE	16u
#define REGION_INFO_SIZE	32u
#define IRQ_INFO_SIZE		16u
#define IRQ_SET_SIZE		20u
#define REGION_RW_SIZE		16u
#define WRITE_ONE_SIZE		24u

/*
 * How long a stopped server goes on reading what its client still sends
 * after it has shut down its own side (see graceful_disconnect()).
 */
#define STOP_DRAIN_MS		500

/* The largest message read whole; larger ones are drained and refused. */
#define MAX_PAYLOAD		(RBLN_VFU_MAX_DATA_XFER + 4096u)

/* Config space layout. */
#define CFG_SIZE		4096u
#define CAP_PCIE		0x40u
#define CAP_PCIE_SIZE		0x3cu
#define CAP_MSIX		0x80u
#define PCIE_DEVCTL		(CAP_PCIE + 0x08)
#define DEVCTL_BCR_FLR		0x8000u
#define MSIX_CTRL		(CAP_MSIX + 0x02)

/*
 * One mmap() of a whole file the client passed, shared by every region in
 * it: a vIOMMU guest maps guest RAM page by page, and a mapping per page
 * would run into vm.max_map_count. Touched by the serve thread only.
 */
struct dma_file {
	struct dma_file *next;
	dev_t dev;
	ino_t ino;
	uint8_t *base;
	size_t len;
	bool writable;
	unsigned long refs;
};

struct dma_region {
	uint64_t iova;
	uint64_t last;		/* iova + size - 1 */
	uint8_t *host;		/* NULL: no fd was passed */
	struct dma_file *file;
	uint32_t prot;		/* RBLN_VFU_DMA_* */
};

struct irq_vec {
	int fd;
	bool masked;
	bool pending;
};

/* What a client's VERSION proposed ("capabilities" members). */
struct caps {
	bool has_max_fds, has_max_xfer, has_pgsizes, has_max_maps, has_multi;
	uint64_t max_fds, max_xfer, pgsizes, max_maps;
	bool multi;
};

struct rbln_vfu {
	char *path;
	int listen_fd;
	int stop_fd;
	atomic_bool stopped;
	int conn;
	bool trace;

	struct rbln_vfu_config cfg;
	struct rbln_vfu_ops ops;
	void *opaque;

	/* Config space: current bytes, power-on bytes, writable bits. */
	uint8_t config[CFG_SIZE];
	uint8_t config_init[CFG_SIZE];
	uint8_t wmask[CFG_SIZE];
	atomic_int bus_master;

	/* The session. */
	bool negotiated;
	uint32_t max_dma_maps;
	uint8_t *rx, *tx;
	int fds[RBLN_VFU_MAX_MSG_FDS];
	unsigned int nfds;
	bool fds_truncated;

	/* DMA table, sorted by iova, no overlaps. */
	pthread_rwlock_t dma_lock;
	struct dma_region *dma;
	size_t ndma, dma_cap;
	struct dma_file *files;

	/* Interrupts: MSI-X vectors, then ERR and REQ. */
	pthread_mutex_t irq_lock;
	struct irq_vec *msix;
	int err_fd, req_fd;
};

/* ------------------------------------------------------------------ */
/* Little helpers. */

static void vlog(struct rbln_vfu *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void vlog(struct rbln_vfu *v, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (v->ops.log)
		v->ops.log(v->opaque, buf);
	else
		fprintf(stderr, "rbln-vfu: %s\n", buf);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t x;

	memcpy(&x, p, sizeof(x));
	return x;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t x;

	memcpy(&x, p, sizeof(x));
	return x;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t x;

	memcpy(&x, p, sizeof(x));
	return x;
}

static void put16(uint8_t *p, uint16_t x)
{
	memcpy(p, &x, sizeof(x));
}

static void put32(uint8_t *p, uint32_t x)
{
	memcpy(p, &x, sizeof(x));
}

static void put64(uint8_t *p, uint64_t x)
{
	memcpy(p, &x, sizeof(x));
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void signal_eventfd(int fd)
{
	uint64_t one = 1;

	/* Nonblocking: a saturated counter drops the (redundant) signal. */
	if (write(fd, &one, sizeof(one)) < 0) {
		/* nothing to do */
	}
}

/* ------------------------------------------------------------------ */
/* Config space. */

static uint32_t msix_pba_len(const struct rbln_vfu_config *c)
{
	return (c->msix_vectors + 63) / 64 * 8;
}

static void wmask16(uint8_t *w, unsigned int off, uint16_t m)
{
	put16(w + off, m);
}

static void config_build(struct rbln_vfu *v)
{
	const struct rbln_vfu_config *k = &v->cfg;
	uint8_t *c = v->config_init, *w = v->wmask;
	uint32_t bar_mask = ~(k->bar0_size - 1) & 0xfffffff0u;

	memset(c, 0, CFG_SIZE);
	memset(w, 0, CFG_SIZE);

	/* Type 0 header. */
	put16(c + 0x00, k->vendor);
	put16(c + 0x02, k->device);
	put16(c + 0x06, 0x0010);			/* Status: capability list */
	c[0x08] = k->revision;
	c[0x09] = k->class_code & 0xff;
	c[0x0a] = (k->class_code >> 8) & 0xff;
	c[0x0b] = (k->class_code >> 16) & 0xff;
	put32(c + 0x10, 0);		/* BAR0: memory, 32-bit, non-prefetchable */
	put16(c + 0x2c, k->subsys_vendor ? k->subsys_vendor : k->vendor);
	put16(c + 0x2e, k->subsys_device ? k->subsys_device : k->device);
	c[0x34] = CAP_PCIE;
	c[0x3d] = 0;				/* Interrupt Pin: no INTx */

	/* Command: memory space, bus master, parity, SERR#, INTx disable. */
	wmask16(w, 0x04, 0x0546);
	w[0x0c] = 0xff;				/* Cache Line Size */
	put32(w + 0x10, bar_mask);
	w[0x3c] = 0xff;				/* Interrupt Line */

	/* PCI Express capability, version 2, endpoint. */
	c[CAP_PCIE] = 0x10;
	c[CAP_PCIE + 1] = CAP_MSIX;
	put16(c + CAP_PCIE + 0x02, 0x0002);	/* version 2, type endpoint */
	/* DEVCAP: 128-byte MPS, role-based error reporting, FLR. */
	put32(c + CAP_PCIE + 0x04, (1u << 15) | (1u << 28));
	/* DEVCTL: relaxed ordering, no snoop, 512-byte MRRS. */
	put16(c + PCIE_DEVCTL, 0x2810);
	put32(c + CAP_PCIE + 0x0c, 0x00000011);	/* LNKCAP: 2.5 GT/s, x1 */
	put16(c + CAP_PCIE + 0x12, 0x0011);	/* LNKSTA: 2.5 GT/s, x1 */
	put32(c + CAP_PCIE + 0x2c, 0x00000002);	/* LNKCAP2: 2.5 GT/s */
	put16(c + CAP_PCIE + 0x30, 0x0001);	/* LNKCTL2: target 2.5 GT/s */
	/* DEVCTL: error enables, RO, MPS, no snoop, MRRS, Initiate FLR. */
	wmask16(w, PCIE_DEVCTL, 0xf8ff);
	wmask16(w, CAP_PCIE + 0x10, 0x01cb);	/* LNKCTL */

	/* MSI-X capability: table and PBA in BAR0. */
	c[CAP_MSIX] = 0x11;
	c[CAP_MSIX + 1] = 0;
	put16(c + MSIX_CTRL, (uint16_t)(k->msix_vectors - 1));
	put32(c + CAP_MSIX + 0x04, k->msix_table_off);	/* BIR 0 */
	put32(c + CAP_MSIX + 0x08, k->msix_pba_off);	/* BIR 0 */
	wmask16(w, MSIX_CTRL, 0xc000);		/* enable, function mask */
}

static void irq_reset_masks(struct rbln_vfu *v)
{
	pthread_mutex_lock(&v->irq_lock);
	for (unsigned int i = 0; i < v->cfg.msix_vectors; i++)
		v->msix[i].masked = v->msix[i].pending = false;
	pthread_mutex_unlock(&v->irq_lock);
}

/* A function reset (DEVICE_RESET or FLR): device first, then the config. */
static void function_reset(struct rbln_vfu *v, const char *why)
{
	if (v->trace)
		vlog(v, "function reset (%s)", why);
	if (v->ops.reset)
		v->ops.reset(v->opaque);
	memcpy(v->config, v->config_init, CFG_SIZE);
	atomic_store(&v->bus_master, 0);
	irq_reset_masks(v);
}

static void config_write(struct rbln_vfu *v, uint32_t off, const uint8_t *data,
			 uint32_t count)
{
	uint32_t end = off + count;	/* <= CFG_SIZE, checked by the caller */

	for (uint32_t i = 0; i < count; i++) {
		uint8_t m = v->wmask[off + i];

		v->config[off + i] = (v->config[off + i] & ~m) | (data[i] & m);
	}
	if (off <= 0x04 && end > 0x04) {
		int was = atomic_exchange(&v->bus_master, !!(v->config[0x04] & 0x04));

		/*
		 * Clearing Bus Master Enable stops the function's DMA: the
		 * config write completes only once none is in flight, which
		 * is what a driver that clears it before freeing memory needs.
		 */
		if (was && !atomic_load(&v->bus_master) && v->ops.quiesce)
			v->ops.quiesce(v->opaque);
	}
	if (off <= PCIE_DEVCTL + 1 && end > PCIE_DEVCTL + 1 &&
	    (get16(v->config + PCIE_DEVCTL) & DEVCTL_BCR_FLR)) {
		/* Initiate FLR reads as 0; the reset restores it anyway. */
		put16(v->config + PCIE_DEVCTL,
		      get16(v->config + PCIE_DEVCTL) & ~DEVCTL_BCR_FLR);
		function_reset(v, "FLR");
	}
}

/* ------------------------------------------------------------------ */
/* BAR0. */

static void bar0_read(struct rbln_vfu *v, uint32_t off, uint8_t *data, uint32_t count)
{
	const struct rbln_vfu_config *k = &v->cfg;
	uint64_t end = (uint64_t)off + count;
	uint64_t tab_end = (uint64_t)k->msix_table_off + 16ull * k->msix_vectors;
	uint64_t pba_end = (uint64_t)k->msix_pba_off + msix_pba_len(k);

	if (off >= k->msix_table_off && end <= tab_end) {
		memset(data, 0, count);
	} else if (off >= k->msix_pba_off && end <= pba_end) {
		uint8_t pba[256] = { 0 };	/* 2048 vectors */

		pthread_mutex_lock(&v->irq_lock);
		for (unsigned int i = 0; i < k->msix_vectors; i++)
			if (v->msix[i].pending)
				pba[i / 8] |= 1u << (i % 8);
		pthread_mutex_unlock(&v->irq_lock);
		memcpy(data, pba + (off - k->msix_pba_off), count);
	} else if (count == 4 && !(off & 3)) {
		put32(data, v->ops.read32 ? v->ops.read32(v->opaque, off) : ~0u);
	} else {
		memset(data, 0xff, count);
	}
}

static void bar0_write(struct rbln_vfu *v, uint32_t off, const uint8_t *data, uint32_t count)
{
	const struct rbln_vfu_config *k = &v->cfg;
	uint64_t end = (uint64_t)off + count;
	uint64_t tab_end = (uint64_t)k->msix_table_off + 16ull * k->msix_vectors;
	uint64_t pba_end = (uint64_t)k->msix_pba_off + msix_pba_len(k);

	if (off >= k->msix_table_off && end <= tab_end)
		return;
	if (off >= k->msix_pba_off && end <= pba_end)
		return;
	if (count == 4 && !(off & 3) && v->ops.write32)
		v->ops.write32(v->opaque, off, get32(data));
}

static uint64_t region_size(struct rbln_vfu *v, uint32_t index)
{
	if (index == REGION_BAR0)
		return v->cfg.bar0_size;
	if (index == REGION_CONFIG)
		return CFG_SIZE;
	return 0;
}

/* 0 or an errno for the reply. */
static int region_check(struct rbln_vfu *v, uint32_t index, uint64_t off, uint32_t count)
{
	uint64_t size;

	if (index >= NUM_REGIONS)
		return EINVAL;
	if (count > RBLN_VFU_MAX_DATA_XFER)
		return E2BIG;
	size = region_size(v, index);
	if (off > size || count > size - off)
		return EINVAL;
	return 0;
}

static void region_read(struct rbln_vfu *v, uint32_t index, uint32_t off,
			uint8_t *data, uint32_t count)
{
	if (!count)
		return;
	if (index == REGION_CONFIG)
		memcpy(data, v->config + off, count);
	else
		bar0_read(v, off, data, count);
}

static void region_write(struct rbln_vfu *v, uint32_t index, uint32_t off,
			 const uint8_t *data, uint32_t count)
{
	if (!count)
		return;
	if (index == REGION_CONFIG)
		config_write(v, off, data, count);
	else
		bar0_write(v, off, data, count);
}

/* ------------------------------------------------------------------ */
/* A minimal JSON reader for VERSION's capabilities. */

struct json {
	const char *p, *end;
};

#define JSON_MAX_DEPTH	16

static void js_ws(struct json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
				 *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool js_lit(struct json *j, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return false;
	j->p += n;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A string at j->p. Its ASCII content goes to out (NUL-terminated; a
 * longer or non-ASCII string leaves out as "\x01" so it matches no key).
 */
static bool js_string(struct json *j, char *out, size_t outsz)
{
	size_t n = 0;
	bool spoiled = false;

	if (j->p >= j->end || *j->p != '"')
		return false;
	j->p++;
	while (j->p < j->end) {
		unsigned char c = (unsigned char)*j->p++;
		unsigned int u = c;

		if (c == '"') {
			if (spoiled || n >= outsz) {
				out[0] = '\x01';
				n = 1;
			}
			out[n < outsz ? n : outsz - 1] = '\0';
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			if (j->p >= j->end)
				return false;
			c = (unsigned char)*j->p++;
			switch (c) {
			case '"': case '\\': case '/':
				u = c;
				break;
			case 'b': u = '\b'; break;
			case 'f': u = '\f'; break;
			case 'n': u = '\n'; break;
			case 'r': u = '\r'; break;
			case 't': u = '\t'; break;
			case 'u':
				if (j->end - j->p < 4)
					return false;
				u = 0;
				for (int i = 0; i < 4; i++) {
					int h = hexval(j->p[i]);

					if (h < 0)
						return false;
					u = u << 4 | (unsigned int)h;
				}
				j->p += 4;
				break;
			default:
				return false;
			}
		}
		if (u >= 0x80 || n + 1 >= outsz)
			spoiled = true;
		else
			out[n++] = (char)u;
	}
	return false;
}

/* A number; *is_uint when it is a non-negative integer that fits. */
static bool js_number(struct json *j, uint64_t *val, bool *is_uint)
{
	uint64_t x = 0;
	bool ok = true, digits = false;

	if (j->p < j->end && *j->p == '-') {
		ok = false;
		j->p++;
	}
	if (j->p < j->end && *j->p == '0') {
		j->p++;
		digits = true;
	} else {
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
			unsigned int d = (unsigned int)(*j->p++ - '0');

			if (x > (UINT64_MAX - d) / 10)
				ok = false;
			else
				x = x * 10 + d;
			digits = true;
		}
	}
	if (!digits)
		return false;
	if (j->p < j->end && *j->p == '.') {
		ok = false;
		j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return false;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		ok = false;
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return false;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	*val = x;
	*is_uint = ok;
	return true;
}

static bool js_skip(struct json *j, int depth);

/* An object or array whose opening bracket is at j->p. */
static bool js_skip_container(struct json *j, int depth)
{
	char close = *j->p == '{' ? '}' : ']';
	bool object = close == '}';
	char key[2];

	if (depth >= JSON_MAX_DEPTH)
		return false;
	j->p++;
	js_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		if (object) {
			if (!js_string(j, key, sizeof(key)))
				return false;
			js_ws(j);
			if (j->p >= j->end || *j->p != ':')
				return false;
			j->p++;
		}
		if (!js_skip(j, depth + 1))
			return false;
		js_ws(j);
		if (j->p >= j->end)
			return false;
		if (*j->p == close) {
			j->p++;
			return true;
		}
		if (*j->p != ',')
			return false;
		j->p++;
		js_ws(j);
	}
}

static bool js_skip(struct json *j, int depth)
{
	char buf[2];
	uint64_t x;
	bool u;

	js_ws(j);
	if (j->p >= j->end)
		return false;
	switch (*j->p) {
	case '{':
	case '[':
		return js_skip_container(j, depth);
	case '"':
		return js_string(j, buf, sizeof(buf));
	case 't':
		return js_lit(j, "true");
	case 'f':
		return js_lit(j, "false");
	case 'n':
		return js_lit(j, "null");
	default:
		return js_number(j, &x, &u);
	}
}

/* The members of the "capabilities" object; false: malformed. */
static bool js_caps(struct json *j, struct caps *caps)
{
	static const struct {
		const char *name;
		size_t has, val;
	} nums[] = {
		{ "max_msg_fds", offsetof(struct caps, has_max_fds), offsetof(struct caps, max_fds) },
		{ "max_data_xfer_size", offsetof(struct caps, has_max_xfer), offsetof(struct caps, max_xfer) },
		{ "pgsizes", offsetof(struct caps, has_pgsizes), offsetof(struct caps, pgsizes) },
		{ "max_dma_maps", offsetof(struct caps, has_max_maps), offsetof(struct caps, max_maps) },
	};
	char key[32];

	if (j->p >= j->end || *j->p != '{')
		return false;
	j->p++;
	js_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return true;
	}
	for (;;) {
		bool known = false;

		if (!js_string(j, key, sizeof(key)))
			return false;
		js_ws(j);
		if (j->p >= j->end || *j->p != ':')
			return false;
		j->p++;
		js_ws(j);
		for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
			uint64_t x;
			bool u;

			if (strcmp(key, nums[i].name))
				continue;
			if (!js_number(j, &x, &u) || !u)
				return false;
			*(bool *)((char *)caps + nums[i].has) = true;
			*(uint64_t *)((char *)caps + nums[i].val) = x;
			known = true;
		}
		if (!strcmp(key, "write_multiple")) {
			if (js_lit(j, "true"))
				caps->multi = true;
			else if (js_lit(j, "false"))
				caps->multi = false;
			else
				return false;
			caps->has_multi = true;
			known = true;
		}
		if (!known && !js_skip(j, 1))
			return false;
		js_ws(j);
		if (j->p >= j->end)
			return false;
		if (*j->p == '}') {
			j->p++;
			return true;
		}
		if (*j->p != ',')
			return false;
		j->p++;
		js_ws(j);
	}
}

/* The whole version data: {"capabilities": {...}, ...}. */
static bool parse_version_json(const char *s, size_t len, struct caps *caps)
{
	struct json j = { s, s + len };
	bool seen = false;
	char key[32];

	js_ws(&j);
	if (j.p >= j.end || *j.p != '{')
		return false;
	j.p++;
	js_ws(&j);
	if (j.p < j.end && *j.p == '}') {
		j.p++;
		goto tail;
	}
	for (;;) {
		if (!js_string(&j, key, sizeof(key)))
			return false;
		js_ws(&j);
		if (j.p >= j.end || *j.p != ':')
			return false;
		j.p++;
		js_ws(&j);
		if (!strcmp(key, "capabilities")) {
			if (seen || !js_caps(&j, caps))
				return false;
			seen = true;
		} else if (!js_skip(&j, 1)) {
			return false;
		}
		js_ws(&j);
		if (j.p >= j.end)
			return false;
		if (*j.p == '}') {
			j.p++;
			break;
		}
		if (*j.p != ',')
			return false;
		j.p++;
		js_ws(&j);
	}
tail:
	js_ws(&j);
	return j.p == j.end;
}

/* ------------------------------------------------------------------ */
/* Socket I/O. */

enum io_result { IO_OK, IO_EOF, IO_STOP, IO_ERR };

/* Waits for events on the connection, or for a stop. */
static enum io_result wait_conn(struct rbln_vfu *v, short events)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = v->conn, .events = events },
			{ .fd = v->stop_fd, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return IO_ERR;
		}
		if (p[1].revents)
			return IO_STOP;
		if (p[0].revents)
			return IO_OK;
	}
}

static void take_fds(struct rbln_vfu *v, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (v->nfds < RBLN_VFU_MAX_MSG_FDS) {
				v->fds[v->nfds++] = fd;
			} else {
				close(fd);
				v->fds_truncated = true;
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		v->fds_truncated = true;
}

/* Reads exactly len bytes (buf NULL: discards them), collecting fds. */
static enum io_result recv_all(struct rbln_vfu *v, void *buf, size_t len)
{
	union {
		char buf[CMSG_SPACE(RBLN_VFU_MAX_MSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} cmsg;
	char scratch[4096];
	size_t done = 0;

	while (done < len) {
		size_t want = len - done;
		struct iovec iov;
		struct msghdr mh = { 0 };
		ssize_t r;

		if (buf) {
			iov.iov_base = (char *)buf + done;
		} else {
			iov.iov_base = scratch;
			if (want > sizeof(scratch))
				want = sizeof(scratch);
		}
		iov.iov_len = want;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = sizeof(cmsg.buf);
		r = recvmsg(v->conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (r < 0) {
			enum io_result w;

			if (errno == EINTR)
				continue;
			if (errno == ECONNRESET)
				return IO_EOF;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return IO_ERR;
			w = wait_conn(v, POLLIN);
			if (w != IO_OK)
				return w;
			continue;
		}
		take_fds(v, &mh);
		if (r == 0)
			return IO_EOF;
		done += (size_t)r;
	}
	return IO_OK;
}

static enum io_result send_all(struct rbln_vfu *v, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = send(v->conn, (const char *)buf + done, len - done,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0) {
			enum io_result w;

			if (errno == EINTR)
				continue;
			if (errno == EPIPE || errno == ECONNRESET)
				return IO_EOF;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return IO_ERR;
			w = wait_conn(v, POLLOUT);
			if (w != IO_OK)
				return w;
			continue;
		}
		done += (size_t)r;
	}
	return IO_OK;
}

static void close_msg_fds(struct rbln_vfu *v)
{
	for (unsigned int i = 0; i < v->nfds; i++)
		close_fd(&v->fds[i]);
	v->nfds = 0;
	v->fds_truncated = false;
}

/* ------------------------------------------------------------------ */
/* DMA table. */

/* The first region whose iova is above iova. */
static size_t dma_upper(const struct rbln_vfu *v, uint64_t iova)
{
	size_t lo = 0, hi = v->ndma;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->dma[mid].iova <= iova)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first region whose iova is at or above iova. */
static size_t dma_lower(const struct rbln_vfu *v, uint64_t iova)
{
	size_t lo = 0, hi = v->ndma;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->dma[mid].iova < iova)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct dma_region *dma_lookup(const struct rbln_vfu *v, uint64_t iova)
{
	size_t i = dma_upper(v, iova);

	if (i == 0 || v->dma[i - 1].last < iova)
		return NULL;
	return &v->dma[i - 1];
}

void *rbln_vfu_dma_span(struct rbln_vfu *vfu, uint64_t iova, size_t *len, int prot)
{
	const struct dma_region *r;
	void *ptr = NULL;

	pthread_rwlock_rdlock(&vfu->dma_lock);
	r = dma_lookup(vfu, iova);
	if (r && r->host && !((uint32_t)prot & ~r->prot)) {
		uint64_t avail = r->last - iova;	/* one less than the bytes */

		if (*len == 0 || *len - 1 > avail)
			*len = avail >= SIZE_MAX ? SIZE_MAX : (size_t)avail + 1;
		ptr = r->host + (iova - r->iova);
	}
	pthread_rwlock_unlock(&vfu->dma_lock);
	return ptr;
}

void *rbln_vfu_dma_ptr(struct rbln_vfu *vfu, uint64_t iova, size_t len, int prot)
{
	size_t want = len ? len : 1, got = want;
	void *ptr = rbln_vfu_dma_span(vfu, iova, &got, prot);

	return ptr && got == want ? ptr : NULL;
}

/* Drops the regions' file references; the last one unmaps the file. */
static void dma_release(struct rbln_vfu *v, struct dma_region *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct dma_file *f = r[i].file, **pp;

		if (!f || --f->refs)
			continue;
		for (pp = &v->files; *pp != f; pp = &(*pp)->next)
			;
		*pp = f->next;
		munmap(f->base, f->len);
		free(f);
	}
}

/*
 * The mapping of the file behind fd that covers [off, off + size) with
 * write access if asked, made if there is none yet. NULL with *err set.
 */
static struct dma_file *dma_file_get(struct rbln_vfu *v, int fd, uint64_t off,
				     uint64_t size, bool write, int *err)
{
	struct dma_file *f;
	struct stat st;
	int fl;

	if (fstat(fd, &st) < 0) {
		*err = errno;
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || off + size < off ||
	    off + size > (uint64_t)st.st_size || (uint64_t)st.st_size > SIZE_MAX) {
		*err = EINVAL;
		return NULL;
	}
	/* What this fd allows, whatever another fd of the file did. */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0) {
		*err = errno;
		return NULL;
	}
	if (write && (fl & O_ACCMODE) != O_RDWR) {
		*err = EACCES;
		return NULL;
	}
	for (f = v->files; f; f = f->next)
		if (f->dev == st.st_dev && f->ino == st.st_ino &&
		    off + size <= f->len && (f->writable || !write))
			return f;

	f = calloc(1, sizeof(*f));
	if (!f) {
		*err = ENOMEM;
		return NULL;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->len = (size_t)st.st_size;
	f->writable = (fl & O_ACCMODE) == O_RDWR;
	f->base = mmap(NULL, f->len, PROT_READ | (f->writable ? PROT_WRITE : 0),
		       MAP_SHARED, fd, 0);
	if (f->base == MAP_FAILED && f->writable && !write) {
		/* Sealed against writing, say: read-only will do. */
		f->writable = false;
		f->base = mmap(NULL, f->len, PROT_READ, MAP_SHARED, fd, 0);
	}
	if (f->base == MAP_FAILED) {
		*err = errno;
		free(f);
		return NULL;
	}
	if (write && !f->writable) {
		munmap(f->base, f->len);
		free(f);
		*err = EACCES;
		return NULL;
	}
	f->next = v->files;
	v->files = f;
	return f;
}

/* Removes regions [lo, hi): out of the table, quiesce, munmap. */
static int dma_remove(struct rbln_vfu *v, size_t lo, size_t hi)
{
	size_t n = hi - lo;
	struct dma_region *gone;

	if (!n)
		return 0;
	gone = malloc(n * sizeof(*gone));
	if (!gone)
		return ENOMEM;
	pthread_rwlock_wrlock(&v->dma_lock);
	memcpy(gone, v->dma + lo, n * sizeof(*gone));
	memmove(v->dma + lo, v->dma + hi, (v->ndma - hi) * sizeof(*gone));
	v->ndma -= n;
	if (v->dma_cap > 64 && v->ndma < v->dma_cap / 4) {
		size_t cap = v->dma_cap / 2;
		struct dma_region *d = realloc(v->dma, cap * sizeof(*d));

		if (d) {
			v->dma = d;
			v->dma_cap = cap;
		}
	}
	pthread_rwlock_unlock(&v->dma_lock);
	if (v->ops.quiesce)
		v->ops.quiesce(v->opaque);
	dma_release(v, gone, n);
	free(gone);
	return 0;
}

static void dma_remove_all(struct rbln_vfu *v)
{
	struct dma_region *gone;
	size_t n;

	pthread_rwlock_wrlock(&v->dma_lock);
	gone = v->dma;
	n = v->ndma;
	v->dma = NULL;
	v->ndma = v->dma_cap = 0;
	pthread_rwlock_unlock(&v->dma_lock);
	if (n && v->ops.quiesce)
		v->ops.quiesce(v->opaque);
	dma_release(v, gone, n);
	free(gone);
}

static int handle_dma_map(struct rbln_vfu *v, const uint8_t *p, uint32_t plen)
{
	uint32_t argsz, flags;
	uint64_t off, iova, size, last;
	struct dma_region r = { 0 };
	size_t at;
	int fd;

	if (plen < DMA_MAP_SIZE)
		return EINVAL;
	argsz = get32(p);
	flags = get32(p + 4);
	off = get64(p + 8);
	iova = get64(p + 16);
	size = get64(p + 24);
	last = iova + size - 1;
	if (argsz < DMA_MAP_SIZE || (flags & ~(DMA_MAP_FLAG_READ | DMA_MAP_FLAG_WRITE)) ||
	    !(flags & (DMA_MAP_FLAG_READ | DMA_MAP_FLAG_WRITE)) ||
	    size == 0 || last < iova || v->nfds > 1)
		return EINVAL;
	if (v->ndma >= v->max_dma_maps)
		return ENOSPC;
	at = dma_upper(v, iova);
	if ((at > 0 && v->dma[at - 1].last >= iova) ||
	    (at < v->ndma && v->dma[at].iova <= last))
		return EEXIST;

	r.iova = iova;
	r.last = last;
	if (flags & DMA_MAP_FLAG_READ)
		r.prot |= RBLN_VFU_DMA_READ;
	if (flags & DMA_MAP_FLAG_WRITE)
		r.prot |= RBLN_VFU_DMA_WRITE;

	fd = v->nfds ? v->fds[0] : -1;
	if (fd >= 0) {
		int err = 0;

		r.file = dma_file_get(v, fd, off, size, flags & DMA_MAP_FLAG_WRITE, &err);
		if (!r.file)
			return err;
		r.file->refs++;
		r.host = r.file->base + off;
		close_fd(&v->fds[0]);
	}

	pthread_rwlock_wrlock(&v->dma_lock);
	if (v->ndma == v->dma_cap) {
		size_t cap = v->dma_cap ? v->dma_cap * 2 : 64;
		struct dma_region *d = realloc(v->dma, cap * sizeof(*d));

		if (!d) {
			pthread_rwlock_unlock(&v->dma_lock);
			dma_release(v, &r, 1);
			return ENOMEM;
		}
		v->dma = d;
		v->dma_cap = cap;
	}
	memmove(v->dma + at + 1, v->dma + at, (v->ndma - at) * sizeof(r));
	v->dma[at] = r;
	v->ndma++;
	pthread_rwlock_unlock(&v->dma_lock);
	return 0;
}

static int handle_dma_unmap(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			    uint8_t *reply, uint32_t *rlen)
{
	uint32_t argsz, flags;
	uint64_t iova, size, last;
	size_t lo, hi;
	int err;

	if (plen < DMA_UNMAP_SIZE)
		return EINVAL;
	argsz = get32(p);
	flags = get32(p + 4);
	iova = get64(p + 8);
	size = get64(p + 16);
	if (argsz < DMA_UNMAP_SIZE || (flags & ~DMA_UNMAP_FLAG_ALL))
		return EINVAL;
	if (flags & DMA_UNMAP_FLAG_ALL) {
		if (iova || size)
			return EINVAL;
		lo = 0;
		hi = v->ndma;
	} else {
		last = iova + size - 1;
		if (size == 0 || last < iova)
			return EINVAL;
		/*
		 * Every mapping inside the range goes (none is fine, as with
		 * the kernel's type1 IOMMU); one that straddles an end is an
		 * error and nothing is removed.
		 */
		lo = dma_lower(v, iova);
		if (lo > 0 && v->dma[lo - 1].last >= iova)
			return EINVAL;
		for (hi = lo; hi < v->ndma && v->dma[hi].iova <= last; hi++)
			if (v->dma[hi].last > last)
				return EINVAL;
	}
	err = dma_remove(v, lo, hi);
	if (err)
		return err;
	memcpy(reply, p, DMA_UNMAP_SIZE);
	*rlen = DMA_UNMAP_SIZE;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Interrupts. */

static unsigned int irq_count(struct rbln_vfu *v, uint32_t index)
{
	switch (index) {
	case IRQ_MSIX:
		return v->cfg.msix_vectors;
	case IRQ_ERR:
	case IRQ_REQ:
		return 1;
	default:
		return 0;
	}
}

static int *irq_fd_slot(struct rbln_vfu *v, uint32_t index, unsigned int i)
{
	switch (index) {
	case IRQ_MSIX:
		return &v->msix[i].fd;
	case IRQ_ERR:
		return &v->err_fd;
	default:	/* IRQ_REQ; INTx and MSI have no interrupts to index */
		return &v->req_fd;
	}
}

/* Called with irq_lock held. */
static void irq_fire_locked(struct rbln_vfu *v, uint32_t index, unsigned int i)
{
	if (index == IRQ_MSIX && v->msix[i].masked) {
		v->msix[i].pending = true;
		return;
	}
	if (*irq_fd_slot(v, index, i) >= 0)
		signal_eventfd(*irq_fd_slot(v, index, i));
}

void rbln_vfu_irq(struct rbln_vfu *vfu, unsigned int vector)
{
	if (vector >= vfu->cfg.msix_vectors)
		return;
	pthread_mutex_lock(&vfu->irq_lock);
	irq_fire_locked(vfu, IRQ_MSIX, vector);
	pthread_mutex_unlock(&vfu->irq_lock);
}

static bool is_eventfd(int fd)
{
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT;	/* no /proc: trust the client */
	target[n] = '\0';
	return !strcmp(target, "anon_inode:[eventfd]");
}

static void irq_disable_index(struct rbln_vfu *v, uint32_t index)
{
	unsigned int n = irq_count(v, index);

	pthread_mutex_lock(&v->irq_lock);
	for (unsigned int i = 0; i < n; i++) {
		close_fd(irq_fd_slot(v, index, i));
		if (index == IRQ_MSIX)
			v->msix[i].masked = v->msix[i].pending = false;
	}
	pthread_mutex_unlock(&v->irq_lock);
}

static int handle_set_irqs(struct rbln_vfu *v, const uint8_t *p, uint32_t plen)
{
	uint32_t argsz, flags, index, start, count, data, action;
	unsigned int n;

	if (plen < IRQ_SET_SIZE)
		return EINVAL;
	argsz = get32(p);
	flags = get32(p + 4);
	index = get32(p + 8);
	start = get32(p + 12);
	count = get32(p + 16);
	data = flags & IRQ_SET_DATA_MASK;
	action = flags & IRQ_SET_ACTION_BITS;
	if (argsz < IRQ_SET_SIZE || (flags & ~(IRQ_SET_DATA_MASK | IRQ_SET_ACTION_BITS)) ||
	    __builtin_popcount(data) != 1 || __builtin_popcount(action) != 1 ||
	    index >= NUM_IRQS)
		return EINVAL;
	if (data != IRQ_SET_DATA_EVENTFD && v->nfds)
		return EINVAL;
	n = irq_count(v, index);

	if (count == 0) {
		/* DATA_NONE | ACTION_TRIGGER with count 0: disable the index. */
		if (data != IRQ_SET_DATA_NONE || action != IRQ_SET_ACTION_TRIGGER)
			return EINVAL;
		irq_disable_index(v, index);
		return 0;
	}
	if (start >= n || count > n - start)
		return EINVAL;
	if (data == IRQ_SET_DATA_BOOL && plen - IRQ_SET_SIZE < count)
		return EINVAL;

	if (data == IRQ_SET_DATA_EVENTFD) {
		/* Eventfds only trigger; none passed de-assigns the range. */
		if (action != IRQ_SET_ACTION_TRIGGER || (v->nfds && v->nfds != count) ||
		    v->fds_truncated)
			return EINVAL;
		for (unsigned int i = 0; i < v->nfds; i++) {
			int fl;

			if (!is_eventfd(v->fds[i]))
				return EINVAL;
			fl = fcntl(v->fds[i], F_GETFL);
			if (fl < 0 || fcntl(v->fds[i], F_SETFL, fl | O_NONBLOCK) < 0)
				return EINVAL;
		}
		pthread_mutex_lock(&v->irq_lock);
		for (unsigned int i = 0; i < count; i++) {
			int *slot = irq_fd_slot(v, index, start + i);

			close_fd(slot);
			if (v->nfds) {
				*slot = v->fds[i];
				v->fds[i] = -1;
			}
		}
		pthread_mutex_unlock(&v->irq_lock);
		return 0;
	}

	if (action != IRQ_SET_ACTION_TRIGGER && index != IRQ_MSIX)
		return EINVAL;	/* only MSI-X is maskable */

	pthread_mutex_lock(&v->irq_lock);
	for (unsigned int i = 0; i < count; i++) {
		unsigned int vec = start + i;

		if (data == IRQ_SET_DATA_BOOL && !p[IRQ_SET_SIZE + i])
			continue;
		switch (action) {
		case IRQ_SET_ACTION_TRIGGER:
			irq_fire_locked(v, index, vec);
			break;
		case IRQ_SET_ACTION_MASK:
			v->msix[vec].masked = true;
			break;
		case IRQ_SET_ACTION_UNMASK:
			v->msix[vec].masked = false;
			if (v->msix[vec].pending) {
				v->msix[vec].pending = false;
				if (v->msix[vec].fd >= 0)
					signal_eventfd(v->msix[vec].fd);
			}
			break;
		}
	}
	pthread_mutex_unlock(&v->irq_lock);
	return 0;
}

static void irq_close_all(struct rbln_vfu *v)
{
	for (uint32_t index = 0; index < NUM_IRQS; index++)
		irq_disable_index(v, index);
}

/* ------------------------------------------------------------------ */
/* The other commands. */

/* Returns 0, an errno for an error reply, or -1 to end the session. */
static int handle_version(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			  uint8_t *reply, uint32_t *rlen)
{
	struct caps caps = { 0 };
	uint16_t major, minor;
	bool json = false;
	int n = 0;

	if (plen < 4 || v->negotiated)
		return EINVAL;
	major = get16(p);
	minor = get16(p + 2);
	if (major != 0) {
		vlog(v, "client speaks vfio-user %u.%u, this server 0.0", major, minor);
		return -1;
	}
	if (plen > 4) {
		/* NUL-terminated JSON; an empty string is no JSON. */
		const char *s = (const char *)p + 4;
		const char *nul = memchr(s, '\0', plen - 4);

		if (!nul || (nul > s && !parse_version_json(s, (size_t)(nul - s), &caps))) {
			vlog(v, "malformed VERSION capabilities");
			return EINVAL;
		}
		json = nul > s;
	}

	/* Our limits; the reply names only capabilities the client did. */
	v->max_dma_maps = RBLN_VFU_MAX_DMA_MAPS;
	if (caps.has_max_maps && caps.max_maps && caps.max_maps < v->max_dma_maps)
		v->max_dma_maps = (uint32_t)caps.max_maps;

	put16(reply, 0);
	put16(reply + 2, 0);
	*rlen = 4;
	if (json) {
		char *out = (char *)reply + 4;
		size_t room = 512;
		const char *sep = "";

		n = snprintf(out, room, "{\"capabilities\":{");
		if (caps.has_max_fds) {
			n += snprintf(out + n, room - n, "%s\"max_msg_fds\":%u", sep,
				      RBLN_VFU_MAX_MSG_FDS);
			sep = ",";
		}
		if (caps.has_max_xfer) {
			n += snprintf(out + n, room - n, "%s\"max_data_xfer_size\":%u", sep,
				      RBLN_VFU_MAX_DATA_XFER);
			sep = ",";
		}
		if (caps.has_pgsizes) {
			uint64_t pg = caps.pgsizes & ~(uint64_t)4095;

			n += snprintf(out + n, room - n, "%s\"pgsizes\":%llu", sep,
				      (unsigned long long)(pg ? pg : 4096));
			sep = ",";
		}
		if (caps.has_max_maps) {
			n += snprintf(out + n, room - n, "%s\"max_dma_maps\":%u", sep,
				      v->max_dma_maps);
			sep = ",";
		}
		if (caps.has_multi)
			n += snprintf(out + n, room - n, "%s\"write_multiple\":%s", sep,
				      caps.multi ? "true" : "false");
		n += snprintf(out + n, room - n, "}}");
		*rlen += (uint32_t)n + 1;	/* with the NUL */
	}
	v->negotiated = true;
	if (v->trace)
		vlog(v, "negotiated 0.0 (client %u.%u)%s%s", major, minor,
		     json ? ": " : "", json ? (const char *)reply + 4 : "");
	return 0;
}

static int handle_device_info(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			      uint8_t *reply, uint32_t *rlen)
{
	(void)v;
	if (plen < DEVICE_INFO_SIZE || get32(p) < DEVICE_INFO_SIZE)
		return EINVAL;
	put32(reply, DEVICE_INFO_SIZE);
	put32(reply + 4, DEVICE_FLAGS_PCI | DEVICE_FLAGS_RESET);
	put32(reply + 8, NUM_REGIONS);
	put32(reply + 12, NUM_IRQS);
	*rlen = DEVICE_INFO_SIZE;
	return 0;
}

static int handle_region_info(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			      uint8_t *reply, uint32_t *rlen)
{
	uint32_t index;
	uint64_t size;

	if (plen < REGION_INFO_SIZE || get32(p) < REGION_INFO_SIZE)
		return EINVAL;
	index = get32(p + 8);
	if (index >= NUM_REGIONS)
		return EINVAL;
	size = region_size(v, index);
	memset(reply, 0, REGION_INFO_SIZE);
	put32(reply, REGION_INFO_SIZE);
	put32(reply + 4, size ? REGION_FLAG_READ | REGION_FLAG_WRITE : 0);
	put32(reply + 8, index);
	put64(reply + 16, size);
	*rlen = REGION_INFO_SIZE;
	return 0;
}

static int handle_irq_info(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			   uint8_t *reply, uint32_t *rlen)
{
	uint32_t index, flags = 0;
	unsigned int n;

	if (plen < IRQ_INFO_SIZE || get32(p) < IRQ_INFO_SIZE)
		return EINVAL;
	index = get32(p + 8);
	if (index >= NUM_IRQS)
		return EINVAL;
	n = irq_count(v, index);
	if (n)
		flags |= IRQ_INFO_EVENTFD;
	if (index == IRQ_MSIX)
		flags |= IRQ_INFO_MASKABLE;
	put32(reply, IRQ_INFO_SIZE);
	put32(reply + 4, flags);
	put32(reply + 8, index);
	put32(reply + 12, n);
	*rlen = IRQ_INFO_SIZE;
	return 0;
}

static int handle_region_read(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			      uint8_t *reply, uint32_t *rlen)
{
	uint64_t off;
	uint32_t index, count;
	int err;

	if (plen != REGION_RW_SIZE)
		return EINVAL;
	off = get64(p);
	index = get32(p + 8);
	count = get32(p + 12);
	err = region_check(v, index, off, count);
	if (err)
		return err;
	memcpy(reply, p, REGION_RW_SIZE);
	region_read(v, index, (uint32_t)off, reply + REGION_RW_SIZE, count);
	*rlen = REGION_RW_SIZE + count;
	return 0;
}

static int handle_region_write(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			       uint8_t *reply, uint32_t *rlen)
{
	uint64_t off;
	uint32_t index, count;
	int err;

	if (plen < REGION_RW_SIZE)
		return EINVAL;
	off = get64(p);
	index = get32(p + 8);
	count = get32(p + 12);
	if (count != plen - REGION_RW_SIZE)
		return EINVAL;
	err = region_check(v, index, off, count);
	if (err)
		return err;
	region_write(v, index, (uint32_t)off, p + REGION_RW_SIZE, count);
	memcpy(reply, p, REGION_RW_SIZE);
	*rlen = REGION_RW_SIZE;
	return 0;
}

static int handle_write_multi(struct rbln_vfu *v, const uint8_t *p, uint32_t plen,
			      uint8_t *reply, uint32_t *rlen)
{
	uint64_t n;

	if (plen < 8)
		return EINVAL;
	n = get64(p);
	if (n > (plen - 8) / WRITE_ONE_SIZE || n * WRITE_ONE_SIZE != plen - 8)
		return EINVAL;
	/* All or nothing: check every write first. */
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *w = p + 8 + i * WRITE_ONE_SIZE;
		uint32_t count = get32(w + 12);
		int err;

		if (count > 8)
			return EINVAL;
		err = region_check(v, get32(w + 8), get64(w), count);
		if (err)
			return err;
	}
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *w = p + 8 + i * WRITE_ONE_SIZE;

		region_write(v, get32(w + 8), (uint32_t)get64(w), w + 16, get32(w + 12));
	}
	put64(reply, n);
	*rlen = 8;
	return 0;
}

static const char *cmd_name(unsigned int cmd)
{
	static const char *const names[] = {
		[CMD_VERSION] = "VERSION",
		[CMD_DMA_MAP] = "DMA_MAP",
		[CMD_DMA_UNMAP] = "DMA_UNMAP",
		[CMD_DEVICE_GET_INFO] = "DEVICE_GET_INFO",
		[CMD_DEVICE_GET_REGION_INFO] = "DEVICE_GET_REGION_INFO",
		[CMD_DEVICE_GET_REGION_IO_FDS] = "DEVICE_GET_REGION_IO_FDS",
		[CMD_DEVICE_GET_IRQ_INFO] = "DEVICE_GET_IRQ_INFO",
		[CMD_DEVICE_SET_IRQS] = "DEVICE_SET_IRQS",
		[CMD_REGION_READ] = "REGION_READ",
		[CMD_REGION_WRITE] = "REGION_WRITE",
		[CMD_DMA_READ] = "DMA_READ",
		[CMD_DMA_WRITE] = "DMA_WRITE",
		[CMD_DEVICE_RESET] = "DEVICE_RESET",
		[CMD_REGION_WRITE_MULTI] = "REGION_WRITE_MULTI",
	};

	if (cmd < sizeof(names) / sizeof(names[0]) && names[cmd])
		return names[cmd];
	return "?";
}

/* Returns 0 or an errno for the reply; -1 ends the session. */
static int dispatch(struct rbln_vfu *v, const struct hdr *h, const uint8_t *p,
		    uint32_t plen, uint8_t *reply, uint32_t *rlen)
{
	*rlen = 0;
	if ((h->flags & HDR_TYPE_MASK) != HDR_TYPE_COMMAND)
		return EINVAL;
	if (v->fds_truncated)
		return EINVAL;
	if (h->cmd != CMD_VERSION && !v->negotiated)
		return EINVAL;
	if (v->nfds && h->cmd != CMD_DMA_MAP && h->cmd != CMD_DEVICE_SET_IRQS)
		return EINVAL;

	switch (h->cmd) {
	case CMD_VERSION:
		return handle_version(v, p, plen, reply, rlen);
	case CMD_DMA_MAP:
		return handle_dma_map(v, p, plen);
	case CMD_DMA_UNMAP:
		return handle_dma_unmap(v, p, plen, reply, rlen);
	case CMD_DEVICE_GET_INFO:
		return handle_device_info(v, p, plen, reply, rlen);
	case CMD_DEVICE_GET_REGION_INFO:
		return handle_region_info(v, p, plen, reply, rlen);
	case CMD_DEVICE_GET_IRQ_INFO:
		return handle_irq_info(v, p, plen, reply, rlen);
	case CMD_DEVICE_SET_IRQS:
		return handle_set_irqs(v, p, plen);
	case CMD_REGION_READ:
		return handle_region_read(v, p, plen, reply, rlen);
	case CMD_REGION_WRITE:
		return handle_region_write(v, p, plen, reply, rlen);
	case CMD_REGION_WRITE_MULTI:
		return handle_write_multi(v, p, plen, reply, rlen);
	case CMD_DEVICE_RESET:
		function_reset(v, "DEVICE_RESET");
		return 0;
	case CMD_DEVICE_GET_REGION_IO_FDS:
	case CMD_DMA_READ:
	case CMD_DMA_WRITE:
		return ENOTSUP;
	default:
		return ENOSYS;
	}
}

/* ------------------------------------------------------------------ */
/* The session. */

static enum io_result reply(struct rbln_vfu *v, const struct hdr *req, int err,
			    uint32_t rlen)
{
	struct hdr h = {
		.id = req->id,
		.cmd = req->cmd,
		.size = HDR_SIZE + (err ? 0 : rlen),
		.flags = HDR_TYPE_REPLY | (err ? HDR_ERROR : 0),
		.error = err ? (uint32_t)err : 0,
	};

	memcpy(v->tx, &h, HDR_SIZE);
	return send_all(v, v->tx, h.size);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads and throws away what is there: >0 bytes, 0 at EOF, -1 with errno. */
static ssize_t discard(struct rbln_vfu *v)
{
	union {
		char buf[CMSG_SPACE(RBLN_VFU_MAX_MSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} cmsg;
	char scratch[4096];
	struct iovec iov = { .iov_base = scratch, .iov_len = sizeof(scratch) };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cmsg.buf,
		.msg_controllen = sizeof(cmsg.buf),
	};
	ssize_t r = recvmsg(v->conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (r >= 0) {
		take_fds(v, &mh);
		close_msg_fds(v);
	}
	return r;
}

/*
 * The server stops with the client still connected: a device that goes
 * away under a running guest (surprise removal). The client must see an
 * orderly end of the stream, not a reset connection: QEMU's vfio-user
 * client takes an EOF for a failed device (all-ones reads, dropped
 * writes from then on) but aborts on ECONNRESET, which is what closing a
 * UNIX socket with unread data in it gives the peer.
 *
 * So: shut down the sending side (the client reads EOF after the last
 * reply, and nothing is sent after it: requests not answered yet get no
 * reply), then read and drop whatever the client still sends until it
 * closes, or until STOP_DRAIN_MS have passed: QEMU keeps its end open
 * after the EOF, and this is the time its I/O thread gets to take the EOF
 * in. Then shut down the receiving side too, which makes the client's
 * further sends fail at once (EPIPE) instead of queueing, drop what had
 * arrived until then, and only then may the socket be closed, with
 * nothing unread in it.
 *
 * The drain is short on purpose: QEMU waits for the reply to every
 * request it could send, for 5 s (its vCPU, and the guest with it, stalls
 * that long), and one sent while the server still reads gets none. A
 * request QEMU had sent before the stop costs that stall whatever the
 * server does: it cannot be answered after the EOF.
 */
static void graceful_disconnect(struct rbln_vfu *v)
{
	int64_t deadline = now_ms() + STOP_DRAIN_MS;
	ssize_t r;

	if (shutdown(v->conn, SHUT_WR) < 0)
		return;		/* the client is gone already */
	for (;;) {
		struct pollfd p = { .fd = v->conn, .events = POLLIN };
		int64_t left;

		r = discard(v);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
			       errno != EINTR))
			return;	/* EOF: the client closed; or reset, or gone */
		left = deadline - now_ms();
		if (left <= 0)
			break;
		if (r < 0 && poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
	}
	if (v->trace)
		vlog(v, "client still connected %d ms after the stop; no longer reading",
		     STOP_DRAIN_MS);
	shutdown(v->conn, SHUT_RD);
	/* Finite: nothing new can arrive now. */
	do
		r = discard(v);
	while (r > 0 || (r < 0 && errno == EINTR));
}

static void end_session(struct rbln_vfu *v)
{
	close_msg_fds(v);
	dma_remove_all(v);
	irq_close_all(v);
	close_fd(&v->conn);
	v->negotiated = false;
}

static int serve_client(struct rbln_vfu *v)
{
	for (;;) {
		struct hdr h;
		enum io_result io;
		uint32_t plen, rlen = 0;
		int err;

		close_msg_fds(v);
		/* A client that never lets the socket run dry is stopped too. */
		if (atomic_load(&v->stopped))
			return 1;
		io = recv_all(v, &h, HDR_SIZE);
		if (io == IO_EOF)
			return 0;
		if (io == IO_STOP)
			return 1;
		if (io == IO_ERR)
			return -errno;
		if (h.size < HDR_SIZE) {
			vlog(v, "message %u: size %u is less than a header", h.id, h.size);
			return -EPROTO;
		}
		plen = h.size - HDR_SIZE;
		if (plen > MAX_PAYLOAD) {
			io = recv_all(v, NULL, plen);
			err = E2BIG;
			vlog(v, "message %u (%s): %u bytes refused", h.id, cmd_name(h.cmd), h.size);
		} else {
			io = recv_all(v, v->rx, plen);
			err = -2;
		}
		if (io == IO_EOF)
			return 0;
		if (io == IO_STOP)
			return 1;
		if (io == IO_ERR)
			return -errno;

		if ((h.flags & HDR_TYPE_MASK) == HDR_TYPE_REPLY) {
			/* We send no commands: there is nothing it can answer. */
			vlog(v, "message %u: unexpected reply (%s), ignored", h.id,
			     cmd_name(h.cmd));
			continue;
		}
		if (err == -2)
			err = dispatch(v, &h, v->rx, plen, v->tx + HDR_SIZE, &rlen);
		if (v->trace || (err > 0 && err != E2BIG))
			vlog(v, "message %u: %s (%u), %u bytes, %u fds%s%s: %s", h.id,
			     cmd_name(h.cmd), h.cmd, h.size, v->nfds,
			     h.flags & HDR_NO_REPLY ? ", no reply" : "",
			     v->fds_truncated ? ", fds truncated" : "",
			     err ? strerror(err > 0 ? err : EPROTO) : "ok");
		/* What the command did not take is closed before it is answered. */
		close_msg_fds(v);
		if (err < 0) {
			reply(v, &h, ENOTSUP, 0);
			return -EPROTO;
		}
		if (h.flags & HDR_NO_REPLY)
			continue;
		io = reply(v, &h, err, rlen);
		if (io == IO_EOF)
			return 0;
		if (io == IO_STOP)
			return 1;
		if (io == IO_ERR)
			return -errno;
	}
}

int rbln_vfu_serve(struct rbln_vfu *vfu)
{
	int ret;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = vfu->listen_fd, .events = POLLIN },
			{ .fd = vfu->stop_fd, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[1].revents)
			return 1;
		if (!p[0].revents)
			continue;
		vfu->conn = accept4(vfu->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (vfu->conn >= 0)
			break;
		if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
			continue;
		return -errno;
	}
	if (vfu->trace)
		vlog(vfu, "client connected");
	ret = serve_client(vfu);
	if (vfu->trace || ret < 0)
		vlog(vfu, "client %s (%d)", ret == 1 ? "stopped" : "gone", ret);
	/*
	 * The client reads all-ones from the EOF on, which says the function
	 * is gone and touches no memory: so its DMA ends before the EOF.
	 */
	if (ret == 1) {
		dma_remove_all(vfu);
		graceful_disconnect(vfu);
	}
	end_session(vfu);
	return ret;
}

void rbln_vfu_stop(struct rbln_vfu *vfu)
{
	uint64_t one = 1;

	atomic_store(&vfu->stopped, true);
	if (write(vfu->stop_fd, &one, sizeof(one)) < 0) {
		/* already signalled to the limit */
	}
}

int rbln_vfu_bus_master(struct rbln_vfu *vfu)
{
	return atomic_load(&vfu->bus_master);
}

/* ------------------------------------------------------------------ */
/* Setup. */

static bool config_valid(const struct rbln_vfu_config *c)
{
	uint64_t tab_end, pba_end;

	if (c->bar0_size < 4096 || c->bar0_size > (1u << 30) ||
	    (c->bar0_size & (c->bar0_size - 1)))
		return false;
	if (c->msix_vectors < 1 || c->msix_vectors > 2048 || c->class_code > 0xffffff)
		return false;
	if ((c->msix_table_off & 7) || (c->msix_pba_off & 7))
		return false;
	tab_end = (uint64_t)c->msix_table_off + 16ull * c->msix_vectors;
	pba_end = (uint64_t)c->msix_pba_off + msix_pba_len(c);
	if (tab_end > c->bar0_size || pba_end > c->bar0_size)
		return false;
	if (c->msix_table_off < pba_end && c->msix_pba_off < tab_end)
		return false;
	return true;
}

struct rbln_vfu *rbln_vfu_listen(const char *socket_path,
				 const struct rbln_vfu_config *cfg,
				 const struct rbln_vfu_ops *ops, void *opaque)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_rwlockattr_t rwa;
	struct rbln_vfu *v;
	struct stat st;
	const char *t;
	int err;

	if (!socket_path || !cfg || !ops || !config_valid(cfg)) {
		errno = EINVAL;
		return NULL;
	}
	if (strlen(socket_path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sa.sun_path, socket_path);

	v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->listen_fd = v->stop_fd = v->conn = v->err_fd = v->req_fd = -1;
	v->cfg = *cfg;
	v->ops = *ops;
	v->opaque = opaque;
	t = getenv("RBLN_VFU_TRACE");
	v->trace = t && *t && strcmp(t, "0");
	v->max_dma_maps = RBLN_VFU_MAX_DMA_MAPS;
	v->path = strdup(socket_path);
	v->rx = malloc(MAX_PAYLOAD);
	v->tx = malloc(HDR_SIZE + MAX_PAYLOAD);
	v->msix = calloc(cfg->msix_vectors, sizeof(*v->msix));
	if (!v->path || !v->rx || !v->tx || !v->msix) {
		err = ENOMEM;
		goto fail_mem;
	}
	for (unsigned int i = 0; i < cfg->msix_vectors; i++)
		v->msix[i].fd = -1;

	pthread_rwlockattr_init(&rwa);
	/* DMA_MAP must not starve behind a stream of device lookups. */
	pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	err = pthread_rwlock_init(&v->dma_lock, &rwa);
	pthread_rwlockattr_destroy(&rwa);
	if (err)
		goto fail_mem;
	err = pthread_mutex_init(&v->irq_lock, NULL);
	if (err)
		goto fail_rw;

	config_build(v);
	memcpy(v->config, v->config_init, CFG_SIZE);

	v->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->stop_fd < 0)
		goto fail_errno;
	v->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (v->listen_fd < 0)
		goto fail_errno;
	if (lstat(socket_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			err = EEXIST;
			goto fail;
		}
		unlink(socket_path);
	}
	if (bind(v->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(v->listen_fd, 1) < 0)
		goto fail_errno;
	return v;

fail_errno:
	err = errno;
fail:
	close_fd(&v->listen_fd);
	close_fd(&v->stop_fd);
	pthread_mutex_destroy(&v->irq_lock);
fail_rw:
	pthread_rwlock_destroy(&v->dma_lock);
fail_mem:
	free(v->msix);
	free(v->tx);
	free(v->rx);
	free(v->path);
	free(v);
	errno = err;
	return NULL;
}

void rbln_vfu_destroy(struct rbln_vfu *vfu)
{
	if (!vfu)
		return;
	end_session(vfu);
	close_fd(&vfu->listen_fd);
	unlink(vfu->path);
	close_fd(&vfu->stop_fd);
	pthread_mutex_destroy(&vfu->irq_lock);
	pthread_rwlock_destroy(&vfu->dma_lock);
	free(vfu->msix);
	free(vfu->tx);
	free(vfu->rx);
	free(vfu->path);
	free(vfu);
}
