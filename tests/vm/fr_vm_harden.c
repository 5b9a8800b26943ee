/*
 * Guest-side scenarios for flightrec.ko's crash hook and counters (issue 12
 * items 4 and 5), run inside the QEMU guest by guest_run.sh like fr_vm_test:
 * each subcommand exits 0 on PASS and prints one detail line.  Links only
 * libc (and pthreads).
 *
 *   threads ROUNDS   every thread of a process crashes at once: one marker
 *   uidloop N        one uid crashes N times: a slot remains for another uid
 *   nohook SYM       loaded with crash_hook=kprobe coredump_symbol=SYM: no
 *                    markers, the reason in STATS, sampling goes on
 *   freeze2          FREEZE by two files, THAW by one: still frozen
 *   sblost           SIDEBAND overflow: a LOST record before the next record;
 *                    a failed copy-out consumes nothing
 *   poll             poll() on /dev/flightrec wakes on a crash
 *   throttle         throttled periods and counter times in STATS
 *   cost N           N crashes: time in the hook, copy time, bytes copied
 *   sbrename S       for S seconds, one thread renames a directory while
 *                    another maps and execs a file below it: every MMAP/EXEC
 *                    record of that file has its inode and a path that was
 *                    true at some point, or none (FLIGHTREC_SB_PATH_TRUNC)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "module/uapi/flightrec.h"

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)
#define MAXCPU 256

static int fd = -1;
static struct flightrec_info info;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int dev_open(void)
{
	int f = open(FLIGHTREC_DEVICE, O_RDONLY);

	if (f < 0)
		FAIL("open %s: %s", FLIGHTREC_DEVICE, strerror(errno));
	if (ioctl(f, FLIGHTREC_IOC_INFO, &info))
		FAIL("INFO: %s", strerror(errno));
	if (info.nr_cpus > MAXCPU)
		FAIL("nr_cpus %u > %d", info.nr_cpus, MAXCPU);
	return f;
}

/* STATS with the per-CPU event fields. */
static struct flightrec_cpu_stats_ev *stats(struct flightrec_stats *s)
{
	static struct flightrec_cpu_stats_ev st[MAXCPU];

	memset(s, 0, sizeof(*s));
	s->buf = (uintptr_t)st;
	s->count = MAXCPU;
	s->flags = FLIGHTREC_STATS_EVENT;
	if (ioctl(fd, FLIGHTREC_IOC_STATS, s))
		FAIL("STATS: %s", strerror(errno));
	return st;
}

/* The produced and written counters of STATS, summed over the CPUs. */
static struct flightrec_cpu_stats cpu_totals(void)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats_ev *st = stats(&s);
	struct flightrec_cpu_stats t = { 0 };

	for (uint32_t c = 0; c < s.count; c++) {
		t.produced += st[c].s.produced;
		t.written += st[c].s.written;
	}
	return t;
}

static uint64_t produced(void)
{
	return cpu_totals().produced;
}

static uint64_t written(void)
{
	return cpu_totals().written;
}

static void spin_ms(uint64_t ms)
{
	uint64_t end = now_ns() + ms * 1000000ULL;

	while (now_ns() < end)
		;
}

/* Until `produced` has grown by @n (bounded): the counters sample. */
static uint64_t wait_produced(uint64_t n, int timeout_s, const char *what)
{
	uint64_t p0 = produced(), deadline = now_ns() + (uint64_t)timeout_s * 1000000000ULL;

	while (produced() < p0 + n) {
		if (now_ns() > deadline)
			FAIL("%s: produced +%llu in %d s, want +%llu", what,
			     (unsigned long long)(produced() - p0), timeout_s, (unsigned long long)n);
		spin_ms(20);
	}
	return produced() - p0;
}

static uint32_t list_markers(int f, struct flightrec_marker *m)
{
	struct flightrec_markers l = { .buf = (uintptr_t)m, .count = 64 };

	if (ioctl(f, FLIGHTREC_IOC_LIST_MARKERS, &l))
		FAIL("LIST_MARKERS: %s", strerror(errno));
	return l.count < 64 ? l.count : 64;
}

