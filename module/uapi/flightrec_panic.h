/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * flightrec uapi, the panic region: its layout in memory and the
 * PANIC_INFO/PANIC_READ arguments.  Part of the ABI of flightrec.h, which
 * includes it (the PANIC_* commands are defined there); the rules at the top
 * of flightrec.h apply.
 */
#ifndef _UAPI_LINUX_FLIGHTREC_PANIC_H
#define _UAPI_LINUX_FLIGHTREC_PANIC_H

#include <linux/types.h>

/*
 * Panic region: history that survives a kernel panic and a warm
 * reboot.  Loaded with panic_addr=/panic_size= naming a physical range the
 * kernel command line reserved (memmap=SIZE$ADDR on x86: e820-reserved, so no
 * allocator of the next boot touches it), the module maps it and, from a panic
 * notifier, copies every CPU's newest DATA records, the SIDEBAND ring's last
 * records (consumed or not) and the module list into it.  The next boot's
 * module finds it, keeps it read-only until user space claimed it
 * (PANIC_READ, then PANIC_RELEASE), and only then arms it for this boot.
 *
 * Layout (version 1), all offsets from the region's start, little endian:
 *   [0, 4096)                 struct flightrec_panic_header
 *   @cpu_off                  @nr_cpus x struct flightrec_panic_cpu
 *   @mod_off                  @mod_count x struct flightrec_panic_module
 *   @sb_off                   @sb_count x struct flightrec_sideband, oldest first
 *   each cpu's @data_off      @data_len bytes of DATA records exactly as the
 *                             DATA ring holds them (struct flightrec_sample +
 *                             frames, PAD records), from ring position
 *                             @data_first (a record boundary) to @data_end
 * Checksums are CRC-32 as zlib's crc32(0, buf, len) computes it (in the
 * kernel: crc32_le(~0, buf, len) ^ ~0).
 */
#define FLIGHTREC_PANIC_MAGIC	0x0043494E41505246ULL	/* "FRPANIC\0" */
#define FLIGHTREC_PANIC_VERSION	1
#define FLIGHTREC_PANIC_HEADER_BYTES	4096	/* header area; cpu_off >= this */

/*
 * struct flightrec_panic_header::flags: @panic_time_ns and the panic record
 * (@rec_off) were taken at the entry of panic() by a kprobe, before panic()
 * printed anything; without it, in the notifier (after the panic's console
 * output, which under a slow console may be tens of milliseconds later).
 */
#define FLIGHTREC_PANIC_F_ENTRY	(1U << 0)

/* struct flightrec_panic_header::state */
enum flightrec_panic_state {
	FLIGHTREC_PANIC_ARMED = 1,	/* owned by the boot in @boot_id; no panic yet */
	FLIGHTREC_PANIC_CAPTURED = 2,	/* a panic's history, kept until claimed */
};

