// MemGrowth: where a process's memory went, kept always and cheaply so that
// an OOM kill's record can name the stacks that grew the victim.
//
// * Sampled growth: the `page-faults` software event on every CPU, one
//   sample per kFaultsPerSample faults (sample_period; the kernel counts
//   every fault but writes one record in 64), with the user call chain
//   (frame pointers), into an overwrite ring of its own (write_backward,
//   as the CPU samples' rings) read only when an OOM kill is recorded. A
//   first touch of an anonymous or file page is a fault, so faults track
//   RSS growth page by page (a transparent huge page is one fault for 2 MiB:
//   undercounted; docs/FORMAT.md says so).
// * RSS over time: every kRssIntervalNs the RSS of each process
//   (/proc/PID/statm, at most kMaxRssProcesses), a point kept only when it
//   moved, at most kMaxRssPoints per process (the newest).
//
// Thread: the daemon's io thread calls every method.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "recorder/model/events.h"
#include "recorder/perf/ring_buffer.h"

namespace flightrec::recorder {

inline constexpr uint64_t kFaultsPerSample = 64;
inline constexpr size_t kMemGrowthRingPages = 64;  // 256 KiB per CPU: ~1 500 samples
inline constexpr int64_t kRssIntervalNs = 250'000'000;
inline constexpr size_t kMaxRssProcesses = 4096;
inline constexpr size_t kMaxRssPoints = 128;

struct RssPoint {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint64_t rss_bytes = 0;
};

class MemGrowth {
 public:
  static StatusOr<std::unique_ptr<MemGrowth>> Create();
  // The growth samples of process `pid` (any thread) in [start_ns, end_ns],
  // in time order: the rings are paused while they are copied.
  std::vector<Sample> Take(uint32_t pid, uint64_t start_ns, uint64_t end_ns);
  // Reads every process's RSS when kRssIntervalNs have passed since the last.
  void SampleRss(uint64_t now_ns);
  std::vector<RssPoint> Rss(uint32_t pid, uint64_t start_ns, uint64_t end_ns) const;
  nlohmann::json Status() const;

 private:
  struct Cpu {
    int cpu = -1;
    ScopedFd fd;
    std::optional<perf::PerfRingBuffer> ring;
  };
  MemGrowth() = default;
  std::vector<Cpu> cpus_;
  std::map<uint32_t, std::deque<RssPoint>> rss_;
  uint64_t last_rss_ns_ = 0;
  uint64_t rss_scans_ = 0, rss_scan_ns_ = 0, malformed_ = 0;
};

}  // namespace flightrec::recorder
