// pprof export: github.com/google/pprof/proto/profile.proto, gzip-compressed
// as `go tool pprof` expects. Field numbers used (profile.proto):
//   Profile: sample_type 1, sample 2, mapping 3, location 4, function 5,
//            string_table 6, time_nanos 9, duration_nanos 10, period_type 11,
//            period 12, comment 13
//   ValueType: type 1, unit 2          Sample: location_id 1, value 2, label 3
//   Label: key 1, str 2, num 3, num_unit 4
//   Mapping: id 1, memory_start 2, memory_limit 3, file_offset 4,
//            filename 5, build_id 6, has_functions 7, has_filenames 8,
//            has_line_numbers 9, has_inline_frames 10
//   Location: id 1, mapping_id 2, address 3, line 4     Line: function_id 1, line 2
//   Function: id 1, name 2, system_name 3, filename 4
// Each recorded sample stays one pprof sample so its timestamp survives as a
// label (pprof aggregates them itself); the leaf is location_id[0], and an
// inlined call is several Lines of one Location, the caller last.
// Samples are compressed as they come (a few bytes of gzip each instead of
// ~150 of protobuf held until the end: 10 M samples were 1.5 GB of RSS),
// and the tables follow at the end: protobuf readers take a message's
// fields in any order, and the string table is last because every other
// field's indices are handed out by then.
#include <zlib.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "recorder/export/exporters.h"
#include "recorder/export/proto.h"

namespace flightrec::recorder::exporter {
namespace {

class Pprof : public Exporter {
 public:
  Pprof() { Str(""); }
  ~Pprof() override {
    if (z_open_) deflateEnd(&zs_);
  }

  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    info_ = info;
    // The record's config, checked like any input from a file.
    const auto& backend = json::Object(info.config, "backend");
    event_ = json::Str(backend, "event");
    hz_ = json::Get<uint64_t>(backend, "frequency_hz", 0);
    clock_ = event_.empty() || event_.find("clock") != std::string::npos;
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
      status_ = Status(StatusCode::kInternal, "zlib: deflateInit2 failed");
      return;
    }
    z_open_ = true;
    ProtoWriter head;
    ValueType(&head, 1, "samples", "count");
    if (clock_) {
      ValueType(&head, 1, "cpu", "nanoseconds");
    } else {
      ValueType(&head, 1, event_.c_str(), "count");
    }
    Deflate(head.data(), Z_NO_FLUSH);
  }

  void Add(const analysis::ResolvedSample& rs) override {
    const auto& s = *rs.sample;
    if (rs.process_exe != nullptr) ++exe_samples_[*rs.process_exe];
    std::vector<uint64_t> locs;
    for (const auto& f : FramesOf(rs)) locs.push_back(Location(f.symbols, f.build_id));
    // An incomplete user stack ends (at the root) in a marker frame, and
    // says why and where in labels.
    std::string marker = IncompleteStackMarker(s);
    if (!marker.empty()) {
      auto [it, fresh] = markers_.try_emplace(marker);
      if (fresh) {
        it->second.function = marker;
        it->second.status = "ok";
      }
      const attribution::Symbol* sym = &it->second;
      locs.push_back(Location(std::span<const attribution::Symbol* const>(&sym, 1)));
    }
    ProtoWriter sample;
    sample.Packed(1, locs);
    sample.Packed(2, {1, s.period});
    // Identifiers are numeric labels, so `-tagfocus=pid=1234` and ranges
    // work. Each has a unit: pprof drops a numeric label whose value is 0
    // only when it has no unit (profile/encode.go), and CPU 0 and the idle
    // task's pid 0 must stay. A unit pprof does not know is neither scaled
    // nor shown, and a unitless filter value matches it.
    Label(&sample, "pid", s.pid, "pid");
    Label(&sample, "tid", s.tid, "tid");
    Label(&sample, "cpu", s.cpu, "cpu");
    StrLabel(&sample, "comm", s.comm);
    // Where the process ran, so `-tagfocus=container_id=...` picks one.
    for (const auto& [key, value] : ProcessLabels(s.pid)) StrLabel(&sample, key, value);
    // Wall-clock ns since the epoch: not a duration, so not "nanoseconds"
    // (pprof would print it as ~500 000 hours).
    Label(&sample, "timestamp_ns", static_cast<uint64_t>(s.time_ns + info_.mono_to_wall_ns),
          "ns_since_epoch");
    if (!marker.empty()) {
      StrLabel(&sample, "unwind", s.unwind.status);
      StrLabel(&sample, "unwind_where", s.unwind.where);
    }
    samples_.Message(2, sample);
    if (samples_.data().size() >= kFlushBytes) {
      Deflate(samples_.data(), Z_NO_FLUSH);
      samples_.Clear();
    }
  }

