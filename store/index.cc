#include "store/index.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/units.h"

namespace flightrec::store {
namespace {

// Each entry moves the schema from version i to i+1. Never edit a shipped
// entry: append a new one (docs/FORMAT.md, "Index migrations").
const char* const kMigrations[] = {
    // v0 → v1
    R"sql(
CREATE TABLE records(
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  created_ns INTEGER NOT NULL,
  start_ns INTEGER NOT NULL DEFAULT 0,
  end_ns INTEGER NOT NULL DEFAULT 0,
  host TEXT NOT NULL DEFAULT '',
  kernel TEXT NOT NULL DEFAULT '',
  boot_id TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL,
  file_size INTEGER NOT NULL,
  raw_size INTEGER NOT NULL,
  checksum TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'ok',
  meta TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX records_by_time ON records(created_ns);
CREATE INDEX records_by_kind ON records(kind, created_ns);
CREATE TABLE record_processes(
  record_id TEXT NOT NULL REFERENCES records(id) ON DELETE CASCADE,
  pid INTEGER NOT NULL,
  exe TEXT NOT NULL DEFAULT '',
  comm TEXT NOT NULL DEFAULT '',
  uid INTEGER
);
CREATE INDEX processes_by_pid ON record_processes(pid);
CREATE INDEX processes_by_exe ON record_processes(exe);
CREATE INDEX processes_by_record ON record_processes(record_id);
CREATE TABLE crashes(
  record_id TEXT PRIMARY KEY REFERENCES records(id) ON DELETE CASCADE,
  pid INTEGER NOT NULL,
  tid INTEGER NOT NULL DEFAULT 0,
  signal INTEGER NOT NULL DEFAULT 0,
  exe TEXT NOT NULL DEFAULT '',
  uid INTEGER NOT NULL DEFAULT 0,
  gid INTEGER NOT NULL DEFAULT 0,
  time_ns INTEGER NOT NULL DEFAULT 0,
  dumpable INTEGER NOT NULL DEFAULT 1,
  core_size INTEGER NOT NULL DEFAULT 0,
  truncated INTEGER NOT NULL DEFAULT 0,
  history TEXT NOT NULL DEFAULT ''
);
CREATE TABLE file_cookies(
  record_id TEXT NOT NULL REFERENCES records(id) ON DELETE CASCADE,
  build_id TEXT NOT NULL DEFAULT '',
  path TEXT NOT NULL DEFAULT '',
  dev INTEGER NOT NULL DEFAULT 0,
  ino INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX cookies_by_build_id ON file_cookies(build_id);
CREATE INDEX cookies_by_record ON file_cookies(record_id);
)sql",
    // v1 → v2: the uid a record belongs to, so retention reclaims space from
    // the user using the most (docs/FORMAT.md, "Retention"). A crash belongs
    // to the crashed process's uid, its history dump to the same uid.
    R"sql(
ALTER TABLE records ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;
UPDATE records SET owner_uid = coalesce(
  (SELECT c.uid FROM crashes c WHERE c.record_id = records.id),
  (SELECT c.uid FROM crashes c WHERE c.history = records.id AND c.history <> '' LIMIT 1), 0);
CREATE INDEX records_by_owner ON records(owner_uid, created_ns);
)sql",
    // v2 → v3: retention's totals kept by triggers, so that a commit reads
    // one row per owner instead of summing every record (issue 17); and the
    // stamp of the last reconcile of the store directory with this index
    // (Store::Open skips its walk while the directory still matches it).
    R"sql(
CREATE TABLE usage_totals(
  owner_uid INTEGER PRIMARY KEY,
  count INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
INSERT INTO usage_totals SELECT owner_uid, count(*), sum(file_size) FROM records
  WHERE state <> 'missing' GROUP BY owner_uid;
CREATE TRIGGER usage_on_insert AFTER INSERT ON records WHEN NEW.state <> 'missing' BEGIN
  INSERT INTO usage_totals VALUES(NEW.owner_uid, 1, NEW.file_size) ON CONFLICT(owner_uid)
    DO UPDATE SET count = count + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER usage_on_delete AFTER DELETE ON records WHEN OLD.state <> 'missing' BEGIN
  UPDATE usage_totals SET count = count - 1, bytes = bytes - OLD.file_size
    WHERE owner_uid = OLD.owner_uid;
END;
CREATE TRIGGER usage_on_update AFTER UPDATE OF state, owner_uid, file_size ON records BEGIN
  UPDATE usage_totals SET count = count - 1, bytes = bytes - OLD.file_size
    WHERE owner_uid = OLD.owner_uid AND OLD.state <> 'missing';
  INSERT INTO usage_totals SELECT NEW.owner_uid, 1, NEW.file_size WHERE NEW.state <> 'missing'
    ON CONFLICT(owner_uid) DO UPDATE SET count = count + 1, bytes = bytes + excluded.bytes;
END;
CREATE TABLE reconciled(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  stamp TEXT NOT NULL,
  full_ns INTEGER NOT NULL
);
)sql",
};

class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK && s_ != nullptr; }
  sqlite3_stmt* get() { return s_; }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  // For the next row of a statement run once per row: as freshly prepared
  // (every parameter NULL), without preparing it again.
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string Text(int i) {
    auto* t = sqlite3_column_text(s_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

Status SqlError(sqlite3* db, const std::string& what) {
  int code = sqlite3_errcode(db);
  std::string msg = fmt::format("index: {}: {}", what, sqlite3_errmsg(db));
  if (code == SQLITE_FULL) return Status(StatusCode::kNoSpace, msg + " (no space)", ENOSPC);
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return Unavailable(msg);
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return Corrupt(msg);
  if (code == SQLITE_READONLY || code == SQLITE_PERM || code == SQLITE_AUTH) {
    return Status(StatusCode::kPermissionDenied, msg);
  }
  return Internal(msg);
}

RecordRow ReadRow(Stmt& s) {
  RecordRow r;
  r.id = s.Text(0);
  r.kind = s.Text(1);
  r.reason = s.Text(2);
  r.created_ns = sqlite3_column_int64(s.get(), 3);
  r.start_ns = sqlite3_column_int64(s.get(), 4);
  r.end_ns = sqlite3_column_int64(s.get(), 5);
  r.host = s.Text(6);
  r.kernel = s.Text(7);
  r.boot_id = s.Text(8);
  r.file = s.Text(9);
  r.file_size = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 10));
  r.raw_size = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 11));
  r.checksum = s.Text(12);
  r.state = s.Text(13);
  // Bounded like a record's TOC: the index is a cache of untrusted files.
  // NULL when the query left meta out (ListQuery::with_meta).
  if (sqlite3_column_type(s.get(), 14) == SQLITE_NULL) {
    r.meta = nlohmann::json::object();
  } else {
    auto meta = json::ParseUntrusted(s.Text(14), "index meta");
    r.meta = meta.ok() && meta->is_object() ? std::move(*meta) : nlohmann::json::object();
  }
  int64_t owner = sqlite3_column_int64(s.get(), 15);
  r.owner_uid = owner >= 0 && owner <= UINT32_MAX ? static_cast<uint32_t>(owner) : 0;
  return r;
}

