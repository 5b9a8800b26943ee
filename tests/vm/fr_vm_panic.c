/*
 * The panic region's guest-side test commands (scenario "panic",
 * tests/vm/guest_panic.sh), part of fr_vm_test:
 *
 *   panic-info [--expect none|empty|held|refused|unavailable] [--error ERRNO]
 *   panic-dump FILE                  PANIC_READ the whole held region
 *   panic-release
 *   panic-check FILE [options]       validate a dump, print one JSON line
 *     --panic-cpu N     the panicking CPU must be N
 *     --sysrq           its panic record's kernel stack has the sysrq crash path
 *     --workload-cpu N --lib PATH
 *                       fr_vm_burn (in PATH, attributed through the region's
 *                       sideband) takes most of CPU N's samples in the last
 *                       second before the panic
 *     --panics-lost N   the header's panics_lost
 *     --release-other   the header's release is not this kernel's (kernel
 *                       frames are then left unresolved)
 *     --live            a capture by panic-capture, not a panic: no panic()
 *                       entry record, no timing checks
 *     --cut             some CPU's ring held more than its share: CUT, and
 *                       not_copied > 0 (counters still exact)
 *   panic-capture FILE               FREEZE, run the notifier's body through
 *                       the test-only panic_test_capture parameter (module
 *                       loaded with test_panic=1), dump what it wrote
 *   panic-corrupt ADDR release|flip  rewrite the header's release (checksum
 *                       fixed) or flip a header byte (checksum left), through
 *                       /dev/mem (module unloaded)
 *   panic-restore ADDR FILE          write FILE (a panic-dump, or zeros for a
 *                       cold boot) over the region through /dev/mem (module
 *                       unloaded): a claimed region held again
 *   panic-release [--gone]           PANIC_RELEASE, then again (-ENOENT);
 *                       --gone: the first must already be -ENOENT (user
 *                       space released it)
 *   panic-burn LIB CPU               spin in LIB's fr_vm_burn pinned to CPU
 *
 * Kernel frames are symbolized with this boot's /proc/kallsyms shifted by
 * the KASLR delta (header kernel_anchor minus this boot's "panic").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "module/uapi/flightrec.h"
#include "tests/vm/fr_vm_test.h"

static uint32_t crc_table[256];

/* CRC-32 as zlib's crc32(0, buf, len), the region's checksum. */
static uint32_t crc32z(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t c = 0xffffffffu;

	if (!crc_table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;

			for (int k = 0; k < 8; k++)
				v = v & 1 ? 0xedb88320u ^ (v >> 1) : v >> 1;
			crc_table[i] = v;
		}
	while (len--)
		c = crc_table[(c ^ *b++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static uint32_t header_crc(const struct flightrec_panic_header *h)
{
	struct flightrec_panic_header c = *h;

	c.header_crc = 0;
	return crc32z(&c, sizeof(c));
}

static const char *const found_names[] = { "none", "empty", "held", "refused", "unavailable" };

static int panic_info(int argc, char **argv)
{
	struct flightrec_panic_info pi;
	const char *expect = NULL;
	int want_err = 0, have_err = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--expect"))
			expect = argv[i + 1];
		else if (!strcmp(argv[i], "--error"))
			want_err = atoi(argv[i + 1]), have_err = 1;
	}
	if (ioctl(fd, FLIGHTREC_IOC_PANIC_INFO, &pi))
		FAIL("PANIC_INFO: %s", strerror(errno));
	const char *name = pi.state < 5 ? found_names[pi.state] : "?";

	printf("{\"state\":\"%s\",\"error\":%d,\"region_phys\":%llu,\"region_size\":%llu,\"held_bytes\":%llu}\n",
	       name, pi.error, (unsigned long long)pi.region_phys, (unsigned long long)pi.region_size,
	       (unsigned long long)pi.held_bytes);
	if (expect && strcmp(expect, name))
		FAIL("panic state %s, expected %s", name, expect);
	if (have_err && pi.error != want_err)
		FAIL("panic error %d, expected %d", pi.error, want_err);
	return 0;
}

static int panic_dump(const char *path)
{
	struct flightrec_panic_info pi;

	if (ioctl(fd, FLIGHTREC_IOC_PANIC_INFO, &pi))
		FAIL("PANIC_INFO: %s", strerror(errno));
	if (pi.state != FLIGHTREC_PANIC_HELD || pi.held_bytes != pi.region_size)
		FAIL("nothing held (state %u, held_bytes %llu)", pi.state, (unsigned long long)pi.held_bytes);
	char *buf = malloc(pi.held_bytes);
	uint64_t off = 0;

	while (off < pi.held_bytes) {	/* in pieces: the offset is honoured */
		struct flightrec_panic_read r = { .offset = off, .buf = (uintptr_t)(buf + off),
						  .buf_len = 1 << 20 };
		if (ioctl(fd, FLIGHTREC_IOC_PANIC_READ, &r))
			FAIL("PANIC_READ at %llu: %s", (unsigned long long)off, strerror(errno));
		if (!r.bytes)
			FAIL("PANIC_READ at %llu: no bytes", (unsigned long long)off);
		off += r.bytes;
	}
	struct flightrec_panic_read past = { .offset = pi.held_bytes + 1, .buf = (uintptr_t)buf,
					     .buf_len = 8 };
	if (!ioctl(fd, FLIGHTREC_IOC_PANIC_READ, &past) || errno != EINVAL)
		FAIL("PANIC_READ past the end: not -EINVAL");
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(buf, 1, off, f) != off || fclose(f))
		FAIL("write %s: %s", path, strerror(errno));
	printf("dumped %llu bytes to %s\n", (unsigned long long)off, path);
	free(buf);
	return 0;
}

/* ---- kallsyms ---- */

struct ksym {
	uint64_t addr;
	char name[64];
};
static struct ksym *ksyms;
static size_t nksyms;

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void load_kallsyms(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], type, name[256];
	unsigned long long a;
	size_t cap = 0;

	if (!f)
		FAIL("/proc/kallsyms: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, name) != 3 || (type != 't' && type != 'T'))
			continue;
		if (strchr(line, '['))	/* module symbols: not the kernel image */
			continue;
		if (nksyms == cap)
			ksyms = realloc(ksyms, (cap = cap ? 2 * cap : 65536) * sizeof(*ksyms));
		ksyms[nksyms].addr = a;
		name[sizeof(ksyms[nksyms].name) - 1] = 0;
		memcpy(ksyms[nksyms].name, name, sizeof(ksyms[nksyms].name));
		nksyms++;
	}
	fclose(f);
	qsort(ksyms, nksyms, sizeof(*ksyms), ksym_cmp);
}

