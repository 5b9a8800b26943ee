#include "recorder/fleet/fleet_index.h"

#include <libpq-fe.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/fleet/fleet_schema_pg.h"

namespace flightrec::fleet {

void PgConnDeleter::operator()(pg_conn* c) const { PQfinish(c); }
void PgResultDeleter::operator()(pg_result* r) const { PQclear(r); }

bool IsRetryable(const Status& st) { return st.code() == StatusCode::kUnavailable; }

namespace {

std::string Trimmed(const char* s) {
  std::string m = s ? s : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  // libpq's multi-line messages ("connection to server ... failed: ...\n\tIs
  // the server running ...") read better on one line.
  std::replace(m.begin(), m.end(), '\n', ' ');
  std::replace(m.begin(), m.end(), '\t', ' ');
  return m;
}

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// A failed connection attempt: what libpq says, classified. libpq gives no
// SQLSTATE before the session exists, so this reads its (English, C locale)
// messages; an unknown failure counts as retryable, the common case being
// a server that is not there yet.
Status ConnectError(pg_conn* c) {
  std::string m = Trimmed(PQerrorMessage(c));
  if (Contains(m, "password authentication failed") || Contains(m, "no password supplied") ||
      Contains(m, "authentication failed") || Contains(m, "pg_hba.conf rejects") ||
      (Contains(m, "role \"") && Contains(m, "does not exist"))) {
    return Status(StatusCode::kPermissionDenied,
                  "PostgreSQL refused the credentials (check [PostgreSQL] ConnInfo= user and "
                  "PostgresPassword= in the credentials file; retrying will not help): " +
                      m);
  }
  if (Contains(m, "database \"") && Contains(m, "does not exist")) {
    return NotFound("PostgreSQL: " + m + " (create it, or fix dbname= in ConnInfo=)");
  }
  return Unavailable("cannot connect to PostgreSQL (will retry): " + m);
}

// A failed statement, by SQLSTATE (PostgreSQL's Appendix A).
Status ResultError(pg_conn* c, pg_result* r, const char* what) {
  std::string m = Trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(c));
  if (m.empty()) m = Trimmed(PQerrorMessage(c));
  std::string state;
  if (r) {
    const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (s) state = s;
  }
  std::string text = fmt::format("PostgreSQL: {}: {}", what, m);
  if (PQstatus(c) == CONNECTION_BAD || state.empty() || state.rfind("08", 0) == 0 ||
      state.rfind("57P", 0) == 0 || state.rfind("53", 0) == 0 || state == "40001" ||
      state == "40P01") {
    // Connection lost (server restarted: 57P01 admin_shutdown, crashed, or
    // the network), too many connections (53300), a serialization failure
    // or deadlock: all of it passes.
    return Unavailable(text + " (retryable)");
  }
  if (state.rfind("28", 0) == 0 || state == "42501") {
    return Status(StatusCode::kPermissionDenied, text);
  }
  if (state.rfind("23", 0) == 0) return InvalidArgument(text);
  return Internal(text + " [SQLSTATE " + state + "]");
}

// BEGIN ... COMMIT, rolled back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(pg_conn* c) : c_(c) {}
  ~Transaction() {
    if (open_ && PQstatus(c_) == CONNECTION_OK) PQclear(PQexec(c_, "ROLLBACK"));
  }
  Status Begin() { return Run("BEGIN", &open_, true); }
  Status Commit() { return Run("COMMIT", &open_, false); }

 private:
  Status Run(const char* sql, bool* flag, bool value) {
    PgResult r(PQexec(c_, sql));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ResultError(c_, r.get(), sql);
    *flag = value;
    return OkStatus();
  }
  pg_conn* c_;
  bool open_ = false;
};

std::string Cell(pg_result* r, int row, int col) {
  return PQgetisnull(r, row, col) ? "" : std::string(PQgetvalue(r, row, col));
}
int64_t CellInt(pg_result* r, int row, int col) {
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}