// A read-only open of a version 1 index (which it must not migrate) has no
// owner_uid column: it reads as 0 there.
std::string RowColumns(bool has_owner, bool with_meta = true) {
  return fmt::format(
      "r.id, r.kind, r.reason, r.created_ns, r.start_ns, r.end_ns, r.host, r.kernel, r.boot_id, "
      "r.file, r.file_size, r.raw_size, r.checksum, r.state, {}, {}",
      with_meta ? "r.meta" : "NULL", has_owner ? "r.owner_uid" : "0");
}

// The objects in meta[key] if it is an array (anything else in it skipped):
// how the index reads a record's per-process and per-file lists.
std::vector<std::reference_wrapper<const nlohmann::json>> ObjectsIn(const nlohmann::json& meta,
                                                                    const char* key) {
  std::vector<std::reference_wrapper<const nlohmann::json>> out;
  if (!meta.contains(key) || !meta[key].is_array()) return out;
  for (const auto& v : meta[key]) {
    if (v.is_object()) out.push_back(std::cref(v));
  }
  return out;
}

}  // namespace

nlohmann::json RecordRow::ToJson() const {
  return {{"id", id},
          {"kind", kind},
          {"reason", reason},
          {"created_ns", created_ns},
          {"start_ns", start_ns},
          {"end_ns", end_ns},
          {"host", host},
          {"kernel", kernel},
          {"boot_id", boot_id},
          {"file", file},
          {"file_size", file_size},
          {"raw_size", raw_size},
          {"checksum", checksum},
          {"state", state},
          {"owner_uid", owner_uid},
          {"meta", meta}};
}

