/*
 * Guest-side scenarios for flightrec.ko (run inside the QEMU guest by
 * guest_run.sh).  Each subcommand exits 0 on PASS and prints one
 * "detail" line on stdout; guest_run.sh turns it into a
 * FLIGHTREC-VM-RESULT line.  Links only libc.
 */
#define _GNU_SOURCE
#include <asm/perf_regs.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/capability.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "module/uapi/flightrec.h"
#include "tests/vm/fr_vm_test.h"

int fd = -1;
struct flightrec_info info;

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void dev_open(void)
{
	fd = open(FLIGHTREC_DEVICE, O_RDONLY);
	if (fd < 0)
		FAIL("open %s: %s", FLIGHTREC_DEVICE, strerror(errno));
	if (ioctl(fd, FLIGHTREC_IOC_INFO, &info))
		FAIL("INFO: %s", strerror(errno));
}

struct flightrec_cpu_stats *get_stats(struct flightrec_stats *s)
{
	static struct flightrec_cpu_stats st[256];

	memset(s, 0, sizeof(*s));
	s->buf = (uintptr_t)st;
	s->count = 256;
	if (ioctl(fd, FLIGHTREC_IOC_STATS, s))
		FAIL("STATS: %s", strerror(errno));
	return st;
}

/* The function the crash and record scenarios look for in samples. */
SAMPLED void spin_a(uint64_t ms)
{
	uint64_t end = now_ns() + ms * 1000000ULL;
	volatile uint64_t x = 0;

	for (;;) {
		for (int i = 0; i < (1 << 16); i++)
			x = x * 3 + i;
		if (now_ns() > end)
			break;
	}
}

/* Workload children die with the test: a FAIL exit must not leave them holding its stdout. */
void die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static pid_t spawn_spin(uint64_t ms)
{
	pid_t p = fork();

	if (p == 0) {
		die_with_parent();
		spin_a(ms);
		_exit(0);
	}
	return p;
}

/* Read through a volatile pointer: the compiler cannot turn the store into a trap. */
static volatile uintptr_t null_addr;

/* The crashing thread: spin_a, then a store through NULL (SIGSEGV). */
SAMPLED void crash_after_spin(uint64_t ms)
{
	spin_a(ms);
	*(volatile int *)null_addr = 1;
}

/*
 * A child that dies of SIGSEGV in crash_after_spin(ms), without writing a
 * core file (RLIMIT_CORE 0: the kernel still enters the core dump routine,
 * where the crash hook sits).  With @gate_r >= 0 it first waits for EOF on
 * that pipe, so many children can be released at once.
 */
SAMPLED pid_t spawn_crash(uint64_t ms, int gate_r, int gate_w)
{
	pid_t p = fork();

	if (p == 0) {
		struct rlimit rl = { 0, 0 };
		char c;

		setrlimit(RLIMIT_CORE, &rl);
		signal(SIGSEGV, SIG_DFL);
		if (gate_w >= 0)
			close(gate_w);
		if (gate_r >= 0)
			while (read(gate_r, &c, 1) > 0)
				;
		crash_after_spin(ms);
		_exit(0);
	}
	return p;
}

void wait_segv(pid_t p, const char *what)
{
	int status;

	if (waitpid(p, &status, 0) != p)
		FAIL("%s: waitpid %d: %s", what, p, strerror(errno));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		FAIL("%s: child %d did not die of SIGSEGV (status %#x)", what, p, status);
}

/* Symbol lookup in an ELF file: size and file offset of @name. */
int elf_sym(const char *path, const char *name, uint64_t *vaddr, uint64_t *size,
	    uint64_t *fileoff)
{
	FILE *f = fopen(path, "rb");
	long len;
	char *b;
	int found = -1;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(len);
	if (fread(b, 1, len, f) != (size_t)len) {
		fclose(f);
		free(b);
		return -1;
	}
	fclose(f);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Shdr *sh = (Elf64_Shdr *)(b + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum && found; i++) {
		if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
			continue;
		Elf64_Sym *sym = (Elf64_Sym *)(b + sh[i].sh_offset);
		const char *str = b + sh[sh[i].sh_link].sh_offset;
		for (size_t j = 0; j < sh[i].sh_size / sizeof(*sym); j++) {
			if (strcmp(str + sym[j].st_name, name) || !sym[j].st_value)
				continue;
			*vaddr = sym[j].st_value;
			*size = sym[j].st_size;
			found = 0;
			break;
		}
	}
	if (!found) {
		Elf64_Phdr *ph = (Elf64_Phdr *)(b + eh->e_phoff);
		*fileoff = *vaddr;
		for (int i = 0; i < eh->e_phnum; i++)
			if (ph[i].p_type == PT_LOAD && *vaddr >= ph[i].p_vaddr &&
			    *vaddr < ph[i].p_vaddr + ph[i].p_memsz)
				*fileoff = *vaddr - ph[i].p_vaddr + ph[i].p_offset;
	}
	free(b);
	return found;
}

/*
 * Walk the variable-length DATA records in @bytes at @buf, the first at ring
 * position @first: every record's size is a sane multiple of 8 inside the
 * copy, its type known, a sample's @seq its own position and its frame
 * counts within the limits; a record never crosses FLIGHTREC_DATA_CHUNK.
 * Fails the test otherwise.  Returns the samples (malloc'd), pads skipped.
 */
size_t decode_records(const char *buf, uint64_t bytes, uint64_t first, struct xsample **out)
{
	size_t n = 0, cap = bytes / sizeof(struct flightrec_sample) + 1;
	struct xsample *x = calloc(cap, sizeof(*x));
	uint64_t off = 0;

	while (off < bytes) {
		struct flightrec_sample h;
		uint64_t pos = first + off;

		if (bytes - off < 8)
			FAIL("DATA: %llu stray bytes at %llu", (unsigned long long)(bytes - off),
			     (unsigned long long)pos);
		memcpy(&h, buf + off, bytes - off < sizeof(h) ? 8 : sizeof(h));
		if (h.size < 8 || h.size % 8 || h.size > bytes - off ||
		    pos / FLIGHTREC_DATA_CHUNK != (pos + h.size - 1) / FLIGHTREC_DATA_CHUNK)
			FAIL("DATA: bad record size %u at %llu", h.size, (unsigned long long)pos);
		if (h.type == FLIGHTREC_REC_PAD) {
			off += h.size;
			continue;
		}
		if (h.type != FLIGHTREC_REC_SAMPLE || h.seq != pos ||
		    h.nr_kframes > FLIGHTREC_MAX_KFRAMES || h.nr_uframes > FLIGHTREC_MAX_UFRAMES ||
		    h.size != sizeof(h) + 8 * (h.nr_kframes + h.nr_uframes))
			FAIL("DATA: bad record at %llu: type %u seq %llu size %u frames %u+%u", (unsigned long long)pos,
			     h.type, (unsigned long long)h.seq, h.size, h.nr_kframes, h.nr_uframes);
		x[n] = (struct xsample){ .time_ns = h.time_ns, .ip = h.ip, .aux_pos = h.aux_pos,
					 .seq = h.seq, .size = h.size, .aux_len = h.aux_len,
					 .cpu = h.cpu, .pid = h.pid, .tid = h.tid, .type = h.type,
					 .flags = h.flags, .mode = h.mode, .nr_kframes = h.nr_kframes,
					 .nr_uframes = h.nr_uframes, .abi = h.abi };
		memcpy(x[n].kframes, buf + off + sizeof(h), 8 * h.nr_kframes);
		memcpy(x[n].uframes, buf + off + sizeof(h) + 8 * h.nr_kframes, 8 * h.nr_uframes);
		n++;
		off += h.size;
	}
	*out = x;
	return n;
}

/* Read a CPU's whole DATA ring. Returns number of samples in *out (malloc'd). */
size_t read_data(uint32_t cpu, struct xsample **out, struct flightrec_read *rr)
{
	size_t cap = info.data_ring_bytes, n;
	char *buf = malloc(cap);
	struct flightrec_read r = { .cpu = cpu, .ring = FLIGHTREC_RING_DATA, .from = 0,
				    .buf = (uintptr_t)buf, .buf_len = cap };

	if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
		FAIL("READ_RING cpu %u: %s", cpu, strerror(errno));
	if (rr)
		*rr = r;
	n = decode_records(buf + r.data_offset, r.bytes, r.first, out);
	free(buf);
	return n;
}

static int cmd_record(void)
{
	pid_t p = spawn_spin(1500);
	size_t mine = 0, total = 0;
	uint64_t lo = (uintptr_t)spin_a, sz = 0, va, off;

	elf_sym("/proc/self/exe", "spin_a", &va, &sz, &off);
	waitpid(p, NULL, 0);
	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct xsample *s;
		size_t n = read_data(c, &s, NULL);

		total += n;
		for (size_t i = 0; i < n; i++)
			if ((pid_t)s[i].pid == p && s[i].ip >= lo && s[i].ip < lo + sz)
				mine++;
		free(s);
	}
	printf("samples=%zu in_spin_a_of_workload=%zu\n", total, mine);
	return mine > 0 ? 0 : 1;
}

