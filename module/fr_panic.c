// SPDX-License-Identifier: GPL-2.0
/*
 * fr_panic.c - the panic region: a physical range reserved on the kernel
 * command line (memmap=SIZE$ADDR), into which a panic notifier copies every
 * CPU's newest DATA records, the SIDEBAND ring's last records and the module
 * list, so that the next boot (a warm reboot keeps RAM) can store them.
 * Layout and states: uapi/flightrec.h ("Panic region"); the why:
 * docs/ARCHITECTURE.md ("Kernel panics").  What an earlier boot left in the
 * region, checked at load, and the ioctls: fr_panic_load.c.
 *
 * Panic context, what this file relies on (kernel/panic.c, panic(), v6.1):
 * panic() disables interrupts and preemption, lets only the first CPU
 * through (panic_cpu cmpxchg), prints, then -- without
 * crash_kexec_post_notifiers -- calls __crash_kexec() (a loaded crash
 * kernel takes over there: the notifiers never run) and smp_send_stop(),
 * and only then atomic_notifier_call_chain(&panic_notifier_list, 0, buf),
 * @buf being the formatted message.  With crash_kexec_post_notifiers it
 * calls crash_smp_send_stop() instead, also before the notifiers.  So the
 * other CPUs are stopped (x86 native_stop_other_cpus(): REBOOT_VECTOR IPI,
 * NMI after 1 s if one did not answer) or, if stopping failed, still
 * running.  The notifier is written for both: it takes no lock, allocates
 * nothing, never sleeps or waits, and its work is bounded by the region's
 * size plus one walk of each DATA ring; a ring whose writer still runs is
 * copied the way READ_RING copies a live ring (the reserve check).
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include <linux/crc32.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/notifier.h>
#include <linux/panic_notifier.h>
#include <linux/utsname.h>
#include <asm/cacheflush.h>

#include "fr_internal.h"

static ulong fr_panic_addr;
static ulong fr_panic_size;

module_param_named(panic_addr, fr_panic_addr, ulong, 0444);
MODULE_PARM_DESC(panic_addr, "physical address of the panic region (memmap=SIZE$ADDR reserved it); 0: no panic region");
module_param_named(panic_size, fr_panic_size, ulong, 0444);
MODULE_PARM_DESC(panic_size, "its size in bytes (page multiple, >= 64 KiB, and room for 2 chunks per CPU); 0: no panic region");

#define FR_PANIC_MIN	(64U << 10)
#define FR_PANIC_MODS	256	/* module table entries */
#define FR_PANIC_MSG	sizeof(((struct flightrec_panic_header *)0)->panic_msg)

/* CRC-32 as zlib's crc32(0, buf, len) (the uapi's definition). */
u32 fr_crc(const void *p, size_t len)
{
	return crc32_le(~0U, p, len) ^ ~0U;
}

static struct flightrec_panic_header *fr_hdr(void)
{
	return fr.panic.map;
}

static void fr_hdr_seal(struct flightrec_panic_header *h)
{
	h->header_crc = 0;
	h->header_crc = fr_crc(h, sizeof(*h));
}

/*
 * Dirty lines must reach RAM before the reset: a RESET invalidates x86
 * caches without writing them back (SDM vol. 3, "Cache control", table of
 * INVD/WBINVD/RESET effects), and emergency_restart() does not write back
 * either.  clflush_cache_range() (arch/x86/mm/pat/set_memory.c) is a loop
 * of CLFLUSHOPT/CLFLUSH over the range plus fences: no lock, no IPI.  Only
 * this CPU wrote the region, so its cache is the only one with dirty lines.
 */
static void fr_panic_flush(void *p, size_t len)
{
	clflush_cache_range(p, len);
}

/* ---- layout ---- */

struct fr_layout {
	u64 cpu_off, mod_off, sb_off, sb_cap, data_off, data_size, share;
};

