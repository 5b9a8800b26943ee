// Fleet mode end to end, with the real engines: three recorderd --fleet
// (three host ids, three stores) ship real dumps and real crash records to
// the shared Ceph cluster's radosgw (ceph_fixture.h) and index them in one
// real PostgreSQL 15 (fleet_pg_server.h), both started once for the binary.
// Then the fleet is queried with the built `recorder`, as a user would.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "coredump-hook/coredump.h"
#include "recorder/fleet/fleet_index.h"
#include "recorder/fleet/shipper.h"
#include "store/store.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_pg_server.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/fleet/real_crash.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

using Json = nlohmann::json;

struct Host {
  std::string name, dir, config;
  std::unique_ptr<Daemon> daemon;
  std::vector<std::string> ids;  // records committed in its store
};

// Writes HOST's config and root-only credentials file under `dir`.
std::string WriteFleetConfig(const std::string& dir, const std::string& host,
                             const std::string& conninfo, const std::string& pg_password,
                             const std::string& s3_secret) {
  const std::string cred = dir + "/credentials";
  std::ofstream(cred) << "S3AccessKey=" << Cluster().access_key << "\nS3SecretKey=" << s3_secret
                      << "\nPostgresPassword=" << pg_password << "\n";
  chmod(cred.c_str(), 0600);
  const std::string conf = dir + "/fleet.conf";
  std::ofstream(conf) << "[Fleet]\nHostId=" << host << "\nCredentialsFile=" << cred
                      << "\nCacheDir=" << dir << "/cache\n[S3]\nEndpoint=" << Cluster().endpoint
                      << "\nBucket=" << Cluster().bucket << "\n[PostgreSQL]\nConnInfo=" << conninfo
                      << "\n";
  return conf;
}

bool JournalHas(const Host& h) {
  auto j = fleet::ReadJournal(h.daemon->store());
  if (!j.ok()) return false;
  for (const auto& id : h.ids) {
    if (!j->count(id)) return false;
  }
  return true;
}

// Each record of each host is once in the journal, once in the bucket and
// once in the index, with the local file's SHA-256 and size.
void ExpectExactlyOnce(const std::vector<Host>& hosts, const std::string& conninfo) {
  auto s3 = fleet::S3Client::Create(ClusterS3Options());
  ASSERT_TRUE(s3.ok());
  size_t total = 0;
  for (const auto& h : hosts) {
    std::string journal = ReadFile(fleet::JournalPath(h.daemon->store()).string());
    EXPECT_EQ(static_cast<size_t>(std::count(journal.begin(), journal.end(), '\n')), h.ids.size())
        << h.name << ":\n"
        << journal;
    for (const auto& id : h.ids) {
      ++total;
      auto local = fleet::DigestFile(h.daemon->store() + "/" + id + ".frec");
      ASSERT_TRUE(local.ok());
      auto key = fleet::ObjectKeyFor(h.name, id);
      ASSERT_TRUE(key.ok());
      auto head = (*s3)->Head(*key);
      ASSERT_TRUE(head.ok() && head->has_value()) << *key;
      EXPECT_EQ((*head)->sha256, local->sha256_hex) << *key;
      EXPECT_EQ((*head)->size, local->size) << *key;
      EXPECT_EQ(PgScalar(conninfo, fmt::format("SELECT count(*) || ' ' || min(sha256) || ' ' || "
                                               "min(bytes) || ' ' || min(object_key) FROM records "
                                               "WHERE host_id = '{}' AND record_id = '{}'",
                                               h.name, id)),
                fmt::format("1 {} {} {}", local->sha256_hex, local->size, *key));
    }
  }
  EXPECT_EQ(PgScalar(conninfo, "SELECT count(*) FROM records"), std::to_string(total));
}

