#include "tests/support/wait.h"

#include <thread>

namespace flightrec::testing {

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace flightrec::testing
