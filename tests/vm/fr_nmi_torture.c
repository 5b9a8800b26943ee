// SPDX-License-Identifier: GPL-2.0
/*
 * fr_nmi_torture.ko - TEST ONLY: runs flightrec.ko's real
 * sample function from NMI context, which our PMU-less QEMU guests otherwise
 * never reach.  Each CPU's hard hrtimer, rate_hz times a second, sends an
 * NMI to itself and one to every other online CPU; the NMI handler passes
 * the interrupted registers (the pt_regs an NMI handler is given:
 * arch/x86/kernel/nmi.c, nmi_handle()) to flightrec_test_sample(), which
 * only the test build of flightrec.ko has (tests/vm/fr_test_hooks.c), and
 * which refuses unless it was loaded with test_nmi=1.
 *
 * Why both: an NMI sent to another vCPU of a TCG guest arrives only when the
 * host runs that vCPU's thread, so on a loaded host the cross-CPU NMIs reach
 * ~100 a second; they land anywhere (user code, vmalloc, fork, ...).  The
 * self-NMI arrives at once (the ICR write raises it on the sending vCPU), so
 * it is the one that keeps the rate: it interrupts the timer interrupt, whose
 * kernel stack the unwinder walks through the IRQ stack back into the
 * interrupted task, and flightrec takes the user registers from
 * task_pt_regs().  A vCPU the host did not run misses timer periods
 * (hrtimer_forward_now() returns how many); the tick owes one self-NMI per
 * period and pays at most burst (128) of them per tick, one after another
 * (each waits, bounded, for the last to be handled, so they do not merge; one
 * not handled in time ends the tick's burst), and forgets a debt older than
 * 100 ms.  Under a starved vCPU the self-NMIs thus come in bursts, each
 * sampling the timer interrupt's context again.
 *
 * One kernel thread per CPU vmallocs and vfrees in a loop meanwhile, so NMIs
 * land inside the vmap code (user space drives fork/exec/exit, mmap/munmap,
 * FREEZE/READ/THAW and crashes: see fr_vm_test nmi).
 * /sys/module/fr_nmi_torture/parameters/stats reports, per CPU, the NMIs
 * sent to it, handled, taken in user mode and refused by flightrec, the
 * vmalloc loops done, the handler's time, the timer ticks and the self-NMIs
 * among those sent.
 */
#define pr_fmt(fmt) "fr_nmi_torture: " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/vmalloc.h>
#include <linux/version.h>
#include <asm/apic.h>
#include <asm/nmi.h>

int flightrec_test_sample(struct pt_regs *regs);

static uint rate_hz = 4000;
module_param(rate_hz, uint, 0444);
MODULE_PARM_DESC(rate_hz, "timer periods per second: a self-NMI for each, a cross-CPU NMI per tick");
static uint burst = 128;
module_param(burst, uint, 0444);
MODULE_PARM_DESC(burst, "most self-NMIs one tick sends to pay for missed periods");
static bool vmalloc_storm = true;
module_param(vmalloc_storm, bool, 0444);
MODULE_PARM_DESC(vmalloc_storm, "one kernel thread per CPU vmallocs/vfrees in a loop");

/*
 * struct nt_cpu - one CPU's torture state.  @sent counts the NMIs sent to it
 * (by itself and by other CPUs' timers), @nmis the NMIs its handler claimed.  x86 latches only one
 * NMI while another is being handled, so two sent close together may arrive
 * as one: arrivals never outnumber sends.  The handler therefore claims an
 * NMI iff fewer were claimed than sent (anything else is not ours, and ours
 * never shows up as an "unknown reason" NMI); after a stop, sent - nmis is
 * the number that merged.  @ns is the time spent in the handler's claimed
 * runs.  @ticks counts the timer's runs, @self the self-NMIs among @sent,
 * @owed the self-NMIs missed periods still owe.  @nmis, @user, @refused and
 * @ns are written only by this CPU's NMI handler, @ticks, @self and @owed by
 * its timer, @vm_loops by its vmalloc thread; stats reads them racily.
 */
struct nt_cpu {
	struct hrtimer timer;
	struct task_struct *vm_thread;
	atomic64_t sent;
	u64 nmis;
	u64 user;
	u64 refused;
	u64 ns;
	u64 vm_loops;
	u64 ticks;
	u64 self;
	u64 owed;
};

