// Unit tests of the exporters' pure parts, on hand-made samples.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <deque>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "recorder/export/export.h"
#include "recorder/export/proto.h"
#include "tests/support/proto_wire.h"

namespace flightrec::recorder::exporter {
namespace {

TEST(ExportTest, Escapes) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  // Control characters and invalid UTF-8 as the terminal shows them.
  EXPECT_EQ(XmlEscape(std::string("x\x01y\xff")), "x\\x01y\\xff");
  EXPECT_EQ(JsonEscape("a\"b\\c\n"), "a\\\"b\\\\\\\\c\\\\n");
  EXPECT_EQ(JsonEscape(std::string("\x02\xc3")), "\\\\x02\\\\xc3");
  EXPECT_EQ(FoldedName("operator<(a; b)"), "operator<(a__b)");
}

TEST(ExportTest, ProtoWriterUsesTheWireFormat) {
  ProtoWriter w;
  w.Varint(1, 150);  // the protobuf documentation's example: 08 96 01
  EXPECT_EQ(w.data(), std::string("\x08\x96\x01", 3));
  w.Clear();
  w.Bytes(2, "testing");
  EXPECT_EQ(w.data(), std::string("\x12\x07testing", 9));
  w.Clear();
  w.Packed(4, {3, 270});
  EXPECT_EQ(w.data(), std::string("\x22\x03\x03\x8e\x02", 5));
}

TEST(ExportTest, ProtoWriterWritesFixed64AndStreamedHeaders) {
  ProtoWriter w;
  w.Fixed64(3, 0x0102030405060708);
  EXPECT_EQ(w.data(), std::string("\x19\x08\x07\x06\x05\x04\x03\x02\x01", 9));
  w.Clear();
  w.Header(2, 300);  // the tag and length of 300 bytes that follow
  EXPECT_EQ(w.data(), std::string("\x12\xac\x02", 3));
}

TEST(ExportTest, UnknownFormatListsTheValidOnes) {
  auto e = MakeExporter("svg-someday");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("pprof, perfetto, chrome, folded, svg"), std::string::npos);
}

// Samples of one thread: two with stack main>a, then one with main>b.
struct Fixture {
  std::deque<attribution::Symbol> syms;
  std::vector<attribution::AttributedSample> samples;
  std::vector<std::vector<const attribution::Symbol*>> stacks;
  const attribution::CookieTable* cookies = nullptr;
  std::vector<const std::string*> process_comms;  // ResolvedSample::process_comm, by sample
  std::vector<const std::string*> process_exes;   // ResolvedSample::process_exe, by sample
  const attribution::Symbol* Sym(const std::string& name) {
    attribution::Symbol s;
    s.function = name;
    s.dso = "/bin/x";
    s.status = "ok";
    syms.push_back(s);
    return &syms.back();
  }
  Fixture() {
    auto* m = Sym("main");
    auto* a = Sym("a");
    auto* b = Sym("b<int>");
    for (int i = 0; i < 3; ++i) {
      attribution::AttributedSample s;
      s.time_ns = 1'000'000'000 + i * 1'000'000;
      s.pid = 7;
      s.tid = 8;
      s.period = 1'000'000;
      s.comm = "x";
      samples.push_back(s);
      stacks.push_back({i < 2 ? a : b, m});
    }
  }
  std::string Run(const std::string& format) {
    auto ex = MakeExporter(format);
    EXPECT_TRUE(ex.ok());
    std::ostringstream out;
    analysis::RecordInfo info;
    info.id = "r";
    info.window_start_ns = 1'000'000'000;
    info.config = {{"backend", {{"event", "cpu-clock"}, {"frequency_hz", 1000}}}};
    (*ex)->Begin(info, &out);
    for (size_t i = 0; i < samples.size(); ++i) {
      (*ex)->Add(analysis::ResolvedSample{&samples[i], stacks[i], 0, cookies,
                                          i < process_comms.size() ? process_comms[i] : nullptr,
                                          i < process_exes.size() ? process_exes[i] : nullptr});
    }
    EXPECT_TRUE((*ex)->Finish().ok());
    return out.str();
  }
};

