/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_emu_port.h - what the emulated NPU needs of the system it runs on
 *
 * The units of emu/ use a small part of the kernel's API: spinlocks,
 * mutexes, atomics, wait queues, short idle sleeps, a workqueue, an xarray,
 * page allocation, kernel_fpu_begin(), lockdep's fence signalling
 * annotations.
 * In rbln.ko that is the kernel's own; in rbln-npu-model the same names
 * come from tools/rbln-npu-model/kcompat.h, over pthreads and C11 atomics.
 * Nothing else differs between the two builds.
 */
#ifndef __RBLN_EMU_PORT_H__
#define __RBLN_EMU_PORT_H__

#ifdef __KERNEL__
#include <linux/bitfield.h>
#include <linux/bits.h>
#include <linux/delay.h>
#include <linux/dma-fence.h>
#include <linux/err.h>
#include <linux/fpu.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <uapi/drm/rbln_accel.h>
#include <uapi/drm/rbln_isa.h>
#else
#include "kcompat.h"
#include "rbln_accel.h"
#include "rbln_isa.h"
#endif

#endif /* __RBLN_EMU_PORT_H__ */