static uint32_t markers_of(pid_t pid, struct flightrec_marker *out)
{
	struct flightrec_marker m[64];
	uint32_t n = list_markers(fd, m), k = 0;

	for (uint32_t i = 0; i < n; i++)
		if ((pid_t)m[i].pid == pid) {
			if (out)
				*out = m[i];
			k++;
		}
	return k;
}

static void release_all(void)
{
	struct flightrec_marker m[64];
	uint32_t n = list_markers(fd, m);

	for (uint32_t i = 0; i < n; i++)
		if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, m[i].slot))
			FAIL("RELEASE_MARKER %u: %s", m[i].slot, strerror(errno));
}

static volatile uintptr_t null_addr;

static void crash_now(void)
{
	*(volatile int *)null_addr = 1;
}

/* The child's side of a crash: no core file (RLIMIT_CORE 0 still enters the dump). */
static void crash_setup(uid_t uid)
{
	struct rlimit rl = { 0, 0 };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setrlimit(RLIMIT_CORE, &rl);
	signal(SIGSEGV, SIG_DFL);
	if (uid != (uid_t)-1 && (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)))
		_exit(3);
}

/* A child that (as @uid unless -1) spins @ms, then dies of SIGSEGV. */
static pid_t spawn_crash(uid_t uid, uint64_t ms)
{
	pid_t p = fork();

	if (p == 0) {
		crash_setup(uid);
		spin_ms(ms);
		crash_now();
		_exit(0);
	}
	if (p < 0)
		FAIL("fork: %s", strerror(errno));
	return p;
}

static void wait_segv(pid_t p, const char *what)
{
	int status;

	if (waitpid(p, &status, 0) != p)
		FAIL("%s: waitpid %d: %s", what, p, strerror(errno));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		FAIL("%s: child %d did not die of SIGSEGV (status %#x)", what, p, status);
}

/* A marker becomes READY after its deferred copy: wait for it, bounded, in poll(). */
static void wait_marker(pid_t p, struct flightrec_marker *out, const char *what)
{
	uint64_t deadline = now_ns() + 60000000000ULL;

	while (!markers_of(p, out)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_ns()) / 1000000);

		if (now_ns() > deadline || poll(&pf, 1, left > 0 ? left : 1) < 0)
			FAIL("%s: no marker for pid %d within 60 s", what, p);
	}
}

/* ---- one crash, one marker ---- */

static atomic_int ready, go;

static void *fault_thread(void *arg)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET((int)(uintptr_t)arg % info.nr_cpus, &set);
	sched_setaffinity(0, sizeof(set), &set);
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		;
	crash_now();
	return NULL;
}

/*
 * @rounds processes, each with 2 threads per CPU pinned round-robin, all
 * released at once to store through NULL.  Every process must get exactly
 * one marker; threads that reached the hook before the dump killed them are
 * counted in markers_coalesced.
 */
static int cmd_threads(int rounds)
{
	struct flightrec_stats s0, s1;
	uint32_t nt = 2 * info.nr_cpus;

	if (info.max_markers < 2)
		FAIL("threads: needs >= 2 marker slots (else a second marker could not be taken anyway)");
	stats(&s0);
	for (int r = 0; r < rounds; r++) {
		struct flightrec_marker mk;
		pid_t p = fork();

		if (p == 0) {
			pthread_t t[2 * MAXCPU];

			crash_setup((uid_t)-1);
			for (uint32_t i = 0; i < nt; i++)
				pthread_create(&t[i], NULL, fault_thread, (void *)(uintptr_t)i);
			while (atomic_load(&ready) < (int)nt)
				;
			atomic_store(&go, 1);
			for (;;)
				pause();
		}
		wait_segv(p, "threads");
		wait_marker(p, &mk, "threads");
		if (markers_of(p, NULL) != 1)
			FAIL("threads round %d: %u markers for pid %d", r, markers_of(p, NULL), p);
		release_all();
	}
	stats(&s1);
	if (s1.markers_taken - s0.markers_taken != (uint64_t)rounds ||
	    s1.markers_dropped != s0.markers_dropped)
		FAIL("threads: markers_taken +%llu dropped +%llu for %d crashing processes",
		     (unsigned long long)(s1.markers_taken - s0.markers_taken),
		     (unsigned long long)(s1.markers_dropped - s0.markers_dropped), rounds);
	printf("%d processes x %u threads crashing at once: one marker each; %u more threads reached the hook (markers_coalesced)\n",
	       rounds, nt, s1.markers_coalesced - s0.markers_coalesced);
	return 0;
}

