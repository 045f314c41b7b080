// SPDX-License-Identifier: MIT
/*
 * rbln_comm_peer.c - collectives NPU to NPU, through peer imports
 *
 * When every rank reaches every other rank's tensors on its own device,
 * a collective needs no host copy: rank r folds segment r of everyone's
 * input with EW_BINARY reading the others' memory as peer objects, in
 * rank order ((in0 op in1) op in2 ..., the staged path's order, so the
 * same bits), and then copies every other rank's folded segment from its
 * output (DMA_COPY from a peer object). All-gather, broadcast and
 * send/recv are copies. Every rank writes only its own memory and reads
 * the others'; between the phases the ranks meet, each once its own
 * device has finished its jobs of the phase, and the meeting tells every
 * rank whether any failed. The last meeting is after every read of every
 * rank's memory, so a collective returns with its work done.
 *
 * Two kinds of communicator run this core:
 *
 * - In process (rbln_comm_init_all()): one communicator per member of a
 *   logical device, each called from its own thread. A rank's tensor is
 *   its member's shard of a tensor on the logical device. The threads
 *   meet in a shared object (mutex and condition variable, a bounded wait:
 *   a thread that does not come within RBLN_COMM_TIMEOUT_MS fails every
 *   thread's collective, and the communicators for good). Peer
 *   objects come from rbln_peer_get(), as a sharded op's do.
 *
 * - MPI ranks on one host (rbln_comm_init() when every rank shares the
 *   host): after rbln_comm.c's agreement, each rank exports the objects of
 *   its tensors as dma-bufs, publishes (pid, descriptor, inode) in one
 *   MPI_Allgather, and the others take the descriptors with pidfd_getfd()
 *   and import them on their device. Imports are cached by the dma-buf's
 *   inode number: unique while the dma-buf lives, and a cached import keeps
 *   it alive, so a hit is the same object, whatever block of the
 *   exporter's caching allocator now holds the tensor in it (the offset
 *   comes with each call). A freed and remade object is a new dma-buf with
 *   a new inode: never a stale import. The ranks meet with MPI_Allreduce.
 */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "rbln/rbln_comm.h"
#include "rbln_comm_peer.h"
#include "rbln_internal.h"

/* ------------------------------------------------------------------ */
/* A rank's buffer as this rank's device reaches it                    */

/* Bytes [lo, lo + len) of the buffer at device address @va, in object @handle. */
struct piece {
	uint64_t lo, len, va;
	uint32_t handle;
};

struct reach {
	struct piece *p;
	size_t n, cap;
};

static bool reach_add(struct reach *r, uint64_t lo, uint64_t len, uint64_t va, uint32_t handle)
{
	if (!rbln_grow((void **)&r->p, &r->cap, r->n + 1, sizeof(*r->p)))
		return false;
	r->p[r->n++] = (struct piece){ .lo = lo, .len = len, .va = va, .handle = handle };
	return true;
}

/* Byte @off of @r: its address, its object, and how many bytes of the piece follow. */
static void reach_at(const struct reach *r, uint64_t off, uint64_t *va, uint32_t *handle,
		     uint64_t *len)
{
	size_t i;

	for (i = 0; i + 1 < r->n && off >= r->p[i].lo + r->p[i].len; i++)
		;
	*va = r->p[i].va + (off - r->p[i].lo);
	*handle = r->p[i].handle;
	*len = r->p[i].lo + r->p[i].len - off;
}

/* ------------------------------------------------------------------ */
/* The core: one collective on one rank                                */

struct direct {
	struct rbln_dev *d;
	enum rbln_coll_kind kind;
	rbln_redop op;
	int root, rank, size;
	rbln_dtype dtype;
	size_t esize;
	int64_t n;		/* elements of a rank's part */
	bool in_place;
	struct reach *in, *out;	/* every rank's input and output, as this device reaches them */
	struct reach tmp;	/* an in-place reduction's fold, then copied to its place */
	const void *site;
	uint64_t last;		/* the last job this rank queued */
	/* Every rank (or the pair) meets: the worst status of all, with its message. */
	rbln_status (*meet)(struct direct *k, rbln_status st);
	void *ctx;
};

static rbln_status job_copy(struct direct *k, uint64_t dst, uint32_t dh, uint64_t src,
			    uint32_t sh, uint64_t bytes)
{
	uint32_t bos[2] = { dh, sh };
	struct rbln_dev *d = k->d;
	struct rbln_drm_cmd c;
	uint64_t cmd_va, point;
	rbln_status st;
	void *cmd;

	pthread_mutex_lock(&d->lock);
	st = rbln_ring_reserve_locked(d, sizeof(struct rbln_pkt_dma_copy), &cmd, &cmd_va);
	if (!st) {
		rbln_drm_cmd_init(&c, cmd, sizeof(struct rbln_pkt_dma_copy));
		rbln_drm_cmd_dma_copy(&c, dst, src, bytes);
		st = rbln_ring_submit_locked(d, cmd_va, c.len, bos, 2, &point);
	}
	pthread_mutex_unlock(&d->lock);
	if (!st)
		k->last = point;
	return st;
}

/* @bytes from byte @soff of @src to byte @doff of @dst, a DMA_COPY per piece. */
static rbln_status copy(struct direct *k, const struct reach *dst, uint64_t doff,
			const struct reach *src, uint64_t soff, uint64_t bytes)
{
	uint64_t dva, sva, dlen, slen, len;
	uint32_t dh, sh;
	rbln_status st = RBLN_OK;

	while (bytes && !st) {
		reach_at(dst, doff, &dva, &dh, &dlen);
		reach_at(src, soff, &sva, &sh, &slen);
		len = bytes < dlen ? bytes : dlen;
		len = len < slen ? len : slen;
		st = job_copy(k, dva, dh, sva, sh, len);
		doff += len;
		soff += len;
		bytes -= len;
	}
	return st;
}