/* The region's layout for this boot; fails if the region is too small. */
static int fr_panic_layout(struct fr_layout *l, u64 size)
{
	u64 rest;

	l->cpu_off = FLIGHTREC_PANIC_HEADER_BYTES;
	l->mod_off = l->cpu_off +
		     round_up((u64)nr_cpu_ids * sizeof(struct flightrec_panic_cpu), PAGE_SIZE);
	l->sb_off = l->mod_off +
		    round_up(FR_PANIC_MODS * sizeof(struct flightrec_panic_module), PAGE_SIZE);
	if (l->sb_off >= size)
		return -EINVAL;
	rest = size - l->sb_off;
	/* the sideband gets at most a quarter of what is left, never more than its ring */
	l->sb_cap = div_u64(min_t(u64, rest / 4, fr.sb.size), FR_SB_REC);
	l->data_off = round_up(l->sb_off + l->sb_cap * FR_SB_REC, FR_CHUNK);
	if (l->data_off >= size)
		return -EINVAL;
	l->data_size = size - l->data_off;
	l->share = round_down(div_u64(l->data_size, nr_cpu_ids), FR_CHUNK);
	/* at least two chunks of history per CPU */
	return l->share >= 2 * FR_CHUNK ? 0 : -EINVAL;
}

/* ---- arming (process context, under fr.lock or from init) ---- */

/* Write a fresh header for this boot: the region now belongs to it. */
void fr_panic_arm(void)
{
	struct flightrec_panic_header *h = fr_hdr();
	struct fr_layout l;

	atomic_set(&fr.panic.mode, FR_PANIC_ARMING);
	fr_panic_layout(&l, fr.panic.size);	/* checked at init */
	memset(fr.panic.map, 0, l.sb_off);	/* header, descriptors, module table */
	h->magic = FLIGHTREC_PANIC_MAGIC;
	h->version = FLIGHTREC_PANIC_VERSION;
	h->header_size = sizeof(*h);
	h->region_size = fr.panic.size;
	h->state = FLIGHTREC_PANIC_ARMED;
	memcpy(h->boot_id, fr.panic.boot_id, sizeof(h->boot_id));
	strscpy(h->release, utsname()->release, sizeof(h->release));
	h->kernel_anchor = (u64)(unsigned long)panic;
	h->arm_time_ns = ktime_get_ns();
	h->mono_to_real_ns = ktime_get_real_ns() - h->arm_time_ns;
	h->mono_to_boot_ns = ktime_get_boottime_ns() - h->arm_time_ns;
	h->nr_cpus = nr_cpu_ids;
	h->cpu_off = l.cpu_off;
	h->cpu_desc_size = sizeof(struct flightrec_panic_cpu);
	h->mod_off = l.mod_off;
	h->mod_desc_size = sizeof(struct flightrec_panic_module);
	h->sb_off = l.sb_off;
	h->data_off = l.data_off;
	h->data_size = l.data_size;
	h->period = fr_param.freq ? 0 : fr_param.period;
	h->freq = fr_param.freq;
	h->event = fr.event_type;
	h->sample_size = FR_HDR;
	h->stack_bytes = round_down(fr_param.stack_bytes, 8);
	fr_hdr_seal(h);
	fr_panic_flush(fr.panic.map, l.sb_off);
	atomic_set_release(&fr.panic.mode, FR_PANIC_ARMED);
}

/* ---- panic context ---- */

/*
 * A DATA record at @p of ring position @pos is well formed: its size fits
 * its chunk and the bytes left.  The walks below stop at the first that is
 * not (a torn or overwritten record): what follows cannot be found.
 */
static bool fr_rec_ok(const struct flightrec_sample *s, u64 pos, u64 left)
{
	u32 room = FR_CHUNK - (pos & (FR_CHUNK - 1));

	if (s->size < 8 || s->size % 8 || s->size > room || s->size > left)
		return false;
	if (s->type == FLIGHTREC_REC_PAD)
		return true;
	return s->type == FLIGHTREC_REC_SAMPLE && s->size >= FR_HDR &&
	       s->size == FR_HDR + 8 * (s->nr_kframes + s->nr_uframes);
}

/*
 * Count the sample records of ring positions [@from, @to) in the ring itself
 * (the records older than the copy: @not_copied).  @from is a chunk
 * boundary; a malformed record ends that chunk's count and the walk goes on
 * at the next chunk.  Bounded: at most the ring's size in 8-byte steps.
 */
static u64 fr_count_ring(struct fr_ring *rb, u64 from, u64 to)
{
	u64 n = 0, pos = from;

	while (pos < to) {
		const struct flightrec_sample *s = rb->buf + (pos & (rb->size - 1));

		if (!fr_rec_ok(s, pos, to - pos)) {
			pos = round_up(pos + 1, FR_CHUNK);
			continue;
		}
		n += s->type == FLIGHTREC_REC_SAMPLE;
		pos += s->size;
	}
	return n;
}

