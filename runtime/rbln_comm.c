// SPDX-License-Identifier: MIT
/*
 * rbln_comm.c - collectives between MPI ranks, one NPU each
 *
 * MPI (Open MPI from Debian) never sees device memory, so every
 * collective is staged: a chunk goes from the device to a pinned staging
 * buffer by DMA (rbln_staging.c), through MPI into another staging buffer,
 * and back to the device by DMA. The next chunk's DMA is queued before
 * this chunk's MPI call, so the device copies while the network works.
 *
 * Reductions run on the NPU. A reduce-scatter sends part r of each chunk
 * to rank r (MPI_Alltoall), which copies every rank's part to a device
 * buffer where EW_BINARY folds them in rank order, ((p0 op p1) op p2) ...,
 * rounded as the ISA rounds each step. An all-reduce does the same with
 * segment r of each chunk, then all-gathers the folded segments: as much
 * data as a ring moves, and every element is folded in rank order by one
 * rank, so every rank gets the same bits and a CPU can reproduce them.
 *
 * No rank may leave another waiting: before any data moves, every rank
 * publishes what it was asked to do and whether its own arguments were
 * good, and all fail alike when any rank's differ or were bad. A failure
 * on one rank midway (a device error) keeps it in the remaining MPI calls
 * with a scratch buffer, and a last exchange of statuses makes every rank
 * fail.
 *
 * Nor may a rank that died or stopped answering leave the others waiting
 * for ever: every MPI call is nonblocking, point to point, and completed
 * in one place, comm_wait(), by polling until the communicator's timeout.
 * A wait that times out names the ranks whose messages did not come and
 * leaves the communicator unusable: it no longer knows where the others
 * are, and MPI may still use the buffers of the calls it abandoned.
 *
 * With MPI_THREAD_MULTIPLE a communicator is asynchronous: the call
 * queues all of the device's work and returns, and a progress thread
 * does the host's steps (MPI), the jobs that need one waiting for it on
 * the device, with a WAIT on a word the thread writes after each step
 * (or cancels on a failure, which the next rbln_synchronize() reports).
 * Without it the caller does the host's steps between the same jobs.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include <xf86drm.h>

#include "rbln/rbln_comm.h"
#include "rbln_comm_args.h"
#include "rbln_comm_peer.h"
#include "rbln_explain.h"
#include "rbln_internal.h"
#include "rbln_staging.h"

#define COMM_MAGIC 0x72626c6e436f6d6dull	/* "rblnComm" */

/* Tags on the communicator's own duplicate of the caller's: no other traffic uses it. */
enum { TAG_META = 1, TAG_DATA = 2, TAG_GATHER = 3, TAG_SETTLE = 4 };

/*
 * A collective's word, which its jobs' WAITs poll: host step s done is
 * s << STEP_SHIFT; the bits below count heartbeats while the host waits
 * for the others, so that a WAIT that sees them is not taken for a hang.
 */
#define STEP_SHIFT	20
#define BEAT_NS		(50 * 1000000ll)

/* A staging buffer kept after a timeout: MPI may still read or write it. */
struct parked {
	struct rbln_host_buf *buf;
	uint64_t point;
};

struct rbln_comm {
	uint64_t magic;
	MPI_Comm mpi;
	int rank, size, device;
	struct rbln_dev *dev;
	pthread_mutex_t lock;	/* one collective at a time: ranks must agree on their order */
	struct rbln_peer *peer;	/* NPU to NPU (rbln_comm_peer.c); NULL: staged; in process: no MPI */
	int64_t timeout_ms;	/* of one wait for the others */
	/*
	 * Where the nonblocking calls' buffers and requests live: the
	 * communicator's, so that those of a call abandoned on a timeout
	 * stay valid until rbln_comm_free().
	 */
	struct rbln_coll_meta *metas;	/* every rank's request, [rank] this one's */
	int *settles;		/* every rank's (status, rank) after the data */
	char *scratch;		/* what MPI sends and receives after a local failure */
	MPI_Request *reqs;	/* 2 * size: a receive and a send per rank */
	int *peers;		/* the rank of each request */
	/* After a timeout: why the communicator is unusable ("" while it works) */
	char broken[320];
	int npending;		/* requests of reqs MPI still has */
	struct parked *parked;	/* staging buffers those may use */
	int nparked, cap_parked;
	/*
	 * Asynchronous (MPI_THREAD_MULTIPLE and a device with WAIT): the
	 * progress thread runs the host's side of the collectives queued
	 * at q_head, in order. q_lock guards the queue, stop and broken;
	 * the thread alone touches the MPI state above and beat.
	 */
	bool async;
	pthread_t thread;
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct coll *q_head;
	bool stop;
	uint64_t *beat;			/* the word of the collective the thread runs */
	struct rbln_host_buf *words;	/* the collectives' words, a page; under lock */
	uint64_t seq;			/* collectives queued, under lock */
	struct rbln_host_buf *bufs[4];	/* staging s[0], s[1], g[0], g[1], under lock */
};


/*
 * One collective as this rank runs it. Asynchronous, the progress thread
 * gets a copy once the call has queued the device's part, and uses
 * neither the tensors nor anything the caller's thread changes.
 */
struct coll {
	rbln_comm *comm;
	struct rbln_dev *d;
	enum rbln_coll_kind kind;
	rbln_redop op;
	int root;		/* broadcast's root, send's and recv's peer */
	rbln_tensor *in, *out;	/* broadcast, send, recv: the one tensor in both */
	const void *site;
	rbln_dtype dtype;
	size_t esize;
	int64_t n;		/* elements of a rank's part */
	int64_t m;		/* elements of a part per chunk */
	int64_t chunks;
	int phases;		/* host steps per chunk: 2 for an all-reduce of several ranks */
	uint32_t in_bo, out_bo;
	uint64_t in_va;		/* this rank's part of the input */
	uint64_t out_va;	/* all_gather: the whole result; else where this rank's goes */
	bool in_place;
	struct rbln_block *fold;	/* reductions: two chunks of every rank's parts */
	struct rbln_host_buf *s[2];	/* staging: chunk c of this rank leaves by s[c % 2] */
	struct rbln_host_buf *g[2];	/* and the others' parts come in by g[c % 2] */
	struct rbln_copy *cp;	/* a job's copies, being built */
	uint64_t *need;		/* per host step: the last job before it that it needs (~0: none yet) */
	char *scratch;		/* what MPI sends and receives after a local failure */
	uint64_t last_in, last;	/* the last jobs reading the input, and of all */
	rbln_status local;	/* this rank failed on the way (it goes on with scratch data) */
	rbln_status mpi;	/* MPI failed: the rest is skipped */
	/* Asynchronous */
	bool async;
	bool planned;		/* jobs wait for the word */
	rbln_status st;		/* what the call returned when it handed the rest over */
	char why[160];		/* and its message, for the others */
	rbln_status queue_failed;	/* the call failed later, queueing the device's part */
	bool queued;		/* the call is done with it, under q_lock */
	uint32_t *syncs;	/* per host step: a syncobj with the fence of its need */
	uint64_t *word;
	uint64_t word_va;
	uint32_t word_bo;
	struct coll *next;	/* in the progress thread's queue */
};

static void *progress_main(void *arg);
static void release(rbln_comm *c, struct rbln_host_buf **b, uint64_t point);

/* Moves the heartbeat count (the low bits) of word @w: the device sees it change. */
static void heartbeat(uint64_t *w)
{
	uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED), low = (1ull << STEP_SHIFT) - 1;

	__atomic_store_n(w, (v & ~low) | ((v + 1) & low), __ATOMIC_RELEASE);
}

/* Does the chunk travel as a part from every rank (gathered, or all-to-all)? */
static bool is_gathered(enum rbln_coll_kind kind)
{
	return kind <= RBLN_COLL_REDUCE_SCATTER;
}

