// Hang triggers with a real recorderd (--off-cpu) and real blocked threads:
// fr_dhang blocks a thread in D (a pipe's mutex held across a
// userfaultfd fault) for as long as it is told, fr_abba deadlocks two
// threads in S (futex waits). A `--blocked 2s` trigger must dump once per
// hang, while the thread is still blocked (the record holds its off-CPU
// interval, ongoing), never for blocks shorter than 2 s, and a request of
// the wrong shape must be refused saying which field is wrong.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "recorder/ipc/ipc.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::Daemon;
using namespace std::chrono_literals;

nlohmann::json Json(const testing::RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// The trigger `id` as `trigger list --json` shows it (null if absent).
nlohmann::json TriggerState(const Daemon& d, uint64_t id) {
  auto list = Json(d.Cli({"trigger", "list", "--json"}));
  for (const auto& t : list) {
    if (t.value("id", uint64_t{0}) == id) return t;
  }
  return nullptr;
}

uint64_t AddTrigger(const Daemon& d, std::vector<std::string> args) {
  args.insert(args.begin(), {"trigger", "add", "--json"});
  auto j = Json(d.Cli(args));
  return j.is_object() ? j.value("id", uint64_t{0}) : 0;
}

// Words after `key` on each line of `text` that starts with it.
std::vector<std::vector<std::string>> Lines(const std::string& text, const std::string& key) {
  std::vector<std::vector<std::string>> r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string w;
    if (!(words >> w) || w != key) continue;
    r.emplace_back();
    while (words >> w) r.back().push_back(w);
  }
  return r;
}

// The off-CPU intervals of `tid` in record `id` (script --off-cpu --json).
std::vector<nlohmann::json> OffCpuOf(const Daemon& d, const std::string& id, uint32_t tid) {
  auto r = d.Cli({"script", "--off-cpu", "--json", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("off_cpu") && j.value("tid", 0u) == tid) out.push_back(j);
  }
  return out;
}

// Kills and reaps a spawned process when the test ends, however it ends.
struct KillAtEnd {
  pid_t pid;
  ~KillAtEnd() {
    if (pid > 0 && kill(pid, SIGKILL) == 0) testing::WaitStatus(pid);
  }
};

// Nothing more happens to the trigger for `quiet` (bounded; a fire would
// end the wait early and fail).
bool StaysAt(const Daemon& d, uint64_t id, uint64_t fired, std::chrono::milliseconds quiet) {
  return !testing::WaitFor([&] { return TriggerState(d, id).value("fired", uint64_t{0}) != fired; },
                           quiet, 200ms);
}

TEST(BlockedTriggerTest, FiresOncePerHangInDWhileTheThreadIsStillBlocked) {
  testing::TempDir dir;
  Daemon d(dir.path(), {"--backend", "perf", "--off-cpu"});
  ASSERT_TRUE(d.ready()) << d.Log();
  const std::string prog = BuildPath("tests/programs/fr_dhang");
  const uint64_t id = AddTrigger(d, {"--blocked", "2s", "--exe", prog});
  ASSERT_NE(id, 0u) << d.Log();
  auto listed = TriggerState(d, id);
  EXPECT_EQ(listed.value("kind", ""), "blocked") << listed;
  EXPECT_EQ(listed.value("blocked_ns", int64_t{0}), 2'000'000'000) << listed;
  EXPECT_EQ(listed.value("state", ""), "D") << listed;
  EXPECT_EQ(listed.value("exe", ""), prog) << listed;

  // Two hangs of 3 s: two dumps, each while the victim is still blocked.
  const std::string out = dir.path() + "/long.out";
  pid_t pid = testing::Spawn({"/bin/sh", "-c", "exec " + prog + " 2 3000 > " + out});
  ASSERT_TRUE(
      testing::WaitFor([&] { return Lines(testing::ReadFile(out), "done").size() == 1; }, 30s))
      << testing::ReadFile(out);
  EXPECT_EQ(testing::WaitStatus(pid), 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return TriggerState(d, id).value("dumps", uint64_t{0}) >= 2; }, 10s))
      << TriggerState(d, id) << d.Log();
  auto t = TriggerState(d, id);
  EXPECT_EQ(t.value("fired", uint64_t{0}), 2u) << t;
  EXPECT_EQ(t.value("dumps", uint64_t{0}), 2u) << t;

  // Each record holds its hang's victim blocked in D, still blocked at the
  // dump, for at least the trigger's 2 s.
  const auto hangs = Lines(testing::ReadFile(out), "hang");
  ASSERT_EQ(hangs.size(), 2u);
  ASSERT_EQ(t["records"].size(), 2u) << t;
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("hang " + hangs[i][0]);
    const std::string rec = t["records"][i].get<std::string>();
    const auto tid = static_cast<uint32_t>(std::stoul(hangs[i][1]));
    auto info = Json(d.Cli({"info", "--json", rec}));
    EXPECT_NE(info.dump().find("blocked in D"), std::string::npos) << info.dump(1);
    auto ivs = OffCpuOf(d, rec, tid);
    ASSERT_FALSE(ivs.empty()) << "no off-CPU interval of the victim " << tid;
    const auto& last = ivs.back()["off_cpu"];
    EXPECT_EQ(last.value("state", ""), "D") << last;
    EXPECT_TRUE(last.value("ongoing", false)) << last;
    EXPECT_GE(last.value("ns", 0.0), 2e9) << last;
    EXPECT_LT(last.value("ns", 0.0), 3e9) << last;
  }

  // Hangs of 1 s never reach 2 s: no dump.
  const std::string short_out = dir.path() + "/short.out";
  pid = testing::Spawn({"/bin/sh", "-c", "exec " + prog + " 3 1000 > " + short_out});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Lines(testing::ReadFile(short_out), "done").size() == 1; }, 30s));
  EXPECT_EQ(testing::WaitStatus(pid), 0);
  EXPECT_TRUE(StaysAt(d, id, 2, 1s)) << TriggerState(d, id);

  // Its owner removes it.
  auto rm = d.Cli({"trigger", "remove", std::to_string(id)});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_TRUE(TriggerState(d, id).is_null());
}

