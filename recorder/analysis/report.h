// `recorder report`'s aggregation: resolved samples into rows keyed by
// function (and DSO), DSO, pid, tid or comm, with self and children
// (inclusive) counts, the way `perf report` counts them. The CLI prints the
// rows; this is the counting, unit-tested on synthetic samples.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "recorder/analysis/replay.h"

namespace flightrec::recorder::analysis {

// kUnit, kContainer and kCgroup key a process by where it ran: the names
// come from the record's meta (ReportBuilder::SetProcessKeys).
enum class ReportKey { kSymbol, kDso, kPid, kTid, kComm, kUnit, kContainer, kCgroup };
const char* ToString(ReportKey k);
// "symbol", "dso", "pid", "tid", "comm", "unit", "container" or "cgroup".
StatusOr<ReportKey> ParseReportKey(const std::string& name);
// Whether rows of `k` are keyed by process (SetProcessKeys names them).
bool KeyedByProcess(ReportKey k);

struct ReportRow {
  std::string key;
  std::string dso;  // kSymbol only
  bool inlined = false;
  uint64_t self = 0;      // samples whose innermost frame is this row
  uint64_t children = 0;  // samples with this row anywhere on the stack (once each)
};

struct Report {
  uint64_t total = 0;  // samples counted (their weights' sum)
  // Rows with a non-zero sort count (self, or children with by_children),
  // most first; ties by key, then DSO.
  std::vector<ReportRow> rows;
  // DSOs whose frames could not be symbolized because the file changed since
  // the record (build-id differs) or is gone.
  std::set<std::string> changed_files, missing_files;
};

class ReportBuilder {
 public:
  explicit ReportBuilder(ReportKey key) : key_(key) {}
  // Counts one sample (Replay's on_sample) `weight` times: 1 for an on-CPU
  // sample, its nanoseconds for an off-CPU interval. Frames are keyed by
  // pointer: the replay caches symbols, so one function is one pointer.
  void Add(const ResolvedSample& rs, uint64_t weight = 1);
  // The row name of each pid for the keys KeyedByProcess; a pid without
  // one counts in the row "[no unit]" ("[no container]", "[no cgroup]").
  void SetProcessKeys(std::unordered_map<uint32_t, std::string> keys) {
    process_keys_ = std::move(keys);
  }
  Report Finish(bool by_children);

 private:
  struct Row : ReportRow {
    uint64_t seen = 0;  // last stack (or sample) that counted this row's children
  };
  size_t RowOf(const std::string& key, const std::string& dso, bool inlined);
  const std::vector<size_t>& RowsOf(const ResolvedSample& rs);
  void Count(const std::vector<size_t>& rows, uint64_t n);

  ReportKey key_;
  uint64_t total_ = 0, total_stacks_ = 0;
  std::vector<Row> rows_;
  std::unordered_map<std::string, size_t> by_key_;
  std::unordered_map<const attribution::Symbol*, size_t> by_symbol_;
  std::set<std::string> changed_files_, missing_files_;
  std::vector<size_t> keys_;
  std::unordered_map<uint32_t, std::string> process_keys_;
  // Samples of one stack id share pid and stack (not tid or comm): they are
  // counted per id, one increment each, and spread over their rows at the end.
  std::vector<uint64_t> stack_count_;
  std::vector<std::vector<size_t>> stack_rows_;
};

}  // namespace flightrec::recorder::analysis
