/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * flightrec uapi: the only header shared between flightrec.ko and user space.
 *
 * Rules (see kernel/kcov.c, include/uapi/linux/perf_event.h for the model):
 * fixed-width fields, pointers as __u64, explicit padding, and every
 * flags/reserved field must be zero (-EINVAL otherwise) so it can be given a
 * meaning later.  A changed struct gets a new command, never a new version.
 *
 * Positions are 64-bit and monotonic.  DATA and AUX ring positions count
 * bytes; SIDEBAND ring positions count records (struct flightrec_sideband).
 *
 * DATA records have variable length: a struct flightrec_sample header, then
 * its frames.  Every record starts with __u32 size and __u16 type
 * (FLIGHTREC_REC_*), is 8-byte aligned, and never straddles a
 * FLIGHTREC_DATA_CHUNK boundary (a FLIGHTREC_REC_PAD record fills the tail
 * of a chunk), so every chunk boundary is a record boundary: a reader that
 * starts at one, or at a position the module returned, can walk the records.
 *
 * open(FLIGHTREC_DEVICE): -EPERM without CAP_SYS_ADMIN or CAP_PERFMON (the
 * device node is also mode 0600, so DAC refuses other users first with
 * -EACCES).  While a file is open the module cannot be unloaded (rmmod gets
 * -EBUSY/-EWOULDBLOCK).
 */
#ifndef _UAPI_LINUX_FLIGHTREC_H
#define _UAPI_LINUX_FLIGHTREC_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define FLIGHTREC_VERSION	2
#define FLIGHTREC_DEVICE	"/dev/flightrec"

#define FLIGHTREC_MAX_KFRAMES	24
#define FLIGHTREC_MAX_UFRAMES	32
#define FLIGHTREC_NR_REGS	24	/* perf_regs.h PERF_REG_X86_64_MAX order */
#define FLIGHTREC_PATH_MAX	424
#define FLIGHTREC_DATA_CHUNK	4096	/* no DATA record crosses a multiple of this */
/* The largest DATA record: header plus every frame. */
#define FLIGHTREC_SAMPLE_MAX_SIZE \
	(sizeof(struct flightrec_sample) + 8 * (FLIGHTREC_MAX_KFRAMES + FLIGHTREC_MAX_UFRAMES))

/* struct flightrec_sample::type */
#define FLIGHTREC_REC_SAMPLE	1
#define FLIGHTREC_REC_PAD	2	/* only @size and @type are valid: skip @size bytes */

enum flightrec_event {
	FLIGHTREC_EVENT_CPU_CLOCK = 0,
	FLIGHTREC_EVENT_CYCLES = 1,
};

enum flightrec_ring {
	FLIGHTREC_RING_DATA = 0,
	FLIGHTREC_RING_AUX = 1,
	FLIGHTREC_RING_SIDEBAND = 2,
};

enum flightrec_mode {
	FLIGHTREC_MODE_KERNEL = 0,
	FLIGHTREC_MODE_USER = 1,
};

/* struct flightrec_sample::flags */
#define FLIGHTREC_SAMPLE_KSTACK_TRUNC	(1U << 0)
#define FLIGHTREC_SAMPLE_USTACK_TRUNC	(1U << 1)
#define FLIGHTREC_SAMPLE_HAS_AUX	(1U << 2)
/* The crash record: taken by the crash hook, last in a marker's history. */
#define FLIGHTREC_SAMPLE_CRASH		(1U << 3)

