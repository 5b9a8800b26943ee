// SPDX-License-Identifier: GPL-2.0
/*
 * flightrec - always-on flight recorder: per-CPU kernel perf counters write
 * fixed-size sample records into module-owned overwrite rings (DATA), user
 * registers and stack bytes into a second per-CPU byte ring (AUX), and
 * mmap/exec/fork/exit events into a non-overwriting SIDEBAND ring.  A kprobe
 * at the start of a core dump takes a crash marker that preserves every CPU's
 * history up to that instant.  User space reads everything through
 * /dev/flightrec (include/uapi: module/uapi/flightrec.h).
 *
 * Mainline cannot give a kernel counter a perf ring or an AUX area (the
 * rb_alloc_kernel() series, lkml 2016-09-23, never merged), hence own rings.
 */
#define pr_fmt(fmt) "flightrec: " fmt

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
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#ifdef CONFIG_X86_64
#include <asm/unwind.h>
#include <asm/perf_regs.h>
#endif

#include "uapi/flightrec.h"

static char *event = "auto";
module_param(event, charp, 0444);
MODULE_PARM_DESC(event, "auto (cycles if a PMU exists, else cpu-clock), cycles, cpu-clock");
static ulong period = 1000000;
module_param(period, ulong, 0444);
MODULE_PARM_DESC(period, "sample period: ns for cpu-clock, events for cycles (default 1000000)");
static uint freq;
module_param(freq, uint, 0444);
MODULE_PARM_DESC(freq, "sample frequency in Hz; overrides period when nonzero");
static uint data_ring_kb = 1024;
module_param(data_ring_kb, uint, 0444);
MODULE_PARM_DESC(data_ring_kb, "DATA ring per CPU, KiB (power of two, >= 4)");
static uint aux_ring_kb = 2048;
module_param(aux_ring_kb, uint, 0444);
MODULE_PARM_DESC(aux_ring_kb, "AUX ring per CPU, KiB (power of two, >= 4)");
static uint sideband_kb = 1024;
module_param(sideband_kb, uint, 0444);
MODULE_PARM_DESC(sideband_kb, "SIDEBAND ring, KiB (power of two, >= 4)");
static uint stack_bytes = 1024;
module_param(stack_bytes, uint, 0444);
MODULE_PARM_DESC(stack_bytes, "user stack bytes copied per sample into AUX (max 65536)");
static uint markers = 2;
module_param(markers, uint, 0444);
MODULE_PARM_DESC(markers, "crash marker slots (each preserves every CPU's rings)");
static bool autostart = true;
module_param(autostart, bool, 0444);
MODULE_PARM_DESC(autostart, "record from load; if 0 start frozen until FLIGHTREC_IOC_THAW");

#define FR_REC		sizeof(struct flightrec_sample)
#define FR_SB_REC	sizeof(struct flightrec_sideband)
#define FR_MAX_STACK	65536U

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
 * (event NULL, rings and counters kept).  @event is changed only by the
 * cpuhp callbacks; the counters only by the overflow handler on this CPU,
 * inside the @seq write section so STATS reads a consistent set; @torn by
 * readers under fr_lock.
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
	atomic64_t torn;
};

struct fr_snap {
	void *data;
	void *aux;
	u64 d_first, d_end, d_off;	/* valid bytes start at data + d_off */
	u64 a_first, a_end, a_off;
};

enum { FR_SLOT_FREE, FR_SLOT_BUSY, FR_SLOT_READY };

struct fr_marker {
	atomic_t state;
	struct flightrec_marker m;
	struct fr_snap *snaps;	/* [nr_cpu_ids] */
};

static struct fr_cpu **fr_cpus;		/* [nr_cpu_ids], possible CPUs only */
static struct fr_marker *fr_markers;	/* [markers] */
static struct fr_ring fr_sb;
static DEFINE_RAW_SPINLOCK(fr_sb_lock);	/* fr_sb head/reserve/tail, fr_sb_dropped */
static u64 fr_sb_dropped;
static struct flightrec_sideband __percpu *fr_sb_scratch;
static atomic64_t fr_marker_ids = ATOMIC64_INIT(0);
static atomic64_t fr_markers_dropped = ATOMIC64_INIT(0);
static bool fr_frozen;
static u32 fr_event_type;
static enum cpuhp_state fr_hp_state;
static DEFINE_MUTEX(fr_lock);		/* serialises ioctls (readers) */

typedef unsigned long (*fr_copyfn)(void *data, const void *src, unsigned long len);

/*
 * fr_output - copy ring bytes [from, to) out through @copyfn, the one copy-out
 * routine for copy_to_user and for the crash snapshot.  Shaped like
 * rb_output_aux() (lkml 2016-09-23, "perf: Add api to (de-)allocate AUX
 * buffers for kernel counters").  Returns bytes copied or -EFAULT.
 */
static long fr_output(struct fr_ring *rb, u64 from, u64 to, fr_copyfn copyfn, void *data)
{
	u64 mask = rb->size - 1;
	long len = 0;

	while (from != to) {
		u64 off = from & mask;
		unsigned long tocopy = min_t(u64, rb->size - off, to - from);

		if (copyfn(data, rb->buf + off, tocopy))
			return -EFAULT;
		len += tocopy;
		from += tocopy;
	}
	return len;
}

struct fr_cursor {
	void *dst;
};

static unsigned long fr_copy_user(void *data, const void *src, unsigned long len)
{
	struct fr_cursor *c = data;
	unsigned long left = copy_to_user((void __user *)c->dst, src, len);

	c->dst += len;
	return left;
}

static unsigned long fr_copy_kernel(void *data, const void *src, unsigned long len)
{
	struct fr_cursor *c = data;

	memcpy(c->dst, src, len);
	c->dst += len;
	return 0;
}

