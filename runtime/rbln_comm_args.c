// SPDX-License-Identifier: MIT
/*
 * rbln_comm_args.c - a collective's request: its checks, the record the
 * ranks exchange, the comparison of every rank's record, and the words
 * for what went wrong
 */

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rbln_comm_args.h"
#include "rbln_internal.h"

const char *const rbln_coll_names[RBLN_COLL_NKINDS] = {
	"rbln_all_reduce", "rbln_all_gather", "rbln_reduce_scatter", "rbln_broadcast",
	"rbln_send", "rbln_recv",
};

const char *const rbln_coll_ops[RBLN_COLL_NKINDS] = {
	"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv",
};

const unsigned int rbln_redop_subs[RBLN_MIN + 1] = {
	RBLN_BINARY_ADD, RBLN_BINARY_MAX, RBLN_BINARY_MIN,
};

static const char *const op_names[RBLN_MIN + 1] = { "sum", "max", "min" };
static const char *const dtype_names[RBLN_I8 + 1] = { "f32", "f16", "bf16", "i32", "i8" };

static const char *dtype_name(int dtype)
{
	return dtype >= 0 && dtype <= RBLN_I8 ? dtype_names[dtype] : "?";
}

void rbln_coll_meta_status(struct rbln_coll_meta *m, rbln_status st)
{
	m->status = st;
	if (st)
		snprintf(m->error, sizeof(m->error), "%s", rbln_last_error());
}

/* "rbln_all_reduce(sum) of 12 f32 elements" and the like. */
static void describe(const struct rbln_coll_meta *m, char *buf, size_t len)
{
	char what[48] = "";

	if (rbln_coll_is_reduction(m->kind))
		snprintf(what, sizeof(what), "(%s)",
			 m->op >= 0 && m->op <= RBLN_MIN ? op_names[m->op] : "?");
	else if (m->kind == RBLN_COLL_BROADCAST)
		snprintf(what, sizeof(what), " from rank %d", m->root);
	snprintf(buf, len, "%s%s of %lld %s elements",
		 m->kind >= 0 && m->kind < RBLN_COLL_NKINDS ? rbln_coll_names[m->kind] : "?", what,
		 (long long)m->count, dtype_name(m->dtype));
}

static bool meta_same(const struct rbln_coll_meta *a, const struct rbln_coll_meta *b)
{
	return a->kind == b->kind && a->dtype == b->dtype && a->count == b->count &&
	       (!rbln_coll_is_reduction(a->kind) || a->op == b->op) &&
	       (a->kind != RBLN_COLL_BROADCAST || a->root == b->root);
}

rbln_status rbln_coll_judge(const struct rbln_coll_meta *all, int size, int rank,
			    const struct rbln_coll_meta *mine, int peer)
{
	const char *fn = rbln_coll_names[mine->kind];
	const struct rbln_coll_meta *t;
	char a[128], b[128];
	int r;

	if (mine->status)
		return mine->status;	/* its own message stands */
	if (rbln_coll_is_pair(mine->kind)) {
		t = &all[peer];
		if (t->status)
			return rbln_fail(t->status, "%s: peer %d cannot take part: %s", fn, peer,
					 t->error);
		if (t->kind != (mine->kind == RBLN_COLL_SEND ? RBLN_COLL_RECV : RBLN_COLL_SEND) ||
		    t->dtype != mine->dtype || t->count != mine->count || t->root != rank) {
			describe(mine, a, sizeof(a));
			describe(t, b, sizeof(b));
			return rbln_fail(RBLN_ERROR_INVALID, "%s: this rank calls %s, peer %d %s%s",
					 fn, a, peer, b, t->root != rank && t->kind != mine->kind ?
					 " with another rank" : "");
		}
		return RBLN_OK;
	}
	for (r = 0; r < size; r++)
		if (all[r].status)
			return rbln_fail(all[r].status, "%s: rank %d cannot take part: %s", fn, r,
					 all[r].error);
	/* Against rank 0's, so that every rank finds the same mismatch. */
	for (r = 1; r < size; r++) {
		if (meta_same(&all[0], &all[r]))
			continue;
		describe(&all[0], a, sizeof(a));
		describe(&all[r], b, sizeof(b));
		return rbln_fail(RBLN_ERROR_INVALID, "%s: ranks disagree: rank 0 calls %s, rank %d %s",
				 fn, a, r, b);
	}
	return RBLN_OK;
}

