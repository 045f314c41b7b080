// SPDX-License-Identifier: MIT
/*
 * allreduce - the gradients of every rank summed on every rank's NPU
 *
 *   mpirun -np 2 --mca btl_vader_single_copy_mechanism none examples/allreduce
 *
 * Each rank of MPI_COMM_WORLD takes the NPU of its local rank, makes a
 * tensor of "gradients" there and all-reduces it in place: data goes
 * through pinned staging buffers and MPI, and the NPU adds every rank's
 * part in rank order, so every rank ends with the same bits. The ranks
 * then check them against the same sum on the CPU, and explain() shows
 * the traffic for what it is, host bounces. Last, a rank asking for
 * another dtype than the others makes all of them fail at once.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <rbln/rbln.h>
#include <rbln/rbln_comm.h>

#define N	(1 << 20)	/* 4 MiB of f32 a rank */

static int rank;

#define CHECK(expr) do { \
		if (!(expr)) { \
			fprintf(stderr, "allreduce: rank %d: %s: %s\n", rank, #expr, \
				rbln_last_error()); \
			MPI_Abort(MPI_COMM_WORLD, 1); \
		} \
	} while (0)

/* Rank @r's gradient @i: exact in f32 in any sum of a few ranks. */
static float grad(int r, int i)
{
	return (float)((i * 7 + r * 13) % 1024 - 512) / 64;
}

int main(int argc, char **argv)
{
	int64_t shape[1] = { N };
	int size, device, i, wrong = 0;
	struct rbln_explain_dump dump;
	rbln_tensor *g, *other;
	rbln_comm *comm;
	rbln_explain *e;
	MPI_Comm local;
	float *data;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	/* One NPU per rank of a host. */
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &device);
	MPI_Comm_free(&local);
	CHECK(rbln_comm_init(&comm, MPI_COMM_WORLD, device) == RBLN_OK);

	data = malloc(N * sizeof(*data));
	CHECK(data);
	for (i = 0; i < N; i++)
		data[i] = grad(rank, i);
	g = rbln_tensor_from_data(data, shape, 1, RBLN_F32, device);
	CHECK(g && rbln_tensor_materialize(g) == RBLN_OK);

	e = rbln_explain_begin(false);
	CHECK(e);
	CHECK(rbln_all_reduce(g, g, RBLN_SUM, comm) == RBLN_OK);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	CHECK(rbln_explain_end(e) == RBLN_OK && rbln_explain_dump(e, &dump) == RBLN_OK);

	CHECK(rbln_tensor_read(g, data, N * sizeof(*data)) == RBLN_OK);
	for (i = 0; i < N; i++) {
		float sum = grad(0, i);
		int r;

		for (r = 1; r < size; r++)
			sum += grad(r, i);
		wrong += data[i] != sum;
	}
	printf("rank %d on rbln:%d: %d f32 summed over %d ranks, g[1] = %g, %d wrong; "
	       "host bounces: %lld bytes to the host, %lld back\n", rank, device, N, size,
	       data[1], wrong, (long long)dump.host_bounce.to_host_bytes,
	       (long long)dump.host_bounce.to_device_bytes);
	rbln_explain_free(e);

	/* Rank 1 asks for i32, the others for f32: every rank fails, none waits. */
	other = rbln_tensor_zeros(shape, 1, rank == 1 ? RBLN_I32 : RBLN_F32, device);
	CHECK(other);
	if (rbln_all_reduce(other, other, RBLN_SUM, comm) != RBLN_ERROR_INVALID)
		wrong++;
	if (!rank)
		printf("a mismatch, on every rank: %s\n", rbln_last_error());

	rbln_tensor_free(other);
	rbln_tensor_free(g);
	free(data);
	rbln_comm_free(comm);
	MPI_Finalize();
	return wrong ? 1 : 0;
}