/* ---- per-uid limit ---- */

static int cmd_uidloop(int n)
{
	struct flightrec_stats s0, s1;
	struct flightrec_marker m[64], mk;
	uint32_t nm;
	pid_t p;

	if (!info.markers_per_uid || info.markers_per_uid >= info.max_markers)
		FAIL("uidloop: markers_per_uid %u of %u slots leaves none for another uid",
		     info.markers_per_uid, info.max_markers);
	stats(&s0);
	for (int i = 0; i < n; i++) {
		p = spawn_crash(1000, 0);
		wait_segv(p, "uid 1000");
	}
	p = spawn_crash(1001, 50);
	wait_segv(p, "uid 1001");
	wait_marker(p, &mk, "uid 1001");
	stats(&s1);
	nm = list_markers(fd, m);
	if (nm != info.markers_per_uid + 1 ||
	    s1.markers_uid_limited - s0.markers_uid_limited != (uint32_t)n - info.markers_per_uid ||
	    s1.markers_taken - s0.markers_taken != info.markers_per_uid + 1)
		FAIL("uidloop: %u markers (want %u), uid_limited +%u (want %u), taken +%llu",
		     nm, info.markers_per_uid + 1, s1.markers_uid_limited - s0.markers_uid_limited,
		     n - info.markers_per_uid, (unsigned long long)(s1.markers_taken - s0.markers_taken));
	for (uint32_t i = 0; i < nm; i++)
		if (m[i].pid != (uint32_t)p && m[i].pid == 0)
			FAIL("uidloop: marker %u without a pid", i);
	release_all();
	printf("uid 1000 crashed %d times: %u marker(s) (markers_per_uid %u of %u slots), %u refused by the per-uid limit; uid 1001's crash then got slot %u\n",
	       n, info.markers_per_uid, info.markers_per_uid, info.max_markers,
	       s1.markers_uid_limited - s0.markers_uid_limited, mk.slot);
	return 0;
}

/* ---- no hook ---- */

static int cmd_nohook(void)
{
	struct flightrec_stats s0, s1;
	struct flightrec_marker m[64];
	uint64_t got;
	pid_t p;

	stats(&s0);
	if (s0.crash_hook != FLIGHTREC_HOOK_NONE || s0.crash_hook_error != -ENOENT)
		FAIL("nohook: crash_hook %u error %d, want NONE (%u) and -ENOENT", s0.crash_hook,
		     s0.crash_hook_error, FLIGHTREC_HOOK_NONE);
	p = spawn_crash((uid_t)-1, 0);
	wait_segv(p, "nohook");
	stats(&s1);
	if (s1.markers_taken || s1.markers_dropped || list_markers(fd, m))
		FAIL("nohook: a crash without a hook: markers_taken %llu dropped %llu",
		     (unsigned long long)s1.markers_taken, (unsigned long long)s1.markers_dropped);
	got = wait_produced(200, 120, "nohook");
	printf("no crash hook (STATS crash_hook NONE, error %d): a crash left no marker; sampling went on (+%llu samples)\n",
	       s0.crash_hook_error, (unsigned long long)got);
	return 0;
}

/* ---- FREEZE per open file ---- */