TEST(ExportTest, FoldedCountsIdenticalStacks) {
  Fixture f;
  EXPECT_EQ(f.Run("folded"), "x;main;a 2\nx;main;b<int> 1\n");
}

TEST(ExportTest, IncompleteStacksEndInAMarkerAtTheRoot) {
  Fixture f;
  f.samples[0].unwind = {"truncated", "stack copy of 256 bytes ends at sp+0x100"};
  f.samples[2].unwind = {"missing_file", "[vdso]+0x9a0"};
  f.samples[1].unwind = {"ok", ""};
  EXPECT_EQ(f.Run("folded"),
            "x;[truncated:missing_file];main;b<int> 1\nx;[truncated];main;a 1\nx;main;a 1\n");
  EXPECT_EQ(IncompleteStackMarker(f.samples[1]), "");
  attribution::AttributedSample plain;  // not DWARF-unwound: no marker
  EXPECT_EQ(IncompleteStackMarker(plain), "");
  attribution::AttributedSample odd;
  odd.unwind.status = "no_unwind_info";
  EXPECT_EQ(IncompleteStackMarker(odd), "[truncated:no_unwind_info]");
  odd.unwind.status = "error";
  EXPECT_EQ(IncompleteStackMarker(odd), "[truncated:error]");

  // Chrome: the marker is the outermost slice of the thread's lane.
  auto j = nlohmann::json::parse(f.Run("chrome"));
  std::vector<std::string> begins;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "B" && e["pid"] == 7) begins.push_back(e["name"]);
  }
  EXPECT_EQ(begins, (std::vector<std::string>{"[truncated]", "main", "a", "main", "a",
                                              "[truncated:missing_file]", "main", "b<int>"}));
}

// A process whose named worker thread is sampled before its main thread:
// the process is named after the main thread, never after the worker.
TEST(ExportTest, TheProcessIsNamedAfterItsMainThreadNotItsFirstSampledThread) {
  Fixture f;
  f.samples[0].tid = 9;
  f.samples[0].comm = "worker-one";
  f.samples[2].tid = 7;  // the main thread, "x"
  std::map<int64_t, std::string> threads;
  std::vector<std::string> processes;
  const auto trace = nlohmann::json::parse(f.Run("chrome"));
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "M" || e["pid"] != 7) continue;
    if (e["name"] == "thread_name") threads[e["tid"].get<int64_t>()] = e["args"]["name"];
    if (e["name"] == "process_name") processes.push_back(e["args"]["name"]);
  }
  EXPECT_EQ(processes, std::vector<std::string>{"x"});
  EXPECT_EQ(threads, (std::map<int64_t, std::string>{{7, "x"}, {8, "x"}, {9, "worker-one"}}));
  // Perfetto: "worker-one" is a ThreadDescriptor.thread_name (field 5,
  // tag 0x2a), never a ProcessDescriptor.process_name (field 6, tag 0x32).
  const std::string pf = f.Run("perfetto");
  EXPECT_NE(pf.find(std::string("\x2a\x0aworker-one")), std::string::npos);
  EXPECT_EQ(pf.find(std::string("\x32\x0aworker-one")), std::string::npos);
  EXPECT_NE(pf.find(std::string("\x32\x01x")), std::string::npos);
}

// A process that exec'd while only a worker thread was sampled afterwards:
// the samples' own names are the threads' (the main thread's last sample was
// before the exec), the process is named after the sideband's name at each
// sample, so it ends named after the new program.
TEST(ExportTest, TheProcessIsNamedFromTheSidebandWhenTheReplayKnowsIt) {
  Fixture f;
  const std::string before = "sh", after = "app";
  f.samples[0].tid = 7;  // the main thread, before the exec
  f.samples[0].comm = before;
  f.samples[1].comm = f.samples[2].comm = "worker";
  f.process_comms = {&before, &after, &after};
  std::vector<std::string> processes;
  const auto trace = nlohmann::json::parse(f.Run("chrome"));
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["pid"] == 7 && e["name"] == "process_name") {
      processes.push_back(e["args"]["name"]);
    }
  }
  EXPECT_EQ(processes, (std::vector<std::string>{"sh", "app"}));
  // Perfetto: ProcessDescriptor.process_name (field 6, tag 0x32) "sh", then
  // "app"; "worker" only ever names a thread (field 5, tag 0x2a).
  const std::string pf = f.Run("perfetto");
  const size_t sh = pf.find(std::string("\x32\x02sh"));
  const size_t app = pf.find(std::string("\x32\x03") + "app");  // \x03a would be one escape
  ASSERT_NE(sh, std::string::npos);
  ASSERT_NE(app, std::string::npos);
  EXPECT_LT(sh, app);
  EXPECT_EQ(pf.find(std::string("\x32\x06worker")), std::string::npos);
  EXPECT_NE(pf.find(std::string("\x2a\x06worker")), std::string::npos);
}

