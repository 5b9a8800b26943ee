// Exports of a real record read back by real consumers (issue 4, acceptance
// 4): `go tool pprof -top` on the pprof export against `recorder report`;
// the Chrome JSON and the Perfetto protobuf parsed back and checked for
// required fields and per-lane ordering; the SVG parsed as XML.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/proto_wire.h"
#include "tests/support/recording.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;

class ExportTest : public RecordedSuite<ExportTest> {
 protected:
  static void SetUpTestSuite() {
    // Pinned to CPU 0 (taskset execs in place, so the pid is the spinner's):
    // the CPU 0 samples the pprof label test looks for then always exist.
    Record({"/usr/bin/taskset", "-c", "0", BuildPath("tests/programs/fr_spin"), "2"});
  }
  static RunResult Export(const std::string& format, const std::string& file) {
    return daemon_->Cli({"export", id_, "--format", format, "-o", Out(file)});
  }
};

TEST_F(ExportTest, GoToolPprofShowsTheSameTopFunctionsAsReport) {
  auto r = Export("pprof", "profile.pb.gz");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rep = daemon_->Cli({"report", id_, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rows = nlohmann::json::parse(rep.out)["rows"];
  ASSERT_GE(rows.size(), 2u);
  // go needs a writable HOME/GOCACHE; give it the test's directory.
  auto top =
      RunCommand({"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=10", Out("profile.pb.gz")},
                 {"HOME=" + dir_->path(), "GOCACHE=" + dir_->path() + "/gocache",
                  "PPROF_TMPDIR=" + dir_->path()});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  // Rows after the header: "flat flat% sum% cum cum% name".
  std::vector<std::pair<std::string, double>> pprof_rows;
  std::istringstream in(top.out);
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.find("flat%") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table) continue;
    std::istringstream f(line);
    std::string flat, flat_pct, sum, cum, cum_pct, name;
    f >> flat >> flat_pct >> sum >> cum >> cum_pct;
    std::getline(f, name);
    name = name.substr(name.find_first_not_of(' '));
    pprof_rows.emplace_back(name, std::stod(flat_pct));
  }
  ASSERT_GE(pprof_rows.size(), 2u) << top.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(pprof_rows[i].first, rows[i]["key"].get<std::string>()) << top.out << rep.out;
    // The same samples, weighted by period: shares agree to a point.
    EXPECT_NEAR(pprof_rows[i].second, rows[i]["self_pct"].get<double>(), 1.0) << top.out;
  }
  EXPECT_EQ(pprof_rows[0].first, "spin_a");
  // Every sample keeps its time, thread, CPU and cgroup as labels pprof can filter on.
  auto tags = RunCommand({"/usr/bin/go", "tool", "pprof", "-tags", Out("profile.pb.gz")},
                         {"HOME=" + dir_->path(), "GOCACHE=" + dir_->path() + "/gocache",
                          "PPROF_TMPDIR=" + dir_->path()});
  ASSERT_EQ(tags.exit_code, 0) << tags.err;
  // Each tag covers every sample (a label pprof drops, such as a numeric 0,
  // would make its total smaller than the others').
  std::set<std::string> totals;
  // The process's cgroup too (recorderd reads it at its exec).
  for (const char* key : {"timestamp_ns", "tid", "pid", "cpu", "comm", "cgroup"}) {
    size_t at = tags.out.find(std::string(" ") + key + ": Total ");
    ASSERT_NE(at, std::string::npos) << key << " missing from\n" << tags.out;
    size_t from = at + std::strlen(key) + 9;
    totals.insert(tags.out.substr(from, tags.out.find('\n', from) - from));
  }
  EXPECT_EQ(totals.size(), 1u) << tags.out;
  EXPECT_NE(tags.out.find("fr_spin"), std::string::npos) << tags.out;
}

