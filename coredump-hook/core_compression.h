// How the hook compresses a core: zstd's worker count and level follow the
// CPU the hook can actually get. On an idle host the core is compressed at
// the configured level (3, the zstd CLI's) by as many workers as the hook may
// use CPUs (up to a memory-bound cap); on a busy one the same level would make
// the crashed process (pinned until the core is read) and its memory wait on
// other work, so the level steps down to what the CPU the hook gets can keep
// up with, and back up when that CPU comes back. The hook measures what it
// gets rather than guessing: before the first byte, the host's CPU pressure
// (/proc/pressure/cpu); then, every window of the core, how long its own
// threads waited on a run queue against how long they ran
// (/proc/self/task/*/schedstat).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace flightrec::coredump {

struct CoreCompressionOptions {
  int level = 3;        // the level on an idle host (the zstd CLI's default)
  int min_level = 1;    // the lowest the hook steps down to
  bool adapt = true;    // false: always `level` with `max_workers` workers
  int max_workers = 2;  // each worker keeps ~10 MiB of buffers: the hook stays under 64 MiB
};

// What the hook sees of the CPU before it reads the core.
struct CpuSight {
  int cpus = 1;          // CPUs the hook may run on (its affinity mask)
  double pressure = -1;  // /proc/pressure/cpu "some avg10" in percent; -1 if unknown
};
CpuSight ReadCpuSight();

struct CompressionChoice {
  int level = 3;
  int workers = 2;
  bool operator==(const CompressionChoice&) const = default;
};

// The choice before the first byte: workers from the CPUs the hook may use,
// level from the host's CPU pressure.
CompressionChoice FirstChoice(const CpuSight& s, const CoreCompressionOptions& o);

// The next level after a window in which the hook's threads ran for run_ns
// and waited runnable for wait_ns: down a step when they waited more than
// they ran, up a step when they waited less than a sixth of the time.
int NextLevel(int level, uint64_t run_ns, uint64_t wait_ns, const CoreCompressionOptions& o);

// Run and run-queue wait time of all the calling process's threads, from
// /proc/self/task/*/schedstat (false if unreadable).
bool ReadOwnSchedstat(uint64_t* run_ns, uint64_t* wait_ns);

// Feeds NextLevel as the core streams in.
class CompressionGovernor {
 public:
  CompressionGovernor(const CoreCompressionOptions& o, const CpuSight& s);
  const CompressionChoice& choice() const { return choice_; }
  // Called with each chunk's size; true when choice().level changed.
  bool Observe(uint64_t bytes);
  // "level 3, 2 workers; 3 -> 1 at 64 MiB" for the record's notes.
  const std::string& history() const { return history_; }

  // A window: enough of the core for a scheduler measurement to mean
  // something (tens of milliseconds of compression), small against a core.
  static constexpr uint64_t kWindowBytes = 16ull << 20;

 private:
  CoreCompressionOptions o_;
  CompressionChoice choice_;
  uint64_t seen_ = 0, window_start_ = 0;
  uint64_t run0_ = 0, wait0_ = 0;
  bool measuring_ = false;
  std::string history_;
};

}  // namespace flightrec::coredump
