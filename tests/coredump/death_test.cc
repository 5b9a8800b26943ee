// Deaths without a core (recorder/daemon/death_watch.h): real processes,
// real signals, the real core hook. recorderd watches deaths system-wide,
// so other processes' deaths may land in these stores too: every check is
// on the test's own pids, or on counts that only grow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/coredump/coredump_fixture.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// utime + stime of pid, in seconds (/proc/PID/stat fields 14 and 15).
double CpuSeconds(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(stat.c_str() + paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &utime, &stime) != 2) {
    return -1;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Polls `ok` every 50 ms until it holds or `limit` passes.
template <typename Fn>
bool WaitFor(Fn ok, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return ok();
}

nlohmann::json Deaths(const Daemon& d) {
  auto r = d.Cli({"status", "--json"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() && j.contains("deaths") ? j["deaths"] : nlohmann::json::object();
}

// The records of pid as `crash list` shows them.
nlohmann::json RecordsOf(const Daemon& d, pid_t pid) {
  auto r = d.Cli({"crash", "list", "--pid", std::to_string(pid), "--json"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_array() ? j : nlohmann::json::array();
}

// Forks `argv` with RLIMIT_CORE 0 in `cwd` and waits for it to die.
pid_t RunWithoutCoreLimit(const std::vector<std::string>& argv, const std::string& cwd, int* sig) {
  pid_t pid = fork();
  if (pid == 0) {
    rlimit none{0, 0};
    setrlimit(RLIMIT_CORE, &none);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  int st = WaitStatus(pid);
  *sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  return pid;
}

class DeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<Daemon>(
        dir_.path(), std::vector<std::string>{"--deaths", "on", "--max-dumps-per-hour", "10000",
                                              "--max-dumps-per-uid-per-hour", "10000"});
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
  }
  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

// On main, a program killed with `kill -9` after 2 s of work left no record
// of any kind. Its name and argv are hostile: ESC/OSC bytes, an option.
TEST_F(DeathTest, AKill9LeavesADeathRecordWithItsHistorySenderAndMetadata) {
  const std::string prog = dir_.path() + "/\x1b]0;pwn\x07--help";
  fs::copy_file(BuildPath("tests/programs/fr_spin"), prog);
  Launch l(prog, {prog, "60", "\x1b[31m--store=/tmp"});
  pid_t pid = Start(l);
  ASSERT_GT(pid, 0);
  // Two seconds of its own CPU time, bounded by 60 s of wall time.
  EXPECT_TRUE(WaitFor([&] { return CpuSeconds(pid) >= 2.0; }, 60s));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(WTERMSIG(WaitStatus(pid)), SIGKILL);

  nlohmann::json rows;
  ASSERT_TRUE(WaitFor([&] { return !(rows = RecordsOf(*daemon_, pid)).empty(); }, 30s))
      << "no record of the kill -9\n"
      << daemon_->Log();
  ASSERT_EQ(rows.size(), 1u) << rows.dump(2);
  const auto& c = rows[0];
  EXPECT_EQ(c["kind"], "death");
  EXPECT_EQ(c["signal"], SIGKILL);
  EXPECT_EQ(c["signal_name"], "SIGKILL");
  EXPECT_EQ(c["core_stored"], false);
  EXPECT_EQ(c["core_dumped"], false);
  EXPECT_EQ(c["uid"], 0);
  EXPECT_EQ(c["sender"]["known"], true) << c.dump(2);
  EXPECT_EQ(c["sender"]["kind"], "process");
  EXPECT_EQ(c["sender"]["pid"], getpid());
  EXPECT_EQ(c["sender"]["uid"], 0);
  EXPECT_EQ(c["sender"]["si_code"], SI_USER);
  // The exact bytes of the path (not UTF-8-clean: ESC and BEL are valid
  // UTF-8, so they are in `exe` itself).
  EXPECT_EQ(c["exe"], fs::canonical(prog).string());

  auto info = CrashInfo(daemon_->store(), c["id"]);
  ASSERT_TRUE(info.is_object());
  EXPECT_EQ(info["kind"], "death");
  EXPECT_NE(info["metadata"]["cmdline"].get<std::string>().find("\x1b[31m--store=/tmp"),
            std::string::npos)
      << info["metadata"].dump(2);
  EXPECT_EQ(info["metadata"]["build_id"].get<std::string>().size(), 40u) << info["metadata"];
  EXPECT_NE(info["metadata"]["cgroup"].get<std::string>(), "");
  // Its history: the 2 s it spun, in spin_a and spin_b.
  ASSERT_TRUE(info["history"].is_object()) << info.dump(2);
  EXPECT_GT(info["history"]["samples"].get<uint64_t>(), 20u);
  bool spun = false;
  for (const auto& t : info["history"]["top"]) spun |= t.value("function", "") == "spin_a";
  EXPECT_TRUE(spun) << info["history"].dump(2);

  // Nothing the process chose reaches the terminal raw.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"crash", "list"}, {"crash", "info", c["id"]}, {"list"}}) {
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << args[1] << ":\n" << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << args[1] << ":\n" << r.out;
  }
  auto text = daemon_->Cli({"crash", "info", c["id"]});
  EXPECT_NE(text.out.find("Sender:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Backtrace: none"), std::string::npos) << text.out;
}

// With cores off (a file core_pattern and RLIMIT_CORE 0: fs/coredump.c
// skips a file dump below binfmt->min_coredump) a SIGSEGV dumps nothing:
// a death record, its sender the kernel (a fault, si_code SEGV_MAPERR) in
// the dying thread itself.
// A death record says where the process ran, as a crash record does:
// `crash list` shows its unit instead of the bare pid.
TEST_F(DeathTest, ADeathRecordNamesTheUnitTheProcessRanIn) {
  const std::string root = fs::exists("/sys/fs/cgroup/systemd/cgroup.procs")
                               ? "/sys/fs/cgroup/systemd"
                               : "/sys/fs/cgroup";
  const std::string unit = "fr-death-test-" + std::to_string(getpid()) + ".service";
  const std::string cg = root + "/" + unit;
  ASSERT_TRUE(fs::create_directory(cg)) << cg;
  // Moves itself, then execs: the watch reads the cgroup at the exec.
  pid_t pid = Spawn({"/bin/sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec sleep 60"});
  ASSERT_GT(pid, 0);
  // Asleep: its exec has returned, so the connector's exec event is queued.
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
        return stat.find("(sleep) S") != std::string::npos;
      },
      10s));
  // The watch reads a process at its exec event, in the connector's order:
  // once it has seen an exit that came after that event, it has read it.
  const auto exits = [&] { return Deaths(*daemon_)["watch"].value("exits_seen", uint64_t{0}); };
  const uint64_t before = exits();
  pid_t marker = 0;
  ASSERT_TRUE(RunToSuccess({"/bin/true"}, &marker));
  ASSERT_TRUE(WaitFor([&] { return exits() > before; }, 10s)) << Deaths(*daemon_).dump(2);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  WaitStatus(pid);
  rmdir(cg.c_str());
  nlohmann::json rows;
  ASSERT_TRUE(WaitFor([&] { return !(rows = RecordsOf(*daemon_, pid)).empty(); }, 30s))
      << daemon_->Log();
  EXPECT_EQ(rows[0]["kind"], "death");
  EXPECT_EQ(rows[0]["unit"], unit) << rows.dump(2);
  auto text = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid)});
  EXPECT_NE(text.out.find(unit), std::string::npos) << text.out;

  // crash list and list find it by its unit and cgroup, and not by another.
  const std::string id = rows[0]["id"];
  const auto ids = [&](std::vector<std::string> args) {
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> out;
    for (const auto& row : nlohmann::json::parse(r.out, nullptr, false)) out.push_back(row["id"]);
    return out;
  };
  using ::testing::Contains;
  using ::testing::Not;
  EXPECT_THAT(ids({"crash", "list", "--json", "--unit", unit}), Contains(id));
  EXPECT_THAT(ids({"crash", "list", "--json", "--cgroup", "/" + unit}), Contains(id));
  EXPECT_THAT(ids({"crash", "list", "--json", "--unit", "other-" + unit}), Not(Contains(id)));
  EXPECT_THAT(ids({"crash", "list", "--json", "--container", "0123456789ab"}), Not(Contains(id)));
  EXPECT_THAT(ids({"list", "--json", "--unit", unit}), Contains(id));
  EXPECT_THAT(ids({"list", "--json", "--unit", "other-" + unit}), Not(Contains(id)));
  const auto newest = ids({"crash", "list", "--json", "-1", "--unit", unit});
  EXPECT_EQ(newest, std::vector<std::string>{id});
}

