// The perf backend on this machine's real kernel: real perf_event_open, real
// overwrite rings, real sideband. Needs root (system-wide events): label root.
#include "recorder/perf/perf_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>

#include "common/units.h"
#include "recorder/perf/perf_event.h"
#include "tests/support/run.h"

namespace flightrec::recorder::perf {
namespace {

using flightrec::testing::BuildPath;

int WaitExit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(PerfBackendTest, FallsBackToCpuClockAndSaysSo) {
  PerfConfig cfg;
  cfg.frequency_hz = 499;
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto d = (*b)->Describe();
  // These machines have no hardware PMU; where one exists, cycles is used.
  if (d["event"] == "cpu-clock") {
    EXPECT_TRUE(d.contains("fallback"));
    EXPECT_NE(d["fallback"].get<std::string>().find("cycles"), std::string::npos);
    EXPECT_EQ((*b)->period(), 1'000'000'000u / 499);
  } else {
    EXPECT_EQ(d["event"], "cycles");
  }
  EXPECT_EQ(d["cpus"].get<size_t>(), OnlineCpus().size());
}

TEST(PerfBackendTest, SpinningChildIsSampledWithItsPidInsideTheWindow) {
  PerfConfig cfg;
  cfg.frequency_hz = 999;
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  uint64_t start = static_cast<uint64_t>(MonotonicNs());
  pid_t child = flightrec::testing::Spawn({BuildPath("tests/programs/fr_spin"), "1"});
  // The child's own CPU time sets the expected count: on a loaded machine it
  // gets less than the 1 s of wall time it runs for.
  int wst = 0;
  struct rusage ru {};
  ASSERT_EQ(wait4(child, &wst, 0, &ru), child);
  ASSERT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  double cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec / 1e6;
  auto snap = (*b)->TakeSnapshot(10'000'000'000);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  size_t mine = 0, user = 0;
  for (const auto& s : snap->samples) {
    EXPECT_GE(s.time_ns, start - 10'000'000'000ull);
    EXPECT_LE(s.time_ns, snap->freeze_time_ns);
    if (static_cast<pid_t>(s.pid) == child) {
      ++mine;
      if (s.mode == CpuMode::kUser) {
        ++user;
        EXPECT_FALSE(s.user_chain.empty());
        EXPECT_EQ(s.user_chain.front(), s.ip);
      } else if (s.mode == CpuMode::kKernel) {
        EXPECT_FALSE(s.kernel_chain.empty());
      }
    }
  }
  double expected = cpu_s * 999;
  EXPECT_GT(mine, expected * 0.7) << "cpu " << cpu_s << " s";
  EXPECT_LT(mine, expected * 1.3 + 10) << "cpu " << cpu_s << " s";
  EXPECT_GT(user, mine * 8 / 10) << "a spin loop runs almost entirely in user mode";
  for (size_t i = 1; i < snap->samples.size(); ++i) {
    EXPECT_LE(snap->samples[i - 1].time_ns, snap->samples[i].time_ns);
  }
}

TEST(PerfBackendTest, WrappedBackwardRingHoldsOnlyTheNewestIntactRecords) {
  PerfConfig cfg;
  cfg.frequency_hz = 4000;
  cfg.data_pages = 8;  // ~32 KiB: wraps within a fraction of a second
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  pid_t child = flightrec::testing::Spawn({BuildPath("tests/programs/fr_spin"), "1"});
  ASSERT_EQ(WaitExit(child), 0);
  auto snap = (*b)->TakeSnapshot(60'000'000'000);
  ASSERT_TRUE(snap.ok());
  bool wrapped = false;
  for (const auto& c : snap->per_cpu) {
    if (c["bytes_written"].get<uint64_t>() > 8 * 4096) wrapped = true;
    EXPECT_EQ(c["malformed"].get<uint64_t>(), 0u);
    EXPECT_LE(c["bytes_present"].get<uint64_t>(), 8u * 4096);
    // Nearly the whole ring is intact records (at most one partly overwritten).
    if (c["bytes_written"].get<uint64_t>() > 8 * 4096) {
      EXPECT_GT(c["bytes_present"].get<uint64_t>(), 8u * 4096 - 2048);
    }
  }
  EXPECT_TRUE(wrapped);
  std::set<uint32_t> cpus;
  for (const auto& s : snap->samples) {
    cpus.insert(s.cpu);
    EXPECT_LE(s.time_ns, snap->freeze_time_ns);
    EXPECT_NE(s.ip, 0u);
  }
  EXPECT_FALSE(snap->samples.empty());
}

TEST(PerfBackendTest, SidebandSeesForkExecAndTheDlopenedLibraryWithBuildId) {
  PerfConfig cfg;
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::string lib = BuildPath("tests/programs/libfr_plugin.so");
  pid_t child = flightrec::testing::Spawn({BuildPath("tests/programs/fr_dlopen"), lib, "0.05"});
  ASSERT_EQ(WaitExit(child), 0);
  bool fork_seen = false, exec_seen = false, lib_seen = false, exit_seen = false;
  std::string build_id;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(fork_seen && exec_seen && lib_seen && exit_seen) &&
         std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (int fd : (*b)->SidebandFds()) pfds.push_back({fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 50);
    ASSERT_TRUE((*b)->DrainSideband([&](const Event& e) {
                      if (auto* t = std::get_if<TaskEvent>(&e)) {
                        if (static_cast<pid_t>(t->pid) == child && !t->exit) fork_seen = true;
                        if (static_cast<pid_t>(t->pid) == child && t->exit) exit_seen = true;
                      } else if (auto* c = std::get_if<CommEvent>(&e)) {
                        if (static_cast<pid_t>(c->pid) == child && c->exec &&
                            c->comm == "fr_dlopen") {
                          exec_seen = true;
                        }
                      } else if (auto* m = std::get_if<MmapEvent>(&e)) {
                        if (static_cast<pid_t>(m->pid) == child &&
                            m->filename.find("libfr_plugin.so") != std::string::npos &&
                            (m->prot & PROT_EXEC)) {
                          lib_seen = true;
                          build_id = m->build_id;
                        }
                      }
                    })
                    .ok());
  }
  EXPECT_TRUE(fork_seen);
  EXPECT_TRUE(exec_seen);
  EXPECT_TRUE(lib_seen);
  EXPECT_TRUE(exit_seen);
  if ((*b)->Describe()["build_id_in_mmap2"].get<bool>()) {
    EXPECT_EQ(build_id.size(), 20u) << "MMAP2 should carry the library's GNU build-id";
  }
}

// Exact loss accounting (seed 003). A discrete event with period 1 makes the
// kernel's count the exact number of samples produced; fixed-size records (no
// callchain) make the bytes the kernel wrote an independent measure of how
// many of them were overwritten. The check is exact, not a remainder: two
// separate computations of "overwritten" must agree to the sample.
TEST(PerfBackendTest, LossCountersAddUpExactlyWithATinyRing) {
  PerfConfig cfg;
  cfg.event_type = PERF_TYPE_SOFTWARE;
  cfg.event_config = PERF_COUNT_SW_PAGE_FAULTS;
  cfg.event_period = 1;
  cfg.callchain = false;
  cfg.data_pages = 2;
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  pid_t child = flightrec::testing::Spawn({BuildPath("tests/programs/fr_faults"), "2000", "5"});
  ASSERT_EQ(WaitExit(child), 0);
  auto snap = (*b)->TakeSnapshot(60'000'000'000);
  ASSERT_TRUE(snap.ok());
  uint64_t total_over = 0;
  for (const auto& c : snap->per_cpu) {
    uint64_t produced = c["produced"], in_ring = c["in_ring"], paused = c["paused"],
             over = c["overwritten"], count = c["count"];
    EXPECT_EQ(produced, count) << "period 1: every counted event is one sample";
    EXPECT_EQ(produced, in_ring + paused + over) << c.dump();
    EXPECT_EQ(c["unaccounted"].get<int64_t>(), 0) << c.dump();
    // 48-byte records: header, ip, pid/tid, time, cpu, period.
    constexpr uint64_t kRecord = 48;
    EXPECT_EQ(c["sample_bytes_present"].get<uint64_t>(), in_ring * kRecord);
    EXPECT_EQ(c["overwritten_bytes"].get<uint64_t>(), over * kRecord) << c.dump();
    total_over += over;
  }
  EXPECT_GT(total_over, 1000u) << "the tiny ring should have wrapped many times";
  EXPECT_EQ(snap->counters.at("produced"), snap->counters.at("in_ring") +
                                               snap->counters.at("paused") +
                                               snap->counters.at("overwritten"));
}

TEST(PerfBackendTest, UnsupportedEventIsExplained) {
  PerfConfig cfg;
  cfg.event_type = PERF_TYPE_HARDWARE;
  cfg.event_config = PERF_COUNT_HW_BRANCH_MISSES;
  cfg.event_period = 100000;
  auto b = PerfBackend::Create(cfg);
  if (b.ok()) {
    // A machine with a PMU supports it; nothing to explain there.
    EXPECT_EQ((*b)->Describe()["backend"], "perf");
  } else {
    EXPECT_NE(b.status().message().find("not supported on this machine"), std::string::npos)
        << b.status().message();
  }
  cfg.event_type = 1234;  // no such PMU type
  b = PerfBackend::Create(cfg);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("not supported"), std::string::npos) << b.status().message();
}

TEST(PerfBackendTest, RingSizeFollowsHistoryAndRate) {
  EXPECT_EQ(RingPagesFor(30'000'000'000, 99, 200, 4096), 256u);
  EXPECT_EQ(RingPagesFor(1'000'000, 1, 200, 4096), 8u);                // lower bound
  EXPECT_EQ(RingPagesFor(3600'000'000'000, 10000, 200, 4096), 4096u);  // upper bound
}

}  // namespace
}  // namespace flightrec::recorder::perf