std::optional<std::string> OrNull(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

using Params = std::vector<std::optional<std::string>>;
Params Concat(Params a, const Params& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The label columns (cgroup, unit, container_runtime, container_id,
// pod_uid) of a process, bounded as every text from a record; NULL unknown.
Params WhereParams(const cgroup::CgroupInfo& c) {
  return {OrNull(BoundedText(c.path, 4096)), OrNull(BoundedText(c.unit, 256)),
          OrNull(BoundedText(c.container_runtime, 32)), OrNull(BoundedText(c.container_id, 64)),
          OrNull(BoundedText(c.pod_uid, 64))};
}
// The same five columns read back from `row`, starting at `col`.
cgroup::CgroupInfo WhereFromRow(pg_result* r, int row, int col) {
  cgroup::CgroupInfo c;
  c.path = Cell(r, row, col);
  c.unit = Cell(r, row, col + 1);
  c.container_runtime = Cell(r, row, col + 2);
  c.container_id = Cell(r, row, col + 3);
  c.pod_uid = Cell(r, row, col + 4);
  return c;
}

// "YYYYMMDDTHHMMSSZ-..." → its UTC time.
StatusOr<int64_t> ParseIdTime(const std::string& id) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "record id '{}' is not of the store's form YYYYMMDDTHHMMSSZ-xxxxxx", BoundedText(id, 64)));
  };
  if (id.size() < 16 || id.size() > 64 || id[8] != 'T' || id[15] != 'Z') return bad();
  for (size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}) {
    if (id[i] < '0' || id[i] > '9') return bad();
  }
  for (char ch : id) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-')) return bad();
  }
  struct tm tm {};
  tm.tm_year = std::stoi(id.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(id.substr(4, 2)) - 1;
  tm.tm_mday = std::stoi(id.substr(6, 2));
  tm.tm_hour = std::stoi(id.substr(9, 2));
  tm.tm_min = std::stoi(id.substr(11, 2));
  tm.tm_sec = std::stoi(id.substr(13, 2));
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60) {
    return bad();
  }
  return static_cast<int64_t>(timegm(&tm));
}

bool ValidSha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

StatusOr<int64_t> RecordIdTimeS(const std::string& record_id) { return ParseIdTime(record_id); }

const std::vector<Migration>& SchemaMigrations() { return PgSchemaMigrations(); }

FleetIndex::FleetIndex(PgConn conn, std::string conninfo, std::string password, int timeout_s)
    : conn_(std::move(conn)),
      conninfo_(std::move(conninfo)),
      password_(std::move(password)),
      timeout_s_(timeout_s) {}

FleetIndex::~FleetIndex() = default;

namespace {

StatusOr<PgConn> Open(const std::string& conninfo, const std::string& password, int timeout_s) {
  // The conninfo's own keywords, then ours: the password (never in the
  // conninfo, which may be logged or shown) and defaults it may override.
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (opts == nullptr) {
    std::string m = Trimmed(err ? err : "out of memory");
    PQfreemem(err);
    return InvalidArgument("PostgreSQL ConnInfo=: " + m);
  }
  std::vector<std::string> keys, values;
  bool has_timeout = false;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (std::string(o->keyword) == "password") continue;  // only from the credentials
    if (std::string(o->keyword) == "connect_timeout") has_timeout = true;
    keys.emplace_back(o->keyword);
    values.emplace_back(o->val);
  }
  PQconninfoFree(opts);
  if (!has_timeout) {
    keys.emplace_back("connect_timeout");
    values.push_back(std::to_string(timeout_s));
  }
  keys.emplace_back("fallback_application_name");
  values.emplace_back("flightrec");
  if (!password.empty()) {
    keys.emplace_back("password");
    values.push_back(password);
  }
  std::vector<const char*> k, v;
  for (size_t i = 0; i < keys.size(); ++i) {
    k.push_back(keys[i].c_str());
    v.push_back(values[i].c_str());
  }
  k.push_back(nullptr);
  v.push_back(nullptr);
  PgConn c(PQconnectdbParams(k.data(), v.data(), 0));
  if (!c) return Internal("PostgreSQL: out of memory");
  if (PQstatus(c.get()) != CONNECTION_OK) return ConnectError(c.get());
  // Messages in English so that errors are classified the same everywhere,
  // and no notices on stderr (CREATE ... IF NOT EXISTS emits them).
  PQsetNoticeProcessor(
      c.get(), [](void*, const char*) {}, nullptr);
  PgResult r(PQexec(c.get(), "SET lc_messages TO 'C'"));
  (void)r;
  return c;
}

}  // namespace

