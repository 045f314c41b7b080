// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_vfio_user - the device model's vfio-user server
 * (tools/rbln-npu-model/vfio_user.c) against a client written here from
 * the protocol specification: negotiation, device/region/IRQ info, the
 * emulated config space (IDs, capability chain, BAR sizing, FLR), BAR0
 * reaching the callbacks, MSI-X eventfds and masking, the DMA table
 * (memfd mappings, unmap quiescing first, many small maps, concurrent
 * lookups), reset, disconnect and reconnect, a stop with requests still
 * in flight (the client sees EOF, never a reset), and every rejection path a
 * hostile client can take: each must get an error reply or end the
 * session, never crash the server.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "vfio_user.h"

/* The protocol, from docs/interop/vfio-user.rst. */
struct hdr {
	uint16_t id, cmd;
	uint32_t size, flags, error;
};

enum {
	VERSION = 1, DMA_MAP, DMA_UNMAP, GET_INFO, GET_REGION_INFO, GET_REGION_IO_FDS,
	GET_IRQ_INFO, SET_IRQS, REGION_READ, REGION_WRITE, DMA_READ, DMA_WRITE,
	DEVICE_RESET, REGION_WRITE_MULTI = 15,
};

#define F_REPLY		0x1
#define F_NO_REPLY	0x10
#define F_ERROR		0x20

#define IRQ_DATA_NONE		(1u << 0)
#define IRQ_DATA_BOOL		(1u << 1)
#define IRQ_DATA_EVENTFD	(1u << 2)
#define IRQ_ACTION_MASK		(1u << 3)
#define IRQ_ACTION_UNMASK	(1u << 4)
#define IRQ_ACTION_TRIGGER	(1u << 5)

struct dma_map { uint32_t argsz, flags; uint64_t offset, iova, size; };
struct dma_unmap { uint32_t argsz, flags; uint64_t iova, size; };
struct dev_info { uint32_t argsz, flags, num_regions, num_irqs; };
struct region_info { uint32_t argsz, flags, index, cap_offset; uint64_t size, offset; };
struct irq_info { uint32_t argsz, flags, index, count; };
struct irq_set { uint32_t argsz, flags, index, start, count; uint8_t data[]; };
struct region_rw { uint64_t offset; uint32_t region, count; uint8_t data[]; };

#define BAR0_SIZE	0x4000
#define TABLE_OFF	0x2000
#define PBA_OFF		0x3000
#define NVEC		5

/* QEMU 10.1's proposal, as vfio_user_validate_version() builds it. */
static const char qemu_caps[] =
	"{\"capabilities\":{\"migration\":{\"pgsize\":4096,\"max_bitmap_size\":268435456},"
	"\"max_msg_fds\":16,\"max_data_xfer_size\":1048576,\"pgsizes\":4096,"
	"\"max_dma_maps\":65535,\"write_multiple\":true}}";

/* ------------------------------------------------------------------ */
/* The model behind the server. */

struct model {
	atomic_uint regs[BAR0_SIZE / 4];
	atomic_uint reads, writes, resets, quiesces;
	/* The "access" of the DMA contract: device threads hold it shared. */
	pthread_rwlock_t access;
	/* Checked from quiesce: the range is out of the table, still mapped. */
	struct rbln_vfu *vfu;
	uint64_t probe_iova;
	volatile uint8_t *probe_ptr;
	atomic_int probe_gone, probe_readable;
	/* A write to GATE_OFF holds the serve thread until gate_open. */
	atomic_int gate_held, gate_open;
};

#define GATE_OFF	0x1ffc

static uint32_t m_read32(void *opaque, uint32_t off)
{
	struct model *m = opaque;

	atomic_fetch_add(&m->reads, 1);
	return atomic_load(&m->regs[off / 4]);
}

static void m_write32(void *opaque, uint32_t off, uint32_t val)
{
	struct model *m = opaque;

	atomic_fetch_add(&m->writes, 1);
	atomic_store(&m->regs[off / 4], val);
	if (off == GATE_OFF) {
		atomic_store(&m->gate_held, 1);
		while (!atomic_load(&m->gate_open))
			usleep(1000);
	}
}

static void m_reset(void *opaque)
{
	struct model *m = opaque;

	atomic_fetch_add(&m->resets, 1);
	for (unsigned int i = 0; i < BAR0_SIZE / 4; i++)
		atomic_store(&m->regs[i], 0);
}

static void m_quiesce(void *opaque)
{
	struct model *m = opaque;

	if (m->probe_ptr) {
		atomic_store(&m->probe_gone,
			     !rbln_vfu_dma_ptr(m->vfu, m->probe_iova, 1, RBLN_VFU_DMA_READ));
		atomic_store(&m->probe_readable, m->probe_ptr[0] == 0x5a);
		m->probe_ptr = NULL;
	}
	pthread_rwlock_wrlock(&m->access);
	pthread_rwlock_unlock(&m->access);
	atomic_fetch_add(&m->quiesces, 1);
}

static void m_log(void *opaque, const char *msg)
{
	(void)opaque;
	fprintf(stderr, "# server: %s\n", msg);
}

static const struct rbln_vfu_ops model_ops = {
	.read32 = m_read32,
	.write32 = m_write32,
	.reset = m_reset,
	.quiesce = m_quiesce,
	.log = m_log,
};

static const struct rbln_vfu_config model_cfg = {
	.vendor = 0xfffe,
	.device = 0x0001,
	.class_code = 0x120000,
	.revision = 1,
	.bar0_size = BAR0_SIZE,
	.msix_vectors = NVEC,
	.msix_table_off = TABLE_OFF,
	.msix_pba_off = PBA_OFF,
};

/* ------------------------------------------------------------------ */
/* The client side. */

struct serve_thread {
	pthread_t tid;
	struct rbln_vfu *vfu;
	int ret;
};

static void *serve_main(void *arg)
{
	struct serve_thread *st = arg;

	st->ret = rbln_vfu_serve(st->vfu);
	return NULL;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static uint16_t next_id;

/* Sends one message (raw header fields), with fds as SCM_RIGHTS. */
static int send_raw(int fd, uint16_t cmd, uint32_t size, uint32_t flags,
		    const void *p, size_t plen, const int *fds, int nfds)
{
	struct hdr h = { .id = ++next_id, .cmd = cmd, .size = size, .flags = flags };
	union {
		char buf[CMSG_SPACE(32 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)p, .iov_len = plen },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = plen ? 2 : 1 };
	size_t total = sizeof(h) + plen, done;
	ssize_t r;

	if (nfds) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));	/* padding, checked by valgrind */
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	r = sendmsg(fd, &mh, MSG_NOSIGNAL);
	if (r < 0)
		return -1;
	/* The rest of a large message, without fds. */
	for (done = (size_t)r; done < total; done += (size_t)r) {
		const char *src = done < sizeof(h) ? (const char *)&h + done :
			(const char *)p + (done - sizeof(h));
		size_t len = done < sizeof(h) ? sizeof(h) - done : total - done;

		r = send(fd, src, len, MSG_NOSIGNAL);
		if (r <= 0)
			return -1;
	}
	return h.id;
}

static int send_msg(int fd, uint16_t cmd, uint32_t flags, const void *p, size_t plen,
		    const int *fds, int nfds)
{
	return send_raw(fd, cmd, (uint32_t)(sizeof(struct hdr) + plen), flags, p, plen,
			fds, nfds);
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, (char *)buf + done, len - done);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/*
 * Receives one reply into h and buf (at most bufsz payload bytes). Returns
 * the payload length, or -1 on EOF / timeout / an oversized reply.
 */
static ssize_t recv_reply(int fd, struct hdr *h, void *buf, size_t bufsz)
{
	size_t plen;

	if (read_full(fd, h, sizeof(*h)))
		return -1;
	if (h->size < sizeof(*h))
		return -1;
	plen = h->size - sizeof(*h);
	if (plen > bufsz)
		return -1;
	if (plen && read_full(fd, buf, plen))
		return -1;
	return (ssize_t)plen;
}

/*
 * One command and its reply: the reply's errno (0: success), or -1 when
 * no well-formed reply to this command came back. *rlen gets its size.
 */
