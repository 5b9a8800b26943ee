/*
 * Guest-side scenarios for flightrec.ko (run inside the QEMU guest by
 * guest_run.sh).  Each subcommand exits 0 on PASS and prints one
 * "detail" line on stdout; guest_run.sh turns it into a
 * FLIGHTREC-VM-RESULT line.  Links only libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "module/uapi/flightrec.h"

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

static int fd = -1;
static struct flightrec_info info;

static uint64_t now_ns(void)
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

static struct flightrec_cpu_stats *get_stats(struct flightrec_stats *s)
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
__attribute__((noinline)) void spin_a(uint64_t ms)
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

static pid_t spawn_spin(uint64_t ms)
{
	pid_t p = fork();

	if (p == 0) {
		spin_a(ms);
		_exit(0);
	}
	return p;
}

/* Symbol lookup in an ELF file: size and file offset of @name. */
static int elf_sym(const char *path, const char *name, uint64_t *vaddr, uint64_t *size,
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

/* Read a CPU's whole DATA ring. Returns number of samples in *out (malloc'd). */
static size_t read_data(uint32_t cpu, struct flightrec_sample **out, struct flightrec_read *rr)
{
	size_t cap = info.data_ring_bytes;
	char *buf = malloc(cap);
	struct flightrec_read r = { .cpu = cpu, .ring = FLIGHTREC_RING_DATA, .from = 0,
				    .buf = (uintptr_t)buf, .buf_len = cap };

	if (ioctl(fd, FLIGHTREC_IOC_READ_RING, &r))
		FAIL("READ_RING cpu %u: %s", cpu, strerror(errno));
	if (rr)
		*rr = r;
	memmove(buf, buf + r.data_offset, r.bytes);
	*out = (struct flightrec_sample *)buf;
	return r.bytes / sizeof(struct flightrec_sample);
}

static int cmd_record(void)
{
	pid_t p = spawn_spin(1500);
	size_t mine = 0, total = 0;
	uint64_t lo = (uintptr_t)spin_a, sz = 0, va, off;

	elf_sym("/proc/self/exe", "spin_a", &va, &sz, &off);
	waitpid(p, NULL, 0);
	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct flightrec_sample *s;
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

static int check_invariants(const char *what)
{
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st = get_stats(&s);
	uint64_t cap = info.data_ring_bytes / sizeof(struct flightrec_sample);

	for (uint32_t c = 0; c < s.count; c++) {
		uint64_t ow = st[c].written > cap ? st[c].written - cap : 0;
		uint64_t aow = st[c].aux_written > info.aux_ring_bytes ?
			       st[c].aux_written - info.aux_ring_bytes : 0;

		if (st[c].produced != st[c].written + st[c].dropped_frozen + st[c].dropped_size ||
		    st[c].overwritten != ow || st[c].aux_overwritten != aow ||
		    st[c].written != st[c].data_head)
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
		start[c] = st[c].data_head;
	for (;;) {
		int done = 1;

		kids[0] = spawn_spin(300);
		kids[1] = spawn_spin(300);
		waitpid(kids[0], NULL, 0);
		waitpid(kids[1], NULL, 0);
		st = get_stats(&s);
		for (uint32_t c = 0; c < s.count; c++)
			if (st[c].online && st[c].data_head - start[c] <= adv)
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
	uint64_t cap = info.data_ring_bytes / sizeof(struct flightrec_sample);
	struct flightrec_stats s;
	struct flightrec_cpu_stats *st;
	uint64_t df = 0, ds = 0, w = 0;
	pid_t a, b;

	a = spawn_spin(800);
	b = spawn_spin(800);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
		FAIL("FREEZE: %s", strerror(errno));
	a = spawn_spin(300);
	waitpid(a, NULL, 0);
	check_invariants("loss");
	st = get_stats(&s);
	for (uint32_t c = 0; c < s.count; c++) {
		struct flightrec_read r;
		struct flightrec_sample *smp;
		size_t n = read_data(c, &smp, &r);
		uint64_t first = st[c].written > cap ? st[c].written - cap : 0;

		free(smp);
		if (r.first != first || n != st[c].written - first || r.lost != first ||
		    r.head != st[c].written)
			FAIL("loss: cpu %u read first=%llu lost=%llu n=%zu, stats written=%llu cap=%llu",
			     c, (unsigned long long)r.first, (unsigned long long)r.lost, n,
			     (unsigned long long)st[c].written, (unsigned long long)cap);
		df += st[c].dropped_frozen;
		ds += st[c].dropped_size;
		w += st[c].written;
	}
	ioctl(fd, FLIGHTREC_IOC_THAW, 0);
	printf("written=%llu dropped_frozen=%llu dropped_size=%llu cap=%llu\n",
	       (unsigned long long)w, (unsigned long long)df, (unsigned long long)ds,
	       (unsigned long long)cap);
	return (df && ds && w > cap) ? 0 : 1;
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

static int cmd_crash(void)
{
	struct flightrec_marker m[64];
	struct flightrec_markers l = { .buf = (uintptr_t)m, .count = 64 };
	uint64_t va, sz = 0, off, lo = (uintptr_t)spin_a;
	uint64_t period = info.period ? info.period : 1000000000ULL / info.freq;
	int status, slot = -1;
	pid_t p;

	if (elf_sym("/proc/self/exe", "spin_a", &va, &sz, &off) || !sz)
		FAIL("spin_a not found in /proc/self/exe");
	p = fork();
	if (p == 0) {
		signal(SIGSEGV, SIG_DFL);
		spin_a(700);
		*(volatile int *)(uintptr_t)0 = 1;
		_exit(0);
	}
	waitpid(p, &status, 0);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		FAIL("child did not die of SIGSEGV (status %#x)", status);
	if (ioctl(fd, FLIGHTREC_IOC_LIST_MARKERS, &l))
		FAIL("LIST_MARKERS: %s", strerror(errno));
	for (uint32_t i = 0; i < l.count && i < 64; i++)
		if ((pid_t)m[i].pid == p)
			slot = i;
	if (slot < 0)
		FAIL("no marker for pid %d (%u markers)", p, l.count);
	struct flightrec_marker mk = m[slot];

	if ((pid_t)mk.tid != p || mk.signal != SIGSEGV)
		FAIL("marker pid=%u tid=%u signal=%u, want %d/%d/%d", mk.pid, mk.tid, mk.signal, p, p,
		     SIGSEGV);
	uint64_t last = 0, crasher_last = 0;
	size_t in_spin = 0, later = 0;
	int crasher_is_last_on_its_cpu = 0;

	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct flightrec_marker_read r = { .slot = mk.slot, .cpu = c,
						   .ring = FLIGHTREC_RING_DATA };

		ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r);
		struct flightrec_sample *s = malloc(r.total_bytes + 1);

		r.buf = (uintptr_t)s;
		r.buf_len = r.total_bytes;
		if (ioctl(fd, FLIGHTREC_IOC_READ_MARKER, &r))
			FAIL("READ_MARKER: %s", strerror(errno));
		size_t n = r.bytes / sizeof(*s);

		for (size_t i = 0; i < n; i++) {
			if ((pid_t)s[i].tid == p && s[i].time_ns > crasher_last) {
				crasher_last = s[i].time_ns;
				crasher_is_last_on_its_cpu = i == n - 1;
			}
			if (s[i].time_ns > mk.time_ns)
				later++;
			if (s[i].time_ns > last)
				last = s[i].time_ns;
			if ((pid_t)s[i].tid == p && s[i].ip >= lo && s[i].ip < lo + sz)
				in_spin++;
		}
		free(s);
	}
	uint64_t gap = mk.time_ns - last;

	/*
	 * The history must end at the crash: nothing after the marker, and on
	 * the crashing CPU the crashing thread is the last thing sampled.  The
	 * gap to the marker is one period on real hardware; a TCG guest on a
	 * loaded 2-core host loses vCPU time in bursts, hence the 20-period bound.
	 */
	if (later || !in_spin || !crasher_is_last_on_its_cpu || gap > 20 * period)
		FAIL("history: later=%zu in_spin_a=%zu crasher_last_on_cpu=%d gap=%llu ns period=%llu",
		     later, in_spin, crasher_is_last_on_its_cpu, (unsigned long long)gap,
		     (unsigned long long)period);
	size_t l1, l2;
	char *a = snapshot(mk.slot, &l1);
	uint64_t cap = info.data_ring_bytes / sizeof(struct flightrec_sample);

	wait_advance(cap + 1, 180, "crash");
	char *b = snapshot(mk.slot, &l2);

	if (l1 != l2 || memcmp(a, b, l1))
		FAIL("snapshot changed after rings wrapped (%zu vs %zu bytes)", l1, l2);
	ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot);
	printf("marker pid=%u tid=%u sig=%u in_spin_a=%zu gap_ns=%llu period_ns=%llu snapshot_bytes=%zu unchanged\n",
	       mk.pid, mk.tid, mk.signal, in_spin, (unsigned long long)gap,
	       (unsigned long long)period, l1);
	return 0;
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
		struct flightrec_sample *s;
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
	s.flags = 1;
	expect("STATS flags", ioctl(fd, FLIGHTREC_IOC_STATS, &s), EINVAL);
	s.flags = 0;
	s.reserved[1] = 1;
	expect("STATS reserved", ioctl(fd, FLIGHTREC_IOC_STATS, &s), EINVAL);
	s.reserved[1] = 0;
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
	expect("READ huge from", RR(r.from = ~0ULL, r.to = 0), EINVAL);
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
		FLIGHTREC_IOC_RELEASE_MARKER,
	};
	static uint64_t arg_area[64];
	long counts[5] = { 0 };
	const uint64_t bufs[] = { 0, (uintptr_t)none, 0xffff888000000000ULL,
				  (uintptr_t)(big + (1 << 20)), (uintptr_t)(big + (2 << 20)) };

	for (long i = 0; i < iterations; i++) {
		unsigned long cmd;
		uint64_t x = rnd();
		unsigned long arg;

		switch (x % 4) {
		case 0:
		case 1:
			cmd = cmds[rnd() % 8];
			break;
		case 2:
			cmd = _IOC(rnd() % 4, FLIGHTREC_IOC_MAGIC, rnd() % 12, rnd() % 256);
			break;
		default:
			cmd = (unsigned int)rnd();
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
		case ENODEV:
			counts[4]++;
			break;
		default:
			printf("random ioctl cmd=%#lx arg=%#lx: undocumented errno %s\n", cmd, arg,
			       strerror(e));
			return 1;
		}
	}
	ioctl(fd, FLIGHTREC_IOC_THAW, 0);
	printf("fixed=ok random=%ld ok=%ld EINVAL=%ld EFAULT=%ld ENOTTY=%ld ENOENT/ENODEV=%ld\n",
	       iterations, counts[0], counts[1], counts[2], counts[3], counts[4]);
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

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: fr_vm_test record|check|loss|crash|sideband LIB|abi N|spin MS|bench N");
	if (!strcmp(argv[1], "spin")) {
		spin_a(strtoull(argv[2], NULL, 0));
		return 0;
	}
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(strtol(argv[2], NULL, 0));
	dev_open();
	if (!strcmp(argv[1], "record"))
		return cmd_record();
	if (!strcmp(argv[1], "check"))
		return cmd_check();
	if (!strcmp(argv[1], "loss"))
		return cmd_loss();
	if (!strcmp(argv[1], "crash"))
		return cmd_crash();
	if (!strcmp(argv[1], "sideband") && argc > 2)
		return cmd_sideband(argv[2]);
	if (!strcmp(argv[1], "abi"))
		return cmd_abi(argc > 2 ? strtol(argv[2], NULL, 0) : 100000);
	FAIL("unknown subcommand %s", argv[1]);
}
