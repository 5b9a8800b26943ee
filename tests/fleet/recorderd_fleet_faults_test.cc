// Faults at the daemon level (issue 16, item 4): a real recorderd --fleet
// ships to the shared Ceph cluster's radosgw (ceph_fixture.h) and indexes in
// the shared PostgreSQL 15 (fleet_pg_server.h) while
//   * the gateway is partitioned away for 30 s (SIGSTOP: connections are
//     still accepted by the kernel, nothing answers, as behind a dropping
//     firewall), with a crash record committed by the real core hook
//     (recorder-coredump, run as the kernel runs it, without core_pattern)
//     meanwhile;
//   * PostgreSQL restarts under the shipper's open connection;
//   * the bucket's quota is full, then raised.
// Each time: retries with backoff (seen in `recorder status`), recording and
// local commits go on, nothing deleted locally, no record lost or twice.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recorder/fleet/shipper.h"
#include "tests/fleet/ceph_fixture.h"
#include "tests/fleet/fleet_pg_server.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Polls `cond` every 100 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// `recorder status --json`'s "fleet" object (null if the call failed).
Json FleetStatus(const Daemon& d) {
  auto r = d.Cli({"status", "--json"});
  if (r.exit_code != 0) return Json();
  Json j = Json::parse(r.out, nullptr, false);
  return j.is_object() && j.contains("fleet") ? j["fleet"] : Json();
}

// Waits (bounded) until the fleet status satisfies `pred`; *f is the last
// one read. The journal is written before the counters move, so a test
// that saw the journal reads the counters this way.
bool WaitForStatus(const Daemon& d, const std::function<bool(const Json&)>& pred, Json* f,
                   std::chrono::seconds timeout = std::chrono::seconds(30)) {
  return WaitFor(
      [&] {
        *f = FleetStatus(d);
        return f->is_object() && pred(*f);
      },
      timeout);
}

