// Issue 13 item 3: the Chrome trace export as speedscope really reads it.
// A real record of fr_spin (spin_a ~70%, spin_b ~30% of its CPU time) is
// exported with `recorder export -f chrome`, loaded into speedscope's own web
// app (npm package speedscope) in headless Chromium (Debian's chromium,
// driven by puppeteer-core; scripts/setup.sh installs both), and the profile
// speedscope built — taken from its own Export button — must name the same
// top functions as `recorder report --json`, with the same self shares, and
// import without a single complaint about unmatched or unclosed events.
// The page's screenshot goes to build/test-output/speedscope_test/.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;

// The trace itself, read as chrome://tracing and speedscope read it: every
// slice event names its frame (the E too), frame names carry no JSON (the
// dso is the category, there are no args on slices), each lane's events are
// ordered, each E ends the innermost open slice of its lane and comes
// strictly before the lane's next B, and thread/process names are given.
void CheckTraceShape(const nlohmann::json& j, pid_t spin_pid) {
  ASSERT_TRUE(j["traceEvents"].is_array());
  struct Lane {
    std::vector<std::string> open;
    double last_ts = -1;
    char last_ph = 0;
  };
  std::map<std::pair<int64_t, int64_t>, Lane> lanes;
  std::set<std::string> thread_names, process_names;
  size_t spin_slices = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid")) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
      if (e["name"] == "process_name") process_names.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_TRUE(ph == "B" || ph == "E") << e.dump();
    ASSERT_TRUE(e["name"].is_string()) << e.dump();
    EXPECT_FALSE(e.contains("args")) << e.dump();
    const std::string name = e["name"];
    EXPECT_EQ(name.find('{'), std::string::npos) << e.dump();
    Lane& lane = lanes[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}];
    const double ts = e["ts"];
    ASSERT_GE(ts, lane.last_ts) << "lane out of order: " << e.dump();
    if (ph == "B") {
      EXPECT_FALSE(lane.last_ph == 'E' && ts == lane.last_ts) << "E and B tie: " << e.dump();
      lane.open.push_back(name);
      if (name == "spin_a" && e["pid"] == spin_pid) ++spin_slices;
    } else {
      ASSERT_FALSE(lane.open.empty()) << "E without B: " << e.dump();
      ASSERT_EQ(lane.open.back(), name) << "E does not end the innermost slice: " << e.dump();
      lane.open.pop_back();
    }
    lane.last_ts = ts;
    lane.last_ph = ph[0];
  }
  for (const auto& [key, lane] : lanes) EXPECT_TRUE(lane.open.empty()) << "unclosed slices";
  EXPECT_GT(spin_slices, 10u);
  EXPECT_TRUE(thread_names.count("fr_spin"));
  EXPECT_TRUE(process_names.count("fr_spin"));
}

