/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fr_internal.h - what the files of flightrec.ko share: the load parameters,
 * the ring and marker types, the one module state struct, and the functions
 * one file calls in another.  Nothing here is seen by user space; the uapi is
 * uapi/flightrec.h.
 */
#ifndef FR_INTERNAL_H
#define FR_INTERNAL_H

#include <linux/capability.h>
#include <linux/binfmts.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/kprobes.h>
#include <linux/log2.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/poll.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/cred.h>
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#ifdef CONFIG_X86_64
#include <asm/unwind.h>
#include <asm/perf_regs.h>
#endif

#include "uapi/flightrec.h"
#include "fr_compat.h"

#define FR_HDR		sizeof(struct flightrec_sample)
#define FR_REC_MAX	FLIGHTREC_SAMPLE_MAX_SIZE
#define FR_CHUNK	FLIGHTREC_DATA_CHUNK
#define FR_SB_REC	sizeof(struct flightrec_sideband)
#define FR_MAX_STACK	65536U
/*
 * The crash record's user stack bytes, copied by the crash hook with
 * preemption off (interrupts off under the tracepoint): perf record's
 * default dump size for --call-graph dwarf (8192, perf-record(1)), so that
 * stack_bytes up to 64 KiB does not set the hook's latency.
 */
#define FR_CRASH_STACK	8192U

/*
 * Tasks that share a user mm but have no user state of their own: perf skips
 * their user registers (kernel/events/core.c, perf_sample_regs_user()).
 * PF_USER_WORKER (6.4+) covers io_uring and vhost workers; before it,
 * PF_IO_WORKER marked the io_uring ones (6.1: create_io_thread() in
 * kernel/fork.c; vhost workers were kernel threads, PF_KTHREAD).  The
 * build fails if neither exists (fr_init() checks it is not 0 either).
 */
#if defined(PF_USER_WORKER)
#define FR_PF_USER_WORKER	PF_USER_WORKER
#else
#define FR_PF_USER_WORKER	PF_IO_WORKER
#endif

/*
 * struct fr_params - the load parameters (fr_main.c), set by the module loader
 * before fr_init() and read-only afterwards, so read without a lock anywhere.
 */
struct fr_params {
	char *event;
	ulong period;
	uint freq;
	uint data_ring_kb;
	uint aux_ring_kb;
	uint sideband_kb;
	uint stack_bytes;
	uint markers;
	uint markers_per_uid;
	uint max_mem_mb;
	char *crash_hook;
	char *coredump_symbol;
	bool autostart;
};

extern struct fr_params fr_param;

/*
 * struct fr_ring - a power-of-two byte ring with 64-bit monotonic positions.
 *
 * One writer at a time (the CPU's overflow handler; the SIDEBAND ring under
 * fr_sb_lock).  The writer publishes @reserve (end of the bytes it is about
 * to overwrite) before touching the buffer and @head after; a reader that
 * copied [from, to) re-reads @reserve and discards what lies below
 * @reserve - @size: it may have been overwritten during the copy.
 */
struct fr_ring {
	void *buf;
	u64 size;
	u64 head;
	u64 reserve;
	u64 tail;	/* SIDEBAND only: consumer position */
};

/*
 * struct fr_cpu - everything one CPU records.
 *
 * States: never online (event NULL), recording (event set, online), offline
 * or online without a counter because it failed to open (event NULL, not
 * @online, rings and counters kept).  @event is changed only by the
 * cpuhp callbacks; the counters only by the overflow handler on this CPU,
 * inside the @seq write section so STATS reads a consistent set; @torn by
 * readers under fr_lock.  @written, @overwritten: sample records, and
 * @chunk_nr[]: the records in each FR_CHUNK of the DATA ring, so that when
 * the writer starts to reuse a chunk it adds that chunk's records to
 * @overwritten (exact however long records are); same writer and section.
 * @handler_ns: the handler's own time (sum over its
 * calls, @produced of them), same writer and section.  @scratch: a page of
 * the direct map the handler copies user frame words into (see
 * fr_copy_user_nmi()); only this CPU's handler touches it.
 */
struct fr_cpu {
	struct fr_ring data;
	struct fr_ring aux;
	struct perf_event *event;
	u32 seq;
	bool online;
	u64 produced;
	u64 dropped_frozen;
	u64 dropped_size;
	u64 written;
	u64 overwritten;
	u16 *chunk_nr;	/* [data.size / FR_CHUNK] */
	u64 handler_ns;
	void *scratch;
	atomic64_t torn;
	u64 throttled;	/* fr_overflow() only; read with READ_ONCE, outside @seq */
};

struct fr_snap {
	void *data;
	void *aux;
	u64 d_first, d_end, d_off;	/* valid bytes start at data + d_off */
	u64 a_first, a_end, a_off;
	bool copy;	/* marker: the CPU was online at the crash, its rings are copied */
};

enum { FR_SLOT_FREE, FR_SLOT_BUSY, FR_SLOT_READY };