static int xact_fds(int fd, uint16_t cmd, const void *p, size_t plen,
		    const int *fds, int nfds, void *rbuf, size_t rbufsz, size_t *rlen)
{
	static uint8_t scratch[1 << 21];
	struct hdr h;
	ssize_t n;
	int id = send_msg(fd, cmd, 0, p, plen, fds, nfds);

	if (id < 0)
		return -1;
	if (!rbuf) {
		rbuf = scratch;
		rbufsz = sizeof(scratch);
	}
	n = recv_reply(fd, &h, rbuf, rbufsz);
	if (n < 0 || h.id != (uint16_t)id || h.cmd != cmd || (h.flags & 0xf) != F_REPLY)
		return -1;
	if (rlen)
		*rlen = (size_t)n;
	if (h.flags & F_ERROR)
		return h.error ? (int)h.error : -1;
	return 0;
}

static int xact(int fd, uint16_t cmd, const void *p, size_t plen, void *rbuf,
		size_t rbufsz, size_t *rlen)
{
	return xact_fds(fd, cmd, p, plen, NULL, 0, rbuf, rbufsz, rlen);
}

static int negotiate(int fd, char *json_out, size_t json_sz, size_t *reply_len)
{
	uint8_t req[sizeof(qemu_caps) + 4], rep[1024];
	size_t rlen = 0;
	int err;

	memset(req, 0, 4);
	memcpy(req + 4, qemu_caps, sizeof(qemu_caps));
	err = xact(fd, VERSION, req, sizeof(req), rep, sizeof(rep), &rlen);
	if (err)
		return err;
	if (rlen < 4 || rep[0] || rep[1] || rep[2] || rep[3])
		return -1;
	if (json_out) {
		if (rlen == 4 || rep[rlen - 1] != '\0' || rlen - 4 > json_sz)
			return -1;
		memcpy(json_out, rep + 4, rlen - 4);
	}
	if (reply_len)
		*reply_len = rlen;
	return 0;
}

static int region_read(int fd, uint32_t region, uint64_t off, uint32_t count, void *out)
{
	struct region_rw rq = { .offset = off, .region = region, .count = count };
	static uint8_t rep[(1 << 20) + 64];
	size_t rlen = 0;
	int err = xact(fd, REGION_READ, &rq, sizeof(rq), rep, sizeof(rep), &rlen);

	if (err)
		return err;
	if (rlen != sizeof(rq) + count || memcmp(rep, &rq, sizeof(rq)))
		return -1;
	memcpy(out, rep + sizeof(rq), count);
	return 0;
}

static int region_write(int fd, uint32_t region, uint64_t off, uint32_t count,
			const void *data)
{
	uint8_t buf[sizeof(struct region_rw) + 4096], rep[64];
	struct region_rw *rq = (struct region_rw *)buf;
	size_t rlen = 0;
	int err;

	rq->offset = off;
	rq->region = region;
	rq->count = count;
	memcpy(rq->data, data, count);
	err = xact(fd, REGION_WRITE, buf, sizeof(*rq) + count, rep, sizeof(rep), &rlen);
	if (err)
		return err;
	return rlen == sizeof(*rq) && !memcmp(rep, rq, sizeof(*rq)) ? 0 : -1;
}

static uint32_t cfg32(int fd, uint32_t off)
{
	uint32_t v = 0xdeadbeef;

	if (region_read(fd, 7, off, 4, &v))
		return 0xdeadbeef;
	return v;
}

static int cfg_write(int fd, uint32_t off, uint32_t count, uint32_t val)
{
	return region_write(fd, 7, off, count, &val);
}

static int set_irqs(int fd, uint32_t flags, uint32_t index, uint32_t start,
		    uint32_t count, const void *data, size_t dlen, const int *fds, int nfds)
{
	uint8_t buf[sizeof(struct irq_set) + 64];
	struct irq_set *s = (struct irq_set *)buf;

	s->argsz = sizeof(*s) + dlen;
	s->flags = flags;
	s->index = index;
	s->start = start;
	s->count = count;
	if (dlen)
		memcpy(s->data, data, dlen);
	return xact_fds(fd, SET_IRQS, buf, sizeof(*s) + dlen, fds, nfds, NULL, 0, NULL);
}

static int dma_map(int fd, uint64_t iova, uint64_t size, uint64_t off, uint32_t flags,
		   int memfd)
{
	struct dma_map m = { .argsz = sizeof(m), .flags = flags, .offset = off,
			     .iova = iova, .size = size };

	return xact_fds(fd, DMA_MAP, &m, sizeof(m), memfd >= 0 ? &memfd : NULL,
			memfd >= 0, NULL, 0, NULL);
}

static int dma_unmap(int fd, uint64_t iova, uint64_t size, uint32_t flags)
{
	struct dma_unmap u = { .argsz = sizeof(u), .flags = flags, .iova = iova, .size = size };
	uint8_t rep[64];
	size_t rlen = 0;
	int err = xact(fd, DMA_UNMAP, &u, sizeof(u), rep, sizeof(rep), &rlen);

	if (err)
		return err;
	/* The reply is the request's entry. */
	return rlen == sizeof(u) && !memcmp(rep, &u, sizeof(u)) ? 0 : -1;
}

/* Open fds of this process, the server's included. */
static int count_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int eventfd_take(int fd)
{
	uint64_t v;

	return read(fd, &v, sizeof(v)) == sizeof(v) ? (int)v : 0;
}

/* ------------------------------------------------------------------ */

FIXTURE(vfu) {
	char dir[64], path[96];
	struct model m;
	struct rbln_vfu *vfu;
	struct serve_thread st;
	int fd;
};

static void start_serving(struct __test_metadata *_metadata, FIXTURE_DATA(vfu) *self)
{
	self->st.vfu = self->vfu;
	self->st.ret = -12345;
	ASSERT_EQ(0, pthread_create(&self->st.tid, NULL, serve_main, &self->st));
	self->fd = connect_to(self->path);
	ASSERT_LE(0, self->fd);
}

/* Ends the session from the client side; the server's verdict. */
static int stop_serving(FIXTURE_DATA(vfu) *self)
{
	if (self->fd >= 0) {
		close(self->fd);
		self->fd = -1;
	}
	pthread_join(self->st.tid, NULL);
	return self->st.ret;
}

FIXTURE_SETUP(vfu)
{
	strcpy(self->dir, "/tmp/rbln-vfu-test.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(self->path, sizeof(self->path), "%s/sock", self->dir);
	memset(&self->m, 0, sizeof(self->m));
	pthread_rwlockattr_t rwa;

	/* quiesce must not starve behind the device threads' accesses. */
	pthread_rwlockattr_init(&rwa);
	pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&self->m.access, &rwa);
	pthread_rwlockattr_destroy(&rwa);
	self->fd = -1;
	self->vfu = rbln_vfu_listen(self->path, &model_cfg, &model_ops, &self->m);
	ASSERT_NE(NULL, self->vfu);
	self->m.vfu = self->vfu;
	ASSERT_EQ(0, access(self->path, F_OK));	/* exists on return */
	start_serving(_metadata, self);
}

FIXTURE_TEARDOWN(vfu)
{
	stop_serving(self);
	rbln_vfu_destroy(self->vfu);
	EXPECT_NE(0, access(self->path, F_OK));	/* unlinked */
	rmdir(self->dir);
}

