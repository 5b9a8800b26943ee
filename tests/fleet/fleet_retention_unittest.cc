// Retention and the fleet journal (no gateway needed): once a store has a
// shipper journal, Vacuum removes only records the journal confirms.
#include <gtest/gtest.h>

#include <fstream>

#include "recorder/fleet/shipper.h"
#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/records.h"

namespace flightrec::store::testing {

using flightrec::testing::TempDir;
namespace {

TEST(FleetRetention, UnshippedRecordsAreNeverVacuumed) {
  TempDir dir;
  auto s = Store::Open(dir.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<RecordRow> rows;
  for (int i = 0; i < 4; ++i) {
    auto r = WriteSmallRecord(**s, "payload " + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().message();
    rows.push_back(*r);
  }
  RetentionLimits keep_one;
  keep_one.max_count = 1;
  // The journal exists and confirms rows[0] and rows[2]; the line for rows[1]
  // is torn (a crash mid-append), so it confirms nothing.
  std::filesystem::create_directory(dir.path() + "/fleet");
  std::ofstream(dir.path() + "/fleet/journal")
      << rows[0].id << " aa 10 h/2026/01/01/" << rows[0].id << ".frec\n"
      << rows[2].id << " bb 10 h/2026/01/01/" << rows[2].id << ".frec\n"
      << rows[1].id << " cc";
  auto v = (*s)->Vacuum(keep_one, false, std::set<std::string>{});
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->removed, (std::vector<std::string>{rows[0].id, rows[2].id}));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/" + rows[1].file));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/" + rows[3].file));
  // ReadJournal agrees with the store on what is confirmed.
  auto ids = fleet::ReadJournal(dir.path());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::set<std::string>{rows[0].id, rows[2].id}));
}

TEST(FleetRetention, WithoutAJournalRetentionIsUnchanged) {
  TempDir dir;
  auto s = Store::Open(dir.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WriteSmallRecord(**s, "p" + std::to_string(i)).ok());
  RetentionLimits keep_one;
  keep_one.max_count = 1;
  auto v = (*s)->Vacuum(keep_one, false, std::set<std::string>{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->removed.size(), 2u);
}

TEST(FleetKeys, ByHostAndDay) {
  auto k = fleet::ObjectKeyFor("host-a", "20261122T120633Z-3f9a2c");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, "host-a/2026/11/22/20261122T120633Z-3f9a2c.frec");
  EXPECT_FALSE(fleet::ObjectKeyFor("host-a", "../../etc/passwd").ok());
  EXPECT_FALSE(fleet::ObjectKeyFor("host-a", "20261122T120633Z-3f9a2c/x").ok());
  EXPECT_FALSE(fleet::ObjectKeyFor("a b", "20261122T120633Z-3f9a2c").ok());
}

}  // namespace
}  // namespace flightrec::store::testing