int check_invariants(const char *what)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);
	for (uint32_t c = 0; c < s.count; c++) {
		/* records are overwritten exactly once the writer is round the ring */
		int ow = st[c].data_head > info.data_ring_bytes;
		uint64_t aow = st[c].aux_written > info.aux_ring_bytes ?
			       st[c].aux_written - info.aux_ring_bytes : 0;

		if (st[c].produced != st[c].written + st[c].dropped_frozen + st[c].dropped_size ||
		    (st[c].overwritten > 0) != ow || st[c].overwritten > st[c].written ||
		    st[c].aux_overwritten != aow || st[c].written * sizeof(struct flightrec_sample) > st[c].data_head)
			FAIL("%s: cpu %u inconsistent produced=%llu written=%llu frozen=%llu size=%llu overwritten=%llu",
			     what, c, (unsigned long long)st[c].produced,
			     (unsigned long long)st[c].written,
			     (unsigned long long)st[c].dropped_frozen,
			     (unsigned long long)st[c].dropped_size,
			     (unsigned long long)st[c].overwritten);
	}
	return 0;
}

/* Wait (bounded) until every online CPU's DATA head advanced by @adv records. */
static int wait_advance(uint64_t adv, int timeout_s, const char *what)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);
	uint64_t start[256];
	uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000ULL;
	pid_t kids[2];

	for (uint32_t c = 0; c < s.count; c++)
		start[c] = st[c].written;
	for (;;) {
		int done = 1;

		kids[0] = spawn_spin(300);
		kids[1] = spawn_spin(300);
		waitpid(kids[0], NULL, 0);
		waitpid(kids[1], NULL, 0);
		st = get_stats(&s);
		for (uint32_t c = 0; c < s.count; c++)
			if (st[c].online && st[c].written - start[c] <= adv)
				done = 0;
		if (done)
			return 0;
		if (now_ns() > deadline)
			FAIL("%s: rings did not advance by %llu records in %d s", what,
			     (unsigned long long)adv, timeout_s);
	}
}

static int cmd_check(void)
{
	check_invariants("check");
	wait_advance(16, 60, "check");
	check_invariants("check-after");
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);
	uint32_t online = 0;

	for (uint32_t c = 0; c < s.count; c++)
		online += st[c].online;
	printf("cpus=%u online=%u invariants=ok\n", s.count, online);
	return online == s.count ? 0 : 1;
}

static int cmd_loss(void)
{
	uint64_t cap = info.data_ring_bytes;
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st;
	uint64_t df = 0, ds = 0, w = 0, ow = 0;
	pid_t a, b;

	a = spawn_spin(800);
	b = spawn_spin(800);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	/*
	 * Only samples without a user context (idle, kernel threads) are written
	 * here: the spinners' all carry a user stack and are dropped for size.
	 * How many the spinners' 1.6 CPU-s leave depends on the kernel (once 55
	 * on PREEMPT_RT, fewer than one 4 KiB ring holds), so wait, bounded, for
	 * the now idle CPUs' samples to wrap a ring.
	 */
	for (uint64_t deadline = now_ns() + 30000000000ULL;;) {
		st = get_stats(&s);
		ow = 0;
		for (uint32_t c = 0; c < s.count; c++)
			ow += st[c].overwritten;
		if (ow)
			break;
		if (now_ns() > deadline)
			FAIL("loss: no ring was overwritten in 30 s of idle");
		usleep(20000);
	}
	ow = 0;
	if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
		FAIL("FREEZE: %s", strerror(errno));
	a = spawn_spin(300);
	waitpid(a, NULL, 0);
	check_invariants("loss");
	st = get_stats(&s);
	for (uint32_t c = 0; c < s.count; c++) {
		struct flightrec_read r;
		struct xsample *smp;
		size_t n = read_data(c, &smp, &r);
		/* frozen: the ring from its first whole chunk to the head */
		uint64_t head = st[c].data_head;
		uint64_t first = head > cap ? (head - cap + FLIGHTREC_DATA_CHUNK - 1) /
					      FLIGHTREC_DATA_CHUNK * FLIGHTREC_DATA_CHUNK : 0;

		free(smp);
		if (r.first != first || n != st[c].written - st[c].overwritten || r.lost != first ||
		    r.head != head || r.next != head)
			FAIL("loss: cpu %u read first=%llu lost=%llu n=%zu, stats written=%llu overwritten=%llu head=%llu",
			     c, (unsigned long long)r.first, (unsigned long long)r.lost, n,
			     (unsigned long long)st[c].written, (unsigned long long)st[c].overwritten,
			     (unsigned long long)head);
		df += st[c].dropped_frozen;
		ds += st[c].dropped_size;
		w += st[c].written;
		ow += st[c].overwritten;
	}
	ioctl(fd, FLIGHTREC_IOC_THAW, 0);
	printf("written=%llu overwritten=%llu dropped_frozen=%llu dropped_size=%llu ring=%llu bytes\n",
	       (unsigned long long)w, (unsigned long long)ow, (unsigned long long)df,
	       (unsigned long long)ds, (unsigned long long)cap);
	return (df && ds && ow) ? 0 : 1;
}

static char *snapshot(uint32_t slot, size_t *len)
{
	size_t total = 0, cap = 0;
	char *all = NULL;

	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		for (uint32_t ring = 0; ring < 2; ring++) {
			struct flightrec_marker_read r = { .slot = slot, .cpu = c, .ring = ring };

			if (ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r))
				FAIL("READ_MARKER query: %s", strerror(errno));
			cap = total + r.total_bytes + 32;
			all = realloc(all, cap);
			memcpy(all + total, &r.first, 16);
			total += 16;
			r.buf = (uintptr_t)(all + total);
			r.buf_len = r.total_bytes;
			if (ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r))
				FAIL("READ_MARKER: %s", strerror(errno));
			total += r.bytes;
		}
	}
	*len = total;
	return all;
}

/* Runtime address range [*lo, *hi) of function @name at @fn (size from the ELF symbol). */
void func_range(const char *name, void *fn, uint64_t *lo, uint64_t *hi)
{
	uint64_t va, sz = 0, off;

	if (elf_sym("/proc/self/exe", name, &va, &sz, &off) || !sz)
		FAIL("%s not found in /proc/self/exe", name);
	*lo = (uintptr_t)fn;
	*hi = *lo + sz;
}

/* LIST_MARKERS into @m (64 entries); returns the number stored. */
uint32_t list_markers(struct flightrec_marker *m)
{
	struct flightrec_markers l = { .buf = (uintptr_t)m, .count = 64 };

	if (ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l))
		FAIL("LIST_MARKERS: %s", strerror(errno));
	return l.count;
}

/*
 * A marker is READY once the module's deferred copy (after the crash hook)
 * has run, which may be just after the crashing process is reaped: wait for
 * it in poll() on the device, which wakes when a marker becomes READY
 * (bounded: 60 s).
 */
static void wait_markers_ready(void)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	poll(&pf, 1, 60000);
}

/* The marker of @pid into @out (waiting up to 60 s for it); returns 0, or -1 if there is none. */
int find_marker(pid_t pid, struct flightrec_marker *out)
{
	uint64_t deadline = now_ns() + 60000000000ULL;

	for (;;) {
		struct flightrec_marker m[64];
		uint32_t n = list_markers(m);

		for (uint32_t i = 0; i < n && i < 64; i++) {
			if ((pid_t)m[i].pid == pid) {
				*out = m[i];
				return 0;
			}
		}
		if (now_ns() > deadline)
			return -1;
		wait_markers_ready();
	}
}

/* LIST_MARKERS once @want markers are READY (waiting up to 60 s); returns the count. */
uint32_t list_markers_wait(struct flightrec_marker *m, uint32_t want)
{
	uint64_t deadline = now_ns() + 60000000000ULL;
	uint32_t n;

	while ((n = list_markers(m)) < want && now_ns() < deadline)
		wait_markers_ready();
	return n;
}

/* One CPU's preserved DATA or AUX history of a marker, whole, malloc'd. */
void *read_marker(uint32_t slot, uint32_t cpu, uint32_t ring, struct flightrec_marker_read *out)
{
	struct flightrec_marker_read r = { .slot = slot, .cpu = cpu, .ring = ring };
	void *buf;

	if (ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r))
		FAIL("READ_MARKER query slot %u cpu %u ring %u: %s", slot, cpu, ring,
		     strerror(errno));
	buf = malloc(r.total_bytes + 1);
	r.buf = (uintptr_t)buf;
	r.buf_len = r.total_bytes;
	if (ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r))
		FAIL("READ_MARKER slot %u cpu %u ring %u: %s", slot, cpu, ring, strerror(errno));
	if (r.bytes != r.total_bytes)
		FAIL("READ_MARKER copied %llu of %llu bytes", (unsigned long long)r.bytes,
		     (unsigned long long)r.total_bytes);
	*out = r;
	return buf;
}

/*
 * Wait (bounded) until @min_ns have passed since @since_ns and every online
 * CPU's rings have wrapped since the crash: its DATA head is a ring capacity
 * past @dend and its AUX head an AUX ring size past @aend, so every record and
 * byte the rings held at the crash has been overwritten.  Spinners on every
 * CPU do the overwriting meanwhile.
 */