/* @dst at @doff = @a at @aoff op @b at @boff, @count elements, an EW_BINARY per piece. */
static rbln_status binary(struct direct *k, const struct reach *dst, uint64_t doff,
			  const struct reach *a, uint64_t aoff, const struct reach *b,
			  uint64_t boff, int64_t count)
{
	uint64_t dva, ava, bva, dlen, alen, blen, len, point;
	uint32_t bos[3];
	rbln_status st = RBLN_OK;

	while (count && !st) {
		reach_at(dst, doff, &dva, &bos[0], &dlen);
		reach_at(a, aoff, &ava, &bos[1], &alen);
		reach_at(b, boff, &bva, &bos[2], &blen);
		len = count * k->esize;
		len = len < dlen ? len : dlen;
		len = len < alen ? len : alen;
		len = len < blen ? len : blen;
		st = rbln_ew_binary(k->d, rbln_redop_subs[k->op], k->dtype, len / k->esize, dva, ava, bva,
				    bos, 3, rbln_coll_ops[k->kind], k->site, &point);
		if (!st)
			k->last = point;
		doff += len;
		aoff += len;
		boff += len;
		count -= len / k->esize;
	}
	return st;
}

/*
 * @count elements at byte @off of every rank's @src, folded in rank order
 * into @dst at @doff.
 */
static rbln_status fold(struct direct *k, const struct reach *dst, uint64_t doff,
			const struct reach *src, uint64_t off, int64_t count)
{
	rbln_status st = RBLN_OK;
	int q;

	if (!count)
		return RBLN_OK;
	if (k->size == 1)
		return copy(k, dst, doff, &src[0], off, count * k->esize);
	for (q = 1; q < k->size && !st; q++)
		st = binary(k, dst, doff, q == 1 ? &src[0] : dst, q == 1 ? off : doff, &src[q],
			    off, count);
	return st;
}

/* This rank's jobs done, then the meeting: everyone's worst status. */
static rbln_status settle(struct direct *k, rbln_status st)
{
	if (!st && k->last)
		st = rbln_wait_point(k->d, k->last);
	return k->meet(k, st);
}

/* Part @q's elements of an all-reduce: [*lo, *lo + return). */
static int64_t segment(const struct direct *k, int q, int64_t *lo)
{
	int64_t seg = (k->n + k->size - 1) / k->size;

	*lo = q * seg;
	return *lo >= k->n ? 0 : k->n - *lo < seg ? k->n - *lo : seg;
}

/*
 * The collective's phases, once every rank's tensors are ready and
 * reached: the same meetings on every rank, whatever fails.
 */
static rbln_status run_direct(struct direct *k, rbln_status st)
{
	int r = k->rank, q;
	uint64_t es = k->esize, nb = k->n * es;
	const struct reach *dst;
	int64_t lo, len;

	switch (st ? RBLN_COLL_NKINDS : k->kind) {
	case RBLN_COLL_ALL_REDUCE:
		len = segment(k, r, &lo);
		dst = k->in_place ? &k->tmp : &k->out[r];
		st = fold(k, dst, k->in_place ? 0 : lo * es, k->in, lo * es, len);
		if (!st && k->in_place)
			st = copy(k, &k->out[r], lo * es, &k->tmp, 0, len * es);
		break;
	case RBLN_COLL_REDUCE_SCATTER:
		dst = k->in_place ? &k->tmp : &k->out[r];
		st = fold(k, dst, 0, k->in, r * nb, k->n);
		if (!st && k->in_place)
			st = copy(k, &k->out[r], 0, &k->tmp, 0, nb);
		break;
	case RBLN_COLL_ALL_GATHER:
		for (q = 0; q < k->size && !st; q++)
			if (q != r || !k->in_place)
				st = copy(k, &k->out[r], q * nb, &k->in[q], 0, nb);
		break;
	case RBLN_COLL_BROADCAST:
		if (r != k->root)
			st = copy(k, &k->out[r], 0, &k->in[k->root], 0, nb);
		break;
	case RBLN_COLL_RECV:
		st = copy(k, &k->out[r], 0, &k->in[k->root], 0, nb);
		break;
	default:	/* SEND (the receiver reads), or a failure before */
		break;
	}
	st = settle(k, st);
	if (k->kind != RBLN_COLL_ALL_REDUCE)
		return st;
	/* Every segment folded: the others' from their outputs. */
	for (q = 0; q < k->size && !st; q++) {
		len = segment(k, q, &lo);
		if (q != r)
			st = copy(k, &k->out[r], lo * es, &k->out[q], lo * es, len * es);
	}
	return settle(k, st);
}

/* Which ranks' inputs and outputs rank @r reads. */
static bool reads_in(const struct direct *k, int q)
{
	if (q == k->rank)
		return false;
	switch (k->kind) {
	case RBLN_COLL_ALL_REDUCE:
	case RBLN_COLL_REDUCE_SCATTER:
	case RBLN_COLL_ALL_GATHER:
		return k->n > 0;
	case RBLN_COLL_BROADCAST:
	case RBLN_COLL_RECV:
		return q == k->root && k->n > 0;
	default:
		return false;
	}
}

static bool reads_out(const struct direct *k, int q)
{
	return q != k->rank && k->kind == RBLN_COLL_ALL_REDUCE && k->n > 0;
}

/* Does rank @q read this rank's input (output)? The exporter's side of reads_in(). */
static bool read_by_others(const struct direct *k, bool output)
{
	if (!k->n || k->size == 1)
		return false;
	if (output)
		return k->kind == RBLN_COLL_ALL_REDUCE;
	switch (k->kind) {
	case RBLN_COLL_BROADCAST:
		return k->rank == k->root;
	case RBLN_COLL_SEND:
		return true;
	case RBLN_COLL_RECV:
		return false;
	default:
		return true;
	}
}

/* Bytes of a rank's input and output. */
static uint64_t in_bytes(const struct direct *k)
{
	return (k->kind == RBLN_COLL_REDUCE_SCATTER ? k->size : 1) * k->n * k->esize;
}

static uint64_t out_bytes(const struct direct *k)
{
	return (k->kind == RBLN_COLL_ALL_GATHER ? k->size : 1) * k->n * k->esize;
}

