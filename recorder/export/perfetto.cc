// Perfetto's native protobuf trace: every recorded sample as one PerfSample
// packet (Perfetto's `perf_sample` table, the UI's per-thread and per-process
// sample tracks and flame graphs), its stack interned on one packet sequence
// (function names, frames, callstacks, mappings with build-ids and paths); a
// ClockSnapshot relating the samples' CLOCK_MONOTONIC to REALTIME and
// BOOTTIME as the record measured them; process, thread and CPU tracks named
// by TrackDescriptors; and, on those tracks, slices that show each sample
// for exactly the CPU time it stands for (see AddSlices).
//
// Field numbers, from google/perfetto (the file and commit each was read at):
//   protos/perfetto/trace/trace_packet.proto @ 02603952ce0ca9a1f4728ec3153663e8b4b05e06
//     Trace.packet 1 (protos/perfetto/trace/trace.proto);
//     TracePacket: timestamp 8, timestamp_clock_id 58, trusted_packet_sequence_id 10,
//     interned_data 12, sequence_flags 13 (SEQ_INCREMENTAL_STATE_CLEARED 1,
//     SEQ_NEEDS_INCREMENTAL_STATE 2), clock_snapshot 6, track_event 11,
//     track_descriptor 60, perf_sample 66
//   protos/perfetto/trace/clock_snapshot.proto @ 246b14de886b982a465bd80a832f7d21d2b63866
//     ClockSnapshot: clocks 1, primary_trace_clock 2; Clock: clock_id 1, timestamp 2
//   protos/perfetto/common/builtin_clock.proto @ 4dba8e1f40f1c1ec5dfa0c0dae8c84866ed9e1a9
//     BUILTIN_CLOCK_REALTIME 1, BUILTIN_CLOCK_MONOTONIC 3, BUILTIN_CLOCK_BOOTTIME 6
//   protos/perfetto/trace/profiling/profile_packet.proto @ 079efa5466a7f5935febd4566a0da4e21d202f16
//     PerfSample: cpu 1, pid 2, tid 3, callstack_iid 4, cpu_mode 5 (MODE_KERNEL 1,
//     MODE_USER 2), unwind_error 16 (UNWIND_ERROR_MEMORY_INVALID 2,
//     UNWIND_ERROR_UNWIND_INFO 3, UNWIND_ERROR_INVALID_ELF 8, UNWIND_ERROR_UNKNOWN 0)
//   protos/perfetto/trace/interned_data/interned_data.proto @
//   024d2009315661129513dc3d07a00f444394410e
//     InternedData: function_names 5, frames 6, callstacks 7, build_ids 16,
//     mapping_paths 17, mappings 19
//   protos/perfetto/trace/profiling/profile_common.proto @ 02603952ce0ca9a1f4728ec3153663e8b4b05e06
//     InternedString: iid 1, str 2; Frame: iid 1, function_name_id 2, mapping_id 3,
//     rel_pc 4; Callstack: iid 1, frame_ids 2 (bottom frame first); Mapping: iid 1,
//     build_id 2, start_offset 3, start 4, end 5, load_bias 6, path_string_ids 7,
//     exact_offset 8
//   protos/perfetto/trace/track_event/track_descriptor.proto @
//   077b18e7a0361d15ba8a15cb5febd4a71339ad8c
//     TrackDescriptor: uuid 1, name 2, process 3, thread 4, parent_uuid 5
//   protos/perfetto/trace/track_event/process_descriptor.proto @
//   35ecffbaee5d3429eddc0706caf6c7576b2975ee
//     ProcessDescriptor: pid 1, process_name 6, process_labels 8
//   protos/perfetto/trace/track_event/thread_descriptor.proto @
//   1e2582a8627e96241c2e2ad1a8dd0b1fdd853898
//     ThreadDescriptor: pid 1, tid 2, thread_name 5
//   protos/perfetto/trace/track_event/track_event.proto @ 005055c991ae2d5717df2d086495181ef7fe5a32
//     TrackEvent: type 9 (TYPE_SLICE_BEGIN 1, TYPE_SLICE_END 2), track_uuid 11, name 23
//
// The protos are proto2: repeated scalars (Callstack.frame_ids,
// Mapping.path_string_ids) are NOT packed, and Perfetto's own decoder
// (protozero) reads them only unpacked, so they are written one field each.
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "recorder/export/exporters.h"
#include "recorder/export/proto.h"

