/*
 * fr_vm_test markpad TRIES: the crash record where it does not fit before a
 * FLIGHTREC_DATA_CHUNK boundary, in a marker copied while no sample moves the
 * rings (guest_run.sh loads flightrec.ko with a 16 KiB DATA ring and a 100 us
 * period, so the rings wrap within a second).
 *
 * Every CPU's DATA ring wraps, with records of many sizes (a spinner per CPU
 * whose user stack depth keeps changing); then this process FREEZEs (no sample is written
 * anywhere until THAW) and reads CPU 0's head; if fewer than
 * FLIGHTREC_SAMPLE_MAX_SIZE bytes are left in its chunk (the crash hook must
 * then write a PAD and put the crash record at the next chunk, like the
 * writer, fr_data_begin()), a child pinned to CPU 0 stores through NULL;
 * otherwise THAW, wait for CPU 0's head to move, and try again (at most TRIES
 * times; about one head in eight is in that zone).
 *
 * Pass: the marker is on CPU 0; each CPU's preserved DATA decodes record by
 * record from its first position (a wrapped ring's copy starts at a chunk
 * boundary, not at head - size inside a record: the PREEMPT_RT coredump
 * failure, where the deferred copy ran before any new sample); CPU 0's copy
 * holds the ring up to the head, then a PAD of exactly the bytes left in the
 * chunk, then the crash record (the child's, flagged CRASH) at the chunk
 * boundary, last, ending the copy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/vm/fr_vm_test.h"

#define CHUNK FLIGHTREC_DATA_CHUNK

/*
 * User frames 1 to 16 deep, changing all the time: records of many sizes, so
 * that a ring's oldest byte lies inside a record (with one size dividing the
 * chunk, as idle samples can be, every multiple of it is a record start).
 */
static volatile int deep_calls;

static SAMPLED void deep(int n)
{
	volatile uint64_t x = 0;

	if (n > 0) {
		deep(n - 1);
		deep_calls++;	/* not a tail call: each level keeps its frame */
		return;
	}
	for (int i = 0; i < 20000; i++)
		x = x * 3 + i;
}

static pid_t spawn_deep(int cpu)
{
	cpu_set_t one;
	pid_t p = fork();

	if (p == 0) {
		die_with_parent();
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		sched_setaffinity(0, sizeof(one), &one);
		for (unsigned int i = 0;; i++)
			deep(i * 7 % 16);
	}
	return p;
}

/* Bounded wait (30 s) until every online CPU's DATA head is past @min. */
static void wait_heads(uint64_t min, const char *what)
{
	uint64_t deadline = now_ns() + 30000000000ULL;
	struct flightrec_stats s;

	for (;;) {
		struct flightrec_cpu_stats *st = get_stats(&s);
		int done = 1;

		for (uint32_t c = 0; c < s.count; c++)
			if (st[c].online && st[c].data_head <= min)
				done = 0;
		if (done)
			return;
		if (now_ns() > deadline)
			FAIL("markpad: %s: DATA heads not past %llu after 30 s", what,
			     (unsigned long long)min);
		spin_a(2);
	}
}

static uint64_t cpu0_head(void)
{
	struct flightrec_stats s;
	return get_stats(&s)[0].data_head;
}