/*
 * An all-reduce of several ranks runs as a reduce-scatter and an
 * all-gather of each chunk: every rank folds one segment of it.
 */
static bool two_phase(const struct coll *k)
{
	return k->kind == RBLN_COLL_ALL_REDUCE && k->comm->size > 1;
}

/* Elements of the part of a chunk of @mc elements that goes to each rank. */
static int64_t part_of(const struct coll *k, int64_t mc)
{
	return two_phase(k) ? (mc + k->comm->size - 1) / k->comm->size : mc;
}

/* Elements of segment @r of a chunk of @mc (an all-reduce's): the last ones may be short. */
static int64_t seg_len(const struct coll *k, int64_t mc, int r)
{
	int64_t seg = part_of(k, mc), lo = r * seg;

	return lo >= mc ? 0 : mc - lo < seg ? mc - lo : seg;
}

/* Nanoseconds: a deadline in whole milliseconds could come up to 1 ms early. */
static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The one place a rank waits for others: completes @n requests of @reqs
 * by polling (rbln_comm_poll_pause()), until @timeout_ms have passed.
 * @peers[i] is the rank that request i exchanges with, or -1 for one
 * with no single peer (a collective of the caller's communicator). On a
 * timeout, or an MPI error that leaves requests behind, the requests MPI
 * still has are moved to the front of @reqs, *@left gets their count and
 * the status says what happened: which ranks did not answer, during @what.
 */
static rbln_status wait_all(MPI_Request *reqs, int *peers, int n, int64_t timeout_ms,
			    uint64_t *beat, const char *fn, const char *what, int *left)
{
	/* A timeout of more than a century does not run out. */
	int64_t deadline = timeout_ms > INT64_MAX / 2 / 1000000 ? INT64_MAX :
			   now_ns() + timeout_ms * 1000000;
	int done = 0, err, i, j, k, nnamed = 0, len = 0;
	char ranks[160] = "", msg[MPI_MAX_ERROR_STRING];

	int64_t t, start = now_ns(), beat_at = start + BEAT_NS;

	*left = 0;
	for (;;) {
		err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (done && err == MPI_SUCCESS)
			return RBLN_OK;
		t = now_ns();
		if (err != MPI_SUCCESS || t >= deadline)
			break;
		if (beat && t >= beat_at) {
			heartbeat(beat);
			beat_at = t + BEAT_NS;
		}
		rbln_comm_poll_pause(t - start);
	}
	/* Those still in MPI's hands, and the ranks they wait for. */
	for (i = 0, j = 0; i < n; i++) {
		int flag = 1;

		if (reqs[i] != MPI_REQUEST_NULL)
			MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
		if (flag)
			continue;
		reqs[j] = reqs[i];
		peers[j] = peers[i];
		for (k = 0; k < j && peers[k] != peers[j]; k++)
			;
		if (k == j && peers[j] >= 0 && len < (int)sizeof(ranks) - 16) {
			len += snprintf(ranks + len, sizeof(ranks) - len, "%s%d", nnamed ? ", " : "",
					peers[j]);
			nnamed++;
		}
		j++;
	}
	*left = j;
	if (err != MPI_SUCCESS) {
		if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
			snprintf(msg, sizeof(msg), "error %d", err);
		return rbln_fail(RBLN_ERROR_DEVICE, "%s: MPI failed during %s: %s", fn, what, msg);
	}
	if (!j)
		return RBLN_OK;	/* all done at the last look */
	if (nnamed)
		return rbln_fail(RBLN_ERROR_TIMEOUT, "%s: no answer from rank%s %s in %lld ms, during %s",
				 fn, nnamed > 1 ? "s" : "", ranks, (long long)timeout_ms, what);
	return rbln_fail(RBLN_ERROR_TIMEOUT,
			 "%s: no answer in %lld ms, during %s (an MPI collective cannot say from which rank)",
			 fn, (long long)timeout_ms, what);
}

/* Makes @c unusable, for rbln_last_error()'s reason. */
static void comm_break(rbln_comm *c)
{
	pthread_mutex_lock(&c->q_lock);
	snprintf(c->broken, sizeof(c->broken), "%s", rbln_last_error());
	pthread_mutex_unlock(&c->q_lock);
}

/*
 * Waits for comm->reqs[0..@n): a timeout (or an MPI error leaving calls
 * behind) makes the communicator unusable, keeping the calls MPI still
 * has, and their buffers, until rbln_comm_free().
 */
static rbln_status comm_wait(rbln_comm *c, int n, const char *fn, const char *what)
{
	rbln_status st = wait_all(c->reqs, c->peers, n, __atomic_load_n(&c->timeout_ms,
									   __ATOMIC_RELAXED),
				  c->beat, fn, what, &c->npending);

	if (st && c->npending)
		comm_break(c);
	return st;
}

/* Posts a receive (@send false) or a send of @bytes at @buf with rank @peer as comm->reqs[*@n]. */
static int post(rbln_comm *c, int *n, bool send, void *buf, int bytes, int peer, int tag)
{
	int err;

	c->peers[*n] = peer;
	err = send ? MPI_Isend(buf, bytes, MPI_BYTE, peer, tag, c->mpi, &c->reqs[*n]) :
		     MPI_Irecv(buf, bytes, MPI_BYTE, peer, tag, c->mpi, &c->reqs[*n]);
	if (err == MPI_SUCCESS)
		(*n)++;
	return err;
}

/*
 * Every rank's @bytes at @all + rank * @bytes, this rank's already at its
 * place, to every rank (an all-gather, point to point so that a wait that
 * times out knows whose part is missing); during @what.
 */
static rbln_status comm_allgather(rbln_comm *c, void *all, int bytes, int tag, const char *fn,
				  const char *what)
{
	int n = 0, r, err = MPI_SUCCESS;
	char *p = all;
	rbln_status st;

	for (r = 0; r < c->size && err == MPI_SUCCESS; r++)
		if (r != c->rank)
			err = post(c, &n, false, p + (size_t)r * bytes, bytes, r, tag);
	for (r = 0; r < c->size && err == MPI_SUCCESS; r++)
		if (r != c->rank)
			err = post(c, &n, true, p + (size_t)c->rank * bytes, bytes, r, tag);
	st = comm_wait(c, n, fn, what);
	if (!st && err != MPI_SUCCESS)
		st = rbln_comm_mpi_fail(fn, "MPI_Isend/MPI_Irecv", err);
	return st;
}

/* Fails when @comm timed out before: it cannot tell where the others are. */
static rbln_status comm_usable(rbln_comm *comm, const char *fn)
{
	rbln_status st = RBLN_OK;

	pthread_mutex_lock(&comm->q_lock);
	if (comm->broken[0])
		st = rbln_fail(RBLN_ERROR_TIMEOUT,
			       "%s: the communicator is unusable after a timeout: %s", fn,
			       comm->broken);
	pthread_mutex_unlock(&comm->q_lock);
	return st;
}

static bool comm_ok(const rbln_comm *comm, const char *fn)
{
	if (!comm) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: NULL communicator", fn);
		return false;
	}
	if (comm->magic != COMM_MAGIC) {
		rbln_fail(RBLN_ERROR_INVALID, "%s: not a live communicator (freed?)", fn);
		return false;
	}
	return true;
}

/*
 * Every rank's @mine in @all, in rank order, over the caller's @mpi,
 * where point-to-point traffic of ours could meet the caller's: an
 * MPI_Iallgather, within @timeout_ms. On a timeout both buffers stay
 * MPI's: *@abandoned is then true and the caller must not free them.
 */
