// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_comm - librbln's collectives between MPI ranks, one NPU each:
 * every collective and dtype, bit for bit against tests/common/rbln_ref.h
 * folded in rank order, and every rejection on every rank
 *
 * Run in the VM with emu_devices=4 under mpirun -np 4. MPI rules out
 * kselftest's fork per test, so the cases run in turn in each rank; a
 * case passes when it passes on every rank, and rank 0 prints the TAP.
 * Other ranks say why they failed on stderr.
 *
 * The last two cases kill a rank each (_exit() without MPI_Finalize(),
 * which mpirun lets be with orte_allowed_exit_without_sync=1, set by
 * tests/runtime/meson.build): the others must fail with
 * RBLN_ERROR_TIMEOUT within the timeout, and then end normally.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include <rbln/rbln.h>
#include <rbln/rbln_comm.h>

#include "rbln_comm_ref.h"
#include "rbln_ref.h"
#include "rbln_tensor_data.h"

static const rbln_dtype dtypes[] = { RBLN_F32, RBLN_F16, RBLN_BF16, RBLN_I32, RBLN_I8 };
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
static const char *const dtype_names[] = { "f32", "f16", "bf16", "i32", "i8" };

static const rbln_redop redops[] = { RBLN_SUM, RBLN_MAX, RBLN_MIN };
static const uint32_t redop_isa[] = { RBLN_BINARY_ADD, RBLN_BINARY_MAX, RBLN_BINARY_MIN };
static const char *const redop_names[] = { "sum", "max", "min" };

static int rank, nranks, device;
static rbln_comm *comm;
/*
 * Whose results a case's verdict is made of: every rank's until one dies;
 * then those of ranks 0, 2 and 3 (three), then of ranks 0 and 3 (two).
 */
static MPI_Comm live, three, two;

/* The timeout of the cases where a rank dies, and how late its error may come. */
#define SHORT_TIMEOUT_MS	3000
#define LATE_S			10.0

/*
 * This rank dies at its next big message: MPI's profiling interface puts
 * this MPI_Isend() before librbln_comm's calls, and the data of a chunk
 * is the only message of 64 KiB and more.
 */
static bool die_at_data;

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
	      MPI_Request *req)
{
	if (die_at_data && count >= 65536)
		_exit(0);
	return PMPI_Isend(buf, count, type, dest, tag, c, req);
}

/*
 * This rank dies where the peer path publishes its tensors' objects to
 * the other ranks (an MPI_Iallgather of its own, after the agreement).
 */
static bool die_at_peer_exchange;

/*
 * Run with RBLN_COMM_PEER=0 (test_comm_staged), or with ranks on several
 * hosts: every collective staged through the host.
 */
static bool staged_run;
static bool two_hosts;		/* the ranks are not all on one host */

__attribute__((constructor)) static void read_peer_env(void)
{
	staged_run = getenv("RBLN_COMM_PEER") && !strcmp(getenv("RBLN_COMM_PEER"), "0");
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
		   MPI_Datatype rtype, MPI_Comm c, MPI_Request *req)
{
	if (die_at_peer_exchange)
		_exit(0);
	return PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, c, req);
}

/*
 * test_comm --async (test_comm_async): MPI_THREAD_MULTIPLE, with which
 * the library runs the host's side of a staged collective in a progress
 * thread. A call then returns once the device's part is queued, and a
 * failure found later comes with the next rbln_synchronize(): the cases
 * call the collectives through done(), which waits for their outcome
 * either way (a parenthesized name calls one without it).
 */
static bool async_run;

static rbln_status done(rbln_status st)
{
	return st || !async_run ? st : rbln_synchronize(device);
}
#define rbln_all_reduce(...)		done(rbln_all_reduce(__VA_ARGS__))
#define rbln_all_gather(...)		done(rbln_all_gather(__VA_ARGS__))
#define rbln_reduce_scatter(...)	done(rbln_reduce_scatter(__VA_ARGS__))
#define rbln_broadcast(...)		done(rbln_broadcast(__VA_ARGS__))
#define rbln_send(...)			done(rbln_send(__VA_ARGS__))
#define rbln_recv(...)			done(rbln_recv(__VA_ARGS__))

/* Element counts of a rank's part: empty, one, odd and not a multiple of the ranks. */
static const int64_t sizes[] = { 0, 1, 7, 1001 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/*
 * Two chunks of all-gather and reduce-scatter, which hold every rank's
 * part of a chunk in a 2 MiB staging buffer: a chunk and three elements.
 * Under TCG a million elements cost some 4 s (the NPU's folds and the
 * reference's), so max and min fold this many for one dtype only.
 */
static int64_t two_chunks(rbln_dtype dt)
{
	return (2 << 20) / nranks / rbln_dtype_size(dt) + 3;
}

/* Two chunks of an all-reduce, whose chunk is 2 MiB of the tensor, in segments of uneven sizes. */
static int64_t two_reduce_chunks(rbln_dtype dt)
{
	return (2 << 20) / rbln_dtype_size(dt) + 3;
}

/* Fails the current case on this rank, saying why on stderr. */
static bool fail_(int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "# rank %d, line %d: ", rank, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (last error: %s)\n", rbln_last_error());
	return false;
}
#define FAIL(...) fail_(__LINE__, __VA_ARGS__)
#define CHECK(cond) do { if (!(cond)) return FAIL("%s", #cond); } while (0)

/* A tensor of @n elements on this rank's device holding rank @r's input @salt. */
static rbln_tensor *input(rbln_dtype dt, int r, int64_t n, uint32_t salt)
{
	size_t esize = rbln_dtype_size(dt);
	char *p = malloc(n * esize + 1);
	rbln_tensor *t;
	int64_t i;

	for (i = 0; i < n; i++)
		ref_put(dt, p, i, gen(dt, r, i, salt));
	t = rbln_tensor_from_data(p, &n, 1, dt, device);
	free(p);
	if (t && rbln_tensor_materialize(t)) {
		rbln_tensor_free(t);
		return NULL;
	}
	return t;
}

/* An output of @n elements, in device memory, filled with a value no result has. */
static rbln_tensor *output(rbln_dtype dt, int64_t n)
{
	rbln_tensor *t = rbln_tensor_full(&n, 1, dt, 3, device);

	if (t && rbln_tensor_materialize(t)) {
		rbln_tensor_free(t);
		return NULL;
	}
	return t;
}

/* Do @n elements of @got, from element @at of the reference @ref(k), match? */
#define MATCH(got, dt, n, exp_of) ({ \
	int64_t _k; bool _ok = true; \
	for (_k = 0; _k < (n) && _ok; _k++) { \
		uint64_t _e = (exp_of); \
		if (!ref_match(dt, ref_get(dt, got, _k), _e)) \
			_ok = FAIL("%s element %lld: got 0x%x, expected 0x%llx", \
				   dtype_names[dt], (long long)_k, ref_get(dt, got, _k), \
				   (unsigned long long)_e); \
	} \
	_ok; })