static void wait_wrapped(const uint64_t *dend, const uint64_t *aend, uint64_t since_ns,
			 uint64_t min_ns, int timeout_s, const char *what)
{
	uint64_t cap = info.data_ring_bytes;
	uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000ULL;
	uint32_t nk = info.nr_cpus < 8 ? info.nr_cpus : 8;
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st;
	pid_t kids[8];

	for (;;) {
		int done;

		for (uint32_t k = 0; k < nk; k++)
			kids[k] = spawn_spin(300);
		for (uint32_t k = 0; k < nk; k++)
			waitpid(kids[k], NULL, 0);
		st = get_stats(&s);
		done = now_ns() - since_ns >= min_ns;
		for (uint32_t c = 0; c < s.count; c++)
			if (st[c].online && (st[c].data_head < dend[c] + cap ||
					     st[c].aux_head < aend[c] + info.aux_ring_bytes))
				done = 0;
		if (done)
			return;
		if (now_ns() > deadline)
			FAIL("%s: after %d s cpu 0 DATA head %llu (crash end %llu, cap %llu) AUX head %llu (crash end %llu)",
			     what, timeout_s, (unsigned long long)st[0].data_head,
			     (unsigned long long)dend[0], (unsigned long long)cap,
			     (unsigned long long)st[0].aux_head, (unsigned long long)aend[0]);
	}
}

/*
 * Acceptance 4: a thread runs spin_a, then stores through NULL.  Its marker
 * has its pid, tid and SIGSEGV; the preserved history ends with the crash
 * record (the crashing thread's user state at the dump: ip in
 * crash_after_spin, caller spawn_crash, registers and stack in AUX), so it
 * ends within one sample period of the crash (at it); the thread's earlier
 * samples show it in spin_a; and the marker reads back byte for byte the same
 * at least 10 s later, after every ring has wrapped since the crash.
 */
static int cmd_crash(void)
{
	uint64_t period = info.period ? info.period : 1000000000ULL / info.freq;
	uint64_t spin_lo, spin_hi, crash_lo, crash_hi, caller_lo, caller_hi;
	uint64_t dend[256] = { 0 }, aend[256] = { 0 };
	uint64_t last = 0, counter_last = 0, bp, sp, ret;
	size_t in_spin = 0, later = 0, crash_records = 0, records = 0, l1, l2;
	struct xsample crash = { 0 };
	struct flightrec_marker_read ra;
	struct flightrec_marker mk;
	struct flightrec_aux *a;
	int crash_last = 0;
	char *aux, *snap1, *snap2;
	pid_t p;

	if (info.nr_cpus > 256)
		FAIL("nr_cpus %u > 256", info.nr_cpus);
	func_range("spin_a", (void *)spin_a, &spin_lo, &spin_hi);
	func_range("crash_after_spin", (void *)crash_after_spin, &crash_lo, &crash_hi);
	func_range("spawn_crash", (void *)spawn_crash, &caller_lo, &caller_hi);
	p = spawn_crash(700, -1, -1);
	wait_segv(p, "crash");
	if (find_marker(p, &mk))
		FAIL("no marker for pid %d", p);
	if ((pid_t)mk.tid != p || mk.signal != SIGSEGV || mk.nr_cpus != info.nr_cpus ||
	    mk.cpu >= info.nr_cpus)
		FAIL("marker pid=%u tid=%u signal=%u nr_cpus=%u cpu=%u, want %d/%d/%d/%u/<%u",
		     mk.pid, mk.tid, mk.signal, mk.nr_cpus, mk.cpu, p, p, SIGSEGV, info.nr_cpus,
		     info.nr_cpus);

	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct flightrec_marker_read r;
		char *raw = read_marker(mk.slot, c, FLIGHTREC_RING_DATA, &r);
		struct xsample *s;
		size_t n;

		if (r.bytes != r.end - r.first)
			FAIL("cpu %u: %llu bytes for positions [%llu, %llu)", c,
			     (unsigned long long)r.bytes, (unsigned long long)r.first,
			     (unsigned long long)r.end);
		/* positions checked by the decoder: each record's seq is where it lies */
		n = decode_records(raw, r.bytes, r.first, &s);
		free(raw);
		dend[c] = r.end;
		records += n;
		for (size_t i = 0; i < n; i++) {
			if (s[i].time_ns > mk.time_ns)
				later++;
			if (s[i].time_ns > last)
				last = s[i].time_ns;
			if (s[i].flags & FLIGHTREC_SAMPLE_CRASH) {
				crash_records++;
				crash = s[i];
				crash_last = c == mk.cpu && i == n - 1;
				continue;
			}
			if (s[i].time_ns > counter_last)
				counter_last = s[i].time_ns;
			if ((pid_t)s[i].tid == p && s[i].ip >= spin_lo && s[i].ip < spin_hi)
				in_spin++;
		}
		free(s);
		free(read_marker(mk.slot, c, FLIGHTREC_RING_AUX, &ra));
		aend[c] = ra.end;
	}

	/* The crash record: last on the crashing CPU, the crashing thread at the fault. */
	if (crash_records != 1 || !crash_last)
		FAIL("%zu crash records; last on the crashing cpu %u: %d", crash_records, mk.cpu,
		     crash_last);
	if ((pid_t)crash.pid != p || (pid_t)crash.tid != p || crash.cpu != mk.cpu ||
	    crash.mode != FLIGHTREC_MODE_USER || crash.time_ns != mk.time_ns ||
	    !(crash.flags & FLIGHTREC_SAMPLE_HAS_AUX))
		FAIL("crash record pid=%u tid=%u cpu=%u mode=%u flags=%#x time=%llu (marker %llu)",
		     crash.pid, crash.tid, crash.cpu, crash.mode, crash.flags,
		     (unsigned long long)crash.time_ns, (unsigned long long)mk.time_ns);
	if (crash.ip < crash_lo || crash.ip >= crash_hi || crash.nr_uframes < 2 ||
	    crash.uframes[0] != crash.ip || crash.uframes[1] < caller_lo ||
	    crash.uframes[1] >= caller_hi)
		FAIL("crash record ip %#llx (crash_after_spin %#llx-%#llx), %u uframes [1]=%#llx (spawn_crash %#llx-%#llx)",
		     (unsigned long long)crash.ip, (unsigned long long)crash_lo,
		     (unsigned long long)crash_hi, crash.nr_uframes,
		     (unsigned long long)crash.uframes[1], (unsigned long long)caller_lo,
		     (unsigned long long)caller_hi);
	aux = read_marker(mk.slot, mk.cpu, FLIGHTREC_RING_AUX, &ra);
	if (crash.aux_pos < ra.first || crash.aux_pos + crash.aux_len > ra.end ||
	    crash.aux_len < sizeof(*a))
		FAIL("crash record AUX [%llu, +%u) outside the preserved [%llu, %llu)",
		     (unsigned long long)crash.aux_pos, crash.aux_len,
		     (unsigned long long)ra.first, (unsigned long long)ra.end);
	a = (struct flightrec_aux *)(aux + (crash.aux_pos - ra.first));
	bp = a->regs[PERF_REG_X86_BP];
	sp = a->regs[PERF_REG_X86_SP];
	if (a->seq != crash.seq || a->len != crash.aux_len || a->abi != PERF_SAMPLE_REGS_ABI_64 ||
	    crash.abi != PERF_SAMPLE_REGS_ABI_64 ||
	    a->regs[PERF_REG_X86_IP] != crash.ip || !a->stack_len ||
	    a->stack_len > info.stack_bytes || a->len != sizeof(*a) + a->stack_len)
		FAIL("crash AUX seq=%llu (want %llu) len=%u (want %u) abi=%u ip=%#llx stack_len=%u",
		     (unsigned long long)a->seq, (unsigned long long)crash.seq, a->len,
		     crash.aux_len, a->abi, (unsigned long long)a->regs[PERF_REG_X86_IP],
		     a->stack_len);
	/* The copied stack holds crash_after_spin's frame: its return address is uframes[1]. */
	if (bp < sp || bp + 16 - sp > a->stack_len)
		FAIL("crash frame bp=%#llx outside the copied stack sp=%#llx +%u",
		     (unsigned long long)bp, (unsigned long long)sp, a->stack_len);
	memcpy(&ret, (char *)(a + 1) + (bp + 8 - sp), sizeof(ret));
	if (ret != crash.uframes[1])
		FAIL("stack return address %#llx != uframes[1] %#llx", (unsigned long long)ret,
		     (unsigned long long)crash.uframes[1]);
	free(aux);

	/* Nothing after the marker; history ends within one period of it. */
	if (later || !in_spin || mk.time_ns - last > period)
		FAIL("history: later=%zu in_spin_a=%zu end gap=%llu ns period=%llu", later, in_spin,
		     (unsigned long long)(mk.time_ns - last), (unsigned long long)period);

	snap1 = snapshot(mk.slot, &l1);
	wait_wrapped(dend, aend, mk.time_ns, 10000000000ULL, 240, "crash");
	snap2 = snapshot(mk.slot, &l2);
	if (l1 != l2 || memcmp(snap1, snap2, l1))
		FAIL("marker changed after the rings wrapped (%zu vs %zu bytes)", l1, l2);
	if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot))
		FAIL("RELEASE_MARKER: %s", strerror(errno));
	printf("marker pid=%u tid=%u sig=%u cpu=%u records=%zu in_spin_a=%zu crash_ip=crash_after_spin+%#llx end_gap_ns=%llu last_counter_sample_gap_ns=%llu period_ns=%llu; re-read %.1f s later after every ring wrapped: %zu bytes unchanged\n",
	       mk.pid, mk.tid, mk.signal, mk.cpu, records, in_spin,
	       (unsigned long long)(crash.ip - crash_lo), (unsigned long long)(mk.time_ns - last),
	       (unsigned long long)(mk.time_ns - counter_last), (unsigned long long)period,
	       (now_ns() - mk.time_ns) / 1e9, l1);
	free(snap1);
	free(snap2);
	return 0;
}

