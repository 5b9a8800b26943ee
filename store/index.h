// Index: the sqlite index of a store — a cache of what the record files say,
// rebuildable from them (which is what keeps recovery simple).
//
// WAL mode with a busy timeout, so the daemon and several crash handlers can
// write at once; schema version in PRAGMA user_version, forward migrations.
//
// Thread: one Index per thread (sqlite connection); many processes may each
// have their own.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::store {

inline constexpr int kSchemaVersion = 3;

struct RecordRow {
  std::string id;
  std::string kind;
  std::string reason;
  int64_t created_ns = 0;
  int64_t start_ns = 0;  // covered window, wall clock (0 if none)
  int64_t end_ns = 0;
  std::string host;
  std::string kernel;
  std::string boot_id;
  std::string file;  // name inside the store directory
  uint64_t file_size = 0;
  uint64_t raw_size = 0;
  std::string checksum;    // XXH3 of the TOC's section checksums
  std::string state;       // ok | missing | corrupt
  uint32_t owner_uid = 0;  // whose space it uses (schema v2): crash uid, else 0
  nlohmann::json meta;
  nlohmann::json ToJson() const;
};

struct ListQuery {
  std::optional<int64_t> since_ns;
  std::optional<int64_t> until_ns;
  std::optional<std::string> kind;
  std::optional<uint32_t> pid;
  std::optional<std::string> exe;
  std::optional<uint32_t> uid;  // crashes visible to this uid (root: unset)
  bool newest_first = false;
  int limit = -1;
  // false: rows without `meta` (left an empty object): no JSON to parse per
  // row, for callers that walk every record (recovery, retention).
  bool with_meta = true;
};

// What the non-missing records of one owner use (retention's totals).
struct OwnerUsage {
  uint32_t owner_uid = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t oldest_created_ns = 0;
};

class Index {
 public:
  static StatusOr<std::unique_ptr<Index>> Open(const std::string& path, bool read_only = false);
  ~Index();

  // Leaves the WAL to the next writer's checkpoint instead of checkpointing
  // (two fdatasyncs) and deleting it (a directory update) when this, the
  // last connection, closes; see StoreOptions::checkpoint_index_on_close.
  void SkipCheckpointOnClose();

  // Inserts (or replaces, for re-indexing) a record row and its child rows
  // derived from meta, in one transaction.
  Status Upsert(const RecordRow& row);
  Status SetState(const std::string& id, const std::string& state);
  Status Delete(const std::string& id);
  StatusOr<std::vector<RecordRow>> List(const ListQuery& q);
  // Count, bytes and oldest record per owner, from the totals the schema's
  // triggers keep (schema >= 3): its cost does not grow with the records.
  StatusOr<std::vector<OwnerUsage>> Usage();
  // The store directory as the last reconcile with this index left it
  // (Store::Open), and when the last full reconcile ran (wall ns).
  struct Reconciled {
    std::string stamp;
    int64_t full_ns = 0;
  };
  StatusOr<std::optional<Reconciled>> GetReconciled();
  Status SetReconciled(const std::optional<Reconciled>& r);  // nullopt: forget it
  // Exact id, any unique substring of one (the random suffix alone will
  // do), or -N (N-th newest, -1 = newest). Ambiguous: InvalidArgument naming
  // the candidates (at most 8); no match: NotFound.
  StatusOr<RecordRow> Resolve(const std::string& id_or_prefix);
  // Read-only query: rows as JSON objects. Statements that write are refused,
  // and so are ATTACH/DETACH and PRAGMAs other than a few that only read (an
  // authorizer); the query is interrupted after `timeout_ms` and refused
  // once its output passes max_rows or max_bytes.
  struct QueryLimits {
    int64_t timeout_ms = 10000;
    size_t max_rows = 100000;
    size_t max_bytes = 64u << 20;
  };
  StatusOr<nlohmann::json> QueryReadOnly(const std::string& sql, const QueryLimits& limits);
  StatusOr<nlohmann::json> QueryReadOnly(const std::string& sql) {
    return QueryReadOnly(sql, QueryLimits{});
  }
  const std::string& path() const { return path_; }

 private:
  Index() = default;
  Status Exec(const std::string& sql);
  Status Migrate();
  sqlite3* db_ = nullptr;
  std::string path_;
  bool has_owner_ = false;   // schema >= 2 (a read-only open does not migrate)
  bool has_totals_ = false;  // schema >= 3: usage_totals
};

// The uid a record belongs to, from its meta: `owner_uid`, else the crashed
// process's `crash.uid`; nullopt if neither is a valid uid.
std::optional<uint32_t> OwnerFromMeta(const nlohmann::json& meta);

// Builds an index row from a record's header, TOC and meta.
RecordRow RowFromReader(const RecordReader& reader, const std::string& file);

}  // namespace flightrec::store