/**
 * struct flightrec_sample - header of one DATA ring record (64 bytes)
 * @size:	bytes of the record: this header plus 8 * (@nr_kframes +
 *		@nr_uframes), a multiple of 8; for a PAD record, the bytes to skip
 * @type:	FLIGHTREC_REC_SAMPLE or FLIGHTREC_REC_PAD
 * @flags:	FLIGHTREC_SAMPLE_*
 * @time_ns:	CLOCK_MONOTONIC nanoseconds (ktime_get_mono_fast_ns())
 * @ip:		interrupted instruction pointer
 * @aux_pos:	AUX ring byte position of this sample's struct flightrec_aux
 * @seq:	this record's DATA ring position (bytes)
 * @aux_len:	bytes at @aux_pos (0: no AUX blob)
 * @cpu:	CPU that took the sample
 * @pid:	thread group id (0 for kernel threads/idle)
 * @tid:	thread id
 * @mode:	enum flightrec_mode of @ip
 * @nr_kframes:	kernel return addresses that follow the header (innermost
 *		first; mode KERNEL only), at most FLIGHTREC_MAX_KFRAMES
 * @nr_uframes:	user frames that follow them: the user ip, then the
 *		frame-pointer chain's return addresses (for a kernel-mode sample:
 *		the task's user state at kernel entry), at most
 *		FLIGHTREC_MAX_UFRAMES
 * @abi:	PERF_SAMPLE_REGS_ABI_* (linux/perf_event.h) of the user state in
 *		the user frames and the AUX blob: NONE (0, no user state: kernel
 *		thread, user worker, or an NMI in the kernel entry window), 32 (1,
 *		a compat task: its frame-pointer chain was walked in 4-byte words)
 *		or 64 (2)
 *
 * The record is followed by @nr_kframes + @nr_uframes __u64 frames.
 */
struct flightrec_sample {
	__u32 size;
	__u16 type;
	__u16 flags;
	__u64 time_ns;
	__u64 ip;
	__u64 aux_pos;
	__u64 seq;
	__u32 aux_len;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u16 mode;
	__u16 nr_kframes;
	__u16 nr_uframes;
	__u16 abi;
};

/**
 * struct flightrec_aux - header of one AUX ring blob, followed by stack bytes
 * @seq:	DATA ring position of the sample this blob belongs to
 * @len:	total blob length including this header, multiple of 8
 * @stack_len:	bytes of user stack copied from @regs[PERF_REG_X86_SP] upward
 * @abi:	PERF_SAMPLE_REGS_ABI_32 (1) or _64 (2), as perf's regs_user abi
 *		and the sample's @abi.  @regs is in x86_64 perf_regs order
 *		(arch/x86/include/uapi/asm/perf_regs.h) either way; for ABI_32
 *		only the low 32 bits mean anything and the stack holds 4-byte
 *		words (an x86_64 DWARF unwinder must not walk it).
 *		Written only when the module was loaded with stack_bytes > 0.
 * @pad:	zero
 * @regs:	user registers at the sample
 */
struct flightrec_aux {
	__u64 seq;
	__u32 len;
	__u32 stack_len;
	__u32 abi;
	__u32 pad;
	__u64 regs[FLIGHTREC_NR_REGS];
};

enum flightrec_sb_type {
	FLIGHTREC_SB_MMAP = 1,	/* executable file mapping created */
	FLIGHTREC_SB_EXEC = 2,	/* pid exec'd @path */
	FLIGHTREC_SB_FORK = 3,	/* @pid/@tid created by @ppid */
	FLIGHTREC_SB_EXIT = 4,	/* thread @tid of @pid exited */
	/*
	 * @len records were dropped (ring full) just before this one, the
	 * first of them at @start (CLOCK_MONOTONIC ns): mappings created in
	 * [@start, @time_ns] may be unknown to the consumer.
	 */
	FLIGHTREC_SB_LOST = 5,
};

/* struct flightrec_sideband::flags */
#define FLIGHTREC_SB_PATH_TRUNC	(1U << 0)

