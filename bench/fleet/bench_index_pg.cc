// Fleet index insert rate vs plain COPY (issue 16 item 5), in one run on one
// PostgreSQL 15 (started here like the tests' server, with fsync and
// synchronous_commit on unless --no-fsync): the same rows go
//   1. through FleetIndex::AddRecord, one record per transaction, as each
//      host's shipper indexes what it uploaded (1 connection, then --clients
//      connections at once, the fleet's hosts inserting concurrently);
//   2. through FleetIndex::AddRecords, --batch records per transaction (one
//      multi-row INSERT), as recorderd's shipper indexes a backlog (1
//      connection, then --clients connections);
//   3. through one `COPY records FROM STDIN` into the same (truncated) table:
//      the fastest way into PostgreSQL, a bound no per-record path reaches.
// Prints each rate and the ratio. Usage:
//   bench_index_pg [--records N] [--clients C] [--batch B] [--crash-every K] [--no-fsync]
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "recorder/fleet/digest_pg.h"
#include "recorder/fleet/fleet_index.h"
#include "tests/fleet/fleet_pg_server.h"

namespace {

using flightrec::fleet::FleetIndex;
using flightrec::fleet::IndexCrash;
using flightrec::fleet::IndexRecord;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Record i of host h: ids spread over one month, like a month of dumps.
IndexRecord Rec(int h, int i) {
  IndexRecord r;
  r.host_id = fmt::format("host-{:04}", h);
  const int s = i % (28 * 86400);
  r.record_id = fmt::format("202611{:02}T{:02}{:02}{:02}Z-{:06x}", 1 + s / 86400, s / 3600 % 24,
                            s / 60 % 60, s % 60, i & 0xffffff);
  r.kind = "dump";
  r.time_ns = *flightrec::fleet::RecordIdTimeS(r.record_id) * 1'000'000'000;
  r.object_key = fmt::format("{}/2026/11/{}.frec", r.host_id, r.record_id);
  r.sha256 = flightrec::fleet::Sha256Hex(r.object_key);
  r.bytes = 1'500'000;
  return r;
}

IndexCrash Crash(int i) {
  IndexCrash c;
  c.pid = 1000 + i;
  c.comm = "svc";
  c.signal = 11;
  c.signal_name = "SIGSEGV";
  c.executable = "/usr/sbin/svc";
  c.build_id = "0123456789abcdef0123456789abcdef01234567";
  nlohmann::json bt = {
      {"threads",
       {{{"frames",
          {{{"function", fmt::format("handler_{}", i % 50)}, {"dso", "/usr/sbin/svc"}},
           {{"function", "main"}, {"dso", "/usr/sbin/svc"}}}}}}}};
  c.signature = flightrec::fleet::ComputeSignature(bt, "SIGSEGV", c.executable);
  c.processes = {{c.pid, c.comm, c.executable, c.build_id, {}}};
  return c;
}

std::string Scalar(PGconn* c, const char* sql) {
  PGresult* r = PQexec(c, sql);
  std::string v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? PQgetvalue(r, 0, 0)
                                                                       : PQresultErrorMessage(r);
  PQclear(r);
  return v;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "bench_index_pg: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int records = 20000, clients = 4, crash_every = 0, batch = 64;
  bool fsync = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--records" && i + 1 < argc) {
      records = std::atoi(argv[++i]);
    } else if (a == "--clients" && i + 1 < argc) {
      clients = std::atoi(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--crash-every" && i + 1 < argc) {
      crash_every = std::atoi(argv[++i]);
    } else if (a == "--no-fsync") {
      fsync = false;
    } else {
      Die("usage: bench_index_pg [--records N] [--clients C] [--batch B] [--crash-every K] "
          "[--no-fsync]");
    }
  }
  flightrec::testing::PgServer::Options o;
  o.fsync = fsync;
  auto pg = flightrec::testing::PgServer::Start(o);
  if (!pg.ok()) Die(pg.status().ToString());
  auto db = (*pg)->CreateDatabase("bench");
  if (!db.ok()) Die(db.status().ToString());
  const std::string password = (*pg)->password();
  auto idx = FleetIndex::Connect(*db, password);
  if (!idx.ok() || !idx->Migrate().ok()) Die("connect/migrate failed");
  std::vector<IndexRecord> rows;
  for (int i = 0; i < records; ++i) rows.push_back(Rec(i % 500, i));
  // Partitions exist before any timing (a month's first insert creates them).
  if (!idx->AddRecord(Rec(9999, 0)).ok()) Die("warm-up insert failed");
  const std::string full = *db + " password=" + password;
  PGconn* c = PQconnectdb(full.c_str());
  auto truncate = [&] { PQclear(PQexec(c, "TRUNCATE records, crashes, crash_processes")); };

  // 1a. AddRecord, one connection.
  truncate();
  double t0 = Now();
  for (int i = 0; i < records; ++i) {
    IndexCrash crash;
    const bool is_crash = crash_every > 0 && i % crash_every == 0;
    if (is_crash) crash = Crash(i);
    auto added = idx->AddRecord(rows[i], is_crash ? &crash : nullptr);
    if (!added.ok() || !*added) Die("AddRecord failed: " + added.status().ToString());
  }
  const double add1 = records / (Now() - t0);
  if (Scalar(c, "SELECT count(*) FROM records") != std::to_string(records)) Die("row count");