static const char *ksym_name(uint64_t addr)
{
	size_t lo = 0, hi = nksyms;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (ksyms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return nksyms && ksyms[lo].addr <= addr && addr - ksyms[lo].addr < (1 << 20) ? ksyms[lo].name : "?";
}

static uint64_t ksym_addr(const char *name)
{
	for (size_t i = 0; i < nksyms; i++)
		if (!strcmp(ksyms[i].name, name))
			return ksyms[i].addr;
	return 0;
}

/* ---- panic-check ---- */

struct rec {
	const struct flightrec_sample *h;
	const uint64_t *frames;
};

/* The records of one CPU's copy; FAIL on a malformed one. */
static size_t walk(const char *buf, uint64_t len, uint64_t first, struct rec **out)
{
	size_t n = 0;
	uint64_t off = 0;
	struct rec *r = calloc(len / sizeof(struct flightrec_sample) + 1, sizeof(*r));

	while (off < len) {
		const struct flightrec_sample *h = (const void *)(buf + off);
		uint64_t pos = first + off;

		if (len - off < 8 || h->size < 8 || h->size % 8 || h->size > len - off ||
		    pos / FLIGHTREC_DATA_CHUNK != (pos + h->size - 1) / FLIGHTREC_DATA_CHUNK)
			FAIL("copy: bad record size at ring position %llu", (unsigned long long)pos);
		if (h->type == FLIGHTREC_REC_SAMPLE) {
			if (h->size != sizeof(*h) + 8 * (h->nr_kframes + h->nr_uframes) || h->seq != pos)
				FAIL("copy: bad sample at %llu", (unsigned long long)pos);
			r[n].h = h;
			r[n].frames = (const uint64_t *)(h + 1);
			n++;
		} else if (h->type != FLIGHTREC_REC_PAD) {
			FAIL("copy: unknown record type %u at %llu", h->type, (unsigned long long)pos);
		}
		off += h->size;
	}
	*out = r;
	return n;
}

/* The panic message for the JSON line: only plain characters (it is the crashed kernel's text). */
static const char *plain(const char *s, size_t max)
{
	static char out[80];
	size_t i;

	for (i = 0; i < max && i < sizeof(out) - 1 && s[i]; i++)
		out[i] = (s[i] >= ' ' && s[i] < 127 && s[i] != '"' && s[i] != '\\') ? s[i] : '?';
	out[i] = 0;
	return out;
}

static int panic_check(int argc, char **argv)
{
	const char *path = argv[1], *lib = NULL;
	int want_cpu = -1, sysrq = 0, work_cpu = -1, lost = -1, release_other = 0, live = 0, cut = 0;
	uint64_t cut_cpus = 0;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--panic-cpu") && i + 1 < argc)
			want_cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sysrq"))
			sysrq = 1;
		else if (!strcmp(argv[i], "--workload-cpu") && i + 1 < argc)
			work_cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--panics-lost") && i + 1 < argc)
			lost = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--release-other"))
			release_other = 1;
		else if (!strcmp(argv[i], "--live"))
			live = 1;
		else if (!strcmp(argv[i], "--cut"))
			cut = 1;
		else
			FAIL("panic-check: unknown option %s", argv[i]);
	}
	FILE *f = fopen(path, "rb");
	struct stat st;

	if (!f || fstat(fileno(f), &st))
		FAIL("%s: %s", path, strerror(errno));
	char *b = malloc(st.st_size);

	if (fread(b, 1, st.st_size, f) != (size_t)st.st_size)
		FAIL("read %s", path);
	fclose(f);
	const struct flightrec_panic_header *h = (const void *)b;

	if ((uint64_t)st.st_size < FLIGHTREC_PANIC_HEADER_BYTES || h->magic != FLIGHTREC_PANIC_MAGIC ||
	    h->version != FLIGHTREC_PANIC_VERSION || h->header_size != sizeof(*h))
		FAIL("not a version %d panic region", FLIGHTREC_PANIC_VERSION);
	if (header_crc(h) != h->header_crc)
		FAIL("header crc mismatch");
	if (h->region_size != (uint64_t)st.st_size || h->state != FLIGHTREC_PANIC_CAPTURED)
		FAIL("region_size %llu (file %lld) state %u", (unsigned long long)h->region_size,
		     (long long)st.st_size, h->state);
	if (h->cpu_off + (uint64_t)h->nr_cpus * sizeof(struct flightrec_panic_cpu) > h->region_size ||
	    h->cpu_desc_size != sizeof(struct flightrec_panic_cpu) || h->panic_cpu >= h->nr_cpus)
		FAIL("bad cpu table");
	const struct flightrec_panic_cpu *d = (const void *)(b + h->cpu_off);

	if (crc32z(d, h->nr_cpus * sizeof(*d)) != h->cpu_crc)
		FAIL("cpu table crc mismatch");
	if (h->mod_off + (uint64_t)h->mod_count * sizeof(struct flightrec_panic_module) > h->region_size ||
	    crc32z(b + h->mod_off, h->mod_count * sizeof(struct flightrec_panic_module)) != h->mod_crc)
		FAIL("module table bad");
	if (h->sb_off + (uint64_t)h->sb_count * sizeof(struct flightrec_sideband) > h->region_size ||
	    crc32z(b + h->sb_off, h->sb_count * sizeof(struct flightrec_sideband)) != h->sb_crc)
		FAIL("sideband bad");
	const struct flightrec_sideband *sb = (const void *)(b + h->sb_off);
	int flightrec_listed = 0;

	for (uint32_t i = 0; i < h->mod_count; i++) {
		const struct flightrec_panic_module *m = (const void *)(b + h->mod_off) + i * sizeof(*m);

		if (!strncmp(m->name, "flightrec", sizeof(m->name)) && m->base && m->size)
			flightrec_listed = 1;
	}
	if (!flightrec_listed)
		FAIL("module table (%u entries) lacks flightrec", h->mod_count);
	if (!live && !(h->flags & FLIGHTREC_PANIC_F_ENTRY))
		FAIL("no panic() entry record (flags %#x)", h->flags);

	struct utsname u;

	uname(&u);
	int same_release = !strncmp(h->release, u.release, sizeof(h->release));

	if (release_other == same_release)
		FAIL("release %.65s, this kernel %s", h->release, u.release);
	int64_t delta = 0;
	/* /proc/kallsyms costs seconds under TCG: read only for the sysrq check */
	int symbolize = same_release && sysrq;

	if (symbolize) {
		load_kallsyms();
		uint64_t p = ksym_addr("panic");

		if (!p)
			FAIL("no panic in /proc/kallsyms");
		delta = (int64_t)(h->kernel_anchor - p);
	}
	uint64_t period = h->freq ? 1000000000ULL / h->freq : h->period;
	uint64_t burn_va = 0, burn_sz = 0, burn_off = 0;
	struct stat stl = { 0 };

	if (lib && (stat(lib, &stl) || elf_sym(lib, "fr_vm_burn", &burn_va, &burn_sz, &burn_off) || !burn_sz))
		FAIL("cannot find fr_vm_burn in %s", lib);

	printf("{\"boot_id\":\"");
	for (int i = 0; i < 16; i++)
		printf("%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", h->boot_id[i]);
	printf("\",\"release\":\"%.65s\",\"panic_cpu\":%u,\"panic_time_ns\":%llu,\"panics_lost\":%u,"
	       "\"modules\":%u,\"sideband\":%u,\"sb_missing\":%llu,\"msg\":\"%s\",\"cpus\":[",
	       h->release, h->panic_cpu, (unsigned long long)h->panic_time_ns, h->panics_lost, h->mod_count,
	       h->sb_count, (unsigned long long)h->sb_missing, plain(h->panic_msg, 60));
	int bad = 0;
	char why[512] = "";

	for (uint32_t c = 0; c < h->nr_cpus; c++) {
		const struct flightrec_panic_cpu *x = &d[c];
		struct rec *r;

		if (x->data_off + x->data_len > h->region_size || crc32z(b + x->data_off, x->data_len) != x->data_crc)
			FAIL("cpu %u: data crc mismatch", c);
		size_t n = walk(b + x->data_off, x->data_len, x->data_first, &r);
		size_t ring = n;

		if (x->data_len != x->data_end - x->data_first)
			FAIL("cpu %u: copy [%llu, +%llu) does not end at the head %llu", c,
			     (unsigned long long)x->data_first, (unsigned long long)x->data_len,
			     (unsigned long long)x->data_end);
		uint64_t last = ring ? r[ring - 1].h->time_ns : 0;
		int exact = x->written == x->overwritten + x->not_copied + x->records &&
			    x->produced == x->written + x->dropped_frozen + x->dropped_size;
		/* the other vCPU's last second: samples in fr_vm_burn, attributed by the sideband */
		size_t last_sec = 0, in_burn = 0, npids = 0;
		struct {
			uint32_t pid, n;
		} pids[8] = { { 0, 0 } };

		for (size_t i = 0; i < ring; i++) {
			const struct flightrec_sample *s = r[i].h;

			if (s->time_ns + 1000000000ULL < h->panic_time_ns || (int)c != work_cpu || !lib)
				continue;
			last_sec++;
			/* who else ran there: the first 8 pids seen, with counts */
			size_t k;

			for (k = 0; k < npids && pids[k].pid != s->pid; k++)
				;
			if (k < 8) {
				pids[k].pid = s->pid;
				pids[k].n++;
				npids += k == npids;
			}
			int best = -1;
			/* the user code the thread ran: a kernel-mode sample's first user frame */
			uint64_t uip = s->mode == FLIGHTREC_MODE_USER ? s->ip :
				       s->nr_uframes ? r[i].frames[s->nr_kframes] : 0;

			for (uint32_t j = 0; j < h->sb_count; j++)
				if (sb[j].type == FLIGHTREC_SB_MMAP && sb[j].pid == s->pid && sb[j].time_ns <= s->time_ns &&
				    uip >= sb[j].start && uip < sb[j].start + sb[j].len)
					best = j;
			if (best >= 0 && sb[best].ino == (uint64_t)stl.st_ino &&
			    uip - sb[best].start + sb[best].pgoff >= burn_off &&
			    uip - sb[best].start + sb[best].pgoff < burn_off + burn_sz)
				in_burn++;
		}
		printf("%s{\"cpu\":%u,\"flags\":%u,\"records\":%llu,\"walked\":%zu,\"written\":%llu,\"overwritten\":%llu,"
		       "\"not_copied\":%llu,\"produced\":%llu,\"exact\":%d,\"last_time_ns\":%llu,\"last_to_panic_ns\":%lld",
		       c ? "," : "", c, x->flags, (unsigned long long)x->records, ring, (unsigned long long)x->written,
		       (unsigned long long)x->overwritten, (unsigned long long)x->not_copied,
		       (unsigned long long)x->produced, exact, (unsigned long long)x->last_time_ns,
		       (long long)(h->panic_time_ns - last));
		if (ring != x->records || last != x->last_time_ns) {
			bad = 1;
			snprintf(why + strlen(why), sizeof(why) - strlen(why), " cpu%u: walked %zu != records", c, ring);
		}
		if (!exact && !(x->flags & FLIGHTREC_PANIC_CPU_TORN)) {
			bad = 1;
			snprintf(why + strlen(why), sizeof(why) - strlen(why), " cpu%u: counters not exact", c);
		}
		if ((int)c == work_cpu && lib) {
			printf(",\"last_second\":%zu,\"in_fr_vm_burn\":%zu,\"pids\":{", last_sec, in_burn);
			for (size_t k = 0; k < npids; k++)
				printf("%s\"%u\":%u", k ? "," : "", pids[k].pid, pids[k].n);
			printf("}");
			if (!last_sec || in_burn * 2 < last_sec) {
				bad = 1;
				snprintf(why + strlen(why), sizeof(why) - strlen(why),
					 " cpu%u: fr_vm_burn %zu of %zu in the last second", c, in_burn, last_sec);
			}
		}
		if (c == h->panic_cpu) {
			const struct flightrec_sample *p = (const void *)(b + h->rec_off);
			const uint64_t *pf = (const uint64_t *)(p + 1);
			int found_sysrq = 0;

			if (!(x->flags & FLIGHTREC_PANIC_CPU_PANICKING))
				FAIL("panic cpu %u: not PANICKING (flags %#x)", c, x->flags);
			if (!h->rec_off || h->rec_off < sizeof(*h) || h->rec_size > FLIGHTREC_SAMPLE_MAX_SIZE ||
			    h->rec_off + h->rec_size > FLIGHTREC_PANIC_HEADER_BYTES ||
			    crc32z(p, h->rec_size) != h->rec_crc || p->size != h->rec_size ||
			    p->type != FLIGHTREC_REC_SAMPLE || !(p->flags & FLIGHTREC_SAMPLE_CRASH) ||
			    p->size != sizeof(*p) + 8 * (p->nr_kframes + p->nr_uframes) || p->seq != x->data_end ||
			    p->cpu != c)
				FAIL("no valid panic record (rec_off %llu size %u)", (unsigned long long)h->rec_off,
				     h->rec_size);
			printf(",\"panic_record\":{\"time_ns\":%llu,\"pid\":%u,\"kstack\":[",
			       (unsigned long long)p->time_ns, p->pid);
			for (int k = 0; k < p->nr_kframes; k++) {
				uint64_t ip = pf[k];
				const char *name = symbolize ? ksym_name(ip - delta) : same_release ? "-" : "unresolved";

				found_sysrq |= !strcmp(name, "sysrq_handle_crash") || !strcmp(name, "__handle_sysrq");
				printf("%s\"%#llx %s\"", k ? "," : "", (unsigned long long)ip, name);
			}
			printf("]}");
			/* where the timer's last sample found this CPU */
			if (ring) {
				const struct rec *l = &r[ring - 1];

				printf(",\"last_sample\":{\"pid\":%u,\"mode\":%u,\"kstack\":[", l->h->pid, l->h->mode);
				for (int k = 0; k < l->h->nr_kframes && k < 12; k++)
					printf("%s\"%s\"", k ? "," : "",
					       symbolize ? ksym_name(l->frames[k] - delta) :
					       same_release ? "-" : "unresolved");
				printf("]}");
			}
			if (p->time_ns != h->panic_time_ns && !live) {
				bad = 1;
				snprintf(why + strlen(why), sizeof(why) - strlen(why), " panic record time");
			}
			if (sysrq && !found_sysrq) {
				bad = 1;
				snprintf(why + strlen(why), sizeof(why) - strlen(why), " no sysrq crash path");
			}
			/*
			 * The timer's last sample on the panicking CPU: within 2
			 * periods of panic() entry.  It may also come a little
			 * after the entry time, taken before panic() disables
			 * interrupts (see fr_panic_entry()).
			 */
			if (!live && (!ring || (last < h->panic_time_ns && h->panic_time_ns - last > 2 * period) ||
				      (last > h->panic_time_ns && last - h->panic_time_ns > 2 * period))) {
				bad = 1;
				snprintf(why + strlen(why), sizeof(why) - strlen(why),
					 " panicking cpu's last sample %lld ns before the panic entry (period %llu)",
					 (long long)(h->panic_time_ns - last), (unsigned long long)period);
			}
		}
		if ((x->flags & FLIGHTREC_PANIC_CPU_CUT) && x->not_copied)
			cut_cpus++;
		printf("}");
		free(r);
	}
	printf("]}\n");
	if (cut && !cut_cpus)
		FAIL("no CPU was cut to its share with records left out");
	if (want_cpu >= 0 && (int)h->panic_cpu != want_cpu)
		FAIL("panic cpu %u, expected %d", h->panic_cpu, want_cpu);
	if (lost >= 0 && (int)h->panics_lost != lost)
		FAIL("panics_lost %u, expected %d", h->panics_lost, lost);
	if (bad)
		FAIL("panic-check failed:%s", why);
	printf("panic region valid: %u cpus, panic on cpu %u, %u modules, %u sideband records\n", h->nr_cpus,
	       h->panic_cpu, h->mod_count, h->sb_count);
	return 0;
}