rbln_status rbln_coll_check(enum rbln_coll_kind kind, rbln_redop op, int root, int rank, int size,
			    const rbln_tensor *in, const rbln_tensor *out, bool in_place,
			    int64_t in_n, int64_t out_n, const char *whose, int64_t *n)
{
	const char *fn = rbln_coll_names[kind], *of = whose ? whose : "";
	const char *sep = whose ? ": " : "";
	bool gather = kind == RBLN_COLL_ALL_GATHER;
	int64_t whole, part;

	if (in->dtype != out->dtype)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: the input is %s, the output %s", fn,
				 dtype_name(in->dtype), dtype_name(out->dtype));
	if (rbln_coll_is_reduction(kind) && (op < RBLN_SUM || op > RBLN_MIN))
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: unknown reduction %d (RBLN_SUM, RBLN_MAX, RBLN_MIN)", fn, (int)op);
	if ((kind == RBLN_COLL_BROADCAST || rbln_coll_is_pair(kind)) && (root < 0 || root >= size))
		return rbln_fail(RBLN_ERROR_INVALID, "%s: %s %d is not a rank (0 to %d)", fn,
				 kind == RBLN_COLL_BROADCAST ? "root" : "peer", root, size - 1);
	if (rbln_coll_is_pair(kind) && root == rank)
		return rbln_fail(RBLN_ERROR_INVALID, "%s: peer %d is this rank", fn, root);

	*n = in_n;
	if (gather || kind == RBLN_COLL_REDUCE_SCATTER) {
		/* The tensor of all parts, and the part. */
		whole = gather ? out_n : in_n;
		part = gather ? in_n : out_n;
		if (in_place && whole % size)
			return rbln_fail(RBLN_ERROR_INVALID,
					 "%s: %s%sin place, %lld elements do not split into %d equal parts",
					 fn, of, sep, (long long)whole, size);
		if (!in_place && whole != part * size)
			return rbln_fail(RBLN_ERROR_INVALID,
					 "%s: %s%sthe %s has %lld elements, not %d times the %s's %lld",
					 fn, of, sep, gather ? "output" : "input", (long long)whole, size,
					 gather ? "input" : "output", (long long)part);
		*n = in_place ? whole / size : part;
	} else if (kind == RBLN_COLL_ALL_REDUCE && out_n != in_n) {
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: %s%sthe input has %lld elements, the output %lld", fn, of, sep,
				 (long long)in_n, (long long)out_n);
	}
	return RBLN_OK;
}

rbln_status rbln_comm_mpi_fail(const char *fn, const char *call, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "error %d", err);
	return rbln_fail(RBLN_ERROR_DEVICE, "%s: %s failed: %s", fn, call, msg);
}

rbln_status rbln_comm_env_timeout(int64_t *ms, const char *fn)
{
	const char *v = getenv("RBLN_COMM_TIMEOUT_MS");
	long long t;
	char *end;

	*ms = RBLN_COMM_DEFAULT_TIMEOUT_MS;
	if (!v || !*v)
		return RBLN_OK;
	errno = 0;
	t = strtoll(v, &end, 10);
	if (errno || *end || end == v || t <= 0)
		return rbln_fail(RBLN_ERROR_INVALID,
				 "%s: RBLN_COMM_TIMEOUT_MS=%.32s is not a number of milliseconds above 0",
				 fn, v);
	*ms = t;
	return RBLN_OK;
}

/*
 * A rank polls MPI while others are late, which can be long: a peer still
 * computing, or one of the ranks sharing this host's CPUs with it (and the
 * asynchronous collectives' progress thread shares it with its caller).
 * Past the first tens of microseconds, where an answer is usually already
 * on its way, a rank polling flat out only delays those it waits for.
 */
#define SPIN_NS		20000ll
#define YIELD_NS	2000000ll
#define NAP_NS		50000

void rbln_comm_poll_pause(int64_t waited_ns)
{
	struct timespec nap = { 0, NAP_NS };

	if (waited_ns >= YIELD_NS)
		nanosleep(&nap, NULL);
	else if (waited_ns >= SPIN_NS)
		sched_yield();
}