namespace flightrec::recorder::exporter {
namespace {

// TracePacket
constexpr uint32_t kPacketTimestamp = 8;
constexpr uint32_t kPacketTimestampClockId = 58;
constexpr uint32_t kPacketSequenceId = 10;
constexpr uint32_t kPacketInternedData = 12;
constexpr uint32_t kPacketSequenceFlags = 13;
constexpr uint32_t kPacketClockSnapshot = 6;
constexpr uint32_t kPacketTrackEvent = 11;
constexpr uint32_t kPacketTrackDescriptor = 60;
constexpr uint32_t kPacketPerfSample = 66;
constexpr uint64_t kSeqIncrementalStateCleared = 1;
constexpr uint64_t kSeqNeedsIncrementalState = 2;
// BuiltinClock
constexpr uint64_t kClockRealtime = 1;
constexpr uint64_t kClockMonotonic = 3;
constexpr uint64_t kClockBoottime = 6;
// InternedData
constexpr uint32_t kInternFunctionNames = 5;
constexpr uint32_t kInternFrames = 6;
constexpr uint32_t kInternCallstacks = 7;
constexpr uint32_t kInternBuildIds = 16;
constexpr uint32_t kInternMappingPaths = 17;
constexpr uint32_t kInternMappings = 19;
// Profiling.StackUnwindError
constexpr uint64_t kUnwindErrorUnknown = 0;
constexpr uint64_t kUnwindErrorMemoryInvalid = 2;
constexpr uint64_t kUnwindErrorUnwindInfo = 3;
constexpr uint64_t kUnwindErrorInvalidElf = 8;

// The one writer sequence of the file: interned ids are scoped to it.
constexpr uint64_t kSequenceId = 1;

class Perfetto : public Exporter {
 public:
  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    info_ = info;
    // The record's config, checked like any input from a file.
    const auto& backend = json::Object(info.config, "backend");
    std::string event = json::Str(backend, "event");
    uint64_t hz = json::Get<uint64_t>(backend, "frequency_hz", 0);
    clock_event_ = event.empty() || event.find("clock") != std::string::npos;
    interval_ns_ = hz ? 1'000'000'000 / hz : 1'000'000;
    if (info.window_start_ns) WriteClockSnapshot(info.window_start_ns);
  }

  void Add(const analysis::ResolvedSample& rs) override {
    const auto& s = *rs.sample;
    if (!snapshot_written_) WriteClockSnapshot(s.time_ns);
    ProcessTrack(s.pid, ProcessName(rs));
    ThreadTrack(s.pid, s.tid, s.comm);
    ProtoWriter interned;
    ProtoWriter sample;
    sample.Varint(1, s.cpu);
    sample.Varint(2, s.pid);
    sample.Varint(3, s.tid);
    sample.Varint(4, Callstack(rs, &interned));
    sample.Varint(5, !s.frames.empty() && s.frames.front().kernel ? 1 : 2);
    if (std::string marker = IncompleteStackMarker(s); !marker.empty()) {
      sample.Varint(16, UnwindError(s.unwind.status));
    }
    ProtoWriter p = PacketHeader(s.time_ns, kSeqNeedsIncrementalState);
    if (!interned.data().empty()) p.Message(kPacketInternedData, interned);
    p.Message(kPacketPerfSample, sample);
    Write(p);
    AddSlices(rs);
  }

  Status Finish() override {
    return out_->good() ? OkStatus() : Status(StatusCode::kInternal, "writing the trace failed");
  }

