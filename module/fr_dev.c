// SPDX-License-Identifier: GPL-2.0
/*
 * fr_dev.c - /dev/flightrec: the ioctls through which user space reads the
 * rings and the crash markers (uapi/flightrec.h), and FREEZE/THAW.
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"

static bool fr_nonzero(const void *p, size_t len)
{
	return !!memchr_inv(p, 0, len);
}

static int fr_ioc_info(void __user *uarg)
{
	struct flightrec_info in = {
		.version = FLIGHTREC_VERSION,
		.nr_cpus = nr_cpu_ids,
		.data_ring_bytes = (u64)fr_param.data_ring_kb << 10,
		.aux_ring_bytes = (u64)fr_param.aux_ring_kb << 10,
		.sideband_ring_bytes = (u64)fr_param.sideband_kb << 10,
		.period = fr_param.freq ? 0 : fr_param.period,
		.freq = fr_param.freq,
		.event = fr.event_type,
		.sample_size = FR_HDR,
		.sideband_size = FR_SB_REC,
		.stack_bytes = round_down(fr_param.stack_bytes, 8),
		.max_markers = fr_param.markers,
		.frozen = READ_ONCE(fr.frozen),
		.markers_per_uid = fr_markers_per_uid(),
	};

	return copy_to_user(uarg, &in, sizeof(in)) ? -EFAULT : 0;
}

static void fr_cpu_stats(int cpu, struct flightrec_cpu_stats *st)
{
	struct fr_cpu *c = fr.cpus[cpu];
	u32 seq;

	memset(st, 0, sizeof(*st));
	st->cpu = cpu;
	do {
		seq = READ_ONCE(c->seq);
		smp_rmb();	/* seqcount read side: @seq before the counters */
		st->produced = c->produced;
		st->dropped_frozen = c->dropped_frozen;
		st->dropped_size = c->dropped_size;
		st->handler_ns = c->handler_ns;
		st->written = c->written;
		st->overwritten = c->overwritten;
		st->data_head = READ_ONCE(c->data.head);
		st->aux_head = READ_ONCE(c->aux.head);
		smp_rmb();	/* the counters before re-reading @seq */
	} while ((seq & 1) || READ_ONCE(c->seq) != seq);
	st->online = READ_ONCE(c->online);
	st->aux_written = st->aux_head;
	st->aux_overwritten = st->aux_head > c->aux.size ? st->aux_head - c->aux.size : 0;
	st->torn_on_read = atomic64_read(&c->torn);
}

static s32 fr_event_state(struct perf_event *ev)
{
	switch (ev ? READ_ONCE(ev->state) : PERF_EVENT_STATE_DEAD) {
	case PERF_EVENT_STATE_ACTIVE:
		return FLIGHTREC_EVSTATE_ACTIVE;
	case PERF_EVENT_STATE_INACTIVE:
		return FLIGHTREC_EVSTATE_INACTIVE;
	case PERF_EVENT_STATE_OFF:
		return FLIGHTREC_EVSTATE_OFF;
	case PERF_EVENT_STATE_ERROR:
		return FLIGHTREC_EVSTATE_ERROR;
	default:
		return ev ? FLIGHTREC_EVSTATE_OTHER : FLIGHTREC_EVSTATE_NONE;
	}
}

/*
 * The counter's state and times.  The caller holds cpus_read_lock(): the
 * cpuhp callbacks, which release c->event, run under the hotplug lock's
 * write side, so the event cannot go away here.  perf_event_read_value()
 * may sleep (it takes the event's child_mutex and IPIs the CPU).
 */
static void fr_cpu_event(int cpu, struct flightrec_cpu_stats_ev *ev)
{
	struct fr_cpu *c = fr.cpus[cpu];
	struct perf_event *pe = c->event;

	ev->event_state = fr_event_state(pe);
	ev->throttled = READ_ONCE(c->throttled);
	if (pe)
		perf_event_read_value(pe, &ev->time_enabled, &ev->time_running);
}

