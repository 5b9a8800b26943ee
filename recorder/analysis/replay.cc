#include "recorder/analysis/replay.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/units.h"
#include "recorder/attribution/vdso.h"
#include "recorder/model/event_codec.h"
#include "recorder/record/dump_record.h"
#include "recorder/record/mem_growth_section.h"
#include "recorder/record/off_cpu_section.h"
#include "recorder/symbolize/debuginfo.h"
#include "recorder/symbolize/symbolizer.h"
#include "recorder/unwind/dwarf_unwinder.h"

namespace flightrec::recorder::analysis {
namespace {

// ResolvedSample::process_comm: the process's own name as the table holds it
// now, not the sampled thread's (a worker's, or a pre-exec name of a main
// thread that was not sampled since).
const std::string* ProcessComm(const attribution::ProcessTable& table, uint32_t pid) {
  const attribution::Process* p = table.Find(pid);
  return p != nullptr && !p->comm.empty() ? &p->comm : nullptr;
}

// ResolvedSample::process_exe.
const std::string* ProcessExe(const attribution::ProcessTable& table, uint32_t pid) {
  const attribution::Process* p = table.Find(pid);
  return p != nullptr && !p->exe.empty() ? &p->exe : nullptr;
}

// Progress on stderr, only when it is a terminal and the work has taken more
// than a second ($FLIGHTREC_PROGRESS_AFTER_MS overrides, for tests); erased
// when done so piped output is never mixed with it.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {
    start_ = MonotonicNs();
    if (const char* e = std::getenv("FLIGHTREC_PROGRESS_AFTER_MS")) {
      after_ns_ = std::strtoull(e, nullptr, 10) * 1'000'000ull;
    }
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  void Update(uint64_t done, uint64_t total) {
    // The clock is read every 4096 events (a few microseconds of work).
    if (!enabled_ || (calls_++ & 0xfff) != 0) return;
    uint64_t now = MonotonicNs();
    if (now - start_ < after_ns_ || now - last_ns_ < 100'000'000) return;
    last_ns_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rreplaying: %s of %s (%.0f%%)", FormatBytes(done).c_str(),
                 FormatBytes(total).c_str(), total ? 100.0 * done / total : 100.0);
  }

 private:
  bool enabled_;
  bool shown_ = false;
  uint64_t calls_ = 0;
  uint64_t start_ = 0;
  uint64_t last_ns_ = 0;
  uint64_t after_ns_ = 1'000'000'000;
};

struct FrameKey {
  uint32_t cookie;  // UINT32_MAX = kernel, UINT32_MAX - 1 = the vDSO
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
  Resolver(const attribution::CookieTable* cookies, const attribution::KernelSymbols* ksyms,
           bool source_lines, const std::string& vdso)
      : symbolizer_(cookies, ksyms) {
    symbolizer_.set_want_lines(source_lines);
    symbolizer_.set_vdso(vdso);
    symbolizer_.set_decompress_cache(symbolize::DefaultDecompressCacheDir());
  }

