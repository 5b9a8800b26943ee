#include "recorder/daemon/uprobe_trigger.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>

#include "recorder/daemon/rate_limiter.h"

extern "C" __attribute__((noinline, used)) int FlightrecUprobeTarget(int x) {
  asm volatile("" ::: "memory");  // keep the call from being folded away
  return x + 1;
}

namespace flightrec::recorder {
namespace {

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

TEST(ElfSymbolTest, ResolvesAFunctionToAFileOffset) {
  auto t = ResolveUprobeTarget(SelfExe() + ":FlightrecUprobeTarget");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_GT(t->file_offset, 0u);
}

TEST(ElfSymbolTest, ClearErrorsForBadSpecs) {
  EXPECT_EQ(ResolveUprobeTarget("nocolon").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUprobeTarget("relative/bin:f").status().code(), StatusCode::kInvalidArgument);
  auto missing = ResolveUprobeTarget(SelfExe() + ":NoSuchFunctionAnywhere");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("NoSuchFunctionAnywhere"), std::string::npos);
  EXPECT_EQ(ResolveUprobeTarget("/etc/passwd:f").status().code(), StatusCode::kInvalidArgument);
}

// Waits (bounded) until any trigger fd is readable, then drains.
std::vector<UprobeHit> WaitForHits(UprobeTrigger& t, size_t want) {
  std::vector<UprobeHit> all;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (all.size() < want && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (int fd : t.fds()) pfds.push_back({fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 100);
    auto hits = t.Drain();
    all.insert(all.end(), hits.begin(), hits.end());
  }
  return all;
}

TEST(UprobeTriggerTest, EveryCallIsSeenWithPidAndTid) {
  auto t = UprobeTrigger::Create(SelfExe() + ":FlightrecUprobeTarget");
  ASSERT_TRUE(t.ok()) << t.status().message();
  int v = 0;
  for (int i = 0; i < 3; ++i) v = FlightrecUprobeTarget(v);
  EXPECT_EQ(v, 3);
  auto hits = WaitForHits(**t, 3);
  ASSERT_EQ(hits.size(), 3u);
  for (const auto& h : hits) {
    EXPECT_EQ(h.pid, static_cast<uint32_t>(getpid()));
    EXPECT_EQ(h.tid, static_cast<uint32_t>(gettid()));
    EXPECT_GT(h.time_ns, 0u);
  }
  // Nothing more arrives when the function is not called.
  EXPECT_TRUE((*t)->Drain().empty());
}

TEST(RateLimiterTest, AllowsNPerWindowThenRecovers) {
  RateLimiter rl(2, 1000);
  EXPECT_TRUE(rl.Allow(0));
  EXPECT_TRUE(rl.Allow(10));
  EXPECT_FALSE(rl.Allow(20));
  EXPECT_FALSE(rl.Allow(999));
  EXPECT_TRUE(rl.Allow(1000));  // the first firing has left the window
  EXPECT_EQ(rl.allowed(), 3u);
  EXPECT_EQ(rl.suppressed(), 2u);
  RateLimiter never(0, 1000);
  EXPECT_FALSE(never.Allow(0));
}

}  // namespace
}  // namespace flightrec::recorder