/* Writer side: copy @len bytes at ring position @pos, wrapping. */
static void fr_ring_put(struct fr_ring *rb, u64 pos, const void *src, u64 len)
{
	u64 off = pos & (rb->size - 1);
	u64 first = min(len, rb->size - off);

	memcpy(rb->buf + off, src, first);
	if (len > first)
		memcpy(rb->buf, src + first, len - first);
}

/* Copy user stack bytes into the ring; returns bytes stored (may shrink). */
static u32 fr_ring_put_user(struct fr_ring *rb, u64 pos, unsigned long sp, u32 len)
{
	while (len) {
		u64 off = pos & (rb->size - 1);
		u64 first = min_t(u64, len, rb->size - off);

		if (!copy_from_user_nofault(rb->buf + off, (void __user *)sp, first) &&
		    (len == first ||
		     !copy_from_user_nofault(rb->buf, (void __user *)(sp + first), len - first)))
			return len;
		/* The stack ends below sp + len: halve (bounded, never sleeps). */
		len = (len / 2) & ~7U;
	}
	return 0;
}

static void fr_fill_regs(struct flightrec_aux *a, struct pt_regs *regs)
{
#ifdef CONFIG_X86_64
	a->abi = 1;
	a->regs[PERF_REG_X86_AX] = regs->ax;
	a->regs[PERF_REG_X86_BX] = regs->bx;
	a->regs[PERF_REG_X86_CX] = regs->cx;
	a->regs[PERF_REG_X86_DX] = regs->dx;
	a->regs[PERF_REG_X86_SI] = regs->si;
	a->regs[PERF_REG_X86_DI] = regs->di;
	a->regs[PERF_REG_X86_BP] = regs->bp;
	a->regs[PERF_REG_X86_SP] = regs->sp;
	a->regs[PERF_REG_X86_IP] = regs->ip;
	a->regs[PERF_REG_X86_FLAGS] = regs->flags;
	a->regs[PERF_REG_X86_CS] = regs->cs;
	a->regs[PERF_REG_X86_SS] = regs->ss;
	a->regs[PERF_REG_X86_R8] = regs->r8;
	a->regs[PERF_REG_X86_R9] = regs->r9;
	a->regs[PERF_REG_X86_R10] = regs->r10;
	a->regs[PERF_REG_X86_R11] = regs->r11;
	a->regs[PERF_REG_X86_R12] = regs->r12;
	a->regs[PERF_REG_X86_R13] = regs->r13;
	a->regs[PERF_REG_X86_R14] = regs->r14;
	a->regs[PERF_REG_X86_R15] = regs->r15;
#endif
}

static void fr_kernel_frames(struct flightrec_sample *s, struct pt_regs *regs)
{
#ifdef CONFIG_X86_64
	struct unwind_state state;
	unsigned long addr;

	for (unwind_start(&state, current, regs, NULL); !unwind_done(&state);
	     unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		if (s->nr_kframes == FLIGHTREC_MAX_KFRAMES) {
			s->flags |= FLIGHTREC_SAMPLE_KSTACK_TRUNC;
			break;
		}
		s->kframes[s->nr_kframes++] = addr;
	}
#endif
}

/* Walk the user frame-pointer chain (rbp -> {saved rbp, return address}). */
static void fr_user_frames(struct flightrec_sample *s, struct pt_regs *uregs)
{
	unsigned long fp = frame_pointer(uregs);
	unsigned long frame[2];

	s->uframes[s->nr_uframes++] = instruction_pointer(uregs);
	while (s->nr_uframes < FLIGHTREC_MAX_UFRAMES) {
		if (!fp || (fp & (sizeof(long) - 1)) ||
		    copy_from_user_nofault(frame, (void __user *)fp, sizeof(frame)))
			return;
		if (!frame[1])
			return;
		s->uframes[s->nr_uframes++] = frame[1];
		if (frame[0] <= fp)
			return;
		fp = frame[0];
	}
	s->flags |= FLIGHTREC_SAMPLE_USTACK_TRUNC;
}

/*
 * Overflow handler: NMI (cycles) or hrtimer IRQ (cpu-clock) context on the
 * counter's CPU.  Lock-free, never sleeps, never allocates, never waits.
 */
static void fr_overflow(struct perf_event *ev, struct perf_sample_data *sd, struct pt_regs *regs)
{
	struct fr_cpu *c = ev->overflow_handler_context;
	struct pt_regs *uregs = NULL;
	struct flightrec_sample *s;
	struct flightrec_aux a;
	u32 aux_len = 0, slen = 0;
	u64 pos, apos = 0;

	if (user_mode(regs))
		uregs = regs;
	else if (current->mm && !(current->flags & PF_KTHREAD))
		uregs = task_pt_regs(current);
	if (uregs)
		aux_len = sizeof(a) + round_down(stack_bytes, 8);

	WRITE_ONCE(c->seq, c->seq + 1);
	/*
	 * Full barrier: the odd @seq store must be visible before fr_frozen is
	 * read.  Pairs with smp_mb() in fr_freeze(), the store-buffering pattern
	 * of tools/memory-model/litmus-tests/SB+fencembonceonces.litmus: either
	 * this handler sees the freeze or fr_freeze() sees it in flight and waits.
	 */
	smp_mb();
	c->produced++;
	if (READ_ONCE(fr_frozen)) {
		c->dropped_frozen++;
		goto out;
	}
	if (aux_len > c->aux.size) {
		c->dropped_size++;
		goto out;
	}

	pos = c->data.head;
	WRITE_ONCE(c->data.reserve, pos + FR_REC);
	smp_wmb();	/* reserve before the record bytes; pairs with the readers' smp_rmb() */
	s = c->data.buf + (pos & (c->data.size - 1));
	memset(s, 0, FR_REC);
	s->time_ns = ktime_get_mono_fast_ns();
	s->ip = instruction_pointer(regs);
	s->seq = div_u64(pos, FR_REC);
	s->cpu = smp_processor_id();
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = user_mode(regs) ? FLIGHTREC_MODE_USER : FLIGHTREC_MODE_KERNEL;
	if (!user_mode(regs))
		fr_kernel_frames(s, regs);

	if (uregs) {
		fr_user_frames(s, uregs);
		apos = c->aux.head;
		WRITE_ONCE(c->aux.reserve, apos + aux_len);
		smp_wmb();	/* reserve before the blob bytes, as for DATA */
		slen = fr_ring_put_user(&c->aux, apos + sizeof(a),
					user_stack_pointer(uregs), aux_len - sizeof(a));
		memset(&a, 0, sizeof(a));
		a.seq = s->seq;
		a.len = sizeof(a) + slen;
		a.stack_len = slen;
		fr_fill_regs(&a, uregs);
		fr_ring_put(&c->aux, apos, &a, sizeof(a));
		s->aux_pos = apos;
		s->aux_len = a.len;
		s->flags |= FLIGHTREC_SAMPLE_HAS_AUX;
		smp_wmb();	/* blob bytes before the AUX head that publishes them */
		WRITE_ONCE(c->aux.head, apos + a.len);
		WRITE_ONCE(c->aux.reserve, apos + a.len);
	}
	smp_wmb();	/* record bytes before the DATA head; pairs with smp_load_acquire(head) */
	WRITE_ONCE(c->data.head, pos + FR_REC);
out:
	smp_wmb();	/* counters and heads before the even @seq (STATS, fr_freeze()) */
	WRITE_ONCE(c->seq, c->seq + 1);
}