/*
 * A crash storm: @n processes crash at once (released together from a pipe),
 * more than there are marker slots.  Every crash is accounted for exactly
 * (markers_taken + markers_dropped == n, taken == the free slots), the stored
 * markers are storm children's, recording goes on afterwards, and once the
 * markers are released the next crash takes one again.
 */
static int cmd_storm(int n)
{
	struct flightrec_marker m[64], mk;
	struct flightrec_stats s0, s1, s2;
	uint64_t taken, dropped, want;
	pid_t kids[256], p;
	int gate[2];
	uint32_t nm;

	if (n < 1 || n > 256)
		FAIL("storm: 1..256 crashes");
	if (list_markers(m))
		FAIL("storm: markers stored before the storm (fresh module expected)");
	get_stats(&s0);
	if (pipe(gate))
		FAIL("pipe: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		kids[i] = spawn_crash(0, gate[0], gate[1]);
		if (kids[i] < 0)
			FAIL("fork: %s", strerror(errno));
	}
	close(gate[0]);
	close(gate[1]);	/* EOF: every child crashes now */
	for (int i = 0; i < n; i++)
		wait_segv(kids[i], "storm");
	get_stats(&s1);
	taken = s1.markers_taken - s0.markers_taken;
	dropped = s1.markers_dropped - s0.markers_dropped;
	/* One uid's crashes: at most markers_per_uid slots (the rest stay free for others). */
	want = (uint64_t)n < info.markers_per_uid ? (uint64_t)n : info.markers_per_uid;
	if (taken + dropped != (uint64_t)n || taken != want)
		FAIL("storm of %d crashes, %u slots, %u per uid: markers_taken +%llu markers_dropped +%llu",
		     n, info.max_markers, info.markers_per_uid, (unsigned long long)taken,
		     (unsigned long long)dropped);
	nm = list_markers_wait(m, taken);
	if (nm != taken)
		FAIL("storm: %u markers listed, %llu taken", nm, (unsigned long long)taken);
	for (uint32_t i = 0; i < nm; i++) {
		int mine = 0;

		for (int k = 0; k < n; k++)
			mine |= (pid_t)m[i].pid == kids[k];
		for (uint32_t j = 0; j < i; j++)
			mine &= m[j].pid != m[i].pid;
		if (!mine || m[i].tid != m[i].pid || m[i].signal != SIGSEGV)
			FAIL("storm: marker %u pid=%u tid=%u signal=%u is not one storm crash", i,
			     m[i].pid, m[i].tid, m[i].signal);
	}
	/* Recording was not wedged: every online CPU produces and writes. */
	wait_advance(100, 120, "storm");
	check_invariants("storm");
	for (uint32_t i = 0; i < nm; i++)
		if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, m[i].slot))
			FAIL("RELEASE_MARKER %u: %s", m[i].slot, strerror(errno));
	p = spawn_crash(0, -1, -1);
	wait_segv(p, "storm");
	get_stats(&s2);
	if (s2.markers_taken != s1.markers_taken + 1 || s2.markers_dropped != s1.markers_dropped ||
	    find_marker(p, &mk) || list_markers(m) != 1)
		FAIL("after release: markers_taken %llu -> %llu, dropped %llu -> %llu, marker of %d: %s",
		     (unsigned long long)s1.markers_taken, (unsigned long long)s2.markers_taken,
		     (unsigned long long)s1.markers_dropped, (unsigned long long)s2.markers_dropped,
		     p, find_marker(p, &mk) ? "missing" : "present");
	printf("crashes=%d slots=%u per_uid=%u markers_taken=+%llu markers_dropped=+%llu (exact); recording continued; after release the next crash took a marker\n",
	       n, info.max_markers, info.markers_per_uid, (unsigned long long)taken,
	       (unsigned long long)dropped);
	return 0;
}

/*
 * A spinner with 96 KiB of touched stack below its caller's frames, so a
 * sample's stack copy (up to 64 KiB) succeeds whole and the handler runs long.
 */
SAMPLED void deep_spin(uint64_t ms)
{
	volatile char pad[96 << 10];

	for (size_t i = 0; i < sizeof(pad); i += 512)
		pad[i] = (char)i;
	spin_a(ms);
	pad[0] = pad[512];
}

/*
 * FREEZE returns only after sample handlers already running on other CPUs
 * have finished.  Spinners with deep stacks keep every CPU's handler busy
 * copying 64 KiB of stack per sample (run with stack_bytes=65536 and a short
 * period), so at many freezes a handler is mid-sample on another CPU.  The
 * freezer runs on CPU 0, the spinners on the others.  Right after each FREEZE
 * (no STATS first: its seqcount retry would wait for such a handler by
 * itself) the other CPUs' DATA rings, then every AUX ring, are read whole:
 * each read must see its head stay put during the copy and nothing torn, and
 * STATS afterwards the same heads.  @iterations FREEZE/THAW rounds.
 */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		FAIL("sched_setaffinity %d: %s", cpu, strerror(errno));
}

static int cmd_freeze(int iterations)
{
	uint32_t nk = info.nr_cpus < 8 ? info.nr_cpus : 8;
	uint64_t moved = 0, prev[256] = { 0 }, torn0 = 0, torn1 = 0;
	uint64_t heads[256][2];
	struct flightrec_cpu_stats *b;
	struct flightrec_stats s;
	size_t cap = info.aux_ring_bytes > info.data_ring_bytes ? info.aux_ring_bytes :
								    info.data_ring_bytes;
	char *buf = malloc(cap);
	pid_t kids[8];

	if (info.nr_cpus > 256)
		FAIL("nr_cpus %u > 256", info.nr_cpus);
	if (info.nr_cpus < 2)
		FAIL("freeze: needs 2 CPUs");
	pin(0);
	for (uint32_t k = 0; k < nk; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			die_with_parent();
			pin(1 + k % (info.nr_cpus - 1));
			deep_spin(600000);
			_exit(0);
		}
	}
	b = get_stats(&s);
	for (uint32_t c = 0; c < s.count; c++)
		torn0 += b[c].torn_on_read;
	for (int it = 0; it < iterations; it++) {
		uint64_t t = now_ns() + 2000000;

		if (ioctl(fd, FLIGHTREC_IOC_THAW, 0))
			FAIL("THAW: %s", strerror(errno));
		while (now_ns() < t)
			;
		if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
			FAIL("FREEZE: %s", strerror(errno));
		for (uint32_t i = 0; i < 2 * info.nr_cpus; i++) {
			/* DATA of CPUs 1.., DATA of 0, then AUX likewise */
			uint32_t ring = i / info.nr_cpus, c = (i + 1) % info.nr_cpus;

			{
				struct flightrec_read r = { .cpu = c, .ring = ring,
							    .buf = (uintptr_t)buf, .buf_len = cap };

				if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
					FAIL("READ_RING: %s", strerror(errno));
				if (r.data_offset || r.next != r.head)
					FAIL("freeze %d cpu %u ring %u: head %llu -> %llu during the read, %llu bytes torn",
					     it, c, ring, (unsigned long long)r.next,
					     (unsigned long long)r.head,
					     (unsigned long long)r.data_offset);
				heads[c][ring] = r.head;
			}
		}
		b = get_stats(&s);
		for (uint32_t c = 0; c < s.count; c++) {
			if (b[c].data_head != heads[c][0] || b[c].aux_head != heads[c][1])
				FAIL("freeze %d cpu %u: heads moved while frozen (%llu -> %llu)", it, c,
				     (unsigned long long)heads[c][0],
				     (unsigned long long)b[c].data_head);
			moved += b[c].written - prev[c];
			prev[c] = b[c].written;
		}
	}
	if (ioctl(fd, FLIGHTREC_IOC_THAW, 0))
		FAIL("THAW: %s", strerror(errno));
	for (uint32_t k = 0; k < nk; k++) {
		kill(kids[k], SIGKILL);
		waitpid(kids[k], NULL, 0);
	}
	b = get_stats(&s);
	for (uint32_t c = 0; c < s.count; c++)
		torn1 += b[c].torn_on_read;
	check_invariants("freeze");
	free(buf);
	/* The writers were busy: records were written between the freezes. */
	if (torn1 != torn0 || moved < (uint64_t)iterations)
		FAIL("freeze: torn_on_read %llu -> %llu, %llu records written over %d thaws",
		     (unsigned long long)torn0, (unsigned long long)torn1,
		     (unsigned long long)moved, iterations);
	printf("freezes=%d heads still and nothing torn after each; %llu records written between them\n",
	       iterations, (unsigned long long)moved);
	return 0;
}

