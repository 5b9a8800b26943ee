// What /proc says about a process, for tests that watch one run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace flightrec::testing {

// The value of the line "Name:\tvalue" of /proc/PID/status, without the
// leading blanks ("" if absent).
std::string StatusField(pid_t pid, const std::string& name);

// utime + stime of a process (/proc/PID/stat fields 14 and 15), in clock
// ticks; 0 if it cannot be read.
uint64_t CpuTicks(pid_t pid);

}  // namespace flightrec::testing
