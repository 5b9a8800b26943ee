// SPDX-License-Identifier: GPL-2.0
/*
 * flightrec - always-on flight recorder: per-CPU kernel perf counters write
 * fixed-size sample records into module-owned overwrite rings (DATA), user
 * registers and stack bytes into a second per-CPU byte ring (AUX), and
 * mmap/exec/fork/exit events into a non-overwriting SIDEBAND ring.  A kprobe
 * at the start of a core dump takes a crash marker that preserves every CPU's
 * history up to that instant.  User space reads everything through
 * /dev/flightrec (include/uapi: module/uapi/flightrec.h).
 *
 * Mainline cannot give a kernel counter a perf ring or an AUX area (the
 * rb_alloc_kernel() series, lkml 2016-09-23, never merged), hence own rings.
 *
 * fr_main.c: the load parameters, the module state, the per-CPU counters and
 * CPU hotplug, allocation, init and exit.  The other files: fr_sample.c (the
 * overflow handler and the rings), fr_sideband.c, fr_crash.c, fr_dev.c,
 * fr_panic.c and fr_panic_load.c (the panic region).
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include "fr_internal.h"
/* The uapi's size and offsets, asserted at build time (also built -m32 by the tests). */
#include "fr_uapi_layout.h"

struct fr_params fr_param = {
	.event = "auto",
	.period = 1000000,
	.data_ring_kb = 1024,
	.aux_ring_kb = 2048,
	.sideband_kb = 1024,
	.stack_bytes = 1024,
	.markers = 2,
	.crash_hook = "auto",
	.coredump_symbol = "",
	.autostart = true,
};

module_param_named(event, fr_param.event, charp, 0444);
MODULE_PARM_DESC(event, "auto (cycles if a PMU exists, else cpu-clock), cycles, cpu-clock");
module_param_named(period, fr_param.period, ulong, 0444);
MODULE_PARM_DESC(period, "sample period: ns for cpu-clock, events for cycles (default 1000000)");
module_param_named(freq, fr_param.freq, uint, 0444);
MODULE_PARM_DESC(freq, "sample frequency in Hz; overrides period when nonzero");
module_param_named(data_ring_kb, fr_param.data_ring_kb, uint, 0444);
MODULE_PARM_DESC(data_ring_kb, "DATA ring per CPU, KiB (power of two, >= 4)");
module_param_named(aux_ring_kb, fr_param.aux_ring_kb, uint, 0444);
MODULE_PARM_DESC(aux_ring_kb, "AUX ring per CPU, KiB (power of two, >= 4)");
module_param_named(sideband_kb, fr_param.sideband_kb, uint, 0444);
MODULE_PARM_DESC(sideband_kb, "SIDEBAND ring, KiB (power of two, >= 4)");
module_param_named(stack_bytes, fr_param.stack_bytes, uint, 0444);
MODULE_PARM_DESC(stack_bytes, "user stack bytes copied per sample into AUX (max 65536); 0: no AUX blob, neither registers nor stack (frame-pointer callchains only)");
module_param_named(markers, fr_param.markers, uint, 0444);
MODULE_PARM_DESC(markers, "crash marker slots (each preserves every CPU's rings)");
module_param_named(markers_per_uid, fr_param.markers_per_uid, uint, 0444);
MODULE_PARM_DESC(markers_per_uid, "slots one user's crashes may hold (0: markers - 1, at least 1)");
module_param_named(crash_hook, fr_param.crash_hook, charp, 0444);
MODULE_PARM_DESC(crash_hook, "auto (signal_deliver tracepoint, else kprobe), tracepoint, kprobe, none");
module_param_named(coredump_symbol, fr_param.coredump_symbol, charp, 0444);
MODULE_PARM_DESC(coredump_symbol, "kprobe hook symbol (default: vfs_coredump, then do_coredump)");
module_param_named(max_mem_mb, fr_param.max_mem_mb, uint, 0444);
MODULE_PARM_DESC(max_mem_mb, "refuse to load if rings and marker copies need more MiB than this (0: a quarter of RAM)");
module_param_named(autostart, fr_param.autostart, bool, 0444);
MODULE_PARM_DESC(autostart, "record from load; if 0 start frozen until FLIGHTREC_IOC_THAW");
struct fr_state fr = {
	.sb_lock = __RAW_SPIN_LOCK_UNLOCKED(fr.sb_lock),
	.marker_ids = ATOMIC64_INIT(0),
	.markers_dropped = ATOMIC64_INIT(0),
	.mk_lock = __RAW_SPIN_LOCK_UNLOCKED(fr.mk_lock),
	.marker_wq = __WAIT_QUEUE_HEAD_INITIALIZER(fr.marker_wq),
	.ready_seq = ATOMIC64_INIT(0),
	.lock = __MUTEX_INITIALIZER(fr.lock),
};