TEST_F(vfu, version)
{
	char json[512];
	size_t rlen;

	ASSERT_EQ(0, negotiate(self->fd, json, sizeof(json), &rlen));
	TH_LOG("reply: %s", json);
	EXPECT_NE(NULL, strstr(json, "\"capabilities\":{"));
	EXPECT_NE(NULL, strstr(json, "\"max_msg_fds\":16"));
	EXPECT_NE(NULL, strstr(json, "\"max_data_xfer_size\":1048576"));
	EXPECT_NE(NULL, strstr(json, "\"pgsizes\":4096"));
	EXPECT_NE(NULL, strstr(json, "\"max_dma_maps\":65535"));
	EXPECT_NE(NULL, strstr(json, "\"write_multiple\":true"));
	/* Only what was proposed, and nothing we do not do. */
	EXPECT_EQ(NULL, strstr(json, "migration"));
	EXPECT_EQ(NULL, strstr(json, "twin_socket"));
	/* QEMU reads the reply into its request's buffer. */
	EXPECT_GE(sizeof(qemu_caps) + 4, rlen);

	/* Only once. */
	EXPECT_EQ(EINVAL, negotiate(self->fd, NULL, 0, NULL));
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, version_variants)
{
	uint8_t req[256] = { 0 }, rep[256];
	size_t rlen = 0;

	/* Nothing but the version before VERSION. */
	EXPECT_EQ(EINVAL, xact(self->fd, GET_INFO, req, 16, NULL, 0, NULL));
	/* No JSON at all: no JSON back. */
	ASSERT_EQ(0, xact(self->fd, VERSION, req, 4, rep, sizeof(rep), &rlen));
	EXPECT_EQ(4, rlen);
	EXPECT_EQ(0, stop_serving(self));

	start_serving(_metadata, self);
	/* Malformed JSON variants are refused, the session goes on. */
	static const char *const bad[] = {
		"{", "{\"capabilities\":5}", "{\"capabilities\":{\"max_msg_fds\":-1}}",
		"{\"capabilities\":{\"max_msg_fds\":1.5}}", "[]", "{} x",
		"{\"capabilities\":{\"write_multiple\":1}}", "{\"a\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}",
		"{\"a\":\"\\q\"}", "{\"capabilities\":{},\"capabilities\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(req, 0, sizeof(req));
		strcpy((char *)req + 4, bad[i]);
		EXPECT_EQ(EINVAL, xact(self->fd, VERSION, req, 4 + strlen(bad[i]) + 1,
				       NULL, 0, NULL)) TH_LOG("%s", bad[i]);
	}
	/* No NUL. */
	memcpy(req + 4, "{}", 2);
	EXPECT_EQ(EINVAL, xact(self->fd, VERSION, req, 6, NULL, 0, NULL));
	/* Unknown members and escapes are fine; an empty capability set too. */
	strcpy((char *)req + 4, "{\"x\":[1,{\"y\":null}],\"capabilities\":{\"\\u0078\":true}}");
	ASSERT_EQ(0, xact(self->fd, VERSION, req, 4 + strlen((char *)req + 4) + 1,
			  rep, sizeof(rep), &rlen));
	EXPECT_STREQ("{\"capabilities\":{}}", (char *)rep + 4);
	EXPECT_EQ(0, stop_serving(self));

	/* Another major version: refused, and the session ends. */
	start_serving(_metadata, self);
	memset(req, 0, sizeof(req));
	req[0] = 1;
	EXPECT_EQ(ENOTSUP, xact(self->fd, VERSION, req, 4, NULL, 0, NULL));
	EXPECT_GT(0, stop_serving(self));
}

