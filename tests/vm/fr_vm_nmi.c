/*
 * fr_vm_test nmi SECONDS PARAMS_DIR (issue 12 item 2): flightrec.ko's sample
 * function run from NMI context by tests/vm/fr_nmi_torture.ko (loaded by
 * guest_run.sh after flightrec.ko test_nmi=1; PARAMS_DIR is its
 * /sys/module/.../parameters), while this process drives, for SECONDS:
 * fork/exec/exit, mmap/munmap (anonymous and executable file mappings, which
 * the sideband hooks see), FREEZE/READ/THAW and crashes with their markers,
 * with two user-mode spinners (the torture module's kernel threads storm
 * vmalloc/vfree).  Pass: the NMI rate reached >= 2 kHz per CPU, flightrec
 * refused none, its per-CPU produced count equals the NMIs handled there
 * (the NMI handler is the rings' only writer), every STATS identity is exact,
 * every crash got a marker or was counted dropped, and the spinners' samples
 * carry their user frames, both those taken in user mode and those taken in
 * the kernel (task_pt_regs()), tallied over every READ of the run.  A hang or splat fails the run in
 * guest_run.sh (the guest panics on soft lockups, RCU stalls and warnings).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/vm/fr_vm_test.h"

#define NT_MAX_CPUS 256

struct nt_stats {
	uint64_t time_ns;
	uint64_t ns[NT_MAX_CPUS], sent[NT_MAX_CPUS], nmis[NT_MAX_CPUS], user[NT_MAX_CPUS], refused[NT_MAX_CPUS];
	uint64_t ticks[NT_MAX_CPUS], self[NT_MAX_CPUS];
	uint64_t vmalloc;
};

/* The torture module's stats parameter (see fr_nmi_torture.c nt_stats_get). */
static void nt_read(const char *dir, struct nt_stats *st)
{
	char path[512], line[256];
	FILE *f;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/stats", dir);
	f = fopen(path, "r");
	if (!f)
		FAIL("open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long t, sent, n, u, r, v, ns, tk, sf;
		int cpu, err;

		if (sscanf(line, "time_ns %llu last_err %d", &t, &err) == 2)
			st->time_ns = t;
		else if (sscanf(line, "cpu %d sent %llu nmis %llu user %llu refused %llu vmalloc %llu ns %llu"
				" ticks %llu self %llu", &cpu, &sent, &n, &u, &r, &v, &ns, &tk, &sf) == 9 &&
			 cpu >= 0 && cpu < NT_MAX_CPUS) {
			st->ticks[cpu] = tk;
			st->self[cpu] = sf;
			st->ns[cpu] = ns;
			st->sent[cpu] = sent;
			st->nmis[cpu] = n;
			st->user[cpu] = u;
			st->refused[cpu] = r;
			st->vmalloc += v;
		}
	}
	fclose(f);
}

static void nt_write(const char *dir, const char *param, const char *val)
{
	char path[512];
	int f;

	snprintf(path, sizeof(path), "%s/%s", dir, param);
	f = open(path, O_WRONLY);
	if (f < 0 || write(f, val, strlen(val)) != (ssize_t)strlen(val))
		FAIL("write %s: %s", path, strerror(errno));
	close(f);
}

/* The spinners' frame: spin_a's caller, whose range the user frames must hit. */
SAMPLED static void nmi_spinner(void)
{
	for (;;)
		spin_a(1000);
}

static pid_t worker(void (*fn)(uint64_t), uint64_t end)
{
	pid_t p = fork();

	if (p == 0) {
		die_with_parent();
		fn(end);
		_exit(0);
	}
	if (p < 0)
		FAIL("fork: %s", strerror(errno));
	return p;
}

struct counts {
	uint64_t execs, maps;
};

static struct counts *shared;