/*
 * Where this rank's own part of @t starts in its block: in place, an
 * all-gather's input and a reduce-scatter's output are part r.
 */
static uint64_t part_offset(const struct direct *k, bool output)
{
	if (k->in_place && !output && k->kind == RBLN_COLL_ALL_GATHER)
		return k->rank * k->n * k->esize;
	if (k->in_place && output && k->kind == RBLN_COLL_REDUCE_SCATTER)
		return k->rank * k->n * k->esize;
	return 0;
}

/* Device memory for an in-place reduction's fold: the segment this rank folds. */
static rbln_status tmp_alloc(struct direct *k, struct rbln_block **b)
{
	int64_t lo, len = k->kind == RBLN_COLL_ALL_REDUCE ? segment(k, k->rank, &lo) : k->n;
	char msg[256];
	int ret;

	*b = NULL;
	if (!rbln_coll_is_reduction(k->kind) || !k->in_place || !len)
		return RBLN_OK;
	ret = rbln_allocator_alloc(k->d->alloc, len * k->esize, 0, b, msg, sizeof(msg));
	if (ret)
		return rbln_fail(rbln_errno_status(ret), "%s: %s", rbln_coll_names[k->kind], msg);
	if (!reach_add(&k->tmp, 0, len * k->esize, rbln_block_va(*b), rbln_block_handle(*b))) {
		rbln_allocator_free(k->d->alloc, *b, 0, 0);
		*b = NULL;
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
	}
	return RBLN_OK;
}

/* Waits for every job queued on @d so far: the work that wrote the tensors. */
static rbln_status device_ready(struct rbln_dev *d)
{
	uint64_t point;

	pthread_mutex_lock(&d->lock);
	point = d->point;
	pthread_mutex_unlock(&d->lock);
	return rbln_wait_point(d, point);
}

/* ------------------------------------------------------------------ */
/* In process: a logical device's members                              */

/* What a thread publishes for its collective. */
struct slot {
	struct rbln_coll_meta m;
	struct rbln_dev *dev;
	struct rbln_block *block[2];	/* input, output */
	uint64_t off[2], bytes[2];	/* the rank's part in them */
};

/* A meeting point of all threads, or of a pair. */
struct point {
	uint64_t gen;
	unsigned int arrived;		/* mask of ranks */
	int worst, worst_rank;		/* while they arrive */
	int res, res_rank;		/* the last meeting's outcome */
};

struct group {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int size, live;			/* communicators not yet freed */
	int device;
	struct rbln_dev *devs[RBLN_MAX_MEMBERS];
	bool broken;			/* a thread did not come in time: for good */
	char why[200];
	struct point all;
	struct point pairs[RBLN_MAX_MEMBERS * RBLN_MAX_MEMBERS];
	struct slot slots[RBLN_MAX_MEMBERS];
};

struct xrec;

/* What an MPI communicator's peer path caches: another rank's object imported here. */
struct import {
	int rank;
	uint64_t ino;		/* the dma-buf's inode: the object's identity */
	uint32_t handle;
	uint64_t va;
	uint64_t used;		/* the collective that last used it */
};

struct rbln_peer {
	bool local;
	int rank, size;
	struct rbln_dev *dev;
	/* in process */
	struct group *g;
	/* MPI */
	MPI_Comm mpi;		/* a duplicate of the communicator's: only this file's traffic */
	int *pidfd;		/* of every rank's process; -1 for this one */
	pid_t pid;
	struct import *imports;
	size_t nimports, cap_imports;
	uint64_t calls;
	double timeout;		/* seconds, of this collective's waits (the communicator's) */
	/*
	 * MPI's buffers: the peer state's, so that those of calls abandoned
	 * on a timeout stay valid (they are then never freed).
	 */
	struct xrec *xall, *xmine;	/* every rank's record, this one's */
	int meet_mine[2], meet_worst[2];
	MPI_Request reqs[2];
	char broken[256];	/* after a timeout: why the peer path is unusable */
};

static void deadline_of(double seconds, struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)seconds;
	ts->tv_nsec += (long)((seconds - (time_t)seconds) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * Rank @rank at meeting point @pt, which the ranks of mask @who attend,
 * with status @st: the worst status of all (the lowest rank's among
 * equals) in *@worst_rank. A rank that does not come in time breaks the
 * group.
 */
static rbln_status group_meet(struct group *g, struct point *pt, unsigned int who, int rank,
			      rbln_status st, double timeout, int *worst_rank, const char *fn)
{
	struct timespec until;
	uint64_t gen;
	rbln_status res;
	int q;

	pthread_mutex_lock(&g->lock);
	if (g->broken)
		goto broken;
	gen = pt->gen;
	if (!pt->arrived || st < pt->worst || (st == pt->worst && rank < pt->worst_rank)) {
		pt->worst = st;
		pt->worst_rank = rank;
	}
	pt->arrived |= 1u << rank;
	if (pt->arrived == who) {
		pt->res = pt->worst;
		pt->res_rank = pt->worst_rank;
		pt->arrived = 0;
		pt->gen++;
		pthread_cond_broadcast(&g->cond);
	} else {
		deadline_of(timeout, &until);
		while (pt->gen == gen && !g->broken)
			if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT &&
			    pt->gen == gen && !g->broken) {
				for (q = 0; q < g->size && (!(who & (1u << q)) ||
							     (pt->arrived & (1u << q))); q++)
					;
				snprintf(g->why, sizeof(g->why),
					 "no answer from rank %d in %.0f ms (RBLN_COMM_TIMEOUT_MS): the communicators are unusable",
					 q, timeout * 1000);
				g->broken = true;
				pthread_cond_broadcast(&g->cond);
			}
		if (pt->gen == gen)
			goto broken;
	}
	res = pt->res;
	*worst_rank = pt->res_rank;
	pthread_mutex_unlock(&g->lock);
	return res;
broken:
	pthread_mutex_unlock(&g->lock);
	*worst_rank = rank;
	return rbln_fail(RBLN_ERROR_TIMEOUT, "%s: %s", fn, g->why);
}

