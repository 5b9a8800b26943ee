#include "recorder/analysis/report.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

namespace flightrec::recorder::analysis {

namespace {
constexpr ReportKey kKeys[] = {ReportKey::kSymbol,    ReportKey::kDso,   ReportKey::kPid,
                               ReportKey::kTid,       ReportKey::kComm,  ReportKey::kUnit,
                               ReportKey::kContainer, ReportKey::kCgroup};
constexpr const char* kKeyNames[] = {"symbol", "dso",  "pid",       "tid",
                                     "comm",   "unit", "container", "cgroup"};
static_assert(std::size(kKeys) == std::size(kKeyNames));
}  // namespace

const char* ToString(ReportKey k) {
  const auto i = static_cast<size_t>(k);
  return i < std::size(kKeyNames) ? kKeyNames[i] : "?";
}

StatusOr<ReportKey> ParseReportKey(const std::string& name) {
  for (ReportKey k : kKeys) {
    if (name == ToString(k)) return k;
  }
  return InvalidArgument(
      "--sort must be one of symbol, dso, pid, tid, comm, unit, container, cgroup");
}

bool KeyedByProcess(ReportKey k) {
  return k == ReportKey::kUnit || k == ReportKey::kContainer || k == ReportKey::kCgroup;
}

size_t ReportBuilder::RowOf(const std::string& key, const std::string& dso, bool inlined) {
  auto [it, fresh] = by_key_.emplace(key + '\0' + dso, rows_.size());
  if (fresh) {
    Row r;
    r.key = key;
    r.dso = dso;
    r.inlined = inlined;
    rows_.push_back(std::move(r));
  }
  return it->second;
}

// The rows a sample counts in, innermost first.
const std::vector<size_t>& ReportBuilder::RowsOf(const ResolvedSample& rs) {
  const auto& s = *rs.sample;
  keys_.clear();
  if (KeyedByProcess(key_)) {
    auto it = process_keys_.find(s.pid);
    keys_.push_back(it != process_keys_.end() && !it->second.empty()
                        ? RowOf(it->second, "", false)
                        : RowOf(fmt::format("[no {}]", ToString(key_)), "", false));
    return keys_;
  }
  if (key_ != ReportKey::kSymbol && key_ != ReportKey::kDso) {
    keys_.push_back(RowOf(key_ == ReportKey::kPid   ? std::to_string(s.pid)
                          : key_ == ReportKey::kTid ? std::to_string(s.tid)
                                                    : s.comm,
                          "", false));
    return keys_;
  }
  for (const auto* sym : rs.stack) {
    auto it = by_symbol_.find(sym);
    if (it == by_symbol_.end()) {
      if (sym->status == "file_changed") changed_files_.insert(sym->dso);
      if (sym->status == "file_missing") missing_files_.insert(sym->dso);
      size_t r = key_ == ReportKey::kSymbol ? RowOf(sym->Display(), sym->dso, sym->inlined)
                                            : RowOf(sym->dso, "", false);
      it = by_symbol_.emplace(sym, r).first;
    }
    keys_.push_back(it->second);
  }
  if (keys_.empty()) keys_.push_back(RowOf("[no frames]", "", false));
  return keys_;
}

void ReportBuilder::Count(const std::vector<size_t>& ks, uint64_t n) {
  rows_[ks.front()].self += n;
  ++total_stacks_;
  for (size_t k : ks) {
    if (rows_[k].seen != total_stacks_) {  // a recursive function counts once
      rows_[k].seen = total_stacks_;
      rows_[k].children += n;
    }
  }
}

void ReportBuilder::Add(const ResolvedSample& rs, uint64_t weight) {
  total_ += weight;
  const uint64_t id = rs.stack_id;
  if (id == 0 || weight != 1 || key_ == ReportKey::kTid || key_ == ReportKey::kComm) {
    Count(RowsOf(rs), weight);
    return;
  }
  if (id >= stack_count_.size()) {
    stack_count_.resize(std::max<size_t>(id + 1, stack_count_.size() * 2));
    stack_rows_.resize(stack_count_.size());
  }
  if (stack_count_[id]++ == 0) stack_rows_[id] = RowsOf(rs);
}

Report ReportBuilder::Finish(bool by_children) {
  for (size_t id = 0; id < stack_count_.size(); ++id) {
    if (stack_count_[id]) Count(stack_rows_[id], stack_count_[id]);
  }
  stack_count_.clear();
  stack_rows_.clear();
  Report out;
  out.total = total_;
  std::vector<const Row*> sorted;
  for (const auto& r : rows_) {
    if (by_children ? r.children > 0 : r.self > 0) sorted.push_back(&r);
  }
  std::sort(sorted.begin(), sorted.end(), [&](const Row* x, const Row* y) {
    uint64_t kx = by_children ? x->children : x->self;
    uint64_t ky = by_children ? y->children : y->self;
    if (kx != ky) return kx > ky;
    return x->key != y->key ? x->key < y->key : x->dso < y->dso;
  });
  for (const Row* r : sorted) out.rows.push_back(*r);
  out.changed_files = changed_files_;
  out.missing_files = missing_files_;
  return out;
}

}  // namespace flightrec::recorder::analysis
