#include "recorder/fleet/fleet_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/files.h"

namespace flightrec::fleet {
namespace {

constexpr const char* kSecret = "s3cr3t-VALUE-never-shown";
constexpr const char* kPgSecret = "pg-PASSWORD-never-shown";

class FleetConfigTest : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& name, const std::string& text, mode_t mode) {
    auto p = dir_ / name;
    std::ofstream(p) << text;
    chmod(p.c_str(), mode);
    return p;
  }
  std::filesystem::path GoodCredentials(mode_t mode = 0600) {
    return Write("credentials",
                 std::string("# fleet secrets\nS3AccessKey=AKIDTEST\nS3SecretKey=") + kSecret +
                     "\nPostgresPassword=" + kPgSecret + "\n",
                 mode);
  }
  std::filesystem::path Config(const std::string& extra = "") {
    return Write("fleet.conf",
                 "[Fleet]\nHostId=host-a\nCredentialsFile=credentials\nMaxUploadRate=10M\n"
                 "CacheDir=/var/cache/flightrec-fleet\n"
                 "[S3]\nEndpoint=http://127.0.0.1:7480/\nBucket=records\n"
                 "[PostgreSQL]\nConnInfo=host=127.0.0.1 dbname=flightrec user=flightrec\n" +
                     extra,
                 0644);
  }
  static void ExpectNoSecret(const Status& st) {
    EXPECT_EQ(st.message().find(kSecret), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find(kPgSecret), std::string::npos) << st.message();
  }

  flightrec::testing::TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path();
};

TEST_F(FleetConfigTest, LoadsEveryKey) {
  GoodCredentials();
  auto c = LoadFleetConfig(Config());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->host_id, "host-a");
  EXPECT_EQ(c->s3_endpoint, "http://127.0.0.1:7480");  // trailing '/' dropped
  EXPECT_EQ(c->s3_bucket, "records");
  EXPECT_EQ(c->s3_region, "us-east-1");
  EXPECT_EQ(c->s3_access_key, "AKIDTEST");
  EXPECT_EQ(c->s3_secret_key, kSecret);
  EXPECT_EQ(c->pg_password, kPgSecret);
  EXPECT_EQ(c->pg_conninfo, "host=127.0.0.1 dbname=flightrec user=flightrec");
  EXPECT_EQ(c->max_upload_bytes_per_sec, 10u << 20);
  EXPECT_EQ(c->cache_dir, "/var/cache/flightrec-fleet");
}