static DEFINE_PER_CPU(struct nt_cpu, nt);
static u64 nt_period_ns;
static int nt_last_err;

static int nt_nmi(unsigned int type, struct pt_regs *regs)
{
	struct nt_cpu *c = this_cpu_ptr(&nt);
	u64 t0;
	int err;

	if (c->nmis >= atomic64_read(&c->sent))
		return NMI_DONE;	/* not ours */
	t0 = ktime_get_mono_fast_ns();
	err = flightrec_test_sample(regs);
	if (err) {
		c->refused++;
		WRITE_ONCE(nt_last_err, err);
	}
	if (user_mode(regs))
		c->user++;
	c->ns += ktime_get_mono_fast_ns() - t0;
	/* Counters before @nmis: a stop that saw nmis == sent reads them final. */
	smp_store_release(&c->nmis, c->nmis + 1);
	return NMI_HANDLED;
}

/*
 * Send one NMI to this CPU and wait (bounded: 1 ms) until a handler run
 * claimed one, so the next self-NMI cannot merge with it.  Return: whether
 * one was claimed in time.  Called with
 * interrupts off (the hard hrtimer), which do not hold off an NMI.  A
 * cross-CPU NMI arriving meanwhile can end the wait early or merge with ours:
 * the bookkeeping counts either as sent and not claimed, never wrongly.
 */
static bool nt_self_nmi(struct nt_cpu *c, int me)
{
	u64 before = smp_load_acquire(&c->nmis);
	int i;

	atomic64_inc_return(&c->sent);	/* fully ordered: counted before the IPI */
	c->self++;
	/*
	 * By destination ID, not apic->send_IPI_self(): x2apic's send_IPI_self
	 * writes the SELF IPI register, which has no NMI delivery mode
	 * (arch/x86/kernel/apic/x2apic_phys.c, x2apic_send_IPI_self()); the
	 * ICR path turns NMI_VECTOR into APIC_DM_NMI in both modes
	 * (arch/x86/kernel/apic/local.h, __prepare_ICR()).
	 */
	apic->send_IPI(me, NMI_VECTOR);
	for (i = 0; i < 1000; i++) {
		if (smp_load_acquire(&c->nmis) != before)
			return true;
		udelay(1);
	}
	return false;
}

static enum hrtimer_restart nt_tick(struct hrtimer *t)
{
	struct nt_cpu *c = this_cpu_ptr(&nt);
	int cpu, me = smp_processor_id();
	u64 periods, n;

	c->ticks++;
	for_each_online_cpu(cpu) {
		if (cpu == me)
			continue;
		/* Fully ordered (value-returning atomic): counted before the IPI. */
		atomic64_inc_return(&per_cpu(nt, cpu).sent);
		apic->send_IPI(cpu, NMI_VECTOR);
	}
	periods = hrtimer_forward_now(t, ns_to_ktime(nt_period_ns));
	c->owed = min_t(u64, c->owed + max_t(u64, periods, 1), rate_hz / 10 + 1);
	for (n = 0; n < burst && c->owed; n++) {
		c->owed--;
		if (!nt_self_nmi(c, me))
			break;
	}
	return HRTIMER_RESTART;
}

static void nt_start_timer(void *unused)
{
	hrtimer_start(this_cpu_ptr(&nt.timer), ns_to_ktime(nt_period_ns),
		      HRTIMER_MODE_REL_PINNED_HARD);
}

static int nt_vm_loop(void *data)
{
	struct nt_cpu *c = data;

	while (!kthread_should_stop()) {
		size_t len = PAGE_SIZE * (1 + get_random_u32() % 64);
		char *p = vmalloc(len);

		if (p) {
			p[0] = 1;
			p[len - 1] = 1;
			vfree(p);
		}
		WRITE_ONCE(c->vm_loops, c->vm_loops + 1);
		cond_resched();
	}
	return 0;
}

static int nt_stats_get(char *buf, const struct kernel_param *kp)
{
	int cpu, n = 0;

	n += scnprintf(buf + n, PAGE_SIZE - n, "time_ns %llu last_err %d\n",
		       ktime_get_ns(), READ_ONCE(nt_last_err));
	for_each_online_cpu(cpu) {
		struct nt_cpu *c = per_cpu_ptr(&nt, cpu);

		n += scnprintf(buf + n, PAGE_SIZE - n,
			       "cpu %d sent %llu nmis %llu user %llu refused %llu vmalloc %llu ns %llu ticks %llu self %llu\n",
			       cpu, (u64)atomic64_read(&c->sent), READ_ONCE(c->nmis),
			       READ_ONCE(c->user), READ_ONCE(c->refused), READ_ONCE(c->vm_loops), READ_ONCE(c->ns),
			       READ_ONCE(c->ticks), READ_ONCE(c->self));
	}
	return n;
}