TEST_F(vfu, device_info)
{
	struct dev_info in = { .argsz = sizeof(in) }, out;
	struct region_info ri, ro;
	struct irq_info ii, io;
	size_t rlen = 0;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	ASSERT_EQ(0, xact(self->fd, GET_INFO, &in, sizeof(in), &out, sizeof(out), &rlen));
	EXPECT_EQ(sizeof(out), rlen);
	EXPECT_EQ(16, out.argsz);
	EXPECT_EQ(0x3, out.flags);	/* RESET | PCI */
	EXPECT_EQ(9, out.num_regions);
	EXPECT_EQ(5, out.num_irqs);
	in.argsz = 8;
	EXPECT_EQ(EINVAL, xact(self->fd, GET_INFO, &in, sizeof(in), NULL, 0, NULL));

	for (uint32_t i = 0; i < 9; i++) {
		memset(&ri, 0, sizeof(ri));
		ri.argsz = sizeof(ri);
		ri.index = i;
		ASSERT_EQ(0, xact(self->fd, GET_REGION_INFO, &ri, sizeof(ri), &ro, sizeof(ro), &rlen));
		EXPECT_EQ(sizeof(ro), rlen);
		EXPECT_EQ(sizeof(ro), ro.argsz);
		EXPECT_EQ(i, ro.index);
		EXPECT_EQ(0, ro.cap_offset);
		if (i == 0) {
			EXPECT_EQ(BAR0_SIZE, ro.size);
			EXPECT_EQ(0x3, ro.flags);	/* read, write, no mmap */
		} else if (i == 7) {
			EXPECT_EQ(4096, ro.size);
			EXPECT_EQ(0x3, ro.flags);
		} else {
			EXPECT_EQ(0, ro.size) TH_LOG("region %u", i);
		}
	}
	ri.index = 9;
	EXPECT_EQ(EINVAL, xact(self->fd, GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, NULL));
	ri.index = 0xffffffff;
	EXPECT_EQ(EINVAL, xact(self->fd, GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, NULL));
	ri.index = 0;
	EXPECT_EQ(EINVAL, xact(self->fd, GET_REGION_INFO, &ri, 16, NULL, 0, NULL));

	static const uint32_t want_count[5] = { 0, 0, NVEC, 1, 1 };
	for (uint32_t i = 0; i < 5; i++) {
		ii = (struct irq_info){ .argsz = sizeof(ii), .index = i };
		ASSERT_EQ(0, xact(self->fd, GET_IRQ_INFO, &ii, sizeof(ii), &io, sizeof(io), &rlen));
		EXPECT_EQ(sizeof(io), rlen);
		EXPECT_EQ(i, io.index);
		EXPECT_EQ(want_count[i], io.count);
		if (i == 2)
			EXPECT_EQ(0x3, io.flags);	/* EVENTFD | MASKABLE, resizable */
	}
	ii.index = 5;
	EXPECT_EQ(EINVAL, xact(self->fd, GET_IRQ_INFO, &ii, sizeof(ii), NULL, 0, NULL));
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, config_space)
{
	uint8_t c[4096];
	unsigned int pos, pcie = 0, msix = 0, n = 0;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	/* QEMU reads the whole space at once. */
	ASSERT_EQ(0, region_read(self->fd, 7, 0, sizeof(c), c));
	EXPECT_EQ(0xfffe, c[0] | c[1] << 8);
	EXPECT_EQ(0x0001, c[2] | c[3] << 8);
	EXPECT_EQ(0, c[4] | c[5] << 8);			/* Command */
	EXPECT_EQ(0x10, (c[6] | c[7] << 8) & 0x10);	/* capability list */
	EXPECT_EQ(1, c[8]);
	EXPECT_EQ(0x120000, c[9] | c[10] << 8 | c[11] << 16);
	EXPECT_EQ(0, c[0x0e]);				/* header type 0 */
	EXPECT_EQ(0xfffe, c[0x2c] | c[0x2d] << 8);
	EXPECT_EQ(0x0001, c[0x2e] | c[0x2f] << 8);
	EXPECT_EQ(0, c[0x3d]);				/* no INTx */
	EXPECT_EQ(0, c[0x100] | c[0x101] << 8 | c[0x102] << 16 | c[0x103] << 24);

	for (pos = c[0x34]; pos && n < 48; pos = c[pos + 1], n++) {
		ASSERT_GE(pos, 0x40);
		ASSERT_EQ(0, pos & 3);
		if (c[pos] == 0x10)
			pcie = pos;
		if (c[pos] == 0x11)
			msix = pos;
	}
	ASSERT_EQ(2, n);
	ASSERT_NE(0, pcie);
	ASSERT_NE(0, msix);
	EXPECT_EQ(0x0002, c[pcie + 2] | c[pcie + 3] << 8);	/* v2, endpoint */
	EXPECT_NE(0, cfg32(self->fd, pcie + 4) & (1u << 28));	/* FLR */
	EXPECT_EQ(NVEC - 1, (c[msix + 2] | c[msix + 3] << 8) & 0x7ff);
	EXPECT_EQ(TABLE_OFF, cfg32(self->fd, msix + 4));	/* BIR 0 */
	EXPECT_EQ(PBA_OFF, cfg32(self->fd, msix + 8));

	/* BAR0 sizing. */
	EXPECT_EQ(0, cfg32(self->fd, 0x10));
	ASSERT_EQ(0, cfg_write(self->fd, 0x10, 4, 0xffffffff));
	EXPECT_EQ(0xffffc000, cfg32(self->fd, 0x10));
	ASSERT_EQ(0, cfg_write(self->fd, 0x10, 4, 0xfebf1234));
	EXPECT_EQ(0xfebf0000, cfg32(self->fd, 0x10));
	/* The other BARs and the ROM do not exist. */
	for (unsigned int off = 0x14; off <= 0x30; off += 4) {
		if (off > 0x24 && off < 0x30)
			continue;
		ASSERT_EQ(0, cfg_write(self->fd, off, 4, 0xffffffff));
		EXPECT_EQ(0, cfg32(self->fd, off)) TH_LOG("0x%x", off);
	}
	/* Read-only IDs stay. */
	ASSERT_EQ(0, cfg_write(self->fd, 0, 4, 0x12345678));
	EXPECT_EQ(0x0001fffe, cfg32(self->fd, 0));
	/* Bus mastering. */
	EXPECT_EQ(0, rbln_vfu_bus_master(self->vfu));
	ASSERT_EQ(0, cfg_write(self->fd, 4, 2, 0x0006));
	EXPECT_EQ(1, rbln_vfu_bus_master(self->vfu));
	EXPECT_EQ(0x0006, cfg32(self->fd, 4) & 0xffff);
	/* Odd sizes and offsets. */
	ASSERT_EQ(0, region_read(self->fd, 7, 3, 5, c));
	EXPECT_EQ(0, memcmp(c, "\x00\x06\x00\x10\x00", 5));
	ASSERT_EQ(0, cfg_write(self->fd, 0x3c, 1, 0xab));
	EXPECT_EQ(0xab, cfg32(self->fd, 0x3c) & 0xff);
	/* MSI-X enable is the guest's to set. */
	ASSERT_EQ(0, cfg_write(self->fd, msix + 2, 2, 0x8000 | 0x7ff));
	EXPECT_EQ(0x8000 | (NVEC - 1), cfg32(self->fd, msix) >> 16);
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, bar0)
{
	uint32_t v = 0x11223344;
	uint8_t b[16];

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	ASSERT_EQ(0, region_write(self->fd, 0, 0x18, 4, &v));
	EXPECT_EQ(1, atomic_load(&self->m.writes));
	EXPECT_EQ(0x11223344, atomic_load(&self->m.regs[0x18 / 4]));
	atomic_store(&self->m.regs[0x1ffc / 4], 0xcafef00d);
	ASSERT_EQ(0, region_read(self->fd, 0, 0x1ffc, 4, &v));
	EXPECT_EQ(0xcafef00d, v);
	EXPECT_EQ(1, atomic_load(&self->m.reads));

	/* Other sizes: all-ones, dropped, no callback. */
	ASSERT_EQ(0, region_read(self->fd, 0, 0x18, 2, b));
	EXPECT_EQ(0xff, b[0]);
	EXPECT_EQ(0xff, b[1]);
	ASSERT_EQ(0, region_read(self->fd, 0, 0x19, 4, b));
	EXPECT_EQ(0xffffffff, b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24);
	ASSERT_EQ(0, region_read(self->fd, 0, 0x18, 8, b));
	ASSERT_EQ(0, region_write(self->fd, 0, 0x18, 2, "\x01\x02"));
	ASSERT_EQ(0, region_write(self->fd, 0, 0x18, 8, "\x01\x02\x03\x04\x05\x06\x07\x08"));
	EXPECT_EQ(1, atomic_load(&self->m.reads));
	EXPECT_EQ(1, atomic_load(&self->m.writes));
	EXPECT_EQ(0x11223344, atomic_load(&self->m.regs[0x18 / 4]));

	/* MSI-X table and PBA: answered here, zeros. */
	ASSERT_EQ(0, region_write(self->fd, 0, TABLE_OFF + 12, 4, "\x00\x00\x00\x00"));
	ASSERT_EQ(0, region_read(self->fd, 0, TABLE_OFF, 16, b));
	for (int i = 0; i < 16; i++)
		EXPECT_EQ(0, b[i]);
	ASSERT_EQ(0, region_read(self->fd, 0, PBA_OFF, 8, b));
	for (int i = 0; i < 8; i++)
		EXPECT_EQ(0, b[i]);
	EXPECT_EQ(1, atomic_load(&self->m.reads));
	EXPECT_EQ(1, atomic_load(&self->m.writes));

	/* Posted writes (no reply) arrive in order before the next read. */
	uint8_t wr[sizeof(struct region_rw) + 4];
	struct region_rw *rq = (struct region_rw *)wr;

	rq->offset = 0x18;
	rq->region = 0;
	rq->count = 4;
	memcpy(rq->data, "\x78\x56\x34\x12", 4);
	ASSERT_LT(0, send_msg(self->fd, REGION_WRITE, F_NO_REPLY, wr, sizeof(wr), NULL, 0));
	ASSERT_EQ(0, region_read(self->fd, 0, 0x18, 4, &v));
	EXPECT_EQ(0x12345678, v);

	/* WRITE_MULTI. */
	struct {
		uint64_t n;
		struct { uint64_t off; uint32_t region, count; uint8_t data[8]; } w[2];
	} multi = { 2, { { 0x20, 0, 4, { 1, 0, 0, 0 } }, { 0x24, 0, 4, { 2, 0, 0, 0 } } } };
	uint64_t done = 0;
	size_t rlen = 0;

	ASSERT_EQ(0, xact(self->fd, REGION_WRITE_MULTI, &multi, sizeof(multi), &done,
			  sizeof(done), &rlen));
	EXPECT_EQ(8, rlen);
	EXPECT_EQ(2, done);
	EXPECT_EQ(1, atomic_load(&self->m.regs[0x20 / 4]));
	EXPECT_EQ(2, atomic_load(&self->m.regs[0x24 / 4]));
	multi.n = 3;		/* more than it carries */
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE_MULTI, &multi, sizeof(multi), NULL, 0, NULL));
	multi.n = 2;
	multi.w[1].off = BAR0_SIZE;	/* one bad write: none done */
	atomic_store(&self->m.regs[0x20 / 4], 0);
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE_MULTI, &multi, sizeof(multi), NULL, 0, NULL));
	EXPECT_EQ(0, atomic_load(&self->m.regs[0x20 / 4]));
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, msix)
{
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int efd2 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int pipefd[2];
	uint8_t pba[8], bools[NVEC] = { 0 };

	ASSERT_LE(0, efd);
	ASSERT_LE(0, efd2);
	ASSERT_EQ(0, pipe2(pipefd, O_CLOEXEC));
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));

	/* Vector 2 gets an eventfd; the device raising it signals it. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 2, 1,
			      NULL, 0, &efd, 1));
	EXPECT_FALSE(readable(efd));
	rbln_vfu_irq(self->vfu, 2);
	EXPECT_TRUE(readable(efd));
	EXPECT_EQ(1, eventfd_take(efd));
	rbln_vfu_irq(self->vfu, 1);	/* no eventfd: lost */
	rbln_vfu_irq(self->vfu, NVEC);	/* no such vector */
	rbln_vfu_irq(self->vfu, ~0u);
	EXPECT_FALSE(readable(efd));

	/* Masked: pending in the PBA, delivered on unmask. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_MASK, 2, 2, 1, NULL, 0, NULL, 0));
	rbln_vfu_irq(self->vfu, 2);
	EXPECT_FALSE(readable(efd));
	ASSERT_EQ(0, region_read(self->fd, 0, PBA_OFF, 8, pba));
	EXPECT_EQ(0x04, pba[0]);
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_UNMASK, 2, 2, 1, NULL, 0, NULL, 0));
	EXPECT_EQ(1, eventfd_take(efd));
	ASSERT_EQ(0, region_read(self->fd, 0, PBA_OFF, 8, pba));
	EXPECT_EQ(0, pba[0]);

	/* Client-side triggers, all and by booleans. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 2, 2, 1, NULL, 0, NULL, 0));
	EXPECT_EQ(1, eventfd_take(efd));
	bools[0] = 1;		/* vector 2 in a range starting at 2 */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_BOOL | IRQ_ACTION_TRIGGER, 2, 2, 3, bools, 3, NULL, 0));
	EXPECT_EQ(1, eventfd_take(efd));
	bools[0] = 0;
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_BOOL | IRQ_ACTION_TRIGGER, 2, 2, 3, bools, 3, NULL, 0));
	EXPECT_FALSE(readable(efd));

	/* Replacing the eventfd, then de-assigning with none. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 2, 1,
			      NULL, 0, &efd2, 1));
	rbln_vfu_irq(self->vfu, 2);
	EXPECT_FALSE(readable(efd));
	EXPECT_EQ(1, eventfd_take(efd2));
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 2, 1,
			      NULL, 0, NULL, 0));
	rbln_vfu_irq(self->vfu, 2);
	EXPECT_FALSE(readable(efd2));

	/* All five at once, then the index disabled (count 0). */
	int five[NVEC] = { efd, efd, efd, efd, efd };
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0, NVEC,
			      NULL, 0, five, NVEC));
	for (unsigned int i = 0; i < NVEC; i++)
		rbln_vfu_irq(self->vfu, i);
	EXPECT_EQ(NVEC, eventfd_take(efd));
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 2, 0, 0, NULL, 0, NULL, 0));
	rbln_vfu_irq(self->vfu, 0);
	EXPECT_FALSE(readable(efd));

	/* ERR and REQ take an eventfd; INTx and MSI have nothing. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 3, 0, 1,
			      NULL, 0, &efd, 1));
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 4, 0, 1,
			      NULL, 0, &efd, 1));
	EXPECT_EQ(0, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 0, 0, 0, NULL, 0, NULL, 0));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 0, 0, 1, NULL, 0, NULL, 0));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_MASK, 3, 0, 1, NULL, 0, NULL, 0));

	/* Refusals. */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 4, 2,
				   NULL, 0, five, 2));	/* past the last vector */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0xffffffff, 2,
				   NULL, 0, NULL, 0));	/* start + count wraps */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0, 3,
				   NULL, 0, five, 2));	/* fds != count */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0, 1,
				   NULL, 0, &pipefd[1], 1));	/* not an eventfd */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_MASK, 2, 0, 1,
				   NULL, 0, &efd, 1));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_DATA_BOOL | IRQ_ACTION_TRIGGER,
				   2, 0, 1, bools, 1, NULL, 0));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER | IRQ_ACTION_MASK,
				   2, 0, 1, NULL, 0, NULL, 0));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER | 0x40,
				   2, 0, 1, NULL, 0, NULL, 0));
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_BOOL | IRQ_ACTION_TRIGGER, 2, 0, 5,
				   bools, 2, NULL, 0));	/* fewer booleans than count */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 5, 0, 1,
				   NULL, 0, NULL, 0));	/* no such index */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, 2, 0, 1,
				   NULL, 0, &efd, 1));	/* fds without DATA_EVENTFD */
	EXPECT_EQ(EINVAL, xact(self->fd, SET_IRQS, "\x14\0\0\0", 4, NULL, 0, NULL));

	/* Still healthy. */
	ASSERT_EQ(0, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 4, 1,
			      NULL, 0, &efd, 1));
	rbln_vfu_irq(self->vfu, 4);
	EXPECT_EQ(1, eventfd_take(efd));

	/* A disconnect closes the server's copies. */
	int nfds = count_fds();
	EXPECT_EQ(0, stop_serving(self));
	/* Both ends of the socket, and vector 4, ERR and REQ eventfds. */
	EXPECT_EQ(nfds - 5, count_fds());
	rbln_vfu_irq(self->vfu, 4);
	EXPECT_FALSE(readable(efd));
	close(efd);
	close(efd2);
	close(pipefd[0]);
	close(pipefd[1]);
}