/* Holds the device open until stdin closes, then checks it still works. */
static int cmd_hold(void)
{
	char c;

	printf("held\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	if (ioctl(fd, FLIGHTREC_IOC_INFO, &info))
		FAIL("INFO after the refused rmmod: %s", strerror(errno));
	printf("device usable while held\n");
	return 0;
}

/* ---- load/unload cycles and memory ---- */

static long meminfo_kb(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	size_t kl = strlen(key);
	long v = -1;

	if (!f)
		FAIL("/proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = strtol(line + kl + 1, NULL, 10);
	fclose(f);
	if (v < 0)
		FAIL("no %s in /proc/meminfo", key);
	return v;
}

/*
 * Free pages parked on the per-CPU page lists (/proc/zoneinfo pagesets
 * "count:", in pages).  They are free memory that MemFree and MemAvailable do
 * not count: 6.1 keeps up to pcp->high (~27 MiB per CPU in a 1 GiB guest)
 * there, and the module's 19 MiB of vfree()d rings land on them, so
 * MemAvailable alone swings by more than 1% with no leak at all.
 */
static long pcp_kb(void)
{
	FILE *f = fopen("/proc/zoneinfo", "r");
	char line[256];
	long pages = 0, v;

	if (!f)
		FAIL("/proc/zoneinfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " count: %ld", &v) == 1)
			pages += v;
	fclose(f);
	return pages * (getpagesize() / 1024);
}

/*
 * vmalloc'd pages (/proc/vmallocinfo "pages="), without kernel thread stacks:
 * with VMAP_STACK every task's stack is a vmalloc area (kernel_clone /
 * alloc_thread_stack_node, fork_idle), and a kworker coming or going moves
 * VmallocUsed by 16 KiB, a quarter of the 1% margin.
 */
static long vmalloc_kb(void)
{
	FILE *f = fopen("/proc/vmallocinfo", "r");
	char line[512];
	long pages = 0;

	if (!f)
		FAIL("/proc/vmallocinfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " pages=");

		if (!p || strstr(line, "kernel_clone") || strstr(line, "alloc_thread_stack") ||
		    strstr(line, "fork_idle") || strstr(line, "dup_task_struct"))
			continue;
		pages += strtol(p + 7, NULL, 10);
	}
	fclose(f);
	return pages * (getpagesize() / 1024);
}

static void write_file(const char *path, const char *s)
{
	int f = open(path, O_WRONLY);

	if (f >= 0) {
		if (write(f, s, strlen(s)) < 0) {
			/* some caches refuse shrink; nothing to do */
		}
		close(f);
	}
}

/* Page cache and reclaimable slab dropped, empty slabs given back. */
static void settle(void)
{
	DIR *d = opendir("/sys/kernel/slab");
	struct dirent *e;
	char path[512];

	sync();
	write_file("/proc/sys/vm/drop_caches", "3");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/slab/%s/shrink", e->d_name);
		write_file(path, "1");
	}
	if (d)
		closedir(d);
}

struct mem {
	long avail, memavail, pcp, slab, vmalloc;
};

static struct mem measure(void)
{
	struct mem m;

	settle();
	m.memavail = meminfo_kb("MemAvailable");
	m.pcp = pcp_kb();
	m.avail = m.memavail + m.pcp;
	m.slab = meminfo_kb("Slab");
	m.vmalloc = vmalloc_kb();
	return m;
}

static int load(int kfd, const char *params)
{
	return syscall(SYS_finit_module, kfd, params, 0);
}

static int unload(void)
{
	return syscall(SYS_delete_module, "flightrec", O_NONBLOCK);
}

/*
 * Acceptance 1: @n load/unload cycles of @ko (default parameters) with a
 * CPU-bound workload on every CPU; afterwards available memory, slab and
 * vmalloc usage are back within 1% of the start (waited for, bounded: RCU
 * and deferred frees finish after the last unload).
 *
 * Why a leak of one ring per cycle fails this: the smallest ring at the
 * defaults is 1 MiB (DATA per CPU, and the SIDEBAND ring); 50 leaked rings are
 * 50 MiB of vmalloc, where the baseline is ~5 MiB (1% = ~50 KiB), and 50 MiB
 * less available memory out of ~860 MiB (1% = ~8.6 MiB).  Even the smallest
 * ring the module accepts (4 KiB) leaked 50 times is 200 KiB of vmalloc, four
 * times the margin.  The loaded footprint printed below (vmalloc while
 * loaded) shows the rings are visible to the measure.
 */
static int cmd_cycles(const char *ko, int n)
{
	uint32_t nk = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	struct mem m0, m1, loaded = { 0 };
	uint64_t deadline;
	int kfd = open(ko, O_RDONLY | O_CLOEXEC);
	pid_t kids[8];
	int ok;

	if (kfd < 0)
		FAIL("open %s: %s", ko, strerror(errno));
	if (nk > 8)
		nk = 8;
	for (uint32_t k = 0; k < nk; k++)
		kids[k] = spawn_spin(600000);
	/* Warm-up cycle: what the first load caches (kprobe slots, sysfs) is in the baseline. */
	if (load(kfd, "") || unload())
		FAIL("warm-up cycle: %s", strerror(errno));
	m0 = measure();
	for (int i = 0; i < n; i++) {
		if (load(kfd, ""))
			FAIL("load %d: %s", i, strerror(errno));
		if (i == 0)
			loaded = measure();
		if (unload())
			FAIL("unload %d: %s", i, strerror(errno));
	}
	deadline = now_ns() + 30000000000ULL;
	for (;;) {
		m1 = measure();
		ok = m1.avail >= m0.avail - m0.avail / 100 && m1.slab <= m0.slab + m0.slab / 100 &&
		     m1.vmalloc <= m0.vmalloc + m0.vmalloc / 100;
		if (ok || now_ns() > deadline)
			break;
		usleep(200000);	/* poll interval of the bounded wait */
	}
	for (uint32_t k = 0; k < nk; k++) {
		kill(kids[k], SIGKILL);
		waitpid(kids[k], NULL, 0);
	}
	close(kfd);
	printf("%d cycles with %u spinners: available (MemAvailable+per-cpu free lists) %ld->%ld kB (MemAvailable %ld->%ld, pcp %ld->%ld), Slab %ld->%ld kB, vmalloc %ld->%ld kB (%ld kB while loaded)\n",
	       n, nk, m0.avail, m1.avail, m0.memavail, m1.memavail, m0.pcp, m1.pcp, m0.slab,
	       m1.slab, m0.vmalloc, m1.vmalloc, loaded.vmalloc);
	return ok ? 0 : 1;
}

static int cmd_sideband(const char *lib)
{
	static struct flightrec_sideband sb[8192];
	uint64_t va, sz = 0, foff;
	struct stat stl;
	int status, nsb = 0;
	pid_t p;

	if (stat(lib, &stl) || elf_sym(lib, "fr_vm_burn", &va, &sz, &foff) || !sz)
		FAIL("cannot find fr_vm_burn in %s", lib);
	/* Drain what is there: the scenario's records come after. */
	for (;;) {
		struct flightrec_read r = { .ring = FLIGHTREC_RING_SIDEBAND, .buf = (uintptr_t)sb,
					    .buf_len = sizeof(sb) };
		if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
			FAIL("READ_RING sideband: %s", strerror(errno));
		if (!r.bytes)
			break;
	}
	p = fork();
	if (p == 0) {
		void *h = dlopen(lib, RTLD_NOW);
		uint64_t (*burn)(uint64_t);
		uint64_t end = now_ns() + 800000000ULL;

		if (!h)
			_exit(2);
		burn = (uint64_t (*)(uint64_t))dlsym(h, "fr_vm_burn");
		while (now_ns() < end)
			burn(1 << 20);
		dlclose(h);
		_exit(0);
	}
	waitpid(p, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		FAIL("dlopen child failed (status %#x)", status);
	struct flightrec_read r = { .ring = FLIGHTREC_RING_SIDEBAND, .buf = (uintptr_t)sb,
				    .buf_len = sizeof(sb) };
	if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
		FAIL("READ_RING sideband: %s", strerror(errno));
	nsb = r.bytes / sizeof(sb[0]);
	int exited = 0, maps = 0;
	char path[FLIGHTREC_PATH_MAX] = "";

	for (int i = 0; i < nsb; i++) {
		if ((pid_t)sb[i].pid != p)
			continue;
		if (sb[i].type == FLIGHTREC_SB_EXIT)
			exited = 1;
		if (sb[i].type == FLIGHTREC_SB_MMAP && sb[i].ino == stl.st_ino) {
			maps++;
			strcpy(path, sb[i].path);
		}
	}
	size_t total = 0, in_burn = 0, in_lib = 0;

	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct xsample *s;
		size_t n = read_data(c, &s, NULL);

		for (size_t i = 0; i < n; i++) {
			if ((pid_t)s[i].pid != p)
				continue;
			total++;
			/* Latest MMAP of this pid covering ip before the sample. */
			int best = -1;

			for (int j = 0; j < nsb; j++)
				if (sb[j].type == FLIGHTREC_SB_MMAP && (pid_t)sb[j].pid == p &&
				    sb[j].time_ns <= s[i].time_ns && s[i].ip >= sb[j].start &&
				    s[i].ip < sb[j].start + sb[j].len)
					best = j;
			if (best < 0 || sb[best].ino != stl.st_ino)
				continue;
			in_lib++;
			uint64_t o = s[i].ip - sb[best].start + sb[best].pgoff;

			if (o >= foff && o < foff + sz)
				in_burn++;
		}
		free(s);
	}
	printf("pid=%d mmaps_of_lib=%d path=%s exit_seen=%d samples=%zu in_lib=%zu in_fr_vm_burn=%zu\n",
	       p, maps, path, exited, total, in_lib, in_burn);
	return (maps && exited && in_burn && in_burn * 2 >= in_lib) ? 0 : 1;
}

/* ---- ABI ---- */

static int nfail;

static void expect(const char *what, long ret, int want)
{
	int got = ret ? errno : 0;

	if (got != want) {
		printf("ABI %s: got %s want %s; ", what, got ? strerror(got) : "0",
		       want ? strerror(want) : "0");
		nfail++;
	}
}

static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/*
 * open() in a child whose effective capabilities lack CAP_SYS_ADMIN and/or
 * CAP_PERFMON (uid stays 0, so the node's 0600 mode passes), or that runs
 * as @uid.  Returns 0 if open succeeded, else its errno (>= 100: setup failed).
 */
static int open_as(int drop_sys_admin, int drop_perfmon, uid_t uid)
{
	int status;
	pid_t p = fork();

	if (p == 0) {
		struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
		struct __user_cap_data_struct d[2];
		int f;

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		if (drop_sys_admin)
			d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
		if (drop_perfmon)
			d[CAP_TO_INDEX(CAP_PERFMON)].effective &= ~CAP_TO_MASK(CAP_PERFMON);
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		if (uid && setuid(uid))
			_exit(102);
		f = open(FLIGHTREC_DEVICE, O_RDONLY);
		_exit(f >= 0 ? 0 : errno);
	}
	if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status))
		return 103;
	return WEXITSTATUS(status);
}

