// SPDX-License-Identifier: GPL-2.0
/*
 * fr_sideband.c - exec/mmap/fork/exit events into the SIDEBAND ring, a
 * non-overwriting ring the daemon drains, so that every sampled address can
 * be attributed to the file mapped there at the time.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include <linux/task_work.h>

#include "fr_internal.h"

/* Write @r at @pos (caller holds fr.sb_lock and checked the room). */
static void fr_sb_put(struct flightrec_sideband *r, u64 pos)
{
	r->seq = div_u64(pos, FR_SB_REC);
	fr_ring_put(&fr.sb, pos, r, FR_SB_REC);
	smp_wmb();	/* record before head: READ_RING reads head under the lock */
	WRITE_ONCE(fr.sb.head, pos + FR_SB_REC);
}

/*
 * A record that does not fit (the ring is full: the consumer is behind) is
 * dropped and counted.  The next record written after such a gap is preceded
 * by a FLIGHTREC_SB_LOST record with the count and the gap's first time, so
 * the consumer knows where it lacks mappings; until both fit, records keep
 * being dropped into the same gap.  The LOST record is built in this CPU's
 * fr.sb_lost under the lock, interrupts off, so no other writer shares it.
 */
static void fr_sb_emit(struct flightrec_sideband *r)
{
	unsigned long flags;
	u64 pos, need;

	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	pos = fr.sb.head;
	need = fr.sb_gap ? 2 * FR_SB_REC : FR_SB_REC;
	if (fr.sb.size - (pos - fr.sb.tail) < need) {
		if (!fr.sb_gap++)
			fr.sb_gap_time = r->time_ns;
		fr.sb_dropped++;
	} else {
		if (fr.sb_gap) {
			struct flightrec_sideband *lost = this_cpu_ptr(fr.sb_lost);

			memset(lost, 0, FR_SB_REC);
			lost->type = FLIGHTREC_SB_LOST;
			lost->time_ns = r->time_ns;
			lost->start = fr.sb_gap_time;
			lost->len = fr.sb_gap;
			fr_sb_put(lost, pos);
			pos += FR_SB_REC;
			fr.sb_gap = 0;
		}
		fr_sb_put(r, pos);
	}
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
}

static struct flightrec_sideband *fr_sb_begin(u32 type, struct task_struct *t)
{
	struct flightrec_sideband *r = this_cpu_ptr(fr.sb_scratch);

	memset(r, 0, FR_SB_REC);
	r->time_ns = ktime_get_mono_fast_ns();
	r->type = type;
	r->pid = task_tgid_nr(t);
	r->tid = task_pid_nr(t);
	return r;
}

/*
 * MMAP and EXEC records are taken where d_path() must not run: in a kprobe
 * handler and a tracepoint probe, preemption off.  d_path() can take
 * spinlock_t locks, which sleep on PREEMPT_RT: prepend_path() (fs/d_path.c)
 * falls back from its lockless walk to read_seqbegin_or_lock() with an odd
 * seq, read_seqlock_excl(), i.e. spin_lock() on rename_lock or mount_lock,
 * when a rename or mount change raced with the walk; and on PREEMPT_RT even
 * the lockless read_seqbegin() takes and drops that lock while a writer is
 * in progress (include/linux/seqlock.h, __seqprop_spinlock_sequence()).
 *
 * So the handler only takes a reference to the file and queues a task_work
 * on the current task; it runs in process context before the task returns to
 * user space (or in do_exit()), resolves the path and writes the record: the
 * record is in the ring before the task runs any of the code it mapped.
 * task_work runs the newest work first, so each work writes all of its
 * task's pending records, oldest first, in the order they were taken.  The
 * pending records live in a fixed pool; when it is full, or the task cannot
 * run task_work (a kernel thread; an exiting task), the record is written at
 * once with its inode and device but no path (FLIGHTREC_SB_PATH_TRUNC).
 */
#define FR_SB_PENDING	128

/**
 * struct fr_sb_pending - an MMAP/EXEC record waiting for its path
 * @work:  queued on @owner by task_work_add()
 * @file:  a reference to the mapped or executed file, dropped once written
 * @owner: the task that took the record; NULL once the record is written.
 *         Written only by that task; fr_sb_oldest() of any task compares it.
 * @order: taken order, for writing one task's records oldest first
 * @rec:   the record, all but its path
 *
 * A slot is in use from fr_sb_claim() until its own work has run: the bit in
 * fr_sb_used; fr_sb_inflight counts the slots in use.
 */
struct fr_sb_pending {
	struct callback_head work;
	struct file *file;
	struct task_struct *owner;
	u64 order;
	struct flightrec_sideband rec;
};

