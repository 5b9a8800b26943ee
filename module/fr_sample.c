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

/*
 * fr_copy_user_nmi - copy @len bytes of user memory at @src to @dst from any
 * context including NMI.  @dst is a vmalloc address (a ring or a marker
 * buffer) or a direct-map page (a scratch page from alloc_pages()), never
 * a stack.  Returns the bytes copied: a prefix, shorter if the user range
 * faults or user access is not possible right now.
 *
 * The one user-memory copy of the module (the sample path and the crash
 * record use it), built from what perf's own NMI path uses:
 * copy_from_user_nmi() (arch/x86/lib/usercopy.c, EXPORT_SYMBOL_GPL since
 * 2013, in Debian 6.1's Module.symvers), which is arch_perf_out_copy_user
 * for perf_output_sample_ustack() (kernel/events/core.c): __access_ok(),
 * nmi_uaccess_okay() (no user access while CR3 is being switched), then
 * __copy_from_user_inatomic() under pagefault_disable().  A fault ends the
 * copy, it never sleeps.  Not copy_from_user_nofault(): on kernels carrying
 * "mm/usercopy: Detect vmalloc overruns" (0aef499f3172) without d319f344561d
 * its check_object_size() -> check_heap_object() calls find_vmap_area() for
 * a vmalloc destination, which takes vmap_area_lock: a deadlock if the NMI
 * (or the hrtimer interrupt) came in while this CPU held it in vmalloc/vfree.
 *
 * __copy_from_user_inatomic() runs that same check_object_size() on @dst,
 * so a vmalloc @dst is written through the direct-map address of each page
 * (vmalloc_to_page(), mm/vmalloc.c: a lockless walk of the kernel page
 * tables of an area we own, which stays mapped until fr_exit()).  For a
 * direct-map, order-0, non-slab page check_heap_object() (mm/usercopy.c)
 * only does arithmetic: no lock, like perf's own ring pages (rb_alloc() ->
 * alloc_pages_node(), kernel/events/ring_buffer.c).  A direct-map @dst is
 * used as it is.  A stack address is refused: vmalloc_to_page() of a stack
 * is only meaningful with CONFIG_VMAP_STACK, and without it the stack is
 * neither ours to translate nor a vmalloc area.  x86 caches are physically
 * tagged (the module builds for x86-64 only, fr_compat.h), so the bytes
 * written through the direct map are the bytes readers see through the
 * vmalloc address.
 */
u32 fr_copy_user_nmi(void *dst, unsigned long src, u32 len)
{
	bool vmap = is_vmalloc_addr(dst);
	u32 done = 0;

	if (WARN_ON_ONCE(object_is_on_stack(dst) || (!vmap && !virt_addr_valid(dst))))
		return 0;
	while (done < len) {
		u32 off = offset_in_page(dst + done);
		u32 chunk = min_t(u32, len - done, PAGE_SIZE - off);
		void *to = vmap ? page_address(vmalloc_to_page(dst + done)) + off : dst + done;
		const void __user *from = (const void __user *)(src + done);
		unsigned long left = copy_from_user_nmi(to, from, chunk);

		done += chunk - left;
		if (left)
			break;
	}
	return done;
}

/* Copy user stack bytes into the ring, wrapping; returns bytes stored (multiple of 8). */
static u32 fr_ring_put_user(struct fr_ring *rb, u64 pos, unsigned long sp, u32 len)
{
	u64 off = pos & (rb->size - 1);
	u32 first = min_t(u64, len, rb->size - off);
	u32 got = fr_copy_user_nmi(rb->buf + off, sp, first);

	if (got == first && len > first)
		got += fr_copy_user_nmi(rb->buf, sp + first, len - first);
	return round_down(got, 8);
}

/* @abi: PERF_SAMPLE_REGS_ABI_32 or _64, from fr_user_regs(). */
void fr_fill_regs(struct flightrec_aux *a, struct pt_regs *regs, u16 abi)
{
	a->abi = abi;
#ifdef CONFIG_X86_64
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

/* The frames that follow a DATA record's header. */
static inline u64 *fr_frames(struct flightrec_sample *s)
{
	return (u64 *)(s + 1);
}

/* Also the panic record's kernel frames (fr_panic.c); @regs NULL: the caller's own stack. */
void fr_kernel_frames(struct flightrec_sample *s, struct pt_regs *regs)
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
		fr_frames(s)[s->nr_kframes++] = addr;
	}
#endif
}