/* ---- corrupter and workload ---- */

static int panic_capture(const char *path)
{
	int p = open("/sys/module/flightrec/parameters/panic_test_capture", O_WRONLY);

	if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
		FAIL("FREEZE: %s", strerror(errno));
	if (p < 0 || write(p, "1", 1) != 1)
		FAIL("panic_test_capture: %s (load with test_panic=1)", strerror(errno));
	close(p);
	return panic_dump(path);
}

static int panic_corrupt(uint64_t addr, const char *what)
{
	int m = open("/dev/mem", O_RDWR | O_SYNC);

	if (m < 0)
		FAIL("/dev/mem: %s", strerror(errno));
	struct flightrec_panic_header *h = mmap(NULL, FLIGHTREC_PANIC_HEADER_BYTES, PROT_READ | PROT_WRITE,
						MAP_SHARED, m, addr);
	if (h == MAP_FAILED)
		FAIL("mmap /dev/mem at %#llx: %s (CONFIG_STRICT_DEVMEM refuses System RAM and busy ranges)",
		     (unsigned long long)addr, strerror(errno));
	if (h->magic != FLIGHTREC_PANIC_MAGIC)
		FAIL("no panic region at %#llx", (unsigned long long)addr);
	if (!strcmp(what, "release")) {
		memset(h->release, 0, sizeof(h->release));
		strcpy(h->release, "0.0.0-flightrec-other");
		h->header_crc = header_crc(h);
	} else if (!strcmp(what, "flip")) {
		((volatile uint8_t *)h->release)[0] ^= 0x20;
	} else {
		FAIL("panic-corrupt: release or flip");
	}
	msync(h, FLIGHTREC_PANIC_HEADER_BYTES, MS_SYNC);
	munmap(h, FLIGHTREC_PANIC_HEADER_BYTES);
	close(m);
	printf("header at %#llx: %s\n", (unsigned long long)addr, what);
	return 0;
}

