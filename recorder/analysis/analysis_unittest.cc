// The query commands' aggregations on synthetic samples: report rows (self,
// children, recursion, shared stack ids, each sort key) and a crashed
// thread's history summary (top, last, window, timeline).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recorder/analysis/crash_history.h"
#include "recorder/analysis/report.h"
#include "recorder/analysis/timeline.h"

namespace flightrec::recorder::analysis {
namespace {

attribution::Symbol Sym(const std::string& fn, const std::string& dso,
                        const std::string& status = "ok") {
  attribution::Symbol s;
  s.function = fn;
  s.dso = dso;
  s.status = status;
  return s;
}

attribution::AttributedSample Attributed(uint32_t pid, uint32_t tid, const std::string& comm) {
  attribution::AttributedSample s;
  s.pid = pid;
  s.tid = tid;
  s.comm = comm;
  return s;
}

struct Fixture {
  attribution::Symbol main_ = Sym("main", "/bin/app");
  attribution::Symbol work_ = Sym("work", "/bin/app");
  attribution::Symbol memcpy_ = Sym("memcpy", "/lib/libc.so.6");
  attribution::Symbol gone_ = Sym("", "/lib/gone.so", "file_missing");

  ResolvedSample Sample(attribution::AttributedSample* s,
                        std::vector<const attribution::Symbol*>* v, uint64_t stack_id = 0) {
    ResolvedSample rs;
    rs.sample = s;
    rs.stack = *v;
    rs.stack_id = stack_id;
    return rs;
  }
};

const ReportRow* Find(const Report& r, const std::string& key) {
  for (const auto& row : r.rows) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

TEST(ReportBuilder, CountsSelfAtTheInnermostFrameAndChildrenOncePerStack) {
  Fixture f;
  attribution::AttributedSample s = Attributed(7, 8, "app");
  // work -> work (recursion) -> main; memcpy -> work -> main; main alone.
  std::vector<const attribution::Symbol*> a = {&f.work_, &f.work_, &f.main_};
  std::vector<const attribution::Symbol*> b = {&f.memcpy_, &f.work_, &f.main_};
  std::vector<const attribution::Symbol*> c = {&f.main_};
  ReportBuilder rb(ReportKey::kSymbol);
  rb.Add(f.Sample(&s, &a));
  rb.Add(f.Sample(&s, &a));
  rb.Add(f.Sample(&s, &b));
  rb.Add(f.Sample(&s, &c));
  Report self = rb.Finish(/*by_children=*/false);
  EXPECT_EQ(self.total, 4u);
  ASSERT_EQ(self.rows.size(), 3u);
  EXPECT_EQ(self.rows[0].key, "work");  // 2 self, then main and memcpy (1 each, by name)
  EXPECT_EQ(self.rows[0].self, 2u);
  EXPECT_EQ(self.rows[0].children, 3u) << "recursion counts once per sample";
  EXPECT_EQ(self.rows[1].key, "main");
  EXPECT_EQ(self.rows[1].children, 4u);
  EXPECT_EQ(self.rows[2].key, "memcpy");
  EXPECT_EQ(self.rows[2].dso, "/lib/libc.so.6");
}

TEST(ReportBuilder, ChildrenOrderAndSharedStackIdsCountLikeSeparateSamples) {
  Fixture f;
  attribution::AttributedSample s = Attributed(7, 8, "app");
  std::vector<const attribution::Symbol*> a = {&f.memcpy_, &f.work_, &f.main_};
  ReportBuilder rb(ReportKey::kSymbol);
  for (int i = 0; i < 5; ++i) rb.Add(f.Sample(&s, &a, /*stack_id=*/3));
  Report r = rb.Finish(/*by_children=*/true);
  EXPECT_EQ(r.total, 5u);
  ASSERT_EQ(r.rows.size(), 3u);
  for (const auto& row : r.rows) EXPECT_EQ(row.children, 5u) << row.key;
  EXPECT_EQ(r.rows[0].key, "main");  // equal children: by name
  ASSERT_NE(Find(r, "memcpy"), nullptr);
  EXPECT_EQ(Find(r, "memcpy")->self, 5u);
  ASSERT_NE(Find(r, "work"), nullptr);
  EXPECT_EQ(Find(r, "work")->self, 0u);
}

TEST(ReportBuilder, KeysByDsoPidTidCommAndNotesMissingFiles) {
  Fixture f;
  attribution::AttributedSample s1 = Attributed(7, 8, "app");
  attribution::AttributedSample s2 = Attributed(7, 9, "worker");
  std::vector<const attribution::Symbol*> a = {&f.memcpy_, &f.work_};
  std::vector<const attribution::Symbol*> g = {&f.gone_};
  std::vector<const attribution::Symbol*> none;

  ReportBuilder dso(ReportKey::kDso);
  dso.Add(f.Sample(&s1, &a));
  dso.Add(f.Sample(&s2, &g));
  dso.Add(f.Sample(&s2, &none));
  Report rd = dso.Finish(false);
  for (const char* key : {"/lib/libc.so.6", "/lib/gone.so", "[no frames]"}) {
    ASSERT_NE(Find(rd, key), nullptr) << key;
    EXPECT_EQ(Find(rd, key)->self, 1u) << key;
  }
  EXPECT_EQ(Find(rd, "/bin/app"), nullptr) << "by self: a caller-only DSO has no row";
  EXPECT_EQ(rd.rows.size(), 3u);
  EXPECT_EQ(rd.missing_files, std::set<std::string>{"/lib/gone.so"});
  EXPECT_TRUE(rd.changed_files.empty());

  for (auto [key, want1, want2] :
       {std::tuple{ReportKey::kPid, "7", "7"}, std::tuple{ReportKey::kTid, "8", "9"},
        std::tuple{ReportKey::kComm, "app", "worker"}}) {
    ReportBuilder rb(key);
    rb.Add(f.Sample(&s1, &a, 1));
    rb.Add(f.Sample(&s2, &a, 1));
    Report r = rb.Finish(false);
    uint64_t sum = 0;
    for (const auto& row : r.rows) sum += row.self;
    EXPECT_EQ(sum, 2u) << ToString(key);
    EXPECT_NE(Find(r, want1), nullptr) << ToString(key);
    EXPECT_NE(Find(r, want2), nullptr) << ToString(key);
  }
}

TEST(ReportKey, ParsesEveryNameAndRejectsOthers) {
  for (const char* n : {"symbol", "dso", "pid", "tid", "comm"}) {
    auto k = ParseReportKey(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_STREQ(ToString(*k), n);
  }
  EXPECT_FALSE(ParseReportKey("function").ok());
}

TEST(ThreadHistory, TopLastWindowAndTimeline) {
  std::vector<std::pair<uint64_t, std::string>> points;
  // 12 samples over [1000, 2000): "spin" 8 times in the first half, "crash"
  // 4 times in the second.
  for (int i = 0; i < 8; ++i) points.emplace_back(1000 + i * 50, "spin");
  for (int i = 0; i < 4; ++i) points.emplace_back(1600 + i * 100, "crash");
  nlohmann::json h = SummarizeThreadHistory(points, 1000, 2000, 2);
  EXPECT_EQ(h["samples"], 12);
  ASSERT_EQ(h["top"].size(), 2u);
  EXPECT_EQ(h["top"][0]["function"], "spin");
  EXPECT_EQ(h["top"][0]["samples"], 8);
  EXPECT_DOUBLE_EQ(h["top"][1]["pct"].get<double>(), 100.0 * 4 / 12);
  ASSERT_EQ(h["last"].size(), 10u);
  EXPECT_EQ(h["last"][9]["function"], "crash");
  EXPECT_EQ(h["last"][9]["time_ns"], 1900);
  EXPECT_EQ(h["first_ns"], 1000);
  EXPECT_EQ(h["last_ns"], 1900);
  EXPECT_EQ(h["window_start_ns"], 1000);
  EXPECT_EQ(h["window_end_ns"], 2000);
  EXPECT_EQ(h["timeline"]["bins"], 2);
  EXPECT_EQ(h["timeline"]["bin_ns"], 500);
  // Letters by total samples: spin = A, crash = B.
  EXPECT_EQ(h["timeline"]["text"], "AB");
  ASSERT_EQ(h["timeline"]["legend"].size(), 2u);
  EXPECT_EQ(h["timeline"]["legend"][1]["function"], "crash");
}

TEST(ThreadActivity, EveryThreadWithOnCpuSamplesAndOffCpuTimeSideBySide) {
  attribution::Symbol sched = Sym("__schedule", "[kernel.kallsyms]");
  attribution::Symbol lock = Sym("pthread_mutex_lock", "/lib/libc.so.6");
  attribution::Symbol xfer = Sym("transfer_a", "/bin/app");
  attribution::Symbol spin = Sym("spin", "/bin/app");
  std::vector<const attribution::Symbol*> blocked = {&sched, &lock, &xfer};
  std::vector<const attribution::Symbol*> running = {&spin};
  ThreadActivity a;
  auto on = Attributed(10, 11, "runner");
  a.Add(ResolvedSample{&on, running});
  a.Add(ResolvedSample{&on, running});
  OffCpuInterval short_sleep, stuck;
  short_sleep.state = 'S';
  stuck.state = 'D';
  stuck.ongoing = true;
  auto off1 = Attributed(10, 12, "xfer_a");
  off1.period = 2'000'000;
  ResolvedSample r1{&off1, blocked};
  r1.off_cpu = &short_sleep;
  a.Add(r1);
  auto off2 = Attributed(10, 12, "xfer_a");
  off2.period = 4'000'000'000;
  ResolvedSample r2{&off2, blocked};
  r2.off_cpu = &stuck;
  a.Add(r2);
  const nlohmann::json j = a.ToJson();
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["tid"], 11);
  EXPECT_EQ(j[0]["samples"], 2);
  EXPECT_EQ(j[0]["off_cpu_ns"], 0);
  EXPECT_FALSE(j[0].contains("blocked_in"));
  EXPECT_EQ(j[1]["tid"], 12);
  EXPECT_EQ(j[1]["comm"], "xfer_a");
  EXPECT_EQ(j[1]["samples"], 0);
  EXPECT_EQ(j[1]["off_cpu_ns"], 4'002'000'000u);
  EXPECT_EQ(j[1]["off_cpu_intervals"], 2);
  EXPECT_EQ(j[1]["longest_off_cpu_ns"], 4'000'000'000u);
  EXPECT_EQ(j[1]["longest_state"], "D");
  EXPECT_EQ(j[1]["blocked_at_end"], true);
  // Its user frames, innermost first (the kernel's left out).
  EXPECT_EQ(j[1]["blocked_in"], "pthread_mutex_lock <- transfer_a");
}

TEST(ThreadHistory, WithoutAStatedWindowUsesTheSamplesSpanAndEmptyIsEmpty) {
  nlohmann::json h = SummarizeThreadHistory({{300, "f"}, {100, "g"}}, 0, 0, 4);
  EXPECT_EQ(h["window_start_ns"], 100);
  EXPECT_EQ(h["window_end_ns"], 301);
  EXPECT_EQ(h["last"][0]["function"], "g") << "points are put in time order";
  nlohmann::json e = SummarizeThreadHistory({}, 0, 0, 4);
  EXPECT_EQ(e["samples"], 0);
  EXPECT_EQ(e["top"].size(), 0u);
  EXPECT_EQ(e["timeline"]["lane"].size(), 4u);
}

TEST(BuildTimeline, LanesPerCpuAndThreadOverTheStatedWindowCutBySinceUntil) {
  const std::string f = "f", g = "g";
  std::vector<TimelinePoint> points = {
      {100, 0, 1, 1, &f}, {150, 0, 1, 1, &f}, {260, 1, 1, 2, &g}, {390, 1, 1, 2, &g}};
  Timeline t = BuildTimeline(points, 100, 400, std::nullopt, std::nullopt, 3);
  ASSERT_FALSE(t.empty);
  EXPECT_EQ(t.start_ns, 100u);
  EXPECT_EQ(t.end_ns, 400u);
  ASSERT_EQ(t.cpus.size(), 2u);
  EXPECT_EQ(t.cpus.at(0).samples, 2u);
  ASSERT_EQ(t.threads.size(), 2u);
  EXPECT_EQ(t.threads.at({1, 2}).samples, 2u);
  ASSERT_EQ(t.cpus.at(1).bins.size(), 3u);
  EXPECT_EQ(t.cpus.at(1).bins[1].at("g"), 1u);  // 260 in [200, 300)
  EXPECT_EQ(t.cpus.at(1).bins[2].at("g"), 1u);

  // --since 150ns --until 250ns from the window start: only cpu 1's first sample.
  Timeline cut = BuildTimeline(points, 100, 400, 150, 250, 2);
  ASSERT_FALSE(cut.empty);
  EXPECT_EQ(cut.start_ns, 250u);
  EXPECT_EQ(cut.end_ns, 350u);
  ASSERT_EQ(cut.cpus.size(), 1u) << "a lane without a sample in the window is left out";
  EXPECT_EQ(cut.cpus.begin()->first, 1u);

  // No stated window: the samples' span.
  Timeline span = BuildTimeline(points, 0, 0, std::nullopt, std::nullopt, 2);
  EXPECT_EQ(span.start_ns, 100u);
  EXPECT_EQ(span.end_ns, 391u);
  EXPECT_TRUE(BuildTimeline({}, 100, 400, std::nullopt, std::nullopt, 2).empty);
}

}  // namespace
}  // namespace flightrec::recorder::analysis
