// The shipper against a real radosgw: every committed record once, resumed
// after a restart, and through a gateway killed mid-upload.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "recorder/fleet/shipper.h"
#include "store/store.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

using fleet::Shipper;
using fleet::UploadedRecord;

// The shipper's counters are polled more often than the default: the
// `uploading` state lasts only as long as one upload.
constexpr std::chrono::milliseconds kPoll(50);

int CountLines(const std::filesystem::path& p) {
  std::string s = ReadFile(p);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

class ShipperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::Store::Open(dir_.path(), store::testing::TestOptions());
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
    auto c = fleet::S3Client::Create(ClusterS3Options());
    ASSERT_TRUE(c.ok());
    s3_ = std::move(*c);
  }
  fleet::ShipperOptions Options(const std::string& host) {
    fleet::ShipperOptions o;
    o.store_dir = dir_.path();
    o.host_id = host;
    o.s3 = ClusterS3Options();
    o.backoff_initial = std::chrono::milliseconds(200);
    o.backoff_max = std::chrono::milliseconds(2000);
    o.on_uploaded = [this](const UploadedRecord& r) {
      std::lock_guard<std::mutex> l(mu_);
      calls_.push_back(r);
      return OkStatus();
    };
    return o;
  }
  // The object under `key` holds exactly the local file's bytes.
  void ExpectShipped(const std::string& key, const std::filesystem::path& local) {
    auto head = s3_->Head(key);
    ASSERT_TRUE(head.ok()) << head.status().message();
    ASSERT_TRUE(head->has_value()) << key << " not in the bucket";
    auto d = fleet::DigestFile(local);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ((*head)->sha256, d->sha256_hex) << key;
    EXPECT_EQ((*head)->size, d->size) << key;
  }
  size_t Calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_.size();
  }

  flightrec::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<fleet::S3Client> s3_;
  std::mutex mu_;
  std::vector<UploadedRecord> calls_;
};

TEST_F(ShipperTest, ShipsEveryRecordOnceAndResumesAfterARestart) {
  std::vector<store::RecordRow> rows;
  for (int i = 0; i < 3; ++i) {
    auto r = store::testing::WriteSmallRecord(*store_, "events " + std::to_string(i));
    ASSERT_TRUE(r.ok());
    rows.push_back(*r);
  }
  {
    auto s = Shipper::Create(Options("host-once"));
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto n = (*s)->ShipOnce();
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, 3);
    EXPECT_EQ((*s)->stats().uploaded, 3u);
  }
  ASSERT_EQ(Calls(), 3u);
  for (const auto& c : calls_) {
    EXPECT_EQ(c.key, *fleet::ObjectKeyFor("host-once", c.record_id));
    EXPECT_EQ(c.sha256, fleet::DigestFile(c.path)->sha256_hex);
    ExpectShipped(c.key, c.path);
  }
  auto journal = fleet::JournalPath(dir_.path());
  EXPECT_EQ(CountLines(journal), 3);
  // A restart: nothing to do, nothing sent again.
  {
    auto s = Shipper::Create(Options("host-once"));
    ASSERT_TRUE(s.ok());
    auto n = (*s)->ShipOnce();
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0);
    EXPECT_EQ((*s)->stats().uploaded + (*s)->stats().already_present, 0u);
  }
  EXPECT_EQ(Calls(), 3u);
  // A crash after the upload but before the journal line: the restart finds
  // the object by HEAD (same sha256) and confirms it without a second PUT.
  std::string text = ReadFile(journal);
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  std::ofstream(journal, std::ios::trunc) << text;
  ASSERT_EQ(CountLines(journal), 2);
  {
    auto s = Shipper::Create(Options("host-once"));
    ASSERT_TRUE(s.ok());
    auto n = (*s)->ShipOnce();
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 1);
    EXPECT_EQ((*s)->stats().uploaded, 0u);
    EXPECT_EQ((*s)->stats().already_present, 1u);
  }
  EXPECT_EQ(CountLines(journal), 3);
}