/* Walk the copy: count its sample records and the newest one's time; returns the valid length. */
static u64 fr_walk_copy(const void *buf, u64 first, u64 len, u64 *records, u64 *last)
{
	u64 off = 0;

	*records = 0;
	*last = 0;
	while (off < len) {
		const struct flightrec_sample *s = buf + off;

		if (!fr_rec_ok(s, first + off, len - off))
			break;
		if (s->type == FLIGHTREC_REC_SAMPLE) {
			(*records)++;
			*last = s->time_ns;
		}
		off += s->size;
	}
	return off;
}

/*
 * One CPU's history into its share: the newest whole chunks (every chunk
 * boundary is a record boundary) that fit, up to the head.  The counters
 * come from the CPU's own fields; they are consistent with the ring when
 * its writer is not inside fr_record_sample() (@seq even), which holds for
 * a CPU stopped by the REBOOT_VECTOR IPI (the handler runs with interrupts
 * off).  An odd @seq (the writer interrupted by an NMI stop, or the panic
 * raised from the handler itself) marks the CPU TORN: the record being
 * written lies at or past the head (published after the record) and is not
 * copied, and @overwritten is derived (see FLIGHTREC_PANIC_CPU_TORN).
 */
static void fr_panic_cpu(int cpu, struct flightrec_panic_cpu *d, void *dst, u64 share)
{
	struct fr_cpu *c = fr.cpus[cpu];
	struct fr_ring *rb = &c->data;
	struct fr_cursor cur = { .dst = dst };
	u64 head, oldest, first, valid, got;
	u32 seq;

	seq = READ_ONCE(c->seq);
	smp_rmb();	/* @seq before the counters, as STATS reads them */
	head = READ_ONCE(rb->head);
	d->cpu = cpu;
	d->flags = READ_ONCE(c->online) ? FLIGHTREC_PANIC_CPU_ONLINE : 0;
	d->produced = c->produced;
	d->written = c->written;
	d->overwritten = c->overwritten;
	d->dropped_frozen = c->dropped_frozen;
	d->dropped_size = c->dropped_size;
	d->data_end = head;
	/* what the ring still holds: above reserve - size, from a chunk boundary */
	oldest = fr_data_valid(rb, 0, head, true);
	first = oldest;
	if (head - first > share) {
		first = round_up(head - share, FR_CHUNK);
		d->flags |= FLIGHTREC_PANIC_CPU_CUT;
	}
	fr_output(rb, first, head, fr_copy_kernel, &cur);
	/* a writer that still runs (CPU not stopped) may have overwritten the copy's start */
	valid = fr_data_valid(rb, first, head, true);
	if (valid > first) {
		memmove(dst, dst + (valid - first), head - valid);
		first = valid;
	}
	d->data_first = first;
	got = fr_walk_copy(dst, first, head - first, &d->records, &d->last_time_ns);
	d->data_end = first + got;	/* a malformed record ends the copy */
	d->data_len = got;
	/* what the ring still holds below the copy (less, if a live writer moved on) */
	oldest = min(fr_data_valid(rb, oldest, head, true), first);
	d->not_copied = fr_count_ring(rb, oldest, first);
	if (seq & 1) {
		d->flags |= FLIGHTREC_PANIC_CPU_TORN;
		d->overwritten = d->written - min(d->written, d->not_copied + d->records);
	}
}

/* Where the panic record goes: the header area, after the header. */
#define FR_PANIC_REC_OFF	round_up(sizeof(struct flightrec_panic_header), 64)

/* The panic record into the header area; its @seq is the panicking CPU's head. */
static void fr_panic_put_rec(struct flightrec_panic_header *h, const struct flightrec_sample *rec,
			     u64 head)
{
	struct flightrec_sample *dst = fr.panic.map + FR_PANIC_REC_OFF;

	memcpy(dst, rec, rec->size);
	dst->seq = head;
	h->rec_off = FR_PANIC_REC_OFF;
	h->rec_size = rec->size;
	h->rec_crc = fr_crc(dst, rec->size);
}

/*
 * The panic record when the kprobe did not take one on this CPU: the
 * notifier's own stack (its frames, then panic()'s callers) and time.
 */
static struct flightrec_sample *fr_panic_rec_here(u64 t)
{
	struct flightrec_sample *s = fr.panic.rec;

	memset(s, 0, FR_HDR);
	s->type = FLIGHTREC_REC_SAMPLE;
	s->flags = FLIGHTREC_SAMPLE_CRASH;
	s->time_ns = t;
	s->ip = _THIS_IP_;
	s->cpu = smp_processor_id();
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = FLIGHTREC_MODE_KERNEL;
	fr_kernel_frames(s, NULL);
	s->size = FR_HDR + 8 * s->nr_kframes;
	return s;
}

