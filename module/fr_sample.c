// SPDX-License-Identifier: GPL-2.0
/*
 * fr_sample.c - the per-CPU rings and their one writer, the counter's
 * overflow handler, plus fr_output(), the one copy-out routine for readers
 * and for crash markers.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

/*
 * fr_output - copy ring bytes [from, to) out through @copyfn, the one copy-out
 * routine for copy_to_user and for the crash snapshot.  Shaped like
 * rb_output_aux() (lkml 2016-09-23, "perf: Add api to (de-)allocate AUX
 * buffers for kernel counters").  Returns bytes copied or -EFAULT.
 */
long fr_output(struct fr_ring *rb, u64 from, u64 to, fr_copyfn copyfn, void *data)
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

unsigned long fr_copy_user(void *data, const void *src, unsigned long len)
{
	struct fr_cursor *c = data;
	unsigned long left = copy_to_user((void __user *)c->dst, src, len);

	c->dst += len;
	return left;
}

unsigned long fr_copy_kernel(void *data, const void *src, unsigned long len)
{
	struct fr_cursor *c = data;

	memcpy(c->dst, src, len);
	c->dst += len;
	return 0;
}

/* Writer side: copy @len bytes at ring position @pos, wrapping. */
void fr_ring_put(struct fr_ring *rb, u64 pos, const void *src, u64 len)
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

void fr_fill_regs(struct flightrec_aux *a, struct pt_regs *regs)
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
void fr_user_frames(struct flightrec_sample *s, struct pt_regs *uregs)
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
 * fr_record_sample - record one sample of the interrupted context @regs into
 * this CPU's rings.  Called from the overflow handler, in NMI (cycles) or
 * hrtimer IRQ (cpu-clock) context on the counter's CPU, and by the test-only
 * NMI driver.  Lock-free, never sleeps, never allocates, never waits.
 */
void fr_record_sample(struct fr_cpu *c, struct pt_regs *regs)
{
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
		aux_len = sizeof(a) + round_down(fr_param.stack_bytes, 8);

	WRITE_ONCE(c->seq, c->seq + 1);
	/*
	 * Full barrier: the odd @seq store must be visible before fr.frozen is
	 * read.  Pairs with smp_mb() in fr_freeze(), the store-buffering pattern
	 * of tools/memory-model/litmus-tests/SB+fencembonceonces.litmus: either
	 * this handler sees the freeze or fr_freeze() sees it in flight and waits.
	 */
	smp_mb();
	c->produced++;
	if (READ_ONCE(fr.frozen)) {
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

/* The counter's overflow handler: one sample per overflow. */
/* kernel/events/core.c: hw.interrupts of a throttled event (not in a header) */
#define FR_MAX_INTERRUPTS	(~0ULL)

void fr_overflow(struct perf_event *ev, struct perf_sample_data *sd, struct pt_regs *regs)
{
	struct fr_cpu *c = ev->overflow_handler_context;

	fr_record_sample(c, regs);
	/*
	 * __perf_event_overflow() decides throttling before it calls us
	 * (__perf_event_account_interrupt(): hw.interrupts = MAX_INTERRUPTS and
	 * the event stopped until perf_adjust_freq_unthr_context() on a tick):
	 * this overflow is the last until then.  Only this handler writes it.
	 */
	if (READ_ONCE(ev->hw.interrupts) == FR_MAX_INTERRUPTS)
		WRITE_ONCE(c->throttled, c->throttled + 1);
}