static int panic_restore(uint64_t addr, const char *path)
{
	int m = open("/dev/mem", O_RDWR | O_SYNC);
	int f = open(path, O_RDONLY);
	struct stat st;

	if (m < 0 || f < 0 || fstat(f, &st))
		FAIL("panic-restore: /dev/mem or %s: %s", path, strerror(errno));
	if (st.st_size < (off_t)FLIGHTREC_PANIC_HEADER_BYTES || st.st_size > (64 << 20))
		FAIL("panic-restore: %s has %lld bytes", path, (long long)st.st_size);
	uint8_t *r = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, m, addr);

	if (r == MAP_FAILED)
		FAIL("mmap /dev/mem at %#llx: %s", (unsigned long long)addr, strerror(errno));
	for (off_t off = 0; off < st.st_size;) {
		ssize_t n = pread(f, r + off, st.st_size - off, off);

		if (n <= 0)
			FAIL("panic-restore: reading %s: %s", path, n ? strerror(errno) : "short");
		off += n;
	}
	msync(r, st.st_size, MS_SYNC);
	munmap(r, st.st_size);
	close(f);
	close(m);
	printf("region at %#llx: %lld bytes from %s\n", (unsigned long long)addr, (long long)st.st_size, path);
	return 0;
}

static int panic_burn(const char *lib, int cpu)
{
	cpu_set_t set;
	void *h = dlopen(lib, RTLD_NOW);
	uint64_t (*burn)(uint64_t);

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		FAIL("affinity cpu %d: %s", cpu, strerror(errno));
	if (!h || !(burn = (uint64_t (*)(uint64_t))dlsym(h, "fr_vm_burn")))
		FAIL("dlopen %s: %s", lib, dlerror());
	printf("burning on cpu %d\n", cpu);
	fflush(stdout);
	for (;;)
		burn(1 << 20);
}

