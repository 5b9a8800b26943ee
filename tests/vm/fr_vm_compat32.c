/*
 * A 32-bit (ia32, compat) task for the "compat" VM scenario: no libc, frame
 * pointers, a three-deep call chain that spins until killed.  fr_vm_test
 * checks that flightrec records its samples with PERF_SAMPLE_REGS_ABI_32 and
 * walks its frame-pointer chain in 4-byte words: uframes[1] returns into
 * fr32_mid and uframes[2] into _start, both inside this file's text.
 */
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

void _start(void)
{
	volatile unsigned int v = 0;

	fr32_mid(&v);
	for (;;)
		;
}