  std::span<const attribution::Symbol* const> Stack(const attribution::AttributedSample& as) {
    stack_.clear();
    for (const auto& f : as.frames) {
      // Special frames differ by name: not cached, but for the vDSO, which
      // is symbolized from the record's image like a file.
      const bool vdso = f.special == "[vdso]";
      if (!f.special.empty() && !vdso) {
        for (auto& sym : symbolizer_.ResolveInline(f)) stack_.push_back(Keep(std::move(sym)));
        continue;
      }
      FrameKey key{f.kernel ? UINT32_MAX : vdso ? UINT32_MAX - 1 : f.cookie, f.offset};
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
  return !((opts.pid && as.pid != *opts.pid) || (opts.pids && !opts.pids->contains(as.pid)) ||
           (opts.tid && as.tid != *opts.tid) ||
           (opts.since_ns && static_cast<int64_t>(as.time_ns - base) < *opts.since_ns) ||
           (opts.until_ns && static_cast<int64_t>(as.time_ns - base) > *opts.until_ns));
}

// Samples as the daemon attributed them at capture time.
Status ReplayLiveSection(const store::RecordReader& reader, const ReplayOptions& opts,
                         const RecordInfo& info, const attribution::KernelSymbols& ksyms,
                         const std::string& vdso, const SampleFn& on_sample, ReplayStats* stats) {
  if (reader.FindSection(kSectionLiveAttribution) == nullptr) {
    return NotFound(fmt::format(
        "record {} has no live attribution (write one with `recorder dump --live-attribution`)",
        info.id));
  }
  ASSIGN_OR_RETURN(std::string text, reader.ReadSection(kSectionLiveAttribution));
  auto j = json::ParseBounded(text);
  if (j.is_discarded() || !j.is_object()) {
    return Corrupt(fmt::format("record {}: section live_attribution is not JSON", info.id));
  }
  ASSIGN_OR_RETURN(auto cookies, attribution::CookieTable::FromJson(json::Array(j, "cookies")));
  Resolver resolver(&cookies, &ksyms, opts.source_lines, vdso);
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
        stats->filtered_pids.insert(as.pid);
        continue;
      }
      ++stats->samples;
      stats->pids.insert(as.pid);
      on_sample(ResolvedSample{&as, resolver.Stack(as), 0, &cookies, nullptr});
    }
  } catch (const std::exception& e) {
    return Corrupt(fmt::format("record {}: section live_attribution: {}", info.id, e.what()));
  }
  stats->files_opened = resolver.files_loaded();
  return OkStatus();
}

// Decompresses a section on a second thread, a chunk ahead of the decoder:
// zstd and the event decoder then run on both CPUs instead of taking turns.
// The decoder reads each chunk where zstd wrote it (a copy of every byte
// cost more than the decoding, docs/BENCHMARKS.md); an event cut by a
// chunk's end is made whole by copying its start into the room kept in
// front of the next chunk.
class ChunkPipe {
 public:
  static constexpr size_t kChunk = 4u << 20;
  // Room in front of each chunk for the unfinished event of the chunk before.
  static constexpr size_t kLead = EventDecoder::kMaxEventBytes;

  explicit ChunkPipe(std::unique_ptr<store::SectionReader> section) : section_(std::move(section)) {
    for (auto& b : bufs_) b.data.reset(new char[kLead + kChunk]);
    free_ = {0, 1, 2};
    thread_ = std::thread([this] { Run(); });
  }
  ~ChunkPipe() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  struct View {
    std::string_view bytes;  // carry, then the chunk; valid until the next Next()
    bool end = false;        // the section had no more bytes (no chunk was added)
  };
  // The next chunk with `carry` (at most kLead bytes, the unread end of the
  // view Next() returned last) in front of it.
  StatusOr<View> Next(std::string_view carry) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !ready_.empty(); });
    int i = ready_.front();
    ready_.pop_front();
    Buf& b = bufs_[i];
    if (!b.status.ok()) return b.status;
    l.unlock();
    char* start = b.data.get() + kLead - carry.size();
    // An empty carry may have no data pointer, which memmove must not get.
    if (!carry.empty()) std::memmove(start, carry.data(), carry.size());
    l.lock();
    // The chunk before is read no more: zstd may fill it again.
    if (current_ >= 0) free_.push_back(current_);
    current_ = i;
    cv_.notify_all();
    return View{std::string_view(start, carry.size() + b.len), b.len == 0};
  }

 private:
  struct Buf {
    std::unique_ptr<char[]> data;  // kLead bytes of room, then the chunk
    size_t len = 0;
    Status status;
  };
  void Run() {
    bool finished = false;
    for (;;) {
      int i;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !free_.empty(); });
        if (stop_) return;
        i = free_.front();
        free_.pop_front();
      }
      Buf& b = bufs_[i];
      b.len = 0;
      b.status = OkStatus();
      while (!finished && b.len < kChunk) {
        auto n = section_->Read(b.data.get() + kLead + b.len, kChunk - b.len);
        if (!n.ok()) b.status = n.status();
        if (!n.ok() || *n == 0) {
          finished = true;
          break;
        }
        b.len += *n;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        ready_.push_back(i);
      }
      cv_.notify_all();
      // The consumer's last chunk is an empty one (or the error).
      if (finished && (b.len == 0 || !b.status.ok())) return;
    }
  }

  std::unique_ptr<store::SectionReader> section_;
  Buf bufs_[3];
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> free_, ready_;
  int current_ = -1;  // the buffer the consumer reads
  bool stop_ = false;
  std::thread thread_;
};

