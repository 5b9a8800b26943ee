// SPDX-License-Identifier: GPL-2.0
/*
 * fr_test.c - the test-only entry point through which the NMI torture driver
 * (tests/vm/fr_nmi_torture.c) runs the real sample function,
 * fr_record_sample(), from an NMI handler with the interrupted registers, as
 * a PMU overflow does on hardware (our QEMU guests have no PMU).
 *
 * It is refused unless flightrec.ko was loaded with test_nmi=1 (off by
 * default), and with test_nmi=1 the module creates no counters at all, so the
 * NMI handler is the one writer of each CPU's rings, as the cycles counter's
 * overflow handler is on hardware (NMIs do not nest, so a CPU's writer never
 * interrupts itself).
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

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

	if (!fr_param.test_nmi)
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
