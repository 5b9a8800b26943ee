// The uapi header is an ABI: module/fr_uapi_layout.h asserts every struct's
// size and field offsets and the ioctl numbers, failing the build when one
// moves. The module (x86-64 kernel view) and the 32-bit test task (what a
// compat task passes through compat_ptr_ioctl) compile the same asserts; this
// test compiles them as C++20 on the host, which also proves the header is
// valid C++.
#include <cstddef>

#include "module/uapi/flightrec.h"
#include "module/fr_uapi_layout.h"

int main() { return 0; }
