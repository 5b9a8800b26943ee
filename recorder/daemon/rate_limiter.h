// RateLimiter: "at most N firings per sliding hour" for triggers and crash
// storms. Every trigger is rate-limited so that a function called in a tight
// loop, or a crash loop, cannot fill the store or keep the rings frozen.
//
// Thread: used on the daemon's io thread only; not synchronised.
#pragma once

#include <cstdint>
#include <deque>

namespace flightrec::recorder {

class RateLimiter {
 public:
  // max_events per window_ns; max_events == 0 means "never allow".
  RateLimiter(uint32_t max_events, int64_t window_ns)
      : max_events_(max_events), window_ns_(window_ns) {}

  // Returns true and records the event if it is allowed at now_ns; otherwise
  // counts it as suppressed.
  bool Allow(int64_t now_ns) {
    while (!times_.empty() && now_ns - times_.front() >= window_ns_) times_.pop_front();
    if (times_.size() >= max_events_) {
      ++suppressed_;
      return false;
    }
    times_.push_back(now_ns);
    ++allowed_;
    return true;
  }

  uint64_t allowed() const { return allowed_; }
  uint64_t suppressed() const { return suppressed_; }
  uint32_t max_events() const { return max_events_; }

 private:
  uint32_t max_events_;
  int64_t window_ns_;
  std::deque<int64_t> times_;
  uint64_t allowed_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace flightrec::recorder
