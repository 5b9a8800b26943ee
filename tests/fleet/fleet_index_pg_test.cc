// FleetIndex against a real PostgreSQL 15: migrations, partitions,
// idempotent insertion, the crash queries, and how failures read.
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "recorder/fleet/digest_pg.h"
#include "recorder/fleet/fleet_index.h"
#include "tests/fleet/fleet_pg_server.h"

namespace flightrec::fleet {
namespace {

using flightrec::testing::PgServer;
using flightrec::testing::SharedPgServer;

// The first cell of `sql`'s result, straight through libpq (not through the
// code under test).
std::string Query(const std::string& conninfo, const std::string& sql) {
  const std::string full = conninfo + " password=" + SharedPgServer().password();
  PGconn* c = PQconnectdb(full.c_str());
  std::string out = "<connect failed: " + std::string(PQerrorMessage(c)) + ">";
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) {
      out = PQgetvalue(r, 0, 0);
    } else {
      out = "<" + std::string(PQresultErrorMessage(r)) + ">";
    }
    PQclear(r);
  }
  PQfinish(c);
  return out;
}

// A fresh database per test.
std::string FreshDb() {
  static int n = 0;
  auto db = SharedPgServer().CreateDatabase(fmt::format("test_{}", ++n));
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? *db : "";
}

FleetIndex Open(const std::string& conninfo) {
  auto idx = FleetIndex::Connect(conninfo, SharedPgServer().password());
  EXPECT_TRUE(idx.ok()) << idx.status().ToString();
  return std::move(*idx);
}

IndexRecord Rec(const std::string& host, const std::string& id, const std::string& kind = "dump") {
  IndexRecord r;
  r.host_id = host;
  r.record_id = id;
  r.kind = kind;
  r.time_ns = *RecordIdTimeS(id) * 1'000'000'000 + 123;
  r.object_key = host + "/" + id + ".frec";
  r.sha256 = Sha256Hex(host + id);
  r.bytes = 4096;
  return r;
}

IndexCrash Crash(const std::string& top, const std::string& exe = "/usr/bin/fr_crash") {
  IndexCrash c;
  c.pid = 4242;
  c.comm = "fr_crash";
  c.signal = 11;
  c.signal_name = "SIGSEGV";
  c.executable = exe;
  c.build_id = "ab12cd34";
  nlohmann::json bt = {
      {"threads",
       {{{"tid", 4242},
         {"frames", {{{"function", top}, {"dso", exe}}, {{"function", "main"}, {"dso", exe}}}}}}}};
  c.signature = ComputeSignature(bt, "SIGSEGV", exe);
  c.processes = {{4242, "fr_crash", exe, "ab12cd34", {}}};
  return c;
}

TEST(FleetIndexPgTest, MigrationsBuildTheSchemaOnceAndRerunningIsANoOp) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_EQ(*idx.SchemaVersion(), 0);
  ASSERT_TRUE(idx.Migrate().ok());
  const int latest = SchemaMigrations().back().version;
  EXPECT_EQ(*idx.SchemaVersion(), latest);
  ASSERT_TRUE(idx.Migrate().ok()) << "a second run must be a no-op";
  EXPECT_EQ(Query(db, "SELECT count(*) FROM flightrec_schema_version"),
            std::to_string(SchemaMigrations().size()));
  // Declaratively partitioned ('p'), as the sizing in docs/FLEET.md needs.
  for (const char* t : {"records", "crashes", "crash_processes"}) {
    EXPECT_EQ(Query(db, fmt::format("SELECT relkind FROM pg_class WHERE relname = '{}'", t)), "p")
        << t;
  }
  for (const char* t : {"hosts", "build_ids", "signatures"}) {
    EXPECT_EQ(Query(db, fmt::format("SELECT relkind FROM pg_class WHERE relname = '{}'", t)), "r")
        << t;
  }
}

TEST(FleetIndexPgTest, AFailingMigrationLeavesNothingOfItself) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  std::vector<Migration> ms = {
      {1, "good", "CREATE TABLE good_one (x int);"},
      {2, "bad half way", "CREATE TABLE half_done (x int); SELECT no_such_function();"},
  };
  Status st = idx.Migrate(ms);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("migration 2 (bad half way)"), std::string::npos) << st.message();
  EXPECT_FALSE(IsRetryable(st));
  EXPECT_EQ(*idx.SchemaVersion(), 1);
  EXPECT_EQ(Query(db, "SELECT to_regclass('good_one') IS NOT NULL"), "t");
  EXPECT_EQ(Query(db, "SELECT to_regclass('half_done') IS NULL"), "t")
      << "migration 2's first statement must have been rolled back";
  // Fixed, it applies; 1 is not applied again (it would fail: good_one exists).
  ms[1].sql = "CREATE TABLE half_done (x int);";
  ASSERT_TRUE(idx.Migrate(ms).ok());
  EXPECT_EQ(*idx.SchemaVersion(), 2);
}