TEST(FleetEndToEnd, ThreeHostsShipOnceGroupCrashesAndReportFromTheFleet) {
  auto db = SharedPgServer().CreateDatabase("e2e");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  TempDir tmp;
  std::vector<Host> hosts(3);
  const char* names[] = {"host-a", "host-b", "host-c"};
  for (int i = 0; i < 3; ++i) {
    Host& h = hosts[i];
    h.name = names[i];
    h.dir = tmp.path() + "/" + h.name;
    std::filesystem::create_directories(h.dir);
    h.config =
        WriteFleetConfig(h.dir, h.name, *db, SharedPgServer().password(), Cluster().secret_key);
    h.daemon = std::make_unique<Daemon>(h.dir, std::vector<std::string>{"--fleet", h.config});
    ASSERT_TRUE(h.daemon->ready()) << h.daemon->Log();
  }
  // A real dump and a real crash on each host.
  for (auto& h : hosts) {
    auto r = h.daemon->Cli({"dump", "--last", "2s", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    h.ids.push_back(Json::parse(r.out).value("id", ""));
    ASSERT_FALSE(h.ids.back().empty()) << r.out;
    h.ids.push_back(CommitRealCrash(tmp.path(), h.daemon->store(), h.name).id);
    ASSERT_FALSE(h.ids.back().empty());
  }
  for (auto& h : hosts) {
    ASSERT_TRUE(WaitFor([&] { return JournalHas(h); }, std::chrono::seconds(120)))
        << h.name << "\n"
        << h.daemon->Log();
  }
  ExpectExactlyOnce(hosts, *db);

  // One program's crash on three hosts is one signature.
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--fleet", hosts[0].config, "crash",
                       "list", "--group", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json groups = Json::parse(r.out);
  ASSERT_EQ(groups.size(), 1u) << r.out;
  EXPECT_EQ(groups[0]["crashes"], 3);
  EXPECT_EQ(groups[0]["hosts"], 3);

  // A report fetched from the fleet (by host b's record, from host a's
  // config: another machine) is the local one, byte for byte.
  const Host& b = hosts[1];
  for (const std::string cmd : {"report", "script", "timeline"}) {
    for (bool json : {false, true}) {
      std::vector<std::string> args = {cmd, b.ids[0]};
      if (cmd == "timeline") args.insert(args.end(), {"--bins", "20"});
      if (json) args.push_back("--json");
      auto local = b.daemon->Cli(args);
      ASSERT_EQ(local.exit_code, 0) << local.err;
      std::vector<std::string> fa = {BuildPath("recorder/cli/recorder"), "--fleet",
                                     hosts[0].config};
      fa.insert(fa.end(), args.begin(), args.end());
      auto remote = RunCommand(fa);
      ASSERT_EQ(remote.exit_code, 0) << remote.err;
      EXPECT_FALSE(local.out.empty());
      EXPECT_EQ(remote.out, local.out) << cmd << (json ? " --json" : "");
    }
  }
  // The fetched copy is cached under CacheDir= with the index's checksum.
  bool cached = false;
  for (const auto& e : std::filesystem::directory_iterator(hosts[0].dir + "/cache")) {
    if (e.path().filename().string().rfind(b.ids[0], 0) == 0) {
      cached =
          ReadFile(e.path().string()) == ReadFile(b.daemon->store() + "/" + b.ids[0] + ".frec");
    }
  }
  EXPECT_TRUE(cached);

  // PostgreSQL restarted mid-run: the records dumped while it is down are
  // confirmed only once their rows exist; none lost, none twice.
  ASSERT_TRUE(SharedPgServer().Stop().ok());
  for (auto& h : hosts) {
    auto d = h.daemon->Cli({"dump", "--last", "1s", "--json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;  // recording goes on
    h.ids.push_back(Json::parse(d.out).value("id", ""));
  }
  for (auto& h : hosts) {
    ASSERT_TRUE(WaitFor(
        [&] { return h.daemon->Log().find("fleet index (PostgreSQL)") != std::string::npos; },
        std::chrono::seconds(60)))
        << h.daemon->Log();
    auto j = fleet::ReadJournal(h.daemon->store());
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->count(h.ids.back()), 0u) << "confirmed without its index row";
  }
  ASSERT_TRUE(SharedPgServer().Launch().ok());
  for (auto& h : hosts) {
    ASSERT_TRUE(WaitFor([&] { return JournalHas(h); }, std::chrono::seconds(120)))
        << h.name << "\n"
        << h.daemon->Log();
  }
  ExpectExactlyOnce(hosts, *db);

  for (auto& h : hosts) {
    EXPECT_TRUE(h.daemon->StopWithin(std::chrono::seconds(20)));
    const std::string log = h.daemon->Log();
    EXPECT_EQ(log.find(Cluster().secret_key), std::string::npos) << "S3 secret logged";
    EXPECT_EQ(log.find(SharedPgServer().password()), std::string::npos) << "PG password logged";
  }
}

// A wrong PostgreSQL password: a clear error in the daemon's log, nothing
// confirmed (the object alone is not enough), and dumps still succeed.
TEST(FleetEndToEnd, WrongPostgresPasswordIsAClearErrorAndRecordingGoesOn) {
  auto db = SharedPgServer().CreateDatabase("e2e_badpw");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  TempDir tmp;
  const std::string conf =
      WriteFleetConfig(tmp.path(), "host-badpw", *db, "not-the-password", Cluster().secret_key);
  Daemon d(tmp.path(), {"--fleet", conf});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto r = d.Cli({"dump", "--last", "1s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(
      WaitFor([&] { return d.Log().find("password authentication failed") != std::string::npos; },
              std::chrono::seconds(60)))
      << d.Log();
  EXPECT_NE(d.Log().find("fleet index (PostgreSQL)"), std::string::npos) << d.Log();
  r = d.Cli({"dump", "--last", "1s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = fleet::ReadJournal(d.store());
  EXPECT_TRUE(!j.ok() || j->empty());
  EXPECT_TRUE(d.StopWithin(std::chrono::seconds(20)));
  EXPECT_EQ(d.Log().find("not-the-password"), std::string::npos) << "password logged";
}

// A wrong S3 secret: the gateway's refusal is in the log, dumps go on.
TEST(FleetEndToEnd, WrongS3CredentialIsAClearErrorAndRecordingGoesOn) {
  auto db = SharedPgServer().CreateDatabase("e2e_bads3");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  TempDir tmp;
  const std::string conf = WriteFleetConfig(tmp.path(), "host-bads3", *db,
                                            SharedPgServer().password(), "wrong-secret-key");
  Daemon d(tmp.path(), {"--fleet", conf});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto r = d.Cli({"dump", "--last", "1s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitFor([&] { return d.Log().find("SignatureDoesNotMatch") != std::string::npos; },
                      std::chrono::seconds(60)))
      << d.Log();
  r = d.Cli({"dump", "--last", "1s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(d.StopWithin(std::chrono::seconds(20)));
  EXPECT_EQ(d.Log().find("wrong-secret-key"), std::string::npos) << "secret logged";
}

}  // namespace
}  // namespace flightrec::testing