TEST(BlockedTriggerTest, AnAbbaDeadlockInSFiresOnceAndASleeperOfOneSecondNever) {
  testing::TempDir dir;
  Daemon d(dir.path(), {"--backend", "perf", "--off-cpu"});
  ASSERT_TRUE(d.ready()) << d.Log();
  // A shell sleeping 1 s at a time (its wait4 in S), watched from the start.
  pid_t sleeper = testing::Spawn({"/bin/sh", "-c", "while :; do sleep 1; done"});
  KillAtEnd sleeper_killer{sleeper};
  const uint64_t quiet =
      AddTrigger(d, {"--blocked", "2s", "--state", "S", "--pid", std::to_string(sleeper)});
  ASSERT_NE(quiet, 0u) << d.Log();

  const std::string out = dir.path() + "/abba.out";
  pid_t pid = testing::Spawn(
      {"/bin/sh", "-c", "exec " + BuildPath("tests/programs/fr_abba") + " > " + out});
  KillAtEnd abba_killer{pid};
  ASSERT_TRUE(
      testing::WaitFor([&] { return Lines(testing::ReadFile(out), "blocked").size() == 2; }, 20s));
  const uint64_t id =
      AddTrigger(d, {"--blocked", "2s", "--state", "S", "--pid", std::to_string(pid)});
  ASSERT_NE(id, 0u) << d.Log();
  ASSERT_TRUE(
      testing::WaitFor([&] { return TriggerState(d, id).value("dumps", uint64_t{0}) >= 1; }, 15s))
      << TriggerState(d, id) << d.Log();
  // The deadlock goes on: still one dump (three threads blocked, one hang).
  EXPECT_TRUE(StaysAt(d, id, 1, 3s)) << TriggerState(d, id);
  auto t = TriggerState(d, id);
  const std::string rec = t["records"][0].get<std::string>();
  for (const auto& b : Lines(testing::ReadFile(out), "blocked")) {
    const auto tid = static_cast<uint32_t>(std::stoul(b[0]));
    auto ivs = OffCpuOf(d, rec, tid);
    ASSERT_FALSE(ivs.empty()) << "no off-CPU interval of xfer thread " << tid;
    EXPECT_EQ(ivs.back()["off_cpu"].value("state", ""), "S");
    EXPECT_TRUE(ivs.back()["off_cpu"].value("ongoing", false));
  }
  // Over three seconds of 1 s sleeps went by: never a dump.
  auto q = TriggerState(d, quiet);
  EXPECT_EQ(q.value("fired", uint64_t{1}), 0u) << q;
}

