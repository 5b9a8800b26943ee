#include "recorder/analysis/replay.h"

#include <unistd.h>

#include <cstdio>
#include <deque>
#include <unordered_map>

#include <nlohmann/json.hpp>

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

// Symbolizes frames once per (cookie, offset) and hands out stacks of stable
// Symbol pointers, whichever way the frames were attributed.
class Resolver {
 public:
  Resolver(const attribution::CookieTable* cookies, const attribution::KernelSymbols* ksyms)
      : symbolizer_(cookies, ksyms) {}

  std::span<const attribution::Symbol* const> Stack(const attribution::AttributedSample& as) {
    stack_.clear();
    for (const auto& f : as.frames) {
      if (!f.special.empty()) {  // special frames differ by name: not cached
        for (auto& sym : symbolizer_.ResolveInline(f)) stack_.push_back(Keep(std::move(sym)));
        continue;
      }
      FrameKey key{f.kernel ? UINT32_MAX : f.cookie, f.offset};
      auto it = cache_.find(key);
      if (it == cache_.end()) {
        std::vector<const attribution::Symbol*> resolved;
        for (auto& sym : symbolizer_.ResolveInline(f)) resolved.push_back(Keep(std::move(sym)));
        it = cache_.emplace(key, std::move(resolved)).first;
      }
      stack_.insert(stack_.end(), it->second.begin(), it->second.end());
    }
    return stack_;
  }
  size_t files_loaded() const { return symbolizer_.files_loaded(); }

 private:
  const attribution::Symbol* Keep(attribution::Symbol s) {
    // Identical specials ([vdso]+off, [unknown]) share one entry.
    if (s.status == "unmapped") {
      auto [it, fresh] = specials_.emplace(s.dso + '\0' + std::to_string(s.offset), nullptr);
      if (fresh) {
        symbols_.push_back(std::move(s));
        it->second = &symbols_.back();
      }
      return it->second;
    }
    symbols_.push_back(std::move(s));
    return &symbols_.back();
  }
  attribution::Symbolizer symbolizer_;
  std::deque<attribution::Symbol> symbols_;  // stable storage behind the pointers
  std::unordered_map<FrameKey, std::vector<const attribution::Symbol*>, FrameKeyHash> cache_;
  std::unordered_map<std::string, const attribution::Symbol*> specials_;
  std::vector<const attribution::Symbol*> stack_;
};

bool Keep(const ReplayOptions& opts, const attribution::AttributedSample& as, uint64_t base) {
  return !((opts.pid && as.pid != *opts.pid) || (opts.tid && as.tid != *opts.tid) ||
           (opts.since_ns && static_cast<int64_t>(as.time_ns - base) < *opts.since_ns) ||
           (opts.until_ns && static_cast<int64_t>(as.time_ns - base) > *opts.until_ns));
}

// Samples as the daemon attributed them at capture time.
Status ReplayLiveSection(const store::RecordReader& reader, const ReplayOptions& opts,
                         const RecordInfo& info, const attribution::KernelSymbols& ksyms,
                         const SampleFn& on_sample, ReplayStats* stats) {
  if (reader.FindSection("live_attribution") == nullptr) {
    return NotFound(fmt::format(
        "record {} has no live attribution (write one with `recorder dump --live-attribution`)",
        info.id));
  }
  ASSIGN_OR_RETURN(std::string text, reader.ReadSection("live_attribution"));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Corrupt(fmt::format("record {}: section live_attribution is not JSON", info.id));
  }
  ASSIGN_OR_RETURN(auto cookies,
                   attribution::CookieTable::FromJson(j.value("cookies", nlohmann::json::array())));
  Resolver resolver(&cookies, &ksyms);
  try {
    for (const auto& s : j.at("samples")) {
      attribution::AttributedSample as;
      as.time_ns = s.at(0).get<uint64_t>();
      as.cpu = s.at(1).get<uint32_t>();
      as.pid = s.at(2).get<uint32_t>();
      as.tid = s.at(3).get<uint32_t>();
      as.period = s.at(4).get<uint64_t>();
      as.comm = s.at(5).get<std::string>();
      for (const auto& f : s.at(6)) {
        as.frames.push_back(attribution::Frame{f.at(0).get<int>() != 0, f.at(1).get<uint32_t>(),
                                               f.at(2).get<uint64_t>(),
                                               f.at(3).get<std::string>()});
      }
      ++stats->events;
      if (!Keep(opts, as, info.window_start_ns)) {
        ++stats->filtered;
        continue;
      }
      ++stats->samples;
      on_sample(ResolvedSample{&as, resolver.Stack(as)});
    }
  } catch (const std::exception& e) {
    return Corrupt(fmt::format("record {}: section live_attribution: {}", info.id, e.what()));
  }
  stats->files_opened = resolver.files_loaded();
  return OkStatus();
}

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

  ReplayStats stats;
  if (opts.live) {
    RETURN_IF_ERROR(ReplayLiveSection(reader, opts, info, ksyms, on_sample, &stats));
    return stats;
  }
  attribution::Attributor attributor;
  Resolver resolver(&attributor.cookies(), &ksyms);
  Progress progress(opts.progress);
  for (const Event& e : dump.events) {
    ++stats.events;
    progress.Update(stats.events, dump.events.size());
    auto as = attributor.Add(e);
    if (!as) continue;
    if (!Keep(opts, *as, info.window_start_ns)) {
      ++stats.filtered;
      continue;
    }
    ++stats.samples;
    on_sample(ResolvedSample{&*as, resolver.Stack(*as)});
  }
  stats.no_mapping = attributor.no_mapping();
  stats.files_opened = resolver.files_loaded();
  return stats;
}

}  // namespace flightrec::recorder::analysis