/* ---- sideband: exec/mmap/fork/exit into a ring the daemon drains ---- */

static void fr_sb_emit(struct flightrec_sideband *r)
{
	unsigned long flags;
	u64 pos;

	r->time_ns = ktime_get_mono_fast_ns();
	raw_spin_lock_irqsave(&fr_sb_lock, flags);
	pos = fr_sb.head;
	if (pos - fr_sb.tail >= fr_sb.size) {
		fr_sb_dropped++;
	} else {
		r->seq = div_u64(pos, FR_SB_REC);
		fr_ring_put(&fr_sb, pos, r, FR_SB_REC);
		smp_wmb();	/* record before head: READ_RING reads head under the lock */
		WRITE_ONCE(fr_sb.head, pos + FR_SB_REC);
	}
	raw_spin_unlock_irqrestore(&fr_sb_lock, flags);
}

static struct flightrec_sideband *fr_sb_begin(u32 type, struct task_struct *t)
{
	struct flightrec_sideband *r = this_cpu_ptr(fr_sb_scratch);

	memset(r, 0, FR_SB_REC);
	r->type = type;
	r->pid = task_tgid_nr(t);
	r->tid = task_pid_nr(t);
	return r;
}

static void fr_sb_file(struct flightrec_sideband *r, struct file *file)
{
	struct inode *inode = file_inode(file);
	char *p;

	r->ino = inode->i_ino;
	r->dev = new_encode_dev(inode->i_sb->s_dev);
	p = d_path(&file->f_path, r->path, sizeof(r->path));
	if (IS_ERR(p)) {
		r->flags |= FLIGHTREC_SB_PATH_TRUNC;
		r->path[0] = '\0';
		return;
	}
	memmove(r->path, p, strlen(p) + 1);
}

/*
 * perf_event_mmap(vma) runs for every new mapping (mmap_region()) and every
 * mprotect() that adds PROT_EXEC, after the VMA is final, in the mapping
 * task's context: the same place perf takes PERF_RECORD_MMAP2 from.
 */
static int fr_mmap_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct vm_area_struct *vma = (void *)regs_get_kernel_argument(regs, 0);
	struct flightrec_sideband *r;

	if (!vma || !vma->vm_file || !(vma->vm_flags & VM_EXEC))
		return 0;
	r = fr_sb_begin(FLIGHTREC_SB_MMAP, current);
	r->start = vma->vm_start;
	r->len = vma->vm_end - vma->vm_start;
	r->pgoff = (u64)vma->vm_pgoff << PAGE_SHIFT;
	fr_sb_file(r, vma->vm_file);
	fr_sb_emit(r);
	return 0;
}

static struct kprobe fr_mmap_kp = {
	.symbol_name = "perf_event_mmap",
	.pre_handler = fr_mmap_pre,
};

static void fr_tp_exec(void *data, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct flightrec_sideband *r = fr_sb_begin(FLIGHTREC_SB_EXEC, p);

	fr_sb_file(r, bprm->file);
	fr_sb_emit(r);
}

static void fr_tp_fork(void *data, struct task_struct *parent, struct task_struct *child)
{
	struct flightrec_sideband *r = fr_sb_begin(FLIGHTREC_SB_FORK, child);

	r->ppid = task_tgid_nr(parent);
	strscpy(r->path, child->comm, sizeof(r->path));
	fr_sb_emit(r);
}

static void fr_tp_exit(void *data, struct task_struct *p)
{
	struct flightrec_sideband *r = fr_sb_begin(FLIGHTREC_SB_EXIT, p);

	strscpy(r->path, p->comm, sizeof(r->path));
	fr_sb_emit(r);
}

static struct {
	const char *name;
	void *probe;
	struct tracepoint *tp;
} fr_tps[] = {
	{ .name = "sched_process_exec", .probe = fr_tp_exec },
	{ .name = "sched_process_fork", .probe = fr_tp_fork },
	{ .name = "sched_process_exit", .probe = fr_tp_exit },
};

static void fr_find_tp(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(fr_tps); i++)
		if (!strcmp(tp->name, fr_tps[i].name))
			fr_tps[i].tp = tp;
}

static void fr_unregister_tps(int n)
{
	while (n--)
		tracepoint_probe_unregister(fr_tps[n].tp, fr_tps[n].probe, NULL);
	tracepoint_synchronize_unregister();
}

