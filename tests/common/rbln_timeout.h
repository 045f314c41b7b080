/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_timeout.h - slow kernels scale the kselftest harness's timeouts
 *
 * Included ahead of every kselftest-based test (-include, kselftest_args in
 * tests/meson.build). The harness arms alarm(t->timeout) for each test (30 s
 * unless TEST_F_TIMEOUT says otherwise); on the debug kernel (KASAN under
 * TCG) a test runs 8-10x slower, so `tools/run-tests --debug-kernel` sets
 * RBLN_TEST_TIMEOUT_SCALE (rbln-vm passes RBLN_* into the guest) and every
 * alarm() of the test program is multiplied by it. Unset, nothing changes.
 * The tests' own assertions and deadlines are left alone.
 */
#ifndef RBLN_TIMEOUT_H
#define RBLN_TIMEOUT_H

#include <stdlib.h>
#include <unistd.h>

static inline unsigned int rbln_test_alarm(unsigned int seconds)
{
	const char *s = getenv("RBLN_TEST_TIMEOUT_SCALE");
	unsigned long scale = s ? strtoul(s, NULL, 10) : 1;

	if (scale > 1 && seconds > 0 && seconds <= 86400)
		seconds *= scale;
	return (alarm)(seconds);
}

#define alarm(seconds) rbln_test_alarm(seconds)

#endif
