// SPDX-License-Identifier: GPL-2.0
/*
 * fr_crash.c - crash markers: when a process starts to dump core, every
 * CPU's rings are copied into a preallocated slot, so the history up to the
 * crash survives until the daemon reads it, however fast the rings turn.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

/*
 * fr_snap_ring - copy @rb's bytes below @head (read by the crash hook) to
 * @dst; *@first gets the first position a reader may keep, *@off its offset
 * in @dst.  A wrapped DATA ring's oldest byte, head - size, lies inside some
 * record: the copy starts at the next chunk boundary, where a record starts
 * (fr_data_begin()), as READ_RING does.  Without that, a copy made before
 * the CPU's next sample (the ring's reserve still at @head, so
 * fr_data_valid() has nothing to round up) began mid-record and the CPU's
 * whole history, the crash record too, failed to parse.  That happened on
 * PREEMPT_RT, where the high-priority kworker preempts the crashing task and
 * copies within a sample period of the hook; on a voluntary-preemption
 * kernel it waits for the task to sleep in the core dump, samples later.
 */
static void fr_snap_ring(struct fr_ring *rb, void *dst, u64 *first, u64 head, u64 *off, bool data)
{
	struct fr_cursor cur = { .dst = dst };
	u64 from = head > rb->size ? head - rb->size : 0;
	u64 valid;

	if (data)
		from = round_up(from, FR_CHUNK);
	fr_output(rb, from, head, fr_copy_kernel, &cur);
	/* DATA: from the first whole chunk not overwritten since the hook */
	valid = fr_data_valid(rb, from, head, data);
	*first = valid;
	*off = valid - from;
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
 * next sample.  It follows the live writer's chunk rule (fr_data_begin()):
 * when less than FR_REC_MAX bytes are left in the chunk at the head, a
 * FLIGHTREC_REC_PAD record fills them and the crash record opens the next
 * chunk, so the marker's DATA history stays walkable from any chunk start.
 * @sn must have room for a pad, one record and one blob past its copy
 * (2 * FR_REC_MAX DATA bytes: a pad is shorter than FR_REC_MAX).
 * User memory is read with fr_copy_user_nmi(), the sample path's helper;
 * the frame words go to @scratch, the slot's own direct-map page (the hook
 * owns the slot while it is BUSY; fr_copy_user_nmi() takes no stack address).
 * At most FR_CRASH_STACK bytes of user stack are copied: this runs with
 * preemption off, interrupts off under the tracepoint (module/README.md,
 * "Work per crash", has the measured cost).
 */
static void fr_crash_record(struct fr_snap *sn, u64 time_ns, int cpu, void *scratch)
{
	struct pt_regs *uregs;
	struct flightrec_sample *s;
	struct flightrec_aux *a;
	u16 abi;
	u32 slen, room;

	uregs = fr_user_regs(task_pt_regs(current), &abi);
	if (!uregs)
		return;
	room = FR_CHUNK - (sn->d_end & (FR_CHUNK - 1));
	if (room < FR_REC_MAX) {
		s = sn->data + sn->d_off + (sn->d_end - sn->d_first);
		s->size = room;
		s->type = FLIGHTREC_REC_PAD;
		sn->d_end += room;
	}
	s = sn->data + sn->d_off + (sn->d_end - sn->d_first);
	a = sn->aux + sn->a_off + (sn->a_end - sn->a_first);
	memset(s, 0, FR_HDR);
	s->type = FLIGHTREC_REC_SAMPLE;
	s->time_ns = time_ns;
	s->ip = instruction_pointer(uregs);
	s->seq = sn->d_end;
	s->cpu = cpu;
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = FLIGHTREC_MODE_USER;
	s->flags = FLIGHTREC_SAMPLE_CRASH | FLIGHTREC_SAMPLE_HAS_AUX;
	s->abi = abi;
	fr_user_frames(s, uregs, abi, scratch);

	memset(a, 0, sizeof(*a));
	slen = round_down(fr_copy_user_nmi(a + 1, user_stack_pointer(uregs),
					   round_down(fr_crash_stack_bytes(), 8)), 8);
	a->seq = s->seq;
	a->len = sizeof(*a) + slen;
	a->stack_len = slen;
	fr_fill_regs(a, uregs, abi);
	s->aux_pos = sn->a_end;
	s->aux_len = a->len;
	s->size = FR_HDR + 8 * s->nr_uframes;
	sn->d_end += s->size;
	sn->a_end += a->len;
}