static rbln_status init_gather(MPI_Comm mpi, const struct rbln_coll_meta *mine,
			       struct rbln_coll_meta *all, int64_t timeout_ms, bool *abandoned,
			       const char *fn)
{
	MPI_Request req;
	int peer = -1, left, err;
	rbln_status st;

	err = MPI_Iallgather(mine, sizeof(*mine), MPI_BYTE, all, sizeof(*mine), MPI_BYTE, mpi, &req);
	if (err != MPI_SUCCESS)
		return rbln_comm_mpi_fail(fn, "MPI_Iallgather", err);
	st = wait_all(&req, &peer, 1, timeout_ms, NULL, fn, "the check that every rank can join",
		      &left);
	*abandoned = left;
	return st;
}

/*
 * Starts @c's progress thread when collectives can be asynchronous: MPI
 * lets another thread call it (MPI_THREAD_MULTIPLE), the device has WAIT,
 * and RBLN_COMM_ASYNC is not 0. Else, or when it cannot, the calling
 * thread runs them, as the ranks may do differently.
 */
static bool start_async(rbln_comm *c)
{
	const char *env = getenv("RBLN_COMM_ASYNC");
	uint64_t caps = 0;
	int level = MPI_THREAD_SINGLE;

	MPI_Query_thread(&level);
	if ((env && !strcmp(env, "0")) || level != MPI_THREAD_MULTIPLE ||
	    rbln_drm_get_param(c->dev->drm, RBLN_PARAM_ISA_CAPS, &caps) ||
	    !(caps & RBLN_ISA_CAP_WAIT))
		return false;
	if (rbln_host_buf_new(c->dev, 4096, &c->words))
		return false;
	if (!pthread_create(&c->thread, NULL, progress_main, c))
		return true;
	pthread_mutex_lock(&c->dev->lock);
	rbln_host_buf_release(c->dev, c->words, 0);
	pthread_mutex_unlock(&c->dev->lock);
	c->words = NULL;
	return false;
}

rbln_status rbln_comm_init(rbln_comm **out, MPI_Comm mpi, int device)
{
	const char *fn = "rbln_comm_init";
	struct rbln_coll_meta *mine = NULL, *all = NULL;
	int inited = 0, finalized = 0, rank, size, r, err, peer = -1, left = 0;
	bool abandoned = false;
	int64_t timeout_ms = RBLN_COMM_DEFAULT_TIMEOUT_MS;
	rbln_status gathered;
	struct rbln_ldev *l = NULL;
	rbln_status st = RBLN_OK;
	MPI_Request req;
	rbln_comm *c;

	if (!out)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: NULL result pointer", fn);
	*out = NULL;
	MPI_Initialized(&inited);
	MPI_Finalized(&finalized);
	if (!inited || finalized)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: MPI is %s", fn,
				 finalized ? "finalized" : "not initialized (MPI_Init first)");
	if (mpi == MPI_COMM_NULL)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: MPI_COMM_NULL", fn);
	MPI_Comm_rank(mpi, &rank);
	MPI_Comm_size(mpi, &size);

	/* Without the two, this rank cannot even tell the others it cannot join. */
	mine = calloc(1, sizeof(*mine));
	all = calloc(size, sizeof(*all));
	c = calloc(1, sizeof(*c));
	if (c) {
		c->metas = calloc(size, sizeof(*c->metas));
		c->settles = calloc(2 * size, sizeof(*c->settles));
		c->reqs = calloc(2 * size, sizeof(*c->reqs));
		c->peers = calloc(2 * size, sizeof(*c->peers));
	}
	if (!mine || !all) {
		free(mine);
		free(all);
		if (c) {
			free(c->metas);
			free(c->settles);
			free(c->reqs);
			free(c->peers);
			free(c);
		}
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	}
	if (!c || !c->metas || !c->settles || !c->reqs || !c->peers)
		st = rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	if (!st)
		st = rbln_comm_env_timeout(&timeout_ms, fn);
	if (!st) {
		l = rbln_ldev_get(device);
		st = l ? RBLN_OK : rbln_last_status();
	}
	if (!st && l->nmembers != 1)
		st = rbln_fail(RBLN_ERROR_UNSUPPORTED,
			       "%s: rbln:%d is a logical device of %d NPUs: a rank takes one NPU",
			       fn, l->index, l->nmembers);
	rbln_coll_meta_status(mine, st);
	/* Every rank learns whether all can join before the collective MPI_Comm_idup. */
	gathered = init_gather(mpi, mine, all, timeout_ms, &abandoned, fn);
	if (!st)
		st = gathered;
	for (r = 0; r < size && !st; r++)
		if (all[r].status)
			st = rbln_fail(all[r].status, "%s: rank %d cannot join: %s", fn, r,
				       all[r].error);
	if (!abandoned) {	/* else MPI may still write them: they stay its */
		free(all);
		free(mine);
	}
	if (!st) {
		err = MPI_Comm_idup(mpi, &c->mpi, &req);
		if (err != MPI_SUCCESS)
			st = rbln_comm_mpi_fail(fn, "MPI_Comm_idup", err);
		else
			st = wait_all(&req, &peer, 1, timeout_ms, NULL, fn, "MPI_Comm_idup", &left);
	}
	if (st) {
		/* What MPI_Comm_idup still writes to, it keeps. */
		if (c && !left) {
			free(c->metas);
			free(c->settles);
			free(c->reqs);
			free(c->peers);
			free(c);
		}
		return st;
	}
	/* Failures come back as codes, for rbln_last_error(), rather than aborting the job. */
	MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
	c->magic = COMM_MAGIC;
	c->rank = rank;
	c->size = size;
	c->device = l->index;
	c->dev = l->members[0];
	c->timeout_ms = timeout_ms;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->q_lock, NULL);
	pthread_cond_init(&c->q_cond, NULL);
	c->peer = rbln_peer_init(c->mpi, rank, size, c->dev, timeout_ms);
	c->async = !c->peer && start_async(c);
	*out = c;
	return RBLN_OK;
}

rbln_status rbln_comm_set_timeout(rbln_comm *comm, int64_t ms)
{
	if (!comm_ok(comm, "rbln_comm_set_timeout"))
		return RBLN_ERROR_INVALID;
	if (ms <= 0)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "rbln_comm_set_timeout: %lld ms: a timeout is above 0", (long long)ms);
	__atomic_store_n(&comm->timeout_ms, ms, __ATOMIC_RELAXED);
	return RBLN_OK;
}

int64_t rbln_comm_timeout(const rbln_comm *comm)
{
	return comm_ok(comm, "rbln_comm_timeout") ? comm->timeout_ms : RBLN_ERROR_INVALID;
}

/*
 * After a timeout: the calls MPI still had, cancelled where MPI can
 * (receives that never matched); when none is left, their buffers go
 * back. Else the buffers stay MPI's for good: a rank that wakes up could
 * still write to them, and a staging buffer must not be reused then.
 */
static void comm_abandon(rbln_comm *comm)
{
	int done = 0, i;

	if (!comm->npending)
		return;
	MPI_Testall(comm->npending, comm->reqs, &done, MPI_STATUSES_IGNORE);
	for (i = 0; i < comm->npending && !done; i++)
		if (comm->reqs[i] != MPI_REQUEST_NULL)
			MPI_Cancel(&comm->reqs[i]);
	if (!done)
		MPI_Testall(comm->npending, comm->reqs, &done, MPI_STATUSES_IGNORE);
	if (done) {
		comm->npending = 0;
		return;
	}
	for (i = 0; i < comm->npending; i++)
		if (comm->reqs[i] != MPI_REQUEST_NULL)
			MPI_Request_free(&comm->reqs[i]);
}