static bool all_reduce_case(rbln_redop op, rbln_dtype dt, int64_t n, bool in_place, uint32_t salt)
{
	rbln_tensor *in = input(dt, rank, n, salt), *out = in_place ? in : output(dt, n);
	rbln_status st;
	bool ok;
	void *got;

	CHECK(in && out);
	st = rbln_all_reduce(in, out, op, comm);
	if (st)
		return FAIL("rbln_all_reduce(%s, %s, %lld): %s", redop_names[op], dtype_names[dt],
			    (long long)n, rbln_status_name(st));
	got = data_of(out);
	CHECK(got);
	ok = MATCH(got, dt, n, folded(redop_isa[op], dt, nranks, _k, salt));
	free(got);
	if (!in_place)
		rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok;
}

static bool test_all_reduce(void)
{
	bool ok = true;
	size_t o, d, s;

	for (o = 0; o < 3; o++)
		for (d = 0; d < NDTYPES; d++) {
			for (s = 0; s < NSIZES; s++)
				ok &= all_reduce_case(redops[o], dtypes[d], sizes[s], false, 1 + s);
			/* One chunk, a segment a rank. */
			if (redops[o] == RBLN_SUM)
				ok &= all_reduce_case(redops[o], dtypes[d], two_chunks(dtypes[d]),
						      false, 9);
		}
	ok &= all_reduce_case(RBLN_SUM, RBLN_F16, two_reduce_chunks(RBLN_F16), false, 10);
	ok &= all_reduce_case(RBLN_MAX, RBLN_I32, two_reduce_chunks(RBLN_I32), false, 10);
	return ok;
}

static bool test_all_reduce_in_place(void)
{
	bool ok = true;
	size_t o, d;

	for (o = 0; o < 3; o++)
		for (d = 0; d < NDTYPES; d++)
			ok &= all_reduce_case(redops[o], dtypes[d], 1001, true, 11);
	ok &= all_reduce_case(RBLN_MIN, RBLN_F32, two_reduce_chunks(RBLN_F32), true, 11);
	return ok;
}

/* FNV-1a over the 64-bit words of @n bytes (a multiple of 8). */
static uint64_t hash_words(const void *p, size_t n)
{
	const uint64_t *w = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n / 8; i++)
		h = (h ^ w[i]) * 0x100000001b3ull;
	return h;
}

/*
 * 80 MiB of f32 a rank, more than the largest size (64 MiB): 40
 * chunks of 2 MiB through the pipeline, some 280 jobs, so that an
 * asynchronous call queues more than the device keeps in flight and waits
 * for the first ones, which wait for the progress thread. Every rank must
 * hold the same bits, so rank 0 checks its result against the CPU's
 * folds, bit for bit, and the others theirs against a hash of rank 0's:
 * the CPU folds 20 Mi elements once, not on every rank (under TCG that
 * was half the case's time).
 */