StatusOr<std::unique_ptr<Index>> Index::Open(const std::string& path, bool read_only) {
  std::unique_ptr<Index> idx(new Index());
  idx->path_ = path;
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
  if (sqlite3_open_v2(path.c_str(), &idx->db_, flags, nullptr) != SQLITE_OK) {
    // The index of a root store is root's (0600): say so plainly, so that
    // the CLI can fall back to the records this user was granted.
    if (access(path.c_str(), R_OK) != 0 && errno == EACCES) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("index {} is not readable by you", path), EACCES);
    }
    Status st = SqlError(idx->db_, "opening " + path);
    return st;
  }
  // 10 s: a crash handler may wait behind a daemon's commit; both are short.
  sqlite3_busy_timeout(idx->db_, 10000);
  sqlite3_extended_result_codes(idx->db_, 0);
  // The -wal and -shm files stay when the last connection closes (the WAL
  // emptied, see journal_size_limit below): otherwise every process that
  // opens the store would create and remove two names in the store
  // directory, and Store::Open would never find the directory as the last
  // reconcile left it (docs/FORMAT.md, "Commit and recovery").
  int persist = 1;
  sqlite3_file_control(idx->db_, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  if (read_only) {
    RETURN_IF_ERROR(idx->Exec("PRAGMA query_only=ON"));
    Stmt v(idx->db_, "PRAGMA user_version");
    if (v.ok() && sqlite3_step(v.get()) == SQLITE_ROW) {
      idx->has_owner_ = sqlite3_column_int(v.get(), 0) >= 2;
      idx->has_totals_ = sqlite3_column_int(v.get(), 0) >= 3;
    }
    return idx;
  }
  // Switching a new (rollback-journal) database to WAL takes an exclusive
  // lock. When several processes open a fresh store at once, SQLite answers
  // SQLITE_BUSY at once, without calling the busy handler, to whoever would
  // deadlock (it holds SHARED and wants more while another waits): retry
  // those, within the same 10 s a busy handler would wait.
  for (int attempt = 0;; ++attempt) {
    Status st = idx->Exec("PRAGMA journal_mode=WAL");
    if (st.ok()) break;
    if (sqlite3_errcode(idx->db_) != SQLITE_BUSY || attempt >= 1000) return st;
    usleep(static_cast<useconds_t>(1000 + (getpid() + attempt * 7919) % 9000));
  }
  // NORMAL in WAL mode: a committed transaction survives a process crash; the
  // record file itself was fsynced before its row is written.
  RETURN_IF_ERROR(idx->Exec("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(idx->Exec("PRAGMA foreign_keys=ON"));
  // A persistent WAL is truncated to this after a checkpoint, and to 0 by the
  // last connection's close (only when a limit is set).
  RETURN_IF_ERROR(idx->Exec("PRAGMA journal_size_limit=4194304"));
  RETURN_IF_ERROR(idx->Migrate());
  idx->has_owner_ = true;
  idx->has_totals_ = true;
  return idx;
}

Index::~Index() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Index::SkipCheckpointOnClose() {
  (void)sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

Status Index::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return SqlError(db_, msg);
  }
  return OkStatus();
}

Status Index::Migrate() {
  // BEGIN IMMEDIATE serialises concurrent first opens: only one process runs
  // a migration; the others see the new user_version afterwards.
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Stmt v(db_, "PRAGMA user_version");
  int version = 0;
  if (v.ok() && sqlite3_step(v.get()) == SQLITE_ROW) version = sqlite3_column_int(v.get(), 0);
  constexpr int kNum = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));
  if (version > kNum) {
    (void)Exec("ROLLBACK");
    return Unsupported(fmt::format(
        "index {} has schema version {}, newer than this flightrec knows ({}); upgrade flightrec",
        path_, version, kNum));
  }
  for (int i = version; i < kNum; ++i) {
    Status st = Exec(kMigrations[i]);
    if (st.ok()) st = Exec(fmt::format("PRAGMA user_version={}", i + 1));
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st.Annotate(fmt::format("migrating index {} to version {}", path_, i + 1));
    }
  }
  // Every insert of a history dump looks up the crash that refers to it
  // (Upsert's owner_uid), and v2's migration did too: without this index that
  // is a scan of every crash per commit, which made a commit's cost grow
  // with the store (issue 17). IF NOT EXISTS: indexes of any version get it;
  // older readers ignore it.
  // records_usage: retention's totals summed from this covering index alone
  // where usage_totals is missing (a read-only open of a version 2 index): a
  // scan of the table reads every row's meta with it (~1 KiB each).
  // crashes_by_pid and crashes_by_exe: `list --pid/--exe` finds a process's
  // crashes without reading every crash.
  Status st = Exec("CREATE INDEX IF NOT EXISTS crashes_by_history ON crashes(history)");
  if (st.ok()) st = Exec("CREATE INDEX IF NOT EXISTS crashes_by_pid ON crashes(pid)");
  if (st.ok()) st = Exec("CREATE INDEX IF NOT EXISTS crashes_by_exe ON crashes(exe)");
  if (st.ok()) {
    st = Exec(
        "CREATE INDEX IF NOT EXISTS records_usage ON records(owner_uid, state, file_size, "
        "created_ns)");
  }
  if (!st.ok()) {
    (void)Exec("ROLLBACK");
    return st.Annotate(fmt::format("indexing {}", path_));
  }
  return Exec("COMMIT");
}