/*
 * fr_markers_per_uid - how many slots one user's crashes may hold at once.
 * The rule (module/README.md): markers_per_uid if set (at most markers),
 * else markers - 1 when there are two slots or more, else 1; so by default
 * one user's crash loop always leaves a slot for another user's crash.
 */
uint fr_markers_per_uid(void)
{
	if (fr_param.markers_per_uid)
		return min(fr_param.markers_per_uid, fr_param.markers);
	return fr_param.markers > 1 ? fr_param.markers - 1 : 1;
}

/*
 * Claim a slot for the current process's crash, FREE->BUSY under fr.mk_lock,
 * or return NULL.  One crash, one marker: threads of one process that fault
 * together each reach the hook (each dequeues its own synchronous signal in
 * get_signal() before any of them has zapped the others in
 * coredump_wait(), fs/coredump.c), so a process that already holds a slot,
 * identified by its tgid and its leader's start time (a reused pid is another
 * process), gets no second one.  A user already holding fr_markers_per_uid()
 * slots gets none either.  The scan is bounded by the slot count (<= 64).
 */
static struct fr_marker *fr_claim_slot(void)
{
	pid_t tgid = task_tgid_nr(current);
	u64 start = current->group_leader->start_time;
	kuid_t uid = current_uid();
	struct fr_marker *mk = NULL;
	unsigned long flags;
	uint i, mine = 0;

	raw_spin_lock_irqsave(&fr.mk_lock, flags);
	for (i = 0; i < fr_param.markers; i++) {
		struct fr_marker *m = &fr.markers[i];

		if (atomic_read(&m->state) == FR_SLOT_FREE) {
			if (!mk)
				mk = m;
			continue;
		}
		if (m->tgid == tgid && m->start_time == start) {
			WRITE_ONCE(fr.markers_coalesced, fr.markers_coalesced + 1);
			raw_spin_unlock_irqrestore(&fr.mk_lock, flags);
			return NULL;
		}
		if (uid_eq(m->uid, uid))
			mine++;
	}
	if (mk && mine >= fr_markers_per_uid()) {
		WRITE_ONCE(fr.markers_uid_limited, fr.markers_uid_limited + 1);
		mk = NULL;
	}
	if (mk) {
		mk->tgid = tgid;
		mk->start_time = start;
		mk->uid = uid;
		/* Only claims write FREE->BUSY, all under mk_lock: no cmpxchg needed. */
		atomic_set(&mk->state, FR_SLOT_BUSY);
	} else {
		atomic64_inc(&fr.markers_dropped);
	}
	raw_spin_unlock_irqrestore(&fr.mk_lock, flags);
	return mk;
}

/*
 * fr_take_marker - the crash hook's work, in the crashing thread, with
 * preemption off (kprobe) or interrupts off and the sighand lock held
 * (tracepoint).  Bounded and small: claim a slot (one pass over at most 64
 * slots), read every possible CPU's two ring heads, take the time, and build
 * the crash record (a frame-pointer walk and at most stack_bytes of user
 * stack, the same work as one sample).  The rings are not copied here: that
 * is up to (data_ring_kb + aux_ring_kb) KiB per online CPU, too much to do
 * with interrupts off on a machine with hundreds of CPUs.  fr_marker_work()
 * copies them right after, in process context; a record overwritten in
 * between is detected by fr_snap_ring() (the ring's @reserve) and left out,
 * so the marker's history still ends exactly at the heads read here.
 * Waking poll() readers is also left to the work: wake_up() takes the
 * waitqueue's spinlock_t, which on PREEMPT_RT sleeps and so may not be taken
 * in a tracepoint probe (preemption off); queue_work() takes only raw locks.
 */
