// What every command of the `recorder` CLI shares: opening the store and
// printing a table. Part of the query library.
#include <algorithm>

#include "common/terminal_escape.h"
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {

StatusOr<std::unique_ptr<store::Store>> CliContext::OpenStore(bool create,
                                                              bool full_recovery) const {
  store::StoreOptions opts;
  opts.create = create;
  opts.full_recovery = full_recovery;
  auto s = store::Store::Open(store_dir, opts);
  if (!s.ok() && s.status().code() == StatusCode::kPermissionDenied) {
    opts.read_only = true;  // e.g. reading a store we may read but not write
    return store::Store::Open(store_dir, opts);
  }
  return s;
}

StatusOr<std::unique_ptr<store::RecordReader>> CliContext::OpenRecord(const std::string& id) const {
  if (open_record) return open_record(id);
  ASSIGN_OR_RETURN(auto store, OpenStore());
  // The reader holds its own fd: it outlives the store.
  return store->OpenRecord(id);
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw_rows.size());
  for (const auto& r : raw_rows) {
    std::vector<std::string> row;
    for (const auto& cell : r) row.push_back(EscapeForTerminal(cell));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += '\n';
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

}  // namespace flightrec::recorder::cli
