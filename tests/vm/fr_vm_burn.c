/* Library for the attribution-sideband scenario: dlopen()ed, burned in, dlclose()d. */
#include <stdint.h>

__attribute__((noinline)) uint64_t fr_vm_burn(uint64_t iters)
{
	volatile uint64_t x = 1;

	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}
