// PerfBackend on this machine's real kernel, for what tests/perf does not
// cover: an explicit long pause (paused loss > 0) with exact accounting, and
// per-command capture as an unprivileged user. Needs root to setuid and for
// system-wide events: label root.
#include "recorder/perf/perf_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/units.h"

namespace flightrec::recorder::perf {
namespace {

std::string Program(const std::string& name) {
  const char* dir = std::getenv("FLIGHTREC_BUILD_DIR");
  return std::string(dir ? dir : ".") + "/tests/programs/" + name;
}

// Forks a child that waits for a byte on a pipe before exec, so events can be
// attached to its pid before it runs anything. Returns pid, sets *gate.
pid_t SpawnGated(std::vector<std::string> args, int* gate) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) _exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(p[0]);
  *gate = p[1];
  return pid;
}

int Release(int gate) {
  int ok = write(gate, "x", 1) == 1;
  close(gate);
  return ok;
}

int WaitExit(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Touches `pages` fresh anonymous pages, one fault each, 20 us apart so the
// rate stays far below the kernel's per-tick sample throttle.
void Faults(long pages) {
  long psz = sysconf(_SC_PAGESIZE);
  char* p = static_cast<char*>(
      mmap(nullptr, pages * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) _exit(3);
  for (long i = 0; i < pages; ++i) {
    p[i * psz] = 1;
    int64_t until = MonotonicNs() + 20'000;
    while (MonotonicNs() < until) {
    }
  }
  munmap(p, pages * psz);
}

// Why the check is exact: page-faults is a discrete software event, counted
// by the kernel one by one (perf_swevent_event adds 1 to event->count), and
// with sample_period 1 every counted fault is one overflow, i.e. one sample
// attempt. Each attempt ends in exactly one of: written to the ring (then it
// is still there = in_ring, or was overwritten), refused because the ring is
// paused (event->lost_samples, read via PERF_FORMAT_LOST), or refused for
// lack of space (a PERF_RECORD_LOST, never in an overwrite ring). The events
// are enabled only after their ring is mapped, so no attempt meets "no ring".
// "overwritten" is measured, not inferred: total bytes the kernel wrote
// (-data_head of the backward ring) minus the bytes of intact records, / 48
// (every record has one size: no callchain). The events follow one paced
// process only: system-wide, other processes' fault storms (a parallel build)
// trip the per-tick throttle (kernel/events/core.c: perf_swevent_overflow
// returns while hwc->interrupts == MAX_INTERRUPTS after counting the event),
// and a throttled fault is counted with neither sample nor loss.
TEST(PerfBackendLossTest, ProducedEqualsStoredPlusPausedPlusOverwrittenAcrossALongPause) {
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    char c;
    if (read(to_child[0], &c, 1) != 1) _exit(1);  // events attached
    Faults(1000);
    if (write(from_child[1], "1", 1) != 1) _exit(2);
    if (read(to_child[0], &c, 1) != 1) _exit(1);  // rings paused
    Faults(2000);
    _exit(0);
  }
  PerfConfig cfg;
  cfg.event_type = PERF_TYPE_SOFTWARE;
  cfg.event_config = PERF_COUNT_SW_PAGE_FAULTS;
  cfg.event_period = 1;
  cfg.callchain = false;
  cfg.data_pages = 1;
  cfg.sideband_pages = 8;
  cfg.target_pid = worker;
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  char c;
  ASSERT_EQ(read(from_child[0], &c, 1), 1);
  ASSERT_TRUE((*b)->PauseOutput(true).ok());
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  ASSERT_EQ(WaitExit(worker), 0);  // 2000 faults while nothing can be written
  auto snap = (*b)->TakeSnapshot(600'000'000'000);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_TRUE((*b)->paused()) << "a snapshot leaves an explicit pause in place";
  ASSERT_TRUE((*b)->PauseOutput(false).ok());

  for (const auto& cpu : snap->per_cpu) {
    uint64_t produced = cpu["produced"], in_ring = cpu["in_ring"], paused = cpu["paused"],
             over = cpu["overwritten"], lost = cpu["ring_lost_records"];
    EXPECT_EQ(produced, in_ring + paused + over + lost) << cpu.dump();
    EXPECT_EQ(cpu["unaccounted"].get<int64_t>(), 0) << cpu.dump();
    EXPECT_EQ(cpu["overwritten_bytes"].get<uint64_t>(), over * 48) << cpu.dump();
    EXPECT_EQ(lost, 0u) << "an overwrite ring never refuses for lack of space";
  }
  EXPECT_GE(snap->counters.at("produced"), 3000u);
  EXPECT_GE(snap->counters.at("paused"), 2000u) << "the second 2000 faults ran while paused";
  // ... inside the window: the pause is still in progress at the snapshot.
  EXPECT_EQ(snap->counters.at("paused_in_window"), snap->counters.at("paused"));
  EXPECT_GE(snap->counters.at("lost_in_window"), snap->counters.at("paused"));
  EXPECT_GE(snap->counters.at("overwritten"), 500u) << "one page holds 85 records";
  EXPECT_EQ(snap->counters.at("produced"),
            snap->counters.at("in_ring") + snap->counters.at("paused") +
                snap->counters.at("overwritten") + snap->counters.at("ring_lost_records"));
}

// `recorder record -- CMD` at perf_event_paranoid 2 without root: events on
// the command's pid (inherit, per CPU), user mode only.
TEST(PerfBackendCommandTest, UnprivilegedUserRecordsItsOwnChild) {
  pid_t tester = fork();
  ASSERT_GE(tester, 0);
  if (tester == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    // A credential change makes the process non-dumpable (kernel/cred.c
    // commit_creds), and perf_event_open on a non-dumpable task fails the
    // ptrace access check; a real user's shell is dumpable.
    if (prctl(PR_SET_DUMPABLE, 1) != 0) _exit(10);
    int gate = -1;
    pid_t child = SpawnGated({Program("fr_spin"), "0.5"}, &gate);
    if (child < 0) _exit(11);
    PerfConfig cfg;
    cfg.frequency_hz = 499;
    cfg.target_pid = child;
    cfg.data_pages = 16;
    cfg.sideband_pages = 8;
    auto b = PerfBackend::Create(cfg);
    if (!b.ok()) {
      fprintf(stderr, "create: %s\n", b.status().ToString().c_str());
      _exit(12);
    }
    if ((*b)->Describe()["kernel_samples"] != false) _exit(13);
    Release(gate);
    if (WaitExit(child) != 0) _exit(14);
    auto snap = (*b)->TakeSnapshot(60'000'000'000);
    if (!snap.ok()) _exit(15);
    size_t mine = 0;
    for (const auto& s : snap->samples) {
      if (s.pid != static_cast<uint32_t>(child)) _exit(16);  // only the command
      if (s.mode != CpuMode::kUser) _exit(17);               // exclude_kernel
      ++mine;
    }
    bool exec_seen = false;
    (void)(*b)->DrainSideband([&](const Event& e) {
      if (auto* c = std::get_if<CommEvent>(&e)) exec_seen |= c->exec && c->comm == "fr_spin";
    });
    if (mine < 20) _exit(18);  // 0.5 s of CPU at 499 Hz, on a loaded machine
    if (!exec_seen) _exit(19);
    _exit(0);
  }
  EXPECT_EQ(WaitExit(tester), 0)
      << "10 setuid, 12 open failed, 13 kernel sampled, 16 foreign pid, 17 kernel mode, "
         "18 too few samples, 19 no exec comm in sideband";
}

TEST(PerfBackendWindowTest, ReportsTheSpanTheRingsActuallyHold) {
  PerfConfig cfg;
  cfg.frequency_hz = 999;
  cfg.data_pages = 1;  // far less than 5 s of history
  auto b = PerfBackend::Create(cfg);
  ASSERT_TRUE(b.ok()) << b.status().message();
  int gate = -1;
  pid_t child = SpawnGated({Program("fr_spin"), "0.6"}, &gate);
  ASSERT_TRUE(Release(gate));
  ASSERT_EQ(WaitExit(child), 0);
  auto snap = (*b)->TakeSnapshot(5'000'000'000);
  ASSERT_TRUE(snap.ok());
  ASSERT_FALSE(snap->samples.empty());
  EXPECT_GT(snap->oldest_sample_ns, snap->window_start_ns)
      << "a one-page ring cannot hold 5 s: the covered span is shorter than asked";
  EXPECT_LE(snap->samples.back().time_ns, snap->freeze_time_ns);
  EXPECT_EQ(snap->samples.front().time_ns, snap->oldest_sample_ns);
  EXPECT_GT(snap->counters.at("overwritten"), 0u);
  // A second snapshot asking for 1 ns keeps nothing and counts the rest as
  // outside the window.
  auto tiny = (*b)->TakeSnapshot(1);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->counters.at("in_window") + tiny->counters.at("outside_window"),
            tiny->counters.at("in_ring"));
  EXPECT_GT(tiny->counters.at("outside_window"), 0u);
}

}  // namespace
}  // namespace flightrec::recorder::perf
