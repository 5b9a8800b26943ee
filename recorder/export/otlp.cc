// OTLP profiles export: the OpenTelemetry profiles signal as a ProfilesData
// message of opentelemetry-proto's profiles/v1development/profiles.proto
// (status: development, its messages Alpha), at the revision kept in
// third_party/opentelemetry-proto (its README names the commit). ProfilesData
// is the signal's form for files, and its fields (1 and 2) are those of the
// OTLP ExportProfilesServiceRequest, so the file is also the body of an
// OTLP/HTTP request (application/x-protobuf). Not compressed: protoc and OTLP
// receivers read it as it is. Field numbers used (profiles.proto, common.proto,
// resource.proto):
//   ProfilesData: resource_profiles 1, dictionary 2
//   ResourceProfiles: resource 1, scope_profiles 2     Resource: attributes 1
//   KeyValue: key 1, value 2      ScopeProfiles: scope 1, profiles 2
//   InstrumentationScope: name 1
//   Profile: sample_type 1, samples 2, time_unix_nano 3 (fixed64),
//            duration_nano 4, period_type 5, period 6, attribute_indices 11
//   ValueType: type_strindex 1, unit_strindex 2
//   Sample: stack_index 1, attribute_indices 2, values 4,
//           timestamps_unix_nano 5 (packed fixed64)
//   ProfilesDictionary: mapping_table 1, location_table 2, function_table 3,
//           link_table 4, string_table 5, attribute_table 6, stack_table 7
//   Mapping: memory_start 1, memory_limit 2, file_offset 3,
//            filename_strindex 4, attribute_indices 5
//   Location: mapping_index 1, address 2, lines 3, attribute_indices 4
//   Line: function_index 1, line 2
//   Function: name_strindex 1, system_name_strindex 2, filename_strindex 3
//   Stack: location_indices 1 (leaf first)     Link: trace_id 1, span_id 2
//   KeyValueAndUnit: key_strindex 1, value 2    AnyValue: string_value 1,
//   int_value 3
// Entry 0 of every dictionary table is its zero value, as the proto requires.
//
// A Sample is the proto's identity (stack, attribute set); each recorded
// sample is one observation of it: its wall-clock timestamp and its value,
// the event count its period stands for (CPU nanoseconds for a clock event).
// Attribute names are the semantic conventions' (most as the OpenTelemetry
// eBPF profiler writes them): process.pid, thread.id, thread.name, cpu.logical_number,
// process.executable.path/.name on samples, profile.frame.type on locations,
// process.executable.build_id.gnu on mappings. String values are inline
// (AnyValue.string_value), not string_value_strindex, which consumers built
// on earlier revisions of the proto do not know. Strings are written as
// EscapeForTerminal shows them: proto3 strings must be UTF-8 (protoc and Go's
// protobuf refuse the whole message otherwise), and names read as in report.
//
// The Profile's length precedes its samples, so the observations are held
// until Finish (packed as they will be written: ~12 bytes a sample), then
// the Profile is streamed sample by sample rather than built whole.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/export/exporters.h"
#include "recorder/export/proto.h"

namespace flightrec::recorder::exporter {
namespace {

class OtlpProfiles : public Exporter {
 public:
  OtlpProfiles() {
    Str("");
    // The zero entries (index 0 = none) of the tables written as they grow.
    locations_.Message(2, ProtoWriter());
    functions_.Message(3, ProtoWriter());
    attributes_.Message(6, ProtoWriter());
    stacks_.Message(7, ProtoWriter());
    maps_.emplace_back();
  }

  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    info_ = info;
    const auto& backend = json::Object(info.config, "backend");
    event_ = json::Str(backend, "event");
    hz_ = json::Get<uint64_t>(backend, "frequency_hz", 0);
    clock_ = event_.empty() || event_.find("clock") != std::string::npos;
  }

  void Add(const analysis::ResolvedSample& rs) override {
    const auto& s = *rs.sample;
    std::vector<uint64_t> key = {Stack(rs)};  // then the attribute indices
    SampleAttributes(rs, &key);
    auto [it, fresh] = group_ids_.try_emplace(std::move(key), groups_.size());
    if (fresh) groups_.push_back(Group{&it->first, {}, {}});
    Group& g = groups_[it->second];
    constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();  // values are int64
    AppendUleb128(&g.values, std::min(s.period, kMax));
    ProtoWriter::AppendFixed64(&g.timestamps,
                               static_cast<uint64_t>(s.time_ns + info_.mono_to_wall_ns));
  }