/**
 * struct flightrec_sideband - one record of the non-overwriting SIDEBAND ring (512 bytes)
 * @time_ns:	CLOCK_MONOTONIC nanoseconds, same clock as samples
 * @start:	MMAP: first mapped address; LOST: time of the first lost record
 * @len:	MMAP: mapping length; LOST: records lost
 * @pgoff:	MMAP: file offset of @start, in bytes
 * @ino:	MMAP/EXEC: inode number of the file
 * @seq:	SIDEBAND ring position of this record
 * @dev:	MMAP/EXEC: st_dev of the file (new_encode_dev())
 * @type:	enum flightrec_sb_type
 * @pid:	thread group id
 * @tid:	thread id
 * @ppid:	FORK: parent thread group id
 * @flags:	FLIGHTREC_SB_*
 * @reserved:	zero
 * @path:	MMAP/EXEC: NUL-terminated path (d_path()), EXIT/FORK: comm
 */
struct flightrec_sideband {
	__u64 time_ns;
	__u64 start;
	__u64 len;
	__u64 pgoff;
	__u64 ino;
	__u64 seq;
	__u32 dev;
	__u32 type;
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u32 flags;
	__u64 reserved[2];
	char path[FLIGHTREC_PATH_MAX];
};

/**
 * struct flightrec_info - FLIGHTREC_IOC_INFO output
 * @version:	FLIGHTREC_VERSION
 * @nr_cpus:	nr_cpu_ids: valid cpu arguments are < @nr_cpus
 * @data_ring_bytes:	DATA ring size per CPU
 * @aux_ring_bytes:	AUX ring size per CPU
 * @sideband_ring_bytes:	SIDEBAND ring size
 * @period:	ns (cpu-clock) or events (cycles); 0 if @freq is used
 * @freq:	samples per second, 0 if @period is used
 * @event:	enum flightrec_event
 * @sample_size:	sizeof(struct flightrec_sample) (the DATA record header)
 * @sideband_size:	sizeof(struct flightrec_sideband)
 * @stack_bytes:	user stack bytes copied per sample
 * @max_markers:	crash marker slots
 * @frozen:	1 while frozen (by any open file, or from load with autostart=0)
 * @markers_per_uid:	marker slots one user's crashes may hold at once
 *		(0 from a module older than this field)
 * @reserved:	zero
 */
struct flightrec_info {
	__u32 version;
	__u32 nr_cpus;
	__u64 data_ring_bytes;
	__u64 aux_ring_bytes;
	__u64 sideband_ring_bytes;
	__u64 period;
	__u32 freq;
	__u32 event;
	__u32 sample_size;
	__u32 sideband_size;
	__u32 stack_bytes;
	__u32 max_markers;
	__u32 frozen;
	__u32 markers_per_uid;
	__u32 reserved[4];
};

/**
 * struct flightrec_cpu_stats - per-CPU counters, exact.
 * @cpu:	CPU number
 * @online:	1 if a counter is installed on the CPU
 * @produced:	counter overflows the sample handler ran for
 * @written:	sample records written to the DATA ring
 * @overwritten:	sample records no longer readable: those of every
 *		FLIGHTREC_DATA_CHUNK the writer has started to reuse, so
 *		@written == @overwritten + the records a frozen ring holds
 * @dropped_frozen:	samples not written because the rings were frozen
 * @dropped_size:	samples not written because their AUX blob
 *		(registers + stack_bytes) is larger than the AUX ring
 * @torn_on_read:	DATA bytes discarded by READ_RING: overwritten while copied
 *		(their records are in @overwritten)
 * @aux_written:	bytes written to the AUX ring (== @aux_head)
 * @aux_overwritten:	AUX bytes overwritten
 * @data_head:	DATA position (bytes)
 * @aux_head:	AUX position (bytes)
 * @handler_ns:	time spent in the sample handler on this CPU, summed over
 *		its @produced calls (ktime_get_mono_fast_ns() at entry and
 *		exit): the module's own cost per sample is
 *		@handler_ns / @produced
 * @reserved:	zero
 *
 * @produced == @written + @dropped_frozen + @dropped_size, always (a
 * seqcount makes one CPU's snapshot consistent).  Crash records (struct
 * flightrec_marker) are not counted: they are never in the live rings.
 */