Status Index::Upsert(const RecordRow& row) {
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [&](const std::string& what) {
    Status st = SqlError(db_, what);
    (void)Exec("ROLLBACK");
    return st;
  };
  {
    Stmt del(db_, "DELETE FROM records WHERE id = ?");
    del.Bind(1, row.id);
    if (!del.ok() || sqlite3_step(del.get()) != SQLITE_DONE) return fail("replacing " + row.id);
  }
  Stmt s(db_,
         "INSERT INTO records(id, kind, reason, created_ns, start_ns, end_ns, host, kernel, "
         "boot_id, file, file_size, raw_size, checksum, state, meta, owner_uid) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,coalesce(?16,"
         "(SELECT c.uid FROM crashes c WHERE c.history = ?1 LIMIT 1), 0))");
  if (!s.ok()) return fail("preparing insert");
  s.Bind(1, row.id);
  s.Bind(2, row.kind);
  s.Bind(3, row.reason);
  s.Bind(4, row.created_ns);
  s.Bind(5, row.start_ns);
  s.Bind(6, row.end_ns);
  s.Bind(7, row.host);
  s.Bind(8, row.kernel);
  s.Bind(9, row.boot_id);
  s.Bind(10, row.file);
  s.Bind(11, static_cast<int64_t>(row.file_size));
  s.Bind(12, static_cast<int64_t>(row.raw_size));
  s.Bind(13, row.checksum);
  s.Bind(14, row.state.empty() ? std::string("ok") : row.state);
  s.Bind(15, json::Dump(row.meta));  // never throws on non-UTF-8 text
  if (auto owner = OwnerFromMeta(row.meta)) s.Bind(16, static_cast<int64_t>(*owner));
  if (sqlite3_step(s.get()) != SQLITE_DONE) return fail("inserting " + row.id);

  const auto& meta = row.meta;
  // One statement for all rows: a dump of a busy host names thousands of
  // processes, and preparing the insert for each was most of a commit.
  Stmt ps(db_, "INSERT INTO record_processes(record_id, pid, exe, comm, uid) VALUES(?,?,?,?,?)");
  for (const nlohmann::json& p : ObjectsIn(meta, "processes")) {
    ps.Reset();
    ps.Bind(1, row.id);
    ps.Bind(2, json::Get<int64_t>(p, "pid", 0));
    ps.Bind(3, json::Str(p, "exe"));
    ps.Bind(4, json::Str(p, "comm"));
    if (p.contains("uid") && p["uid"].is_number_integer())
      ps.Bind(5, json::Get<int64_t>(p, "uid", 0));
    if (sqlite3_step(ps.get()) != SQLITE_DONE) return fail("indexing processes of " + row.id);
  }
  if (meta.contains("crash") && meta["crash"].is_object()) {
    const auto& c = meta["crash"];
    Stmt cs(db_,
            "INSERT INTO crashes(record_id, pid, tid, signal, exe, uid, gid, time_ns, dumpable, "
            "core_size, truncated, history) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    cs.Bind(1, row.id);
    cs.Bind(2, json::Get<int64_t>(c, "pid", 0));
    cs.Bind(3, json::Get<int64_t>(c, "tid", 0));
    cs.Bind(4, json::Get<int64_t>(c, "signal", 0));
    cs.Bind(5, json::Str(c, "exe"));
    cs.Bind(6, json::Get<int64_t>(c, "uid", 0));
    cs.Bind(7, json::Get<int64_t>(c, "gid", 0));
    cs.Bind(8, json::Get<int64_t>(c, "time_ns", 0));
    cs.Bind(9, static_cast<int64_t>(json::Get<bool>(c, "dumpable", true) ? 1 : 0));
    cs.Bind(10, json::Get<int64_t>(c, "core_size", 0));
    cs.Bind(11, static_cast<int64_t>(json::Get<bool>(c, "truncated", false) ? 1 : 0));
    std::string history = json::Str(c, "history");
    cs.Bind(12, history);
    if (sqlite3_step(cs.get()) != SQLITE_DONE) return fail("indexing crash of " + row.id);
    // The crash's history dump (written by recorderd, as root) is the crashed
    // user's too: retention charges it to them.
    if (!history.empty() && c.contains("uid") && c["uid"].is_number_integer()) {
      Stmt hs(db_, "UPDATE records SET owner_uid = ?1 WHERE id = ?2 AND kind <> 'crash'");
      hs.Bind(1, json::Get<int64_t>(c, "uid", 0));
      hs.Bind(2, history);
      if (!hs.ok() || sqlite3_step(hs.get()) != SQLITE_DONE) {
        return fail("setting the owner of " + history);
      }
    }
  }
  Stmt ks(db_, "INSERT INTO file_cookies(record_id, build_id, path, dev, ino) VALUES(?,?,?,?,?)");
  for (const nlohmann::json& k : ObjectsIn(meta, "cookies")) {
    ks.Reset();
    ks.Bind(1, row.id);
    ks.Bind(2, json::Str(k, "build_id"));
    ks.Bind(3, json::Str(k, "path"));
    ks.Bind(4, json::Get<int64_t>(k, "dev", 0));
    ks.Bind(5, json::Get<int64_t>(k, "ino", 0));
    if (sqlite3_step(ks.get()) != SQLITE_DONE) return fail("indexing cookies of " + row.id);
  }
  return Exec("COMMIT");
}

Status Index::SetState(const std::string& id, const std::string& state) {
  Stmt s(db_, "UPDATE records SET state = ? WHERE id = ?");
  s.Bind(1, state);
  s.Bind(2, id);
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_DONE) return SqlError(db_, "updating " + id);
  return OkStatus();
}