StatusOr<FleetIndex> FleetIndex::Connect(const std::string& conninfo, const std::string& password,
                                         int connect_timeout_s) {
  ASSIGN_OR_RETURN(PgConn c, Open(conninfo, password, connect_timeout_s));
  return FleetIndex(std::move(c), conninfo, password, connect_timeout_s);
}

Status FleetIndex::Ready() {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return OkStatus();
  return Reconnect();
}

Status FleetIndex::Reconnect() {
  ASSIGN_OR_RETURN(PgConn c, Open(conninfo_, password_, timeout_s_));
  conn_ = std::move(c);
  return OkStatus();
}

StatusOr<PgResult> FleetIndex::Exec(const std::string& sql,
                                    const std::vector<std::optional<std::string>>& p,
                                    const char* what) {
  // Never reconnects: inside a transaction a new connection would run the
  // rest outside it. Public calls start with Ready().
  std::vector<const char*> values;
  values.reserve(p.size());
  for (const auto& v : p) values.push_back(v ? v->c_str() : nullptr);
  PgResult r(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0));
  ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return ResultError(conn_.get(), r.get(), what);
  }
  return r;
}

Status FleetIndex::ExecSimple(const std::string& sql, const char* what) {
  return Exec(sql, {}, what).status();
}

StatusOr<int> FleetIndex::SchemaVersion() {
  RETURN_IF_ERROR(Ready());
  ASSIGN_OR_RETURN(PgResult r, Exec("SELECT to_regclass('flightrec_schema_version') IS NOT NULL",
                                    {}, "reading the schema version"));
  if (Cell(r.get(), 0, 0) != "t") return 0;
  ASSIGN_OR_RETURN(r, Exec("SELECT coalesce(max(version), 0) FROM flightrec_schema_version", {},
                           "reading the schema version"));
  return static_cast<int>(CellInt(r.get(), 0, 0));
}

Status FleetIndex::CheckSchema() {
  ASSIGN_OR_RETURN(int v, SchemaVersion());
  const int want = SchemaMigrations().back().version;
  if (v == 0) {
    return NotFound(
        "the fleet index has no schema yet: `recorderd --fleet CONFIG` creates it when it starts");
  }
  if (v < want) {
    return Unsupported(fmt::format(
        "the fleet index has schema version {}, this recorder needs {}: restart a `recorderd "
        "--fleet` of this version to migrate it",
        v, want));
  }
  return OkStatus();
}

Status FleetIndex::Migrate(const std::vector<Migration>& migrations) {
  for (const Migration& m : migrations) {
    RETURN_IF_ERROR(Ready());
    Transaction tx(conn_.get());
    RETURN_IF_ERROR(tx.Begin());
    // One migrator at a time, the version table's creation included (two
    // concurrent CREATE TABLE IF NOT EXISTS collide in the catalog); the
    // version is read under the lock, so a migration another process
    // applied meanwhile is skipped.
    RETURN_IF_ERROR(ExecSimple("SELECT pg_advisory_xact_lock(7046329817)", "locking migrations"));
    RETURN_IF_ERROR(
        ExecSimple("CREATE TABLE IF NOT EXISTS flightrec_schema_version ("
                   " version integer PRIMARY KEY,"
                   " description text NOT NULL,"
                   " applied_at timestamptz NOT NULL DEFAULT now())",
                   "creating the schema version table"));
    ASSIGN_OR_RETURN(PgResult r, Exec("SELECT 1 FROM flightrec_schema_version WHERE version = $1",
                                      {std::to_string(m.version)}, "reading the schema version"));
    if (PQntuples(r.get()) > 0) continue;  // applied; the guard rolls back the empty transaction
    // Migrations are constant SQL from this file (several statements, no
    // values): the simple query protocol.
    PgResult mr(PQexec(conn_.get(), m.sql));
    if (PQresultStatus(mr.get()) != PGRES_COMMAND_OK &&
        PQresultStatus(mr.get()) != PGRES_TUPLES_OK) {
      return ResultError(conn_.get(), mr.get(),
                         fmt::format("migration {} ({})", m.version, m.description).c_str());
    }
    RETURN_IF_ERROR(Exec("INSERT INTO flightrec_schema_version (version, description) "
                         "VALUES ($1, $2)",
                         {std::to_string(m.version), std::string(m.description)},
                         "recording the schema version")
                        .status());
    RETURN_IF_ERROR(tx.Commit());
  }
  return OkStatus();
}

