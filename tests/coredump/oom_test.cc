// OOM kills (recorder/daemon/oom_watch.h, mem_growth.h): a real program
// leaking from one known function, leak_here, in a real 128 MiB memory
// cgroup the test makes (its limit read back before the leak starts, and
// RLIMIT_AS as a second cap), killed by the real OOM killer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "tests/coredump/coredump_fixture.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kLimit = 128ull << 20;

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

uint64_t ReadNumber(const std::string& path) {
  return std::strtoull(ReadFile(path).c_str(), nullptr, 10);
}

// A memory cgroup made for one test, removed (empty by then) at the end.
struct MemoryCgroup {
  std::string dir;
  std::string limit_file;
  ~MemoryCgroup() {
    if (!dir.empty()) rmdir(dir.c_str());
  }
};

// A cgroup2 mount whose controllers include memory ("" if none), or why not.
std::string V2MemoryRoot(std::string* why) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<std::string> v2;
  while (std::getline(in, line)) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream f(line);
    std::string id, parent, dev, root, mount;
    f >> id >> parent >> dev >> root >> mount;
    v2.push_back(mount);
    const std::string c = ReadFile(mount + "/cgroup.controllers");
    if ((" " + c).find(" memory") != std::string::npos) return mount;
  }
  *why = v2.empty() ? "no cgroup v2 hierarchy is mounted"
                    : "cgroup v2 is mounted at " + v2[0] +
                          " without the memory controller (it is bound to the v1 hierarchy)";
  return "";
}

class OomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<Daemon>(
        dir_.path(), std::vector<std::string>{"--deaths", "on", "--max-dumps-per-hour", "10000",
                                              "--max-dumps-per-uid-per-hour", "10000"});
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
  }

  // Runs fr_leak in `cg` (RLIMIT_AS 512 MiB as the second cap) until the
  // OOM killer stops it; its pid.
  pid_t LeakUntilKilled(const MemoryCgroup& cg) {
    const std::string leak = BuildPath("tests/programs/fr_leak");
    const std::string procs = cg.dir + "/cgroup.procs";
    pid_t pid = fork();
    if (pid == 0) {
      // Only async-signal-safe calls until the exec: another thread of the
      // test may have held the allocator's lock at the fork.
      rlimit as{512ull << 20, 512ull << 20};
      if (setrlimit(RLIMIT_AS, &as) != 0) _exit(124);
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(125);  // 0: the writer itself
      close(fd);
      // 2 MiB every 40 ms: ~2.5 s to the limit, inside the 5 s window.
      execl(leak.c_str(), leak.c_str(), "2", "40", nullptr);
      _exit(127);
    }
    // Bounded: a leak the OOM killer never stops is a failure, not a hang.
    int st = 0;
    const bool ended = WaitFor([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 60s);
    if (!ended) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      ADD_FAILURE() << "fr_leak was not OOM-killed within 60 s\n"
                    << ReadFile(cg.dir + "/memory.oom_control");
    }
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << "fr_leak was not OOM-killed: status " << st;
    return pid;
  }

  void CheckOomRecord(pid_t pid, const std::string& version, const std::string& cgroup_path) {
    nlohmann::json rows;
    ASSERT_TRUE(WaitFor(
        [&] {
          auto r = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid), "--json"});
          rows = nlohmann::json::parse(r.out, nullptr, false);
          return rows.is_array() && !rows.empty();
        },
        30s))
        << "no record of the OOM kill\n"
        << daemon_->Log();
    ASSERT_EQ(rows.size(), 1u) << "one death, one record: " << rows.dump(2);
    EXPECT_EQ(rows[0]["kind"], "oom");
    EXPECT_EQ(rows[0]["signal_name"], "SIGKILL");
    EXPECT_EQ(rows[0]["sender"]["kind"], "kernel");

    auto info = CrashInfo(daemon_->store(), rows[0]["id"]);
    ASSERT_TRUE(info.is_object());
    EXPECT_EQ(info["kind"], "oom");
    const auto& oom = info["oom"];
    ASSERT_TRUE(oom.is_object()) << info.dump(2);
    EXPECT_EQ(oom["victim_pid"], pid);
    EXPECT_EQ(oom["constraint"], "memcg") << oom.dump(2);
    EXPECT_GT(oom["anon_rss_kb"].get<uint64_t>(), 64u << 10) << oom.dump(2);
    EXPECT_LE(oom["anon_rss_kb"].get<uint64_t>(), kLimit / 1024);
    EXPECT_GT(oom["total_vm_kb"].get<uint64_t>(), oom["anon_rss_kb"].get<uint64_t>());
    EXPECT_EQ(oom["trigger"]["is_victim"], true);
    EXPECT_EQ(oom["memcg"]["version"], version);
    EXPECT_EQ(oom["memcg"]["path"], cgroup_path);
    EXPECT_EQ(oom["memcg"]["limit_bytes"], kLimit);
    EXPECT_GE(oom["memcg"]["events"].value("oom_kill", uint64_t{0}), 1u) << oom["memcg"].dump(2);

    // Where the memory went: leak_here, most of the sampled growth.
    const auto& g = oom["growth_stacks"];
    ASSERT_GT(g["samples"].get<uint64_t>(), 100u) << g.dump(2);
    ASSERT_FALSE(g["top"].empty());
    EXPECT_EQ(g["top"][0]["function"], "leak_here") << g.dump(2);
    EXPECT_GE(g["top"][0]["share_pct"].get<double>(), 50.0) << g.dump(2);

    // The RSS rose over the window, to the kernel's figure at the kill.
    const auto& rss = oom["rss"];
    ASSERT_GE(rss.size(), 4u) << rss.dump(2);
    const uint64_t first = rss[0]["rss_bytes"], last = rss[rss.size() - 1]["rss_bytes"];
    EXPECT_LT(first + (64ull << 20), last) << rss.dump(2);
    for (size_t i = 1; i + 1 < rss.size(); ++i) {
      EXPECT_GE(rss[i]["rss_bytes"].get<uint64_t>(), rss[i - 1]["rss_bytes"].get<uint64_t>())
          << rss.dump(2);
    }
    EXPECT_EQ(rss[rss.size() - 1]["source"], "oom:mark_victim");

    auto text = daemon_->Cli({"crash", "info", rows[0]["id"]});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("OOM kill: constraint memcg"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("leak_here"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("RSS over the window"), std::string::npos) << text.out;
    auto list = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid)});
    EXPECT_NE(list.out.find(" oom "), std::string::npos) << list.out;
    // The death watch counted it once, as recorded.
    auto st = nlohmann::json::parse(daemon_->Cli({"status", "--json"}).out, nullptr, false);
    EXPECT_GE(st["deaths"].value("oom_recorded", 0), 1) << st.dump(2);
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

