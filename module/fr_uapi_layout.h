/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * fr_uapi_layout.h - the uapi's layout, asserted at compile time wherever the
 * header is compiled: in the module (fr_main.c, the kernel's x86-64 view), in
 * the 32-bit test task (tests/vm/fr_vm_compat32.c, built -m32: what a compat
 * task passes through compat_ptr_ioctl(), which hands the kernel the same
 * bytes, so every struct must have the same size and offsets on i386, where
 * a __u64 is only 4-byte aligned) and in the host unit test
 * (tests/vm/flightrec_uapi_unittest.cc, C++).  The ioctl numbers encode the
 * struct sizes, so they are checked too.  Include after uapi/flightrec.h and
 * the definitions of offsetof() and static_assert() (the kernel's
 * <linux/build_bug.h>, C++, or C11's <assert.h>).
 */
#ifndef FR_UAPI_LAYOUT_H
#define FR_UAPI_LAYOUT_H

#define FR_ASSERT(cond, what)	static_assert(cond, what)
#define FR_SIZE(type, size)	FR_ASSERT(sizeof(struct type) == (size), "sizeof " #type)
#define FR_OFF(type, field, off) \
	FR_ASSERT(offsetof(struct type, field) == (off), #type "." #field)

/* DATA record header; frames follow */
FR_SIZE(flightrec_sample, 64);
FR_OFF(flightrec_sample, size, 0);
FR_OFF(flightrec_sample, type, 4);
FR_OFF(flightrec_sample, flags, 6);
FR_OFF(flightrec_sample, time_ns, 8);
FR_OFF(flightrec_sample, seq, 32);
FR_OFF(flightrec_sample, aux_len, 40);
FR_OFF(flightrec_sample, mode, 56);
FR_OFF(flightrec_sample, abi, 62);
FR_ASSERT(FLIGHTREC_SAMPLE_MAX_SIZE == 512, "FLIGHTREC_SAMPLE_MAX_SIZE");
FR_ASSERT(FLIGHTREC_DATA_CHUNK == 4096, "FLIGHTREC_DATA_CHUNK");
FR_SIZE(flightrec_aux, 216);
FR_OFF(flightrec_aux, regs, 24);
FR_SIZE(flightrec_sideband, 512);
FR_OFF(flightrec_sideband, dev, 48);
FR_OFF(flightrec_sideband, path, 88);
FR_SIZE(flightrec_info, 88);
FR_OFF(flightrec_info, period, 32);
FR_OFF(flightrec_info, markers_per_uid, 68);
FR_OFF(flightrec_info, reserved, 72);
FR_SIZE(flightrec_cpu_stats, 104);
FR_OFF(flightrec_cpu_stats, produced, 8);
FR_OFF(flightrec_cpu_stats, data_head, 72);
FR_OFF(flightrec_cpu_stats, handler_ns, 88);
FR_OFF(flightrec_cpu_stats, reserved, 96);
FR_SIZE(flightrec_stats, 64);
FR_OFF(flightrec_stats, sideband_written, 16);
FR_OFF(flightrec_stats, crash_hook, 48);
FR_OFF(flightrec_stats, crash_hook_error, 52);
FR_OFF(flightrec_stats, markers_coalesced, 56);
FR_OFF(flightrec_stats, markers_uid_limited, 60);
FR_SIZE(flightrec_cpu_stats_ev, 152);
FR_OFF(flightrec_cpu_stats_ev, s, 0);
FR_OFF(flightrec_cpu_stats_ev, event_state, 104);
FR_OFF(flightrec_cpu_stats_ev, throttled, 112);
FR_OFF(flightrec_cpu_stats_ev, time_running, 128);
FR_SIZE(flightrec_read, 112);
FR_OFF(flightrec_read, from, 8);
FR_OFF(flightrec_read, first, 40);
FR_OFF(flightrec_read, flags, 88);
FR_OFF(flightrec_read, reserved, 96);
FR_SIZE(flightrec_marker, 56);
FR_OFF(flightrec_marker, slot, 16);
FR_OFF(flightrec_marker, nr_cpus, 32);
FR_OFF(flightrec_marker, cpu, 36);
FR_OFF(flightrec_marker, hook_ns, 40);
FR_OFF(flightrec_marker, copied_bytes, 48);
FR_ASSERT(FLIGHTREC_SAMPLE_CRASH == 8, "FLIGHTREC_SAMPLE_CRASH");
FR_ASSERT(FLIGHTREC_VERSION == 2, "FLIGHTREC_VERSION");
FR_SIZE(flightrec_markers, 32);
FR_SIZE(flightrec_marker_read, 88);
FR_OFF(flightrec_marker_read, offset, 16);
FR_OFF(flightrec_marker_read, first, 40);
/* The panic region: written by one boot, read by the next, fixed for version 1. */
FR_ASSERT(FLIGHTREC_PANIC_VERSION == 1, "FLIGHTREC_PANIC_VERSION");
FR_SIZE(flightrec_panic_header, 608);
FR_OFF(flightrec_panic_header, boot_id, 32);
FR_OFF(flightrec_panic_header, panic_msg, 176);
FR_OFF(flightrec_panic_header, cpu_off, 432);
FR_OFF(flightrec_panic_header, rec_off, 536);
FR_OFF(flightrec_panic_header, header_crc, 600);
FR_SIZE(flightrec_panic_cpu, 112);
FR_OFF(flightrec_panic_cpu, records, 80);
FR_OFF(flightrec_panic_cpu, data_crc, 104);
FR_SIZE(flightrec_panic_module, 72);
FR_SIZE(flightrec_panic_info, 64);
FR_SIZE(flightrec_panic_read, 48);
/* Each command's number, size included: the same for 32- and 64-bit callers. */
FR_ASSERT(FLIGHTREC_IOC_INFO == 0x8058f701, "FLIGHTREC_IOC_INFO");
FR_ASSERT(FLIGHTREC_IOC_STATS == 0xc040f702, "FLIGHTREC_IOC_STATS");
FR_ASSERT(FLIGHTREC_IOC_READ_RING == 0xc070f705, "FLIGHTREC_IOC_READ_RING");
FR_ASSERT(FLIGHTREC_IOC_LIST_MARKERS == 0xc020f706, "FLIGHTREC_IOC_LIST_MARKERS");
FR_ASSERT(FLIGHTREC_IOC_READ_MARKER == 0xc058f707, "FLIGHTREC_IOC_READ_MARKER");
FR_ASSERT(FLIGHTREC_IOC_PANIC_INFO == 0x8040f709, "FLIGHTREC_IOC_PANIC_INFO");
FR_ASSERT(FLIGHTREC_IOC_PANIC_READ == 0xc030f70a, "FLIGHTREC_IOC_PANIC_READ");

#undef FR_OFF
#undef FR_SIZE
#undef FR_ASSERT

#endif /* FR_UAPI_LAYOUT_H */