static struct perf_event_attr fr_attr(u32 type)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type == FLIGHTREC_EVENT_CYCLES ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.config = type == FLIGHTREC_EVENT_CYCLES ? PERF_COUNT_HW_CPU_CYCLES
							 : PERF_COUNT_SW_CPU_CLOCK,
		.pinned = 1,
	};

	if (fr_param.freq) {
		attr.freq = 1;
		attr.sample_freq = fr_param.freq;
	} else {
		attr.sample_period = fr_param.period;
	}
	return attr;
}

static int fr_cpu_online(unsigned int cpu)
{
	struct perf_event_attr attr = fr_attr(fr.event_type);
	struct fr_cpu *c = fr.cpus[cpu];
	struct perf_event *ev;

	/* test build, test_nmi=1: the NMI torture driver is the rings' one writer */
	if (fr_test_no_counters()) {
		WRITE_ONCE(c->online, true);
		return 0;
	}
	if (fr_test_counter_fails(cpu))
		ev = ERR_PTR(-ENODEV);
	else
		ev = perf_event_create_kernel_counter(&attr, cpu, NULL, fr_overflow, c);
	/*
	 * A recorder must not keep a CPU from coming up (an error here fails
	 * the hotplug, or the module's load): the CPU goes on without a
	 * counter, so records nothing (STATS: online 0, no event) until it
	 * goes offline and online again.
	 */
	if (IS_ERR(ev)) {
		pr_warn("cpu %u: no counter (%pe): records nothing until onlined again\n",
			cpu, ev);
		return 0;
	}
	c->event = ev;
	WRITE_ONCE(c->online, true);
	return 0;
}

static int fr_cpu_offline(unsigned int cpu)
{
	struct fr_cpu *c = fr.cpus[cpu];

	WRITE_ONCE(c->online, false);
	if (c->event) {
		perf_event_disable(c->event);
		perf_event_release_kernel(c->event);
		c->event = NULL;
	}
	return 0;
}

static int fr_pick_event(void)
{
	struct perf_event_attr attr = fr_attr(FLIGHTREC_EVENT_CYCLES);
	struct perf_event *ev;

	if (!strcmp(fr_param.event, "cpu-clock")) {
		fr.event_type = FLIGHTREC_EVENT_CPU_CLOCK;
		return 0;
	}
	if (strcmp(fr_param.event, "cycles") && strcmp(fr_param.event, "auto"))
		return -EINVAL;
	ev = perf_event_create_kernel_counter(&attr, raw_smp_processor_id(), NULL, NULL, NULL);
	if (!IS_ERR(ev)) {
		perf_event_release_kernel(ev);
		fr.event_type = FLIGHTREC_EVENT_CYCLES;
		return 0;
	}
	if (!strcmp(fr_param.event, "cycles"))
		return PTR_ERR(ev);
	fr.event_type = FLIGHTREC_EVENT_CPU_CLOCK;
	return 0;
}

/* ---- allocation ---- */

static int fr_ring_alloc(struct fr_ring *rb, uint kb, int node)
{
	memset(rb, 0, sizeof(*rb));
	rb->size = (u64)kb << 10;
	rb->buf = vzalloc_node(rb->size, node);
	return rb->buf ? 0 : -ENOMEM;
}

static void fr_free_cpus(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		if (!fr.cpus[cpu])
			continue;
		vfree(fr.cpus[cpu]->data.buf);
		vfree(fr.cpus[cpu]->aux.buf);
		kvfree(fr.cpus[cpu]->chunk_nr);
		if (fr.cpus[cpu]->scratch)
			free_page((unsigned long)fr.cpus[cpu]->scratch);
		kfree(fr.cpus[cpu]);
	}
	kfree(fr.cpus);
}