static int fr_register_tps(void)
{
	int i, ret;

	for_each_kernel_tracepoint(fr_find_tp, NULL);
	for (i = 0; i < ARRAY_SIZE(fr_tps); i++) {
		ret = fr_tps[i].tp ? tracepoint_probe_register(fr_tps[i].tp, fr_tps[i].probe, NULL)
				   : -ENOENT;
		if (ret) {
			pr_err("tracepoint %s: %d\n", fr_tps[i].name, ret);
			fr_unregister_tps(i);
			return ret;
		}
	}
	return 0;
}

/* ---- crash marker ---- */

static void fr_snap_ring(struct fr_ring *rb, void *dst, u64 *first, u64 head, u64 *off)
{
	struct fr_cursor cur = { .dst = dst };
	u64 from = head > rb->size ? head - rb->size : 0;
	u64 valid;

	fr_output(rb, from, head, fr_copy_kernel, &cur);
	smp_rmb();	/* copy before re-reading reserve; pairs with the writer's smp_wmb() */
	valid = READ_ONCE(rb->reserve);
	valid = valid > rb->size ? valid - rb->size : 0;
	valid = clamp(valid, from, head);
	*first = valid;
	*off = valid - from;
}

/* Copy up to @len bytes of user stack at @sp; returns bytes copied (may shrink). */
static u32 fr_copy_user_stack(void *dst, unsigned long sp, u32 len)
{
	while (len) {
		if (!copy_from_user_nofault(dst, (void __user *)sp, len))
			return len;
		/* The stack ends below sp + len: halve (bounded, never sleeps). */
		len = (len / 2) & ~7U;
	}
	return 0;
}

/*
 * The crash record: a sample of the crashing thread taken by the crash hook
 * itself, from the user registers the fault left in task_pt_regs() (what
 * do_coredump() passes the binfmt as cprm.regs = signal_pt_regs(),
 * fs/coredump.c), with the user frame-pointer chain and an AUX blob of
 * registers and stack.  It is appended to the crashing CPU's preserved
 * history, so that history ends at the crash, not at the last counter
 * overflow before it (up to a sample period earlier).  It exists only in the
 * marker: the live rings are not written here (their writer is the overflow
 * handler alone, which may be running on this CPU right now), so its DATA
 * position is the live head at the crash, which the live ring gives to its
 * next sample.  @sn must have room for one record and one blob past its copy.
 */
static void fr_crash_record(struct fr_snap *sn, u64 time_ns, int cpu)
{
	struct pt_regs *uregs = task_pt_regs(current);
	struct flightrec_sample *s;
	struct flightrec_aux *a;
	u32 slen;

	if (!current->mm || (current->flags & PF_KTHREAD) || !user_mode(uregs))
		return;
	s = sn->data + sn->d_off + (sn->d_end - sn->d_first);
	a = sn->aux + sn->a_off + (sn->a_end - sn->a_first);
	memset(s, 0, FR_REC);
	s->time_ns = time_ns;
	s->ip = instruction_pointer(uregs);
	s->seq = div_u64(sn->d_end, FR_REC);
	s->cpu = cpu;
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = FLIGHTREC_MODE_USER;
	s->flags = FLIGHTREC_SAMPLE_CRASH | FLIGHTREC_SAMPLE_HAS_AUX;
	fr_user_frames(s, uregs);

	memset(a, 0, sizeof(*a));
	slen = fr_copy_user_stack(a + 1, user_stack_pointer(uregs), round_down(stack_bytes, 8));
	a->seq = s->seq;
	a->len = sizeof(*a) + slen;
	a->stack_len = slen;
	fr_fill_regs(a, uregs);
	s->aux_pos = sn->a_end;
	s->aux_len = a->len;
	sn->d_end += FR_REC;
	sn->a_end += a->len;
}

/*
 * The crash hook is a kprobe on the entry of the core dump routine
 * (do_coredump(), renamed vfs_coredump() in 6.13; both are tried).  It runs in
 * the crashing thread, once per dump, before the other threads are zapped and
 * before anything is written, and whether or not RLIMIT_CORE lets a file be
 * written.  The signal_generate tracepoint fires for every signal, handled
 * or not, so it would need the dump decision re-implemented; die notifiers
 * see kernel oopses, not user crashes.  The handler runs with preemption off
 * (interrupts may be on: optimized and ftrace-based probes, see
 * Documentation/trace/kprobes.rst): it copies every ring once into a
 * preallocated slot, never waits, and a crash that finds no free slot is
 * counted in markers_dropped and dropped, so a crash storm costs each extra
 * crash one failed cmpxchg per slot.
 */
static int fr_coredump_pre(struct kprobe *p, struct pt_regs *regs)
{
	const kernel_siginfo_t *si = (void *)regs_get_kernel_argument(regs, 0);
	int i, cpu, this_cpu = smp_processor_id();
	struct fr_marker *mk = NULL;

	for (i = 0; i < markers; i++) {
		struct fr_marker *m = &fr_markers[i];

		if (atomic_cmpxchg(&m->state, FR_SLOT_FREE, FR_SLOT_BUSY) == FR_SLOT_FREE) {
			mk = m;
			break;
		}
	}
	if (!mk) {
		atomic64_inc(&fr_markers_dropped);
		return 0;
	}
	/*
	 * Heads first, then the time: every record below a head was published
	 * before the marker's timestamp, so the history ends at the marker.
	 */
	for_each_possible_cpu(cpu) {
		/* acquire: pairs with the writer's smp_wmb() before each head */
		mk->snaps[cpu].d_end = smp_load_acquire(&fr_cpus[cpu]->data.head);
		/* likewise for the AUX head */
		mk->snaps[cpu].a_end = smp_load_acquire(&fr_cpus[cpu]->aux.head);
	}
	memset(&mk->m, 0, sizeof(mk->m));
	mk->m.time_ns = ktime_get_mono_fast_ns();
	mk->m.slot = i;
	mk->m.pid = task_tgid_nr(current);
	mk->m.tid = task_pid_nr(current);
	mk->m.signal = si ? si->si_signo : 0;
	mk->m.nr_cpus = nr_cpu_ids;
	mk->m.cpu = this_cpu;
	for_each_possible_cpu(cpu) {
		struct fr_snap *sn = &mk->snaps[cpu];

		fr_snap_ring(&fr_cpus[cpu]->data, sn->data, &sn->d_first, sn->d_end, &sn->d_off);
		fr_snap_ring(&fr_cpus[cpu]->aux, sn->aux, &sn->a_first, sn->a_end, &sn->a_off);
	}
	fr_crash_record(&mk->snaps[this_cpu], mk->m.time_ns, this_cpu);
	mk->m.id = atomic64_inc_return(&fr_marker_ids);
	atomic_set_release(&mk->state, FR_SLOT_READY);	/* slot contents before READY */
	return 0;
}