TEST_F(DeathTest, ASegvWithCoresDisabledIsADeathSentByTheKernel) {
  PatternGuard pattern("core");
  int sig = 0;
  pid_t pid =
      RunWithoutCoreLimit({BuildPath("tests/programs/fr_crash"), "segv", "300"}, dir_.path(), &sig);
  ASSERT_EQ(sig, SIGSEGV);
  nlohmann::json rows;
  ASSERT_TRUE(WaitFor([&] { return !(rows = RecordsOf(*daemon_, pid)).empty(); }, 30s))
      << daemon_->Log();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["kind"], "death");
  EXPECT_EQ(rows[0]["signal"], SIGSEGV);
  EXPECT_EQ(rows[0]["core_dumped"], false);
  EXPECT_EQ(rows[0]["sender"]["kind"], "kernel") << rows[0].dump(2);
  EXPECT_EQ(rows[0]["sender"]["pid"], pid);
  EXPECT_GT(rows[0]["sender"]["si_code"].get<int>(), 0);
  EXPECT_FALSE(fs::exists(dir_.path() + "/core"));
}

// Under the hook's pipe pattern RLIMIT_CORE 0 does not stop the dump: the
// kernel sets a pipe's limit to RLIM_INFINITY (only 1 aborts it, the
// recursion guard; fs/coredump.c). So the crash is one `crash` record, with
// its core and history, and the death watch stores nothing more for it.
TEST_F(DeathTest, ACoreDumpingCrashStaysOneCrashRecord) {
  PatternGuard restore;
  auto r =
      daemon_->Cli({"coredump", "install", "--hook", BuildPath("coredump-hook/recorder-coredump")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const uint64_t before = Deaths(*daemon_).value("crash_record", uint64_t{0});
  std::vector<pid_t> crashed;
  for (bool rlimit_zero : {true, false}) {
    int sig = 0;
    pid_t pid = rlimit_zero
                    ? RunWithoutCoreLimit({BuildPath("tests/programs/fr_crash"), "segv", "300"},
                                          dir_.path(), &sig)
                    : CrashProgram(BuildPath("tests/programs/fr_crash"), "segv", 0, 300);
    ASSERT_GT(pid, 0);
    auto crash = WaitForCrashIn(*daemon_, pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    EXPECT_EQ(crash["kind"], "crash");
    EXPECT_EQ(crash["core_stored"], true) << "RLIMIT_CORE 0: " << rlimit_zero;
    EXPECT_NE(crash["history"], "");
    crashed.push_back(pid);
  }
  // The watch has seen both exits and matched each to its crash.
  EXPECT_TRUE(WaitFor(
      [&] { return Deaths(*daemon_).value("crash_record", uint64_t{0}) >= before + 2; }, 30s))
      << Deaths(*daemon_).dump(2);
  for (pid_t pid : crashed) EXPECT_EQ(RecordsOf(*daemon_, pid).size(), 1u) << pid;
  EXPECT_EQ(daemon_->Cli({"coredump", "uninstall"}).exit_code, 0);
}

// The netlink port of pid's NETLINK_CONNECTOR socket (0: none), matched by
// the socket's inode in /proc/net/netlink.
uint32_t ConnectorPortOf(pid_t pid) {
  std::set<std::string> inodes;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::istringstream in(ReadFile("/proc/net/netlink"));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sk, eth, port, groups, rmem, wmem, dump, locks, drops, inode;
    f >> sk >> eth >> port >> groups >> rmem >> wmem >> dump >> locks >> drops >> inode;
    if (eth == "11" && inodes.count(inode)) return static_cast<uint32_t>(std::stoul(port));
  }
  return 0;
}

// Sends `n` PROC_EVENT_EXIT "killed by SIGKILL" messages for `victim` to
// netlink port `port` as uid (0: as is): 0, or the errno of the refusal.
int ForgeExit(uint32_t port, pid_t victim, uid_t uid) {
  int st = RunInChild([&] {
    if (uid != 0 && (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)) return 100;
    int fd = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_CONNECTOR);
    if (fd < 0) return 101;
    alignas(nlmsghdr) char msg[NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_event))] = {};
    auto* nh = reinterpret_cast<nlmsghdr*>(msg);
    nh->nlmsg_len = sizeof(msg);
    nh->nlmsg_type = NLMSG_DONE;
    auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nh));
    cn->id.idx = CN_IDX_PROC;
    cn->id.val = CN_VAL_PROC;
    cn->len = sizeof(proc_event);
    proc_event ev{};
    ev.what = proc_event::PROC_EVENT_EXIT;
    ev.event_data.exit.process_pid = victim;
    ev.event_data.exit.process_tgid = victim;
    ev.event_data.exit.exit_code = SIGKILL;
    std::memcpy(cn->data, &ev, sizeof(ev));
    sockaddr_nl to{};
    to.nl_family = AF_NETLINK;
    to.nl_pid = port;
    for (int i = 0; i < 10; ++i) {
      if (sendto(fd, msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0)
        return errno;
    }
    return 0;
  });
  return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
}