  Status Finish() override {
    ProtoWriter p;
    p.mutable_data() += samples_.data();
    samples_.Clear();
    // pprof takes the first mapping for the main binary (its "File:").
    const std::string main = MainExe();
    if (!main.empty()) {
      auto [it, fresh] = mappings_.try_emplace(main);
      if (fresh) it->second.id = mappings_.size();  // no code sampled: an empty range
      Mapping(&p, main, it->second);
    }
    for (const auto& [dso, map] : mappings_) {
      if (dso != main) Mapping(&p, dso, map);
    }
    p.mutable_data() += locations_.data();
    p.mutable_data() += functions_.data();
    if (info_.window_start_ns) {
      p.Varint(9, static_cast<uint64_t>(static_cast<int64_t>(info_.window_start_ns) +
                                        info_.mono_to_wall_ns));
    }
    if (info_.window_end_ns > info_.window_start_ns) {
      p.Varint(10, info_.window_end_ns - info_.window_start_ns);
    }
    ValueType(&p, 11, clock_ ? "cpu" : event_.c_str(), clock_ ? "nanoseconds" : "count");
    if (clock_ && hz_) p.Varint(12, 1'000'000'000 / hz_);
    p.Varint(13, Str(fmt::format("flightrec record {}", info_.id)));
    // The string table last: every index above has been handed out by now.
    for (const auto& s : strings_) p.Bytes(6, s);
    Deflate(p.data(), Z_FINISH);
    if (!status_.ok()) return status_;
    return out_->good() ? OkStatus() : Status(StatusCode::kInternal, "writing the profile failed");
  }

 private:
  // Compresses `raw` into out_; Z_FINISH ends the gzip stream. The first
  // failure is kept for Finish (Add cannot return one).
  void Deflate(std::string_view raw, int flush) {
    if (!status_.ok() || !z_open_) return;
    std::vector<char> buf(1 << 16);
    size_t done = 0;
    for (;;) {
      // avail_in is 32 bits: a large input goes in slices.
      const size_t slice = std::min<size_t>(raw.size() - done, 1u << 30);
      zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + done));
      zs_.avail_in = static_cast<uInt>(slice);
      const bool last = done + slice == raw.size();
      const int mode = last ? flush : Z_NO_FLUSH;
      int ret;
      do {
        zs_.next_out = reinterpret_cast<Bytef*>(buf.data());
        zs_.avail_out = static_cast<uInt>(buf.size());
        ret = deflate(&zs_, mode);
        if (ret == Z_STREAM_ERROR) {
          status_ = Status(StatusCode::kInternal, "zlib: deflate failed");
          return;
        }
        out_->write(buf.data(), static_cast<std::streamsize>(buf.size() - zs_.avail_out));
      } while (zs_.avail_out == 0 || (mode == Z_FINISH && ret != Z_STREAM_END));
      done += slice;
      if (last) break;
    }
    if (flush == Z_FINISH) {
      deflateEnd(&zs_);
      z_open_ = false;
    }
    if (!out_->good()) status_ = Status(StatusCode::kInternal, "writing the profile failed");
  }
  // The executable of the processes with the most samples (the filtered
  // process's, in an export of one), "" if none is known.
  std::string MainExe() const {
    const std::pair<const std::string, uint64_t>* best = nullptr;
    for (const auto& e : exe_samples_) {
      if (best == nullptr || e.second > best->second ||
          (e.second == best->second && e.first < best->first)) {
        best = &e;
      }
    }
    return best ? best->first : "";
  }
  struct MapInfo;
  void Mapping(ProtoWriter* p, const std::string& dso, const MapInfo& map) {
    // Location addresses are file offsets (one file is mapped at different
    // addresses in different processes), so the mapping spans the offsets
    // seen, starting at its file offset: address - start + file_offset is
    // the offset again, as pprof computes it.
    const bool seen = map.lo <= map.hi;
    const uint64_t start = seen ? map.lo & ~uint64_t{0xfff} : 0;
    ProtoWriter m;
    m.Varint(1, map.id);
    m.Varint(2, start);
    m.Varint(3, seen ? map.hi + 1 : 0);
    m.Varint(4, start);
    m.Varint(5, Str(dso));
    if (!map.build_id.empty()) m.Varint(6, Str(map.build_id));
    m.Varint(7, 1);
    m.Varint(8, 1);
    m.Varint(9, 1);
    m.Varint(10, 1);
    p->Message(3, m);
  }
  void ValueType(ProtoWriter* p, uint32_t field, const char* type, const char* unit) {
    ProtoWriter vt;
    vt.Varint(1, Str(type));
    vt.Varint(2, Str(unit));
    p->Message(field, vt);
  }
  // The labels of pid's process, built once per process.
  const std::vector<std::pair<const char*, std::string>>& ProcessLabels(uint32_t pid) {
    auto [it, fresh] = process_labels_.try_emplace(pid);
    if (!fresh) return it->second;
    for (auto& [label, value] : ProcessLabelValues(info_, pid)) {
      it->second.emplace_back(ProcessLabelKey(label), std::move(value));
    }
    return it->second;
  }
  uint64_t Str(const std::string& s) {
    auto [it, fresh] = string_ids_.try_emplace(s, strings_.size());
    if (fresh) strings_.push_back(s);
    return it->second;
  }
  void StrLabel(ProtoWriter* sample, const char* key, const std::string& value) {
    ProtoWriter l;
    l.Varint(1, Str(key));
    l.Varint(2, Str(value));
    sample->Message(3, l);
  }
  void Label(ProtoWriter* sample, const char* key, uint64_t num, const char* unit = nullptr) {
    ProtoWriter l;
    l.Varint(1, Str(key));
    l.Varint(3, num);
    if (unit) l.Varint(4, Str(unit));
    sample->Message(3, l);
  }
  uint64_t Function(const attribution::Symbol& s) {
    std::string name = s.Display();
    auto key = name + '\0' + s.file;
    auto [it, fresh] = function_ids_.try_emplace(key, function_ids_.size() + 1);
    if (fresh) {
      ProtoWriter f;
      f.Varint(1, it->second);
      f.Varint(2, Str(name));
      f.Varint(3, Str(name));
      f.Varint(4, Str(s.file.empty() ? s.dso : s.file));
      functions_.Message(5, f);
    }
    return it->second;
  }
  // One location per (file, offset): its inline chain as lines, caller last.
  struct MapInfo {
    uint64_t id = 0;
    std::string build_id;              // hex, "" if unknown
    uint64_t lo = UINT64_MAX, hi = 0;  // the offsets seen
  };
  uint64_t Location(std::span<const attribution::Symbol* const> group,
                    const std::string* build_id = nullptr) {
    const attribution::Symbol& outer = *group.back();
    auto [mit, mfresh] = mappings_.try_emplace(outer.dso);
    if (mfresh) mit->second.id = mappings_.size();
    MapInfo& map = mit->second;
    if (build_id && map.build_id.empty()) map.build_id = *build_id;
    map.lo = std::min(map.lo, outer.offset);
    map.hi = std::max(map.hi, outer.offset);
    auto key = fmt::format("{}\n{:x}\n{}", outer.dso, outer.offset, outer.Display());
    auto [it, fresh] = location_ids_.try_emplace(key, location_ids_.size() + 1);
    if (fresh) {
      ProtoWriter loc;
      loc.Varint(1, it->second);
      loc.Varint(2, map.id);
      loc.Varint(3, outer.offset);
      for (const auto* sym : group) {
        ProtoWriter line;
        line.Varint(1, Function(*sym));
        if (sym->line) line.Varint(2, sym->line);
        loc.Message(4, line);
      }
      locations_.Message(4, loc);
    }
    return it->second;
  }
  std::ostream* out_ = nullptr;
  analysis::RecordInfo info_;
  std::string event_;
  uint64_t hz_ = 0;
  bool clock_ = true;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint64_t> string_ids_;
  std::unordered_map<uint32_t, std::vector<std::pair<const char*, std::string>>> process_labels_;
  std::unordered_map<std::string, uint64_t> function_ids_;
  std::unordered_map<std::string, uint64_t> location_ids_;
  std::map<std::string, MapInfo> mappings_;                // by file
  std::unordered_map<std::string, uint64_t> exe_samples_;  // samples by process executable
  std::map<std::string, attribution::Symbol> markers_;     // the marker frames' symbols
  ProtoWriter samples_, locations_, functions_;
  static constexpr size_t kFlushBytes = 1 << 20;  // samples_ is compressed at this size
  z_stream zs_{};
  bool z_open_ = false;
  Status status_;
};

}  // namespace

std::unique_ptr<Exporter> MakePprof() { return std::make_unique<Pprof>(); }

}  // namespace flightrec::recorder::exporter
