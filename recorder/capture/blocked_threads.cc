#include "recorder/capture/blocked_threads.h"

#include <algorithm>
#include <cstring>

#include "recorder/capture/off_cpu.h"

namespace flightrec::recorder {

BlockedThreads::Entry& BlockedThreads::At(uint32_t tid) {
  if (threads_.size() >= kMaxThreads && threads_.count(tid) == 0) threads_.clear();
  return threads_[tid];
}

void BlockedThreads::OnSwitch(uint64_t time_ns, uint32_t prev_tid, uint64_t prev_state,
                              uint32_t next_tid) {
  if (prev_tid != 0) {
    Entry& e = At(prev_tid);
    if (time_ns >= e.out_ns) {
      e.out_ns = time_ns;
      e.state = BlockedState(prev_state);
    }
  }
  if (next_tid != 0) {
    Entry& e = At(next_tid);
    e.in_ns = std::max(e.in_ns, time_ns);
  }
}

std::vector<BlockedThread> BlockedThreads::BlockedFor(uint64_t now_ns, int64_t min_ns,
                                                      const char* states) const {
  std::vector<BlockedThread> r;
  for (const auto& [tid, e] : threads_) {
    if (e.state == 0 || e.out_ns <= e.in_ns || std::strchr(states, e.state) == nullptr) continue;
    if (e.out_ns > now_ns || static_cast<int64_t>(now_ns - e.out_ns) < min_ns) continue;
    r.push_back({tid, e.out_ns, e.state});
  }
  std::sort(r.begin(), r.end(),
            [](const BlockedThread& a, const BlockedThread& b) { return a.tid < b.tid; });
  return r;
}

void BlockedThreads::Prune(uint64_t now_ns, uint64_t keep_ns) {
  if (pruned_ns_ != 0 && now_ns < pruned_ns_ + keep_ns) return;
  pruned_ns_ = now_ns;
  std::erase_if(threads_, [&](const auto& kv) {
    const Entry& e = kv.second;
    const bool blocked = e.state != 0 && e.out_ns > e.in_ns;
    return !blocked && std::max(e.out_ns, e.in_ns) + keep_ns < now_ns;
  });
}

}  // namespace flightrec::recorder