static struct fr_sb_pending fr_sb_pend[FR_SB_PENDING];
static DECLARE_BITMAP(fr_sb_used, FR_SB_PENDING);
static atomic_t fr_sb_inflight = ATOMIC_INIT(0);
static atomic64_t fr_sb_order = ATOMIC64_INIT(0);

static struct fr_sb_pending *fr_sb_claim(void)
{
	int i;

	for (i = 0; i < FR_SB_PENDING; i++)
		if (!test_bit(i, fr_sb_used) && !test_and_set_bit_lock(i, fr_sb_used)) {
			atomic_inc(&fr_sb_inflight);
			return &fr_sb_pend[i];
		}
	return NULL;
}

static void fr_sb_release(struct fr_sb_pending *p)
{
	clear_bit_unlock(p - fr_sb_pend, fr_sb_used);
	if (atomic_dec_and_test(&fr_sb_inflight))
		wake_up_var(&fr_sb_inflight);
}

/* The oldest record @t took and has not written yet, or NULL. */
static struct fr_sb_pending *fr_sb_oldest(struct task_struct *t)
{
	struct fr_sb_pending *best = NULL;
	int i;

	for_each_set_bit(i, fr_sb_used, FR_SB_PENDING) {
		struct fr_sb_pending *p = &fr_sb_pend[i];

		if (READ_ONCE(p->owner) == t && (!best || p->order < best->order))
			best = p;
	}
	return best;
}

/* Process context: d_path() may sleep here. */
static void fr_sb_write_pending(struct fr_sb_pending *p)
{
	struct flightrec_sideband *r = &p->rec;
	char *s = d_path(&p->file->f_path, r->path, sizeof(r->path));

	if (IS_ERR(s)) {
		r->flags |= FLIGHTREC_SB_PATH_TRUNC;
		r->path[0] = '\0';
	} else {
		memmove(r->path, s, strlen(s) + 1);
	}
	fput(p->file);
	p->file = NULL;
	WRITE_ONCE(p->owner, NULL);
	fr_sb_emit(r);
}

static void fr_sb_work(struct callback_head *work)
{
	struct fr_sb_pending *p;

	while ((p = fr_sb_oldest(current)))
		fr_sb_write_pending(p);
	fr_sb_release(container_of(work, struct fr_sb_pending, work));
}

/* Atomic context: @r, taken by current about @file, is written later or now without a path. */
static void fr_sb_file(struct flightrec_sideband *r, struct file *file)
{
	struct inode *inode = file_inode(file);
	struct fr_sb_pending *p = NULL;

	r->ino = inode->i_ino;
	r->dev = new_encode_dev(inode->i_sb->s_dev);
	if (!(current->flags & PF_KTHREAD))
		p = fr_sb_claim();
	if (p) {
		memcpy(&p->rec, r, FR_SB_REC);
		p->order = atomic64_inc_return(&fr_sb_order);
		init_task_work(&p->work, fr_sb_work);
		if (!task_work_add(current, &p->work, FR_TWA_RESUME)) {
			p->file = get_file(file);
			WRITE_ONCE(p->owner, current);
			return;
		}
		fr_sb_release(p);
	}
	r->flags |= FLIGHTREC_SB_PATH_TRUNC;
	fr_sb_emit(r);
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
}

static void fr_tp_fork(void *data, struct task_struct *parent, struct task_struct *child)
{
	struct flightrec_sideband *r = fr_sb_begin(FLIGHTREC_SB_FORK, child);

	r->ppid = task_tgid_nr(parent);
	strscpy(r->path, child->comm, sizeof(r->path));
	fr_sb_emit(r);
}

static void fr_tp_exit(FR_TP_EXIT_ARGS(p))
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

int fr_sideband_register(void)
{
	int ret = fr_register_tps();

	if (ret)
		return ret;
	ret = register_kprobe(&fr_mmap_kp);
	if (ret) {
		pr_err("kprobe %s: %d\n", fr_mmap_kp.symbol_name, ret);
		fr_unregister_tps(ARRAY_SIZE(fr_tps));
	}
	return ret;
}

void fr_sideband_unregister(void)
{
	unregister_kprobe(&fr_mmap_kp);
	fr_unregister_tps(ARRAY_SIZE(fr_tps));
	/*
	 * Queued works run this module's code and write into fr.sb: wait for
	 * them.  Each runs before its task next returns to user space or exits,
	 * so this waits longer only for a task stopped in between (a tracee at
	 * its exec event).
	 */
	wait_var_event(&fr_sb_inflight, !atomic_read(&fr_sb_inflight));
}