static int frozen(void)
{
	struct flightrec_info in;

	if (ioctl(fd, FLIGHTREC_IOC_INFO, &in))
		FAIL("INFO: %s", strerror(errno));
	return in.frozen;
}

/* Spinning @ms, written must stay put (frozen) or grow (thawed). */
static void expect_writing(int want, const char *what)
{
	uint64_t w0 = written(), deadline = now_ns() + 120000000000ULL;

	if (!want) {
		spin_ms(300);
		if (written() != w0)
			FAIL("freeze2 %s: %llu records written while frozen", what,
			     (unsigned long long)(written() - w0));
		return;
	}
	while (written() < w0 + 20) {
		if (now_ns() > deadline)
			FAIL("freeze2 %s: nothing written after the last THAW", what);
		spin_ms(20);
	}
}

static int cmd_freeze2(void)
{
	int a = dev_open(), b = dev_open();

	if (ioctl(a, FLIGHTREC_IOC_FREEZE, 0) || ioctl(b, FLIGHTREC_IOC_FREEZE, 0))
		FAIL("FREEZE: %s", strerror(errno));
	/* Idempotent per file: a second FREEZE by a is not a second freeze. */
	if (ioctl(a, FLIGHTREC_IOC_FREEZE, 0) || ioctl(a, FLIGHTREC_IOC_THAW, 0))
		FAIL("FREEZE/THAW a: %s", strerror(errno));
	if (!frozen())
		FAIL("freeze2: a's THAW unfroze b's freeze");
	expect_writing(0, "after a's THAW");
	if (ioctl(b, FLIGHTREC_IOC_THAW, 0))
		FAIL("THAW b: %s", strerror(errno));
	if (frozen())
		FAIL("freeze2: still frozen after both THAWed");
	expect_writing(1, "after b's THAW");
	/* Closing a file drops its freeze. */
	if (ioctl(a, FLIGHTREC_IOC_FREEZE, 0) || ioctl(b, FLIGHTREC_IOC_FREEZE, 0))
		FAIL("FREEZE: %s", strerror(errno));
	close(a);
	if (!frozen())
		FAIL("freeze2: closing a unfroze b's freeze");
	close(b);
	if (frozen())
		FAIL("freeze2: still frozen after both files closed");
	expect_writing(1, "after close");
	printf("FREEZE by two files: one's THAW kept the rings frozen (nothing written), the other's resumed them; closing a frozen file drops its freeze\n");
	return 0;
}

/* ---- SIDEBAND LOST records ---- */

static struct flightrec_sideband sbuf[4096];

/* Drain SIDEBAND; returns records read, adds LOST counts to *lost. */
static size_t drain_sb(uint64_t *lost, uint64_t *next, uint32_t *last_type)
{
	size_t total = 0;

	for (;;) {
		struct flightrec_read r = { .ring = FLIGHTREC_RING_SIDEBAND, .buf = (uintptr_t)sbuf,
					    .buf_len = sizeof(sbuf) };
		size_t n;

		if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
			FAIL("READ_RING SIDEBAND: %s", strerror(errno));
		if (*next && r.first != *next)
			FAIL("sideband: read from %llu, previous read ended at %llu",
			     (unsigned long long)r.first, (unsigned long long)*next);
		*next = r.next;
		n = r.bytes / sizeof(sbuf[0]);
		for (size_t i = 0; i < n; i++) {
			if (sbuf[i].type == FLIGHTREC_SB_LOST) {
				if (!sbuf[i].len || sbuf[i].start > sbuf[i].time_ns)
					FAIL("LOST record len %llu start %llu time %llu",
					     (unsigned long long)sbuf[i].len,
					     (unsigned long long)sbuf[i].start,
					     (unsigned long long)sbuf[i].time_ns);
				*lost += sbuf[i].len;
				if (i + 1 == n && r.next == r.head)
					FAIL("LOST record last in the ring: no record after the gap");
			}
			*last_type = sbuf[i].type;
		}
		total += n;
		if (!n)
			return total;
	}
}