struct flightrec_cpu_stats {
	__u32 cpu;
	__u32 online;
	__u64 produced;
	__u64 written;
	__u64 overwritten;
	__u64 dropped_frozen;
	__u64 dropped_size;
	__u64 torn_on_read;
	__u64 aux_written;
	__u64 aux_overwritten;
	__u64 data_head;
	__u64 aux_head;
	__u64 handler_ns;
	__u64 reserved;
};

/* struct flightrec_cpu_stats_ev::event_state: the CPU's perf counter */
enum flightrec_event_state {
	FLIGHTREC_EVSTATE_NONE = 0,	/* no counter: offline, never online, or open failed */
	FLIGHTREC_EVSTATE_ACTIVE = 1,	/* counting and sampling */
	FLIGHTREC_EVSTATE_INACTIVE = 2,	/* not scheduled on the PMU */
	FLIGHTREC_EVSTATE_OFF = 3,	/* disabled */
	FLIGHTREC_EVSTATE_ERROR = 4,	/* pinned but could not be scheduled: samples nothing */
	FLIGHTREC_EVSTATE_OTHER = 5,	/* exiting/dead */
};

/**
 * struct flightrec_cpu_stats_ev - STATS entry with FLIGHTREC_STATS_EVENT
 * @s:		the same counters as without the flag
 * @event_state:	enum flightrec_event_state
 * @pad:	zero
 * @throttled:	overflows after which the kernel throttled the counter
 *		(perf's max_sample_rate, kernel.perf_event_max_sample_rate):
 *		each stops sampling on this CPU until the next tick unthrottles
 *		it; those periods produce no sample and are in no other counter
 * @time_enabled:	ns the counter was enabled (perf_event_read_value())
 * @time_running:	ns it was actually counting; below @time_enabled when it
 *		was multiplexed out or in ERROR state: sampling had gaps
 * @reserved:	zero
 */
struct flightrec_cpu_stats_ev {
	struct flightrec_cpu_stats s;
	__s32 event_state;
	__u32 pad;
	__u64 throttled;
	__u64 time_enabled;
	__u64 time_running;
	__u64 reserved[2];
};

/* struct flightrec_stats::flags (in) */
#define FLIGHTREC_STATS_EVENT	(1U << 0)	/* @buf holds struct flightrec_cpu_stats_ev */

/* struct flightrec_stats::crash_hook: what takes crash markers */
enum flightrec_crash_hook {
	FLIGHTREC_HOOK_UNKNOWN = 0,	/* a module older than this field */
	FLIGHTREC_HOOK_TRACEPOINT = 1,	/* the signal_deliver tracepoint */
	FLIGHTREC_HOOK_KPROBE = 2,	/* a kprobe on the core dump routine */
	FLIGHTREC_HOOK_NONE = 3,	/* none: no crash markers; see crash_hook_error */
};

/**
 * struct flightrec_stats - FLIGHTREC_IOC_STATS argument
 * @buf:	user pointer to @count struct flightrec_cpu_stats (with
 *		FLIGHTREC_STATS_EVENT in @flags: struct flightrec_cpu_stats_ev)
 * @count:	in: entries at @buf; out: entries written (min(count, nr_cpus))
 * @flags:	in: 0 or FLIGHTREC_STATS_EVENT
 * @sideband_written:	records written to the SIDEBAND ring (its head,
 *		FLIGHTREC_SB_LOST records included)
 * @sideband_dropped:	records dropped because the SIDEBAND ring was full
 * @markers_taken:	crash markers recorded
 * @markers_dropped:	crashes not recorded: every marker slot was in use,
 *		or the crashing user already held markers_per_uid slots
 * @crash_hook:	out: enum flightrec_crash_hook (this and the next three
 *		were reserved, must-be-zero inputs before; now outputs, their
 *		input is ignored)
 * @crash_hook_error:	out: with FLIGHTREC_HOOK_NONE, why: the negative
 *		errno of the last hook that failed to attach (-ENOENT: no such
 *		symbol or tracepoint); 0 when crash_hook=none was asked for
 * @markers_coalesced:	out: crashes of a process that already had a marker
 *		(its other threads faulting at once): one crash, one marker
 *		(modulo 2^32)
 * @markers_uid_limited:	out: of @markers_dropped, those refused by the
 *		per-uid limit while a slot was free (modulo 2^32)
 */