Status Index::Delete(const std::string& id) {
  Stmt s(db_, "DELETE FROM records WHERE id = ?");
  s.Bind(1, id);
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_DONE) return SqlError(db_, "deleting " + id);
  return OkStatus();
}

StatusOr<std::vector<RecordRow>> Index::List(const ListQuery& q) {
  std::string sql = fmt::format("SELECT {} FROM records r", RowColumns(has_owner_, q.with_meta));
  std::vector<std::string> where;
  if (q.since_ns) where.push_back("r.created_ns >= ?1");
  if (q.until_ns) where.push_back("r.created_ns <= ?2");
  if (q.kind) where.push_back("r.kind = ?3");
  // The records of one pid (or exe) looked up through the indexes on both
  // tables, not a test of every record (an OR of two EXISTS is evaluated
  // per row: 0.3 s at 100 000 records, issue 17).
  if (q.pid) {
    where.push_back(
        "r.id IN (SELECT p.record_id FROM record_processes p WHERE p.pid = ?4 "
        "UNION SELECT c.record_id FROM crashes c WHERE c.pid = ?4)");
  }
  if (q.exe) {
    where.push_back(
        "r.id IN (SELECT p.record_id FROM record_processes p WHERE p.exe = ?5 "
        "UNION SELECT c.record_id FROM crashes c WHERE c.exe = ?5)");
  }
  if (q.uid) {
    where.push_back(
        "EXISTS (SELECT 1 FROM crashes c WHERE c.record_id = r.id AND c.uid = ?6 "
        "AND c.dumpable = 1)");
  }
  for (size_t i = 0; i < where.size(); ++i) sql += (i == 0 ? " WHERE " : " AND ") + where[i];
  sql += q.newest_first ? " ORDER BY r.created_ns DESC, r.id DESC" : " ORDER BY r.created_ns, r.id";
  if (q.limit >= 0) sql += fmt::format(" LIMIT {}", q.limit);
  Stmt s(db_, sql);
  if (!s.ok()) return SqlError(db_, "listing records");
  if (q.since_ns) s.Bind(1, *q.since_ns);
  if (q.until_ns) s.Bind(2, *q.until_ns);
  if (q.kind) s.Bind(3, *q.kind);
  if (q.pid) s.Bind(4, static_cast<int64_t>(*q.pid));
  if (q.exe) s.Bind(5, *q.exe);
  if (q.uid) s.Bind(6, static_cast<int64_t>(*q.uid));
  std::vector<RecordRow> rows;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) rows.push_back(ReadRow(s));
  if (rc != SQLITE_DONE) return SqlError(db_, "listing records");
  return rows;
}

