/* SPDX-License-Identifier: MIT */
/*
 * rbln_comm.h - collectives over RBLN tensors between MPI processes
 *
 * NCCL's model on Open MPI: a communicator joins one RBLN device per rank
 * of an MPI communicator, and collectives move tensors of those devices.
 * MPI never sees device memory: data goes device -> pinned host staging ->
 * MPI -> staging -> device in chunks, the DMA of one chunk overlapping the
 * network of another, and reductions run on the NPU. Before each
 * collective the ranks compare what they were asked to do, so a mismatch
 * (a dtype, a size, a root, another collective) fails on every rank with
 * RBLN_ERROR_INVALID instead of hanging.
 *
 * A collective is ordered with the device's other work and complete after
 * rbln_synchronize(). With MPI_THREAD_MULTIPLE a staged one returns once
 * its device work is queued, a progress thread of the communicator doing
 * the MPI part, and a failure found there comes with the next
 * rbln_synchronize(); otherwise the call returns once its data has left
 * the host. Collectives on one communicator must be called in the same
 * order on every rank; MPI must be initialized, with a thread level for
 * the way the program calls them. A rank that dies or stops
 * answering makes the others fail with RBLN_ERROR_TIMEOUT within the
 * communicator's timeout (rbln_comm_set_timeout()).
 */
#ifndef RBLN_RBLN_COMM_H
#define RBLN_RBLN_COMM_H

#include <mpi.h>

#include "rbln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbln_comm rbln_comm;

typedef enum rbln_redop {
	RBLN_SUM	= 0,
	RBLN_MAX	= 1,
	RBLN_MIN	= 2,
} rbln_redop;

/*
 * Creates a communicator of the ranks of @mpi, this one on RBLN device
 * @device (-1: the current device), which must be one NPU (not a logical
 * device of several). Collective over @mpi: every rank calls it, and all
 * fail if one does.
 */
RBLN_API rbln_status rbln_comm_init(rbln_comm **out, MPI_Comm mpi, int device);
/*
 * In one process, without MPI: one communicator per member of logical
 * device @device (RBLN_DEVICE_MAP, RBLN_NPUS_PER_DEVICE), @n of them
 * (the number of members) in @comms, rank r on member r, as
 * ncclCommInitAll(). Collectives are called on each from its own thread;
 * a rank's tensors are tensors on @device, and its part of each is member
 * r's shard. Data moves NPU to NPU, through peer imports; a collective
 * returns once its work is done on every member. A thread that does not
 * come within the timeout (RBLN_COMM_TIMEOUT_MS, rbln_comm_set_timeout())
 * fails every thread's collective with RBLN_ERROR_TIMEOUT, and the
 * communicators for good. Free each with rbln_comm_free().
 */
RBLN_API rbln_status rbln_comm_init_all(rbln_comm **comms, int n, int device);
/* Frees @comm (collective over its ranks); NULL is a no-op. */
RBLN_API rbln_status rbln_comm_free(rbln_comm *comm);
/*
 * This rank's index, the number of ranks, and this rank's device; a
 * negative rbln_status on a bad handle.
 */
RBLN_API int rbln_comm_rank(const rbln_comm *comm);
RBLN_API int rbln_comm_size(const rbln_comm *comm);
RBLN_API int rbln_comm_device(const rbln_comm *comm);

/*
 * How long this rank waits for the others in any one exchange of a
 * collective, in milliseconds (above 0): RBLN_COMM_TIMEOUT_MS at
 * rbln_comm_init(), else 30000. A wait that runs out fails with
 * RBLN_ERROR_TIMEOUT, naming the ranks that did not answer where it can,
 * and leaves @comm unusable: every later collective on it fails with
 * RBLN_ERROR_TIMEOUT; free it. rbln_comm_timeout(): the timeout, or a
 * negative rbln_status on a bad handle.
 */
RBLN_API rbln_status rbln_comm_set_timeout(rbln_comm *comm, int64_t ms);
RBLN_API int64_t rbln_comm_timeout(const rbln_comm *comm);

/*
 * @out = @op over every rank's @in, folded in rank order, each step one
 * EW_BINARY on the NPU: the same bits on every rank. @in == @out: in place.
 */
RBLN_API rbln_status rbln_all_reduce(rbln_tensor *in, rbln_tensor *out, rbln_redop op,
				     rbln_comm *comm);
/*
 * @out (size times @in's elements) = every rank's @in, in rank order.
 * @in == @out: in place, this rank's part already at its place in @out.
 */
RBLN_API rbln_status rbln_all_gather(rbln_tensor *in, rbln_tensor *out, rbln_comm *comm);
/*
 * @out = part r (this rank's) of @op over every rank's @in, which has
 * size times @out's elements. @in == @out: in place, the result at part r.
 */
RBLN_API rbln_status rbln_reduce_scatter(rbln_tensor *in, rbln_tensor *out, rbln_redop op,
					 rbln_comm *comm);
/* @t = rank @root's @t, on every rank. */
RBLN_API rbln_status rbln_broadcast(rbln_tensor *t, int root, rbln_comm *comm);
/* @t to rank @peer, which calls rbln_recv() with a tensor of the same dtype and size. */
RBLN_API rbln_status rbln_send(rbln_tensor *t, int peer, rbln_comm *comm);
RBLN_API rbln_status rbln_recv(rbln_tensor *t, int peer, rbln_comm *comm);

#ifdef __cplusplus
}
#endif

#endif /* RBLN_RBLN_COMM_H */
