#include "recorder/capture/snapshot.h"

#include <algorithm>

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