static int make_memfd(size_t size, uint8_t fill)
{
	int fd = memfd_create("guest-ram", MFD_CLOEXEC);
	uint8_t *p;

	if (fd < 0 || ftruncate(fd, (off_t)size))
		return -1;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	for (size_t i = 0; i < size; i++)
		p[i] = (uint8_t)(fill + i);
	munmap(p, size);
	return fd;
}

#define RW	0x3
#define RO	0x1

TEST_F(vfu, dma)
{
	int mfd = make_memfd(1 << 20, 0);
	uint8_t *p, *q, *guest;
	size_t len;

	ASSERT_LE(0, mfd);
	guest = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, guest);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));

	/* 64 KiB of the memfd at iova 1 MiB. */
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 0x10000, 0, RW, mfd));
	p = rbln_vfu_dma_ptr(self->vfu, 0x100008, 8, RBLN_VFU_DMA_READ | RBLN_VFU_DMA_WRITE);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(8, p[0]);
	EXPECT_EQ(15, p[7]);
	p[0] = 0xee;		/* the device writes, the guest sees it */
	EXPECT_EQ(0xee, guest[8]);
	guest[9] = 0x77;
	EXPECT_EQ(0x77, p[1]);
	EXPECT_NE(NULL, rbln_vfu_dma_ptr(self->vfu, 0x10ffff, 1, RBLN_VFU_DMA_READ));
	EXPECT_NE(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100000, 0x10000, RBLN_VFU_DMA_READ));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x10ffff, 2, RBLN_VFU_DMA_READ));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0xfffff, 1, RBLN_VFU_DMA_READ));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, ~0ull, 2, RBLN_VFU_DMA_READ));

	/* Read-only, at an offset that is not page aligned. */
	ASSERT_EQ(0, dma_map(self->fd, 0x110000, 0x1000, 0x20800, RO, mfd));
	q = rbln_vfu_dma_ptr(self->vfu, 0x110000, 4, RBLN_VFU_DMA_READ);
	ASSERT_NE(NULL, q);
	EXPECT_EQ(0, memcmp(q, guest + 0x20800, 4));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x110000, 4, RBLN_VFU_DMA_WRITE));

	/* Adjacent mappings: one pointer per mapping. */
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x10fff0, 0x20, RBLN_VFU_DMA_READ));
	len = 0x20;
	EXPECT_EQ(p - 8 + 0xfff0, (uint8_t *)rbln_vfu_dma_span(self->vfu, 0x10fff0, &len,
							       RBLN_VFU_DMA_READ));
	EXPECT_EQ(0x10, len);
	len = 0x2000;
	EXPECT_EQ(q, rbln_vfu_dma_span(self->vfu, 0x110000, &len, RBLN_VFU_DMA_READ));
	EXPECT_EQ(0x1000, len);
	len = 7;
	EXPECT_EQ(NULL, rbln_vfu_dma_span(self->vfu, 0x111000, &len, RBLN_VFU_DMA_READ));
	EXPECT_EQ(7, len);

	/* Overlaps and bad maps are refused. */
	EXPECT_EQ(EEXIST, dma_map(self->fd, 0x100000, 0x1000, 0, RW, mfd));
	EXPECT_EQ(EEXIST, dma_map(self->fd, 0xff000, 0x2000, 0, RW, mfd));
	EXPECT_EQ(EEXIST, dma_map(self->fd, 0x110fff, 0x1000, 0, RW, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0, 0, RW, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, ~0ull - 0xfff, 0x2000, 0, RW, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0x1000, 0, 0, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0x1000, 0, RW | 4, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0x2000, (1 << 20) - 0x1000, RW, mfd));
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0x1000, ~0ull - 0xfff, RW, mfd));
	int efd = eventfd(0, EFD_CLOEXEC);
	EXPECT_EQ(EINVAL, dma_map(self->fd, 0x200000, 0x1000, 0, RW, efd));
	close(efd);
	int two[2] = { mfd, mfd };
	struct dma_map m2 = { sizeof(m2), RW, 0, 0x200000, 0x1000 };
	EXPECT_EQ(EINVAL, xact_fds(self->fd, DMA_MAP, &m2, sizeof(m2), two, 2, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, DMA_MAP, &m2, 24, NULL, 0, NULL));

	/* A read-only fd: readable mappings only. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", mfd);
	int rofd = open(proc, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, rofd);
	EXPECT_EQ(EACCES, dma_map(self->fd, 0x200000, 0x1000, 0, RW, rofd));
	ASSERT_EQ(0, dma_map(self->fd, 0x200000, 0x1000, 0x3000, RO, rofd));
	EXPECT_EQ(0, memcmp(rbln_vfu_dma_ptr(self->vfu, 0x200000, 16, RBLN_VFU_DMA_READ),
			    guest + 0x3000, 16));
	ASSERT_EQ(0, dma_unmap(self->fd, 0x200000, 0x1000, 0));
	EXPECT_EQ(1, atomic_load(&self->m.quiesces));
	atomic_store(&self->m.quiesces, 0);
	close(rofd);

	/* Without an fd: in the table, but nothing to point at. */
	ASSERT_EQ(0, dma_map(self->fd, 0x300000, 0x1000, 0, RW, -1));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x300000, 1, RBLN_VFU_DMA_READ));
	EXPECT_EQ(EEXIST, dma_map(self->fd, 0x300000, 0x1000, 0, RW, mfd));

	/* Unmapping: out of the table before quiesce, mapped until after. */
	p[0] = 0x5a;
	self->m.probe_iova = 0x100000;
	self->m.probe_ptr = p;
	ASSERT_EQ(0, dma_unmap(self->fd, 0x100000, 0x10000, 0));
	EXPECT_EQ(1, atomic_load(&self->m.quiesces));
	EXPECT_TRUE(atomic_load(&self->m.probe_gone));
	EXPECT_TRUE(atomic_load(&self->m.probe_readable));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100008, 1, RBLN_VFU_DMA_READ));
	EXPECT_NE(NULL, rbln_vfu_dma_ptr(self->vfu, 0x110000, 1, RBLN_VFU_DMA_READ));

	/* A range straddling a mapping is refused whole; an empty one is not. */
	EXPECT_EQ(EINVAL, dma_unmap(self->fd, 0x110800, 0x1000, 0));
	EXPECT_EQ(EINVAL, dma_unmap(self->fd, 0x10f000, 0x1800, 0));
	EXPECT_EQ(EINVAL, dma_unmap(self->fd, 0x110000, 0, 0));
	EXPECT_EQ(EINVAL, dma_unmap(self->fd, 0x110000, 0x1000, 1));	/* dirty bitmap */
	EXPECT_EQ(EINVAL, dma_unmap(self->fd, 0x110000, 0x1000, 2));	/* ALL with a range */
	EXPECT_NE(NULL, rbln_vfu_dma_ptr(self->vfu, 0x110000, 1, RBLN_VFU_DMA_READ));
	EXPECT_EQ(0, dma_unmap(self->fd, 0x500000, 0x1000, 0));
	EXPECT_EQ(1, atomic_load(&self->m.quiesces));

	/* A range covering several mappings takes them all. */
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 0x1000, 0, RW, mfd));
	ASSERT_EQ(0, dma_unmap(self->fd, 0, 0x400000, 0));
	EXPECT_EQ(2, atomic_load(&self->m.quiesces));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x110000, 1, RBLN_VFU_DMA_READ));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100000, 1, RBLN_VFU_DMA_READ));
	ASSERT_EQ(0, dma_map(self->fd, 0x300000, 0x1000, 0, RW, mfd));	/* freed */

	/* Unmap all. */
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 0x1000, 0, RW, mfd));
	ASSERT_EQ(0, dma_unmap(self->fd, 0, 0, 2));
	EXPECT_EQ(3, atomic_load(&self->m.quiesces));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100000, 1, RBLN_VFU_DMA_READ));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x300000, 1, RBLN_VFU_DMA_READ));

	/* A disconnect unmaps what is left; the server keeps no fd. */
	int nfds = count_fds();
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 0x1000, 0, RW, mfd));
	EXPECT_EQ(nfds, count_fds());
	EXPECT_EQ(0, stop_serving(self));
	EXPECT_EQ(4, atomic_load(&self->m.quiesces));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100000, 1, RBLN_VFU_DMA_READ));

	/* And a new client starts afresh. */
	start_serving(_metadata, self);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 0x1000, 0, RW, mfd));
	p = rbln_vfu_dma_ptr(self->vfu, 0x100000, 1, RBLN_VFU_DMA_READ);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(guest[0], p[0]);
	munmap(guest, 1 << 20);
	close(mfd);
}