static struct kprobe fr_coredump_kp = {
	.pre_handler = fr_coredump_pre,
};

static int fr_register_coredump_kp(void)
{
	static const char * const names[] = { "vfs_coredump", "do_coredump" };
	int i, ret = -ENOENT;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		memset(&fr_coredump_kp, 0, sizeof(fr_coredump_kp));
		fr_coredump_kp.pre_handler = fr_coredump_pre;
		fr_coredump_kp.symbol_name = names[i];
		ret = register_kprobe(&fr_coredump_kp);
		if (!ret)
			return 0;
	}
	pr_err("no core dump hook: %d\n", ret);
	return ret;
}

/* ---- per-CPU counters and CPU hotplug ---- */

static struct perf_event_attr fr_attr(u32 type)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type == FLIGHTREC_EVENT_CYCLES ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.config = type == FLIGHTREC_EVENT_CYCLES ? PERF_COUNT_HW_CPU_CYCLES
							 : PERF_COUNT_SW_CPU_CLOCK,
		.pinned = 1,
	};

	if (freq) {
		attr.freq = 1;
		attr.sample_freq = freq;
	} else {
		attr.sample_period = period;
	}
	return attr;
}

static int fr_cpu_online(unsigned int cpu)
{
	struct perf_event_attr attr = fr_attr(fr_event_type);
	struct fr_cpu *c = fr_cpus[cpu];
	struct perf_event *ev;

	ev = perf_event_create_kernel_counter(&attr, cpu, NULL, fr_overflow, c);
	if (IS_ERR(ev)) {
		pr_warn("cpu %u: counter: %ld\n", cpu, PTR_ERR(ev));
		return PTR_ERR(ev);
	}
	c->event = ev;
	WRITE_ONCE(c->online, true);
	return 0;
}

static int fr_cpu_offline(unsigned int cpu)
{
	struct fr_cpu *c = fr_cpus[cpu];

	WRITE_ONCE(c->online, false);
	if (c->event) {
		perf_event_disable(c->event);
		perf_event_release_kernel(c->event);
		c->event = NULL;
	}
	return 0;
}

static int fr_pick_event(void)
{
	struct perf_event_attr attr = fr_attr(FLIGHTREC_EVENT_CYCLES);
	struct perf_event *ev;

	if (!strcmp(event, "cpu-clock")) {
		fr_event_type = FLIGHTREC_EVENT_CPU_CLOCK;
		return 0;
	}
	if (strcmp(event, "cycles") && strcmp(event, "auto"))
		return -EINVAL;
	ev = perf_event_create_kernel_counter(&attr, raw_smp_processor_id(), NULL, NULL, NULL);
	if (!IS_ERR(ev)) {
		perf_event_release_kernel(ev);
		fr_event_type = FLIGHTREC_EVENT_CYCLES;
		return 0;
	}
	if (!strcmp(event, "cycles"))
		return PTR_ERR(ev);
	fr_event_type = FLIGHTREC_EVENT_CPU_CLOCK;
	return 0;
}

/* ---- allocation ---- */

static int fr_ring_alloc(struct fr_ring *rb, uint kb, int node)
{
	memset(rb, 0, sizeof(*rb));
	rb->size = (u64)kb << 10;
	rb->buf = vzalloc_node(rb->size, node);
	return rb->buf ? 0 : -ENOMEM;
}

static void fr_free_cpus(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		if (!fr_cpus[cpu])
			continue;
		vfree(fr_cpus[cpu]->data.buf);
		vfree(fr_cpus[cpu]->aux.buf);
		kfree(fr_cpus[cpu]);
	}
	kfree(fr_cpus);
}

static int fr_alloc_cpus(void)
{
	int cpu;

	fr_cpus = kcalloc(nr_cpu_ids, sizeof(*fr_cpus), GFP_KERNEL);
	if (!fr_cpus)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		int node = cpu_to_node(cpu);
		struct fr_cpu *c = kzalloc_node(sizeof(*c), GFP_KERNEL, node);

		fr_cpus[cpu] = c;
		if (!c || fr_ring_alloc(&c->data, data_ring_kb, node) ||
		    fr_ring_alloc(&c->aux, aux_ring_kb, node)) {
			fr_free_cpus();
			return -ENOMEM;
		}
	}
	return 0;
}

static void fr_free_markers(void)
{
	int i, cpu;

	for (i = 0; i < markers && fr_markers; i++) {
		if (!fr_markers[i].snaps)
			continue;
		for_each_possible_cpu(cpu) {
			vfree(fr_markers[i].snaps[cpu].data);
			vfree(fr_markers[i].snaps[cpu].aux);
		}
		kfree(fr_markers[i].snaps);
	}
	kfree(fr_markers);
}