static int fr_ioc_stats(void __user *uarg)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats_ev ev;
	bool ext;
	size_t size;
	unsigned long flags;
	u32 i, n;

	if (copy_from_user(&s, uarg, sizeof(s)))
		return -EFAULT;
	/* crash_hook .. markers_uid_limited are outputs: what the caller left there is ignored. */
	if ((s.flags & ~FLIGHTREC_STATS_EVENT) || !s.count)
		return -EINVAL;
	ext = s.flags & FLIGHTREC_STATS_EVENT;
	size = ext ? sizeof(ev) : sizeof(ev.s);
	n = min_t(u32, s.count, nr_cpu_ids);
	for (i = 0; i < n; i++) {
		memset(&ev, 0, sizeof(ev));
		if (cpu_possible(i)) {
			fr_cpu_stats(i, &ev.s);
			if (ext) {
				cpus_read_lock();
				fr_cpu_event(i, &ev);
				cpus_read_unlock();
			}
		}
		ev.s.cpu = i;
		if (copy_to_user(u64_to_user_ptr(s.buf + (u64)i * size), &ev, size))
			return -EFAULT;
	}
	s.count = n;
	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	s.sideband_written = div_u64(fr.sb.head, FR_SB_REC);
	s.sideband_dropped = fr.sb_dropped;
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
	s.markers_taken = atomic64_read(&fr.marker_ids);
	s.markers_dropped = atomic64_read(&fr.markers_dropped);
	s.crash_hook = fr.hook;
	s.crash_hook_error = fr.hook_error;
	s.markers_coalesced = READ_ONCE(fr.markers_coalesced);
	s.markers_uid_limited = READ_ONCE(fr.markers_uid_limited);
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

/*
 * SIDEBAND is consumed: the tail moves past what was read.  It moves only
 * after both the records and the struct telling the caller how many there
 * are reached user space; on -EFAULT nothing is consumed and the next read
 * returns the same records.  fr.lock keeps other readers out meanwhile (the
 * writers only move the head).
 */
static int fr_read_sideband(struct flightrec_read *r, void __user *uarg)
{
	struct fr_cursor cur = { .dst = u64_to_user_ptr(r->buf) };
	unsigned long flags;
	u64 tail, head, len;
	long ret;

	if (r->cpu || r->from || r->to)
		return -EINVAL;
	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	tail = fr.sb.tail;
	head = fr.sb.head;
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
	len = min(head - tail, round_down(r->buf_len, FR_SB_REC));
	/* Records in [tail, head) are never overwritten: the ring does not wrap over tail. */
	ret = fr_output(&fr.sb, tail, tail + len, fr_copy_user, &cur);
	if (ret < 0)
		return ret;
	r->first = div_u64(tail, FR_SB_REC);
	r->next = div_u64(tail + len, FR_SB_REC);
	r->head = div_u64(head, FR_SB_REC);
	r->bytes = len;
	if (copy_to_user(uarg, r, sizeof(*r)))
		return -EFAULT;
	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	fr.sb.tail = tail + len;
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
	return 0;
}