/*
 * fr_user_regs - the user registers of the interrupted task, the way
 * perf_sample_regs_user() and perf_get_regs_user() (kernel/events/core.c,
 * arch/x86/kernel/perf_regs.c) take them: @regs itself for a user-mode
 * sample; task_pt_regs() for a kernel-mode sample of a user task; none for
 * kernel threads and for user workers (PF_USER_WORKER, 6.4+: io_uring and
 * vhost workers share a user mm but have no user state of their own), and
 * none for an NMI that hit the entry code while it was still saving
 * task_pt_regs() (the interrupted sp lies inside that frame; perf's test,
 * with its caveat: an NMI in an exception taken in that window escapes it).
 * *@abi gets PERF_SAMPLE_REGS_ABI_32 for a compat (ia32) user context,
 * decided like perf_reg_abi() from the saved code segment.
 */
struct pt_regs *fr_user_regs(struct pt_regs *regs, u16 *abi)
{
	struct pt_regs *uregs = regs;

	*abi = PERF_SAMPLE_REGS_ABI_NONE;
	if (!user_mode(regs)) {
		if (!current->mm || (current->flags & (PF_KTHREAD | FR_PF_USER_WORKER)))
			return NULL;
		uregs = task_pt_regs(current);
#ifdef CONFIG_X86_64
		if (in_nmi() && regs->sp > (unsigned long)&uregs->r11 &&
		    regs->sp <= (unsigned long)(uregs + 1))
			return NULL;
#endif
		if (!user_mode(uregs))
			return NULL;
	}
#ifdef CONFIG_X86_64
	*abi = user_64bit_mode(uregs) ? PERF_SAMPLE_REGS_ABI_64 : PERF_SAMPLE_REGS_ABI_32;
#else
	*abi = PERF_SAMPLE_REGS_ABI_64;
#endif
	return uregs;
}

/*
 * fr_user_frames - walk the user frame-pointer chain (fp -> {saved fp, return
 * address}) in the words of @abi: 4-byte words for a compat task, as
 * perf_callchain_user32() does (arch/x86/events/core.c), 8 otherwise.
 * @scratch: 16 bytes the frames are copied into, in a direct-map page
 * preallocated for the caller's context (the CPU's, a marker slot's, the
 * panic kprobe's): fr_copy_user_nmi() refuses a stack address.
 */
void fr_user_frames(struct flightrec_sample *s, struct pt_regs *uregs, u16 abi, void *scratch)
{
	u32 wsz = abi == PERF_SAMPLE_REGS_ABI_32 ? 4 : 8;
	unsigned long fp = frame_pointer(uregs), next, ret;

	u64 *uf = fr_frames(s) + s->nr_kframes;

	uf[s->nr_uframes++] = instruction_pointer(uregs);
	while (s->nr_uframes < FLIGHTREC_MAX_UFRAMES) {
		if (!fp || (fp & (wsz - 1)) || fr_copy_user_nmi(scratch, fp, 2 * wsz) != 2 * wsz)
			return;
		if (wsz == 4) {
			next = ((u32 *)scratch)[0];
			ret = ((u32 *)scratch)[1];
		} else {
			next = ((u64 *)scratch)[0];
			ret = ((u64 *)scratch)[1];
		}
		if (!ret)
			return;
		uf[s->nr_uframes++] = ret;
		if (next <= fp)
			return;
		fp = next;
	}
	s->flags |= FLIGHTREC_SAMPLE_USTACK_TRUNC;
}

/*
 * fr_data_begin - start a DATA record at the head: publish the reserve for
 * the largest record, pad to the next chunk if that would cross one (a
 * record never straddles FR_CHUNK, so readers find boundaries at chunk
 * starts), and, when the record opens a chunk the ring has been round
 * before, count that chunk's old records as overwritten.  Returns the
 * record and its position in *@posp.
 */
static struct flightrec_sample *fr_data_begin(struct fr_cpu *c, u64 *posp)
{
	struct fr_ring *rb = &c->data;
	u64 pos = rb->head;
	u32 room = FR_CHUNK - (pos & (FR_CHUNK - 1));
	u32 k;

	if (room < FR_REC_MAX) {
		struct flightrec_sample *pad = rb->buf + (pos & (rb->size - 1));

		WRITE_ONCE(rb->reserve, pos + room + FR_REC_MAX);
		smp_wmb();	/* reserve before the bytes; pairs with the readers' smp_rmb() */
		pad->size = room;
		pad->type = FLIGHTREC_REC_PAD;
		pos += room;
	} else {
		WRITE_ONCE(rb->reserve, pos + FR_REC_MAX);
		smp_wmb();	/* reserve before the record bytes, as above */
	}
	k = (pos & (rb->size - 1)) / FR_CHUNK;
	if (!(pos & (FR_CHUNK - 1))) {
		if (pos >= rb->size)
			c->overwritten += c->chunk_nr[k];
		c->chunk_nr[k] = 0;
	}
	c->chunk_nr[k]++;
	*posp = pos;
	return rb->buf + (pos & (rb->size - 1));
}