static int fr_alloc_markers(void)
{
	/* Room past each copy for the crash record and its AUX blob. */
	size_t dlen = ((size_t)data_ring_kb << 10) + FR_REC;
	size_t alen = ((size_t)aux_ring_kb << 10) + sizeof(struct flightrec_aux) +
		      round_down(stack_bytes, 8);
	int i, cpu;

	fr_markers = kcalloc(markers ? markers : 1, sizeof(*fr_markers), GFP_KERNEL);
	if (!fr_markers)
		return -ENOMEM;
	for (i = 0; i < markers; i++) {
		struct fr_marker *mk = &fr_markers[i];

		mk->snaps = kcalloc(nr_cpu_ids, sizeof(*mk->snaps), GFP_KERNEL);
		if (!mk->snaps)
			goto fail;
		for_each_possible_cpu(cpu) {
			mk->snaps[cpu].data = vmalloc(dlen);
			mk->snaps[cpu].aux = vmalloc(alen);
			if (!mk->snaps[cpu].data || !mk->snaps[cpu].aux)
				goto fail;
		}
	}
	return 0;
fail:
	fr_free_markers();
	return -ENOMEM;
}

/* ---- ioctls ---- */

static bool fr_nonzero(const void *p, size_t len)
{
	return !!memchr_inv(p, 0, len);
}

static int fr_ioc_info(void __user *uarg)
{
	struct flightrec_info in = {
		.version = FLIGHTREC_VERSION,
		.nr_cpus = nr_cpu_ids,
		.data_ring_bytes = (u64)data_ring_kb << 10,
		.aux_ring_bytes = (u64)aux_ring_kb << 10,
		.sideband_ring_bytes = (u64)sideband_kb << 10,
		.period = freq ? 0 : period,
		.freq = freq,
		.event = fr_event_type,
		.sample_size = FR_REC,
		.sideband_size = FR_SB_REC,
		.stack_bytes = round_down(stack_bytes, 8),
		.max_markers = markers,
		.frozen = READ_ONCE(fr_frozen),
	};

	return copy_to_user(uarg, &in, sizeof(in)) ? -EFAULT : 0;
}

static void fr_cpu_stats(int cpu, struct flightrec_cpu_stats *st)
{
	struct fr_cpu *c = fr_cpus[cpu];
	u32 seq;

	memset(st, 0, sizeof(*st));
	st->cpu = cpu;
	do {
		seq = READ_ONCE(c->seq);
		smp_rmb();	/* seqcount read side: @seq before the counters */
		st->produced = c->produced;
		st->dropped_frozen = c->dropped_frozen;
		st->dropped_size = c->dropped_size;
		st->data_head = div_u64(READ_ONCE(c->data.head), FR_REC);
		st->aux_head = READ_ONCE(c->aux.head);
		smp_rmb();	/* the counters before re-reading @seq */
	} while ((seq & 1) || READ_ONCE(c->seq) != seq);
	st->online = READ_ONCE(c->online);
	st->written = st->data_head;
	st->overwritten = st->written > div_u64(c->data.size, FR_REC) ?
			  st->written - div_u64(c->data.size, FR_REC) : 0;
	st->aux_written = st->aux_head;
	st->aux_overwritten = st->aux_head > c->aux.size ? st->aux_head - c->aux.size : 0;
	st->torn_on_read = atomic64_read(&c->torn);
}

static int fr_ioc_stats(void __user *uarg)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats st;
	unsigned long flags;
	u32 i, n;

	if (copy_from_user(&s, uarg, sizeof(s)))
		return -EFAULT;
	if (s.flags || fr_nonzero(s.reserved, sizeof(s.reserved)) || !s.count)
		return -EINVAL;
	n = min_t(u32, s.count, nr_cpu_ids);
	for (i = 0; i < n; i++) {
		if (cpu_possible(i))
			fr_cpu_stats(i, &st);
		else
			memset(&st, 0, sizeof(st));
		st.cpu = i;
		if (copy_to_user(u64_to_user_ptr(s.buf + (u64)i * sizeof(st)), &st, sizeof(st)))
			return -EFAULT;
	}
	s.count = n;
	raw_spin_lock_irqsave(&fr_sb_lock, flags);
	s.sideband_written = div_u64(fr_sb.head, FR_SB_REC);
	s.sideband_dropped = fr_sb_dropped;
	raw_spin_unlock_irqrestore(&fr_sb_lock, flags);
	s.markers_taken = atomic64_read(&fr_marker_ids);
	s.markers_dropped = atomic64_read(&fr_markers_dropped);
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static int fr_read_sideband(struct flightrec_read *r)
{
	struct fr_cursor cur = { .dst = u64_to_user_ptr(r->buf) };
	unsigned long flags;
	u64 tail, head, len;
	long ret;

	if (r->cpu || r->from || r->to)
		return -EINVAL;
	raw_spin_lock_irqsave(&fr_sb_lock, flags);
	tail = fr_sb.tail;
	head = fr_sb.head;
	raw_spin_unlock_irqrestore(&fr_sb_lock, flags);
	len = min(head - tail, round_down(r->buf_len, FR_SB_REC));
	/* Records in [tail, head) are never overwritten: the ring does not wrap over tail. */
	ret = fr_output(&fr_sb, tail, tail + len, fr_copy_user, &cur);
	if (ret < 0)
		return ret;
	raw_spin_lock_irqsave(&fr_sb_lock, flags);
	fr_sb.tail = tail + len;
	raw_spin_unlock_irqrestore(&fr_sb_lock, flags);
	r->first = div_u64(tail, FR_SB_REC);
	r->next = div_u64(tail + len, FR_SB_REC);
	r->head = div_u64(head, FR_SB_REC);
	r->bytes = len;
	return 0;
}

