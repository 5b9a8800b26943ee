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

static int fr_ioc_stats(void __user *uarg)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats st;
	unsigned long flags;
	u32 i, n;

	if (copy_from_user(&s, uarg, sizeof(s)))
		return -EFAULT;
	if (s.flags || fr_nonzero(s.reserved, sizeof(s.reserved)) || !s.count)
		return -EINVAL;
	n = min_t(u32, s.count, nr_cpu_ids);
	for (i = 0; i < n; i++) {
		if (cpu_possible(i))
			fr_cpu_stats(i, &st);
		else
			memset(&st, 0, sizeof(st));
		st.cpu = i;
		if (copy_to_user(u64_to_user_ptr(s.buf + (u64)i * sizeof(st)), &st, sizeof(st)))
			return -EFAULT;
	}
	s.count = n;
	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	s.sideband_written = div_u64(fr.sb.head, FR_SB_REC);
	s.sideband_dropped = fr.sb_dropped;
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
	s.markers_taken = atomic64_read(&fr.marker_ids);
	s.markers_dropped = atomic64_read(&fr.markers_dropped);
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static int fr_read_sideband(struct flightrec_read *r)
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
	raw_spin_lock_irqsave(&fr.sb_lock, flags);
	fr.sb.tail = tail + len;
	raw_spin_unlock_irqrestore(&fr.sb_lock, flags);
	r->first = div_u64(tail, FR_SB_REC);
	r->next = div_u64(tail + len, FR_SB_REC);
	r->head = div_u64(head, FR_SB_REC);
	r->bytes = len;
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
	if (r.ring == FLIGHTREC_RING_SIDEBAND) {
		ret = fr_read_sideband(&r);
		goto out;
	}
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
	ret = 0;
out:
	if (ret)
		return ret;
	return copy_to_user(uarg, &r, sizeof(r)) ? -EFAULT : 0;
}

static int fr_ioc_list(void __user *uarg)
{
	struct flightrec_markers l;
	u32 i, n = 0;

	if (copy_from_user(&l, uarg, sizeof(l)))
		return -EFAULT;
	if (l.flags || fr_nonzero(l.reserved, sizeof(l.reserved)))
		return -EINVAL;
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
	if (r.slot >= fr_param.markers || atomic_read_acquire(&fr.markers[r.slot].state) != FR_SLOT_READY)
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

static long fr_ioctl_locked(unsigned int cmd, unsigned long arg)
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
		fr_freeze();
		return 0;
	case FLIGHTREC_IOC_THAW:
		if (arg)
			return -EINVAL;
		WRITE_ONCE(fr.frozen, false);
		return 0;
	case FLIGHTREC_IOC_READ_RING:
		return fr_ioc_read(uarg);
	case FLIGHTREC_IOC_LIST_MARKERS:
		return fr_ioc_list(uarg);
	case FLIGHTREC_IOC_READ_MARKER:
		return fr_ioc_read_marker(uarg);
	case FLIGHTREC_IOC_RELEASE_MARKER:
		if (arg >= fr_param.markers ||
		    atomic_cmpxchg(&fr.markers[arg].state, FR_SLOT_READY, FR_SLOT_FREE) !=
		    FR_SLOT_READY)
			return -ENOENT;
		return 0;
	default:
		return -ENOTTY;
	}
}

static long fr_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	long ret;

	mutex_lock(&fr.lock);
	ret = fr_ioctl_locked(cmd, arg);
	mutex_unlock(&fr.lock);
	return ret;
}

/*
 * No .llseek: nonseekable_open() clears FMODE_LSEEK, and vfs_llseek() then
 * returns -ESPIPE (fs/read_write.c) on every kernel this module supports.
 * The misc device's .owner pins the module while a file is open, so rmmod
 * with a reader holding the device fails with -EBUSY.
 */
static int fr_open(struct inode *inode, struct file *file)
{
	if (!capable(CAP_SYS_ADMIN) && !perfmon_capable())
		return -EPERM;
	return nonseekable_open(inode, file);
}

static const struct file_operations fr_fops = {
	.owner = THIS_MODULE,
	.open = fr_open,
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