static void fork_exit(int n)
{
	for (int i = 0; i < n; i++) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		waitpid(p, NULL, 0);
	}
}

/*
 * Run with sideband_kb=4 (8 records).  Fork/exit storms overflow the ring;
 * after a drain the next record is preceded by LOST, and the LOST counts add
 * up to sideband_dropped.  A READ_RING whose struct cannot be written back
 * (read-only page) fails with EFAULT and consumes nothing.
 */
static int cmd_sblost(void)
{
	uint64_t lost = 0, next = 0, cap = info.sideband_ring_bytes / sizeof(sbuf[0]);
	struct flightrec_stats s;
	struct flightrec_read *ro;
	uint32_t last = 0;
	size_t n;

	if (cap > 64)
		FAIL("sblost: load with sideband_kb=4 (ring of %llu records)", (unsigned long long)cap);
	drain_sb(&lost, &next, &last);
	fork_exit(4 * (int)cap);	/* 2 records each: overflows */
	n = drain_sb(&lost, &next, &last);
	stats(&s);
	if (!s.sideband_dropped)
		FAIL("sblost: nothing dropped after %llu fork/exit pairs", (unsigned long long)(4 * cap));
	fork_exit(1);	/* the first record after the gap brings the LOST record */
	n += drain_sb(&lost, &next, &last);
	stats(&s);
	if (lost != s.sideband_dropped || !lost)
		FAIL("sblost: LOST records count %llu, sideband_dropped %llu", (unsigned long long)lost,
		     (unsigned long long)s.sideband_dropped);

	/* A failed copy-out consumes nothing. */
	fork_exit(1);
	ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(ro, 0, sizeof(*ro));
	ro->ring = FLIGHTREC_RING_SIDEBAND;
	ro->buf = (uintptr_t)sbuf;
	ro->buf_len = sizeof(sbuf);
	mprotect(ro, 4096, PROT_READ);
	if (ioctl(fd, FLIGHTREC_IOC_READ_RING, ro) == 0 || errno != EFAULT)
		FAIL("sblost: READ_RING into a read-only struct: %s", strerror(errno));
	{
		struct flightrec_read r = { .ring = FLIGHTREC_RING_SIDEBAND, .buf = 8,
					    .buf_len = sizeof(sbuf) };

		if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r) == 0 || errno != EFAULT)
			FAIL("sblost: READ_RING into a bad buffer: %s", strerror(errno));
	}
	{
		uint64_t before = next;
		size_t m = drain_sb(&lost, &next, &last);

		if (!m || next - before != m)
			FAIL("sblost: after the failed reads %zu records from %llu", m,
			     (unsigned long long)before);
		n += m;
	}
	printf("sideband ring of %llu records: %llu dropped, all announced by LOST records before the next record; %zu records read; failed copy-outs consumed nothing\n",
	       (unsigned long long)cap, (unsigned long long)lost, n);
	return 0;
}

/* ---- poll() ---- */

static int cmd_poll(void)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	struct flightrec_marker m[64], mk;
	uint64_t t0, t1;
	int r;
	pid_t p;

	list_markers(fd, m);
	if (poll(&pf, 1, 0) != 0)
		FAIL("poll: readable with no new marker (revents %#x)", pf.revents);
	t0 = now_ns();
	p = spawn_crash((uid_t)-1, 300);
	r = poll(&pf, 1, 60000);
	t1 = now_ns();
	if (r != 1 || !(pf.revents & POLLIN))
		FAIL("poll: returned %d revents %#x within 60 s of a crash", r, pf.revents);
	wait_segv(p, "poll");
	if (markers_of(p, &mk) != 1)
		FAIL("poll: woken, but no marker of pid %d listed", p);
	if (poll(&pf, 1, 0) != 0)
		FAIL("poll: still readable after LIST_MARKERS");
	if (t1 < mk.time_ns)
		FAIL("poll: woke at %llu before the crash at %llu", (unsigned long long)t1,
		     (unsigned long long)mk.time_ns);
	release_all();
	printf("poll() slept until the crash and woke %.3f ms after it (blocked %.0f ms); not readable again after LIST_MARKERS\n",
	       (t1 - mk.time_ns) / 1e6, (t1 - t0) / 1e6);
	return 0;
}