struct local_ctx {
	struct rbln_peer *p;
	struct point *pt;
	unsigned int who;
	double timeout;		/* seconds */
	bool broken;		/* the group broke: the others may be anywhere */
};

static rbln_status local_meet(struct direct *k, rbln_status st)
{
	struct local_ctx *c = k->ctx;
	rbln_status res;
	int worst;

	if (c->broken)
		return st;
	res = group_meet(c->p->g, c->pt, c->who, k->rank, st, c->timeout, &worst,
			 rbln_coll_names[k->kind]);
	if (res && worst == k->rank && !st)
		c->broken = true;	/* the meeting itself failed */
	if (st)
		return st;
	if (res && worst != k->rank)
		return rbln_fail(res, "%s: rank %d failed midway: the result is not valid",
				 rbln_coll_names[k->kind], worst);
	return res;
}

/* Is @t a live tensor on the communicator's logical device? */
static rbln_status local_tensor(const struct rbln_peer *p, rbln_tensor *t, const char *fn,
				const char *what)
{
	if (!rbln_tensor_ok(t, fn))
		return RBLN_ERROR_INVALID;
	if (t->device == p->g->device)
		return RBLN_OK;
	if (t->device == RBLN_CPU)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: %s is a CPU tensor; the communicator's device is rbln:%d", fn,
				 what, p->g->device);
	return rbln_fail(RBLN_ERROR_INVALID, "%s: %s is on rbln:%d; the communicator's device is rbln:%d",
			 fn, what, t->device, p->g->device);
}

/* Elements of this rank's shard of @t. */
static int64_t shard_numel(const struct rbln_peer *p, const rbln_tensor *t)
{
	return t->shards[p->rank].nbytes / rbln_dtype_size(t->dtype);
}

/* This thread's arguments: RBLN_OK with k->n set, or why not. */
static rbln_status local_check(struct rbln_peer *p, const struct rbln_peer_args *a,
			       struct direct *k)
{
	const char *fn = rbln_coll_names[a->kind];
	char what[64], whose[32];
	rbln_status st;

	st = local_tensor(p, a->in, fn, a->kind <= RBLN_COLL_REDUCE_SCATTER ? "the input" :
									 "the tensor");
	if (!st && a->out != a->in)
		st = local_tensor(p, a->out, fn, "the output");
	if (st)
		return st;
	snprintf(whose, sizeof(whose), "rank %d's shards", p->rank);
	st = rbln_coll_check(a->kind, a->op, a->root, p->rank, p->size, a->in, a->out, a->in_place,
			     shard_numel(p, a->in), shard_numel(p, a->out), whose, &k->n);
	if (st)
		return st;
	snprintf(what, sizeof(what), "%s: a collective", fn);
	st = rbln_capture_refuse(p->g->device, NULL, what);
	if (!st)
		st = rbln_tensor_ensure_device(a->in);
	if (!st && a->out != a->in)
		st = rbln_tensor_ensure_device(a->out);
	return st;
}

/* Rank @q's buffer @which (0: input, 1: output) as this rank's device reaches it. */
static rbln_status local_reach(struct direct *k, const struct slot *s, int which,
			       struct reach *r, uint32_t *held, int *nheld)
{
	struct rbln_block *b = s->block[which];
	uint64_t off = s->off[which], end = off + s->bytes[which], len, va, at;
	uint32_t h;
	rbln_status st;

	if (!s->bytes[which])
		return RBLN_OK;
	if (s->dev == k->d) {
		if (!reach_add(r, 0, s->bytes[which], rbln_block_va(b) + off, rbln_block_handle(b)))
			return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
		return RBLN_OK;
	}
	for (; off < end; off += len) {
		rbln_block_piece(b, off, NULL, &len);
		if (len > end - off)
			len = end - off;
		st = rbln_peer_get(k->d, s->dev, b, off, &h, &va, &at);
		if (st)
			return st;
		held[(*nheld)++] = h;
		if (!reach_add(r, off - s->off[which], len, va + at, h))
			return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
	}
	return RBLN_OK;
}

/* Objects of one rank's buffer at most (an expandable segment's maps). */
#define MAX_PIECES 16