/*
 * The SIDEBAND ring's newest records, consumed or not: the ring's memory
 * holds every record of [head - size, head).  Read without fr.sb_lock (a
 * stopped CPU may hold it); if it is held, a writer may be overwriting the
 * oldest record, which is then left out.
 */
static void fr_panic_sideband(struct flightrec_panic_header *h, u64 cap)
{
	struct fr_cursor cur = { .dst = fr.panic.map + h->sb_off };
	u64 head = READ_ONCE(fr.sb.head), first, n;

	smp_rmb();	/* head before the records it publishes (fr_sb_put()) */
	first = head > fr.sb.size ? head - fr.sb.size : 0;
	if (first && raw_spin_is_locked(&fr.sb_lock))
		first += FR_SB_REC;
	n = min(div_u64(head - first, FR_SB_REC), cap);
	first = head - n * FR_SB_REC;
	fr_output(&fr.sb, first, head, fr_copy_kernel, &cur);
	h->sb_count = n;
	h->sb_first_seq = div_u64(first, FR_SB_REC);
	h->sb_missing = h->sb_first_seq;
	h->sb_crc = fr_crc(fr.panic.map + h->sb_off, n * FR_SB_REC);
}

static void fr_panic_mod(struct flightrec_panic_module *t, const struct module *m)
{
	strscpy(t->name, m->name, sizeof(t->name));
	t->base = (u64)(unsigned long)FR_MOD_TEXT(m, base);
	t->size = FR_MOD_TEXT_SIZE(m);
}

/*
 * The loaded modules' text ranges.  The module list's head (kernel/module/
 * main.c, "modules") is not exported, so the walk starts at this module's
 * own entry and goes round the ring of list_heads; the one entry that is not
 * inside a struct module is the head, which lies in the kernel image, not in
 * the module area [MODULES_VADDR, MODULES_END).  The kernel walks the same
 * list the same way in panic context (print_modules(), kernel/module/main.c:
 * list_for_each_entry_rcu with preemption off): entries are added and
 * removed with list_add_rcu()/list_del_rcu() and freed only after a grace
 * period, which cannot end while this CPU has interrupts off.  Bounded by
 * FR_PANIC_MODS entries and 4 * FR_PANIC_MODS steps.  On other
 * architectures only this module is listed.
 */
static u32 fr_panic_modules(struct flightrec_panic_module *t)
{
	u32 n = 0;
#ifdef CONFIG_X86_64
	struct list_head *p = READ_ONCE(THIS_MODULE->list.next);
	int steps = 4 * FR_PANIC_MODS;

	fr_panic_mod(&t[n++], THIS_MODULE);
	while (p != &THIS_MODULE->list && n < FR_PANIC_MODS && steps-- > 0) {
		unsigned long a = (unsigned long)p;

		if (a >= MODULES_VADDR && a < MODULES_END) {
			const struct module *m = list_entry(p, struct module, list);

			if (READ_ONCE(m->state) != MODULE_STATE_UNFORMED)
				fr_panic_mod(&t[n++], m);
		}
		p = READ_ONCE(p->next);
	}
#else
	fr_panic_mod(&t[n++], THIS_MODULE);
#endif
	return n;
}

/**
 * fr_panic_capture() - the panic notifier's body
 * @msg: the panic message (panic()'s formatted buffer), may be NULL
 *
 * ARMED: copy the history into the region and mark it CAPTURED.  HELD (an
 * earlier panic not yet claimed): only count this one in its panics_lost.
 * Anything else: nothing.  Runs once per boot from panic() (see the top of
 * this file), or from the test build's panic_test_capture parameter.
 */
