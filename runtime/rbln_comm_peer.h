/* SPDX-License-Identifier: MIT */
/*
 * rbln_comm_peer.h - the peer path of librbln_comm (internal)
 *
 * Collectives that move data NPU to NPU: every rank reaches the others'
 * tensors on its own device through peer imports of their buffer objects
 * (the driver's PRIME path between rbln devices), folds its segment from
 * them in rank order and copies the others' results, with no host copy
 * (rbln_comm_peer.c). Two kinds of communicator use it:
 *
 * - in-process ones over the members of a logical device
 *   (rbln_comm_init_all()), whose threads meet in shared memory;
 * - MPI ones whose ranks all share a host, which pass each other dma-buf
 *   descriptors with pidfd_getfd() and meet in MPI.
 */
#ifndef RBLN_COMM_PEER_H
#define RBLN_COMM_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include <mpi.h>

#include "rbln/rbln_comm.h"
#include "rbln_comm_args.h"

struct rbln_dev;

/* One collective as the caller asked for it. */
struct rbln_peer_args {
	enum rbln_coll_kind kind;
	rbln_redop op;
	int root;		/* broadcast's root, send's and recv's peer */
	rbln_tensor *in, *out;	/* broadcast, send, recv: the one tensor in both */
	bool in_place;
	int64_t n;		/* MPI path: elements of a rank's part, checked and agreed */
	const void *site;	/* the caller, for explain() */
	int64_t timeout_ms;	/* of one wait for the other ranks: the communicator's */
};

/* A communicator's peer state: in-process, or the same-host MPI path. */
struct rbln_peer;

/*
 * The peer path of a new MPI communicator @mpi (its own duplicate, of
 * @size ranks, this one @rank on @dev); collective over @mpi, each wait
 * bounded by @timeout_ms. NULL when the ranks do not all run on one
 * kernel (the same boot_id), RBLN_COMM_PEER=0 is set on a rank, a rank
 * cannot take another's descriptors (pidfd_getfd), or a rank did not
 * answer in time: then every collective is staged.
 */
struct rbln_peer *rbln_peer_init(MPI_Comm mpi, int rank, int size, struct rbln_dev *dev,
				 int64_t timeout_ms);
/* Frees @p (NULL: nothing), closing its imports; not collective. */
void rbln_peer_free(struct rbln_peer *p);
/* Is @p an in-process communicator's (rbln_comm_init_all())? */
bool rbln_peer_is_local(const struct rbln_peer *p);

/*
 * An in-process communicator's collective, from start to end (its
 * arguments are checked here, and agreed with the other threads').
 */
rbln_status rbln_peer_local_collective(struct rbln_peer *p, const struct rbln_peer_args *a);

/*
 * An MPI communicator's collective after every rank agreed on @a: true
 * when it ran on the peer path, its status in *@st (the same on every
 * rank); false when every rank is to stage it instead (nothing moved).
 */
bool rbln_peer_collective(struct rbln_peer *p, const struct rbln_peer_args *a, rbln_status *st);

/*
 * rbln_comm.c: an in-process communicator (no MPI) of rank @rank of
 * @size on logical device @device, physical member @dev, owning @p,
 * waiting @timeout_ms for the others; NULL when out of memory.
 */
rbln_comm *rbln_comm_new_local(int rank, int size, int device, struct rbln_dev *dev,
			       struct rbln_peer *p, int64_t timeout_ms);

#endif /* RBLN_COMM_PEER_H */