rbln_status rbln_peer_local_collective(struct rbln_peer *p, const struct rbln_peer_args *a)
{
	struct group *g = p->g;
	struct direct k = { .d = p->dev, .kind = a->kind, .op = a->op, .root = a->root,
			    .rank = p->rank, .size = p->size, .in_place = a->in_place,
			    .site = a->site };
	struct reach in[RBLN_MAX_MEMBERS] = { 0 }, out[RBLN_MAX_MEMBERS] = { 0 };
	uint32_t held[2 * RBLN_MAX_MEMBERS * MAX_PIECES];
	struct local_ctx ctx = { .p = p, .timeout = a->timeout_ms / 1000.0 };
	struct rbln_block *tmp = NULL;
	struct slot *mine = &g->slots[p->rank];
	struct rbln_coll_meta all[RBLN_MAX_MEMBERS];
	int nheld = 0, q, worst, i;
	rbln_status st, verdict;

	k.in = in;
	k.out = out;
	k.meet = local_meet;
	k.ctx = &ctx;
	st = local_check(p, a, &k);
	/* A peer that is no rank has no one to tell. */
	if (rbln_coll_is_pair(a->kind) && (a->root < 0 || a->root >= p->size || a->root == p->rank))
		return st;
	if (rbln_coll_is_pair(a->kind)) {
		int lo = a->root < p->rank ? a->root : p->rank, hi = a->root ^ p->rank ^ lo;

		ctx.pt = &g->pairs[lo * RBLN_MAX_MEMBERS + hi];
		ctx.who = 1u << lo | 1u << hi;
	} else {
		ctx.pt = &g->all;
		ctx.who = (1u << p->size) - 1;
	}

	if (!st) {
		k.dtype = a->in->dtype;
		k.esize = rbln_dtype_size(k.dtype);
		st = device_ready(k.d);
	}
	memset(mine, 0, sizeof(*mine));
	mine->m = (struct rbln_coll_meta){ .kind = a->kind, .op = a->op, .root = a->root };
	if (!st) {
		mine->m.dtype = k.dtype;
		mine->m.count = k.n;
		mine->dev = k.d;
		for (i = 0; i < 2; i++) {
			rbln_tensor *t = i ? a->out : a->in;

			mine->block[i] = t->shards[p->rank].block;
			mine->off[i] = part_offset(&k, i);
			mine->bytes[i] = i ? out_bytes(&k) : in_bytes(&k);
		}
	}
	rbln_coll_meta_status(&mine->m, st);

	/* Everyone's request; the slots are read until the next meeting. */
	verdict = group_meet(g, ctx.pt, ctx.who, p->rank, RBLN_OK, ctx.timeout, &worst,
			     rbln_coll_names[a->kind]);
	if (verdict)
		return verdict;
	for (q = 0; q < p->size; q++)
		all[q] = g->slots[q].m;
	st = rbln_coll_judge(all, p->size, p->rank, &mine->m, a->root);
	if (st) {
		/* Nobody moves data: one more meeting before the slots change. */
		verdict = group_meet(g, ctx.pt, ctx.who, p->rank, RBLN_OK, ctx.timeout, &worst,
				     rbln_coll_names[a->kind]);
		return st;
	}
	for (q = 0; q < p->size && !st; q++) {
		if (q == p->rank || reads_in(&k, q))
			st = local_reach(&k, &g->slots[q], 0, &in[q], held, &nheld);
		if (!st && (q == p->rank || reads_out(&k, q)))
			st = local_reach(&k, &g->slots[q], 1, &out[q], held, &nheld);
	}
	if (!st)
		st = tmp_alloc(&k, &tmp);
	st = run_direct(&k, st);
	for (i = 0; i < nheld; i++)
		rbln_peer_put(k.d, held[i]);
	if (tmp)
		rbln_allocator_free(k.d->alloc, tmp, k.last, 0);
	if (k.last) {
		rbln_shard_used(&a->in->shards[p->rank], k.last);
		rbln_shard_used(&a->out->shards[p->rank], k.last);
	}
	for (q = 0; q < p->size; q++) {
		free(in[q].p);
		free(out[q].p);
	}
	free(k.tmp.p);
	return st;
}

static void group_put(struct group *g)
{
	bool last;

	pthread_mutex_lock(&g->lock);
	last = !--g->live;
	pthread_mutex_unlock(&g->lock);
	if (!last)
		return;
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

rbln_status rbln_comm_init_all(rbln_comm **comms, int n, int device)
{
	const char *fn = "rbln_comm_init_all";
	struct rbln_peer *p[RBLN_MAX_MEMBERS] = { 0 };
	pthread_condattr_t attr;
	struct rbln_ldev *l;
	struct group *g;
	int64_t timeout_ms;
	rbln_status st;
	int r, made;

	if (!comms)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: NULL result array", fn);
	l = rbln_ldev_get(device);
	if (!l)
		return rbln_last_status();
	if (l->nmembers < 2)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: rbln:%d is one NPU, not a logical device of several (RBLN_DEVICE_MAP, RBLN_NPUS_PER_DEVICE)",
				 fn, l->index);
	if (n != l->nmembers)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: rbln:%d has %d members, one communicator each: %d asked", fn,
				 l->index, l->nmembers, n);
	st = rbln_comm_env_timeout(&timeout_ms, fn);
	if (st)
		return st;
	g = calloc(1, sizeof(*g));
	if (!g)
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &attr);
	pthread_condattr_destroy(&attr);
	g->size = n;
	g->device = l->index;
	g->live = n;
	for (r = 0; r < n; r++)
		g->devs[r] = l->members[r];
	for (made = 0; made < n; made++) {
		p[made] = calloc(1, sizeof(*p[made]));
		if (!p[made])
			break;
		*p[made] = (struct rbln_peer){ .local = true, .rank = made, .size = n,
					       .dev = l->members[made], .g = g,
					       .mpi = MPI_COMM_NULL };
		comms[made] = rbln_comm_new_local(made, n, l->index, l->members[made], p[made],
						  timeout_ms);
		if (!comms[made]) {
			free(p[made]);
			break;
		}
	}
	if (made == n)
		return RBLN_OK;
	/* Each communicator made owns its peer state and a reference to the group. */
	g->live = made + 1;
	for (r = 0; r < made; r++) {
		rbln_comm_free(comms[r]);
		comms[r] = NULL;
	}
	group_put(g);
	return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
}

bool rbln_peer_is_local(const struct rbln_peer *p)
{
	return p && p->local;
}

/* ------------------------------------------------------------------ */
/* MPI ranks on one host                                               */

/*
 * Completes the @n requests of @reqs by polling (rbln_comm_poll_pause()):
 * 0, MPI's error, or -1 after @timeout seconds.
 */