std::string DumpId(const Daemon& d) {
  auto r = d.Cli({"dump", "--last", "1s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  return Json::parse(r.out).value("id", "");
}

bool Confirmed(const Daemon& d, const std::vector<std::string>& ids) {
  auto j = fleet::ReadJournal(d.store());
  if (!j.ok()) return false;
  for (const auto& id : ids) {
    if (!j->count(id)) return false;
  }
  return true;
}

size_t JournalLines(const Daemon& d) {
  std::string s = ReadFile(fleet::JournalPath(d.store()));
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Each id once in the journal, once in `bucket` with the local file's
// SHA-256 and size, and (with a conninfo) once in the index.
void ExpectExactlyOnce(const Daemon& d, const std::string& host, const std::string& bucket,
                       const std::vector<std::string>& ids, const std::string& conninfo) {
  auto o = ClusterS3Options();
  o.bucket = bucket;
  auto s3 = fleet::S3Client::Create(o);
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(JournalLines(d), ids.size()) << ReadFile(fleet::JournalPath(d.store()));
  for (const auto& id : ids) {
    auto local = fleet::DigestFile(d.store() + "/" + id + ".frec");
    ASSERT_TRUE(local.ok()) << id << " is gone from the local store";
    auto key = fleet::ObjectKeyFor(host, id);
    ASSERT_TRUE(key.ok());
    auto head = (*s3)->Head(*key);
    ASSERT_TRUE(head.ok() && head->has_value()) << *key;
    EXPECT_EQ((*head)->sha256, local->sha256_hex) << *key;
    EXPECT_EQ((*head)->size, local->size) << *key;
    if (conninfo.empty()) continue;
    EXPECT_EQ(PgScalar(conninfo, fmt::format("SELECT count(*) || ' ' || min(sha256) FROM records "
                                             "WHERE host_id = '{}' AND record_id = '{}'",
                                             host, id)),
              "1 " + local->sha256_hex)
        << id;
  }
  if (!conninfo.empty()) {
    EXPECT_EQ(PgScalar(conninfo, "SELECT count(*) FROM records"), std::to_string(ids.size()));
  }
}

std::string WriteConfig(const std::string& dir, const std::string& host, const std::string& bucket,
                        const std::string& conninfo, const std::string& extra) {
  const std::string cred = dir + "/credentials";
  std::ofstream(cred) << "S3AccessKey=" << Cluster().access_key
                      << "\nS3SecretKey=" << Cluster().secret_key
                      << "\nPostgresPassword=" << SharedPgServer().password() << "\n";
  chmod(cred.c_str(), 0600);
  const std::string conf = dir + "/fleet.conf";
  std::ofstream out(conf);
  out << "[Fleet]\nHostId=" << host << "\nCredentialsFile=" << cred << "\n"
      << extra << "[S3]\nEndpoint=" << Cluster().endpoint << "\nBucket=" << bucket
      << "\nTimeout=3s\n";
  if (!conninfo.empty()) out << "[PostgreSQL]\nConnInfo=" << conninfo << "\n";
  return conf;
}

// Puts the gateway back however the test ends.
struct GatewayPause {
  GatewayPause() {
    paused = RunToExit({ClusterScript(), "pause-rgw", Cluster().dir.string()}) == 0;
  }
  bool Resume() {
    if (!paused) return true;
    paused = false;
    return RunToExit({ClusterScript(), "resume-rgw", Cluster().dir.string()},
                     (Cluster().dir / "log" / "resume-rgw.out").string()) == 0;
  }
  ~GatewayPause() { Resume(); }
  bool paused = false;
};

// The real core hook, as the kernel runs it (the pattern's "--" and values),
// for a live process `pid` whose core (gcore) is on its stdin: it asks
// `d` for the history and commits the crash record into d's store itself.
// Returns the crash record's id ("" if none was stored).
std::string RunCoreHook(const Daemon& d, pid_t pid, const std::string& core,
                        const std::string& err) {
  std::vector<std::string> args = {BuildPath("coredump-hook/recorder-coredump"),
                                   "--config",
                                   "/nonexistent",
                                   "--store",
                                   d.store(),
                                   "--socket",
                                   d.sock(),
                                   "--",
                                   std::to_string(pid),
                                   std::to_string(pid),
                                   std::to_string(pid),
                                   "11",
                                   std::to_string(time(nullptr)),
                                   "-1",
                                   "0",
                                   "0",
                                   "1",
                                   "sleep"};
  pid_t child = fork();
  if (child == 0) {
    int in = open(core.c_str(), O_RDONLY);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || e < 0) _exit(126);
    dup2(in, 0);
    dup2(e, 2);
    ExecAs(std::nullopt, args);
  }
  int st = 0;
  waitpid(child, &st, 0);
  std::string log = ReadFile(err);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << log;
  size_t at = log.find("stored as ");
  EXPECT_NE(at, std::string::npos) << log;
  return at == std::string::npos ? "" : log.substr(at + 10, 23);
}

TEST(RecorderdFleetFaults, PartitionOf30sHookCrashAndPostgresRestartWhileShipping) {
  auto db = SharedPgServer().CreateDatabase("faults_partition");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  TempDir tmp;
  const std::string host = "host-partition";
  // Backoff capped at 4 s and a 3 s request timeout: how late shipping
  // resumes after the partition is bounded by a few seconds.
  const std::string conf =
      WriteConfig(tmp.path(), host, Cluster().bucket, *db, "RetryMaxDelay=4s\n");
  Daemon d(tmp.path(), {"--fleet", conf});
  ASSERT_TRUE(d.ready()) << d.Log();

  std::vector<std::string> ids = {DumpId(d)};
  ASSERT_TRUE(WaitFor([&] { return Confirmed(d, ids); }, std::chrono::seconds(60))) << d.Log();
  Json f;
  ASSERT_TRUE(WaitForStatus(
      d, [](const Json& j) { return j["shipped_records"] == 1; }, &f))
      << f.dump();
  EXPECT_EQ(f["shipped_records"], 1);
  EXPECT_EQ(f["pending_records"], 0);
  EXPECT_EQ(f["retries"], 0);
  EXPECT_EQ(f["last_error"], "");
  EXPECT_GT(f["shipped_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(std::abs(f["last_success_time"].get<int64_t>() - time(nullptr)), 120);

  // A crashed process for the hook: a live `sleep` and its core.
  pid_t sleeper = Spawn({"/bin/sleep", "120"});
  ASSERT_GT(sleeper, 0);
  const std::string core = tmp.path() + "/core";
  auto g = RunCommand({"/usr/bin/gcore", "-o", core, std::to_string(sleeper)});
  ASSERT_EQ(g.exit_code, 0) << g.err;

  // The partition: 30 s during which the gateway answers nothing.
  const auto t0 = Clock::now();
  GatewayPause pause;
  ASSERT_TRUE(pause.paused);
  ids.push_back(DumpId(d));  // recording goes on, dumps commit locally
  std::string crash =
      RunCoreHook(d, sleeper, core + "." + std::to_string(sleeper), tmp.path() + "/hook.err");
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  ASSERT_FALSE(crash.empty());
  ids.push_back(crash);
  // The hook's linked history dump (asked of recorderd) is in the store too.
  size_t local = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.store())) {
    local += e.path().extension() == ".frec";
  }
  EXPECT_EQ(local, 4u) << "baseline dump, dump, the hook's history dump and its crash";
  bool mid_dump = false;
  int64_t max_backoff_ms = 0;
  uint64_t retries = 0;
  size_t max_lines = 0;
  Json last;
  while (Clock::now() - t0 < std::chrono::seconds(30)) {
    // Watched throughout: nothing is confirmed while the gateway is away.
    max_lines = std::max(max_lines, JournalLines(d));
    last = FleetStatus(d);
    ASSERT_TRUE(last.is_object()) << "status must answer during the partition";
    max_backoff_ms = std::max(max_backoff_ms, last["backoff_ms"].get<int64_t>());
    retries = last["retries"].get<uint64_t>();
    if (!mid_dump && Clock::now() - t0 > std::chrono::seconds(15)) {
      ids.push_back(DumpId(d));
      mid_dump = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // paces the watch
  }
  ASSERT_TRUE(mid_dump);
  EXPECT_EQ(max_lines, 1u) << "a record confirmed while the gateway answered nothing";
  // Retries with exponential backoff: 0.5, 1, 2, then the 4 s cap, each
  // after a 3 s timeout; without backoff there would be a retry per timeout.
  EXPECT_GE(retries, 3u) << last.dump();
  EXPECT_LE(retries, 10u) << last.dump();
  EXPECT_EQ(max_backoff_ms, 4000) << last.dump();
  EXPECT_NE(last["last_error"].get<std::string>().find("S3 "), std::string::npos) << last.dump();
  EXPECT_GE(last["pending_records"].get<uint64_t>(), 4u) << last.dump();
  auto plain = d.Cli({"status"});
  EXPECT_NE(plain.out.find("fleet:     host host-partition"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("last error"), std::string::npos) << plain.out;

  ASSERT_TRUE(pause.Resume());
  const auto healed = Clock::now();
  // Every record, the hook's crash and history included, arrives once.
  std::vector<std::string> all;
  for (const auto& e : std::filesystem::directory_iterator(d.store())) {
    if (e.path().extension() == ".frec") all.push_back(e.path().stem().string());
  }
  ASSERT_EQ(all.size(), 5u);
  for (const auto& id : ids) EXPECT_NE(std::find(all.begin(), all.end(), id), all.end()) << id;
  ASSERT_TRUE(WaitFor([&] { return Confirmed(d, all); }, std::chrono::seconds(60))) << d.Log();
  std::printf("[ partition] 30 s: %llu retries, all shipped %.1f s after the gateway was back\n",
              static_cast<unsigned long long>(retries),
              std::chrono::duration<double>(Clock::now() - healed).count());
  ExpectExactlyOnce(d, host, Cluster().bucket, all, *db);
  EXPECT_EQ(
      PgScalar(*db, fmt::format("SELECT count(*) FROM crashes WHERE record_id = '{}'", crash)),
      "1");
  EXPECT_TRUE(WaitForStatus(
      d, [](const Json& j) { return j["last_error"] == "" && j["backoff_ms"] == 0; }, &f))
      << f.dump();
  EXPECT_EQ(f["pending_records"], 0) << f.dump();
  EXPECT_EQ(f["shipped_records"], all.size()) << f.dump();

  // PostgreSQL restarted under the shipper's open connection, with records
  // committed around the restart: each row arrives once.
  all.push_back(DumpId(d));
  ASSERT_TRUE(SharedPgServer().Stop().ok());
  all.push_back(DumpId(d));
  ASSERT_TRUE(SharedPgServer().Launch().ok());
  all.push_back(DumpId(d));
  ASSERT_TRUE(WaitFor([&] { return Confirmed(d, all); }, std::chrono::seconds(60))) << d.Log();
  ExpectExactlyOnce(d, host, Cluster().bucket, all, *db);

  EXPECT_TRUE(d.StopWithin(std::chrono::seconds(20)));
  EXPECT_EQ(d.Log().find(Cluster().secret_key), std::string::npos) << "S3 secret logged";
  EXPECT_EQ(d.Log().find(SharedPgServer().password()), std::string::npos) << "PG password logged";
}

TEST(RecorderdFleetFaults, FullBucketQuotaIsAClearErrorNothingLostOrDeletedResumesWhenRaised) {
  const std::string bucket = "flightrec-quota-daemon", host = "host-quota";
  auto o = ClusterS3Options();
  o.bucket = bucket;
  auto s3 = fleet::S3Client::Create(o);
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE((*s3)->CreateBucket().ok());
  auto quota = [&](const std::string& max_size) {
    return RunToExit({"radosgw-admin", "-c", Cluster().conf, "quota", "set", "--bucket", bucket,
                      "--quota-scope=bucket", "--max-size=" + max_size}) == 0 &&
           RunToExit({"radosgw-admin", "-c", Cluster().conf, "quota", "enable", "--bucket", bucket,
                      "--quota-scope=bucket"}) == 0;
  };
  // Smaller than any record: the bucket is full for every upload.
  ASSERT_TRUE(quota("4096"));
  TempDir tmp;
  const std::string probe = tmp.path() + "/probe";
  WriteRandomFile(probe, 64 << 10, 3);
  // radosgw reads the quota through a cache: wait (bounded) until it holds.
  ASSERT_TRUE(WaitFor(
      [&] {
        Status st = (*s3)->PutFile("probe/a.frec", probe);
        if (st.ok()) (void)(*s3)->Delete("probe/a.frec");
        return st.code() == StatusCode::kNoSpace;
      },
      std::chrono::seconds(60)))
      << "quota never enforced";

  const std::string conf = WriteConfig(tmp.path(), host, bucket, "", "RetryMaxDelay=2s\n");
  Daemon d(tmp.path(), {"--fleet", conf});
  ASSERT_TRUE(d.ready()) << d.Log();
  std::vector<std::string> ids = {DumpId(d), DumpId(d)};
  // A clear error in status and in the log, retried with backoff.
  Json f;
  ASSERT_TRUE(WaitForStatus(
      d, [](const Json& j) { return j["backoff_ms"] == 2000; }, &f))
      << f.dump() << d.Log();
  EXPECT_LE(f["retries"].get<uint64_t>(), 5u) << "0.5 s, 1 s, 2 s: " << f.dump();
  const std::string err = f["last_error"];
  EXPECT_NE(err.find("the bucket is full"), std::string::npos) << err;
  EXPECT_NE(err.find("QuotaExceeded"), std::string::npos) << err;
  EXPECT_EQ(f["pending_records"], 2) << f.dump();
  EXPECT_EQ(f["shipped_records"], 0) << f.dump();
  auto plain = d.Cli({"status"});
  EXPECT_NE(plain.out.find("QuotaExceeded"), std::string::npos) << plain.out;
  std::string log = d.Log();
  EXPECT_NE(log.find("error: fleet: the bucket is full"), std::string::npos) << log;
  // Each distinct error logged once, not once per retry: the refusal names
  // the record, and the oldest of the two pending is refused each time (two
  // ids of one second sort by their random part, so the first refused may
  // not be it).
  size_t n = 0;
  for (size_t at = log.find("QuotaExceeded"); at != std::string::npos;
       at = log.find("QuotaExceeded", at + 1)) {
    ++n;
  }
  EXPECT_GE(n, 1u) << log;
  EXPECT_LE(n, 2u) << log;
  EXPECT_LT(n, f["retries"].get<uint64_t>()) << log;
  // Recording goes on, and retention removes nothing unshipped.
  ids.push_back(DumpId(d));
  auto v = d.Cli({"vacuum", "--max-count", "0", "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(Json::parse(v.out)["removed"].empty()) << v.out;
  for (const auto& id : ids) {
    EXPECT_TRUE(std::filesystem::exists(d.store() + "/" + id + ".frec")) << id;
  }
  EXPECT_EQ(JournalLines(d), 0u);

  // Raised: everything ships, once.
  ASSERT_TRUE(quota("1073741824"));
  ASSERT_TRUE(WaitFor([&] { return Confirmed(d, ids); }, std::chrono::seconds(60))) << d.Log();
  ExpectExactlyOnce(d, host, bucket, ids, "");
  EXPECT_TRUE(WaitForStatus(
      d, [](const Json& j) { return j["last_error"] == "" && j["backoff_ms"] == 0; }, &f))
      << f.dump();
  EXPECT_EQ(f["pending_records"], 0) << f.dump();
  EXPECT_EQ(f["shipped_records"], 3) << f.dump();
  // Once shipped, retention bounds the disk again.
  v = d.Cli({"vacuum", "--max-count", "0", "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(Json::parse(v.out)["removed"].size(), 3u) << v.out;
  EXPECT_TRUE(d.StopWithin(std::chrono::seconds(20)));
}

}  // namespace
}  // namespace flightrec::testing
