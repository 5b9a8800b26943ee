// FleetIndex: the fleet's one index of records and crashes, in PostgreSQL
// (libpq). Object storage holds the record files; this holds one row per
// record (where its object is, its checksum) and one per crash (with its
// signature), so `recorder --fleet CONFIG crash list --group` is one query.
//
// Why PostgreSQL and this shape: crash reporters (Sentry, Backtrace) and
// continuous profilers keep blobs in object storage and an index in a
// database; declarative partitioning by month keeps a year of a large fleet
// cheap to insert into and to expire (drop a partition). docs/FLEET.md has
// the schema, the migrations and the sizing.
//
// Error policy: every call returns Status. A failure the caller should retry
// later (server down or restarting, connection lost, deadlock, too many
// connections) is kUnavailable (IsRetryable); a wrong password or role is
// kPermissionDenied, which no retry fixes. A lost connection is re-opened on
// the next call. Values only ever travel as PQexecParams parameters; the only
// SQL built at run time is a partition's name and bounds, from integers.
//
// Thread: one FleetIndex per thread (a PGconn is not shared).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cgroup.h"
#include "common/status.h"
#include "recorder/fleet/crash_signature.h"

struct pg_conn;
struct pg_result;

namespace flightrec::fleet {

struct PgConnDeleter {
  void operator()(pg_conn* c) const;
};
struct PgResultDeleter {
  void operator()(pg_result* r) const;
};
using PgConn = std::unique_ptr<pg_conn, PgConnDeleter>;
using PgResult = std::unique_ptr<pg_result, PgResultDeleter>;

// kUnavailable: the server is down, restarting or overloaded, or the
// connection broke: the same call may succeed later.
bool IsRetryable(const Status& st);

// One record as shipped: its object in the bucket and its checksum.
struct IndexRecord {
  std::string host_id;
  std::string record_id;  // the store's id, "20261122T120633Z-3f9a2c"
  std::string kind;       // "dump", "crash", ...
  int64_t time_ns = 0;    // the record's creation (wall clock)
  std::string object_key;
  std::string sha256;  // 64 lowercase hex digits
  uint64_t bytes = 0;
};

// A process named by a crash record (the crashed one first).
struct IndexProcess {
  uint32_t pid = 0;
  std::string comm;
  std::string executable;
  std::string build_id;      // hex, "" when unknown
  cgroup::CgroupInfo where;  // cgroup, unit, container, pod; "" unknown
};

// What the index keeps of a crash record.
struct IndexCrash {
  uint32_t pid = 0;
  std::string comm;
  int signal = 0;
  std::string signal_name;
  std::string executable;
  std::string build_id;  // of the executable, hex, "" when unknown
  CrashSignature signature;
  std::vector<IndexProcess> processes;
  cgroup::CgroupInfo where;  // the crashed process's
};

// One record of a batch, with its crash rows if it is a crash.
struct IndexItem {
  IndexRecord record;
  std::optional<IndexCrash> crash;
};

struct CrashQuery {
  std::string host;      // "" = every host
  int64_t since_ns = 0;  // only crashes at or after (wall clock ns)
  int limit = 1000;
  // Where the crashed process ran ("" = any): its unit, a prefix of its
  // container id, its cgroup or one above it.
  std::string unit, container, cgroup;
};

struct CrashListRow {
  std::string host_id;
  std::string record_id;
  int64_t time_ns = 0;
  std::string comm;
  std::string signal_name;
  std::string executable;
  std::string signature_id;
  std::string title;
  std::string unit;               // "" none
  std::string container_runtime;  // "" none
  std::string container_id;       // "" none
};

struct CrashGroupRow {
  std::string signature_id;
  std::string title;
  int64_t crashes = 0;
  int64_t hosts = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  std::string latest_host;    // where the newest crash of the group is
  std::string latest_record;  // ... and its record id
};

struct CrashDetail {
  IndexRecord record;
  IndexCrash crash;
  int64_t group_crashes = 0;  // crashes with the same signature
  int64_t group_hosts = 0;
};

// One schema migration: applied once, in one transaction, in order.
struct Migration {
  int version;
  const char* description;
  const char* sql;
};
// The schema's migrations, oldest first (fleet_index.cc).
const std::vector<Migration>& SchemaMigrations();

// The partition of a record: the UTC time in its id (a retry of the same
// record always lands in the same partition, which is what lets the primary
// key of a partitioned table, which must include the partition key, make
// (host, record id) unique). InvalidArgument for an id not of the store's form.
StatusOr<int64_t> RecordIdTimeS(const std::string& record_id);

class FleetIndex {
 public:
  // `conninfo` holds libpq keywords ("host=... port=... dbname=... user=...")
  // and never the password, which comes separately (from the credentials
  // file) and is never part of any message.
  static StatusOr<FleetIndex> Connect(const std::string& conninfo, const std::string& password,
                                      int connect_timeout_s = 10);

