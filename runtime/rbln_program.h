/* SPDX-License-Identifier: MIT */
/*
 * rbln_program.h - device ops compiled to command buffers, and their cache
 * (internal)
 *
 * A program is the packets of one op for one (op, dtypes, shapes), with the
 * operand addresses left out: relocations say where each goes. Running it
 * copies the packets into the device's command ring and fills them in.
 */
#ifndef RBLN_PROGRAM_H
#define RBLN_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "rbln/rbln.h"

enum rbln_op_kind {
	RBLN_OPK_COPY,		/* out = a */
	RBLN_OPK_FILL,		/* out = scalar (a 32-bit pattern) */
	RBLN_OPK_UNARY,		/* out = sub(a) */
	RBLN_OPK_BINARY,	/* out = a sub b */
	RBLN_OPK_SCALAR,	/* out = a sub scalar */
	RBLN_OPK_CAST,		/* out = (out_dtype)a */
	RBLN_OPK_REDUCE,	/* out = sub over a's last dimension */
	RBLN_OPK_MATMUL,	/* out = a @ b, 2-D or batched */
};

/* What a program is compiled for: the shapes are those of one shard. */
struct rbln_program_key {
	uint8_t kind, sub, in_dtype, out_dtype;
	uint8_t ndim_a, ndim_b;
	int64_t shape_a[RBLN_MAX_DIMS];
	int64_t shape_b[RBLN_MAX_DIMS];
};

enum rbln_arg { RBLN_ARG_A, RBLN_ARG_B, RBLN_ARG_OUT, RBLN_ARG_SCALAR, RBLN_NARGS };

struct rbln_program;

/*
 * The program for @key, compiled on a miss (*@compiled true) and cached;
 * NULL with an error on failure. Release it with rbln_program_put().
 */
struct rbln_program *rbln_program_get(const struct rbln_program_key *key, bool *compiled);
void rbln_program_put(struct rbln_program *p);
uint32_t rbln_program_size(const struct rbln_program *p);
/* Writes @p's packets to @dst with the operands' addresses (and scalar bits) @args. */
void rbln_program_emit(const struct rbln_program *p, void *dst, const uint64_t args[RBLN_NARGS]);

#endif /* RBLN_PROGRAM_H */