Status FleetIndex::EnsurePartitions(int64_t time_s) {
  time_t t = static_cast<time_t>(time_s);
  struct tm tm {};
  gmtime_r(&t, &tm);
  const int y = tm.tm_year + 1900, mo = tm.tm_mon + 1;
  const int64_t key = y * 100 + mo;
  if (std::find(months_ready_.begin(), months_ready_.end(), key) != months_ready_.end()) {
    return OkStatus();
  }
  const int ny = mo == 12 ? y + 1 : y, nmo = mo == 12 ? 1 : mo + 1;
  RETURN_IF_ERROR(Ready());
  Transaction tx(conn_.get());
  RETURN_IF_ERROR(tx.Begin());
  // Two writers creating the same month would otherwise race in the
  // catalog ("relation already exists" despite IF NOT EXISTS).
  RETURN_IF_ERROR(
      ExecSimple("SELECT pg_advisory_xact_lock(7046329818)", "locking partition creation"));
  // DDL takes no parameters: the names and bounds are built from integers.
  for (const char* table : kPgPartitionedTables) {
    RETURN_IF_ERROR(
        ExecSimple(fmt::format("CREATE TABLE IF NOT EXISTS {0}_y{1:04}m{2:02} PARTITION OF {0} "
                               "FOR VALUES FROM ('{1:04}-{2:02}-01 00:00:00+00') "
                               "TO ('{3:04}-{4:02}-01 00:00:00+00')",
                               table, y, mo, ny, nmo),
                   "creating a month's partition"));
  }
  RETURN_IF_ERROR(tx.Commit());
  months_ready_.push_back(key);
  return OkStatus();
}

namespace {

// What AddRecord and AddRecords check of a record before any SQL; its id's
// UTC second (the partition key) on success.
StatusOr<int64_t> CheckRecord(const IndexRecord& rec) {
  ASSIGN_OR_RETURN(int64_t id_s, ParseIdTime(rec.record_id));
  if (rec.host_id.empty() || rec.host_id.size() > 255 ||
      BoundedText(rec.host_id, 255) != rec.host_id) {
    return InvalidArgument("host id must be 1-255 printable bytes");
  }
  if (!ValidSha256(rec.sha256)) {
    return InvalidArgument(
        fmt::format("record {}: sha256 must be 64 lowercase hex digits", rec.record_id));
  }
  if (rec.bytes > static_cast<uint64_t>(INT64_MAX)) return InvalidArgument("record size too large");
  return id_s;
}

// A multi-row INSERT takes 8 parameters per record; PostgreSQL allows 65535
// per statement, and statements of a few hundred rows already amortize the
// round trip.
constexpr size_t kRowsPerInsert = 500;

}  // namespace

Status FleetIndex::AddKnownHost(const std::string& host_id) {
  // A host's row once per connection (it is never deleted; this cache and
  // the partitions' are dropped on an error, e.g. a database recreated
  // under us, so the retry re-creates them).
  if (std::find(hosts_known_.begin(), hosts_known_.end(), host_id) != hosts_known_.end()) {
    return OkStatus();
  }
  RETURN_IF_ERROR(Exec("INSERT INTO hosts (host_id) VALUES ($1) ON CONFLICT DO NOTHING", {host_id},
                       "adding the host")
                      .status());
  hosts_known_.push_back(host_id);
  return OkStatus();
}