/* ---- throttling and counter state ---- */

/*
 * Run with kernel.perf_event_max_sample_rate lowered below the module's rate:
 * the kernel throttles the counters, STATS counts it, and every online CPU's
 * counter is ACTIVE with time_running <= time_enabled.
 */
static int cmd_throttle(void)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats_ev *st;
	uint64_t thr = 0, deadline = now_ns() + 120000000000ULL;
	int online = 0;

	for (;;) {
		spin_ms(200);
		st = stats(&s);
		thr = 0;
		for (uint32_t c = 0; c < s.count; c++)
			thr += st[c].throttled;
		if (thr)
			break;
		if (now_ns() > deadline)
			FAIL("throttle: no throttled period in 120 s");
	}
	for (uint32_t c = 0; c < s.count; c++) {
		if (!st[c].s.online)
			continue;
		online++;
		if (st[c].event_state != FLIGHTREC_EVSTATE_ACTIVE || !st[c].time_enabled ||
		    st[c].time_running > st[c].time_enabled)
			FAIL("throttle: cpu %u state %d enabled %llu running %llu", c,
			     st[c].event_state, (unsigned long long)st[c].time_enabled,
			     (unsigned long long)st[c].time_running);
	}
	printf("%llu throttled periods counted on %d online CPUs; counters ACTIVE, cpu0 enabled %.2f s running %.2f s\n",
	       (unsigned long long)thr, online, st[0].time_enabled / 1e9, st[0].time_running / 1e9);
	return 0;
}

/* ---- cost per crash ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Spinners on every CPU until each online CPU's DATA and AUX rings are full,
 * so a crash copies whole rings: the worst case.  Bounded (240 s): 8 vCPUs
 * on a loaded 2-core TCG host may not get there; then the figures are for
 * what the rings held, which the bytes copied say.  Returns 1 if full.
 */
static int fill_rings(void)
{
	uint64_t cap = info.data_ring_bytes;	/* DATA positions are bytes */
	uint64_t deadline = now_ns() + 240000000000ULL;
	pid_t kids[MAXCPU];

	for (;;) {
		struct flightrec_stats s;
		struct flightrec_cpu_stats_ev *st;
		int full = 1;

		for (uint32_t k = 0; k < info.nr_cpus; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				cpu_set_t set;

				CPU_ZERO(&set);
				CPU_SET(k, &set);
				sched_setaffinity(0, sizeof(set), &set);
				spin_ms(500);
				_exit(0);
			}
		}
		for (uint32_t k = 0; k < info.nr_cpus; k++)
			waitpid(kids[k], NULL, 0);
		st = stats(&s);
		for (uint32_t c = 0; c < s.count; c++)
			if (st[c].s.online && (st[c].s.data_head < cap ||
					       st[c].s.aux_head < info.aux_ring_bytes))
				full = 0;
		if (full)
			return 1;
		if (now_ns() > deadline)
			return 0;
	}
}

