#include "recorder/capture/snapshot.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "recorder/capture/capture_backend.h"

namespace flightrec::recorder {

void Snapshot::SetWindow(uint64_t end_ns, int64_t last_ns) {
  freeze_time_ns = end_ns;
  window_start_ns = last_ns > 0 && static_cast<uint64_t>(last_ns) < end_ns
                        ? end_ns - static_cast<uint64_t>(last_ns)
                        : 0;
}

void Snapshot::SortSamples() {
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  oldest_sample_ns = samples.empty() ? 0 : samples.front().time_ns;
}

void SortByTimeIfNeeded(std::vector<Sample>& samples) {
  auto earlier = [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; };
  if (!std::is_sorted(samples.begin(), samples.end(), earlier)) {
    std::stable_sort(samples.begin(), samples.end(), earlier);
  }
}

void Snapshot::MergeSampleRuns(std::vector<std::vector<Sample>> runs) {
  size_t total = 0;
  for (auto& run : runs) {
    // A ring's records are in the order the kernel reserved their space
    // (__perf_output_begin in kernel/events/ring_buffer.c advances
    // rb->head), which for one CPU's sampling event is the order of their
    // times; anything else (a writer nested between another's time and its
    // reservation, a backend whose rings differ) is sorted here rather than
    // trusted.
    SortByTimeIfNeeded(run);
    total += run.size();
  }
  samples.clear();
  samples.reserve(total);
  // The next sample of each non-empty run, as (time, run): a min-heap whose
  // top is the earliest time, the lower run on a tie.
  using Head = std::pair<uint64_t, size_t>;
  std::vector<Head> heap;
  std::vector<size_t> next(runs.size(), 0);
  for (size_t r = 0; r < runs.size(); ++r) {
    if (!runs[r].empty()) heap.emplace_back(runs[r][0].time_ns, r);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const size_t r = heap.back().second;
    heap.pop_back();
    std::vector<Sample>& run = runs[r];
    // Take the run's samples while they are not later than the others' next
    // one (all of them, once one run is left): ties stay with the lower run.
    const bool alone = heap.empty();
    const uint64_t limit = alone ? UINT64_MAX : heap.front().first;
    const size_t limit_run = alone ? 0 : heap.front().second;
    size_t i = next[r];
    do {
      samples.push_back(std::move(run[i]));
      ++i;
    } while (i < run.size() &&
             (run[i].time_ns < limit || (run[i].time_ns == limit && r < limit_run)));
    next[r] = i;
    if (i < run.size()) {
      heap.emplace_back(run[i].time_ns, r);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    } else {
      run = {};  // its buffers go now, not all at the end
    }
  }
  oldest_sample_ns = samples.empty() ? 0 : samples.front().time_ns;
}

StatusOr<Snapshot> TakeCrashHistory(CaptureBackend& backend, uint32_t pid, int64_t last_ns,
                                    int64_t wait_ns, std::string* fallback_reason) {
  auto snap = backend.TakeCrashSnapshot(pid, last_ns, wait_ns);
  if (snap.ok()) return snap;
  auto live = backend.TakeSnapshot(last_ns);
  if (live.ok() && snap.status().code() != StatusCode::kUnsupported) {
    live->source["crash_marker"] = snap.status().message();
    *fallback_reason = snap.status().message();
  }
  return live;
}

}  // namespace flightrec::recorder