Status FleetIndex::AddCrashRows(const IndexRecord& rec, const std::string& id_time,
                                const IndexCrash& crash) {
  const CrashSignature& sig = crash.signature;
  RETURN_IF_ERROR(Exec("INSERT INTO signatures (signature_id, title, frames) "
                       "VALUES ($1, $2, $3::jsonb) ON CONFLICT DO NOTHING",
                       {sig.id, sig.title, json::Dump(sig.ToJson()["frames"])},
                       "adding the crash signature")
                      .status());
  std::vector<std::pair<std::string, std::string>> builds = {{crash.build_id, crash.executable}};
  for (const auto& p : crash.processes) builds.emplace_back(p.build_id, p.executable);
  for (const auto& [bid, exe] : builds) {
    if (bid.empty()) continue;
    RETURN_IF_ERROR(Exec("INSERT INTO build_ids (build_id, executable) VALUES ($1, $2) "
                         "ON CONFLICT DO NOTHING",
                         {BoundedText(bid, 128), BoundedText(exe, 4096)}, "adding a build-id")
                        .status());
  }
  RETURN_IF_ERROR(
      Exec("INSERT INTO crashes (host_id, record_id, created_at, time_ns, pid, comm, signal, "
           "signal_name, executable, build_id, signature_id, cgroup, unit, container_runtime, "
           "container_id, pod_uid) VALUES ($1, $2, to_timestamp($3::bigint), $4, $5, $6, $7, "
           "$8, $9, $10, $11, $12, $13, $14, $15, $16)",
           Concat({rec.host_id, rec.record_id, id_time, std::to_string(rec.time_ns),
                   std::to_string(crash.pid), BoundedText(crash.comm, 64),
                   std::to_string(crash.signal), BoundedText(crash.signal_name, 32),
                   BoundedText(crash.executable, 4096), OrNull(BoundedText(crash.build_id, 128)),
                   sig.id},
                  WhereParams(crash.where)),
           "adding the crash")
          .status());
  int ord = 0;
  for (const auto& p : crash.processes) {
    RETURN_IF_ERROR(
        Exec("INSERT INTO crash_processes (host_id, record_id, created_at, ord, pid, comm, "
             "executable, build_id, cgroup, unit, container_runtime, container_id, pod_uid) "
             "VALUES ($1, $2, to_timestamp($3::bigint), $4, $5, $6, $7, $8, $9, $10, $11, $12, "
             "$13)",
             Concat({rec.host_id, rec.record_id, id_time, std::to_string(ord++),
                     std::to_string(p.pid), BoundedText(p.comm, 64),
                     BoundedText(p.executable, 4096), OrNull(BoundedText(p.build_id, 128))},
                    WhereParams(p.where)),
             "adding a crashed process")
            .status());
  }
  return OkStatus();
}

StatusOr<bool> FleetIndex::AddRecord(const IndexRecord& rec, const IndexCrash* crash) {
  ASSIGN_OR_RETURN(int64_t id_s, CheckRecord(rec));
  RETURN_IF_ERROR(EnsurePartitions(id_s));
  RETURN_IF_ERROR(Ready());
  RETURN_IF_ERROR(AddKnownHost(rec.host_id));
  // A record without a crash is one statement (autocommit: one round trip);
  // with a crash, its rows go in one transaction with the record's.
  Transaction tx(conn_.get());
  if (crash != nullptr) RETURN_IF_ERROR(tx.Begin());
  const std::string id_time = std::to_string(id_s);
  auto r = Exec(
      "INSERT INTO records (host_id, record_id, created_at, time_ns, kind, object_key, "
      "sha256, bytes) VALUES ($1, $2, to_timestamp($3::bigint), $4, $5, $6, $7, $8) "
      "ON CONFLICT DO NOTHING RETURNING 1",
      {rec.host_id, rec.record_id, id_time, std::to_string(rec.time_ns), BoundedText(rec.kind, 32),
       rec.object_key, rec.sha256, std::to_string(rec.bytes)},
      "adding the record");
  if (!r.ok()) {
    hosts_known_.clear();
    months_ready_.clear();
    return r.status();
  }
  if (PQntuples(r->get()) == 0) return false;  // there already: nothing else to add
  if (crash == nullptr) return true;
  RETURN_IF_ERROR(AddCrashRows(rec, id_time, *crash));
  RETURN_IF_ERROR(tx.Commit());
  return true;
}

