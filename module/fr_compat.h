/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fr_compat.h - where the kernel APIs flightrec.ko uses differ between the
 * kernels it supports: x86-64, 6.1 and 6.12 built and booted in CI, later
 * ones up to 6.18 from the kernel history.  module/README.md has the whole
 * table; only the differences that need code are here.
 */
#ifndef FR_COMPAT_H
#define FR_COMPAT_H

#include <linux/version.h>

/*
 * The NMI-safe user reads (copy_from_user_nmi(), nmi_uaccess_okay()) and the
 * kernel unwinder (asm/unwind.h) are x86's; dkms.conf says so too.
 */
#ifndef CONFIG_X86_64
#error "flightrec.ko builds for x86-64 only"
#endif

/* fr_panic.c needs <linux/panic_notifier.h>, which exists from 5.14. */
#if !__has_include("linux/panic_notifier.h")
#error "flightrec.ko needs Linux 5.14 or later (CI builds 6.1 and 6.12)"
#endif

/*
 * sched_process_exit gained a "bool group_dead" argument in 6.16 ("exit: move
 * and extend sched_process_exit() tracepoint", akpm's non-MM pull for
 * 6.16-rc1; include/trace/events/sched.h).  A probe must have exactly the
 * TP_PROTO's arguments after its data pointer: __traceiter_sched_process_exit
 * calls it indirectly, and a kCFI kernel (CONFIG_CFI_CLANG) checks the
 * callee's type at that call.
 */
#if KERNEL_VERSION(6, 16, 0) <= LINUX_VERSION_CODE
#define FR_TP_EXIT_ARGS(p)	void *data, struct task_struct *(p), bool group_dead
#else
#define FR_TP_EXIT_ARGS(p)	void *data, struct task_struct *(p)
#endif

/*
 * struct module's text: core_layout until 6.4, mem[MOD_TEXT] since ("module:
 * replace module_layout with module_memory", 6.4-rc1); fr_panic.c's module
 * table.
 */
#if KERNEL_VERSION(6, 4, 0) <= LINUX_VERSION_CODE
#define FR_MOD_TEXT(m, field)	((m)->mem[MOD_TEXT].field)
#define FR_MOD_TEXT_SIZE(m)	((m)->mem[MOD_TEXT].size)
#else
#define FR_MOD_TEXT(m, field)	((m)->core_layout.field)
#define FR_MOD_TEXT_SIZE(m)	((m)->core_layout.text_size)
#endif

/*
 * task_work_add() records the caller's stack for KASAN reports, which may
 * allocate: not from the atomic context fr_sideband.c queues from (on
 * PREEMPT_RT the page allocator's locks sleep).  TWAF_NO_ALLOC (6.11,
 * include/linux/task_work.h) skips the allocation; before it, the flag does
 * not exist.
 */
#if KERNEL_VERSION(6, 11, 0) <= LINUX_VERSION_CODE
#define FR_TWA_RESUME	(TWA_RESUME | TWAF_NO_ALLOC)
#else
#define FR_TWA_RESUME	TWA_RESUME
#endif

#endif /* FR_COMPAT_H */