/**
 * struct flightrec_panic_header - start of the panic region
 * @magic:	FLIGHTREC_PANIC_MAGIC (anything else: no region, e.g. a cold boot)
 * @version:	FLIGHTREC_PANIC_VERSION
 * @header_size:	sizeof(struct flightrec_panic_header)
 * @region_size:	bytes of the whole region
 * @state:	enum flightrec_panic_state
 * @flags:	FLIGHTREC_PANIC_F_*
 * @boot_id:	the writing boot's /proc/sys/kernel/random/boot_id (16 bytes)
 * @release:	the writing kernel's utsname()->release, NUL-terminated
 * @pad0:	zero
 * @kernel_anchor:	runtime address of panic() in the writing boot: with
 *		the same release, the KASLR delta to this boot is @kernel_anchor
 *		minus this boot's address of "panic" (/proc/kallsyms)
 * @arm_time_ns:	CLOCK_MONOTONIC when the region was armed
 * @mono_to_real_ns:	CLOCK_REALTIME - CLOCK_MONOTONIC at arm time
 * @mono_to_boot_ns:	CLOCK_BOOTTIME - CLOCK_MONOTONIC at arm time
 * @panic_time_ns:	CLOCK_MONOTONIC (the samples' clock) at the panic
 * @panic_cpu:	CPU that ran the panic notifier
 * @nr_cpus:	struct flightrec_panic_cpu entries at @cpu_off (nr_cpu_ids)
 * @panics_lost:	later panics that found this region CAPTURED and
 *		unclaimed: their history was not recorded
 * @mod_count:	struct flightrec_panic_module entries at @mod_off
 * @panic_msg:	the panic message (panic()'s formatted string), NUL-terminated,
 *		truncated to fit
 * @cpu_off:	region offset of the per-CPU descriptors
 * @cpu_desc_size:	sizeof(struct flightrec_panic_cpu)
 * @cpu_crc:	CRC-32 of the @nr_cpus descriptors
 * @mod_off:	region offset of the module table
 * @mod_desc_size:	sizeof(struct flightrec_panic_module)
 * @mod_crc:	CRC-32 of the module table
 * @sb_off:	region offset of the sideband records
 * @sb_count:	sideband records at @sb_off
 * @sb_crc:	CRC-32 of the sideband records
 * @sb_first_seq:	SIDEBAND ring position of the first record at @sb_off
 * @sb_missing:	sideband records written before @sb_first_seq (no longer
 *		in the ring at the panic, or beyond the region's sideband room):
 *		mappings they announced are unknown
 * @data_off:	region offset of the area holding the CPUs' DATA copies
 * @data_size:	its size
 * @period:	as struct flightrec_info, of the writing module
 * @freq:	as struct flightrec_info
 * @event:	as struct flightrec_info
 * @sample_size:	sizeof(struct flightrec_sample) of the writing module
 * @stack_bytes:	as struct flightrec_info
 * @rec_off:	region offset of the panic record (0: none), inside the header
 *		area after this struct: one DATA record (struct flightrec_sample
 *		+ frames, FLIGHTREC_REC_SAMPLE with FLIGHTREC_SAMPLE_CRASH) of the
 *		panicking CPU @panic_cpu at @panic_time_ns: its kernel stack
 *		(with FLIGHTREC_PANIC_F_ENTRY: panic()'s callers) and its task's
 *		user frames.  Its @seq is that CPU's @data_end (the ring never
 *		held it); it is in no copy and no counter.
 * @rec_size:	its bytes (at most FLIGHTREC_SAMPLE_MAX_SIZE)
 * @rec_crc:	CRC-32 of them
 * @reserved:	zero
 * @header_crc:	CRC-32 of this struct with @header_crc zero
 * @pad1:	zero
 */
struct flightrec_panic_header {
	__u64 magic;
	__u32 version;
	__u32 header_size;
	__u64 region_size;
	__u32 state;
	__u32 flags;
	__u8 boot_id[16];
	char release[65];
	__u8 pad0[7];
	__u64 kernel_anchor;
	__u64 arm_time_ns;
	__s64 mono_to_real_ns;
	__s64 mono_to_boot_ns;
	__u64 panic_time_ns;
	__u32 panic_cpu;
	__u32 nr_cpus;
	__u32 panics_lost;
	__u32 mod_count;
	char panic_msg[256];
	__u64 cpu_off;
	__u32 cpu_desc_size;
	__u32 cpu_crc;
	__u64 mod_off;
	__u32 mod_desc_size;
	__u32 mod_crc;
	__u64 sb_off;
	__u32 sb_count;
	__u32 sb_crc;
	__u64 sb_first_seq;
	__u64 sb_missing;
	__u64 data_off;
	__u64 data_size;
	__u64 period;
	__u32 freq;
	__u32 event;
	__u32 sample_size;
	__u32 stack_bytes;
	__u64 rec_off;
	__u32 rec_size;
	__u32 rec_crc;
	__u64 reserved[6];
	__u32 header_crc;
	__u32 pad1;
};

/* struct flightrec_panic_cpu::flags */
#define FLIGHTREC_PANIC_CPU_ONLINE	(1U << 0)	/* had a counter at the panic */
#define FLIGHTREC_PANIC_CPU_PANICKING	(1U << 1)	/* ran the panic notifier */
/* the ring held more than its share of the region */
#define FLIGHTREC_PANIC_CPU_CUT		(1U << 2)
/*
 * The CPU's writer was stopped inside the sample handler (its seqcount odd:
 * a panic from within the handler, or a CPU stopped by NMI mid-record).  The
 * record it was writing is not in the copy (it lies at or past the head);
 * @overwritten is then @written - @not_copied - @records (a record counted
 * in @written but never published is lost, so counted there).
 */
