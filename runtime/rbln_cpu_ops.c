// SPDX-License-Identifier: MIT
/*
 * rbln_cpu_ops.c - ops the NPU's ISA lacks, run on the CPU
 *
 * On a device tensor each one is a fallback: the input comes to the host
 * and the result goes back, and explain() sees every such move as a host
 * bounce. A tensor whose data has not reached the device yet (lazy) is
 * read where it is and the result stays lazy: nothing crosses. The math
 * is in double, rounded once to the result's dtype.
 */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rbln_explain.h"
#include "rbln_internal.h"

static bool is_float(rbln_dtype dtype)
{
	return dtype == RBLN_F32 || dtype == RBLN_F16 || dtype == RBLN_BF16;
}

enum cpu_fn { CPU_EXP, CPU_LOG, CPU_TANH, CPU_SOFTMAX };

static void softmax_rows(const rbln_tensor *a, const void *in, rbln_dtype out_dtype, void *out)
{
	int64_t cols = a->ndim ? a->shape[a->ndim - 1] : 1, rows = cols ? a->numel / cols : 0;
	size_t ein = rbln_dtype_size(a->dtype), eout = rbln_dtype_size(out_dtype);
	int64_t r, c;

	for (r = 0; r < rows; r++) {
		const char *x = (const char *)in + r * cols * ein;
		char *y = (char *)out + r * cols * eout;
		double max = -INFINITY, sum = 0;

		for (c = 0; c < cols; c++)
			max = fmax(max, rbln_dtype_decode(a->dtype, x + c * ein));
		for (c = 0; c < cols; c++)
			sum += exp(rbln_dtype_decode(a->dtype, x + c * ein) - max);
		for (c = 0; c < cols; c++)
			rbln_dtype_encode(out_dtype,
					  exp(rbln_dtype_decode(a->dtype, x + c * ein) - max) / sum,
					  y + c * eout);
	}
}

static rbln_tensor *cpu_op(const char *name, enum cpu_fn fn, rbln_tensor *a, const void *site)
{
	bool active = rbln_explain_active(), from_device = false;
	uint64_t start = active ? rbln_explain_now() : 0;
	rbln_tensor *out = NULL;
	rbln_dtype dtype;
	size_t ein, eout;
	int64_t i;
	void *in;

	if (!rbln_tensor_ok(a, name) ||
	    (a->device != RBLN_CPU && rbln_capture_refuse(a->device, NULL, name)) ||
	    rbln_tensor_host_data(a, &in, &from_device))
		return NULL;
	if (from_device && active)
		rbln_explain_bounce(name, true, a->nbytes, site);
	/* As in PyTorch, integers go to the default float type. */
	dtype = is_float(a->dtype) ? a->dtype : RBLN_F32;
	out = rbln_tensor_empty(a->shape, a->ndim, dtype, a->device);
	if (!out)
		goto out;
	ein = rbln_dtype_size(a->dtype);
	eout = rbln_dtype_size(dtype);
	if (fn == CPU_SOFTMAX) {
		softmax_rows(a, in, dtype, out->host);
	} else {
		for (i = 0; i < a->numel; i++) {
			double x = rbln_dtype_decode(a->dtype, (char *)in + i * ein);

			x = fn == CPU_EXP ? exp(x) : fn == CPU_LOG ? log(x) : tanh(x);
			rbln_dtype_encode(dtype, x, (char *)out->host + i * eout);
		}
	}
	if (from_device) {
		if (rbln_tensor_materialize(out)) {
			rbln_tensor_free(out);
			out = NULL;
			goto out;
		}
		if (active)
			rbln_explain_bounce(name, false, out->nbytes, site);
	}
	/* On a CPU tensor the CPU is where the op belongs: no fallback. */
	if (active && a->device != RBLN_CPU)
		rbln_explain_dispatch(RBLN_DISPATCH_CPU_FALLBACK, name, rbln_explain_now() - start, site);
out:
	if (a->device != RBLN_CPU)
		free(in);
	return out;
}

rbln_tensor *rbln_exp(rbln_tensor *a)
{
	return cpu_op("exp", CPU_EXP, a, RBLN_CALLER());
}

rbln_tensor *rbln_log(rbln_tensor *a)
{
	return cpu_op("log", CPU_LOG, a, RBLN_CALLER());
}

rbln_tensor *rbln_tanh(rbln_tensor *a)
{
	return cpu_op("tanh", CPU_TANH, a, RBLN_CALLER());
}

rbln_tensor *rbln_softmax(rbln_tensor *a)
{
	return cpu_op("softmax", CPU_SOFTMAX, a, RBLN_CALLER());
}

