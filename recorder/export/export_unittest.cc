// Unit tests of the exporters' pure parts, on hand-made samples.
#include <gtest/gtest.h>
#include <zlib.h>

#include <deque>
#include <sstream>

#include <nlohmann/json.hpp>

#include "recorder/export/export.h"
#include "recorder/export/proto.h"

namespace flightrec::recorder::exporter {
namespace {

TEST(ExportTest, Escapes) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(XmlEscape(std::string("x\x01y")), "x?y");
  EXPECT_EQ(JsonEscape("a\"b\\c\n"), "a\\\"b\\\\c\\n");
  EXPECT_EQ(JsonEscape(std::string("\x02")), "\\u0002");
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
      (*ex)->Add(analysis::ResolvedSample{&samples[i], stacks[i], 0});
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

TEST(ExportTest, ChromeSlicesNestAndStayOrdered) {
  Fixture f;
  auto j = nlohmann::json::parse(f.Run("chrome"));
  std::vector<std::string> seq;
  double last = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" || e["pid"] != 7) continue;
    double ts = std::stod(e["ts"].dump());
    EXPECT_GE(ts, last);
    last = ts;
    seq.push_back(e["ph"].get<std::string>() +
                  (e.contains("name") ? e["name"].get<std::string>() : ""));
  }
  // main stays open across all three samples; a closes when b begins.
  EXPECT_EQ(seq, (std::vector<std::string>{"Bmain", "Ba", "E", "Bb<int>", "E", "E"}));
  EXPECT_DOUBLE_EQ(last, 3000.0);  // the last sample's interval ends at 3 ms
}

// The gzip member's contents ("" if it is not gzip or is larger than 1 MiB).
std::string Gunzip(std::string gz) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return "";
  std::string raw(1 << 20, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_out = static_cast<uInt>(raw.size());
  int rc = inflate(&zs, Z_FINISH);
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

}  // namespace
}  // namespace flightrec::recorder::exporter
