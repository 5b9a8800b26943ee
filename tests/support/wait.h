// Bounded waits on a condition, for tests that watch something happen
// elsewhere (a daemon's log, a shipper's counters): never a fixed sleep.
#pragma once

#include <chrono>
#include <functional>

namespace flightrec::testing {

// Polls `cond` until it holds (true) or `timeout` passes (false). The pause
// of `poll` between checks only paces the polling.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(100));

}  // namespace flightrec::testing