static int cmd_cost(int n)
{
	uint64_t hook[64], copy[64], bytes[64];
	struct flightrec_stats s;
	struct flightrec_cpu_stats_ev *st = stats(&s);
	int online = 0, full;

	if (n < 1 || n > 64)
		FAIL("cost: 1..64 crashes");
	for (uint32_t c = 0; c < s.count; c++)
		online += st[c].s.online != 0;
	full = fill_rings();
	for (int i = 0; i < n; i++) {
		struct flightrec_marker mk;
		pid_t p = spawn_crash((uid_t)-1, 100);

		wait_segv(p, "cost");
		wait_marker(p, &mk, "cost");
		hook[i] = mk.hook_ns;
		copy[i] = mk.copy_ns;
		bytes[i] = mk.copied_bytes;
		release_all();
	}
	qsort(hook, n, sizeof(hook[0]), cmp_u64);
	qsort(copy, n, sizeof(copy[0]), cmp_u64);
	qsort(bytes, n, sizeof(bytes[0]), cmp_u64);
	/* The crash record: at most a PAD record and the largest record, and its blob. */
	if (!hook[n / 2] || bytes[n - 1] > (uint64_t)online * (info.data_ring_bytes + info.aux_ring_bytes) +
	    2 * FLIGHTREC_SAMPLE_MAX_SIZE + sizeof(struct flightrec_aux) + info.stack_bytes)
		FAIL("cost: hook %llu ns, %llu bytes copied: over the bound for %d online CPUs",
		     (unsigned long long)hook[n / 2], (unsigned long long)bytes[n - 1], online);
	printf("FLIGHTREC-VM-BENCH crash_cost cpus=%u online=%d rings_full=%d crashes=%d hook_ns_median=%llu hook_ns_max=%llu copy_ns_median=%llu copy_ns_max=%llu copied_bytes_median=%llu copied_bytes_max=%llu bound_bytes=%llu\n",
	       info.nr_cpus, online, full, n, (unsigned long long)hook[n / 2],
	       (unsigned long long)hook[n - 1], (unsigned long long)copy[n / 2],
	       (unsigned long long)copy[n - 1], (unsigned long long)bytes[n / 2],
	       (unsigned long long)bytes[n - 1],
	       (unsigned long long)(online * (info.data_ring_bytes + info.aux_ring_bytes)));
	printf("%d crashes on %d online CPUs: hook median %llu ns max %llu ns, copy median %.2f ms, %llu bytes copied (bound %llu)\n",
	       n, online, (unsigned long long)hook[n / 2], (unsigned long long)hook[n - 1],
	       copy[n / 2] / 1e6, (unsigned long long)bytes[n / 2],
	       (unsigned long long)(online * (info.data_ring_bytes + info.aux_ring_bytes)));
	return 0;
}

/* ---- SIDEBAND paths during renames ---- */

#define SBR "/tmp/sbrename"
#define SBR_SUB "/d1/d2/d3/d4/d5/d6/d7/d8"

static atomic_int sbr_stop;

static void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);	/* best effort: 1 CPU is fine */
}

/* Every rename of a directory bumps rename_lock's sequence. */
static void *sbr_renamer(void *arg)
{
	unsigned long *n = arg;

	pin_cpu(1);
	while (!atomic_load(&sbr_stop)) {
		if (rename(SBR "/a", SBR "/b") || rename(SBR "/b", SBR "/a"))
			FAIL("sbrename: rename: %s", strerror(errno));
		*n += 2;
	}
	return NULL;
}

