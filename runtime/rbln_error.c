// SPDX-License-Identifier: MIT
/*
 * rbln_error.c - the calling thread's last error
 */

#include <errno.h>
#include <stdio.h>

#include "rbln_internal.h"

static _Thread_local char last_error[512];
static _Thread_local rbln_status last_status;

rbln_status rbln_fail(rbln_status status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	last_status = status;
	return status;
}

/* Set by every rbln_fail(), so also what the internal callers pass on. */
rbln_status rbln_last_status(void)
{
	return last_status;
}

rbln_status rbln_errno_status(int err)
{
	return err == -ENOMEM ? RBLN_ERROR_OUT_OF_MEMORY : RBLN_ERROR_DEVICE;
}

const char *rbln_last_error(void)
{
	return last_error;
}

const char *rbln_status_name(rbln_status status)
{
	switch (status) {
	case RBLN_OK:
		return "RBLN_OK";
	case RBLN_ERROR_INVALID:
		return "RBLN_ERROR_INVALID";
	case RBLN_ERROR_NO_DEVICE:
		return "RBLN_ERROR_NO_DEVICE";
	case RBLN_ERROR_OUT_OF_MEMORY:
		return "RBLN_ERROR_OUT_OF_MEMORY";
	case RBLN_ERROR_DEVICE:
		return "RBLN_ERROR_DEVICE";
	case RBLN_ERROR_BUSY:
		return "RBLN_ERROR_BUSY";
	case RBLN_ERROR_UNSUPPORTED:
		return "RBLN_ERROR_UNSUPPORTED";
	case RBLN_ERROR_CAPTURE:
		return "RBLN_ERROR_CAPTURE";
	case RBLN_ERROR_TIMEOUT:
		return "RBLN_ERROR_TIMEOUT";
	}
	return "RBLN_ERROR_UNKNOWN";
}