static int fr_alloc_cpus(void)
{
	int cpu;

	fr.cpus = kcalloc(nr_cpu_ids, sizeof(*fr.cpus), GFP_KERNEL);
	if (!fr.cpus)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		int node = cpu_to_node(cpu);
		struct fr_cpu *c = kzalloc_node(sizeof(*c), GFP_KERNEL, node);

		fr.cpus[cpu] = c;
		if (c) {
			/* direct map, order 0: see fr_copy_user_nmi() */
			struct page *pg = alloc_pages_node(node, GFP_KERNEL | __GFP_ZERO, 0);

			c->scratch = pg ? page_address(pg) : NULL;
		}
		if (!c || !c->scratch || fr_ring_alloc(&c->data, fr_param.data_ring_kb, node) ||
		    fr_ring_alloc(&c->aux, fr_param.aux_ring_kb, node)) {
			fr_free_cpus();
			return -ENOMEM;
		}
		c->chunk_nr = kvcalloc(c->data.size / FR_CHUNK, sizeof(u16), GFP_KERNEL);
		if (!c->chunk_nr) {
			fr_free_cpus();
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * fr_mem_needed - the bytes fr_init() allocates: per possible CPU its rings,
 * chunk counts and scratch page, and in each marker slot a copy of every
 * possible CPU's rings (fr_alloc_markers()), plus the sideband ring.
 */
static u64 fr_mem_needed(void)
{
	u64 data = (u64)fr_param.data_ring_kb << 10, aux = (u64)fr_param.aux_ring_kb << 10;
	u64 blob = sizeof(struct flightrec_aux) + round_down(fr_param.stack_bytes, 8);
	u64 cpu = data + aux + data / FR_CHUNK * sizeof(u16) + PAGE_SIZE + sizeof(struct fr_cpu);
	u64 copy = data + 2 * FR_REC_MAX + aux + blob + sizeof(struct fr_snap);
	u64 slot = sizeof(struct fr_marker) + PAGE_SIZE + 2 * FR_REC_MAX + blob;

	return num_possible_cpus() * (cpu + fr_param.markers * copy) + fr_param.markers * slot +
	       ((u64)fr_param.sideband_kb << 10);
}

/*
 * fr_check_mem - refuse, before allocating anything, rings and marker copies
 * that need more than max_mem_mb (default a quarter of RAM) or than RAM.
 * Everything scales with the possible CPUs (up to 1 GiB per ring each, times
 * 1 + markers), so defaults fine on a laptop can ask a large machine for
 * more memory than it has.
 */
static int fr_check_mem(void)
{
	u64 ram_mb = ((u64)totalram_pages() << PAGE_SHIFT) >> 20;
	u64 cap_mb = fr_param.max_mem_mb ? fr_param.max_mem_mb : ram_mb / 4;
	u64 need_mb = DIV_ROUND_UP_ULL(fr_mem_needed(), 1ULL << 20);

	if (need_mb <= cap_mb && need_mb <= ram_mb)
		return 0;
	pr_err("rings and marker copies need %llu MiB (%u possible CPUs x (%u KiB DATA + %u KiB AUX) x (1 + %u markers) + %u KiB sideband), more than %s (%llu MiB): lower data_ring_kb, aux_ring_kb or markers%s\n",
	       need_mb, num_possible_cpus(), fr_param.data_ring_kb, fr_param.aux_ring_kb,
	       fr_param.markers, fr_param.sideband_kb,
	       need_mb > ram_mb ? "RAM" : fr_param.max_mem_mb ? "max_mem_mb" :
	       "max_mem_mb (default: a quarter of RAM)",
	       need_mb > ram_mb ? ram_mb : cap_mb, need_mb > ram_mb ? "" : ", or raise max_mem_mb");
	return -ENOMEM;
}

static bool fr_valid_kb(uint kb)
{
	return kb >= 4 && kb <= (1U << 20) && is_power_of_2(kb);
}

static int __init fr_init(void)
{
	int ret;

	/*
	 * Ring sizes are powers of two >= 4 KiB: SIDEBAND records and DATA
	 * chunks divide them, and a chunk holds at least one whole record (so
	 * @chunk_nr counts fit in u16).
	 */
	BUILD_BUG_ON(!is_power_of_2(FR_SB_REC) || !is_power_of_2(FR_CHUNK) || FR_CHUNK > 4096);
	BUILD_BUG_ON(FR_REC_MAX % 8 || FR_REC_MAX > FR_CHUNK);
	BUILD_BUG_ON(FR_HDR != 64);
	/* io_uring workers (and from 6.4 vhost workers) have no user state of their own */
	BUILD_BUG_ON(!FR_PF_USER_WORKER);
	if (!fr_valid_kb(fr_param.data_ring_kb) || !fr_valid_kb(fr_param.aux_ring_kb) ||
	    !fr_valid_kb(fr_param.sideband_kb) || fr_param.stack_bytes > FR_MAX_STACK ||
	    fr_param.markers > 64 || (!fr_param.freq && !fr_param.period))
		return -EINVAL;
	ret = fr_check_mem();
	if (ret)
		return ret;
	ret = fr_pick_event();
	if (ret)
		return ret;
	fr.frozen = !fr_param.autostart;
	fr.boot_frozen = fr.frozen;

	ret = fr_alloc_cpus();
	if (ret)
		return ret;
	ret = fr_ring_alloc(&fr.sb, fr_param.sideband_kb, NUMA_NO_NODE);
	if (ret)
		goto out_free_cpus;
	fr.sb_scratch = alloc_percpu(struct flightrec_sideband);
	fr.sb_lost = alloc_percpu(struct flightrec_sideband);
	if (!fr.sb_scratch || !fr.sb_lost) {
		ret = -ENOMEM;
		goto out_free_scratch;	/* free_percpu(NULL) is a no-op */
	}
	ret = fr_alloc_markers();
	if (ret)
		goto out_free_scratch;
	ret = fr_sideband_register();
	if (ret)
		goto out_free_markers;
	ret = fr_register_crash_hook();
	if (ret)
		goto out_unregister_sideband;
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "flightrec:online",
				fr_cpu_online, fr_cpu_offline);
	if (ret < 0)
		goto out_unregister_crash_hook;
	fr.hp_state = ret;
	ret = fr_panic_init();
	if (ret)
		goto out_remove_hp;
	ret = fr_dev_register();
	if (ret)
		goto out_panic_exit;
	pr_info("recording %s, %s %lu, data %u KiB aux %u KiB per cpu%s; crash hook %s\n",
		fr.event_type == FLIGHTREC_EVENT_CYCLES ? "cycles" : "cpu-clock",
		fr_param.freq ? "freq" : "period",
		fr_param.freq ? (unsigned long)fr_param.freq : fr_param.period,
		fr_param.data_ring_kb, fr_param.aux_ring_kb, fr_param.autostart ? "" : " (frozen)",
		fr.hook == FLIGHTREC_HOOK_TRACEPOINT ? "signal_deliver" :
		fr.hook == FLIGHTREC_HOOK_KPROBE ? fr_coredump_symbol() : "none");
	if (fr_test_no_counters())
		pr_warn("test_nmi=1: no counters, samples only from flightrec_test_sample()\n");
	return 0;

out_panic_exit:
	fr_panic_exit();
out_remove_hp:
	cpuhp_remove_state(fr.hp_state);
out_unregister_crash_hook:
	fr_unregister_crash_hook();
out_unregister_sideband:
	fr_sideband_unregister();
out_free_markers:
	fr_free_markers();
out_free_scratch:
	free_percpu(fr.sb_lost);
	free_percpu(fr.sb_scratch);
	vfree(fr.sb.buf);
out_free_cpus:
	fr_free_cpus();
	return ret;
}

static void __exit fr_exit(void)
{
	fr_dev_unregister();
	fr_panic_exit();
	cpuhp_remove_state(fr.hp_state);	/* releases every counter */
	fr_unregister_crash_hook();
	fr_sideband_unregister();
	fr_free_markers();
	free_percpu(fr.sb_lost);
	free_percpu(fr.sb_scratch);
	vfree(fr.sb.buf);
	fr_free_cpus();
}

module_init(fr_init);
module_exit(fr_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("flightrec: always-on per-CPU sample rings with crash markers");
MODULE_VERSION(FR_VERSION);
