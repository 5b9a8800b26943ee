// Fleet mode with its endpoint down: retention keeps records until they are
// shipped, but only up to a bound per user and in total, so that one user's
// crashes cannot fill the store's filesystem and cost root its next crash.
// Before that bound, 40 records of 1 MiB by uid 65534 filled a 32 MiB store
// (max-use 3.2 MiB) and every later commit, root's too, failed with ENOSPC.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "recorder/fleet/shipper.h"
#include "store/store.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

// A loopback port that refuses connections (bound, never listening) for as
// long as the object lives: the fleet endpoint is down.
class RefusingPort {
 public:
  RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  int port() const { return port_; }

 private:
  ScopedFd fd_;
  int port_ = 0;
};

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

TEST(FleetStall, OneUsersUnshippedRecordsCannotFillTheStore) {
  TempDir tmp;
  const std::string dir = tmp.path();
  ScopedTmpfs fs(dir + "/store", "size=32m,mode=0700");
  ASSERT_TRUE(fs.ok()) << "mounting a tmpfs needs root";
  RefusingPort down;
  ASSERT_NE(down.port(), 0);
  std::ofstream(dir + "/credentials") << "S3AccessKey=ak\nS3SecretKey=sk\n";
  chmod((dir + "/credentials").c_str(), 0600);
  std::ofstream(dir + "/fleet.conf")
      << "[Fleet]\nHostId=host-stall\nCredentialsFile=credentials\n"
      << "[S3]\nEndpoint=http://127.0.0.1:" << down.port() << "\nBucket=b\n";
  Daemon d(dir, {"--fleet", dir + "/fleet.conf"});
  ASSERT_TRUE(d.ready()) << d.Log();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(fleet::JournalPath(d.store())); },
                      std::chrono::seconds(20)));

  // The store as the core hook opens it: default retention on every commit.
  auto s = store::Store::Open(d.store());
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::mt19937_64 rng(16);
  constexpr size_t kSize = 1 << 20;      // incompressible, like a core
  ::testing::internal::CaptureStderr();  // the store's log lines
  for (int i = 0; i < 40; ++i) {
    auto row =
        store::testing::WriteSmallRecord(**s, RandomBytes(kSize, rng), {{"owner_uid", 65534}});
    if (!row.ok()) std::fputs(::testing::internal::GetCapturedStderr().c_str(), stderr);
    ASSERT_TRUE(row.ok()) << "record " << i << " of uid 65534: " << row.status().message();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("removed record"), std::string::npos) << log;
  EXPECT_NE(log.find("before the fleet confirmed it"), std::string::npos) << log;
  auto root = store::testing::WriteSmallRecord(**s, RandomBytes(kSize, rng), {{"owner_uid", 0}});
  ASSERT_TRUE(root.ok()) << "root's record: " << root.status().message();
  EXPECT_TRUE(std::filesystem::exists(d.store() + "/" + root->file));

  auto lim = (*s)->EffectiveLimits({});
  ASSERT_TRUE(lim.ok());
  auto total = (*s)->TotalBytes();
  ASSERT_TRUE(total.ok());
  EXPECT_LE(*total, *lim->max_unshipped_use);
  auto all = (*s)->List({});
  ASSERT_TRUE(all.ok());
  uint64_t nobody = 0;
  for (const auto& r : *all) nobody += r.owner_uid == 65534 ? r.file_size : 0;
  EXPECT_GT(nobody, 0u) << "uid 65534's newest record is kept";
  EXPECT_LE(nobody, *lim->max_unshipped_use_per_uid);

  // Counted where the administrator looks: `recorder status`.
  auto evicted = store::ReadUnshippedEvictions(d.store());
  ASSERT_TRUE(evicted.ok()) << evicted.status().message();
  EXPECT_GE(evicted->records, 30u);
  auto st = d.Cli({"status", "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  auto j = nlohmann::json::parse(st.out);
  EXPECT_EQ(j["fleet"].value("unshipped_evicted_records", uint64_t{0}), evicted->records) << st.out;
  EXPECT_EQ(j["fleet"].value("unshipped_evicted_bytes", uint64_t{0}), evicted->bytes) << st.out;
  auto text = d.Cli({"status"});
  EXPECT_NE(text.out.find(std::to_string(evicted->records) + " unshipped records"),
            std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace flightrec::testing