void fr_panic_capture(const char *msg)
{
	struct flightrec_panic_header *h = fr_hdr();
	struct flightrec_panic_cpu *d;
	struct flightrec_sample *rec;
	struct fr_layout l;
	int cpu, me = raw_smp_processor_id();
	u64 t;

	switch (atomic_read_acquire(&fr.panic.mode)) {
	case FR_PANIC_HELD:
		h->panics_lost++;
		fr_hdr_seal(h);
		fr_panic_flush(h, sizeof(*h));
		return;
	case FR_PANIC_ARMED:
		break;
	default:
		return;
	}
	if (atomic_cmpxchg(&fr.panic.mode, FR_PANIC_ARMED, FR_PANIC_HELD) != FR_PANIC_ARMED)
		return;
	/*
	 * This CPU's own writer: a cycles counter's NMI could still sample
	 * here (interrupts are off, NMIs are not).  After this store every
	 * later handler on this CPU sees the flag; one that interrupted us is
	 * done before we go on.
	 */
	WRITE_ONCE(fr.frozen, true);
	barrier();
	if (atomic_read(&fr.panic.entry_cpu) == me) {
		t = fr.panic.entry_ns;
		rec = fr.panic.rec;
		h->flags |= FLIGHTREC_PANIC_F_ENTRY;
	} else {
		t = ktime_get_mono_fast_ns();
		rec = fr_panic_rec_here(t);
	}
	fr_panic_layout(&l, fr.panic.size);
	d = fr.panic.map + h->cpu_off;
	for_each_possible_cpu(cpu) {
		void *dst = fr.panic.map + h->data_off + (u64)cpu * l.share;

		fr_panic_cpu(cpu, &d[cpu], dst, l.share);
		d[cpu].data_off = h->data_off + (u64)cpu * l.share;
		if (cpu == me) {
			d[cpu].flags |= FLIGHTREC_PANIC_CPU_PANICKING;
			fr_panic_put_rec(h, rec, d[cpu].data_end);
		}
		d[cpu].data_crc = fr_crc(dst, d[cpu].data_len);
	}
	h->cpu_crc = fr_crc(d, (u64)nr_cpu_ids * sizeof(*d));
	fr_panic_sideband(h, l.sb_cap);
	h->mod_count = fr_panic_modules(fr.panic.map + h->mod_off);
	h->mod_crc = fr_crc(fr.panic.map + h->mod_off,
			    h->mod_count * sizeof(struct flightrec_panic_module));
	if (msg)
		strscpy(h->panic_msg, msg, FR_PANIC_MSG);
	h->panic_time_ns = t;
	h->panic_cpu = me;
	h->state = FLIGHTREC_PANIC_CAPTURED;
	fr_hdr_seal(h);
	fr_panic_flush(fr.panic.map, fr.panic.size);
}

static int fr_panic_notify(struct notifier_block *nb, unsigned long event, void *buf)
{
	fr_panic_capture(buf);
	return NOTIFY_DONE;
}

/* Before the other panic notifiers (e.g. a hypervisor's, which may never return). */
static struct notifier_block fr_panic_nb = {
	.notifier_call = fr_panic_notify,
	.priority = INT_MAX,
};

/*
 * At panic() entry, on the first CPU to get there: the time and a sample of
 * its caller (kernel frames from the probed registers: panic()'s callers;
 * user frames of its task), before panic() prints anything.  A kprobe
 * pre-handler runs with preemption off (int3, the optimized detour, or --
 * at a function's fentry, as here on x86 -- the ftrace trampoline, where
 * interrupts are on), as perf's kprobe events sample from there; the walk
 * is the sample handler's.  Interrupts are off while it runs, and the time
 * is taken at its end: panic()'s own local_irq_disable() follows a few
 * instructions later, so a timer sample of this CPU after @entry_ns can only
 * come from that window (under TCG, a host that stalls the vCPU there).
 */
static int fr_panic_entry(struct kprobe *p, struct pt_regs *regs)
{
	struct flightrec_sample *s = fr.panic.rec;
	struct pt_regs *uregs;
	unsigned long flags;
	u16 abi;

	if (atomic_read(&fr.panic.mode) != FR_PANIC_ARMED)
		return 0;
	local_irq_save(flags);
	if (atomic_cmpxchg(&fr.panic.entry_cpu, -1, raw_smp_processor_id()) != -1) {
		local_irq_restore(flags);
		return 0;
	}
	memset(s, 0, FR_HDR);
	s->type = FLIGHTREC_REC_SAMPLE;
	s->flags = FLIGHTREC_SAMPLE_CRASH;
	s->ip = instruction_pointer(regs);
	s->cpu = raw_smp_processor_id();
	s->pid = task_tgid_nr(current);
	s->tid = task_pid_nr(current);
	s->mode = FLIGHTREC_MODE_KERNEL;
	fr_kernel_frames(s, regs);
	uregs = fr_user_regs(regs, &abi);
	s->abi = abi;
	if (uregs)
		fr_user_frames(s, uregs, abi, fr.panic.scratch);
	s->size = FR_HDR + 8 * (s->nr_kframes + s->nr_uframes);
	fr.panic.entry_ns = ktime_get_mono_fast_ns();
	s->time_ns = fr.panic.entry_ns;
	local_irq_restore(flags);
	return 0;
}