 private:
  // Slices: each sample is shown on its thread's track as its stack, one
  // nested slice per frame, and on its CPU's track as one slice naming the
  // thread. A slice spans the CPU time the sample stands for — its period for
  // a clock event, one sampling interval otherwise — ending at the sample
  // (the kernel counts the period before the overflow that takes the
  // sample), clipped at the lane's previous sample so lanes stay ordered.
  // Neighbouring samples are never merged: a frame's slices add up to the
  // time its samples account for, a parent has self time only where a sample
  // stopped in it, and a gap between samples stays a gap.
  void AddSlices(const analysis::ResolvedSample& rs) {
    const auto& s = *rs.sample;
    const uint64_t len = clock_event_ && s.period ? s.period : interval_ns_;
    std::vector<std::string> names;  // outermost first
    if (std::string marker = IncompleteStackMarker(s); !marker.empty()) {
      names.push_back(std::move(marker));
    }
    for (auto it = rs.stack.rbegin(); it != rs.stack.rend(); ++it) {
      names.push_back(FrameName(**it));
    }
    uint64_t& tprev = thread_last_[s.tid];
    const uint64_t tbegin = SliceBegin(s.time_ns, len, tprev);
    const uint64_t tuuid = ThreadUuid(s.tid);
    for (const auto& n : names) Event(1, tuuid, tbegin, &n);
    for (size_t i = 0; i < names.size(); ++i) Event(2, tuuid, s.time_ns, nullptr);
    tprev = s.time_ns;

    const uint64_t cuuid = CpuTrack(s.cpu);
    uint64_t& cprev = cpu_last_[s.cpu];
    const std::string who = fmt::format("{} {}/{}", s.comm.empty() ? "?" : s.comm, s.pid, s.tid);
    Event(1, cuuid, SliceBegin(s.time_ns, len, cprev), &who);
    Event(2, cuuid, s.time_ns, nullptr);
    cprev = s.time_ns;
  }
  uint64_t SliceBegin(uint64_t t, uint64_t len, uint64_t prev) const {
    uint64_t begin = t > len ? t - len : 0;
    begin = std::max(begin, prev);
    // Nothing before the window (the clock snapshot's instant).
    return std::min(std::max(begin, snapshot_mono_), t);
  }
  void Event(uint64_t type, uint64_t track, uint64_t ts, const std::string* name) {
    ProtoWriter te;
    te.Varint(9, type);
    te.Varint(11, track);
    if (name) te.Text(23, *name);
    ProtoWriter p = PacketHeader(ts, 0);
    p.Message(kPacketTrackEvent, te);
    Write(p);
  }

  // Tracks: a process track per pid, a thread track per tid under it, and a
  // track per CPU. A thread's track is described again when its name changes
  // inside the window (an exec, a prctl): Perfetto keeps the last name.
  static uint64_t ProcessUuid(uint32_t pid) { return 0x466d000000000000ULL | pid; }
  static uint64_t ThreadUuid(uint32_t tid) { return 0x466c000000000000ULL | tid; }
  static uint64_t CpuUuid(uint32_t cpu) { return 0x4663000000000000ULL | cpu; }
  // A process track is described when first seen (without a name if none is
  // known yet: its thread tracks hang under it) and again when its name
  // changes.
  void ProcessTrack(uint32_t pid, const std::string* name) {
    auto [it, fresh] = process_names_.try_emplace(pid);
    if (!fresh && (name == nullptr || (it->second && *it->second == *name))) return;
    if (name != nullptr) it->second = *name;
    ProtoWriter pd, td;
    pd.Varint(1, pid);
    if (name != nullptr) pd.Text(6, *name);
    // Where it ran, as "unit=nginx.service", "container_id=<id>", ...: the
    // UI lists a process's labels beside its name.
    for (const auto& [label, value] : ProcessLabelValues(info_, pid)) {
      pd.Text(8, fmt::format("{}={}", ProcessLabelKey(label), value));
    }
    td.Varint(1, ProcessUuid(pid));
    td.Message(3, pd);
    ProtoWriter p = PacketHeader(std::nullopt, 0);
    p.Message(kPacketTrackDescriptor, td);
    Write(p);
  }
  void ThreadTrack(uint32_t pid, uint32_t tid, const std::string& comm) {
    auto [it, fresh] = thread_names_.try_emplace(tid, comm);
    if (!fresh && it->second == comm) return;
    it->second = comm;
    ProtoWriter thd, td;
    thd.Varint(1, pid);
    thd.Varint(2, tid);
    thd.Text(5, comm);
    td.Varint(1, ThreadUuid(tid));
    td.Varint(5, ProcessUuid(pid));
    td.Message(4, thd);
    ProtoWriter p = PacketHeader(std::nullopt, 0);
    p.Message(kPacketTrackDescriptor, td);
    Write(p);
  }
  uint64_t CpuTrack(uint32_t cpu) {
    if (cpus_.insert(cpu).second) {
      ProtoWriter td;
      td.Varint(1, CpuUuid(cpu));
      td.Bytes(2, fmt::format("CPU {}", cpu));
      ProtoWriter p = PacketHeader(std::nullopt, 0);
      p.Message(kPacketTrackDescriptor, td);
      Write(p);
    }
    return CpuUuid(cpu);
  }