TEST(ExportTest, ChromeSlicesNestAndStayOrdered) {
  Fixture f;
  auto j = nlohmann::json::parse(f.Run("chrome"));
  std::vector<std::string> seq;
  std::vector<double> times;
  double last = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" || e["pid"] != 7) continue;
    double ts = std::stod(e["ts"].dump());
    EXPECT_GE(ts, last);
    last = ts;
    times.push_back(ts);
    seq.push_back(e["ph"].get<std::string>() + e["name"].get<std::string>());
    // The dso is the category; no args, which speedscope would paste into
    // the frame's name.
    EXPECT_EQ(e.value("cat", ""), "/bin/x") << e.dump();
    EXPECT_FALSE(e.contains("args")) << e.dump();
  }
  // main stays open across all three samples; a closes when b begins. Every
  // E names the slice it ends.
  EXPECT_EQ(seq, (std::vector<std::string>{"Bmain", "Ba", "Ea", "Bb<int>", "Eb<int>", "Emain"}));
  // a's interval would end where b begins (2 ms); it ends 1 ns earlier so
  // that no E shares a timestamp with the B after it.
  EXPECT_EQ(times, (std::vector<double>{0, 0, 1999.999, 2000, 3000, 3000}));
  EXPECT_DOUBLE_EQ(last, 3000.0);  // the last sample's interval ends at 3 ms
}

// A stack that changes at one instant so that a closed frame's name opens
// again below it ([main, a, f] then [main, f]): speedscope, which sorts a
// lane's B and E events by ts and at a tie takes a B before an E of the same
// name, would open the new f inside the old one. Every E comes strictly
// before the next B of its lane, and replaying the lane by ts (B before E at
// equal ts, as speedscope does for equal names) nests properly.
TEST(ExportTest, ChromeLanesStayNestedWhenAClosedNameReopens) {
  Fixture f;
  auto* main = f.stacks[0][1];
  auto* a = f.stacks[0][0];
  auto* g = f.Sym("f");
  f.stacks = {{g, a, main}, {g, main}, {g, main}};
  auto j = nlohmann::json::parse(f.Run("chrome"));
  std::vector<nlohmann::json> lane;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "M" && e["pid"] == 7) lane.push_back(e);
  }
  ASSERT_FALSE(lane.empty());
  std::stable_sort(lane.begin(), lane.end(), [](const auto& x, const auto& y) {
    double tx = x["ts"], ty = y["ts"];
    if (tx != ty) return tx < ty;
    return x["ph"] == "B" && y["ph"] == "E";
  });
  std::vector<std::string> open;
  for (const auto& e : lane) {
    if (e["ph"] == "B") {
      open.push_back(e["name"]);
    } else {
      ASSERT_FALSE(open.empty()) << e.dump();
      EXPECT_EQ(open.back(), e["name"].get<std::string>()) << e.dump();
      open.pop_back();
    }
  }
  EXPECT_TRUE(open.empty());
}

// The gzip member's contents ("" if it is not gzip or is larger than 1 MiB).
std::string Gunzip(std::string gz) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return "";
  std::string raw;
  zs.next_in = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_in = static_cast<uInt>(gz.size());
  int rc;
  do {
    raw.resize(zs.total_out + (1 << 20));
    zs.next_out = reinterpret_cast<Bytef*>(raw.data() + zs.total_out);
    zs.avail_out = 1 << 20;
    rc = inflate(&zs, Z_NO_FLUSH);
  } while (rc == Z_OK);
  raw.resize(rc == Z_STREAM_END ? zs.total_out : 0);
  inflateEnd(&zs);
  return raw;
}

