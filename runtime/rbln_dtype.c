// SPDX-License-Identifier: MIT
/*
 * rbln_dtype.c - element types: sizes, and conversion from and to double
 * with the ISA's rules (docs/isa.md): round to nearest even, NaN to 0 and
 * saturation for integers
 */

#include <math.h>
#include <string.h>

#include "rbln_internal.h"

size_t rbln_dtype_size(rbln_dtype dtype)
{
	switch (dtype) {
	case RBLN_F32:
	case RBLN_I32:
		return 4;
	case RBLN_F16:
	case RBLN_BF16:
		return 2;
	case RBLN_I8:
		return 1;
	}
	return 0;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (u >> 16) | 0x40;
	return (u + 0x7fff + ((u >> 16) & 1)) >> 16;
}

void rbln_dtype_encode(rbln_dtype dtype, double v, void *dst)
{
	float f = (float)v;
	double r;

	switch (dtype) {
	case RBLN_F32:
		memcpy(dst, &f, 4);
		return;
	case RBLN_F16: {
		_Float16 h = (_Float16)f;

		memcpy(dst, &h, 2);
		return;
	}
	case RBLN_BF16: {
		uint16_t b = f32_to_bf16(f);

		memcpy(dst, &b, 2);
		return;
	}
	case RBLN_I32: {
		int32_t i;

		r = isnan(v) ? 0 : rint(fmin(fmax(v, INT32_MIN), INT32_MAX));
		i = (int32_t)r;
		memcpy(dst, &i, 4);
		return;
	}
	case RBLN_I8: {
		int8_t i;

		r = isnan(v) ? 0 : rint(fmin(fmax(v, INT8_MIN), INT8_MAX));
		i = (int8_t)r;
		memcpy(dst, &i, 1);
		return;
	}
	}
}

double rbln_dtype_decode(rbln_dtype dtype, const void *src)
{
	switch (dtype) {
	case RBLN_F32: {
		float f;

		memcpy(&f, src, 4);
		return f;
	}
	case RBLN_F16: {
		_Float16 h;

		memcpy(&h, src, 2);
		return h;
	}
	case RBLN_BF16: {
		uint32_t u = 0;
		float f;

		memcpy((char *)&u + 2, src, 2);
		memcpy(&f, &u, 4);
		return f;
	}
	case RBLN_I32: {
		int32_t i;

		memcpy(&i, src, 4);
		return i;
	}
	case RBLN_I8:
		return *(const int8_t *)src;
	}
	return NAN;
}
