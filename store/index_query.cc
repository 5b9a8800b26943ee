// `recorder sql`: one read-only query on the index, bounded in time and
// output. Apart from index.cc, which is the index's own reading and writing.
#include <chrono>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "common/units.h"
#include "store/index.h"

namespace flightrec::store {

namespace {

// `recorder sql` may read the schema and the data, nothing else: no ATTACH
// (it creates files), no PRAGMA that sets anything (writable_schema=ON).
int SqlAuthorizer(void*, int action, const char* a1, const char* a2, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_PRAGMA: {
      static const std::set<std::string> kReadOnlyPragmas = {
          "table_info",  "table_xinfo",      "table_list",   "index_list",     "index_info",
          "index_xinfo", "foreign_key_list", "user_version", "schema_version", "page_count",
          "page_size",   "freelist_count",   "journal_mode", "function_list",  "collation_list"};
      // With an argument, several of these set a value (user_version=5):
      // only the table-valued ones take a table name.
      std::string name = a1 ? a1 : "";
      bool takes_table =
          name.find("table_") == 0 || name.find("index_") == 0 || name == "foreign_key_list";
      if (kReadOnlyPragmas.count(name) && (a2 == nullptr || takes_table)) return SQLITE_OK;
      return SQLITE_DENY;
    }
    default:
      return SQLITE_DENY;
  }
}

int SqlProgress(void* arg) {
  auto deadline = *static_cast<std::chrono::steady_clock::time_point*>(arg);
  return std::chrono::steady_clock::now() > deadline ? 1 : 0;
}

}  // namespace

StatusOr<nlohmann::json> Index::QueryReadOnly(const std::string& sql, const QueryLimits& limits) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.timeout_ms);
  // Installed for this query only: flightrec's own statements need no checks.
  sqlite3_set_authorizer(db_, SqlAuthorizer, nullptr);
  sqlite3_progress_handler(db_, 10000, SqlProgress, &deadline);
  struct Reset {
    sqlite3* db;
    ~Reset() {
      sqlite3_set_authorizer(db, nullptr, nullptr);
      sqlite3_progress_handler(db, 0, nullptr, nullptr);
    }
  } reset{db_};
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, &tail) != SQLITE_OK) {
    if (sqlite3_errcode(db_) == SQLITE_AUTH) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("refused: {} (`recorder sql` runs read-only queries; ATTACH, "
                                "DETACH and PRAGMAs that set anything are not allowed)",
                                sqlite3_errmsg(db_)));
    }
    return InvalidArgument(fmt::format("SQL error: {}", sqlite3_errmsg(db_)));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> st(raw, sqlite3_finalize);
  if (raw == nullptr) return InvalidArgument("empty SQL statement");
  if (tail != nullptr &&
      std::string_view(tail).find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    return InvalidArgument("only one SQL statement at a time");
  }
  if (!sqlite3_stmt_readonly(raw)) {
    return Status(StatusCode::kPermissionDenied,
                  "refused: `recorder sql` runs read-only queries (SELECT ...); the index is "
                  "changed only by flightrec itself");
  }
  nlohmann::json rows = nlohmann::json::array();
  size_t bytes = 0;
  int rc;
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    if (rows.size() >= limits.max_rows || bytes > limits.max_bytes) {
      return Status(StatusCode::kResourceExhausted,
                    fmt::format("query output over the limit ({} rows or {}): narrow it (WHERE, "
                                "LIMIT) or raise --max-rows",
                                limits.max_rows, FormatBytes(limits.max_bytes)));
    }
    nlohmann::json row = nlohmann::json::object();
    int n = sqlite3_column_count(raw);
    for (int i = 0; i < n; ++i) {
      const char* name = sqlite3_column_name(raw, i);
      switch (sqlite3_column_type(raw, i)) {
        case SQLITE_INTEGER:
          row[name] = sqlite3_column_int64(raw, i);
          bytes += 8;
          break;
        case SQLITE_FLOAT:
          row[name] = sqlite3_column_double(raw, i);
          bytes += 8;
          break;
        case SQLITE_NULL:
          row[name] = nullptr;
          break;
        default: {
          auto* t = sqlite3_column_text(raw, i);
          row[name] = std::string(t ? reinterpret_cast<const char*>(t) : "");
          bytes += static_cast<size_t>(sqlite3_column_bytes(raw, i));
        }
      }
    }
    rows.push_back(std::move(row));
  }
  if (rc == SQLITE_INTERRUPT) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("query interrupted after {} ms (--timeout)", limits.timeout_ms));
  }
  if (rc != SQLITE_DONE) {
    return InvalidArgument(fmt::format("SQL error: {}", sqlite3_errmsg(db_)));
  }
  return rows;
}

}  // namespace flightrec::store
