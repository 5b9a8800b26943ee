// The Perfetto export of a real record, read by a real consumer: `protoc
// --decode_raw` (issue 13 item 1). Checked against the field numbers of
// Perfetto's published protos (the numbers and the commits they were read at
// are listed in recorder/export/perfetto.cc):
//   - every packet is Trace.packet (1) and holds only the TracePacket fields
//     the exporter writes, one payload each;
//   - the first packet is a ClockSnapshot that clears the sequence's
//     incremental state; every packet is on one sequence;
//   - every sample of the record is one PerfSample, exactly once: the count
//     equals `recorder report --json`'s, and (time, cpu, pid, tid, stack)
//     equal `recorder script --json`'s sample by sample;
//   - every interned id a sample uses resolves, in that packet or an earlier
//     one (callstack -> frames -> function names, mappings -> build-ids and
//     paths), and the spinner's mapping carries its file's build-id (the
//     interned strings' bytes come from a second decode, `protoc --decode`
//     with a three-message schema: --decode_raw may print bytes as a message);
//   - every timestamp is CLOCK_MONOTONIC, says so, and read through the
//     snapshot falls inside the run on the wall clock; BOOTTIME is offset
//     from MONOTONIC as on this machine;
//   - slices are per sample, never merged.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/protoc.h"
#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

int64_t Now(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class PerfettoExportTest : public RecordedSuite<PerfettoExportTest> {
 protected:
  // Record() in steps, to read the wall clock around the spinner's run.
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    wall_before_ = Now(CLOCK_REALTIME);
    pid_t spin = 0;
    const bool ok = RunToSuccess({BuildPath("tests/programs/fr_spin"), "2"}, &spin);
    wall_after_ = Now(CLOCK_REALTIME);
    ASSERT_TRUE(ok);
    pid_ = spin;
    DumpLast5s(*daemon_, spin, {}, &id_);
  }

  static inline int64_t wall_before_ = 0, wall_after_ = 0;
};

// A sample as both sides describe it: time, cpu, pid, tid and the stack's
// names, outermost first.
using SampleKey = std::tuple<uint64_t, uint32_t, uint32_t, uint32_t, std::vector<std::string>>;