  // The record's clocks at one instant: MONOTONIC (the samples' clock, made
  // the trace's primary clock so timestamps read as the record's own), and
  // REALTIME and BOOTTIME by the offsets the record took at dump time
  // (BOOTTIME only in records that have it). It is the first packet and
  // clears the sequence's incremental state, before any interned data.
  void WriteClockSnapshot(uint64_t mono) {
    snapshot_written_ = true;
    snapshot_mono_ = mono;
    ProtoWriter cs;
    auto clock = [&](uint64_t id, int64_t ts) {
      ProtoWriter c;
      c.Varint(1, id);
      c.Varint(2, static_cast<uint64_t>(ts));
      cs.Message(1, c);
    };
    clock(kClockMonotonic, static_cast<int64_t>(mono));
    if (info_.mono_to_wall_ns) {
      clock(kClockRealtime, static_cast<int64_t>(mono) + info_.mono_to_wall_ns);
    }
    if (info_.mono_to_boot_ns) {
      clock(kClockBoottime, static_cast<int64_t>(mono) + *info_.mono_to_boot_ns);
    }
    cs.Varint(2, kClockMonotonic);
    ProtoWriter p;
    p.Varint(kPacketSequenceId, kSequenceId);
    p.Varint(kPacketSequenceFlags, kSeqIncrementalStateCleared);
    p.Message(kPacketClockSnapshot, cs);
    Write(p);
  }

  // Every timestamped packet names its clock, so no reader has to assume
  // BOOTTIME (Perfetto's default) for it.
  ProtoWriter PacketHeader(std::optional<uint64_t> ts, uint64_t flags) const {
    ProtoWriter p;
    if (ts) {
      p.Varint(kPacketTimestamp, *ts);
      p.Varint(kPacketTimestampClockId, kClockMonotonic);
    }
    p.Varint(kPacketSequenceId, kSequenceId);
    if (flags) p.Varint(kPacketSequenceFlags, flags);
    return p;
  }
  void Write(const ProtoWriter& packet) {
    ProtoWriter trace;
    trace.Message(1, packet);
    out_->write(trace.data().data(), static_cast<std::streamsize>(trace.data().size()));
  }

