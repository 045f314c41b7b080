// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_comm_bench - all-reduce of NPU tensors against MPI_Allreduce of
 * host buffers, 1 KiB to 64 MiB
 *
 * Run under mpirun, one NPU per rank (meson compile -C build bench-comm
 * runs 2 ranks in a guest). For each size, f32 sums: rbln_all_reduce() of
 * a tensor in device memory, complete after rbln_synchronize(), and
 * MPI_Allreduce() of a malloc'ed buffer of the same size, alternating in
 * rounds. Bus bandwidth as nccl-tests defines it: size / time * 2 (n - 1)
 * / n; the ratio of the two is the cost of staging through the host (and,
 * in this design, of gathering every rank's parts to fold them on the NPU
 * in rank order). Each time is the slowest rank's.
 *
 * The ranks share a host, so rbln_all_reduce() takes the peer path, NPU to
 * NPU; communicators made with RBLN_COMM_PEER=0 stage through the host:
 * one asynchronous (MPI_THREAD_MULTIPLE: a progress thread does the MPI
 * part), one with RBLN_COMM_ASYNC=0 too, whose caller does it. All are
 * measured against the same MPI_Allreduce(). "call us" is how long the
 * asynchronous staged call keeps its caller, out of the whole time.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <rbln/rbln.h>
#include <rbln/rbln_comm.h>

static int rank, nranks;

#define CHECK(expr) do { \
		if (!(expr)) { \
			fprintf(stderr, "rbln_comm_bench: rank %d: %s: %s\n", rank, #expr, \
				rbln_last_error()); \
			MPI_Abort(MPI_COMM_WORLD, 1); \
		} \
	} while (0)

/*
 * The slowest rank's seconds for @iters of rbln_all_reduce on @t, and in
 * *@call (if not NULL) the seconds its calls took before returning.
 */
static double time_rbln(rbln_tensor *t, rbln_comm *comm, int device, int iters, double *call)
{
	double t0, dt, worst, in = 0, c0;
	int i;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++) {
		c0 = MPI_Wtime();
		CHECK(rbln_all_reduce(t, t, RBLN_SUM, comm) == RBLN_OK);
		in += MPI_Wtime() - c0;
	}
	CHECK(rbln_synchronize(device) == RBLN_OK);
	dt = MPI_Wtime() - t0;
	MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (call)
		MPI_Allreduce(&in, call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (call)
		*call /= iters;
	return worst / iters;
}

static double time_mpi(float *buf, int64_t n, int iters)
{
	double t0, dt, worst;
	int i;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++)
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	dt = MPI_Wtime() - t0;
	MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return worst / iters;
}

int main(int argc, char **argv)
{
	const int rounds = 3;
	int device, round, iters, level;
	rbln_comm *comm, *staged, *sync;
	MPI_Comm local;
	int64_t bytes;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (level != MPI_THREAD_MULTIPLE && !rank)
		printf("MPI gives thread level %d, not MPI_THREAD_MULTIPLE: all synchronous\n",
		       level);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &device);
	MPI_Comm_free(&local);
	CHECK(rbln_comm_init(&comm, MPI_COMM_WORLD, device) == RBLN_OK);
	/* Read by rbln_comm_init(): this one stages through the host. */
	CHECK(setenv("RBLN_COMM_PEER", "0", 1) == 0);
	CHECK(rbln_comm_init(&staged, MPI_COMM_WORLD, device) == RBLN_OK);
	CHECK(setenv("RBLN_COMM_ASYNC", "0", 1) == 0);
	CHECK(rbln_comm_init(&sync, MPI_COMM_WORLD, device) == RBLN_OK);
	CHECK(unsetenv("RBLN_COMM_ASYNC") == 0);
	CHECK(unsetenv("RBLN_COMM_PEER") == 0);
	if (!rank)
		printf("%d ranks, f32 sum; busbw = size / time * 2(n-1)/n; best of %d rounds;\n"
		       "ratio: busbw over MPI_Allreduce's of host memory; staged: asynchronous,\n"
		       "sync: staged with RBLN_COMM_ASYNC=0; call: the staged call's share\n"
		       "%10s %10s %10s %10s %10s %10s %7s %7s %7s %7s\n", nranks, rounds,
		       "size", "staged us", "call us", "sync us", "peer us", "MPI MB/s", "staged",
		       "sync", "peer", "call");
	for (bytes = 1024; bytes <= 64 << 20; bytes *= 4) {
		int64_t n = bytes / 4;
		double best_r = 1e30, best_s = 1e30, best_p = 1e30, best_m = 1e30, t, call, best_c = 0;
		double bus = 2.0 * (nranks - 1) / nranks;
		float *buf = calloc(n, sizeof(*buf));
		rbln_tensor *d = rbln_tensor_zeros(&n, 1, RBLN_F32, device);

		CHECK(buf && d && rbln_tensor_materialize(d) == RBLN_OK);
		/* About 8 MiB moved a measurement, at least one call. */
		iters = bytes >= (8 << 20) ? 1 : (8 << 20) / bytes;
		if (iters > 64)
			iters = 64;
		time_rbln(d, staged, device, 1, NULL);	/* compiles the folds' programs */
		time_rbln(d, comm, device, 1, NULL);
		for (round = 0; round < rounds; round++) {
			t = time_rbln(d, staged, device, iters, &call);
			best_c = t < best_r ? call : best_c;
			best_r = t < best_r ? t : best_r;
			t = time_rbln(d, sync, device, iters, NULL);
			best_s = t < best_s ? t : best_s;
			t = time_rbln(d, comm, device, iters, NULL);
			best_p = t < best_p ? t : best_p;
			t = time_mpi(buf, n, iters);
			best_m = t < best_m ? t : best_m;
		}
		if (!rank)
			printf("%10lld %10.1f %10.1f %10.1f %10.1f %10.1f %7.3f %7.3f %7.3f %7.3f\n",
			       (long long)bytes, best_r * 1e6, best_c * 1e6, best_s * 1e6,
			       best_p * 1e6, bytes / best_m * bus / 1e6, best_m / best_r,
			       best_m / best_s, best_m / best_p, best_c / best_r);
		fflush(stdout);
		rbln_tensor_free(d);
		free(buf);
	}
	rbln_comm_free(sync);
	rbln_comm_free(staged);
	rbln_comm_free(comm);
	MPI_Finalize();
	return 0;
}
