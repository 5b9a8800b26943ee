// The shipper's batches against the real radosgw: a backlog is indexed in
// one call and journaled together; a failed index call confirms none of the
// batch, and the retry uploads nothing again.
#include <gtest/gtest.h>

#include <mutex>

#include "recorder/fleet/shipper.h"
#include "store/store.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/files.h"
#include "tests/support/records.h"

namespace flightrec::testing {
namespace {

size_t Lines(const std::filesystem::path& p) {
  std::string s = ReadFile(p);
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(ShipperBatch, ABacklogIsIndexedInBatchesAndAFailedBatchConfirmsNothing) {
  TempDir dir;
  auto st = store::Store::Open(dir.path(), store::testing::TestOptions());
  ASSERT_TRUE(st.ok()) << st.status().message();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store::testing::WriteSmallRecord(**st, "backlog " + std::to_string(i)).ok());
  }
  std::mutex mu;
  std::vector<size_t> sizes;  // of each batch the index was given
  bool refuse = true;
  fleet::ShipperOptions o;
  o.store_dir = dir.path();
  o.host_id = "host-batch";
  o.s3 = ClusterS3Options();
  o.batch_records = 3;
  o.on_uploaded_batch = [&](const std::vector<fleet::UploadedRecord>& recs) -> Status {
    std::lock_guard<std::mutex> l(mu);
    sizes.push_back(recs.size());
    if (refuse) return Unavailable("index away (test)");
    return OkStatus();
  };
  auto s = fleet::Shipper::Create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  // The index refuses: the first batch is uploaded but not confirmed.
  auto n = (*s)->ShipOnce();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(sizes, (std::vector<size_t>{3}));
  EXPECT_EQ(Lines(fleet::JournalPath(dir.path())), 0u);
  auto stats = (*s)->stats();
  EXPECT_EQ(stats.pending, 5u);
  EXPECT_EQ(stats.failures, 1u);
  EXPECT_EQ(stats.uploaded + stats.already_present, 0u);
  EXPECT_NE(stats.last_error.find("index away"), std::string::npos) << stats.last_error;
  // Back: batches of 3 and 2; the first three are found by HEAD, not sent again.
  refuse = false;
  n = (*s)->ShipOnce();
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 5);
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 2}));
  EXPECT_EQ(Lines(fleet::JournalPath(dir.path())), 5u);
  stats = (*s)->stats();
  EXPECT_EQ(stats.already_present, 3u);
  EXPECT_EQ(stats.uploaded, 2u);
  EXPECT_EQ(stats.pending, 0u);
  EXPECT_EQ(stats.pending_bytes, 0u);
  EXPECT_GT(stats.shipped_bytes, 0u);
  EXPECT_GT(stats.last_success_unix_ns, 0);
  EXPECT_EQ(stats.consecutive_failures, 0u);
  EXPECT_TRUE(stats.last_error.empty());
}

}  // namespace
}  // namespace flightrec::testing