static const struct kernel_param_ops nt_stats_ops = { .get = nt_stats_get };
module_param_cb(stats, &nt_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, "per-CPU NMI counts (read only)");

static void nt_nop(void *unused)
{
}

/*
 * Stop sending, then make sure no NMI we sent can still be on its way, so
 * none arrives after the handler is gone and the stats read after a stop are
 * final: one that merged with another never arrives (stats shows sent >
 * nmis).  hrtimer_cancel() waits for a running tick, whose ICR writes are
 * then done; an IPI sent after that reaches each CPU after our NMIs, which it
 * takes first (an NMI outranks maskable interrupts: Intel SDM vol. 3, 6.9;
 * QEMU's x86_cpu_pending_interrupt() checks CPU_INTERRUPT_NMI before
 * CPU_INTERRUPT_HARD), so on_each_cpu() returning means they were handled.
 * The short bounded wait after it is only a backstop.  (Waiting for nmis ==
 * sent alone would always last its whole bound once one NMI merged.)
 */
static void nt_stop_timers(void)
{
	int cpu, i;

	for_each_possible_cpu(cpu)
		hrtimer_cancel(per_cpu_ptr(&nt.timer, cpu));
	on_each_cpu(nt_nop, NULL, 1);
	for (i = 0; i < 10; i++) {
		bool busy = false;

		for_each_online_cpu(cpu) {
			struct nt_cpu *c = per_cpu_ptr(&nt, cpu);

			busy |= smp_load_acquire(&c->nmis) != atomic64_read(&c->sent);
		}
		if (!busy)
			break;
		mdelay(1);
	}
}

/* Writing anything to the stop parameter stops the NMIs (the stats stay readable). */
static int nt_stop_set(const char *val, const struct kernel_param *kp)
{
	nt_stop_timers();
	return 0;
}

static const struct kernel_param_ops nt_stop_ops = { .set = nt_stop_set };
module_param_cb(stop, &nt_stop_ops, NULL, 0200);
MODULE_PARM_DESC(stop, "write 1: stop sending NMIs");

static void nt_stop(void)
{
	int cpu;

	nt_stop_timers();
	unregister_nmi_handler(NMI_LOCAL, "fr_nmi_torture");
	for_each_possible_cpu(cpu) {
		struct nt_cpu *c = per_cpu_ptr(&nt, cpu);

		if (c->vm_thread)
			kthread_stop(c->vm_thread);
		c->vm_thread = NULL;
	}
}

static int __init nt_init(void)
{
	int cpu, ret;

	if (!rate_hz || rate_hz > 100000 || burst > 1024)
		return -EINVAL;
	nt_period_ns = NSEC_PER_SEC / rate_hz;
	for_each_possible_cpu(cpu) {
		struct nt_cpu *c = per_cpu_ptr(&nt, cpu);

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
		hrtimer_setup(&c->timer, nt_tick, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
#else
		hrtimer_init(&c->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
		c->timer.function = nt_tick;
#endif
	}
	ret = register_nmi_handler(NMI_LOCAL, nt_nmi, 0, "fr_nmi_torture");
	if (ret)
		return ret;
	if (vmalloc_storm) {
		for_each_online_cpu(cpu) {
			struct task_struct *t;

			t = kthread_create(nt_vm_loop, per_cpu_ptr(&nt, cpu), "fr_nt_vm/%d", cpu);
			if (IS_ERR(t)) {
				nt_stop();
				return PTR_ERR(t);
			}
			kthread_bind(t, cpu);
			per_cpu_ptr(&nt, cpu)->vm_thread = t;
			wake_up_process(t);
		}
	}
	on_each_cpu(nt_start_timer, NULL, 1);
	pr_info("NMIs at %u Hz: each CPU to itself (up to %u a tick) and to every other\n",
		rate_hz, burst);
	return 0;
}

static void __exit nt_exit(void)
{
	nt_stop();
}

module_init(nt_init);
module_exit(nt_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TEST ONLY: flightrec's sample function from NMI context under a vmalloc storm");