#define FLIGHTREC_PANIC_CPU_TORN	(1U << 3)

/**
 * struct flightrec_panic_cpu - one CPU's history in the panic region
 * @cpu:	CPU number
 * @flags:	FLIGHTREC_PANIC_CPU_*
 * @data_off:	region offset of the copied DATA bytes
 * @data_len:	bytes copied (0: none), @data_end - @data_first
 * @data_first:	DATA ring position of the first copied byte (a chunk
 *		boundary, so record boundary)
 * @data_end:	DATA ring head at the panic (exclusive end of the copy)
 * @produced:	STATS counters of the CPU at the panic (same meaning)
 * @written:	as struct flightrec_cpu_stats
 * @overwritten:	as struct flightrec_cpu_stats
 * @dropped_frozen:	as struct flightrec_cpu_stats
 * @dropped_size:	as struct flightrec_cpu_stats
 * @records:	sample records in the copy
 * @not_copied:	sample records the ring still held at the panic that did not
 *		fit in this CPU's share (older than @data_first), so
 *		@written == @overwritten + @not_copied + @records
 * @last_time_ns:	time_ns of the newest record in the copy (0: none)
 * @data_crc:	CRC-32 of the @data_len bytes
 * @pad:	zero
 */
struct flightrec_panic_cpu {
	__u32 cpu;
	__u32 flags;
	__u64 data_off;
	__u64 data_len;
	__u64 data_first;
	__u64 data_end;
	__u64 produced;
	__u64 written;
	__u64 overwritten;
	__u64 dropped_frozen;
	__u64 dropped_size;
	__u64 records;
	__u64 not_copied;
	__u64 last_time_ns;
	__u32 data_crc;
	__u32 pad;
};

/**
 * struct flightrec_panic_module - a loaded module's text in the writing boot
 * @name:	module name, NUL-terminated
 * @base:	runtime address of its core text
 * @size:	bytes of its core text
 */
struct flightrec_panic_module {
	char name[56];
	__u64 base;
	__u64 size;
};

/* struct flightrec_panic_info::state: what this boot's module found */
enum flightrec_panic_found {
	/* no region configured (panic_addr/panic_size unset) */
	FLIGHTREC_PANIC_NONE = 0,
	/* region armed for this boot; nothing from an earlier one */
	FLIGHTREC_PANIC_EMPTY = 1,
	/* an earlier boot's CAPTURED region, read-only until released */
	FLIGHTREC_PANIC_HELD = 2,
	/* the region had the magic but failed validation (@error); logged, re-armed */
	FLIGHTREC_PANIC_REFUSED = 3,
	/* configured but unusable (@error: not reserved, map failed) */
	FLIGHTREC_PANIC_UNAVAILABLE = 4,
};

/**
 * struct flightrec_panic_info - FLIGHTREC_IOC_PANIC_INFO output
 * @state:	enum flightrec_panic_found
 * @error:	REFUSED/UNAVAILABLE: negative errno (-EBADMSG bad header
 *		checksum, -EPROTO unknown version, -EINVAL inconsistent sizes,
 *		-EBUSY the range is System RAM, -ENOMEM map failed)
 * @region_phys:	physical address of the region
 * @region_size:	its size
 * @held_bytes:	HELD: bytes PANIC_READ can return (== @region_size)
 * @reserved:	zero
 */
struct flightrec_panic_info {
	__u32 state;
	__s32 error;
	__u64 region_phys;
	__u64 region_size;
	__u64 held_bytes;
	__u64 reserved[4];
};

/**
 * struct flightrec_panic_read - FLIGHTREC_IOC_PANIC_READ argument
 * @offset:	in: byte offset into the held region
 * @buf:	in: user buffer
 * @buf_len:	in: its size
 * @bytes:	out: bytes copied (min(buf_len, held_bytes - offset))
 * @reserved:	zero
 */
struct flightrec_panic_read {
	__u64 offset;
	__u64 buf;
	__u64 buf_len;
	__u64 bytes;
	__u64 reserved[2];
};

#endif /* _UAPI_LINUX_FLIGHTREC_PANIC_H */