static void fork_exec_storm(uint64_t end)
{
	while (now_ns() < end) {
		pid_t p = fork();

		if (p == 0) {
			execl("/proc/self/exe", "fr_vm_test", "spin", "1", (char *)NULL);
			_exit(127);
		}
		if (p > 0 && waitpid(p, NULL, 0) == p)
			__atomic_add_fetch(&shared->execs, 1, __ATOMIC_RELAXED);
	}
}

static void mmap_storm(uint64_t end)
{
	int exe = open("/proc/self/exe", O_RDONLY);

	for (uint64_t i = 0; now_ns() < end; i++) {
		size_t len = 4096 * (1 + i % 256);
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			continue;
		for (size_t o = 0; o < len; o += 4096)
			p[o] = 1;
		munmap(p, len);
		if (exe >= 0 && i % 8 == 0) {
			/* An executable file mapping: the sideband's mmap hook records it. */
			p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, exe, 0);
			if (p != MAP_FAILED)
				munmap(p, 4096);
		}
		__atomic_add_fetch(&shared->maps, 1, __ATOMIC_RELAXED);
	}
}

/*
 * The spinners' samples, tallied from every READ of the run (not only the
 * rings' last contents, which a burst of self-NMIs fills with kernel-mode
 * samples): @seen[cpu] is the highest sample seq counted, so a sample read
 * twice counts once.
 */
struct tally {
	pid_t spin[2];
	uint64_t lo, hi, clo, chi;
	uint64_t seen[NT_MAX_CPUS];
	uint64_t user, attributed, kernel, kattributed, kspin;
};

static void tally(struct tally *t, uint32_t cpu, const struct xsample *smp, size_t n)
{
	size_t first = n;

	/* Records are oldest first: step back to the first one not yet counted. */
	while (first > 0 && smp[first - 1].seq + 1 > t->seen[cpu])
		first--;
	for (size_t i = first; i < n; i++) {
		uint64_t u0 = smp[i].nr_uframes ? smp[i].uframes[0] : 0;
		uint64_t u1 = smp[i].nr_uframes >= 2 ? smp[i].uframes[1] : 0;

		t->seen[cpu] = smp[i].seq + 1;
		if ((pid_t)smp[i].pid != t->spin[0] && (pid_t)smp[i].pid != t->spin[1])
			continue;
		/*
		 * A spinner interrupted in the kernel (mostly: the self-NMI inside
		 * the timer interrupt that hit it) still carries its user stack,
		 * from task_pt_regs(): nmi_spinner is on it.  Not always as
		 * spin_a's caller: spin_a's clock_gettime() can be a system call
		 * (a TCG guest's clocksource may have no vDSO path), and the
		 * libc/vDSO leaf keeps no frame of its own.
		 */
		if (smp[i].mode == FLIGHTREC_MODE_KERNEL) {
			t->kernel++;
			t->kspin += u0 >= t->lo && u0 < t->hi && u1 >= t->clo && u1 < t->chi;
			for (uint32_t f = 0; f < smp[i].nr_uframes && f < FLIGHTREC_MAX_UFRAMES; f++)
				if (smp[i].uframes[f] >= t->clo && smp[i].uframes[f] < t->chi) {
					t->kattributed++;
					break;
				}
			continue;
		}
		if (smp[i].mode != FLIGHTREC_MODE_USER || smp[i].ip < t->lo || smp[i].ip >= t->hi)
			continue;
		t->user++;
		if (u0 == smp[i].ip && u1 >= t->clo && u1 < t->chi)
			t->attributed++;
	}
}

