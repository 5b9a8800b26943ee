// recorderd + recorder end to end on this machine: real perf events, a real
// daemon process, its control socket, the store, and report.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "common/units.h"
#include "recorder/ipc/ipc.h"
#include "recorder/record/dump_record.h"
#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/recording.h"
#include "tests/support/records.h"
#include "tests/support/run.h"
#include "tests/support/unix_socket.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::ConnectUnix;
using testing::Daemon;
using testing::RunCommand;
using testing::Spawn;
using namespace std::chrono_literals;

constexpr int kHz = 999;

uint64_t CpuNs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  uint64_t ns = 0;
  in >> ns;
  return ns;
}

TEST(RecorderE2ETest, SpinWorkloadDumpHasTheWindowTheSplitAndTheRate) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t spin = Spawn({BuildPath("tests/programs/fr_spin"), "8"});
  // Track the workload's CPU time so the expected sample count in the window
  // is measured, not assumed.
  std::vector<std::pair<int64_t, uint64_t>> cpu;  // (monotonic ns, cpu ns)
  int64_t t0 = MonotonicNs();
  while (MonotonicNs() - t0 < 7'000'000'000) {
    cpu.emplace_back(MonotonicNs(), CpuNs(spin));
    std::this_thread::sleep_for(20ms);  // the sampling interval of this probe, not synchronisation
  }
  cpu.emplace_back(MonotonicNs(), CpuNs(spin));
  auto r = d.Cli({"dump", "--last", "5s", "--pid", std::to_string(spin), "--json"});
  cpu.emplace_back(MonotonicNs(), CpuNs(spin));
  ASSERT_EQ(r.exit_code, 0) << r.err << d.Log();
  auto j = nlohmann::json::parse(r.out);
  std::string id = j["id"];
  int st;
  waitpid(spin, &st, 0);

  auto s = store::Store::Open(d.store(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  auto reader = (*s)->OpenRecord(id);
  ASSERT_TRUE(reader.ok());
  auto dump = recorder::LoadDump(**reader);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  uint64_t freeze = dump->config["freeze_time_mono_ns"];
  uint64_t period = dump->config["backend"]["period"];
  uint64_t start = freeze - 5'000'000'000ull;
  size_t samples = 0;
  for (const auto& e : dump->events) {
    auto* smp = std::get_if<recorder::Sample>(&e);
    if (!smp) continue;
    ++samples;
    EXPECT_EQ(smp->pid, static_cast<uint32_t>(spin));
    EXPECT_GE(smp->time_ns + period, start) << "sample before the window";
    EXPECT_LE(smp->time_ns, freeze);
  }
  // CPU time of the workload inside [start, freeze], interpolated from the probe.
  auto cpu_at = [&](uint64_t t) -> double {
    for (size_t i = 1; i < cpu.size(); ++i) {
      if (static_cast<uint64_t>(cpu[i].first) >= t) {
        double f = double(t - cpu[i - 1].first) / double(cpu[i].first - cpu[i - 1].first);
        return cpu[i - 1].second + f * (double(cpu[i].second) - cpu[i - 1].second);
      }
    }
    return double(cpu.back().second);
  };
  double window_cpu_ns = cpu_at(freeze) - cpu_at(start);
  double expected = window_cpu_ns / double(period);
  EXPECT_NEAR(double(samples), expected, expected * 0.10)
      << "samples " << samples << " vs rate x CPU time " << expected;

  auto rep = d.Cli({"report", id, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rj = nlohmann::json::parse(rep.out);
  ASSERT_GE(rj["rows"].size(), 2u);
  EXPECT_EQ(rj["rows"][0]["key"], "spin_a");
  EXPECT_EQ(rj["rows"][1]["key"], "spin_b");
  EXPECT_NEAR(rj["rows"][0]["self_pct"].get<double>(), 70.0, 10.0);
  EXPECT_NEAR(rj["rows"][1]["self_pct"].get<double>(), 30.0, 10.0);
  auto text = d.Cli({"report", id});
  EXPECT_NE(text.out.find("spin_a"), std::string::npos);

  // script: one JSON line per stored sample, each with its stack.
  auto script = d.Cli({"script", id, "--json"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  size_t lines = 0, leaf_spin = 0;
  std::istringstream in(script.out);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ++lines;
    EXPECT_EQ(j["pid"], spin);
    ASSERT_FALSE(j["frames"].empty());
    std::string leaf = j["frames"][0]["function"];
    leaf_spin += leaf == "spin_a" || leaf == "spin_b";
  }
  EXPECT_EQ(lines, samples);
  EXPECT_GT(leaf_spin, lines * 8 / 10);

  // folded stacks: "comm;outer;...;leaf count", counts summing to the samples.
  std::string folded_path = dir.path() + "/out.folded";
  auto ex = d.Cli({"export", id, "--format", "folded", "-o", folded_path});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::ifstream fin(folded_path);
  uint64_t total = 0, spin_a = 0;
  while (std::getline(fin, line)) {
    size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    uint64_t n = std::stoull(line.substr(sp + 1));
    total += n;
    EXPECT_EQ(line.rfind("fr_spin;", 0), 0u) << line;
    if (line.substr(0, sp).size() >= 7 && line.substr(sp - 7, 7) == ";spin_a") spin_a += n;
  }
  EXPECT_EQ(total, samples);
  EXPECT_NEAR(100.0 * spin_a / total, 70.0, 10.0);
  auto bad = d.Cli({"export", id, "--format", "svg-someday", "-o", dir.path() + "/x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown export format 'svg-someday'"), std::string::npos) << bad.err;
}

// Exact loss accounting through a stored record: a tiny ring, a discrete event
// sampled on every occurrence (so the kernel's count is the exact number of
// samples produced) and fixed-size records (no call chains, so overwritten
// samples are measured from the ring's byte positions, not inferred).
TEST(RecorderE2ETest, RecordLossCountersAddUpExactlyWithATinyRing) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(), {"--event", "page-faults", "--period", "1", "--call-graph", "none",
                        "--ring-pages", "2"});
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t p = Spawn({BuildPath("tests/programs/fr_faults"), "2000", "5"});
  int st;
  waitpid(p, &st, 0);
  auto r = d.Cli({"dump", "--last", "60s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = nlohmann::json::parse(r.out)["id"];
  auto s = store::Store::Open(d.store(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  auto reader = (*s)->OpenRecord(id);
  ASSERT_TRUE(reader.ok());
  auto dump = recorder::LoadDump(**reader);
  ASSERT_TRUE(dump.ok());
  const auto& loss = dump->loss;
  uint64_t over = 0;
  for (const auto& c : loss["per_cpu"]) {
    uint64_t produced = c["produced"];
    EXPECT_EQ(produced, c["count"].get<uint64_t>());
    // Every sample is in one cause, and what no cause explains is reported
    // as `unaccounted`, never hidden. On the 6.18 VMs a run's page-fault
    // count exceeds its samples + losses by 1-3 (of ~11 000) in about one run
    // in five, with no throttle record and with the throttle raised tenfold;
    // the binaries from before the security work do the same (2 of 12 runs).
    // Until the kernel path that counts without writing is found, the test
    // bounds that residue instead of requiring 0.
    const int64_t unaccounted = c["unaccounted"].get<int64_t>();
    EXPECT_EQ(
        static_cast<int64_t>(produced),
        static_cast<int64_t>(c["in_window"].get<uint64_t>() + c["outside_window"].get<uint64_t>() +
                             c["paused"].get<uint64_t>() + c["overwritten"].get<uint64_t>()) +
            unaccounted)
        << c.dump();
    EXPECT_GE(unaccounted, 0) << c.dump();
    EXPECT_LE(unaccounted, std::max<int64_t>(4, static_cast<int64_t>(produced / 1000))) << c.dump();
    over += c["overwritten"].get<uint64_t>();
  }
  EXPECT_GT(over, 1000u);
  // The stored samples are exactly the in-window ones the counters claim.
  size_t samples = 0;
  for (const auto& e : dump->events) samples += std::holds_alternative<recorder::Sample>(e);
  EXPECT_EQ(samples, loss["in_window"].get<uint64_t>());
  EXPECT_LE(loss["unaccounted"].get<int64_t>(), 4 * static_cast<int64_t>(loss["per_cpu"].size()));
}

TEST(RecorderE2ETest, DlopenedLibraryOfAnExitedProcessIsStillAttributed) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t p = 0;
  ASSERT_TRUE(testing::RunToSuccess(
      {BuildPath("tests/programs/fr_dlopen"), BuildPath("tests/programs/libfr_plugin.so"), "0.5"},
      &p));
  std::string id;
  ASSERT_NO_FATAL_FAILURE(testing::DumpLast5s(d, p, {}, &id));
  auto rep = d.Cli({"report", id, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rj = nlohmann::json::parse(rep.out);
  ASSERT_FALSE(rj["rows"].empty()) << rep.out;
  EXPECT_EQ(rj["rows"][0]["key"], "plugin_burn") << rep.out;
  EXPECT_NE(rj["rows"][0]["dso"].get<std::string>().find("libfr_plugin.so"), std::string::npos);
  // The rest is the loader and libc around dlopen; under load it grows.
  EXPECT_GT(rj["rows"][0]["self_pct"].get<double>(), 60.0);
}

TEST(RecorderE2ETest, ControlSocketSurvivesHostileClientsAndRefusesStrangers) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  // Open the socket file to everyone so that the refusal below comes from the
  // daemon's SO_PEERCRED check, not from file permissions.
  chmod(dir.path().c_str(), 0755);
  chmod(d.sock().c_str(), 0666);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
    if (!c.ok()) _exit(4);
    auto r = (*c)->Call("status", nlohmann::json::object(), 5s);
    _exit(!r.ok() && r.status().code() == StatusCode::kPermissionDenied ? 0 : 5);
  }
  int st;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "unprivileged status: exit " << WEXITSTATUS(st);

  // 10 000 malformed requests: random bytes, bad lengths, bad JSON, wrong shapes.
  std::mt19937 rng(99);
  const std::vector<std::string> shapes = {"{}",
                                           "[]",
                                           "null",
                                           "{\"method\":5}",
                                           "{\"method\":\"status\",\"params\":[]}",
                                           "{\"method\":\"nope\"}",
                                           "{\"method\":\"dump\",\"params\":{\"last_ns\":\"x\"}}",
                                           "{\"method\":\"dump\",\"params\":{\"last_ns\":-5}}",
                                           "\xff\xfe{",
                                           "{\"method\":\"trigger_add\",\"params\":{}}"};
  for (int i = 0; i < 10000; ++i) {
    int fd = ConnectUnix(d.sock());
    ASSERT_GE(fd, 0) << "daemon stopped accepting at request " << i;
    std::string msg;
    switch (i % 4) {
      case 0: {  // random bytes with a random length prefix
        msg.resize(4 + rng() % 64);
        for (auto& c : msg) c = static_cast<char>(rng());
        break;
      }
      case 1:  // huge claimed length
        msg = std::string("\x7f\xff\xff\xff", 4) + "{";
        break;
      case 2:  // well-framed but wrong shape
        msg = recorder::ipc::Frame(shapes[rng() % shapes.size()]);
        break;
      default:  // truncated frame, then hang up
        msg = recorder::ipc::Frame("{\"method\":\"status\"}").substr(0, 3 + rng() % 10);
    }
    (void)!send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    char buf[512];
    while (recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    close(fd);
  }
  // 100 slow clients: connect and send half a header, then hold on.
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    int fd = ConnectUnix(d.sock());
    ASSERT_GE(fd, 0);
    (void)!send(fd, "\0\0", 2, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  auto r = d.Cli({"status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << "status while 100 clients stall: " << r.err;
  // The daemon drops them at its idle timeout: each sees EOF.
  for (int fd : slow) {
    char b;
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    EXPECT_EQ(recv(fd, &b, 1, 0), 0) << "slow client not disconnected";
    close(fd);
  }
  r = d.Cli({"status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto sj = nlohmann::json::parse(r.out);
  EXPECT_GE(sj["socket"]["requests"].get<uint64_t>(), 2500u);
  EXPECT_EQ(sj["socket"]["rejected"].get<uint64_t>(), 1u);
  // Still recording: a dump works.
  r = d.Cli({"dump", "--last", "1s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(RecorderE2ETest, UprobeTriggerDumpsOncePerAllowedFiringAndRespectsItsLimit) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  // A uprobe fires in every process running the file (it is placed on the
  // inode): a private copy keeps other tests' fr_spin runs out of the count.
  const std::string spin = dir.path() + "/fr_spin";
  std::filesystem::copy_file(BuildPath("tests/programs/fr_spin"), spin);
  std::string spec = spin + ":spin_b";
  auto r =
      d.Cli({"trigger", "add", "--uprobe", spec, "--last", "1s", "--max-per-hour", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // spin_b runs exactly 60 times, however loaded the machine is.
  pid_t p = Spawn({spin, "60", "rounds"});
  int st;
  waitpid(p, &st, 0);
  // Wait (bounded) until the daemon has seen every firing.
  nlohmann::json t;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = d.Cli({"status", "--json"});
    ASSERT_EQ(s.exit_code, 0);
    t = nlohmann::json::parse(s.out)["triggers"][0];
    if (t["fired"].get<uint64_t>() >= 60 && t["dumps"].get<uint64_t>() == 2 &&
        t["fired"].get<uint64_t>() ==
            t["dumps"].get<uint64_t>() + t["suppressed"].get<uint64_t>()) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(t["dumps"].get<uint64_t>(), 2u) << t.dump();
  EXPECT_EQ(t["fired"].get<uint64_t>(), 60u) << t.dump();
  EXPECT_EQ(t["suppressed"].get<uint64_t>(), t["fired"].get<uint64_t>() - 2) << t.dump();
  auto list = d.Cli({"list", "--json"});
  auto lj = nlohmann::json::parse(list.out);
  size_t uprobe_records = 0;
  for (const auto& rec : lj) {
    if (rec["reason"].get<std::string>().find("uprobe") != std::string::npos) ++uprobe_records;
  }
  EXPECT_EQ(uprobe_records, 2u);
  // A bad spec is refused with a clear error.
  r = d.Cli({"trigger", "add", "--uprobe", spec + "_nope"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no function"), std::string::npos) << r.err;
}

// The coredump hook's `crash_pid` dump: anything but a process id is refused
// with a message; with the perf backend (no crash markers) the history comes
// from the live rings, as before, and the record says so.
TEST(RecorderE2ETest, CrashPidDumpsRefuseBadPidsAndUseTheLiveRingsWithPerf) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (const nlohmann::json& bad :
       {nlohmann::json("123"), nlohmann::json(0), nlohmann::json(-4), nlohmann::json(1.5),
        nlohmann::json(1ll << 40), nlohmann::json::array()}) {
    auto r = (*c)->Call("dump", {{"last_ns", 1'000'000'000}, {"crash_pid", bad}}, 10s);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad.dump();
    EXPECT_NE(r.status().message().find("crash_pid"), std::string::npos) << r.status().message();
  }
  auto r = (*c)->Call("dump", {{"last_ns", 1'000'000'000}, {"crash_pid", getpid()}}, 30s);
  ASSERT_TRUE(r.ok()) << r.status().message() << d.Log();
  auto s = store::Store::Open(d.store(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  auto reader = (*s)->OpenRecord((*r)["id"].get<std::string>());
  ASSERT_TRUE(reader.ok());
  auto dump = recorder::LoadDump(**reader);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  EXPECT_EQ(dump->config["history_source"], nlohmann::json({{"kind", "live_rings"}}))
      << dump->config.dump();
}

TEST(RecorderE2ETest, ClearErrorsWhenTheDaemonIsDownOrTheIdIsUnknown) {
  flightrec::testing::TempDir dir;
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--socket", dir.path() + "/none.sock",
                       "dump", "--last", "5s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("recorderd is not running"), std::string::npos) << r.err;
  r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", dir.path(), "report", "nope"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no record"), std::string::npos) << r.err;
  r = RunCommand({BuildPath("recorder/cli/recorder"), "dump", "--last", "soon"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(RecorderE2ETest, RecordModeWorksUnprivilegedAndDumpsWhenTheCommandCrashes) {
  flightrec::testing::TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string st = dir.path() + "/store";
  // Copies the user can reach whatever the checkout's parent directories allow.
  const std::string rec = dir.path() + "/recorder", crash = dir.path() + "/fr_crash";
  std::filesystem::copy_file(BuildPath("recorder/cli/recorder"), rec);
  std::filesystem::copy_file(BuildPath("tests/programs/fr_crash"), crash);
  chmod(rec.c_str(), 0755);
  chmod(crash.c_str(), 0755);
  pid_t child = fork();
  if (child == 0) {
    // perf_event_paranoid is 2 here: per-process, user-space sampling only.
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(rec.c_str(), "recorder", "--store", st.c_str(), "record", "--last", "2s", "--",
          crash.c_str(), "segv", "500", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "recorder record passes the command's failure on";
  auto list = RunCommand({BuildPath("recorder/cli/recorder"), "--store", st, "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto lj = nlohmann::json::parse(list.out);
  ASSERT_EQ(lj.size(), 1u) << list.out;
  EXPECT_NE(lj[0]["reason"].get<std::string>().find("killed by SIGSEGV"), std::string::npos);
  auto rep =
      RunCommand({BuildPath("recorder/cli/recorder"), "--store", st, "report", "-1", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rj = nlohmann::json::parse(rep.out);
  ASSERT_FALSE(rj["rows"].empty());
  EXPECT_EQ(rj["rows"][0]["key"], "spin_a");
}

TEST(RecorderE2ETest, SigusrTwoDumpsAndSigtermStopsCleanly) {
  flightrec::testing::TempDir dir;
  auto d = std::make_unique<Daemon>(dir.path());
  ASSERT_TRUE(d->ready());
  kill(d->pid(), SIGUSR2);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool listed = false;
  while (!listed && std::chrono::steady_clock::now() < deadline) {
    auto r = d->Cli({"list", "--json"});
    listed = r.exit_code == 0 && r.out.find("SIGUSR2") != std::string::npos;
    if (!listed) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(listed) << d->Log();
  std::string sock = d->sock();
  d.reset();  // SIGTERM and wait
  struct stat stb;
  EXPECT_NE(lstat(sock.c_str(), &stb), 0) << "socket file left behind after a clean stop";
}

}  // namespace
}  // namespace flightrec
