// Real crashes of tests/programs/fr_crash through the installed core_pattern:
// stored with metadata, a backtrace and recorderd's history; named threads;
// `crash list` filters.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "store/record_file.h"
#include "tests/coredump/coredump_fixture.h"
#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Every section of a record but `except`, decompressed, with its meta.
std::string RecordText(const std::string& store, const std::string& id,
                       const std::string& except = "") {
  std::string all;
  for (const auto& e : fs::directory_iterator(store)) {
    if (e.path().filename().string().rfind(id, 0) != 0) continue;
    auto r = store::RecordReader::Open(e.path().string());
    if (!r.ok()) continue;
    all += (*r)->meta().dump();
    for (const auto& sec : (*r)->sections()) {
      if (sec.name == except) continue;
      auto text = (*r)->ReadSection(sec.name);
      if (text.ok()) all += *text;
    }
  }
  return all;
}

TEST_F(CoredumpTest, RealCrashesAreStoredWithBacktraceAndHistory) {
  // segv spins 6 s so that its history fills the whole 5 s window.
  for (const Case& c :
       std::vector<Case>{{"segv", SIGSEGV, "SIGSEGV", "crash_here", "main", 6000},
                         {"abort", SIGABRT, "SIGABRT", "abort", "crash_here"},
                         {"fpe", SIGFPE, "SIGFPE", "crash_here", "main"},
                         {"threads", SIGSEGV, "SIGSEGV", "crash_here", "thread_main"}}) {
    SCOPED_TRACE(c.mode);
    int sig = 0;
    pid_t pid = Crash(c.mode, &sig, c.ms);
    ASSERT_EQ(sig, c.signal);
    nlohmann::json crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << "no crash listed for pid " << pid << "\n" << daemon_->Log();
    EXPECT_EQ(crash["pid"], pid);
    EXPECT_EQ(crash["signal_name"], c.signame);
    EXPECT_EQ(crash["exe"], fs::canonical(BuildPath("tests/programs/fr_crash")).string());
    EXPECT_TRUE(crash["core_stored"].get<bool>());
    EXPECT_FALSE(crash["truncated"].get<bool>());
    const std::string id = crash["id"];

    // The core comes back whole, and is this process's core: its ELF notes
    // name the pid and the signal.
    const std::string core = dir_->path() + "/core." + c.mode;
    auto r = daemon_->Cli({"crash", "core", id, "-o", core});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(fs::file_size(core), crash["core_size"].get<uint64_t>());
    auto notes = RunCommand({"/usr/bin/eu-readelf", "--notes", core});
    ASSERT_EQ(notes.exit_code, 0) << notes.err;
    EXPECT_NE(notes.out.find("CORE"), std::string::npos);
    EXPECT_NE(notes.out.find("info.si_signo: " + std::to_string(c.signal)), std::string::npos)
        << notes.out.substr(0, 2000);
    EXPECT_NE(notes.out.find("pid: " + std::to_string(pid)), std::string::npos);

    // Backtrace: the crashing function and its caller, crashing thread first
    // (by its global tid); every thread unwound to fr_crash's own entry.
    auto info = daemon_->Cli({"crash", "info", id, "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    auto j = nlohmann::json::parse(info.out);
    const auto& threads = j["backtrace"]["threads"];
    ASSERT_FALSE(threads.empty()) << info.out;
    EXPECT_EQ(j["backtrace"]["crashing_tid"], crash["global_tid"]);
    EXPECT_EQ(threads[0]["tid"], crash["global_tid"]);
    std::vector<std::string> names = FrameNames(threads[0]);
    ASSERT_TRUE(Has(names, c.crashing_function)) << j["backtrace"].dump();
    EXPECT_TRUE(CalledFrom(names, c.crashing_function, c.caller)) << j["backtrace"].dump();
    const size_t want_threads = c.mode == "threads" ? 2 : 1;
    ASSERT_EQ(threads.size(), want_threads) << j["backtrace"].dump();
    ASSERT_EQ(j["metadata"]["threads"].size(), want_threads) << j["metadata"].dump();
    std::set<int> tids;
    for (const auto& t : j["metadata"]["threads"]) tids.insert(t["tid"].get<int>());
    for (size_t k = 0; k < threads.size(); ++k) {
      SCOPED_TRACE("thread " + std::to_string(k));
      EXPECT_TRUE(tids.count(threads[k]["tid"].get<int>())) << threads[k].dump();
      auto tn = FrameNames(threads[k]);
      // The main thread spins in spin_a (or the clock it reads) under main;
      // the crashing one of `threads` is under thread_main.
      EXPECT_TRUE(Has(tn, k == 0 && c.mode == "threads" ? "thread_main" : "main"))
          << threads[k].dump();
      if (c.mode == "threads" && k == 1) {
        EXPECT_TRUE(Has(tn, "spin_a")) << threads[k].dump();
      }
    }
    // The reduced copy the unwinder read held all of this small core.
    EXPECT_FALSE(j["backtrace"]["input"]["reduced"].get<bool>()) << j["backtrace"]["input"];

    // History: the crashing thread's (global tid) last seconds show spin_a,
    // over the 5 s window before the crash, also as a timeline.
    ASSERT_FALSE(j["history"].is_null()) << info.out;
    const auto& h = j["history"];
    EXPECT_EQ(h["tid"], crash["global_tid"]);
    EXPECT_GT(h["samples"].get<uint64_t>(), 20u) << info.out;
    EXPECT_EQ(h["top"][0]["function"], "spin_a") << info.out;
    EXPECT_GE(h["window_s"].get<double>(), 4.5) << h.dump();
    EXPECT_LE(h["window_s"].get<double>(), 5.5) << h.dump();
    EXPECT_GE(h["first_ns"].get<uint64_t>(), h["window_start_ns"].get<uint64_t>());
    EXPECT_LE(h["last_ns"].get<uint64_t>(), h["window_end_ns"].get<uint64_t>());
    if (c.ms > 5000) {
      // Busy for longer than the window: its samples span most of it (the
      // daemon is asked a little after the crash).
      EXPECT_GE(h["span_s"].get<double>(), 3.0) << h.dump();
      EXPECT_LE(h["span_s"].get<double>(), 5.5) << h.dump();
    }
    const auto& tl = h["timeline"];
    EXPECT_EQ(tl["bins"], 20);
    ASSERT_EQ(tl["lane"].size(), 20u);
    ASSERT_FALSE(tl["legend"].empty());
    EXPECT_EQ(tl["legend"][0]["function"], "spin_a");
    EXPECT_EQ(tl["legend"][0]["letter"], "A");
    // The thread ran until the crash: late bins show it (the window ends
    // when the hook asked, a little after the crash).
    const std::string lane_text = tl["text"];
    ASSERT_EQ(lane_text.size(), 20u);
    const size_t last_busy = lane_text.find_last_not_of('.');
    ASSERT_NE(last_busy, std::string::npos) << lane_text;
    EXPECT_GE(last_busy, 10u) << lane_text;
    EXPECT_NE(lane_text.find('A'), std::string::npos) << lane_text;
    uint64_t binned = 0;
    for (const auto& b : tl["lane"]) {
      for (const auto& [f, n] : b["counts"].items()) binned += n.get<uint64_t>();
    }
    EXPECT_EQ(binned, h["samples"].get<uint64_t>());

    // /proc/PID/maps at the crash is stored and shown.
    EXPECT_NE(j["maps"].get<std::string>().find(crash["exe"].get<std::string>()), std::string::npos)
        << j["maps"];
    auto text = daemon_->Cli({"crash", "info", id, "--maps"});
    EXPECT_NE(text.out.find("Backtrace (crashing thread first)"), std::string::npos);
    EXPECT_NE(text.out.find("spin_a"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("timeline (20 bins"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("|" + tl["text"].get<std::string>() + "|"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Mappings (/proc/"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find(j["maps"].get<std::string>()), std::string::npos);
    EXPECT_EQ(daemon_->Cli({"crash", "info", id}).out.find("Mappings (/proc/"), std::string::npos);

    // The environment is not stored: not in the metadata, the backtrace,
    // the maps, the history (only the core, the process's memory, has it).
    const std::string stored = RecordText(daemon_->store(), id, "core") +
                               RecordText(daemon_->store(), h["id"].get<std::string>());
    EXPECT_GT(stored.size(), 1000u);
    EXPECT_EQ(stored.find(kSecretValue), std::string::npos);
    EXPECT_EQ(stored.find("FLIGHTREC_TEST_SECRET"), std::string::npos);
    EXPECT_NE(ReadFile(core).find(kSecretValue), std::string::npos)
        << "the secret was in the process's environment";
  }
}

// Issue 13 item 5: threads are named as pthread_setname_np named them, in
// the backtrace (JSON and text) and in the history before the crash.
TEST_F(CoredumpTest, CrashInfoNamesTheThreadsInTheBacktraceAndTheHistory) {
  int sig = 0;
  // worker-two spins 1 s of CPU time in spin_b, then dereferences NULL;
  // worker-one spins in spin_a throughout; main waits in pthread_join.
  pid_t pid = Crash("names", &sig, 1000);
  ASSERT_EQ(sig, SIGSEGV);
  nlohmann::json crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << "no crash listed for pid " << pid << "\n" << daemon_->Log();
  const std::string id = crash["id"];
  auto info = daemon_->Cli({"crash", "info", id, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  const auto& threads = j["backtrace"]["threads"];
  ASSERT_EQ(threads.size(), 3u) << j["backtrace"].dump();
  // Each backtrace thread carries its name, and the name goes with its own
  // stack: worker-two crashed in crash_here under spin_b's caller, worker-one
  // was in spin_a, the main thread (the process's name) in pthread_join.
  EXPECT_EQ(threads[0]["tid"], crash["global_tid"]);
  EXPECT_EQ(threads[0]["comm"], "worker-two") << threads[0].dump();
  EXPECT_TRUE(Has(FrameNames(threads[0]), "crash_here")) << threads[0].dump();
  EXPECT_TRUE(Has(FrameNames(threads[0]), "named_main")) << threads[0].dump();
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& t : threads) by_name[t.value("comm", "")] = t;
  ASSERT_EQ(by_name.count("worker-one"), 1u) << j["backtrace"].dump();
  ASSERT_EQ(by_name.count("fr_crash"), 1u) << j["backtrace"].dump();
  EXPECT_TRUE(Has(FrameNames(by_name["worker-one"]), "named_main")) << j["backtrace"].dump();
  EXPECT_FALSE(Has(FrameNames(by_name["worker-one"]), "spin_b")) << j["backtrace"].dump();
  EXPECT_TRUE(Has(FrameNames(by_name["fr_crash"]), "main")) << j["backtrace"].dump();
  EXPECT_FALSE(Has(FrameNames(by_name["fr_crash"]), "named_main")) << j["backtrace"].dump();
  // The metadata's names (read from /proc at the crash) agree, tid by tid.
  std::map<int, std::string> meta;
  for (const auto& t : j["metadata"]["threads"]) meta[t["tid"]] = t["comm"];
  for (const auto& t : threads) EXPECT_EQ(meta[t["tid"].get<int>()], t["comm"]) << t.dump();

  // History: the crashing thread's samples, named after it (from the
  // samples' own comm, not the process's), busy in spin_b.
  ASSERT_FALSE(j["history"].is_null()) << info.out;
  const auto& h = j["history"];
  EXPECT_EQ(h["tid"], crash["global_tid"]);
  EXPECT_EQ(h["comm"], "worker-two") << h.dump();
  EXPECT_GT(h["samples"].get<uint64_t>(), 20u) << h.dump();
  EXPECT_EQ(h["top"][0]["function"], "spin_b") << h.dump();
  // The history record itself names both workers' samples (report --sort
  // comm on it, the process's samples), with the crashing tid's under
  // worker-two.
  auto rep = daemon_->Cli({"report", h["id"].get<std::string>(), "--pid", std::to_string(pid),
                           "--sort", "comm", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rows = SelfByKey(rep.out);
  EXPECT_GE(rows["worker-one"], 20u) << rep.out;
  EXPECT_GE(rows["worker-two"], 20u) << rep.out;

  // Text form: each backtrace thread's header names it, the crashed one
  // first; the history line names the thread.
  auto text = daemon_->Cli({"crash", "info", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto tid_of = [&](const std::string& n) {
    return std::to_string(by_name[n]["tid"].get<int>());
  };
  EXPECT_NE(text.out.find("  thread " + tid_of("worker-two") + " worker-two (crashed):\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  thread " + tid_of("worker-one") + " worker-one:\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  thread " + tid_of("fr_crash") + " fr_crash:\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(" samples of thread " + tid_of("worker-two") + " (worker-two) in the "),
            std::string::npos)
      << text.out;
}

TEST_F(CoredumpTest, CrashListFiltersByNewestTimePidAndExecutable) {
  int sig = 0;
  const std::string exe = fs::canonical(BuildPath("tests/programs/fr_crash")).string();
  pid_t a = Crash("segv", &sig, 0);
  auto ca = WaitForCrash(a);
  ASSERT_FALSE(ca.is_null());
  // --since: 1 ms after a was stored, so before b (which crashes after).
  const std::string since_arg =
      fmt::format("@{:.6f}", (ca["created_ns"].get<int64_t>() + 1'000'000) / 1e9);
  pid_t b = Crash("fpe", &sig, 0);
  auto cb = WaitForCrash(b);
  ASSERT_FALSE(cb.is_null());
  auto list = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"crash", "list"});
    auto r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  auto pids = [](const std::string& json) {
    std::set<pid_t> out;
    for (const auto& c : nlohmann::json::parse(json)) out.insert(c["pid"].get<pid_t>());
    return out;
  };
  auto all = pids(list({"--json"}).out);
  EXPECT_TRUE(all.count(a) && all.count(b));
  EXPECT_EQ(pids(list({"--pid", std::to_string(a), "--json"}).out), std::set<pid_t>{a});
  auto newest = nlohmann::json::parse(list({"-1", "--json"}).out);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0]["id"], cb["id"]);
  auto since = pids(list({"--since", since_arg, "--json"}).out);
  EXPECT_TRUE(since.count(b));
  EXPECT_FALSE(since.count(a));
  EXPECT_EQ(pids(list({"--exe", exe, "--json"}).out).count(a), 1u);
  EXPECT_TRUE(pids(list({"--exe", "/no/such/exe", "--json"}).out).empty());
  // The JSON rows carry what the table shows.
  auto row = nlohmann::json::parse(list({"--pid", std::to_string(b), "--json"}).out)[0];
  EXPECT_EQ(row["signal_name"], "SIGFPE");
  EXPECT_EQ(row["exe"], exe);
  EXPECT_GT(row["stored_bytes"].get<uint64_t>(), 0u);
  // Table form: a header and b's row.
  auto table = list({"--pid", std::to_string(b)}).out;
  EXPECT_NE(table.find("SIGFPE"), std::string::npos) << table;
  EXPECT_NE(table.find(cb["id"].get<std::string>()), std::string::npos) << table;
  EXPECT_NE(list({"--pid", "1"}).out.find("(no crashes)"), std::string::npos);
  auto bad = daemon_->Cli({"crash", "list", "--since", "yesterday-ish"});
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace flightrec::testing
