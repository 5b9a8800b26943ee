#include "coredump-hook/core_compression.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/units.h"
#include "coredump-hook/context.h"

namespace flightrec::coredump {

CpuSight ReadCpuSight() {
  CpuSight s;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) s.cpus = std::max(1, CPU_COUNT(&set));
  // "some avg10=12.34 avg60=... total=..." (Linux >= 4.20 with PSI on).
  std::string psi = ReadText("/proc/pressure/cpu", 4096);
  if (auto at = psi.find("some avg10="); at != std::string::npos) {
    double v = 0;
    if (std::sscanf(psi.c_str() + at + 11, "%lf", &v) == 1 && v >= 0 && v <= 100) s.pressure = v;
  }
  return s;
}

CompressionChoice FirstChoice(const CpuSight& s, const CoreCompressionOptions& o) {
  CompressionChoice c;
  // At least one worker even on one CPU: zstd accepts a new level in the
  // middle of a frame only when it runs workers (ZSTD_isUpdateAuthorized).
  c.workers = std::clamp(s.cpus, 1, std::max(1, o.max_workers));
  c.level = o.level;
  if (!o.adapt) {
    c.workers = std::max(1, o.max_workers);
    return c;
  }
  // Pressure is the share of time some runnable task waited for a CPU over
  // the last 10 s: past a quarter the hook's workers will queue too, past
  // 60% they get a fraction of a CPU each.
  int down = s.pressure >= 60 ? 2 : s.pressure >= 25 ? 1 : 0;
  c.level = std::max(std::min(o.min_level, o.level), o.level - down);
  return c;
}

int NextLevel(int level, uint64_t run_ns, uint64_t wait_ns, const CoreCompressionOptions& o) {
  const int lo = std::min(o.min_level, o.level);
  if (run_ns + wait_ns == 0) return level;  // blocked on input all window: no signal
  if (wait_ns > run_ns) return std::max(lo, level - 1);
  if (wait_ns * 5 < run_ns) return std::min(o.level, level + 1);
  return level;
}

bool ReadOwnSchedstat(uint64_t* run_ns, uint64_t* wait_ns) {
  *run_ns = *wait_ns = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    // "<ns on cpu> <ns waiting on a run queue> <timeslices>" (sched_info).
    std::string t = ReadText(fmt::format("/proc/self/task/{}/schedstat", e->d_name), 256);
    unsigned long long run = 0, wait = 0;
    if (std::sscanf(t.c_str(), "%llu %llu", &run, &wait) == 2) {
      *run_ns += run;
      *wait_ns += wait;
      any = true;
    }
  }
  closedir(d);
  return any;
}

CompressionGovernor::CompressionGovernor(const CoreCompressionOptions& o, const CpuSight& s)
    : o_(o), choice_(FirstChoice(s, o)) {
  history_ = fmt::format("zstd level {}, {} worker{}", choice_.level, choice_.workers,
                         choice_.workers == 1 ? "" : "s");
  if (o_.adapt && s.pressure >= 0) history_ += fmt::format(" (CPU pressure {:.0f}%)", s.pressure);
  if (o_.adapt) measuring_ = ReadOwnSchedstat(&run0_, &wait0_);
}

bool CompressionGovernor::Observe(uint64_t bytes) {
  seen_ += bytes;
  if (!measuring_ || seen_ - window_start_ < kWindowBytes) return false;
  uint64_t run = 0, wait = 0;
  if (!ReadOwnSchedstat(&run, &wait)) {
    measuring_ = false;
    return false;
  }
  // Threads that exited (none while zstd's pool lives) would make a
  // counter go backwards: then this window says nothing.
  uint64_t dr = run >= run0_ ? run - run0_ : 0, dw = wait >= wait0_ ? wait - wait0_ : 0;
  run0_ = run;
  wait0_ = wait;
  window_start_ = seen_;
  int next = NextLevel(choice_.level, dr, dw, o_);
  if (next == choice_.level) return false;
  history_ += fmt::format("; {} -> {} at {}", choice_.level, next, FormatBytes(seen_));
  choice_.level = next;
  return true;
}

}  // namespace flightrec::coredump