StatusOr<std::vector<OwnerUsage>> Index::Usage() {
  // From the totals the triggers keep (one row per owner), and each owner's
  // oldest record through records_by_owner: no scan of the records. A
  // read-only open of an older index (no totals) sums the records instead.
  const std::string sql =
      has_totals_
          ? "SELECT t.owner_uid, t.count, t.bytes, (SELECT r.created_ns FROM records r WHERE "
            "r.owner_uid = t.owner_uid AND r.state <> 'missing' ORDER BY r.created_ns LIMIT 1) "
            "FROM usage_totals t WHERE t.count > 0"
          : fmt::format(
                "SELECT {}, count(*), sum(file_size), min(created_ns) FROM records "
                "WHERE state <> 'missing' GROUP BY 1",
                has_owner_ ? "owner_uid" : "0");
  Stmt s(db_, sql);
  if (!s.ok()) return SqlError(db_, "summing the store's usage");
  std::vector<OwnerUsage> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    int64_t owner = sqlite3_column_int64(s.get(), 0);
    OwnerUsage u;
    u.owner_uid = owner >= 0 && owner <= UINT32_MAX ? static_cast<uint32_t>(owner) : 0;
    u.count = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 1));
    u.bytes = static_cast<uint64_t>(std::max<int64_t>(0, sqlite3_column_int64(s.get(), 2)));
    u.oldest_created_ns = sqlite3_column_int64(s.get(), 3);
    out.push_back(u);
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "summing the store's usage");
  return out;
}

StatusOr<std::optional<Index::Reconciled>> Index::GetReconciled() {
  Stmt s(db_, "SELECT stamp, full_ns FROM reconciled WHERE id = 1");
  if (!s.ok()) return SqlError(db_, "reading the reconcile stamp");
  int rc = sqlite3_step(s.get());
  if (rc == SQLITE_DONE) return std::optional<Reconciled>();
  if (rc != SQLITE_ROW) return SqlError(db_, "reading the reconcile stamp");
  return std::optional<Reconciled>(Reconciled{s.Text(0), sqlite3_column_int64(s.get(), 1)});
}

Status Index::SetReconciled(const std::optional<Reconciled>& r) {
  Stmt s(db_, r ? "INSERT OR REPLACE INTO reconciled(id, stamp, full_ns) VALUES(1, ?1, ?2)"
                : "DELETE FROM reconciled");
  if (r) {
    s.Bind(1, r->stamp);
    s.Bind(2, r->full_ns);
  }
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_DONE) {
    return SqlError(db_, "writing the reconcile stamp");
  }
  return OkStatus();
}