TEST(ExportTest, PprofIsGzippedProtobuf) {
  Fixture f;
  std::string gz = f.Run("pprof");
  ASSERT_GT(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  std::string raw = Gunzip(gz);
  ASSERT_FALSE(raw.empty());
  // The string table holds the names; three samples were written.
  EXPECT_NE(raw.find("b<int>"), std::string::npos);
  EXPECT_NE(raw.find("timestamp_ns"), std::string::npos);
  EXPECT_EQ(raw.find("[truncated"), std::string::npos) << "complete stacks have no marker";
}

TEST(ExportTest, PprofMarksIncompleteStacksWithAFrameAndLabels) {
  Fixture f;
  f.samples[0].unwind = {"truncated", "stack copy of 256 bytes ends at sp+0x100"};
  std::string gz = f.Run("pprof");
  std::string raw = Gunzip(gz);
  ASSERT_FALSE(raw.empty());
  EXPECT_NE(raw.find("[truncated]"), std::string::npos);
  EXPECT_NE(raw.find("unwind_where"), std::string::npos);
  EXPECT_NE(raw.find("stack copy of 256 bytes ends at sp+0x100"), std::string::npos);
}

// The fields of a message, none if it is malformed.
std::vector<flightrec::testing::WireField> Fields(const std::string& msg) {
  std::vector<flightrec::testing::WireField> out;
  if (!flightrec::testing::ParseWire(msg, &out)) return {};
  return out;
}

// The file names of a pprof export's mappings, in the order written (pprof
// takes the first as the profile's main binary: its "File:").
std::vector<std::string> PprofMappingFiles(const std::string& gz) {
  const auto top = Fields(Gunzip(gz));
  std::vector<std::string> strings, files;
  for (const auto& t : top) {
    if (t.number == 6) strings.push_back(t.bytes);
  }
  for (const auto& t : top) {
    if (t.number != 3) continue;
    for (const auto& x : Fields(t.bytes)) {
      if (x.number == 5) files.push_back(x.varint < strings.size() ? strings[x.varint] : "?");
    }
  }
  return files;
}

// The main binary is the executable of the process with the most samples
// (the only one in an export of one process), not the first file by name.
TEST(ExportTest, PprofMainBinaryIsTheExecutableWithTheMostSamples) {
  Fixture f;
  // Stacks in a library named before both executables, and in each.
  const std::string exe_a = "/usr/bin/zed", exe_b = "/opt/b/app";
  f.syms[0].dso = "/lib/libc.so.6";  // main
  f.syms[1].dso = exe_b;             // a
  f.syms[2].dso = exe_a;             // b<int>
  f.process_exes = {&exe_a, &exe_a, &exe_b};
  auto files = PprofMappingFiles(f.Run("pprof"));
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], exe_a);
  // An executable none of whose code was sampled is still the main binary.
  const std::string exe_c = "/usr/bin/python3";
  f.process_exes = {&exe_c, &exe_c, &exe_b};
  files = PprofMappingFiles(f.Run("pprof"));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0], exe_c);
  // Nothing known: the files as before, by name.
  f.process_exes.clear();
  files = PprofMappingFiles(f.Run("pprof"));
  EXPECT_EQ(files, (std::vector<std::string>{"/lib/libc.so.6", exe_b, exe_a}));
}