struct flightrec_stats {
	__u64 buf;
	__u32 count;
	__u32 flags;
	__u64 sideband_written;
	__u64 sideband_dropped;
	__u64 markers_taken;
	__u64 markers_dropped;
	__u32 crash_hook;
	__s32 crash_hook_error;
	__u32 markers_coalesced;
	__u32 markers_uid_limited;
};

/**
 * struct flightrec_read - FLIGHTREC_IOC_READ_RING argument
 * @cpu:	in: CPU (ignored, must be 0, for SIDEBAND)
 * @ring:	in: enum flightrec_ring
 * @from:	in: first position wanted (DATA/AUX); must be 0 for SIDEBAND,
 *		which always reads from its consumer tail and consumes what it
 *		returns, only when the whole call succeeds (after -EFAULT the
 *		same records are read again).  A FLIGHTREC_SB_LOST record
 *		precedes the first record written after a gap.  DATA: a record
 *		boundary (0, a chunk boundary, or a @first/@next or head the
 *		module returned); older than the ring holds, it starts at the
 *		first whole chunk
 * @to:		in: end position wanted (exclusive); clamped to the head.
 *		Must be 0 for SIDEBAND.
 * @buf:	in: user buffer
 * @buf_len:	in: its size; DATA/SIDEBAND copy whole records only (DATA:
 *		at least FLIGHTREC_DATA_CHUNK; a copy cut short by @buf_len
 *		ends at a chunk boundary)
 * @first:	out: position of the first valid byte/record returned
 * @next:	out: position after the last returned (pass as next @from)
 * @head:	out: ring head when the copy finished
 * @data_offset:	out: valid data starts at @buf + @data_offset
 * @bytes:	out: valid bytes at @buf + @data_offset
 * @lost:	out: positions in [from, first) that were already overwritten
 *		before the copy began or while it ran (for DATA the latter are
 *		also counted in torn_on_read)
 * @flags:	zero
 * @pad:	zero
 * @reserved:	zero
 */
struct flightrec_read {
	__u32 cpu;
	__u32 ring;
	__u64 from;
	__u64 to;
	__u64 buf;
	__u64 buf_len;
	__u64 first;
	__u64 next;
	__u64 head;
	__u64 data_offset;
	__u64 bytes;
	__u64 lost;
	__u32 flags;
	__u32 pad;
	__u64 reserved[2];
};

/**
 * struct flightrec_marker - one crash marker (LIST_MARKERS entry)
 * @time_ns:	CLOCK_MONOTONIC time the core dump started
 * @id:		sequence number of the marker, from 1
 * @slot:	slot to pass to READ_MARKER / RELEASE_MARKER
 * @pid:	thread group id of the crashing process
 * @tid:	crashing thread
 * @signal:	signal that caused the dump
 * @nr_cpus:	== INFO nr_cpus.  Only the CPUs online at the crash have
 *		their rings preserved; the others' preserved ranges are empty
 *		(first == end == their head), their rings did not move since
 * @cpu:	CPU the dump started on.  Its preserved DATA history ends with
 *		the crash record: a sample (flags FLIGHTREC_SAMPLE_CRASH |
 *		HAS_AUX, time @time_ns) of the crashing thread's user registers,
 *		frame-pointer frames and stack at the crash, with its AUX blob at
 *		the end of the preserved AUX history.  It exists only in the
 *		marker: its DATA position is the live head at the crash, which
 *		the live ring gives to its next sample.
 * @hook_ns:	ns spent in the crash hook (crashing thread, interrupts
 *		off): slot claim, ring heads, the crash record (0 from an older
 *		module)
 * @copy_ns:	ns the deferred copy of the preserved rings took (process
 *		context, after the hook)
 * @copied_bytes:	bytes copied into the marker: the crash record and the
 *		online CPUs' rings (at most their DATA + AUX sizes each)
 */
