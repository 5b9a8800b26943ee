// `recorder trace` against Intel PT traces made by libipt's encoder for
// tests/programs/fr_pt_calls, whose control flow is known: the decoded calls,
// returns and fault must be exactly that flow, from a real record in a real
// store through the real CLI. Hostile traces end in a gap or a bound, never
// a crash.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <tuple>

#include <nlohmann/json.hpp>

#include "recorder/analysis/pt_decode.h"
#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"
#include "tests/trace/pt_encode.h"

namespace flightrec::testing {
namespace {

using Flow = std::vector<std::tuple<std::string, std::string, std::string>>;

class PtTraceTest : public ::testing::Test {
 protected:
  void SetUp() override { prog_ = LoadPtProgram(); }
  RunResult Trace(const std::string& id, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {BuildPath("recorder/cli/recorder"), "--store", dir_.path(),
                                     "trace", id};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCommand(args);
  }
  nlohmann::json TraceJson(const std::string& id, std::vector<std::string> extra = {}) {
    extra.push_back("--json");
    RunResult r = Trace(id, extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  // (kind, function, target function) of each step.
  static Flow FlowOf(const nlohmann::json& cpu) {
    Flow f;
    for (const auto& s : cpu["flow"]) {
      f.emplace_back(s["kind"], s["function"], s.value("target_function", ""));
    }
    return f;
  }
  TempDir dir_;
  PtProgram prog_;
};

const Flow kCallsFlow = {{"call", "main", "a"},     {"call", "a", "b"},
                         {"call", "b", "c"},        {"return", "c", "b"},
                         {"return", "b", "a"},      {"return", "a", "main"},
                         {"call", "main", "crash"}, {"disabled", "crash", ""}};

TEST_F(PtTraceTest, DecodesTheKnownCallsReturnsAndTheFault) {
  const std::string id = WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1000, 2000));
  nlohmann::json j = TraceJson(id);
  ASSERT_EQ(j["cpus"].size(), 1u);
  const auto& cpu = j["cpus"][0];
  EXPECT_EQ(cpu["pid"], 4242);
  EXPECT_EQ(cpu["flags"], "overwrite");
  EXPECT_EQ(cpu["gaps"], 0);
  EXPECT_EQ(cpu["image_notes"].size(), 0u) << cpu["image_notes"];
  EXPECT_EQ(FlowOf(cpu), kCallsFlow) << cpu["flow"].dump(1);
  // The trace stops at the faulting store; the last instruction executed is
  // main's call to crash.
  EXPECT_EQ(cpu["flow"].back()["ip"], prog_.addr.at("fr_pt_fault"));
  EXPECT_EQ(cpu["last_instructions"].back()["function"], "main");
  EXPECT_EQ(cpu["last_instructions"].back()["class"], "call");
  // main 3 + a 3 + b 3 + c 4 + rest of b 5 + rest of a 5 + main's call 1.
  EXPECT_EQ(cpu["instructions"], 24);
  RunResult text = Trace(id);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("      call b -> c\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("disabled at crash"), std::string::npos) << text.out;
}

TEST_F(PtTraceTest, ACrashRecordShowsTheTraceOfItsHistory) {
  const std::string hid = WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1, 2));
  auto store = store::Store::Open(dir_.path(), store::testing::TestOptions());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rec = (*store)->BeginRecord("crash");
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->writer().AddSection("metadata", "{}").ok());
  auto row = (*store)->Commit(std::move(*rec), {{"crash", {{"pid", 4242}, {"history", hid}}}});
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  nlohmann::json j = TraceJson(row->id);
  EXPECT_EQ(j["id"], hid);
  EXPECT_EQ(FlowOf(j["cpus"][0]), kCallsFlow);
}

TEST_F(PtTraceTest, ASnapshotThatBeginsMidPacketDecodesFromTheFirstPsb) {
  // Overwrite mode: the oldest bytes in the area are the tail of packets
  // whose start was overwritten. The decoder must skip to the first PSB.
  const std::string trace = CallsTrace(prog_, 1000, 2000);
  const std::string torn = trace.substr(trace.size() - 7) + trace;
  const std::string id = WritePtRecord(dir_.path(), prog_, 4242, torn);
  nlohmann::json j = TraceJson(id);
  EXPECT_EQ(FlowOf(j["cpus"][0]), kCallsFlow) << j.dump(1);
}