StatusOr<RecordRow> Index::Resolve(const std::string& ref) {
  if (ref.empty()) return InvalidArgument("empty record id");
  if (ref[0] == '-') {
    int n = 0;
    try {
      n = std::stoi(ref.substr(1));
    } catch (...) {
      return InvalidArgument(
          fmt::format("invalid record reference '{}' (use an id, a unique "
                      "prefix, or -1 for the newest)",
                      ref));
    }
    if (n < 1) return InvalidArgument(fmt::format("invalid record reference '{}'", ref));
    ListQuery q;
    q.newest_first = true;
    q.limit = n;
    ASSIGN_OR_RETURN(auto rows, List(q));
    if (static_cast<int>(rows.size()) < n) {
      return NotFound(fmt::format("no record {}: the store holds {} record(s)", ref, rows.size()));
    }
    return rows[static_cast<size_t>(n - 1)];
  }
  // Any part of an id names it, as the user sees it in `recorder list`: the
  // timestamp, or the random suffix alone (`report 67f484`). An exact id
  // wins; then a unique substring; then, for ids typed before substrings
  // were accepted, a unique prefix among several substring matches.
  constexpr int kShown = 8;  // candidates named in an ambiguity error
  {
    // The whole id (what scripts and `list` give): one primary-key lookup,
    // where the substring search below must read every id.
    Stmt exact(db_,
               fmt::format("SELECT {} FROM records r WHERE r.id = ?1", RowColumns(has_owner_)));
    if (!exact.ok()) return SqlError(db_, "looking up " + ref);
    exact.Bind(1, ref);
    if (sqlite3_step(exact.get()) == SQLITE_ROW) return ReadRow(exact);
  }
  Stmt s(db_, fmt::format("SELECT {} FROM records r WHERE instr(r.id, ?1) > 0 "
                          "ORDER BY r.id LIMIT {}",
                          RowColumns(has_owner_), kShown + 1));
  if (!s.ok()) return SqlError(db_, "looking up " + ref);
  s.Bind(1, ref);
  std::vector<RecordRow> rows;
  while (sqlite3_step(s.get()) == SQLITE_ROW) rows.push_back(ReadRow(s));
  if (rows.empty())
    return NotFound(fmt::format("no record matches '{}' (see `recorder list`)", ref));
  if (rows.size() == 1) return rows[0];
  Stmt exact(db_, fmt::format("SELECT {} FROM records r WHERE r.id = ?1 OR "
                              "(r.id >= ?1 AND r.id < ?1 || char(1114111)) ORDER BY r.id LIMIT 2",
                              RowColumns(has_owner_)));
  if (!exact.ok()) return SqlError(db_, "looking up " + ref);
  exact.Bind(1, ref);
  std::vector<RecordRow> prefixed;
  while (sqlite3_step(exact.get()) == SQLITE_ROW) prefixed.push_back(ReadRow(exact));
  if (!prefixed.empty() && (prefixed.size() == 1 || prefixed[0].id == ref)) return prefixed[0];
  Stmt count(db_, "SELECT count(*) FROM records WHERE instr(id, ?1) > 0");
  if (!count.ok()) return SqlError(db_, "counting matches of " + ref);
  count.Bind(1, ref);
  int64_t total = sqlite3_step(count.get()) == SQLITE_ROW ? sqlite3_column_int64(count.get(), 0)
                                                          : static_cast<int64_t>(rows.size());
  std::string names;
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(kShown); ++i) {
    names += (names.empty() ? "" : ", ") + rows[i].id;
  }
  if (total > kShown) names += fmt::format(" and {} more", total - kShown);
  return InvalidArgument(fmt::format(
      "'{}' is ambiguous: {} records match ({}); give more of the id", ref, total, names));
}

std::optional<uint32_t> OwnerFromMeta(const nlohmann::json& meta) {
  auto valid = [](int64_t v) { return v >= 0 && v <= UINT32_MAX; };
  if (int64_t o = json::Get<int64_t>(meta, "owner_uid", -1); valid(o))
    return static_cast<uint32_t>(o);
  if (int64_t u = json::Get<int64_t>(json::Object(meta, "crash"), "uid", -1); valid(u)) {
    return static_cast<uint32_t>(u);
  }
  return std::nullopt;
}

RecordRow RowFromReader(const RecordReader& reader, const std::string& file) {
  RecordRow r;
  const auto& h = reader.header();
  r.id = h.id;
  r.kind = h.kind;
  r.created_ns = h.created_ns;
  r.host = h.host;
  r.kernel = h.kernel;
  r.boot_id = h.boot_id;
  r.file = file;
  r.file_size = reader.file_size();
  XXH3_state_t* hs = XXH3_createState();
  XXH3_64bits_reset(hs);
  for (const auto& s : reader.sections()) {
    r.raw_size += s.raw_size;
    XXH3_64bits_update(hs, &s.xxh3, sizeof(s.xxh3));
  }
  r.checksum = fmt::format("{:016x}", XXH3_64bits_digest(hs));
  XXH3_freeState(hs);
  r.meta = reader.meta();
  r.reason = json::Str(r.meta, "reason");
  r.start_ns = json::Get<int64_t>(r.meta, "start_ns", 0);
  r.end_ns = json::Get<int64_t>(r.meta, "end_ns", 0);
  r.owner_uid = OwnerFromMeta(r.meta).value_or(0);
  r.state = "ok";
  return r;
}

}  // namespace flightrec::store