struct flightrec_marker {
	__u64 time_ns;
	__u64 id;
	__u32 slot;
	__u32 pid;
	__u32 tid;
	__u32 signal;
	__u32 nr_cpus;
	__u32 cpu;
	__u32 hook_ns;
	__u32 copy_ns;
	__u64 copied_bytes;
};

/**
 * struct flightrec_markers - FLIGHTREC_IOC_LIST_MARKERS argument
 * @buf:	user pointer to @count struct flightrec_marker
 * @count:	in: entries at @buf; out: markers stored (may exceed input count;
 *		only min(in, out) entries are written)
 * @flags:	zero
 * @reserved:	zero
 */
struct flightrec_markers {
	__u64 buf;
	__u32 count;
	__u32 flags;
	__u64 reserved[2];
};

/**
 * struct flightrec_marker_read - FLIGHTREC_IOC_READ_MARKER argument
 * @slot:	in: marker slot
 * @cpu:	in: CPU
 * @ring:	in: FLIGHTREC_RING_DATA or FLIGHTREC_RING_AUX
 * @flags:	in: zero
 * @offset:	in: byte offset into the preserved range
 * @buf:	in: user buffer, may be 0 with @buf_len 0 to query positions
 * @buf_len:	in: its size
 * @first:	out: ring position of the first preserved record/byte
 * @end:	out: ring position at the crash (exclusive): history ends here
 * @total_bytes:	out: preserved bytes for this CPU/ring
 * @bytes:	out: bytes copied
 * @reserved:	zero
 */
struct flightrec_marker_read {
	__u32 slot;
	__u32 cpu;
	__u32 ring;
	__u32 flags;
	__u64 offset;
	__u64 buf;
	__u64 buf_len;
	__u64 first;
	__u64 end;
	__u64 total_bytes;
	__u64 bytes;
	__u64 reserved[2];
};

/* The panic region's layout and ioctl arguments. */
#include "flightrec_panic.h"

#define FLIGHTREC_IOC_MAGIC	0xF7

/**
 * FLIGHTREC_IOC_INFO - describe the recorder.
 * Errors: -EFAULT bad pointer.
 *
 * Every command: -ENOTTY for a command number this header does not define
 * (including a defined number with another size or direction).
 */
#define FLIGHTREC_IOC_INFO	_IOR(FLIGHTREC_IOC_MAGIC, 1, struct flightrec_info)
/**
 * FLIGHTREC_IOC_STATS - per-CPU counters into @buf, global counters inline.
 * Errors: -EFAULT bad pointer (struct or @buf), -EINVAL @flags other than
 * FLIGHTREC_STATS_EVENT, or @count == 0.
 */
#define FLIGHTREC_IOC_STATS	_IOWR(FLIGHTREC_IOC_MAGIC, 2, struct flightrec_stats)
/**
 * FLIGHTREC_IOC_FREEZE - stop writing on every CPU; samples taken while frozen
 * are counted as dropped_frozen.  Returns after every sample handler already
 * running on another CPU has finished: no ring changes until THAW.
 * A freeze belongs to the open file that asked for it: the rings stay frozen
 * while any open file holds one, so one reader's THAW never unfreezes another
 * reader's copy.  Idempotent per file (a file holds at most one freeze);
 * closing a file drops its freeze.  No argument (must be 0).
 * Errors: -EINVAL nonzero argument.
 */
#define FLIGHTREC_IOC_FREEZE	_IO(FLIGHTREC_IOC_MAGIC, 3)
/**
 * FLIGHTREC_IOC_THAW - drop this file's freeze (and the load-time freeze of
 * autostart=0); writing resumes when no open file holds a freeze.
 * Idempotent.  No argument (must be 0).
 * Errors: -EINVAL nonzero argument.
 */