/* A vIOMMU guest maps page by page: many maps, lookups stay right. */
TEST_F(vfu, dma_many_pages)
{
	const unsigned int pages = 4096;
	int mfd = make_memfd((size_t)pages * 4096, 0);
	unsigned int bad = 0;

	ASSERT_LE(0, mfd);
	uint32_t *ram = mmap(NULL, (size_t)pages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, ram);
	for (unsigned int i = 0; i < pages; i++)
		ram[i * 1024 + 2] = 0xa0000000 | i;	/* file page i, at byte 8 */
	munmap(ram, (size_t)pages * 4096);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	int maps = count_maps();
	/* Reversed and interleaved, so the table must sort. */
	for (unsigned int k = 0; k < 2; k++)
		for (unsigned int i = pages; i-- > 0;)
			if (i % 2 == k)
				ASSERT_EQ(0, dma_map(self->fd, 0x40000000ull + (uint64_t)i * 4096,
						     4096, (uint64_t)(pages - 1 - i) * 4096, RW, mfd));
	for (unsigned int i = 0; i < pages; i++) {
		uint32_t *p = rbln_vfu_dma_ptr(self->vfu, 0x40000000ull + (uint64_t)i * 4096 + 8,
					       4, RBLN_VFU_DMA_WRITE);

		if (!p || *p != (0xa0000000 | (pages - 1 - i)))
			bad++;
	}
	EXPECT_EQ(0, bad);
	/* One mmap of the file for them all, not one each (allocators add some). */
	EXPECT_GE(maps + 64, count_maps());
	/* One unmap for the lower half of them. */
	ASSERT_EQ(0, dma_unmap(self->fd, 0x40000000ull, (uint64_t)pages * 2048, 0));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x40000000ull, 1, RBLN_VFU_DMA_READ));
	EXPECT_NE(NULL, rbln_vfu_dma_ptr(self->vfu, 0x40000000ull + (uint64_t)pages * 2048, 1,
					 RBLN_VFU_DMA_READ));
	EXPECT_EQ(0, stop_serving(self));
	close(mfd);
}

TEST_F(vfu, dma_limit)
{
	int mfd = make_memfd(4096, 0);
	unsigned int i;
	uint8_t req[sizeof(qemu_caps) + 32] = { 0 };
	const char *caps = "{\"capabilities\":{\"max_dma_maps\":100}}";
	char rep[256];
	size_t rlen = 0;

	ASSERT_LE(0, mfd);
	strcpy((char *)req + 4, caps);
	ASSERT_EQ(0, xact(self->fd, VERSION, req, 4 + strlen(caps) + 1, rep, sizeof(rep), &rlen));
	EXPECT_STREQ("{\"capabilities\":{\"max_dma_maps\":100}}", rep + 4);
	for (i = 0; i < 100; i++)
		ASSERT_EQ(0, dma_map(self->fd, (uint64_t)i << 12, 4096, 0, RW, mfd));
	EXPECT_EQ(ENOSPC, dma_map(self->fd, (uint64_t)i << 12, 4096, 0, RW, mfd));
	ASSERT_EQ(0, dma_unmap(self->fd, 0, 4096, 0));
	EXPECT_EQ(0, dma_map(self->fd, (uint64_t)i << 12, 4096, 0, RW, mfd));
	EXPECT_EQ(0, stop_serving(self));
	close(mfd);
}

struct dev_thread {
	struct model *m;
	struct rbln_vfu *vfu;
	atomic_int stop;
	atomic_ulong hits, misses, wrong;
};

static void *device_main(void *arg)
{
	struct dev_thread *d = arg;
	unsigned long hits = 0, misses = 0, wrong = 0;

	while (!atomic_load(&d->stop)) {
		pthread_rwlock_rdlock(&d->m->access);
		for (uint64_t iova = 0x100000; iova < 0x100000 + 64 * 4096; iova += 4096) {
			volatile uint8_t *p = rbln_vfu_dma_ptr(d->vfu, iova + 100, 4,
							       RBLN_VFU_DMA_READ);
			if (!p) {
				misses++;
				continue;
			}
			if (p[0] != (uint8_t)(100 + (iova - 0x100000)))
				wrong++;
			hits++;
		}
		pthread_rwlock_unlock(&d->m->access);
	}
	atomic_fetch_add(&d->hits, hits);
	atomic_fetch_add(&d->misses, misses);
	atomic_fetch_add(&d->wrong, wrong);
	return NULL;
}