// On main, an OOM-killed program left no record, and nothing said it
// happened. Cgroup v1, as these machines run.
TEST_F(OomTest, ALeakKilledByTheOomKillerInAV1MemcgNamesItsGrowerAndRisingRss) {
  ASSERT_TRUE(fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
      << "no cgroup v1 memory controller at /sys/fs/cgroup/memory";
  MemoryCgroup cg;
  const std::string name = "/fr-oom-test-" + std::to_string(getpid());
  cg.dir = "/sys/fs/cgroup/memory" + name;
  ASSERT_TRUE(fs::create_directory(cg.dir)) << cg.dir;
  ASSERT_TRUE(WriteText(cg.dir + "/memory.limit_in_bytes", std::to_string(kLimit)));
  // Read back: the leak starts only under a limit that applies.
  ASSERT_EQ(ReadNumber(cg.dir + "/memory.limit_in_bytes"), kLimit);
  if (fs::exists(cg.dir + "/memory.memsw.limit_in_bytes")) {
    ASSERT_TRUE(WriteText(cg.dir + "/memory.memsw.limit_in_bytes", std::to_string(kLimit)));
    ASSERT_EQ(ReadNumber(cg.dir + "/memory.memsw.limit_in_bytes"), kLimit);
  }
  ASSERT_NE(ReadFile(cg.dir + "/memory.oom_control").find("oom_kill_disable 0"), std::string::npos);
  const pid_t pid = LeakUntilKilled(cg);
  CheckOomRecord(pid, "v1", name);
}

// The same in cgroup v2 where a v2 hierarchy has the memory controller;
// where none has, the test says why (the v2 reader is covered by
// oom_watch_unittest's fixture files).
TEST_F(OomTest, ALeakKilledInAV2MemcgWhereV2HasTheMemoryController) {
  std::string why;
  const std::string root = V2MemoryRoot(&why);
  if (root.empty()) {
    std::printf("cgroup v2 OOM case not run on this machine: %s\n", why.c_str());
    RecordProperty("v2_not_run", why);
    return;
  }
  ASSERT_TRUE(WriteText(root + "/cgroup.subtree_control", "+memory"));
  MemoryCgroup cg;
  const std::string name = "/fr-oom-test-" + std::to_string(getpid());
  cg.dir = root + name;
  ASSERT_TRUE(fs::create_directory(cg.dir)) << cg.dir;
  ASSERT_TRUE(WriteText(cg.dir + "/memory.max", std::to_string(kLimit)));
  ASSERT_EQ(ReadNumber(cg.dir + "/memory.max"), kLimit);
  ASSERT_TRUE(WriteText(cg.dir + "/memory.swap.max", "0") ||
              !fs::exists(cg.dir + "/memory.swap.max"));
  const pid_t pid = LeakUntilKilled(cg);
  CheckOomRecord(pid, "v2", name);
}

}  // namespace
}  // namespace flightrec::testing