#define FLIGHTREC_IOC_THAW	_IO(FLIGHTREC_IOC_MAGIC, 4)
/**
 * FLIGHTREC_IOC_READ_RING - copy a range of a ring; see struct flightrec_read.
 * Errors: -EFAULT bad pointer, -EINVAL nonzero flags/reserved/pad, unknown
 * ring, @cpu >= nr_cpus, @from > @to (when @to != 0 it is a bound),
 * @buf_len too small for one record, nonzero @from/@to/@cpu for SIDEBAND,
 * @from or @to whose byte position does not fit in 64 bits (DATA: more than
 * U64_MAX / sizeof(struct flightrec_sample)); -ENODEV @cpu is not a possible
 * CPU.
 */
#define FLIGHTREC_IOC_READ_RING	_IOWR(FLIGHTREC_IOC_MAGIC, 5, struct flightrec_read)
/**
 * FLIGHTREC_IOC_LIST_MARKERS - list stored crash markers, in slot order.
 * poll()/select() on the device: readable (EPOLLIN) once a marker became
 * ready since this file last called LIST_MARKERS (or since open), so a reader
 * sleeps in poll() until a crash instead of polling on a timer.
 * Errors: -EFAULT bad pointer (the struct, or @buf when a marker is to be
 * written there), -EINVAL nonzero flags/reserved.
 */
#define FLIGHTREC_IOC_LIST_MARKERS _IOWR(FLIGHTREC_IOC_MAGIC, 6, struct flightrec_markers)
/**
 * FLIGHTREC_IOC_READ_MARKER - copy a marker's preserved history (the crashing
 * CPU's ends with the crash record, see struct flightrec_marker).
 * Errors: -EFAULT bad pointer (the struct, or @buf when bytes are to be
 * copied), -EINVAL nonzero flags/reserved, ring not DATA/AUX,
 * @cpu >= nr_cpus, @offset > total_bytes; -ENOENT @slot holds no marker (or
 * @slot >= max_markers); -ENODEV @cpu is not a possible CPU.
 */
#define FLIGHTREC_IOC_READ_MARKER _IOWR(FLIGHTREC_IOC_MAGIC, 7, struct flightrec_marker_read)
/**
 * FLIGHTREC_IOC_RELEASE_MARKER - free a marker slot (argument: slot number by
 * value).  Errors: -ENOENT slot holds no marker or is out of range.
 */
#define FLIGHTREC_IOC_RELEASE_MARKER _IO(FLIGHTREC_IOC_MAGIC, 8)

/**
 * FLIGHTREC_IOC_PANIC_INFO - what the panic region holds (struct
 * flightrec_panic_info).  Errors: -EFAULT bad pointer.
 */
#define FLIGHTREC_IOC_PANIC_INFO _IOR(FLIGHTREC_IOC_MAGIC, 9, struct flightrec_panic_info)
/**
 * FLIGHTREC_IOC_PANIC_READ - copy raw bytes of the held region (an earlier
 * boot's panic, layout above) as they were found at load, but for the
 * header's @panics_lost (and @header_crc), which a panic of this boot
 * increments before the reset.
 * Errors: -EFAULT bad pointer, -EINVAL nonzero reserved or @offset >
 * held_bytes, -ENOENT nothing held.
 */
#define FLIGHTREC_IOC_PANIC_READ _IOWR(FLIGHTREC_IOC_MAGIC, 10, struct flightrec_panic_read)
/**
 * FLIGHTREC_IOC_PANIC_RELEASE - the held panic was stored: forget it and arm
 * the region for this boot (argument must be 0).  Until then this boot's
 * panics only count in the held header's @panics_lost.
 * Errors: -EINVAL nonzero argument, -ENOENT nothing held.
 */
#define FLIGHTREC_IOC_PANIC_RELEASE _IO(FLIGHTREC_IOC_MAGIC, 11)

#endif /* _UAPI_LINUX_FLIGHTREC_H */