TEST_F(ShipperTest, ARecordChangedUnderItsKeyIsAConflictNotAnOverwrite) {
  auto r = store::testing::WriteSmallRecord(*store_, "original");
  ASSERT_TRUE(r.ok());
  auto key = *fleet::ObjectKeyFor("host-conflict", r->id);
  auto other = dir_.path() + "/other";
  WriteRandomFile(other, 1000, 9);
  ASSERT_TRUE(s3_->PutFile(key, other).ok());
  auto s = Shipper::Create(Options("host-conflict"));
  ASSERT_TRUE(s.ok());
  auto n = (*s)->ShipOnce();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(n.status().message().find("HostId"), std::string::npos) << n.status().message();
  ExpectShipped(key, other);  // untouched
  EXPECT_EQ(Calls(), 0u);
}

TEST_F(ShipperTest, AWrongCredentialIsAClearErrorAndConfirmsNothing) {
  ASSERT_TRUE(store::testing::WriteSmallRecord(*store_, "events").ok());
  auto o = Options("host-badcred");
  o.s3.secret_key = "not-the-secret-at-all-0123456789";
  auto s = Shipper::Create(o);
  ASSERT_TRUE(s.ok());
  auto n = (*s)->ShipOnce();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(n.status().message().find("SignatureDoesNotMatch"), std::string::npos)
      << n.status().message();
  EXPECT_EQ(n.status().message().find(o.s3.secret_key), std::string::npos);
  EXPECT_EQ((*s)->stats().last_error, n.status().message());
  EXPECT_EQ((*s)->stats().pending, 1u);
  EXPECT_EQ(CountLines(fleet::JournalPath(dir_.path())), 0);
  EXPECT_EQ(Calls(), 0u);
}

TEST_F(ShipperTest, GatewayKilledMidUploadThenRestarted) {
  // 6 MiB of incompressible events at 1 MiB/s: the upload is in flight for
  // seconds, long enough to kill the gateway under it.
  auto rec = store_->BeginRecord("dump");
  ASSERT_TRUE(rec.ok());
  WriteRandomFile(dir_.path() + "/payload", 6 << 20, 11);
  ASSERT_TRUE((*rec)->writer().AddSection("events", ReadFile(dir_.path() + "/payload")).ok());
  auto row = store_->Commit(std::move(*rec), nlohmann::json::object());
  ASSERT_TRUE(row.ok()) << row.status().message();
  auto local = std::filesystem::path(dir_.path()) / row->file;

  auto o = Options("host-killed");
  o.s3.max_send_bytes_per_sec = 1 << 20;
  auto s = Shipper::Create(o);
  ASSERT_TRUE(s.ok());
  (*s)->Start();
  ASSERT_TRUE(
      WaitFor([&] { return (*s)->stats().uploading == row->id; }, std::chrono::seconds(30), kPoll))
      << "upload never started";
  ASSERT_EQ(RunToExit({ClusterScript(), "kill-rgw", Cluster().dir.string()}), 0);
  ASSERT_TRUE(WaitFor([&] { return (*s)->stats().failures >= 1; }, std::chrono::seconds(60), kPoll))
      << "the kill was not noticed";
  EXPECT_EQ((*s)->stats().confirmed, 0u);
  EXPECT_NE((*s)->stats().last_error.find("S3 "), std::string::npos) << (*s)->stats().last_error;
  ASSERT_EQ(RunToExit({ClusterScript(), "start-rgw", Cluster().dir.string()},
                      (Cluster().dir / "log" / "start-rgw.out").string()),
            0);
  ASSERT_TRUE(
      WaitFor([&] { return (*s)->stats().confirmed == 1; }, std::chrono::seconds(120), kPoll))
      << "not shipped after the gateway came back: " << (*s)->stats().last_error;
  (*s)->Stop();
  ExpectShipped(*fleet::ObjectKeyFor("host-killed", row->id), local);
  EXPECT_EQ(Calls(), 1u);
  EXPECT_EQ(CountLines(fleet::JournalPath(dir_.path())), 1);
  EXPECT_EQ((*s)->stats().uploaded, 1u);
}

}  // namespace
}  // namespace flightrec::testing
