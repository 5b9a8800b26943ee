// The vDSO: code the kernel maps into every process ("[vdso]" in
// /proc/PID/maps), which no file on disk holds, so samples in it (the fast
// clock_gettime, gettimeofday, getcpu) cannot be named from a file. Every
// process of one kernel and ABI maps the same image, so a record stores the
// writer's own image (section `vdso`, docs/FORMAT.md) and the symbolizer
// names [vdso] frames from it, live and on replay alike.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace flightrec::recorder::attribution {

// The largest image accepted (the x86-64 vDSO is 8 KiB; arm64's 4-8 KiB).
inline constexpr size_t kMaxVdsoBytes = 1u << 20;

// This process's [vdso] mapping, byte for byte; NotFound where the kernel
// maps none.
StatusOr<std::string> ReadOwnVdso();

// The image's GNU build-id in lowercase hex, "" if it has none or is not ELF.
std::string VdsoBuildId(const std::string& image);

}  // namespace flightrec::recorder::attribution