// Issue 13 item 2: pid/tid/cpu are numeric labels with a unit (so pprof
// keeps the value 0 and filters on numbers), the timestamp's unit is not a
// duration, and a mapping carries the build-id and its offset range.
TEST(ExportTest, PprofLabelsAreNumericWithUnitsAndMappingsHaveBuildIds) {
  Fixture f;
  f.samples[0].cpu = 0;
  f.samples[0].pid = 0;
  f.samples[0].tid = 0;
  attribution::CookieTable cookies;
  MmapEvent m;
  m.filename = "/bin/x";
  m.build_id = std::string("\xde\xad\xbe\xef", 4);
  m.ino = 1;
  const uint32_t cookie = cookies.Intern(m);
  for (auto& s : f.samples) {
    s.frames = {attribution::Frame{false, cookie, 0x1234, ""},
                attribution::Frame{false, cookie, 0x2345, ""}};
  }
  f.syms[0].offset = 0x2345;  // main, the caller
  f.syms[1].offset = 0x1234;  // a
  f.syms[2].offset = 0x1300;  // b<int>
  f.cookies = &cookies;
  std::string raw = Gunzip(f.Run("pprof"));
  ASSERT_FALSE(raw.empty());
  auto top = Fields(raw);
  ASSERT_FALSE(top.empty());
  std::vector<std::string> strings;
  for (const auto& t : top) {
    if (t.number == 6) strings.push_back(t.bytes);
  }
  auto str = [&](uint64_t i) { return i < strings.size() ? strings[i] : std::string("?"); };
  int samples = 0, zero_cpu = 0, zero_pid = 0, mappings = 0;
  for (const auto& t : top) {
    if (t.number == 2) {
      ++samples;
      std::map<std::string, std::pair<uint64_t, std::string>> labels;  // key: num, unit
      for (const auto& l : Fields(t.bytes)) {
        if (l.number != 3) continue;
        std::string key;
        uint64_t num = 0, unit = 0, sx = 0;
        for (const auto& lf : Fields(l.bytes)) {
          if (lf.number == 1) key = str(lf.varint);
          if (lf.number == 2) sx = lf.varint;
          if (lf.number == 3) num = lf.varint;
          if (lf.number == 4) unit = lf.varint;
        }
        if (key == "comm") {
          EXPECT_EQ(str(sx), "x");
          continue;
        }
        EXPECT_EQ(sx, 0u) << key << " must be numeric";
        EXPECT_NE(unit, 0u) << key << " needs a unit, or pprof drops the value 0";
        labels[key] = {num, str(unit)};
      }
      for (const char* k : {"pid", "tid", "cpu", "timestamp_ns"}) {
        EXPECT_EQ(labels.count(k), 1u) << k;
      }
      EXPECT_NE(labels["timestamp_ns"].second, "nanoseconds") << "pprof would show a duration";
      zero_cpu += labels["cpu"].first == 0;
      zero_pid += labels["pid"].first == 0;
    }
    if (t.number == 3) {
      ++mappings;
      std::map<uint32_t, uint64_t> mf;
      for (const auto& x : Fields(t.bytes)) mf[x.number] = x.varint;
      EXPECT_EQ(str(mf[5]), "/bin/x");
      EXPECT_EQ(str(mf[6]), "deadbeef");
      EXPECT_GT(mf[2], 0u);
      EXPECT_LE(mf[2], 0x1234u);
      EXPECT_GT(mf[3], 0x2345u);
      EXPECT_EQ(mf[4], mf[2]) << "addresses are file offsets";
      EXPECT_EQ(mf[7], 1u);
      EXPECT_EQ(mf[8], 1u);
      EXPECT_EQ(mf[9], 1u);
    }
  }
  EXPECT_EQ(samples, 3);
  EXPECT_EQ(zero_cpu, 3);  // the fixture's cpu is 0 throughout
  EXPECT_EQ(zero_pid, 1);
  EXPECT_EQ(mappings, 1);
}