TEST(SpeedscopeTest, ChromeTraceRendersInSpeedscopeLikeReport) {
  TempDir dir;
  Daemon daemon(dir.path());
  ASSERT_TRUE(daemon.ready()) << daemon.Log();
  pid_t spin = 0;
  ASSERT_TRUE(RunToSuccess({BuildPath("tests/programs/fr_spin"), "2"}, &spin));
  std::string id;
  ASSERT_NO_FATAL_FAILURE(DumpLast5s(daemon, spin, {}, &id));
  const std::string trace = dir.path() + "/trace.json";
  auto ex = daemon.Cli({"export", id, "--format", "chrome", "-o", trace});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;

  auto rep = daemon.Cli({"report", id, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const auto rows = nlohmann::json::parse(rep.out)["rows"];
  ASSERT_GE(rows.size(), 2u) << rep.out;

  const std::string out_dir = BuildPath("test-output/speedscope_test");
  fs::remove_all(out_dir);
  fs::create_directories(out_dir);
  fs::copy_file(trace, out_dir + "/trace.json");
  std::cout << "exported trace: " << out_dir << "/trace.json\n";
  CheckTraceShape(nlohmann::json::parse(ReadFile(trace)), spin);
  // The driver bounds itself (deadline, browser memory cap); timeout(1) is
  // the last resort should node itself hang.
  auto run = RunCommand({"/usr/bin/timeout", "-k", "5", "200", "/usr/bin/node",
                         SourcePath("tests/export/speedscope/speedscope_check.js"),
                         BuildPath("npm/node_modules"), "/usr/bin/chromium", trace, out_dir});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const auto got = nlohmann::json::parse(run.out);
  std::cout << "speedscope screenshot: " << got["screenshot"].get<std::string>() << "\n"
            << "speedscope export: " << got["export"].get<std::string>() << "\n"
            << "browser peak memory (PSS): " << got["peak_pss_bytes"].get<uint64_t>() / 1048576
            << " MiB\n";
  EXPECT_TRUE(fs::file_size(got["screenshot"].get<std::string>()) > 10000);

  // speedscope imported it as a trace-event file and had nothing to say
  // about it: no E it could not match, no slice left open.
  bool imported = false;
  for (const auto& m : got["messages"]) {
    const std::string text = m["text"];
    if (text == "Importing as Trace Event Format profile") imported = true;
    EXPECT_TRUE(m["type"] != "warn" && m["type"] != "error" && m["type"] != "pageerror")
        << m.dump();
  }
  EXPECT_TRUE(imported) << got["messages"].dump();

  // Frame names are the functions' names, as report shows them.
  std::set<std::string> frames;
  for (const auto& f : got["frames"]) {
    const std::string name = f;
    EXPECT_EQ(name.find('{'), std::string::npos) << name;
    frames.insert(name);
  }
  // The spinner's threads, in speedscope's own weights (µs of slices).
  const std::string tag = "(pid " + std::to_string(spin) + ")";
  std::map<std::string, double> self, total;
  double sum = 0;
  size_t spin_profiles = 0;
  for (const auto& p : got["profiles"]) {
    EXPECT_EQ(p["open_at_end"], 0) << p["name"];
    if (p["name"].get<std::string>().find(tag) == std::string::npos) continue;
    ++spin_profiles;
    for (const auto& [name, w] : p["self"].items()) {
      self[name] += w.get<double>();
      sum += w.get<double>();
    }
    for (const auto& [name, w] : p["total"].items()) total[name] += w.get<double>();
  }
  ASSERT_GE(spin_profiles, 1u) << run.out.substr(0, 4000);
  ASSERT_GT(sum, 0);
  // Not a staircase: spin_a and spin_b are siblings under main (their
  // totals are disjoint parts of main's; nested, spin_b's time would count
  // in spin_a's total too), and main holds nearly all of the spinner's time.
  EXPECT_TRUE(frames.count("main")) << run.out.substr(0, 4000);
  EXPECT_GT(total["main"], 0.9 * sum);
  EXPECT_GT(total["spin_b"], 0);
  EXPECT_LE(total["spin_a"] + total["spin_b"], total["main"] + 1.0);
  for (size_t i = 0; i < 2; ++i) {
    const std::string key = rows[i]["key"];
    const double report_pct = rows[i]["self_pct"];
    ASSERT_TRUE(frames.count(key)) << key << " not among speedscope's frames";
    const double speedscope_pct = 100.0 * self[key] / sum;
    std::cout << key << ": report " << report_pct << "%, speedscope " << speedscope_pct << "%\n";
    // The same samples, as time: each stands for its period, so shares agree
    // to within a couple of points (slices are cut where the next sample
    // begins, and the first/last sample's interval is clipped).
    EXPECT_NEAR(speedscope_pct, report_pct, 2.0) << key;
  }
  EXPECT_EQ(rows[0]["key"], "spin_a");
  EXPECT_EQ(rows[1]["key"], "spin_b");
}

}  // namespace
}  // namespace flightrec::testing