static int fr_ioc_read(void __user *uarg)
{
	struct fr_cursor cur;
	struct flightrec_read r;
	struct fr_ring *rb;
	u64 unit, head, from, to, oldest, len, valid;
	bool data;
	struct fr_cpu *c;
	long ret;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.flags || r.pad || fr_nonzero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	if (r.ring > FLIGHTREC_RING_SIDEBAND || (r.to && r.from > r.to))
		return -EINVAL;
	unit = r.ring == FLIGHTREC_RING_SIDEBAND ? FR_SB_REC : 1;
	if (r.buf_len < (r.ring == FLIGHTREC_RING_DATA ? FR_CHUNK : unit))
		return -EINVAL;
	/* Outputs are written whatever the caller left in them. */
	r.first = 0;
	r.next = 0;
	r.head = 0;
	r.data_offset = 0;
	r.bytes = 0;
	r.lost = 0;
	if (r.ring == FLIGHTREC_RING_SIDEBAND)
		return fr_read_sideband(&r, uarg);
	if (r.cpu >= nr_cpu_ids)
		return -EINVAL;
	if (!cpu_possible(r.cpu))
		return -ENODEV;
	c = fr.cpus[r.cpu];
	rb = r.ring == FLIGHTREC_RING_DATA ? &c->data : &c->aux;
	head = smp_load_acquire(&rb->head);	/* pairs with the writer's smp_wmb() */
	data = r.ring == FLIGHTREC_RING_DATA;
	from = r.from;
	to = r.to ? min(r.to, head) : head;
	oldest = head > rb->size ? head - rb->size : 0;
	/* DATA: records start at chunk boundaries, so begin at the first whole one */
	if (from < oldest)
		from = data ? round_up(oldest, FR_CHUNK) : oldest;
	if (from > to)
		from = to;
	len = min(to - from, r.buf_len);
	/* a DATA copy cut short ends at a chunk boundary, a record boundary */
	if (data && from + len < to)
		len = round_down(from + len, FR_CHUNK) - from;
	cur.dst = u64_to_user_ptr(r.buf);
	ret = fr_output(rb, from, from + len, fr_copy_user, &cur);
	if (ret < 0)
		return ret;
	valid = fr_data_valid(rb, from, from + len, data);
	if (valid > from && data)
		atomic64_add(valid - from, &c->torn);
	r.data_offset = valid - from;
	r.bytes = from + len - valid;
	r.first = valid;
	r.next = from + len;
	r.head = READ_ONCE(rb->head);
	r.lost = r.first > r.from ? r.first - r.from : 0;
	return copy_to_user(uarg, &r, sizeof(r)) ? -EFAULT : 0;
}