// Issue 17: a pprof export of 10 M samples held them all as protobuf until
// Finish (1.5 GB of RSS) and then gzipped that in one deflate call, whose
// 32-bit avail_in would have cut a profile over 4 GiB short. Samples are now
// compressed as they come: output appears before Finish, and every sample
// and the tables after them are still in the one gzip stream.
TEST(ExportTest, PprofCompressesSamplesAsTheyCome) {
  Fixture f;
  auto ex = MakeExporter("pprof");
  ASSERT_TRUE(ex.ok());
  std::ostringstream out;
  analysis::RecordInfo info;
  info.id = "r";
  info.config = {{"backend", {{"event", "cpu-clock"}, {"frequency_hz", 1000}}}};
  (*ex)->Begin(info, &out);
  // ~60 bytes of protobuf a sample (labels with distinct timestamps): 3 MiB.
  constexpr int kSamples = 50'000;
  for (int i = 0; i < kSamples; ++i) {
    f.samples[i % 3].time_ns = 1'000'000'000 + static_cast<int64_t>(i) * 10'000;
    (*ex)->Add(analysis::ResolvedSample{&f.samples[i % 3], f.stacks[i % 3], 0, nullptr});
  }
  EXPECT_GT(out.str().size(), 0u) << "samples are held until Finish";
  ASSERT_TRUE((*ex)->Finish().ok());
  std::string raw = Gunzip(out.str());
  ASSERT_GT(raw.size(), size_t{2} << 20);
  auto top = Fields(raw);
  ASSERT_FALSE(top.empty());
  int samples = 0, sample_types = 0, locations = 0, strings = 0;
  for (const auto& t : top) {
    samples += t.number == 2;
    sample_types += t.number == 1;
    locations += t.number == 4;
    strings += t.number == 6;
  }
  EXPECT_EQ(samples, kSamples);
  EXPECT_EQ(sample_types, 2);
  EXPECT_EQ(locations, 3);  // main, a, b<int>
  EXPECT_GT(strings, 5);
}

// The fields numbered n of a message, in order.
std::vector<flightrec::testing::WireField> Numbered(const std::string& msg, uint32_t n) {
  std::vector<flightrec::testing::WireField> out;
  for (auto& f : Fields(msg)) {
    if (f.number == n) out.push_back(std::move(f));
  }
  return out;
}

// OTLP's identity of a sample is (stack, attributes): samples that share
// both are one Sample with an observation (value, timestamp) each. Numeric
// attributes of value 0 (the idle task's pid, CPU 0) are still written (a
// oneof member has presence), and a period past int64 is clamped, not
// negative.
TEST(ExportTest, OtlpSamplesOfOneIdentityAreOneSampleWithAnObservationEach) {
  Fixture f;
  f.samples[0].period = UINT64_MAX;
  const std::string raw = f.Run("otlp");
  // ProfilesData.resource_profiles[0].scope_profiles[0].profiles[0].samples
  auto rp = Numbered(raw, 1);
  ASSERT_EQ(rp.size(), 1u);
  auto sp = Numbered(rp[0].bytes, 2);
  ASSERT_EQ(sp.size(), 1u);
  auto prof = Numbered(sp[0].bytes, 2);
  ASSERT_EQ(prof.size(), 1u);
  auto samples = Numbered(prof[0].bytes, 2);
  ASSERT_EQ(samples.size(), 2u);  // main>a twice, main>b once
  std::vector<size_t> observations;
  for (const auto& s : samples) {
    auto ts = Numbered(s.bytes, 5);
    ASSERT_EQ(ts.size(), 1u);
    ASSERT_EQ(ts[0].bytes.size() % 8, 0u);
    observations.push_back(ts[0].bytes.size() / 8);
  }
  EXPECT_EQ(observations, (std::vector<size_t>{2, 1}));
  // The first observation's value: INT64_MAX as a varint.
  auto values = Numbered(samples[0].bytes, 4);
  ASSERT_EQ(values.size(), 1u);
  std::string v;
  AppendUleb128(&v, static_cast<uint64_t>(INT64_MAX));
  EXPECT_EQ(values[0].bytes.substr(0, v.size()), v);
  // Each Sample names its CPU (0) and pid in the attribute table.
  auto dict = Numbered(raw, 2);
  ASSERT_EQ(dict.size(), 1u);
  std::vector<std::string> strings;
  for (const auto& s : Numbered(dict[0].bytes, 5)) strings.push_back(s.bytes);
  std::map<std::string, uint64_t> ints;
  for (const auto& a : Numbered(dict[0].bytes, 6)) {
    auto key = Numbered(a.bytes, 1);
    auto value = Numbered(a.bytes, 2);
    if (key.empty() || value.empty()) continue;  // entry 0, the zero value
    auto num = Numbered(value[0].bytes, 3);
    if (num.size() == 1) ints[strings.at(key[0].varint)] = num[0].varint;
  }
  EXPECT_EQ(ints, (std::map<std::string, uint64_t>{
                      {"cpu.logical_number", 0}, {"process.pid", 7}, {"thread.id", 8}}));
}

}  // namespace
}  // namespace flightrec::recorder::exporter
