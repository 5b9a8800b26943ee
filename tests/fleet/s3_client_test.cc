// S3Client against a real radosgw (tests/fleet/ceph_fixture.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>

#include "recorder/fleet/s3_client.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/files.h"

namespace flightrec::testing {
namespace {

using fleet::S3Client;

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = S3Client::Create(ClusterS3Options());
    ASSERT_TRUE(c.ok()) << c.status().message();
    s3_ = std::move(*c);
  }
  TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path();
  std::unique_ptr<S3Client> s3_;
};

TEST_F(S3ClientTest, PutHeadGetRoundTrip) {
  auto src = dir_ / "src";
  WriteRandomFile(src, 3 << 20, 1);
  auto digest = fleet::DigestFile(src);
  ASSERT_TRUE(digest.ok());
  ASSERT_TRUE(s3_->PutFile("roundtrip/a.frec", src).ok());
  auto head = s3_->Head("roundtrip/a.frec");
  ASSERT_TRUE(head.ok()) << head.status().message();
  ASSERT_TRUE(head->has_value());
  EXPECT_EQ((*head)->size, 3u << 20);
  EXPECT_EQ((*head)->sha256, digest->sha256_hex);
  auto got = s3_->GetToFile("roundtrip/a.frec", dir_ / "dst");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->size, 3u << 20);
  EXPECT_EQ(ReadFile(src), ReadFile(dir_ / "dst"));
  auto none = s3_->Head("roundtrip/absent.frec");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  auto missing = s3_->GetToFile("roundtrip/absent.frec", dir_ / "absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("NoSuchKey"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "absent"));
  ASSERT_TRUE(s3_->Delete("roundtrip/a.frec").ok());
}

TEST_F(S3ClientTest, MultipartUploadOf70MiB) {
  auto src = dir_ / "big";
  WriteRandomFile(src, 70ull << 20, 2);
  ASSERT_TRUE(s3_->PutFile("multipart/big.frec", src).ok());
  auto head = s3_->Head("multipart/big.frec");
  ASSERT_TRUE(head.ok() && head->has_value());
  EXPECT_EQ((*head)->size, 70ull << 20);
  // A multipart object's ETag is "md5-of-part-md5s-N": 5 parts of 16 MiB.
  EXPECT_NE((*head)->etag.find("-5"), std::string::npos) << (*head)->etag;
  auto got = s3_->GetToFile("multipart/big.frec", dir_ / "big.out");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->sha256, fleet::DigestFile(src)->sha256_hex);
  EXPECT_EQ(fleet::DigestFile(dir_ / "big.out")->sha256_hex, got->sha256);
  ASSERT_TRUE(s3_->Delete("multipart/big.frec").ok());  // memstore holds it in RAM
}

TEST_F(S3ClientTest, GetVerifiesTheChecksum) {
  auto src = dir_ / "src";
  WriteRandomFile(src, 100000, 3);
  ASSERT_TRUE(s3_->PutFile("verify/a.frec", src).ok());
  std::string wrong(64, 'a');
  auto got = s3_->GetToFile("verify/a.frec", dir_ / "dst", wrong);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(got.status().message().find("expected " + wrong), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "dst"));  // nothing half-verified is left
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".part-"), std::string::npos) << e.path();
  }
}

TEST_F(S3ClientTest, WrongCredentialsGiveAClearError) {
  auto src = dir_ / "src";
  WriteRandomFile(src, 1000, 4);
  auto o = ClusterS3Options();
  o.secret_key = "definitely-not-the-secret-0123456789";
  auto bad = S3Client::Create(o);
  ASSERT_TRUE(bad.ok());
  Status st = (*bad)->PutFile("creds/a.frec", src);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(o.secret_key), std::string::npos);
  o = ClusterS3Options();
  o.access_key = "NOSUCHACCESSKEY";
  auto unknown = S3Client::Create(o);
  ASSERT_TRUE(unknown.ok());
  st = (*unknown)->PutFile("creds/a.frec", src);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("InvalidAccessKeyId"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(o.secret_key), std::string::npos);
}

TEST_F(S3ClientTest, BucketQuotaGivesAClearError) {
  auto o = ClusterS3Options();
  o.bucket = "quota-test";
  auto s3 = S3Client::Create(o);
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE((*s3)->CreateBucket().ok());
  ASSERT_EQ(RunToExit({"radosgw-admin", "-c", Cluster().conf, "quota", "set", "--bucket",
                       "quota-test", "--quota-scope=bucket", "--max-size=1048576"}),
            0);
  ASSERT_EQ(RunToExit({"radosgw-admin", "-c", Cluster().conf, "quota", "enable", "--bucket",
                       "quota-test", "--quota-scope=bucket"}),
            0);
  auto src = dir_ / "src";
  WriteRandomFile(src, 2 << 20, 5);
  Status st;
  // radosgw reads a bucket's quota through a cache; wait (bounded) until the
  // new quota is in force.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    st = (*s3)->PutFile("quota/a.frec", src);
    if (st.ok()) (void)(*s3)->Delete("quota/a.frec");
  } while (st.ok() && std::chrono::steady_clock::now() < deadline);
  ASSERT_FALSE(st.ok()) << "quota never enforced";
  EXPECT_EQ(st.code(), StatusCode::kNoSpace) << st.message();
  EXPECT_NE(st.message().find("QuotaExceeded"), std::string::npos) << st.message();
}

TEST_F(S3ClientTest, BandwidthCapIsHonoured) {
  auto src = dir_ / "src";
  WriteRandomFile(src, 2 << 20, 6);
  auto o = ClusterS3Options();
  o.max_send_bytes_per_sec = 1 << 20;
  auto slow = S3Client::Create(o);
  ASSERT_TRUE(slow.ok());
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE((*slow)->PutFile("cap/a.frec", src).ok());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // 2 MiB at 1 MiB/s: curl paces to the cap (its first burst may run ahead).
  EXPECT_GE(s, 1.5) << "2 MiB uploaded in " << s << " s at a 1 MiB/s cap";
  ASSERT_TRUE((*slow)->Delete("cap/a.frec").ok());
}

}  // namespace
}  // namespace flightrec::testing
