/* SPDX-License-Identifier: MIT */
/*
 * rbln_export.h - what librbln exports beyond its API (internal)
 *
 * The collectives (rbln_comm.c) are built on librbln's internals but live
 * in a library of their own, librbln_comm, so that librbln itself needs no
 * Open MPI. The internals they call are exported for it, marked with
 * RBLN_INTERNAL; they are not API: no header installs them, and they
 * change with librbln.
 */
#ifndef RBLN_EXPORT_H
#define RBLN_EXPORT_H

#define RBLN_INTERNAL __attribute__((visibility("default")))

#endif /* RBLN_EXPORT_H */
