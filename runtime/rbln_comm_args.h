/* SPDX-License-Identifier: MIT */
/*
 * rbln_comm_args.h - a collective's request, as both paths of librbln_comm
 * check it and compare it between ranks (internal)
 *
 * The staged path (rbln_comm.c) and the peer path (rbln_comm_peer.c) take
 * the same arguments, refuse the same bad ones with the same messages and
 * publish the same record to the other ranks before any data moves, so
 * that a mismatch fails every rank alike, whichever path would have run.
 */
#ifndef RBLN_COMM_ARGS_H
#define RBLN_COMM_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbln/rbln_comm.h"

/* How long a rank waits for the others in one exchange unless told (RBLN_COMM_TIMEOUT_MS). */
#define RBLN_COMM_DEFAULT_TIMEOUT_MS 30000

/* The collectives whose data comes from every rank first (code compares with <=). */
enum rbln_coll_kind {
	RBLN_COLL_ALL_REDUCE, RBLN_COLL_ALL_GATHER, RBLN_COLL_REDUCE_SCATTER,
	RBLN_COLL_BROADCAST, RBLN_COLL_SEND, RBLN_COLL_RECV, RBLN_COLL_NKINDS
};

/* The API's names ("rbln_all_reduce"), and explain()'s for its bounces and folds ("all_reduce"). */
extern const char *const rbln_coll_names[RBLN_COLL_NKINDS];
extern const char *const rbln_coll_ops[RBLN_COLL_NKINDS];
/* EW_BINARY's sub-op of each rbln_redop. */
extern const unsigned int rbln_redop_subs[RBLN_MIN + 1];

static inline bool rbln_coll_is_reduction(enum rbln_coll_kind kind)
{
	return kind == RBLN_COLL_ALL_REDUCE || kind == RBLN_COLL_REDUCE_SCATTER;
}

static inline bool rbln_coll_is_pair(enum rbln_coll_kind kind)
{
	return kind == RBLN_COLL_SEND || kind == RBLN_COLL_RECV;
}

/* What a rank was asked to do, sent to the others as bytes. */
struct rbln_coll_meta {
	int32_t kind, op, dtype, root;
	int64_t count;		/* elements of a rank's part */
	int32_t status;		/* the rank's own arguments: RBLN_OK, or why not */
	char error[160];	/* its message then */
};

/* Sets @m's status to @st and, when @st failed, its error to the thread's last message. */
void rbln_coll_meta_status(struct rbln_coll_meta *m, rbln_status st);

/*
 * Every rank's record in @all[@size], this one's @mine (rank @rank,
 * talking to @peer when a send or receive), compared: RBLN_OK, or the
 * same failure that every rank finds (its own failure first).
 */
rbln_status rbln_coll_judge(const struct rbln_coll_meta *all, int size, int rank,
			    const struct rbln_coll_meta *mine, int peer);

/*
 * The checks of a request that do not depend on where its tensors are:
 * dtypes, the reduction, root or peer, and the element counts @in_n and
 * @out_n of this rank's input and output (@whose, when not NULL, names
 * them in messages: "rank 1's shard"); *@n gets the elements of a rank's
 * part.
 */
rbln_status rbln_coll_check(enum rbln_coll_kind kind, rbln_redop op, int root, int rank, int size,
			    const rbln_tensor *in, const rbln_tensor *out, bool in_place,
			    int64_t in_n, int64_t out_n, const char *whose, int64_t *n);

/* RBLN_ERROR_DEVICE for MPI's error @err from @call in @fn, with MPI's words for it. */
rbln_status rbln_comm_mpi_fail(const char *fn, const char *call, int err);

/* RBLN_COMM_TIMEOUT_MS in *@ms (a whole number above 0), or the default without it. */
rbln_status rbln_comm_env_timeout(int64_t *ms, const char *fn);

/*
 * Between two polls of MPI by a rank that has waited @waited_ns for the
 * others: nothing at first, for latency, then sched_yield(), then a nap.
 */
void rbln_comm_poll_pause(int64_t waited_ns);

#endif /* RBLN_COMM_ARGS_H */
