/*
 * fr_vm_test hookcap N: the crash hook's user stack copy is bounded.  The
 * module is loaded with stack_bytes=65536 (guest_run.sh); N children each
 * crash 96 KiB deep in their stack, so 64 KiB of it could be copied.  The
 * crash hook runs with preemption off (interrupts off under the tracepoint)
 * and copies at most 8 KiB (FR_CRASH_STACK, module/fr_internal.h) into the
 * crash record: each record's AUX blob must hold exactly that many bytes.
 * Prints the markers' hook_ns median and maximum (module/README.md, "Work
 * per crash").
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/vm/fr_vm_test.h"

#define HOOKCAP_STACK	8192U		/* FR_CRASH_STACK */
#define HOOKCAP_DEPTH	96		/* frames of 1 KiB each */

static volatile uintptr_t hookcap_null;

/* 1 KiB of stack per level, touched, then the fault at the bottom. */
SAMPLED static void deep_crash(int level)
{
	volatile char pad[1024];

	memset((char *)pad, level, sizeof(pad));
	if (level)
		deep_crash(level - 1);
	else
		*(volatile int *)hookcap_null = pad[0];
	pad[1]++;	/* keeps the call a call, not a tail jump */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The crash record's AUX stack length in marker @mk. */
static uint32_t crash_stack_len(const struct flightrec_marker *mk)
{
	struct flightrec_marker_read r, ra;
	char *raw = read_marker(mk->slot, mk->cpu, FLIGHTREC_RING_DATA, &r);
	char *aux = read_marker(mk->slot, mk->cpu, FLIGHTREC_RING_AUX, &ra);
	struct flightrec_aux *a;
	struct xsample *s;
	size_t n = decode_records(raw, r.bytes, r.first, &s);
	uint32_t len;

	if (!n || !(s[n - 1].flags & FLIGHTREC_SAMPLE_CRASH) ||
	    s[n - 1].aux_pos < ra.first || s[n - 1].aux_pos + s[n - 1].aux_len > ra.end)
		FAIL("hookcap: marker %u: no crash record with its AUX blob last on cpu %u",
		     mk->slot, mk->cpu);
	a = (struct flightrec_aux *)(aux + (s[n - 1].aux_pos - ra.first));
	len = a->stack_len;
	free(s);
	free(raw);
	free(aux);
	return len;
}

int cmd_hookcap(int n)
{
	uint32_t want = info.stack_bytes < HOOKCAP_STACK ? info.stack_bytes : HOOKCAP_STACK;
	uint64_t hook[64];

	if (n < 1 || n > 64 || info.stack_bytes <= HOOKCAP_STACK)
		FAIL("hookcap: 1..64 crashes, module loaded with stack_bytes > %u (has %u)",
		     HOOKCAP_STACK, info.stack_bytes);
	for (int i = 0; i < n; i++) {
		struct flightrec_marker mk;
		uint32_t len;
		pid_t p = fork();

		if (p == 0) {
			struct rlimit rl = { 0, 0 };

			setrlimit(RLIMIT_CORE, &rl);
			deep_crash(HOOKCAP_DEPTH);
			_exit(0);
		}
		wait_segv(p, "hookcap");
		if (find_marker(p, &mk))
			FAIL("hookcap: no marker for pid %d", p);
		len = crash_stack_len(&mk);
		if (len != want)
			FAIL("hookcap: the crash record holds %u bytes of a 96 KiB deep stack, want %u"
			     " (stack_bytes %u, the hook's cap %u)", len, want, info.stack_bytes,
			     HOOKCAP_STACK);
		hook[i] = mk.hook_ns;
		if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot))
			FAIL("hookcap: release marker %u", mk.slot);
	}
	qsort(hook, n, sizeof(hook[0]), cmp_u64);
	printf("FLIGHTREC-VM-BENCH hookcap stack_bytes=%u crash_stack=%u crashes=%d hook_ns_median=%llu hook_ns_max=%llu\n",
	       info.stack_bytes, want, n, (unsigned long long)hook[n / 2],
	       (unsigned long long)hook[n - 1]);
	printf("%d crashes 96 KiB deep with stack_bytes=%u: crash records hold %u stack bytes; hook median %llu ns, max %llu ns\n",
	       n, info.stack_bytes, want, (unsigned long long)hook[n / 2],
	       (unsigned long long)hook[n - 1]);
	return 0;
}
