/* SPDX-License-Identifier: MIT */
/*
 * rbln_comm_ref.h - the collectives tests' inputs and their CPU reference
 *
 * Rank r's element i of input @salt is a hash of the three: now and then
 * a raw bit pattern (NaNs, infinities, extremes), mostly values of a few
 * bits' precision, so sums round. folded() is what a reduction over the
 * ranks gives, folded in rank order as librbln_comm folds.
 */
#ifndef RBLN_COMM_REF_H
#define RBLN_COMM_REF_H

#include <stdint.h>

#include <rbln/rbln.h>

#include "rbln_ref.h"

static inline uint32_t gen(rbln_dtype dt, int r, int64_t i, uint32_t salt)
{
	uint64_t h = ((uint64_t)salt << 40) ^ ((uint64_t)r << 32) ^ (uint64_t)i;

	h += 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	if (!ref_is_float(dt))
		return (uint32_t)ref_wrap(dt, h >> 16);
	if (!(h & 15))
		return dt == RBLN_F32 ? (uint32_t)(h >> 16) : (uint16_t)(h >> 16);
	return (uint32_t)ref_enc(dt, (double)(int32_t)(h >> 32) / (1 << 20));
}

/* @op (an ISA sub-op) over @size ranks' element @i of input @salt, in rank order. */
static inline uint64_t folded(uint32_t op, rbln_dtype dt, int size, int64_t i, uint32_t salt)
{
	uint64_t acc = gen(dt, 0, i, salt);
	int r;

	for (r = 1; r < size; r++)
		acc = acc == REF_ANY_QNAN ? REF_ANY_QNAN :
		      ref_binary(op, dt, (uint32_t)acc, gen(dt, r, i, salt));
	return acc;
}

#endif /* RBLN_COMM_REF_H */