TEST(FleetIndexPgTest, ConcurrentMigratorsApplyEachMigrationOnce) {
  const std::string db = FreshDb();
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      auto idx = FleetIndex::Connect(db, SharedPgServer().password());
      Status st = idx.ok() ? idx->Migrate() : idx.status();
      if (!st.ok()) {
        ++failures;
        ADD_FAILURE() << st.ToString();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Query(db, "SELECT count(*) FROM flightrec_schema_version"),
            std::to_string(SchemaMigrations().size()));
}

TEST(FleetIndexPgTest, ARetriedInsertNeverMakesASecondRow) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  IndexRecord r = Rec("host-a", "20261125T101500Z-0a0b0c", "crash");
  IndexCrash c = Crash("crash_here");
  auto first = idx.AddRecord(r, &c);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  auto again = idx.AddRecord(r, &c);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(*again);
  // And from another connection (another shipper's retry).
  FleetIndex other = Open(db);
  EXPECT_FALSE(*other.AddRecord(r, &c));
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records"), "1");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM crashes"), "1");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM crash_processes"), "1");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM hosts"), "1");
  // The same id on another host is another record.
  EXPECT_TRUE(*idx.AddRecord(Rec("host-b", r.record_id)));
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records"), "2");
}

TEST(FleetIndexPgTest, MonthPartitionsAreCreatedOnDemandAndRowsLandInTheirMonth) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  EXPECT_TRUE(idx.Partitions("records")->empty());
  ASSERT_TRUE(idx.AddRecord(Rec("h", "20260131T235959Z-000001")).ok());
  ASSERT_TRUE(idx.AddRecord(Rec("h", "20260201T000000Z-000002")).ok());
  IndexCrash c = Crash("f");
  ASSERT_TRUE(idx.AddRecord(Rec("h", "20261201T000000Z-000003", "crash"), &c).ok());
  EXPECT_EQ(*idx.Partitions("records"),
            (std::vector<std::string>{"records_y2026m01", "records_y2026m02", "records_y2026m12"}));
  EXPECT_EQ(*idx.Partitions("crashes"),
            (std::vector<std::string>{"crashes_y2026m01", "crashes_y2026m02", "crashes_y2026m12"}));
  EXPECT_EQ(Query(db,
                  "SELECT tableoid::regclass::text FROM records "
                  "WHERE record_id = '20260131T235959Z-000001'"),
            "records_y2026m01");
  EXPECT_EQ(Query(db,
                  "SELECT tableoid::regclass::text FROM records "
                  "WHERE record_id = '20260201T000000Z-000002'"),
            "records_y2026m02");
  // A second index (another daemon) finds the partitions there.
  FleetIndex other = Open(db);
  ASSERT_TRUE(other.AddRecord(Rec("h2", "20260131T120000Z-000004")).ok());
  EXPECT_EQ(idx.Partitions("records")->size(), 3u);
}

TEST(FleetIndexPgTest, ValuesTravelAsParametersNeverAsSql) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  const std::string evil_host = "h'); DROP TABLE records; --";
  IndexCrash c = Crash("x'); DROP TABLE crashes; --", "/tmp/$(reboot)'\"");
  c.comm = std::string("a\0b\x1b[2J\xff", 8);  // a NUL, an escape, not UTF-8
  ASSERT_TRUE(idx.AddRecord(Rec(evil_host, "20261125T101500Z-abcdef", "crash"), &c).ok());
  EXPECT_EQ(Query(db, "SELECT host_id FROM records"), evil_host);
  EXPECT_EQ(Query(db, "SELECT executable FROM crashes"), "/tmp/$(reboot)'\"");
  EXPECT_EQ(Query(db, "SELECT comm FROM crashes"), "a?b?[2J\xef\xbf\xbd");
  auto d = idx.GetCrash(evil_host + "/20261125T101500Z-abcdef");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->crash.signature.frames[0].function, "x'); DROP TABLE crashes; --");
  // A LIKE wildcard in an id is matched literally.
  EXPECT_EQ(idx.GetRecord("2026%").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(idx.GetRecord("20261125T1015").status().code(), StatusCode::kOk);
}