TEST_F(FleetConfigTest, RetryDelayAndTimeoutAreDurationsWithinBounds) {
  GoodCredentials();
  auto c = LoadFleetConfig(Config());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->retry_max_delay_ms, 60'000);  // the defaults
  EXPECT_EQ(c->s3_timeout_s, 30);
  c = LoadFleetConfig(Config("[Fleet]\nRetryMaxDelay=2500ms\n[S3]\nTimeout=4s\n"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->retry_max_delay_ms, 2500);
  EXPECT_EQ(c->s3_timeout_s, 4);
  for (const char* bad : {"[S3]\nTimeout=0s\n", "[S3]\nTimeout=2d\n",
                          "[Fleet]\nRetryMaxDelay=10ms\n", "[Fleet]\nRetryMaxDelay=soon\n"}) {
    auto r = LoadFleetConfig(Config(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("fleet.conf:"), std::string::npos) << r.status().message();
  }
}

TEST_F(FleetConfigTest, RefusesCredentialsReadableByOthers) {
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    GoodCredentials(mode);
    auto c = LoadFleetConfig(Config());
    ASSERT_FALSE(c.ok()) << std::oct << mode;
    EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(c.status().message().find("chmod 600"), std::string::npos) << c.status().message();
    ExpectNoSecret(c.status());
  }
}

TEST_F(FleetConfigTest, RefusesCredentialsNotOwnedByRoot) {
  GoodCredentials();
  ASSERT_EQ(chown((dir_ / "credentials").c_str(), 65534, 65534), 0) << "tests run as root";
  auto c = LoadFleetConfig(Config());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(c.status().message().find("owned by root"), std::string::npos);
  ExpectNoSecret(c.status());
}

TEST_F(FleetConfigTest, RefusesASymlinkedCredentialsFile) {
  GoodCredentials();
  std::filesystem::create_symlink(dir_ / "credentials", dir_ / "link");
  auto cfg = Write("fleet.conf",
                   "[Fleet]\nHostId=h\nCredentialsFile=link\n[S3]\n"
                   "Endpoint=http://x:1\nBucket=b\n",
                   0644);
  auto c = LoadFleetConfig(cfg);
  ASSERT_FALSE(c.ok());
  ExpectNoSecret(c.status());
}

TEST_F(FleetConfigTest, MissingKeysAreNamed) {
  GoodCredentials();
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"[Fleet]\nHostId=h\nCredentialsFile=credentials\n[S3]\nBucket=b\n", "Endpoint="},
      {"[Fleet]\nHostId=h\nCredentialsFile=credentials\n[S3]\nEndpoint=http://x:1\n", "Bucket="},
      {"[Fleet]\nHostId=h\n[S3]\nEndpoint=http://x:1\nBucket=b\n", "CredentialsFile="},
      {"[Fleet]\nHostId=h\nCredentialsFile=nope\n[S3]\nEndpoint=http://x:1\nBucket=b\n", "nope"},
      {"[Fleet]\nHostId=../etc\nCredentialsFile=credentials\n[S3]\nEndpoint=http://x:1\n"
       "Bucket=b\n",
       "HostId"},
      {"[Fleet]\nHostId=h\nCredentialsFile=credentials\n[S3]\nEndpoint=ftp://x\nBucket=b\n",
       "http://"},
      {"[Fleet]\nHostId=h\nCredentialsFile=credentials\nColour=blue\n",
       "fleet.conf:4: unknown key"},
  };
  for (const auto& k : cases) {
    auto c = LoadFleetConfig(Write("fleet.conf", k.text, 0644));
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_NE(c.status().message().find(k.expect), std::string::npos)
        << c.status().message() << " should mention " << k.expect;
  }
  Write("credentials", std::string("S3SecretKey=") + kSecret + "\n", 0600);
  auto c = LoadFleetConfig(Config());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("S3AccessKey="), std::string::npos) << c.status().message();
  ExpectNoSecret(c.status());
}

TEST_F(FleetConfigTest, SecretsNeverAppearInErrors) {
  // A malformed credentials line is not quoted (it may be a bare secret).
  Write("credentials", std::string("S3AccessKey=AK\n") + kSecret + "\n", 0600);
  auto c = LoadFleetConfig(Config());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("credentials:2"), std::string::npos) << c.status().message();
  ExpectNoSecret(c.status());
  // A secret put in the world-readable config is refused without echoing it.
  GoodCredentials();
  c = LoadFleetConfig(Config(std::string("[S3]\nS3SecretKey=") + kSecret + "\n"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("CredentialsFile"), std::string::npos);
  ExpectNoSecret(c.status());
  // So is a password in ConnInfo, keyword or URI form.
  for (std::string ci : {std::string("host=x password=") + kPgSecret,
                         std::string("postgresql://u:") + kPgSecret + "@h/db"}) {
    auto cfg = Write("fleet.conf",
                     "[Fleet]\nHostId=h\nCredentialsFile=credentials\n[S3]\nEndpoint=http://x:1\n"
                     "Bucket=b\n[PostgreSQL]\nConnInfo=" +
                         ci + "\n",
                     0644);
    c = LoadFleetConfig(cfg);
    ASSERT_FALSE(c.ok()) << ci;
    EXPECT_NE(c.status().message().find("PostgresPassword="), std::string::npos);
    ExpectNoSecret(c.status());
  }
}

}  // namespace
}  // namespace flightrec::fleet