/* Device threads look up while the client maps and unmaps. */
TEST_F(vfu, dma_concurrent)
{
	int mfd = make_memfd(64 * 4096, 0);
	struct dev_thread d = { .m = &self->m, .vfu = self->vfu };
	pthread_t t[3];

	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, device_main, &d));
	for (int round = 0; round < 200; round++) {
		for (uint64_t pg = 0; pg < 64; pg++)
			ASSERT_EQ(0, dma_map(self->fd, 0x100000 + pg * 4096, 4096, pg * 4096,
					     RO, mfd));
		if (round % 2) {
			ASSERT_EQ(0, dma_unmap(self->fd, 0x100000, 64 * 4096, 0));
		} else {
			for (uint64_t pg = 0; pg < 64; pg++)
				ASSERT_EQ(0, dma_unmap(self->fd, 0x100000 + pg * 4096, 4096, 0));
		}
	}
	atomic_store(&d.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	TH_LOG("%lu hits, %lu misses", atomic_load(&d.hits), atomic_load(&d.misses));
	EXPECT_NE(0, atomic_load(&d.hits));
	EXPECT_EQ(0, atomic_load(&d.wrong));
	EXPECT_EQ(0, stop_serving(self));
	close(mfd);
}

TEST_F(vfu, reset_and_flr)
{
	uint32_t devctl;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	atomic_store(&self->m.regs[0x18 / 4], 7);
	ASSERT_EQ(0, cfg_write(self->fd, 0x10, 4, 0xfebf0000));
	ASSERT_EQ(0, cfg_write(self->fd, 0x04, 2, 0x0006));
	ASSERT_EQ(0, xact(self->fd, DEVICE_RESET, NULL, 0, NULL, 0, NULL));
	EXPECT_EQ(1, atomic_load(&self->m.resets));
	EXPECT_EQ(0, atomic_load(&self->m.regs[0x18 / 4]));
	EXPECT_EQ(0, cfg32(self->fd, 0x10));
	EXPECT_EQ(0, cfg32(self->fd, 0x04) & 0xffff);
	EXPECT_EQ(0, rbln_vfu_bus_master(self->vfu));

	/* Initiate FLR in Device Control (PCIe capability at 0x40). */
	ASSERT_EQ(0x10, cfg32(self->fd, 0x40) & 0xff);
	ASSERT_EQ(0, cfg_write(self->fd, 0x10, 4, 0xfebf0000));
	devctl = cfg32(self->fd, 0x48) & 0xffff;
	EXPECT_EQ(0, devctl & 0x8000);
	ASSERT_EQ(0, cfg_write(self->fd, 0x48, 2, devctl));	/* no FLR bit */
	EXPECT_EQ(1, atomic_load(&self->m.resets));
	ASSERT_EQ(0, cfg_write(self->fd, 0x48, 2, devctl | 0x8000));
	EXPECT_EQ(2, atomic_load(&self->m.resets));
	EXPECT_EQ(devctl, cfg32(self->fd, 0x48) & 0xffff);	/* reads 0 */
	EXPECT_EQ(0, cfg32(self->fd, 0x10));
	/* As a byte write of the high half, and inside a dword write. */
	ASSERT_EQ(0, cfg_write(self->fd, 0x49, 1, 0x80));
	EXPECT_EQ(3, atomic_load(&self->m.resets));
	ASSERT_EQ(0, cfg_write(self->fd, 0x48, 4, 0x8000 | devctl));
	EXPECT_EQ(4, atomic_load(&self->m.resets));
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, rejections)
{
	uint8_t buf[64] = { 0 }, b[8] = { 0 };
	struct hdr h;
	int id;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));

	/* Unknown and unsupported commands. */
	EXPECT_EQ(ENOSYS, xact(self->fd, 99, buf, 8, NULL, 0, NULL));
	EXPECT_EQ(ENOSYS, xact(self->fd, 0, NULL, 0, NULL, 0, NULL));
	EXPECT_EQ(ENOSYS, xact(self->fd, 0xffff, NULL, 0, NULL, 0, NULL));
	EXPECT_EQ(ENOTSUP, xact(self->fd, GET_REGION_IO_FDS, buf, 16, NULL, 0, NULL));
	EXPECT_EQ(ENOTSUP, xact(self->fd, DMA_READ, buf, 16, NULL, 0, NULL));

	/* Truncated payloads. */
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_READ, buf, 8, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_READ, buf, 17, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE, buf, 12, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, GET_REGION_INFO, buf, 8, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, GET_IRQ_INFO, buf, 4, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, DMA_UNMAP, buf, 20, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, GET_INFO, NULL, 0, NULL, 0, NULL));
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE_MULTI, buf, 4, NULL, 0, NULL));

	/* A write whose count disagrees with the data it carries. */
	struct region_rw *rq = (struct region_rw *)buf;
	rq->offset = 0x18;
	rq->region = 0;
	rq->count = 8;
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE, buf, sizeof(*rq) + 4, NULL, 0, NULL));
	rq->count = 0xfffffff0;
	EXPECT_EQ(EINVAL, xact(self->fd, REGION_WRITE, buf, sizeof(*rq) + 4, NULL, 0, NULL));
	EXPECT_EQ(0, atomic_load(&self->m.writes));

	/* Bad regions, offsets and sizes. */
	EXPECT_EQ(EINVAL, region_read(self->fd, 9, 0, 4, b));
	EXPECT_EQ(EINVAL, region_read(self->fd, 0xffffffff, 0, 4, b));
	EXPECT_EQ(EINVAL, region_read(self->fd, 1, 0, 4, b));	/* size 0 */
	EXPECT_EQ(EINVAL, region_read(self->fd, 0, BAR0_SIZE - 2, 4, b));
	EXPECT_EQ(EINVAL, region_read(self->fd, 0, BAR0_SIZE, 4, b));
	EXPECT_EQ(EINVAL, region_read(self->fd, 0, ~0ull - 1, 4, b));
	EXPECT_EQ(EINVAL, region_read(self->fd, 7, 4094, 4, b));
	EXPECT_EQ(E2BIG, region_read(self->fd, 0, 0, 2u << 20, b));
	EXPECT_EQ(E2BIG, region_read(self->fd, 0, 0, 0xffffffff, b));
	EXPECT_EQ(EINVAL, region_write(self->fd, 0, BAR0_SIZE - 2, 4, b));
	EXPECT_EQ(EINVAL, region_write(self->fd, 8, 0, 4, b));
	EXPECT_EQ(0, region_read(self->fd, 0, BAR0_SIZE, 0, b));	/* empty, at the end */
	EXPECT_EQ(0, atomic_load(&self->m.reads));

	/* fds on a command that takes none: refused, closed. */
	int efd = eventfd(0, EFD_CLOEXEC), nfds = count_fds();
	struct dev_info di = { .argsz = sizeof(di) };
	EXPECT_EQ(EINVAL, xact_fds(self->fd, GET_INFO, &di, sizeof(di), &efd, 1, NULL, 0, NULL));
	/* More fds than the server takes in one message. */
	int many[20];
	for (int i = 0; i < 20; i++)
		many[i] = efd;
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0, 5,
				   NULL, 0, many, 20));
	/* A refused DMA_MAP and SET_IRQS keep none either. */
	EXPECT_EQ(EINVAL, set_irqs(self->fd, IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, 2, 0, 3,
				   NULL, 0, many, 2));
	struct dma_map dm = { sizeof(dm), 0x3, 0, 0x1000, 0x1000 };
	EXPECT_EQ(EINVAL, xact_fds(self->fd, DMA_MAP, &dm, sizeof(dm), many, 1, NULL, 0, NULL));
	EXPECT_EQ(nfds, count_fds());
	close(efd);

	/* A message larger than any the server takes: drained, refused. */
	size_t big = 3u << 20;
	uint8_t *huge = calloc(1, big);
	ASSERT_NE(NULL, huge);
	EXPECT_EQ(E2BIG, xact(self->fd, REGION_WRITE, huge, big, NULL, 0, NULL));
	free(huge);

	/* A message of the reply type is not answered. */
	ASSERT_LT(0, send_msg(self->fd, GET_INFO, F_REPLY, &di, sizeof(di), NULL, 0));
	/* A no-reply command that fails is not answered either. */
	ASSERT_LT(0, send_msg(self->fd, REGION_READ, F_NO_REPLY, buf, 3, NULL, 0));
	/* Neither was answered: the next reply is this command's own. */
	EXPECT_EQ(EINVAL, xact(self->fd, GET_INFO, &di, 0, NULL, 0, NULL));
	/* Other type values are errors. */
	id = send_msg(self->fd, GET_INFO, 0x7, &di, sizeof(di), NULL, 0);
	ASSERT_LT(0, id);
	ASSERT_EQ(0, recv_reply(self->fd, &h, buf, sizeof(buf)));
	EXPECT_EQ(id, h.id);
	EXPECT_EQ(F_REPLY | F_ERROR, h.flags);
	EXPECT_EQ(EINVAL, h.error);

	/* Still serving. */
	uint32_t v = 0;
	EXPECT_EQ(0, region_read(self->fd, 7, 0, 4, &v));
	EXPECT_EQ(0x0001fffe, v);

	/* A header shorter than itself ends the session, not the server. */
	ASSERT_LT(0, send_raw(self->fd, GET_INFO, 8, 0, NULL, 0, NULL, 0));
	EXPECT_EQ(-EPROTO, stop_serving(self));

	/* The listener is still there. */
	start_serving(_metadata, self);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
}