/*
 * struct fr_marker - one crash marker slot.  The hook (crashing thread) fills
 * @m, @tgid/@start_time/@uid, the heads in @snaps and the crash record in
 * @crash while the slot is BUSY, then queues @work, which copies the rings
 * and makes the slot READY.  @tgid, @start_time and @uid identify the
 * crashing process and its user for the claim rules (fr_claim_slot()); they
 * are read under fr.mk_lock.
 */
struct fr_marker {
	atomic_t state;
	struct flightrec_marker m;
	struct fr_snap *snaps;	/* [nr_cpu_ids] */
	struct fr_snap crash;	/* the crash record and its AUX blob, built by the hook */
	void *scratch;		/* direct-map page: the crash record's frame words */
	struct work_struct work;
	pid_t tgid;
	u64 start_time;
	kuid_t uid;
	u64 hook_t0;
};

/*
 * struct fr_file - per open file of /dev/flightrec (file->private_data),
 * changed under fr.lock.
 * @frozen:	this file holds one of fr.freeze_count's freezes
 * @listed_seq:	fr.ready_seq when this file last began LIST_MARKERS; poll
 *		reports readable while fr.ready_seq differs
 */
struct fr_file {
	bool frozen;
	u64 listed_seq;
};

/*
 * struct fr_state - all of the module's mutable state, one instance (fr, in
 * fr_main.c).  Which context writes each field and what protects it:
 *
 * @cpus:            the array is allocated in fr_init() and freed in fr_exit(),
 *                   read-only in between.  Each struct fr_cpu documents its
 *                   own fields (the overflow handler on that CPU is the only
 *                   writer of its rings and counters).
 * @markers:         allocated at init, read-only pointer.  Each slot is owned
 *                   by whoever moved its @state: the crash hook FREE->BUSY->READY
 *                   (cmpxchg, then store-release), readers READY->FREE under @lock.
 * @sb:              the SIDEBAND ring: head/reserve/tail and @sb_dropped are
 *                   changed only under @sb_lock (a raw spinlock: the writers are
 *                   tracepoint and kprobe handlers, which may run with
 *                   interrupts off, also on PREEMPT_RT).
 * @sb_scratch:      per-CPU record being built before fr_sb_emit(); used with
 *                   preemption off (tracepoint/kprobe handlers), so per CPU is
 *                   exclusive.
 * @sb_lost:         per-CPU LOST record, built under @sb_lock (interrupts off).
 * @sb_gap:          records dropped since the last one written (under
 *                   @sb_lock); the next record written is preceded by a
 *                   FLIGHTREC_SB_LOST record with this count.
 * @sb_gap_time:     time of the first of them (under @sb_lock).
 * @marker_ids:      marker ids, atomic (crash hooks on several CPUs).
 * @markers_dropped: crashes that found no free slot, atomic.
 * @markers_coalesced, @markers_uid_limited: crashes not given a marker because
 *                   their process had one / their user held its share; both
 *                   changed under @mk_lock, read locklessly by STATS.
 * @mk_lock:         a raw spinlock serialising slot claims (FREE->BUSY) so
 *                   that the one-marker-per-process and per-uid rules see
 *                   every claim; taken in the crash hook (interrupts off,
 *                   sighand lock held) and nowhere else.
 * @marker_wq:       poll() waiters; woken from the copy work (process
 *                   context) when a marker becomes READY.
 * @ready_seq:       bumped (atomic) each time a marker becomes READY.
 * @hook:            enum flightrec_crash_hook, @hook_error why none: set
 *                   once in fr_init().
 * @frozen:          written by FREEZE/THAW/release under @lock, read
 *                   locklessly by the overflow handler; setting it is
 *                   followed by a grace period (see fr_freeze() for the
 *                   ordering): @boot_frozen || @freeze_count.
 * @freeze_count:    open files holding a freeze (struct fr_file), under @lock.
 * @boot_frozen:     autostart=0 until the first THAW, under @lock.
 * @event_type:      FLIGHTREC_EVENT_*, set once in fr_init().
 * @hp_state:        the cpuhp state, set once in fr_init().
 * @lock:            serialises the ioctls (the readers), so two readers never
 *                   interleave FREEZE/READ/THAW or release the same slot.
 * @panic:           the panic region (fr_panic.c).  @panic.map, @panic.phys,
 *                   @panic.size and @panic.boot_id are set once in
 *                   fr_panic_init() and read-only until fr_panic_exit().
 *                   @panic.found/@panic.error (what this load found, for
 *                   PANIC_INFO) change under @lock (PANIC_RELEASE).
 *                   @panic.mode (FR_PANIC_*) says who may write the mapping:
 *                   ARMED: the panic notifier (once: panic() runs it on one
 *                   CPU); HELD: only the notifier's panics_lost update;
 *                   ARMING: nobody but the ioctl rewriting the header (under
 *                   @lock; a panic meanwhile records nothing).  Atomic.
 *                   @panic.entry_cpu/@panic.entry_ns/@panic.rec: the panic
 *                   record, taken by the kprobe on panic() on the first CPU
 *                   to enter it (cmpxchg on @panic.entry_cpu from -1); read
 *                   by the notifier only when it runs on that same CPU.
 *                   @panic.scratch: a direct-map page for the record's user
 *                   frame walk (see fr_copy_user_nmi()), that kprobe's only.
 */