/*
 * fr_data_valid - the first position of [@from, @to) that a reader may keep
 * after copying it: what lies below reserve - size may have been
 * overwritten during the copy.  For DATA the result is rounded up to a chunk
 * boundary, where a record starts.  Call after the copy (smp_rmb() inside).
 */
u64 fr_data_valid(struct fr_ring *rb, u64 from, u64 to, bool data)
{
	u64 valid;

	smp_rmb();	/* copy before re-reading reserve; pairs with the writer's smp_wmb() */
	valid = READ_ONCE(rb->reserve);
	valid = valid > rb->size ? valid - rb->size : 0;
	if (data && valid > from)
		valid = round_up(valid, FR_CHUNK);
	return clamp(valid, from, to);
}

/*
 * fr_record_sample - record one sample of the interrupted context @regs into
 * this CPU's rings.  Called from the overflow handler, in NMI (cycles) or
 * hrtimer IRQ (cpu-clock) context on the counter's CPU, and by the test-only
 * NMI driver.  Lock-free, never sleeps, never allocates, never waits.
 *
 * Cost: a variable-length record, header plus only the frames present,
 * written field by field (nothing is cleared), the AUX blob only when
 * stack_bytes asks for user stacks, and no full barrier:
 * FREEZE waits for handlers in flight with synchronize_rcu() (fr_freeze()).
 */
void fr_record_sample(struct fr_cpu *c, struct pt_regs *regs)
{
	u64 t0 = ktime_get_mono_fast_ns();
	struct pt_regs *uregs;
	struct flightrec_sample *s;
	struct flightrec_aux a;
	u32 aux_len = 0, slen = 0;
	u64 pos, apos = 0;
	u16 abi;

	uregs = fr_user_regs(regs, &abi);
	if (uregs && fr_param.stack_bytes)
		aux_len = sizeof(a) + round_down(fr_param.stack_bytes, 8);

	WRITE_ONCE(c->seq, c->seq + 1);
	/*
	 * No smp_mb() here: fr_freeze() sets fr.frozen and then waits a grace
	 * period, and this handler (hardirq or NMI) is an RCU read-side
	 * critical section (kernel/rcu/tree.c, synchronize_rcu(): "This
	 * includes hardware interrupt handlers, softirq handlers, and NMI
	 * handlers").  So a handler that misses the flag has finished before
	 * FREEZE returns, and one that starts later sees it.  smp_wmb() orders
	 * the odd @seq before the counters for STATS' seqcount only.
	 */
	smp_wmb();
	c->produced++;
	if (READ_ONCE(fr.frozen)) {
		c->dropped_frozen++;
		goto out;
	}
	if (aux_len > c->aux.size) {
		c->dropped_size++;
		goto out;
	}

	s = fr_data_begin(c, &pos);
	s->type = FLIGHTREC_REC_SAMPLE;
	s->flags = 0;
	s->time_ns = t0;
	s->ip = instruction_pointer(regs);
	s->aux_pos = 0;
	s->seq = pos;
	s->aux_len = 0;
	s->cpu = smp_processor_id();
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = user_mode(regs) ? FLIGHTREC_MODE_USER : FLIGHTREC_MODE_KERNEL;
	s->nr_kframes = 0;
	s->nr_uframes = 0;
	s->abi = abi;
	if (!user_mode(regs))
		fr_kernel_frames(s, regs);

	if (uregs)
		fr_user_frames(s, uregs, abi, c->scratch);
	if (aux_len) {
		apos = c->aux.head;
		WRITE_ONCE(c->aux.reserve, apos + aux_len);
		smp_wmb();	/* reserve before the blob bytes, as for DATA */
		slen = fr_ring_put_user(&c->aux, apos + sizeof(a),
					user_stack_pointer(uregs), aux_len - sizeof(a));
		memset(&a, 0, sizeof(a));
		a.seq = s->seq;
		a.len = sizeof(a) + slen;
		a.stack_len = slen;
		fr_fill_regs(&a, uregs, abi);
		fr_ring_put(&c->aux, apos, &a, sizeof(a));
		s->aux_pos = apos;
		s->aux_len = a.len;
		s->flags |= FLIGHTREC_SAMPLE_HAS_AUX;
		smp_wmb();	/* blob bytes before the AUX head that publishes them */
		WRITE_ONCE(c->aux.head, apos + a.len);
		WRITE_ONCE(c->aux.reserve, apos + a.len);
	}
	s->size = FR_HDR + 8 * (s->nr_kframes + s->nr_uframes);
	c->written++;
	smp_wmb();	/* record bytes before the DATA head; pairs with smp_load_acquire(head) */
	WRITE_ONCE(c->data.head, pos + s->size);
	WRITE_ONCE(c->data.reserve, pos + s->size);
out:
	c->handler_ns += ktime_get_mono_fast_ns() - t0;
	smp_wmb();	/* counters and heads before the even @seq (STATS) */
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
