// The shared-library half of the attribution test program.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif
// Spins for about `iterations` rounds inside an inlined helper.
unsigned long lib_hot(unsigned long seed, int iterations);
#ifdef __cplusplus
}
#endif
