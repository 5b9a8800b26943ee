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
    if (!Check(now_ns)) {
      Suppress();
      return false;
    }
    Record(now_ns);
    return true;
  }

  // Two-phase form, for an event that must pass several limiters: Check
  // each (records nothing), then Record in all, or Suppress in the one that
  // refused, so a refusal by one does not spend the others' budget.
  bool Check(int64_t now_ns) {
    while (!times_.empty() && now_ns - times_.front() >= window_ns_) times_.pop_front();
    return times_.size() < max_events_;
  }
  void Record(int64_t now_ns) {
    times_.push_back(now_ns);
    ++allowed_;
  }
  void Suppress() { ++suppressed_; }
  // Nothing in the window: the limiter can be forgotten.
  bool Idle(int64_t now_ns) {
    Check(now_ns);
    return times_.empty();
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