  Status Finish() override {
    ProtoWriter profile;  // the Profile's fields but its samples
    ValueType(&profile, 1);
    if (info_.window_start_ns) {
      profile.Fixed64(3, static_cast<uint64_t>(static_cast<int64_t>(info_.window_start_ns) +
                                               info_.mono_to_wall_ns));
    }
    if (info_.window_end_ns > info_.window_start_ns) {
      profile.Varint(4, info_.window_end_ns - info_.window_start_ns);
    }
    ValueType(&profile, 5);
    if (clock_ && hz_) profile.Varint(6, 1'000'000'000 / hz_);
    profile.Packed(11, {StrAttribute("flightrec.record.id", info_.id)});
    uint64_t profile_size = profile.data().size();
    for (const auto& g : groups_) profile_size += FieldSize(2, EncodeSample(g).data().size());

    ProtoWriter scope;  // ScopeProfiles, up to its one Profile's bytes
    ProtoWriter name;
    name.Text(1, "flightrec");
    scope.Message(1, name);
    scope.Header(2, profile_size);
    const uint64_t scope_size = scope.data().size() + profile_size;
    ProtoWriter resource;  // ResourceProfiles, likewise
    resource.Message(1, Resource());
    resource.Header(2, scope_size);
    ProtoWriter top;
    top.Header(1, resource.data().size() + scope_size);
    for (const ProtoWriter* w : {&top, &resource, &scope, &profile}) Write(*w);
    for (const auto& g : groups_) {
      ProtoWriter sample;
      sample.Message(2, EncodeSample(g));
      Write(sample);
    }
    // The dictionary last: every string and attribute has its index by now.
    ProtoWriter dictionary;
    Dictionary(&dictionary);
    top.Clear();
    top.Message(2, dictionary);
    Write(top);
    return out_->good() ? OkStatus() : Status(StatusCode::kInternal, "writing the profile failed");
  }

 private:
  // A Sample: its identity (stack index, then attribute indices) and its
  // observations, packed as written.
  struct Group {
    const std::vector<uint64_t>* key;
    std::string values;      // varints
    std::string timestamps;  // little-endian fixed64
  };
  struct MapInfo {
    std::string dso;
    std::string build_id;              // hex, "" if unknown
    uint64_t lo = UINT64_MAX, hi = 0;  // the offsets seen
  };

  static ProtoWriter EncodeSample(const Group& g) {
    ProtoWriter s;
    s.Varint(1, g.key->front());
    s.Packed(2, std::vector<uint64_t>(g.key->begin() + 1, g.key->end()));
    s.Bytes(4, g.values);
    s.Bytes(5, g.timestamps);
    return s;
  }
  static uint64_t FieldSize(uint32_t field, uint64_t size) {
    ProtoWriter h;
    h.Header(field, size);
    return h.data().size() + size;
  }
  void Write(const ProtoWriter& w) {
    out_->write(w.data().data(), static_cast<std::streamsize>(w.data().size()));
  }

  // The value type of samples and of the period: CPU time for a clock
  // event, else the event's own count.
  void ValueType(ProtoWriter* p, uint32_t field) {
    ProtoWriter vt;
    vt.Varint(1, Str(clock_ ? "cpu" : event_));
    vt.Varint(2, Str(clock_ ? "nanoseconds" : "count"));
    p->Message(field, vt);
  }

  ProtoWriter Resource() const {
    ProtoWriter r;
    auto attr = [&r](const char* key, const std::string& value) {
      ProtoWriter any, kv;
      any.Text(1, value);
      kv.Text(1, key);
      kv.Message(2, any);
      r.Message(1, kv);
    };
    if (!info_.host.empty()) attr("host.name", info_.host);
    attr("os.type", "linux");
    return r;
  }

  void Dictionary(ProtoWriter* d) {
    d->Message(1, ProtoWriter());
    for (size_t i = 1; i < maps_.size(); ++i) d->Message(1, Mapping(maps_[i]));
    d->mutable_data() += locations_.data();
    d->mutable_data() += functions_.data();
    // link_table[0]: the zero Link with ids of their full sizes, as the proto
    // recommends for codecs that check their lengths.
    ProtoWriter link;
    link.Bytes(1, std::string(16, '\0'));
    link.Bytes(2, std::string(8, '\0'));
    d->Message(4, link);
    for (const auto& s : strings_) d->Bytes(5, s);
    d->mutable_data() += attributes_.data();
    d->mutable_data() += stacks_.data();
  }

  // Location addresses are file offsets (one file is mapped at different
  // addresses in different processes), so a mapping spans the offsets seen
  // and starts at its file offset, as in the pprof export.
  ProtoWriter Mapping(const MapInfo& map) {
    const bool seen = map.lo <= map.hi;
    const uint64_t start = seen ? map.lo & ~uint64_t{0xfff} : 0;
    ProtoWriter m;
    m.Varint(1, start);
    m.Varint(2, seen ? map.hi + 1 : 0);
    m.Varint(3, start);
    m.Varint(4, Str(map.dso));
    if (!map.build_id.empty()) {
      m.Packed(5, {StrAttribute("process.executable.build_id.gnu", map.build_id)});
    }
    return m;
  }

  void SampleAttributes(const analysis::ResolvedSample& rs, std::vector<uint64_t>* out) {
    const auto& s = *rs.sample;
    out->push_back(IntAttribute("process.pid", s.pid));
    out->push_back(IntAttribute("thread.id", s.tid));
    out->push_back(StrAttribute("thread.name", s.comm));
    out->push_back(IntAttribute("cpu.logical_number", s.cpu));
    if (rs.process_exe != nullptr) {
      const std::string& exe = *rs.process_exe;
      out->push_back(StrAttribute("process.executable.path", exe));
      out->push_back(
          StrAttribute("process.executable.name", exe.substr(exe.find_last_of('/') + 1)));
    } else if (const std::string* name = ProcessName(rs)) {
      out->push_back(StrAttribute("process.executable.name", *name));
    }
    // Where the process ran: the semantic conventions' container and k8s
    // attributes where they have one, ours otherwise (their
    // process.linux.cgroup is the whole /proc line, not the path).
    for (const auto& [label, value] : ProcessLabelValues(info_, s.pid)) {
      out->push_back(StrAttribute(AttributeName(label), value));
    }
    // An incomplete user stack says why and where, as pprof's labels do.
    if (!IncompleteStackMarker(s).empty()) {
      out->push_back(StrAttribute("flightrec.unwind.status", s.unwind.status));
      out->push_back(StrAttribute("flightrec.unwind.where", s.unwind.where));
    }
  }

  static const char* AttributeName(ProcessLabel l) {
    switch (l) {
      case ProcessLabel::kCgroup:
        return "flightrec.cgroup.path";
      case ProcessLabel::kUnit:
        return "flightrec.systemd.unit";
      case ProcessLabel::kContainerRuntime:
        return "container.runtime.name";
      case ProcessLabel::kContainerId:
        return "container.id";
      case ProcessLabel::kPodUid:
        return "k8s.pod.uid";
      case ProcessLabel::kPodQos:
        return "flightrec.k8s.pod.qos";
    }
    return "";
  }

  uint64_t Stack(const analysis::ResolvedSample& rs) {
    std::vector<uint64_t> locs;
    for (const auto& f : FramesOf(rs)) locs.push_back(Location(f));
    // An incomplete user stack ends (at the root) in a marker frame.
    if (std::string marker = IncompleteStackMarker(*rs.sample); !marker.empty()) {
      locs.push_back(MarkerLocation(marker));
    }
    if (locs.empty()) return 0;
    auto [it, fresh] = stack_ids_.try_emplace(locs, stack_ids_.size() + 1);
    if (fresh) {
      ProtoWriter st;
      st.Packed(1, locs);
      stacks_.Message(7, st);
    }
    return it->second;
  }

  // One location per (file, offset): its inline chain as lines, caller last.
  uint64_t Location(const FrameSymbols& f) {
    const attribution::Symbol& outer = *f.symbols.back();
    auto [mit, mfresh] = map_ids_.try_emplace(outer.dso, maps_.size());
    if (mfresh) maps_.push_back(MapInfo{outer.dso, "", UINT64_MAX, 0});
    MapInfo& map = maps_[mit->second];
    if (f.build_id && map.build_id.empty()) map.build_id = *f.build_id;
    map.lo = std::min(map.lo, outer.offset);
    map.hi = std::max(map.hi, outer.offset);
    auto key = fmt::format("{}\n{:x}\n{}", outer.dso, outer.offset, outer.Display());
    auto [it, fresh] = location_ids_.try_emplace(std::move(key), location_ids_.size() + 1);
    if (fresh) {
      ProtoWriter loc;
      loc.Varint(1, mit->second);
      loc.Varint(2, outer.offset);
      for (const auto* sym : f.symbols) {
        ProtoWriter line;
        line.Varint(1, Function(sym->Display(), sym->file.empty() ? sym->dso : sym->file));
        if (sym->line) line.Varint(2, sym->line);
        loc.Message(3, line);
      }
      loc.Packed(4, {StrAttribute("profile.frame.type", f.kernel ? "kernel" : "native")});
      locations_.Message(2, loc);
    }
    return it->second;
  }
  // A marker frame: a function of that name, in no mapping.
  uint64_t MarkerLocation(const std::string& marker) {
    auto [it, fresh] = location_ids_.try_emplace("\n" + marker, location_ids_.size() + 1);
    if (fresh) {
      ProtoWriter line, loc;
      line.Varint(1, Function(marker, ""));
      loc.Message(3, line);
      locations_.Message(2, loc);
    }
    return it->second;
  }
  uint64_t Function(const std::string& name, const std::string& file) {
    auto [it, fresh] = function_ids_.try_emplace(name + '\0' + file, function_ids_.size() + 1);
    if (fresh) {
      ProtoWriter f;
      f.Varint(1, Str(name));
      f.Varint(2, Str(name));
      if (!file.empty()) f.Varint(3, Str(file));
      functions_.Message(3, f);
    }
    return it->second;
  }

  // Attributes, each (key, value) once in the table.
  uint64_t StrAttribute(std::string_view key, const std::string& value) {
    const uint64_t k = Str(std::string(key)), v = Str(value);
    auto [it, fresh] = str_attribute_ids_.try_emplace({k, v}, attribute_count_);
    if (fresh) {
      ProtoWriter any;
      any.Bytes(1, strings_[v]);  // already as EscapeForTerminal shows it
      AddAttribute(k, any);
    }
    return it->second;
  }
  uint64_t IntAttribute(std::string_view key, int64_t value) {
    const uint64_t k = Str(std::string(key));
    auto [it, fresh] = int_attribute_ids_.try_emplace({k, value}, attribute_count_);
    if (fresh) {
      ProtoWriter any;
      any.Varint(3, static_cast<uint64_t>(value));  // a oneof member: written even when 0
      AddAttribute(k, any);
    }
    return it->second;
  }
  void AddAttribute(uint64_t key, const ProtoWriter& any) {
    ProtoWriter kv;
    kv.Varint(1, key);
    kv.Message(2, any);
    attributes_.Message(6, kv);
    ++attribute_count_;
  }

  // The string table holds each text once, as EscapeForTerminal shows it
  // (two raw names may show the same).
  uint64_t Str(const std::string& raw) {
    if (auto it = raw_string_ids_.find(raw); it != raw_string_ids_.end()) return it->second;
    std::string text = EscapeForTerminal(raw);
    auto [it, fresh] = string_ids_.try_emplace(text, strings_.size());
    if (fresh) strings_.push_back(std::move(text));
    raw_string_ids_.emplace(raw, it->second);
    return it->second;
  }

  std::ostream* out_ = nullptr;
  analysis::RecordInfo info_;
  std::string event_;
  uint64_t hz_ = 0;
  bool clock_ = true;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint64_t> string_ids_, raw_string_ids_;
  std::unordered_map<std::string, uint64_t> function_ids_, location_ids_, map_ids_;
  std::map<std::vector<uint64_t>, uint64_t> stack_ids_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> str_attribute_ids_;
  std::map<std::pair<uint64_t, int64_t>, uint64_t> int_attribute_ids_;
  uint64_t attribute_count_ = 1;  // entry 0 is the zero attribute
  std::vector<MapInfo> maps_;     // maps_[0] is the zero mapping
  std::map<std::vector<uint64_t>, size_t> group_ids_;
  std::vector<Group> groups_;
  ProtoWriter locations_, functions_, attributes_, stacks_;
};

}  // namespace

std::unique_ptr<Exporter> MakeOtlpProfiles() { return std::make_unique<OtlpProfiles>(); }

}  // namespace flightrec::recorder::exporter