// Issue 13 item 2: the identifiers are numeric labels pprof filters on by
// value (CPU 0 and pid 0 kept), the timestamp is not shown as a duration,
// and every mapping names its file's build-id and offset range.
TEST_F(ExportTest, GoToolPprofFiltersNumericLabelsAndShowsMappings) {
  auto r = Export("pprof", "labels.pb.gz");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> env = {"HOME=" + dir_->path(),
                                        "GOCACHE=" + dir_->path() + "/gocache",
                                        "PPROF_TMPDIR=" + dir_->path()};
  auto pprof = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/go", "tool", "pprof"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(Out("labels.pb.gz"));
    return RunCommand(argv, env);
  };
  // The sample count of a -raw listing: the first value of each sample row.
  auto samples = [](const std::string& raw) {
    std::istringstream in(raw);
    std::string line;
    bool in_samples = false;
    uint64_t n = 0;
    while (std::getline(in, line)) {
      if (line.rfind("Samples:", 0) == 0) {
        in_samples = true;
        continue;
      }
      if (line.rfind("Locations", 0) == 0 || line.rfind("Mappings", 0) == 0) in_samples = false;
      if (!in_samples) continue;
      std::istringstream f(line);
      std::string first, second;
      if (!(f >> first >> second) || second.back() != ':') continue;  // not a sample row
      if (first.find_first_not_of("0123456789") != std::string::npos) continue;
      n += std::stoull(first);
    }
    return n;
  };
  auto all = pprof({"-raw"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const uint64_t total = samples(all.out);
  ASSERT_GT(total, 0u) << all.out;

  // -tagfocus=pid=<the spinner> keeps exactly its samples: the count
  // `report --pid` gives, and at least one sample.  (Not the count of a regex
  // on its comm: a sample taken between fork and exec has the spinner's pid
  // and the test binary's comm.)
  auto by_pid = pprof({"-raw", "-tagfocus=pid=" + std::to_string(pid_)});
  ASSERT_EQ(by_pid.exit_code, 0) << by_pid.err;
  // pprof says it took the value as a number, not a regexp.
  EXPECT_NE(by_pid.err.find("as range"), std::string::npos) << by_pid.err;
  const uint64_t pid_samples = samples(by_pid.out);
  EXPECT_GT(pid_samples, 0u) << by_pid.out << by_pid.err;
  auto rep = daemon_->Cli({"report", id_, "--json", "--pid", std::to_string(pid_)});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(pid_samples, nlohmann::json::parse(rep.out)["samples"].get<uint64_t>()) << rep.out;
  // A pid nobody has selects nothing (pprof then refuses to show anything).
  auto none = pprof({"-raw", "-tagfocus=pid=4194305"});
  EXPECT_EQ(samples(none.out), 0u) << none.out;
  // tid= works the same way: the spinner's threads all belong to it.
  auto by_tid = pprof({"-raw", "-tagfocus=tid=" + std::to_string(pid_)});
  ASSERT_EQ(by_tid.exit_code, 0) << by_tid.err;
  EXPECT_GT(samples(by_tid.out), 0u) << by_tid.out;
  EXPECT_LE(samples(by_tid.out), pid_samples);

  // CPU 0 does not vanish: per-CPU counts by numeric filter add up to the
  // total, and the spinner, pinned to CPU 0, has samples there.
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  uint64_t sum = 0, cpu0 = 0;
  for (unsigned c = 0; c < ncpu; ++c) {
    auto by_cpu = pprof({"-raw", "-tagfocus=cpu=" + std::to_string(c)});
    const uint64_t n = samples(by_cpu.out);
    if (c == 0) cpu0 = n;
    sum += n;
  }
  EXPECT_EQ(sum, total) << all.out;
  EXPECT_GT(cpu0, 0u) << "no CPU 0 samples in\n" << all.out;

  // -tags: the timestamp is a number, not hours of duration; pid/cpu are
  // numeric labels covering every sample (the CPU 0 ones too).
  auto tags = pprof({"-tags"});
  ASSERT_EQ(tags.exit_code, 0) << tags.err;
  size_t ts = tags.out.find(" timestamp_ns:");
  ASSERT_NE(ts, std::string::npos) << tags.out;
  std::string ts_block = tags.out.substr(ts, tags.out.find("\n\n", ts) - ts);
  EXPECT_EQ(ts_block.find("hrs"), std::string::npos) << ts_block;
  EXPECT_EQ(ts_block.find("hours"), std::string::npos) << ts_block;

  // -raw: the spinner's mapping carries its build-id (as readelf reads it)
  // and a non-empty, non-zero address range.
  auto note = RunCommand({"/usr/bin/readelf", "-n", BuildPath("tests/programs/fr_spin")}, {});
  size_t at = note.out.find("Build ID: ");
  ASSERT_NE(at, std::string::npos) << note.out;
  std::string build_id = note.out.substr(at + 10, note.out.find('\n', at) - at - 10);
  std::string mapping_line;
  {
    std::istringstream in(all.out);
    std::string line;
    bool maps = false;
    while (std::getline(in, line)) {
      if (line.rfind("Mappings", 0) == 0) maps = true;
      if (maps && line.find("fr_spin") != std::string::npos) mapping_line = line;
    }
  }
  ASSERT_FALSE(mapping_line.empty()) << all.out;
  EXPECT_NE(mapping_line.find(build_id), std::string::npos) << build_id << "\n" << mapping_line;
  // "id: 0xSTART/0xLIMIT/0xOFFSET file build-id [FN][FL][LN][IN]"
  std::istringstream f(mapping_line);
  std::string id, range;
  f >> id >> range;
  uint64_t start = 0, limit = 0;
  ASSERT_EQ(std::sscanf(range.c_str(), "0x%lx/0x%lx", &start, &limit), 2) << mapping_line;
  EXPECT_GT(start, 0u) << mapping_line;
  EXPECT_GT(limit, start) << mapping_line;
  EXPECT_NE(mapping_line.find("[FN]"), std::string::npos) << mapping_line;
}

TEST_F(ExportTest, ReportReadsEachFileOnce) {
  auto rep = daemon_->Cli({"report", id_, "--json", "--limit", "0"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto j = nlohmann::json::parse(rep.out);
  // Files named by the rows (kernel and [vdso]-like specials are not files)
  // were read, and no file more than once: at most one read per file
  // identity the record holds, whatever the number of samples.
  std::set<std::string> files;
  for (const auto& r : j["rows"]) {
    std::string dso = r.value("dso", "");
    if (!dso.empty() && dso[0] == '/') files.insert(dso);
  }
  auto info = nlohmann::json::parse(daemon_->Cli({"info", id_, "--json"}).out);
  const size_t identities = info["meta"]["cookies"].size();
  ASSERT_GE(files.size(), 1u) << rep.out;
  EXPECT_GE(j["files_read"].get<size_t>(), files.size()) << rep.out;
  EXPECT_LE(j["files_read"].get<size_t>(), identities) << info.dump();
  EXPECT_GT(j["samples"].get<size_t>(), 50 * j["files_read"].get<size_t>());
}

TEST_F(ExportTest, ChromeTraceHasRequiredFieldsAndOrderedLanes) {
  auto r = Export("chrome", "trace.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(ReadFile(Out("trace.json")));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<std::pair<int64_t, int64_t>, double> last_ts;
  std::map<std::pair<int64_t, int64_t>, int> depth;
  std::set<std::string> thread_names;
  size_t spin_slices = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid")) << e.dump();
    std::string ph = e["ph"];
    auto lane = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (ph == "M") {
      ASSERT_TRUE(e.contains("name") && e["args"].contains("name")) << e.dump();
      if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
      continue;
    }
    ASSERT_TRUE(ph == "B" || ph == "E") << e.dump();
    ASSERT_TRUE(e["ts"].is_number()) << e.dump();
    double ts = e["ts"];
    auto it = last_ts.find(lane);
    if (it != last_ts.end()) {
      EXPECT_GE(ts, it->second) << "lane out of order: " << e.dump();
    }
    last_ts[lane] = ts;
    if (ph == "B") {
      ASSERT_TRUE(e["name"].is_string()) << e.dump();
      ++depth[lane];
      if (e["name"] == "spin_a" && lane.first == pid_) ++spin_slices;
    } else {
      ASSERT_GT(depth[lane], 0) << "E without B: " << e.dump();
      --depth[lane];
    }
  }
  for (const auto& [lane, d] : depth) EXPECT_EQ(d, 0) << "unclosed slices on a lane";
  EXPECT_GT(spin_slices, 10u);
  EXPECT_TRUE(thread_names.count("fr_spin"));
  EXPECT_TRUE(thread_names.count("CPU 0") || thread_names.count("CPU 1"));
}

// The fields of a message; throws (failing the test) if it is malformed.
std::vector<WireField> Parse(const std::string& s) {
  std::vector<WireField> out;
  if (!ParseWire(s, &out)) throw std::runtime_error("malformed protobuf message");
  return out;
}

TEST_F(ExportTest, PerfettoTraceDecodesWithDescribedOrderedTracks) {
  auto r = Export("perfetto", "trace.pftrace");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<uint64_t> tracks;
  std::map<uint64_t, uint64_t> last_ts;
  std::map<uint64_t, int> depth;
  size_t spin = 0, events = 0;
  for (const auto& packet : Parse(ReadFile(Out("trace.pftrace")))) {
    ASSERT_EQ(packet.number, 1u);  // Trace.packet
    uint64_t ts = 0;
    for (const auto& f : Parse(packet.bytes)) {
      if (f.number == 8) ts = f.varint;
      if (f.number == 60) {  // TrackDescriptor
        for (const auto& d : Parse(f.bytes)) {
          if (d.number == 1) tracks.insert(d.varint);
        }
      }
      if (f.number == 11) {  // TrackEvent
        uint64_t type = 0, track = 0;
        std::string name;
        for (const auto& t : Parse(f.bytes)) {
          if (t.number == 9) type = t.varint;
          if (t.number == 11) track = t.varint;
          if (t.number == 23) name = t.bytes;
        }
        ++events;
        ASSERT_TRUE(tracks.count(track)) << "event on a track described later or never";
        ASSERT_TRUE(type == 1 || type == 2);
        EXPECT_GE(ts, last_ts[track]);
        last_ts[track] = ts;
        depth[track] += type == 1 ? 1 : -1;
        ASSERT_GE(depth[track], 0);
        if (name == "spin_a") ++spin;
      }
    }
  }
  EXPECT_GT(events, 50u);
  EXPECT_GT(spin, 10u);
  for (const auto& [t, d] : depth) EXPECT_EQ(d, 0);
}

TEST_F(ExportTest, FlameGraphIsWellFormedSvgAndFoldedHasTheStacks) {
  auto r = daemon_->Cli({"flamegraph", id_, "-o", Out("fg.svg"), "--title", "a <title> & more"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto xml = RunCommand({"/usr/bin/python3", "-c",
                         "import sys, xml.etree.ElementTree as E\n"
                         "root = E.parse(sys.argv[1]).getroot()\n"
                         "ns = '{http://www.w3.org/2000/svg}'\n"
                         "assert root.tag == ns + 'svg', root.tag\n"
                         "titles = [t.text for t in root.iter(ns + 'title')]\n"
                         "print('\\n'.join(titles))\n",
                         Out("fg.svg")});
  ASSERT_EQ(xml.exit_code, 0) << xml.err;
  EXPECT_NE(xml.out.find("spin_a ("), std::string::npos) << xml.out;
  EXPECT_NE(ReadFile(Out("fg.svg")).find("a &lt;title&gt; &amp; more"), std::string::npos);
  auto f = Export("folded", "stacks.folded");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  std::string folded = ReadFile(Out("stacks.folded"));
  EXPECT_NE(folded.find("fr_spin;"), std::string::npos);
  EXPECT_NE(folded.find(";spin_a "), std::string::npos) << folded;
}

TEST_F(ExportTest, BadRequestsFailCleanlyAndLeaveNoFile) {
  auto r = Export("svg-someday", "x.out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("valid: pprof, perfetto, chrome, folded, svg"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Out("x.out")));
  r = daemon_->Cli({"export", id_, "--format", "chrome", "-o", "/nonexistent-dir/t.json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot write /nonexistent-dir/t.json"), std::string::npos) << r.err;
  r = daemon_->Cli({"export", "no-such-id", "--format", "chrome", "-o", Out("y.json")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no record"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Out("y.json")));
  // A record that fails to replay halfway leaves no partial output either.
  TempDir copy;
  fs::copy(daemon_->store(), copy.path() + "/s", fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(copy.path() + "/s")) {
    if (e.path().filename().string().find(id_) == std::string::npos) continue;
    fs::resize_file(e.path(), fs::file_size(e.path()) * 2 / 3);
  }
  r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", copy.path() + "/s", "export", id_,
                  "--format", "pprof", "-o", Out("z.pb.gz")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << r.err;
  EXPECT_FALSE(fs::exists(Out("z.pb.gz")));
  for (const auto& e : fs::directory_iterator(dir_->path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

// `-o /dev/null` (or any device or FIFO) is written into, not replaced: the
// temporary-then-rename commit of a regular output file once turned the
// machine's /dev/null into a 38 GB regular file. A private null device node
// stands in for /dev/null so a failure cannot break the machine.
TEST_F(ExportTest, ADeviceOrFifoOutputIsWrittenInPlaceNotReplaced) {
  TempDir d;
  const std::string null_node = d.path() + "/null";
  ASSERT_EQ(mknod(null_node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << strerror(errno);
  auto r = daemon_->Cli({"export", id_, "--format", "pprof", "-o", null_node});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(stat(null_node.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced by a regular file";
  // A FIFO gets the bytes: a reader sees a whole Chrome JSON document.
  const std::string fifo = d.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
  std::string got;
  std::thread reader([&] { got = ReadFile(fifo); });
  r = daemon_->Cli({"export", id_, "--format", "chrome", "-o", fifo});
  // Had the export failed before opening the FIFO, the reader would wait for
  // a writer forever: be one (ENXIO once the reader is gone: nothing to do).
  if (int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK); w >= 0) close(w);
  reader.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(nlohmann::json::accept(got)) << got.substr(0, 200);
  for (const auto& e : fs::directory_iterator(d.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace flightrec::testing