StatusOr<std::vector<bool>> FleetIndex::AddRecords(const std::vector<IndexItem>& items) {
  std::vector<int64_t> id_s;
  for (const auto& it : items) {
    ASSIGN_OR_RETURN(int64_t s, CheckRecord(it.record));
    id_s.push_back(s);
  }
  for (int64_t s : id_s) RETURN_IF_ERROR(EnsurePartitions(s));
  RETURN_IF_ERROR(Ready());
  for (const auto& it : items) RETURN_IF_ERROR(AddKnownHost(it.record.host_id));
  std::vector<bool> added(items.size(), false);
  Transaction tx(conn_.get());
  RETURN_IF_ERROR(tx.Begin());
  for (size_t first = 0; first < items.size(); first += kRowsPerInsert) {
    const size_t last = std::min(items.size(), first + kRowsPerInsert);
    std::string sql =
        "INSERT INTO records (host_id, record_id, created_at, time_ns, kind, object_key, "
        "sha256, bytes) VALUES ";
    std::vector<std::optional<std::string>> params;
    for (size_t i = first; i < last; ++i) {
      const IndexRecord& rec = items[i].record;
      const size_t p = params.size();
      // Placeholders only: every value is a parameter.
      sql += fmt::format("{}(${}, ${}, to_timestamp(${}::bigint), ${}, ${}, ${}, ${}, ${})",
                         i == first ? "" : ", ", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6, p + 7,
                         p + 8);
      params.insert(params.end(), {rec.host_id, rec.record_id, std::to_string(id_s[i]),
                                   std::to_string(rec.time_ns), BoundedText(rec.kind, 32),
                                   rec.object_key, rec.sha256, std::to_string(rec.bytes)});
    }
    sql += " ON CONFLICT DO NOTHING RETURNING host_id, record_id";
    auto r = Exec(sql, params, "adding records");
    if (!r.ok()) {
      hosts_known_.clear();
      months_ready_.clear();
      return r.status();
    }
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      const std::string host = Cell(r->get(), row, 0), id = Cell(r->get(), row, 1);
      for (size_t i = first; i < last; ++i) {
        if (!added[i] && items[i].record.record_id == id && items[i].record.host_id == host) {
          added[i] = true;
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (added[i] && items[i].crash) {
      RETURN_IF_ERROR(AddCrashRows(items[i].record, std::to_string(id_s[i]), *items[i].crash));
    }
  }
  RETURN_IF_ERROR(tx.Commit());
  return added;
}

namespace {
// The WHERE clause every crash query shares: $1 host ('' = all), $2 since
// (ns). created_at (whole seconds, the partition key) prunes partitions;
// time_ns is the exact bound.
// $4 unit, $5 container id prefix, $6 cgroup subtree ('' = any).
constexpr const char* kCrashFilter =
    " WHERE ($1 = '' OR c.host_id = $1)"
    " AND c.created_at >= to_timestamp(floor($2::bigint / 1e9))"
    " AND c.time_ns >= $2::bigint"
    " AND ($4 = '' OR c.unit = $4)"
    " AND ($5 = '' OR starts_with(c.container_id, $5))"
    " AND ($6 = '' OR c.cgroup = $6 OR starts_with(c.cgroup, rtrim($6, '/') || '/')) ";

Params CrashQueryParams(const CrashQuery& q) {
  // "docker://<id>" as crash list shows it, or the id (any prefix of it).
  std::string container = q.container;
  if (size_t sep = container.find("://"); sep != std::string::npos) {
    container = container.substr(sep + 3);
  }
  // "/a/" is the subtree of "/a", as the local --cgroup reads it.
  std::string cg = q.cgroup;
  while (cg.size() > 1 && cg.back() == '/') cg.pop_back();
  return {q.host, std::to_string(q.since_ns), std::to_string(q.limit), q.unit, container, cg};
}
}  // namespace

StatusOr<std::vector<CrashListRow>> FleetIndex::ListCrashes(const CrashQuery& q) {
  RETURN_IF_ERROR(Ready());
  ASSIGN_OR_RETURN(
      PgResult r,
      Exec(std::string("SELECT c.host_id, c.record_id, c.time_ns, c.comm, c.signal_name, "
                       "c.executable, c.signature_id, s.title, c.unit, c.container_runtime, "
                       "c.container_id FROM crashes c JOIN signatures s USING (signature_id)") +
               kCrashFilter + "ORDER BY c.time_ns DESC, c.host_id LIMIT $3",
           CrashQueryParams(q), "listing crashes"));
  std::vector<CrashListRow> rows;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows.push_back({Cell(r.get(), i, 0), Cell(r.get(), i, 1), CellInt(r.get(), i, 2),
                    Cell(r.get(), i, 3), Cell(r.get(), i, 4), Cell(r.get(), i, 5),
                    Cell(r.get(), i, 6), Cell(r.get(), i, 7), Cell(r.get(), i, 8),
                    Cell(r.get(), i, 9), Cell(r.get(), i, 10)});
  }
  return rows;
}

StatusOr<std::vector<CrashGroupRow>> FleetIndex::GroupCrashes(const CrashQuery& q) {
  RETURN_IF_ERROR(Ready());
  ASSIGN_OR_RETURN(
      PgResult r,
      Exec(std::string("SELECT c.signature_id, s.title, count(*), count(DISTINCT c.host_id), "
                       "min(c.time_ns), max(c.time_ns), "
                       "(array_agg(c.host_id ORDER BY c.time_ns DESC))[1], "
                       "(array_agg(c.record_id ORDER BY c.time_ns DESC))[1] "
                       "FROM crashes c JOIN signatures s USING (signature_id)") +
               kCrashFilter +
               "GROUP BY c.signature_id, s.title ORDER BY count(*) DESC, max(c.time_ns) DESC "
               "LIMIT $3",
           CrashQueryParams(q), "grouping crashes"));
  std::vector<CrashGroupRow> rows;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows.push_back({Cell(r.get(), i, 0), Cell(r.get(), i, 1), CellInt(r.get(), i, 2),
                    CellInt(r.get(), i, 3), CellInt(r.get(), i, 4), CellInt(r.get(), i, 5),
                    Cell(r.get(), i, 6), Cell(r.get(), i, 7)});
  }
  return rows;
}