static void expect_open(const char *what, int got, int want)
{
	if (got != want) {
		printf("ABI open %s: got %s want %s; ", what,
		       got >= 100 ? "setup failure" : (got ? strerror(got) : "0"),
		       want ? strerror(want) : "0");
		nfail++;
	}
}

/*
 * The errnos each command documents in module/uapi/flightrec.h (0 = success);
 * every other command number gets only ENOTTY.
 */
static int documented(unsigned long cmd, int e)
{
	switch (cmd) {
	case FLIGHTREC_IOC_INFO:
		return e == 0 || e == EFAULT;
	case FLIGHTREC_IOC_STATS:
	case FLIGHTREC_IOC_LIST_MARKERS:
		return e == 0 || e == EFAULT || e == EINVAL;
	case FLIGHTREC_IOC_FREEZE:
	case FLIGHTREC_IOC_THAW:
		return e == 0 || e == EINVAL;
	case FLIGHTREC_IOC_READ_RING:
		return e == 0 || e == EFAULT || e == EINVAL || e == ENODEV;
	case FLIGHTREC_IOC_READ_MARKER:
		return e == 0 || e == EFAULT || e == EINVAL || e == ENOENT || e == ENODEV;
	case FLIGHTREC_IOC_RELEASE_MARKER:
		return e == 0 || e == ENOENT;
	case FLIGHTREC_IOC_PANIC_INFO:
		return e == 0 || e == EFAULT;
	case FLIGHTREC_IOC_PANIC_READ:
		return e == 0 || e == EFAULT || e == EINVAL || e == ENOENT;
	case FLIGHTREC_IOC_PANIC_RELEASE:
		return e == 0 || e == EINVAL || e == ENOENT;
	default:
		return e == ENOTTY;
	}
}

/* Commands fs/ioctl.c do_vfs_ioctl() answers itself, before the driver sees them. */
static int vfs_cmd(unsigned int cmd)
{
	static const unsigned int vfs[] = {
		FIOCLEX, FIONCLEX, FIONBIO, FIOASYNC, FIOQSIZE, FIFREEZE, FITHAW,
		FS_IOC_FIEMAP, FIGETBSZ, FICLONE, FICLONERANGE, FIDEDUPERANGE, FIONREAD,
		FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR,
	};

	for (size_t i = 0; i < sizeof(vfs) / sizeof(vfs[0]); i++)
		if (cmd == vfs[i])
			return 1;
	return 0;
}

/* READ_MARKER / LIST_MARKERS / RELEASE_MARKER against a real marker. */
static void abi_markers(char *big, char *none)
{
	struct flightrec_marker_read mr;
	struct flightrec_markers l;
	struct flightrec_marker m[4], mk;
	uint64_t total;
	pid_t p = spawn_crash(0, -1, -1);

	wait_segv(p, "abi");
	if (find_marker(p, &mk)) {
		printf("ABI: no marker for the crash of %d; ", p);
		nfail++;
		return;
	}
#define MR(...) (memset(&mr, 0, sizeof(mr)), mr.slot = mk.slot, mr.cpu = mk.cpu, \
		 mr.buf = (uintptr_t)big, mr.buf_len = 8 << 20, __VA_ARGS__, \
		 ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr))
	expect("READ_MARKER query", MR(mr.buf = 0, mr.buf_len = 0), 0);
	total = mr.total_bytes;
	if (!total || mr.bytes) {
		printf("ABI READ_MARKER query: total %llu bytes %llu; ", (unsigned long long)total,
		       (unsigned long long)mr.bytes);
		nfail++;
	}
	expect("READ_MARKER valid", MR(mr.ring = FLIGHTREC_RING_DATA), 0);
	if (mr.bytes != total) {
		printf("ABI READ_MARKER valid: %llu of %llu bytes; ", (unsigned long long)mr.bytes,
		       (unsigned long long)total);
		nfail++;
	}
	expect("READ_MARKER aux", MR(mr.ring = FLIGHTREC_RING_AUX), 0);
	expect("READ_MARKER bad buf", MR(mr.buf = (uintptr_t)none, mr.buf_len = 4096), EFAULT);
	expect("READ_MARKER kernel buf", MR(mr.buf = 0xffff888000000000ULL), EFAULT);
	expect("READ_MARKER reserved[0]", MR(mr.reserved[0] = 1), EINVAL);
	expect("READ_MARKER reserved[1]", MR(mr.reserved[1] = 1ULL << 63), EINVAL);
	expect("READ_MARKER flags", MR(mr.flags = 0x80000000), EINVAL);
	expect("READ_MARKER offset = total", MR(mr.offset = total), 0);
	if (mr.bytes) {
		printf("ABI READ_MARKER offset = total copied %llu; ", (unsigned long long)mr.bytes);
		nfail++;
	}
	expect("READ_MARKER offset past end", MR(mr.offset = total + 1), EINVAL);
	expect("READ_MARKER offset ~0", MR(mr.offset = ~0ULL), EINVAL);
	expect("READ_MARKER buf_len ~0", MR(mr.offset = 8, mr.buf_len = ~0ULL), 0);
	expect("READ_MARKER ring 2", MR(mr.ring = 2), EINVAL);
	expect("READ_MARKER cpu ~0", MR(mr.cpu = ~0U), EINVAL);
	expect("READ_MARKER slot max", MR(mr.slot = info.max_markers), ENOENT);
	expect("READ_MARKER slot ~0", MR(mr.slot = ~0U), ENOENT);

	memset(&l, 0, sizeof(l));
	l.buf = (uintptr_t)none;
	l.count = 4;
	expect("LIST bad buf", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), EFAULT);
	l.buf = 0xffff888000000000ULL;
	expect("LIST kernel buf", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), EFAULT);
	l.buf = (uintptr_t)none;
	l.count = 0;
	expect("LIST count 0", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), 0);
	if (l.count < 1) {
		printf("ABI LIST count 0: %u stored; ", l.count);
		nfail++;
	}
	l.buf = (uintptr_t)m;
	l.count = 4;
	expect("LIST valid", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), 0);

	expect("RELEASE_MARKER", ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot), 0);
	expect("RELEASE_MARKER again", ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot), ENOENT);
	expect("READ_MARKER released", MR(mr.ring = FLIGHTREC_RING_DATA), ENOENT);
	expect("RELEASE_MARKER ~0", ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, ~0UL), ENOENT);
#undef MR
}

