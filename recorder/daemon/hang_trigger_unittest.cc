// Hang triggers' pure parts: what a trigger_add request may ask (a peer's
// input: every bad field is an error naming it), and which blocks are new
// hangs (one per process per hang).
#include "recorder/daemon/hang_trigger.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace flightrec::recorder {
namespace {

using nlohmann::json;

TEST(HangSpecTest, BadRequestsAreErrorsNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"blocked_ns", 0}}, "blocked_ns"},
      {{{"blocked_ns", -5}}, "blocked_ns"},
      {{{"blocked_ns", "5s"}}, "blocked_ns"},
      {{{"blocked_ns", 1.5e9}}, "blocked_ns"},
      {{{"blocked_ns", 18446744073709551615ull}}, "blocked_ns"},
      {{{"blocked_ns", 100'000'000'000'000}}, "1 day"},
      {{{"blocked_ns", nullptr}}, "blocked_ns"},
      {{{"blocked_ns", 2'000'000'000}, {"hung_task", true}}, "not both"},
      {{{"hung_task", false}}, "hung_task must be true"},
      {{{"hung_task", "yes"}}, "hung_task must be true"},
      {{{"hung_task", true}, {"state", "S"}, {"pid", 1}}, "only tasks blocked in D"},
      {{{"blocked_ns", 2'000'000'000}, {"state", "R"}}, "state must be"},
      {{{"blocked_ns", 2'000'000'000}, {"state", 1}}, "state must be"},
      {{{"blocked_ns", 2'000'000'000}, {"state", "S"}}, "needs pid, exe or cgroup"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", 0}}, "pid must be"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", 4294967296ll}}, "pid must be"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", "1"}}, "pid must be"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", 1}, {"exe", "/bin/sh"}}, "at most one"},
      {{{"blocked_ns", 2'000'000'000}, {"exe", "sh"}}, "absolute path"},
      {{{"blocked_ns", 2'000'000'000}, {"exe", std::string("/bin\0sh", 7)}}, "without NUL"},
      {{{"blocked_ns", 2'000'000'000}, {"exe", "/" + std::string(5000, 'a')}}, "exe must be 1 to"},
      {{{"blocked_ns", 2'000'000'000}, {"cgroup", ""}}, "cgroup must be 1 to"},
      {{{"blocked_ns", 2'000'000'000}, {"cgroup", json::array()}}, "cgroup must be a string"},
  };
  for (const auto& [req, says] : cases) {
    auto s = ParseHangSpec(req);
    ASSERT_FALSE(s.ok()) << req.dump();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << req.dump();
    EXPECT_NE(s.status().message().find(says), std::string::npos)
        << req.dump() << ": " << s.status().message();
  }
  auto ok = ParseHangSpec({{"blocked_ns", 2'000'000'000}, {"state", "SD"}, {"pid", 42}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->states, "DS");
  EXPECT_EQ(ok->Describe(), "blocked 2.00 s in DS, pid 42");
  EXPECT_EQ(ParseHangSpec({{"blocked_ns", 5'000'000'000}})->states, "D");
}

TEST(HangTrackerTest, OneHangPerProcessHoweverLongAndHoweverManyThreads) {
  HangTracker t;
  auto match = [](uint32_t tid) -> std::optional<uint32_t> {
    if (tid == 99) return std::nullopt;  // not selected
    return tid / 10 * 10;                // threads 11, 12 are process 10's
  };
  // Thread 11 blocks: a hang of process 10.
  auto h = t.Update({{11, 100, 'S'}, {99, 50, 'S'}}, match, true);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].pid, 10u);
  EXPECT_EQ(h[0].tid, 11u);
  // Still blocked on the next checks, and its sibling joins: the same hang.
  EXPECT_TRUE(t.Update({{11, 100, 'S'}, {99, 50, 'S'}}, match, true).empty());
  EXPECT_TRUE(t.Update({{11, 100, 'S'}, {12, 150, 'S'}}, match, true).empty());
  // Both ran again, then 12 blocks anew: a new hang.
  EXPECT_TRUE(t.Update({}, match, true).empty());
  h = t.Update({{12, 900, 'D'}}, match, true);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].state, 'D');
  // A thread that blocks again (a new since) without the check seeing it
  // run is a new hang too.
  EXPECT_TRUE(t.Update({{12, 900, 'D'}}, match, true).empty());
  EXPECT_EQ(t.Update({{12, 1900, 'D'}}, match, true).size(), 1u);
}

TEST(HangTrackerTest, KernelReportsOfOneHangFireOnce) {
  HangTracker t;
  auto match = [](uint32_t tid) -> std::optional<uint32_t> { return tid; };
  // Reported at each check with the same context-switch count.
  EXPECT_EQ(t.Update({{7, 3, 'D'}}, match, false).size(), 1u);
  EXPECT_TRUE(t.Update({{7, 3, 'D'}}, match, false).empty());
  EXPECT_TRUE(t.Update({{8, 1, 'D'}, {8, 1, 'D'}}, match, false).size() == 1u);
  // It ran (its count moved) and hung again.
  EXPECT_EQ(t.Update({{7, 5, 'D'}}, match, false).size(), 1u);
}

TEST(HangSelectorTest, MatchesThisProcessByPidAndExe) {
  const auto self = static_cast<uint32_t>(getpid());
  HangSelector by_pid;
  by_pid.pid = self;
  EXPECT_EQ(by_pid.Match(static_cast<uint32_t>(gettid())), self);
  by_pid.pid = self + 1;
  EXPECT_FALSE(by_pid.Match(self));
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe));
  ASSERT_GT(n, 0);
  HangSelector by_exe;
  by_exe.exe = std::string(exe, n);
  EXPECT_EQ(by_exe.Match(self), self);
  by_exe.exe = "/bin/false";
  EXPECT_FALSE(by_exe.Match(self));
  HangSelector by_cgroup;
  by_cgroup.cgroup = "/";
  EXPECT_EQ(by_cgroup.Match(self), self);
}

}  // namespace
}  // namespace flightrec::recorder