static void fr_take_marker(int signo)
{
	u64 t0 = ktime_get_mono_fast_ns();
	int cpu, this_cpu = smp_processor_id();
	struct fr_marker *mk = fr_claim_slot();

	if (!mk)
		return;
	/*
	 * Heads first, then the time: every record below a head was published
	 * before the marker's timestamp, so the history ends at the marker.
	 */
	for_each_possible_cpu(cpu) {
		struct fr_snap *sn = &mk->snaps[cpu];

		/* acquire: pairs with the writer's smp_wmb() before each head */
		sn->d_end = smp_load_acquire(&fr.cpus[cpu]->data.head);
		/* likewise for the AUX head */
		sn->a_end = smp_load_acquire(&fr.cpus[cpu]->aux.head);
		sn->copy = READ_ONCE(fr.cpus[cpu]->online) || cpu == this_cpu;
	}
	memset(&mk->m, 0, sizeof(mk->m));
	mk->m.time_ns = ktime_get_mono_fast_ns();
	mk->m.slot = mk - fr.markers;
	mk->m.pid = task_tgid_nr(current);
	mk->m.tid = task_pid_nr(current);
	mk->m.signal = signo;
	mk->m.nr_cpus = nr_cpu_ids;
	mk->m.cpu = this_cpu;
	/* The crash record goes at this CPU's DATA/AUX heads; the work appends it. */
	mk->crash.d_first = mk->snaps[this_cpu].d_end;
	mk->crash.d_end = mk->crash.d_first;
	mk->crash.a_first = mk->snaps[this_cpu].a_end;
	mk->crash.a_end = mk->crash.a_first;
	mk->crash.d_off = 0;
	mk->crash.a_off = 0;
	fr_crash_record(&mk->crash, mk->m.time_ns, this_cpu, mk->scratch);
	mk->m.id = atomic64_inc_return(&fr.marker_ids);
	mk->m.hook_ns = min_t(u64, ktime_get_mono_fast_ns() - t0, U32_MAX);
	mk->hook_t0 = t0;
	queue_work(system_highpri_wq, &mk->work);
}

/*
 * The copy half of a crash marker, in process context (a high-priority
 * kworker) right after the hook: each CPU online at the crash has its DATA
 * and AUX rings copied up to the heads the hook read, the crash record is
 * appended to the crashing CPU's copy, and the slot becomes READY.
 */
static void fr_marker_work(struct work_struct *work)
{
	struct fr_marker *mk = container_of(work, struct fr_marker, work);
	u64 t0 = ktime_get_mono_fast_ns(), bytes, dlen, alen;
	struct fr_snap *sn;
	int cpu;

	bytes = 0;
	for_each_possible_cpu(cpu) {
		sn = &mk->snaps[cpu];
		if (!sn->copy) {
			sn->d_first = sn->d_end;
			sn->a_first = sn->a_end;
			sn->d_off = 0;
			sn->a_off = 0;
			continue;
		}
		fr_snap_ring(&fr.cpus[cpu]->data, sn->data, &sn->d_first, sn->d_end, &sn->d_off,
			     true);
		fr_snap_ring(&fr.cpus[cpu]->aux, sn->aux, &sn->a_first, sn->a_end, &sn->a_off,
			     false);
		bytes += sn->d_off + (sn->d_end - sn->d_first) + sn->a_off +
			 (sn->a_end - sn->a_first);
		cond_resched();
	}
	sn = &mk->snaps[mk->m.cpu];
	dlen = mk->crash.d_end - mk->crash.d_first;
	alen = mk->crash.a_end - mk->crash.a_first;
	memcpy(sn->data + sn->d_off + (sn->d_end - sn->d_first), mk->crash.data, dlen);
	memcpy(sn->aux + sn->a_off + (sn->a_end - sn->a_first), mk->crash.aux, alen);
	sn->d_end += dlen;
	sn->a_end += alen;
	mk->m.copied_bytes = bytes + dlen + alen;
	mk->m.copy_ns = min_t(u64, ktime_get_mono_fast_ns() - t0, U32_MAX);
	atomic_set_release(&mk->state, FR_SLOT_READY);	/* slot contents before READY */
	atomic64_inc(&fr.ready_seq);
	wake_up_interruptible_all(&fr.marker_wq);
}