static int cmd_abi(long iterations)
{
	char *big = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct flightrec_cpu_stats st[8];
	struct flightrec_stats s;
	struct flightrec_read r;
	struct flightrec_markers l;
	struct flightrec_marker_read mr;
	struct flightrec_marker m[4];

	expect("INFO valid", ioctl(fd, FLIGHTREC_IOC_INFO, &info), 0);
	expect("INFO NULL", ioctl(fd, FLIGHTREC_IOC_INFO, NULL), EFAULT);
	expect("INFO PROT_NONE", ioctl(fd, FLIGHTREC_IOC_INFO, none), EFAULT);
	expect("INFO kernel ptr", ioctl(fd, FLIGHTREC_IOC_INFO, (void *)0xffff888000000000ULL), EFAULT);

	memset(&s, 0, sizeof(s));
	s.buf = (uintptr_t)st;
	s.count = 8;
	expect("STATS valid", ioctl(fd, FLIGHTREC_IOC_STATS, &s), 0);
	s.count = 0;
	expect("STATS count 0", ioctl(fd, FLIGHTREC_IOC_STATS, &s), EINVAL);
	s.count = 8;
	s.flags = 2;
	expect("STATS flags", ioctl(fd, FLIGHTREC_IOC_STATS, &s), EINVAL);
	s.flags = 0;
	/* Output fields (reserved before): the caller's values are ignored and overwritten. */
	s.markers_uid_limited = 12345;
	expect("STATS output field", ioctl(fd, FLIGHTREC_IOC_STATS, &s), 0);
	if (s.markers_uid_limited == 12345) {
		printf("ABI STATS: markers_uid_limited not written; ");
		nfail++;
	}
	s.buf = (uintptr_t)none;
	expect("STATS bad buf", ioctl(fd, FLIGHTREC_IOC_STATS, &s), EFAULT);
	expect("STATS NULL", ioctl(fd, FLIGHTREC_IOC_STATS, NULL), EFAULT);

	expect("FREEZE arg", ioctl(fd, FLIGHTREC_IOC_FREEZE, 1), EINVAL);
	expect("THAW arg", ioctl(fd, FLIGHTREC_IOC_THAW, 1), EINVAL);
	expect("FREEZE", ioctl(fd, FLIGHTREC_IOC_FREEZE, 0), 0);
	expect("INFO frozen", ioctl(fd, FLIGHTREC_IOC_INFO, &info) || !info.frozen, 0);
	expect("THAW", ioctl(fd, FLIGHTREC_IOC_THAW, 0), 0);

#define RR(...) (memset(&r, 0, sizeof(r)), r.buf = (uintptr_t)big, r.buf_len = 1 << 20, __VA_ARGS__, \
		 ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
	spin_a(200);
	expect("READ data", RR(r.ring = FLIGHTREC_RING_DATA), 0);
	expect("READ aux", RR(r.ring = FLIGHTREC_RING_AUX), 0);
	expect("READ sideband", RR(r.ring = FLIGHTREC_RING_SIDEBAND), 0);
	expect("READ ring 3", RR(r.ring = 3), EINVAL);
	expect("READ cpu nr_cpus", RR(r.cpu = info.nr_cpus), EINVAL);
	expect("READ cpu ~0", RR(r.cpu = ~0U), EINVAL);
	expect("READ flags", RR(r.flags = 1), EINVAL);
	expect("READ pad", RR(r.pad = 1), EINVAL);
	expect("READ reserved", RR(r.reserved[0] = 1), EINVAL);
	expect("READ buf_len 0", RR(r.buf_len = 0), EINVAL);
	expect("READ buf_len < record", RR(r.buf_len = 100), EINVAL);
	expect("READ from > to", RR(r.from = 10, r.to = 5), EINVAL);
	/* DATA positions count bytes, as AUX's: any 64-bit position is valid. */
	expect("READ data from ~0", RR(r.from = ~0ULL, r.to = 0), 0);
	expect("READ data to ~0", RR(r.to = ~0ULL), 0);
	expect("READ data buf_len < chunk", RR(r.buf_len = FLIGHTREC_DATA_CHUNK - 8), EINVAL);
	expect("READ data buf_len = chunk", RR(r.buf_len = FLIGHTREC_DATA_CHUNK), 0);
	expect("READ aux from ~0", RR(r.ring = FLIGHTREC_RING_AUX, r.from = ~0ULL), 0);
	expect("READ from beyond head", RR(r.from = 1ULL << 40), 0);
	expect("READ bad buf", RR(r.buf = (uintptr_t)none), EFAULT);
	expect("READ kernel buf", RR(r.buf = 0xffff888000000000ULL), EFAULT);
	expect("READ sideband cpu", RR(r.ring = FLIGHTREC_RING_SIDEBAND, r.cpu = 1), EINVAL);
	expect("READ sideband from", RR(r.ring = FLIGHTREC_RING_SIDEBAND, r.from = 1), EINVAL);
	expect("READ NULL", ioctl(fd, FLIGHTREC_IOC_READ_RING, NULL), EFAULT);

	memset(&l, 0, sizeof(l));
	l.buf = (uintptr_t)m;
	l.count = 4;
	expect("LIST valid", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), 0);
	l.flags = 1;
	expect("LIST flags", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), EINVAL);
	l.flags = 0;
	l.reserved[0] = 1;
	expect("LIST reserved", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l), EINVAL);
	expect("LIST NULL", ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, NULL), EFAULT);

	memset(&mr, 0, sizeof(mr));
	mr.slot = 63;
	expect("READ_MARKER no slot", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr), ENOENT);
	mr.slot = 0;
	expect("READ_MARKER empty slot", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr), ENOENT);
	mr.ring = 2;
	expect("READ_MARKER ring 2", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr), EINVAL);
	mr.ring = 0;
	mr.cpu = info.nr_cpus;
	expect("READ_MARKER cpu", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr), EINVAL);
	mr.cpu = 0;
	mr.flags = 1;
	expect("READ_MARKER flags", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &mr), EINVAL);
	expect("READ_MARKER NULL", ioctl(fd, FLIGHTREC_IOC_READ_MARKER, NULL), EFAULT);
	expect("RELEASE_MARKER 99", ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, 99), ENOENT);
	expect("unknown nr", ioctl(fd, _IO(FLIGHTREC_IOC_MAGIC, 99), 0), ENOTTY);
	expect("unknown magic", ioctl(fd, _IO('x', 1), 0), ENOTTY);
	expect("INFO wrong size", ioctl(fd, _IOR(FLIGHTREC_IOC_MAGIC, 1, int), &info), ENOTTY);

	expect_open("without CAP_SYS_ADMIN and CAP_PERFMON", open_as(1, 1, 0), EPERM);
	expect_open("with CAP_PERFMON only", open_as(1, 0, 0), 0);
	expect_open("with CAP_SYS_ADMIN only", open_as(0, 1, 0), 0);
	expect_open("as nobody (mode 0600)", open_as(0, 0, 65534), EACCES);
	abi_markers(big, none);
	if (nfail) {
		printf("\n");
		return 1;
	}

	/* Random phase: commands near the valid ones, arguments from a mix of
	 * valid, garbage, unmapped and kernel pointers.  Embedded buffers
	 * point into an 8 MiB area, larger than any copy the module can make. */
	static const unsigned long cmds[] = {
		FLIGHTREC_IOC_INFO, FLIGHTREC_IOC_STATS, FLIGHTREC_IOC_FREEZE, FLIGHTREC_IOC_THAW,
		FLIGHTREC_IOC_READ_RING, FLIGHTREC_IOC_LIST_MARKERS, FLIGHTREC_IOC_READ_MARKER,
		FLIGHTREC_IOC_RELEASE_MARKER, FLIGHTREC_IOC_PANIC_INFO, FLIGHTREC_IOC_PANIC_READ,
		FLIGHTREC_IOC_PANIC_RELEASE,
	};
	static uint64_t arg_area[64];
	long counts[6] = { 0 }, ours = 0;
	const uint64_t bufs[] = { 0, (uintptr_t)none, 0xffff888000000000ULL,
				  (uintptr_t)(big + (1 << 20)), (uintptr_t)(big + (2 << 20)) };

	for (long i = 0; i < iterations; i++) {
		unsigned long cmd;
		uint64_t x = rnd();
		unsigned long arg;

		switch (x % 4) {
		case 0:
		case 1:
			cmd = cmds[rnd() % (sizeof(cmds) / sizeof(cmds[0]))];
			break;
		case 2:
			cmd = _IOC(rnd() % 4, FLIGHTREC_IOC_MAGIC, rnd() % 12, rnd() % 256);
			break;
		default:
			do
				cmd = (unsigned int)rnd();
			while (vfs_cmd(cmd));
			break;
		}
		for (int k = 0; k < 16; k++)
			arg_area[k] = rnd() % 3 ? rnd() % 4096 : rnd();
		if (rnd() % 2) {	/* plausible: zero reserved, sane ring/cpu */
			for (int k = 8; k < 16; k++)
				arg_area[k] = 0;
			arg_area[0] = ((rnd() % 4) << 32) | (rnd() % (info.nr_cpus + 1));
		}
		arg_area[rnd() % 4] = bufs[rnd() % 5];
		switch (rnd() % 5) {
		case 0:
			arg = 0;
			break;
		case 1:
			arg = rnd() % 128;
			break;
		case 2:
			arg = (unsigned long)none;
			break;
		default:
			arg = (unsigned long)arg_area;
			break;
		}
		if (cmd == FLIGHTREC_IOC_FREEZE)
			arg = rnd() % 2;
		long ret = ioctl(fd, cmd, arg);
		int e = ret ? errno : 0;

		if (!documented(cmd, e)) {
			printf("random ioctl cmd=%#lx arg=%#lx: errno %s is not documented for it\n",
			       cmd, arg, e ? strerror(e) : "0");
			return 1;
		}
		ours += !documented(cmd, ENOTTY);
		switch (e) {
		case 0:
			counts[0]++;
			break;
		case EINVAL:
			counts[1]++;
			break;
		case EFAULT:
			counts[2]++;
			break;
		case ENOTTY:
			counts[3]++;
			break;
		case ENOENT:
			counts[4]++;
			break;
		default:
			counts[5]++;
			break;
		}
	}
	ioctl(fd, FLIGHTREC_IOC_THAW, 0);
	printf("fixed=ok open:EPERM/EACCES ok markers=ok random=%ld (%ld to defined commands) each errno documented for its command: ok=%ld EINVAL=%ld EFAULT=%ld ENOTTY=%ld ENOENT=%ld ENODEV=%ld\n",
	       iterations, ours, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
	return 0;
}