static int poll_reqs(MPI_Request *reqs, int n, double timeout)
{
	struct timespec start, until, now;
	int done = 0, err;

	clock_gettime(CLOCK_MONOTONIC, &start);
	deadline_of(timeout, &until);
	for (;;) {
		err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (err != MPI_SUCCESS || done)
			return err;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec ||
		    (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
			return -1;
		rbln_comm_poll_pause((now.tv_sec - start.tv_sec) * 1000000000ll +
				     now.tv_nsec - start.tv_nsec);
	}
}

/*
 * On a timeout the peer path is broken for good: MPI keeps the requests
 * and their buffers, which stay allocated.
 */

static rbln_status pwait(struct rbln_peer *p, int n, const char *fn, const char *what)
{
	int err = poll_reqs(p->reqs, n, p->timeout);

	if (err > 0)
		return rbln_comm_mpi_fail(fn, what, err);
	if (!err)
		return RBLN_OK;
	snprintf(p->broken, sizeof(p->broken),
		 "no answer in %.0f ms during %s on the peer path (RBLN_COMM_TIMEOUT_MS): the communicator is unusable",
		 p->timeout * 1000, what);
	return rbln_fail(RBLN_ERROR_TIMEOUT, "%s: %s", fn, p->broken);
}

/* @bytes of @mine to rank @peer and as many from it into @theirs, within the timeout. */
static rbln_status pexchange(struct rbln_peer *p, void *mine, void *theirs, int bytes, int peer,
			     int tag, const char *fn)
{
	int err;

	err = MPI_Irecv(theirs, bytes, MPI_BYTE, peer, tag, p->mpi, &p->reqs[0]);
	if (err)
		return rbln_comm_mpi_fail(fn, "MPI_Irecv", err);
	err = MPI_Isend(mine, bytes, MPI_BYTE, peer, tag, p->mpi, &p->reqs[1]);
	if (err) {
		p->reqs[1] = MPI_REQUEST_NULL;
		snprintf(p->broken, sizeof(p->broken), "MPI_Isend failed: a receive is left");
		return rbln_comm_mpi_fail(fn, "MPI_Isend", err);
	}
	return pwait(p, 2, fn, "an exchange with the peer");
}

static int sys_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_getfd(int pidfd, int fd)
{
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

static uint64_t inode_of(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) ? 0 : (uint64_t)sb.st_ino;
}

/* One exported piece of a rank's buffer: bytes [lo, lo + len) at @at of the dma-buf. */
struct xpiece {
	uint64_t ino, lo, len, at;
	int32_t fd, pad;
};

/* What a rank publishes for a collective on the peer path. */
struct xrec {
	int32_t ok;		/* its pieces are all here */
	int32_t npieces[2];	/* input, output */
	int32_t pad;
	struct xpiece piece[2][MAX_PIECES];
};

/* What a rank says of itself when a communicator is made. */
struct hello {
	int32_t ok, pid, fd, pad;
	uint64_t ino;		/* of that descriptor, a memfd: what another rank must find */
	char boot[40];		/* the kernel it runs on: /proc/sys/kernel/random/boot_id */
};

/* The exchanges of rbln_peer_init(): MPI's until they complete, so never on the stack. */
struct init_bufs {
	struct hello mine;
	int ok, every;
	MPI_Request req;
};

/*
 * Waits for @b->req, bounded by @timeout seconds; false on a failure or
 * a timeout, when @b (and whatever else MPI may still write) is left to
 * MPI for good.
 */
static bool init_wait(struct init_bufs *b, double timeout)
{
	return !poll_reqs(&b->req, 1, timeout);
}

struct rbln_peer *rbln_peer_init(MPI_Comm mpi, int rank, int size, struct rbln_dev *dev,
				 int64_t timeout_ms)
{
	const char *env = getenv("RBLN_COMM_PEER");
	double timeout = timeout_ms / 1000.0;
	struct hello *all = calloc(size, sizeof(*all));
	struct init_bufs *b = calloc(1, sizeof(*b));
	struct rbln_peer *p = calloc(1, sizeof(*p));
	FILE *f;
	int q, fd;

	/*
	 * Collective over @mpi: every rank takes every step, whatever it
	 * found. One out of host memory here does not, and the others time
	 * out and go without the peer path.
	 */
	if (!all || !b || !p)
		goto nomem;
	p->mpi = MPI_COMM_NULL;
	p->size = size;
	p->pidfd = malloc(size * sizeof(*p->pidfd));
	p->xall = calloc(size, sizeof(*p->xall));
	p->xmine = calloc(1, sizeof(*p->xmine));
	for (q = 0; p->pidfd && q < size; q++)
		p->pidfd[q] = -1;
	b->mine = (struct hello){ .ok = size > 1 && p->pidfd && p->xall && p->xmine &&
					!(env && !strcmp(env, "0")),
				  .pid = getpid() };
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f || !fgets(b->mine.boot, sizeof(b->mine.boot), f))
		b->mine.ok = 0;
	if (f)
		fclose(f);
	/* A memfd has an inode of its own (an eventfd's is everyone's): proof of the right file. */
	b->mine.fd = memfd_create("rbln-comm-peer", MFD_CLOEXEC);
	if (b->mine.fd < 0)
		b->mine.ok = 0;
	else
		b->mine.ino = inode_of(b->mine.fd);
	if (MPI_Iallgather(&b->mine, sizeof(b->mine), MPI_BYTE, all, sizeof(b->mine), MPI_BYTE,
			   mpi, &b->req) || !init_wait(b, timeout))
		goto abandoned;
	/* On one host, the same kernel, and this rank can take every other's descriptors? */
	b->ok = b->mine.ok;
	for (q = 0; q < size && b->ok; q++) {
		if (q == rank)
			continue;
		if (!all[q].ok || strcmp(all[q].boot, b->mine.boot)) {
			b->ok = 0;
			break;
		}
		/* In another pid namespace the pid may name another process. */
		p->pidfd[q] = sys_pidfd_open(all[q].pid);
		fd = p->pidfd[q] < 0 ? -1 : sys_pidfd_getfd(p->pidfd[q], all[q].fd);
		if (fd < 0 || inode_of(fd) != all[q].ino)
			b->ok = 0;
		if (fd >= 0)
			close(fd);
	}
	if (MPI_Iallreduce(&b->ok, &b->every, 1, MPI_INT, MPI_MIN, mpi, &b->req) ||
	    !init_wait(b, timeout))
		goto abandoned;
	/* Every rank has tried the others' memfds. */
	close(b->mine.fd);
	b->mine.fd = -1;
	if (!b->every)
		goto off;
	if (MPI_Comm_idup(mpi, &p->mpi, &b->req) || !init_wait(b, timeout)) {
		p->mpi = MPI_COMM_NULL;	/* MPI may still write it: @p stays MPI's too */
		goto abandoned;
	}
	MPI_Comm_set_errhandler(p->mpi, MPI_ERRORS_RETURN);
	p->rank = rank;
	p->dev = dev;
	p->pid = getpid();
	free(all);
	free(b);
	return p;
abandoned:
	if (b->mine.fd >= 0)
		close(b->mine.fd);
	for (q = 0; p->pidfd && q < size; q++)
		if (p->pidfd[q] >= 0)
			close(p->pidfd[q]);
	return NULL;	/* @all, @b and @p are MPI's now */
off:
	rbln_peer_free(p);
	free(all);
	free(b);
	return NULL;
nomem:
	free(all);
	free(b);
	free(p);
	return NULL;
}