// Samples with the same process and the same raw call chain attribute to the
// same frames as long as no sideband event changes that process's mappings,
// so the translation and symbolization of a chain are done once and reused;
// a sideband event makes the cached stacks of the process it affects stale
// (a per-pid generation), leaving every other process's. Samples carrying a
// DWARF user stack are unwound one by one, every time; what they unwound to
// is then looked up the same way (DwarfKey), so the translation and
// symbolization of a chain seen before are not done again.
class StackCache {
 public:
  // Ids come from *next_id, which caches that hand stacks to the same
  // consumer share: an id names one stack.
  explicit StackCache(uint64_t* next_id) : next_id_(next_id) {}

  struct Entry {
    std::string key;                       // version 1: the sample's encoded identity
    attribution::AttributedSample sample;  // per-sample fields are overwritten
    std::vector<const attribution::Symbol*> stack;
    uint64_t no_mapping = 0;
    uint64_t id = 0;          // 0: empty
    uint64_t generation = 0;  // of sample.pid when attributed
  };

  // Version 1 streams: by the stack's encoded bytes.
  Entry* Find(const std::string& key) {
    auto it = map_.find(XXH3_64bits(key.data(), key.size()));
    if (it == map_.end() || it->second.key != key) return nullptr;
    return Fresh(&it->second);
  }
  Entry* Insert(const std::string& key, attribution::AttributedSample as,
                std::span<const attribution::Symbol* const> stack, uint64_t no_mapping) {
    // A hash collision replaces the older entry: correct, only slower.
    Entry& e = map_[XXH3_64bits(key.data(), key.size())];
    e.key = key;
    return Fill(&e, std::move(as), stack, no_mapping);
  }
  // Streams with a stack table: by the table id, an index.
  Entry* Find(uint32_t stack_id) {
    return stack_id < by_id_.size() ? Fresh(&by_id_[stack_id]) : nullptr;
  }
  Entry* Insert(uint32_t stack_id, attribution::AttributedSample as,
                std::span<const attribution::Symbol* const> stack, uint64_t no_mapping) {
    if (stack_id >= by_id_.size()) by_id_.resize(std::max<size_t>(stack_id + 1, by_id_.size() * 2));
    return Fill(&by_id_[stack_id], std::move(as), stack, no_mapping);
  }
  // The process's mappings changed: its cached stacks are stale. (Names are
  // looked up per sample: a thread's is not part of its stack.)
  void Invalidate(uint32_t pid) {
    ++generations_[pid];
    memo_pid_ = UINT32_MAX;
  }

