// The hook's choice of zstd level and workers (core_compression.h): the pure
// rules, and the scheduler measurement they are fed with on this kernel.
#include "coredump-hook/core_compression.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <thread>
#include <vector>

namespace flightrec::coredump {
namespace {

CompressionChoice First(int cpus, double pressure, bool adapt = true) {
  CoreCompressionOptions o;
  o.adapt = adapt;
  return FirstChoice(CpuSight{cpus, pressure}, o);
}

TEST(CoreCompression, FirstChoiceFollowsCpusAndPressure) {
  EXPECT_EQ(First(2, 0), (CompressionChoice{3, 2}));
  EXPECT_EQ(First(64, 10), (CompressionChoice{3, 2})) << "workers are capped (memory)";
  EXPECT_EQ(First(1, 0), (CompressionChoice{3, 1}));
  EXPECT_EQ(First(2, -1), (CompressionChoice{3, 2})) << "no PSI: the configured level";
  EXPECT_EQ(First(2, 30), (CompressionChoice{2, 2}));
  EXPECT_EQ(First(2, 99), (CompressionChoice{1, 2}));
  EXPECT_EQ(First(1, 99, /*adapt=*/false), (CompressionChoice{3, 2})) << "fixed: as configured";
  CoreCompressionOptions o;
  o.level = 1;
  EXPECT_EQ(FirstChoice(CpuSight{2, 99}, o).level, 1) << "never below the lowest level";
  o.level = 9;
  EXPECT_EQ(FirstChoice(CpuSight{2, 99}, o).level, 7);
}

TEST(CoreCompression, NextLevelStepsOnWaitAgainstRun) {
  CoreCompressionOptions o;  // 3 down to 1
  EXPECT_EQ(NextLevel(3, 100, 101, o), 2) << "waited more than ran: down";
  EXPECT_EQ(NextLevel(2, 100, 300, o), 1);
  EXPECT_EQ(NextLevel(1, 100, 300, o), 1) << "floor";
  EXPECT_EQ(NextLevel(1, 100, 19, o), 2) << "waited under a fifth: up";
  EXPECT_EQ(NextLevel(3, 100, 0, o), 3) << "ceiling: the configured level";
  EXPECT_EQ(NextLevel(2, 100, 50, o), 2) << "in between: stays";
  EXPECT_EQ(NextLevel(2, 0, 0, o), 2) << "blocked on input: no signal";
}

// Burns `cpu_ns` of this thread's CPU time (not wall time: the machine may
// be busy).
void Burn(int64_t cpu_ns) {
  timespec t0, t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  volatile uint64_t x = 0;
  do {
    for (int i = 0; i < 10000; ++i) x = x + i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1'000'000'000LL + (t.tv_nsec - t0.tv_nsec) < cpu_ns);
}

// Pins the calling thread (and the threads it starts) to one CPU for its
// lifetime, then restores the affinity.
class PinToOneCpu {
 public:
  PinToOneCpu() {
    pthread_getaffinity_np(pthread_self(), sizeof(old_), &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  }
  ~PinToOneCpu() { pthread_setaffinity_np(pthread_self(), sizeof(old_), &old_); }
  bool pinned() const { return pinned_; }

 private:
  cpu_set_t old_;
  bool pinned_ = false;
};

TEST(CoreCompression, SchedstatSeesThreadsWaitingForACpu) {
  uint64_t run0, wait0, run1, wait1;
  ASSERT_TRUE(ReadOwnSchedstat(&run0, &wait0)) << "/proc/self/task/*/schedstat unreadable";
  {
    // Three busy threads on one CPU: each runs about a third of the time.
    PinToOneCpu pin;
    ASSERT_TRUE(pin.pinned());
    std::vector<std::thread> t;
    for (int i = 0; i < 2; ++i) t.emplace_back([] { Burn(60'000'000); });
    Burn(60'000'000);
    for (auto& th : t) th.join();
  }
  ASSERT_TRUE(ReadOwnSchedstat(&run1, &wait1));
  // Exited threads take their counters with them: the main thread's alone
  // ran 60 ms and waited for its two siblings.
  EXPECT_GE(run1 - run0, 60'000'000u);
  EXPECT_GE(wait1 - wait0, 30'000'000u) << "no run-queue wait seen for 3 threads on 1 CPU";
}

TEST(CoreCompression, GovernorStepsDownWhenItsThreadsQueue) {
  CoreCompressionOptions o;
  CompressionGovernor g(o, CpuSight{2, 0});
  EXPECT_EQ(g.choice(), (CompressionChoice{3, 2}));
  EXPECT_FALSE(g.Observe(1 << 20)) << "not a whole window yet";
  {
    PinToOneCpu pin;
    ASSERT_TRUE(pin.pinned());
    std::atomic<bool> stop{false};
    std::vector<std::thread> t;
    for (int i = 0; i < 3; ++i) {
      t.emplace_back([&] {
        while (!stop.load()) Burn(1'000'000);
      });
    }
    Burn(60'000'000);  // four threads on one CPU: the main one waits ~3x what it runs
    EXPECT_TRUE(g.Observe(CompressionGovernor::kWindowBytes));
    stop = true;
    for (auto& th : t) th.join();
  }
  EXPECT_EQ(g.choice().level, 2);
  EXPECT_NE(g.history().find("3 -> 2 at"), std::string::npos) << g.history();
}

TEST(CoreCompression, FixedLevelNeverMeasures) {
  CoreCompressionOptions o;
  o.adapt = false;
  CompressionGovernor g(o, CpuSight{1, 100});
  EXPECT_EQ(g.choice(), (CompressionChoice{3, 2}));
  EXPECT_FALSE(g.Observe(10 * CompressionGovernor::kWindowBytes));
  EXPECT_EQ(g.history(), "zstd level 3, 2 workers");
}

}  // namespace
}  // namespace flightrec::coredump