static void drop_import(struct rbln_peer *p, size_t i)
{
	rbln_drm_bo_close(p->dev->drm, p->imports[i].handle);
	p->imports[i] = p->imports[--p->nimports];
}

void rbln_peer_free(struct rbln_peer *p)
{
	int finalized = 0, q;

	if (!p)
		return;
	if (p->local) {
		group_put(p->g);
		free(p);
		return;
	}
	while (p->nimports)
		drop_import(p, p->nimports - 1);
	free(p->imports);
	for (q = 0; p->pidfd && q < p->size; q++)
		if (p->pidfd[q] >= 0)
			close(p->pidfd[q]);
	free(p->pidfd);
	/* After a timeout MPI may still hold the exchanges' buffers: they stay. */
	if (!p->broken[0]) {
		free(p->xall);
		free(p->xmine);
	}
	MPI_Finalized(&finalized);
	/* After a timeout a call of it never completes: it stays MPI's. */
	if (!finalized && p->mpi != MPI_COMM_NULL && !p->broken[0])
		MPI_Comm_free(&p->mpi);
	free(p);
}

/* Imports kept at most, and for how many collectives unused. */
#define MAX_IMPORTS	64
#define IMPORT_AGE	16

/* Exports the pieces of this rank's buffer @which (@t's block, @off, @bytes) into @x. */
static rbln_status export_buffer(struct rbln_peer *p, struct xrec *x, int which,
				 struct rbln_block *b, uint64_t off, uint64_t bytes)
{
	uint64_t end = off + bytes, len, at;
	uint32_t h;
	int fd, ret, i;

	for (; off < end; off += len) {
		h = rbln_block_piece(b, off, &at, &len);
		if (len > end - off)
			len = end - off;
		i = x->npieces[which];
		if (i == MAX_PIECES)
			return rbln_fail(RBLN_ERROR_UNSUPPORTED, "a tensor over more than %d objects",
					 MAX_PIECES);
		ret = rbln_drm_bo_export(p->dev->drm, h, &fd);
		if (ret)
			return rbln_fail(rbln_errno_status(ret), "cannot export a tensor: %s",
					 strerror(-ret));
		x->piece[which][i] = (struct xpiece){ .ino = inode_of(fd), .lo = off - (end - bytes),
						      .len = len, .at = at, .fd = fd };
		x->npieces[which]++;
	}
	return RBLN_OK;
}

static void close_exports(struct xrec *x)
{
	int w, i;

	for (w = 0; w < 2; w++)
		for (i = 0; i < x->npieces[w]; i++)
			close(x->piece[w][i].fd);
	x->npieces[0] = x->npieces[1] = 0;
}

/* Rank @q's piece @xp imported here (or found in the cache): its handle and address. */
static rbln_status import_piece(struct rbln_peer *p, int q, const struct xpiece *xp,
				uint32_t *handle, uint64_t *va)
{
	struct rbln_drm_bo_info info;
	uint32_t h;
	size_t i;
	int fd, ret;

	for (i = 0; i < p->nimports; i++)
		if (p->imports[i].rank == q && p->imports[i].ino == xp->ino)
			break;
	if (i == p->nimports) {
		fd = sys_pidfd_getfd(p->pidfd[q], xp->fd);
		if (fd < 0)
			return rbln_fail(RBLN_ERROR_UNSUPPORTED,
					 "cannot take rank %d's dma-buf (pidfd_getfd): %s", q,
					 strerror(errno));
		/* The descriptor is the one published: the same dma-buf. */
		if (inode_of(fd) != xp->ino) {
			close(fd);
			return rbln_fail(RBLN_ERROR_DEVICE, "rank %d's descriptor %d changed under it",
					 q, xp->fd);
		}
		ret = rbln_drm_bo_import(p->dev->drm, fd, &h);
		close(fd);
		if (!ret) {
			ret = rbln_drm_bo_info(p->dev->drm, h, &info);
			if (ret)
				rbln_drm_bo_close(p->dev->drm, h);
		}
		if (ret)
			return rbln_fail(rbln_errno_status(ret), "cannot import rank %d's tensor: %s",
					 q, strerror(-ret));
		if (!rbln_grow((void **)&p->imports, &p->cap_imports, p->nimports + 1,
			       sizeof(*p->imports))) {
			rbln_drm_bo_close(p->dev->drm, h);
			return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
		}
		p->imports[p->nimports++] = (struct import){ .rank = q, .ino = xp->ino, .handle = h,
							     .va = info.va };
	}
	p->imports[i].used = p->calls;
	*handle = p->imports[i].handle;
	*va = p->imports[i].va;
	return RBLN_OK;
}

/* Rank @q's buffer @which, from its record, as this device reaches it. */
static rbln_status mpi_reach(struct rbln_peer *p, int q, const struct xrec *x, int which,
			     struct reach *r)
{
	uint32_t h = 0;
	uint64_t va = 0;
	rbln_status st;
	int i;

	for (i = 0; i < x->npieces[which]; i++) {
		const struct xpiece *xp = &x->piece[which][i];

		st = import_piece(p, q, xp, &h, &va);
		if (st)
			return st;
		if (!reach_add(r, xp->lo, xp->len, va + xp->at, h))
			return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "out of host memory");
	}
	return RBLN_OK;
}

/* Drops what the last collectives did not use, and the oldest beyond the cap. */
static void age_imports(struct rbln_peer *p)
{
	size_t i, oldest;

	for (i = p->nimports; i-- > 0;)
		if (p->calls - p->imports[i].used > IMPORT_AGE)
			drop_import(p, i);
	while (p->nimports > MAX_IMPORTS) {
		for (oldest = 0, i = 1; i < p->nimports; i++)
			if (p->imports[i].used < p->imports[oldest].used)
				oldest = i;
		drop_import(p, oldest);
	}
}