int cmd_markpad(int tries)
{
	uint64_t cap = info.data_ring_bytes, head = 0, room = 0, pad_at;
	struct flightrec_marker_read r;
	struct flightrec_marker mk;
	struct flightrec_sample ph;
	struct xsample *x;
	size_t n, total = 0;
	cpu_set_t one;
	char *raw;
	pid_t p, kids[64] = { 0 };
	int t;

	/* Wrapped rings of mixed record sizes on every CPU. */
	for (uint32_t c = 0; c < info.nr_cpus && c < 64; c++)
		kids[c] = spawn_deep(c);
	wait_heads(cap + CHUNK, "wrap");
	for (t = 0; t < tries; t++) {
		if (ioctl(fd, FLIGHTREC_IOC_FREEZE, 0))
			FAIL("FREEZE: %s", strerror(errno));
		head = cpu0_head();
		room = CHUNK - head % CHUNK;
		if (room < FLIGHTREC_SAMPLE_MAX_SIZE)
			break;
		if (ioctl(fd, FLIGHTREC_IOC_THAW, 0))
			FAIL("THAW: %s", strerror(errno));
		{
			uint64_t deadline = now_ns() + 10000000000ULL;

			while (cpu0_head() == head)
				if (now_ns() > deadline)
					FAIL("markpad: cpu 0 head stuck at %llu", (unsigned long long)head);
		}
	}
	if (t == tries)
		FAIL("markpad: no cpu 0 head within %u bytes of a chunk end in %d tries",
		     (unsigned)FLIGHTREC_SAMPLE_MAX_SIZE, tries);

	/* Frozen: the crash hook still takes the marker and writes the crash record. */
	p = fork();
	if (p == 0) {
		die_with_parent();
		CPU_ZERO(&one);
		CPU_SET(0, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			_exit(2);
		*(volatile int *)0 = 1;
		_exit(3);
	}
	wait_segv(p, "markpad");
	for (uint32_t c = 0; c < info.nr_cpus && c < 64; c++) {
		kill(kids[c], SIGKILL);
		waitpid(kids[c], NULL, 0);
	}
	if (find_marker(p, &mk))
		FAIL("markpad: no marker for pid %d", p);
	if (mk.cpu != 0)
		FAIL("markpad: marker on cpu %u, the child was pinned to 0", mk.cpu);

	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		raw = read_marker(mk.slot, c, FLIGHTREC_RING_DATA, &r);
		/* decode_records() FAILs on the first record it cannot walk */
		n = decode_records(raw, r.bytes, r.first, &x);
		total += n;
		if (c != 0) {
			free(raw);
			free(x);
			continue;
		}
		pad_at = head;
		if (r.first > pad_at || r.first % CHUNK || n < 2)
			FAIL("markpad: cpu 0 copy [%llu, %llu), %zu records; head at the crash %llu",
			     (unsigned long long)r.first, (unsigned long long)r.end, n,
			     (unsigned long long)head);
		memcpy(&ph, raw + (pad_at - r.first), sizeof(ph.size) + sizeof(ph.type));
		if (ph.type != FLIGHTREC_REC_PAD || ph.size != room)
			FAIL("markpad: at head %llu a record of type %u size %u, want a PAD of %llu",
			     (unsigned long long)head, ph.type, ph.size, (unsigned long long)room);
		if (!(x[n - 1].flags & FLIGHTREC_SAMPLE_CRASH) || (pid_t)x[n - 1].tid != p ||
		    x[n - 1].seq != head + room || x[n - 1].seq + x[n - 1].size != r.end ||
		    x[n - 2].seq + x[n - 2].size != head || (x[n - 2].flags & FLIGHTREC_SAMPLE_CRASH))
			FAIL("markpad: last record flags %#x tid %u at %llu (+%u), end %llu; the one before ends at %llu; want the crash record of %d at %llu",
			     x[n - 1].flags, x[n - 1].tid, (unsigned long long)x[n - 1].seq,
			     x[n - 1].size, (unsigned long long)r.end,
			     (unsigned long long)(x[n - 2].seq + x[n - 2].size), p,
			     (unsigned long long)(head + room));
		free(raw);
		free(x);
	}
	if (ioctl(fd, FLIGHTREC_IOC_THAW, 0))
		FAIL("THAW: %s", strerror(errno));
	if (ioctl(fd, FLIGHTREC_IOC_RELEASE_MARKER, mk.slot))
		FAIL("RELEASE_MARKER: %s", strerror(errno));
	printf("crash at cpu 0 head %llu (%llu bytes to the chunk end, try %d): PAD, then the crash record at %llu; every CPU's copy of the wrapped, frozen rings decodes (%zu records)\n",
	       (unsigned long long)head, (unsigned long long)room, t + 1,
	       (unsigned long long)(head + room), total);
	return 0;
}