TEST_F(vfu, truncated_stream)
{
	uint8_t part[10] = { 0 };

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	/* Half a header, then the client goes away: a disconnect. */
	ASSERT_EQ(10, write(self->fd, part, sizeof(part)));
	EXPECT_EQ(0, stop_serving(self));

	/* A header promising more than comes. */
	start_serving(_metadata, self);
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	ASSERT_LT(0, send_raw(self->fd, REGION_WRITE, 1000, 0, part, sizeof(part), NULL, 0));
	EXPECT_EQ(0, stop_serving(self));
}

TEST_F(vfu, stop)
{
	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	rbln_vfu_stop(self->vfu);
	pthread_join(self->st.tid, NULL);
	EXPECT_EQ(1, self->st.ret);
	/* And the next serve() does not wait for a client. */
	EXPECT_EQ(1, rbln_vfu_serve(self->vfu));
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, pthread_create(&self->st.tid, NULL, serve_main, &self->st));
}

/*
 * What a stopped server leaves in the client's socket: the number of
 * replies before the end, and how the stream ended: 0 for EOF, else the
 * errno of the read (ECONNRESET: the server closed with requests unread).
 */
static int read_to_end(int fd, int *replies)
{
	struct hdr h;
	static uint8_t buf[1 << 21];

	*replies = 0;
	for (;;) {
		ssize_t r = read(fd, &h, sizeof(h));

		if (r == 0)
			return 0;
		if (r < 0)
			return errno;
		if (r != sizeof(h) || h.size < sizeof(h) ||
		    (h.size > sizeof(h) && read_full(fd, buf, h.size - sizeof(h))))
			return -1;
		++*replies;
	}
}

/* Blocks the serve thread in a BAR0 write, then piles up requests behind it. */
static void hold_server(struct __test_metadata *_metadata, FIXTURE_DATA(vfu) *self,
			int pending)
{
	uint8_t rw[sizeof(struct region_rw) + 4] = { 0 };
	struct region_rw *w = (struct region_rw *)rw;
	struct region_rw r = { .offset = 0, .region = 7, .count = 4 };

	w->offset = GATE_OFF;
	w->region = 0;
	w->count = 4;
	ASSERT_LT(0, send_msg(self->fd, REGION_WRITE, 0, rw, sizeof(rw), NULL, 0));
	while (!atomic_load(&self->m.gate_held))
		usleep(1000);
	for (int i = 0; i < pending; i++)
		ASSERT_LT(0, send_msg(self->fd, REGION_READ, 0, &r, sizeof(r), NULL, 0));
}

/*
 * rbln_vfu_stop() with a client that still has requests in flight, as QEMU
 * has when the device model is killed under a busy guest: the client gets
 * the reply to the command the server was in and then EOF, never a reset
 * (QEMU aborts on ECONNRESET); no request after it is answered, and DMA
 * mappings are gone when serve() returns.
 */
TEST_F(vfu, stop_is_graceful)
{
	int mem = make_memfd(1 << 16, 0x5a), replies = -1;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	ASSERT_LE(0, mem);
	ASSERT_EQ(0, dma_map(self->fd, 0x100000, 1 << 16, 0, 3, mem));
	hold_server(_metadata, self, 64);

	rbln_vfu_stop(self->vfu);
	atomic_store(&self->m.gate_open, 1);
	EXPECT_EQ(0, read_to_end(self->fd, &replies));
	EXPECT_EQ(1, replies);		/* the held write's, nothing after it */
	/* The server reads on: more requests are dropped, not refused. */
	EXPECT_LT(0, send_msg(self->fd, GET_INFO, 0, NULL, 0, NULL, 0));
	close(self->fd);
	self->fd = -1;
	pthread_join(self->st.tid, NULL);
	EXPECT_EQ(1, self->st.ret);
	EXPECT_NE(0, atomic_load(&self->m.quiesces));
	EXPECT_EQ(NULL, rbln_vfu_dma_ptr(self->vfu, 0x100000, 1, RBLN_VFU_DMA_READ));
	close(mem);

	/* The listener takes the next client. */
	ASSERT_EQ(0, pthread_create(&self->st.tid, NULL, serve_main, &self->st));
	self->fd = connect_to(self->path);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(1, stop_serving(self));	/* stop_fd stays signalled */
}

struct flood {
	int fd;
	long sent;
	int err;
};

/* Sends requests without reading a reply until a send fails. */
static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct region_rw r = { .offset = 0, .region = 7, .count = 4 };

	while (send_msg(f->fd, REGION_READ, 0, &r, sizeof(r), NULL, 0) >= 0)
		f->sent++;
	f->err = errno;
	return NULL;
}

/*
 * A client that keeps its end open after the EOF (QEMU does) and keeps
 * sending: the server drains for a while, then stops receiving and
 * returns; the client still sees EOF, and its sends fail with EPIPE from
 * then on rather than a reset.
 */
TEST_F(vfu, stop_with_client_staying)
{
	struct flood f = { .fd = self->fd };
	pthread_t tid;
	int replies = -1;

	ASSERT_EQ(0, negotiate(self->fd, NULL, 0, NULL));
	hold_server(_metadata, self, 16);
	rbln_vfu_stop(self->vfu);
	ASSERT_EQ(0, pthread_create(&tid, NULL, flood_main, &f));
	atomic_store(&self->m.gate_open, 1);
	EXPECT_EQ(0, read_to_end(self->fd, &replies));
	EXPECT_EQ(1, replies);
	pthread_join(self->st.tid, NULL);	/* the drain's deadline */
	EXPECT_EQ(1, self->st.ret);
	pthread_join(tid, NULL);
	EXPECT_EQ(EPIPE, f.err);
	EXPECT_LT(0, f.sent);
	EXPECT_EQ(0, read_to_end(self->fd, &replies));
	EXPECT_EQ(0, replies);
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, pthread_create(&self->st.tid, NULL, serve_main, &self->st));
}

TEST(listen_refuses)
{
	struct rbln_vfu_config c = model_cfg;
	char dir[] = "/tmp/rbln-vfu-test.XXXXXX", path[128];
	struct rbln_vfu *v, *v2;
	int fd;

	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	c.bar0_size = 0x5000;
	EXPECT_EQ(NULL, rbln_vfu_listen(path, &c, &model_ops, NULL));
	c = model_cfg;
	c.msix_vectors = 0;
	EXPECT_EQ(NULL, rbln_vfu_listen(path, &c, &model_ops, NULL));
	c = model_cfg;
	c.msix_pba_off = TABLE_OFF + 0x10;	/* inside the table */
	EXPECT_EQ(NULL, rbln_vfu_listen(path, &c, &model_ops, NULL));
	c = model_cfg;
	c.msix_table_off = BAR0_SIZE - 0x10;	/* past the end */
	EXPECT_EQ(NULL, rbln_vfu_listen(path, &c, &model_ops, NULL));
	EXPECT_EQ(EINVAL, errno);

	/* A regular file in the way is not replaced; a stale socket is. */
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(NULL, rbln_vfu_listen(path, &model_cfg, &model_ops, NULL));
	EXPECT_EQ(EEXIST, errno);
	unlink(path);
	v = rbln_vfu_listen(path, &model_cfg, &model_ops, NULL);
	ASSERT_NE(NULL, v);
	/* Its socket file, as a crashed model would leave it behind. */
	v2 = rbln_vfu_listen(path, &model_cfg, &model_ops, NULL);
	EXPECT_NE(NULL, v2);
	rbln_vfu_destroy(v2);
	rbln_vfu_destroy(v);
	EXPECT_EQ(0, rmdir(dir));
}

TEST_HARNESS_MAIN