rbln_status rbln_comm_free(rbln_comm *comm)
{
	int finalized = 0, err = MPI_SUCCESS;
	uint64_t point;

	if (!comm)
		return RBLN_OK;
	if (!comm_ok(comm, "rbln_comm_free"))
		return RBLN_ERROR_INVALID;
	comm->magic = 0;
	if (comm->async) {
		/* The thread runs what is queued first: the device waits for it. */
		pthread_mutex_lock(&comm->q_lock);
		comm->stop = true;
		pthread_cond_broadcast(&comm->q_cond);
		pthread_mutex_unlock(&comm->q_lock);
		pthread_join(comm->thread, NULL);
		pthread_mutex_lock(&comm->dev->lock);
		point = comm->dev->point;
		rbln_host_buf_release(comm->dev, comm->words, point);
		pthread_mutex_unlock(&comm->dev->lock);
		for (int i = 0; i < 4; i++)
			release(comm, &comm->bufs[i], point);
	}
	rbln_peer_free(comm->peer);
	MPI_Finalized(&finalized);
	finalized |= comm->mpi == MPI_COMM_NULL;	/* in process: no MPI */
	if (!finalized)
		comm_abandon(comm);
	if (!finalized)
		err = MPI_Comm_free(&comm->mpi);
	pthread_mutex_destroy(&comm->lock);
	pthread_mutex_destroy(&comm->q_lock);
	pthread_cond_destroy(&comm->q_cond);
	if (!finalized && comm->npending)
		return RBLN_OK;	/* what the abandoned calls use stays MPI's */
	for (int i = 0; i < comm->nparked; i++) {
		pthread_mutex_lock(&comm->dev->lock);
		rbln_host_buf_release(comm->dev, comm->parked[i].buf, comm->parked[i].point);
		pthread_mutex_unlock(&comm->dev->lock);
	}
	free(comm->parked);
	free(comm->scratch);
	free(comm->metas);
	free(comm->settles);
	free(comm->reqs);
	free(comm->peers);
	free(comm);
	if (err != MPI_SUCCESS)
		return rbln_comm_mpi_fail("rbln_comm_free", "MPI_Comm_free", err);
	return RBLN_OK;
}

int rbln_comm_rank(const rbln_comm *comm)
{
	return comm_ok(comm, "rbln_comm_rank") ? comm->rank : RBLN_ERROR_INVALID;
}

int rbln_comm_size(const rbln_comm *comm)
{
	return comm_ok(comm, "rbln_comm_size") ? comm->size : RBLN_ERROR_INVALID;
}

int rbln_comm_device(const rbln_comm *comm)
{
	return comm_ok(comm, "rbln_comm_device") ? comm->device : RBLN_ERROR_INVALID;
}

/* Is @t a live tensor on the communicator's device? @what names it. */
static rbln_status check_tensor(const struct coll *k, rbln_tensor *t, const char *what)
{
	const char *fn = rbln_coll_names[k->kind];

	if (!rbln_tensor_ok(t, fn))
		return RBLN_ERROR_INVALID;
	if (t->device != k->comm->device) {
		if (t->device == RBLN_CPU)
			return rbln_fail(RBLN_ERROR_INVALID,
					 "%s: %s is a CPU tensor; the communicator's device is rbln:%d",
					 fn, what, k->comm->device);
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: %s is on rbln:%d; the communicator's device is rbln:%d", fn,
				 what, t->device, k->comm->device);
	}
	return RBLN_OK;
}

/*
 * This rank's arguments, checked: RBLN_OK with k->n set, or why not. The
 * tensors are not touched until every rank agrees.
 */
static rbln_status check_args(struct coll *k)
{
	const char *fn = rbln_coll_names[k->kind];
	char what[64];
	rbln_status st;

	st = check_tensor(k, k->in, k->kind <= RBLN_COLL_REDUCE_SCATTER ? "the input" : "the tensor");
	if (!st && k->out != k->in)
		st = check_tensor(k, k->out, "the output");
	if (!st)
		st = rbln_coll_check(k->kind, k->op, k->root, k->comm->rank, k->comm->size, k->in,
				     k->out, k->in_place, k->in->numel, k->out->numel, NULL, &k->n);
	if (st)
		return st;
	snprintf(what, sizeof(what), "%s: a transfer through the host", fn);
	return rbln_capture_refuse(k->comm->device, NULL, what);
}

/*
 * Every rank's request and argument status, compared: RBLN_OK on every
 * rank or a failure on every rank. @local: this rank's own check.
 */
static rbln_status agree(struct coll *k, rbln_status local)
{
	const char *fn = rbln_coll_names[k->kind];
	rbln_comm *c = k->comm;
	struct rbln_coll_meta *all = c->metas, *mine = &c->metas[c->rank];
	rbln_status st;
	int n = 0, err;

	*mine = (struct rbln_coll_meta){ .kind = k->kind, .op = k->op, .root = k->root };
	if (!local) {
		mine->dtype = k->dtype;
		mine->count = k->n;
	}
	rbln_coll_meta_status(mine, local);
	if (rbln_coll_is_pair(k->kind)) {
		/* A peer that is no rank has no one to tell. */
		if (k->root < 0 || k->root >= c->size || k->root == c->rank)
			return local;
		err = post(c, &n, false, &all[k->root], sizeof(*all), k->root, TAG_META);
		if (err == MPI_SUCCESS)
			err = post(c, &n, true, mine, sizeof(*mine), k->root, TAG_META);
		st = comm_wait(c, n, fn, "the check of the arguments");
		if (!st && err != MPI_SUCCESS)
			st = rbln_comm_mpi_fail(fn, "MPI_Isend/MPI_Irecv", err);
		if (st)
			return c->broken[0] || !local ? st : local;
		return rbln_coll_judge(all, c->size, c->rank, mine, k->root);
	}
	st = comm_allgather(c, all, sizeof(*all), TAG_META, fn, "the check of the arguments");
	if (st)
		return c->broken[0] || !local ? st : local;
	return rbln_coll_judge(all, c->size, c->rank, mine, -1);
}

/*
 * After the data: every rank learns whether another failed midway, and
 * then fails too (the result is not valid anywhere). Not after a timeout:
 * the others are not where this rank is.
 */
static rbln_status settle(struct coll *k, rbln_status st)
{
	const char *fn = rbln_coll_names[k->kind];
	rbln_comm *c = k->comm;
	int *mine = &c->settles[2 * c->rank], worst[2] = { 0, 0 }, n = 0, r, err = MPI_SUCCESS;
	rbln_status got;

	if (c->broken[0])
		return st;
	mine[0] = st;
	mine[1] = c->rank;
	if (rbln_coll_is_pair(k->kind)) {
		err = post(c, &n, false, &c->settles[2 * k->root], 2 * sizeof(int), k->root,
			   TAG_SETTLE);
		if (err == MPI_SUCCESS)
			err = post(c, &n, true, mine, 2 * sizeof(int), k->root, TAG_SETTLE);
		got = comm_wait(c, n, fn, "the exchange of statuses after the data");
		if (!got && err != MPI_SUCCESS)
			got = rbln_comm_mpi_fail(fn, "MPI_Isend/MPI_Irecv", err);
	} else {
		got = comm_allgather(c, c->settles, 2 * sizeof(int), TAG_SETTLE, fn,
				     "the exchange of statuses after the data");
	}
	if (st)
		return c->broken[0] ? got : st;
	if (got)
		return got;
	for (r = 0; r < c->size; r++) {
		if (rbln_coll_is_pair(k->kind) ? r != k->root && r != c->rank : false)
			continue;
		if (c->settles[2 * r] < worst[0])
			worst[0] = c->settles[2 * r], worst[1] = r;
	}
	if (worst[0])
		return rbln_fail(worst[0], "%s: rank %d failed midway: the result is not valid",
				 fn, worst[1]);
	return RBLN_OK;
}

static void bounce(struct coll *k, bool to_host, uint64_t bytes)
{
	if (bytes && rbln_explain_active())
		rbln_explain_bounce(rbln_coll_ops[k->kind], to_host, bytes, k->site);
}

