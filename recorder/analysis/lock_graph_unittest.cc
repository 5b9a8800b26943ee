// The wait-for graph on hostile lock-owner data, and the lock_waits
// section's decoding: cycles of any length, self-waits, chains, duplicates
// and malformed entries give a clear answer, in O(n).
#include "recorder/analysis/lock_graph.h"

#include <gtest/gtest.h>

#include "recorder/record/lock_waits_section.h"

namespace flightrec::recorder::analysis {
namespace {

TEST(LockGraphTest, AbbaIsOneDeadlockNamingBothMutexes) {
  auto g = LockGraph({{1, 0x10, 2, true}, {2, 0x20, 1, true}}, {{1, "xfer_a"}, {2, "xfer_b"}});
  ASSERT_EQ(g["deadlocks"].size(), 1u) << g.dump();
  EXPECT_EQ(g["deadlocks"][0]["text"],
            "deadlock: 1 waits for 2 (mutex 0x10), 2 waits for 1 (mutex 0x20)");
  EXPECT_EQ(g["waits"][0]["owner_comm"], "xfer_b");
  EXPECT_EQ(g["waits"][1]["mutex"], "0x20");
}

TEST(LockGraphTest, SelfWaitChainsUnknownOwnersAndDuplicates) {
  // 5 relocks its own normal mutex; 1 -> 2 -> 3 -> 2 has the cycle {2, 3}
  // only; 7's mutex named no owner; 1's second entry is ignored.
  auto g = LockGraph({{5, 0x50, 5, true},
                      {1, 0x1, 2, true},
                      {2, 0x2, 3, true},
                      {3, 0x3, 2, true},
                      {7, 0x7, 0, false},
                      {1, 0x9, 7, true}},
                     {});
  ASSERT_EQ(g["deadlocks"].size(), 2u) << g.dump();
  EXPECT_EQ(g["deadlocks"][0]["text"], "deadlock: 5 waits for 5 (mutex 0x50)");
  EXPECT_EQ(g["deadlocks"][1]["threads"], nlohmann::json({2, 3}));
  EXPECT_EQ(g["waits"].size(), 5u);
  EXPECT_FALSE(g.contains("deadlocks_omitted"));
}

TEST(LockGraphTest, HugeCyclesAndManyDeadlocksAreBounded) {
  std::vector<LockEdge> ring;
  constexpr uint32_t kN = 200000;
  for (uint32_t t = 1; t <= kN; ++t) ring.push_back({t, t, t % kN + 1, true});
  auto g = LockGraph(ring, {});
  ASSERT_EQ(g["deadlocks"].size(), 1u);
  EXPECT_EQ(g["deadlocks"][0]["threads"].size(), kN);
  const std::string text = g["deadlocks"][0]["text"];
  EXPECT_NE(text.find("... (200000 threads in all)"), std::string::npos);
  EXPECT_LT(text.size(), 1000u);
  std::vector<LockEdge> selfs;
  for (uint32_t t = 1; t <= 1000; ++t) selfs.push_back({t, t, t, true});
  g = LockGraph(selfs, {});
  EXPECT_EQ(g["deadlocks"].size(), kMaxDeadlocks);
  EXPECT_EQ(g["deadlocks_omitted"], 1000 - kMaxDeadlocks);
}

TEST(LockWaitsSectionTest, DecodesGoodEntriesAndRefusesMalformedOnesNamingThem) {
  auto ok = DecodeLockWaits(
      R"([{"pid":9,"tid":10,"owner":11,"out_ns":5,"end_ns":0,"mutex":4096,"owner_in_process":true}])",
      "r");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].owner, 11u);
  EXPECT_TRUE(DecodeLockWaits("", "r").ok());
  for (const char* bad : {
           R"({"pid":9})",                                       // not an array
           R"([1])",                                             // not an object
           R"([{"pid":9,"tid":0,"owner":1,"mutex":1}])",         // tid 0
           R"([{"pid":9,"tid":1,"owner":99999999,"mutex":1}])",  // owner past PID_MAX
           R"([{"pid":9,"tid":1,"owner":-1,"mutex":1}])",        // negative
           R"([{"pid":9,"tid":1,"owner":"2","mutex":1}])",       // wrong type
           R"([{"pid":9,"tid":1,"owner":2,"mutex":0}])",         // no mutex
           R"([{"pid":9,"tid":1,"owner":2,"mutex":1,"out_ns":9,"end_ns":3}])",  // ends first
           R"([{"pid":9,"tid":1,"owner":2,"mutex":1)",                          // truncated
       }) {
    auto r = DecodeLockWaits(bad, "record x");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("record x"), std::string::npos) << r.status().message();
  }
  std::string many = "[";
  for (size_t i = 0; i <= kMaxRecordedLockWaits; ++i) {
    many += std::string(i ? "," : "") + R"({"pid":1,"tid":1,"owner":1,"mutex":1})";
  }
  many += "]";
  auto r = DecodeLockWaits(many, "r");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("entries"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace flightrec::recorder::analysis