  // Interning. Ids start at 1 (0 is "not set") and each table has its own;
  // an entry is emitted in the packet that first uses it.
  static std::string FrameName(const attribution::Symbol& s) {
    return s.inlined ? s.Display() + " [inlined]" : s.Display();
  }
  uint64_t InternString(std::map<std::string, uint64_t>* table, uint32_t field,
                        const std::string& s, ProtoWriter* interned) {
    auto [it, fresh] = table->try_emplace(s, table->size() + 1);
    if (fresh) {
      ProtoWriter e;
      e.Varint(1, it->second);
      e.Bytes(2, s);
      interned->Message(field, e);
    }
    return it->second;
  }
  // One mapping per file (a file is mapped at different addresses in
  // different processes): frames carry file offsets as rel_pc, so the
  // mapping's start/end/offsets stay 0 — its identity is the path and the
  // build-id, as raw bytes like Perfetto's own profilers write it.
  uint64_t Mapping(const std::string& dso, const std::string& build_id_hex, ProtoWriter* interned) {
    auto [it, fresh] = mappings_.try_emplace(dso + '\0' + build_id_hex, mappings_.size() + 1);
    if (!fresh) return it->second;
    ProtoWriter m;
    m.Varint(1, it->second);
    std::string raw;
    if (!build_id_hex.empty() && FromHex(build_id_hex, &raw)) {
      m.Varint(2, InternString(&build_ids_, kInternBuildIds, raw, interned));
    }
    m.Varint(7, InternString(&paths_, kInternMappingPaths, EscapeForTerminal(dso), interned));
    interned->Message(kInternMappings, m);
    return it->second;
  }
  uint64_t Frame(const std::string& name, uint64_t mapping, uint64_t rel_pc,
                 ProtoWriter* interned) {
    auto key = fmt::format("{}\n{}\n{:x}", name, mapping, rel_pc);
    auto [it, fresh] = frames_.try_emplace(key, frames_.size() + 1);
    if (fresh) {
      ProtoWriter f;
      f.Varint(1, it->second);
      f.Varint(2, InternString(&function_names_, kInternFunctionNames, EscapeForTerminal(name),
                               interned));
      if (mapping) {
        f.Varint(3, mapping);
        f.Varint(4, rel_pc);
      }
      interned->Message(kInternFrames, f);
    }
    return it->second;
  }
  uint64_t Callstack(const analysis::ResolvedSample& rs, ProtoWriter* interned) {
    const auto& s = *rs.sample;
    std::vector<uint64_t> frames;  // innermost first, reversed below
    size_t frame = 0;              // the sample frame a symbol belongs to (inlined ones share it)
    for (const auto* sym : rs.stack) {
      std::string build_id;
      if (frame < s.frames.size() && !s.frames[frame].kernel && s.frames[frame].cookie &&
          rs.cookies) {
        if (const auto* c = rs.cookies->Get(s.frames[frame].cookie)) build_id = c->build_id;
      }
      const uint64_t map = sym->dso.empty() ? 0 : Mapping(sym->dso, build_id, interned);
      frames.push_back(Frame(FrameName(*sym), map, sym->offset, interned));
      if (!sym->inlined) ++frame;
    }
    // An incomplete user stack ends, at the root, in a marker frame (as in
    // every export); PerfSample.unwind_error says why.
    if (std::string marker = IncompleteStackMarker(s); !marker.empty()) {
      frames.push_back(Frame(marker, 0, 0, interned));
    }
    std::vector<uint64_t> bottom_first(frames.rbegin(), frames.rend());
    auto [it, fresh] = callstacks_.try_emplace(bottom_first, callstacks_.size() + 1);
    if (fresh) {
      ProtoWriter c;
      c.Varint(1, it->second);
      for (uint64_t f : bottom_first) c.Varint(2, f);  // unpacked: see the top
      interned->Message(kInternCallstacks, c);
    }
    return it->second;
  }
  static uint64_t UnwindError(const std::string& status) {
    if (status == "truncated") return kUnwindErrorMemoryInvalid;  // the stack copy ended
    if (status == "no_unwind_info") return kUnwindErrorUnwindInfo;
    if (status == "missing_file") return kUnwindErrorInvalidElf;
    return kUnwindErrorUnknown;
  }

  std::ostream* out_ = nullptr;
  analysis::RecordInfo info_;
  bool clock_event_ = true;
  uint64_t interval_ns_ = 1'000'000;
  bool snapshot_written_ = false;
  uint64_t snapshot_mono_ = 0;
  std::map<uint32_t, std::string> thread_names_;
  std::map<uint32_t, std::optional<std::string>> process_names_;  // the last name given, by pid
  std::set<uint32_t> cpus_;
  std::map<uint32_t, uint64_t> thread_last_, cpu_last_;
  std::map<std::string, uint64_t> function_names_, build_ids_, paths_, mappings_, frames_;
  std::map<std::vector<uint64_t>, uint64_t> callstacks_;
};

}  // namespace

std::unique_ptr<Exporter> MakePerfettoTrace() { return std::make_unique<Perfetto>(); }

}  // namespace flightrec::recorder::exporter
