// `recorder --fleet CONFIG crash list|info` as a user runs it: the built
// binary, a config file and a root-only credentials file, a real PostgreSQL
// 15 holding crashes indexed from crash records of three hosts.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coredump-hook/coredump.h"
#include "recorder/fleet/digest_pg.h"
#include "recorder/fleet/fleet_index.h"
#include "recorder/fleet/index_shipped_pg.h"
#include "store/store.h"
#include "tests/fleet/fleet_pg_server.h"
#include "tests/fleet/real_crash.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::fleet {
namespace {

using flightrec::testing::BuildPath;
using flightrec::testing::CommitRealCrash;
using flightrec::testing::RealCrash;
using flightrec::testing::RunCommand;
using flightrec::testing::SharedPgServer;
using Json = nlohmann::json;

using flightrec::testing::TempDir;

// A crash record as the hook writes one (meta, metadata, backtrace), in a
// host's store; returns its path and id.
std::pair<std::string, std::string> WriteCrash(const std::string& store_dir, const std::string& top,
                                               const std::string& exe,
                                               const Json& where = Json::object()) {
  auto st = store::Store::Open(store_dir, {});
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  auto rec = (*st)->BeginRecord("crash");
  Json frames = {{{"function", "__pthread_kill_implementation"}, {"dso", "/lib/libc.so.6"}},
                 {{"function", "raise"}, {"dso", "/lib/libc.so.6"}},
                 {{"function", "abort"}, {"dso", "/lib/libc.so.6"}},
                 {{"function", top}, {"dso", exe}},
                 {{"function", "main"}, {"dso", exe}}};
  Json bt = {{"threads", {{{"tid", 7}, {"frames", frames}}}}, {"crashing_tid", 7}};
  EXPECT_TRUE((*rec)->writer().AddSection("backtrace", bt.dump()).ok());
  EXPECT_TRUE((*rec)->writer().AddSection("metadata", Json{{"build_id", "0badc0de"}}.dump()).ok());
  Json meta = {{"crash",
                {{"pid", 7},
                 {"signal", 6},
                 {"signal_name", "SIGABRT"},
                 {"comm", "svc\x1b[31m"},  // a crashed program names itself
                 {"exe", exe}}},
               {"processes", {{{"pid", 7}, {"comm", "svc"}, {"exe", exe}}}}};
  meta["processes"][0].update(where);  // cgroup labels as the hook stores them
  auto row = (*st)->Commit(std::move(*rec), meta);
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return {store_dir + "/" + row->id + ".frec", row->id};
}

class FleetCliPgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    auto db = SharedPgServer().CreateDatabase(fmt::format("cli_{}", ++n));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto idx = FleetIndex::Connect(*db, SharedPgServer().password());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    index_ = std::make_unique<FleetIndex>(std::move(*idx));
    ASSERT_TRUE(index_->Migrate().ok());
    config_ = tmp_.path() + "/fleet.conf";
    WriteConfig(*db, SharedPgServer().password());
  }

  void WriteConfig(const std::string& conninfo, const std::string& password) {
    const std::string cred = tmp_.path() + "/credentials";
    std::ofstream(config_) << "[Fleet]\nHostId=cli-host\nCredentialsFile=" << cred
                           << "\n[S3]\nEndpoint=http://127.0.0.1:1\nBucket=unused\n"
                           << "[PostgreSQL]\nConnInfo=" << conninfo << "\n";
    unlink(cred.c_str());
    std::ofstream(cred) << "S3AccessKey=a\nS3SecretKey=b\nPostgresPassword=" << password << "\n";
    chmod(cred.c_str(), 0600);
  }

  // Indexes one crash of `top` on `host` through the shipper's entry point.
  std::string Ship(const std::string& host, const std::string& top,
                   const std::string& exe = "/usr/sbin/svc", const Json& where = Json::object()) {
    const std::string store = tmp_.path() + "/store-" + host;
    auto [path, id] = WriteCrash(store, top, exe, where);
    auto sum = Sha256FileHex(path);
    EXPECT_TRUE(sum.ok());
    ShippedRecord s{host, id, host + "/" + id + ".frec", *sum, std::filesystem::file_size(path),
                    path};
    auto added = IndexShippedRecord(*index_, s);
    EXPECT_TRUE(added.ok()) << added.status().ToString();
    EXPECT_TRUE(added.ok() && *added);
    auto again = IndexShippedRecord(*index_, s);
    EXPECT_TRUE(again.ok() && !*again) << "a second on_uploaded for one record adds nothing";
    return id;
  }

  ::flightrec::testing::RunResult Recorder(std::vector<std::string> args) {
    args.insert(args.begin(), {BuildPath("recorder/cli/recorder"), "--fleet", config_});
    return RunCommand(args);
  }

  TempDir tmp_;
  std::string config_;
  std::unique_ptr<FleetIndex> index_;
};