/*
 * The kprobe hook (fallback): the entry of the core dump routine
 * (do_coredump(), renamed vfs_coredump() in 6.17; both are tried unless
 * coredump_symbol names one).  It runs in the crashing thread, once per
 * thread that reaches it, before the other threads are zapped and whether or
 * not RLIMIT_CORE lets a file be written, with preemption off (interrupts
 * may be on: optimized and ftrace-based probes, see
 * Documentation/trace/kprobes.rst).
 */
static int fr_coredump_pre(struct kprobe *p, struct pt_regs *regs)
{
	const kernel_siginfo_t *si = (void *)regs_get_kernel_argument(regs, 0);

	fr_take_marker(si ? si->si_signo : 0);
	return 0;
}

static struct kprobe fr_coredump_kp;

/* The symbol the kprobe hook sits on, for the load message. */
const char *fr_coredump_symbol(void)
{
	return fr_coredump_kp.symbol_name;
}

static int fr_register_kp(void)
{
	static const char * const names[] = { "vfs_coredump", "do_coredump" };
	int i, ret = -ENOENT;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		const char *name = fr_param.coredump_symbol[0] ?
				   fr_param.coredump_symbol : names[i];

		memset(&fr_coredump_kp, 0, sizeof(fr_coredump_kp));
		fr_coredump_kp.pre_handler = fr_coredump_pre;
		fr_coredump_kp.symbol_name = name;
		ret = register_kprobe(&fr_coredump_kp);
		if (!ret)
			return 0;
		pr_warn("kprobe %s: %d\n", name, ret);
		if (fr_param.coredump_symbol[0])
			break;
	}
	return ret;
}

/*
 * The tracepoint hook (preferred: a stable interface, no symbol names).
 * signal_deliver (include/trace/events/signal.h, 6.1: (int sig, struct
 * kernel_siginfo *info, struct k_sigaction *ka)) fires in get_signal()
 * (kernel/signal.c) for each signal the thread dequeues, handled or not,
 * with sighand->siglock held and interrupts off, after ptrace had its say.
 * The crash is the case where get_signal() goes on to do_coredump(): the
 * default action (SIG_DFL) of a signal whose default is a core dump
 * (sig_kernel_coredump()), unless the task is an unkillable init
 * (SIGNAL_UNKILLABLE: get_signal() skips the signal).  Threads killed by
 * the dump itself get SIGKILL there, which is filtered out.
 */
static void fr_tp_signal_deliver(void *data, int sig, struct kernel_siginfo *info,
				 struct k_sigaction *ka)
{
	if (ka->sa.sa_handler != SIG_DFL || !sig_kernel_coredump(sig))
		return;
	if (current->signal->flags & SIGNAL_UNKILLABLE)
		return;
	fr_take_marker(sig);
}

static struct tracepoint *fr_signal_tp;

static void fr_find_signal_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "signal_deliver"))
		fr_signal_tp = tp;
}

static int fr_register_tp(void)
{
	for_each_kernel_tracepoint(fr_find_signal_tp, NULL);
	if (!fr_signal_tp)
		return -ENOENT;
	return tracepoint_probe_register(fr_signal_tp, fr_tp_signal_deliver, NULL);
}

/*
 * fr_register_crash_hook - attach the crash hook crash_hook= asks for: auto
 * (the tracepoint, else the kprobe), tracepoint, kprobe or none.  Failing to
 * attach is not fatal: the module records without crash markers, and STATS
 * says so (crash_hook NONE, crash_hook_error the last error).
 */