// A forged PROC_EVENT_EXIT must not become a record of a live process. A
// user cannot even send one (netlink_sendmsg refuses a unicast without
// NL_CFG_F_NONROOT_SEND, which the connector does not set); a privileged
// sender's is dropped too: only the kernel, port 0, speaks for processes.
TEST_F(DeathTest, AForgedExitEventIsIgnored) {
  Sleeper victim;
  const uint32_t port = ConnectorPortOf(daemon_->pid());
  ASSERT_NE(port, 0u) << "recorderd has no connector socket";
  EXPECT_EQ(ForgeExit(port, victim.pid(), 65534), EPERM);
  ASSERT_EQ(ForgeExit(port, victim.pid(), 0), 0);
  // The forged events were read before a real death after them.
  int sig = 0;
  PatternGuard pattern("core");
  pid_t real =
      RunWithoutCoreLimit({BuildPath("tests/programs/fr_crash"), "segv", "50"}, dir_.path(), &sig);
  ASSERT_TRUE(WaitFor([&] { return !RecordsOf(*daemon_, real).empty(); }, 30s)) << daemon_->Log();
  EXPECT_TRUE(RecordsOf(*daemon_, victim.pid()).empty());
  EXPECT_EQ(kill(victim.pid(), 0), 0);
}

// 200 processes killed at once: every death is accounted, in a record or a
// counted drop (the per-uid dump budget), and recorderd's CPU stays small.
TEST(DeathStormTest, AKillStormOf200IsFullyAccounted) {
  TempDir dir;
  Daemon d(dir.path(),
           {"--deaths", "on", "--max-dumps-per-hour", "60", "--max-dumps-per-uid-per-hour", "30"});
  ASSERT_TRUE(d.ready()) << d.Log();
  const nlohmann::json before = Deaths(d);
  const double cpu_before = CpuSeconds(d.pid());
  std::set<pid_t> pids;
  for (int i = 0; i < 200; ++i) pids.insert(Spawn({"/bin/sleep", "600"}));
  ASSERT_EQ(pids.size(), 200u);
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) EXPECT_EQ(WTERMSIG(WaitStatus(p)), SIGKILL);

  auto grew = [&](const nlohmann::json& now, const char* key) {
    return now.value(key, uint64_t{0}) - before.value(key, uint64_t{0});
  };
  size_t ours = 0;
  nlohmann::json now;
  ASSERT_TRUE(WaitFor(
      [&] {
        now = Deaths(d);
        return grew(now, "seen") >= 200 &&
               grew(now, "recorded") + grew(now, "rate_limited") + grew(now, "failed") >= 200;
      },
      60s))
      << now.dump(2);
  auto list = d.Cli({"crash", "list", "--json"});
  for (const auto& row : nlohmann::json::parse(list.out, nullptr, false)) {
    if (row.value("kind", "") != "death" || !pids.count(row.value("pid", 0))) continue;
    ++ours;
    // Killed right after its exec, before /proc could be read: its uid is
    // still known (from its fork), so root's budget pays, not another.
    EXPECT_EQ(row.value("uid", -1), 0) << row.dump(2);
  }
  const double cpu = CpuSeconds(d.pid()) - cpu_before;
  std::printf(
      "kill storm: 200 killed; recorderd: %llu deaths seen, %llu recorded (%zu of ours), "
      "%llu rate limited, %llu failed; %.2f s of CPU\n",
      static_cast<unsigned long long>(grew(now, "seen")),
      static_cast<unsigned long long>(grew(now, "recorded")), ours,
      static_cast<unsigned long long>(grew(now, "rate_limited")),
      static_cast<unsigned long long>(grew(now, "failed")), cpu);
  // Each death is counted once, in one outcome.
  EXPECT_EQ(now["seen"].get<uint64_t>(),
            now["recorded"].get<uint64_t>() + now["crash_record"].get<uint64_t>() +
                now["rate_limited"].get<uint64_t>() + now["failed"].get<uint64_t>());
  EXPECT_EQ(now["watch"]["connector_overruns"], 0) << now.dump(2);
  // Root's budget (30 an hour) bounds the records; the rest are drops.
  EXPECT_GE(ours, 1u);
  EXPECT_LE(ours, 30u);
  EXPECT_GE(grew(now, "rate_limited"), 200 - ours);
}

}  // namespace
}  // namespace flightrec::testing