TEST(FleetIndexPgTest, MalformedRecordsAreRefusedWithAClearReason) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  IndexRecord bad_id = Rec("h", "20261125T101500Z-000001");
  bad_id.record_id = "../../etc/passwd";
  Status st = idx.AddRecord(bad_id).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not of the store's form"), std::string::npos) << st.message();
  IndexRecord bad_sum = Rec("h", "20261125T101500Z-000001");
  bad_sum.sha256 = "XYZ";
  st = idx.AddRecord(bad_sum).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sha256"), std::string::npos) << st.message();
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records"), "0");
}

TEST(FleetIndexPgTest, CrashesListAndGroupAcrossHostsBySignature) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  IndexCrash same = Crash("crash_here"), other = Crash("parse_header", "/usr/bin/svc");
  // One bug on three hosts (built at different paths: the module is a
  // basename), another on one.
  IndexCrash same_b = Crash("crash_here", "/opt/b/fr_crash");
  ASSERT_TRUE(idx.AddRecord(Rec("a", "20261125T100000Z-000001", "crash"), &same).ok());
  ASSERT_TRUE(idx.AddRecord(Rec("b", "20261125T100100Z-000002", "crash"), &same_b).ok());
  ASSERT_TRUE(idx.AddRecord(Rec("c", "20261125T100200Z-000003", "crash"), &same).ok());
  ASSERT_TRUE(idx.AddRecord(Rec("c", "20261125T100300Z-000004", "crash"), &other).ok());
  ASSERT_TRUE(idx.AddRecord(Rec("c", "20261125T100400Z-000005", "dump")).ok());
  auto all = idx.ListCrashes({});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].record_id, "20261125T100300Z-000004");  // newest first
  auto groups = idx.GroupCrashes({});
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].signature_id, same.signature.id);
  EXPECT_EQ(same.signature.id, same_b.signature.id);
  EXPECT_EQ((*groups)[0].crashes, 3);
  EXPECT_EQ((*groups)[0].hosts, 3);
  EXPECT_EQ((*groups)[0].latest_host, "c");
  EXPECT_EQ((*groups)[0].latest_record, "20261125T100200Z-000003");
  EXPECT_EQ((*groups)[0].title, "SIGSEGV in crash_here ← main (fr_crash)");
  EXPECT_EQ((*groups)[1].crashes, 1);
  // Filters: a host, a time.
  CrashQuery q;
  q.host = "c";
  EXPECT_EQ(idx.ListCrashes(q)->size(), 2u);
  EXPECT_EQ(idx.GroupCrashes(q)->size(), 2u);
  q.host = "";
  q.since_ns = *RecordIdTimeS("20261125T100130Z-0") * 1'000'000'000;
  EXPECT_EQ(idx.ListCrashes(q)->size(), 2u);
  // Details: by unique prefix, by HOST/ID; ambiguous ones are refused.
  auto d = idx.GetCrash("20261125T1001");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->record.host_id, "b");
  EXPECT_EQ(d->crash.executable, "/opt/b/fr_crash");
  EXPECT_EQ(d->group_crashes, 3);
  EXPECT_EQ(d->group_hosts, 3);
  EXPECT_EQ(d->crash.signature.frames, same.signature.frames);
  ASSERT_EQ(d->crash.processes.size(), 1u);
  EXPECT_EQ(d->crash.processes[0].build_id, "ab12cd34");
  EXPECT_EQ(idx.GetCrash("20261125T10").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(idx.GetCrash("20261125T100400Z-000005").status().code(), StatusCode::kNotFound)
      << "a dump is not a crash";
  EXPECT_TRUE(idx.GetRecord("20261125T100400Z-000005").ok());
  EXPECT_EQ(Query(db, "SELECT count(*) FROM build_ids"), "1");
}

TEST(FleetIndexPgTest, AWrongPasswordIsAPermanentErrorThatNamesNoSecret) {
  PgServer& pg = SharedPgServer();
  auto idx = FleetIndex::Connect(pg.ConnInfo(), "not-the-password");
  ASSERT_FALSE(idx.ok());
  EXPECT_EQ(idx.status().code(), StatusCode::kPermissionDenied) << idx.status().ToString();
  EXPECT_FALSE(IsRetryable(idx.status()));
  EXPECT_NE(idx.status().message().find("password authentication failed"), std::string::npos)
      << idx.status().message();
  EXPECT_EQ(idx.status().message().find("not-the-password"), std::string::npos);
  // A password in ConnInfo= is ignored: only the credentials file has one.
  auto in_conninfo = FleetIndex::Connect(pg.ConnInfo() + " password=" + pg.password(), "");
  EXPECT_EQ(in_conninfo.status().code(), StatusCode::kPermissionDenied);
}

