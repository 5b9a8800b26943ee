// SPDX-License-Identifier: GPL-2.0
/*
 * fr_crash.c - crash markers: when a process starts to dump core, every
 * CPU's rings are copied into a preallocated slot, so the history up to the
 * crash survives until the daemon reads it, however fast the rings turn.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

static void fr_snap_ring(struct fr_ring *rb, void *dst, u64 *first, u64 head, u64 *off, bool data)
{
	struct fr_cursor cur = { .dst = dst };
	u64 from = head > rb->size ? head - rb->size : 0;
	u64 valid;

	fr_output(rb, from, head, fr_copy_kernel, &cur);
	/* DATA: from the first whole chunk, where a record starts */
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
 * next sample.  @sn must have room for one record and one blob past its copy.
 * User memory is read with fr_copy_user_nmi(), the sample path's helper;
 * the frame words go to @scratch, a local: this runs on the crashing task's
 * stack, which usercopy hardening checks by bounds alone (check_stack_object()).
 */
static void fr_crash_record(struct fr_snap *sn, u64 time_ns, int cpu)
{
	u64 scratch[2];
	struct pt_regs *uregs;
	struct flightrec_sample *s;
	struct flightrec_aux *a;
	u16 abi;
	u32 slen;

	uregs = fr_user_regs(task_pt_regs(current), &abi);
	if (!uregs)
		return;
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
					   round_down(fr_param.stack_bytes, 8)), 8);
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
 * The crash hook is a kprobe on the entry of the core dump routine
 * (do_coredump(), renamed vfs_coredump() in 6.17; both are tried).  It runs in
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

	for (i = 0; i < fr_param.markers; i++) {
		struct fr_marker *m = &fr.markers[i];

		if (atomic_cmpxchg(&m->state, FR_SLOT_FREE, FR_SLOT_BUSY) == FR_SLOT_FREE) {
			mk = m;
			break;
		}
	}
	if (!mk) {
		atomic64_inc(&fr.markers_dropped);
		return 0;
	}
	/*
	 * Heads first, then the time: every record below a head was published
	 * before the marker's timestamp, so the history ends at the marker.
	 */
	for_each_possible_cpu(cpu) {
		/* acquire: pairs with the writer's smp_wmb() before each head */
		mk->snaps[cpu].d_end = smp_load_acquire(&fr.cpus[cpu]->data.head);
		/* likewise for the AUX head */
		mk->snaps[cpu].a_end = smp_load_acquire(&fr.cpus[cpu]->aux.head);
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

		fr_snap_ring(&fr.cpus[cpu]->data, sn->data, &sn->d_first, sn->d_end, &sn->d_off, true);
		fr_snap_ring(&fr.cpus[cpu]->aux, sn->aux, &sn->a_first, sn->a_end, &sn->a_off, false);
	}
	fr_crash_record(&mk->snaps[this_cpu], mk->m.time_ns, this_cpu);
	mk->m.id = atomic64_inc_return(&fr.marker_ids);
	atomic_set_release(&mk->state, FR_SLOT_READY);	/* slot contents before READY */
	return 0;
}

static struct kprobe fr_coredump_kp = {
	.pre_handler = fr_coredump_pre,
};

int fr_register_coredump_kp(void)
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

void fr_unregister_coredump_kp(void)
{
	unregister_kprobe(&fr_coredump_kp);
}

void fr_free_markers(void)
{
	int i, cpu;

	for (i = 0; i < fr_param.markers && fr.markers; i++) {
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
	/* Room past each copy for the crash record and its AUX blob. */
	size_t dlen = ((size_t)fr_param.data_ring_kb << 10) + FR_REC_MAX;
	size_t alen = ((size_t)fr_param.aux_ring_kb << 10) + sizeof(struct flightrec_aux) +
		      round_down(fr_param.stack_bytes, 8);
	int i, cpu;

	fr.markers = kcalloc(fr_param.markers ? fr_param.markers : 1, sizeof(*fr.markers), GFP_KERNEL);
	if (!fr.markers)
		return -ENOMEM;
	for (i = 0; i < fr_param.markers; i++) {
		struct fr_marker *mk = &fr.markers[i];

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