StatusOr<std::pair<std::string, std::string>> FleetIndex::ResolveId(const std::string& id,
                                                                    bool crash_only) {
  RETURN_IF_ERROR(Ready());
  std::string host, rid = id;
  if (auto slash = id.find('/'); slash != std::string::npos) {
    host = id.substr(0, slash);
    rid = id.substr(slash + 1);
  }
  if (rid.empty()) return InvalidArgument("empty record id");
  // A prefix: LIKE's wildcards in it are matched literally.
  std::string pattern;
  for (char ch : rid) {
    if (ch == '%' || ch == '_' || ch == '\\') pattern += '\\';
    pattern += ch;
  }
  pattern += '%';
  const std::string table = crash_only ? "crashes" : "records";
  ASSIGN_OR_RETURN(
      PgResult r,
      Exec("SELECT host_id, record_id FROM " + table +
               " WHERE ($1 = '' OR host_id = $1) AND (record_id = $2 OR record_id LIKE $3) "
               "ORDER BY record_id = $2 DESC LIMIT 3",
           {host, rid, pattern}, "looking up a record"));
  const int n = PQntuples(r.get());
  const std::string what = crash_only ? "crash" : "record";
  if (n == 0) return NotFound(fmt::format("no {} '{}' in the fleet index", what, id));
  if (n > 1 && Cell(r.get(), 0, 1) != rid) {
    return InvalidArgument(
        fmt::format("'{}' is ambiguous: several {}s match ({}/{}, {}/{}{}); "
                    "give more of the id or HOST/ID",
                    id, what, Cell(r.get(), 0, 0), Cell(r.get(), 0, 1), Cell(r.get(), 1, 0),
                    Cell(r.get(), 1, 1), n > 2 ? ", ..." : ""));
  }
  if (n > 1 && Cell(r.get(), 1, 1) == rid) {
    return InvalidArgument(fmt::format("'{}' names a {} on several hosts ({}, {}): give HOST/ID",
                                       id, what, Cell(r.get(), 0, 0), Cell(r.get(), 1, 0)));
  }
  return std::make_pair(Cell(r.get(), 0, 0), Cell(r.get(), 0, 1));
}