int fr_register_crash_hook(void)
{
	bool any = !strcmp(fr_param.crash_hook, "auto");
	bool tp = any || !strcmp(fr_param.crash_hook, "tracepoint");
	bool kp = any || !strcmp(fr_param.crash_hook, "kprobe");
	int ret = 0;

	fr.hook = FLIGHTREC_HOOK_NONE;
	if (!tp && !kp && strcmp(fr_param.crash_hook, "none"))
		return -EINVAL;
	if (!fr_param.markers)
		return 0;
	if (tp) {
		ret = fr_register_tp();
		if (!ret) {
			fr.hook = FLIGHTREC_HOOK_TRACEPOINT;
			return 0;
		}
		pr_warn("tracepoint signal_deliver: %d\n", ret);
	}
	if (kp) {
		ret = fr_register_kp();
		if (!ret) {
			fr.hook = FLIGHTREC_HOOK_KPROBE;
			return 0;
		}
	}
	fr.hook_error = ret;
	if (ret)
		pr_warn("no crash hook (%d): recording without crash markers\n", ret);
	return 0;
}

void fr_unregister_crash_hook(void)
{
	if (fr.hook == FLIGHTREC_HOOK_TRACEPOINT) {
		tracepoint_probe_unregister(fr_signal_tp, fr_tp_signal_deliver, NULL);
		tracepoint_synchronize_unregister();
	} else if (fr.hook == FLIGHTREC_HOOK_KPROBE) {
		unregister_kprobe(&fr_coredump_kp);
	}
	fr.hook = FLIGHTREC_HOOK_NONE;
}

void fr_free_markers(void)
{
	int i, cpu;

	for (i = 0; i < fr_param.markers && fr.markers; i++) {
		/* The hook is gone: no new work; wait for a copy in flight. */
		if (fr.markers[i].work.func)
			flush_work(&fr.markers[i].work);
		vfree(fr.markers[i].crash.data);
		vfree(fr.markers[i].crash.aux);
		if (fr.markers[i].scratch)
			free_page((unsigned long)fr.markers[i].scratch);
		if (!fr.markers[i].snaps)
			continue;
		for_each_possible_cpu(cpu) {
			vfree(fr.markers[i].snaps[cpu].data);
			vfree(fr.markers[i].snaps[cpu].aux);
		}
		kfree(fr.markers[i].snaps);
	}
	kfree(fr.markers);
}

int fr_alloc_markers(void)
{
	/* Room past each copy for a pad, the crash record and its AUX blob. */
	size_t dlen = ((size_t)fr_param.data_ring_kb << 10) + 2 * FR_REC_MAX;
	size_t alen = ((size_t)fr_param.aux_ring_kb << 10) + sizeof(struct flightrec_aux) +
		      round_down(fr_param.stack_bytes, 8);
	/* the crash record's AUX blob: registers and at most FR_CRASH_STACK of stack */
	size_t blob = sizeof(struct flightrec_aux) + round_down(fr_crash_stack_bytes(), 8);
	int i, cpu;

	fr.markers = kcalloc(fr_param.markers ? fr_param.markers : 1, sizeof(*fr.markers),
			     GFP_KERNEL);
	if (!fr.markers)
		return -ENOMEM;
	for (i = 0; i < fr_param.markers; i++) {
		struct fr_marker *mk = &fr.markers[i];
		/* direct map, order 0: see fr_copy_user_nmi() */
		struct page *pg = alloc_page(GFP_KERNEL | __GFP_ZERO);

		mk->scratch = pg ? page_address(pg) : NULL;
		INIT_WORK(&mk->work, fr_marker_work);
		/* zeroed: a pad's bytes past its header reach user space */
		mk->crash.data = vzalloc(2 * FR_REC_MAX);
		mk->crash.aux = vmalloc(blob);
		mk->snaps = kcalloc(nr_cpu_ids, sizeof(*mk->snaps), GFP_KERNEL);
		if (!mk->snaps || !mk->crash.data || !mk->crash.aux || !mk->scratch)
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