static void sbr_setup(ino_t *ino)
{
	char buf[65536];
	struct stat st;
	ssize_t n;
	int in, out;

	if (system("rm -rf " SBR " && mkdir -p " SBR "/a" SBR_SUB))
		FAIL("sbrename: mkdir failed");
	in = open("/bin/true", O_RDONLY);
	out = open(SBR "/a" SBR_SUB "/true", O_WRONLY | O_CREAT | O_EXCL, 0755);
	if (in < 0 || out < 0)
		FAIL("sbrename: copy /bin/true: %s", strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			FAIL("sbrename: write: %s", strerror(errno));
	if (n < 0 || fstat(out, &st))
		FAIL("sbrename: copy: %s", strerror(errno));
	close(in);
	close(out);
	*ino = st.st_ino;
}

/* Checks what SIDEBAND holds about @ino; counts records with/without a path. */
static void sbr_check(ino_t ino, unsigned long *with, unsigned long *without)
{
	static const char *const ok[] = { SBR "/a" SBR_SUB "/true", SBR "/b" SBR_SUB "/true" };

	for (;;) {
		struct flightrec_read r = { .ring = FLIGHTREC_RING_SIDEBAND, .buf = (uintptr_t)sbuf,
					    .buf_len = sizeof(sbuf) };
		size_t n;

		if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
			FAIL("READ_RING SIDEBAND: %s", strerror(errno));
		n = r.bytes / sizeof(sbuf[0]);
		if (!n)
			return;
		for (size_t i = 0; i < n; i++) {
			const struct flightrec_sideband *b = &sbuf[i];

			if ((b->type != FLIGHTREC_SB_MMAP && b->type != FLIGHTREC_SB_EXEC) ||
			    b->ino != ino)
				continue;
			if (!b->path[0] && (b->flags & FLIGHTREC_SB_PATH_TRUNC))
				++*without;
			else if (!strcmp(b->path, ok[0]) || !strcmp(b->path, ok[1]))
				++*with;
			else
				FAIL("sbrename: record type %u has path '%.200s' flags %#x", b->type,
				     b->path, b->flags);
		}
	}
}

static int cmd_sbrename(int secs)
{
	unsigned long renames = 0, maps = 0, execs = 0, with = 0, without = 0;
	char *const argv[] = { "true", NULL }, *const envp[] = { NULL };
	uint64_t end = now_ns() + (uint64_t)secs * 1000000000ULL;
	pthread_t th;
	ino_t ino;
	int dfd;

	sbr_setup(&ino);
	dfd = open(SBR "/a" SBR_SUB, O_PATH | O_DIRECTORY);
	if (dfd < 0)
		FAIL("sbrename: open dir: %s", strerror(errno));
	sbr_check(0, &with, &without);	/* drain what came before */
	pin_cpu(0);
	if (pthread_create(&th, NULL, sbr_renamer, &renames))
		FAIL("sbrename: pthread_create failed");
	while (now_ns() < end) {
		int f = openat(dfd, "true", O_RDONLY);
		void *p = f < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, f, 0);

		if (p == MAP_FAILED)
			FAIL("sbrename: map: %s", strerror(errno));
		munmap(p, 4096);
		close(f);
		maps++;
		if (maps % 8 == 0) {
			pid_t c = fork();

			if (c == 0) {
				execveat(dfd, "true", argv, envp, 0);
				_exit(127);
			}
			if (c < 0 || waitpid(c, NULL, 0) != c)
				FAIL("sbrename: fork/wait: %s", strerror(errno));
			execs++;
			sbr_check(ino, &with, &without);
		}
	}
	atomic_store(&sbr_stop, 1);
	pthread_join(th, NULL);
	sbr_check(ino, &with, &without);
	if (!with)
		FAIL("sbrename: no MMAP/EXEC record of the file with its path (%lu without)", without);
	printf("%lu renames, %lu maps, %lu execs: %lu records with a true path, %lu without\n",
	       renames, maps, execs, with, without);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: fr_vm_harden threads|uidloop|nohook|freeze2|sblost|poll|throttle|cost|sbrename ...");
	fd = dev_open();
	if (!strcmp(argv[1], "threads") && argc > 2)
		return cmd_threads(atoi(argv[2]));
	if (!strcmp(argv[1], "uidloop") && argc > 2)
		return cmd_uidloop(atoi(argv[2]));
	if (!strcmp(argv[1], "nohook"))
		return cmd_nohook();
	if (!strcmp(argv[1], "freeze2"))
		return cmd_freeze2();
	if (!strcmp(argv[1], "sblost"))
		return cmd_sblost();
	if (!strcmp(argv[1], "poll"))
		return cmd_poll();
	if (!strcmp(argv[1], "throttle"))
		return cmd_throttle();
	if (!strcmp(argv[1], "cost") && argc > 2)
		return cmd_cost(atoi(argv[2]));
	if (!strcmp(argv[1], "sbrename") && argc > 2)
		return cmd_sbrename(atoi(argv[2]));
	FAIL("unknown command %s", argv[1]);
}