 private:
  // Consecutive samples are mostly of one process: its generation is kept
  // at hand.
  uint64_t Generation(uint32_t pid) {
    if (pid == memo_pid_) return memo_generation_;
    auto it = generations_.find(pid);
    memo_pid_ = pid;
    memo_generation_ = it == generations_.end() ? 0 : it->second;
    return memo_generation_;
  }
  Entry* Fresh(Entry* e) {
    if (e->id == 0 || e->generation != Generation(e->sample.pid)) return nullptr;
    return e;
  }
  Entry* Fill(Entry* e, attribution::AttributedSample as,
              std::span<const attribution::Symbol* const> stack, uint64_t no_mapping) {
    e->generation = Generation(as.pid);
    e->sample = std::move(as);
    e->stack.assign(stack.begin(), stack.end());
    e->no_mapping = no_mapping;
    e->id = ++*next_id_;
    return e;
  }
  std::unordered_map<uint64_t, Entry> map_;
  std::vector<Entry> by_id_;
  std::unordered_map<uint32_t, uint64_t> generations_;
  uint32_t memo_pid_ = UINT32_MAX;
  uint64_t memo_generation_ = 0;
  uint64_t* next_id_;  // ids are never reused, even after invalidation
};

// Hands Attribute() the user frames unwound already (once per sample).
class Unwound : public attribution::UserUnwinder {
 public:
  std::vector<uint64_t> ips;
  attribution::UnwindNote note;
  std::vector<uint64_t> Unwind(const Sample&, const attribution::ProcessTable&,
                               const attribution::CookieTable&,
                               attribution::UnwindNote* out) override {
    *out = std::move(note);
    return std::move(ips);
  }
};

// Everything Attribute() makes a DWARF sample's frames and note of, besides
// the process's mappings: its key in a StackCache of its own.
void DwarfKey(const Sample& s, const Unwound& u, std::string* key) {
  key->clear();
  auto put = [key](uint64_t v) { key->append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(s.pid);
  put(static_cast<uint64_t>(s.mode));
  put(s.ip);
  put(s.kernel_chain.size());
  for (uint64_t ip : s.kernel_chain) put(ip);
  put(u.ips.size());
  for (uint64_t ip : u.ips) put(ip);
  if (u.ips.empty()) {
    put(s.user_chain.size());
    for (uint64_t ip : s.user_chain) put(ip);
  }
  key->push_back(static_cast<char>(u.note.status.value()));
  key->append(u.note.where);
}

}  // namespace

