// SPDX-License-Identifier: GPL-2.0
/*
 * fr_test_hooks.c - the test entry points of flightrec.ko, compiled only into
 * the test build of the module (tests/vm/run_vm_tests.sh and build_flavours.sh
 * copy this file next to module/'s sources and build with FR_TEST_HOOKS=y;
 * module/Kbuild names it only then).  The module DKMS or a plain make builds
 * has none of them: no parameter, no exported symbol.
 *
 * - test_nmi=1 and flightrec_test_sample(): the NMI torture driver
 *   (tests/vm/fr_nmi_torture.c) runs the real sample function,
 *   fr_record_sample(), from an NMI handler with the interrupted registers,
 *   as a PMU overflow does on hardware (our QEMU guests have no PMU).  With
 *   test_nmi=1 the module creates no counters at all, so the NMI handler is
 *   the one writer of each CPU's rings, as the cycles counter's overflow
 *   handler is on hardware (NMIs do not nest, so a CPU's writer never
 *   interrupts itself).
 * - test_fail_cpu=N: that CPU's counter fails to open (-ENODEV).
 * - test_panic=1 and panic_test_capture: a write runs the panic notifier's
 *   body now.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

static bool fr_test_nmi;
module_param_named(test_nmi, fr_test_nmi, bool, 0444);
MODULE_PARM_DESC(test_nmi, "TESTS ONLY: no counters; samples come from flightrec_test_sample() in NMI");

/*
 * The counter of this CPU fails to open (-ENODEV, as on a CPU whose PMU is
 * missing), at load and whenever the CPU comes online; -1: none.  Writable,
 * so that a test can let the CPU's counter open again.
 */
static int fr_test_fail_cpu = -1;
module_param_named(test_fail_cpu, fr_test_fail_cpu, int, 0644);
MODULE_PARM_DESC(test_fail_cpu, "TESTS ONLY: this CPU's counter fails to open (-1: none)");

static bool fr_test_panic;
module_param_named(test_panic, fr_test_panic, bool, 0444);
MODULE_PARM_DESC(test_panic, "TESTS ONLY: writing panic_test_capture runs the panic notifier's body");

bool fr_test_no_counters(void)
{
	return fr_test_nmi;
}

bool fr_test_counter_fails(unsigned int cpu)
{
	return READ_ONCE(fr_test_fail_cpu) == (int)cpu;
}

/**
 * flightrec_test_sample() - record one sample of the interrupted context
 * @regs: the registers the NMI interrupted (an NMI handler's pt_regs)
 *
 * Return: 0 when a sample was recorded (or counted as dropped), -EPERM unless
 * the module was loaded with test_nmi=1, -EINVAL outside NMI context,
 * -ENODEV on a CPU the module has not seen come online.
 */
int flightrec_test_sample(struct pt_regs *regs)
{
	struct fr_cpu *c;

	if (!fr_test_nmi)
		return -EPERM;
	if (!in_nmi())
		return -EINVAL;
	/*
	 * fr.cpus is set before the module's init returned, and a module that
	 * uses this symbol loads after that and holds a reference on us.
	 */
	c = fr.cpus[smp_processor_id()];
	if (!READ_ONCE(c->online))
		return -ENODEV;
	fr_record_sample(c, regs);
	return 0;
}
EXPORT_SYMBOL_GPL(flightrec_test_sample);

/*
 * Writing anything to /sys/module/flightrec/parameters/panic_test_capture
 * runs the notifier's body now, as a second panic would (loaded with
 * test_panic=1 only): HELD gets panics_lost + 1; ARMED captures the live
 * rings (FREEZE them first for exact counters) and is HELD afterwards, as
 * after a panic.  It freezes the rings like a panic: THAW to record again.
 */
static int fr_panic_test_set(const char *val, const struct kernel_param *kp)
{
	if (!fr_test_panic)
		return -EPERM;
	if (!fr.panic.map)
		return -ENODEV;
	mutex_lock(&fr.lock);
	local_irq_disable();
	fr_panic_capture("flightrec test capture");
	local_irq_enable();
	if (atomic_read(&fr.panic.mode) == FR_PANIC_HELD)
		fr.panic.found = FLIGHTREC_PANIC_HELD;
	mutex_unlock(&fr.lock);
	return 0;
}

static const struct kernel_param_ops fr_panic_test_ops = {
	.set = fr_panic_test_set,
};
module_param_cb(panic_test_capture, &fr_panic_test_ops, NULL, 0200);
MODULE_PARM_DESC(panic_test_capture, "TESTS ONLY (test_panic=1): write to run the panic notifier's body");