static int fr_ioc_read(void __user *uarg)
{
	struct fr_cursor cur;
	struct flightrec_read r;
	struct fr_ring *rb;
	u64 unit, head, from, to, oldest, len, valid;
	struct fr_cpu *c;
	long ret;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.flags || r.pad || fr_nonzero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	if (r.ring > FLIGHTREC_RING_SIDEBAND || (r.to && r.from > r.to))
		return -EINVAL;
	if (r.ring == FLIGHTREC_RING_AUX)
		unit = 1;
	else
		unit = r.ring == FLIGHTREC_RING_DATA ? FR_REC : FR_SB_REC;
	if (r.buf_len < unit)
		return -EINVAL;
	/* Outputs are written whatever the caller left in them. */
	r.first = 0;
	r.next = 0;
	r.head = 0;
	r.data_offset = 0;
	r.bytes = 0;
	r.lost = 0;
	if (r.ring == FLIGHTREC_RING_SIDEBAND) {
		ret = fr_read_sideband(&r);
		goto out;
	}
	if (r.cpu >= nr_cpu_ids)
		return -EINVAL;
	if (!cpu_possible(r.cpu))
		return -ENODEV;
	/* Positions past 2^64 bytes cannot occur; reject what would overflow. */
	if (r.from > U64_MAX / unit || r.to > U64_MAX / unit)
		return -EINVAL;
	c = fr_cpus[r.cpu];
	rb = r.ring == FLIGHTREC_RING_DATA ? &c->data : &c->aux;
	head = smp_load_acquire(&rb->head);	/* pairs with the writer's smp_wmb() */
	from = r.from * unit;
	to = r.to ? min(r.to * unit, head) : head;
	oldest = head > rb->size ? head - rb->size : 0;
	from = max(from, oldest);
	if (from > to)
		from = to;
	len = min(to - from, round_down(r.buf_len, unit));
	cur.dst = u64_to_user_ptr(r.buf);
	ret = fr_output(rb, from, from + len, fr_copy_user, &cur);
	if (ret < 0)
		return ret;
	smp_rmb();	/* copy before re-reading reserve; pairs with the writer's smp_wmb() */
	valid = READ_ONCE(rb->reserve);
	valid = valid > rb->size ? valid - rb->size : 0;
	valid = clamp(valid, from, from + len);
	if (r.ring == FLIGHTREC_RING_DATA)
		valid = roundup(valid, FR_REC);
	if (valid > from && r.ring == FLIGHTREC_RING_DATA)
		atomic64_add(div_u64(valid - from, unit), &c->torn);
	r.data_offset = valid - from;
	r.bytes = from + len - valid;
	r.first = div_u64(valid, unit);
	r.next = div_u64(from + len, unit);
	r.head = div_u64(READ_ONCE(rb->head), unit);
	r.lost = r.first > r.from ? r.first - r.from : 0;
	ret = 0;
out:
	if (ret)
		return ret;
	return copy_to_user(uarg, &r, sizeof(r)) ? -EFAULT : 0;
}

static int fr_ioc_list(void __user *uarg)
{
	struct flightrec_markers l;
	u32 i, n = 0;

	if (copy_from_user(&l, uarg, sizeof(l)))
		return -EFAULT;
	if (l.flags || fr_nonzero(l.reserved, sizeof(l.reserved)))
		return -EINVAL;
	for (i = 0; i < markers; i++) {
		struct fr_marker *mk = &fr_markers[i];

		if (atomic_read_acquire(&mk->state) != FR_SLOT_READY)
			continue;
		if (n < l.count &&
		    copy_to_user(u64_to_user_ptr(l.buf + (u64)n * sizeof(mk->m)), &mk->m,
				 sizeof(mk->m)))
			return -EFAULT;
		n++;
	}
	l.count = n;
	return copy_to_user(uarg, &l, sizeof(l)) ? -EFAULT : 0;
}

static int fr_ioc_read_marker(void __user *uarg)
{
	struct flightrec_marker_read r;
	struct fr_snap *sn;
	void *base;
	u64 total, len;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.flags || fr_nonzero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	if (r.ring > FLIGHTREC_RING_AUX || r.cpu >= nr_cpu_ids)
		return -EINVAL;
	if (!cpu_possible(r.cpu))
		return -ENODEV;
	if (r.slot >= markers || atomic_read_acquire(&fr_markers[r.slot].state) != FR_SLOT_READY)
		return -ENOENT;
	sn = &fr_markers[r.slot].snaps[r.cpu];
	if (r.ring == FLIGHTREC_RING_DATA) {
		base = sn->data + sn->d_off;
		r.first = div_u64(sn->d_first, FR_REC);
		r.end = div_u64(sn->d_end, FR_REC);
		total = sn->d_end - sn->d_first;
	} else {
		base = sn->aux + sn->a_off;
		r.first = sn->a_first;
		r.end = sn->a_end;
		total = sn->a_end - sn->a_first;
	}
	if (r.offset > total)
		return -EINVAL;
	len = min(total - r.offset, r.buf_len);
	if (len && copy_to_user(u64_to_user_ptr(r.buf), base + r.offset, len))
		return -EFAULT;
	r.total_bytes = total;
	r.bytes = len;
	return copy_to_user(uarg, &r, sizeof(r)) ? -EFAULT : 0;
}

/*
 * Stop writing on every CPU and wait for overflow handlers already past their
 * fr_frozen check, so that a copy-out after FREEZE sees no writer.  The
 * handler makes its @seq odd, smp_mb(), then reads fr_frozen; we set
 * fr_frozen, smp_mb(), then read each @seq (store buffering,
 * tools/memory-model/litmus-tests/SB+fencembonceonces.litmus: "Never" both
 * miss).  So a handler we see with an even @seq either has finished or will
 * see the freeze; one we see odd is waited for until its @seq moves.  The
 * handler runs in hardirq/NMI context and finishes in bounded time, so the
 * wait is a short spin.  (synchronize_rcu() would also wait for it, kernel/
 * rcu/tree.c: "hardware interrupt handlers ... and NMI handlers" are
 * read-side critical sections, but costs a grace period per FREEZE.)
 */