/*
 * Staging buffer *@b back to the device once the job at @point is done;
 * after a timeout that left calls in MPI's hands, to the communicator,
 * as MPI may still use it (see comm_abandon()).
 */
static void release(rbln_comm *c, struct rbln_host_buf **b, uint64_t point)
{
	struct parked *p;

	if (!*b)
		return;
	if (c->npending) {
		if (c->nparked == c->cap_parked) {
			p = realloc(c->parked, (c->cap_parked + 4) * sizeof(*p));
			if (p) {
				c->parked = p;
				c->cap_parked += 4;
			}
		}
		/* Without room to note it, it is left to MPI, unreferenced: never reused. */
		if (c->nparked < c->cap_parked)
			c->parked[c->nparked++] = (struct parked){ .buf = *b, .point = point };
		*b = NULL;
		return;
	}
	pthread_mutex_lock(&c->dev->lock);
	rbln_host_buf_release(c->dev, *b, point);
	pthread_mutex_unlock(&c->dev->lock);
	*b = NULL;
}

/* Elements of chunk @c. */
static int64_t chunk_len(const struct coll *k, int64_t c)
{
	int64_t c0 = c * k->m;

	return k->n - c0 < k->m ? k->n - c0 : k->m;
}

/*
 * The host's steps, numbered from 1: the exchange of chunk c through MPI
 * (phase 0), then for an all-reduce of several ranks the all-gather of
 * its folded segments (phase 1); after the last, the settling.
 */
static uint64_t step_of(const struct coll *k, int64_t c, int phase)
{
	return (uint64_t)(c * k->phases + phase + 1);
}

static uint64_t final_step(const struct coll *k)
{
	return (uint64_t)(k->chunks * k->phases + 1);
}

/* Slot c % 2 of the fold buffer, where chunk @c's parts are folded. */
static uint64_t fold_va(const struct coll *k, int64_t c)
{
	return rbln_block_va(k->fold) +
	       (uint64_t)(c % 2) * k->comm->size * part_of(k, k->m) * k->esize;
}

/*
 * Queues the @n copies of @cp. Asynchronous, each job first waits for
 * host step @step (0: none) on the device: a cancelled collective skips
 * its copies, so the result is not written once the host side failed.
 */
static rbln_status queue_copies(struct coll *k, uint64_t step, const struct rbln_copy *cp, int n)
{
	struct rbln_copy_guard guard = { k->word_bo, k->word_va, step << STEP_SHIFT };
	bool wait = k->async && step;
	uint64_t point;
	rbln_status st;

	st = rbln_staging_jobs(k->d, cp, n, wait ? &guard : NULL, &point);
	if (!st && (n || wait))
		k->last = point;
	return st;
}

/* Notes the bytes of @cp[0..@n) that crossed to or from the host. */
static void bounce_copies(struct coll *k, bool to_host, const struct rbln_copy *cp, int n)
{
	uint64_t bytes = 0;

	for (int i = 0; i < n; i++)
		bytes += cp[i].bytes;
	bounce(k, to_host, bytes);
}

/* Host step @step waits for the jobs queued so far. */
static rbln_status need(struct coll *k, uint64_t step)
{
	k->need[step - 1] = k->last;
	return k->async ? rbln_point_syncobj(k->d, k->last, k->syncs[step - 1]) : RBLN_OK;
}

/* F(c): this rank's part of chunk @c from the device to staging buffer s[c % 2]. */
static rbln_status queue_fetch(struct coll *k, int64_t c)
{
	int64_t c0 = c * k->m, mc = chunk_len(k, c), part = part_of(k, mc);
	struct rbln_host_buf *s = k->s[c % 2];
	uint64_t bytes = mc * k->esize;
	int r, n = 0;
	rbln_status st;

	if (k->kind == RBLN_COLL_REDUCE_SCATTER) {
		/* Part r of the input goes to rank r. */
		for (r = 0; r < k->comm->size; r++)
			k->cp[n++] = (struct rbln_copy){ s->handle, k->in_bo, s->va + r * bytes,
						    k->in_va + (r * k->n + c0) * k->esize, bytes };
	} else if (two_phase(k)) {
		/* Segment r of the chunk goes to rank r, at its place in a part's stride. */
		for (r = 0; r < k->comm->size; r++)
			if (seg_len(k, mc, r))
				k->cp[n++] = (struct rbln_copy){
					s->handle, k->in_bo, s->va + r * part * k->esize,
					k->in_va + (c0 + r * part) * k->esize,
					seg_len(k, mc, r) * k->esize };
	} else if (k->kind != RBLN_COLL_RECV &&
		   (k->kind != RBLN_COLL_BROADCAST || k->comm->rank == k->root)) {
		k->cp[n++] = (struct rbln_copy){ s->handle, k->in_bo, s->va, k->in_va + c0 * k->esize,
					    bytes };
	}
	/* MPI is done with s[c % 2] after the last step of chunk c - 2. */
	st = queue_copies(k, c >= 2 ? step_of(k, c - 2, k->phases - 1) : 0, k->cp, n);
	if (st)
		return st;
	if (n) {
		k->last_in = k->last;
		bounce_copies(k, true, k->cp, n);
	}
	return need(k, step_of(k, c, 0));
}

/*
 * B(c), after host step ex(c): chunk @c from where MPI put it (g[c % 2],
 * or s[c % 2] for broadcast and recv) to the result; or, a reduction,
 * every rank's part to the fold buffer, folded there on the NPU, and the
 * folded part to the result (reduce-scatter) or to s[c % 2] for the
 * all-gather of the folded segments (all-reduce). Only copies that wait
 * for the step write the result.
 */
static rbln_status queue_store(struct coll *k, int64_t c)
{
	int size = k->comm->size, rank = k->comm->rank, r, n = 0;
	int64_t c0 = c * k->m, mc = chunk_len(k, c), len;
	uint64_t step = step_of(k, c, 0), bytes = mc * k->esize;
	uint64_t pbytes = part_of(k, mc) * k->esize, fold, point;
	struct rbln_host_buf *g = is_gathered(k->kind) ? k->g[c % 2] : k->s[c % 2];
	uint32_t fold_bo;
	rbln_status st = RBLN_OK;

	if (!rbln_coll_is_reduction(k->kind) || size == 1) {
		if (k->kind == RBLN_COLL_ALL_GATHER) {
			for (r = 0; r < size; r++)
				if (!k->in_place || r != rank)
					k->cp[n++] = (struct rbln_copy){
						k->out_bo, g->handle,
						k->out_va + (r * k->n + c0) * k->esize,
						g->va + r * bytes, bytes };
		} else if (k->kind != RBLN_COLL_SEND &&
			   (k->kind != RBLN_COLL_BROADCAST || rank != k->root)) {
			k->cp[n++] = (struct rbln_copy){ k->out_bo, g->handle, k->out_va + c0 * k->esize,
						    g->va, bytes };
		}
		st = queue_copies(k, step, k->cp, n);
		if (!st)
			bounce_copies(k, false, k->cp, n);
		return st;
	}

	fold_bo = rbln_block_handle(k->fold);
	fold = fold_va(k, c);
	k->cp[0] = (struct rbln_copy){ fold_bo, g->handle, fold, g->va, size * pbytes };
	st = queue_copies(k, step, k->cp, 1);
	if (st)
		return st;
	bounce_copies(k, false, k->cp, 1);
	/* ((p0 op p1) op p2) ..., in the fold buffer's first part. */
	len = two_phase(k) ? seg_len(k, mc, rank) : mc;
	for (r = 1; r < size && len && !st; r++) {
		st = rbln_ew_binary(k->d, rbln_redop_subs[k->op], k->dtype, len, fold, fold,
				    fold + r * pbytes, &fold_bo, 1, rbln_coll_ops[k->kind], k->site,
				    &point);
		if (!st)
			k->last = point;
	}
	if (st || !len)
		return st;
	if (two_phase(k))
		k->cp[0] = (struct rbln_copy){ k->s[c % 2]->handle, fold_bo, k->s[c % 2]->va, fold,
					  len * k->esize };
	else
		k->cp[0] = (struct rbln_copy){ k->out_bo, fold_bo, k->out_va + c0 * k->esize, fold,
					  len * k->esize };
	st = queue_copies(k, step, k->cp, 1);
	if (!st && two_phase(k))
		bounce_copies(k, true, k->cp, 1);
	return st;
}