static struct kprobe fr_panic_kp = {
	.symbol_name = "panic",
	.pre_handler = fr_panic_entry,
};

static bool fr_panic_kp_on;

/**
 * fr_panic_init() - map the panic region and find out what it holds
 *
 * Return: 0, also when the region is unusable (the module records anyway;
 * PANIC_INFO says UNAVAILABLE and why); -ENOMEM if the panic record's
 * buffers cannot be allocated.
 */
int fr_panic_init(void)
{
	struct fr_layout l;
	struct page *pg;
	int ret;

	BUILD_BUG_ON(FR_PANIC_REC_OFF + FR_REC_MAX > FLIGHTREC_PANIC_HEADER_BYTES);
	atomic_set(&fr.panic.entry_cpu, -1);
	atomic_set(&fr.panic.mode, FR_PANIC_OFF);
	fr.panic.found = FLIGHTREC_PANIC_NONE;
	if (!fr_panic_addr || !fr_panic_size)
		return 0;
	fr.panic.phys = fr_panic_addr;
	fr.panic.size = fr_panic_size;
	fr.panic.found = FLIGHTREC_PANIC_UNAVAILABLE;
	if (!PAGE_ALIGNED(fr_panic_addr) || !PAGE_ALIGNED(fr_panic_size) ||
	    fr_panic_size < FR_PANIC_MIN || fr_panic_addr + fr_panic_size < fr_panic_addr ||
	    fr_panic_layout(&l, fr_panic_size)) {
		pr_warn("panic region %#lx+%#lx: not page aligned or smaller than %u KiB (or than %u CPUs need)\n",
			fr_panic_addr, fr_panic_size, FR_PANIC_MIN >> 10, nr_cpu_ids);
		fr.panic.error = -EINVAL;
		return 0;
	}
	/* Memory the allocators own would be overwritten by this boot: only reserved ranges. */
	if (region_intersects(fr_panic_addr, fr_panic_size, IORESOURCE_SYSTEM_RAM,
			      IORES_DESC_NONE) != REGION_DISJOINT) {
		pr_warn("panic region %#lx+%#lx intersects System RAM: reserve it on the kernel command line (memmap=%luK$%#lx)\n",
			fr_panic_addr, fr_panic_size, fr_panic_size >> 10, fr_panic_addr);
		fr.panic.error = -EBUSY;
		return 0;
	}
	fr.panic.rec = kzalloc(FR_REC_MAX, GFP_KERNEL);
	pg = alloc_page(GFP_KERNEL | __GFP_ZERO);	/* direct map: see fr_copy_user_nmi() */
	fr.panic.scratch = pg ? page_address(pg) : NULL;
	if (!fr.panic.rec || !fr.panic.scratch) {
		ret = -ENOMEM;
		goto out_free;
	}
	fr.panic.map = memremap(fr_panic_addr, fr_panic_size, MEMREMAP_WB);
	if (!fr.panic.map) {
		pr_warn("panic region %#lx+%#lx: memremap failed\n", fr_panic_addr, fr_panic_size);
		fr.panic.error = -ENOMEM;
		kfree(fr.panic.rec);
		free_page((unsigned long)fr.panic.scratch);
		fr.panic.rec = NULL;
		fr.panic.scratch = NULL;
		return 0;
	}
	fr_read_boot_id(fr.panic.boot_id);
	fr_panic_found();
	atomic_notifier_chain_register(&panic_notifier_list, &fr_panic_nb);
	ret = register_kprobe(&fr_panic_kp);
	if (ret)
		pr_warn("panic region: no kprobe on panic() (%d): panic time and record come from the notifier\n",
			ret);
	fr_panic_kp_on = !ret;
	return 0;

out_free:
	kfree(fr.panic.rec);
	if (fr.panic.scratch)
		free_page((unsigned long)fr.panic.scratch);
	return ret;
}

void fr_panic_exit(void)
{
	if (!fr.panic.map)
		return;
	if (fr_panic_kp_on)
		unregister_kprobe(&fr_panic_kp);
	/* synchronize_rcu() inside */
	atomic_notifier_chain_unregister(&panic_notifier_list, &fr_panic_nb);
	/* /dev/mem maps it uncached: nothing may stay only in this mapping's cache lines */
	fr_panic_flush(fr.panic.map, fr.panic.size);
	memunmap(fr.panic.map);
	kfree(fr.panic.rec);
	free_page((unsigned long)fr.panic.scratch);
}