TEST_F(FleetCliPgTest, OneBugOnThreeHostsIsOneGroup) {
  Ship("host-a", "check_header");
  Ship("host-b", "check_header", "/opt/svc/bin/svc");
  Ship("host-c", "check_header");
  const std::string other = Ship("host-c", "flush_queue");
  auto r = Recorder({"crash", "list", "--group", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json groups = Json::parse(r.out);
  ASSERT_EQ(groups.size(), 2u) << r.out;
  EXPECT_EQ(groups[0]["crashes"], 3);
  EXPECT_EQ(groups[0]["hosts"], 3);
  EXPECT_EQ(groups[0]["title"], "SIGABRT in check_header ← main (svc)");
  EXPECT_EQ(groups[1]["crashes"], 1);
  EXPECT_EQ(groups[1]["latest"], "host-c/" + other);
  // Text: one line per group, escaped.
  r = Recorder({"crash", "list", "--group"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SIGABRT in check_header ← main (svc)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SIGNATURE"), std::string::npos);
  // The flat list, and its filters.
  r = Recorder({"crash", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), 4u);
  r = Recorder({"crash", "list", "--host", "host-c", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), 2u);
  r = Recorder({"crash", "list", "--since", "1h", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), 4u) << "written just now";
  r = Recorder({"crash", "list", "--since", "2099-01-01T00:00:00Z", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), 0u);
  r = Recorder({"crash", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A crashed program's control bytes are replaced before they are stored.
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("svc?[31m"), std::string::npos) << r.out;
}

TEST_F(FleetCliPgTest, CrashesAreFoundByTheUnitContainerAndCgroupTheyRanIn) {
  const std::string docker_id(64, 'c');
  const std::string unit_id =
      Ship("host-a", "check_header", "/usr/sbin/svc",
           {{"cgroup", "/system.slice/svc.service"}, {"unit", "svc.service"}});
  const std::string docker = Ship("host-b", "check_header", "/usr/sbin/svc",
                                  {{"cgroup", "/system.slice/docker-" + docker_id + ".scope"},
                                   {"unit", "docker-" + docker_id + ".scope"},
                                   {"container_runtime", "docker"},
                                   {"container_id", docker_id}});
  Ship("host-c", "check_header");  // ran nowhere known
  const auto ids = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"crash", "list", "--json"});
    auto r = Recorder(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> out;
    for (const auto& c : Json::parse(r.out, nullptr, false)) out.push_back(c["id"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids({"--unit", "svc.service"}), V{unit_id});
  EXPECT_EQ(ids({"--container", docker_id.substr(0, 12)}), V{docker});
  EXPECT_EQ(ids({"--container", "docker://" + docker_id}), V{docker});
  EXPECT_EQ(ids({"--cgroup", "/system.slice"}).size(), 2u);
  EXPECT_EQ(ids({"--cgroup", "/system.slice/svc.service/"}), V{unit_id});
  EXPECT_EQ(ids({"--cgroup", "/system.sl"}), V{}) << "a subtree, not a string prefix";
  EXPECT_EQ(ids({"--unit", "other.service"}), V{});
  auto r = Recorder({"crash", "list", "--group", "--json", "--unit", "svc.service"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).at(0)["crashes"], 1);
  // The text list names the container (docker ps's short id) or the unit.
  r = Recorder({"crash", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("docker://" + docker_id.substr(0, 12)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("svc.service"), std::string::npos) << r.out;
  r = Recorder({"crash", "info", docker, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json info = Json::parse(r.out);
  EXPECT_EQ(info["crash"]["container_id"], docker_id);
  EXPECT_EQ(info["crash"]["unit"], "docker-" + docker_id + ".scope");
  EXPECT_EQ(info["processes"][0]["container_runtime"], "docker");
}

TEST_F(FleetCliPgTest, CrashInfoShowsTheCrashItsGroupAndItsObject) {
  Ship("host-a", "check_header");
  const std::string id = Ship("host-b", "check_header");
  auto r = Recorder({"crash", "info", "host-b/" + id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["host"], "host-b");
  EXPECT_EQ(j["crash"]["signal_name"], "SIGABRT");
  EXPECT_EQ(j["crash"]["build_id"], "0badc0de");
  EXPECT_EQ(j["group"]["crashes"], 2);
  EXPECT_EQ(j["group"]["hosts"], 2);
  EXPECT_EQ(j["signature"]["frames"][0]["function"], "check_header");
  EXPECT_EQ(j["object"]["key"], "host-b/" + id + ".frec");
  r = Recorder({"crash", "info", "host-b/" + id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 crashes on 2 hosts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#0 check_header (svc)"), std::string::npos) << r.out;
  r = Recorder({"crash", "info", "20000101T000000Z-000000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no crash '20000101T000000Z-000000' in the fleet index"), std::string::npos)
      << r.err;
}

TEST_F(FleetCliPgTest, FailuresSayWhatToFixAndNeverShowTheSecret) {
  WriteConfig(SharedPgServer().ConnInfo(), "wrong-secret-value");
  auto r = Recorder({"crash", "list"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("PostgreSQL refused the credentials"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("wrong-secret-value"), std::string::npos) << r.err;
  // An empty database: the daemon creates the schema, the CLI does not.
  auto empty = SharedPgServer().CreateDatabase("cli_empty");
  ASSERT_TRUE(empty.ok());
  WriteConfig(*empty, SharedPgServer().password());
  r = Recorder({"crash", "list"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no schema yet"), std::string::npos) << r.err;
  // A credentials file others can read is refused.
  chmod((tmp_.path() + "/credentials").c_str(), 0644);
  r = Recorder({"crash", "list"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("credentials file"), std::string::npos) << r.err;
  r = Recorder({"crash", "list", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--group"), std::string::npos) << r.out;
}

// Real crashes (tests/fleet/real_crash.h: gdb's core of fr_crash, unwound by
// the hook's own unwinder, committed as a crash record): three hosts'
// crashes of one bug, shipped to the index, are one group.
TEST_F(FleetCliPgTest, RealCrashesOfOneProgramOnThreeHostsAreOneSignature) {
  for (const std::string host : {"host-a", "host-b", "host-c"}) {
    const std::string store = tmp_.path() + "/store-" + host;
    const RealCrash made = CommitRealCrash(tmp_.path(), store, host);
    ASSERT_TRUE(made.backtrace.contains("threads")) << made.backtrace.dump();
    ASSERT_FALSE(made.id.empty());
    const std::string path = store + "/" + made.id + ".frec";
    auto reader = store::RecordReader::Open(path);
    ASSERT_TRUE(reader.ok());
    auto crash = CrashFromRecord(**reader);
    ASSERT_TRUE(crash.ok()) << crash.status().ToString();
    // The NULL store in crash_here, called from main (tests/programs/fr_crash.c).
    ASSERT_GE(crash->signature.frames.size(), 2u)
        << crash->signature.title << made.backtrace.dump();
    EXPECT_EQ(crash->signature.frames[0], (SignatureFrame{"crash_here", "fr_crash"}));
    EXPECT_EQ(crash->signature.frames[1], (SignatureFrame{"main", "fr_crash"}));
    auto sum = Sha256FileHex(path);
    ASSERT_TRUE(sum.ok());
    ShippedRecord s{
        host, made.id, host + "/" + made.id + ".frec", *sum, std::filesystem::file_size(path),
        path};
    auto added = IndexShippedRecord(*index_, s);
    ASSERT_TRUE(added.ok()) << added.status().ToString();
  }
  auto r = Recorder({"crash", "list", "--group", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json groups = Json::parse(r.out);
  ASSERT_EQ(groups.size(), 1u) << r.out;
  EXPECT_EQ(groups[0]["crashes"], 3);
  EXPECT_EQ(groups[0]["hosts"], 3);
  EXPECT_EQ(groups[0]["title"].get<std::string>().rfind("SIGSEGV in crash_here ← main", 0), 0u)
      << r.out;
}

}  // namespace
}  // namespace flightrec::fleet