  // 1b. AddRecord, `clients` connections at once.
  truncate();
  std::atomic<bool> failed{false};
  t0 = Now();
  std::vector<std::thread> ts;
  for (int k = 0; k < clients; ++k) {
    ts.emplace_back([&, k] {
      auto own = FleetIndex::Connect(*db, password);
      if (!own.ok()) {
        failed = true;
        return;
      }
      for (int i = k; i < records; i += clients) {
        IndexCrash crash;
        const bool is_crash = crash_every > 0 && i % crash_every == 0;
        if (is_crash) crash = Crash(i);
        auto added = own->AddRecord(rows[i], is_crash ? &crash : nullptr);
        if (!added.ok() || !*added) failed = true;
      }
    });
  }
  for (auto& t : ts) t.join();
  const double addn = records / (Now() - t0);
  if (failed) Die("a concurrent AddRecord failed");

  // 2. AddRecords in batches: records [first, last) of every `step`-th
  // batch starting at `k`, on its own connection.
  auto batched = [&](int k, int step, FleetIndex& on) {
    for (int first = k * batch; first < records; first += step * batch) {
      std::vector<flightrec::fleet::IndexItem> items;
      for (int i = first; i < std::min(records, first + batch); ++i) {
        items.push_back({rows[i], {}});
        if (crash_every > 0 && i % crash_every == 0) items.back().crash = Crash(i);
      }
      auto added = on.AddRecords(items);
      if (!added.ok()) return false;
    }
    return true;
  };
  truncate();
  t0 = Now();
  if (!batched(0, 1, *idx)) Die("AddRecords failed");
  const double batch1 = records / (Now() - t0);
  if (Scalar(c, "SELECT count(*) FROM records") != std::to_string(records)) Die("batch row count");
  truncate();
  ts.clear();
  t0 = Now();
  for (int k = 0; k < clients; ++k) {
    ts.emplace_back([&, k] {
      auto own = FleetIndex::Connect(*db, password);
      if (!own.ok() || !batched(k, clients, *own)) failed = true;
    });
  }
  for (auto& t : ts) t.join();
  const double batchn = records / (Now() - t0);
  if (failed) Die("a concurrent AddRecords failed");
  if (Scalar(c, "SELECT count(*) FROM records") != std::to_string(records)) Die("batch row count");

  // 3. COPY of the same rows into the same table.
  truncate();
  t0 = Now();
  PGresult* r = PQexec(c,
                       "COPY records (host_id, record_id, created_at, time_ns, kind, object_key, "
                       "sha256, bytes) FROM STDIN");
  if (PQresultStatus(r) != PGRES_COPY_IN) Die(PQresultErrorMessage(r));
  PQclear(r);
  std::string buf;
  for (const auto& row : rows) {
    // created_at is the id's UTC second, as AddRecord derives it.
    const std::string& id = row.record_id;
    const std::string created =
        fmt::format("{}-{}-{} {}:{}:{}+00", id.substr(0, 4), id.substr(4, 2), id.substr(6, 2),
                    id.substr(9, 2), id.substr(11, 2), id.substr(13, 2));
    buf += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", row.host_id, row.record_id, created,
                       row.time_ns, row.kind, row.object_key, row.sha256, row.bytes);
    if (buf.size() > (1 << 20)) {
      PQputCopyData(c, buf.data(), static_cast<int>(buf.size()));
      buf.clear();
    }
  }
  PQputCopyData(c, buf.data(), static_cast<int>(buf.size()));
  PQputCopyEnd(c, nullptr);
  r = PQgetResult(c);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) Die(PQresultErrorMessage(r));
  PQclear(r);
  const double copy = records / (Now() - t0);
  if (Scalar(c, "SELECT count(*) FROM records") != std::to_string(records)) Die("COPY row count");
  const std::string size =
      Scalar(c,
             "SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) FROM pg_inherits "
             "WHERE inhparent = 'records'::regclass");
  PQfinish(c);
  std::printf(
      "fleet index, %d records (%s), PostgreSQL 15, fsync %s:\n"
      "  AddRecord, 1 connection:   %9.0f records/s\n"
      "  AddRecord, %d connections: %9.0f records/s\n"
      "  AddRecords, batches of %d, 1 connection:   %9.0f records/s\n"
      "  AddRecords, batches of %d, %d connections: %9.0f records/s\n"
      "  COPY (same rows, table):   %9.0f records/s\n"
      "  ratio AddRecord/COPY: %.3f (1 connection), %.3f (%d connections)\n"
      "  ratio AddRecords/COPY: %.3f (1 connection), %.3f (%d connections)\n"
      "  records table with its indexes after COPY: %s\n",
      records, crash_every ? fmt::format("1 in {} a crash", crash_every).c_str() : "dumps only",
      fsync ? "on" : "off", add1, clients, addn, batch, batch1, batch, clients, batchn, copy,
      add1 / copy, addn / copy, clients, batch1 / copy, batchn / copy, clients, size.c_str());
  return 0;
}
