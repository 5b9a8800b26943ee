// Who sees which crash, a crash storm, pid namespaces, install/uninstall and
// `crash debug`.
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "tests/coredump/coredump_fixture.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_F(CoredumpTest, UsersSeeAndReadOnlyTheirOwnCrashes) {
  // Two ordinary users (nobody and daemon, both in Debian's base passwd)
  // and root.
  constexpr uid_t kNobody = 65534, kDaemon = 1;
  TempDir tmp;
  chmod(tmp.path().c_str(), 0777);
  const std::string prog = tmp.path() + "/fr_crash", rec = tmp.path() + "/recorder";
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  fs::copy_file(BuildPath("recorder/cli/recorder"), rec);
  int sig = 0;
  pid_t root_pid = Crash("segv", &sig);
  auto root_crash = WaitForCrash(root_pid);
  ASSERT_FALSE(root_crash.is_null());
  std::map<uid_t, nlohmann::json> crash_of;
  for (uid_t uid : {kNobody, kDaemon}) {
    pid_t pid = CrashProgram(prog, "segv", uid, 300);
    ASSERT_GT(pid, 0) << "uid " << uid;
    crash_of[uid] = WaitForCrash(pid);
    ASSERT_FALSE(crash_of[uid].is_null()) << "uid " << uid;
    EXPECT_EQ(crash_of[uid]["uid"], uid);
  }
  const std::string store = daemon_->store();
  // A crash of nobody's process that was not dumpable (%d = 0: setuid and
  // the like): stored, but root's only.
  Sleeper sleeper(kNobody);
  const std::string input = tmp.path() + "/input";
  std::ofstream(input) << std::string(4096, 'x');
  FakeCrash nd;
  nd.pid = sleeper.pid();
  nd.uid = kNobody;
  nd.dumpable = 0;
  HookRun hr = RunHook(store, tmp.path() + "/no.sock", nd, input);
  sleeper.Stop();
  ASSERT_NE(hr.id(), "") << hr.err;
  auto all = daemon_->Cli({"crash", "list", "--json"});
  EXPECT_NE(all.out.find(hr.id()), std::string::npos) << "root sees the non-dumpable crash";
  for (const auto& [uid, mine] : crash_of) {
    SCOPED_TRACE("uid " + std::to_string(uid));
    const uid_t other_uid = uid == kNobody ? kDaemon : kNobody;
    const std::string other = crash_of[other_uid]["id"];
    auto list = RunAs(uid, {rec, "--store", store, "crash", "list", "--json"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    auto j = nlohmann::json::parse(list.out);
    ASSERT_EQ(j.size(), 1u) << list.out;
    EXPECT_EQ(j[0]["id"], mine["id"]);
    // Their own core and history: readable.
    const std::string core_out = fmt::format("{}/{}.core", tmp.path(), uid);
    auto core = RunAs(uid, {rec, "--store", store, "crash", "core", mine["id"], "-o", core_out});
    EXPECT_EQ(core.exit_code, 0) << core.err;
    EXPECT_EQ(fs::file_size(core_out), mine["core_size"].get<uint64_t>());
    auto info = RunAs(uid, {rec, "--store", store, "crash", "info", mine["id"], "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_FALSE(nlohmann::json::parse(info.out)["history"].is_null()) << info.out;
    // The other user's, root's and the non-dumpable one: neither readable
    // through the CLI nor as files, nor is the index.
    for (const std::string& id : {other, root_crash["id"].get<std::string>(), hr.id()}) {
      SCOPED_TRACE(id);
      const std::string stolen = tmp.path() + "/stolen.core";
      auto c = RunAs(uid, {rec, "--store", store, "crash", "core", id, "-o", stolen});
      EXPECT_NE(c.exit_code, 0);
      EXPECT_NE(c.err.find("no crash"), std::string::npos) << c.err;
      EXPECT_FALSE(fs::exists(stolen));
      auto i = RunAs(uid, {rec, "--store", store, "crash", "info", id});
      EXPECT_NE(i.exit_code, 0) << i.out;
      EXPECT_EQ(i.out.find("Backtrace"), std::string::npos) << i.out;
      for (const auto& e : fs::directory_iterator(store)) {
        if (e.path().filename().string().rfind(id, 0) != 0) continue;
        auto cat = RunAs(uid, {"/bin/cat", e.path().string()});
        EXPECT_NE(cat.exit_code, 0) << e.path() << " is readable by uid " << uid;
      }
    }
    auto sql = RunAs(uid, {rec, "--store", store, "sql", "SELECT * FROM crashes"});
    EXPECT_NE(sql.exit_code, 0) << sql.out;
  }
}

TEST_F(CoredumpTest, ACrashStormIsFullyAccountedFor) {
  constexpr int kCrashes = 32;
  std::vector<pid_t> pids;
  for (int i = 0; i < kCrashes; ++i) {
    pids.push_back(Start(Launch(BuildPath("tests/programs/fr_crash"), {"fr_crash", "segv", "0"})));
  }
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  size_t stored = 0, limited = 0;
  for (pid_t p : pids) {
    auto c = WaitForCrash(p);
    ASSERT_FALSE(c.is_null()) << "crash of " << p << " not accounted for";
    if (c["core_stored"].get<bool>()) ++stored;
    if (c["rate_limited"].get<bool>()) ++limited;
  }
  EXPECT_EQ(stored + limited, static_cast<size_t>(kCrashes));
  EXPECT_GT(limited, 0u) << "20 cores per executable per hour, then metadata only";
  auto v = daemon_->Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The ids of every crash in the store.
std::set<std::string> CrashIds(const Daemon& d) {
  std::set<std::string> ids;
  auto r = d.Cli({"crash", "list", "--json"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_array()) {
    for (const auto& c : j) ids.insert(c["id"].get<std::string>());
  }
  return ids;
}

TEST_F(CoredumpTest, ACrashInAPidNamespaceIsFollowedByItsGlobalThreadId) {
  // fr_crash threads as pid 2 of a new pid namespace (sh is 1): its
  // crashing thread is 3 there (%i) and something else outside (%I), which
  // is what samples carry.
  const std::set<std::string> before = CrashIds(*daemon_);
  const std::string exe = fs::canonical(BuildPath("tests/programs/fr_crash")).string();
  int st = WaitStatus(Start(Launch("/usr/bin/unshare", {"unshare", "--pid", "--fork", "/bin/sh",
                                                        "-c", "\"$0\" threads 600; exit 0", exe})));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  nlohmann::json crash;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (crash.is_null() && std::chrono::steady_clock::now() < deadline) {
    auto j = nlohmann::json::parse(daemon_->Cli({"crash", "list", "--json"}).out, nullptr, false);
    for (const auto& c : j) {
      if (!before.count(c["id"].get<std::string>()) && c["exe"] == exe) crash = c;
    }
    if (crash.is_null()) std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  const int ns_tid = crash["tid"], global_tid = crash["global_tid"];
  EXPECT_EQ(ns_tid, 3) << crash.dump();
  EXPECT_NE(global_tid, ns_tid);
  auto info = daemon_->Cli({"crash", "info", crash["id"], "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  // The metadata maps each thread's two ids.
  bool mapped = false;
  for (const auto& t : j["metadata"]["threads"]) {
    if (t["tid"] == global_tid) mapped = t["ns_tid"] == ns_tid;
  }
  EXPECT_TRUE(mapped) << j["metadata"]["threads"].dump();
  // Backtrace: the crashing thread first, named by its global tid.
  const auto& bt = j["backtrace"];
  ASSERT_EQ(bt["threads"].size(), 2u) << bt.dump();
  EXPECT_EQ(bt["crashing_tid"], global_tid);
  EXPECT_EQ(bt["threads"][0]["tid"], global_tid);
  EXPECT_EQ(bt["threads"][0]["ns_tid"], ns_tid);
  auto names = FrameNames(bt["threads"][0]);
  EXPECT_TRUE(Has(names, "crash_here") && Has(names, "thread_main")) << bt.dump();
  EXPECT_TRUE(Has(FrameNames(bt["threads"][1]), "main")) << bt.dump();
  // History: that thread's samples (found by its global tid).
  ASSERT_FALSE(j["history"].is_null()) << info.out;
  EXPECT_EQ(j["history"]["tid"], global_tid);
  EXPECT_GT(j["history"]["samples"].get<uint64_t>(), 20u) << j["history"].dump();
  EXPECT_EQ(j["history"]["top"][0]["function"], "spin_a") << j["history"].dump();
}

TEST_F(CoredumpTest, InstallPersistsAndUninstallRestoresExactlyThePreviousSettings) {
  const std::string dropin = "/etc/sysctl.d/50-flightrec-coredump.conf";
  ASSERT_FALSE(fs::exists(dropin)) << dropin << " exists before the test: whose is it?";
  const std::string hook = HookPath();
  // The fixture's install undone: exactly what the machine had.
  auto u = daemon_->Cli({"coredump", "uninstall"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_EQ(ReadFile(kPatternFile), guard_->pattern());
  EXPECT_EQ(ReadFile(kPipeLimitFile), guard_->limit());
  {
    // From settings of our own, put back on the way out whatever happens.
    PatternGuard mine("core.fr-test.%p", "3");
    auto i = daemon_->Cli({"coredump", "install", "--persist", "--hook", hook});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    const std::string pattern = "|" + hook + " -- %P %i %I %s %t %c %u %g %d %e %F";
    EXPECT_EQ(ReadFile(kPatternFile), pattern + "\n");
    EXPECT_EQ(ReadFile(kPipeLimitFile), "64\n");
    EXPECT_EQ(ReadFile(dropin),
              "# written by `recorder coredump install --persist`\nkernel.core_pattern=" + pattern +
                  "\nkernel.core_pipe_limit=64\n");
    // sysctl itself reads it back to the same settings.
    auto p = RunCommand({"/usr/sbin/sysctl", "-p", dropin});
    EXPECT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(ReadFile(kPatternFile), pattern + "\n");
    // A second install keeps the settings saved by the first.
    ASSERT_EQ(daemon_->Cli({"coredump", "install", "--hook", hook}).exit_code, 0);
    u = daemon_->Cli({"coredump", "uninstall"});
    ASSERT_EQ(u.exit_code, 0) << u.err;
    EXPECT_EQ(ReadFile(kPatternFile), "core.fr-test.%p\n");
    EXPECT_EQ(ReadFile(kPipeLimitFile), "3\n");
    EXPECT_FALSE(fs::exists(dropin));
    EXPECT_FALSE(fs::exists("/etc/flightrec/coredump.json"));
    // Nothing saved any more: a second uninstall says so and changes nothing.
    u = daemon_->Cli({"coredump", "uninstall"});
    EXPECT_NE(u.exit_code, 0);
    EXPECT_NE(u.err.find("no saved core_pattern"), std::string::npos) << u.err;
    EXPECT_EQ(ReadFile(kPatternFile), "core.fr-test.%p\n");
  }
  EXPECT_EQ(ReadFile(kPatternFile), guard_->pattern());
  std::error_code ec;
  fs::remove(dropin, ec);
  // Back to the fixture's state for the other tests.
  auto r = daemon_->Cli({"coredump", "install", "--hook", hook});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CoredumpTest, CrashDebugRunsGdbOnTheCoreInAPrivateDirectoryAndRemovesIt) {
  int sig = 0;
  pid_t pid = Crash("segv", &sig, 0);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null());
  TempDir tmp;
  const std::string rec = BuildPath("recorder/cli/recorder");
  auto r = RunCommand(
      {rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A",
       "-batch -nx -ex 'info threads' -ex bt -ex 'shell stat -c \"mode %a %n\" \"$TMPDIR\"/*/'"},
      {"TMPDIR=" + tmp.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // gdb loaded this core: its backtrace names the crashing function and main.
  EXPECT_NE(r.out.find("crash_here"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("main"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("core extracted to " + tmp.path() + "/flightrec-debug-"), std::string::npos)
      << r.err;
  // While gdb ran, the core was in a directory of its own, 0700.
  EXPECT_NE(r.out.find("mode 700 " + tmp.path() + "/flightrec-debug-"), std::string::npos) << r.out;
  // The private directory and the core are gone.
  EXPECT_TRUE(fs::is_empty(tmp.path())) << fs::directory_iterator(tmp.path())->path();
  // gdb failing is reported, and still cleans up.
  auto bad = RunCommand({rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A",
                         "-batch -nx -ex 'this-is-not-a-gdb-command' --no-such-gdb-option"},
                        {"TMPDIR=" + tmp.path()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("gdb exited with status"), std::string::npos) << bad.err;
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  auto quote = RunCommand(
      {rec, "--store", daemon_->store(), "crash", "debug", crash["id"], "-A", "-ex 'bt"});
  EXPECT_NE(quote.exit_code, 0);
  EXPECT_NE(quote.err.find("unterminated quote"), std::string::npos) << quote.err;
  // `crash core -o` writes a fresh private file (O_EXCL, 0600: a core is
  // the process's memory) renamed into place, nothing left beside it.
  const std::string out = tmp.path() + "/c.core";
  auto c = RunCommand({rec, "--store", daemon_->store(), "crash", "core", crash["id"], "-o", out});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(fs::file_size(out), crash["core_size"].get<uint64_t>());
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace flightrec::testing