static int fr_ioc_list(struct fr_file *f, void __user *uarg)
{
	struct flightrec_markers l;
	u32 i, n = 0;

	if (copy_from_user(&l, uarg, sizeof(l)))
		return -EFAULT;
	if (l.flags || fr_nonzero(l.reserved, sizeof(l.reserved)))
		return -EINVAL;
	/* Before the scan: a marker READY after this read makes poll() readable. */
	f->listed_seq = atomic64_read(&fr.ready_seq);
	for (i = 0; i < fr_param.markers; i++) {
		struct fr_marker *mk = &fr.markers[i];

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
	if (r.slot >= fr_param.markers ||
	    atomic_read_acquire(&fr.markers[r.slot].state) != FR_SLOT_READY)
		return -ENOENT;
	sn = &fr.markers[r.slot].snaps[r.cpu];
	if (r.ring == FLIGHTREC_RING_DATA) {
		base = sn->data + sn->d_off;
		r.first = sn->d_first;
		r.end = sn->d_end;
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
 * fr.frozen check, so that a copy-out after FREEZE sees no writer.  The
 * handler runs in hardirq or NMI context, an RCU read-side critical section
 * (kernel/rcu/tree.c, synchronize_rcu(): "regions of code across which
 * interrupts, preemption, or softirqs have been disabled also serve as RCU
 * read-side critical sections.  This includes hardware interrupt handlers,
 * softirq handlers, and NMI handlers").  So after the grace period every
 * handler that may have missed the flag has returned, and, by the same
 * function's memory-ordering guarantee, its ring writes are visible here;
 * every later handler sees the flag.  The price is a grace period per FREEZE
 * (milliseconds, paid by the reader) instead of a full barrier per sample
 * (paid on every CPU at every sample).  synchronize_rcu_expedited() keeps
 * it short; FREEZE is rare (one per dump).
 */
static void fr_freeze(void)
{
	WRITE_ONCE(fr.frozen, true);
	synchronize_rcu_expedited();
}

/* fr.frozen from the freezes held; unfreezing is a plain store (THAW's old way). */
static void fr_update_frozen(void)
{
	if (!fr.boot_frozen && !fr.freeze_count)
		WRITE_ONCE(fr.frozen, false);
}

static long fr_ioctl_locked(struct fr_file *f, unsigned int cmd, unsigned long arg)
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
		if (!f->frozen) {
			f->frozen = true;
			fr.freeze_count++;
		}
		fr_freeze();
		return 0;
	case FLIGHTREC_IOC_THAW:
		if (arg)
			return -EINVAL;
		if (f->frozen) {
			f->frozen = false;
			fr.freeze_count--;
		}
		fr.boot_frozen = false;
		fr_update_frozen();
		return 0;
	case FLIGHTREC_IOC_READ_RING:
		return fr_ioc_read(uarg);
	case FLIGHTREC_IOC_LIST_MARKERS:
		return fr_ioc_list(f, uarg);
	case FLIGHTREC_IOC_READ_MARKER:
		return fr_ioc_read_marker(uarg);
	case FLIGHTREC_IOC_RELEASE_MARKER:
		if (arg >= fr_param.markers ||
		    atomic_cmpxchg(&fr.markers[arg].state, FR_SLOT_READY, FR_SLOT_FREE) !=
		    FR_SLOT_READY)
			return -ENOENT;
		return 0;
	case FLIGHTREC_IOC_PANIC_INFO: {
		struct flightrec_panic_info pi;

		fr_panic_info(&pi);
		return copy_to_user(uarg, &pi, sizeof(pi)) ? -EFAULT : 0;
	}
	case FLIGHTREC_IOC_PANIC_READ: {
		struct flightrec_panic_read pr;
		int ret;

		if (copy_from_user(&pr, uarg, sizeof(pr)))
			return -EFAULT;
		ret = fr_panic_read(&pr);
		if (ret)
			return ret;
		return copy_to_user(uarg, &pr, sizeof(pr)) ? -EFAULT : 0;
	}
	case FLIGHTREC_IOC_PANIC_RELEASE:
		if (arg)
			return -EINVAL;
		return fr_panic_release();
	default:
		return -ENOTTY;
	}
}

static long fr_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	long ret;

	mutex_lock(&fr.lock);
	ret = fr_ioctl_locked(file->private_data, cmd, arg);
	mutex_unlock(&fr.lock);
	return ret;
}

/*
 * Readable when a marker became READY since this file's last LIST_MARKERS.
 * The wakeup comes from fr_marker_work() (process context), never from the
 * crash hook itself (see fr_take_marker()).
 */
static __poll_t fr_poll(struct file *file, poll_table *wait)
{
	struct fr_file *f = file->private_data;

	poll_wait(file, &fr.marker_wq, wait);
	return atomic64_read(&fr.ready_seq) != READ_ONCE(f->listed_seq) ? EPOLLIN | EPOLLRDNORM : 0;
}

/*
 * No .llseek: nonseekable_open() clears FMODE_LSEEK, and vfs_llseek() then
 * returns -ESPIPE (fs/read_write.c) on every kernel this module supports.
 * The misc device's .owner pins the module while a file is open, so rmmod
 * with a reader holding the device fails with -EBUSY.
 */
static int fr_open(struct inode *inode, struct file *file)
{
	struct fr_file *f;

	if (!capable(CAP_SYS_ADMIN) && !perfmon_capable())
		return -EPERM;
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	f->listed_seq = atomic64_read(&fr.ready_seq);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/* Closing a file drops its freeze: a reader that dies frozen does not stop recording. */
static int fr_release(struct inode *inode, struct file *file)
{
	struct fr_file *f = file->private_data;

	mutex_lock(&fr.lock);
	if (f->frozen) {
		fr.freeze_count--;
		fr_update_frozen();
	}
	mutex_unlock(&fr.lock);
	kfree(f);
	return 0;
}

static const struct file_operations fr_fops = {
	.owner = THIS_MODULE,
	.open = fr_open,
	.release = fr_release,
	.poll = fr_poll,
	.unlocked_ioctl = fr_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice fr_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "flightrec",
	.fops = &fr_fops,
	.mode = 0600,
};

int fr_dev_register(void)
{
	return misc_register(&fr_misc);
}

void fr_dev_unregister(void)
{
	misc_deregister(&fr_misc);
}