StatusOr<IndexRecord> FleetIndex::GetRecord(const std::string& id) {
  ASSIGN_OR_RETURN(auto key, ResolveId(id, false));
  ASSIGN_OR_RETURN(PgResult r, Exec("SELECT kind, time_ns, object_key, sha256, bytes FROM records "
                                    "WHERE host_id = $1 AND record_id = $2",
                                    {key.first, key.second}, "reading a record"));
  if (PQntuples(r.get()) != 1) return NotFound("record " + id + " vanished from the index");
  IndexRecord rec;
  rec.host_id = key.first;
  rec.record_id = key.second;
  rec.kind = Cell(r.get(), 0, 0);
  rec.time_ns = CellInt(r.get(), 0, 1);
  rec.object_key = Cell(r.get(), 0, 2);
  rec.sha256 = Cell(r.get(), 0, 3);
  rec.bytes = static_cast<uint64_t>(CellInt(r.get(), 0, 4));
  return rec;
}

StatusOr<CrashDetail> FleetIndex::GetCrash(const std::string& id) {
  ASSIGN_OR_RETURN(auto key, ResolveId(id, true));
  CrashDetail d;
  ASSIGN_OR_RETURN(d.record, GetRecord(key.first + "/" + key.second));
  ASSIGN_OR_RETURN(
      PgResult r,
      Exec("SELECT c.pid, c.comm, c.signal, c.signal_name, c.executable, c.build_id, "
           "c.signature_id, s.title, s.frames::text, "
           "(SELECT count(*) FROM crashes g WHERE g.signature_id = c.signature_id), "
           "(SELECT count(DISTINCT host_id) FROM crashes g WHERE g.signature_id = c.signature_id), "
           "c.cgroup, c.unit, c.container_runtime, c.container_id, c.pod_uid "
           "FROM crashes c JOIN signatures s USING (signature_id) "
           "WHERE c.host_id = $1 AND c.record_id = $2",
           {key.first, key.second}, "reading a crash"));
  if (PQntuples(r.get()) != 1) return NotFound("crash " + id + " vanished from the index");
  IndexCrash& c = d.crash;
  c.pid = static_cast<uint32_t>(CellInt(r.get(), 0, 0));
  c.comm = Cell(r.get(), 0, 1);
  c.signal = static_cast<int>(CellInt(r.get(), 0, 2));
  c.signal_name = Cell(r.get(), 0, 3);
  c.executable = Cell(r.get(), 0, 4);
  c.build_id = Cell(r.get(), 0, 5);
  c.signature.id = Cell(r.get(), 0, 6);
  c.signature.title = Cell(r.get(), 0, 7);
  const nlohmann::json frames = json::ParseBounded(Cell(r.get(), 0, 8));
  if (frames.is_array()) {
    for (const auto& f : frames) {
      c.signature.frames.push_back({json::Str(f, "function"), json::Str(f, "module")});
    }
  }
  d.group_crashes = CellInt(r.get(), 0, 9);
  d.group_hosts = CellInt(r.get(), 0, 10);
  c.where = WhereFromRow(r.get(), 0, 11);
  ASSIGN_OR_RETURN(r, Exec("SELECT pid, comm, executable, build_id, cgroup, unit, "
                           "container_runtime, container_id, pod_uid FROM crash_processes "
                           "WHERE host_id = $1 AND record_id = $2 ORDER BY ord",
                           {key.first, key.second}, "reading a crash's processes"));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    c.processes.push_back({static_cast<uint32_t>(CellInt(r.get(), i, 0)), Cell(r.get(), i, 1),
                           Cell(r.get(), i, 2), Cell(r.get(), i, 3), WhereFromRow(r.get(), i, 4)});
  }
  return d;
}

StatusOr<std::vector<std::string>> FleetIndex::Partitions(const std::string& table) {
  RETURN_IF_ERROR(Ready());
  ASSIGN_OR_RETURN(PgResult r, Exec("SELECT c.relname FROM pg_inherits i "
                                    "JOIN pg_class c ON c.oid = i.inhrelid "
                                    "WHERE i.inhparent = to_regclass($1) ORDER BY 1",
                                    {table}, "listing partitions"));
  std::vector<std::string> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(Cell(r.get(), i, 0));
  return out;
}

}  // namespace flightrec::fleet