struct mpi_ctx {
	struct rbln_peer *p;
};

/* The MPI ranks meet: every rank's (status, rank), or the peer's, within the timeout. */
static rbln_status mpi_meet(struct direct *k, rbln_status st)
{
	struct rbln_peer *p = ((struct mpi_ctx *)k->ctx)->p;
	const char *fn = rbln_coll_names[k->kind];
	int *mine = p->meet_mine, *worst = p->meet_worst, err;
	rbln_status res;

	if (p->broken[0])
		return st ? st : rbln_fail(RBLN_ERROR_TIMEOUT, "%s: %s", fn, p->broken);
	mine[0] = st;
	mine[1] = k->rank;
	if (rbln_coll_is_pair(k->kind)) {
		res = pexchange(p, mine, worst, sizeof(int) * 2, k->root, 1, fn);
		if (!res && worst[0] > mine[0])
			worst[0] = mine[0], worst[1] = mine[1];
	} else {
		err = MPI_Iallreduce(mine, worst, 1, MPI_2INT, MPI_MINLOC, p->mpi, &p->reqs[0]);
		res = err ? rbln_comm_mpi_fail(fn, "MPI_Iallreduce", err) :
			    pwait(p, 1, fn, "a meeting of the ranks");
	}
	if (st)
		return st;
	if (res)
		return res;
	if (worst[0])
		return rbln_fail(worst[0], "%s: rank %d failed midway: the result is not valid",
				 fn, worst[1]);
	return RBLN_OK;
}

bool rbln_peer_collective(struct rbln_peer *p, const struct rbln_peer_args *a, rbln_status *out)
{
	const char *fn = rbln_coll_names[a->kind];
	struct direct k = { .d = p->dev, .kind = a->kind, .op = a->op, .root = a->root,
			    .rank = p->rank, .size = p->size, .in_place = a->in_place,
			    .site = a->site, .n = a->n, .dtype = a->in->dtype };
	struct reach *in = NULL, *out_r = NULL;
	struct xrec *mine = p->xmine, *all = p->xall;
	struct mpi_ctx ctx = { .p = p };
	struct rbln_block *tmp = NULL;
	rbln_status st = RBLN_OK;
	int q, w, err, peer = rbln_coll_is_pair(a->kind) ? a->root : -1;
	rbln_status xst;
	bool ran;

	if (p->broken[0]) {
		*out = rbln_fail(RBLN_ERROR_TIMEOUT, "%s: %s", fn, p->broken);
		return true;
	}
	p->timeout = a->timeout_ms / 1000.0;
	if (!a->n)
		return false;	/* nothing to move: the staged path's exchanges are enough */
	memset(mine, 0, sizeof(*mine));
	k.esize = rbln_dtype_size(k.dtype);
	k.meet = mpi_meet;
	k.ctx = &ctx;
	p->calls++;
	in = calloc(p->size, sizeof(*in));
	out_r = calloc(p->size, sizeof(*out_r));
	if (!in || !out_r)
		st = rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	k.in = in;
	k.out = out_r;
	/* What wrote the tensors is done before anyone reads them. */
	if (!st)
		st = device_ready(k.d);
	for (w = 0; w < 2 && !st; w++) {
		rbln_tensor *t = w ? a->out : a->in;
		struct rbln_block *b = t->shards[0].block;
		uint64_t off = part_offset(&k, w), bytes = w ? out_bytes(&k) : in_bytes(&k);

		if (!reach_add(w ? &out_r[p->rank] : &in[p->rank], 0, bytes,
			       rbln_block_va(b) + off, rbln_block_handle(b)))
			st = rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
		else if (read_by_others(&k, w))
			st = export_buffer(p, mine, w, b, off, bytes);
	}
	if (!st)
		st = tmp_alloc(&k, &tmp);
	mine->ok = !st;
	if (rbln_coll_is_pair(a->kind)) {
		xst = pexchange(p, mine, &all[peer], sizeof(*mine), peer, 2, fn);
	} else {
		err = MPI_Iallgather(mine, sizeof(*mine), MPI_BYTE, all, sizeof(*mine), MPI_BYTE,
				     p->mpi, &p->reqs[0]);
		xst = err ? rbln_comm_mpi_fail(fn, "MPI_Iallgather", err) :
			    pwait(p, 1, fn, "the exchange of the tensors' objects");
	}
	if (xst) {
		/* No meeting can follow: this rank fails, the others time out or fail too. */
		if (!st)
			st = xst;
		ran = true;
		goto out;
	}
	for (q = 0; q < p->size && !st && mine->ok; q++) {
		if (q != p->rank && (q == peer || peer < 0) && !all[q].ok)
			mine->ok = 0;
		if (!mine->ok)
			break;
		if (reads_in(&k, q))
			st = mpi_reach(p, q, &all[q], 0, &in[q]);
		if (!st && reads_out(&k, q))
			st = mpi_reach(p, q, &all[q], 1, &out_r[q]);
	}
	/*
	 * Every rank reached every other: the data moves. Else (a rank could
	 * not export or import) nothing moved, and all stage it.
	 */
	st = mpi_meet(&k, st ? st : mine->ok ? RBLN_OK : RBLN_ERROR_UNSUPPORTED);
	ran = !st || p->broken[0];
	if (!st)
		st = run_direct(&k, RBLN_OK);
out:
	close_exports(mine);
	if (tmp)
		rbln_allocator_free(k.d->alloc, tmp, k.last, 0);
	if (k.last) {
		rbln_shard_used(&a->in->shards[0], k.last);
		rbln_shard_used(&a->out->shards[0], k.last);
	}
	for (q = 0; q < p->size && in && out_r; q++) {
		free(in[q].p);
		free(out_r[q].p);
	}
	free(k.tmp.p);
	free(in);
	free(out_r);
	age_imports(p);
	if (ran)
		*out = st;
	return ran;
}
