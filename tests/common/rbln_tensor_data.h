/* SPDX-License-Identifier: MIT */
/*
 * rbln_tensor_data.h - a librbln tensor's bytes, for the runtime's tests
 */
#ifndef RBLN_TENSOR_DATA_H
#define RBLN_TENSOR_DATA_H

#include <stdlib.h>

#include <rbln/rbln.h>

/* The tensor's bytes, read back (the caller frees them); NULL on failure. */
static inline void *data_of(rbln_tensor *t)
{
	size_t n = rbln_tensor_nbytes(t);
	void *p = malloc(n ? n : 1);

	if (p && rbln_tensor_read(t, p, n) != RBLN_OK) {
		free(p);
		return NULL;
	}
	return p;
}

#endif /* RBLN_TENSOR_DATA_H */