/* bench: a fixed CPU-bound loop; prints ns per iteration block. */
static int cmd_bench(long blocks)
{
	uint64_t t0 = now_ns();
	volatile uint64_t x = 0;

	for (long b = 0; b < blocks; b++)
		for (int i = 0; i < (1 << 16); i++)
			x = x * 3 + i;
	printf("%llu\n", (unsigned long long)(now_ns() - t0));
	return 0;
}

/* stats: every CPU's STATS counters, one line each (scenario diagnostics). */
static int cmd_stats(void)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);

	for (uint32_t c = 0; c < s.count; c++)
		printf("cpu%u online=%u produced=%llu written=%llu overwritten=%llu frozen=%llu size=%llu head=%llu\n",
		       st[c].cpu, st[c].online, (unsigned long long)st[c].produced,
		       (unsigned long long)st[c].written, (unsigned long long)st[c].overwritten,
		       (unsigned long long)st[c].dropped_frozen, (unsigned long long)st[c].dropped_size,
		       (unsigned long long)st[c].data_head);
	return 0;
}

/* "produced handler_ns" summed over CPUs: the module's own cost (STATS). */
static int cmd_handler(void)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);
	uint64_t produced = 0, ns = 0;

	for (uint32_t c = 0; c < s.count; c++) {
		produced += st[c].produced;
		ns += st[c].handler_ns;
	}
	printf("%llu %llu\n", (unsigned long long)produced, (unsigned long long)ns);
	return produced ? 0 : 1;
}

/* The executable PT_LOAD range of a 32-bit ELF file. */
static void elf32_text(const char *path, uint64_t *lo, uint64_t *hi)
{
	Elf32_Ehdr eh;
	Elf32_Phdr ph;
	int f = open(path, O_RDONLY);

	if (f < 0 || pread(f, &eh, sizeof(eh), 0) != sizeof(eh) || eh.e_ident[EI_CLASS] != ELFCLASS32)
		FAIL("compat: %s is not a 32-bit ELF file", path);
	*lo = *hi = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(f, &ph, sizeof(ph), eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof(ph))
			FAIL("compat: short program header in %s", path);
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			*lo = ph.p_vaddr;
			*hi = (uint64_t)ph.p_vaddr + ph.p_memsz;
		}
	}
	close(f);
	if (!*hi)
		FAIL("compat: no executable segment in %s", path);
}

/*
 * A compat (ia32) task: every sample of it whose user ip lies in the 32-bit
 * program (after its exec; before, the pid is the 64-bit child) carries
 * PERF_SAMPLE_REGS_ABI_32, and its frame-pointer chain is walked
 * in 4-byte words: a sample in fr32_leaf has uframes[1] and [2] inside the
 * 32-bit program's text (returns into fr32_mid and fr32_main).  Walked as
 * 64-bit words, the saved ebp and return address would fuse into one bogus
 * frame pointer and uframes[1] would be the word above them.
 */
static int cmd_compat(const char *path)
{
	uint64_t lo, hi, deadline = now_ns() + 60 * 1000000000ULL;
	size_t n32 = 0, chained = 0, aux32 = 0;
	int st = 0;
	pid_t p;

	elf32_text(path, &lo, &hi);
	/* First the ioctls from 32-bit code, through compat_ptr_ioctl(). */
	p = fork();
	if (p == 0) {
		execl(path, path, "ioctl", (char *)NULL);
		_exit(127);
	}
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("compat: the 32-bit task's INFO/STATS check failed: status %#x (exit 10 open, "
		     "11/14 ioctl error, 12/13 INFO, 15/16 STATS read wrong: tests/vm/fr_vm_compat32.c)",
		     st);
	p = fork();
	if (p == 0) {
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	/* Wait (bounded) for enough samples of it; the rings hold seconds. */
	while (chained < 5) {
		struct timespec poll = { 0, 100 * 1000000L };

		if (now_ns() > deadline) {
			kill(p, SIGKILL);
			FAIL("compat: %zu chained samples of the 32-bit task in 60 s (%zu with abi 32)",
			     chained, n32);
		}
		nanosleep(&poll, NULL);	/* poll interval of the bounded wait */
		n32 = chained = aux32 = 0;
		for (uint32_t c = 0; c < info.nr_cpus; c++) {
			struct xsample *s;
			size_t n = read_data(c, &s, NULL);

			for (size_t i = 0; i < n; i++) {
				uint64_t uip = s[i].nr_uframes ? s[i].uframes[0] : 0;

				/* the pid's samples before exec are of the 64-bit child */
				if ((pid_t)s[i].pid != p || uip < lo || uip >= hi)
					continue;
				if (s[i].abi != PERF_SAMPLE_REGS_ABI_32) {
					kill(p, SIGKILL);
					FAIL("compat: sample seq %llu of the 32-bit task has abi %u, mode %u",
					     (unsigned long long)s[i].seq, s[i].abi, s[i].mode);
				}
				n32++;
				if ((s[i].flags & FLIGHTREC_SAMPLE_HAS_AUX) && s[i].aux_len)
					aux32++;
				if (s[i].mode == FLIGHTREC_MODE_USER && s[i].nr_uframes >= 3 &&
				    s[i].uframes[0] >= lo && s[i].uframes[0] < hi &&
				    s[i].uframes[1] >= lo && s[i].uframes[1] < hi &&
				    s[i].uframes[2] >= lo && s[i].uframes[2] < hi)
					chained++;
			}
			free(s);
		}
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	printf("compat: 32-bit INFO and STATS read right; %zu samples of the 32-bit task, all abi 32, %zu with its 3-deep fp chain, %zu with AUX\n",
	       n32, chained, aux32);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: fr_vm_test record|check|loss|freeze N|crash|storm N|sideband LIB|abi N|hold|handler|stats|markpad N|hookcap N|iouring SECONDS|compat BIN32|cycles KO N|spin MS|crashonly|bench N|nmi SECONDS TORTURE_PARAMS_DIR|panic-* (fr_vm_panic.c)");
	if (!strcmp(argv[1], "spin") && argc > 2) {
		spin_a(strtoull(argv[2], NULL, 0));
		return 0;
	}
	if (!strcmp(argv[1], "bench") && argc > 2)
		return cmd_bench(strtol(argv[2], NULL, 0));
	if (!strcmp(argv[1], "cycles") && argc > 3)
		return cmd_cycles(argv[2], atoi(argv[3]));
	if (!strncmp(argv[1], "panic-", 6))	/* fr_vm_panic.c */
		return cmd_panic(argc - 1, argv + 1);
	if (!strcmp(argv[1], "crashonly")) {	/* a core dump with no module checks */
		wait_segv(spawn_crash(0, -1, -1), "crashonly");
		return 0;
	}
	dev_open();
	if (!strcmp(argv[1], "record"))
		return cmd_record();
	if (!strcmp(argv[1], "check"))
		return cmd_check();
	if (!strcmp(argv[1], "loss"))
		return cmd_loss();
	if (!strcmp(argv[1], "freeze") && argc > 2)
		return cmd_freeze(atoi(argv[2]));
	if (!strcmp(argv[1], "crash"))
		return cmd_crash();
	if (!strcmp(argv[1], "storm") && argc > 2)
		return cmd_storm(atoi(argv[2]));
	if (!strcmp(argv[1], "sideband") && argc > 2)
		return cmd_sideband(argv[2]);
	if (!strcmp(argv[1], "abi"))
		return cmd_abi(argc > 2 ? strtol(argv[2], NULL, 0) : 100000);
	if (!strcmp(argv[1], "hold"))
		return cmd_hold();
	if (!strcmp(argv[1], "handler"))
		return cmd_handler();
	if (!strcmp(argv[1], "stats"))
		return cmd_stats();
	if (!strcmp(argv[1], "markpad") && argc > 2)
		return cmd_markpad(atoi(argv[2]));
	if (!strcmp(argv[1], "hookcap") && argc > 2)
		return cmd_hookcap(atoi(argv[2]));
	if (!strcmp(argv[1], "iouring") && argc > 2)
		return cmd_iouring(atoi(argv[2]));
	if (!strcmp(argv[1], "compat") && argc > 2)
		return cmd_compat(argv[2]);
	if (!strcmp(argv[1], "nmi") && argc > 3)
		return cmd_nmi(atoi(argv[2]), argv[3]);
	FAIL("unknown subcommand %s", argv[1]);
}