int cmd_panic(int argc, char **argv)
{
	if (!strcmp(argv[0], "panic-check") && argc > 1)
		return panic_check(argc, argv);
	if (!strcmp(argv[0], "panic-corrupt") && argc > 2)
		return panic_corrupt(strtoull(argv[1], NULL, 0), argv[2]);
	if (!strcmp(argv[0], "panic-restore") && argc > 2)
		return panic_restore(strtoull(argv[1], NULL, 0), argv[2]);
	if (!strcmp(argv[0], "panic-burn") && argc > 2)
		return panic_burn(argv[1], atoi(argv[2]));
	fd = open(FLIGHTREC_DEVICE, O_RDONLY);
	if (fd < 0)
		FAIL("open %s: %s", FLIGHTREC_DEVICE, strerror(errno));
	if (!strcmp(argv[0], "panic-info"))
		return panic_info(argc, argv);
	if (!strcmp(argv[0], "panic-dump") && argc > 1)
		return panic_dump(argv[1]);
	if (!strcmp(argv[0], "panic-capture") && argc > 1)
		return panic_capture(argv[1]);
	if (!strcmp(argv[0], "panic-release")) {
		if (argc > 1 && !strcmp(argv[1], "--gone")) {
			if (!ioctl(fd, FLIGHTREC_IOC_PANIC_RELEASE, 0) || errno != ENOENT)
				FAIL("PANIC_RELEASE after user space released it: not -ENOENT");
			printf("already released\n");
			return 0;
		}
		if (ioctl(fd, FLIGHTREC_IOC_PANIC_RELEASE, 0))
			FAIL("PANIC_RELEASE: %s", strerror(errno));
		if (!ioctl(fd, FLIGHTREC_IOC_PANIC_RELEASE, 0) || errno != ENOENT)
			FAIL("second PANIC_RELEASE: not -ENOENT");
		printf("released\n");
		return 0;
	}
	FAIL("unknown panic subcommand %s", argv[0]);
}