int cmd_nmi(int seconds, const char *dir)
{
	uint64_t end = now_ns() + (uint64_t)seconds * 1000000000ULL, next_crash = 0;
	uint64_t freezes = 0, crashes = 0, marker_seen = 0, lo, hi, clo, chi;
	uint64_t user_samples = 0, attributed = 0, ksamples = 0, kattributed = 0, kspin = 0;
	uint64_t taken0, dropped0;
	size_t cap = info.data_ring_bytes;
	char *buf = malloc(cap);
	struct flightrec_cpu_stats *st;
	struct flightrec_stats s;
	struct nt_stats a, b;
	pid_t spin[2], storm[2];
	static struct tally t;

	if (info.nr_cpus > NT_MAX_CPUS)
		FAIL("nmi: %u CPUs > %d", info.nr_cpus, NT_MAX_CPUS);
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	func_range("spin_a", (void *)spin_a, &lo, &hi);
	func_range("nmi_spinner", (void *)nmi_spinner, &clo, &chi);
	get_stats(&s);
	taken0 = s.markers_taken;
	dropped0 = s.markers_dropped;
	nt_read(dir, &a);
	for (int i = 0; i < 2; i++) {
		spin[i] = fork();
		if (spin[i] == 0) {
			die_with_parent();
			nmi_spinner();
		}
	}
	t.spin[0] = spin[0];
	t.spin[1] = spin[1];
	t.lo = lo;
	t.hi = hi;
	t.clo = clo;
	t.chi = chi;
	storm[0] = worker(fork_exec_storm, end);
	storm[1] = worker(mmap_storm, end);
	while (now_ns() < end) {
		if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
			FAIL("FREEZE: %s", strerror(errno));
		for (uint32_t c = 0; c < info.nr_cpus; c++) {
			struct flightrec_read r = { .cpu = c, .ring = FLIGHTREC_RING_DATA,
						    .buf = (uintptr_t)buf, .buf_len = cap };

			if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
				FAIL("READ_RING cpu %u: %s", c, strerror(errno));
			if (c < NT_MAX_CPUS) {
				struct xsample *x;
				size_t nx = decode_records(buf + r.data_offset, r.bytes, r.first, &x);

				tally(&t, c, x, nx);
				free(x);
			}
		}
		if (ioctl(fd, FLIGHTREC_IOC_THAW, 0))
			FAIL("THAW: %s", strerror(errno));
		freezes++;
		if (now_ns() >= next_crash) {
			struct flightrec_marker m[64];
			uint64_t taken;
			uint32_t n;

			/*
			 * A crash every 2 s; its marker (if any) is listed, then
			 * freed.  The hook counts it in markers_taken before the
			 * process dies; the marker is listed once the module's
			 * deferred copy made it READY, so wait for that.
			 */
			get_stats(&s);
			taken = s.markers_taken;
			wait_segv(spawn_crash(20, -1, -1), "nmi crash");
			crashes++;
			get_stats(&s);
			n = list_markers_wait(m, s.markers_taken - taken);
			for (uint32_t i = 0; i < n && i < 64; i++) {
				marker_seen++;
				if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, m[i].slot))
					FAIL("RELEASE_MARKER: %s", strerror(errno));
			}
			next_crash = now_ns() + 2000000000ULL;
		}
	}
	for (int i = 0; i < 2; i++)
		if (waitpid(storm[i], NULL, 0) != storm[i])
			FAIL("nmi: storm worker %d lost", storm[i]);
	/* Stop the NMIs while the spinners still run: the rings end with their samples. */
	nt_write(dir, "stop", "1");
	nt_read(dir, &b);
	for (int i = 0; i < 2; i++) {
		kill(spin[i], SIGKILL);
		waitpid(spin[i], NULL, 0);
	}

	double secs = (b.time_ns - a.time_ns) / 1e9, min_rate = 1e18;
	uint64_t checks0 = now_ns();
	char rates[512] = "";
	size_t rl = 0;

	st = get_stats(&s);
	check_invariants("nmi");
	for (uint32_t c = 0; c < s.count && c < NT_MAX_CPUS; c++) {
		double rate = (b.nmis[c] - a.nmis[c]) / secs;

		if (!st[c].online)
			continue;
		if (rate < min_rate)
			min_rate = rate;
		rl += snprintf(rates + rl, sizeof(rates) - rl,
			       "%scpu%u %.0f Hz (ticks %.0f/s, self-NMIs sent %.0f/s, cross %.0f/s, %llu user,"
			       " %llu merged, %.0f us per sample)",
			       rl ? ", " : "", c, rate, (b.ticks[c] - a.ticks[c]) / secs,
			       (b.self[c] - a.self[c]) / secs,
			       (b.sent[c] - a.sent[c] - (b.self[c] - a.self[c])) / secs,
			       (unsigned long long)(b.user[c] - a.user[c]),
			       (unsigned long long)(b.sent[c] - b.nmis[c]),
			       (b.ns[c] - a.ns[c]) / 1e3 / (double)(b.nmis[c] - a.nmis[c] + !(b.nmis[c] - a.nmis[c])));
		if (rl >= sizeof(rates))
			rl = sizeof(rates) - 1;
		if (b.refused[c])
			FAIL("nmi: cpu %u: flightrec refused %llu samples", c,
			     (unsigned long long)b.refused[c]);
		/* The torture module's NMI handler is the rings' only writer. */
		if (st[c].produced != b.nmis[c])
			FAIL("nmi: cpu %u: produced %llu != NMIs handled %llu", c,
			     (unsigned long long)st[c].produced, (unsigned long long)b.nmis[c]);
	}
	if (s.markers_taken + s.markers_dropped - taken0 - dropped0 != crashes ||
	    marker_seen != s.markers_taken - taken0)
		FAIL("nmi: %llu crashes, markers taken %llu dropped %llu listed %llu",
		     (unsigned long long)crashes, (unsigned long long)(s.markers_taken - taken0),
		     (unsigned long long)(s.markers_dropped - dropped0),
		     (unsigned long long)marker_seen);
	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct xsample *smp;
		size_t n = read_data(c, &smp, NULL);

		tally(&t, c, smp, n);
		free(smp);
	}
	user_samples = t.user;
	attributed = t.attributed;
	ksamples = t.kernel;
	kattributed = t.kattributed;
	kspin = t.kspin;
	if (user_samples < 10 || attributed * 10 < user_samples * 9)
		FAIL("nmi: spinners' user samples in spin_a: %llu, with spin_a <- nmi_spinner frames %llu",
		     (unsigned long long)user_samples, (unsigned long long)attributed);
	if (ksamples < 10 || kattributed * 10 < ksamples * 9)
		FAIL("nmi: spinners' kernel-mode samples %llu, with nmi_spinner in their user frames %llu"
		     " (%llu in spin_a <- nmi_spinner)", (unsigned long long)ksamples,
		     (unsigned long long)kattributed, (unsigned long long)kspin);
	/*
	 * Last, so that a run on a starved host (TCG guest time runs on while
	 * the host does not run the vCPU, and an NMI reaches a vCPU only when
	 * it runs) still shows whether everything else held.
	 */
	if (secs < seconds * 0.9 || min_rate < 2000)
		FAIL("nmi: everything else held, but the NMI rate was too low over %.1f s: %s; %llu user"
		     " samples of the spinners, %llu with their frames", secs, rates,
		     (unsigned long long)user_samples, (unsigned long long)attributed);
	printf("%.0f s of NMIs (checks %.1f s): %s; produced == NMIs per CPU, identities exact; %llu execs, %llu mmaps,"
	       " %llu vmalloc loops, %llu freeze/read/thaw, %llu crashes (%llu markers);"
	       " spinners' user samples %llu, %llu with user frames spin_a <- nmi_spinner;"
	       " kernel-mode %llu, %llu with nmi_spinner in their user frames (%llu interrupted in spin_a)\n",
	       secs, (now_ns() - checks0) / 1e9, rates, (unsigned long long)shared->execs, (unsigned long long)shared->maps,
	       (unsigned long long)(b.vmalloc - a.vmalloc), (unsigned long long)freezes,
	       (unsigned long long)crashes, (unsigned long long)marker_seen,
	       (unsigned long long)user_samples, (unsigned long long)attributed,
	       (unsigned long long)ksamples, (unsigned long long)kattributed, (unsigned long long)kspin);
	free(buf);
	return 0;
}