  FleetIndex(FleetIndex&&) = default;
  FleetIndex& operator=(FleetIndex&&) = default;
  ~FleetIndex();

  // Applies the migrations above the database's schema version, each in its
  // own transaction under an advisory lock (two daemons starting at once
  // apply each once). Running it again is a no-op.
  Status Migrate() { return Migrate(SchemaMigrations()); }
  Status Migrate(const std::vector<Migration>& migrations);
  // 0 before the first migration.
  StatusOr<int> SchemaVersion();
  // For readers (the CLI), which never migrate: ok when the database has at
  // least this binary's schema, else an error saying who creates it.
  Status CheckSchema();

  // Indexes one record (and its crash, when `crash` is set) in one
  // transaction, creating the month's partitions if needed. Returns true
  // when the rows were added, false when (host, record id) was already
  // there: a retry after a lost reply never adds a second row.
  StatusOr<bool> AddRecord(const IndexRecord& rec, const IndexCrash* crash = nullptr);
  // Several records (a shipper's batch) in one transaction, with multi-row
  // INSERTs: one commit (one flush) for all of them. Per item, as
  // AddRecord: true if added, false if it was there. All or nothing.
  StatusOr<std::vector<bool>> AddRecords(const std::vector<IndexItem>& items);

  // Newest first.
  StatusOr<std::vector<CrashListRow>> ListCrashes(const CrashQuery& q);
  // Crashes grouped by signature, the largest group first.
  StatusOr<std::vector<CrashGroupRow>> GroupCrashes(const CrashQuery& q);
  // A crash by record id, "HOST/ID", or a unique prefix of an id.
  StatusOr<CrashDetail> GetCrash(const std::string& id);
  // A record (of any kind) by the same forms of id.
  StatusOr<IndexRecord> GetRecord(const std::string& id);

  // The month partitions of `table` ("records_y2026m11", ...), for tests and
  // `docs/FLEET.md`'s retention advice.
  StatusOr<std::vector<std::string>> Partitions(const std::string& table);

 private:
  FleetIndex(PgConn conn, std::string conninfo, std::string password, int timeout_s);
  // Runs one parameterised statement (never reconnects: see Ready()).
  StatusOr<PgResult> Exec(const std::string& sql, const std::vector<std::optional<std::string>>& p,
                          const char* what);
  Status ExecSimple(const std::string& sql, const char* what);
  Status Ready();  // reconnects a broken connection
  Status Reconnect();
  Status EnsurePartitions(int64_t time_s);
  Status AddKnownHost(const std::string& host_id);
  Status AddCrashRows(const IndexRecord& rec, const std::string& id_time, const IndexCrash& crash);
  StatusOr<std::pair<std::string, std::string>> ResolveId(const std::string& id, bool crash_only);

  PgConn conn_;
  std::string conninfo_;
  std::string password_;
  int timeout_s_ = 10;
  std::vector<int64_t> months_ready_;     // partitions known to exist (yyyymm)
  std::vector<std::string> hosts_known_;  // hosts rows known to exist
};

}  // namespace flightrec::fleet