TEST_F(PtTraceTest, LastKeepsOnlyTheStepsNearTheEnd) {
  // TSC ticks read as ns (the record's time_mult 1): the calls are 5 ms
  // before the fault.
  const std::string id =
      WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1'000'000, 6'000'000));
  nlohmann::json j = TraceJson(id, {"--last", "2ms"});
  const Flow f = FlowOf(j["cpus"][0]);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.back(), kCallsFlow.back());
  EXPECT_LT(f.size(), kCallsFlow.size());
  EXPECT_GT(j["cpus"][0]["steps_dropped"].get<int>(), 0);
}

TEST_F(PtTraceTest, LastOnATraceWithoutTimingIsAnError) {
  const std::string trace = EncodePt({PtPsb(), PtMode64(), PtFup(prog_.addr.at("main")), PtPsbEnd(),
                                      PtTnt({true, true, true}),
                                      PtFup(prog_.addr.at("fr_pt_fault")), PtTipPgdSuppressed()});
  const std::string id = WritePtRecord(dir_.path(), prog_, 4242, trace);
  RunResult r = Trace(id, {"--last", "2ms"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no timing packets"), std::string::npos) << r.err;
  EXPECT_EQ(FlowOf(TraceJson(id)["cpus"][0]), kCallsFlow);
}

TEST_F(PtTraceTest, ABinaryOfAnotherBuildIsNotDecodedAgainst) {
  const std::string id =
      WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1, 2), std::string(20, '\x5a'));
  nlohmann::json j = TraceJson(id);
  const auto& cpu = j["cpus"][0];
  ASSERT_EQ(cpu["image_notes"].size(), 1u);
  EXPECT_NE(cpu["image_notes"][0].get<std::string>().find("not the build"), std::string::npos);
  EXPECT_EQ(cpu["instructions"], 0);
  EXPECT_GE(cpu["gaps"].get<int>(), 1);
}

TEST_F(PtTraceTest, PidAndCpuSelectTheTraceAndAMissOrNoTraceIsAnError) {
  const std::string id = WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1, 2));
  EXPECT_EQ(TraceJson(id, {"--pid", "4242", "--cpu", "1"})["cpus"].size(), 1u);
  RunResult r = Trace(id, {"--pid", "7"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no CPU's trace matches pid 7"), std::string::npos) << r.err;
  r = RunCommand(
      {BuildPath("recorder/cli/recorder"), "--store", dir_.path(), "trace", id, "--cpu", "0"});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(PtTraceTest, BadOptionsAndOtherPmusAreErrorsThatSayWhy) {
  const std::string id = WritePtRecord(dir_.path(), prog_, 4242, CallsTrace(prog_, 1, 2));
  for (const auto& [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--last", "0ms"}, "positive"},
           {{"--last", "-2ms"}, "invalid duration"},
           {{"--last", "soon"}, ""},
           {{"--instructions", "5000"}, "at most 4096"}}) {
    RunResult r = Trace(id, args);
    EXPECT_NE(r.exit_code, 0) << args[1];
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
  const std::string spe = WritePtRecord(dir_.path(), prog_, 4242, "\x01\x02", "", "arm_spe_0");
  RunResult r = Trace(spe);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("from PMU 'arm_spe_0'; recorder trace decodes intel_pt only"),
            std::string::npos)
      << r.err;
}

TEST(PtDecodeTest, DecodingStopsAtTheInstructionBound) {
  // The bound on work per CPU: code without branches costs no trace bytes,
  // so a small hostile trace may describe a great many instructions.
  const PtProgram p = LoadPtProgram();
  recorder::analysis::PtDecodeOptions o;
  o.max_insns = 10;
  auto d = recorder::analysis::DecodePt(CallsTrace(p, 1, 2),
                                        {{p.text_start, p.text_len, p.text_pgoff, p.path}}, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->insn_limit_hit);
  EXPECT_EQ(d->instructions, 10u);
  EXPECT_EQ(d->steps.size(), 3u);  // main -> a -> b -> c, then the bound
}

TEST(PtDecodeTest, RandomAndMutatedBytesDecodeToGapsNeverACrash) {
  const PtProgram p = LoadPtProgram();
  const std::string good = CallsTrace(p, 1, 2);
  std::mt19937_64 rng(31);
  for (int i = 0; i < 2000; ++i) {
    std::string t = good;
    if (i % 2 == 0) {
      for (int k = 0; k < 3; ++k) t[rng() % t.size()] = static_cast<char>(rng());
    } else {
      t.resize(rng() % 200);
      for (auto& ch : t) ch = static_cast<char>(rng());
    }
    recorder::analysis::PtDecodeOptions o;
    o.max_insns = 100000;
    auto d = recorder::analysis::DecodePt(t, {{p.text_start, p.text_len, p.text_pgoff, p.path}}, o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_LE(d->instructions, o.max_insns);
  }
}

}  // namespace
}  // namespace flightrec::testing