static void fr_freeze(void)
{
	int cpu;

	WRITE_ONCE(fr_frozen, true);
	smp_mb();	/* pairs with smp_mb() in fr_overflow() */
	for_each_possible_cpu(cpu) {
		struct fr_cpu *c = fr_cpus[cpu];
		u32 seq = READ_ONCE(c->seq);

		if (seq & 1) {
			while (READ_ONCE(c->seq) == seq)
				cpu_relax();
		}
	}
	smp_rmb();	/* handlers' ring writes before our copy-out; pairs with smp_wmb() */
}

static long fr_ioctl_locked(unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case FLIGHTREC_IOC_INFO:
		return fr_ioc_info(uarg);
	case FLIGHTREC_IOC_STATS:
		return fr_ioc_stats(uarg);
	case FLIGHTREC_IOC_FREEZE:
		if (arg)
			return -EINVAL;
		fr_freeze();
		return 0;
	case FLIGHTREC_IOC_THAW:
		if (arg)
			return -EINVAL;
		WRITE_ONCE(fr_frozen, false);
		return 0;
	case FLIGHTREC_IOC_READ_RING:
		return fr_ioc_read(uarg);
	case FLIGHTREC_IOC_LIST_MARKERS:
		return fr_ioc_list(uarg);
	case FLIGHTREC_IOC_READ_MARKER:
		return fr_ioc_read_marker(uarg);
	case FLIGHTREC_IOC_RELEASE_MARKER:
		if (arg >= markers ||
		    atomic_cmpxchg(&fr_markers[arg].state, FR_SLOT_READY, FR_SLOT_FREE) !=
		    FR_SLOT_READY)
			return -ENOENT;
		return 0;
	default:
		return -ENOTTY;
	}
}

static long fr_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	long ret;

	mutex_lock(&fr_lock);
	ret = fr_ioctl_locked(cmd, arg);
	mutex_unlock(&fr_lock);
	return ret;
}

/*
 * No .llseek: nonseekable_open() clears FMODE_LSEEK, and vfs_llseek() then
 * returns -ESPIPE (fs/read_write.c) on every kernel this module supports.
 * The misc device's .owner pins the module while a file is open, so rmmod
 * with a reader holding the device fails with -EBUSY.
 */
static int fr_open(struct inode *inode, struct file *file)
{
	if (!capable(CAP_SYS_ADMIN) && !perfmon_capable())
		return -EPERM;
	return nonseekable_open(inode, file);
}

static const struct file_operations fr_fops = {
	.owner = THIS_MODULE,
	.open = fr_open,
	.unlocked_ioctl = fr_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice fr_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "flightrec",
	.fops = &fr_fops,
	.mode = 0600,
};

static bool fr_valid_kb(uint kb)
{
	return kb >= 4 && kb <= (1U << 20) && is_power_of_2(kb);
}

static int __init fr_init(void)
{
	int ret;

	/* Ring sizes are powers of two: records must divide them. */
	BUILD_BUG_ON(!is_power_of_2(FR_REC) || !is_power_of_2(FR_SB_REC));
	if (!fr_valid_kb(data_ring_kb) || !fr_valid_kb(aux_ring_kb) ||
	    !fr_valid_kb(sideband_kb) || stack_bytes > FR_MAX_STACK || markers > 64 ||
	    (!freq && !period))
		return -EINVAL;
	ret = fr_pick_event();
	if (ret)
		return ret;
	fr_frozen = !autostart;

	ret = fr_alloc_cpus();
	if (ret)
		return ret;
	ret = fr_ring_alloc(&fr_sb, sideband_kb, NUMA_NO_NODE);
	if (ret)
		goto out_free_cpus;
	fr_sb_scratch = alloc_percpu(struct flightrec_sideband);
	if (!fr_sb_scratch) {
		ret = -ENOMEM;
		goto out_free_sb;
	}
	ret = fr_alloc_markers();
	if (ret)
		goto out_free_scratch;
	ret = fr_register_tps();
	if (ret)
		goto out_free_markers;
	ret = register_kprobe(&fr_mmap_kp);
	if (ret) {
		pr_err("kprobe %s: %d\n", fr_mmap_kp.symbol_name, ret);
		goto out_unregister_tps;
	}
	ret = fr_register_coredump_kp();
	if (ret)
		goto out_unregister_mmap_kp;
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "flightrec:online",
				fr_cpu_online, fr_cpu_offline);
	if (ret < 0)
		goto out_unregister_coredump_kp;
	fr_hp_state = ret;
	ret = misc_register(&fr_misc);
	if (ret)
		goto out_remove_hp;
	pr_info("recording %s, %s %lu, data %u KiB aux %u KiB per cpu%s\n",
		fr_event_type == FLIGHTREC_EVENT_CYCLES ? "cycles" : "cpu-clock",
		freq ? "freq" : "period", freq ? (unsigned long)freq : period,
		data_ring_kb, aux_ring_kb, autostart ? "" : " (frozen)");
	return 0;

out_remove_hp:
	cpuhp_remove_state(fr_hp_state);
out_unregister_coredump_kp:
	unregister_kprobe(&fr_coredump_kp);
out_unregister_mmap_kp:
	unregister_kprobe(&fr_mmap_kp);
out_unregister_tps:
	fr_unregister_tps(ARRAY_SIZE(fr_tps));
out_free_markers:
	fr_free_markers();
out_free_scratch:
	free_percpu(fr_sb_scratch);
out_free_sb:
	vfree(fr_sb.buf);
out_free_cpus:
	fr_free_cpus();
	return ret;
}

static void __exit fr_exit(void)
{
	misc_deregister(&fr_misc);
	cpuhp_remove_state(fr_hp_state);	/* releases every counter */
	unregister_kprobe(&fr_coredump_kp);
	unregister_kprobe(&fr_mmap_kp);
	fr_unregister_tps(ARRAY_SIZE(fr_tps));
	fr_free_markers();
	free_percpu(fr_sb_scratch);
	vfree(fr_sb.buf);
	fr_free_cpus();
}

module_init(fr_init);
module_exit(fr_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("flightrec: always-on per-CPU sample rings with crash markers");
