/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fr_compat.h - where the kernel APIs flightrec.ko uses differ between the
 * kernels it supports (5.10 to 6.18).  module/README.md has the whole table;
 * only the differences that need code are here.
 */
#ifndef FR_COMPAT_H
#define FR_COMPAT_H

#include <linux/version.h>

/*
 * sched_process_exit gained a "bool group_dead" argument in 6.16 ("exit: move
 * and extend sched_process_exit() tracepoint", akpm's non-MM pull for
 * 6.16-rc1; include/trace/events/sched.h).  A probe must have exactly the
 * TP_PROTO's arguments after its data pointer: __traceiter_sched_process_exit
 * calls it indirectly, and a kCFI kernel (CONFIG_CFI_CLANG) checks the
 * callee's type at that call.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
#define FR_TP_EXIT_ARGS(p)	void *data, struct task_struct *p, bool group_dead
#else
#define FR_TP_EXIT_ARGS(p)	void *data, struct task_struct *p
#endif

/* PF_USER_WORKER (io_uring and vhost workers with user state) exists from 6.4. */
#ifndef PF_USER_WORKER
#define PF_USER_WORKER	0
#endif

#endif /* FR_COMPAT_H */