TEST(FleetIndexPgTest, NoServerIsARetryableError) {
  // A stopped server: its port has nothing on it.
  auto started = PgServer::Start();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  const std::string conninfo = (*started)->ConnInfo();
  ASSERT_TRUE((*started)->Stop().ok());
  auto idx = FleetIndex::Connect(conninfo, (*started)->password(), 5);
  ASSERT_FALSE(idx.ok());
  EXPECT_EQ(idx.status().code(), StatusCode::kUnavailable) << idx.status().ToString();
  EXPECT_TRUE(IsRetryable(idx.status()));
  EXPECT_NE(idx.status().message().find("Connection refused"), std::string::npos)
      << idx.status().message();
}

TEST(FleetIndexPgTest, AServerRestartIsRetriedWithoutLossOrDuplicate) {
  // Its own server: restarting the shared one would disturb other tests.
  auto started = PgServer::Start();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  PgServer& pg = **started;
  auto idx = FleetIndex::Connect(pg.ConnInfo(), pg.password());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_TRUE(idx->Migrate().ok());
  ASSERT_TRUE(*idx->AddRecord(Rec("h", "20261125T100000Z-000001")));
  ASSERT_TRUE(pg.Stop().ok());
  // Down: retryable, whichever way libpq notices.
  StatusOr<bool> down = idx->AddRecord(Rec("h", "20261125T100000Z-000002"));
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(IsRetryable(down.status())) << down.status().ToString();
  ASSERT_TRUE(pg.Launch().ok());
  // Up again: the same index object reconnects; the retry adds the record
  // once, and retrying the first one adds nothing.
  StatusOr<bool> retry = idx->AddRecord(Rec("h", "20261125T100000Z-000002"));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(*retry);
  EXPECT_FALSE(*idx->AddRecord(Rec("h", "20261125T100000Z-000001")));
  auto n = idx->ListCrashes({});
  ASSERT_TRUE(n.ok());
  const std::string full = pg.ConnInfo() + " password=" + pg.password();
  PGconn* c = PQconnectdb(full.c_str());
  PGresult* r = PQexec(c, "SELECT count(*) FROM records");
  EXPECT_STREQ(PQgetvalue(r, 0, 0), "2");
  PQclear(r);
  PQfinish(c);
}

TEST(FleetIndexPgTest, AddRecordsIndexesABatchInOneTransactionAndRetriesAddNothing) {
  const std::string db = FreshDb();
  FleetIndex idx = Open(db);
  ASSERT_TRUE(idx.Migrate().ok());
  // Two months (two partitions), two hosts, a crash among the dumps, and
  // more rows than one multi-row INSERT holds (500).
  std::vector<IndexItem> batch;
  for (int i = 0; i < 1203; ++i) {
    const std::string id = fmt::format("2026{:02}{:02}T10{:02}{:02}Z-{:06x}", 10 + i % 2,
                                       1 + i % 28, i / 60 % 60, i % 60, i);
    batch.push_back({Rec(i % 3 ? "host-a" : "host-b", id, i == 7 ? "crash" : "dump"), {}});
    if (i == 7) batch.back().crash = Crash("batch_top");
  }
  auto added = idx.AddRecords(batch);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(std::count(added->begin(), added->end(), true), 1203);
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records"), "1203");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM crashes"), "1");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM crash_processes"), "1");
  EXPECT_EQ(Query(db, fmt::format("SELECT sha256 FROM records WHERE record_id = '{}'",
                                  batch[42].record.record_id)),
            batch[42].record.sha256);
  // A retry of a batch (a lost reply) adds nothing; a batch mixing old and
  // new records adds only the new ones, each once.
  added = idx.AddRecords(batch);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(std::count(added->begin(), added->end(), true), 0);
  std::vector<IndexItem> mixed = {batch[5],
                                  {Rec("host-a", "20261103T080000Z-aaaaaa"), {}},
                                  {Rec("host-a", "20261103T080000Z-aaaaaa"), {}}};
  added = idx.AddRecords(mixed);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records"), "1204");
  EXPECT_EQ(Query(db, "SELECT count(*) FROM crashes"), "1");
  // A batch with an invalid record is refused whole, before any row.
  std::vector<IndexItem> bad = {{Rec("host-c", "20261104T080000Z-bbbbbb"), {}},
                                {Rec("host-c", "20261104T080000Z-cccccc"), {}}};
  bad[1].record.sha256 = "not-hex";
  EXPECT_FALSE(idx.AddRecords(bad).ok());
  EXPECT_EQ(Query(db, "SELECT count(*) FROM records WHERE host_id = 'host-c'"), "0");
}

}  // namespace
}  // namespace flightrec::fleet