struct fr_state {
	struct fr_cpu **cpus;		/* [nr_cpu_ids], possible CPUs only */
	struct fr_marker *markers;	/* [fr_param.markers] */
	struct fr_ring sb;
	raw_spinlock_t sb_lock;
	u64 sb_dropped;
	u64 sb_gap;
	u64 sb_gap_time;
	struct flightrec_sideband __percpu *sb_scratch;
	struct flightrec_sideband __percpu *sb_lost;
	atomic64_t marker_ids;
	atomic64_t markers_dropped;
	u32 markers_coalesced;
	u32 markers_uid_limited;
	raw_spinlock_t mk_lock;
	wait_queue_head_t marker_wq;
	atomic64_t ready_seq;
	u32 hook;
	int hook_error;
	bool frozen;
	bool boot_frozen;
	u32 freeze_count;
	u32 event_type;
	enum cpuhp_state hp_state;
	struct mutex lock;	/* the readers' lock: see @lock above */
	struct {
		void *map;
		u64 phys;
		u64 size;
		u8 boot_id[16];
		u32 found;
		int error;
		atomic_t mode;
		atomic_t entry_cpu;
		u64 entry_ns;
		void *rec;	/* FR_REC_MAX bytes */
		void *scratch;
	} panic;
};

/* fr.panic.mode */
enum { FR_PANIC_OFF, FR_PANIC_ARMING, FR_PANIC_ARMED, FR_PANIC_HELD };

extern struct fr_state fr;

typedef unsigned long (*fr_copyfn)(void *data, const void *src, unsigned long len);

struct fr_cursor {
	void *dst;
};

/* fr_sample.c: the rings' writer side and the overflow handler */
long fr_output(struct fr_ring *rb, u64 from, u64 to, fr_copyfn copyfn, void *data);
unsigned long fr_copy_user(void *data, const void *src, unsigned long len);
unsigned long fr_copy_kernel(void *data, const void *src, unsigned long len);
void fr_ring_put(struct fr_ring *rb, u64 pos, const void *src, u64 len);
u32 fr_copy_user_nmi(void *dst, unsigned long src, u32 len);
struct pt_regs *fr_user_regs(struct pt_regs *regs, u16 *abi);
void fr_fill_regs(struct flightrec_aux *a, struct pt_regs *regs, u16 abi);
void fr_user_frames(struct flightrec_sample *s, struct pt_regs *uregs, u16 abi, void *scratch);
u64 fr_data_valid(struct fr_ring *rb, u64 from, u64 to, bool data);
void fr_record_sample(struct fr_cpu *c, struct pt_regs *regs);
void fr_overflow(struct perf_event *ev, struct perf_sample_data *sd, struct pt_regs *regs);

/* fr_sideband.c: exec/mmap/fork/exit into the SIDEBAND ring */
int fr_sideband_register(void);
void fr_sideband_unregister(void);

/* fr_crash.c: crash markers */
static inline u32 fr_crash_stack_bytes(void)
{
	return min(fr_param.stack_bytes, FR_CRASH_STACK);
}

int fr_alloc_markers(void);
void fr_free_markers(void);
int fr_register_crash_hook(void);
void fr_unregister_crash_hook(void);
uint fr_markers_per_uid(void);
const char *fr_coredump_symbol(void);

/* fr_dev.c: /dev/flightrec */
int fr_dev_register(void);
void fr_dev_unregister(void);

/* fr_panic.c: the panic region */
int fr_panic_init(void);
void fr_panic_exit(void);
void fr_panic_capture(const char *msg);
void fr_panic_arm(void);
u32 fr_crc(const void *p, size_t len);
/* fr_panic_load.c: what the region holds at load, the ioctls */
void fr_read_boot_id(u8 *id);
void fr_panic_found(void);
void fr_panic_info(struct flightrec_panic_info *pi);
int fr_panic_read(struct flightrec_panic_read *r);
int fr_panic_release(void);
void fr_kernel_frames(struct flightrec_sample *s, struct pt_regs *regs);

/*
 * tests/vm/fr_test_hooks.c, in the test build only (FR_TEST_HOOKS): no
 * counters (test_nmi=1), a CPU whose counter fails to open (test_fail_cpu).
 */
#ifdef FR_TEST_HOOKS
bool fr_test_no_counters(void);
bool fr_test_counter_fails(unsigned int cpu);
int flightrec_test_sample(struct pt_regs *regs);
#else
static inline bool fr_test_no_counters(void)
{
	return false;
}

static inline bool fr_test_counter_fails(unsigned int cpu)
{
	return false;
}
#endif

#endif /* FR_INTERNAL_H */