StatusOr<ReplayStats> Replay(const store::RecordReader& reader, const ReplayOptions& opts,
                             const InfoFn& on_info, const SampleFn& on_sample) {
  ASSIGN_OR_RETURN(LoadedDump dump, LoadDump(reader, /*decode_events=*/false,
                                             /*read_events=*/false));
  ASSIGN_OR_RETURN(auto ksyms, dump.Kernel());
  RecordInfo info;
  info.id = reader.header().id;
  info.kind = reader.header().kind;
  info.host = reader.header().host;
  info.kernel = reader.header().kernel;
  info.boot_id = reader.header().boot_id;
  info.config = dump.config;
  info.loss = dump.loss;
  info.labels = attribution::LabelsByPid(reader.meta());
  // The config section is the record's word, checked like any input.
  info.mono_to_wall_ns = json::Get<int64_t>(dump.config, "mono_to_wall_ns", 0);
  // Absent (older records) or not an integer: unknown, not 0.
  if (const auto& boot = json::Field(dump.config, "mono_to_boot_ns"); boot.is_number_integer()) {
    info.mono_to_boot_ns = json::As<int64_t>(boot, 0);
  }
  info.window_start_ns = json::Get<uint64_t>(dump.config, "window_start_mono_ns", 0);
  info.window_end_ns = json::Get<uint64_t>(dump.config, "freeze_time_mono_ns", 0);
  info.vdso_build_id = attribution::VdsoBuildId(dump.vdso);
  ASSIGN_OR_RETURN(OffCpuRecord off_cpu, LoadOffCpu(reader, info.window_end_ns));
  info.off_cpu = off_cpu.present;
  info.off_cpu_threshold_ns = off_cpu.threshold_ns;
  if (!opts.off_cpu) off_cpu.intervals.clear();
  std::vector<Sample> growth;
  if (opts.mem_growth) {
    ASSIGN_OR_RETURN(growth, LoadMemGrowth(reader, info.window_start_ns, info.window_end_ns));
  }
  if (on_info) on_info(info);

  ReplayStats stats;
  if (opts.live) {
    RETURN_IF_ERROR(ReplayLiveSection(reader, opts, info, ksyms, dump.vdso, on_sample, &stats));
    return stats;
  }
  attribution::Attributor attributor;
  // DWARF user stacks (--call-graph dwarf) are unwound here, per sample.
  std::unique_ptr<unwind::DwarfUnwinder> unwinder;
  if (opts.unwind) {
    unwinder = unwind::MakeDwarfUnwinder();
    unwinder->set_vdso(dump.vdso);  // frames in [vdso] unwind through its CFI
    attributor.set_unwinder(unwinder.get());
  }
  Resolver resolver(&attributor.cookies(), &ksyms, opts.source_lines, dump.vdso);
  uint64_t next_stack_id = 0;
  StackCache cache(&next_stack_id);
  StackCache dwarf_cache(&next_stack_id);  // by DwarfKey
  Progress progress(opts.progress);
  // The events section is decompressed in chunks and decoded as it comes, so
  // memory stays flat whatever the record's size.
  ASSIGN_OR_RETURN(auto section, reader.OpenSection(kSectionEvents));
  const uint64_t raw_total = section->info().raw_size;
  uint64_t consumed = 0;
  std::string_view bytes;  // what the decoder reads: the pipe's current view
  bool eof = false;
  EventDecoder dec({});
  dec.set_borrow_stacks(true);  // each copy is unwound before the next refill
  ChunkPipe pipe(std::move(section));
  // Moves on to the next chunk, keeping the bytes not decoded yet in front
  // of it; more than an event's bound of them is corruption, which the
  // decoder then reports (they are kept, nothing is added).
  auto refill = [&]() -> Status {
    size_t used = dec.position();
    consumed += used;
    bytes.remove_prefix(used);
    if (!eof && bytes.size() <= ChunkPipe::kLead) {
      auto next = pipe.Next(bytes);
      if (!next.ok()) {
        return next.status().Annotate(fmt::format("record {}", reader.display_name()));
      }
      bytes = next->bytes;
      eof = next->end;
    }
    dec.Rebase(bytes);
    return OkStatus();
  };
  RETURN_IF_ERROR(refill());
  Event e;
  static_assert(ChunkPipe::kChunk > EventDecoder::kMaxEventBytes);
  SampleHead head;
  std::string key;
  uint32_t stack_id = 0;
  Unwound unwound;
  auto filtered = [&](uint32_t pid, uint32_t tid, uint64_t t) {
    return (opts.pid && pid != *opts.pid) || (opts.pids && !opts.pids->contains(pid)) ||
           (opts.tid && tid != *opts.tid) ||
           (opts.since_ns && static_cast<int64_t>(t - info.window_start_ns) < *opts.since_ns) ||
           (opts.until_ns && static_cast<int64_t>(t - info.window_start_ns) > *opts.until_ns);
  };
  // A sample that is no CPU sample (an off-CPU interval, a growth sample),
  // attributed with the process table as it stands at its time.
  auto emit_extra = [&](const Sample& s, const OffCpuInterval* iv) {
    uint64_t misses = 0;
    attribution::AttributedSample as = attribution::Attribute(
        s, attributor.table(), attributor.cookies(), unwinder.get(), &misses);
    as.comm = *attributor.table().ThreadAt(s.pid, s.tid, s.time_ns).comm;
    stats.no_mapping += misses;
    stats.pids.insert(s.pid);
    ResolvedSample r{&as,
                     resolver.Stack(as),
                     0,
                     &attributor.cookies(),
                     ProcessComm(attributor.table(), s.pid),
                     ProcessExe(attributor.table(), s.pid)};
    r.off_cpu = iv;
    r.mem_growth = iv == nullptr;
    on_sample(r);
  };
  // Off-CPU intervals are attributed with the process table as it stands at
  // their switch-out: handed over before the first event after it.
  size_t next_off_cpu = 0;
  auto emit_off_cpu = [&](uint64_t until) {
    for (; next_off_cpu < off_cpu.intervals.size(); ++next_off_cpu) {
      const OffCpuInterval& iv = off_cpu.intervals[next_off_cpu];
      const Sample& s = iv.sample;
      if (s.time_ns > until) break;
      const int64_t start = static_cast<int64_t>(s.time_ns - info.window_start_ns);
      if ((opts.pid && s.pid != *opts.pid) || (opts.tid && s.tid != *opts.tid) ||
          (opts.until_ns && start > *opts.until_ns) ||
          (opts.since_ns && start + static_cast<int64_t>(s.period) < *opts.since_ns)) {
        continue;
      }
      ++stats.off_cpu_intervals;
      emit_extra(s, &iv);
    }
  };
  // Growth samples likewise, at their fault's time.
  size_t next_growth = 0;
  auto emit_growth = [&](uint64_t until) {
    for (; next_growth < growth.size() && growth[next_growth].time_ns <= until; ++next_growth) {
      const Sample& s = growth[next_growth];
      if (!filtered(s.pid, s.tid, s.time_ns)) emit_extra(s, nullptr);
    }
  };
  for (;;) {
    // Fast path: a sample whose stack was attributed since its process's
    // last mapping change is recognised by its stack table id (or, in
    // version 1 streams, by its encoded bytes) without decoding its call
    // chain. (At the end of a chunk it declines, and the slow path below
    // refills.)
    auto before_skim = dec.Save();
    const auto skim = dec.SkimSample(&head, &key, &stack_id);
    const bool skimmed = skim != EventDecoder::Skim::kNone;
    if (skimmed) {
      emit_off_cpu(head.time_ns);
      emit_growth(head.time_ns);
      if (filtered(head.pid, head.tid, head.time_ns)) {
        ++stats.events;
        ++stats.filtered;
        stats.filtered_pids.insert(head.pid);
        continue;
      }
      StackCache::Entry* hit =
          skim == EventDecoder::Skim::kStackRef ? cache.Find(stack_id) : cache.Find(key);
      if (hit != nullptr) {
        ++stats.events;
        ++stats.samples;
        stats.no_mapping += hit->no_mapping;
        attribution::AttributedSample& as = hit->sample;
        as.time_ns = head.time_ns;
        as.cpu = head.cpu;
        as.period = head.period;
        as.tid = head.tid;
        if (!opts.thread_names) {
          on_sample(ResolvedSample{&as, hit->stack, hit->id, &attributor.cookies()});
          progress.Update(consumed + dec.position(), raw_total);
          continue;
        }
        // Threads of one process share stacks, not names.
        const auto thread = attributor.table().ThreadAt(head.pid, head.tid, head.time_ns);
        as.tid = thread.tid;
        as.comm = *thread.comm;
        on_sample(ResolvedSample{&as, hit->stack, hit->id, &attributor.cookies(),
                                 ProcessComm(attributor.table(), head.pid),
                                 ProcessExe(attributor.table(), head.pid)});
        progress.Update(consumed + dec.position(), raw_total);
        continue;
      }
      dec.Restore(before_skim);  // a new stack: decode it in full below
    }
    // Decode from the buffer; an event cut by the buffer's end (it fails to
    // decode while more bytes are coming) is retried once after a refill,
    // which puts at least kChunk > kMaxEventBytes bytes from its start in the
    // buffer: a second failure is corruption.
    auto saved = dec.Save();
    auto more = dec.Next(&e);
    if (!eof && (!more.ok() || !*more)) {
      dec.Restore(saved);
      RETURN_IF_ERROR(refill());
      more = dec.Next(&e);
    }
    if (!more.ok()) return more.status().Annotate(fmt::format("record {}", reader.display_name()));
    if (!*more) break;
    emit_off_cpu(EventTime(e));
    emit_growth(EventTime(e));
    ++stats.events;
    progress.Update(consumed + dec.position(), raw_total);
    const Sample* s = std::get_if<Sample>(&e);
    if (s == nullptr) {
      if (auto pid = attribution::AffectedPid(e)) {
        cache.Invalidate(*pid);
        dwarf_cache.Invalidate(*pid);
      }
      attributor.Add(e);
      continue;
    }
    if (filtered(s->pid, s->tid, s->time_ns)) {
      ++stats.filtered;
      stats.filtered_pids.insert(s->pid);
      continue;
    }
    ++stats.samples;
    stats.pids.insert(s->pid);  // (a cache hit above is a pid seen here before)
    if (!skimmed && unwinder != nullptr && !s->user_stack.regs.empty()) {
      // A DWARF stack copy: unwound here, then attributed and symbolized
      // only if no earlier sample of the process unwound to the same chain.
      unwound.ips = unwinder->UnwindCopy(*s, dec.last_stack(), attributor.table(),
                                         attributor.cookies(), &unwound.note);
      DwarfKey(*s, unwound, &key);
      StackCache::Entry* hit = dwarf_cache.Find(key);
      if (hit == nullptr) {
        uint64_t misses = 0;
        auto as =
            attribution::Attribute(*s, attributor.table(), attributor.cookies(), &unwound, &misses);
        auto stack = resolver.Stack(as);
        hit = dwarf_cache.Insert(key, std::move(as), stack, misses);
      } else {
        attribution::AttributedSample& as = hit->sample;
        as.time_ns = s->time_ns;
        as.cpu = s->cpu;
        as.period = s->period;
        as.tid = s->tid;
        if (opts.thread_names) {
          const auto thread = attributor.table().ThreadAt(s->pid, s->tid, s->time_ns);
          as.tid = thread.tid;
          as.comm = *thread.comm;
        }
      }
      stats.no_mapping += hit->no_mapping;
      if (!opts.thread_names) {
        on_sample(ResolvedSample{&hit->sample, hit->stack, hit->id, &attributor.cookies()});
        continue;
      }
      on_sample(ResolvedSample{&hit->sample, hit->stack, hit->id, &attributor.cookies(),
                               ProcessComm(attributor.table(), hit->sample.pid),
                               ProcessExe(attributor.table(), hit->sample.pid)});
      continue;
    }
    uint64_t before = attributor.no_mapping();
    auto as = attributor.Add(e);
    auto stack = resolver.Stack(*as);
    if (!skimmed) {  // a sample with a DWARF stack copy: unwound on its own
      on_sample(ResolvedSample{&*as, stack, 0, &attributor.cookies(),
                               ProcessComm(attributor.table(), as->pid),
                               ProcessExe(attributor.table(), as->pid)});
      continue;
    }
    const uint64_t misses = attributor.no_mapping() - before;
    StackCache::Entry* hit = skim == EventDecoder::Skim::kStackRef
                                 ? cache.Insert(dec.last_stack_id(), std::move(*as), stack, misses)
                                 : cache.Insert(key, std::move(*as), stack, misses);
    on_sample(ResolvedSample{&hit->sample, hit->stack, hit->id, &attributor.cookies(),
                             ProcessComm(attributor.table(), hit->sample.pid),
                             ProcessExe(attributor.table(), hit->sample.pid)});
  }
  emit_off_cpu(UINT64_MAX);
  emit_growth(UINT64_MAX);
  stats.no_mapping += attributor.no_mapping();
  stats.files_opened = resolver.files_loaded();
  if (unwinder) stats.unwind = unwinder->stats();
  return stats;
}

}  // namespace flightrec::recorder::analysis
