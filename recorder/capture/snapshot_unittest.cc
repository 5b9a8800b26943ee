// Snapshot::MergeSampleRuns: the per-CPU runs of a dump merged by time. The
// reference is what it replaces: a stable sort by time of the runs laid end
// to end in run order.
#include "recorder/capture/snapshot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace flightrec::recorder {
namespace {

Sample At(uint64_t time_ns, uint32_t cpu, uint32_t tid) {
  Sample s;
  s.time_ns = time_ns;
  s.cpu = cpu;
  s.pid = tid;
  s.tid = tid;
  // Something owned, to see that it moves along with its sample.
  s.user_chain = {0x1000 + tid, time_ns};
  return s;
}

using Key = std::tuple<uint64_t, uint32_t, uint32_t, std::vector<uint64_t>>;

std::vector<Key> Keys(const std::vector<Sample>& v) {
  std::vector<Key> k;
  for (const Sample& s : v) k.emplace_back(s.time_ns, s.cpu, s.tid, s.user_chain);
  return k;
}

std::vector<Sample> Reference(const std::vector<std::vector<Sample>>& runs) {
  std::vector<Sample> all;
  for (const auto& r : runs) all.insert(all.end(), r.begin(), r.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  return all;
}

TEST(MergeSampleRunsTest, EqualTimesGoLowerRunFirstThenRunOrder) {
  std::vector<std::vector<Sample>> runs = {
      {At(5, 0, 1), At(5, 0, 2), At(9, 0, 6)},
      {At(5, 1, 3)},
      {At(4, 2, 4), At(5, 2, 5), At(9, 2, 7)},
  };
  Snapshot snap;
  snap.MergeSampleRuns(runs);
  std::vector<uint32_t> tids;
  for (const Sample& s : snap.samples) tids.push_back(s.tid);
  EXPECT_EQ(tids, (std::vector<uint32_t>{4, 1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(snap.oldest_sample_ns, 4u);
  EXPECT_EQ(snap.samples[0].user_chain, (std::vector<uint64_t>{0x1004, 4}));
}

TEST(MergeSampleRunsTest, RandomSortedRunsMatchAStableSort) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 200; ++round) {
    const size_t cpus = 1 + rng() % 8;
    std::vector<std::vector<Sample>> runs(cpus);
    uint32_t tid = 0;
    for (size_t c = 0; c < cpus; ++c) {
      // Few distinct times: many ties within and across runs; some runs empty.
      const size_t n = rng() % 4 == 0 ? 0 : rng() % 300;
      std::vector<uint64_t> times(n);
      for (auto& t : times) t = rng() % 64;
      std::sort(times.begin(), times.end());
      for (uint64_t t : times) runs[c].push_back(At(t, static_cast<uint32_t>(c), ++tid));
    }
    Snapshot snap;
    snap.MergeSampleRuns(runs);
    const std::vector<Sample> want = Reference(runs);
    ASSERT_EQ(Keys(snap.samples), Keys(want)) << "round " << round;
    EXPECT_EQ(snap.oldest_sample_ns, want.empty() ? 0 : want.front().time_ns);
  }
}

TEST(MergeSampleRunsTest, ARunOutOfOrderIsSortedStablyFirst) {
  std::mt19937_64 rng(4);
  for (int round = 0; round < 100; ++round) {
    std::vector<std::vector<Sample>> runs(3);
    uint32_t tid = 0;
    for (size_t c = 0; c < runs.size(); ++c) {
      for (int i = 0; i < 200; ++i) {
        runs[c].push_back(At(rng() % 50, static_cast<uint32_t>(c), ++tid));
      }
    }
    // Run 0 in time order, run 1 newest first (a backward ring read as it
    // lies), run 2 shuffled: each is still merged into one time order, and
    // equal times within a run keep their order in it.
    auto by_time = [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; };
    std::stable_sort(runs[0].begin(), runs[0].end(), by_time);
    std::stable_sort(runs[1].begin(), runs[1].end(),
                     [](const Sample& a, const Sample& b) { return a.time_ns > b.time_ns; });
    Snapshot snap;
    snap.MergeSampleRuns(runs);
    ASSERT_EQ(Keys(snap.samples), Keys(Reference(runs))) << "round " << round;
    ASSERT_TRUE(std::is_sorted(snap.samples.begin(), snap.samples.end(), by_time));
  }
}

TEST(MergeSampleRunsTest, NoSamplesLeavesNothing) {
  Snapshot snap;
  snap.samples.push_back(At(1, 0, 1));  // replaced, not appended to
  snap.oldest_sample_ns = 1;
  snap.MergeSampleRuns({{}, {}});
  EXPECT_TRUE(snap.samples.empty());
  EXPECT_EQ(snap.oldest_sample_ns, 0u);
  snap.MergeSampleRuns({});
  EXPECT_TRUE(snap.samples.empty());
}

TEST(MergeSampleRunsTest, OneRunIsTakenWhole) {
  std::vector<std::vector<Sample>> runs = {{At(1, 0, 1), At(1, 0, 2), At(3, 0, 3)}};
  Snapshot snap;
  snap.MergeSampleRuns(runs);
  EXPECT_EQ(Keys(snap.samples), Keys(runs[0]));
}

// The loss section comes back from record files, which may be old or
// hostile: FromJson keeps exactly what ToJson wrote and never throws.
TEST(LossLedgerTest, FromJsonReadsBackWhatToJsonWrote) {
  LossLedger l;
  l.Set(LossCounter::kProduced, 10);
  l.Set(LossCounter::kPaused, 0);  // present though 0: a counter the backend keeps
  l.Add(LossCounter::kEndUnknown, 3);
  LossLedger back = LossLedger::FromJson(l.ToJson());
  EXPECT_EQ(back.ToJson(), l.ToJson());
  EXPECT_TRUE(back.Has(LossCounter::kPaused));
  EXPECT_FALSE(back.Has(LossCounter::kOverwritten));
}

TEST(LossLedgerTest, FromJsonOfHostileTextNeverThrows) {
  EXPECT_EQ(LossLedger::FromJson(nlohmann::json::array({1, 2})).ToJson(), nlohmann::json::object());
  EXPECT_EQ(LossLedger::FromJson(nlohmann::json("paused")).ToJson(), nlohmann::json::object());
  // A counter that is no unsigned number reads as present, 0; a key that
  // names no counter is skipped.
  auto l = LossLedger::FromJson({{"paused", -5}, {"overwritten", "many"}, {"bogus", 7}});
  EXPECT_TRUE(l.Has(LossCounter::kPaused));
  EXPECT_EQ(l.Get(LossCounter::kPaused), 0u);
  EXPECT_EQ(l.Get(LossCounter::kOverwritten), 0u);
  EXPECT_EQ(l.ToJson().size(), 2u);
}

}  // namespace
}  // namespace flightrec::recorder