/*
 * C(c), an all-reduce of several ranks, after host step ag(c): the
 * others' folded segments of chunk @c from g[c % 2] to the result, and
 * this rank's from the fold buffer.
 */
static rbln_status queue_gathered(struct coll *k, int64_t c)
{
	int64_t c0 = c * k->m, mc = chunk_len(k, c), part = part_of(k, mc);
	struct rbln_host_buf *g = k->g[c % 2];
	int r, n = 0, rank = k->comm->rank;
	rbln_status st;

	if (seg_len(k, mc, rank))
		k->cp[n++] = (struct rbln_copy){ k->out_bo, rbln_block_handle(k->fold),
					    k->out_va + (c0 + rank * part) * k->esize,
					    fold_va(k, c), seg_len(k, mc, rank) * k->esize };
	for (r = 0; r < k->comm->size; r++)
		if (r != rank && seg_len(k, mc, r))
			k->cp[n++] = (struct rbln_copy){ k->out_bo, g->handle,
						    k->out_va + (c0 + r * part) * k->esize,
						    g->va + r * part * k->esize,
						    seg_len(k, mc, r) * k->esize };
	st = queue_copies(k, step_of(k, c, 1), k->cp, n);
	if (!st && n > 1)
		bounce_copies(k, false, k->cp + 1, n - 1);
	return st;
}

/* "chunk 3 of 8" and the like, for a wait's message. */
static const char *chunk_name(char *buf, size_t len, const struct coll *k, int64_t c0,
			      const char *phase)
{
	snprintf(buf, len, "%s of chunk %lld of %lld", phase, (long long)(c0 / k->m + 1),
		 (long long)((k->n + k->m - 1) / k->m));
	return buf;
}

/*
 * Chunk @c0 (@mc elements; a part of it from each rank, or all of it)
 * through MPI: from @s to @g (the same for broadcast and recv).
 */
static rbln_status exchange(struct coll *k, void *s, void *g, int64_t c0, int64_t mc)
{
	const char *fn = rbln_coll_names[k->kind];
	int bytes = part_of(k, mc) * k->esize, err = MPI_SUCCESS, n = 0, r;
	rbln_comm *c = k->comm;
	char what[64];
	rbln_status st;

	chunk_name(what, sizeof(what), k, c0, "the data");
	switch (k->kind) {
	case RBLN_COLL_ALL_REDUCE:
		if (two_phase(k))
			goto all_to_all;
		/* fall through */
	case RBLN_COLL_ALL_GATHER:
		/* Every rank's part at its place: this rank's from @s. */
		memcpy((char *)g + (size_t)c->rank * bytes, s, bytes);
		return comm_allgather(c, g, bytes, TAG_DATA, fn, what);
	case RBLN_COLL_REDUCE_SCATTER:
	all_to_all:
		/* Part r of @s to rank r, rank r's part of this rank's to part r of @g. */
		for (r = 0; r < c->size && err == MPI_SUCCESS; r++)
			if (r != c->rank)
				err = post(c, &n, false, (char *)g + (size_t)r * bytes, bytes, r,
					   TAG_DATA);
		for (r = 0; r < c->size && err == MPI_SUCCESS; r++)
			if (r != c->rank)
				err = post(c, &n, true, (char *)s + (size_t)r * bytes, bytes, r,
					   TAG_DATA);
		memcpy((char *)g + (size_t)c->rank * bytes, (char *)s + (size_t)c->rank * bytes,
		       bytes);
		break;
	case RBLN_COLL_BROADCAST:
		for (r = 0; r < c->size && err == MPI_SUCCESS; r++)
			if (c->rank == k->root ? r != c->rank : r == k->root)
				err = post(c, &n, c->rank == k->root, s, bytes, r, TAG_DATA);
		break;
	default:
		err = post(c, &n, k->kind == RBLN_COLL_SEND, s, bytes, k->root, TAG_DATA);
		break;
	}
	st = comm_wait(c, n, fn, what);
	if (!st && err != MPI_SUCCESS)
		st = rbln_comm_mpi_fail(fn, "MPI_Isend/MPI_Irecv", err);
	return st;
}

/*
 * Where MPI reads and writes once this rank has failed: it still takes
 * part, with garbage. The communicator's, kept for the next failure.
 */
static bool scratch(struct coll *k)
{
	if (!k->comm->scratch)
		k->comm->scratch = calloc(2, RBLN_STAGING_CHUNK);
	k->scratch = k->comm->scratch;
	return k->scratch != NULL;
}

/*
 * The all-gather of the folded segments of chunk @c0 (@mc elements) of an
 * all-reduce: this rank's at @s to every rank, theirs to @g.
 */
static rbln_status gather_folded(struct coll *k, void *s, void *g, int64_t c0, int64_t mc)
{
	int bytes = part_of(k, mc) * k->esize;
	char what[64];

	memcpy((char *)g + (size_t)k->comm->rank * bytes, s, bytes);
	return comm_allgather(k->comm, g, bytes, TAG_GATHER, rbln_coll_names[k->kind],
			      chunk_name(what, sizeof(what), k, c0, "the folded segments"));
}

/* Waits for the jobs that host step @step needs (need()). */
static rbln_status wait_need(struct coll *k, uint64_t step)
{
	const char *fn = rbln_coll_names[k->kind];
	uint32_t h = k->async ? k->syncs[step - 1] : 0;
	int status = 0, ret;

	if (!k->async)
		return rbln_wait_point(k->d, k->need[step - 1]);
	/*
	 * Not rbln_wait_point(): this thread never takes d->lock (see
	 * progress_main()). The call may not have queued the job yet.
	 */
	if (drmSyncobjWait(rbln_drm_fd(k->d->drm), &h, 1, INT64_MAX,
			   DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL))
		return rbln_fail(RBLN_ERROR_DEVICE, "%s: waiting for the device failed: %s", fn,
				 strerror(errno));
	if (__atomic_load_n(&k->queue_failed, __ATOMIC_ACQUIRE))
		return rbln_fail(RBLN_ERROR_DEVICE, "%s: its device work could not be queued", fn);
	ret = rbln_drm_fence_status(k->d->drm, h, 0, &status);
	if (ret || status < 0)
		return rbln_fail(RBLN_ERROR_DEVICE, "%s: device work failed: %s", fn,
				 strerror(ret ? -ret : -status));
	return RBLN_OK;
}

/* Host step @step is done: the device's WAITs for it may go on. */
static void publish(struct coll *k, uint64_t step)
{
	if (k->async)
		__atomic_store_n(k->word, step << STEP_SHIFT, __ATOMIC_RELEASE);
}

/*
 * Host step (@c, @phase) through MPI, once the jobs it needs are done:
 * the exchange of chunk @c, or the all-gather of its folded segments. A
 * rank that failed (k->local) still takes part, with scratch data.
 */