static bool test_all_reduce_large(void)
{
	const int64_t n = 20 << 20;
	rbln_tensor *in = input(RBLN_F32, rank, n, 12), *out = output(RBLN_F32, n);
	rbln_status st = RBLN_ERROR_INVALID;
	uint64_t mine = 0, rank0;
	void *got = NULL;
	bool ok = true;

	if (in && out)
		st = rbln_all_reduce(in, out, RBLN_SUM, comm);
	if (st)
		ok = FAIL("rbln_all_reduce(sum, f32, %lld): %s", (long long)n, rbln_status_name(st));
	else
		got = data_of(out);
	if (got)
		mine = hash_words(got, n * 4);
	/* Every rank comes here, whatever failed. */
	rank0 = mine;
	MPI_Bcast(&rank0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (ok && !got)
		ok = FAIL("no result to read");
	if (ok && !rank)
		ok = MATCH(got, RBLN_F32, n, folded(RBLN_BINARY_ADD, RBLN_F32, nranks, _k, 12));
	else if (ok && (mine != rank0 || !rank0))
		ok = FAIL("the result's hash is %llx, rank 0's %llx", (unsigned long long)mine,
			  (unsigned long long)rank0);
	free(got);
	rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok;
}

static bool all_gather_case(rbln_dtype dt, int64_t n, bool in_place, uint32_t salt)
{
	size_t esize = rbln_dtype_size(dt);
	rbln_tensor *in, *out;
	rbln_status st;
	void *got;
	bool ok;
	int r;

	out = output(dt, n * nranks);
	in = input(dt, rank, n, salt);
	CHECK(in && out);
	if (in_place) {
		/* This rank's part at its place in the output, the rest stale. */
		void *mine = data_of(in);

		CHECK(mine);
		st = rbln_tensor_write(out, rank * n * esize, mine, n * esize);
		free(mine);
		CHECK(st == RBLN_OK);
	}
	st = rbln_all_gather(in_place ? out : in, out, comm);
	if (st)
		return FAIL("rbln_all_gather(%s, %lld): %s", dtype_names[dt], (long long)n,
			    rbln_status_name(st));
	got = data_of(out);
	CHECK(got);
	ok = true;
	for (r = 0; r < nranks && ok; r++)
		ok = MATCH((char *)got + r * n * esize, dt, n, gen(dt, r, _k, salt));
	free(got);
	rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok;
}

static bool test_all_gather(void)
{
	bool ok = true;
	size_t d, s;

	for (d = 0; d < NDTYPES; d++) {
		for (s = 0; s < NSIZES; s++)
			ok &= all_gather_case(dtypes[d], sizes[s], false, 20 + s);
		ok &= all_gather_case(dtypes[d], two_chunks(dtypes[d]), false, 28);
		ok &= all_gather_case(dtypes[d], 1001, true, 29);
	}
	return ok;
}

static bool reduce_scatter_case(rbln_redop op, rbln_dtype dt, int64_t n, bool in_place,
				uint32_t salt)
{
	size_t esize = rbln_dtype_size(dt);
	rbln_tensor *in = input(dt, rank, n * nranks, salt);
	rbln_tensor *out = in_place ? in : output(dt, n);
	rbln_status st;
	void *got;
	bool ok;

	CHECK(in && out);
	st = rbln_reduce_scatter(in, out, op, comm);
	if (st)
		return FAIL("rbln_reduce_scatter(%s, %s, %lld): %s", redop_names[op],
			    dtype_names[dt], (long long)n, rbln_status_name(st));
	got = data_of(out);
	CHECK(got);
	ok = MATCH((char *)got + (in_place ? rank * n * esize : 0), dt, n,
		   folded(redop_isa[op], dt, nranks, rank * n + _k, salt));
	free(got);
	if (!in_place)
		rbln_tensor_free(out);
	rbln_tensor_free(in);
	return ok;
}

static bool test_reduce_scatter(void)
{
	bool ok = true;
	size_t o, d, s;

	for (o = 0; o < 3; o++)
		for (d = 0; d < NDTYPES; d++) {
			for (s = 0; s < NSIZES; s++)
				ok &= reduce_scatter_case(redops[o], dtypes[d], sizes[s], false,
							  30 + s);
			if (redops[o] == RBLN_SUM || dtypes[d] == RBLN_F16)
				ok &= reduce_scatter_case(redops[o], dtypes[d],
							  two_chunks(dtypes[d]), false, 38);
			ok &= reduce_scatter_case(redops[o], dtypes[d], 1001, true, 39);
		}
	return ok;
}

static bool broadcast_case(rbln_dtype dt, int64_t n, int root, uint32_t salt)
{
	rbln_tensor *t = input(dt, rank, n, salt);
	rbln_status st;
	void *got;
	bool ok;

	CHECK(t);
	st = rbln_broadcast(t, root, comm);
	if (st)
		return FAIL("rbln_broadcast(%s, %lld, root %d): %s", dtype_names[dt],
			    (long long)n, root, rbln_status_name(st));
	got = data_of(t);
	CHECK(got);
	ok = MATCH(got, dt, n, gen(dt, root, _k, salt));
	free(got);
	rbln_tensor_free(t);
	return ok;
}

static bool test_broadcast(void)
{
	bool ok = true;
	size_t d, s;

	for (d = 0; d < NDTYPES; d++)
		for (s = 0; s < NSIZES; s++)
			ok &= broadcast_case(dtypes[d], sizes[s], (int)(s + d) % nranks, 40 + s);
	/* More than one chunk of the largest dtype: 2 MiB a chunk. */
	ok &= broadcast_case(RBLN_F32, 1300001, nranks - 1, 49);
	return ok;
}

/* Even ranks send to the next one, then the other way round. */
static bool send_recv_case(rbln_dtype dt, int64_t n, uint32_t salt)
{
	int peer = rank ^ 1, round;
	rbln_tensor *t;
	rbln_status st;
	void *got;
	bool ok = true;

	if (peer >= nranks)
		return true;
	for (round = 0; round < 2 && ok; round++) {
		bool sends = (rank & 1) == round;

		t = sends ? input(dt, rank, n, salt) : output(dt, n);
		CHECK(t);
		st = sends ? rbln_send(t, peer, comm) : rbln_recv(t, peer, comm);
		if (st)
			return FAIL("%s(%s, %lld): %s", sends ? "rbln_send" : "rbln_recv",
				    dtype_names[dt], (long long)n, rbln_status_name(st));
		if (!sends) {
			got = data_of(t);
			CHECK(got);
			ok = MATCH(got, dt, n, gen(dt, peer, _k, salt));
			free(got);
		}
		rbln_tensor_free(t);
	}
	return ok;
}

static bool test_send_recv(void)
{
	bool ok = true;
	size_t d, s;

	for (d = 0; d < NDTYPES; d++)
		for (s = 0; s < NSIZES; s++)
			ok &= send_recv_case(dtypes[d], sizes[s], 50 + s);
	ok &= send_recv_case(RBLN_I8, 5000001, 59);
	return ok;
}

/* -(max over ranks of -x) for element @i of input @salt: what ordered_case() computes. */
static uint64_t neg_max_neg(rbln_dtype dt, int64_t i, uint32_t salt)
{
	uint64_t acc = ref_unary(RBLN_UNARY_NEG, dt, gen(dt, 0, i, salt)), b;
	int r;

	for (r = 1; r < nranks; r++) {
		b = ref_unary(RBLN_UNARY_NEG, dt, gen(dt, r, i, salt));
		acc = acc == REF_ANY_QNAN || b == REF_ANY_QNAN ? REF_ANY_QNAN :
		      ref_binary(RBLN_BINARY_MAX, dt, (uint32_t)acc, (uint32_t)b);
	}
	return acc == REF_ANY_QNAN ? acc : ref_unary(RBLN_UNARY_NEG, dt, (uint32_t)acc);
}

/*
 * A collective is ordered with the device's other work: an op queued on
 * its input just before, and one on its result just after, with no
 * synchronization between them, see the collective's input and result.
 */
static bool ordered_case(rbln_dtype dt, int64_t n, uint32_t salt)
{
	rbln_tensor *x = input(dt, rank, n, salt), *y, *z;
	rbln_status st;
	void *got;
	bool ok;

	CHECK(x);
	y = rbln_neg(x);
	CHECK(y);
	st = (rbln_all_reduce)(y, y, RBLN_MAX, comm);
	if (st)
		return FAIL("rbln_all_reduce: %s", rbln_status_name(st));
	z = rbln_neg(y);
	CHECK(z);
	got = data_of(z);
	CHECK(got);
	ok = MATCH(got, dt, n, neg_max_neg(dt, _k, salt));
	free(got);
	rbln_tensor_free(z);
	rbln_tensor_free(y);
	rbln_tensor_free(x);
	return ok;
}

static bool test_ordered_with_device_work(void)
{
	return ordered_case(RBLN_F32, two_reduce_chunks(RBLN_F32), 71) &
	       ordered_case(RBLN_BF16, 1001, 72) & ordered_case(RBLN_I32, 1001, 73);
}

/*
 * Many collectives queued at once, with no synchronization between them:
 * sixteen in-place all-reduces of two chunks, more jobs than a device has
 * in flight, so that the calls wait for the first ones to be done. The
 * values stay exact: rank r holds r + 1, and every fold of the sums,
 * 5 << k, is one too.
 */
static bool test_queued_back_to_back(void)
{
	const int64_t n = two_reduce_chunks(RBLN_F32);
	rbln_tensor *t = rbln_tensor_full(&n, 1, RBLN_F32, rank + 1, device);
	double want = nranks * (nranks + 1) / 2;
	bool ok = true;
	float *got;
	int64_t i;
	int k;

	CHECK(t && rbln_tensor_materialize(t) == RBLN_OK);
	for (k = 0; k < 16 && ok; k++) {
		if ((rbln_all_reduce)(t, t, RBLN_SUM, comm))
			ok = FAIL("rbln_all_reduce %d", k);
		want *= k ? nranks : 1;
	}
	CHECK(rbln_synchronize(device) == RBLN_OK);
	got = data_of(t);
	CHECK(got);
	for (i = 0; i < n && ok; i++)
		if (got[i] != (float)want)
			ok = FAIL("element %lld: %g, expected %g", (long long)i, got[i], want);
	free(got);
	rbln_tensor_free(t);
	return ok;
}

/*
 * Asynchronous, a call returns once the device's part is queued: rank 0
 * calls first and tells the others (over MPI_COMM_WORLD, not the
 * communicator's) that its call returned, and only then do they call.
 * Synchronous, rank 0 would still be waiting for them.
 */
static bool test_returns_before_the_others(void)
{
	const int64_t n = two_reduce_chunks(RBLN_F32);
	rbln_tensor *a = input(RBLN_F32, rank, n, 80), *b = output(RBLN_F32, n);
	int token = 0, flag = 0, r;
	MPI_Request req;
	bool ok = true;
	double t0;
	void *got;

	CHECK(a && b);
	if (rank == 0) {
		CHECK((rbln_all_reduce)(a, b, RBLN_SUM, comm) == RBLN_OK);
		for (r = 1; r < nranks; r++)
			MPI_Send(&token, 1, MPI_INT, r, 99, MPI_COMM_WORLD);
	} else {
		MPI_Irecv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &req);
		for (t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 30;)
			MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
		if (!flag) {
			MPI_Cancel(&req);
			MPI_Wait(&req, MPI_STATUS_IGNORE);
			ok = FAIL("rank 0's call did not return in 30 s without the others");
		}
		CHECK((rbln_all_reduce)(a, b, RBLN_SUM, comm) == RBLN_OK);
	}
	got = data_of(b);
	CHECK(got);
	ok &= MATCH(got, RBLN_F32, n, folded(RBLN_BINARY_ADD, RBLN_F32, nranks, _k, 80));
	free(got);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

/*
 * A rank that comes 3 s late, more than the device's job timeout
 * (test_comm_async's guest has job_timeout_ms=1000): asynchronous, the
 * others' jobs wait on the device all that time, and the driver keeps
 * them because the progress thread's heartbeat moves their word. The
 * job queued after the collective must run after it, with no error.
 */
static bool test_late_rank(void)
{
	const int64_t n = two_reduce_chunks(RBLN_F32);
	rbln_tensor *a = input(RBLN_F32, rank, n, 81), *b = output(RBLN_F32, n), *y = NULL;
	struct timespec late = { .tv_sec = 3 };
	bool ok = true;
	void *got;

	CHECK(a && b);
	/* Lateness is what this case is about: the rank is busy elsewhere. */
	if (rank == 1)
		nanosleep(&late, NULL);
	CHECK((rbln_all_reduce)(a, b, RBLN_SUM, comm) == RBLN_OK);
	y = rbln_neg(b);
	CHECK(y);
	if (rbln_synchronize(device))
		ok = FAIL("rbln_synchronize");
	got = data_of(b);
	CHECK(got);
	ok &= MATCH(got, RBLN_F32, n, folded(RBLN_BINARY_ADD, RBLN_F32, nranks, _k, 81));
	free(got);
	rbln_tensor_free(y);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

/* Does the last error contain @text? */
static bool error_has(const char *text)
{
	if (strstr(rbln_last_error(), text))
		return true;
	return FAIL("the error does not say \"%s\"", text);
}

/* @st is @want, with a message saying @text on the rank at fault and @others elsewhere. */
static bool rejected(rbln_status st, rbln_status want, bool at_fault, const char *text,
		     const char *others)
{
	if (st != want)
		return FAIL("status %s, expected %s", rbln_status_name(st), rbln_status_name(want));
	return error_has(at_fault ? text : others);
}

static bool test_mismatched_dtype(void)
{
	rbln_dtype dt = rank == 1 ? RBLN_I32 : RBLN_F32;
	rbln_tensor *a = input(dt, rank, 100, 60), *b = output(dt, 100);
	bool ok;

	CHECK(a && b);
	ok = rejected(rbln_all_reduce(a, b, RBLN_SUM, comm), RBLN_ERROR_INVALID, true,
		      "ranks disagree: rank 0 calls rbln_all_reduce(sum) of 100 f32 elements, rank 1 rbln_all_reduce(sum) of 100 i32 elements",
		      NULL);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

static bool test_mismatched_size(void)
{
	int64_t n = rank == nranks - 1 ? 101 : 100;
	rbln_tensor *a = input(RBLN_BF16, rank, n, 61);
	char text[160];
	bool ok;

	CHECK(a);
	snprintf(text, sizeof(text), "rank %d rbln_broadcast from rank 0 of 101 bf16 elements",
		 nranks - 1);
	ok = rejected(rbln_broadcast(a, 0, comm), RBLN_ERROR_INVALID, true, text, NULL);
	rbln_tensor_free(a);
	return ok;
}

static bool test_mismatched_op_and_collective(void)
{
	rbln_tensor *a = input(RBLN_I8, rank, 64, 62), *b = output(RBLN_I8, 64 * nranks);
	rbln_status st;
	void *got;
	bool ok;

	CHECK(a && b);
	st = rbln_all_reduce(a, a, rank == 2 ? RBLN_MAX : RBLN_SUM, comm);
	ok = rejected(st, RBLN_ERROR_INVALID, true, "rank 2 rbln_all_reduce(max) of 64 i8", NULL);
	st = rank == 3 ? rbln_all_gather(a, b, comm) : rbln_all_reduce(a, a, RBLN_MIN, comm);
	ok &= rejected(st, RBLN_ERROR_INVALID, true, "rank 3 rbln_all_gather of 64 i8", NULL);
	/* Neither changed anything. */
	got = data_of(a);
	CHECK(got);
	ok &= MATCH(got, RBLN_I8, 64, gen(RBLN_I8, rank, _k, 62));
	free(got);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

/* A bad argument on one rank fails it, and the others with its message. */
static bool test_bad_argument_on_one_rank(void)
{
	rbln_tensor *a = input(RBLN_F16, rank, 10, 63), *a12 = input(RBLN_F16, rank, 12, 63);
	rbln_tensor *cpu, *other;
	int64_t n = 10;
	rbln_status st;
	bool ok;

	CHECK(a && a12);
	st = rbln_all_reduce(rank == 2 ? NULL : a, a, RBLN_SUM, comm);
	ok = rejected(st, RBLN_ERROR_INVALID, rank == 2, "rbln_all_reduce: NULL tensor",
		      "rank 2 cannot take part: rbln_all_reduce: NULL tensor");

	cpu = rbln_tensor_zeros(&n, 1, RBLN_F16, RBLN_CPU);
	other = rbln_tensor_zeros(&n, 1, RBLN_F16, (device + 1) % rbln_device_count());
	CHECK(cpu && other);
	st = rbln_all_gather(a12, rank == 1 ? cpu : a12, comm);
	ok &= rejected(st, RBLN_ERROR_INVALID, rank == 1, "the output is a CPU tensor",
		       "rank 1 cannot take part: rbln_all_gather: the output is a CPU tensor");
	st = rbln_broadcast(rank == 0 ? other : a, 1, comm);
	ok &= rejected(st, RBLN_ERROR_INVALID, rank == 0, "the communicator's device is rbln:",
		       "rank 0 cannot take part: rbln_broadcast: the tensor is on rbln:");
	st = rbln_reduce_scatter(a12, a12, rank == 3 ? (rbln_redop)7 : RBLN_SUM, comm);
	ok &= rejected(st, RBLN_ERROR_INVALID, rank == 3, "unknown reduction 7",
		       "rank 3 cannot take part");
	rbln_tensor_free(a12);
	rbln_tensor_free(other);
	rbln_tensor_free(cpu);
	rbln_tensor_free(a);
	return ok;
}

static bool test_bad_arguments_everywhere(void)
{
	rbln_tensor *a = input(RBLN_I32, rank, 12, 64), *b = output(RBLN_I32, 5);
	rbln_tensor *c = output(RBLN_I32, 12 * nranks), *f = output(RBLN_F32, 12);
	bool ok;

	CHECK(a && b && c && f);
	ok = rejected(rbln_broadcast(a, nranks, comm), RBLN_ERROR_INVALID, true,
		      "root 4 is not a rank (0 to 3)", NULL);
	ok &= rejected(rbln_broadcast(a, -1, comm), RBLN_ERROR_INVALID, true,
		       "root -1 is not a rank", NULL);
	ok &= rejected(rbln_all_reduce(a, a, RBLN_SUM, NULL), RBLN_ERROR_INVALID, true,
		       "rbln_all_reduce: NULL communicator", NULL);
	ok &= rejected(rbln_all_reduce(a, b, RBLN_SUM, comm), RBLN_ERROR_INVALID, true,
		       "the input has 12 elements, the output 5", NULL);
	ok &= rejected(rbln_all_reduce(a, f, RBLN_SUM, comm), RBLN_ERROR_INVALID, true,
		       "the input is i32, the output f32", NULL);
	ok &= rejected(rbln_all_gather(a, b, comm), RBLN_ERROR_INVALID, true,
		       "the output has 5 elements, not 4 times the input's 12", NULL);
	ok &= rejected(rbln_reduce_scatter(a, b, RBLN_SUM, comm), RBLN_ERROR_INVALID, true,
		       "the input has 12 elements, not 4 times the output's 5", NULL);
	ok &= rejected(rbln_all_gather(b, b, comm), RBLN_ERROR_INVALID, true,
		       "in place, 5 elements do not split into 4 equal parts", NULL);
	ok &= rejected(rbln_send(a, rank, comm), RBLN_ERROR_INVALID, true,
		       "rbln_send: peer", NULL);
	ok &= error_has("is this rank");
	ok &= rejected(rbln_recv(a, nranks, comm), RBLN_ERROR_INVALID, true,
		       "rbln_recv: peer 4 is not a rank (0 to 3)", NULL);
	ok &= rbln_comm_rank(NULL) == RBLN_ERROR_INVALID && error_has("NULL communicator");
	/* The communicator still works. */
	ok &= all_gather_case(RBLN_I32, 12, false, 65);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
	rbln_tensor_free(f);
	return ok;
}

static bool test_send_recv_mismatch(void)
{
	rbln_dtype dt = rank & 1 ? RBLN_F16 : RBLN_BF16;
	rbln_tensor *t = output(dt, 33);
	rbln_status st;
	bool ok;

	CHECK(t);
	st = rank & 1 ? rbln_recv(t, rank ^ 1, comm) : rbln_send(t, rank ^ 1, comm);
	ok = rejected(st, RBLN_ERROR_INVALID, rank & 1,
		      "rbln_recv: this rank calls rbln_recv of 33 f16 elements, peer",
		      "rbln_send: this rank calls rbln_send of 33 bf16 elements, peer");
	rbln_tensor_free(t);
	return ok;
}

static bool test_comm_init(void)
{
	rbln_comm *c = NULL;
	rbln_status st;
	bool ok = true;

	CHECK(rbln_comm_rank(comm) == rank && rbln_comm_size(comm) == nranks &&
	      rbln_comm_device(comm) == device);
	ok &= rejected(rbln_comm_init(NULL, MPI_COMM_WORLD, device), RBLN_ERROR_INVALID, true,
		       "NULL result pointer", NULL);
	st = rbln_comm_init(&c, MPI_COMM_WORLD, rank == 1 ? 99 : device);
	ok &= c == NULL;
	ok &= rejected(st, RBLN_ERROR_NO_DEVICE, rank == 1, "99", "rank 1 cannot join");
	/* One more communicator, over half the ranks, works beside the first. */
	{
		MPI_Comm half;
		rbln_tensor *a = input(RBLN_I32, rank, 9, 66), *b = output(RBLN_I32, 9);
		void *got;

		CHECK(a && b);
		MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
		CHECK(rbln_comm_init(&c, half, device) == RBLN_OK);
		CHECK(rbln_comm_size(c) == (nranks + 1 - rank % 2) / 2);
		CHECK(rbln_all_reduce(a, b, RBLN_MAX, c) == RBLN_OK);
		got = data_of(b);
		CHECK(got);
		for (int k = 0; k < 9; k++) {
			int32_t exp = INT32_MIN;

			for (int r = rank % 2; r < nranks; r += 2)
				exp = (int32_t)gen(RBLN_I32, r, k, 66) > exp ?
				      (int32_t)gen(RBLN_I32, r, k, 66) : exp;
			ok &= (int32_t)ref_get(RBLN_I32, got, k) == exp;
		}
		free(got);
		CHECK(rbln_comm_free(c) == RBLN_OK);
		MPI_Comm_free(&half);
		rbln_tensor_free(a);
		rbln_tensor_free(b);
	}
	CHECK(rbln_comm_free(NULL) == RBLN_OK);
	return ok;
}

/*
 * explain() counts the host traffic as bounces, by site with the caller;
 * the fold buffer is device memory.
 */
static bool test_explain_and_memory(void)
{
	const int64_t n = 1001, part = (n + nranks - 1) / nranks;
	const int64_t mine = n - rank * part < part ? n - rank * part : part;
	rbln_tensor *a = input(RBLN_F32, rank, n, 67), *b = output(RBLN_F32, n);
	struct rbln_explain_dump dump;
	rbln_explain *e;
	int64_t before;
	bool ok = true;
	size_t i;

	CHECK(a && b);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	CHECK(rbln_reset_peak_memory_stats(device) == RBLN_OK);
	before = rbln_memory_allocated(device);
	e = rbln_explain_begin(true);
	CHECK(e);
	CHECK(rbln_all_reduce(a, b, RBLN_SUM, comm) == RBLN_OK);
	CHECK(rbln_explain_end(e) == RBLN_OK);
	CHECK(rbln_explain_dump(e, &dump) == RBLN_OK);
	/*
	 * The ranks share the guest: NPU to NPU through peer imports, not a
	 * byte through the host, unless RBLN_COMM_PEER=0 stages it.
	 */
	if (!staged_run) {
		if (dump.host_bounce.count || dump.host_bounce.bytes)
			ok = FAIL("peer path: %lld bounces of %lld bytes",
				  (long long)dump.host_bounce.count,
				  (long long)dump.host_bounce.bytes);
		/* Each rank's n - 1 folds of its segment, on its NPU. */
		if (dump.dispatch.total.count < nranks - 1)
			ok = FAIL("peer path: %lld dispatches",
				  (long long)dump.dispatch.total.count);
		/* Out of place, it folds into the output: no device memory of its own. */
		if (rbln_max_memory_allocated(device) != before)
			ok = FAIL("peer path: peak %lld over %lld before",
				  (long long)rbln_max_memory_allocated(device), (long long)before);
		goto memory;
	}
	/*
	 * Out: the tensor, then the folded segment. In: every rank's part of
	 * this rank's segment (the size of the largest), then the others'
	 * folded segments.
	 */
	if (dump.host_bounce.to_host_bytes != (n + mine) * 4 ||
	    dump.host_bounce.to_device_bytes != (nranks * part + n - mine) * 4)
		ok = FAIL("bounces: %lld bytes to the host, %lld to the device",
			  (long long)dump.host_bounce.to_host_bytes,
			  (long long)dump.host_bounce.to_device_bytes);
	for (i = 0; i < dump.host_bounce.nsites && ok; i++)
		if (strcmp(dump.host_bounce.by_site[i].op, "all_reduce") ||
		    !dump.host_bounce.by_site[i].caller)
			ok = FAIL("bounce site %s, caller %s", dump.host_bounce.by_site[i].site,
				  dump.host_bounce.by_site[i].caller ?: "none");
	ok &= dump.host_bounce.nsites == 2;
	/* Every rank's part of this rank's segment, for two chunks, on the device while folding. */
	if (rbln_max_memory_allocated(device) - before < 2 * nranks * part * 4)
		ok = FAIL("peak %lld over %lld before", (long long)rbln_max_memory_allocated(device),
			  (long long)before);
memory:
	if (rbln_memory_allocated(device) != before)
		ok = FAIL("%lld bytes allocated after, %lld before",
			  (long long)rbln_memory_allocated(device), (long long)before);
	rbln_explain_free(e);
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

/*
 * A staged collective's staging buffers (pinned host memory, 2 MiB each)
 * count in staging.*, and go back to the device's pool after:
 * staging.current ends where it started.
 */
static bool test_staging_in_memory_stats(void)
{
	const int64_t chunk = 2 << 20, n = two_reduce_chunks(RBLN_F32);
	struct rbln_memory_stats s0, s1, s2;
	rbln_tensor *a = input(RBLN_F32, rank, n, 69);
	rbln_comm *c = NULL;
	rbln_status st;
	void *got;
	bool ok = true;

	CHECK(a);
	setenv("RBLN_COMM_PEER", "0", 1);	/* staged, through the host */
	st = rbln_comm_init(&c, MPI_COMM_WORLD, device);
	unsetenv("RBLN_COMM_PEER");
	CHECK(st == RBLN_OK);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	CHECK(rbln_reset_peak_memory_stats(device) == RBLN_OK);
	CHECK(rbln_memory_stats(device, &s0) == RBLN_OK);
	/* input() copied through them: the pool holds some. */
	CHECK(s0.staging.current > 0 && s0.staging.peak == s0.staging.current);
	CHECK(rbln_all_reduce(a, a, RBLN_SUM, c) == RBLN_OK);
	if (async_run) {
		/* Its progress thread's staging buffers are the communicator's while it lives. */
		CHECK(rbln_memory_stats(device, &s1) == RBLN_OK);
		if (s1.staging.current <= s0.staging.current)
			ok = FAIL("staging: %lld current (%lld before) with the communicator",
				  (long long)s1.staging.current, (long long)s0.staging.current);
		CHECK(rbln_comm_free(c) == RBLN_OK);
		c = NULL;
	}
	CHECK(rbln_synchronize(device) == RBLN_OK);
	CHECK(rbln_memory_stats(device, &s1) == RBLN_OK);
	/* A chunk in MPI's hands, the next being fetched, and the one MPI receives into. */
	if (s1.staging.peak < 3 * chunk)
		ok = FAIL("staging.peak %lld during an all-reduce", (long long)s1.staging.peak);
	if (s1.staging.current != s0.staging.current ||
	    s1.staging.total_allocated - s1.staging.total_freed != s1.staging.current ||
	    s1.staging.total_freed <= s0.staging.total_freed)
		ok = FAIL("staging: %lld current (%lld before), %lld allocated, %lld freed",
			  (long long)s1.staging.current, (long long)s0.staging.current,
			  (long long)s1.staging.total_allocated, (long long)s1.staging.total_freed);
	/* Device memory is another matter: the tensors' bytes did not move. */
	CHECK(s1.allocated.current == s0.allocated.current);
	CHECK(rbln_reset_peak_memory_stats(device) == RBLN_OK);
	CHECK(rbln_memory_stats(device, &s1) == RBLN_OK);
	CHECK(s1.staging.peak == s1.staging.current);
	/* A copy to the host of four chunks, two in flight, takes the pool's (test_runtime). */
	got = data_of(a);
	CHECK(got);
	free(got);
	CHECK(rbln_memory_stats(device, &s2) == RBLN_OK);
	if (s2.staging.peak != s1.staging.peak || s2.staging.current != s0.staging.current)
		ok = FAIL("staging: %lld current, %lld peak after a copy", (long long)s2.staging.current,
			  (long long)s2.staging.peak);
	CHECK(rbln_comm_free(c) == RBLN_OK);
	rbln_tensor_free(a);
	return ok;
}

/* Arms fault injection @what for the next job of this rank's device. */
static bool inject(const char *what)
{
	char path[300], link[256], *bus;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/accel/accel%d/device", device);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return FAIL("no %s", path);
	link[n] = 0;
	/* debugfs names the device after its bus device. */
	bus = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/inject", bus);
	f = fopen(path, "we");
	if (!f || fputs(what, f) == EOF || fclose(f))
		return FAIL("cannot write %s", path);
	return true;
}

/*
 * The peer path caches its imports of other ranks' objects: a tensor
 * freed, its memory given back (rbln_empty_cache) and another allocated,
 * perhaps where it was, is read afresh every time, never through an
 * import of the memory that went.
 */
static bool test_peer_imports_follow_reuse(void)
{
	const int64_t n = 3001;
	rbln_tensor *t, *out, *pad = NULL;
	bool ok = true;
	uint32_t salt;
	void *got;
	int round, r;

	for (round = 0; round < 6 && ok; round++) {
		salt = 100 + round;
		t = input(RBLN_I32, rank, n, salt);
		out = output(RBLN_I32, n * nranks);
		CHECK(t && out);
		if (rbln_all_gather(t, out, comm))
			return FAIL("rbln_all_gather, round %d", round);
		got = data_of(out);
		CHECK(got);
		for (r = 0; r < nranks && ok; r++)
			ok = MATCH((char *)got + r * n * 4, RBLN_I32, n, gen(RBLN_I32, r, _k, salt));
		free(got);
		rbln_tensor_free(out);
		rbln_tensor_free(t);
		rbln_tensor_free(pad);
		pad = NULL;
		/* The memory back to the driver: the next tensor is in a new object. */
		if (round % 2)
			CHECK(rbln_empty_cache(device) == RBLN_OK);
		/* Else the next one is elsewhere in the same object. */
		else
			pad = input(RBLN_I8, rank, 4096 * (round + 1), 1);
	}
	rbln_tensor_free(pad);
	return ok;
}

/*
 * A tensor over two of the caching allocator's objects: with the cache
 * empty, a 17 MiB block takes most of the first 20 MiB map of the
 * expandable segment, and the next one, of 4 MiB, starts in its last
 * 3 MiB and ends in the next map. On the peer path each rank exports both
 * objects, and the others import both.
 */
static bool test_tensor_over_two_objects(void)
{
	const int64_t n = (4 << 20) / 4, big = (17 << 20) / 4;
	rbln_tensor *x, *y;
	bool ok;
	void *got;

	CHECK(rbln_synchronize(device) == RBLN_OK);
	CHECK(rbln_empty_cache(device) == RBLN_OK);
	x = output(RBLN_F32, big);
	y = input(RBLN_I32, rank, n, 96);
	CHECK(x && y);
	if (rbln_all_reduce(y, y, RBLN_SUM, comm))
		return FAIL("rbln_all_reduce");
	got = data_of(y);
	CHECK(got);
	ok = MATCH(got, RBLN_I32, n, folded(RBLN_BINARY_ADD, RBLN_I32, nranks, _k, 96));
	free(got);
	rbln_tensor_free(y);
	rbln_tensor_free(x);
	return ok;
}

/*
 * A DMA that fails on rank 1 fails the all-reduce there, and then on every
 * other rank, which would otherwise wait for rank 1's chunks. Last: the
 * fault bans rank 1's context on its device.
 */
static bool test_failure_midway(void)
{
	int64_t n = two_reduce_chunks(RBLN_F32);
	rbln_tensor *a = input(RBLN_F32, rank, n, 70), *b = output(RBLN_F32, n);
	rbln_status st;
	bool ok;

	CHECK(a && b);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	if (rank == 1)
		CHECK(inject("dma"));
	st = rbln_all_reduce(a, b, RBLN_SUM, comm);
	/* Asynchronous, rank 1 may find its failure while it queues the device's part. */
	if (async_run && rank != 1 && strstr(rbln_last_error(), "rank 1 cannot take part: "))
		ok = rejected(st, RBLN_ERROR_DEVICE, false, "", "work");
	else
		ok = rejected(st, RBLN_ERROR_DEVICE, rank == 1, "work",
			      "rbln_all_reduce: rank 1 failed midway: the result is not valid");
	rbln_tensor_free(a);
	rbln_tensor_free(b);
	return ok;
}

/* Did the collective that took @t seconds fail as a timeout should, with @text? */
static bool timed_out(rbln_status st, double t, const char *text)
{
	bool ok = rejected(st, RBLN_ERROR_TIMEOUT, true, text, NULL);

	/* Not before the timeout, but for MPI_Wtime()'s clock against librbln's. */
	if (t < SHORT_TIMEOUT_MS / 1000.0 - 0.01 || t > SHORT_TIMEOUT_MS / 1000.0 + LATE_S)
		ok = FAIL("the timeout of %d ms came after %.1f s", SHORT_TIMEOUT_MS, t);
	return ok;
}

/*
 * Rank 1 (whose device context failure_midway banned) dies before an
 * all-reduce: the others time out in the check of the arguments, naming
 * it, and the communicator refuses what follows, at once.
 */
static bool test_dead_rank_before(void)
{
	rbln_tensor *a;
	rbln_status st;
	double t0;
	bool ok;

	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1)
		_exit(0);
	live = three;
	a = input(RBLN_F32, rank, 1001, 80);
	CHECK(a);
	CHECK(rbln_comm_timeout(comm) == 30000);
	CHECK(rbln_comm_set_timeout(comm, 0) == RBLN_ERROR_INVALID);
	CHECK(rbln_comm_set_timeout(comm, SHORT_TIMEOUT_MS) == RBLN_OK);
	t0 = MPI_Wtime();
	st = rbln_all_reduce(a, a, RBLN_SUM, comm);
	ok = timed_out(st, MPI_Wtime() - t0,
		       "rbln_all_reduce: no answer from rank 1 in 3000 ms, during the check of the arguments");
	t0 = MPI_Wtime();
	st = rbln_broadcast(a, 0, comm);
	ok &= rejected(st, RBLN_ERROR_TIMEOUT, true,
		       "rbln_broadcast: the communicator is unusable after a timeout: rbln_all_reduce: no answer from rank 1",
		       NULL);
	if (MPI_Wtime() - t0 > 1.0)
		ok = FAIL("the unusable communicator took %.1f s to say so", MPI_Wtime() - t0);
	rbln_tensor_free(a);
	return ok;
}

/*
 * Of ranks 0, 2 and 3, the second (2) dies as it sends its first chunk
 * of an all-reduce: the others time out in the data, naming it (rank 1 of
 * their communicator), and free the communicator. Staged
 * (RBLN_COMM_PEER=0), where the data is MPI's.
 */
static bool test_dead_rank_midway(void)
{
	int64_t n = two_reduce_chunks(RBLN_F32);
	rbln_tensor *a = input(RBLN_F32, rank, n, 81);
	rbln_comm *c = NULL;
	rbln_status st;
	double t0;
	bool ok;

	CHECK(a);
	setenv("RBLN_COMM_PEER", "0", 1);
	setenv("RBLN_COMM_TIMEOUT_MS", "3000", 1);
	st = rbln_comm_init(&c, three, device);
	unsetenv("RBLN_COMM_TIMEOUT_MS");
	unsetenv("RBLN_COMM_PEER");
	CHECK(st == RBLN_OK);
	CHECK(rbln_comm_timeout(c) == SHORT_TIMEOUT_MS);
	CHECK(rbln_synchronize(device) == RBLN_OK);
	MPI_Barrier(three);
	die_at_data = rank == 2;
	t0 = MPI_Wtime();
	st = rbln_all_reduce(a, a, RBLN_SUM, c);
	live = two;
	ok = timed_out(st, MPI_Wtime() - t0,
		       "rbln_all_reduce: no answer from rank 1 in 3000 ms, during the data of chunk 1 of 2");
	CHECK(rbln_comm_free(c) == RBLN_OK);
	rbln_tensor_free(a);
	return ok;
}

/*
 * Of ranks 0 and 3, on the peer path, 3 dies as it publishes its tensor's
 * objects: rank 0 times out there, and finds the communicator unusable.
 */
static bool test_dead_rank_on_peer_path(void)
{
	rbln_tensor *a = input(RBLN_I32, rank, 5000, 82);
	rbln_comm *c = NULL;
	rbln_status st;
	double t0;
	bool ok;

	CHECK(a);
	if (staged_run) {
		rbln_tensor_free(a);
		return true;	/* test_comm's run covers it */
	}
	unsetenv("RBLN_COMM_PEER");	/* dead_rank_midway's */
	setenv("RBLN_COMM_TIMEOUT_MS", "3000", 1);
	st = rbln_comm_init(&c, two, device);
	unsetenv("RBLN_COMM_TIMEOUT_MS");
	CHECK(st == RBLN_OK);
	MPI_Barrier(two);
	die_at_peer_exchange = rank == 3;
	t0 = MPI_Wtime();
	st = rbln_all_reduce(a, a, RBLN_SUM, c);
	live = MPI_COMM_SELF;
	ok = timed_out(st, MPI_Wtime() - t0,
		       "rbln_all_reduce: no answer in 3000 ms during the exchange of the tensors' objects on the peer path");
	t0 = MPI_Wtime();
	st = rbln_broadcast(a, 0, c);
	ok &= rejected(st, RBLN_ERROR_TIMEOUT, true, "the communicator is unusable", NULL);
	if (MPI_Wtime() - t0 > 1.0)
		ok = FAIL("the unusable communicator took %.1f s to say so", MPI_Wtime() - t0);
	CHECK(rbln_comm_free(c) == RBLN_OK);
	rbln_tensor_free(a);
	return ok;
}

static const struct {
	const char *name;
	bool (*fn)(void);
} cases[] = {
	{ "comm_init", test_comm_init },
	{ "all_reduce", test_all_reduce },
	{ "all_reduce_in_place", test_all_reduce_in_place },
	{ "all_reduce_large", test_all_reduce_large },
	{ "all_gather", test_all_gather },
	{ "reduce_scatter", test_reduce_scatter },
	{ "broadcast", test_broadcast },
	{ "send_recv", test_send_recv },
	{ "ordered_with_device_work", test_ordered_with_device_work },
	{ "queued_back_to_back", test_queued_back_to_back },
	{ "returns_before_the_others", test_returns_before_the_others },
	{ "late_rank", test_late_rank },
	{ "mismatched_dtype", test_mismatched_dtype },
	{ "mismatched_size", test_mismatched_size },
	{ "mismatched_op_and_collective", test_mismatched_op_and_collective },
	{ "bad_argument_on_one_rank", test_bad_argument_on_one_rank },
	{ "bad_arguments_everywhere", test_bad_arguments_everywhere },
	{ "send_recv_mismatch", test_send_recv_mismatch },
	{ "explain_and_memory", test_explain_and_memory },
	{ "staging_in_memory_stats", test_staging_in_memory_stats },
	{ "peer_imports_follow_reuse", test_peer_imports_follow_reuse },
	{ "tensor_over_two_objects", test_tensor_over_two_objects },
	{ "failure_midway", test_failure_midway },
	/* Last: each kills a rank. */
	{ "dead_rank_before", test_dead_rank_before },
	{ "dead_rank_midway", test_dead_rank_midway },
	{ "dead_rank_on_peer_path", test_dead_rank_on_peer_path },
};

int main(int argc, char **argv)
{
	int ncases = sizeof(cases) / sizeof(cases[0]), i, mine, all, failed = 0;
	MPI_Comm local;
	double t0;

	async_run = argc > 1 && !strcmp(argv[1], "--async");
	if (async_run) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &i);
		if (i != MPI_THREAD_MULTIPLE) {
			printf("Bail out! MPI_THREAD_MULTIPLE needed, MPI gives %d\n", i);
			MPI_Finalize();
			return 1;
		}
	} else {
		MPI_Init(&argc, &argv);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	/* One NPU per rank of a host. */
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &device);
	MPI_Comm_size(local, &i);
	MPI_Comm_free(&local);
	/* Ranks on several hosts (test_comm_two_guests): the library stages by itself. */
	two_hosts = i != nranks;
	if (two_hosts)
		staged_run = true;
	live = MPI_COMM_WORLD;
	MPI_Comm_split(MPI_COMM_WORLD, rank != 1 ? 0 : MPI_UNDEFINED, rank, &three);
	MPI_Comm_split(MPI_COMM_WORLD, rank == 0 || rank == 3 ? 0 : MPI_UNDEFINED, rank, &two);
	if (!rank) {
		printf("TAP version 13\n1..%d\n", ncases);
		fflush(stdout);
	}
	if (nranks != 4 || rbln_device_count() < 4) {
		if (!rank)
			printf("Bail out! 4 ranks and 4 devices needed, have %d and %d\n", nranks,
			       rbln_device_count());
		MPI_Finalize();
		return 1;
	}
	if (rbln_comm_init(&comm, MPI_COMM_WORLD, device)) {
		fprintf(stderr, "rank %d: rbln_comm_init: %s\n", rank, rbln_last_error());
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (i = 0; i < ncases; i++) {
		if (cases[i].fn == test_returns_before_the_others && !async_run) {
			if (!rank)
				printf("ok %d %s # SKIP synchronous: a call waits for the others\n",
				       i + 1, cases[i].name);
			continue;
		}
		/*
		 * A minute under TCG: the peer path's run and the asynchronous
		 * one in one guest take it; the staged pipeline's buffers are
		 * reused from the third chunk on, as two_reduce_chunks() has.
		 */
		if (cases[i].fn == test_all_reduce_large && staged_run &&
		    (!async_run || two_hosts)) {
			if (!rank)
				printf("ok %d %s # SKIP run by test_comm and test_comm_async\n",
				       i + 1, cases[i].name);
			continue;
		}
		t0 = MPI_Wtime();
		mine = cases[i].fn();
		MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, live);
		failed += !all;
		if (!rank) {
			printf("# %s: %.1f s\n%sok %d %s\n", cases[i].name, MPI_Wtime() - t0,
			       all ? "" : "not ", i + 1, cases[i].name);
			fflush(stdout);
		}
	}
	rbln_comm_free(comm);
	if (three != MPI_COMM_NULL)
		MPI_Comm_free(&three);
	if (two != MPI_COMM_NULL)
		MPI_Comm_free(&two);
	MPI_Finalize();
	return failed ? 1 : 0;
}
