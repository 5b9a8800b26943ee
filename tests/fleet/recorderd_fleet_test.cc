// A real recorderd --fleet ships its dumps to the real radosgw, through a
// gateway killed mid-upload and restarted, and keeps recording meanwhile.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "recorder/fleet/shipper.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

std::vector<std::string> StoreRecordIds(const std::string& store) {
  std::vector<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator(store)) {
    std::string n = e.path().filename().string();
    if (n.size() > 5 && n.substr(n.size() - 5) == ".frec") ids.push_back(n.substr(0, n.size() - 5));
  }
  return ids;
}

TEST(RecorderdFleet, ShipsDumpsExactlyOnceThroughAGatewayRestart) {
  flightrec::testing::TempDir tmp;
  const std::string dir = tmp.path();
  std::ofstream(dir + "/credentials")
      << "S3AccessKey=" << Cluster().access_key << "\nS3SecretKey=" << Cluster().secret_key << "\n";
  chmod((dir + "/credentials").c_str(), 0600);
  // 32 KiB/s: a dump of a few hundred KiB is in flight for seconds.
  std::ofstream(dir + "/fleet.conf") << "[Fleet]\nHostId=host-e2e\nCredentialsFile=credentials\n"
                                     << "MaxUploadRate=32K\n[S3]\nEndpoint=" << Cluster().endpoint
                                     << "\nBucket=" << Cluster().bucket << "\n";
  Daemon d(dir, {"--fleet", dir + "/fleet.conf"});
  ASSERT_TRUE(d.ready()) << d.Log();

  auto r = d.Cli({"dump", "--last", "3s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitFor([&] { return d.Log().find("fleet: uploading") != std::string::npos; },
                      std::chrono::seconds(60)))
      << d.Log();
  ASSERT_EQ(RunToExit({ClusterScript(), "kill-rgw", Cluster().dir.string()}), 0);
  // The gateway is gone: recording and dumping go on.
  r = d.Cli({"dump", "--last", "2s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto status = d.Cli({"status", "--json"});
  EXPECT_EQ(status.exit_code, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return d.Log().find("[error] fleet: S3") != std::string::npos ||
               d.Log().find("error: fleet: S3") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << d.Log();
  ASSERT_EQ(RunToExit({ClusterScript(), "start-rgw", Cluster().dir.string()},
                      (Cluster().dir / "log" / "start-rgw.out").string()),
            0);

  auto ids = StoreRecordIds(d.store());
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = fleet::ReadJournal(d.store());
        return j.ok() && j->size() == 2;
      },
      std::chrono::seconds(180)))
      << d.Log();
  auto s3 = fleet::S3Client::Create(ClusterS3Options());
  ASSERT_TRUE(s3.ok());
  for (const auto& id : ids) {
    auto key = fleet::ObjectKeyFor("host-e2e", id);
    ASSERT_TRUE(key.ok());
    auto head = (*s3)->Head(*key);
    ASSERT_TRUE(head.ok() && head->has_value()) << *key;
    auto local = fleet::DigestFile(d.store() + "/" + id + ".frec");
    ASSERT_TRUE(local.ok());
    EXPECT_EQ((*head)->sha256, local->sha256_hex) << *key;
    EXPECT_EQ((*head)->size, local->size) << *key;
    // A fleet copy fetched back is byte for byte the local record.
    auto back = (*s3)->GetToFile(*key, dir + "/" + id + ".back");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(ReadFile(dir + "/" + id + ".back"), ReadFile(d.store() + "/" + id + ".frec"));
  }
  // Exactly once: one journal line per record.
  std::string journal = ReadFile(fleet::JournalPath(d.store()));
  EXPECT_EQ(std::count(journal.begin(), journal.end(), '\n'), 2) << journal;
  EXPECT_TRUE(d.StopWithin(std::chrono::seconds(20)));
  std::string log = d.Log();
  EXPECT_EQ(log.find(Cluster().secret_key), std::string::npos) << "the secret was logged";
  // What the shipper did, for the reader of the test log.
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("fleet:") != std::string::npos) std::printf("  recorderd: %s\n", line.c_str());
  }
}

}  // namespace
}  // namespace flightrec::testing