static void host_step(struct coll *k, int64_t c, int phase)
{
	uint64_t step = step_of(k, c, phase);
	char *s, *g;

	if (!k->local)
		k->local = wait_need(k, step);
	if (k->local && !scratch(k)) {
		k->mpi = k->local;	/* cannot even take part */
		return;
	}
	s = k->local ? k->scratch : k->s[c % 2]->cpu;
	g = k->local ? k->scratch + RBLN_STAGING_CHUNK :
	    is_gathered(k->kind) ? k->g[c % 2]->cpu : s;
	if (phase)
		k->mpi = gather_folded(k, s, g, c * k->m, chunk_len(k, c));
	else
		k->mpi = exchange(k, s, g, c * k->m, chunk_len(k, c));
	if (!k->mpi)
		publish(k, step);
}

/*
 * The device's part of the chunks, in the order the device runs it: each
 * chunk's fetch is queued before the chunk before it is stored, so that
 * the device copies while the network works. Inline, the host's steps
 * run in between, each before the jobs that need it; asynchronous, the
 * progress thread runs them, and those jobs wait for them on the device.
 */
static void run(struct coll *k)
{
	int64_t c;

	if (k->chunks)
		k->local = queue_fetch(k, 0);
	for (c = 0; c < k->chunks && !k->mpi; c++) {
		if (!k->local && c + 1 < k->chunks)
			k->local = queue_fetch(k, c + 1);
		if (!k->async)
			host_step(k, c, 0);
		if (!k->local && !k->mpi)
			k->local = queue_store(k, c);
		if (!two_phase(k))
			continue;
		if (!k->local && !k->mpi)
			k->local = need(k, step_of(k, c, 1));
		if (!k->async && !k->mpi)
			host_step(k, c, 1);
		if (!k->local && !k->mpi)
			k->local = queue_gathered(k, c);
	}
}

/* What the data's way ended with: a timeout is what the caller must hear of. */
static rbln_status outcome(const struct coll *k)
{
	return k->comm->broken[0] ? k->mpi : k->local ? k->local : k->mpi;
}

/* Device addresses of the tensors; staging buffers; the fold buffer of a reduction. */
static rbln_status prepare(struct coll *k)
{
	const char *fn = rbln_coll_names[k->kind];
	int size = k->comm->size, i, nsteps;
	rbln_comm *c = k->comm;
	rbln_status st;
	char msg[256];
	int ret;

	st = rbln_tensor_ensure_device(k->in);
	if (!st && k->out != k->in)
		st = rbln_tensor_ensure_device(k->out);
	if (st || !k->n)
		return st;
	k->in_bo = rbln_block_handle(k->in->shards[0].block);
	k->in_va = rbln_block_va(k->in->shards[0].block);
	k->out_bo = rbln_block_handle(k->out->shards[0].block);
	k->out_va = rbln_block_va(k->out->shards[0].block);
	if (k->in_place && k->kind == RBLN_COLL_ALL_GATHER)
		k->in_va += c->rank * k->n * k->esize;
	if (k->in_place && k->kind == RBLN_COLL_REDUCE_SCATTER)
		k->out_va += c->rank * k->n * k->esize;
	nsteps = k->chunks * k->phases;
	k->cp = calloc(size + 1, sizeof(*k->cp));
	k->need = calloc(nsteps, sizeof(*k->need));
	k->syncs = k->async ? calloc(nsteps, sizeof(*k->syncs)) : NULL;
	if (!k->cp || !k->need || (k->async && !k->syncs))
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
	for (i = 0; i < nsteps && k->async; i++) {
		k->need[i] = UINT64_MAX;
		if (drmSyncobjCreate(rbln_drm_fd(k->d->drm), 0, &k->syncs[i]))
			return rbln_fail(RBLN_ERROR_DEVICE, "%s: cannot create a syncobj: %s", fn,
					 strerror(errno));
	}
	/* The peer path takes every call with data (rbln_peer_collective()) and folds elsewhere. */
	if (c->peer)
		return RBLN_OK;
	/* Asynchronous, the communicator's: its collectives run one after the other. */
	for (i = 0; i < (is_gathered(k->kind) ? 4 : 2) && !st; i++) {
		if (k->async && !c->bufs[i])
			st = rbln_staging_get(k->d, &c->bufs[i]);
		if (k->async)
			(i < 2 ? k->s : k->g)[i % 2] = c->bufs[i];
		else
			st = rbln_staging_get(k->d, &(i < 2 ? k->s : k->g)[i % 2]);
	}
	if (st || !rbln_coll_is_reduction(k->kind) || size == 1)
		return st;
	ret = rbln_allocator_alloc(k->d->alloc, 2 * (uint64_t)size * part_of(k, k->m) * k->esize,
				   0, &k->fold, msg, sizeof(msg));
	if (ret)
		return rbln_fail(rbln_errno_status(ret), "%s: rbln:%d: %s", fn, c->device, msg);
	return RBLN_OK;
}

/* What prepare() took that the device is done with after @k->last; inline, the staging buffers too. */
static void unprepare(struct coll *k)
{
	int i;

	if (k->fold)
		rbln_allocator_free(k->d->alloc, k->fold, k->last, 0);
	for (i = 0; i < 2 && !k->async; i++) {
		release(k->comm, &k->s[i], k->last);
		release(k->comm, &k->g[i], k->last);
	}
	free(k->cp);
	k->cp = NULL;
}

/* What the host steps of @k needed, once they are done. */
static void coll_drop(struct coll *k)
{
	for (int64_t i = 0; k->syncs && i < k->chunks * k->phases; i++)
		if (k->syncs[i])
			drmSyncobjDestroy(rbln_drm_fd(k->d->drm), k->syncs[i]);
	free(k->syncs);
	free(k->need);
}

/*
 * An asynchronous collective in the progress thread: the agreement, the
 * host steps, the settling, then the last word for its WAITs: the final
 * step, or a cancel that skips what is left of its jobs. A failure the
 * call did not return goes to the next rbln_synchronize(), before the
 * word lets the device (and so rbln_synchronize()) go on.
 */
static void progress_run(struct coll *k)
{
	rbln_comm *c = k->comm;
	rbln_status st;
	int64_t ch;
	int phase;

	c->beat = k->planned ? k->word : NULL;
	/* The call's failure, as agree() tells the others of it. */
	if (k->st)
		rbln_fail(k->st, "%s", k->why);
	st = comm_usable(c, rbln_coll_names[k->kind]);
	if (!st)
		st = agree(k, k->st);
	if (!st) {
		for (ch = 0; ch < k->chunks && !k->mpi; ch++)
			for (phase = 0; phase < k->phases && !k->mpi; phase++)
				host_step(k, ch, phase);
		st = settle(k, outcome(k));
	}
	if (st && !k->st && !__atomic_load_n(&k->queue_failed, __ATOMIC_ACQUIRE))
		rbln_async_fail(k->d, st);
	c->beat = NULL;
	if (k->planned)
		__atomic_store_n(k->word, st ? RBLN_WAIT_CANCEL : final_step(k) << STEP_SHIFT,
				 __ATOMIC_RELEASE);
	/* The call may still be queueing jobs (they see the word) and handing fences over. */
	pthread_mutex_lock(&c->q_lock);
	while (!k->queued)
		pthread_cond_wait(&c->q_cond, &c->q_lock);
	pthread_mutex_unlock(&c->q_lock);
	coll_drop(k);
	free(k);
}

/*
 * The progress thread of an asynchronous communicator: the host's side
 * of its collectives, in the order they were called. It never takes
 * d->lock nor comm->lock: a caller holding them may be waiting, in a
 * submission, for a job that waits for this thread.
 */
static void *progress_main(void *arg)
{
	rbln_comm *c = arg;
	struct coll *k;

	pthread_mutex_lock(&c->q_lock);
	for (;;) {
		while (!c->q_head && !c->stop)
			pthread_cond_wait(&c->q_cond, &c->q_lock);
		k = c->q_head;
		if (!k)
			break;
		c->q_head = k->next;
		pthread_mutex_unlock(&c->q_lock);
		progress_run(k);
		pthread_mutex_lock(&c->q_lock);
	}
	pthread_mutex_unlock(&c->q_lock);
	return NULL;
}