// Every field of a hang trigger request is a peer's input: each bad one is
// refused with invalid_argument naming it, and the daemon goes on serving.
TEST(BlockedTriggerTest, BadHangTriggerRequestsAreRefusedSayingWhy) {
  testing::TempDir dir;
  Daemon d(dir.path(), {"--backend", "perf", "--off-cpu"});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  using nlohmann::json;
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"blocked_ns", -1}}, "blocked_ns"},
      {{{"blocked_ns", "5s"}}, "blocked_ns"},
      {{{"blocked_ns", 1e30}}, "blocked_ns"},
      {{{"blocked_ns", 9223372036854775807ll}}, "1 day"},
      {{{"blocked_ns", 2'000'000'000}, {"uprobe", "/bin/sh:main"}}, "exactly one"},
      {{{"blocked_ns", 2'000'000'000}, {"hung_task", true}}, "not both"},
      {{{"blocked_ns", 2'000'000'000}, {"state", "X"}}, "state must be"},
      {{{"blocked_ns", 2'000'000'000}, {"state", "S"}}, "needs pid, exe or cgroup"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", -3}}, "pid must be"},
      {{{"blocked_ns", 2'000'000'000}, {"exe", "relative"}}, "absolute path"},
      {{{"blocked_ns", 2'000'000'000}, {"pid", 1}, {"cgroup", "/"}}, "at most one"},
      {{{"blocked_ns", 2'000'000'000}, {"last_ns", 0}}, "last_ns"},
      {{{"blocked_ns", 2'000'000'000}, {"last_ns", "5s"}}, "last_ns"},
      {{{"blocked_ns", 2'000'000'000}, {"max_per_hour", -1}}, "max_per_hour"},
      {json::object(), "exactly one"},
  };
  for (const auto& [params, says] : cases) {
    auto r = (*c)->Call("trigger_add", params, 10s);
    ASSERT_FALSE(r.ok()) << params.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << params.dump();
    EXPECT_NE(r.status().message().find(says), std::string::npos)
        << params.dump() << ": " << r.status().message();
  }
  auto list = (*c)->Call("trigger_list", json::object(), 10s);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty()) << list->dump();
  // The command line says which option is wrong before asking.
  auto cli = d.Cli({"trigger", "add", "--blocked", "soon"});
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.err.find("--blocked"), std::string::npos) << cli.err;
  cli = d.Cli({"trigger", "add", "--blocked", "2s", "--uprobe", "/bin/sh:main"});
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.err.find("one of --uprobe, --blocked, --hung-task"), std::string::npos) << cli.err;
}

TEST(BlockedTriggerTest, WithoutOffCpuABlockedTriggerIsRefusedSayingWhatItNeeds) {
  testing::TempDir dir;
  Daemon d(dir.path(), {"--backend", "perf"});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto r = d.Cli({"trigger", "add", "--blocked", "2s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs recorderd --off-cpu"), std::string::npos) << r.err;
}

// A kernel setting this test changes, put back when it ends.
class SysctlAtEnd {
 public:
  explicit SysctlAtEnd(std::string path) : path_(std::move(path)), old_(testing::ReadFile(path_)) {}
  ~SysctlAtEnd() { Set(old_); }
  bool Set(const std::string& v) const {
    FILE* f = std::fopen(path_.c_str(), "w");
    if (f == nullptr) return false;
    const bool ok = std::fputs(v.c_str(), f) >= 0;
    return std::fclose(f) == 0 && ok;
  }

 private:
  std::string path_, old_;
};

// The kernel's own hung-task detector (kernel/hung_task.c): with
// hung_task_timeout_secs at 1 it reports fr_dhang's victim (D, not
// killable) at every check while it stays hung; the trigger dumps once. The
// timeout and the warning budget the reports use are put back after (a
// D-state task of the machine blocked over 1 s meanwhile gets a dmesg line).
TEST(BlockedTriggerTest, TheKernelsHungTaskReportDumpsOncePerHang) {
  const std::string kSys = "/proc/sys/kernel/";
  // A hung task would panic the machine: never lower the timeout then.
  ASSERT_EQ(std::stoi(testing::ReadFile(kSys + "hung_task_panic")), 0);
  SysctlAtEnd timeout(kSys + "hung_task_timeout_secs");
  SysctlAtEnd warnings(kSys + "hung_task_warnings");
  testing::TempDir dir;
  Daemon d(dir.path(), {"--backend", "perf"});
  ASSERT_TRUE(d.ready()) << d.Log();
  const std::string prog = BuildPath("tests/programs/fr_dhang");
  ASSERT_TRUE(timeout.Set("0"));
  auto off = d.Cli({"trigger", "add", "--hung-task"});
  EXPECT_NE(off.exit_code, 0);
  EXPECT_NE(off.err.find("hung_task_timeout_secs is 0"), std::string::npos) << off.err;

  ASSERT_TRUE(timeout.Set("1"));
  const uint64_t id = AddTrigger(d, {"--hung-task", "--exe", prog});
  ASSERT_NE(id, 0u) << d.Log();
  EXPECT_EQ(TriggerState(d, id).value("kind", ""), "hung_task");
  const std::string out = dir.path() + "/hang.out";
  pid_t pid = testing::Spawn({"/bin/sh", "-c", "exec " + prog + " 1 4000 > " + out});
  ASSERT_TRUE(
      testing::WaitFor([&] { return Lines(testing::ReadFile(out), "done").size() == 1; }, 30s));
  EXPECT_EQ(testing::WaitStatus(pid), 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return TriggerState(d, id).value("dumps", uint64_t{0}) >= 1; }, 10s))
      << TriggerState(d, id) << d.Log();
  EXPECT_TRUE(StaysAt(d, id, 1, 1s)) << TriggerState(d, id);
  auto t = TriggerState(d, id);
  auto info = Json(d.Cli({"info", "--json", t["records"][0].get<std::string>()}));
  const auto hang = Lines(testing::ReadFile(out), "hang");
  ASSERT_EQ(hang.size(), 1u);
  EXPECT_NE(info.dump().find("hung task pid " + std::to_string(pid) + " tid " + hang[0][1]),
            std::string::npos)
      << info.dump(1);
}

}  // namespace
}  // namespace flightrec
