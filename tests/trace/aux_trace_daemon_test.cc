// recorderd --aux-trace on this machine, which has no trace PMU (nor has
// CI's): the daemon says so, records without the trace, `status` (text and
// --json) says whether the PMU exists and why trace is off, and a dump's
// record has no trace section, which `recorder trace` names.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

TEST(AuxTraceDaemonTest, WithoutAPmuTheDaemonRecordsAndStatusSaysWhyTraceIsOff) {
  TempDir dir;
  Daemon d(dir.path(), {"--aux-trace", "pt,size=1M,cyc"});
  ASSERT_TRUE(d.ready()) << d.Log();
  EXPECT_NE(d.Log().find("hardware trace is off"), std::string::npos) << d.Log();
  RunResult st = d.Cli({"status", "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  auto j = nlohmann::json::parse(st.out)["aux_trace"];
  EXPECT_EQ(j["requested"], true);
  EXPECT_EQ(j["enabled"], false);
  EXPECT_EQ(j["pmu_present"], false);
  EXPECT_NE(j["why_off"].get<std::string>().find("intel_pt"), std::string::npos) << j;
  st = d.Cli({"status"});
  EXPECT_NE(st.out.find("hw trace:  this machine has no pt PMU"), std::string::npos) << st.out;
  RunResult dump = d.Cli({"dump", "--last", "1s", "--json"});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const std::string id = nlohmann::json::parse(dump.out)["id"];
  RunResult tr = d.Cli({"trace", id});
  EXPECT_NE(tr.exit_code, 0);
  EXPECT_NE(tr.err.find("has no hardware trace"), std::string::npos) << tr.err;
}

TEST(AuxTraceDaemonTest, WithoutTheOptionStatusSaysTraceIsOffAndWhetherThePmuExists) {
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  auto j = nlohmann::json::parse(d.Cli({"status", "--json"}).out)["aux_trace"];
  EXPECT_EQ(j["requested"], false);
  EXPECT_EQ(j["pmu_present"], false);
  EXPECT_NE(j["why_off"].get<std::string>().find("off, and this machine has no pt PMU"),
            std::string::npos)
      << j;
}

TEST(AuxTraceDaemonTest, ABadSpecStopsRecorderdWithTheReason) {
  RunResult r = RunCommand({BuildPath("recorder/daemon/recorderd"), "--aux-trace", "pt,size=3M"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("power of two"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace flightrec::testing