/*
 * Queueing @k's device work failed with @st after @h went to the progress
 * thread: it is told so, and woken where it waits for a job never queued.
 */
static void queue_failed(struct coll *k, struct coll *h, rbln_status st)
{
	int64_t i;

	__atomic_store_n(&h->queue_failed, st, __ATOMIC_RELEASE);
	for (i = 0; i < k->chunks * k->phases; i++)
		if (k->need[i] == UINT64_MAX)
			drmSyncobjSignal(rbln_drm_fd(k->d->drm), &k->syncs[i], 1);
}

/*
 * Asynchronous: hands @k to the progress thread, then queues the device's
 * part, every job that needs a host step waiting for it on the device,
 * and a last job that waits for the settling. The thread has it first: a
 * call that queues more jobs than the device keeps in flight waits for
 * the first ones, which wait for the thread. @st: this rank's own check;
 * a call that failed it still goes there, so that the others learn of
 * it, and returns the failure.
 */
static rbln_status queue_async(struct coll *k, rbln_status st)
{
	rbln_comm *c = k->comm;
	unsigned int slot;
	struct coll *h, **pp;

	h = malloc(sizeof(*h));
	if (!h) {
		unprepare(k);
		coll_drop(k);
		return rbln_fail(RBLN_ERROR_OUT_OF_MEMORY, "%s: out of host memory",
				 rbln_coll_names[k->kind]);
	}
	if (!st) {
		/* A word per collective in flight: fewer than the jobs a device has in flight. */
		slot = c->seq++ % (c->words->size / sizeof(uint64_t));
		k->word = (uint64_t *)c->words->cpu + slot;
		k->word_va = c->words->va + slot * sizeof(uint64_t);
		k->word_bo = c->words->handle;
		__atomic_store_n(k->word, 0, __ATOMIC_RELAXED);
		k->planned = true;
	}
	k->st = st;
	if (st)
		snprintf(k->why, sizeof(k->why), "%s", rbln_last_error());
	*h = *k;
	pthread_mutex_lock(&c->q_lock);
	for (pp = &c->q_head; *pp; pp = &(*pp)->next)
		;
	*pp = h;
	pthread_cond_broadcast(&c->q_cond);
	pthread_mutex_unlock(&c->q_lock);

	if (!st) {
		pthread_mutex_lock(&k->d->lock);
		k->last = k->d->point;	/* what used the communicator's staging buffers before */
		pthread_mutex_unlock(&k->d->lock);
		run(k);
		st = k->local;
		if (!st)
			st = queue_copies(k, final_step(k), NULL, 0);
		if (st)
			queue_failed(k, h, st);
		if (k->n) {
			rbln_shard_used(&k->in->shards[0], k->last_in);
			rbln_shard_used(&k->out->shards[0], k->last);
		}
	}
	unprepare(k);
	pthread_mutex_lock(&c->q_lock);
	h->queued = true;
	pthread_cond_broadcast(&c->q_cond);
	pthread_mutex_unlock(&c->q_lock);
	return st;
}

/* @k as the peer path takes it. */
static const struct rbln_peer_args *peer_args(const struct coll *k, struct rbln_peer_args *a)
{
	*a = (struct rbln_peer_args){ .kind = k->kind, .op = k->op,
				     .root = k->root, .in = k->in, .out = k->out,
				     .in_place = k->in_place, .n = k->n, .site = k->site,
				     .timeout_ms = k->comm->timeout_ms };
	return a;
}

static rbln_status collective(struct coll *k)
{
	rbln_comm *comm = k->comm;
	struct rbln_peer_args pa;
	rbln_status st;

	if (!comm_ok(comm, rbln_coll_names[k->kind]))
		return RBLN_ERROR_INVALID;
	k->d = comm->dev;
	k->async = comm->async;
	pthread_mutex_lock(&comm->lock);
	st = comm_usable(comm, rbln_coll_names[k->kind]);
	if (!st && rbln_peer_is_local(comm->peer)) {
		/* In process: the threads of a logical device's members (rbln_comm_peer.c) */
		st = rbln_peer_local_collective(comm->peer, peer_args(k, &pa));
		pthread_mutex_unlock(&comm->lock);
		return st;
	}
	if (st) {
		pthread_mutex_unlock(&comm->lock);
		return st;
	}
	st = check_args(k);
	if (!st) {
		k->dtype = k->in->dtype;
		k->esize = rbln_dtype_size(k->dtype);
		/* A gathered chunk holds every rank's part in one staging buffer. */
		k->m = RBLN_STAGING_CHUNK / k->esize / (is_gathered(k->kind) ? comm->size : 1);
		/* An all-reduce's chunk is those parts, a segment for each rank to fold. */
		if (two_phase(k))
			k->m *= comm->size;
		if (k->n && k->m > k->n)
			k->m = k->n;
		if (!k->m)
			st = rbln_fail(RBLN_ERROR_UNSUPPORTED, "%s: %d ranks: a chunk holds %u bytes",
				       rbln_coll_names[k->kind], comm->size, RBLN_STAGING_CHUNK);
		k->chunks = k->m ? (k->n + k->m - 1) / k->m : 0;
		k->phases = two_phase(k) ? 2 : 1;
	}
	if (!st)
		st = prepare(k);
	if (k->async) {
		st = queue_async(k, st);
		pthread_mutex_unlock(&comm->lock);
		return st;
	}
	st = agree(k, st);
	if (!st && comm->peer && rbln_peer_collective(comm->peer, peer_args(k, &pa), &st)) {
		/* NPU to NPU: done. After a timeout there, unusable as after one here. */
		if (st == RBLN_ERROR_TIMEOUT)
			comm_break(comm);
	} else if (!st) {
		run(k);
		st = settle(k, outcome(k));
		rbln_shard_used(&k->in->shards[0], k->last_in);
		rbln_shard_used(&k->out->shards[0], k->last);
	}
	unprepare(k);
	coll_drop(k);
	pthread_mutex_unlock(&comm->lock);
	return st;
}

rbln_status rbln_all_reduce(rbln_tensor *in, rbln_tensor *out, rbln_redop op, rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_ALL_REDUCE, .op = op, .in = in, .out = out,
			  .in_place = in == out, .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_status rbln_all_gather(rbln_tensor *in, rbln_tensor *out, rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_ALL_GATHER, .in = in, .out = out,
			  .in_place = in == out, .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_status rbln_reduce_scatter(rbln_tensor *in, rbln_tensor *out, rbln_redop op,
				rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_REDUCE_SCATTER, .op = op, .in = in, .out = out,
			  .in_place = in == out, .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_status rbln_broadcast(rbln_tensor *t, int root, rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_BROADCAST, .root = root, .in = t, .out = t,
			  .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_status rbln_send(rbln_tensor *t, int peer, rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_SEND, .root = peer, .in = t, .out = t,
			  .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_status rbln_recv(rbln_tensor *t, int peer, rbln_comm *comm)
{
	struct coll k = { .comm = comm, .kind = RBLN_COLL_RECV, .root = peer, .in = t, .out = t,
			  .site = RBLN_CALLER() };

	return collective(&k);
}

rbln_comm *rbln_comm_new_local(int rank, int size, int device, struct rbln_dev *dev,
			       struct rbln_peer *p, int64_t timeout_ms)
{
	rbln_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = COMM_MAGIC;
	c->mpi = MPI_COMM_NULL;
	c->rank = rank;
	c->size = size;
	c->device = device;
	c->dev = dev;
	c->peer = p;
	c->timeout_ms = timeout_ms;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->q_lock, NULL);
	pthread_cond_init(&c->q_cond, NULL);
	return c;
}