rbln_status rbln_tensor_item(rbln_tensor *t, const int64_t *index, double *value)
{
	bool active = rbln_explain_active(), from_device;
	uint64_t start = active ? rbln_explain_now() : 0;
	const void *site = RBLN_CALLER();
	int64_t flat = 0;
	uint8_t elem[4];
	rbln_status st;
	int i;

	if (!rbln_tensor_ok(t, "rbln_tensor_item"))
		return RBLN_ERROR_INVALID;
	if (t->device != RBLN_CPU && rbln_capture_refuse(t->device, NULL, "rbln_tensor_item"))
		return RBLN_ERROR_CAPTURE;
	if (!value || (t->ndim && !index))
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_item: NULL %s",
				 value ? "index" : "value");
	for (i = 0; i < t->ndim; i++) {
		if (index[i] < 0 || index[i] >= t->shape[i])
			return rbln_fail(RBLN_ERROR_INVALID,
					 "rbln_tensor_item: index %" PRId64 " of dimension %d is out of [0, %" PRId64 ")",
					 index[i], i, t->shape[i]);
		flat = flat * t->shape[i] + index[i];
	}
	if (!t->numel)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_item: an empty tensor");
	from_device = rbln_tensor_is_materialized(t);
	st = rbln_tensor_read_element(t, flat, elem);
	if (st)
		return st;
	*value = rbln_dtype_decode(t->dtype, elem);
	if (active && from_device)
		rbln_explain_bounce("item", true, rbln_dtype_size(t->dtype), site);
	if (active && t->device != RBLN_CPU)
		rbln_explain_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "item", rbln_explain_now() - start, site);
	return RBLN_OK;
}

/* --- printing, after PyTorch's tensor repr ------------------------------------------ */

#define PRINT_THRESHOLD	1000	/* more elements than this: summarize */
#define EDGE_ITEMS	3

static const char *dtype_name(rbln_dtype dtype)
{
	static const char *const names[] = {
		[RBLN_F32] = "float32", [RBLN_F16] = "float16", [RBLN_BF16] = "bfloat16",
		[RBLN_I32] = "int32", [RBLN_I8] = "int8",
	};

	return names[dtype];
}

struct printer {
	FILE *f;
	const rbln_tensor *t;
	const char *data;
	bool summarize;
};

static void print_dim(struct printer *p, int dim, int64_t offset, int indent)
{
	const rbln_tensor *t = p->t;
	int64_t n = t->shape[dim], stride = 1, i;
	size_t esize = rbln_dtype_size(t->dtype);
	int d;

	for (d = dim + 1; d < t->ndim; d++)
		stride *= t->shape[d];
	fputc('[', p->f);
	for (i = 0; i < n; i++) {
		if (p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
			fputs(dim == t->ndim - 1 ? "..., " : "...,\n", p->f);
			if (dim < t->ndim - 1)
				fprintf(p->f, "%*s", indent + 1, "");
			i = n - EDGE_ITEMS;
		}
		if (dim == t->ndim - 1) {
			double v = rbln_dtype_decode(t->dtype, p->data + (offset + i) * esize);

			if (is_float(t->dtype))
				fprintf(p->f, "%.4f", v);
			else
				fprintf(p->f, "%.0f", v);
		} else {
			print_dim(p, dim + 1, offset + i * stride, indent + 1);
		}
		if (i < n - 1)
			fprintf(p->f, dim == t->ndim - 1 ? ", " : ",\n%*s", indent + 1, "");
	}
	fputc(']', p->f);
}

rbln_status rbln_tensor_print(rbln_tensor *t, FILE *f)
{
	bool active = rbln_explain_active(), from_device = false;
	uint64_t start = active ? rbln_explain_now() : 0;
	const void *site = RBLN_CALLER();
	struct printer p;
	void *data;

	if (!rbln_tensor_ok(t, "rbln_tensor_print"))
		return RBLN_ERROR_INVALID;
	if (!f)
		return rbln_fail(RBLN_ERROR_INVALID, "rbln_tensor_print: NULL stream");
	if (t->device != RBLN_CPU && rbln_capture_refuse(t->device, NULL, "rbln_tensor_print"))
		return RBLN_ERROR_CAPTURE;
	if (rbln_tensor_host_data(t, &data, &from_device))
		return rbln_last_status();
	if (active && from_device)
		rbln_explain_bounce("print", true, t->nbytes, site);
	p = (struct printer) { .f = f, .t = t, .data = data, .summarize = t->numel > PRINT_THRESHOLD };
	fputs("tensor(", f);
	if (!t->ndim)
		fprintf(f, is_float(t->dtype) ? "%.4f" : "%.0f", rbln_dtype_decode(t->dtype, data));
	else
		print_dim(&p, 0, 0, 7);
	if (t->device != RBLN_CPU)
		fprintf(f, ", device='rbln:%d'", t->device);
	fprintf(f, ", dtype=rbln.%s)\n", dtype_name(t->dtype));
	if (t->device != RBLN_CPU)
		free(data);
	if (active && t->device != RBLN_CPU)
		rbln_explain_dispatch(RBLN_DISPATCH_CPU_FALLBACK, "print", rbln_explain_now() - start, site);
	return ferror(f) ? rbln_fail(RBLN_ERROR_DEVICE, "rbln_tensor_print: cannot write") :
	       RBLN_OK;
}
