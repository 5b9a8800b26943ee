#include "recorder/analysis/replay.h"

#include <unistd.h>

#include <cstdio>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>

#include "common/units.h"
#include "recorder/daemon/dump_record.h"

namespace flightrec::recorder::analysis {
namespace {

// Progress on stderr, only when it is a terminal and the work has taken more
// than a second; erased when done so piped output is never mixed with it.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {
    start_ = MonotonicNs();
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  void Update(uint64_t done, uint64_t total) {
    if (!enabled_ || (done & 0xffff) != 0) return;
    uint64_t now = MonotonicNs();
    if (now - start_ < 1'000'000'000) return;
    shown_ = true;
    std::fprintf(stderr, "\rreplaying: %llu/%llu events (%.0f%%)",
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 total ? 100.0 * done / total : 100.0);
  }

 private:
  bool enabled_;
  bool shown_ = false;
  uint64_t start_ = 0;
};

struct FrameKey {
  uint32_t cookie;  // UINT32_MAX = kernel
  uint64_t offset;
  bool operator==(const FrameKey&) const = default;
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const {
    return std::hash<uint64_t>()(k.offset * 0x9e3779b97f4a7c15ULL ^ k.cookie);
  }
};

}  // namespace

StatusOr<ReplayStats> Replay(const store::RecordReader& reader, const ReplayOptions& opts,
                             const InfoFn& on_info, const SampleFn& on_sample) {
  ASSIGN_OR_RETURN(LoadedDump dump, LoadDump(reader));
  ASSIGN_OR_RETURN(auto ksyms, attribution::KernelSymbols::FromText(dump.kallsyms));
  RecordInfo info;
  info.id = reader.header().id;
  info.kind = reader.header().kind;
  info.config = dump.config;
  info.loss = dump.loss;
  info.mono_to_wall_ns = dump.config.value("mono_to_wall_ns", int64_t{0});
  info.window_start_ns = dump.config.value("window_start_mono_ns", uint64_t{0});
  info.window_end_ns = dump.config.value("freeze_time_mono_ns", uint64_t{0});
  if (on_info) on_info(info);

  attribution::Attributor attributor;
  attribution::Symbolizer symbolizer(&attributor.cookies(), &ksyms);
  std::deque<attribution::Symbol> symbols;  // stable storage behind the pointers
  std::unordered_map<FrameKey, std::vector<const attribution::Symbol*>, FrameKeyHash> cache;
  std::vector<const attribution::Symbol*> stack;
  ReplayStats stats;
  Progress progress(opts.progress);
  const uint64_t base = info.window_start_ns;
  for (const Event& e : dump.events) {
    ++stats.events;
    progress.Update(stats.events, dump.events.size());
    auto as = attributor.Add(e);
    if (!as) continue;
    if ((opts.pid && as->pid != *opts.pid) || (opts.tid && as->tid != *opts.tid) ||
        (opts.since_ns && static_cast<int64_t>(as->time_ns - base) < *opts.since_ns) ||
        (opts.until_ns && static_cast<int64_t>(as->time_ns - base) > *opts.until_ns)) {
      ++stats.filtered;
      continue;
    }
    stack.clear();
    for (const auto& f : as->frames) {
      FrameKey key{f.kernel ? UINT32_MAX : f.cookie, f.offset};
      auto it = cache.find(key);
      if (it == cache.end() || !f.special.empty()) {
        std::vector<const attribution::Symbol*> resolved;
        for (auto& sym : symbolizer.ResolveInline(f)) {
          symbols.push_back(std::move(sym));
          resolved.push_back(&symbols.back());
        }
        if (!f.special.empty()) {  // special frames differ by name, do not cache
          stack.insert(stack.end(), resolved.begin(), resolved.end());
          continue;
        }
        it = cache.emplace(key, std::move(resolved)).first;
      }
      stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
    ++stats.samples;
    on_sample(ResolvedSample{&*as, stack});
  }
  stats.no_mapping = attributor.no_mapping();
  stats.files_opened = symbolizer.files_loaded();
  return stats;
}

}  // namespace flightrec::recorder::analysis
