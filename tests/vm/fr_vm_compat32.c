/*
 * A 32-bit (ia32, compat) task for the "compat" VM scenario: no libc, frame
 * pointers.  Two modes:
 *
 * - no argument: a call chain that spins until killed.  fr_vm_test checks
 *   that flightrec records its samples with PERF_SAMPLE_REGS_ABI_32 and walks
 *   its frame-pointer chain in 4-byte words: uframes[1] returns into
 *   fr32_mid and uframes[2] into fr32_main, both inside this file's text.
 * - "ioctl": INFO and STATS through the module's compat_ioctl
 *   (compat_ptr_ioctl(), which passes the 32-bit caller's struct unchanged),
 *   then exit 0 if the answers read right at the 32-bit offsets, else the
 *   number of the first check that failed.  The structs' 32-bit layout is
 *   asserted at compile time (fr_uapi_layout.h, this file is built -m32).
 */
#include <stddef.h>

#include "module/uapi/flightrec.h"
/* C11's keyword: a freestanding build has no <assert.h> to name it. */
#define static_assert _Static_assert
#include "module/fr_uapi_layout.h"

#define FR32_NR_EXIT	1	/* arch/x86/entry/syscalls/syscall_32.tbl */
#define FR32_NR_OPEN	5
#define FR32_NR_IOCTL	54
#define FR32_MAX_CPUS	64

static long fr32_syscall(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return ret;
}

/* Zero-initialised statics: no memset in a freestanding build. */
static struct flightrec_info fr32_info;
static struct flightrec_stats fr32_stats;
static struct flightrec_cpu_stats fr32_cpu[FR32_MAX_CPUS];

static int fr32_ioctl(void)
{
	long fd = fr32_syscall(FR32_NR_OPEN, (long)FLIGHTREC_DEVICE, 2 /* O_RDWR */, 0);
	unsigned int c;

	if (fd < 0)
		return 10;
	if (fr32_syscall(FR32_NR_IOCTL, fd, (long)FLIGHTREC_IOC_INFO, (long)&fr32_info))
		return 11;
	if (fr32_info.version != FLIGHTREC_VERSION || !fr32_info.nr_cpus ||
	    fr32_info.nr_cpus > FR32_MAX_CPUS)
		return 12;
	if (fr32_info.sample_size != sizeof(struct flightrec_sample) ||
	    fr32_info.sideband_size != sizeof(struct flightrec_sideband) ||
	    !fr32_info.data_ring_bytes || fr32_info.reserved[3])
		return 13;
	fr32_stats.buf = (unsigned long)fr32_cpu;
	fr32_stats.count = fr32_info.nr_cpus;
	if (fr32_syscall(FR32_NR_IOCTL, fd, (long)FLIGHTREC_IOC_STATS, (long)&fr32_stats))
		return 14;
	if (fr32_stats.count != fr32_info.nr_cpus)
		return 15;
	for (c = 0; c < fr32_info.nr_cpus; c++) {
		struct flightrec_cpu_stats *s = &fr32_cpu[c];

		if (s->cpu != c || s->produced != s->written + s->dropped_frozen + s->dropped_size)
			return 16;
	}
	return 0;
}

__attribute__((noinline)) static void fr32_leaf(volatile unsigned int *x)
{
	for (;;)
		(*x)++;
}

__attribute__((noinline)) static void fr32_mid(volatile unsigned int *x)
{
	fr32_leaf(x);
	(*x)--;	/* keeps the call a call, not a tail jump */
}

/* @sp: the process's initial stack: argc, then argv[]. */
__attribute__((used)) static void fr32_main(long *sp)
{
	volatile unsigned int v = 0;
	const char *arg = sp[0] > 1 ? (const char *)sp[2] : NULL;

	if (arg && arg[0] == 'i')
		fr32_syscall(FR32_NR_EXIT, fr32_ioctl(), 0, 0);
	fr32_mid(&v);
	for (;;)
		;
}

/* The entry: no return address on the stack, so pass it to a C function. */
__asm__(".globl _start\n"
	"_start:\n"
	"	xorl %ebp, %ebp\n"
	"	movl %esp, %eax\n"
	"	pushl %eax\n"
	"	call fr32_main\n");