TEST_F(PerfettoExportTest, ProtocDecodesSamplesInternedStacksAndOneClock) {
  const std::string file = dir_->path() + "/trace.pftrace";
  auto r = daemon_->Cli({"export", id_, "--format", "perfetto", "-o", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto raw = ProtocDecodeRaw(file);
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  if (const char* keep = std::getenv("FLIGHTREC_KEEP_DECODED")) std::ofstream(keep) << raw.out;
  Node trace = ParseText(raw.out);
  ASSERT_FALSE(trace.fields.empty());

  // --decode_raw prints a bytes field as a nested message whenever its bytes
  // happen to parse as one (a raw build-id may), so the interned strings are
  // read by a second decode with a schema naming just those fields (numbers
  // as in recorder/export/perfetto.cc); the rest of it stays by number.
  auto typed = ProtocDecode(dir_->path(), "interned_strings.proto",
                            "syntax = \"proto2\";\n"
                            "message InternedString { optional uint64 iid = 1; "
                            "optional bytes str = 2; }\n"
                            "message InternedData { repeated InternedString function_names = 5; "
                            "repeated InternedString build_ids = 16; "
                            "repeated InternedString mapping_paths = 17; }\n"
                            "message TracePacket { optional InternedData interned_data = 12; }\n"
                            "message Trace { repeated TracePacket packet = 1; }\n",
                            file);
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  std::map<std::string, std::map<uint64_t, std::string>> strings;  // by table
  const Node typed_trace = ParseText(typed.out);
  for (const Node* packet : typed_trace.Named("packet")) {
    for (const Node* id : packet->Named("interned_data")) {
      for (const auto& e : id->fields) {
        if (e.number) continue;  // frames, callstacks, mappings: not in the schema
        auto iid = e.Named("iid");
        auto str = e.Named("str");
        ASSERT_TRUE(iid.size() == 1 && str.size() == 1) << "InternedString without iid/str";
        auto [it, fresh] = strings[e.key].try_emplace(iid[0]->U(), str[0]->text);
        EXPECT_TRUE(fresh) << e.key << " iid " << iid[0]->U() << " emitted twice";
      }
    }
  }

  // Interning tables as they build up along the sequence (an id must be
  // defined in the packet that uses it or before).
  std::map<uint64_t, std::string> names, build_ids, paths;
  std::map<uint64_t, const Node*> mappings, frames, callstacks;
  auto intern = [&](std::map<uint64_t, std::string>* table, const char* name, const Node& e) {
    const Node* iid = e.One(1);
    ASSERT_TRUE(iid && iid->U() > 0 && e.One(2)) << "InternedString without iid/str";
    ASSERT_TRUE(strings[name].count(iid->U()));
    table->emplace(iid->U(), strings[name][iid->U()]);
  };
  auto intern_msg = [](std::map<uint64_t, const Node*>* table, const Node& e) {
    const Node* iid = e.One(1);
    ASSERT_TRUE(iid && iid->U() > 0);
    EXPECT_TRUE(table->emplace(iid->U(), &e).second) << "iid " << iid->U() << " emitted twice";
  };

  const std::set<uint32_t> packet_fields = {8, 58, 10, 12, 13, 6, 11, 60, 66};
  const std::set<uint32_t> payloads = {6, 11, 60, 66};
  int64_t snap_mono = -1, snap_real = -1, snap_boot = -1;
  std::multiset<SampleKey> exported;
  std::set<uint64_t> tracks;
  std::map<uint64_t, uint64_t> track_last;
  std::map<uint64_t, int> depth;
  std::map<uint64_t, uint32_t> thread_track_tid;
  uint64_t spin_a_slices = 0, max_sample_ts = 0;
  std::vector<uint64_t> slice_ts;
  std::string spin_build_id, spin_path;

  for (size_t i = 0; i < trace.fields.size(); ++i) {
    const Node& packet = trace.fields[i];
    ASSERT_EQ(packet.number, 1u);  // Trace.packet
    ASSERT_TRUE(packet.message);
    int npayload = 0;
    for (const auto& f : packet.fields) {
      EXPECT_TRUE(packet_fields.count(f.number)) << "unexpected TracePacket field " << f.number;
      npayload += payloads.count(f.number) ? 1 : 0;
    }
    ASSERT_EQ(npayload, 1) << "packet " << i;
    const Node* seq = packet.One(10);
    ASSERT_TRUE(seq && seq->U() == 1) << "packet " << i << " not on sequence 1";
    const Node* flags = packet.One(13);
    if (i == 0) {
      // The snapshot first, clearing incremental state before any interning.
      ASSERT_TRUE(flags && flags->U() == 1) << "first packet lacks SEQ_INCREMENTAL_STATE_CLEARED";
      const Node* cs = packet.One(6);
      ASSERT_TRUE(cs) << "first packet is not a ClockSnapshot";
      for (const Node* c : cs->All(1)) {
        uint64_t id = c->One(1)->U();
        int64_t ts = static_cast<int64_t>(c->One(2)->U());
        if (id == 3) snap_mono = ts;
        if (id == 1) snap_real = ts;
        if (id == 6) snap_boot = ts;
      }
      ASSERT_TRUE(cs->One(2) && cs->One(2)->U() == 3) << "primary clock is not MONOTONIC";
      ASSERT_GT(snap_mono, 0);
      ASSERT_GT(snap_real, 0);
      ASSERT_GT(snap_boot, 0);
      continue;
    }
    EXPECT_FALSE(packet.One(6)) << "a second ClockSnapshot";
    EXPECT_TRUE(!flags || flags->U() != 1) << "incremental state cleared again in packet " << i;
    // One clock domain: every timestamp is MONOTONIC and says so.
    const Node* ts_node = packet.One(8);
    uint64_t ts = 0;
    if (ts_node) {
      ts = ts_node->U();
      const Node* clock = packet.One(58);
      ASSERT_TRUE(clock && clock->U() == 3) << "packet " << i << " timestamp not MONOTONIC";
      EXPECT_GE(static_cast<int64_t>(ts), snap_mono) << "before the snapshot";
    }
    if (const Node* id = packet.One(12)) {
      for (const Node* e : id->All(5)) intern(&names, "function_names", *e);
      for (const Node* e : id->All(16)) intern(&build_ids, "build_ids", *e);
      for (const Node* e : id->All(17)) intern(&paths, "mapping_paths", *e);
      for (const Node* e : id->All(19)) intern_msg(&mappings, *e);
      for (const Node* e : id->All(6)) intern_msg(&frames, *e);
      for (const Node* e : id->All(7)) intern_msg(&callstacks, *e);
      EXPECT_TRUE(flags && flags->U() == 2) << "interned data without SEQ_NEEDS_INCREMENTAL_STATE";
    }
    if (const Node* s = packet.One(66)) {  // PerfSample
      ASSERT_TRUE(ts_node) << "sample without a timestamp";
      ASSERT_TRUE(flags && flags->U() == 2) << "sample without SEQ_NEEDS_INCREMENTAL_STATE";
      // On the wall clock, through the snapshot, inside the run (give or
      // take the 5 ms NTP may slew the wall clock between run and dump).
      const int64_t wall = static_cast<int64_t>(ts) - snap_mono + snap_real;
      EXPECT_GE(wall, wall_before_ - 5'000'000);
      EXPECT_LE(wall, wall_after_ + 5'000'000);
      max_sample_ts = std::max(max_sample_ts, ts);
      const Node *cpu = s->One(1), *pid = s->One(2), *tid = s->One(3), *cs = s->One(4);
      ASSERT_TRUE(cpu && pid && tid && cs) << "PerfSample lacks cpu/pid/tid/callstack_iid";
      ASSERT_TRUE(callstacks.count(cs->U())) << "callstack_iid " << cs->U() << " unresolved";
      std::vector<std::string> stack;
      for (const Node* fid : callstacks[cs->U()]->All(2)) {
        ASSERT_TRUE(frames.count(fid->U())) << "frame iid " << fid->U() << " unresolved";
        const Node& fr = *frames[fid->U()];
        ASSERT_TRUE(fr.One(2) && names.count(fr.One(2)->U())) << "function name unresolved";
        const std::string& name = names[fr.One(2)->U()];
        stack.push_back(name);
        if (const Node* m = fr.One(3)) {
          ASSERT_TRUE(mappings.count(m->U())) << "mapping iid " << m->U() << " unresolved";
          ASSERT_TRUE(fr.One(4)) << "frame with a mapping but no rel_pc";
          const Node& map = *mappings[m->U()];
          auto path_ids = map.All(7);
          ASSERT_EQ(path_ids.size(), 1u);
          ASSERT_TRUE(paths.count(path_ids[0]->U())) << "mapping path unresolved";
          if (const Node* b = map.One(2)) {
            ASSERT_TRUE(build_ids.count(b->U())) << "build-id unresolved";
          }
          if (name == "spin_a") {
            spin_path = paths[path_ids[0]->U()];
            spin_build_id = map.One(2) ? build_ids[map.One(2)->U()] : "";
          }
        }
      }
      exported.emplace(ts, static_cast<uint32_t>(cpu->U()), static_cast<uint32_t>(pid->U()),
                       static_cast<uint32_t>(tid->U()), stack);
    }
    if (const Node* td = packet.One(60)) {  // TrackDescriptor
      const Node* uuid = td->One(1);
      ASSERT_TRUE(uuid);
      tracks.insert(uuid->U());
      if (const Node* thread = td->One(4)) {
        ASSERT_TRUE(thread->One(2) && thread->One(5)) << "thread track without tid/name";
        thread_track_tid[uuid->U()] = static_cast<uint32_t>(thread->One(2)->U());
      }
    }
    if (const Node* te = packet.One(11)) {  // TrackEvent
      ASSERT_TRUE(ts_node);
      const uint64_t type = te->One(9)->U(), track = te->One(11)->U();
      ASSERT_TRUE(tracks.count(track)) << "event on a track described later or never";
      ASSERT_TRUE(type == 1 || type == 2);
      EXPECT_GE(ts, track_last[track]) << "track out of order";
      track_last[track] = ts;
      depth[track] += type == 1 ? 1 : -1;
      ASSERT_GE(depth[track], 0);
      slice_ts.push_back(ts);
      if (type == 1 && te->One(23) && te->One(23)->text == "spin_a" &&
          thread_track_tid.count(track)) {
        ++spin_a_slices;
      }
    }
  }
  for (const auto& [t, d] : depth) EXPECT_EQ(d, 0) << "unclosed slices on track " << t;
  for (uint64_t t : slice_ts) EXPECT_LE(t, max_sample_ts) << "a slice after the last sample";

  // BOOTTIME is MONOTONIC plus the time suspended, as on this machine now.
  const int64_t boot_off = Now(CLOCK_BOOTTIME) - Now(CLOCK_MONOTONIC);
  EXPECT_NEAR(static_cast<double>(snap_boot - snap_mono), static_cast<double>(boot_off), 5e6);

  // Every sample exactly once: the report's count and script's samples.
  auto rep = daemon_->Cli({"report", id_, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const uint64_t report_samples = nlohmann::json::parse(rep.out)["samples"].get<uint64_t>();
  EXPECT_EQ(exported.size(), report_samples);
  ASSERT_GT(report_samples, 50u);
  auto script = daemon_->Cli({"script", id_, "--json"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  std::multiset<SampleKey> scripted;
  uint64_t with_spin_a = 0;
  {
    std::istringstream in(script.out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      std::vector<std::string> stack;
      if (j.contains("unwind") && j["unwind"]["status"] != "ok") {
        std::string st = j["unwind"]["status"];
        stack.push_back(st == "truncated" ? "[truncated]" : "[truncated:" + st + "]");
      }
      const auto& fr = j["frames"];
      bool spin = false;
      for (auto it = fr.rbegin(); it != fr.rend(); ++it) {
        std::string fn = (*it)["function"];
        if (fn.empty()) {  // as Symbol::Display names it
          std::ostringstream o;
          o << (*it)["dso"].get<std::string>() << "+0x" << std::hex
            << (*it)["offset"].get<uint64_t>();
          fn = o.str();
        }
        if (it->value("inlined", false)) fn += " [inlined]";
        spin |= fn == "spin_a";
        stack.push_back(fn);
      }
      with_spin_a += spin;
      scripted.emplace(j["time_ns"].get<uint64_t>(), j["cpu"].get<uint32_t>(),
                       j["pid"].get<uint32_t>(), j["tid"].get<uint32_t>(), stack);
    }
  }
  EXPECT_EQ(scripted.size(), report_samples);
  std::vector<SampleKey> only_exported, only_scripted;
  std::set_difference(exported.begin(), exported.end(), scripted.begin(), scripted.end(),
                      std::back_inserter(only_exported));
  std::set_difference(scripted.begin(), scripted.end(), exported.begin(), exported.end(),
                      std::back_inserter(only_scripted));
  EXPECT_TRUE(only_exported.empty() && only_scripted.empty())
      << only_exported.size() << " samples only in the export, " << only_scripted.size()
      << " only in script; first: t=" << (only_exported.empty() ? 0 : std::get<0>(only_exported[0]))
      << " / t=" << (only_scripted.empty() ? 0 : std::get<0>(only_scripted[0]));

  // The spinner's mapping names its file and carries its build-id (raw
  // bytes, as Perfetto's profilers write it) as readelf reads it.
  EXPECT_NE(spin_path.find("fr_spin"), std::string::npos) << spin_path;
  auto note = RunCommand({"/usr/bin/readelf", "-n", BuildPath("tests/programs/fr_spin")});
  size_t at = note.out.find("Build ID: ");
  ASSERT_NE(at, std::string::npos) << note.out;
  std::string hex = note.out.substr(at + 10, note.out.find('\n', at) - at - 10);
  std::string got;
  for (unsigned char c : spin_build_id) {
    char b[3];
    std::snprintf(b, sizeof(b), "%02x", c);
    got += b;
  }
  EXPECT_EQ(got, hex);

  std::printf(
      "perfetto export: %zu packets, %zu PerfSamples (report: %llu), %zu callstacks, "
      "%zu frames, %zu functions, %zu mappings (%zu with build-id), %zu slice events\n",
      trace.fields.size(), exported.size(), static_cast<unsigned long long>(report_samples),
      callstacks.size(), frames.size(), names.size(), mappings.size(), build_ids.size(),
      slice_ts.size());

  // Slices are never merged: one spin_a slice per sample that had it.
  EXPECT_EQ(spin_a_slices, with_spin_a);
  EXPECT_GT(with_spin_a, 10u);
}

}  // namespace
}  // namespace flightrec::testing
